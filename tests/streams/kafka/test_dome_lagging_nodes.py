"""A DOME node whose lines reach the worker late (its rsyslog's backlog after an outage, a
node whose shipper started later) still has its putdones meet their puts: the worker's
partition merges its DOME nodes' lines in event time (parsers/dome_merge.py), within a
horizon a node that stops entirely cannot stretch. Through the real worker on a real
broker, on both engines, against the simulator's truth (docs/kafka-worker.md, "DOME
lines")."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from dpmstream.commands.stack.process import free_port
from dpmstream.parsers.clock import rfc3339_to_ms
from dpmstream.parsers.dome_reassembly import ALLOWANCE_MS
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams.kafka.envelope import decode
from dpmstream.streams.metrics.exporter import PipelineMetrics
from tests.scenarios.test_dome_truth import as_cells, in_truth_order, truth_rows
from tests.scenarios.test_e2e_dome import from_json
from tests.streams.kafka.test_worker import run_worker, sample, topics
from tests.streams.kafka.test_worker_dome import TIMEOUT_S, dome_site, published, site_records
from tests.worker_helpers import (
    committed_total, feeder_until_killed, kill_mid_transaction, produce, read_topic,
    wait_while_worker_runs,
)

pytestmark = pytest.mark.services

HEAD = "dpmhead01"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Five minutes of a head and two disk nodes, as rsyslog ships them to Kafka."""
    return dome_site(tmp_path_factory.mktemp("lagging"), stamp="rfc3339", duration=300.0,
                     rate=2.0, disks=2, seed=57)


def node_lines(site) -> dict[str, list[tuple[int, bytes, bytes]]]:
    """host -> its envelopes (stamp, key, value) in its file's order, and last its tick
    past every timeout: a live node never stops logging, a test's does."""
    end = stamp_of(site_records(site)[-1][1])   # the ticks: at the site's latest stamp
    nodes: dict[str, list] = {}
    for key, value in site_records(site, tick_ms=end + int(TIMEOUT_S * 1000) + 3 * ALLOWANCE_MS):
        nodes.setdefault(key.decode(), []).append((stamp_of(value), key, value))
    return nodes


def stamp_of(value: bytes) -> int:
    return rfc3339_to_ms(decode(value).line.split(" ", 1)[0])


def delivered(nodes, late_ms: dict[str, int]) -> list[tuple[bytes, bytes]]:
    """Every node's lines in the order they reach the topic when node h's reach it
    late_ms[h] after its stamp (each node's own order kept), but each node's first line
    first: the merge waits only for a node it has heard of (a site's nodes are known
    from their first lines on, their state kept across restarts)."""
    order = sorted(((stamp + (late_ms.get(host, 0) if n else 0), n > 0, host != HEAD, n, key, value)
                    for host, rows in nodes.items() for n, (stamp, key, value) in enumerate(rows)))
    return [(key, value) for *_rank, key, value in order]


def truth_puts(site) -> list[dict]:
    """The truth's puts; the worker never reaches an end of input, and the tick, past
    every timeout, ends what the truth ends there by the same rule, as a timeout."""
    rows = truth_rows(site.paths["puts"])
    for row in rows:
        if row["end_reason"] == "input_end":
            row["end_reason"] = "timeout"
    return in_truth_order(rows, "puts")


def worker_puts(broker, t, columns) -> list[dict]:
    records = [from_json(value) for value in published(broker, t)]
    return in_truth_order([as_cells(r, columns) for r in records if r["kind"] == "dome_put"], "puts")


def assert_every_put_as_the_truth(broker, t, site):
    want = truth_puts(site)
    got = worker_puts(broker, t, list(want[0]))
    assert len(got) == len(want)
    differ = [(g, w) for g, w in zip(got, want) if g != w]
    assert not differ, f"{len(differ)} of {len(want)} puts differ, e.g. {differ[0]}"
    joined = sum(bool(w["putdone_disk_time"]) for w in want)
    assert joined > 400, "the site has puts whose disk putdone must be joined"


