"""Probe source: quantiles and rates over a window from the Prometheus metric contract.

Phase quantiles are histogram_quantile over rate(dpm_request_phase_seconds_bucket[window]),
summed over hosts/ops/statuses selected (a ratio: increase()'s extrapolation cancels out).

Counts (requests by status, calls) are what a user can check against the counters'
samples, never increase()'s extrapolation (which gave 3,247 requests for 2,794 records):
per series, the last sample in the window minus the last sample at or before the window's
start (0 for a series with none there: dpmstream creates a label set at its first count,
so a series first seen in the window was born in it), summed. A target that restarted in
the window (or since that baseline sample: a counter dropped, or its _created sample
changed) is counted from its raw samples, a restart counting the value after it. All queries are evaluated at
one instant, the probe's start.

A DOME site (Wanted.dome): calls by code class and puts by status are counted the same
way (dpm_dome_calls_total, dpm_dome_puts_total); call-duration quantiles are
histogram_quantile over dpm_dome_call_seconds (exported from sub-second stamps only);
the filesystems are their gauges' latest samples (within Prometheus' lookback): the
count of dpm_dome_fs_enabled at 0 (0 for a site whose filesystems are known only from
their capacity gauges: never disabled), and the lowest dpm_dome_fs_free_bytes and
free / size.

Every HTTP request gets what is left of the probe's time budget (and Prometheus its own
query timeout), so the probe never outlives -t.
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
STALENESS_S = 300  # Prometheus' lookback: how far before an instant a sample still counts
MAX_RESTARTED = 50  # targets counted from raw samples in one check
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


def _number(text) -> float | None:
    """A sample value as Prometheus writes it ("12", "NaN", "+Inf"); None for NaN and
    infinities (no value); ValueError for anything else."""
    try:
        value = float(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if value is None:
        raise ValueError(f"{text!r} is not a number")
    return None if math.isnan(value) or math.isinf(value) else value


def _series_key(labels: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def counted_increase(baseline: tuple[float, float | None],
                     samples: list[tuple[float, float | None]]) -> float:
    """What a counter counted from its `baseline` through its `samples`, each a (value,
    created) pair (created: its _created sample, the process' start of the counter, None
    where not exported): each rise, and after a restart the value it restarted to. A
    restart is a drop, or a new created time (a new process that counted past the old
    value before its first scrape shows no drop)."""
    total, (previous, born) = 0.0, baseline
    for value, created in samples:
        restarted = value < previous or (created is not None and born is not None
                                         and created != born)
        total += value if restarted else value - previous
        previous, born = value, created if created is not None else born
    return total


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
        self.at = time.time()  # the instant every query is evaluated at

    def progress(self) -> str:
        """What was under way: the reason given when the time budget runs out."""
        return f"querying Prometheus at {self.url}" + (f" ({self.queries[-1]})" if self.queries else "")

    def query(self, promql: str, kind: str = "vector") -> list[dict]:
        """Run an instant query at the probe's instant; the result of that `kind` (vector:
        [{metric: {...}, value: [t, "v"]}], matrix: [{metric, values: [[t, "v"], ...]}])."""
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise SourceError(f"timed out: no time left to query Prometheus at {self.url}")
        self.queries.append(promql)
        params = urllib.parse.urlencode({"query": promql, "time": f"{self.at:.3f}",
                                         "timeout": f"{max(int((left - 0.05) * 1000), 50)}ms"})
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
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != kind:
            got = data.get("resultType") if isinstance(data, dict) else data
            raise SourceError(f"Prometheus at {self.url} answered a {got!r} where a {kind} was "
                              f"asked for ({promql})")
        result = data.get("result")
        if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
            raise SourceError(f"Prometheus at {self.url} sent a {kind} that is no list of series "
                              f"({promql})")
        return result

    def rows(self, promql: str) -> list[tuple[dict, float | None]]:
        """(labels, value) of each series of an instant vector; a sample that is missing
        or not a number is a SourceError quoting it and the query."""
        out = []
        for row in self.query(promql):
            try:
                labels, pair = row["metric"], row["value"]
                if not isinstance(labels, dict) or not isinstance(pair, list) or len(pair) != 2:
                    raise TypeError
                out.append((labels, _number(pair[1])))
            except (KeyError, TypeError, ValueError) as exc:
                raise SourceError(self._bad_sample(row, promql, exc)) from None
        return out

    def series(self, promql: str) -> list[tuple[dict, list[tuple[float, float]]]]:
        """(labels, [(time, value)] oldest first) of each series of a range vector."""
        out = []
        for row in self.query(promql, kind="matrix"):
            try:
                labels, pairs = row["metric"], row["values"]
                if not isinstance(labels, dict) or not isinstance(pairs, list) or \
                        not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                    raise TypeError
                values = [(float(t), _number(text)) for t, text in pairs]
                out.append((labels, [(t, v) for t, v in values if v is not None]))
            except (KeyError, TypeError, ValueError) as exc:
                raise SourceError(self._bad_sample(row, promql, exc)) from None
        return out

    def _bad_sample(self, row, promql: str, exc: Exception) -> str:
        what = f"has no {exc}" if isinstance(exc, KeyError) else \
            str(exc) if isinstance(exc, ValueError) else "is malformed"
        text = json.dumps(row)
        text = text if len(text) <= 200 else text[:200] + "..."
        return f"Prometheus at {self.url} sent a sample that {what}: {text} (query {promql})"

    def count_in_window(self, metric: str, created: str, sel: str,
                        by: str | None = None) -> dict[str, float]:
        """How much the counter `metric`{sel} counted in the window, summed by the label
        `by` (or in all: key ""), from its samples at the window's edges (module doc);
        `created` names its _created series, which tells a restart apart."""
        w = prom_duration(self.window_s)
        # a baseline sample lies up to Prometheus' lookback (5 min) before the window
        reach = prom_duration(self.window_s + STALENESS_S)
        sel_series = f"{metric}{sel}"
        restarted = (f"((resets({sel_series}[{reach}]) > 0) or "
                     f"(changes({created}{sel}[{reach}]) > 0))")
        group = f" by ({by})" if by else ""
        # range functions skip the staleness markers a failed scrape leaves
        baseline = f"last_over_time({sel_series}[{STALENESS_S}s] offset {w})"
        edges = (f"sum{group} (((last_over_time({sel_series}[{w}]) - {baseline}) "
                 f"or last_over_time({sel_series}[{w}])) unless on (job, instance) {restarted})")
        counts: dict[str, float] = {}
        for labels, value in self.rows(edges):
            counts[labels.get(by, "")] = counts.get(labels.get(by, ""), 0.0) + (value or 0.0)
        targets = [labels for labels, _ in self.rows(f"count by (job, instance) {restarted}")]
        if len(targets) > MAX_RESTARTED:
            raise SourceError(f"{len(targets)} targets of {metric} restarted in the window (more "
                              f"than {MAX_RESTARTED}): counting them from raw samples is refused")
        for target in targets:
            tsel = _with_target(sel, target)
            starts = {}  # series -> {sample time: created}
            for labels, samples in self.series(f"{created}{tsel}[{w}]"):
                starts[_series_key(labels)] = dict(samples)
            base = {}
            for name in (metric, created):
                for labels, value in self.rows(
                        f"last_over_time({name}{tsel}[{STALENESS_S}s] offset {w})"):
                    base.setdefault(_series_key(labels), {})[name] = value
            for labels, samples in self.series(f"{metric}{tsel}[{w}]"):
                key = _series_key(labels)
                born = starts.get(key, {})
                before = base.get(key, {})
                counts[labels.get(by, "")] = counts.get(labels.get(by, ""), 0.0) + counted_increase(
                    (before.get(metric) or 0.0, before.get(created)),
                    [(value, born.get(t)) for t, value in samples])
        return counts

    def newest_sample_age(self) -> float | None:
        """Seconds from the newest event the pipeline has seen to now: its event-lag gauge
        (wall clock minus latest event time when the gauge was set) plus the gauge's age.
        A hung daemon makes it grow; a stopped pipeline too (its last sample ages)."""
        # the gauge's newest event time (its sample's time less its value) over the last
        # 5 minutes, by a subquery: an instant query would see nothing just after a failed
        # scrape (its staleness markers); the freshest host counts
        sel = _matchers(host=self.host)
        rows = self.rows(f"time() - max(max_over_time((timestamp({LAG}{sel}) - {LAG}{sel})"
                         f"[{STALENESS_S}s:1s]))")
        return rows[0][1] if rows else None

    def fetch(self, wanted: Wanted) -> Snapshot:
        if wanted.dome:
            return self.fetch_dome(wanted)
        w = prom_duration(self.window_s)
        req_sel = _matchers(host=self.host, op=self.op)
        snap = Snapshot(window_s=self.window_s, source=self.url)
        if wanted.age:
            snap.age_s = self.newest_sample_age()

        snap.by_status = self.count_in_window("dpm_requests_total", "dpm_requests_created",
                                              req_sel, by="status")
        call_sel = _matchers(host=self.host)
        snap.calls = self.count_in_window("dpm_call_seconds_count", "dpm_call_seconds_created",
                                          call_sel).get("", 0.0)

        if not snap.by_status and not snap.calls:
            reach = prom_duration(self.window_s + STALENESS_S)
            present = self.rows(
                f"count(last_over_time(dpm_requests_total{req_sel}[{reach}])) or "
                f"count(last_over_time(dpm_call_seconds_count{call_sel}[{reach}]))")
            if not present:
                raise SourceError(
                    f"no dpm_requests_total or dpm_call_seconds series at {self.url}"
                    f"{_filter_text(self.host, self.op)}: is the pipeline scraped?")
            return snap  # series exist, nothing happened in the window

        for q in wanted.phase_quantiles:
            expr = (f"histogram_quantile({q}, sum by (le, phase) "
                    f"(rate(dpm_request_phase_seconds_bucket{req_sel}[{w}])))")
            for labels, value in self.rows(expr):
                snap.phases[(labels.get("phase", ""), q)] = value

        if wanted.ns:
            ops = "|".join(sorted(wanted.ns))
            ns_sel = _matchers(host=self.host, daemon=self.ns_daemons, op=ops)
            for q in sorted({q for qs in wanted.ns.values() for q in qs}):
                expr = (f"histogram_quantile({q}, sum by (le, op) "
                        f"(rate(dpm_call_seconds_bucket{ns_sel}[{w}])))")
                for labels, value in self.rows(expr):
                    snap.ns[(labels.get("op", ""), q)] = value
        return snap


    def fetch_dome(self, wanted: Wanted) -> Snapshot:
        """A DOME site's window: calls, puts, call-duration quantiles, filesystems now."""
        w = prom_duration(self.window_s)
        sel = _matchers(host=self.host)
        snap = Snapshot(window_s=self.window_s, source=self.url, dome=True)
        if wanted.age:
            snap.age_s = self.newest_sample_age()
        snap.calls_by_class = self.count_in_window("dpm_dome_calls_total",
                                                   "dpm_dome_calls_created", sel, by="code_class")
        snap.calls = sum(snap.calls_by_class.values())
        snap.by_status = self.count_in_window("dpm_dome_puts_total", "dpm_dome_puts_created",
                                              sel, by="status")
        fs = f"[{STALENESS_S}s]"  # a gauge's latest sample, even just after a failed scrape
        enabled = f"last_over_time(dpm_dome_fs_enabled{fs})"
        free = f"last_over_time(dpm_dome_fs_free_bytes{fs})"
        size = f"last_over_time(dpm_dome_fs_size_bytes{fs})"
        # 0 when filesystems are known (from the head's enable/disable lines, or the disk
        # nodes' capacity lines: a site where none was ever disabled) and none is disabled;
        # nothing when none is known
        snap.fs_disabled = self._one(f"count({enabled} == 0) or 0 * count({enabled}) "
                                     f"or 0 * count({size})")
        snap.fs_free_bytes = self._one(f"min({free})")
        snap.fs_free_ratio = self._one(f"min({free} / on (server, fs) ({size} > 0))")
        if not snap.calls and not snap.by_status:
            reach = prom_duration(self.window_s + STALENESS_S)
            if not self.rows(f"count(last_over_time(dpm_dome_calls_total{sel}[{reach}]))") \
                    and snap.fs_disabled is None:
                raise SourceError(f"no dpm_dome_calls_total or dpm_dome_fs series at {self.url}"
                                  f"{_filter_text(self.host, None)}: is the DOME pipeline "
                                  f"scraped?")
            return snap
        for q in wanted.dome_call_quantiles:
            snap.dome_call[q] = self._one(
                f"histogram_quantile({q}, sum by (le) "
                f"(rate(dpm_dome_call_seconds_bucket{sel}[{w}])))")
        # The exporter observes a call's duration only from sub-second stamps: calls
        # answered in the window with none observed were stamped in whole seconds.
        answered = sum(v for c, v in snap.calls_by_class.items() if c != "none")
        if answered and not self.count_in_window("dpm_dome_call_seconds_count",
                                                 "dpm_dome_call_seconds_created", sel).get(""):
            snap.whole_seconds = True
        return snap

    def _one(self, promql: str) -> float | None:
        """The value of a query answering one series at most; None for none (or NaN)."""
        rows = self.rows(promql)
        return rows[0][1] if rows else None


def _with_target(sel: str, target: dict) -> str:
    """The selector `sel` narrowed to one scrape target (its job and instance)."""
    exact = ",".join(f'{k}="{_escape(target.get(k, ""))}"' for k in ("job", "instance"))
    return "{" + ",".join(part for part in (sel[1:-1], exact) if part) + "}"


def _filter_text(host, op) -> str:
    parts = [f"{k}=~{v}" for k, v in (("host", host), ("op", op)) if v]
    return f" ({', '.join(parts)})" if parts else ""
