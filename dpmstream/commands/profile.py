"""`dpmstream profile check|list|show`: how well regex profiles fit an admin's logs.

`check` lives in profile_check.py."""

from __future__ import annotations

import sys

from dpmstream.commands.common import MAX_COUNT, bounded, loads_with, positive_int

from dpmstream.commands.profile_check import run_check
from dpmstream.parsers.dome_profiles import ROLES as DOME_ROLES
from dpmstream.parsers.dome_profiles import bundled_dome_profiles, resolve_any_profile, resolve_dome_profile
from dpmstream.parsers.profiles import ROLES, ProfileError, bundled_profiles, resolve_profile


# --profile of `profile check`: a DPM or a DOME profile that loads.
checkable_profile = loads_with(resolve_any_profile)


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text,
                       description="Inspect the regex profiles (regex_profiles/*.toml).")
    psub = p.add_subparsers(dest="profile_command", metavar="ACTION")
    check = psub.add_parser(
        "check", help="whether the profiles fit a log: roles, reassembly, unmatched shapes",
        description=(
            "For each FILE: the share of lines each profile matches, per role, and the most "
            "common unmatched line shapes (numbers, UUIDs, hosts, paths and DNs masked), so "
            "that a profile can be adapted to a site's wording. Per daemon in the file: its "
            "required roles, the counters of the real reassembly over its lines, and the "
            "lines only a catch-all role matched. Exit status 1, with a WARNING block, when "
            "a profile does not fit (a required role has no line, too many stray returns, "
            "orphans or calls without returns) or no line is a daemon's; 2 on errors."))
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--profile", action="append", metavar="P", type=checkable_profile,
                       help="check only this profile (name or .toml file); repeatable")
    check.add_argument("--top", type=positive_int, default=10, metavar="N",
                       help="unmatched and catch-all shapes to show")
    check.add_argument("--max-lines", type=line_count, default=0, metavar="N",
                       help="read at most this many lines per file (default: all)")
    check.set_defaults(func=run_check, nothing_left_at_exit=True)
    lst = psub.add_parser("list", help="the bundled profiles")
    lst.set_defaults(func=run_list)
    show = psub.add_parser("show", help="the patterns of a profile")
    show.add_argument("profile", metavar="P", help="bundled name or .toml file")
    show.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


line_count = bounded(int, "a whole number", 0, MAX_COUNT)


def run_list(args) -> int:
    for profile in bundled_profiles():
        print(f"{profile.name:<12} daemon={profile.daemon:<8} {profile.description}")
        print(f"{'':<12} {profile.source}")
    for dome in bundled_dome_profiles():
        print(f"{dome.name:<12} family=dome {dome.description}")
        print(f"{'':<12} {dome.source}")
    return 0


def run_show(args) -> int:
    try:
        profile = resolve_profile(args.profile)
    except ProfileError as exc:
        try:
            return show_dome(resolve_dome_profile(args.profile))
        except ProfileError:
            print(f"dpmstream profile: {exc}", file=sys.stderr)
            return 2
    print(f"name: {profile.name}\ndaemon: {profile.daemon}\ntimezone: {profile.timezone}")
    print(f"file: {profile.source}\nfunc: {profile.func}")
    print(f"required roles: {', '.join(profile.required_roles) or '-'}")
    print(f"envelope (native): {profile.native_envelope}")
    print(f"envelope (rsyslog prefix): {profile.rsyslog_envelope}")
    return _show_roles(profile, ROLES, 12)


def show_dome(profile) -> int:
    print(f"name: {profile.name}\nfamily: dome\ntimezone: {profile.timezone}")
    print(f"file: {profile.source}\nprograms: {', '.join(profile.tags)}")
    print(f"required roles: {', '.join(profile.required_roles) or '-'}")
    for form, pattern in profile.envelopes.items():
        print(f"envelope ({form}): {pattern}")
    print(f"message: {profile.message}")
    return _show_roles(profile, DOME_ROLES, 16)


def _show_roles(profile, roles, width: int) -> int:
    """Every role's patterns, in matching order."""
    for role in roles:
        for pattern in profile.roles.get(role, ()):
            print(f"  {role:<{width}} {pattern}")
    return 0
