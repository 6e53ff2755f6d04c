"""The Kafka worker against a real broker: same records as the core, exactly once."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaError

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.replay import publish_files
from dpmstream.streams.kafka.partitions import PartitionOwners
from dpmstream.streams.kafka.worker import Worker, WorkerConfig
from dpmstream.streams.metrics.exporter import PipelineMetrics
from dpmstream.commands.stack.process import free_port
from tests.worker_helpers import (
    archive_sims, as_json, canonical, committed_offsets, committed_offsets_async, core_records,
    end_offsets,
    envelopes, produce, published_records,
    read_topic, kill_mid_transaction, feeder_until_killed,
)

pytestmark = pytest.mark.services

DPM, DPNS = "/var/log/dpm/log", "/var/log/dpns/log"


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    base = tmp_path_factory.mktemp("worker-sims")
    return {
        "head01": simulate(SimConfig(requests=300, seed=3), base / "a"),
        "head02": simulate(SimConfig(requests=200, seed=4, get_fraction=0.3), base / "b"),
    }


def topics(prefix="w"):
    tag = uuid.uuid4().hex[:8]
    return {"lines": f"{prefix}-lines-{tag}", "requests": f"{prefix}-req-{tag}",
            "calls": f"{prefix}-calls-{tag}", "group": f"{prefix}-group-{tag}"}


def host_records(sim, host):
    """A host's DPM then DPNS log, file by file (as rsyslog ships a backlog)."""
    return envelopes(sim.log_path, host, DPM) + envelopes(sim.dpns_log_path, host, DPNS)


def expected(sims, records=host_records):
    """The core's records of each host's lines, in the order `records` gives them."""
    out = []
    for host, sim in sims.items():
        out += as_json(core_records(records(sim, host)))
    return out


def worker_output(broker, t):
    recs = read_topic(broker.bootstrap, t["requests"]) + read_topic(broker.bootstrap, t["calls"])
    for key, value in recs:  # requests keyed by token, calls by host
        assert key.decode() == (value["token"] if value["kind"] == "request" else value["host"])
    return [value for _key, value in recs]


def run_worker(broker, t, total_lines, *, metrics=None, partitions=4, timeout=240.0, **kw):
    """Run a worker in this process until the group has committed every record on the lines
    topic now, then stop it; it must have fed `total_lines` records, each once. Waiting on
    the commit, not on the count fed: a count that ran ahead (it once counted the lines fed
    again after a partition was taken again) stopped the worker before its last batch."""
    cfg = WorkerConfig(bootstrap=broker.bootstrap, lines_topic=t["lines"],
                       requests_topic=t["requests"], calls_topic=t["calls"],
                       group_id=t["group"], partitions=partitions, **kw)
    worker = Worker(cfg, metrics)
    # Taken once, before: a topic whose partitions the broker does not list for a moment
    # (a loaded broker) must not read as a topic with nothing left to commit.
    end = end_offsets(broker.bootstrap, t["lines"])
    assert sum(end.values()) >= total_lines, f"the lines topic holds {end}"

    async def main():
        task = asyncio.ensure_future(worker.run())
        deadline = time.monotonic() + timeout
        while not task.done():
            try:
                committed = await committed_offsets_async(broker.bootstrap, t["group"])
            except KafkaError as exc:   # no group coordinator yet
                committed = {"not yet": exc}
            if all(committed.get(p, 0) >= off for p, off in end.items()):
                break
            assert time.monotonic() < deadline, (
                f"committed {committed} of {end}; worker fed {worker.lines_seen}/{total_lines}")
            await asyncio.sleep(0.2)
        worker.stop()
        await task

    asyncio.run(main())
    assert worker.lines_seen == total_lines
    return worker


def sample(metrics, name, **labels):
    value = metrics.registry.get_sample_value(name, labels)
    return 0 if value is None else value


def test_records_on_the_output_topics_equal_the_core_replay_of_the_same_logs(kafka_broker, tmp_path):
    sims = archive_sims(tmp_path)
    t = topics()
    kafka_broker.create_topics([t["lines"]], partitions=4)
    n = 0
    for host, sim in sims.items():
        n += publish_files([sim.log_path, sim.dpns_log_path], kafka_broker.url, topic=t["lines"],
                           host=host, year=2011)
    want = expected(sims, published_records)
    assert sum(1 for r in want if r["kind"] == "request") > 400
    assert sum(1 for r in want if r["kind"] == "request" and r["ns_calls"]) > 300
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, n, metrics=metrics)
    got = worker_output(kafka_broker, t)
    assert len(got) == len(want)
    assert canonical(got) == canonical(want)
    finished = sum(1 for r in want if r["kind"] == "request" and r["host"] == "head01")
    assert sum(sample(metrics, "dpm_requests_total", host="head01", op="put", status=s)
               for s in ("success", "failed", "aborted", "incomplete")) == finished


