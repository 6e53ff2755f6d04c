"""Plain classes that compare and show themselves by their fields, as dataclasses do.

A dataclass compiles its generated methods (__init__, __repr__, __eq__) as its module is
imported, ~0.5 ms CPU each (issue 30): the classes a command alone imports (profile
check's findings, the what-if's service times) are plain classes with `__slots__` and
this base instead."""

from __future__ import annotations


class Fielded:
    """Equal to an instance of its own class with the same FIELDS, in order (unhashable,
    as a dataclass that is not frozen), and shown by them."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{self.__class__.__qualname__}({shown})"
