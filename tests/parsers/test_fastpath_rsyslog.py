"""The compiled twin of the rsyslog form (parsers/fastpath.py, native/src/scan.rs) agrees
with LineParser.parse_python, the reference, on every rsyslog-wrapped line.

The twin takes a line only where Python would read it the same way every time (its
second already worked out under a prefix of the same year, month and offset, its tag
routed nowhere else); every other line (an offset that changed, a routed or foreign
program, a malformed line) stays Python's. The corpora: the simulator's rsyslog file
across the daylight-saving changes and a year end, read with the zone given (--tz) and
in the offsets the prefixes state, and odd lines written here.
"""

from collections import Counter

import pytest

from dpmstream.parsers import fastpath
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.lines import LineParser
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.profiles import resolve_profile
from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import scenario

needs_native = pytest.mark.skipif(not fastpath.available(),
                                  reason="compiled line parser not built (no Rust toolchain)")

DPNS_TAGS = frozenset(resolve_profile("lcgdm-ns").tags)

# (start, zone) of the simulated head node: a summer day, the autumn change (a repeated
# hour: +02:00 prefixes, then +01:00), the spring change (+01:00, then +02:00), a year end.
SHAPES = {
    "summer": ("2011-08-12 14:00:00", "Europe/Zurich"),
    "autumn": ("2011-10-30 02:59:50", "Europe/Zurich"),
    "spring": ("2011-03-27 01:59:50", "Europe/Zurich"),
    "year-end": ("2011-12-31 23:59:50", "Europe/Zurich"),
}


def messages(tmp_path, shape):
    start, tz = SHAPES[shape]
    cfg = scenario("mixed-syslog", requests=400, start=start, tz=tz)
    simulate(cfg, tmp_path / shape)
    return (tmp_path / f"{shape}.messages").read_text().splitlines()


def compare(lines, tz, zone_given, host="dpmhead01", year=None):
    """Parse with LineParser as it is and with Python alone, side by side: the same
    event, result, reason and routed tag on every line, the same offsets stated. Returns
    how many lines the compiled twin took (parse_python never called)."""
    def parser():
        clock = EventClock(tz, year=year, ref=(2011, 6), zone_given=zone_given)
        return LineParser(resolve_profile("lcgdm-dpm"), clock, host, DPNS_TAGS)

    both, python = parser(), parser()
    python._fast = None
    reference, calls = both.parse_python, []

    def counted(line):
        calls.append(line)
        return reference(line)

    both.parse_python = counted
    for line in lines:
        got = both.parse(line), both.result, both.reason, both.routed_tag
        want = python.parse(line), python.result, python.reason, python.routed_tag
        assert got == want, line
    assert both.stated_offsets == python.stated_offsets
    return len(lines) - len(calls)


