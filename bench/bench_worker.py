"""Kafka worker benchmark: lines/s through `dpmstream worker` from a pre-filled topic.

A simulated head-node log is published under --hosts host names (one partition each,
when the hash allows) to a fresh lines topic; then one worker process (the real Worker,
exactly-once transactions and state changelog included) reads it all. Prints the worker's
lines/s (first record fetched -> last batch committed) and per CPU second of its process
(what a loaded machine changes least), its peak RSS, the records and transactions it wrote,
and for reference the worker's core alone on the same lines (feed_batch, no Kafka client) and
the worker's consumer (librdkafka, lines_fetch.consumer_settings) doing nothing with them
(the floor under the worker). The worker runs
pinned to one core and alternates with `LC_ALL=C grep -cE` on the same lines (a fresh
consumer group each round) until the CPU ratio settles (bench/yardstick.py), printing both
ratios, grep's rate and the load average.

    .venv/bin/python bench/bench_worker.py [--lines 400000] [--hosts 4] [--broker kafka://H:P]

Without --broker a private broker is started in --workdir (make install-kafka first).
Target (issue 17): >= 150,000 lines/s in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dpmstream.streams.kafka.txn_bounds import BATCH_RECORDS

from topic_fill import bench_broker, fill_topic, log_files, make_records
from yardstick import Measured, ONE_CORE, against_grep, load_note, pinning_note

HERE = Path(__file__).resolve().parent


def core_alone(records, batch: int) -> tuple[float, float]:
    """(lines/s, lines per CPU second) of the worker's core on the same lines: what the
    worker does with a fetched batch (PartitionState.feed_batch: decode, duplicate marks,
    parse, reassemble), one partition per host, batches of at most `batch` records of one
    partition. No Kafka client, no checkpoint, no transaction."""
    from dpmstream.streams.kafka.lines_fetch import Record as message   # a consumer's Message
    from dpmstream.streams.kafka.state import PartitionState
    by_host: dict[bytes, list] = {}
    for key, value in records:
        msgs = by_host.setdefault(key, [])
        msgs.append(message(key, value, len(msgs)))
    t0, cpu0 = time.perf_counter(), time.process_time()
    for i, msgs in enumerate(by_host.values()):
        part = PartitionState(i)
        for start in range(0, len(msgs), batch):
            part.feed_batch(msgs[start:start + batch])
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return len(records) / wall, len(records) / cpu


POLL_S = 0.01  # how often the bench looks at the worker's lines fed (run_worker)


def run_worker(bootstrap: str, topic: str, total: int, batch: int, tag: str,
               transaction_lines: int | None = None, transaction_age: float | None = None) -> None:
    """Child process: one worker (consumer group and output topics named by `tag`) until
    `total` records are fed; prints JSON figures."""
    from dpmstream.streams.kafka.worker import Worker, WorkerConfig
    from dpmstream.streams.kafka.txn_bounds import TRANSACTION_AGE_S, TRANSACTION_LINES
    from dpmstream.streams.metrics.exporter import PipelineMetrics

    cfg = WorkerConfig(bootstrap=bootstrap, lines_topic=topic, requests_topic=f"bench-req-{tag}",
                       calls_topic=f"bench-calls-{tag}", group_id=f"bench-{tag}",
                       batch_records=batch, transaction_lines=transaction_lines or TRANSACTION_LINES,
                       transaction_age_s=TRANSACTION_AGE_S if transaction_age is None else transaction_age)
    worker = Worker(cfg, PipelineMetrics())
    figures = {}

    # The bench's own look at the worker's progress wakes the worker's event loop: every
    # 1 ms it cost ~30 ms of CPU a second, 2-5% of the figure, counted as the worker's (a
    # deployed worker has no such look). Every 10 ms it is a tenth of that; the end is
    # seen at most 10 ms late, which the wall time carries, not the CPU time.
    async def main():
        task = asyncio.ensure_future(worker.run())
        while worker.lines_seen == 0:
            await asyncio.sleep(POLL_S)
        t0, cpu0 = time.perf_counter(), time.process_time()
        seen0 = worker.lines_seen
        while worker.lines_seen < total:
            if task.done():
                task.result()
            await asyncio.sleep(POLL_S)
        worker.stop()
        await task   # the last batch is committed when run() returns
        wall = time.perf_counter() - t0
        figures.update(lines=total - seen0, wall=wall, cpu=time.process_time() - cpu0,
                       batches=worker.batches)

    asyncio.run(main())
    figures["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(figures))


def peak_rss_mib() -> float:
    """This process's peak RSS. Not getrusage's ru_maxrss: that survives exec, so a child
    would report the parent it was forked from (here one holding every record)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_consumer(bootstrap: str, topic: str, total: int, batch: int, tag: str,
                 transaction_lines: int | None = None, transaction_age: float | None = None) -> None:
    """Child process: a bare consumer with the worker's settings that only counts the
    records (bench_kafka_clients.py's); prints JSON figures timed like run_worker's."""
    from bench_kafka_clients import run_confluent

    fig = run_confluent(bootstrap, topic, total, batch, decode=None)
    print(json.dumps(dict(lines=fig["records"], wall=fig["wall"], cpu=fig["cpu"])))


