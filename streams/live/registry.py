"""The registry of `dpmstream run --state FILE`: where each followed file was read to, and
the reassembly state that goes with it, saved together so a restart resumes exactly.

    reg = Registry("/var/lib/dpmstream/run.state")
    saved = reg.load()          # None on the first start; RegistryError if unreadable
    reg.save({...})             # atomically: temporary file, fsync, rename, fsync the folder
    reg.lock()                  # one process per state: RegistryError if another holds it

One JSON document. A crash during save() leaves the previous document in place (rename is
atomic), never a half-written one; a save that fails (a full disk) removes its temporary
file and raises RegistryError naming the path and the cause. Readable only by its owner:
it holds the first and last bytes read of each log, which may carry user DNs.

One process at a time: lock() takes an exclusive flock on FILE.lock beside the state and
writes its pid there; a second process on the same state gets RegistryError naming the
holder's pid. The lock goes with the process (however it ends); the lock file stays, empty
of meaning once unlocked (removing it would let a third process lock a file another one
is about to lock).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os

VERSION = 1


class RegistryError(Exception):
    pass


class Registry:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.saves = 0
        self._lock_fd: int | None = None

    @property
    def lock_path(self) -> str:
        return f"{self.path}.lock"

    def lock(self) -> None:
        """Take the state for this process, or raise RegistryError naming who holds it."""
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise RegistryError(f"cannot lock {self.lock_path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RegistryError(
                    f"{self.path} is in use by another dpmstream run (pid {holder}, "
                    f"holding {self.lock_path}); one process per state") from exc
            raise RegistryError(f"cannot lock {self.lock_path}: {exc.strerror or exc}") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def load(self) -> dict | None:
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RegistryError(f"{self.path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise RegistryError(f"{self.path}: not a dpmstream registry ({exc})") from exc
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise RegistryError(f"{self.path}: not a dpmstream registry of version {VERSION}")
        return data

    def save(self, data: dict) -> None:
        """Write `data` atomically; RegistryError (path and cause) if it cannot, with the
        previous document still in place and no temporary file left behind."""
        data = dict(data, version=VERSION)
        folder = os.path.dirname(os.path.abspath(self.path))
        tmp = f"{self.path}.tmp"
        payload = json.dumps(data, separators=(",", ":")).encode()
        try:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # never created, or already gone
            raise RegistryError(f"cannot save the state {self.path}: "
                                f"{exc.strerror or exc}") from exc
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)
        self.saves += 1
