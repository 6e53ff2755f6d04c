"""Replay benchmark: a simulated log of >= 1 M lines through `dpmstream replay`, on one core.

Prints, for each engine, replay's CPU and wall time as ratios of `LC_ALL=C grep -cE` with
the envelope regex on the same files (the floor: reading and matching, nothing else),
alternated with it until the ratio settles (bench/yardstick.py), with grep's rate and the
load average; replay's lines/s, MB/s and peak RSS; and the memory of 100,000 requests held
in flight.

    .venv/bin/python bench/bench_replay.py [--lines 1000000] [--workdir bench/out]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from yardstick import (  # noqa: E402
    ONE_CORE, against_grep, command, grep_command, load_note, pinning_note, run_measured,
)


def ensure_bytecode() -> str:
    """Compile the package's modules to bytecode before measuring a command that imports
    them, and say so. An installed package has its .pyc files, and Python writes them on
    first use; with PYTHONDONTWRITEBYTECODE set (this sandbox sets it) an editable tree never
    gets any, and every run would compile ~40 ms of source a real site never compiles."""
    import compileall
    import sysconfig
    repo = Path(__file__).resolve().parents[1]
    dirs = ["dpmstream", "parsers", "streams", "probes", "report", "simulator", "regex_profiles"]
    ok = all(compileall.compile_dir(str(repo / d), quiet=1) for d in dirs if (repo / d).is_dir())
    # An editable install's finder, imported at every start by its .pth: its bytecode is
    # as stale as the tree's would be (~13 M instructions a run, each command alike).
    finders = Path(sysconfig.get_paths()["purelib"]).glob("__editable__*finder.py")
    ok = all([compileall.compile_file(str(f), quiet=1) for f in finders]) and ok
    why = " (PYTHONDONTWRITEBYTECODE is set here)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    return f"bytecode: {'compiled' if ok else 'compile FAILED'} before measuring{why}"


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of this child in MiB, stdout) of one command."""
    got = run_measured(cmd, env)
    if got.rc:
        sys.stderr.write(got.err)
        raise subprocess.CalledProcessError(got.rc, cmd)
    return got.wall, got.rss_mib, got.out


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
from dpmstream.parsers.settings import ReassemblySettings
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
p = Pipeline(lambda r: None, ReassemblySettings(max_in_flight={n} + 1))
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
    print(f"{pinning_note()}; {load_note()}")
    print(ensure_bytecode())

    # What a UTF-8 terminal's grep costs, once: the yardstick below is the byte-matching one.
    utf8 = run_measured(grep_command(files), {"LC_ALL": "C.UTF-8"})
    print(f"grep -cE envelope (LC_ALL=C.UTF-8): {utf8.wall:.2f} s  {lines / utf8.wall:,.0f} lines/s "
          f"(CPU {utf8.cpu:.2f} s)")

    cmd = ONE_CORE + [sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", tz,
                      "--host", host, *map(str, files)]
    from dpmstream.parsers import fastpath
    variants = [("pure Python", {"DPMSTREAM_PURE_PYTHON": "1"})]
    if fastpath.available():  # each engine: bench/bench_shapes.py
        variants.append(("compiled (default engine where built)", {}))
    else:
        print("compiled line parser not built (no Rust toolchain at install): pure Python only")
    for label, env in variants:
        cmp = against_grep(command(cmd, env), files, lines)
        print(cmp.summary(f"dpmstream replay, {label}"))
        if not cmp.error:
            print(f"  {lines / cmp.wall:,.0f} lines/s wall, {size_mb / cmp.wall:.1f} MB/s, "
                  f"peak RSS {cmp.rss_mib} MiB")
    print(in_flight_memory(args.in_flight))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
