"""PartitionState.feed_batch's plan (the extension's plan_batch, or its Python reference
state.plan_runs) against feed_record one record at a time, on hostile batches: the same
records, marks, counters and state changes after every batch, on both engines."""

from __future__ import annotations

import json

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka import envelope as envelope_module
from dpmstream.streams.kafka import state as state_module
from dpmstream.streams.kafka.envelope import MAX_RECORD_BYTES, ms_to_rfc3339
from dpmstream.streams.kafka.state import PartitionState, plan_runs
from dpmstream.streams.kafka.lines_fetch import Record as Message
from tests.helpers import sampled
from tests.streams.kafka.test_worker_dome import TIMEOUT_S, dome_site, site_records
from tests.worker_helpers import envelopes, interleaved

DPM, DPNS = "/var/log/dpm/log", "/var/log/dpns/log"
HOUR = 3_600_000
MONTH_END = 1330559400000   # 2012-02-29T23:50:00Z: receive times date lines in two years


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Two hosts' DPM and DPNS files and a DOME site's nodes in one partition, with what
    rsyslog and a broken producer send: a stretch re-sent, a file rotated (offset 0 again,
    other text), a jump confirmed by the line after it and one refuted, records that are
    not envelopes (not JSON, not UTF-8, missing or mistyped members, over the size bound),
    envelopes off rsyslog's form that only Python decodes (a quoted offset, an extra
    member, an escaped lone surrogate), a line that is not UTF-8 as rsyslog escapes it, and
    receive times that repeat, cross hours and the end of February, or are missing."""
    base = tmp_path_factory.mktemp("plan")
    sim_a = simulate(SimConfig(requests=60, seed=11), base / "a")
    sim_b = simulate(SimConfig(requests=40, seed=12, get_fraction=0.3), base / "b")
    a_dpm = envelopes(sim_a.log_path, "head01", DPM)
    one = interleaved(a_dpm,
                      envelopes(sim_a.dpns_log_path, "head01", DPNS))
    two = envelopes(sim_b.log_path, "head02", DPM)
    dome = site_records(dome_site(base, stamp="rfc3339", duration=40.0, rate=2.0, disks=2, seed=3))
    recs = [_stamped(r, i, len(one)) for i, r in enumerate(one)]
    recs = [r for pair in zip(recs, two) for r in pair] + recs[len(two):]
    n = len(recs)
    recs = recs[:n // 3] + dome[:len(dome) // 2] + recs[n // 3:] + dome[len(dome) // 2:]
    resent = recs[400:520]
    rotated = _rotated(a_dpm[1:41], "head02")   # not its first line (the same start)
    jump_refuted = [_with(one[700], offset=10**11)]
    last = json.loads(one[-1][1])
    after = last["offset"] + len(last["line"].encode()) + 1
    jump_confirmed = [_with(one[-1], offset=after + 300_000, line="a line after a gap"),
                      _with(one[-1], offset=after + 300_000 + 19, line="and the next one")]
    bad = [(b"head01", b"{garbage"), (None, None), (b"head01", b""),
           (b"head01", b'{"host": "head01", "path": "/x", "offset": 1, "line": "\xff\xfe"}'),
           (b"head01", json.dumps({"host": "head01", "path": DPM, "line": "no offset"}).encode()),
           (b"head01", json.dumps({"host": 7, "path": DPM, "offset": 1, "line": "x"}).encode()),
           (b"head01", json.dumps({"host": "head01", "path": DPM, "offset": -4, "line": "x"}).encode()),
           (b"head01", json.dumps({"host": "head01", "path": DPM, "offset": 1, "line": None}).encode()),
           (b"head01", b"[1, 2]"),
           (b"head01", json.dumps({"host": "head01", "path": DPM, "offset": 1,
                                   "line": "x" * MAX_RECORD_BYTES}).encode())]
    off_form = [_with(two[-3], offset=str(json.loads(two[-3][1])["offset"])),
                _with(two[-2], extra="member"),
                (two[-1][0], two[-1][1].replace(b'"line":"', b'"line":"\\ud800 lone ')),
                _with(two[-1], line="#033 escaped and \udcff not UTF-8")]
    return [Message(k, v, i) for i, (k, v) in enumerate(
        recs[:900] + resent + recs[900:1500] + bad + jump_refuted + recs[1500:2500]
        + rotated + off_form + recs[2500:] + jump_confirmed + recs[-50:])]


def _with(record, **members):
    key, value = record
    return key, json.dumps({**json.loads(value), **members}).encode()


def _rotated(records, host):
    """The records as the first lines of a file of `host` started over (offset 0 on)."""
    out, offset = [], 0
    for _key, value in records:
        env = json.loads(value)
        out.append(_with((host.encode(), value), host=host, offset=offset))
        offset += len(env["line"].encode()) + 1
    return out


def _stamped(record, i, n):
    """Receive times 6 hours across the end of February 2012, a few records sharing each
    time (as rsyslog's readings do); every 50th without one, every 333rd unreadable."""
    ms = MONTH_END - 3 * HOUR + 6 * HOUR * (i // 4 * 4) // n
    if i % 50 == 0:
        return _with(record, received=None) if i % 100 else _without_received(record)
    return _with(record, received="yesterday" if i % 333 == 0 else ms_to_rfc3339(ms))


def _without_received(record):
    key, value = record
    env = json.loads(value)
    env.pop("received", None)
    return key, json.dumps(env).encode()


def _partition():
    return PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S))


