"""A cap on the time series of one metric family, with a counted overflow.

Each label is bounded on its own (metrics.BoundedLabel), but their product is not: 300
hosts x 40 ops x 3 results of a call histogram made 510 k series, a 45 MB /metrics and a
15.6 s scrape. A SeriesBudget admits label sets while the family's series (a counter's
label set is one series, a histogram's is one per bucket plus _sum and _count) fit in
`max_series`; past it, a new label set has its scaling labels (host, op, daemon; DOME's
server, command and fs: metrics/dome.py) folded
into "other", and dpmstream_series_overflow_total{metric=...} counts each observation so
folded. Label sets admitted earlier keep their own series. The folded sets themselves
only vary by the small enumerations left (phase, status, result), so a family never
exceeds its budget by more than those few.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

OTHER = "other"
FOLDED_LABELS = frozenset({"host", "op", "daemon", "server", "command", "fs"})
DEFAULT_MAX_SERIES = 25_000


def settled_key(raw: tuple) -> bool:
    """Whether a record's raw label values may key what their settled label sets observe
    into (PipelineMetrics, DomeMetrics): strings and None only, since a value of another
    type may equal one whose label differs (True == 1, labelled "True" and "1")."""
    for value in raw:
        if value is not None and type(value) is not str:
            return False
    return True


class SeriesBudget:
    def __init__(self, family: str, labelnames: Sequence[str], max_series: int, overflow,
                 series_per_set: Callable[[tuple], int] = lambda values: 1) -> None:
        """overflow: the dpmstream_series_overflow counter (labelled by metric);
        series_per_set(values): how many series a label set adds to the exposition."""
        self.family = family
        self.max_series = max_series
        self.series = 0
        self._sets: set[tuple] = set()
        self._fold = tuple(name in FOLDED_LABELS for name in labelnames)
        self._cost = series_per_set
        self._overflow = overflow.labels(family)   # present at 0: alerts have a series
        self.folded = 0

    def __call__(self, values: tuple) -> tuple:
        """The label values to use for `values`: themselves, or their folded form."""
        if values in self._sets:
            return values
        cost = self._cost(values)
        if self.series + cost <= self.max_series:
            self._admit(values, cost)
            return values
        folded = tuple(OTHER if fold else v for fold, v in zip(self._fold, values))
        self.folded += 1
        self._overflow.inc()
        if folded not in self._sets:
            self._admit(folded, self._cost(folded))
        return folded

    def settled(self, values: tuple) -> bool:
        """Whether asking for `values` again gives `values`, with no side effect (the
        label set was admitted; a folded one counts an overflow at each ask)."""
        return values in self._sets

    def _admit(self, values: tuple, cost: int) -> None:
        self._sets.add(values)
        self.series += cost
