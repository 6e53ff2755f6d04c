"""State values too big for one Kafka record, stored in parts.

A broker refuses a record batch over its `message.max.bytes` (1 MiB by default), and
some state values grow with a site's load: what name-server linking holds ("l") is one
value holding every request and call record it waits on, which a busy head node (or
several head nodes sharing a partition) takes past 1 MiB within a minute of event time.
So a value over PART_BYTES is written as a manifest under its own key and its bytes in
parts under `c|I|KEY`, all in the batch's one transaction (read_committed readers see
all of them or none). A value that shrinks, or a key that goes, deletes its parts left
over; the state topic's compaction then drops them.

    parts = StateParts()                          # one per owned partition
    store = parts.split(encoded_changes)          # what the transaction writes
    parts, whole = StateParts.joined(latest)      # on taking the partition: bytes per key
"""

from __future__ import annotations

import logging

log = logging.getLogger("dpmstream.worker")

PART_BYTES = 256 * 1024   # a part and its batch stay far under the broker's 1 MiB default
PART_PREFIX = "c|"
MANIFEST = b"\x00parts "  # never the start of a JSON value


def part_key(key: str, i: int) -> str:
    return f"{PART_PREFIX}{i}|{key}"


class StateParts:
    """How many parts each split key of one partition's state has in the store."""

    def __init__(self, counts: dict[str, int] | None = None):
        self.counts: dict[str, int] = dict(counts or {})

    def split(self, changes: dict[str, bytes | None]) -> dict[str, bytes | None]:
        """The records to write for these encoded changes ({key: bytes, or None for gone})."""
        out: dict[str, bytes | None] = {}
        for key, value in changes.items():
            before = self.counts.pop(key, 0)
            n = 0
            if value is not None and len(value) > PART_BYTES:
                n = -(-len(value) // PART_BYTES)
                out[key] = MANIFEST + str(n).encode()
                for i in range(n):
                    out[part_key(key, i)] = value[i * PART_BYTES:(i + 1) * PART_BYTES]
                self.counts[key] = n
            else:
                out[key] = value
            for i in range(n, before):   # parts the value no longer has
                out[part_key(key, i)] = None
        return out

    @classmethod
    def joined(cls, latest: dict[str, bytes]) -> tuple["StateParts", dict[str, bytes]]:
        """(the parts in the store, each key's whole bytes) from the latest bytes of every
        key read back. A manifest whose parts are not all there (a store written by hand,
        or damaged) is logged and its key skipped; parts no manifest names are dropped."""
        parts: dict[str, dict[int, bytes]] = {}
        whole: dict[str, bytes] = {}
        for key, value in latest.items():
            if key.startswith(PART_PREFIX):
                index, _, of = key[len(PART_PREFIX):].partition("|")
                if index.isdigit():
                    parts.setdefault(of, {})[int(index)] = value
                    continue
            whole[key] = value
        counts = {}
        for key, value in list(whole.items()):
            if not value.startswith(MANIFEST):
                continue
            count = value[len(MANIFEST):]
            n = int(count) if count.isdigit() else -1
            have = parts.get(key, {})
            if n < 0:
                log.error("state entry %r: its manifest is damaged (%r); skipped", key, value[:40])
                del whole[key]
                continue
            if any(i not in have for i in range(n)):
                log.error("state entry %r: %d of its %d parts are missing; skipped",
                          key, sum(i not in have for i in range(n)), n)
                del whole[key]
                continue
            whole[key] = b"".join(have[i] for i in range(n))
            counts[key] = n
        return cls(counts), whole
