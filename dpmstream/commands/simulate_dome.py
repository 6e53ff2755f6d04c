"""`dpmstream simulate --dome --out PREFIX`: a simulated DOME site (a head node and disk
nodes, DPM 1.10 on) and the records its logs must give (simulator/dome_run.py).

Its own options are declared here; the options it shares with the DPM simulator (seed,
start, zone, duration, rate, restart, failure rates) are simulate.py's, read through
SHARED. Options of one kind given to the other are refused (exit 2).
"""

from __future__ import annotations

import sys

# option, DomeConfig field, type, help; every default is None = DomeConfig's.
DOME_OPTIONS = [
    ("--disks", "disks", int, "DOME: disk nodes (default: 3)"),
    ("--filesystems", "filesystems", int, "DOME: filesystems per disk node (default: 2)"),
    ("--threads", "threads", int, "DOME: worker threads per process (default: 64)"),
    ("--program", "program", str, "DOME: syslog program name, dome or xrootd (default: dome)"),
    ("--stamp", "stamp", str, "DOME: syslog stamp, traditional (no year, whole seconds) or rfc3339 (default: traditional; "
     "the journal envelope always has microseconds)"),
    ("--envelope", "envelope", str,
     "DOME: dmlite-log, messages (among other programs), journal (journalctl -q -o short-iso-precise) "
     "or kafka (JSON envelopes) (default: dmlite-log)"),
    ("--generation", "generation", str, "DOME: tid ({TID} in every line) or notid (dmlite < 0.8.4) (default: tid)"),
    ("--chksum-fraction", "chksum_fraction", float, "DOME: puts followed by dome_chksum polls (default: 0.3)"),
    ("--chksum-fail-rate", "chksum_fail_rate", float, "DOME: checksum calculations that fail (default: 0.05)"),
    ("--chksum-give-up-rate", "chksum_give_up_rate", float,
     "DOME: frontends that stop polling dome_chksum after 1 to 4 polls (default: 0.03)"),
    ("--chksum-pair-rate", "chksum_pair_rate", float,
     "DOME: checksum waits during which the client polls a second file at once (default: 0.03)"),
    ("--disk-down-at", "disk_down_at", float, "DOME: seconds in: the first disk node goes down (default: 200)"),
    ("--disk-down-s", "disk_down_s", float, "DOME: ... for this long (default: 150)"),
    ("--gap-at", "gap_at", float, "DOME: seconds in: journald drops the head's lines (default: 300)"),
    ("--gap-s", "gap_s", float, "DOME: ... for this long (default: 4)"),
    ("--request-timeout", "timeout", float, "DOME: a put with no putdone this long is incomplete (default: 120)"),
    ("--foreign-rate", "foreign_rate", float, "DOME: other programs' lines per dmlite line (default: 0.05)"),
]
# simulate.py's dest -> DomeConfig field, for the options both simulators take.
SHARED = {
    "seed": "seed", "start": "start", "tz": "tz", "duration": "duration", "rate": "rate",
    "restart_at": "restart_at", "restart_downtime": "restart_downtime", "host": "head",
    "accept_lines": "accept_lines", "put_fail_rate": "put_fail_rate",
    "abandon_rate": "abandon_rate", "done_fail_rate": "putdone_fail_rate", "clients": "clients",
}


def add_dome_options(parser) -> None:
    parser.add_argument("--dome", action="store_true",
                        help="simulate a DOME site instead (head + disk nodes): PREFIX.HOST.log per node, "
                             "PREFIX.calls.csv, .puts.csv, .checksums.csv, .capacity.csv, .fs_events.csv, .summary.json; "
                             "takes the DOME options and --seed --start --tz --duration --rate --restart-at "
                             "--restart-downtime --clients --host --no-accept-lines --put-fail-rate --abandon-rate "
                             "--done-fail-rate")
    for option, dest, kind, text in DOME_OPTIONS:
        parser.add_argument(option, dest=dest, type=kind, default=None, help=text)


def misplaced(args, options, flags) -> list[str]:
    """The options given that the chosen simulator does not take."""
    if args.dome:
        return [o for o, dest, *_ in options + flags
                if dest not in SHARED and getattr(args, dest) is not None]
    return [o for o, dest, *_ in DOME_OPTIONS if getattr(args, dest) is not None]


def run_dome(args) -> int:
    from dpmstream.simulator.dome_config import DomeConfig
    from dpmstream.simulator.dome_run import simulate_dome

    fields = {SHARED[d]: getattr(args, d) for d in SHARED if getattr(args, d) is not None}
    fields.update({dest: getattr(args, dest) for _, dest, *_ in DOME_OPTIONS
                   if getattr(args, dest) is not None})
    config = DomeConfig(**fields)
    try:
        config.validate()
    except (ValueError, KeyError) as exc:
        print(f"dpmstream simulate: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    try:
        result = simulate_dome(config, args.out)
    except ValueError as exc:   # more concurrent calls than threads
        print(f"dpmstream simulate: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dpmstream simulate: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(result.describe())
    return 0
