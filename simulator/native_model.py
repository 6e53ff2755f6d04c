"""The model-only run (`simulate(cfg, None)`, as predict.py runs it) in the compiled
extension (native/src/model.rs), for the configs it covers.

The compiled model draws from a twin of `random.Random` in the same order as the Python
model, which stays the reference: for the same config and seed both give exactly the
same records (tests/simulator/test_native_model.py). It returns the ground truth's
records themselves, made by truth.py's rules compiled (native/src/model_truth.rs): a
Python truth rebuilt from a raw one was two thirds of each run. Configs with what it
does not model (a restart, strays, a clock step, a log gap, a line target, other
name-server clients, a seed beyond 32 bits) run in Python: `unsupported` says why.
DPMSTREAM_PURE_PYTHON=1 turns it off; DPMSTREAM_REQUIRE_NATIVE=1 makes a missing
extension an error instead of a fallback.
"""

from __future__ import annotations

from array import array

from dpmstream.parsers import extension
from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.identities import Namespace, bag_counts, make_clients
from dpmstream.simulator.service import Dist, Empirical


def available() -> bool:
    """Whether model runs use the compiled model (where the config allows). Required: the
    Python model gives the same predictions, only slower, so a failed build would pass
    unseen (DPMSTREAM_REQUIRE_NATIVE makes it an error, extension.compiled)."""
    return extension.compiled("run_model", required="the compiled model") is not None


def unsupported(cfg: SimConfig) -> str | None:
    """Why the compiled model cannot run `cfg` (the Python model then does), or None."""
    reasons = [
        (cfg.restart_at is not None, "a restart"),
        (cfg.stray_lines > 0, "stray lines"),
        (cfg.future_lines > 0, "lines stamped ahead"),
        (cfg.clock_step_at is not None, "a clock step"),
        (cfg.whole_seconds, "whole-second stamps"),
        (cfg.dpns_gap is not None, "a gap in the DPNS log"),
        (cfg.lines is not None, "a line target"),
        (cfg.ns_other_clients, "other name-server clients"),
        (not (isinstance(cfg.seed, int) and 0 <= cfg.seed < 2**32), "a seed beyond 32 bits"),
    ]
    for name in cfg.service.FIELDS:
        value = getattr(cfg.service, name)
        values = value if name == "dpns_creat_dirs" else (value,)
        if not all(type(v) in (Dist, Empirical) for v in values):
            reasons.append((True, f"a service time {name} of another kind"))
    return next((why for bad, why in reasons if bad), None)


def _dist(d) -> tuple:
    if isinstance(d, Empirical):
        # A buffer of int64, which the extension copies whole (reading ~30 k ints as
        # Python objects for each of a prediction's runs was ~2 M instructions a run),
        # made from the tuple at once; values that are not ints (a float, cut as int()
        # cuts it) go one by one.
        try:
            return ("empirical", array("q", d.values))
        except TypeError:
            return ("empirical", array("q", map(int, d.values)))
    return ("lognormal", float(d.median_ms), float(d.sigma), int(d.min_ms))


# The plain values of the last ServiceTimes a spec was made of, with it: a prediction's
# configs (its seeds; the report's what-if's current and doubled slow threads) share one,
# and its measured distributions (~30 k values on the thesis log) were read again for each
# (issue 30). A ServiceTimes is frozen, and the one held here cannot be another's id.
_last_service: tuple = (None, None)


def _service_values(svc) -> tuple[dict, list]:
    """(spec's "service", its "holds") of `svc`."""
    global _last_service
    if _last_service[0] is not svc:
        _last_service = (svc, (
            {name: _dist(getattr(svc, name)) for name in svc.FIELDS
             if name not in ("dpns_creat_dirs", "restart_retry")},
            [_dist(d) for d in svc.dpns_creat_dirs]))
    return _last_service[1]


def spec(cfg: SimConfig) -> dict:
    """The plain values the compiled model reads (model.rs run_model)."""
    clients = make_clients(cfg.clients)
    weighted = [Namespace.weighted_dir(k) for k in range(len(cfg.dir_shares or ()))]
    start = cfg.start_ms()
    service, holds = _service_values(cfg.service)
    return {
        "service": service,
        "hosts": [c.host for c in clients], "shorts": [c.short for c in clients],
        "host": cfg.host, "ns_head": cfg.ns_head_client or cfg.host,
        "weighted": weighted, "holds": holds,
        "bag_counts": bag_counts(cfg.dir_shares) if cfg.dir_shares else None,
        "start_ms": start, "seed": cfg.seed,
        "fthreads": cfg.fthreads, "sthreads": cfg.sthreads, "dpns_threads": cfg.dpns_threads,
        "get_fraction": float(cfg.get_fraction), "abort_rate": float(cfg.abort_rate),
        "abandon_rate": float(cfg.abandon_rate), "plain_rate": float(cfg.plain_rate),
        "auth_fail_rate": float(cfg.auth_fail_rate), "put_fail_rate": float(cfg.put_fail_rate),
        "proc_fail_rate": float(cfg.proc_fail_rate),
        "files": cfg.files, "backlog": cfg.backlog, "sync_get": bool(cfg.sync_get),
        "accept_lines": bool(cfg.accept_lines), "pid": cfg.pid, "dpns_pid": cfg.dpns_pid,
        "poll_first_ms": cfg.poll_first_ms, "poll_factor": float(cfg.poll_factor),
        "poll_max_ms": cfg.poll_max_ms, "budget": cfg.request_budget(),
        "same_dir": bool(cfg.same_dir), "dirs": cfg.dirs,
        "arrivals": None if cfg.arrivals is None else
        [(int(offset), op, client) for offset, op, client in cfg.arrivals],
        "rate_lambda": None if cfg.arrivals is not None or cfg.rate is None
        else 1.0 / (1000.0 / cfg.rate),
        "concurrency": cfg.concurrency,
        "until": None if cfg.duration is None else start + int(round(cfg.duration * 1000)),
    }


def run_compiled(cfg: SimConfig, same_but_seed: dict | None = None):
    """(request records, call records, counts) of the compiled model's run of `cfg`.
    `same_but_seed`: spec() of a config that differs from `cfg` in its seed alone (the
    spec of its service times' values is made once for every seed of a prediction)."""
    cfg.validate()
    plain = spec(cfg) if same_but_seed is None else dict(same_but_seed, seed=cfg.seed)
    requests, calls, counts = extension.compiled("run_model")(plain)
    return requests, calls, counts


def run_summary(cfg: SimConfig, observations=(), same_but_seed: dict | None = None) -> tuple:
    """(requests, phase table, growth, observations' summaries) of the compiled model's
    run of `cfg`, as predict.run_summary gives them of its records (native/src/
    model_summary.rs): no record is made into a dict."""
    cfg.validate()
    plain = spec(cfg) if same_but_seed is None else dict(same_but_seed, seed=cfg.seed)
    count, table, growth, observed, _ = extension.compiled("run_model_summary")(
        plain, [o.compiled for o in observations])
    return count, dict(table), growth, observed
