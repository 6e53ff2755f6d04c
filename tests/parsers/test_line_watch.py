"""A watched feed (Source.feed_chunk with a LineWatch, native/src/line_watch.rs): its hook
sees, after each watched line, the engine's latest event time and orphan count that a
caller feeding runs ending at that line and reading the reassembler after each run sees
(what `profile check`'s cut watch did, one run per token line), and once the time after
the first line that gives the engine one; the records and counts are those of the runs.
With the compiled engine the extension's loop calls the hook; with the Python one,
Source._feed_watched feeds the runs (the reference). Watched lines are put on the sweep's
turns (ADVANCE_EVERY), where the engine's call ends and the sweep (which emits requests, the
timeout short) comes before the look, and the block starts mid-log, so that orphans come
and go."""

from __future__ import annotations

import bisect
import random

import pytest

from dpmstream.parsers import engines, extension, fastpath
from dpmstream.parsers.fit import CATCH_ALL, OPENING, ORPHAN_ROLES, CutWatch
from dpmstream.parsers.fit import TokenGaps as Reference
from dpmstream.parsers.lines import MAX_LINE_BYTES
from dpmstream.parsers.pipeline import ADVANCE_EVERY, Pipeline
from dpmstream.parsers.profiles import ROLES, bundled_profiles
from dpmstream.parsers.settings import ReassemblySettings

from tests.parsers.test_feed_chunk_end import block  # noqa: F401  (the fixture: a simulated log's first block)

LineWatch = extension.compiled("LineWatch")
pytestmark = pytest.mark.skipif(LineWatch is None, reason="the extension is not built")

FIRST = 700  # the stretches start here: requests under way, orphans to come
TIMEOUT_S = 2  # short: the sweeps on the turns emit requests, between a line and its look


def stretches(n: int) -> list[tuple[int, int]]:
    """Stretches of adjacent lines fed, a line left out between them (another daemon's)."""
    return [(FIRST, 2 * ADVANCE_EVERY + 3), (2 * ADVANCE_EVERY + 4, n)]


def watched_lines(lines) -> list[int]:
    """The stretches' DP098 lines (a request's token and files) and status lines, the lines
    on and around the sweep's turns (counted from the first line fed) and the last line of
    each stretch."""
    fed = [i for a, b in stretches(len(lines)) for i in range(a, b)]
    tokens = {i for i in fed if b"DP098" in lines[i] or b"status of request" in lines[i].lower()}
    turns = {fed[k * ADVANCE_EVERY + d] for k in (1, 2) for d in (-2, -1, 0)
             if k * ADVANCE_EVERY + d < len(fed)}
    return sorted(tokens | turns | {b - 1 for _, b in stretches(len(lines))})


def pipeline_of(engine: str):
    """A pipeline whose records go where the hook's looks go, in one order: the cut watch
    counts a request's token lines until its record."""
    seen: list = []
    profile = next(p for p in bundled_profiles() if p.daemon == "dpm")
    pipeline = Pipeline(seen.append, ReassemblySettings(timeout_s=TIMEOUT_S), profiles=[profile],
                        engine=engine)
    return pipeline, pipeline.source("head", host="check", path="head", profile=profile), seen


def in_runs(lines, engine: str) -> dict:
    """What the hook should see: runs ending at each watched line, the reassembler read
    after each; one line at a time until it has a time."""
    pipeline, source, seen = pipeline_of(engine)
    core, points, timed = pipeline.reassembler, watched_lines(lines), False
    watched, k = set(points), 0
    for a, b in stretches(len(lines)):
        i = a
        while i < b:
            at = bisect.bisect_left(points, i)
            stop = i + 1 if not timed else points[at] + 1 if at < len(points) else b
            i = source.feed_chunk(lines, i, end=min(stop, b))
            if not timed and core.latest is not None:
                timed = True
                seen.append((-1, core.latest, core.stat("orphans")))
            if i - 1 in watched:
                seen.append((k, core.latest, core.stat("orphans")))
                k += 1
    pipeline.finish()
    return {"seen": seen, "lines": dict(pipeline.stats.lines)}


def watched(lines, engine: str) -> dict:
    pipeline, source, seen = pipeline_of(engine)
    watch = LineWatch(watched_lines(lines), lambda *args: seen.append(args))
    for a, b in stretches(len(lines)):
        assert source.feed_chunk(lines, a, end=b, watch=watch) == b
    assert watch.next_point is None, "every watched line was looked after"
    pipeline.finish()
    return {"seen": seen, "lines": dict(pipeline.stats.lines)}


@pytest.mark.parametrize("engine", [engines.PYTHON, engines.COMPILED])
def test_the_hook_sees_the_engine_as_after_runs_ending_at_each_watched_line(block, engine):
    if engine == engines.COMPILED and not engines.compiled_available():
        pytest.skip("the compiled engine is not built")
    expected, got = in_runs(block, engine), watched(block, engine)
    looks = [s for s in expected["seen"] if isinstance(s, tuple)]
    orphans = [o for _, _, o in looks]
    assert looks[0][0] == -1 and len(looks) > 1000
    assert max(orphans) > min(orphans), "orphans come and go over the block"
    assert len(looks) < len(expected["seen"]), "the stretches hold whole requests"
    assert got == expected


