"""End to end for a DOME site on the real services: a simulated head node and its disk
nodes hand dmlite's messages to syslog (a private socket each, standing in for /dev/log,
other programs' messages among them); each node's private rsyslog, with the DOME drop-in
(rsyslog/dpmstream-dome.conf, rendered for a private directory), writes them to its
dmlite-rfc3339.log and ships that file to a private Kafka broker; one `dpmstream worker`
subprocess reads the lines topic. Its DOME records are the simulator's truth, compared as
tests/scenarios/test_dome_truth.py compares the reassembler's."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest

from dpmstream.commands.stack.worker_process import WorkerProcess
from dpmstream.parsers import dome_records
from dpmstream.parsers.dome_reassembly import ALLOWANCE_MS
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from tests.commands.stack.test_rsyslog_dome import as_datagram, dome_node, send, stamp_ms
from tests.e2e_helpers import group_caught_up, lines_on_topic, service_logs
from tests.scenarios.test_dome_checksums_truth import alone, key
from tests.scenarios.test_dome_truth import KIND, as_cells, in_truth_order, truth_rows
from tests.worker_helpers import read_topic

pytestmark = pytest.mark.services

SETTLE_TIMEOUT = 180.0


SPEED = 4.0                # the nodes log this many times faster than real time


def site_config() -> DomeConfig:
    """Minutes of a head and two disk nodes, one of them down and back (a new pid), the
    head restarting (PUTCOUNT from 1): about 1,200 calls and 300 puts."""
    return DomeConfig(seed=23, duration=150.0, rate=2.0, disks=2, envelope="messages",
                      stamp="rfc3339", disk_down_at=40.0, restart_at=100.0, gap_at=None,
                      timeout=60.0, foreign_rate=0.2)


def log_as_the_nodes_do(bootstrap, topic, socks, copies, timeline):
    """Each message to its node's syslog socket when its stamp comes, SPEED times faster
    than real time. A put's lines come from two nodes, through two rsyslogs, and the
    reassembly takes them within its allowance (2 s of event time) of each other
    (docs/kafka-worker.md, "DOME"): so each node's first message is sent alone and waited
    for on the topic (its rsyslog connected), and the nodes then log side by side, as a
    site's nodes do."""
    started: set[str] = set()
    first_ms, t0 = timeline[0][0], time.monotonic()
    for ms, _n, host, line in timeline:
        delay = t0 + (ms - first_ms) / 1000 / SPEED - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        send(socks[host], [as_datagram(line)])
        if host not in started and " dmlite " in line:
            started.add(host)
            deadline = time.monotonic() + 60
            while not any(path == str(copies[host]) for path, _ in lines_on_topic(bootstrap, topic)):
                assert time.monotonic() < deadline, f"{host}'s rsyslog shipped nothing in 60 s"
                time.sleep(0.1)
            first_ms, t0 = ms, time.monotonic()


def tick(host_lines: list[str], at_ms: int) -> str:
    """A dmlite message of the node's last process, `at_ms`: a node never stops logging, a
    test's does; this moves the node's event time past every timeout, as its next message
    would. It frames no call (a thread of its own, no call line) and gives no record."""
    last = next(line for line in reversed(host_lines) if " dmlite " in line)
    stamp, host, program_pid, _ = last.split(" ", 3)
    when = dt.datetime.fromtimestamp(at_ms / 1000, dt.timezone.utc).isoformat(timespec="microseconds")
    return f"{when} {host} {program_pid} {{1}}[1] dmlite dome tick : end of the test's log"


def from_json(value: dict) -> dict:
    """A DOME record as the worker published it (times in seconds) -> integer ms."""
    _cols, ms_fields = dome_records.KINDS[value["kind"]]
    return {k: round(v * 1000) if k in ms_fields and v is not None else v for k, v in value.items()}


