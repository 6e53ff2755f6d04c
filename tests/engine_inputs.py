"""The inputs the reassembly engines must agree on (tests/engine_helpers.py runs them):
every simulator scenario, the real name-server and SRM logs, and a corpus of bad input
woven into a simulated log (the kinds of tests/scenarios/test_bad_input.py and the odd
lines of tests/parsers/test_fastpath.py, among real traffic so that they meet state).
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta
from pathlib import Path

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.scenarios import names, scenario

from tests.engine_helpers import LogInput

REPO = Path(__file__).parents[1]
# The real lines: the repository's copy, and the shared data beside the main checkout.
REAL_DIRS = (REPO / "tests" / "data" / "real", REPO.parent / "shared" / "data" / "real")
REAL_YEAR, REAL_TZ = 2013, "Europe/Prague"   # tests/data/real/README.md

# Requests per scenario: enough for each one's feature (a restart 10 s in, a year end
# 30 s in, ...; about 35 requests a second), few enough for a quick run.
SCENARIO_REQUESTS = {"year-end": 1200, "dst-end": 800, "restart": 500,
                     "overlap-restart": 500, "clock-step": 400, "dpns-gap": 400}
DEFAULT_REQUESTS = 250


def scenario_input(directory: Path, name: str) -> LogInput:
    cfg = scenario(name, requests=SCENARIO_REQUESTS.get(name, DEFAULT_REQUESTS))
    result = simulate(cfg, directory / name)
    paths = [result.log_path, result.dpns_log_path]
    messages = directory / f"{name}.messages"
    if messages.exists():  # the rsyslog file holds both daemons: read it alone
        paths = [messages]
    return LogInput(name, tuple(paths), host=cfg.host, tz=cfg.tz, year=int(cfg.start[:4]))


def real_inputs() -> list[LogInput]:
    """One input per real file, and the LFC files read one after another as one lane."""
    seen: dict[str, Path] = {}
    for root in REAL_DIRS:
        if root.is_dir():
            for path in sorted(root.rglob("*.log")):
                seen.setdefault(str(path.relative_to(root)), path)
    inputs = [LogInput(f"real:{rel}", (path,), host="head01", tz=REAL_TZ, year=REAL_YEAR)
              for rel, path in sorted(seen.items())]
    lfc = tuple(path for rel, path in sorted(seen.items()) if rel.startswith("lfc/"))
    if lfc:
        inputs.append(LogInput("real:lfc/*", lfc, host="head01", tz=REAL_TZ, year=REAL_YEAR))
    return inputs


# -- bad input ---------------------------------------------------------------------------

def _shift(line: bytes, delta: timedelta, year: int = 2011) -> bytes:
    """A native line with its stamp moved by `delta` (milliseconds kept)."""
    stamp = datetime.strptime(f"{year}/" + line[:14].decode(), "%Y/%m/%d %H:%M:%S") + delta
    return stamp.strftime("%m/%d %H:%M:%S").encode() + line[14:]


def _odd_variants(line: bytes) -> list[bytes]:
    """A good DP092 line made odd in the ways tests/parsers/test_fastpath.py lists."""
    head = line[:18]  # "MM/DD HH:MM:SS.mmm"
    rest = line[18:]
    return [
        line[:14] + rest,                                 # whole seconds
        head + b"456" + rest,                             # microseconds
        head + rest.replace(b",", b" ", 1),               # no thread id
        b"13/45" + line[5:], line[:6] + b"25:61" + line[11:],  # impossible stamps
        head + b" 12345,3 dpm_srv_put: returns 99999999999999999999999",
        head + b" 99999999999999999999,3 dpm_srv_put: returns 0",
        head + b" 12345,3 dpm_srv_put: something no role says",
        line + b"   ", line + b"\t", line + b"\r",
        line.replace(b" DP092", b"\x1c DP092"), line + b"\x00",
    ]


def bad_input(directory: Path) -> LogInput:
    """A simulated DPM and DPNS log with bad and odd lines woven in, and a copy of the
    first part of the DPM log (an archive read twice)."""
    cfg = scenario("mixed", requests=300, seed=7)
    result = simulate(cfg, directory / "bad-sim")
    dpm = result.log_path.read_bytes().splitlines()
    dpns = result.dpns_log_path.read_bytes().splitlines()
    rng = random.Random(17)
    n = len(dpm)
    puts = [i for i, line in enumerate(dpm) if b"DP092 - put request by" in line]
    put = dpm[puts[0]]

    # In place: Latin-1 DNs on real requests, a clock stepped back 40 s for 60 lines.
    for i in puts[5:8]:
        dpm[i] = dpm[i].replace(b"Grid User", "J\xfcrgen M\xfcller".encode("latin-1"))
    step = n // 3
    dpm[step:step + 60] = [_shift(line, timedelta(seconds=-40)) for line in dpm[step:step + 60]]

    def at(fraction: float) -> int:
        return int(n * fraction)

    blobs = [bytes(rng.randrange(256) for _ in range(200)) for _ in range(3)]
    middle = dpm[at(0.5)]
    stray = middle[:18] + b" 31337,"  # a process of its own (a probe's helper)
    weave = {  # position -> lines inserted before it
        at(0.05): [b"hello world", b"", b"   ", b"}{ json? ", b"\t"],           # garbage
        at(0.10): blobs + [put[:18] + b" 12345,3 dpm_srv_put: \x00\x01 returns 0"],  # binary
        at(0.15): [put[:k] for k in (5, 17, 30, 45, len(put) - 10)],           # truncated
        at(0.20): [put + b"x" * 300_000],                                       # over-long
        at(0.25): _odd_variants(put),
        at(0.30): [_shift(middle, timedelta(days=3))],                # a lone line far ahead
        # eight lines two hours ahead (as many as are held): time jumps
        at(0.45): [_shift(line, timedelta(hours=2)) for line in dpm[at(0.45):at(0.45) + 8]],
        at(0.55): dpm[at(0.55) - 400:at(0.55)],                       # a chunk read twice
        at(0.60): [stray + b"0 dpm_serv: [10.1.1.1] (probe01): request accepted",  # a stray pid
                   stray + b"0 dpm_srv_ping: DP092 - ping request by /CN=p (0,0) from probe01",
                   stray + b"5 dpm_srv_ping: returns 0"],
        at(0.80): [stray + b"0 dpm_srv_ping: returns 0"],             # its late return
    }
    woven = []
    for i, line in enumerate(dpm):
        woven += weave.get(i, [])
        woven.append(line)
    dpm_path = directory / "bad.log"
    dpm_path.write_bytes(b"\n".join(woven) + b"\n")
    dpns_path = directory / "bad.dpns.log"
    dpns_path.write_bytes(b"\n".join(dpns[:len(dpns) // 2] + [b"garbage \xff\xfe", dpns[-1][:20]]
                                     + dpns[len(dpns) // 2:]) + b"\n")
    copy_path = directory / "bad.copy.log"  # the first 40% again (a re-read archive)
    copy_path.write_bytes(b"\n".join(woven[:len(woven) * 2 // 5]) + b"\n")
    return LogInput("bad-input", (dpm_path, dpns_path, copy_path), host=cfg.host, tz=cfg.tz,
                    year=2011)


def bad_syslog_input(directory: Path) -> LogInput:
    """The rsyslog file of mixed-syslog with odd lines of its own: unknown programs,
    another host, a known tag with garbage after it, no tag at all, a cut stamp."""
    cfg = scenario("mixed-syslog", requests=250, seed=5)
    simulate(cfg, directory / "bad-syslog-sim")
    lines = (directory / "bad-syslog-sim.messages").read_bytes().splitlines()
    mid = lines[len(lines) // 2]
    stamp, host = mid.split(b" ")[:2]
    odd = [
        stamp + b" " + host + b" postfix/smtpd[4242]: connect from unknown[10.0.0.9]",
        stamp + b" " + host + b" weird-daemon: caf\xe9 au lait",             # Latin-1
        stamp + b" " + host + b" dpm: this is no DPM line at all",
        stamp + b" " + host + b" dpns: 08/12 99:99:99.000 9876,1 Cns_srv_x: returns 0",
        stamp + b" otherhead.cern.ch dpm: " + mid.split(b"dpm: ", 1)[-1],   # another host
        stamp + b" " + host,                                                # no tag
        stamp[:10],                                                         # a cut stamp
        stamp + b" " + host + b" kernel: \x00\x00\x00",
    ]
    out = []
    for i, line in enumerate(lines):
        if i % (len(lines) // 7) == 0:
            out += odd
        out.append(line)
    path = directory / "bad-syslog.messages"
    path.write_bytes(b"\n".join(out) + b"\n")
    return LogInput("bad-syslog", (path,), host=cfg.host, tz=cfg.tz, year=2011)


def all_input_names() -> list[str]:
    """Names of every input, for parametrising: scenarios, then the bad corpora (the
    real files are few and small: one test reads them all)."""
    return [f"scenario:{name}" for name in names()] + ["bad-input", "bad-syslog", "two-heads"]


def make_input(directory: Path, name: str) -> LogInput:
    if name.startswith("scenario:"):
        return scenario_input(directory, name.split(":", 1)[1])
    if name == "bad-input":
        return bad_input(directory)
    if name == "bad-syslog":
        return bad_syslog_input(directory)
    if name == "two-heads":
        return two_heads_input(directory)
    raise ValueError(f"no input called {name!r}")


def two_heads_input(directory: Path) -> LogInput:
    """Two head nodes read in one run (a site's archive): one in an rsyslog file naming its
    host on each line; the other in native logs named by the input's host, its DPM log
    rotated into three pieces (the middle one a longer copy of the first, as a copy left
    beside its rotation is), and its DPNS log. Both hosts hold records in the linker at
    once, so the order the engines release hosts in shows in the records' order."""
    tz, second_host = "Europe/Zurich", "dpmhead02.cern.ch"
    first = simulate(SimConfig(requests=DEFAULT_REQUESTS, seed=3, syslog_file=True, tz=tz,
                               get_fraction=0.3), directory / "two-heads-1")
    second = simulate(SimConfig(requests=DEFAULT_REQUESTS, seed=4, host=second_host, tz=tz,
                                get_fraction=0.3, abort_rate=0.02), directory / "two-heads-2")
    lines = second.log_path.read_bytes().splitlines(keepends=True)
    dated = second.log_path.stat()   # a file's date gives its year (no year in its stamps)
    cut, copy_end = len(lines) * 2 // 5, len(lines) * 3 // 5
    rotated = [directory / f"two-heads-2.log{suffix}" for suffix in (".2", ".1", "")]
    for path, part in zip(rotated, (lines[:cut], lines[:copy_end], lines[copy_end:])):
        path.write_bytes(b"".join(part))
        os.utime(path, ns=(dated.st_atime_ns, dated.st_mtime_ns))
    return LogInput("two-heads", (first.messages_path, *rotated, second.dpns_log_path),
                    host=second_host, tz=tz, year=int(SimConfig().start[:4]))
