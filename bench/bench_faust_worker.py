"""Worker process benchmark: lines/s through the engine hosted by its Faust app, as
`dpmstream worker` runs it (streams/kafka/faust_app.run_worker), from a pre-filled
topic, in one process (bench_worker.py measures the engine alone, as a subprocess).

A simulated head-node log (scenario "heavy") is published under --hosts host names to a
fresh lines topic with --hosts partitions; then one worker (a transaction per partition
batch: records, state and offsets) reads it all. Prints its lines/s from the first
batch to the batch that reached the end, the time to start (Faust app start, group
join, state read), peak RSS, and what it wrote.

    .venv/bin/python bench/bench_faust_worker.py [--lines 200000] [--hosts 4] [--batch 20000]
                                                 [--broker kafka://H:P]

Without --broker a private broker is started in --workdir (make install-kafka first).
Target of the issue: >= 50,000 lines/s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from dpmstream.streams.kafka.txn_bounds import BATCH_RECORDS

from topic_fill import fill_topic, make_records


def reset_peak_rss() -> None:
    """Start VmHWM again from the current RSS (Linux: clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--batch", type=int, default=BATCH_RECORDS,
                    help="records per fetch, so per batch (WorkerConfig.batch_records; default: "
                         "the worker's)")
    ap.add_argument("--broker", help="kafka://HOST:PORT (default: a private broker)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    from dpmstream.streams.kafka.faust_app import run_worker
    from dpmstream.streams.kafka.config import parse_broker
    from dpmstream.streams.kafka.worker import WorkerConfig

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-faust-"))
    workdir.mkdir(parents=True, exist_ok=True)
    broker = None
    if args.broker:
        bootstrap = parse_broker(args.broker)
    else:
        from dpmstream.commands.stack.kafka import KafkaBroker
        broker = KafkaBroker(workdir / "kafka")
        broker.start()
        bootstrap = broker.bootstrap
    try:
        records = make_records(workdir, args.lines, args.hosts)
        tag = uuid.uuid4().hex[:8]
        topic = f"bench-flines-{tag}"
        started = time.monotonic()
        asyncio.run(fill_topic(bootstrap, topic, args.hosts, records))
        print(f"published {len(records):,} lines to {topic} ({args.hosts} partitions) "
              f"in {time.monotonic() - started:.1f} s")
        total = len(records)
        del records                 # the worker's peak RSS is measured from here on
        gc.collect()
        reset_peak_rss()
        cfg = WorkerConfig(bootstrap=bootstrap, lines_topic=topic,
                           requests_topic=f"bench-freq-{tag}", calls_topic=f"bench-fcalls-{tag}",
                           group_id=f"bench-fgroup-{tag}", batch_records=args.batch)
        marks: dict[str, float] = {}

        def on_worker(engine, app):
            @app.task
            async def watch():
                while engine.lines_seen == 0:
                    await asyncio.sleep(0.005)
                marks["first"] = time.monotonic()
                while engine.lines_seen < total:
                    await asyncio.sleep(0.005)
                marks["last"] = time.monotonic()
                marks["batches"] = engine.batches
                os.kill(os.getpid(), signal.SIGTERM)   # graceful stop: final commit

        t0 = time.monotonic()
        code = run_worker(cfg, on_worker=on_worker)
        stopped = time.monotonic()
        if "last" not in marks:
            print(f"worker exited ({code}) before reaching the end", file=sys.stderr)
            return 1
        span = marks["last"] - marks["first"]
        rss = peak_rss_mib()
        print(f"worker (Faust-hosted): {total:,} lines in {span:.2f} s = {total / span:,.0f} lines/s "
              f"(first batch -> last batch sent, {marks['batches']} batches of <= {args.batch})")
        print(f"start to first batch {marks['first'] - t0:.1f} s; stop {stopped - marks['last']:.1f} s; "
              f"exit code {code}")
        print(f"peak RSS {rss:.0f} MiB (this process from the worker's start: VmHWM after "
              f"a reset, the input records freed)")
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
