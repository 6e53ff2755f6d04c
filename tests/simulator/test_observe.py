"""Observations (simulator/observe.py) measure the same on the views measure_all shares
between them as each does alone on the plain records."""

from __future__ import annotations

import pytest

from dpmstream.parsers.linking import directory_of
from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.identities import Namespace
from dpmstream.simulator.observe import growth, measure_all, observations, records
from dpmstream.simulator.service import Dist, ServiceTimes


def _directories(calls) -> list[str]:
    return sorted({directory_of(c["path"]) for c in calls if c["op"] == "creat" and c["path"]})


@pytest.mark.parametrize("cfg", [
    SimConfig(requests=400, seed=5, dirs=3, get_fraction=0.3),
    # The model's own directory names (weighted_dir k) stand for the log's k-th one.
    SimConfig(requests=400, seed=4, dir_shares=(300.0, 100.0),
              service=ServiceTimes(dpns_creat_dirs=(Dist(40.0, 0.5), Dist(10.0, 0.5)))),
], ids=["named directories", "the model's weighted directories"])
def test_measure_all_gives_each_observation_exactly_what_it_measures_alone(cfg):
    result = simulate(cfg, None)
    directories = _directories(result.calls)
    if cfg.dir_shares:
        directories = [f"/log/dir{k}" for k in range(len(cfg.dir_shares))]
    obs = observations(directories, shown=3)
    alone = [o.measure(list(result.requests), list(result.calls)) for o in obs]
    shared = measure_all(obs, result.requests, result.calls)
    assert shared == alone
    # The directories' observations measured something: the views are not empty.
    holds = [v for o, v in zip(obs, shared) if o.parameter.startswith("lock ")
             and o.what == "its creates' hold p50"]
    assert holds and all(holds)
    if cfg.dir_shares:
        assert Namespace.weighted_dir(0) in _directories(result.calls)


def test_growth_is_the_same_on_shared_views_as_on_plain_records():
    result = simulate(SimConfig(requests=300, seed=2, dirs=2), None)
    assert growth(*records(result.requests, result.calls)) == growth(result.requests, result.calls)
    assert set(growth(result.requests, result.calls)) >= {"queue", "proc"}
