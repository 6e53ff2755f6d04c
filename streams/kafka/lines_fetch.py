"""The worker's fetch of the lines topic, on librdkafka (confluent-kafka's Consumer).

Why not aiokafka, which the rest of the worker uses: its fetch and the decode of each
record's envelope alone cost 9.5x `grep -cE` a line, librdkafka's fetch 3.8x (issue 30,
bench/bench_kafka_clients.py). The transactions stay with aiokafka's producers
(partitions.py): they need only the group id, not this consumer.

    consumer = LinesConsumer(config, settings, on_assign=worker.assign, on_revoke=worker.revoke)
    consumer.start()
    batch = await consumer.fetch(max_records, timeout_s)   # {partition: [Message, ...]}
    consumer.seek(p, offset)        # from the worker's take of p (None: the group's offset)
    await consumer.close()          # leaves the group (revokes everything it holds)

Threading. librdkafka's consume() blocks, and the rebalance callbacks run inside it. So
every call on the Consumer but the constructor runs in ONE daemon thread of its own: the
asyncio loop never waits on librdkafka, and a fetch overlaps the transactions in flight
(consume() releases the GIL while it waits). Polling with timeout 0 from the loop instead
would run the rebalance callbacks on the loop, where they could not await the worker's
take of a partition (state read, producer started), and would spin while idle. A daemon
thread, not a ThreadPoolExecutor: a callback waiting on a loop that has gone away must not
keep the process from exiting.

Rebalances (eager, librdkafka's default range strategy). on_revoke / on_assign block the
consumer thread until the worker's revoke / assign coroutine has run on the loop: the batch
in hand is committed first, each partition taken has its state read before any of its lines
is fed, and it is assigned at the offset stored with that state (the worker calls seek()
during its take; inside on_assign that offset becomes the assignment's start).

Seeks outside a rebalance (a partition taken again after its transaction failed) are
applied by the consumer thread before its next consume(): never while one is in progress.
A fetch that was in progress when p was sought returns lines of p from before the seek:
they are dropped here (see fetch), and come again from the new position.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from itertools import groupby

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_INVALID, Consumer, KafkaError,
                             KafkaException, Message, TopicPartition)

log = logging.getLogger("dpmstream.worker")

# The broker holds a fetch for a partition with nothing new up to this long: shorter than
# the default (500 ms), so that a partition at its end does not stall the others' refill.
FETCH_MAX_WAIT_MS = 100
# The prefetch: what librdkafka holds of records fetched and not yet consumed. Each costs
# it some 470 bytes beyond its payload (~220 bytes a worker envelope), and its queue is
# bounded by payload only (queued.max.messages.kbytes), overshot by the fetches under way.
# Both bounds count the bytes as fetched, compressed: a topic written with lz4 (as
# rsyslog/dpmstream.conf's omkafka and bench_worker's write it) holds ~4x that
# decompressed, each record batch's buffer kept whole while one record of it is queued.
# With 8 MiB fetches and queue a worker held up to ~150,000 records (its peak RSS 200-250
# MiB against aiokafka's 90, issue 30); with 1 MiB fetches and a 2 MiB queue ~30,000
# (12.5 MiB of lz4 buffers and 9.7 MiB of librdkafka's records at the worker's peak,
# heaptrack: peak RSS 105-110 MiB). A 512 KiB queue held ~6,500-14,000 records of that
# topic (peak RSS 89-93 MiB), of which a consume() takes txn_bounds.BATCH_RECORDS at most,
# at the same CPU a line within the bench's noise. Half these (~2,200 queued) gave 82-85
# MiB, but up to 16 % more CPU a line: batches that small. Half the queue alone (256 KiB,
# the fetches as they are) holds ~2 MiB less at the worker's peak (bench_worker's child:
# median 82.5 against 84.6 MiB, lower in 10 pairs of 10), its batches ~8 % smaller (3,800
# records a consume() against 4,100), at the same CPU a line within the noise (medians
# 1.26 and 1.25 s, 6 of 10 pairs faster, at load 7-9; issue 30, session 28).
MAX_PARTITION_FETCH_BYTES = 256 << 10  # a fetch takes at most this much of one partition
FETCH_MAX_BYTES = 512 << 10            # ... and of all partitions together
# librdkafka raises fetch.max.bytes to at least message.max.bytes (a consumer's too,
# default 1,000,000), so it is lowered with it; the consumer sends no record. A record
# batch larger than the fetch is still fetched whole (KIP-74), so a large batch of
# rsyslog's is read, not refused.
MESSAGE_MAX_BYTES = FETCH_MAX_BYTES
PREFETCH_MAX_KBYTES = 256              # librdkafka's queue of fetched records, per consumer
# A full queue is looked at again after this long: librdkafka's default (1 s) left the
# worker waiting on a queue this small, at half its rate (bench_worker, issue 30).
FETCH_QUEUE_BACKOFF_MS = 10
# Where the queue of a consumer that takes (almost) nothing stops: its bound and one
# fetch (tests/streams/kafka/test_lines_fetch.py pins it on a real broker).
PREFETCH_BOUND_BYTES = PREFETCH_MAX_KBYTES * 1024 + FETCH_MAX_BYTES
# As aiokafka's defaults were: a worker killed is noticed, and its partitions given to
# another, within 10 s.
SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 3_000
CONSUME_MAX = 1_000_000               # librdkafka's bound on one consume() call
COMMITTED_TIMEOUT_S = 10.0            # asking the group's offset of a partition sought


class Record:
    """A record of the lines topic as the worker feeds it, made by hand (tests, benches):
    what confluent_kafka.Message offers PartitionState.feed_batch, key(), value() and
    offset(). The worker feeds the Messages consume() made themselves (records_by_partition)."""

    __slots__ = ("_key", "_value", "_offset")

    def __init__(self, key: bytes | None, value: bytes | None, offset: int):
        self._key, self._value, self._offset = key, value, offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def offset(self) -> int:
        return self._offset

    def __repr__(self) -> str:
        return f"Record({self._key!r}, {self._value!r}, {self._offset})"


def consumer_settings(bootstrap: str, group_id: str, security: dict) -> dict:
    """librdkafka's configuration of the worker's consumer. Offsets are committed only
    inside the transactions (partitions.py), never by the consumer; only committed
    transactions' lines are read."""
    return {
        "bootstrap.servers": bootstrap, "group.id": group_id, "client.id": "dpmstream-worker",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES,
        "fetch.max.bytes": FETCH_MAX_BYTES, "message.max.bytes": MESSAGE_MAX_BYTES,
        "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
        "queued.max.messages.kbytes": PREFETCH_MAX_KBYTES,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        **security,
    }


