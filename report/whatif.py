"""The report's what-if answer: the same workload with the slow threads doubled (issue 15).

It calibrates the simulator on the report's records and runs it at the current settings
and with twice the slow threads, as `dpmstream whatif --sthreads 2N` would with the same
seeds and model size, so both give the same numbers.
"""

from __future__ import annotations

PHASES_SHOWN = ("queue", "proc", "ready_wait", "total")
SEEDS = (1, 2)
MODEL_REQUESTS = 1000


class WhatIfAnswer:
    """The what-if section's numbers, or the reason there are none."""

    # A plain class, not a dataclass: every report imports it, and a dataclass compiles
    # its generated methods as its module is imported (issue 30).
    __slots__ = ("sthreads_now", "sthreads_then", "rows", "fits", "misses", "reason")

    def __init__(self, sthreads_now: int = 0, sthreads_then: int = 0, rows: list | None = None,
                 fits: bool = False, misses: list | None = None, reason: str = ""):
        self.sthreads_now, self.sthreads_then = sthreads_now, sthreads_then
        self.rows = [] if rows is None else rows   # (op, phase, now p50 s, then p50 s)
        self.fits = fits                   # the current model reproduces the log
        self.misses = [] if misses is None else misses   # phases it does not reproduce
        self.reason = reason               # why there is no answer, if there is none


def doubled_slow_threads(requests: list[dict], calls: list[dict], seeds=SEEDS,
                         model_requests: int = MODEL_REQUESTS) -> WhatIfAnswer:
    from dpmstream.simulator.calibrate import calibrate
    from dpmstream.simulator.predict import fit_check, limit_model, phase_table, predict

    try:
        cal = calibrate(requests, calls)
    except ValueError as exc:
        return WhatIfAnswer(reason=str(exc))
    current, _ = limit_model(cal.config, model_requests)
    target = current.replace(sthreads=2 * current.sthreads)
    now, then = predict(current, seeds), predict(target, seeds)
    checks = fit_check(phase_table(requests), now, 2 * cal.resolution_ms / 1000)
    answer = WhatIfAnswer(current.sthreads, target.sthreads,
                          fits=bool(checks) and all(c.ok for c in checks),
                          misses=[f"{c.op} {c.phase}" for c in checks if not c.ok])
    for (op, phase), quantiles in sorted(now.pooled.items()):
        if phase in PHASES_SHOWN and (op, phase) in then.pooled:
            answer.rows.append((op, phase, quantiles["p50"], then.pooled[(op, phase)]["p50"]))
    if not answer.rows:
        answer.reason = "the model produced no put or get to compare"
    return answer

