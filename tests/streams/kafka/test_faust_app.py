"""The worker process (`dpmstream worker`: the Kafka engine hosted by a Faust app) against
a real broker: same records as the core, metrics, exactly once across SIGTERM and kill -9
restarts and a second worker joining, and Faust itself making no Kafka traffic; and,
without a broker, an engine that fails or ends taking the process down with it."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.replay import publish_files
from dpmstream.commands.stack.process import free_port
from tests.worker_helpers import (
    archive_sims, as_json, canonical, committed_offsets, core_records, envelopes, produce, published_records,
    read_topic,
    feeder_until_killed, wait_for_open_transaction,
)

DPM, DPNS = "/var/log/dpm/log", "/var/log/dpns/log"
RESUMED = r"partition (\d): resumed at offset (\d+) with \d+ open requests"


def topics(prefix):
    tag = uuid.uuid4().hex[:8]
    return {"lines": f"{prefix}-lines-{tag}", "requests": f"{prefix}-req-{tag}",
            "calls": f"{prefix}-calls-{tag}", "group": f"{prefix}-group-{tag}"}


def worker_command(broker_url, t, *, batch=1000, port=None, transaction_lines=None):
    command = [sys.executable, "-m", "dpmstream", "worker", "--broker", broker_url,
               "--lines-topic", t["lines"], "--requests-topic", t["requests"],
               "--calls-topic", t["calls"], "--group-id", t["group"], "--batch", str(batch)]
    if transaction_lines is not None:
        command += ["--transaction-lines", str(transaction_lines)]
    return command + ([] if port is None else ["--metrics-port", str(port)])


def spawn(broker, t, log, **kw):
    return subprocess.Popen(worker_command(broker.url, t, **kw), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait_for(cond, timeout, what, proc=None, log_path=None):
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            tail = log_path.read_text()[-3000:] if log_path else ""
            raise AssertionError(f"worker exited ({proc.returncode}) waiting for {what}:\n{tail}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def consumed(broker, group):
    """Lines whose offsets the group committed (0 before its first commit)."""
    try:
        return sum(committed_offsets(broker.bootstrap, group).values())
    except Exception:  # no coordinator for a group that never committed
        return 0


def group_members(bootstrap, group):
    """client ids of the group's members, and the names of all groups on the broker."""
    async def main():
        from aiokafka.admin import AIOKafkaAdminClient
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-groups")
        await admin.start()
        try:
            described = await admin.describe_consumer_groups([group])
            listed = await admin.list_consumer_groups()
        finally:
            await admin.close()
        members = [m["client_id"] for resp in described
                   for g in resp.to_object()["groups"] for m in g["members"]]
        return members, sorted(g[0] for g in listed)
    return asyncio.run(main())


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def worker_output(broker, t):
    """Request and call records, read_committed, with their keys checked."""
    recs = read_topic(broker.bootstrap, t["requests"]) + read_topic(broker.bootstrap, t["calls"])
    for key, value in recs:
        assert key.decode() == (value["token"] if value["kind"] == "request" else value["host"])
    return [value for _key, value in recs]


def assert_same_records(got, want):
    got_c, want_c = Counter(canonical(got)), Counter(canonical(want))
    lost, doubled = sum((want_c - got_c).values()), sum((got_c - want_c).values())
    assert (lost, doubled) == (0, 0), f"{lost} records lost, {doubled} extra or doubled"


