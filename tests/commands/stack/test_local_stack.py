"""`dpmstream stack up/down`: the whole local chain, started and stopped as a user would."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpmstream.commands.stack.process import pid_alive, port_open
from dpmstream.commands.stack.prometheus import PrometheusClient

pytestmark = pytest.mark.services

DPMSTREAM = [str(Path(sys.executable).with_name("dpmstream"))]
REAL_LFC = Path(__file__).parents[2] / "data" / "real" / "lfc" / "lfc-cr.log"


def stack(*args, timeout=240):
    return subprocess.run([*DPMSTREAM, "stack", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_stack_up_serves_the_whole_chain_and_down_stops_exactly_it(tmp_path):
    logs, work = tmp_path / "logs", tmp_path / "stack"
    logs.mkdir()
    try:
        up = stack("up", "--logs", str(logs), "--workdir", str(work), "--host", "head01")
        assert up.returncode == 0, up.stderr

        lines = up.stdout.splitlines()
        assert [line.split("=", 1)[0] for line in lines] == ["kafka", "prometheus", "metrics"]
        endpoints = dict(line.split("=", 1) for line in lines)
        kafka_port = int(re.fullmatch(r"127\.0\.0\.1:(\d+)", endpoints["kafka"]).group(1))
        prom_port = int(re.fullmatch(r"http://127\.0\.0\.1:(\d+)", endpoints["prometheus"]).group(1))
        metrics_port = int(re.fullmatch(r"http://127\.0\.0\.1:(\d+)/metrics", endpoints["metrics"]).group(1))

        # A second `up` on the same work dir refuses instead of starting twins.
        again = stack("up", "--logs", str(logs), "--workdir", str(work))
        assert again.returncode == 1 and "already running" in again.stderr

        # Lines written to the head-node layout (dpns/log) and to a DIR/*.log file go
        # rsyslog -> Kafka -> worker -> Prometheus.
        (logs / "dpns").mkdir(exist_ok=True)
        shutil.copyfile(REAL_LFC, logs / "dpns" / "log")
        shutil.copyfile(REAL_LFC, logs / "lfc-copy.log")
        n_lines = 2 * len(REAL_LFC.read_bytes().splitlines())
        prom = PrometheusClient(endpoints["prometheus"])
        result = prom.wait_for(
            'sum(dpmstream_lines_total{host="head01", daemon="dpns", result="parsed"})',
            lambda r: bool(r) and float(r[0]["value"][1]) >= n_lines, timeout=90)
        assert float(result[0]["value"][1]) == n_lines

        state = json.loads((work / "state.json").read_text())
        pids = {name: int(Path(svc["pid_file"]).read_text()) for name, svc in state["services"].items()}
        assert set(pids) == {"kafka", "rsyslog", "worker", "prometheus"}
        assert all(pid_alive(pid) for pid in pids.values())
    finally:
        down = stack("down", "--workdir", str(work))

    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids.values())
    for port in (kafka_port, prom_port, metrics_port):
        assert not port_open("127.0.0.1", port)
    # Nothing removed: the followed log and the stack's data stay.
    assert (logs / "dpns" / "log").read_bytes() == REAL_LFC.read_bytes()
    assert (work / "kafka" / "data" / "meta.properties").exists()

    second = stack("down", "--workdir", str(work))
    assert second.returncode == 0 and "nothing was running" in second.stderr


def test_stack_up_refuses_a_missing_logs_directory(tmp_path):
    result = stack("up", "--logs", str(tmp_path / "nope"), "--workdir", str(tmp_path / "w"))
    assert result.returncode == 1
    assert "does not exist" in result.stderr
    assert result.stdout == ""


def test_stack_up_rejects_a_malformed_ports_list(tmp_path):
    result = stack("up", "--logs", str(tmp_path), "--workdir", str(tmp_path / "w"),
                   "--ports", "kafka:9092")
    assert result.returncode == 2
    assert "NAME=PORT" in result.stderr
