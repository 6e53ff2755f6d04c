"""Directories by name-server time, end to end: `replay` prints them and writes
directories.csv whichever order the daemons' files come in; `run --directories` keeps a
JSON file of them."""

import csv
import json
import subprocess
import sys

from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import scenario
from dpmstream.streams.sinks.directories import COLUMNS
from tests.helpers import dpmstream_in_process


def replay(tmp_path, cfg, *files, out="o"):
    """`dpmstream replay` (in this process: what it prints and writes is tested), which
    must succeed; what it prints."""
    done = dpmstream_in_process("replay", "--tz", cfg.tz, "--host", cfg.host, "--out",
                                str(tmp_path / out), *[str(tmp_path / f) for f in files], text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_replay_ranks_the_hot_directory_first_with_its_lock_queue(tmp_path):
    cfg = scenario("many-dirs", requests=300, dirs=4)
    simulate(cfg, tmp_path / "sim")
    printed = replay(tmp_path, cfg, "sim.log", "sim.dpns.log")
    with open(tmp_path / "o" / "directories.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 4 and "Directories by name-server time" in printed
    assert sum(int(r["creats"]) for r in rows) >= 290
    assert [float(r["ns_s"]) for r in rows] == sorted((float(r["ns_s"]) for r in rows), reverse=True)
    assert all(int(r["peak_creats"]) >= 1 and 0 < float(r["proc_share"]) < 1 for r in rows)


def test_replay_gives_the_same_records_whichever_order_the_daemons_files_come_in(tmp_path):
    cfg = scenario("thesis", requests=300)
    simulate(cfg, tmp_path / "sim")
    replay(tmp_path, cfg, "sim.log", "sim.dpns.log", out="a")
    replay(tmp_path, cfg, "sim.dpns.log", "sim.log", out="b")
    for name in ("requests.csv", "calls.csv", "directories.csv"):
        a = sorted((tmp_path / "a" / name).read_text().splitlines())
        b = sorted((tmp_path / "b" / name).read_text().splitlines())
        assert a == b, name


def test_run_keeps_a_json_file_of_the_top_directories(tmp_path):
    cfg = scenario("same-dir", requests=200)
    simulate(cfg, tmp_path / "sim")
    target = tmp_path / "dirs.json"
    subprocess.run([sys.executable, "-m", "dpmstream", "run", "--once", "--no-metrics",
                    "--tz", cfg.tz, "--host", cfg.host, "--directories", str(target),
                    str(tmp_path / "sim.log"), str(tmp_path / "sim.dpns.log")],
                   check=True, capture_output=True)
    (hot,) = json.loads(target.read_text())["directories"]
    assert hot["directory"].endswith("/shared") and hot["creats"] >= 190
    assert hot["peak_creats"] > 3 and float(hot["proc_share"]) > 0.1
