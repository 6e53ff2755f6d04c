"""streams/kafka/lines_fetch.py: the worker's librdkafka consumer of the lines topic, on a
real broker: partitions start where the take says, a transaction's lines are read only
once committed, the consumer commits no offset of its own, and what it prefetches is
bounded."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from dpmstream.streams.kafka.lines_fetch import (FETCH_MAX_BYTES, PREFETCH_BOUND_BYTES,
                                                 LinesConsumer, consumer_settings)
from dpmstream.streams.kafka.worker import WorkerConfig
from tests.worker_helpers import committed_offsets, produce

pytestmark = pytest.mark.services

WITHIN_S = 120.0   # a loaded machine: the group's first join can take a while
# The prefetch test's records: the size of a worker's envelope (a DPM line and its host,
# path, offset and time), four partitions as bench_worker's; a topic 4 times the bound.
ENVELOPE_BYTES = 220
TOPIC_BYTES = 4 * PREFETCH_BOUND_BYTES


def _lines(n, start=0):
    return [(b"head01", f"line {i}".encode()) for i in range(start, start + n)]


async def _fetch_until(consumer, want: int, stop_after=None) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of records fetched until `want` of them."""
    got = []
    deadline = time.monotonic() + WITHIN_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records fetched"
        for p, records in (await consumer.fetch(1000, 0.2)).items():
            got += [(p, r.offset(), r.value()) for r in records]
    return got


def _read(bootstrap: str, topic: str, group: str, want: int) -> list[tuple[int, int, bytes]]:
    """_fetch_until's records, read by a consumer of its own in `group` that takes every
    partition from its start."""
    async def main():
        async def nothing(ps):
            pass

        consumer = LinesConsumer(topic, consumer_settings(bootstrap, group, {}), nothing, nothing)
        consumer.start()
        try:
            return await _fetch_until(consumer, want)
        finally:
            await consumer.close()

    return asyncio.run(main())


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

    asyncio.run(write())
    got = _read(kafka_broker.bootstrap, topic, group, 1)
    assert [v for _p, _o, v in got] == [b"committed"]


def test_a_consumer_that_stops_taking_records_prefetches_a_bounded_amount(kafka_broker):
    """A worker busy with a batch (or a slow commit) leaves librdkafka fetching ahead: its
    queue must stop under PREFETCH_BOUND_BYTES, not hold the topic (issue 30: with 8 MiB
    fetches and queue, 9.6 MB of this topic's 24 MiB, 42 MiB of bench_worker's, and
    ~3x that in memory). The
    bound is at most one worker batch of envelopes."""
    topic, group = f"lf-{uuid.uuid4().hex[:8]}", f"lf-group-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=4)
    value = b"x" * ENVELOPE_BYTES
    produce(kafka_broker.bootstrap, topic, [(f"head{i % 4}".encode(), value)
                                            for i in range(TOPIC_BYTES // ENVELOPE_BYTES)])
    queued = []   # (records, payload bytes) in librdkafka's queue, from its statistics

    def stats(js):
        parts = [pd for t in json.loads(js)["topics"].values()
                 for p, pd in t["partitions"].items() if p != "-1"]
        if parts:   # the partitions' queues are the consumer's one queue: each reports it
            queued.append((parts[0]["fetchq_cnt"], parts[0]["fetchq_size"]))

    async def main():
        async def nothing(ps):
            pass

        settings = dict(consumer_settings(kafka_broker.bootstrap, group, {}),
                        stats_cb=stats, **{"statistics.interval.ms": 100})
        consumer = LinesConsumer(topic, settings, nothing, nothing)
        consumer.start()
        try:
            await _fetch_until(consumer, 1)   # joined, fetching
            deadline = time.monotonic() + WITHIN_S
            # Then one record a tenth of a second (librdkafka hands its statistics out only
            # in a poll), until the queue has stopped growing for two seconds.
            while len(queued) < 20 or queued[-1][1] > queued[-20][1]:
                assert time.monotonic() < deadline, f"the queue still grows: {queued[-3:]}"
                await consumer.fetch(1, 0.1)
                await asyncio.sleep(0.1)
        finally:
            await consumer.close()

    batch = WorkerConfig("unused:9092").batch_records
    assert PREFETCH_BOUND_BYTES <= batch * ENVELOPE_BYTES, "at most a worker's batch ahead"
    asyncio.run(main())
    most = max(size for _cnt, size in queued)
    assert 0 < most <= PREFETCH_BOUND_BYTES, \
        f"prefetched {most:,} bytes of a {TOPIC_BYTES:,}-byte topic"


def test_a_record_larger_than_a_fetch_is_read_whole_with_the_records_after_it(kafka_broker):
    """The consumer's fetches are small (FETCH_MAX_BYTES, message.max.bytes lowered with
    it): a record batch larger than a fetch, as rsyslog's producer may write one (the
    broker takes up to 1 MiB), is still fetched whole, not refused or skipped."""
    topic, group = f"lf-{uuid.uuid4().hex[:8]}", f"lf-group-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=1)
    big = b"x" * (FETCH_MAX_BYTES * 3 // 2)   # under the broker's 1 MiB, over a fetch
    produce(kafka_broker.bootstrap, topic, [(b"head01", big)], chunk=1)
    produce(kafka_broker.bootstrap, topic, [(b"head01", b"after")], chunk=1)
    got = _read(kafka_broker.bootstrap, topic, group, 2)
    assert [(o, len(v)) for _p, o, v in got] == [(0, len(big)), (1, len(b"after"))]


def test_a_consumes_records_are_grouped_by_partition_in_offset_order_errors_apart(kafka_broker):
    """records_by_partition on what a real consume() returns: several partitions' runs,
    and its partition-EOF events, which are messages carrying an error (left out, their
    errors returned)."""
    from confluent_kafka import Consumer, KafkaError

    from dpmstream.streams.kafka.lines_fetch import records_by_partition

    topic = f"lf-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=3)
    sent = [(f"head{i % 5}".encode(), f"line {i}".encode()) for i in range(3000)]
    produce(kafka_broker.bootstrap, topic, sent + [(None, b"no key")])
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe([topic])
    messages, eofs = [], set()
    deadline = time.monotonic() + WITHIN_S
    try:
        while len(eofs) < 3:   # every partition read to its end
            assert time.monotonic() < deadline, f"{len(messages)} messages consumed"
            got = consumer.consume(500, 0.2)
            messages += got
            eofs |= {m.partition() for m in got if m.error() is not None}
    finally:
        consumer.close()

    batch, errors = records_by_partition(messages)
    assert sorted(batch) == [0, 1, 2]
    assert [e.code() for e in errors] == [KafkaError._PARTITION_EOF] * len(errors)
    assert len(errors) >= 3
    for p, records in batch.items():
        assert all(r.partition() == p for r in records)
        assert [r.offset() for r in records] == list(range(len(records)))
    by_value = lambda kv: kv[1]   # noqa: E731 - every value differs; a key may be None
    assert sorted(((r.key(), r.value()) for rs in batch.values() for r in rs), key=by_value) == \
        sorted(sent + [(None, b"no key")], key=by_value)
