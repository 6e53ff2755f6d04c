"""`dpmstream profile check` tells whether a profile fits a log, not only whether it
matches its lines: a required role with no line, or a reassembly full of stray returns and
orphans, is a WARNING and exit status 1, naming the lines that fell to the catch-all."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from dpmstream.parsers import fastpath

from tests.helpers import DATA, REAL, dpmstream_in_process
from tests.parsers.test_reassembly import REFERENCE_PUT

# Every test runs with both line parsers in `make test`. `make check` runs the pure one
# only where the compiled one is not built: that both say the same on these kinds of log
# (reworded, mixed, sliced, real, odd lines) is what test_profile_check_compiled.py checks.
PARSERS = ["compiled", pytest.param("pure", marks=pytest.mark.slow if fastpath.available() else ())]


def check(*args, parser="pure"):
    """`dpmstream profile check ARGS` with that line parser: the compiled one in this
    process (tests/helpers.py dpmstream_in_process: it is this process's parser, as
    fastpath.available() says), the pure one in a process started with
    DPMSTREAM_PURE_PYTHON=1 (read as the modules load)."""
    if parser == "compiled":
        if not fastpath.available():
            pytest.skip("the compiled line parser is not built (no Rust toolchain at install)")
        return dpmstream_in_process("profile", "check", *map(str, args), text=True)
    env = {**os.environ, "DPMSTREAM_PURE_PYTHON": "1"}
    return subprocess.run([sys.executable, "-m", "dpmstream", "profile", "check", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A simulated head node: 300 requests (puts and gets) and their name-server calls."""
    prefix = tmp_path_factory.mktemp("sim") / "head"
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--requests", "300",
                                "--get-fraction", "0.3", "--seed", "5", "--quiet")
    assert done.returncode == 0, done.stderr
    return prefix


def rewritten(src, dst, pattern, replacement):
    """dst: the lines of src with `pattern` replaced; returns how many lines changed."""
    changed = 0
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        for text in fin:
            new = re.sub(pattern, replacement, text)
            changed += new != text
            fout.write(new)
    return changed


def warning_block(stdout):
    assert "WARNING" in stdout
    return stdout[stdout.index("WARNING"):]


@pytest.mark.parametrize("parser", PARSERS)
def test_a_simulated_log_fits_with_exit_0_and_no_warning(simulated, parser):
    for path, daemon, required in [
            (f"{simulated}.log", "lcgdm-dpm", ("call", "returns", "token", "status", "slow_start")),
            (f"{simulated}.dpns.log", "lcgdm-ns", ("call", "returns"))]:
        done = check(path, parser=parser)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "WARNING" not in done.stdout and "MISSING" not in done.stdout
        assert f"fit of profile {daemon}" in done.stdout
        counts = re.search(r"required roles: (.*)", done.stdout).group(1)
        found = dict(re.findall(r"(\w+) (\d+)", counts))
        assert tuple(found) == required and all(int(n) > 0 for n in found.values()), counts
        assert re.search(r"orphans 0, stray returns 0, calls without returns 0", done.stdout)


@pytest.mark.parametrize("parser", PARSERS)
def test_reworded_call_lines_fall_to_other_and_are_named_with_exit_1(simulated, tmp_path, parser):
    log = tmp_path / "reworded.log"
    n = rewritten(f"{simulated}.log", log, r"DP092 - (\w+) request by", r"DP092 - \1 req. from DN")
    assert n > 300
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "profile lcgdm-dpm: matched 100.0%" in done.stdout  # what it used to stop at
    warning = warning_block(done.stdout)
    assert "profile lcgdm-dpm does not fit" in warning
    assert "role `call` (call opens): no line" in warning
    # the catch-all lines that look like call opens, counted, with an example
    puts = re.search(r"(\d+)  dpm_srv_put: DP092 - put req\. from DN <DN> \(<IDS>\) from <HOST>"
                     r"  \(fell to other\)\n\s+e\.g\. .*dpm_srv_put: DP092 - put req\. from DN /",
                     warning)
    assert puts and int(puts.group(1)) > 100
    stray = re.search(r"stray returns: (\d+) of (\d+) `returns` lines", warning)
    # every call's returns, less at most one per thread (which a file cut mid-call shows)
    assert stray and n - 50 <= int(stray.group(1)) <= n
    assert re.search(r"orphans: none of \d+ requests was seen from its put/get", warning)
    # the report itself lists the catch-all shapes, marked
    assert re.search(r"\d+  other   dpm_srv_put: DP092 - put req\. from DN .*\[looks like call\]",
                     done.stdout)


@pytest.mark.parametrize("parser", PARSERS)
def test_reworded_name_server_call_lines_are_named_with_exit_1(simulated, tmp_path, parser):
    log = tmp_path / "reworded.dpns.log"
    n = rewritten(f"{simulated}.dpns.log", log, r"NS092 - (\w+) request by", r"NS092 - \1 req. from DN")
    assert n > 250
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = warning_block(done.stdout)
    assert "profile lcgdm-ns does not fit this dpns log" in warning
    assert "role `call` (call opens): no line" in warning
    assert re.search(r"\d+  Cns_srv_creat: NS092 - creat req\. from DN <DN> .*  \(fell to other\)", warning)
    assert re.search(r"stray returns: \d+ of \d+ `returns` lines", warning)


