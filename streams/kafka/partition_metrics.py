"""What a worker reports after a partition's batch is committed.

    report = PartitionReport(metrics, topic)   # metrics: PipelineMetrics, or None
    figures = report.take(part)            # at the batch's checkpoint
    report.committed(figures, records)     # once the batch's transaction is committed
    report.forget([p])                     # p revoked or dropped: its hosts are not ours now
    report.duplicates                      # lines skipped as delivered before, so far

Only committed batches are reported, so a batch that is read again after a crash or a
rebalance is never counted twice. The figures are taken at the checkpoint, not at the
commit: the worker feeds the next batch while one commits, and should that next batch's
partition be taken again (its commit failed), its lines are fed and counted anew.

A record skipped as bad is counted in dpmstream_bad_records_total{reason} (reason from
envelope.BAD_REASONS, every one present at 0) and logged with its place (topic, partition,
Kafka offset) and reason, never its content: at most one line per reason every
log_pace.EVERY_S, which says how many were skipped unlogged meanwhile.

DOME lines through the partitions' event-time merge (parsers/dome_merge.py) are counted in
dpmstream_dome_merge_lines_total{outcome}: "passed" (never held), "released" (held until
every DOME node of the partition reached their time), "forced" (held, then let go by a
bound: a node quiet past the horizon, or the count); dpmstream_dome_merge_held_lines is
what the worker's partitions hold now, as of their last commit.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from dpmstream.parsers.dome_merge import OUTCOMES as MERGE_OUTCOMES
from dpmstream.streams.kafka.envelope import BAD_REASONS
from dpmstream.streams.kafka.log_pace import Pace
from dpmstream.streams.metrics.stats_collector import StatsSnapshot

log = logging.getLogger("dpmstream.worker")


@dataclass(frozen=True)
class BatchFigures:
    """A partition's figures as of one checkpoint."""
    partition: int
    stats: StatsSnapshot | None        # None: no metrics to publish them to
    duplicates: Counter                # host -> lines skipped since the last checkpoint
    bad_reasons: Counter               # reason -> records skipped since the last checkpoint
    bad_places: list                   # (Kafka offset, reason, message) of the first of them
    merged: Counter                    # DOME merge outcome -> lines since the last checkpoint
    held: int                          # DOME lines the merge holds at the checkpoint


class PartitionReport:
    def __init__(self, metrics=None, topic: str = "?", pace: Pace | None = None):
        self.metrics = metrics
        self.topic = topic
        self.duplicates = 0
        self.bad_records = 0
        self._pace = Pace() if pace is None else pace   # bad-record log lines, per reason
        self._duplicates_counter = self._bad_counter = None
        self._held: dict[int, int] = {}   # partition -> DOME lines held at its last commit
        if metrics is not None:
            from prometheus_client import Counter as PromCounter
            from prometheus_client import Gauge
            self._duplicates_counter = PromCounter(
                "dpmstream_duplicate_lines", "Lines skipped because they were delivered before",
                ["host"], registry=metrics.registry)
            self._bad_counter = PromCounter(
                "dpmstream_bad_records", "Records of the lines topic skipped as unusable, by reason",
                ["reason"], registry=metrics.registry)
            for reason in BAD_REASONS:
                self._bad_counter.labels(reason)
            self._merge_counter = PromCounter(
                "dpmstream_dome_merge_lines", "DOME lines through the event-time merge of a "
                "partition's nodes: passed at once, released in order after waiting for "
                "another node, or forced out by a bound (a node quiet past the horizon, the "
                "count)", ["outcome"], registry=metrics.registry)
            for outcome in MERGE_OUTCOMES:
                self._merge_counter.labels(outcome)
            self._held_gauge = Gauge(
                "dpmstream_dome_merge_held_lines", "DOME lines held now, waiting for another "
                "node of their partition to reach their time", registry=metrics.registry)

    def take(self, part) -> BatchFigures:
        """The partition's figures now (its duplicates and bad records since the last
        take: cleared)."""
        figures = BatchFigures(part.partition,
                               None if self.metrics is None else StatsSnapshot.of(part.stats),
                               Counter(part.duplicates), Counter(part.bad_reasons),
                               part.bad_places[:], Counter(part.dome_merge.counts),
                               part.dome_merge.held)
        part.dome_merge.counts.clear()
        part.duplicates.clear()
        part.bad_reasons.clear()
        part.bad_places.clear()
        return figures

    def committed(self, figures: BatchFigures, records: list[dict]) -> None:
        p = figures.partition
        self._log_bad(figures)
        self.duplicates += sum(figures.duplicates.values())
        self.bad_records += sum(figures.bad_reasons.values())
        if self.metrics is not None:
            self.metrics.write_many(records)
            self.metrics.publish(figures.stats, source=f"p{p}")
            host_label = self.metrics.host_label   # the host cap and form of every family
            for host, n in figures.duplicates.items():
                self._duplicates_counter.labels(host_label(host)).inc(n)
            for reason, n in figures.bad_reasons.items():
                self._bad_counter.labels(reason).inc(n)
            for outcome, n in figures.merged.items():
                self._merge_counter.labels(outcome).inc(n)
            self._held[p] = figures.held
            self._held_gauge.set(sum(self._held.values()))

    def _log_bad(self, figures: BatchFigures) -> None:
        unlisted = Counter(figures.bad_reasons)   # skipped beyond the places kept
        for kafka_offset, reason, message in figures.bad_places:
            unlisted[reason] -= 1
            held = self._pace.admit(reason)
            if held is None:
                continue
            more = f"; {held} more {reason} records skipped unlogged before it" if held else ""
            log.warning("bad record skipped: %s partition %d offset %s: %s (%s)%s",
                        self.topic, figures.partition, kafka_offset, reason, message, more)
        for reason, n in unlisted.items():   # so the next line of each says so
            self._pace.hold(reason, n)

    def forget(self, partitions) -> None:
        """Drop the gauges of these partitions' pipelines (their counters stay)."""
        for p in partitions:
            if self.metrics is not None:
                self.metrics.retire(f"p{p}")
                self._held.pop(p, None)
                self._held_gauge.set(sum(self._held.values()))
