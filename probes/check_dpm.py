"""check_dpm: Nagios plugin for DPM request phases (nagiosplugin Resource -> Metric ->
Context -> Summary). The sources (sources_prometheus, sources_log) only measure; this
module only presents: metrics, thresholds, status line, perfdata, exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone

import nagiosplugin
from nagiosplugin import Critical, Metric, Ok, Performance, Result, Unknown, Warn
from nagiosplugin.state import ServiceState

from dpmstream.probes import thresholds as th
from dpmstream.probes.measurement import Snapshot, SourceError, Wanted, parse_duration

EPILOG = """\
thresholds (-w/--warning, -c/--critical, repeatable; RANGE in Nagios range syntax,
e.g. 2 = 0..2, ~:2 = up to 2, 5:10, @1:5 = alert inside 1..5):
  PHASE:pNN=RANGE       a quantile of a request phase, seconds   -c proc:p95=~:2
                        phases: auth request queue proc poll ready_wait transfer done total
  ns:OP:pNN=RANGE       a quantile of a name-server call op      -w ns:statg:p95=0.5
  failed_rate=RANGE     failed / finished requests (0..1)        -w failed_rate=0.05
  incomplete_rate=RANGE incomplete (timed out) / finished        -c incomplete_rate=0.2

perfdata: PHASE_pNN in seconds for every phase and every --quantiles value (U when the
window holds none), ns_OP_pNN for thresholded ops, requests, calls, failed_rate,
incomplete_rate. A phase with no value in the window is OK ("no data") even if
thresholded; a window with no request and no call at all is --no-data (UNKNOWN).

sources:
  --prometheus URL  the dpmstream metrics (dpmstream run / worker) in Prometheus; the
                    window ends now.
  --log FILE        a DPM, DPNS or SRM log read directly (no pipeline needed); the window
                    ends at the latest event time in the file, never the wall clock.
                    Requests still open at the end of the file are not counted.

exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (bad arguments, source unreadable,
no data, timeout).
"""

_STATES = {"ok": Ok, "warning": Warn, "critical": Critical, "unknown": Unknown}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is UNKNOWN (3), not argparse's 2 = CRITICAL
        self.print_usage(sys.stderr)
        print(f"DPM UNKNOWN - {message}")
        sys.exit(3)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="check_dpm", description=(
        "Nagios plugin: per-phase latency quantiles, failure and incomplete rates of DPM "
        "requests over a window, from Prometheus or straight from a log file."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prometheus", metavar="URL", help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    src.add_argument("--log", metavar="FILE", help="DPM/DPNS/SRM log file to read the last window of")
    p.add_argument("--window", default="15m", help="window to measure over: 90s, 15m, 2h (default 15m)")
    p.add_argument("--host", help="only this host (regex, anchored)")
    p.add_argument("--op", help="only requests of this op (regex, anchored): put, get")
    p.add_argument("--quantiles", default="p50,p95,p99",
                   help="quantiles reported as perfdata for every phase (default p50,p95,p99)")
    p.add_argument("--ns-daemons", default="dpns|lfc",
                   help="daemon label(s) of the name server, regex (default dpns|lfc)")
    p.add_argument("-w", "--warning", action="append", default=[], metavar="SPEC",
                   help="warning threshold SUBJECT=RANGE (repeatable, see below)")
    p.add_argument("-c", "--critical", action="append", default=[], metavar="SPEC",
                   help="critical threshold SUBJECT=RANGE (repeatable, see below)")
    p.add_argument("--no-data", choices=sorted(_STATES), default="unknown",
                   help="state when the window holds no request and no call (default unknown)")
    logopts = p.add_argument_group("--log options")
    logopts.add_argument("--profile", help="regex profile name or TOML file (default: detected)")
    logopts.add_argument("--tz", help="time zone of the log's stamps (default: the profile's)")
    logopts.add_argument("--year", type=int,
                         help="year of the file's last line (default: from the rsyslog prefix "
                              "or the file's modification time)")
    logopts.add_argument("--lookback", default="30m",
                         help="read this much log before the window too, so that requests "
                              "ending in the window are whole (default 30m)")
    logopts.add_argument("--request-timeout", type=float, default=3600, metavar="S",
                         help="event-time seconds after which an open request is incomplete "
                              "(default 3600, as the pipeline)")
    p.add_argument("-t", "--timeout", type=int, default=10,
                   help="give up (UNKNOWN) after this many seconds (default 10)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output (repeatable)")
    return p


# -- nagiosplugin model -------------------------------------------------------------------


class DpmRequests(nagiosplugin.Resource):
    """The measured window as metrics: one per (phase, quantile), rates, ns ops, counts."""

    def __init__(self, source, wanted: Wanted, reported: list[float], no_data: ServiceState):
        self.source = source
        self.wanted = wanted
        self.reported = reported
        self.no_data = no_data
        self.snapshot: Snapshot | None = None

    @property
    def name(self):
        return "DPM"

    def probe(self):
        try:
            snap = self.snapshot = self.source.fetch(self.wanted)
        except SourceError as exc:
            raise nagiosplugin.CheckError(str(exc)) from None
        # Prometheus' increase() extrapolates to the window's edges: whole numbers suffice.
        yield Metric("requests", round(snap.requests), min=0, context="count")
        yield Metric("calls", round(snap.calls), min=0, context="count")
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
        return Performance(metric.name, _fmt(metric.value), "", "", "", 0)


class NoDataContext(nagiosplugin.Context):
    def __init__(self, state: ServiceState):
        super().__init__("no_data")
        self.state = state

    def evaluate(self, metric, resource):
        snap = resource.snapshot
        return Result(self.state, f"no DPM request or call in the last {_window(snap.window_s)} "
                                  f"of {snap.source}{_end_text(snap)}", metric)


class DpmSummary(nagiosplugin.Summary):
    def ok(self, results):
        resource = results.first_significant.resource if results else None
        snap = getattr(resource, "snapshot", None)
        if snap is None:
            return "no result"
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

    def verbose(self, results):
        resource = next((r.resource for r in results if r.resource is not None), None)
        source = getattr(resource, "source", None)
        lines = []
        if hasattr(source, "lines_read"):
            lines.append(f"read {source.lines_read} lines of {source.path} from byte {source.read_from}")
        for promql in getattr(source, "queries", ()):
            lines.append(f"query: {promql}")
        return lines

    def problem(self, results):
        worst = results.most_significant
        texts = []
        for r in worst:
            if r.metric is not None and r.metric.name == "no_data" or r.metric is None:
                texts.append(r.hint or str(r))
            else:
                texts.append(f"{r.metric.contextobj.describe(r.metric)} ({r.hint})"
                             if hasattr(r.metric.contextobj, "describe") else str(r))
        return "; ".join(texts)


def _end_text(snap) -> str:
    """The log source's window end (event time), so that an old log is not taken for now."""
    if snap.end_ms is None:
        return ""
    end = datetime.fromtimestamp(snap.end_ms / 1000, tz=timezone.utc)
    return f" up to {end:%Y-%m-%d %H:%M:%S} UTC"


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