@pytest.mark.parametrize("parser", PARSERS)
def test_reworded_returns_lines_are_a_missing_role_with_exit_1(simulated, tmp_path, parser):
    log = tmp_path / "reworded.log"
    n = rewritten(f"{simulated}.log", log, r"returns (-?\d+)$", r"return code \1")
    assert n > 300
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = warning_block(done.stdout)
    assert "role `returns` (call ends): no line" in warning
    assert re.search(r"\d+  dpm_srv_put: return code N  \(fell to unmatched\)", warning)
    assert re.search(r"calls without returns: \d+ of \d+ call opens", warning)


@pytest.mark.parametrize("parser", PARSERS)
def test_only_the_put_call_reworded_shows_in_stray_returns(simulated, tmp_path, parser):
    # every required role still has lines (the other calls' DP092): only the reassembly
    # tells that the puts are lost
    log = tmp_path / "reworded.log"
    n = rewritten(f"{simulated}.log", log, r"DP092 - put request by", r"DP092 - put req. from DN")
    assert n > 100
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = warning_block(done.stdout)
    assert "role `" not in warning
    stray = re.search(r"stray returns: (\d+) of (\d+) `returns` lines", warning)
    # each put's returns, less at most one per thread (which a file cut mid-call shows)
    assert stray and n - 20 <= int(stray.group(1)) <= n


@pytest.mark.parametrize("parser", PARSERS)
def test_put_and_get_token_lines_reworded_leave_no_request_seen_from_its_start(
        simulated, tmp_path, parser):
    log = tmp_path / "reworded.log"
    n = rewritten(f"{simulated}.log", log, r"DP098 - (put|get) (\d+) ([0-9a-f-]{36})",
                  r"DP098 - \1 token \3 files \2")
    assert n > 250
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = warning_block(done.stdout)
    assert re.search(r"orphans: none of \d+ requests was seen from its put/get", warning)
    assert "role `" not in warning and "stray returns" not in warning
    # the token lines fell to the catch-all `detail`, and are listed as looking like tokens
    assert re.search(r"\d+  detail  dpm_srv_put: DP098 - put token <UUID> files N  "
                     r"\[looks like token\]", done.stdout)


@pytest.fixture(scope="module")
def long_simulated(tmp_path_factory):
    """Two minutes of a head node at 10 requests a second: long enough to tell orphans
    from a file that begins mid-way."""
    prefix = tmp_path_factory.mktemp("long") / "head"
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--rate", "10", "--duration",
                                "120", "--get-fraction", "0.3", "--seed", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    return prefix