def test_a_dome_sites_messages_come_out_of_the_worker_as_the_truths_records(
        tmp_path, kafka_broker, rsyslog_factory):
    cfg = site_config()
    site = simulate_dome(cfg, tmp_path / "sim")
    tag = uuid.uuid4().hex[:8]
    lines_topic, requests_topic, calls_topic = f"dome-lines-{tag}", f"dome-req-{tag}", f"dome-calls-{tag}"
    group = f"dome-group-{tag}"
    # A DOME site's nodes in one partition: the reassembly joins a disk node's putdone to
    # the head's put (docs/kafka-worker.md, "DOME").
    kafka_broker.create_topics([lines_topic], partitions=1)
    worker = WorkerProcess(tmp_path / "worker", kafka_broker.url, extra_args=[
        "--lines-topic", lines_topic, "--requests-topic", requests_topic, "--calls-topic", calls_topic,
        "--group-id", group, "--partitions", "1", "--timeout", str(cfg.timeout)])
    worker.start()
    shippers = []
    try:
        texts = {host: log.read_text().splitlines() for host, log in site.logs.items()}
        end_ms = max(stamp_ms(lines[-1]) for lines in texts.values())
        ticks = {host: tick(lines, end_ms + int(cfg.timeout * 1000) + 3 * ALLOWANCE_MS)
                 for host, lines in texts.items()}
        socks, copies = {}, {}
        for host in texts:
            shipper, socks[host], copies[host] = dome_node(rsyslog_factory, tmp_path, host, lines_topic)
            shippers.append(shipper)
        # Every node's messages in the order of their stamps, as the nodes log them.
        timeline = sorted(((stamp_ms(line), n, host, line) for host, lines in texts.items()
                           for n, line in enumerate(lines)), key=lambda t: (t[0], t[1]))
        log_as_the_nodes_do(kafka_broker.bootstrap, lines_topic, socks, copies, timeline)
        for host, line in ticks.items():
            send(socks[host], [as_datagram(line)])
        shipped = sum(" dmlite " in line for lines in texts.values() for line in lines) + len(ticks)
        assert shipped > 4000

        deadline, state = time.monotonic() + SETTLE_TIMEOUT, ""
        while True:
            on_topic = len(lines_on_topic(kafka_broker.bootstrap, lines_topic))
            done, committed, end = group_caught_up(kafka_broker.bootstrap, lines_topic, group)
            state = f"{on_topic}/{shipped} lines shipped; committed {committed} of {end}"
            if on_topic >= shipped and done:
                break
            assert time.monotonic() < deadline, f"not settled: {state}\n{service_logs(worker)}"
            time.sleep(0.5)
        assert on_topic == shipped, "each dmlite message shipped once"

        published = [value for _key, value in read_topic(kafka_broker.bootstrap, requests_topic)
                     + read_topic(kafka_broker.bootstrap, calls_topic)]
    finally:
        worker.stop()
    records = [from_json(value) for value in published]
    assert {r["kind"] for r in records} <= set(dome_records.KINDS)
    matched = {}
    for name, kind in KIND.items():
        truth = in_truth_order(truth_rows(site.paths[name]), name)
        for row in truth:
            # The worker never reaches the end of its input: the tick, past every put's
            # timeout, ends what the truth ends at the end of input, and by the rule that
            # is a timeout (its other cells the same).
            if row.get("end_reason") == "input_end":
                row["end_reason"] = "timeout"
        columns = list(truth[0])
        mine = in_truth_order([as_cells(r, columns) for r in records if r["kind"] == kind], name)
        assert len(mine) == len(truth), (name, len(mine), len(truth))
        differ = [(got, want) for got, want in zip(mine, truth) if got != want]
        assert not differ, (f"{name}: {len(differ)} of {len(truth)} differ, e.g. "
                            + "; ".join(f"{g} != {w}" for g, w in differ[:3]))
        matched[name] = len(mine)
    # The checksum waits (parsers/dome_checksums.py, after the reassembler in the worker's
    # pipeline): every wait alone on its key is the truth's, as in test_dome_checksums_truth.
    truth = truth_rows(site.paths["checksums"])
    by_key: dict = {}
    for row in truth:
        by_key.setdefault(key(row), []).append(row)
        if row["outcome"] == "input_end":   # the tick ends it, as for the puts above
            row["outcome"] = "timeout"
    waits = [as_cells(r, list(truth[0])) for r in records if r["kind"] == "dome_checksum"]
    lonely = [row for row in truth if alone(row, by_key[key(row)])]
    assert lonely and [row for row in lonely if row not in waits] == []
    matched["checksums"] = len(waits)
    assert len(records) == sum(matched.values())
    assert matched["calls"] > 1000 and matched["puts"] > 250 and matched["fs_events"] > 0
