"""One raw line -> an Event, with the line's result: parsed, unmatched or malformed.

- malformed: the envelope does not match (garbage, binary, a truncated line, a bad date,
  a line longer than MAX_LINE_BYTES);
- unmatched: the envelope matches but no role pattern of the profile does;
- parsed: a role matched; the Event carries the fields the reassembler needs;
- routed: an rsyslog line whose program tag names another profile's daemon (a file that
  mixes daemons): the caller parses it with that profile (`routed_tag` says which);
- foreign: an rsyslog line of a program no profile knows (sshd, kernel, ...).
"""

from __future__ import annotations

from . import fastpath
from .clock import (ClockError, EventClock, nearest_year, offset_local_ms, rfc3339_offset_minutes,
                    rfc3339_to_ms)
from .events import Event
from .profiles import UNMATCHED, Profile

_new_event = tuple.__new__  # Event(...) without the keyword-handling __new__

PARSED, UNMATCHED_RESULT, MALFORMED = "parsed", "unmatched", "malformed"
ROUTED, FOREIGN = "routed", "foreign"
# Real lines are well under 4 KiB (a DN, a SURL); a longer one is garbage, and matching
# patterns with `.*` against megabytes would only burn time. The one bound of a line,
# public: readers may stop reading a line past it (it is malformed whatever follows).
MAX_LINE_BYTES = 65536
TOO_LONG = f"line longer than {MAX_LINE_BYTES} bytes"
# A pid, thread, file count or return code has a few digits; one of more than 18 would not
# fit the compiled engine's 64-bit integers, and is garbage in any case.
MAX_DIGITS = 18
# A daemon writes a line before rsyslog stamps it; a stamp read this far after its own
# prefix's time is read in the wrong offset (the same clock, a whole hour apart).
AHEAD_OF_RECEIPT_MS = 60_000
# Changes of stated offset a parser remembers for the labels (two a year, per stream).
MAX_OFFSET_CHANGES = 256


