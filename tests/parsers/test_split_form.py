"""The split form of a profile's pattern (fastpath.split_form, native/src/line_match.rs)
gives every line the role and fields the whole pattern gives it.

The split form matches the envelope, then only the role alternatives whose literal
prefix the message starts with, in the profile's order; the whole form (the marked
combined pattern, one PCRE2 match) is what it replaced. Both are run on the same lines,
with the same seconds known, and must return the same Event (role, every field, time),
the same `unmatched`, or both leave the line to Python: on every line of the real logs,
of every simulator scenario, and of those lines mutated (cut, emptied, odd bytes
inserted) so that prefixes fit and patterns then fail.
"""

import random
from pathlib import Path

import pytest

from dpmstream.parsers import fastpath
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.lines import MAX_LINE_BYTES, LineParser
from dpmstream.parsers.profiles import detect_profile, load_profile, profile_from_dict, resolve_profile
from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import names, scenario

from tests.helpers import sampled

DATA = Path(__file__).parents[1] / "data"

needs_native = pytest.mark.skipif(not fastpath.available(),
                                  reason="compiled line parser not built (no Rust toolchain)")


class BothForms:
    """A LineParser's `remember`/`forget` target that keeps the split and the whole
    FastLines of one profile on the same seconds."""

    def __init__(self, profile, host):
        form = profile.native
        self.split = fastpath.compiled_parser(form, host, profile.daemon, MAX_LINE_BYTES)
        self.whole = fastpath.compiled_parser(form, host, profile.daemon, MAX_LINE_BYTES, split=False)
        assert self.split is not None and self.whole is not None

    def remember(self, key, base):
        self.split.remember(key, base)
        self.whole.remember(key, base)

    def forget(self):
        self.split.forget()
        self.whole.forget()


def agree(lines, profile, tz="UTC", year=2011):
    """Each line through both forms, then through Python (which teaches both its second):
    returns what the forms made of each line (None: left to Python)."""
    parser = LineParser(profile, EventClock(tz, year=year), "head01")
    both = parser._compiled = BothForms(profile, "head01")
    parser._fast = None  # Python reads every line, and hands both forms its seconds
    made = []
    for line in lines:
        got, want = both.split.parse(line), both.whole.parse(line)
        assert got == want, line
        made.append(got)
        parser.parse(line)
    return made


def taken(made):
    return sum(m is not None for m in made)


def mutants(lines, rng, per_line=3):
    """Lines changed where a split could go wrong: the message cut short at its start or
    end, a field emptied, an odd byte (or a prefix's own character) put in."""
    odd = ["", " ", "\t", "-", "_", "[", "]", "(", ")", ":", "0", "9", "x", "D", "DP",
           "\u00e9", "\x00", "\x1c", "  "]
    out = []
    for line in lines:
        colon = line.find(": ")
        message_at = colon + 2 if colon >= 0 else 0
        for _ in range(per_line):
            kind = rng.randrange(5)
            if kind == 0:  # the message's start cut: another alternative's prefix may fit
                cut = rng.randrange(message_at, len(line) + 1)
                out.append(line[:message_at] + line[cut:])
            elif kind == 1:  # cut at the end
                out.append(line[:rng.randrange(len(line) + 1)])
            elif kind == 2:  # a field emptied
                words = line[message_at:].split(" ")
                words[rng.randrange(len(words))] = ""
                out.append(line[:message_at] + " ".join(words))
            else:  # an odd byte in the message, or a space around the envelope's end
                at = rng.randrange(max(message_at - 2, 0), len(line) + 1)
                out.append(line[:at] + rng.choice(odd) + line[at:])
    return out


def scenario_lines(tmp_path, name):
    cfg = scenario(name, requests=60)
    simulate(cfg, tmp_path / name)
    for path in (tmp_path / f"{name}.log", tmp_path / f"{name}.dpns.log"):
        yield cfg, path.read_text().splitlines()


@needs_native
@pytest.mark.parametrize("name", sampled(names(), keep=["thesis", "heavy", "multi-file", "mixed-syslog"]))
def test_both_forms_agree_on_every_line_of_scenario_and_its_mutants(tmp_path, name):
    rng = random.Random(name)
    for cfg, lines in scenario_lines(tmp_path, name):
        profile = detect_profile(lines[:200])
        year = int(str(cfg.start)[:4])
        made = agree(lines * 2, profile, tz=cfg.tz, year=year)
        if name != "dst-end":  # stamps of the repeated hour are resolved line by line
            assert taken(made) > len(lines) * 0.5, "the forms must parse most lines themselves"
        agree(mutants(lines, rng) * 2, profile, tz=cfg.tz, year=year)


@needs_native
def test_both_forms_agree_on_the_real_logs_and_their_mutants():
    rng = random.Random(7)
    read = 0
    for path in sorted((DATA / "real").rglob("*")):
        if not path.is_file() or path.name == "README.md":
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        profile = detect_profile(lines[:200])
        if profile is None:
            continue
        read += 1
        agree(lines * 2, profile)
        agree(mutants(lines, rng, per_line=5) * 2, profile)
    assert read, "no real log was read"


def site_profile(roles):
    return profile_from_dict({"name": "site", "daemon": "dpm", "envelope": {
        "native": resolve_profile("lcgdm-dpm").native_envelope,
        "rsyslog": r"(?P<rtime>\S+) (?P<host>\S+) "}, "roles": roles})


