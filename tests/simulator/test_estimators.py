"""simulator/estimators.py: small statistics for the calibration, checked against values
worked out by hand (and, for the Wilson interval, the published table values)."""

from __future__ import annotations

import math
import random

import pytest

from dpmstream.simulator.estimators import (
    in_flight_at_arrivals, in_flight_at_start, max_overlap, mean_interval, median,
    median_interval, quantile, quantiles, subtract_quantiles, wilson_interval)


# -- quantiles ---------------------------------------------------------------------------

@pytest.mark.parametrize("q, expected", [(0.0, 10), (0.25, 17.5), (0.5, 25), (1.0, 40)])
def test_a_quantile_interpolates_linearly_between_order_statistics_of_unsorted_values(q, expected):
    # sorted 10 20 30 40: q=0.25 sits at position 0.75 -> 10 + 0.75 * 10
    assert quantile([40, 10, 30, 20], q) == expected


def test_the_quantile_of_a_single_value_is_that_value_and_of_none_is_nan():
    assert quantile([7], 0.9) == 7
    assert math.isnan(quantile([], 0.5))


def test_several_quantiles_at_once_are_each_the_quantile_at_its_level():
    assert quantiles([40, 10, 30, 20], (0.0, 0.25, 0.5, 1.0)) == (10, 17.5, 25, 40)
    values = [(7919 * i) % 1009 for i in range(333)]
    assert quantiles(values, (0.5, 0.95, 0.99)) == tuple(quantile(values, q) for q in (0.5, 0.95, 0.99))
    assert all(math.isnan(v) for v in quantiles([], (0.5, 0.9)))


def test_the_median_is_the_middle_value_or_the_mean_of_the_two_middle_ones():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5


# -- intervals ---------------------------------------------------------------------------

def test_the_median_interval_takes_the_order_statistics_around_n_over_2():
    # n = 100: half-width 1.96 * 10 / 2 = 9.8 -> order statistics 40 and 60 (0-based)
    assert median_interval(list(range(99, -1, -1))) == (40, 60)
    # n = 10: half-width 3.099 -> floor(1.90) = 1 and ceil(8.10) = 9
    assert median_interval([10, 3, 7, 1, 5, 2, 8, 4, 9, 6]) == (2, 10)


def test_the_median_interval_of_few_values_is_clamped_to_the_extremes():
    # n = 3: half-width 1.70 -> floor(-0.2) and ceil(3.2), clamped to 0 and 2
    assert median_interval([5, 1, 9]) == (1, 9)
    assert median_interval([5]) == (None, None)


def test_the_mean_interval_uses_the_sample_standard_deviation():
    # mean 2, sample sd sqrt(2), standard error sqrt(2) / sqrt(2) = 1
    lo, hi = mean_interval([1, 3])
    assert lo == pytest.approx(2 - 1.96) and hi == pytest.approx(2 + 1.96)
    assert mean_interval([4]) == (None, None)


@pytest.mark.parametrize("k, n, expected", [
    (5, 10, (0.2366, 0.7634)),
    (0, 10, (0.0, 0.2775)),
    (10, 10, (0.7225, 1.0)),
])
def test_the_wilson_interval_of_a_share_matches_the_published_values(k, n, expected):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(expected[0], abs=1e-4)
    assert hi == pytest.approx(expected[1], abs=1e-4)


def test_the_wilson_interval_stays_within_zero_and_one_and_is_none_without_trials():
    # at k = 0 and k = n the bound is 0 or 1 exactly in theory; in floating point
    # 0/10 and 5/5 come out a few 1e-17 outside it unless clamped
    lo, _ = wilson_interval(0, 10)
    _, hi = wilson_interval(5, 5)
    assert lo == 0.0 and hi == 1.0
    assert wilson_interval(0, 0) == (None, None)


# -- subtraction quantile by quantile ----------------------------------------------------

def test_subtracting_a_part_takes_its_quantile_at_each_total_level():
    # totals 100 200 300 sit at levels 1/6, 1/2, 5/6; the part 10..50 has there
    # 16.67, 30 and 43.33
    assert subtract_quantiles([300, 100, 200], [50, 10, 40, 20, 30]) == (83, 170, 257)


def test_the_difference_less_the_offset_never_falls_below_the_floor():
    assert subtract_quantiles([300, 100, 200], [50, 10, 40, 20, 30], offset=100) == (0, 70, 157)
    assert subtract_quantiles([300, 100, 200], [50, 10, 40, 20, 30], offset=100,
                              floor=80) == (80, 80, 157)


def test_without_a_part_only_the_offset_and_floor_apply_to_the_sorted_totals():
    assert subtract_quantiles([30, 10, 20], [], offset=5, floor=8) == (8, 15, 25)


# -- concurrency -------------------------------------------------------------------------

def test_the_most_intervals_open_at_once_counts_nested_ones():
    assert max_overlap([(0, 10), (1, 9), (2, 8)]) == 3
    assert max_overlap([]) == 0


def test_an_interval_ending_as_another_starts_does_not_overlap_it():
    assert max_overlap([(0, 10), (5, 15), (10, 20)]) == 2
    assert max_overlap([(10, 20), (0, 10)]) == 1


def test_the_most_intervals_open_at_once_is_the_most_open_at_any_instant_of_random_sets():
    rng = random.Random(7)
    for _ in range(500):
        intervals = []
        for _ in range(rng.randrange(0, 25)):
            start = rng.randrange(0, 40)
            intervals.append((start, start + rng.randrange(0, 12)))   # some empty
        # By definition: at each instant the intervals with start <= t < end (ends first).
        instants = [t for pair in intervals for t in pair]
        direct = max([sum(1 for s, e in intervals if s <= t < e) for t in instants], default=0)
        assert max_overlap(intervals) == direct, intervals


def test_subtracting_a_part_interpolates_as_the_quantile_does():
    rng = random.Random(11)
    for _ in range(200):
        total = [rng.randrange(0, 5000) for _ in range(rng.randrange(1, 40))]
        part = [rng.randrange(0, 3000) for _ in range(rng.randrange(1, 40))]
        ordered, n = sorted(total), len(total)
        expected = tuple(max(1, int(round(v - quantile(part, (i + 0.5) / n) - 2)))
                         for i, v in enumerate(ordered))
        assert subtract_quantiles(total, part, offset=2, floor=1) == expected


def test_each_call_in_start_order_gets_the_calls_in_flight_when_it_began_and_its_duration():
    calls = [(10, 30), (0, 20), (20, 25), (40, 50), (2, 4)]
    # (0,20) alone; (2,4) meets it; (10,30) meets (0,20) only, (2,4) having ended;
    # (20,25) meets only (10,30), as (0,20) ended at 20; (40,50) alone
    assert in_flight_at_start(calls) == [(0, 20), (1, 2), (1, 20), (1, 5), (0, 10)]


def test_each_arrival_counts_the_spans_open_at_its_start_itself_included():
    spans = [(0, 20), (10, 30), (20, 25), (40, 50)]
    assert in_flight_at_arrivals(spans) == [1, 2, 2, 1]


# -- the compiled twins (native/src/estimators.rs) ------------------------------------------

try:
    from dpmstream.parsers._native import max_overlap as compiled_max_overlap
    from dpmstream.parsers._native import subtract_quantiles as compiled_subtract
except ImportError:  # not built
    compiled_max_overlap = compiled_subtract = None


@pytest.mark.skipif(compiled_max_overlap is None, reason="the compiled extension is not built")
def test_the_compiled_estimators_are_the_python_ones():
    """max_overlap and subtract_quantiles from the extension against python_max_overlap and
    python_subtract_quantiles, the references: random intervals (empty, reversed, sharing
    instants), random totals and parts (negative, repeated, one value, none) at epoch-ms
    sizes, offsets and floors; a float, or an int past 2^53 (where the compiled ints would
    wrap or round: native/src/exact_ints.rs), goes the Python way and gives its answer.
    The extension's functions are called themselves: the wrappers' fallback would hide
    one that raised."""
    from dpmstream.simulator import estimators as E

    rng = random.Random(33)
    for _ in range(500):
        base = rng.choice((0, 1_313_000_000_000))
        intervals = [(base + a, base + a + rng.choice((-3, 0, 1, 2, 40, rng.randrange(0, 5000))))
                     for a in (rng.randrange(0, 3000) for _ in range(rng.randrange(0, 60)))]
        assert compiled_max_overlap(intervals) == E.python_max_overlap(intervals), intervals
        assert E.max_overlap(iter(intervals)) == E.python_max_overlap(intervals)
        total = [rng.randrange(-50, 5000) for _ in range(rng.randrange(1, 60))]
        part = [rng.randrange(-50, 3000) for _ in range(rng.choice((0, 1, rng.randrange(1, 60))))]
        offset, floor = rng.choice((0, 2)), rng.choice((0, 1, 8))
        assert tuple(compiled_subtract(total, part, offset, floor)) == \
            E.python_subtract_quantiles(total, part, offset, floor), (total, part)
    assert E.max_overlap([(0.5, 2.0), (1.0, 3.0)]) == 2
    assert E.subtract_quantiles([10.0, 20.0], [1, 2]) == E.python_subtract_quantiles([10.0, 20.0], [1, 2])
    far = [0, -3 * 2 ** 61, 3 * 2 ** 61]   # their differences wrap an i64
    with pytest.raises(OverflowError):
        compiled_subtract([0], far, 0, -2 ** 63)
    assert E.subtract_quantiles([0], far, 0, -2 ** 63) == \
        E.python_subtract_quantiles([0], far, 0, -2 ** 63) == (0,)
    assert E.subtract_quantiles([2 ** 53 + 1], [], 0, 0) == (2 ** 53 + 1,)   # not rounded
