"""Where the report's records come from: log files run through the replay's pipeline,
or the requests.csv/calls.csv (and DOME's dome-*.csv) a `dpmstream replay --out DIR`
wrote. This is the edge (files, the pipeline); report/analysis.py only sees the records."""

from __future__ import annotations

import csv
import os

from dpmstream.parsers import dome_records, engines
from dpmstream.parsers.clock import load_zone
from dpmstream.parsers.records import CALL_MS_FIELDS, REQUEST_MS_FIELDS, key_of, text_to_ms
from dpmstream.report.analysis import Busy, start_of
from dpmstream.report.dome_analysis import is_dome, time_of
from dpmstream.report.spans import busy_spans
from dpmstream.report.window import WindowError, in_window, parse_moment
from dpmstream.streams.sinks.csv import DOME_FILES
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs
from dpmstream.streams.sinks.summary import Summary, label_zone, moment_text
from dpmstream.streams.sinks.tally import Aggregates

INT_FIELDS = frozenset(("nfiles", "polls", "pid", "thread", "rc", "ns_calls"))
DOME_INT_FIELDS = frozenset(("pid", "tid", "http_code", "put_code", "putdone_code", "size",
                             "phys", "free", "cut", "whole_seconds", "transition"))
MS_FIELDS = REQUEST_MS_FIELDS | CALL_MS_FIELDS   # record keys
TOP_DIRECTORIES = 10
REPORT_CHUNK_LINES = 512   # lines between time marks of unparsed lines and restarts


class SourceError(Exception):
    pass


class Dataset:
    """What the page is made from: the window's records and what the reading counted."""

    # A plain class, not a dataclass: every report imports it, and a dataclass compiles
    # its generated methods as its module is imported (issue 30).
    __slots__ = ("requests", "calls", "summary", "zone", "since", "until", "restarts",
                 "unparsed", "lines", "restarts_total", "origin", "inputs", "failures",
                 "stats", "spans", "whatif", "directories", "dome")

    def __init__(self, *, requests: list | None = None, calls: list | None = None,
                 zone: object = None, origin: str = "", inputs: list | None = None):
        self.requests = [] if requests is None else requests
        self.calls = [] if calls is None else calls
        self.summary = Summary()     # the replay's table, over the window
        self.zone = zone
        self.since: int | None = None
        self.until: int | None = None
        self.restarts: list = []     # (ms, daemon or "")
        self.unparsed: list = []     # (ms, lines)
        self.lines: dict | None = None   # parsed/unmatched/malformed, from logs only
        self.restarts_total: int | None = None
        self.origin = origin         # "logs" or "replay output"
        self.inputs = [] if inputs is None else inputs
        self.failures = 0
        self.stats: object = None    # the pipeline's counters, from logs only
        # Busy intervals of each kind of thread, from the log itself (logs only): "slow"
        # (processing runs), "fast" (every DPM call, status polls included), "ns"; each
        # an analysis.Busy (their steps, count and summed ms).
        self.spans: dict | None = None
        self.whatif: object = None   # report/whatif.WhatIfAnswer, when asked for
        # The top directories by name-server time (streams/sinks/directories.py rows),
        # when the name-server calls carry their paths (logs) or the replay wrote
        # directories.csv.
        self.directories: list | None = None
        # The DOME records (dome_call, dome_put, dome_capacity, dome_fs_event) in the
        # window, each by its own time (report/dome_analysis.TIME_OF).
        self.dome: list = []


