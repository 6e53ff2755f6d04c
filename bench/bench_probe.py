"""Probe benchmark: how long `check_dpm --log` takes on a large log, and its memory.

A simulated head node's log of about 110 MB (mixed scenario, 10 requests/s over 67
minutes) is checked over a 15-minute window (the default 30-minute lookback, so about
the last 47 minutes are read), then over the whole file (--lookback 1d); beside them
`LC_ALL=C grep -cE` of the envelope regex on the same file (the floor: reading and
matching every line), and the probe on 2 GiB of NULs. Best of --runs; peak RSS of
each run.

    .venv/bin/python bench/bench_probe.py [--workdir bench/out] [--runs 3]

With --big (issue 17: "check_dpm --log reads a 1 GB log's last 15 minutes within its
default -t"): the same load, simulated for 10 hours instead (about 1.0 GB, 9 M lines,
built once into --workdir, default /tmp/bench17 then), checked with the default -t (10 s)
and window, then with -t 600 to see what the read costs without the limit; grep first.
The first run of each is reported on its own (the file may not be in the page cache;
nothing is dropped), then the best of --runs.

    .venv/bin/python bench/bench_probe.py --big [--workdir /tmp/bench17] [--runs 3] [--log FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import ensure_bytecode  # noqa: E402
from yardstick import ENVELOPE_ERE, ONE_CORE, run_measured  # noqa: E402

BIN = Path(sys.executable).parent
TZ = "Europe/Zurich"


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int, int, str]:
    """(wall seconds, CPU seconds (user + system), peak RSS of this child in MiB, exit
    code, stdout) of one command. On a loaded machine the CPU time is the figure to
    compare; the wall time is what Nagios waits."""
    got = run_measured(cmd, env)
    return got.wall, got.cpu, got.rss_mib, got.rc, got.out


def best(cmd: list[str], runs: int, env: dict | None = None):
    results = [timed(ONE_CORE + cmd, env) for _ in range(runs)]
    return min(results, key=lambda r: r[0])


def make_log(workdir: Path, big: bool = False) -> Path:
    # 10 requests/s of the mixed scenario write about 28 KB/s: 36,000 s are about 1.0 GB.
    name, duration = ("probe-1gb", 36_000) if big else ("probe-110mb", 4_000)
    prefix = workdir / name
    log = Path(f"{prefix}.log")
    done = Path(f"{prefix}.done")  # written last: a run cut short is simulated again
    if not log.exists() or (big and not done.exists()):
        t0 = time.perf_counter()
        subprocess.run([str(BIN / "dpmstream"), "simulate", "--out", str(prefix), "--quiet",
                        "--scenario", "mixed", "--rate", "10", "--duration", str(duration),
                        "--tz", TZ], check=True)
        done.write_text("")
        print(f"simulated {log} in {time.perf_counter() - t0:.1f} s")
    return log


def check_row(what: str, log: Path, result) -> str:
    wall, cpu, rss, rc, out = result
    lines = out.splitlines() or ["(no output)"]
    status = lines[0].split(" - ")[0]
    read = next((line for line in lines if line.startswith("read ")), "")
    if read:
        lines_read, start = read.split()[1], int(read.split("from byte ")[1].split()[0])
        answer = (f"{status}; {int(lines_read):,} lines, the last "
                  f"{(log.stat().st_size - start) / 1e6:.1f} MB")
    else:
        answer = lines[0][:160]
    return f"| {what} | {wall:.2f} s | {cpu:.2f} s | {rss} MiB | {answer} |"


def main_big(workdir: Path, runs: int, log: Path | None = None) -> None:
    """The 1 GB log of issue 17 (or `log`), against the default -t (10 s)."""
    log = log or make_log(workdir, big=True)
    size_mb = log.stat().st_size / 1e6
    with open(log, "rb") as fh:
        lines = sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))
    print(f"log: {log} ({size_mb:,.1f} MB, {lines:,} lines); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{'pinned to core 0' if ONE_CORE else 'not pinned'}; first run, then best of {runs}")
    print(ensure_bytecode())
    print("| what | wall | CPU | peak RSS | answer |")
    print("|---|---|---|---|---|")
    check = [str(BIN / "check_dpm"), "--log", str(log), "--tz", TZ, "-v"]
    grep = ["grep", "-cE", ENVELOPE_ERE, str(log)]
    for what, cmd, env in (
            ("`check_dpm --log` (defaults: window 15m, lookback 30m, -t 10)", check, None),
            ("`check_dpm --log -t 600` (no time limit in practice)", check + ["-t", "600"], None),
            ("`LC_ALL=C grep -cE` envelope regex, whole file", grep, {"LC_ALL": "C"})):
        first = timed(ONE_CORE + cmd, env)
        rest = best(cmd, runs, env)
        for label, result in (("first run", first), (f"best of {runs}", rest)):
            if cmd is grep:
                wall, cpu, _, _, out = result
                print(f"| {what}, {label} | {wall:.2f} s | {cpu:.2f} s | - | {int(out):,} lines |")
            else:
                print(check_row(f"{what}, {label}", log, result))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=None, help="bench/out (/tmp/bench17 with --big)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", action="store_true", help="the 1 GB log of issue 17 (see above)")
    ap.add_argument("--log", type=Path, help="with --big: check this log (stamps in "
                                              f"{TZ}) instead of building one")
    args = ap.parse_args()
    workdir = Path(args.workdir or ("/tmp/bench17" if args.big else "bench/out"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.big:
        main_big(workdir, args.runs, args.log)
        return
    log = make_log(workdir)
    size_mb = log.stat().st_size / 1e6
    with open(log, "rb") as fh:
        lines = sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))
    print(f"log: {log} ({size_mb:.1f} MB, {lines:,} lines); load average {os.getloadavg()[0]:.1f}; "
          f"{'pinned to core 0' if ONE_CORE else 'not pinned'}; best of {args.runs}")
    print(ensure_bytecode())
    print("| what | wall | CPU | peak RSS | answer |")
    print("|---|---|---|---|---|")

    wall, cpu, _, rc, out = best(["grep", "-cE", ENVELOPE_ERE, str(log)], args.runs, {"LC_ALL": "C"})
    print(f"| `LC_ALL=C grep -cE` envelope regex, whole file | {wall:.2f} s | {cpu:.2f} s | - "
          f"| {int(out):,} lines |")

    check = str(BIN / "check_dpm")
    for what, extra in (("`check_dpm --log --window 15m --lookback 5m`", ["--lookback", "5m"]),
                        ("`check_dpm --log --window 15m` (default lookback 30m)", []),
                        ("`check_dpm --log --window 15m --lookback 1d` (whole file)", ["--lookback", "1d"])):
        wall, cpu, rss, rc, out = best([check, "--log", str(log), "--tz", TZ, "--window", "15m",
                                        "-t", "120", "-v", *extra], args.runs)
        status = out.splitlines()[0].split(" - ")[0]
        read = next((line for line in out.splitlines() if line.startswith("read ")), "")
        lines_read, start = read.split()[1], int(read.split("from byte ")[1].split()[0])
        print(f"| {what} | {wall:.2f} s | {cpu:.2f} s | {rss} MiB | {status}; "
              f"{int(lines_read):,} lines, the last {(log.stat().st_size - start) / 1e6:.1f} MB |")

    nuls = workdir / "nuls-2g.log"
    with open(nuls, "wb") as fh:
        fh.truncate(2 << 30)  # sparse: costs no disk
    try:
        wall, cpu, rss, rc, out = best([check, "--log", str(nuls), "-t", "10"], 1)
        print(f"| `check_dpm --log` on 2 GiB of NULs (sparse), `-t 10` | {wall:.2f} s | {cpu:.2f} s "
              f"| {rss} MiB | {out.split(' - ')[0]}: no newline in the file |")
        wall, cpu, rss, rc, out = best([check, "--log", "/dev/zero", "-t", "10"], 1)
        print(f"| `check_dpm --log /dev/zero`, `-t 10` | {wall:.2f} s | {cpu:.2f} s | {rss} MiB "
              f"| {out.split(' - ')[0]}: not a regular file |")
    finally:
        nuls.unlink()


if __name__ == "__main__":
    main()
