"""dpmstream/cli.py and the shared options (commands/common.py): one program, each command
registered with its own help; each option concept declared once, validated once, and a bad
value refused the same way everywhere: exit 2, one line naming the option and the value.

The commands run in this process, through the entry point's function (tests/helpers.py
dpmstream_in_process); test_the_entry_point_refuses_and_helps_as_the_function_does runs
the program itself and checks it says the same."""

import json
import os
import re
import subprocess
import sys

import pytest

from dpmstream.cli import COMMANDS, build_parser
from tests.commands.test_replay import dpmstream as dpmstream_process
from tests.helpers import dpmstream_in_process

# Every command that takes --profile/--tz, with the other arguments it needs to parse.
# The values are never used: a bad option stops the command before it reads or connects.
WITH_PROFILE_AND_TZ = {
    "replay": ["replay", "some.log"],
    "run": ["run", "--once", "some.log"],
    "report": ["report", "--out", "page.html", "some.log"],
    "whatif": ["whatif", "--out", "dir", "some.log"],
    "worker": ["worker", "--broker", "kafka://127.0.0.1:9"],
    "stack up": ["stack", "up", "--logs", "logs"],
}
# Every command that takes the reassembly caps and timeouts.
WITH_REASSEMBLY = {k: v for k, v in WITH_PROFILE_AND_TZ.items() if k != "stack up"}
# Every (sub)command's help whose declarations this module owns.
HELPS = [["replay"], ["run"], ["simulate"], ["profile"], ["profile", "check"],
         ["worker"], ["stack"], ["stack", "up"], ["stack", "down"]]


def dpmstream(*args, check=True):
    """`dpmstream ARGS`, in this process; it must succeed unless check=False."""
    res = dpmstream_in_process(*args)
    if check:
        assert res.returncode == 0, res.stderr.decode()
    return res


