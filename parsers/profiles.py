"""Regex profiles: the wording of one log format, as data (regex_profiles/*.toml).

A profile names the envelope (native and rsyslog-wrapped), the time zone, the functions
its daemon logs under, and one or more patterns per message role. All of it is compiled
into one regular expression per envelope form, so that a line costs one `match`: the
envelope, then an alternation of every role pattern (each wrapped in a group named after
its position), then a catch-all that marks the line `unmatched`.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

from .plain import Value

# Roles the reassembler understands; a profile may leave any of them out.
ROLES = (
    "accept", "conn_failure", "call", "token", "file", "detail",
    "slow_start", "status", "returns", "startup", "other",
)
# Groups a role pattern may capture; anything else is rejected when loading.
ROLE_GROUPS = ("op", "client", "token", "nfiles", "index", "surl", "state", "rc", "path")
ENVELOPE_GROUPS = ("month", "day", "hour", "minute", "second", "frac", "pid", "tid", "func")
UNMATCHED = "unmatched"

_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>")


class ProfileError(ValueError):
    """A profile file that cannot be used, with the reason."""


# The fields an Event carries, in order; `Alternative.slots` gives their group indices.
EVENT_FIELDS = ("op", "client", "token", "nfiles", "state", "rc", "surl", "path")


class Alternative(Value):
    """One role pattern inside the compiled regex: its role and where its fields are."""

    __slots__ = FIELDS = ("role", "fields", "slots")

    def __init__(self, role: str, fields: dict[str, int], slots: tuple[int, ...] = ()):
        self.role = role
        self.fields = fields  # field name -> group index in the compiled regex
        # Group index per EVENT_FIELDS entry; a field the pattern lacks points at a group
        # that never participates, so one m.group(*slots) call yields None there.
        self.slots = slots


class CompiledForm(Value):
    """A profile's line form compiled: the regex and where its groups are."""

    __slots__ = FIELDS = ("regex", "alternatives", "envelope", "envelope_slots", "portable", "head")

    def __init__(self, regex: re.Pattern, alternatives: dict[int, Alternative],
                 envelope: dict[str, int], envelope_slots: tuple[int, ...] = (),
                 portable: str = "", head: str = ""):
        self.regex = regex
        self.alternatives = alternatives  # group index of the wrapper -> alternative
        self.envelope = envelope  # envelope group name -> group index
        # Indices of month, day, hour, minute, second, frac, pid, tid, func: one m.group() call.
        self.envelope_slots = envelope_slots
        # The same pattern for PCRE2 (parsers/fastpath.py): anchored, no `never`
        # group, `\z` for `\Z`; the group numbers are the same.
        self.portable = portable
        # Its envelope alone for PCRE2, anchored (fastpath.role_plan): the same group numbers.
        self.head = head


