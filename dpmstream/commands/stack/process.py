"""Launching and stopping private daemons: free ports, pid files, readiness polling.

Every service in this package runs detached (own session, output to a log file in its
work dir) and is stopped through its pid file, so a stop never touches a process it did
not start: the pid is checked against the command line it was started with.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class ServiceError(RuntimeError):
    """A service did not start or stop; the message carries the tail of its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path | str, lines: int = 30) -> str:
    """The last lines of a log, for error messages; '' when there is no log."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited child not yet reaped) is not running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class ManagedProcess:
    """One detached process with a pid file and a log file.

    `marker` is a string that must appear in the process's command line for the pid
    file to be trusted (pids are reused; a stale pid file must not kill a stranger).
    """

    def __init__(self, name: str, pid_file: Path, log_file: Path, marker: str,
                 other_logs: Sequence[Path] = ()):
        self.name = name
        self.pid_file = Path(pid_file)
        self.log_file = Path(log_file)
        self.marker = marker
        # Logs the daemon writes itself, shown with its output when it fails.
        self.other_logs = [Path(p) for p in other_logs]
        self._popen: subprocess.Popen | None = None

    def launch(self, argv: Sequence[str], cwd: Path | None = None, env: dict | None = None,
               write_pid: bool = True) -> int:
        """Start argv detached; its stdout and stderr append to the log file."""
        if self.pid() is not None:
            raise ServiceError(f"{self.name} already running (pid {self.pid()}, {self.pid_file})")
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self._popen = subprocess.Popen(
                list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        if write_pid:
            self.write_pid(self._popen.pid)
        return self._popen.pid

    def write_pid(self, pid: int) -> None:
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text(f"{pid}\n")
        tmp.replace(self.pid_file)

    def pid(self) -> int | None:
        """The pid from the pid file if that process is alive and is ours, else None."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        if not pid_alive(pid):
            return None
        cmd = _cmdline(pid)
        if cmd is None or not any(self.marker in part for part in cmd):
            return None
        return pid

    def exited(self) -> int | None:
        """Exit code if the process we launched has ended (None while running/unknown)."""
        if self._popen is not None:
            return self._popen.poll()
        return None

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM, wait, then SIGKILL. True if a process was stopped."""
        pid = self.pid()
        if pid is None:
            self._reap()
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap()
            if not pid_alive(pid):
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            while pid_alive(pid):
                self._reap()
                time.sleep(0.05)
        self._reap()
        self.pid_file.unlink(missing_ok=True)
        return True

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()

    def fail(self, what: str) -> ServiceError:
        """An error naming the service and showing its log's tail."""
        parts = [f"{self.name}: {what}"]
        for log in [self.log_file, *self.other_logs]:
            text = tail(log)
            if text:
                parts.append(f"--- last lines of {log} ---\n{text}")
        return ServiceError("\n".join(parts))

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str,
                   interval: float = 0.1) -> float:
        """Poll `check` until true; fail early if the process exits. Returns seconds taken."""
        start = time.monotonic()
        deadline = start + timeout
        last_error = ""
        while True:
            code = self.exited()
            if code is not None:
                raise self.fail(f"exited with code {code} before {what}")
            try:
                if check():
                    return time.monotonic() - start
            except Exception as exc:  # noqa: BLE001 - a probe failing means "not yet"
                last_error = f" (last probe error: {type(exc).__name__}: {exc})"
            if time.monotonic() > deadline:
                self.stop()
                raise self.fail(f"not {what} after {timeout:.0f} s{last_error}")
            time.sleep(interval)


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll `check` until it is true or the timeout passes; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 - a probe failing means "not yet"
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
