"""`dpmstream worker` stops within 5 s of SIGTERM, even once its broker is gone.

A worker reads from a private broker until it has committed a batch; the
broker is stopped; SIGTERM must end the worker within 5 s (what it could not commit is
read again by the next worker: that is the exactly-once tests' business).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpmstream.simulator import SimConfig, simulate
from tests.worker_helpers import committed_total, envelopes, produce, wait_while_worker_runs

pytestmark = pytest.mark.services

DPMSTREAM = str(Path(sys.executable).with_name("dpmstream"))
STOP_WITHIN_S = 5.0



@pytest.mark.parametrize("broker_gone", [True, False], ids=["broker-gone", "broker-up"])
def test_a_worker_stops_within_five_seconds_of_sigterm_whatever_its_broker_does(
        kafka_broker_factory, tmp_path, broker_gone):
    broker = kafka_broker_factory()
    sim = simulate(SimConfig(requests=300), tmp_path / "sim")
    records = envelopes(sim.log_path, "head01", "/var/log/dpm/log")
    produce(broker.bootstrap, "dpm.lines", records)
    log = tmp_path / "worker.log"
    proc = subprocess.Popen(
        [DPMSTREAM, "worker", "--broker", broker.bootstrap, "--partitions", "1", "--batch", "500"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_while_worker_runs(lambda: committed_total(broker.bootstrap, "dpmstream") >= len(records), 180,
              "the worker to commit the lines", proc, log)
        if broker_gone:
            assert broker.stop()
            # Part of the scenario, not a wait for a condition: the worker is left a
            # moment to run into failing fetches, heartbeats and metadata requests.
            time.sleep(2.0)
        assert proc.poll() is None, log.read_text()[-3000:]
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 60 s after SIGTERM:\n{log.read_text()[-3000:]}")
        took = time.monotonic() - sent
        print(f"\nbroker {'gone' if broker_gone else 'up'}: exit {proc.returncode} "
              f"{took:.1f} s after SIGTERM")
        assert took <= STOP_WITHIN_S, f"stopped {took:.1f} s after SIGTERM:\n{log.read_text()[-3000:]}"
        if not broker_gone:   # nothing in the way: a clean stop
            assert proc.returncode == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
