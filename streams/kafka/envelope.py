"""The JSON envelope of one log line on the raw-lines topic, as rsyslog (omkafka) writes it.

    {"host": "head01", "path": "/var/log/dpm/log", "offset": 1234,
     "received": "2011-08-12T14:31:43.118402+02:00", "line": "08/12 14:31:43.118 ..."}

The record key is the host (so one host's lines stay in one partition, in order). `offset`
is imfile's byte offset of the line in its file; (host, path, offset) identifies a line, which
is how the worker recognises a line delivered twice. `received` (RFC 3339, microseconds) is
when rsyslog read the line: it supplies the year and measures lag, never the event time.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import NamedTuple

from dpmstream.parsers import extension
from dpmstream.parsers.clock import rfc3339_to_ms

try:   # decoding envelopes is a large share of a worker's time; orjson does it fastest
    from orjson import JSONDecodeError as _FastJSONError
    from orjson import loads as _fast_loads
except ImportError:   # pragma: no cover - the kafka extra installs it
    _fast_loads, _FastJSONError = json.loads, ValueError


# rsyslog's form decoded in the extension (native/src/envelope.rs); None for the rest
_compiled_decode = extension.compiled("decode_envelope")
_compiled_plan = extension.compiled("plan_batch")


# Why a record was skipped: the `reason` label of dpmstream_bad_records_total, so a fixed
# set (a bounded label), each with the text its log line gives.
BAD_REASONS = ("no_value", "too_large", "not_utf8", "not_json", "too_deep", "not_object",
               "bad_host", "bad_path", "bad_offset", "bad_line", "offset_jump", "failed")

# The largest record decoded. rsyslog's lines are at most its maxMessageSize (8 KiB by
# default, 64 KiB on DPM heads); a record this big is no line of theirs, and is not parsed.
MAX_RECORD_BYTES = 1 << 20
# imfile offsets are int64 (and the extension's, 18 digits at most).
MAX_OFFSET = (1 << 63) - 1
# A host is a DNS name (253 characters at most), a path at most PATH_MAX: longer ones are
# no rsyslog's, and would end up in logs, state keys and (host) labels.
MAX_HOST_CHARS = 253
MAX_PATH_CHARS = 4096


class EnvelopeError(ValueError):
    """A record on the lines topic that is not a valid envelope (counted, never fatal).
    `reason` is one of BAD_REASONS; the message says more (never the record itself)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class Envelope(NamedTuple):
    host: str
    path: str
    offset: int
    received_ms: int | None
    line: str


def ms_to_rfc3339(ms: int, micros: int = 0) -> str:
    """Integer ms (plus optional extra microseconds) -> RFC 3339 UTC with microseconds."""
    stamp = _EPOCH + _dt.timedelta(milliseconds=ms, microseconds=micros)
    return stamp.isoformat(timespec="microseconds").replace("+00:00", "Z")


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def encode(host: str, path: str, offset: int, received: str, line: str) -> bytes:
    """One envelope as the JSON bytes rsyslog would send (key it by host)."""
    return json.dumps(
        {"host": host, "path": path, "offset": offset, "received": received, "line": line},
        ensure_ascii=False, separators=(",", ":"),
    ).encode("utf-8")


def decode(raw: bytes | str | None) -> Envelope:
    """Parse one record value; raises EnvelopeError with a short reason when it is unusable.

    A missing or unparseable `received` is tolerated (None: the year then comes from the
    source's own clock); a missing host, path, offset or line is not.
    """
    return Envelope(*decode_fields(raw))


# The extension's batch planner (None where not built): decodes a batch's envelopes and
# moves their files' marks in the common case (PartitionState.feed_batch; state.plan_runs
# is its reference).
compiled_plan_batch = _compiled_plan
# The extension's decoder alone (None where not built), for callers with a loop of their
# own: decode_fields' Python half on None.
compiled_decode_fields = _compiled_decode


def decode_fields(raw: bytes | str | None) -> tuple[str, str, int, int | None, str]:
    """decode() as a plain (host, path, offset, received_ms, line) tuple: the worker's
    per-record call, so it builds nothing it does not need. The extension decodes the
    form rsyslog writes; what it leaves (None) is decoded here, the reference."""
    if _compiled_decode is not None:
        fields = _compiled_decode(raw)
        if fields is not None:
            return fields
    return python_decode_fields(raw)


