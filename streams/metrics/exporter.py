"""The Prometheus metric contract (dashboards and the Nagios probe rely on these names).

    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry)
    pipeline = Pipeline(on_record=metrics.write)    # a record sink (streams/sinks/fan_out.py)
    ...
    metrics.publish(pipeline.stats)                 # after each batch of lines
    server = serve(9108, registry=registry)         # http://127.0.0.1:9108/metrics

Driver-independent: `dpmstream run`, the Kafka worker and the OpenMetrics exporter all
feed records and pipeline stats the same way. Records are counted as they come; the
stats' counters and gauges are read at scrape time from the snapshot published last
(stats_collector.py). A private registry, never the global one, so several pipelines
(and tests) can live in one process.

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
from bisect import bisect_left
from operator import itemgetter
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, generate_latest

from dpmstream.parsers.records import PHASES, STATUSES
from dpmstream.parsers.dome_records import KINDS as DOME_KINDS
from dpmstream.streams.metrics.buckets import CALL_BUCKETS, PHASE_BUCKETS
from dpmstream.streams.metrics.dome import DomeMetrics
from dpmstream.streams.metrics.labelled_histogram import LabelledHistogram
from dpmstream.streams.metrics.series_budget import (
    DEFAULT_MAX_SERIES, OTHER, SeriesBudget, settled_key,
)
from dpmstream.streams.metrics.stats_collector import StatsCollector, StatsSnapshot

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

    def settled(self, value) -> str | None:
        """value's label if asking for it again can only give that label with no side
        effect (a known or admitted value, or none), else None (past the cap, each ask
        counts an overflow; a value not seen yet may still be admitted)."""
        if value is None or value == "":
            return "none"
        value = str(value)
        return value if value in self.known or value in self.extra else None


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
        clock_ms: Callable[[], float] = lambda: time.time() * 1000,
    ) -> None:
        """max_series: the series budget of each labelled family (series_budget);
        clock_ms: wall time at a scrape (dpmstream_event_lag_seconds)."""
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
        self.call_seconds = LabelledHistogram(
            "dpm_call_seconds", "Duration of synchronous calls (rc 0: ok, else error; "
            "noreturn: no returns line, counted with 0 s)",
            ["host", "daemon", "op", "result"], lambda labels: CALL_BUCKETS, registry=r)
        self.request_ns_seconds = LabelledHistogram(
            "dpm_request_ns_seconds", "Name-server time linked to one DPM put/get request "
            "(spent inside its proc phase; parsers/linking.py)",
            ["host", "op"], lambda labels: PHASE_BUCKETS["proc"], registry=r)
        self._max_unknown_ops = max_unknown_ops
        self._ops: dict[str, BoundedLabel] = {}
        self.host_label = BoundedLabel(max_hosts)  # public: the OpenMetrics exporter uses it too
        self._daemons = BoundedLabel(max_daemons, frozenset(KNOWN_OPS))
        self._results = BoundedLabel(8, frozenset(("parsed", "unmatched", "malformed")))
        self._statuses = BoundedLabel(0, frozenset(STATUSES))
        # What settled label sets observe into, by the records' raw label values (see
        # _observe_request)
        self._request_slots: dict[tuple, _RequestSlot] = {}
        self._call_children: dict[tuple, object] = {}
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
        # The DOME records' families (streams/metrics/dome.py), on the same registry.
        self.dome = DomeMetrics(r, self.host_label, overflow, max_series)
        # Lines, evictions and the gauges: from the published stats, read at scrape time.
        self.stats = StatsCollector(self._line_labels, self.host_label, clock_ms)
        r.register(self.stats)

    # -- labels -----------------------------------------------------------------------

    def op_label(self, daemon: str, op) -> str:
        bounded = self._ops.get(daemon)
        if bounded is None:
            bounded = self._ops[daemon] = BoundedLabel(
                self._max_unknown_ops, KNOWN_OPS.get(daemon, frozenset()))
        return bounded(op)

    def _line_labels(self, key: tuple) -> tuple:
        host, daemon, result = key
        labels = (self.host_label(host), self._daemons(daemon), self._results(result))
        return self._budget["lines"](labels)

    # -- records: the sink protocol (streams/sinks/fan_out.py) ------------------------

    def write(self, record: dict) -> None:
        kind = record.get("kind")
        if kind == "request":
            self._observe_request(record)
        elif kind == "call":
            self._observe_call(record)
        elif kind in DOME_KINDS:
            self.dome.write(record)

    # Each record's labels are bounded (BoundedLabel) and budgeted (SeriesBudget) in the
    # *_labelled methods, the reference. Once a record's raw label values have settled
    # (every label and label set resolves to itself with no side effect: no overflow
    # counted, no fold), later records with the same raw values go straight to the
    # histogram children and counter children kept for them: the same children, observed
    # in the same order (so the same float sums), without asking the labels again.

    def write_many(self, records) -> None:
        """Observes records as write() does each, in their order, in one call: a fetch's
        records (the Kafka worker). A settled request's counter child is incremented once
        by that slot's requests of the call (Counter.inc takes a lock and checks its
        amount: ~1 us a record), the same integer as one by one."""
        slots = self._request_slots
        observe_settled = self._observe_settled_request
        observe_request, observe_call, dome_write = (
            self._observe_request, self._observe_call, self.dome.write)
        counted: dict = {}   # a settled slot's requests child -> its requests of this call
        try:
            for rec in records:
                kind = rec.get("kind")
                if kind == "request":
                    slot = slots.get((rec.get("host"), rec.get("op"), rec.get("status")))
                    if slot is None:
                        observe_request(rec)
                    else:
                        observe_settled(slot, rec)
                        child = slot.requests
                        counted[child] = counted.get(child, 0) + 1
                elif kind == "call":
                    observe_call(rec)
                elif kind in DOME_KINDS:
                    dome_write(rec)
        finally:   # what was observed is counted, whatever record raised
            for child, n in counted.items():
                child.inc(n)

    def _observe_request(self, rec: dict) -> None:
        key = (rec.get("host"), rec.get("op"), rec.get("status"))
        slot = self._request_slots.get(key)
        if slot is None:
            self._observe_request_labelled(rec)
            slot = self._settled_request(key)
            if slot is not None:
                self._request_slots[key] = slot
            return
        self._observe_settled_request(slot, rec)
        slot.requests.inc()

    def _observe_settled_request(self, slot: "_RequestSlot", rec: dict) -> None:
        """A request's phases, polls and name-server time into a settled slot's children
        (its requests counter is the caller's: write_many counts a batch's at once)."""
        try:
            phases = _phase_values(rec)
        except KeyError:   # a record with fields left out (not the engines')
            phases = tuple(rec.get(field) for field, _ in PHASES)
        for i, ms, child in zip(_PHASE_INDICES, phases, slot.phases):
            if ms is None:
                continue
            if child is None:   # observes it, as _observe_request_labelled does
                slot.phases[i] = self._phase_child(slot.labels, PHASES[i][1], ms)
            else:   # LabelledHistogram's _Child.observe, inlined (~10 a record)
                amount = ms / 1000.0 if ms > 0 else max(ms, 0) / 1000.0   # max(ms, 0) / 1000.0
                child.counts[bisect_left(child.bounds, amount)] += 1
                child.sum += amount
        slot.polls.observe(rec.get("polls") or 0)
        ns_ms = rec.get("ns_ms")
        if ns_ms is not None:
            if slot.ns is None:
                slot.ns = self._ns_child(slot.labels, ns_ms)
            else:
                slot.ns.observe(ns_ms / 1000.0)

    def _settled_request(self, key: tuple):
        """The slot of a request's raw (host, op, status), or None while any of them or
        the requests' or polls' label sets is not settled."""
        if not settled_key(key):
            return None
        host = self.host_label.settled(key[0])
        op = self._ops["dpm"].settled(key[1])
        status = self._statuses.settled(key[2])
        if host is None or op is None or status is None:
            return None
        labels = (host, op, status)
        if not (self._budget["requests"].settled(labels)
                and self._budget["polls"].settled(labels[:2])):
            return None
        return _RequestSlot(labels, self.requests.labels(*labels),
                            self.polls.child(labels[:2]))

    def _phase_child(self, labels: tuple, phase: str, ms):
        """Observes a phase the slot has no child for yet (as _observe_request_labelled
        does); returns its child once its label set is settled, else None."""
        host, op, status = labels
        values = (host, op, phase, status)
        budget = self._budget["phase"]
        self.phase_seconds.observe(budget(values), max(ms, 0) / 1000.0)
        return self.phase_seconds.child(values) if budget.settled(values) else None

    def _ns_child(self, labels: tuple, ns_ms):
        values = labels[:2]
        budget = self._budget["ns"]
        self.request_ns_seconds.observe(budget(values), ns_ms / 1000.0)
        return self.request_ns_seconds.child(values) if budget.settled(values) else None

    def _observe_request_labelled(self, rec: dict) -> None:
        host = self.host_label(rec.get("host"))
        op = self.op_label("dpm", rec.get("op"))
        status = self._statuses(rec.get("status"))
        budget = self._budget["phase"]
        for field, phase in PHASES:
            ms = rec.get(field)
            if ms is not None:
                # The engines never emit a negative phase (parsers/schema.py, pinned by
                # tests/parsers/test_schema.py); a record from elsewhere still cannot
                # make a histogram sum shrink: below 0 counts as 0.
                self.phase_seconds.observe(budget((host, op, phase, status)), max(ms, 0) / 1000.0)
        self.requests.labels(*self._budget["requests"]((host, op, status))).inc()
        self.polls.observe(self._budget["polls"]((host, op)), rec.get("polls") or 0)
        ns_ms = rec.get("ns_ms")
        if ns_ms is not None:  # empty when no name-server log was read
            self.request_ns_seconds.observe(self._budget["ns"]((host, op)), ns_ms / 1000.0)

    def _observe_call(self, rec: dict) -> None:
        rc = rec.get("rc")
        result = "noreturn" if rc is None else ("ok" if rc == 0 else "error")
        key = (rec.get("host"), rec.get("daemon") or "none", rec.get("op"), result)
        child = self._call_children.get(key)
        if child is None:
            self._observe_call_labelled(rec, key[1], result)
            child = self._settled_call(key)
            if child is not None:
                self._call_children[key] = child
            return
        ms = rec.get("duration_ms")
        # _Child.observe, inlined, of 0.0 if ms is None else max(ms, 0) / 1000.0
        amount = 0.0 if ms is None else (ms / 1000.0 if ms > 0 else max(ms, 0) / 1000.0)
        child.counts[bisect_left(child.bounds, amount)] += 1
        child.sum += amount

    def _settled_call(self, key: tuple):
        """The call_seconds child of a call's raw (host, daemon, op, result), or None
        while any of its labels or its label set is not settled."""
        if not settled_key(key):
            return None
        host = self.host_label.settled(key[0])
        daemon = self._daemons.settled(key[1])
        if host is None or daemon is None:
            return None
        op = self._ops[daemon].settled(key[2])
        values = (host, daemon, op, key[3])
        if op is None or not self._budget["calls"].settled(values):
            return None
        return self.call_seconds.child(values)

    def _observe_call_labelled(self, rec: dict, daemon_raw: str, result: str) -> None:
        daemon = self._daemons(daemon_raw)
        host = self.host_label(rec.get("host"))
        op = self.op_label(daemon, rec.get("op"))
        ms = rec.get("duration_ms")
        seconds = 0.0 if ms is None else max(ms, 0) / 1000.0
        self.call_seconds.observe(self._budget["calls"]((host, daemon, op, result)), seconds)

    def close(self) -> None:
        """Nothing to release: the registry outlives the run (`run --once --hold`)."""

    # -- pipeline stats ---------------------------------------------------------------

    def publish(self, stats, *, source: str = "") -> None:
        """Expose a snapshot of a pipeline's cumulative stats (until the next publish).

        `source` names the pipeline when one process runs several (the Kafka worker, one
        per partition): their stats are summed. A StatsSnapshot already taken is
        published as it is."""
        snapshot = stats if isinstance(stats, StatsSnapshot) else StatsSnapshot.of(stats)
        self.stats.publish(snapshot, source)

    def retire(self, source: str) -> None:
        """That pipeline is gone: its counters stay, its gauges go (hosts at 0)."""
        self.stats.retire(source)

    # -- output -----------------------------------------------------------------------

    def exposition(self) -> str:
        """The registry in the Prometheus text format (what /metrics serves)."""
        return generate_latest(self.registry).decode("utf-8")


_phase_values = itemgetter(*(field for field, _ in PHASES))
_PHASE_INDICES = range(len(PHASES))


class _RequestSlot:
    """What a settled (host, op, status) of request records observes into."""
    __slots__ = ("labels", "phases", "requests", "polls", "ns")

    def __init__(self, labels: tuple, requests, polls) -> None:
        self.labels = labels
        self.phases: list = [None] * len(PHASES)   # the phase's child once settled
        self.requests = requests
        self.polls = polls
        self.ns = None


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
