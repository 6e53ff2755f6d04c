"""check_dpm: Nagios plugin for DPM request phases (nagiosplugin Resource -> Metric ->
Context -> Summary). The sources (sources_prometheus, sources_log) only measure; this
module only presents: metrics, thresholds, status line, perfdata, exit code.
"""

from __future__ import annotations

import os
import time


def _process_start() -> float:
    """When this process started, on time.monotonic()'s clock. Nagios counts -t from its
    fork; under load the interpreter's start and the imports before this module took
    over a second (a -t 2 answered 3 s after the start). Where /proc is not: now."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as fh:   # field 22, starttime, in ticks since boot
            ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - max(0.0, age)


_STARTED = _process_start()  # -t counts from here, not from when the check begins

import argparse
import re
import signal
import sys
from datetime import datetime, timezone

import nagiosplugin
from nagiosplugin import Critical, Metric, Ok, Performance, Result, Unknown, Warn
from nagiosplugin.state import ServiceState

from dpmstream.probes import thresholds as th
from dpmstream.probes.measurement import Snapshot, SourceError, Wanted, parse_duration
from dpmstream.probes.tail import MAX_LINE

LAG_METRIC = "dpmstream_event_lag_seconds"

EPILOG = """\
thresholds (-w/--warning, -c/--critical, repeatable; RANGE in Nagios range syntax,
e.g. 2 = 0..2, ~:2 = up to 2, 5:10, @1:5 = alert inside 1..5):
  PHASE:pNN=RANGE       a quantile of a request phase, seconds   -c 'proc:p95=~:2'
                        phases: auth request queue proc poll ready_wait transfer done total
  ns:OP:pNN=RANGE       a quantile of a name-server call op      -w ns:statg:p95=0.5
  failed_rate=RANGE     failed / finished requests (0..1)        -w failed_rate=0.05
  incomplete_rate=RANGE incomplete (timed out) / finished        -c incomplete_rate=0.2

DOME site (--dome; failed_rate and incomplete_rate are then of its puts):
  dome_call:pNN=RANGE   a quantile of DOME call durations, s    -w dome_call:p95=0.5
{dome}
perfdata: PHASE_pNN in seconds for every phase and every --quantiles value (U when the
window holds none), ns_OP_pNN for thresholded ops, requests, calls, failed_rate,
incomplete_rate. A phase with no value in the window is OK ("no data") even if
thresholded; a window with no request and no call at all is --no-data (UNKNOWN), unless
the source is stale (--max-age): then the staleness decides.

counts (requests, calls): --log counts the records ending in the window; --prometheus
counts from the counters' samples at the window's edges, per series the last sample in
the window less the last one before it (0 for a series first seen in the window; a
restarted pipeline, told by a drop or a new _created time, counts from its raw samples),
summed: no increase() extrapolation, so the count is the records' count, to the scrape.

perfdata with --dome: dome_call_pNN for every --quantiles value (U with whole-second
stamps: their calls have no duration, docs/dome.md), calls, puts, dome_error_rate,
failed_rate, incomplete_rate (of puts), dome_fs_disabled, dome_fs_free_ratio,
dome_fs_free_bytes. Calls, puts and rates are of the window; the filesystems are as the
latest capacity and enable/disable lines left them (all servers, whatever --host).

