"""`dpmstream worker`: the Kafka stream worker (raw lines in, records and metrics out)."""

from __future__ import annotations

import argparse
import logging
import sys

from dpmstream.commands.common import add_reassembly_options

log = logging.getLogger("dpmstream.worker")


def register(sub, name: str, help_text: str) -> None:
    from dpmstream.streams.kafka.config import add_kafka_arguments

    p = sub.add_parser(
        name, help=help_text, description=(
            "Read the rsyslog JSON line envelopes from the lines topic, reassemble requests "
            "per host (one pipeline per partition), and write request records (keyed by "
            "token) and call records (keyed by host) to their topics, exactly once: state, "
            "records and consumer offsets are committed in one Kafka transaction per "
            "partition. Run several workers with the same --group-id to share "
            "the partitions; a restarted worker resumes from the committed state."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_kafka_arguments(p)
    p.add_argument("--lines-topic", default="dpm.lines", help="raw-lines topic (input)")
    p.add_argument("--requests-topic", default="dpm.requests", help="request records (output)")
    p.add_argument("--calls-topic", default="dpm.calls", help="call records (output)")
    p.add_argument("--group-id", default="dpmstream",
                   help="consumer group; also names the state topic (<group-id>-state) and the "
                        "transactional ids")
    p.add_argument("--partitions", type=int, default=4, metavar="N",
                   help="partitions for topics the worker has to create")
    p.add_argument("--metrics-port", type=int, default=None, metavar="P",
                   help="serve Prometheus metrics on this port (0: any free port)")
    p.add_argument("--metrics-bind", default="127.0.0.1", metavar="ADDR",
                   help="address of the metrics endpoint")
    p.add_argument("--max-series", type=int, default=25_000, metavar="N",
                   help="series budget of each metric family; label sets past it count under "
                        "host/op/daemon \"other\" (dpmstream_series_overflow_total)")
    p.add_argument("--profile", metavar="P",
                   help="regex profile for every file (default: detected per host and path)")
    p.add_argument("--tz", metavar="ZONE", help="time zone of the log stamps (default: the profile's)")
    add_reassembly_options(p, scope=" per partition")
    p.add_argument("--batch", type=int, default=20_000, metavar="N",
                   help="records per poll and transaction (all partitions together)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    from dpmstream.commands.common import checked_profile, checked_zone, setup_logging
    from dpmstream.streams.kafka.config import KafkaConfigError, parse_broker, security_from_args

    setup_logging(args.verbose)
    if args.verbose == 0:
        logging.getLogger("dpmstream.worker").setLevel(logging.INFO)
    try:
        bootstrap = parse_broker(args.broker)
        security = security_from_args(args).client_kwargs()
    except KafkaConfigError as exc:
        print(f"dpmstream worker: {exc}", file=sys.stderr)
        return 2
    if args.partitions < 1 or args.batch < 1 or args.max_series < 1:
        print("dpmstream worker: --partitions, --batch and --max-series must be at least 1",
              file=sys.stderr)
        return 2

    from dpmstream.streams.kafka.faust_app import run_worker
    from dpmstream.streams.kafka.worker import WorkerConfig

    config = WorkerConfig(
        bootstrap=bootstrap, security=security, lines_topic=args.lines_topic,
        requests_topic=args.requests_topic, calls_topic=args.calls_topic,
        group_id=args.group_id, partitions=args.partitions, timeout_s=args.timeout,
        max_in_flight=args.max_in_flight, max_threads=args.max_threads, grace_s=args.grace,
        head_aliases=tuple(args.head_alias or ()),
        profile=checked_profile(args.profile),
        tz=checked_zone(args.tz), batch_records=args.batch)
    return run_worker(config, metrics_port=args.metrics_port, metrics_bind=args.metrics_bind,
                      max_series=args.max_series)
