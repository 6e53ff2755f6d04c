"""Follow a log file like `tail -F`: bytes in, complete lines out. Pure I/O, no parsing.

    f = Follower("/var/log/dpm/log")          # from_end=True: only lines written from now on
    while running:
        for line in f.poll_once():              # complete lines, bytes, without the b"\\n"
            source.feed(line)
        if not f.pending:
            time.sleep(0.2)

Polling (no inotify), so a test drives it deterministically by calling poll_once().
What one poll does, in order:
- no file open: open the path if it exists (a missing file is waited for, silently);
- the file was truncated (copytruncate): restart at offset 0. Seen by its size below our
  offset, or, when it was refilled past our offset between two polls, by the last bytes
  we read no longer being there;
- read what was appended, up to a byte budget (`pending` says the budget cut it short);
- the path now names another file (rotation by rename, or delete and re-create): the old
  descriptor is read to its end first, then the new file is followed from offset 0.
Only complete lines are returned; a partial last line waits for its newline. The writer of
a truncated or rotated-away file will never finish it, so a partial line left there is
returned as it is (the parser counts it as malformed; nothing is dropped silently).
Limits, as for tail: lines written after the copy and before the truncation are lost by
copytruncate itself; a writer that keeps appending to a renamed file after we switched
(no HUP/reopen) is not read. The DPM daemons open, append and close per line.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Callable, Iterator

NEWLINE = b"\n"
TAIL_BYTES = 64  # last bytes read, kept to notice a file rewritten under our offset


class Follower:
    """One followed path. Not thread-safe; call poll_once() from one thread."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        from_end: bool = False,
        read_size: int = 1 << 16,
        max_poll_bytes: int = 1 << 22,
        max_line_bytes: int = 1 << 20,
    ) -> None:
        self.path = os.fspath(path)
        self.from_end = from_end
        self.read_size = read_size
        self.max_poll_bytes = max_poll_bytes
        self.max_line_bytes = max_line_bytes
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self.offset = 0            # bytes consumed from the open file
        self._partial = b""         # bytes after the last newline
        self._tail = b""            # the last TAIL_BYTES bytes before self.offset
        self._skip_existing = from_end  # only for a file already there at the first poll
        self._skip_to_newline = False
        self._budget_hit = False
        self.pending = False        # the last poll stopped at its byte budget
        # Counters for status lines and tests.
        self.opens = 0
        self.rotations = 0
        self.truncations = 0
        self.partials_flushed = 0   # partial lines returned without their newline
        self.oversized = 0          # lines longer than max_line_bytes, returned in pieces
        self.mtime_ms: int | None = None  # mtime of the file when it was (last) opened
        self.error: str | None = None     # why an existing path cannot be read, if so

    # -- public -----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def poll_once(self) -> list[bytes]:
        """Complete lines that became available since the last call (maybe none)."""
        out: list[bytes] = []
        self.pending = False
        if self._fd is None and not self._open():
            self._skip_existing = False
            return out
        budget = self.max_poll_bytes
        current = self._stat_path()
        if current is not None and self._same_file(current) and self._truncated(current):
            # copytruncate: the writer starts again at 0.
            self._flush_partial(out)
            self.truncations += 1
            self._skip_to_newline = False
            self._tail = b""
            self.offset = 0
            os.lseek(self._fd, 0, os.SEEK_SET)
        budget -= self._read(out, budget)
        if budget <= 0:
            self.pending = True
            return out
        if current is not None and not self._same_file(current):
            # Rotated: whatever was appended to the old file before the switch is read
            # first (at a later poll if the budget runs out), then the new file from 0.
            budget -= self._read(out, budget)
            if budget <= 0:
                self.pending = True
                return out
            self._flush_partial(out)
            self.rotations += 1
            self._close_fd()
            if self._open():
                self._read(out, budget)
                self.pending = self._budget_hit
        return out

    def flush_partial(self) -> bytes | None:
        """The buffered partial last line, removed from the buffer (end of a --once read)."""
        out: list[bytes] = []
        self._flush_partial(out)
        return out[0] if out else None

    def close(self) -> None:
        self._close_fd()

    def __enter__(self) -> "Follower":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Follower({self.path!r}, offset={self.offset}, open={self.is_open})"

    # -- internals --------------------------------------------------------------------

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            # Missing: wait for it. Unreadable: also wait (permissions get fixed, a
            # directory gets replaced), but say why in `error` for the driver to log.
            self.error = None if exc.errno in (errno.ENOENT, errno.ENOTDIR) else (
                exc.strerror or str(exc))
            return False
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            self.error = "is a directory"
            return False
        self.error = None
        self._fd = fd
        self._ident = (st.st_dev, st.st_ino)
        self.mtime_ms = st.st_mtime_ns // 1_000_000
        self.opens += 1
        # Only a file present at the first poll may be skipped: a file that appears later
        # (created, or replacing a rotated one) holds new lines from its first byte.
        self.offset = 0
        self._tail = b""
        self._skip_to_newline = False
        if self._skip_existing and st.st_size > 0:
            # Start after the last complete line: the rest of a half-written last line
            # belongs to the part we were asked to skip.
            start = max(0, st.st_size - TAIL_BYTES)
            os.lseek(fd, start, os.SEEK_SET)
            self._tail = os.read(fd, st.st_size - start)
            self.offset = start + len(self._tail)
            self._skip_to_newline = not self._tail.endswith(NEWLINE)
        self._skip_existing = False
        return True

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._ident = None

    def _stat_path(self) -> os.stat_result | None:
        try:
            return os.stat(self.path)
        except OSError:
            return None  # renamed away and not yet re-created: keep reading the old fd

    def _same_file(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino) == self._ident

    def _truncated(self, st: os.stat_result) -> bool:
        if st.st_size < self.offset:
            return True
        # Truncated and refilled past our offset between two polls: the size cannot tell,
        # the bytes before the offset can (log lines carry millisecond stamps, so the same
        # 64 bytes at the same place again is no realistic coincidence).
        tail = self._tail
        return bool(tail) and os.pread(self._fd, len(tail), self.offset - len(tail)) != tail

    def _read(self, out: list[bytes], budget: int) -> int:
        """Read the open file up to its current end (or the budget); return bytes read."""
        total = 0
        self._budget_hit = False
        while total < budget:
            chunk = os.read(self._fd, min(self.read_size, budget - total))
            if not chunk:
                return total
            total += len(chunk)
            self.offset += len(chunk)
            self._tail = (self._tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]
            self._split(chunk, out)
        self._budget_hit = True
        return total

    def _split(self, chunk: bytes, out: list[bytes]) -> None:
        data = self._partial + chunk if self._partial else chunk
        start = 0
        if self._skip_to_newline:
            end = data.find(NEWLINE)
            if end < 0:
                return
            start = end + 1
            self._skip_to_newline = False
        cap = self.max_line_bytes
        while True:
            end = data.find(NEWLINE, start)
            if end < 0:
                break
            if end - start > cap:
                start = self._pieces(data, start, end, out)
            out.append(data[start:end])
            start = end + 1
        # A "line" with no newline for a megabyte is not a log line (binary file, wrong
        # path): hand it on in pieces of max_line_bytes rather than grow without bound.
        if len(data) - start > cap:
            start = self._pieces(data, start, len(data), out)
        self._partial = data[start:]

    def _pieces(self, data: bytes, start: int, end: int, out: list[bytes]) -> int:
        """Emit whole max_line_bytes pieces of data[start:end]; return where the rest starts."""
        cap = self.max_line_bytes
        while end - start > cap:
            out.append(data[start:start + cap])
            start += cap
            self.oversized += 1
        return start

    def _flush_partial(self, out: list[bytes]) -> None:
        if self._partial:
            out.append(self._partial)
            self._partial = b""
            self.partials_flushed += 1


def follow(
    followers: list[Follower],
    *,
    interval: float = 0.2,
    should_stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], object] = time.sleep,
) -> Iterator[tuple[Follower, list[bytes]]]:
    """Poll every follower in turn, forever (until should_stop()); yield (follower, lines)
    for each poll that returned lines. Sleeps `interval` only when nothing was pending."""
    while not should_stop():
        busy = False
        for f in followers:
            lines = f.poll_once()
            busy = busy or f.pending
            if lines:
                yield f, lines
        if not busy:
            sleep(interval)
