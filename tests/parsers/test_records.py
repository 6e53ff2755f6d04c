"""parsers/records.py: column order, cell formatting and the JSON form of records."""

import os

import pytest

from dpmstream.parsers.records import (
    CALL_COLUMNS, CALL_FIELDS, CALL_MS_FIELDS, REQUEST_COLUMNS, REQUEST_FIELDS,
    REQUEST_MS_FIELDS, call_row, column_of, key_of, ms_to_text, request_row, text_to_ms,
    to_json_dict,
)


def test_request_columns_follow_the_format_reference_then_the_extras():
    assert REQUEST_COLUMNS == (
        "host", "token", "op", "client", "nfiles", "status",
        "accepted", "started", "ended",
        "auth_s", "request_s", "queue_s", "proc_s", "polls", "poll_s",
        "ready_wait_s", "transfer_s", "done_s", "total_s",
        "end_reason", "ns_calls", "ns_s",
    )


def test_call_columns_follow_the_format_reference_then_the_extras():
    assert CALL_COLUMNS == (
        "host", "daemon", "pid", "thread", "op", "client", "started", "ended",
        "duration_s", "rc", "auth_s", "session", "token",
    )


def test_every_millisecond_field_is_a_field_of_its_record():
    assert REQUEST_MS_FIELDS <= set(REQUEST_FIELDS)
    assert CALL_MS_FIELDS <= set(CALL_FIELDS)


def test_a_duration_is_held_as_ms_and_shown_as_seconds_in_its_column():
    """Inside, a record holds a duration in milliseconds under `*_ms`; its column, the
    CSV header's and the JSON name, is `*_s` and shows seconds."""
    for fields, columns, ms in ((REQUEST_FIELDS, REQUEST_COLUMNS, REQUEST_MS_FIELDS),
                                (CALL_FIELDS, CALL_COLUMNS, CALL_MS_FIELDS)):
        assert len(fields) == len(columns)
        for key, column in zip(fields, columns):
            assert column_of(key) == column and key_of(column) == key
            if key.endswith("_ms"):
                assert key in ms and column == key[:-3] + "_s"
            else:
                assert column == key


def test_counts_are_not_millisecond_fields():
    for count in ("nfiles", "polls", "ns_calls"):
        assert count not in REQUEST_MS_FIELDS
    assert "pid" not in CALL_MS_FIELDS and "rc" not in CALL_MS_FIELDS


@pytest.mark.parametrize("ms, text", [
    (0, "0.000"),
    (1, "0.001"),
    (999, "0.999"),
    (1000, "1.000"),
    (1234, "1.234"),
    (1_700_000_000_123, "1700000000.123"),
    (-1, "-0.001"),
    (-1500, "-1.500"),
])
def test_ms_to_text_shows_seconds_with_three_decimals(ms, text):
    assert ms_to_text(ms) == text


def test_ms_to_text_is_exact_where_float_division_would_round():
    # 2**53 + 1 ms is not representable as a float; the text keeps the last digit.
    assert ms_to_text(9_007_199_254_740_993) == "9007199254740.993"


def test_ms_to_text_of_none_is_an_empty_cell():
    assert ms_to_text(None) == ""


@pytest.mark.parametrize("text, ms", [
    ("0.000", 0),
    ("1.234", 1234),
    ("1.5", 1500),
    ("12", 12000),
    ("-0.001", -1),
    ("-1.500", -1500),
    ("1700000000.123", 1_700_000_000_123),
])
def test_text_to_ms_reads_seconds_back_as_milliseconds(text, ms):
    assert text_to_ms(text) == ms


def test_text_to_ms_of_an_empty_cell_is_none():
    assert text_to_ms("") is None
    assert text_to_ms(None) is None


def test_text_to_ms_keeps_only_milliseconds_of_finer_text():
    assert text_to_ms("1.2349") == 1234


@pytest.mark.parametrize("ms", [0, 7, 999, 1000, 86_400_001, -42, None])
def test_text_to_ms_inverts_ms_to_text(ms):
    assert text_to_ms(ms_to_text(ms)) == ms


def test_request_row_formats_times_as_seconds_and_leaves_missing_cells_empty():
    record = {
        "host": "dpm1", "token": "abc-123", "op": "put", "client": "/DC=ch/CN=alice",
        "nfiles": 2, "status": "success",
        "accepted": 1_000_000, "started": 1_000_250, "ended": 1_003_000,
        "auth_ms": 5, "request_ms": 20, "queue_ms": 250, "proc_ms": 1200, "polls": 3,
        "poll_ms": 900, "ready_wait_ms": None, "transfer_ms": 1500, "done_ms": 45,
        "total_ms": 3000, "end_reason": "done", "ns_calls": 4, "ns_ms": 12,
        "kind": "request",  # not a column: not in the row
    }
    assert request_row(record) == [
        "dpm1", "abc-123", "put", "/DC=ch/CN=alice", "2", "success",
        "1000.000", "1000.250", "1003.000",
        "0.005", "0.020", "0.250", "1.200", "3", "0.900",
        "", "1.500", "0.045", "3.000",
        "done", "4", "0.012",
    ]


def test_request_row_of_a_record_missing_keys_has_one_empty_cell_per_column():
    assert request_row({"host": "dpm1"}) == ["dpm1"] + [""] * 21


def test_call_row_formats_call_times_but_not_pid_thread_or_rc():
    record = {
        "host": "dpm1", "daemon": "dpns", "pid": 4242, "thread": 7, "op": "stat",
        "client": "/DC=ch/CN=bob", "started": 2_000_001, "ended": 2_000_011,
        "duration_ms": 10, "rc": 0, "auth_ms": None, "session": "s1", "token": None,
    }
    assert call_row(record) == [
        "dpm1", "dpns", "4242", "7", "stat", "/DC=ch/CN=bob", "2000.001", "2000.011",
        "0.010", "0", "", "s1", "",
    ]


