"""The yardstick of the replay and worker benches: `LC_ALL=C grep -cE` with the envelope
regex on the same files, in the same run, on the same core (issue 30 item 2).

On a shared machine a wall time is the neighbours' as much as ours, so every comparison
here alternates the measured command with grep, one round each, and reports the ratio
of CPU times (user + system of each child) beside the ratio of wall times. It goes on
until the CPU ratios of the last WINDOW rounds lie within TOLERANCE of their median, or
says that they did not settle after max_rounds. The load average is printed with every
figure, and the commands run pinned to one core (taskset) where taskset exists.

    from yardstick import ONE_CORE, against_grep, command, load_note
    cmp = against_grep(command(ONE_CORE + replay_argv), files, lines)
    print(load_note()); print(cmp.summary("replay"))
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ENVELOPE_ERE = r"^[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})? +[0-9]+(,[0-9]+)? [^ :]+: "
# A syslog envelope of either stamp style (DOME's logs): `May 30 08:44:05 host prog[pid]: `
# or RFC 3339 `2017-05-30T08:44:05.123456+02:00 host prog[pid]: `.
SYSLOG_ENVELOPE_ERE = (r"^([A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}"
                       r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+([+-][0-9:]+|Z)) [^ ]+ [^ :]+: ")
CORE = "0"
ONE_CORE = ["taskset", "-c", CORE] if shutil.which("taskset") else []
GREP_ENV = {"LC_ALL": "C"}    # byte matching: the floor, not what a UTF-8 locale costs
WINDOW = 3                    # rounds whose CPU ratios must agree
TOLERANCE = 0.05              # within 5 % of their median
MAX_ROUNDS = 8


def pinning_note() -> str:
    return (f"pinned to core {CORE} (taskset -c {CORE})" if ONE_CORE
            else "taskset missing: not pinned")


def load_note() -> str:
    """The load average beside a figure: on a shared machine it says what the wall time
    waited for."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cpus"


@dataclass(frozen=True)
class Measured:
    wall: float          # seconds
    cpu: float           # user + system seconds of the measured process
    rss_mib: int = 0     # its peak RSS
    rc: int = 0
    out: str = ""
    err: str = ""


# Linux keeps a process's peak RSS across exec: a child forked from this bench starts with
# the bench's own peak (a bench that simulated its logs in-process made every `replay` look
# 116 MiB). So the command runs under a small launcher, and the figures are those of the
# launcher's child: forked from a process of a few MiB, its peak is its own. The launcher
# writes that child's CPU seconds and peak RSS (KiB) to the file named by its first argument.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        print(f"{sys.argv[2]}: {exc}", file=sys.stderr, flush=True)
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(cmd: list[str], env: dict | None = None) -> Measured:
    """One command: wall time, its own CPU time and peak RSS (its own, through the launcher
    above: not the bench's), exit code, stdout and stderr."""
    with tempfile.TemporaryFile("w+") as errfile, \
            tempfile.NamedTemporaryFile("r", suffix=".rusage") as usage_file:
        launcher = [sys.executable, "-S", "-c", _LAUNCHER, usage_file.name]
        t0 = time.perf_counter()
        # stderr to a file: reading two pipes could block
        proc = subprocess.Popen(launcher + cmd, stdout=subprocess.PIPE, stderr=errfile,
                                text=True, env={**os.environ, **(env or {})})
        out = proc.stdout.read()
        proc.wait()
        wall = time.perf_counter() - t0
        proc.stdout.close()
        cpu, maxrss_kib = usage_file.read().split()
        errfile.seek(0)
        return Measured(wall, float(cpu), int(maxrss_kib) // 1024, proc.returncode, out,
                        errfile.read())


def command(cmd: list[str], env: dict | None = None) -> Callable[[], Measured]:
    """A measurement of `cmd` for against_grep."""
    return lambda: run_measured(cmd, env)


def grep_command(paths, pattern: str = ENVELOPE_ERE) -> list[str]:
    # Into a pipe (run_measured's): GNU grep stops at the first match when its output is /dev/null.
    return ONE_CORE + ["grep", "-cE", pattern, *map(str, paths)]


def grep_seconds(*paths: Path) -> float:
    """Best wall time of three greps over these files (the older benches' figure)."""
    return min(run_measured(grep_command(paths), GREP_ENV).wall for _ in range(3))


