"""streams/live/feed.py: the followed files fed into one pipeline, and its checkpoint."""

from __future__ import annotations

import pytest

from dpmstream.parsers.records import to_json_dict
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.follow import Follower
from tests.commands.test_run import append, puts, record_rows, token, truth_rows
from tests.helpers import dpmstream_in_process


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


# -- a file that has given no line yet --------------------------------------------------

class Records:
    """A sink keeping the records handed to it, as the records file writes them."""

    def __init__(self):
        self.got: list[dict] = []

    def write(self, record: dict) -> None:
        self.got.append(to_json_dict(record))

    def close(self) -> None:
        pass


def _poll_until_idle(feed: LiveFeed) -> None:
    while feed.poll_once():
        pass


def _simulated_head_node(tmp_path) -> tuple[list[str], list[str], str]:
    """A head node's DPM and DPNS lines (the simulator's mixed load), and its truth's stem."""
    sim = tmp_path / "sim"
    made = dpmstream_in_process("simulate", "--out", str(sim), "--scenario", "mixed",
                                "--requests", "300", "--seed", "7", "--tz", "UTC", "--quiet")
    assert made.returncode == 0, made.stderr.decode()
    return ((tmp_path / "sim.log").read_text().splitlines(),
            (tmp_path / "sim.dpns.log").read_text().splitlines(), str(sim))


@pytest.mark.parametrize("engine", ["compiled", "python"])
@pytest.mark.parametrize("first", ["dpm", "dpns"])
def test_records_read_before_the_other_log_speaks_wait_for_it_and_link(
        tmp_path, engine, first, monkeypatch):
    """Started before one of a head node's two logs has a line (or as both are created),
    what the other gives first waits for it: the DPM log's requests for the calls that
    link to them, the name server's calls for the processing runs they fall in, rather
    than go out unlinked a poll before. The records are the simulator's truth, name-server
    counts and call tokens included."""
    if engine == "python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    dpm_lines, dpns_lines, sim = _simulated_head_node(tmp_path)
    dpm, dpns, out = tmp_path / "dpm.log", tmp_path / "dpns.log", Records()
    feed = LiveFeed([Follower(dpm), Follower(dpns)], host="dpmhead01.cern.ch", tz="UTC",
                    year=2011, sinks=[out])
    ahead, later = ((dpm, dpm_lines), (dpns, dpns_lines))[::1 if first == "dpm" else -1]
    # 6 s of the log, no other file yet: past the linker's 5 s (allowance and delay)
    cut = len(ahead[1]) * 7 // 10
    append(ahead[0], ahead[1][:cut])
    _poll_until_idle(feed)
    # Nothing that may link goes out: no request, no call of the name server (the DPM
    # log's own calls, ping and the like, link to nothing and go out).
    assert [r for r in out.got if r["kind"] == "request" or r["daemon"] == "dpns"] == []
    append(later[0], later[1])
    append(ahead[0], ahead[1][cut:])
    _poll_until_idle(feed)
    feed.finish()
    feed.close()
    assert record_rows(out.got, "request") == truth_rows(f"{sim}.requests.csv")
    assert record_rows(out.got, "call") == truth_rows(f"{sim}.calls.csv")


def test_a_file_silent_for_60_s_of_the_others_time_is_taken_for_quiet(tmp_path):
    """A second file that never speaks (not the name server's, or gone) delays the first
    log's requests until that log is 60 s of its event time past the lines of the first
    poll, no more, and says so; they then carry no name-server counts (none was read),
    as from a DPM log read alone."""
    dpm, said = tmp_path / "dpm.log", []
    out = Records()
    feed = LiveFeed([Follower(dpm), Follower(tmp_path / "never.log")], host="head01",
                    tz="UTC", year=2011, sinks=[out], log=said.append)
    append(dpm, puts(0, 15))                        # a put every 3 s: 45 s of the log
    _poll_until_idle(feed)
    append(dpm, puts(15, 19))                       # to 102 s: within 60 s of the first poll
    _poll_until_idle(feed)
    assert out.got == [] and said == []
    append(dpm, puts(34, 6))                        # to 120 s
    _poll_until_idle(feed)
    assert said == [f"{tmp_path / 'never.log'} has given no line in 60 s of the other logs' "
                    "time: taken for quiet; records no longer wait for it"]
    early = [r["token"] for r in out.got]
    assert early and set(early) <= {token(i) for i in range(40)}
    feed.finish()
    feed.close()
    assert sorted(r["token"] for r in out.got) == sorted(token(i) for i in range(40))
    assert {(r["ns_calls"], r["ns_s"]) for r in out.got} == {(None, None)}


def test_a_single_file_is_never_held(tmp_path):
    """A DPM log followed alone is not delayed: no other log can link to it."""
    dpm, out = tmp_path / "dpm.log", Records()
    feed = LiveFeed([Follower(dpm)], host="head01", tz="UTC", year=2011, sinks=[out])
    append(dpm, puts(0, 3))
    _poll_until_idle(feed)
    feed.close()
    assert sorted(r["token"] for r in out.got) == [token(i) for i in range(3)]
