"""streams/live/follow.py: tail -F semantics, driven one poll at a time on real files."""

from __future__ import annotations

import os
import threading
import time

from dpmstream.streams.linecut import NUL_BLOCK
from dpmstream.streams.live.follow import Follower, follow

L1 = b"07/09 16:12:11.803 20713,3 Cns_srv_startsess: returns 0"
L2 = b"07/09 16:12:11.830 20713,3 Cns_srv_statg: NS098 - statg /grid/auger/f1"
L3 = b"07/09 16:12:11.832 20713,3 Cns_srv_statg: returns 0"
L4 = b"07/09 16:12:12.001 20713,4 Cns_srv_stat: returns 2"


def append(path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_reads_existing_content_from_the_start_by_default(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1, L2]
        assert f.poll_once() == []


def test_returns_lines_appended_between_polls(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        append(log, L2 + b"\n" + L3 + b"\n")
        assert f.poll_once() == [L2, L3]
        assert f.offset == log.stat().st_size


def test_from_end_skips_existing_lines_and_returns_only_new_ones(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2 + b"\n")
    with Follower(log, from_end=True) as f:
        assert f.poll_once() == []
        append(log, L3 + b"\n")
        assert f.poll_once() == [L3]


def test_from_end_drops_the_rest_of_a_half_written_last_line_it_was_told_to_skip(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2[:20])
    with Follower(log, from_end=True) as f:
        assert f.poll_once() == []
        append(log, L2[20:] + b"\n" + L3 + b"\n")
        assert f.poll_once() == [L3]


def test_partial_last_line_is_held_until_its_newline_arrives(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2[:10])
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        append(log, L2[10:30])
        assert f.poll_once() == []
        append(log, L2[30:] + b"\n")
        assert f.poll_once() == [L2]
        assert f.partials_flushed == 0


def test_flush_partial_hands_out_an_unterminated_last_line_once(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2)
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        assert f.flush_partial() == L2
        assert f.flush_partial() is None


def test_lines_are_bytes_and_not_decoded(tmp_path):
    log = tmp_path / "log"
    raw = b"07/09 16:12:11.803 20713,3 Cns_srv_statg: NS098 - statg /grid/\xe9t\xe9\xff\n"
    log.write_bytes(raw)
    with Follower(log) as f:
        assert f.poll_once() == [raw[:-1]]


def test_waits_for_a_file_that_does_not_exist_yet(tmp_path):
    log = tmp_path / "log"
    with Follower(log, from_end=True) as f:
        assert f.poll_once() == []
        assert not f.is_open
        log.write_bytes(L1 + b"\n")
        # It appeared after we started: every line in it is new, even with from_end.
        assert f.poll_once() == [L1]
        assert f.is_open


def test_rotation_by_rename_finishes_the_old_file_then_follows_the_new_one(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        append(log, L2 + b"\n")             # written before the rotation, not yet read
        os.rename(log, tmp_path / "log.1")
        append(tmp_path / "log.1", L3 + b"\n")  # a late write into the renamed file
        log.write_bytes(L4 + b"\n")
        assert f.poll_once() == [L2, L3, L4]
        assert f.rotations == 1
        append(log, L1 + b"\n")
        assert f.poll_once() == [L1]


def test_rotation_while_the_path_is_missing_keeps_reading_the_old_file(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        os.rename(log, tmp_path / "log.1")
        append(tmp_path / "log.1", L2 + b"\n")
        assert f.poll_once() == [L2]
        log.write_bytes(L3 + b"\n")
        assert f.poll_once() == [L3]
        assert f.rotations == 1


def test_rotation_returns_the_old_files_unterminated_last_line_rather_than_dropping_it(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2[:15])
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        os.rename(log, tmp_path / "log.1")
        log.write_bytes(L3 + b"\n")
        assert f.poll_once() == [L2[:15], L3]
        assert f.partials_flushed == 1


def test_copytruncate_restarts_at_offset_zero(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1, L2]
        with open(log, "r+b") as fh:        # what logrotate copytruncate does
            fh.truncate(0)
        append(log, L3 + b"\n")
        assert f.poll_once() == [L3]
        assert f.truncations == 1
        assert f.rotations == 0
        append(log, L4 + b"\n")
        assert f.poll_once() == [L4]


def test_a_byte_budget_splits_a_large_backlog_across_polls_without_losing_lines(tmp_path):
    log = tmp_path / "log"
    lines = [b"%05d " % i + L2 for i in range(500)]
    log.write_bytes(b"".join(x + b"\n" for x in lines))
    got = []
    with Follower(log, read_size=1000, max_poll_bytes=4000) as f:
        polls = 0
        while True:
            got += f.poll_once()
            polls += 1
            if not f.pending:
                break
    assert got == lines
    assert polls > 5


def test_a_line_longer_than_the_bound_is_handed_on_once_cut_and_the_rest_skipped(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"x" * 2500 + b"\n" + L1 + b"\n")
    with Follower(log, max_line_bytes=1000) as f:
        assert f.poll_once() == [b"x" * 1000, L1]
        assert f.oversized == 1


def test_a_runaway_line_still_without_newline_is_not_buffered_past_the_bound(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"x" * 2500)
    with Follower(log, max_line_bytes=1000, read_size=300) as f:
        assert f.poll_once() == [b"x" * 1000]
        append(log, b"y" * 5000)
        assert f.poll_once() == []                 # the same line goes on: skipped
        append(log, b"z\n" + L1 + b"\n")
        assert f.poll_once() == [L1]
        assert f.oversized == 1
        assert f.checkpoint()["offset"] == os.path.getsize(log)


def test_a_block_of_nuls_is_one_bad_line_and_the_next_line_is_not_glued_to_it(tmp_path):
    log = tmp_path / "log"
    # A crashed writer: a line cut short, a hole of NULs, then the next writes.
    log.write_bytes(L1 + b"\n" + L2[:20] + b"\0" * 100_000)
    with Follower(log, read_size=4096) as f:
        assert f.poll_once() == [L1, L2[:20], NUL_BLOCK]
        append(log, L3 + b"\n")
        assert f.poll_once() == [L3]
        append(log, b"\0" * 10 + b"\n" + L4 + b"\n")
        assert f.poll_once() == [NUL_BLOCK, L4]
        assert f.nul_blocks == 2


def test_a_nul_block_with_its_line_break_within_one_read(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"\0" * 50 + b"\n" + L1 + b"\n" + L2 + b"\0\0" + L3 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [NUL_BLOCK, L1, L2, NUL_BLOCK, L3]


def test_follow_generator_polls_all_files_until_told_to_stop(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(L1 + b"\n")
    followers = [Follower(a), Follower(b)]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) == 1:
            b.write_bytes(L2 + b"\n")

    got = []
    for f, lines in follow(followers, interval=0.01, should_stop=lambda: len(sleeps) >= 2, sleep=sleep):
        got.append((os.path.basename(f.path), lines))
    assert got == [("a", [L1]), ("b", [L2])]
    for f in followers:
        f.close()


def test_a_runaway_line_arriving_in_small_reads_is_cut_at_the_same_place(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"x" * 2500 + b"\n" + L1 + b"\n")
    with Follower(log, max_line_bytes=1000, read_size=300) as f:
        assert f.poll_once() == [b"x" * 1000, L1]


def test_copytruncate_refilled_past_the_old_offset_between_polls_is_still_noticed(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n")
    with Follower(log) as f:
        assert f.poll_once() == [L1]
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, L2 + b"\n" + L3 + b"\n")   # longer than what was there before
        assert f.poll_once() == [L2, L3]
        assert f.truncations == 1


def test_from_end_then_copytruncate_refilled_is_noticed(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n")
    with Follower(log, from_end=True) as f:
        assert f.poll_once() == []
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, L4 + b"\n" + L3 + b"\n")
        assert f.poll_once() == [L4, L3]


def test_a_path_that_cannot_be_read_is_retried_and_says_why(tmp_path):
    log = tmp_path / "log"
    log.mkdir()                               # e.g. a wrong path given: a directory
    with Follower(log) as f:
        assert f.poll_once() == []
        assert f.error == "is a directory"
        log.rmdir()
        log.write_bytes(L1 + b"\n")
        assert f.poll_once() == [L1]
        assert f.error is None


# -- exactly once: copytruncate, cuts, checkpoints -------------------------------------

import gzip  # noqa: E402
import shutil  # noqa: E402

LINES = [b"07/09 16:12:%02d.%03d 20713,%d Cns_srv_statg: returns 0" % (i // 1000, i % 1000, i % 7)
         for i in range(60)]


def block(lines) -> bytes:
    return b"".join(x + b"\n" for x in lines)


def gzip_file(path, gz) -> None:
    """logrotate's compress, as gzip(1) does it: the .gz keeps the file's mtime (so the
    order of the rotated files by mtime does not depend on how long compressing took)."""
    with open(path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    st = os.stat(path)
    os.utime(gz, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.unlink(path)


def copytruncate(log, copy, *, compress=False) -> None:
    """logrotate's copytruncate (and compress): copy, truncate, then gzip the copy."""
    shutil.copyfile(log, copy)
    with open(log, "r+b") as fh:
        fh.truncate(0)
    if compress:
        gzip_file(copy, f"{copy}.gz")


def test_copytruncate_reads_the_unread_tail_from_the_copy_before_the_new_lines(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:10]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:10]
        append(log, block(LINES[10:20]))          # written, not yet read
        copytruncate(log, tmp_path / "log.1")
        append(log, block(LINES[20:25]))
        assert f.poll_once() + f.poll_once() == LINES[10:25]
        assert (f.truncations, f.copies_read, f.copies_missing) == (1, 1, 0)
        append(log, block(LINES[25:30]))
        assert f.poll_once() == LINES[25:30]


def test_copytruncate_into_a_dated_gzip_copy_is_read_from_the_gzip(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:10]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:10]
        append(log, block(LINES[10:20]) + LINES[20][:9])   # and half a line
        copytruncate(log, tmp_path / "log-20261123", compress=True)
        append(log, block(LINES[21:40]))                  # longer than before: same size won't tell
        got = f.poll_once() + f.poll_once()
        assert got == LINES[10:20] + [LINES[20][:9]] + LINES[21:40]
        assert f.copies_read == 1


def test_copytruncate_finds_a_copy_by_a_configured_pattern_only(tmp_path):
    log = tmp_path / "log"
    (tmp_path / "old").mkdir()
    log.write_bytes(block(LINES[:5]))
    with Follower(log, rotated=["old/{name}.*"]) as f:
        assert f.poll_once() == LINES[:5]
        append(log, block(LINES[5:8]))
        copytruncate(log, tmp_path / "old" / "log.0")
        append(log, block(LINES[8:9]))
        assert f.poll_once() + f.poll_once() == LINES[5:9]


def test_copytruncate_without_a_copy_says_the_unread_part_is_lost(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:5]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:5]
        append(log, block(LINES[5:8]))
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, block(LINES[8:9]))
        assert f.poll_once() == LINES[8:9]
        assert f.copies_missing == 1
        assert any("no rotated copy" in n for n in f.notices)


def test_a_copy_with_other_first_bytes_is_not_taken_for_the_file(tmp_path):
    log = tmp_path / "log"
    (tmp_path / "log.1").write_bytes(block(LINES[40:50]))   # an older rotation
    log.write_bytes(block(LINES[:5]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:5]
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, block(LINES[8:9]))
        assert f.poll_once() == LINES[8:9]
        assert f.copies_read == 0


def test_truncation_to_a_smaller_size_refilled_past_the_offset_rereads_nothing_kept(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:10]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:10]
        with open(log, "r+b") as fh:
            fh.truncate(len(block(LINES[:6])))     # keeps 6 lines, already read
        append(log, block(LINES[30:40]))           # new lines, past the old size
        assert os.path.getsize(log) > f.offset
        assert f.poll_once() == LINES[30:40]
        assert (f.shrinks, f.truncations) == (1, 0)


def test_truncation_to_a_smaller_size_seen_before_new_writes(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:10]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:10]
        with open(log, "r+b") as fh:
            fh.truncate(len(block(LINES[:3])))
        assert f.poll_once() == []
        append(log, block(LINES[30:32]))
        assert f.poll_once() == LINES[30:32]


def test_truncation_keeping_unread_lines_reads_those_once(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:4]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:4]
        append(log, block(LINES[4:10]))            # unread
        with open(log, "r+b") as fh:
            fh.truncate(len(block(LINES[:7])))     # cut, keeping 3 of the unread lines
        append(log, block(LINES[30:31]))
        assert f.poll_once() == LINES[4:7] + LINES[30:31]


def test_a_checkpoint_resumes_a_grown_file_after_the_last_complete_line(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:5]) + LINES[5][:10])
    with Follower(log) as f:
        assert f.poll_once() == LINES[:5]
        saved = f.checkpoint()
    assert saved["offset"] == len(block(LINES[:5]))
    append(log, LINES[5][10:] + b"\n" + block(LINES[6:8]))
    with Follower(log, resume=saved, from_end=True) as f:
        assert f.poll_once() == LINES[5:8]


