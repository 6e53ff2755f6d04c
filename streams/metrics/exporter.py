"""The Prometheus metric contract (dashboards and the Nagios probe rely on these names).

    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry)
    pipeline = Pipeline(on_record=metrics.observe_record)
    ...
    metrics.update_from_stats(pipeline.stats)      # after each batch of lines
    server = serve(9108, registry=registry)         # http://127.0.0.1:9108/metrics

Driver-independent: `dpmstream run`, the Kafka worker and the OpenMetrics exporter all
feed records and pipeline stats the same way. A private registry, never the global one,
so several pipelines (and tests) can live in one process.

Label values are bounded (a label set is a time series, kept forever by Prometheus): op is
a known op of the daemon, or one of the first `max_unknown_ops` other ops seen for that
daemon, else "other"; host and daemon past their caps become "other" too; nothing that
does not look like an identifier is ever used as a label (a misparse could put a DN or a
path there). The product of the labels is bounded too: each family has a series budget
(`max_series`, series_budget.py), past which new label sets count under host/op/daemon
"other" and dpmstream_series_overflow_total{metric} counts them.

Histogram bounds (histogram_buckets.py) are log-spaced and dense (ratio 1.15, per phase
over its own range), so histogram_quantile() agrees with the exact quantiles of a replay
within 10%.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from dpmstream.parsers.records import PHASES, STATUSES
from dpmstream.streams.metrics.buckets import CALL_BUCKETS, PHASE_BUCKETS
from dpmstream.streams.metrics.labelled_histogram import LabelledHistogram
from dpmstream.streams.metrics.series_budget import DEFAULT_MAX_SERIES, OTHER, SeriesBudget

POLL_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64, 128)

# Ops each daemon is known to log (NS092/DP092 op word; SRM method). Other ops still get a
# label of their own, up to a cap per daemon.
_NS_OPS = """
    access accessr addreplica aborttrans chclass chdir chmod chown closedir creat delcomment
    delete delreplica delreplicasbysfn du endsess endtrans enterclass entergrpmap enterusrmap
    getacl getcomment getgrpbygid getgrpbygids getgrpbynam getidmap getifcevers getlinks
    getpath getreplica getreplicas getreplicax getreplicass getsegattrs getusrbynam
    getusrbyuid lchown listclass listlinks listreplica listreplicax lstat mkdir modifyclass
    modgrpmap modreplica modreplicax modusrmap opendir ping queryclass readdir readlink rename
    rewinddir rmdir rmgrpmap rmusrmap setacl setatime setcomment setfsize setfsizecs
    setfsizeg setptime setratime setrltime setrstatus setrtype setsegattrs startsess
    starttrans stat statg statr symlink undelete unlink updatefile_checksum
    updateseg_checksum utime
""".split()
_DPM_OPS = """
    put get getstatus_putreq getstatus_getreq putdone relfiles abortreq abortfiles
    proc_put proc_get addfs addpool copy extendfilelife get_max_req getpoolfs getpools
    getprotocols getreqid getreqsummary getspacemd getspacetoken getstatus_copyreq
    inc_reqctr modifyfs modifypool ping releasespace reservespace rm rmfs rmpool
    updatefilestatus updatespace accessr
""".split()
_SRM_OPS = """
    PrepareToPut PrepareToGet StatusOfPutRequest StatusOfGetRequest PutDone ReleaseFiles
    AbortRequest AbortFiles BringOnline StatusOfBringOnlineRequest Copy StatusOfCopyRequest
    Ls StatusOfLsRequest Mkdir Rmdir Rm Mv Ping GetSpaceMetaData GetSpaceTokens
    ReserveSpace StatusOfReserveSpaceRequest ReleaseSpace UpdateSpace ExtendFileLifeTime
    ExtendFileLifeTimeInSpace GetTransferProtocols GetRequestTokens GetRequestSummary
    SetPermission CheckPermission GetPermission PurgeFromSpace ChangeSpaceForFiles
    SuspendRequest ResumeRequest
