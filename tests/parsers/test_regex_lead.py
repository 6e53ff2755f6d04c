"""The literal text a pattern's every match starts with (parsers/regex_lead.py): what the
compiled DOME scanner checks a message for before it runs a role's pattern, so it may
never be more than the pattern requires."""

import re
import sys

import pytest

from dpmstream.parsers.regex_lead import group_index, lead, lead_sets, self_contained

FLAGS = re.ASCII | re.DOTALL


@pytest.mark.parametrize("pattern,want", [
    (r"dome dome_put : Entering\. lfn: '(?P<lfn>.*)'", "dome dome_put : Entering. lfn: '"),
    (r"(?P<a0>dome workerFunc : req:(?P<a0_method>[A-Z]+))", "dome workerFunc : req:"),   # into plain groups
    (r"dome \w+ :", "dome "),
    (r"ab?c", "a"),                          # an optional character ends it
    (r"ab*", "a"), (r"ab{2}", "abb"), (r"ab{2,3}", "a"),
    (r"(?:ab|ac)d", "a"),                    # what both branches start with
    (r"\S+ SendSimpleResp", ""),
    (r"(?x) a b \  c", "ab c"),              # verbose: as re reads it
    (r"(?i)dome x", ""), (r"(?i:dome) x", ""),   # case-insensitive: no certain bytes
    (r"\x41\u00e9z", "A\u00e9z"),
    (r"\bdome", ""),
])
def test_the_lead_is_the_literal_text_every_match_starts_with(pattern, want):
    assert lead(pattern, FLAGS) == want
    subject = want + "x"
    if re.match(pattern, subject, FLAGS):   # a subject without the lead never matches
        assert subject.startswith(want)


DIGITS = "0123456789"


@pytest.mark.parametrize("pattern,want", [
    (r"\A(?:\d{4}-\d\dT)", [DIGITS] * 4 + ["-"] + [DIGITS] * 2 + ["T"]),
    (r"(?P<mon>Jan|Feb|May) (?P<day>[ \d]?\d)", ["FJM", "ae", "bny", " "]),   # a branch of one width
    (r"(?:ab|c)d", ["ac"]),                  # branches of two widths: the places all have
    (r"[ -#]x", [" !\"#", "x"]),
    (r"a[^b]c", ["a"]), (r"a\wc", ["a"]), (r"a.c", ["a"]), (r"a\bc", ["a"]),   # sets not spelled
    (r"(?i)ab", []), (r"(?i:a)b", []),
])
def test_the_lead_sets_are_the_characters_every_match_has_at_its_first_places(pattern, want):
    got = lead_sets(pattern, FLAGS)
    assert ["".join(sorted(chars)) for chars in got] == want
    for subject in ("2017-05-30T", "May 3", "Feb  1", "cd", "ad", "#x", "abc", "Jan 1"):
        if re.match(pattern, subject, FLAGS):   # a match has a character of each set
            assert all(c in chars for c, chars in zip(subject, got)), subject


def test_a_digit_is_a_set_only_where_the_pattern_reads_it_as_ascii():
    assert lead_sets(r"\d-", re.ASCII) == [frozenset(DIGITS), frozenset("-")]
    assert lead_sets(r"\d-") == []   # a Unicode \d: any of hundreds of digits


@pytest.mark.parametrize("pattern,want", [
    (r"dome (?P<server>\S+)", True),
    (r"a(?=(b))c", True),
    (r"(a)\1", False),                       # numbered: another number alone
    (r"(?P<q>a)(?(q)b|c)", False),           # a conditional on a group
    (r"x(?P=host)", False),                  # a group outside it
    (r"(a)\\1", True),                       # an escaped backslash, then a digit
    (r"(a)[\1]", True),                      # in a class: an octal escape
    (r"(a)(?:x(?:y\1))", False),             # however deep
])
def test_a_pattern_referring_to_a_group_is_not_self_contained(pattern, want):
    assert self_contained(pattern, FLAGS) is want


def test_the_group_index_is_re_s_for_every_role_pattern_of_the_bundled_dome_profiles():
    from dpmstream.parsers.dome_profiles import bundled_dome_profiles
    parts = [(part, form.regex.flags) for profile in bundled_dome_profiles()
             for form in profile.forms.values() for _, part in form.parts]
    assert len(parts) > 20 and any(group_index(p, f) for p, f in parts)
    for part, flags in parts + [(r"(?P<a>x)(y)(?P<b>z)", 0), (r"(?x) (?P<c> q )", 0), ("plain", 0)]:
        assert group_index(part, flags) == re.compile(part, flags).groupindex, part


