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


def compiled_parser(form: CompiledForm, host: str, daemon: str, max_chars: int, split: bool = True):
    """A FastLines for this (native) envelope form, or None: Python parses every line.
    It takes the split form of the pattern where one can be made (split_form; `split`
    False: never, as the tests comparing the forms ask), else the marked form
    (marked_form), else the portable one as it is."""
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
    envelope = [slot(g) for g in form.envelope_slots]
    parts = split_form(form) if split else None
    if parts is not None:
        pattern, groups, envelope_items, roles = parts
        try:
            return FastLines(pattern, groups, envelope,
                             [(-1, role, own) for (_, role, _), (_, _, _, own, _) in zip(alternatives, roles)],
                             Event, host, daemon, UNMATCHED_LINE, max_chars,
                             roles=[(prefix, body, inner, items) for prefix, body, inner, _, items in roles],
                             envelope_items=envelope_items)
        except ValueError as exc:
            log.info("split pattern refused by PCRE2 (%s): the whole one is used", exc)
    marked = marked_form(form)
    if marked is not None:
        pattern, groups, renumbered = marked
        try:
            return FastLines(pattern, groups, envelope,
                             [(-1, role, slots) for (_, role, _), slots in zip(alternatives, renumbered)],
                             Event, host, daemon, UNMATCHED_LINE, max_chars, marked=True)
        except ValueError as exc:
            log.info("marked pattern refused by PCRE2 (%s): the portable one is used", exc)
    try:
        return FastLines(form.portable, form.regex.groups - 1, envelope, alternatives, Event,
                         host, daemon, UNMATCHED_LINE, max_chars)
    except ValueError as exc:  # e.g. a site profile using look-around: fine in Python
        log.info("compiled parser unavailable for this profile (%s): Python parses it", exc)
        return None


_PORTABLE_HEAD, _PORTABLE_TAIL = r"(?s)\A(?:", r")\s*\z"


def marked_form(form: CompiledForm):
    """The form's portable pattern rewritten for PCRE2 to match with fewer groups:
    (pattern, groups, per alternative its EVENT_FIELDS groups in that pattern, -1 absent),
    or None where it cannot be rewritten safely (a back reference or a condition on a
    group, whose numbers would change, or a pattern not built the way profiles._compile
    builds it): the portable pattern is used as it is.

    PCRE2's JIT code costs about 15 instructions a line for each group of the pattern,
    taking part or not, and 30 for each it enters: the 15 wrapper groups and 26 field
    groups of the DPM profile were 2/5 of its cost. Here each alternative `(?P<ai>body)`
    becomes `(?:(*MARK:i)(?:body))` (the mark names the alternative that matched, in
    FastLines' list order), its named groups plain ones, and the alternation a branch
    reset `(?|...)`, in which every alternative numbers its groups from the same place.
    The alternatives, their order and so what matches are unchanged; only where PCRE2
    reports the groups moves, and the slots returned say where."""
    parts = _alternative_bodies(form)
    if parts is None:
        return None
    envelope, first, bodies = parts
    # the body in its own group: a `|` of its own must not leave its second branch unmarked
    branches = [f"(?:(*MARK:{i})(?:{body}))" for i, (body, _, _) in enumerate(bodies)]
    # the alternative's own groups are numbered from first (the envelope's last + 1)
    renumbered = [[-1 if g < 0 else first - 1 + g for g in own] for _, _, own in bodies]
    pattern = (_PORTABLE_HEAD + envelope + ")(?|" + "|".join(branches) + _PORTABLE_TAIL)
    return pattern, first - 1 + max(inner for _, inner, _ in bodies), renumbered


