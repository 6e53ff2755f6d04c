"""`dpmstream replay`: archived logs -> requests.csv, calls.csv and a summary."""

from __future__ import annotations

import argparse
import os
import sys

from dpmstream.commands.common import (
    add_log_options, bounded, checked_profile, checked_zone, default_host, hidden_alias,
    reassembly_settings, setup_logging,
)
from dpmstream.streams.inputs import InputError, describe
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary, label_zone
from dpmstream.streams.sinks.tally import Aggregates


def register(sub, name: str, help_text: str) -> None:
    from dpmstream.streams.kafka.config import add_kafka_arguments

    p = sub.add_parser(
        name, help=help_text, description=(
            "Reassemble archived DPM, DPNS or SRM logs into request and call records, or "
            "DOME logs (DPM 1.10 on: one or more nodes' dmlite logs) into DOME call, put, "
            "capacity and filesystem records. "
            "FILE may be plain, .gz, .bz2 or - for stdin; files of one daemon are read in the "
            "order given (e.g. a rotated set, oldest first), files of different daemons side "
            "by side in event time, and all share one reassembly."))
    p.add_argument("files", nargs="+", metavar="FILE")
    add_log_options(p, dome=True)
    p.add_argument("--out", metavar="DIR", help="write DIR/requests.csv and DIR/calls.csv")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: on a terminal, for long inputs)")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")
    p.add_argument("--openmetrics", metavar="FILE",
                   help="also write the metrics as OpenMetrics with event timestamps, for "
                        "`promtool tsdb create-blocks-from openmetrics`")
    kafka = p.add_argument_group("publishing to Kafka instead (--to-kafka)")
    kafka.add_argument("--to-kafka", metavar="kafka://HOST:PORT",
                       help="publish the raw lines to Kafka in the rsyslog JSON envelope "
                            "instead of reassembling them here; the topic must exist")
    kafka.add_argument("--speed", type=SPEED, default=None, metavar="X",
                       help="pace at X times real time (default: as fast as possible)")
    kafka.add_argument("--lines-topic", default="dpm.lines", metavar="TOPIC",
                       help="the raw-lines topic (default: %(default)s)")
    hidden_alias(kafka, "--topic", "lines_topic")
    add_kafka_arguments(p, broker_flag=None, title="Kafka connection (with --to-kafka)")
    p.set_defaults(func=run)


SPEED = bounded(float, "a number", 0, 1e6, low_open=True)


def _kafka_only(args) -> list[str]:
    """The --to-kafka options given without --to-kafka (they would be ignored)."""
    from dpmstream.streams.kafka.config import kafka_options_given

    given = kafka_options_given(args)
    if args.speed is not None:
        given.insert(0, "--speed")
    return given


def run(args) -> int:
    # A Kafka client imports logging and writes its own messages: configured now for them.
    setup_logging(args.verbose, deferred=not args.to_kafka)
    if not args.to_kafka and (ignored := _kafka_only(args)):
        print(f"dpmstream replay: {', '.join(ignored)} only mean(s) something with "
              "--to-kafka", file=sys.stderr)
        return 2
    if args.to_kafka:
        from dpmstream.streams.kafka.replay import publish_from_args
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
    directories = DirectoryStats(
        csv_path=os.path.join(args.out, "directories.csv") if args.out else None)
    aggregates = Aggregates(summary, directories, compiled=engines.choose() == engines.COMPILED)
    outputs = []
    if args.out:
        from dpmstream.streams.sinks.csv import CsvSink
        csv_sink = CsvSink(args.out)
        outputs.append(csv_sink)
    if args.openmetrics:
        from dpmstream.streams.sinks.openmetrics import OpenMetricsFile
        outputs.append(OpenMetricsFile(args.openmetrics, stats=lambda: pipeline.stats))
    others = FanOut(outputs)
    sinks = FanOut([aggregates, *outputs])

    # DOME records (docs/dome.md) go to their own tally (the summary's DOME part), then on.
    pipeline = Pipeline(aggregates.on_record(others), reassembly_settings(args),
                        on_dome_record=aggregates.on_dome_record(others))
    host = default_host(args.host)
    progress = Progress(sum(i.size or 0 for i in inputs) or None, enabled=args.progress)
    failures, sources = replay_inputs(pipeline, inputs, host=host, profile=profile, tz=tz,
                                      year=args.year, progress=progress)
    sinks.close()
    if not args.quiet:
        sys.stdout.write(summary.render(pipeline.stats, zone=label_zone(sources)))
        top = directories.render()
        if top:
            sys.stdout.write("\n" + top)
        if args.out:
            print(f"\nwrote {csv_sink.requests_path}, {csv_sink.calls_path}, "
                  + "".join(f"{path}, " for path in csv_sink.dome_paths.values())
                  + f"and {directories.csv_path}")
    if not pipeline.stats.total("parsed"):
        print("dpmstream replay: no DPM, DPNS, SRM or DOME line was parsed: wrong files, or "
              "a profile that does not fit (try `dpmstream profile check FILE`)", file=sys.stderr)
        return 1
    return 1 if failures else 0
