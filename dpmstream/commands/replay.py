"""`dpmstream replay`: archived logs -> requests.csv, calls.csv and a summary."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from dpmstream.commands.common import (
    add_log_options, checked_profile, checked_zone, default_host, pipeline_options, setup_logging,
)
from dpmstream.streams.inputs import (
    InputError, describe, fingerprint, iter_chunks, open_binary, repeated_prefix,
)
from dpmstream.parsers.linking import NS_DAEMON
from dpmstream.streams.directories import DirectoryStats
from dpmstream.streams.lanes import lanes_of, run_lanes
from dpmstream.streams.pipeline import Pipeline
from dpmstream.streams.progress import Progress
from dpmstream.streams.summary import Summary

log = logging.getLogger("dpmstream.replay")


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name, help=help_text, description=(
            "Reassemble archived DPM, DPNS or SRM logs into request and call records. "
            "FILE may be plain, .gz, .bz2 or - for stdin; files of one daemon are read in the "
            "order given (e.g. a rotated set, oldest first), files of different daemons side "
            "by side in event time, and all share one reassembly."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE")
    add_log_options(p)
    p.add_argument("--out", metavar="DIR", help="write DIR/requests.csv and DIR/calls.csv")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: on a terminal, for long inputs)")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")
    p.add_argument("--openmetrics", metavar="FILE",
                   help="also write the metrics as OpenMetrics with event timestamps, for "
                        "`promtool tsdb create-blocks-from openmetrics`")
    p.add_argument("--to-kafka", metavar="URL",
                   help="publish the raw lines to Kafka (kafka://HOST:PORT) in the rsyslog JSON "
                        "envelope instead of reassembling them here")
    p.add_argument("--speed", type=float, default=None, metavar="X",
                   help="with --to-kafka: pace at X times real time (default: as fast as possible)")
    p.add_argument("--topic", default="dpm.lines", help="with --to-kafka: the raw-lines topic")
    p.set_defaults(func=run)


def run(args) -> int:
    setup_logging(args.verbose)
    if args.to_kafka:
        from dpmstream.streams.kafka_replay import publish_from_args
        return publish_from_args(args)
    profile = checked_profile(args.profile)
    tz = checked_zone(args.tz)
    try:
        inputs = [describe(name) for name in args.files]
    except InputError as exc:
        print(f"dpmstream replay: {exc}", file=sys.stderr)
        return 2
    if sum(1 for i in inputs if i.is_stdin) > 1:
        print("dpmstream replay: '-' (stdin) may be given once", file=sys.stderr)
        return 2

    summary = Summary()
    directories = DirectoryStats()
    sinks = [summary.add, directories.add]
    csv_sink = None
    if args.out:
        from dpmstream.streams.csv_sink import CsvSink
        csv_sink = CsvSink(args.out)
        sinks.append(csv_sink)
    kept_records = [] if args.openmetrics else None
    if kept_records is not None:
        sinks.append(kept_records.append)

    def emit(record: dict) -> None:
        for sink in sinks:
            sink(record)

    pipeline = Pipeline(emit, **pipeline_options(args))
    host = default_host(args.host)
    total = sum(i.size or 0 for i in inputs) or None
    progress = Progress(total, enabled=args.progress)
    state = {"done_before": 0, "lines": 0, "failures": 0}
    read_before: dict[bytes, object] = {}  # content fingerprint -> the input read with it
    opened: dict[int, tuple] = {}  # id(source) -> (input, stream, raw)

    def open_input(inp):
        """(source, its lines) for one input, or None (reported, counted as a failure)."""
        src = pipeline.source(inp.name, host=host, path=inp.path or "-", profile=profile, tz=tz,
                              year=args.year, year_hint_ms=inp.mtime_ms)
        try:
            digest = fingerprint(inp)
            stream, raw = open_binary(inp)
        except OSError as exc:
            print(f"dpmstream replay: {inp.name}: {exc}", file=sys.stderr)
            state["failures"] += 1
            return None
        first: list[bytes] = []
        earlier = read_before.get(digest) if digest else None
        if earlier is not None:  # the same archive again, or a longer copy of it
            repeated, first_new = repeated_prefix(stream, earlier)
            pipeline.reassembler.stats.duplicate_lines += repeated
            log.warning("%s: its first %d lines repeat %s: counted once", inp.name,
                        repeated, earlier.name)
            if first_new is not None:
                first.append(first_new)
        elif digest:
            read_before[digest] = inp
        opened[id(src)] = (inp, stream, raw)

        def lines():
            yield from first
            for chunk in iter_chunks(stream):
                yield from chunk
                progress.update(state["done_before"] + (raw.tell() if not inp.is_stdin else 0),
                                state["lines"] + src.line_no)
        return src, lines()

    def input_end(lane, error=None) -> None:
        inp, stream, raw = opened.pop(id(lane.src))
        if error is not None:
            print(f"dpmstream replay: {inp.name}: {error}; the lines before it are kept",
                  file=sys.stderr)
            state["failures"] += 1
        state["lines"] += lane.src.line_no + len(lane.src._pending)
        if not inp.is_stdin:
            stream.close()
        state["done_before"] += inp.size or 0

    lanes = lanes_of(inputs, pipeline.profiles, profile, open_input)
    # A name-server log among the inputs: every request record waits for its calls.
    pipeline.linker.expect_ns = any(lane.name == NS_DAEMON for lane in lanes)
    run_lanes(lanes, input_end)
    failures = state["failures"]
    pipeline.finish()
    progress.close()
    if csv_sink:
        csv_sink.close()
        directories.write_csv(os.path.join(args.out, "directories.csv"))
    if args.openmetrics:
        from dpmstream.streams.openmetrics import write_openmetrics
        with open(args.openmetrics, "w", encoding="utf-8") as out:
            write_openmetrics(kept_records, pipeline.stats, out)
    if not args.quiet:
        sys.stdout.write(summary.render(pipeline.stats))
        top = directories.render()
        if top:
            sys.stdout.write("\n" + top)
        if args.out:
            print(f"\nwrote {csv_sink.requests_path}, {csv_sink.calls_path} and "
                  f"{os.path.join(args.out, 'directories.csv')}")
    if not pipeline.stats.total("parsed"):
        print("dpmstream replay: no DPM, DPNS or SRM line was parsed: wrong files, or a "
              "profile that does not fit (try `dpmstream profile check FILE`)", file=sys.stderr)
        return 1
    return 1 if failures else 0