def split_form(form: CompiledForm):
    """The form's portable pattern split for PCRE2 to try only the role alternatives a
    message can match: (envelope pattern, its groups, per alternative (its literal
    prefix as bytes, its pattern, its groups, its EVENT_FIELDS groups in that pattern,
    -1 absent)), or None where marked_form could not rewrite the pattern either (then
    neither is used), or the profile sets a flag other than DOTALL (a prefix would then
    not be literal).

    native/src/line_match.rs matches the envelope, then, in the profile's order, each
    alternative whose prefix the message starts with, anchored where the envelope ended
    (so `\b` and look-behind still see the envelope), and takes the first that matches:
    the whole pattern's own answer, as its catch-all always matches after the envelope's
    first match. The DPM profile's alternation cost 1,643 instructions a line in PCRE2's
    JIT on the light shape, trying every alternative before the one that matched."""
    if form.regex.flags & ~(re.DOTALL | re.UNICODE):
        return None
    parts = _alternative_bodies(form)
    if parts is None:
        return None
    envelope, first, bodies = parts
    roles = [(literal_prefix(body).encode(), f"(?s)(?:{body}){_PORTABLE_TAIL[1:]}", inner, own,
              template_items(body, inner, to_end=True))
             for body, inner, own in bodies]
    return _PORTABLE_HEAD + envelope + ")", first - 1, template_items(envelope, first - 1, to_end=False), roles


_META = frozenset(".^$*+?{}[]|()")
# The bytes a line the compiled parser reads may hold (printable ASCII and tab): what a
# template's literals may be. Its classes are worked out over every byte, by Python's
# own reading of each class (bytes no such line holds only make them overlap more).
_LINE_BYTES = [9, *range(0x20, 0x7f)]
_UNBOUNDED = 1 << 62  # a count past any line's length
_SPACE = frozenset(b" \t")  # what `\s` matches of those bytes
_CLASS_ESCAPES = frozenset("dDwWsS")
_QUANTIFIER = re.compile(r"\?|\*|\+|\{(\d+)(,(\d*))?\}")


def template_items(pattern: str, groups: int, to_end: bool):
    """The pattern laid out for native/src/template.rs (matched with no PCRE2, no
    backtracking): its items (kind, bytes, a, b), or None where it is not of that simple
    kind (an alternation, an anchor or `\\b`, a lazy count, a repeated group ...), where
    its `groups` are not its own, or where a class of variable count or an optional group
    shares a byte with what may follow it (giving back could then make a match, and the
    template never gives back). After the pattern comes (`to_end`) a role's `\\s*\\z`,
    else the envelope's message (any text): a class at the end needs nothing more (from
    where it stopped the text must be white space, or anything, either way), but an
    optional group there must not start with a byte those could take, as skipping it
    could then make a match where taking it failed."""
    parsed = _parse_sequence(pattern, 0, [0])
    if parsed is None or parsed[1] != len(pattern) or parsed[2] != groups:
        return None
    nodes = parsed[0]
    if _possessive_first(nodes, frozenset(), _SPACE if to_end else frozenset(range(256))) is None:
        return None
    return _lay_out(nodes)


def _parse_sequence(text: str, i: int, counter: list):
    """(nodes, index after, groups so far) of the sequence from text[i] up to a `)` or the
    end, or None. A node: ("lit", char) ("class", bytes, min, max) ("group", number or
    None, nodes, min, max)."""
    nodes = []
    while i < len(text):
        c = text[i]
        if c == ")":
            break
        if c == "\\":
            escaped = text[i + 1:i + 2]
            if escaped in _CLASS_ESCAPES:
                node, i = ("class", _class_bytes(text[i:i + 2]), 1, 1), i + 2
            elif escaped and not escaped.isalnum() and escaped.isascii():
                node, i = ("lit", escaped), i + 2
            else:
                return None
        elif c == "[":
            end = _set_end(text, i)
            if end < 0:
                return None
            node, i = ("class", _class_bytes(text[i:end]), 1, 1), end
        elif c == ".":
            node, i = ("class", _class_bytes("."), 1, 1), i + 1
        elif c == "(":
            if text.startswith("(?:", i):
                number, i = None, i + 3
            elif text.startswith("(?P<", i):
                counter[0] += 1
                number, i = counter[0], text.index(">", i) + 1
            elif text.startswith("(?", i):
                return None
            else:
                counter[0] += 1
                number, i = counter[0], i + 1
            inner = _parse_sequence(text, i, counter)
            if inner is None or not text.startswith(")", inner[1]):
                return None
            node, i = ("group", number, inner[0], 1, 1), inner[1] + 1
        elif c in _META or not c.isascii() or ord(c) not in _LINE_BYTES:
            return None
        else:
            node, i = ("lit", c), i + 1
        count = _QUANTIFIER.match(text, i)
        if count:
            low, high = {"?": (0, 1), "*": (0, _UNBOUNDED), "+": (1, _UNBOUNDED)}.get(count.group(), (None, None))
            if low is None:
                low = int(count.group(1))
                high = low if count.group(2) is None else int(count.group(3)) if count.group(3) else _UNBOUNDED
            i = count.end()
            if text[i:i + 1] in ("?", "+") or low > high:  # lazy or possessive
                return None
            if node[0] == "lit":
                node = ("class", _class_bytes(re.escape(node[1])), 1, 1)
            if node[0] == "group" and (low, high) != (0, 1):
                return None
            node = (*node[:-2], low, high)
        nodes.append(node)
    return nodes, i, counter[0]


