"""Probe source: the last window of a DOME node's log (check_dpm --dome --log), read with
the pipeline every command uses (parsers/pipeline.py: the DOME source, its dating, its
DomeReassembler), never a parser of its own.

The window ends at the latest event time in the file. Only the tail is read
(probes/tail.py): backwards from the end until a line `window + lookback` older than the
newest stamp of the last lines is passed (each stamp read by the profile's own line
parser, dated as the pipeline dates the file: its name, or its modification time, or
--last-line-year), then forwards through the pipeline. Counted: calls and puts whose end
falls in the window; those the end of the file forces out (calls and puts still open)
are in progress, not cut or incomplete, and are left out. The filesystems are the state
the lines read (window and lookback) leave: each one's latest capacity line, and the
head's latest enable/disable line for it.

A call's duration counts only from sub-second stamps (docs/dome.md, section 3): under
whole-second stamps `dome_call` quantiles have no value, and the status line says why.

Under -t, the whole of window and lookback must be read by the deadline: a read cut short
is a time-out (UNKNOWN), not a partial answer (unlike the legacy daemons' log source).
"""

from __future__ import annotations

import os
import re
import socket
import time

from dpmstream.parsers import dome_records
from dpmstream.parsers.clock import ClockError, EventClock, load_zone, stream_reference
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.dome_profiles import DomeProfile, detect_dome_profile, resolve_any_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.profiles import ProfileError
from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.probes import tail
from dpmstream.probes.measurement import Snapshot, SourceError, Wanted
from dpmstream.probes.sources_log import measure_log

_MARGIN_S = 120  # as the legacy log source: lines of two threads a little out of order
_LAST_LINES = 200  # the profile is detected from the last lines, the newest stamp among them


