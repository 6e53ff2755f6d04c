"""Service-time distributions of the model, in integer milliseconds.

Each is a log-normal given by its median and shape; the medians are picked so that the
thesis findings show clearly: processing a put (about 0.5 s, of which a DPNS create
holding its directory lock about 35 ms) is slow next to the fast-thread calls (tens of
ms), so 20 slow threads behind 75 concurrent clients build a queue, 70 do not, and one
shared directory turns the DPNS lock into the bottleneck.

The three are plain classes, not dataclasses: every report's what-if imports them, and a
frozen dataclass compiles six generated methods as its module is imported (~1.4 ms CPU
of a report's ~190 for these three, issue 30). They keep a frozen dataclass's ways
(parsers/plain.Frozen): compared, hashed and shown by their fields, set once, and
`replace`.
"""

from __future__ import annotations

import math
import random

from dpmstream.parsers.plain import Frozen


class Dist(Frozen):
    """A log-normal service time: its median (ms), its shape and its floor (ms)."""

    __slots__ = FIELDS = ("median_ms", "sigma", "min_ms")

    def __init__(self, median_ms: float, sigma: float = 0.3, min_ms: int = 0):
        put = object.__setattr__
        put(self, "median_ms", median_ms)
        put(self, "sigma", sigma)
        put(self, "min_ms", min_ms)

    def draw(self, rng: random.Random) -> int:
        if self.sigma == 0:
            value = self.median_ms
        else:
            value = self.median_ms * math.exp(rng.gauss(0.0, self.sigma))
        value = round(value)    # an int (one draw per step of every model run: no max())
        return value if value > self.min_ms else self.min_ms


class Empirical(Frozen):
    """A distribution measured on a log: each draw is one of the measured values, picked
    uniformly (a resample), so nothing is assumed about its shape."""

    __slots__ = FIELDS = ("values",)

    def __init__(self, values: tuple[int, ...]):
        if not values:
            raise ValueError("an empirical distribution needs at least one value")
        object.__setattr__(self, "values", values)

    def draw(self, rng: random.Random) -> int:
        return self.values[int(rng.random() * len(self.values))]

    @property
    def median_ms(self) -> float:
        ordered = sorted(self.values)
        return float(ordered[len(ordered) // 2])


# The model's service time of each step, each a Dist or an Empirical, and its default.
DEFAULTS = {
    "net": Dist(1.0, 0.5),              # one-way client <-> head node
    "auth": Dist(20.0, 0.3, 1),         # GSI handshake after accept
    "put_call": Dist(4.0, 0.4, 1),      # put/get: DB insert before queueing
    "reply": Dist(1.0, 0.5),            # queueing -> `returns` logged
    "status_call": Dist(2.0, 0.4),
    "done_call": Dist(6.0, 0.4, 1),     # putdone/relfiles
    "abort_call": Dist(3.0, 0.4),
    "plain_call": Dist(2.0, 0.5),       # ping, getpools
    "slow_pickup": Dist(1.0, 0.5),      # queued -> a free slow thread logs `processing`
    "proc_put_pre": Dist(300.0, 0.25, 5),   # request and space checks before the DPNS
    "proc_get_pre": Dist(250.0, 0.25, 5),
    "proc_post": Dist(150.0, 0.25, 1),      # after the last file: status updates
    "select": Dist(2.0, 0.5),               # filesystem/replica choice per file
    "dpns_creat": Dist(35.0, 0.25, 1),      # held under the parent directory's lock
    "dpns_creat_dirs": (),                  # the hold of each directory of SimConfig.dir_shares
                                            # (in order; dpns_creat where none is given)
    "dpns_statg": Dist(3.0, 0.4, 1),
    "dpns_reply": Dist(1.0, 0.5),
    "transfer": Dist(60.0, 0.5, 1),         # client-side data transfer
    "get_transfer": Dist(60.0, 0.5, 1),     # a get's: SUCCESS answered -> relfiles sent
    "think": Dist(10.0, 0.5),               # client pause between cycles
    "retry": Dist(300.0, 0.5, 20),          # refused / failed connection -> retry
    "restart_retry": Dist(1500.0, 0.3, 100),
}


class ServiceTimes(Frozen):
    """The model's service time of each step (DEFAULTS), each given by its name."""

    __slots__ = FIELDS = tuple(DEFAULTS)

    def __init__(self, **given):
        unknown = given.keys() - DEFAULTS.keys()
        if unknown:
            raise TypeError(f"ServiceTimes has no service time {', '.join(sorted(unknown))}")
        put = object.__setattr__
        for name, default in DEFAULTS.items():
            put(self, name, given.get(name, default))
