"""Partition ownership against a real broker: a batch's records, state and offset commit
together; whoever takes a partition next reads exactly that state, and fences the owner
before it, whose later commit then comes to nothing."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.partitions import Outcome, PartitionOwners, encode_changes
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.topics import ensure_topics
from dpmstream.streams.kafka.worker import WorkerConfig
from dpmstream.streams.kafka.lines_fetch import Record as Message
from tests.worker_helpers import (
    _read_topic, as_json, canonical, committed_offsets, envelopes, read_topic)

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    sim = simulate(SimConfig(requests=120, seed=11), tmp_path_factory.mktemp("sim") / "s")
    recs = envelopes(sim.log_path, "dpmhead01", "/var/log/dpm/log")
    return [Message(k, v, n) for n, (k, v) in enumerate(recs)]


def config(broker):
    tag = uuid.uuid4().hex[:8]
    return WorkerConfig(bootstrap=broker.bootstrap, lines_topic=f"own-lines-{tag}",
                        requests_topic=f"own-req-{tag}", calls_topic=f"own-calls-{tag}",
                        group_id=f"own-group-{tag}", partitions=1)


async def _topics(cfg, state_topic):
    await ensure_topics(cfg.bootstrap, {}, lines=cfg.lines_topic,
                        outputs=[cfg.requests_topic, cfg.calls_topic], state=state_topic,
                        partitions=1)


async def _batch(owners, part, messages):
    part.feed_batch(messages)
    records, changes = part.checkpoint()
    return await owners.commit(part, records, encode_changes(changes), part.next_offset), records


def in_one_pipeline(messages):
    part = PartitionState(0)
    part.feed_batch(messages)
    return part.checkpoint()[0]


def output(cfg):
    return [v for _k, v in read_topic(cfg.bootstrap, cfg.requests_topic)
            + read_topic(cfg.bootstrap, cfg.calls_topic)]


def test_the_next_owner_resumes_from_the_last_committed_batch(kafka_broker, lines):
    cfg = config(kafka_broker)
    state_topic = f"{cfg.group_id}-state"
    half = len(lines) // 2

    async def main():
        await _topics(cfg, state_topic)
        first = PartitionOwners(cfg, state_topic)
        await first.start()
        part, states = await first.take(0)
        assert (part.next_offset, states) == (None, {})
        outcome, first_records = await _batch(first, part, lines[:half])
        assert outcome is Outcome.COMMITTED
        open_requests = part.pipeline.stats.in_flight
        await first.stop()

        second = PartitionOwners(cfg, state_topic)
        await second.start()
        part, _ = await second.take(0)
        assert part.next_offset == half
        assert part.pipeline.stats.in_flight == open_requests > 0
        outcome, rest = await _batch(second, part, lines[half:])
        assert outcome is Outcome.COMMITTED
        await second.stop()
        return first_records + rest

    committed = asyncio.run(main())
    assert canonical(output(cfg)) == canonical(as_json(committed))
    assert committed_offsets(cfg.bootstrap, cfg.group_id) == {0: len(lines)}
    assert canonical(committed) == canonical(in_one_pipeline(lines))
    assert read_topic(cfg.bootstrap, state_topic), "no state was committed"


def test_taking_a_partition_fences_its_previous_owner(kafka_broker, lines):
    cfg = config(kafka_broker)
    state_topic = f"{cfg.group_id}-state"
    third = len(lines) // 3

    async def main():
        await _topics(cfg, state_topic)
        old, new = PartitionOwners(cfg, state_topic), PartitionOwners(cfg, state_topic)
        await old.start()
        await new.start()
        old_part, _ = await old.take(0)
        assert (await _batch(old, old_part, lines[:third]))[0] is Outcome.COMMITTED
        new_part, _ = await new.take(0)           # a rebalance, or a restart elsewhere
        assert new_part.next_offset == third
        outcome, _ = await _batch(old, old_part, lines[third:2 * third])
        assert outcome is Outcome.FENCED           # the old owner notices only now
        assert 0 not in old.parts
        assert (await _batch(new, new_part, lines[third:]))[0] is Outcome.COMMITTED
        await old.stop()
        await new.stop()

    asyncio.run(main())
    assert canonical(output(cfg)) == canonical(as_json(in_one_pipeline(lines)))   # nothing twice


def test_the_state_loader_reads_a_partitions_state_and_then_fetches_nothing(kafka_broker, lines):
    """Left assigned after a take, the loader's fetcher would go on fetching that state
    partition as the owner commits to it, and hold what it fetched until the next take."""
    cfg = config(kafka_broker)
    state_topic = f"{cfg.group_id}-state"

    async def main():
        await _topics(cfg, state_topic)
        owners = PartitionOwners(cfg, state_topic)
        await owners.start()
        part, _ = await owners.take(0)
        assert (await _batch(owners, part, lines))[0] is Outcome.COMMITTED
        await asyncio.sleep(1.0)   # a fetcher still assigned has fetched the commit by now
        loader = owners._loader
        assigned, held = loader.assignment(), dict(loader._fetcher._records)
        await owners.stop()
        return assigned, held

    assigned, held = asyncio.run(main())
    assert assigned == set()   # the guard: no partition left to fetch from
    assert held == {}          # (what a fetcher left assigned holds after the sleep)
    assert read_topic(kafka_broker.bootstrap, state_topic), "no state was committed"


def _held_requests(records, copies):
    """A linker state holding `copies` of each record (distinct tokens): what a busy head
    node's linking holds while its name-server log lags, several MiB of it."""
    held = [dict(r, token=f"{r['token']}-{i}") for i in range(copies) for r in records]
    return {"runs": [], "calls": [], "requests": held, "ns_hosts": [], "heads": {}}


