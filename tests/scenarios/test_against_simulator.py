"""The reassembler against the simulator's ground truth, record for record.

The simulator computes its truth from what it printed (docs/record-rules.md) without
the parser; here the printed logs go through `dpmstream replay` as an admin would run it
and every row of requests.csv and calls.csv must equal the truth's."""

import csv
import os
import socket
import subprocess
import sys

import pytest

from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import names, scenario


def rows(path):
    with open(path, newline="") as f:
        data = list(csv.reader(f))
    return data[0], sorted(map(tuple, data[1:]))


@pytest.fixture(params=["compiled", "pure-python"])
def parser_env(request):
    """The replay runs with either line parser: both must give the truth."""
    env = dict(os.environ)
    if request.param == "pure-python":
        env["DPMSTREAM_PURE_PYTHON"] = "1"
    return env


def replay_and_compare(tmp_path, cfg, env=None, inputs=None, name_head=True):
    """name_head=False: the README's command, no --host: the records' host is this
    machine's name (the DPM log names none), and the head's name-server client is learned."""
    sim = simulate(cfg, tmp_path / "sim")
    out = tmp_path / "replayed"
    files = inputs or (["sim.messages"] if cfg.syslog_file else ["sim.log", "sim.dpns.log"])
    subprocess.run([sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", cfg.tz,
                    *(["--host", cfg.host] if name_head else []), "--out", str(out),
                    *[str(tmp_path / f) for f in files]], check=True, env=env)
    for kind in ("requests", "calls"):
        ours_header, ours = rows(out / f"{kind}.csv")
        truth_header, truth = rows(tmp_path / f"sim.{kind}.csv")
        assert ours_header == truth_header
        if not name_head:
            at = ours_header.index("host")
            assert {row[at] for row in ours} == {socket.gethostname()} != {cfg.host}
            ours = sorted(row[:at] + (cfg.host,) + row[at + 1:] for row in ours)
        missing, extra = sorted(set(truth) - set(ours)), sorted(set(ours) - set(truth))
        assert (missing[:3], extra[:3]) == ([], []), kind
        assert len(ours) == len(truth) and truth, kind
    return sim


# Scenarios whose head node the name server names otherwise than the DPM's host: replayed
# with the README's command (no --host), the head's client learned from the logs.
HEAD_LEARNED = {"ns-clients"}


@pytest.mark.parametrize("name", [n for n in names() if n != "heavy"])
def test_replay_equals_the_ground_truth_in_scenario(tmp_path, name, parser_env):
    replay_and_compare(tmp_path, scenario(name, requests=600), parser_env,
                       name_head=name not in HEAD_LEARNED)


@pytest.mark.parametrize("name", ["thesis", "ns-clients"])
def test_the_readme_commands_link_name_server_calls_on_a_machine_not_named_like_the_head(
        tmp_path, name, parser_env):
    """`dpmstream simulate --out out/t20` then `dpmstream replay out/t20.log
    out/t20.dpns.log` (issue 27): no --host, this machine's name is not the head's, and at
    a site's size (3,000 requests) the name-server calls link as the truth says."""
    replay_and_compare(tmp_path, scenario(name, requests=3000), parser_env, name_head=False)
    with open(tmp_path / "replayed" / "requests.csv") as f:
        linked = [int(row["ns_calls"]) for row in csv.DictReader(f)]
    assert sum(linked) > 0.9 * len(linked) > 2000


def test_overlapping_archives_give_the_records_of_the_archive_read_once(tmp_path, parser_env):
    """A rotated copy that overlaps the next file, and the same archive given twice."""
    cfg = scenario("mixed", requests=600)
    simulate(cfg, tmp_path / "sim")
    lines = (tmp_path / "sim.log").read_text().splitlines(keepends=True)
    cut = len(lines) // 2
    (tmp_path / "log.1").write_text("".join(lines[:cut + 500]))
    (tmp_path / "log").write_text("".join(lines[cut - 500:]))
    mtime = os.stat(tmp_path / "sim.log").st_mtime  # like the archive: dates the year
    for name in ("log.1", "log"):
        os.utime(tmp_path / name, (mtime, mtime))
    replay_and_compare(tmp_path, cfg, parser_env,
                       inputs=["log.1", "log", "sim.dpns.log", "sim.log", "sim.dpns.log"])


def test_replay_equals_the_ground_truth_under_heavy_load(tmp_path):
    replay_and_compare(tmp_path, scenario("heavy"))


