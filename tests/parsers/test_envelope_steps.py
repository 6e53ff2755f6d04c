"""The envelope's steps (parsers/envelope_steps.py, native/src/envelope_steps.rs) read every
line as PCRE2 reads the profile's combined pattern: the same match or no match, the same
envelope groups, the same end, the same role and role groups. The lines: every real line,
every simulator scenario, and those lines mutated (prefixes cut, fields emptied, digits
widened, odd bytes, spaces doubled). And an envelope outside the steps' subset, or not
provably deterministic, is refused: PCRE2 keeps it."""

import random
import re

import pytest

from dpmstream.parsers import fastpath
from dpmstream.parsers.envelope_steps import envelope_steps
from dpmstream.parsers.profiles import profile_from_dict, resolve_profile
from dpmstream.simulator.scenarios import names

from tests.engine_inputs import real_inputs, scenario_input
from tests.parsers.test_fastpath import compare

try:
    from dpmstream.parsers._native import envelope_differences
except ImportError:
    envelope_differences = None

needs_native = pytest.mark.skipif(envelope_differences is None or not fastpath.available(),
                                  reason="compiled line parser not built (no Rust toolchain)")
DPM_PROFILES = ["lcgdm-dpm", "lcgdm-ns", "lcgdm-srm"]
ODD_BYTES = [b"\x00", b"\t", b"\x0b", b"\x1c", b"\x7f", b"\x80", b"\xa0", b"\xff", b":", b",", b".", b" ", b"["]


def steps_of(form):
    parts = fastpath.marked_parts(form)
    return parts, envelope_steps(parts.envelope, parts.first - 1)


def differences(form, lines):
    """(lines both ways matched, lines either matched, the lines they read differently)."""
    parts, program = steps_of(form)
    assert program is not None, "the envelope was refused"
    head, tail = parts.pattern().split(parts.roles, 1)
    combined = head + "()" + parts.roles + tail  # `()`: where the envelope ended
    return envelope_differences(program, parts.first - 1, combined, parts.roles_from_envelope_end(), lines)


