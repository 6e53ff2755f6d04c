"""streams/sinks/directories.py: directories ranked by name-server time, their peak of
concurrent creates and share of processing, within a bounded number of directories.
Directory names never become labels."""

import random

from dpmstream.streams.sinks import directories as directories_module
from dpmstream.streams.sinks.directories import FOLD_MS, DirectoryStats


def ns_record(path, started, ended, op="creat", token=None):
    return {"kind": "call", "host": "h", "daemon": "dpns", "op": op, "path": path,
            "started": started, "ended": ended, "token": token}


def test_peak_creats_counts_creats_open_at_one_instant_in_their_directory():
    stats = DirectoryStats()
    for started, ended in ((0, 100), (50, 150), (60, 70), (100, 200), (300, 400)):
        stats.write(ns_record("/d/a/f", started, ended))
    stats.write(ns_record("/d/b/f", 0, 1000))
    (a,) = [r for r in stats.top() if r["directory"] == "/d/a"]
    assert a["peak_creats"] == 3  # 0-100, 50-150, 60-70 at 60..70; 100-200 starts as 0-100 ends
    assert (a["creats"], a["ns_s"]) == (5, "0.410")


def test_the_share_of_proc_time_counts_only_linked_calls():
    stats = DirectoryStats()
    stats.write({"kind": "request", "proc_ms": 1000})
    stats.write(ns_record("/d/a/f1", 0, 250, token="t1"))
    stats.write(ns_record("/d/a/f2", 0, 500))  # not linked: a client's own creat
    (row,) = stats.top()
    assert (row["proc_share"], row["ns_s"]) == ("0.250", "0.750")


def test_directories_beyond_the_cap_are_dropped_least_costly_first_and_counted():
    stats = DirectoryStats(max_dirs=10)
    for i in range(30):
        stats.write(ns_record(f"/d/{i}/f", 0, i + 1))
    assert len(stats.dirs) <= 11 and stats.dropped_dirs > 0
    assert stats.top(1)[0]["directory"] == "/d/29"




def peak_of_all(intervals) -> int:
    """The peak as the one sorted list of steps gives it, every interval kept."""
    now = peak = 0
    for _, step in sorted([(e, -1) for _, e in intervals] + [(s, 1) for s, _ in intervals]):
        now += step
        peak = max(peak, now)
    return peak


def test_a_replays_creat_intervals_stay_bounded_and_the_peak_is_the_same(monkeypatch):
    """A day of creats, one directory: the intervals kept stay within the last FOLD_MS
    (twice over, between folds) while the peak is the one of all intervals, a burst early
    in the day (folded long before the end) included."""
    monkeypatch.setattr(directories_module, "FOLD_AT", 256)
    rng = random.Random(3)
    stats, intervals, t = DirectoryStats(), [], 0
    for i in range(20_000):
        t += rng.randrange(0, 8_000)
        started = t - (rng.randrange(0, 40_000) if 100 <= i < 130 else 0)  # the burst
        ended = t + rng.randrange(0, 3_000)
        intervals.append((started, ended))
        stats.write(ns_record("/d/a/f", started, ended))
    d = stats.dirs["/d/a"]
    within = sum(1 for s, e in intervals if max(s, e) >= t - 2 * FOLD_MS)
    assert d.cutoff is not None and len(d.starts) <= max(256, 2 * within)
    assert len(d.starts) < len(intervals) / 5
    assert d.peak() == peak_of_all(intervals) > peak_of_all(intervals[1000:])


def test_a_live_window_keeps_its_own_rule_and_never_folds():
    stats = DirectoryStats(keep_ms=1000)
    for i in range(10_000):
        stats.write(ns_record("/d/a/f", i * 100, i * 100 + 50))
    assert stats.dirs["/d/a"].cutoff is None