""".split()
KNOWN_OPS: dict[str, frozenset[str]] = {
    "dpns": frozenset(_NS_OPS),
    "lfc": frozenset(_NS_OPS),
    "dpm": frozenset(_DPM_OPS),
    "srmv2.2": frozenset(_SRM_OPS),
    "srmv2": frozenset(_SRM_OPS),
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}\Z")


class BoundedLabel:
    """A label's values: the known ones, then the first `cap` others seen, then OTHER."""

    def __init__(self, cap: int, known: frozenset[str] = frozenset()) -> None:
        self.cap = cap
        self.known = known
        self.extra: set[str] = set()
        self.overflowed = 0  # values folded into OTHER (how often)

    def __call__(self, value) -> str:
        if value is None or value == "":
            return "none"
        value = str(value)
        if value in self.known or value in self.extra:
            return value
        if len(self.extra) < self.cap and _IDENT.match(value):
            self.extra.add(value)
            return value
        self.overflowed += 1
        return OTHER


@dataclass
class _Seen:
    """What one stats source already contributed (counters only ever grow)."""

    lines: dict
    evictions: dict
    in_flight: dict
    slow_queue: dict
    latest_event_ms: dict


class PipelineMetrics:
    """Turns records and pipeline stats into the metric contract, on `registry`."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        max_unknown_ops: int = 32,
        max_hosts: int = 256,
        max_daemons: int = 16,
        max_series: int = DEFAULT_MAX_SERIES,
    ) -> None:
        """max_series: the series budget of each labelled family (series_budget)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.phase_seconds = LabelledHistogram(
            "dpm_request_phase_seconds", "Duration of one phase of a DPM put/get request",
            ["host", "op", "phase", "status"], lambda labels: PHASE_BUCKETS[labels[2]],
            registry=r)
        self.requests = Counter(
            "dpm_requests", "Finished DPM requests, by final status",
            ["host", "op", "status"], registry=r)
        self.polls = LabelledHistogram(
            "dpm_request_polls", "Status calls (polls) per finished request",
            ["host", "op"], lambda labels: POLL_BUCKETS, registry=r)
        self.in_flight = Gauge(
            "dpm_requests_in_flight", "Requests open in the reassembler", ["host"], registry=r)
        self.slow_queue = Gauge(
            "dpm_slow_queue_depth", "Requests waiting for a slow thread", ["host"], registry=r)
        self.call_seconds = LabelledHistogram(
            "dpm_call_seconds", "Duration of synchronous calls (rc 0: ok, else error; "
            "noreturn: no returns line, counted with 0 s)",
            ["host", "daemon", "op", "result"], lambda labels: CALL_BUCKETS, registry=r)
        self.request_ns_seconds = LabelledHistogram(
            "dpm_request_ns_seconds", "Name-server time linked to one DPM put/get request "
            "(spent inside its proc phase; parsers/linking.py)",
            ["host", "op"], lambda labels: PHASE_BUCKETS["proc"], registry=r)
        self.lines = Counter(
            "dpmstream_lines", "Log lines read, by parse result",
            ["host", "daemon", "result"], registry=r)
        self.evictions = Counter(
            "dpmstream_evictions", "Requests emitted before their end was seen",
            ["reason"], registry=r)
        self.event_lag = Gauge(
            "dpmstream_event_lag_seconds", "Wall clock now minus the latest event time seen",
            ["host"], registry=r)
        self._max_unknown_ops = max_unknown_ops
        self._ops: dict[str, BoundedLabel] = {}
        self.host_label = BoundedLabel(max_hosts)  # public: the OpenMetrics exporter uses it too
        self._daemons = BoundedLabel(max_daemons, frozenset(KNOWN_OPS))
        self._results = BoundedLabel(8, frozenset(("parsed", "unmatched", "malformed")))
        self._statuses = BoundedLabel(0, frozenset(STATUSES))
        self._seen: dict[str, _Seen] = {}
        self.series_overflow = Counter(
            "dpmstream_series_overflow", "Observations whose label set was past the series "
            "budget of its metric family, counted under host/op/daemon \"other\"",
            ["metric"], registry=r)
        overflow = self.series_overflow
        self._budget = {
            "phase": SeriesBudget("dpm_request_phase_seconds", self.phase_seconds.labelnames,
                                  max_series, overflow, self.phase_seconds.series_per_set),
            # a counter's label set: its _total and _created series
            "requests": SeriesBudget("dpm_requests_total", ("host", "op", "status"),
                                     max_series, overflow, lambda values: 2),
            "polls": SeriesBudget("dpm_request_polls", self.polls.labelnames, max_series,
                                  overflow, self.polls.series_per_set),
            "calls": SeriesBudget("dpm_call_seconds", self.call_seconds.labelnames,
                                  max_series, overflow, self.call_seconds.series_per_set),
            "lines": SeriesBudget("dpmstream_lines_total", ("host", "daemon", "result"),
                                  max_series, overflow, lambda values: 2),
            "ns": SeriesBudget("dpm_request_ns_seconds", self.request_ns_seconds.labelnames,
                               max_series, overflow, self.request_ns_seconds.series_per_set),
        }
        # Reasons exist from the start, so an alert on them has a series to look at.
        for reason in ("cap", "timeout"):
            self.evictions.labels(reason)

    # -- labels -----------------------------------------------------------------------

    def op_label(self, daemon: str, op) -> str:
        bounded = self._ops.get(daemon)
        if bounded is None:
            bounded = self._ops[daemon] = BoundedLabel(
                self._max_unknown_ops, KNOWN_OPS.get(daemon, frozenset()))
        return bounded(op)

    # -- records ----------------------------------------------------------------------

    def observe_record(self, record: dict) -> None:
        kind = record.get("kind")
        if kind == "request":
            self._observe_request(record)
        elif kind == "call":
            self._observe_call(record)

    def _observe_request(self, rec: dict) -> None:
        host = self.host_label(rec.get("host"))
        op = self.op_label("dpm", rec.get("op"))
        status = self._statuses(rec.get("status"))
        budget = self._budget["phase"]
        for field, phase in PHASES:
            ms = rec.get(field)
            if ms is not None:
                # queue_s may be slightly negative (queued before the put's returns is
                # logged); a histogram sum must not shrink, so such a wait counts as 0.
                self.phase_seconds.observe(budget((host, op, phase, status)), max(ms, 0) / 1000.0)
        self.requests.labels(*self._budget["requests"]((host, op, status))).inc()
        self.polls.observe(self._budget["polls"]((host, op)), rec.get("polls") or 0)
        ns_ms = rec.get("ns_s")
        if ns_ms is not None:  # empty when no name-server log was read
            self.request_ns_seconds.observe(self._budget["ns"]((host, op)), ns_ms / 1000.0)

    def _observe_call(self, rec: dict) -> None:
        daemon_raw = rec.get("daemon") or "none"
        daemon = self._daemons(daemon_raw)
        host = self.host_label(rec.get("host"))
        op = self.op_label(daemon, rec.get("op"))
        rc = rec.get("rc")
        result = "noreturn" if rc is None else ("ok" if rc == 0 else "error")
        ms = rec.get("duration_s")
        seconds = 0.0 if ms is None else max(ms, 0) / 1000.0
        self.call_seconds.observe(self._budget["calls"]((host, daemon, op, result)), seconds)

    # -- pipeline stats ---------------------------------------------------------------

    def update_from_stats(self, stats, *, source: str = "", now_ms: int | None = None) -> None:
        """Bring counters and gauges up to date with a pipeline's cumulative stats.

        `source` names the stats object when one process runs several pipelines (the
        Kafka worker, one per partition): each source's counters are tracked apart and
        gauges are summed over sources. `now_ms` (wall clock) is for tests.
        """
        seen = self._seen.get(source)
        if seen is None:
            seen = self._seen[source] = _Seen({}, {}, {}, {}, {})
        # Cumulative stats: a key missing now counts 0 (the source's pipeline was replaced).
        before, seen.lines = seen.lines, dict(stats.lines)
        for key, value in seen.lines.items():
            host, daemon, result = key
            delta = _delta(before.get(key, 0), value)
            if delta:
                labels = (self.host_label(host), self._daemons(daemon), self._results(result))
                self.lines.labels(*self._budget["lines"](labels)).inc(delta)
        for reason, value in (("cap", stats.evictions), ("timeout", stats.expired)):
            value = _total(value)
            delta = _delta(seen.evictions.get(reason, 0), value)
            seen.evictions[reason] = value
            if delta:
                self.evictions.labels(reason).inc(delta)

        seen.latest_event_ms = dict(stats.latest_event_ms)
        hosts = set(seen.latest_event_ms) | {key[0] for key in seen.lines}
        seen.in_flight = _per_host(getattr(stats, "in_flight_by_host", stats.in_flight), hosts)
        seen.slow_queue = _per_host(getattr(stats, "slow_queue_by_host", stats.slow_queue_depth), hosts)
        self._set_gauges(now_ms if now_ms is not None else int(time.time() * 1000))

    def _set_gauges(self, now_ms: int) -> None:
        in_flight: dict[str, int] = {}
        slow: dict[str, int] = {}
        latest: dict[str, int] = {}
        for s in self._seen.values():
            for host, v in s.in_flight.items():
                in_flight[host] = in_flight.get(host, 0) + v
            for host, v in s.slow_queue.items():
                slow[host] = slow.get(host, 0) + v
            for host, v in s.latest_event_ms.items():
                if v is not None and v > latest.get(host, v - 1):
                    latest[host] = v
        # A host that drops out of the stats has nothing in flight any more: 0, not stale.
        for gauge, values, attr in ((self.in_flight, in_flight, "_gauge_hosts_if"),
                                    (self.slow_queue, slow, "_gauge_hosts_sq")):
            previous = getattr(self, attr, set())
            for host in previous - values.keys():
                gauge.labels(self.host_label(host)).set(0)
            for host, v in values.items():
                gauge.labels(self.host_label(host)).set(v)
            setattr(self, attr, set(values))
        for host, ms in latest.items():
            self.event_lag.labels(self.host_label(host)).set((now_ms - ms) / 1000.0)

    # -- output -----------------------------------------------------------------------

    def exposition(self) -> str:
        """The registry in the Prometheus text format (what /metrics serves)."""
        return generate_latest(self.registry).decode("utf-8")


