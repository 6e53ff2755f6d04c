"""check_dpm --dome --prometheus against a real Prometheus scraping a real `dpmstream run`
that follows a simulated DOME site's logs (tests/metrics_stack.start_dome_stack): OK on
a healthy site, WARNING or CRITICAL on a degraded one, naming what left its range."""

from __future__ import annotations

import csv

import pytest

from tests.metrics_stack import start_dome_stack
from tests.probes.test_sources_prometheus import check_dpm

pytestmark = pytest.mark.services  # Prometheus and `dpmstream run`

NOTHING_GOES_WRONG = ("--put-fail-rate", "0", "--abandon-rate", "0", "--done-fail-rate", "0",
                      "--chksum-fail-rate", "0", "--disk-down-at", "100000",
                      "--restart-at", "100000", "--gap-at", "100000")
# Put and putdone refusals, failed checksums, and the first disk node down from 350 s
# on (its filesystems disabled at the end).
DEGRADED = ("--put-fail-rate", "0.3", "--done-fail-rate", "0.3", "--chksum-fail-rate", "0.5",
            "--disk-down-at", "350", "--disk-down-s", "100000")
SITE = ("--duration", "600", "--rate", "3")
# What a DOME site's service would page on.
THRESHOLDS = ("-w", "dome_error_rate=0.05", "-c", "dome_error_rate=0.25", "-c", "dome_fs_disabled=0",
              "-w", "dome_fs_free_ratio=0.001:", "-w", "dome_call:p95=30", "-w", "failed_rate=0.1")


def _site(tmp_path_factory, name, sim_args, run_args=()):
    return start_dome_stack(tmp_path_factory.mktemp(name), sim_args=(*SITE, *sim_args),
                            run_args=run_args)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    stack = _site(tmp_path_factory, "healthy", NOTHING_GOES_WRONG)
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def degraded(tmp_path_factory):
    stack = _site(tmp_path_factory, "degraded", DEGRADED)
    yield stack
    stack.stop()