sources:
  --prometheus URL  the dpmstream metrics (dpmstream run / worker) in Prometheus; the
                    window ends now.
  --log FILE        a DPM, DPNS or SRM log, or an rsyslog file mixing them (each line
                    read by its program tag's profile, as replay reads it), or with
                    --dome a DOME node's dmlite log (repeatable), read directly with the
                    domain's reading (no running pipeline needed); the window ends at
                    the latest event time in the file, never the wall clock. Requests
                    still open at the end of the file are not counted. Only the tail is
                    read, backwards from the end; lines over 64 KiB are skipped and
                    counted (-v). Under -t the end comes first: the last 4 MiB (--dome:
                    1 MiB of all its logs), then as much more as the pace allows; when
                    not all of window and lookback could be read, the answer is on what
                    was, and says so: "(partial: read only the last 12.3m of the log,
                    951234 lines, 140.0 MiB of its 1.1 GiB, within -t)". A partial
                    answer is UNKNOWN, with the figures and any threshold crossed in the
                    part read (the requests that fit whole in it are the short ones: a
                    biased sample), unless the source is stale (--max-age). perfdata
                    with --log: partial (1 when cut short), and then read_lines and
                    read_span (the event time they cover, to the window's end).

--dome --log FILE [--log FILE ...] (or a quoted glob, '/var/log/dmlite/*.log'): the
head's and each disk node's log, read side by side in event time as replay reads them,
so that a put on the head meets its putdone on the disk node, where it ends (its
putdone Exiting line). Calls and puts still open at the end of the logs are not
counted, except a put whose putdone was answered: its status is known. The head's log
alone has no disk side: its puts are counted at the head's putdone answer, and the
status line says that no disk node's log was read; a put with no putdone is incomplete
at --request-timeout, not failed (failed: refused by the head, or a putdone answered
with an error). A disk node's log alone has no put at all.

freshness (--max-age DURATION): a source is stale when its newest event is older than
this, against the wall clock now (the one comparison with it): for --log the newest
stamp among the file's last 200 lines; for --prometheus the newest event the pipeline
has seen (its samples of dpmstream_event_lag_seconds over the last 5 minutes: sample
time less lag; the freshest selected host counts); no such sample (a pipeline no longer
scraped) is stale too. A stale source is --max-age-state (default critical) whatever
the window holds, an empty window included: a log that stopped growing means a hung
daemon. perfdata: age in seconds.

bounds: --window and --lookback at most 366d, --request-timeout at most 366d, --max-age
at most 36500d, -t 1 to 3600 s. Regexes (--host, --op, --ns-daemons) must compile.

Quote ranges with a tilde in the shell ('-c failed_rate=~:0.05'): bash expands a tilde
after = in such a word. Or write them without one: failed_rate=0.05 (0..0.05) means the
same for a rate, total:p95=2 for a latency.

The status line names every metric out of its range, the worst state first.

exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (bad arguments, source unreadable,
no data, timeout: the reason is in the status line, one line).
"""

EPILOG = EPILOG.replace("{dome}\n", "".join(
    f"  {name + '=RANGE':<22}{what}\n{'':<24}{example}\n"
    for name, (what, example) in th.DOME_SUBJECTS.items()))

_STATES = {"ok": Ok, "warning": Warn, "critical": Critical, "unknown": Unknown}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is UNKNOWN (3), not argparse's 2 = CRITICAL
        self.print_usage(sys.stderr)
        print(f"DPM UNKNOWN - {message}")
        sys.exit(3)


YEARS = (1970, 2100)  # a --last-line-year the dating can use, as the commands' --year
# Bounds a user can see in --help: a window or a lookback over a year is no paging
# question (and no Prometheus keeps that much by default); an age is measured up to a
# century (a log of 2011 is 15 years old).
MAX_SPAN = "366d"
MAX_AGE = "36500d"
MAX_TIMEOUT_S = 3600


def _duration(option: str, maximum: str):
    """An argparse type: a duration (90s, 15m, 2h, 1d; a bare number is seconds) of at
    most `maximum`; argparse names the option in the error."""
    limit = parse_duration(maximum)

    def parse(text: str) -> float:
        try:
            value = parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if value > limit:
            raise argparse.ArgumentTypeError(f"{text!r} is longer than {option}'s bound of {maximum}")
        return value
    return parse


def _regex(text: str) -> str:
    """An argparse type: a regex that compiles (Python's syntax; Prometheus' RE2 takes the
    same for what a host, op or daemon name needs). Kept as text: Prometheus gets it."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regex {text!r}: {exc}") from None
    return text


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if not 1 <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_TIMEOUT_S} seconds, not {text}")
    return value


