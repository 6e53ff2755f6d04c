"""Options and helpers shared by the commands: each option concept is declared here once.

Every option is declared by one function (add_log_options, add_reassembly_options,
add_metrics_options; the Kafka connection in streams/kafka/config.add_kafka_arguments)
and validated by one argparse `type=`, so that a bad value exits 2 in every command with
one line naming the option and the value (see cli.OneLineErrors). Help texts state their
default once, in one style, through HelpFormatter.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys

# The domain's modules (profiles, clock, settings) are imported where an option is read,
# not here: the top-level parser takes HelpFormatter from this module, and `dpmstream
# --help` reads no profile, zone or setting.

# The years the dating code reads sensibly (a rotated name log-YYYYMMDD counts from 1990;
# epoch milliseconds from 1970; nothing in a DPM log is dated after 2100).
YEARS = (1970, 2100)
# Bounds users can see: a request open for more than a year, or more than a billion open
# requests or threads, is a typo (and would overflow the engines' integer fields).
MAX_SECONDS = 366 * 86400.0
MAX_COUNT = 1_000_000_000


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs kept as written (examples stay on their lines); each
    option's default shown once, as ` (default: X)`, unless its help already names it
    or there is none to show. Whole floats print as integers (3600, not 3600.0)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None, **more):
        # argparse's default width is shutil.get_terminal_size's columns less 2, and its
        # import of shutil (bz2, lzma, fnmatch with it) was ~6 M instructions of every
        # command's start-up, paid by the first parser made (issue 30): read here alike.
        if width is None:
            width = terminal_columns() - 2
        # (`more`: what a later argparse may add, passed on as given)
        super().__init__(prog, indent_increment, max_help_position, width, **more)

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or any(action.default is v for v in (None, False, True))
                or action.default == [] or action.default is argparse.SUPPRESS
                or not action.option_strings or action.nargs == 0):
            return text
        return text + " (default: %(default)s)"

    def _expand_help(self, action):
        if isinstance(action.default, float):
            action = copy.copy(action)
            action.default = f"{action.default:g}"
        return super()._expand_help(action)


def terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS where a positive whole number, else
    the width of the terminal on sys.__stdout__, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def bounded(convert, kind: str, low=None, high=None, *, low_open: bool = False):
    """An argparse type: `convert` the text, then refuse values outside [low, high]
    (low excluded with low_open) and anything not finite; exits 2 through argparse."""
    rule = " and ".join(r for r in (
        None if low is None else f"{'>' if low_open else '>='} {low:g}",
        None if high is None else f"<= {high:g}") if r)

    def parse(text: str):
        try:
            value = convert(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number ({rule}), not {text}")
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {rule}, not {text}")
        return value
    parse.__name__ = kind  # argparse names the type in some messages
    return parse


positive_float = bounded(float, "a number", 0, MAX_SECONDS, low_open=True)
non_negative_float = bounded(float, "a number", 0, MAX_SECONDS)
positive_int = bounded(int, "a whole number", 1, MAX_COUNT)
port_number = bounded(int, "a port number", 0, 65535)
year_number = bounded(int, "a year", *YEARS)


def zone_name(text: str) -> str:
    """--tz: an IANA zone name (or 'local'/'UTC' as clock.load_zone takes them)."""
    from dpmstream.parsers.clock import ClockError, load_zone
    try:
        load_zone(text)
    except ClockError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


def loads_with(resolve):
    """An argparse type: a profile spec (bundled name or .toml file) that `resolve` loads,
    kept as given; a ProfileError exits 2 through argparse."""
    def parse(text: str) -> str:
        from dpmstream.parsers.profiles import ProfileError
        try:
            resolve(text)
        except ProfileError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    return parse


def dpm_profile(spec: str):
    """A bundled DPM profile name or a .toml file, loaded (parsers/profiles.py)."""
    from dpmstream.parsers.profiles import resolve_profile
    return resolve_profile(spec)


def any_profile(spec: str):
    """A DPM or a DOME profile, loaded (parsers/dome_profiles.resolve_any_profile)."""
    from dpmstream.parsers.dome_profiles import resolve_any_profile
    return resolve_any_profile(spec)


# --profile: a bundled DPM profile name or a .toml file that loads.
profile_spec = loads_with(dpm_profile)
# --profile of the commands that read DOME logs too (replay, run): a DPM or a DOME profile.
any_profile_spec = loads_with(any_profile)


def hidden_alias(p, old: str, new_dest: str, **kwargs) -> None:
    """An old spelling kept working for a while, not shown in --help."""
    kwargs.setdefault("default", argparse.SUPPRESS)  # the new spelling's default stands
    p.add_argument(old, dest=new_dest, help=argparse.SUPPRESS, **kwargs)


def reassembly_settings(args) -> "ReassemblySettings":  # noqa: F821 (imported here)
    """The one value of the options of add_reassembly_options, built once per command.
    Head clients named by --head-alias are not learned from the logs (record-rules.md):
    the linker of either engine learns no head where aliases are given."""
    from dpmstream.parsers.settings import ReassemblySettings
    return ReassemblySettings(timeout_s=args.timeout, max_in_flight=args.max_in_flight,
                              max_threads=args.max_threads, grace_s=args.grace,
                              head_aliases=tuple(args.head_alias or ()))


def add_profile_options(p, *, profile_help: str | None = None, dome: bool = False) -> None:
    """--profile and --tz: how lines are read and their stamps zoned (`dome`: the
    command reads DOME logs too, and takes a DOME profile)."""
    p.add_argument("--profile", metavar="P", type=any_profile_spec if dome else profile_spec,
                   help=profile_help or (
                       "regex profile: a bundled name (lcgdm-dpm, lcgdm-ns, lcgdm-srm"
                       + (", dmlite-dome, dmlite-dome-notid" if dome else "")
                       + ") or a .toml file; default: detected per file from its first lines"))
    p.add_argument("--tz", metavar="ZONE", type=zone_name,
                   help="IANA time zone of the log stamps (default: the profile's, 'local')")


def add_log_options(p: argparse.ArgumentParser, dome: bool = False) -> None:
    """The options of every command that reads DPM log files itself (`dome`: DOME logs
    too, add_profile_options)."""
    add_profile_options(p, dome=dome)
    p.add_argument("--year", type=year_number, metavar="Y",
                   help=f"year of the FIRST line read ({YEARS[0]}..{YEARS[1]}; later lines "
                        "move on at each new year). Default: each line's rsyslog prefix, "
                        "else a rotated file's name log-YYYYMMDD (dating its last line), "
                        "else the file's mtime (likewise); stdin has neither: give --year")
    p.add_argument("--host", metavar="NAME",
                   help="head-node name for records (default: rsyslog prefix, else this machine); "
                        "name-server clients of this name link, and so does the head's client "
                        "name as the name server writes it, learned from the logs unless "
                        "--head-alias names it")
    add_reassembly_options(p, scope="")
    add_verbose_option(p)


def add_verbose_option(p) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")


def add_reassembly_options(p: argparse.ArgumentParser, scope: str) -> None:
    """The caps and timeouts of reassembly (`scope`: e.g. " per partition")."""
    # Defaults are written into the help as %(default)s, so that they show once whatever
    # formatter a command uses. dest stays `timeout` (report.py reads it by that name).
    p.add_argument("--request-timeout", dest="timeout", type=positive_float, default=3600,
                   metavar="S",
                   help="event-time seconds after which a request with no end is emitted as "
                        "incomplete, and a silent thread is forgotten (default: %(default)s)")
    hidden_alias(p, "--timeout", "timeout", type=positive_float)
    p.add_argument("--max-in-flight", type=positive_int, default=1_000_000, metavar="N",
                   help=f"cap on open requests{scope}; past it the least recently active is "
                        "emitted and counted as evicted (default: %(default)s)")
    p.add_argument("--max-threads", type=positive_int, default=100_000, metavar="N",
                   help=f"cap on daemon threads tracked{scope}; past it the least recently "
                        "active is dropped and counted (default: %(default)s)")
    p.add_argument("--grace", type=non_negative_float, default=60, metavar="S",
                   help="after a daemon restart, event-time seconds the old process may stay "
                        "silent before its unfinished calls are closed (default: %(default)s)")
    p.add_argument("--head-alias", action="append", metavar="NAME",
                   help="another name of the head node as name-server clients see it (NS092 "
                        "`from NAME`): its calls link to DPM requests too; repeatable")


def add_metrics_options(p: argparse.ArgumentParser) -> None:
    """The Prometheus endpoint: off unless --metrics-port is given (same in every command)."""
    p.add_argument("--metrics-port", type=port_number, default=None, metavar="PORT",
                   help="serve Prometheus metrics on this port (0: any free port; the "
                        "conventional one is 9108); default: no endpoint")
    p.add_argument("--metrics-bind", default="127.0.0.1", metavar="ADDR",
                   help="address of the metrics endpoint (default: %(default)s)")
    p.add_argument("--max-series", type=positive_int, default=25_000, metavar="N",
                   help="series budget of each metric family; label sets past it count under "
                        "host/op/daemon \"other\" (dpmstream_series_overflow_total; default: %(default)s)")


def setup_logging(verbose: int, deferred: bool = False) -> None:
    """Messages on stderr from WARNING (-v: INFO, -vv: DEBUG). `deferred`: for a command
    whose messages all go through parsers/lazylog's loggers (replay without a Kafka
    client, report, whatif), logging is configured, and imported, when one is first
    written."""
    config = dict(level=30 - 10 * min(verbose, 2),   # logging.WARNING, INFO, DEBUG
                  format="dpmstream: %(levelname)s: %(message)s", stream=sys.stderr)
    if deferred:
        from dpmstream.parsers.lazylog import configure
        configure(**config)
    else:
        import logging
        logging.basicConfig(**config)


def checked_profile(spec: str | None):
    """The forced profile, or None; exits with a clear message when it cannot be loaded."""
    if spec is None:
        return None
    from dpmstream.parsers.profiles import ProfileError
    try:
        return any_profile(spec)  # a DOME one only where --profile's type took it
    except ProfileError as exc:
        raise SystemExit(f"dpmstream: {exc}")


def checked_zone(name: str | None) -> str | None:
    if name is not None:
        from dpmstream.parsers.clock import ClockError, load_zone
        try:
            load_zone(name)
        except ClockError as exc:
            raise SystemExit(f"dpmstream: {exc}")
    return name


def default_host(given: str | None) -> str:
    # uname's node name is what socket.gethostname() returns on Linux (glibc reads it
    # there), without importing socket (and selectors) into every command's start-up.
    return given or os.uname().nodename
