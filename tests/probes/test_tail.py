"""probes/tail.py: whole lines of a file's tail, backwards and forwards, with long lines
skipped and counted, at most a block and a line held, and only regular files opened."""

from __future__ import annotations

import io
import os
import random

import pytest

from dpmstream.probes import tail


def _reference(data: bytes, max_line: int):
    """(offset, line) of the whole lines (a newline ends each), and how many are long."""
    end = data.rfind(b"\n") + 1
    lines, offset = [], 0
    for piece in data[:end].split(b"\n")[:-1] if end else []:
        lines.append((offset, piece))
        offset += len(piece) + 1
    return end, lines


def test_backwards_and_forwards_agree_with_splitting_the_whole_file():
    rnd = random.Random(7)
    for _ in range(1500):
        data = b"".join(bytes(rnd.choice(b"ab\n") for _ in range(rnd.choice([0, 1, 3, 9, 20])))
                        for _ in range(rnd.randint(0, 25)))
        block, max_line = rnd.randint(1, 12), rnd.randint(1, 8)
        fh = io.BytesIO(data)
        stats = tail.TailStats(size=len(data))
        end = tail.whole_lines_end(fh, len(data), stats, block=block)
        ref_end, lines = _reference(data, max_line)
        assert end == ref_end
        assert stats.partial_last_line == (end < len(data))
        short = [(o, line) for o, line in lines if len(line) <= max_line]
        back = list(tail.lines_backwards(fh, end, stats, block=block, max_line=max_line))
        assert back == short[::-1], (data, block, max_line)
        assert stats.long_lines_back == len(lines) - len(short)
        i = rnd.randint(0, len(lines))
        start = lines[i][0] if i < len(lines) else end
        fwd_stats = tail.TailStats()
        fwd = list(tail.lines_forwards(fh, start, end, fwd_stats, block=block, max_line=max_line))
        assert fwd == [line for _, line in lines[i:] if len(line) <= max_line]
        assert fwd_stats.long_lines == sum(1 for _, line in lines[i:] if len(line) > max_line)
        assert fwd_stats.lines_read == len(fwd)


def test_a_line_still_being_written_is_left_for_the_next_check(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"one\ntwo\nthre")
    with tail.open_log(str(log)) as fh:
        stats = tail.TailStats(size=13)
        end = tail.whole_lines_end(fh, 13, stats)
        assert end == 8 and stats.partial_last_line
        assert [line for _, line in tail.lines_backwards(fh, end, stats)] == [b"two", b"one"]


def test_a_file_of_nuls_without_newline_yields_nothing_and_holds_one_block(tmp_path):
    nuls = tmp_path / "nuls"
    with open(nuls, "wb") as fh:
        fh.truncate(64 << 20)  # sparse: 64 MiB of NULs, no newline
    with tail.open_log(str(nuls)) as fh:
        stats = tail.TailStats(size=64 << 20)
        assert tail.whole_lines_end(fh, 64 << 20, stats) == 0
        assert list(tail.lines_backwards(fh, 0, stats)) == []


def test_one_huge_line_among_short_ones_is_skipped_and_counted(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"first\n" + b"x" * (3 * tail.MAX_LINE) + b"\nlast\n")
    with tail.open_log(str(log)) as fh:
        size = os.path.getsize(log)
        stats = tail.TailStats(size=size)
        end = tail.whole_lines_end(fh, size, stats)
        back = [line for _, line in tail.lines_backwards(fh, end, stats, block=4096)]
        assert back == [b"last", b"first"] and stats.long_lines_back == 1
        fwd_stats = tail.TailStats()
        assert list(tail.lines_forwards(fh, 0, end, fwd_stats, block=4096)) == [b"first", b"last"]
        assert fwd_stats.long_lines == 1


def test_the_deadline_stops_reading_with_how_far_it_got(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"line\n" * 1000)
    with tail.open_log(str(log)) as fh:
        stats = tail.TailStats(size=5000)
        with pytest.raises(tail.DeadlineExceeded, match="backwards"):
            list(tail.lines_backwards(fh, 5000, stats, deadline=0.0, block=100))
        with pytest.raises(tail.DeadlineExceeded, match="holding the window"):
            list(tail.lines_forwards(fh, 0, 5000, stats, deadline=0.0, block=100))


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"), ("/", "a directory")])
def test_only_regular_files_are_opened(path, kind):
    with pytest.raises(tail.TailError, match=f"is {kind}, not a regular file"):
        tail.open_log(path)


def test_a_fifo_without_writer_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(tail.TailError, match="is a FIFO"):
        tail.open_log(str(fifo))
