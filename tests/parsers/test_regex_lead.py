"""The literal text a pattern's every match starts with (parsers/regex_lead.py): what the
compiled DOME scanner checks a message for before it runs a role's pattern, so it may
never be more than the pattern requires."""

import re

import pytest

from dpmstream.parsers.regex_lead import lead, self_contained

FLAGS = re.ASCII | re.DOTALL


@pytest.mark.parametrize("pattern,want", [
    (r"dome dome_put : Entering\. lfn: '(?P<lfn>.*)'", "dome dome_put : Entering. lfn: '"),
    (r"(?P<a0>dome workerFunc : req:(?P<a0_method>[A-Z]+))", "dome workerFunc : req:"),   # into plain groups
    (r"dome \w+ :", "dome "),
    (r"ab?c", "a"),                          # an optional character ends it
    (r"ab*", "a"), (r"ab{2}", "a"),
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


@pytest.mark.parametrize("pattern,want", [
    (r"dome (?P<server>\S+)", True),
    (r"a(?=(b))c", True),
    (r"(a)\1", False),                       # numbered: another number alone
    (r"(?P<q>a)(?(q)b|c)", False),           # a conditional on a group
    (r"x(?P=host)", False),                  # a group outside it
])
def test_a_pattern_referring_to_a_group_is_not_self_contained(pattern, want):
    assert self_contained(pattern, FLAGS) is want
