"""Lines that are not the real daemon's work: another DPM process (a probe's ping served
by a helper process) and lines stamped far in the future.

Both come at random points of the run: `Sprinkle` spreads them over the run's progress
(the share of the request budget, duration or line target used), checked at every
cycle start, so they land while the real daemon is busy however long the run is. Each
has its own random generator: the model's run is the same with them or without.
"""

from __future__ import annotations

import random

from dpmstream.simulator.identities import Client

# The monitoring host whose probe pings the DPM.
PROBE = Client(-1, "nagios01.cern.ch", "137.138.99.10",
               "/DC=ch/DC=cern/OU=computers/CN=nagios01.cern.ch", "0,0")
# A main-thread housekeeping line (no call, no request).
HOUSEKEEPING = "DP002 - dpm_pingdb error : Lost connection to MySQL server during query"


class Sprinkle:
    """`count` moments at random points of the run's progress; `fire(i)` runs for the
    i-th once the progress passes it, 0..999 ms after that cycle start."""

    def __init__(self, sim, count: int, rng: random.Random, fire):
        self.sim, self.rng, self.fire = sim, rng, fire
        self.points = sorted(rng.uniform(0.2, 0.95) for _ in range(count))
        self.fired = 0

    def on_cycle(self) -> None:
        progress = self.sim.progress()
        while self.points and progress >= self.points[0]:
            self.points.pop(0)
            self.sim.eng.after(self.rng.randint(0, 999), self.fire, self.fired)
            self.fired += 1


class StrayProcess:
    """Another process of the DPM daemon (pid `stray_pid`) logging now and then while the
    real one runs: a probe's ping served on its own threads (accept, DP092, returns 0),
    and every third time a main-thread housekeeping line instead. Its calls are ordinary
    call records of that pid; nothing of the real daemon changes."""

    def __init__(self, sim, rng: random.Random):
        self.sim, self.rng = sim, rng
        self.pid = sim.cfg.stray_pid
        self.free: list[int] = []
        self.threads = 0
        self.calls = 0
        self.main_lines = 0

    def fire(self, i: int) -> None:
        sim = self.sim
        if i % 3 == 2:
            sim.log.emit(sim.eng.now, self.pid, -1, "dpm_serv", HOUSEKEEPING)
            self.main_lines += 1
            return
        if self.free:
            tid = self.free.pop()
        else:
            tid, self.threads = self.threads, self.threads + 1
        self.calls += 1
        accepted = sim.log.emit(sim.eng.now, self.pid, tid, "dpm_serv",
                                f"[{PROBE.ip}] ({PROBE.host}): request accepted")
        sim.eng.after(sim.svc.auth.draw(self.rng), self._ping, tid, accepted)

    def _ping(self, tid: int, accepted: int) -> None:
        sim = self.sim
        opened = sim.log.emit(sim.eng.now, self.pid, tid, "dpm_srv_ping",
                              f"DP092 - ping request by {PROBE.dn} ({PROBE.ids}) from {PROBE.host}")
        call = sim.truth.new_call("dpm", self.pid, tid, "ping", PROBE.host, accepted, opened)
        sim.eng.after(sim.svc.plain_call.draw(self.rng), self._returns, tid, call)

    def _returns(self, tid: int, call) -> None:
        sim = self.sim
        call.returned(sim.log.emit(sim.eng.now, self.pid, tid, "dpm_srv_ping", "returns 0"), 0)
        self.free.append(tid)


class FutureLines:
    """Single DPM lines of the real daemon's pid stamped `future_ahead_s` ahead of the
    instant they are written (a clock glitch): by turns a ping's DP092 alone on a fast
    thread and a main-thread housekeeping line. The truth has no record for them."""

    def __init__(self, sim, rng: random.Random):
        self.sim, self.rng = sim, rng
        self.ahead_ms = int(round(sim.cfg.future_ahead_s * 1000))
        self.written = 0

    def fire(self, i: int) -> None:
        sim = self.sim
        pid = sim.dpm.proc.pid
        if i % 2 == 0:
            tid = self.rng.randrange(sim.cfg.fthreads)
            sim.log.emit(sim.eng.now, pid, tid, "dpm_srv_ping",
                         f"DP092 - ping request by {PROBE.dn} ({PROBE.ids}) from {PROBE.host}",
                         ahead_ms=self.ahead_ms)
        else:
            sim.log.emit(sim.eng.now, pid, -1, "dpm_serv", HOUSEKEEPING, ahead_ms=self.ahead_ms)
        self.written += 1
