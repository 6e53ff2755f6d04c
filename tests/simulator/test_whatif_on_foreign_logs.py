"""`dpmstream whatif` on logs the project's simulator did not write (issue 29).

The logs come from tests/foreign_site.py, a head node written independently from the
log format reference. Each case: its log at one slow-thread count (seed 101) is
calibrated on, another count is predicted, and the prediction is compared with the
generator's own runs at that count with other seeds (202-204, pooled): within 25% (or
20 ms) on the p50 of queue, proc, ready_wait and total of the puts. The model runs with
seeds 1-3.

Two cases run always, and the model must fit their logs (exit 0); the rest of the
matrix (bench/bench_whatif.py prints it all) runs with DPMSTREAM_LONG_TESTS=1, where a
log the model does not fit may exit 3 (it says which p50 it misses) but the prediction
must still hold.
"""

from __future__ import annotations

import argparse
import os
import statistics

import pytest

from tests.foreign_site import CASES, HEAD, LOG_SEED, PHASES, YEAR, Site, whatif_case, write

REQUESTS = 2000
TOLERANCE = 0.25
FAST = ("2 dirs, 30 ms hold, over capacity (issue 29)", "4 dirs, 20 ms hold, bursts of 10")
LONG = [name for name in CASES if name not in FAST]
long_case = pytest.mark.skipif(not os.environ.get("DPMSTREAM_LONG_TESTS"),
                               reason="the long matrix: set DPMSTREAM_LONG_TESTS=1")


def read(log):
    from dpmstream.commands.whatif import read_records

    args = argparse.Namespace(tz="UTC", year=YEAR, host=HEAD, profile=None, timeout=3600.0,
                              max_in_flight=1_000_000, max_threads=100_000, grace=60.0,
                              head_alias=None)
    requests, calls, _, _ = read_records([str(log.log_path), str(log.dpns_log_path)], args)
    return requests, calls


def test_the_foreign_logs_read_back_to_the_phases_their_generator_knows(tmp_path):
    log = write(Site(requests=300, rate=40, get_share=0.3, dirs=4, seed=5), tmp_path / "log")
    requests, calls = read(log)
    assert len(requests) == 300 and all(r["status"] == "success" for r in requests)
    for op in ("put", "get"):
        for phase, p50 in log.p50s(op).items():
            parsed = statistics.median(r[f"{phase}_ms"] for r in requests if r["op"] == op) / 1000
            assert parsed == pytest.approx(p50, abs=0.0015), (op, phase)
    # Every create names its path and is linked to the put it served.
    creats = [c for c in calls if c["op"] == "creat"]
    assert creats and all(c["path"] and c["token"] for c in creats)


def test_the_lock_of_each_directory_is_read_from_its_own_queue(tmp_path):
    """The issue's case: two directories, a create holding its lock about 30 ms, creates
    queueing behind each other. Read as one queue the hold looked like 11 ms."""
    from dpmstream.simulator.calibrate import calibrate

    site, _ = CASES[FAST[0]]
    log = write(site.but(requests=800, seed=LOG_SEED), tmp_path / "log")
    cal = calibrate(*read(log))
    assert len(cal.config.dir_shares) == 2 and cal.config.dirs is None
    assert sorted(d.rsplit("/", 1)[1] for d in cal.directories) == ["run0", "run1"]
    for hold in cal.config.service.dpns_creat_dirs:
        mean = sum(hold.values) / len(hold.values)
        assert 27 <= mean <= 33, mean            # the generator's mean hold: 30 ms
    assert not any("lock cannot be calibrated" in w for w in cal.warnings)


def check(outcome, must_fit: bool = True):
    assert outcome.exit_code in ((0,) if must_fit else (0, 3)), (
        outcome.stdout[-3000:] + outcome.stderr)
    for phase in PHASES:
        assert outcome.holds(phase, TOLERANCE), (
            phase, outcome.predicted[phase], outcome.truth[phase])


@pytest.mark.parametrize("name", FAST)
def test_whatif_predicts_another_slow_thread_count_on_a_foreign_log(tmp_path, name):
    check(whatif_case(name, tmp_path, REQUESTS))


@long_case
@pytest.mark.parametrize("name", LONG)
def test_whatif_predicts_the_whole_matrix_of_foreign_logs(tmp_path, name):
    check(whatif_case(name, tmp_path, REQUESTS), must_fit=False)


def test_overload_shows_as_a_growing_queue_in_the_log_the_model_and_whether_the_change_ends_it(tmp_path):
    # 80 puts/s against 20 slow threads (about 60/s): the wait for a thread grows all run.
    # With 70 the slow threads keep up but the two locks (about 66/s) do not, so it
    # still grows; spread over 8 directories the locks keep up too and it ends.
    # One log (the case's, at 800 requests) for both what-ifs; no truth runs: only what
    # the command says of the queue is checked here.
    import subprocess
    import sys

    site, sthreads = CASES[FAST[0]]
    log = write(site.but(requests=800, seed=LOG_SEED), tmp_path / "log")

    def queue_line(out, timeout, *options):
        done = subprocess.run(
            [sys.executable, "-m", "dpmstream", "whatif", "--tz", "UTC", "--year", str(YEAR),
             "--host", HEAD, "--sthreads", str(sthreads), *options, "--seeds", "1",
             "--out", str(tmp_path / out), str(log.log_path), str(log.dpns_log_path)],
            capture_output=True, text=True, timeout=timeout)
        return next(line for line in done.stdout.splitlines() if line.startswith("  queue "))
    queue = queue_line("out", 1800, "--model-requests", "800")
    assert queue.count("grows") == 3, queue
    queue = queue_line("out8", 1200, "--dirs", "8")
    assert queue.count("grows") == 2 and queue.rstrip().endswith("steady  (slow threads)"), queue
