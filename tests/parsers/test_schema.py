"""The record schema is declared once (parsers/schema.py): both engines emit records with
its keys in its order, and a compiled extension built from another schema does not load."""

import pytest

from dpmstream.parsers import engines, schema
from dpmstream.parsers.records import REQUEST_COLUMNS, REQUEST_MS_FIELDS

from tests.dpmlog import T1, T2, accept, call, closing, line, proc, put
from tests.helpers import calls_of, reassemble, requests_of

ENGINES = [e for e in engines.ENGINES if e == engines.PYTHON or engines.compiled_available()]
needs_compiled = pytest.mark.skipif(not engines.compiled_available(),
                                    reason="compiled extension not built (native/)")

# A put whose processing run is logged before the put's `returns` (the queue would be
# -2 ms), a put left open at the end, and a call of its own.
LINES = (
    accept("08/12 10:00:00.000", 3)
    + put("08/12 10:00:00.001", 3, T1, rc=None)
    + proc("08/12 10:00:00.002", "08/12 10:00:00.200", 21, T1)
    + [line("08/12 10:00:00.004", 3, "dpm_srv_put", "returns 0")]
    + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1)
    + put("08/12 10:00:02.000", 4, T2, end="08/12 10:00:02.003")
    + call("08/12 10:00:03.000", 5, "ping", end="08/12 10:00:03.001")
)


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_emit_the_declared_keys_in_the_declared_order(engine):
    records, _ = reassemble(LINES, engine=engine)
    linked = schema.REQUEST_KEYS + schema.LINKED_REQUEST_FIELDS
    assert len(requests_of(records)) == 2 and calls_of(records)
    for rec in requests_of(records):
        assert tuple(rec) in (schema.REQUEST_KEYS, linked), tuple(rec)
    for rec in calls_of(records):
        assert tuple(rec) == schema.CALL_KEYS


@pytest.mark.parametrize("engine", ENGINES)
def test_no_duration_is_negative_even_when_the_processing_is_logged_before_the_returns(engine):
    # The metrics exporter's histograms are fed these: a phase is clamped at 0, never less.
    records, _ = reassemble(LINES, engine=engine)
    req = next(r for r in requests_of(records) if r["token"] == T1)
    assert (req["queue_ms"], req["request_ms"], req["status"]) == (0, 3, "success")
    durations = REQUEST_MS_FIELDS - {"accepted", "started", "ended"}
    for rec in requests_of(records):
        assert all(rec.get(f) is None or rec[f] >= 0 for f in durations), rec
    for rec in calls_of(records):
        assert all(rec[f] is None or rec[f] >= 0 for f in ("duration_ms", "auth_ms")), rec


def test_the_emitted_keys_are_the_fields_of_the_columns_and_the_kind():
    assert schema.REQUEST_KEYS[0] == "kind"
    assert schema.REQUEST_KEYS[1:] + schema.LINKED_REQUEST_FIELDS == schema.REQUEST_FIELDS
    assert schema.CALL_KEYS == ("kind",) + schema.CALL_FIELDS + ("path",)
    assert tuple(map(schema.column_of, schema.REQUEST_FIELDS)) == REQUEST_COLUMNS


@needs_compiled
def test_the_loaded_compiled_extension_was_built_from_this_schema():
    from dpmstream.parsers import _native

    assert _native.schema()["request_columns"] == list(REQUEST_COLUMNS)
    assert _native.schema()["request_fields"] == list(schema.REQUEST_FIELDS)
    assert schema.differences(_native.schema()) == []


def _declared_as_compiled() -> dict:
    return {part: list(values) for part, values in schema.declared().items()}


def test_a_compiled_schema_with_a_column_more_fails_loudly_naming_it():
    compiled = _declared_as_compiled()
    compiled["request_columns"].append("disk_s")
    compiled["counters"].remove("late_lines")
    with pytest.raises(schema.SchemaMismatch) as err:
        schema.check_compiled(compiled)
    text = str(err.value)
    assert "request_columns: only in the compiled extension: disk_s" in text
    assert "counters: missing in the compiled extension: late_lines" in text
    assert not isinstance(err.value, ImportError)  # no silent fall back to Python


def test_a_compiled_schema_in_another_order_fails_naming_both_orders():
    compiled = _declared_as_compiled()
    keys = compiled["call_keys"]
    keys[1], keys[2] = keys[2], keys[1]
    with pytest.raises(schema.SchemaMismatch, match="call_keys: another order: Python kind, host"):
        schema.check_compiled(compiled)


def test_compiled_stop_codes_in_another_order_fail_the_load():
    # feed_lines returns a stop's index: a build numbering them otherwise would make the
    # pipeline take a line left to Python for the end of the list
    compiled = _declared_as_compiled()
    stops = compiled["feed_stops"]
    stops[1], stops[2] = stops[2], stops[1]
    with pytest.raises(schema.SchemaMismatch, match="feed_stops: another order: Python done, slow"):
        schema.check_compiled(compiled)
    assert (engines.DONE, engines.SLOW, engines.LIMIT, engines.BUDGET) == (
        tuple(schema.FEED_STOPS.index(stop) for stop in ("done", "slow", "limit", "budget")))


def test_the_same_schema_passes_and_ms_fields_compare_as_sets():
    compiled = _declared_as_compiled()
    compiled["request_ms_fields"].reverse()
    schema.check_compiled(compiled)
    assert schema.differences(compiled) == []


def test_a_compiled_phase_of_another_name_fails_naming_the_pair():
    compiled = _declared_as_compiled()
    compiled["phases"][2] = ["queue_ms", "queued"]
    with pytest.raises(schema.SchemaMismatch, match=r"phases: missing in the compiled extension: "
                                                    r"\(queue_ms, queue\); only in the compiled "
                                                    r"extension: \(queue_ms, queued\)"):
        schema.check_compiled(compiled)
