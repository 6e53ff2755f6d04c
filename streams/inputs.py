"""Opening archived inputs: plain, gzip or bzip2 (by their magic bytes), or `-` for stdin."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from dpmstream.parsers import fastpath

try:
    from dpmstream.parsers._fastlines import LineBlock
except ImportError:  # not built: lists of lines
    LineBlock = None

_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"


class InputError(OSError):
    pass


@dataclass
class Input:
    name: str            # as given on the command line
    path: str | None     # None for stdin
    size: int | None     # bytes on disk (compressed size for archives)
    mtime_ms: int | None

    @property
    def is_stdin(self) -> bool:
        return self.path is None


def describe(name: str) -> Input:
    if name == "-":
        return Input("-", None, None, None)
    try:
        st = os.stat(name)
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror}") from exc
    if not os.path.isfile(name):
        raise InputError(f"{name}: not a regular file")
    return Input(name, name, st.st_size, int(st.st_mtime * 1000))


def open_binary(inp: Input) -> tuple[BinaryIO, BinaryIO]:
    """(decompressed stream, raw file) — the raw file's tell() measures progress."""
    if inp.is_stdin:
        raw = sys.stdin.buffer
    else:
        raw = open(inp.path, "rb")
    peek = raw.peek(3)[:3] if hasattr(raw, "peek") else b""
    if peek[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw), raw
    if peek == _BZIP2_MAGIC:
        return bz2.BZ2File(raw), raw
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)
    return raw, raw


READ_HINT = 1 << 20  # bytes of lines read at once


def iter_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines as bytes; a corrupt compressed tail ends the file with an error, not a crash."""
    for chunk in iter_chunks(stream, 256):
        yield from chunk


def iter_chunks(stream: BinaryIO, size: int = 8192) -> Iterator[list[bytes]]:
    """Lists of `size` lines (the last one shorter); when the input ends early, the lines
    read before the error still come out, then the InputError."""
    if isinstance(stream, (gzip.GzipFile, bz2.BZ2File)):
        yield from _chunks_line_by_line(stream, size)
        return
    if LineBlock is not None and fastpath.available():
        yield from _blocks(stream, size)
        return
    # A plain file: readlines() splits a megabyte at a time in C (a Python step per line
    # was a tenth of the compiled replay's time). Only compressed input ends early, and a
    # readlines() cut by the damage would lose the lines it had read: those go line by line.
    pending: list[bytes] = []
    while True:
        try:
            more = stream.readlines(READ_HINT)
        except (EOFError, OSError, ValueError) as exc:
            yield from _slices(pending, size, len(pending))
            raise InputError(f"input ends early: {exc}") from exc
        if not more:
            break
        pending += more
        whole = len(pending) - len(pending) % size
        yield from _slices(pending, size, whole)
        del pending[:whole]
    yield from _slices(pending, size, len(pending))


def _blocks(stream: BinaryIO, size: int) -> Iterator:
    """iter_chunks of a plain file as the extension's LineBlocks: a megabyte read at once and
    split without a bytes object per line (sequences of bytes lines, as the lists are)."""
    rest = b""
    # A regular file re-reads its cut last line with the next read: joining it to the next
    # megabyte copied every byte once more. A pipe, or a line longer than a read, joins.
    rewind = _seekable(stream)
    while True:
        try:
            data = stream.read(READ_HINT)
        except (EOFError, OSError, ValueError) as exc:  # the whole lines before it count
            yield from LineBlock.split(rest[:rest.rfind(b"\n") + 1], size, True)[0]
            raise InputError(f"input ends early: {exc}") from exc
        if not data:
            break
        data = rest + data if rest else data
        blocks, at = LineBlock.split(data, size, False)
        yield from blocks
        rest = data[at:]
        if rest and at and rewind:
            stream.seek(-len(rest), io.SEEK_CUR)
            rest = b""
    yield from LineBlock.split(rest, size, True)[0]


def _seekable(stream: BinaryIO) -> bool:
    try:
        return stream.seekable()
    except (OSError, ValueError):
        return False


def _slices(lines: list[bytes], size: int, end: int) -> Iterator[list[bytes]]:
    """lines[:end] in lists of `size` (the last one shorter)."""
    for at in range(0, end, size):
        yield lines[at:at + size]


def _chunks_line_by_line(stream: BinaryIO, size: int) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    append = chunk.append
    try:
        for line in stream:
            append(line)
            if len(chunk) >= size:
                yield chunk
                chunk = []
                append = chunk.append
    except (EOFError, OSError, ValueError) as exc:  # truncated .gz / .bz2
        if chunk:
            yield chunk
        raise InputError(f"input ends early: {exc}") from exc
    if chunk:
        yield chunk


FINGERPRINT_BYTES = 65536


def fingerprint(inp: Input) -> bytes | None:
    """A digest of the first 64 KiB of the decompressed content (None for stdin or an
    empty file): two inputs that share it begin with the same lines."""
    if inp.is_stdin:
        return None
    stream, raw = open_binary(inp)
    try:
        head = stream.read(FINGERPRINT_BYTES)
    except (EOFError, OSError, ValueError):
        return None
    finally:
        stream.close()
        raw.close()
    return hashlib.sha256(head).digest() if head else None


def repeated_prefix(stream: BinaryIO, earlier: Input) -> tuple[int, bytes | None]:
    """Reads `stream` while its lines repeat those of `earlier` (read before, in full):
    (how many lines repeated, the first line that differs, or None at the end)."""
    other, raw = open_binary(earlier)
    repeated = 0
    try:
        # `other` first: when it ends, zip stops before taking a line of `stream`, so the
        # first new line of a longer copy is still there for readline().
        for old, line in zip(other, stream):
            if line != old:
                return repeated, line
            repeated += 1
        return repeated, stream.readline() or None
    finally:
        other.close()
        raw.close()
