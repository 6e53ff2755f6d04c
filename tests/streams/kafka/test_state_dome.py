"""One partition of the lines topic on a DOME site's lines, without a broker
(streams/kafka/state.py): the DOME files read with a DOME profile, and a partition rebuilt
from its stored changes after any batch going on as one that never stopped."""

from __future__ import annotations

import json

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.profiles import resolve_profile
from dpmstream.streams.kafka.envelope import encode
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.lines_fetch import Record as Message
from tests.streams.kafka.test_worker_dome import core_dome_records, dome_site, site_records, TIMEOUT_S
from tests.worker_helpers import canonical


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return dome_site(tmp_path_factory.mktemp("dome"), stamp="rfc3339", duration=400.0, rate=3.0,
                     disks=3, seed=41)


@pytest.fixture(scope="module")
def site_and_core(site):
    """The site's records as they reach one partition, and the core's records of them:
    the same for every batch size, so made once for the module."""
    recs = site_records(site)
    return recs, core_dome_records(recs)


def as_json(records):
    from dpmstream.parsers import dome_records
    return [dome_records.to_json_dict(r) for r in records]


def stored(store: dict, changes: dict) -> None:
    """A checkpoint's net changes written to `store` as the state topic keeps them: through
    JSON, a None value deleting its key."""
    for key, value in json.loads(json.dumps(changes)).items():
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value


def every_batch(n_batches: int) -> set[int]:
    """A restore after every batch: the full sweep (make test)."""
    return set(range(n_batches))


def sampled_batches(n_batches: int) -> set[int]:
    """A restore after the first two batches, the last, and every 23rd between (a stride
    prime to the batch sizes, so its batches end at ever other points of the lines): the
    same behaviour as `every_batch` in a twentieth of the restores (make check)."""
    return {0, 1, n_batches - 1, *range(0, n_batches, 23)}


def checkpointed(recs, every: int, restore_after, held_prefix: str | None = None):
    """`recs` fed in batches of `every` records, each checkpoint's changes into a store
    (latest per key, through JSON, as the compacted topic keeps them), and a new
    PartitionState restored from the store after each batch `restore_after(n_batches)`
    names: (the records given, the store, the last partition, the most `held_prefix` keys
    the store held after a batch)."""
    starts = range(0, len(recs), every)
    restores = restore_after(len(starts))
    store, out, most_held = {}, [], 0
    part = PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S))
    for batch, start in enumerate(starts):
        part.feed_batch([Message(k, v, start + i) for i, (k, v) in enumerate(recs[start:start + every])])
        records, changes = part.checkpoint()
        out += records
        stored(store, changes)
        if held_prefix is not None:
            most_held = max(most_held, sum(k.startswith(held_prefix) for k in store))
        if batch in restores:
            part = PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S))
            part.restore(dict(store))
    return out, store, part, most_held


def assert_restored_dome_partition_gives_the_cores_records(site_and_core, every, restore_after):
    recs, expected = site_and_core
    assert sum(r["kind"] == "dome_call" for r in expected) > 4000
    out, store, part, _ = checkpointed(recs, every, restore_after)
    assert part.next_offset == len(recs)
    assert any(k.startswith("d|c|") for k in store) and any(k.startswith("d|p|") for k in store)
    assert len(out) == len(expected)
    assert canonical(as_json(out)) == canonical(expected)
    # Ended calls and puts leave the store: what stays is what is open.
    snap = part.pipeline.dome.snapshot()["reassembler"]   # the checksum stage apart
    assert sum(k.startswith("d|p|") for k in store) == len(snap["puts"]["open"])
    assert sum(k.startswith("d|c|") for k in store) == sum(len(c) for c in snap["calls"].values())


@pytest.mark.slow
@pytest.mark.parametrize("every", [50, 997])
def test_a_dome_partition_restored_from_its_changes_after_any_batch_gives_the_same_records(site_and_core, every):
    """Batches of `every` records, each checkpoint's changes into a store (latest per key,
    through JSON, as the compacted topic keeps them), and a new PartitionState restored
    from the store after every one: the records of the core on the same lines. (make
    check runs the sampled sibling below.)"""
    assert_restored_dome_partition_gives_the_cores_records(site_and_core, every, every_batch)


