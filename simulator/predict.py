"""Run a calibrated model at several seeds and summarise its phases (issue 15).

`phase_table` turns request records (observed, or the model's ground truth) into
(op, phase) -> values; `predict` runs one SimConfig at each seed and pools them, keeping
each seed's quantiles for the spread; `fit_check` says whether the model at the current
settings reproduces the observed medians. Of each model run only its `RunSummary` is
kept: the compiled model returns it without the records (native/src/model_summary.rs,
`run_summary` here the reference).
"""

from __future__ import annotations

from itertools import repeat

from dpmstream.parsers import extension
from dpmstream.parsers.records import PHASES
from dpmstream.simulator import native_model
from dpmstream.simulator.estimators import quantile, quantiles
from dpmstream.simulator.config import SimConfig

QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
PHASE_NAMES = tuple(phase for _, phase in PHASES)
FIT_TOLERANCE = 0.10
FIT_FLOOR_S = 0.010     # a phase near 0 (no queue) fits within 10 ms: 0 against 8 ms is no miss
MIN_COUNT = 20          # phases measured fewer times than this are not checked


def phase_table(records: list[dict]) -> dict[tuple[str, str], list[int]]:
    """(op, phase) -> the phase's values in ms, over every request record of that op,
    sorted (a phase no record of the op has is left out). Sorted once here: its readers
    take quantiles, each of which sorts what it gets, and a sorted list sorts in one pass
    (issue 30: whatif sorted each list three times). In the extension where it is built
    (native/src/calibrate_columns.rs phase_columns, issue 30: ~25 M instructions of
    Python on the thesis log's requests), for int values; python_phase_table is the
    reference."""
    return _phase_columns(records, PHASES)


def python_phase_table(records: list[dict], fields=PHASES) -> dict[tuple[str, str], list[int]]:
    """`phase_table` in Python, the reference (`fields`: PHASES, as the compiled one takes
    them)."""
    table: dict[tuple[str, str], list[int]] = {}
    for op in ("put", "get"):
        mine = [r for r in records if r.get("op") == op]
        for field_name, phase in fields:
            # each value read in C (dict.get mapped), not by a Python call a record (issue 30)
            values = [v for v in map(dict.get, mine, repeat(field_name)) if v is not None]
            if values:
                values.sort()
                table[(op, phase)] = values
    return table


_phase_columns = extension.compiled_else("phase_columns", python_phase_table)


# RunSummary, Prediction and FitLine are plain classes, not dataclasses: every report's
# what-if imports them, and a dataclass compiles its generated methods as its module is
# imported (issue 30).

class RunSummary:
    """What a prediction keeps of one model run."""

    __slots__ = ("requests", "table", "growth", "observed")

    def __init__(self, requests: int, table: dict, growth: dict, observed: list):
        self.requests = requests
        self.table = table           # phase_table, each list sorted
        self.growth = growth         # observe.growth
        self.observed = observed     # observe.summaries of the observations asked for


def run_summary(requests, calls, observations=()) -> RunSummary:
    """The RunSummary of a run's records (the compiled model's twin: model_summary.rs)."""
    # Imported here: the compiled model summarises its runs itself, so a report's
    # what-if never needs observe.py (~7 M instructions of import, issue 30).
    from dpmstream.simulator.observe import growth, records, summaries

    requests, calls = records(requests, calls)
    return RunSummary(len(requests), phase_table(requests), growth(requests, calls),
                      summaries(list(observations), requests, calls))


def summarise(values) -> dict[str, float]:
    """p50/p95/p99 in seconds."""
    return {name: value / 1000 for (name, _), value in
            zip(QUANTILES, quantiles(values, [q for _, q in QUANTILES]))}


class Prediction:
    """A SimConfig's runs at each seed: the phases' quantiles pooled and per seed."""

    __slots__ = ("config", "seeds", "pooled", "by_seed", "requests", "observed", "growth")

    def __init__(self, config: SimConfig, seeds: tuple[int, ...]):
        self.config, self.seeds = config, seeds
        self.pooled: dict = {}       # (op, phase) -> {p50, p95, p99} over all seeds
        self.by_seed: dict = {}      # (op, phase) -> [{p50, p95, p99} per seed]
        self.requests = 0
        self.observed: list = []     # per seed: the observations' summaries
        self.growth: list = []       # per seed: observe.growth of its run

    def spread(self, key, name: str) -> tuple[float, float]:
        values = [s[name] for s in self.by_seed.get(key, [])]
        return (min(values), max(values)) if values else (float("nan"), float("nan"))


