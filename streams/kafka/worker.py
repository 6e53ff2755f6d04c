"""The stream worker: raw lines from Kafka -> request and call records on Kafka, exactly once.

One consumer in group `group_id` reads the lines topic. Each assigned partition p has
its own PartitionState (one Pipeline) and its own transactional producer
(transactional.id "<group>-<lines topic>-<p>"). A batch of p's lines is processed, then
ONE Kafka transaction of p's producer carries, atomically:
  - the records the batch finished (requests keyed by token, calls keyed by host),
  - the batch's net state changes, to partition p of the compacted state topic,
  - the consumer offset of p (send_offsets_to_transaction).
A crash (kill -9) before the commit aborts all three; after it, all three are there.
The worker that takes p next (a restart, or another worker after a rebalance) starts
p's producer first, which fences the old one and aborts its open transaction, then reads
p's state (read_committed) and resumes at the offset stored with it. Lines delivered
twice anyway (rsyslog resending) are recognised by (host, path, offset).

The partitions, their producers and transactions are partitions.PartitionOwners; this
module is the consumer loop and the rebalance listener around them. It is the only
engine: `dpmstream worker` runs it hosted by a Faust app (faust_app.py), tests and the
benchmark also run it bare (`await Worker(config).run()`). See docs/kafka-worker.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from dpmstream.streams.kafka.partitions import Outcome, PartitionOwners
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.topics import ensure_topics
from dpmstream.streams.kafka.partition_metrics import PartitionReport

log = logging.getLogger("dpmstream.worker")


@dataclass
class WorkerConfig:
    bootstrap: str
    security: dict = field(default_factory=dict, repr=False)  # aiokafka kwargs (may hold secrets)
    lines_topic: str = "dpm.lines"
    requests_topic: str = "dpm.requests"
    calls_topic: str = "dpm.calls"
    group_id: str = "dpmstream"
    state_topic: str | None = None       # default "<group_id>-state"
    partitions: int = 4                  # for a lines topic that does not exist yet
    timeout_s: float = 3600.0
    max_in_flight: int = 1_000_000
    max_threads: int = 100_000
    grace_s: float = 60.0
    head_aliases: tuple = ()             # other names of head nodes as NS clients see them
    profile: object = None
    tz: str | None = None
    batch_records: int = 20_000          # records per poll (all partitions together)
    poll_ms: int = 200

    @property
    def state(self) -> str:
        return self.state_topic or f"{self.group_id}-state"


class Worker:
    def __init__(self, config: WorkerConfig, metrics=None):
        self.cfg = config
        self.metrics = metrics
        self.owners = PartitionOwners(config, config.state)
        self._lock = asyncio.Lock()          # a batch and a rebalance never overlap
        self._stopping = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self.lines_seen = 0                  # records fed, all partitions (bench, tests)
        self.batches = 0
        self.report = PartitionReport(metrics)

    # -- life cycle ---------------------------------------------------------------------
    def stop(self) -> None:
        self._stopping.set()

    async def run(self, ready: asyncio.Event | None = None) -> None:
        cfg = self.cfg
        await ensure_topics(cfg.bootstrap, cfg.security, lines=cfg.lines_topic,
                            outputs=[cfg.requests_topic, cfg.calls_topic], state=cfg.state,
                            partitions=cfg.partitions)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap, group_id=cfg.group_id, enable_auto_commit=False,
            isolation_level="read_committed", auto_offset_reset="earliest",
            client_id="dpmstream-worker", max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=32 << 20, **cfg.security)
        await self.owners.start()
        try:
            self._consumer.subscribe([cfg.lines_topic], listener=_Rebalance(self))
            await self._consumer.start()
            try:
                if ready is not None:
                    ready.set()
                await self._loop()
            finally:
                await self._stop_consumer()
        finally:
            self.report.forget(list(self.parts))
            await self.owners.stop()

    async def _stop_consumer(self) -> None:
        """Leave the group (revokes: see _Rebalance). With the broker gone, aiokafka's
        stop re-raises the cancellation of its own pending fetch: on a stop we asked
        for, that is no reason to end with a traceback."""
        try:
            await self._consumer.stop()
        except asyncio.CancelledError:
            if not self._stopping.is_set():
                raise
            log.warning("consumer closed without leaving the group (broker unreachable?): "
                        "its partitions move on after the session timeout")

    async def _loop(self) -> None:
        consumer = self._consumer
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                fetch = asyncio.ensure_future(
                    consumer.getmany(timeout_ms=self.cfg.poll_ms, max_records=self.cfg.batch_records))
                await asyncio.wait({fetch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    break
                batch = fetch.result()
                if batch:
                    async with self._lock:
                        await self._process(batch)
        finally:
            stop_wait.cancel()

    # -- one batch ---------------------------------------------------------------------
    async def _process(self, batch: dict) -> None:
        touched = []
        for tp, messages in batch.items():
            part = self.parts.get(tp.partition)
            if part is None or not messages:
                continue  # revoked while we polled: its new owner reads these again
            if part.next_offset is not None and messages[0].offset < part.next_offset:
                # Fetched before our seek to the stored offset (a rebalance ran while
                # this batch waited for the lock): these records are in the state already.
                messages = [m for m in messages if m.offset >= part.next_offset]
                if not messages:
                    continue
            part.feed_batch(messages)
            self.lines_seen += len(messages)
            touched.append(part)
        if touched:
            await asyncio.gather(*(self._commit(part) for part in touched))
            self.batches += 1

    async def _commit(self, part: PartitionState) -> None:
        p = part.partition
        records, changes = part.checkpoint()
        outcome = await self.owners.commit(part, records, changes)
        if outcome is Outcome.COMMITTED:
            self.report.committed(part, records)
            return
        self.report.forget([p])
        if outcome is Outcome.FAILED:   # still ours: read its state again
            await self._assign([p])

    # -- partitions ---------------------------------------------------------------------
    @property
    def parts(self) -> dict[int, PartitionState]:
        return self.owners.parts

    async def _assign(self, partitions: list[int]) -> None:
        for p in partitions:
            if p in self.parts:
                continue
            started = time.monotonic()
            part, _states = await self.owners.take(p)
            if part.next_offset is not None:
                self._consumer.seek(TopicPartition(self.cfg.lines_topic, p), part.next_offset)
            log.info("partition %d: resumed at offset %s with %d open requests (%.2f s)",
                     p, part.next_offset, part.pipeline.stats.in_flight, time.monotonic() - started)

    @property
    def duplicates(self) -> int:   # lines seen before (host, path, offset), skipped
        return self.report.duplicates

    async def assign(self, partitions) -> None:
        """Take these partitions (fence their last owner, read their state), once the
        batch in hand is committed."""
        async with self._lock:
            await self._assign(sorted(partitions))

    async def revoke(self, partitions) -> None:
        """Give these partitions up once the batch in hand is committed (work not
        committed would be redone by their next owner anyway)."""
        async with self._lock:
            await self._drop(list(partitions))

    async def _drop(self, partitions) -> None:
        await self.owners.drop(partitions)
        self.report.forget(partitions)


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, worker: Worker):
        self.worker = worker

    async def on_partitions_revoked(self, revoked):
        if revoked:
            log.info("partitions revoked: %s", sorted(tp.partition for tp in revoked))
        await self.worker.revoke(tp.partition for tp in revoked)

    async def on_partitions_assigned(self, assigned):
        await self.worker.assign(tp.partition for tp in assigned)