class LineParser:
    """Parses the lines of one stream (one file, or one host's path on Kafka)."""

    def __init__(self, profile: Profile, clock: EventClock, host: str,
                 other_tags: frozenset = frozenset()):
        self.profile = profile
        # Program tags of the other profiles' daemons: their lines are routed to them.
        self.other_tags = other_tags - set(profile.tags)
        self.routed_tag: str | None = None
        self.clock = clock
        self.host = host
        self.daemon = profile.daemon
        self.result = PARSED
        self.reason = ""  # why the last line was malformed
        self._line_ref: tuple[int, int] | None = None
        # (epoch ms from which, offset minutes) each time the rsyslog prefixes' offset the
        # stamps are read in changes: what the summary labels times in (docs/report.md).
        self.stated_offsets: list[tuple[int, int]] = []
        self._last_offset: int | None = None
        # Hoisted lookups: this is the hot path.
        self._native = profile.native
        self._rsyslog = profile.rsyslog
        self._seconds: dict[tuple, int] = {}  # (MM, DD, hh, mm, ss) text -> epoch ms
        # The compiled twin of parse() for the common line (parsers/fastpath.py), or None.
        fast = fastpath.compiled_parser(profile.native, host, self.daemon, MAX_LINE_BYTES)
        self._compiled = fast
        self._fast = None if fast is None else fast.parse  # bound once: called per line
        # The rsyslog form's twin (fastpath.compiled_parser with `native`): built at the
        # first rsyslog line whose second is worked out here (a native log never needs
        # it; tried once: None where it cannot be), its parse bound as _rfast.
        self._prefixed = None
        self._twin_tried = False
        self._rfast = None
        # The host of the last rsyslog line parse_python read, and the one whose lines the
        # twin takes in the engine (Source._feed_compiled, point_twin).
        self.prefix_host: str | None = None
        self.twin_host = host
        # The parsers whose twins read the lines routed to them in the engine (route_to).
        self._routes: list[LineParser] = []

    @property
    def line_ref(self) -> tuple[int, int] | None:
        """(year, month) of the time the line was received (rsyslog/Kafka), if known: it
        dates a line better than the stream's own year rollover."""
        return self._line_ref

    @line_ref.setter
    def line_ref(self, ref: tuple[int, int] | None) -> None:
        if ref != self._line_ref:  # the seconds worked out under the old one may differ
            self._line_ref = ref
            self._forget_seconds()

    def parse(self, line: str) -> Event | None:
        """The event of a parsed line; None (with .result/.reason set) otherwise."""
        fast = self._fast
        if fast is not None:
            ev = fast(line)
            if ev is None and self._rfast is not None:
                ev = self._rfast(line)
                if ev is not None and ev is not fastpath.UNMATCHED_LINE:
                    self.prefix_host = ev[1]
            if ev is not None:
                if ev is fastpath.UNMATCHED_LINE:
                    self.result = UNMATCHED_RESULT
                    return None
                self.result = PARSED
                return ev
        return self.parse_python(line)

    def parse_python(self, line: str) -> Event | None:
        """parse() without the compiled path: the reference for every line."""
        if too_long(line):
            return self._malformed(TOO_LONG)
        if "\x00" in line:
            return self._malformed("binary data (NUL byte)")
        form = self._native
        m = form.regex.match(line)
        host = self.host
        if m is None:
            form = self._rsyslog
            m = form.regex.match(line)
            if m is None:
                return self._not_ours(line)
            tag_group = form.envelope.get("tag")
            if tag_group is not None and m.group(tag_group) in self.other_tags:
                self.routed_tag = m.group(tag_group)
                self.result = ROUTED
                return None
            host = self.prefix_host = m.group(form.envelope["host"])
        month, day, hour, minute, second, frac, pid, tid, func = m.group(*form.envelope_slots)
        ms = int((frac + "00")[:3]) if frac else 0
        # Lines of the same second share the conversion; year logic runs on misses only,
        # and the cache is dropped whenever the clock's year or the line_ref moves.
        cacheable = form is self._native
        base = self._seconds.get((month, day, hour, minute, second)) if cacheable else None
        if not cacheable and not self.clock.zone_given:
            rtime = m.group(form.envelope["rtime"])
            try:
                ts = self._stated(rtime, month, day, hour, minute, second, ms)
            except ClockError as exc:
                return self._malformed(str(exc))
            # read in the offset its prefix states, the one the next lines are read in too
            if self._last_offset == rfc3339_offset_minutes(rtime):
                self._remember_prefixed(rtime, (month, day, hour, minute, second), ts - ms)
        elif base is None:
            try:
                base = self._convert(form, m, month, day, hour, minute, second, cacheable)
                # None: a stamp of a repeated hour, resolved exactly per line
                ts = base + ms if base is not None else self._exact(form, m, month, day, hour,
                                                                     minute, second, ms)
            except ClockError as exc:
                return self._malformed(str(exc))
        else:
            ts = base + ms
        alt = form.alternatives[m.lastindex]
        if alt.role == UNMATCHED:
            self.result = UNMATCHED_RESULT
            return None
        op, client, token, nfiles, state, rc, surl, path = m.group(*alt.slots)
        if max(len(pid), len(tid or ""), len(nfiles or ""), len((rc or "").lstrip("-"))) > MAX_DIGITS:
            return self._malformed(f"a number longer than {MAX_DIGITS} digits")
        self.result = PARSED
        return _new_event(Event, (
            ts, host, self.daemon, int(pid), -1 if tid is None else int(tid), func, alt.role,
            op, client, token, None if nfiles is None else int(nfiles), state,
            None if rc is None else int(rc), surl, path,
        ))

    def _year_of(self, form, m, month: int) -> int | None:
        """The year a line itself implies (rsyslog prefix, receive time), else None."""
        if form is self._rsyslog:
            return prefix_year(m.group(form.envelope["rtime"]), month)
        ref = self._line_ref
        if ref is not None:
            return nearest_year(ref[0], ref[1], month)
        return None

    def _convert(self, form, m, month, day, hour, minute, second, cacheable) -> int | None:
        """Epoch ms of the whole second; None inside a repeated hour."""
        clock = self.clock
        mo = int(month)
        year_before = clock.year
        base = clock.second_ms(mo, int(day), int(hour), int(minute), int(second),
                               self._year_of(form, m, mo))
        if clock.year != year_before:
            self._forget_seconds()
        if base is not None and cacheable:
            if len(self._seconds) >= 4096:
                self._forget_seconds()
            stamp = (month, day, hour, minute, second)
            self._seconds[stamp] = base
            if self._compiled is not None and all(len(t) == 2 for t in stamp):
                self._compiled.remember(second_key(*stamp), base)
        elif base is not None and form is self._rsyslog:
            self._remember_prefixed(m.group(form.envelope["rtime"]),
                                    (month, day, hour, minute, second), base)
        return base

    def _remember_prefixed(self, rtime: str, stamp: tuple, base: int) -> None:
        """The epoch ms of a whole second behind an rsyslog prefix, for the rsyslog twin:
        the same for every line of that stamp whose prefix has the same context, the part
        of the receive time `rtime` this code reads the stamp by (prefix_year's year and
        month, the offset stated). The twin cuts the context from `rtime` itself, as from
        each line it scans (native/src/scan.rs, context_parts): one cut, not two to pin
        equal. The pure-Python path needs none: it reads every line's prefix whole."""
        if not all(len(t) == 2 for t in stamp):
            return
        if not self._twin_tried:
            self._twin_tried = True
            self._prefixed = self._rsyslog_twin()
        if self._prefixed is not None:
            self._prefixed.remember_in(rtime, second_key(*stamp), base)

    def _rsyslog_twin(self):
        """The rsyslog form's compiled twin, or None (no native one, or refused)."""
        if self._compiled is None:
            return None
        twin = fastpath.compiled_parser(self._rsyslog, self.host, self.daemon, MAX_LINE_BYTES,
                                        native=self._native, other_tags=self.other_tags)
        if twin is not None:
            self._rfast = twin.parse
        return twin

    def point_twin(self, host: str) -> None:
        """The engine takes the twin's lines of `host` from now on (their events name it),
        and the routed ones of `host` (route_to)."""
        self._prefixed.point_at(host)
        self.twin_host = host
        for routed in self._routes:
            routed.point_twin(host)

    def route_to(self, tag: str, routed: LineParser) -> bool:
        """The engine reads the rsyslog lines tagged `tag` (one of other_tags) with the
        twin of `routed`, the parser the caller routes them to, where this twin routes
        them, as parse() then routed.parse() read them: False (nothing done) until both
        twins are built. Its lines are taken for the host this twin is pointed at."""
        if self._prefixed is None or routed._prefixed is None:
            return False
        routed.point_twin(self.twin_host)
        self._prefixed.route(tag, routed._prefixed)
        self._routes.append(routed)
        return True

    def _forget_seconds(self) -> None:
        self._seconds.clear()
        if self._compiled is not None:
            self._compiled.forget()
        if self._prefixed is not None:
            self._prefixed.forget()

    def _stated(self, rtime: str, month, day, hour, minute, second, ms: int) -> int:
        """Epoch ms of the stamp behind an rsyslog prefix, read in the UTC offset the
        prefix states (the writer's local offset then, daylight saving included); the year
        is the one nearest to the prefix's. docs/record-rules.md, "Time"."""
        mo = int(month)
        fields = (prefix_year(rtime, mo), mo, int(day), int(hour), int(minute), int(second), ms)
        offset = rfc3339_offset_minutes(rtime)
        ts = offset_local_ms(*fields, offset)
        last = self._last_offset
        if last is not None and last != offset:
            # The offset changed (daylight saving): a line written before the change and
            # received after it still reads in the offset before. Of the two readings,
            # the one that puts the stamp nearest before its receipt is the line's.
            received = rfc3339_to_ms(rtime)
            before = offset_local_ms(*fields, last)
            if before <= received + AHEAD_OF_RECEIPT_MS and (
                    ts > received + AHEAD_OF_RECEIPT_MS or before > ts):
                ts, offset = before, last
        if offset != last:
            self._last_offset = offset
            if self._prefixed is not None:  # its seconds were read in the offset before
                self._prefixed.forget()
            if len(self.stated_offsets) < MAX_OFFSET_CHANGES:
                self.stated_offsets.append((ts, offset))
        return ts

    def _exact(self, form, m, month, day, hour, minute, second, ms) -> int:
        mo = int(month)
        return self.clock.to_ms(mo, int(day), int(hour), int(minute), int(second), ms,
                                self._year_of(form, m, mo))

    def _not_ours(self, line: str) -> None:
        """No envelope: another daemon's or program's syslog line, or garbage."""
        prefix = self.profile.rsyslog_prefix.match(line)
        tag = prefix.groupdict().get("tag") if prefix is not None else None
        if tag is not None and tag not in self.profile.tags:
            if tag in self.other_tags:
                self.routed_tag = tag
                self.result = ROUTED
            else:
                self.result = FOREIGN
            return None
        return self._malformed("no envelope")

    def _malformed(self, reason: str) -> None:
        self.result = MALFORMED
        self.reason = reason
        return None


