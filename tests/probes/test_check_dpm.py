"""probes/check_dpm.py: the probe's entry point runs on a site install without
dpmstream.streams, from either source."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.probes.test_sources_log import TZ
from tests.probes.test_sources_prometheus import CHECK_DPM, check_dpm_in_process, check_dpm_run


_NO_STREAMS = """
import sys

class NoStreams:
    def find_spec(self, name, path=None, target=None):
        if name == "dpmstream.streams" or name.startswith("dpmstream.streams."):
            raise ImportError(f"No module named {name!r} (blocked: a site install of the probe)")
        return None

sys.meta_path.insert(0, NoStreams())
from dpmstream.probes.check_dpm import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("source", ["log", "prometheus"])
def test_the_probe_runs_without_dpmstream_streams(source, long_log, tmp_path):
    args = (["--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m"] if source == "log"
            else ["--prometheus", "http://127.0.0.1:9", "-t", "3"])
    done = subprocess.run([sys.executable, "-c", _NO_STREAMS, *args], capture_output=True,
                          text=True, timeout=60)
    assert "No module named" not in done.stdout + done.stderr
    if source == "log":
        assert done.returncode == 0 and done.stdout.startswith("DPM OK"), done.stdout
    else:  # nothing listens on port 9: the probe itself ran to its answer
        assert done.returncode == 3 and "cannot reach Prometheus" in done.stdout, done.stdout


def test_the_probe_process_answers_as_its_function_run_in_process_does(long_log, tmp_path):
    """check_dpm is probes.check_dpm.main and nothing else: the same exit code and output
    as check_dpm_run, which the probe's other tests call (an answer with -v, a refused
    value, a missing file)."""
    log = str(long_log) + ".log"
    for args in (["--log", log, "--tz", TZ, "--window", "10m", "-v", "-w", "proc:p95=~:0.01"],
                 ["--log", log, "--window", "soon"], ["--log", str(tmp_path / "none")]):
        real = subprocess.run([CHECK_DPM, *args], capture_output=True, text=True, timeout=60)
        in_process = check_dpm_run(*args)
        assert real.stdout.startswith("DPM "), (args, real.stdout)
        assert (real.returncode, real.stdout) == (in_process.returncode, in_process.stdout), args


def _usage_error(*args: str) -> tuple[int, list[str]]:
    """The probe's exit code and output lines, run in this process (what it says, not its
    process: test_the_help_lists_every_dome_threshold_once runs the entry point)."""
    done = check_dpm_run(*args)
    return done.returncode, done.stdout.splitlines()


@pytest.mark.parametrize("args, named", [
    (["--request-timeout", "-1"], "argument --request-timeout: bad duration '-1': must be positive"),
    (["--request-timeout", "0"], "argument --request-timeout: bad duration '0': must be positive"),
    (["--window", "99999999999h"], "argument --window: '99999999999h' is longer than --window's bound of 366d"),
    (["--lookback", "400d"], "argument --lookback: '400d' is longer than --lookback's bound of 366d"),
    (["--max-age", "1e9d"], "argument --max-age: '1e9d' is longer than --max-age's bound of 36500d"),
    (["--window", "soon"], "argument --window: bad duration 'soon'"),
    (["-t", "0"], "argument -t/--timeout: must be 1 to 3600 seconds, not 0"),
    (["-t", "99999"], "argument -t/--timeout: must be 1 to 3600 seconds, not 99999"),
    (["--host", "("], "argument --host: bad regex '(': missing ), unterminated subpattern"),
    (["--op", "put["], "argument --op: bad regex 'put[': unterminated character set"),
    (["--ns-daemons", "*"], "argument --ns-daemons: bad regex '*': nothing to repeat"),
    (["--last-line-year", "0"], "argument --last-line-year: must be 1970 to 2100, not 0"),
    (["--year", "99999"], "argument --year: must be 1970 to 2100, not 99999"),
])
@pytest.mark.parametrize("source", ["--log", "--prometheus"])
def test_a_bad_option_value_is_one_unknown_line_naming_it(args, named, source, tmp_path):
    target = str(tmp_path / "log") if source == "--log" else "http://127.0.0.1:9"
    rc, lines = _usage_error(source, target, *args)
    assert rc == 3 and len(lines) == 1, lines
    assert lines[0].startswith(f"DPM UNKNOWN - {named}"), lines
    assert "Error" not in lines[0] and "Traceback" not in lines[0]


