"""The input of the worker benchmarks: simulated line envelopes, a fresh lines topic
filled with them, and the broker they run against (bench_worker.py,
bench_workers_scale.py and bench_faust_worker.py share them).

    with bench_broker(args.broker, workdir, "bench") as (bootstrap, broker):
        records = make_records(workdir, lines, hosts)          # [(key, envelope bytes)]
        asyncio.run(fill_topic(bootstrap, topic, partitions, records))
"""

from __future__ import annotations

import asyncio
import os
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def bench_broker(url: str | None, workdir: Path, name: str):
    """(bootstrap, broker) of the broker at `url`, or without one of a private broker
    started in `workdir` (1 GB heap) and destroyed on leaving; broker is None for `url`."""
    from dpmstream.streams.kafka.config import parse_broker

    if url:
        yield parse_broker(url), None
        return
    from dpmstream.commands.stack.kafka import KafkaBroker
    broker = KafkaBroker(workdir / f"kafka-{name}-{os.getpid()}", heap="1g")
    print(f"starting a private broker ({broker.start():.1f} s)")
    try:
        yield broker.bootstrap, broker
    finally:
        broker.destroy()


def make_records(workdir: Path, lines: int, hosts: int) -> list[tuple[bytes, bytes]]:
    """Envelopes of one simulated DPM+DPNS log, repeated under `hosts` host names.

    The log is simulated once per size and kept in `workdir` for the next run.
    """
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario
    from dpmstream.streams.kafka.envelope import encode

    per_host = lines // hosts
    prefix = workdir / f"worker-{per_host}"
    if not Path(f"{prefix}.log").exists():
        simulate(scenario("heavy", requests=None, lines=per_host), prefix)
    dpm, dpns = log_files(workdir, lines, hosts)
    out = []
    for h in range(hosts):
        host = f"head{h:02d}"
        for path, log_path in ((dpm, "/var/log/dpm/log"), (dpns, "/var/log/dpns/log")):
            offset = 0
            with open(path, "rb") as fh:
                for raw in fh:
                    out.append((host.encode(), encode(host, log_path, offset,
                                                      "2011-08-12T14:00:00.000000+02:00",
                                                      raw.decode().rstrip("\n"))))
                    offset += len(raw)
    return out


def log_files(workdir: Path, lines: int, hosts: int) -> tuple[Path, Path]:
    """The DPM and DPNS logs make_records reads (each host's records are both, whole)."""
    prefix = workdir / f"worker-{lines // hosts}"
    return Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log")


async def fill_topic(bootstrap: str, topic: str, partitions: int, records) -> None:
    """Create `topic` with `partitions` partitions and publish `records` to it, keyed."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                max_batch_size=512 * 1024, compression_type="lz4")
    await producer.start()
    try:
        pending = []
        for key, value in records:
            pending.append(await producer.send(topic, value, key=key))
            if len(pending) >= 20_000:   # bound the futures held, keep the pipe full
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


def filled_topic(bootstrap: str, workdir: Path, lines: int, hosts: int, partitions: int,
                 name: str) -> tuple[str, int]:
    """(topic, records): a fresh topic `bench-NAME-...` of `partitions` partitions holding
    make_records' envelopes, which are not kept (a child process reads them back)."""
    import uuid

    records = make_records(workdir, lines, hosts)
    topic = f"bench-{name}-{uuid.uuid4().hex[:8]}"
    asyncio.run(fill_topic(bootstrap, topic, partitions, records))
    return topic, len(records)