class WindowFilter:
    """Keeps the records that start in the window; the window's forms without a date are
    dated by the first record seen. Each request and call kept goes to `tally` (the
    dataset's summary, or streams/sinks/tally.Aggregates: the summary and the directory
    table, gathered in the extension). `zone_of`: the dataset's zone, asked for at the
    first record when it has none."""

    def __init__(self, data: Dataset, since_text: str | None, until_text: str | None,
                 tally=None, zone_of=None):
        self.data, self.texts, self.resolved = data, (since_text, until_text), False
        self.tally = tally if tally is not None else data.summary
        self.zone_of = zone_of
        # Without --since/--until every record is kept and nothing needs dating: the
        # window is open from the start, and no record's time is looked up.
        self.bounded = bool(since_text or until_text)
        if not self.bounded:
            self.resolve(None)

    def __call__(self, record: dict) -> None:
        if self.data.zone is None and self.zone_of is not None:
            self.data.zone = self.zone_of()   # before the window is dated in it
        dome = is_dome(record)
        if self.bounded and not self.inside(record, dome):
            return
        if dome:
            self.data.dome.append(record)
            return
        self.tally.write(record)
        self.write(record)

    def write(self, record: dict) -> None:
        """A request or call of the window, tallied, kept in the dataset: the compiled
        tally's forward where the window is open (from_logs), the rest of __call__ else."""
        if self.data.zone is None and self.zone_of is not None:
            self.data.zone = self.zone_of()
        if record["kind"] == "request":
            if not record.get("op"):
                # An orphan abortreq names no op: one bucket, as the summary has (its
                # tallies take a missing op as "?", so it may come before or after them).
                record["op"] = "?"
            self.data.requests.append(record)
        else:
            self.data.calls.append(record)

    def inside(self, record: dict, dome: bool) -> bool:
        t = time_of(record) if dome else \
            start_of(record) if record["kind"] == "request" else record.get("started")
        if not self.resolved:
            self.resolve(t)
        return in_window(t, self.data.since, self.data.until)

    def resolve(self, first_ms: int | None) -> None:
        since, until = self.texts
        zone = self.data.zone
        self.data.since = parse_moment(since, zone, first_ms) if since else None
        self.data.until = parse_moment(until, zone, first_ms) if until else None
        self.resolved = True
        if None not in (self.data.since, self.data.until) and self.data.since >= self.data.until:
            raise WindowError(
                f"--since {since} ({moment_text(self.data.since, zone)}) is not before "
                f"--until {until} ({moment_text(self.data.until, zone)}): nothing to report")


def from_replay_dir(path: str, zone_name: str | None, since: str | None,
                    until: str | None) -> Dataset:
    req_path, call_path = (os.path.join(path, n) for n in ("requests.csv", "calls.csv"))
    if not os.path.exists(req_path):
        raise SourceError(f"{path}: no requests.csv (is it a `dpmstream replay --out` directory?)")
    data = Dataset(zone=load_zone(zone_name), origin="replay output", inputs=[path])
    keep = WindowFilter(data, since, until)
    files = [("request", req_path), ("call", call_path)]
    files += [(kind, os.path.join(path, name)) for kind, name in DOME_FILES.items()]
    for kind, file_path in files:
        if not os.path.exists(file_path):
            continue
        with open(file_path, newline="", encoding="utf-8") as f:
            for line_no, row in enumerate(csv.DictReader(f), start=2):
                keep(_record(kind, row, file_path, line_no))
    if not keep.resolved:
        keep.resolve(None)
    dirs_path = os.path.join(path, "directories.csv")
    if os.path.exists(dirs_path):  # the whole replay's, not the window's
        with open(dirs_path, newline="", encoding="utf-8") as f:
            data.directories = list(csv.DictReader(f))[:TOP_DIRECTORIES]
    return data


def _record(kind: str, row: dict, file_path: str, line_no: int) -> dict:
    """A CSV row (by column) as the record the engine gave (by key: `auth_s` seconds come
    back as `auth_ms` milliseconds)."""
    record = {"kind": kind}
    dome = kind in DOME_FILES
    ms_fields = dome_records.KINDS[kind][1] if dome else MS_FIELDS
    ints = DOME_INT_FIELDS if dome else INT_FIELDS
    try:
        for column, text in row.items():
            if column is None:
                raise ValueError("more cells than columns")
            key = column if dome else key_of(column)
            if key in ms_fields:
                record[key] = text_to_ms(text)
            elif key in ints:
                record[key] = int(text) if text not in ("", None) else None
            else:
                record[key] = text if text != "" else None
    except (ValueError, TypeError) as exc:
        raise SourceError(f"{file_path}:{line_no}: not a record row: {exc}") from None
    return record


