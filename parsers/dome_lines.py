"""One DOME syslog line -> a DomeEvent, with the line's result (as parsers/lines.py names
them): parsed, unmatched (a dmlite message no role pattern knows), malformed (no syslog
envelope, a bad date, binary data, too long) or foreign (another program's line in a
mixed syslog file, or a line of a dmlite program that is not a dmlite message).

The event time is the syslog envelope's stamp: the traditional form has no year and whole
seconds; the RFC 3339 form has both. `whole_seconds` says which, because a duration
between two whole-second stamps is only good to a second. A traditional stamp's year is
the one nearest to the line's receive time where the stream has one (`line_ref`: Kafka's
`received`), else the stream's EventClock's (`--year`, a rotated name, the mtime, rolled
at 12 -> 01): parsers/clock.py's rule, as for the DPM daemons' stamps (`traditional_ms`,
which the compiled parser asks too). The receive time only dates the line; the instant is
the stamp's.
"""

from __future__ import annotations

from collections import namedtuple

from .clock import ClockError, EventClock, nearest_year, rfc3339_to_ms
from .dome_profiles import SUPPRESSED, DomeProfile
from .lines import FOREIGN, MALFORMED, MAX_DIGITS, PARSED, TOO_LONG, UNMATCHED_RESULT, too_long
from .profiles import UNMATCHED

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
# The daemon DOME lines are counted under (PipelineStats.lines: host, daemon, result).
DAEMON = "dome"
# Fields read as integers (HTTP code, byte counts, counts, seconds).
INT_FIELDS = frozenset(("code", "size", "matchings", "timeout", "phys", "free", "count"))
NOT_A_NUMBER = "a number field that is not a number"


def ascii_int(text: str) -> int | None:
    """A number field's value: ASCII digits, white space about them allowed (the compiled
    scanner's rule: not int()'s, which takes a sign, underscores and other scripts' digits)."""
    t = text.strip()
    return int(t) if t.isascii() and t.isdigit() else None


# A namedtuple, as typing.NamedTuple would make it, without importing typing (~11 M
# instructions of replay's start-up, issue 30).
DomeEvent = namedtuple("DomeEvent", (
    "ts",              # int: epoch ms of the stamp
    "host",            # str
    "program",         # str: the syslog tag: dome, httpd, xrootd, ...
    "pid",             # int
    "tid",             # int: the worker thread (pthread_self); -1 in a generation without it
    "level",           # int: dmlite level 0-5; -1 on an Err (`!!!`) line
    "error",           # bool
    "role",            # str
    "fields",          # dict: the role pattern's groups; INT_FIELDS as int
    "whole_seconds",   # bool: the stamp has no fraction of a second
))


def _line_year(line_ref: tuple[int, int] | None, month: int) -> int | None:
    """The year nearest to the receive time's (year, month) `line_ref` when the line has
    one; None: the clock's."""
    return None if line_ref is None else nearest_year(line_ref[0], line_ref[1], month)


def traditional_ms(clock: EventClock, line_ref: tuple[int, int] | None, month: int, day: int,
                   hour: int, minute: int, second: int) -> int:
    """Epoch ms of a traditional stamp (no year, whole seconds), dated by _line_year."""
    return clock.to_ms(month, day, hour, minute, second, 0, _line_year(line_ref, month))


def traditional_minute_ms(clock: EventClock, line_ref: tuple[int, int] | None, month: int, day: int,
                          hour: int, minute: int) -> int | None:
    """traditional_ms of the minute's second 0 when each of its seconds is that plus its
    seconds (EventClock.minute_ms), else None: the compiled parser's once-a-minute ask."""
    return clock.minute_ms(month, day, hour, minute, _line_year(line_ref, month))


