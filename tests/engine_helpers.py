"""Differential runs of the reassembly engines (parsers/engines.py): one input through a
pipeline of each engine, and everything either one can show compared.

    outcome = run_engine("python", log_input, mode="replay")
    other = run_engine("compiled", log_input, mode="replay")
    assert not differences(outcome, other), differences(outcome, other)

    crossed = cross_engines("python", "compiled", log_input)   # state saved by one,
    control = cross_engines("python", "python", log_input)     # restored in the other
    assert not differences(control, crossed)

Modes (how the lines reach the pipeline):
- "replay": streams/replay_files.replay_inputs, `dpmstream replay`'s loop (files of a
  daemon in lanes, Source.feed_lines in chunks of CHUNK_LINES: the hot path);
- "lines": Source.feed(line, received_ms) line by line, the files merged in stamp order:
  what the Kafka worker does;
- "chunks": Source.feed_lines(chunk) + Pipeline.advance() per chunk, the files merged:
  what cross_engines cuts in two.

`pure=True` runs the pure-Python line parser (DPMSTREAM_PURE_PYTHON=1 for the run). That
variable also turns the compiled engine off (engines.compiled_available), so only the
Python engine runs with it: the pure-parser variant is compared against the Python
engine with the compiled parser.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable
from zoneinfo import ZoneInfo

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams import state_keys
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs

PURE_VAR = "DPMSTREAM_PURE_PYTHON"
CHUNK_LINES = 700         # small, so that chunk boundaries fall everywhere
SNAPSHOT_EVERY = 2000     # lines between counter snapshots in the "lines" mode
MODES = ("replay", "lines", "chunks")
SAME_RECORDS_OTHER_ORDER = "records: the same records in another order"


@dataclass(frozen=True)
class LogInput:
    """Files read as one run: one host's logs (a DPM log, its DPNS log, an rsyslog file)."""
    name: str
    paths: tuple[Path, ...]
    host: str = "dpmhead01.cern.ch"
    tz: str | None = None
    year: int | None = None

    @property
    def received_ms(self) -> int:
        """When the Kafka worker would have received the first line: January 1st of the
        input's year, noon (the per-line path needs some receive time)."""
        zone = ZoneInfo(self.tz or "UTC")
        return int(datetime(self.year or 2011, 1, 1, 12, tzinfo=zone).timestamp() * 1000)

    def read(self) -> list[list[bytes]]:
        return [path.read_bytes().splitlines(keepends=True) for path in self.paths]


@dataclass
class Outcome:
    """Everything observable of one run, JSON-safe, to compare between engines."""
    records: list[dict] = field(default_factory=list)
    counters: dict = field(default_factory=dict)        # after finish()
    snapshots: list[dict] = field(default_factory=list)  # counters along the way
    spans: list[tuple] = field(default_factory=list)     # Reassembler.on_span calls
    states: list[dict] = field(default_factory=list)     # encoded StateChanges, per take


# -- running ---------------------------------------------------------------------------

@contextlib.contextmanager
def line_parser(pure: bool):
    """The pure-Python line parser (pure=True) or the compiled one where built, for a run:
    both are chosen when a source's parser is made, so the variable is set around the run."""
    before = os.environ.get(PURE_VAR)
    if pure:
        os.environ[PURE_VAR] = "1"
    else:
        os.environ.pop(PURE_VAR, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PURE_VAR, None)
        else:
            os.environ[PURE_VAR] = before


def new_pipeline(engine: str, outcome: Outcome, inp: LogInput, settings: dict | None = None) -> Pipeline:
    """settings: ReassemblySettings' fields and Pipeline's options that differ from the
    defaults (e.g. duplicate_memory)."""
    settings = dict(settings or {})
    caps = {name: settings.pop(name) for name in ReassemblySettings.FIELDS if name in settings}
    pipeline = Pipeline(outcome.records.append, ReassemblySettings(**caps), engine=engine,
                        expect_ns=any(".dpns" in p.name for p in inp.paths), **settings)
    pipeline.reassembler.on_span = lambda *span: outcome.spans.append(span)
    return pipeline


