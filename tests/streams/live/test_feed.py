"""streams/live/feed.py: the followed files fed into one pipeline, and its checkpoint."""

from __future__ import annotations

from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.follow import Follower
from tests.commands.test_run import append, puts


def test_a_checkpoint_keeps_only_the_newest_groups_of_ended_tokens(tmp_path, monkeypatch):
    import dpmstream.streams.live.feed as livefeed
    monkeypatch.setattr(livefeed, "FINISHED_GROUPS_SAVED", 2)
    log = tmp_path / "dpm.log"
    append(log, puts(0, 4 * 1024 + 10))             # five groups of ended tokens
    feed = LiveFeed([Follower(log)], host="head01", tz="UTC", year=2011, keep_state=True)
    while feed.poll_once():
        pass
    saved = feed.checkpoint()["pipeline"]
    feed.close()
    assert sorted(k for k in saved if k.startswith("f|")) == ["f|3", "f|4"]