class DomeLineParser:
    """Parses the lines of one stream (one file, or one host's lines on Kafka)."""

    def __init__(self, profile: DomeProfile, clock: EventClock):
        self.profile = profile
        self.clock = clock
        # (year, month) of the time the next lines were received (Kafka's `received`),
        # if known: it dates a traditional stamp (LineParser.line_ref, the same rule).
        self.line_ref: tuple[int, int] | None = None
        self.tags = frozenset(profile.tags)
        self.journald_tags = frozenset(profile.journald_tags) if profile.suppressed_regex else frozenset()
        self.result = PARSED
        self.reason = ""  # why the last line was malformed or foreign
        # The offsets RFC 3339 stamps state, as LineParser.stated_offsets (the summary's
        # time labels): not gathered for DOME yet, so labels use the profile's zone.
        self.stated_offsets: list[tuple[int, int]] = []
        self._forms = tuple(profile.forms.values())

    def parse(self, line: str) -> DomeEvent | None:
        """The event of a parsed line; None (with .result/.reason set) otherwise."""
        line = line.rstrip("\r\n")
        if too_long(line):
            return self._fail(MALFORMED, TOO_LONG)
        if "\x00" in line:
            return self._fail(MALFORMED, "binary data (NUL byte)")
        for form in self._forms:
            m = form.regex.match(line)
            if m is not None:
                break
        else:
            return self._not_dmlite(line)
        g = form.groups
        tag = m.group(g["tag"])
        if tag not in self.tags:
            return self._fail(FOREIGN, f"program {tag!r}")
        role, fields = form.roles[m.lastindex]
        if role == UNMATCHED:
            return self._fail(UNMATCHED_RESULT, "no role")
        pid, tid = m.group(g["pid"]), m.group(g["tid"]) if "tid" in g else None
        if pid is None:  # dmlite opens syslog with LOG_PID: its calls are keyed by it
            return self._fail(MALFORMED, "a dmlite line without the program's pid")
        values = {name: m.group(i) for name, i in fields.items()}
        if max(len(pid), len(tid or ""), *(len(values[f] or "") for f in INT_FIELDS & values.keys())) > MAX_DIGITS:
            return self._fail(MALFORMED, f"a number longer than {MAX_DIGITS} digits")
        # A site's profile may capture more than digits where a number belongs: such a
        # line is malformed (counted), as the compiled scanner has it.
        for name in INT_FIELDS & values.keys():
            if values[name] is not None:
                number = ascii_int(values[name])
                if number is None:
                    return self._fail(MALFORMED, NOT_A_NUMBER)
                values[name] = number
        level = m.group(g["level"])
        pid, tid, level = ascii_int(pid), -1 if tid is None else ascii_int(tid), -1 if level is None else ascii_int(level)
        if pid is None or tid is None or level is None:
            return self._fail(MALFORMED, NOT_A_NUMBER)
        try:
            ts, whole = self._time(form.name, m, g)
        except (ClockError, ValueError) as exc:
            return self._fail(MALFORMED, str(exc))
        self.result = PARSED
        return DomeEvent(ts, m.group(g["host"]), tag, pid, tid, level, m.group(g["error"]) is not None,
                         role, values, whole)

    def _time(self, form: str, m, g) -> tuple[int, bool]:
        if form == "rfc3339":
            rtime = m.group(g["rtime"])
            return rfc3339_to_ms(rtime), len(rtime) < 20 or rtime[19] != "."
        ms = traditional_ms(self.clock, self.line_ref, MONTHS[m.group(g["mon"])],
                            int(m.group(g["day"])), int(m.group(g["hour"])),
                            int(m.group(g["minute"])), int(m.group(g["second"])))
        return ms, True

    def _not_dmlite(self, line: str) -> DomeEvent | None:
        """No full match: journald's notice of lines it dropped, another program's line, a
        dmlite program's other line, or garbage."""
        for form in self._forms:
            prefix = form.prefix.match(line)
            if prefix is not None:
                tag = prefix.group("tag")
                if tag in self.journald_tags:
                    return self._suppressed(form, prefix, line)
                why = "not a dmlite message" if tag in self.tags else f"program {tag!r}"
                return self._fail(FOREIGN, why)
        return self._fail(MALFORMED, "no syslog envelope")

    def _suppressed(self, form, prefix, line: str) -> DomeEvent | None:
        """journald's `Suppressed N messages from UNIT`: for a unit of the profile's
        programs, an event of role SUPPRESSED (program: the unit's, pid -1, fields
        {"count": N}); any other journald line is foreign."""
        m = self.profile.suppressed_regex.match(line, prefix.end())
        if m is None or m.group("program") not in self.tags:
            return self._fail(FOREIGN, f"program {prefix.group('tag')!r}")
        lines = m.group("lines")
        if len(lines) > MAX_DIGITS:
            return self._fail(MALFORMED, f"a number longer than {MAX_DIGITS} digits")
        try:
            ts, whole = self._time(form.name, prefix, form.groups)
        except (ClockError, ValueError) as exc:
            return self._fail(MALFORMED, str(exc))
        self.result = PARSED
        return DomeEvent(ts, prefix.group("host"), m.group("program"), -1, -1, -1, False,
                         SUPPRESSED, {"count": int(lines)}, whole)

    def _fail(self, result: str, reason: str) -> None:
        self.result = result
        self.reason = reason
        return None