def _class_bytes(cls: str) -> bytes:
    """The bytes the class `cls` matches, as Python reads it (DOTALL; a byte past ASCII as
    the character of that number)."""
    one = re.compile(cls, re.DOTALL)
    return bytes(b for b in range(256) if one.fullmatch(chr(b)))


def _possessive_first(nodes, follow: frozenset, end: frozenset, at_end: bool = True):
    """The bytes a match of `nodes` may start with (with `follow` where they may match
    nothing), where `follow` may come after them; None where a variable part shares a
    byte with what may follow it, or an optional group may match nothing (its start
    would then not say whether it is taken). `at_end`: the pattern's end may follow
    them, after which an optional group must not start with a byte of `end` either
    (skipped, it would leave that byte to what follows the pattern: a role's `\\s*\\z`,
    the envelope's message)."""
    for node in reversed(nodes):
        if node[0] == "lit":
            first, empty = frozenset(node[1].encode()), False
        elif node[0] == "class":
            _, members, low, high = node
            first, empty = frozenset(members), low == 0
            if low != high and first & follow:
                return None
        else:
            _, _, inner, low, _ = node
            first = _possessive_first(inner, follow, end, at_end)  # with `follow` if inner may be empty
            if first is None:
                return None
            empty = low == 0
            if empty and (_may_be_empty(inner) or first & (follow | end if at_end else follow)):
                return None
        follow = first | follow if empty else first
        at_end = at_end and empty
    return follow


def _may_be_empty(nodes) -> bool:
    return all(n[0] == "class" and n[2] == 0 or n[0] == "group" and (n[3] == 0 or _may_be_empty(n[2]))
               for n in nodes)


def _lay_out(nodes) -> list:
    """The items of `nodes`; runs of literals are one literal, `\\d\\d` one class of two."""
    items, own = [], False  # own: the last item is this sequence's own, not a group's
    for node in nodes:
        last = items[-1] if own else (None,)
        if node[0] == "lit":
            if last[0] == 0:
                items[-1] = (0, last[1] + node[1].encode(), 0, 0)
            else:
                items.append((0, node[1].encode(), 0, 0))
            own = True
        elif node[0] == "class":
            if last[0] == 1 and last[1] == node[1] and last[2] == last[3] and node[2] == node[3]:
                items[-1] = (1, node[1], last[2] + node[2], last[3] + node[3])
            else:
                items.append((1, node[1], node[2], node[3]))
            own = True
        else:
            _, number, inner, low, _ = node
            body = _lay_out(inner)
            if number is not None:
                body = [(2, b"", number, 0), *body, (3, b"", number, 0)]
            if low == 0:
                body = [(4, bytes(sorted(_possessive_first(inner, frozenset(), frozenset(), False))), len(body), 0),
                        *body]
            items += body
            own = False
    return items


