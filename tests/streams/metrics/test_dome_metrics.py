"""streams/metrics/dome.py: the DOME records as metrics, through PipelineMetrics (the
exporter `run` and the Kafka worker serve), with bounded labels and the series budget."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from dpmstream.streams.metrics.exporter import PipelineMetrics


def call(i: int = 0, *, command="dome_put", code=200, whole=1, duration=1000, host="dpmhead01"):
    return {"kind": "dome_call", "host": host, "pid": 2345, "tid": 140685573784640 + i,
            "role": "head", "command": command, "http_code": code, "caller": "disk01",
            "remote_client": "/DC=ch/DC=cern/CN=someone", "start": 1_000_000 + i,
            "end": None if code is None else 1_000_000 + i + duration,
            "duration": None if code is None else duration, "cut": int(code is None),
            "whole_seconds": whole}


def samples(metrics: PipelineMetrics) -> list[tuple[str, dict, float]]:
    return [(s.name, s.labels, s.value) for family in
            text_string_to_metric_families(metrics.exposition()) for s in family.samples]


def total(metrics, name, **labels) -> float:
    return sum(v for n, lab, v in samples(metrics) if n == name and labels.items() <= lab.items())


def test_a_command_outside_the_known_set_counts_as_other_never_as_itself():
    metrics = PipelineMetrics()
    metrics.write(call(command="dome_put"))
    metrics.write(call(1, command="/dpm/example.org/home/atlas/file.root"))
    metrics.write(call(2, command="dome_mynewverb"))
    assert total(metrics, "dpm_dome_calls_total", command="dome_put") == 1
    assert total(metrics, "dpm_dome_calls_total", command="other") == 2
    assert not any("/dpm/" in v or "CN=" in v for _, lab, _ in samples(metrics) for v in lab.values())


def test_code_classes_and_a_cut_call_as_none():
    metrics = PipelineMetrics()
    for i, code in enumerate((200, 202, 302, 404, 500, None, 700)):
        metrics.write(call(i, code=code))
    got = {c: total(metrics, "dpm_dome_calls_total", code_class=c)
           for c in ("2xx", "3xx", "4xx", "5xx", "none")}
    assert got == {"2xx": 2, "3xx": 1, "4xx": 1, "5xx": 1, "none": 2}


def test_only_sub_second_calls_are_observed_as_durations():
    metrics = PipelineMetrics()
    metrics.write(call(0, whole=1, duration=1000))
    metrics.write(call(1, whole=0, duration=7))
    assert total(metrics, "dpm_dome_calls_total") == 2
    assert total(metrics, "dpm_dome_call_seconds_count") == 1
    assert total(metrics, "dpm_dome_call_seconds_sum") == 0.007


def test_filesystem_gauges_take_the_last_line_and_a_path_not_shaped_as_a_mount_point_is_other():
    metrics = PipelineMetrics()
    for t, free in ((1, 500), (2, 400)):
        metrics.write({"kind": "dome_capacity", "time": t, "host": "disk01", "fs": "/srv/dpm/01",
                       "phys": 1000, "free": free})
    metrics.write({"kind": "dome_capacity", "time": 3, "host": "disk01", "fs": "no mount point",
                   "phys": 1, "free": 1})
    assert total(metrics, "dpm_dome_fs_free_bytes", server="disk01", fs="/srv/dpm/01") == 400
    assert total(metrics, "dpm_dome_fs_size_bytes", server="disk01", fs="/srv/dpm/01") == 1000
    assert total(metrics, "dpm_dome_fs_free_bytes", fs="other") == 1
    for event in ("disabled", "disabled", "enabled"):
        metrics.write({"kind": "dome_fs_event", "time": 4, "host": "head", "server": "disk01",
                       "fs": "/srv/dpm/01", "event": event, "transition": 1})
    assert total(metrics, "dpm_dome_fs_events_total", event="disabled") == 2
    assert total(metrics, "dpm_dome_fs_enabled", server="disk01", fs="/srv/dpm/01") == 1


def test_past_the_series_budget_new_hosts_fold_into_other_and_are_counted():
    metrics = PipelineMetrics(max_series=10)    # 2 series a counter label set: 5 sets
    for i in range(20):
        metrics.write(call(i, host=f"node{i:02d}"))
    hosts = {lab["host"] for n, lab, _ in samples(metrics) if n == "dpm_dome_calls_total"}
    assert len(hosts) <= 6 and "other" in hosts
    assert total(metrics, "dpm_dome_calls_total") == 20
    assert total(metrics, "dpmstream_series_overflow_total", metric="dpm_dome_calls_total") == 15


def test_puts_count_by_status_and_joined_ones_observe_put_to_putdone():
    metrics = PipelineMetrics()
    base = {"kind": "dome_put", "head": "dpmhead01", "lfn": "/dpm/x", "pfn": "/srv/dpm/01/x.1.2",
            "whole_seconds": 1}
    metrics.write({**base, "status": "success", "put_to_putdone": 12_000})
    metrics.write({**base, "status": "incomplete", "put_to_putdone": None})
    assert total(metrics, "dpm_dome_puts_total", status="success") == 1
    assert total(metrics, "dpm_dome_puts_total", status="incomplete") == 1
    assert total(metrics, "dpm_dome_put_to_putdone_seconds_sum", host="dpmhead01") == 12.0
