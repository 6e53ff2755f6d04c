"""End to end on the real services: a simulated head node's logs grow on disk, a private
rsyslog (the shipped config) ships them to a private Kafka broker, one `dpmstream worker`
subprocess turns them into records, a private Prometheus scrapes the worker.

The expected records are the simulator's ground truth (computed from what it printed,
without the parser), compared row for row as the CSV cells of parsers/records.py.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections import Counter

import pytest

from dpmstream.simulator import simulate
from dpmstream.commands.stack.process import ServiceError, pid_alive
from dpmstream.commands.stack.worker_process import WorkerProcess
from tests.e2e_helpers import (
    SIM_TZ, AppendingWriter, compare_rows, file_line_offsets, group_caught_up, lines_on_topic,
    end_tick, live_sim_config, ordered_lines, service_logs, topic_records, without_tick,
)

pytestmark = pytest.mark.services

WRITE_SECONDS = 8.0        # the log grows over this much wall time
SETTLE_TIMEOUT = 120.0     # from the last line written to everything committed


class Chain:
    """files -> rsyslog -> broker -> worker -> topics, and Prometheus on the worker."""

    def __init__(self, tmp_path, broker, rsyslog_factory, prometheus_factory, workers, *,
                 seed: int, requests: int = 150):
        self.tmp = tmp_path
        self.broker = broker
        self.sim = simulate(live_sim_config(requests=requests, seed=seed), tmp_path / "sim" / "head")
        self.host = self.sim.config.host
        self.dpm_file = tmp_path / "logs" / "dpm" / "log"
        self.dpns_file = tmp_path / "logs" / "dpns" / "log"
        self.lines = ordered_lines(self.sim, self.dpm_file, self.dpns_file)
        self.lines += end_tick(self.lines, self.dpm_file, self.dpns_file, pid=self.sim.config.pid)
        for f in (self.dpm_file, self.dpns_file):
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"")
        tag = uuid.uuid4().hex[:8]
        self.lines_topic, self.requests_topic = f"e2e-lines-{tag}", f"e2e-req-{tag}"
        self.calls_topic, self.group = f"e2e-calls-{tag}", f"e2e-group-{tag}"
        broker.create_topics([self.lines_topic], partitions=1)
        self.worker = WorkerProcess(tmp_path / "worker", broker.url, extra_args=[
            "--lines-topic", self.lines_topic, "--requests-topic", self.requests_topic,
            "--calls-topic", self.calls_topic, "--group-id", self.group, "--partitions", "1",
            "--tz", SIM_TZ])
        workers.append(self.worker)
        self.worker.start()
        # rsyslog names the records' host: the simulated head node's name.
        self.shipper = rsyslog_factory([self.dpm_file, self.dpns_file], self.lines_topic,
                                       broker=broker, hostname=self.host, resume_interval=1)
        self.prometheus = prometheus_factory([self.worker.metrics_target])

    def writer(self, lines=None, duration_s: float = WRITE_SECONDS) -> AppendingWriter:
        writer = AppendingWriter(self.lines if lines is None else lines, duration_s=duration_s)
        writer.start()
        return writer

    def logs(self) -> str:
        return service_logs(self.worker, self.shipper, self.broker)

    def committed(self) -> int:
        return sum(group_caught_up(self.broker.bootstrap, self.lines_topic, self.group)[1].values())

    def wait_committed(self, at_least: int, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            try:
                done = self.committed()
            except Exception:  # noqa: BLE001 - the group has no offsets yet
                done = 0
            if done >= at_least:
                return done
            assert time.monotonic() < deadline, \
                f"worker committed {done} lines, waited for {at_least}\n{self.logs()}"
            time.sleep(0.1)

    def settle(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until every line of the files is on the lines topic and the worker has
        committed the whole topic."""
        want = file_line_offsets([self.dpm_file, self.dpns_file])
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            try:
                shipped = lines_on_topic(self.broker.bootstrap, self.lines_topic)
                done, committed, end = group_caught_up(self.broker.bootstrap, self.lines_topic,
                                                       self.group)
            except Exception as exc:  # noqa: BLE001 - broker still coming back
                state = f"broker not answering: {exc!r}"
            else:
                state = (f"{len(want & shipped)}/{len(want)} lines shipped; "
                         f"committed {committed} of {end}")
                if want <= shipped and done:
                    return
            time.sleep(0.5)
        raise AssertionError(f"not settled after {timeout:.0f} s: {state}\n{self.logs()}")

    def assert_records_equal_truth(self) -> None:
        bootstrap = self.broker.bootstrap
        problems = [
            compare_rows(topic_records(bootstrap, self.requests_topic, "request"),
                         self.sim.requests, "request"),
            compare_rows(without_tick(topic_records(bootstrap, self.calls_topic, "call")),
                         self.sim.calls, "call"),
        ]
        problems = [p for p in problems if p]
        assert not problems, "\n".join(problems) + "\n" + self.logs()

    def prometheus_by(self, promql: str, label: str, want: dict, timeout: float = 30.0) -> dict:
        """Poll the real Prometheus until `sum by (label) (promql)` equals `want`."""
        def as_dict(result):
            return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}
        try:
            result = self.prometheus.wait_for(f"sum by ({label}) ({promql})",
                                              lambda res: as_dict(res) == want, timeout=timeout)
        except ServiceError as exc:
            raise AssertionError(f"{exc}\nwanted {want}\n{self.logs()}") from None
        return as_dict(result)


