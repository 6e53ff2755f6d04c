"""A private single-node Kafka 4.3 broker (KRaft, broker+controller in one JVM).

It runs from the jars that scripts/install-kafka.sh put in the cache, binds 127.0.0.1
only, and keeps everything (config, data, logs, pid file) in its own work dir. The
same work dir can be stopped and started again with its data (broker-outage tests).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from dpmstream.commands.stack.process import ManagedProcess, ServiceError, free_port, port_open

KAFKA_VERSION = "4.3.1"
HOST = "127.0.0.1"


def cache_dir() -> Path:
    return Path(os.environ.get("DPMSTREAM_CACHE") or Path.home() / ".cache" / "dpmstream")


def kafka_home() -> Path:
    """The installed jar set; a clear error when scripts/install-kafka.sh has not run."""
    home = cache_dir() / f"kafka-{KAFKA_VERSION}"
    if not (home / ".complete").is_file():
        raise ServiceError(
            f"Kafka {KAFKA_VERSION} is not installed in {home}: run `make install-kafka`"
        )
    return home


def _jaas_value(text: str) -> str:
    if any(c in text for c in '"\\;\n'):
        raise ServiceError("kafka: SASL user names and passwords may not hold quotes, "
                           "backslashes, semicolons or newlines")
    return text


def _server_properties(work: Path, port: int, controller_port: int,
                       auto_create_topics: bool, partitions: int,
                       sasl_port: int | None = None, sasl_users: dict | None = None) -> str:
    listeners = f"PLAINTEXT://{HOST}:{port}"
    protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    if sasl_users:
        listeners += f",SASL_PLAINTEXT://{HOST}:{sasl_port}"
        protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": f"{listeners},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": protocols,
        "controller.quorum.bootstrap.servers": f"{HOST}:{controller_port}",
        "log.dirs": str(work / "data"),
        "num.partitions": str(partitions),
        "auto.create.topics.enable": "true" if auto_create_topics else "false",
        # One node: every internal topic must live with a single replica.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "min.insync.replicas": "1",
        # Consumers in tests must not wait 3 s for a rebalance that has nobody to wait for.
        "group.initial.rebalance.delay.ms": "0",
        # Small and quick to stop: a test broker holds little data.
        "log.segment.bytes": str(64 * 1024 * 1024),
        "controlled.shutdown.enable": "true",
    }
    if sasl_users:
        # SASL/PLAIN on its own listener, the users checked against this list (no ACLs:
        # a logged-in user may do anything, as on a test broker it should).
        users = " ".join(f'user_{_jaas_value(name)}="{_jaas_value(pw)}"'
                         for name, pw in sasl_users.items())
        settings["sasl.enabled.mechanisms"] = "PLAIN"
        settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};")
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class KafkaBroker:
    """Single-node KRaft broker on 127.0.0.1 with its own work dir.

    Ports are taken from the arguments, else from an earlier run in the same work dir,
    else picked free; they are kept in `ports.json` so a restart reuses them.
    """

    def __init__(self, workdir: Path | str, port: int | None = None,
                 controller_port: int | None = None, heap: str = "512m",
                 auto_create_topics: bool = True, default_partitions: int = 1,
                 sasl_users: dict[str, str] | None = None):
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        saved = self._saved_ports()
        self.port = port or saved.get("port") or free_port()
        self.controller_port = controller_port or saved.get("controller_port") or free_port()
        if self.controller_port == self.port:
            self.controller_port = free_port()
        self.sasl_users = dict(sasl_users or {})
        self.sasl_port = None
        if self.sasl_users:
            self.sasl_port = saved.get("sasl_port") or free_port()
            while self.sasl_port in (self.port, self.controller_port):
                self.sasl_port = free_port()
        self.heap = heap
        self.auto_create_topics = auto_create_topics
        self.default_partitions = default_partitions
        self.process = ManagedProcess(
            "kafka", self.workdir / "kafka.pid", self.workdir / "logs" / "stdout.log",
            marker=str(self.workdir / "server.properties"),
            other_logs=[self.workdir / "logs" / "server.log"],
        )

    # -- endpoints ---------------------------------------------------------------
    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        """host:port for Kafka clients (kafka-python, aiokafka, kcat, rsyslog)."""
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """The broker as Faust names it."""
        return f"kafka://{HOST}:{self.port}"

    @property
    def sasl_url(self) -> str:
        """The SASL_PLAINTEXT (PLAIN) listener, when the broker was made with sasl_users."""
        if self.sasl_port is None:
            raise ServiceError("kafka: this broker has no SASL listener (no sasl_users)")
        return f"kafka://{HOST}:{self.sasl_port}"

    @property
    def running(self) -> bool:
        return self.process.pid() is not None

    @property
    def log_file(self) -> Path:
        return self.workdir / "logs" / "server.log"

    # -- life cycle --------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> float:
        """Start (formatting storage on first use); returns seconds until ready."""
        if self.running:
            return 0.0
        home = kafka_home()
        for port in (self.port, self.controller_port, self.sasl_port):
            if port is not None and port_open(HOST, port):
                raise ServiceError(f"kafka: port {port} on {HOST} is already in use")
        props = self.workdir / "server.properties"
        props.write_text(_server_properties(self.workdir, self.port, self.controller_port,
                                            self.auto_create_topics, self.default_partitions,
                                            self.sasl_port, self.sasl_users))
        props.chmod(0o600)   # it holds the SASL passwords
        (self.workdir / "ports.json").write_text(
            json.dumps({"port": self.port, "controller_port": self.controller_port,
                        "sasl_port": self.sasl_port}))
        (self.workdir / "logs").mkdir(exist_ok=True)
        if not (self.workdir / "data" / "meta.properties").exists():
            self._format(home, props)
        self.process.launch(self._java(home, "kafka.Kafka", str(props)), cwd=self.workdir)
        return self.process.wait_ready(self._answers_metadata, timeout,
                                       f"answering metadata on {self.bootstrap}", interval=0.2)

    def stop(self, timeout: float = 30.0) -> bool:
        """Controlled shutdown of this broker only (by its pid file)."""
        return self.process.stop(timeout=timeout)

    def restart(self, timeout: float = 90.0) -> float:
        self.stop()
        return self.start(timeout=timeout)

    def destroy(self) -> None:
        """Stop and remove the work dir (data included)."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- admin -------------------------------------------------------------------
    def create_topics(self, names, partitions: int = 1, timeout: float = 30.0) -> None:
        """Create topics (existing ones are left as they are) and wait for their leaders."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        names = [names] if isinstance(names, str) else list(names)
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="dpmstream-admin",
                                 request_timeout_ms=int(timeout * 1000))
        try:
            existing = set(admin.list_topics())
            new = [NewTopic(name, partitions, 1) for name in names if name not in existing]
            if new:
                try:
                    admin.create_topics(new, timeout_ms=int(timeout * 1000))
                except TopicAlreadyExistsError:
                    pass
        finally:
            admin.close()
        self._wait_for_leaders(names, timeout)

    def consume(self, topic: str, count: int, timeout: float = 30.0) -> list:
        """Records of `topic` from the beginning: at least `count`, or what came in time."""
        return consume(self.bootstrap, topic, count, timeout)

    def _wait_for_leaders(self, names: list[str], timeout: float) -> None:
        from kafka import KafkaConsumer

        from dpmstream.commands.stack.process import wait_for

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="dpmstream-admin")
        try:
            def ready() -> bool:
                topics = consumer.topics()
                return all(name in topics and consumer.partitions_for_topic(name)
                           for name in names)
            if not wait_for(ready, timeout, interval=0.2):
                raise ServiceError(f"kafka: topics {names} have no leader after {timeout:.0f} s")
        finally:
            consumer.close()

    # -- internals ---------------------------------------------------------------
    def _java(self, home: Path, main_class: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ServiceError("kafka: java not found (Kafka needs Java 17+)")
        return [
            # Serial GC: a small heap on a 2-core machine needs no parallel GC threads.
            java, f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.workdir / 'logs'}",
            f"-Dlog4j2.configurationFile={home / 'config' / 'log4j2.properties'}",
            "-cp", str(home / "libs" / "*"), main_class, *args,
        ]

    def _format(self, home: Path, props: Path) -> None:
        # Kafka's id format: a UUID in URL-safe base64 (it may start with '-', hence '=').
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        argv = self._java(home, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                          "--config", str(props), "--standalone")
        argv[1] = "-Xmx256m"
        result = subprocess.run(argv, cwd=self.workdir, capture_output=True, text=True,
                                timeout=120, stdin=subprocess.DEVNULL)
        (self.workdir / "logs" / "format.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise ServiceError(f"kafka: storage format failed ({result.returncode}):\n"
                               f"{(result.stdout + result.stderr)[-3000:]}")

    def _answers_metadata(self) -> bool:
        """True once a client gets cluster metadata naming this broker."""
        if not port_open(HOST, self.port, timeout=0.2):
            return False
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="dpmstream-ready",
                                 request_timeout_ms=3000)
        try:
            cluster = admin.describe_cluster()
        finally:
            admin.close()
        return bool(cluster.get("brokers"))

    def _saved_ports(self) -> dict:
        try:
            return json.loads((self.workdir / "ports.json").read_text())
        except (OSError, ValueError):
            return {}


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0,
            from_beginning: bool = True) -> list:
    """Read at least `count` records of `topic` (or all that came within `timeout`).

    Uses aiokafka, as the worker does: it decodes every codec rsyslog may use (lz4,
    snappy, zstd), which kafka-python cannot without extra libraries. Returns aiokafka
    ConsumerRecords (.key, .value, .partition, .offset) in arrival order.
    """
    import asyncio
    import time

    from aiokafka import AIOKafkaConsumer

    async def run() -> list:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
            auto_offset_reset="earliest" if from_beginning else "latest")
        await consumer.start()
        records: list = []
        deadline = time.monotonic() + timeout
        try:
            while len(records) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=250)
                for part in sorted(batches, key=lambda tp: tp.partition):
                    records.extend(batches[part])
        finally:
            await consumer.stop()
        return records

    return asyncio.run(run())