def literal_prefix(body: str) -> str:
    """The text every match of the pattern `body` starts with (maybe ""): its leading
    literal characters up to the first that is not plain (a class, group, anchor or
    escape of a letter or digit) or not certain (one a `?`, `*` or `{` makes optional).
    A top-level `|` makes it "": each branch would start differently."""
    if _top_level_bar(body):
        return ""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            escaped = body[i + 1:i + 2]
            if not escaped or escaped.isalnum() or not escaped.isascii():
                break
            literal, step = escaped, 2
        elif c in _META or not c.isascii():
            break
        else:
            literal, step = c, 1
        following = body[i + step:i + step + 1]
        if following in ("?", "*", "{"):
            break
        out.append(literal)
        if following == "+":  # one at least: that one is certain, what follows is not
            break
        i += step
    return "".join(out)


def _top_level_bar(body: str) -> bool:
    """Whether `body` has a `|` outside every group and set."""
    i, depth = 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _set_end(body, i)
            if i < 0:
                return True  # unbalanced: not to be taken apart
            continue
        depth += (c == "(") - (c == ")")
        if c == "|" and depth == 0:
            return True
        i += 1
    return False


def _set_end(body: str, i: int) -> int:
    """The index just past the set opening at body[i], or -1 if it does not close."""
    j = i + 1
    if body.startswith("^", j):
        j += 1
    if body.startswith("]", j):
        j += 1
    while j < len(body) and body[j] != "]":
        j += 2 if body[j] == "\\" else 1
    return j + 1 if j < len(body) else -1


def _alternative_bodies(form: CompiledForm):
    """The form's portable pattern taken apart: (its envelope, the number of its first
    alternative's first group, per alternative (its body with plain groups, their
    number, its EVENT_FIELDS groups numbered from 1, -1 absent)), or None (see
    marked_form)."""
    portable, index = form.portable, form.regex.groupindex
    ordered = sorted(form.alternatives)  # wrapper group numbers, the alternatives' order
    names = [f"a{i}" for i in range(len(ordered) - 1)] + ["unmatched"]
    if [index.get(n) for n in names] != ordered:
        return None
    if not (portable.startswith(_PORTABLE_HEAD) and portable.endswith(_PORTABLE_TAIL)):
        return None
    starts = []
    for name in names:
        at = portable.find(f"(?P<{name}>", starts[-1] + 1 if starts else 0)
        if at < 0:
            return None
        starts.append(at)
    if portable[starts[0] - 4:starts[0]] != ")(?:":
        return None
    envelope = portable[len(_PORTABLE_HEAD):starts[0] - 4]
    ends = [s - 1 for s in starts[1:]] + [len(portable) - len(_PORTABLE_TAIL)]
    if any(portable[e] != "|" for e in ends[:-1]):
        return None
    first = ordered[0]
    if any(g != index["never"] and g >= first for g in form.envelope_slots):
        return None
    never = index["never"]
    bodies = []
    next_groups = ordered[1:] + [never]
    for name, start, end, wrapper, after in zip(names, starts, ends, ordered, next_groups):
        part, opening = portable[start:end], f"(?P<{name}>"
        if not part.endswith(")"):
            return None
        plain = _plain_groups(part[len(opening):-1])
        if plain is None or plain[1] != after - wrapper - 1:
            return None
        body, inner = plain
        own = [-1 if g == never else g - wrapper for g in form.alternatives[wrapper].slots]
        bodies.append((body, inner, own))
    return envelope, first, bodies


def _plain_groups(body: str):
    """(body with its named groups made plain groups, how many capture groups it has), or
    None: a back reference or condition (numbers would change), or unbalanced text."""
    out, i, groups, depth = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if body[i + 1:i + 2].isdigit():  # a back reference by number
                return None
            out.append(body[i:i + 2])
            i += 2
            continue
        if c == "[":  # a set: its brackets and parentheses are literal
            j = _set_end(body, i)
            if j < 0:
                return None
            out.append(body[i:j])
            i = j
            continue
        if c == "(":
            depth += 1
            if body.startswith("(?P<", i):
                end = body.find(">", i)
                if end < 0:
                    return None
                out.append("(")
                groups += 1
                i = end + 1
                continue
            if body.startswith(("(?P=", "(?(", "(?#"), i):  # reference, condition, comment
                return None
            groups += not body.startswith("(?", i)
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
        out.append(c)
        i += 1
    return ("".join(out), groups) if depth == 0 else None


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
