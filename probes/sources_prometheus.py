"""Probe source: quantiles and rates over a window from the Prometheus metric contract.

Phase quantiles are histogram_quantile over rate(dpm_request_phase_seconds_bucket[window]),
summed over hosts/ops/statuses selected; rates are increases of dpm_requests_total by
status over the same window. Every HTTP request gets what is left of the probe's time
budget (and Prometheus its own query timeout), so the probe never outlives -t.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request

from dpmstream.probes.measurement import Snapshot, SourceError, Wanted, prom_duration

NS_DAEMONS = "dpns|lfc"


def _matchers(**labels: str | None) -> str:
    """{host=~"...",op=~"..."}: values are regexes (PromQL anchors them); None is omitted."""
    parts = [f'{name}=~"{_escape(value)}"' for name, value in labels.items() if value]
    return "{" + ",".join(parts) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _number(text: str) -> float | None:
    value = float(text)
    return None if math.isnan(value) or math.isinf(value) else value


class PrometheusSource:
    def __init__(self, url: str, window_s: float, *, host: str | None = None,
                 op: str | None = None, ns_daemons: str = NS_DAEMONS,
                 deadline: float | None = None) -> None:
        self.url = url.rstrip("/")
        self.window_s = window_s
        self.host = host
        self.op = op
        self.ns_daemons = ns_daemons
        # time.monotonic() value by which every request must be done
        self.deadline = deadline if deadline is not None else time.monotonic() + 10.0
        self.queries: list[str] = []  # for -v output

    def query(self, promql: str) -> list[dict]:
        """Run an instant query; the result vector ([{metric: {...}, value: [t, "v"]}])."""
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise SourceError(f"no time left to query Prometheus at {self.url}")
        self.queries.append(promql)
        params = urllib.parse.urlencode({"query": promql, "timeout": f"{max(int((left - 0.05) * 1000), 50)}ms"})
        req = urllib.request.Request(f"{self.url}/api/v1/query?{params}",
                                     headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=left) as resp:
                body = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise SourceError(f"Prometheus at {self.url} refused the query: "
                              f"HTTP {exc.code} {_error_text(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SourceError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        except ValueError:
            raise SourceError(f"Prometheus at {self.url} sent an answer that is not JSON") from None
        if body.get("status") != "success":
            raise SourceError(f"Prometheus query failed: {body.get('error', body)}")
        data = body.get("data", {})
        if data.get("resultType") != "vector":
            raise SourceError(f"unexpected Prometheus result type {data.get('resultType')!r}")
        return data.get("result", [])

    def fetch(self, wanted: Wanted) -> Snapshot:
        w = prom_duration(self.window_s)
        req_sel = _matchers(host=self.host, op=self.op)
        snap = Snapshot(window_s=self.window_s, source=self.url)

        for row in self.query(f"sum by (status) (increase(dpm_requests_total{req_sel}[{w}]))"):
            value = _number(row["value"][1])
            if value is not None:
                snap.by_status[row["metric"].get("status", "")] = value
        call_sel = _matchers(host=self.host)
        for row in self.query(f"sum(increase(dpm_call_seconds_count{call_sel}[{w}]))"):
            snap.calls = _number(row["value"][1]) or 0.0

        if not snap.by_status and not snap.calls:
            present = self.query(
                f"count(dpm_requests_total{req_sel}) or count(dpm_call_seconds_count{call_sel})")
            if not present:
                raise SourceError(
                    f"no dpm_requests_total or dpm_call_seconds series at {self.url}"
                    f"{_filter_text(self.host, self.op)}: is the pipeline scraped?")
            return snap  # series exist, nothing happened in the window

        for q in wanted.phase_quantiles:
            expr = (f"histogram_quantile({q}, sum by (le, phase) "
                    f"(rate(dpm_request_phase_seconds_bucket{req_sel}[{w}])))")
            for row in self.query(expr):
                snap.phases[(row["metric"].get("phase", ""), q)] = _number(row["value"][1])

        if wanted.ns:
            ops = "|".join(sorted(wanted.ns))
            ns_sel = _matchers(host=self.host, daemon=self.ns_daemons, op=ops)
            for q in sorted({q for qs in wanted.ns.values() for q in qs}):
                expr = (f"histogram_quantile({q}, sum by (le, op) "
                        f"(rate(dpm_call_seconds_bucket{ns_sel}[{w}])))")
                for row in self.query(expr):
                    snap.ns[(row["metric"].get("op", ""), q)] = _number(row["value"][1])
        return snap


def _filter_text(host, op) -> str:
    parts = [f"{k}=~{v}" for k, v in (("host", host), ("op", op)) if v]
    return f" ({', '.join(parts)})" if parts else ""


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read().decode("utf-8")).get("error", "")
    except Exception:  # the body is only for the message
        return exc.reason or ""
