"""One partition of the raw-lines topic: its pipeline, its duplicate filter, its state.

No Kafka here: the worker hands in decoded records and writes out what checkpoint()
returns, so this is tested without a broker.

Duplicates. A line is (host, path, offset) with offset its byte offset in the file
(imfile). Lines of one file reach us in offset order (one host's lines share a partition),
so a per-(host, path) high-water offset recognises a line seen before, whether Kafka or
rsyslog delivered it twice. A rotated or truncated file starts again at a low offset: a
line at or below the first offset seen for the file whose text differs from that first
line starts a new generation of the file instead of being taken for a duplicate.

One implausible offset must not move the mark (every later line of the file would be
taken for a duplicate): the mark knows where the file's next line starts, and a line that
starts further on is held, not fed, as the file's pending jump (its offset, text, receive
time and Kafka offset, in the mark, so a restart judges alike). The next line of the file
decides: one past the pending jump within MAX_OFFSET_JUMP confirms it (the file did skip
ahead: lines rsyslog never sent), and the held line is fed before it; any other refutes
it, and the held line is skipped and counted (reason "offset_jump").
docs/kafka-worker.md states the rule.

A record that cannot be used (not an envelope, an implausible offset, or one whose
processing fails) is counted by reason (envelope.BAD_REASONS), kept with its Kafka offset
for the worker's log, and skipped; the partition's next offset moves past it all the same,
so it is committed with the batch and never met again.

DOME nodes side by side. A DOME source's lines (a DOME node's file, dome_paths.py) go
through the partition's event-time merge (parsers/dome_merge.py) before their source: a
node whose lines run ahead of another's is held until the other catches up, within the
merge's horizon and count, so a putdone shipped late still meets its put (docs/kafka-
worker.md, "DOME lines"). The held lines are state, committed with the offset past them.

State keys (beside the pipeline's, streams/state_keys.py): "w|<host>|<path>" the
duplicate filter of a file, "k" the next Kafka offset of the partition to read, "e|..."
the merge's held lines and its nodes' latest stamps.
"""

from __future__ import annotations

import zlib
from collections import Counter

from dpmstream.streams.kafka.envelope import EnvelopeError, compiled_plan_batch, decode_fields
from dpmstream.parsers.dome_merge import HORIZON_MS, MAX_HELD, DomeMerge, LineStamps
from dpmstream.parsers.dome_profiles import DomeProfile, resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams.kafka.dome_paths import DEFAULT_DOME_PROFILE, is_dome_path
from dpmstream.streams import state_keys

UNKNOWN_HOST = "unknown"
UNKNOWN_DAEMON = "unknown"
NEXT_OFFSET_KEY = "k"
MARK_PREFIX = "w|"
MERGE_PREFIX = "e|"
# How far past a held jump the line that confirms it may start (a line of rsyslog's at most
# 64 KiB on DPM heads, well inside); a line further on is another jump.
MAX_OFFSET_JUMP = 1 << 20
BAD_PLACES_KEPT = 4     # bad records of each reason kept with their place between two takes


def _next_at(offset: int, line: str) -> int:
    """Where the line after a line at `offset` starts: its bytes and the newline."""
    return offset + (len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))) + 1


def _mark_of(stored: list) -> list:
    """A mark as stored, in this worker's form. An older worker's is [high-water offset,
    first offset, crc] and, with a jump pending, its offset (counted, its line not kept)."""
    if len(stored) == 3:
        return stored + [None]
    if len(stored) == 4 and stored[3] is not None and stored[3] - stored[0] > MAX_OFFSET_JUMP:
        return stored[:3] + [None, stored[3], None, None, None]
    return stored