def test_resume_after_a_rename_rotation_while_stopped_finishes_the_old_file_first(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:5]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:5]
        saved = f.checkpoint()
    append(log, block(LINES[5:9]))
    os.rename(log, tmp_path / "log.1")
    log.write_bytes(block(LINES[9:12]))
    with Follower(log, resume=saved) as f:
        assert f.poll_once() + f.poll_once() == LINES[5:12]
        assert f.copies_read == 1


def test_resume_after_copytruncate_and_compress_while_stopped(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:5]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:5]
        saved = f.checkpoint()
    append(log, block(LINES[5:9]))
    copytruncate(log, tmp_path / "log.1", compress=True)
    append(log, block(LINES[9:30]))
    with Follower(log, resume=saved) as f:
        assert f.poll_once() + f.poll_once() == LINES[5:30]


def test_resume_after_a_cut_while_stopped_rereads_nothing_kept(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:10]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:10]
        saved = f.checkpoint()
    with open(log, "r+b") as fh:
        fh.truncate(len(block(LINES[:4])))
    append(log, block(LINES[30:45]))
    with Follower(log, resume=saved) as f:
        assert f.poll_once() == LINES[30:45]
        assert f.shrinks == 1


def test_a_checkpoint_taken_while_reading_a_copy_resumes_in_the_copy(tmp_path):
    log = tmp_path / "log"
    many = [b"%06d " % i + L2 for i in range(3000)]
    log.write_bytes(block(many[:10]))
    with Follower(log, read_size=1000, max_poll_bytes=4000) as f:
        got = f.poll_once()
        append(log, block(many[10:2000]))
        copytruncate(log, tmp_path / "log.1")
        append(log, block(many[2000:2100]))
        got += f.poll_once() + f.poll_once()
        saved = f.checkpoint()
    with Follower(log, resume=saved) as f:
        while True:
            got += f.poll_once()
            if not f.pending:
                break
    assert got == many[:2100]