def mutations(line: bytes, rng: random.Random) -> list[bytes]:
    """The line changed in the ways an envelope could be malformed, mostly near its start."""
    head = min(len(line), 48)
    out = [line[k:] for k in range(1, head)] + [line[:k] for k in range(head)]
    for m in re.finditer(rb"\d+", line[:head]):
        out.append(line[:m.start()] + line[m.end():])  # a field emptied
        out.append(line[:m.start()] + b"7" + line[m.start():])  # widened
        out.append(line[:m.start()] + m.group() * 4 + line[m.end():])
    for m in re.finditer(rb" ", line[:head]):
        out.append(line[:m.start()] + b"  " + line[m.end():])  # a space doubled
        out.append(line[:m.start()] + line[m.end():])  # a space dropped
    for k in rng.sample(range(head), min(head, 12)):
        out += [line[:k] + odd + line[k + 1:] for odd in ODD_BYTES]
        out += [line[:k] + odd + line[k:] for odd in ODD_BYTES]
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every line of every real file and simulator scenario (each distinct line once)."""
    directory = tmp_path_factory.mktemp("scenarios")
    paths = [p for inp in real_inputs() for p in inp.paths]
    paths += [p for name in names() for p in scenario_input(directory, name).paths]
    lines = dict.fromkeys(line for path in paths for line in path.read_bytes().split(b"\n"))
    return list(lines)


@pytest.mark.parametrize("name", DPM_PROFILES)
def test_every_bundled_native_envelope_compiles_to_steps(name):
    parts, program = steps_of(resolve_profile(name).native)
    assert parts.ends_in_catch_all()
    assert program is not None and [kind for kind, _, _ in program].count("open") == parts.first - 1


@needs_native
@pytest.mark.parametrize("name", DPM_PROFILES)
def test_the_compiled_parser_of_every_bundled_profile_takes_the_steps(name, caplog):
    caplog.set_level("INFO", logger=fastpath.log.name)
    assert fastpath.compiled_parser(resolve_profile(name).native, "h", "dpm", 100) is not None
    assert caplog.messages == [], "a refusal falls back to the whole pattern, and logs why"


@needs_native
def test_the_comparison_catches_steps_that_read_a_line_otherwise():
    form = resolve_profile("lcgdm-dpm").native
    parts, program = steps_of(form)
    # the pid's run made to stop at four digits: a five-digit pid no longer matches
    wrong = [(k, [n[0], 4] if k == "run" and n == [1, -1] and i > 20 else n, b) for i, (k, n, b) in enumerate(program)]
    head, tail = parts.pattern().split(parts.roles, 1)
    lines = [b"08/12 10:00:00.123 12345,3 dpm_srv_put: returns 0", b"08/12 10:00:00 1,3 f: x"]
    both, either, diff = envelope_differences(wrong, parts.first - 1, head + "()" + parts.roles + tail,
                                              parts.roles_from_envelope_end(), lines)
    assert (both, either, [d[0] for d in diff]) == (1, 2, [0])


@needs_native
@pytest.mark.parametrize("name", DPM_PROFILES)
def test_the_steps_read_every_real_and_simulated_line_as_pcre2_does(corpus, name):
    both, either, diff = differences(resolve_profile(name).native, corpus)
    assert diff == []
    assert both == either and both > 1000, "the corpus holds lines of this envelope"


@needs_native
@pytest.mark.parametrize("name", DPM_PROFILES)
def test_the_steps_read_mutated_lines_as_pcre2_does(corpus, name):
    rng = random.Random(30)
    sample = rng.sample([line for line in corpus if line], 400)
    mutated = [m for line in sample for m in mutations(line, rng)]
    both, either, diff = differences(resolve_profile(name).native, mutated)
    assert diff == []
    assert both == either and 0 < both < len(mutated), "some mutations keep an envelope, some do not"


def site(envelope: str):
    return profile_from_dict({"name": "site", "daemon": "dpm", "envelope": {
        "native": envelope, "rsyslog": r"(?P<rtime>\S+) (?P<host>\S+) "},
        "roles": {"returns": r"returns (?P<rc>-?\d+)", "status": r"request status DPM_(?P<state>[A-Z_]+)"}})


# A site's own envelope: pid in brackets after the function, a dash, optional microseconds
# and a literal alternation of two levels, the func ending at `:` or at a space.
SITE_ENVELOPE = (r"(?P<day>\d\d)\.(?P<month>\d\d) (?P<hour>\d\d)h(?P<minute>\d\d)m(?P<second>\d\d)"
                 r"(?:,(?P<frac>\d+))? (?:INFO|WARN) +(?P<func>[^\s:\[]+)\[(?P<pid>\d+)(?:/(?P<tid>\d+))?\]:? ?")


@needs_native
def test_a_site_envelope_of_its_own_compiles_to_steps_that_agree_with_pcre2_and_python():
    profile = site(SITE_ENVELOPE)
    assert steps_of(profile.native)[1] is not None
    good = ["12.08 10h00m0{s},{f} {lvl}  dpm_srv_{fn}[{pid}{tid}]:{sp}{msg}".format(
        s=s, f=f, lvl=lvl, fn=fn, pid=pid, tid=tid, sp=sp, msg=msg)
        for s in range(2) for f in ("1", "123456") for lvl in ("INFO", "WARN")
        for fn in ("put", "get") for pid in ("7", "12345") for tid in ("", "/3")
        for sp in ("", " ") for msg in ("returns -2", "request status DPM_READY", "x")]
    rng = random.Random(7)
    lines = [g.encode() for g in good]
    lines += [m for line in rng.sample(lines, 40) for m in mutations(line, rng)]
    both, either, diff = differences(profile.native, lines)
    assert diff == [] and both == either and both >= len(good)
    assert compare(good * 2, profile, tz="UTC") > len(good)


@pytest.mark.parametrize("envelope, why", [
    (r"(?P<mon>Jan|Jun|Feb) (?P<day>[ \d]?\d) ", "alternatives and a run overlapping what follows"),
    (r"(?P<pid>\d+)(?P<func>\d) ", "a run of digits, then a digit"),
    (r"(?P<pid>\d+?) ", "a lazy repeat"),
    (r"(?P<pid>\d+)(?= ) ", "a look-ahead"),
    (r"^(?P<pid>\d+) ", "an anchor"),
    (r"(?P<pid>.+) ", "any byte"),
    (r"(?i)(?P<pid>x+) ", "a flag"),
    (r"(?P<pid>\d+)(?:,\d+)+ ", "a repeated group"),
    (r"(?P<pid>\d+)(?:,(?P<tid>\d+))?,", "an optional group whose first byte may follow it"),
    (r"(?P<pid>é+) ", "a non-ASCII literal"),
    (r"(?P<pid>\d+)(?:(?P<tid>x?))? ", "an optional group that may match nothing"),
])
def test_an_envelope_outside_the_subset_or_the_proof_is_refused(envelope, why):
    groups = re.compile(envelope).groups
    assert envelope_steps(envelope, groups) is None, why


@needs_native
def test_a_refused_envelope_leaves_the_whole_pattern_to_pcre2_and_still_agrees():
    # the bundled DPM envelope with a func of any non-space bytes, its colon included: the
    # run overlaps the `:` after it (PCRE2 goes back), so no steps
    envelope = resolve_profile("lcgdm-dpm").native_envelope.replace(r"(?P<func>[^\s:]+)", r"(?P<func>\S+)")
    profile = site(envelope)
    assert steps_of(profile.native)[1] is None
    assert fastpath.compiled_parser(profile.native, "h", "dpm", 100) is not None
    lines = ["08/12 10:00:00.1 12345,3 dpm_srv_put: returns 3", "08/12 10:00:00.1 5 f:x: returns 4"]
    assert compare(lines * 2, profile, tz="UTC") == 3


def test_the_steps_accept_the_deterministic_constructs_and_give_a_fallback_only_at_the_end():
    program = envelope_steps(r"(?P<a>\d{1,3})(?:\.(?P<b>\d+))? (?:x|y\d) (?:\[(?P<c>\d+)\]: ?)?", 3)
    kinds = [kind for kind, _, _ in program]
    assert kinds.count("opt") == 2 and "branch" in kinds
    opts = [numbers for kind, numbers, _ in program if kind == "opt"]
    assert [o[1] for o in opts] == [0, 1], "only the optional group at the end falls back"
    assert opts[1][2:] == [3, 4], "its group is unset when it falls back"
