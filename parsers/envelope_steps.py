"""A profile's envelope pattern compiled into a few deterministic steps, for the compiled
line scanner (native/src/envelope_steps.rs) to read a line's envelope without PCRE2.

PCRE2's JIT spent about 900 instructions a line on the envelope part of the combined
pattern (issue 30): most of it is the machinery of backtracking, which an envelope such as
`(?P<month>\\d\\d)/... +(?P<pid>\\d+)(?:,(?P<tid>\\d+))? (?P<func>[^\\s:]+): ?` never needs.
Here the pattern (whatever the profile says: nothing is hard-wired) is read with Python's
own parser into steps of a small subset (literal bytes; a class repeated {m,n} times, such as
`\\d\\d`, `\\d{1,6}`, `\\d+`, ` +`, `\\S+`, `[^\\s:]+`; an optional group `(?:...)?`; an
alternation; capture groups), and accepted only where it is provably deterministic: where
PCRE2's first match (greedy, leftmost alternative first) is the only one that could succeed,
so matching greedily without going back gives the same match and the same groups.

The proof, step by step, with FOLLOW the bytes the rest of the pattern can start with:
- a class repeated a variable number of times: its bytes and FOLLOW are disjoint, so a
  shorter run leaves a byte no later step can take;
- an optional group: its first bytes and FOLLOW are disjoint (the next byte decides: if
  the group fails, skipping it fails too);
- an alternation: its branches' first bytes are pairwise disjoint (the next byte picks the
  one branch that can match), no branch empty.
Where everything after a step can match nothing (the end of the envelope is reached), the
rest cannot fail: the roles' alternation after the envelope ends in the catch-all `.*`
(profiles._compile), so PCRE2 never goes back into the envelope from there; an optional
group there whose body fails is skipped (the steps' one fallback), as PCRE2 would.

Anything outside the subset or the proof (a lazy or possessive repeat, an anchor, a
look-around, a back reference, `.`, a flag, a non-ASCII literal, a repeated group, a class
run that overlaps what follows, as DOME's `[ \\d]?\\d`) is refused (None): the scanner then
matches the whole combined pattern with PCRE2, as before. Class bytes are PCRE2's (no UTF,
no UCP: \\d 0-9, \\s tab, LF, VT, FF, CR and space, \\w [A-Za-z0-9_]), so the steps and PCRE2
agree on every byte string, not only on the printable ASCII the scanner takes
(tests/parsers/test_envelope_steps.py holds them to it).

The program handed to Rust is a flat list of (kind, numbers, bytes):
  ("lit", [], text)                      the bytes `text`
  ("run", [min, max or -1], set)         greedy run of bytes in `set` (a 32-byte bitmap)
  ("open", [g], b""), ("close", [g], b"")  group g starts / ends here
  ("opt", [skip, fallback, lo, hi], set) next byte in `set`: enter the body (the next
                                         step), else go to step `skip`; fallback 1: if the
                                         body fails, go to `skip` with groups lo..hi unset
  ("endopt", [fallback], b"")            the end of an optional group's body
  ("branch", [target...], sets)          go to the target whose set (32 bytes each, in
                                         order) holds the next byte; none: fail
  ("jump", [target], b"")
"""

from __future__ import annotations

import re
from re import _constants as sre
from re import _parser as sre_parse

ALL = frozenset(range(256))
DIGIT = frozenset(b"0123456789")
SPACE = frozenset(b"\t\n\x0b\x0c\r ")
WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_CATEGORIES = {
    sre.CATEGORY_DIGIT: DIGIT, sre.CATEGORY_NOT_DIGIT: ALL - DIGIT,
    sre.CATEGORY_SPACE: SPACE, sre.CATEGORY_NOT_SPACE: ALL - SPACE,
    sre.CATEGORY_WORD: WORD, sre.CATEGORY_NOT_WORD: ALL - WORD,
}
_FLAGS = re.IGNORECASE | re.LOCALE | re.MULTILINE  # what would change a step's bytes


class Refused(Exception):
    """The pattern is outside the subset, or not provably deterministic."""


def envelope_steps(envelope: str, groups: int):
    """The program of steps for this envelope pattern (its `groups` capture groups numbered
    from 1, as in the combined pattern), or None where it is refused: PCRE2 matches it."""
    try:
        parsed = sre_parse.parse(envelope)
        if parsed.state.flags & _FLAGS or parsed.state.groups - 1 != groups:
            raise Refused("flags, or another group count")
        nodes = _nodes(parsed)
        program: list = []
        _emit(nodes, (frozenset(), True), program)
        return program
    except (Refused, re.error, RecursionError):
        return None


# -- the pattern's parse tree as nodes: ("lit", bytes) ("run", set, min, max)
#    ("open", g) ("close", g) ("opt", nodes) ("branch", [nodes...])

