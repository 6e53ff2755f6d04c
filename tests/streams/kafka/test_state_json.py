"""The state changelog's bytes: the extension's writer (native/src/state_codec.rs,
state_changes_json) against encode_state, the reference (json's compact form)."""

from __future__ import annotations

import os

import pytest

from dpmstream.streams.kafka import partitions
from dpmstream.streams.kafka.partitions import encode_changes, encode_state

compiled = partitions._compiled_changes
needs_compiled = pytest.mark.skipif(
    compiled is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the extension is not built here")


class Text(str):
    pass


VALUES = {   # state-shaped values, and every kind of value json writes in its own way
    "t|h|dpm|1|2": {"op": "put", "token": "f00-b4r", "started": 1313152303118, "polls": 0,
                    "ended": None, "open": True, "gone": False, "steps": [[1, "a"], [2, "b"]]},
    "r|h|tok": {"host": "h", "nested": {"deeper": [{"x": []}, {}], "empty": ""}},
    "escapes": ['quote " backslash \\ slash / nl \n cr \r tab \t bs \b ff \f nul \x00 us \x1f',
                "del \x7f", "é ✓ 𝄞 \u2028", "-1", -9223372036854775808, 9223372036854775807],
    "a tuple": (1, ("two", None)),
    "gone": None,
    "big int": 1 << 70,
    "a float": [1.5, 1e16, float("nan"), float("inf")],
    "int keys": {1: "one", None: "none"},
    "lone surrogate": ["\udc80"],
    "a str subclass": [Text("x")],
    "bool keys": {True: 1},
    "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["bottom"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
}


@needs_compiled
def test_the_extension_writes_each_changed_value_as_the_reference_does():
    out = compiled(VALUES, encode_state)
    assert list(out) == list(VALUES)
    for key, value in VALUES.items():
        assert out[key] == encode_state(value), key


@needs_compiled
def test_a_value_the_extension_leaves_goes_through_the_fallback():
    seen = []

    def fallback(value):
        seen.append(value)
        return encode_state(value)

    out = compiled({"plain": {"a": [1, "b"]}, "float": 0.5, "surrogate": "\udc80", "gone": None},
                   fallback)
    assert seen == [0.5, "\udc80"]
    assert out == {"plain": b'{"a":[1,"b"]}', "float": b"0.5", "surrogate": b'"\\udc80"',
                   "gone": None}


def test_encode_changes_gives_each_key_the_reference_bytes_or_none():
    changes = {k: v for k, v in VALUES.items()}
    assert encode_changes(changes) == {k: encode_state(v) for k, v in changes.items()}
