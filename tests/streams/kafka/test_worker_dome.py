"""The Kafka worker on a DOME site's lines against a real broker: the records of the core
pipeline fed the same lines, exactly once through kill -9, and hostile records counted
and skipped. (The simulator's truth, end to end through rsyslog: tests/scenarios/test_e2e_dome.py.)"""

from __future__ import annotations

import datetime as dt
import heapq
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from dpmstream.commands.stack.process import free_port
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers import dome_records
from dpmstream.parsers.dome_merge import LineStamps
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.kafka.dome_paths import DEFAULT_DOME_PROFILE
from dpmstream.streams.kafka.envelope import EnvelopeError, decode, encode
from dpmstream.streams.metrics.exporter import PipelineMetrics
from tests.streams.kafka.test_worker import run_worker, sample, topics
from tests.worker_helpers import (
    canonical, committed_offsets, feeder_until_killed, produce, read_topic, kill_mid_transaction,
)

pytestmark = pytest.mark.services

TIMEOUT_S = 120.0


def dome_site(tmp_path, **kwargs):
    """A head and disk nodes' dmlite messages as rsyslog ships them (kafka envelopes)."""
    cfg = DomeConfig(envelope="kafka", timeout=TIMEOUT_S, **kwargs)
    return simulate_dome(cfg, tmp_path / "site")


def site_records(result, tick_ms: int | None = None) -> list[tuple[bytes, bytes]]:
    """Every node's envelopes, keyed by host, merged by the lines' stamps (each node's
    order kept), as they reach one partition live; and last each node's tick at the
    site's latest stamp (or `tick_ms`): a live node goes on logging, and the worker holds
    a DOME node's lines that run ahead of another node's until that one reaches them
    (docs/kafka-worker.md, "DOME lines")."""
    def node(host, path):
        for text in path.read_text(encoding="utf-8").splitlines():
            yield decode(text.encode()).line.split(" ", 1)[0], host.encode(), text.encode()
    merged = [(key, value) for _stamp, key, value in heapq.merge(
        *(node(host, path) for host, path in result.logs.items()), key=lambda item: item[0])]
    last = {}
    for key, value in merged:
        last[key] = value
    if tick_ms is None:   # the latest line's stamp, as it is written (either form)
        stamps = LineStamps(resolve_dome_profile(DEFAULT_DOME_PROFILE), result.config.tz)
        latest = max(map(decode, last.values()), key=lambda e: stamps.stamp(e.line, e.received_ms))
        when = latest.line[:envelope(latest.line).start("host") - 1]
    else:
        when = iso(tick_ms)
    return merged + [(key, tick_after(value, when)) for key, value in last.items()]


def tick_after(value: bytes, when: str) -> bytes:
    """The envelope of a node's next dmlite message after the one of `value`, stamped
    `when`: it moves the node's event time on and gives no record (a thread of its own,
    no call line; as the tick of tests/scenarios/test_e2e_dome.py)."""
    env = decode(value)
    node = envelope(env.line)
    line = f"{when} {node['host']} {node['tag']}[{node['pid']}]: {{1}}[1] dmlite dome tick : end of the test's log"
    received = iso(env.received_ms) if env.received_ms is not None else when
    return encode(env.host, env.path, env.offset + len(env.line.encode()) + 1, received, line)


def envelope(line: str):
    """The syslog envelope of a DOME line, either stamp's form (its host, tag, pid)."""
    return next(m for form in resolve_dome_profile(DEFAULT_DOME_PROFILE).forms.values()
                if (m := form.prefix.match(line)) is not None)


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="microseconds")


def core_dome_records(recs) -> list[dict]:
    """What the core Pipeline makes of the same records, in the same order, before end of
    input (a streaming worker never reaches it), as the worker publishes them."""
    records: list[dict] = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=TIMEOUT_S), on_dome_record=records.append)
    for _key, value in recs:
        try:
            env = decode(value)
        except EnvelopeError:
            continue
        src = pipeline.source(f"{env.host}|{env.path}", host=env.host, path=env.path,
                              year_hint_ms=env.received_ms)
        src.feed(env.line, received_ms=env.received_ms)
    for src in pipeline.sources.values():
        src.settle()
    pipeline.advance()
    return [dome_records.to_json_dict(r) for r in records]


def published(broker, t) -> list[dict]:
    out = []
    for topic in (t["requests"], t["calls"]):
        for key, value in read_topic(broker.bootstrap, topic):
            assert value["kind"] in dome_records.KINDS, value
            assert key.decode() == dome_records.node_of(value)   # a put, a checksum wait: the head
            out.append(value)
    return out


