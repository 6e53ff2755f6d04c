"""RequestEnds (native/src/request_ends.rs), `profile check`'s record receiver: the cut watch
it feeds learns of each request's end what CutWatch.on_record, handed the record's dict,
tells it (the token, and whether the request was seen whole: started, ended by a line),
in the same order, with no dict made; a call record tells it nothing. On a simulated log
read from mid-way (requests without their start) with a short timeout (requests ended by
the sweep, not by a line), with the compiled engine and with the Python one (whose dicts
RequestEnds hands to on_record)."""

from __future__ import annotations

import pytest

from dpmstream.parsers import engines, extension
from dpmstream.parsers.fit import CutWatch
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.profiles import bundled_profiles
from dpmstream.parsers.settings import ReassemblySettings

from tests.parsers.test_feed_chunk_end import block  # noqa: F401  (the fixture: a simulated log's first block)

RequestEnds = extension.compiled("RequestEnds")
pytestmark = pytest.mark.skipif(RequestEnds is None, reason="the extension is not built")


class Ends(CutWatch):
    """A cut watch that lists the request ends it learns of, in order."""

    def __init__(self):
        super().__init__()
        self.ends: list[tuple[str | None, bool]] = []

    def on_request_end(self, token, whole):
        self.ends.append((token, whole))
        super().on_request_end(token, whole)


def ends_learned(lines, engine: str, receiver_of) -> Ends:
    cut = Ends()
    profile = next(p for p in bundled_profiles() if p.daemon == "dpm")
    pipeline = Pipeline(receiver_of(cut), ReassemblySettings(timeout_s=2), profiles=[profile],
                        engine=engine)
    source = pipeline.source("head", host="check", path="head", profile=profile)
    source.feed_chunk(lines, 700)
    pipeline.finish()
    return cut


@pytest.mark.parametrize("engine", [engines.PYTHON, engines.COMPILED])
def test_the_watch_learns_each_request_end_as_from_the_records_dicts(block, engine):
    if engine == engines.COMPILED and not engines.compiled_available():
        pytest.skip("the compiled engine is not built")
    from_dicts = ends_learned(block, engine, lambda cut: cut.on_record)
    from_ends = ends_learned(block, engine, lambda cut: RequestEnds(cut.on_request_end, cut.on_record))
    assert {whole for _, whole in from_dicts.ends} == {True, False}
    assert from_ends.ends == from_dicts.ends
    assert (from_ends.whole, from_ends.gaps.max_gap) == (from_dicts.whole, from_dicts.gaps.max_gap)