# A checkpoint after every record on Python's plan is the longest cell: `make test` runs
# it, make check the one-record batches on the compiled plan and Python's on the others.
@pytest.mark.parametrize("engine, batch", sampled(
    [(engine, batch) for engine in ("compiled", "python") for batch in (1, 7, 1000, 100_000)],
    keep=[("compiled", 1), ("compiled", 7), ("compiled", 1000), ("compiled", 100_000),
          ("python", 7), ("python", 1000), ("python", 100_000)],
    ids=lambda cell: f"{cell[0]}-{cell[1]}"), indirect=["engine"])
def test_a_batch_planned_at_once_gives_what_feed_record_gives_record_by_record(hostile, engine, batch):
    by_record, by_batch = _partition(), _partition()
    for start in range(0, len(hostile), batch):
        chunk = hostile[start:start + batch]
        for msg in chunk:
            by_record.feed_record(msg.key(), msg.value(), msg.offset())
        by_record.consumed(chunk[-1].offset() + 1)
        by_record.advance()
        by_batch.feed_batch(chunk)
        assert by_batch.marks == by_record.marks
        assert by_batch.checkpoint() == by_record.checkpoint()
    by_record.finish()
    by_batch.finish()
    assert by_batch.checkpoint() == by_record.checkpoint()
    assert by_batch.stats.lines == by_record.stats.lines
    for counter in ("duplicates", "rotations", "bad_records", "last_bad_reason", "bad_reasons",
                    "bad_places", "bad_envelopes", "next_offset"):
        assert getattr(by_batch, counter) == getattr(by_record, counter), counter
    assert by_batch.stats.latest_received_ms == by_record.stats.latest_received_ms
    # the batches held what they were built to hold
    assert sum(by_batch.duplicates.values()) >= 120
    assert by_batch.rotations["head02"] == 1
    assert by_batch.bad_reasons["offset_jump"] == 1
    assert by_batch.bad_reasons["too_large"] == by_batch.bad_reasons["not_utf8"] == 1
    assert by_batch.bad_records >= 11
    assert sum(n for (h, d, r), n in by_batch.stats.lines.items() if d == "dome" and r == "parsed") > 100


def test_the_compiled_plan_plans_as_its_python_reference(hostile):
    """plan_batch and plan_runs from each record where the other stopped, on the same
    marks: the same runs, stops, marks and dirty files (on records the compiled decoder
    reads: one it leaves to Python stops its plan there, and feed_record's path judges it,
    so both feed the same). A record both stop at is passed over, as if judged a duplicate."""
    compiled = state_module.compiled_plan_batch
    if compiled is None:
        pytest.skip("the compiled extension is not built")
    part = _partition()
    part.feed_batch(hostile[:300])   # files with marks
    readable = [m for m in hostile[300:] if envelope_module.compiled_decode_fields(m.value())]
    marks_c = {k: m[:] for k, m in part.marks.items()}
    marks_p = {k: m[:] for k, m in part.marks.items()}
    dirty_c, dirty_p = set(), set()
    i, planned, stops = 0, 0, 0
    while i < len(readable):
        runs_c, next_c = compiled(readable, i, marks_c, dirty_c)
        runs_p, next_p = plan_runs(readable, i, marks_p, dirty_p)
        assert (runs_c, next_c, marks_c, dirty_c) == (runs_p, next_p, marks_p, dirty_p)
        planned += sum(len(lines) for *_, lines in runs_c)
        stops += next_c < len(readable)
        i = next_c + 1
    assert planned > 500 and stops > 10   # (a file without a mark, e.g. a DOME node's, stops each time)


@pytest.mark.parametrize("engine", ["compiled", "python"], indirect=True)
def test_the_consumers_own_messages_are_fed_as_the_records_made_by_hand(hostile, engine):
    """The worker feeds the confluent_kafka.Messages a consume() made (lines_fetch.
    records_by_partition), tests and benches lines_fetch.Record: the same batch of either
    gives the same records, state and counts."""
    from confluent_kafka import Message as KafkaMessage

    as_kafka = [KafkaMessage(topic="lines", partition=0, offset=m.offset(), key=m.key(),
                             value=m.value()) for m in hostile]
    by_hand, consumed = _partition(), _partition()
    for start in range(0, len(hostile), 1000):
        by_hand.feed_batch(hostile[start:start + 1000])
        consumed.feed_batch(as_kafka[start:start + 1000])
        assert consumed.checkpoint() == by_hand.checkpoint()
    by_hand.finish()
    consumed.finish()
    assert consumed.checkpoint() == by_hand.checkpoint()
    for counter in ("duplicates", "rotations", "bad_records", "bad_reasons", "bad_places",
                    "next_offset"):
        assert getattr(consumed, counter) == getattr(by_hand, counter), counter
    assert consumed.bad_records >= 11 and sum(consumed.duplicates.values()) >= 120
