"""The defaults reproduce the findings of the 2011 thesis (M. Hellmich, CERN openlab):
3 clients x 25 concurrent puts against 20 fast and 20 slow threads.

Each claim compares medians of the ground-truth records of two runs.
"""

from __future__ import annotations

import statistics

import pytest

from dpmstream.simulator import SimConfig, simulate

REQUESTS = 1500


def median(result, field):
    values = [r[field] for r in result.requests if r[field] is not None and r["op"] == "put"]
    assert len(values) > REQUESTS // 2
    return statistics.median(values)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("thesis")
    return {
        name: simulate(SimConfig(requests=REQUESTS, **changes), base / name)
        for name, changes in {
            "default": {}, "sthreads70": {"sthreads": 70}, "same_dir": {"same_dir": True},
        }.items()
    }


def test_the_wait_for_a_slow_thread_dominates_the_server_side_time(runs):
    default = runs["default"]
    queue = median(default, "queue_ms")
    for other in ("auth_ms", "request_ms", "proc_ms", "poll_ms", "done_ms"):
        assert queue > 1.2 * median(default, other), other


def test_seventy_slow_threads_all_but_remove_the_wait(runs):
    assert median(runs["sthreads70"], "queue_ms") < 0.1 * median(runs["default"], "queue_ms")
    assert median(runs["sthreads70"], "total_ms") < 0.7 * median(runs["default"], "total_ms")


def test_one_shared_directory_makes_processing_slower(runs):
    # Creates in one directory queue for its DPNS lock inside the slow thread's run.
    assert median(runs["same_dir"], "proc_ms") > 1.25 * median(runs["default"], "proc_ms")
