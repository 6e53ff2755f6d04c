"""Following benchmark: `dpmstream run` following a log that a writer appends at full speed.

A simulated head-node log (the `heavy` scenario) is appended by this process in 1 MiB
writes, as fast as the disk takes it, to a file that `dpmstream run` (a subprocess,
pinned to one core when taskset is there) follows; timed from the first write until
`dpmstream_lines_total` on its /metrics counts every line. Once with `--state` (the
registry saved every second, exactly once across restarts) and once without. Beside it,
`LC_ALL=C grep -cE` with the envelope regex on the same file: the floor. The CPU time of
`run` (from its rusage) is printed too: on a loaded machine the wall time says more
about the neighbours than about `run`.

    .venv/bin/python bench/bench_follow.py [--lines 500000] [--workdir bench/out]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

from yardstick import ONE_CORE, grep_seconds

CHUNK = 1 << 20


def make_log(workdir: Path, lines: int) -> tuple[Path, str, str]:
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    prefix = workdir / f"heavy-{lines}"
    cfg = scenario("heavy", requests=None, lines=lines)
    if not Path(f"{prefix}.log").exists():
        t0 = time.perf_counter()
        simulate(cfg, prefix)
        print(f"simulated {lines:,} lines in {time.perf_counter() - t0:.1f} s")
    return Path(f"{prefix}.log"), cfg.tz, cfg.host


def lines_counted(url: str) -> int:
    with urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return sum(int(float(m.group(1))) for m in
               re.finditer(r"^dpmstream_lines_total\{[^}]*\} (\S+)$", text, re.M))


def follow_once(source: Path, workdir: Path, tz: str, host: str, state: bool) -> dict:
    live = workdir / "live"
    shutil.rmtree(live, ignore_errors=True)
    live.mkdir(parents=True)
    log = live / "log"
    log.touch()
    cmd = [*ONE_CORE, sys.executable, "-m", "dpmstream", "run", "--metrics-port", "0",
           "--records", str(live / "records.jsonl"), "--host", host, "--tz", tz,
           "--interval", "0.05", str(log)]
    if state:
        cmd[-1:-1] = ["--state", str(live / "run.state")]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    url = None
    for line in proc.stderr:
        m = re.search(r"metrics on (\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "no metrics URL"
    with open(source, "rb") as fh:
        data = fh.read()
    total = data.count(b"\n")
    t0 = time.perf_counter()
    with open(log, "ab", buffering=0) as out:       # the writer: full speed
        for i in range(0, len(data), CHUNK):
            out.write(data[i:i + CHUNK])
    written = time.perf_counter() - t0
    while lines_counted(url) < total:
        time.sleep(0.05)
    followed = time.perf_counter() - t0
    proc.terminate()
    _, status, usage = os.wait4(proc.pid, 0)
    return {"lines": total, "mb": len(data) / 1e6, "written": written, "followed": followed,
            "rss": usage.ru_maxrss // 1024, "cpu": usage.ru_utime + usage.ru_stime}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--workdir", default="bench/out")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    source, tz, host = make_log(workdir, args.lines)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for state in (True, False):
        label = "run --state (registry every 1 s)" if state else "run (no --state)"
        for _ in range(args.runs):
            r = follow_once(source, workdir, tz, host, state)
            print(f"{label}: {r['lines']:,} lines ({r['mb']:.1f} MB) written in "
                  f"{r['written']:.2f} s, followed in {r['followed']:.2f} s: "
                  f"{r['lines'] / r['followed']:,.0f} lines/s; CPU {r['cpu']:.2f} s "
                  f"(start-up included): {r['lines'] / r['cpu']:,.0f} lines per CPU second; "
                  f"peak RSS {r['rss']} MiB")
    g = grep_seconds(source)
    lines = source.read_bytes().count(b"\n")
    print(f"LC_ALL=C grep -cE envelope, same file: {g:.2f} s  {lines / g:,.0f} lines/s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
