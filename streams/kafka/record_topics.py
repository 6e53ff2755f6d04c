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

from dpmstream.parsers import dome_records, extension
from dpmstream.parsers.records import json_text

# a batch's request and call messages made at once (native/src/records.rs)
_compiled_messages = extension.compiled("record_messages")


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

    def write_all(self, records: list[dict]) -> None:
        """write() of each record in turn. The extension makes the request and call
        messages in one call (output_message in Python cost ~1.5 us a record, the worker's
        every record); output_message makes the rest (the DOME kinds, odd values), and
        raises what it raises (then none of the batch is held: its transaction fails)."""
        if _compiled_messages is None:
            for record in records:
                self.write(record)
            return
        requests_topic, calls_topic = self.requests_topic, self.calls_topic
        self._held += [
            message if message is not None else output_message(record, requests_topic, calls_topic)
            for record, message in zip(records, _compiled_messages(records, requests_topic, calls_topic))]

    def take(self) -> list[tuple[str, bytes, bytes]]:
        held, self._held = self._held, []
        return held

    def close(self) -> None:
        """Nothing to release: what was not taken belongs to a transaction never begun."""
        self._held.clear()