def _year(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year") from None
    if not YEARS[0] <= value <= YEARS[1]:
        raise argparse.ArgumentTypeError(f"must be {YEARS[0]} to {YEARS[1]}, not {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="check_dpm", description=(
        "Nagios plugin: per-phase latency quantiles, failure and incomplete rates of DPM "
        "requests over a window, from Prometheus or straight from a log file."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prometheus", metavar="URL", help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    src.add_argument("--log", metavar="FILE", action="append",
                     help="DPM/DPNS/SRM log file (or an rsyslog file mixing them) to read "
                          "the last window of; with --dome a "
                          "DOME node's dmlite log, repeatable (or a quoted glob): the head's "
                          "and each disk node's, read side by side")
    p.add_argument("--window", default="15m", type=_duration("--window", MAX_SPAN),
                   metavar="DURATION",
                   help=f"window to measure over: 90s, 15m, 2h (default 15m, at most {MAX_SPAN})")
    p.add_argument("--dome", action="store_true",
                   help="the site runs DOME (DPM 1.10 on): measure its calls, puts and "
                        "filesystems (dpm_dome_* metrics, or a DOME log) instead of the "
                        "legacy daemons' requests")
    p.add_argument("--host", type=_regex, help="only this host (regex, anchored)")
    p.add_argument("--op", type=_regex, help="only requests of this op (regex, anchored): put, get")
    p.add_argument("--quantiles", default="p50,p95,p99",
                   help="quantiles reported as perfdata for every phase (default p50,p95,p99)")
    p.add_argument("--ns-daemons", default="dpns|lfc", type=_regex,
                   help="daemon label(s) of the name server, regex (default dpns|lfc)")
    p.add_argument("-w", "--warning", action="append", default=[], metavar="SPEC",
                   help="warning threshold SUBJECT=RANGE (repeatable, see below)")
    p.add_argument("-c", "--critical", action="append", default=[], metavar="SPEC",
                   help="critical threshold SUBJECT=RANGE (repeatable, see below)")
    p.add_argument("--no-data", choices=sorted(_STATES), default="unknown",
                   help="state when the window holds no request and no call, the source "
                        "being fresh (default unknown)")
    p.add_argument("--max-age", metavar="DURATION", type=_duration("--max-age", MAX_AGE),
                   help="a source whose newest event is older than this (e.g. 10m) is stale: "
                        f"--max-age-state (at most {MAX_AGE})")
    p.add_argument("--max-age-state", choices=("critical", "unknown", "warning"),
                   default="critical", help="state of a stale source (default critical)")
    logopts = p.add_argument_group("--log options")
    logopts.add_argument("--profile", help="regex profile name or TOML file (default: detected)")
    logopts.add_argument("--tz", help="time zone of the log's stamps (default: the profile's)")
    # The probe dates a log from its end, so its year is the last line's: another concept
    # than the commands' --year (the first line read), hence another name.
    logopts.add_argument("--last-line-year", type=_year, metavar="YEAR",
                         help="year of the file's last line (default: from the rsyslog prefix "
                              "or the file's modification time)")
    logopts.add_argument("--year", dest="last_line_year", type=_year, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)  # the old spelling
    logopts.add_argument("--lookback", default="30m", type=_duration("--lookback", MAX_SPAN),
                         metavar="DURATION",
                         help="read this much log before the window too, so that requests "
                              f"ending in the window are whole (default 30m, at most {MAX_SPAN})")
    # The reassembly's request timeout, named as in every dpmstream command; -t is the
    # plugin's own time limit, as every Nagios plugin has it.
    logopts.add_argument("--request-timeout", type=_duration("--request-timeout", MAX_SPAN),
                         default=3600.0, metavar="DURATION",
                         help="event time after which a request with no end counts as "
                              f"incomplete (default 1h, as the pipeline's --request-timeout; "
                              f"at most {MAX_SPAN})")
    p.add_argument("-t", "--timeout", type=_seconds, default=10,
                   help="answer UNKNOWN, saying what was under way, this many seconds after "
                        f"starting, whatever the source does (default 10, at most {MAX_TIMEOUT_S})")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output (repeatable)")
    return p


# -- nagiosplugin model -------------------------------------------------------------------


class DpmRequests(nagiosplugin.Resource):
    """The measured window as metrics: one per (phase, quantile), rates, ns ops, counts."""

    def __init__(self, source, wanted: Wanted, reported: list[float], no_data: ServiceState,
                 max_age_s: float | None = None):
        self.source = source
        self.max_age_s = max_age_s
        self.wanted = wanted
        self.reported = reported
        self.no_data = no_data
        self.snapshot: Snapshot | None = None

    @property
    def name(self):
        return "DPM"

    @property
    def stale(self) -> bool:
        """The source's newest event is older than --max-age, or its age cannot be told (no
        event-lag sample: a pipeline no longer scraped): what a hung daemon or a stopped
        pipeline looks like. Its empty window is then no mystery but the symptom."""
        if self.max_age_s is None or self.snapshot is None:
            return False
        age = self.snapshot.age_s
        return age is None or age > self.max_age_s

    def fetched(self) -> Snapshot:
        try:
            self.snapshot = self.source.fetch(self.wanted)
        except SourceError as exc:
            raise nagiosplugin.CheckError(str(exc)) from None
        return self.snapshot

    def probe(self):
        snap = self.fetched()
        if self.max_age_s is not None:
            yield Metric("age", snap.age_s, uom="s", context="age")
        # whole counts: records (--log) or differences of counter samples (--prometheus)
        yield Metric("requests", round(snap.requests), min=0, context="count")
        yield Metric("calls", round(snap.calls), min=0, context="count")
        yield from _what_was_read(snap)
        if snap.empty:
            yield Metric("no_data", None, context="no_data")
            return
        for status in ("failed", "incomplete"):
            name = f"{status}_rate"
            yield Metric(name, snap.rate(status), min=0, max=1, context=name)
        for phase in th.PHASE_NAMES:
            for q in self.wanted.phase_quantiles:
                name = th.phase_metric(phase, q)
                yield Metric(name, snap.phases.get((phase, q)), uom="s", min=0, context=name)
        for op, qs in self.wanted.ns.items():
            for q in qs:
                name = th.ns_metric(op, q)
                yield Metric(name, snap.ns.get((op, q)), uom="s", min=0, context=name)


class DomeSite(DpmRequests):
    """A DOME site's window as metrics (--dome): its calls and their errors and duration
    quantiles, its puts and their rates, and its filesystems as they are now."""

    @property
    def name(self):
        return "DOME"

    def probe(self):
        snap = self.fetched()
        if self.max_age_s is not None:
            yield Metric("age", snap.age_s, uom="s", context="age")
        yield Metric("calls", round(snap.calls), min=0, context="count")
        yield Metric("puts", round(snap.requests), min=0, context="count")
        yield from _what_was_read(snap)
        # the filesystems are a state, not the window's events: judged even in a quiet one
        yield Metric("dome_fs_disabled", snap.fs_disabled, min=0, context="dome_fs_disabled")
        yield Metric("dome_fs_free_ratio", snap.fs_free_ratio, min=0, max=1,
                     context="dome_fs_free_ratio")
        yield Metric("dome_fs_free_bytes", snap.fs_free_bytes, uom="B", min=0,
                     context="dome_fs_free_bytes")
        if snap.empty:
            yield Metric("no_data", None, context="no_data")
            return
        yield Metric("dome_error_rate", snap.error_rate, min=0, max=1, context="dome_error_rate")
        for status in ("failed", "incomplete"):
            name = f"{status}_rate"
            yield Metric(name, snap.rate(status), min=0, max=1, context=name)
        for q in self.wanted.dome_call_quantiles:
            name = th.dome_call_metric(q)
            yield Metric(name, snap.dome_call.get(q), uom="s", min=0, context=name)


def _what_was_read(snap):
    """A log source's reading as perfdata: whether -t cut it short and, when it did, the
    lines the answer was measured on and the event time they span to the window's end."""
    if snap.lines_read is None:
        return
    yield Metric("partial", 1 if snap.partial else 0, min=0, max=1, context="count")
    if snap.partial:
        yield Metric("read_lines", snap.lines_read, min=0, context="count")
        yield Metric("read_span", None if snap.read_s is None else round(snap.read_s, 3),
                     uom="s", min=0, context="count")


class RangeContext(nagiosplugin.Context):
    """Warning/critical ranges on one metric; a metric with no value (no data in the
    window) is OK with a hint and reports 'U' as its perfdata value."""

    def __init__(self, name, warning=None, critical=None, perf=True):
        super().__init__(name)
        self.warning = warning or nagiosplugin.Range()
        self.critical = critical or nagiosplugin.Range()
        self.perf = perf

    def evaluate(self, metric, resource):
        if metric.value is None:
            return Result(Ok, "no data", metric)
        if not self.critical.match(metric.value):
            return Result(Critical, self.critical.violation, metric)
        if not self.warning.match(metric.value):
            return Result(Warn, self.warning.violation, metric)
        return Result(Ok, None, metric)

    def performance(self, metric, resource):
        if not self.perf:
            return None
        value = "U" if metric.value is None else _fmt(metric.value)
        uom = "" if metric.value is None else metric.uom
        return Performance(metric.name, value, uom, self.warning or "", self.critical or "",
                           0, metric.max if metric.max is not None else "")

    def describe(self, metric):
        if metric.value is None:
            return f"{metric.name} no data"
        return f"{metric.name} = {_fmt(metric.value)}{metric.uom or ''}"


class CountContext(nagiosplugin.Context):
    def evaluate(self, metric, resource):
        return Result(Ok, None, metric)

    def performance(self, metric, resource):
        if metric.value is None:
            return Performance(metric.name, "U", "", "", "", 0)
        return Performance(metric.name, _fmt(metric.value), metric.uom or "", "", "", 0)


class NoDataContext(nagiosplugin.Context):
    def __init__(self, state: ServiceState):
        super().__init__("no_data")
        self.state = state

    def evaluate(self, metric, resource):
        if resource.stale:  # the stale source's state and words (FreshnessContext) say it
            return Result(Ok, None, metric)
        return Result(self.state, _nothing_text(resource.snapshot), metric)


def _nothing_text(snap) -> str:
    what = "DOME call or put" if snap.dome else "DPM request or call"
    return (f"no {what} in the last {_window(snap.window_s)} of "
            f"{snap.source}{_end_text(snap)}")


class DpmSummary(nagiosplugin.Summary):
    def ok(self, results):
        resource = results.first_significant.resource if results else None
        snap = getattr(resource, "snapshot", None)
        if snap is None:
            return "no result"
        return self.figures(resource, snap) + _notes(snap)

    def figures(self, resource, snap) -> str:
        """What was measured, in words (the OK status line but its notes)."""
        if snap.dome:
            return self.dome_ok(resource.wanted, snap)
        parts = []
        qs = resource.wanted.phase_quantiles
        q = 0.95 if 0.95 in qs else qs[-1]
        total = snap.phases.get(("total", q))
        if total is not None:
            parts.append(f"total {th.quantile_label(q)} {_fmt(total)}s")
        parts.append(f"{round(snap.requests)} requests")
        failed = snap.rate("failed")
        if failed is not None:
            parts.append(f"{failed * 100:.1f}% failed")
        if snap.calls:
            parts.append(f"{round(snap.calls)} calls")
        return ", ".join(parts) + f" in the last {_window(snap.window_s)}" + _end_text(snap)

    @staticmethod
    def dome_ok(wanted, snap) -> str:
        parts = [f"{round(snap.calls)} calls"]
        if snap.error_rate is not None:
            parts.append(f"{snap.error_rate * 100:.1f}% errors")
        qs = wanted.dome_call_quantiles
        q = 0.95 if 0.95 in qs else qs[-1]
        if snap.dome_call.get(q) is not None:
            parts.append(f"call {th.quantile_label(q)} {_fmt(snap.dome_call[q])}s")
        elif snap.whole_seconds:
            parts.append("no call duration (whole-second stamps)")
        parts.append(f"{round(snap.requests)} puts")
        failed = snap.rate("failed")
        if failed is not None:
            parts.append(f"{failed * 100:.1f}% failed")
        text = ", ".join(parts) + f" in the last {_window(snap.window_s)}" + _end_text(snap)
        if snap.fs_disabled is not None:
            text += f"; {round(snap.fs_disabled)} filesystems disabled"
        if snap.fs_free_ratio is not None:
            text += f", the fullest {snap.fs_free_ratio * 100:.1f}% free"
        return text

    def verbose(self, results):
        resource = next((r.resource for r in results if r.resource is not None), None)
        source = getattr(resource, "source", None)
        lines = []
        if hasattr(source, "lines_read"):
            lines.append(f"read {source.lines_read} lines of {source.path} from byte "
                         f"{source.read_from} (of {source.tail.size}); "
                         f"{source.tail.long_lines} lines over {MAX_LINE // 1024} KiB skipped; "
                         + ", ".join(f"{n} {result}" for result, n in source.lines.items())
                         + f"; {source.decode_errors} not UTF-8; {source.engine} engine")
        lines += getattr(source, "describe_reading", list)()
        if hasattr(source, "queries"):
            lines.append("requests and calls: per series the last sample in the window less "
                         "the last before it, restarts counted across, summed (no "
                         "extrapolation)")
        for promql in getattr(source, "queries", ()):
            lines.append(f"query: {promql}")
        return lines

    def problem(self, results):
        """Every result that is not OK, the worst first (Nagios plugin guidelines)."""
        bad = [r for r in results if r.state != Ok]
        bad.sort(key=lambda r: -r.state.code)  # stable: same state keeps the check's order
        texts = []
        for r in bad:
            # a range's metric is named with its value; any other result is its hint alone
            described = r.metric.contextobj.describe(r.metric) \
                if r.metric and isinstance(r.metric.contextobj, RangeContext) else None
            if described is None:
                texts.append(r.hint or str(r))
            else:
                texts.append(f"{described} ({r.hint})" if r.hint else described)
        resource = next((r.resource for r in results if r.resource is not None), None)
        snap = getattr(resource, "snapshot", None)
        return "; ".join(texts) + (_notes(snap) if snap is not None else "")


class FreshnessContext(nagiosplugin.Context):
    """The newest line or sample older than --max-age: a source that stopped moving."""

    def __init__(self, max_age_s: float, state: ServiceState):
        super().__init__("age")
        self.max_age_s = max_age_s
        self.state = state

    def evaluate(self, metric, resource):
        if not resource.stale:
            return Result(Ok, None, metric)
        snap = resource.snapshot
        empty = f", and {_nothing_text(snap)}" if snap.empty else ""
        if metric.value is None:
            return Result(self.state, f"no {LAG_METRIC} sample in the last 5 minutes to tell "
                                      f"the age of the newest event{empty}: is the pipeline "
                                      f"scraped?", metric)
        what = "line" if snap.end_ms is not None else "event"
        return Result(self.state, f"stale source: newest {what} is {_age(metric.value)} old, "
                                  f"over --max-age {_window(self.max_age_s)}{empty}: the "
                                  f"daemon or the pipeline stopped?", metric)

    def performance(self, metric, resource):
        # seconds to the millisecond: ages run to years, beyond _fmt's 6 digits
        value = "U" if metric.value is None else f"{metric.value:.3f}".rstrip("0").rstrip(".")
        return Performance("age", value, "" if metric.value is None else "s", "",
                           _fmt(float(self.max_age_s)), 0)


def _notes(snap) -> str:
    """What the status line must own up to: lines of the log window skipped for their
    length (counted), what the logs given could not show, and a read that -t cut short
    (what it covered)."""
    notes = f" ({snap.long_lines} lines over {MAX_LINE // 1024} KiB skipped)" if snap.long_lines else ""
    return notes + "".join(f" ({note})" for note in (snap.unseen, snap.partial) if note)


def _end_text(snap) -> str:
    """The log source's window end (event time), so that an old log is not taken for now."""
    if snap.end_ms is None:
        return ""
    end = datetime.fromtimestamp(snap.end_ms / 1000, tz=timezone.utc)
    return f" up to {end:%Y-%m-%d %H:%M:%S} UTC"


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _fmt(value) -> str:
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}"
    return str(value)


