"""The input partitions a worker owns, each with its transactional producer and its state.

    owners = PartitionOwners(config, state_topic)       # the worker's (worker.py)
    await owners.start()
    part = await owners.take(p)          # fence p's previous owner, read p's state
    part.feed_batch(messages)
    records, changes = part.checkpoint()
    outcome = await owners.commit(part, records, encode_changes(changes), part.next_offset)
    # -> COMMITTED, FENCED or FAILED
    await owners.drop([p]); await owners.stop()

Exactly once rests on three facts, all kept here:
  - one transaction of p's producer holds, atomically, the records a batch of p finished,
    its net state changes (to partition p of the state topic) and p's consumer offset;
  - p's producer has a fixed transactional.id, so starting it fences any earlier owner of
    p (a worker killed, or one that has not yet noticed a rebalance) and aborts its open
    transaction; the fenced one can commit nothing more;
  - p's state is read, read_committed, only after that: it is final, and it is exactly
    what the committed records and offsets say.
So whoever owns p (a restart, a rebalanced worker, the same worker after an error)
carries on from the last committed batch.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from dpmstream.parsers import extension
from dpmstream.streams.kafka.batch_send import send_batched
from dpmstream.streams.kafka.key_partitioner import KeyPartitioner
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.kafka.state_parts import StateParts
from dpmstream.streams.kafka.record_topics import RecordTopics

log = logging.getLogger("dpmstream.worker")


class Outcome(enum.Enum):
    COMMITTED = "committed"
    FENCED = "fenced"      # another worker owns p now: p is dropped here
    FAILED = "failed"      # the transaction was aborted: p is dropped, take it again


def transactional_id(group_id: str, lines_topic: str, p: int) -> str:
    return f"{group_id}-{lines_topic}-{p}"


# the changelog's JSON in the extension (native/src/state_codec.rs)
_compiled_changes = extension.compiled("state_changes_json")

# json.dumps(state, separators=(",", ":")) without building an encoder for each value:
# the same bytes, a quarter less of the time the changelog takes (one value per key changed)
_compact_json = json.JSONEncoder(separators=(",", ":")).encode


def encode_state(state) -> bytes | None:
    return None if state is None else _compact_json(state).encode()


def encode_changes(changes: dict[str, object]) -> dict[str, bytes | None]:
    """A checkpoint's state changes as the bytes of their state-topic records. Encoded at
    the checkpoint: the worker feeds the next batch while these are committed, and that
    must not change what this batch commits. The extension writes the same bytes
    (state_codec.rs), handing encode_state any value it leaves."""
    if _compiled_changes is not None:
        return _compiled_changes(changes, encode_state)
    return {key: encode_state(value) for key, value in changes.items()}


class PartitionOwners:
    def __init__(self, config, state_topic: str):
        self.cfg = config
        self.state_topic = state_topic
        self.parts: dict[int, PartitionState] = {}
        self.producers: dict[int, AIOKafkaProducer] = {}
        self.state_parts: dict[int, StateParts] = {}   # p -> its values stored in parts
        self._loader: AIOKafkaConsumer | None = None
        self.partitioner = KeyPartitioner()   # every producer's; send_batched's too

    async def start(self) -> None:
        """Start the state loader (again: nothing to do)."""
        if self._loader is not None:
            return
        cfg = self.cfg
        self._loader = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap, group_id=None, enable_auto_commit=False,
            isolation_level="read_committed", client_id="dpmstream-state-loader",
            max_partition_fetch_bytes=8 << 20, **cfg.security)
        await self._loader.start()

    async def stop(self) -> None:
        await self.drop(list(self.producers))
        loader, self._loader = self._loader, None
        if loader is not None:
            await loader.stop()

    # -- ownership -------------------------------------------------------------------------
    async def take(self, p: int) -> tuple[PartitionState, dict[str, object]]:
        """Own p: start its producer (fencing the previous owner), then read its state.
        Returns the PartitionState and the state it was restored from."""
        cfg = self.cfg
        await self.drop([p])
        producer = AIOKafkaProducer(
            bootstrap_servers=cfg.bootstrap, client_id=f"dpmstream-worker-p{p}",
            transactional_id=transactional_id(cfg.group_id, cfg.lines_topic, p),
            enable_idempotence=True, acks="all", linger_ms=5, retry_backoff_ms=20,
            max_batch_size=1 << 20, max_request_size=8 << 20,
            partitioner=self.partitioner, **cfg.security)
        # Starting it fences p's previous owner and aborts its open transaction, so the
        # state read next is complete and final. Registered first: should starting it or
        # reading the state fail (the broker away), drop(p) stops it.
        self.producers[p] = producer
        await producer.start()
        states = await self._load(p)
        part = PartitionState(p, cfg.reassembly, profile=cfg.profile, tz=cfg.tz,
                              dome_merge_horizon_s=cfg.dome_merge_horizon_s,
                              dome_merge_max_lines=cfg.dome_merge_max_lines)
        part.restore(states)
        self.parts[p] = part
        return part, states

    async def _load(self, p: int) -> dict[str, object]:
        """p's latest state per key (committed transactions only). The loader is left
        with no partition: assigned, aiokafka's fetcher would go on fetching p's state
        topic in the background as the worker commits to it, and hold the fetched
        records (up to the loader's 8 MiB a partition) until the next take."""
        tp = TopicPartition(self.state_topic, p)
        loader = self._loader
        loader.assign([tp])
        latest: dict[str, bytes] = {}
        try:
            await loader.seek_to_beginning(tp)
            end = (await loader.end_offsets([tp]))[tp]   # read_committed: the stable offset
            while await loader.position(tp) < end:
                batch = await loader.getmany(tp, timeout_ms=1000, max_records=50_000)
                for msg in batch.get(tp, ()):
                    key = msg.key.decode()
                    if msg.value is None:
                        latest.pop(key, None)
                    else:
                        latest[key] = msg.value
        finally:
            loader.unsubscribe()
        self.state_parts[p], whole = StateParts.joined(latest)
        return {key: json.loads(value) for key, value in whole.items()}

    async def drop(self, partitions) -> None:
        """Forget p (revoked, fenced, or failed): its uncommitted work is redone by
        whoever takes it next."""
        for p in list(partitions):
            self.parts.pop(p, None)
            self.state_parts.pop(p, None)
            producer = self.producers.pop(p, None)
            if producer is not None:
                try:
                    await producer.stop()
                except Exception as exc:  # stopping a fenced producer may complain
                    log.debug("partition %d: producer stop: %r", p, exc)

    # -- one transaction -------------------------------------------------------------------
    async def commit(self, part: PartitionState, records: list[dict],
                     changes: dict[str, bytes | None], next_offset: int) -> Outcome:
        """records and changes (from part.checkpoint(), the changes through
        encode_changes()) and p's next offset as of that checkpoint, in one transaction.
        (The worker feeds the next batch while this one commits: part.next_offset may be
        past it already.)"""
        p, cfg = part.partition, self.cfg
        producer = self.producers.get(p)
        if producer is None or self.parts.get(p) is not part:
            return Outcome.FENCED   # dropped while the batch was processed
        sent = []   # delivery futures: commit_transaction waits for them all
        try:
            await producer.begin_transaction()
            out = RecordTopics(cfg.requests_topic, cfg.calls_topic)
            out.write_all(records)
            messages = [(topic, key, value, None) for topic, key, value in out.take()]
            state = self.state_topic
            stored = self.state_parts[p].split(changes)
            messages += [(state, key.encode(), value, p) for key, value in stored.items()]
            await send_batched(producer, self.partitioner, messages, sent)
            await producer.send_offsets_to_transaction(
                {TopicPartition(cfg.lines_topic, p): next_offset}, cfg.group_id)
            # aiokafka commits a transaction even when one of its batches was refused
            # (e.g. MessageSizeTooLarge): the rest would commit without it. Every delivery
            # must have succeeded first; a failed one raises here and aborts it all.
            await asyncio.gather(*sent)
            await producer.commit_transaction()
        except ProducerFenced:
            _settle(sent)
            log.warning("partition %d: taken over by another worker (fenced)", p)
            await self.drop([p])
            return Outcome.FENCED
        except (KafkaError, OSError) as exc:
            _settle(sent)
            log.error("partition %d: transaction failed (%s); its state is read again", p,
                      exc.__class__.__name__)
            try:
                await producer.abort_transaction()
            except Exception:  # the producer may be unusable; take() makes a new one
                pass
            await self.drop([p])
            return Outcome.FAILED
        return Outcome.COMMITTED


def _settle(futures) -> None:
    """The deliveries of an aborted transaction fail with it: take their errors (the
    transaction's error says it all) instead of leaving asyncio to log each one."""
    for fut in futures:
        if fut.done():
            if not fut.cancelled():
                fut.exception()
        else:
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