def run_engine(engine: str, inp: LogInput, *, pure: bool = False, mode: str = "replay",
               settings: dict | None = None) -> Outcome:
    """One uninterrupted run of `inp` through a pipeline of `engine` (Pipeline `settings`:
    caps, timeout, grace)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    outcome = Outcome()
    with line_parser(pure):
        pipeline = new_pipeline(engine, outcome, inp, settings)
        if mode == "replay":
            replay_inputs(pipeline, [describe(str(p)) for p in inp.paths], host=inp.host,
                          profile=None, tz=inp.tz, year=inp.year,
                          progress=Progress(None, enabled=False), chunk_lines=CHUNK_LINES,
                          after_chunk=lambda src: outcome.snapshots.append(counters(pipeline)))
        else:
            schedule = chunk_schedule(inp) if mode == "chunks" else line_schedule(inp)
            feed_schedule(pipeline, inp, schedule, mode, outcome)
            outcome.snapshots.append(counters(pipeline))
            pipeline.finish()
        outcome.counters = counters(pipeline)
    return outcome


def cross_engines(first: str, second: str, inp: LogInput, *, pure: bool = False,
                  cut: float = 0.5, takes: int = 4) -> Outcome:
    """`first` reads the chunks before `cut`, its state taken `takes` times along the way
    (merged as a store does, through JSON); a fresh pipeline of `second` restores that
    state and reads the rest. The records are those of both; the states are every take of
    `first` and one take of `second` just before its finish(); the counters are those of
    `second` (counters are not state: they restart at zero)."""
    schedule = chunk_schedule(inp)
    at = max(1, int(len(schedule) * cut))
    every = max(1, at // takes)
    outcome = Outcome()
    store: dict[str, object] = {}

    def take(pipeline):
        flat = json.loads(json.dumps(state_keys.encode(pipeline.take_changes())))
        outcome.states.append(flat)
        store.update(flat)

    with line_parser(pure):
        before = new_pipeline(first, outcome, inp)
        before.track_changes()
        for i in range(0, at, every):
            feed_schedule(before, inp, schedule[i:min(i + every, at)], "chunks", outcome)
            take(before)
        outcome.snapshots.append(counters(before))
        after = new_pipeline(second, outcome, inp)
        after.track_changes()
        after.restore(state_keys.decode(store))
        for i in range(at, len(schedule), every):
            feed_schedule(after, inp, schedule[i:i + every], "chunks", outcome)
            take(after)
        outcome.snapshots.append(counters(after))
        after.finish()
        outcome.counters = counters(after)
    return outcome


def feed_schedule(pipeline: Pipeline, inp: LogInput, schedule, mode: str, outcome: Outcome):
    """Feed (file index, lines) items: whole chunks by feed_lines (+ advance), or line by
    line by feed with a receive time (a snapshot of the counters now and then)."""
    fed = 0
    for index, lines in schedule:
        path = inp.paths[index]
        src = pipeline.source(path.name, host=inp.host, path=str(path), tz=inp.tz, year=inp.year)
        if mode == "chunks":
            src.feed_lines(lines)
            pipeline.advance()
            continue
        for line in lines:
            src.feed(line, received_ms=inp.received_ms + fed)
            fed += 1
            if fed % SNAPSHOT_EVERY == 0:
                outcome.snapshots.append(counters(pipeline))


# Native envelope stamp "MM/DD HH:MM:SS" (or rsyslog's ISO stamp) at a line's start.
_STAMP = re.compile(rb"^(?:(\d\d)/(\d\d) (\d\d:\d\d:\d\d)|\d{4}-(\d\d)-(\d\d)T(\d\d:\d\d:\d\d))")


def _stamped(index: int, lines: list[bytes]):
    """(order key, index, line): a line without a stamp keeps the one before it; a month
    going back (a year end) moves into the next year."""
    last, years, month = b"", 0, None
    for line in lines:
        m = _STAMP.match(line)
        if m:
            mo, day, hms = (m.group(1), m.group(2), m.group(3)) if m.group(1) else m.group(4, 5, 6)
            if month is not None and mo < month:
                years += 1
            month = mo
            last = b"%d %s/%s %s" % (years, mo, day, hms)
        yield last, index, line


def merged(inp: LogInput) -> list[tuple[int, bytes]]:
    """The input's files merged into one stream in stamp order (stable: a collector's view)."""
    streams = [_stamped(i, lines) for i, lines in enumerate(inp.read())]
    return [(index, line) for _, index, line in heapq.merge(*streams, key=lambda t: t[0])]


def _runs(items: list[tuple[int, bytes]], size: int):
    """Consecutive lines of one file, at most `size` a run."""
    out, current, index = [], [], None
    for i, line in items:
        if i != index or len(current) >= size:
            if current:
                out.append((index, current))
            current, index = [], i
        current.append(line)
    if current:
        out.append((index, current))
    return out


def chunk_schedule(inp: LogInput):
    return _runs(merged(inp), CHUNK_LINES)


def line_schedule(inp: LogInput):
    return _runs(merged(inp), 1 << 30)


# -- what is compared ------------------------------------------------------------------

def counters(pipeline: Pipeline) -> dict:
    """The pipeline's counters and gauges, JSON-safe (what the summary and metrics show)."""
    stats, reassembler = pipeline.stats, pipeline.reassembler
    return json.loads(json.dumps({
        "lines": sorted([*key, n] for key, n in stats.lines.items()),
        "decode_errors": stats.decode_errors,
        "bad_examples": list(stats.bad_examples),
        "reassembly": stats.reassembly.as_dict(),
        "linking": stats.linking.as_dict(),
        "in_flight": stats.in_flight,
        "slow_queue_depth": stats.slow_queue_depth,
        "in_flight_by_host": stats.in_flight_by_host,
        "slow_queue_by_host": stats.slow_queue_by_host,
        "latest_event_ms": stats.latest_event_ms,
        "hosts": reassembler.hosts(),
        "watermarks": {host: reassembler.watermark(host) for host in reassembler.hosts()},
        "positions": {name: src.position for name, src in pipeline.sources.items()},
        "restarts": list(reassembler.restart_log),
        "linker_held": pipeline.linker.held,
    }))


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def differences(want: Outcome, got: Outcome, *, order: str = "exact", limit: int = 5) -> list[str]:
    """How `got` differs from `want` (empty: identical). Records in emission order
    (order="exact") or as multisets (order="multiset"); everything else exactly."""
    out = record_differences(want.records, got.records, order=order, limit=limit)
    out += _dict_differences("counters", want.counters, got.counters)
    if len(want.snapshots) != len(got.snapshots):
        out.append(f"snapshots: {len(want.snapshots)} wanted, {len(got.snapshots)} got")
    for i, (a, b) in enumerate(zip(want.snapshots, got.snapshots)):
        found = _dict_differences(f"snapshot {i}", a, b)
        if found:
            out += found
            break  # the first snapshot that differs says enough
    out += _sequence_differences("spans", [canonical(s) for s in want.spans],
                                 [canonical(s) for s in got.spans], limit)
    if len(want.states) != len(got.states):
        out.append(f"states: {len(want.states)} takes wanted, {len(got.states)} got")
    for i, (a, b) in enumerate(zip(want.states, got.states)):
        found = _dict_differences(f"state take {i}", a, b)
        if found:
            out += found[:limit]
            break
    return out


