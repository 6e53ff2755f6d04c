"""Follow a log file like `tail -F`, exactly once: bytes in, complete lines out. Pure I/O.

    f = Follower("/var/log/dpm/log")          # from_end=True: only lines written from now on
    while running:
        for line in f.poll_once():              # complete lines, bytes, without the b"\\n"
            source.feed(line)
        if not f.pending:
            time.sleep(0.2)
    saved = f.checkpoint()                      # JSON-safe: where the consumed lines end
    f = Follower("/var/log/dpm/log", resume=saved)   # after a restart: carries on from there

Polling (no inotify), so a test drives it deterministically by calling poll_once().

Which file is "the same": by its content, as the registries of Filebeat and fluent-bit do
(a fingerprint), not by its size, nor by device and inode alone (a rotated file's inode
is soon reused by a new one). The follower keeps the first HEAD_BYTES bytes of the file
it reads and the last WINDOW_BYTES before its offset. Each poll compares the 64 bytes
before the offset and the first bytes with the file; when they differ or the file is
shorter than the offset, the file was cut, and the longest run of whole lines that still
equals what was read says where (`kept`):
- kept == 0: the content was replaced from its first byte (copytruncate). The unread
  tail is then read from the rotated copy: a file matching `rotated` (globs next to the
  file, `{name}` the file's name; plain preferred, else gzip; newest first) whose first
  bytes equal ours and that reaches our offset, from there to its end; a gzip that ends
  early (still being written) is looked for again for COPY_WAIT_S. Then the truncated
  file from offset 0. Without a copy, what was not yet read is lost: counted in
  `copies_missing` and said in `notices`.
- 0 < kept: truncated to a smaller size (and maybe written again): the kept bytes are not
  read again; reading goes on at `kept`. Lines already handed out past `kept` were read
  once and are not taken back. A cut deeper than WINDOW_BYTES below the offset cannot be
  placed exactly: reading resumes at the window's start (or the new end, if sooner),
  `unplaced_cuts` counts it and `notices` says it.
Rotation by rename (or delete and re-create): the old descriptor is read to its end
first, then the new file from offset 0. If the file was rotated again before that (a
slow poll behind a fast writer), the rotated files modified after the old one are read
whole first, oldest first (by mtime, as logrotate's numbering and gzip keep them).

A checkpoint is the offset of the end of the last complete line handed out, with the
first bytes of the file, up to SAVED_WINDOW bytes before the offset, and the file's device
and inode. On resume, if another file is at the path and the one read before (the same
device, inode and first bytes: identity and fingerprint together, as an inode alone is
soon reused) lies next to it under a rotated name, it was rotated while we were stopped,
whatever the new file holds: it is finished from the offset, then the files rotated after
it, then the file at the path from its start. Otherwise the file at the path is compared
with the saved bytes: the same content (grown or not) resumes at the offset; a cut
resumes as above; other content is a rotation, the old file looked for by its first bytes.
The file at the path is never taken for a rotated file under another of its names (a
symlink swapped to log-2, or a hard link, matches {name}-*): it would be read twice.

A FIFO is read as a stream: no offset, no rotation, nothing to resume; following, it is
opened without waiting for a writer and read from each writer in turn; with until_eof
(`run --once`) it waits for a writer and ends when the writers close it. Devices and
sockets are not followed (`error` says why).

Only complete lines are returned; a partial last line waits for its newline. The writer of
a rotated-away file will never finish it, so a partial line left there is returned as it
is (the parser counts it as malformed; nothing is dropped silently).
Bounds: a line longer than CUT_BYTES (parsers.lines.MAX_LINE_BYTES + 1) is handed on cut to
that length, the rest skipped as it is read (never buffered), so the parser counts it as ONE
malformed line (longer than MAX_LINE_BYTES) at its place. A run of NUL
bytes (the hole a crashed writer leaves) ends the line before it, is skipped and handed on
as one short NUL line (one malformed line); the line after it is read on its own.
Limits: lines written after logrotate's copy and before its truncation are lost by
copytruncate itself; a writer that keeps appending to a renamed file after we switched
(no HUP/reopen) is not read. The DPM daemons open, append and close per line.
"""

from __future__ import annotations

import base64
import errno
import fnmatch
import gzip
import os
import stat
import time
import zlib
from collections import deque
from typing import BinaryIO, Callable, Iterator

from dpmstream.streams.linecut import CUT_BYTES, NEWLINE, LineCutter

