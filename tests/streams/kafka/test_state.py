"""streams/kafka/state.py: one partition's pipeline without a broker: duplicates, bad records, state round trips."""

from __future__ import annotations

import json

import pytest

from dpmstream.simulator import SimConfig, simulate
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
    assert remembered and len(remembered) == part.pipeline.reassembler.remembered_ended
