"""The commands around replay, each beside `replay` and `LC_ALL=C grep -cE` on the same
files in the same run (issue 30: `report`, `whatif` calibration and `profile check`
within 2x of `replay`, CPU time).

    .venv/bin/python bench/bench_commands.py [--requests 3000] [--workdir /tmp/bench_commands]
                                             [--max-rounds 8] [--commands replay,report,...]
                                             [--instructions]

The input is the thesis scenario (3 clients x 25 streams, 20 + 20 threads) simulated with
--requests request cycles: its DPM log and its DPNS log (3000 cycles: about 108 k lines,
the log issue 30 measured on). Each command runs pinned to one core and alternates with
grep on the same files (bench/yardstick.py) until the CPU ratio settles, then with
`replay` itself until that ratio settles: the x-replay figure is of pairs run back to back
(on a machine whose pace drifts by a third over minutes, medians taken minutes apart were
not a ratio of anything). With --instructions each command also runs once under valgrind's
callgrind (PYTHONHASHSEED=0): its instruction count and their ratio to replay's, a figure
no neighbour moves. Commands:
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
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import count_lines, ensure_bytecode  # noqa: E402
from yardstick import ONE_CORE, against_grep, alternate, command, load_note, pinning_note  # noqa: E402

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


def instructions(argv: list[str]) -> int | None:
    """Instructions of one run of `argv` under callgrind (None without valgrind). Unpinned:
    an instruction count is the same on any core; PYTHONHASHSEED=0 keeps the set and dict
    orders, and so the work, the same run to run."""
    if not shutil.which("valgrind"):
        return None
    argv = argv[len(ONE_CORE):]
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", proc.stderr)
    return int(found.group(1)) if found else None


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
    ap.add_argument("--instructions", action="store_true",
                    help="also count each command's instructions once under valgrind's callgrind "
                         "(a figure the machine's load does not move; ~50x slower than a run)")
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

    results, of_replay, counted = {}, {}, {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        argv = commands(files, tz, host, Path(tmp))
        replay_run = answered(argv["replay"], ())
        for name in chosen:
            run = answered(argv[name], ANSWERS.get(name, ()))
            cmp = against_grep(run, files, lines, max_rounds=args.max_rounds)
            results[name] = cmp
            print(f"  {cmp.summary(name)}", flush=True)
            if name != "replay" and not cmp.error:
                of_replay[name] = alternate(run, replay_run, lines, max_rounds=args.max_rounds)
                print(f"    against replay, alternated: {of_replay[name].cpu_ratio:.2f}x in CPU "
                      f"time; {of_replay[name].stability()}", flush=True)
            if args.instructions:
                counted[name] = instructions(argv[name])
                if counted[name] is None:
                    print("    instructions: not counted (no valgrind, or it failed)", flush=True)

    print(f"\n{load_note()} (after); {pinning_note()}; medians of the last rounds; "
          f"{lines:,} lines")
    print("| command | CPU s | x grep (CPU) | x replay (CPU, alternated) | wall s | settled "
          "(grep, replay) | peak RSS | instructions | x replay (instructions) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, cmp in results.items():
        if cmp.error:
            print(f"| {name} | skipped: {cmp.error} | | | | | | | |")
            continue
        pairs = of_replay.get(name)
        if pairs is None or pairs.error:
            ratio, settled = "", ""
        else:
            over = "" if pairs.cpu_ratio <= TARGET_OF_REPLAY else f" (over {TARGET_OF_REPLAY:g}x)"
            ratio = f"{pairs.cpu_ratio:.2f}{over}"
            settled = ", yes" if pairs.settled else f", NO ({len(pairs.rounds)} rounds)"
        count = counted.get(name)
        base = counted.get("replay")
        print(f"| {name} | {cmp.cpu:.2f} | {cmp.cpu_ratio:.1f} | {ratio} | {cmp.wall:.2f} "
              f"| {'yes' if cmp.settled else f'NO ({len(cmp.rounds)} rounds)'}{settled} "
              f"| {cmp.rss_mib} MiB | {f'{count / 1e6:,.1f} M' if count else ''} "
              f"| {f'{count / base:.2f}' if count and base and name != 'replay' else ''} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
