"""Which reassembly engine a pipeline runs: the pure-Python reference or its compiled twin.

    reassembler = new_reassembler(choose(None), emit, timeout_ms=...)

- "python": parsers/reassembly.Reassembler, the reference; always there.
- "compiled": the same rules in native/ (Rust: reassembly and name-server linking), fed
  whole chunks of lines by Source.feed_chunk so that no Python runs per line. Built where a Rust toolchain existed
  at install time; DPMSTREAM_PURE_PYTHON=1 turns it off like the compiled line parser.

tests/parsers/test_engines_agree.py feeds both the same inputs and requires the same
records, counters and state.

DOME logs have the same two engines, chosen the same way (new_dome_reassembler,
new_dome_parser): parsers/dome_reassembly.DomeReassembler and parsers/dome_lines.DomeLineParser,
the reference, and their compiled twins in parsers/compiled_dome.py
(tests/parsers/test_dome_engines_agree.py).
"""

from __future__ import annotations

import os
from functools import cache

from . import fastpath, schema
from .linking import Linker
from .reassembly import Reassembler

PYTHON, COMPILED = "python", "compiled"
ENGINES = (PYTHON, COMPILED)
# Why the compiled engine's feed_lines (or the DOME engine's feed_chunk) stopped:
# schema.FEED_STOPS, checked against native/src/schema.rs as the extension loads.
DONE, SLOW, LIMIT, BUDGET, MALFORMED_LINE = (
    schema.DONE, schema.SLOW, schema.LIMIT, schema.BUDGET, schema.MALFORMED_LINE)

try:
    from .compiled_reassembly import CompiledLinker, CompiledReassembler
except ImportError:  # not built: pure Python
    CompiledReassembler = CompiledLinker = None


@cache
def compiled_dome():
    """parsers/compiled_dome.py, or None where it is not built (or was built before the
    DOME engine). Imported at the first DOME log, as are the Python DOME engine's modules:
    a DPM log's replay loads neither (tests/commands/test_replay_startup.py)."""
    try:
        from . import compiled_dome as module
    except ImportError:
        return None
    return module


def compiled_available() -> bool:
    return CompiledReassembler is not None and fastpath.available()


def compiled_dome_available() -> bool:
    return compiled_dome() is not None and fastpath.available()


def choose(engine: str | None = None, available=compiled_available) -> str:
    """The engine to run: the one asked for (DPMSTREAM_ENGINE, else the compiled one where
    it is built). Asking for the compiled engine where it is not built is an error.
    `available`: compiled_dome_available for the DOME engines."""
    engine = engine or os.environ.get("DPMSTREAM_ENGINE") or None
    if engine is None:
        return COMPILED if available() else PYTHON
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == COMPILED and not available():
        raise ValueError("the compiled engine is not built here (no Rust toolchain at "
                         "install time, or DPMSTREAM_PURE_PYTHON is set)")
    return engine


def new_reassembler(engine: str, emit, **settings):
    """A reassembler of `engine` (choose() it first) with Reassembler's settings."""
    if engine == COMPILED:
        return CompiledReassembler(emit, **settings)
    return Reassembler(emit, **settings)


def new_dome_reassembler(engine: str, state: dict | None = None, **settings):
    """A DOME reassembler of `engine` (choose(..., compiled_dome_available) it first) with
    DomeReassembler's settings, restored from `state` (a snapshot() of either engine) when
    given."""
    if engine == COMPILED:
        cls = compiled_dome().CompiledDomeReassembler
    else:
        from .dome_reassembly import DomeReassembler as cls
    if state is not None:
        return cls.from_snapshot(state, **settings)
    return cls(**settings)


def new_dome_parser(engine: str, profile, clock):
    """A DOME line parser of `engine` for one stream; its events feed either reassembler."""
    if engine == COMPILED:
        return compiled_dome().CompiledDomeLineParser(profile, clock)
    from .dome_lines import DomeLineParser
    return DomeLineParser(profile, clock)


# The extension's class itself (tests may serve "compiled" by another class).
_NATIVE = CompiledReassembler


def is_compiled(reassembler) -> bool:
    """Whether `reassembler` is the extension's: it then takes whole chunks of lines and
    has its own linker inside."""
    return _NATIVE is not None and isinstance(reassembler, _NATIVE)


def new_linker(reassembler, emit, head_aliases=(), learn_head: bool = True):
    """The name-server linker for `reassembler`: a compiled reassembler has its own inside,
    fed without Python; any other takes the Python one."""
    if is_compiled(reassembler):
        return CompiledLinker(emit, head_aliases, learn_head=learn_head)
    return Linker(emit, head_aliases, learn_head=learn_head)
