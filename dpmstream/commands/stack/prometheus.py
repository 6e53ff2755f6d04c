"""A private Prometheus scraping given targets, with a small HTTP query client.

Own config, TSDB and log in its work dir, bound to 127.0.0.1; scrapes every second by
default so tests see a first sample within a few seconds (poll with wait_for, never
sleep).
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from dpmstream.commands.stack.process import ManagedProcess, ServiceError, free_port, port_open

HOST = "127.0.0.1"


def _http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class PrometheusClient:
    """Queries over Prometheus's HTTP API (any Prometheus, e.g. one `stack up` started)."""

    def __init__(self, url: str):
        self._url = url.rstrip("/")

    @property
    def url(self) -> str:
        return self._url

    def query(self, promql: str) -> list[dict]:
        """Instant query; the `result` list of the API answer (vector samples)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        status, body = _http_get(url)
        try:
            answer = json.loads(body)
        except ValueError as exc:
            raise ServiceError(f"prometheus: HTTP {status}, not JSON: {body[:200]!r}") from exc
        if answer.get("status") != "success":
            raise ServiceError(f"prometheus: query {promql!r} failed: "
                               f"{answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]["result"]

    def value(self, promql: str) -> float | None:
        """The single value of a query answering one sample, else None."""
        result = self.query(promql)
        if len(result) != 1:
            return None
        return float(result[0]["value"][1])

    def targets_health(self) -> dict[str, str]:
        """scrape URL -> health ('up', 'down', 'unknown') of the active targets."""
        status, body = _http_get(f"{self.url}/api/v1/targets?state=active")
        data = json.loads(body)["data"]["activeTargets"]
        return {t["scrapeUrl"]: t["health"] for t in data}

    def wait_for(self, promql: str, predicate: Callable[[list[dict]], bool] = bool,
                 timeout: float = 30.0, interval: float = 0.5) -> list[dict]:
        """Poll the query until predicate(result) holds; returns that result.

        On timeout raises ServiceError with the last result and the target health.
        """
        deadline = time.monotonic() + timeout
        result: list[dict] = []
        while True:
            result = self.query(promql)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                try:
                    health = self.targets_health()
                except Exception as exc:  # noqa: BLE001 - diagnostics only
                    health = {"?": repr(exc)}
                raise ServiceError(f"prometheus: {promql!r} did not meet the condition in "
                                   f"{timeout:.0f} s; last result {result}; targets {health}")
            time.sleep(interval)


class Prometheus(PrometheusClient):
    """targets: "host:port" strings scraped under job `job` at `scrape_interval`."""

    def __init__(self, workdir: Path | str, targets: Sequence[str], port: int | None = None,
                 scrape_interval: str = "1s", job: str = "dpmstream"):
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.targets = list(targets)
        self.port = port or free_port()
        super().__init__(f"http://{HOST}:{self.port}")
        self.scrape_interval = scrape_interval
        self.job = job
        self.config_file = self.workdir / "prometheus.yml"
        self.process = ManagedProcess("prometheus", self.workdir / "prometheus.pid",
                                      self.workdir / "prometheus.log", marker=str(self.config_file))

    @property
    def running(self) -> bool:
        return self.process.pid() is not None

    def write_config(self) -> None:
        # JSON is YAML: no YAML library needed, and quoting is exact.
        config = {
            "global": {"scrape_interval": self.scrape_interval,
                       "evaluation_interval": self.scrape_interval,
                       "scrape_timeout": self.scrape_interval},
            "scrape_configs": [{"job_name": self.job,
                                "static_configs": [{"targets": self.targets}]}],
        }
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until /-/ready answers; returns seconds taken."""
        if self.running:
            return 0.0
        binary = shutil.which("prometheus")
        if binary is None:
            raise ServiceError("prometheus not found: run `make install-system`")
        if port_open(HOST, self.port):
            raise ServiceError(f"prometheus: port {self.port} on {HOST} is already in use")
        self.write_config()
        self.process.launch([
            binary, f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={HOST}:{self.port}",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ], cwd=self.workdir)
        return self.process.wait_ready(
            lambda: _http_get(f"{self.url}/-/ready", timeout=1.0)[0] == 200,
            timeout, f"ready on {self.url}", interval=0.2)

    def stop(self, timeout: float = 20.0) -> bool:
        return self.process.stop(timeout=timeout)
