"""The bounded event-time merge of DOME nodes' lines (parsers/dome_merge.py): a node ahead
waits for the others, a quiet node holds nothing back, the held lines are state."""

from __future__ import annotations

import random

from dpmstream.parsers.dome_merge import (
    FORCED, PASSED, RELEASED, DomeMerge, LineStamps,
)
from dpmstream.parsers.dome_profiles import resolve_dome_profile


def run(merge: DomeMerge, arrivals) -> list[str]:
    out = []
    for lane, stamp in arrivals:
        out += [item for _lane, item in merge.push(lane, stamp, f"{lane}@{stamp}")]
    return out


def test_one_node_passes_every_line_at_once():
    merge = DomeMerge()
    for t in (1000, 1000, 3000, 2500, 9000):   # a stamp going back changes nothing
        assert merge.push("head", t, t) == [("head", t)]
    assert merge.held == 0 and merge.counts[PASSED] == 5


def test_a_node_ahead_waits_and_leaves_in_stamp_order_with_the_lagging_node():
    merge = DomeMerge(horizon_ms=60_000)
    assert run(merge, [("head", 0), ("disk", 0)]) == ["head@0", "disk@0"]
    # The head's lines run 30 s ahead of the disk's: held.
    assert run(merge, [("head", t) for t in (10_000, 20_000, 30_000)]) == []
    assert merge.held == 3
    # The disk's lines come late: each lets out the head's lines up to its stamp.
    assert run(merge, [("disk", 15_000)]) == ["head@10000", "disk@15000"]
    assert run(merge, [("disk", 20_000)]) == ["head@20000", "disk@20000"]
    # Now the disk runs ahead: its line waits for the head.
    assert run(merge, [("disk", 40_000)]) == ["head@30000"]
    assert merge.held == 1
    assert run(merge, [("head", 45_000)]) == ["disk@40000"]
    assert merge.counts == {PASSED: 4, RELEASED: 4} and merge.held == 1   # head@45000


def test_a_quiet_node_holds_nothing_back_beyond_the_horizon():
    merge = DomeMerge(horizon_ms=60_000)
    run(merge, [("head", 0), ("disk", 0)])
    # The disk stops. The head's lines wait until they are 60 s past the disk's last.
    assert run(merge, [("head", t) for t in range(1000, 60_001, 1000)]) == []
    out = run(merge, [("head", 60_001)])
    assert out == [f"head@{t}" for t in range(1000, 60_001, 1000)] + ["head@60001"]
    assert merge.counts[FORCED] == 60   # left before the disk reached them
    # From then on the head's lines leave as they come.
    assert run(merge, [("head", 61_000)]) == ["head@61000"]
    # The disk's next line (it was down) is no longer waited for: it goes at once.
    assert run(merge, [("disk", 30_000)]) == ["disk@30000"]


def test_no_more_than_the_count_is_held_the_earliest_leaving_first():
    merge = DomeMerge(horizon_ms=3_600_000, max_held=3)
    run(merge, [("head", 0), ("disk", 0)])
    assert run(merge, [("head", t) for t in (1, 2, 3)]) == []
    assert run(merge, [("head", 4)]) == ["head@1"]
    assert merge.held == 3 and merge.counts[FORCED] == 1


def test_each_nodes_own_order_is_kept_when_its_stamps_go_back():
    merge = DomeMerge()
    run(merge, [("head", 0), ("disk", 0)])
    assert run(merge, [("head", 5000), ("head", 3000), ("head", 4000)]) == []
    assert run(merge, [("disk", 6000)]) == ["head@5000", "head@3000", "head@4000"]


def test_a_line_without_a_stamp_keeps_its_place_in_its_node():
    merge = DomeMerge()
    run(merge, [("head", 0), ("disk", 0), ("head", 5000)])
    assert run(merge, [("head", None)]) == []
    assert run(merge, [("disk", 5000)]) == ["head@5000", "head@None", "disk@5000"]


def test_a_horizon_of_zero_keeps_the_arrival_order():
    merge = DomeMerge(horizon_ms=0)
    arrivals = [("head", 10_000), ("disk", 0), ("head", 11_000), ("disk", 1000)]
    assert run(merge, arrivals) == [f"{lane}@{t}" for lane, t in arrivals]


def test_drain_at_the_end_of_input_lets_out_every_held_line_in_order():
    merge = DomeMerge()
    run(merge, [("head", 0), ("disk", 0), ("head", 9000), ("disk2", 0), ("disk", 4000)])
    assert [item for _lane, item in merge.drain()] == ["disk@4000", "head@9000"]
    assert merge.held == 0


def test_a_merge_rebuilt_from_its_stored_changes_goes_on_as_one_that_never_stopped():
    rnd = random.Random(7)
    lanes = {"head": 0, "disk1": 0, "disk2": 0}
    arrivals = []
    for _ in range(3000):
        lane = rnd.choice(list(lanes))
        # disk2 goes quiet for a while, then catches up; the others move on unevenly
        lanes[lane] += rnd.choice((0, 100, 700, 2500, 40_000 if lane == "disk2" else 900))
        arrivals.append((lane, lanes[lane]))
    whole = DomeMerge(horizon_ms=30_000, max_held=200)
    want = run(whole, arrivals)
    store: dict = {}
    merge, got = DomeMerge(horizon_ms=30_000, max_held=200), []
    for i, arrival in enumerate(arrivals):
        got += run(merge, [arrival])
        if i % 97 == 0:
            for key, value in merge.take_changes().items():
                store[key] = value
            merge = DomeMerge(horizon_ms=30_000, max_held=200)
            merge.restore(store)
            store = {k: v for k, v in store.items() if v is not None}
    assert got == want
    assert whole.counts[FORCED] > 0 and whole.counts[RELEASED] > 0   # the bounds were met


def test_stamps_are_read_from_either_envelope_form():
    stamps = LineStamps(resolve_dome_profile("dmlite-dome"), tz="UTC")
    rfc = "2026-05-30T08:44:05.123456+02:00 dpmhead01 dome[2345]: {1}[1] dmlite dome x : y"
    assert stamps.stamp(rfc) == 1_780_123_445_123
    trad = "May 30 06:44:05 dpmhead01 dome[2345]: {1}[1] dmlite dome x : y"
    assert stamps.stamp(trad, received_ms=1_780_123_500_000) == 1_780_123_445_000
    # Received in January, a December stamp is of the year before.
    dec = "Dec 31 23:59:59 dpmhead01 dome[2345]: {1}[1] dmlite dome x : y"
    assert stamps.stamp(dec, received_ms=1_798_761_600_000) == 1_798_761_599_000
    assert stamps.stamp("garbage") is None
