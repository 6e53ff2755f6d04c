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

Pacing: like a plain consume loop, the consumer fetches again only once the agent is
done with the batches it was handed (all but one small one, or all but four large
ones; at most one fetch timeout later), so lines that arrive meanwhile come as one
larger batch instead of a queue of small ones; and the broker
holds an empty fetch 100 ms instead of Faust's 1.5 s. Both shorten the end-to-end
latency of a steady rsyslog stream (bench/RESULTS.md).

Offsets the app commits itself: for the topics named in the app's
`self_committed_topics` (the worker commits its input offsets in its own Kafka
transactions), Faust's commit leaves the offsets alone and only notes that the acked
records are committed (its livelock detector warns about partitions that never commit).

Registered under the broker URL scheme `dpmstream` (`broker="dpmstream://HOST:PORT"`),
Faust's own way of choosing a transport. It uses consumer internals of faust-streaming
0.15 (`_read_offset`, `_add_gap`), which pyproject.toml pins.
"""

from __future__ import annotations

import asyncio
from time import monotonic
from typing import AsyncIterator

from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.tuples import TP, ConsumerMessage, Message

SCHEME = "dpmstream"
FETCH_MAX_WAIT_MS = 100
# The next fetch waits while this many batches handed on are not yet acked: small
# batches (a live stream) are better merged, large ones (a catch-up) better overlapped.
AHEAD_SMALL_BATCHES = 1      # fewer than SMALL_BATCH records each, on average
AHEAD_BATCHES = 4
SMALL_BATCH = 1000


class BatchMessage(ConsumerMessage):
    """One partition's share of a fetch; `records` holds its aiokafka ConsumerRecords
    (.offset, .key, .value, ...) in offset order."""

    __slots__ = ("records",)


class BatchingConsumer(faust_aiokafka.Consumer):
    _fetched: dict | None = None   # the batched partitions' records of the current fetch
    _pending: list | None = None   # batch messages handed on since the last fetch

    async def _batches_done(self, timeout: float) -> None:
        """Wait (at most `timeout`) until the agent is done with enough of the batches it
        was handed (AHEAD_* above).

        A plain consume loop fetches again only once its batch is done, so whatever
        arrived meanwhile comes as one batch. Without this wait every small fetch became
        a batch (and a transaction) of its own, and when a transaction took longer than
        rsyslog's interval between sends, the batches queued up until Faust's stream
        buffer was full, which stops its fetching for a whole fetch timeout. Large
        batches may queue a few deep: waiting for each would slow a catch-up."""
        pending = self._pending
        deadline = monotonic() + timeout
        while pending:
            pending[:] = [message for message in pending if not message.acked]
            if not _too_many(pending) or monotonic() >= deadline:
                return
            # Faust's acks notify this future (its compiled stream inlines the ack, so
            # overriding ack() would not see them); the cap covers an ack without one.
            self._waiting_for_ack = waiting = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(waiting, min(deadline - monotonic(), 0.01))
            except asyncio.TimeoutError:
                pass

    def _new_consumer_thread(self):
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def _wait_next_records(self, timeout: float):
        # Take the batched topics' records out of the fetch before Faust's per-record
        # loop (getmany) sees them: they are passed on whole, as aiokafka made them.
        await self._batches_done(timeout)
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
            message = self._batch_message(tp, records, generation)
            if self._pending is None:
                self._pending = []
            self._pending.append(message)
            yield tp, message

    def _batch_message(self, tp: TP, records: list, generation: int) -> BatchMessage:
        last = records[-1]
        batch = BatchMessage(
            tp.topic, tp.partition, last.offset,
            None if last.timestamp is None else last.timestamp / 1000.0, last.timestamp_type,
            None, None, b"", None, 0, 0, tp, generation_id=generation)
        batch.records = records
        return batch

    async def on_partitions_assigned(self, assigned, generation_id: int = 0) -> None:
        # Batches of an earlier generation may never be acked (streams skip them).
        if self._pending:
            self._pending.clear()
        await super().on_partitions_assigned(assigned, generation_id)

    async def _commit(self, offsets) -> bool:
        ours = getattr(self.app, "self_committed_topics", ())
        if not ours:
            return await super()._commit(offsets)
        now = monotonic()
        self._thread.tp_last_committed_at.update(
            {tp: now for tp in offsets if tp.topic in ours})
        rest = {tp: offset for tp, offset in offsets.items() if tp.topic not in ours}
        return await super()._commit(rest) if rest else True


def _too_many(pending: list) -> bool:
    n = len(pending)
    if n <= AHEAD_SMALL_BATCHES:
        return False
    return n > AHEAD_BATCHES or sum(len(m.records) for m in pending) < SMALL_BATCH * n


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport):
        consumer = super()._create_worker_consumer(transport)
        # Faust asks the broker to hold an empty fetch for 1.5 s. A fetch request goes
        # out only for partitions with nothing buffered, so one can hold only partitions
        # that never get records (Faust's leader topic, the changelog the worker does
        # not read); the next fetch of the lines topic then waits behind it, and lines
        # arrive up to 1.5 s late.
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS
        return consumer


class BatchingTransport(faust_aiokafka.Transport):
    Consumer = BatchingConsumer


TRANSPORTS.aliases.setdefault(SCHEME, f"{__name__}:BatchingTransport")