def _exported(stack, metric: str) -> dict[tuple, float]:
    """The exporter's own samples of `metric`: labels -> value (what Prometheus scraped)."""
    import urllib.request
    text = urllib.request.urlopen(stack.metrics_url, timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels, value = line[len(metric) + 1:].rsplit("} ", 1)
            out[tuple(sorted(part.split("=", 1)[0] + "=" + part.split("=", 1)[1].strip('"')
                             for part in labels.split(",")))] = float(value)
    return out


def _by(samples: dict, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, value in samples.items():
        key = next(part.split("=", 1)[1] for part in labels if part.startswith(label + "="))
        out[key] = out.get(key, 0.0) + value
    return out


def test_a_healthy_dome_site_is_ok_with_every_figure_in_its_perfdata(healthy):
    rc, status, perf = check_dpm("--dome", "--prometheus", healthy.prometheus.url,
                                 "--window", "1h", *THRESHOLDS)
    assert rc == 0, status
    assert status.startswith("DOME OK - ")
    calls = _by(_exported(healthy, "dpm_dome_calls_total"), "code_class")
    puts = _by(_exported(healthy, "dpm_dome_puts_total"), "status")
    # the window (1 h) holds the whole run: the counts are the exporter's totals
    assert int(perf["calls"][0]) == sum(calls.values()) > 1000
    assert int(perf["puts"][0]) == sum(puts.values()) > 500
    answered = sum(v for c, v in calls.items() if c != "none")
    errors = calls.get("4xx", 0) + calls.get("5xx", 0)
    assert float(perf["dome_error_rate"][0]) == pytest.approx(errors / answered, rel=1e-5)
    assert float(perf["dome_fs_disabled"][0]) == 0
    assert float(perf["dome_call_p95"][0]) > 0 and perf["dome_call_p95"][1] == "s"
    assert f"{sum(calls.values()):.0f} calls" in status and "0 filesystems disabled" in status


def test_the_call_quantile_is_prometheus_histogram_quantile(healthy):
    rc, _, perf = check_dpm("--dome", "--prometheus", healthy.prometheus.url, "--window", "2m")
    direct = healthy.prometheus.value(
        "histogram_quantile(0.95, sum by (le) (rate(dpm_dome_call_seconds_bucket[120s])))")
    assert rc == 0
    assert float(perf["dome_call_p95"][0]) == pytest.approx(direct, rel=1e-3)


def test_free_space_is_the_fullest_filesystems_latest_capacity_line(healthy):
    latest = {}
    with open(f"{healthy.sim_prefix}.capacity.csv", newline="") as fh:
        for row in csv.DictReader(fh):  # in time order: the last line per filesystem stays
            latest[(row["host"], row["fs"])] = (int(row["free"]), int(row["phys"]))
    ratio = min(free / phys for free, phys in latest.values())
    fewest = min(free for free, _ in latest.values())
    rc, status, perf = check_dpm("--dome", "--prometheus", healthy.prometheus.url, "--window", "2m",
                                 "-c", f"dome_fs_free_ratio={ratio * 1.01}:")
    assert float(perf["dome_fs_free_ratio"][0]) == pytest.approx(ratio, rel=1e-5)
    assert float(perf["dome_fs_free_bytes"][0]) == pytest.approx(fewest, rel=1e-5)
    assert rc == 2 and status.startswith("DOME CRITICAL - dome_fs_free_ratio = "), status


def test_a_degraded_dome_site_is_critical_naming_each_range_left(degraded):
    rc, status, perf = check_dpm("--dome", "--prometheus", degraded.prometheus.url,
                                 "--window", "1h", *THRESHOLDS)
    assert rc == 2, status
    assert status.startswith("DOME CRITICAL - ")
    disabled = sum(1 for v in _exported(degraded, "dpm_dome_fs_enabled").values() if v == 0)
    assert disabled > 0 and float(perf["dome_fs_disabled"][0]) == disabled
    named = [part.split(" = ")[0] for part in status.removeprefix("DOME CRITICAL - ").split("; ")]
    assert named[0] in ("dome_fs_disabled", "dome_error_rate")  # the critical ones first
    assert {"dome_fs_disabled", "dome_error_rate", "failed_rate"} <= set(named)


def test_a_degraded_site_under_warning_ranges_only_is_warning(degraded):
    rc, status, _ = check_dpm("--dome", "--prometheus", degraded.prometheus.url, "--window", "1h",
                              "-w", "dome_error_rate=0.05", "-w", "dome_fs_disabled=0")
    assert rc == 1 and status.startswith("DOME WARNING - "), status
    assert "dome_error_rate" in status and "dome_fs_disabled" in status


@pytest.fixture(scope="module")
def whole_seconds(tmp_path_factory):
    # the simulated site's year: traditional stamps have none (the PFN's epoch does)
    stack = _site(tmp_path_factory, "whole", ("--stamp", "traditional", *NOTHING_GOES_WRONG),
                  run_args=("--year", "2017"))
    yield stack
    stack.stop()


def test_whole_second_stamps_give_no_call_duration_and_say_so(whole_seconds):
    rc, status, perf = check_dpm("--dome", "--prometheus", whole_seconds.prometheus.url,
                                 "--window", "1h", "-w", "dome_call:p95=0.001")
    assert rc == 0, status  # no value: no range left
    assert perf["dome_call_p95"][0] == "U" and float(perf["calls"][0]) > 1000
    assert "no call duration (whole-second stamps)" in status


def test_sub_second_stamps_do_not_say_whole_seconds(healthy):
    _, status, _ = check_dpm("--dome", "--prometheus", healthy.prometheus.url, "--window", "1h")
    assert "whole-second" not in status and "call p95 " in status


def test_a_prometheus_without_dome_metrics_is_unknown_saying_so(prometheus_factory):
    prom = prometheus_factory([])
    rc, status, _ = check_dpm("--dome", "--prometheus", prom.url, "--window", "10m")
    assert rc == 3 and "no dpm_dome_calls_total or dpm_dome_fs series" in status, status
