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
taken for a duplicate): a line more than MAX_OFFSET_JUMP bytes past the mark is skipped
and counted (reason "offset_jump"), and its offset kept as the file's pending jump. The
mark moves past a jump only when the next line confirms it (it follows the pending jump
within MAX_OFFSET_JUMP): the file did skip ahead (lines rsyslog never sent). A line that
follows the mark instead drops the pending jump. docs/kafka-worker.md states the rule.

A record that cannot be used (not an envelope, an implausible offset, or one whose
processing fails) is counted by reason (envelope.BAD_REASONS), kept with its Kafka offset
for the worker's log, and skipped; the partition's next offset moves past it all the same,
so it is committed with the batch and never met again.

State keys (beside the pipeline's, streams/state_keys.py): "w|<host>|<path>" the
duplicate filter of a file, "k" the next Kafka offset of the partition to read.
"""

from __future__ import annotations

import zlib
from collections import Counter

from dpmstream.streams.kafka.envelope import (
    EnvelopeError, compiled_decode_fields, decode_fields)
from dpmstream.parsers.dome_profiles import DomeProfile, resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.kafka.dome_paths import DEFAULT_DOME_PROFILE, is_dome_path
from dpmstream.streams import state_keys

UNKNOWN_HOST = "unknown"
UNKNOWN_DAEMON = "unknown"
NEXT_OFFSET_KEY = "k"
MARK_PREFIX = "w|"
# How far past a file's high-water offset the next line may plausibly start. Lines of one
# file arrive in order, each well under rsyslog's maxMessageSize (64 KiB at most on DPM
# heads): a longer jump is a gap (rsyslog dropped lines) or a bad offset, and is only
# believed once the next line confirms it.
MAX_OFFSET_JUMP = 1 << 20
NO_JUMP = -1            # a mark's pending jump when there is none
BAD_PLACES_KEPT = 4     # bad records of each reason kept with their place between two takes


def _crc(line: str) -> int:
    try:
        return zlib.crc32(line.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:   # a lone surrogate surrogateescape cannot map back
        return zlib.crc32(line.encode("utf-8", "surrogatepass"))


class PartitionState:
    def __init__(self, partition: int, *, timeout_s: float = 3600, max_in_flight: int = 1_000_000,
                 max_threads: int = 100_000, grace_s: float = 60, head_aliases=(),
                 profile=None, tz: str | None = None):
        self.partition = partition
        self.profile = profile
        self.tz = tz
        self.records: list[dict] = []
        # DOME records (a DOME node's file, dome_paths.py) come out with the others.
        self.pipeline = Pipeline(self.records.append, timeout_s=timeout_s,
                                 max_in_flight=max_in_flight, max_threads=max_threads,
                                 grace_s=grace_s, head_aliases=head_aliases,
                                 on_dome_record=self.records.append)
        self.pipeline.track_changes()
        self._sources: dict[tuple[str, str], object] = {}
        # (host, path) -> [high-water offset, first offset of this generation, its crc]
        self.marks: dict[tuple[str, str], list[int]] = {}
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
        if not self._admit(host, path, offset, line, key, kafka_offset):
            return
        src = self._sources.get((host, path))
        if src is None:
            src = self._source(host, path, received_ms)
        src.feed(line, received_ms=received_ms)

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
        """One batch of this partition, in offset order (anything with .key, .value and
        .offset, e.g. Kafka messages): fed, marked consumed, then event-time timeouts run.

        The same as feed_record() for each message, but a run of consecutive lines of one
        source that its receive times date alike (the same (year, month) reference, see
        Source._ref_of) goes to the source in one feed_received() call. A source still
        detecting its profile takes its lines one by one, each with its own receive time."""
        sources, marks, dirty = self._sources, self.marks, self._dirty_marks
        run: list[str] = []          # lines of `run_src` dated by `run_ref`
        run_src = run_ref = run_ms = None
        compiled_decode = compiled_decode_fields   # decode_fields, one call a record
        for msg in messages:
            fields = None if compiled_decode is None else compiled_decode(msg.value)
            if fields is None:
                fields = self._decoded(msg.key, msg.value, msg.offset)
                if fields is None:
                    continue
            host, path, offset, received_ms, line = fields
            key = (host, path)
            mark = marks.get(key)
            if mark is not None and 0 < offset - mark[0] <= MAX_OFFSET_JUMP:
                mark[0] = offset   # the common case of _admit, inline
                if len(mark) > 3:
                    del mark[3:]   # a pending jump the file did not take
                dirty.add(key)
            elif not self._admit(host, path, offset, line, msg.key, msg.offset):
                continue
            src = sources.get(key)
            if src is None or src.parser is None:
                if run:
                    run_src.feed_received(run, run_ms)
                    run = []
                run_src = None
                if src is None:
                    src = self._source(host, path, received_ms)
                if src.parser is None:
                    src.feed(line, received_ms=received_ms)
                    continue
            if src is not run_src or received_ms != run_ms:
                # The reference feed(line, received_ms) would set (the same tuple while
                # Source._ref_of has it cached); asked once per line, as feed() does, so
                # its cache moves as it would line by line. The same time again: the same.
                ref = None if received_ms is None else src._ref_of(received_ms)
                if src is not run_src or ref is not run_ref:
                    if run:
                        run_src.feed_received(run, run_ms)
                        run = []
                    run_src, run_ref = src, ref
            run.append(line)
            run_ms = received_ms
        if run:
            run_src.feed_received(run, run_ms)
        self.consumed(messages[-1].offset + 1)
        self.advance()

    def feed_one_by_one(self, messages) -> None:
        """feed_batch's slow twin, for a batch whose feeding raised (a record the pipeline
        could not process; the worker took the partition again, its state as committed):
        each record fed on its own, and one whose processing raises is counted
        ("failed") and skipped. What that record changed before it failed stays."""
        for msg in messages:
            try:
                self.feed_record(msg.key, msg.value, msg.offset)
            except Exception as exc:  # noqa: BLE001 - no record may stop the partition
                self._bad(msg.key, msg.offset, "failed",
                          f"processing failed: {exc.__class__.__name__}")
        self.consumed(messages[-1].offset + 1)
        self.advance()

    def consumed(self, next_offset: int) -> None:
        """The records before Kafka offset `next_offset` have been fed."""
        self.next_offset = next_offset
        self._offset_dirty = True

    def _source(self, host: str, path: str, received_ms: int | None):
        src = self.pipeline.source(f"{host}|{path}", host=host, path=path,
                                   profile=self._profile_of(path), tz=self.tz,
                                   year_hint_ms=received_ms)
        self._sources[(host, path)] = src
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
               kafka_offset: int | None = None) -> bool:
        """False for a line not to feed: seen before (same host, path and offset; counted
        as a duplicate), or too far past the file's mark (counted as a bad record).

        A mark is [high-water offset, first offset of this generation, its crc] and, while
        a jump waits for its confirmation, that jump's offset."""
        key = (host, path)
        mark = self.marks.get(key)
        if mark is None:
            self.marks[key] = [offset, offset, _crc(line)]
        elif offset > mark[0]:
            pending = mark[3] if len(mark) > 3 else NO_JUMP
            if offset - mark[0] <= MAX_OFFSET_JUMP:
                del mark[3:]             # the file goes on from its mark: no jump
            elif pending != NO_JUMP and 0 < offset - pending <= MAX_OFFSET_JUMP:
                del mark[3:]             # confirmed: the file did skip ahead
            else:
                if offset == pending:    # the same jumping line again: already counted
                    self.duplicates[host] += 1
                    return False
                mark[3:] = [offset]
                self._dirty_marks.add(key)
                self._bad(record_key, kafka_offset, "offset_jump",
                          f"offset {offset} of {host}:{path} is {offset - mark[0]} bytes past "
                          f"the last line's (at most {MAX_OFFSET_JUMP} unless the next confirms it)")
                return False
            mark[0] = offset
        elif offset <= mark[1] and _crc(line) != mark[2]:
            self.marks[key] = [offset, offset, _crc(line)]  # a new file under this path
            self.rotations[host] += 1
        else:
            self.duplicates[host] += 1
            return False
        self._dirty_marks.add(key)
        return True

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
        core = {}
        for key, value in states.items():
            if value is None:
                continue
            if key == NEXT_OFFSET_KEY:
                self.next_offset = int(value)
            elif key.startswith(MARK_PREFIX):
                host, _, path = key[len(MARK_PREFIX):].partition("|")
                self.marks[(host, path)] = list(value)
            else:
                core[key] = value
        self.pipeline.restore(state_keys.decode(core))
        for src in self.pipeline.sources.values():
            self._sources[(src.host, src.path)] = src


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
