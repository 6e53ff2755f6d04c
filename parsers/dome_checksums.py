"""DOME checksum waits: a stage over the DOME call records (docs/dome.md, "Checksum waits").

    dome = WithChecksumWaits(reassembler)         # either engine's DOME reassembler
    out += dome.feed(event)                       # its records, each followed by the waits it ends
    out += dome.advance(now_ms)                   # a driver's event time, when it has one
    out += dome.finish()

or, on records already out of a reassembler, `with_checksums(records, ChecksumWaits())`.

A frontend asks the head for a file's checksum with `dome_chksum` and polls every 5 s
while the head answers 202 (queued); the answer 200 (done) or an error code ends the wait.
At level 1 the LFN is only in the request body, so a wait is known by (head, caller,
remote client) only: a run of that key's `dome_chksum` calls answered 202, ended by one
answered otherwise. wait = the first 202 call's start to the last call's end.

A client polling two files at once makes two runs one. That is detected, never guessed
apart: two calls of a run closer than the poll interval less a second mark the run
`overlap`; an overlapping run does not end at an answer (the other file may still be
polling) but when its key stays silent for the timeout, and its wait covers both files.
A run whose key stays silent for `timeout_ms` after a 202 is `timeout` (the frontend gave
up, or its answer was lost). Cut calls (no code) and calls naming no caller are counted
and left out.

Pure: reads only the records it is given (and `advance`), so both engines, which emit
the same call records, give the same waits. This class is the reference and the Python
engine's stage; the compiled engine runs its twin inside the extension
(native/src/dome_checksums.rs: WithChecksumWaits hands it the stage), so that there its
records come out already paired with their waits, with no Python per record
(tests/parsers/test_dome_checksums_engines_agree.py holds the two equal). Bounded: at most `max_open` open runs; the
least recently active is emitted `evicted` (counted) to make room.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from .plain import Counters

# Call records of one head may come out of order by as much as the reassembler's lines.
from .dome_reassembly import ALLOWANCE_MS, advance_clocks

COMMAND = "dome_chksum"
QUEUED = 202
# dmlite's frontends poll dome_chksum every 5 s (docs/dome.md, dome-log-format.md section 5).
POLL_INTERVAL_MS = 5_000
# Two calls of one key closer than the poll interval less this are two pollers (a whole-
# second stamp moves an interval by up to a second).
CADENCE_SLACK_MS = 1_000
# A key silent this long after a 202: the frontend stopped polling (six polls lost).
TIMEOUT_MS = 30_000
MAX_OPEN = 10_000
DONE, FAILED, TIMEOUT, INPUT_END, EVICTED = "done", "failed", "timeout", "input_end", "evicted"


class ChecksumStats(Counters):
    __slots__ = FIELDS = (
        "polls",                 # dome_chksum calls with a code, read into runs
        "cut_polls",             # dome_chksum calls cut (no code): left out
        "unattributed_polls",    # dome_chksum calls with no caller line: no key, left out
        "answers_without_wait",  # a non-202 answer with no run open (no 202 seen before it)
        "waits",                 # dome_checksum records emitted
        "overlaps",              # ... of them `overlap`: two or more files polled at once
        "timeouts",              # ... of them `timeout`
        "evictions",             # ... emitted early by the cap on open runs
    )


class OpenRun:
    __slots__ = ("seq", "head", "caller", "client", "start", "last_start", "last_end", "polls",
                 "endings", "code", "ended", "overlap", "whole")

    def __init__(self, seq, record):
        self.seq = seq
        self.head, self.caller, self.client = record["host"], record["caller"], record["remote_client"]
        self.start = record["start"]
        self.last_start = self.last_end = record["start"]
        self.polls = self.endings = 0
        self.code = None          # the latest answer other than 202
        self.ended = False        # the run's latest call was such an answer
        self.overlap = False
        self.whole = False

    @property
    def key(self) -> tuple:
        return (self.head, self.caller, self.client)

    def deadline(self, timeout_ms: int) -> int:
        return self.last_end + timeout_ms


RUN_STATE = OpenRun.__slots__


class ChecksumWaits:
    def __init__(self, timeout_ms: int = TIMEOUT_MS, poll_interval_ms: int = POLL_INTERVAL_MS,
                 max_open: int = MAX_OPEN, allowance_ms: int = ALLOWANCE_MS):
        # The compiled stage takes these settings as they are: checked here only.
        if timeout_ms <= poll_interval_ms:
            raise ValueError("the checksum timeout must be longer than the poll interval")
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.timeout_ms = timeout_ms
        self.poll_interval_ms = poll_interval_ms
        self.max_open = max_open
        self.allowance_ms = allowance_ms
        self.stats = ChecksumStats()
        self.clocks: dict[str, int] = {}          # host -> latest call time seen (or advanced to)
        self.open: OrderedDict[tuple, OpenRun] = OrderedDict()   # key -> run, least recently active first
        self.deadlines: dict[str, list] = {}      # host -> heap of (deadline, seq, key), stale ones skipped
        self.seq = 0

    # -- the API -------------------------------------------------------------------------
    def feed(self, record: dict) -> list[dict]:
        """One record of the DOME reassembler (any kind; only dome_call ones are read):
        the checksum waits it ends."""
        if record.get("kind") != "dome_call":
            return []
        return self._call(record)

    def _call(self, record: dict) -> list[dict]:
        """feed() of a dome_call record. Most calls are no poll and end no run: their
        host's clock moves and, only when a deadline of that host is due, it is swept (the
        heap's first deadline not before the watermark: _sweep would pop nothing)."""
        out: list[dict] = []
        host = record["host"]
        seen = record["end"]
        if seen is None:
            seen = record["start"]
        clocks = self.clocks
        clock = clocks.get(host)
        if clock is None or seen > clock:
            clocks[host] = clock = seen
        if record["command"] == COMMAND:
            self._poll(record, out)
            self._sweep(host, out)
            return out
        heap = self.deadlines.get(host)
        if heap and heap[0][0] < clock - self.allowance_ms:
            self._sweep(host, out)
        return out

    def advance(self, now_ms: int) -> list[dict]:
        """Every head's event time is at least now_ms: runs silent past the timeout end."""
        return advance_clocks(self.clocks, now_ms, self._sweep)

    def finish(self) -> list[dict]:
        """The end of input: every open run, by start. A run whose key was silent for the
        timeout by its head's last call is `timeout`, else `input_end` (unless it ended)."""
        out: list[dict] = []
        for run in sorted(self.open.values(), key=lambda r: (r.start, r.seq)):
            if run.ended:
                outcome = self._answered(run)
            elif self.clocks.get(run.head, run.last_end) >= run.deadline(self.timeout_ms):
                outcome = TIMEOUT
            else:
                outcome = INPUT_END
            self._emit(run, outcome, out)
        self.deadlines.clear()
        return out

    def snapshot(self) -> dict:
        """Everything the stage holds, as plain JSON-able values (from_snapshot goes on as
        a stage that never stopped)."""
        return {"seq": self.seq, "clocks": dict(self.clocks), "stats": self.stats.as_dict(),
                "open": [[getattr(run, name) for name in RUN_STATE] for run in self.open.values()]}

    @classmethod
    def from_snapshot(cls, state: dict, **settings) -> "ChecksumWaits":
        waits = cls(**settings)
        waits.seq = state["seq"]
        waits.clocks.update(state["clocks"])
        for name, value in state["stats"].items():
            setattr(waits.stats, name, value)
        for values in state["open"]:
            run = OpenRun.__new__(OpenRun)
            for name, value in zip(RUN_STATE, values):
                setattr(run, name, value)
            waits.open[run.key] = run
            waits._schedule(run)
        return waits

    def pair(self, records: list[dict]) -> list[dict]:
        """with_checksums(records, self): the stage's part of WithChecksumWaits."""
        return with_checksums(records, self)

    # -- rules ---------------------------------------------------------------------------
    def _poll(self, record: dict, out: list) -> None:
        code = record["http_code"]
        if code is None:
            self.stats.cut_polls += 1
            return
        if record["caller"] is None:
            self.stats.unattributed_polls += 1
            return
        key = (record["host"], record["caller"], record["remote_client"])
        run = self.open.get(key)
        if run is not None and record["start"] > run.deadline(self.timeout_ms):
            self._close(run, out)      # silent for the timeout: whatever comes now is a new wait
            run = None
        if run is None:
            if code != QUEUED:
                self.stats.answers_without_wait += 1
                return
            if len(self.open) >= self.max_open:
                self.stats.evictions += 1
                self._emit(next(iter(self.open.values())), EVICTED, out)
            self.seq += 1
            run = self.open[key] = OpenRun(self.seq, record)
        elif record["start"] - run.last_start < self.poll_interval_ms - CADENCE_SLACK_MS:
            run.overlap = True
        self.stats.polls += 1
        run.polls += 1
        run.last_start = record["start"]
        run.last_end = max(run.last_end, record["end"])
        run.whole = run.whole or bool(record["whole_seconds"])
        run.ended = code != QUEUED
        if run.ended:
            run.endings += 1
            run.code = code
            if not run.overlap:
                self._emit(run, self._answered(run), out)
                return
        self.open.move_to_end(key)
        self._schedule(run)

    def _schedule(self, run: OpenRun) -> None:
        heapq.heappush(self.deadlines.setdefault(run.head, []),
                       (run.deadline(self.timeout_ms), run.seq, run.key))

    def _sweep(self, host: str, out: list) -> None:
        """Runs of the host whose key was silent past the timeout, by the host's watermark."""
        heap = self.deadlines.get(host)
        watermark = self.clocks[host] - self.allowance_ms
        while heap and heap[0][0] < watermark:
            deadline, seq, key = heapq.heappop(heap)
            run = self.open.get(key)
            if run is not None and run.seq == seq and run.deadline(self.timeout_ms) == deadline:
                self._close(run, out)

    def _close(self, run: OpenRun, out: list) -> None:
        self._emit(run, self._answered(run) if run.ended else TIMEOUT, out)

    @staticmethod
    def _answered(run: OpenRun) -> str:
        return DONE if run.code == 200 else FAILED

    def _emit(self, run: OpenRun, outcome: str, out: list) -> None:
        del self.open[run.key]
        self.stats.waits += 1
        self.stats.overlaps += run.overlap
        self.stats.timeouts += outcome == TIMEOUT
        out.append({
            "kind": "dome_checksum", "head": run.head, "caller": run.caller,
            "remote_client": run.client, "start": run.start, "end": run.last_end,
            "wait": run.last_end - run.start, "polls": run.polls, "outcome": outcome,
            "http_code": run.code if outcome in (DONE, FAILED) else None,
            "endings": run.endings, "overlap": int(run.overlap), "whole_seconds": int(run.whole),
        })


