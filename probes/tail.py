"""Bounded reading of a log's tail: the probe's only file I/O.

Three guarantees, whatever the file holds (a 100 MB log, NULs, no newline at all):
- only regular files are read (a FIFO or a device such as /dev/zero has no end to seek
  from, and opening is non-blocking, so a FIFO with no writer cannot hang the probe);
- memory is one block plus one line of at most `max_line` bytes: longer lines are
  skipped and counted, never accumulated;
- the deadline (time.monotonic()) is checked between blocks, so `-t` holds.

The window's start is found by reading backwards from the end, block by block, until a
line old enough is passed; the lines are then read forwards from there up to the size
the file had when it was opened (a log growing meanwhile cannot keep the probe reading).
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Callable, Iterator

BLOCK = 1 << 20          # bytes read at a time, backwards and forwards
MAX_LINE = 64 * 1024     # longer "lines" are not DPM lines (parsers/lines.py agrees)


class TailError(OSError):
    """The file cannot be read as a log (not a regular file, unreadable)."""


class DeadlineExceeded(TimeoutError):
    """The time budget ran out; the message says how far the reading got."""


@dataclass
class TailStats:
    """What reading the tail did: for -v, the status line and the tests."""

    size: int = 0               # the file's size when opened: nothing after it is read
    start: int = 0              # offset of the first line read forwards
    bytes_scanned_back: int = 0
    lines_read: int = 0
    long_lines: int = 0         # lines over max_line bytes read forwards: skipped, counted
    long_lines_back: int = 0    # the same, met while looking for the window's start
    partial_last_line: bool = False  # bytes after the last newline (being written): left


def open_log(path: str):
    """A binary file object for a regular file; TailError with the reason otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TailError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise TailError(f"{path} is {_kind(mode)}, not a regular file: --log reads a log "
                            f"file from its end")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def _check(deadline: float | None, what: Callable[[], str]) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise DeadlineExceeded(what())


def whole_lines_end(fh, size: int, stats: TailStats, *, deadline: float | None = None,
                    block: int = BLOCK) -> int:
    """The offset just after the file's last newline (0 if it has none). Bytes after it
    are a line still being written: left for the next check."""
    pos = size
    while pos > 0:
        _check(deadline, lambda: f"read {_mib(size - pos)} backwards from the end of "
                                 f"{_mib(size)} without finding a newline")
        n = min(block, pos)
        pos -= n
        fh.seek(pos)
        data = _read_exactly(fh, n)
        stats.bytes_scanned_back += n
        nl = data.rfind(b"\n")
        if nl >= 0:
            end = pos + nl + 1
            stats.partial_last_line = end < size
            return end
    stats.partial_last_line = size > 0
    return 0


class Block:
    """Whole lines read backwards: `lines` in file order, the first starting at byte
    `offset`; a line over the bound is an int, its length (skipped, counted, its bytes
    not kept). Offsets are worked out only for the block where the window starts."""

    __slots__ = ("offset", "lines")

    def __init__(self, offset: int, lines: list):
        self.offset = offset
        self.lines = lines

    def backwards(self) -> list[tuple[int, bytes]]:
        """[(offset, line)] last first, long lines left out."""
        out, offset = [], self.offset
        for line in self.lines:
            if isinstance(line, int):
                offset += line + 1
                continue
            out.append((offset, line))
            offset += len(line) + 1
        out.reverse()
        return out