def _later(path) -> None:
    """Make `path` look written after everything before (coarse file-system clocks)."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, time.time_ns() + _later.step))
    _later.step += 10_000_000


_later.step = 10_000_000


def test_two_renames_between_two_polls_read_the_middle_file_too(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:3]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:3]
        append(log, block(LINES[3:5]))
        os.rename(log, tmp_path / "log.1")
        log.write_bytes(block(LINES[5:8]))            # the middle file
        _later(log)
        os.rename(tmp_path / "log.1", tmp_path / "log.2")
        os.rename(log, tmp_path / "log.1")
        log.write_bytes(block(LINES[8:10]))
        _later(log)
        got = []
        for _ in range(4):
            got += f.poll_once()
        assert got == LINES[3:10]


def test_renamed_twice_while_stopped_resumes_through_every_rotated_file(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:3]))
    with Follower(log) as f:
        assert f.poll_once() == LINES[:3]
        saved = f.checkpoint()
    append(log, block(LINES[3:5]))
    os.rename(log, tmp_path / "log.1")
    log.write_bytes(block(LINES[5:8]))
    _later(log)
    gzip_file(tmp_path / "log.1", tmp_path / "log.2.gz")   # logrotate: log.1 -> log.2.gz
    os.rename(log, tmp_path / "log.1")
    log.write_bytes(block(LINES[8:10]))
    _later(log)
    with Follower(log, resume=saved, rotated=["{name}.*"]) as f:
        got = []
        for _ in range(5):
            got += f.poll_once()
    assert got == LINES[3:10]


def test_a_cut_deeper_than_the_window_is_said_and_counted_not_silent(tmp_path, monkeypatch):
    import dpmstream.streams.live.follow as follow_module
    monkeypatch.setattr(follow_module, "WINDOW_BYTES", 200)
    log = tmp_path / "log"
    log.write_bytes(block(LINES[:40]))
    with Follower(log, read_size=100) as f:
        assert f.poll_once() == LINES[:40]
        with open(log, "r+b") as fh:
            fh.truncate(len(block(LINES[:25])))       # 15 lines: far more than 200 bytes
        append(log, block(LINES[50:55]))
        got = f.poll_once()
        assert f.unplaced_cuts == 1 and f.shrinks == 1
        assert any("cut more than" in n for n in f.notices)
        assert set(got) <= set(LINES[50:55])          # nothing kept is read again


def test_a_fifo_is_read_as_a_stream_from_every_writer_in_turn(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    with Follower(fifo) as f:
        assert f.poll_once() == []                  # no writer yet: not waiting for one
        assert f.is_open and f.is_stream
        for line in (L1, L2):                       # one writer after another
            fd = os.open(fifo, os.O_WRONLY)
            os.write(fd, line + b"\n")
            assert f.poll_once() == [line]
            os.close(fd)
        assert f.poll_once() == []
        assert f.checkpoint() is None               # nothing in a pipe to go back to
        assert f.rotations == f.truncations == 0


def test_a_fifo_read_until_eof_ends_when_its_writer_closes(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as fh:
            fh.write(L1 + b"\n" + L2 + b"\n" + L3)

    writer = threading.Thread(target=write)
    writer.start()
    with Follower(fifo, until_eof=True) as f:
        got = []
        while True:
            got += f.poll_once()
            if not f.pending:
                break
        got.append(f.flush_partial())
    writer.join()
    assert got == [L1, L2, L3]


def test_a_character_device_is_not_followed(tmp_path):
    with Follower("/dev/zero") as f:
        assert f.poll_once() == []
        assert not f.is_open
        assert f.error.startswith("is a character device")


def _read_all(f) -> list[bytes]:
    got = []
    while True:
        got += f.poll_once()
        if not f.pending:
            return got


def _swap_symlink(link, target) -> None:
    tmp = f"{link}.new"
    os.symlink(os.path.basename(target), tmp)
    os.replace(tmp, link)                  # atomic, as a deploy tool swaps it


def test_a_symlink_swapped_while_stopped_reads_the_old_file_to_its_end_then_the_new_once(
        tmp_path):
    # Daily files, `log` a symlink to today's: log-1, then log-2. The new file matches
    # the rotated glob {name}-*; it is the file at the path, not a rotated one to read too.
    old, new, log = tmp_path / "log-1", tmp_path / "log-2", tmp_path / "log"
    old.write_bytes(L1 + b"\n" + L2 + b"\n")
    _swap_symlink(log, old)
    with Follower(log) as f:
        assert _read_all(f) == [L1, L2]
        saved = f.checkpoint()
    append(old, L3 + b"\n")                # written before the swap, while we were down
    new.write_bytes(L4 + b"\n")
    _swap_symlink(log, new)
    with Follower(log, resume=saved) as f:
        assert _read_all(f) == [L3, L4]
        append(new, L1 + b"\n")
        assert _read_all(f) == [L1]


def test_a_name_relinked_to_the_newest_file_while_stopped_is_read_once(tmp_path):
    # Delete and re-create the name: `log` is made again as a hard link to log-2.
    old, new, log = tmp_path / "log-1", tmp_path / "log-2", tmp_path / "log"
    old.write_bytes(L1 + b"\n" + L2 + b"\n")
    os.link(old, log)
    with Follower(log) as f:
        assert _read_all(f) == [L1, L2]
        saved = f.checkpoint()
    append(old, L3 + b"\n")
    new.write_bytes(L4 + b"\n")
    os.unlink(log)
    os.link(new, log)
    with Follower(log, resume=saved) as f:
        assert _read_all(f) == [L3, L4]


def test_a_rotation_while_stopped_is_known_by_inode_even_when_the_new_file_starts_alike(
        tmp_path):
    # A writer that starts each file with the same lines: by content alone the new file
    # looks like the old one grown, and its first lines and the old file's tail were lost.
    log = tmp_path / "log"
    log.write_bytes(L1 + b"\n" + L2 + b"\n")
    with Follower(log) as f:
        assert _read_all(f) == [L1, L2]
        saved = f.checkpoint()
    append(log, L3 + b"\n")
    os.rename(log, tmp_path / "log.1")
    log.write_bytes(L1 + b"\n" + L2 + b"\n" + L4 + b"\n")
    with Follower(log, resume=saved) as f:
        assert _read_all(f) == [L3, L1, L2, L4]
