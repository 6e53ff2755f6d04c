"""probes/measurement.py: what a probe source measured over a window, and the durations
the probe's options are given in. (parse_duration's basic units: test_thresholds.py.)"""

from __future__ import annotations

import pytest

from dpmstream.probes.measurement import (
    Snapshot, SourceError, Wanted, parse_duration, prom_duration,
)


def snapshot(**kw) -> Snapshot:
    return Snapshot(window_s=900.0, source="test", **kw)


# -- Snapshot -----------------------------------------------------------------------------

def test_requests_are_the_sum_over_all_statuses():
    snap = snapshot(by_status={"success": 90.0, "failed": 8.0, "aborted": 2.0})
    assert snap.requests == 100.0


def test_a_rate_is_the_share_of_requests_with_that_status():
    snap = snapshot(by_status={"success": 90.0, "failed": 8.0, "aborted": 2.0})
    assert snap.rate("failed") == 0.08
    assert snap.rate("success") == 0.9


def test_a_status_not_seen_has_rate_zero_when_there_were_requests():
    assert snapshot(by_status={"success": 4.0}).rate("failed") == 0.0


def test_without_requests_a_rate_is_unknown_not_zero():
    assert snapshot().rate("failed") is None
    assert snapshot(by_status={"success": 0.0}).rate("success") is None


def test_a_window_with_neither_requests_nor_calls_is_empty():
    assert snapshot().empty
    assert snapshot(by_status={"success": 0.0}, calls=0.0).empty


def test_a_window_with_only_calls_or_only_requests_is_not_empty():
    assert not snapshot(calls=1.0).empty
    assert not snapshot(by_status={"failed": 1.0}).empty


def test_a_fresh_snapshot_measured_nothing():
    snap = snapshot()
    assert (snap.by_status, snap.phases, snap.ns) == ({}, {}, {})
    assert (snap.calls, snap.end_ms, snap.age_s, snap.long_lines) == (0.0, None, None, 0)


def test_snapshots_do_not_share_their_dicts():
    a, b = snapshot(), snapshot()
    a.by_status["success"] = 1.0
    assert b.by_status == {}


def test_wanted_defaults_to_no_name_server_ops_and_no_age():
    wanted = Wanted(phase_quantiles=(0.5, 0.95))
    assert (wanted.ns, wanted.age) == ({}, False)


def test_a_source_error_is_a_runtime_error():
    assert issubclass(SourceError, RuntimeError)


# -- parse_duration -----------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("90s", 90.0), ("1.5m", 90.0), ("2h", 7200.0), ("1d", 86400.0), ("0.5", 0.5),
    (" 15m ", 900.0),
])
def test_a_duration_is_read_in_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1s", "inf", "infs", "nan", "nanm"])
def test_a_duration_must_be_a_positive_finite_number(text):
    with pytest.raises(ValueError, match="must be positive"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["", "15 minutes", "1w", "m", "1.2.3s"])
def test_a_malformed_duration_says_how_to_write_one(text):
    with pytest.raises(ValueError, match=r"use e\.g\. 90s, 15m, 2h, 1d"):
        parse_duration(text)


# -- prom_duration ------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, text", [
    (900.0, "900s"), (90.4, "90s"), (90.6, "91s"), (0.2, "1s"), (0.0, "1s"),
])
def test_a_prometheus_range_is_whole_seconds_and_at_least_one(seconds, text):
    assert prom_duration(seconds) == text


def test_parse_and_prom_durations_agree_on_whole_seconds():
    assert prom_duration(parse_duration("15m")) == "900s"
    assert prom_duration(parse_duration("2.5s")) == "2s"  # round half to even
