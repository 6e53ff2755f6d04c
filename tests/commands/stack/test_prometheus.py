"""The private Prometheus: scrapes a real target and answers PromQL over HTTP."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from dpmstream.commands.stack.process import ServiceError, free_port

pytestmark = pytest.mark.services


@pytest.fixture
def target():
    """A real metrics endpoint on 127.0.0.1 with known values."""
    registry = CollectorRegistry()
    lines = Counter("dpmstream_lines", "lines", ["host", "daemon", "result"], registry=registry)
    lines.labels("head01", "dpm", "parsed").inc(41)
    in_flight = Gauge("dpm_requests_in_flight", "open requests", ["host"], registry=registry)
    in_flight.labels("head01").set(3)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield f"127.0.0.1:{port}", lines
    server.shutdown()
    thread.join(timeout=5)


def test_prometheus_scrapes_a_target_and_answers_queries(prometheus_factory, target):
    address, lines = target
    prom = prometheus_factory([address])

    result = prom.wait_for('dpmstream_lines_total{host="head01"}', lambda r: len(r) == 1, timeout=45)
    assert result[0]["metric"]["daemon"] == "dpm"
    assert float(result[0]["value"][1]) == 41
    assert prom.value("dpm_requests_in_flight") == 3
    assert prom.targets_health() == {f"http://{address}/metrics": "up"}

    lines.labels("head01", "dpm", "parsed").inc()
    prom.wait_for("dpmstream_lines_total", lambda r: r and float(r[0]["value"][1]) == 42, timeout=30)


def test_prometheus_query_error_is_reported_with_the_reason(prometheus_factory, target):
    prom = prometheus_factory([target[0]])
    with pytest.raises(ServiceError, match="bad_data"):
        prom.query("sum(")


def test_prometheus_wait_for_times_out_with_the_last_answer_and_target_health(prometheus_factory):
    prom = prometheus_factory([f"127.0.0.1:{free_port()}"])  # nobody listens there
    with pytest.raises(ServiceError, match="did not meet the condition") as err:
        prom.wait_for("up == 1", timeout=3)
    assert "targets" in str(err.value)
