"""`dpmstream stack up|down`: a local Kafka + rsyslog + worker + Prometheus on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys

from dpmstream.commands.common import add_profile_options, hidden_alias, positive_int


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name, help=help_text, description=(
            "Start on 127.0.0.1 a private Kafka broker, an rsyslog shipping a log directory "
            "to it, one `dpmstream worker` and a Prometheus scraping the worker; wait until "
            "each is ready, print one line per endpoint (kafka=, prometheus=, metrics=) and "
            "leave them running. `stack down` stops exactly what `stack up` started."))
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    up = actions.add_parser(
        "up", help="start the stack and print its endpoints",
        description=(
            "Follows DIR/dpm/log, DIR/dpns/log, DIR/srmv2.2/log and DIR/*.log (files may "
            "appear later), shipping each line to Kafka as rsyslog does on a head node. "
            "Needs the Kafka jars (`make install-kafka`) and rsyslog and Prometheus "
            "(`make install-system`)."))
    up.add_argument("--logs", required=True, metavar="DIR", help="directory of the log files to follow")
    _workdir_option(up)
    up.add_argument("--ports", metavar="LIST",
                    help="fixed ports, e.g. kafka=9092,controller=9093,prometheus=9090,"
                         "metrics=9108 (any subset; the rest are picked free)")
    up.add_argument("--lines-topic", default="dpm.lines", metavar="TOPIC",
                    help="topic of the raw lines")
    hidden_alias(up, "--topic", "lines_topic")
    up.add_argument("--partitions", type=positive_int, default=4, metavar="N",
                    help="partitions of the lines topic")
    up.add_argument("--host", metavar="NAME",
                    help="host name rsyslog puts in each record (default: this machine's)")
    add_profile_options(up, profile_help="regex profile for every file, passed to the worker "
                                         "(default: detected)")
    up.set_defaults(func=_up)
    down = actions.add_parser("down", help="stop what `stack up` started")
    _workdir_option(down)
    down.set_defaults(func=_down)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _workdir_option(p: argparse.ArgumentParser) -> None:
    from dpmstream.commands.stack.local_stack import default_workdir

    p.add_argument("--workdir", default=str(default_workdir()), metavar="DIR",
                   help="where the stack keeps configs, data, logs, pid files and state.json")


def _up(args) -> int:
    from dpmstream.commands.stack.process import ServiceError
    from dpmstream.commands.stack.local_stack import Stack, parse_ports

    try:
        ports = parse_ports(args.ports)
    except ValueError as exc:
        print(f"dpmstream stack: {exc}", file=sys.stderr)
        return 2
    worker_args = [*(["--tz", args.tz] if args.tz else []),
                   *(["--profile", args.profile] if args.profile else [])]
    stack = Stack(args.workdir, args.logs, ports=ports, topic=args.lines_topic,
                  partitions=args.partitions, hostname=args.host, worker_args=worker_args)
    try:
        endpoints = stack.up()
    except ServiceError as exc:
        print(f"dpmstream stack: {exc}", file=sys.stderr)
        return 1
    for name in ("kafka", "prometheus", "metrics"):
        print(f"{name}={endpoints[name]}")
    sys.stdout.flush()
    return 0


def _down(args) -> int:
    from dpmstream.commands.stack.process import ServiceError
    from dpmstream.commands.stack.local_stack import Stack

    try:
        stopped = Stack(args.workdir).down()
    except ServiceError as exc:
        print(f"dpmstream stack: {exc}", file=sys.stderr)
        return 1
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}", file=sys.stderr)
    return 0