def _spawn_worker(broker, t, metrics_port, log):
    return subprocess.Popen(
        [sys.executable, "-m", "dpmstream", "worker", "--broker", broker.url,
         "--lines-topic", t["lines"], "--requests-topic", t["requests"],
         "--calls-topic", t["calls"], "--group-id", t["group"], "--batch", "400",
         "--timeout", str(TIMEOUT_S), "--metrics-port", str(metrics_port),
         # transactions of a few fetches each: many, for the kills to land in
         "--transaction-lines", "1000"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_dome_worker_killed_mid_transaction_resumes_with_no_record_lost_or_doubled(kafka_broker, tmp_path):
    """Ten minutes of a head and three disk nodes (thousands of calls, open puts waiting
    for their putdones across the kills): the worker killed twice while a transaction of
    its records and DOME state is open; the third finishes. The records equal the core's
    on the same lines, each once."""
    site = dome_site(tmp_path, stamp="rfc3339", duration=600.0, rate=3.0, disks=3, seed=31)
    recs = site_records(site)
    want = core_dome_records(recs)
    assert sum(r["kind"] == "dome_call" for r in want) > 5000
    assert sum(r["kind"] == "dome_put" for r in want) > 1000
    t = topics("dome-kill")
    # A site's nodes share a partition (docs/kafka-worker.md, "DOME"): the putdone of a
    # disk node joins the head's put.
    kafka_broker.create_topics([t["lines"]], partitions=1)
    head = len(recs) // 5
    produce(kafka_broker.bootstrap, t["lines"], recs[:head])
    kills_done = threading.Event()
    feeder = feeder_until_killed(kafka_broker.bootstrap, t["lines"], recs[head:], kills_done)
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
        assert 0 < sum(done.values()) < len(recs), "the worker finished before it could be killed"
        feeder.join()
        proc = _spawn_worker(kafka_broker, t, port, log)
        try:
            _wait(lambda: sum(committed_offsets(kafka_broker.bootstrap, t["group"]).values()) >= len(recs),
                  300, "the restarted worker to reach the end of the lines")
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            assert 'dpmstream_lines_total{daemon="dome",host="dpmhead01",result="parsed"}' in body
            assert "dpm_dome_calls_total{" in body and "dpm_dome_puts_total{" in body
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    finally:
        feeder.join()
        log.close()
    got = published(kafka_broker, t)
    assert kills_mid_transaction == 2
    assert len(got) == len(want), "records lost or doubled"
    assert canonical(got) == canonical(want)
    # The state topic holds the DOME tables per call and per put, not one snapshot.
    state = read_topic(kafka_broker.bootstrap, state_topic)
    keys = {key.decode() for key, _value in state}
    assert any(k.startswith("d|c|") for k in keys) and any(k.startswith("d|p|") for k in keys)


def test_hostile_records_among_dome_lines_are_counted_and_skipped(kafka_broker, tmp_path):
    """Bad envelopes (not JSON, no path, nested past the decoders' limits), one not UTF-8,
    and a 900 KB line (a record the broker takes, its line past 64 KiB) among a DOME site's
    lines (the packaged dmlite.log's whole-second stamps, dated by `received`): each bad
    record counted by its reason, the long line counted malformed, and the records are the
    core's on the good lines."""
    site = dome_site(tmp_path, stamp="traditional", duration=240.0, rate=2.0, disks=2, seed=37)
    recs = site_records(site)
    host = b"dpmhead01"
    other = "/var/log/dmlite/spare/dmlite.log"   # a DOME file of its own: its offsets are its own
    huge_line = "May 30 08:44:05 dpmhead01 dome[1]: {1}[1] dmlite dome x : " + "y" * 900_000
    hostile = {
        "not_json": (host, b'{"host": "dpmhead01", "path": '),
        "bad_path": (host, b'{"host": "dpmhead01", "offset": 0, "line": "x"}'),
        "too_deep": (host, b"[" * 1100 + b"]" * 1100),
        "not_utf8": (host, b'{"host":"dpmhead01","path":"%s","offset":5,"line":"\xff\xfe dmlite"}'
                     % other.encode()),
    }
    long_line = (host, encode("dpmhead01", other, 10, "2017-05-30T08:44:05.000000Z", huge_line))
    third = len(recs) // 3
    stream = (recs[:third] + [hostile["not_json"], hostile["too_deep"]] + recs[third:2 * third]
              + [hostile["not_utf8"], long_line, hostile["bad_path"]] + recs[2 * third:])
    t = topics("dome-bad")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    produce(kafka_broker.bootstrap, t["lines"], stream)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(stream), metrics=metrics, partitions=1,
               reassembly=ReassemblySettings(timeout_s=TIMEOUT_S))
    for reason in hostile:
        assert sample(metrics, "dpmstream_bad_records_total", reason=reason) == 1, reason
    assert sample(metrics, "dpmstream_bad_records_total", reason="failed") == 0
    # The long line is an envelope: its line is read, and malformed (over 64 KiB).
    assert sample(metrics, "dpmstream_lines_total", host="dpmhead01", daemon="dome",
                  result="malformed") == 1
    want = core_dome_records(recs)
    assert sum(r["kind"] == "dome_put" for r in want) > 200
    got = published(kafka_broker, t)
    assert canonical(got) == canonical(want)
    # The DOME metrics of the committed records (streams/metrics/dome.py).
    assert sum(sample(metrics, "dpm_dome_puts_total", host="dpmhead01", status=s)
               for s in ("success", "failed", "incomplete")) == sum(r["kind"] == "dome_put" for r in want)
