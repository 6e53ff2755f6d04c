"""What a worker reports after a partition's batch is committed.

    report = PartitionReport(metrics)      # metrics: PipelineMetrics, or None
    figures = report.take(part)            # at the batch's checkpoint
    report.committed(figures, records)     # once the batch's transaction is committed
    report.forget([p])                     # p revoked or dropped: its hosts are not ours now
    report.duplicates                      # lines skipped as delivered before, so far

Only committed batches are reported, so a batch that is read again after a crash or a
rebalance is never counted twice. The figures are taken at the checkpoint, not at the
commit: the worker feeds the next batch while one commits, and should that next batch's
partition be taken again (its commit failed), its lines are fed and counted anew.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from dpmstream.streams.metrics.stats_collector import StatsSnapshot

log = logging.getLogger("dpmstream.worker")


@dataclass(frozen=True)
class BatchFigures:
    """A partition's figures as of one checkpoint."""
    partition: int
    stats: StatsSnapshot | None        # None: no metrics to publish them to
    duplicates: Counter                # host -> lines skipped since the last checkpoint
    bad_records: int                   # records that were not envelopes, so far
    last_bad_reason: str | None


class PartitionReport:
    def __init__(self, metrics=None):
        self.metrics = metrics
        self.duplicates = 0
        self._reported_bad: dict[int, int] = {}   # p -> bad records already logged
        self._duplicates_counter = None
        if metrics is not None:
            from prometheus_client import Counter as PromCounter
            self._duplicates_counter = PromCounter(
                "dpmstream_duplicate_lines", "Lines skipped because they were delivered before",
                ["host"], registry=metrics.registry)

    def take(self, part) -> BatchFigures:
        """The partition's figures now (its duplicates since the last take: cleared)."""
        figures = BatchFigures(part.partition,
                               None if self.metrics is None else StatsSnapshot.of(part.stats),
                               Counter(part.duplicates), part.bad_records, part.last_bad_reason)
        part.duplicates.clear()
        return figures

    def committed(self, figures: BatchFigures, records: list[dict]) -> None:
        p = figures.partition
        if figures.bad_records > self._reported_bad.get(p, 0):
            log.warning("partition %d: %d records that are not line envelopes so far (last: %s)",
                        p, figures.bad_records, figures.last_bad_reason)
            self._reported_bad[p] = figures.bad_records
        self.duplicates += sum(figures.duplicates.values())
        if self.metrics is not None:
            for rec in records:
                self.metrics.write(rec)
            self.metrics.publish(figures.stats, source=f"p{p}")
            for host, n in figures.duplicates.items():
                self._duplicates_counter.labels(host).inc(n)

    def forget(self, partitions) -> None:
        """Drop the gauges of these partitions' pipelines (their counters stay)."""
        for p in partitions:
            self._reported_bad.pop(p, None)
            if self.metrics is not None:
                self.metrics.retire(f"p{p}")
