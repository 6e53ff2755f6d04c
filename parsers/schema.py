"""The request and call records' schema, declared once (docs/architecture.md, "One schema").

The columns (section 4 of the format reference, in order, extra columns after), which of
them hold milliseconds (times since the epoch, UTC, and durations: shown as seconds with
three decimals), the keys of a record as the engines emit it, its statuses and end
reasons, the engine's counters, and the compiled feed's stop codes. Everything else takes
them from here: records.py formats by them, reassembly.py emits them, and the compiled
engine (native/src/schema.rs) holds a copy that `check_compiled` compares with this one
when the extension loads, failing loudly with every difference named: a compiled module
built from other columns never runs.

Counters: ReassemblyStats (reassembly.py) and LinkStats (linking.py) are the declaration,
one commented field each.
"""

from __future__ import annotations

# The durations: held in milliseconds under their record key `*_ms`, shown in seconds under
# their column `*_s` (format reference, section 4). Every other field's column is its key.
DURATION_COLUMNS = {  # record key -> column
    "auth_ms": "auth_s", "request_ms": "request_s", "queue_ms": "queue_s",
    "proc_ms": "proc_s", "poll_ms": "poll_s", "ready_wait_ms": "ready_wait_s",
    "transfer_ms": "transfer_s", "done_ms": "done_s", "total_ms": "total_s",
    "ns_ms": "ns_s", "duration_ms": "duration_s",
}
# Times since the epoch, UTC, in milliseconds (shown as seconds too).
TIME_FIELDS = ("accepted", "started", "ended")

# A record's fields by their keys, in column order (section 4 of the format reference,
# extra columns after).
REQUEST_FIELDS = (
    "host", "token", "op", "client", "nfiles", "status",
    "accepted", "started", "ended",
    "auth_ms", "request_ms", "queue_ms", "proc_ms", "polls", "poll_ms",
    "ready_wait_ms", "transfer_ms", "done_ms", "total_ms",
    # extra columns
    "end_reason",
    "ns_calls", "ns_ms",  # name-server calls linked to the request (parsers/linking.py)
)

CALL_FIELDS = (
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended",
    "duration_ms", "rc", "auth_ms",
    # extra columns
    "session",
    "token",  # the request a name-server call served (parsers/linking.py)
)


def column_of(key: str) -> str:
    """The column (CSV header, JSON name) showing the record field `key`."""
    return DURATION_COLUMNS.get(key, key)


def key_of(column: str) -> str:
    """The record key of the field a column shows: what a record read back from a CSV or
    JSON output holds it under, and what a state saved before the durations were named
    `*_ms` is restored under (parsers/linking.py)."""
    return _KEY_OF_COLUMN.get(column, column)


_KEY_OF_COLUMN = {column: key for key, column in DURATION_COLUMNS.items()}

REQUEST_COLUMNS = tuple(column_of(key) for key in REQUEST_FIELDS)
CALL_COLUMNS = tuple(column_of(key) for key in CALL_FIELDS)

# Which record fields hold milliseconds (a time or a duration; the CSV and JSON show
# seconds). A duration is never negative: both engines clamp a difference of stamps at 0
# (reassembly._diff, reassembly.rs diff), whatever order the lines came in.
REQUEST_MS_FIELDS = frozenset(k for k in REQUEST_FIELDS
                              if k in TIME_FIELDS or k in DURATION_COLUMNS)
CALL_MS_FIELDS = frozenset(k for k in CALL_FIELDS if k in TIME_FIELDS or k in DURATION_COLUMNS)

# Request phases exported as metrics: (record key, phase label).
PHASES = (
    ("auth_ms", "auth"), ("request_ms", "request"), ("queue_ms", "queue"),
    ("proc_ms", "proc"), ("poll_ms", "poll"), ("ready_wait_ms", "ready_wait"),
    ("transfer_ms", "transfer"), ("done_ms", "done"), ("total_ms", "total"),
)

STATUSES = SUCCESS, FAILED, ABORTED, INCOMPLETE = ("success", "failed", "aborted", "incomplete")

