"""`dpmstream run`: follow live log files (no Kafka), serve Prometheus metrics.

Each FILE is followed like `tail -F` (rotation by rename and copytruncate survive) and fed
to its own pipeline source; all sources share one reassembler, so a host's DPM and DPNS
logs combine. Finished records go to the metrics and, with --records, to a JSON-lines
file (appended, flushed per batch).

Stopping (SIGINT/SIGTERM) in live mode finishes cleanly: records already emitted are
flushed, and requests still open are NOT emitted, since they are not over, only unseen
(with --flush-on-exit they are emitted as `incomplete`, like the end of a replay).
No offsets are saved: a restart reads the files again from the start, or only new lines
with --from-end.

--once reads every file to its end, emits everything (pipeline.finish()), prints the
summary, serves the final metrics for --hold seconds and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from dpmstream.commands.common import (
    add_log_options, checked_profile, checked_zone, default_host, setup_logging)

EPILOG = """\
examples:
  dpmstream run /var/log/dpm/log /var/log/dpns/log
  dpmstream run --from-end --records /var/lib/dpmstream/records.jsonl /var/log/dpm/log
  dpmstream run --once --metrics-port 9108 --records out/demo.records.jsonl out/demo.log
"""


def register(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(
        name, help=help_text, description=__doc__,
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="log files to follow (may not exist yet)")
    p.add_argument("--metrics-port", type=int, default=9108, metavar="PORT",
                   help="serve Prometheus metrics on this port (default 9108; 0: any free port)")
    p.add_argument("--metrics-bind", default="127.0.0.1", metavar="ADDR",
                   help="address to serve metrics on (default 127.0.0.1)")
    p.add_argument("--no-metrics", action="store_true", help="do not serve metrics")
    p.add_argument("--records", metavar="FILE",
                   help="append every finished record to FILE as JSON lines ('-': stdout)")
    p.add_argument("--directories", metavar="FILE",
                   help="keep FILE (JSON) up to date with the top directories by name-server "
                        "time (rewritten at most every 10 s, and at the end)")
    add_log_options(p)
    p.add_argument("--from-end", action="store_true",
                   help="skip what the files already hold; read only lines written from now on")
    p.add_argument("--once", action="store_true",
                   help="read every file to its end, print a summary and exit")
    p.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                   help="with --once: keep serving the final metrics this long before exiting")
    p.add_argument("--flush-on-exit", action="store_true",
                   help="on SIGINT/SIGTERM, emit requests still open as incomplete")
    p.add_argument("--interval", type=float, default=0.25, metavar="S",
                   help="poll interval when the files are idle (default 0.25)")
    p.add_argument("--status-interval", type=float, default=10.0, metavar="S",
                   help="seconds between status lines on stderr (only when it is a terminal)")
    p.set_defaults(func=run)


def _unreadable(path: str) -> str | None:
    """Why --once cannot read `path` (None if it can): there is nothing to wait for."""
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):
        return "is a directory"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _say(msg: str) -> None:
    print(f"dpmstream run: {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from dpmstream.streams.follow import Follower
    from dpmstream.streams.livefeed import LiveFeed
    from dpmstream.streams.metrics import PipelineMetrics, serve
    from dpmstream.streams.sinks import JsonLinesSink

    if args.once and args.from_end:
        _say("--once and --from-end contradict each other (nothing to read)")
        return 2
    if args.once:
        problems = [f"{f}: {why}" for f in args.files if (why := _unreadable(f))]
        if problems:
            for p in problems:
                _say(p)
            return 2
    setup_logging(args.verbose)
    profile = checked_profile(args.profile)
    tz = checked_zone(args.tz)
    host = default_host(args.host)

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, frame):
        received.append(signum)
        stop.set()  # the loop finishes its pass, then stops cleanly

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    metrics = PipelineMetrics(CollectorRegistry())
    server = sink = feed = None
    try:
        if not args.no_metrics:
            try:
                server = serve(args.metrics_port, args.metrics_bind, registry=metrics.registry)
            except OSError as exc:
                _say(f"cannot serve metrics on {args.metrics_bind}:{args.metrics_port}: {exc.strerror or exc}")
                return 2
            _say(f"metrics on {server.url}")
        if args.records:
            sink = JsonLinesSink(args.records)
        if args.directories:
            from dpmstream.streams.directories import DirectoriesFile
            sink = DirectoriesFile(args.directories, then=sink)
        followers = [Follower(f, from_end=args.from_end) for f in args.files]
        feed = LiveFeed(
            followers, host=host, metrics=metrics, sink=sink, summarise=args.once,
            profile=profile, tz=tz, year=args.year,
            timeout_s=args.timeout, max_in_flight=args.max_in_flight, log=_say,
            head_aliases=tuple(args.head_alias or ()))
        status = _StatusLine(feed, args.status_interval) if sys.stderr.isatty() else None

        if args.once:
            feed.read_to_end(should_stop=stop.is_set)
            interrupted = stop.is_set()
            if interrupted:
                _say("stopped before the end of the input; the summary covers what was read")
            feed.finish()
            print(feed.summary(), end="", flush=True)
            if server is not None:
                hold = args.hold if not interrupted else 0
                when = f"for {hold:g} s more" if hold > 0 else "while it ran"
                print(f"\nMetrics: {server.url} (served {when})", flush=True)
                if hold > 0:
                    stop.wait(hold)
            # An interrupted --once did not do its job: 128 + signal, as a shell reports it.
            return 128 + received[0] if interrupted else 0

        for f in followers:
            if not f.exists:
                _say(f"waiting for {f.path} to appear")
        while not stop.is_set():
            busy = feed.poll_once()
            if status is not None:
                status.maybe_print()
            if not busy:
                stop.wait(args.interval)
        if args.flush_on_exit:
            feed.finish()
        else:
            feed.drain()
        _say(f"stopped: {feed.status_text()}"
             + ("" if args.flush_on_exit else f"; {feed.open_requests()} open request(s) not emitted"))
        return 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if feed is not None:
            feed.close()
        if sink is not None:
            sink.close()
        if server is not None:
            server.close()


class _StatusLine:
    """A one-line progress report on stderr every `interval` seconds (wall clock)."""

    def __init__(self, feed, interval: float) -> None:
        self.feed = feed
        self.interval = interval
        self.next = time.monotonic() + interval

    def maybe_print(self) -> None:
        now = time.monotonic()
        if now >= self.next:
            self.next = now + self.interval
            _say(self.feed.status_text())
