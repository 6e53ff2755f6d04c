"""The order `replay --to-kafka` publishes archives in (streams/kafka/replay.py
lines_in_event_time), read without a broker: the inputs grouped into daemons as `replay`
groups them (streams/lanes.lanes_of), a daemon's files one after another, the daemons side
by side in event time."""

from __future__ import annotations

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.inputs import InputError
from dpmstream.streams.kafka.replay import lines_in_event_time


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A head node's DPM and DPNS logs, 30 s of them."""
    return simulate(SimConfig(rate=6, duration=30, seed=11), tmp_path_factory.mktemp("order") / "h")


def published(paths):
    return list(lines_in_event_time([str(p) for p in paths], 2011, "Europe/Zurich"))


def test_every_line_of_every_file_is_published_once_with_its_byte_offset(head):
    got = published([head.log_path, head.dpns_log_path])
    for path in (head.log_path, head.dpns_log_path):
        data = path.read_bytes()
        mine = [(offset, raw) for p, offset, _ms, raw in got if p == str(path)]
        assert b"".join(raw for _o, raw in mine) == data
        assert [o for o, _raw in mine] == [sum(len(r) for _o, r in mine[:i]) for i in range(len(mine))]


def test_the_dpm_and_dpns_logs_stay_within_seconds_of_each_other(head):
    """The worker links a call only while both logs reach it within MAX_LAG_MS of each
    other (parsers/linking.py): published one after the other, they would be 30 s apart."""
    from dpmstream.parsers.linking import MAX_LAG_MS

    got = published([head.log_path, head.dpns_log_path])
    assert None not in [ms for _p, _o, ms, _raw in got]
    latest: dict[str, int] = {}
    widest = 0
    for path, _o, ms, _raw in got:
        latest[path] = max(ms, latest.get(path, ms))
        if len(latest) == 2:
            widest = max(widest, abs(latest[str(head.log_path)] - latest[str(head.dpns_log_path)]))
    assert widest < 2_000 < MAX_LAG_MS


def test_one_daemons_files_go_one_after_another_in_the_order_given(head, tmp_path):
    lines = head.log_path.read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "log.1", tmp_path / "log"
    second.write_bytes(b"".join(lines[: len(lines) // 2]))   # given first: read first
    first.write_bytes(b"".join(lines[len(lines) // 2:]))
    got = published([second, first, head.dpns_log_path])
    dpm = [p for p, _o, _ms, _raw in got if p != str(head.dpns_log_path)]
    assert dpm == [str(second)] * (len(lines) // 2) + [str(first)] * (len(lines) - len(lines) // 2)


def test_a_missing_input_is_an_input_error_that_names_it(head, tmp_path):
    missing = tmp_path / "gone.log"
    with pytest.raises(InputError, match="gone.log"):
        published([head.log_path, missing])
