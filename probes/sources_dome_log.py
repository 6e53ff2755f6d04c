"""Probe source: the last window of a DOME site's logs (check_dpm --dome --log, given once
per node: the head's and each disk node's dmlite log), read with the pipeline every
command uses (parsers/pipeline.py: the DOME source, its dating, its DomeReassembler),
the nodes side by side in event time as replay reads them (parsers/side_by_side.py), so
that a put on the head meets its putdone on the disk node. Never a parser of its own.

The window ends at the latest event time of the logs. Only their tails are read
(probes/tail.py): each file's last lines settle its profile and its newest stamp (each
stamp read by the profile's own line parser, dated as the pipeline dates the file: its
name, or its modification time, or --last-line-year); then each is read backwards until
a line `window + lookback` older than the site's newest stamp is passed (the file whose
scan is at the latest time first: the scans stay side by side), then all forwards
through one pipeline.

Counted: calls and puts whose end falls in the window. What the end of the logs forces
out is in progress and left out (calls still open, puts with no answered putdone), but a
put whose putdone call was answered (the head's, or the disk node's relaying it) is over,
its status told by its lines: counted. Without a disk node's log a put never sees the
disk's `Exiting` line, which ends it (docs/dome.md, "When a joined put ends"), so it is
counted at its head's putdone answer, and the status line says that the disk side was
not read; without the head's log there is no put at all, which it says too. The
filesystems are the state the lines read (window and lookback) leave: each one's latest
capacity line, and the head's latest enable/disable line for it.

A call's duration counts only from sub-second stamps (docs/dome.md, section 3): under
whole-second stamps `dome_call` quantiles have no value, and the status line says why.

Under -t (`deadline`), as the legacy daemons' log source (probes/sources_log.py): the
backward scan may take SCAN_SHARE of the time left (it stops where it got); the forwards
reading starts with the last DOME_FIRST_SEGMENT bytes of the logs together (each log the
same share of its span, so the segments cover about the same time), then reads again
from as far back as the pace measured on them lets it finish in time. When time runs
out, the last segment read whole is the answer; if not even the first one could be, the
answer is on the lines it did read. Either way Snapshot.partial says what was read.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace

from dpmstream.parsers import dome_records
from dpmstream.parsers.clock import ClockError, EventClock, load_zone, stream_reference
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.dome_profiles import DomeProfile, detect_dome_profile, resolve_any_profile
from dpmstream.parsers.dome_puts import TIMEOUT
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.profiles import ProfileError
from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.parsers.side_by_side import ChunkLane, feed_side_by_side
from dpmstream.probes import tail
from dpmstream.probes.measurement import Snapshot, SourceError, Wanted
from dpmstream.probes.sources_log import PACE_SAFETY, SCAN_SHARE, minutes_text, opened_log

_MARGIN_S = 120  # as the legacy log source: lines of two threads a little out of order
_LAST_LINES = 200  # the profile is detected from the last lines, the newest stamp among them
# DOME lines go through Python one by one (a compiled parse, then a feed): a smaller
# block than the legacy source's keeps the reading within reach of its deadline, and the
# first segment read under -t (all logs together) smaller.
BLOCK = 256 << 10
DOME_FIRST_SEGMENT = 1 << 20


@dataclass
class _NodeLog:
    """One --log file: opened, its tail's bounds, what its last lines settle, and where
    its window's lines start (`start`; `end` is its last whole line's end)."""

    path: str
    fh: object
    end: int
    mtime_ms: int
    stats: tail.TailStats
    profile: DomeProfile | None = None
    stamp_of: object = None
    newest: int = -1
    start: int = 0
    blocks: list = field(default_factory=list)  # read backwards while settling, not yet scanned
    scan: object = None       # its backward scan (tail.blocks_backwards), resumed
    earliest: float = float("inf")  # the earliest stamp its scan has passed

    def next_block(self):
        if self.blocks:
            return self.blocks.pop(0)
        return next(self.scan, None)


@dataclass
class _Read:
    """One forwards reading of the logs: its snapshot, lines and bytes read, and whether
    the deadline cut it short."""

    snap: Snapshot
    lines: int
    bytes: int
    first_ms: int | None   # the latest of the logs' first stamps read: all nodes from there
    cut: bool
    stats: list            # each log's TailStats of this reading


class DomeLogSource:
    def __init__(self, paths: list[str] | str, window_s: float, *, lookback_s: float,
                 host: str | None = None, profile: str | None = None, tz: str | None = None,
                 year: int | None = None, timeout_s: float = 3600.0,
                 deadline: float | None = None, max_line: int = tail.MAX_LINE) -> None:
        self.given = [paths] if isinstance(paths, str) else list(paths)
        self.paths = list(self.given)  # the files, once the patterns are expanded (fetch)
        self.window_s = window_s
        self.lookback_s = lookback_s
        self.host = re.compile(host) if host else None
        self.profile = profile
        self.tz = tz
        self.year = year
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.max_line = max_line
        self.stage = "opening"
        self.engine: str | None = None  # the DOME engine that read the window (-v)
        self.read: list[tuple[str, tail.TailStats]] = []  # per log, what the answer read

    @property
    def path(self) -> str:
        return ", ".join(self.paths)

    def progress(self) -> str:
        return f"{self.stage} {self.path}"

    def describe_reading(self) -> list[str]:
        """-v: what each log's reading the answer is measured on covered."""
        return [f"read {st.lines_read} lines of {path} from byte {st.start} (of {st.size}); "
                f"{st.long_lines} lines over {self.max_line // 1024} KiB skipped; "
                f"{self.engine} DOME engine" for path, st in self.read]

    def fetch(self, wanted: Wanted) -> Snapshot:
        self.paths = log_paths(self.given)
        try:
            with ExitStack() as stack:
                logs = [self._open(path, stack) for path in self.paths]
                return self._measure(logs, wanted)
        except tail.DeadlineExceeded as exc:
            raise SourceError(f"timed out: {exc} ({self.progress()})") from None
        except OSError as exc:
            raise SourceError(f"cannot read {self.path}: {exc.strerror or exc}") from None

    def _open(self, path: str, stack: ExitStack) -> _NodeLog:
        stats = tail.TailStats()
        try:
            fh, st, end = stack.enter_context(opened_log(path, stats, self.deadline))
        except tail.DeadlineExceeded as exc:
            raise SourceError(f"timed out: {exc} of {path}") from None
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
        log = _NodeLog(path, fh, end, int(st.st_mtime * 1000), stats)
        log.scan = tail.blocks_backwards(fh, end, stats, deadline=self.deadline,
                                         max_line=self.max_line, block=BLOCK)
        return log

    def _measure(self, logs: list[_NodeLog], wanted: Wanted) -> Snapshot:
        scan_deadline = None if self.deadline is None else \
            time.monotonic() + SCAN_SHARE * max(0.0, self.deadline - time.monotonic())
        self.stage = "reading the last lines of"
        for log in logs:
            self._settle(log)
        newest = max(log.newest for log in logs)
        self.stage = "looking for the window's start in"
        whole = self._find_starts(logs, newest - int((self.window_s + self.lookback_s
                                                      + _MARGIN_S) * 1000), scan_deadline)
        self.stage = "reading the window of"
        read, fraction = self._read_segments(logs, wanted)
        snap = read.snap
        self.read = [(log.path, read.stats[i]) for i, log in enumerate(logs)]
        # "is it fresh now?": the wall clock, against the newest of the logs' last lines
        # (read whatever -t cut: a read cut short may not have reached them)
        snap.age_s = time.time() - newest / 1000.0
        snap.lines_read = read.lines
        if read.first_ms is not None:
            snap.read_s = max(0.0, (snap.end_ms - read.first_ms) / 1000.0)
        if read.cut or fraction < 1 or not whole:
            size = sum(log.stats.size for log in logs)
            span = "part of " if snap.read_s is None else f"the last {minutes_text(snap.read_s)} of "
            logs_word, its = ("the log", "its") if len(logs) == 1 else (f"the {len(logs)} logs", "their")
            cut = " up to the lines read when time ran out" if read.cut else ""
            snap.partial = (f"partial: read only {span}{logs_word}{cut}, {read.lines} lines, "
                            f"{tail.mib(read.bytes)} of {its} {tail.mib(size)}, within -t")
        return snap

    # -- the last lines: profile and newest stamp ------------------------------------------
    def _settle(self, log: _NodeLog) -> None:
        last: list[str] = []  # newest first
        while len(last) < _LAST_LINES:
            blk = next(log.scan, None)
            if blk is None:
                break
            log.blocks.append(blk)
            last += [line.decode("utf-8", "replace") for line in reversed(blk.lines)
                     if not isinstance(line, int)][:_LAST_LINES - len(last)]
        profile = self._given_profile()
        if profile is None:
            profile = detect_dome_profile([line for line in last if line.strip()])
            if profile is None:
                raise SourceError(f"{log.path}: no DOME line in its last {_LAST_LINES} lines "
                                  f"that a bundled DOME profile recognises (give one with "
                                  f"--profile)")
        zone_name = self.tz or profile.timezone
        try:
            zone = load_zone(zone_name)
        except ClockError as exc:
            raise SourceError(str(exc)) from None
        # --last-line-year: every line of the tail in that year (a tail across New Year
        # is dated a year apart at its start: the window's start is then found late)
        ref = (self.year, 12) if self.year is not None else \
            stream_reference(log.path, log.mtime_ms, zone)

        def stamp_of(line: bytes | str) -> int | None:
            # a parser of its own per line: reading backwards, no year rollover to follow
            parser = DomeLineParser(profile, EventClock(zone_name, year=None, ref=ref,
                                                        zone_given=bool(self.tz)))
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            ev = parser.parse(text)
            return None if ev is None else ev.ts

        stamps = [t for t in map(stamp_of, last) if t is not None]
        if not stamps:
            raise SourceError(f"{log.path}: no DOME line of profile {profile.name} in its "
                              f"last {_LAST_LINES} lines")
        log.profile, log.stamp_of, log.newest = profile, stamp_of, max(stamps)

    def _given_profile(self) -> DomeProfile | None:
        if not self.profile:
            return None
        try:
            profile = resolve_any_profile(self.profile)
        except ProfileError as exc:
            raise SourceError(str(exc)) from None
        if not isinstance(profile, DomeProfile):
            raise SourceError(f"--profile {self.profile}: a DPM daemon's profile, not a DOME "
                              f"one (--dome reads DOME logs)")
        return profile

    # -- where the window starts -----------------------------------------------------------
    def _find_starts(self, logs: list[_NodeLog], since_ms: int,
                     scan_deadline: float | None) -> bool:
        """Each log's `start`: its first line stamped at or before `since_ms` (0 if none
        is). The scan whose earliest stamp is the latest goes on first, so that, should
        `scan_deadline` stop them, every log's scan reached about the same time: each
        then starts where its scan got. Whether every scan got to its start."""
        for log in logs:
            log.start = log.end
        active = list(logs)
        while active:
            log = max(active, key=lambda lg: lg.earliest)
            blk = log.next_block()
            if blk is None:
                log.start = 0
                active.remove(log)
                continue
            stamps = (log.stamp_of(line) for line in blk.lines if not isinstance(line, int))
            earliest = next((t for t in stamps if t is not None), None)
            log.start = blk.offset
            if earliest is not None:
                log.earliest = earliest
                if earliest <= since_ms:
                    log.start = next(offset for offset, line in blk.backwards()
                                     if (t := log.stamp_of(line)) is not None and t <= since_ms)
                    active.remove(log)
                    continue
            if active and scan_deadline is not None and time.monotonic() >= scan_deadline:
                return False
        return True

    # -- the window, through the pipeline ------------------------------------------------
    def _read_segments(self, logs: list[_NodeLog], wanted: Wanted) -> tuple[_Read, float]:
        """The window read forwards, its end first under -t: a segment of the logs' last
        lines, then, at the pace it was read, as much more as the time left allows (the
        whole span if it fits). (the reading answered on, the share of each log's span
        it covers)."""
        total = sum(log.end - log.start for log in logs)
        fraction = 1.0 if self.deadline is None or total <= DOME_FIRST_SEGMENT \
            else DOME_FIRST_SEGMENT / total
        best = None
        while True:
            began = time.monotonic()
            read = self._read(logs, fraction, wanted)
            if read.cut:
                if best is None:
                    best = (read, fraction)
                break
            best = (read, fraction)
            if fraction >= 1:
                break
            took = max(time.monotonic() - began, 1e-3)
            affordable = read.bytes / took * (self.deadline - time.monotonic()) * PACE_SAFETY
            if affordable < total and affordable < 1.5 * read.bytes:
                break  # no time to read meaningfully more
            fraction = min(1.0, affordable / total)
        return best

    def _read(self, logs: list[_NodeLog], fraction: float, wanted: Wanted) -> _Read:
        """The lines of `fraction` of each log's span to its end, the logs side by side in
        event time through one pipeline."""
        counted = _Counted(self.host)
        pipeline = Pipeline(lambda record: None, ReassemblySettings(timeout_s=self.timeout_s),
                            on_dome_record=counted.add)
        lanes, first = [], []
        for log in logs:
            start = log.start if fraction >= 1 else \
                tail.next_line_start(log.fh, log.end - int(fraction * (log.end - log.start)),
                                     log.end)
            src = pipeline.source(log.path, host=socket.gethostname(), path=log.path,
                                  profile=log.profile, tz=self.tz, year=self.year,
                                  year_hint_ms=log.mtime_ms)
            log.stats.start, log.stats.lines_read, log.stats.long_lines = start, 0, 0
            blocks = tail.blocks_forwards(log.fh, start, log.end, log.stats,
                                          deadline=self.deadline, max_line=self.max_line,
                                          block=BLOCK)
            lanes.append(ChunkLane(src, _noting_first_stamp(blocks, log.stamp_of, first)))
        cut = False
        try:
            feed_side_by_side(lanes, lambda lane, limit: lane.feed_until(limit))
        except tail.DeadlineExceeded:
            cut = True
        counted.at_the_end = True
        pipeline.finish()
        end_ms = max((t for src in pipeline.sources.values() for t in src.latest_by_host.values()),
                     default=-1)
        if end_ms < 0:
            if cut:
                raise tail.DeadlineExceeded("no DOME line parsed yet")
            raise SourceError(f"{self.path}: no line of the window could be parsed "
                              f"(profile {logs[0].profile.name}; --profile to choose another)")
        snap = self._snapshot(counted, end_ms, wanted, cut)
        snap.long_lines = sum(log.stats.long_lines for log in logs)
        self.engine = pipeline.dome_engine
        return _Read(snap, sum(log.stats.lines_read for log in logs),
                     sum(log.end - log.stats.start for log in logs),
                     max(first) if len(first) == len(logs) else None, cut,
                     [replace(log.stats) for log in logs])

    def _snapshot(self, counted: "_Counted", end_ms: int, wanted: Wanted, cut: bool) -> Snapshot:
        snap = Snapshot(window_s=self.window_s,
                        source=", ".join(os.path.basename(p) for p in self.paths),
                        end_ms=end_ms, dome=True)
        begin_ms = end_ms - int(self.window_s * 1000)
        durations: list[int] = []
        whole = 0
        roles = counted.roles
        for entry in counted.entries:
            if not begin_ms < entry[0] <= end_ms:
                continue
            if len(entry) == 4:  # a call
                _, cls, whole_seconds, duration = entry
                snap.calls_by_class[cls] = snap.calls_by_class.get(cls, 0) + 1
                if whole_seconds:
                    whole += 1
                elif duration is not None:
                    durations.append(duration)
            else:  # a put
                snap.by_status[entry[1]] = snap.by_status.get(entry[1], 0) + 1
        snap.calls = sum(snap.calls_by_class.values())
        snap.whole_seconds = whole > 0 and not durations
        if cut:
            pass  # a log may have had no turn before time ran out: the partial note says so
        elif "head" in roles and "disk" not in roles:
            snap.unseen = ("no disk node's log read: puts counted at the head's putdone "
                           "answer, their disk side not seen")
        elif "disk" in roles and "head" not in roles:
            snap.unseen = "no head node's log read: puts not seen"
        durations.sort()
        for q in wanted.dome_call_quantiles:
            value = nearest_rank(durations, q)
            snap.dome_call[q] = None if value is None else value / 1000.0
        if counted.capacity or counted.fs_state:
            snap.fs_disabled = sum(1 for event in counted.fs_state.values() if event == "disabled")
        sizes = [size for size in counted.capacity.values() if size is not None]
        if sizes:
            snap.fs_free_bytes = float(min(free for free, _ in sizes))
            ratios = [free / phys for free, phys in sizes if phys]
            snap.fs_free_ratio = min(ratios) if ratios else None
        return snap


