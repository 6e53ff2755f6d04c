"""Opening archived inputs: plain, gzip or bzip2 (by their magic bytes), a FIFO, or `-` for
stdin. An input is opened once (open_once): the head read to recognise it is fed again
from memory, so a .gz decompresses it once and a FIFO or stdin replays whole."""

from __future__ import annotations

import io
import os
import stat
import sys
from itertools import islice
from collections.abc import Iterator

from dpmstream.parsers import extension
from dpmstream.parsers.plain import Value

# The fingerprint's digest: BLAKE2b, CPython's own (hashlib.blake2b is this one), not
# hashlib's SHA-256: importing hashlib loads OpenSSL's libcrypto, ~11 M instructions of
# every replay's start-up (issue 30), ~3% of a two-line replay's; the digest is only
# compared within the process (replay_files: the same content named twice).
try:
    from _blake2 import blake2b as _digest
except ImportError:  # an interpreter without CPython's module
    from hashlib import blake2b as _digest
from dpmstream.streams.linecut import CUT_BYTES, LineCutter

TYPE_CHECKING = False   # typing.TYPE_CHECKING; typing's import was ~11 M instructions of replay's start-up (issue 30)
if TYPE_CHECKING:
    from typing import BinaryIO

_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"


class InputError(OSError):
    pass


class Input(Value):
    """One input named on the command line: a file (compressed or not), a pipe or stdin."""

    __slots__ = FIELDS = ("name", "path", "size", "mtime_ms", "fifo")

    def __init__(self, name: str, path: str | None, size: int | None, mtime_ms: int | None,
                 fifo: bool = False):
        self.name = name          # as given on the command line
        self.path = path          # None for stdin
        self.size = size          # bytes on disk (compressed size for archives; None: a FIFO)
        self.mtime_ms = mtime_ms
        self.fifo = fifo          # a named pipe: its content can be read once

    @property
    def is_stdin(self) -> bool:
        return self.path is None

    @property
    def once(self) -> bool:
        """Whether its content can be read only once (stdin, a FIFO)."""
        return self.path is None or self.fifo


def describe(name: str) -> Input:
    if name == "-":
        return Input("-", None, None, None)
    try:
        st = os.stat(name)
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror}") from exc
    if stat.S_ISFIFO(st.st_mode):  # `replay <(zcat a.gz)`, a named pipe
        return Input(name, name, None, None, fifo=True)
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
    # The decompressors imported for the inputs that need them, not at every start-up.
    if peek[:2] == _GZIP_MAGIC:
        import gzip  # noqa: PLC0415
        return gzip.GzipFile(fileobj=raw), raw
    if peek == _BZIP2_MAGIC:
        import bz2  # noqa: PLC0415
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
    LineSplitter = extension.compiled("LineSplitter")
    if LineSplitter is not None:
        yield from _blocks(_texts(stream), size, LineSplitter(size))
    else:
        yield from _lists(_texts(stream), size)


def _texts(stream: BinaryIO) -> Iterator[list]:
    """The input as texts of whole lines, each line with its line break (the last text's
    last line may lack it), a read of about READ_HINT bytes each, cut by LineCutter; each
    text as the buffers it is made of (LineCutter.whole_parts), which the reader joins
    (lists) or splits as they are (blocks): a copy of the input at most, not one a step."""
    lines = LineCutter()
    while True:
        data, error = _read(stream)
        parts = lines.whole_parts(data) if data else []
        if parts:
            yield parts
        if error is not None:  # the lines before the damage came out; a cut one is lost
            raise InputError(f"input ends early: {error}") from error
        if not data:
            break
    rest = lines.flush()
    if rest:
        yield [rest]


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


def _lists(texts: Iterator[list], size: int) -> Iterator[list[bytes]]:
    """iter_chunks as lists of bytes lines, split in C (a Python step per line was a tenth
    of the compiled replay's time)."""
    pending: list[bytes] = []
    carried = 0  # bytes of the lines in pending, as far as known
    try:
        for parts in texts:
            text = b"".join(parts)
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


def _blocks(texts: Iterator[list], size: int, splitter) -> Iterator:
    """iter_chunks as the extension's LineBlocks: each text split without a bytes object
    per line (sequences of bytes lines, as the lists are) by `splitter` (LineSplitter), which
    keeps the block not yet full, its lines found and the buffers they lie in held, until
    a later text completes it: a block spans reads without its lines being copied, or
    found again, at each read."""
    try:
        for parts in texts:
            yield from splitter.split(parts)
            if splitter.carried() > CARRY_BYTES:
                yield from splitter.finish()
    except InputError:
        # the whole lines before the damage
        yield from splitter.finish()
        raise
    yield from splitter.finish()


