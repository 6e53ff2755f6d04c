"""Where a finished record goes on Kafka, and as what bytes.

    out = RecordTopics(requests_topic, calls_topic)    # a record sink (streams/sinks/fan_out)
    out.write(record)                                   # encoded now ...
    for topic, key, value in out.take(): ...            # ... sent inside the batch's transaction

Requests are keyed by token (one request's records stay together), calls by host; the
value is the record's JSON form (parsers/records.to_json_dict), compact. The DOME kinds
(parsers/dome_records.py, their JSON form dome_records.to_json_dict): a `dome_put`, the
DOME request, goes with the requests keyed by its head node; `dome_call`, `dome_capacity`,
`dome_fs_event` and `dome_journald_gap` with the calls, keyed by their host. `kind` tells them apart. A missing key is
sent as the empty key. The sink only encodes and holds: the worker's transaction
(streams/kafka/partitions.py) sends what it holds, so a record reaches its topic exactly
when the state and offsets that produced it are committed.
"""

from __future__ import annotations


from dpmstream.parsers import dome_records
from dpmstream.parsers.records import json_text


def output_message(record: dict, requests_topic: str, calls_topic: str) -> tuple[str, bytes, bytes]:
    kind = record["kind"]
    if kind in dome_records.KINDS:
        topic = requests_topic if kind == "dome_put" else calls_topic
        key = dome_records.node_of(record)
        value = dome_records.json_text(record, ensure_ascii=True).encode()
        return topic, (key or "").encode(), value
    if kind == "request":
        topic, key = requests_topic, record["token"]
    else:
        topic, key = calls_topic, record["host"]
    value = json_text(record, ensure_ascii=True).encode()
    return topic, (key or "").encode(), value


class RecordTopics:
    """The records and calls topics as a record sink: (topic, key, value) held for sending."""

    def __init__(self, requests_topic: str, calls_topic: str) -> None:
        self.requests_topic, self.calls_topic = requests_topic, calls_topic
        self._held: list[tuple[str, bytes, bytes]] = []

    def write(self, record: dict) -> None:
        self._held.append(output_message(record, self.requests_topic, self.calls_topic))

    def take(self) -> list[tuple[str, bytes, bytes]]:
        held, self._held = self._held, []
        return held

    def close(self) -> None:
        """Nothing to release: what was not taken belongs to a transaction never begun."""
        self._held.clear()
