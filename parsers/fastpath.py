"""The optional compiled line parser (native/, a Rust extension built by `pip install`).

It takes the common line off Python's hands: printable ASCII, native envelope, a second
already seen; its twin of the rsyslog form, the same behind a prefix whose receive time
reads the stamp as before (and, handed the twin of the parser a tag is routed to, the
engine has that one read its lines: LineParser.route_to). Everything else falls back to LineParser's Python code, which
stays the reference: tests/parsers/test_fastpath.py and test_fastpath_rsyslog.py check
the two agree line for line. Without the
extension (no Rust toolchain at install time), with a profile pattern PCRE2 cannot
compile or reads differently, or with DPMSTREAM_PURE_PYTHON=1, the Python path does all
the work.
"""

from __future__ import annotations

import re

from .events import Event
from .extension import compiled
from .lazylog import get_logger
from .shapes import MASKS, SHAPE_CHARS
from .profiles import ENVELOPE_GROUPS, EVENT_FIELDS, ROLE_GROUPS, ROLES, UNMATCHED, CompiledForm, Profile, role_patterns

log = get_logger(__name__)  # lazylog: logging imported for a message written

# What FastLines.parse returns for a line whose envelope matches but no role does.
UNMATCHED_LINE = UNMATCHED
# Syntax valid in both Python and PCRE2 but meaning different things: a POSIX class
# (Python: a plain set) and `{,n}` (Python: 0 to n; older PCRE2: literal text). The other
# differences (\d \w \s \Z $ on Unicode or newlines) cannot arise: the compiled parser
# only takes printable ASCII lines.
_DIVERGENT = re.compile(r"\[:\^?[a-z]+:\]|(?<!\\)\{,\d")


def available() -> bool:
    return compiled("FastLines") is not None


def reads_alike(pattern: str) -> bool:
    """Whether PCRE2 reads this pattern as Python does (on printable ASCII lines)."""
    divergent = _DIVERGENT.search(pattern)
    if divergent:
        log.info("compiled parser not used: %r means something else in PCRE2", divergent.group())
    return divergent is None


