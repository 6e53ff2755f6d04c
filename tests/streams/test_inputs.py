"""streams/inputs.py: opening archived inputs by their magic bytes, reading them in lines
and chunks, and recognising an input read before."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import os
import random
import sys
import types

import pytest

from dpmstream.parsers import extension
from dpmstream.streams import inputs as inputs_module
from dpmstream.streams.linecut import CUT_BYTES, NUL_BLOCK
from dpmstream.streams.inputs import (
    FINGERPRINT_BYTES, HEAD_LINES, Input, InputError, describe, fingerprint, iter_chunks,
    iter_lines, open_binary, open_once, repeated_prefix,
)

TEXT = b"08/12 10:00:00 1,1 f: one\n08/12 10:00:01 1,1 f: two\n08/12 10:00:02 1,1 f: three\n"


def write(tmp_path, name: str, data: bytes) -> Input:
    path = tmp_path / name
    path.write_bytes(data)
    return describe(str(path))


def read_all(inp: Input) -> bytes:
    stream, raw = open_binary(inp)
    try:
        return stream.read()
    finally:
        stream.close()
        raw.close()


def fake_stdin(monkeypatch, data: bytes) -> None:
    buffer = io.BufferedReader(io.BytesIO(data))  # has peek(), like the real stdin
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=buffer))


# -- describe -----------------------------------------------------------------------------

def test_describe_gives_name_path_size_and_mtime_in_ms(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"12345")
    os.utime(path, (1_313_143_200.5, 1_313_143_200.5))
    inp = describe(str(path))
    assert inp == Input(str(path), str(path), 5, 1_313_143_200_500)
    assert not inp.is_stdin


def test_dash_is_stdin_with_nothing_known_about_it():
    inp = describe("-")
    assert inp == Input("-", None, None, None)
    assert inp.is_stdin


def test_a_missing_file_is_an_input_error_naming_it(tmp_path):
    missing = str(tmp_path / "gone.log")
    with pytest.raises(InputError, match=r"gone\.log: No such file or directory"):
        describe(missing)


def test_a_directory_is_not_an_input(tmp_path):
    with pytest.raises(InputError, match="not a regular file"):
        describe(str(tmp_path))


def test_an_input_error_is_an_os_error():
    # Callers that report unreadable files catch OSError.
    assert issubclass(InputError, OSError)


# -- open_binary --------------------------------------------------------------------------

def test_a_plain_file_is_read_as_it_is(tmp_path):
    assert read_all(write(tmp_path, "log", TEXT)) == TEXT


def test_a_gzip_file_is_decompressed_whatever_its_name(tmp_path):
    assert read_all(write(tmp_path, "log.1", gzip.compress(TEXT))) == TEXT


def test_a_bzip2_file_is_decompressed_whatever_its_name(tmp_path):
    assert read_all(write(tmp_path, "log.gz", bz2.compress(TEXT))) == TEXT


def test_a_plain_file_named_gz_is_read_as_plain(tmp_path):
    assert read_all(write(tmp_path, "log.gz", TEXT)) == TEXT


def test_a_plain_file_starting_like_half_a_magic_is_read_as_plain(tmp_path):
    assert read_all(write(tmp_path, "log", b"\x1f" + TEXT)) == b"\x1f" + TEXT
    assert read_all(write(tmp_path, "log2", b"BZ" + TEXT)) == b"BZ" + TEXT


def test_the_raw_file_measures_compressed_progress(tmp_path):
    data = gzip.compress(TEXT * 100)
    stream, raw = open_binary(write(tmp_path, "log.gz", data))
    stream.read()
    assert raw.tell() == len(data)
    stream.close()
    raw.close()


def test_an_empty_file_opens_and_reads_nothing(tmp_path):
    assert read_all(write(tmp_path, "empty", b"")) == b""


def test_stdin_is_read_through_its_buffer(monkeypatch):
    fake_stdin(monkeypatch, TEXT)
    stream, raw = open_binary(describe("-"))
    assert stream.read() == TEXT


def test_gzip_on_stdin_is_decompressed(monkeypatch):
    fake_stdin(monkeypatch, gzip.compress(TEXT))
    stream, _ = open_binary(describe("-"))
    assert stream.read() == TEXT


# -- iter_lines and iter_chunks -----------------------------------------------------------

def test_iter_lines_gives_every_line_as_bytes_with_its_newline(tmp_path):
    stream, raw = open_binary(write(tmp_path, "log", TEXT + b"no newline at the end"))
    assert list(iter_lines(stream)) == [
        b"08/12 10:00:00 1,1 f: one\n", b"08/12 10:00:01 1,1 f: two\n",
        b"08/12 10:00:02 1,1 f: three\n", b"no newline at the end"]
    raw.close()


def test_iter_chunks_groups_lines_by_the_given_size():
    stream = io.BytesIO(b"".join(b"%d\n" % i for i in range(7)))
    assert list(iter_chunks(stream, 3)) == [
        [b"0\n", b"1\n", b"2\n"], [b"3\n", b"4\n", b"5\n"], [b"6\n"]]


def test_iter_chunks_of_an_exact_multiple_yields_no_empty_chunk():
    stream = io.BytesIO(b"a\nb\nc\nd\n")
    assert list(iter_chunks(stream, 2)) == [[b"a\n", b"b\n"], [b"c\n", b"d\n"]]


def test_iter_chunks_of_an_empty_input_yields_nothing():
    assert list(iter_chunks(io.BytesIO(b""), 2)) == []


def test_a_truncated_gzip_keeps_the_lines_before_the_damage_then_raises(tmp_path):
    lines = [b"line %05d\n" % i for i in range(5000)]
    data = gzip.compress(b"".join(lines))
    stream, raw = open_binary(write(tmp_path, "cut.gz", data[: len(data) - 20]))
    got = []
    with pytest.raises(InputError, match="input ends early"):
        for chunk in iter_chunks(stream, 10_000):  # one chunk, cut short by the damage
            got.extend(chunk)
    raw.close()
    assert len(got) > 4000  # the readable part came out ...
    assert got == lines[: len(got)]  # ... in order and unchanged


def test_a_truncated_bzip2_raises_an_input_error_not_eof(tmp_path):
    data = bz2.compress(TEXT * 50)
    stream, raw = open_binary(write(tmp_path, "cut.bz2", data[: len(data) // 2]))
    with pytest.raises(InputError):
        list(iter_lines(stream))
    raw.close()


# -- blocks of lines (the extension's LineBlock) -------------------------------------------

LineBlock = extension.compiled("LineBlock")   # the extension's, or None
needs_blocks = pytest.mark.skipif(LineBlock is None, reason="extension not built")

AWKWARD = (b"first\n" + b"\n" + b"crlf\r\n" + b"x" * 3000 + b"\n" + b"\xfe\xff binary\n"
           + b"".join(b"line %d\n" % i for i in range(50)) + b"no newline at the end")


class Pipe(io.BytesIO):
    """Bytes that cannot be sought back in, as from a pipe."""

    def seekable(self):
        return False

    def seek(self, *args):
        raise io.UnsupportedOperation("seek")


def chunks_as_lists(data: bytes, size: int, pure: bool, monkeypatch, stream=io.BytesIO):
    monkeypatch.setattr(inputs_module, "READ_HINT", 64)   # many reads, lines across them
    if pure:
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    return [list(chunk) for chunk in iter_chunks(stream(data), size)]


@needs_blocks
@pytest.mark.parametrize("stream", [io.BytesIO, Pipe], ids=["file, re-read", "pipe, joined"])
@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("data", [AWKWARD, AWKWARD + b"\n", b"", b"\n", b"one"])
def test_blocks_hold_the_lines_and_chunks_readlines_gives(data, size, stream, monkeypatch):
    """A line cut by a read is read again with the next one (a file) or joined to it (a
    pipe, or a line longer than a read): either way the lines come out whole, once."""
    want = chunks_as_lists(data, size, True, monkeypatch)
    assert [type(c) for c in iter_chunks(io.BytesIO(data), size)] == [list] * len(want)
    got = chunks_as_lists(data, size, False, monkeypatch, stream)
    assert got == want
    assert b"".join(line for chunk in got for line in chunk) == data


@needs_blocks
def test_a_block_is_a_sequence_of_bytes_lines_like_a_list():
    (block,), rest = LineBlock.split(b"a\nbb\nccc\nd", 10, True)
    lines = [b"a\n", b"bb\n", b"ccc\n", b"d"]
    assert rest == len(b"a\nbb\nccc\nd")
    assert len(block) == 4 and list(block) == lines and block == lines
    assert [block[i] for i in (0, 3, -1, -4)] == [lines[i] for i in (0, 3, -1, -4)]
    for s in (slice(1, 3), slice(2, None), slice(None, -1), slice(5, 9), slice(None, None, -2)):
        assert block[s] == lines[s]
    with pytest.raises(IndexError):
        block[4]
    with pytest.raises(IndexError):
        block[-5]


@needs_blocks
def test_without_the_end_an_unfinished_line_is_left_for_the_next_read():
    blocks, rest = LineBlock.split(b"a\nb\nc\npart", 2, False)
    assert [list(b) for b in blocks] == [[b"a\n", b"b\n"]]
    assert rest == 4   # c and the unfinished line: fewer than a chunk, read again with more


class FailingDisk(io.RawIOBase):
    """A plain file whose disk fails after `good` bytes."""

    def __init__(self, data: bytes, good: int):
        self.data, self.good, self.at = data, good, 0

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.at >= self.good:
            raise OSError(5, "Input/output error")
        n = min(len(buffer), self.good - self.at)
        buffer[:n] = self.data[self.at:self.at + n]
        self.at += n
        return n


@pytest.mark.parametrize("pure", [pytest.param(True, id="pure"),
                                  pytest.param(False, id="blocks", marks=needs_blocks)])
def test_a_read_error_keeps_every_whole_line_read_before_it(pure, monkeypatch):
    monkeypatch.setattr(inputs_module, "READ_HINT", 100)
    if pure:
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    lines = [b"line %05d\n" % i for i in range(100)]
    stream = io.BufferedReader(FailingDisk(b"".join(lines), 555), buffer_size=64)
    got = []
    with pytest.raises(InputError, match="input ends early"):
        for chunk in iter_chunks(stream, 7):
            got.extend(chunk)
    # 555 bytes are read before the disk fails, the bytes of the read cut by the error
    # included: 50 whole lines of 11 bytes, and the 51st, cut, is not a line.
    assert got == lines[:50]


# -- long lines and NUL runs (streams/linecut's rule, the follower's) -------------------

ENGINES = [pytest.param(True, id="pure"),
           pytest.param(False, id="blocks", marks=needs_blocks)]
SOURCES = {"plain": io.BytesIO, "pipe": Pipe,   # compressed: as piped to stdin
           "gzip": lambda data: gzip.GzipFile(fileobj=Pipe(gzip.compress(data))),
           "bzip2": lambda data: bz2.BZ2File(Pipe(bz2.compress(data)))}


def lines_chunks(data: bytes, source: str, pure: bool, monkeypatch, read_hint=4096, size=7):
    monkeypatch.setattr(inputs_module, "READ_HINT", read_hint)
    if pure:
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    chunks = list(iter_chunks(SOURCES[source](data), size))
    assert all(type(c) is list for c in chunks) == pure
    return chunks


def lines_read(data: bytes, source: str, pure: bool, monkeypatch, read_hint=4096):
    chunks = lines_chunks(data, source, pure, monkeypatch, read_hint)
    return [line for chunk in chunks for line in chunk]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("pure", ENGINES)
def test_a_line_longer_than_the_bound_is_one_cut_line_and_its_neighbours_are_whole(
        source, pure, monkeypatch):
    long = b"x" * (CUT_BYTES * 5 + 123)  # across many reads of 4 KiB
    data = b"before\n" + long + b"\nafter\n" + long  # the last one without its newline
    assert lines_read(data, source, pure, monkeypatch) == [
        b"before\n", b"x" * CUT_BYTES + b"\n", b"after\n", b"x" * CUT_BYTES + b"\n"]


@pytest.mark.parametrize("pure", ENGINES)
def test_a_long_line_within_one_read_is_handed_on_whole_as_one_line(pure, monkeypatch):
    long = b"y" * (CUT_BYTES + 10)  # the parser judges it: not worth a copy to cut it
    got = lines_read(b"a\n" + long + b"\nb\n", "plain", pure, monkeypatch, read_hint=1 << 20)
    assert got == [b"a\n", long + b"\n", b"b\n"]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("pure", ENGINES)
def test_a_run_of_nuls_is_one_nul_line_and_the_next_line_is_not_glued_to_it(
        source, pure, monkeypatch):
    # A crashed writer: a line cut short, a hole, the next writes; a hole with its own
    # line break; a NUL inside a line.
    data = (b"one\nhalf" + b"\0" * 100_000 + b"next\n" + b"\0" * 10 + b"\nlast\n"
            + b"in\0side\n")
    assert lines_read(data, source, pure, monkeypatch) == [
        b"one\n", b"half\n", NUL_BLOCK + b"\n", b"next\n", NUL_BLOCK + b"\n", b"last\n",
        b"in\n", NUL_BLOCK + b"\n", b"side\n"]


@pytest.mark.parametrize("pure", ENGINES)
def test_chunks_of_long_lines_end_early_so_what_is_carried_stays_bounded(pure, monkeypatch):
    monkeypatch.setattr(inputs_module, "CARRY_BYTES", 10_000)
    lines = [b"%05d" % i + b"z" * 3000 + b"\n" for i in range(40)]
    monkeypatch.setattr(inputs_module, "READ_HINT", 4096)
    if pure:
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    chunks = [list(c) for c in iter_chunks(io.BytesIO(b"".join(lines)), 1000)]
    assert [line for c in chunks for line in c] == lines
    assert max(sum(map(len, c)) for c in chunks) <= 10_000 + 2 * 4096 + 3006


def awkward_lines(seed: int) -> bytes:
    """Up to 400 lines of 0 to 900 bytes (empty ones, some longer than the small reads),
    the last one sometimes without its newline: blocks start and end anywhere in a read."""
    rng = random.Random(seed)
    lines = [b"" if rng.random() < 0.05 else
             b"%d" % i + b"w" * rng.choice([0, 1, 5, 40, 90, 300]) * rng.randint(0, 3)
             for i in range(rng.randint(0, 400))]
    return b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")


@needs_blocks
@pytest.mark.parametrize("source", ["plain", "pipe", "gzip"])
@pytest.mark.parametrize("read_hint,size,carry", [
    (1, 3, 10_000), (7, 1, 10_000), (64, 5, 500), (333, 512, 2_000), (4096, 7, 1_000),
    (4096, 512, 1 << 21)])
@pytest.mark.parametrize("seed", range(4))
def test_blocks_end_where_the_lists_end_on_awkward_sizes(seed, read_hint, size, carry,
                                                          source, monkeypatch):
    """The blocks (split by the extension from the reads' buffers, a block across reads
    copied once) hold the lines the pure lists hold, chunk for chunk: report's time marks
    hang on where its chunks end. Small CARRY_BYTES: chunks of long lines ending early."""
    data = awkward_lines(seed)
    monkeypatch.setattr(inputs_module, "CARRY_BYTES", carry)
    want = [list(c) for c in lines_chunks(data, source, True, monkeypatch, read_hint, size)]
    got = [list(c) for c in lines_chunks(data, source, False, monkeypatch, read_hint, size)]
    assert got == want
    assert b"".join(line for chunk in got for line in chunk) == data


LineSplitter = extension.compiled("LineSplitter")


def split_in_turn(pieces: list, size: int) -> tuple[list[list[bytes]], list[list[bytes]]]:
    """The blocks a LineSplitter gives for each of `pieces` (a list of parts each) given in
    turn, and those its finish() gives at the end."""
    splitter = LineSplitter(size)
    return [[list(b) for b in splitter.split(parts)] for parts in pieces], \
        [list(b) for b in splitter.finish()]


def readlines_in_blocks(text: bytes, size: int) -> list[list[bytes]]:
    lines = io.BytesIO(text).readlines()
    return [lines[at:at + size] for at in range(0, len(lines), size)]


@needs_blocks
@pytest.mark.parametrize("size", [1, 2, 9, 1000])
@pytest.mark.parametrize("seed", range(6))
def test_a_splitter_given_a_text_in_pieces_gives_the_blocks_of_the_text_whole(seed, size):
    """However the text is cut into calls and parts (a line across calls, across parts,
    the last without its newline), the blocks are its lines `size` at a time, each as
    soon as its last line is given, the last one at finish()."""
    rng = random.Random(seed)
    text = awkward_lines(seed + 100)
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 12))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    # bytes, and views into bytes (what a read leaves), one to three pieces a call
    parts = [memoryview(b"<" + p + b">")[1:-1] if i % 2 else p for i, p in enumerate(pieces)]
    calls, at = [], 0
    while at < len(parts):
        n = rng.randint(1, 3)
        calls.append(parts[at:at + n])
        at += n
    given, last = split_in_turn(calls, size)
    want = readlines_in_blocks(text, size)
    assert [b for blocks in given for b in blocks] + last == want
    # a block comes out with the call that gives its last newline
    ends = [sum(map(len, pieces[:sum(map(len, calls[:i + 1]))])) for i in range(len(calls))]
    for i, blocks in enumerate(given):
        full = text[:ends[i]].count(b"\n") // size
        assert len([b for c in given[:i + 1] for b in c]) == full


@needs_blocks
def test_a_block_longer_than_several_reads_is_split_once_and_carried_whole():
    # 10 lines a block, 3 lines a read: each block spans four reads, its lines carried
    lines = [b"line %02d\n" % i for i in range(25)]
    splitter = LineSplitter(10)
    out, carried = [], []
    for at in range(0, 25, 3):
        out.append([list(b) for b in splitter.split([b"".join(lines[at:at + 3])])])
        carried.append(splitter.carried())
    assert [len(o) for o in out] == [0, 0, 0, 1, 0, 0, 1, 0, 0]
    assert out[3] == [lines[:10]] and out[6] == [lines[10:20]]
    # what is carried: the lines of the block not yet full (8 bytes each)
    assert carried == [8 * (min(at + 3, 25) % 10) for at in range(0, 25, 3)]
    assert [list(b) for b in splitter.finish()] == [lines[20:]]
    assert splitter.carried() == 0 and splitter.finish() == []


@needs_blocks
@pytest.mark.parametrize("ending", [b"", b"\r"], ids=["bare", "CR"])
def test_a_last_line_without_its_newline_is_carried_to_finish_as_it_is(ending):
    """CRLF lines keep their \\r (the parser reads it), a line cut between calls is
    joined, and a last line without a newline comes out at finish(), as it is."""
    splitter = LineSplitter(4)
    assert splitter.split([b"a\r\nb", memoryview(b"<\r\nc\r>")[1:-1]]) == []
    assert splitter.split([b"\nlast line" + ending]) == []
    assert splitter.carried() == len(b"a\r\nb\r\nc\r\nlast line" + ending)
    assert [list(b) for b in splitter.finish()] == [
        [b"a\r\n", b"b\r\n", b"c\r\n", b"last line" + ending]]


@needs_blocks
@pytest.mark.parametrize("calls,block,rest", [
    # a CRLF line cut between its CR and its LF
    ([[b"a\r\nb\r"]], [b"a\r\n", b"b\r\n"], [b"c\r\n"]),
    # a line across calls and across the parts of one, an empty part among them
    ([[b"a\ntw"], [b"o", memoryview(b"<o>")[1:-1], b""]], [b"a\n", b"twoo\n"], [b"c\r\n"]),
], ids=["CRLF", "parts"])
def test_a_line_cut_between_calls_is_one_line(calls, block, rest):
    splitter = LineSplitter(2)
    assert all(splitter.split(parts) == [] for parts in calls)
    assert splitter.carried() == sum(map(len, block)) - 1
    assert [list(b) for b in splitter.split([b"\nc\r\n"])] == [block]
    assert [list(b) for b in splitter.finish()] == [rest]


@needs_blocks
def test_a_block_keeps_its_lines_after_the_parts_it_was_split_from_are_gone():
    # a block points into the read buffers rather than copying them: it must hold them,
    # those of earlier calls too (the splitter holds them while the block fills)
    splitter = LineSplitter(3)
    parts = [b"one\ntw", memoryview(b"<o\nthree\nfo>")[1:-1], b"ur\n"]
    first = splitter.split(parts[:1])
    blocks = splitter.split(parts[1:])
    del parts
    blocks += splitter.finish()
    assert first == []
    assert [list(b) for b in blocks] == [[b"one\n", b"two\n", b"three\n"], [b"four\n"]]


@needs_blocks
def test_a_part_that_could_change_under_its_blocks_is_refused():
    with pytest.raises(ValueError, match="read-only"):
        LineSplitter(8).split([b"a\n", memoryview(bytearray(b"b\n"))])


# -- fingerprint --------------------------------------------------------------------------

def test_fingerprint_is_the_blake2b_of_the_decompressed_head(tmp_path):
    inp = write(tmp_path, "log.gz", gzip.compress(TEXT))
    assert fingerprint(inp) == hashlib.blake2b(TEXT).digest()


def test_the_same_content_plain_and_compressed_has_one_fingerprint(tmp_path):
    plain = fingerprint(write(tmp_path, "a", TEXT))
    assert plain == fingerprint(write(tmp_path, "b.gz", gzip.compress(TEXT)))
    assert plain == fingerprint(write(tmp_path, "c.bz2", bz2.compress(TEXT)))


def test_fingerprint_reads_only_the_first_64_kib(tmp_path):
    head = b"x" * FINGERPRINT_BYTES
    assert FINGERPRINT_BYTES == 64 * 1024
    a = fingerprint(write(tmp_path, "a", head + b"tail one\n"))
    b = fingerprint(write(tmp_path, "b", head + b"another tail\n"))
    assert a == b == hashlib.blake2b(head).digest()


def test_different_heads_have_different_fingerprints(tmp_path):
    assert fingerprint(write(tmp_path, "a", b"a\n")) != fingerprint(write(tmp_path, "b", b"b\n"))


def test_an_empty_file_and_stdin_have_no_fingerprint(tmp_path):
    assert fingerprint(write(tmp_path, "empty", b"")) is None
    assert fingerprint(describe("-")) is None


def test_an_unreadable_archive_has_no_fingerprint_rather_than_an_error(tmp_path):
    assert fingerprint(write(tmp_path, "bad.gz", b"\x1f\x8b" + b"\x00" * 5)) is None


# -- opened once: the head recognises the input, then is fed again ------------------------

MANY = b"".join(b"08/12 10:00:00 1,1 f: line %06d\n" % i for i in range(20_000))  # 700 KB


@pytest.mark.parametrize("compress", [None, gzip.compress, bz2.compress])
def test_an_input_opened_once_gives_its_head_then_the_rest_whole(tmp_path, compress):
    inp = write(tmp_path, "log", compress(MANY) if compress else MANY)
    opened = open_once(inp)
    assert opened.first_lines == MANY.splitlines(keepends=True)[:HEAD_LINES]
    assert opened.fingerprint == hashlib.blake2b(MANY[:FINGERPRINT_BYTES]).digest()
    got = b"".join(b"".join(chunk) for chunk in iter_chunks(opened.stream, 1000))
    opened.close()
    assert got == MANY


def test_a_released_input_is_read_again_from_its_start(tmp_path):
    opened = open_once(write(tmp_path, "log.gz", gzip.compress(MANY)))
    opened.release()
    assert opened.stream is None
    stream = opened.stream_again()
    assert stream.read() == MANY
    opened.close()


def test_damage_inside_the_head_comes_after_the_head_s_lines_as_an_input_error(tmp_path):
    data = gzip.compress(TEXT * 100)
    opened = open_once(write(tmp_path, "cut.gz", data[: len(data) - 10]))
    assert opened.first_lines[:3] == TEXT.splitlines(keepends=True)
    assert opened.fingerprint is None     # not a whole head: not compared with others
    got = []
    with pytest.raises(InputError, match="input ends early"):
        for chunk in iter_chunks(opened.stream, 10_000):
            got.extend(chunk)
    opened.close()
    assert got and got == (TEXT * 100).splitlines(keepends=True)[: len(got)]


def test_stdin_opened_once_is_read_whole_and_never_released(monkeypatch):
    fake_stdin(monkeypatch, gzip.compress(MANY))
    opened = open_once(describe("-"))
    opened.release()                      # it cannot be opened again: kept
    assert opened.fingerprint is None
    assert opened.stream_again().read() == MANY


def test_a_fifo_is_an_input_read_once(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    inp = describe(str(path))
    assert inp.fifo and inp.once and not inp.is_stdin and inp.size is None


# -- repeated_prefix ----------------------------------------------------------------------

def test_an_identical_copy_repeats_every_line_and_has_nothing_new(tmp_path):
    earlier = write(tmp_path, "a", TEXT)
    assert repeated_prefix(io.BytesIO(TEXT), earlier) == (3, None)


def test_a_copy_that_differs_gives_the_first_different_line(tmp_path):
    earlier = write(tmp_path, "a", b"1\n2\n3\n")
    stream = io.BytesIO(b"1\n2\nX\n4\n")
    assert repeated_prefix(stream, earlier) == (2, b"X\n")
    assert stream.read() == b"4\n"  # the rest is left to read


def test_a_shorter_copy_repeats_all_its_lines(tmp_path):
    earlier = write(tmp_path, "a", b"1\n2\n3\n")
    assert repeated_prefix(io.BytesIO(b"1\n2\n"), earlier) == (2, None)


def test_a_compressed_earlier_input_is_compared_decompressed(tmp_path):
    earlier = write(tmp_path, "a.gz", gzip.compress(b"1\n2\n"))
    assert repeated_prefix(io.BytesIO(b"1\n2\n"), earlier) == (2, None)


def test_a_longer_copy_gives_its_first_new_line(tmp_path):
    earlier = write(tmp_path, "a", b"1\n2\n")
    stream = io.BytesIO(b"1\n2\n3\n4\n")
    assert repeated_prefix(stream, earlier) == (2, b"3\n")


def test_a_copy_with_a_huge_line_is_compared_on_the_line_s_head_and_read_on_after_it(tmp_path):
    huge = b"h" * (CUT_BYTES * 3) + b"\n"
    earlier = write(tmp_path, "a", b"1\n" + huge + b"2\n")
    stream = io.BytesIO(b"1\n" + huge + b"2\n" + huge + b"4\n")
    # the first new line, cut to the bound as every reader cuts it; the rest is skipped
    assert repeated_prefix(stream, earlier) == (3, b"h" * CUT_BYTES)
    assert stream.read() == b"4\n"
