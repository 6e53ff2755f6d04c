"""One raw line -> an Event, with the line's result: parsed, unmatched or malformed.

- malformed: the envelope does not match (garbage, binary, a truncated line, a bad date,
  a line longer than MAX_LINE_CHARS);
- unmatched: the envelope matches but no role pattern of the profile does;
- parsed: a role matched; the Event carries the fields the reassembler needs.
"""

from __future__ import annotations

from .clock import ClockError, EventClock, nearest_year
from .events import Event
from .profiles import UNMATCHED, Profile

PARSED, UNMATCHED_RESULT, MALFORMED = "parsed", "unmatched", "malformed"
# Real lines are well under 4 KiB (a DN, a SURL); a longer one is garbage, and matching
# patterns with `.*` against megabytes would only burn time.
MAX_LINE_CHARS = 65536


def decode(raw: bytes) -> tuple[str, bool]:
    """Bytes -> text, and whether the bytes were valid UTF-8 (a Latin-1 DN still parses)."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), False


class LineParser:
    """Parses the lines of one stream (one file, or one host's path on Kafka)."""

    def __init__(self, profile: Profile, clock: EventClock, host: str):
        self.profile = profile
        self.clock = clock
        self.host = host
        self.daemon = profile.daemon
        self.result = PARSED
        self.reason = ""  # why the last line was malformed
        # (year, month) of the time the line was received (rsyslog/Kafka), if known:
        # it dates the line better than the stream's own year rollover.
        self.line_ref: tuple[int, int] | None = None
        # Hoisted lookups: this is the hot path.
        self._native = profile.native
        self._rsyslog = profile.rsyslog

    def parse(self, line: str) -> Event | None:
        """The event of a parsed line; None (with .result/.reason set) otherwise."""
        if len(line) > MAX_LINE_CHARS:
            return self._malformed(f"line longer than {MAX_LINE_CHARS} characters")
        if "\x00" in line:
            return self._malformed("binary data (NUL byte)")
        form = self._native
        m = form.regex.match(line)
        host = self.host
        year = None
        if m is None:
            form = self._rsyslog
            m = form.regex.match(line)
            if m is None:
                return self._malformed("no envelope")
        g = m.group
        env = form.envelope
        if form is self._rsyslog:
            host = g(env["host"])
            rtime = g(env["rtime"])
            year = nearest_year(int(rtime[:4]), int(rtime[5:7]), int(g(env["month"])))
        elif self.line_ref is not None:
            year = nearest_year(self.line_ref[0], self.line_ref[1], int(g(env["month"])))
        frac = g(env["frac"])
        ms = int((frac + "00")[:3]) if frac else 0
        try:
            ts = self.clock.to_ms(int(g(env["month"])), int(g(env["day"])), int(g(env["hour"])),
                                  int(g(env["minute"])), int(g(env["second"])), ms, year)
        except ClockError as exc:
            return self._malformed(str(exc))
        alt = form.alternatives[m.lastindex]
        role = alt.role
        if role == UNMATCHED:
            self.result = UNMATCHED_RESULT
            return None
        self.result = PARSED
        tid = g(env["tid"])
        fields = alt.fields
        values = {name: g(idx) for name, idx in fields.items()} if fields else {}
        nfiles = values.get("nfiles")
        rc = values.get("rc")
        return Event(
            ts, host, self.daemon, int(g(env["pid"])), int(tid) if tid is not None else -1,
            g(env["func"]), role,
            values.get("op"), values.get("client"), values.get("token"),
            int(nfiles) if nfiles is not None else None,
            values.get("state"),
            int(rc) if rc is not None else None,
        )

    def _malformed(self, reason: str) -> None:
        self.result = MALFORMED
        self.reason = reason
        return None
