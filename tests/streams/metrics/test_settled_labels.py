"""PipelineMetrics and DomeMetrics observe a record whose raw label values have settled
(every label and label set resolves to itself, with no overflow and no fold) straight into
the children kept for those values, skipping the bounded labels and the series budgets.
The labelled path (the reference) stays for every other record; the exposition must not
tell the two apart: the same series, counts and float sums, the same overflow counts."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client import CollectorRegistry

from dpmstream.parsers import engines
from dpmstream.parsers.records import CALL_FIELDS
from dpmstream.streams.metrics.exporter import PipelineMetrics
from tests.engine_helpers import run_engine
from tests.engine_inputs import make_input
from tests.streams.metrics.test_exporter import call, put_request, value


class LabelledOnly(PipelineMetrics):
    """The reference: every record through the bounded labels and the budgets."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dome._settled_call = lambda key: None

    def _settled_request(self, key):
        return None

    def _settled_call(self, key):
        return None


def exposition(metrics) -> str:
    # _created is the wall time a series was made at, the only text allowed to differ
    return "".join(line + "\n" for line in metrics.exposition().splitlines()
                   if "_created" not in line)


def both(records, **caps) -> tuple[str, str]:
    settled, labelled = PipelineMetrics(CollectorRegistry(), **caps), LabelledOnly(CollectorRegistry(), **caps)
    for rec in records:
        settled.write(dict(rec))
        labelled.write(dict(rec))
    return exposition(settled), exposition(labelled)


def dome_call(i: int, **over) -> dict:
    rec = dict(kind="dome_call", host=f"disk{i % 5}", pid=1, tid=2, role="disk",
               command=("dome_put", "dome_getspaceinfo", "dome_bogus")[i % 3],
               http_code=(200, 202, 404, 500, None)[i % 5], caller=None, remote_client=None,
               start=0, end=0, duration=(i * 37) % 5000 - 3, whole_seconds=i % 4 == 0)
    rec.update(over)
    return rec


def hostile_mix(n: int) -> list[dict]:
    """Requests, calls and DOME calls: repeated label sets, hosts past the cap, empty and
    missing hosts, hosts that are not strings (True == 1, labelled differently), odd ops,
    negative and missing phases, name-server times; durations spread over the buckets."""
    records = []
    hosts = ["head01", "head02", "", None, True, 1, "bad host", *[f"h{k}" for k in range(12)]]
    for i in range(n):
        host = hosts[i % len(hosts)]
        ms = (i * 7919) % 90_000
        records.append(put_request(host=host, op=("put", "get", f"op{i % 9}")[i % 3],
                                   status=("success", "failed", None, "weird")[i % 4],
                                   auth_ms=-5 if i % 11 == 0 else ms % 700, queue_ms=None if i % 5 == 0 else ms,
                                   proc_ms=ms // 3, polls=i % 17, poll_ms=i % 13, total_ms=ms * 3,
                                   ns_ms=None if i % 2 else ms % 997))
        records.append(call(host=host, daemon=("dpns", "dpm", None, "", "odd", f"d{i % 7}")[i % 6],
                            op=("statg", "getpools", None, f"x{i % 50}")[i % 4],
                            rc=(0, 1, None)[i % 3], duration_ms=None if i % 10 == 0 else (ms % 5000) - 2))
        records.append(dome_call(i, host=host if isinstance(host, str) or host is None else f"n{i % 30}"))
    return records


@pytest.mark.parametrize("caps", [
    {},
    {"max_hosts": 4, "max_unknown_ops": 2, "max_daemons": 3, "max_series": 900},
    {"max_hosts": 30, "max_unknown_ops": 40, "max_series": 250},
], ids=["default", "caps-and-budget-bite", "budget-bites-early"])
def test_the_exposition_is_the_labelled_paths_to_the_byte(caps):
    settled, labelled = both(hostile_mix(1500), **caps)
    assert "dpm_request_phase_seconds_bucket" in settled and "dpm_dome_call_seconds_bucket" in settled
    assert settled == labelled


@pytest.mark.parametrize("caps", [{}, {"max_hosts": 4, "max_unknown_ops": 2, "max_series": 900}],
                         ids=["default", "caps-and-budget-bite"])
def test_records_written_in_batches_give_the_exposition_of_one_by_one(caps):
    # write_many (the worker: a fetch's records in one call) counts a settled request slot's
    # requests once a call; batches of uneven sizes, so a slot is settled in one batch and
    # counted in the next, and the labelled path's records fall inside batches
    records = hostile_mix(1500)
    one_by_one, batched = (PipelineMetrics(CollectorRegistry(), **caps) for _ in range(2))
    for rec in records:
        one_by_one.write(dict(rec))
    start = 0
    for size in itertools.cycle((1, 7, 64, 300)):
        if start >= len(records):
            break
        batched.write_many([dict(rec) for rec in records[start:start + size]])
        start += size
    assert batched._request_slots   # the settled path ran
    assert value(batched, "dpm_requests_total", host="head01", op="put", status="success") > 1
    assert exposition(batched) == exposition(one_by_one)


