"""Does the Kafka client's fetch path force a change of client? (issue 30, Deliver 1)

The worker's target is 10x `LC_ALL=C grep -cE` on the same lines. This bench measures the
floor each client puts under any worker: a consumer in read_committed mode (as the worker
reads) that fetches every record of a pre-filled lines topic and does nothing else, then
the same consumer handing each record's value to the envelope decoder the worker calls
(`envelope.decode_fields`, compiled where built). Each child runs pinned to one core, in a
fresh consumer group, timed from its first batch; its CPU time per record is printed beside
grep's per line on the same log files, measured in the same run.

    .venv/bin/python bench/bench_kafka_clients.py [--lines 400000] [--hosts 4] [--broker kafka://H:P]

Clients:
  aiokafka      what the worker uses (the settings of bench_worker.py's bare consumer)
  confluent     confluent-kafka (librdkafka, C), `consume(num_messages=...)`, with the
                worker's consumer settings (lines_fetch.consumer_settings)

Without --broker a private broker is started in --workdir (make install-kafka first).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from topic_fill import bench_broker, filled_topic, log_files
from yardstick import GREP_ENV, ONE_CORE, grep_command, load_note, pinning_note, run_measured

HERE = Path(__file__).resolve().parent
CLIENTS = ("aiokafka", "aiokafka+decode", "confluent", "confluent+decode")


def decoder(decode: bool):
    """What is done with a record's value: nothing, or the worker's envelope decode."""
    if not decode:
        return None
    from dpmstream.streams.kafka.envelope import compiled_decode_fields, decode_fields

    return compiled_decode_fields or decode_fields


def run_aiokafka(bootstrap: str, topic: str, total: int, batch: int, decode) -> dict:
    from aiokafka import AIOKafkaConsumer
    from dpmstream.streams.kafka.lines_fetch import FETCH_MAX_WAIT_MS

    async def main():
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=f"bench-clients-{uuid.uuid4().hex[:8]}",
            enable_auto_commit=False, isolation_level="read_committed",
            auto_offset_reset="earliest", max_partition_fetch_bytes=2 << 20,
            fetch_max_bytes=32 << 20, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
        await consumer.start()
        try:
            seen = seen0 = 0
            while seen < total:
                for messages in (await consumer.getmany(timeout_ms=200, max_records=batch)).values():
                    if seen0 == 0:
                        seen0 = len(messages)
                        t0, cpu0 = time.perf_counter(), time.process_time()
                    elif decode is not None:
                        for msg in messages:
                            decode(msg.value)
                    seen += len(messages)
            return dict(records=seen - seen0, wall=time.perf_counter() - t0,
                        cpu=time.process_time() - cpu0)
        finally:
            await consumer.stop()

    return asyncio.run(main())


def run_confluent(bootstrap: str, topic: str, total: int, batch: int, decode) -> dict:
    from confluent_kafka import Consumer
    from dpmstream.streams.kafka.lines_fetch import consumer_settings

    consumer = Consumer(consumer_settings(bootstrap, f"bench-clients-{uuid.uuid4().hex[:8]}", {}))
    consumer.subscribe([topic])
    try:
        seen = seen0 = 0
        while seen < total:
            messages = consumer.consume(num_messages=batch, timeout=0.2)
            messages = [m for m in messages if m.error() is None]
            if not messages:
                continue
            if seen0 == 0:
                seen0 = len(messages)
                t0, cpu0 = time.perf_counter(), time.process_time()
            elif decode is not None:
                for msg in messages:
                    decode(msg.value())
            seen += len(messages)
        return dict(records=seen - seen0, wall=time.perf_counter() - t0,
                    cpu=time.process_time() - cpu0)
    finally:
        consumer.close()


def child(client: str, bootstrap: str, topic: str, total: int, batch: int) -> dict:
    """One client in a child process pinned to one core: its figures, or why it was skipped."""
    out = subprocess.run([*ONE_CORE, sys.executable, __file__, "--child", client, bootstrap,
                          topic, str(total), "--batch", str(batch)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"skipped": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each client (median printed)")
    ap.add_argument("--broker", help="an existing broker (default: start a private one)")
    ap.add_argument("--workdir", default=str(HERE / "out"))
    ap.add_argument("--child", nargs=4, metavar=("CLIENT", "BOOTSTRAP", "TOPIC", "TOTAL"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        client, bootstrap, topic, total = args.child
        run = run_confluent if client.startswith("confluent") else run_aiokafka
        if run is run_confluent and importlib.util.find_spec("confluent_kafka") is None:
            sys.exit("confluent-kafka is not installed (.venv/bin/pip install confluent-kafka)")
        print(json.dumps(run(bootstrap, topic, int(total), args.batch,
                             decoder(client.endswith("+decode")))))
        return 0

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_broker(args.broker, workdir, "clients") as (bootstrap, _):
        topic, total = filled_topic(bootstrap, workdir, args.lines, args.hosts, args.hosts,
                                    "clients")
        print(f"filled {topic}: {total:,} records; {pinning_note()}; {load_note()}")
        grep_files = [*log_files(workdir, args.lines, args.hosts)] * args.hosts
        grep = grep_command(grep_files)
        greps, figures = [], {c: [] for c in CLIENTS}
        for _ in range(args.rounds):   # grep alternated with each client, round by round
            greps.append(run_measured(grep, GREP_ENV).cpu / total)
            for client in CLIENTS:
                figures[client].append(child(client, bootstrap, topic, total, args.batch))
        grep_us = statistics.median(greps) * 1e6
        print(f"LC_ALL=C grep -cE on the same lines: {grep_us:.3f} us CPU a line "
              f"(median of {args.rounds}); {load_note()}")
        print("| client | records/s (wall) | us CPU a record | x grep (CPU) |")
        print("|---|---|---|---|")
        for client, figs in figures.items():
            done = [f for f in figs if "skipped" not in f]
            if not done:
                print(f"| {client} | skipped: {figs[0]['skipped']} | | |")
                continue
            us = statistics.median(f["cpu"] / f["records"] for f in done) * 1e6
            rate = statistics.median(f["records"] / f["wall"] for f in done)
            print(f"| {client} | {rate:,.0f} | {us:.2f} | {us / grep_us:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
