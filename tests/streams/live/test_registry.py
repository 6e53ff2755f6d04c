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
