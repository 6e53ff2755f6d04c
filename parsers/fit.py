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
from array import array

from .extension import compiled
from .plain import Counters, Frozen, Value
from .reassembly import BY_LINE

# Roles that take whatever else a daemon logs: lines landing there are not understood.
CATCH_ALL = ("detail", "other")
# Roles that open a call on a thread.
OPENING = ("call", "slow_start")
# Roles whose lines can make or unmake an orphan: a request is first seen by a token line
# or its slow thread's start (parsers/reassembly.py, _find and _on_token).
ORPHAN_ROLES = ("token", "slow_start")
# A daemon with fewer lines than this may well show no line of some required role.
MIN_LINES_TO_JUDGE = 200
# A file cut mid-way leaves a few calls and requests without their start (or end): only
# more than this many, and more than this share, say the profile misses lines.
LIMIT_COUNT = 3
LIMIT_SHARE = 0.05
# Orphans are judged in a file spanning at least this many of the longest gap between two
# token lines of one request.
GAPS_TO_JUDGE = 10
WHOLE_TO_JUDGE = 10  # requests seen whole, from put/get to their end
# So many requests, none seen from its put/get, cannot be a file cut mid-way.
REQUESTS_WITHOUT_START = 100

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


# Finding, Reassembled and DomePutsSeen are plain classes, not dataclasses: only `profile
# check` imports this module, and a dataclass compiles its generated methods as its module
# is imported (~0.5 ms CPU each, issue 30). Compared and shown by their fields (plain.py);
# a Finding is set once and hashed, as the frozen dataclass it was.

class Finding(Frozen):
    """One reason a profile does not fit; `role` is set when a required role is missing."""

    __slots__ = FIELDS = ("message", "role")

    def __init__(self, message: str, role: str | None = None):
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "role", role)


def _too_many(count: int, base: int) -> bool:
    return count > LIMIT_COUNT and count > LIMIT_SHARE * base


def _pct(n: int, base: int) -> str:
    return f"{100.0 * n / base:.1f}%" if base else "-"


class CutWatch:
    """What a file that begins or ends mid-way explains, seen from the daemon's lines and
    the records reassembled from them.

    A file cut at its start shows, on each thread, at most one `returns` before any call
    opens, and orphans (requests first seen after their put/get) that show up early: each
    request open at the cut logs its next token line within the longest gap between two
    token lines of one request (a wait for a slow thread, a status poll's back-off). That
    gap is known from requests seen whole, from put/get to their end, once there are
    WHOLE_TO_JUDGE of them and the file spans GAPS_TO_JUDGE such gaps; in a shorter file,
    orphans cannot be told from the cut. A file cut at its end leaves calls open (they end
    without their `returns` at the end of input, which the caller counts apart). Stray
    returns and orphans beyond these are the profile's doing: a profile that misses
    put/get lines makes orphans all through the file.
    """

    def __init__(self):
        self._threads: set = set()  # threads that logged a call open or a returns
        self.returns_at_thread_start = 0
        self._first: int | None = None  # event time of the daemon's first line
        self._last: int | None = None  # latest event time
        # The token lines' gaps: the extension's twin where built, whose tokens a quiet
        # LineWatch notes without Python (native/src/line_watch.rs).
        self.gaps = (compiled("TokenGaps") or TokenGaps)()
        # Event time each orphan was first seen; -1: before time moved past the first line.
        self._orphans_seen = array("q")

    def on_role(self, thread, role: str) -> None:
        if role in OPENING or role == "returns":
            if thread not in self._threads:
                self._threads.add(thread)
                if role == "returns":
                    self.returns_at_thread_start += 1

    def on_time(self, ts: int | None) -> None:
        if ts is None:
            return
        if self._first is None:
            self._first = ts
        self._last = ts

    def on_orphans(self, change: int, ts: int | None) -> None:
        """The reassembler's orphan count moved by `change` at event time `ts` (down when
        a put/get shows up after its request's later lines)."""
        if change > 0:
            self._orphans_seen.extend([-1 if ts is None else ts] * change)
        else:
            del self._orphans_seen[len(self._orphans_seen) + change:]

    def on_token(self, token: str | None, ts: int | None) -> None:
        self.gaps.note(token, ts)

    def on_record(self, record: dict) -> None:
        """A record emitted: a request's is on_request_end's (the extension's RequestEnds
        reads the same of its records without making them dicts)."""
        if record.get("kind") == "request":
            self.on_request_end(record.get("token"), record.get("started") is not None
                                and record.get("end_reason") == BY_LINE)

    def on_request_end(self, token: str | None, whole: bool) -> None:
        """A request is over (`whole`: seen from its put/get to an end by a line)."""
        self.gaps.end(token, whole)

    @property
    def whole(self) -> int:
        """Requests seen whole."""
        return self.gaps.whole

    @property
    def started(self) -> bool:
        """Whether the daemon's first event time is known."""
        return self._first is not None

    @property
    def orphans_judged(self) -> bool:
        """Whether the file spans enough time to tell orphans from the cut."""
        return self.whole >= WHOLE_TO_JUDGE and (
            self.span_ms >= GAPS_TO_JUDGE * max(self.gaps.max_gap, 1))

    @property
    def span_ms(self) -> int:
        return 0 if self._first is None else self._last - self._first

    def orphans_explained(self) -> int:
        """How many orphans a file beginning mid-way explains: all of them in a file too
        short to judge, else those first seen within twice the longest gap of the start."""
        if not self.orphans_judged:
            return len(self._orphans_seen)
        horizon = self._first + 2 * self.gaps.max_gap
        return sum(1 for ts in self._orphans_seen if ts <= horizon)


