"""`dpmstream worker`: the Kafka stream worker (raw lines in, records and metrics out)."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("dpmstream.worker")


def register(sub, name: str, help_text: str) -> None:
    from dpmstream.commands.common import (
        add_metrics_options, add_profile_options, add_reassembly_options, add_verbose_option,
        non_negative_float, positive_int)
    from dpmstream.streams.kafka.config import add_kafka_arguments

    p = sub.add_parser(
        name, help=help_text, description=(
            "Read the rsyslog JSON line envelopes from the lines topic, reassemble requests "
            "per host (one pipeline per partition), and write request records (keyed by "
            "token) and call records (keyed by host) to their topics, exactly once: state, "
            "records and consumer offsets are committed in one Kafka transaction per "
            "partition. Run several workers with the same --group-id to share "
            "the partitions; a restarted worker resumes from the committed state. "
            "The year of each line comes from the rsyslog envelope (its `received` stamp)."))
    add_kafka_arguments(p)
    p.add_argument("--lines-topic", default="dpm.lines", metavar="TOPIC",
                   help="raw-lines topic (input)")
    p.add_argument("--requests-topic", default="dpm.requests", metavar="TOPIC",
                   help="request records (output)")
    p.add_argument("--calls-topic", default="dpm.calls", metavar="TOPIC",
                   help="call records (output)")
    p.add_argument("--group-id", default="dpmstream",
                   help="consumer group; also names the state topic (<group-id>-state) and the "
                        "transactional ids")
    p.add_argument("--partitions", type=positive_int, default=4, metavar="N",
                   help="partitions for topics the worker has to create")
    add_metrics_options(p)
    add_profile_options(p, dome=True, profile_help=(
        "regex profile: a DPM one (lcgdm-dpm, lcgdm-ns, lcgdm-srm or a .toml file) for the "
        "DPM daemons' files, or a DOME one (dmlite-dome-notid, ...) for the files named "
        "dmlite-rfc3339.log or dmlite.log (default: detected per host and path for the DPM "
        "files, dmlite-dome for the DOME ones)"))
    add_reassembly_options(p, scope=" per partition")
    from dpmstream.parsers.dome_merge import HORIZON_MS, MAX_HELD
    p.add_argument("--dome-merge-horizon", type=non_negative_float, default=HORIZON_MS // 1000,
                   metavar="SECONDS",
                   help="DOME nodes' lines are reassembled side by side in event time: a node's "
                        "lines that run ahead of another DOME node of the partition wait for "
                        "it, unless it is more than this far behind the newest (quiet, or "
                        "stopped); 0 reads them in arrival order (default: %(default)s)")
    p.add_argument("--dome-merge-max-lines", type=positive_int, default=MAX_HELD, metavar="N",
                   help="DOME lines held waiting for another node at most, per partition; "
                        "past it the earliest goes on (default: %(default)s)")
    from dpmstream.streams.kafka.txn_bounds import (
        BATCH_RECORDS, TRANSACTION_AGE_S, TRANSACTION_LINES)
    p.add_argument("--batch", type=positive_int, default=BATCH_RECORDS, metavar="N",
                   help="records per poll at most (all partitions together) "
                        "(default: %(default)s)")
    p.add_argument("--transaction-lines", type=positive_int, default=TRANSACTION_LINES,
                   metavar="N",
                   help="a partition's transaction spans fetches: it commits once it holds "
                        "this many lines (their records held until then) "
                        "(default: %(default)s)")
    p.add_argument("--transaction-age", type=non_negative_float, default=TRANSACTION_AGE_S,
                   metavar="SECONDS",
                   help="... or once its first line was fed this long ago, or a fetch comes "
                        "back empty: records reach their topics at most this much later; 0 "
                        "commits each fetch's lines at once (default: %(default)s)")
    add_verbose_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from dpmstream.commands.common import (
        checked_profile, checked_zone, reassembly_settings, setup_logging)
    from dpmstream.streams.kafka.config import KafkaConfigError, parse_broker, security_from_args

    setup_logging(args.verbose)
    if args.verbose == 0:
        logging.getLogger("dpmstream.worker").setLevel(logging.INFO)
    try:
        bootstrap = parse_broker(args.broker)
        security = security_from_args(args)
    except KafkaConfigError as exc:
        print(f"dpmstream worker: {exc}", file=sys.stderr)
        return 2

    from dpmstream.streams.kafka.faust_app import run_worker
    from dpmstream.streams.kafka.worker import WorkerConfig

    config = WorkerConfig(
        bootstrap=bootstrap, security=security.client_kwargs(),
        fetch_security=security.librdkafka_config(), lines_topic=args.lines_topic,
        requests_topic=args.requests_topic, calls_topic=args.calls_topic,
        group_id=args.group_id, partitions=args.partitions,
        reassembly=reassembly_settings(args),
        profile=checked_profile(args.profile),
        tz=checked_zone(args.tz), batch_records=args.batch,
        dome_merge_horizon_s=args.dome_merge_horizon,
        dome_merge_max_lines=args.dome_merge_max_lines,
        transaction_lines=args.transaction_lines, transaction_age_s=args.transaction_age)
    return run_worker(config, metrics_port=args.metrics_port, metrics_bind=args.metrics_bind,
                      max_series=args.max_series)
