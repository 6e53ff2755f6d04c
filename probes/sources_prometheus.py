"""Probe source: quantiles and rates over a window from the Prometheus metric contract.

Phase quantiles are histogram_quantile over rate(dpm_request_phase_seconds_bucket[window]),
summed over hosts/ops/statuses selected; rates are increases of dpm_requests_total by
status over the same window. Every HTTP request gets what is left of the probe's time
budget (and Prometheus its own query timeout), so the probe never outlives -t.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.parse

from dpmstream.probes.measurement import Snapshot, SourceError, Wanted, prom_duration

NS_DAEMONS = "dpns|lfc"
LAG = "dpmstream_event_lag_seconds"  # exported by every pipeline (streams/metrics/exporter.py)
MAX_BODY = 4 << 20  # bytes: a vector of a few phases is kilobytes
_CHUNK = 64 * 1024


class BodyTooLarge(ValueError):
    pass


def http_get(url: str, deadline: float, max_body: int):
    """GET url -> (status, reason, headers, body), all within `deadline` (time.monotonic):
    the socket timeout is what is left before each read, so neither a silent server nor
    one trickling bytes keeps the probe past it. Redirects are returned, never followed;
    a body over max_body bytes raises BodyTooLarge."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OSError(f"not an http(s) URL: {url}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=_left(deadline))
    try:
        conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""),
                     headers={"Accept": "application/json", "Accept-Encoding": "identity"})
        sock = conn.sock  # getresponse() hands it to the response when the server closes
        sock.settimeout(_left(deadline))
        resp = conn.getresponse()
        length = resp.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > max_body:
            raise BodyTooLarge(f"{max_body >> 20} MiB (Content-Length {length})")
        chunks, got = [], 0
        while True:
            sock.settimeout(_left(deadline))
            chunk = resp.read1(_CHUNK)
            if not chunk:
                break
            got += len(chunk)
            if got > max_body:
                raise BodyTooLarge(f"{max_body >> 20} MiB")
            chunks.append(chunk)
        return resp.status, resp.reason, resp.headers, b"".join(chunks)
    finally:
        conn.close()


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


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
                 deadline: float | None = None, max_body: int = MAX_BODY) -> None:
        self.url = url.rstrip("/")
        self.window_s = window_s
        self.host = host
        self.op = op
        self.ns_daemons = ns_daemons
        # time.monotonic() value by which every request must be done
        self.deadline = deadline if deadline is not None else time.monotonic() + 10.0
        self.max_body = max_body
        self.queries: list[str] = []  # for -v output

    def progress(self) -> str:
        """What was under way: the reason given when the time budget runs out."""
        return f"querying Prometheus at {self.url}" + (f" ({self.queries[-1]})" if self.queries else "")

    def query(self, promql: str) -> list[dict]:
        """Run an instant query; the result vector ([{metric: {...}, value: [t, "v"]}])."""
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise SourceError(f"timed out: no time left to query Prometheus at {self.url}")
        self.queries.append(promql)
        params = urllib.parse.urlencode({"query": promql, "timeout": f"{max(int((left - 0.05) * 1000), 50)}ms"})
        try:
            status, reason, headers, raw = http_get(f"{self.url}/api/v1/query?{params}",
                                                    self.deadline, self.max_body)
        except BodyTooLarge as exc:
            raise SourceError(f"Prometheus at {self.url} sent more than {exc}: refused "
                              f"(is this URL a Prometheus?)") from None
        except TimeoutError:
            raise SourceError(f"timed out waiting for Prometheus at {self.url}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise SourceError(f"cannot reach Prometheus at {self.url}: {exc}") from None
        if 300 <= status < 400:
            raise SourceError(f"Prometheus at {self.url} answered HTTP {status} {reason}, a "
                              f"redirect to {headers.get('Location', '?')}: redirects are not "
                              f"followed, give the final URL")
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            body = None
        if status != 200:
            error = body.get("error", "") if isinstance(body, dict) else reason
            raise SourceError(f"Prometheus at {self.url} refused the query: HTTP {status} {error}")
        if not isinstance(body, dict):
            raise SourceError(f"Prometheus at {self.url} sent an answer that is not JSON")
        if body.get("status") != "success":
            raise SourceError(f"Prometheus query failed: {body.get('error', body)}")
        data = body.get("data", {})
        if data.get("resultType") != "vector":
            raise SourceError(f"unexpected Prometheus result type {data.get('resultType')!r}")
        return data.get("result", [])

    def newest_sample_age(self) -> float | None:
        """Seconds from the newest event the pipeline has seen to now: its event-lag gauge
        (wall clock minus latest event time when the gauge was set) plus the gauge's age.
        A hung daemon makes it grow; a stopped pipeline too (its last sample ages)."""
        sel = _matchers(host=self.host)
        rows = self.query(f"min({LAG}{sel} + time() - timestamp({LAG}{sel}))")
        return _number(rows[0]["value"][1]) if rows else None

    def fetch(self, wanted: Wanted) -> Snapshot:
        w = prom_duration(self.window_s)
        req_sel = _matchers(host=self.host, op=self.op)
        snap = Snapshot(window_s=self.window_s, source=self.url)
        if wanted.age:
            snap.age_s = self.newest_sample_age()

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
