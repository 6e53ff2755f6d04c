"""The core glue every driver shares: raw lines -> parsed events -> reassembled records.

    pipeline = Pipeline(on_record=records.append)          # or any callable(dict)
    src = pipeline.source("dpm@head01", host="head01", path="/var/log/dpm/log",
                          profile=None, tz=None, year=None, year_hint_ms=None)
    for line in lines:
        src.feed(line)               # str or bytes, with or without the trailing newline
    pipeline.finish()                # end of input: everything still open is emitted

A source is one log stream (one file, or one (host, path) on Kafka): it owns its profile
(detected from its first lines unless given), its event clock (year, DST) and its line
counters. All sources of a pipeline share one reassembler, so a DPM and a DPNS log of the
same host, or rotated files, combine. Records are dicts (see parsers/records.py) with
`kind` = "request" or "call"; times in integer milliseconds.

The family of a source's profile picks its line parser and reassembler: a DOME profile
(DPM 1.10 on, docs/dome.md; named, or detected over the first lines when the pipeline is
given `on_dome_record`) reads its lines with parsers/dome_lines.py into the pipeline's
one DomeReassembler, whose records (`kind` dome_call, dome_put, dome_capacity,
dome_fs_event: parsers/dome_records.py) go to `on_dome_record`. Dating, counting, order
across sources and the event-time sweeps are the same code for both families.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from functools import cached_property
from collections.abc import Callable, Iterable

from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock, load_zone, stream_reference
from dpmstream.parsers.dome_lines import DAEMON as DOME_DAEMON
from dpmstream.parsers.dome_profiles import (
    DomeProfile, bundled_dome_profiles, detect_dome_profile, resolve_any_profile,
)
from dpmstream.parsers.fastpath import UNMATCHED_LINE
from dpmstream.parsers.lazylog import get_logger
from dpmstream.parsers.lines import (
    FOREIGN, MALFORMED, MAX_LINE_BYTES, ROUTED, UNMATCHED_RESULT, LineParser, bounded,
)
from dpmstream.parsers.plain import Value
from dpmstream.parsers.profiles import (
    Profile, ProfileError, bundled_profiles, detect_profile, match_line,
)
from dpmstream.parsers.reassembly import Reassembler, RequestKey, ThreadKey
from dpmstream.parsers.settings import ReassemblySettings

TYPE_CHECKING = False   # typing.TYPE_CHECKING; typing's import was ~11 M instructions of replay's start-up (issue 30)
if TYPE_CHECKING:
    from dpmstream.parsers.dome_lines import DomeLineParser

# The DOME engine's modules (dome_checksums, dome_state, the reassembler's) are imported
# where a DOME source starts or a DOME state is restored: a DPM log's replay needs none.

log = get_logger(__name__)  # lazylog: logging imported for a message written

DETECT_LINES = 200        # lines buffered to detect a file's profile
ADVANCE_EVERY = 4096      # lines between event-time timeout sweeps
EXAMPLES_KEPT = 20        # the first bad lines kept (truncated) for the summary
UNKNOWN_DAEMON = "unknown"
OTHER_PROGRAM = "other"   # the daemon label of syslog lines of programs no profile knows


class PipelineStats:
    """Counters of a pipeline run; read by the summary and the metrics exporter."""

    def __init__(self, reassembler: Reassembler):
        self._reassembler = reassembler
        self._linker = None  # set by the Pipeline
        self._other_lines: Counter = Counter()   # counts not kept by a source itself
        self._sources: list = []
        self.decode_errors = 0                   # lines that were not valid UTF-8
        # The first EXAMPLES_KEPT bad lines: (source, line no, reason, excerpt)
        self.bad_examples: list = []
        self.latest_received_ms: dict[str, int] = {}
        self._dome_reassembler = None  # once a DOME source started

    def count_dome(self, reassembler) -> None:
        """Read the DOME counters from `reassembler` from now on."""
        self._dome_reassembler = reassembler

    @property
    def dome(self):
        """The DOME reassembler's counters now (DomeStats), None before a DOME source
        started. Read each time: the compiled engine hands out a copy, not a live object."""
        r = self._dome_reassembler
        return None if r is None else r.stats

    def _counted(self):
        """Each (host, daemon, result) and its number of lines where they are kept (the
        pipeline's own counts, then each source's): what lines merges and totals sum."""
        yield from self._other_lines.items()
        for src in self._sources:
            if src.parser is not None:
                daemon = src.daemon
                yield (src.host, daemon, "parsed"), src.n_parsed
                yield (src.host, daemon, "unmatched"), src.n_unmatched
                yield (src.host, daemon, "malformed"), src.n_malformed
            yield from src.other_counts.items()

    @property
    def lines(self) -> Counter:
        """(host, daemon, result) -> number of lines, over every source."""
        merged: Counter = Counter()
        for key, n in self._counted():
            merged[key] += n
        return +merged  # drop zero counts

    @property
    def latest_event_ms(self) -> dict[str, int]:
        """host -> latest event time seen (ms)."""
        latest: dict[str, int] = {}
        for src in self._sources:
            for host, ts in src.latest_by_host.items():
                if ts > latest.get(host, -1):
                    latest[host] = ts
        return latest

    @property
    def reassembly(self):
        return self._reassembler.stats

    @property
    def linking(self):
        """Counts of the name-server linking (parsers/linking.py)."""
        return self._linker.stats if self._linker is not None else None

    @property
    def evictions(self) -> int:
        return self._reassembler.stats.evictions

    @property
    def expired(self) -> int:
        return self._reassembler.stats.expired

    @property
    def in_flight(self) -> int:
        return self._reassembler.in_flight

    @property
    def slow_queue_depth(self) -> int:
        return self._reassembler.slow_queue_depth

    @property
    def in_flight_by_host(self) -> dict[str, int]:
        """Open requests per host (computed on demand: O(open requests))."""
        return self._reassembler.in_flight_by_host()

    @property
    def slow_queue_by_host(self) -> dict[str, int]:
        """Requests waiting for a slow thread, per host (computed on demand)."""
        return self._reassembler.slow_queue_by_host()

    def total(self, result: str | None = None) -> int:
        return self.total_of(None if result is None else (result,))

    def total_of(self, results: tuple | None) -> int:
        """Lines with any of `results` (None: every line), over every source; summed where
        they are counted, no merged Counter made (the report asks after each chunk of 512
        lines: the Counter was ~10 us a time, ~2 ms of a report of the thesis log)."""
        return sum(n for (_, _, r), n in self._counted() if results is None or r in results)


# The compiled engine's window holds a ring position in 32 bits (native/src/window.rs);
# the Python engine keeps the same bound, so a setting means the same in both.
MAX_DUPLICATE_MEMORY = 1 << 31


class Pipeline:
    def __init__(self, on_record: Callable[[dict], None],
                 settings: ReassemblySettings = ReassemblySettings(), *,
                 profiles: list[Profile] | None = None,
                 expect_ns: bool = False, engine: str | None = None,
                 duplicate_memory: int = 1 << 17, learn_head: bool = True,
                 on_dome_record: Callable[[dict], None] | None = None):
        """settings: the caps and timeouts of reassembly (parsers/settings.py, checked as
        it was made). duplicate_memory: how many of the latest distinct lines a line read twice is
        recognised among (overlapping archives). learn_head: whether the head node's name
        as name-server clients see it is learned from the logs (docs/record-rules.md,
        "Linking"): off when the head node was named (--host, --head-alias).
        on_dome_record: where DOME records go; without it no DOME profile is detected
        (a driver whose sinks take DPM records only), and a DOME source cannot start."""
        if not 1 <= duplicate_memory <= MAX_DUPLICATE_MEMORY:
            raise ValueError(f"duplicate memory must be 1 to {MAX_DUPLICATE_MEMORY} lines, "
                             f"not {duplicate_memory}")
        # parsers/engines.py: the Python reference, or its compiled twin where built.
        self.engine = engines.choose(engine)
        self._engine_asked = engine  # the DOME engine's too (dome_engine)
        self.reassembler = engines.new_reassembler(
            self.engine, on_record, timeout_ms=settings.timeout_ms,
            max_in_flight=settings.max_in_flight, max_threads=settings.max_threads,
            grace_ms=settings.grace_ms, duplicate_memory=duplicate_memory)
        # Between the reassembler and on_record: name-server calls -> their request.
        self.linker = engines.new_linker(self.reassembler, on_record, settings.head_aliases,
                                         learn_head)
        self.linker.attach(self.reassembler)
        self.linker.expect_ns = expect_ns
        self.linker.detecting = None  # until a source detects its profile (_register)
        self.stats = PipelineStats(self.reassembler)
        self.stats._linker = self.linker
        self.profiles = profiles or bundled_profiles()
        # rsyslog program tag -> the profile reading that daemon's lines in a mixed file
        self.tag_profiles: dict[str, Profile] = {}
        for profile in self.profiles:
            for tag in profile.tags:
                self.tag_profiles.setdefault(tag, profile)
        self.sources: dict[str, Source] = {}
        self._undetected: set[Source] = set()
        self._silent_logs = 0   # see await_silent_logs
        self._since_advance = 0
        # DOME (docs/dome.md): its reassembler is made when the first DOME source starts.
        self._on_dome_record = on_dome_record
        self._dome_settings = dict(timeout_ms=settings.timeout_ms, max_calls=settings.max_threads,
                                   max_puts=settings.max_in_flight)
        self.dome = None

    @cached_property
    def dome_engine(self) -> str:
        """The DOME engine, chosen as the DPM one is, from its own availability; at the
        first DOME source (its modules are imported then: none for a DPM log)."""
        return engines.choose(self._engine_asked, available=engines.compiled_dome_available)

    @property
    def dome_profiles(self) -> list[DomeProfile]:
        """The DOME profiles a source's head is tried against when no DPM profile reads it
        (none without on_dome_record). Read and compiled at the first ask, which a DPM
        log's replay never makes: their regexes were a fifth of its start-up."""
        return bundled_dome_profiles() if self._on_dome_record is not None else []

    def source(self, name: str, *, host: str, path: str | None = None,
               profile: Profile | None = None, tz: str | None = None, year: int | None = None,
               year_hint_ms: int | None = None, ref: tuple[int, int] | None = None) -> "Source":
        """A new (or the existing) stream called `name`. Without `year`, its lines are
        dated by `ref`, the (year, month) of its last line where the caller knows it (the
        probe reads a log's tail), else by stream_reference(path, year_hint_ms)."""
        src = self.sources.get(name)
        if src is None:
            src = self.sources[name] = Source(self, name, host, path, profile, tz, year,
                                              year_hint_ms, ref)
        return src

    def await_silent_logs(self, count: int) -> None:
        """`count` logs the driver reads have given no line yet (0: none, or no longer
        waited for). Each may be the other log of a pair (a head node's DPM or name-server
        log, whatever host its lines name): until it speaks, request records wait as for
        a source still detecting its profile, so that its lines, once they come, do not
        find the records they link to already out. The driver bounds the wait (a log
        silent for long is quiet, or not the pair's: streams/live/feed.py)."""
        self._silent_logs = count
        self._ask_linker()

    def _detecting(self, host: str) -> bool:
        """Whether a source of `host` still buffers lines to detect its profile, or a log
        that may be any host's is awaited."""
        return self._silent_logs > 0 or any(src._pending and src.host == host
                                             for src in self._undetected)

    def _ask_linker(self) -> None:
        """The linker asks _detecting per record only while the answer may be yes."""
        self.linker.detecting = self._detecting if self._undetected or self._silent_logs \
            else None

    def _register(self, src: "Source") -> None:
        self._undetected.add(src)  # until its profile is known (Source._start)
        self._ask_linker()
        self.sources[src.name] = src
        self.stats._sources.append(src)

    def advance(self) -> None:
        self._since_advance = 0
        self.reassembler.advance()
        self.linker.advance()
        if self.dome is not None:
            now = self._dome_sources_time()
            if now is not None:
                self._emit_dome(self.dome.advance(now))

    def _line_done(self) -> None:
        """One more line read by some source: the event-time sweep every ADVANCE_EVERY."""
        self._since_advance += 1
        if self._since_advance >= ADVANCE_EVERY:
            self.advance()

    # -- DOME ----------------------------------------------------------------------------
    def _start_dome(self) -> None:
        if self._on_dome_record is None:
            raise ValueError("this command reads DPM logs only (a DOME profile needs a "
                             "pipeline with on_dome_record)")
        if self.dome is None:
            from dpmstream.parsers.dome_checksums import WithChecksumWaits
            self.dome = WithChecksumWaits(
                engines.new_dome_reassembler(self.dome_engine, **self._dome_settings))
            self._dome_receives()
            self.stats.count_dome(self.dome)
            if self.reassembler.tracking:
                self.dome.track_changes()

    def _dome_receives(self) -> None:
        """The compiled engine hands its records to on_dome_record itself when that is
        its own kind of receiver (the extension's DOME tally): no dict per record, the
        lists it returns empty. Otherwise they come back to _emit_dome."""
        receive = getattr(self.dome.reassembler, "receive", None)
        if receive is not None:
            receive(self._on_dome_record)

    def _feed_dome(self, ev) -> None:
        self._emit_dome(self.dome.feed(ev))

    def _emit_dome(self, records: list[dict]) -> None:
        for record in records:
            self._on_dome_record(record)

    def _dome_sources_time(self) -> int | None:
        """The event time every DOME source has read past (the least of their positions):
        DomeReassembler.advance's `now`. None before each has read a line."""
        positions = [src.position for src in self.sources.values() if src.dome]
        return min(positions) if positions and min(positions) >= 0 else None

    # -- state, for a restart ------------------------------------------------------------
    def track_changes(self) -> None:
        """From now on, take_changes() returns the net changes of the state."""
        self.reassembler.track_changes()
        self._stored: dict[str, set] = {"threads": set(), "requests": set(), "finished": set()}
        self._last_sources: dict[str, dict] = {}
        self._last_clock: dict | None = None
        self._last_linker: dict = {}  # a new linker holds nothing
        from dpmstream.parsers.dome_state import DomeStateTracker
        self._dome_state = DomeStateTracker()
        if self.dome is not None:
            self.dome.track_changes()

    def take_changes(self) -> "StateChanges":
        """What changed since the last take (everything, the first time). A thread,
        request or ended group gone is None, and only if an earlier take reported it: one
        created and gone between two takes is left out."""
        for src in self.sources.values():  # lines still buffered for detection are not state
            src.settle()
        core = self.reassembler.take_changes()
        changes = StateChanges(threads=self._net(core.threads, "threads"),
                               requests=self._net(core.requests, "requests"),
                               finished=self._net(core.finished, "finished"))
        for name, src in self.sources.items():
            if src.parser is not None:
                state = src.state()
                if self._last_sources.get(name) != state:
                    self._last_sources[name] = changes.sources[name] = state
        clock = self.reassembler.clock_state()
        if clock != self._last_clock:
            self._last_clock = changes.clock = clock
        linked = self.linker.state() or {}  # records held for name-server linking
        if linked != self._last_linker:
            self._last_linker = changes.linker = linked
        if self.dome is not None:   # per open call and put changed: parsers/dome_state.py
            taken = self.dome.take_changes()
            changes.dome = self._dome_state.take(taken["reassembler"], checksums=taken["checksums"])
        return changes

    def _net(self, changed: dict, kind: str) -> dict:
        stored = self._stored[kind]
        out = {}
        for key, state in changed.items():
            if state is not None:
                stored.add(key)
                out[key] = state
            elif key in stored:
                stored.discard(key)
                out[key] = None
        return out

    def restore(self, state: "StateChanges") -> None:
        """Rebuild a fresh pipeline from its whole state: every change taken, merged."""
        for name, src_state in state.sources.items():
            if src_state is not None:
                Source.from_state(self, name, src_state)
        whole = {kind: {k: s for k, s in getattr(state, kind).items() if s is not None}
                 for kind in ("threads", "requests", "finished")}
        self.reassembler.restore(whole["threads"], whole["requests"], state.clock,
                                 whole["finished"])
        self.linker.restore(state.linker)
        dome = {key: entry for key, entry in state.dome.items() if entry is not None}
        if dome:   # its DOME sources made an empty one: the stored one replaces it
            self._start_dome()
            from dpmstream.parsers.dome_checksums import ChecksumWaits, WithChecksumWaits
            from dpmstream.parsers.dome_state import CHECKSUMS, snapshot_of
            checksums = dome.get(CHECKSUMS)
            self.dome = WithChecksumWaits(
                engines.new_dome_reassembler(self.dome_engine, state=snapshot_of(dome),
                                             **self._dome_settings),
                None if checksums is None else ChecksumWaits.from_snapshot(checksums))
            self._dome_receives()
            self.stats.count_dome(self.dome)
        if self.reassembler.tracking:  # what is stored now: changes are taken against it
            for kind, states in whole.items():
                self._stored[kind].update(states)
            self._last_sources.update((k, s) for k, s in state.sources.items() if s is not None)
            self._last_clock = state.clock
            self._last_linker = state.linker or {}
            if self.dome is not None:   # what is stored now: changes are taken against it
                self.dome.track_changes()
                self.dome.take_changes()
            self._dome_state.restored(dome)

    def finish(self) -> None:
        for src in self.sources.values():
            src.settle()
            if src.n_unrecognised:
                log.warning("%s: no profile recognises %d of its lines (counted, not parsed)",
                            src.name, src.n_unrecognised)
        self.reassembler.finish()
        self.linker.finish()
        self._warn_if_nothing_linked()
        if self.dome is not None:
            self._emit_dome(self.dome.finish())
            self._warn_if_no_put_joined()

    def _warn_if_no_put_joined(self) -> None:
        """Putdones came, yet none joined a put: most likely whole-second stamps read in
        another zone than the nodes', as the join compares a put's local stamp with the
        UTC epoch in its replica's name (docs/dome.md; one line, once)."""
        stats = self.dome.stats
        orphans = stats.orphan_putdones
        if orphans >= 10 and stats.puts_joined == 0:
            zones = sorted({str(src.parser.clock.zone) for src in self.sources.values()
                            if src.dome and src.parser is not None})
            zones = [z if z != "localtime" else "this machine's zone" for z in zones]
            log.warning("no DOME put met its putdone (%d putdones joined no put): a put and "
                        "its putdone are joined by the UTC epoch in the replica's name, and "
                        "these stamps were read in %s; if the nodes log another zone, give "
                        "it with --tz", orphans, ", ".join(zones) or "UTC")

    def _warn_if_nothing_linked(self) -> None:
        """Requests and name-server calls naming paths were both read, yet no call linked:
        most likely the head node is not the name the name server saw (one line, once)."""
        clients = self.linker.unlinked_clients
        if clients:
            log.warning("no name-server call was linked to a request; name-server clients "
                        "seen: %s (name the head node as they call it with --head-alias)",
                        ", ".join(clients))


