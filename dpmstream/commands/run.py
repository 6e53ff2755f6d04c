"""`dpmstream run`: follow live log files (no Kafka), serve Prometheus metrics.

Each FILE is followed like `tail -F` and fed to its own pipeline source; all sources share
one reassembler, so a host's DPM and DPNS logs combine. Finished records go to the metrics
and, with --records, to a JSON-lines file (appended, flushed per batch).

Rotation: by rename, and by copytruncate (the part not yet read when the copy was taken
is read from the copy: the newest file next to it matching --rotated, plain or gzip,
whose first bytes are those of the file read). A file truncated to a smaller size is
read on where its kept part ends, not again from the start. Files are recognised by their
content (first bytes, and the bytes before the offset), not by their size.

--state FILE keeps a registry, like Filebeat's: each file's offset and fingerprint, saved
together with the requests still open and the size of the records file, atomically
(temporary file, fsync, rename) at the start, every --state-interval seconds and at the
stop. One process per FILE (a lock on FILE.lock); a save that fails stops it (exit 2). A
restart with the same --state reads on where the last save stopped, the open requests
included, and does not write again the records written since that save: nothing doubled,
nothing lost of what was written while it was down (rotations in between included).
Without --state, a restart reads the files again from the start, or only new lines with
--from-end (with --state, --from-end applies only to files it has no offset for yet).

Stopping (SIGINT/SIGTERM) in live mode finishes cleanly within 5 s: records emitted are
flushed, the registry saved. Requests still open are NOT emitted, since they are not
over, only unseen (with --state they are saved and continued by the next start; with
--flush-on-exit they are emitted as `incomplete`, like the end of a replay). If the stop
cannot finish in 4 s (a blocked disk or pipe), the process exits at once: the last saved
registry stands, and the records written after it are recognised at the next start.

--once reads every file to its end, emits the requests still open as incomplete (like the
end of a replay), prints the summary, serves the final metrics for --hold seconds (with
--metrics-port) and exits 0.

A FIFO is read as a stream: following, whatever its writers write, one after another
(there is no offset to save: --state keeps only the open requests for it); with --once,
until its writers close it (it waits for the first, as cat does, and says so). Devices,
sockets and directories are refused at the start (exit 2), as is a file that exists but
cannot be read; a file that does not exist yet is waited for (not with --once).
Lines longer than 256 KiB are cut there and the rest skipped unbuffered (one malformed
line); a run of NUL bytes is one malformed line and ends the line before it.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import signal
import stat
import sys
import threading
import time

from dpmstream.commands.common import (
    add_log_options, add_metrics_options, checked_profile, checked_zone, default_host,
    hidden_alias, non_negative_float, positive_float, reassembly_settings, setup_logging)
from dpmstream.streams.live.follow import DEFAULT_ROTATED, not_followable
from dpmstream.streams.live.stop_deadline import STOP_WITHIN_S, StopDeadline

log = logging.getLogger("dpmstream.run")

EPILOG = r"""
examples:
  dpmstream run /var/log/dpm/log /var/log/dpns/log
  dpmstream run --from-end --records /var/lib/dpmstream/records.jsonl /var/log/dpm/log
  dpmstream run --state /var/lib/dpmstream/run.state \
      --records /var/lib/dpmstream/records.jsonl /var/log/dpm/log /var/log/dpns/log
  dpmstream run --state run.state --rotated '{name}.1' --rotated '../old/{name}-*.gz' log
  dpmstream run --once --metrics-port 9108 --records out/demo.records.jsonl out/demo.log
  dpmstream run --metrics-port 9108 --state run.state /var/log/dpm/log /var/log/dpns/log
