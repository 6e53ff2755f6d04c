"""The Faust engine of the stream worker (`dpmstream worker --engine faust`).

    code = run_faust_worker(config, metrics_port=9108, metrics_bind="127.0.0.1", workdir=None)

A faust.App (id = config.group_id, processing_guarantee="exactly_once", web server off,
memory store, private datadir) with one agent over the lines topic and one Table,
`state`, whose changelog topic `<group_id>-state-changelog` holds the reassembly state.
The app runs on the batching transport of faust_batches (broker "dpmstream://..."): the
agent gets one event per fetched partition batch instead of one per line, which is what
lets a Faust worker keep up with a head node (about 13,000 lines/s before, >60,000 now).

State design. One PartitionState (one Pipeline, the (host, path) high-water offsets) per
input partition p; a host's lines are all in one partition. Its net changes after each
batch are written to the table under the key "<p>|<state key>" AND to partition p of the
changelog (the table has as many partitions as the lines topic). Faust restores exactly
the changelog partitions of the input partitions it assigns us (reading committed
transactions only); the first event of p then rebuilds p's pipeline from the table
entries whose key starts with "<p>|". A revoked partition's pipeline is dropped, so a
partition that comes back is rebuilt from the table, never from a stale pipeline.

Exactly once, and what Faust is not trusted with. In exactly_once mode Faust keeps one
transactional producer per input partition (transactional id "<app id>-<group>-<p>",
which fences a previous owner and aborts its open transaction) and commits input offsets
in that producer's transaction. Two things of Faust's own write path are not atomic with
those offsets (faust-streaming 0.15.3): `topic.send()` picks the transaction of the
*output* partition, and table writes go through an asynchronous buffer that a commit does
not flush. So each batch of partition p sends its records and its changelog entries
straight to p's transactional producer while holding that producer's transaction lock,
which Faust's commit takes too: a transaction holds whole batches only.

Faust's delivery is not trusted either. Right after a (re)start it resumes fetching
before it seeks to the committed offsets, and its fetcher runs in another thread: we
measured a record skipped in the first batch after a restore (3 of 12 instrumented runs
with 4 kill -9 each), and records delivered twice. Faust's commit then stops at the
skipped offset (or, with its one-offset tolerance, passes it), while the high-water
offsets of the state had moved past it: the line was lost for good, and its request came
out different (e.g. without its accept time). So the state holds the next Kafka offset
of p (key "k"), and each batch is taken in offset order from there: records below it
(delivered again) are dropped, and records Faust skipped are read straight from the lines
topic with a consumer of our own. The offsets Faust commits may then lag or lead the
state; either way a restart carries on from the state's offset.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time

import faust

from dpmstream.streams.faust_batches import SCHEME  # also registers the transport
from dpmstream.streams.kafka_state import PartitionState
from dpmstream.streams.record_topics import output_message

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
                 session_timeout_s: float = 10.0, commit_interval_s: float = 0.5):
        self.cfg = config
        self.metrics = metrics
        self.parts: dict[int, PartitionState] = {}
        self.lines_seen = 0
        self.duplicates = 0
        self.batches = 0
        self.redelivered = 0     # records Faust handed in again (below the state's offset)
        self.refetched = 0       # records Faust skipped, read from the topic ourselves
        self._reader = None      # that consumer (no group), started on first need
        self._dup_counter = None
        if metrics is not None:
            from prometheus_client import Counter
            self._dup_counter = Counter(
                "dpmstream_duplicate_lines", "Lines skipped because they were delivered before",
                ["host"], registry=metrics.registry)
        self.app = app = faust.App(
            config.group_id,
            # The batching transport (faust_batches): one event per fetched partition batch.
            broker=[f"{SCHEME}://{hp}" for hp in config.bootstrap.split(",")],
            broker_credentials=faust_credentials(config.security),
            processing_guarantee="exactly_once",
            store="memory://",
            datadir=datadir or tempfile.mkdtemp(prefix="dpmstream-faust-"),
            web_enabled=False, web_bind="127.0.0.1",
            topic_partitions=partitions, topic_replication_factor=1,
            table_standby_replicas=0,
            consumer_auto_offset_reset="earliest",
            # Records become visible to read_committed readers when their transaction
            # commits, so this bounds a record's latency; a commit costs a few ms, more
            # (up to ~0.5 s) when it waits for a 20,000-line batch to be sent.
            broker_commit_interval=commit_interval_s,
            # A killed worker's partitions move on after this (Faust's default: 60 s).
            broker_session_timeout=session_timeout_s,
            broker_heartbeat_interval=min(3.0, session_timeout_s / 3),
            # A fetch is a batch: large fetches, and few batches queued (each is big).
            broker_max_poll_records=config.batch_records,
            consumer_max_fetch_size=4 << 20,
            stream_buffer_maxsize=16,
            producer_max_request_size=8 << 20,
            loop=loop,
        )
        app.batched_topics = frozenset({config.lines_topic})
        self.lines = app.topic(config.lines_topic, key_type=bytes, value_type=bytes,
                               key_serializer="raw", value_serializer="raw", partitions=partitions)
        # bytes keys and values: the changelog holds our own JSON, Faust does not decode it.
        self.table = app.Table(TABLE, partitions=partitions, key_type=bytes, value_type=bytes,
                               recovery_buffer_size=10_000)
        self._changelog = changelog_topic(config.group_id)

        async def process(stream):
            async for event in stream.events():
                await self._batch(event.message)

        app.agent(self.lines, name="dpmstream-lines")(process)
        app.on_partitions_revoked.connect(self._on_revoked)
        app.on_before_shutdown.connect(self._close_reader)

    # -- one batch -----------------------------------------------------------------------
    async def _batch(self, batch) -> None:
        """One partition's fetched records (a faust_batches.BatchMessage)."""
        p = batch.partition
        part = self.parts.get(p)
        if part is None:
            part = self.parts[p] = self._rebuild(p)
        messages = await self._in_order(p, part, batch.records)
        if messages:
            part.feed_batch(messages)
            records, changes = part.checkpoint()
            # Shielded: a worker stopping mid-batch still hands Faust's final commit
            # whole batches (or none), never half of one.
            if not await asyncio.shield(self._send(p, records, changes)):
                # Not persisted: forget what this batch did, so that p is rebuilt from
                # the table, whose offset has the batch read again (from the topic
                # itself if Faust moves past it, see _in_order).
                self.parts.pop(p, None)
                return
            self.lines_seen += len(messages)
            self._observe(part, records)
        self.batches += 1

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

    async def _close_reader(self, app, **kwargs) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    async def _send(self, p: int, records: list[dict], changes: dict) -> bool:
        """The batch's records and state changes into p's open transaction; False when
        there is none (between Faust's last commit before a stop or rebalance and the
        next assignment)."""
        app, cfg = self.app, self.cfg
        tid = f"{app.conf.id}-{app.assignor.group_for_topic(cfg.lines_topic)}-{p}"
        producer = app.producer
        # The lock Faust's commit of this transaction takes: our sends are all in, or none.
        async with producer._trn_locks[tid]:
            if app.consumer.transactions_ended:   # see faust_batches
                log.info("partition %d: batch not sent: no transaction open (stopping or "
                         "rebalancing); it is read again", p)
                return False
            txn = producer._transaction_producers[tid]
            for rec in records:
                topic, key, value = output_message(rec, cfg.requests_topic, cfg.calls_topic)
                await txn.send(topic, value, key=key)
            data, prefix = self.table.data, f"{p}|"
            for key, state in changes.items():
                tkey = (prefix + key).encode()
                if state is None:
                    data.pop(tkey, None)
                    value = None
                else:
                    value = data[tkey] = json.dumps(state, separators=(",", ":")).encode()
                await txn.send(self._changelog, value, key=tkey, partition=p)
        return True

    def _rebuild(self, p: int) -> PartitionState:
        """p's pipeline from the table (Faust has recovered p's changelog partition by now)."""
        started = time.monotonic()
        cfg = self.cfg
        part = PartitionState(p, timeout_s=cfg.timeout_s, max_in_flight=cfg.max_in_flight,
                              profile=cfg.profile, tz=cfg.tz)
        prefix = f"{p}|".encode()
        states = {k[len(prefix):].decode(): json.loads(v)
                  for k, v in list(self.table.data.items())
                  if k.startswith(prefix) and v is not None}
        part.restore(states)
        # The same words as the aiokafka engine's (tests and admins read both).
        log.info("partition %d: resumed at offset %s with %d open requests "
                 "(%d state entries, %.2f s)", p, part.next_offset,
                 part.pipeline.stats.in_flight, len(states), time.monotonic() - started)
        return part

    async def _on_revoked(self, app, revoked, **kwargs) -> None:
        for tp in revoked:
            if tp.topic == self.cfg.lines_topic and self.parts.pop(tp.partition, None) is not None:
                log.info("partition %d: revoked", tp.partition)
                if self.metrics is not None:   # its hosts are someone else's now
                    from dpmstream.streams.pipeline import Pipeline
                    self.metrics.update_from_stats(Pipeline(lambda r: None).stats,
                                                   source=f"p{tp.partition}")

    def _observe(self, part: PartitionState, records: list[dict]) -> None:
        self.duplicates += sum(part.duplicates.values())
        if self.metrics is not None:
            for rec in records:
                self.metrics.observe_record(rec)
            self.metrics.update_from_stats(part.stats, source=f"p{part.partition}")
            for host, n in part.duplicates.items():
                self._dup_counter.labels(host).inc(n)
        part.duplicates.clear()


