"""streams/kafka/lines_fetch.py: the worker's librdkafka consumer of the lines topic, on a
real broker: partitions start where the take says, a transaction's lines are read only
once committed, and the consumer commits no offset of its own."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from dpmstream.streams.kafka.lines_fetch import LinesConsumer, consumer_settings
from tests.worker_helpers import committed_offsets, produce

pytestmark = pytest.mark.services

WITHIN_S = 120.0   # a loaded machine: the group's first join can take a while


def _lines(n, start=0):
    return [(b"head01", f"line {i}".encode()) for i in range(start, start + n)]


async def _fetch_until(consumer, want: int, stop_after=None) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of records fetched until `want` of them."""
    got = []
    deadline = time.monotonic() + WITHIN_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records fetched"
        for p, records in (await consumer.fetch(1000, 0.2)).items():
            got += [(p, r.offset, r.value) for r in records]
    return got


def test_a_partition_taken_starts_where_its_take_seeks_and_no_offset_is_committed(kafka_broker):
    topic, group = f"lf-{uuid.uuid4().hex[:8]}", f"lf-group-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=1)
    produce(kafka_broker.bootstrap, topic, _lines(10))
    taken, revoked = [], []

    async def main():
        async def on_assign(ps):
            taken.append(ps)
            consumer.seek(ps[0], 4)   # the take's state says: from offset 4 on

        async def on_revoke(ps):
            revoked.append(ps)

        consumer = LinesConsumer(topic, consumer_settings(kafka_broker.bootstrap, group, {}),
                                 on_assign, on_revoke)
        consumer.start()
        try:
            first = await _fetch_until(consumer, 6)
            assert consumer.assignment() == {0}
            consumer.seek(0, 1)   # taken again (a failed transaction): from offset 1
            again = await _fetch_until(consumer, 9)
        finally:
            await consumer.close()
        return first, again

    first, again = asyncio.run(main())
    assert taken == [[0]] and revoked == [[0]], "close() gives the partition up"
    assert [off for _p, off, _v in first] == list(range(4, 10))
    assert [(off, v) for _p, off, v in again] == [(i, f"line {i}".encode()) for i in range(1, 10)]
    assert committed_offsets(kafka_broker.bootstrap, group) == {}, \
        "offsets are committed only inside the worker's transactions"


def test_only_committed_transactions_lines_are_fetched(kafka_broker):
    from aiokafka import AIOKafkaProducer

    topic, group = f"lf-{uuid.uuid4().hex[:8]}", f"lf-group-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=1)

    async def write():
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                    transactional_id=f"lf-{uuid.uuid4().hex[:8]}")
        await producer.start()
        try:
            for value, commit in ((b"aborted", False), (b"committed", True)):
                await producer.begin_transaction()
                await producer.send_and_wait(topic, value, key=b"head01")
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    async def main():
        await write()

        async def nothing(ps):
            pass

        consumer = LinesConsumer(topic, consumer_settings(kafka_broker.bootstrap, group, {}),
                                 nothing, nothing)
        consumer.start()
        try:
            return await _fetch_until(consumer, 1)
        finally:
            await consumer.close()

    got = asyncio.run(main())
    assert [v for _p, _o, v in got] == [b"committed"]