def refused(*args, cwd=None):
    """Run a command that must refuse its options: exit 2, exactly one line on stderr."""
    res = dpmstream(*args, check=False)
    err = res.stderr.decode()
    assert res.returncode == 2, (args, res.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    assert res.stdout == b""
    return err


def test_every_subcommand_has_help():
    for command in ("replay", "run", "simulate", "profile", "worker", "stack"):
        out = dpmstream(command, "--help").stdout.decode()
        assert out.startswith("usage: dpmstream " + command), command
    assert b"profile" in dpmstream("--help").stdout


def test_the_entry_point_refuses_and_helps_as_the_function_does(tmp_path):
    # `python -m dpmstream` is cli.main and nothing else: the same exit code and the same
    # words on the same stream as the function the other tests here call in-process (a
    # help, a value refused by the parser, an input refused by the command).
    for args, code in ((["replay", "--help"], 0), (["replay", "--tz", "Mars/Olympus_Mons", "x"], 2),
                       (["run", "--once", str(tmp_path)], 2)):
        real, in_process = dpmstream_process(*args, check=False), dpmstream_in_process(*args)
        assert real.returncode == code and (real.stdout if code == 0 else real.stderr), args
        assert ((real.returncode, real.stdout, real.stderr)
                == (in_process.returncode, in_process.stdout, in_process.stderr)), args


@pytest.mark.parametrize("command", sorted(WITH_PROFILE_AND_TZ))
@pytest.mark.parametrize("option, value", [("--tz", "Mars/Olympus_Mons"),
                                           ("--profile", "no-such-profile")])
def test_a_bad_zone_or_profile_exits_2_naming_it_in_every_command(command, option, value):
    err = refused(*WITH_PROFILE_AND_TZ[command], option, value)
    assert option in err and value in err, err


def test_simulate_and_profile_check_refuse_bad_values_alike():
    assert "Mars/Olympus_Mons" in refused("simulate", "--out", "x", "--tz", "Mars/Olympus_Mons")
    assert "nope" in refused("profile", "check", "--profile", "nope", "some.log")


@pytest.mark.parametrize("command", sorted(WITH_REASSEMBLY))
@pytest.mark.parametrize("option, value", [
    ("--request-timeout", "inf"), ("--request-timeout", "nan"), ("--timeout", "inf"),
    ("--max-in-flight", "99999999999999999999"), ("--max-threads", "0"), ("--grace", "-1"),
    ("--grace", "1e400"),
])
def test_out_of_range_numbers_exit_2_not_an_internal_error(command, option, value):
    err = refused(*WITH_REASSEMBLY[command], option, value)
    assert "internal error" not in err
    assert value in err and option in err, err


@pytest.mark.parametrize("year", ["0", "99999", "-5", "twenty"])
@pytest.mark.parametrize("command", ["replay", "run", "report", "whatif"])
def test_a_year_the_dating_cannot_use_exits_2_naming_the_year(command, year):
    err = refused(*WITH_PROFILE_AND_TZ[command], "--year", year)
    assert "--year" in err and year in err and "wrong files" not in err


def test_the_year_help_says_which_line_it_dates_and_where_stdin_takes_it_from():
    out = " ".join(dpmstream("replay", "--help").stdout.decode().split())
    assert "year of the FIRST line read (1970..2100" in out
    assert "stdin has neither: give --year" in out


@pytest.mark.parametrize("option", ["--sasl-password-file", "--sasl-username", "--sasl-mechanism"])
def test_sasl_options_under_plaintext_exit_2_instead_of_being_ignored(tmp_path, option):
    value = {"--sasl-mechanism": "PLAIN"}.get(option, str(tmp_path / "pw"))
    (tmp_path / "pw").write_text("s3cret\n")
    for command in (["worker", "--broker", "kafka://127.0.0.1:9"],
                    ["replay", "--to-kafka", "kafka://127.0.0.1:9", "some.log"]):
        err = refused(*command, option, value)
        assert f"{option} needs --security-protocol SASL_PLAINTEXT or SASL_SSL" in err
        assert "s3cret" not in err


def test_a_tls_ca_file_without_tls_exits_2(tmp_path):
    (tmp_path / "ca.pem").write_text("")
    err = refused("worker", "--broker", "kafka://127.0.0.1:9", "--security-protocol",
                  "SASL_PLAINTEXT", "--ssl-cafile", str(tmp_path / "ca.pem"))
    assert "--ssl-cafile needs --security-protocol SSL or SASL_SSL" in err


def test_replay_and_worker_share_one_declaration_of_the_kafka_connection():
    def kafka_options(argv):
        parser = build_parser(argv)
        sub = parser._subparsers._group_actions[0].choices[argv[0]]
        return {opt: (a.default, a.choices) for a in sub._actions for opt in a.option_strings
                if opt.startswith(("--sasl", "--ssl", "--security"))}
    worker, replay = kafka_options(["worker"]), kafka_options(["replay"])
    assert worker == replay and len(worker) == 5


def test_kafka_options_without_to_kafka_exit_2():
    err = refused("replay", "--speed", "10", "--security-protocol", "SSL", "some.log")
    assert "--speed" in err and "--security-protocol" in err and "--to-kafka" in err


def test_replay_speed_must_be_a_finite_positive_number():
    for bad in ("0", "inf", "-2"):
        assert "--speed" in refused("replay", "--to-kafka", "kafka://127.0.0.1:9",
                                    "--speed", bad, "x.log")


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_shows_each_default_once_in_one_style(argv):
    out = dpmstream(*argv, "--help").stdout.decode()
    # Options' help entries: an indented line starting with '-' and its continuation lines.
    entries = re.split(r"\n  (?=-)", out)
    for entry in entries:
        flat = " ".join(entry.split())
        assert flat.count("(default") <= 1, flat
        assert "(default " not in flat, flat  # the one style is "(default: X)"
        assert not re.search(r"default: \d+\.0\)", flat), flat  # 3600, not 3600.0


def test_run_help_speaks_to_users_and_keeps_its_examples_whole():
    out = dpmstream("run", "--help").stdout.decode()
    assert "pipeline." not in out
    assert "dpmstream run --state /var/lib/dpmstream/run.state \\\n" in out
    assert "\n      --records /var/lib/dpmstream/records.jsonl /var/log/dpm/log" in out


def test_renamed_options_show_their_new_name_and_keep_the_old_one_hidden():
    renamed = {("replay",): [("--timeout", "--request-timeout"), ("--topic", "--lines-topic")],
               ("run",): [("--timeout", "--request-timeout")],
               ("worker",): [("--timeout", "--request-timeout")],
               ("stack", "up"): [("--topic", "--lines-topic")]}
    for command, pairs in renamed.items():
        out = dpmstream(*command, "--help").stdout.decode()
        for old, new in pairs:
            assert new in out and not re.search(rf"{old}\b(?!-)", out.replace(new, "")), (command, old)


@pytest.mark.parametrize("argv, dest, value", [
    (["replay", "--topic", "old.lines", "x"], "lines_topic", "old.lines"),
    (["replay", "--lines-topic", "new.lines", "x"], "lines_topic", "new.lines"),
    (["stack", "up", "--logs", "d", "--topic", "old.lines"], "lines_topic", "old.lines"),
    (["stack", "up", "--logs", "d", "--lines-topic", "new.lines"], "lines_topic", "new.lines"),
    (["run", "--timeout", "120", "x"], "timeout", 120.0),
    (["run", "--request-timeout", "120", "x"], "timeout", 120.0),
    (["worker", "--broker", "kafka://h:1", "--timeout", "5"], "timeout", 5.0),
])
def test_old_and_new_spellings_both_set_the_option(argv, dest, value):
    assert getattr(build_parser(argv).parse_args(argv), dest) == value


def test_the_old_and_new_timeout_spellings_give_the_same_records(tmp_path):
    from tests.commands.test_replay import LOG, write
    log = write(tmp_path / "log", LOG)
    common = ("replay", "--tz", "UTC", "--year", "2011", "--host", "head01")
    old = dpmstream(*common, "--timeout", "0.5", log).stdout
    new = dpmstream(*common, "--request-timeout", "0.5", log).stdout
    assert old == new and b"Requests" in new
    assert "--timeout" in refused(*common, "--timeout", "0", log)


def test_metrics_options_are_one_declaration_with_one_default():
    def metrics(argv):
        args = build_parser(argv).parse_args(argv)
        return args.metrics_port, args.metrics_bind, args.max_series
    assert (metrics(["run", "x"]) == metrics(["worker", "--broker", "kafka://h:1"])
            == (None, "127.0.0.1", 25_000))
    for command in (WITH_PROFILE_AND_TZ["run"], WITH_PROFILE_AND_TZ["worker"]):
        assert "--metrics-port" in refused(*command, "--metrics-port", "70000")
        assert "--max-series" in refused(*command, "--max-series", "0")


def test_run_refuses_a_directory_as_input_at_once(tmp_path):
    for mode in ([], ["--once"]):
        err = refused("run", *mode, str(tmp_path))
        assert f"{tmp_path}: is a directory" in err


@pytest.mark.parametrize("spelling", ["--lines-topic", "--topic"])
def test_the_rsyslog_drop_in_generator_names_the_topic_alike(spelling, capsys):
    from dpmstream.commands.stack import rsyslog
    assert rsyslog.main([spelling, "site.lines"]) == 0
    assert 'topic="site.lines"' in capsys.readouterr().out


def test_what_is_alive_when_the_process_ends_is_frozen_out_of_its_last_collections():
    # A fresh interpreter: its exit hook, registered before main, runs after main's
    # (atexit runs them last in, first out) and sees what the interpreter's last
    # collections will: frozen then, not when main returned (an in-process caller keeps
    # its collections), and once however many times main ran (gc.freeze counted).
    probe = ("import atexit, contextlib, gc, io\n"
             "calls, real = [], gc.freeze\n"
             "def freeze():\n"
             "    calls.append(1)\n"
             "    real()\n"
             "gc.freeze = freeze\n"
             "atexit.register(lambda: print('at exit', len(calls), gc.get_freeze_count() > 0))\n"
             "from dpmstream.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    codes = [main([]), main([])]\n"
             "print('after main', codes, len(calls), gc.get_freeze_count() > 0)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.splitlines() == ["after main [2, 2] 0 False", "at exit 1 True"], done.stderr


@pytest.mark.parametrize("columns", [None, "100", "0", "wide", "-5"])
def test_help_is_as_wide_as_shutil_says_the_terminal_is(monkeypatch, columns):
    # HelpFormatter reads the width as argparse's default does, without importing shutil.
    import shutil

    from dpmstream.commands.common import HelpFormatter, terminal_columns
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
    assert HelpFormatter("x")._width == shutil.get_terminal_size().columns - 2


def test_top_level_help_lists_every_command_without_importing_any_of_them():
    # A fresh interpreter, as a user's: `dpmstream --help` (and a name that is no command)
    # shows each command's name and help line from cli.COMMANDS, not from its module.
    probe = ("import json, sys\nfrom dpmstream.cli import COMMANDS, main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dpmstream.commands.')"
             " and m != 'dpmstream.commands.common')))")
    for argv, shown in ((["--help"], "stdout"), (["no-such-command"], "stderr")):
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                              text=True, timeout=120)
        assert json.loads(done.stdout.splitlines()[-1]) == [], argv
        out = " ".join(getattr(done, shown).split())
        for name, (_, help_text) in COMMANDS.items():
            assert name in out
            if shown == "stdout":
                assert f"{name} {help_text}" in out


def test_a_command_with_nothing_left_at_exit_ends_its_process_with_its_outputs_whole(tmp_path):
    # report, whatif and profile check end their process with os._exit once their outputs
    # are flushed (no interpreter teardown, issue 30); run as the program (main() reading
    # sys.argv, stdout a pipe: block-buffered), each says and writes what the same call in
    # process does, with its exit code, and an atexit hook of the process does not run.
    # A command without the declaration (replay) still ends through the interpreter.
    from tests.commands.test_report import BASE, FIRST, SECOND, write
    log = write(tmp_path / "dpm.log", FIRST + SECOND)
    probe = ("import atexit, sys\n"
             "atexit.register(print, 'teardown')\n"
             "sys.argv = ['dpmstream', *sys.argv[1:]]\n"
             "from dpmstream.cli import main\n"
             "raise SystemExit(main())\n")
    cases = (("report", "--no-whatif", *BASE, "--out", str(tmp_path / "{}.html"), log),
             ("report", *BASE, "--out", str(tmp_path / "no-such-dir" / "p.html"), log),
             ("profile", "check", log),
             ("replay", *BASE, "--out", str(tmp_path / "{}"), log))
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for case in cases:
        real = subprocess.run([sys.executable, "-c", probe, *(a.format("real") for a in case)],
                              capture_output=True, timeout=120, env=buffered)
        in_process = dpmstream_in_process(*(a.format("in") for a in case))
        assert ((real.returncode, real.stdout.replace(b"real", b"in"), real.stderr)
                == (in_process.returncode, in_process.stdout + (b"teardown\n" if case[0] == "replay"
                                                                else b""),
                    in_process.stderr)), case
        assert real.stdout or real.stderr, case
    made = re.compile(r"Made by dpmstream .*? UTC\.")   # the minute it was made
    assert (made.sub("", (tmp_path / "real.html").read_text())
            == made.sub("", (tmp_path / "in.html").read_text()))
    assert (tmp_path / "real" / "requests.csv").read_bytes() == (tmp_path / "in" / "requests.csv").read_bytes()