async def _latest(bootstrap, topic):
    """The state topic as a reader sees it: the latest bytes of every key not deleted."""
    latest = {}
    for key, value in await _read_topic(bootstrap, topic, value_of=bytes):
        latest[key.decode()] = value
    return {k: v for k, v in latest.items() if v is not None}


def test_a_state_value_bigger_than_a_kafka_record_is_stored_in_parts_and_read_back_whole(
        kafka_broker, lines):
    cfg = config(kafka_broker)
    state_topic = f"{cfg.group_id}-state"
    records = [r for r in in_one_pipeline(lines) if r.get("token")]
    big = _held_requests(records, 100)
    small = _held_requests(records[:2], 1)

    async def commit_linker(linker, offset):
        owners = PartitionOwners(cfg, state_topic)
        await owners.start()
        part, states = await owners.take(0)
        outcome = await owners.commit(part, [], encode_changes({"l": linker}), offset)
        await owners.stop()
        return outcome, states

    async def main():
        await _topics(cfg, state_topic)
        assert (await commit_linker(big, 1))[0] is Outcome.COMMITTED
        stored = await _latest(cfg.bootstrap, state_topic)
        assert len(encode_changes({"l": big})["l"]) > 4 << 20      # far over 1 MiB
        assert max(len(v) for v in stored.values()) < 1 << 20
        assert sum(k.startswith("c|") for k in stored) >= 16
        # The next owner reads it whole, and writes a smaller one over it.
        outcome, states = await commit_linker(small, 2)
        assert outcome is Outcome.COMMITTED
        assert states["l"] == json.loads(json.dumps(big))
        _, states = await commit_linker(small, 3)
        assert states["l"] == json.loads(json.dumps(small))
        left = [k for k in await _latest(cfg.bootstrap, state_topic) if k.startswith("c|")]
        assert not left, "the big value's parts outlived it"

    asyncio.run(main())


def test_a_record_the_broker_refuses_fails_the_whole_transaction(kafka_broker, lines):
    """aiokafka commits a transaction one of whose batches the broker refused; the worker
    must not: nothing of the batch (records, state, offset) may be committed without it."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    cfg = config(kafka_broker)
    state_topic = f"{cfg.group_id}-state"

    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=cfg.bootstrap)
        await admin.start()
        try:   # a requests topic that refuses any batch of a request record
            await admin.create_topics([NewTopic(cfg.requests_topic, 1, 1,
                                                topic_configs={"max.message.bytes": "100"})])
        finally:
            await admin.close()
        await _topics(cfg, state_topic)
        owners = PartitionOwners(cfg, state_topic)
        await owners.start()
        part, _ = await owners.take(0)
        outcome, records = await _batch(owners, part, lines)
        await owners.stop()
        return outcome, records

    outcome, records = asyncio.run(main())
    assert any(r.get("kind") == "put" or r.get("token") for r in records)
    assert outcome is Outcome.FAILED
    assert read_topic(cfg.bootstrap, cfg.requests_topic) == []
    assert read_topic(cfg.bootstrap, cfg.calls_topic) == []
    assert read_topic(cfg.bootstrap, state_topic) == []
    assert committed_offsets(cfg.bootstrap, cfg.group_id) == {}
