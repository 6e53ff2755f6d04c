"""A record sink (fan_out.py) for live drivers: finished records appended as JSON lines.

    with JsonLinesSink("out/records.jsonl") as sink:
        sink.write(record)               # one JSON object per line, buffered
        sink.flush()                     # after each batch

Appends (a restarted `dpmstream run` adds to the same file). Times and durations are
float seconds (parsers/records.to_json_dict); "-" writes to standard output.

For exactly once across a crash (`dpmstream run --state`): sync() makes what was written
durable and returns the file's size, which the registry keeps with the offsets. A restart
opens the sink with `written_since=` that size: the records after it were written after
the last checkpoint, so the restart makes them again from the saved offsets;
is_replayed() recognises each of them once so that it is not written twice. A record cut
short by the crash (no newline) is removed first: it is made again, whole. While some are
still to be recognised, sync() returns `written_since` (the records past it are not all
accounted for by the state yet: a kill then must recognise them again); end_replay() ends
that once every line read before the crash has been read again.

Except for the records a stop's flush wrote (`run --flush-on-exit`: end_reason
`input_end`) after the last save, when the save at that stop failed: the state holds their
requests still open, and no line makes them again, only the flush at this process's own
stop (finish()). They stay recognisable after end_replay(), and sync() keeps returning
`written_since` meanwhile (the state holds those requests open: a kill must recognise them
again), until they are made again or end_replay(flushed=True) at that stop.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import IO

from dpmstream.parsers import dome_records
from dpmstream.parsers.records import json_text
from dpmstream.parsers.schema import BY_INPUT_END


class JsonLinesSink:
    def __init__(self, path: str | os.PathLike, *, written_since: int | None = None) -> None:
        self.path = os.fspath(path)
        self.written = 0
        self.replayed = 0          # records recognised as written before a restart
        self._replay: Counter = Counter()
        if self.path != "-" and written_since is not None:
            self._replay = _lines_after(self.path, written_since)
        self._replay_from = written_since if self._replay else None
        self._rereading = bool(self._replay)   # until end_replay(): lines read again
        if self.path == "-":
            self._fh: IO[str] | None = sys.stdout
            self._owned = False
        else:
            parent = os.path.dirname(self.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
            self._owned = True

    def write(self, record: dict) -> None:
        """One record, buffered; flush() after a batch."""
        self._fh.write(_line(record))
        self._fh.write("\n")
        self.written += 1

    @property
    def replaying(self) -> bool:
        """Some record written before the restart is still to be recognised."""
        return bool(self._replay)

    @property
    def rereading(self) -> bool:
        """The lines read before the restart are still being read again (end_replay()
        not called yet) and some record is still to be recognised."""
        return self._rereading and bool(self._replay)

    @property
    def to_replay(self) -> int:
        return sum(self._replay.values())

    def is_replayed(self, record: dict) -> bool:
        """True, once, for a record the file already holds past the checkpoint."""
        if not self._replay:
            return False
        if not self._rereading and record.get("end_reason") != BY_INPUT_END:
            return False   # only a flushed record is left to recognise: no JSON made
        line = _line(record)
        if self._replay[line] <= 0:
            return False
        self._replay[line] -= 1
        if not self._replay[line]:
            del self._replay[line]
        self.replayed += 1
        return True

    def end_replay(self, *, flushed: bool = False) -> int:
        """Every line read before the restart has been read again: stop recognising what
        lines make; the records not made again stay written once. How many. The records of
        a flush at the stop stay recognisable (module doc) unless `flushed` (this
        process's own flush is done: what it did not make again, nothing will)."""
        self._rereading = False
        kept = Counter() if flushed else Counter(
            {line: n for line, n in self._replay.items() if _flushed_at_a_stop(line)})
        left = self.to_replay - sum(kept.values())
        self._replay = kept
        if not kept:
            self._replay_from = None
        return left

    def sync(self) -> int | None:
        """Flush and fsync; the durable size of the file (None for stdout), or while
        records are still to be recognised, the size they start at."""
        if self._fh is None:
            return None
        self._fh.flush()
        if not self._owned:
            return None
        fd = self._fh.fileno()
        os.fsync(fd)
        if self._replay:
            return self._replay_from
        self._replay_from = None
        return os.fstat(fd).st_size

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            if self._owned:
                self._fh.close()
            self._fh = None

    def __enter__(self) -> "JsonLinesSink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _line(record: dict) -> str:
    if record["kind"] in dome_records.KINDS:  # DOME records: their own columns
        return dome_records.json_text(record, ensure_ascii=False)
    return json_text(record, ensure_ascii=False)


def _flushed_at_a_stop(line: str) -> bool:
    """A record a flush at the stop (Pipeline.finish()) made of a request still open."""
    try:
        return json.loads(line).get("end_reason") == BY_INPUT_END
    except (ValueError, AttributeError):
        return False   # not a record of ours: nothing makes it again


def _lines_after(path: str, size: int) -> Counter:
    """The complete lines of `path` after byte `size`; a cut last line is removed."""
    try:
        fh = open(path, "r+b")
    except FileNotFoundError:
        return Counter()
    with fh:
        end = os.fstat(fh.fileno()).st_size
        if end <= size:
            return Counter()  # nothing after the checkpoint (or the file was replaced)
        fh.seek(size)
        data = fh.read()
        cut = data.rfind(b"\n") + 1
        if cut < len(data):
            fh.truncate(size + cut)
        return Counter(line.decode("utf-8", "replace") for line in data[:cut].splitlines())
