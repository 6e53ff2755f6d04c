"""tests/service_guard.py: a test that starts a real service without the `services` marker
fails, so `make check` never starts one; commands that only check a configuration pass."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.service_guard import service_started_by

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, service", [
    (["/usr/bin/java", "-Xmx512m", "-cp", "libs/*", "kafka.Kafka", "server.properties"], "Kafka"),
    (["/usr/sbin/rsyslogd", "-n", "-f", "rsyslog.conf", "-i", "pid"], "rsyslog"),
    (["/usr/bin/prometheus", "--config.file=prometheus.yml"], "Prometheus"),
    (["/usr/sbin/nagios4", "nagios.cfg"], "Nagios"),
    (["chromium", "--headless", "--remote-debugging-port=0"], "Chromium"),
    (["docker-compose", "-f", "docker-compose.yml", "up", "-d"], "docker-compose"),
])
def test_each_service_is_known_by_the_command_that_starts_it(argv, service):
    assert service_started_by(argv) == service


@pytest.mark.parametrize("argv", [
    ["/usr/sbin/rsyslogd", "-N1", "-f", "rsyslog.conf"],
    ["/usr/sbin/nagios4", "-v", "nagios.cfg"],
    ["promtool", "check", "config", "prometheus.yml"],
    ["docker-compose", "--env-file", "empty.env", "-f", "docker-compose.yml", "config", "-q"],
    ["/usr/bin/java", "-Xmx256m", "-cp", "libs/*", "kafka.tools.StorageTool", "format"],
    [sys.executable, "-m", "dpmstream", "stack", "up", "--help"],   # (a child's services are not seen)
    [sys.executable, "-m", "dpmstream", "replay", "--quiet", "a.log"],
])
def test_commands_that_only_check_or_prepare_a_configuration_start_nothing(argv):
    assert service_started_by(argv) is None


INNER = '''
import subprocess, sys
import pytest

def test_unmarked_starts_prometheus():
    subprocess.Popen(["prometheus", "--config.file=nowhere.yml"])

def test_unmarked_swallows_the_refusal():
    try:
        subprocess.run(["rsyslogd", "-n", "-f", "nowhere.conf"])
    except Exception:
        pass

def test_unmarked_uses_the_broker(kafka_topic):
    kafka_topic()

def test_unmarked_runs_another_program():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.services
def test_marked_may_start_one():
    try:   # --version starts no server; the guard must let the marked test try
        subprocess.run(["prometheus", "--version"], capture_output=True)
    except FileNotFoundError:
        pass   # not installed (make check needs only Python): tried, which is the point
'''


def test_an_unmarked_test_that_starts_a_service_fails_and_a_marked_one_passes(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F401,F403\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    services: starts a service\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                           "test_inner.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    out = done.stdout
    outcomes = {}   # the -v progress lines: test_inner.py::NAME OUTCOME [ NN%]
    for line in out.splitlines():
        if line.startswith("test_inner.py::") and line.split()[1:2] in (["PASSED"], ["FAILED"], ["ERROR"]):
            outcomes[line.split()[0].split("::")[1]] = line.split()[1]
    assert outcomes == {
        "test_unmarked_starts_prometheus": "FAILED",
        "test_unmarked_swallows_the_refusal": "FAILED",
        "test_unmarked_uses_the_broker": "ERROR",          # refused before the broker starts
        "test_unmarked_runs_another_program": "PASSED",
        "test_marked_may_start_one": "PASSED",
    }, out
    assert "test_unmarked_starts_prometheus starts Prometheus" in out
    assert "test_unmarked_swallows_the_refusal starts rsyslog" in out
    assert "uses the service fixture(s) kafka_broker, kafka_topic but is not marked" in out
    assert done.returncode == 1
