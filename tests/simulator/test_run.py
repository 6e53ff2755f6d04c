"""simulator/run.py: one simulated run: where it stops (request budget, line target,
duration) and what its logs leave out (the DPNS log's gap)."""

from __future__ import annotations

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.scenarios import scenario


def test_the_dpns_gap_leaves_out_the_name_server_lines_of_that_window_only(tmp_path):
    gapped = simulate(scenario("dpns-gap", requests=400), tmp_path / "gap")
    whole = simulate(scenario("dpns-gap", requests=400, dpns_gap=None), tmp_path / "whole")
    assert gapped.log_path.read_bytes() == whole.log_path.read_bytes()
    stamps = [line[6:18] for line in gapped.dpns_log_path.read_text().splitlines()]
    # 14:31:40 local start: the gap is 14:31:44 to 14:31:49
    assert not [s for s in stamps if "14:31:44.000" <= s < "14:31:49.000"]
    assert gapped.dpns_lines < whole.dpns_lines


def test_a_line_target_stops_starting_cycles_once_reached(tmp_path):
    result = simulate(SimConfig(lines=20_000), tmp_path / "lines")
    assert 20_000 <= result.dpm_lines < 24_000


def test_duration_bounds_the_simulated_time(tmp_path):
    result = simulate(SimConfig(duration=10.0), tmp_path / "dur")
    assert result.end_ms == result.start_ms + 10_000
    assert max(r["ended"] for r in result.requests) <= result.end_ms
