"""DOME regex profiles (family "dome"): the wording of dmlite's syslog messages, as data.

A DOME profile (regex_profiles/dmlite-dome*.toml, `family = "dome"`) differs from a DPM
daemon's (parsers/profiles.py) in where the time is and what a line says:

- the stamp is the syslog envelope's, in one of two forms: `traditional` (`May 30
  08:44:05 host dome[2345]: `, no year, whole seconds, local time) or `rfc3339` (the year,
  microseconds, an offset); both give host, program tag and pid;
- then dmlite's own prefix, `message` (`{TID}[LVL] dmlite ` or `{TID}!!! dmlite `; the
  generation without a thread id has its own profile), giving tid, level and error;
- then one pattern per DOME role (ROLES), against `WHERE FUNC : TEXT`;
- and `[journald]`: journald's own notice, under its own ident (`tags`), that its rate
  limit dropped a service's lines (`suppressed`: groups `lines` and `program`, the unit's
  name without `.service` or `@instance`), read as an event of role SUPPRESSED.

Each form is one regular expression (envelope, message prefix, an alternation of the role
patterns, a catch-all marking the line `unmatched`), as in parsers/profiles.py; the Python
engine matches it whole (compiled when first used), detection and the compiled scanner its
pieces one by one (DomeForm.read, compiled_dome.scan_plan), with the same outcome.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from pathlib import Path

from .plain import Value
from .profiles import (
    UNMATCHED, ProfileError, as_list, bundled_profile_data, read_profile_file, resolve_profile,
    role_patterns,
)
from .regex_lead import group_count, group_index, self_contained

FAMILY = "dome"
# Roles, in the order their patterns are tried: specific wording first, catch-alls last.
ROLES = (
    "accept", "call", "command", "returns",
    "put", "put_selected", "putdone_disk", "putdone_forward", "putdone_head", "putdone_size",
    "putdone_error", "chksum_failed", "queue_timeout",
    "capacity", "fs_count", "fs_enabled", "fs_disabled", "startup", "other",
)
# The role of journald's `Suppressed N messages from UNIT` notice for one of the profile's
# programs (no dmlite message: not one of ROLES; fields {"count": N}), and the groups its
# pattern must have.
SUPPRESSED = "journald_suppressed"
JOURNALD_GROUPS = ("lines", "program")
# Groups a role pattern may capture; anything else is rejected when loading.
ROLE_GROUPS = (
    "client_dn", "client_host", "remote_dn", "remote_host", "method", "op", "query", "code",
    "lfn", "server", "fs", "pfn", "size", "matchings", "reason", "key", "timeout",
    "phys", "free", "count",
)
FORMS = ("traditional", "rfc3339")
# Groups each envelope form must have (besides its stamp), and the message prefix's.
FORM_GROUPS = {
    "traditional": ("mon", "day", "hour", "minute", "second", "host", "tag", "pid"),
    "rfc3339": ("rtime", "host", "tag", "pid"),
}
MESSAGE_GROUPS = ("level", "error")  # `tid` too, in a generation that logs it
# ASCII classes (\d is 0-9, \s ASCII white space): what a syslog line's numbers and
# separators are, and what the compiled scanner (PCRE2, native/src/dome_scan.rs) reads.
FLAGS = re.DOTALL | re.ASCII


class DomeForm(Value):
    """One envelope form compiled with the message prefix and every role."""

    # No __slots__: the regexes are cached properties, kept in the instance's dict.
    FIELDS = ("name", "pattern", "groups", "roles", "prefix", "head", "parts", "alone", "plan")
    NOT_SHOWN = NOT_COMPARED = ("plan",)

    def __init__(self, name: str, pattern: str, groups: dict[str, int],
                 roles: dict[int, tuple[str, dict[str, int]]], prefix: re.Pattern,
                 head: str = "", parts: tuple[tuple[str, str], ...] = (), alone: bool = False,
                 plan: tuple | None = None):
        self.name = name
        self.pattern = pattern   # the one regex: head, the roles' alternation, a catch-all
        self.groups = groups     # envelope and message group -> index
        self.roles = roles       # wrapper group -> (role, field -> group)
        self.prefix = prefix     # the syslog envelope alone: host, tag, pid
        # The regex's pieces, for a scanner that matches them one by one (compiled_dome.py):
        # the envelope and message prefix (its groups numbered as in `regex`), and each
        # role pattern as `regex` holds it (wrapped, its groups renamed), in the
        # alternation's order.
        self.head = head
        self.parts = parts
        # Whether every part means alone what it means in the alternation (no reference
        # to a group): then `read` and the compiled scanner match the head, then the
        # parts one by one.
        self.alone = alone
        # compiled_dome.scan_plan's reading of them, made once per form: every stream's
        # parser (each file, each partition restored) would read the patterns again (~5 ms).
        self.plan = plan

    @cached_property
    def regex(self) -> re.Pattern:
        """The one regex, compiled where it is matched (the Python engine's parser): the
        compiled engine and detection match its pieces, and compiling the four forms'
        was ~1.3% of a 1 M-line DOME replay (issue 30: start-up)."""
        return re.compile(self.pattern, FLAGS)

    @cached_property
    def head_regex(self) -> re.Pattern:
        return re.compile(self.head, FLAGS)

    def read(self, line: str) -> tuple[re.Match, str] | None:
        """The match of the line's envelope and message prefix (its groups as `groups`
        numbers them) and the role `regex` reads the line as (UNMATCHED: none), or None
        where the form does not read it. The same decision as `regex`: its catch-all
        completes the head's first match, so the alternation is tried where that ends,
        part by part in its order, each to the end of the line."""
        if not self.alone:
            m = self.regex.match(line)
            return None if m is None else (m, self.roles[m.lastindex][0])
        m = self.head_regex.match(line)
        if m is None:
            return None
        end = m.end()
        for role, part in self.parts:
            if _to_the_end(part).match(line, end) is not None:
                return m, role
        return m, UNMATCHED


@lru_cache(maxsize=None)
def _to_the_end(part: str) -> re.Pattern:
    """A role pattern as the alternation ends it (shared by a profile's forms)."""
    return re.compile(f"(?:{part})\\s*\\Z", FLAGS)


class DomeProfile(Value):
    """A DOME regex profile: its envelopes, message and role patterns, and its forms."""

    __slots__ = FIELDS = ("name", "description", "timezone", "tags", "envelopes", "message",
                          "roles", "required_roles", "source", "journald_tags", "suppressed",
                          "forms", "suppressed_regex")
    # made from the others (compared all the same)
    NOT_SHOWN = NOT_INIT = ("forms", "suppressed_regex")

    def __init__(self, name: str, description: str, timezone: str, tags: tuple[str, ...],
                 envelopes: dict[str, str], message: str, roles: dict[str, list[str]],
                 required_roles: tuple[str, ...] = (), source: str = "<memory>",
                 journald_tags: tuple[str, ...] = (), suppressed: str | None = None):
        self.name, self.description, self.timezone = name, description, timezone
        self.tags, self.envelopes, self.message = tags, envelopes, message
        self.roles, self.required_roles, self.source = roles, required_roles, source
        # journald's idents, and its `Suppressed` notice's pattern (None: not read)
        self.journald_tags = journald_tags
        self.suppressed = suppressed
        self.__post_init__()

    @property
    def has_tid(self) -> bool:
        """Whether this generation's lines carry the worker thread's id."""
        return "(?P<tid>" in self.message

    def __post_init__(self) -> None:
        unknown = set(self.roles) - set(ROLES)
        if unknown:
            raise ProfileError(f"{self.source}: unknown role(s) {sorted(unknown)}; DOME roles are {ROLES}")
        patternless = [r for r in self.required_roles if not self.roles.get(r)]
        if patternless:
            raise ProfileError(f"{self.source}: required role(s) {patternless} have no pattern")
        missing_forms = [f for f in FORMS if f not in self.envelopes]
        if missing_forms:
            raise ProfileError(f"{self.source}: [envelope] lacks form(s) {missing_forms}")
        try:
            self.forms = {name: _compile(name, self.envelopes[name], self.message, self.roles)
                          for name in FORMS}
            # Matched where the envelope ends, to the end of the line.
            self.suppressed_regex = None if self.suppressed is None else re.compile(
                f"(?:{self.suppressed})\\s*\\Z", re.ASCII)
        except re.error as exc:
            raise ProfileError(f"{self.source}: bad pattern: {exc}") from exc
        if self.suppressed_regex is not None:
            lacking = [g for g in JOURNALD_GROUPS if g not in self.suppressed_regex.groupindex]
            if lacking:
                raise ProfileError(f"{self.source}: [journald] suppressed lacks group(s) {lacking}")
        for name, form in self.forms.items():
            lacking = [g for g in FORM_GROUPS[name] + MESSAGE_GROUPS if g not in form.groups]
            if lacking:
                raise ProfileError(f"{self.source}: envelope {name!r} or message lacks group(s) {lacking}")


def _compile(name: str, envelope: str, message: str, roles: dict[str, list[str]]) -> DomeForm:
    parts, order = role_patterns(roles, ROLES, ROLE_GROUPS)
    head = f"(?:{envelope})(?:{message})"
    pattern = f"{head}(?:{'|'.join([*parts, fr'(?P<{UNMATCHED}>.*)'])})\\s*\\Z"
    head_regex = re.compile(head, FLAGS)
    alone = all(self_contained(part, FLAGS) for part in parts)
    index = _group_index(head_regex, parts, pattern) if alone else None
    if index is None:   # a part refers to a group, or names clash: the regex numbers them
        index = re.compile(pattern, FLAGS).groupindex
    wrapped = {index[f"a{i}"]: (role, {n: index[f"a{i}_{n}"] for n in names})
               for i, (role, names) in enumerate(order)}
    wrapped[index[UNMATCHED]] = (UNMATCHED, {})
    form = DomeForm(name, pattern, dict(head_regex.groupindex), wrapped,
                    re.compile(envelope, re.ASCII), head,
                    tuple((role, part) for (role, _), part in zip(order, parts)), alone)
    form.head_regex = head_regex
    return form


def _group_index(head: re.Pattern, parts: list[str], pattern: str) -> dict[str, int] | None:
    """The one regex's group index without compiling it (most of loading a DOME profile,
    issue 30): the head's groups, then each part's as the part alone numbers them, shifted
    by the groups before it (numbers go by opening parenthesis). None where a name is
    taken twice (the regex's own error then says which)."""
    index = dict(head.groupindex)
    before = head.groups
    for part in parts:
        own = group_index(part, FLAGS)
        if own.keys() & index.keys():
            return None
        index.update((n, before + g) for n, g in own.items())
        before += group_count(part, FLAGS)
    if UNMATCHED in index:
        return None
    index[UNMATCHED] = before + 1
    return index


def dome_profile_from_dict(data: dict, source: str = "<memory>") -> DomeProfile:
    family = data.get("family")
    if family != FAMILY:
        raise ProfileError(f"{source}: not a DOME profile (family {family!r}, expected {FAMILY!r})")
    try:
        envelope = data["envelope"]
        journald = data.get("journald", {})
        return DomeProfile(
            name=data["name"],
            description=data.get("description", ""),
            timezone=data.get("timezone", "local"),
            tags=tuple(as_list(data["tags"])),
            envelopes={f: envelope[f] for f in FORMS if f in envelope},
            message=envelope["message"],
            roles={role: as_list(p) for role, p in data["roles"].items()},
            required_roles=tuple(as_list(data.get("required_roles", ()))),
            source=source,
            journald_tags=tuple(as_list(journald.get("tags", ()))),
            suppressed=journald.get("suppressed"),
        )
    except KeyError as exc:
        raise ProfileError(f"{source}: missing key {exc}") from exc


def load_dome_profile(path: str | Path) -> DomeProfile:
    return dome_profile_from_dict(read_profile_file(path), source=str(path))


# Read and compiled once per process, as profiles.bundled_profiles keeps the DPM ones: a
# pipeline is built, and each of its DOME sources restored, by bundled name at every
# partition taken, and each time cost reading every profile file and compiling its regexes.
_BUNDLED: list[DomeProfile] = []


def bundled_dome_profiles() -> list[DomeProfile]:
    if not _BUNDLED:
        for path, data in bundled_profile_data():
            if data.get("family") == FAMILY:
                _BUNDLED.append(dome_profile_from_dict(data, source=str(path)))
    return list(_BUNDLED)


def resolve_dome_profile(spec: str) -> DomeProfile:
    """A bundled DOME profile by name, or a DOME profile file by path."""
    for profile in bundled_dome_profiles():
        if profile.name == spec:
            return profile
    if Path(spec).exists():
        return load_dome_profile(spec)
    names = ", ".join(p.name for p in bundled_dome_profiles())
    raise ProfileError(f"no DOME profile {spec!r}: not a bundled name ({names}) nor a file")


def dome_score(profile: DomeProfile, lines: list[str]) -> int:
    """How many of these lines the profile reads as dmlite messages of a known role."""
    hits = 0
    for line in lines:
        line = line.rstrip("\r\n")
        for form in profile.forms.values():
            read = form.read(line)
            if read is not None:
                m, role = read
                if role != UNMATCHED and m.group(form.groups["tag"]) in profile.tags:
                    hits += 1
                break
    return hits


def detect_dome_profile(lines: list[str], candidates: list[DomeProfile] | None = None) -> DomeProfile | None:
    """The DOME profile reading most of these lines (a file's first lines), or None: as
    profiles.detect_profile does for the DPM daemons."""
    best, best_score = None, 0
    for profile in bundled_dome_profiles() if candidates is None else candidates:
        s = dome_score(profile, lines)
        if s > best_score:
            best, best_score = profile, s
    return best


def first_host(profile: DomeProfile, lines: list[str]) -> str | None:
    """The host of the first of these lines with the profile's syslog envelope: the node a
    DOME file is from (replay reads each node's files as one lane)."""
    for line in lines:
        for form in profile.forms.values():
            m = form.prefix.match(line)
            if m is not None:
                return m.group("host")
    return None


def resolve_any_profile(spec: str):
    """A DPM profile or, failing that, a DOME one, by bundled name or .toml file; the DPM
    loader's ProfileError when neither loads."""
    try:
        return resolve_profile(spec)
    except ProfileError as exc:
        try:
            return resolve_dome_profile(spec)
        except ProfileError:
            raise exc from None
