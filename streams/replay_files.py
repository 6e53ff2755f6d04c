"""Archived files through a pipeline, in the order given: the loop `dpmstream replay` and
`dpmstream report` share, so both read the same lines into the same records."""

from __future__ import annotations

import logging
import sys
from typing import Callable

from dpmstream.streams.inputs import (
    InputError, fingerprint, iter_chunks, open_binary, repeated_prefix,
)
from dpmstream.streams.pipeline import Pipeline, Source
from dpmstream.streams.progress import Progress

log = logging.getLogger("dpmstream.replay")


def replay_inputs(pipeline: Pipeline, inputs, *, host: str, profile, tz, year,
                  progress: Progress, command: str = "dpmstream replay",
                  chunk_lines: int = 8192,
                  after_chunk: Callable[[Source], None] | None = None) -> tuple[int, list[Source]]:
    """Feeds every input (streams/inputs.describe) into `pipeline` and finishes it.

    Returns (inputs that failed, the sources). A file that cannot be opened or ends early
    is reported on stderr and counted; the lines read before the damage are kept.
    `after_chunk(source)` runs after every `chunk_lines` lines (the report's time marks)."""
    sources: list[Source] = []
    done_before, lines, failures = 0, 0, 0
    read_before: dict[bytes, object] = {}  # content fingerprint -> the input read with it
    for inp in inputs:
        src = pipeline.source(inp.name, host=host, path=inp.path or "-", profile=profile, tz=tz,
                              year=year, year_hint_ms=inp.mtime_ms)
        sources.append(src)
        try:
            digest = fingerprint(inp)
            stream, raw = open_binary(inp)
        except OSError as exc:
            print(f"{command}: {inp.name}: {exc}", file=sys.stderr)
            failures += 1
            continue
        try:
            earlier = read_before.get(digest) if digest else None
            if earlier is not None:  # the same archive again, or a longer copy of it
                repeated, first_new = repeated_prefix(stream, earlier)
                pipeline.reassembler.stats.duplicate_lines += repeated
                log.warning("%s: its first %d lines repeat %s: counted once", inp.name,
                            repeated, earlier.name)
                if first_new is not None:
                    src.feed_lines([first_new])
            elif digest:
                read_before[digest] = inp
            for chunk in iter_chunks(stream, chunk_lines):
                src.feed_lines(chunk)
                progress.update(done_before + (raw.tell() if not inp.is_stdin else 0),
                                lines + src.line_no)
                if after_chunk is not None:
                    after_chunk(src)
            lines += src.line_no + len(src._pending)
        except InputError as exc:
            print(f"{command}: {inp.name}: {exc}; the lines before it are kept", file=sys.stderr)
            failures += 1
        finally:
            if not inp.is_stdin:
                stream.close()
        done_before += inp.size or 0
    pipeline.finish()
    if after_chunk is not None and sources:
        after_chunk(sources[-1])   # what the end of input settled (undetected files, timeouts)
    progress.close()
    return failures, sources


def zone_of(sources: list[Source]):
    """The time zone the first source with a known profile reads its stamps in, or None."""
    for src in sources:
        if src.parser is not None:
            return src.parser.clock.zone
    return None
