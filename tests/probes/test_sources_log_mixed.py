"""check_dpm --log on an rsyslog file that mixes the DPM daemon's and the name server's
lines (/var/log/messages): each line is read with its own daemon's profile, by its program
tag, as replay reads the file (parsers/pipeline.py routes it), so the probe's answer is
the answer of the same lines split into the DPM log and the DPNS log: the requests of the
one, the calls and name-server quantiles of the other, and no line of either unmatched."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.parsers.records import csv_line, text_to_ms
from dpmstream.probes import sources_log
from tests.helpers import dpmstream_in_process
from tests.metrics_stack import simulate
from tests.probes.test_sources_log import TZ, _compiled_or_skip, check_dpm, latest_event_ms

HOST = "dpmhead01.cern.ch"  # the simulated head node, as its rsyslog prefixes name it
# Name-server quantiles asked for (thresholds far from the values: every answer is OK).
NS_WANTED = {("statg", "p95"): 0.95, ("creat", "p99"): 0.99}
NS_ARGS = tuple(arg for (op, label) in NS_WANTED for arg in ("-w", f"ns:{op}:{label}=100"))
LINES = re.compile(r"(\d+) (parsed|unmatched|malformed|foreign)")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Ten minutes of a head node whose two daemons rsyslog writes into PREFIX.messages,
    among other programs' lines; the same lines unwrapped in PREFIX.log and
    PREFIX.dpns.log."""
    return simulate(tmp_path_factory.mktemp("mixed-syslog") / "m", "--scenario", "mixed-syslog",
                    "--rate", "3", "--duration", "600", "--tz", TZ)


def probe(path, *args: str):
    return check_dpm("--log", str(path), "--tz", TZ, "--host", HOST, "-v", *NS_ARGS, *args)


def lines_counted(status: str) -> dict[str, int]:
    """The -v line's count of the lines read, by result."""
    return {result: int(n) for n, result in LINES.findall(status)}


def up_to(status: str) -> str:
    """The window's end, as the status line says it."""
    return re.search(r"up to ([^,]+ UTC)", status).group(1)


def is_name_server(name: str) -> bool:
    return name.startswith("ns_")


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_mixed_file_read_whole_answers_as_its_daemons_two_logs_together(site, monkeypatch, engine):
    _compiled_or_skip(engine)
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    whole = ("--window", "1h")  # ten minutes of log: every record counted in every file
    _, dpm_status, dpm = probe(f"{site}.log", *whole)
    _, ns_status, ns = probe(f"{site}.dpns.log", *whole)
    assert int(dpm["requests"][0]) > 1000 and int(ns["calls"][0]) > 1000
    assert all(value != "U" for name, (value, *_) in ns.items() if is_name_server(name))
    want = {name: (ns if is_name_server(name) else dpm)[name] for name in dpm}
    want["calls"] = (str(int(dpm["calls"][0]) + int(ns["calls"][0])), *dpm["calls"][1:])
    messages = Path(f"{site}.messages")
    others = sum(1 for line in messages.read_text().splitlines()
                 if not re.search(r" (dpm|dpns): ", line))
    assert others > 50
    # the daemon's profile (detected: its lines are most of the file's tail) or the name
    # server's: either reads the other's lines with the other's profile
    for profile in ((), ("--profile", "lcgdm-ns")):
        rc, status, perf = probe(messages, *whole, *profile)
        assert rc == 0, status
        assert perf == want
        counted = lines_counted(status)
        assert counted == {"parsed": lines_counted(dpm_status)["parsed"]
                           + lines_counted(ns_status)["parsed"],
                           "unmatched": 0, "malformed": 0, "foreign": others}


