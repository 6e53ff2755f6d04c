"""Helpers of the Kafka worker tests: envelopes of simulated logs, the core's expected
records for them, and reading topics back (committed transactions only)."""

from __future__ import annotations

import asyncio
import heapq
import json
import os
import signal
import threading
import time

from dpmstream.streams.kafka.envelope import decode, encode
from dpmstream.parsers.pipeline import Pipeline

RECEIVED_2011 = "2011-08-12T14:00:00.000000+02:00"


def envelopes(path, host, log_path, received=RECEIVED_2011):
    """(key, value) records of a whole file, as rsyslog would publish it."""
    out, offset = [], 0
    with open(path, "rb") as fh:
        for raw in fh:
            value = encode(host, log_path, offset, received, raw.decode().rstrip("\n"))
            out.append((host.encode(), value))
            offset += len(raw)
    return out


def interleaved(*streams):
    """Several files' records merged by line stamp, each file's own order kept (as they
    reach one host's partition live)."""
    return list(heapq.merge(*streams, key=lambda kv: json.loads(kv[1])["line"][:18]))


def archive_sims(base):
    """Two head nodes' DPM and DPNS logs as archives for `replay --to-kafka`: 40 s of
    open-loop arrivals each, so that most requests end well before the logs do (a worker
    holds a request until both logs are a few seconds past it: parsers/linking.py)."""
    from dpmstream.simulator import SimConfig, simulate

    return {"head01": simulate(SimConfig(rate=8, duration=40, seed=3), base / "a"),
            "head02": simulate(SimConfig(rate=6, duration=40, seed=4, get_fraction=0.3),
                               base / "b")}


def published_records(sim, host, dpm_path="/var/log/dpm/log", dpns_path="/var/log/dpns/log"):
    """A simulated host's DPM and DPNS logs as `replay --to-kafka` publishes them: side by
    side in event time (streams/kafka/replay.py lines_in_event_time)."""
    return interleaved(envelopes(sim.log_path, host, dpm_path),
                       envelopes(sim.dpns_log_path, host, dpns_path))


def core_records(recs):
    """What the core Pipeline makes of the same records before end of input (a streaming
    worker never reaches the end, so still-open requests are not expected)."""
    records: list[dict] = []
    pipeline = Pipeline(records.append)
    for _key, value in recs:
        env = decode(value)
        src = pipeline.source(f"{env.host}|{env.path}", host=env.host, path=env.path,
                              year_hint_ms=env.received_ms)
        src.feed(env.line, received_ms=env.received_ms)
    for src in pipeline.sources.values():
        src.settle()
    pipeline.advance()
    return records


def canonical(records):
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def as_json(records):
    """Records as the worker publishes them (parsers/records.to_json_dict)."""
    from dpmstream.parsers.records import to_json_dict
    return [to_json_dict(r) for r in records]


async def _partitions(bootstrap, topic):
    """The topic's partitions, sorted, as the broker has them now; [] while the topic does
    not exist (a consumer's own metadata would lag a topic created after its start)."""
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-partitions")
    await admin.start()
    try:
        described = await admin.describe_topics()   # all: naming it could auto-create it
    finally:
        await admin.close()
    parts = [p["partition"] for t in described if t["topic"] == topic and not t["error_code"]
             for p in t["partitions"]]
    return [TopicPartition(topic, p) for p in sorted(parts)]


async def _settled(bootstrap, committed_consumer, tps, timeout_s=120.0):
    """Wait until no transaction is open on these partitions: a commit returns to the
    producer before the broker has written its markers, and until then read_committed
    ends before the whole last transaction."""
    from aiokafka import AIOKafkaConsumer
    uncommitted = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted")
    await uncommitted.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hw = await uncommitted.end_offsets(tps)
            lso = await committed_consumer.end_offsets(tps)
            if all(lso[tp] >= hw[tp] for tp in tps):
                return
            await asyncio.sleep(0.02)
    finally:
        await uncommitted.stop()


async def _read_topic(bootstrap, topic, isolation="read_committed", value_of=json.loads):
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await _partitions(bootstrap, topic)
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        if isolation == "read_committed":
            await _settled(bootstrap, consumer, tps)
        end = await consumer.end_offsets(tps)
        out = []
        for _ in range(600):
            if all([await consumer.position(tp) >= end[tp] for tp in tps]):
                break
            batch = await consumer.getmany(timeout_ms=500)
            for msgs in batch.values():
                out += [(m.key, None if m.value is None else value_of(m.value)) for m in msgs]
        return out
    finally:
        await consumer.stop()


def read_topic(bootstrap, topic, isolation="read_committed", value_of=json.loads):
    """Every (key, value) of a topic, values decoded from JSON (or by `value_of`)."""
    return asyncio.run(_read_topic(bootstrap, topic, isolation, value_of))


