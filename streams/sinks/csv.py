"""A record sink (fan_out.py): records as they finish into DIR/requests.csv and DIR/calls.csv;
DOME records (parsers/dome_records.py) into one file per kind, named after it without
the `dome_` prefix, `DIR/dome-calls.csv`, `dome-puts.csv`, `dome-capacity.csv`,
`dome-fs-events.csv` (the simulator's truth files' columns, plus `whole_seconds`),
`dome-journald-gaps.csv`,
each made when its first record comes.

Where the extension is built, the request and call rows go through its CsvBlocks
(native/src/records.rs): the compiled engine hands it its records as they are
(`compiled_receiver`, the Sink protocol of fan_out.py), which it formats to CSV bytes and
writes a block at a time, with no dict made; a dict given to write() takes the same
blocks, so the rows keep the order they came in. The bytes are those of csv_line (one
rule: parsers/records.py), UTF-8. The DOME rows go the same way through its DomeCsvBlocks
(native/src/dome_csv.rs; `compiled_dome_receiver`, which the extension's DOME tally
forwards the compiled DOME engine's records to as they are), a block per kind file."""

from __future__ import annotations

import csv
import io
import os

from dpmstream.parsers import dome_records, extension
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
        self._files = [open(self.requests_path, "wb"), open(self.calls_path, "wb")]
        for f, columns in zip(self._files, (REQUEST_COLUMNS, CALL_COLUMNS)):
            f.write(_header(columns))
        self.out_dir = out_dir
        self.dome_paths: dict[str, str] = {}   # DOME kind -> path, once written
        self._dome_files: dict[str, object] = {}
        # The compiled engine's records straight to bytes (None: Python formats each row).
        CsvBlocks = extension.compiled("CsvBlocks")
        self.compiled_receiver = CsvBlocks(*self._files, csv_line) if CsvBlocks is not None else None
        # The DOME rows likewise, each kind's file opened at its first row.
        DomeCsvBlocks = extension.compiled("DomeCsvBlocks")
        self.compiled_dome_receiver = (DomeCsvBlocks(dome_records.KINDS, self._dome_file,
                                                     dome_records.python_csv_line)
                                       if DomeCsvBlocks is not None else None)

    def write(self, record: dict) -> None:
        kind = record["kind"]
        if kind in DOME_FILES:
            if self.compiled_dome_receiver is not None:
                self.compiled_dome_receiver(record)
            else:
                self._dome_file(kind).write(dome_records.csv_line(record))
        elif self.compiled_receiver is not None:
            self.compiled_receiver(record)
        else:
            self._files[0 if kind == "request" else 1].write(csv_line(record).encode())

    def flush(self) -> None:
        self._flush_blocks()
        for f in (*self._files, *self._dome_files.values()):
            f.flush()

    def _dome_file(self, kind: str):
        f = self._dome_files.get(kind)
        if f is None:
            path = self.dome_paths[kind] = os.path.join(self.out_dir, DOME_FILES[kind])
            f = self._dome_files[kind] = open(path, "w", newline="")
            csv.writer(f).writerow(dome_records.KINDS[kind][0])
        return f

    def _flush_blocks(self) -> None:
        """The compiled writers' blocks to the files (the DOME ones even when the DPM
        one fails: a run cut short keeps what it had)."""
        try:
            if self.compiled_receiver is not None:
                self.compiled_receiver.flush()
        finally:
            if self.compiled_dome_receiver is not None:
                self.compiled_dome_receiver.flush()

    def close(self) -> None:
        try:
            self._flush_blocks()
        finally:
            for f in (*self._files, *self._dome_files.values()):
                f.close()


def _header(columns) -> bytes:
    text = io.StringIO()
    csv.writer(text).writerow(columns)
    return text.getvalue().encode()
