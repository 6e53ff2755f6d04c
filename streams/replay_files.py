"""Archived files through a pipeline: the loop `dpmstream replay` and
`dpmstream report` share, so both read the same lines into the same records."""

from __future__ import annotations

import itertools
import sys
from datetime import datetime, timedelta, timezone
from collections.abc import Callable

from dpmstream.parsers.clock import ClockError, offset_name, rfc3339_offset_minutes, rfc3339_to_ms
from dpmstream.parsers.lazylog import get_logger
from dpmstream.parsers.linking import NS_DAEMON
from dpmstream.streams.inputs import OpenedInput, iter_chunks, open_once, repeated_prefix
from dpmstream.streams.lanes import lanes_of, run_lanes
from dpmstream.parsers.pipeline import Pipeline, Source
from dpmstream.streams.progress import Progress

log = get_logger("dpmstream.replay")  # lazylog: logging imported for a message written

# Inputs held open, their heads in memory, from their recognition to their turn; those
# after are closed once recognised and opened again when read (their head read twice).
HELD_INPUTS = 32


def replay_inputs(pipeline: Pipeline, inputs, *, host: str, profile, tz, year,
                  progress: Progress, command: str = "dpmstream replay",
                  chunk_lines: int = 8192,
                  after_chunk: Callable[[Source], None] | None = None) -> tuple[int, list[Source]]:
    """Feeds every input (streams/inputs.describe) into `pipeline` and finishes it.

    The files of different daemons are read side by side in event time, those of one
    daemon one after another in the order given (streams/lanes.py), so that name-server
    calls meet their requests. A file whose content begins like an earlier input's is
    compared with it line by line, and the repeated lines are counted once.

    Returns (inputs that failed, the sources). A file that cannot be opened or ends early
    is reported on stderr and counted; the lines read before the damage are kept.
    `after_chunk(source)` runs after every `chunk_lines` lines (the report's time marks)."""
    sources: list[Source] = []
    state = {"done_before": 0, "lines": 0, "failures": 0}
    read_before: dict[bytes, object] = {}  # content fingerprint -> the input read with it
    heads: dict[int, OpenedInput | OSError] = {}  # id(input) -> opened once, or why not
    opened: dict[int, tuple] = {}  # id(source) -> (input, its OpenedInput)

    def first_lines(inp) -> list[bytes]:
        """Each input opened once: its head recognises it, and is fed again from memory."""
        try:
            head = heads[id(inp)] = open_once(inp)
        except OSError as exc:
            heads[id(inp)] = exc   # reported when its turn comes
            return []
        if len(heads) > HELD_INPUTS:
            head.release()
        return head.first_lines

    def open_input(inp):
        """(source, its lines) for one input, or None (reported, counted as a failure)."""
        src = pipeline.source(inp.name, host=host, path=inp.path or "-",
                              profile=lane_profile.get(id(inp)), tz=tz,
                              year=year, year_hint_ms=inp.mtime_ms)
        sources.append(src)
        head = heads.pop(id(inp))
        try:
            if isinstance(head, OSError):
                raise head
            stream, raw = head.stream_again(), head.raw
        except OSError as exc:
            print(f"{command}: {inp.name}: {exc}", file=sys.stderr)
            state["failures"] += 1
            return None
        digest = head.fingerprint
        first: list[bytes] = []
        earlier = read_before.get(digest) if digest else None
        if earlier is not None:  # the same archive again, or a longer copy of it
            repeated, first_new = repeated_prefix(stream, earlier)
            pipeline.reassembler.count_duplicates(repeated)
            log.warning("%s: its first %d lines repeat %s: counted once", inp.name,
                        repeated, earlier.name)
            if first_new is not None:
                first.append(first_new)
        elif digest:
            read_before[digest] = inp
        opened[id(src)] = (inp, head)

        def chunks():
            if first:
                yield first
            zone_checked = False
            for chunk in iter_chunks(stream, chunk_lines):
                yield chunk
                if not zone_checked and src.parser is not None and not src.dome:
                    zone_checked = True   # once an input, on its first chunk; only a --tz
                    # can disagree (without it the lines are read in their own offset)
                    clock = src.parser.clock
                    warning = clock.zone_given and zone_disagreement(chunk, src.parser.profile,
                                                                     clock.zone)
                    if warning:
                        log.warning("%s: %s", inp.name, warning)
                progress.update(state["done_before"] + (raw.tell() if not inp.once else 0),
                                state["lines"] + src.line_no)
                if after_chunk is not None:
                    after_chunk(src)
        return src, chunks()

    def input_end(lane, error=None) -> None:
        inp, head = opened.pop(id(lane.src))
        if error is not None:
            print(f"{command}: {inp.name}: {error}; the lines before it are kept",
                  file=sys.stderr)
            state["failures"] += 1
        state["lines"] += lane.src.lines_fed
        head.close()
        state["done_before"] += inp.size or 0

    lanes = lanes_of(inputs, pipeline.profiles, profile, open_input, lambda: pipeline.dome_profiles,
                     first_lines=first_lines)
    # Each input's source reads with the profile it was recognised by (or the forced one).
    lane_profile = {id(inp): p for lane in lanes for inp, p in
                    ((inp, lane.profiles[id(inp)]) for inp in lane.inputs)}
    # A name-server log among the inputs: every request record waits for its calls.
    pipeline.linker.expect_ns = any(lane.name == NS_DAEMON for lane in lanes)
    run_lanes(lanes, input_end)
    pipeline.finish()
    warn_about_years(sources)
    if after_chunk is not None and sources:
        after_chunk(sources[-1])   # what the end of input settled (undetected files, timeouts)
    progress.close()
    return state["failures"], sources


