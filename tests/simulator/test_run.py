"""simulator/run.py: one simulated run: where it stops (request budget, line target,
duration) and what its logs leave out (the DPNS log's gap)."""

from __future__ import annotations

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.scenarios import scenario
from tests.helpers import sampled


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


@pytest.mark.parametrize("name", sampled(
    ["mixed", "whole-seconds", "restart", "stray-pids", "mixed-syslog", "clock-step",
     "future-lines", "dpns-gap", "sync-get", "overlap-restart", "multi-file", "ns-clients"],
    keep=["mixed", "restart", "mixed-syslog", "multi-file"]))
def test_a_run_that_writes_no_logs_has_the_same_truth_as_one_that_does(tmp_path, name):
    """predict.py's model runs write no logs (simulate(out=None)): the run, its truth
    records and its counts must be those of the run that writes them. Every scenario in
    `make test`; `make check` a sample (tests/helpers.py sampled): the plain run, a
    restart, both daemons in one rsyslog file, requests of several files each."""
    cfg = scenario(name, requests=300)
    written = simulate(cfg, tmp_path / name)
    unwritten = simulate(cfg, None)
    assert unwritten.requests == written.requests and unwritten.calls == written.calls
    for attribute in ("dpm_lines", "dpns_lines", "late_lines", "dpm_pids", "end_ms",
                      "refused", "auth_failures", "killed_calls", "cycles"):
        assert getattr(unwritten, attribute) == getattr(written, attribute), attribute
    assert unwritten.log_path is None and unwritten.requests_path is None
    assert written.log_path.stat().st_size > 0 and not list(tmp_path.glob("None*"))


def test_a_line_target_stops_a_run_without_logs_where_it_stops_one_with(tmp_path):
    cfg = SimConfig(lines=5_000)
    assert simulate(cfg, None).requests == simulate(cfg, tmp_path / "lines").requests


def test_a_calibrated_model_run_has_the_same_request_timings_whether_or_not_it_writes_logs(tmp_path):
    """The what-if's own case (report/whatif.py, `dpmstream whatif`): a model calibrated
    on a log (measured, empirical service times), run without logs as predict() runs it,
    times every request exactly as the run that writes its logs does."""
    from dpmstream.simulator.calibrate import calibrate
    from dpmstream.simulator.predict import limit_model

    observed = simulate(scenario("mixed", requests=400), None)
    model, _ = limit_model(calibrate(observed.requests, observed.calls).config, 300)
    for changed in (model, model.replace(sthreads=2 * model.sthreads)):
        written = simulate(changed, tmp_path / f"model-{changed.sthreads}")
        unwritten = simulate(changed, None)
        assert len(unwritten.requests) > 100
        assert unwritten.requests == written.requests and unwritten.calls == written.calls
        assert (unwritten.dpm_lines, unwritten.dpns_lines, unwritten.late_lines, unwritten.end_ms) \
            == (written.dpm_lines, written.dpns_lines, written.late_lines, written.end_ms)
