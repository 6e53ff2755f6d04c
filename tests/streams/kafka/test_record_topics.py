"""Where a finished record goes on Kafka: topic, key and JSON value."""

import json

from dpmstream.streams.kafka.record_topics import RecordTopics, output_message
from dpmstream.streams.sinks.fan_out import FanOut


def test_a_request_goes_to_the_requests_topic_keyed_by_its_token_in_seconds():
    record = {"kind": "request", "host": "head01", "token": "f1d7-tok", "op": "put",
              "request_ms": 1500, "status": "success"}
    topic, key, value = output_message(record, "dpm.requests", "dpm.calls")
    assert (topic, key) == ("dpm.requests", b"f1d7-tok")
    doc = json.loads(value)
    assert doc["kind"] == "request" and doc["request_s"] == 1.5 and doc["host"] == "head01"
    assert b" " not in value  # compact


def test_a_call_goes_to_the_calls_topic_keyed_by_its_host():
    record = {"kind": "call", "host": "head01", "daemon": "dpns", "op": "stat", "rc": 0}
    topic, key, value = output_message(record, "req", "calls")
    assert (topic, key) == ("calls", b"head01")
    assert json.loads(value)["daemon"] == "dpns"


def test_a_request_without_a_token_gets_the_empty_key_not_a_crash():
    topic, key, _ = output_message({"kind": "request", "token": None}, "req", "calls")
    assert (topic, key) == ("req", b"")


def test_the_topics_sink_holds_encoded_records_in_order_until_the_transaction_takes_them():
    out = RecordTopics("req", "calls")
    out.write({"kind": "call", "host": "h1", "op": "stat"})
    out.write({"kind": "request", "host": "h1", "token": "t1", "op": "get"})
    held = out.take()
    assert [(topic, key) for topic, key, _ in held] == [("calls", b"h1"), ("req", b"t1")]
    assert json.loads(held[1][2])["op"] == "get"
    assert out.take() == [], "taken once: a second transaction does not send them again"


def test_the_topics_sink_is_a_record_sink_of_the_fan_out():
    out = RecordTopics("req", "calls")
    fan = FanOut([out])
    fan.write({"kind": "call", "host": "h2", "op": "stat"})
    assert [key for _, key, _ in out.take()] == [b"h2"]
    fan.write({"kind": "call", "host": "h3", "op": "stat"})
    fan.close()
    assert out.take() == [], "closing drops what no transaction took"


def test_a_dome_put_goes_with_the_requests_keyed_by_its_head_in_its_dome_json_form():
    record = {"kind": "dome_put", "head": "dpmhead01", "lfn": "/dpm/cern.ch/home/atlas/f1",
              "put_time": 1496126645123, "put_to_putdone": 2500, "status": "success",
              "whole_seconds": 0}
    topic, key, value = output_message(record, "dpm.requests", "dpm.calls")
    assert (topic, key) == ("dpm.requests", b"dpmhead01")
    doc = json.loads(value)
    assert list(doc)[:3] == ["kind", "head", "lfn"]   # dome_records.to_json_dict's columns
    assert doc["put_time"] == 1496126645.123 and doc["put_to_putdone"] == 2.5
    assert doc["server"] is None and b" " not in value


def test_dome_calls_capacity_and_filesystem_events_go_with_the_calls_keyed_by_their_host():
    for record in ({"kind": "dome_call", "host": "disk01", "command": "dome_putdone", "start": 1000,
                    "end": 1004, "duration": 4},
                   {"kind": "dome_capacity", "host": "disk02", "time": 5000, "fs": "/srv/fs1"},
                   {"kind": "dome_fs_event", "host": "dpmhead01", "time": 6000, "server": "disk01"}):
        topic, key, value = output_message(record, "req", "calls")
        assert (topic, key) == ("calls", record["host"].encode())
        assert json.loads(value)["kind"] == record["kind"]


