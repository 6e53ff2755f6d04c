"""The Faust engine of the stream worker (`dpmstream worker --engine faust`).

    code = run_faust_worker(config, metrics_port=9108, metrics_bind="127.0.0.1", workdir=None)

A faust.App (id = config.group_id, processing_guarantee="at_least_once", web server off,
memory store, private datadir) with one agent over the lines topic and one Table,
`state`, whose changelog topic `<group_id>-state-changelog` holds the reassembly state.
The app runs on the batching transport of faust_batches (broker "dpmstream://..."): the
agent gets one event per fetched partition batch instead of one per line, which is what
lets a Faust worker keep up with a head node (about 13,000 lines/s before, >60,000 now).

State design. One PartitionState (one Pipeline, the (host, path) high-water offsets) per
input partition p; a host's lines are all in one partition. Its net changes after each
batch go to partition p of the table's changelog topic under the key "<p>|<state key>"
(the table has as many partitions as the lines topic), and into the table itself.

Exactly once: Faust's own exactly_once mode is not used. In faust-streaming 0.15.3 its
last commit before a rebalance ends only the transactions that have new offsets, so one
holding a batch's records and state could stay open; Faust's table recovery then
finished while it was open, and a new owner started the partition with no state (or
Faust's recovery failed with a ConsistencyError). So the app runs at_least_once and the
engine keeps the guarantee itself, with the same code as the aiokafka engine
(kafka_partitions.PartitionOwners): p's batch, its state changes and p's input offset go
in one transaction of p's own transactional producer; the first batch of p after an
assignment starts that producer (fencing whoever had p and aborting its open
transaction) and then reads p's state from the changelog, read_committed, into the
table and a fresh pipeline. A revoked partition is dropped after the batch in hand is
committed. Faust commits no offset of the lines topic (faust_batches'
`self_committed_topics`): they are the transactions'.

Faust's delivery is not trusted either. Right after a (re)start it resumes fetching
before it seeks to the committed offsets, and its fetcher runs in another thread: we
measured a record skipped in the first batch after a restore (3 of 12 instrumented runs
with 4 kill -9 each), and records delivered twice. So the state holds the next Kafka
offset of p (key "k"), and each batch is taken in offset order from there: records below
it (delivered again) are dropped, and records Faust skipped are read straight from the
lines topic with a consumer of our own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time

import faust

from dpmstream.streams.kafka.faust_batches import SCHEME  # also registers the transport
from dpmstream.streams.kafka.faust_recovery import SelfRecoveringTables
from dpmstream.streams.kafka.partitions import Outcome, PartitionOwners, encode_state
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.partition_metrics import PartitionReport
from dpmstream.streams.live.stop_deadline import STOP_WITHIN_S, StopDeadline

log = logging.getLogger("dpmstream.worker")

TABLE = "state"


def changelog_topic(group_id: str) -> str:
    return f"{group_id}-{TABLE}-changelog"


def faust_credentials(security: dict):
    """aiokafka security kwargs (kafka_config.KafkaSecurity.client_kwargs) -> Faust credentials."""
    protocol = security.get("security_protocol", "PLAINTEXT")
    ctx = security.get("ssl_context")
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=security.get("sasl_plain_username"), password=security.get("sasl_plain_password"),
            mechanism=security.get("sasl_mechanism"), ssl_context=ctx)
    if protocol == "SSL":
        return faust.SSLCredentials(ctx)
    return None


class FaustEngine:
    """The app, its agent and its per-partition pipelines (one object, for tests and bench)."""

    def __init__(self, config, partitions: int, *, metrics=None, datadir=None, loop=None,
                 session_timeout_s: float = 10.0):
        self.cfg = config
        self.metrics = metrics
        changelog = changelog_topic(config.group_id)
        # p -> PartitionState and p's transactional producer; state keys "<p>|<key>".
        self.owners = PartitionOwners(config, changelog, key_prefix=True)
        self._lock = asyncio.Lock()
        self._in_hand: asyncio.Future | None = None   # the batch being processed
        self.lines_seen = 0
        self.batches = 0
        self.redelivered = 0     # records Faust handed in again (below the state's offset)
        self.refetched = 0       # records Faust skipped, read from the topic ourselves
        self._reader = None      # that consumer (no group), started on first need
        self.report = PartitionReport(metrics)
        self.app = app = faust.App(
            config.group_id,
            # The batching transport (faust_batches): one event per fetched partition batch.
            broker=[f"{SCHEME}://{hp}" for hp in config.bootstrap.split(",")],
            broker_credentials=faust_credentials(config.security),
            # The engine commits its batches in its own transactions (module docstring).
            processing_guarantee="at_least_once",
            store="memory://",
            datadir=datadir or tempfile.mkdtemp(prefix="dpmstream-faust-"),
            web_enabled=False, web_bind="127.0.0.1",
            topic_partitions=partitions, topic_replication_factor=1,
            table_standby_replicas=0,
            consumer_auto_offset_reset="earliest",
            # Faust's commits: offsets of other topics (none here) and its bookkeeping;
            # each batch of the lines topic is committed in its own transaction.
            broker_commit_interval=1.0,
            # A killed worker's partitions move on after this (Faust's default: 60 s).
            broker_session_timeout=session_timeout_s,
            broker_heartbeat_interval=min(3.0, session_timeout_s / 3),
            # A fetch is a batch: large fetches, and few batches queued (each is big).
            broker_max_poll_records=config.batch_records,
            consumer_max_fetch_size=4 << 20,
            stream_buffer_maxsize=16,
            producer_max_request_size=8 << 20,
            # The engine reads the state table's changelog itself (faust_recovery).
            TableManager=SelfRecoveringTables,
            loop=loop,
        )
        app.batched_topics = frozenset({config.lines_topic})
        app.self_committed_topics = frozenset({config.lines_topic})
        app.self_recovered_topics = frozenset({changelog})
        self.lines = app.topic(config.lines_topic, key_type=bytes, value_type=bytes,
                               key_serializer="raw", value_serializer="raw", partitions=partitions)
        # bytes keys and values: the changelog holds our own JSON, Faust does not decode it.
        self.table = app.Table(TABLE, partitions=partitions, key_type=bytes, value_type=bytes,
                               recovery_buffer_size=10_000)

        async def process(stream):
            async for event in stream.events():
                await self._batch(event.message)

        app.agent(self.lines, name="dpmstream-lines")(process)
        app.on_partitions_revoked.connect(self._on_revoked)
        app.on_before_shutdown.connect(self._shutdown)

    # -- one batch -----------------------------------------------------------------------
    async def _batch(self, batch) -> None:
        """One partition's fetched records (a faust_batches.BatchMessage)."""
        async with self._lock:   # a batch and a revoke never overlap
            if not self._current(batch):
                return   # fetched before a rebalance: its owner now reads it again
            # Shielded: a stop mid-batch still lets the batch commit whole, or not at all.
            self._in_hand = asyncio.ensure_future(self._process(batch))
            await asyncio.shield(self._in_hand)
        self.batches += 1

    def _current(self, batch) -> bool:
        app = self.app
        return (batch.generation_id == app.consumer_generation_id
                and batch.tp in app.consumer.assignment())

    async def _process(self, batch) -> None:
        p = batch.partition
        part = self.owners.parts.get(p)
        if part is None:
            part = await self._take(p)
        messages = await self._in_order(p, part, batch.records)
        if not messages:
            return
        part.feed_batch(messages)
        records, changes = part.checkpoint()
        outcome = await self.owners.commit(part, records, changes)
        if outcome is not Outcome.COMMITTED:
            # p is dropped: the next batch of p (if p is still ours) takes it again, and
            # reads this one again from the offset the state holds (see _in_order).
            self.report.forget([p])
            return
        self._mirror(p, changes)
        self.lines_seen += len(messages)
        self.report.committed(part, records)

    async def _in_order(self, p: int, part: PartitionState, messages: list) -> list:
        """p's records of a batch, each offset once, from the state's next offset on."""
        expected = part.next_offset
        if expected is None:   # nothing stored yet: Faust's first offset is where we start
            expected = messages[0].offset
        out = []
        for msg in messages:
            offset = msg.offset
            if offset < expected:
                self.redelivered += 1
                continue
            if offset > expected:
                missing = await self._read(p, expected, offset)
                self.refetched += len(missing)
                log.warning("partition %d: Faust skipped offsets %d..%d; read %d records "
                            "from the topic", p, expected, offset - 1, len(missing))
                out += missing
            out.append(msg)
            expected = offset + 1
        return out

    async def _read(self, p: int, start: int, end: int, timeout_s: float = 60.0) -> list:
        """Records [start, end) of partition p of the lines topic (committed ones only:
        transaction markers and aborted records leave holes, as for Faust)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        if self._reader is None:
            reader = AIOKafkaConsumer(
                bootstrap_servers=self.cfg.bootstrap, group_id=None, enable_auto_commit=False,
                isolation_level="read_committed", client_id="dpmstream-faust-reader",
                **self.cfg.security)
            await reader.start()
            self._reader = reader
        reader = self._reader
        tp = TopicPartition(self.cfg.lines_topic, p)
        reader.assign([tp])
        reader.seek(tp, start)
        out = []
        deadline = time.monotonic() + timeout_s
        while await reader.position(tp) < end:
            if time.monotonic() > deadline:
                # The batch is not sent: the state keeps its offset, and whoever has p
                # next reads these again.
                raise RuntimeError(f"partition {p}: could not read offsets {start}..{end - 1}")
            batch = await reader.getmany(tp, timeout_ms=500, max_records=end - start)
            out += [m for m in batch.get(tp, ()) if m.offset < end]
        return out

    # -- partitions ----------------------------------------------------------------------
    async def _take(self, p: int) -> PartitionState:
        """Own p: fence its previous owner, read its state from the changelog."""
        started = time.monotonic()
        await self.owners.start()
        part, states = await self.owners.take(p)
        data, prefix = self.table.data, f"{p}|".encode()
        for key in [k for k in data if k.startswith(prefix)]:
            del data[key]   # what Faust's recovery read may hold aborted transactions
        self._mirror(p, states)
        # The same words as the aiokafka engine's (tests and admins read both).
        log.info("partition %d: resumed at offset %s with %d open requests "
                 "(%d state entries, %.2f s)", p, part.next_offset,
                 part.pipeline.stats.in_flight, len(states), time.monotonic() - started)
        return part

    def _mirror(self, p: int, changes: dict) -> None:
        """The table holds p's committed state, as the changelog does."""
        data, prefix = self.table.data, f"{p}|"
        for key, state in changes.items():
            if state is None:
                data.pop((prefix + key).encode(), None)
            else:
                data[(prefix + key).encode()] = encode_state(state)

    async def _on_revoked(self, app, revoked, **kwargs) -> None:
        ours = sorted(tp.partition for tp in revoked if tp.topic == self.cfg.lines_topic)
        async with self._lock:   # after the batch in hand
            for p in ours:
                if p in self.owners.parts:
                    log.info("partition %d: revoked", p)
                await self.owners.drop([p])
                self.report.forget([p])

    async def _shutdown(self, app, **kwargs) -> None:
        in_hand = self._in_hand
        if in_hand is not None and not in_hand.done():
            try:   # a stop cancelled the agent: let its batch commit (or fail) first
                await in_hand
            except Exception as exc:
                log.warning("last batch not committed (%s): it is read again", exc)
        await self.owners.stop()
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    @property
    def duplicates(self) -> int:   # lines seen before (host, path, offset), skipped
        return self.report.duplicates


