"""The DOME section of the terminal summary (a record sink of the DOME kinds,
parsers/dome_records.py): calls per role, command and code class, put outcomes, the
put-to-putdone time, the last capacity per filesystem, the filesystem events and the
lines journald's rate limit dropped per node (before dpmstream saw them).

Whole-second stamps (docs/dome.md section 3) make a call's duration 0 or 1 s: call
durations are summarised from sub-second records only, and a run of whole-second calls
says so instead of printing quantiles of 0 and 1. A put's put-to-putdone from
whole-second stamps is good to +-1 s: its quantiles are printed in whole seconds and
marked, never with three decimals that would claim milliseconds.
"""

from __future__ import annotations

from collections import Counter

from dpmstream.parsers.dome_records import CODE_CLASSES, code_class, command_label
from dpmstream.parsers.records import ms_to_text
from dpmstream.streams.sinks.summary import QUANTILES, Series, drained

DOME_KINDS = frozenset(("dome_call", "dome_put", "dome_checksum", "dome_capacity", "dome_fs_event",
                        "dome_journald_gap"))
PUT_STATUSES = ("success", "failed", "incomplete")
UNKNOWN_ROLE = "?"                    # a call's role label when its host's role is not known
TIMED_OUTCOMES = ("done", "failed")  # checksum waits that ended at an answer: timed
# Combinations of (role, command, http code) whose labels are remembered; a run with more
# (commands outside KNOWN_COMMANDS, odd codes) labels the others call by call.
MAX_CALL_LABELS = 1024