class StateChanges(Value):
    """Net changes of a pipeline's state (Pipeline.take_changes), or, merged, its whole
    state (Pipeline.restore). JSON-safe values; how they are stored is the edge's choice.

    threads, requests: the reassembly's open threads and requests (None: gone);
    finished: groups of ended requests' keys, so a late line stays late after a restore;
    sources: each stream's profile and clock; clock: the processes and host clocks;
    linker: what name-server linking holds. clock and linker are None when unchanged.
    dome: the DOME reassembler's entries (parsers/dome_state.py: one per open call and
    per open put, and the bounded rest).
    """

    __slots__ = FIELDS = ("threads", "requests", "finished", "sources", "clock", "linker", "dome")

    def __init__(self, threads: dict[ThreadKey, dict | None] | None = None,
                 requests: dict[RequestKey, dict | None] | None = None,
                 finished: dict[int, list[RequestKey] | None] | None = None,
                 sources: dict[str, dict | None] | None = None,
                 clock: dict | None = None, linker: dict | None = None,
                 dome: dict[str, object] | None = None):
        self.threads = {} if threads is None else threads
        self.requests = {} if requests is None else requests
        self.finished = {} if finished is None else finished
        self.sources = {} if sources is None else sources
        self.clock = clock
        self.linker = linker
        self.dome = {} if dome is None else dome

    def __bool__(self) -> bool:
        return bool(self.threads or self.requests or self.finished or self.sources
                    or self.clock is not None or self.linker is not None or self.dome)

    def merge(self, later: "StateChanges") -> None:
        """Apply changes taken after these: what a store of the whole state does."""
        for kind in ("threads", "requests", "finished", "sources", "dome"):
            mine = getattr(self, kind)
            for key, state in getattr(later, kind).items():
                if state is None:
                    mine.pop(key, None)
                else:
                    mine[key] = state
        if later.clock is not None:
            self.clock = later.clock
        if later.linker is not None:
            self.linker = later.linker


