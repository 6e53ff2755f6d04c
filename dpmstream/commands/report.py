"""`dpmstream report`: logs (or a replay's output directory) -> one self-contained HTML page."""

from __future__ import annotations

import argparse
import gc
import os
import sys

from dpmstream.commands.common import (
    add_log_options, checked_profile, checked_zone, default_host, reassembly_settings,
    setup_logging,
)
from dpmstream.streams.inputs import InputError, describe
from dpmstream.streams.gc_pace import relaxed_gc, thawed_after
from dpmstream.streams.progress import Progress


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name, help=help_text, description=(
            "Write one HTML page (no network, opens from a file, prints) that shows where the "
            "head node spends its time: the phase breakdown per op, request durations, "
            "busy threads, slow-queue depth, polls and name-server latency, with a summary "
            "in words. FILE: log files as for `dpmstream replay`, or one directory a "
            "`dpmstream replay --out DIR` wrote (then --tz is the zone the page shows "
            "times in)."))
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the page to write")
    p.add_argument("--since", metavar="T",
                   help="keep requests starting at or after T: ISO 8601, or local time of the "
                        "log ('2011-08-12 14:31', '08/12 14:31', '14:31')")
    p.add_argument("--until", metavar="T", help="keep requests starting before T (as --since)")
    p.add_argument("--whatif", action=argparse.BooleanOptionalAction, default=True,
                   help="add what the simulator, calibrated on these records, predicts with "
                        "twice the slow threads (a few seconds of simulation)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: on a terminal, for long inputs)")
    add_log_options(p)
    p.set_defaults(func=run, nothing_left_at_exit=True)


def output_problem(path: str) -> str | None:
    """Why the page cannot be written to `path`, checked before the work; None if it can."""
    if os.path.isdir(path):
        return f"--out {path}: is a directory, not a file"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"--out {path}: no directory {folder} to write it in"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {path}: the directory {folder} is not writable"
    return None


def run(args) -> int:
    # The page reads every record into memory and keeps it to the end, and the work after
    # it (the what-if, the story, the figures) makes short-lived containers by the
    # thousand: at CPython's pace every tenth young collection walked the older
    # generation, records and all, again (issue 30: 85 M of report's 2,161 M instructions
    # on the thesis log, replay's own 39 M). So the young generation is collected at the
    # worker's pace, and the records, once read, are frozen out of the collections
    # (_write_page): reference counts still free them; a cycle among them waits for the
    # page's end, where they are thawed (thawed_after: a caller in this process keeps
    # no frozen objects).
    with relaxed_gc(), thawed_after():
        return _write_page(args)


def _write_page(args) -> int:
    setup_logging(args.verbose, deferred=True)   # report's messages: parsers/lazylog's
    problem = output_problem(args.out)
    if problem is not None:
        print(f"dpmstream report: {problem}", file=sys.stderr)
        return 2
    from dpmstream.report.build import build_page
    from dpmstream.report.sources import SourceError, from_logs, from_replay_dir
    from dpmstream.report.window import WindowError

    try:
        dirs = [f for f in args.files if f != "-" and os.path.isdir(f)]
        if dirs:
            if len(args.files) > 1:
                print("dpmstream report: give one replay output directory, or log files",
                      file=sys.stderr)
                return 2
            data = from_replay_dir(dirs[0], checked_zone(args.tz), args.since, args.until)
        else:
            inputs = [describe(name) for name in args.files]
            if sum(1 for i in inputs if i.is_stdin) > 1:
                print("dpmstream report: '-' (stdin) may be given once", file=sys.stderr)
                return 2
            data = from_logs(inputs, host=default_host(args.host),
                             profile=checked_profile(args.profile), tz=checked_zone(args.tz),
                             year=args.year, settings=reassembly_settings(args), since=args.since,
                             until=args.until,
                             progress=Progress(sum(i.size or 0 for i in inputs) or None,
                                               enabled=args.progress))
    except (InputError, SourceError, WindowError) as exc:
        print(f"dpmstream report: {exc}", file=sys.stderr)
        return 2
    gc.freeze()   # the records read stay to the end: no collection walks them again (run)

    if args.whatif and data.requests:
        from dpmstream.report.whatif import doubled_slow_threads
        data.whatif = doubled_slow_threads(data.requests, data.calls)
    html, story = build_page(data)
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(html)
    except OSError as exc:
        print(f"dpmstream report: --out {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    if story is None and not data.dome:
        print(f"dpmstream report: no records in the window; wrote {args.out} anyway",
              file=sys.stderr)
    elif story is not None:
        print("\n".join(story.summary))
    dome = f", {len(data.dome):,} DOME records" if data.dome else ""
    print(f"wrote {args.out} ({len(data.requests):,} requests, {len(data.calls):,} calls{dome})")
    return 1 if data.failures else 0
