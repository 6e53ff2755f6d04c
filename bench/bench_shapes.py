"""Replay on every log shape of issue 17, each beside `LC_ALL=C grep -cE` on the same files.

One command, one core (taskset -c 0), grep timed right before each replay variant on the
same files in the same run, so a figure never stands without the machine's floor:

    .venv/bin/python bench/bench_shapes.py [--shapes light,polling,...] [--quick]
                                           [--workdir /tmp/bench17] [--runs 2]
                                           [--variants pure,python,compiled]

Shapes (all simulated; generated once per size into --workdir and reused):
  light       scenario `thesis` (3 clients x 25 streams, 20 + 20 threads)
  polling     scenario `heavy` with clients polling every 25 ms instead of backing off
              from 125 ms to 4 s: most DPM lines are status polls
  threads     many threads and clients: 24 clients x 40 streams, 200 fast / 400 slow
              threads, 100 name-server threads
  multi-file  scenario `multi-file` (4 files per request), DPM + DPNS logs in one replay
  10m         scenario `heavy` with --lines 10000000 (see make_10m for how it is built)

Every shape is replayed with its DPNS log too (replay reads the daemons
side by side, as a site would). Variants of replay, each skipped with the reason when its
environment makes replay exit with an error:
  pure Python   DPMSTREAM_ENGINE=python DPMSTREAM_PURE_PYTHON=1
  python+parser DPMSTREAM_ENGINE=python (the compiled line parser, Python reassembly)
  compiled      DPMSTREAM_ENGINE=compiled (the per-line loop in native/)

Each row: lines, grep s and lines/s, replay s and lines/s, replay/grep in wall time (the
target of issue 17 is <= 4) and in CPU time (user + system: the comparable figure when
other jobs share the core), peak RSS of the replay (its own rusage). Best of --runs for both.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import (  # noqa: E402
    ENVELOPE_ERE, ONE_CORE, count_lines, ensure_bytecode, run_measured,
)

TARGET_RATIO = 4.0


@dataclass(frozen=True)
class Shape:
    name: str
    scenario: str
    lines: int          # DPM lines asked of the simulator (full mode)
    quick_lines: int
    overrides: dict = field(default_factory=dict)
    dpns: bool = True   # replay the DPNS log with it


SHAPES = {
    s.name: s for s in (
        Shape("light", "thesis", 1_000_000, 100_000),
        # Clients polling every 25 ms (no back-off): ~14 status polls a request on this
        # load instead of ~4.4 (the bench prints the mean from the truth file).
        Shape("polling", "heavy", 1_000_000, 100_000,
              {"poll_first_ms": 25, "poll_factor": 1.0, "poll_max_ms": 25}),
        Shape("threads", "heavy", 1_000_000, 100_000,
              {"clients": 24, "concurrency": 40, "fthreads": 200, "sthreads": 400,
               "dpns_threads": 100}),
        Shape("multi-file", "multi-file", 1_000_000, 100_000),
        Shape("10m", "heavy", 10_000_000, 1_000_000),
    )
}

VARIANTS = {  # --variants name -> (label, environment of replay)
    "pure": ("pure Python", {"DPMSTREAM_ENGINE": "python", "DPMSTREAM_PURE_PYTHON": "1"}),
    "python": ("python engine + compiled parser", {"DPMSTREAM_ENGINE": "python"}),
    "compiled": ("compiled engine", {"DPMSTREAM_ENGINE": "compiled"}),
}


def simulate_shape(shape: Shape, lines: int, workdir: Path):
    """(files to replay, tz, host, polls per request) of a shape, simulated once."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    cfg = scenario(shape.scenario, requests=None, lines=lines, **shape.overrides)
    prefix = workdir / f"{shape.name}-{lines}"
    dpm, dpns = Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log")
    done = Path(f"{prefix}.done")  # written last: a run cut short is simulated again
    if not done.exists():
        t0 = time.perf_counter()
        simulate(cfg, prefix)
        done.write_text("")
        print(f"  simulated {shape.name}: {lines:,} DPM lines in {time.perf_counter() - t0:.0f} s",
              flush=True)
    files = [dpm, dpns] if shape.dpns else [dpm]
    return files, cfg.tz, cfg.host, polls_per_request(Path(f"{prefix}.requests.csv"))


def polls_per_request(truth: Path) -> float | None:
    import csv

    if not truth.exists():
        return None
    with open(truth, newline="") as fh:
        polls = [int(row["polls"]) for row in csv.DictReader(fh) if row.get("polls")]
    return sum(polls) / len(polls) if polls else None


