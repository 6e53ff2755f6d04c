"""The commands around replay, each beside `replay` and `LC_ALL=C grep -cE` on the same
files in the same run (issue 30: `report`, `whatif` calibration and `profile check`
within 2x of `replay`, CPU time).

    .venv/bin/python bench/bench_commands.py [--requests 3000] [--workdir /tmp/bench_commands]
                                             [--max-rounds 8] [--commands replay,report,...]

The input is the thesis scenario (3 clients x 25 streams, 20 + 20 threads) simulated with
--requests request cycles: its DPM log and its DPNS log (3000 cycles: about 108 k lines,
the log issue 30 measured on). Each command runs pinned to one core and alternates with
grep on the same files (bench/yardstick.py) until the CPU ratio settles; each row gives
its CPU time against grep's and against replay's from the same run. Commands:
  replay            summary only (the yardstick of the others)
  report            the page with its what-if section (simulator runs), as by default
  report-no-whatif  the page alone (--no-whatif): reading, analysis, figures
  whatif            `whatif --sthreads 2N` as by default (3 seeds x 2 scenarios of the model)
  whatif-cal        `whatif` with one seed of 100 model requests: reading and calibration,
                    the model's runs kept small
  profile-check     `profile check` of both files with every bundled profile
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import count_lines, ensure_bytecode  # noqa: E402
from yardstick import ONE_CORE, against_grep, command, load_note, pinning_note  # noqa: E402

TARGET_OF_REPLAY = 2.0   # issue 30: within 2x of replay's CPU time
SLOW_THREADS_AFTER = 40  # whatif's change: twice the thesis's 20 slow threads


def simulate_thesis(requests: int, workdir: Path):
    """(DPM log, DPNS log, zone, host) of the thesis scenario, simulated once per size."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    cfg = scenario("thesis", requests=requests)
    prefix = workdir / f"thesis-{requests}"
    done = Path(f"{prefix}.done")   # written last: a run cut short is simulated again
    if not done.exists():
        t0 = time.perf_counter()
        simulate(cfg, prefix)
        done.write_text("")
        print(f"simulated the thesis scenario, {requests} requests, in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    return Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log"), cfg.tz, cfg.host


def commands(files, tz: str, host: str, out: Path) -> dict[str, list[str]]:
    dpmstream = ONE_CORE + [sys.executable, "-m", "dpmstream"]
    logs = ["--tz", tz, "--host", host, *map(str, files)]
    whatif = dpmstream + ["whatif", "--sthreads", str(SLOW_THREADS_AFTER), "--out", str(out / "whatif")]
    return {
        "replay": dpmstream + ["replay", "--quiet", *logs],
        "report": dpmstream + ["report", "--out", str(out / "report.html"), *logs],
        "report-no-whatif": dpmstream + ["report", "--no-whatif", "--out",
                                         str(out / "report.html"), *logs],
        "whatif": whatif + logs,
        "whatif-cal": whatif + ["--seeds", "1", "--model-requests", "100", *logs],
        "profile-check": dpmstream + ["profile", "check", *map(str, files)],
    }


# Exit codes that are answers, not failures: whatif's 3 (the model misses a p50: the
# prediction is still written), profile check's 1 (a WARNING block).
ANSWERS = {"whatif": (3,), "whatif-cal": (3,), "profile-check": (1,)}


def answered(argv: list[str], ok: tuple[int, ...]):
    measure = command(argv)

    def run():
        got = measure()
        return dataclasses.replace(got, rc=0) if got.rc in ok else got
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000,
                    help="request cycles of the simulated thesis log (default 3000: ~108 k lines; "
                         "200 for a quick look)")
    ap.add_argument("--workdir", default="/tmp/bench_commands")
    ap.add_argument("--max-rounds", type=int, default=8,
                    help="rounds of (grep, command) at most before saying the ratio did not settle")
    names = "replay,report,report-no-whatif,whatif,whatif-cal,profile-check"
    ap.add_argument("--commands", default=names, help=f"comma-separated, of: {names} "
                    "(replay is always measured: the others are given against it)")
    args = ap.parse_args()
    chosen = [c.strip() for c in args.commands.split(",") if c.strip()]
    if unknown := [c for c in chosen if c not in names.split(",")]:
        ap.error(f"unknown command(s) {', '.join(unknown)}; known: {names}")
    if "replay" not in chosen:
        chosen.insert(0, "replay")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"{pinning_note()}; {load_note()}", flush=True)
    print(ensure_bytecode(), flush=True)
    dpm, dpns, tz, host = simulate_thesis(args.requests, workdir)
    files = [dpm, dpns]
    lines = sum(count_lines(f) for f in files)
    print(f"input: {dpm.name} + {dpns.name}, {lines:,} lines", flush=True)

    results = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        argv = commands(files, tz, host, Path(tmp))
        for name in chosen:
            cmp = against_grep(answered(argv[name], ANSWERS.get(name, ())), files, lines,
                               max_rounds=args.max_rounds)
            results[name] = cmp
            print(f"  {cmp.summary(name)}", flush=True)

    replay = results["replay"]
    print(f"\n{load_note()} (after); {pinning_note()}; medians of the last rounds; "
          f"{lines:,} lines")
    print("| command | CPU s | x grep (CPU) | x replay (CPU) | wall s | settled | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, cmp in results.items():
        if cmp.error:
            print(f"| {name} | skipped: {cmp.error} | | | | | |")
            continue
        of_replay = cmp.cpu / max(replay.cpu, 1e-6) if not replay.error else float("nan")
        mark = "" if name == "replay" or of_replay <= TARGET_OF_REPLAY else \
            f" (over {TARGET_OF_REPLAY:g}x)"
        print(f"| {name} | {cmp.cpu:.2f} | {cmp.cpu_ratio:.1f} | {of_replay:.1f}{mark} "
              f"| {cmp.wall:.2f} | {'yes' if cmp.settled else f'NO ({len(cmp.rounds)} rounds)'} "
              f"| {cmp.rss_mib} MiB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
