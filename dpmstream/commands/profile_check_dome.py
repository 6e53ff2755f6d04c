"""`dpmstream profile check` for DOME profiles (family "dome", parsers/dome_profiles.py).

Per DOME profile: the share of lines per role, the foreign lines (other programs in
/var/log/messages or the journal) apart, the unmatched dmlite shapes; and whether it fits:
its required roles, and, per worker thread (host, pid, TID), `Exiting` lines closing no
open call (stray ends) and calls opened again before their `Exiting` (calls without an
end), judged by the same rules as a DPM daemon's stray returns (parsers/fit.py). The
generation without a thread id has no threads to watch: its roles alone are judged.

The lines also go through the DOME reassembly (the engine replay and run use,
parsers/engines.new_dome_reassembler), which judges the join of puts and putdones
(fit.judge_dome_puts): orphan putdones past the file's start, puts none of which met a
putdone; and the lines journald's rate limit dropped per node (its `Suppressed N messages`
notices), lost before any reader saw them.
"""

from __future__ import annotations

from collections import Counter

from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_profiles import ROLES
from dpmstream.parsers.fit import (
    MIN_LINES_TO_JUDGE, DomePutsSeen, Reassembled, judge, judge_dome_puts,
)
from dpmstream.parsers.lines import FOREIGN, MALFORMED, PARSED, UNMATCHED_RESULT
from dpmstream.parsers.shapes import shape

# What CompiledDomeLineParser.parse_block leaves to Python (native/src/profile_tally.rs).
DOME_PARSED, DOME_UNMATCHED, DOME_PYTHON = range(3)
EXAMPLE_CHARS = 200
MAX_SHAPES = 10_000   # distinct unmatched shapes kept; more are counted apart
OPENERS = ("accept", "call")


class DomeTally:
    def __init__(self, profile):
        self.profile = profile
        # The engine replay and run use, its line parser with it (the compiled one takes no
        # Python per line that is not DOME's: most of a DPM log's). The year does not matter
        # to counting: a fixed one keeps the check off the wall clock.
        engine = engines.choose(available=engines.compiled_dome_available)
        self.parser = engines.new_dome_parser(engine, profile,
                                              EventClock(profile.timezone, year=2017))
        self.roles: Counter = Counter()
        self.results: Counter = Counter()
        self.unmatched: Counter = Counter()
        self.unmatched_dropped = 0
        self.examples: dict[str, str] = {}
        self._threads: dict[tuple, str] = {}   # (host, pid, tid) -> the last framing role
        self.opens = self.stray_ends = self.ends_first_on_thread = self.no_end = 0
        self.engine = engines.new_dome_reassembler(engine)
        self.seen = DomePutsSeen()
        self._first_ts: int | None = None
        self._orphan_times: list[int] = []   # event time each orphan putdone was counted at
        self._longest_put_ms = 0             # the longest put-to-putdone joined
        self.suppressed: Counter = Counter()  # host -> lines journald's notices say it dropped

    @property
    def own(self) -> int:
        """dmlite lines: parsed or unmatched."""
        return self.results[PARSED] + self.results[UNMATCHED_RESULT]

    def add(self, line: str) -> None:
        ev = self.parser.parse(line)
        self._count(line, ev, self.parser.result)

    def add_block(self, lines, n: int, text) -> None:
        """The first n of `lines` (a block of bytes lines; `text` decodes one as add()
        takes it), as add() takes each: with the compiled scanner, the lines of other
        programs and without an envelope are only counted, in the extension."""
        compiled = engines.compiled_dome()
        if compiled is None or not isinstance(self.parser, compiled.CompiledDomeLineParser):  # the reference: line by line
            for i in range(n):
                self.add(text(lines[i]))
            return
        foreign, malformed, left = self.parser.parse_block(lines, n)
        self.results[FOREIGN] += foreign
        self.results[MALFORMED] += malformed
        for i, kind, ev in left:
            if kind == DOME_PYTHON:
                self.add(text(lines[i]))
            elif kind == DOME_PARSED:   # its text is not read: not decoded
                self._count("", ev, PARSED)
            else:
                self._count(text(lines[i]), ev, UNMATCHED_RESULT)

    def _count(self, line: str, ev, result: str) -> None:
        """One line's result; `line`, its text, is read only when unmatched."""
        self.results[result] += 1
        if result == UNMATCHED_RESULT:
            self._unmatched(line)
        if ev is None:
            return
        self._reassemble(ev)
        self.roles[ev.role] += 1
        if ev.tid >= 0 and ev.role in (*OPENERS, "returns"):
            self._frame((ev.host, ev.pid, ev.tid), ev.role)

    def _reassemble(self, ev) -> None:
        if self._first_ts is None:
            self._first_ts = ev.ts
        if ev.role in ("putdone_disk", "putdone_head"):
            self.seen.putdone_lines += 1
        self._records(self.engine.feed(ev))
        # One read of the counters a line (the compiled engine's copy them all): those
        # before it are the orphans timed so far.
        self._orphan_times += [ev.ts] * (self.engine.stats.orphan_putdones - len(self._orphan_times))

    def finish(self) -> None:
        """The end of the file: the reassembly's last records, then the orphans a file
        beginning mid-way explains (within the longest put-to-putdone of its start)."""
        before = self.engine.stats.orphan_putdones
        self._records(self.engine.finish())
        # Each host's latest stamp, from the snapshot either engine gives.
        last = max(self.engine.snapshot()["clocks"].values(), default=0)
        self._orphan_times += [last] * (self.engine.stats.orphan_putdones - before)
        self.seen.orphan_putdones = len(self._orphan_times)
        if self._first_ts is not None:
            horizon = self._first_ts + self._longest_put_ms
            self.seen.orphans_at_start = sum(1 for ts in self._orphan_times if ts <= horizon)

    def _records(self, records: list[dict]) -> None:
        for rec in records:
            if rec["kind"] == "dome_journald_gap":
                self.suppressed[rec["host"]] += rec["lines"]
            if rec["kind"] != "dome_put":
                continue
            self.seen.entered += 1
            if rec["server"] is None:
                continue   # a put without its `Selected fs` line cannot be joined at all
            self.seen.puts += 1
            if rec["putdone_disk_time"] is not None or rec["putdone_head_time"] is not None:
                self.seen.joined += 1
                self._longest_put_ms = max(self._longest_put_ms, rec["put_to_putdone"] or 0)
            elif rec["end_reason"] == "input_end":
                self.seen.unjoined_at_end += 1
            else:
                self.seen.unjoined_at_timeout += 1

    def _frame(self, thread, role: str) -> None:
        last = self._threads.get(thread)
        if role == "returns":
            if last is None:
                self.ends_first_on_thread += 1
            if last in (None, "returns"):
                self.stray_ends += 1
        elif not (role == "call" and last == "accept"):   # accept then clientdn: one call
            self.opens += 1
            if last in OPENERS:
                self.no_end += 1
        self._threads[thread] = role

    def _unmatched(self, line: str) -> None:
        text = shape(line.split(" dmlite ", 1)[-1])
        if text not in self.unmatched and len(self.unmatched) >= MAX_SHAPES:
            self.unmatched_dropped += 1
            return
        self.examples.setdefault(text, line[:EXAMPLE_CHARS])
        self.unmatched[text] += 1

    def findings(self):
        seen = Reassembled(stray_returns=self.stray_ends,
                           returns_at_thread_start=self.ends_first_on_thread,
                           noreturn_calls=self.no_end)
        return (judge(self.profile.required_roles, self.own, self.roles, seen)
                + judge_dome_puts(self.seen))


