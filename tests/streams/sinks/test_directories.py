"""streams/sinks/directories.py: directories ranked by name-server time, their peak of
concurrent creates and share of processing, within a bounded number of directories.
Directory names never become labels."""

from dpmstream.streams.sinks.directories import DirectoryStats


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


