"""What a regular expression's every match begins with, read from the pattern by Python's
own regex parser (so escapes, `(?x)` and flags read as `re` reads them).

The compiled DOME scanner (native/src/dome_scan.rs) matches a line's role patterns one by
one and skips a pattern whose lead the line's message lacks without running it: a
literal the pattern requires, derived from the profile's own pattern when it is built,
so a site's profile with other wording is prefiltered by its own words.
"""

from __future__ import annotations

import re
from re import _constants as C, _parser


def lead(pattern: str, flags: int = 0) -> str:
    """The literal text every match of `pattern` starts with ('' when none is certain:
    a case-insensitive pattern, or one that does not start with a literal)."""
    tree = _parser.parse(pattern, flags)
    if tree.state.flags & re.IGNORECASE:
        return ""
    out: list[str] = []
    _literal_run(tree, out)
    return "".join(out)


def _literal_run(items, out: list[str]) -> bool:
    """Appends the literal characters `items` start with; True when all of them are."""
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.SUBPATTERN and not av[1] and not av[2]:   # a group with no flags of its own
            if not _literal_run(av[3], out):
                return False
        else:
            return False
    return True


def self_contained(pattern: str, flags: int = 0) -> bool:
    """Whether `pattern` means the same matched alone as inside a larger one: no reference
    to a group (by number or name: `\\1`, `(?P=host)`, `(?(1)...)`), whose numbering or
    whose group would differ."""
    try:
        tree = _parser.parse(pattern, flags)
    except re.error:   # a reference to a group outside it
        return False
    return not _refers(tree)


def _refers(items) -> bool:
    for op, av in items:
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            return True
        for x in av if isinstance(av, (tuple, list)) else (av,):
            subs = x if isinstance(x, list) else [x]
            if any(isinstance(s, _parser.SubPattern) and _refers(s) for s in subs):
                return True
    return False
