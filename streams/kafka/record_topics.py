"""Where a finished record goes on Kafka, and as what bytes.

    topic, key, value = output_message(record, requests_topic, calls_topic)

Requests are keyed by token (one request's records stay together), calls by host; the
value is the record's JSON form (parsers/records.to_json_dict), compact. A missing key is
sent as the empty key.
"""

from __future__ import annotations

import json

from dpmstream.parsers.records import to_json_dict


def output_message(record: dict, requests_topic: str, calls_topic: str) -> tuple[str, bytes, bytes]:
    if record["kind"] == "request":
        topic, key = requests_topic, record["token"]
    else:
        topic, key = calls_topic, record["host"]
    value = json.dumps(to_json_dict(record), separators=(",", ":")).encode()
    return topic, (key or "").encode(), value