def python_decode_fields(raw: bytes | str | None) -> tuple[str, str, int, int | None, str]:
    """decode_fields in Python alone: any record, errors with their reasons."""
    if raw is None or len(raw) == 0:
        raise EnvelopeError("no_value", "empty record (no value)")
    if len(raw) > MAX_RECORD_BYTES:
        raise EnvelopeError("too_large", f"record of {len(raw)} bytes (at most {MAX_RECORD_BYTES})")
    lenient = False
    try:
        try:
            obj = _fast_loads(raw)
        except _FastJSONError:   # e.g. an escaped lone surrogate: the stdlib takes those
            lenient = True
            obj = json.loads(raw)
    except UnicodeDecodeError:
        raise EnvelopeError("not_utf8", "not UTF-8") from None
    except RecursionError:   # nesting deeper than Python's stack: stdlib json's own limit
        raise EnvelopeError("too_deep", "JSON nested too deep") from None
    except ValueError as exc:
        raise EnvelopeError("not_json", f"not JSON: {exc.__class__.__name__}") from None
    try:   # the envelope as rsyslog writes it, in as few steps as it takes
        host, path, offset, line = obj["host"], obj["path"], obj["offset"], obj["line"]
        fine = (host.__class__ is str and path.__class__ is str and offset.__class__ is int
                and line.__class__ is str and 0 <= offset <= MAX_OFFSET
                and 0 < len(host) <= MAX_HOST_CHARS and 0 < len(path) <= MAX_PATH_CHARS
                and not lenient)
    except (KeyError, TypeError):
        fine = False
    if not fine:
        host, path, offset, line = _checked(obj)
    received = obj.get("received")
    received_ms = received_to_ms(received) if received.__class__ is str else None
    return host, path, offset, received_ms, line.rstrip("\r\n")


def _checked(obj) -> tuple[str, str, int, str]:
    """(host, path, offset, line) of an envelope off the common form, or EnvelopeError."""
    if not isinstance(obj, dict):
        raise EnvelopeError("not_object", "not a JSON object")
    host, path, offset, line = obj.get("host"), obj.get("path"), obj.get("offset"), obj.get("line")
    if not isinstance(host, str) or not host:
        raise EnvelopeError("bad_host", "missing host (or not a text)")
    if len(host) > MAX_HOST_CHARS or not _encodes(host):
        raise EnvelopeError("bad_host", f"host of {len(host)} characters (at most "
                                        f"{MAX_HOST_CHARS}) or not UTF-8")
    if not isinstance(path, str) or not path:
        raise EnvelopeError("bad_path", "missing path (or not a text)")
    if len(path) > MAX_PATH_CHARS or not _encodes(path):
        raise EnvelopeError("bad_path", f"path of {len(path)} characters (at most "
                                        f"{MAX_PATH_CHARS}) or not UTF-8")
    if isinstance(offset, str) and offset.isascii() and offset.isdigit() and len(offset) <= 19:
        offset = int(offset)   # rsyslog templates may quote numbers
    if (not isinstance(offset, int) or isinstance(offset, bool)
            or not 0 <= offset <= MAX_OFFSET):
        raise EnvelopeError("bad_offset", "missing or bad offset (a byte offset, 0 to 2^63-1)")
    if not isinstance(line, str):
        raise EnvelopeError("bad_line", "missing line (or not a text)")
    return host, path, offset, line


def _encodes(text: str) -> bool:
    """False for a text with a lone surrogate (an escape the stdlib decodes): as a record
    key or a state key it could not be written."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# rsyslog's `received` form, 'YYYY-MM-DDThh:mm:ss.ffffff' + 'Z' or '+hh:mm': its whole
# second -> (the offset part, ms of that second). A burst of lines shares a second, so most
# records skip the full parse (rfc3339_to_ms, the reference, takes the same shortcut).
_SECONDS: dict[str, tuple[str, int]] = {}
_SECONDS_KEPT = 4096


def received_to_ms(text: str) -> int | None:
    """rfc3339_to_ms(text), or None where that refuses it."""
    rsyslog = len(text) in (27, 32) and text[19] == "."
    if rsyslog:
        known = _SECONDS.get(text[:19])
        if known is not None and known[0] == text[26:] and text[20:26].isdigit():
            return known[1] + int(text[20:23])
    try:
        ms = rfc3339_to_ms(text)
    except ValueError:
        return None
    if rsyslog and text[20:26].isdigit():   # rfc3339_to_ms's own shortcut: exact per second
        if len(_SECONDS) >= _SECONDS_KEPT:
            _SECONDS.clear()
        _SECONDS[text[:19]] = (text[26:], ms - int(text[20:23]))
    return ms