class Profile(Value):
    """A regex profile of one daemon's log: its envelopes, role patterns and tags."""

    # No __slots__: the compiled forms are cached properties, kept in the instance's dict.
    FIELDS = ("name", "daemon", "description", "timezone", "func", "native_envelope",
              "rsyslog_envelope", "roles", "source", "tags", "required_roles", "check_now")
    NOT_SHOWN = NOT_COMPARED = ("check_now",)

    def __init__(self, name: str, daemon: str, description: str, timezone: str, func: str,
                 native_envelope: str, rsyslog_envelope: str, roles: dict[str, list[str]],
                 source: str = "<memory>", tags: tuple[str, ...] = (),
                 required_roles: tuple[str, ...] = (), check_now: bool = True):
        self.name, self.daemon, self.description = name, daemon, description
        self.timezone, self.func, self.roles, self.source = timezone, func, roles, source
        self.native_envelope, self.rsyslog_envelope = native_envelope, rsyslog_envelope
        # rsyslog program tags of this daemon (`dpm:`, `dpns:` ...): in a file that mixes
        # daemons (/var/log/messages) the tag says which profile reads the line.
        self.tags = tags
        # Roles a fitting profile must produce on a real log of its daemon (`profile check`).
        self.required_roles = required_roles
        # Whether __post_init__ compiles and checks the patterns now (a file given by a
        # user: a bad pattern is refused as it loads). The bundled profiles compile at
        # first use, each form on its own: a replay of a DPM log never needs most of them
        # (their regexes were an eighth of its start-up); tests/parsers/test_profiles.py
        # checks them all.
        self.check_now = check_now
        self.__post_init__()

    def __post_init__(self) -> None:
        unknown = set(self.roles) - set(ROLES)
        if unknown:
            raise ProfileError(f"{self.source}: unknown role(s) {sorted(unknown)}; roles are {ROLES}")
        patternless = [r for r in self.required_roles if not self.roles.get(r)]
        if patternless:
            raise ProfileError(f"{self.source}: required role(s) {patternless} have no pattern")
        if self.check_now:
            self.check()

    def check(self) -> None:
        """Compile every pattern now (in the order of the checks a user sees first: the
        patterns, then the groups); ProfileError names the first that cannot be used."""
        native = self._compiled(self.native_envelope)
        rsyslog = self._compiled(self.rsyslog_envelope + self.native_envelope)
        func_regex = self._regex(self.func + r"\Z")
        self._check_native(native)
        self._check_rsyslog(rsyslog)
        # Kept where the cached properties below keep theirs.
        self.__dict__.update(native=native, rsyslog=rsyslog, func_regex=func_regex,
                             rsyslog_prefix=self._regex(self.rsyslog_envelope))

    def may_match(self, form: str, line: str) -> bool:
        """Whether form `form` ("native" or "rsyslog") may match `line`: always once it is
        compiled; before, only where its envelope alone matches the line's start (every
        match of the form's regex starts with one, and a line without one matches no
        regex of it). Detection on another family's log (a DOME file, whose lines start
        with none of the DPM envelopes) then compiles no DPM profile's combined regexes:
        ~4 ms of a DOME replay's start-up, six regexes of every role (issue 30)."""
        if form in self.__dict__:
            return True
        envelope = self.native_envelope if form == "native" else self.rsyslog_envelope + self.native_envelope
        # the form's flags; re's cache holds one regex for profiles sharing an envelope
        return self._regex(envelope, re.DOTALL).match(line) is not None

    @cached_property
    def native(self) -> CompiledForm:
        return self._check_native(self._compiled(self.native_envelope))

    @cached_property
    def rsyslog(self) -> CompiledForm:
        return self._check_rsyslog(self._compiled(self.rsyslog_envelope + self.native_envelope))

    @cached_property
    def func_regex(self) -> re.Pattern:
        return self._regex(self.func + r"\Z")

    @cached_property
    def rsyslog_prefix(self) -> re.Pattern:
        """The rsyslog part of the envelope alone."""
        return self._regex(self.rsyslog_envelope)

    def _check_native(self, form: CompiledForm) -> CompiledForm:
        missing = [g for g in ENVELOPE_GROUPS if g not in form.envelope]
        if missing:
            raise ProfileError(f"{self.source}: envelope lacks group(s) {missing}")
        return form

    def _check_rsyslog(self, form: CompiledForm) -> CompiledForm:
        if "rtime" not in form.envelope or "host" not in form.envelope:
            raise ProfileError(f"{self.source}: rsyslog envelope needs groups rtime and host")
        return form

    def _compiled(self, envelope: str) -> CompiledForm:
        try:
            return _compile(envelope, self.roles)
        except re.error as exc:
            raise ProfileError(f"{self.source}: bad pattern: {exc}") from exc

    def _regex(self, pattern: str, flags: int = 0) -> re.Pattern:
        try:
            return re.compile(pattern, flags)
        except re.error as exc:
            raise ProfileError(f"{self.source}: bad pattern: {exc}") from exc


def role_patterns(roles: dict[str, list[str]], role_order, fields) -> tuple[list[str], list]:
    """Every role's patterns in `role_order`, each wrapped in a group `a<i>` with its own
    groups renamed `a<i>_<field>` (so that one alternation holds them all), and
    (role, field names) per wrapper. Raises ProfileError on a group not in `fields`."""
    parts: list[str] = []
    order: list[tuple[str, list[str]]] = []
    for role in role_order:
        for pattern in roles.get(role, ()):
            names = _NAMED_GROUP.findall(pattern)
            bad = [n for n in names if n not in fields]
            if bad:
                raise ProfileError(f"role {role!r}: unknown group(s) {bad}; allowed {fields}")
            i = len(order)
            renamed = _NAMED_GROUP.sub(lambda m, i=i: f"(?P<a{i}_{m.group(1)}>", pattern)
            parts.append(f"(?P<a{i}>{renamed})")
            order.append((role, names))
    return parts, order


def _compile(envelope: str, roles: dict[str, list[str]]) -> CompiledForm:
    # fixed role order: token before file, file before detail
    parts, order = role_patterns(roles, ROLES, ROLE_GROUPS)
    parts.append(r"(?P<unmatched>.*)")
    # `never` cannot match, so it never participates: m.group(never) is always None.
    # (One combined regex measured faster than dispatching role patterns one by one.)
    body = r"(?:" + envelope + r")(?:" + "|".join(parts) + r")\s*"
    regex = re.compile(body + r"\Z(?P<never>(?!))?", re.DOTALL)
    index = regex.groupindex
    never = index["never"]
    alternatives = {}
    for i, (role, names) in enumerate(order):
        fields = {n: index[f"a{i}_{n}"] for n in names}
        slots = tuple(fields.get(n, never) for n in EVENT_FIELDS)
        alternatives[index[f"a{i}"]] = Alternative(role, fields, slots)
    alternatives[index["unmatched"]] = Alternative(UNMATCHED, {}, (never,) * len(EVENT_FIELDS))
    envelope_groups = {n: index[n] for n in (*ENVELOPE_GROUPS, "rtime", "host", "tag")
                       if n in index}
    envelope_slots = tuple(envelope_groups.get(n, never) for n in ENVELOPE_GROUPS)
    return CompiledForm(regex, alternatives, envelope_groups, envelope_slots,
                        portable=r"(?s)\A" + body + r"\z", head=r"(?s)\A(?:" + envelope + ")")


