"""streams/kafka/worker.py without a broker: when a partition's transaction commits.

Each fetch is fed at once; a partition's transaction commits once it holds
`transaction_lines` lines, once its first uncommitted line is `transaction_age_s` old,
on an empty fetch, on a revoke and at the stop. What it commits is the partition's
checkpoint at that moment: every record its lines finished since the last commit, and
the offset past them. (The transactions themselves, on a real broker, through kill -9
and failures: test_worker.py.)"""

from __future__ import annotations

import asyncio

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.lines_fetch import Record
from dpmstream.streams.kafka.partitions import Outcome
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.worker import Worker, WorkerConfig
from tests.worker_helpers import canonical, core_records, envelopes

FETCH = 300   # lines of each partition per fetch


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    """Two hosts' records, head01 on partition 0 and head02 on partition 1."""
    sim = simulate(SimConfig(requests=150, seed=5), tmp_path_factory.mktemp("sim") / "s")
    return {p: envelopes(sim.log_path, host, "/var/log/dpm/log")
            for p, host in enumerate(("head01", "head02"))}


class _Owners:
    """PartitionOwners' part the worker's loop uses, committing into a list."""

    def __init__(self, partitions):
        self.parts = {p: PartitionState(p) for p in partitions}
        self.commits: list[tuple[int, int, list]] = []   # (p, next offset, records)

    async def commit(self, part, records, changes, next_offset):
        assert changes["k"] == str(next_offset).encode()   # the offset is in its state
        self.commits.append((part.partition, next_offset, records))
        return Outcome.COMMITTED

    async def drop(self, partitions):
        for p in partitions:
            self.parts.pop(p, None)


def _worker(**cfg) -> tuple[Worker, _Owners]:
    worker = Worker(WorkerConfig("unused:9092", **cfg))
    worker.owners = owners = _Owners([0, 1])
    return worker, owners


def _fetches(lines):
    """The fetches of both partitions' lines, FETCH of each at a time."""
    n = max(len(recs) for recs in lines.values())
    for start in range(0, n, FETCH):
        batch = {p: [Record(k, v, i) for i, (k, v) in enumerate(recs[start:start + FETCH], start)]
                 for p, recs in lines.items()}
        yield {p: msgs for p, msgs in batch.items() if msgs}


async def _feed_all(worker, lines, then_idle=True):
    for batch in _fetches(lines):
        await worker._process(batch, dict(worker._seeks))
    await worker._settle()
    if then_idle:   # the fetch that comes back empty at the end of the topic
        await worker._process({}, dict(worker._seeks), idle=True)
        await worker._settle()


def _committed_records(owners, p):
    return [rec for q, _offset, records in owners.commits if q == p for rec in records]


def test_a_partitions_transaction_carries_the_lines_of_several_fetches(lines):
    worker, owners = _worker(transaction_lines=1000, transaction_age_s=3600)
    asyncio.run(_feed_all(worker, lines, then_idle=False))
    for p, recs in lines.items():
        offsets = [offset for q, offset, _ in owners.commits if q == p]
        # A commit at the end of the first fetch that brings 1000 lines or more since the
        # last: the fourth of 300 (the last fetch may be short).
        fetch_ends = [min(end, len(recs)) for end in range(FETCH, len(recs) + FETCH, FETCH)]
        want, last = [], 0
        for end in fetch_ends:
            if end - last >= 1000:
                want.append(end)
                last = end
        assert offsets == want and want[0] == 4 * FETCH
        # The rest waits: fewer lines than the bound, and young.
        assert worker._uncommitted.get(p, [0])[0] == len(recs) - last < 1000


def test_an_empty_fetch_commits_every_partition_with_lines_fed(lines):
    worker, owners = _worker(transaction_lines=1000, transaction_age_s=3600)
    asyncio.run(_feed_all(worker, lines))
    assert worker._uncommitted == {}
    for p, recs in lines.items():
        assert max(offset for q, offset, _ in owners.commits if q == p) == len(recs)
        # Every record the lines finished, each once, as the core makes them.
        assert canonical(_committed_records(owners, p)) == canonical(core_records(recs))


def test_a_line_fed_longer_ago_than_the_age_commits_with_the_next_fetch(lines):
    worker, owners = _worker(transaction_lines=10 ** 9, transaction_age_s=0)
    asyncio.run(_feed_all(worker, lines, then_idle=False))
    fetches = -(-max(len(recs) for recs in lines.values()) // FETCH)
    # Age 0: every fetch's lines are due at once (a transaction per fetch, as before).
    assert len(owners.commits) == sum(-(-len(recs) // FETCH) for recs in lines.values())
    assert worker.batches == fetches


def test_a_revoked_partition_commits_what_it_fed_before_it_is_dropped(lines):
    worker, owners = _worker(transaction_lines=10 ** 9, transaction_age_s=3600)

    async def main():
        await worker._process(next(_fetches(lines)), dict(worker._seeks))
        assert owners.commits == []
        await worker.revoke([1])

    asyncio.run(main())
    assert [(p, offset) for p, offset, _ in owners.commits] == [(1, FETCH)]
    assert 1 not in owners.parts and list(worker._uncommitted) == [0]


def test_a_partition_whose_fetch_failed_commits_nothing_it_fed_since_its_last_commit(lines):
    """A fetch whose feed raised leaves the partition's state half fed: neither it nor the
    lines fed before it since the last commit are committed, even where the age makes the
    transaction due; the partition is taken again from what was committed, its lines come
    again (test_hostile_records.py: on a real broker)."""
    worker, owners = _worker(transaction_lines=10 ** 9, transaction_age_s=0.05)

    class _GaveUp:   # the consumer no longer holds the partition: taking it again ends there
        def assignment(self):
            return set()

    worker._consumer = _GaveUp()
    part = owners.parts[0]
    feed_batch = part.feed_batch

    def half_then_fail(messages):
        feed_batch(messages[:len(messages) // 2])
        raise RuntimeError("a record the pipeline cannot process")

    async def main():
        fetches = _fetches(lines)
        await worker._process({0: next(fetches)[0]}, dict(worker._seeks))
        assert owners.commits == [] and worker._uncommitted[0][0] == FETCH
        await asyncio.sleep(0.1)   # the first fetch's lines are now old enough to commit
        part.feed_batch = half_then_fail
        await worker._process({0: next(fetches)[0]}, dict(worker._seeks))
        await worker._settle()

    asyncio.run(main())
    assert owners.commits == []
    assert 0 not in owners.parts and 0 not in worker._uncommitted
