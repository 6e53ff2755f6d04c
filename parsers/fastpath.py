"""The optional compiled line parser (native/, a Rust extension built by `pip install`).

It takes the common line off Python's hands: printable ASCII, native envelope, a second
already seen. Everything else falls back to LineParser's Python code, which stays the
reference: tests/parsers/test_fastpath.py checks the two agree line for line. Without the
extension (no Rust toolchain at install time), with a profile pattern PCRE2 cannot
compile or reads differently, or with DPMSTREAM_PURE_PYTHON=1, the Python path does all
the work.
"""

from __future__ import annotations

import logging
import os
import re

from .events import Event
from .profiles import ENVELOPE_GROUPS, EVENT_FIELDS, UNMATCHED, CompiledForm

log = logging.getLogger(__name__)

try:
    from ._native import FastLines
except ImportError:  # not built: pure Python
    FastLines = None

# What FastLines.parse returns for a line whose envelope matches but no role does.
UNMATCHED_LINE = UNMATCHED
# Syntax valid in both Python and PCRE2 but meaning different things: a POSIX class
# (Python: a plain set) and `{,n}` (Python: 0 to n; older PCRE2: literal text). The other
# differences (\d \w \s \Z $ on Unicode or newlines) cannot arise: the compiled parser
# only takes printable ASCII lines.
_DIVERGENT = re.compile(r"\[:\^?[a-z]+:\]|(?<!\\)\{,\d")


def available() -> bool:
    return FastLines is not None and not os.environ.get("DPMSTREAM_PURE_PYTHON")


def compiled_parser(form: CompiledForm, host: str, daemon: str, max_chars: int):
    """A FastLines for this (native) envelope form, or None: Python parses every line."""
    if not available():
        return None
    divergent = _DIVERGENT.search(form.portable)
    if divergent:
        log.info("compiled parser not used: %r means something else in PCRE2", divergent.group())
        return None
    never = form.regex.groupindex["never"]

    def slot(group: int) -> int:
        return -1 if group == never else group

    alternatives = [
        (group, None if alt.role == UNMATCHED else alt.role, [slot(g) for g in alt.slots])
        for group, alt in form.alternatives.items()
    ]
    assert len(form.envelope_slots) == len(ENVELOPE_GROUPS)
    assert all(len(alt[2]) == len(EVENT_FIELDS) for alt in alternatives)
    try:
        return FastLines(form.portable, form.regex.groups - 1,
                         [slot(g) for g in form.envelope_slots], alternatives, Event,
                         host, daemon, UNMATCHED_LINE, max_chars)
    except ValueError as exc:  # e.g. a site profile using look-around: fine in Python
        log.info("compiled parser unavailable for this profile (%s): Python parses it", exc)
        return None
