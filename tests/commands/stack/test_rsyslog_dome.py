"""rsyslog on a DOME node (render_config with DOME_COPY, rsyslog/dpmstream-dome.conf):
dmlite's syslog messages reach Kafka once each, keyed by host, as RFC 3339 lines with the
microseconds they were stamped with, through a file rsyslog writes (path and offset)."""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import subprocess

import pytest

from dpmstream.commands.stack.rsyslog import (
    DOME_COPY, SHIPPED_DOME, SyslogCopy, main, render_config, rsyslogd_binary,
)
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_lines import DomeLineParser
from tests.commands.stack.test_rsyslog import line_offsets
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.lines import FOREIGN, PARSED
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome

PROFILES = {"tid": "dmlite-dome", "notid": "dmlite-dome-notid"}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def validate(tmp_path, drop_in: str) -> subprocess.CompletedProcess:
    conf = tmp_path / "dpmstream.conf"
    conf.write_text(drop_in)
    main_conf = tmp_path / "rsyslog.conf"
    main_conf.write_text(f'global(workDirectory="{tmp_path}")\ninclude(file="{conf}")\n')
    return subprocess.run([rsyslogd_binary(), "-N1", "-f", str(main_conf)],
                          capture_output=True, text=True, timeout=60)


def test_shipped_dome_drop_in_is_the_template_rendered_for_a_dome_node(capsys):
    text = SHIPPED_DOME.read_text()
    assert text == render_config((), syslog_copies=(DOME_COPY,))
    assert main(["--dome"]) == 0 and capsys.readouterr().out == text
    # dmlite's messages, selected as its packaged snippet does, into the followed file.
    assert 'if ($msg contains " dmlite ") then {' in text
    assert f'file="{DOME_COPY.file}"\n           template="RSYSLOG_FileFormat")' in text
    assert f'input(type="imfile" file="{DOME_COPY.file}"' in text
    assert "/var/log/dpm/log" not in text


def test_dome_option_adds_the_copy_to_the_files_given(capsys):
    assert main(["--dome", "--file", "/var/log/dpm/log"]) == 0
    inputs = re.findall(r'input\(type="imfile" file="([^"]+)"', capsys.readouterr().out)
    assert inputs == ["/var/log/dpm/log", DOME_COPY.file]


@pytest.mark.services
@pytest.mark.parametrize("drop_in", [
    pytest.param(lambda: SHIPPED_DOME.read_text(), id="shipped-dome"),
    pytest.param(lambda: render_config(syslog_copies=(DOME_COPY,)), id="head-files-and-dome"),
    pytest.param(lambda: render_config((), syslog_copies=(DOME_COPY,), site_key="site1"),
                 id="dome-site-key"),
])
def test_dome_drop_in_passes_rsyslogd_config_validation(tmp_path, drop_in):
    result = validate(tmp_path, drop_in())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in (result.stdout + result.stderr).lower()


def test_render_refuses_a_message_filter_that_would_break_the_config():
    with pytest.raises(ValueError, match="message filter"):
        render_config((), syslog_copies=(SyslogCopy('" dmlite', "/tmp/x.log"),))


def as_datagram(line: str) -> bytes:
    """A simulated /var/log/messages line as the program handed it to syslog: priority
    user.err (dmlite's), the stamp, no host (the local socket's sender is this node)."""
    stamp, _host, rest = line.split(" ", 2)
    return f"<11>{stamp} {rest}".encode()


def stamp_ms(line: str) -> int:
    return (dt.datetime.fromisoformat(line.split(" ", 1)[0]) - EPOCH) // dt.timedelta(milliseconds=1)


def simulated_site(tmp_path, generation="tid"):
    """A head and a disk node's /var/log/messages: dmlite's lines among other programs'."""
    cfg = DomeConfig(seed=7, duration=40, rate=1.0, disks=1, envelope="messages", stamp="rfc3339",
                     generation=generation, disk_down_at=None, restart_at=None, gap_at=None,
                     foreign_rate=0.3)
    return cfg, simulate_dome(cfg, tmp_path / "sim")


def dome_node(rsyslog_factory, tmp_path, host, topic, **kwargs):
    """A private rsyslogd of a DOME node: the DOME copy into its own directory, and a
    socket in place of /dev/log. Returns it, its socket and its copy file."""
    node = tmp_path / host
    copy = node / "dmlite-rfc3339.log"
    shipper = rsyslog_factory([], topic, hostname=host, syslog_socket=node / "log.sock",
                              syslog_copies=[SyslogCopy(DOME_COPY.contains, str(copy))], **kwargs)
    return shipper, node / "log.sock", copy


def send(sock_path, datagrams):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        for datagram in datagrams:
            sock.sendto(datagram, str(sock_path))


