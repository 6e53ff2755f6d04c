"""Probe source: the last window of a DPM, DPNS or SRM log, read directly with the domain.
An rsyslog file that mixes these daemons is read as replay reads it: each line by the
profile of its program tag (the name server's lines beside the DPM daemon's).

For sites without the pipeline. The window ends at the latest event time in the file
and covers `window_s` before it. Only the tail is read (probes/tail.py): backwards from
the end until a line `window + lookback` older than the last one is passed (the lookback
lets requests that end in the window be reassembled from their first line; the stamps
are read with the profile's own envelope, detected from the last lines), then
forwards through a Pipeline's Source (dpmstream.parsers.pipeline), as a replay feeds a
file, so year and month boundaries, daemon restarts and thread reuse are handled exactly
as everywhere else. The reassembly engine is replay's (parsers/engines.py): the compiled
one where built, whole blocks of lines without Python per line; DPMSTREAM_ENGINE=python
chooses the reference. Nothing of dpmstream.streams is imported: a site installs the probe
with the domain only.

Counted: requests and calls whose `ended` falls in the window. Requests still open when
the file ends are in progress, not incomplete: those are left out (a get already
answered SUCCESS counts as the success it is); so are calls still open, and orphan
requests whose first line lies before what was read.

Under -t (`deadline`): the backward scan may take 30% of the time left (it stops where
it got); the forwards reading starts with the last 4 MiB, then reads again from as far
back as the pace measured on them lets it finish in time (the whole span if it fits).
When time runs out, the last segment read whole is the answer, its Snapshot.partial
saying how much of the log it covers; only when not even the first one could be read is
the answer a time-out (UNKNOWN).

The one wall-clock reading: `age_s`, how long ago the newest line was written (for
--max-age: a log that stopped growing means a hung daemon).
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime

from dpmstream.parsers.clock import ClockError, load_zone, stream_reference
from dpmstream.parsers.lines import MALFORMED, PARSED, UNMATCHED_RESULT
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.profiles import Profile, ProfileError, detect_profile, resolve_profile
from dpmstream.parsers.stamps import LineStamps
from dpmstream.parsers.records import PHASES
from dpmstream.parsers.schema import BY_INPUT_END
from dpmstream.probes import tail
from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.probes.measurement import Snapshot, SourceError, Wanted

_MARGIN_S = 120       # lines of different threads written a little out of order
# Under -t: the share of the time left that the backward scan for the window's start may
# take; the size of the first segment read forwards (the last lines, whatever the window);
# the share of the pace measured on it that the next segment may count on.
SCAN_SHARE = 0.3
FIRST_SEGMENT = 4 << 20
PACE_SAFETY = 0.6
# The profile is detected from the last lines (as the pipeline does from the first), and
# the newest stamp is the latest among them (threads interleave).
_LAST_LINES = 200


class StampReader:
    """The local stamp (month, day, hour, minute, second) of a raw line, by the profile's
    own envelope (parsers/stamps.py): its native form, or the form rsyslog wraps it in;
    None if neither. Whole seconds: the window is found to the second."""

    def __init__(self, profile: Profile):
        self.local = LineStamps(profile).local

    def __call__(self, line: bytes):
        st = self.local(line)
        return None if st is None else st.to_second


def _naive_seconds_before(stamp, last) -> float:
    """How long before `last` the stamp lies on the wall clock of the log, both without a
    year: a later month than the last line's is the year before. Only differences
    matter, so a fixed leap year is used."""
    year = 2000 if stamp[:2] <= last[:2] else 1999
    try:
        t = datetime(year, *stamp)
    except ValueError:  # 02/29 of the year before: very old anyway
        return float("inf")
    return (datetime(2000, *last) - t).total_seconds()


def seconds_before_at_least(stamp, last, zone, year_of_last: int) -> float:
    """A lower bound of the real time between two local stamps of a log in `zone`: the
    wall-clock difference, less the hour a spring-forward between them adds (taking the
    offsets that make it smallest, so a repeated autumn hour never makes it larger)."""
    naive = _naive_seconds_before(stamp, last)
    if naive == float("inf"):
        return naive
    year = year_of_last if stamp[:2] <= last[:2] else year_of_last - 1
    try:
        late = datetime(year_of_last, *last, tzinfo=zone)
        early = datetime(year, *stamp, tzinfo=zone)
    except ValueError:  # a 02/29 in a year without one: not this year after all
        return naive - 3600
    late_offset = max(late.utcoffset(), late.replace(fold=1).utcoffset())
    early_offset = min(early.utcoffset(), early.replace(fold=1).utcoffset())
    return naive - max(0.0, (late_offset - early_offset).total_seconds())


@dataclass
class _Start:
    """What the last lines settle: the newest stamp, the profile and its stamp reader,
    the zone, the (year, month) dating the newest line; `whole`: the scan for the
    window's start got there (else -t stopped it)."""

    newest: tuple
    profile: Profile
    stamp_of: StampReader
    zone: object
    ref: tuple[int, int]
    whole: bool = True

    def seconds_before(self, stamp) -> float:
        year_of_last = self.ref[0] if self.newest[0] <= self.ref[1] else self.ref[0] - 1
        return seconds_before_at_least(stamp, self.newest, self.zone, year_of_last)

    def seconds_before_newest(self, lines: list[bytes]) -> float | None:
        """How far before the newest line the first stamped one of `lines` lies."""
        st = next((st for st in map(self.stamp_of, lines[:_LAST_LINES]) if st), None)
        return None if st is None else self.seconds_before(st)