def _window(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{_fmt(float(seconds))}s"


class DpmCheck(nagiosplugin.Check):
    """A check whose window -t let the log source read only in part is UNKNOWN, with
    what it measured on the part read (thresholds crossed there included): the records
    that fit whole in the newest lines are a biased sample (failures end at once, long
    transfers and requests begun before the part read are left out), so a rate or a
    quantile from them can cross a threshold the window does not, or miss one it does.
    A stale source (--max-age) is judged on its newest line, which was read: its state
    stands (README, "Paging")."""

    def __call__(self):
        super().__call__()
        resource = self.resources[0]
        snap = getattr(resource, "snapshot", None)
        if snap is None or not snap.partial or resource.stale:
            return
        figures = self.summary.figures(resource, snap)
        self.results.add(Result(Unknown, f"the window not read whole within -t, no state "
                                         f"told; measured on the part read: {figures}"))


# -- wiring -------------------------------------------------------------------------------


def build_check(args, deadline: float) -> nagiosplugin.Check:
    window_s, lookback_s, max_age_s = args.window, args.lookback, args.max_age
    try:
        reported = [th.parse_quantile(q.strip()) for q in args.quantiles.split(",") if q.strip()]
        if not reported:
            raise th.SpecError("--quantiles names no quantile")
        limits = th.build(args.warning, args.critical)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dome and limits.legacy_only():
        raise UsageError(f"{', '.join(limits.legacy_only())}: thresholds of the legacy daemons' "
                         f"requests and name-server calls, which a DOME site (--dome) has not")
    if not args.dome and limits.dome_only():
        raise UsageError(f"{', '.join(limits.dome_only())}: thresholds of a DOME site: give --dome")
    wanted = Wanted(tuple(limits.phase_quantiles(reported)),
                    {op: tuple(qs) for op, qs in limits.ns_wanted().items()},
                    age=max_age_s is not None, dome=args.dome,
                    dome_call_quantiles=tuple(limits.dome_call_quantiles(reported)))

    if args.prometheus:
        from dpmstream.probes.sources_prometheus import PrometheusSource
        source = PrometheusSource(args.prometheus, window_s, host=args.host, op=args.op,
                                  ns_daemons=args.ns_daemons, deadline=deadline)
    elif args.dome:
        from dpmstream.probes.sources_dome_log import DomeLogSource
        source = DomeLogSource(args.log, window_s, lookback_s=lookback_s, host=args.host,
                               profile=args.profile, tz=args.tz, year=args.last_line_year,
                               timeout_s=args.request_timeout, deadline=deadline)
    else:
        from dpmstream.probes.sources_log import LogSource
        if len(args.log) > 1:
            raise UsageError(f"--log given {len(args.log)} times: only a DOME site's logs "
                             f"(--dome) are read together; give one DPM, DPNS or SRM log")
        source = LogSource(args.log[0], window_s, lookback_s=lookback_s, host=args.host,
                           op=args.op, profile=args.profile, tz=args.tz, year=args.last_line_year,
                           ns_daemons=args.ns_daemons, timeout_s=args.request_timeout,
                           deadline=deadline)

    resource = DomeSite if args.dome else DpmRequests
    check = DpmCheck(
        resource(source, wanted, reported, _STATES[args.no_data], max_age_s),
        CountContext("count"), NoDataContext(_STATES[args.no_data]), DpmSummary())
    if max_age_s is not None:
        check.add(FreshnessContext(max_age_s, _STATES[args.max_age_state]))
    names = ["failed_rate", "incomplete_rate"]
    if args.dome:
        names += list(th.DOME_SUBJECTS)
        quantile_metrics = {q: [th.dome_call_metric(q)] for q in wanted.dome_call_quantiles}
    else:
        names += [th.ns_metric(op, q) for op, qs in wanted.ns.items() for q in qs]
        quantile_metrics = {q: [th.phase_metric(p, q) for p in th.PHASE_NAMES]
                            for q in wanted.phase_quantiles}
    # Perfdata for the reported quantiles and anything thresholded; other quantiles
    # measured only for a threshold of another phase stay out of the perfdata.
    unreported = {m for q, ms in quantile_metrics.items() if q not in reported for m in ms}
    for name in names + [m for ms in quantile_metrics.values() for m in ms]:
        perf = name in limits.subjects or name not in unreported
        check.add(RangeContext(name, limits.warning.get(name), limits.critical.get(name), perf))
    return check


class _OutOfTime(Exception):
    pass


def _out_of_time(signum, frame):
    raise _OutOfTime()


@nagiosplugin.guarded(verbose=0)
def main(argv=None):
    args = build_parser().parse_args(argv)
    # -t counts from the start of the process. Sources stop by themselves at `deadline`
    # with what they were doing as the reason; the timer is the backstop for anything
    # blocking in between (a hung NFS read, a server trickling its headers).
    budget_end = _STARTED + args.timeout
    deadline = max(time.monotonic() + 0.2, budget_end - 0.8)
    try:
        check = build_check(args, deadline)
    except UsageError as exc:
        print(f"DPM UNKNOWN - {exc}")
        sys.exit(3)
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, max(0.05, budget_end - 0.3 - time.monotonic()))
    try:
        check.main(verbose=args.verbose, timeout=0)
    except _OutOfTime:
        source = check.resources[0].source
        print(f"DPM UNKNOWN - timed out after {args.timeout} s (-t) while {source.progress()}")
        sys.exit(3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


if __name__ == "__main__":
    main()
