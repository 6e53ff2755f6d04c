"""Probe source: the last window of a DPM, DPNS or SRM log, read directly with the core.

For sites without the pipeline. The window ends at the latest event time in the file
(never the wall clock) and covers `window_s` before it. Only the tail is read: a binary
search over byte offsets finds the line `window + lookback` before the last one (the
lookback lets requests that end in the window be reassembled from their first line).
The lines then go through the core (Pipeline) as in a replay, so year and month
boundaries, daemon restarts and thread reuse are handled exactly as everywhere else.

Counted: requests and calls whose `ended` falls in the window. Requests still open when
the file ends are in progress, not incomplete: those are left out (a get already
answered SUCCESS counts as the success it is); so are calls still open, and orphan
requests whose first line lies before what was read.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone

from dpmstream.probes.measurement import Snapshot, SourceError, Wanted, quantile
from dpmstream.parsers.records import PHASES

_STAMP = re.compile(rb"(?:^|\s)(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)")
_READ_ALL_BELOW = 1 << 20  # small files are read whole
_PROBE = 64 * 1024  # bytes read at each probed offset
_MARGIN_S = 3600 + 120  # a repeated DST hour and out-of-order lines


def _stamp(line: bytes):
    """(month, day, hour, minute, second) of a log line (native or rsyslog-wrapped)."""
    m = _STAMP.search(line[:160])
    return tuple(int(g) for g in m.groups()) if m else None


def _seconds_before(stamp, last) -> float:
    """How long before `last` the stamp lies, both without a year: a later month than the
    last line's is the year before. Only differences matter, so a fixed leap year is used."""
    year = 2000 if stamp[:2] <= last[:2] else 1999
    try:
        t = datetime(year, *stamp)
    except ValueError:  # 02/29 of the year before: very old anyway
        return float("inf")
    return (datetime(2000, *last) - t).total_seconds()


def _first_stamp_after(fh, offset: int):
    """The first stamped whole line at or after `offset`: (line start, stamp) or None."""
    fh.seek(offset)
    chunk = fh.read(_PROBE)
    pos = 0
    if offset > 0:  # the first line is cut: skip to the next one
        nl = chunk.find(b"\n")
        if nl < 0:
            return None
        pos = nl + 1
    while pos < len(chunk):
        nl = chunk.find(b"\n", pos)
        line = chunk[pos:] if nl < 0 else chunk[pos:nl]
        st = _stamp(line)
        if st:
            return offset + pos, st
        if nl < 0:
            return None
        pos = nl + 1
    return None


def _last_stamp(fh, size: int):
    start = max(0, size - _PROBE)
    fh.seek(start)
    lines = fh.read().splitlines()
    if start > 0:
        lines = lines[1:]
    stamps = [s for s in (_stamp(line) for line in lines[-200:]) if s]
    # lines of different threads may be a little out of order: the latest of the tail
    return max(stamps, key=lambda s: -_seconds_before(s, stamps[-1])) if stamps else None


def find_start(fh, size: int, seconds: float) -> tuple[int, tuple | None]:
    """Byte offset of a line at least `seconds` before the file's last stamp (0 when the
    file is shorter than that), and the last stamp."""
    last = _last_stamp(fh, size)
    if last is None or size <= _READ_ALL_BELOW:
        return 0, last
    lo, hi = 0, size  # invariant: the line found from lo is old enough (or lo == 0)
    while hi - lo > _PROBE:
        mid = (lo + hi) // 2
        found = _first_stamp_after(fh, mid)
        if found is not None and _seconds_before(found[1], last) >= seconds:
            lo = found[0]
        else:
            hi = mid
    found = _first_stamp_after(fh, lo) if lo else None
    return (found[0] if found else lo), last


class LogSource:
    def __init__(self, path: str, window_s: float, *, lookback_s: float = 1800,
                 host: str | None = None, op: str | None = None, profile: str | None = None,
                 tz: str | None = None, year: int | None = None, ns_daemons: str = "dpns|lfc",
                 timeout_s: float = 3600) -> None:
        self.path = path
        self.window_s = window_s
        self.lookback_s = lookback_s
        # Native lines carry no host: they get --host itself (else "localhost"); rsyslog
        # lines carry theirs, and --host (a regex) then selects among them.
        self.host_name = host or "localhost"
        self.host = re.compile(host) if host else None
        self.op = re.compile(op) if op else None
        self.profile = profile
        self.tz = tz
        self.year = year
        self.ns_daemons = re.compile(ns_daemons)
        self.timeout_s = timeout_s
        self.read_from = 0  # for -v and tests
        self.lines_read = 0

    def _pipeline(self, on_record):
        from dpmstream.parsers.profiles import ProfileError, resolve_profile
        from dpmstream.streams.pipeline import Pipeline

        profile = None
        if self.profile:
            try:
                profile = resolve_profile(self.profile)
            except ProfileError as exc:
                raise SourceError(str(exc)) from None
        return Pipeline(on_record, timeout_s=self.timeout_s), profile

    def fetch(self, wanted: Wanted) -> Snapshot:
        try:
            fh = open(self.path, "rb")
        except OSError as exc:
            raise SourceError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        with fh:
            st = os.fstat(fh.fileno())
            start, last = find_start(fh, st.st_size, self.window_s + self.lookback_s + _MARGIN_S)
            if last is None:
                raise SourceError(f"{self.path}: no DPM log line with a time stamp in its last "
                                  f"{_PROBE // 1024} KiB")
            records, finishing = [], []
            pipeline, profile = self._pipeline(lambda r: (finishing if done else records).append(r))
            done = False
            src = pipeline.source(self.path, host=self.host_name, path=self.path, profile=profile,
                                  tz=self.tz, year=None, year_hint_ms=self._year_hint(last, st.st_mtime))
            fh.seek(start)
            self.read_from = start
            for line in fh:
                src.feed(line)
                self.lines_read += 1
            done = True
            pipeline.finish()
        records += [r for r in finishing if _finished_at_end(r)]
        latest = [ms for ms in pipeline.stats.latest_event_ms.values() if ms is not None]
        if not latest:
            raise SourceError(f"{self.path}: no line of it could be parsed "
                              f"(profile {self.profile or 'detection'} failed?)")
        return self._snapshot(records, max(latest), wanted)

    def _year_hint(self, last_stamp, mtime: float) -> int:
        """The time dating the last line: with --year, that year at the last line's month
        and day; else the file's modification time (the core's rule for files)."""
        if self.year is None:
            return int(mtime * 1000)
        month, day = last_stamp[:2]
        try:
            when = datetime(self.year, month, day, 12, tzinfo=timezone.utc)
        except ValueError:
            raise SourceError(f"--year {self.year}: the last line's date {month:02d}/{day:02d} "
                              f"does not exist in that year") from None
        return int(when.timestamp() * 1000)

    def _snapshot(self, records: list[dict], end_ms: int, wanted: Wanted) -> Snapshot:
        snap = Snapshot(window_s=self.window_s, source=os.path.basename(self.path), end_ms=end_ms)
        begin_ms = end_ms - int(self.window_s * 1000)
        phase_values: dict[str, list[float]] = {phase: [] for _, phase in PHASES}
        ns_values: dict[str, list[float]] = {op: [] for op in wanted.ns}
        for rec in records:
            ended = rec.get("ended")
            if ended is None or not begin_ms < ended <= end_ms:
                continue
            if self.host and not self.host.fullmatch(str(rec.get("host"))):
                continue
            if rec["kind"] == "call":
                snap.calls += 1
                op = rec.get("op")
                if op in ns_values and self.ns_daemons.fullmatch(str(rec.get("daemon"))) \
                        and rec.get("duration_s") is not None:
                    ns_values[op].append(rec["duration_s"] / 1000.0)
                continue
            if rec.get("started") is None and rec.get("accepted") is None:
                continue  # orphan: began before what was read
            if self.op and not self.op.fullmatch(str(rec.get("op"))):
                continue
            snap.by_status[rec["status"]] = snap.by_status.get(rec["status"], 0) + 1
            for field, phase in PHASES:
                if rec.get(field) is not None:
                    phase_values[phase].append(rec[field] / 1000.0)
        for phase, values in phase_values.items():
            values.sort()
            for q in wanted.phase_quantiles:
                snap.phases[(phase, q)] = quantile(values, q)
        for op, values in ns_values.items():
            values.sort()
            for q in wanted.ns[op]:
                snap.ns[(op, q)] = quantile(values, q)
        return snap


def _finished_at_end(rec: dict) -> bool:
    """Of what the end of the file forces out: only a get already answered SUCCESS is
    over; everything else is still in progress."""
    return rec["kind"] == "request" and rec.get("status") == "success"