class Source:
    def __init__(self, pipeline: Pipeline, name: str, host: str, path: str | None,
                 profile: Profile | None, tz: str | None, year: int | None,
                 year_hint_ms: int | None, ref: tuple[int, int] | None = None):
        self.pipeline = pipeline
        self.name = name
        self.host = host
        self.path = path or name
        self.tz = tz
        self.year = year
        self.year_hint_ms = year_hint_ms
        self.ref = ref
        self.line_no = 0
        self.parser: LineParser | None = None
        self._pending: list[tuple[str, int | None]] = []
        # Line counts of this source's own host and daemon are plain ints (the hot path);
        # other (host, daemon, result) keys, e.g. rsyslog lines of other hosts, go here.
        self.n_parsed = self.n_unmatched = self.n_malformed = 0
        self.n_unrecognised = 0   # lines no profile recognised: warned about once, at finish
        self.other_counts: Counter = Counter()
        # host -> the latest event time of its lines read so far: never goes back
        self.latest_by_host: dict[str, int] = {}
        # A DPM source: latest_by_host[host] as an int, for the hot path's test (raised by
        # its own daemon's lines and by routed ones of its host alike); a DOME source: its
        # position, the latest of all its nodes' lines.
        self._latest = -1
        self._reassembler = pipeline.reassembler
        self._compiled_engine = engines.is_compiled(pipeline.reassembler)
        pipeline._register(self)
        self._received_cache: tuple[int, tuple[int, int]] | None = None
        self._routed: dict[str, LineParser] = {}
        self._linked: set[str] = set()  # the tags of _routed the engine reads (_link_routes)
        self.dome = False  # a DOME source: DomeLineParser, the pipeline's DomeReassembler
        if profile is not None:
            self._start(profile)

    @property
    def profile(self) -> Profile | DomeProfile | None:
        return self.parser.profile if self.parser else None

    @property
    def daemon(self) -> str:
        """The daemon its lines are counted under (DOME: dome_lines.DAEMON)."""
        return DOME_DAEMON if self.dome else self.parser.daemon

    @property
    def lines_fed(self) -> int:
        """Lines fed so far, those still buffered to detect the profile included."""
        return self.line_no + len(self._pending)

    @property
    def position(self) -> int:
        """How far in event time this source's lines have gone into the reassembly (-1
        before the first): what reading files side by side orders them by. A far-ahead
        line the reassembler holds or sets aside does not count."""
        if self.parser is None:
            return -1
        if self.dome:  # the DOME reassembler holds no line back: the latest stamp read
            return self._latest
        now = self._reassembler.stream_time(self.host, self.parser.daemon)
        return -1 if now is None else now

    def state(self) -> dict:
        profile = self.parser.profile
        return {"host": self.host, "path": self.path, "tz": self.tz, "year": self.year,
                "profile": profile.name, "profile_file": profile.source,
                "clock": self.parser.clock.state()}

    @classmethod
    def from_state(cls, pipeline: "Pipeline", name: str, state: dict) -> "Source":
        try:
            profile = resolve_any_profile(state["profile"])
        except ProfileError:
            profile = resolve_any_profile(state["profile_file"])
        src = cls(pipeline, name, state["host"], state["path"], profile, state["tz"],
                  state["year"], None)
        src.parser.clock.restore(state["clock"])
        return src

    def _start(self, profile: Profile | DomeProfile) -> None:
        if isinstance(profile, DomeProfile):
            self.pipeline._start_dome()
            self.dome = True
        self.parser = self._new_parser(profile)
        self.pipeline._undetected.discard(self)
        self.pipeline._ask_linker()
        log.info("%s: profile %s, time zone %s", self.name, profile.name, self.parser.clock.zone)

    def _new_parser(self, profile: Profile | DomeProfile) -> LineParser | DomeLineParser:
        zone_name = self.tz or profile.timezone
        ref = None
        if self.year is None:
            ref = self.ref or stream_reference(self.path, self.year_hint_ms, load_zone(zone_name))
        clock = EventClock(zone_name, year=self.year, ref=ref, zone_given=bool(self.tz))
        if self.dome:
            return engines.new_dome_parser(self.pipeline.dome_engine, profile, clock)
        return LineParser(profile, clock, self.host, frozenset(self.pipeline.tag_profiles))

    def _routed_parser(self, tag: str) -> LineParser:
        """The parser for another daemon's lines in this (mixed) file, by program tag."""
        parser = self._routed.get(tag)
        if parser is None:
            profile = self.pipeline.tag_profiles[tag]
            parser = self._routed[tag] = self._new_parser(profile)
            parser.other_tags = frozenset()  # its lines are its own: no routing onwards
            log.info("%s: lines tagged %r read with profile %s", self.name, tag, profile.name)
        return parser

    # -- input ---------------------------------------------------------------------------
    def feed(self, line: str | bytes, received_ms: int | None = None) -> None:
        line = bounded(line)  # a huge line is malformed: no decoding or copying all of it
        if isinstance(line, bytes):
            try:
                line = line.decode()
            except UnicodeDecodeError:
                line = line.decode("utf-8", "replace")  # a Latin-1 DN still parses
                self.pipeline.stats.decode_errors += 1
        line = line.rstrip("\r\n")
        if self.parser is None:
            self._pending.append((line, received_ms))
            if len(self._pending) >= DETECT_LINES:
                self._detect()
                if self.parser is None:
                    self._count_unrecognised()
            return
        self._parse(line, received_ms)

    def feed_lines(self, lines: Iterable[bytes | str]) -> None:
        """feed() for many lines without receive times: the replay and follow hot loop.
        A list or any indexable sequence of lines (iter_chunks' LineBlock) is fed as it is."""
        indexable = hasattr(lines, "__getitem__") and hasattr(lines, "__len__")
        self.feed_chunk(lines if indexable else list(lines))

    def feed_chunk(self, lines: list, start: int = 0, limit: int | None = None,
                   end: int | None = None, watch=None) -> int:
        """feed() for lines[start:end] (to the last line without `end`: a run of a block
        fed where it lies, no copy of it), stopping after the first line that takes this
        source past `limit` in event time (its position: replay's lanes). Returns the index
        after the last line fed (`end` when every one was). `watch` (a LineWatch,
        native/src/line_watch.rs, without `limit`): told after each line, as after a run
        ending there, the reassembler's latest time and orphans where it asks.

        With the compiled engine, the lines its parser takes (parsers/fastpath.py) are
        parsed and reassembled without Python; with the Python engine they go straight
        from the compiled parser to the reassembler. A DOME source's lines go to the
        compiled DOME engine's feed_chunk where it runs. Any other line takes feed()'s
        path, so the counts and the records are the same either way."""
        n, i = len(lines) if end is None else min(end, len(lines)), start
        if watch is not None:
            if limit is not None:
                raise ValueError("a watched feed runs to its end: no limit")
            if not (self._compiled_engine and not self.dome and self._takes_chunks()):
                return self._feed_watched(lines, i, n, watch)
        while i < n and not self._takes_chunks():
            self.feed(lines[i])  # line by line until the profile is known
            i += 1
            if limit is not None and self.position > limit:
                return i
        if i >= n:
            return i
        if self.dome:
            return self._feed_dome_compiled(lines, i, limit, n)
        if self._compiled_engine:
            return self._feed_compiled(lines, i, limit, n, watch)
        return self._feed_events(lines, i, limit, n)

    def _feed_watched(self, lines: list, i: int, n: int, watch) -> int:
        """feed_chunk's `watch` where the extension's loop does not feed the lines (the
        reference): runs of lines, each ending at the next line the watch looks after,
        one line at a time until the engine has an event time."""
        core = self._reassembler
        while i < n:
            at = watch.next_point
            stop = i + 1 if not watch.timed else n if at is None else min(at + 1, n)
            i = self.feed_chunk(lines, i, end=stop)
            watch.after(i - 1, core.latest, core.stat("orphans"))
        return i

    def _takes_chunks(self) -> bool:
        """Whether lines go to the compiled parser in chunks: a DPM profile the compiled
        parser reads, or a DOME source of the compiled DOME engine; else one by one."""
        if self.parser is None:
            return False
        if self.dome:
            return self.pipeline.dome_engine == engines.COMPILED
        return self.parser._fast is not None

    @staticmethod
    def _line_at(lines: list, i: int):
        """lines[i], or of a LineBlock no more than a too-long line's head (no copy of a
        huge line): what feed() takes."""
        head = getattr(lines, "head", None)
        return lines[i] if head is None else head(i, MAX_LINE_BYTES + 1)

    def _feed_compiled(self, lines: list, i: int, limit: int | None, n: int, watch=None) -> int:
        core, pipeline, parser = self._reassembler, self.pipeline, self.parser
        compiled = parser._compiled
        tried = -1  # the line at which the other form's parser was last tried
        if limit is not None and parser._prefixed is not None and parser.twin_host != self.host:
            # the engine's `limit` is its parser's host's stream time, position this host's
            parser.point_twin(self.host)
        while i < n:
            # the budget stops the extension at the sweep's turn or at the run's end
            budget = max(1, min(ADVANCE_EVERY - pipeline._since_advance, n - i))
            nxt, parsed, unmatched, latest, why, routed = core.feed_lines(compiled, lines, i, limit,
                                                                          budget, watch)
            self.line_no += nxt - i
            self.n_unmatched += unmatched
            host = self.host if compiled is parser._compiled else parser.twin_host
            if host == self.host:
                self.n_parsed += parsed
                if latest > self._latest:
                    self._latest = self.latest_by_host[host] = latest
            elif parsed:  # rsyslog lines of another host, counted as _parse counts them
                self._count_elsewhere(host, parser.daemon, parsed, latest)
            if routed is not None:
                self._count_routed(routed, host)
            pipeline._since_advance += nxt - i
            if pipeline._since_advance >= ADVANCE_EVERY:
                pipeline.advance()
            if watch is not None and nxt > i:  # the call's last line; the loop saw the others
                watch.after(nxt - 1, core.latest, core.stat("orphans"))
            i = nxt
            if why == engines.LIMIT:
                return i
            if why == engines.SLOW:  # a line the compiled parser leaves to Python
                # or to the other form's (native, rsyslog: LineParser._prefixed, once an
                # rsyslog line made it): a file of either form stays with one
                other = parser._prefixed if compiled is parser._compiled else parser._compiled
                if other is not None and tried != i:
                    compiled, tried = other, i
                    continue
                self.feed(self._line_at(lines, i))
                i += 1
                if len(self._linked) < len(self._routed):
                    self._link_routes()
                if limit is not None and self.position > limit:
                    return i
                if (limit is None and parser._prefixed is not None
                        and parser.prefix_host not in (None, parser.twin_host)):
                    parser.point_twin(parser.prefix_host)  # a file of another host's lines
                if watch is not None:
                    watch.after(i - 1, core.latest, core.stat("orphans"))
        return i

    def _count_routed(self, routed: list, host: str) -> None:
        """The lines feed_lines read with routed daemons' twins (all of `host`): counted as
        _parse counts a routed line, parsed by its host and unmatched by the source's."""
        for daemon, parsed, unmatched, latest in routed:
            if unmatched:
                self.other_counts[(self.host, daemon, UNMATCHED_RESULT)] += unmatched
            if parsed:
                self._count_elsewhere(host, daemon, parsed, latest)

    def _link_routes(self) -> None:
        """The engine reads a routed daemon's lines (LineParser.route_to) once the twins of
        this source's parser and of the routed one are built, which Python's reading of
        their first lines does."""
        for tag, routed in self._routed.items():
            if tag not in self._linked and self.parser.route_to(tag, routed):
                self._linked.add(tag)

    def _feed_dome_compiled(self, lines: list, i: int, limit: int | None, n: int) -> int:
        """A DOME source's lines through the compiled DOME engine's feed_chunk: counted,
        swept every ADVANCE_EVERY lines and stopped at `limit` as _parse_dome and
        _line_done do line by line, the same records in the same order."""
        pipeline, parser = self.pipeline, self.parser
        feed_chunk = pipeline.dome.feed_chunk
        while i < n:
            budget = max(1, min(ADVANCE_EVERY - pipeline._since_advance, n - i))
            chunk = feed_chunk(parser, lines, i, limit, budget, self._latest)
            self.line_no += chunk.next - i
            # counted as _parse_dome counts each line (both through _count_dome_parsed)
            self.n_unmatched += chunk.unmatched
            if chunk.foreign:
                self.other_counts[(self.host, OTHER_PROGRAM, FOREIGN)] += chunk.foreign
            for host, parsed, latest in chunk.hosts:  # each line names its node
                self._count_dome_parsed(host, parsed, latest)
            if chunk.latest > self._latest:
                self._latest = chunk.latest
            if chunk.why == engines.MALFORMED_LINE:  # the scanner's result and reason are its
                line = bounded(self._line_at(lines, chunk.next - 1))
                text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
                self._count_unparsed(parser, text.rstrip("\r\n"))
            if chunk.records:   # none when the engine hands them to its receiver itself
                pipeline._emit_dome(chunk.records)
            pipeline._since_advance += chunk.next - i
            if pipeline._since_advance >= ADVANCE_EVERY:
                pipeline.advance()
            i = chunk.next
            if chunk.why == engines.LIMIT:
                return i
            if chunk.why == engines.SLOW:  # not UTF-8 text: feed() decodes and counts it
                self.feed(self._line_at(lines, i))
                i += 1
            if limit is not None and self._latest > limit:   # its position
                return i
        return i

    def _count_dome_parsed(self, host: str, parsed: int, latest: int) -> None:
        """`parsed` DOME lines of `host`, the latest at `latest` (one line's, or a chunk's
        of that host). Another host's are counted as a DPM source's are (_count_elsewhere).
        The source's own host's differ from _parse's: a DOME file holds several nodes'
        lines, so _latest (the source's position) is the latest of them all, kept by the
        caller, and the own host's latest is tracked in latest_by_host apart from it."""
        if host == self.host:
            self.n_parsed += parsed
            if latest > self.latest_by_host.get(host, -1):
                self.latest_by_host[host] = latest
        else:
            self._count_elsewhere(host, DOME_DAEMON, parsed, latest)

    def _feed_events(self, lines: list, i: int, limit: int | None, n: int) -> int:
        fast = self.parser._fast
        unmatched = UNMATCHED_LINE
        feed_event, pipeline, host = self._reassembler.feed, self.pipeline, self.host
        while i < n:
            line = bounded(lines[i])
            i += 1
            try:
                text = (line.decode() if isinstance(line, bytes) else line).rstrip("\r\n")
            except UnicodeDecodeError:
                self.feed(line)
                text = None
            if text is not None:
                ev = fast(text)
                if ev is None:  # the compiled parser leaves this line to Python
                    self._parse(text, None)
                else:
                    self.line_no += 1
                    if ev is unmatched:
                        self.n_unmatched += 1
                    else:
                        self.n_parsed += 1
                        ts = ev[0]
                        if ts > self._latest:
                            self._latest = self.latest_by_host[host] = ts
                        feed_event(ev)
                    pipeline._since_advance += 1
                    if pipeline._since_advance >= ADVANCE_EVERY:
                        pipeline.advance()
            if limit is not None and self.position > limit:
                return i
        return i

    def _parse(self, line: str, received_ms: int | None) -> None:
        if self.dome:
            self._parse_dome(line, received_ms)
            return
        self.line_no += 1
        parser = self.parser
        if received_ms is not None:
            ref = self.received_ref(received_ms)
            if ref is not parser.line_ref:  # the same tuple while the hour is the same
                parser.line_ref = ref
        ev = parser.parse(line)
        if ev is None and parser.result == ROUTED:
            parser = self._routed_parser(parser.routed_tag)
            if received_ms is not None:
                parser.line_ref = self.received_ref(received_ms)
            ev = parser.parse(line)
            if ev is None:
                self._count_other(parser, line)
        elif ev is None:
            self._count_unparsed(parser, line)
        if ev is not None:
            ts, host = ev[0], ev[1]
            if host == self.host and parser is self.parser:
                self.n_parsed += 1
                if ts > self._latest:
                    self._latest = self.latest_by_host[host] = ts
            else:
                self._count_elsewhere(host, ev[2], 1, ts)
            self._reassembler.feed(ev)
            if received_ms is not None:
                self.pipeline.stats.latest_received_ms[host] = received_ms
        self.pipeline._line_done()

    def _count_elsewhere(self, host: str, daemon: str, parsed: int, latest: int) -> None:
        """`parsed` lines of another host or daemon than the source's (an rsyslog file's
        other hosts, a routed daemon's, a DOME file's other nodes'), the latest at
        `latest`: counted by host, as the run's totals read them. A routed daemon's line
        of the source's own host raises that host's latest as the daemon's own lines do
        (the two daemons' stamps interleave a little out of order)."""
        self.other_counts[(host, daemon, "parsed")] += parsed
        if latest > self.latest_by_host.get(host, -1):
            self.latest_by_host[host] = latest
            if host == self.host and latest > self._latest:
                self._latest = latest

    def _count_unparsed(self, parser, line: str) -> None:
        """A line this source's own parser gave no event for: malformed (remembered),
        another program's, or unmatched."""
        if parser.result == MALFORMED:
            self.n_malformed += 1
            self._remember_bad(parser.reason, line)
        elif parser.result == FOREIGN:
            self.other_counts[(self.host, OTHER_PROGRAM, FOREIGN)] += 1
        else:
            self.n_unmatched += 1

    def _parse_dome(self, line: str, received_ms: int | None) -> None:
        """One line of a DOME source: dated (its receive time's year, as _parse dates a
        DPM line) and counted as _parse does, its event into the DOME reassembly."""
        self.line_no += 1
        parser = self.parser
        if received_ms is not None:
            parser.line_ref = self.received_ref(received_ms)
        ev = parser.parse(line)
        if ev is None:
            self._count_unparsed(parser, line)
        else:
            ts, host = ev.ts, ev.host  # each line names its node (the syslog envelope)
            self._count_dome_parsed(host, 1, ts)
            if ts > self._latest:
                self._latest = ts
            self.pipeline._feed_dome(ev)
            if received_ms is not None:
                self.pipeline.stats.latest_received_ms[host] = received_ms
        self.pipeline._line_done()

    def _count_other(self, parser: LineParser, line: str) -> None:
        """A routed line its own profile could not parse either."""
        result = parser.result if parser.result != ROUTED else UNMATCHED_RESULT
        self.other_counts[(self.host, parser.daemon, result)] += 1
        if result == MALFORMED:
            self._remember_bad(parser.reason, line)

    def received_ref(self, received_ms: int) -> tuple[int, int]:
        """The (year, month) reference a line received at `received_ms` is dated by (the
        same tuple while the hour is the same: a caller may compare them by identity)."""
        cached = self._received_cache
        if cached is not None and abs(cached[0] - received_ms) < 3_600_000:
            return cached[1]
        dt = datetime.fromtimestamp(received_ms / 1000, tz=self.parser.clock.zone)
        ref = (dt.year, dt.month)
        self._received_cache = (received_ms, ref)
        return ref

    def _remember_bad(self, reason: str, line: str) -> None:
        examples = self.pipeline.stats.bad_examples
        if len(examples) < EXAMPLES_KEPT:
            excerpt = line[:160].encode("unicode_escape").decode("ascii")
            examples.append((self.name, self.line_no, reason, excerpt))
        log.debug("%s:%d: %s", self.name, self.line_no, reason)

    # -- profile detection ------------------------------------------------------------
    def _detect(self) -> None:
        lines = [line for line, _ in self._pending]
        profile = detect_profile(lines, self.pipeline.profiles)
        if profile is None and self.pipeline.dome_profiles:
            profile = detect_dome_profile(lines, self.pipeline.dome_profiles)
        if profile is None:
            return  # keep buffering up to a bound; settle() counts them
        self._start(profile)
        pending, self._pending = self._pending, []
        for line, received_ms in pending:
            self._parse(line, received_ms)

    def settle(self) -> None:
        """Decide the profile now from the lines buffered so far (a checkpoint is due)."""
        if self.parser is None and self._pending:
            self._detect()
            if self.parser is None:
                self._count_unrecognised()

    def _count_unrecognised(self) -> None:
        """No profile recognises these lines: count them (and go on detecting later ones)."""
        probe = self.pipeline.profiles[0]
        for line, _ in self._pending:
            self.line_no += 1
            has_envelope = match_line(probe, line)[0] is not None
            result = UNMATCHED_RESULT if has_envelope else MALFORMED
            self.other_counts[(self.host, UNKNOWN_DAEMON, result)] += 1
            if result == MALFORMED:
                self._remember_bad("no envelope (no profile recognises these lines)", line)
        self.n_unrecognised += len(self._pending)
        self._pending = []

    def feed_received(self, lines: list[str], received_ms: int | None,
                      ref: tuple[int, int] | None = None) -> None:
        """feed_lines() for lines received when feed(line, received_ms) gives them one
        (year, month) reference (Kafka: the worker groups them; received_ms is the last
        line's). Dated, counted and reassembled as feed() would; latest_received_ms takes
        received_ms for each host the lines gave events (feed(): that host's last one).
        `ref`: the reference received_ref gave the lines as they came, when the caller
        asked it already (it may have asked it since for a later line, which moves its
        cache: asked again, a line of the previous hour could take the later one's)."""
        if received_ms is None:
            self.feed_lines(lines)
            return
        if self.parser is None:  # detection keeps each line's time: feed() one by one
            for line in lines:
                self.feed(line, received_ms)
            return
        if ref is None:
            ref = self.received_ref(received_ms)
        for parser in (self.parser, *self._routed.values()):
            parser.line_ref = ref
        others = self.other_counts
        before = self.n_parsed, +others
        self.feed_lines(lines)
        latest = self.pipeline.stats.latest_received_ms
        if self.n_parsed > before[0]:
            latest[self.host] = received_ms
        for (host, _daemon, result), n in others.items():
            if result == "parsed" and n > before[1][(host, _daemon, result)]:
                latest[host] = received_ms
