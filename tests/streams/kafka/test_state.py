"""The Kafka worker's pieces that need no broker: envelopes, duplicates, state round trips."""

from __future__ import annotations

import json

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.config import (
    KafkaConfigError, KafkaSecurity, parse_broker, security_from_args,
)
from dpmstream.streams.kafka.envelope import EnvelopeError, decode, encode, ms_to_rfc3339, rfc3339_to_ms
from dpmstream.streams.kafka.state import PartitionState
from tests.worker_helpers import canonical, core_records, interleaved
from tests.worker_helpers import envelopes as _envelopes

HOST = "dpmhead01"
PATH = "/var/log/dpm/log"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate(SimConfig(requests=250, seed=7), tmp_path_factory.mktemp("sim") / "s")


def envelopes(path, host=HOST, log_path=PATH):
    return _envelopes(path, host, log_path)


# -- envelope ------------------------------------------------------------------------------

def test_envelope_round_trips_and_received_gives_epoch_milliseconds():
    raw = encode("h1", "/var/log/dpm/log", 42, "2011-08-12T14:31:43.118402+02:00", "08/12 line")
    env = decode(raw)
    assert (env.host, env.path, env.offset, env.line) == ("h1", "/var/log/dpm/log", 42, "08/12 line")
    assert env.received_ms == 1313152303118
    assert ms_to_rfc3339(1313152303118) == "2011-08-12T12:31:43.118000Z"
    assert rfc3339_to_ms(ms_to_rfc3339(1313152303118)) == 1313152303118


@pytest.mark.parametrize("raw, reason", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"path": "/p", "offset": 1, "line": "x"}', "missing host"),
    (b'{"host": "h", "offset": 1, "line": "x"}', "missing path"),
    (b'{"host": "h", "path": "/p", "offset": -1, "line": "x"}', "offset"),
    (b'{"host": "h", "path": "/p", "offset": 1}', "missing line"),
    (None, "empty"),
])
def test_envelope_that_cannot_be_used_is_rejected_with_its_reason(raw, reason):
    with pytest.raises(EnvelopeError, match=reason):
        decode(raw)


@pytest.mark.parametrize("stamp", [
    "2011-08-12T14:31:43.118402+02:00", "2011-08-12T14:31:43.999999-05:30",
    "2011-08-12T14:31:43.000999Z", "2011-08-12T14:31:43.118402z",   # rsyslog's forms
    "2011-08-12T14:31:43Z", "2011-08-12T14:31:43.1+02:00", "2011-08-12T14:31:43.118+00:00",
])
def test_received_times_in_every_rfc3339_form_give_the_same_milliseconds_as_a_full_parse(stamp):
    import datetime as dt
    full = dt.datetime.fromisoformat(stamp.replace("z", "Z"))
    assert rfc3339_to_ms(stamp) == int(full.timestamp()) * 1000 + full.microsecond // 1000
    assert rfc3339_to_ms(stamp) == rfc3339_to_ms(stamp)   # again, from the cached second


@pytest.mark.parametrize("stamp", ["2011-08-12T14:31:43", "2011-08-12T14:31:43.11840x+02:00",
                                   "2011-08-12T14:31:43.118402+0200x", "yesterday"])
def test_received_times_without_an_offset_or_malformed_are_refused(stamp):
    with pytest.raises(ValueError):
        rfc3339_to_ms(stamp)


def test_envelope_with_an_escaped_lone_surrogate_is_still_decoded():
    env = decode(b'{"host":"h","path":"/p","offset":1,"line":"a\\ud800b"}')
    assert env.line == "a\ud800b"


def test_envelope_with_a_bad_received_time_keeps_the_line():
    env = decode(b'{"host":"h","path":"/p","offset":"7","received":"yesterday","line":"x"}')
    assert env.offset == 7 and env.received_ms is None and env.line == "x"


# -- configuration -----------------------------------------------------------------------

def test_broker_urls_become_a_bootstrap_list():
    assert parse_broker("kafka://a:9092") == "a:9092"
    assert parse_broker("kafka://a:9092,kafka://b:9093;c:1") == "a:9092,b:9093,c:1"
    for bad in ("", "http://a:9092", "kafka://a", "kafka://:9092"):
        with pytest.raises(KafkaConfigError):
            parse_broker(bad)


