"""`simulate_dome(config, prefix)`: a simulated DOME site's logs and, beside them, their truth.

    from dpmstream.simulator.dome_run import simulate_dome
    result = simulate_dome(DomeConfig(disks=2), "out/site")

Writes, per node, PREFIX.HOST.log (dmlite.log, /var/log/messages, journalctl output or
.jsonl Kafka envelopes: DomeConfig.envelope), and the truth: PREFIX.calls.csv,
PREFIX.puts.csv, PREFIX.checksums.csv, PREFIX.capacity.csv, PREFIX.fs_events.csv and PREFIX.summary.json (what
was lost and why: journald's gap, killed processes, the end of the run).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_model import Line, Site, build
from dpmstream.simulator.dome_truth import (
    CALL_COLUMNS, CAPACITY_COLUMNS, CHECKSUM_COLUMNS, FS_EVENT_COLUMNS, PUT_COLUMNS, DomeTruth, write_csv,
)
from dpmstream.simulator.dome_writer import write_node_log


@dataclass
class DomeResult:
    config: DomeConfig
    site: Site
    truth: DomeTruth
    logs: dict[str, Path]              # host -> its log
    written: dict[str, list]           # host -> per written line: its Line, or None (foreign)
    paths: dict[str, Path]             # calls, puts, checksums, capacity, fs_events, summary
    summary: dict

    def describe(self) -> str:
        s = self.summary
        logs = "\n".join(f"  {host}: {path} ({s['lines_written'][host]} lines)"
                         for host, path in self.logs.items())
        return (f"DOME site: head {self.config.head}, {self.config.disks} disk nodes, "
                f"{self.config.envelope} envelope, {self.config.stamp} stamps, "
                f"generation {self.config.generation}\n{logs}\n"
                f"truth: {s['calls']} calls, {s['puts']} puts {s['put_status']}, "
                f"{s['checksum_waits']} checksum waits {s['checksum_outcomes']}, "
                f"{s['capacity_lines']} capacity lines, {s['fs_events']} filesystem events; "
                f"lost lines {s['lost_lines']}\n"
                + "\n".join(f"  {name}: {path}" for name, path in self.paths.items()))


def simulate_dome(cfg: DomeConfig, prefix) -> DomeResult:
    cfg.validate()
    site = build(cfg)
    truth = DomeTruth(site, cfg.whole_seconds)
    rng = random.Random(f"{cfg.seed}/writer")
    suffix = ".jsonl" if cfg.envelope == "kafka" else ".log"
    Path(f"{prefix}.x").parent.mkdir(parents=True, exist_ok=True)   # as the DPM simulator does
    logs, written = {}, {}
    nodes = [site.head, *site.disks]
    kept = {id(node): [] for node in nodes}       # per node, its kept lines in site order
    dropped = Counter()                           # per node, its lines lost in the gap
    for ln in site.lines:
        if not ln.lost:
            kept[id(ln.node)].append(ln)
        elif ln.lost == "gap":
            dropped[id(ln.node)] += 1
    for node in nodes:
        path = Path(f"{prefix}.{node.host}{suffix}")
        gap = site.gap if node is site.head else None
        logs[node.host] = path
        written[node.host] = write_node_log(path, node, sorted(kept[id(node)], key=_instant), cfg,
                                            gap, rng, dropped=dropped[id(node)])
    paths = {name: Path(f"{prefix}.{name}.csv") for name in ("calls", "puts", "checksums", "capacity", "fs_events")}
    write_csv(paths["calls"], CALL_COLUMNS, truth.calls)
    write_csv(paths["puts"], PUT_COLUMNS, truth.puts)
    write_csv(paths["checksums"], CHECKSUM_COLUMNS, truth.checksums)
    write_csv(paths["capacity"], CAPACITY_COLUMNS, truth.capacity)
    write_csv(paths["fs_events"], FS_EVENT_COLUMNS, truth.fs_events)
    summary = _summary(cfg, site, truth, written)
    paths["summary"] = Path(f"{prefix}.summary.json")
    paths["summary"].write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return DomeResult(cfg, site, truth, logs, written, paths, summary)


_instant = attrgetter("t")


def _summary(cfg, site: Site, truth: DomeTruth, written: dict) -> dict:
    lost = Counter(f"{ln.node.host}:{ln.lost}" for ln in site.lines if ln.lost)
    return {
        "envelope": cfg.envelope, "stamp": cfg.stamp, "generation": cfg.generation,
        "whole_seconds": cfg.whole_seconds, "start_ms": site.t0, "end_ms": site.t_end,
        "pids": {n.host: [life.pid for life in n.lives] for n in [site.head, *site.disks]},
        "lines_written": {h: len(w) for h, w in written.items()},
        "dmlite_lines_written": {h: sum(1 for x in w if isinstance(x, Line)) for h, w in written.items()},
        "foreign_lines": {h: sum(1 for x in w if x is None) for h, w in written.items()},
        "lost_lines": dict(sorted(lost.items())),
        "journald_dropped": sum(1 for ln in site.lines if ln.lost == "gap"),
        # per node: what its journald's `Suppressed N messages` notice says (written where
        # the envelope shows other programs' lines: messages, journal)
        "journald_dropped_lines": dict(sorted(Counter(
            ln.node.host for ln in site.lines if ln.lost == "gap").items())),
        "calls": len(truth.calls), "cut_calls": sum(r["cut"] for r in truth.calls),
        "puts": len(truth.puts), "put_status": dict(sorted(Counter(r["status"] for r in truth.puts).items())),
        "checksum_waits": len(truth.checksums),
        "checksum_outcomes": dict(sorted(Counter(r["outcome"] for r in truth.checksums).items())),
        "checksum_overlaps": sum(r["overlap"] for r in truth.checksums),
        "capacity_lines": len(truth.capacity), "fs_events": len(truth.fs_events),
        "calls_not_logged": site.not_logged, **dict(truth.counts),
    }