def test_the_request_timeout_is_named_as_in_the_commands_and_takes_a_duration(long_log):
    log = ["--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m"]
    rc, _, default = check_dpm_in_process(*log)
    rc_unit, _, unit = check_dpm_in_process(*log, "--request-timeout", "1s")
    rc_bare, _, bare = check_dpm_in_process(*log, "--request-timeout", "1")
    assert rc == rc_unit == rc_bare == 0
    assert unit == bare  # a bare number is seconds, as in `dpmstream replay --request-timeout`
    # one second of event time: requests waiting longer are incomplete, unlike by default
    assert float(unit["incomplete_rate"][0]) > float(default["incomplete_rate"][0])
    assert "--request-timeout DURATION" in check_dpm_run("--help").stdout


@pytest.mark.parametrize("args, named", [
    (["-w", "dome_error_rate=0.05"], "dome_error_rate: thresholds of a DOME site: give --dome"),
    (["--dome", "-c", "proc:p95=2", "-w", "ns:statg:p95=1"],  # warnings named first
     "ns_statg_p95, proc_p95: thresholds of the legacy daemons' requests and name-server "
     "calls, which a DOME site (--dome) has not"),
])
def test_dome_and_legacy_thresholds_are_not_mixed(args, named):
    rc, lines = _usage_error("--prometheus", "http://127.0.0.1:9", *args)
    assert (rc, lines) == (3, [f"DPM UNKNOWN - {named}"])


def test_the_help_lists_every_dome_threshold_once():
    from dpmstream.probes import thresholds as th
    text = subprocess.run([CHECK_DPM, "--help"], capture_output=True, text=True).stdout
    for name, (what, example) in th.DOME_SUBJECTS.items():
        assert text.count(f"{name}=RANGE") == 1 and what in text and example in text
    assert "--dome" in text


def test_the_dome_log_probe_runs_without_dpmstream_streams(tmp_path):
    from tests.metrics_stack import simulate
    prefix = simulate(tmp_path / "site", "--dome", "--duration", "120")
    done = subprocess.run([sys.executable, "-c", _NO_STREAMS, "--dome", "--log",
                           f"{prefix}.dpmhead01.log", "--tz", TZ, "--last-line-year", "2017"],
                          capture_output=True, text=True, timeout=60)
    assert "No module named" not in done.stdout + done.stderr
    assert done.returncode == 0 and done.stdout.startswith("DOME OK - "), done.stdout


def test_several_logs_without_dome_are_one_unknown_line_naming_the_rule(tmp_path):
    rc, lines = _usage_error("--log", str(tmp_path / "a"), "--log", str(tmp_path / "b"))
    assert (rc, lines) == (3, ["DPM UNKNOWN - --log given 2 times: only a DOME site's logs "
                               "(--dome) are read together; give one DPM, DPNS or SRM log"])


def test_a_dome_log_pattern_matching_no_file_is_unknown_naming_it(tmp_path):
    pattern = str(tmp_path / "dmlite" / "*.log")
    rc, lines = _usage_error("--dome", "--log", pattern)
    assert (rc, lines) == (3, [f"DOME UNKNOWN - --log {pattern}: no file matches"])


def test_t_counts_from_the_start_of_the_process_not_from_the_probes_import():
    # Nagios counts -t from its fork: the interpreter's start and what ran before the
    # probe's module was imported (here a 1 s pause, under load the imports) is in it.
    done = subprocess.run(
        [sys.executable, "-c", "import time; time.sleep(1.0); before = time.monotonic()\n"
         "from dpmstream.probes import check_dpm\n"
         "print(before - check_dpm._STARTED)"],
        capture_output=True, text=True, timeout=60, check=True)
    assert float(done.stdout) >= 1.0
