"""Options and helpers shared by the commands that read DPM logs."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from dpmstream.parsers.clock import ClockError, load_zone
from dpmstream.parsers.profiles import ProfileError, resolve_profile


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
                   help="head-node name for records (default: rsyslog prefix, else this machine)")
    p.add_argument("--timeout", type=float, default=3600.0, metavar="S",
                   help="event-time seconds after which a request with no end is emitted as "
                        "incomplete (default 3600)")
    p.add_argument("--max-in-flight", type=int, default=1_000_000, metavar="N",
                   help="cap on open requests; past it the least recently active is emitted "
                        "and counted as evicted (default 1000000)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")


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
