"""The flat key form of pipeline state (the Kafka changelog, the `run --state` file):
encoding and decoding give back the same state, with the keys the stores have always had."""

import json
import logging

from dpmstream.parsers.pipeline import Pipeline, StateChanges
from dpmstream.parsers.reassembly import RequestKey, ThreadKey
from dpmstream.streams import state_keys
from tests.dpmlog import T1, put


def test_keys_name_the_kind_and_the_typed_key_fields():
    changes = StateChanges(threads={ThreadKey("h|1", "dpm", 7, 9): {"latest": 1},
                                    ThreadKey("h", "dpm", 8, 1): None},
                           requests={RequestKey("h", T1): {"latest": 2}},
                           finished={3: [RequestKey("h", T1)], 2: None},
                           sources={"dpm|/var/log/dpm/log": {"host": "h"}},
                           clock={"hosts": []})
    assert state_keys.encode(changes) == {
        "t|h|1|dpm|7|9": {"latest": 1}, "t|h|dpm|8|1": None,
        f"r|h|{T1}": {"latest": 2},
        "f|3": [["h", T1]], "f|2": None,
        "s|dpm|/var/log/dpm/log": {"host": "h"},
        "m": {"hosts": []},
    }


def test_decoding_the_encoded_whole_state_gives_it_back():
    whole = StateChanges(threads={ThreadKey("h|1", "dpm", 7, 9): {"latest": 1}},
                         requests={RequestKey("h", T1): {"latest": 2}},
                         finished={3: [RequestKey("h", T1)]},
                         sources={"dpm|/var/log/dpm/log": {"host": "h"}},
                         clock={"hosts": [["h", 5]]}, linker={"runs": []},
                         dome={'c|["h|1",7,9]': ["h|1", 0, [7, 9]], "x": {"clocks": {"h": 5}}})
    flat = json.loads(json.dumps(state_keys.encode(whole)))
    assert state_keys.decode(flat) == whole


def test_dome_entries_are_kept_under_their_own_prefix_as_dome_state_names_them():
    changes = StateChanges(dome={'c|["h",7,9]': ["h", 3, [7, 9]], 'p|[12]': None, "x": {"seq": 12}})
    assert state_keys.encode(changes) == {
        'd|c|["h",7,9]': ["h", 3, [7, 9]], 'd|p|[12]': None, "d|x": {"seq": 12}}


def test_deleted_entries_and_an_empty_linker_leave_no_state():
    assert state_keys.encode(StateChanges(linker={})) == {"l": None}
    assert state_keys.decode({"l": None, "t|h|dpm|1|2": None}) == StateChanges()


def test_an_unknown_or_damaged_key_is_logged_and_skipped(caplog):
    with caplog.at_level(logging.WARNING):
        state = state_keys.decode({"x|y": 1, "t|h|dpm|one|2": {}, f"r|h|{T1}": {"latest": 2}})
    assert state == StateChanges(requests={RequestKey("h", T1): {"latest": 2}})
    assert "'x|y'" in caplog.text and "'t|h|dpm|one|2'" in caplog.text


def test_a_pipeline_restored_from_the_flat_store_carries_on():
    records, store = [], {}
    pipeline = Pipeline(records.append)
    pipeline.track_changes()
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011)
    for line in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002"):
        src.feed(line)
    store.update(json.loads(json.dumps(state_keys.encode(pipeline.take_changes()))))
    assert f"r|h|{T1}" in store and "m" in store and "s|dpm" in store
    restored = Pipeline(records.append)
    restored.restore(state_keys.decode(store))
    assert restored.stats.in_flight == 1
    restored.finish()
    assert [(r["token"], r["end_reason"]) for r in records] == [(T1, "input_end")]