def _crc(line: str) -> int:
    try:
        return zlib.crc32(line.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:   # a lone surrogate surrogateescape cannot map back
        return zlib.crc32(line.encode("utf-8", "surrogatepass"))


def plan_runs(messages: list, start: int, marks: dict, dirty: set) -> tuple[list, int]:
    """(runs, next): the runs [(host, path, received_ms, [line, ...]), ...] of
    messages[start:next], each line its file's next one (the common case of _admit: the
    mark moved and noted dirty), a run's lines of one file received at the same time.
    `next` is the first record off that case, which feed_record's path judges (len(messages)
    when none). The reference of the extension's plan_batch (native/src/envelope_batch.rs)."""
    runs: list = []
    key = mark = lines = run_ms = None
    i, n = start, len(messages)
    while i < n:
        try:
            host, path, offset, received_ms, line = decode_fields(messages[i].value())
        except Exception:  # noqa: BLE001 - judged (and counted) by feed_record's path
            break
        if key is None or key[0] != host or key[1] != path:
            key = (host, path)
            mark = marks.get(key)
            if mark is None or len(mark) != 4:
                break
            lines = None
        if mark[3] is None or not mark[0] < offset <= mark[3] + 1:
            break
        mark[0], mark[3] = offset, _next_at(offset, line)
        dirty.add(key)
        if lines is None or received_ms != run_ms:
            lines = []
            runs.append((host, path, received_ms, lines))
            run_ms = received_ms
        lines.append(line)
        i += 1
    return runs, i


class _Runs:
    """A batch's admitted lines on their way to their sources: consecutive lines of one
    source that its receive times date alike (the same (year, month) reference, see
    Source.received_ref) go in one feed_received() call; a source still detecting its
    profile takes its lines one by one, each with its own receive time; a DOME source's go
    through the partition's merge."""

    __slots__ = ("part", "src", "ref", "ms", "lines")

    def __init__(self, part: "PartitionState"):
        self.part = part
        self.src = self.ref = self.ms = None
        self.lines: list[str] = []

    def add(self, host: str, path: str, received_ms: int | None, lines: list[str]) -> None:
        """Lines of (host, path), each its file's next, all received at `received_ms`."""
        part = self.part
        src = part.file_sources.get((host, path))
        if src is None or src.parser is None:
            self.flush()
            self.src = None
            if src is None:
                src = part.open_source(host, path, received_ms)
            for k, line in enumerate(lines):
                if src.parser is not None:   # detected: the rest as any source's
                    self.add(host, path, received_ms, lines[k:])
                    return
                src.feed(line, received_ms=received_ms)
            return
        if src.dome:   # a DOME node's lines: side by side with the others (_merge)
            self.flush()
            self.src = None
            for line in lines:
                part._merge(src, line, received_ms)
            return
        if src is not self.src or received_ms != self.ms:
            # The reference feed(line, received_ms) would set (the same tuple while
            # Source.received_ref has it cached); asked for each new receive time, as
            # feed() asks line by line, so its cache moves alike. The same time: the same.
            ref = None if received_ms is None else src.received_ref(received_ms)
            if src is not self.src or ref is not self.ref:
                self.flush()
                self.src, self.ref = src, ref
        if self.lines:
            self.lines.extend(lines)
        else:
            self.lines = lines
        self.ms = received_ms

    def flush(self) -> None:
        """The lines gathered to their source."""
        if self.lines:
            # the reference the lines took as they came (asked again now, the receive
            # time of the line that ended the run may have moved the source's cache)
            self.src.feed_received(self.lines, self.ms, self.ref)
            self.lines = []


class PartitionState:
    def __init__(self, partition: int, settings: ReassemblySettings = ReassemblySettings(), *,
                 profile=None, tz: str | None = None,
                 dome_merge_horizon_s: float = HORIZON_MS / 1000,
                 dome_merge_max_lines: int = MAX_HELD):
        self.partition = partition
        self.profile = profile
        self.tz = tz
        self.records: list[dict] = []
        # DOME records (a DOME node's file, dome_paths.py) come out with the others.
        self.pipeline = Pipeline(self.records.append, settings,
                                 on_dome_record=self.records.append)
        self.pipeline.track_changes()
        # DOME nodes' lines in event time across the partition (parsers/dome_merge.py)
        self.dome_merge = DomeMerge(int(dome_merge_horizon_s * 1000), dome_merge_max_lines)
        self._stamps: dict[str, LineStamps] = {}   # DOME profile name -> its stamp reader
        self.file_sources: dict[tuple[str, str], object] = {}   # (host, path) -> its Source
        # (host, path) -> [high-water offset, first offset of this generation, its crc,
        # where the next line starts], and while a jump waits for the next line: [its
        # offset, line, receive time, Kafka offset]
        self.marks: dict[tuple[str, str], list] = {}
        # (line, receive time) of a held jump the line being admitted confirmed: fed first
        self._confirmed: tuple[str, int | None] | None = None
        self._dirty_marks: set[tuple[str, str]] = set()
        self.next_offset: int | None = None
        self._offset_dirty = False
        self.duplicates: Counter = Counter()      # host -> lines skipped as seen before
        self.rotations: Counter = Counter()       # host -> files that started over
        self.bad_records = 0
        self.bad_envelopes: Counter = Counter()   # (host, daemon, result) -> records
        self.last_bad_reason: str | None = None
        self.bad_reasons: Counter = Counter()     # reason -> records skipped (the worker takes it)
        # (Kafka offset, reason, message) of the first bad records of each reason since
        # the worker took them
        self.bad_places: list[tuple[int | None, str, str]] = []

    # -- input ---------------------------------------------------------------------------
    def feed_record(self, key: bytes | None, value: bytes | None,
                    kafka_offset: int | None = None) -> None:
        """One record of the lines topic, fed line by line (the reference of feed_batch).
        Never raises on bad input: counts it."""
        fields = self._decoded(key, value, kafka_offset)
        if fields is None:
            return
        host, path, offset, received_ms, line = fields
        if not self._admit(host, path, offset, line, key, kafka_offset, received_ms):
            return
        if self._confirmed is not None:
            self._feed_confirmed(host, path)
        src = self.file_sources.get((host, path))
        if src is None:
            src = self.open_source(host, path, received_ms)
        self._feed_line(src, line, received_ms)

    def _feed_confirmed(self, host: str, path: str) -> None:
        """Feed the held jump the line just admitted confirmed (it comes before that line)."""
        line, received_ms = self._confirmed
        self._confirmed = None
        src = self.file_sources.get((host, path))
        if src is None:
            src = self.open_source(host, path, received_ms)
        self._feed_line(src, line, received_ms)

    def _feed_line(self, src, line: str, received_ms: int | None) -> None:
        """One admitted line to its source: a DOME source's through the merge."""
        if src.dome:
            self._merge(src, line, received_ms)
        else:
            src.feed(line, received_ms=received_ms)

    def _merge(self, src, line: str, received_ms: int | None) -> None:
        """A DOME source's line into the event-time merge; the lines it lets out (this one,
        held ones of any DOME node) to their sources, in event time."""
        stamps = self._stamps.get(src.profile.name)
        if stamps is None:
            stamps = self._stamps[src.profile.name] = LineStamps(src.profile, self.tz)
        self._feed_released(self.dome_merge.push(src.name, stamps.stamp(line, received_ms),
                                                 [line, received_ms]))

    def _feed_released(self, released) -> None:
        """The lines the merge let out, each to its node's source, in the merge's order."""
        sources = self.pipeline.sources
        for lane, (held_line, held_ms) in released:
            sources[lane].feed(held_line, received_ms=held_ms)

    def finish(self) -> None:
        """The end of input, which a streaming worker never reaches (a test's, or a
        partition read to its end): the merge's held lines go to their sources in event
        time, then the pipeline finishes (every open request and call ends)."""
        self._feed_released(self.dome_merge.drain())
        self.pipeline.finish()

    def _decoded(self, key, value, kafka_offset):
        """decode_fields(value), or None for a record counted as bad."""
        try:
            return decode_fields(value)
        except EnvelopeError as exc:
            self._bad(key, kafka_offset, exc.reason, str(exc))
        except Exception as exc:  # noqa: BLE001 - no record may stop the partition
            self._bad(key, kafka_offset, "failed", f"undecodable: {exc.__class__.__name__}")
        return None

    def _bad(self, key: bytes | None, kafka_offset: int | None, reason: str, message: str) -> None:
        """A record skipped. Counted with the parse results too (see .stats), so it shows
        in dpmstream_lines_total{result="malformed"}."""
        self.bad_envelopes[(_host_of(key), UNKNOWN_DAEMON, "malformed")] += 1
        self.bad_records += 1
        self.last_bad_reason = message
        self.bad_reasons[reason] += 1
        if self.bad_reasons[reason] <= BAD_PLACES_KEPT:
            self.bad_places.append((kafka_offset, reason, message))

    @property
    def stats(self) -> "StatsView":
        """The pipeline's stats, with the records that were not envelopes in `lines`."""
        return StatsView(self.pipeline.stats, self.bad_envelopes)

    def feed_batch(self, messages) -> None:
        """One batch of this partition, in offset order (confluent_kafka.Messages, or
        anything with their key(), value() and offset(): lines_fetch.Record): fed, marked
        consumed, then event-time timeouts run.

        The same as feed_record() for each message, but planned in runs (plan_runs, or the
        extension's plan_batch: the same plan without Python per record): consecutive lines
        of one file that are each its next line and received at the same time. A record off
        that common case (a bad envelope, a file's first line, a duplicate, a rotation, a
        jump) takes feed_record's path. Runs of one source that its receive times date alike
        go to it in one feed_received() call (_Runs)."""
        if messages.__class__ is not list:
            messages = list(messages)
        plan = plan_runs if compiled_plan_batch is None else compiled_plan_batch
        runs = _Runs(self)
        i, n = 0, len(messages)
        while True:
            planned, i = plan(messages, i, self.marks, self._dirty_marks)
            for host, path, received_ms, lines in planned:
                runs.add(host, path, received_ms, lines)
            if i >= n:
                break
            self._feed_judged(messages[i], runs)
            i += 1
        runs.flush()
        self.consumed(messages[-1].offset() + 1)
        self.advance()

    def _feed_judged(self, msg, runs: "_Runs") -> None:
        """One record of a batch off the plan's common case, judged as feed_record judges
        it; its line joins the runs."""
        key, kafka_offset = msg.key(), msg.offset()
        fields = self._decoded(key, msg.value(), kafka_offset)
        if fields is None:
            return
        host, path, offset, received_ms, line = fields
        if not self._admit(host, path, offset, line, key, kafka_offset, received_ms):
            return
        if self._confirmed is not None:
            runs.flush()
            runs.src = None
            self._feed_confirmed(host, path)
        runs.add(host, path, received_ms, [line])

    def feed_one_by_one(self, messages) -> None:
        """feed_batch's slow twin, for a batch whose feeding raised (a record the pipeline
        could not process; the worker took the partition again, its state as committed):
        each record fed on its own, and one whose processing raises is counted
        ("failed") and skipped. What that record changed before it failed stays."""
        for msg in messages:
            try:
                self.feed_record(msg.key(), msg.value(), msg.offset())
            except Exception as exc:  # noqa: BLE001 - no record may stop the partition
                self._bad(msg.key(), msg.offset(), "failed",
                          f"processing failed: {exc.__class__.__name__}")
        self.consumed(messages[-1].offset() + 1)
        self.advance()

    def consumed(self, next_offset: int) -> None:
        """The records before Kafka offset `next_offset` have been fed."""
        self.next_offset = next_offset
        self._offset_dirty = True

    def open_source(self, host: str, path: str, received_ms: int | None):
        """A new Source of the pipeline for (host, path), read with its profile (_profile_of)."""
        src = self.pipeline.source(f"{host}|{path}", host=host, path=path,
                                   profile=self._profile_of(path), tz=self.tz,
                                   year_hint_ms=received_ms)
        self.file_sources[(host, path)] = src
        return src

    def _profile_of(self, path: str):
        """A DOME node's file (dome_paths.py) is read with the DOME profile configured, else
        the generation the DOME drop-in ships; any other file with the DPM profile
        configured, else the one detected from its first lines."""
        configured_dome = isinstance(self.profile, DomeProfile)
        if is_dome_path(path):
            return self.profile if configured_dome else resolve_dome_profile(DEFAULT_DOME_PROFILE)
        return None if configured_dome else self.profile

    def _admit(self, host: str, path: str, offset: int, line: str, record_key: bytes | None = None,
               kafka_offset: int | None = None, received_ms: int | None = None) -> bool:
        """False for a line not to feed now: seen before (same host, path and offset;
        counted as a duplicate), or past where the file's next line starts (held as its
        pending jump until the next line decides). True for a line to feed; if it confirms
        the pending jump, `_confirmed` is that held line, to feed first.

        A mark is [high-water offset, first offset of this generation, its crc, where the
        line after the high-water one starts (None: not known)] and, while a jump waits for
        the next line, [its offset, line, receive time, Kafka offset]."""
        key = (host, path)
        mark = self.marks.get(key)
        if mark is None:
            self.marks[key] = [offset, offset, _crc(line), _next_at(offset, line)]
        elif offset > mark[0]:
            if len(mark) > 4:                   # a held jump: this line decides it
                pending = mark[4]
                if offset == pending:           # the same jumping line again
                    self.duplicates[host] += 1
                    return False
                if 0 < offset - pending <= MAX_OFFSET_JUMP:
                    held, held_ms = mark[5], mark[6]   # confirmed: the file did skip ahead
                    del mark[4:]
                    mark[0] = pending
                    mark[3] = None if held is None else _next_at(pending, held)
                    if held is not None:        # (an older worker kept no line)
                        self._confirmed = (held, held_ms)
                else:
                    self._refute(host, path, mark)
            if not self._follows(mark, offset):
                mark[4:] = [offset, line, received_ms, kafka_offset]
                self._dirty_marks.add(key)
                return False
            mark[0], mark[3] = offset, _next_at(offset, line)
        elif offset <= mark[1] and _crc(line) != mark[2]:
            self._refute(host, path, mark)
            self.marks[key] = [offset, offset, _crc(line), _next_at(offset, line)]  # a new file
            self.rotations[host] += 1
        else:
            self.duplicates[host] += 1
            return False
        self._dirty_marks.add(key)
        return True

    def _refute(self, host: str, path: str, mark: list) -> None:
        """Drop the mark's pending jump, if any: the file did not take it. Its held line
        (an implausible offset) is skipped and counted with its place. (A pending jump
        stored by an older worker holds no line: it was counted when it came.)"""
        if len(mark) > 4 and mark[5] is not None:
            offset, kafka_offset = mark[4], mark[7]
            self._bad(host.encode(), kafka_offset, "offset_jump",
                      f"offset {offset} of {host}:{path} is {offset - mark[0]} bytes past the "
                      f"line before it, and the next line did not follow it")
        del mark[4:]

    @staticmethod
    def _follows(mark: list, offset: int) -> bool:
        """Whether a line at `offset` (past the mark) starts no later than the line after
        the mark's: at once, or after the CR the envelope strips (an escaped or repaired
        line reads longer than its bytes, so its successor comes earlier than reckoned).
        A mark restored from an older worker does not know: within MAX_OFFSET_JUMP."""
        next_at = mark[3]
        if next_at is None:
            return offset - mark[0] <= MAX_OFFSET_JUMP
        return offset <= next_at + 1

    # -- event time ------------------------------------------------------------------------
    def advance(self) -> None:
        self.pipeline.advance()

    # -- state ---------------------------------------------------------------------------
    def checkpoint(self) -> tuple[list[dict], dict[str, object]]:
        """(records finished since the last checkpoint, net state changes since then).

        Changes are {key: JSON-safe value, or None for a key gone}. Taking the changes
        settles profile detection, which may finish records: so changes come first.
        """
        changes = state_keys.encode(self.pipeline.take_changes())
        for key, value in self.dome_merge.take_changes().items():
            changes[MERGE_PREFIX + key] = value
        for host, path in self._dirty_marks:   # a copy: feeding moves the mark in place
            changes[f"{MARK_PREFIX}{host}|{path}"] = self.marks[(host, path)][:]
        self._dirty_marks.clear()
        if self._offset_dirty:
            changes[NEXT_OFFSET_KEY] = self.next_offset
            self._offset_dirty = False
        records = self.records[:]
        self.records.clear()
        return records, changes

    def restore(self, states: dict[str, object]) -> None:
        """Rebuild from the latest value of every key (a fresh PartitionState only)."""
        core, merge = {}, {}
        for key, value in states.items():
            if value is None:
                continue
            if key == NEXT_OFFSET_KEY:
                self.next_offset = int(value)
            elif key.startswith(MARK_PREFIX):
                host, _, path = key[len(MARK_PREFIX):].partition("|")
                self.marks[(host, path)] = _mark_of(list(value))
            elif key.startswith(MERGE_PREFIX):
                merge[key[len(MERGE_PREFIX):]] = value
            else:
                core[key] = value
        self.pipeline.restore(state_keys.decode(core))
        self.dome_merge.restore(merge)
        for src in self.pipeline.sources.values():
            self.file_sources[(src.host, src.path)] = src


class StatsView:
    """PipelineStats plus counts kept outside the pipeline (what metrics read)."""

    def __init__(self, stats, extra_lines: Counter):
        self._stats = stats
        self._extra = extra_lines

    @property
    def lines(self) -> Counter:
        merged = Counter(self._stats.lines)
        merged.update(self._extra)
        return merged

    def __getattr__(self, name):
        return getattr(self._stats, name)


def _host_of(key: bytes | None) -> str:
    """The record key names the host; a key that is not a plausible host name is not used."""
    if not key:
        return UNKNOWN_HOST
    try:
        text = key.decode("ascii")
    except UnicodeDecodeError:
        return UNKNOWN_HOST
    ok = 0 < len(text) <= 253 and all(c.isalnum() or c in "-._" for c in text)
    return text if ok else UNKNOWN_HOST
