"""Fixtures of the probe's tests."""

from __future__ import annotations

import pytest

from tests.metrics_stack import simulate
from tests.probes.test_sources_log import TZ


@pytest.fixture(scope="session")
def long_log(tmp_path_factory):
    """150 minutes of a mixed site, simulated once for every probe test that
    reads it (test_sources_log, test_check_dpm); none changes it. Long in time (a tail
    found by seeking is what it is for), not in requests: one every two seconds, some 300
    in a 10-minute window."""
    return simulate(tmp_path_factory.mktemp("long") / "long", "--scenario", "mixed",
                               "--rate", "0.5", "--duration", "9000", "--tz", TZ)
