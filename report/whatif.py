"""The report's what-if answer: the same workload with the slow threads doubled (issue 15).

It calibrates the simulator on the report's records and runs it at the current settings
and with twice the slow threads, as `dpmstream whatif --sthreads 2N` would with the same
seeds and model size, so both give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES_SHOWN = ("queue", "proc", "ready_wait", "total")
SEEDS = (1, 2)
MODEL_REQUESTS = 1000


@dataclass
class WhatIfAnswer:
    """The what-if section's numbers, or the reason there are none."""

    sthreads_now: int = 0
    sthreads_then: int = 0
    rows: list = field(default_factory=list)   # (op, phase, now p50 s, then p50 s)
    fits: bool = False                          # the current model reproduces the log
    misses: list = field(default_factory=list)  # phases it does not reproduce
    reason: str = ""                            # why there is no answer, if there is none


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