@pytest.fixture
def workers():
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture
def chain(tmp_path, kafka_broker, rsyslog_factory, prometheus_factory, workers):
    def make(**kwargs) -> Chain:
        return Chain(tmp_path, kafka_broker, rsyslog_factory, prometheus_factory, workers, **kwargs)
    return make


def test_lines_appended_to_the_logs_come_out_as_the_truths_records_and_counters(chain):
    c = chain(seed=21)
    writer = c.writer()
    writer.finish()
    c.settle()

    c.assert_records_equal_truth()
    statuses = Counter(r["status"] for r in c.sim.requests)
    assert len(statuses) >= 2, statuses  # failures happen: the counters have several series
    assert c.prometheus_by(f'dpm_requests_total{{host="{c.host}"}}', "status", statuses) == statuses
    calls = {"dpmstream": len(c.sim.calls) + 2}   # and the pings that end the two logs
    assert c.prometheus_by(f'dpm_call_seconds_count{{host="{c.host}"}}', "job", calls) == calls
    assert c.prometheus_by(f'dpmstream_lines_total{{host="{c.host}"}}', "result",
                           {"parsed": float(len(c.lines))}) == {"parsed": len(c.lines)}


RESUMED = re.compile(r"partition (\d+): resumed at offset (\d+) with (\d+) open requests")


def test_a_worker_killed_mid_stream_and_restarted_loses_and_doubles_nothing(chain):
    c = chain(seed=22)
    writer = c.writer()
    # Kill once the worker has committed a fifth of the stream, with lines still coming.
    c.wait_committed(at_least=len(c.lines) // 5)
    assert writer.is_alive() and writer.written < len(c.lines), "the log was written before the kill"
    pid = c.worker.process.pid()
    os.kill(pid, signal.SIGKILL)
    while pid_alive(pid):
        time.sleep(0.02)
    c.worker.stop()  # reaps it; nothing left to stop
    c.worker.start()
    writer.finish()
    c.settle()

    c.assert_records_equal_truth()
    resumed = RESUMED.findall(c.worker.process.log_file.read_text())
    assert resumed, c.logs()
    # The second worker resumed from the committed state, mid-stream and mid-request.
    _part, offset, open_requests = map(int, resumed[-1])
    assert offset > 0 and open_requests > 0, resumed


def test_lines_appended_while_the_broker_is_down_all_arrive(
        tmp_path, kafka_broker_factory, rsyslog_factory, prometheus_factory, workers):
    broker = kafka_broker_factory()
    c = Chain(tmp_path, broker, rsyslog_factory, prometheus_factory, workers, seed=23)
    writer = c.writer(duration_s=10.0)
    c.wait_committed(at_least=1)
    broker.stop()
    written_at_stop = writer.written
    # The outage lasts while a fifth of the log is appended.
    writer.wait_for(written_at_stop + len(c.lines) // 5, timeout=30)
    assert written_at_stop < writer.written < len(c.lines), "no line was written during the outage"
    broker.start()
    writer.finish()
    c.settle()

    c.assert_records_equal_truth()
    assert c.worker.running, "the worker did not survive the broker outage\n" + c.logs()
    # Every line counted once by the worker: a line rsyslog resent after the outage is not.
    assert c.prometheus_by(f'dpmstream_lines_total{{host="{c.host}"}}', "result",
                           {"parsed": float(len(c.lines))}) == {"parsed": len(c.lines)}
    statuses = Counter(r["status"] for r in c.sim.requests)
    assert c.prometheus_by(f'dpm_requests_total{{host="{c.host}"}}', "status", statuses) == statuses


BAD_LINES = [
    b"garbage: this is no DPM log line at all",
    b"\x00\x01\x02 binary \x00\xff\x10\x7f\x1b[31m blob",
    b"x" * 100_000,                                   # rsyslog cuts it to its message size
    b"11/21 06:0",                                    # a stamp cut short
    b"caf\xe9 \xff\xfe \xc3 not UTF-8",
]


def test_bad_lines_in_the_stream_are_counted_and_the_worker_keeps_going(chain):
    c = chain(seed=24)
    lines = list(c.lines)
    # Spread over both files, after the first lines (which settle each file's profile).
    bad = [(c.dpm_file if i % 2 == 0 else c.dpns_file, line) for i, line in enumerate(BAD_LINES)]
    bad += [(c.dpm_file, b"\xff" * 50), (c.dpns_file, b"also not a line \xc3\x28")]
    step = (len(lines) - 1000) // len(bad)
    for i, item in enumerate(bad):
        lines.insert(1000 + i * step + i, item)
    writer = c.writer(lines)
    writer.finish()
    c.settle()

    c.assert_records_equal_truth()
    assert c.worker.running, c.logs()
    assert c.prometheus_by(f'dpmstream_lines_total{{host="{c.host}", result!="parsed"}}', "job",
                           {"dpmstream": float(len(bad))}) == {"dpmstream": len(bad)}
    assert c.prometheus_by(f'dpmstream_lines_total{{host="{c.host}", result="parsed"}}', "job",
                           {"dpmstream": float(len(c.lines))}) == {"dpmstream": len(c.lines)}