def test_every_dome_record_kind_goes_out_keyed_by_its_node():
    """A put and a checksum wait by their head node, the rest by the node that logged them;
    a kind with no `host` column (the checksum wait) once crashed the worker."""
    from dpmstream.parsers.dome_records import KINDS
    node = {"dome_call": "dpmhead01", "dome_put": "dpmhead01", "dome_checksum": "dpmhead01",
            "dome_capacity": "dpmdisk01", "dome_fs_event": "dpmhead01", "dome_journald_gap": "dpmhead01"}
    assert set(node) == set(KINDS)
    for kind in KINDS:
        record = {"kind": kind, **{col: None for col in KINDS[kind][0]}}
        record["head" if "head" in KINDS[kind][0] else "host"] = node[kind]
        topic, key, value = output_message(record, "req", "calls")
        assert topic == ("req" if kind == "dome_put" else "calls")
        assert key == node[kind].encode() and json.loads(value)["kind"] == kind


# -- the compiled messages (native/src/records.rs, record_messages) against output_message --

import os  # noqa: E402

import pytest  # noqa: E402

from dpmstream.parsers.dome_checksums import ChecksumWaits, with_checksums  # noqa: E402
from dpmstream.streams.kafka import record_topics  # noqa: E402

from tests.parsers import test_dome_csv, test_records  # noqa: E402
from tests.scenarios.test_dome_truth import reassemble  # noqa: E402

needs_compiled_messages = pytest.mark.skipif(
    record_topics._compiled_messages is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled messages are not built (no Rust toolchain at install time)")


class Record(dict):
    """A dict of another type: its items may not be what the dict holds."""


def odd_records() -> list:
    """Records output_message builds from values no engine writes, or refuses."""
    request = test_records.awkward_records()[0]
    call = test_records.awkward_records()[1]
    return [
        dict(request, token=0), dict(request, token=""), dict(call, host=None),   # the empty key
        dict(request, token=5), dict(call, host=b"h1"),                           # AttributeError
        dict(request, token="bad \ud800"),                                        # UnicodeEncodeError
        {k: v for k, v in request.items() if k != "token"},                       # KeyError
        {k: v for k, v in call.items() if k != "host"},
        {"host": "h1", "token": "t1"},                                            # no kind
        dict(call, kind=None), dict(call, kind="other"), dict(call, kind="\ud800"),
        dict(request, nfiles=1.5), dict(request, polls=10 ** 30), dict(call, pid=True),
        dict(call, started="1.5"), Record(call), ["kind", "call"],
    ]


def outcome(build, *args):
    try:
        return build(*args)
    except Exception as exc:   # noqa: BLE001 (what output_message raises is part of the pin)
        return type(exc)


@needs_compiled_messages
def test_compiled_messages_are_output_messages_of_every_record_kind_and_odd_ones(tmp_path):
    """The batch's messages made at once are output_message's, byte for byte, for the
    engines' legacy and DOME records and for odd ones; where the extension leaves one to
    Python (None) the sink's write_all builds it as write() does, raising what it raises."""
    legacy = test_records.awkward_records() + test_records.simulated_records(tmp_path)
    site = test_dome_csv.simulate_dome(test_dome_csv.SITE, tmp_path / "site")
    dome = test_dome_csv.awkward_records() + with_checksums(
        reassemble(site, test_dome_csv.SITE)[1], ChecksumWaits())
    records = legacy + dome + odd_records()
    compiled = record_topics._compiled_messages(records, "req", "calls")
    assert len(compiled) == len(records)
    for record, message in zip(records, compiled):
        if message is not None:
            assert message == outcome(record_topics.output_message, record, "req", "calls"), record
    missing_token = legacy[len(test_records.awkward_records()) - 1]
    assert "token" not in missing_token
    assert [m is None for m in compiled[:len(legacy)]] == [r is missing_token for r in legacy], \
        "every legacy record the engines write is made by the extension; a KeyError is Python's"
    assert compiled[len(legacy):len(legacy) + len(dome)] == [None] * len(dome), "DOME: Python's"
    assert len(legacy) > 600 and {r["kind"] for r in dome} >= {"dome_call", "dome_put", "dome_checksum"}
    for record in records:
        out, one_by_one = RecordTopics("req", "calls"), RecordTopics("req", "calls")
        assert outcome(out.write_all, [record]) == outcome(one_by_one.write, record)
        assert out.take() == one_by_one.take()


@needs_compiled_messages
def test_a_batch_is_held_in_its_order_with_python_filling_in_what_the_extension_leaves():
    records = test_records.awkward_records()[:6] + test_dome_csv.awkward_records()[:6]
    out = RecordTopics("req", "calls")
    out.write_all(records)
    assert out.take() == [output_message(r, "req", "calls") for r in records]