@pytest.mark.parametrize("late", ["disk-30s", "head-30s", "disk-after-the-head's-run"])
def test_a_nodes_lines_delivered_late_still_meet_their_puts(kafka_broker, site, engine, late):
    """One node's lines reach the topic 30 s of event time after the others' (an rsyslog
    backlog): a disk node's, or the head's (then every disk putdone comes before its
    put); or a disk node's all come after the head's whole run but its first line (an
    outage since its start). Every put is the truth's, its disk putdone joined. The
    horizon is set to cover the lag, as a site whose backlogs last that long would."""
    nodes = node_lines(site)
    disk = sorted(h for h in nodes if h != HEAD)[0]
    if late == "disk-30s":
        recs, horizon_s = delivered(nodes, {disk: 30_000}), 90
    elif late == "head-30s":
        recs, horizon_s = delivered(nodes, {HEAD: 30_000}), 90
    else:   # its first line, every other node's whole run, then the rest of it
        first = [(key, value) for _s, key, value in nodes[disk][:1]]
        rest = [(key, value) for _s, key, value in nodes[disk][1:]]
        others = delivered({h: rows for h, rows in nodes.items() if h != disk}, {})
        recs = first + others[:-2] + rest + others[-2:]   # the others' ticks come last
        horizon_s = 3600
    t = topics("dome-late")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    produce(kafka_broker.bootstrap, t["lines"], recs)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(recs), metrics=metrics, partitions=1,
               reassembly=ReassemblySettings(timeout_s=TIMEOUT_S),
               dome_merge_horizon_s=horizon_s, dome_merge_max_lines=200_000)
    assert_every_put_as_the_truth(kafka_broker, t, site)
    released = sample(metrics, "dpmstream_dome_merge_lines_total", outcome="released")
    assert released > 1000, "the other nodes' lines waited for the late one"
    assert sample(metrics, "dpmstream_dome_merge_held_lines") == 0   # the last ticks let all go


def test_without_the_merge_a_late_head_nodes_puts_lose_their_disk_putdones(kafka_broker, site):
    """The head's lines 30 s late, read in arrival order (a horizon of 0): the disk
    putdones come before their puts, and puts lose them; the loss the merge is there for."""
    nodes = node_lines(site)
    recs = delivered(nodes, {HEAD: 30_000})
    t = topics("dome-late-nomerge")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    produce(kafka_broker.bootstrap, t["lines"], recs)
    run_worker(kafka_broker, t, len(recs), partitions=1,
               reassembly=ReassemblySettings(timeout_s=TIMEOUT_S),
               dome_merge_horizon_s=0)
    want = truth_puts(site)
    got = worker_puts(kafka_broker, t, list(want[0]))
    lost = sum(bool(w["putdone_disk_time"]) for w in want) - sum(bool(g["putdone_disk_time"]) for g in got)
    assert lost >= 20


def test_a_node_that_stops_holds_the_others_no_longer_than_the_horizon(kafka_broker, site, engine):
    """A disk node ships its first two minutes and then nothing (a node gone for good,
    no tick): the head's and the other disk node's lines are held at most the horizon
    (60 s of event time, the default) behind the newest, so every head call that ended
    before the slower live node's last line minus the horizon is out, and the lines let
    go past the stopped node are counted as forced."""
    nodes = node_lines(site)
    disk, other = sorted(h for h in nodes if h != HEAD)
    stop_ms = nodes[disk][0][0] + 120_000
    nodes[disk] = [row for row in nodes[disk] if row[0] < stop_ms]
    for host in (HEAD, other):   # no tick: the stream just goes on, past the horizon
        nodes[host] = nodes[host][:-1]
    recs = delivered(nodes, {})
    t = topics("dome-stopped")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    produce(kafka_broker.bootstrap, t["lines"], recs)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(recs), metrics=metrics, partitions=1,
               reassembly=ReassemblySettings(timeout_s=TIMEOUT_S))
    live_until = min(nodes[HEAD][-1][0], nodes[other][-1][0])
    calls = [from_json(v) for v in published(kafka_broker, t) if v["kind"] == "dome_call"]
    head_calls = {(c["pid"], c["tid"], c["start"]) for c in calls if c["host"] == HEAD}
    truth = [r for r in truth_rows(site.paths["calls"]) if r["host"] == HEAD and r["end"]
             and int(r["end"]) < live_until - ALLOWANCE_MS and int(r["end"]) > stop_ms + 60_000]
    assert len(truth) > 500
    missing = [r for r in truth if (int(r["pid"]), int(r["tid"]), int(r["start"])) not in head_calls]
    assert missing == []
    assert sample(metrics, "dpmstream_dome_merge_lines_total", outcome="forced") > 1000