def lines_backwards(fh, end: int, stats: TailStats, **kw) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of the whole lines before `end`, last first."""
    for blk in blocks_backwards(fh, end, stats, **kw):
        yield from blk.backwards()


def blocks_backwards(fh, end: int, stats: TailStats, *, deadline: float | None = None,
                     max_line: int = MAX_LINE, block: int = BLOCK) -> Iterator[Block]:
    """The whole lines before `end` (a line end, see whole_lines_end), a block at a time,
    last block first. Lines longer than `max_line` are skipped and counted in
    stats.long_lines_back; at most one block and one line are held."""
    pos = end
    carry = b""    # the start of the line cut at the previous block's first byte
    long_seen = 0  # > 0: that line is over max_line; this many of its bytes seen, not kept
    first_block = True
    while pos > 0:
        _check(deadline, lambda: f"read {_mib(stats.bytes_scanned_back)} backwards from "
                                 f"the end of {_mib(stats.size)} looking for the window's start")
        n = min(block, pos)
        pos -= n
        fh.seek(pos)
        data = _read_exactly(fh, n)
        stats.bytes_scanned_back += n
        if first_block:
            data = data[:-1]  # the file's last newline ends the last line
            first_block = False
        pieces = data.split(b"\n")
        if long_seen and len(pieces) == 1:
            long_seen += len(data)
            continue  # the whole block lies inside the long line
        # pieces[0] may be cut at pos; the last piece continues the carried line.
        first = pieces[0]
        lines = pieces[1:]
        if long_seen:
            lines[-1] = len(lines[-1]) + long_seen
            stats.long_lines_back += 1
            long_lines = max(map(len, lines[:-1]), default=0) > max_line
        else:
            if carry:
                if lines:
                    lines[-1] += carry
                else:
                    first += carry
            long_lines = bool(lines) and max(map(len, lines)) > max_line
        if long_lines:
            for i, line in enumerate(lines):
                if not isinstance(line, int) and len(line) > max_line:
                    stats.long_lines_back += 1
                    lines[i] = len(line)
        if lines:
            yield Block(pos + len(first) + 1, lines)
        if len(first) > max_line:
            carry, long_seen = b"", len(first)
        else:
            carry, long_seen = first, 0
    if long_seen:
        stats.long_lines_back += 1
    elif carry or end > 0:
        yield Block(0, [carry])


def lines_forwards(fh, start: int, end: int, stats: TailStats, **kw) -> Iterator[bytes]:
    """The whole lines between `start` (a line start) and `end`, without newlines."""
    for lines in blocks_forwards(fh, start, end, stats, **kw):
        yield from lines


def blocks_forwards(fh, start: int, end: int, stats: TailStats, *, deadline: float | None = None,
                    max_line: int = MAX_LINE, block: int = BLOCK) -> Iterator[list[bytes]]:
    """The whole lines between `start` (a line start) and `end`, without newlines, a
    block at a time (the caller's loop stays tight); lines over `max_line` bytes are
    skipped and counted."""
    fh.seek(start)
    pos = start
    carry = b""
    carry_long = False
    while pos < end:
        _check(deadline, lambda: f"read {_mib(pos - start)} of the {_mib(end - start)} "
                                 f"holding the window")
        data = _read_exactly(fh, min(block, end - pos))
        if not data:
            break  # truncated meanwhile: what was there is all there is
        pos += len(data)
        lines = data.split(b"\n")
        last = lines.pop()
        if lines:
            if carry_long or len(carry) + len(lines[0]) > max_line:
                lines[0] = None
            elif carry:
                lines[0] = carry + lines[0]
            if lines[0] is None or max(map(len, lines)) > max_line:
                kept = [line for line in lines if line is not None and len(line) <= max_line]
                stats.long_lines += len(lines) - len(kept)
                lines = kept
            stats.lines_read += len(lines)
            carry, carry_long = b"", False
            yield lines
        if carry_long or len(carry) + len(last) > max_line:
            carry, carry_long = b"", True
        else:
            carry += last
    if carry or carry_long:
        stats.partial_last_line = True


def _read_exactly(fh, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        chunk = fh.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def next_line_start(fh, pos: int, end: int, block: int = 64 * 1024) -> int:
    """The offset of the first line starting after byte `pos` (`end` if none does)."""
    while pos < end:
        fh.seek(pos)
        data = _read_exactly(fh, min(block, end - pos))
        if not data:
            break
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(data)
    return end


def mib(n: int) -> str:
    """A size for people: 140.0 MiB, 1.1 GiB."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else _mib(n)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
