"""`dpmstream replay --to-kafka` as an admin runs it against a real broker: a topic the
broker lacks is refused (exit 2, nothing published, no "published" line), the lines go to
the topic named by --lines-topic or its old spelling --topic."""

import uuid

import pytest

from tests.commands.test_replay import LOG, dpmstream, write

pytestmark = pytest.mark.services


def topics_of(broker) -> set[str]:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_replay_to_a_missing_topic_exits_2_and_never_says_published(kafka_broker, tmp_path):
    log = write(tmp_path / "log", LOG)
    missing = f"absent-{uuid.uuid4().hex[:8]}"
    res = dpmstream("replay", "--to-kafka", kafka_broker.url, "--lines-topic", missing,
                    "--year", "2011", log, check=False)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert f"topic '{missing}' does not exist" in err and "published" not in err
    # The broker auto-creates topics on request; the refusal must not have created it.
    assert missing not in topics_of(kafka_broker)


@pytest.mark.parametrize("spelling", ["--lines-topic", "--topic"])
def test_replay_publishes_every_line_to_the_named_topic(kafka_broker, kafka_topic, tmp_path,
                                                        spelling):
    log = write(tmp_path / "log", LOG)
    topic = kafka_topic()
    res = dpmstream("replay", "--to-kafka", kafka_broker.url, spelling, topic,
                    "--year", "2011", "--host", "head01", log)
    assert f"published {len(LOG)} lines to {topic}" in res.stderr.decode()
    assert len(kafka_broker.consume(topic, len(LOG), timeout=30)) == len(LOG)
