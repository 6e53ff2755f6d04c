"""`dpmstream simulate --out PREFIX`: a simulated DPM head node's logs and their truth.

Writes PREFIX.log (DPM daemon), PREFIX.dpns.log (name server), PREFIX.requests.csv and
PREFIX.calls.csv (the records the logs must reassemble into), and prints a summary.
With --syslog-file, also PREFIX.messages: both daemons' lines as rsyslog writes them
into one file, among other programs' lines (the same records).
Options left out take the scenario's value (default: the thesis setup).
"""

from __future__ import annotations

import argparse
import sys

from dpmstream.commands.common import zone_name

# (option, SimConfig field, type, help); every default is None = "the scenario's value".
_OPTIONS = [
    ("--clients", "clients", int, "client hosts (default: 3; --dome: end users' hosts, at most 240, default 12)"),
    ("--concurrency", "concurrency", int, "concurrent request streams per client (default: 25)"),
    ("--requests", "requests", int, "request cycles to start (default: 3000 unless --duration/--lines)"),
    ("--duration", "duration", float, "simulated seconds; the run stops there, mid-call if need be"),
    ("--lines", "lines", int, "start cycles until the DPM log has at least this many lines"),
    ("--rate", "rate", float, "open loop: Poisson request arrivals per second instead of streams"),
    ("--files", "files", int, "files per put/get (default: 1)"),
    ("--get-fraction", "get_fraction", float, "share of gets among requests (default: 0)"),
    ("--plain-rate", "plain_rate", float, "chance a cycle starts with a ping/getpools call (default: 0.05)"),
    ("--fthreads", "fthreads", int, "fast threads, NB_FTHREADS (default: 20)"),
    ("--sthreads", "sthreads", int, "slow threads, NB_STHREADS (default: 20)"),
    ("--dpns-threads", "dpns_threads", int, "name-server threads (default: 20)"),
    ("--backlog", "backlog", int, "listen backlog; beyond it connections are refused (default: 50)"),
    ("--auth-fail-rate", "auth_fail_rate", float, "connections failing authentication (default: 0.01)"),
    ("--put-fail-rate", "put_fail_rate", float, "put/get calls returning rc != 0 (default: 0.005)"),
    ("--proc-fail-rate", "proc_fail_rate", float, "processing runs returning rc != 0 (default: 0.005)"),
    ("--done-fail-rate", "done_fail_rate", float, "putdone/relfiles returning rc != 0 (default: 0)"),
    ("--abort-rate", "abort_rate", float, "requests the client aborts while waiting (default: 0.005)"),
    ("--abandon-rate", "abandon_rate", float, "requests the client abandons (default: 0.005)"),
    ("--seed", "seed", int, "random seed (default: 1); a run is a function of its options"),
    ("--start", "start", str, "local start time YYYY-MM-DD HH:MM[:SS[.fff]] (default: 2011-08-12 14:31:40)"),
    ("--tz", "tz", "zone", "IANA time zone of the stamps (default: Europe/Zurich)"),
    ("--restart-at", "restart_at", float, "restart the DPM daemon this many seconds in (new pid)"),
    ("--restart-downtime", "restart_downtime", float, "seconds the daemon is down (default: 3)"),
    ("--host", "host", str, "head-node name (default: dpmhead01.cern.ch)"),
    ("--pid", "pid", int, "DPM daemon pid (default: 12345)"),
    ("--dpns-pid", "dpns_pid", int, "name-server pid (default: 9876)"),
    ("--jitter-rate", "jitter_rate", float, "share of lines written a few ms late, out of order (default: 0.01)"),
    ("--jitter-ms", "jitter_ms", int, "most a late line lags its stamp, ms (default: 5; 0: none)"),
    ("--stray-lines", "stray_lines", int,
     "times another DPM process logs during the run: a probe's ping, every third a main-thread line (default: 0)"),
    ("--stray-pid", "stray_pid", int, "that other process's pid (default: 23456)"),
    ("--restart-overlap", "restart_overlap", float,
     "with --restart-at: seconds the old process goes on finishing its calls after the new one starts (default: 0)"),
    ("--clock-step-at", "clock_step_at", float, "seconds in: the head node's clock steps back (NTP)"),
    ("--clock-step-s", "clock_step_s", float, "how far the clock steps back, seconds (default: 30)"),
    ("--future-lines", "future_lines", int, "stray DPM lines stamped --future-ahead-s ahead (default: 0)"),
    ("--future-ahead-s", "future_ahead_s", float, "how far ahead those lines are stamped, seconds (default: 3660)"),
    ("--poll-first-ms", "poll_first_ms", int, "a client's first status poll this long after the reply (default: 125)"),
    ("--poll-factor", "poll_factor", float, "each next poll this many times later (default: 2; 1: a fixed interval)"),
    ("--poll-max-ms", "poll_max_ms", int, "polls at most this far apart (default: 4000)"),
    ("--dirs", "dirs", int, "spread the files over N directories (default: one per client)"),
    ("--dpns-gap", "dpns_gap", "gap", "A:B seconds after the start: the DPNS log lacks those lines"),
]
_FLAGS = [
    ("--whole-seconds", "whole_seconds", True, "stamps without milliseconds (older builds)"),
    ("--no-accept-lines", "accept_lines", False, "no `request accepted` lines"),
    ("--sync-get", "sync_get", True, "DPM_USE_SYNCGET: gets served in the fast thread"),
    ("--same-dir", "same_dir", True, "all files in one directory (one DPNS lock)"),
    ("--syslog-file", "syslog_file", True, "also write PREFIX.messages: both daemons in one rsyslog file"),
]


