"""A transaction's messages handed to the producer a record batch per partition.

producer.send() costs some 4 us a record in aiokafka (an awaited coroutine, a partitioner
call, an accumulator lookup, a future): a tenth of the worker's time. Here the messages
are grouped by (topic, partition) first, each group is appended to BatchBuilders
(aiokafka's own, in C), and each builder is handed over with send_batch(), which adds its
partition to the open transaction just as send() does. What reaches the broker is the
same: the same partition per key (the producer's partitioner, with the partition list
as send() reads it), each partition's records in the order given, one batch per
max_batch_size.

    await send_batched(producer, partitioner, [(topic, key, value, partition), ...], futures)

partitioner is the one the producer was made with; every key is bytes (an absent one is
b"", as the worker sends it), so it decides by the key alone.
"""

from __future__ import annotations

import asyncio


async def send_batched(producer, partitioner, messages, futures: list[asyncio.Future]) -> None:
    """Queue (topic, key, value, partition) messages in the producer's open transaction;
    partition None picks the partition of the key. Each batch's delivery future is added
    to `futures` as soon as it exists (so a caller whose transaction fails midway can
    settle them all); commit_transaction() waits for them."""
    groups: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}
    partitions_of: dict[str, list[int]] = {}
    for topic, key, value, partition in messages:
        if partition is None:
            partitions = partitions_of.get(topic)
            if partitions is None:
                # What send() passes its partitioner: the topic's partitions per metadata.
                partitions = partitions_of[topic] = list(await producer.partitions_for(topic))
            partition = partitioner(key, partitions, partitions)
        group = groups.get((topic, partition))
        if group is None:
            group = groups[(topic, partition)] = []
        group.append((key, value))
    for (topic, partition), group in groups.items():
        batch = producer.create_batch()
        for key, value in group:
            if batch.append(key=key, value=value, timestamp=None) is None:   # full
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=None)   # a first record always fits
        futures.append(await producer.send_batch(batch, topic, partition=partition))
