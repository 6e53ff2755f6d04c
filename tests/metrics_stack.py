"""A real pipeline exporting to a real Prometheus, for the dashboard, probe and Nagios tests.

A simulated head node's logs are written in two halves while `dpmstream run` follows
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
    prefix.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([DPMSTREAM, "simulate", "--out", str(prefix), "--quiet", *args],
                   check=True, capture_output=True, text=True, timeout=120)
    return prefix


def _scraped_total(prom: Prometheus) -> float | None:
    return prom.value("sum(dpm_requests_total)")


def _exported_total(metrics_url: str) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("dpm_requests_total{"))


def _latest_sample_s(prom: Prometheus) -> float:
    """Prometheus' time of its latest scrape of the request counters."""
    return prom.value("max(timestamp(dpm_requests_total))") or 0.0


def _wait_scrapes(prom: Prometheus, scrapes: int = 3, timeout: float = 60.0) -> None:
    """Until Prometheus has scraped the current values `scrapes` more times (1 s apart),
    so that rate() over them has points on both sides."""
    since = _latest_sample_s(prom)
    assert wait_for(lambda: _latest_sample_s(prom) >= since + scrapes - 0.5, timeout=timeout,
                    interval=0.5), f"Prometheus did not scrape {scrapes} more times in {timeout:.0f} s"


def _wait_stable(metrics_url: str, above: float, timeout: float = 60.0) -> float:
    """The exported request total once it is above `above` and unchanged for a second
    (dpmstream run has read everything written so far)."""
    previous = [-1.0]

    def stable() -> bool:
        now = _exported_total(metrics_url)
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
    live[0].parent.mkdir(parents=True, exist_ok=True)
    halves = []
    for src, dst in zip(sources, live):
        lines = src.read_text().splitlines(keepends=True)
        cut = len(lines) // 2
        halves.append((dst, lines[cut:] + (JUNK if junk and dst is live[0] else [])))
        dst.write_text("".join(lines[:cut]) + ("".join(JUNK) if junk and dst is live[0] else ""))

    port = free_port()
    proc = subprocess.Popen(
        [DPMSTREAM, "run", "--metrics-port", str(port), "--host", HOST, *run_args,
         *map(str, live)],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "run.log", "w"))
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    prom = Prometheus(workdir / "prometheus", [f"127.0.0.1:{port}"], scrape_interval="1s")
    stack = LiveStack(prom, metrics_url, prefix, proc)
    try:
        prom.start()
        # First half scraped: a counter value Prometheus has seen, and it is the exported one.
        assert wait_for(lambda: (_scraped_total(prom) or 0) > 0, timeout=60, interval=0.5), \
            "Prometheus never scraped the first half"
        first = _wait_stable(metrics_url, above=0.0)
        assert wait_for(lambda: _scraped_total(prom) == first, timeout=30, interval=0.5)
        _wait_scrapes(prom)  # a few scrapes of the first half's values, for rate()
        for dst, rest in halves:
            with open(dst, "a") as fh:
                fh.writelines(rest)
        # Second half read: the exported total stops moving, and Prometheus has it.
        final = _wait_stable(metrics_url, above=first)
        assert wait_for(lambda: _scraped_total(prom) == final, timeout=30, interval=0.5)
        _wait_scrapes(prom)  # more than one scrape of the final values
        with open(f"{prefix}.requests.csv", newline="") as fh:
            stack.requests_truth = list(csv.DictReader(fh))
        return stack
    except BaseException:
        stack.stop()
        raise
