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
