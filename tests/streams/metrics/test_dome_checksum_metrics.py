"""streams/metrics/dome.py: the checksum waits as dpm_dome_checksums_total{host,outcome} and
dpm_dome_checksum_wait_seconds{host} (docs/dome.md section 6 item 5), from the records of
a simulated site's logs through the DOME reassembler and the checksum stage, read back from
the exposition text."""

from __future__ import annotations

from collections import Counter

import pytest

from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.metrics.exporter import PipelineMetrics
from tests.scenarios.test_dome_checksums_truth import waits_of
from tests.streams.metrics.test_exporter import samples


# The two stamps give the same records (one seed); make check reads the traditional one,
# the rfc3339 stamp's reading being make check's in tests/parsers/test_dome_profiles.py
# (test_every_simulated_line_reads_as_the_role_and_fields_it_was_written_for).
@pytest.mark.parametrize("stamp", ["traditional", pytest.param("rfc3339", marks=pytest.mark.slow)])
def test_checksum_waits_are_counted_by_outcome_and_only_one_files_answered_waits_are_observed(tmp_path, stamp):
    cfg = DomeConfig(stamp=stamp, duration=400.0, rate=3.0, disks=3, clients=30, disk_down_at=None,
                     restart_at=None, gap_at=None, chksum_give_up_rate=0.1, chksum_pair_rate=0.1)
    result = simulate_dome(cfg, tmp_path / "site")
    _, records = waits_of(result, cfg)
    metrics = PipelineMetrics()
    for record in records:
        metrics.write(record)
    got = samples(metrics)

    want = Counter("overlap" if r["overlap"] else r["outcome"] for r in records)
    assert {"done", "timeout", "overlap"} <= set(want)
    counted = {dict(labels)["outcome"]: v for (name, labels), v in got.items() if name == "dpm_dome_checksums_total"}
    assert counted == want
    assert all(dict(labels)["host"] == "dpmhead01" for (name, labels), _ in got.items()
               if name.startswith("dpm_dome_checksum"))
    observed = [r for r in records if not r["overlap"] and r["outcome"] in ("done", "failed")]
    host = (("host", "dpmhead01"),)
    assert got[("dpm_dome_checksum_wait_seconds_count", host)] == len(observed) > 100
    assert got[("dpm_dome_checksum_wait_seconds_sum", host)] == pytest.approx(
        sum(r["wait"] for r in observed) / 1000)
    assert not any("192.0.2." in value or "CN=" in value
                   for (name, labels), _ in got.items() for _, value in labels)   # no client, no DN
