"""Does a profile fit a log? Verdicts from its role counts and the reassembler's counters.

A profile can match every line of a log and still not fit it: a reworded call line that
falls to a catch-all role (`other`, `detail`) is "matched", yet the reassembler never sees
the call open, so its `returns` is stray, its request an orphan and its phases lost.
`dpmstream profile check` counts a profile's roles over a file and runs the same lines
through the real reassembly; `judge` turns those counts into findings, and `looks_like`
names the required roles a catch-all or unmatched line seems to carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Roles that take whatever else a daemon logs: lines landing there are not understood.
CATCH_ALL = ("detail", "other")
# A daemon with fewer lines than this may well show no line of some required role.
MIN_LINES_TO_JUDGE = 20
# A file cut mid-way leaves a few calls and requests without their start (or end): only
# more than this many, and more than this share, say the profile misses lines.
LIMIT_COUNT = 3
LIMIT_SHARE = 0.05

ROLE_MEANING = {
    "accept": "accepted connections",
    "call": "call opens",
    "returns": "call ends",
    "token": "request tokens",
    "status": "status answers",
    "slow_start": "slow-thread starts",
    "file": "file lines",
    "startup": "daemon starts",
}

# What a line of a role tends to contain, whatever its wording; applied to a line's shape
# (parsers/shapes.py: UUIDs are <UUID>, numbers N, DNs <DN>).
_CUES = {
    "call": re.compile(r"\b[A-Z]{2}092\b|\brequest(?:ed)? by\b|\breq\b", re.IGNORECASE),
    "returns": re.compile(r"\breturn(?:s|ed)?\b|\bexit (?:code|status)\b|\brc\b", re.IGNORECASE),
    "token": re.compile(r"<UUID>"),
    "status": re.compile(r"\bstatus\b|\bDPM_[A-Z]+", re.IGNORECASE),
    "slow_start": re.compile(r"\bprocessing\b|\bslow thread\b", re.IGNORECASE),
}


def looks_like(line_shape: str, roles) -> tuple[str, ...]:
    """The roles among `roles` that a line of this shape seems to carry."""
    return tuple(r for r in roles if r in _CUES and _CUES[r].search(line_shape))


@dataclass(frozen=True)
class Finding:
    """One reason a profile does not fit; `role` is set when a required role is missing."""

    message: str
    role: str | None = None


def _too_many(count: int, base: int) -> bool:
    return count > LIMIT_COUNT and count > LIMIT_SHARE * base


def _pct(n: int, base: int) -> str:
    return f"{100.0 * n / base:.1f}%" if base else "-"


def judge(required, lines: int, roles: dict, stats: dict) -> list[Finding]:
    """Findings for a profile over `lines` lines of its daemon.

    required: the profile's required roles; roles: role -> lines of the daemon;
    stats: the reassembler's counters (ReassemblyStats.as_dict()) over the same lines.
    """
    findings = []
    if lines >= MIN_LINES_TO_JUDGE:
        for role in required:
            if not roles.get(role):
                what = ROLE_MEANING.get(role, role)
                findings.append(Finding(f"role `{role}` ({what}): no line", role))
    returns = roles.get("returns", 0)
    opens = roles.get("call", 0) + roles.get("slow_start", 0)
    stray = stats.get("stray_returns", 0)
    if _too_many(stray, returns):
        findings.append(Finding(
            f"stray returns: {stray} of {returns} `returns` lines ({_pct(stray, returns)}) "
            f"close no open call ({opens} call opens); the call lines are not recognised"))
    noreturn = stats.get("noreturn_calls", 0)
    if _too_many(noreturn, opens):
        findings.append(Finding(
            f"calls without returns: {noreturn} of {opens} call opens ({_pct(noreturn, opens)}) "
            f"never saw their `returns`; the returns lines are not recognised"))
    orphans = stats.get("orphans", 0)
    requests = stats.get("requests", 0)
    if _too_many(orphans, requests):
        findings.append(Finding(
            f"orphans: {orphans} of {requests} requests ({_pct(orphans, requests)}) were "
            f"first seen after their put/get; the put/get call or token lines are not "
            f"recognised"))
    return findings
