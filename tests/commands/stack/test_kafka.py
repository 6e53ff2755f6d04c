"""The private Kafka broker: a real KRaft broker on 127.0.0.1, started from the cached jars."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer

from dpmstream.commands.stack.kafka import consume
from dpmstream.commands.stack.process import port_open

pytestmark = pytest.mark.services


def test_broker_round_trips_keyed_records_with_kafka_python(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    sent = [(f"head0{i % 2}".encode(), f"line {i}".encode()) for i in range(20)]
    for key, value in sent:
        producer.send(topic, key=key, value=value)
    producer.flush(timeout=30)
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    got = []
    for record in consumer:
        got.append(record)
        if len(got) == len(sent):
            break
    consumer.close()

    assert sorted((r.key, r.value) for r in got) == sorted(sent)
    # Same key, same partition, in the order sent.
    for key in {k for k, _ in sent}:
        mine = [r for r in got if r.key == key]
        assert len({r.partition for r in mine}) == 1
        assert [r.value for r in mine] == [v for k, v in sent if k == key]


def test_broker_keeps_its_records_across_a_stop_and_restart(kafka_broker_factory):
    broker = kafka_broker_factory()
    broker.create_topics(["kept"], partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    producer.send("kept", value=b"before the restart").get(timeout=30)
    producer.close()
    port = broker.port

    broker.stop()
    assert not broker.running
    assert not port_open("127.0.0.1", port)
    broker.start()

    assert broker.port == port
    assert [r.value for r in consume(broker.bootstrap, "kept", 1, timeout=20)] == [b"before the restart"]


def test_broker_start_without_installed_jars_says_how_to_install(tmp_path, monkeypatch):
    from dpmstream.commands.stack.kafka import KafkaBroker
    from dpmstream.commands.stack.process import ServiceError

    monkeypatch.setenv("DPMSTREAM_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(ServiceError, match="make install-kafka"):
        KafkaBroker(tmp_path / "work").start()
    assert not (tmp_path / "work" / "kafka.pid").exists()
