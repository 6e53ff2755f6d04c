"""A real pipeline exporting to a real Prometheus, for the dashboard, probe and Nagios tests.

A simulated head node's (or DOME site's) logs are written in two halves while `dpmstream run` follows
them (like live logs growing), so that Prometheus scrapes counters that change: rate()
and histogram_quantile() then have data, as in production.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from dpmstream.commands.stack.process import free_port, wait_for
from dpmstream.commands.stack.prometheus import Prometheus

DPMSTREAM = str(Path(sys.executable).with_name("dpmstream"))
HOST = "dpmhead01.cern.ch"
# Lines no profile rule knows: the "unparsed lines" panel must show them.
JUNK = ["08/12 14:33:00.000 12345,3 dpm_srv_put: a message no profile knows\n",
        "this is not a DPM log line at all\n"]


@dataclass
class LiveStack:
    prometheus: Prometheus
    metrics_url: str
    sim_prefix: Path
    process: subprocess.Popen
    requests_truth: list[dict] = field(default_factory=list)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.prometheus.stop()


def simulate(prefix: Path, *args: str) -> Path:
    """`dpmstream simulate --out PREFIX --quiet ARGS`, run by the command's function in this
    process (tests.helpers.dpmstream_in_process): the same files as the CLI writes, without
    an interpreter's start. tests/commands/test_simulate.py tests the process itself."""
    from tests.helpers import dpmstream_in_process

    prefix.parent.mkdir(parents=True, exist_ok=True)
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--quiet", *args, text=True)
    assert done.returncode == 0, done.stderr
    return prefix


REQUESTS = "dpm_requests_total"  # the counter whose scraped value tells what was read
DOME_CALLS = "dpm_dome_calls_total"


def _scraped_total(prom: Prometheus, counter: str = REQUESTS) -> float | None:
    return prom.value(f"sum({counter})")


def _exported_total(metrics_url: str, counter: str = REQUESTS) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(counter + "{"))


def _latest_sample_s(prom: Prometheus, counter: str = REQUESTS) -> float:
    """Prometheus' time of its latest scrape of the counter."""
    return prom.value(f"max(timestamp({counter}))") or 0.0


def _wait_scrapes(prom: Prometheus, scrapes: int = 3, timeout: float = 60.0,
                  counter: str = REQUESTS) -> None:
    """Until Prometheus has scraped the current values `scrapes` more times (1 s apart),
    so that rate() over them has points on both sides."""
    since = _latest_sample_s(prom, counter)
    assert wait_for(lambda: _latest_sample_s(prom, counter) >= since + scrapes - 0.5,
                    timeout=timeout, interval=0.5), \
        f"Prometheus did not scrape {scrapes} more times in {timeout:.0f} s"


def _wait_stable(metrics_url: str, above: float, timeout: float = 60.0,
                 counter: str = REQUESTS) -> float:
    """The exported counter total once it is above `above` and unchanged for a second
    (dpmstream run has read everything written so far)."""
    previous = [-1.0]

    def stable() -> bool:
        now = _exported_total(metrics_url, counter)
        done = now == previous[0] and now > above
        previous[0] = now
        return done

    assert wait_for(stable, timeout=timeout, interval=1.0), "dpmstream run never settled"
    return previous[0]


def start_live_stack(workdir: Path, sim_args=("--scenario", "mixed", "--rate", "5", "--duration", "300"),
                     junk: bool = True, run_args=("--year", "2011")) -> LiveStack:
    """Simulate, follow the growing logs with `dpmstream run`, scrape with Prometheus, and
    return once Prometheus holds both halves (the second half's scrape is the latest)."""
    prefix = simulate(workdir / "sim" / "head", *sim_args)
    sources = [Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log")]
    live = [workdir / "live" / "dpm.log", workdir / "live" / "dpns.log"]
    stack = follow_in_halves(workdir, prefix, sources, live, JUNK if junk else [],
                             ["--host", HOST, *run_args], REQUESTS)
    with open(f"{prefix}.requests.csv", newline="") as fh:
        stack.requests_truth = list(csv.DictReader(fh))
    return stack


# A line of no syslog shape in a DOME log: the "unparsed lines" panel must show it.
DOME_JUNK = ["this is not a DOME log line at all\n"]


def start_dome_stack(workdir: Path, sim_args=(), run_args=(), junk: bool = True) -> LiveStack:
    """A simulated DOME site (a head and its disk nodes, RFC 3339 stamps unless
    `sim_args` say otherwise), each node's log followed by one `dpmstream run` as it
    grows in two halves, scraped by Prometheus: as start_live_stack."""
    prefix = simulate(workdir / "sim" / "site", "--dome", "--stamp", "rfc3339", *sim_args)
    sources = sorted(prefix.parent.glob(f"{prefix.name}.*.log"))
    assert len(sources) >= 2, sources  # the head and a disk node at least
    live = [workdir / "live" / src.name for src in sources]
    return follow_in_halves(workdir, prefix, sources, live, DOME_JUNK if junk else [],
                            list(run_args), DOME_CALLS)


def follow_in_halves(workdir: Path, prefix: Path, sources: list[Path], live: list[Path],
                     junk: list[str], run_args: list[str], counter: str) -> LiveStack:
    """Write the first half of each source to its live file (and `junk` to the first),
    follow them with `dpmstream run --metrics-port`, scrape, append the second halves,
    and return once Prometheus holds `counter`'s final value scraped a few times."""
    live[0].parent.mkdir(parents=True, exist_ok=True)
    halves = []
    for src, dst in zip(sources, live):
        lines = src.read_text().splitlines(keepends=True)
        cut = len(lines) // 2
        extra = junk if dst is live[0] else []
        halves.append((dst, lines[cut:] + extra))
        dst.write_text("".join(lines[:cut]) + "".join(extra))

    port = free_port()
    proc = subprocess.Popen(
        [DPMSTREAM, "run", "--metrics-port", str(port), *run_args, *map(str, live)],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "run.log", "w"))
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    prom = Prometheus(workdir / "prometheus", [f"127.0.0.1:{port}"], scrape_interval="1s")
    stack = LiveStack(prom, metrics_url, prefix, proc)
    try:
        prom.start()
        # First half scraped: a counter value Prometheus has seen, and it is the exported one.
        assert wait_for(lambda: (_scraped_total(prom, counter) or 0) > 0, timeout=60,
                        interval=0.5), "Prometheus never scraped the first half"
        first = _wait_stable(metrics_url, above=0.0, counter=counter)
        assert wait_for(lambda: _scraped_total(prom, counter) == first, timeout=30, interval=0.5)
        _wait_scrapes(prom, counter=counter)  # a few scrapes of the first half's values, for rate()
        for dst, rest in halves:
            with open(dst, "a") as fh:
                fh.writelines(rest)
        # Second half read: the exported total stops moving, and Prometheus has it.
        final = _wait_stable(metrics_url, above=first, counter=counter)
        assert wait_for(lambda: _scraped_total(prom, counter) == final, timeout=30, interval=0.5)
        _wait_scrapes(prom, counter=counter)  # more than one scrape of the final values
        return stack
    except BaseException:
        stack.stop()
        raise