def _byte_set(op, av):
    """The bytes one single-byte item matches, or None if it is not one."""
    if op is sre.LITERAL or op is sre.NOT_LITERAL:
        if av >= 128:
            raise Refused("non-ASCII literal")
        return frozenset((av,)) if op is sre.LITERAL else ALL - {av}
    if op is not sre.IN:
        return None
    negate, chosen = False, set()
    for item, value in av:
        if item is sre.NEGATE:
            negate = True
        elif item is sre.LITERAL and value < 128:
            chosen.add(value)
        elif item is sre.RANGE and value[1] < 128:
            chosen.update(range(value[0], value[1] + 1))
        elif item is sre.CATEGORY and value in _CATEGORIES:
            chosen |= _CATEGORIES[value]
        else:
            raise Refused(f"class item {item}")
    return ALL - chosen if negate else frozenset(chosen)


def _append_run(out: list, chosen: frozenset, low: int, high):
    if len(chosen) == 1 and low == high:
        text = bytes(chosen) * low
        if out and out[-1][0] == "lit":
            out[-1] = ("lit", out[-1][1] + text)
        else:
            out.append(("lit", text))
    elif out and out[-1][0] == "run" and out[-1][1] == chosen and out[-1][2] == out[-1][3] and low == high:
        out[-1] = ("run", chosen, out[-1][2] + low, out[-1][3] + high)
    else:
        out.append(("run", chosen, low, high))


def _nodes(items) -> list:
    out: list = []
    for op, av in items:
        chosen = _byte_set(op, av)
        if chosen is not None:
            _append_run(out, chosen, 1, 1)
        elif op is sre.MAX_REPEAT:
            low, high, sub = av
            high = None if high is sre.MAXREPEAT else high
            one = _byte_set(*sub[0]) if len(sub) == 1 else None
            if one is not None:
                if high == 0:
                    raise Refused("a repeat of nothing")
                _append_run(out, one, low, high)
            elif (low, high) == (0, 1):
                out.append(("opt", _nodes(sub)))
            else:
                raise Refused("a repeated group")
        elif op is sre.SUBPATTERN:
            group, add, remove, sub = av
            if add or remove:
                raise Refused("inline flags")
            body = _nodes(sub)
            out.extend([("open", group), *body, ("close", group)] if group else body)
        elif op is sre.BRANCH:
            out.append(("branch", [_nodes(arm) for arm in av[1]]))
        else:
            raise Refused(f"{op}")
    return out


# -- the proof, and the program

def _first(nodes) -> tuple[frozenset, bool]:
    """The bytes `nodes` can start with, and whether they can match nothing."""
    found: frozenset = frozenset()
    for node in nodes:
        kind = node[0]
        if kind == "lit":
            return found | {node[1][0]}, False
        if kind == "run":
            if node[2] > 0:
                return found | node[1], False
            found |= node[1]
        elif kind == "opt":
            found |= _first(node[1])[0]
        elif kind == "branch":
            for arm in node[1]:
                found |= _first(arm)[0]
            return found, False
    return found, True


def _follow(nodes, i, outer):
    """What may come after nodes[i]: (bytes, True where the envelope may end there)."""
    first, empty = _first(nodes[i + 1:])
    return (first | outer[0], outer[1]) if empty else (first, False)


def _bitmap(chosen) -> bytes:
    bits = bytearray(32)
    for b in chosen:
        bits[b >> 3] |= 1 << (b & 7)
    return bytes(bits)


def _groups_in(nodes) -> list[int]:
    found = []
    for node in nodes:
        if node[0] == "open":
            found.append(node[1])
        elif node[0] == "opt":
            found += _groups_in(node[1])
        elif node[0] == "branch":
            for arm in node[1]:
                found += _groups_in(arm)
    return found


def _emit(nodes, outer, program: list):
    for i, node in enumerate(nodes):
        kind = node[0]
        after, may_end = _follow(nodes, i, outer)
        if kind == "lit":
            program.append(("lit", [], node[1]))
        elif kind == "run":
            _, chosen, low, high = node
            if low != high and not may_end and chosen & after:
                raise Refused("a run overlapping what follows")
            program.append(("run", [low, -1 if high is None else high], _bitmap(chosen)))
        elif kind in ("open", "close"):
            program.append((kind, [node[1]], b""))
        elif kind == "opt":
            body = node[1]
            first, empty = _first(body)
            if empty or (not may_end and first & after):
                raise Refused("an optional group the next byte does not decide")
            groups = _groups_in(body)
            lo, hi = (min(groups), max(groups) + 1) if groups else (0, 0)
            at = len(program)
            program.append(None)
            _emit(body, (after, may_end), program)
            program.append(("endopt", [int(may_end)], b""))
            program[at] = ("opt", [len(program), int(may_end), lo, hi], _bitmap(first))
        else:  # branch
            firsts = [_first(arm) for arm in node[1]]
            if any(empty for _, empty in firsts) or sum(len(f) for f, _ in firsts) != len(
                    frozenset().union(*(f for f, _ in firsts))):
                raise Refused("an alternation the next byte does not decide")
            at = len(program)
            program.append(None)
            targets, jumps = [], []
            for arm in node[1]:
                targets.append(len(program))
                _emit(arm, (after, may_end), program)
                jumps.append(len(program))
                program.append(None)
            for j in jumps:
                program[j] = ("jump", [len(program)], b"")
            program[at] = ("branch", targets, b"".join(_bitmap(f) for f, _ in firsts))
