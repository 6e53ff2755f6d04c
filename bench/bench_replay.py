"""Replay benchmark: a simulated log of >= 1 M lines through `dpmstream replay`, on one core.

Prints lines/s, MB/s and peak RSS of the replay, the same figures for `grep -c` with the
envelope regex on the same file (the floor: reading and matching, nothing else), and the
memory of 100,000 requests held in flight.

    .venv/bin/python bench/bench_replay.py [--lines 1000000] [--workdir bench/out]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENVELOPE_ERE = r"^[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})? +[0-9]+(,[0-9]+)? [^ :]+: "
ONE_CORE = ["taskset", "-c", "0"] if shutil.which("taskset") else []


def grep_seconds(*paths: Path) -> float:
    """Best of three: `LC_ALL=C grep -cE` with the envelope regex over these files, one
    core (the machine's yardstick beside every figure: machines differ by 3x)."""
    cmd = [*ONE_CORE, "grep", "-cE", ENVELOPE_ERE, *map(str, paths)]
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        # Into a pipe: GNU grep stops at the first match when its output is /dev/null.
        subprocess.run(cmd, env={**os.environ, "LC_ALL": "C"}, stdout=subprocess.PIPE, check=True)
        wall = time.perf_counter() - t0
        best = wall if best is None else min(best, wall)
    return best


def ensure_bytecode() -> str:
    """Compile the package's modules to bytecode before measuring a command that imports
    them, and say so. An installed package has its .pyc files, and Python writes them on
    first use; with PYTHONDONTWRITEBYTECODE set (this sandbox sets it) an editable tree never
    gets any, and every run would compile ~40 ms of source a real site never compiles."""
    import compileall
    repo = Path(__file__).resolve().parents[1]
    dirs = ["dpmstream", "parsers", "streams", "probes", "report", "simulator"]
    ok = all(compileall.compile_dir(str(repo / d), quiet=1) for d in dirs if (repo / d).is_dir())
    why = " (PYTHONDONTWRITEBYTECODE is set here)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    return f"bytecode: {'compiled' if ok else 'compile FAILED'} before measuring{why}"


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[float, float, int, int, str, str]:
    """(wall seconds, CPU seconds (user + system), peak RSS of this child in MiB, exit
    code, stdout, stderr) of one command. On a loaded machine the CPU time is the figure
    to compare; the wall time includes waiting for the core."""
    with tempfile.TemporaryFile("w+") as errfile:  # a file: reading two pipes could block
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfile, text=True,
                                env={**os.environ, **(env or {})})
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not the max so far
        wall = time.perf_counter() - t0
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        errfile.seek(0)
        return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, proc.returncode,
                out, errfile.read())


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of this child in MiB, stdout) of one command."""
    wall, _, rss, rc, out, err = run_measured(cmd, env)
    if rc:
        sys.stderr.write(err)
        raise subprocess.CalledProcessError(rc, cmd)
    return wall, rss, out


def make_log(workdir: Path, lines: int) -> tuple[Path, Path, str, str]:
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    prefix = workdir / f"heavy-{lines}"
    cfg = scenario("heavy", requests=None, lines=lines)
    if not (prefix.with_suffix(".log")).exists():
        t0 = time.perf_counter()
        simulate(cfg, prefix)
        print(f"simulated {lines:,} lines in {time.perf_counter() - t0:.1f} s")
    return Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log"), cfg.tz, cfg.host


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))


def in_flight_memory(n: int) -> str:
    """RSS of a pipeline holding n open put requests (put called, never finished)."""
    code = f"""
import resource, uuid
from dpmstream.parsers.pipeline import Pipeline
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
p = Pipeline(lambda r: None, max_in_flight={n} + 1)
src = p.source("b", host="head01", tz="UTC", year=2011)
for i in range({n}):
    ms = i % 1000
    s = i // 1000
    stamp = f"08/12 10:{{s // 60 % 60:02d}}:{{s % 60:02d}}.{{ms:03d}}"
    tok = uuid.UUID(int=i * 7919 + 1)
    src.feed(f"{{stamp}} 12345,3 dpm_srv_put: DP092 - put request by /DC=ch/DC=cern/CN=user{{i % 50}} (1001,1001) from lxb{{i % 400:04d}}.cern.ch")
    src.feed(f"{{stamp}} 12345,3 dpm_srv_put: DP098 - put 1 {{tok}}")
    src.feed(f"{{stamp}} 12345,3 dpm_srv_put: DP098 - put 0 srm://head01.cern.ch/dpm/cern.ch/home/dteam/f{{i}}")
    src.feed(f"{{stamp}} 12345,3 dpm_srv_put: returns 0")
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(p.stats.in_flight, p.stats.evictions, rss0 // 1024, rss1 // 1024)
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    held, evicted, rss0, rss1 = out.stdout.split()
    return (f"in flight: {int(held):,} requests held (evicted {evicted}); peak RSS {rss1} MiB "
            f"(interpreter and code alone: {rss0} MiB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="bench/out")
    ap.add_argument("--in-flight", type=int, default=100_000)
    args = ap.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dpm_log, dpns_log, tz, host = make_log(workdir, args.lines)
    files = [dpm_log, dpns_log]
    lines = sum(count_lines(f) for f in files)
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"input: {lines:,} lines, {size_mb:.1f} MB ({', '.join(f.name for f in files)})")
    print(f"one core: {'taskset -c 0' if ONE_CORE else 'taskset missing: not pinned'}; "
          f"cpus online {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    print(ensure_bytecode())

    grep = ONE_CORE + ["grep", "-cE", ENVELOPE_ERE, *map(str, files)]
    for locale in ("C", "C.UTF-8"):  # byte matching, then what a UTF-8 terminal gets
        grep_wall = min(timed(grep, {"LC_ALL": locale})[0] for _ in range(3))
        print(f"grep -cE envelope (LC_ALL={locale}): {grep_wall:.2f} s  "
              f"{lines / grep_wall:,.0f} lines/s  {size_mb / grep_wall:.1f} MB/s")

    cmd = ONE_CORE + [sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", tz,
                      "--host", host, *map(str, files)]
    from dpmstream.parsers import fastpath
    variants = [("pure Python", {"DPMSTREAM_PURE_PYTHON": "1"})]
    if fastpath.available():  # each engine: bench/bench_shapes.py
        variants.append(("compiled (default engine where built)", {}))
    else:
        print("compiled line parser not built (no Rust toolchain at install): pure Python only")
    for label, env in variants:
        runs = [timed(cmd, env) for _ in range(3)]
        wall = min(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        print(f"dpmstream replay, {label}:  {wall:.2f} s  {lines / wall:,.0f} lines/s  "
              f"{size_mb / wall:.1f} MB/s  peak RSS {peak} MiB (best of 3)")
    print(in_flight_memory(args.in_flight))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
