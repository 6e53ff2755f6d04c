"""streams/lanes.py: replay reads the files of different daemons side by side in event
time (one lane per daemon), the files of one daemon one after another."""

from __future__ import annotations

import gzip

import pytest

from dpmstream.parsers.profiles import bundled_profiles, resolve_profile
from dpmstream.streams.inputs import Input, InputError, open_once
from dpmstream.streams.lanes import STEP_MS, Lane, daemon_of, lanes_of, run_lanes
from tests.dpmlog import put
from tests.parsers.test_linking import F1, ns_call

T = 1_313_143_200_000   # 2011-08-12 10:00 UTC in ms: event times are epoch milliseconds


class FakeSource:
    """A source whose lines are their own event times (offsets from T, in ms)."""

    def __init__(self, name: str, fed: list):
        self.name, self.fed = name, fed
        self.position = -1

    def feed_chunk(self, lines, start=0, limit=None):
        """Source.feed_chunk's contract: stop after the first line past `limit`."""
        for i in range(start, len(lines)):
            self.fed.append((self.name, lines[i]))
            self.position = max(self.position, T + lines[i])
            if limit is not None and self.position > limit:
                return i + 1
        return len(lines)


def opener(fed: list, files: dict):
    """open_input over named fake files: a list of offsets, None (cannot be opened), or a
    list ending in an InputError (the file ends early)."""
    def open_input(name):
        content = files[name]
        if content is None:
            return None

        def chunks():  # two lines a chunk: a lane may stop inside one and resume there
            chunk = []
            for item in content:
                if isinstance(item, Exception):
                    if chunk:
                        yield chunk
                    raise item
                chunk.append(item)
                if len(chunk) == 2:
                    yield chunk
                    chunk = []
            if chunk:
                yield chunk
        return FakeSource(name, fed), chunks()
    return open_input


def a_lane(name, inputs, fed, files) -> Lane:
    return Lane(name, inputs, opener(fed, files))


def test_the_lane_furthest_behind_is_fed_up_to_a_step_past_the_next_one():
    assert STEP_MS == 500
    fed, ends = [], []
    files = {"dpm.log": [0, 100, 200, 900, 1000, 1600], "dpns.log": [50, 600, 700, 1200]}
    lanes = [a_lane("dpm", ["dpm.log"], fed, files), a_lane("dpns", ["dpns.log"], fed, files)]
    run_lanes(lanes, lambda lane, error=None: ends.append((lane.name, error)))
    # dpm: its first line (dpns not started); dpns: up to 0 + 500, the line past it
    # included; dpm: up to 600 + 500; dpns: to its end; dpm: to its end.
    assert fed == [("dpm.log", 0),
                   ("dpns.log", 50), ("dpns.log", 600),
                   ("dpm.log", 100), ("dpm.log", 200), ("dpm.log", 900), ("dpm.log", 1000),
                   ("dpm.log", 1600),
                   ("dpns.log", 700), ("dpns.log", 1200)]
    assert ends == [("dpns", None), ("dpm", None)]


def test_every_lane_starts_before_any_lane_runs_ahead():
    fed = []
    files = {"a": [1000, 1001], "b": [0, 1], "c": [5000, 5001]}
    run_lanes([a_lane(n, [n], fed, files) for n in "abc"], lambda lane, error=None: None)
    assert fed[:3] == [("a", 1000), ("b", 0), ("c", 5000)]
    assert sorted(fed[3:]) == [("a", 1001), ("b", 1), ("c", 5001)]


def test_the_files_of_one_lane_are_read_one_after_another_in_the_order_given():
    fed, ends = [], []
    files = {"dpm.1": [0, 10], "dpm.2": [5, 20]}
    run_lanes([a_lane("dpm", ["dpm.1", "dpm.2"], fed, files)],
              lambda lane, error=None: ends.append(lane.src.name))
    assert fed == [("dpm.1", 0), ("dpm.1", 10), ("dpm.2", 5), ("dpm.2", 20)]
    assert ends == ["dpm.1", "dpm.2"]


def test_an_input_that_cannot_be_opened_is_passed_over_and_the_lane_goes_on():
    fed, ends = [], []
    files = {"gone": None, "dpm.2": [0, 10]}
    lane = a_lane("dpm", ["gone", "dpm.2"], fed, files)
    run_lanes([lane], lambda lane, error=None: ends.append(lane.src.name))
    assert fed == [("dpm.2", 0), ("dpm.2", 10)]
    assert ends == ["dpm.2"] and lane.done


def test_an_input_ending_early_keeps_its_lines_is_reported_and_the_lane_goes_on():
    fed, ends = [], []
    damage = InputError("truncated gzip")
    files = {"dpm.1.gz": [0, 10, damage], "dpm.2": [20]}
    run_lanes([a_lane("dpm", ["dpm.1.gz", "dpm.2"], fed, files)],
              lambda lane, error=None: ends.append((lane.src.name, error)))
    assert fed == [("dpm.1.gz", 0), ("dpm.1.gz", 10), ("dpm.2", 20)]
    assert ends == [("dpm.1.gz", damage), ("dpm.2", None)]


