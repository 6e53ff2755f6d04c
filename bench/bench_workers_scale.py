"""Do two workers scale? 1, then 2 worker processes in one consumer group on one lines topic
of --partitions partitions (issue 30 item 3), against the real broker.

The topic is filled once with a simulated head-node log under --hosts host names (keyed by
host, as rsyslog publishes it). Then, for N = 1 and N = 2, N worker processes (the real
Worker: exactly-once transactions and state changelog included) join a fresh consumer
group and read the whole topic; the run ends when their lines add up to the topic's. Each
worker is pinned to its own core (worker i to core i mod cpus); the broker is not pinned.

Printed for each N: the aggregate rate (lines over the time from the group's first fed
batch to its last committed one, rebalances included; each worker's first batch is not
timed, as in bench_worker.py; lines fed again after a rebalance count, and the run ends
when the lines fed add up to the topic's), each worker's lines, lines/s and
CPU seconds, and the broker's own CPU seconds over the run (from /proc, a private broker
only), with the load average; then the gain of 2 workers over 1. On a 2-core machine the
broker and two workers share two cores: the broker's CPU says how much of the machine it
took (docs/sizing.md reads these figures into a sizing rule).

    .venv/bin/python bench/bench_workers_scale.py [--lines 2000000] [--hosts 16] [--partitions 4]
                                                   [--broker kafka://H:P]

Without --broker a private broker is started in --workdir (make install-kafka first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dpmstream.streams.kafka.txn_bounds import BATCH_RECORDS

from bench_worker import peak_rss_mib
from topic_fill import bench_broker, filled_topic
from yardstick import load_note

HERE = Path(__file__).resolve().parent
PROGRESS_S = 0.2      # how often a worker child reports the lines it has fed


def run_child(bootstrap: str, topic: str, group: str, batch: int) -> None:
    """Child process: one worker of `group` until told to stop on stdin. Prints its lines
    fed every PROGRESS_S, then its figures as JSON (wall-clock instants, so the parent
    can take the group's span across processes)."""
    from dpmstream.streams.kafka.worker import Worker, WorkerConfig
    from dpmstream.streams.metrics.exporter import PipelineMetrics

    cfg = WorkerConfig(bootstrap=bootstrap, lines_topic=topic, requests_topic=f"{group}-req",
                       calls_topic=f"{group}-calls", group_id=group, batch_records=batch)
    worker = Worker(cfg, PipelineMetrics())
    loop_figures = {}

    async def main():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_reader(sys.stdin.fileno(), stop.set)     # any input (or EOF): stop
        task = asyncio.ensure_future(worker.run())
        first = cpu0 = None
        seen0 = 0
        printed = 0.0
        while not stop.is_set():
            if task.done():
                task.result()
            if first is None and worker.lines_seen:   # timed from its first fed batch
                first, cpu0, seen0 = time.time(), time.process_time(), worker.lines_seen
            if time.monotonic() - printed >= PROGRESS_S:
                print(json.dumps({"seen": worker.lines_seen}), flush=True)
                printed = time.monotonic()
            try:   # a fine step until the first batch, for its instant
                await asyncio.wait_for(stop.wait(), 0.001 if first is None else PROGRESS_S)
            except asyncio.TimeoutError:
                pass
        worker.stop()
        await task     # the last batch is committed when run() returns
        loop_figures.update(lines=worker.lines_seen, timed=worker.lines_seen - seen0,
                            first=first, last=time.time(),
                            cpu=0.0 if cpu0 is None else time.process_time() - cpu0,
                            batches=worker.batches)

    asyncio.run(main())
    loop_figures["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps({"done": loop_figures}), flush=True)


async def lines_per_partition(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Records in each partition of `topic`: the hosts' keys hash to partitions, and two
    busy hosts in one partition cannot be shared by two workers."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(parts)
        return [ends[tp] for tp in parts]
    finally:
        await consumer.stop()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_group(n: int, bootstrap: str, topic: str, total: int, batch: int,
              broker_pid: int | None, timeout: float) -> dict:
    """N workers in one fresh group until their lines add up to `total`."""
    group = f"bench-scale{n}-{uuid.uuid4().hex[:8]}"
    cpus = os.cpu_count() or 1
    broker0 = process_cpu_seconds(broker_pid) if broker_pid else None
    children = [subprocess.Popen(
        ["taskset", "-c", str(i % cpus), sys.executable, __file__, "--batch", str(batch),
         "--child", bootstrap, topic, group],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(n)]
    seen = [0] * n
    results: list[dict | None] = [None] * n
    deadline = time.monotonic() + timeout
    try:
        while sum(seen) < total:
            if time.monotonic() > deadline:
                raise SystemExit(f"{n} worker(s): {sum(seen):,} of {total:,} lines in {timeout:.0f} s")
            for i, child in enumerate(children):
                if child.poll() is not None:
                    raise SystemExit(f"worker {i} exited with {child.returncode}")
            ready, _, _ = select.select([c.stdout for c in children], [], [], 1.0)
            for stream in ready:
                i = next(k for k, c in enumerate(children) if c.stdout is stream)
                seen[i] = json.loads(stream.readline())["seen"]
        for child in children:
            child.stdin.write("stop\n")
            child.stdin.flush()
        for i, child in enumerate(children):
            for line in child.stdout:
                msg = json.loads(line)
                if "done" in msg:
                    results[i] = msg["done"]
            if child.wait() != 0:
                raise SystemExit(f"worker {i} exited with {child.returncode}")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    broker_cpu = process_cpu_seconds(broker_pid) - broker0 if broker_pid else None
    started = [r["first"] for r in results if r["first"] is not None]
    span = max(r["last"] for r in results) - min(started)
    return dict(n=n, lines=sum(r["lines"] for r in results), timed=sum(r["timed"] for r in results),
                span=span, workers=results,
                broker_cpu=broker_cpu, load=load_note())


def rate(fig: dict) -> float:
    return fig["timed"] / fig["span"]


def report(fig: dict) -> str:
    rows = [f"{fig['n']} worker(s): {fig['lines']:,} lines fed; {fig['timed']:,} after each one's "
            f"first batch in {fig['span']:.2f} s = {rate(fig):,.0f} lines/s aggregate; "
            + (f"broker CPU {fig['broker_cpu']:.2f} s ({fig['broker_cpu'] / fig['span']:.2f} of a core)"
               if fig["broker_cpu"] is not None else "broker CPU not measured (an external broker)")
            + f"; {fig['load']}"]
    for i, w in enumerate(fig["workers"]):
        busy = w["last"] - w["first"] if w["first"] is not None else 0.0
        speed = f"{w['timed'] / busy:,.0f} lines/s" if busy > 0 else "no lines"
        rows.append(f"  worker {i}: {w['lines']:,} lines, {speed} while busy, CPU {w['cpu']:.2f} s "
                    f"({w['timed'] / max(w['cpu'], 1e-6):,.0f} lines per CPU s), {w['batches']} batches, "
                    f"peak RSS {w['peak_rss_mib']:.0f} MiB" if w["first"] is not None else
                    f"  worker {i}: {w['lines']:,} lines (assigned no partition with data)")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Long enough that the group's start and its rebalance are a small part of the run: at
    # ~400 k lines/s a worker read 400 k lines in a second, and two workers then measured
    # their joining (0.77x of one); 16 hosts so that the keys' hash can give two workers
    # comparable shares of the 4 partitions (4 hosts left one partition empty).
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--hosts", type=int, default=16, help="head nodes (keys) in the topic")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch", type=int, default=BATCH_RECORDS,
                    help="records per fetch (WorkerConfig.batch_records; default: the worker's)")
    ap.add_argument("--broker", help="an existing broker (default: start a private one)")
    ap.add_argument("--workdir", default=str(HERE / "out"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a group may take")
    ap.add_argument("--child", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "GROUP"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(*args.child, args.batch)
        return 0
    if args.partitions < 2:
        ap.error("--partitions must be 2 or more: two workers share a topic by its partitions")

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_broker(args.broker, workdir, "scale") as (bootstrap, broker):
        topic, total = filled_topic(bootstrap, workdir, args.lines, args.hosts, args.partitions,
                                    "scale")
        spread = asyncio.run(lines_per_partition(bootstrap, topic, args.partitions))
        print(f"filled {topic}: {total:,} lines, {args.hosts} hosts over {args.partitions} partitions "
              f"(lines per partition: {', '.join(f'{n:,}' for n in spread)}); {os.cpu_count()} cpus; "
              f"{load_note()}")
        if sum(1 for n in spread if n) < 2:
            print("all hosts hash to one partition: a second worker can only idle (--hosts more)")
        broker_pid = broker.process.pid() if broker else None
        figures = []
        for n in (1, 2):
            figures.append(run_group(n, bootstrap, topic, total, args.batch, broker_pid, args.timeout))
            print(report(figures[-1]), flush=True)
        one, two = map(rate, figures)
        print(f"2 workers against 1: {two / one:.2f}x the aggregate rate "
              f"({two:,.0f} against {one:,.0f} lines/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
