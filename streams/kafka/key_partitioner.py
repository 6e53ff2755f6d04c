"""aiokafka's DefaultPartitioner with each key's partition remembered.

The worker sends every finished record keyed by its host, so one process sends the same
few keys hundreds of thousands of times, and DefaultPartitioner runs murmur2 in pure
Python on each (3 % of the worker's time). This gives exactly its answers: the key's
index in the partition list is remembered per list length, and the current list read.
"""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

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
            index = all_partitions.index(self._default(key, all_partitions, available))
            self._index[known] = index
        return all_partitions[index]
