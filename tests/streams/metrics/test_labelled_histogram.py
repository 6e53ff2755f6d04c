"""streams/metrics/labelled_histogram.py: one histogram family, bucket bounds per label set."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dpmstream.streams.metrics.labelled_histogram import LabelledHistogram

BOUNDS = {"auth": (0.01, 0.1, 1.0), "transfer": (1.0, 60.0, 3600.0, 14400.0)}


def phase_histogram(registry=None) -> LabelledHistogram:
    return LabelledHistogram("dpm_request_phase_seconds", "Time in each phase", ["phase"],
                             lambda values: BOUNDS[values[0]], registry=registry)


def exposed(histogram: LabelledHistogram) -> dict:
    """Every sample scraped from a registry holding only `histogram`, keyed by
    (name, phase, le)."""
    registry = CollectorRegistry()
    registry.register(histogram)
    text = generate_latest(registry).decode()
    return {(s.name, s.labels["phase"], s.labels.get("le")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_buckets_are_cumulative_and_plus_inf_counts_every_observation():
    h = phase_histogram()
    for amount in (0.005, 0.05, 0.07, 0.5, 7.0):
        h.observe(("auth",), amount)
    got = exposed(h)
    assert got[("dpm_request_phase_seconds_bucket", "auth", "0.01")] == 1
    assert got[("dpm_request_phase_seconds_bucket", "auth", "0.1")] == 3
    assert got[("dpm_request_phase_seconds_bucket", "auth", "1.0")] == 4
    assert got[("dpm_request_phase_seconds_bucket", "auth", "+Inf")] == 5
    assert got[("dpm_request_phase_seconds_count", "auth", None)] == 5
    assert abs(got[("dpm_request_phase_seconds_sum", "auth", None)] - 7.625) < 1e-9


def test_an_observation_equal_to_a_bound_counts_in_that_bound_bucket():
    h = phase_histogram()
    h.observe(("auth",), 0.1)
    got = exposed(h)
    assert got[("dpm_request_phase_seconds_bucket", "auth", "0.01")] == 0
    assert got[("dpm_request_phase_seconds_bucket", "auth", "0.1")] == 1


def test_each_label_set_is_exposed_with_its_own_bounds_in_one_family():
    h = phase_histogram()
    h.observe(("auth",), 0.02)
    h.observe(("transfer",), 120.0)
    got = exposed(h)
    les = {(phase, le) for name, phase, le in got if name.endswith("_bucket")}
    assert les == {("auth", "0.01"), ("auth", "0.1"), ("auth", "1.0"), ("auth", "+Inf"),
                   ("transfer", "1.0"), ("transfer", "60.0"), ("transfer", "3600.0"),
                   ("transfer", "14400.0"), ("transfer", "+Inf")}
    assert got[("dpm_request_phase_seconds_bucket", "transfer", "60.0")] == 0
    assert got[("dpm_request_phase_seconds_bucket", "transfer", "3600.0")] == 1
    assert got[("dpm_request_phase_seconds_bucket", "auth", "0.1")] == 1


def test_a_label_set_adds_one_series_per_bound_plus_inf_sum_and_count():
    h = phase_histogram()
    assert h.series_per_set(("auth",)) == 3 + 3
    assert h.series_per_set(("transfer",)) == 4 + 3
    h.observe(("transfer",), 5.0)
    assert len(exposed(h)) == h.series_per_set(("transfer",))


def test_a_label_set_never_observed_is_not_exposed():
    h = phase_histogram()
    h.observe(("auth",), 0.5)
    assert {phase for _, phase, _ in exposed(h)} == {"auth"}


def test_registering_it_with_a_registry_exposes_it_on_scrape():
    registry = CollectorRegistry()
    h = phase_histogram(registry)
    h.observe(("auth",), 0.5)
    assert registry.get_sample_value("dpm_request_phase_seconds_bucket",
                                     {"phase": "auth", "le": "1.0"}) == 1
    assert registry.get_sample_value("dpm_request_phase_seconds_count",
                                     {"phase": "auth"}) == 1


def test_a_scrape_after_more_observations_shows_the_new_totals():
    h = phase_histogram()
    h.observe(("auth",), 0.5)
    assert exposed(h)[("dpm_request_phase_seconds_count", "auth", None)] == 1
    h.observe(("auth",), 0.5)
    assert exposed(h)[("dpm_request_phase_seconds_count", "auth", None)] == 2
