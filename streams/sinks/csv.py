"""A record sink (fan_out.py): records as they finish into DIR/requests.csv and DIR/calls.csv."""

from __future__ import annotations

import csv
import os

from dpmstream.parsers.records import CALL_COLUMNS, REQUEST_COLUMNS, csv_line


class CsvSink:
    def __init__(self, out_dir: str):
        os.makedirs(out_dir, exist_ok=True)
        self.requests_path = os.path.join(out_dir, "requests.csv")
        self.calls_path = os.path.join(out_dir, "calls.csv")
        self._files = [open(self.requests_path, "w", newline=""), open(self.calls_path, "w", newline="")]
        for f, columns in zip(self._files, (REQUEST_COLUMNS, CALL_COLUMNS)):
            csv.writer(f).writerow(columns)

    def write(self, record: dict) -> None:
        self._files[0 if record["kind"] == "request" else 1].write(csv_line(record))

    def close(self) -> None:
        for f in self._files:
            f.close()
