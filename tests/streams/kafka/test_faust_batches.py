"""The batching Faust transport against a real broker: a batched topic reaches the agent
one event per fetched partition batch, other topics one event per record, the offsets
committed pass whole batches, and a stopping worker exits cleanly."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections import defaultdict

import pytest

from tests.worker_helpers import end_offsets, produce

pytestmark = pytest.mark.services

# A Faust app on the dpmstream:// transport with an agent on each topic; it writes one
# JSON line per event it gets to a file (Faust's worker takes over stdout) and stops
# itself (SIGTERM) once it has seen every record.
_APP = """
import asyncio, json, os, signal, sys, tempfile
import faust
from dpmstream.streams.kafka.faust_batches import SCHEME, BatchMessage

bootstrap, batched, plain, group, total, out_path = sys.argv[1:7]
out = open(out_path, "w")
app = faust.App(group, broker=f"{SCHEME}://{bootstrap}", processing_guarantee="at_least_once",
                store="memory://", datadir=tempfile.mkdtemp(), web_enabled=False,
                web_bind="127.0.0.1", consumer_auto_offset_reset="earliest",
                topic_replication_factor=1, broker_max_poll_records=500,
                broker_session_timeout=6.0, broker_heartbeat_interval=2.0)
app.batched_topics = frozenset({batched})
seen = [0]

def report(event):
    m = event.message
    records = m.records if isinstance(m, BatchMessage) else [m]
    seen[0] += len(records)
    print(json.dumps({"topic": m.topic, "partition": m.partition, "offset": m.offset,
                      "batch": isinstance(m, BatchMessage),
                      "offsets": [r.offset for r in records]}), file=out, flush=True)
    if seen[0] == int(total):
        os.kill(os.getpid(), signal.SIGTERM)

async def agent(stream):
    async for event in stream.events():
        report(event)

for name in (batched, plain):
    app.agent(app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                        value_serializer="raw"), name=f"agent-{name}")(agent)
faust.Worker(app, loglevel="WARNING", quiet=True, workdir=os.getcwd()).execute_from_commandline()
"""


def committed(bootstrap, group):
    async def main():
        from aiokafka.admin import AIOKafkaAdminClient
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
            return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}
        finally:
            await admin.close()
    return asyncio.run(main())


def test_batched_topic_arrives_in_partition_batches_and_commits_past_them(kafka_broker, tmp_path):
    tag = uuid.uuid4().hex[:8]
    batched, plain, group = f"fb-lines-{tag}", f"fb-other-{tag}", f"fb-group-{tag}"
    kafka_broker.create_topics([batched], partitions=2)
    kafka_broker.create_topics([plain], partitions=1)
    lines = [(f"head{i % 2}".encode(), f"line {i}".encode()) for i in range(3000)]
    others = [(b"k", f"other {i}".encode()) for i in range(40)]
    produce(kafka_broker.bootstrap, batched, lines)
    produce(kafka_broker.bootstrap, plain, others)

    proc = subprocess.run(
        [sys.executable, "-c", _APP, kafka_broker.bootstrap, batched, plain, group,
         str(len(lines) + len(others)), str(tmp_path / "events")],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / "events").read_text().splitlines()]

    batches = [e for e in events if e["topic"] == batched]
    assert all(e["batch"] for e in batches)
    assert len(batches) < len(lines) / 10     # batches, not one event per record
    delivered = defaultdict(list)
    for e in batches:
        offsets = e["offsets"]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # in order, no hole
        assert e["offset"] == offsets[-1]       # the batch message stands for its last record
        delivered[e["partition"]] += offsets
    ends = end_offsets(kafka_broker.bootstrap, batched)
    assert {p: sorted(o) for p, o in delivered.items()} == {p: list(range(n)) for p, n in ends.items()}

    singles = [e for e in events if e["topic"] == plain]
    assert [e["offsets"] for e in singles] == [[n] for n in range(len(others))]
    assert not any(e["batch"] for e in singles)

    # Acking a batch acks its records: a stopped worker has committed past all of them.
    got = committed(kafka_broker.bootstrap, group)
    assert {p: got[(batched, p)] for p in ends} == ends
    assert got[(plain, 0)] == len(others)