@pytest.mark.parametrize("body, prefix", [
    (r"DP092 - (\w+) request", "DP092 - "),
    (r"request status DPM_([A-Z_]+)", "request status DPM_"),
    (r"\[[^\]]*\] \(", "["),
    (r"\(\d+\)", "("),
    (r"DP\d\d\d - .*", "DP"),
    (r"started\b.*", "started"),
    (r"returns? (\d+)", "return"),       # an optional letter is not required
    (r"ab*c", "a"),
    (r"ab{2}c", "a"),
    (r"ab+c", "ab"),                     # one b at least: required, what follows is not
    (r"a|b", ""),                        # each branch starts otherwise
    (r"(?:a|b)c", ""),
    (r"x(a|b)", "x"),                    # a `|` inside a group is no top-level one
    (r"x[|]y", "x"),
    (r".*", ""),
    (r"\d+ files", ""),
    (r"\.\-\ x", ".- x"),                # escaped punctuation is literal
    (r"\x41b", ""),
    ("caf\u00e9 x", "caf"),
])
def test_the_literal_prefix_is_what_every_match_starts_with(body, prefix):
    assert fastpath.literal_prefix(body) == prefix


@pytest.mark.parametrize("pattern, groups, to_end, laid_out", [
    # the DPM envelope: fixed counts, optional groups that start with a byte nothing
    # after them can, classes that stop where what follows begins
    (resolve_profile("lcgdm-dpm").native_envelope, 9, False, True),
    (r"returns (-?\d+)", 1, True, True),
    (r"\[[^\]]*\] \(([^)]*)\): request accepted", 1, True, True),
    (r"(\w+) (\d+)(?: (\d+))?", 3, True, False),  # ` x` fails it: skipped, `\s*\z` takes ` `
    (r"DP098 - .*", 0, True, True),        # `.*` last: takes the rest, as the regex would
    (r"(\w+) request by .* from (\S+)", 2, True, False),   # `.*` must give back ` from`
    (r"(\w+)\w", 1, True, False),         # `\w+` would leave no `\w`
    (r"a(?:b)?b", 0, True, False),         # taking the optional b would leave no b
    (r"(?:netread|send) error", 0, True, False),
    (r"started\b.*", 0, True, False),
    (r"x+?y", 0, True, False),             # lazy
    (r"(?:ab)+", 0, True, False),          # a repeated group
    (r"a(?:x*)?", 0, True, False),         # an optional group that may match nothing
    (r"a(?: b)?", 0, False, False),        # the envelope's message could start with ` b`
    (r"a(?:,b)?", 0, True, True),
    (r"(a)", 2, True, False),              # not the groups the caller counted
])
def test_a_pattern_becomes_a_template_only_where_no_giving_back_could_change_its_match(
        pattern, groups, to_end, laid_out):
    assert (fastpath.template_items(pattern, groups, to_end) is not None) == laid_out


@needs_native
def test_alternatives_sharing_a_prefix_are_still_tried_in_the_profiles_order():
    # `DP098 - ` opens four alternatives of the DPM profile, and `DP` a fifth later.
    profile = resolve_profile("lcgdm-dpm")
    _, _, _, roles = fastpath.split_form(profile.native)
    prefixes = [prefix for prefix, *_ in roles]
    assert prefixes.count(b"DP098 - ") == 4 and b"DP" in prefixes and prefixes[-1] == b""
    uuid = "deb8fc4c-7b29-4d0b-8e5e-18baf320cd57"
    lines = [f"08/12 10:00:00.5 1,2 dpm_srv_put: {m}" for m in (
        f"DP098 - put 1 {uuid}", f"DP098 - put {uuid} 3", f"DP098 - put {uuid}",
        # the optional ` (\d+)` begun by the trailing space fails: skipped, `\s*\z` takes it
        f"DP098 - put {uuid} ",
        "DP098 - put 2 srm://x/y", "DP098 - put", "DP099 - whatever", "DP098 -", "D")]
    made = agree(lines * 2, profile)[len(lines):]  # the second round: its second known
    roles = [m if m is fastpath.UNMATCHED_LINE else m.role for m in made]
    assert roles == ["token", "token", "token", "token", "file", "detail", "other",
                     fastpath.UNMATCHED_LINE, fastpath.UNMATCHED_LINE]
    assert [m.nfiles for m in made[:4]] == [1, 3, None, None] and made[4].surl == "srm://x/y"


@needs_native
@pytest.mark.parametrize("roles", [
    {"returns": r"returns (?P<rc>\d+)", "other": r"\w*"},                 # no prefix at all
    {"returns": r"(?:re)?turns (?P<rc>-?\d+)", "status": r"re(?P<state>\w+)"},
    {"call": r"\bput by (?P<client>\S+)", "other": r"(?<=: )x.*"},        # sees the envelope
    {"returns": r"returns (?P<rc>\d+)|rc=(?P<nfiles>\d+)"},               # a top-level `|`
])
def test_site_wordings_agree_in_both_forms(roles):
    profile = site_profile(roles)
    assert fastpath.split_form(profile.native) is not None
    lines = [f"08/12 10:00:0{s}.1 1,2 f: {m}" for s in range(2) for m in (
        "returns 4", "turns -4", "rc=9", "rest", "re", "put by me", "xput by me", "x y",
        "returns x", "", " returns 4")]
    lines += [line.replace("f: ", "f:") for line in lines]
    assert taken(agree(lines * 2, profile)) > len(lines)


@needs_native
def test_the_reworded_site_profile_agrees_in_both_forms_on_its_own_wording_and_the_bundled_one(tmp_path):
    site = load_profile(DATA / "profiles" / "site-reworded.toml")
    assert fastpath.split_form(site.native) is not None
    (cfg, lines), _ = scenario_lines(tmp_path, "thesis")
    reworded = [line.replace("request status DPM_", "answering ").replace("returns ", "exit code ")
                for line in lines]
    year = int(str(cfg.start)[:4])
    assert taken(agree((lines + reworded) * 2, site, tz=cfg.tz, year=year)) > len(lines)
