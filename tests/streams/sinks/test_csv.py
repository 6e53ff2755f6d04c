"""streams/sinks/csv.py: records, as they finish, into DIR/requests.csv and DIR/calls.csv."""

from __future__ import annotations

from dpmstream.streams.sinks.csv import CsvSink

REQUEST_HEADER = ("host,token,op,client,nfiles,status,accepted,started,ended,auth_s,"
                  "request_s,queue_s,proc_s,polls,poll_s,ready_wait_s,transfer_s,done_s,"
                  "total_s,end_reason,ns_calls,ns_s\r\n")
CALL_HEADER = ("host,daemon,pid,thread,op,client,started,ended,duration_s,rc,auth_s,"
               "session,token\r\n")


def raw(path) -> str:
    """The file's text with its line ends as written (csv's default is \\r\\n)."""
    return path.read_bytes().decode()


def test_the_sink_creates_the_directory_and_both_files_with_only_headers(tmp_path):
    out = tmp_path / "a" / "b"
    sink = CsvSink(str(out))
    sink.close()
    assert sink.requests_path == str(out / "requests.csv")
    assert sink.calls_path == str(out / "calls.csv")
    assert raw(out / "requests.csv") == REQUEST_HEADER
    assert raw(out / "calls.csv") == CALL_HEADER


def test_an_existing_directory_is_reused_and_old_files_are_replaced(tmp_path):
    (tmp_path / "requests.csv").write_text("stale\n")
    CsvSink(str(tmp_path)).close()
    assert raw(tmp_path / "requests.csv") == REQUEST_HEADER


def test_a_request_record_goes_to_requests_csv_with_seconds_cells(tmp_path):
    sink = CsvSink(str(tmp_path))
    sink.write({"kind": "request", "host": "head01", "token": "t1", "op": "get", "nfiles": 1,
                "status": "success", "accepted": 1_313_143_200_000, "total_ms": 1250})
    sink.close()
    assert raw(tmp_path / "requests.csv") == REQUEST_HEADER + (
        "head01,t1,get,,1,success,1313143200.000,,,,,,,,,,,,1.250,,,\r\n")
    assert raw(tmp_path / "calls.csv") == CALL_HEADER


def test_a_call_record_goes_to_calls_csv(tmp_path):
    sink = CsvSink(str(tmp_path))
    sink.write({"kind": "call", "host": "head01", "daemon": "dpns", "pid": 99, "thread": 3,
                "op": "stat", "started": 5, "ended": 12, "duration_ms": 7, "rc": 2})
    sink.close()
    assert raw(tmp_path / "calls.csv") == CALL_HEADER + (
        "head01,dpns,99,3,stat,,0.005,0.012,0.007,2,,,\r\n")
    assert raw(tmp_path / "requests.csv") == REQUEST_HEADER


def test_a_client_dn_with_commas_is_quoted_not_split(tmp_path):
    sink = CsvSink(str(tmp_path))
    sink.write({"kind": "call", "host": "h", "client": "CN=a, O=b"})
    sink.close()
    assert (tmp_path / "calls.csv").read_text().splitlines()[1] == 'h,,,,,"CN=a, O=b",,,,,,,'


def test_records_keep_the_order_they_finished_in(tmp_path):
    sink = CsvSink(str(tmp_path))
    for token in ("t3", "t1", "t2"):
        sink.write({"kind": "request", "token": token})
    sink.close()
    rows = (tmp_path / "requests.csv").read_text().splitlines()[1:]
    assert [row.split(",")[1] for row in rows] == ["t3", "t1", "t2"]
