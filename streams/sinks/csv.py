"""A record sink (fan_out.py): records as they finish into DIR/requests.csv and DIR/calls.csv;
DOME records (parsers/dome_records.py) into one file per kind, named after it without
the `dome_` prefix, `DIR/dome-calls.csv`, `dome-puts.csv`, `dome-capacity.csv`,
`dome-fs-events.csv` (the simulator's truth files' columns, plus `whole_seconds`),
`dome-journald-gaps.csv`,
each made when its first record comes."""

from __future__ import annotations

import csv
import os

from dpmstream.parsers import dome_records
from dpmstream.parsers.records import CALL_COLUMNS, REQUEST_COLUMNS, csv_line

# DOME kind -> its file in the output directory
DOME_FILES = {"dome_call": "dome-calls.csv", "dome_put": "dome-puts.csv",
              "dome_checksum": "dome-checksums.csv",
              "dome_capacity": "dome-capacity.csv", "dome_fs_event": "dome-fs-events.csv",
              "dome_journald_gap": "dome-journald-gaps.csv"}


class CsvSink:
    def __init__(self, out_dir: str):
        os.makedirs(out_dir, exist_ok=True)
        self.requests_path = os.path.join(out_dir, "requests.csv")
        self.calls_path = os.path.join(out_dir, "calls.csv")
        self._files = [open(self.requests_path, "w", newline=""), open(self.calls_path, "w", newline="")]
        for f, columns in zip(self._files, (REQUEST_COLUMNS, CALL_COLUMNS)):
            csv.writer(f).writerow(columns)
        self.out_dir = out_dir
        self.dome_paths: dict[str, str] = {}   # DOME kind -> path, once written
        self._dome_files: dict[str, object] = {}

    def write(self, record: dict) -> None:
        kind = record["kind"]
        if kind in DOME_FILES:
            self._dome_file(kind).write(dome_records.csv_line(record))
            return
        self._files[0 if kind == "request" else 1].write(csv_line(record))

    def _dome_file(self, kind: str):
        f = self._dome_files.get(kind)
        if f is None:
            path = self.dome_paths[kind] = os.path.join(self.out_dir, DOME_FILES[kind])
            f = self._dome_files[kind] = open(path, "w", newline="")
            csv.writer(f).writerow(dome_records.KINDS[kind][0])
        return f

    def close(self) -> None:
        for f in (*self._files, *self._dome_files.values()):
            f.close()