class QuietWorker(faust.Worker):
    """faust.Worker that logs through the caller's handlers, without a spinner.

    Faust's logging setup replaces the root handlers with its own, at `loglevel`, so the
    worker's INFO lines (a partition resumed, revoked) would be dropped, and its terminal
    spinner would write escape codes into log files."""

    def __init__(self, *args, keep_handlers=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_handlers = list(keep_handlers)
        self.spinner = None

    def on_setup_root_logger(self, logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        if self.keep_handlers:
            logger.handlers[:] = self.keep_handlers


def prepare_topics(config, loop) -> int:
    """Create missing topics (the changelog compacted, with the lines topic's partition
    count); returns that count."""
    from dpmstream.streams.kafka_topics import ensure_topics

    return loop.run_until_complete(ensure_topics(
        config.bootstrap, config.security, lines=config.lines_topic,
        outputs=[config.requests_topic, config.calls_topic],
        state=changelog_topic(config.group_id), partitions=config.partitions))


def run_faust_worker(config, metrics_port: int | None = None, metrics_bind: str = "127.0.0.1",
                     workdir: str | None = None, loglevel: str = "WARNING",
                     on_engine=None, session_timeout_s: float = 10.0,
                     commit_interval_s: float = 0.5) -> int:
    """Run the Faust worker until SIGTERM/SIGINT; returns the exit code (0 after a clean stop).

    config: kafka_worker.WorkerConfig (bootstrap, security kwargs, topics, group_id, core
    options; batch_records caps the records of one fetch, so of one batch). workdir:
    Faust's datadir (default: a temporary directory, removed at exit). metrics_port None:
    no /metrics endpoint. on_engine: called with the FaustEngine before the worker starts
    (the benchmark adds a task there).
    session_timeout_s: how long the group waits for a worker that died (or, Faust's
    consumer not leaving the group on stop, for one that stopped) before its partitions
    move on; the broker's floor is 6 s. commit_interval_s: Faust's commit interval
    (records reach read_committed readers at a commit).
    """
    from dpmstream.streams.metrics import PipelineMetrics, serve

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
    metrics = PipelineMetrics()
    server = None
    if metrics_port is not None:
        server = serve(metrics_port, metrics_bind, registry=metrics.registry)
        log.info("metrics on %s", server.url)
    engine = FaustEngine(config, partitions, metrics=metrics, datadir=workdir, loop=loop,
                         session_timeout_s=session_timeout_s, commit_interval_s=commit_interval_s)
    if on_engine is not None:
        on_engine(engine)
    # Faust's Worker chdirs into its workdir: stay where we are.
    worker = QuietWorker(engine.app, loop=loop, loglevel=loglevel, quiet=True,
                         workdir=os.getcwd(), keep_handlers=list(logging.root.handlers))
    log.info("faust worker %s: %s (%d partitions) -> %s, %s on %s", config.group_id,
             config.lines_topic, partitions, config.requests_topic, config.calls_topic,
             config.bootstrap)
    code = 0
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        if server is not None:
            server.close()
        if scratch is not None:
            scratch.cleanup()
    log.info("faust worker stopped after %d records (%d lines seen before, skipped; "
             "%d records delivered again by Faust, dropped; %d it skipped, read ourselves)",
             engine.lines_seen, engine.duplicates, engine.redelivered, engine.refetched)
    return code
