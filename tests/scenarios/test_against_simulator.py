"""The reassembler against the simulator's ground truth, record for record.

The simulator computes its truth from what it printed (docs/record-rules.md) without
the parser; here the printed logs go through `dpmstream replay` as an admin would run it
and every row of requests.csv and calls.csv must equal the truth's."""

import contextlib
import csv
import io
import os
import socket

import pytest

from dpmstream.cli import main
from dpmstream.parsers import engines, fastpath
from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import names, scenario


def rows(path):
    with open(path, newline="") as f:
        data = list(csv.reader(f))
    return data[0], sorted(map(tuple, data[1:]))


def replay(*args: str) -> str:
    """`dpmstream replay ARGS`, which must succeed; its standard output. Run here by the
    entry point's own function, its parsing of the options and exit code included (a child
    process would add only its start), with the line parser of the test's `parser_env`."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["replay", *args]) == 0
    return printed.getvalue()


PARSERS = ("compiled", "pure-python")


@pytest.fixture
def parser_env(request, monkeypatch):
    """The replay runs with either line parser (request.param, one of PARSERS, given by
    the test's parametrize): both must give the truth. The pure-Python one by
    DPMSTREAM_PURE_PYTHON set for the test: the line parser and the engine are chosen
    when a replay's sources are made, so in this process (only the records' CSV
    formatter is chosen as the modules load: the compiled one where built; the two are
    held to the same bytes by tests/streams/sinks/test_csv_blocks.py)."""
    if request.param == "pure-python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
        assert engines.choose() == engines.PYTHON and not fastpath.available()
    return request.param


def on_both_parsers(argname: str, values, pure_python_in_check=None, compiled_in_check=None):
    """Parametrize over each parser x `values` (ids PARSER-VALUE). The fast loop (`make
    check`) replays with the compiled parser the values of `compiled_in_check`, and with
    the pure-Python one those of `pure_python_in_check` (None: all); the other cells are
    marked slow (`make test` runs them). What they would add to the fast loop it checks anyway:
    tests/parsers/test_engines_agree.py::test_the_pure_python_parser_gives_the_python_engine_the_same_input
    and ::test_both_engines_give_the_same_records_and_counters hold both parsers and
    both engines to the same records on every scenario."""
    in_check = {"compiled": compiled_in_check, "pure-python": pure_python_in_check}
    cells = [pytest.param(parser, value, id=f"{parser}-{value}",
                          marks=pytest.mark.slow if in_check[parser] is not None
                          and value not in in_check[parser] else ())
             for parser in PARSERS for value in values]
    return pytest.mark.parametrize(("parser_env", argname), cells, indirect=["parser_env"])


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """simulated(cfg): a directory holding sim.log and sim.dpns.log (or sim.messages) of
    `cfg` and their truth, simulated once for the module (a simulation is a function of
    its seed): both line parsers replay the same logs."""
    made = {}

    def site(cfg):
        if repr(cfg) not in made:
            where = tmp_path_factory.mktemp("sim")
            simulate(cfg, where / "sim")
            made[repr(cfg)] = where
        return made[repr(cfg)]
    return site


def replay_and_compare(tmp_path, sim, cfg, inputs=None, name_head=True):
    """`sim`: the directory of the simulated logs and truth; `inputs` (paths) default to
    its logs. name_head=False: the README's command, no --host: the records' host is this
    machine's name (the DPM log names none), and the head's name-server client is learned."""
    out = tmp_path / "replayed"
    files = inputs or [sim / f for f in (["sim.messages"] if cfg.syslog_file
                                         else ["sim.log", "sim.dpns.log"])]
    replay("--quiet", "--tz", cfg.tz, *(["--host", cfg.host] if name_head else []),
           "--out", str(out), *map(str, files))
    for kind in ("requests", "calls"):
        ours_header, ours = rows(out / f"{kind}.csv")
        truth_header, truth = rows(sim / f"sim.{kind}.csv")
        assert ours_header == truth_header
        if not name_head:
            at = ours_header.index("host")
            assert {row[at] for row in ours} == {socket.gethostname()} != {cfg.host}
            ours = sorted(row[:at] + (cfg.host,) + row[at + 1:] for row in ours)
        missing, extra = sorted(set(truth) - set(ours)), sorted(set(ours) - set(truth))
        assert (missing[:3], extra[:3]) == ([], []), kind
        assert len(ours) == len(truth) and truth, kind


# Scenarios whose head node the name server names otherwise than the DPM's host: replayed
# with the README's command (no --host), the head's client learned from the logs.
HEAD_LEARNED = {"ns-clients"}


# The scenarios the fast loop replays with the pure-Python parser too: those whose lines
# it reads otherwise (an rsyslog file, whole-second stamps, a year's end, stamps far
# ahead, no --host).
PURE_PYTHON_IN_CHECK = {"mixed-syslog", "whole-seconds", "year-end", "future-lines", "ns-clients"}


@on_both_parsers("name", [n for n in names() if n != "heavy"], PURE_PYTHON_IN_CHECK)
def test_replay_equals_the_ground_truth_in_scenario(tmp_path, simulated, name, parser_env):
    """Every scenario on both parsers; the fast loop runs the pure-Python parser on
    PURE_PYTHON_IN_CHECK only (on_both_parsers)."""
    cfg = scenario(name, requests=600)
    replay_and_compare(tmp_path, simulated(cfg), cfg,
                       name_head=name not in HEAD_LEARNED)


@on_both_parsers("name", ["thesis", "ns-clients"], pure_python_in_check=set())
def test_the_readme_commands_link_name_server_calls_on_a_machine_not_named_like_the_head(
        tmp_path, simulated, name, parser_env):
    """`dpmstream simulate --out out/t20` then `dpmstream replay out/t20.log
    out/t20.dpns.log` (issue 27): no --host, this machine's name is not the head's, and at
    a site's size (3,000 requests) the name-server calls link as the truth says. The fast
    loop runs both scenarios compiled; the pure-Python parser on the README's command
    (ns-clients, no --host) it runs at 600 requests in
    test_replay_equals_the_ground_truth_in_scenario[pure-python-ns-clients]."""
    cfg = scenario(name, requests=3000)
    replay_and_compare(tmp_path, simulated(cfg), cfg, name_head=False)
    with open(tmp_path / "replayed" / "requests.csv") as f:
        linked = [int(row["ns_calls"]) for row in csv.DictReader(f)]
    assert sum(linked) > 0.9 * len(linked) > 2000


@pytest.mark.parametrize("parser_env", PARSERS, indirect=True)
def test_overlapping_archives_give_the_records_of_the_archive_read_once(tmp_path, simulated,
                                                                         parser_env):
    """A rotated copy that overlaps the next file, and the same archive given twice."""
    cfg = scenario("mixed", requests=600)
    sim = simulated(cfg)
    lines = (sim / "sim.log").read_text().splitlines(keepends=True)
    cut = len(lines) // 2
    (tmp_path / "log.1").write_text("".join(lines[:cut + 500]))
    (tmp_path / "log").write_text("".join(lines[cut - 500:]))
    mtime = os.stat(sim / "sim.log").st_mtime  # like the archive: dates the year
    for name in ("log.1", "log"):
        os.utime(tmp_path / name, (mtime, mtime))
    replay_and_compare(tmp_path, sim, cfg,
                       inputs=[tmp_path / "log.1", tmp_path / "log", sim / "sim.dpns.log",
                               sim / "sim.log", sim / "sim.dpns.log"])


def test_replay_equals_the_ground_truth_under_heavy_load(tmp_path, simulated):
    cfg = scenario("heavy")
    replay_and_compare(tmp_path, simulated(cfg), cfg)


def test_replay_equals_the_ground_truth_with_every_failure_kind(tmp_path, simulated):
    cfg = scenario("mixed", requests=1500, abort_rate=0.05, abandon_rate=0.05, put_fail_rate=0.05,
                   proc_fail_rate=0.05, auth_fail_rate=0.05, seed=7)
    sim = simulated(cfg)
    replay_and_compare(tmp_path, sim, cfg)
    with open(sim / "sim.requests.csv") as f:
        statuses = {row["status"] for row in csv.DictReader(f)}
    assert statuses == {"success", "failed", "aborted", "incomplete"}


def test_a_gap_in_the_name_server_log_loses_the_links_of_the_requests_processed_then(tmp_path,
                                                                                     simulated):
    """dpns-gap: the DPNS lines of 4 s to 9 s are missing. A put processed wholly inside
    the gap has no linked call, one processed wholly outside has its creat, and linked
    name-server time is always a part of proc time."""
    cfg = scenario("dpns-gap", requests=600)
    replay_and_compare(tmp_path, simulated(cfg), cfg)  # ns_calls, ns_s and token equal the truth's
    gap = [cfg.start_ms() + int(s * 1000) for s in cfg.dpns_gap]
    with open(tmp_path / "replayed" / "requests.csv") as f:
        puts = [r for r in csv.DictReader(f) if r["op"] == "put" and r["proc_s"]]
    inside = outside = 0
    for r in puts:
        ms = {k: round(float(r[k]) * 1000) for k in ("started", "request_s", "queue_s", "proc_s",
                                                      "ns_s")}
        first = ms["started"] + ms["request_s"] + ms["queue_s"]
        last = first + ms["proc_s"]
        assert ms["ns_s"] <= ms["proc_s"], r
        if gap[0] <= first and last < gap[1]:
            inside += 1
            assert r["ns_calls"] == "0", r
        elif last < gap[0] or first >= gap[1]:
            outside += 1
            assert r["ns_calls"] == r["nfiles"], r
    assert inside > 20 and outside > 200


@pytest.mark.parametrize("name", ["same-dir", "many-dirs", "multi-file"])
def test_every_put_processed_links_one_creat_per_file(tmp_path, simulated, name):
    """Puts create new files: no call is ambiguous, so each processed put links exactly
    its files' creats, and their time is part of its proc time."""
    cfg = scenario(name, requests=400)
    replay_and_compare(tmp_path, simulated(cfg), cfg)
    with open(tmp_path / "replayed" / "requests.csv") as f:
        puts = [r for r in csv.DictReader(f) if r["op"] == "put" and r["proc_s"]]
    assert len(puts) > 200
    for r in puts:
        assert r["ns_calls"] == r["nfiles"], r
        assert 0 < float(r["ns_s"]) <= float(r["proc_s"]), r