TAIL_BYTES = 64          # checked at every poll: the bytes just before the offset
HEAD_BYTES = 1024        # the file's fingerprint: its first bytes
WINDOW_BYTES = 1 << 20   # bytes before the offset kept to place a cut exactly
SAVED_WINDOW = 1 << 13   # of which a checkpoint keeps this much (a cut while stopped):
                         # small, as the registry is written every second
DEFAULT_ROTATED = ("{name}.1", "{name}.1.gz", "{name}-*")
CANDIDATES = 8           # newest rotated files looked at
COPY_WAIT_S = 10.0       # how long a copy that ends early is looked for again


class Follower:
    """One followed path. Not thread-safe; call poll_once() from one thread."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        from_end: bool = False,
        resume: dict | None = None,
        rotated: tuple[str, ...] | list[str] = DEFAULT_ROTATED,
        read_size: int = 1 << 16,
        max_poll_bytes: int = 1 << 22,
        max_line_bytes: int = CUT_BYTES,
        until_eof: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.until_eof = until_eof  # a FIFO: wait for a writer, read until it closes
        self.is_stream = False      # a FIFO: no offsets, no rotation, read as it comes
        self.from_end = from_end
        self.rotated = tuple(rotated)
        self.read_size = read_size
        self.max_poll_bytes = max_poll_bytes
        self.max_line_bytes = max_line_bytes
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self.offset = 0            # bytes consumed from the content being read
        self._lines = LineCutter(max_line_bytes)  # the line under way: bounds, NUL runs
        self._tail = b""            # the last TAIL_BYTES bytes before self.offset
        self._head = b""            # the first HEAD_BYTES bytes of the content
        self._window: deque[bytes] = deque()  # chunks ending at self.offset
        self._window_len = 0
        self._backlog: BinaryIO | None = None  # a rotated copy finished before the file
        self._backlog_name: str | None = None
        self._copy_wait_until: float | None = None  # a copy ended early: looking again
        self._copy_error = ""
        self._backlog_mtime: int | None = None
        self._resume = resume
        self.resumed = resume is not None  # carries on from a restart: it was read before
        self._skip_existing = from_end and resume is None
        self._budget_hit = False
        self.pending = False        # the last poll stopped at its byte budget
        # Counters for status lines and tests.
        self.opens = 0
        self.rotations = 0
        self.truncations = 0        # content replaced from its first byte
        self.shrinks = 0            # cut to a smaller, non-zero size
        self.copies_read = 0        # rotated copies whose unread tail was read
        self.copies_missing = 0     # truncated or rotated away, and no copy found
        self.unplaced_cuts = 0      # cuts deeper than the window
        self.partials_flushed = 0   # partial lines returned without their newline
        self.mtime_ms: int | None = None  # mtime of the file when it was (last) opened
        self.error: str | None = None     # why an existing path cannot be read, if so
        self.notices: list[str] = []      # what happened to the file, for the driver's log

    # -- public -----------------------------------------------------------------------

    @property
    def oversized(self) -> int:
        """Lines longer than max_line_bytes, cut to it."""
        return self._lines.oversized

    @property
    def nul_blocks(self) -> int:
        """Runs of NUL bytes skipped."""
        return self._lines.nul_blocks

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    @property
    def waiting_for_copy(self) -> bool:
        """A rotated copy that ended early is looked for again (its unread part is due)."""
        return self._copy_wait_until is not None

    def open(self) -> None:
        """Open the file now if it is there, as the next poll would, reading nothing."""
        if self._fd is None and self._backlog is None and self._copy_wait_until is None:
            out: list[bytes] = []
            self._open(out)
            assert not out, "opening hands out no line"
            if self._fd is None:
                self._skip_existing = False

    @property
    def consumed(self) -> int:
        """Offset of the end of the last complete line handed out."""
        return self.offset - len(self._lines.partial)

    def poll_once(self) -> list[bytes]:
        """Complete lines that became available since the last call (maybe none)."""
        out: list[bytes] = []
        self.pending = False
        budget = self.max_poll_bytes
        if self._copy_wait_until is not None and self._retry_copy(out):
            return out
        if self._backlog is not None:
            budget -= self._read_backlog(out, budget)
            if self._backlog is not None:
                self.pending = True
                return out
        if self._fd is None and not self._open(out):
            self._skip_existing = False
            return out
        if self._backlog is not None:  # resumed into a rotated copy
            self.pending = True
            return out
        if self.is_stream:
            self._read(out, budget)
            self.pending = self._budget_hit
            return out
        current = self._stat_path()
        if current is not None and self._same_file(current) and self._cut(current):
            self._after_cut(out)
            if self._backlog is not None:
                self.pending = True
                return out
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
            old = os.fstat(self._fd)
            self._close_fd()
            # Rotated again before we got here (a slow poll behind a fast writer): the
            # files rotated in between hold the next lines, oldest first.
            newer = self._newer_rotated(old.st_mtime_ns, (old.st_dev, old.st_ino), self._head)
            if self._open(out):
                if newer is not None:
                    self._start_chain(newer, None)
                    self.pending = True
                    return out
                self._read(out, budget)
                self.pending = self._budget_hit
            elif newer is not None:
                newer[0].close()
        return out

    def checkpoint(self) -> dict | None:
        """Where the lines handed out end, with the fingerprint to find the file again.
        None before anything was opened (a resume then starts as a first start would),
        and for a FIFO (what was read from it is gone: nothing to resume)."""
        if self.is_stream:
            return None
        if self._fd is None and self._backlog is None:
            if self._resume is not None or self.opens == 0:
                return self._resume  # not reopened yet: the saved position still stands
            return {"offset": 0, "head": "", "window": "", "skip_to_newline": False,
                    "copy": None}  # rotated away, the new file not there yet
        end = self.consumed
        window = self._window_bytes()
        if self._lines.partial:
            window = window[: max(0, len(window) - len(self._lines.partial))]
        window = window[-SAVED_WINDOW:]
        ident = None if self._backlog is not None else self._ident
        return {"offset": end, "head": _b64(self._head[:end]), "window": _b64(window),
                "ident": list(ident) if ident else None,
                "skip_to_newline": self._lines.skip_to_newline, "in_nuls": self._lines.in_nuls,
                "copy": self._backlog_name}

    def flush_partial(self) -> bytes | None:
        """The buffered partial last line, removed from the buffer (end of a --once read)."""
        out: list[bytes] = []
        self._flush_partial(out)
        return out[0] if out else None

    def close(self) -> None:
        self._close_fd()
        self._close_backlog()

    def __enter__(self) -> "Follower":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Follower({self.path!r}, offset={self.offset}, open={self.is_open})"

    # -- opening ------------------------------------------------------------------------

    def _open(self, out: list[bytes]) -> bool:
        flags = os.O_RDONLY | os.O_CLOEXEC
        try:
            # A FIFO opened blocking waits for a writer: only --once wants that (it reads
            # until the writers close it); following, it is opened without waiting.
            if not (self.until_eof and stat.S_ISFIFO(os.stat(self.path).st_mode)):
                flags |= os.O_NONBLOCK
            fd = os.open(self.path, flags)
        except OSError as exc:
            # Missing: wait for it. Unreadable: also wait (permissions get fixed, a
            # directory gets replaced), but say why in `error` for the driver to log.
            self.error = None if exc.errno in (errno.ENOENT, errno.ENOTDIR) else (
                exc.strerror or str(exc))
            return False
        st = os.fstat(fd)
        why = not_followable(st.st_mode)
        if why is not None:
            os.close(fd)
            self.error = why
            return False
        self.is_stream = stat.S_ISFIFO(st.st_mode)
        if self.is_stream:
            os.set_blocking(fd, self.until_eof)
            self._resume = None  # a pipe has no offsets to go back to
            self._skip_existing = False
        self.error = None
        self._fd = fd
        self._ident = (st.st_dev, st.st_ino)
        self.mtime_ms = st.st_mtime_ns // 1_000_000
        self.opens += 1
        self._reset_content(0)
        self._lines.start_afresh()
        if self._resume is not None:
            saved, self._resume = self._resume, None
            self._resume_from(saved, st.st_size, out)
        elif self._skip_existing and st.st_size > 0:
            # Only a file present at the first poll is skipped: a file that appears later
            # (created, or replacing a rotated one) holds new lines from its first byte.
            # Start after the last complete line: the rest of a half-written last line
            # belongs to the part we were asked to skip.
            self._seek_known(st.st_size)
            self._lines.skip_to_newline = not self._tail.endswith(NEWLINE)
        self._skip_existing = False
        return True

    def _resume_from(self, saved: dict, size: int, out: list[bytes]) -> None:
        offset, head = int(saved["offset"]), _unb64(saved["head"])
        window = _unb64(saved["window"])
        ident = tuple(saved["ident"]) if saved.get("ident") else None
        if ident is not None and ident != self._ident:
            # Another file at the path, and the one read before still next to it (same
            # device, inode and first bytes): rotated while we were stopped, whatever the
            # new file's first bytes are. Its unread part first, then the new file.
            copy = self._open_copy(head, offset, ident=ident)
            if copy is not None:
                self._start_backlog(copy, head, window, offset)
                return
        kept = _kept(self._fd, size, head, window, offset)
        if kept == offset:
            self._seek_known(offset)
            self._lines.skip_to_newline = bool(saved.get("skip_to_newline"))
            self._lines.in_nuls = bool(saved.get("in_nuls"))
            return
        if kept != 0:
            self.shrinks += 1
            if kept < 0:
                self.unplaced_cuts += 1
                kept = min(offset - len(window), size)
            self.notices.append(f"{self.path} was cut to {kept} bytes while stopped "
                                f"(read up to {offset}); reading on from there")
            self._seek_known(kept)
            return
        # Other content: rotated (renamed, or copied and truncated) while we were stopped.
        copy = self._open_copy(head, offset)
        if copy is not None:
            self._start_backlog(copy, head, window, offset)
            return
        self.copies_missing += 1
        self.notices.append(f"{self.path}: the file read before the stop was not found "
                            f"(no rotated file starts with its bytes); reading the file "
                            f"at the path from its start")

    def _seek_known(self, offset: int) -> None:
        """Position at `offset` of the open file, whose bytes up to it count as read."""
        start = max(0, offset - WINDOW_BYTES)
        data = os.pread(self._fd, offset - start, start) if offset > start else b""
        self._reset_content(offset)
        if data:
            self._window.append(data)
            self._window_len = len(data)
            self._tail = data[-TAIL_BYTES:]
        self._head = os.pread(self._fd, min(offset, HEAD_BYTES), 0)
        os.lseek(self._fd, offset, os.SEEK_SET)

    def _reset_content(self, offset: int) -> None:
        self.offset = offset
        self._tail = b""
        self._head = b""
        self._window.clear()
        self._window_len = 0

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

    # -- cuts: truncation and copytruncate ------------------------------------------------

    def _cut(self, st: os.stat_result) -> bool:
        if self.offset == 0:
            return False
        if st.st_size < self.offset:
            return True
        # Cut and written again past our offset between two polls: the size cannot tell,
        # the content can. The 64 bytes before the offset may be the end of a common
        # message at the same place again (lines of even length); the first bytes carry
        # the first lines' millisecond stamps.
        tail, head = self._tail, self._head
        if tail and os.pread(self._fd, len(tail), self.offset - len(tail)) != tail:
            return True
        return bool(head) and os.pread(self._fd, len(head), 0) != head

    def _after_cut(self, out: list[bytes]) -> None:
        size = os.fstat(self._fd).st_size
        window = self._window_bytes()
        kept = _kept(self._fd, size, self._head, window, self.offset)
        if kept < 0:  # deeper than the window: the best place we can tell
            kept = min(self.offset - len(window), size)
            self.unplaced_cuts += 1
            self.notices.append(f"{self.path} was cut more than {len(window)} bytes "
                                f"below the offset; reading on at byte {kept}")
        if kept == 0:
            self.truncations += 1
            copy = self._open_copy(self._head, self.consumed)
            if copy is not None:
                # The copy holds our partial line in full: it is read from there again.
                read = window[: max(0, len(window) - len(self._lines.partial))]
                self._start_backlog(copy, self._head, read, self.consumed)
                self._lines.partial = b""
                return
            self._flush_partial(out)
            self.copies_missing += 1
            self.notices.append(f"{self.path} was truncated and no rotated copy starts with "
                                f"its bytes: lines written since the last read are lost")
            self._lines.start_afresh()
            self._reset_content(0)
            os.lseek(self._fd, 0, os.SEEK_SET)
            return
        self.shrinks += 1
        consumed = self.consumed
        self._lines.partial = self._lines.partial[: kept - consumed] if kept >= consumed else b""
        self._lines.start_afresh()
        self._seek_known(kept)
        self.offset = kept  # the kept part of a partial line is still in _partial

    def _open_copy(self, head: bytes, offset: int,
                   ident: tuple[int, int] | None = None) -> tuple[BinaryIO, str] | None:
        """The rotated file that starts with `head`, opened at `offset`: plain copies
        first (a .gz may still be being written beside its plain original), newest first."""
        if not head:
            return None
        for full in self._candidates(ident=ident):
            fh = None
            try:
                fh = _open_maybe_gzip(full)
                if fh.read(len(head)) == head:
                    fh.seek(offset)
                    if fh.tell() == offset and (isinstance(fh, gzip.GzipFile)
                                                or os.fstat(fh.fileno()).st_size >= offset):
                        return fh, full
            except (OSError, EOFError, zlib.error):
                pass  # unreadable, or a gzip not yet complete: not this one
            if fh is not None:
                fh.close()
        return None

    def _newer_rotated(self, since: int, skip_ident: tuple[int, int] | None,
                       head: bytes = b"") -> tuple[BinaryIO, str, int] | None:
        """The oldest rotated file modified after `since` (ns) that is neither the file
        just read (`skip_ident`) nor another copy of it (the same first bytes, e.g. its
        .gz), opened at 0, with its mtime."""
        newer = []
        for full in self._candidates(limit=None):
            try:
                st = os.stat(full)
            except OSError:
                continue
            if st.st_mtime_ns > since and (st.st_dev, st.st_ino) != skip_ident:
                newer.append((st.st_mtime_ns, full))
        for mtime, full in sorted(newer):
            fh = None
            try:
                fh = _open_maybe_gzip(full)
                if not head or fh.read(len(head)) != head:
                    fh.seek(0)
                    return fh, full, mtime
            except (OSError, EOFError, zlib.error):
                pass
            if fh is not None:
                fh.close()
        return None

    def _start_chain(self, newer: tuple[BinaryIO, str, int], after: str | None) -> None:
        self._backlog, self._backlog_name, self._backlog_mtime = newer
        self._reset_content(0)
        self._lines.start_afresh()
        self.copies_read += 1
        self.notices.append(f"{self.path}: reading {self._backlog_name} whole, rotated after "
                            f"{after or 'the file read before'}")

    def _candidates(self, limit: int | None = CANDIDATES,
                    ident: tuple[int, int] | None = None) -> list[str]:
        """Rotated files next to the path (plain first, newest first); only the one that
        is `ident` (device, inode) if given. Never the file at the path itself, under
        whatever name it also has (a symlink's target, another hard link: `log` -> log-2
        matches {name}-*, and reading it as rotated too would read it twice)."""
        folder, name = os.path.split(self.path)
        current = self._stat_path()
        at_path = None if current is None else (current.st_dev, current.st_ino)
        seen: dict[str, tuple[bool, float]] = {}
        for pattern in self.rotated:
            glob = os.path.join(folder, pattern.replace("{name}", name))
            gdir, gname = os.path.split(glob)
            try:
                entries = os.listdir(gdir or ".")
            except OSError:
                continue
            for entry in fnmatch.filter(entries, gname):
                full = os.path.join(gdir, entry)
                if os.path.abspath(full) == os.path.abspath(self.path):
                    continue
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                this = (st.st_dev, st.st_ino)
                if stat.S_ISREG(st.st_mode) and this != at_path and ident in (None, this):
                    seen[full] = (not entry.endswith(".gz"), st.st_mtime)
        return sorted(seen, key=seen.get, reverse=True)[:limit]

    def _start_backlog(self, copy: tuple[BinaryIO, str], head: bytes, window: bytes,
                       offset: int) -> None:
        self._backlog, self._backlog_name = copy
        try:
            self._backlog_mtime = os.stat(self._backlog_name).st_mtime_ns
        except OSError:
            self._backlog_mtime = None
        self.copies_read += 1
        self.offset = offset
        self._head = head
        self._window.clear()
        self._window.append(window)
        self._window_len = len(window)
        self._tail = window[-TAIL_BYTES:]
        self.notices.append(f"{self.path} was rotated by copy; reading its unread part "
                            f"from {self._backlog_name} first")

    def _read_backlog(self, out: list[bytes], budget: int) -> int:
        total = 0
        fh = self._backlog
        while total < budget:
            try:
                chunk = fh.read(min(self.read_size, budget - total))
            except (OSError, EOFError, zlib.error) as exc:
                # A gzip copy cut short: being written still, or damaged. Look again at
                # the next polls (its finished version), for COPY_WAIT_S at most.
                self._close_backlog()
                self._copy_wait_until = time.monotonic() + COPY_WAIT_S
                self._copy_error = str(exc)
                return total
            if not chunk:
                self._end_backlog(out)
                return total
            total += len(chunk)
            self._took(chunk)
            self._lines.split(chunk, out)
        return total

    def _retry_copy(self, out: list[bytes]) -> bool:
        """After a copy ended early: True while still waiting for a readable one."""
        copy = self._open_copy(self._head, self.offset)
        if copy is not None:
            self._copy_wait_until = None
            self._backlog, self._backlog_name = copy
            return False
        if time.monotonic() < self._copy_wait_until:
            return True
        self._copy_wait_until = None
        self.copies_missing += 1
        self.notices.append(f"{self.path}: the rotated copy ends early ({self._copy_error}) "
                            f"and no whole one appeared; going on with the file")
        self._end_backlog(out)
        return False

    def _end_backlog(self, out: list[bytes]) -> None:
        self._flush_partial(out)
        finished, head, since = self._backlog_name, self._head, self._backlog_mtime
        self._close_backlog()
        self._reset_content(0)
        try:
            since = os.stat(finished).st_mtime_ns
        except (OSError, TypeError):
            pass  # compressed and removed since: the mtime taken when it was opened
        newer = self._newer_rotated(since, None, head) if since is not None else None
        if newer is not None:
            # Rotated more than once while we were stopped (or behind): the files
            # rotated after the one just finished hold the next lines, oldest first.
            self._start_chain(newer, finished)
            return
        # The file at the path holds new content from its first byte.
        self._lines.start_afresh()
        if self._fd is not None:
            os.lseek(self._fd, 0, os.SEEK_SET)

    def _close_backlog(self) -> None:
        if self._backlog is not None:
            self._backlog.close()
        self._backlog = self._backlog_name = None

    # -- reading --------------------------------------------------------------------------

    def _read(self, out: list[bytes], budget: int) -> int:
        """Read the open file up to its current end (or the budget); return bytes read."""
        total = 0
        self._budget_hit = False
        while total < budget:
            try:
                chunk = os.read(self._fd, min(self.read_size, budget - total))
            except BlockingIOError:
                return total  # a FIFO with a writer and nothing written yet
            if not chunk:
                return total
            total += len(chunk)
            self._took(chunk)
            self._lines.split(chunk, out)
        self._budget_hit = True
        return total

    def _took(self, chunk: bytes) -> None:
        """Account for `chunk`, read at self.offset: offset, head, window, tail."""
        if len(self._head) < HEAD_BYTES and self.offset == len(self._head):
            self._head += chunk[: HEAD_BYTES - len(self._head)]
        self.offset += len(chunk)
        self._tail = (self._tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]
        window = self._window
        window.append(chunk)
        self._window_len += len(chunk)
        while self._window_len - len(window[0]) >= WINDOW_BYTES:
            self._window_len -= len(window.popleft())

    def _window_bytes(self) -> bytes:
        data = b"".join(self._window)
        return data[-WINDOW_BYTES:]

    def _flush_partial(self, out: list[bytes]) -> None:
        if self._lines.partial:
            out.append(self._lines.partial)
            self._lines.partial = b""
            self.partials_flushed += 1


def not_followable(mode: int) -> str | None:
    """Why a file of this st_mode is not followed (None: a regular file or a FIFO)."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    kind = ("a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return f"is {kind}, not a log file (regular files and FIFOs are read)"


def _kept(fd: int, size: int, head: bytes, window: bytes, offset: int) -> int:
    """How many leading bytes of the file at `fd` still equal what was read up to `offset`
    (known: `head` at 0 and `window` ending at `offset`): `offset` if all of them; -1 if
    the difference lies between the head and the window, where it cannot be placed.

    A cut is placed after the last whole line that is still the same: new lines written
    at the cut begin with a stamp that often shares its first bytes with the line cut
    away, which a byte comparison would count as kept."""
    start = offset - len(window)
    if window:
        now = os.pread(fd, len(window), start) if size > start else b""
        same = _common_prefix(now, window)
        if same == len(window):
            return offset
        if same > 0 or start == 0:
            line_end = window.rfind(NEWLINE, 0, same) + 1
            if line_end or start == 0:
                return start + line_end
    same = _common_prefix(os.pread(fd, len(head), 0), head)
    if same < len(head):
        return head.rfind(NEWLINE, 0, same) + 1
    return start if start <= len(head) else -1


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _open_maybe_gzip(path: str) -> BinaryIO:
    fh = open(path, "rb")
    if fh.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


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
