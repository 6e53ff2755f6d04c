"""A bounded event-time merge of several DOME nodes' lines that arrive on their own schedule.

A put is joined across nodes (the head's `dome_put`, a disk node's putdone, the head's
putdone) by a reassembler that reads their lines in one event-time order, with an
allowance of 2 s (dome_reassembly.ALLOWANCE_MS). `replay` reads the nodes' files side by
side in event time; a stream of lines (the Kafka worker's partition) brings each node's
lines when its shipper sends them, and a node whose lines come late (an rsyslog backlog
after an outage, a node started later) would lose its joins. This merge puts them back in
event time: each node is a lane, and a line of a lane that is ahead is held until every
other lane has shown a line at least as late; then the held lines leave in stamp order
(ties and each lane's own order kept). docs/dome.md, section 6 item 9, states the rule.

    merge = DomeMerge(horizon_ms=60_000, max_held=100_000)
    for lane, stamp, item in arrivals:
        for lane, item in merge.push(lane, stamp, item):
            feed(lane, item)                   # in event-time order across the lanes

The bounds, so no lane can hold the others forever:
  - the horizon: a lane whose latest stamp is more than `horizon_ms` behind the newest
    lane's counts as quiet (stopped, or far behind) and holds nothing back, the rule the
    DPM linker applies to a host's two logs (linking.MAX_LAG_MS); so a held line waits
    at most the horizon of event time, and what is held spans at most the horizon;
  - the count: at most `max_held` lines are held; past it the earliest leaves at once.
A held line that leaves before every lane has reached it (a quiet lane, or the count) is
"forced"; one that waited for the lanes "released"; one never held "passed". A horizon of
0 holds nothing (arrival order).

Pure: no I/O and no wall clock. The items are the caller's (JSON-safe, for the state);
the stamps are epoch ms, None for a line with no readable stamp (it keeps its lane's
order: it takes its lane's latest stamp). The held lines are state: take_changes() gives
them as keyed net changes (one entry per held line, as parsers/dome_state.py does for
the open calls and puts), restore() rebuilds a merge from the latest value of each key.

LineStamps reads a DOME line's stamp (its syslog envelope's) for this order only: the
line is parsed, and dated for the records, by its source when it leaves the merge.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from datetime import datetime

from .clock import ClockError, EventClock, load_zone, nearest_year, rfc3339_to_ms
from .dome_lines import MONTHS
from .dome_profiles import DomeProfile

# The defaults a driver offers (the worker's --dome-merge-horizon and --dome-merge-max-lines).
HORIZON_MS = 60_000      # as the DPM linker's MAX_LAG_MS: the same idea of a quiet log
MAX_HELD = 100_000
# The outcomes counted (DomeMerge.counts; the worker's dpmstream_dome_merge_lines_total).
PASSED, RELEASED, FORCED = "passed", "released", "forced"
OUTCOMES = (PASSED, RELEASED, FORCED)

HELD, REST = "h|", "x"   # state keys: one held line, the lanes' latest stamps


class DomeMerge:
    """The lanes' held lines, their latest stamps and the counts of a partition (module
    docstring: the rule and its bounds)."""

    def __init__(self, horizon_ms: int = HORIZON_MS, max_held: int = MAX_HELD):
        if horizon_ms < 0:
            raise ValueError(f"merge horizon must be >= 0 ms, not {horizon_ms}")
        if max_held < 0:
            raise ValueError(f"merge max held lines must be >= 0, not {max_held}")
        self.horizon_ms = horizon_ms
        self.max_held = max_held
        self.latest: dict[str, int] = {}            # lane -> its latest stamp
        self._queues: dict[str, deque] = {}         # lane -> [seq, stamp, item], arrival order
        self.held = 0
        self._seq = 0
        self.counts: Counter = Counter()            # outcome -> lines (the driver clears it)
        # net changes for take_changes(): seq -> entry added, seqs stored and since gone
        self._added: dict[int, list] = {}
        self._stored: set[int] = set()
        self._gone: set[int] = set()
        self._rest_dirty = False

    # -- the merge -------------------------------------------------------------------------
    def push(self, lane: str, stamp: int | None, item) -> list[tuple[str, object]]:
        """One line of `lane`; returns the (lane, item) pairs that leave now, in order."""
        latest = self.latest.get(lane)
        if stamp is None:
            stamp = latest
        if stamp is not None and (latest is None or stamp > latest):
            self.latest[lane] = latest = stamp
            self._rest_dirty = True
        if self.held == 0 and (stamp is None or stamp <= self.watermark()):
            self.counts[PASSED] += 1   # nothing waits, nothing to wait for: at once
            return [(lane, item)]
        seq = self._seq
        self._seq += 1
        self._rest_dirty = True
        entry = [seq, stamp if stamp is not None else -1, item]
        self._queues.setdefault(lane, deque()).append(entry)
        self._added[seq] = [lane, entry[1], item]
        self.held += 1
        return self._release(seq)

    def watermark(self) -> int:
        """The stamp every lane that is not quiet has reached: what may leave."""
        latest = self.latest
        if not latest:
            return -1
        newest = max(latest.values())
        floor = newest - self.horizon_ms
        return min(t for t in latest.values() if t >= floor)

    def _release(self, pushed: int | None, drain: bool = False) -> list[tuple[str, object]]:
        """The held lines that may leave now (all of them to drain): stamp order across
        lanes, each lane's order kept."""
        out: list[tuple[str, object]] = []
        mark = self.watermark()
        slowest = min(self.latest.values(), default=-1)
        heads = [(q[0][1], q[0][0], lane) for lane, q in self._queues.items() if q]
        heapq.heapify(heads)
        while heads and (drain or heads[0][0] <= mark or self.held > self.max_held):
            stamp, seq, lane = heapq.heappop(heads)
            queue = self._queues[lane]
            _seq, _stamp, item = queue.popleft()
            self.held -= 1
            if seq == pushed:
                outcome = PASSED
            else:
                outcome = RELEASED if drain or stamp <= slowest else FORCED
            self.counts[outcome] += 1
            self._left(seq)
            out.append((lane, item))
            if queue:
                heapq.heappush(heads, (queue[0][1], queue[0][0], lane))
        return out

    def _left(self, seq: int) -> None:
        if self._added.pop(seq, None) is None and seq in self._stored:
            self._stored.discard(seq)
            self._gone.add(seq)

    # -- state -----------------------------------------------------------------------------
    def take_changes(self) -> dict[str, object]:
        """The held lines and the lanes' stamps changed since the last take (everything,
        the first time): {key: JSON-safe value, or None for a held line gone}. A line held
        and gone between two takes is left out."""
        changes: dict[str, object] = {f"{HELD}{seq}": entry for seq, entry in self._added.items()}
        self._stored.update(self._added)
        self._added = {}
        for seq in self._gone:
            changes[f"{HELD}{seq}"] = None
        self._gone = set()
        if self._rest_dirty:
            changes[REST] = {"latest": dict(self.latest), "seq": self._seq}
            self._rest_dirty = False
        return changes

    def restore(self, entries: dict[str, object]) -> None:
        """Rebuild (a fresh merge) from the latest value of every key take_changes() gave."""
        rest = entries.get(REST)
        if rest is not None:
            self.latest = {lane: int(t) for lane, t in rest["latest"].items()}
            self._seq = int(rest["seq"])
        held = sorted((int(key[len(HELD):]), value) for key, value in entries.items()
                      if key.startswith(HELD) and value is not None)
        for seq, (lane, stamp, item) in held:
            self._queues.setdefault(lane, deque()).append([seq, stamp, item])
            self._stored.add(seq)
            self._seq = max(self._seq, seq + 1)
        self.held = len(held)

    def drain(self) -> list[tuple[str, object]]:
        """The end of input: every held line leaves, in order (no lane will catch up),
        counted as released."""
        return self._release(None, drain=True)


