"""journald's `Suppressed N messages from UNIT` notice (docs/dome.md, "Gaps"): journald's
rate limit dropped N lines of a DOME program before syslog, and so dpmstream, saw them.
Read by both line parsers as an event of role SUPPRESSED, made a `dome_journald_gap`
record by both reassemblers, counted per host in `dpm_dome_journald_suppressed_lines_total`
and the summary's DOME section; the simulator's gap announces the true count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_profiles import SUPPRESSED, resolve_dome_profile
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.lines import FOREIGN, MALFORMED, PARSED
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.metrics.exporter import PipelineMetrics
from dpmstream.streams.sinks.dome_summary import DomeSummary
from tests.streams.metrics.test_dome_metrics import total

ENGINES = [engines.PYTHON, pytest.param(engines.COMPILED, marks=pytest.mark.skipif(
    not engines.compiled_dome_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled DOME engine is not built"))]
TZ = "Europe/Zurich"
CALL = "{140685573784640}[1] dmlite dome workerFunc : Accepted connection, ipcfd: 12, keepConnection: 1"


def parser(engine: str, name: str = "dmlite-dome"):
    return engines.new_dome_parser(engine, resolve_dome_profile(name), EventClock(TZ, year=2017))


def as_python(ev):
    """The Python DomeEvent of either parser's event."""
    return ev.event() if hasattr(ev, "event") else ev


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("profile", ["dmlite-dome", "dmlite-dome-notid"])
@pytest.mark.parametrize("line, host, program, count, whole", [
    # systemd before v240 (EL7): the unit's cgroup path
    ("May 30 08:44:05 dpmhead01 systemd-journald[412]: Suppressed 1234 messages from "
     "/system.slice/dome.service", "dpmhead01", "dome", 1234, True),
    # later systemd: the unit; DOME inside xrootd, an instance unit; journalctl's stamp
    ("2017-05-30T08:44:05.250000+0200 dpmdisk01 systemd-journald[412]: Suppressed 7 messages "
     "from xrootd@dpmdisk.service", "dpmdisk01", "xrootd", 7, False),
    # EL7's syslog ident for journald's own lines, without a pid
    ("May 30 08:44:05 dpmhead01 journal: Suppressed 5 messages from /system.slice/httpd.service",
     "dpmhead01", "httpd", 5, True),
])
def test_journalds_notice_for_a_dome_program_is_an_event_of_the_lines_it_dropped(
        engine, profile, line, host, program, count, whole):
    p = parser(engine, profile)
    ev = as_python(p.parse(line))
    assert p.result == PARSED
    assert (ev.role, ev.host, ev.program, ev.pid, ev.tid, ev.fields, ev.whole_seconds) == (
        SUPPRESSED, host, program, -1, -1, {"count": count}, whole)
    # the envelope's stamp (2017-05-30 06:44:05 UTC), as any line's
    assert ev.ts == 1496126645000 + (0 if whole else 250)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("line, result, reason", [
    ("May 30 08:44:05 dpmhead01 systemd-journald[412]: Suppressed 12 messages from "
     "/system.slice/named.service", FOREIGN, "program 'systemd-journald'"),
    ("May 30 08:44:05 dpmhead01 systemd-journald[412]: Journal started", FOREIGN,
     "program 'systemd-journald'"),
    ("May 30 08:44:05 dpmhead01 systemd-journald[412]: Suppressed 1234567890123456789012 messages "
     "from /system.slice/dome.service", MALFORMED, "a number longer than 18 digits"),
    ("Feb 30 08:44:05 dpmhead01 systemd-journald[412]: Suppressed 3 messages from dome.service",
     MALFORMED, None),
])
def test_other_journald_lines_are_foreign_and_a_damaged_notice_malformed(engine, line, result, reason):
    p = parser(engine)
    assert p.parse(line) is None
    assert p.result == result
    if reason is not None:
        assert p.reason == reason
    reference = DomeLineParser(resolve_dome_profile("dmlite-dome"), EventClock(TZ, year=2017))
    reference.parse(line)
    assert (p.result, p.reason) == (reference.result, reference.reason)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_notice_is_a_gap_record_and_touches_no_call_of_its_host(engine):
    """The notice names no process of DOME's: the call open on the head goes on to its
    Exiting line, and the record carries the host, the program and the lines dropped."""
    p = parser(engine)
    r = engines.new_dome_reassembler(engine, timeout_ms=120_000)
    lines = [
        "May 30 08:44:05 dpmhead01 dome[2345]: " + CALL,
        "May 30 08:44:06 dpmhead01 systemd-journald[412]: Suppressed 40 messages from "
        "/system.slice/dome.service",
        "May 30 08:44:07 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome SendSimpleResp : "
        "Exiting: code: 200",
        "May 30 08:45:07 dpmhead01 systemd-journald[412]: Suppressed 2 messages from dome.service",
    ]
    records = []
    for line in lines:
        records += r.feed(p.parse(line))
    records += r.finish()
    gaps = [rec for rec in records if rec["kind"] == "dome_journald_gap"]
    assert gaps == [
        {"kind": "dome_journald_gap", "time": 1496126646000, "host": "dpmhead01", "program": "dome", "lines": 40},
        {"kind": "dome_journald_gap", "time": 1496126707000, "host": "dpmhead01", "program": "dome", "lines": 2},
    ]
    (call,) = [rec for rec in records if rec["kind"] == "dome_call"]
    assert (call["http_code"], call["cut"], call["duration"]) == (200, 0, 2000)
    stats = r.stats
    assert stats.journald_suppressed_lines == 42 and stats.process_deaths == 0


