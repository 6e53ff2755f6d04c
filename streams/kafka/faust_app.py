"""The worker process: the Kafka engine (worker.Worker) hosted by a Faust app.

    code = run_worker(config, metrics_port=9108, metrics_bind="127.0.0.1")

The engine is worker.Worker and nothing else: its consumer loop, the per-partition
transactions of partitions.PartitionOwners and the state topic `<group>-state`. Faust
is the shell around it, through its public API only: the engine is an `@app.service`
started and stopped with the app, and faust.Worker gives the process its signals
(SIGTERM and SIGINT stop it gracefully), its logging and its life cycle.

Faust itself talks to no broker. Its boot strategy (EngineOnly) starts neither its
consumer (a second member of the group, or a group of its own, with its own rebalances
and commits), nor its producer, nor its tables; its web server is off (and would bind
127.0.0.1 only). Faust 0.15's exactly_once mode, its table recovery and its per-record
delivery are what the engine replaced (docs/kafka-worker.md says why).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile

import faust
from faust.app.base import BootStrategy
from mode import Service

from dpmstream.streams.kafka import log_pace
from dpmstream.streams.kafka.worker import Worker
from dpmstream.streams.live.stop_deadline import STOP_WITHIN_S, StopDeadline

log = logging.getLogger("dpmstream.worker")


class EngineOnly(BootStrategy):
    """Start the app's sensors and services only: no Kafka clients, no web server."""
    enable_kafka = False
    enable_web = False


class HostApp(faust.App):
    BootStrategy = EngineOnly


def engine_service(worker: Worker, deadline: StopDeadline | None = None) -> type[Service]:
    """A mode Service class (as `@app.service` takes one) that runs `worker` while the
    app runs. Stopping it stops the worker (its batch in hand committed, its group left,
    its producers closed) under `deadline`, armed first: with the broker gone each of
    those steps would retry for a long time."""

    class KafkaEngine(Service):
        async def on_start(self) -> None:
            self.running = self.add_future(self.run_engine())

        async def run_engine(self) -> None:
            try:
                await worker.run()
            except Exception as exc:   # the broker refusing us, a topic we may not read
                log.error("worker stopped: %s: %s", exc.__class__.__name__, exc)
                raise   # crashes the service, so the process ends with a failure code
            if not self.should_stop:   # the engine ended by itself: end the process too
                await self.crash(RuntimeError("the Kafka engine stopped"))

        async def on_stop(self) -> None:
            if deadline is not None:
                deadline.arm()
            worker.stop()
            await asyncio.wait({self.running})

    return KafkaEngine


def host_app(worker: Worker, deadline: StopDeadline | None = None, *, datadir: str,
             loop=None) -> faust.App:
    """The Faust app whose one service is the engine."""
    cfg = worker.cfg
    # The broker is named for Faust's own reports only: EngineOnly never connects to it.
    app = HostApp(cfg.group_id, broker=f"kafka://{cfg.bootstrap.split(',')[0]}",
                  datadir=datadir, web_enabled=False, web_bind="127.0.0.1",
                  autodiscover=False, loop=loop)
    app.service(engine_service(worker, deadline))
    return app


class EngineWorker(faust.Worker):
    """faust.Worker that logs through the caller's handlers, without a spinner.

    Faust's logging setup replaces the root handlers with its own at `loglevel`, so the
    engine's INFO lines (a partition resumed, revoked) would be dropped, and its terminal
    spinner would write escape codes into log files."""

    def __init__(self, *args, keep_handlers=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_handlers = list(keep_handlers)
        self.spinner = None

    def on_setup_root_logger(self, logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        if self.keep_handlers:
            logger.handlers[:] = self.keep_handlers


def run_worker(config, metrics_port: int | None = None, metrics_bind: str = "127.0.0.1",
               loglevel: str | int | None = None, max_series: int | None = None,
               on_worker=None) -> int:
    """Run the worker until SIGTERM/SIGINT; returns the exit code (0 after a clean stop).

    config: worker.WorkerConfig. metrics_port None: no /metrics endpoint. loglevel:
    the root logger's level under Faust (default: the level it has now). max_series:
    the series budget of each metric family (metrics.PipelineMetrics). on_worker: called
    with the engine (worker.Worker) and the app before the process starts (the benchmark
    adds a task there)."""
    from dpmstream.streams.kafka.topics import ensure_topics
    from dpmstream.streams.metrics.exporter import PipelineMetrics, serve

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:   # here, not in the engine: a clear error before Faust starts
        loop.run_until_complete(ensure_topics(
            config.bootstrap, config.security, lines=config.lines_topic,
            outputs=[config.requests_topic, config.calls_topic], state=config.state,
            partitions=config.partitions))
    except Exception as exc:  # no broker, a topic we may not create, a mismatched state topic
        log.error("worker not started: %s: %s", exc.__class__.__name__, exc)
        return 1
    metrics = PipelineMetrics() if max_series is None else PipelineMetrics(max_series=max_series)
    server = None
    if metrics_port is not None:
        server = serve(metrics_port, metrics_bind, registry=metrics.registry)
        log.info("metrics on %s", server.url)
    engine = Worker(config, metrics)
    # Faust wants a data directory; nothing of the engine's is kept in it.
    scratch = tempfile.TemporaryDirectory(prefix="dpmstream-worker-")
    cleanup = [server.close] if server is not None else []
    cleanup.append(scratch.cleanup)
    deadline = StopDeadline(STOP_WITHIN_S, log, cleanup, consequence=(
        "is the broker reachable? What was not committed is read again by the next worker"))
    app = host_app(engine, deadline, datadir=scratch.name, loop=loop)
    if on_worker is not None:
        on_worker(engine, app)
    # Faust's Worker would chdir into its workdir: stay where we are.
    if loglevel is None:
        loglevel = logging.root.level or logging.WARNING
    handlers = list(logging.root.handlers)
    # A broker outage would have aiokafka (and the engine) log the same error many times a
    # second: each kind of warning at most once per log_pace.EVERY_S, with a count.
    log_pace.install(handlers)
    process = EngineWorker(app, loop=loop, loglevel=loglevel, quiet=True,
                           workdir=os.getcwd(), keep_handlers=handlers)
    log.info("worker %s: %s -> %s, %s on %s (state in %s)", config.group_id,
             config.lines_topic, config.requests_topic, config.calls_topic,
             config.bootstrap, config.state)
    code = 0
    try:
        process.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        deadline.cancel()
        if server is not None:
            server.close()
        scratch.cleanup()
    log.info("worker stopped after %d records (%d lines seen before, skipped; %d fed again "
             "after a partition was taken again)",
             engine.lines_seen, engine.duplicates, engine.lines_fed_again)
    return code