# -- wiring -------------------------------------------------------------------------------


def build_check(args, deadline: float) -> nagiosplugin.Check:
    try:
        window_s = parse_duration(args.window)
        reported = [th.parse_quantile(q.strip()) for q in args.quantiles.split(",") if q.strip()]
        if not reported:
            raise th.SpecError("--quantiles names no quantile")
        limits = th.build(args.warning, args.critical)
        lookback_s = parse_duration(args.lookback)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    wanted = Wanted(tuple(limits.phase_quantiles(reported)),
                    {op: tuple(qs) for op, qs in limits.ns_wanted().items()})

    if args.prometheus:
        from dpmstream.probes.sources_prometheus import PrometheusSource
        source = PrometheusSource(args.prometheus, window_s, host=args.host, op=args.op,
                                  ns_daemons=args.ns_daemons, deadline=deadline)
    else:
        from dpmstream.probes.sources_log import LogSource
        source = LogSource(args.log, window_s, lookback_s=lookback_s, host=args.host,
                           op=args.op, profile=args.profile, tz=args.tz, year=args.year,
                           ns_daemons=args.ns_daemons, timeout_s=args.request_timeout)

    check = nagiosplugin.Check(DpmRequests(source, wanted, reported, _STATES[args.no_data]),
                               CountContext("count"), NoDataContext(_STATES[args.no_data]),
                               DpmSummary())
    names = ["failed_rate", "incomplete_rate"]
    names += [th.phase_metric(p, q) for p in th.PHASE_NAMES for q in wanted.phase_quantiles]
    names += [th.ns_metric(op, q) for op, qs in wanted.ns.items() for q in qs]
    # Perfdata for the reported quantiles and anything thresholded; other quantiles
    # measured only for a threshold of another phase stay out of the perfdata.
    for name in names:
        perf = name in limits.subjects or not any(
            name == th.phase_metric(p, q) for p in th.PHASE_NAMES
            for q in wanted.phase_quantiles if q not in reported)
        check.add(RangeContext(name, limits.warning.get(name), limits.critical.get(name), perf))
    return check


@nagiosplugin.guarded(verbose=0)
def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.timeout < 1:
        print("DPM UNKNOWN - -t/--timeout must be at least 1 second")
        sys.exit(3)
    # The guarded alarm fires at `timeout`; HTTP requests must give up before it.
    deadline = time.monotonic() + max(0.5, args.timeout - 0.5)
    try:
        check = build_check(args, deadline)
    except UsageError as exc:
        print(f"DPM UNKNOWN - {exc}")
        sys.exit(3)
    check.main(verbose=args.verbose, timeout=args.timeout)


if __name__ == "__main__":
    main()
