"""Service-time distributions of the model, in integer milliseconds.

Each is a log-normal given by its median and shape; the medians are picked so that the
thesis findings show clearly: processing a put (about 0.5 s, of which a DPNS create
holding its directory lock about 35 ms) is slow next to the fast-thread calls (tens of
ms), so 20 slow threads behind 75 concurrent clients build a queue, 70 do not, and one
shared directory turns the DPNS lock into the bottleneck.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Dist:
    """A log-normal service time: its median (ms), its shape and its floor (ms)."""

    median_ms: float
    sigma: float = 0.3
    min_ms: int = 0

    def draw(self, rng: random.Random) -> int:
        if self.sigma == 0:
            value = self.median_ms
        else:
            value = self.median_ms * math.exp(rng.gauss(0.0, self.sigma))
        value = round(value)    # an int (one draw per step of every model run: no max())
        return value if value > self.min_ms else self.min_ms


@dataclass(frozen=True)
class Empirical:
    """A distribution measured on a log: each draw is one of the measured values, picked
    uniformly (a resample), so nothing is assumed about its shape."""
    values: tuple[int, ...]

    def __post_init__(self):
        if not self.values:
            raise ValueError("an empirical distribution needs at least one value")

    def draw(self, rng: random.Random) -> int:
        return self.values[int(rng.random() * len(self.values))]

    @property
    def median_ms(self) -> float:
        ordered = sorted(self.values)
        return float(ordered[len(ordered) // 2])


@dataclass(frozen=True)
class ServiceTimes:
    """The model's service time of each step, each a Dist or an Empirical."""

    net: Dist = Dist(1.0, 0.5)              # one-way client <-> head node
    auth: Dist = Dist(20.0, 0.3, 1)         # GSI handshake after accept
    put_call: Dist = Dist(4.0, 0.4, 1)      # put/get: DB insert before queueing
    reply: Dist = Dist(1.0, 0.5)            # queueing -> `returns` logged
    status_call: Dist = Dist(2.0, 0.4)
    done_call: Dist = Dist(6.0, 0.4, 1)     # putdone/relfiles
    abort_call: Dist = Dist(3.0, 0.4)
    plain_call: Dist = Dist(2.0, 0.5)       # ping, getpools
    slow_pickup: Dist = Dist(1.0, 0.5)      # queued -> a free slow thread logs `processing`
    proc_put_pre: Dist = Dist(300.0, 0.25, 5)   # request and space checks before the DPNS
    proc_get_pre: Dist = Dist(250.0, 0.25, 5)
    proc_post: Dist = Dist(150.0, 0.25, 1)      # after the last file: status updates
    select: Dist = Dist(2.0, 0.5)               # filesystem/replica choice per file
    dpns_creat: Dist = Dist(35.0, 0.25, 1)      # held under the parent directory's lock
    dpns_creat_dirs: tuple = ()                 # the hold of each directory of SimConfig.dir_shares
                                                # (in order; dpns_creat where none is given)
    dpns_statg: Dist = Dist(3.0, 0.4, 1)
    dpns_reply: Dist = Dist(1.0, 0.5)
    transfer: Dist = Dist(60.0, 0.5, 1)         # client-side data transfer
    get_transfer: Dist = Dist(60.0, 0.5, 1)     # a get's: SUCCESS answered -> relfiles sent
    think: Dist = Dist(10.0, 0.5)               # client pause between cycles
    retry: Dist = Dist(300.0, 0.5, 20)          # refused / failed connection -> retry
    restart_retry: Dist = Dist(1500.0, 0.3, 100)
