"""simulator/calibrate.py: the model's settings read back from a log's records."""

from __future__ import annotations

import statistics

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.calibrate import calibrate
from dpmstream.simulator.fits import closed_loop, lock_fit


def test_calibration_finds_one_directory_and_a_closed_loop_in_the_same_dir_thesis_log(tmp_path):
    from dpmstream.parsers.pipeline import Pipeline

    log = simulate(SimConfig(requests=600, seed=7, same_dir=True), tmp_path / "log")
    records = []
    pipeline = Pipeline(records.append)
    for path in (log.log_path, log.dpns_log_path):
        src = pipeline.source(str(path), host="head01", path=str(path), year=2011)
        src.feed_lines(path.read_bytes().splitlines())
    pipeline.finish()
    requests = [r for r in records if r["kind"] == "request"]
    calls = [r for r in records if r["kind"] == "call"]
    cal = calibrate(requests, calls)
    assert cal.load == "closed" and cal.config.dirs == 1 and cal.lock_contention
    assert cal.config.sthreads == 20 and cal.config.clients == 3
    assert cal.config.concurrency == 25
    assert (cal.config.poll_first_ms, cal.config.poll_factor) == (125, 2.0)
    hold, _ = lock_fit([(c["started"], c["ended"]) for c in calls if c["op"] == "creat"])
    assert 30 <= statistics.median(hold) <= 40            # the model's 35 ms
    dispersion, streams, _ = closed_loop(requests)
    assert dispersion < 0.1 and streams == cal.config.concurrency
