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



def test_a_series_quantiles_are_the_nearest_ranks_of_its_values_in_either_form():
    """Series.quantiles (native/src/ranks.rs where built) against sorted_quantiles, the
    reference, and nearest_rank read by hand: a list of ints and a tally's array('q'),
    none, one, ties, negatives; ints past 64 bits, floats and a q that is not finite go the
    Python way."""
    rng = random.Random(5)
    qs = [0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 1.0, 1.5]
    cases = [[], [7], [3, 3, 3], list(range(20, 0, -1)), [-5, 2 ** 62, 0, -2 ** 62]]
    cases += [[rng.randrange(-10, 3000) for _ in range(rng.randrange(1, 400))] for _ in range(40)]
    for values in cases:
        want = [nearest_rank(sorted(values), q) for q in qs]
        for form in (list(values), array("q", values)):
            series = S.Series()
            series.values = form
            assert series.quantiles(qs) == S.sorted_quantiles(form, qs) == want, values
    for odd in ([2 ** 70, 1, 2 ** 71], [1.5, 0.5, 2.5]):   # not 64-bit ints: the Python way
        series = S.Series()
        series.values = odd
        assert series.quantiles([0.5, 1.0]) == [sorted(odd)[1], sorted(odd)[2]]
    series = S.Series()
    series.values = [1, 2]
    with pytest.raises(ValueError):   # math.ceil(nan), as before
        series.quantiles([float("nan")])
    with pytest.raises(OverflowError):   # a rank q * n past floats' range, as before
        series.quantiles([1e308])
