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


def test_a_head_nodes_dpm_and_dpns_archives_reach_the_worker_side_by_side_and_link(
        kafka_broker, tmp_path):
    """A DPM log and its DPNS log of 150 s, published together: the worker links each
    request to its name-server calls as the simulator made them. Published one file after
    the other, the DPNS lines would reach the worker over a minute of event time behind the
    DPM lines that need them (past the linker's bound, parsers/linking.py MAX_LAG_MS) and
    no call would link."""
    from dpmstream.simulator import SimConfig, simulate
    from tests.streams.kafka.test_worker import run_worker, topics, worker_output

    sim = simulate(SimConfig(rate=4, duration=150, seed=7), tmp_path / "head")
    truth = {r["token"]: r for r in sim.requests}
    t = topics("side")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    res = dpmstream("replay", "--to-kafka", kafka_broker.url, "--lines-topic", t["lines"],
                    "--year", "2011", "--host", sim.config.host, str(sim.log_path),
                    str(sim.dpns_log_path))
    lines = sum(1 for p in (sim.log_path, sim.dpns_log_path) for _ in open(p, "rb"))
    assert f"published {lines} lines" in res.stderr.decode()

    run_worker(kafka_broker, t, lines, partitions=1)
    requests = [r for r in worker_output(kafka_broker, t) if r["kind"] == "request"]
    # A worker never reaches the end of its input: the last seconds' requests stay open.
    assert len(requests) >= len(truth) - 30, (len(requests), len(truth))
    linked = [r for r in requests if r["ns_calls"]]
    assert len(linked) >= 0.9 * sum(1 for r in truth.values() if r["ns_calls"])
    wrong = [(r["token"], r["ns_calls"], truth[r["token"]]["ns_calls"]) for r in requests
             if r["ns_calls"] != truth[r["token"]]["ns_calls"]]
    assert not wrong, wrong[:5]
