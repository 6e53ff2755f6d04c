"""streams/metrics/exporter.py: records and pipeline stats -> the exposition text of the contract."""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from dpmstream.parsers.records import CALL_FIELDS, REQUEST_FIELDS
from dpmstream.streams.metrics.exporter import OTHER, PipelineMetrics
from tests.dpmlog import T1, T2
from tests.parsers.test_linking import F1, HEAD, a_put, link, ns_call

T0 = 1313152303101  # 2011-08-12 12:31:43.101 UTC, in ms


def samples(metrics: PipelineMetrics) -> dict:
    """Every sample of the exposition text, keyed by (name, sorted label items)."""
    return dict(_parsed(metrics.exposition()))


@lru_cache(maxsize=4)
def _parsed(text: str) -> dict:
    # A few records' text is some 2,800 lines of buckets, half a second to parse: a test
    # reading several values of one state parses its text once (the same text, the same
    # samples; a write between reads changes the text).
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics, name, **labels):
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def put_request(**over) -> dict:
    rec = dict.fromkeys(REQUEST_FIELDS)
    rec.update(
        kind="request", host="head01", token="6d4c2a8e-3f5b-4e0c-9a71-2b8f0c1d9e47", op="put",
        client="lxfsra01.cern.ch", nfiles=1, status="success",
        accepted=T0, started=T0 + 17, ended=T0 + 1930,
        auth_ms=17, request_ms=3, queue_ms=29, proc_ms=1240, polls=3, poll_ms=4,
        ready_wait_ms=1500, transfer_ms=400, done_ms=11, total_ms=1930,
    )
    rec.update(over)
    return rec


def call(**over) -> dict:
    rec = dict.fromkeys(CALL_FIELDS)
    rec.update(kind="call", host="head01", daemon="dpns", pid=20713, thread=3, op="statg",
               client="wn37.example.org", started=T0, ended=T0 + 2, duration_ms=2, rc=0)
    rec.update(over)
    return rec


def stats(lines=None, evictions=0, expired=0, in_flight=None, slow=None, latest=None):
    """The attributes of Pipeline.stats that publish() reads (cumulative)."""
    return SimpleNamespace(lines=lines or {}, evictions=evictions, expired=expired,
                           in_flight=in_flight or {}, slow_queue_depth=slow or {},
                           latest_event_ms=latest or {})


def test_a_finished_request_observes_every_phase_it_has_in_seconds():
    m = PipelineMetrics(CollectorRegistry())
    m.write(put_request())
    lab = dict(host="head01", op="put", status="success")
    assert value(m, "dpm_request_phase_seconds_count", phase="auth", **lab) == 1
    assert value(m, "dpm_request_phase_seconds_sum", phase="auth", **lab) == 0.017
    assert value(m, "dpm_request_phase_seconds_sum", phase="proc", **lab) == 1.24
    assert value(m, "dpm_request_phase_seconds_sum", phase="total", **lab) == 1.93
    # 1.24 s falls in the bucket (1.22, 1.4], not in the one below.
    assert value(m, "dpm_request_phase_seconds_bucket", phase="proc", le="1.22", **lab) == 0
    assert value(m, "dpm_request_phase_seconds_bucket", phase="proc", le="1.4", **lab) == 1
    assert value(m, "dpm_requests_total", **lab) == 1
    assert value(m, "dpm_request_polls_sum", host="head01", op="put") == 3
    assert value(m, "dpm_request_polls_bucket", host="head01", op="put", le="2.0") == 0
    assert value(m, "dpm_request_polls_bucket", host="head01", op="put", le="3.0") == 1


def test_phases_absent_from_a_request_create_no_observation():
    m = PipelineMetrics(CollectorRegistry())
    m.write(put_request(status="incomplete", accepted=None, auth_ms=None, proc_ms=None,
                                 ready_wait_ms=None, transfer_ms=None, done_ms=None, polls=0,
                                 poll_ms=0, total_ms=500))
    lab = dict(host="head01", op="put", status="incomplete")
    assert value(m, "dpm_request_phase_seconds_count", phase="auth", **lab) is None
    assert value(m, "dpm_request_phase_seconds_count", phase="done", **lab) is None
    assert value(m, "dpm_request_phase_seconds_count", phase="poll", **lab) == 1
    assert value(m, "dpm_request_phase_seconds_count", phase="total", **lab) == 1
    assert value(m, "dpm_requests_total", **lab) == 1
    assert value(m, "dpm_request_polls_bucket", host="head01", op="put", le="0.0") == 1


