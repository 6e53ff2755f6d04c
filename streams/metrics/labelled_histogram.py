"""A Prometheus histogram family whose bucket bounds may differ by label set.

prometheus_client's Histogram has one set of bounds per family, but the phases of a DPM
request span different ranges (an authentication takes milliseconds, a transfer up to
hours): each phase gets bounds dense over its own range (histogram_buckets), in one
family `dpm_request_phase_seconds{phase=...}` as before. histogram_quantile() groups by
`le` within each phase, so differing bounds across phases are fine.

A collector: observe() only counts; the exposition is built when /metrics is scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

from prometheus_client.metrics_core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString


class _Child:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)   # the last one is +Inf
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # An observation equal to a bound belongs to it (le: less than or equal).
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount


class LabelledHistogram:
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 bounds_for: Callable[[tuple], tuple[float, ...]], registry=None) -> None:
        """bounds_for(label values) -> the sorted finite upper bounds of that label set."""
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds_for = bounds_for
        self._children: dict[tuple, _Child] = {}
        if registry is not None:
            registry.register(self)

    def series_per_set(self, values: tuple) -> int:
        """Series a label set adds: each bucket, +Inf, _sum and _count."""
        return len(self.bounds_for(values)) + 3

    def observe(self, values: tuple, amount: float) -> None:
        self.child(values).observe(amount)

    def child(self, values: tuple) -> _Child:
        """The counts of one label set (created empty the first time): a caller that
        observes one label set often keeps it and calls its observe(amount)."""
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = _Child(self.bounds_for(values))
        return child

    def describe(self):
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self):
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        # Copied at once (the scrape runs in another thread than observe()).
        for values, child in list(self._children.items()):
            counts, total = child.counts[:], child.sum
            buckets, cumulative = [], 0
            for bound, n in zip(child.bounds, counts):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            buckets.append(("+Inf", cumulative + counts[-1]))
            family.add_metric(list(values), buckets, total)
        yield family