def worker_child(batch: int, bootstrap: str, topic: str, total: int, tag: str | None = None,
                 bare: bool = False, transaction_lines: int | None = None) -> dict:
    """One child on one core: a worker (or with `bare`, the bare consumer) in a consumer
    group of its own (`tag`, default a fresh one), so it reads the topic from the start."""
    out = subprocess.run([*ONE_CORE, sys.executable, __file__, "--batch", str(batch),
                          "--tag", tag or uuid.uuid4().hex[:8], *(["--bare"] if bare else []),
                          *(["--transaction-lines", str(transaction_lines)] if transaction_lines else []),
                          "--child", bootstrap, topic, str(total)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def as_measured(fig: dict, total: int) -> Measured:
    """A child's figures as a measurement of all `total` lines: a worker is timed from its
    first fetched batch, so its time is scaled by the lines it was timed over."""
    scale = total / fig["lines"]
    return Measured(wall=fig["wall"] * scale, cpu=fig["cpu"] * scale)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--batch", type=int, default=BATCH_RECORDS,
                    help="records per fetch (WorkerConfig.batch_records; default: the worker's)")
    ap.add_argument("--transaction-lines", type=int, default=None,
                    help="a partition's lines per transaction at most (WorkerConfig."
                         "transaction_lines; default: the worker's); 1: a transaction per fetch")
    ap.add_argument("--transaction-age", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=100_000,
                    help="lines of a worker run on another topic first, unreported but printed "
                         "(a broker just started serves its first transactions slowly, its JIT "
                         "cold: a long-running worker never meets it so); 0: none")
    ap.add_argument("--broker", help="an existing broker (default: start a private one)")
    ap.add_argument("--max-rounds", type=int, default=8,
                    help="rounds of (grep, worker) at most before saying the ratio did not settle")
    ap.add_argument("--workdir", default=str(HERE / "out"))
    ap.add_argument("--child", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "TOTAL"), help=argparse.SUPPRESS)
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run = run_consumer if args.bare else run_worker
        run(args.child[0], args.child[1], int(args.child[2]), args.batch, args.tag,
            args.transaction_lines, args.transaction_age)
        return 0

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_broker(args.broker, workdir, "bench") as (bootstrap, _):
        records = make_records(workdir, args.lines, args.hosts)
        total = len(records)
        topic = f"bench-lines-{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        asyncio.run(fill_topic(bootstrap, topic, args.hosts, records))
        print(f"filled {topic}: {total:,} lines in {time.perf_counter() - t0:.1f} s")
        core, core_cpu = core_alone(records, args.batch)
        if args.warmup:
            warm = records[:args.warmup]
            warm_topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
            asyncio.run(fill_topic(bootstrap, warm_topic, args.hosts, warm))
            fig = worker_child(args.batch, bootstrap, warm_topic, len(warm),
                               transaction_lines=args.transaction_lines)
            print(f"warm-up worker on {len(warm):,} lines of another topic: "
                  f"{fig['lines'] / fig['wall']:,.0f} lines/s (not the measure)")
        del records
        print(f"{pinning_note()} (each worker and grep); {load_note()}")
        figures = []   # each round's worker figures, for RSS and batches

        def one_worker() -> Measured:
            figures.append(worker_child(args.batch, bootstrap, topic, total,
                                        transaction_lines=args.transaction_lines))
            return as_measured(figures[-1], total)

        grep_files = [*log_files(workdir, args.lines, args.hosts)] * args.hosts  # the logs once per host
        cmp = against_grep(one_worker, grep_files, total, max_rounds=args.max_rounds)
        bare = worker_child(args.batch, bootstrap, topic, total, bare=True)
        fig = figures[-1]
        rate = total / cmp.wall
        print(f"core alone (PartitionState.feed_batch on batches of {args.batch:,} records of one "
              f"partition: decode, duplicate marks, parse, reassemble): {core:,.0f} lines/s, "
              f"{core_cpu:,.0f} per CPU second")
        print(f"worker: {total:,} lines in {cmp.wall:.2f} s = {rate:,.0f} lines/s "
              f"({fig['batches']} rounds of transactions, one per partition due; median of the "
              f"last rounds, a fresh consumer group each)")
        print(f"worker per CPU second: {total / cmp.cpu:,.0f} lines "
              f"({cmp.cpu / total * 1e6:.2f} us a line)")
        print(f"the worker's consumer alone: {bare['lines'] / bare['wall']:,.0f} lines/s, "
              f"{bare['cpu'] / bare['lines'] * 1e6:.2f} us CPU a record")
        print(f"worker peak RSS: {max(f['peak_rss_mib'] for f in figures):.0f} MiB")
        print(cmp.summary(f"worker against LC_ALL=C grep -cE on the same {total:,} lines"))
        print(f"target >= 150,000 lines/s: {'met' if rate >= 150_000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
