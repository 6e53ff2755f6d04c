"""Which reassembly engine a pipeline runs: the pure-Python reference or its compiled twin.

    reassembler = new_reassembler(choose(None), emit, timeout_ms=...)

- "python": parsers/reassembly.Reassembler, the reference; always there.
- "compiled": the same rules in native/ (Rust: reassembly and name-server linking), fed
  whole chunks of lines by Source.feed_chunk so that no Python runs per line. Built where a Rust toolchain existed
  at install time; DPMSTREAM_PURE_PYTHON=1 turns it off like the compiled line parser.

tests/parsers/test_engines_agree.py feeds both the same inputs and requires the same
records, counters and state.
"""

from __future__ import annotations

import os

from . import fastpath
from .linking import Linker
from .reassembly import Reassembler

PYTHON, COMPILED = "python", "compiled"
ENGINES = (PYTHON, COMPILED)

try:
    from .compiled_reassembly import CompiledLinker, CompiledReassembler
except ImportError:  # not built: pure Python
    CompiledReassembler = CompiledLinker = None


def compiled_available() -> bool:
    return CompiledReassembler is not None and fastpath.available()


def choose(engine: str | None = None) -> str:
    """The engine to run: the one asked for (DPMSTREAM_ENGINE, else the compiled one where
    it is built). Asking for the compiled engine where it is not built is an error."""
    engine = engine or os.environ.get("DPMSTREAM_ENGINE") or None
    if engine is None:
        return COMPILED if compiled_available() else PYTHON
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == COMPILED and not compiled_available():
        raise ValueError("the compiled engine is not built here (no Rust toolchain at "
                         "install time, or DPMSTREAM_PURE_PYTHON is set)")
    return engine


def new_reassembler(engine: str, emit, **settings):
    """A reassembler of `engine` (choose() it first) with Reassembler's settings."""
    if engine == COMPILED:
        return CompiledReassembler(emit, **settings)
    return Reassembler(emit, **settings)


def new_linker(engine: str, emit, head_aliases=()):
    """The name-server linker of `engine`: the compiled one runs inside the compiled
    reassembler it is attached to."""
    if engine == COMPILED:
        return CompiledLinker(emit, head_aliases)
    return Linker(emit, head_aliases)
