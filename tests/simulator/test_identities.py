"""simulator/identities.py: the names the simulated log carries (here: directories)."""

from __future__ import annotations

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.identities import Namespace


def test_dirs_spread_new_files_over_that_many_directories(tmp_path):
    result = simulate(SimConfig(requests=80, dirs=4, seed=2), tmp_path / "r")
    creats = [line.split()[-4] for line in result.dpns_log_path.read_text().splitlines()
              if "NS098 - creat" in line]
    assert {Namespace.directory(p).rsplit("/", 1)[1] for p in creats} == {f"d{k:05d}" for k in range(4)}