@on_both_parsers("seed", [1, 2, 3], pure_python_in_check={1}, compiled_in_check={1})
def test_a_clock_stepped_back_at_a_sites_size_loses_no_line_as_a_repeat(tmp_path, simulated, seed,
                                                                        parser_env):
    """clock-step at 3,000 requests (issue 26 item 7): stamps of before the step come
    again, and calls taking no time log one `returns` twice in a millisecond; no line is
    read twice, and every record is the truth's, its linked name-server calls included
    (a run and a call from either side of the step never meet). The fast loop runs seed 1
    on both parsers (the other seeds are the same check on other draws: make test)."""
    cfg = scenario("clock-step", requests=3000, seed=seed)
    sim = simulated(cfg)
    out = tmp_path / "replayed"
    said = replay("--tz", cfg.tz, "--host", cfg.host, "--out", str(out), str(sim / "sim.log"),
                  str(sim / "sim.dpns.log"))
    assert "read twice 0," in said
    assert "clock steps back 1," in said  # one step of the head node's clock, in both logs
    for kind in ("requests", "calls"):
        header, ours = rows(out / f"{kind}.csv")
        truth_header, truth = rows(sim / f"sim.{kind}.csv")
        assert header == truth_header
        assert ours == truth and len(truth) > 2900, kind


