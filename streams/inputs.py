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
from dpmstream.streams.linecut import CUT_BYTES, LineCutter

try:
    from dpmstream.parsers._native import LineBlock
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


READ_HINT = 1 << 20  # bytes read at once
# Lines carried to the next read to fill a chunk of `size` are at most this many bytes
# (a chunk of long lines ends early), so every buffer here is a few READ_HINTs at most.
CARRY_BYTES = 1 << 21


def iter_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines as bytes; a corrupt compressed tail ends the file with an error, not a crash."""
    for chunk in iter_chunks(stream, 256):
        yield from chunk


def iter_chunks(stream: BinaryIO, size: int = 8192) -> Iterator[list[bytes]]:
    """Lists of `size` lines (the last one shorter, and one of long lines may be); when the
    input ends early, the lines read before the error still come out, then the InputError.

    Lines are cut by streams/linecut's rule, as the live follower cuts them: a line longer
    than CUT_BYTES is one line of at most about a read's length, the rest skipped unread
    into memory; a run of NULs is one NUL_BLOCK line and the line after it its own. So time
    is linear and memory bounded (a few READ_HINTs) whatever the input holds."""
    size = max(size, 1)
    if LineBlock is not None and fastpath.available():
        yield from _blocks(_texts(stream), size)
    else:
        yield from _lists(_texts(stream), size)


def _texts(stream: BinaryIO) -> Iterator[bytes]:
    """The input as texts of whole lines, each line with its line break (the last text's
    last line may lack it), a read of about READ_HINT bytes each, cut by LineCutter."""
    lines = LineCutter()
    while True:
        data, error = _read(stream)
        text = lines.whole(data) if data else b""
        if text:
            yield text
        if error is not None:  # the lines before the damage came out; a cut one is lost
            raise InputError(f"input ends early: {error}") from error
        if not data:
            break
    rest = lines.flush()
    if rest:
        yield rest


def _read(stream: BinaryIO) -> tuple[bytes, Exception | None]:
    """Up to READ_HINT bytes (b"" at the end), and the error that stopped the reading, if
    any: a damaged archive's bytes decompressed before the damage are kept (one read()
    would drop them with the error)."""
    pieces: list[bytes] = []
    got = 0
    try:
        while got < READ_HINT:
            piece = stream.read1(READ_HINT - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
    except (EOFError, OSError, ValueError) as exc:  # truncated .gz / .bz2, a disk error
        return b"".join(pieces), exc
    return (pieces[0] if len(pieces) == 1 else b"".join(pieces)), None


def _lists(texts: Iterator[bytes], size: int) -> Iterator[list[bytes]]:
    """iter_chunks as lists of bytes lines, split in C (a Python step per line was a tenth
    of the compiled replay's time)."""
    pending: list[bytes] = []
    carried = 0  # bytes of the lines in pending, as far as known
    try:
        for text in texts:
            pending += io.BytesIO(text).readlines()
            carried += len(text)
            whole = len(pending) - len(pending) % size
            if whole:
                yield from _slices(pending, size, whole)
                del pending[:whole]
                carried = sum(map(len, pending))
            if carried > CARRY_BYTES:
                yield pending
                pending, carried = [], 0
    except InputError:
        if pending:  # the whole lines before the damage
            yield pending
        raise
    if pending:
        yield pending


def _blocks(texts: Iterator[bytes], size: int) -> Iterator:
    """iter_chunks as the extension's LineBlocks: each text split without a bytes object
    per line (sequences of bytes lines, as the lists are)."""
    rest = b""
    try:
        for text in texts:
            data = rest + text if rest else text
            blocks, at = LineBlock.split(data, size, False)
            yield from blocks
            rest = data[at:]
            if len(rest) > CARRY_BYTES:
                yield from LineBlock.split(rest, size, True)[0]
                rest = b""
    except InputError:
        yield from LineBlock.split(rest, size, True)[0]  # the whole lines before the damage
        raise
    yield from LineBlock.split(rest, size, True)[0]


def _slices(lines: list[bytes], size: int, end: int) -> Iterator[list[bytes]]:
    """lines[:end] in lists of `size` (the last one shorter)."""
    for at in range(0, end, size):
        yield lines[at:at + size]


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
    lines = _bounded_lines(stream)
    try:
        # `other` first: when it ends, zip stops before taking a line of `stream`, so the
        # first new line of a longer copy is still there for next().
        for old, line in zip(_bounded_lines(other), lines):
            if line != old:
                return repeated, line
            repeated += 1
        return repeated, next(lines, None)
    finally:
        other.close()
        raw.close()


def _bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of `stream` read one by one (it is read on from where they end), a line
    longer than CUT_BYTES as its first CUT_BYTES, the rest read past and not held (the
    parser judges it as the whole: one malformed line)."""
    while True:
        line = stream.readline(CUT_BYTES)
        if not line:
            return
        if len(line) == CUT_BYTES and not line.endswith(b"\n"):
            more = line
            while len(more) == CUT_BYTES and not more.endswith(b"\n"):
                more = stream.readline(CUT_BYTES)
        yield line