def limit_model(config: SimConfig, model_requests: int) -> tuple[SimConfig, bool]:
    """The model of a whole log cut to `model_requests` requests (a long log's what-if
    needs its shape, not its length), and whether it was cut."""
    if config.arrivals is not None and len(config.arrivals) > model_requests:
        return config.replace(arrivals=config.arrivals[:model_requests]), True
    if config.requests is not None and config.requests > model_requests:
        return config.replace(requests=model_requests), True
    return config, False


def model_runs(config: SimConfig, seeds, observations=()):
    """The RunSummary of a model run that writes no log, at each seed in turn: the
    compiled model's where it is built and covers the config (native_model.py, the same
    summary), else that of simulate(config, None)'s records."""
    same_but_seed = None
    for seed in seeds:
        seeded = config.replace(seed=seed)
        if native_model.available() and native_model.unsupported(seeded) is None:
            if same_but_seed is None:       # the service times' values, made once
                same_but_seed = native_model.spec(seeded)
            yield RunSummary(*native_model.run_summary(seeded, observations, same_but_seed))
            continue
        from dpmstream.simulator.run import simulate   # the Python model: rarely needed here

        result = simulate(seeded, None)
        yield run_summary(result.requests, result.calls, observations)


def predict(config: SimConfig, seeds=(1, 2, 3), observations=()) -> Prediction:
    """Run `config` at each seed and pool the request records of its ground truth;
    measure `observations` (observe.py) and the queues' growth on each seed's run. The
    runs write no logs (model_runs): only their truth is read."""
    out = Prediction(config, tuple(seeds))
    pooled: dict[tuple[str, str], list[int]] = {}
    for run in model_runs(config, seeds, observations):
        out.requests += run.requests
        out.observed.append(run.observed)
        out.growth.append(run.growth)
        for key, values in run.table.items():
            # Sorted, the pooled values are the seeds' sorted runs, which the pooled
            # quantiles' sort merges instead of sorting afresh (the same values, cheaper).
            pooled.setdefault(key, []).extend(values)
            out.by_seed.setdefault(key, []).append(summarise(values))
    out.pooled = {key: dict(summarise(values), count=len(values)) for key, values in pooled.items()}
    return out


class FitLine:
    """One (op, phase): the observed and the modelled p50, and whether they agree."""

    __slots__ = ("op", "phase", "observed", "modelled", "ok")

    def __init__(self, op: str, phase: str, observed: float, modelled: float, ok: bool):
        self.op, self.phase = op, phase
        self.observed = observed     # p50, s
        self.modelled, self.ok = modelled, ok


def fit_check(observed: dict, modelled: Prediction, floor_s: float) -> list[FitLine]:
    """Each (op, phase) measured at least MIN_COUNT times: does the model's p50 lie
    within 10% of the observed one (or within `floor_s`, twice the stamps' resolution,
    and at least FIT_FLOOR_S)?"""
    floor_s = max(floor_s, FIT_FLOOR_S)
    lines = []
    for key, values in sorted(observed.items()):
        if len(values) < MIN_COUNT or key not in modelled.pooled:
            continue
        obs = quantile(values, 0.5) / 1000
        mod = modelled.pooled[key]["p50"]
        ok = abs(mod - obs) <= max(FIT_TOLERANCE * obs, floor_s)
        lines.append(FitLine(key[0], key[1], obs, mod, ok))
    return lines


# Why a phase may miss: what in the model sets it.
MISS_HINTS = {
    "auth": "authentication is resampled: the fast threads or the backlog differ",
    "request": "the put/get call is resampled: the fast threads differ",
    "queue": "the wait for a slow thread: the slow-thread count (a lower bound from the log) "
             "or the processing time is off",
    "proc": "processing: the name-server lock (directories, hold time) or the own work is off",
    "poll": "the number of polls: the fitted back-off does not match the clients",
    "ready_wait": "it moves in whole poll intervals: queue+proc near a poll instant (or a "
                  "back-off fitted wrong) moves its median a whole step",
    "transfer": "the transfer is resampled: the client behaves differently",
    "done": "putdone/relfiles are resampled",
    "total": "follows from the other phases (ready_wait above all)",
}
