"""streams/live/registry.py: the file `dpmstream run --state` keeps its checkpoint in."""

from __future__ import annotations

import os

import pytest

from dpmstream.streams.live.registry import Registry, RegistryError


def test_registry_save_replaces_the_file_whole_and_private(tmp_path):
    reg = Registry(tmp_path / "sub" / "run.state")
    reg.save({"files": {"a": 1}})
    reg.save({"files": {"a": 2}})
    assert reg.load() == {"files": {"a": 2}, "version": 1}
    assert os.stat(reg.path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path / "sub") == ["run.state"]     # no temporary left


def test_registry_absent_is_a_first_start_and_garbage_a_clear_error(tmp_path):
    assert Registry(tmp_path / "none").load() is None
    (tmp_path / "bad").write_text("{not json")
    with pytest.raises(RegistryError, match="not a dpmstream registry"):
        Registry(tmp_path / "bad").load()


def test_a_second_lock_on_the_same_state_names_the_holder_and_a_release_frees_it(tmp_path):
    first, second = Registry(tmp_path / "run.state"), Registry(tmp_path / "run.state")
    first.lock()
    with pytest.raises(RegistryError, match=rf"in use by another dpmstream run \(pid {os.getpid()},"):
        second.lock()
    first.unlock()
    second.lock()
    second.unlock()


def test_a_save_that_cannot_be_written_names_the_path_and_the_previous_state_stands(tmp_path):
    state = tmp_path / "run.state"
    reg = Registry(state)
    reg.save({"files": {"a": 1}})
    os.mkdir(f"{state}.tmp")            # the temporary file cannot be created
    with pytest.raises(RegistryError, match=rf"cannot save the state {state}: Is a directory"):
        reg.save({"files": {"a": 2}})
    assert reg.load() == {"files": {"a": 1}, "version": 1}   # the previous one stands
