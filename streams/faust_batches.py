"""A Faust transport that hands the lines topic to the agent a fetched batch at a time.

Faust turns every Kafka record into an Event and walks it through its per-event
machinery (a task pair per record in the fetch loop, the conductor's lock, the channel
queue, sensors, one ack per event). On this project's machines that caps a Faust agent
at about 13,000 events/s even when the agent does nothing, far below one head node's
line rate during a burst. So for the topics the app names in its `batched_topics`
attribute this consumer takes each fetch's records out before Faust's per-record loop
and hands them on as ONE message per partition: a `BatchMessage` whose `records` are
aiokafka's records in offset order and whose offset is the last of them.
Everything else about the app stays Faust's: group membership and rebalances, table
recovery from changelogs, exactly-once transactions and the offsets they commit.

Offsets: before a batch is handed on, the offsets from the partition's previous batch
up to the one before its last are registered as a gap (Faust's way of skipping the
holes transaction markers leave), so acking the batch message commits past all of it.
(Faust's own fetch loop would register a gap that ends AT the acked offset; two batches
acked between commits then leave a duplicate offset in its acked list, and the commit
stops there. So the read offset is moved first and that loop sees no jump.)

Offsets the app commits itself: for the topics named in the app's
`self_committed_topics` (the worker commits its input offsets in its own Kafka
transactions), Faust's commit leaves the offsets alone and only notes that the acked
records are committed (its livelock detector warns about partitions that never commit).

Registered under the broker URL scheme `dpmstream` (`broker="dpmstream://HOST:PORT"`),
Faust's own way of choosing a transport. It uses consumer internals of faust-streaming
0.15 (`_read_offset`, `_add_gap`), which pyproject.toml pins.
"""

from __future__ import annotations

from time import monotonic
from typing import AsyncIterator

from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.tuples import TP, ConsumerMessage, Message

SCHEME = "dpmstream"


class BatchMessage(ConsumerMessage):
    """One partition's share of a fetch; `records` holds its aiokafka ConsumerRecords
    (.offset, .key, .value, ...) in offset order."""

    __slots__ = ("records",)


class BatchingConsumer(faust_aiokafka.Consumer):
    _fetched: dict | None = None   # the batched partitions' records of the current fetch

    async def _wait_next_records(self, timeout: float):
        # Take the batched topics' records out of the fetch before Faust's per-record
        # loop (getmany) sees them: they are passed on whole, as aiokafka made them.
        records, active = await super()._wait_next_records(timeout)
        batched = getattr(self.app, "batched_topics", ())
        if records and batched:
            taken = {tp: recs for tp, recs in records.items() if tp.topic in batched and recs}
            if taken:
                self._fetched = {tp: recs for tp, recs in taken.items()
                                 if active is None or tp in active
                                 or tp in self._buffered_partitions}
                records = {tp: recs for tp, recs in records.items() if tp not in taken}
        return records, active

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        generation = self.app.consumer_generation_id
        self._fetched = None
        async for tp, message in super().getmany(timeout):
            yield tp, message
        fetched, self._fetched = self._fetched, None
        if not fetched or not self.flow_active or self.app.consumer_generation_id != generation:
            # A rebalance began during the fetch: these records are not acked, so they
            # are fetched again by whoever owns the partition next.
            return
        for tp, records in fetched.items():
            previous, last = self._read_offset[tp], records[-1].offset
            start = records[0].offset if previous is None else previous + 1
            if start < last:
                await self._add_gap(tp, start, last - 1)
            self._read_offset[tp] = last - 1
            self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
            yield tp, self._batch_message(tp, records, generation)

    def _batch_message(self, tp: TP, records: list, generation: int) -> BatchMessage:
        last = records[-1]
        batch = BatchMessage(
            tp.topic, tp.partition, last.offset,
            None if last.timestamp is None else last.timestamp / 1000.0, last.timestamp_type,
            None, None, b"", None, 0, 0, tp, generation_id=generation)
        batch.records = records
        return batch

    async def _commit(self, offsets) -> bool:
        ours = getattr(self.app, "self_committed_topics", ())
        if not ours:
            return await super()._commit(offsets)
        now = monotonic()
        self._thread.tp_last_committed_at.update(
            {tp: now for tp in offsets if tp.topic in ours})
        rest = {tp: offset for tp, offset in offsets.items() if tp.topic not in ours}
        return await super()._commit(rest) if rest else True


class BatchingTransport(faust_aiokafka.Transport):
    Consumer = BatchingConsumer


TRANSPORTS.aliases.setdefault(SCHEME, f"{__name__}:BatchingTransport")
