"""Fixtures of the Kafka worker's tests."""

from __future__ import annotations

import pytest

from dpmstream.parsers import engines
from dpmstream.streams.kafka import envelope as envelope_module
from dpmstream.streams.kafka import state as state_module


@pytest.fixture(params=["compiled", "python"])
def engine(request, monkeypatch):
    """The worker as built (compiled engine, envelope decoder and batch plan), or as with
    DPMSTREAM_PURE_PYTHON=1 (Python's engine, decoder and plan_runs: the reference)."""
    if request.param == "compiled":
        if not engines.compiled_available() or state_module.compiled_plan_batch is None:
            pytest.skip("the compiled extension is not built")
    else:
        monkeypatch.setenv("DPMSTREAM_ENGINE", "python")
        monkeypatch.setattr(state_module, "compiled_plan_batch", None)
        monkeypatch.setattr(envelope_module, "_compiled_decode", None)
    return request.param
