"""How well `dpmstream whatif` predicts a tuning, against the simulator's ground truth.

Each case: simulate a log at one setting (seed 11), run `dpmstream whatif` on it (the DPM
and DPNS logs) for another setting, and simulate that setting with another seed (12) as
the truth. Prints, per phase, the p50 the log shows, the model's at the current setting,
the predicted what-if p50 (with its spread over seeds) and the truth's, and the error.

    .venv/bin/python bench/bench_whatif.py [--requests 1500] [--seeds 3]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dpmstream.simulator import SimConfig, simulate

PHASES = ("queue", "proc", "ready_wait", "total")
CASES = [
    # name, the log's setting, whatif options, the setting predicted
    ("thread-bound: 50 dirs, 20 -> 70 slow threads", {"dirs": 50}, ["--sthreads", "70"], {"sthreads": 70}),
    ("lock-bound: one dir (same_dir), 20 -> 70 slow threads", {"same_dir": True}, ["--sthreads", "70"], {"sthreads": 70}),
    ("thesis: a dir per client, 20 -> 70 slow threads", {}, ["--sthreads", "70"], {"sthreads": 70}),
    ("lock-bound: one dir -> spread over 50 dirs", {"same_dir": True}, ["--dirs", "50"], {"same_dir": False, "dirs": 50}),
    ("thesis: twice the load (--rate-scale 2: 3 x 50 streams)", {}, ["--rate-scale", "2"], {"concurrency": 50}),
    ("thesis: 20 -> 6 fast threads", {}, ["--fthreads", "6"], {"fthreads": 6}),
    ("open load (30/s, Poisson): 20 -> 17 slow threads", {"rate": 30.0}, ["--sthreads", "17"], {"sthreads": 17}),
    # Past saturation (load 1.1): the queue grows all run long, its p50 follows the run's
    # length and the arrivals drawn; shown for what it is, not counted in the worst error.
    ("overloaded open load (30/s): 20 -> 14 slow threads", {"rate": 30.0}, ["--sthreads", "14"], {"sthreads": 14}),
]


def p50(records, phase):
    values = [r[f"{phase}_s"] for r in records if r["op"] == "put" and r[f"{phase}_s"] is not None]
    return statistics.median(values) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, base, options, changes) in enumerate(CASES):
            work = Path(tmp) / f"case{i}"
            log = simulate(SimConfig(requests=args.requests, seed=11, **base), work / "log")
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "dpmstream", "whatif", "--host", "head01", *options,
                 "--seeds", str(args.seeds), "--out", str(work / "out"),
                 str(log.log_path), str(log.dpns_log_path)],
                capture_output=True, text=True)
            took = time.perf_counter() - t0
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            truth = simulate(SimConfig(requests=args.requests, seed=12, **{**base, **changes}), work / "truth")
            with open(work / "out" / "prediction.csv", newline="") as fh:
                rows = {(r["scenario"], r["phase"]): r for r in csv.DictReader(fh) if r["op"] == "put"}
            fit = next(line for line in done.stdout.splitlines() if line.startswith("fit:"))
            load = next(line for line in done.stdout.splitlines() if "var/mean" in line)
            print(f"\n{name}  ({args.requests} requests, {args.seeds} seeds, whatif took {took:.1f} s)")
            print(f"  load: {load.split('load modelled as ')[1]}")
            print(f"  {fit}")
            print(f"  {'phase':<11} {'log p50':>8} {'current':>8} {'what-if p50 [seeds]':>26} {'truth':>8} {'error':>7}")
            for phase in PHASES:
                pred = rows[("whatif", phase)]
                got, want = float(pred["p50"]), p50(truth.requests, phase)
                err = abs(got - want) / want if want > 0.020 else abs(got - want)
                unit = "" if want > 0.020 else " s"
                if want > 0.020 and not name.startswith("overloaded"):
                    worst = max(worst, err)
                print(f"  {phase:<11} {p50(log.requests, phase):>8.3f} "
                      f"{float(rows[('current', phase)]['p50']):>8.3f} "
                      f"{got:>10.3f} [{float(pred['p50_min']):.3f}..{float(pred['p50_max']):.3f}] "
                      f"{want:>8.3f} {err * 100 if not unit else err:>6.1f}{'%' if not unit else unit}")
    print(f"\nworst relative error on a p50 over 20 ms (overloaded case aside): {worst * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
