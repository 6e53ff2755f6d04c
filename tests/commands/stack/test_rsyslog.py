"""rsyslog with the shipped config (rsyslog/dpmstream.conf.in) ships log lines to Kafka."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import time

import pytest
from kafka.partitioner.default import murmur2

from dpmstream.commands.stack.rsyslog import (
    SHIPPED, RsyslogShipper, render_config, rsyslogd_binary,
)

pytestmark = pytest.mark.services

ENVELOPE_FIELDS = {"host", "path", "offset", "received", "line"}
RFC3339_MICROS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


def append(path, lines):
    with open(path, "ab") as fh:
        for line in lines:
            fh.write(line + b"\n")


def line_offsets(path):
    """Byte offset of each line start in the file, as imfile reports it."""
    offsets, pos = [], 0
    for raw in path.read_bytes().splitlines(keepends=True):
        offsets.append(pos)
        pos += len(raw)
    return offsets


def envelopes(records):
    return [json.loads(r.value) for r in records]


def test_shipped_drop_in_is_the_template_rendered_with_head_node_defaults():
    text = SHIPPED.read_text()
    assert text == render_config()
    for path in ("/var/log/dpm/log", "/var/log/dpns/log", "/var/log/srmv2.2/log"):
        assert f'file="{path}"' in text
    assert "@" + "TOPIC@" not in text and 'topic="dpm.lines"' in text


def test_shipped_drop_in_passes_rsyslogd_config_validation(tmp_path):
    main = tmp_path / "rsyslog.conf"
    main.write_text(f'global(workDirectory="{tmp_path}")\ninclude(file="{SHIPPED}")\n')
    result = subprocess.run([rsyslogd_binary(), "-N1", "-f", str(main)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in (result.stdout + result.stderr).lower()


def test_extra_librdkafka_settings_are_added_after_the_ordering_defaults(capsys):
    from dpmstream.commands.stack.rsyslog import main
    assert main(["--conf-param", "security.protocol=SASL_SSL"]) == 0
    conf_line = next(l for l in capsys.readouterr().out.splitlines() if "confParam=" in l)
    assert '"enable.idempotence=true"' in conf_line and '"message.timeout.ms=0"' in conf_line
    assert conf_line.index("idempotence") < conf_line.index('"security.protocol=SASL_SSL"')


def test_render_refuses_a_log_path_that_would_break_the_config():
    with pytest.raises(ValueError, match="quote"):
        render_config(files=['/var/log/dpm/lo"g'])


def test_rsyslog_ships_each_line_as_a_json_envelope_keyed_by_host(kafka_broker, kafka_topic,
                                                                   rsyslog_factory, tmp_path):
    topic = kafka_topic(partitions=3)
    log = tmp_path / "logs" / "dpm" / "log"
    log.parent.mkdir(parents=True)
    before = [b'08/12 14:31:43.118 12345,3 dpm_srv_put: DP092 - put request by /DC=ch/CN="x y" (1,1)']
    append(log, before)
    rsyslog_factory([log], topic, hostname="head01")
    after = [b"08/12 14:31:43.121 12345,3 dpm_srv_put: returns 0",
             b"tab\there, backslash \\ and caf\xc3\xa9",
             b"invalid utf-8 \xff\xfe here"]
    append(log, after)

    records = kafka_broker.consume(topic, 4, timeout=30)

    assert len(records) == 4
    got = envelopes(records)
    assert all(set(env) == ENVELOPE_FIELDS for env in got)
    assert [env["line"] for env in got] == [
        before[0].decode(), after[0].decode(), after[1].decode(), "invalid utf-8 ?? here"]
    assert [env["offset"] for env in got] == line_offsets(log)
    assert {env["path"] for env in got} == {str(log)}
    assert {env["host"] for env in got} == {"head01"}
    assert {r.key for r in records} == {b"head01"}
    # Partitioned by key the way Java clients (and the worker) hash it.
    assert {r.partition for r in records} == {(murmur2(b"head01") & 0x7FFFFFFF) % 3}
    for env in got:
        # RFC 3339 with microseconds and a UTC offset, close to now (read time, not event time).
        assert RFC3339_MICROS.fullmatch(env["received"]), env["received"]
        received = dt.datetime.fromisoformat(env["received"])
        assert abs((dt.datetime.now(dt.timezone.utc) - received).total_seconds()) < 120


def test_rsyslog_follows_several_files_and_names_each_in_path(kafka_broker, kafka_topic,
                                                              rsyslog_factory, tmp_path):
    topic = kafka_topic()
    dpm, dpns = tmp_path / "dpm" / "log", tmp_path / "dpns" / "log"
    # dpns/log does not exist yet when rsyslog starts: it is picked up when it appears.
    dpm.parent.mkdir()
    dpm.write_bytes(b"")
    rsyslog_factory([dpm, dpns], topic)
    append(dpm, [b"dpm line"])
    dpns.parent.mkdir(exist_ok=True)
    append(dpns, [b"dpns line"])

    got = envelopes(kafka_broker.consume(topic, 2, timeout=30))

    assert sorted((env["path"], env["line"]) for env in got) == [
        (str(dpm), "dpm line"), (str(dpns), "dpns line")]


def test_rsyslog_loses_no_line_while_the_broker_is_down(kafka_broker_factory, rsyslog_factory,
                                                        tmp_path):
    broker = kafka_broker_factory()
    broker.create_topics(["dpm.lines"], partitions=2)
    log = tmp_path / "dpm" / "log"
    log.parent.mkdir()
    log.write_bytes(b"")
    rsyslog_factory([log], "dpm.lines", broker=broker, resume_interval=1)
    append(log, [f"up {i}".encode() for i in range(50)])
    assert len(broker.consume("dpm.lines", 50, timeout=30)) == 50

    broker.stop()
    append(log, [f"down {i}".encode() for i in range(200)])
    time.sleep(2)  # let rsyslog hit the dead broker and suspend the action
    append(log, [f"still down {i}".encode() for i in range(50)])
    broker.start()

    expected = ([f"up {i}" for i in range(50)] + [f"down {i}" for i in range(200)]
                + [f"still down {i}" for i in range(50)])
    got = envelopes(broker.consume("dpm.lines", len(expected), timeout=60))
    lines = [env["line"] for env in got]
    assert set(lines) == set(expected)
    # A resent line is recognisable as a duplicate: same path and offset.
    by_offset = {}
    for env in got:
        by_offset.setdefault(env["offset"], set()).add(env["line"])
    assert all(len(v) == 1 for v in by_offset.values())


def test_rsyslog_keeps_unsent_lines_across_its_own_restart_while_the_broker_is_down(
        kafka_broker_factory, rsyslog_factory, tmp_path):
    broker = kafka_broker_factory()
    broker.create_topics(["dpm.lines"], partitions=1)
    log = tmp_path / "dpm" / "log"
    log.parent.mkdir()
    log.write_bytes(b"")
    shipper: RsyslogShipper = rsyslog_factory([log], "dpm.lines", broker=broker)
    append(log, [b"first"])
    assert len(broker.consume("dpm.lines", 1, timeout=30)) == 1

    broker.stop()
    append(log, [f"queued {i}".encode() for i in range(100)])
    time.sleep(2)
    shipper.stop()  # saves its queue (and librdkafka's unsent messages) to its spool
    broker.start()
    shipper.start()

    expected = {"first"} | {f"queued {i}" for i in range(100)}
    got = envelopes(broker.consume("dpm.lines", len(expected), timeout=60))
    assert {env["line"] for env in got} == expected
