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
"""

from __future__ import annotations

from ._native import DomeCore, DomeScanner
from .clock import EventClock, rfc3339_to_ms
from .dome_lines import DomeEvent
from .dome_profiles import FIELDS, FORMS, DomeProfile
from .dome_reassembly import DomeStats
from .lines import MAX_DIGITS, MAX_LINE_BYTES
from .profiles import UNMATCHED


def pcre2_pattern(pattern: str) -> str:
    """A DOME form's Python pattern for PCRE2: anchored at the start, as re.match is, and
    Python's end of text `\\Z` as PCRE2's `\\z` (PCRE2's `\\Z` also matches before a
    final newline)."""
    if pattern.endswith(r"\Z"):
        pattern = pattern[:-2] + r"\z"
    return r"\A(?:" + pattern + ")"


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
            alternatives = [
                (group, None if role == UNMATCHED else role,
                 [(FIELDS.index(field), g) for field, g in fields.items()])
                for group, (role, fields) in form.roles.items()
            ]
            forms.append((name, pcre2_pattern(form.regex.pattern), pcre2_pattern(form.prefix.pattern),
                          form.prefix.groupindex["tag"], dict(form.groups), alternatives))
        # As DomeLineParser's: the summary's time labels read it (not gathered for DOME yet).
        self.stated_offsets: list[tuple[int, int]] = []
        self.scanner = DomeScanner(forms, list(profile.tags), clock.to_ms, rfc3339_to_ms, DomeEvent,
                                   MAX_LINE_BYTES, MAX_DIGITS)

    def parse(self, line: str):
        return self.scanner.parse(line)

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
    snapshot() and from_snapshot(); and feed_lines(parser, lines), one stream's lines
    parsed and reassembled without Python per line."""

    def feed_lines(self, parser: CompiledDomeLineParser, lines: list[str]) -> list[dict]:
        return super().feed_lines(parser.scanner, lines)

    @property
    def stats(self) -> DomeStats:
        """The counters now (a copy: nothing but the engine writes them)."""
        return DomeStats(**self.stats_dict())

    @classmethod
    def from_snapshot(cls, state: dict, **settings) -> "CompiledDomeReassembler":
        r = cls(**settings)
        r.restore(state)
        return r
