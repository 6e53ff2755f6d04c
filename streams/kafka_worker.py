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

This is the default engine of `dpmstream worker`; `--engine faust` (faust_app.py) feeds
the same PartitionState from a Faust app. This one needs no local state and no Faust,
its transaction logic is all in view here, and its rebalances are tested. See
docs/kafka-worker.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from dpmstream.streams.kafka_state import PartitionState
from dpmstream.streams.kafka_topics import ensure_topics
from dpmstream.streams.record_topics import output_message

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
        self.parts: dict[int, PartitionState] = {}
        self.producers: dict[int, AIOKafkaProducer] = {}
        self._lock = asyncio.Lock()          # a batch and a rebalance never overlap
        self._stopping = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._loader: AIOKafkaConsumer | None = None
        self.lines_seen = 0                  # records fed, all partitions (bench, tests)
        self.duplicates = 0                  # of which lines seen before (host, path, offset)
        self.batches = 0
        self._duplicates_counter = None
        self._reported_bad = 0
        if metrics is not None:
            from prometheus_client import Counter
            self._duplicates_counter = Counter(
                "dpmstream_duplicate_lines", "Lines skipped because they were delivered before",
                ["host"], registry=metrics.registry)

    # -- life cycle ---------------------------------------------------------------------
    def stop(self) -> None:
        self._stopping.set()

    async def run(self, ready: asyncio.Event | None = None) -> None:
        cfg = self.cfg
        await ensure_topics(cfg.bootstrap, cfg.security, lines=cfg.lines_topic,
                            outputs=[cfg.requests_topic, cfg.calls_topic], state=cfg.state,
                            partitions=cfg.partitions)
        self._loader = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap, group_id=None, enable_auto_commit=False,
            isolation_level="read_committed", client_id="dpmstream-state-loader",
            max_partition_fetch_bytes=8 << 20, **cfg.security)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap, group_id=cfg.group_id, enable_auto_commit=False,
            isolation_level="read_committed", auto_offset_reset="earliest",
            client_id="dpmstream-worker", max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=32 << 20, **cfg.security)
        await self._loader.start()
        try:
            self._consumer.subscribe([cfg.lines_topic], listener=_Rebalance(self))
            await self._consumer.start()
            try:
                if ready is not None:
                    ready.set()
                await self._loop()
            finally:
                await self._consumer.stop()   # leaves the group (revokes: see _revoke)
        finally:
            await self._drop(list(self.parts))
            await self._loader.stop()

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
        producer = self.producers.get(p)
        records, changes = part.checkpoint()
        cfg = self.cfg
        try:
            await producer.begin_transaction()
            send = producer.send
            for rec in records:
                topic, key, value = output_message(rec, cfg.requests_topic, cfg.calls_topic)
                await send(topic, value, key=key)
            for key, state in changes.items():
                value = None if state is None else json.dumps(state, separators=(",", ":")).encode()
                await send(cfg.state, value, key=key.encode(), partition=p)
            await producer.send_offsets_to_transaction(
                {TopicPartition(cfg.lines_topic, p): part.next_offset}, cfg.group_id)
            await producer.commit_transaction()
        except ProducerFenced:
            # Another worker owns p now: what we did since our last commit is theirs to redo.
            log.warning("partition %d: taken over by another worker (fenced)", p)
            await self._drop([p])
            return
        except (KafkaError, OSError) as exc:
            log.error("partition %d: transaction failed (%s); reloading its state", p,
                      exc.__class__.__name__)
            try:
                await producer.abort_transaction()
            except Exception:  # the producer may be unusable; _reload makes a new one
                pass
            await self._reload(p)
            return
        self._observe(part, records)

    def _observe(self, part: PartitionState, records: list[dict]) -> None:
        if part.bad_records > self._reported_bad:
            log.warning("partition %d: %d records that are not line envelopes so far (last: %s)",
                        part.partition, part.bad_records, part.last_bad_reason)
            self._reported_bad = part.bad_records
        self.duplicates += sum(part.duplicates.values())
        if self.metrics is None:
            part.duplicates.clear()
            return
        for rec in records:
            self.metrics.observe_record(rec)
        self.metrics.update_from_stats(part.stats, source=f"p{part.partition}")
        for host, n in part.duplicates.items():
            self._duplicates_counter.labels(host).inc(n)
        part.duplicates.clear()

    # -- partitions ---------------------------------------------------------------------
    async def _assign(self, partitions: list[int]) -> None:
        for p in partitions:
            if p in self.parts:
                continue
            started = time.monotonic()
            producer = AIOKafkaProducer(
                bootstrap_servers=self.cfg.bootstrap, client_id=f"dpmstream-worker-p{p}",
                transactional_id=f"{self.cfg.group_id}-{self.cfg.lines_topic}-{p}",
                enable_idempotence=True, acks="all", linger_ms=5,
                max_batch_size=1 << 20, max_request_size=8 << 20, **self.cfg.security)
            # Starting it fences the partition's previous owner and aborts its open
            # transaction, so the state we read next is complete and final.
            await producer.start()
            self.producers[p] = producer
            part = await self._load(p)
            self.parts[p] = part
            if part.next_offset is not None:
                self._consumer.seek(TopicPartition(self.cfg.lines_topic, p), part.next_offset)
            log.info("partition %d: resumed at offset %s with %d open requests (%.2f s)",
                     p, part.next_offset, part.pipeline.stats.in_flight, time.monotonic() - started)

    async def _load(self, p: int) -> PartitionState:
        """p's state from its partition of the state topic (committed transactions only)."""
        cfg = self.cfg
        part = PartitionState(p, timeout_s=cfg.timeout_s, max_in_flight=cfg.max_in_flight,
                              profile=cfg.profile, tz=cfg.tz)
        tp = TopicPartition(cfg.state, p)
        loader = self._loader
        loader.assign([tp])
        await loader.seek_to_beginning(tp)
        end = (await loader.end_offsets([tp]))[tp]
        states: dict[str, object] = {}
        while await loader.position(tp) < end:
            batch = await loader.getmany(tp, timeout_ms=1000, max_records=50_000)
            for msg in batch.get(tp, ()):
                key = msg.key.decode()
                if msg.value is None:
                    states.pop(key, None)
                else:
                    states[key] = json.loads(msg.value)
        part.restore(states)
        return part

    async def _reload(self, p: int) -> None:
        await self._drop([p])
        await self._assign([p])

    async def _drop(self, partitions) -> None:
        for p in list(partitions):
            self.parts.pop(p, None)
            producer = self.producers.pop(p, None)
            if producer is not None:
                try:
                    await producer.stop()
                except Exception as exc:  # stopping a fenced producer may complain
                    log.debug("partition %d: producer stop: %r", p, exc)
            if self.metrics is not None:  # its hosts are someone else's now
                from dpmstream.streams.pipeline import Pipeline
                self.metrics.update_from_stats(Pipeline(lambda r: None).stats, source=f"p{p}")


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, worker: Worker):
        self.worker = worker

    async def on_partitions_revoked(self, revoked):
        # Wait for the batch in hand to commit; uncommitted work would be redone anyway.
        if revoked:
            log.info("partitions revoked: %s", sorted(tp.partition for tp in revoked))
        async with self.worker._lock:
            await self.worker._drop([tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned):
        async with self.worker._lock:
            await self.worker._assign(sorted(tp.partition for tp in assigned))
