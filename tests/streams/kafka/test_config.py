"""streams/kafka/config.py: broker URLs and the client's security settings."""

from __future__ import annotations

import pytest

from dpmstream.streams.kafka.config import (
    KafkaConfigError, KafkaSecurity, parse_broker, security_from_args,
)


def test_broker_urls_become_a_bootstrap_list():
    assert parse_broker("kafka://a:9092") == "a:9092"
    assert parse_broker("kafka://a:9092,kafka://b:9093;c:1") == "a:9092,b:9093,c:1"
    for bad in ("", "http://a:9092", "kafka://a", "kafka://:9092"):
        with pytest.raises(KafkaConfigError):
            parse_broker(bad)


def test_sasl_password_comes_from_a_file_or_the_environment_and_is_never_shown(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")

    class Args:
        security_protocol = "SASL_PLAINTEXT"
        sasl_mechanism = "SCRAM-SHA-512"
        sasl_username = "dpm"
        sasl_password_file = str(pw)
        ssl_cafile = None

    sec = security_from_args(Args, environ={})
    assert sec.password == "s3cret"
    assert "s3cret" not in repr(sec) and "s3cret" not in str(sec)
    assert sec.client_kwargs()["sasl_plain_password"] == "s3cret"
    Args.sasl_password_file = None
    sec = security_from_args(Args, environ={"DPMSTREAM_KAFKA_PASSWORD": "envpw"})
    assert sec.password == "envpw"
    with pytest.raises(KafkaConfigError, match="password"):
        security_from_args(Args, environ={})


def test_plaintext_needs_no_credentials():
    assert KafkaSecurity().client_kwargs() == {"security_protocol": "PLAINTEXT"}


def test_the_lines_consumer_gets_the_same_security_in_librdkafka_names(tmp_path):
    from confluent_kafka import Consumer

    sec = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                        username="dpm", password="s3cret")
    config = sec.librdkafka_config()
    assert config == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                      "sasl.username": "dpm", "sasl.password": "s3cret"}
    # librdkafka refuses a name it does not know: these are all its own.
    Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **config}).close()
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    tls = KafkaSecurity(protocol="SSL", cafile=str(ca)).librdkafka_config()
    assert tls == {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    assert KafkaSecurity().librdkafka_config() == {"security.protocol": "PLAINTEXT"}
