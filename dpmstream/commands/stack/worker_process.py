"""Running `dpmstream worker` (the stream worker) as a detached subprocess.

The worker itself lives in dpmstream.streams.kafka.worker / dpmstream.commands.worker;
this module only launches it from the same environment as the running Python, with its
own work dir, and waits until its Prometheus endpoint answers.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from dpmstream.commands.stack.process import ManagedProcess, ServiceError, free_port, port_open

HOST = "127.0.0.1"


def dpmstream_command() -> list[str]:
    """The `dpmstream` entry point of this environment (the venv's, not one on PATH)."""
    script = Path(sys.executable).with_name("dpmstream")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "dpmstream"]


def worker_available() -> bool:
    """True when this installation has the `worker` subcommand."""
    try:
        result = subprocess.run([*dpmstream_command(), "worker", "--help"], capture_output=True,
                                timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


class WorkerProcess:
    """`dpmstream worker --broker URL --metrics-port P [extra_args]` in `workdir`.

    `argv` replaces the whole command (for a stand-in); it must serve /metrics on
    `metrics_port`.
    """

    def __init__(self, workdir: Path | str, broker_url: str, metrics_port: int | None = None,
                 extra_args: Sequence[str] = (), argv: Sequence[str] | None = None,
                 env: dict | None = None):
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker_url = broker_url
        self.metrics_port = metrics_port or free_port()
        self.extra_args = list(extra_args)
        self.argv = list(argv) if argv is not None else None
        self.env = env
        argv0 = self.command()
        # The pid file is trusted only for a process running this program (the script,
        # or the module after `python -m`).
        if argv0[0] != sys.executable or len(argv0) < 2:
            marker = argv0[0]
        else:
            marker = argv0[2] if argv0[1] == "-m" and len(argv0) > 2 else argv0[1]
        self.process = ManagedProcess("worker", self.workdir / "worker.pid",
                                      self.workdir / "worker.log", marker=marker)

    @property
    def metrics_url(self) -> str:
        return f"http://{HOST}:{self.metrics_port}/metrics"

    @property
    def metrics_target(self) -> str:
        """host:port as a Prometheus scrape target."""
        return f"{HOST}:{self.metrics_port}"

    @property
    def running(self) -> bool:
        return self.process.pid() is not None

    def command(self) -> list[str]:
        if self.argv is not None:
            return self.argv
        return [*dpmstream_command(), "worker", "--broker", self.broker_url,
                "--metrics-port", str(self.metrics_port), *self.extra_args]

    def start(self, timeout: float = 90.0) -> float:
        """Start and wait until the metrics endpoint answers; returns seconds taken."""
        if self.running:
            return 0.0
        if self.argv is None and not worker_available():
            raise ServiceError("worker: this installation has no `dpmstream worker` command")
        if port_open(HOST, self.metrics_port):
            raise ServiceError(f"worker: metrics port {self.metrics_port} is already in use")
        self.process.launch(self.command(), cwd=self.workdir, env=self.env)
        return self.process.wait_ready(self._serves_metrics, timeout,
                                       f"serving {self.metrics_url}", interval=0.25)

    def stop(self, timeout: float = 30.0) -> bool:
        return self.process.stop(timeout=timeout)

    def _serves_metrics(self) -> bool:
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=1.0) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False