def test_replay_equals_the_ground_truth_with_every_failure_kind(tmp_path):
    cfg = scenario("mixed", requests=1500, abort_rate=0.05, abandon_rate=0.05, put_fail_rate=0.05,
                   proc_fail_rate=0.05, auth_fail_rate=0.05, seed=7)
    replay_and_compare(tmp_path, cfg)
    with open(tmp_path / "sim.requests.csv") as f:
        statuses = {row["status"] for row in csv.DictReader(f)}
    assert statuses == {"success", "failed", "aborted", "incomplete"}


def test_a_gap_in_the_name_server_log_loses_the_links_of_the_requests_processed_then(tmp_path):
    """dpns-gap: the DPNS lines of 4 s to 9 s are missing. A put processed wholly inside
    the gap has no linked call, one processed wholly outside has its creat, and linked
    name-server time is always a part of proc time."""
    cfg = scenario("dpns-gap", requests=600)
    replay_and_compare(tmp_path, cfg)  # ns_calls, ns_s and token equal the truth's
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
def test_every_put_processed_links_one_creat_per_file(tmp_path, name):
    """Puts create new files: no call is ambiguous, so each processed put links exactly
    its files' creats, and their time is part of its proc time."""
    replay_and_compare(tmp_path, scenario(name, requests=400))
    with open(tmp_path / "replayed" / "requests.csv") as f:
        puts = [r for r in csv.DictReader(f) if r["op"] == "put" and r["proc_s"]]
    assert len(puts) > 200
    for r in puts:
        assert r["ns_calls"] == r["nfiles"], r
        assert 0 < float(r["ns_s"]) <= float(r["proc_s"]), r


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_clock_stepped_back_at_a_sites_size_loses_no_line_as_a_repeat(tmp_path, seed, parser_env):
    """clock-step at 3,000 requests (issue 26 item 7): stamps of before the step come
    again, and calls taking no time log one `returns` twice in a millisecond; no line is
    read twice, and every record is the truth's, its linked name-server calls included
    (a run and a call from either side of the step never meet)."""
    cfg = scenario("clock-step", requests=3000, seed=seed)
    simulate(cfg, tmp_path / "sim")
    out = tmp_path / "replayed"
    done = subprocess.run([sys.executable, "-m", "dpmstream", "replay", "--tz", cfg.tz,
                           "--host", cfg.host, "--out", str(out), str(tmp_path / "sim.log"),
                           str(tmp_path / "sim.dpns.log")], check=True, env=parser_env,
                          capture_output=True, text=True)
    assert "read twice 0," in done.stdout
    assert "clock steps back 1," in done.stdout  # one step of the head node's clock, in both logs
    for kind in ("requests", "calls"):
        header, ours = rows(out / f"{kind}.csv")
        truth_header, truth = rows(tmp_path / f"sim.{kind}.csv")
        assert header == truth_header
        assert ours == truth and len(truth) > 2900, kind


def test_two_days_concatenated_lose_no_name_server_link(tmp_path, parser_env):
    """Issue 26 item 9: two simulated days, each log the two days end to end. The name
    server's log goes on past the DPM log's last line of the first day (and the next day's
    lines come after it): every request keeps its linked calls, every call its token."""
    days = [scenario("thesis", requests=1500, seed=seed, start=f"2011-08-{day} 14:31:40")
            for seed, day in ((1, 12), (2, 13))]
    for i, cfg in enumerate(days):
        simulate(cfg, tmp_path / f"day{i}")
    for ext in ("log", "dpns.log"):
        both = tmp_path / f"both.{ext}"
        both.write_text("".join((tmp_path / f"day{i}.{ext}").read_text() for i in range(2)))
        mtime = os.stat(tmp_path / f"day1.{ext}").st_mtime  # like the archive: dates the year
        os.utime(both, (mtime, mtime))
    out = tmp_path / "replayed"
    subprocess.run([sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", days[0].tz,
                    "--host", days[0].host, "--out", str(out), str(tmp_path / "both.log"),
                    str(tmp_path / "both.dpns.log")], check=True, env=parser_env)

    def linked(path, key, columns):
        with open(path) as f:
            return {tuple(row[k] for k in key): tuple(row[c] for c in columns)
                    for row in csv.DictReader(f)}

    for kind, key, columns in (("requests", ("token",), ("ns_calls", "ns_s")),
                               ("calls", ("daemon", "thread", "started"), ("token",))):
        ours = linked(out / f"{kind}.csv", key, columns)
        truth = {}
        for i in range(2):
            truth.update(linked(tmp_path / f"day{i}.{kind}.csv", key, columns))
        assert ours == truth and len(truth) > 2900, kind