class DomeSummary:
    def __init__(self):
        self.calls: Counter = Counter()        # (role, command, code class) -> calls
        self.call_seconds: dict[tuple[str, str], Series] = {}   # sub-second calls only
        self.whole_second_calls = 0
        self.puts: Counter = Counter()         # (status, end_reason) -> puts
        self.put_to_putdone = Series()         # sub-second puts
        self.put_to_putdone_whole = Series()   # whole-second puts: good to +-1 s
        self.checksums: Counter = Counter()    # outcome -> checksum waits
        self.checksum_wait = Series()          # one file's done or failed waits, sub-second
        self.checksum_wait_whole = Series()    # ... from whole-second stamps: +-1 s
        self.capacity: dict[tuple[str, str], tuple[int, int, int]] = {}  # (host, fs) -> (time, phys, free)
        self.fs_events: Counter = Counter()    # (server, fs, event) -> events that changed the state
        self.suppressed: Counter = Counter()   # host -> lines journald's notices say it dropped
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        # (role, command, http code) -> their labels: ((role, command label), code class),
        # made once per combination rather than once per call (bounded)
        self._call_labels: dict[tuple, tuple] = {}

    def __bool__(self) -> bool:
        return bool(self.calls or self.puts or self.checksums or self.capacity or self.fs_events
                    or self.suppressed)

    def write(self, record: dict) -> None:
        kind = record["kind"]
        if kind == "dome_call":   # most records: _cover and the labels inlined
            start, end = record["start"], record["end"]
            first, last = self.first_ms, self.last_ms
            if start is not None:
                if first is None or start < first:
                    first = start
                if last is None or start > last:
                    last = start
            if end is not None:
                if first is None or end < first:
                    first = end
                if last is None or end > last:
                    last = end
            self.first_ms, self.last_ms = first, last
            raw = (record["role"], record["command"], record["http_code"])
            labels = self._call_labels.get(raw)
            if labels is None:
                labels = ((raw[0] or UNKNOWN_ROLE, command_label(raw[1])), code_class(raw[2]))
                if len(self._call_labels) < MAX_CALL_LABELS:
                    self._call_labels[raw] = labels
            key, cls = labels
            self.calls[(*key, cls)] += 1
            if record["whole_seconds"]:
                self.whole_second_calls += 1
            elif record["duration"] is not None:
                self.call_seconds.setdefault(key, Series()).add(record["duration"])
        elif kind == "dome_put":
            self._cover(record["put_time"], record["ended"])
            self.puts[(record["status"], record["end_reason"])] += 1
            if record["put_to_putdone"] is not None:
                series = self.put_to_putdone_whole if record["whole_seconds"] else self.put_to_putdone
                series.add(record["put_to_putdone"])
        elif kind == "dome_checksum":
            self._cover(record["start"], record["end"])
            self.checksums[record["outcome"]] += 1
            if record["outcome"] in TIMED_OUTCOMES and not record["overlap"]:
                series = self.checksum_wait_whole if record["whole_seconds"] else self.checksum_wait
                series.add(record["wait"])
        elif kind == "dome_capacity":
            self._cover(record["time"])
            self.capacity[(record["host"], record["fs"])] = (record["time"], record["phys"],
                                                            record["free"])
        elif kind == "dome_fs_event":
            self._cover(record["time"])
            if record["transition"]:
                self.fs_events[(record["server"], record["fs"], record["event"])] += 1
        elif kind == "dome_journald_gap":
            self._cover(record["time"])
            self.suppressed[record["host"]] += record["lines"]

    def close(self) -> None:
        """Nothing to release: render() reads it after the run."""

    def load(self, state: dict) -> None:
        """Take the figures the extension's DomeSummaryTally gathered from a run's
        records (native/src/dome_summary_tally.rs, take_state()): the same as write() given
        each of those records, in a DomeSummary that was written none itself. The state's
        series are consumed (each list slot emptied as its array is made)."""
        self._cover(state["first_ms"], state["last_ms"])
        self.whole_second_calls = state["whole_second_calls"]
        self.calls = Counter(dict(state["calls"]))
        self.call_seconds = {key: Series.restored(*args) for key, args in drained(state["call_seconds"])}
        self.puts = Counter(dict(state["puts"]))
        self.put_to_putdone = Series.restored(*state["put_to_putdone"])
        self.put_to_putdone_whole = Series.restored(*state["put_to_putdone_whole"])
        self.checksums = Counter(dict(state["checksums"]))
        self.checksum_wait = Series.restored(*state["checksum_wait"])
        self.checksum_wait_whole = Series.restored(*state["checksum_wait_whole"])
        self.capacity = dict(state["capacity"])
        self.fs_events = Counter(dict(state["fs_events"]))
        self.suppressed = Counter(dict(state["suppressed"]))

    def _cover(self, *times) -> None:
        for t in times:   # comparisons, not min()/max(): once or twice a record
            if t is not None:
                if self.first_ms is None or t < self.first_ms:
                    self.first_ms = t
                if self.last_ms is None or t > self.last_ms:
                    self.last_ms = t

    def render(self, dome_stats=None, max_rows: int = 20) -> str:
        """The DOME section ("" when no DOME record came)."""
        if not self and dome_stats is None:
            return ""
        out: list[str] = []
        if self.calls:
            out += self._call_lines(max_rows)
        if self.puts:
            out += self._put_lines()
        if self.checksums:
            out += self._checksum_lines()
        if self.capacity:
            out.append("DOME filesystems (last capacity line)")
            out.append(f"  {'host':<20} {'fs':<24} {'size GB':>10} {'free GB':>10} {'free':>6}")
            for (host, fs), (_, phys, free) in sorted(self.capacity.items())[:max_rows]:
                share = f"{100 * free / phys:5.1f}%" if phys else f"{'':>6}"
                out.append(f"  {host:<20} {fs:<24} {phys / 1e9:>10.1f} {free / 1e9:>10.1f} {share}")
            if len(self.capacity) > max_rows:
                out.append(f"  ... and {len(self.capacity) - max_rows} more filesystems")
            out.append("")
        if self.fs_events:
            out.append("DOME filesystem state changes (the head's enable/disable lines)")
            for (server, fs, event), n in sorted(self.fs_events.items())[:max_rows]:
                out.append(f"  {server} {fs}: {event} {n}")
            out.append("")
        if self.suppressed:
            out.append("DOME lines lost before dpmstream saw them (journald's rate limit: its "
                       "`Suppressed N messages` notices)")
            for host, n in sorted(self.suppressed.items())[:max_rows]:
                out.append(f"  {host}: {n} lines")
            if len(self.suppressed) > max_rows:
                out.append(f"  ... and {len(self.suppressed) - max_rows} more hosts")
            out.append("")
        if dome_stats is not None:
            s = dome_stats
            out.append("DOME reassembly")
            out.append(f"  calls cut (no Exiting) {s.cut_calls}, stray ends {s.stray_call_ends}"
                       f", commands without a call {s.commands_without_call}"
                       f", process deaths {s.process_deaths}")
            out.append(f"  orphan putdones {s.orphan_putdones}, ambiguous putdones "
                       f"{s.ambiguous_putdones}, orphan putdone errors {s.orphan_putdone_errors}"
                       f", puts timed out {s.expired_puts}, evicted (cap) {s.put_evictions}"
                       f", calls evicted (cap) {s.call_evictions}")
            out.append(f"  lines without a thread id {s.unframed_lines}, unusable {s.unusable_lines}")
            out.append("")
        return "\n".join(out)

    def _call_lines(self, max_rows: int) -> list[str]:
        by_command: dict[tuple[str, str], Counter] = {}
        for (role, command, cls), n in self.calls.items():
            by_command.setdefault((role, command), Counter())[cls] = n
        rows = sorted(by_command.items(), key=lambda kv: -sum(kv[1].values()))
        out = ["DOME calls (per role, command and HTTP code class; none: cut, no Exiting line)",
               f"  {'role':<5} {'command':<20} {'calls':>8} "
               + " ".join(f"{c:>7}" for c in CODE_CLASSES)]
        for (role, command), classes in rows[:max_rows]:
            out.append(f"  {role:<5} {command:<20} {sum(classes.values()):>8} "
                       + " ".join(f"{classes[c]:>7}" for c in CODE_CLASSES))
        if len(rows) > max_rows:
            out.append(f"  ... and {len(rows) - max_rows} more commands")
        out.append("")
        if self.call_seconds:
            out.append("DOME call durations (seconds; sub-second stamps only)")
            out.append(_header("role", "command"))
            busiest = sorted(self.call_seconds.items(), key=lambda kv: -kv[1].count)
            for (role, command), series in busiest[:max_rows]:
                out.append(_row(role, command, series, whole=False))
            out.append("")
        if self.whole_second_calls:
            out.append(f"  {self.whole_second_calls} calls have whole-second stamps: their "
                       "durations (0 or 1 s) say nothing of latency and are not summarised "
                       "(docs/dome.md section 3)")
            out.append("")
        return out

    def _put_lines(self) -> list[str]:
        statuses = Counter()
        for (status, _), n in self.puts.items():
            statuses[status] += n
        out = ["DOME puts (dome_put on the head, joined to its putdone)",
               "  " + ", ".join(f"{s} {statuses[s]}" for s in PUT_STATUSES)
               + "; ended by " + ", ".join(f"{reason} {n}" for reason, n in sorted(
                   Counter({r: n for (_, r), n in self.puts.items()}).items()))]
        out += _quantile_rows("put", "to putdone", self.put_to_putdone, self.put_to_putdone_whole)
        out.append("")
        return out

    def _checksum_lines(self) -> list[str]:
        out = ["DOME checksum waits (first 202 answer to the last poll; docs/dome.md section 2)",
               "  " + ", ".join(f"{outcome} {n}" for outcome, n in sorted(self.checksums.items()))
               + "  (overlap: one client polled two files at once, not timed)"]
        out += _quantile_rows("chk", "wait", self.checksum_wait, self.checksum_wait_whole)
        out.append("")
        return out


def _quantile_rows(a: str, b: str, fine: Series, whole: Series) -> list[str]:
    """The header and a row for each of the two series that has values: from sub-second
    stamps in milliseconds, from whole-second ones in whole seconds, marked."""
    if not (fine.count or whole.count):
        return []
    out = [_header(a, b)]
    if fine.count:
        out.append(_row(a, b, fine, whole=False))
    if whole.count:
        out.append(_row(a, b, whole, whole=True) + "  whole-second stamps: +-1 s")
    return out


def _header(a: str, b: str) -> str:
    return f"  {a:<5} {b:<20} {'count':>8} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}"


def _row(a: str, b: str, series: Series, *, whole: bool) -> str:
    """Quantiles in seconds: three decimals from sub-second stamps, whole seconds (`12 s`)
    from whole-second ones, which are not known any finer."""
    def cell(ms: int) -> str:
        return f"{ms // 1000} s" if whole else ms_to_text(ms)
    q = [cell(x) for x in series.quantiles(QUANTILES)]
    return (f"  {a:<5} {b:<20} {series.count:>8} {q[0]:>9} {q[1]:>9} {q[2]:>9}"
            f" {cell(series.max):>9}")