class LinesConsumer:
    def __init__(self, topic: str, settings: dict, on_assign, on_revoke):
        """on_assign / on_revoke: coroutine functions taking a list of partitions."""
        self.topic = topic
        self._settings = dict(settings, error_cb=_log_error,
                              logger=logging.getLogger("dpmstream.worker.librdkafka"))
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._consumer: Consumer | None = None
        self._thread: _OneThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._assigned: set[int] = set()
        self._starts: dict[int, int | None] | None = None   # during on_assign: p -> offset
        self._seek_lock = threading.Lock()
        self._pending: dict[int, int | None] = {}          # seeks for the next consume()
        self._rebalances = 0                                # callbacks run, in the thread

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = _OneThread("dpmstream-fetch")
        self._consumer = Consumer(self._settings)
        self._consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                                 on_lost=self._revoke)

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def seek(self, p: int, offset: int | None) -> None:
        """Read p from offset on (None: the group's committed offset, else the beginning)."""
        if self._starts is not None:   # the worker's take inside on_assign: the start
            self._starts[p] = offset
            return
        with self._seek_lock:
            self._pending[p] = offset

    async def fetch(self, max_records: int, timeout_s: float) -> dict[int, list[Message]]:
        """The records fetched within timeout_s (at most max_records), by partition."""
        batch = await self._loop.run_in_executor(
            self._thread, self._consume, min(max_records, CONSUME_MAX), timeout_s)
        with self._seek_lock:
            # Sought while this consume() ran: its lines of p are from before the seek.
            for p in self._pending:
                batch.pop(p, None)
        return batch

    async def close(self) -> None:
        """Leave the group (on_revoke runs first), then end the thread."""
        consumer, self._consumer = self._consumer, None
        thread, self._thread = self._thread, None
        try:
            if consumer is not None:
                await self._loop.run_in_executor(thread, consumer.close)
        finally:
            if thread is not None:
                thread.shutdown()

    # -- in the consumer thread ------------------------------------------------------------
    def _consume(self, n: int, timeout_s: float) -> dict[int, list[Message]]:
        with self._seek_lock:
            seeks, self._pending = self._pending, {}
        for p, offset in seeks.items():
            if p not in self._assigned:
                continue
            try:
                self._consumer.seek(TopicPartition(self.topic, p, self._position(p, offset)))
            except KafkaException as exc:   # the broker away: tried again at the next fetch
                log.warning("partition %d: seek failed (%s); tried again", p, exc)
                with self._seek_lock:
                    self._pending.setdefault(p, offset)
        # As aiokafka's getmany: wait up to timeout_s for a first record, then take what is
        # fetched already. (consume(n, timeout_s) alone waits for n records or the timeout:
        # at the stream's tail every line would wait out the timeout.)
        first = self._consumer.poll(timeout_s)
        if first is None:
            return {}
        rebalances = self._rebalances
        rest = self._consumer.consume(n - 1, 0) if n > 1 else []
        # A rebalance inside consume() (librdkafka drops the lines it outdates from that
        # call's own) outdates the first record too: it is read again from its new start.
        messages = rest if self._rebalances != rebalances else [first, *rest]
        return _by_partition(messages)

    def _position(self, p: int, offset: int | None) -> int:
        if offset is not None:
            return offset
        committed = self._consumer.committed([TopicPartition(self.topic, p)],
                                             timeout=COMMITTED_TIMEOUT_S)[0].offset
        return committed if committed >= 0 else OFFSET_BEGINNING

    def _assign(self, consumer: Consumer, partitions) -> None:
        self._rebalances += 1
        ps = sorted(tp.partition for tp in partitions)
        self._starts = {}
        try:
            self._on_loop(self._on_assign(ps))
        except Exception as exc:  # noqa: BLE001 - as aiokafka's listener: logged, consumer goes on
            log.error("taking partitions %s failed (%s: %s)", ps, exc.__class__.__name__, exc)
        starts, self._starts = self._starts, None
        # A partition whose take failed starts where the group would: its lines are not
        # fed (the worker holds no state for it) until it is taken again.
        consumer.assign([TopicPartition(self.topic, p, OFFSET_INVALID if starts.get(p) is None
                                        else starts[p]) for p in ps])
        self._assigned = set(ps)

    def _revoke(self, consumer: Consumer, partitions) -> None:
        self._rebalances += 1
        ps = sorted(tp.partition for tp in partitions)
        if ps:
            log.info("partitions revoked: %s", ps)
        self._assigned -= set(ps)
        try:
            self._on_loop(self._on_revoke(ps))
        except Exception as exc:  # noqa: BLE001
            log.error("giving up partitions %s failed (%s: %s)", ps, exc.__class__.__name__, exc)
        consumer.unassign()

    def _on_loop(self, coro) -> None:
        """Run coro on the worker's loop and wait for it (the consumer thread waits)."""
        asyncio.run_coroutine_threadsafe(coro, self._loop).result()