def test_a_lane_none_of_whose_inputs_open_is_done_without_being_fed():
    fed, ends = [], []
    lane = a_lane("dpm", ["gone"], fed, {"gone": None})
    run_lanes([lane], lambda lane, error=None: ends.append(lane))
    assert lane.done and lane.position == -1 and fed == [] and ends == []


def test_a_lane_position_is_minus_one_before_its_first_input_then_its_source_time():
    fed = []
    lane = a_lane("dpm", ["dpm.log"], fed, {"dpm.log": [0, 250]})
    assert lane.position == -1
    assert lane.next_input()
    assert lane.feed_until(None) is False        # to the end of the input: exhausted
    assert lane.position == T + 250


def test_feeding_until_a_limit_stops_at_the_first_line_past_it():
    fed = []
    lane = a_lane("dpm", ["dpm.log"], fed, {"dpm.log": [0, 100, 200, 300]})
    lane.next_input()
    assert lane.feed_until(T + 100) is True      # more to come
    assert fed == [("dpm.log", 0), ("dpm.log", 100), ("dpm.log", 200)]
    assert lane.feed_until(T + 1000) is False
    assert fed[-1] == ("dpm.log", 300)


# -- grouping inputs into lanes by daemon ------------------------------------------------

DPM_LINES = [f"{s}\n" for s in put("08/12 10:00:01.000", 3, "6d4c2a8e-3f5b-4e0c-9a71-2b8f0c1d9e47",
                                   end="08/12 10:00:01.010")]
NS_LINES = [f"{s}\n" for s in ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1)]


def a_file(tmp_path, name: str, lines: list[str], compress: bool = False) -> Input:
    path = tmp_path / name
    data = "".join(lines).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return Input(name, str(path), len(data), None)


def first_lines(inp) -> list[bytes]:
    """The input's head as replay reads it (streams/inputs.open_once); none if it cannot
    be opened."""
    try:
        opened = open_once(inp)
    except OSError:
        return []
    opened.close()
    return opened.first_lines


def lanes_by_name(inputs, forced=None) -> dict[str, list[str]]:
    lanes = lanes_of(inputs, bundled_profiles(), forced, open_input=lambda inp: None,
                     first_lines=first_lines)
    return {lane.name: [inp.name for inp in lane.inputs] for lane in lanes}


def test_inputs_are_grouped_by_the_daemon_of_their_first_lines_in_the_order_given(tmp_path):
    inputs = [a_file(tmp_path, "a.log", DPM_LINES), a_file(tmp_path, "b.log", NS_LINES),
              a_file(tmp_path, "c.log.gz", DPM_LINES, compress=True)]
    assert lanes_by_name(inputs) == {"dpm": ["a.log", "c.log.gz"], "dpns": ["b.log"]}


def test_each_input_keeps_the_profile_it_was_recognised_by_for_its_source(tmp_path):
    inputs = [a_file(tmp_path, "a.log", DPM_LINES), a_file(tmp_path, "b.log", NS_LINES),
              a_file(tmp_path, "junk.log", ["not a DPM line\n"] * 5)]
    lanes = lanes_of(inputs, bundled_profiles(), None, open_input=lambda inp: None,
                     first_lines=first_lines)
    profiles = {inp.name: lane.profiles[id(inp)] for lane in lanes for inp in lane.inputs}
    assert profiles["a.log"].name == "lcgdm-dpm" and profiles["b.log"].name == "lcgdm-ns"
    assert profiles["junk.log"] is None   # its source goes on detecting, line by line


def test_a_forced_profile_puts_every_file_in_its_daemon_lane(tmp_path):
    inputs = [a_file(tmp_path, "a.log", DPM_LINES), a_file(tmp_path, "b.log", NS_LINES)]
    assert lanes_by_name(inputs, forced=resolve_profile("lcgdm-ns")) == {
        "dpns": ["a.log", "b.log"]}


def test_unrecognised_and_unreadable_files_share_the_question_mark_lane(tmp_path):
    junk = a_file(tmp_path, "junk.log", ["not a DPM line\n"] * 5)
    missing = Input("gone.log", str(tmp_path / "gone.log"), None, None)
    assert lanes_by_name([junk, missing]) == {"?": ["junk.log", "gone.log"]}


@pytest.mark.parametrize("junk_lines, daemon", [(199, "dpm"), (200, "?")])
def test_the_daemon_is_detected_from_the_first_200_lines_only(tmp_path, junk_lines, daemon):
    inp = a_file(tmp_path, "late.log", ["not a DPM line\n"] * junk_lines + DPM_LINES)
    assert lanes_by_name([inp]) == {daemon: ["late.log"]}


def test_daemon_of_reads_bytes_with_crlf_endings_and_undecodable_bytes():
    first = [s.encode().replace(b"\n", b"\r\n") for s in NS_LINES] + [b"\xff\xfe broken\n"]
    assert daemon_of(first, bundled_profiles(), None) == "dpns"
    assert daemon_of([], bundled_profiles(), None) == "?"