def test_zero_is_a_value_not_an_empty_cell():
    row = call_row({"pid": 0, "rc": 0, "duration_ms": 0})
    assert row[CALL_COLUMNS.index("pid")] == "0"
    assert row[CALL_COLUMNS.index("rc")] == "0"
    assert row[CALL_COLUMNS.index("duration_s")] == "0.000"


def test_to_json_dict_of_a_request_puts_kind_first_and_times_in_float_seconds():
    record = {"kind": "request", "host": "dpm1", "token": "t", "nfiles": 1, "polls": 2,
              "accepted": 1500, "total_ms": 250, "ended": None, "extra": "dropped"}
    out = to_json_dict(record)
    assert list(out) == ["kind", *REQUEST_COLUMNS]
    assert out["kind"] == "request"
    assert out["accepted"] == 1.5
    assert out["total_s"] == 0.25
    assert out["ended"] is None
    assert out["nfiles"] == 1 and out["polls"] == 2  # counts stay integers
    assert out["status"] is None  # missing column: present as None
    assert "extra" not in out


def test_to_json_dict_of_a_call_uses_the_call_columns():
    record = {"kind": "call", "host": "dpm1", "pid": 12, "rc": 2, "started": 10,
              "ended": 30, "duration_ms": 20}
    out = to_json_dict(record)
    assert list(out) == ["kind", *CALL_COLUMNS]
    assert out["started"] == 0.01 and out["ended"] == 0.03 and out["duration_s"] == 0.02
    assert out["pid"] == 12 and out["rc"] == 2


def test_to_json_dict_needs_a_kind():
    with pytest.raises(KeyError):
        to_json_dict({"host": "dpm1"})


# -- the compiled formatting (native/src/records.rs) against the Python reference -------

from dpmstream.parsers import records as records_module  # noqa: E402

needs_compiled_formatting = pytest.mark.skipif(
    records_module._compiled_csv is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled formatting is not built (no Rust toolchain at install time)")

AWKWARD_TEXTS = [
    "plain", "", "with,comma", 'with "quotes"', "line\nbreak", "carriage\rreturn",
    " leading space", "tab\there", "/DC=ch/DC=cern/CN=Jos\u00e9 Pe\u00f1a", "\u4e2d\u6587",
    "emoji \U0001F600", "control \x01\x1f", "back\\slash", "del\x7f", "nul?", "a;b|c",
]


def awkward_records():
    """Records of both kinds with every value shape a record field can hold."""
    out = []
    for i, text in enumerate(AWKWARD_TEXTS):
        out.append({
            "kind": "request", "host": "head01", "token": f"tok-{i}", "op": "put",
            "client": text, "nfiles": None if i % 2 else i, "status": "success",
            "accepted": None if i % 3 == 0 else 1313152300000 + i, "started": 1313152300001,
            "ended": 1313152301999 + 7 * i, "auth_ms": 0, "request_ms": i, "queue_ms": None,
            "proc_ms": 10 ** i, "polls": i, "poll_ms": 999, "ready_wait_ms": 1000,
            "transfer_ms": 1001, "done_ms": None, "total_ms": 123456789012, "end_reason": "line",
            "ns_calls": None if i % 2 else i, "ns_ms": None if i % 2 else 5 * i,
        })
        out.append({
            "kind": "call", "host": text or "h", "daemon": "dpns", "pid": 12345 + i,
            "thread": None if i % 2 else i, "op": "creat", "client": text,
            "started": 1313152300000 + i, "ended": None if i % 4 == 3 else 1313152300100,
            "duration_ms": None if i % 4 == 3 else 100 - i, "rc": -i if i % 2 else 0,
            "auth_ms": None, "session": None if i % 2 else "sess", "token": None if i % 3 else text,
            "path": "/dpm/x",
        })
    out.append({"kind": "request", "host": "h"})  # keys missing: empty cells, nulls
    return out


def simulated_records(tmp_path):
    from dpmstream.parsers.pipeline import Pipeline
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario
    cfg = scenario("mixed", requests=300)
    simulate(cfg, tmp_path / "sim")
    kept = []
    pipeline = Pipeline(kept.append)
    for name in ("sim.log", "sim.dpns.log"):
        src = pipeline.source(name, host=cfg.host, tz=cfg.tz)
        src.feed_lines((tmp_path / name).read_bytes().splitlines(keepends=True))
    pipeline.finish()
    return kept


@needs_compiled_formatting
def test_compiled_csv_lines_are_what_the_csv_module_writes(tmp_path):
    records = awkward_records() + simulated_records(tmp_path)
    assert len(records) > 600
    for record in records:
        assert records_module._compiled_csv(record) == records_module.python_csv_line(record), record


@needs_compiled_formatting
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_compiled_json_is_what_json_dumps_writes(tmp_path, ensure_ascii):
    records = awkward_records() + simulated_records(tmp_path)
    for record in records:
        got = records_module._compiled_json(record, ensure_ascii)
        assert got == records_module.python_json_text(record, ensure_ascii=ensure_ascii), record


@needs_compiled_formatting
def test_a_value_no_record_holds_is_left_to_python():
    odd = dict(awkward_records()[0], nfiles=1.5)   # a float
    assert records_module._compiled_csv(odd) is None
    assert records_module._compiled_json(odd, True) is None
    assert records_module.csv_line(odd) == records_module.python_csv_line(odd)
    huge = dict(awkward_records()[0], polls=10 ** 30)  # past 64 bits
    assert records_module.json_text(huge, ensure_ascii=False) == records_module.python_json_text(
        huge, ensure_ascii=False)
