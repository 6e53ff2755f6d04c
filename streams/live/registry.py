"""The registry of `dpmstream run --state FILE`: where each followed file was read to, and
the reassembly state that goes with it, saved together so a restart resumes exactly.

    reg = Registry("/var/lib/dpmstream/run.state")
    saved = reg.load()          # None on the first start; RegistryError if unreadable
    reg.save({...})             # atomically: temporary file, fsync, rename, fsync the folder

One JSON document. A crash during save() leaves the previous document in place (rename is
atomic), never a half-written one. Readable only by its owner: it holds the first and last
bytes read of each log, which may carry user DNs.
"""

from __future__ import annotations

import json
import os

VERSION = 1


class RegistryError(Exception):
    pass


class Registry:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.saves = 0

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
        data = dict(data, version=VERSION)
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        tmp = f"{self.path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                     0o600)
        try:
            payload = json.dumps(data, separators=(",", ":")).encode()
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)
        self.saves += 1
