"""streams/kafka/state.py: one partition's pipeline without a broker: duplicates, bad records, state round trips."""

from __future__ import annotations

import json

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.lines_fetch import Record as Message
from dpmstream.streams.kafka.state import PartitionState
from tests.helpers import sampled
from tests.worker_helpers import canonical, core_records, interleaved
from tests.worker_helpers import envelopes as _envelopes

HOST = "dpmhead01"
PATH = "/var/log/dpm/log"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate(SimConfig(requests=250, seed=7), tmp_path_factory.mktemp("sim") / "s")


def envelopes(path, host=HOST, log_path=PATH):
    return _envelopes(path, host, log_path)


# -- duplicates ------------------------------------------------------------------------------

def test_a_line_delivered_twice_is_fed_once_and_counted_as_duplicate(sim):
    recs = envelopes(sim.log_path)[:500]
    once = PartitionState(0)
    for key, value in recs:
        once.feed_record(key, value)
    twice = PartitionState(0)
    for key, value in recs[:300] + recs[200:]:   # 200..299 again
        twice.feed_record(key, value)
    assert twice.duplicates[HOST] == 100
    assert twice.stats.lines == once.stats.lines
    assert canonical(twice.checkpoint()[0]) == canonical(once.checkpoint()[0])


def test_a_batch_is_fed_in_order_and_marks_the_next_kafka_offset(sim):
    recs = envelopes(sim.log_path)[:500]
    one_by_one = PartitionState(0)
    for key, value in recs:
        one_by_one.feed_record(key, value)
    batched = PartitionState(0)
    batched.feed_batch([Message(k, v, 1000 + i) for i, (k, v) in enumerate(recs)])
    assert batched.next_offset == 1500
    assert batched.stats.lines == one_by_one.stats.lines
    assert canonical(batched.checkpoint()[0]) == canonical(one_by_one.checkpoint()[0])


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_a_checkpoints_changes_stay_as_taken_while_the_next_batch_is_fed(sim, engine, monkeypatch):
    """The worker commits a checkpoint while it feeds the next batch: nothing the
    checkpoint returned may move with the partition (a duplicate mark that did made a
    retaken partition skip the lines of the failed batch as seen before)."""
    from dpmstream.parsers import engines
    if engine == "compiled" and not engines.compiled_available():
        pytest.skip("the compiled extension is not built")
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    recs = envelopes(sim.log_path)[:1200]
    part = PartitionState(0)
    part.feed_batch([Message(k, v, i) for i, (k, v) in enumerate(recs[:600])])
    records, changes = part.checkpoint()
    taken = json.dumps([records, changes], sort_keys=True)
    part.feed_batch([Message(k, v, 600 + i) for i, (k, v) in enumerate(recs[600:])])
    part.checkpoint()
    assert json.dumps([records, changes], sort_keys=True) == taken


def test_a_rotated_file_starting_again_at_offset_zero_is_not_taken_for_duplicates(sim):
    recs = envelopes(sim.log_path)
    part = PartitionState(0)
    for key, value in recs[:1000]:
        part.feed_record(key, value)
    # The same path now holds a new file: offsets start again from 0, other lines.
    rotated = [(k, json.dumps({**json.loads(v), "offset": json.loads(v)["offset"] - json.loads(recs[1000][1])["offset"]}).encode())
               for k, v in recs[1000:2000]]
    for key, value in rotated:
        part.feed_record(key, value)
    assert part.rotations[HOST] == 1
    assert part.duplicates[HOST] == 0
    parsed = sum(n for (h, d, r), n in part.stats.lines.items() if r == "parsed")
    assert parsed == 2000


def test_records_that_are_not_envelopes_are_counted_as_malformed_lines():
    part = PartitionState(0)
    part.feed_record(b"head07", b"{garbage")
    part.feed_record(b"\xff\xfe", b'{"host": "h"}')
    part.feed_record(None, None)
    lines = part.stats.lines
    assert lines[("head07", "unknown", "malformed")] == 1
    assert lines[("unknown", "unknown", "malformed")] == 2
    assert part.bad_records == 3 and "not JSON" not in part.last_bad_reason