def record_differences(want: list[dict], got: list[dict], *, order: str = "exact",
                       limit: int = 5) -> list[str]:
    a, b = [canonical(r) for r in want], [canonical(r) for r in got]
    if order == "multiset":
        a, b = sorted(a), sorted(b)
    elif order != "exact":
        raise ValueError(f"order must be exact or multiset, not {order!r}")
    out = _sequence_differences("records", a, b, limit)
    if out and order == "exact" and sorted(a) == sorted(b):
        out.insert(0, SAME_RECORDS_OTHER_ORDER)
    return out


def _sequence_differences(what: str, a: list[str], b: list[str], limit: int) -> list[str]:
    if a == b:
        return []
    out = [f"{what}: {len(a)} wanted, {len(b)} got"]
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    wanted = a[first] if first < len(a) else "(end)"
    got = b[first] if first < len(b) else "(end)"
    out.append(f"{what}: first difference at #{first}: wanted {wanted} got {got}")
    missing, extra = Counter(a) - Counter(b), Counter(b) - Counter(a)
    out += [f"{what}: missing {x} (x{n})" for x, n in list(missing.items())[:limit]]
    out += [f"{what}: extra {x} (x{n})" for x, n in list(extra.items())[:limit]]
    return out


def _dict_differences(what: str, a: dict, b: dict) -> list[str]:
    return [f"{what}: {key}: wanted {a.get(key, '(none)')!r} got {b.get(key, '(none)')!r}"
            for key in sorted(a.keys() | b.keys()) if a.get(key) != b.get(key)]


# -- whether the Python engine leaves the order open -------------------------------------

class _ReversedSet(set):
    """A set iterated largest first: another order CPython's could have had."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self), reverse=True))


@contextlib.contextmanager
def _processes_iterating_threads_backwards():
    from dpmstream.parsers import reassembly

    original = reassembly.Process

    class Process(original):
        __slots__ = ()

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.tids = _ReversedSet(self.tids)

    reassembly.Process = Process
    try:
        yield
    finally:
        reassembly.Process = original


def order_is_free(python_run: Callable[[], Outcome]) -> bool:
    """Whether the Python engine's own emission order in `python_run` (a run of the
    "python" engine) depends on the iteration order of a set: a process's thread ids
    (Process.tids), which _retire_processes and _on_startup walk to cut the calls left
    open (each a record, and a chance for the linker to release what it held). They are
    walked lowest first, as the compiled engine walks them, so it must not: the engines
    are compared record for record in order."""
    plain = python_run()
    with _processes_iterating_threads_backwards():
        backwards = python_run()
    return [canonical(r) for r in plain.records] != [canonical(r) for r in backwards.records]
