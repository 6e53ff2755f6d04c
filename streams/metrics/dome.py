"""The DOME metrics (docs/dome.md, "Metrics"): the DOME records (parsers/dome_records.py)
as Prometheus families, on the registry of PipelineMetrics, which hands them each DOME
record. `dpmstream run --metrics-port` and the Kafka worker serve the same families.

    dpm_dome_calls_total{host,role,command,code_class}       every call record
    dpm_dome_call_seconds{host,role,command}                 sub-second stamps only
    dpm_dome_put_to_putdone_seconds{host}                    joined puts (host: the head)
    dpm_dome_puts_total{host,status}
    dpm_dome_fs_free_bytes{server,fs}, dpm_dome_fs_size_bytes{server,fs}   last capacity line
    dpm_dome_fs_enabled{server,fs}                            1/0 as the head last said
    dpm_dome_fs_events_total{server,fs,event}                 every enable/disable line
    dpm_dome_checksum_wait_seconds{host}                      checksum waits answered, one file each
    dpm_dome_checksums_total{host,outcome}                    every checksum wait record (host: the head)
    dpm_dome_journald_suppressed_lines_total{host}            lines journald's rate limit dropped

Labels are bounded: command is a known dome_* command or "other"; code_class is 2xx..5xx
or none; role head/disk; status success/failed/incomplete; outcome done/failed/timeout/
input_end/evicted, or overlap for a run of two files polled at once; host and server go through the
host cap of PipelineMetrics; a filesystem is a site's own short list of mount points, kept
up to MAX_FILESYSTEMS and only when it looks like a mount point, else "other". Never a DN,
LFN, PFN or token. Each family has a series budget (series_budget.py): past it, host,
server, command and fs fold into "other" and dpmstream_series_overflow_total counts them.

A call's duration from whole-second stamps is 0 or 1 s, which says nothing of its latency
(docs/dome.md section 3): such calls are counted, never observed in the histogram.
"""

from __future__ import annotations

import re

from prometheus_client import Counter, Gauge

from dpmstream.parsers.dome_checksums import DONE, EVICTED, FAILED, INPUT_END, TIMEOUT
from dpmstream.parsers.dome_records import code_class, command_label
from dpmstream.streams.metrics.buckets import CALL_BUCKETS, PHASE_BUCKETS
from dpmstream.streams.metrics.labelled_histogram import LabelledHistogram
from dpmstream.streams.metrics.series_budget import OTHER, SeriesBudget, settled_key

MAX_FILESYSTEMS = 1024
# A mount point: a short absolute path of plain characters (no spaces, no quotes).
_MOUNT_POINT = re.compile(r"/[A-Za-z0-9_.\-/]{0,127}\Z")
ROLES = frozenset(("head", "disk"))
PUT_STATUSES = frozenset(("success", "failed", "incomplete"))
FS_EVENTS = frozenset(("enabled", "disabled"))
# A checksum wait's outcome (parsers/dome_checksums.py), or "overlap" for a run of several files.
OVERLAP = "overlap"
CHECKSUM_OUTCOMES = frozenset((DONE, FAILED, TIMEOUT, INPUT_END, EVICTED, OVERLAP))


class _Filesystems:
    """The fs label: a mount point, up to MAX_FILESYSTEMS of them, else "other"."""

    def __init__(self, cap: int = MAX_FILESYSTEMS):
        self.cap = cap
        self.seen: set[str] = set()

    def __call__(self, fs) -> str:
        if fs in self.seen:
            return fs
        if isinstance(fs, str) and len(self.seen) < self.cap and _MOUNT_POINT.match(fs):
            self.seen.add(fs)
            return fs
        return OTHER


def _one_of(allowed: frozenset):
    return lambda value: value if value in allowed else OTHER


class _CallSlot:
    """What a settled (host, role, command, code class) of DOME calls observes into."""
    __slots__ = ("labels", "calls", "seconds")

    def __init__(self, labels: tuple, calls) -> None:
        self.labels = labels      # (host, role, command): call_seconds' label set
        self.calls = calls
        self.seconds = None       # call_seconds' child once settled


