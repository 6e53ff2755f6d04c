"""The simulator's workload for name-server linking: directories (`--dirs`, the thesis's
same directory), a gap in the DPNS log, and the truth of which call served which request."""

import re
import subprocess
import sys

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.scenarios import scenario

CREAT = re.compile(r"NS098 - creat (\S+)/f\d+ ")


def creat_dirs(result):
    return set(CREAT.findall(result.dpns_log_path.read_text()))


def test_dirs_spreads_the_files_over_that_many_directories(tmp_path):
    assert len(creat_dirs(simulate(SimConfig(requests=200, dirs=7), tmp_path / "a"))) == 7
    assert len(creat_dirs(simulate(SimConfig(requests=200), tmp_path / "b"))) == 3  # per client
    assert len(creat_dirs(simulate(scenario("same-dir", requests=200), tmp_path / "c"))) == 1


def test_the_dpns_gap_leaves_out_the_name_server_lines_of_that_window_only(tmp_path):
    gapped = simulate(scenario("dpns-gap", requests=400), tmp_path / "gap")
    whole = simulate(scenario("dpns-gap", requests=400, dpns_gap=None), tmp_path / "whole")
    assert gapped.log_path.read_bytes() == whole.log_path.read_bytes()
    stamps = [line[6:18] for line in gapped.dpns_log_path.read_text().splitlines()]
    # 14:31:40 local start: the gap is 14:31:44 to 14:31:49
    assert not [s for s in stamps if "14:31:44.000" <= s < "14:31:49.000"]
    assert gapped.dpns_lines < whole.dpns_lines


def test_the_truth_links_each_put_to_its_own_creats(tmp_path):
    result = simulate(scenario("multi-file", requests=300, get_fraction=0.0), tmp_path / "s")
    processed = [r for r in result.requests if r["proc_s"] is not None]
    assert processed and all(r["ns_calls"] == 4 for r in processed)
    assert all(0 < r["ns_s"] <= r["proc_s"] for r in processed)
    linked = [c for c in result.calls if c["token"]]
    assert len(linked) == 4 * len(processed)
    assert {c["token"] for c in linked} == {r["token"] for r in processed}


def test_the_truth_leaves_ns_fields_empty_without_name_server_lines(tmp_path):
    result = simulate(SimConfig(requests=50, dpns_gap=(0.0, 3600.0)), tmp_path / "s")
    assert result.dpns_lines == 0
    assert all(r["ns_calls"] is None and r["ns_s"] is None for r in result.requests)


def test_simulate_takes_dirs_and_a_dpns_gap_on_the_command_line(tmp_path):
    subprocess.run([sys.executable, "-m", "dpmstream", "simulate", "--quiet", "--out",
                    str(tmp_path / "s"), "--requests", "100", "--dirs", "5",
                    "--dpns-gap", "2:4"], check=True)
    text = (tmp_path / "s.dpns.log").read_text()
    assert len(set(CREAT.findall(text))) == 5
    bad = subprocess.run([sys.executable, "-m", "dpmstream", "simulate", "--out",
                          str(tmp_path / "t"), "--dpns-gap", "4:2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "dpns-gap" in bad.stderr