@dataclass
class Timing:
    wall: float | None = None   # best of the runs
    cpu: float | None = None    # user + system of that run
    rss: int | None = None      # the largest peak RSS of the runs, MiB
    error: str | None = None    # why it could not run


def best(cmd, runs: int, env: dict) -> Timing:
    """The run of least wall time, the largest peak RSS, or the error of the first failure."""
    results = []
    for _ in range(runs):
        wall, cpu, rss, rc, _, err = run_measured(cmd, env)
        if rc:
            last = (err.strip().splitlines() or [f"exit {rc}"])[-1]
            return Timing(error=f"exit {rc}: {last}")
        results.append((wall, cpu, rss))
    wall, cpu, _ = min(results)
    return Timing(wall, cpu, max(r for _, _, r in results))


def measure(shape: Shape, files, tz: str, host: str, runs: int, out_dir: Path | None,
            variants: list[str]):
    lines = sum(count_lines(f) for f in files)
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    grep = ONE_CORE + ["grep", "-cE", ENVELOPE_ERE, *map(str, files)]
    replay = ONE_CORE + [sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", tz,
                         "--host", host, *map(str, files)]
    if out_dir is not None:
        replay += ["--out", str(out_dir)]
    rows = []
    for label, env in (VARIANTS[v] for v in variants):
        floor = best(grep, runs, {"LC_ALL": "C"})  # the floor, right before each variant
        if floor.error:
            raise SystemExit(f"grep failed: {floor.error}")
        got = best(replay, runs, env)
        rows.append((label, floor, got))
        if got.error:
            print(f"  {shape.name}, {label}: skipped ({got.error})", flush=True)
        else:
            print(f"  {shape.name}, {label}: grep {floor.wall:.2f} s, replay {got.wall:.2f} s "
                  f"({got.wall / floor.wall:.1f}x; CPU {got.cpu:.2f} s against "
                  f"{floor.cpu:.2f} s)", flush=True)
    return lines, size_mb, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help=f"comma-separated, of: {', '.join(SHAPES)}")
    ap.add_argument("--quick", action="store_true",
                    help="a tenth of the lines per shape (100 k; 1 M for 10m) and one run")
    ap.add_argument("--runs", type=int, default=None, help="best of N (default 2; 1 with --quick "
                                                            "and for the 10 M-line log)")
    ap.add_argument("--workdir", default="/tmp/bench17")
    ap.add_argument("--write-records", action="store_true",
                    help="replay with --out (requests.csv and calls.csv written), as a site runs it")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"replay variants, comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_argument("--generate-only", action="store_true",
                    help="simulate the logs missing from --workdir, measure nothing")
    args = ap.parse_args()
    names = [n.strip() for n in args.shapes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        ap.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := [v for v in variants if v not in VARIANTS]:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"one core: {'taskset -c 0' if ONE_CORE else 'taskset missing: not pinned'}; cpus "
          f"{os.cpu_count()}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print(ensure_bytecode(), flush=True)

    table = []
    for name in names:
        shape = SHAPES[name]
        lines = shape.quick_lines if args.quick else shape.lines
        runs = args.runs or (1 if args.quick or lines > 2_000_000 else 2)
        files, tz, host, polls = simulate_shape(shape, lines, workdir)
        if args.generate_only:
            continue
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            out_dir = Path(tmp) if args.write_records else None
            n, size_mb, rows = measure(shape, files, tz, host, runs, out_dir, variants)
        table.append((shape, n, size_mb, polls, runs, rows))

    if args.generate_only:
        return 0
    print(f"\nload after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{'records written (--out)' if args.write_records else 'summary only (no --out)'}")
    print("| shape | lines (MB) | polls/req | grep s | grep lines/s | replay variant | replay s "
          "| replay lines/s | replay/grep wall | replay/grep CPU | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, n, size_mb, polls, runs, rows in table:
        for label, floor, got in rows:
            head = (f"{shape.name} | {n:,} ({size_mb:.0f}) | "
                    f"{'-' if polls is None else f'{polls:.1f}'} | {floor.wall:.2f} | "
                    f"{n / floor.wall:,.0f}")
            if got.error:
                print(f"| {head} | {label} | skipped: {got.error.split(' (')[0]} | | | | |")
                continue
            ratio = got.wall / floor.wall
            mark = "" if ratio <= TARGET_RATIO else " (over 4x)"
            cpu_ratio = got.cpu / floor.cpu if floor.cpu else float("inf")
            print(f"| {head} | {label} | {got.wall:.2f} | {n / got.wall:,.0f} | {ratio:.1f}{mark} "
                  f"| {cpu_ratio:.1f} | {got.rss} MiB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
