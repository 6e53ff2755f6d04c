"""`dpmstream replay` on DOME logs (DPM 1.10 on, docs/dome.md) as an admin runs it: every
node's dmlite log of a site `dpmstream simulate --dome` wrote (a head and disk nodes,
thousands of calls and puts, a disk node down and back, the head restarting, a journald
gap), read side by side through the same pipeline, sources and lanes as the DPM logs,
the records files compared with the simulator's truth, record for record.

The DOME engine is the compiled one where built (parsers/engines.new_dome_reassembler,
new_dome_parser), the Python reference with DPMSTREAM_PURE_PYTHON=1."""

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.dome_records import KINDS
from dpmstream.parsers.pipeline import Pipeline

from tests.helpers import dpmstream_in_process
from tests.scenarios.test_dome_truth import INTS, ORDER

# truth file -> (replay's records file, kind)
FILES = {"calls": ("dome-calls.csv", "dome_call"), "puts": ("dome-puts.csv", "dome_put"),
         "capacity": ("dome-capacity.csv", "dome_capacity"),
         "fs_events": ("dome-fs-events.csv", "dome_fs_event")}


def dpmstream(*args, check=True, env=None):
    """`dpmstream ARGS`: in this process (tests/helpers.py dpmstream_in_process), the
    records and the summary being what these tests read; in a process of its own where
    it needs another environment (an engine or a zone chosen as the process starts)."""
    if env is None:
        proc = dpmstream_in_process(*args, text=True)
    else:
        proc = subprocess.run([sys.executable, "-m", "dpmstream", *args], capture_output=True,
                              text=True, check=False, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def truth_as_written(prefix: str, name: str) -> list[dict]:
    """The truth's rows with times as replay writes them (seconds, three decimals)."""
    _, kind = FILES[name]
    ms_fields = KINDS[kind][1]
    out = []
    for row in rows(f"{prefix}.{name}.csv"):
        out.append({c: (f"{int(v) // 1000}.{int(v) % 1000:03d}" if c in ms_fields and v != "" else v)
                    for c, v in row.items()})
    return out


def in_order(records: list[dict], name: str) -> list[dict]:
    def cell(c, v):
        if c in INTS:
            return float(v)
        return v
    return sorted(records, key=lambda r: (tuple(cell(c, r[c]) for c in ORDER[name]),
                                          tuple(r.values())))


def assert_records_are_the_truth(out_dir, prefix) -> dict:
    matched = {}
    for name, (filename, _) in FILES.items():
        truth = in_order(truth_as_written(prefix, name), name)
        mine = in_order([{c: r[c] for c in truth[0]} for r in rows(out_dir / filename)], name)
        assert len(mine) == len(truth), name
        for got, want in zip(mine, truth):
            assert got == want, name
        matched[name] = len(mine)
    return matched


@pytest.mark.parametrize("stamp", ["traditional", "rfc3339"])
def test_replay_of_every_node_of_a_dome_site_writes_the_truths_records(dome_site, tmp_path, stamp):
    prefix, logs = dome_site("--stamp", stamp)
    out = tmp_path / "out"
    proc = dpmstream("replay", *logs, "--out", str(out), "--year", "2017",
                     "--tz", "Europe/Zurich", "--request-timeout", "120")
    matched = assert_records_are_the_truth(out, prefix)
    assert matched["calls"] > 5000 and matched["puts"] > 1500
    assert matched["capacity"] > 50 and matched["fs_events"] > 0
    summary = json.loads(open(f"{prefix}.summary.json").read())
    text = proc.stdout
    assert "DOME calls" in text and "DOME puts" in text
    assert f"orphan putdones {summary.get('orphan_putdones', 0)}," in text
    assert "dome-puts.csv" in text
    # Whole-second stamps: no call-duration quantiles, and put times in whole seconds.
    if stamp == "traditional":
        assert "DOME call durations" not in text
        assert "calls have whole-second stamps" in text
        assert "whole-second stamps: +-1 s" in text
    else:
        assert "DOME call durations (seconds; sub-second stamps only)" in text
        assert "calls have whole-second stamps" not in text


def test_a_dome_profile_named_reads_the_nodes_as_detection_does(dome_site, tmp_path):
    prefix, logs = dome_site("--duration", "200")
    detected, named = tmp_path / "detected", tmp_path / "named"
    dpmstream("replay", *logs, "--out", str(detected), "--year", "2017", "--tz", "Europe/Zurich",
              "--request-timeout", "120", "--quiet")
    dpmstream("replay", *logs, "--out", str(named), "--year", "2017", "--tz", "Europe/Zurich",
              "--request-timeout", "120", "--quiet", "--profile", "dmlite-dome")
    for filename, _ in FILES.values():
        assert (detected / filename).read_text() == (named / filename).read_text()


def test_the_order_of_the_files_on_the_command_line_changes_no_record(dome_site, tmp_path):
    """Each node is a lane of its own, the lanes read side by side in event time: the
    disk nodes given first give the same records as the head given first."""
    prefix, logs = dome_site("--duration", "200")
    a, b = tmp_path / "a", tmp_path / "b"
    common = ("--year", "2017", "--tz", "Europe/Zurich", "--request-timeout", "120", "--quiet")
    dpmstream("replay", *logs, "--out", str(a), *common)
    dpmstream("replay", *reversed(logs), "--out", str(b), *common)
    for name, (filename, _) in FILES.items():
        assert in_order(rows(a / filename), name) == in_order(rows(b / filename), name)
    assert_records_are_the_truth(a, prefix)


def test_foreign_and_damaged_lines_among_dome_lines_are_counted_not_fatal(dome_site, tmp_path):
    # A copy of the site's files: lines are added to the head's.
    logs = [shutil.copy(path, tmp_path) for path in dome_site("--duration", "120", "--envelope", "messages")[1]]
    head = next(p for p in logs if "head" in os.path.basename(p))
    with open(head, "a", encoding="utf-8") as fh:
        fh.write("this is no syslog line\n")
        fh.write("May 30 08:46:01 dpmhead01 dome[1]: {1}[1] dmlite a message of no known shape\n")
    proc = dpmstream("replay", *logs, "--year", "2017", "--tz", "Europe/Zurich",
                     "--request-timeout", "120")
    lines = next(line for line in proc.stdout.splitlines() if line.startswith("  parsed "))
    assert "malformed 1" in lines and "unmatched 1" in lines
    other = next(line for line in proc.stdout.splitlines() if "lines of other programs" in line)
    assert "lines of other programs 0" not in other   # /var/log/messages: other programs' lines


def test_the_python_engine_and_the_default_engine_read_a_dome_site_alike(dome_site, tmp_path):
    """The engine a pipeline runs (the compiled one where built, or the Python reference
    with DPMSTREAM_PURE_PYTHON=1) does not change a DOME record."""
    prefix, logs = dome_site("--duration", "200")
    common = ("--year", "2017", "--tz", "Europe/Zurich", "--request-timeout", "120", "--quiet")
    default, python = tmp_path / "default", tmp_path / "python"
    dpmstream("replay", *logs, "--out", str(default), *common)
    dpmstream("replay", *logs, "--out", str(python), *common,
              env={**os.environ, "DPMSTREAM_PURE_PYTHON": "1"})
    for filename, _ in FILES.values():
        assert (default / filename).read_text() == (python / filename).read_text()
    assert_records_are_the_truth(python, prefix)


def test_both_engines_print_the_same_summary_of_a_dome_site_with_the_time_it_covers(dome_site):
    """The summary-only replay (no --out) of a DOME site: the compiled engine's summary is
    the reference's, line for line, "Records from ... to ..." included (the compiled
    run's tally, holding no DPM record, once put its empty range over the DOME records')."""
    _, logs = dome_site("--duration", "120")
    args = ("replay", *logs, "--year", "2017", "--tz", "Europe/Zurich")
    default = dpmstream(*args)
    python = dpmstream(*args, env={**os.environ, "DPMSTREAM_PURE_PYTHON": "1"})
    assert "Records from 2017-" in python.stdout, python.stdout
    assert default.stdout == python.stdout


def head_cut(logs: list[str], tmp_path) -> list[str]:
    """The site's logs with the head's first third lost: the putdones of the puts it held
    join none (orphans), the later puts theirs."""
    head = next(log for log in logs if "head" in os.path.basename(log))
    lines = open(head, encoding="utf-8").readlines()
    cut = tmp_path / os.path.basename(head)
    cut.write_text("".join(lines[len(lines) // 3:]), encoding="utf-8")
    return [str(cut) if log == head else log for log in logs]


@pytest.mark.skipif(not engines.compiled_dome_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
                    reason="the compiled DOME engine is not built")
@pytest.mark.parametrize("zone, cut, warned", [("Europe/Zurich", False, False), ("UTC", False, True),
                                               ("Europe/Zurich", True, False)],
                         ids=["puts-join", "no-put-joins", "orphans-and-joins"])
def test_a_summary_only_replay_hands_each_dome_record_to_the_tally_undicted(dome_site, tmp_path, monkeypatch,
                                                                            zone, cut, warned):
    """Summary-only replay on the compiled engine: the DOME engine hands every record to
    the summary's DOME tally as its own value (its receiver), so no record comes back to
    the pipeline as a dict; the summary and the warnings are the Python engine's, byte for
    byte: the no-join one with stamps read in the wrong zone, none where puts joined,
    however many putdones joined nothing (the head's log cut: the engine counts the puts
    that joined among the records it handed over)."""
    from dpmstream.parsers.compiled_dome import CompiledDomeReassembler
    _, logs = dome_site("--duration", "200")
    args = ("replay", *(head_cut(logs, tmp_path) if cut else logs), "--year", "2017", "--tz", zone)
    receivers, emitted = [], []
    receive, emit = CompiledDomeReassembler.receive, Pipeline._emit_dome
    monkeypatch.setattr(CompiledDomeReassembler, "receive",
                        lambda self, on_record: (receive(self, on_record), receivers.append(self))[0])
    monkeypatch.setattr(Pipeline, "_emit_dome",
                        lambda self, records: (emitted.extend(records), emit(self, records))[1])
    compiled = dpmstream(*args)
    [engine] = receivers
    assert engine.receiver is not None and engine.receiver.engine_records > 1000
    assert emitted == []
    monkeypatch.setenv("DPMSTREAM_ENGINE", "python")
    python = dpmstream(*args)
    assert len(emitted) == engine.receiver.engine_records   # each as a dict, to the pipeline
    assert compiled.stdout == python.stdout
    assert compiled.stderr == python.stderr
    assert ("no DOME put met its putdone" in python.stderr) == warned
    if cut:
        assert "orphan putdones 0," not in python.stdout and "success 0," not in python.stdout


@pytest.mark.parametrize("engine_env", [{}, {"DPMSTREAM_PURE_PYTHON": "1"}], ids=["default", "python"])
def test_the_readmes_dome_command_without_a_zone_writes_the_records_and_a_summary(dome_site, tmp_path, engine_env):
    """As the README gives it: --out and --year, no --tz, the summary printed (its time
    labels once asked the compiled DOME parser for an attribute it lacked)."""
    _, logs = dome_site("--duration", "120")
    out = tmp_path / "out"
    proc = dpmstream("replay", "--out", str(out), "--year", "2017", *logs,
                     env={**os.environ, **engine_env} if engine_env else None)
    assert "DOME calls" in proc.stdout and "DOME puts" in proc.stdout, proc.stdout
    assert rows(out / "dome-calls.csv") and rows(out / "dome-puts.csv")


def test_whole_second_stamps_read_in_the_wrong_zone_join_no_put_and_say_so(dome_site):
    """The nodes log Zurich time without an offset; read as UTC, no putdone finds its put
    (the join compares the local stamp with the replica's UTC epoch): one warning names
    the zone used and --tz. With the right zone the puts join and nothing is said."""
    _, logs = dome_site("--duration", "200")   # the simulator's default stamp: traditional
    with pytest.MonkeyPatch.context() as patch:   # this machine's zone, read as replay runs
        patch.setenv("TZ", "UTC")
        wrong = dpmstream("replay", "--year", "2017", *logs)
        right = dpmstream("replay", "--year", "2017", "--tz", "Europe/Zurich", *logs)
    assert "no DOME put met its putdone" in wrong.stderr and "--tz" in wrong.stderr
    assert "success 0," in wrong.stdout
    assert "no DOME put met its putdone" not in right.stderr and "success 0," not in right.stdout


def test_a_dome_log_on_stdin_is_recognised_from_its_first_lines(dome_site, tmp_path):
    """stdin cannot be read twice: its source detects the DOME profile itself, over its
    first lines, as a DPM log's does. A node's calls are its own: the head's log alone
    gives exactly the truth's calls of the head."""
    prefix, logs = dome_site("--stamp", "rfc3339")   # the site the others read
    head = next(p for p in logs if "head" in os.path.basename(p))
    out = tmp_path / "out"
    with open(head, "rb") as fh:
        proc = dpmstream_in_process("replay", "-", "--out", str(out), "--year", "2017",
                                    "--request-timeout", "120", "--quiet", stdin=fh.read(),
                                    text=True)
    assert proc.returncode == 0, proc.stderr
    truth = [r for r in truth_as_written(prefix, "calls") if r["host"] == "dpmhead01"]
    mine = [{c: r[c] for c in truth[0]} for r in rows(out / "dome-calls.csv")]
    assert len(truth) > 1000
    assert in_order(mine, "calls") == in_order(truth, "calls")


def test_replay_openmetrics_exports_the_dome_metrics_at_event_time(dome_site, tmp_path):
    """`replay --openmetrics` (for promtool's backfill) dates each DOME record by its own
    time: the last sample of dpm_dome_puts_total counts the truth's puts."""
    prefix, logs = dome_site("--duration", "200")
    om = tmp_path / "dome.om"
    dpmstream("replay", *logs, "--openmetrics", str(om), "--year", "2017", "--tz",
              "Europe/Zurich", "--request-timeout", "120", "--quiet")
    last: dict[str, float] = {}
    calls: dict[str, float] = {}
    stamps = set()
    for line in om.read_text().splitlines():
        if line.startswith("dpm_dome_puts_total{"):
            labels, value, stamp = line.rsplit(" ", 2)
            last[labels] = float(value)
            stamps.add(float(stamp))
        elif line.startswith("dpm_dome_calls_total{"):   # calls have no ended/started field
            labels, value, _ = line.rsplit(" ", 2)
            calls[labels] = float(value)
    want = rows(f"{prefix}.puts.csv")
    assert sum(last.values()) == len(want) > 100
    assert sum(calls.values()) == len(rows(f"{prefix}.calls.csv")) > 1000
    start = min(int(r["put_time"]) for r in want) / 1000
    assert min(stamps) >= start and len(stamps) > 1     # event time, step by step
