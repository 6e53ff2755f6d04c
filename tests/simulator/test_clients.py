"""simulator/clients.py: how the simulated clients start their requests: replayed
arrivals at their instants, or open-loop arrivals at a rate."""

from __future__ import annotations

from dpmstream.simulator import SimConfig, simulate


def test_replayed_arrivals_start_one_request_each_at_its_instant_on_its_client(tmp_path):
    arrivals = ((0, "put", 0), (400, "get", 1), (900, "put", 1), (2500, "get", 0))
    cfg = SimConfig(clients=2, arrivals=arrivals, plain_rate=0.0, auth_fail_rate=0.0,
                    put_fail_rate=0.0, abort_rate=0.0, abandon_rate=0.0, jitter_rate=0.0)
    result = simulate(cfg, tmp_path / "r")
    records = sorted(result.requests, key=lambda r: r["accepted"])
    assert [(r["op"], r["client"].split(".")[0]) for r in records] == [
        ("put", "lxfsra01"), ("get", "lxfsra02"), ("put", "lxfsra02"), ("get", "lxfsra01")]
    for r, (offset, _, _) in zip(records, arrivals):
        assert 0 <= r["accepted"] - (result.start_ms + offset) <= 5   # the network's delay


def test_open_loop_arrivals_follow_the_rate(tmp_path):
    result = simulate(SimConfig(rate=20.0, requests=600, sthreads=70), tmp_path / "rate")
    first = min(r["started"] for r in result.requests)
    last = max(r["started"] for r in result.requests)
    per_s = (len(result.requests) - 1) / ((last - first) / 1000)
    assert 16 < per_s < 24