def test_sasl_password_comes_from_a_file_or_the_environment_and_is_never_shown(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")

    class Args:
        security_protocol = "SASL_PLAINTEXT"
        sasl_mechanism = "SCRAM-SHA-512"
        sasl_username = "dpm"
        sasl_password_file = str(pw)
        ssl_cafile = None

    sec = security_from_args(Args, environ={})
    assert sec.password == "s3cret"
    assert "s3cret" not in repr(sec) and "s3cret" not in str(sec)
    assert sec.client_kwargs()["sasl_plain_password"] == "s3cret"
    Args.sasl_password_file = None
    sec = security_from_args(Args, environ={"DPMSTREAM_KAFKA_PASSWORD": "envpw"})
    assert sec.password == "envpw"
    with pytest.raises(KafkaConfigError, match="password"):
        security_from_args(Args, environ={})


def test_plaintext_needs_no_credentials():
    assert KafkaSecurity().client_kwargs() == {"security_protocol": "PLAINTEXT"}


# -- duplicates ------------------------------------------------------------------------------

def test_a_line_delivered_twice_is_fed_once_and_counted_as_duplicate(sim):
    recs = envelopes(sim.log_path)[:500]
    once = PartitionState(0)
    for key, value in recs:
        once.feed_record(key, value)
    twice = PartitionState(0)
    for key, value in recs[:300] + recs[200:]:   # 200..299 again
        twice.feed_record(key, value)
    assert twice.duplicates[HOST] == 100
    assert twice.stats.lines == once.stats.lines
    assert canonical(twice.checkpoint()[0]) == canonical(once.checkpoint()[0])


def test_a_batch_is_fed_in_order_and_marks_the_next_kafka_offset(sim):
    from collections import namedtuple
    Message = namedtuple("Message", "key value offset")
    recs = envelopes(sim.log_path)[:500]
    one_by_one = PartitionState(0)
    for key, value in recs:
        one_by_one.feed_record(key, value)
    batched = PartitionState(0)
    batched.feed_batch([Message(k, v, 1000 + i) for i, (k, v) in enumerate(recs)])
    assert batched.next_offset == 1500
    assert batched.stats.lines == one_by_one.stats.lines
    assert canonical(batched.checkpoint()[0]) == canonical(one_by_one.checkpoint()[0])


def test_a_rotated_file_starting_again_at_offset_zero_is_not_taken_for_duplicates(sim):
    recs = envelopes(sim.log_path)
    part = PartitionState(0)
    for key, value in recs[:1000]:
        part.feed_record(key, value)
    # The same path now holds a new file: offsets start again from 0, other lines.
    rotated = [(k, json.dumps({**json.loads(v), "offset": json.loads(v)["offset"] - json.loads(recs[1000][1])["offset"]}).encode())
               for k, v in recs[1000:2000]]
    for key, value in rotated:
        part.feed_record(key, value)
    assert part.rotations[HOST] == 1
    assert part.duplicates[HOST] == 0
    parsed = sum(n for (h, d, r), n in part.stats.lines.items() if r == "parsed")
    assert parsed == 2000


def test_records_that_are_not_envelopes_are_counted_as_malformed_lines():
    part = PartitionState(0)
    part.feed_record(b"head07", b"{garbage")
    part.feed_record(b"\xff\xfe", b'{"host": "h"}')
    part.feed_record(None, None)
    lines = part.stats.lines
    assert lines[("head07", "unknown", "malformed")] == 1
    assert lines[("unknown", "unknown", "malformed")] == 2
    assert part.bad_records == 3 and "not JSON" not in part.last_bad_reason


# -- state round trip -------------------------------------------------------------------------

@pytest.mark.parametrize("every", [3, 97, 1000])
def test_state_saved_every_k_lines_and_restored_gives_the_same_records(sim, every):
    """A worker restarted from its changelog after any batch carries on exactly."""
    recs = interleaved(envelopes(sim.log_path),
                       envelopes(sim.dpns_log_path, log_path="/var/log/dpns/log"))
    expected = core_records(recs)

    store: dict = {}
    out: list = []
    part = PartitionState(0)
    for i, (key, value) in enumerate(recs, 1):
        part.feed_record(key, value)
        if i % every == 0 or i == len(recs):
            part.consumed(i)
            part.advance()
            records, changes = part.checkpoint()
            out += records
            for k, v in changes.items():
                if v is None:
                    store.pop(k, None)
                else:
                    store[k] = json.loads(json.dumps(v))   # as it comes back from Kafka
            part = PartitionState(0)                          # "crash" and restore
            part.restore(dict(store))
    assert part.next_offset == len(recs)
    assert len(out) == len(expected)
    assert canonical(out) == canonical(expected)


def test_tombstones_leave_only_open_state_in_the_store(sim):
    part = PartitionState(0)
    store = {}
    recs = envelopes(sim.log_path)
    for i, (key, value) in enumerate(recs, 1):
        part.feed_record(key, value)
        if i % 500 == 0 or i == len(recs):
            for k, v in part.checkpoint()[1].items():
                if v is None:
                    assert k in store, f"tombstone for {k} that was never stored"
                    del store[k]
                else:
                    store[k] = v
    open_requests = sum(1 for k in store if k.startswith("r|"))
    assert open_requests == part.pipeline.stats.in_flight
    remembered = [key for k, keys in store.items() if k.startswith("f|") for key in keys]
    assert remembered and len(remembered) == len(part.pipeline.reassembler.finished)