@pytest.mark.parametrize("every", [50, 997])
def test_a_dome_partition_restored_after_a_sample_of_batches_gives_the_same_records(site_and_core, every):
    """As the test above (make test), restoring after the first, second and last batch and
    every 23rd between instead of after each: make check's sibling of it."""
    assert_restored_dome_partition_gives_the_cores_records(site_and_core, every, sampled_batches)


def test_dome_files_take_a_dome_profile_and_the_dpm_files_the_dpm_one_given():
    dpm = resolve_profile("lcgdm-dpm")
    part = PartitionState(0, profile=dpm)
    line = ("2017-05-30T08:44:05.123456+02:00 dpmhead01 dome[2345]: {140685573784640}[1] dmlite "
            "dome workerFunc : Accepted connection, ipcfd: 12, keepConnection: 1")
    part.feed_record(b"dpmhead01", encode("dpmhead01", "/var/log/dmlite/dmlite-rfc3339.log", 0,
                                          "2017-05-30T06:44:05.200000Z", line))
    part.feed_record(b"dpmhead01", encode("dpmhead01", "/var/log/dpm/log", 0,
                                          "2017-05-30T06:44:05.200000Z", "garbage"))
    sources = {src.path: src for src in part.pipeline.sources.values()}
    assert sources["/var/log/dmlite/dmlite-rfc3339.log"].profile.name == "dmlite-dome"
    assert sources["/var/log/dpm/log"].profile is dpm
    assert part.stats.lines[("dpmhead01", "dome", "parsed")] == 1


def test_a_dome_profile_given_reads_the_dome_files_and_leaves_the_dpm_ones_to_detection():
    notid = resolve_dome_profile("dmlite-dome-notid")
    part = PartitionState(0, profile=notid)
    part.feed_record(b"h", encode("h", "/var/log/dmlite/dmlite.log", 0, "2017-05-30T06:44:05Z",
                                  "May 30 08:44:05 h dome[2345]: [1] dmlite dome workerFunc : "
                                  "Accepted connection, ipcfd: 12, keepConnection: 1"))
    part.feed_record(b"h", encode("h", "/var/log/dpm/log", 0, "2017-05-30T06:44:05Z", "x"))
    sources = {src.path: src for src in part.pipeline.sources.values()}
    assert sources["/var/log/dmlite/dmlite.log"].profile is notid
    assert sources["/var/log/dpm/log"].profile is None   # still detecting


def assert_a_late_nodes_partition_restored_gives_the_same_records(site, restore_after):
    from tests.streams.kafka.test_dome_lagging_nodes import delivered, node_lines
    nodes = node_lines(site)
    disk = sorted(h for h in nodes if h != "dpmhead01")[0]
    recs = delivered(nodes, {disk: 30_000})
    whole = PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S))
    whole.feed_batch([Message(k, v, i) for i, (k, v) in enumerate(recs)])
    want, _changes = whole.checkpoint()
    out, store, _part, most_held = checkpointed(recs, 50, restore_after, held_prefix="e|h|")
    assert most_held > 100
    assert not any(k.startswith("e|h|") for k in store)
    assert canonical(as_json(out)) == canonical(as_json(want))
    assert sum(r["kind"] == "dome_put" and r["putdone_disk_time"] is not None for r in want) > 400


@pytest.mark.slow
def test_a_partition_holding_a_late_nodes_others_restored_after_any_batch_gives_the_same_records(site):
    """One disk node's lines 30 s of event time late (the others' held by the merge,
    parsers/dome_merge.py): a partition rebuilt from its stored changes after every
    batch of 50 gives the records of one never rebuilt, and the store held lines while
    they waited (e|h|), none once the last ticks let them go. (make check runs the
    sampled sibling below.)"""
    assert_a_late_nodes_partition_restored_gives_the_same_records(site, every_batch)


def test_a_partition_holding_a_late_nodes_others_restored_after_a_sample_of_batches_gives_the_same_records(site):
    """As the test above (make test), restoring after the first, second and last batch
    and every 23rd between instead of after each: make check's sibling of it."""
    assert_a_late_nodes_partition_restored_gives_the_same_records(site, sampled_batches)
