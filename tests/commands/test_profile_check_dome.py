"""`dpmstream profile check` judges DOME logs like the DPM daemons' (docs/dome.md): a
simulated DOME log fits its profile (exit 0), other programs' lines counted apart; a
reworded `Exiting` line is a missing required role, a reworded call start makes every
`Exiting` a stray end: WARNING and exit 1."""

from __future__ import annotations

import csv
import re

import pytest

from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome

from tests.helpers import dpmstream_in_process


def check(*args, text=True):
    """The check as run on the node: in its zone (the simulator's), as /etc/localtime
    would give it there (TZ, read by parsers/clock.load_zone as the check runs). A
    whole-second stamp is local time, and the join of a putdone to its put compares it
    with the PFN's UTC epoch. In this process (tests/helpers.py dpmstream_in_process)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", DomeConfig().tz)
        return dpmstream_in_process("profile", "check", *map(str, args), text=text)


@pytest.fixture(scope="module", params=["tid", "notid"])
def site(request, tmp_path_factory):
    cfg = DomeConfig(envelope="messages", generation=request.param, duration=240.0, disk_down_at=60.0,
                     disk_down_s=70.0, restart_at=None, gap_at=None)
    return simulate_dome(cfg, tmp_path_factory.mktemp("dome") / "site")


def reworded(src, dst, pattern, replacement) -> int:
    text = src.read_text(encoding="utf-8")
    new, n = re.subn(pattern, replacement, text)
    dst.write_text(new, encoding="utf-8")
    return n


def test_a_simulated_dome_log_fits_its_profile_with_exit_0(site):
    head = site.logs["dpmhead01"]
    done = check(head)
    assert done.returncode == 0, done.stdout + done.stderr
    name = "dmlite-dome" if site.config.generation == "tid" else "dmlite-dome-notid"
    assert f"profile {name} (DOME): matched" in done.stdout and "WARNING" not in done.stdout
    foreign = site.summary["foreign_lines"]["dpmhead01"]
    assert foreign and f"lines, {foreign} lines of other programs" in done.stdout
    assert "required roles: call " in done.stdout
    if site.config.generation == "tid":
        assert "stray ends 0 (0 first on their thread), calls opened again before their Exiting 0" in done.stdout


def test_a_reworded_exiting_line_is_a_missing_required_role(site, tmp_path):
    log = tmp_path / "head.log"
    assert reworded(site.logs["dpmhead01"], log, r"Exiting: code: (\d+)", r"Leaving with HTTP \1") > 200
    done = check(log)
    assert done.returncode == 1
    warning = done.stdout[done.stdout.index("WARNING"):]
    assert "does not fit this DOME log" in warning and "role `returns` (call ends): no line" in warning


def test_a_reworded_call_start_makes_every_exiting_a_stray_end(tmp_path):
    result = simulate_dome(DomeConfig(duration=120.0, disk_down_at=None, restart_at=None, gap_at=None,
                                      accept_lines=False), tmp_path / "site")
    log = tmp_path / "head.log"
    assert reworded(result.logs["dpmhead01"], log, r"clientdn: '", "caller: '") > 200
    done = check(log, "--profile", "dmlite-dome")
    assert done.returncode == 1
    assert re.search(r"stray returns: \d+ of \d+ `returns` lines", done.stdout)


def test_a_dpm_profile_check_of_a_dome_log_without_dome_profiles_finds_no_daemon(site):
    done = check(site.logs["dpmhead01"], "--profile", "lcgdm-dpm")
    assert done.returncode == 1 and "no line of any daemon" in done.stdout


def test_a_dome_profile_check_of_a_dpm_log_names_the_dome_profile(tmp_path):
    log = tmp_path / "dpm.log"
    log.write_text("08/12 14:31:43.101 12345,3 dpm_srv_ping: DP092 - ping request by /CN=x (1,2) from h\n")
    done = check(log, "--profile", "dmlite-dome")
    assert done.returncode == 1 and "dmlite-dome (DOME)" in done.stdout


def test_profile_list_and_show_name_the_dome_profiles():
    listed = dpmstream_in_process("profile", "list", text=True)
    assert listed.returncode == 0
    assert re.search(r"^dmlite-dome +family=dome ", listed.stdout, re.M)
    assert re.search(r"^dmlite-dome-notid +family=dome ", listed.stdout, re.M)
    shown = dpmstream_in_process("profile", "show", "dmlite-dome", text=True)
    assert shown.returncode == 0 and "family: dome" in shown.stdout
    assert "envelope (traditional): " in shown.stdout and "  put_selected " in shown.stdout


# -- the join of puts and putdones, through the DOME reassembly (docs/dome.md section 6) --

@pytest.fixture(scope="module")
def head_log(tmp_path_factory):
    result = simulate_dome(DomeConfig(duration=300.0, rate=4.0, disk_down_at=None, restart_at=None,
                                      gap_at=None), tmp_path_factory.mktemp("join") / "site")
    return result


def test_a_simulated_head_log_joins_its_puts_and_putdones_with_no_warning(head_log):
    done = check(head_log.logs["dpmhead01"], "--profile", "dmlite-dome")
    assert done.returncode == 0, done.stdout
    line = next(x for x in done.stdout.splitlines() if "puts (reassembled):" in x)
    joined = int(re.search(r"joined to a putdone (\d+)", line).group(1))
    with open(head_log.paths["puts"], newline="", encoding="utf-8") as fh:
        truth = [r for r in csv.DictReader(fh) if r["putdone_head_time"]]
    # Every put whose putdone the head logged, within 1%: the truth's join also reads the
    # disk nodes' lines, which the check of one file has not.
    assert len(truth) > 500 and abs(joined - len(truth)) <= 0.01 * len(truth)
    assert "orphan putdones 0 of" in line


def test_a_disk_nodes_log_alone_is_not_judged_for_orphan_putdones(head_log):
    done = check(head_log.logs["dpmdisk01"], "--profile", "dmlite-dome")
    assert done.returncode == 0, done.stdout
    assert re.search(r"puts \(reassembled\): 0, 0 with", done.stdout)


def test_a_misread_selected_fs_line_makes_orphan_putdones_a_warning(head_log, tmp_path):
    """The head's `Selected fs` line names the filesystem under which the PFN lies; a
    profile reading a wrong server there (here the line reworded to name another host)
    joins no putdone: orphans all through the file."""
    log = tmp_path / "head.log"
    assert reworded(head_log.logs["dpmhead01"], log, r"Selected fs: '([^:']+):", r"Selected fs: 'elsewhere:") > 500
    done = check(log, "--profile", "dmlite-dome")
    assert done.returncode == 1, done.stdout
    warning = done.stdout[done.stdout.index("WARNING"):]
    assert re.search(r"orphan putdones: \d+ of \d+ putdone lines \(100\.0%\) joined no put", warning)


def test_unrecognised_putdone_lines_are_puts_never_joined(head_log, tmp_path):
    log = tmp_path / "head.log"
    assert reworded(head_log.logs["dpmhead01"], log, r"dome_putdone_head :  server:",
                    "dome_putdone_head :  host:") > 500
    done = check(log, "--profile", "dmlite-dome")
    assert done.returncode == 1, done.stdout
    assert re.search(r"puts never joined: none of \d+ puts met a putdone line", done.stdout)
