"""The local stack: Kafka, rsyslog following a log directory, one worker, Prometheus.

`Stack.up()` starts them in dependency order on 127.0.0.1, each in a sub-directory of
the stack's work dir, and records what it started in `state.json` as it goes, so that
`Stack.down()` (or a failed `up`) stops exactly those processes, by pid file, and
nothing else. No file is removed by either.

Log files followed under the logs directory (both layouts, so a copy of a head node's
/var/log and the simulator's output both work; files may appear later):
    DIR/dpm/log, DIR/dpns/log, DIR/srmv2.2/log     the head-node layout
    DIR/*.log                                      e.g. `dpmstream simulate --out DIR/demo`
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from dpmstream.commands.stack.kafka import KafkaBroker, cache_dir
from dpmstream.commands.stack.process import ManagedProcess, ServiceError
from dpmstream.commands.stack.prometheus import Prometheus
from dpmstream.commands.stack.rsyslog import DEFAULT_TOPIC, RsyslogShipper
from dpmstream.commands.stack.worker_process import WorkerProcess

STATE_FILE = "state.json"
PORT_NAMES = ("kafka", "controller", "prometheus", "metrics")
# Stop order: rsyslog first so it saves its queue while the broker still answers.
STOP_ORDER = ("rsyslog", "worker", "prometheus", "kafka")


def default_workdir() -> Path:
    return cache_dir() / "stack"


def log_files(logs_dir: Path) -> list[Path]:
    logs_dir = Path(logs_dir).resolve()
    return [logs_dir / "dpm" / "log", logs_dir / "dpns" / "log", logs_dir / "srmv2.2" / "log",
            logs_dir / "*.log"]


def parse_ports(text: str | None) -> dict[str, int]:
    """'kafka=9092,prometheus=9090' -> {'kafka': 9092, 'prometheus': 9090}."""
    ports: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in PORT_NAMES or not value.strip().isdigit():
            raise ValueError(f"--ports item {item!r}: expected NAME=PORT with NAME in "
                             f"{', '.join(PORT_NAMES)}")
        port = int(value)
        if not 0 < port < 65536:
            raise ValueError(f"--ports item {item!r}: port out of range")
        ports[name] = port
    return ports


class Stack:
    def __init__(self, workdir: Path | str | None = None, logs_dir: Path | str | None = None,
                 ports: dict[str, int] | None = None, topic: str = DEFAULT_TOPIC,
                 partitions: int = 4, hostname: str | None = None, resume_interval: int = 2,
                 worker_args: Sequence[str] = (), worker_argv: Sequence[str] | None = None):
        self.workdir = Path(workdir or default_workdir()).resolve()
        self.logs_dir = Path(logs_dir).resolve() if logs_dir else None
        self.ports = dict(ports or {})
        self.topic = topic
        self.partitions = partitions
        self.hostname = hostname
        self.resume_interval = resume_interval
        self.worker_args = list(worker_args)
        self.worker_argv = list(worker_argv) if worker_argv is not None else None
        self.state_path = self.workdir / STATE_FILE
        self.endpoints: dict[str, str] = {}

    # -- state -------------------------------------------------------------------
    def _load_state(self) -> dict:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {"services": {}, "endpoints": {}}
        except ValueError as exc:
            raise ServiceError(f"stack: state file {self.state_path} is unreadable: {exc}") from exc

    def _save_state(self, state: dict) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_path)

    def _record(self, state: dict, name: str, process: ManagedProcess) -> None:
        state["services"][name] = {"pid_file": str(process.pid_file), "marker": process.marker,
                                   "log": str(process.log_file), "pid": process.pid()}
        self._save_state(state)

    def running_services(self) -> list[str]:
        """Names of the recorded services whose process is still alive."""
        state = self._load_state()
        return [name for name, svc in state["services"].items()
                if ManagedProcess(name, Path(svc["pid_file"]), Path(svc["log"]),
                                  svc["marker"]).pid() is not None]

    # -- up / down -----------------------------------------------------------------
    def up(self) -> dict[str, str]:
        """Start everything and wait until each part is ready; returns the endpoints.

        On any failure, stops what this call started and raises ServiceError.
        """
        if self.logs_dir is None:
            raise ServiceError("stack: no logs directory given")
        if not self.logs_dir.is_dir():
            raise ServiceError(f"stack: logs directory {self.logs_dir} does not exist")
        self.workdir.mkdir(parents=True, exist_ok=True)
        alive = self.running_services()
        if alive:
            raise ServiceError(f"stack: already running in {self.workdir} ({', '.join(alive)}); "
                               f"run `dpmstream stack down` first")
        state = {"services": {}, "endpoints": {}, "logs": str(self.logs_dir),
                 "topic": self.topic, "pid": os.getpid()}
        self._save_state(state)
        try:
            broker = KafkaBroker(self.workdir / "kafka", port=self.ports.get("kafka"),
                                 controller_port=self.ports.get("controller"),
                                 default_partitions=self.partitions)
            self._record(state, "kafka", broker.process)
            broker.start()
            self._record(state, "kafka", broker.process)
            broker.create_topics([self.topic], partitions=self.partitions)

            worker = WorkerProcess(self.workdir / "worker", broker.url,
                                   metrics_port=self.ports.get("metrics"),
                                   extra_args=["--lines-topic", self.topic,
                                               "--partitions", str(self.partitions),
                                               *self.worker_args],
                                   argv=self.worker_argv)
            self._record(state, "worker", worker.process)
            worker.start()
            self._record(state, "worker", worker.process)

            shipper = RsyslogShipper(self.workdir / "rsyslog", log_files(self.logs_dir),
                                     [broker.bootstrap], topic=self.topic,
                                     hostname=self.hostname, resume_interval=self.resume_interval)
            self._record(state, "rsyslog", shipper.process)
            shipper.start()
            self._record(state, "rsyslog", shipper.process)

            prometheus = Prometheus(self.workdir / "prometheus", [worker.metrics_target],
                                    port=self.ports.get("prometheus"), scrape_interval="5s")
            self._record(state, "prometheus", prometheus.process)
            prometheus.start()
            self._record(state, "prometheus", prometheus.process)
        except BaseException:
            self.down()
            raise
        self.endpoints = {
            "kafka": broker.bootstrap,
            "prometheus": prometheus.url,
            "metrics": worker.metrics_url,
        }
        state["endpoints"] = self.endpoints
        self._save_state(state)
        return self.endpoints

    def down(self) -> list[str]:
        """Stop the processes recorded in the state file; returns the names stopped."""
        state = self._load_state()
        stopped = []
        services = state.get("services", {})
        for name in sorted(services, key=lambda n: STOP_ORDER.index(n) if n in STOP_ORDER else -1):
            svc = services[name]
            proc = ManagedProcess(name, Path(svc["pid_file"]), Path(svc["log"]), svc["marker"])
            if proc.stop():
                stopped.append(name)
        if self.state_path.exists():
            state["services"] = {}
            state["endpoints"] = {}
            self._save_state(state)
        return stopped
