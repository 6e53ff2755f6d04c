"""Record sinks for live drivers: finished records appended as JSON lines.

    with JsonLinesSink("out/records.jsonl") as sink:
        sink.write_batch(records)        # one JSON object per line, flushed per batch

Appends (a restarted `dpmstream run` adds to the same file). Times and durations are
float seconds (parsers/records.to_json_dict); "-" writes to standard output.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Iterable

from dpmstream.parsers.records import to_json_dict


class JsonLinesSink:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.written = 0
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
        """One record, buffered; call flush() (or use write_batch)."""
        self._fh.write(json.dumps(to_json_dict(record), ensure_ascii=False, separators=(",", ":")))
        self._fh.write("\n")
        self.written += 1

    def write_batch(self, records: Iterable[dict]) -> int:
        n = 0
        for record in records:
            self.write(record)
            n += 1
        if n:
            self.flush()
        return n

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
