"""The compiled model run's summary (native/src/model_summary.rs, what predict.py keeps of
a run: phase table, growth, each observation's summary) against predict.run_summary of
the Python model's records, its reference, on the configs that cover each branch of the
model and on models calibrated on simulated logs (the thesis workload among them): the
same values, to the bit."""

from __future__ import annotations

import math
import os

import pytest

from dpmstream.parsers.linking import directory_of
from dpmstream.simulator import SimConfig, simulate
from dpmstream.parsers import extension
from dpmstream.simulator import native_model
from dpmstream.simulator.calibrate import SHOWN_DIRS, calibrate
from dpmstream.simulator.identities import Namespace
from dpmstream.simulator.observe import observations
from dpmstream.simulator.predict import RunSummary, run_summary
from dpmstream.simulator.scenarios import scenario

from tests.simulator.test_native_model import CONFIGS

COMPILED_MISSING = extension.compiled("run_model") is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE")
pytestmark = pytest.mark.skipif(COMPILED_MISSING, reason="the compiled extension is not built")


def bits(summary: RunSummary):
    """The summary with each float as its bits (NaN equal to NaN, 0.0 not to -0.0)."""
    def exact(v):
        return ("float", math.copysign(1, v), v.hex()) if isinstance(v, float) else v
    return (summary.requests, summary.table,
            {k: tuple(map(exact, pair)) for k, pair in summary.growth.items()},
            [exact(v) for v in summary.observed])


def assert_same_summary(cfg: SimConfig, obs) -> RunSummary:
    reference = simulate(cfg, None)
    python = run_summary(reference.requests, reference.calls, obs)
    compiled = RunSummary(*native_model.run_summary(cfg, obs))
    assert bits(compiled) == bits(python)
    assert list(compiled.table) == list(python.table)   # the phases in the same order
    return python


def directories_of(cfg: SimConfig) -> list[str]:
    """The run's directories as a calibration on it would name them, and one it lacks."""
    calls = simulate(cfg, None).calls
    names = sorted({directory_of(c["path"]) for c in calls if c["op"] == "creat" and c["path"]})
    return names[:2] + ["/no/such/dir"] + [Namespace.weighted_dir(0)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_compiled_summary_is_the_python_one_on_every_model_branch(name):
    cfg = CONFIGS[name].replace(seed=3)
    obs = observations(directories_of(cfg), shown=4)
    assert_same_summary(cfg, obs)


@pytest.mark.parametrize("workload", [
    scenario("thesis", requests=900),
    SimConfig(requests=600, get_fraction=0.2, dirs=3),
], ids=["thesis", "gets and directories"])
def test_a_calibrated_model_summarises_the_same_compiled(workload):
    """What `whatif` and the report run: a model calibrated on a log's records, with the
    observations of its directories, at the current and at doubled slow threads."""
    observed = simulate(workload, None)
    cal = calibrate(observed.requests, observed.calls)
    obs = observations(cal.directories, SHOWN_DIRS)
    for seed in (1, 2):
        cfg = cal.config.replace(seed=seed)
        assert native_model.unsupported(cfg) is None
        summary = assert_same_summary(cfg, obs)
        assert_same_summary(cfg.replace(sthreads=2 * cfg.sthreads), obs)
    # The comparison was of something: every kind of value came out (the thesis has no
    # gets, so no get's phases and no name-server statg).
    assert summary.table and {"queue", "proc", "ns creat"} <= set(summary.growth)
    unmeasured = {o.compiled[0] for o, v in zip(obs, summary.observed) if v is None}
    assert unmeasured == ({"get gap", "own work get", "statg"} if workload.get_fraction == 0
                          else set())


def test_an_observation_without_a_compiled_twin_is_refused():
    obs = observations([], shown=0)
    odd = [obs[0].__class__("x", "y", obs[0].measure, compiled=("no such kind", ()))]
    with pytest.raises(ValueError, match="no compiled observation"):
        native_model.run_summary(SimConfig(requests=20), odd)