def with_checksums(records: list[dict], waits: ChecksumWaits) -> list[dict]:
    """The DOME reassembler's records, each followed by the checksum waits it ends: the
    one call a driver needs where it takes records out of the reassembler."""
    out: list[dict] = []
    call = waits._call
    for record in records:
        out.append(record)
        if record["kind"] == "dome_call":   # feed() reads no other kind
            ended = call(record)
            if ended:
                out += ended
    return out


class WithChecksumWaits:
    """A DOME reassembler of either engine, its records each followed by the checksum
    waits they end: where a driver makes its reassembler, it wraps it,

        dome = WithChecksumWaits(engines.new_dome_reassembler(engine, **settings))

    and calls feed, advance and finish as on the reassembler itself.

    The compiled reassembler runs the stage itself (its `paired_checksums`, given the
    stage's settings and state): `waits` is then its view of the stage inside, whose pair,
    advance and finish have nothing left to do."""

    def __init__(self, reassembler, waits: ChecksumWaits | None = None):
        self.reassembler = reassembler
        waits = waits if waits is not None else ChecksumWaits()
        paired = getattr(reassembler, "paired_checksums", None)
        self.waits = waits if paired is None else paired(waits)
        if paired is not None:
            # The compiled reassembler's feed_chunk (parsers/compiled_dome.py) as it is: one
            # stream's lines with no Python per line, its records already each followed by
            # the waits they end, as the stage runs inside it (no Python call between the
            # loop and it, once per chunk of a DOME replay's turns: issue 30).
            self.feed_chunk = reassembler.feed_chunk

    @property
    def stats(self):
        """The reassembler's counters (the checksum stage's: `checksum_stats`)."""
        return self.reassembler.stats

    @property
    def checksum_stats(self) -> ChecksumStats:
        return self.waits.stats

    def feed(self, event) -> list[dict]:
        return self.waits.pair(self.reassembler.feed(event))

    def advance(self, now_ms: int) -> list[dict]:
        return self.waits.pair(self.reassembler.advance(now_ms)) + self.waits.advance(now_ms)

    def finish(self) -> list[dict]:
        return self.waits.pair(self.reassembler.finish()) + self.waits.finish()

    def snapshot(self) -> dict:
        return {"reassembler": self.reassembler.snapshot(), "checksums": self.waits.snapshot()}

    def track_changes(self) -> None:
        self.reassembler.track_changes()

    def take_changes(self) -> dict:
        """The reassembler's changes since the last take, and the checksum stage whole
        (bounded by its cap on open runs)."""
        return {"reassembler": self.reassembler.take_changes(), "checksums": self.waits.snapshot()}

    @classmethod
    def from_snapshot(cls, state: dict, reassembler_type, checksum_settings: dict | None = None,
                      **settings) -> "WithChecksumWaits":
        """Rebuilt from snapshot(): the reassembler by its own from_snapshot(state, **settings)."""
        return cls(reassembler_type.from_snapshot(state["reassembler"], **settings),
                   ChecksumWaits.from_snapshot(state["checksums"], **(checksum_settings or {})))
