"""simulator/run.py: one simulated run writing its logs (here: the DPNS log's gap)."""

from __future__ import annotations

from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import scenario


def test_the_dpns_gap_leaves_out_the_name_server_lines_of_that_window_only(tmp_path):
    gapped = simulate(scenario("dpns-gap", requests=400), tmp_path / "gap")
    whole = simulate(scenario("dpns-gap", requests=400, dpns_gap=None), tmp_path / "whole")
    assert gapped.log_path.read_bytes() == whole.log_path.read_bytes()
    stamps = [line[6:18] for line in gapped.dpns_log_path.read_text().splitlines()]
    # 14:31:40 local start: the gap is 14:31:44 to 14:31:49
    assert not [s for s in stamps if "14:31:44.000" <= s < "14:31:49.000"]
    assert gapped.dpns_lines < whole.dpns_lines
