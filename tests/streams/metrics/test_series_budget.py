"""streams/metrics/series_budget.py: a cap on one family's series, with a counted overflow."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from dpmstream.streams.metrics.series_budget import OTHER, SeriesBudget

LABELS = ("host", "daemon", "op", "result")


def overflow_counter() -> Counter:
    return Counter("dpmstream_series_overflow", "Observations folded into other",
                   ["metric"], registry=CollectorRegistry())


def overflowed(counter: Counter, family: str = "calls") -> float:
    """The exposed value of dpmstream_series_overflow_total{metric=family}."""
    return next(s.value for f in counter.collect() for s in f.samples
                if s.name.endswith("_total") and s.labels == {"metric": family})


def test_label_sets_within_the_budget_are_returned_unchanged_and_each_counted_once():
    budget = SeriesBudget("calls", LABELS, max_series=3, overflow=overflow_counter())
    a, b = ("h1", "dpns", "statg", "ok"), ("h2", "dpns", "statg", "ok")
    assert budget(a) == a
    assert budget(b) == b
    assert budget(a) == a          # already admitted: no new series
    assert budget.series == 2 and budget.folded == 0


def test_a_label_set_that_exactly_fills_the_budget_is_admitted():
    budget = SeriesBudget("calls", LABELS, max_series=2, overflow=overflow_counter())
    budget(("h1", "dpns", "statg", "ok"))
    last = ("h2", "dpns", "statg", "ok")
    assert budget(last) == last
    assert budget.series == 2 and budget.folded == 0


def test_past_the_budget_host_op_and_daemon_fold_into_other_and_the_rest_is_kept():
    counter = overflow_counter()
    budget = SeriesBudget("calls", LABELS, max_series=1, overflow=counter)
    budget(("h1", "dpns", "statg", "ok"))
    assert budget(("h2", "dpm", "put", "error")) == (OTHER, OTHER, OTHER, "error")
    assert budget.folded == 1 and overflowed(counter) == 1


def test_every_folded_observation_is_counted_even_of_a_repeated_label_set():
    counter = overflow_counter()
    budget = SeriesBudget("calls", LABELS, max_series=1, overflow=counter)
    budget(("h1", "dpns", "statg", "ok"))
    for _ in range(3):
        budget(("h2", "dpns", "statg", "ok"))
    budget(("h3", "dpns", "creat", "ok"))
    assert budget.folded == 4 and overflowed(counter) == 4


def test_a_label_set_admitted_before_the_budget_ran_out_keeps_its_own_series():
    counter = overflow_counter()
    budget = SeriesBudget("calls", LABELS, max_series=1, overflow=counter)
    first = ("h1", "dpns", "statg", "ok")
    budget(first)
    budget(("h2", "dpns", "statg", "ok"))     # folded
    assert budget(first) == first
    assert overflowed(counter) == 1             # the admitted set is not an overflow


def test_the_overflow_counter_exists_at_zero_before_anything_is_folded():
    counter = overflow_counter()
    SeriesBudget("dpm_call_seconds", LABELS, max_series=10, overflow=counter)
    assert overflowed(counter, "dpm_call_seconds") == 0


def test_histogram_label_sets_cost_their_series_per_set_against_the_budget():
    # 3 buckets + +Inf + _sum + _count = 6 series a set: a budget of 13 holds two sets.
    budget = SeriesBudget("calls", LABELS, max_series=13, overflow=overflow_counter(),
                          series_per_set=lambda values: 6)
    a, b, c = (("h%d" % i, "dpns", "statg", "ok") for i in (1, 2, 3))
    assert budget(a) == a and budget(b) == b
    assert budget(c) == (OTHER, OTHER, OTHER, "ok")
    # the folded set is admitted once, costing its series once
    assert budget.series == 18
    budget(("h4", "dpns", "statg", "ok"))
    assert budget.series == 18


def test_a_family_exceeds_its_budget_only_by_one_folded_set_per_remaining_value():
    budget = SeriesBudget("lines", ("host", "daemon", "result"), max_series=5,
                          overflow=overflow_counter())
    for host in range(100):
        for result in ("parsed", "skipped"):
            budget((f"h{host:02d}", "dpm", result))
    # five sets admitted as themselves, then (other, other, parsed|skipped)
    assert budget.series == 5 + 2
    assert budget.folded == 200 - 5


def test_labels_outside_host_op_and_daemon_are_never_folded():
    budget = SeriesBudget("phase", ("phase", "status"), max_series=0,
                          overflow=overflow_counter())
    assert budget(("auth", "ok")) == ("auth", "ok")
    assert budget.folded == 1