def test_the_probe_makes_replays_records_of_a_mixed_file_its_calls_linked(site, tmp_path, monkeypatch):
    """Read whole (window and lookback cover the file), the probe's pipeline makes the
    records `replay` writes of the file, row for row: the name server's calls among them,
    linked to their requests."""
    made = []

    class Recording(sources_log.Pipeline):
        """The probe's pipeline, keeping the records of its last read (under -t the
        probe reads the last 4 MiB first, then the whole span)."""
        def __init__(self, on_record, *args, **kwargs):
            made.clear()
            super().__init__(lambda record: (made.append(record), on_record(record)), *args, **kwargs)

    monkeypatch.setattr(sources_log, "Pipeline", Recording)
    messages = f"{site}.messages"
    rc, status, _ = probe(messages, "--window", "1h")
    assert rc == 0 and "from byte 0 " in status
    out = tmp_path / "replay"
    done = dpmstream_in_process("replay", messages, "--tz", TZ, "--host", HOST, "--out", str(out),
                                "--quiet", text=True)
    assert done.returncode == 0, done.stderr
    for kind, name in (("request", "requests.csv"), ("call", "calls.csv")):
        replayed = (out / name).read_bytes().decode().splitlines(keepends=True)[1:]
        assert sorted(csv_line(r) for r in made if r["kind"] == kind) == sorted(replayed)
    assert sum(1 for r in made if r["kind"] == "call" and r["daemon"] == "dpns" and r["token"]) > 1000


def calls_ending_in(prefix: Path, begin_ms: int, end_ms: int) -> list[dict]:
    """The simulator's calls, of both daemons, that ended in (begin, end]."""
    with open(f"{prefix}.calls.csv", newline="") as fh:
        return [c for c in csv.DictReader(fh)
                if c["ended"] and begin_ms < text_to_ms(c["ended"]) <= end_ms]


def test_a_mixed_files_window_holds_the_name_servers_calls_that_ended_in_it(site):
    """A window shorter than the file, its start found by the stamps of either daemon's
    lines: the requests are the DPM log's (the file ends with the daemon's line, as its
    log does), the calls and the name-server quantiles the simulator's in the window."""
    window = ("--window", "5m", "--lookback", "1m")
    rc, status, perf = probe(f"{site}.messages", *window)
    _, dpm_status, dpm = probe(f"{site}.log", *window)
    assert rc == 0, status
    assert int(re.search(r"from byte (\d+)", status).group(1)) > 0  # 5m + 1m + 2m of 10m
    end_ms = latest_event_ms(Path(f"{site}.log"), 2011)
    assert end_ms > latest_event_ms(Path(f"{site}.dpns.log"), 2011)
    assert up_to(status) == up_to(dpm_status)
    assert {k: v for k, v in perf.items() if k != "calls" and not is_name_server(k)} == \
        {k: v for k, v in dpm.items() if k != "calls" and not is_name_server(k)}
    calls = calls_ending_in(site, end_ms - 300_000, end_ms)
    assert int(perf["calls"][0]) == len(calls) > int(dpm["calls"][0])
    for (op, label), q in NS_WANTED.items():
        seconds = sorted(float(c["duration_s"]) for c in calls if c["daemon"] == "dpns" and c["op"] == op)
        assert len(seconds) > 100
        assert float(perf[f"ns_{op}_{label}"][0]) == pytest.approx(nearest_rank(seconds, q))


def test_a_threshold_on_a_name_server_quantile_holds_on_a_mixed_file(site):
    rc, status, perf = probe(f"{site}.messages", "--window", "5m", "-c", "ns:creat:p99=~:0.001")
    assert rc == 2, status
    assert float(perf["ns_creat_p99"][0]) > 0.001 and "creat" in status


def test_a_mixed_files_truly_unmatched_lines_are_counted_unmatched(site, tmp_path):
    """Of either daemon, a line whose envelope holds but which no role of its profile
    reads: counted unmatched, and nothing else changes."""
    lines = Path(f"{site}.messages").read_text().splitlines(keepends=True)
    at = len(lines) - 100
    prefix = lines[at].split(": ", 1)[0]  # rsyslog's time and host: the neighbour's
    stamp = re.search(r"\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", lines[at]).group(0)
    odd = [f"{prefix.rsplit(' ', 1)[0]} dpns: {stamp}  9876,0 Cns_srv_statg: a word no role reads\n",
           f"{prefix.rsplit(' ', 1)[0]} dpns: {stamp}  9876,0 Cns_srv_creat: another\n",
           f"{prefix.rsplit(' ', 1)[0]} dpm: {stamp} 12345,0 dpm_srv_put: nor this\n"]
    changed = tmp_path / "messages"
    changed.write_text("".join(lines[:at] + odd + lines[at:]))
    args = ("--window", "5m", "--last-line-year", "2011")
    _, status, perf = probe(f"{site}.messages", *args)
    _, odd_status, odd_perf = probe(changed, *args)
    assert odd_perf == perf
    assert lines_counted(odd_status) == {**lines_counted(status), "unmatched": 3}
