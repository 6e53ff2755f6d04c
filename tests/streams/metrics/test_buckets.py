"""streams/metrics/buckets.py: the histogram bounds of each phase."""

from __future__ import annotations

from dpmstream.streams.metrics.buckets import PHASE_BUCKETS


def test_each_phase_has_dense_log_spaced_buckets_over_its_own_range():
    for phase, bounds in PHASE_BUCKETS.items():
        assert bounds[0] == 0 and list(bounds) == sorted(set(bounds)), phase
        steps = [hi / lo for lo, hi in zip(bounds, bounds[1:]) if lo >= 0.0105]
        assert max(steps) <= 1.16, phase   # interpolation within a bucket: < 16% at worst
    assert PHASE_BUCKETS["auth"][-1] >= 120 and PHASE_BUCKETS["total"][-1] >= 4 * 3600