def prefix_year(rtime: str, month: int) -> int:
    """The year of a stamp of `month` behind the rsyslog prefix time `rtime`: the nearest."""
    return nearest_year(int(rtime[:4]), int(rtime[5:7]), month)


def second_key(month: str, day: str, hour: str, minute: str, second: str) -> int:
    """One int per local second stamp of two-digit fields (the compiled parser computes
    the same, and takes only two-digit fields, so text and key map one to one)."""
    return (((int(month) * 100 + int(day)) * 100 + int(hour)) * 100 + int(minute)) * 100 + int(second)


def too_long(line: str) -> bool:
    """More than MAX_LINE_BYTES bytes in UTF-8 (encoded only when the characters alone
    cannot tell: at most 4 bytes a character)."""
    return len(line) > MAX_LINE_BYTES or (len(line) > MAX_LINE_BYTES // 4
                                          and len(line.encode("utf-8", "replace")) > MAX_LINE_BYTES)


def bounded(line: str | bytes) -> str | bytes:
    """`line`, or for a line longer than MAX_LINE_BYTES a stand-in of MAX_LINE_BYTES + 1
    characters that every step judges the same (malformed, TOO_LONG) without going
    through, decoding or copying the whole of it."""
    if len(line) <= MAX_LINE_BYTES:
        return line
    head = line[:MAX_LINE_BYTES + 1]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    return head.ljust(MAX_LINE_BYTES + 1, "\ufffd")  # a cut multi-byte tail stays too long
