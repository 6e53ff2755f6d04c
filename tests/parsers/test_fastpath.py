"""The compiled line parser (native/, parsers/fastpath.py) agrees with the Python parser.

Python's LineParser stays the reference: the compiled one must give the same Event (or
the same `unmatched`) for every line it takes, and leave every other line to Python. The
corpora are every simulator scenario, the real name-server and SRM lines, and bad input.
"""

import os
import random
from pathlib import Path

import pytest

from dpmstream.parsers import extension, fastpath
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.lines import LineParser
from dpmstream.parsers.profiles import detect_profile, load_profile, profile_from_dict, resolve_profile
from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import names, scenario
from dpmstream.parsers.pipeline import Pipeline

from tests.helpers import sampled

DATA = Path(__file__).parents[1] / "data"

needs_native = pytest.mark.skipif(not fastpath.available(),
                                  reason="compiled line parser not built (no Rust toolchain)")


def test_the_compiled_parser_is_built_where_the_install_could_build_it():
    # `make test` sets DPMSTREAM_REQUIRE_NATIVE when cargo is on PATH: a silently failed
    # build must not pass as "pure Python".
    if os.environ.get("DPMSTREAM_REQUIRE_NATIVE"):
        assert extension.compiled("FastLines") is not None, "native/ was not built by the install"
    else:
        pytest.skip("DPMSTREAM_REQUIRE_NATIVE not set")


class Counting:
    """Wraps the compiled parse to count the lines it takes itself."""

    def __init__(self, parse):
        self.parse, self.taken = parse, 0

    def __call__(self, line):
        ev = self.parse(line)
        self.taken += ev is not None
        return ev


def compare(lines, profile, tz="Europe/Zurich", year=2011, refs=None):
    """Parse with both parsers side by side; returns how many lines the compiled one took.
    refs: per line, the (year, month) it was received in (the Kafka path), or None."""
    both = LineParser(profile, EventClock(tz, year=year), "head01")
    assert both._fast is not None, "the compiled parser refused a bundled profile"
    both._fast = counting = Counting(both._fast)
    python = LineParser(profile, EventClock(tz, year=year), "head01")
    python._fast = None
    for i, line in enumerate(lines):
        if refs is not None:
            both.line_ref = python.line_ref = refs[i]
        got = both.parse(line), both.result, both.reason
        want = python.parse(line), python.result, python.reason
        assert got == want, line
    return counting.taken


def scenario_logs(tmp_path, name):
    cfg = scenario(name, requests=300)
    simulate(cfg, tmp_path / name)
    return cfg, [tmp_path / f"{name}.log", tmp_path / f"{name}.dpns.log"]


@needs_native
@pytest.mark.parametrize("name", sampled(
    names(), keep=["dst-end", "whole-seconds", "mixed-syslog", "clock-step", "future-lines"]))
def test_compiled_and_python_parsers_agree_on_every_line_of_scenario(tmp_path, name):
    # Every scenario in `make test`; `make check`: the ones whose stamps or envelope are
    # odd (a repeated hour, whole seconds, rsyslog, a clock step, lines far ahead).
    cfg, paths = scenario_logs(tmp_path, name)
    for path in paths:
        lines = path.read_text().splitlines()
        profile = detect_profile(lines[:200])
        taken = compare(lines, profile, tz=cfg.tz, year=int(str(cfg.start)[:4]))
        if name == "dst-end":  # stamps of the repeated hour are resolved line by line
            continue
        # Most lines repeat a second already seen: the compiled parser must carry them.
        assert taken > len(lines) * 0.5, (path.name, taken, len(lines))


