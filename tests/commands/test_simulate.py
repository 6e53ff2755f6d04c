"""`dpmstream simulate` as a user runs it (through the entry point's function, in this
process: tests/test_cli.py holds the program itself to the same output)."""

from __future__ import annotations

import csv

from dpmstream.parsers.records import REQUEST_COLUMNS
from tests.helpers import dpmstream_in_process
from tests.simulator.test_identities import CREAT


def run_cli(*args):
    """`dpmstream simulate ARGS` in this process (tests/helpers.py dpmstream_in_process)."""
    return dpmstream_in_process("simulate", *args, text=True)


def test_simulate_writes_the_four_files_and_prints_a_summary(tmp_path):
    prefix = tmp_path / "out" / "demo"
    done = run_cli("--out", str(prefix), "--requests", "300", "--get-fraction", "0.3",
                   "--sthreads", "70", "--seed", "7")
    assert done.returncode == 0, done.stderr
    for suffix in (".log", ".dpns.log", ".requests.csv", ".calls.csv"):
        assert (tmp_path / "out" / f"demo{suffix}").stat().st_size > 0
    with open(f"{prefix}.requests.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == REQUEST_COLUMNS and len(rows) >= 290
    assert {r["op"] for r in rows} == {"put", "get"}
    assert "requests" in done.stdout and "mean s:" in done.stdout
    assert f"{prefix}.log:" in done.stdout


def test_options_override_the_chosen_scenario(tmp_path):
    done = run_cli("--out", str(tmp_path / "r"), "--scenario", "restart", "--requests", "200",
                   "--restart-at", "2", "--pid", "4321", "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    head = (tmp_path / "r.log").read_text().splitlines()[0]
    assert head.endswith("  4321 dpm_serv: started")
    assert "dpm_serv: started" in (tmp_path / "r.log").read_text().split(" 4321 dpm_serv: started", 1)[1]


def test_bad_settings_exit_2_with_a_clear_message(tmp_path):
    done = run_cli("--out", str(tmp_path / "x"), "--tz", "Nowhere/Atlantis")
    assert done.returncode == 2 and "Nowhere/Atlantis" in done.stderr
    done = run_cli("--out", str(tmp_path / "x"), "--get-fraction", "1.5")
    assert done.returncode == 2 and "get-fraction must be within 0..1" in done.stderr
    done = run_cli("--out", str(tmp_path / "x"), "--start", "yesterday")
    assert done.returncode == 2 and "--start" in done.stderr
    assert not (tmp_path / "x.log").exists()


def test_issue11_knobs_are_options_and_scenarios(tmp_path):
    done = run_cli("--out", str(tmp_path / "s"), "--scenario", "mixed-syslog", "--requests", "150",
                   "--stray-lines", "3", "--stray-pid", "4444", "--future-lines", "1",
                   "--clock-step-at", "1", "--clock-step-s", "5")
    assert done.returncode == 0, done.stderr
    messages = (tmp_path / "s.messages").read_text()
    assert " dpm: " in messages and " dpns: " in messages
    assert "  4444,0 dpm_srv_ping: DP092 - ping request by " in (tmp_path / "s.log").read_text()
    assert f"{tmp_path / 's.messages'}:" in done.stdout
    assert "another process (pid 4444): 2 pings, 1 main-thread lines" in done.stdout
    assert "clock stepped back 5 s at 1 s" in done.stdout
    with open(tmp_path / "s.requests.csv", newline="") as fh:
        assert {r["end_reason"] for r in csv.DictReader(fh)} <= {"line", "input_end"}


def test_an_overlap_needs_a_restart_and_a_stray_pid_its_own(tmp_path):
    done = run_cli("--out", str(tmp_path / "x"), "--restart-overlap", "2")
    assert done.returncode == 2 and "restart-overlap needs restart-at" in done.stderr
    done = run_cli("--out", str(tmp_path / "x"), "--stray-lines", "2", "--stray-pid", "12345")
    assert done.returncode == 2 and "stray pid must differ" in done.stderr
    done = run_cli("--out", str(tmp_path / "x"), "--scenario", "overlap-restart", "--requests", "300",
                   "--quiet")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "x.messages").exists()


def test_simulate_takes_dirs_and_a_dpns_gap_on_the_command_line(tmp_path):
    done = run_cli("--quiet", "--out", str(tmp_path / "s"), "--requests", "100", "--dirs", "5",
                   "--dpns-gap", "2:4")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.dpns.log").read_text()
    assert len(set(CREAT.findall(text))) == 5
    bad = run_cli("--out", str(tmp_path / "t"), "--dpns-gap", "4:2")
    assert bad.returncode == 2 and "dpns-gap" in bad.stderr


def _mean_polls(requests_csv) -> float:
    with open(requests_csv, newline="") as fh:
        polls = [int(r["polls"]) for r in csv.DictReader(fh) if r["polls"]]
    return sum(polls) / len(polls)


def test_clients_poll_faster_with_the_poll_options(tmp_path):
    common = ("--quiet", "--requests", "300", "--scenario", "heavy")
    assert run_cli("--out", str(tmp_path / "backoff"), *common).returncode == 0
    fast = run_cli("--out", str(tmp_path / "fast"), *common, "--poll-first-ms", "25",
                   "--poll-factor", "1", "--poll-max-ms", "25")
    assert fast.returncode == 0, fast.stderr
    assert _mean_polls(tmp_path / "fast.requests.csv") > 2 * _mean_polls(tmp_path / "backoff.requests.csv")
    bad = run_cli("--out", str(tmp_path / "x"), "--poll-factor", "0.5")
    assert bad.returncode == 2 and "poll-factor must be >= 1" in bad.stderr


def test_both_simulators_make_the_folder_their_prefix_names(tmp_path):
    for extra in (["--requests", "20"], ["--dome", "--duration", "60"]):
        prefix = tmp_path / ("dome" if extra else "dpm") / "new" / "site"
        done = run_cli("--out", str(prefix), "--quiet", *extra)
        assert done.returncode == 0, done.stderr
        assert any(prefix.parent.glob("site*.log")), sorted(prefix.parent.iterdir())
