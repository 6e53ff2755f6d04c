"""Creating the worker's topics when they are missing, and checking the ones that exist.

The state topic must have exactly as many partitions as the lines topic: state for lines
partition p lives in state partition p (written in p's transaction), so a worker that
takes over p finds all of p's state in one place. It is compacted: only the latest state
of each key (and no tombstoned key, after compaction) is kept.
"""

from __future__ import annotations

import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

log = logging.getLogger("dpmstream.worker")

STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # Roll segments hourly so that compaction (which skips the active segment) keeps
    # the restore of a partition short on a long-running worker.
    "segment.ms": str(3_600_000),
    "min.cleanable.dirty.ratio": "0.2",
    "delete.retention.ms": str(86_400_000),
}


class TopicError(RuntimeError):
    pass


async def partition_counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    """Partitions of each existing topic among `names` (missing ones are left out)."""
    existing = set(await admin.list_topics())  # describing a missing topic could auto-create it
    names = [n for n in names if n in existing]
    if not names:
        return {}
    counts = {}
    for topic in await admin.describe_topics(names):
        if topic.get("error_code", 0) == 0 and topic.get("partitions"):
            counts[topic["topic"]] = len(topic["partitions"])
    return counts


async def ensure_topics(bootstrap: str, security: dict, *, lines: str, outputs: list[str],
                        state: str, partitions: int, replication: int = 1) -> int:
    """Create missing topics; returns the lines topic's partition count.

    New output topics get the lines topic's partition count too (any count works for
    them); the state topic must match it, and a mismatch is an error, not a guess.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="dpmstream-worker-admin",
                                **security)
    await admin.start()
    try:
        counts = await partition_counts(admin, [lines, state, *outputs])
        n = counts.get(lines, partitions)
        wanted = []
        if lines not in counts:
            wanted.append(NewTopic(lines, n, replication))
        for name in outputs:
            if name not in counts:
                wanted.append(NewTopic(name, n, replication))
        if state not in counts:
            wanted.append(NewTopic(state, n, replication, topic_configs=STATE_TOPIC_CONFIG))
        elif counts[state] != n:
            raise TopicError(
                f"state topic {state} has {counts[state]} partitions but {lines} has {n}: "
                f"they must match (use another --group-id, or delete {state} to start afresh)")
        for topic in wanted:
            try:
                resp = await admin.create_topics([topic])
            except TopicAlreadyExistsError:
                continue
            for _name, code, *_rest in getattr(resp, "topic_errors", []):
                if code not in (0, 36):  # 36: created meanwhile by someone else
                    raise TopicError(f"cannot create topic {topic.name}: Kafka error {code}")
            log.info("created topic %s (%d partitions)", topic.name, topic.num_partitions)
        return n
    finally:
        await admin.close()