def from_logs(inputs, *, host: str, profile, tz: str | None, year: int | None,
              settings: ReassemblySettings, since: str | None, until: str | None,
              progress: Progress) -> Dataset:
    """The records of log files, read as `dpmstream replay` reads them, with the same
    reassembly `settings` (commands.common.reassembly_settings)."""
    data = Dataset(origin="logs", inputs=[i.name for i in inputs])
    data.zone = load_zone(tz) if tz else None
    directories = DirectoryStats()
    # The summary and the directory table as `dpmstream replay` gathers them: in the
    # extension where the compiled engine runs (no Python per record for them).
    aggregates = Aggregates(data.summary, directories,
                            compiled=engines.choose() == engines.COMPILED)
    # Without a zone given: the zone the first file's profile reads stamps in.
    keep = WindowFilter(data, since, until, aggregates,
                        zone_of=lambda: label_zone(pipeline.sources.values()))
    # An open window keeps every request and call: the compiled tally takes each from the
    # engine as it is (no dict read back), then hands its dict to be kept (issue 30: four
    # Python calls a record, and the tally reading each dict, were ~5 ms CPU of a report
    # of the thesis log). DOME records, a window, the Python tally: keep() each record.
    on_record = keep
    if aggregates.compiled and not keep.bounded:
        on_record = aggregates.on_record(FanOut([keep]))
    pipeline = Pipeline(on_record, settings, on_dome_record=keep)
    spans = busy_spans(engines.is_compiled(pipeline.reassembler))
    pipeline.reassembler.on_span = spans
    marks = _MarkTaker(pipeline)
    data.failures, sources = replay_inputs(
        pipeline, inputs, host=host, profile=profile, tz=tz, year=year, progress=progress,
        command="dpmstream report", chunk_lines=REPORT_CHUNK_LINES, after_chunk=marks)
    if data.zone is None:
        data.zone = label_zone(sources)
    if not keep.resolved:
        keep.resolve(None)
    stats = pipeline.stats
    if not stats.total("parsed"):
        raise SourceError(f"no DPM, DPNS, SRM or DOME line was parsed in {', '.join(data.inputs)}: "
                          "wrong files, or a profile that does not fit (try `dpmstream "
                          "profile check FILE`); no page written")
    data.lines = {r: stats.total(r) for r in ("parsed", "unmatched", "malformed")}
    data.lines["not UTF-8"] = stats.decode_errors
    data.restarts_total = stats.reassembly.restarts
    data.stats = stats
    data.restarts = [(t, d) for t, _, d in pipeline.reassembler.restart_log
                     if in_window(t, data.since, data.until)]
    data.spans = {kind: Busy(*b) for kind, b in spans.held(data.since, data.until).items()}
    aggregates.close()
    data.directories = directories.top(TOP_DIRECTORIES) or None
    data.unparsed = [(t, n) for t, n in marks.unparsed if in_window(t, data.since, data.until)]
    return data


UNPARSED = ("unmatched", "malformed")


class _MarkTaker:
    """Places the unparsed lines counted in each chunk at the latest event time the source
    had read by then (so within REPORT_CHUNK_LINES lines of where they were); counts
    before any dated line wait for the first date. (Restarts carry their own time: the
    reassembler's restart_log.)"""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.bad = 0
        self.undated_bad = 0
        self.unparsed: list = []

    def __call__(self, src) -> None:
        bad = self.pipeline.stats.total_of(UNPARSED)
        self.undated_bad += bad - self.bad
        self.bad = bad
        when = max(src.latest_by_host.values(), default=None)
        if when is None:
            return
        if self.undated_bad:
            self.unparsed.append((when, self.undated_bad))
        self.undated_bad = 0