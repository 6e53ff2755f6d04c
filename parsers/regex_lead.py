"""What a regular expression's every match begins with, read from the pattern by Python's
own regex parser (so escapes, `(?x)` and flags read as `re` reads them).

The compiled DOME scanner (native/src/dome_scan.rs) matches a line's role patterns one by
one and skips a pattern whose lead the line's message lacks without running it: a
literal the pattern requires, derived from the profile's own pattern when it is built,
so a site's profile with other wording is prefiltered by its own words. It also passes
over a line whose first bytes a form's envelope cannot start with (lead_sets: a DPM
line's `08/12 14:31` is no RFC 3339 stamp's `\\d{4}-`) without running the envelope.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from re import _constants as C, _parser

# What this module reads of the bundled profiles' patterns, kept in regex_profiles/ (as
# parsed.json keeps their TOML): re's parser is Python, and parsing the ~40 role patterns
# of the DOME profiles was ~30 M instructions of a DOME replay's ~280 M start-up (issue
# 30). Kept under each pattern's own text and flags, so an edited pattern is parsed as
# any other; `python -m dpmstream.parsers.profiles` writes it (tests/parsers/
# test_regex_lead.py fails until then), for this Python's re (another's parses).
FACTS = "regex_facts.json"


def _kept_facts_path():
    from pathlib import Path
    from dpmstream import regex_profiles
    return Path(regex_profiles.__path__[0]) / FACTS


@lru_cache(maxsize=None)
def _kept_facts() -> dict:
    """{flags: {pattern: [group index, group count, self-contained, lead sets]}} kept for
    this Python's re ({} where none is: each pattern is parsed)."""
    import json
    try:
        with open(_kept_facts_path(), encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return {}
    return kept["facts"] if kept.get("python") == _PYTHON else {}


_PYTHON = "%d.%d" % sys.version_info[:2]


@lru_cache(maxsize=None)
def _facts(pattern: str, flags: int) -> tuple[dict, int, bool, tuple]:
    """(group index, group count, self-contained, lead sets) of a pattern re parses;
    re.error for one it cannot."""
    kept = _kept_facts().get(str(int(flags)), {}).get(pattern)
    if kept is not None:
        groups, count, contained, sets = kept
        return groups, count, contained, tuple(map(frozenset, sets))
    tree = _tree(pattern, flags)
    return (dict(tree.state.groupdict), tree.state.groups - 1, _contained(pattern, tree),
            tuple(_lead_sets(tree)))


def facts_to_keep(patterns) -> dict:
    """The facts of these (pattern, flags), as _kept_facts reads them, parsed now."""
    facts: dict = {}
    for pattern, flags in sorted(patterns, key=lambda p: (p[1], p[0])):
        tree = _tree(pattern, flags)
        facts.setdefault(str(int(flags)), {})[pattern] = [
            dict(tree.state.groupdict), tree.state.groups - 1, _contained(pattern, tree),
            ["".join(sorted(chars)) for chars in _lead_sets(tree)]]
    return {"python": _PYTHON, "facts": facts}


@lru_cache(maxsize=None)
def _tree(pattern: str, flags: int):
    """The pattern as `re` parses it, parsed once a process (read only here): a check's
    profiles share role patterns (a DOME profile's two forms, all of them), and each was
    parsed once for its lead and again for self_contained (~200 parses of ~50 patterns
    building `profile check`'s scanners, issue 30)."""
    return _parser.parse(pattern, flags)


@lru_cache(maxsize=None)
def lead(pattern: str, flags: int = 0) -> str:
    """The literal text every match of `pattern` starts with ('' when none is certain:
    a case-insensitive pattern, or one that does not start with a literal)."""
    text = []
    for chars in lead_sets(pattern, flags):
        if len(chars) != 1:
            break
        text.extend(chars)
    return "".join(text)


# A class of more characters than this is not spelled out (a place of any character, in
# effect): the sets are for a check of a few bytes.
_MAX_CLASS = 128


def lead_sets(pattern: str, flags: int = 0) -> list[frozenset[str]]:
    """The characters a match of `pattern` may have at each of its first places, for as
    many places as every match has them ([] for a case-insensitive pattern): the places
    of literals, classes, fixed repeats and branches of one width, up to the first of
    anything else (an optional part, a run, a look-around, a class it does not spell)."""
    return list(_facts(pattern, flags)[3])


def _lead_sets(tree) -> list[frozenset[str]]:
    if tree.state.flags & re.IGNORECASE:
        return []
    out: list[frozenset[str]] = []
    _run(tree, out, bool(tree.state.flags & re.ASCII))
    return out


def _run(items, out: list, ascii: bool) -> bool:
    """Appends the sets of the places `items` fill; True when it read all of them."""
    for op, av in items:
        if op is C.LITERAL:
            out.append(frozenset(chr(av)))
        elif op is C.IN:
            chars = _class(av, ascii)
            if chars is None:
                return False
            out.append(chars)
        elif op is C.SUBPATTERN and not av[1] and not av[2]:   # a group with no flags of its own
            if not _run(av[3], out, ascii):
                return False
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] == av[1]:   # x{n}
            for _ in range(av[0]):
                if not _run(av[2], out, ascii):
                    return False
        elif op is C.BRANCH:
            runs = []
            for branch in av[1]:
                places: list = []
                runs.append((places, _run(branch, places, ascii)))
            width = min(len(places) for places, _ in runs)
            out.extend(frozenset().union(*(places[i] for places, _ in runs)) for i in range(width))
            if not all(whole and len(places) == width for places, whole in runs):
                return False
        elif op is C.AT and av is C.AT_BEGINNING_STRING:   # \A: no place of its own
            continue
        else:
            return False
    return True


