"""Partition ownership against a real broker: a batch's records, state and offset commit
together; whoever takes a partition next reads exactly that state, and fences the owner
before it, whose later commit then comes to nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections import namedtuple

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.partitions import Outcome, PartitionOwners, encode_changes
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.topics import ensure_topics
from dpmstream.streams.kafka.worker import WorkerConfig
from tests.worker_helpers import as_json, canonical, committed_offsets, envelopes, read_topic

pytestmark = pytest.mark.services

Message = namedtuple("Message", "key value offset")


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
