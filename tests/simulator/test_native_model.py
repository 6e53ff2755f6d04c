"""simulator/native_model.py: the compiled model run (native/src/model.rs) against the
Python model, its reference. For the same config and seed both must give exactly the
same request and call records (and counts): every draw from random.Random in the same
order, every rule the same. The configs cover each branch of the model: closed, open and
replayed load, pools saturated (backlog refusals, a queue for one slow thread, name-server
threads all busy), one shared directory, weighted directories with their own lock holds,
synchronous gets, several files, failures at each step, aborts and vanishing clients,
requests that end by the timeout, a run cut by its duration, and a calibrated model."""

from __future__ import annotations

import os

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.parsers import extension
from dpmstream.simulator import native_model
from dpmstream.simulator.calibrate import calibrate
from dpmstream.simulator.observe import observations
from dpmstream.simulator.predict import predict
from dpmstream.simulator.service import Dist, Empirical, ServiceTimes

COMPILED_MISSING = extension.compiled("run_model") is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE")
pytestmark = pytest.mark.skipif(COMPILED_MISSING, reason="the compiled extension is not built")

FAILING = dict(auth_fail_rate=0.1, put_fail_rate=0.2, proc_fail_rate=0.1, done_fail_rate=0.2,
               abort_rate=0.1, abandon_rate=0.1, plain_rate=0.3)
SLOW_CLIENTS = ServiceTimes(think=Empirical((0, 5, 5, 40, 900)), net=Dist(3.0, 0.0),
                            transfer=Dist(200.0, 1.2, 1), get_transfer=Dist(30.0, 0.0, 1))

CONFIGS = {
    "thesis": SimConfig(requests=400),
    "doubled slow threads": SimConfig(requests=400, sthreads=40),
    "one slow thread": SimConfig(requests=150, sthreads=1),
    "backlog refusals": SimConfig(requests=300, fthreads=1, backlog=2, concurrency=10),
    "no backlog": SimConfig(requests=200, fthreads=2, backlog=0),
    "busy name server": SimConfig(requests=300, dpns_threads=1, files=3),
    "one directory": SimConfig(requests=300, same_dir=True),
    "spread directories": SimConfig(requests=300, dirs=7),
    "weighted directories": SimConfig(
        requests=300, dir_shares=(0.5, 0.3, 0.2),
        service=ServiceTimes(dpns_creat_dirs=(Dist(80.0, 0.3, 1), Empirical((5, 9, 200))))),
    "counted directories": SimConfig(requests=300, dir_shares=(7.0, 0.0, 3.0)),
    "gets and puts": SimConfig(requests=400, get_fraction=0.5, files=2),
    "synchronous gets": SimConfig(requests=300, get_fraction=0.7, sync_get=True, files=2),
    "failures everywhere": SimConfig(requests=400, **FAILING),
    "failing gets": SimConfig(requests=300, get_fraction=0.6, **FAILING),
    "open loop": SimConfig(requests=300, rate=40.0, clients=5),
    "replayed arrivals": SimConfig(arrivals=tuple((i * 37 % 5000, ("put", "get")[i % 3 == 0], i % 4)
                                                  for i in range(250)), clients=4, get_fraction=0.3),
    "timeouts": SimConfig(arrivals=tuple((i * 60_000, "put", 0) for i in range(90)),
                          abandon_rate=1.0),
    "cut by duration": SimConfig(duration=15.0, sthreads=2),
    "no accept lines, slow polls": SimConfig(requests=300, accept_lines=False, poll_first_ms=7,
                                             poll_factor=1.3, poll_max_ms=300),
    "constant and empirical times": SimConfig(requests=300, service=SLOW_CLIENTS, **FAILING),
    "other head name": SimConfig(requests=200, ns_head_client="dpmhead01"),
    "many clients": SimConfig(requests=300, clients=210, concurrency=1),
}


def assert_same_run(cfg: SimConfig) -> None:
    reference = simulate(cfg, None)
    requests, calls, counts = native_model.run_compiled(cfg)
    assert requests == reference.requests
    assert calls == reference.calls
    assert (counts["refused"], counts["auth_failures"], counts["cycles"], counts["end_ms"],
            counts["dpm_lines"], counts["dpns_lines"]) == (
        reference.refused, reference.auth_failures, reference.cycles, reference.end_ms,
        reference.dpm_lines, reference.dpns_lines)


@pytest.mark.parametrize("seed", [1, 7])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_compiled_model_gives_the_python_models_records_exactly(name, seed):
    cfg = CONFIGS[name].replace(seed=seed)
    assert native_model.unsupported(cfg) is None
    assert_same_run(cfg)