# -- state round trip -------------------------------------------------------------------------

# A restart after every third record is the thorough case and takes the longest: `make
# test` runs it, the fast loop runs the unaligned and the long interval.
@pytest.fixture(scope="module")
def both_daemons(sim):
    """The two daemons' envelopes interleaved, and the records of one partition that never
    restarted: the same for every interval K, so computed once for the module."""
    recs = interleaved(envelopes(sim.log_path),
                       envelopes(sim.dpns_log_path, log_path="/var/log/dpns/log"))
    return recs, core_records(recs)


@pytest.mark.parametrize("every", [pytest.param(3, marks=pytest.mark.slow), 97, 1000])
def test_state_saved_every_k_lines_and_restored_gives_the_same_records(both_daemons, every):
    """A worker restarted from its changelog after any batch carries on exactly."""
    recs, expected = both_daemons

    store: dict = {}
    out: list = []
    part = PartitionState(0)
    for i, (key, value) in enumerate(recs, 1):
        part.feed_record(key, value)
        if i % every == 0 or i == len(recs):
            part.consumed(i)
            part.advance()
            records, changes = part.checkpoint()
            out += records
            for k, v in changes.items():
                if v is None:
                    store.pop(k, None)
                else:
                    store[k] = json.loads(json.dumps(v))   # as it comes back from Kafka
            part = PartitionState(0)                          # "crash" and restore
            part.restore(dict(store))
    assert part.next_offset == len(recs)
    assert len(out) == len(expected)
    assert canonical(out) == canonical(expected)


def test_tombstones_leave_only_open_state_in_the_store(sim):
    part = PartitionState(0)
    store = {}
    recs = envelopes(sim.log_path)
    for i, (key, value) in enumerate(recs, 1):
        part.feed_record(key, value)
        if i % 500 == 0 or i == len(recs):
            for k, v in part.checkpoint()[1].items():
                if v is None:
                    assert k in store, f"tombstone for {k} that was never stored"
                    del store[k]
                else:
                    store[k] = v
    open_requests = sum(1 for k in store if k.startswith("r|"))
    assert open_requests == part.pipeline.stats.in_flight
    remembered = [key for k, keys in store.items() if k.startswith("f|") for key in keys]
    assert remembered and len(remembered) == part.pipeline.reassembler.remembered_ended


# -- a batch fed in runs is fed as line by line ------------------------------------------------

def _restamped(recs, start_ms, end_ms):
    """The records with distinct receive times from start_ms to end_ms, as rsyslog stamps
    them (microseconds); every 50th has none, every 333rd an unreadable one."""
    from dpmstream.streams.kafka.envelope import ms_to_rfc3339
    out = []
    for i, (key, value) in enumerate(recs):
        env = json.loads(value)
        ms = start_ms + (end_ms - start_ms) * i // len(recs)
        env["received"] = ms_to_rfc3339(ms, micros=i % 997)
        if i % 50 == 0:
            del env["received"]
        elif i % 333 == 0:
            env["received"] = "yesterday"
        out.append((key, json.dumps(env).encode()))
    return out


