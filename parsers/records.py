"""The formatting of the two record types the project reports (CSV rows, JSON objects).

Their columns (section 4 of the format reference exactly, in order; extra columns after)
are declared in parsers/schema.py, with the record key of each (a duration held as
`auth_ms` is shown as `auth_s`). Times and durations are integer milliseconds (times since
the epoch, UTC) internally and are shown as seconds with three decimals; None is an empty
cell.
"""

from __future__ import annotations

import csv
import io
import json

# The columns, their units and the statuses: parsers/schema.py, the one declaration.
from .schema import (  # noqa: F401 (re-exported: the sinks and reports read them here)
    CALL_COLUMNS, CALL_FIELDS, CALL_MS_FIELDS, PHASES, REQUEST_COLUMNS, REQUEST_FIELDS,
    REQUEST_MS_FIELDS, STATUSES, column_of, key_of,
)
from .extension import compiled

# The compiled formatting (native/src/records.rs); the functions below are the reference
_compiled_csv, _compiled_json = compiled("record_csv_line"), compiled("record_json")

def ms_to_text(ms: int | None) -> str:
    """Milliseconds as seconds with three decimals, exactly (no float rounding)."""
    if ms is None:
        return ""
    sign = "-" if ms < 0 else ""
    whole, frac = divmod(abs(ms), 1000)
    return f"{sign}{whole}.{frac:03d}"


def text_to_ms(text: str) -> int | None:
    """Inverse of ms_to_text, for reading records back."""
    if text == "" or text is None:
        return None
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    return sign * (int(whole) * 1000 + int((frac + "000")[:3]))


def _cells(record: dict, fields: tuple, ms_fields: frozenset) -> list[str]:
    out = []
    for key in fields:
        value = record.get(key)
        if key in ms_fields:
            out.append(ms_to_text(value))
        else:
            out.append("" if value is None else str(value))
    return out


def request_row(record: dict) -> list[str]:
    """The cells of REQUEST_COLUMNS."""
    return _cells(record, REQUEST_FIELDS, REQUEST_MS_FIELDS)


def call_row(record: dict) -> list[str]:
    """The cells of CALL_COLUMNS."""
    return _cells(record, CALL_FIELDS, CALL_MS_FIELDS)


def to_json_dict(record: dict) -> dict:
    """A record for JSON: by column names, times and durations as float seconds, `kind`
    first."""
    kind = record["kind"]
    fields, ms_fields = (
        (REQUEST_FIELDS, REQUEST_MS_FIELDS) if kind == "request" else (CALL_FIELDS, CALL_MS_FIELDS)
    )
    out = {"kind": kind}
    for key in fields:
        value = record.get(key)
        if key in ms_fields and value is not None:
            value = value / 1000.0
        out[column_of(key)] = value
    return out


def csv_line(record: dict) -> str:
    """The record's CSV row as Python's csv writer writes it (excel dialect, "\r\n")."""
    if _compiled_csv is not None:
        line = _compiled_csv(record)
        if line is not None:
            return line
    return python_csv_line(record)


def python_csv_line(record: dict) -> str:
    row = request_row(record) if record["kind"] == "request" else call_row(record)
    buf = io.StringIO()
    csv.writer(buf).writerow(row)
    return buf.getvalue()


def json_text(record: dict, *, ensure_ascii: bool) -> str:
    """json.dumps(to_json_dict(record)) without spaces, as the sinks write it."""
    if _compiled_json is not None:
        text = _compiled_json(record, ensure_ascii)
        if text is not None:
            return text
    return python_json_text(record, ensure_ascii=ensure_ascii)


def python_json_text(record: dict, *, ensure_ascii: bool) -> str:
    return json.dumps(to_json_dict(record), ensure_ascii=ensure_ascii, separators=(",", ":"))