YEAR_APART_MS = 183 * 86_400_000   # logs of different daemons read side by side, this far apart


def warn_about_years(sources: list[Source]) -> None:
    """One line for each input whose year was guessed from this machine's clock (no year
    in its stamps, no --year, no file date: stdin), and one when the inputs of different
    daemons, which a replay reads side by side, end half a year or more apart."""
    ends = []   # (latest event time, daemon, name)
    for src in sources:
        if src.parser is None:
            continue
        if src.parser.clock.year_guessed:
            log.warning("%s: no year in its stamps and no file date: read as %d, this "
                        "machine's year (give --year)", src.name, src.parser.clock.year)
        latest = max(src.latest_by_host.values(), default=None)   # rsyslog: the lines' hosts
        if latest is not None:
            ends.append((latest, src.daemon, src.name))
    if len({daemon for _, daemon, _ in ends}) > 1:
        first, last = min(ends), max(ends)
        if last[0] - first[0] >= YEAR_APART_MS and first[1] != last[1]:
            log.warning("the inputs disagree on the year: %s ends %s, %s ends %s (give --year, "
                        "or inputs of one time)", first[2], _day(first[0]), last[2], _day(last[0]))


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


ZONE_CHECK_LINES = 100


def zone_disagreement(lines, profile, zone) -> str | None:
    """Why the --tz zone `zone`, in which the stamps are read, is not the one the lines
    carry (an rsyslog prefix stating +02:00 where Europe/London is +01:00), from the first
    rsyslog line among `lines`; None when they agree or no line tells. Without --tz the
    stamps are read in the prefix's own offset: nothing to disagree with."""
    for raw in itertools.islice(lines, ZONE_CHECK_LINES):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        prefix = profile.rsyslog_prefix.match(text)
        if prefix is None:
            continue
        carried = prefix.group("rtime")
        try:
            stated, received = rfc3339_offset_minutes(carried), rfc3339_to_ms(carried)
        except ClockError:
            continue
        at = datetime.fromtimestamp(received / 1000, tz=zone)
        if at.utcoffset() == timedelta(minutes=stated):
            return None
        return (f"its rsyslog times carry {offset_name(stated)} but --tz {zone} is "
                f"{offset_name(at.utcoffset() // timedelta(minutes=1))} ({at:%Z}) then: its "
                "stamps are read in --tz (leave --tz out to read them in the lines' offset)")
    return None