def as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def read_profile_file(path: str | Path) -> dict:
    """A profile file's TOML, whatever its family; ProfileError when it cannot be read."""
    import tomllib  # here, not at the top: a command that reads no profile file skips it
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc


def load_profile(path: str | Path) -> Profile:
    return profile_from_dict(read_profile_file(path), source=str(path))


# The profile family this module reads; another family's file (`family = "dome"`:
# parsers/dome_profiles.py) shares regex_profiles/ but not this format.
FAMILY = "dpm"


def _other_family(what: str, family: str) -> ProfileError:
    return ProfileError(f"{what}: a {family!r} profile, not a DPM daemon's: "
                        f"the DPM commands cannot read its logs yet (docs/dome.md)")


def profile_from_dict(data: dict, source: str = "<memory>", check_now: bool = True) -> Profile:
    family = data.get("family", FAMILY)
    if family != FAMILY:
        raise _other_family(source, family)
    try:
        envelope = data["envelope"]
        return Profile(
            name=data["name"],
            daemon=data["daemon"],
            description=data.get("description", ""),
            timezone=data.get("timezone", "local"),
            func=data.get("func", r"\S+"),
            native_envelope=envelope["native"],
            rsyslog_envelope=envelope["rsyslog"],
            roles={role: as_list(p) for role, p in data["roles"].items()},
            source=source,
            tags=tuple(as_list(data.get("tags", [data["daemon"]]))),
            required_roles=tuple(as_list(data.get("required_roles", ()))),
            check_now=check_now,
        )
    except KeyError as exc:
        raise ProfileError(f"{source}: missing key {exc}") from exc


def bundled_profile_paths() -> list[Path]:
    # The package's own folder, a plain directory as the paths given out assume, read
    # without importlib.resources: it brought tempfile, shutil and random into the
    # start-up of every command.
    from dpmstream import regex_profiles
    folders = [Path(folder) for folder in regex_profiles.__path__]
    return sorted(p for folder in folders for p in folder.iterdir() if p.name.endswith(".toml"))


# Each bundled file's TOML, read once a process: this module's loader and
# dome_profiles.py's each go through every file (skipping the other family's), and each
# read and parsed all of them again (issue 30: start-up).
_BUNDLED_DATA: list[tuple[Path, dict]] = []


def bundled_profile_data() -> list[tuple[Path, dict]]:
    """(path, its TOML) of every bundled profile file, whatever its family (the dicts are
    shared: read, not changed)."""
    if not _BUNDLED_DATA:
        kept = _parsed_files()
        for path in bundled_profile_paths():
            entry = kept.get(path.name)
            if entry is not None and entry["key"] == parsed_key(path.read_bytes()):
                _BUNDLED_DATA.append((path, entry["toml"]))
            else:   # edited since regex_profiles/parsed.json was written: read as any file
                _BUNDLED_DATA.append((path, read_profile_file(path)))
    return _BUNDLED_DATA


# Each bundled file's TOML as tomllib reads it, under parsed_key of its bytes: tomllib
# costs every replay ~25 M instructions (its import compiles its regexes, its parser is
# Python), ~7% of a two-line replay's start-up (issue 30); json's C reader a fraction of it.
PARSED = "parsed.json"


def parsed_key(text: bytes) -> list[int]:
    """What regex_profiles/parsed.json keeps of a bundled file's bytes, to know that the
    TOML it holds is of these very bytes: their CRC-32 and length."""
    import zlib
    return [zlib.crc32(text), len(text)]


def _parsed_path() -> Path:
    from dpmstream import regex_profiles
    return Path(regex_profiles.__path__[0]) / PARSED


