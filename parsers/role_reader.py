"""A DOME role pattern as a plan of literals and runs that the compiled scanner
(native/src/dome_reader.rs) reads without running PCRE2, where the pattern is of that
shape; the pattern stays the authority.

A run is one character class repeated (`.*?`, `[^']*`, `\\S+`, `\\d{3}`), captured or not;
each run is followed by a literal or by the pattern's end. The reader ends each run where
the regex's first choice ends it: a lazy run at the first place its next literal follows,
a greedy one at the last (within the run's class and bounds). That is the match PCRE2
returns whenever the rest of the pattern then matches; where it does not, the reader
says so and the scanner runs the regex, which may find a later choice (issue 30: the
call pattern's lazy `.*?` cost ~1,200 instructions a line in PCRE2's JIT).

The plan reads bytes: a class either takes every non-ASCII byte (`.`, `[^']`, `\\S`) or
none (`\\d`, `\\w`, an ASCII set: the scanner's PCRE2 reads them as ASCII), so a run of a
UTF-8 line's bytes is the run of its characters; a class taking non-ASCII characters is
only read with bounds 0 or 1 to unbounded, counts of characters and bytes differing.
"""

from __future__ import annotations

import re
from re import _constants as C, _parser

# A step: (kind, literal bytes, class as 32 bytes (256 bits, one per byte), least, most,
# lazy, group). Kinds: a literal; a run (of `group`, 0: none); a group's open or close
# around steps (a group of more than one run: the role's wrapper group).
Step = tuple[str, bytes, bytes, int, int, bool, int]
LITERAL, RUN, OPEN, CLOSE = "literal", "run", "open", "close"

_SPACE = b" \t\n\r\f\v"
_DIGITS = bytes(range(ord("0"), ord("9") + 1))
_WORD = bytes(c for c in range(128) if chr(c).isalnum() or chr(c) == "_")
_CATEGORIES = {   # category -> (ASCII bytes, takes non-ASCII)
    C.CATEGORY_DIGIT: (_DIGITS, False),
    C.CATEGORY_NOT_DIGIT: (bytes(c for c in range(128) if c not in _DIGITS), True),
    C.CATEGORY_SPACE: (_SPACE, False),
    C.CATEGORY_NOT_SPACE: (bytes(c for c in range(128) if c not in _SPACE), True),
    C.CATEGORY_WORD: (_WORD, False),
    C.CATEGORY_NOT_WORD: (bytes(c for c in range(128) if c not in _WORD), True),
}


class _Refused(Exception):
    """The pattern is not of the reader's shape: the regex reads it."""


def reader_plan(pattern: str, flags: int = 0) -> list[Step] | None:
    """The plan of `pattern` (a role pattern, matched at the message's start and followed
    by trailing white space to the end, as scan_plan matches it), or None when the reader
    cannot read it exactly as the regex does."""
    try:
        tree = _parser.parse(pattern, flags)
        if tree.state.flags & (re.IGNORECASE | re.LOCALE) or not tree.state.flags & re.ASCII:
            return None
        steps: list[Step] = []
        _flatten(tree, steps)
    except (_Refused, re.error):
        return None
    reading = [step for step in steps if step[0] in (LITERAL, RUN)]   # the groups' marks aside
    for step, after in zip(reading, [*reading[1:], None]):
        if step[0] == RUN and after is not None and after[0] == RUN:
            return None   # a run after a run: where the first ends is a choice
        if step[0] == RUN and after is None and step[5]:
            return None   # a lazy run at the end: it would stop before trailing white space
    return steps


def _flatten(items, out: list[Step]) -> None:
    for op, av in items:
        if op is C.LITERAL:
            literal = chr(av).encode()
            if out and out[-1][0] == LITERAL:
                out[-1] = (LITERAL, out[-1][1] + literal, b"", 0, 0, False, 0)
            else:
                out.append((LITERAL, literal, b"", 0, 0, False, 0))
        elif op is C.SUBPATTERN:
            gid, add, remove, sub = av
            if add or remove:
                raise _Refused
            if gid is None:
                _flatten(sub, out)
            elif len(sub) == 1 and sub[0][0] in (C.MAX_REPEAT, C.MIN_REPEAT, C.ANY, C.IN, C.NOT_LITERAL):
                _one(sub[0], gid, out)
            else:
                out.append((OPEN, b"", b"", 0, 0, False, gid))
                _flatten(sub, out)
                out.append((CLOSE, b"", b"", 0, 0, False, gid))
        else:
            _one((op, av), 0, out)


def _one(item, group: int, out: list[Step]) -> None:
    """A repeated character class, or one character of a class, as a run of `group`."""
    op, av = item
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        lo, hi, sub = av
        if len(sub) != 1:
            raise _Refused
        out.append(_run(sub[0], lo, hi, op is C.MIN_REPEAT, group))
    elif op in (C.ANY, C.IN, C.NOT_LITERAL):
        out.append(_run(item, 1, 1, False, group))
    else:
        raise _Refused


def _run(item, lo: int, hi: int, lazy: bool, group: int) -> Step:
    ascii_bytes, non_ascii = _class(item)
    if non_ascii and (lo > 1 or hi != C.MAXREPEAT):
        raise _Refused
    bits = bytearray(32)
    for b in ascii_bytes:
        bits[b >> 3] |= 1 << (b & 7)
    if non_ascii:
        bits[16:] = b"\xff" * 16
    return (RUN, b"", bytes(bits), lo, hi, lazy, group)


def _class(item) -> tuple[bytes, bool]:
    """The ASCII bytes a one-character item takes, and whether it takes non-ASCII ones
    (`.` takes all: the scanner's PCRE2 matches with DOTALL)."""
    op, av = item
    if op is C.ANY:
        return bytes(range(128)), True
    if op is C.LITERAL and av < 128:
        return bytes([av]), False
    if op is C.NOT_LITERAL and av < 128:   # `[^']`
        return bytes(c for c in range(128) if c != av), True
    if op is not C.IN:
        raise _Refused
    negate = bool(av) and av[0][0] is C.NEGATE
    taken: set[int] = set()
    non_ascii = False
    for member_op, member in av[1:] if negate else av:
        if member_op is C.LITERAL and member < 128:
            taken.add(member)
        elif member_op is C.RANGE and member[1] < 128:
            taken.update(range(member[0], member[1] + 1))
        elif member_op is C.CATEGORY and member in _CATEGORIES:
            members, wide = _CATEGORIES[member]
            taken.update(members)
            non_ascii |= wide
        else:
            raise _Refused
    if negate:
        return bytes(c for c in range(128) if c not in taken), not non_ascii
    return bytes(sorted(taken)), non_ascii