def _gap(text: str) -> tuple[float, float]:
    try:
        a, b = (float(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected A:B (seconds)") from None
    return a, b


def register(subparsers, name: str, help_text: str) -> None:
    from dpmstream.commands.simulate_dome import add_dome_options
    from dpmstream.simulator.scenarios import SCENARIOS

    scenario_help = "; ".join(f"{n}: {d}" for n, (d, _) in SCENARIOS.items()).replace("%", "%%")
    parser = subparsers.add_parser(
        name, help=help_text, description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, metavar="PREFIX",
                        help="output prefix: PREFIX.log, PREFIX.dpns.log, PREFIX.requests.csv, PREFIX.calls.csv "
                             "(and PREFIX.messages with --syslog-file)")
    parser.add_argument("--scenario", default="thesis", choices=list(SCENARIOS), metavar="NAME",
                        help=f"preset to start from (default: thesis). {scenario_help}")
    for option, dest, kind, text in _OPTIONS:
        kind = {"gap": _gap, "zone": zone_name}.get(kind, kind)
        parser.add_argument(option, dest=dest, type=kind, default=None, help=text)
    for option, dest, value, text in _FLAGS:
        parser.add_argument(option, dest=dest, action="store_const", const=value, default=None, help=text)
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    add_dome_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from dpmstream.commands.simulate_dome import misplaced, run_dome
    from dpmstream.simulator import scenario, simulate

    wrong = misplaced(args, _OPTIONS, _FLAGS)
    if wrong:
        kind = "a DOME site (--dome)" if args.dome else "the DPM head node (no --dome)"
        print(f"dpmstream simulate: {', '.join(wrong)}: not an option of {kind}", file=sys.stderr)
        return 2
    if args.dome:
        return run_dome(args)

    overrides = {dest: getattr(args, dest) for _, dest, *_ in _OPTIONS + _FLAGS
                 if getattr(args, dest) is not None}
    try:
        config = scenario(args.scenario, **overrides)
        config.validate()
    except (ValueError, KeyError) as exc:
        message = exc.args[0] if exc.args else exc
        print(f"dpmstream simulate: {message}", file=sys.stderr)
        return 2
    try:
        result = simulate(config, args.out)
    except OSError as exc:
        print(f"dpmstream simulate: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(result.summary())
    return 0