# Why a request record was emitted (its `end_reason`): its closing line, the event-time
# timeout, the in-flight cap, the end of the input.
END_REASONS = BY_LINE, BY_TIMEOUT, BY_EVICTION, BY_INPUT_END = (
    "line", "timeout", "evicted", "input_end")

# Why the compiled engine's feed_lines stopped, by the code it returns (its index here):
# the lines ended, a line needs Python (it is left to the caller), the source passed its
# limit in event time, the line budget before an event-time sweep is spent; and the DOME
# engine's feed_chunk only: the line before the stop was malformed.
FEED_STOPS = ("done", "slow", "limit", "budget", "malformed")
DONE, SLOW, LIMIT, BUDGET, MALFORMED_LINE = range(len(FEED_STOPS))

# The request fields the linker adds once it has decided them (absent before).
LINKED_REQUEST_FIELDS = ("ns_calls", "ns_ms")
# The keys of a record as the reassembly emits it, in order: `kind` first; a call also
# carries the path its name-server line names (the linker's key, not a column).
REQUEST_KEYS = ("kind",) + tuple(k for k in REQUEST_FIELDS if k not in LINKED_REQUEST_FIELDS)
CALL_KEYS = ("kind",) + CALL_FIELDS + ("path",)


class SchemaMismatch(RuntimeError):
    """The compiled extension was built from another schema than this one (a stale build,
    or a column added on one side only). Not an ImportError: nothing may fall back to the
    Python engine silently when this happens."""


def declared() -> dict[str, tuple]:
    """This schema in the shape the compiled extension's `schema()` gives its own."""
    from .linking import LinkStats  # noqa: PLC0415 (they import this module's names)
    from .reassembly import ReassemblyStats  # noqa: PLC0415

    return {
        "request_columns": REQUEST_COLUMNS,
        "request_fields": REQUEST_FIELDS,
        "request_ms_fields": tuple(sorted(REQUEST_MS_FIELDS)),
        "call_columns": CALL_COLUMNS,
        "call_fields": CALL_FIELDS,
        "call_ms_fields": tuple(sorted(CALL_MS_FIELDS)),
        "request_keys": REQUEST_KEYS + LINKED_REQUEST_FIELDS,
        "call_keys": CALL_KEYS,
        "phases": PHASES,
        "statuses": STATUSES,
        "end_reasons": END_REASONS,
        "feed_stops": FEED_STOPS,
        "counters": ReassemblyStats.FIELDS,
        "link_counters": LinkStats.FIELDS,
    }


def differences(compiled: dict) -> list[str]:
    """Each part of the schema where the compiled extension's differs, named."""
    want = declared()
    out = []
    for part in sorted(want.keys() | compiled.keys()):
        mine = want.get(part)
        theirs = compiled.get(part)
        theirs = None if theirs is None else tuple(
            tuple(x) if isinstance(x, list) else x for x in theirs)
        if part.endswith("_ms_fields") and theirs is not None:
            theirs = tuple(sorted(theirs))
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            out.append(f"{part}: {'only the compiled extension' if mine is None else 'only Python'}"
                       f" declares it")
            continue
        only_py = [x for x in mine if x not in theirs]
        only_rs = [x for x in theirs if x not in mine]
        what = []
        if only_py:
            what.append(f"missing in the compiled extension: {_listed(only_py)}")
        if only_rs:
            what.append(f"only in the compiled extension: {_listed(only_rs)}")
        if not what:
            what.append(f"another order: Python {_listed(mine)}; compiled {_listed(theirs)}")
        out.append(f"{part}: {'; '.join(what)}")
    return out


def _listed(items) -> str:
    return ", ".join(item if isinstance(item, str) else "(" + ", ".join(item) + ")"
                     for item in items)


def check_compiled(compiled: dict) -> None:
    """Called by the compiled extension as it loads (native/src/schema_check.rs), with its
    schema: raise SchemaMismatch naming every difference from this declaration."""
    found = differences(compiled)
    if found:
        raise SchemaMismatch(
            "the compiled extension (native/) was built from another record schema than "
            "parsers/schema.py: " + " | ".join(found)
            + " (rebuild it: pip install -e . --no-deps, after making native/src/schema.rs "
              "match)")
