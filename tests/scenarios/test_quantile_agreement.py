"""Quantiles from a real Prometheus agree with the exact ones of the records within 10%.

The thesis and the heavy simulated workloads go through `dpmstream run --once --hold`
(one process each, told apart by host); a private Prometheus scrapes both; then
histogram_quantile() over the scraped buckets, per op and phase, is compared with the
replay summary's nearest-rank quantiles (streams/sinks/summary.py) of the very records that
run wrote. The cumulative buckets are used (no rate(): a held run's counters do not
move); check_dpm --prometheus and the dashboards interpolate in the same buckets.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from dpmstream.parsers.records import CALL_MS_FIELDS, PHASES, REQUEST_MS_FIELDS, key_of
from dpmstream.commands.stack.process import free_port, tail, wait_for
from dpmstream.commands.stack.prometheus import Prometheus
from dpmstream.streams.sinks.summary import QUANTILES, Series, Summary
from tests.metrics_stack import DPMSTREAM, simulate

pytestmark = pytest.mark.services  # a Prometheus started by the test

SCENARIOS = ("thesis", "heavy")
# Log stamps have a resolution of 1 ms: below 10 ms, 10% is finer than the data.
RESOLUTION_S = 0.001


def _host(scenario: str) -> str:
    return f"{scenario}.head.example.org"


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """{scenario: Summary of its records}, and the Prometheus holding their metrics."""
    work = tmp_path_factory.mktemp("quantiles")
    procs, outputs, targets = {}, {}, []
    try:
        for scenario in SCENARIOS:
            prefix = simulate(work / scenario / "sim", "--scenario", scenario)
            port = free_port()
            outputs[scenario] = work / scenario / "run.out"
            procs[scenario] = subprocess.Popen(
                [DPMSTREAM, "run", "--once", "--hold", "1800", "--metrics-port", str(port),
                 "--host", _host(scenario), "--year", "2011",
                 "--records", str(work / scenario / "records.jsonl"),
                 f"{prefix}.log", f"{prefix}.dpns.log"],
                stdout=open(outputs[scenario], "w"), stderr=subprocess.STDOUT)
            targets.append(f"127.0.0.1:{port}")
        for scenario, proc in procs.items():
            # The summary is printed, then "Metrics: ... (served for 1800 s more)".
            done = wait_for(lambda: "Metrics: " in outputs[scenario].read_text()
                            or proc.poll() is not None, timeout=900, interval=0.5)
            assert done and proc.poll() is None, tail(outputs[scenario])
        summaries = {}
        for scenario in SCENARIOS:
            summary = Summary()
            with open(work / scenario / "records.jsonl") as fh:
                for line in fh:
                    summary.write(_in_ms(json.loads(line)))
            summaries[scenario] = summary
        prom = Prometheus(work / "prometheus", targets, scrape_interval="1s")
        prom.start()
        try:
            for scenario, summary in summaries.items():
                requests = sum(summary.statuses.values())
                prom.wait_for(f'sum(dpm_requests_total{{host="{_host(scenario)}"}})',
                              lambda rows, n=requests: rows and float(rows[0]["value"][1]) == n,
                              timeout=120)
            yield summaries, prom
        finally:
            prom.stop()
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)


def _in_ms(record: dict) -> dict:
    """A record as JSON lines hold it (by column, float seconds) -> as the core makes it
    (by key, int ms)."""
    fields = REQUEST_MS_FIELDS if record["kind"] == "request" else CALL_MS_FIELDS
    return {key_of(c): round(v * 1000) if key_of(c) in fields and v is not None else v
            for c, v in record.items()}


def _estimates(prom, promql: str, key_labels: tuple[str, ...]) -> dict:
    return {tuple(row["metric"][k] for k in key_labels): float(row["value"][1])
            for row in prom.query(promql)}


def _disagreements(exact_of, estimated: dict, what: str) -> tuple[list[str], dict]:
    """Lines for every estimate off by more than 10% (and more than 1 ms); the worst
    relative error per key (the figures of bench/RESULTS.md)."""
    bad, errors = [], {}
    for key, series in exact_of.items():
        for q in QUANTILES:
            exact = max(series.quantile(q), 0) / 1000.0   # negative waits observe as 0
            got = estimated[q].get(key)
            assert got is not None, f"Prometheus has no {what} {key} p{q * 100:g}"
            error = abs(got - exact)
            errors[key] = max(errors.get(key, 0.0), error / exact if exact else 0.0)
            if error > max(0.10 * exact, RESOLUTION_S):
                bad.append(f"{what} {key} p{q * 100:g}: exact {exact:.3f} s, "
                           f"histogram_quantile {got:.4f} s ({error / max(exact, 1e-9):.0%} off)")
    return bad, errors


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_phase_quantiles_from_prometheus_agree_with_the_exact_ones_within_ten_percent(
        scraped, scenario):
    summaries, prom = scraped
    summary = summaries[scenario]
    estimated = {q: _estimates(prom, f"histogram_quantile({q}, sum by (le, op, phase) "
                                     f"(dpm_request_phase_seconds_bucket{{host=\"{_host(scenario)}\"}}))",
                               ("op", "phase"))
                 for q in QUANTILES}
    exact_of = {key: series for key, series in summary.phases.items() if series.count >= 100}
    assert {phase for _, phase in exact_of} == {phase for _, phase in PHASES}
    # All ops together, as check_dpm --prometheus asks: sum by (le, phase).
    for q in QUANTILES:
        for (phase,), got in _estimates(
                prom, f"histogram_quantile({q}, sum by (le, phase) "
                      f"(dpm_request_phase_seconds_bucket{{host=\"{_host(scenario)}\"}}))",
                ("phase",)).items():
            estimated[q][("all", phase)] = got
    for _, phase in PHASES:
        merged = Series()
        for (op, p), series in summary.phases.items():
            if p == phase:
                for v in series.values:
                    merged.add(v)
        exact_of[("all", phase)] = merged
    bad, errors = _disagreements(exact_of, estimated, "phase")
    assert not bad, "\n".join(bad)
    print(f"\n{scenario}: worst error of p50/p95/p99 per op and phase: " + ", ".join(
        f"{op} {phase} {error:.1%}" for (op, phase), error in sorted(errors.items())))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_call_quantiles_from_prometheus_agree_with_the_exact_ones_within_ten_percent(
        scraped, scenario):
    summaries, prom = scraped
    summary = summaries[scenario]
    estimated = {q: _estimates(prom, f"histogram_quantile({q}, sum by (le, daemon, op) "
                                     f"(dpm_call_seconds_bucket{{host=\"{_host(scenario)}\"}}))",
                               ("daemon", "op"))
                 for q in QUANTILES}
    exact_of = {key: series for key, series in summary.calls.items() if series.count >= 100}
    assert ("dpns", "creat") in exact_of
    bad, _ = _disagreements(exact_of, estimated, "call")
    assert not bad, "\n".join(bad)