def trickled(recs):
    """(head, rest) of two hosts' records: a fifth of each host's lines, then the rest
    with the hosts interleaved (head01 -> partition 0, head02 -> 1), each host in order."""
    by_host = [[r for r in recs if r[0] == h] for h in (b"head01", b"head02")]
    head = [r for part in by_host for r in part[: len(part) // 5]]
    rest = [r for pair in itertools.zip_longest(*(p[len(p) // 5:] for p in by_host))
            for r in pair if r]
    return head, rest


def trickle_feeder(broker, topic, recs, until=None):
    """Publish the head of `trickled(recs)` now; the returned thread (not started)
    publishes the rest in chunks of 1,500 a quarter of a second apart, or with `until`
    (a threading.Event) as worker_helpers.feeder_until_killed does."""
    head, rest = trickled(recs)
    produce(broker.bootstrap, topic, head)
    if until is not None:
        return feeder_until_killed(broker.bootstrap, topic, rest, until)
    return threading.Thread(target=produce, args=(broker.bootstrap, topic, rest),
                            kwargs={"chunk": 1500, "pause_s": 0.25})


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """Two hosts' logs on a 2-partition topic (head01 -> 0, head02 -> 1)."""
    sim = simulate(SimConfig(requests=1200, seed=11), tmp_path_factory.mktemp("faust-big") / "big")
    recs = {h: envelopes(sim.log_path, h, DPM) + envelopes(sim.dpns_log_path, h, DPNS)
            for h in ("head01", "head02")}
    want = as_json(core_records(recs["head01"])) + as_json(core_records(recs["head02"]))
    return recs["head01"] + recs["head02"], want


@pytest.mark.services
def test_worker_records_and_metrics_equal_the_core_replay_and_faust_joins_no_group(
        kafka_broker, tmp_path):
    sims = archive_sims(tmp_path)
    t = topics("faust")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    total, want = 0, []
    for host, sim in sims.items():
        total += publish_files([sim.log_path, sim.dpns_log_path], kafka_broker.url,
                               topic=t["lines"], host=host, year=2011)
        want += as_json(core_records(published_records(sim, host)))
    assert sum(1 for r in want if r["kind"] == "request") > 400
    port = free_port()
    log_path = tmp_path / "worker.log"
    with open(log_path, "ab") as log:
        proc = spawn(kafka_broker, t, log, port=port)
        try:
            wait_for(lambda: consumed(kafka_broker, t["group"]) >= total, 300,
                     "the worker to reach the end of the lines", proc, log_path)
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            members, groups = group_members(kafka_broker.bootstrap, t["group"])
        finally:
            assert stop(proc) == 0
    # One member, the engine's consumer: Faust's own consumer never joined.
    assert members == ["dpmstream-worker"]
    assert [g for g in groups if t["group"] in g] == [t["group"]]
    got = worker_output(kafka_broker, t)
    assert_same_records(got, want)
    finished = sum(1 for r in want if r["kind"] == "request" and r["host"] == "head01")
    served = sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                 if line.startswith("dpm_requests_total{") and 'host="head01"' in line)
    assert served == finished
    lines_parsed = sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                       if line.startswith("dpmstream_lines_total{") and 'result="parsed"' in line)
    assert lines_parsed == total


@pytest.mark.services
def test_worker_stopped_with_sigterm_and_restarted_carries_on_with_nothing_lost_or_doubled(
        kafka_broker, tmp_path, big_log):
    recs, want = big_log
    t = topics("fterm")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    # A fifth now, the rest trickling in: a worker this fast would otherwise be done with
    # a pre-filled topic before the test could stop it.
    feeder = trickle_feeder(kafka_broker, t["lines"], recs)
    logs = [tmp_path / "first.log", tmp_path / "restarted.log"]
    with open(logs[0], "ab") as log:
        proc = spawn(kafka_broker, t, log)
        try:
            wait_for(lambda: consumed(kafka_broker, t["group"]) > 5000, 180,
                     "the first worker's progress", proc, logs[0])
            feeder.start()
        finally:
            assert stop(proc) == 0
    stopped_at = consumed(kafka_broker, t["group"])
    assert stopped_at < len(recs), "the first worker finished before it was stopped"
    with open(logs[1], "ab") as log:
        proc = spawn(kafka_broker, t, log)
        feeder.join()
        try:
            wait_for(lambda: consumed(kafka_broker, t["group"]) >= len(recs), 300,
                     "the restarted worker to reach the end", proc, logs[1])
        finally:
            assert stop(proc) == 0
    resumed = re.findall(RESUMED, logs[1].read_text())
    assert any(int(offset) > 0 for _p, offset in resumed), "the restarted worker did not restore the state"
    assert_same_records(worker_output(kafka_broker, t), want)


@pytest.mark.services
def test_worker_killed_mid_transaction_resumes_with_nothing_lost_or_doubled(
        kafka_broker, tmp_path, big_log):
    recs, want = big_log
    t = topics("fkill")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    # A fifth now, the rest trickling in: on a busy machine a pre-filled topic could be
    # done with before an open transaction is seen.
    kills_done = threading.Event()
    feeder = trickle_feeder(kafka_broker, t["lines"], recs, until=kills_done)
    state_topic = f"{t['group']}-state"
    log_path = tmp_path / "worker.log"
    kills = 0
    try:
        with open(log_path, "ab") as log:
            for _round in range(2):
                # a transaction per fetch or so: many, for the kills to land in (the
                # default, 50,000 lines or 1 s, leaves few and short open ones)
                proc = spawn(kafka_broker, t, log, transaction_lines=1000)
                try:
                    if _round == 0:
                        feeder.start()
                    # Stopped (SIGSTOP) while a transaction of this worker holds state
                    # changes (written, not committed), after it committed one of its own.
                    wait_for_open_transaction(kafka_broker.bootstrap, state_topic, proc)
                finally:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                kills += 1
            kills_done.set()
            assert consumed(kafka_broker, t["group"]) < len(recs), "finished before it could be killed"
            feeder.join()
            proc = spawn(kafka_broker, t, log)
            try:
                wait_for(lambda: consumed(kafka_broker, t["group"]) >= len(recs), 300,
                         "the restarted worker to reach the end", proc, log_path)
            finally:
                assert stop(proc) == 0
    finally:
        kills_done.set()
        if feeder.is_alive():
            feeder.join()
    assert kills == 2
    assert_same_records(worker_output(kafka_broker, t), want)
    # The killed transactions did write state: only read_committed hides it.
    raw = read_topic(kafka_broker.bootstrap, state_topic, "read_uncommitted")
    assert len(raw) > len(read_topic(kafka_broker.bootstrap, state_topic))


@pytest.mark.services
def test_the_worker_logs_in_with_sasl_plain_and_never_shows_the_password(
        kafka_broker_factory, tmp_path):
    """`dpmstream worker` as the compose file runs it: SASL_PLAINTEXT, PLAIN, the
    password from the environment; a broker that checks it (a wrong one: a clear error)."""
    broker = kafka_broker_factory(sasl_users={"dpmstream": "s3cret-pw"})
    sim = simulate(SimConfig(requests=80, seed=3), tmp_path / "s")
    recs = envelopes(sim.log_path, "head01", DPM) + envelopes(sim.dpns_log_path, "head01", DPNS)
    want = as_json(core_records(recs))
    t = topics("fsasl")
    broker.create_topics([t["lines"]], partitions=1)
    produce(broker.bootstrap, t["lines"], recs)
    command = worker_command(broker.sasl_url, t) + [
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
        "--sasl-username", "dpmstream", "-v"]

    refused = subprocess.run(command, capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, DPMSTREAM_KAFKA_PASSWORD="wrong-pw"))
    assert refused.returncode == 1
    assert "Authentication failed" in refused.stderr and "wrong-pw" not in refused.stderr

    log_path = tmp_path / "worker.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env=dict(os.environ, DPMSTREAM_KAFKA_PASSWORD="s3cret-pw"))
        try:
            wait_for(lambda: consumed(broker, t["group"]) >= len(recs), 300,
                     "the worker to commit every line", proc, log_path)
        finally:
            assert stop(proc) == 0
    assert_same_records(worker_output(broker, t), want)
    assert "s3cret-pw" not in log_path.read_text()


@pytest.mark.services
def test_a_second_worker_takes_over_a_partition_mid_stream_with_nothing_lost_or_doubled(
        kafka_broker, tmp_path, big_log):
    """A rebalance: worker B joins while A is working and lines keep coming; B restores
    its partition's state from the state topic and carries on where A stopped."""
    recs, want = big_log
    t = topics("freb")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    feeder = trickle_feeder(kafka_broker, t["lines"], recs)
    logs = {w: tmp_path / f"worker-{w}.log" for w in "ab"}
    procs = {}
    try:
        with open(logs["a"], "ab") as log:
            procs["a"] = spawn(kafka_broker, t, log)
        wait_for(lambda: consumed(kafka_broker, t["group"]) > 0, 180,
                 "worker A to commit", procs["a"], logs["a"])
        feeder.start()
        with open(logs["b"], "ab") as log:
            procs["b"] = spawn(kafka_broker, t, log)
        wait_for(lambda: "resumed at offset" in logs["b"].read_text(), 180,
                 "worker B to take a partition", procs["b"], logs["b"])
        feeder.join()
        wait_for(lambda: consumed(kafka_broker, t["group"]) >= len(recs), 300,
                 "the two workers to reach the end", procs["b"], logs["b"])
    finally:
        if feeder.is_alive():
            feeder.join()
        codes = {w: stop(p) for w, p in procs.items()}
    assert codes == {"a": 0, "b": 0}
    taken = re.findall(RESUMED, logs["b"].read_text())
    assert any(int(offset) > 0 for _p, offset in taken), taken   # mid-stream, from state
    assert_same_records(worker_output(kafka_broker, t), want)


# The engine stand-in of the next test: fails, ends, or runs until stopped.
_HOSTED = """
import asyncio, logging, os, sys, tempfile
from types import SimpleNamespace
logging.basicConfig(level=logging.INFO)
from dpmstream.streams.kafka.faust_app import EngineWorker, host_app

class Engine:
    cfg = SimpleNamespace(group_id="g", bootstrap="127.0.0.1:1")
    stopping = asyncio.Event()
    async def run(self):
        logging.warning("engine running")   # started after faust.Worker took the signals
        await asyncio.sleep(0.2)
        if sys.argv[1] == "fails":
            raise ConnectionError("the broker refused us")
        if sys.argv[1] == "runs":
            await self.stopping.wait()
            logging.warning("engine stopped")
    def stop(self):
        logging.warning("engine asked to stop")
        self.stopping.set()

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
app = host_app(Engine(), datadir=tempfile.mkdtemp(), loop=loop)
EngineWorker(app, loop=loop, quiet=True, workdir=os.getcwd(),
             keep_handlers=list(logging.root.handlers)).execute_from_commandline()
"""


@pytest.mark.parametrize("engine", ["fails", "ends"])
def test_an_engine_that_fails_or_ends_by_itself_ends_the_process_with_a_failure_code(engine):
    done = subprocess.run([sys.executable, "-c", _HOSTED, engine], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "engine asked to stop" in done.stderr
    if engine == "fails":
        assert "worker stopped: ConnectionError: the broker refused us" in done.stderr


def test_sigterm_stops_the_hosted_engine_and_ends_the_process_cleanly(tmp_path):
    log_path = tmp_path / "hosted.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-c", _HOSTED, "runs"], stdout=subprocess.DEVNULL,
                                stderr=log, text=True, stdin=subprocess.DEVNULL)
    try:
        # SIGTERM before Faust's handlers would just kill it: they are set before the app's
        # services start (mode's Worker.on_first_start), so the engine running says they are.
        wait_for(lambda: "engine running" in log_path.read_text(), 60, "the engine to run",
                 proc, log_path)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = log_path.read_text()
    assert proc.returncode == 0, err[-3000:]
    assert "engine asked to stop" in err and "engine stopped" in err
