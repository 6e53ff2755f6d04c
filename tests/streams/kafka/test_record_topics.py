"""Where a finished record goes on Kafka: topic, key and JSON value."""

import json

from dpmstream.streams.kafka.record_topics import output_message


def test_a_request_goes_to_the_requests_topic_keyed_by_its_token_in_seconds():
    record = {"kind": "request", "host": "head01", "token": "f1d7-tok", "op": "put",
              "request_s": 1500, "status": "success"}
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