_PARTITION, _ERROR = Message.partition, Message.error


def records_by_partition(messages: list[Message]) -> tuple[dict[int, list[Message]], list]:
    """({partition: [Message, ...]}, [error, ...]): one consume()'s messages by partition,
    each partition's in the order consumed; a message carrying an error is left out and
    its error returned.

    The Messages themselves, a slice per run of one partition (consume() returns each
    partition's records in runs, a fetch response each), without a Python loop over them:
    copying each into a record of our own (a tuple of its key, value and offset) cost
    ~0.2 us a record, an eighth of the worker's CPU a line."""
    errors = []
    if any(map(_ERROR, messages)):
        errors = [err for err in map(_ERROR, messages) if err is not None]
        messages = [msg for msg in messages if msg.error() is None]
    batch: dict[int, list[Message]] = {}
    start = 0
    for p, run in groupby(map(_PARTITION, messages)):
        end = start + len(list(run))
        held = batch.get(p)
        if held is None:
            batch[p] = messages[start:end]
        else:
            held += messages[start:end]
        start = end
    return batch, errors


def _by_partition(messages: list[Message]) -> dict[int, list[Message]]:
    """records_by_partition's batch, its errors logged."""
    batch, errors = records_by_partition(messages)
    for err in errors:
        _log_error(err)
    return batch


def _log_error(err: KafkaError) -> None:
    if err.code() != KafkaError._PARTITION_EOF:
        log.warning("lines topic consumer: %s", err.str())


class _OneThread(concurrent.futures.Executor):
    """A single daemon thread running jobs in order (see the module's docstring)."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
                future.set_exception(exc)
