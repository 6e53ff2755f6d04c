"""Wire the model together, run it, and write the two logs and the two truth files.

    from dpmstream.simulator import SimConfig, simulate
    result = simulate(SimConfig(sthreads=70), "out/run")
    result.log_path, result.requests     # paths, and the truth records (ms integers)

Logs shaped differently (issue 11) are knobs of SimConfig: a stray process, an
overlapping restart, one rsyslog file for both daemons (PREFIX.messages), a clock
stepped back, lines stamped far ahead. Each has its own random generator, so turning
one on leaves the model's run (and the truth of the real daemon) alone.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from dpmstream.parsers.records import PHASES, STATUSES
from dpmstream.simulator.clients import Arrivals, Budget, Replayed, Stream
from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.daemon import Dpm
from dpmstream.simulator.dpns import NameServer
from dpmstream.simulator.engine import Engine
from dpmstream.simulator.identities import Namespace, make_clients
from dpmstream.simulator.logwriter import LogWriter
from dpmstream.simulator.stamps import Clock, StampFormatter
from dpmstream.simulator.strays import FutureLines, Sprinkle, StrayProcess
from dpmstream.simulator.syslog import SyslogWriter
from dpmstream.simulator.truth import Truth, write_calls_csv, write_requests_csv


@dataclass
class SimResult:
    config: SimConfig
    # The files written (None each when simulate() was given no prefix: nothing written)
    log_path: Path | None          # PREFIX.log       the DPM daemon log
    dpns_log_path: Path | None     # PREFIX.dpns.log  the name-server log
    requests_path: Path | None     # PREFIX.requests.csv
    calls_path: Path | None        # PREFIX.calls.csv
    requests: list[dict]           # truth records, times in integer ms (parsers/records.py)
    calls: list[dict]
    dpm_lines: int
    dpns_lines: int
    late_lines: int                # lines written after their stamp (out of order)
    dpm_pids: list[int]            # more than one after a restart
    dpns_pid: int
    start_ms: int
    end_ms: int                    # the last simulated instant
    refused: int                   # connections refused (backlog full or daemon down)
    auth_failures: int
    killed_calls: int              # calls cut by a restart
    cycles: int                    # request cycles the clients started
    stats: dict = field(default_factory=dict)
    messages_path: Path | None = None   # PREFIX.messages (syslog_file): both daemons via rsyslog

    def summary(self) -> str:
        return format_summary(self)


class _Sim:
    """The objects of one run; clients reach the daemon and each other through it."""

    def __init__(self, cfg: SimConfig, prefix: Path | None):
        self.cfg, self.svc = cfg, cfg.service
        self.rng = random.Random(cfg.seed)
        # Jitter has its own generator: turning it on or off leaves the model's run alone.
        jitter_rng = random.Random(f"{cfg.seed}/jitter")
        self.start = cfg.start_ms()
        clock = Clock()
        if cfg.clock_step_at is not None:
            clock = Clock(self.start + int(round(cfg.clock_step_at * 1000)),
                          int(round(cfg.clock_step_s * 1000)))
        stamps = StampFormatter(cfg.tz, cfg.whole_seconds, clock)
        dpns_stamps = StampFormatter(cfg.tz, cfg.whole_seconds, clock)
        self.paths = {
            "log": Path(f"{prefix}.log"), "dpns": Path(f"{prefix}.dpns.log"),
            "requests": Path(f"{prefix}.requests.csv"), "calls": Path(f"{prefix}.calls.csv"),
        } if prefix is not None else dict.fromkeys(("log", "dpns", "requests", "calls"))
        self.syslog = None
        taps = (None, None)
        if cfg.syslog_file and prefix is not None:
            self.paths["messages"] = Path(f"{prefix}.messages")
            self.syslog = SyslogWriter(self.paths["messages"], cfg.host, cfg.tz, clock,
                                       random.Random(f"{cfg.seed}/syslog"))
            taps = (self.syslog.tap("dpm"), self.syslog.tap("dpns"))
        self.log = LogWriter(self.paths["log"], stamps, cfg.jitter_rate, cfg.jitter_ms, jitter_rng,
                             taps[0])
        gap = None
        if cfg.dpns_gap is not None:
            gap = tuple(self.start + int(round(s * 1000)) for s in cfg.dpns_gap)
        self.dpns_log = LogWriter(self.paths["dpns"], dpns_stamps, cfg.jitter_rate, cfg.jitter_ms,
                                  jitter_rng, taps[1], drop=gap)
        writers = (self.log, self.dpns_log) + ((self.syslog,) if self.syslog else ())
        self.eng = Engine(self.start, writers if prefix is not None else ())
        self.truth = Truth(cfg.host)
        self.truth.now = lambda: self.eng.now
        self.clients = make_clients(cfg.clients)
        self.namespace = Namespace(cfg.host, cfg.same_dir, self.rng, cfg.dirs, cfg.dir_shares)
        holds = dict(zip(self.namespace.weighted, self.svc.dpns_creat_dirs))
        self.dpns = NameServer(self.eng, self.rng, self.svc, self.dpns_log, self.truth,
                               cfg.dpns_pid, cfg.dpns_threads, cfg.ns_head_client or cfg.host, holds)
        self.dpm = Dpm(self.eng, self.rng, cfg, self.log, self.dpns, self.truth, self.namespace)
        self.budget = Budget(cfg.request_budget(), cfg.lines, self.log)
        self.strays = self.future = None
        if cfg.stray_lines:
            self.strays = StrayProcess(self, random.Random(f"{cfg.seed}/stray"))
            sprinkle = Sprinkle(self, cfg.stray_lines, random.Random(f"{cfg.seed}/stray-at"),
                                self.strays.fire)
            self.budget.on_cycle.append(sprinkle.on_cycle)
        if cfg.future_lines:
            self.future = FutureLines(self, random.Random(f"{cfg.seed}/future"))
            sprinkle = Sprinkle(self, cfg.future_lines, random.Random(f"{cfg.seed}/future-at"),
                                self.future.fire)
            self.budget.on_cycle.append(sprinkle.on_cycle)

    def progress(self) -> float:
        """How far the run is: the share of its request budget, duration or line target
        used (the largest, when several bound it)."""
        cfg, shares = self.cfg, []
        budget = cfg.request_budget()
        if budget:
            shares.append(self.budget.started / budget)
        if cfg.duration is not None:
            shares.append((self.eng.now - self.start) / (cfg.duration * 1000))
        if cfg.lines:
            shares.append(self.log.count / cfg.lines)
        return max(shares, default=1.0)

    def run(self) -> None:
        cfg, eng = self.cfg, self.eng
        self.dpm.start()
        if cfg.arrivals is not None:
            Replayed(self, cfg.arrivals).start()
        elif cfg.rate is not None:
            Arrivals(self, cfg.rate).start()
        else:
            for client in self.clients:
                for _ in range(cfg.concurrency):
                    # Streams start spread over the first second, not in one burst.
                    eng.after(self.rng.randint(0, 999), Stream(self, client).cycle)
        if cfg.restart_at is not None:
            eng.at(self.start + int(round(cfg.restart_at * 1000)), self.dpm.restart)
        until = None if cfg.duration is None else self.start + int(round(cfg.duration * 1000))
        eng.run(until)
        self.log.close()
        self.dpns_log.close()
        if self.syslog is not None:
            self.syslog.close()


def simulate(config: SimConfig | None = None, out: str | Path | None = "sim") -> SimResult:
    """Run one simulation; write PREFIX.log, PREFIX.dpns.log, PREFIX.requests.csv and
    PREFIX.calls.csv for the prefix `out` (its directory is created). With `out` None
    nothing is written (the result's paths are None): the run and its truth records are
    the same, without the cost of formatting and ordering lines nobody reads."""
    cfg = config or SimConfig()
    cfg.validate()
    prefix = Path(out) if out is not None else None
    if prefix is not None:
        prefix.parent.mkdir(parents=True, exist_ok=True)
    sim = _Sim(cfg, prefix)
    sim.run()
    sim.truth.ns_read = sim.dpns_log.count > 0
    printed = [w.max_printed for w in (sim.log, sim.dpns_log) if w.max_printed is not None]
    requests = sim.truth.request_records(max(printed, default=None))
    calls = sim.truth.call_records()
    if prefix is not None:
        write_requests_csv(sim.paths["requests"], requests)
        write_calls_csv(sim.paths["calls"], calls)
    return SimResult(
        config=cfg, log_path=sim.paths["log"], dpns_log_path=sim.paths["dpns"],
        requests_path=sim.paths["requests"], calls_path=sim.paths["calls"],
        requests=requests, calls=calls,
        dpm_lines=sim.log.count, dpns_lines=sim.dpns_log.count,
        late_lines=sim.log.late + sim.dpns_log.late,
        dpm_pids=list(sim.dpm.pids), dpns_pid=cfg.dpns_pid,
        start_ms=sim.start, end_ms=sim.eng.now,
        refused=sim.dpm.refused, auth_failures=sim.dpm.auth_failures,
        killed_calls=sim.dpm.killed_calls, cycles=sim.budget.started,
        stats={
            "dpns_max_lock_waiters": sim.dpns.max_lock_waiters,
            "killed_runs": sim.dpm.killed_runs,
            "stray_calls": sim.strays.calls if sim.strays else 0,
            "stray_main_lines": sim.strays.main_lines if sim.strays else 0,
            "future_lines": sim.future.written if sim.future else 0,
            "syslog_lines": sim.syslog.count if sim.syslog else 0,
            "foreign_lines": sim.syslog.foreign if sim.syslog else 0,
        },
        messages_path=sim.paths.get("messages"),
    )


def phase_values(records: list[dict], field_name: str, op: str | None = None) -> list[int]:
    return [r[field_name] for r in records
            if r[field_name] is not None and (op is None or r["op"] == op)]


def format_summary(result: SimResult) -> str:
    cfg, reqs = result.config, result.requests
    out = [
        f"simulated {(result.end_ms - result.start_ms) / 1000:.1f} s: {result.cycles} cycles, "
        f"{cfg.clients} clients x {cfg.concurrency}, {cfg.fthreads} fast / {cfg.sthreads} slow threads, "
        f"seed {cfg.seed}",
        f"{result.log_path}: {result.dpm_lines} lines (pids {', '.join(map(str, result.dpm_pids))})",
        f"{result.dpns_log_path}: {result.dpns_lines} lines",
    ]
    if result.messages_path is not None:
        out.append(f"{result.messages_path}: {result.stats['syslog_lines']} daemon lines "
                   f"and {result.stats['foreign_lines']} of other programs (rsyslog)")
    out += [
        f"{result.requests_path}: {len(reqs)} requests",
        f"{result.calls_path}: {len(result.calls)} calls",
    ]
    for op in ("put", "get"):
        mine = [r for r in reqs if r["op"] == op]
        if mine:
            counts = ", ".join(f"{s} {sum(1 for r in mine if r['status'] == s)}" for s in STATUSES)
            out.append(f"{op}: {len(mine)} ({counts})")
    out.append(f"refused connections {result.refused}, auth failures {result.auth_failures}, "
               f"calls cut by a restart {result.killed_calls}, lines written late {result.late_lines}")
    stats = result.stats
    if stats.get("killed_runs"):
        out.append(f"processing runs cut by a restart {stats['killed_runs']} (processed again)")
    if stats.get("stray_calls") or stats.get("stray_main_lines"):
        out.append(f"another process (pid {cfg.stray_pid}): {stats['stray_calls']} pings, "
                   f"{stats['stray_main_lines']} main-thread lines")
    if stats.get("future_lines"):
        out.append(f"lines stamped {cfg.future_ahead_s:g} s ahead: {stats['future_lines']}")
    if cfg.clock_step_at is not None:
        out.append(f"clock stepped back {cfg.clock_step_s:g} s at {cfg.clock_step_at:g} s")
    means, medians = [], []
    for field_name, phase in PHASES:
        values = phase_values(reqs, field_name)
        if values:
            means.append(f"{phase} {statistics.fmean(values) / 1000:.3f}")
            medians.append(f"{phase} {statistics.median(values) / 1000:.3f}")
    out.append("mean s:   " + "  ".join(means))
    out.append("median s: " + "  ".join(medians))
    return "\n".join(out)