class DomeLogSource:
    def __init__(self, path: str, window_s: float, *, lookback_s: float,
                 host: str | None = None, profile: str | None = None, tz: str | None = None,
                 year: int | None = None, timeout_s: float = 3600.0,
                 deadline: float | None = None, max_line: int = tail.MAX_LINE) -> None:
        self.path = path
        self.window_s = window_s
        self.lookback_s = lookback_s
        self.host = re.compile(host) if host else None
        self.profile = profile
        self.tz = tz
        self.year = year
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.max_line = max_line
        self.tail = tail.TailStats()
        self.stage = "opening"

    def progress(self) -> str:
        return f"{self.stage} {self.path}"

    def fetch(self, wanted: Wanted) -> Snapshot:
        return measure_log(self.path, self.tail, self.deadline,
                           lambda fh, st, end: self._fetch(fh, st, end, wanted))

    def _fetch(self, fh, st, end: int, wanted: Wanted) -> Snapshot:
        self.stage = "looking for the window's start in"
        start, profile = self._find_start(fh, end, int(st.st_mtime * 1000))
        self.stage = "reading the window of"
        records, forced, end_ms = self._read(fh, start, end, profile, int(st.st_mtime * 1000))
        snap = self._snapshot(records, forced, end_ms, wanted)
        snap.age_s = time.time() - end_ms / 1000.0  # "is it fresh now?": the wall clock
        snap.long_lines = self.tail.long_lines
        return snap

    # -- where the window starts -----------------------------------------------------------
    def _find_start(self, fh, end: int, mtime_ms: int) -> tuple[int, DomeProfile]:
        need_ms = int((self.window_s + self.lookback_s + _MARGIN_S) * 1000)
        last: list[str] = []
        profile = self._given_profile()
        stamp_of = newest = None
        for blk in tail.blocks_backwards(fh, end, self.tail, deadline=self.deadline,
                                         max_line=self.max_line):
            if stamp_of is None:
                last += [line.decode("utf-8", "replace") for line in reversed(blk.lines)
                         if not isinstance(line, int)][:_LAST_LINES - len(last)]
                if len(last) < _LAST_LINES:
                    continue
                profile, stamp_of, newest = self._settle(last, profile, mtime_ms)
            earliest = next((t for t in map(stamp_of, (line for line in blk.lines
                                                       if not isinstance(line, int)))
                             if t is not None), None)
            if earliest is not None and newest - earliest >= need_ms:
                for offset, line in blk.backwards():
                    t = stamp_of(line)
                    if t is not None and newest - t >= need_ms:
                        return offset, profile
        if stamp_of is None:  # a file shorter than the lines to detect from
            profile, _, _ = self._settle(last, profile, mtime_ms)
        return 0, profile

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

    def _settle(self, last: list[str], profile: DomeProfile | None, mtime_ms: int):
        """(profile, stamp reader, newest stamp) from the file's last lines (newest first)."""
        if profile is None:
            profile = detect_dome_profile([line for line in last if line.strip()])
            if profile is None:
                raise SourceError(f"{self.path}: no DOME line in its last {_LAST_LINES} lines "
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
            stream_reference(self.path, mtime_ms, zone)

        def stamp_of(line: bytes | str) -> int | None:
            # a parser of its own per line: reading backwards, no year rollover to follow
            parser = DomeLineParser(profile, EventClock(zone_name, year=None, ref=ref,
                                                        zone_given=bool(self.tz)))
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            ev = parser.parse(text)
            return None if ev is None else ev.ts

        stamps = [t for t in map(stamp_of, last) if t is not None]
        if not stamps:
            raise SourceError(f"{self.path}: no DOME line of profile {profile.name} in its "
                              f"last {_LAST_LINES} lines")
        return profile, stamp_of, max(stamps)

    # -- the window, through the pipeline ------------------------------------------------
    def _read(self, fh, start: int, end: int, profile: DomeProfile, mtime_ms: int):
        """(records ended while reading, records the end of the file forced out, the
        latest event time)."""
        records: list[dict] = []
        pipeline = Pipeline(lambda record: None, ReassemblySettings(timeout_s=self.timeout_s),
                            on_dome_record=records.append)
        src = pipeline.source(self.path, host=socket.gethostname(), path=self.path,
                              profile=profile, tz=self.tz, year=self.year, year_hint_ms=mtime_ms)
        self.tail.start = start
        for lines in tail.blocks_forwards(fh, start, end, self.tail, deadline=self.deadline,
                                          max_line=self.max_line):
            src.feed_lines(lines)
        done = len(records)
        pipeline.finish()
        end_ms = max(src.latest_by_host.values(), default=-1)
        if end_ms < 0:
            raise SourceError(f"{self.path}: no line of its window could be parsed "
                              f"(profile {profile.name}; --profile to choose another)")
        return records[:done], records[done:], end_ms

    def _snapshot(self, records: list[dict], forced: list[dict], end_ms: int,
                  wanted: Wanted) -> Snapshot:
        snap = Snapshot(window_s=self.window_s, source=os.path.basename(self.path),
                        end_ms=end_ms, dome=True)
        begin_ms = end_ms - int(self.window_s * 1000)
        durations: list[int] = []
        whole = 0
        capacity: dict = {}
        fs_state: dict = {}
        # what the end of the file forces out is in progress, but a capacity or filesystem
        # line is a state whenever it comes
        for rec in records + [r for r in forced if r["kind"] in ("dome_capacity", "dome_fs_event")]:
            kind = rec["kind"]
            if kind == "dome_capacity":
                capacity[(rec["host"], rec["fs"])] = rec
                continue
            if kind == "dome_fs_event":
                fs_state[(rec["server"], rec["fs"])] = rec["event"]
                continue
            ended = dome_records.event_ms(rec)  # its end; a cut call's start
            if ended is None or not begin_ms < ended <= end_ms:
                continue
            host = rec.get("host" if kind == "dome_call" else "head")
            if self.host and not self.host.fullmatch(str(host)):
                continue
            if kind == "dome_call":
                cls = dome_records.code_class(rec.get("http_code"))
                snap.calls_by_class[cls] = snap.calls_by_class.get(cls, 0) + 1
                if rec.get("whole_seconds"):
                    whole += 1
                elif rec.get("duration") is not None:
                    durations.append(rec["duration"])
            elif kind == "dome_put":
                snap.by_status[rec["status"]] = snap.by_status.get(rec["status"], 0) + 1
        snap.calls = sum(snap.calls_by_class.values())
        snap.whole_seconds = whole > 0 and not durations
        durations.sort()
        for q in wanted.dome_call_quantiles:
            value = nearest_rank(durations, q)
            snap.dome_call[q] = None if value is None else value / 1000.0
        known = set(capacity) | set(fs_state)
        if known:
            snap.fs_disabled = sum(1 for event in fs_state.values() if event == "disabled")
        sizes = [(r["free"], r["phys"]) for r in capacity.values() if r.get("free") is not None]
        if sizes:
            snap.fs_free_bytes = float(min(free for free, _ in sizes))
            ratios = [free / phys for free, phys in sizes if phys]
            snap.fs_free_ratio = min(ratios) if ratios else None
        return snap