def test_a_watched_line_fed_unwatched_is_an_error_not_a_look_skipped():
    watch = LineWatch([3, 5], lambda *args: None, timed=True)
    watch.after(3, 10, 0)
    with pytest.raises(ValueError, match="watched line 5"):
        watch.after(6, 10, 0)


def test_watched_lines_are_given_in_order():
    with pytest.raises(ValueError, match="ascending"):
        LineWatch([5, 3], lambda *args: None)


# -- the quiet watch profile check's tallies make (LineTally.watch) ------------------------

TokenGaps = extension.compiled("TokenGaps")


def test_the_extensions_token_gaps_are_the_references():
    """TokenGaps (native/src/line_watch.rs) keeps what parsers/fit.TokenGaps keeps, a token
    None and a line without a time included, through the same notes and ends."""
    rng = random.Random(30)
    ours, ref = TokenGaps(), Reference()
    tokens = [None, *(f"t{i}" for i in range(12))]
    ts = 0
    for _ in range(3000):
        token = rng.choice(tokens)
        if rng.random() < 0.7:
            ts += rng.randint(-5, 400)   # times can step back: a gap never shrinks
            at = None if rng.random() < 0.05 else ts
            ours.note(token, at), ref.note(token, at)
        else:
            whole = rng.random() < 0.6
            ours.end(token, whole), ref.end(token, whole)
        assert (ours.whole, ours.max_gap) == (ref.whole, ref.max_gap)
    assert ref.whole > 100 and ref.max_gap > 400


def quiet_and_loud(block):
    """The cut watch's view of the block's dpm lines, as profile check's tally feeds them
    (tally_profiles' steps): through a quiet watch, and through a loud one whose hook does
    all in Python (the hook ProfileTally had: every watched line a call)."""
    profile = next(p for p in bundled_profiles() if p.daemon == "dpm")
    lines = fastpath.compiled_role_lines(profile, CATCH_ALL, ORPHAN_ROLES, OPENING, ("returns",),
                                         MAX_LINE_BYTES)
    t = extension.compiled("tally_profiles")([lines], block, len(block), FIRST)[0]
    orphan_roles = [ROLES.index(r) for r in ORPHAN_ROLES]
    views = {}
    for how in ("quiet", "loud"):
        cut, seen = CutWatch(), []
        cut.gaps = Reference() if how == "loud" else cut.gaps
        pipeline = Pipeline(cut.on_record, ReassemblySettings(timeout_s=TIMEOUT_S),
                            profiles=[profile], engine=engines.COMPILED)
        source = pipeline.source("head", host="check", path="head", profile=profile)
        orphans = [0]
        steps = [s for s in t.steps if s[0] in (1, 3)]

        def look(k, latest, now, steps=steps, cut=cut, seen=seen, orphans=orphans, how=how):
            seen.append(k)
            if k < 0:
                cut.on_time(latest)
                return
            if now != orphans[0] and (how == "quiet" or steps[k][3] in orphan_roles):
                cut.on_orphans(now - orphans[0], latest)
                orphans[0] = now
            if how == "loud" and steps[k][0] == 3:
                cut.on_token(steps[k][4], latest)
        watch = (t.watch(look, False, cut.gaps, 0, orphan_roles) if how == "quiet"
                 else LineWatch([s[2] - 1 for s in steps], look))
        for python, a, b in t.feeds:
            assert not python, "the simulated log is printable ASCII"
            source.feed_chunk(block, a, end=b, watch=watch)
        pipeline.finish()
        views[how] = (seen, cut.gaps.whole, cut.gaps.max_gap, list(cut._orphans_seen),
                      cut._first, cut._last, len(steps))
    return views


@pytest.mark.skipif(not engines.compiled_available(), reason="the compiled engine is not built")
def test_a_quiet_watch_tells_the_cut_watch_what_a_loud_one_does_with_few_calls(block):
    views = quiet_and_loud(block)
    quiet, loud = views["quiet"], views["loud"]
    seen_quiet, seen_loud = quiet[0], loud[0]
    assert quiet[1:] == loud[1:]
    assert quiet[1] > 10 and quiet[3], "requests seen whole, and orphans"
    assert len(seen_loud) == quiet[-1] + 1 > 1000
    assert seen_quiet[0] == -1 and 0 < len(seen_quiet) < len(seen_loud) / 10, \
        "the hook called where the orphans moved, not at every token line"


def test_only_a_quiet_watch_knows_the_orphans():
    with pytest.raises(ValueError, match="quiet"):
        LineWatch([1], lambda *args: None).known = 3