def test_lines_delivered_twice_are_counted_once(kafka_broker, sims):
    t = topics("dup")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    recs = host_records(sims["head01"], "head01")
    # rsyslog resends: a stretch in the middle arrives again, then everything again.
    produce(kafka_broker.bootstrap, t["lines"], recs[:5000] + recs[3000:] + recs)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(recs) * 2 + 2000, metrics=metrics)
    got = worker_output(kafka_broker, t)
    assert canonical(got) == canonical(as_json(core_records(recs)))
    assert sample(metrics, "dpmstream_duplicate_lines_total", host="head01") == len(recs) + 2000
    parsed = sum(sample(metrics, "dpmstream_lines_total", host="head01", daemon=d, result="parsed")
                 for d in ("dpm", "dpns"))
    assert parsed == len(recs)


def test_bad_records_are_counted_as_malformed_and_do_not_stop_the_worker(kafka_broker, sims):
    t = topics("bad")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    recs = host_records(sims["head02"], "head02")
    bad = [(b"head02", b"{not json"), (b"head02", b'{"host": "head02"}'), (b"head02", b"[]"),
           (b"head02", None)]
    # A line that is no DPM line, at an offset between two real ones.
    between = json.loads(recs[100][1])["offset"] - 1
    garbage_line = json.dumps({"host": "head02", "path": DPM, "offset": between,
                               "received": "2011-08-12T14:00:00Z", "line": "\x00garbage"}).encode()
    produce(kafka_broker.bootstrap, t["lines"], bad + recs[:100] + [(b"head02", garbage_line)] + recs[100:])
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(recs) + len(bad) + 1, metrics=metrics)
    assert sample(metrics, "dpmstream_lines_total", host="head02", daemon="unknown",
                  result="malformed") == len(bad)
    malformed = sum(sample(metrics, "dpmstream_lines_total", host="head02", daemon=d, result="malformed")
                    for d in ("dpm", "unknown"))
    assert malformed == len(bad) + 1
    good = as_json(core_records(recs))
    assert canonical(worker_output(kafka_broker, t)) == canonical(good)