def _delta(before: int, value: int) -> int:
    """How much to add to a counter for a cumulative value; a value that went down means
    the stats were reset, and everything since the reset is new."""
    return value - before if value >= before else value


def _total(value) -> int:
    if isinstance(value, Mapping):
        return sum(value.values())
    return int(value or 0)


def _per_host(value, hosts: set) -> dict:
    """A gauge's value per host. A pipeline that counts for all its hosts together (one
    int) is attributed to its host when it has one, else to host "all"."""
    if isinstance(value, Mapping):
        return {h: int(v) for h, v in value.items()}
    if not hosts:
        return {}
    return {next(iter(hosts)) if len(hosts) == 1 else "all": int(value or 0)}


@dataclass
class MetricsServer:
    """A running /metrics endpoint."""

    bind: str
    port: int
    _httpd: object

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def serve(port: int, bind: str = "127.0.0.1", *, registry: CollectorRegistry) -> MetricsServer:
    """Serve `registry` on http://bind:port/metrics from a daemon thread. Port 0 picks a
    free port (see .port). 127.0.0.1 by default: expose it wider on purpose only."""
    from prometheus_client import start_http_server

    started = start_http_server(port, addr=bind, registry=registry)
    httpd = started[0] if isinstance(started, tuple) else None
    actual = httpd.server_address[1] if httpd is not None else port
    return MetricsServer(bind, actual, httpd)