@pytest.fixture(scope="module")
def gap_site(tmp_path_factory):
    """A site whose head's journald dropped four seconds of its lines, in
    /var/log/messages (where journald's notice shows, among other programs' lines)."""
    cfg = DomeConfig(envelope="messages", stamp="traditional", duration=240.0, rate=4.0, disks=2,
                     disk_down_at=None, restart_at=None, gap_at=100.0, gap_s=4.0, tz=TZ, seed=3)
    return simulate_dome(cfg, tmp_path_factory.mktemp("gap") / "site")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_lines_a_simulated_gap_dropped_are_the_metric_and_the_summary_per_host(gap_site, engine):
    truth = gap_site.summary["journald_dropped_lines"]
    assert truth == {"dpmhead01": gap_site.summary["journald_dropped"]} and truth["dpmhead01"] > 50
    metrics, summary = PipelineMetrics(), DomeSummary()

    def sink(record):
        metrics.write(record)
        summary.write(record)
    pipeline = Pipeline(sink, ReassemblySettings(timeout_s=120), engine=engine, on_dome_record=sink)
    profile = resolve_dome_profile("dmlite-dome")
    for host, path in gap_site.logs.items():
        src = pipeline.source(host, host=host, path=str(path), profile=profile, tz=TZ, year=2017)
        src.feed_lines(path.read_text(encoding="utf-8").splitlines())
    pipeline.finish()
    for host in gap_site.logs:
        assert total(metrics, "dpm_dome_journald_suppressed_lines_total", host=host) == truth.get(host, 0)
    assert dict(summary.suppressed) == truth
    assert f"  dpmhead01: {truth['dpmhead01']} lines" in summary.render()
    assert pipeline.stats.dome.journald_suppressed_lines == truth["dpmhead01"]


@pytest.mark.parametrize("engine_env", [
    {}, pytest.param({"DPMSTREAM_PURE_PYTHON": "1"}, marks=pytest.mark.slow)], ids=["default", "python"])
def test_replay_and_profile_check_show_the_lines_journald_dropped(gap_site, tmp_path, engine_env):
    # The pure Python reading runs in `make test`; in `make check` the Python engine's
    # count of these lines is held to the truth by
    # test_the_lines_a_simulated_gap_dropped_are_the_metric_and_the_summary_per_host[python].
    logs = [str(p) for p in gap_site.logs.values()]
    head = str(gap_site.logs["dpmhead01"])
    n = gap_site.summary["journald_dropped"]
    env = {**os.environ, **engine_env}
    out = tmp_path / "out"
    replay = subprocess.run([sys.executable, "-m", "dpmstream", "replay", *logs, "--out", str(out),
                             "--year", "2017", "--tz", TZ, "--request-timeout", "120"],
                            capture_output=True, text=True, env=env)
    assert replay.returncode == 0, replay.stderr
    assert "DOME lines lost before dpmstream saw them" in replay.stdout
    assert f"  dpmhead01: {n} lines" in replay.stdout
    rows = (out / "dome-journald-gaps.csv").read_text().splitlines()
    assert rows[0] == "time,host,program,lines" and rows[1].endswith(",dpmhead01,dome," + str(n))
    check = subprocess.run([sys.executable, "-m", "dpmstream", "profile", "check", head],
                           capture_output=True, text=True, env={**env, "TZ": TZ})
    assert f"dropped before syslog saw them: dpmhead01 {n}" in check.stdout, check.stdout