@needs_native
def test_compiled_and_python_parsers_agree_on_lines_with_receive_times_across_a_year_end(tmp_path):
    cfg, paths = scenario_logs(tmp_path, "year-end")
    lines = paths[0].read_text().splitlines()
    # Received in December for the first half, January after: the year each line gets
    # moves with its receive time, and the seconds cache must follow.
    refs = [(2011, 12) if i < len(lines) // 2 else (2012, 1) for i in range(len(lines))]
    taken = compare(lines, detect_profile(lines[:200]), tz=cfg.tz, year=2011, refs=refs)
    assert taken > len(lines) * 0.5


@needs_native
def test_rsyslog_lines_are_read_in_their_prefixs_offset_by_both_parsers():
    """A file mixing the daemon's own lines (read in the stream's zone, here UTC, and
    taken by the compiled parser once their second is known) with the same stamps behind
    rsyslog prefixes across the autumn change (read in the offset each prefix states,
    by LineParser, or by the rsyslog form's compiled twin once LineParser has read a line
    in that offset)."""
    prefixed = [("2011-10-30T02:59:59.000100+02:00", "10/30 02:59:59"),
                ("2011-10-30T02:00:00.000100+01:00", "10/30 02:00:00")]
    lines = []
    for rtime, stamp in prefixed:
        for ms in range(0, 1000, 100):
            native = f"{stamp}.{ms:03d} 12345,3 dpm_srv_put: returns 0"
            lines += [native, native, f"{rtime} dpmhead01 dpm[12345]: {native}"]
    taken = compare(lines, resolve_profile("lcgdm-dpm"), tz="UTC")
    assert taken > 0
    parser = LineParser(resolve_profile("lcgdm-dpm"), EventClock("UTC", year=2011), "head01")
    times = [parser.parse(line).ts for line in lines]
    first_change = 1319936399000   # 02:59:59 CEST = 00:59:59 UTC
    assert times[2] == first_change and times[32] == first_change + 1000
    assert times[0] == first_change + 2 * 3_600_000   # 02:59:59 read as UTC, no prefix


@needs_native
def test_compiled_and_python_parsers_agree_on_real_name_server_and_srm_lines():
    for path in sorted((DATA / "real").rglob("*")):
        if not path.is_file() or path.name == "README.md":
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        profile = detect_profile(lines[:200])
        if profile is not None:
            compare(lines, profile)


@needs_native
def test_compiled_and_python_parsers_agree_on_bad_and_odd_lines():
    profile = resolve_profile("lcgdm-dpm")
    good = "08/12 10:00:00.123 12345,3 dpm_srv_put: DP092 - put request by /C=ch/CN=u (1,2) from c1"
    rng = random.Random(5)
    odd = [
        good, good.replace(".123", ""), good.replace(".123", ".5"), good.replace(".123", ".123456"),
        good.replace("12345,3", "12345"), good.replace("12345,3", "  345,3"),
        good + "   ", good + "\t", good.replace("/C=ch", "/C=\u00e9\u00e8"),  # non-ASCII DN
        good.replace(" DP092", "\x1c DP092"), good + "\x00", "garbage", "",
        good[:30], good.replace("08/12", "13/45"), good.replace("10:00", "25:61"),
        "08/12 10:00:00.123 12345,3 dpm_srv_put: returns -2",
        "08/12 10:00:00.123 12345,3 dpm_srv_put: returns 99999999999999999999999",
        "08/12 10:00:00.123 12345,3 dpm_srv_put: something no role says",
        "08/12 10:00:00.123 99999999999999999999,3 dpm_srv_put: returns 0",
        "08/12 10:00:00.123 12345,3 dpm_srv_getreqstatus: request status DPM_READY",
        "x" * 70000,
    ]
    mixed = odd + ["".join(rng.choice(good) for _ in range(len(good))) for _ in range(300)]
    compare(mixed * 2, profile, tz="UTC")  # twice: the second round hits the seconds cache


@needs_native
def test_a_reworded_site_profile_is_compiled_too_and_agrees(tmp_path):
    site = load_profile(DATA / "profiles" / "site-reworded.toml")
    assert fastpath.compiled_parser(site.native, "h", site.daemon, 100) is not None


@needs_native
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@pytest.mark.parametrize("construct", [r"[[:alpha:]]+", r"x{,3}"])
def test_patterns_whose_meaning_differs_in_pcre2_stay_with_python(construct):
    data = {"name": "odd", "daemon": "dpm", "envelope": {
        "native": resolve_profile("lcgdm-dpm").native_envelope,
        "rsyslog": r"(?P<rtime>\S+) (?P<host>\S+) "},
        "roles": {"returns": r"returns (?P<rc>\d+)", "other": construct}}
    profile = profile_from_dict(data)
    assert fastpath.compiled_parser(profile.native, "h", "dpm", 100) is None
    parser = LineParser(profile, EventClock("UTC", year=2011), "h")
    assert parser.parse("08/12 10:00:00 1,2 f: returns 3").rc == 3


def site_profile(roles):
    return profile_from_dict({"name": "site", "daemon": "dpm", "envelope": {
        "native": resolve_profile("lcgdm-dpm").native_envelope,
        "rsyslog": r"(?P<rtime>\S+) (?P<host>\S+) "}, "roles": roles})


@needs_native
@pytest.mark.parametrize("name", ["lcgdm-dpm", "lcgdm-ns", "lcgdm-srm"])
def test_every_bundled_profile_is_matched_in_its_marked_form_with_fewer_groups(name):
    form = resolve_profile(name).native
    pattern, groups, slots = fastpath.marked_form(form)
    assert "(*MARK:0)" in pattern and "(?P<a0" not in pattern
    assert groups < form.regex.groups - 1
    assert len(slots) == len(form.alternatives)


@needs_native
@pytest.mark.parametrize("name", ["lcgdm-dpm", "lcgdm-ns", "lcgdm-srm"])
def test_every_bundled_profile_has_its_envelope_read_by_hand(name):
    # native/src/lcgdm_head.rs reads this envelope for a tenth of PCRE2's cost a line: a
    # bundled envelope reworded even by a byte would lose it, and with it a tenth of a replay
    parser = fastpath.compiled_parser(resolve_profile(name).native, "h", "dpm", 100)
    assert parser.reads_envelope_by_hand


@needs_native
def test_another_envelope_is_matched_by_the_pattern_and_agrees():
    # the same roles behind an envelope that is not lcgdm_head's (a longer thread field):
    # PCRE2 reads it with the whole pattern, as the Python parser does
    data = {"name": "site", "daemon": "dpm", "envelope": {
        "native": resolve_profile("lcgdm-dpm").native_envelope.replace(r"(?:,(?P<tid>\d+))?",
                                                                        r"(?:[,.](?P<tid>\d+))?"),
        "rsyslog": r"(?P<rtime>\S+) (?P<host>\S+) "},
        "roles": {"returns": r"returns (?P<rc>-?\d+)", "status": r"request status DPM_(?P<state>[A-Z_]+)"}}
    profile = profile_from_dict(data)
    assert not fastpath.compiled_parser(profile.native, "h", "dpm", 100).reads_envelope_by_hand
    lines = [f"08/12 10:00:0{s}.1{s}3 1{sep}2 f: {m}" for s in range(3) for sep in ",." for m in (
        "returns -4", "request status DPM_DONE", "nothing", "returns")]
    assert compare(lines * 2, profile, tz="UTC") > len(lines)


@needs_native
def test_plain_nested_and_optional_groups_keep_their_fields_in_the_marked_form():
    # Unnamed groups before and between the named ones, a group inside a set's brackets
    # (literal), an optional group: each field must still be read from its own group.
    profile = site_profile({
        "returns": r"(?:re)?turns (x)?(?P<rc>-?\d+)",
        "status": r"[(]?(\w+) status (?P<state>[A-Z_]+)",
        "call": [r"(c|d)all (?P<op>\w+)(?: by (?P<client>\S+))?", r"(?P<op>\w+) request"],
        "other": r".*\)",
    })
    assert fastpath.marked_form(profile.native) is not None
    lines = [f"08/12 10:00:0{s}.1{s}3 1,2 f: {m}" for s in range(3) for m in (
        "returns -4", "turns x12", "(srm status DONE", "srm status X_Y", "call put by me",
        "dall get", "ls request", "odd)", "nothing", "returns", "call")]
    assert compare(lines * 2, profile, tz="UTC") > len(lines)


@needs_native
@pytest.mark.parametrize("role", [r"(\w)\1 returns (?P<rc>\d+)", r"(a)?(?(1)b|c)"])
def test_a_pattern_referring_to_its_groups_by_number_is_left_unmarked_and_still_agrees(role):
    profile = site_profile({"returns": r"returns (?P<rc>\d+)", "other": role})
    assert fastpath.marked_form(profile.native) is None
    assert fastpath.compiled_parser(profile.native, "h", "dpm", 100) is not None
    lines = ["08/12 10:00:00 1,2 f: returns 3", "08/12 10:00:00 1,2 f: aa returns 5",
             "08/12 10:00:00 1,2 f: ab", "08/12 10:00:00 1,2 f: c"]
    compare(lines * 2, profile, tz="UTC")


@needs_native
def test_a_role_pattern_with_a_bar_of_its_own_is_read_by_the_compiled_parser_in_every_branch():
    # `a|b` as one role: in the marked form its second branch must carry the mark too,
    # else PCRE2 names no alternative for `rc=9` and every such line goes to Python.
    profile = site_profile({"returns": r"returns (?P<rc>\d+)|rc=(?P<nfiles>\d+)"})
    assert fastpath.marked_form(profile.native) is not None
    lines = ["08/12 10:00:00 1,2 f: returns 3", "08/12 10:00:00 1,2 f: rc=9"] * 2
    # the first line teaches the second; the compiled parser takes the three after it
    assert compare(lines, profile, tz="UTC") == 3


@needs_native
def test_a_message_is_read_alike_whichever_byte_it_opens_with():
    # The compiled parser matches a message with the alternatives that can open with its
    # first byte only (scan.rs, FirstByte): a caseless role, roles sharing a first byte,
    # roles with no first byte of their own, and messages opening with every printable
    # byte must read as Python reads them, the earlier role winning as before.
    profile = site_profile({
        "returns": r"(?i:returns) (?P<rc>-?\d+)",
        "status": r"request status DPM_(?P<state>[A-Z_]+)",
        "token": r"x?DP098 - (?P<op>\w+) (?P<token>[0-9a-f]{8})",
        "detail": r"DP098 - .*",
        "other": [r"request .*", r"\d+ left", r"r.*"],
    })
    messages = ["returns 0", "RETURNS -4", "rEtUrNs 7", "returns x", "request status DPM_DONE",
                "request status dpm", "request", "r", "DP098 - put 0123abcd", "xDP098 - get 01234567",
                "DP098 - put", "DP099", "12 left", "12", "", " returns 1", "returns 1 "]
    messages += [chr(c) + "eturns 1" for c in range(32, 127)]
    lines = [f"08/12 10:00:00.123 1,2 f: {m}" for m in messages]
    assert fastpath.compiled_parser(profile.native, "h", "dpm", 100).reads_envelope_by_hand
    # the first line teaches the second; the compiled parser takes the others
    assert compare(lines * 2, profile, tz="UTC") == 2 * len(lines) - 1


def run_pipeline(lines, chunked):
    records = []
    pipeline = Pipeline(records.append)
    src = pipeline.source("s", host="head01", tz="UTC", year=2011)
    if chunked:
        src.feed_lines(lines)
    else:
        for line in lines:
            src.feed(line)
    pipeline.finish()
    return records, dict(pipeline.stats.lines), pipeline.stats.bad_examples


def test_pure_python_and_compiled_pipelines_give_the_same_records(tmp_path, monkeypatch):
    cfg, paths = scenario_logs(tmp_path, "restart")
    lines = paths[0].read_bytes().splitlines()
    compiled = run_pipeline(lines, chunked=True)
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert not fastpath.available()
    pure = run_pipeline(lines, chunked=True)
    assert pure[1] == compiled[1]
    assert pure[0] == compiled[0] and pure[0]