def test_a_slightly_negative_queue_wait_counts_as_zero_so_the_sum_never_shrinks():
    m = PipelineMetrics(CollectorRegistry())
    m.write(put_request(queue_ms=-3))
    lab = dict(host="head01", op="put", status="success", phase="queue")
    assert value(m, "dpm_request_phase_seconds_sum", **lab) == 0
    assert value(m, "dpm_request_phase_seconds_bucket", le="0.0", **lab) == 1


def test_requests_are_counted_per_status():
    m = PipelineMetrics(CollectorRegistry())
    for status in ("success", "success", "failed", "aborted"):
        m.write(put_request(status=status))
    m.write(put_request(op="get", status="success"))
    assert value(m, "dpm_requests_total", host="head01", op="put", status="success") == 2
    assert value(m, "dpm_requests_total", host="head01", op="put", status="failed") == 1
    assert value(m, "dpm_requests_total", host="head01", op="put", status="aborted") == 1
    assert value(m, "dpm_requests_total", host="head01", op="get", status="success") == 1


def test_calls_are_ok_error_or_noreturn_by_their_rc():
    m = PipelineMetrics(CollectorRegistry())
    m.write(call(duration_ms=2, rc=0))
    m.write(call(duration_ms=5, rc=2))
    m.write(call(duration_ms=7, rc=1001))
    m.write(call(ended=None, duration_ms=None, rc=None))
    lab = dict(host="head01", daemon="dpns", op="statg")
    assert value(m, "dpm_call_seconds_count", result="ok", **lab) == 1
    assert value(m, "dpm_call_seconds_sum", result="ok", **lab) == 0.002
    assert value(m, "dpm_call_seconds_count", result="error", **lab) == 2
    assert value(m, "dpm_call_seconds_sum", result="error", **lab) == 0.012
    assert value(m, "dpm_call_seconds_count", result="noreturn", **lab) == 1
    assert value(m, "dpm_call_seconds_sum", result="noreturn", **lab) == 0


def test_op_label_is_bounded_known_ops_then_first_unknown_then_other():
    m = PipelineMetrics(CollectorRegistry(), max_unknown_ops=2)
    for op in ("statg", "newop1", "newop2", "newop3", "newop4", "getreplica"):
        m.write(call(op=op))
    ops = {dict(k[1]).get("op") for k in samples(m) if k[0] == "dpm_call_seconds_count"}
    assert ops == {"statg", "newop1", "newop2", OTHER, "getreplica"}
    assert value(m, "dpm_call_seconds_count", host="head01", daemon="dpns", op=OTHER,
                 result="ok") == 2


def test_unknown_op_caps_are_per_daemon():
    m = PipelineMetrics(CollectorRegistry(), max_unknown_ops=1)
    m.write(call(daemon="dpns", op="brandnew"))
    m.write(call(daemon="dpm", op="brandnew"))
    m.write(call(daemon="dpm", op="another"))
    assert m.op_label("dpns", "brandnew") == "brandnew"
    assert m.op_label("dpm", "brandnew") == "brandnew"
    assert m.op_label("dpm", "another") == OTHER


def test_a_dn_or_path_never_becomes_a_label_value():
    m = PipelineMetrics(CollectorRegistry())
    m.write(call(op="/DC=es/DC=irisgrid/O=ugr/CN=Grid User 003"))
    m.write(call(op="/grid/auger/prod/DAT571058.tar.gz"))
    text = m.exposition()
    assert "irisgrid" not in text and "auger" not in text
    assert value(m, "dpm_call_seconds_count", host="head01", daemon="dpns", op=OTHER,
                 result="ok") == 2


def test_lines_counters_follow_cumulative_stats_and_never_go_down():
    m = PipelineMetrics(CollectorRegistry())
    m.publish(stats(lines={("head01", "dpm", "parsed"): 10,
                           ("head01", "dpm", "unmatched"): 1}))
    first = {("head01", "dpm", "parsed"): 25, ("head01", "dpm", "unmatched"): 1,
             ("head01", "dpns", "malformed"): 2}
    m.publish(stats(lines=first))
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 25
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="unmatched") == 1
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpns", result="malformed") == 2
    # The same cumulative stats again add nothing.
    m.publish(stats(lines=first))
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 25
    # Stats that went down come from a new pipeline: the counter still only grows.
    m.publish(stats(lines={("head01", "dpm", "parsed"): 4}))
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 29
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="unmatched") == 1


