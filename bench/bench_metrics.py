"""/metrics under many label sets: series, size and scrape time, with and without the budget.

The case of issue 12: call records of 300 hosts x 40 ops x 3 results (ok, error, no
returns line), then the requests of 300 hosts x 2 ops x 4 statuses, fed into
PipelineMetrics, served on 127.0.0.1, and /metrics fetched over HTTP (best of 3). Without
a budget the same case would be ~3 M series with the dense buckets (78 per call label
set), too big to serve: the unbounded figure is measured on --unbounded-hosts hosts.

    .venv/bin/python bench/bench_metrics.py [--hosts 300] [--ops 40] [--unbounded-hosts 10]
"""

from __future__ import annotations

import argparse
import time
import urllib.request

from prometheus_client import CollectorRegistry

from dpmstream.parsers.records import CALL_FIELDS, REQUEST_FIELDS
from dpmstream.streams.metrics.exporter import PipelineMetrics, serve
from dpmstream.streams.metrics.series_budget import DEFAULT_MAX_SERIES


def _records(hosts: int, ops: int):
    for h in range(hosts):
        host = f"head{h:03d}.example.org"
        for o in range(ops):
            for rc in (0, 1, None):
                rec = dict.fromkeys(CALL_FIELDS)
                rec.update(kind="call", host=host, daemon="dpns", op=f"op{o:02d}", rc=rc,
                           started=0, ended=None if rc is None else 7,
                           duration_ms=None if rc is None else 7)
                yield rec
        for op in ("put", "get"):
            for status in ("success", "failed", "aborted", "incomplete"):
                rec = dict.fromkeys(REQUEST_FIELDS)
                rec.update(kind="request", host=host, op=op, status=status, polls=3,
                           auth_ms=20, request_ms=5, queue_ms=700, proc_ms=500, poll_ms=9,
                           ready_wait_ms=1970, transfer_ms=80, done_ms=6, total_ms=2080)
                yield rec


def measure(max_series: int, hosts: int, ops: int) -> tuple[int, float, float]:
    """(series, MB, best scrape seconds) of /metrics."""
    metrics = PipelineMetrics(CollectorRegistry(), max_series=max_series,
                              max_hosts=hosts + 1, max_unknown_ops=ops + 1)
    for rec in _records(hosts, ops):
        metrics.write(rec)
    server = serve(0, registry=metrics.registry)
    try:
        best, body = float("inf"), b""
        for _ in range(3):
            t0 = time.perf_counter()
            with urllib.request.urlopen(server.url, timeout=600) as resp:
                body = resp.read()
            best = min(best, time.perf_counter() - t0)
    finally:
        server.close()
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return series, len(body) / 1e6, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--ops", type=int, default=40)
    ap.add_argument("--unbounded-hosts", type=int, default=10)
    args = ap.parse_args()
    print(f"H hosts x {args.ops} ops x 3 results of calls, H hosts x 2 ops x 4 statuses "
          f"of requests")
    print(f"{'H':>5} {'budget per family':>22} {'series':>10} {'/metrics MB':>12} {'scrape s':>9}")
    for hosts, label, budget in (
            (args.unbounded_hosts, "none", 10**12),
            (args.unbounded_hosts, f"{DEFAULT_MAX_SERIES:,} (default)", DEFAULT_MAX_SERIES),
            (args.hosts, f"{DEFAULT_MAX_SERIES:,} (default)", DEFAULT_MAX_SERIES)):
        series, mb, seconds = measure(budget, hosts, args.ops)
        print(f"{hosts:>5} {label:>22} {series:>10,} {mb:>12.1f} {seconds:>9.2f}")


if __name__ == "__main__":
    main()
