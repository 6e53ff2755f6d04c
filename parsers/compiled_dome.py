"""The compiled DOME engine (native/src/dome_*.rs) behind DomeReassembler's and
DomeLineParser's interfaces.

The rules are parsers/dome_reassembly.py's (and dome_calls.py's, dome_puts.py's), line for
line; this module shapes what the extension returns into the same Python types (DomeStats,
records as dicts, snapshot() as plain values), so that callers cannot tell the engines
apart. tests/parsers/test_dome_engines_agree.py feeds both the same lines and requires the
same records in the same order, the same counters and interchangeable snapshots.

    parser = CompiledDomeLineParser(profile, clock)      # one per stream (node, file)
    engine = CompiledDomeReassembler(timeout_ms=...)
    for ev in merge_by_time(per_node_events):             # events of either parser
        records += engine.feed(ev)
    records += engine.feed_lines(parser, lines)           # or one stream, no Python per line
    chunk = engine.feed_chunk(parser, lines, start, limit, budget, latest)   # Source's way
"""

from __future__ import annotations

from collections import namedtuple

from ._native import DomeCore, DomeScanner, DomeSummaryTally, dome_lines
from .clock import EventClock, rfc3339_to_ms
from .dome_checksums import ChecksumStats, ChecksumWaits
from .dome_lines import DomeEvent, traditional_minute_ms, traditional_ms
from .dome_profiles import FLAGS, FORMS, ROLE_GROUPS, DomeForm, DomeProfile
from .dome_reassembly import DomeStats
from .lines import MAX_DIGITS, MAX_LINE_BYTES
from .profiles import UNMATCHED
from .regex_lead import group_index, lead, lead_sets

# Where a compiled DOME feed of a stream's lines stopped, and what it read. A tuple: made
# from the extension's with no Python frame of its own (once per turn of a DOME site's
# replay, issue 30). A namedtuple, as typing.NamedTuple would make it, without importing
# typing (~11 M instructions of start-up: of `profile check`, whose DOME tallies load
# this module on any log, and of a DOME replay).
DomeChunk = namedtuple("DomeChunk", (
    "next",        # int: the index of the next line to feed
    "unmatched",   # int: lines of no role
    "foreign",     # int: lines of other programs
    "hosts",       # list: (host, lines parsed, latest stamp) per host, in the order they came
    "latest",      # int: the latest stamp read (from the stream's before)
    "why",         # int: why it stopped: the codes of engines.py
    "records",     # list: in the order the per-line feed gives them
))


_as_chunk = tuple.__new__       # DomeChunk of the extension's tuple, as it is
_feed_chunk = DomeCore.feed_chunk


def pcre2_pattern(pattern: str) -> str:
    """A DOME form's Python pattern for PCRE2: anchored at the start, as re.match is, and
    Python's end of text `\\Z` as PCRE2's `\\z` (PCRE2's `\\Z` also matches before a
    final newline)."""
    if pattern.endswith(r"\Z"):
        pattern = pattern[:-2] + r"\z"
    return r"\A(?:" + pattern + ")"


def scan_plan(form: DomeForm) -> tuple[str, list]:
    """How the scanner matches a form: (the pattern it matches first, [(role or None,
    pattern or None, wrapper group, lead, [(field index, group)])] in the alternation's
    order).

    The form's regex is the envelope, then one alternation of every role's pattern and a
    catch-all: in PCRE2 each match of it set up and copied out all ~80 groups (some 1,500
    instructions a line, issue 30). So the scanner matches the envelope alone, then each
    role's pattern alone where the message starts with the pattern's lead (literal text it
    requires, regex_lead.py), in order; none matching is the catch-all's `unmatched`. The
    same match: the catch-all always completes the envelope's first match, and a role
    pattern alone (`\\G`, at the envelope's end) is tried as the alternation tries it.
    A role pattern referring to a group (whose number or whose group would differ alone)
    keeps the one regex: its pattern None, its wrapper group in the regex."""
    if form.plan is None:
        form.plan = _plan(form)
    return form.plan