class TokenGaps:
    """The gaps between a request's token lines (CutWatch's): per open request's token,
    its latest token line's time and its longest gap; of the requests seen whole, how many
    and their longest gap. The reference of the extension's TokenGaps
    (native/src/line_watch.rs)."""

    def __init__(self):
        self._open: dict[str | None, list[int]] = {}  # token -> [latest token line, its longest gap]
        self.whole = 0  # requests seen whole
        self.max_gap = 0  # their longest gap

    def note(self, token: str | None, ts: int | None) -> None:
        """A token line of `token` at event time `ts` (None: no time yet, not counted)."""
        if ts is None:
            return
        state = self._open.get(token)
        if state is None:
            self._open[token] = [ts, 0]
        else:
            gap = ts - state[0]
            if gap > state[1]:  # max() is a call: one a token line of a DPM log
                state[1] = gap
            state[0] = ts

    def end(self, token: str | None, whole: bool) -> None:
        """The request of `token` is over (`whole`: seen from its put/get to an end by a
        line); one seen whole tells its longest gap."""
        state = self._open.pop(token, None)
        if state is not None and whole:
            self.whole += 1
            self.max_gap = max(self.max_gap, state[1])


class Reassembled(Value):
    """What the reassembly made of a daemon's lines (ReassemblyStats), with what a cut
    file explains (CutWatch)."""

    __slots__ = FIELDS = ("requests", "orphans", "orphans_at_start", "orphans_judged",
                          "stray_returns", "returns_at_thread_start", "noreturn_calls",
                          "noreturn_at_end")

    def __init__(self, requests: int = 0, orphans: int = 0, orphans_at_start: int = 0,
                 orphans_judged: bool = True, stray_returns: int = 0,
                 returns_at_thread_start: int = 0, noreturn_calls: int = 0,
                 noreturn_at_end: int = 0):
        self.requests, self.orphans = requests, orphans
        self.orphans_at_start = orphans_at_start  # explained by the file beginning mid-way
        self.orphans_judged = orphans_judged  # the file spans enough time to tell them from the cut
        self.stray_returns, self.returns_at_thread_start = stray_returns, returns_at_thread_start
        self.noreturn_calls = noreturn_calls  # before the end of input
        self.noreturn_at_end = noreturn_at_end  # cut by the end of input