@pytest.mark.services
@pytest.mark.parametrize("generation", ["tid", "notid"])
def test_dome_nodes_ship_each_dmlite_message_once_keyed_by_host_with_its_microsecond_stamp(
        kafka_broker, kafka_topic, rsyslog_factory, tmp_path, generation):
    cfg, site = simulated_site(tmp_path, generation)
    parser = DomeLineParser(resolve_dome_profile(PROFILES[generation]), EventClock(cfg.tz))
    topic = kafka_topic(partitions=2)
    sent, copies = {}, {}
    for host, log in site.logs.items():
        lines = log.read_text().splitlines()
        results = []
        for line in lines:
            parser.parse(line)
            results.append(parser.result)
        assert FOREIGN in results and PARSED in results  # both kinds are sent
        sent[host] = [(line, ln) for line, ln, r in zip(lines, site.written[host], results)
                      if r == PARSED]
        _, sock, copies[host] = dome_node(rsyslog_factory, tmp_path, host, topic)
        send(sock, map(as_datagram, lines))  # every program's lines, as /dev/log gets them

    records = kafka_broker.consume(topic, sum(map(len, sent.values())), timeout=60)

    assert len(sent) == 2
    for host, expected in sent.items():
        mine = [r for r in records if r.key == host.encode()]
        got = [json.loads(r.value) for r in mine]
        # Once each, in the order sent, nothing else (other programs' lines filtered out):
        # the line as the simulated node's syslog file shows it, microseconds included.
        assert [env["line"] for env in got] == [line for line, _ in expected]
        assert {env["host"] for env in got} == {host}
        assert len({r.partition for r in mine}) == 1
        # A file rsyslog wrote: path and offset name each line, for duplicate detection.
        assert {env["path"] for env in got} == {str(copies[host])}
        assert [env["offset"] for env in got] == line_offsets(copies[host])
        for env, (line, model_line) in zip(got, expected):
            event = parser.parse(env["line"])
            assert parser.result == PARSED, (parser.reason, env["line"])
            assert not event.whole_seconds
            assert re.match(r"\S+T\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d ", env["line"])
            # The event time is the instant the node stamped, not when rsyslog read it.
            assert event.ts == stamp_ms(line) == model_line.t
            assert event.host == host
    assert len(records) == sum(map(len, sent.values()))


@pytest.mark.services
def test_dome_lines_shipped_before_rsyslog_restarts_are_not_shipped_again(
        kafka_broker, kafka_topic, rsyslog_factory, tmp_path):
    cfg, site = simulated_site(tmp_path)
    head = cfg.head
    lines = [line for line in site.logs[head].read_text().splitlines() if " dmlite " in line]
    first, second = lines[: len(lines) // 2], lines[len(lines) // 2:]
    topic = kafka_topic()
    shipper, sock, copy = dome_node(rsyslog_factory, tmp_path, head, topic)
    send(sock, map(as_datagram, first))
    assert len(kafka_broker.consume(topic, len(first), timeout=60)) == len(first)

    shipper.restart()  # imfile resumes the copy where its state file says
    send(sock, map(as_datagram, second))

    got = [json.loads(r.value) for r in kafka_broker.consume(topic, len(lines), timeout=60)]
    # Each line once, in order: the first half was not read again from the copy's start.
    assert [env["line"] for env in got] == lines
    assert [env["offset"] for env in got] == line_offsets(copy)


@pytest.mark.services
def test_a_whole_second_syslog3_stamp_ships_with_the_receive_time_in_microseconds(
        kafka_broker, kafka_topic, rsyslog_factory, tmp_path):
    """glibc's syslog(3) stamps whole seconds (`May 30 08:44:05`): rsyslog's socket input,
    left at its defaults as on a node, stamps the receive time with microseconds."""
    topic = kafka_topic()
    _, sock, _ = dome_node(rsyslog_factory, tmp_path, "dpmhead01", topic, keep_sent_stamps=False)
    message = "dome[2345]: {140580123482689}[1] dmlite dome SendSimpleResp : Exiting: code: 200"
    before = dt.datetime.now(dt.timezone.utc)
    send(sock, [f"<11>May 30 08:44:05 {message}".encode()])

    [record] = kafka_broker.consume(topic, 1, timeout=60)
    after = dt.datetime.now(dt.timezone.utc)
    line = json.loads(record.value)["line"]
    parser = DomeLineParser(resolve_dome_profile("dmlite-dome"), EventClock("UTC"))
    event = parser.parse(line)
    assert parser.result == PARSED and event.role == "returns" and not event.whole_seconds
    assert line.endswith(f" dpmhead01 {message}")
    stamped = dt.datetime.fromisoformat(line.split(" ", 1)[0])
    assert before <= stamped <= after
    assert re.match(r"\S+T\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d ", line)


@pytest.mark.services
def test_a_dome_sites_nodes_given_one_site_key_ship_to_one_partition_each_line_naming_its_node(
        kafka_broker, kafka_topic, rsyslog_factory, tmp_path):
    """The head and the disk node set the same site key: every record of both is keyed by
    it, so both reach one partition of a topic of several (where their puts are joined),
    and each envelope still names the node that logged the line."""
    cfg, site = simulated_site(tmp_path)
    topic = kafka_topic(partitions=4)
    sent = {}
    for host, log in site.logs.items():
        lines = log.read_text().splitlines()
        sent[host] = [line for line in lines if " dmlite " in line]
        _, sock, _copy = dome_node(rsyslog_factory, tmp_path, host, topic, site_key="site1")
        send(sock, map(as_datagram, lines))
    records = kafka_broker.consume(topic, sum(map(len, sent.values())), timeout=60)
    assert len(sent) == 2 and len(records) == sum(map(len, sent.values()))
    assert {r.key for r in records} == {b"site1"}
    assert len({r.partition for r in records}) == 1
    for host, lines in sent.items():
        assert [json.loads(r.value)["line"] for r in records
                if json.loads(r.value)["host"] == host] == lines