@pytest.mark.parametrize("parser", PARSERS)
def test_a_slice_beginning_and_ending_mid_request_fits(long_simulated, tmp_path, parser):
    with open(f"{long_simulated}.log", encoding="utf-8") as f:
        lines = f.read().splitlines()
    log = tmp_path / "slice.log"
    log.write_text("\n".join(lines[len(lines) // 3: 2 * len(lines) // 3]) + "\n")
    done = check(log, parser=parser)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout
    # it does begin and end mid-way: all explained by the cuts
    seen = re.search(r"orphans (\d+) \((\d+) near the start\), stray returns (\d+) \((\d+) first "
                     r"on their thread\), calls without returns (\d+) \((\d+) at the end of input\)",
                     done.stdout)
    assert seen, done.stdout
    orphans, early, stray, first, noreturn, at_end = map(int, seen.groups())
    assert orphans > 10 and early == orphans
    assert stray > 0 and first == stray
    assert noreturn > 0 and at_end == noreturn


@pytest.mark.parametrize("parser", PARSERS)
def test_get_token_lines_reworded_make_orphans_all_through_a_long_log(long_simulated, tmp_path, parser):
    log = tmp_path / "reworded.log"
    n = rewritten(f"{long_simulated}.log", log, r"DP098 - get (\d+) ([0-9a-f-]{36})",
                  r"DP098 - get token \2 files \1")
    assert n > 200
    done = check(log, parser=parser)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = warning_block(done.stdout)
    orphans = re.search(r"orphans: (\d+) of (\d+) requests \([\d.]+%\) were first seen after "
                        r"their put/get, past the file's start", warning)
    assert orphans and int(orphans.group(1)) > 0.9 * n
    assert "role `" not in warning and "stray returns" not in warning


@pytest.mark.parametrize("parser", PARSERS)
def test_a_file_mixing_dpm_and_name_server_lines_is_judged_per_daemon(simulated, tmp_path, parser):
    lines = []
    for path in (f"{simulated}.log", f"{simulated}.dpns.log"):
        with open(path, encoding="utf-8") as f:
            lines += f.read().splitlines()
    log = tmp_path / "mixed.log"
    log.write_text("\n".join(sorted(lines, key=lambda text: text[:18])) + "\n")
    done = check(log, parser=parser)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fit of profile lcgdm-dpm" in done.stdout and "fit of profile lcgdm-ns" in done.stdout
    assert done.stdout.count("orphans 0, stray returns 0, calls without returns 0") == 2
    assert "WARNING" not in done.stdout


def reword_as_the_site_does(text):
    """The wording tests/data/profiles/site-reworded.toml reads (see test_profiles.py)."""
    text = re.sub(r"\[[\d.]+\] \((\S+)\): request accepted", r"connection from \1 accepted", text)
    text = re.sub(r"request by (.*) \((\d+),[\d,]+\) from (\S+)",
                  r"requested by \1 on behalf of uid \2 from host \3", text)
    text = re.sub(r"processing (put|get) request", r"slow thread picked \1 request", text)
    text = text.replace("request status DPM_", "answering ")
    return re.sub(r"returns (-?\d+)$", r"exit code \1", text)


@pytest.mark.parametrize("parser", PARSERS)
def test_a_site_wording_fits_the_site_profile_and_not_the_bundled_one(simulated, tmp_path, parser):
    log = tmp_path / "site.log"
    with open(f"{simulated}.log", encoding="utf-8") as f:
        log.write_text("".join(reword_as_the_site_does(t) + "\n" for t in f.read().splitlines()))
    site = check(log, "--profile", f"{DATA}/profiles/site-reworded.toml", parser=parser)
    assert site.returncode == 0, site.stdout + site.stderr
    assert "WARNING" not in site.stdout and "fit of profile site-reworded" in site.stdout
    bundled = check(log, "--profile", "lcgdm-dpm", parser=parser)
    assert bundled.returncode == 1
    warning = warning_block(bundled.stdout)
    for role in ("call", "returns", "status", "slow_start"):
        assert f"role `{role}`" in warning, role


def test_a_file_without_any_daemon_line_exits_1_with_a_clear_message(tmp_path):
    log = tmp_path / "messages"
    log.write_text("Aug 12 14:31:43 dpmhead01 sshd[811]: Accepted publickey for root\n" * 50)
    done = check(log)
    assert done.returncode == 1
    assert f"WARNING: {log}: no line of any daemon: none of 50 lines" in done.stdout
    empty = tmp_path / "empty.log"
    empty.write_text("")
    done = check(empty)
    assert done.returncode == 1 and "none of 0 lines" in done.stdout


def test_an_unreadable_file_is_an_error_exit_2(tmp_path):
    done = check(tmp_path / "absent.log")
    assert done.returncode == 2 and "absent.log" in done.stderr


def real_files():
    lfc = os.path.join(REAL, "lfc")
    return [os.path.join(lfc, n) for n in sorted(os.listdir(lfc))] + [
        os.path.join(REAL, "srmv2-manpage-example.log")]


@pytest.mark.parametrize("parser", PARSERS)
def test_the_real_name_server_and_srm_lines_fit(parser):
    done = check(*real_files(), parser=parser)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout and "MISSING" not in done.stdout
    assert done.stdout.count("fit of profile lcgdm-ns") == len(real_files()) - 1
    assert "fit of profile lcgdm-srm" in done.stdout


@pytest.mark.parametrize("parser", PARSERS)
def test_the_real_name_server_lines_together_show_both_required_roles(tmp_path, parser):
    log = tmp_path / "lfc.log"
    with open(log, "w", encoding="utf-8") as out:
        for path in real_files()[:-1]:
            with open(path, encoding="utf-8") as f:
                out.writelines(text + "\n" for text in f.read().splitlines())
    done = check(log, parser=parser)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = re.search(r"fit of profile lcgdm-ns .*\n    required roles: call (\d+), returns (\d+)\n",
                       done.stdout)
    assert counts and int(counts.group(1)) > 100 and int(counts.group(2)) > 100
    assert "MISSING" not in done.stdout and "too few to judge" not in done.stdout
    assert "WARNING" not in done.stdout


def test_profile_check_reports_role_shares_and_masked_unmatched_shapes(tmp_path):
    log = tmp_path / "dpm.log"
    lines = REFERENCE_PUT + [
        "08/12 14:31:46.000 12345,3 dpm_srv_put: quota exceeded for /dpm/cern.ch/home/atlas/f1 by 1234 bytes",
        "08/12 14:31:46.100 12345,4 dpm_srv_put: quota exceeded for /dpm/cern.ch/home/cms/f9 by 99 bytes",
        "not a log line at all",
    ]
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "dpmstream", "profile", "check", str(log)],
                         capture_output=True, text=True, check=True).stdout
    assert len(REFERENCE_PUT) == 20
    assert "profile lcgdm-dpm: matched  87.0%" in out  # 20 of 23 lines
    assert "best fit" in out.splitlines()[1]
    assert "        2  dpm_srv_put: quota exceeded for <PATH> by N bytes" in out
    assert re.search(r"slow_start\s+1\s+4\.3%", out)
