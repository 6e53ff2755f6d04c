"""report/svg.py and report/figures.py: the axes a reader reads the figures by."""

from __future__ import annotations

from dpmstream.parsers.clock import load_zone
from dpmstream.report import figures as F
from dpmstream.report.svg import (
    linear_ticks, log_ticks, nice_top, percentile, time_label, time_offset_text, time_ticks,
)

ZURICH = load_zone("Europe/Zurich")
JULY = 1313152300000   # 2011-08-12 14:31:40 CEST


def test_a_time_axis_says_the_date_and_the_abbreviation_valid_then():
    ticks, step = time_ticks(JULY, JULY + 78_000, ZURICH)
    assert time_offset_text(JULY, JULY + 78_000, step, ZURICH) == "2011-Aug-12 CEST"
    january = 1294842700000   # 2011-01-12 15:31:40 CET
    _, step = time_ticks(january, january + 60_000, ZURICH)
    assert time_offset_text(january, january + 60_000, step, ZURICH) == "2011-Jan-12 CET"


def test_a_time_axis_across_a_clock_change_names_both_abbreviations():
    change = 1319936400000   # 2011-10-30 01:00 UTC: 03:00 CEST becomes 02:00 CET
    t0, t1 = change - 1_800_000, change + 1_800_000
    ticks, step = time_ticks(t0, t1, ZURICH)
    assert time_offset_text(t0, t1, step, ZURICH) == "2011-Oct-30 CEST to CET"
    assert [time_label(t, step, ZURICH) for t in ticks][:2] == ["02:30", "02:40"]


def test_time_ticks_fall_on_whole_steps_of_the_zones_wall_clock():
    ticks, step = time_ticks(JULY, JULY + 78_000, ZURICH)
    assert step == 10_000
    assert [time_label(t, step, ZURICH) for t in ticks] == [
        "14:31:40", "14:31:50", "14:32:00", "14:32:10", "14:32:20", "14:32:30", "14:32:40",
        "14:32:50"]
    hours, step = time_ticks(JULY, JULY + 6 * 3_600_000, ZURICH)
    assert step == 3_600_000
    assert time_label(hours[0], step, ZURICH) == "15:00"   # a whole local hour, not UTC's


def test_value_ticks_are_round_numbers_and_log_ticks_whole_decades():
    assert linear_ticks(0, 2.0, 6) == [0, 0.5, 1.0, 1.5, 2.0]
    assert nice_top(2.968) == 3.0
    assert linear_ticks(0, nice_top(3, 3, integer=True), 3, integer=True) == [0, 1, 2, 3]
    assert log_ticks(0.001, 1) == [0.001, 0.01, 0.1, 1]
    assert log_ticks(0.01, 1, (1.0, 2.0, 5.0)) == [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1]


def test_the_boxes_quartiles_interpolate_between_ranks_as_numpy_does():
    assert percentile([1, 2, 3, 4], 25) == 1.75
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 95) == 5


def test_a_figure_is_one_inline_svg_with_its_labels_as_text():
    latency = {"creat": [40, 41, 43, 55, 60], "stat": [1, 2, 2, 3]}
    svg = F.ns_latency(latency)
    assert svg.startswith("<svg ") and svg.endswith("</svg>")
    assert ">creat (5)</text>" in svg and ">stat (4)</text>" in svg
    assert "call duration (s, log scale)" in svg    # 1 ms to 60 ms spans decades