def test_two_pipelines_in_one_process_add_up_when_named_as_sources():
    m = PipelineMetrics(CollectorRegistry())
    m.publish(stats(lines={("head01", "dpm", "parsed"): 10}, in_flight={"head01": 3}),
                        source="p0")
    m.publish(stats(lines={("head01", "dpm", "parsed"): 7}, in_flight={"head01": 2}),
                        source="p1")
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 17
    assert value(m, "dpm_requests_in_flight", host="head01") == 5


def test_evictions_by_cap_and_timeout_are_counters_present_from_the_start():
    m = PipelineMetrics(CollectorRegistry())
    assert value(m, "dpmstream_evictions_total", reason="cap") == 0
    assert value(m, "dpmstream_evictions_total", reason="timeout") == 0
    m.publish(stats(evictions=3, expired=1))
    m.publish(stats(evictions=5, expired=1))
    assert value(m, "dpmstream_evictions_total", reason="cap") == 5
    assert value(m, "dpmstream_evictions_total", reason="timeout") == 1


def test_gauges_show_the_latest_stats_and_drop_to_zero_for_a_vanished_host():
    m = PipelineMetrics(CollectorRegistry())
    m.publish(stats(in_flight={"head01": 12, "head02": 4}, slow={"head01": 3}))
    assert value(m, "dpm_requests_in_flight", host="head01") == 12
    assert value(m, "dpm_slow_queue_depth", host="head01") == 3
    m.publish(stats(in_flight={"head01": 7}, slow={"head01": 0}))
    assert value(m, "dpm_requests_in_flight", host="head01") == 7
    assert value(m, "dpm_requests_in_flight", host="head02") == 0
    assert value(m, "dpm_slow_queue_depth", host="head01") == 0


def test_event_lag_is_wall_clock_minus_the_latest_event_time_per_host():
    m = PipelineMetrics(CollectorRegistry(), clock_ms=lambda: T0 + 2500)
    m.publish(stats(latest={"head01": T0, "head02": T0 - 60_000}))
    assert value(m, "dpmstream_event_lag_seconds", host="head01") == 2.5
    assert value(m, "dpmstream_event_lag_seconds", host="head02") == 62.5


def test_each_metrics_object_has_its_own_registry():
    a, b = PipelineMetrics(CollectorRegistry()), PipelineMetrics(CollectorRegistry())
    a.write(put_request())
    assert value(a, "dpm_requests_total", host="head01", op="put", status="success") == 1
    assert value(b, "dpm_requests_total", host="head01", op="put", status="success") is None


def test_serve_exposes_the_registry_over_http_on_loopback():
    from urllib.request import urlopen

    from dpmstream.streams.metrics.exporter import serve

    m = PipelineMetrics(CollectorRegistry())
    m.write(put_request(status="failed"))
    server = serve(0, registry=m.registry)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.port > 0
        with urlopen(server.url, timeout=5) as resp:
            text = resp.read().decode()
        assert 'dpm_requests_total{host="head01",op="put",status="failed"} 1.0' in text
    finally:
        server.close()


def test_an_in_flight_count_for_a_single_host_pipeline_is_labelled_with_that_host():
    m = PipelineMetrics(CollectorRegistry(), clock_ms=lambda: T0)
    m.publish(SimpleNamespace(
        lines={("head01", "dpm", "parsed"): 4}, evictions=0, expired=0, in_flight=3,
        slow_queue_depth=1, latest_event_ms={"head01": T0}))
    assert value(m, "dpm_requests_in_flight", host="head01") == 3
    assert value(m, "dpm_slow_queue_depth", host="head01") == 1


