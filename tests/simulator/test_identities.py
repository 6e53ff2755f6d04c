"""simulator/identities.py: the names the simulated log carries (here: the directories
new files are created in: one per client, `dirs` of them, or the thesis's same one)."""

from __future__ import annotations

import random
import re
import uuid

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.identities import Namespace, make_uuid
from dpmstream.simulator.scenarios import scenario

CREAT = re.compile(r"NS098 - creat (\S+)/f\d+ ")


def creat_dirs(result):
    return set(CREAT.findall(result.dpns_log_path.read_text()))


def test_dirs_spread_new_files_over_that_many_directories(tmp_path):
    result = simulate(SimConfig(requests=80, dirs=4, seed=2), tmp_path / "r")
    creats = [line.split()[-4] for line in result.dpns_log_path.read_text().splitlines()
              if "NS098 - creat" in line]
    assert {Namespace.directory(p).rsplit("/", 1)[1] for p in creats} == {f"d{k:05d}" for k in range(4)}


def test_dirs_spreads_the_files_over_that_many_directories(tmp_path):
    assert len(creat_dirs(simulate(SimConfig(requests=200, dirs=7), tmp_path / "a"))) == 7
    assert len(creat_dirs(simulate(SimConfig(requests=200), tmp_path / "b"))) == 3  # per client
    assert len(creat_dirs(simulate(scenario("same-dir", requests=200), tmp_path / "c"))) == 1


def test_same_dir_puts_every_file_in_one_directory(tmp_path):
    result = simulate(SimConfig(requests=200, same_dir=True), tmp_path / "sd")
    dirs = set(re.findall(r"NS098 - creat (\S+)/f\d+ ", result.dpns_log_path.read_text()))
    assert dirs == {"/dpm/cern.ch/home/dteam/perf/shared"}
    default = simulate(SimConfig(requests=200), tmp_path / "d")
    dirs = set(re.findall(r"NS098 - creat (\S+)/f\d+ ", default.dpns_log_path.read_text()))
    assert len(dirs) == 3            # one per client


def test_a_token_is_the_version_4_uuid_of_the_runs_generator_as_the_uuid_module_writes_it():
    """make_uuid builds the text itself (a model run makes two per request): it must be
    str(uuid.UUID(version=4)) of the same 128 bits, or every token of every run changes."""
    ours, theirs = random.Random(7), random.Random(7)
    for _ in range(20_000):
        assert make_uuid(ours) == str(uuid.UUID(int=theirs.getrandbits(128), version=4))
