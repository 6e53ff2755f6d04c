"""Client behaviour: request cycles, status polling with back-off, retries.

A cycle: maybe a ping/getpools first, then a put (or get), status polls starting
125 ms after the reply and doubling up to 4 s (SimConfig.poll_*), the transfer once the answer is SUCCESS,
then putdone (or relfiles). Some clients abort after a QUEUED/ACTIVE answer, some
vanish (no polls at all, or no putdone/relfiles). A refused or failed connection is
retried after a pause; a put/get retried after its connection died gets a new token.
Closed loop: each client runs `concurrency` streams of back-to-back cycles. Open loop
(`rate`): each Poisson arrival runs one cycle. Replayed (`arrivals`): each arrival a log
showed runs one cycle of its kind, at its instant, on its client.
"""

from __future__ import annotations

from dpmstream.simulator.identities import Client, Namespace
from dpmstream.simulator.model import ACTIVE, PLAIN_OPS, QUEUED, SUCCESS, Conn

MAX_ATTEMPTS = 20         # per call: a client gives up the cycle after that many
# Other name-server clients (SimConfig.ns_other_clients): an SRM front end on its own
# machine, and the disk nodes, which call with their host certificates.
SRM_HOST = "dpmsrm01.cern.ch"
DISK_NODE = Client(-1, "disk.cern.ch", "", "/DC=ch/DC=cern/OU=computers/CN=disk.cern.ch", "0,0")


def _ignore(*_args) -> None:
    """The answer to a call nobody in the model waits for."""


class Budget:
    """How many cycles may still start: a request count, a line target, or neither."""

    def __init__(self, requests: int | None, lines: int | None, log):
        self.requests, self.lines, self.log = requests, lines, log
        self.started = 0
        self.on_cycle: list = []      # callbacks run at each cycle start (strays.Sprinkle)

    def take(self) -> bool:
        if self.requests is not None and self.started >= self.requests:
            return False
        if self.lines is not None and self.log.count >= self.lines:
            return False
        self.started += 1
        for callback in self.on_cycle:
            callback()
        return True


class Stream:
    def __init__(self, sim, client, one_shot: bool = False):
        self.sim, self.client, self.one_shot = sim, client, one_shot
        self.op = "put"
        self.abort = False
        self.abandon = None
        self.backoff = sim.cfg.poll_first_ms

    def cycle(self, op: str | None = None) -> bool:
        """Start the next cycle (a put or get as `op` says, else drawn from the mix);
        False when the budget is spent."""
        sim = self.sim
        if not sim.budget.take():
            return False
        rng, cfg = sim.rng, sim.cfg
        self.op = "get" if rng.random() < cfg.get_fraction else "put"
        if op is not None:     # replayed: the draw above still happens, for the others
            self.op = op
        self.abort = rng.random() < cfg.abort_rate
        self.abandon = None
        if rng.random() < cfg.abandon_rate:
            self.abandon = rng.choice(("after_request", "after_ready"))
        if rng.random() < cfg.plain_rate:
            self.send(rng.choice(PLAIN_OPS))
        else:
            self.send(self.op)
        return True

    def send(self, kind: str, req=None, attempt: int = 1) -> None:
        sim = self.sim
        if kind in ("put", "get") and attempt == 1 and sim.cfg.ns_other_clients:
            # The SRM front end, on its own machine, checks the client's directory first.
            sim.dpns.call("statg", self.client, f"{Namespace.BASE}/{self.client.short}", "-",
                          _ignore, caller=SRM_HOST)
        sim.eng.after(sim.svc.net.draw(sim.rng), sim.dpm.connect, Conn(self, kind, req, attempt))

    def _later(self, delay: int, kind: str, req=None) -> None:
        self.sim.eng.after(delay, self.send, kind, req)

    def _next(self) -> None:
        if not self.one_shot:
            self.sim.eng.after(self.sim.svc.think.draw(self.sim.rng), self.cycle)

    def on_reply(self, conn: Conn, result) -> None:
        kind, svc, rng = conn.kind, self.sim.svc, self.sim.rng
        if kind in PLAIN_OPS:
            self.send(self.op)
        elif kind in ("put", "get"):
            rc, req = result
            if rc != 0 or self.abandon == "after_request":
                self._next()
                return
            self.backoff = self.sim.cfg.poll_first_ms
            self._later(self.backoff, "status", req)
        elif kind == "status":
            req = conn.req
            if result == SUCCESS:
                if self.abandon == "after_ready":
                    self._next()
                    return
                closing = "putdone" if req.op == "put" else "relfiles"
                pause = (svc.transfer if req.op == "put" else svc.get_transfer).draw(rng)
                if self.sim.cfg.ns_other_clients:  # the disk node looks the file up at the end
                    disk = self.sim.namespace.disk().split(":")[0]
                    self.sim.eng.after(max(pause - 1, 0), self._disk_node_call, disk, req)
                self._later(pause, closing, req)
            elif result in (QUEUED, ACTIVE):
                if self.abort:
                    self.send("abortreq", req)
                else:
                    cfg = self.sim.cfg
                    self.backoff = min(int(round(self.backoff * cfg.poll_factor)), cfg.poll_max_ms)
                    self._later(self.backoff, "status", req)
            else:                                 # FAILED (or ABORTED)
                self._next()
        else:                                     # putdone, relfiles, abortreq
            self._next()

    def _disk_node_call(self, disk: str, req) -> None:
        self.sim.dpns.call("statg", DISK_NODE, req.paths[0], req.guids[0], _ignore, caller=disk)

    def on_fail(self, conn: Conn, restart: bool) -> None:
        """Connection refused, authentication failed, or the daemon died mid-call."""
        sim = self.sim
        if conn.attempt >= MAX_ATTEMPTS:
            self._next()
            return
        delay = (sim.svc.restart_retry if restart else sim.svc.retry).draw(sim.rng)
        if conn.kind in PLAIN_OPS:        # not worth retrying: go on with the request
            sim.eng.after(delay, self.send, self.op)
        else:
            sim.eng.after(delay, self.send, conn.kind, conn.req, conn.attempt + 1)


class Arrivals:
    """Open loop: cycles arrive as a Poisson process, each on a random client."""

    def __init__(self, sim, rate_per_s: float):
        self.sim, self.mean_gap_ms = sim, 1000.0 / rate_per_s

    def start(self) -> None:
        self._schedule()

    def _schedule(self) -> None:
        gap = int(round(self.sim.rng.expovariate(1.0 / self.mean_gap_ms)))
        self.sim.eng.after(gap, self._arrive)

    def _arrive(self) -> None:
        sim = self.sim
        if Stream(sim, sim.rng.choice(sim.clients), one_shot=True).cycle():
            self._schedule()


class Replayed:
    """Replayed load: one cycle per (offset ms, op, client index), at start + offset."""

    def __init__(self, sim, arrivals):
        self.sim, self.arrivals = sim, arrivals

    def start(self) -> None:
        sim = self.sim
        clients = sim.clients
        for offset, op, client in self.arrivals:
            stream = Stream(sim, clients[client % len(clients)], one_shot=True)
            sim.eng.at(sim.start + int(offset), stream.cycle, op)