def _messages(sim):
    """Two hosts' DPM and DPNS files in one partition, a stretch delivered again, records
    that are not envelopes, a line far past its file's mark, and receive times crossing hours and the end of February 2012:
    the (year, month) they give dates the August lines in 2011 before it, in 2012 after."""
    one = interleaved(envelopes(sim.log_path), envelopes(sim.dpns_log_path, log_path="/var/log/dpns/log"))
    two = envelopes(sim.log_path, host="dpmhead02")[:3000]
    hour, month_end = 3_600_000, 1330559400000   # 2012-02-29T23:50:00Z
    recs = (_restamped(one, month_end - 3 * hour, month_end + 3 * hour)
            + _restamped(two, month_end - hour // 2, month_end + hour // 2))
    jump = [(k, json.dumps({**json.loads(v), "offset": 10**11}).encode()) for k, v in recs[2400:2401]]
    recs = (recs[:2500] + recs[2000:2300] + [(b"head07", b"{garbage"), (None, None)] + jump
            + recs[2500:])
    mixed = recs[:4000] + [r for pair in zip(recs[4000:5000], recs[-1000:]) for r in pair] + recs[5000:-1000]
    return [Message(k, v, i) for i, (k, v) in enumerate(mixed)]


@pytest.fixture(scope="module")
def messages(sim):
    """_messages(sim), built once for the module: the tests only read it."""
    return _messages(sim)


# Batches of one record (a checkpoint after each) take the longest: `make test` runs them;
# make check's one-record batches are test_state_batch_plan's (compiled-1), on hostile ones.
@pytest.mark.parametrize("batch", sampled([1, 7, 500, 20_000], keep=[7, 500, 20_000]))
def test_a_batch_fed_in_runs_gives_exactly_what_line_by_line_feeding_gives(messages, batch):
    by_line, by_batch = PartitionState(0), PartitionState(0)
    for start in range(0, len(messages), batch):
        chunk = messages[start:start + batch]
        for msg in chunk:
            by_line.feed_record(msg.key(), msg.value(), msg.offset())
        by_line.consumed(chunk[-1].offset() + 1)
        by_line.advance()
        by_batch.feed_batch(chunk)
        records, changes = by_batch.checkpoint()
        assert (records, changes) == by_line.checkpoint()
    assert by_batch.stats.lines == by_line.stats.lines
    assert sum(by_batch.stats.lines.values()) == len(messages) - 300
    assert by_batch.duplicates == by_line.duplicates and sum(by_batch.duplicates.values()) == 300
    assert by_batch.rotations == by_line.rotations
    assert (by_batch.bad_records, by_batch.last_bad_reason) == (by_line.bad_records, by_line.last_bad_reason)
    assert by_batch.bad_reasons == by_line.bad_reasons
    assert by_batch.bad_reasons["offset_jump"] == 1 and by_batch.bad_records == 3
    assert by_batch.stats.latest_event_ms == by_line.stats.latest_event_ms
    assert by_batch.stats.latest_received_ms == by_line.stats.latest_received_ms
    assert by_batch.next_offset == by_line.next_offset == len(messages)


# -- implausible offsets (issue 26) -------------------------------------------------------------

def _at(recs, offsets):
    """The records with their offsets replaced by `offsets` (one per record)."""
    return [(k, json.dumps({**json.loads(v), "offset": o}).encode()) for (k, v), o in zip(recs, offsets)]


def _parsed(part):
    return sum(n for (_h, _d, r), n in part.stats.lines.items() if r == "parsed")


def test_one_line_far_past_its_files_mark_is_skipped_and_the_lines_after_it_are_fed(sim):
    recs = envelopes(sim.log_path)[:400]
    offsets = [json.loads(v)["offset"] for _k, v in recs]
    bogus = _at([recs[200]], [100_000_000_000])
    part = PartitionState(0)
    for i, (key, value) in enumerate(recs[:201] + bogus + recs[201:]):
        part.feed_record(key, value, i)
    assert part.bad_reasons == {"offset_jump": 1}
    assert part.bad_places[0][:2] == (201, "offset_jump")
    assert not part.duplicates and _parsed(part) == 400
    assert part.marks[(HOST, PATH)][0] == offsets[-1]


def test_a_file_that_really_skipped_ahead_loses_no_line(sim):
    """rsyslog may drop lines (its queue full during an outage): a jump that the next
    line confirms is believed, so the file is not stuck behind its old mark, and the line
    after the gap, held until then, is fed before the next one (issue 26 item 2: it used
    to be skipped, one real line lost at every real gap)."""
    recs = envelopes(sim.log_path)[:400]
    offsets = [json.loads(v)["offset"] for _k, v in recs]
    gap = 50 << 20
    moved = recs[:200] + _at(recs[200:], [o + gap for o in offsets[200:]])
    part = PartitionState(0)
    for i, (key, value) in enumerate(moved):
        part.feed_record(key, value, i)
    assert not part.bad_reasons and not part.duplicates and _parsed(part) == 400
    whole = PartitionState(0)
    for i, (key, value) in enumerate(recs):
        whole.feed_record(key, value, i)
    assert part.checkpoint()[0] == whole.checkpoint()[0]
    # The jumping line delivered again is a duplicate.
    part.feed_record(*moved[200], 400)
    assert part.duplicates[HOST] == 1 and not part.bad_reasons


def test_a_held_jump_is_fed_in_its_place_by_the_batch_path_too(sim):
    recs = envelopes(sim.log_path)[:400]
    offsets = [json.loads(v)["offset"] for _k, v in recs]
    moved = recs[:200] + _at(recs[200:], [o + (50 << 20) for o in offsets[200:]])
    by_record, by_batch = PartitionState(0), PartitionState(0)
    for i, (key, value) in enumerate(moved):
        by_record.feed_record(key, value, i)
    by_batch.feed_batch([Message(key, value, i) for i, (key, value) in enumerate(moved[:201])])
    by_batch.feed_batch([Message(key, value, i + 201) for i, (key, value) in enumerate(moved[201:])])
    assert _parsed(by_batch) == 400 and not by_batch.bad_reasons
    assert by_batch.checkpoint()[0] == by_record.checkpoint()[0]


def test_a_bad_offset_less_than_a_mebibyte_ahead_hides_no_line(sim):
    """An envelope whose offset is 300 KiB past its file's last line (a few hundred lines
    ahead) used to move the mark there, and the real lines before it were taken for
    duplicates: it is held as a jump, and the next real line refutes it."""
    recs = envelopes(sim.log_path)[:400]
    bogus = _at([recs[200]], [json.loads(recs[199][1])["offset"] + (300 << 10)])
    part = PartitionState(0)
    for i, (key, value) in enumerate(recs[:200] + bogus + recs[200:]):
        part.feed_record(key, value, i)
    assert part.bad_reasons == {"offset_jump": 1} and part.bad_places[0][:2] == (200, "offset_jump")
    assert not part.duplicates and _parsed(part) == 400


GAP = 50 << 20


def _skipped_ahead(recs, at):
    """(the records' offsets, the records with those from `at` on GAP further on)."""
    offsets = [json.loads(v)["offset"] for _k, v in recs]
    return offsets, recs[:at] + _at(recs[at:], [o + GAP for o in offsets[at:]])


def test_a_mark_stored_by_an_older_worker_is_judged_as_before(sim):
    offsets, moved = _skipped_ahead(envelopes(sim.log_path)[:300], 100)
    gap = GAP
    part = PartitionState(0)
    part.restore({f"w|{HOST}|{PATH}": [offsets[99], offsets[0], 0, offsets[100] + gap]})
    for key, value in moved[101:]:   # its pending jump confirmed, the line after it goes on
        part.feed_record(key, value)
    part.checkpoint()   # settles the profile detection of the file first seen here
    assert not part.bad_reasons and not part.duplicates and _parsed(part) == 199


def test_a_pending_jump_is_kept_in_the_state_so_a_restart_judges_the_next_line_alike(sim):
    offsets, moved = _skipped_ahead(envelopes(sim.log_path)[:300], 100)
    gap = GAP
    part = PartitionState(0)
    for key, value in moved[:101]:
        part.feed_record(key, value)
    _records, changes = part.checkpoint()
    restarted = PartitionState(0)
    restarted.restore(changes)
    for key, value in moved[101:]:
        restarted.feed_record(key, value)
    assert not restarted.bad_reasons and not restarted.duplicates
    assert _parsed(restarted) == 200  # the held line after the gap, then the 199 after it
    assert restarted.marks[(HOST, PATH)][0] == offsets[-1] + gap
