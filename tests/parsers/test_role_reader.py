"""A role pattern read without its regex (parsers/role_reader.py, native/src/dome_reader.rs):
the plan of literals and runs it is read by, the shapes it refuses, and lines where its
first choice is not the regex's match, read alike by the compiled parser (reader, then
PCRE2) and the Python parser (`re`). Every simulated DOME shape reads alike in
test_dome_engines_agree.py, through the reader where a role has a plan."""

import os
import re

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.compiled_dome import scan_plan
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.role_reader import reader_plan

FLAGS = re.DOTALL | re.ASCII
KIND, LITERAL, CLASS, LAZY, GROUP = 0, 1, 2, 5, 6


def plans(profile_name: str) -> dict:
    """Each role of a bundled profile's traditional form and its plan (a role with
    several patterns: the first's)."""
    form = resolve_dome_profile(profile_name).forms["traditional"]
    found = {}
    for role, _, _, _, _, plan in scan_plan(form)[1]:
        found.setdefault(role, plan)
    return found


@pytest.mark.parametrize("profile_name", ["dmlite-dome", "dmlite-dome-notid"])
def test_the_bundled_roles_are_read_by_a_plan_but_the_one_with_an_alternation(profile_name):
    found = plans(profile_name)
    assert [role for role, plan in found.items() if plan is None] == ["putdone_error"]
    call = found["call"]
    literals = [step[LITERAL] for step in call if step[KIND] == "literal"]
    assert literals == [b"dome workerFunc : clientdn: '", b"' clienthost: '", b"' remoteclient: '",
                        b"' remoteclienthost: '", b"'"]
    runs = [(step[LAZY], step[GROUP]) for step in call if step[KIND] == "run"]
    assert runs == [(True, 2), (False, 3), (True, 4), (False, 5)]   # group 1: the role's wrapper
    assert [(step[KIND], step[GROUP]) for step in (call[0], call[-1])] == [("open", 1), ("close", 1)]


@pytest.mark.parametrize("pattern", [
    r"a (?P<x>bc|de)",          # an alternation
    r"(?P<x>\S+)(?P=x)",        # a backreference
    r"a (?P<x>.*?)",            # a lazy run at the end: it would stop before white space
    r"a \d+\w+ b",              # a run after a run
    r"(?i:a) (?P<x>\S+)",       # case-insensitive
    r"a (?P<x>.{2,5}) b",       # a count of characters that are not bytes
    r"a (?P<x>[é]+) b",         # a non-ASCII class member
    r"^a \S+",                  # an anchor
    r"a (?P<x>\d+(?P<y>\w+)) d",   # a run after a run, inside a group
])
def test_a_pattern_of_another_shape_is_left_to_the_regex(pattern):
    assert reader_plan(pattern, FLAGS) is None


def test_a_pattern_not_read_as_ascii_is_left_to_the_regex():
    assert reader_plan(r"a \d+ b", re.DOTALL) is None
    assert reader_plan(r"a \d+ b", FLAGS) is not None


def test_classes_take_their_bytes_and_non_ascii_where_they_take_non_ascii_characters():
    def takes(pattern, byte):
        run = next(step for step in reader_plan(pattern, FLAGS) if step[KIND] == "run")
        return bool(run[CLASS][byte >> 3] & (1 << (byte & 7)))
    assert takes(r"a [^']* b", ord("x")) and not takes(r"a [^']* b", ord("'")) and takes(r"a [^']* b", 0xC3)
    assert takes(r"a \d{3}", ord("7")) and not takes(r"a \d{3}", 0xC3)
    assert not takes(r"a \S+ b", ord(" ")) and takes(r"a \S+ b", 0xE2)
    assert takes(r"a [^\s:]+ b", ord("x")) and not takes(r"a [^\s:]+ b", ord(":")) and takes(r"a [^\s:]+ b", 0xC3)
    assert takes(r"a [A-Z]+ b", ord("Q")) and not takes(r"a [A-Z]+ b", ord("q"))


HEAD = "May 30 08:44:06 dpmhead01 dome[2345]: {140685573784640}[1] dmlite "
# Lines where a run's first choice is not the regex's match, or where none is.
TRICKY = [
    "dome workerFunc : clientdn: '/CN=a' clienthost: 'b' remoteclient: '/CN=c' remoteclienthost: 'd'",
    "dome workerFunc : clientdn: '/CN=a' clienthost: 'x' clienthost: 'b' remoteclient: '' remoteclienthost: ''",
    "dome workerFunc : clientdn: '/CN=a' clienthost: 'b' remoteclient: 'c' remoteclienthost: 'd' remoteclienthost: 'e'",
    "dome workerFunc : clientdn: '/CN=a' clienthost: 'b' remoteclient: 'c' remoteclienthost: 'd'   ",
    "dome workerFunc : clientdn: '/CN=a' clienthost: 'b' remoteclient: 'c' remoteclienthost: 'd' x",
    "dome workerFunc : clientdn: '/CN=é ü' clienthost: 'b' remoteclient: '/CN=Ω' remoteclienthost: '::1'",
    "dome workerFunc : clientdn: '' clienthost: '' remoteclient: '' remoteclienthost: ''",
    "dome dome_put : Entering. lfn: '/a'b' addreplica: 0 pool: '' host: '' fs: ''",
    "dome dome_put : Entering. lfn: '/a' addreplica: 0 pool: '' host: '' fs: '' addreplica: 1 pool: '' host: '' fs: ''",
    "dome dome_put : Selected fs: 'd1:/fs/1 from 3 matchings for lfn: '/a' b''",
    "dome dome_chksumstatus : Checksum calculation failed. LFN: /aPFN: /bPFN: /c. Reason: x. Reason: y",
    "dome SendSimpleResp : Exiting: code: 200 \t",
    "dome SendSimpleResp : Exiting: code: 2000",
    "dome SendSimpleResp : Exiting: code: 20",
    "dome workerFunc : req:POST cmd:dome_put query: bodyitems: 3",
    "dome workerFunc : req:post cmd:dome_put query:/q bodyitems: 3",
    "dome checkDiskSpaces : fs: /srv/1 phys: 100 free: 5 ",
    "somewhere : text",
    "a b : ",
]


@pytest.mark.skipif(not (engines.compiled_dome_available() or os.environ.get("DPMSTREAM_REQUIRE_NATIVE")),
                    reason="compiled DOME engine not built")
def test_lines_the_first_choice_does_not_read_read_alike_in_both_parsers():
    profile = resolve_dome_profile("dmlite-dome")
    reference = engines.new_dome_parser(engines.PYTHON, profile, EventClock("UTC", year=2017))
    compiled = engines.new_dome_parser(engines.COMPILED, profile, EventClock("UTC", year=2017))
    roles = set()
    for message in TRICKY:
        text = HEAD + message
        want, got = reference.parse(text), compiled.parse(text)
        assert (None if got is None else got.event()) == want, text
        assert (compiled.result, compiled.reason) == (reference.result, reference.reason), text
        roles.add(reference.result if want is None else want.role)
    assert {"call", "put", "put_selected", "chksum_failed", "returns", "command", "capacity", "other"} <= roles