def test_the_corners_happen_in_the_configs_that_cover_them():
    """The differential test only proves what its configs reach: each corner occurs."""
    refused = simulate(CONFIGS["backlog refusals"], None)
    assert refused.refused > 0
    timeouts = simulate(CONFIGS["timeouts"], None).requests
    assert any(r["end_reason"] == "timeout" for r in timeouts)
    statuses = {r["status"] for r in simulate(CONFIGS["failures everywhere"], None).requests}
    assert {"success", "failed", "aborted", "incomplete"} <= statuses
    cut = simulate(CONFIGS["cut by duration"], None)
    assert any(r["end_reason"] == "input_end" for r in cut.requests)
    assert simulate(CONFIGS["one directory"], None).stats["dpns_max_lock_waiters"] > 1
    queue = simulate(CONFIGS["one slow thread"], None).requests
    assert max(r["queue_ms"] or 0 for r in queue) > 10_000
    linked = simulate(CONFIGS["gets and puts"], None).requests
    assert any(r["ns_calls"] for r in linked)


def test_a_calibrated_model_runs_the_same_compiled():
    """What `whatif` and the report run: a model calibrated on a log's records (replayed
    or closed loop, weighted directories, an empirical think time)."""
    observed = simulate(SimConfig(requests=600, get_fraction=0.2), None)
    cfg = calibrate(observed.requests, observed.calls).config
    assert native_model.unsupported(cfg) is None
    for seed in (1, 2):
        assert_same_run(cfg.replace(seed=seed))
        assert_same_run(cfg.replace(seed=seed, sthreads=2 * cfg.sthreads))


def test_predict_gives_the_same_prediction_with_either_model(monkeypatch):
    cfg = SimConfig(requests=300, get_fraction=0.3, dirs=2)
    obs = observations(["/dpm/cern.ch/home/dteam/dir0", "/elsewhere"], shown=2)
    compiled = predict(cfg, (1, 2), observations=obs)
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    python = predict(cfg, (1, 2), observations=obs)
    assert (compiled.pooled, compiled.by_seed, compiled.growth, compiled.requests,
            compiled.observed) == (python.pooled, python.by_seed, python.growth,
                                   python.requests, python.observed)


@pytest.mark.parametrize("changes, why", [
    ({"restart_at": 3.0}, "a restart"), ({"stray_lines": 5}, "stray lines"),
    ({"dpns_gap": (1.0, 2.0)}, "a gap in the DPNS log"), ({"lines": 500}, "a line target"),
    ({"ns_other_clients": True}, "other name-server clients"),
    ({"seed": 2**40}, "a seed beyond 32 bits"),
])
def test_configs_the_compiled_model_does_not_cover_run_in_python(changes, why):
    cfg = SimConfig(requests=200).replace(**changes)
    assert native_model.unsupported(cfg) == why
    prediction = predict(cfg, (cfg.seed,))
    reference = simulate(cfg, None)
    assert prediction.requests == len(reference.requests)


def test_a_bad_config_is_refused_as_by_the_python_model():
    with pytest.raises(ValueError, match="thread pools"):
        native_model.run_compiled(SimConfig(sthreads=0))


def test_pure_python_turns_the_compiled_model_off(monkeypatch):
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert not native_model.available()


def test_a_missing_extension_is_an_error_when_the_native_build_is_required(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    monkeypatch.setattr(extension, "_native", None)   # as where no Rust toolchain built it
    monkeypatch.setenv("DPMSTREAM_REQUIRE_NATIVE", "1")
    with pytest.raises(RuntimeError, match="compiled model"):
        native_model.available()
    monkeypatch.delenv("DPMSTREAM_REQUIRE_NATIVE")
    assert not native_model.available()


def test_measured_times_reach_the_compiled_model_as_int64_buffers_cut_as_int_cuts():
    """The spec holds an empirical distribution's values as an array('q') the extension
    copies whole; values that are not ints are cut as int() cuts them, as before."""
    svc = ServiceTimes(think=Empirical((0, 5, 40, 2**40)), auth=Empirical((1.9, 7, -2.5)),
                       dpns_creat_dirs=(Empirical((5, 9)),))
    plain = native_model.spec(SimConfig(requests=10, service=svc))
    kind, values = plain["service"]["think"]
    assert (kind, values.typecode, values.tolist()) == ("empirical", "q", [0, 5, 40, 2**40])
    assert plain["service"]["auth"][1].tolist() == [1, 7, -2]
    assert plain["holds"][0][1].tolist() == [5, 9]