TWO_DAYS = [scenario("thesis", requests=1500, seed=seed, start=f"2011-08-{day} 14:31:40")
            for seed, day in ((1, 12), (2, 13))]


@pytest.fixture(scope="module")
def two_days(tmp_path_factory):
    """The days of TWO_DAYS simulated (day0.*, day1.*), and each log the two days end to
    end (both.log, both.dpns.log): once for the module, both line parsers read them."""
    where = tmp_path_factory.mktemp("two-days")
    for i, cfg in enumerate(TWO_DAYS):
        simulate(cfg, where / f"day{i}")
    for ext in ("log", "dpns.log"):
        both = where / f"both.{ext}"
        both.write_text("".join((where / f"day{i}.{ext}").read_text() for i in range(2)))
        mtime = os.stat(where / f"day1.{ext}").st_mtime  # like the archive: dates the year
        os.utime(both, (mtime, mtime))
    return where


@pytest.mark.parametrize("parser_env", PARSERS, indirect=True)
def test_two_days_concatenated_lose_no_name_server_link(tmp_path, two_days, parser_env):
    """Issue 26 item 9: two simulated days, each log the two days end to end. The name
    server's log goes on past the DPM log's last line of the first day (and the next day's
    lines come after it): every request keeps its linked calls, every call its token."""
    out = tmp_path / "replayed"
    replay("--quiet", "--tz", TWO_DAYS[0].tz, "--host", TWO_DAYS[0].host, "--out", str(out),
           str(two_days / "both.log"), str(two_days / "both.dpns.log"))

    def linked(path, key, columns):
        with open(path) as f:
            return {tuple(row[k] for k in key): tuple(row[c] for c in columns)
                    for row in csv.DictReader(f)}

    for kind, key, columns in (("requests", ("token",), ("ns_calls", "ns_s")),
                               ("calls", ("daemon", "thread", "started"), ("token",))):
        ours = linked(out / f"{kind}.csv", key, columns)
        truth = {}
        for i in range(2):
            truth.update(linked(two_days / f"day{i}.{kind}.csv", key, columns))
        assert ours == truth and len(truth) > 2900, kind