def _slices(lines: list[bytes], size: int, end: int) -> Iterator[list[bytes]]:
    """lines[:end] in lists of `size` (the last one shorter)."""
    for at in range(0, end, size):
        yield lines[at:at + size]


FINGERPRINT_BYTES = 65536
HEAD_LINES = 200          # the first lines an input's daemon is recognised by (lanes.py)
HEAD_LIMIT = 1 << 20      # bytes of head read at most for them (a file of long lines)


def fingerprint(inp: Input) -> bytes | None:
    """A digest of the first 64 KiB of the decompressed content (None for stdin, a FIFO or
    an empty file): two inputs that share it begin with the same lines."""
    if inp.once:
        return None
    opened = open_once(inp)
    opened.close()
    return opened.fingerprint


class OpenedInput:
    """An input opened once: its head read (`first_lines`, by which its daemon is
    recognised, and `fingerprint`), then `stream` gives the head again from memory and the
    rest from where the head ended (`raw`: the file, whose tell() measures progress). An
    error met reading the head comes out of `stream` after the head's bytes, as it would
    have from the file.

    release() closes a file whose turn has not come (open files and heads held are
    bounded: replay_files.HELD_INPUTS); stream_again() then opens it anew, its head read
    a second time. stdin and FIFOs are never released."""

    def __init__(self, inp: Input):
        self.inp = inp
        rest, self.raw = open_binary(inp)
        head, error = _read_head(rest)
        self.fingerprint = None
        if head and not inp.once and (error is None or len(head) >= FINGERPRINT_BYTES):
            self.fingerprint = _digest(head[:FINGERPRINT_BYTES]).digest()
        self.first_lines = list(islice(iter_lines(io.BytesIO(head)), HEAD_LINES))
        self.stream: BinaryIO | None = io.BufferedReader(_Rewound(head, rest, error), READ_HINT)

    def release(self) -> None:
        if not self.inp.once and self.stream is not None:
            self.close()

    def stream_again(self) -> BinaryIO:
        """The stream to read: the one opened, or after release() a new one."""
        if self.stream is None:
            self.stream, self.raw = open_binary(self.inp)
        return self.stream

    def close(self) -> None:
        if self.stream is not None and not self.inp.is_stdin:
            self.stream.close()
            self.raw.close()
        self.stream = None


def open_once(inp: Input) -> OpenedInput:
    """The input opened and its head read (OSError when it cannot be opened)."""
    return OpenedInput(inp)


def _read_head(stream: BinaryIO) -> tuple[bytes, Exception | None]:
    """The first FINGERPRINT_BYTES and HEAD_LINES lines (HEAD_LIMIT bytes at most) of the
    decompressed content, and the error that stopped the reading, if any."""
    pieces: list[bytes] = []
    got = lines = 0
    try:
        while got < HEAD_LIMIT and (got < FINGERPRINT_BYTES or lines < HEAD_LINES):
            piece = stream.read1(min(FINGERPRINT_BYTES, HEAD_LIMIT - got))
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
            lines += piece.count(b"\n")
    except (EOFError, OSError, ValueError) as exc:  # truncated archive: fed up to there
        return b"".join(pieces), exc
    return b"".join(pieces), None


class _Rewound(io.RawIOBase):
    """`head`, then `rest` (the stream it was read from), then nothing; a read error met
    while the head was read is raised once the head's bytes are out."""

    def __init__(self, head: bytes, rest: BinaryIO, error: Exception | None):
        self._head, self._at = memoryview(head), 0
        self._rest, self._error = rest, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._at < len(self._head):
            n = min(len(buffer), len(self._head) - self._at)
            buffer[:n] = self._head[self._at:self._at + n]
            self._at += n
            return n
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        # read1: a damaged archive's bytes decompressed before the damage come out first;
        # readinto1 reads a plain file straight into `buffer` (no bytes object to copy).
        return self._rest.readinto1(buffer)

    def close(self) -> None:
        if not self.closed:
            self._head = memoryview(b"")
            if self._rest is not sys.stdin.buffer:
                self._rest.close()
        super().close()


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
