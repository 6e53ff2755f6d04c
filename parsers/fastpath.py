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
from .shapes import MASKS, SHAPE_CHARS
from .profiles import ENVELOPE_GROUPS, EVENT_FIELDS, ROLES, UNMATCHED, CompiledForm, Profile

log = logging.getLogger(__name__)

try:
    from ._native import FastLines, ProfileLines, Shapes
except ImportError:  # not built: pure Python
    FastLines = ProfileLines = Shapes = None

# What FastLines.parse returns for a line whose envelope matches but no role does.
UNMATCHED_LINE = UNMATCHED
# Syntax valid in both Python and PCRE2 but meaning different things: a POSIX class
# (Python: a plain set) and `{,n}` (Python: 0 to n; older PCRE2: literal text). The other
# differences (\d \w \s \Z $ on Unicode or newlines) cannot arise: the compiled parser
# only takes printable ASCII lines.
_DIVERGENT = re.compile(r"\[:\^?[a-z]+:\]|(?<!\\)\{,\d")


def available() -> bool:
    return FastLines is not None and not os.environ.get("DPMSTREAM_PURE_PYTHON")


def reads_alike(pattern: str) -> bool:
    """Whether PCRE2 reads this pattern as Python does (on printable ASCII lines)."""
    divergent = _DIVERGENT.search(pattern)
    if divergent:
        log.info("compiled parser not used: %r means something else in PCRE2", divergent.group())
    return divergent is None


def compiled_parser(form: CompiledForm, host: str, daemon: str, max_chars: int):
    """A FastLines for this (native) envelope form, or None: Python parses every line."""
    if not available() or not reads_alike(form.portable):
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


_SHAPES: list = []  # the one Shapes, made when first asked


def compiled_shapes():
    """The extension's parsers/shapes.shape (printable ASCII messages), shared by every
    profile: a message is masked once however many profiles leave it unmatched; or None."""
    if Shapes is None or not all(reads_alike(pattern.pattern) for pattern, _ in MASKS):
        return None
    if not _SHAPES:
        _SHAPES.append(Shapes([(pattern.pattern, mask) for pattern, mask in MASKS], SHAPE_CHARS))
    return _SHAPES[0]


def compiled_role_lines(profile: Profile, catch_all, watched, opening, returns, max_chars: int):
    """A ProfileLines (native/src/profile_tally.rs) telling the form, function and role of
    a block's lines by this profile's own patterns, and the shapes (parsers/shapes.py) of
    those it leaves unmatched or to a catch-all role, or None (not built, a pattern PCRE2
    reads otherwise or cannot compile): Python reads every line. The role arguments are
    role names, passed as indices into ROLES."""
    if ProfileLines is None or not available():
        return None
    forms = (profile.native, profile.rsyslog)
    shapes = compiled_shapes()
    if shapes is None or not all(reads_alike(p) for p in (*(f.portable for f in forms), profile.func)):
        return None
    index = {role: i for i, role in enumerate(ROLES)}

    def group(form: CompiledForm, name: str) -> int:
        return form.envelope.get(name, -1)

    def alternatives(form: CompiledForm):
        return [(g, None if alt.role == UNMATCHED else index[alt.role], alt.fields.get("token", -1))
                for g, alt in form.alternatives.items()]
    try:
        return ProfileLines(
            [(f.portable, group(f, "func"), group(f, "host"), group(f, "pid"), group(f, "tid"),
              alternatives(f)) for f in forms],
            profile.func, len(ROLES), *([index[r] for r in roles if r in index]
                                        for roles in (catch_all, watched, opening, returns)),
            max_chars, shapes)
    except ValueError as exc:  # e.g. a site profile using look-around: fine in Python
        log.info("compiled role lines unavailable for profile %s (%s)", profile.name, exc)
        return None
