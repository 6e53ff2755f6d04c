"""aiokafka's DefaultPartitioner with each key's partition remembered.

The worker sends every finished call keyed by its host, so one process sends the same
few keys hundreds of thousands of times, and DefaultPartitioner runs murmur2 in pure
Python on each (3 % of the worker's time). This gives exactly its answers: the key's
index in the partition list is remembered per list length, and the current list read.
A request is keyed by its token, met once or twice: its partition is computed with
murmur2 below, the same hash as aiokafka's in a third of its time (a word at a time).
"""

from __future__ import annotations

import struct

from aiokafka.partitioner import DefaultPartitioner


_M, _MASK = 0x5BD1E995, 0xFFFFFFFF   # Kafka's murmur2: its mixing constant, 32 bits


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data` (org.apache.kafka.common.utils.Utils.murmur2, as
    aiokafka.partitioner.murmur2 computes it): the key's 4-byte little-endian words read
    at once, and the masks only where a product can pass 32 bits."""
    length = len(data)
    h = 0x9747B28C ^ length
    words = length >> 2
    for k in struct.unpack_from(f"<{words}I", data) if words else ():
        k = (k * _M) & _MASK
        k = ((k ^ (k >> 24)) * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail >= 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


MAX_KEYS = 10_000   # distinct keys remembered (hosts: a handful); past that, start afresh


class KeyPartitioner:
    def __init__(self):
        self._default = DefaultPartitioner()
        self._index: dict[tuple[bytes, int], int] = {}

    def __call__(self, key, all_partitions, available):
        if key is None:  # a random available partition, as the default does
            return self._default(key, all_partitions, available)
        known = (key, len(all_partitions))
        index = self._index.get(known)
        if index is None:
            if len(self._index) >= MAX_KEYS:
                self._index.clear()
            # DefaultPartitioner's choice: the hash's index in the list of all partitions
            index = (murmur2(key) & 0x7FFFFFFF) % len(all_partitions)
            self._index[known] = index
        return all_partitions[index]
