"""State values over PART_BYTES are stored in parts and read back whole; a damaged store
is logged and its key skipped, never a failure to take the partition."""

from __future__ import annotations

from dpmstream.streams.kafka.state_parts import MANIFEST, PART_BYTES, StateParts, part_key

BIG = b'{"held":"' + b"x" * (3 * PART_BYTES) + b'"}'


def _stored(writes):
    """The latest bytes of each key after these writes, deletions applied."""
    latest = {}
    for out in writes:
        for key, value in out.items():
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
    return latest


def test_a_big_value_goes_in_parts_under_the_limit_and_comes_back_whole():
    out = StateParts().split({"l": BIG, "k": b"7"})
    assert out["l"] == MANIFEST + b"4" and out["k"] == b"7"
    assert all(len(v) <= PART_BYTES for k, v in out.items() if k.startswith("c|"))
    parts, whole = StateParts.joined(_stored([out]))
    assert whole == {"l": BIG, "k": b"7"} and parts.counts == {"l": 4}


def test_a_value_that_shrinks_or_goes_deletes_the_parts_it_no_longer_has():
    parts = StateParts()
    first = parts.split({"l": BIG})
    smaller = parts.split({"l": BIG[:PART_BYTES + 10]})
    assert [smaller[part_key("l", i)] for i in (2, 3)] == [None, None]
    gone = parts.split({"l": None})
    assert _stored([first, smaller, gone]) == {}


def test_a_damaged_manifest_or_a_missing_part_skips_its_key_and_keeps_the_others(caplog):
    stored = _stored([StateParts().split({"l": BIG, "k": b"7"})])
    del stored[part_key("l", 2)]
    assert StateParts.joined(stored)[1] == {"k": b"7"}
    assert StateParts.joined({"l": MANIFEST + b"??", "k": b"7"})[1] == {"k": b"7"}
    assert "parts are missing" in caplog.text and "manifest is damaged" in caplog.text
