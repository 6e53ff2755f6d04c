"""Options and helpers shared by the commands that read DPM logs."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from dpmstream.parsers.clock import ClockError, load_zone
from dpmstream.parsers.profiles import ProfileError, resolve_profile


def _bounded(convert, kind: str, ok, rule: str):
    """An argparse type: `convert` the text, then refuse values for which `ok` is false."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, not {text}")
        return value
    return parse


positive_float = _bounded(float, "a number", lambda v: v > 0, "> 0")
non_negative_float = _bounded(float, "a number", lambda v: v >= 0, ">= 0")
positive_int = _bounded(int, "a whole number", lambda v: v >= 1, ">= 1")


def pipeline_options(args) -> dict:
    """The reassembly settings of add_log_options, as Pipeline keyword arguments."""
    return {"timeout_s": args.timeout, "max_in_flight": args.max_in_flight,
            "max_threads": args.max_threads, "grace_s": args.grace,
            "head_aliases": tuple(args.head_alias or ()),
            # A head node named by the user is not learned from the logs (record-rules.md).
            "learn_head": not (args.host or args.head_alias)}


def add_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", metavar="P",
                   help="regex profile: a bundled name (lcgdm-dpm, lcgdm-ns, lcgdm-srm) or a "
                        ".toml file; default: detected per file from its first lines")
    p.add_argument("--tz", metavar="ZONE",
                   help="IANA time zone of the log stamps (default: the profile's, 'local')")
    p.add_argument("--year", type=int, metavar="Y",
                   help="year of the first line (default: rsyslog prefix, rotated file name "
                        "log-YYYYMMDD, or the file's mtime)")
    p.add_argument("--host", metavar="NAME",
                   help="head-node name for records (default: rsyslog prefix, else this machine); "
                        "given, name-server clients link by this name and --head-alias only, "
                        "else the head's client name is learned from the logs")
    add_reassembly_options(p, scope="")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")


def add_reassembly_options(p: argparse.ArgumentParser, scope: str) -> None:
    """The caps and timeouts of reassembly (`scope`: e.g. " per partition")."""
    p.add_argument("--timeout", type=positive_float, default=3600.0, metavar="S",
                   help="event-time seconds after which a request with no end is emitted as "
                        "incomplete, and a silent thread is forgotten (default 3600)")
    p.add_argument("--max-in-flight", type=positive_int, default=1_000_000, metavar="N",
                   help=f"cap on open requests{scope}; past it the least recently active is "
                        "emitted and counted as evicted (default 1000000)")
    p.add_argument("--max-threads", type=positive_int, default=100_000, metavar="N",
                   help=f"cap on daemon threads tracked{scope}; past it the least recently "
                        "active is dropped and counted (default 100000)")
    p.add_argument("--grace", type=non_negative_float, default=60.0, metavar="S",
                   help="after a daemon restart, event-time seconds the old process may stay "
                        "silent before its unfinished calls are closed (default 60)")
    p.add_argument("--head-alias", action="append", metavar="NAME",
                   help="another name of the head node as name-server clients see it (NS092 "
                        "`from NAME`): its calls link to DPM requests too; repeatable")


def setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="dpmstream: %(levelname)s: %(message)s", stream=sys.stderr)


def checked_profile(spec: str | None):
    """The forced profile, or None; exits with a clear message when it cannot be loaded."""
    if spec is None:
        return None
    try:
        return resolve_profile(spec)
    except ProfileError as exc:
        raise SystemExit(f"dpmstream: {exc}")


def checked_zone(name: str | None) -> str | None:
    if name is not None:
        try:
            load_zone(name)
        except ClockError as exc:
            raise SystemExit(f"dpmstream: {exc}")
    return name


def default_host(given: str | None) -> str:
    return given or socket.gethostname()