def _class(items, ascii: bool) -> frozenset[str] | None:
    """The characters of a class `[...]`, or None (negated, a category other than an
    ASCII \\d, or too many to spell)."""
    chars: set[str] = set()
    for op, av in items:
        if op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.RANGE and av[1] - av[0] < _MAX_CLASS:
            chars.update(map(chr, range(av[0], av[1] + 1)))
        elif op is C.CATEGORY and av is C.CATEGORY_DIGIT and ascii:
            chars.update("0123456789")
        else:
            return None
    return frozenset(chars) if len(chars) <= _MAX_CLASS else None


@lru_cache(maxsize=None)
def self_contained(pattern: str, flags: int = 0) -> bool:
    """Whether `pattern` means the same matched alone as inside a larger one: no reference
    to a group (by number or name: `\\1`, `(?P=host)`, `(?(1)...)`), whose numbering or
    whose group would differ."""
    try:
        return _facts(pattern, flags)[2]
    except re.error:   # a reference to a group outside it
        return False


def _contained(pattern: str, tree) -> bool:
    # Only these spell a reference: a pattern without them is known so without walking
    # its tree (the walk was most of reading a DOME profile's role patterns, issue 30).
    return _SPELLS_A_REFERENCE.search(pattern) is None or not _refers(tree)


# `\1`..`\9` (an octal escape too, when more digits follow: the walk tells them apart),
# `(?P=name)` and `(?(group)yes|no)`.
_SPELLS_A_REFERENCE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


def group_index(pattern: str, flags: int = 0) -> dict[str, int]:
    """re.compile(pattern, flags).groupindex, read from the parse (a compile of each role
    pattern alone, only for its groups' numbers, was most of building a DOME scanner)."""
    return dict(_facts(pattern, flags)[0])


def group_count(pattern: str, flags: int = 0) -> int:
    """re.compile(pattern, flags).groups, read from the parse, as group_index."""
    return _facts(pattern, flags)[1]


def _refers(items) -> bool:
    for op, av in items:
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            return True
        for x in av if isinstance(av, (tuple, list)) else (av,):
            subs = x if isinstance(x, list) else [x]
            if any(isinstance(s, _parser.SubPattern) and _refers(s) for s in subs):
                return True
    return False
