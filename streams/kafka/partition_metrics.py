"""What a worker reports after a partition's batch is committed.

    report = PartitionReport(metrics)      # metrics: PipelineMetrics, or None
    report.committed(part, records)        # after each committed batch of a PartitionState
    report.forget([p])                     # p revoked or dropped: its hosts are not ours now
    report.duplicates                      # lines skipped as delivered before, so far

Only committed batches are reported, so a batch that is read again after a crash or a
rebalance is never counted twice.
"""

from __future__ import annotations

import logging

log = logging.getLogger("dpmstream.worker")


class PartitionReport:
    def __init__(self, metrics=None):
        self.metrics = metrics
        self.duplicates = 0
        self._reported_bad: dict[int, int] = {}   # p -> bad records already logged
        self._duplicates_counter = None
        if metrics is not None:
            from prometheus_client import Counter
            self._duplicates_counter = Counter(
                "dpmstream_duplicate_lines", "Lines skipped because they were delivered before",
                ["host"], registry=metrics.registry)

    def committed(self, part, records: list[dict]) -> None:
        p = part.partition
        if part.bad_records > self._reported_bad.get(p, 0):
            log.warning("partition %d: %d records that are not line envelopes so far (last: %s)",
                        p, part.bad_records, part.last_bad_reason)
            self._reported_bad[p] = part.bad_records
        self.duplicates += sum(part.duplicates.values())
        if self.metrics is not None:
            for rec in records:
                self.metrics.write(rec)
            self.metrics.publish(part.stats, source=f"p{p}")
            for host, n in part.duplicates.items():
                self._duplicates_counter.labels(host).inc(n)
        part.duplicates.clear()

    def forget(self, partitions) -> None:
        """Drop the gauges of these partitions' pipelines (their counters stay)."""
        for p in partitions:
            self._reported_bad.pop(p, None)
            if self.metrics is not None:
                self.metrics.retire(f"p{p}")
