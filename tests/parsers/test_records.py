"""parsers/records.py: column order, cell formatting and the JSON form of records."""

import pytest

from dpmstream.parsers.records import (
    CALL_COLUMNS, CALL_MS_FIELDS, REQUEST_COLUMNS, REQUEST_MS_FIELDS, call_row, ms_to_text,
    request_row, text_to_ms, to_json_dict,
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


def test_every_millisecond_field_is_a_column_of_its_record():
    assert REQUEST_MS_FIELDS <= set(REQUEST_COLUMNS)
    assert CALL_MS_FIELDS <= set(CALL_COLUMNS)


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
        "auth_s": 5, "request_s": 20, "queue_s": 250, "proc_s": 1200, "polls": 3,
        "poll_s": 900, "ready_wait_s": None, "transfer_s": 1500, "done_s": 45,
        "total_s": 3000, "end_reason": "done", "ns_calls": 4, "ns_s": 12,
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
        "duration_s": 10, "rc": 0, "auth_s": None, "session": "s1", "token": None,
    }
    assert call_row(record) == [
        "dpm1", "dpns", "4242", "7", "stat", "/DC=ch/CN=bob", "2000.001", "2000.011",
        "0.010", "0", "", "s1", "",
    ]


def test_zero_is_a_value_not_an_empty_cell():
    row = call_row({"pid": 0, "rc": 0, "duration_s": 0})
    assert row[CALL_COLUMNS.index("pid")] == "0"
    assert row[CALL_COLUMNS.index("rc")] == "0"
    assert row[CALL_COLUMNS.index("duration_s")] == "0.000"


def test_to_json_dict_of_a_request_puts_kind_first_and_times_in_float_seconds():
    record = {"kind": "request", "host": "dpm1", "token": "t", "nfiles": 1, "polls": 2,
              "accepted": 1500, "total_s": 250, "ended": None, "extra": "dropped"}
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
              "ended": 30, "duration_s": 20}
    out = to_json_dict(record)
    assert list(out) == ["kind", *CALL_COLUMNS]
    assert out["started"] == 0.01 and out["ended"] == 0.03 and out["duration_s"] == 0.02
    assert out["pid"] == 12 and out["rc"] == 2


def test_to_json_dict_needs_a_kind():
    with pytest.raises(KeyError):
        to_json_dict({"host": "dpm1"})
