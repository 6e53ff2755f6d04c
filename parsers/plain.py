"""Plain value classes for replay's path, in place of dataclasses.

Importing dataclasses pulls in inspect, ast, dis and tokenize, and each @dataclass writes
and compiles its methods' source as its module is imported: ~57 M instructions of the
~282 M a two-line replay cost (issue 30, start-up; bench/RESULTS.md, start28), every
replay paying it before its first line. These bases give what the replaced dataclasses gave, from a class's FIELDS
(its fields in order): compared and shown by them, read as a dict (`as_dict`, where
dataclasses.fields was read), copied with changes (`replace`); Frozen also hashed and set
once; Counters start at 0. A class writes its own __init__ (its defaults in its
signature), as simulator/service.py's do.
"""

from __future__ import annotations


class FrozenInstanceError(AttributeError):
    """A field of a Frozen value assigned or deleted (dataclasses' error of that name; its
    message is dataclasses' too)."""


class Value:
    """Compared (==) and shown (repr) by FIELDS in order, as a dataclass by its fields;
    NOT_SHOWN are left out of repr, NOT_COMPARED out of == (a dataclass's field(repr=False,
    compare=False)). Unhashable unless Frozen, as a dataclass with eq and not frozen."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()
    NOT_SHOWN: tuple[str, ...] = ()
    NOT_COMPARED: tuple[str, ...] = ()
    # Fields the class makes from the others in its __init__ (a dataclass's
    # field(init=False)): replace() gives __init__ every field but these.
    NOT_INIT: tuple[str, ...] = ()

    def _compared(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS if name not in self.NOT_COMPARED)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._compared() == other._compared()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS
                          if name not in self.NOT_SHOWN)
        return f"{self.__class__.__qualname__}({shown})"

    def as_dict(self) -> dict:
        """Each field's value by its name, in order (not copied: dataclasses.asdict would)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    def replace(self, **changes):
        """A new value with `changes` (dataclasses.replace's counterpart): made by the
        class's __init__ from every field but NOT_INIT (which it makes again)."""
        bad = set(changes) & set(self.NOT_INIT)
        if bad:   # dataclasses.replace's refusal of an init=False field
            raise ValueError(f"field(s) {sorted(bad)} are made by {self.__class__.__qualname__}"
                             " and cannot be given to replace()")
        given = {name: getattr(self, name) for name in self.FIELDS if name not in self.NOT_INIT}
        return self.__class__(**{**given, **changes})


class Counters(Value):
    """Counts that start at 0: given by position or name, as a dataclass's int fields with
    default 0 are."""

    __slots__ = ()

    def __init__(self, *counts: int, **named: int):
        if len(counts) > len(self.FIELDS):
            raise TypeError(f"{self.__class__.__name__}() takes at most {len(self.FIELDS)} counts")
        unknown = set(named).difference(self.FIELDS[len(counts):])
        if unknown:
            raise TypeError(f"{self.__class__.__name__}() got unexpected or repeated counts {sorted(unknown)}")
        for name, count in zip(self.FIELDS, counts):
            setattr(self, name, count)
        for name in self.FIELDS[len(counts):]:
            setattr(self, name, named.get(name, 0))


class Frozen(Value):
    """A Value set once, in __init__ (with object.__setattr__), and hashed by its fields,
    as a frozen dataclass."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self):
        # pickle and copy restore a value through its __init__, by its FIELDS' names (a
        # class may take them as keywords only: the what-if's ServiceTimes), not field by
        # field through __setattr__, which refuses.
        return _remade, (self.__class__, self.as_dict())


def _remade(cls, fields: dict):
    return cls(**fields)
