"""What importing the report's modules costs: every report pays it on a cold start.

A dataclass compiles its generated methods (__init__, __repr__, __eq__) as its module is
imported, ~0.2-0.8 ms CPU each, and when the class has no docstring of its own it writes
one from inspect.signature, which costs as much again (issue 30); importing dataclasses
itself (inspect, ast, dis, tokenize) is ~31 M instructions. So the report's own classes,
the what-if's, the simulator's config and whatif's observations are plain classes
(parsers/plain.py), and neither a report nor a whatif imports dataclasses at all. Run in
a fresh interpreter, as a user's report is."""

import json
import subprocess
import sys

PROBE = """
import dataclasses, importlib, json, sys
made = []
real = dataclasses._process_class
def recorded(cls, *args, **kwargs):
    made.append((cls.__module__, cls.__qualname__, "__doc__" in vars(cls) and bool(cls.__doc__)))
    return real(cls, *args, **kwargs)
dataclasses._process_class = recorded
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({"made": made, "typing": "typing" in sys.modules}))
"""
REPORT = ("dpmstream.commands.report", "dpmstream.report.build", "dpmstream.report.sources",
          "dpmstream.report.whatif", "dpmstream.report.dome_page",
          "dpmstream.simulator.calibrate", "dpmstream.simulator.predict")
# whatif's own modules beyond the report's (observe.py: the parameters' observations)
WHATIF = ("dpmstream.commands.whatif", "dpmstream.simulator.observe", *REPORT)


def imported(modules=REPORT) -> dict:
    """What importing `modules` in a fresh interpreter did: the dataclasses made (module,
    name, has its own docstring), and whether typing was imported."""
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def dataclasses_made(modules=REPORT) -> list[tuple[str, str, bool]]:
    return [tuple(entry) for entry in imported(modules)["made"]]


PLAIN_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps("dataclasses" in sys.modules))
"""


def test_the_report_and_whatif_import_no_dataclasses():
    def imports_dataclasses(modules) -> bool:
        out = subprocess.run([sys.executable, "-c", PLAIN_PROBE, *modules],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    # a module known to make a dataclass (the DOME simulator's config): the probe sees it
    assert imports_dataclasses(("dpmstream.simulator.dome_config",)), \
        "the probe no longer sees dataclasses imported"
    assert imports_dataclasses(REPORT) is False
    assert imports_dataclasses(WHATIF) is False


def test_whatif_does_not_import_typing():
    # ~2.5 ms CPU of whatif's start (issue 30); replay does not import it either.
    assert imported(WHATIF)["typing"] is False


LOGGING_PROBE = """
import json, sys
from dpmstream.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "logging": "logging" in sys.modules}))
"""


def test_a_report_and_a_whatif_import_logging_only_for_a_message_they_write(tmp_path):
    # Their messages go through parsers/lazylog, as replay's: importing logging (and
    # traceback, string, threading) is ~20 M instructions of a start-up they share.
    from tests.commands.test_replay_startup import a_dpm_log

    log = a_dpm_log(tmp_path)
    logs = ["--tz", "UTC", "--year", "2011", str(log)]
    report = ["report", "--no-whatif", "--out", str(tmp_path / "r.html")]
    whatif = ["whatif", "--sthreads", "40", "--seeds", "1", "--model-requests", "20",
              "--out", str(tmp_path / "w")]

    def run(*argv):
        done = subprocess.run([sys.executable, "-c", LOGGING_PROBE, *argv, *logs],
                              capture_output=True, text=True, timeout=300)
        return json.loads(done.stdout.splitlines()[-1]), done.stderr

    for argv, answers in ((report, (0,)), (whatif, (0, 3))):   # whatif's 3: a prediction
        got, err = run(*argv)
        assert got == {"rc": got["rc"], "logging": False} and got["rc"] in answers, (got, err)
    # -v: a message is written, through logging, as configured
    got, err = run(*report, "-v")
    assert got == {"rc": 0, "logging": True}
    assert "dpmstream: INFO: " in err and "profile lcgdm-dpm" in err