def test_a_retired_source_keeps_its_counts_when_a_new_pipeline_takes_its_name():
    m = PipelineMetrics(CollectorRegistry())
    m.publish(stats(lines={("head01", "dpm", "parsed"): 1000}, in_flight={"head01": 3}),
              source="p0")
    m.retire("p0")                            # partition revoked
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 1000
    assert value(m, "dpm_requests_in_flight", host="head01") == 0
    m.publish(stats(lines={("head01", "dpm", "parsed"): 1500}), source="p0")
    assert value(m, "dpmstream_lines_total", host="head01", daemon="dpm", result="parsed") == 2500


def _family_series(text: str, family: str) -> int:
    """Series of one family in the exposition text (every sample line of it)."""
    return sum(1 for line in text.splitlines()
               if line.startswith(family) and not line.startswith("#"))


def test_label_sets_past_the_series_budget_fold_into_other_and_are_counted():
    per_set = PipelineMetrics(CollectorRegistry()).call_seconds.series_per_set(
        ("head01", "dpns", "statg", "ok"))   # each bucket, +Inf, _sum, _count
    m = PipelineMetrics(CollectorRegistry(), max_series=10 * per_set)
    for i in range(30):
        m.write(call(host=f"head{i:02d}", op="statg", duration_ms=5))
    hosts = {dict(k[1])["host"] for k in samples(m) if k[0] == "dpm_call_seconds_count"}
    assert hosts == {f"head{i:02d}" for i in range(10)} | {OTHER}   # first come, kept
    # every observation is still counted: in its own series or under "other"
    assert value(m, "dpm_call_seconds_count", host=OTHER, daemon=OTHER, op=OTHER,
                 result="ok") == 20
    assert value(m, "dpmstream_series_overflow_total", metric="dpm_call_seconds") == 20
    assert _family_series(m.exposition(), "dpm_call_seconds") == 11 * per_set
    # a host admitted before the budget ran out keeps its own series
    m.write(call(host="head03", op="statg", duration_ms=5))
    assert value(m, "dpm_call_seconds_count", host="head03", daemon="dpns", op="statg",
                 result="ok") == 2


def test_the_overflow_counter_exists_at_zero_for_every_budgeted_family():
    m = PipelineMetrics(CollectorRegistry())
    for family in ("dpm_request_phase_seconds", "dpm_requests_total", "dpm_request_polls",
                   "dpm_call_seconds", "dpmstream_lines_total"):
        assert value(m, "dpmstream_series_overflow_total", metric=family) == 0


def test_many_hosts_and_ops_keep_the_exposition_within_the_series_budget():
    budget = 5_000
    m = PipelineMetrics(CollectorRegistry(), max_series=budget, max_unknown_ops=64)
    for host in range(300):
        for op in range(40):
            for rc in (0, 1, None):
                m.write(call(host=f"head{host:03d}", op=f"op{op:02d}", rc=rc,
                                      duration_ms=None if rc is None else 3))
    text = m.exposition()
    series = _family_series(text, "dpm_call_seconds")
    per_set = m.call_seconds.series_per_set(("h", "dpns", "o", "ok"))
    # the budget, plus the folded label sets (one per result)
    assert series <= budget + 3 * per_set
    # and the text with it: a series line is under 150 bytes (bench/RESULTS.md, series budget)
    assert len(text.encode()) < 150 * (budget + 3 * per_set) + 200_000
    assert value(m, "dpmstream_series_overflow_total", metric="dpm_call_seconds") > 30_000
    total = sum(v for k, v in samples(m).items() if k[0] == "dpm_call_seconds_count")
    assert total == 300 * 40 * 3   # nothing dropped: folded, and counted


def test_linked_name_server_time_is_a_histogram_by_host_and_op_only():
    from prometheus_client import CollectorRegistry, generate_latest

    from dpmstream.streams.metrics.exporter import PipelineMetrics

    metrics = PipelineMetrics(CollectorRegistry())
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1)
    dpns = ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1)
    (req,), calls = link(dpm, dpns)
    for record in (req, *calls):
        metrics.write(record)
    metrics.write({**req, "token": T2, "ns_calls": None, "ns_ms": None})  # no DPNS log
    text = generate_latest(metrics.registry).decode()
    assert 'dpm_request_ns_seconds_count{host="dpmhead01.cern.ch",op="put"} 1.0' in text
    assert 'dpm_request_ns_seconds_sum{host="dpmhead01.cern.ch",op="put"} 0.25' in text
    assert T1 not in text and "/dpm/" not in text  # neither tokens nor paths become labels