def test_a_batch_that_raises_counts_the_requests_observed_before_it():
    # A record the metrics cannot take (a phase that is not a number) raises, as write()
    # does, with what write() had observed of it; the requests observed before it in the
    # batch are counted all the same
    metrics, reference = PipelineMetrics(CollectorRegistry()), PipelineMetrics(CollectorRegistry())
    good, bad = [put_request() for _ in range(5)], put_request(proc_ms="soon")
    for rec in good:
        reference.write(rec)
    with pytest.raises(TypeError):
        reference.write(bad)
    with pytest.raises(TypeError):
        metrics.write_many([*good, bad, put_request()])
    assert value(metrics, "dpm_requests_total", host="head01", op="put", status="success") == 5.0
    assert exposition(metrics) == exposition(reference)


def test_a_folded_label_set_counts_an_overflow_at_every_record():
    # Past the budget the label set folds into "other" at each record, never settled
    metrics = PipelineMetrics(CollectorRegistry(), max_series=2)
    for _ in range(5):
        metrics.write(call(host="head01", op="statg"))
    assert value(metrics, "dpmstream_series_overflow_total", metric="dpm_call_seconds") == 5.0
    assert value(metrics, "dpm_call_seconds_count", host="other", daemon="other", op="other",
                 result="ok") == 5.0


def test_a_host_past_the_cap_counts_an_overflow_at_every_record():
    metrics = PipelineMetrics(CollectorRegistry(), max_hosts=1)
    metrics.write(put_request(host="head01"))
    for _ in range(4):
        metrics.write(put_request(host="head02"))
    assert metrics.host_label.overflowed == 4
    assert value(metrics, "dpm_requests_total", host="other", op="put", status="success") == 4.0


def test_hosts_equal_as_keys_keep_their_own_labels():
    # True == 1 == 1.0 as dict keys; their labels are "True" and other (not an identifier)
    metrics = PipelineMetrics(CollectorRegistry())
    for host in (True, True, 1, 1.0, True):
        metrics.write(put_request(host=host))
    assert value(metrics, "dpm_requests_total", host="True", op="put", status="success") == 3.0
    assert value(metrics, "dpm_requests_total", host="other", op="put", status="success") == 2.0


def test_sums_add_in_record_order_to_the_float():
    # 0.1 + 0.2 + 0.3 differs from 0.3 + 0.2 + 0.1 in binary floating point: the sum is the
    # one of the records' order, as the labelled path adds them
    metrics = PipelineMetrics(CollectorRegistry())
    for ms in (100, 200, 300):
        metrics.write(call(duration_ms=ms))
    got = value(metrics, "dpm_call_seconds_sum", host="head01", daemon="dpns", op="statg",
                result="ok")
    assert got == 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1


def test_dome_calls_past_the_budget_count_an_overflow_at_every_record():
    # disk1's calls fit the budget of 2 series (a counter's _total and _created); disk2's
    # fold at each of its records, and no call's histogram fits at all
    metrics = PipelineMetrics(CollectorRegistry(), max_series=2)
    for host in ("disk1", "disk2", "disk2", "disk1"):
        metrics.write(dome_call(0, host=host, whole_seconds=False, duration=5))
    assert value(metrics, "dpmstream_series_overflow_total", metric="dpm_dome_calls_total") == 2.0
    assert value(metrics, "dpmstream_series_overflow_total",
                 metric="dpm_dome_call_seconds") == 4.0
    assert value(metrics, "dpm_dome_calls_total", host="disk1", role="disk", command="dome_put",
                 code_class="2xx") == 2.0


def test_slots_stay_bounded_whatever_the_raw_values():
    # Raw values folded into one label (unknown DOME commands and roles, hosts past the
    # cap) are not kept one slot each: thousands of them keep no more slots than labels
    metrics = PipelineMetrics(CollectorRegistry(), max_hosts=3)
    for i in range(3000):
        metrics.write(dome_call(i, host=f"disk{i % 3}", command=f"dome_made_up_{i}"))
        metrics.write(dome_call(i, host=f"disk{i % 3}", role=f"role{i}", command="dome_put"))
        metrics.write(call(host=f"host{i}", op=f"op{i}"))
        metrics.write(put_request(host=f"host{i}", op=f"op{i}"))
    assert metrics.host_label.overflowed > 0
    kept = (len(metrics._request_slots) + len(metrics._call_children)
            + len(metrics.dome._call_slots))
    assert kept <= 3 * 3 * 5 + 3 + 3


@pytest.mark.skipif(not engines.compiled_available(), reason="compiled engine not built")
def test_both_engines_records_give_the_same_exposition(tmp_path):
    inp = make_input(tmp_path, "scenario:ns-clients")
    python, compiled = (run_engine(engine, inp) for engine in (engines.PYTHON, engines.COMPILED))
    metrics = [PipelineMetrics(CollectorRegistry()) for _ in range(2)]
    for m, outcome in zip(metrics, (python, compiled)):
        for rec in outcome.records:
            m.write(rec)
    assert len(python.records) > 100
    assert exposition(metrics[0]) == exposition(metrics[1])