def compiled_parser(form: CompiledForm, host: str, daemon: str, max_chars: int,
                    native: CompiledForm | None = None, other_tags=()):
    """A FastLines for this envelope form, or None: Python parses every line. It takes
    the marked form of the pattern where one can be made (marked_form), else the portable
    one as it is. With `native` (the profile's native form), `form` is its rsyslog form:
    the twin takes only lines the native form does not match, whose tag is none of
    `other_tags` and whose prefix's year, month and offset are those of the seconds
    LineParser remembered in it (its events' host is the prefix's); a line of one of
    `other_tags` its FastLines.route'd twin reads in the engine, where one is given."""
    FastLines = compiled("FastLines")
    if FastLines is None or not reads_alike(form.portable):
        return None
    prefix = None
    if native is not None:
        if not reads_alike(native.head):
            return None
        prefix = (form.envelope["rtime"], form.envelope["host"], form.envelope.get("tag", -1),
                  sorted(other_tags), native.head)
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
    marked = marked_form(form)
    if marked is not None:
        pattern, groups, renumbered = marked
        try:
            return FastLines(pattern, groups, envelope,
                             [(-1, role, slots) for (_, role, _), slots in zip(alternatives, renumbered)],
                             Event, host, daemon, UNMATCHED_LINE, max_chars, marked=True,
                             rsyslog=prefix)
        except ValueError as exc:
            log.info("marked pattern refused by PCRE2 (%s): the portable one is used", exc)
    try:
        return FastLines(form.portable, form.regex.groups - 1, envelope, alternatives, Event,
                         host, daemon, UNMATCHED_LINE, max_chars, rsyslog=prefix)
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
    becomes `(?:(?:body)(*MARK:i))` (the mark names the alternative that matched, in
    FastLines' list order), its named groups plain ones, and the alternation a branch
    reset `(?|...)`, in which every alternative numbers its groups from the same place.
    The mark closes its alternative: PCRE2 reports the last mark on the path that
    matched (one it backtracked over is forgotten), and an alternative that fails at its
    first bytes, as most do on a line, never passes it. Opening each alternative, the
    mark cost ~10 instructions for every alternative tried (a `returns` line, the 11th
    of the DPM profile's, 399 -> 290 a line of JIT code; the threads slice -1.0%).
    The alternatives, their order and so what matches are unchanged; only where PCRE2
    reports the groups moves, and the slots returned say where."""
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
    branches, renumbered, widest = [], [], 0
    next_groups = ordered[1:] + [never]
    for i, (name, start, end, wrapper, after) in enumerate(zip(names, starts, ends, ordered, next_groups)):
        part, opening = portable[start:end], f"(?P<{name}>"
        if not part.endswith(")"):
            return None
        plain = _plain_groups(part[len(opening):-1])
        if plain is None or plain[1] != after - wrapper - 1:
            return None
        body, inner = plain
        widest = max(widest, inner)
        # the body in a group of its own: a `|` of its own must leave no branch unmarked
        branches.append(f"(?:(?:{body})(*MARK:{i}))")
        alt = form.alternatives[wrapper]
        # the alternative's own groups are numbered from first (the envelope's last + 1)
        renumbered.append([-1 if g == never else first + g - wrapper - 1 for g in alt.slots])
    pattern = (_PORTABLE_HEAD + envelope + ")(?|" + "|".join(branches) + _PORTABLE_TAIL)
    return pattern, first - 1 + widest, renumbered


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
            j = i + 1
            if body.startswith("^", j):
                j += 1
            if body.startswith("]", j):
                j += 1
            while j < len(body) and body[j] != "]":
                j += 2 if body[j] == "\\" else 1
            if j >= len(body):
                return None
            out.append(body[i:j + 1])
            i = j + 1
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
    Shapes = compiled("Shapes")
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
    ProfileLines = compiled("ProfileLines")
    if ProfileLines is None:
        return None
    shapes = compiled_shapes()
    if shapes is None or not reads_alike(profile.func):
        return None
    index = {role: i for i, role in enumerate(ROLES)}
    alone = role_plan(profile, index)
    if alone is None:
        forms = [_form_of(f, index) for f in (profile.native, profile.rsyslog)]
    else:
        forms = [_envelope_alone(envelope, alone) for envelope in _envelopes(profile)]
    if any(form is None for form in forms):
        return None
    try:
        return ProfileLines(
            forms, profile.func, len(ROLES), *([index[r] for r in roles if r in index]
                                               for roles in (catch_all, watched, opening, returns)),
            max_chars, shapes)
    except ValueError as exc:  # e.g. a site profile using look-around: fine in Python
        log.info("compiled role lines unavailable for profile %s (%s)", profile.name, exc)
        return None


def _envelopes(profile: Profile) -> tuple[str, str]:
    """The envelopes of the profile's native and rsyslog forms (profiles._compile's)."""
    return profile.native_envelope, profile.rsyslog_envelope + profile.native_envelope


def _form_of(form: CompiledForm, index: dict[str, int]):
    """A ProfileLines form of the form's one regex (role_plan's fallback), or None where
    PCRE2 reads it otherwise."""
    if not reads_alike(form.portable):
        return None
    return (form.portable, *(form.envelope.get(name, -1) for name in ("func", "host", "pid", "tid")),
            _in_one_regex(form, index))


def _envelope_alone(envelope: str, alone: list):
    """A ProfileLines form of this envelope and the role patterns matched alone after it,
    or None where PCRE2 reads one otherwise. Its groups are numbered as in the form's one
    regex, whose envelope comes first (profiles._compile): read from the envelope alone,
    from regex_lead's kept facts for a bundled profile (the one regex compiled by re for
    its group numbers was ~1 ms a form, two forms a profile, issue 30)."""
    from .regex_lead import group_index
    if not (reads_alike(envelope) and all(reads_alike(pattern) for pattern, *_ in alone)):
        return None
    groups = group_index(envelope, re.DOTALL)
    return (r"(?s)\A(?:" + envelope + ")",
            *(groups.get(name, -1) for name in ("func", "host", "pid", "tid")), alone)


def role_plan(profile: Profile, index: dict[str, int]):
    """How ProfileLines matches a line's role after the envelope, alone (as the DOME
    scanner does, parsers/compiled_dome.scan_plan): [(pattern, lead, 0, role index, token
    group)] per role pattern in the alternation's order, each matched from the envelope's
    end (`\\G`) where the message starts with its lead (regex_lead.py); none matching is
    the catch-all `unmatched`. The same match as the one regex's: its catch-all always
    completes the envelope's first match, and the alternation tries each pattern so. The
    one regex set up all ~40 groups and tried every alternative on every line, for each
    profile. None when a role pattern refers to a group (alone, its numbering differs).
    A part's token group is numbered as the part alone numbers it (its wrapper is 1):
    regex_lead reads it (kept for the bundled profiles), no regex compiled."""
    from .regex_lead import group_index, lead, self_contained  # here: replay, which imports this module, needs it not
    parts, order = role_patterns(profile.roles, ROLES, ROLE_GROUPS)
    if not all(self_contained(part, re.DOTALL) for part in parts):
        return None
    plan = []
    for i, (part, (role, names)) in enumerate(zip(parts, order)):
        token = group_index(part, re.DOTALL)[f"a{i}_token"] if "token" in names else -1
        plan.append((r"(?s)\G(?:" + part + r")\s*\z", lead(part, re.DOTALL).encode(), 0,
                     index[role], token))
    return plan


def _in_one_regex(form: CompiledForm, index: dict[str, int]):
    """The alternatives of the form's one regex (role_plan's fallback): (None, no lead,
    the wrapper group, role index or None for `unmatched`, token group)."""
    return [(None, b"", g, None if alt.role == UNMATCHED else index[alt.role], alt.fields.get("token", -1))
            for g, alt in form.alternatives.items()]
