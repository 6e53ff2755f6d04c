"""streams/sinks/summary.py: the replay's terminal summary, a record sink whose quantiles
are the one definition (parsers/quantiles.py) over bounded reservoirs."""

from __future__ import annotations

from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.streams.sinks import summary as S


def test_series_quantiles_are_nearest_rank_values_that_were_observed():
    series = S.Series()
    for v in (40, 10, 30, 20):
        series.add(v)
    assert [series.quantile(q) for q in (0.5, 0.95)] == [20, 40]
    assert series.quantile(0.5) == nearest_rank([10, 20, 30, 40], 0.5)


def test_past_the_reservoir_the_sum_stays_exact_and_the_sample_is_flagged(monkeypatch):
    monkeypatch.setattr(S, "RESERVOIR", 10)
    series = S.Series()
    for v in range(1, 101):
        series.add(v)
    assert (series.count, series.sum, series.max, len(series.values)) == (100, 5050, 100, 10)
    assert series.sampled


def test_a_request_record_counts_its_status_phases_and_polls():
    summary = S.Summary()
    summary.write({"kind": "request", "op": "put", "status": "success", "accepted": 1000,
                   "started": 1010, "ended": 3000, "auth_ms": 10, "total_ms": 2000, "polls": 2})
    summary.close()
    assert summary.statuses[("put", "success")] == 1
    assert summary.phases[("put", "total")].quantile(0.5) == 2000
    assert summary.share("put", "auth") == 10 / 2000
    assert (summary.first_ms, summary.last_ms) == (1000, 3000)