"""


def register(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(name, help=help_text, description=__doc__, epilog=EPILOG)
    p.add_argument("files", nargs="+", metavar="FILE", type=followable,
                   help="log files to follow (may not exist yet; not a directory)")
    add_metrics_options(p)
    # No endpoint is now the default; scripts that still say so keep working.
    hidden_alias(p, "--no-metrics", "no_metrics", action="store_true", default=False)
    p.add_argument("--records", metavar="FILE",
                   help="append every finished record to FILE as JSON lines ('-': stdout)")
    p.add_argument("--directories", metavar="FILE",
                   help="keep FILE (JSON) up to date with the top directories by name-server "
                        "time (rewritten at most every 10 s, and at the end)")
    add_log_options(p, dome=True)
    p.add_argument("--from-end", action="store_true",
                   help="skip what the files already hold; read only lines written from now on")
    p.add_argument("--state", "--registry", dest="state", metavar="FILE",
                   help="keep offsets, fingerprints and open requests in FILE; "
                        "a restart resumes exactly there")
    p.add_argument("--state-interval", type=positive_float, default=1, metavar="S",
                   help="seconds between saves of --state (also saved at the stop)")
    p.add_argument("--rotated", action="append", metavar="GLOB",
                   help="where a rotated copy of FILE goes, relative to FILE's folder, "
                        "{name} = FILE's name (repeatable; default: "
                        + ", ".join(DEFAULT_ROTATED).replace("%", "%%") + "; .gz read as such)")
    p.add_argument("--once", action="store_true",
                   help="read every file to its end, print a summary and exit")
    p.add_argument("--hold", type=non_negative_float, default=0, metavar="S",
                   help="with --once: keep serving the final metrics this long before exiting")
    p.add_argument("--flush-on-exit", action="store_true",
                   help="on SIGINT/SIGTERM, emit requests still open as incomplete")
    p.add_argument("--interval", type=positive_float, default=0.25, metavar="S",
                   help="poll interval when the files are idle")
    p.add_argument("--status-interval", type=positive_float, default=10, metavar="S",
                   help="seconds between status lines on stderr (only when it is a terminal)")
    p.set_defaults(func=run)


def followable(path: str) -> str:
    """FILE of `run`: a directory is refused at once (following it would retry forever)."""
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path}: is a directory (name the log files in it)")
    return path



def _unusable(path: str, once: bool) -> str | None:
    """Why `path` cannot be read (None if it can, or, following, if it is not there yet):
    said at the start, one line, exit 2, rather than retried for ever or read as empty."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such file" if once else None
    except OSError as exc:
        return exc.strerror or str(exc)
    why = not_followable(st.st_mode)
    if why is not None or stat.S_ISFIFO(st.st_mode):
        return why  # a FIFO is read as a stream; opening it would wait for a writer
    try:
        # Opened and read, not os.access(): root passes access() for files it cannot
        # open (/proc/1/mem) and a file can open but not read (EIO).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.read(fd, 1)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    return None