def _parsed_files() -> dict:
    """parsed.json's files ({} where it cannot be read: each file is read with tomllib)."""
    import json
    try:
        with open(_parsed_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write_parsed(path: str | Path | None = None) -> str:
    """Writes regex_profiles/parsed.json (or `path`) from the bundled files as they are:
    `python -m dpmstream.parsers.profiles` after changing one (a test fails until then)."""
    import json
    files = {file.name: {"key": parsed_key(file.read_bytes()), "toml": read_profile_file(file)}
             for file in bundled_profile_paths()}
    path = Path(path or _parsed_path())
    path.write_text(json.dumps(files, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return str(path)


_BUNDLED: dict[str, Profile] = {}
_BUNDLED_OTHER: dict[str, str] = {}  # bundled profiles of another family: name -> family


def bundled_profiles() -> list[Profile]:
    if not _BUNDLED:
        for path, data in bundled_profile_data():
            if data.get("family", FAMILY) != FAMILY:  # parsers/dome_profiles.py reads it
                _BUNDLED_OTHER[data.get("name", path.stem)] = data["family"]
                continue
            profile = profile_from_dict(data, source=str(path), check_now=False)
            _BUNDLED[profile.name] = profile
    return list(_BUNDLED.values())


def resolve_profile(spec: str) -> Profile:
    """A bundled profile by name, or a profile file by path."""
    for profile in bundled_profiles():
        if profile.name == spec:
            return profile
    if spec in _BUNDLED_OTHER:
        raise _other_family(spec, _BUNDLED_OTHER[spec])
    path = Path(spec)
    if path.exists():
        return load_profile(path)
    names = ", ".join(p.name for p in bundled_profiles())
    raise ProfileError(f"no profile {spec!r}: not a bundled name ({names}) nor a file")


def match_line(profile: Profile, line: str):
    """(form, match, alternative or None if unmatched); (None, None, None) when neither
    envelope form matches. For tools; the hot path lives in parsers/lines.py."""
    m = None
    if profile.may_match("native", line):
        form = profile.native
        m = form.regex.match(line)
    if m is None:  # the rsyslog form is compiled only when a native line is not this
        if not profile.may_match("rsyslog", line):
            return None, None, None
        form = profile.rsyslog
        m = form.regex.match(line)
        if m is None:
            return None, None, None
    alt = form.alternatives[m.lastindex]
    return form, m, (None if alt.role == UNMATCHED else alt)


def score(profile: Profile, lines: list[str]) -> int:
    """How many of these lines the profile recognises as lines of its daemon."""
    hits = 0
    for line in lines:
        form, m, alt = match_line(profile, line.rstrip("\r\n"))
        if alt is not None and profile.func_regex.match(m.group(form.envelope["func"])):
            hits += 1
    return hits


def detect_profile(lines: list[str], candidates: list[Profile] | None = None) -> Profile | None:
    """The candidate recognising most of these lines (first lines of a file), or None."""
    best, best_score = None, 0
    for profile in candidates or bundled_profiles():
        s = score(profile, lines)
        if s > best_score:
            best, best_score = profile, s
    return best


def bundled_lead_patterns() -> set[tuple[str, int]]:
    """Every (pattern, flags) of the bundled profiles that regex_lead.py reads: the DOME
    profiles' role patterns and envelopes (dome_profiles, compiled_dome) and the DPM ones'
    role patterns and their forms' envelopes (fastpath.role_plan, _envelope_alone)."""
    from .dome_profiles import FLAGS, bundled_dome_profiles
    patterns = {(role_part, re.DOTALL) for profile in bundled_profiles()
                for role_part in role_patterns(profile.roles, ROLES, ROLE_GROUPS)[0]}
    patterns.update((envelope, re.DOTALL) for profile in bundled_profiles()
                    for envelope in (profile.native_envelope,
                                     profile.rsyslog_envelope + profile.native_envelope))
    for dome in bundled_dome_profiles():
        for form in dome.forms.values():
            patterns.update((part, FLAGS) for _, part in form.parts)
            patterns.add((form.prefix.pattern, form.prefix.flags))
    return patterns


def write_regex_facts(path: str | Path | None = None) -> str:
    """Writes regex_profiles/regex_facts.json (or `path`): what regex_lead.py reads of
    the bundled profiles' patterns, parsed now."""
    import json
    from .regex_lead import _kept_facts_path, facts_to_keep
    path = Path(path or _kept_facts_path())
    kept = facts_to_keep(bundled_lead_patterns())
    # A pattern a line, its facts beside it (a diff shows the pattern that changed).
    groups = [f" {json.dumps(flags)}: {{\n" + ",\n".join(
        f"  {json.dumps(pattern, ensure_ascii=False)}: {json.dumps(facts, ensure_ascii=False)}"
        for pattern, facts in by_pattern.items()) + "\n }" for flags, by_pattern in kept["facts"].items()]
    path.write_text(f'{{"python": {json.dumps(kept["python"])}, "facts": {{\n' + ",\n".join(groups)
                    + "\n}}\n", encoding="utf-8")
    return str(path)


if __name__ == "__main__":
    print(write_parsed())
    print(write_regex_facts())
