"""SimConfig is a plain class (parsers/plain.Value), not a dataclass (issue 30: importing
dataclasses was ~31 M instructions of a report's what-if), and keeps a dataclass's ways."""

import pickle

import pytest

from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.service import Dist, ServiceTimes


def test_fields_are_the_annotated_knobs_in_order_with_their_defaults():
    cfg = SimConfig()
    assert SimConfig.FIELDS[:3] == ("clients", "concurrency", "requests")
    assert len(SimConfig.FIELDS) == 51 and "DEFAULT_REQUESTS" not in SimConfig.FIELDS
    assert (cfg.clients, cfg.sthreads, cfg.arrivals, cfg.tz) == (3, 20, None, "Europe/Zurich")
    # each config its own ServiceTimes, as the dataclass's default_factory made it
    assert cfg.service == ServiceTimes() and cfg.service is not SimConfig().service


def test_given_by_name_or_position_compared_shown_and_replaced_as_a_dataclass():
    assert SimConfig(4, 10) == SimConfig(clients=4, concurrency=10) != SimConfig()
    with pytest.raises(TypeError):
        SimConfig(4, clients=5)
    with pytest.raises(TypeError):
        SimConfig(threads=3)
    with pytest.raises(TypeError):
        hash(SimConfig())
    assert repr(SimConfig()).startswith("SimConfig(clients=3, concurrency=25, requests=None, ")
    svc = ServiceTimes(auth=Dist(5.0))
    cfg = SimConfig(sthreads=7, service=svc)
    changed = cfg.replace(sthreads=14)
    assert (changed.sthreads, cfg.sthreads, changed.service) == (14, 7, svc)
    assert changed.replace(sthreads=7) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg
