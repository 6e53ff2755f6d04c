"""simulator/service.py: the service times are plain classes (issue 30: no dataclass
compiled at every report's import) that keep a frozen dataclass's ways, which the model's
configs rely on: equal and hashed alike by their fields, set once, shown by their fields,
copied with changes by `replace`, and a misspelt service time refused."""

import copy
import pickle
import random

import pytest

from dpmstream.parsers.plain import FrozenInstanceError

from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.service import DEFAULTS, Dist, Empirical, ServiceTimes


def test_equal_values_are_equal_and_hash_alike_and_others_are_not():
    assert Dist(35.0, 0.25, 1) == Dist(35.0, 0.25, 1)
    assert hash(Dist(35.0, 0.25, 1)) == hash(Dist(35.0, 0.25, 1))
    assert Dist(35.0, 0.25, 1) != Dist(35.0, 0.25, 2)
    assert Empirical((3, 5)) == Empirical((3, 5)) != Empirical((3, 6))
    assert Dist(3.0, 0.3, 0) != Empirical((3,)) and Dist(1.0) != (1.0, 0.3, 0)
    measured = ServiceTimes(auth=Empirical((18, 20, 25)))
    assert measured == ServiceTimes(auth=Empirical((18, 20, 25))) != ServiceTimes()
    assert len({measured, ServiceTimes(auth=Empirical((18, 20, 25))), ServiceTimes()}) == 2
    # A config compares its service times by value, as before.
    assert SimConfig(service=measured) == SimConfig(service=ServiceTimes(auth=Empirical((18, 20, 25))))


def test_each_is_set_once():
    for value, name in ((Dist(1.0), "sigma"), (Empirical((1,)), "values"), (ServiceTimes(), "net")):
        with pytest.raises(FrozenInstanceError):
            setattr(value, name, getattr(value, name))
        with pytest.raises(FrozenInstanceError):
            delattr(value, name)


def test_defaults_names_and_replace():
    times = ServiceTimes()
    assert ServiceTimes.FIELDS == tuple(DEFAULTS) and len(set(ServiceTimes.FIELDS)) == 22
    assert all(getattr(times, name) == DEFAULTS[name] for name in ServiceTimes.FIELDS)
    assert times.dpns_creat == Dist(35.0, 0.25, 1) and times.dpns_creat_dirs == ()
    changed = times.replace(think=Empirical((7, 9)), dpns_creat_dirs=(Dist(80.0),))
    assert (changed.think, changed.dpns_creat_dirs) == (Empirical((7, 9)), (Dist(80.0),))
    assert [n for n in ServiceTimes.FIELDS if getattr(changed, n) != getattr(times, n)] == [
        "dpns_creat_dirs", "think"]
    assert times == ServiceTimes()    # replace made a copy
    assert Dist(4.0, 0.4, 1).replace(min_ms=2) == Dist(4.0, 0.4, 2)
    with pytest.raises(TypeError, match="no service time dpns_create"):
        ServiceTimes(dpns_create=Dist(1.0))
    with pytest.raises(ValueError, match="at least one value"):
        Empirical(())


def test_shown_by_their_fields():
    assert repr(Dist(2.0, 0.5)) == "Dist(median_ms=2.0, sigma=0.5, min_ms=0)"
    assert repr(Empirical((1, 2))) == "Empirical(values=(1, 2))"
    assert repr(ServiceTimes()).startswith(
        "ServiceTimes(net=Dist(median_ms=1.0, sigma=0.5, min_ms=0), auth=Dist(median_ms=20.0,")
    assert repr(ServiceTimes()).endswith(
        "restart_retry=Dist(median_ms=1500.0, sigma=0.3, min_ms=100))")


def test_draws_keep_their_floor_and_resample():
    rng = random.Random(5)
    assert all(Dist(2.0, 1.5, 3).draw(rng) >= 3 for _ in range(200))
    assert Dist(7.4, 0).draw(rng) == 7
    assert {Empirical((4, 9)).draw(rng) for _ in range(100)} == {4, 9}


def test_pickled_and_copied_they_come_back_equal():
    times = ServiceTimes(net=Dist(2.0), auth=Empirical((18, 20)))
    assert pickle.loads(pickle.dumps(times)) == copy.deepcopy(times) == times
    assert copy.copy(Dist(1.0, 0.2)) == Dist(1.0, 0.2)
