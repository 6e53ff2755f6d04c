"""parsers/quantiles.py: the one quantile definition (nearest rank) of replay, report and probe."""

from __future__ import annotations

from dpmstream.parsers.quantiles import nearest_rank


def test_no_values_have_no_quantile():
    assert nearest_rank([], 0.5) is None


def test_a_quantile_is_a_value_that_was_observed():
    values = [1.0, 2.0, 3.0, 4.0]
    assert nearest_rank(values, 0.5) == 2.0        # not 2.5: no interpolation
    assert nearest_rank(values, 0.51) == 3.0
    assert nearest_rank([0.0, 10.0], 0.95) == 10.0


def test_a_whole_rank_is_not_pushed_up_by_floating_point():
    values = list(range(1, 21))
    assert nearest_rank(values, 0.95) == 19        # 0.95 * 20 is 19.000000000000004


def test_the_extremes_are_the_smallest_and_largest_values():
    assert nearest_rank([3], 0.99) == 3
    assert nearest_rank([5, 7, 9], 0.0) == 5
    assert nearest_rank([5, 7, 9], 1.0) == 9
