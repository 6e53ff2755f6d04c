"""A transaction's messages sent a batch per partition (batch_send.send_batched) against a
real broker: each lands on the partition the producer's own send() would pick for its key,
in the order given, whether it fills several batches or is bigger than one."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from dpmstream.streams.kafka.batch_send import send_batched
from dpmstream.streams.kafka.key_partitioner import KeyPartitioner

pytestmark = pytest.mark.services


async def _send_in_a_transaction(bootstrap, messages, batch_size):
    partitioner = KeyPartitioner()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, partitioner=partitioner,
                                transactional_id=f"batch-send-{uuid.uuid4().hex[:8]}",
                                enable_idempotence=True, max_batch_size=batch_size,
                                max_request_size=8 << 20)
    await producer.start()
    try:
        futures = []
        await producer.begin_transaction()
        await send_batched(producer, partitioner, messages, futures)
        await producer.commit_transaction()
        return len(futures)
    finally:
        await producer.stop()


async def _read(bootstrap, topic, count):
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                fetch_max_bytes=32 << 20, max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    try:
        got = []
        while len(got) < count:
            for tp, msgs in (await consumer.getmany(timeout_ms=2000)).items():
                got += [(tp.partition, m.key, m.value) for m in msgs]
        return got
    finally:
        await consumer.stop()


def test_each_message_lands_where_send_would_put_it_in_order_over_several_batches(kafka_broker):
    topic, other = f"bs-{uuid.uuid4().hex[:8]}", f"bs-fixed-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=5)
    kafka_broker.create_topics([other], partitions=3)
    rng = random.Random(7)
    keys = [b""] + [f"token-{rng.getrandbits(64):x}".encode() for _ in range(300)]
    messages = [(topic, rng.choice(keys), f"{n:06d}".encode() + b"x" * rng.randrange(50, 400), None)
                for n in range(3000)]
    messages.insert(1500, (topic, keys[1], b"big" + b"y" * 40_000, None))   # more than a batch
    messages += [(other, f"s{n}".encode(), f"{n:06d}".encode(), 2) for n in range(200)]
    batches = asyncio.run(_send_in_a_transaction(kafka_broker.bootstrap, messages, 16_384))
    assert batches > 5 + 1, "every partition's messages fitted one batch: the split went untested"

    got = asyncio.run(_read(kafka_broker.bootstrap, topic, 3001))
    default = DefaultPartitioner()
    parts = list(range(5))
    assert sorted((p, k, v) for p, k, v in got) == sorted(
        (default(k, parts, parts), k, v) for _t, k, v, _p in messages if _t == topic)
    for p in parts:   # each partition's messages in the order given
        sent = [v for t, k, v, _ in messages if t == topic and default(k, parts, parts) == p]
        assert [v for q, _k, v in got if q == p] == sent

    fixed = asyncio.run(_read(kafka_broker.bootstrap, other, 200))
    assert [(p, v) for p, _k, v in fixed] == [(2, f"{n:06d}".encode()) for n in range(200)]
