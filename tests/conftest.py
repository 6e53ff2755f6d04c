"""Fixtures giving tests real services on 127.0.0.1 (never the system instances).

    kafka_broker                session: one running single-node KRaft broker
                                (.bootstrap "127.0.0.1:PORT", .url "kafka://...",
                                .create_topics(names, partitions), .consume(topic, n, timeout))
    kafka_topic                 factory: kafka_topic(partitions=1, prefix="t") -> a new
                                unique topic on the session broker, created and led
    kafka_broker_factory        factory: kafka_broker_factory() -> a started broker of the
                                test's own (stop/restart it freely); stopped at teardown
    rsyslog_factory             factory: rsyslog_factory(files, topic, broker=None,
                                hostname="head01", resume_interval=1) -> a started private
                                rsyslogd with the shipped config; stopped at teardown
    prometheus_factory          factory: prometheus_factory(targets, scrape_interval="1s")
                                -> a started private Prometheus; stopped at teardown

Services need `make install-system install-kafka` (as `make test` does); without them
the fixtures fail with the command to run, never skip.

A test that uses these fixtures, or starts Kafka, rsyslog, Prometheus, Nagios, Chromium or
docker-compose itself, must be marked `@pytest.mark.services`: tests/service_guard.py
fails it otherwise, so `make check` never starts a service.
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from dpmstream.commands.stack.kafka import KafkaBroker
from dpmstream.commands.stack.prometheus import Prometheus
from dpmstream.commands.stack.rsyslog import RsyslogShipper
from tests.service_guard import (  # noqa: F401  (hooks: pytest finds them by name here)
    pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_setup,
)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-session"), default_partitions=1)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker):
    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        kafka_broker.create_topics([name], partitions=partitions)
        return name
    return make


@pytest.fixture
def kafka_broker_factory(tmp_path):
    brokers: list[KafkaBroker] = []
    counter = itertools.count()

    def make(**kwargs) -> KafkaBroker:
        broker = KafkaBroker(tmp_path / f"kafka-{next(counter)}", **kwargs)
        brokers.append(broker)
        broker.start()
        return broker

    yield make
    for broker in brokers:
        broker.stop()


@pytest.fixture
def rsyslog_factory(tmp_path, request):
    shippers: list[RsyslogShipper] = []
    counter = itertools.count()

    def make(files, topic: str, broker: KafkaBroker | None = None, hostname: str | None = "head01",
             resume_interval: int = 1, **kwargs) -> RsyslogShipper:
        # The session broker is started only for tests that do not bring their own.
        target = broker or request.getfixturevalue("kafka_broker")
        shipper = RsyslogShipper(tmp_path / f"rsyslog-{next(counter)}", files, [target.bootstrap],
                                 topic=topic, hostname=hostname, resume_interval=resume_interval,
                                 **kwargs)
        shippers.append(shipper)
        shipper.start()
        return shipper

    yield make
    for shipper in shippers:
        shipper.stop()


@pytest.fixture
def prometheus_factory(tmp_path):
    servers: list[Prometheus] = []
    counter = itertools.count()

    def make(targets, scrape_interval: str = "1s", **kwargs) -> Prometheus:
        server = Prometheus(tmp_path / f"prometheus-{next(counter)}", list(targets),
                            scrape_interval=scrape_interval, **kwargs)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()