def log_paths(given: list[str]) -> list[str]:
    """The files --log names: each as given, or, for a pattern that names no file itself
    (quoted from the shell, as Nagios passes it), the files it matches, sorted; once each."""
    paths: list[str] = []
    for text in given:
        if any(c in text for c in "*?[") and not os.path.lexists(text):
            matched = sorted(glob.glob(text))
            if not matched:
                raise SourceError(f"--log {text}: no file matches")
        else:
            matched = [text]
        paths += [path for path in matched if path not in paths]
    return paths


class _Counted:
    """What the window's answer reads of each DOME record, taken as the pipeline emits it:
    a call's or a put's few values in a tuple (not the record's dict: a day of a
    busy site is hundreds of thousands of calls), each filesystem's latest state and
    capacity. Records of another host than --host's are left out; once `at_the_end` is
    set (the end of the logs forcing out what is open), only those over all the same."""

    def __init__(self, host: re.Pattern | None) -> None:
        self.host = host
        self.at_the_end = False
        self.roles: set = set()  # the node roles whose calls were read (head, disk)
        # In the order emitted, plain tuples (the cheapest to make): a call's (end or cut
        # call's start ms, code class 2xx..5xx or none, stamps in whole seconds (no
        # duration measured), duration ms or None), a put's (end ms, status).
        self.entries: list[tuple] = []
        self.capacity: dict = {}  # (host, fs) -> (free, phys) of its latest line, None without free
        self.fs_state: dict = {}  # (server, fs) -> its latest event

    def add(self, rec: dict) -> None:
        kind = rec["kind"]
        if kind == "dome_call":
            self.roles.add(rec.get("role"))
        if self.at_the_end and not _over_at_the_end(rec):
            return
        # A capacity or filesystem line is a state whenever it comes.
        if kind == "dome_capacity":
            free = rec.get("free")
            self.capacity[(rec["host"], rec["fs"])] = None if free is None else (free, rec["phys"])
            return
        if kind == "dome_fs_event":
            self.fs_state[(rec["server"], rec["fs"])] = rec["event"]
            return
        ended = dome_records.event_ms(rec)  # its end; a cut call's start
        if ended is None:
            return
        host = rec.get("host" if kind == "dome_call" else "head")
        if self.host and not self.host.fullmatch(str(host)):
            return
        if kind == "dome_call":
            self.entries.append((ended, dome_records.code_class(rec.get("http_code")),
                                 bool(rec.get("whole_seconds")), rec.get("duration")))
        elif kind == "dome_put":
            self.entries.append((ended, rec["status"]))


def _over_at_the_end(rec: dict) -> bool:
    """Whether a record the end of the logs forced out is over all the same: a capacity
    or filesystem line (a state), a put whose putdone call was answered (its status told
    by its lines) or that had timed out (no putdone within --request-timeout)."""
    kind = rec["kind"]
    if kind in ("dome_capacity", "dome_fs_event"):
        return True
    return kind == "dome_put" and (rec["putdone_code"] is not None or rec["end_reason"] == TIMEOUT)


def _noting_first_stamp(blocks, stamp_of, first: list):
    """The chunks of lines as they are, the first stamp among them appended to `first`."""
    noted = False
    for lines in blocks:
        if not noted:
            t = next((t for t in map(stamp_of, lines[:_LAST_LINES]) if t is not None), None)
            if t is not None:
                first.append(t)
                noted = True
        yield lines
