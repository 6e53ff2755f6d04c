"""The stream worker: raw lines from Kafka -> request and call records on Kafka, exactly once.

One consumer in group `group_id` reads the lines topic. Each assigned partition p has
its own PartitionState (one Pipeline) and its own transactional producer
(transactional.id "<group>-<lines topic>-<p>"). Each fetch of p's lines is fed at
once; once p holds `transaction_lines` lines not yet committed (or its first of them was
fed `transaction_age_s` ago, or a fetch came back empty, or p is revoked, or the worker
stops) ONE Kafka transaction of p's producer carries, atomically:
  - the records those lines finished (requests keyed by token, calls keyed by host),
  - their net state changes, to partition p of the compacted state topic,
  - the consumer offset of p (send_offsets_to_transaction).
A crash (kill -9) before the commit aborts all three; after it, all three are there.
The worker that takes p next (a restart, or another worker after a rebalance) starts
p's producer first, which fences the old one and aborts its open transaction, then reads
p's state (read_committed) and resumes at the offset stored with it. Lines delivered
twice anyway (rsyslog resending) are recognised by (host, path, offset).

The partitions, their producers and transactions are partitions.PartitionOwners; the
consumer of the lines topic (librdkafka, in a thread of its own) is lines_fetch.LinesConsumer;
this module is the loop and the rebalance handling around them. It is the only
engine: `dpmstream worker` runs it hosted by a Faust app (faust_app.py), tests and the
benchmark also run it bare (`await Worker(config).run()`). See docs/kafka-worker.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from aiokafka.errors import KafkaError

from dpmstream.parsers.dome_merge import HORIZON_MS, MAX_HELD
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams.gc_pace import relaxed_gc
from dpmstream.streams.kafka.lines_fetch import LinesConsumer, consumer_settings
from dpmstream.streams.kafka.malloc_arenas import compact_arenas
from dpmstream.streams.kafka.log_pace import flush_installed
from dpmstream.streams.kafka.partitions import Outcome, PartitionOwners, encode_changes
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.topics import ensure_topics
from dpmstream.streams.kafka.txn_bounds import BATCH_RECORDS, TRANSACTION_AGE_S, TRANSACTION_LINES
from dpmstream.streams.kafka.partition_metrics import PartitionReport

log = logging.getLogger("dpmstream.worker")

# Taking a partition again after its transaction failed: retried while the broker is away.
RETAKE_FIRST_DELAY_S = 0.5
RETAKE_MAX_DELAY_S = 10.0


@dataclass
class WorkerConfig:
    bootstrap: str
    security: dict = field(default_factory=dict, repr=False)  # aiokafka kwargs (may hold secrets)
    # the same settings in librdkafka's names, for the lines consumer (KafkaSecurity.librdkafka_config)
    fetch_security: dict = field(default_factory=dict, repr=False)
    lines_topic: str = "dpm.lines"
    requests_topic: str = "dpm.requests"
    calls_topic: str = "dpm.calls"
    group_id: str = "dpmstream"
    state_topic: str | None = None       # default "<group_id>-state"
    partitions: int = 4                  # for a lines topic that does not exist yet
    reassembly: ReassemblySettings = field(default_factory=ReassemblySettings)  # per partition
    profile: object = None
    tz: str | None = None
    # DOME nodes' lines side by side (parsers/dome_merge.py): how far one may run ahead
    dome_merge_horizon_s: float = HORIZON_MS / 1000
    dome_merge_max_lines: int = MAX_HELD  # lines held at most, per partition
    batch_records: int = BATCH_RECORDS   # records per poll (all partitions together)
    poll_ms: int = 200
    # a partition's transaction: at most this many lines, its first this long uncommitted
    transaction_lines: int = TRANSACTION_LINES
    transaction_age_s: float = TRANSACTION_AGE_S

    @property
    def state(self) -> str:
        return self.state_topic or f"{self.group_id}-state"


class Worker:
    def __init__(self, config: WorkerConfig, metrics=None):
        self.cfg = config
        self.metrics = metrics
        self.owners = PartitionOwners(config, config.state)
        self._lock = asyncio.Lock()          # a batch and a rebalance never overlap
        self._committing: asyncio.Future | None = None   # the last batch's transactions
        self._seeks: dict[int, int] = {}     # partition -> times the consumer was sought to its state
        self._one_by_one: dict[int, int] = {}   # partition -> fed record by record up to this offset
        # partition -> [lines fed since its last checkpoint, when the first of them was fed]
        self._uncommitted: dict[int, list] = {}
        self._stopping = asyncio.Event()
        self._consumer: LinesConsumer | None = None
        # Records fed, all partitions, each once (the stop log line, bench, tests): a
        # partition taken again (a batch that raised, a failed transaction) is fed its
        # lines since its last commit anew; they count in lines_fed_again (_count_new).
        self.lines_seen = 0
        self.lines_fed_again = 0
        self._counted_to: dict[int, int] = {}   # partition -> offset past its last record counted
        self.batches = 0                     # rounds of transactions committed
        self.report = PartitionReport(metrics, config.lines_topic)

    # -- life cycle ---------------------------------------------------------------------
    def stop(self) -> None:
        self._stopping.set()

    async def run(self, ready: asyncio.Event | None = None) -> None:
        cfg = self.cfg
        compact_arenas()   # before librdkafka's threads make arenas of their own
        await ensure_topics(cfg.bootstrap, cfg.security, lines=cfg.lines_topic,
                            outputs=[cfg.requests_topic, cfg.calls_topic], state=cfg.state,
                            partitions=cfg.partitions)
        self._consumer = LinesConsumer(
            cfg.lines_topic, consumer_settings(cfg.bootstrap, cfg.group_id, cfg.fetch_security),
            on_assign=self.assign, on_revoke=self.revoke)
        await self.owners.start()
        try:
            self._consumer.start()
            try:
                if ready is not None:
                    ready.set()
                with relaxed_gc():
                    await self._loop()
            finally:
                await self._stop_consumer()
        finally:
            self.report.forget(list(self.parts))
            await self.owners.stop()

    async def _stop_consumer(self) -> None:
        """Leave the group (revokes: see lines_fetch). Cancelled while it waits for the
        broker: on a stop we asked for, that is no reason to end with a traceback."""
        try:
            await self._consumer.close()
        except asyncio.CancelledError:
            if not self._stopping.is_set():
                raise
            log.warning("consumer closed without leaving the group (broker unreachable?): "
                        "its partitions move on after the session timeout")

    async def _loop(self) -> None:
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                flush_installed()   # "no more of ..." once a repeated warning has stopped
                fetch = asyncio.ensure_future(self._fetch())
                await asyncio.wait({fetch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    break
                batch, seeks = fetch.result()
                fetch = None
                if batch or self._uncommitted:
                    # An empty fetch: the topic is read to its end, what is fed commits now.
                    async with self._lock:
                        await self._process(batch, seeks, idle=not batch)
                # Fed: not held while the next batch is fetched (one batch in memory, not two)
                batch = None
        finally:
            stop_wait.cancel()
            async with self._lock:
                await self._checkpoint_and_commit(list(self._uncommitted))
                await self._settle()

    async def _fetch(self) -> tuple[dict, dict[int, int]]:
        """A batch, and each partition's seek number when it was fetched, taken in the
        same step of the event loop. A partition taken since (a rebalance, a failed
        commit; the batch may wait for a transaction in flight) was sought to its stored
        offset after these lines were read: they are not its to feed."""
        batch = await self._consumer.fetch(self.cfg.batch_records, self.cfg.poll_ms / 1000)
        return batch, dict(self._seeks)

    # -- one batch ---------------------------------------------------------------------
    async def _process(self, batch: dict, seeks: dict[int, int], idle: bool = False) -> None:
        """Feed the batch, then commit the partitions whose transaction is due (_due) in
        the background: the next batch is fetched and fed while these transactions travel
        (each producer still has one open transaction at a time: _settle() first)."""
        broken = []
        now = time.monotonic()
        for p, messages in batch.items():
            part = self.parts.get(p)
            if part is None or seeks.get(p) != self._seeks.get(p) or not messages:
                # Revoked, or (re)taken since the fetch: its take sought the consumer back
                # to the partition's stored offset, from where these lines come again.
                continue
            if not self._feed(part, messages):
                # Half fed: nothing of it since its last commit is committed; it is taken
                # again from what was (below), and those lines come again.
                self._uncommitted.pop(p, None)
                broken.append(p)
                continue
            new = self._count_new(p, messages)
            self.lines_seen += new
            self.lines_fed_again += len(messages) - new
            held = self._uncommitted.get(p)
            if held is None:
                self._uncommitted[p] = [len(messages), now]
            else:
                held[0] += len(messages)
            await asyncio.sleep(0)   # let the transactions in flight take their next step
        await self._settle()
        due = list(self._uncommitted) if idle else self._due(now)
        if due:
            self._committing = asyncio.ensure_future(self._commit_all(self._checkpoints(due)))
        for p in broken:
            await self._settle()
            await self._drop([p])
            await self._take_again(p)

    def _count_new(self, p: int, messages) -> int:
        """How many of this fed batch of p are fed for the first time (offsets ascend
        within a batch)."""
        counted = self._counted_to.get(p, 0)
        self._counted_to[p] = max(counted, messages[-1].offset() + 1)
        if messages[0].offset() >= counted:
            return len(messages)
        return sum(1 for msg in messages if msg.offset() >= counted)

    def _due(self, now: float) -> list[int]:
        """The partitions whose lines fed and not committed are enough for a transaction,
        or whose first of them waited long enough."""
        lines, age = self.cfg.transaction_lines, self.cfg.transaction_age_s
        return [p for p, (n, since) in self._uncommitted.items()
                if n >= lines or now - since >= age]

    def _checkpoints(self, partitions) -> list[tuple]:
        """Each partition's checkpoint, as its transaction carries it: the records and
        state changes since the last one, the offset past its lines, its figures."""
        work = []
        for p in partitions:
            del self._uncommitted[p]
            part = self.parts.get(p)
            if part is None:
                continue
            records, changes = part.checkpoint()
            work.append((part, records, encode_changes(changes), part.next_offset,
                         self.report.take(part)))
        return work

    async def _checkpoint_and_commit(self, partitions) -> None:
        """Commit what these partitions fed since their last checkpoint, and wait for it
        (a revoke, the stop)."""
        await self._settle()
        work = self._checkpoints([p for p in partitions if p in self._uncommitted])
        if work:
            await self._commit_all(work)

    def _feed(self, part: PartitionState, messages) -> bool:
        """Feed a batch; False if it raised. Then the partition is taken again (its state
        as committed, the consumer sought back) and this batch comes again, to be fed
        one record at a time (PartitionState.feed_one_by_one): the record that raised is
        counted, logged and skipped, and committed past with the others."""
        p = part.partition
        if self._one_by_one.get(p, -1) > messages[0].offset():
            part.feed_one_by_one(messages)
            if part.next_offset >= self._one_by_one[p]:
                del self._one_by_one[p]
            return True
        try:
            part.feed_batch(messages)
        except Exception as exc:  # noqa: BLE001 - a record the pipeline cannot process
            log.error("partition %d: a batch at offsets %d-%d failed (%s: %s); the partition "
                      "is taken again and the batch fed record by record", p,
                      messages[0].offset(), messages[-1].offset(), exc.__class__.__name__,
                      str(exc)[:200])
            self._one_by_one[p] = messages[-1].offset() + 1
            return False
        return True

    async def _settle(self) -> None:
        """Wait for the transactions in flight (a failed one has its partition taken
        again before this returns)."""
        committing, self._committing = self._committing, None
        if committing is not None:
            await committing

    async def _commit_all(self, work) -> None:
        await asyncio.gather(*(self._commit(*item) for item in work))
        self.batches += 1

    async def _commit(self, part: PartitionState, records, changes, next_offset,
                      figures) -> None:
        p = part.partition
        if self.parts.get(p) is not part:
            return   # dropped or taken again while an earlier transaction failed
        outcome = await self.owners.commit(part, records, changes, next_offset)
        if outcome is Outcome.COMMITTED:
            self.report.committed(figures, records)
            return
        self.report.forget([p])
        if outcome is Outcome.FAILED:   # still ours: read its state again
            await self._take_again(p)

    async def _take_again(self, p: int) -> None:
        """Take p again after its transaction failed (its state read anew, the consumer
        sought back), retrying while the broker cannot be reached: a failed commit is
        most often the broker going away. Ends when p is taken, when the consumer no
        longer holds p (a rebalance gave it on: its next owner takes it), or on stop()."""
        delay = RETAKE_FIRST_DELAY_S
        while not self._stopping.is_set() and p in self._consumer.assignment():
            try:
                await self._assign([p])
                return
            except (KafkaError, OSError, asyncio.TimeoutError) as exc:
                await self.owners.drop([p])
                log.warning("partition %d: taking it again failed (%s: %s); next try in %.1f s",
                            p, exc.__class__.__name__, exc, delay)
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except asyncio.TimeoutError:
                delay = min(2 * delay, RETAKE_MAX_DELAY_S)

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
            self._uncommitted.pop(p, None)   # what an earlier take fed is not this one's
            # Nothing committed with a state (None): where the group would start.
            # Lines fetched before this seek (from wherever the consumer was) are not
            # this owner's: the new seek number tells _process so (see _fetch).
            self._consumer.seek(p, part.next_offset)
            self._seeks[p] = self._seeks.get(p, 0) + 1
            log.info("partition %d: resumed at offset %s with %d open requests (%.2f s)",
                     p, part.next_offset, part.pipeline.stats.in_flight, time.monotonic() - started)

    @property
    def duplicates(self) -> int:   # lines seen before (host, path, offset), skipped
        return self.report.duplicates

    async def assign(self, partitions) -> None:
        """Take these partitions (fence their last owner, read their state), once the
        batch in hand is committed."""
        async with self._lock:
            await self._settle()
            await self._assign(sorted(partitions))

    async def revoke(self, partitions) -> None:
        """Give these partitions up once what they fed is committed (their next owner
        would redo it otherwise)."""
        async with self._lock:
            await self._checkpoint_and_commit(list(partitions))
            await self._drop(list(partitions))

    async def _drop(self, partitions) -> None:
        for p in partitions:
            self._uncommitted.pop(p, None)
        await self.owners.drop(partitions)
        self.report.forget(partitions)

