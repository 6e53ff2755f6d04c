"""The compiled extension's optional names: the one way a module asks for one.

    CsvBlocks = compiled("CsvBlocks")     # None: the Python reference does the work
    max_overlap = compiled_else("max_overlap", python_max_overlap)   # one or the other

`compiled(name)` is the extension's function or class `name` (parsers._native, built from
native/ where a Rust toolchain existed at install time), or None where the extension is
not built, was built before that name, or DPMSTREAM_PURE_PYTHON is set. The environment
is read at each call, so a module asks at the moment it chooses: at import for a choice
made once a process (records.py's formatting; tests turn it off in a fresh process), at
each construction for one that tests turn off mid-process (monkeypatch.setenv; fastpath,
the sinks, inputs). It imports nothing but the extension, so asking adds nothing to a
module's start-up (tests/commands/test_replay_startup.py). DPMSTREAM_REQUIRE_NATIVE (set by
`make check` where cargo is) makes a name asked as `required` an error when missing.

parsers/compiled_reassembly.py and compiled_dome.py import the extension unconditionally:
they are its twins of the Python engines, and engines.py decides whether to load them.
"""

from __future__ import annotations

import os

try:
    from . import _native
except ImportError:  # not built: pure Python
    _native = None


def compiled(name: str, required: str | None = None):
    """The extension's `name`, or None: not built, built without it, or turned off.
    `required`: what the name is, for a module whose Python fallback would hide a failed
    build (simulator/native_model.py): with DPMSTREAM_REQUIRE_NATIVE set, the name
    missing (not turned off) is then a RuntimeError that says so, not None."""
    off = os.environ.get("DPMSTREAM_PURE_PYTHON")
    found = None if _native is None or off else getattr(_native, name, None)
    if found is None and required is not None and not off \
            and os.environ.get("DPMSTREAM_REQUIRE_NATIVE"):
        raise RuntimeError(f"DPMSTREAM_REQUIRE_NATIVE is set but {required} "
                           f"(dpmstream.parsers._native.{name}) is not built")
    return found


def compiled_else(name: str, reference):
    """The extension's `name` where it is built, else `reference`, its Python twin (the
    same arguments, the same answer); and where it is built, the reference takes each call
    the compiled one refuses with a TypeError or OverflowError: numbers it cannot read
    exactly (ints beyond ±2^53 or 64 bits, native/src/exact_ints.rs; floats where it sums
    ints), so no input is lost to the compiled path's narrower types. Looked up once, at
    this call, as `compiled`."""
    fast = compiled(name)
    if fast is None:
        return reference

    def fast_else_reference(*args):
        try:
            return fast(*args)
        except (TypeError, OverflowError):
            return reference(*args)

    fast_else_reference.__name__ = name
    return fast_else_reference
