"""streams/sinks/summary.py: the replay's terminal summary, a record sink whose quantiles
are the one definition (parsers/quantiles.py) over bounded reservoirs."""

from __future__ import annotations

import random
from array import array

import pytest

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


def _state(series: S.Series) -> tuple:
    rng = series._rng.getstate() if series._rng is not None else None
    return series.count, series.sum, series.max, list(series.values), rng


@pytest.mark.parametrize("seed", range(12))
def test_extending_a_series_is_adding_each_value_in_turn(monkeypatch, seed):
    """Below, up to and past the reservoir, from an empty series, a filled one and one
    restored from a tally's bytes, with negative values and repeated maxima."""
    monkeypatch.setattr(S, "RESERVOIR", 50)
    rng = random.Random(seed)
    batches = [[rng.randint(-5, 40) for _ in range(rng.choice((0, 1, 7, 30, 49, 50, 120)))]
               for _ in range(4)]
    restored = (3, 30, 20, array("q", [5, 20, 5]).tobytes(), None)
    for start in (S.Series, lambda: S.Series.restored(*restored)):
        added, extended = start(), start()
        for batch in batches:
            for v in batch:
                added.add(v)
            extended.extend(iter(batch))
            assert _state(extended) == _state(added)


def test_a_request_record_counts_its_status_phases_and_polls():
    summary = S.Summary()
    summary.write({"kind": "request", "op": "put", "status": "success", "accepted": 1000,
                   "started": 1010, "ended": 3000, "auth_ms": 10, "total_ms": 2000, "polls": 2})
    summary.close()
    assert summary.statuses[("put", "success")] == 1
    assert summary.phases[("put", "total")].quantile(0.5) == 2000
    assert summary.share("put", "auth") == 10 / 2000
    assert (summary.first_ms, summary.last_ms) == (1000, 3000)