class QuietWorker(faust.Worker):
    """faust.Worker that logs through the caller's handlers, without a spinner.

    Faust's logging setup replaces the root handlers with its own, at `loglevel`, so the
    worker's INFO lines (a partition resumed, revoked) would be dropped, and its terminal
    spinner would write escape codes into log files."""

    def __init__(self, *args, keep_handlers=(), stop_deadline=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_handlers = list(keep_handlers)
        self.spinner = None
        self.stop_deadline = stop_deadline

    def _schedule_shutdown(self, signal) -> None:
        # SIGTERM and SIGINT: Faust's stop retries for as long as the broker is away.
        if self.stop_deadline is not None:
            self.stop_deadline.arm()
        super()._schedule_shutdown(signal)

    def on_setup_root_logger(self, logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        if self.keep_handlers:
            logger.handlers[:] = self.keep_handlers


def prepare_topics(config, loop) -> int:
    """Create missing topics (the changelog compacted, with the lines topic's partition
    count); returns that count."""
    from dpmstream.streams.kafka.topics import ensure_topics

    return loop.run_until_complete(ensure_topics(
        config.bootstrap, config.security, lines=config.lines_topic,
        outputs=[config.requests_topic, config.calls_topic],
        state=changelog_topic(config.group_id), partitions=config.partitions))


def run_faust_worker(config, metrics_port: int | None = None, metrics_bind: str = "127.0.0.1",
                     workdir: str | None = None, loglevel: str = "WARNING",
                     on_engine=None, session_timeout_s: float = 10.0,
                     max_series: int | None = None) -> int:
    """Run the Faust worker until SIGTERM/SIGINT; returns the exit code (0 after a clean stop).

    config: kafka_worker.WorkerConfig (bootstrap, security kwargs, topics, group_id, core
    options; batch_records caps the records of one fetch, so of one batch). workdir:
    Faust's datadir (default: a temporary directory, removed at exit). metrics_port None:
    no /metrics endpoint. on_engine: called with the FaustEngine before the worker starts
    (the benchmark adds a task there).
    session_timeout_s: how long the group waits for a worker that died (or, Faust's
    consumer not leaving the group on stop, for one that stopped) before its partitions
    move on; the broker's floor is 6 s. max_series: the series budget of each metric
    family (metrics.PipelineMetrics).
    """
    from dpmstream.streams.metrics.exporter import PipelineMetrics, serve

    scratch = None
    if workdir is None:   # the store is in memory: nothing in it outlives the process
        scratch = tempfile.TemporaryDirectory(prefix="dpmstream-faust-")
        workdir = scratch.name
    os.makedirs(workdir, exist_ok=True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        partitions = prepare_topics(config, loop)
    except Exception as exc:  # no broker, a topic we may not create, a mismatched changelog
        log.error("worker not started: %s: %s", exc.__class__.__name__, exc)
        return 1
    metrics = PipelineMetrics() if max_series is None else PipelineMetrics(max_series=max_series)
    server = None
    if metrics_port is not None:
        server = serve(metrics_port, metrics_bind, registry=metrics.registry)
        log.info("metrics on %s", server.url)
    engine = FaustEngine(config, partitions, metrics=metrics, datadir=workdir, loop=loop,
                         session_timeout_s=session_timeout_s)
    if on_engine is not None:
        on_engine(engine)
    cleanup = [server.close] if server is not None else []
    if scratch is not None:
        cleanup.append(lambda: shutil.rmtree(scratch.name, ignore_errors=True))
    deadline = StopDeadline(STOP_WITHIN_S, log, cleanup)
    # Faust's Worker chdirs into its workdir: stay where we are.
    worker = QuietWorker(engine.app, loop=loop, loglevel=loglevel, quiet=True,
                         workdir=os.getcwd(), keep_handlers=list(logging.root.handlers),
                         stop_deadline=deadline)
    log.info("faust worker %s: %s (%d partitions) -> %s, %s on %s", config.group_id,
             config.lines_topic, partitions, config.requests_topic, config.calls_topic,
             config.bootstrap)
    code = 0
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        deadline.cancel()
        if server is not None:
            server.close()
        if scratch is not None:
            scratch.cleanup()
    log.info("faust worker stopped after %d records (%d lines seen before, skipped; "
             "%d records delivered again by Faust, dropped; %d it skipped, read ourselves)",
             engine.lines_seen, engine.duplicates, engine.redelivered, engine.refetched)
    return code