@dataclass
class Comparison:
    """Rounds of (measured, yardstick), each pair run back to back: the yardstick is grep
    (the grep_* figures) unless alternate() was given another."""
    lines: int
    rounds: list[tuple[Measured, Measured]] = field(default_factory=list)
    settled: bool = False
    error: str | None = None

    def _last(self) -> list[tuple[Measured, Measured]]:
        return self.rounds[-WINDOW:]

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(m.cpu / max(g.cpu, 1e-6) for m, g in self._last())

    @property
    def wall_ratio(self) -> float:
        return statistics.median(m.wall / g.wall for m, g in self._last())

    @property
    def grep_cpu(self) -> float:
        return statistics.median(g.cpu for _, g in self._last())

    @property
    def grep_wall(self) -> float:
        return statistics.median(g.wall for _, g in self._last())

    @property
    def cpu(self) -> float:
        return statistics.median(m.cpu for m, _ in self._last())

    @property
    def wall(self) -> float:
        return statistics.median(m.wall for m, _ in self._last())

    @property
    def rss_mib(self) -> int:
        return max(m.rss_mib for m, _ in self.rounds)

    def grep_rate(self) -> str:
        return (f"grep {self.lines / max(self.grep_cpu, 1e-6):,.0f} lines per CPU s, "
                f"{self.lines / self.grep_wall:,.0f} lines/s wall")

    def stability(self) -> str:
        ratios = ", ".join(f"{m.cpu / max(g.cpu, 1e-6):.2f}" for m, g in self.rounds)
        verdict = ("settled" if self.settled else
                   f"DID NOT SETTLE (last {WINDOW} not within {TOLERANCE:.0%} of their median)")
        return f"{verdict} after {len(self.rounds)} rounds; CPU ratios {ratios}"

    def summary(self, label: str) -> str:
        if self.error:
            return f"{label}: skipped ({self.error})"
        return (f"{label}: {self.cpu_ratio:.2f}x grep in CPU time, {self.wall_ratio:.2f}x in wall "
                f"time ({self.cpu:.2f} s CPU, {self.wall:.2f} s wall, "
                f"{self.lines / max(self.cpu, 1e-6):,.0f} lines per CPU s; {self.grep_rate()}); "
                f"{self.stability()}; {load_note()}")


def is_stable(ratios: list[float]) -> bool:
    if len(ratios) < WINDOW:
        return False
    last = ratios[-WINDOW:]
    mid = statistics.median(last)
    return all(abs(r - mid) <= TOLERANCE * mid for r in last)


def alternate(measure: Callable[[], Measured], yardstick: Callable[[], Measured], lines: int, *,
              min_rounds: int = WINDOW, max_rounds: int = MAX_ROUNDS) -> Comparison:
    """Alternate `yardstick()` and `measure()`, one each a round, until the CPU ratio is
    stable (or max_rounds). Pairs run back to back see the same machine: a drift of the
    machine's pace over minutes moves both. A failing measured command ends it with the
    error (its last stderr line)."""
    result = Comparison(lines)
    ratios: list[float] = []
    while len(result.rounds) < max_rounds:
        floor = yardstick()
        got = measure()
        if got.rc:
            last = (got.err.strip().splitlines() or [f"exit {got.rc}"])[-1]
            result.error = f"exit {got.rc}: {last}"
            return result
        result.rounds.append((got, floor))
        ratios.append(got.cpu / max(floor.cpu, 1e-6))
        if len(ratios) >= min_rounds and is_stable(ratios):
            result.settled = True
            break
    return result


def against_grep(measure: Callable[[], Measured], files, lines: int, *,
                 min_rounds: int = WINDOW, max_rounds: int = MAX_ROUNDS,
                 pattern: str = ENVELOPE_ERE) -> Comparison:
    """alternate() with grep for `pattern` (the logs' envelope) on `files`."""
    grep = grep_command(files, pattern)

    def floor() -> Measured:
        got = run_measured(grep, GREP_ENV)
        if got.rc:
            raise RuntimeError(f"grep failed (exit {got.rc}): {got.err.strip()}")
        return got
    return alternate(measure, floor, lines, min_rounds=min_rounds, max_rounds=max_rounds)