def _spawn_worker(broker, t, port, log, extra=(), env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "dpmstream", "worker", "--broker", broker.url,
         "--lines-topic", t["lines"], "--requests-topic", t["requests"],
         "--calls-topic", t["calls"], "--group-id", t["group"], "--batch", "300",
         # a transaction every few fetches: many, for the kills to land in
         "--transaction-lines", "600",
         "--timeout", str(TIMEOUT_S), "--metrics-port", str(port), *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize("engine_env", [{}, {"DPMSTREAM_PURE_PYTHON": "1"}], ids=["compiled", "python"])
def test_a_worker_killed_while_it_holds_a_late_nodes_others_loses_and_doubles_nothing(
        kafka_broker_factory, site, tmp_path, engine_env):
    """The head's whole run held waiting for a disk node that comes late (as above), the
    worker killed (-9) twice inside an open transaction while lines are held: the third
    finishes, and every put is the truth's, once. The held lines were in the state topic.

    On a broker of its own: late in a full run the session's broker (a 512 MB heap, a
    thousand partitions by then) answered the restarted worker's sends NOT_ENOUGH_REPLICAS
    for four minutes, in both runs among the other tests, while this test alone passed
    every time."""
    kafka_broker = kafka_broker_factory()
    nodes = node_lines(site)
    disk = sorted(h for h in nodes if h != HEAD)[0]
    first = [(key, value) for _s, key, value in nodes[disk][:1]]
    rest = [(key, value) for _s, key, value in nodes[disk][1:]]
    others = delivered({h: rows for h, rows in nodes.items() if h != disk}, {})
    recs = first + others[:-2] + rest + others[-2:]
    t = topics("dome-late-kill")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    # The lines arrive as the kills go on, in the same order, so each worker finds a
    # transaction to be killed in (all of them at once, a compiled worker under CI load
    # committed every one before the watcher saw it open, and waited 240 s for another).
    head = len(recs) // 5
    produce(kafka_broker.bootstrap, t["lines"], recs[:head])
    kills_done = threading.Event()
    feeder = feeder_until_killed(kafka_broker.bootstrap, t["lines"], recs[head:], kills_done)
    feeder.start()
    state_topic = f"{t['group']}-state"
    extra = ("--dome-merge-horizon", "3660")
    port, log_path = free_port(), tmp_path / "worker.log"
    env = {**os.environ, **engine_env}
    with open(log_path, "ab") as log:
        try:
            kills = kill_mid_transaction(kafka_broker.bootstrap, state_topic,
                                         lambda: _spawn_worker(kafka_broker, t, port, log, extra, env))
        finally:
            kills_done.set()
            feeder.join()
        assert kills == 2
        assert committed_total(kafka_broker.bootstrap, t["group"]) < len(recs)
        proc = _spawn_worker(kafka_broker, t, port, log, extra, env)
        try:
            wait_while_worker_runs(
                lambda: committed_total(kafka_broker.bootstrap, t["group"]) >= len(recs),
                300, "the restarted worker to reach the end of the lines", proc, log_path)
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0
    assert_every_put_as_the_truth(kafka_broker, t, site)
    keys = {key.decode() for key, _value in read_topic(kafka_broker.bootstrap, state_topic)}
    assert any(k.startswith("e|h|") for k in keys), "held lines went to the state topic"