def _plan(form: DomeForm) -> tuple[str, list]:
    if not form.alone:
        return form.pattern, [
            (None if role == UNMATCHED else role, None, group, b"",
             [(ROLE_GROUPS.index(field), g) for field, g in fields.items()])
            for group, (role, fields) in form.roles.items()
        ]
    alternatives = []
    for role, part in form.parts:
        index = group_index(part, FLAGS)
        fields = [(ROLE_GROUPS.index(name.split("_", 1)[1]), g) for name, g in index.items() if "_" in name]
        alternatives.append((role, "\\G(?:" + part + ")\\s*\\z", 0, lead(part, FLAGS).encode(), fields))
    return form.head, alternatives


def envelope_lead(form: DomeForm) -> list[bytes]:
    """The bytes a line may have at each of its first places for the form's envelope to
    match it (regex_lead.lead_sets, up to the first place that may be other than ASCII):
    the scanner passes over a line that lacks them without running the envelope's regex
    (a DPM line's digits then `/` for the RFC 3339 `\\d{4}-`: two regex runs a line for
    each DOME profile `profile check` shows a DPM log, issue 30)."""
    out = []
    for chars in lead_sets(form.prefix.pattern, form.prefix.flags):
        if max(map(ord, chars)) > 127:
            break
        out.append(bytes(sorted(map(ord, chars))))
    return out


class CompiledDomeLineParser:
    """DomeLineParser's twin: the same `parse(line)` (an event or None), `result` and
    `reason`; its events are the compiled engine's own (DomeLine: `ts`, and `event()` the
    Python DomeEvent), fed to either engine."""

    def __init__(self, profile: DomeProfile, clock: EventClock):
        self.profile = profile
        self.clock = clock
        forms = []
        for name in FORMS:
            form = profile.forms[name]
            head, alternatives = scan_plan(form)
            forms.append((name, pcre2_pattern(head), pcre2_pattern(form.prefix.pattern),
                          form.prefix.groupindex["tag"], dict(form.groups), alternatives,
                          envelope_lead(form)))
        # As DomeLineParser's: the summary's time labels read it (not gathered for DOME yet).
        self.stated_offsets: list[tuple[int, int]] = []
        self._line_ref: tuple[int, int] | None = None
        journald = None   # journald's `Suppressed` notice, where the profile reads it
        if profile.suppressed_regex is not None:
            regex = profile.suppressed_regex
            journald = (list(profile.journald_tags), pcre2_pattern(regex.pattern),
                        regex.groupindex["lines"], regex.groupindex["program"])
        # The scanner asks a traditional stamp's minute of _minute_ms, once per minute
        # (each second of it that plus its seconds), or where the clock says no (an
        # offset change, a repeated hour, a bad date) each second of _traditional_ms:
        # DomeLineParser's rule (the receive time's year, else the clock's).
        self.scanner = DomeScanner(forms, list(profile.tags), journald, self._traditional_ms,
                                   self._minute_ms, rfc3339_to_ms, DomeEvent, MAX_LINE_BYTES,
                                   MAX_DIGITS)

    @property
    def line_ref(self) -> tuple[int, int] | None:
        """As DomeLineParser.line_ref: (year, month) of the next lines' receive time."""
        return self._line_ref

    @line_ref.setter
    def line_ref(self, ref: tuple[int, int] | None) -> None:
        if ref != self._line_ref:  # the second the scanner holds may date otherwise now
            self._line_ref = ref
            self.scanner.forget()

    def _traditional_ms(self, month: int, day: int, hour: int, minute: int, second: int, ms: int) -> int:
        return traditional_ms(self.clock, self._line_ref, month, day, hour, minute, second) + ms

    def _minute_ms(self, month: int, day: int, hour: int, minute: int) -> int | None:
        return traditional_minute_ms(self.clock, self._line_ref, month, day, hour, minute)

    def parse(self, line: str):
        return self.scanner.parse(line)

    def parse_block(self, lines, n: int) -> tuple[int, int, list]:
        """parse() of the first n of `lines` (a block of bytes lines), in the extension:
        (lines of other programs, lines without an envelope: only counted; the others, in
        order, as (index, kind, event or None): kind 0 parsed, 1 unmatched, 2 not UTF-8,
        not read: parse() it decoded)."""
        return dome_lines(self.scanner, lines, n)

    @property
    def result(self) -> str:
        return self.scanner.result

    @property
    def reason(self) -> str:
        return self.scanner.reason

    def counts(self) -> dict:
        """Lines by result so far (parsed, unmatched, foreign, malformed)."""
        return self.scanner.counts()


