"""Archives into Prometheus: `dpmstream replay --openmetrics`, `promtool tsdb
create-blocks-from openmetrics`, and a Prometheus on those blocks answering, at event
times, the counts of the simulator's ground truth."""

from __future__ import annotations

import csv
import json
import subprocess
import urllib.parse
import urllib.request
from collections import Counter

import pytest

from dpmstream.parsers.records import text_to_ms
from dpmstream.commands.stack.prometheus import Prometheus
from tests.metrics_stack import DPMSTREAM, simulate

pytestmark = pytest.mark.services  # a Prometheus started by the test

TZ = "Europe/Zurich"
STEP_MS = 60_000


def query_at(url: str, promql: str, at_ms: int) -> dict[str, float]:
    q = urllib.parse.urlencode({"query": promql, "time": f"{at_ms / 1000:.3f}"})
    body = json.loads(urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10).read())
    assert body["status"] == "success", body
    return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in body["data"]["result"]}


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    work = tmp_path_factory.mktemp("archive")
    prefix = simulate(work / "day", "--scenario", "mixed", "--rate", "0.2", "--duration", str(4 * 3600),
                      "--tz", TZ)
    om = work / "day.om"
    subprocess.run([DPMSTREAM, "replay", "--quiet", "--tz", TZ, "--host", "dpmhead01.cern.ch",
                    "--openmetrics", str(om), f"{prefix}.log", f"{prefix}.dpns.log"],
                   check=True, capture_output=True, text=True, timeout=300)
    prom = Prometheus(work / "prometheus", [], scrape_interval="15s")
    blocks = prom.workdir / "data"
    done = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    prom.start()  # its storage path is the blocks folder
    with open(f"{prefix}.requests.csv", newline="") as fh:
        requests = list(csv.DictReader(fh))
    with open(f"{prefix}.calls.csv", newline="") as fh:
        calls = list(csv.DictReader(fh))
    yield prom, om, requests, calls
    prom.stop()


def test_the_file_is_openmetrics_ending_with_eof(backfilled):
    _, om, _, _ = backfilled
    text = om.read_text()
    assert text.endswith("# EOF\n")
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types)), "each family must be written once, contiguous"
    assert {"dpm_request_phase_seconds", "dpm_requests", "dpm_call_seconds", "dpm_request_polls",
            "dpm_requests_in_flight", "dpmstream_lines"} <= set(types)


def test_final_counts_by_status_equal_the_truth(backfilled):
    prom, _, requests, _ = backfilled
    end = max(text_to_ms(r["ended"]) for r in requests if r["ended"])
    at = -(-end // STEP_MS) * STEP_MS
    got = {json.loads(k)["status"]: v for k, v in
           query_at(prom.url, "sum by (status) (dpm_requests_total)", at).items()}
    assert got == dict(Counter(r["status"] for r in requests))
    assert sum(got.values()) > 2000


def test_counts_evolve_over_event_time(backfilled):
    prom, _, requests, _ = backfilled
    ended = sorted(text_to_ms(r["ended"]) for r in requests if r["ended"])
    for fraction in (0.25, 0.5, 0.75):
        at = (ended[int(len(ended) * fraction)] // STEP_MS) * STEP_MS  # a step boundary
        expected = sum(1 for t in ended if t <= at)
        got = query_at(prom.url, "sum(dpm_requests_total)", at)
        assert list(got.values()) == [expected], fraction
    # one hour of requests, as a dashboard's increase() over the archive sees it
    a = (ended[len(ended) // 3] // STEP_MS) * STEP_MS
    b = a + 3_600_000
    in_hour = sum(1 for t in ended if a < t <= b)
    got = query_at(prom.url, "sum(dpm_requests_total) - sum(dpm_requests_total offset 1h)", b)
    assert list(got.values()) == [in_hour]


def test_call_counts_equal_the_truth(backfilled):
    prom, _, _, calls = backfilled
    end = max(text_to_ms(c["ended"] or c["started"]) for c in calls)
    at = -(-end // STEP_MS) * STEP_MS
    got = query_at(prom.url, "sum by (daemon) (dpm_call_seconds_count)", at)
    got = {json.loads(k)["daemon"]: v for k, v in got.items()}
    assert got == dict(Counter(c["daemon"] for c in calls))


def test_phase_histograms_hold_every_observed_phase(backfilled):
    prom, _, requests, _ = backfilled
    end = max(text_to_ms(r["ended"]) for r in requests if r["ended"])
    at = -(-end // STEP_MS) * STEP_MS
    got = {json.loads(k)["phase"]: v for k, v in
           query_at(prom.url, "sum by (phase) (dpm_request_phase_seconds_count)", at).items()}
    assert got["proc"] == sum(1 for r in requests if r["proc_s"])
    assert got["total"] == sum(1 for r in requests if r["total_s"])