@pytest.mark.parametrize("pattern", [
    r"(?P<a0>dome (?P<a0_server>\S+) (?:(?P<a0_fs>/\S+)|-))",
    r"(a)(?P<b>b)(?:c)(?P<d>(?P<e>e))",      # numbered by opening parenthesis
    r"(?x) (?P<v> x ) # (?P<not_a_group>",   # verbose: a comment holds no group
    r"no groups",
])
def test_the_group_numbers_are_those_the_compiled_pattern_gives(pattern):
    got = group_index(pattern, FLAGS)
    assert list(got.items()) == list(re.compile(pattern, FLAGS).groupindex.items())


# -- what it reads of the bundled profiles' patterns, kept (regex_profiles/regex_facts.json) --

def _kept_for() -> str | None:
    import json

    from dpmstream.parsers.regex_lead import _kept_facts_path
    return json.loads(_kept_facts_path().read_text(encoding="utf-8")).get("python")


# The facts are kept for the Python that wrote them (the project's venv: 3.11); another
# Python's re may read a pattern differently, so there each pattern is parsed (tested
# below with no kept file), and these two do not apply.
KEPT_FOR_THIS_PYTHON = pytest.mark.skipif(
    _kept_for() != "%d.%d" % sys.version_info[:2],
    reason="regex_facts.json was written by another Python: its facts are not used here")


@KEPT_FOR_THIS_PYTHON
def test_the_kept_facts_are_what_re_reads_of_every_bundled_pattern_now():
    """Fails after a bundled profile's pattern is edited: `python -m dpmstream.parsers.profiles`
    writes regex_profiles/regex_facts.json again (until then the edited one is parsed)."""
    from dpmstream.parsers.profiles import bundled_lead_patterns
    from dpmstream.parsers.regex_lead import _kept_facts, facts_to_keep
    assert _kept_facts() == facts_to_keep(bundled_lead_patterns())["facts"]


def test_write_regex_facts_writes_the_file_as_it_is_kept(tmp_path):
    from dpmstream.parsers.profiles import write_regex_facts
    from dpmstream.parsers.regex_lead import _kept_facts_path
    written = tmp_path / "regex_facts.json"
    write_regex_facts(written)
    assert written.read_text(encoding="utf-8") == _kept_facts_path().read_text(encoding="utf-8")


# Building every bundled profile's scanner plans in a fresh interpreter, as a replay does:
# how many patterns re had to parse, and what regex_lead said of each it was asked about.
# With a path: regex_lead's kept file is looked for there instead.
PLANS = """
import json, pathlib, sys
from dpmstream.parsers import compiled_dome, fastpath, regex_lead
if sys.argv[1:]:
    regex_lead._kept_facts_path = lambda: pathlib.Path(sys.argv[1])
from dpmstream.parsers.dome_profiles import bundled_dome_profiles
from dpmstream.parsers.profiles import ROLES, bundled_profiles
said = []
for dome in bundled_dome_profiles():
    for form in dome.forms.values():
        said.append([compiled_dome.scan_plan(form), compiled_dome.envelope_lead(form)])
for profile in bundled_profiles():
    said.append(fastpath.role_plan(profile, {r: i for i, r in enumerate(ROLES)}))
print(json.dumps({"parsed": regex_lead._tree.cache_info().misses, "said": repr(said)}))
"""


def plans(*kept_at) -> dict:
    import json
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", PLANS, *kept_at], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@KEPT_FOR_THIS_PYTHON
def test_the_bundled_profiles_plans_parse_no_pattern_and_say_what_parsing_says(tmp_path):
    kept = plans()
    assert kept["parsed"] == 0
    # the same plans from every pattern parsed, regex_lead finding no kept file
    parsed = plans(str(tmp_path / "absent.json"))
    assert parsed["parsed"] > 40
    assert parsed["said"] == kept["said"]


def test_a_pattern_that_is_not_kept_is_parsed():
    pattern = r"(?P<a0>not in any bundled profile (?P<a0_n>\d+))"
    assert (group_index(pattern, FLAGS), self_contained(pattern, FLAGS), lead(pattern, FLAGS)) == \
           ({"a0": 1, "a0_n": 2}, True, "not in any bundled profile ")
    assert not self_contained(r"(a)\1(?P<x>b)(?P=x)", FLAGS)
    assert not self_contained(r"(?P=elsewhere)", FLAGS)    # re.error: a group outside it