class CompiledDomeReassembler(DomeCore):
    """DomeReassembler's twin: the same constructor, feed / advance / finish, stats,
    snapshot() and from_snapshot(); and feed_chunk (Source's) and feed_lines(parser,
    lines), one stream's lines parsed and reassembled without Python per line."""

    def feed_lines(self, parser: CompiledDomeLineParser, lines: list[str]) -> list[dict]:
        """The records of one stream's lines, each parsed by `parser` (its counts) and fed."""
        from .engines import SLOW  # here: engines imports this module
        records: list[dict] = []
        i, n = 0, len(lines)
        while i < n:
            chunk = self.feed_chunk(parser, lines, i, None, n, -1)
            records += chunk.records
            i = chunk.next
            if chunk.why == SLOW:   # not UTF-8 text: the parser's own reading of it
                ev = parser.parse(lines[i])
                if ev is not None:
                    records += self.feed(ev)
                i += 1
        return records

    def feed_chunk(self, parser: CompiledDomeLineParser, lines, start: int, limit: int | None,
                   budget: int, latest: int) -> "DomeChunk":
        """lines[start:] (a list of bytes or str, or a LineBlock) parsed by `parser` and
        fed with no Python per line, until a stop (DomeChunk.why: the codes of
        engines.py): a line left to the caller, a malformed line (the one before `next`:
        parser.result and reason say why), the latest stamp read (from `latest`, the
        stream's before) past `limit`, or `budget` lines taken."""
        return _as_chunk(DomeChunk, _feed_chunk(self, parser.scanner, lines, start, limit, budget, latest))

    def receive(self, on_record) -> None:
        """Hand the records to `on_record` from now on, instead of returning them, when it
        is the extension's DomeSummaryTally: it takes the engine's own values, no dict
        made (a replay that only summarises runs no Python per DOME record). Any other
        callable is left to the caller, with the lists."""
        if isinstance(on_record, DomeSummaryTally):
            self.receiver = on_record

    @property
    def stats(self) -> DomeStats:
        """The counters now (a copy: nothing but the engine writes them)."""
        return DomeStats(**self.stats_dict())

    @classmethod
    def from_snapshot(cls, state: dict, **settings) -> "CompiledDomeReassembler":
        r = cls(**settings)
        r.restore(state)
        return r

    def paired_checksums(self, waits: ChecksumWaits) -> "CompiledChecksumWaits":
        """The checksum stage `waits` (its settings and state) run from now on inside the
        extension (native/src/dome_checksums.rs): feed, feed_chunk, advance and finish
        then give each record followed by the waits it ends, as WithChecksumWaits does over
        the Python stage. Its view for WithChecksumWaits."""
        self.pair_checksums(waits.timeout_ms, waits.poll_interval_ms, waits.max_open,
                            waits.allowance_ms, waits.snapshot())
        return CompiledChecksumWaits(self)


class CompiledChecksumWaits:
    """The checksum stage inside a CompiledDomeReassembler, as WithChecksumWaits sees a
    ChecksumWaits: its counters and snapshot (ChecksumWaits's shape: either restores the
    other's); pair, advance and finish have nothing to add, as the reassembler's own
    records already carry the waits."""

    def __init__(self, core: CompiledDomeReassembler):
        self.core = core

    @property
    def stats(self) -> ChecksumStats:
        return ChecksumStats(**self.core.checksum_stats_dict())

    def snapshot(self) -> dict:
        return self.core.checksum_snapshot()

    def pair(self, records: list[dict]) -> list[dict]:
        return records

    def advance(self, now_ms: int) -> list[dict]:
        return []

    def finish(self) -> list[dict]:
        return []