def _say(msg: str) -> None:
    print(f"dpmstream run: {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from dpmstream.streams.live.follow import Follower
    from dpmstream.streams.live.feed import LiveFeed
    from dpmstream.streams.metrics.exporter import PipelineMetrics, serve
    from dpmstream.streams.live.registry import Registry, RegistryError
    from dpmstream.streams.sinks.fan_out import FanOut
    from dpmstream.streams.sinks.jsonlines import JsonLinesSink

    if args.once and args.from_end:
        _say("--once and --from-end contradict each other (nothing to read)")
        return 2
    if args.once and args.state:
        _say("--once reads the files whole; --state is for following them")
        return 2
    problems = [f"{f}: {why}" for f in args.files if (why := _unusable(f, args.once))]
    if problems:
        for p in problems:
            _say(p)
        return 2
    setup_logging(args.verbose)
    profile = checked_profile(args.profile)
    tz = checked_zone(args.tz)
    host = default_host(args.host)
    registry = Registry(args.state) if args.state else None
    saved = None
    if registry is not None:
        try:
            registry.lock()
        except RegistryError as exc:
            _say(str(exc))
            return 2
        try:
            saved = registry.load()
        except RegistryError as exc:
            registry.unlock()
            _say(f"cannot use the state: {exc} (move it away to start afresh)")
            return 2

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, frame):
        # The loop finishes its pass, then stops cleanly. A thread sets `stop`: this
        # handler runs in the main thread between any two bytecodes, inside stop.wait()
        # too, where the main thread holds the Event's lock, and stop.set() here would
        # wait for that lock for ever (the stop then ended at the deadline, exit 143).
        # Whatever the loop is blocked in (a full pipe, a hung disk), the deadline exits
        # in time; the registry saved last is consistent on its own.
        if not received:
            StopDeadline(STOP_WITHIN_S, log, consequence="the state saved last stands",
                         exit_code=128 + signum).arm()
            threading.Thread(target=stop.set, daemon=True).start()
        received.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    metrics = PipelineMetrics(CollectorRegistry(), max_series=args.max_series)
    server = records = feed = None
    sinks = []
    try:
        if args.metrics_port is not None and not args.no_metrics:
            try:
                server = serve(args.metrics_port, args.metrics_bind, registry=metrics.registry)
            except OSError as exc:
                _say(f"cannot serve metrics on {args.metrics_bind}:{args.metrics_port}: {exc.strerror or exc}")
                return 2
            _say(f"metrics on {server.url}")
        saved_files = {}
        if saved is not None:
            saved_files = saved.get("files") or {}
            damaged = [p for p, pos in saved_files.items() if not _is_position(pos)]
            if damaged or not isinstance(saved.get("pipeline", {}), dict):
                _say(f"cannot use the state: {args.state}: damaged entries "
                     f"{damaged or ['pipeline']}; move it away to start afresh")
                return 2
            _say(f"resuming from {args.state}")
        if args.records:
            since = None
            if saved is not None and args.records != "-":
                rec = saved.get("records") or {}
                if rec.get("path") and os.path.abspath(rec["path"]) == os.path.abspath(args.records):
                    since = rec.get("size")
            records = JsonLinesSink(args.records, written_since=since)
            if records.replaying:
                _say(f"{records.to_replay} record(s) written after the last save "
                     "will not be written again")
        if args.directories:
            from dpmstream.streams.sinks.directories import DirectoriesFile
            sinks.append(DirectoriesFile(args.directories))
        rotated = args.rotated or DEFAULT_ROTATED
        followers = [Follower(f, from_end=args.from_end, rotated=rotated, until_eof=args.once,
                              resume=saved_files.get(os.path.abspath(f))) for f in args.files]
        try:
            feed = LiveFeed(
                followers, host=host, metrics=metrics, records=records, sinks=sinks,
                summarise=args.once,
                profile=profile, tz=tz, year=args.year,
                settings=reassembly_settings(args), log=_say,
                keep_state=registry is not None,
                state=(saved or {}).get("pipeline"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            _say(f"cannot use the state: {args.state}: its reassembly state is damaged "
                 f"({exc!r}); move it away to start afresh")
            return 2
        status = _StatusLine(feed, args.status_interval) if sys.stderr.isatty() else None

        if args.once:
            for f in args.files:
                if stat.S_ISFIFO(os.stat(f).st_mode):
                    _say(f"{f} is a FIFO: reading until its writers close it "
                         "(waiting for the first one, as cat does)")
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
            if interrupted:
                return 128 + received[0]
            if not feed.pipeline.stats.total("parsed"):
                _say("no DPM, DPNS, SRM or DOME line was parsed: wrong files, or a profile that "
                     "does not fit (try `dpmstream profile check FILE`)")
                return 1
            return 0

        last_saved = [None]

        def save_state() -> None:
            cut = feed.checkpoint()
            cut["files"] = {os.path.abspath(p): pos for p, pos in cut["files"].items()
                            if pos is not None}
            if cut["records"]["path"] not in (None, "-"):
                cut["records"]["path"] = os.path.abspath(cut["records"]["path"])
            where = (sorted((p, pos["offset"], pos.get("copy")) for p, pos in cut["files"].items()),
                     cut["records"]["size"])
            if feed.state_changed or where != last_saved[0]:  # idle files: no writes
                registry.save(cut)
                last_saved[0] = where

        for f in followers:
            if not f.exists:
                _say(f"waiting for {f.path} to appear")
        try:
            if registry is not None and saved is None:
                # A first start saves before the first record is written: a kill before
                # the first periodic save then resumes here and recognises those records.
                # (A restart has its saved state already, which stands until it saves.)
                feed.open_files()
                save_state()
            next_save = time.monotonic() + args.state_interval
            while not stop.is_set():
                busy = feed.poll_once()
                if status is not None:
                    status.maybe_print()
                if registry is not None and time.monotonic() >= next_save:
                    save_state()
                    next_save = time.monotonic() + args.state_interval
                if not busy:
                    stop.wait(args.interval)
            if args.flush_on_exit:
                feed.finish()
            else:
                feed.drain()
            if registry is not None:
                save_state()
        except RegistryError as exc:
            # The state saved last stands, and the records written since are recognised
            # at the next start: stopping loses nothing; running on unsaved would grow that.
            _say(f"{exc}; stopping (the state saved before stands)")
            return 2
        _say(f"stopped: {feed.status_text()}"
             + ("" if args.flush_on_exit else
                f"; {feed.open_requests()} open request(s) "
                + ("saved in the state" if registry is not None else "not emitted")))
        return 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if feed is not None:
            feed.close()
        FanOut([s for s in (records, *sinks) if s is not None]).close()
        if server is not None:
            server.close()
        if registry is not None:
            registry.unlock()


def _is_position(pos) -> bool:
    """A file entry of the registry as Follower.checkpoint() writes it."""
    if not (isinstance(pos, dict) and isinstance(pos.get("offset"), int) and pos["offset"] >= 0
            and isinstance(pos.get("head"), str) and isinstance(pos.get("window"), str)):
        return False
    try:
        base64.b64decode(pos["head"], validate=True)
        base64.b64decode(pos["window"], validate=True)
    except ValueError:
        return False
    return True


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
