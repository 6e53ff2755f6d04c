"""streams/kafka/key_partitioner.py: the partition of a keyed record is the one aiokafka's
DefaultPartitioner gives (what consumers of the record topics rely on: a host's records in
one partition, in order), however often the key comes and whatever the partition list."""

import random

from aiokafka.partitioner import DefaultPartitioner

from dpmstream.streams.kafka import key_partitioner
from dpmstream.streams.kafka.key_partitioner import KeyPartitioner


def test_every_key_goes_where_the_default_partitioner_sends_it():
    rng = random.Random(3)
    keys = [b"dpmhead01.cern.ch", b"head00", b"", b"x" * 300] + [rng.randbytes(rng.randint(1, 40))
                                                                for _ in range(300)]
    mine, default = KeyPartitioner(), DefaultPartitioner()
    for partitions in ([0], [0, 1, 2, 3], list(range(7)), [2, 5, 9], list(range(64))):
        for key in keys * 2:   # the second time from memory
            assert mine(key, partitions, partitions[:1]) == default(key, partitions, partitions[:1])


def test_a_topic_that_grew_is_partitioned_for_its_new_size():
    mine, default = KeyPartitioner(), DefaultPartitioner()
    keys = [b"head%02d" % i for i in range(20)]
    before = [mine(k, [0, 1, 2], [0, 1, 2]) for k in keys]
    after = [mine(k, list(range(5)), list(range(5))) for k in keys]
    assert before == [default(k, [0, 1, 2], []) for k in keys]
    assert after == [default(k, list(range(5)), []) for k in keys]
    assert before != after


def test_a_record_without_a_key_goes_to_an_available_partition():
    mine = KeyPartitioner()
    assert {mine(None, [0, 1, 2, 3], [2]) for _ in range(20)} == {2}


def test_it_remembers_a_bounded_number_of_keys(monkeypatch):
    monkeypatch.setattr(key_partitioner, "MAX_KEYS", 10)
    mine, default = KeyPartitioner(), DefaultPartitioner()
    for i in range(100):
        key = b"host-%d" % i
        assert mine(key, [0, 1, 2, 3], []) == default(key, [0, 1, 2, 3], [])
        assert len(mine._index) <= 10


def test_its_murmur2_is_kafkas_on_every_length_and_byte():
    from aiokafka.partitioner import murmur2 as aiokafka_murmur2

    rng = random.Random(5)
    keys = [bytes(range(n)) for n in range(12)] + [b"\xff" * n for n in range(12)]
    keys += [rng.randbytes(rng.randint(0, 80)) for _ in range(2000)]
    for key in keys:
        assert key_partitioner.murmur2(key) == aiokafka_murmur2(key), key