def render_dome(total: int, t: DomeTally, top: int) -> list[str]:
    """The lines of one DOME profile's report; none when the file has no dmlite line."""
    if not t.own:
        return []
    r = t.results
    p = t.profile

    def pct(n: int) -> str:
        return f"{100.0 * n / total:5.1f}%" if total else "    -"
    out = [f"  profile {p.name} (DOME): matched {pct(r[PARSED])}, unmatched {pct(r[UNMATCHED_RESULT])}, "
           f"foreign {pct(r[FOREIGN])}, no envelope {pct(r[MALFORMED])}"]
    out += [f"    {role:<16} {t.roles[role]:>9} {pct(t.roles[role])}" for role in ROLES if t.roles[role]]
    if t.unmatched:
        out.append(f"  most common unmatched shapes ({p.name}):")
        for text, count in t.unmatched.most_common(top):
            out.append(f"    {count:>9}  {text}")
            out.append(f"    {'':>9}  e.g. {t.examples[text]}")
    out.append(f"  fit of profile {p.name}: {t.own} dmlite lines, {r[FOREIGN]} lines of other programs")
    if p.required_roles:
        judged = t.own >= MIN_LINES_TO_JUDGE
        out.append("    required roles: " + ", ".join(
            f"{role} {t.roles[role]}" + (" MISSING" if judged and not t.roles[role] else "")
            for role in p.required_roles))
    s = t.seen
    out.append(f"    puts (reassembled): {s.entered}, {s.puts} with their Selected fs line, joined to a putdone "
               f"{s.joined}, never joined {s.unjoined_at_timeout + s.unjoined_at_end} "
               f"({s.unjoined_at_end} at the end of input); orphan putdones {s.orphan_putdones} "
               f"of {s.putdone_lines} putdone lines ({s.orphans_at_start} near the start)")
    if t.suppressed:
        out.append("    lines journald's rate limit dropped before syslog saw them: " + ", ".join(
            f"{host} {n}" for host, n in sorted(t.suppressed.items())))
    if p.has_tid:
        out.append(f"    calls: {t.opens} opens, stray ends {t.stray_ends} ({t.ends_first_on_thread} first "
                   f"on their thread), calls opened again before their Exiting {t.no_end}")
    return out


def render_dome_warning(name: str, t: DomeTally) -> str:
    findings = t.findings() if t.own else []
    if not findings:
        return ""
    out = [f"WARNING: {name}: profile {t.profile.name} does not fit this DOME log; its calls "
           f"and puts would be lost:"]
    out += [f"  - {f.message}" for f in findings]
    out.append(f"  Adapt the profile: copy {t.profile.source}, fix the patterns named above, and "
               f"pass --profile FILE (docs/dome.md).")
    return "\n".join(out)
