"""`dpmstream profile check|list|show`: how well regex profiles fit an admin's logs."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from dpmstream.parsers.profiles import (
    ROLES, ProfileError, bundled_profiles, match_line, resolve_profile,
)
from dpmstream.parsers.shapes import shape
from dpmstream.streams.inputs import InputError, describe, iter_lines, open_binary


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text,
                       description="Inspect the regex profiles (regex_profiles/*.toml).")
    psub = p.add_subparsers(dest="profile_command", metavar="ACTION")
    check = psub.add_parser(
        "check", help="share of lines matched per role and profile, and unmatched shapes",
        description=(
            "For each FILE: the share of lines each profile matches, per role, and the most "
            "common unmatched line shapes (numbers, UUIDs, hosts, paths and DNs masked), so "
            "that a profile can be adapted to a site's wording."))
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--profile", action="append", metavar="P",
                       help="check only this profile (name or .toml file); repeatable")
    check.add_argument("--top", type=int, default=10, help="unmatched shapes to show (default 10)")
    check.add_argument("--max-lines", type=int, default=0,
                       help="read at most this many lines per file (default: all)")
    check.set_defaults(func=run_check)
    lst = psub.add_parser("list", help="the bundled profiles")
    lst.set_defaults(func=run_list)
    show = psub.add_parser("show", help="the patterns of a profile")
    show.add_argument("profile", metavar="P", help="bundled name or .toml file")
    show.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_list(args) -> int:
    for profile in bundled_profiles():
        print(f"{profile.name:<12} daemon={profile.daemon:<8} {profile.description}")
        print(f"{'':<12} {profile.source}")
    return 0


def run_show(args) -> int:
    try:
        profile = resolve_profile(args.profile)
    except ProfileError as exc:
        print(f"dpmstream profile: {exc}", file=sys.stderr)
        return 2
    print(f"name: {profile.name}\ndaemon: {profile.daemon}\ntimezone: {profile.timezone}")
    print(f"file: {profile.source}\nfunc: {profile.func}")
    print(f"envelope (native): {profile.native_envelope}")
    print(f"envelope (rsyslog prefix): {profile.rsyslog_envelope}")
    for role in ROLES:
        for pattern in profile.roles.get(role, ()):
            print(f"  {role:<12} {pattern}")
    return 0


class ProfileTally:
    """Counts for one profile over one file."""

    def __init__(self, profile):
        self.profile = profile
        self.roles: Counter = Counter()
        self.unmatched: Counter = Counter()  # shape -> count
        self.malformed = 0
        self.foreign = 0  # envelope and role match, but FUNC is not this daemon's

    def add(self, line: str) -> None:
        p = self.profile
        form, m, alt = match_line(p, line)
        if form is None:
            self.malformed += 1
            return
        func = m.group(form.envelope["func"])
        if alt is None:
            self.unmatched[shape(f"{func}: {line[m.start(m.lastindex):]}")] += 1
            return
        if not p.func_regex.match(func):
            self.foreign += 1
        self.roles[alt.role] += 1

    @property
    def matched(self) -> int:
        return sum(self.roles.values())


def run_check(args) -> int:
    try:
        profiles = ([resolve_profile(s) for s in args.profile] if args.profile
                    else bundled_profiles())
    except ProfileError as exc:
        print(f"dpmstream profile check: {exc}", file=sys.stderr)
        return 2
    status = 0
    for name in args.files:
        try:
            inp = describe(name)
            stream, _ = open_binary(inp)
        except (InputError, OSError) as exc:
            print(f"dpmstream profile check: {exc}", file=sys.stderr)
            status = 2
            continue
        tallies = [ProfileTally(p) for p in profiles]
        total = 0
        try:
            for raw in iter_lines(stream):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                total += 1
                for tally in tallies:
                    tally.add(line)
                if args.max_lines and total >= args.max_lines:
                    break
        except InputError as exc:
            print(f"dpmstream profile check: {name}: {exc}", file=sys.stderr)
            status = 2
        print(render_check(name, total, tallies, args.top))
    return status


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:5.1f}%" if total else "    -"


def render_check(name: str, total: int, tallies: list[ProfileTally], top: int) -> str:
    out = [f"{name}: {total} lines"]
    best = max(tallies, key=lambda t: t.matched - t.foreign, default=None)
    for t in sorted(tallies, key=lambda t: -(t.matched - t.foreign)):
        unmatched = sum(t.unmatched.values())
        mark = "  <- best fit" if t is best and t.matched else ""
        out.append(f"  profile {t.profile.name}: matched {_pct(t.matched, total)}, unmatched "
                   f"{_pct(unmatched, total)}, no envelope {_pct(t.malformed, total)}{mark}")
        if t.foreign:
            out.append(f"    {t.foreign} matched lines are under functions not of "
                       f"daemon {t.profile.daemon}")
        for role in ROLES:
            if t.roles[role]:
                out.append(f"    {role:<12} {t.roles[role]:>9} {_pct(t.roles[role], total)}")
    if best is not None and best.unmatched:
        out.append(f"  most common unmatched shapes ({best.profile.name}):")
        for text, count in best.unmatched.most_common(top):
            out.append(f"    {count:>9}  {text}")
    return "\n".join(out)