class DomeMetrics:
    def __init__(self, registry, host_label, overflow, max_series: int):
        """host_label: PipelineMetrics' bounded host label (a node is a host); overflow:
        its dpmstream_series_overflow counter."""
        self._host = host_label
        self._fs = _Filesystems()
        self._role = _one_of(ROLES)
        self._status = _one_of(PUT_STATUSES)
        self._event = _one_of(FS_EVENTS)
        self._outcome = _one_of(CHECKSUM_OUTCOMES)
        r = registry
        self.calls = Counter(
            "dpm_dome_calls", "DOME calls (one HTTP request a DOME worker thread served), by "
            "command (a known dome_* command, else other) and HTTP code class (none: cut, "
            "no Exiting line)", ["host", "role", "command", "code_class"], registry=r)
        self.call_seconds = LabelledHistogram(
            "dpm_dome_call_seconds", "Duration of DOME calls, observed only from sub-second "
            "stamps (RFC 3339 with a fraction): whole-second stamps make a call 0 or 1 s and "
            "are counted in dpm_dome_calls_total only",
            ["host", "role", "command"], lambda labels: CALL_BUCKETS, registry=r)
        self.put_to_putdone = LabelledHistogram(
            "dpm_dome_put_to_putdone_seconds", "A joined DOME put's time from dome_put to its "
            "putdone (the head's line, else the disk node's); good to +-1 s from whole-second "
            "stamps. host: the head", ["host"], lambda labels: PHASE_BUCKETS["total"], registry=r)
        self.puts = Counter(
            "dpm_dome_puts", "Finished DOME puts, by status (success, failed, incomplete). "
            "host: the head", ["host", "status"], registry=r)
        self.fs_free = Gauge(
            "dpm_dome_fs_free_bytes", "Free bytes of a DOME filesystem, its disk node's last "
            "capacity line (event time)", ["server", "fs"], registry=r)
        self.fs_size = Gauge(
            "dpm_dome_fs_size_bytes", "Size in bytes of a DOME filesystem, its disk node's last "
            "capacity line", ["server", "fs"], registry=r)
        self.fs_enabled = Gauge(
            "dpm_dome_fs_enabled", "1 while the head has a DOME filesystem enabled, 0 once it "
            "disabled it (server down or other trouble)", ["server", "fs"], registry=r)
        self.fs_events = Counter(
            "dpm_dome_fs_events", "The head's enable/disable lines of a DOME filesystem "
            "(disable repeats at every check while the disk node stays down)",
            ["server", "fs", "event"], registry=r)

        self.checksum_wait = LabelledHistogram(
            "dpm_dome_checksum_wait_seconds", "A DOME checksum wait, a frontend's first "
            "dome_chksum answered 202 (queued) to its answer (done or failed): one file's "
            "only, never a run of two files polled at once or one given up; good to +-1 s "
            "from whole-second stamps. host: the head", ["host"],
            lambda labels: PHASE_BUCKETS["queue"], registry=r)
        self.checksums = Counter(
            "dpm_dome_checksums", "DOME checksum waits by outcome: done, failed, timeout (the "
            "frontend stopped polling), input_end, evicted, or overlap (a client polling two "
            "or more files at once through one frontend: one record). host: the head",
            ["host", "outcome"], registry=r)

        self.journald_suppressed = Counter(
            "dpm_dome_journald_suppressed_lines", "Lines of a node's DOME programs that "
            "journald's rate limit dropped before syslog (and dpmstream) saw them, as its "
            "`Suppressed N messages from UNIT` notices say", ["host"], registry=r)

        self._call_slots: dict[tuple, _CallSlot] = {}   # see _dome_call

        def budget(family, labelnames, cost=lambda values: 2):  # a counter: _total, _created
            return SeriesBudget(family, labelnames, max_series, overflow, cost)

        self._budget = {
            "calls": budget("dpm_dome_calls_total", ("host", "role", "command", "code_class")),
            "call_seconds": budget("dpm_dome_call_seconds", self.call_seconds.labelnames,
                                   self.call_seconds.series_per_set),
            "put_to_putdone": budget("dpm_dome_put_to_putdone_seconds",
                                     self.put_to_putdone.labelnames,
                                     self.put_to_putdone.series_per_set),
            "puts": budget("dpm_dome_puts_total", ("host", "status")),
            "fs": budget("dpm_dome_fs", ("server", "fs"), lambda values: 3),  # the 3 gauges
            "fs_events": budget("dpm_dome_fs_events_total", ("server", "fs", "event")),
            "checksum_wait": budget("dpm_dome_checksum_wait_seconds", self.checksum_wait.labelnames,
                                    self.checksum_wait.series_per_set),
            "checksums": budget("dpm_dome_checksums_total", ("host", "outcome")),
            "journald_suppressed": budget("dpm_dome_journald_suppressed_lines_total", ("host",)),
        }

    def write(self, record: dict) -> None:
        getattr(self, "_" + record["kind"])(record)

    def _dome_call(self, rec: dict) -> None:
        # As PipelineMetrics._observe_request: once a call's raw labels have settled (no
        # overflow, no fold), its counter and histogram children are kept by those raw
        # values and observed straight, in the same order as the labelled path would.
        key = (rec["host"], rec["role"], rec["command"], code_class(rec["http_code"]))
        slot = self._call_slots.get(key)
        if slot is None:
            self._dome_call_labelled(rec, key[3])
            slot = self._settled_call(key)
            if slot is not None:
                self._call_slots[key] = slot
            return
        slot.calls.inc()
        if not rec["whole_seconds"] and rec["duration"] is not None:
            if slot.seconds is None:   # observes it, as _dome_call_labelled does
                slot.seconds = self._call_seconds_child(slot.labels, rec["duration"])
            else:
                slot.seconds.observe(max(rec["duration"], 0) / 1000.0)

    def _settled_call(self, key: tuple):
        """The slot of a call's raw (host, role, command, code class), or None while its
        host or its calls' label set is not settled."""
        if not settled_key(key):
            return None
        host = self._host.settled(key[0])
        if host is None:
            return None
        labels = (host, self._role(key[1]), command_label(key[2]), key[3])
        if labels[1:3] != key[1:3] or not self._budget["calls"].settled(labels):
            return None   # a role or command labelled "other" is not kept by its raw value:
            # raw values are unbounded, the slots would grow without end
        return _CallSlot(labels[:3], self.calls.labels(*labels))

    def _call_seconds_child(self, labels: tuple, duration):
        budget = self._budget["call_seconds"]
        self.call_seconds.observe(budget(labels), max(duration, 0) / 1000.0)
        return self.call_seconds.child(labels) if budget.settled(labels) else None

    def _dome_call_labelled(self, rec: dict, code: str) -> None:
        host, role = self._host(rec["host"]), self._role(rec["role"])
        command = command_label(rec["command"])
        labels = (host, role, command, code)
        self.calls.labels(*self._budget["calls"](labels)).inc()
        if not rec["whole_seconds"] and rec["duration"] is not None:
            self.call_seconds.observe(self._budget["call_seconds"]((host, role, command)),
                                      max(rec["duration"], 0) / 1000.0)

    def _dome_put(self, rec: dict) -> None:
        host = self._host(rec["head"])
        self.puts.labels(*self._budget["puts"]((host, self._status(rec["status"])))).inc()
        if rec["put_to_putdone"] is not None:
            self.put_to_putdone.observe(self._budget["put_to_putdone"]((host,)),
                                        max(rec["put_to_putdone"], 0) / 1000.0)

    def _dome_capacity(self, rec: dict) -> None:
        labels = self._budget["fs"]((self._host(rec["host"]), self._fs(rec["fs"])))
        self.fs_free.labels(*labels).set(rec["free"])
        self.fs_size.labels(*labels).set(rec["phys"])

    def _dome_fs_event(self, rec: dict) -> None:
        server, fs = self._host(rec["server"]), self._fs(rec["fs"])
        event = self._event(rec["event"])
        self.fs_events.labels(*self._budget["fs_events"]((server, fs, event))).inc()
        self.fs_enabled.labels(*self._budget["fs"]((server, fs))).set(
            1 if rec["event"] == "enabled" else 0)


    def _dome_journald_gap(self, rec: dict) -> None:
        labels = self._budget["journald_suppressed"]((self._host(rec["host"]),))
        self.journald_suppressed.labels(*labels).inc(rec["lines"])

    def _dome_checksum(self, rec: dict) -> None:
        host = self._host(rec["head"])
        outcome = OVERLAP if rec["overlap"] else self._outcome(rec["outcome"])
        self.checksums.labels(*self._budget["checksums"]((host, outcome))).inc()
        if outcome in (DONE, FAILED):
            self.checksum_wait.observe(self._budget["checksum_wait"]((host,)), max(rec["wait"], 0) / 1000.0)