def produce(bootstrap, topic, records, chunk=None, pause_s=0.0, until=None):
    """Publish (key, value) pairs in order (idempotent producer, acks=all); with `chunk`,
    that many at a time and a pause between: a stream that keeps arriving, so that a fast
    worker cannot be done with it before the test is done with the worker. With `until`
    (a threading.Event), the pauses end once it is set: the rest goes at once."""
    async def main():
        from aiokafka import AIOKafkaProducer
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                    linger_ms=10)
        await producer.start()
        try:
            step = chunk or max(len(records), 1)
            for i in range(0, len(records), step):
                futures = [await producer.send(topic, value, key=key)
                           for key, value in records[i:i + step]]
                await asyncio.gather(*futures)
                if pause_s and not (until is not None and until.is_set()):
                    await asyncio.sleep(pause_s)
        finally:
            await producer.stop()
    asyncio.run(main())


# How long a feeder's records last at the least while the kills go on (two workers'
# start and a kill each, on a machine as loaded as CI's, ~20 on 2 cores), a chunk every
# FEED_PAUSE_S.
FEED_LASTS_S = 120.0
FEED_PAUSE_S = 0.2


def feeder_until_killed(bootstrap, topic, records, kills_done):
    """A thread (not started) publishing `records` a chunk a fifth of a second apart, the
    chunks (300 records at the most) as small as makes them last FEED_LASTS_S, until
    `kills_done` (a threading.Event) is set, then the rest at once. Each chunk is a commit
    or two for a kill to land in, for as long as the kills take: two workers' start
    included. (1,500-record chunks a quarter second apart lasted ~3 s: in CI a first
    worker took them all before its kill. 300 a fifth of a second apart lasted ~23 s for
    a DOME site's 35 k: in a loaded run a first round took 16 s, the second worker found
    the rest published, took it in a burst, and no transaction was seen open.)"""
    chunk = min(300, max(1, int(len(records) * FEED_PAUSE_S / FEED_LASTS_S)))
    return threading.Thread(target=produce, args=(bootstrap, topic, records),
                            kwargs={"chunk": chunk, "pause_s": FEED_PAUSE_S, "until": kills_done})


# How long a commit already sent may take to show (the broker writing its markers) on a
# loaded machine, before a transaction still open is taken to be really open.
COMMIT_LANDS_S = 2.0


def kill_mid_transaction(bootstrap, state_topic, spawn, rounds: int = 2) -> int:
    """`rounds` times: start a worker with spawn() and kill -9 it while a transaction of
    its own is open (records and state written, not committed), after it committed at
    least one of its own. The kills done."""
    kills = 0
    for _round in range(rounds):
        proc = spawn()
        try:
            wait_for_open_transaction(bootstrap, state_topic, proc)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        kills += 1
    return kills


def wait_for_open_transaction(bootstrap, topic, proc, timeout_s=240.0):
    """Return with the worker process `proc` stopped (SIGSTOP) while `topic` holds records of its
    transaction not yet committed (end offset past the last stable offset), after it has
    committed at least one. A fast worker keeps a transaction open for milliseconds: so
    on sight of one it is stopped, and let go again if the transaction ended meanwhile.
    The caller kills or continues (SIGCONT) it."""
    async def main():
        from aiokafka import AIOKafkaConsumer
        uncommitted = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted")
        committed = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        await uncommitted.start()
        await committed.start()
        deadline = time.monotonic() + timeout_s

        def still_waiting():
            assert proc.poll() is None, f"the worker exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"no open transaction on {topic} in {timeout_s} s"

        async def open_now():
            hw, lso = await uncommitted.end_offsets(tps), await committed.end_offsets(tps)
            return sum(lso.values()) > before and any(hw[tp] > lso[tp] for tp in tps)

        try:
            while not (tps := await _partitions(bootstrap, topic)):  # the worker creates it
                still_waiting()
                await asyncio.sleep(0.05)
            before = sum((await committed.end_offsets(tps)).values())
            while True:
                still_waiting()
                if await open_now():
                    os.kill(proc.pid, signal.SIGSTOP)
                    # A commit already on its way may still land: open all along, or let go.
                    settle = time.monotonic() + COMMIT_LANDS_S
                    while (still_open := await open_now()) and time.monotonic() < settle:
                        await asyncio.sleep(0.05)
                    if still_open:
                        return
                    os.kill(proc.pid, signal.SIGCONT)
                await asyncio.sleep(0.002)
        finally:
            await uncommitted.stop()
            await committed.stop()
    asyncio.run(main())


async def committed_offsets_async(bootstrap, group):
    """{partition: committed offset} of a consumer group."""
    from aiokafka.admin import AIOKafkaAdminClient
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-offsets")
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return {tp.partition: meta.offset for tp, meta in offsets.items()}
    finally:
        await admin.close()


def committed_offsets(bootstrap, group):
    return asyncio.run(committed_offsets_async(bootstrap, group))


def committed_total(bootstrap, group) -> int:
    """Offsets the group has committed, summed over partitions; 0 while there is no
    coordinator yet (a group that never committed, or a broker coming back)."""
    try:
        return sum(committed_offsets(bootstrap, group).values())
    except Exception:  # noqa: BLE001
        return 0


def wait_while_worker_runs(cond, timeout: float, what: str, proc, log) -> None:
    """Poll `cond` until it holds; fail with the worker's log tail if the worker process
    exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"worker exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def end_offsets(bootstrap, topic, isolation="read_uncommitted"):
    async def main():
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        await consumer.start()
        try:
            tps = await _partitions(bootstrap, topic)
            return {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()
    return asyncio.run(main())