def test_a_second_worker_takes_over_partitions_without_losing_or_doubling_records(kafka_broker, sims):
    t = topics("rebal")
    kafka_broker.create_topics([t["lines"]], partitions=4)
    recs = {h: host_records(sim, h) for h, sim in sims.items()}
    # Four hosts over four partitions (head01 -> 2, head02 -> 3, head04 -> 1, head09 -> 0).
    recs["head04"] = [(b"head04", v.replace(b'"host":"head02"', b'"host":"head04"')) for _k, v in recs["head02"]]
    recs["head09"] = [(b"head09", v.replace(b'"host":"head01"', b'"host":"head09"')) for _k, v in recs["head01"]]
    # Half of each host's lines now, the rest once the second worker holds partitions: on
    # a busy machine the first worker could otherwise finish before the second joins.
    for host_recs in recs.values():
        produce(kafka_broker.bootstrap, t["lines"], host_recs[:len(host_recs) // 2])
    total = sum(len(r) for r in recs.values())
    want = [r for host_recs in recs.values() for r in as_json(core_records(host_recs))]

    def make():
        return Worker(WorkerConfig(bootstrap=kafka_broker.bootstrap, lines_topic=t["lines"],
                                   requests_topic=t["requests"], calls_topic=t["calls"],
                                   group_id=t["group"], batch_records=200))

    first, second = make(), make()

    async def main():
        a = asyncio.ensure_future(first.run())
        while first.lines_seen == 0:
            assert not a.done(), a.result()
            await asyncio.sleep(0.02)
        b = asyncio.ensure_future(second.run())   # joins: the group rebalances
        deadline = time.monotonic() + 180
        while not second.parts:
            assert not b.done(), b.result()
            assert time.monotonic() < deadline, "the second worker was never given a partition"
            await asyncio.sleep(0.05)
        for host_recs in recs.values():
            await asyncio.to_thread(produce, kafka_broker.bootstrap, t["lines"],
                                    host_recs[len(host_recs) // 2:])
        deadline = time.monotonic() + 300
        while True:
            done = await committed_offsets_async(kafka_broker.bootstrap, t["group"])
            if sum(done.values()) >= total:
                break
            assert time.monotonic() < deadline, f"stuck at {done}"
            await asyncio.sleep(0.2)
        first.stop()
        second.stop()
        await asyncio.gather(a, b)

    asyncio.run(main())
    assert second.lines_seen > 0, "the second worker never got a partition"
    got = worker_output(kafka_broker, t)
    assert len(got) == len(want)
    assert canonical(got) == canonical(want)


def _spawn_worker(broker, t, metrics_port, log):
    return subprocess.Popen(
        [sys.executable, "-m", "dpmstream", "worker", "--broker", broker.url,
         "--lines-topic", t["lines"], "--requests-topic", t["requests"],
         "--calls-topic", t["calls"], "--group-id", t["group"], "--batch", "400",
         # transactions of a few fetches each: many, for the kills to land in
         "--transaction-lines", "1000", "--metrics-port", str(metrics_port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_worker_killed_mid_transaction_resumes_with_no_record_lost_or_doubled(kafka_broker, tmp_path):
    sim = simulate(SimConfig(requests=1200, seed=11), tmp_path / "big")
    t = topics("kill")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    recs = host_records(sim, "head01")
    # Two hosts, so both partitions carry lines (head01 -> 0, head02 -> 1 of 2).
    recs2 = host_records(sim, "head02")
    total = len(recs) + len(recs2)
    want = as_json(core_records(recs)) + as_json(core_records(recs2))
    # A fifth of the lines first, the rest keeps arriving while the worker is killed: a
    # worker this fast would otherwise be done with a pre-filled topic before its kill.
    head, head2 = len(recs) // 5, len(recs2) // 5
    produce(kafka_broker.bootstrap, t["lines"], recs[:head] + recs2[:head2])
    rest = [r for pair in itertools.zip_longest(recs[head:], recs2[head2:]) for r in pair if r]
    kills_done = threading.Event()
    feeder = feeder_until_killed(kafka_broker.bootstrap, t["lines"], rest, kills_done)
    feeder.start()
    state_topic = f"{t['group']}-state"
    log = open(tmp_path / "worker.log", "ab")
    port = free_port()
    kills_mid_transaction = 0
    try:
        try:
            kills_mid_transaction = kill_mid_transaction(
                kafka_broker.bootstrap, state_topic, lambda: _spawn_worker(kafka_broker, t, port, log))
        finally:
            kills_done.set()
        done = committed_offsets(kafka_broker.bootstrap, t["group"])
        assert sum(done.values()) < total, "the worker finished before it could be killed"
        # A last worker finishes the topic; it serves the metrics meanwhile.
        feeder.join()
        proc = _spawn_worker(kafka_broker, t, port, log)
        try:
            _wait(lambda: sum(committed_offsets(kafka_broker.bootstrap, t["group"]).values()) >= total,
                  300, "the restarted worker to reach the end of the lines")
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            # Lines the earlier workers left: of head01 (partition 0), head02 (1) or both,
            # as the kills fell (the second worker may have finished one partition).
            assert re.search(r'dpmstream_lines_total\{daemon="(?:dpm|dpns)",host="head0[12]",'
                             r'result="parsed"\} [1-9]', body), body[-2000:]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    finally:
        feeder.join()
        log.close()
    got = worker_output(kafka_broker, t)
    assert kills_mid_transaction == 2
    assert len(got) == len(want), "records lost or doubled"
    assert canonical(got) == canonical(want)
    # The aborted transactions did write records: only read_committed hides them.
    raw = read_topic(kafka_broker.bootstrap, state_topic, "read_uncommitted")
    assert len(raw) > len(read_topic(kafka_broker.bootstrap, state_topic))


class _CommitsThatFail(PartitionOwners):
    """The real owners, whose producers' commits fail when their count is in `failing`
    (as when the broker connection drops at the commit): the transaction is aborted on the
    broker, and the worker must take the partition again from its last committed state."""

    def __init__(self, config, state_topic, failing):
        super().__init__(config, state_topic)
        self.failing = set(failing)
        self.commits = 0
        self.failed = 0

    async def take(self, p):
        part, states = await super().take(p)
        producer = self.producers[p]
        commit = producer.commit_transaction

        async def commit_or_fail():
            self.commits += 1
            if self.commits in self.failing:
                self.failed += 1
                raise KafkaConnectionError("connection dropped at commit (injected)")
            return await commit()

        producer.commit_transaction = commit_or_fail
        return part, states


def run_with_owners(broker, sims, prefix, make_owners, metrics=None):
    """Both simulated hosts' lines on a 2-partition topic, then one worker whose
    PartitionOwners make_owners(config, state topic) gives, until every line is committed.
    Returns the worker, its owners, and the topics."""
    t = topics(prefix)
    broker.create_topics([t["lines"]], partitions=2)
    recs = {h: host_records(sim, h) for h, sim in sims.items()}
    for host_recs in recs.values():
        produce(broker.bootstrap, t["lines"], host_recs)
    total = sum(len(r) for r in recs.values())
    cfg = WorkerConfig(bootstrap=broker.bootstrap, lines_topic=t["lines"],
                       requests_topic=t["requests"], calls_topic=t["calls"],
                       group_id=t["group"], batch_records=300,
                       transaction_lines=300)   # commits every few fetches: enough to fail some
    worker = Worker(cfg, metrics)
    worker.owners = owners = make_owners(cfg, cfg.state)

    async def main():
        task = asyncio.ensure_future(worker.run())
        deadline = time.monotonic() + 240
        while worker.batches == 0:   # the group exists once a batch is committed
            assert not task.done(), task.result()
            assert time.monotonic() < deadline, "the worker never committed a batch"
            await asyncio.sleep(0.05)
        while sum((await committed_offsets_async(broker.bootstrap, t["group"])).values()) < total:
            assert not task.done(), task.result()
            assert time.monotonic() < deadline, "the worker never committed every line"
            await asyncio.sleep(0.1)
        worker.stop()
        await task

    asyncio.run(main())
    return worker, owners, t


def test_a_transaction_that_fails_to_commit_is_redone_with_no_record_lost_or_doubled(kafka_broker, sims):
    metrics = PipelineMetrics()
    # Early, middle and back to back: a failed commit while the next batch is in hand.
    worker, owners, t = run_with_owners(
        kafka_broker, sims, "fail", lambda cfg, state: _CommitsThatFail(cfg, state, failing={2, 9, 10, 17}),
        metrics)
    total = sum(len(host_records(sim, h)) for h, sim in sims.items())
    assert owners.failed == 4
    assert worker.lines_fed_again > 0, "no batch was fed twice: no commit failed mid-stream"
    assert worker.lines_seen == total   # each record counted once, however often fed
    got = worker_output(kafka_broker, t)
    want = expected(sims)
    assert len(got) == len(want), "records lost or doubled"
    assert canonical(got) == canonical(want)
    # The metrics count only committed batches: the lines of the batch fed while the
    # failed one was committing are counted once, when fed again.
    for host, sim in sims.items():
        parsed = sum(sample(metrics, "dpmstream_lines_total", host=host, daemon=d, result="parsed")
                     for d in ("dpm", "dpns"))
        assert parsed == len(host_records(sim, host))
    counted = sum(smp.value for family in metrics.registry.collect()
                  for smp in family.samples if smp.name == "dpm_requests_total")
    assert counted == sum(1 for r in want if r["kind"] == "request")


class _BrokerAwayAtTheRetake(_CommitsThatFail):
    """Commits that fail, and the takes numbered in `failing_takes` failing as a broker
    that cannot be reached fails them: the worker must retry the take, not end."""

    def __init__(self, config, state_topic, failing, failing_takes):
        super().__init__(config, state_topic, failing)
        self.failing_takes = set(failing_takes)
        self.takes = 0
        self.failed_takes = 0

    async def take(self, p):
        self.takes += 1
        if self.takes in self.failing_takes:
            self.failed_takes += 1
            raise KafkaConnectionError("Unable to bootstrap from 127.0.0.1 (injected)")
        return await super().take(p)


def test_a_partition_whose_retake_fails_while_the_broker_is_away_is_taken_again_later(kafka_broker, sims):
    # Takes 1 and 2 are the assignment's; commit 3 fails, and the two takes after it too.
    _worker, owners, t = run_with_owners(
        kafka_broker, sims, "retake",
        lambda cfg, state: _BrokerAwayAtTheRetake(cfg, state, failing={3}, failing_takes={3, 4}))
    assert (owners.failed, owners.failed_takes) == (1, 2)
    got = worker_output(kafka_broker, t)
    want = expected(sims)
    assert len(got) == len(want), "records lost or doubled"
    assert canonical(got) == canonical(want)