@needs_native
@pytest.mark.parametrize("zone_given", [True, False], ids=["tz", "stated"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_compiled_twin_and_python_agree_on_every_line_of_an_rsyslog_file(tmp_path, shape, zone_given):
    lines = messages(tmp_path, shape)
    taken = compare(lines, SHAPES[shape][1], zone_given)
    if shape == "autumn" and zone_given:
        # every stamp is in the hour that repeats: read in the zone, Python resolves each
        assert taken == 0
        return
    # The name server's lines are routed to its own parser, other programs' are foreign,
    # each new second is worked out by Python: the twin takes the rest.
    dpm = sum(" dpm: " in line for line in lines)
    assert taken > dpm * 0.5, (taken, dpm, len(lines))


@needs_native
def test_a_stated_offset_that_changes_is_read_by_python_until_the_lines_are_read_in_it():
    """The autumn change behind prefixes: a line written before the change and received
    after it is read in the offset before (lines.py _stated); the twin takes no line of a
    new offset until Python has read one in it, and none of the offset before after that."""
    stamp, body = "10/30 02:59:59", "12345,3 dpm_srv_put: returns 0"
    lines = []
    for rtime in ("2011-10-30T02:59:59.100000+02:00", "2011-10-30T02:00:00.100000+01:00",
                  "2011-10-30T02:00:01.100000+01:00"):
        for ms in range(0, 1000, 250):
            lines.append(f"{rtime} dpmhead01 dpm: {stamp}.{ms:03d} {body}")
        stamp = "10/30 02:00:00" if stamp.endswith("59") else "10/30 02:00:01"
    lines += lines[:4]  # the offset before again: a change back, read by Python
    assert compare(lines, "UTC", zone_given=False) == 3 + 3 + 3 + 3


@needs_native
def test_odd_rsyslog_lines_are_left_to_python_or_read_alike():
    good = "2011-08-12T14:00:00.118402+02:00 dpmhead01 dpm: 08/12 14:00:00.118 12345,3 dpm_srv_put: returns 0"
    odd = [
        good, good.replace("dpm:", "dpm[12345]:"), good.replace(" dpm:", ""),  # tag forms
        good.replace("dpm:", "dpns:"),                     # routed to the name server
        good.replace("dpm: 08/12", "sshd[2211]: Accepted"),  # another program
        good.replace("dpmhead01", "dpmdisk07"),            # another host: its event names it
        good.replace("+02:00", "Z"), good.replace("+02:00", "z"), good.replace("+02:00", "-04:30"),
        good.replace(".118402", ""), good.replace(".118 ", " "), good.replace(".118 ", ".5 "),
        good.replace("08/12 14", "02/30 14"), good.replace("14:00:00.118 ", "25:61:00.118 "),
        good.replace("2011-08-12", "2012-01-02"),          # a stamp of August, received in January
        good.replace("returns 0", "returns 99999999999999999999999"),
        good.replace("12345,3", "99999999999999999999,3"),
        good.replace("returns 0", "something no role says"),
        good.replace("/C=", "/C=\u00e9"), good.replace("returns", "\x1creturns"), good + "\x00",
        good[:40], "garbage", "", good + "x" * 70000,
        "08/12 14:00:00.118 12345,3 dpm_srv_put: returns 0",  # the native form in between
    ]
    # twice: the second round meets every second already worked out
    assert compare(odd * 2, "Europe/Zurich", zone_given=False) > 0
    assert compare(odd * 2, "Europe/Zurich", zone_given=True) > 0


def run_pipeline(lines, host):
    records = []
    pipeline = Pipeline(records.append)
    src = pipeline.source("s", host=host, tz="Europe/Zurich", year=2011)
    src.feed_lines(lines)
    pipeline.finish()
    return records, dict(pipeline.stats.lines), pipeline.stats.bad_examples


@needs_native
@pytest.mark.parametrize("hosts", [1, 2], ids=["one-host", "two-hosts"])
@pytest.mark.parametrize("host", ["dpmhead01", "head01"], ids=["prefix-host", "other-host"])
def test_a_compiled_pipeline_reads_an_rsyslog_file_as_the_pure_python_one(tmp_path, monkeypatch, host, hosts):
    # The prefixes name dpmhead01: the engine takes their lines as the source's host's or
    # (another source host) as that host's, counted apart; with two hosts, the second
    # half's prefixes name dpmhead02: the engine follows the host the lines name.
    lines = [line.encode() for line in messages(tmp_path, "autumn")]
    if hosts == 2:
        half = len(lines) // 2
        lines[half:] = [line.replace(b" dpmhead01 ", b" dpmhead02 ") for line in lines[half:]]
    compiled = run_pipeline(lines, host)
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert not fastpath.available()
    pure = run_pipeline(lines, host)
    assert pure[1] == compiled[1] and pure[2] == compiled[2]
    assert pure[0] == compiled[0] and pure[0]


def with_odd_name_server_lines(lines):
    """The simulator's file with some of its name-server lines made odd: another host's,
    tagged `lfc` (another tag of the same profile: a second route), a tag no profile
    knows, cut short, or moved ahead of the lines before it (their stamps then run
    backwards across the two daemons)."""
    out, ns = [], 0
    for line in lines:
        if " dpns: " in line:
            ns += 1
            kind = ns % 40
            if kind == 1:
                rtime, _, rest = line.split(" ", 2)
                line = f"{rtime} dpmdisk07 {rest}"
            elif kind == 2:
                line = line.replace(" dpns: ", " lfc[77]: ", 1)
            elif kind == 3:
                line = line.replace(" dpns: ", " mystery: ", 1)
            elif kind == 4:
                line = line[:len(line) // 2]
            elif kind == 5 and len(out) > 20:
                out.insert(len(out) - 20, line)
                continue
        out.append(line)
    return out


def run_sources(lines, host, tz, profile=None):
    """What a pipeline made of one rsyslog file: records, line counts, bad lines, and per
    source and per parser the latest times by host and the offsets stated."""
    records = []
    pipeline = Pipeline(records.append)
    src = pipeline.source("s", host=host, tz=tz, year=2011, profile=profile)
    src.feed_lines(lines)
    pipeline.finish()
    parsers = {"": src.parser, **src._routed}
    return (records, dict(pipeline.stats.lines), pipeline.stats.bad_examples, src.latest_by_host,
            {tag: p.stated_offsets for tag, p in parsers.items()})


@needs_native
@pytest.mark.parametrize("zone_given", [True, False], ids=["tz", "stated"])
@pytest.mark.parametrize("host", ["dpmhead01", "head01"], ids=["prefix-host", "other-host"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_engine_reads_the_name_servers_routed_lines_as_python_does(tmp_path, monkeypatch, shape, host, zone_given):
    """A name-server line of the file is routed to its own parser (lines.py, ROUTED);
    once that parser's twin is built, the engine reads it with that twin (feed_lines'
    routes): the same records, counts by host and daemon, latest times by host and
    offsets stated as the pure Python pipeline, while Python reads only the lines the
    twins leave (a new second or offset, the odd lines)."""
    lines = [line.encode() for line in with_odd_name_server_lines(messages(tmp_path, shape))]
    tz = SHAPES[shape][1] if zone_given else None
    read_by_python = Counter()
    reference = LineParser.parse_python

    def counted(parser, line):
        read_by_python[parser.daemon] += 1
        return reference(parser, line)

    monkeypatch.setattr(LineParser, "parse_python", counted)
    compiled = run_sources(lines, host, tz)
    ns_lines = sum(b" dpns: " in line for line in lines)
    if not (shape == "autumn" and zone_given):  # the repeated hour: Python reads each line
        assert read_by_python["dpns"] < ns_lines / 4, (read_by_python, ns_lines)
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert not fastpath.available()
    pure = run_sources(lines, host, tz)
    assert pure[1:] == compiled[1:]
    assert pure[0] == compiled[0] and pure[0]
    assert pure[1][("dpmdisk07", "dpns", "parsed")] > 0


@needs_native
def test_a_routed_line_read_by_the_engine_keeps_the_hosts_latest_time_as_python_does(monkeypatch):
    """The host's latest time is the latest stamp of its lines, the routed daemon's
    included: here the name server's line at .900 is read by the engine between two of
    the daemon's, and the daemon's last, .300, read after it, leaves the host's latest at
    .900, as Python line by line does (tests/parsers/test_latest_by_host.py: on a
    simulated file)."""
    prefix = "2011-08-12T14:00:00.950000+02:00 dpmhead01"
    lines = [f"{prefix} dpm: 08/12 14:00:00.100 12345,3 dpm_srv_put: returns 0",
             f"{prefix} dpns: 08/12 14:00:00.100  9876,0 Cns_srv_creat: returns 0",
             f"{prefix} dpm: 08/12 14:00:00.200 12345,3 dpm_srv_put: returns 0",
             f"{prefix} dpns: 08/12 14:00:00.900  9876,0 Cns_srv_creat: returns 0",
             f"{prefix} dpm: 08/12 14:00:00.300 12345,3 dpm_srv_put: returns 0"]
    dpm = resolve_profile("lcgdm-dpm")  # given: no lines buffered to detect it
    read_by_python = []
    reference = LineParser.parse_python
    monkeypatch.setattr(LineParser, "parse_python",
                        lambda parser, line: read_by_python.append(line) or reference(parser, line))
    for zone in ("UTC", None):
        read_by_python.clear()
        compiled = run_sources([line.encode() for line in lines], "dpmhead01", zone, dpm)
        assert read_by_python == lines[:2] + lines[1:2]  # routed by the daemon's parser, read by the name server's
        want = 1313157600900 - (0 if zone == "UTC" else 7_200_000)  # 14:00:00.900 UTC, or +02:00
        assert compiled[3] == {"dpmhead01": want}
        with monkeypatch.context() as pure_python:
            pure_python.setenv("DPMSTREAM_PURE_PYTHON", "1")
            assert run_sources([line.encode() for line in lines], "dpmhead01", zone, dpm)[1:] == compiled[1:]


@needs_native
def test_a_twin_routes_only_its_routed_tags_and_only_to_another_rsyslog_twin():
    clock = EventClock("UTC", year=2011, zone_given=True)
    dpm = LineParser(resolve_profile("lcgdm-dpm"), clock, "dpmhead01", DPNS_TAGS)
    ns = LineParser(resolve_profile("lcgdm-ns"), clock, "dpmhead01")
    twin, ns_twin = dpm._rsyslog_twin(), ns._rsyslog_twin()
    assert twin is not None and ns_twin is not None
    with pytest.raises(ValueError, match="no tag routed elsewhere"):
        twin.route("dpm", ns_twin)          # the daemon's own tag
    with pytest.raises(ValueError, match="another rsyslog form's twin"):
        twin.route("dpns", dpm._compiled)   # the native form's parser
    with pytest.raises(ValueError, match="another rsyslog form's twin"):
        twin.route("dpns", twin)            # itself
    twin.route("dpns", ns_twin)
