"""check_dpm's threshold specs: subjects, quantiles, Nagios ranges, and what they make
the probe measure."""

from __future__ import annotations

import pytest

from dpmstream.probes import thresholds as th
from dpmstream.probes.measurement import parse_duration


@pytest.mark.parametrize("text, metric, kind, q", [
    ("proc:p95=~:2", "proc_p95", "phase", 0.95),
    ("queue:p99=~:10", "queue_p99", "phase", 0.99),
    ("total:p99.9=60", "total_p99.9", "phase", 0.999),
    ("ns:statg:p95=0.5", "ns_statg_p95", "ns", 0.95),
    ("failed_rate=0.05", "failed_rate", "rate", None),
    ("incomplete_rate=@0.1:0.2", "incomplete_rate", "rate", None),
    ("dome_call:p95=0.5", "dome_call_p95", "dome_call", 0.95),
    ("dome_error_rate=0.05", "dome_error_rate", "dome", None),
    ("dome_fs_disabled=0", "dome_fs_disabled", "dome", None),
    ("dome_fs_free_ratio=0.1:", "dome_fs_free_ratio", "dome", None),
    ("dome_fs_free_bytes=100000000000:", "dome_fs_free_bytes", "dome", None),
])
def test_spec_names_its_metric(text, metric, kind, q):
    subject, rng = th.parse_spec(text)
    assert (subject.metric, subject.kind, subject.quantile) == (metric, kind, q)
    assert str(rng) == text.split("=", 1)[1]


@pytest.mark.parametrize("text, reason", [
    ("proc:p95", "SUBJECT=RANGE"),
    ("nosuch:p95=1", "unknown phase"),
    ("proc:q95=1", "bad quantile"),
    ("proc:p100=1", "bad quantile"),
    ("proc:p95=5:1", "bad range"),
    ("failed=0.1", "bad threshold subject"),
    ("ns:/a/path:p95=1", "bad name-server op"),
    ("dome_call:q95=1", "bad quantile"),
    ("dome_fs_full=1", "dome_error_rate, dome_fs_disabled"),
])
def test_bad_spec_says_why(text, reason):
    with pytest.raises(th.SpecError, match=reason):
        th.parse_spec(text)


def test_ranges_follow_nagios_semantics():
    _, upto2 = th.parse_spec("proc:p95=~:2")
    assert upto2.match(-5) and upto2.match(2) and not upto2.match(2.01)
    _, plain = th.parse_spec("proc:p95=2")
    assert plain.match(0) and not plain.match(-0.1) and not plain.match(2.5)
    _, inside = th.parse_spec("proc:p95=@1:5")
    assert inside.match(0.5) and not inside.match(3)


def test_thresholded_quantiles_and_ops_are_measured():
    limits = th.build(["proc:p90=~:2", "ns:statg:p95=0.5"], ["queue:p99=~:10", "ns:statg:p99=1"])
    assert limits.phase_quantiles((0.5, 0.95)) == [0.5, 0.9, 0.95, 0.99]
    assert limits.ns_wanted() == {"statg": [0.95, 0.99]}
    assert set(limits.warning) == {"proc_p90", "ns_statg_p95"}
    assert set(limits.critical) == {"queue_p99", "ns_statg_p99"}


def test_quantile_labels_round_trip():
    for text in ("p50", "p95", "p99", "p99.9", "p1"):
        assert th.quantile_label(th.parse_quantile(text)) == text


def test_durations():
    assert parse_duration("15m") == 900 and parse_duration("2h") == 7200 and parse_duration("90") == 90
    for bad in ("", "m", "-5m", "0s", "abc"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_dome_subjects_are_measured_and_told_apart_from_the_legacy_ones():
    limits = th.build(["dome_call:p90=0.5", "dome_fs_free_ratio=0.1:"], ["proc:p95=2"])
    assert limits.dome_call_quantiles((0.5, 0.95)) == [0.5, 0.9, 0.95]
    assert sorted(limits.dome_only()) == ["dome_call_p90", "dome_fs_free_ratio"]
    assert limits.legacy_only() == ["proc_p95"]
    assert th.build(["failed_rate=0.1"], []).dome_only() == []  # of puts on a DOME site
