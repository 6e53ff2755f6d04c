"""parsers/plain.py: the value classes replay's path uses in place of dataclasses behave as
the dataclasses they replaced: compared, shown and (frozen) hashed by their fields in
order, the fields a dataclass would leave out of repr or == left out, set once when
frozen, copied with changes."""

import copy
import dataclasses
import pickle

import pytest

from dpmstream.parsers.plain import Counters, Frozen, FrozenInstanceError, Value
from dpmstream.parsers.settings import ReassemblySettings


class Pair(Value):
    __slots__ = FIELDS = ("a", "b", "note")
    NOT_SHOWN = NOT_COMPARED = ("note",)

    def __init__(self, a, b=2, note=None):
        self.a, self.b, self.note = a, b, note


@dataclasses.dataclass
class DataPair:
    """What Pair stands for, as a dataclass."""

    a: object
    b: object = 2
    note: object = dataclasses.field(default=None, repr=False, compare=False)


def test_a_value_is_compared_and_shown_as_its_dataclass_is():
    for args in [(1,), (1, 3), ("x", [1], "n")]:
        assert repr(Pair(*args)) == repr(DataPair(*args)).replace("DataPair", "Pair")
        assert (Pair(*args) == Pair(*args[:2], "other")) is (DataPair(*args) == DataPair(*args[:2], "other"))
    assert Pair(1) != Pair(2)
    assert Pair(1) != DataPair(1)          # another class: not equal, as between dataclasses
    assert Pair.__hash__ is None           # mutable with ==: unhashable, as a dataclass
    assert Pair(1, 3, "n").replace(b=4) == Pair(1, 4)
    assert Pair(1, 3, "n").as_dict() == {"a": 1, "b": 3, "note": "n"}


class Sized(Value):
    """A value with a field made from the others, as a dataclass's field(init=False)."""

    __slots__ = FIELDS = ("text", "size")
    NOT_INIT = ("size",)

    def __init__(self, text):
        self.text = text
        self.size = len(text)


def test_replace_makes_again_the_fields_a_value_makes_itself():
    assert Sized("ab").replace(text="abc") == Sized("abc")
    assert Sized("ab").replace(text="abc").size == 3
    with pytest.raises(ValueError, match="size"):   # dataclasses.replace refuses it too
        Sized("ab").replace(size=5)


def test_a_dome_profile_is_copied_with_changes_and_compiled_again():
    from dpmstream.parsers.dome_profiles import bundled_dome_profiles

    profile = bundled_dome_profiles()[0]
    renamed = profile.replace(name="site-copy")
    assert renamed.name == "site-copy" and renamed.roles == profile.roles
    assert renamed.forms.keys() == profile.forms.keys()


class Hits(Counters):
    __slots__ = FIELDS = ("seen", "kept")


def test_counters_start_at_zero_and_are_given_by_position_or_name():
    assert Hits().as_dict() == {"seen": 0, "kept": 0}
    assert Hits(3) == Hits(seen=3) == Hits(3, 0)
    assert Hits(kept=2).replace(seen=1) == Hits(1, 2)
    assert repr(Hits(1, 2)) == "Hits(seen=1, kept=2)"
    with pytest.raises(TypeError):
        Hits(1, seen=2)          # given twice
    with pytest.raises(TypeError):
        Hits(lost=1)             # no such count
    with pytest.raises(TypeError):
        Hits(1, 2, 3)


def test_a_frozen_value_is_set_once_and_hashed_by_its_fields():
    settings = ReassemblySettings(timeout_s=10, head_aliases=["h"])
    assert settings.head_aliases == ("h",)
    assert hash(settings) == hash(ReassemblySettings(10, head_aliases=("h",)))
    assert {settings: 1}[ReassemblySettings(10, head_aliases=("h",))] == 1
    assert settings.replace(grace_s=5) == ReassemblySettings(10, grace_s=5, head_aliases=("h",))
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'timeout_s'"):
        settings.timeout_s = 1
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'grace_s'"):
        del settings.grace_s
    assert issubclass(FrozenInstanceError, AttributeError)
    assert isinstance(settings, Frozen)
    assert pickle.loads(pickle.dumps(settings)) == copy.deepcopy(settings) == settings
    assert repr(ReassemblySettings()) == ("ReassemblySettings(timeout_s=3600, max_in_flight=1000000, "
                                         "max_threads=100000, grace_s=60, head_aliases=())")