def minutes_text(seconds: float) -> str:
    return f"{seconds / 3600:.1f}h" if seconds >= 5400 else f"{seconds / 60:.1f}m"


class LogSource:
    def __init__(self, path: str, window_s: float, *, lookback_s: float = 1800,
                 host: str | None = None, op: str | None = None, profile: str | None = None,
                 tz: str | None = None, year: int | None = None, ns_daemons: str = "dpns|lfc",
                 timeout_s: float = 3600, deadline: float | None = None,
                 max_line: int = tail.MAX_LINE) -> None:
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
        self.deadline = deadline  # time.monotonic() by which reading must stop
        self.max_line = max_line
        self.tail = tail.TailStats()  # for -v, the status line and tests
        self.lines = {PARSED: 0, UNMATCHED_RESULT: 0, MALFORMED: 0}
        self.decode_errors = 0
        self.engine: str | None = None  # the reassembly engine that read the window

    # kept for -v and the tests
    @property
    def read_from(self) -> int:
        return self.tail.start

    @property
    def lines_read(self) -> int:
        return self.tail.lines_read

    def progress(self) -> str:
        """How far reading got: the reason given when the time budget runs out."""
        t = self.tail
        if t.lines_read:
            return (f"reading {self.path}: {t.lines_read} lines from byte {t.start} of "
                    f"{t.size} parsed")
        return f"reading {self.path}: {t.bytes_scanned_back} of {t.size} bytes scanned from the end"

    def fetch(self, wanted: Wanted) -> Snapshot:
        return measure_log(self.path, self.tail, self.deadline,
                           lambda fh, st, end: self._fetch(fh, st, end, wanted))

    def _fetch(self, fh, st, end: int, wanted: Wanted) -> Snapshot:
        size = st.st_size
        scan_deadline = None if self.deadline is None else \
            time.monotonic() + SCAN_SHARE * max(0.0, self.deadline - time.monotonic())
        start, found = self._find_start(fh, end, st.st_mtime, scan_deadline)
        # The window is read forwards, but under -t its end matters most: a segment of the
        # last lines first, then, at the pace it was read, as much more as the time left
        # allows (the whole span if it fits). Should time run out, the last segment read
        # whole is the answer, and says so.
        seg_start = start if self.deadline is None or end - start <= FIRST_SEGMENT \
            else tail.next_line_start(fh, end - FIRST_SEGMENT, end)
        best = None
        while True:
            began = time.monotonic()
            try:
                snap = self._read(fh, seg_start, end, found, wanted)
            except tail.DeadlineExceeded:
                if best is None:
                    raise
                break
            # what -v says is what the answer was measured on: this segment's counts
            best = (snap, replace(self.tail), dict(self.lines), self.decode_errors, self.engine)
            if seg_start <= start:
                break
            took = max(time.monotonic() - began, 1e-3)
            left = self.deadline - time.monotonic()
            affordable = int((end - seg_start) / took * left * PACE_SAFETY)
            if end - affordable > start and affordable < 1.5 * (end - seg_start):
                break  # no time to read meaningfully more
            seg_start = start if end - affordable <= start else \
                tail.next_line_start(fh, end - affordable, end)
        snap, self.tail, self.lines, self.decode_errors, self.engine = best
        if self.tail.start > start or not found.whole:
            span = "" if snap.read_s is None else f"the last {minutes_text(snap.read_s)} of the log, "
            snap.partial = (f"partial: read only {span}{self.tail.lines_read} lines, "
                            f"{tail.mib(end - self.tail.start)} of its {tail.mib(size)}, within -t")
        return snap

    def _read(self, fh, start: int, end: int, found: "_Start", wanted: Wanted) -> Snapshot:
        """The window measured from the lines between `start` and `end`, forwards, fed
        through a Pipeline's Source as a replay feeds a file (parsers/pipeline.py)."""
        t = self.tail
        t.start, t.lines_read, t.long_lines, t.partial_last_line = start, 0, 0, False
        window_ms = int(self.window_s * 1000)
        kept: deque = deque()
        latest = [-1]  # latest event time parsed so far

        def keep(rec):  # what ended a window or more before the latest line is out
            ended = rec.get("ended")
            if ended is not None and ended > latest[0] - window_ms:
                counted = self._counted(rec, wanted)
                if counted is not None:
                    kept.append(counted)

        # The engine is replay's (parsers/engines.py): DPMSTREAM_ENGINE, else the compiled
        # one where built. The pipeline knows every bundled profile, as replay's does: in
        # a syslog file that mixes daemons, the lines of another daemon's tag (the name
        # server's beside the DPM daemon's) are read by that daemon's profile (routed).
        try:
            pipeline = Pipeline(keep, ReassemblySettings(timeout_s=self.timeout_s))
            src = pipeline.source(self.path, host=self.host_name, path=self.path,
                                  profile=found.profile, tz=self.tz, ref=found.ref)
        except (ValueError, ClockError) as exc:
            raise SourceError(str(exc)) from None
        self.engine = pipeline.engine
        read_s = None  # event time from the first stamped line read to the newest
        for lines in tail.blocks_forwards(fh, start, end, t, deadline=self.deadline,
                                          max_line=self.max_line):
            if read_s is None:
                read_s = found.seconds_before_newest(lines)
            src.feed_lines(lines)
            # per block (1 MiB, some 9,000 lines): event-time sweep, drop what is too old
            latest[0] = max(pipeline.stats.latest_event_ms.values(), default=-1)
            pipeline.advance()
            while kept and kept[0][0] <= latest[0] - window_ms:
                kept.popleft()
        self._count(pipeline.stats)
        if latest[0] < 0:
            raise SourceError(f"{self.path}: no line of its window could be parsed "
                              f"(profile {found.profile.name}; --profile to choose another)")
        pipeline.finish()
        snap = self._snapshot(kept, latest[0], wanted)
        snap.age_s = time.time() - latest[0] / 1000.0  # "is it fresh now?": the wall clock
        snap.long_lines = t.long_lines
        snap.read_s = read_s
        snap.lines_read = t.lines_read
        return snap

    def _count(self, stats) -> None:
        """The lines read, by result (parsed, unmatched, malformed, any other), over hosts."""
        self.lines = {PARSED: 0, UNMATCHED_RESULT: 0, MALFORMED: 0}
        for (_host, _daemon, result), n in stats.lines.items():
            self.lines[result] = self.lines.get(result, 0) + n
        self.decode_errors = stats.decode_errors

    def _find_start(self, fh, end: int, mtime: float, scan_deadline: float | None):
        """(offset of the first line to read, _Start): reading backwards, the profile is
        detected from the last lines, then lines are passed until one lies window +
        lookback (and a margin) before the newest. At `scan_deadline` the scan stops where
        it got (the start of the last block it read): `whole` is then False."""
        need_s = self.window_s + self.lookback_s + _MARGIN_S
        profile = self._given_profile()
        last_lines: list[bytes] = []  # newest first
        found = None
        for blk in tail.blocks_backwards(fh, end, self.tail, deadline=self.deadline,
                                         max_line=self.max_line):
            if found is None:
                last_lines += [line for line in reversed(blk.lines[-_LAST_LINES:])
                               if not isinstance(line, int)][:_LAST_LINES - len(last_lines)]
                if len(last_lines) < _LAST_LINES:
                    continue
                found = self._settle(last_lines, profile, mtime)

            # The block's earliest stamped line decides whether to look inside it at all.
            earliest = next((st for st in map(found.stamp_of, (
                line for line in blk.lines if not isinstance(line, int))) if st), None)
            if earliest is not None and found.seconds_before(earliest) >= need_s:
                for offset, line in blk.backwards():
                    st = found.stamp_of(line)
                    if st is not None and found.seconds_before(st) >= need_s:
                        return offset, found
            if scan_deadline is not None and time.monotonic() >= scan_deadline:
                found.whole = False
                return blk.offset, found
        if found is None:  # the file is shorter than the lines to detect from
            found = self._settle(last_lines, profile, mtime)
        return 0, found

    def _given_profile(self):
        if not self.profile:
            return None
        try:
            return resolve_profile(self.profile)
        except ProfileError as exc:
            raise SourceError(str(exc)) from None

    def _settle(self, last_lines: list[bytes], profile, mtime):
        """From the file's last lines (newest first): the newest stamp among them (threads
        interleave), the profile, its stamp reader, the zone and the (year, month)
        dating the newest line."""
        skipped = self.tail.long_lines_back
        skipped = f" ({skipped} lines over {self.max_line // 1024} KiB skipped)" if skipped else ""
        if profile is None:
            profile = detect_profile([line.decode("utf-8", "replace") for line in last_lines
                                      if line.strip()])
            if profile is None:
                raise SourceError(f"{self.path}: no DPM log line in its last {_LAST_LINES} "
                                  f"lines that a bundled profile recognises{skipped} "
                                  f"(give one with --profile)")
        stamp_of = StampReader(profile)
        stamps = [st for st in map(stamp_of, last_lines) if st]
        if not stamps:
            raise SourceError(f"{self.path}: no DPM log line with a time stamp of profile "
                              f"{profile.name} in its last {_LAST_LINES} lines{skipped}")
        last = stamps[0]
        newest = max(stamps, key=lambda s: -_naive_seconds_before(s, last))
        try:
            zone = load_zone(self.tz or profile.timezone)
        except ClockError as exc:
            raise SourceError(str(exc)) from None
        return _Start(newest, profile, stamp_of, zone, self._ref(newest, mtime, zone))

    def _ref(self, newest, mtime: float, zone) -> tuple[int, int]:
        """(year, month) dating the newest line, as the core dates a file: --year (the
        year of the last line), else a rotated file's name, else its modification time."""
        month, day = newest[:2]
        if self.year is not None:
            try:
                datetime(self.year, month, day)
            except ValueError:
                raise SourceError(f"--year {self.year}: the last line's date {month:02d}/{day:02d} "
                                  f"does not exist in that year") from None
            return self.year, month
        return stream_reference(self.path, int(mtime * 1000), zone)

    def _counted(self, rec: dict, wanted: Wanted) -> tuple | None:
        """What the window's answer reads of a record, in a plain tuple (the cheapest to
        make), not the record's dict (the window of a busy 1 GB log holds some 90,000
        requests: as dicts they were half the probe's memory): a call's (end ms, the
        name-server operation whose quantiles are wanted or None, its seconds or None), a
        request's (end ms, status, then each of PHASES in seconds, None where it has
        none). None for one that is never counted: another host's, another operation's,
        an orphan, a request the end of the file forced out."""
        host = rec.get("host")
        if self.host and host != self.host_name and not self.host.fullmatch(str(host)):
            return None  # (a native line's host is --host's text itself: it is selected)
        if rec["kind"] == "call":
            op, ms = rec.get("op"), rec.get("duration_ms")
            if op in wanted.ns and ms is not None and self.ns_daemons.fullmatch(str(rec.get("daemon"))):
                return rec["ended"], op, ms / 1000.0
            return rec["ended"], None, None
        if rec.get("started") is None and rec.get("accepted") is None:
            return None  # orphan: began before what was read
        if self.op and not self.op.fullmatch(str(rec.get("op"))):
            return None
        if rec["end_reason"] == BY_INPUT_END and rec["status"] != "success":
            return None  # still in progress when the file ends (a get answered SUCCESS is over)
        return (rec["ended"], rec["status"],
                *[None if rec.get(field) is None else rec[field] / 1000.0 for field, _ in PHASES])

    def _snapshot(self, counted, end_ms: int, wanted: Wanted) -> Snapshot:
        snap = Snapshot(window_s=self.window_s, source=os.path.basename(self.path), end_ms=end_ms)
        begin_ms = end_ms - int(self.window_s * 1000)
        phase_values: dict[str, list[float]] = {phase: [] for _, phase in PHASES}
        ns_values: dict[str, list[float]] = {op: [] for op in wanted.ns}
        for entry in counted:
            if not begin_ms < entry[0] <= end_ms:
                continue
            if len(entry) == 3:  # a call
                _, ns_op, seconds = entry
                snap.calls += 1
                if ns_op is not None:
                    ns_values[ns_op].append(seconds)
                continue
            snap.by_status[entry[1]] = snap.by_status.get(entry[1], 0) + 1
            for (_, phase), seconds in zip(PHASES, entry[2:]):
                if seconds is not None:
                    phase_values[phase].append(seconds)
        for phase, values in phase_values.items():
            values.sort()
            for q in wanted.phase_quantiles:
                snap.phases[(phase, q)] = nearest_rank(values, q)
        for op, values in ns_values.items():
            values.sort()
            for q in wanted.ns[op]:
                snap.ns[(op, q)] = nearest_rank(values, q)
        return snap


def measure_log(path: str, stats: tail.TailStats, deadline: float | None, measure) -> Snapshot:
    """measure(fh, its os.stat, the end of its last whole line) on the log file opened to
    read its tail (a regular file only); its failures (unreadable, -t run out) as
    SourceErrors naming the file."""
    try:
        with opened_log(path, stats, deadline) as (fh, st, end):
            return measure(fh, st, end)
    except tail.DeadlineExceeded as exc:
        raise SourceError(f"timed out: {exc} of {path}") from None
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None


@contextmanager
def opened_log(path: str, stats: tail.TailStats, deadline: float | None):
    """(fh, its os.stat, the end of its last whole line) of a log opened to read its tail,
    closed on leaving; a file that cannot be opened as a log is a SourceError naming it."""
    try:
        fh = tail.open_log(path)
    except tail.TailError as exc:
        raise SourceError(str(exc)) from None
    with fh:
        st = os.fstat(fh.fileno())
        stats.size = st.st_size
        yield fh, st, tail.whole_lines_end(fh, st.st_size, stats, deadline=deadline)