class LineStamps:
    """The stamp of a DOME line's syslog envelope, in epoch ms, for the merge's order
    only (its source dates it for the records): RFC 3339 as it reads; a traditional
    stamp (no year) in the year that puts it nearest its receive time, in the profile's
    zone or the one given. None for a line without a readable envelope."""

    def __init__(self, profile: DomeProfile, tz: str | None = None):
        self._forms = [(name, form.prefix) for name, form in profile.forms.items()]
        zone = tz or profile.timezone
        self._zone = load_zone(zone)
        # Without a receive time, the years roll over as the stamps' months do.
        self._clock = EventClock(zone, year=2000, zone_given=bool(tz))

    def stamp(self, line: str, received_ms: int | None = None) -> int | None:
        for name, prefix in self._forms:
            m = prefix.match(line)
            if m is not None:
                break
        else:
            return None
        try:
            if name == "rfc3339":
                return rfc3339_to_ms(m.group("rtime"))
            month = MONTHS[m.group("mon")]
            year = None
            if received_ms is not None:
                when = datetime.fromtimestamp(received_ms / 1000, tz=self._zone)
                year = nearest_year(when.year, when.month, month)
            return self._clock.to_ms(month, int(m.group("day")), int(m.group("hour")),
                                     int(m.group("minute")), int(m.group("second")), 0, year=year)
        except (ClockError, ValueError, OverflowError):
            return None
