"""streams/follow.py: tail -F semantics, driven one poll at a time on real files."""

from __future__ import annotations

import os

from dpmstream.streams.follow import Follower, follow

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


def test_a_runaway_line_without_newline_is_handed_on_in_bounded_pieces(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"x" * 2500 + b"\n" + L1 + b"\n")
    with Follower(log, max_line_bytes=1000) as f:
        assert f.poll_once() == [b"x" * 1000, b"x" * 1000, b"x" * 500, L1]
        assert f.oversized == 2


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


def test_a_runaway_line_arriving_in_small_reads_is_cut_at_the_same_places(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"x" * 2500 + b"\n" + L1 + b"\n")
    with Follower(log, max_line_bytes=1000, read_size=300) as f:
        assert f.poll_once() == [b"x" * 1000, b"x" * 1000, b"x" * 500, L1]


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