def judge(required, lines: int, roles: dict, seen: Reassembled) -> list[Finding]:
    """Findings for a profile over `lines` lines of its daemon.

    required: the profile's required roles; roles: role -> lines of the daemon; seen: the
    reassembly of the same lines.
    """
    findings = []
    if lines >= MIN_LINES_TO_JUDGE:
        for role in required:
            if not roles.get(role):
                what = ROLE_MEANING.get(role, role)
                findings.append(Finding(f"role `{role}` ({what}): no line", role))
    returns = roles.get("returns", 0)
    opens = sum(roles.get(r, 0) for r in OPENING)
    stray = max(0, seen.stray_returns - seen.returns_at_thread_start)
    if _too_many(stray, returns):
        findings.append(Finding(
            f"stray returns: {stray} of {returns} `returns` lines ({_pct(stray, returns)}) "
            f"close no open call ({opens} call opens), not counting a thread's first; "
            f"the lines opening these calls are not recognised"))
    noreturn = seen.noreturn_calls
    if _too_many(noreturn, opens):
        findings.append(Finding(
            f"calls without returns: {noreturn} of {opens} call opens ({_pct(noreturn, opens)}) "
            f"never saw their `returns` before the next call; the returns lines are not "
            f"recognised"))
    orphans = seen.orphans - seen.orphans_at_start
    if seen.requests >= REQUESTS_WITHOUT_START and seen.orphans == seen.requests:
        findings.append(Finding(
            f"orphans: none of {seen.requests} requests was seen from its put/get; the "
            f"put/get call or token lines are not recognised"))
    elif _too_many(orphans, seen.requests):
        findings.append(Finding(
            f"orphans: {orphans} of {seen.requests} requests ({_pct(orphans, seen.requests)}) "
            f"were first seen after their put/get, past the file's start; the put/get call "
            f"or token lines are not recognised"))
    return findings


class DomePutsSeen(Counters):
    """What the DOME reassembly (parsers/dome_reassembly.py) made of a log's puts and
    putdones, with what a file beginning mid-way explains. Counted up from 0.

    entered: put records (a head's `dome_put : Entering` lines); puts: ... with their
    `Selected fs` line (joinable); joined: ... joined to a putdone; unjoined_at_timeout:
    ... with no putdone within the timeout; unjoined_at_end: ... still waiting at the end
    of input (the cut explains them); putdone_lines: putdone_disk and putdone_head lines;
    orphans_at_start: orphans within the longest put-to-putdone of the start."""

    __slots__ = FIELDS = ("entered", "puts", "joined", "unjoined_at_timeout",
                          "unjoined_at_end", "putdone_lines", "orphan_putdones",
                          "orphans_at_start")


def judge_dome_puts(seen: DomePutsSeen) -> list[Finding]:
    """Findings on the join of a DOME log's puts and putdones (docs/dome.md, "The join").
    A profile that does not recognise the head's `Selected fs` lines leaves every put
    unjoinable; one that reads them, or the PFNs, wrongly makes orphan putdones all
    through the file; one that misses the putdone lines joins no put. Orphans are judged
    only in a log with joinable puts: a disk node's log alone has its putdones and none
    of the head's puts. A put never joined is no finding by itself: a client that gives
    up leaves one (the DOME form of an abandoned write)."""
    findings = []
    if seen.entered >= REQUESTS_WITHOUT_START and seen.puts == 0:
        findings.append(Finding(
            f"puts never joinable: none of {seen.entered} puts has its `Selected fs` line; "
            f"the put_selected lines are not recognised", "put_selected"))
    if seen.puts >= REQUESTS_WITHOUT_START and seen.joined == 0 and seen.putdone_lines == 0:
        findings.append(Finding(
            f"puts never joined: none of {seen.puts} puts met a putdone line; the "
            f"putdone_disk/putdone_head lines are not recognised", "putdone_head"))
    orphans = seen.orphan_putdones - seen.orphans_at_start
    if seen.puts and _too_many(orphans, seen.putdone_lines):
        findings.append(Finding(
            f"orphan putdones: {orphans} of {seen.putdone_lines} putdone lines "
            f"({_pct(orphans, seen.putdone_lines)}) joined no put, past the file's start; the "
            f"put_selected (`Selected fs`) lines or the putdone PFNs are not read right, or "
            f"whole-second stamps are read in another zone than the node's (the PFN's EPOCH "
            f"is UTC: check in the node's zone, TZ=Area/City)"))
    return findings
