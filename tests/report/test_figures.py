"""report/svg.py and report/figures.py: the axes a reader reads the figures by."""

from __future__ import annotations

import math
import random

import struct

import pytest

from dpmstream.parsers import extension
from dpmstream.parsers.clock import load_zone
from dpmstream.report import figures as F
from dpmstream.report.svg import (
    Scale, dots_path, line_path, linear_ticks, log_ticks, nice_top, num, nums, percentile,
    python_nums, steps_area, steps_path, time_label, time_offset_text, time_ticks,
)

two_decimals = extension.compiled("two_decimals")   # svg.nums compiled, or None

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


# -- paths written in bulk: each number as num() writes it alone -----------------------------

def _coordinates(rng: random.Random, n: int) -> list[float]:
    """Pixels as figures make them, and the endings num() treats apart: whole numbers (as
    floats and ints), -0.0, values that round to a whole number or to one decimal, halves
    of a hundredth, tiny negatives that write as "-0"."""
    edge = [0.0, -0.0, 0, 7, 12.0, 1000, 9.999, 99.995, 0.125, 2.675, 1.005, 12.5, 12.30,
            -0.001, -0.004, -0.005, -3.5, 1e-9, 123456.789, 0.1 + 0.2]
    return edge + [rng.choice((rng.uniform(-50, 1100), round(rng.uniform(0, 1000), 1),
                               round(rng.uniform(0, 1000), 2), rng.randint(0, 1000) + 0.005))
                   for _ in range(n)]


def test_numbers_written_in_bulk_are_written_as_num_writes_each():
    values = _coordinates(random.Random(30), 20_000)
    assert nums("%.2f " * len(values), values) == "".join(num(v) + " " for v in values)
    assert nums("M%.2f %.2fh0" * 2, [1.5, 2.0, -0.0, 3.25]) == "M1.5 2h0M0 3.25h0"


def test_a_number_num_refuses_is_refused_in_bulk_too():
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises((ValueError, OverflowError)):
            num(bad)
        with pytest.raises(ValueError):
            nums("M%.2f %.2f", [1.0, bad])


def _any_floats(rng: random.Random, n: int) -> list[float]:
    """Finite doubles of every magnitude (random bit patterns, and uniform ones from 1e-6
    to 1e17, around 2^53 where the compiled one changes its way), and the exact ties of
    "%.2f": a whole number plus 1, 3, 5 or 7 eighths (x.125 rounds to x.12, x.375 to
    x.38: half to the even digit, on the binary value), their neighbours a unit in the
    last place away, and numbers a half-hundredth off that are not ties in binary."""
    values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-6, 17) for _ in range(n // 4)]
    while len(values) < n // 2:
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(v):
            values.append(v)
    for _ in range(n // 8):
        tie = rng.choice((rng.randint(0, 2000), rng.randint(0, 2**40))) + rng.choice((1, 3, 5, 7)) / 8
        tie = rng.choice((tie, -tie))
        values += [tie, math.nextafter(tie, math.inf), math.nextafter(tie, -math.inf),
                   rng.randint(-10**6, 10**6) / 100 + 0.005]
    return values


@pytest.mark.skipif(two_decimals is None, reason="the compiled extension is not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_numbers_round_as_python_formats_them(seed):
    """Rust's {:.2} and Python's "%.2f" both give the decimal nearest the float's binary
    value, a tie to the even digit: checked here on 400 k values a run (8 M random and
    edge values when written, bench/RESULTS.md session 29, figs29)."""
    values = _any_floats(random.Random(seed), 100_000)
    template = "M%.2f " * len(values)
    assert two_decimals(template, values) == python_nums(template, values)
    edge = _coordinates(random.Random(seed), 2_000)
    assert two_decimals("L%.2f %.2f" * (len(edge) // 2), edge[:len(edge) // 2 * 2]) \
        == python_nums("L%.2f %.2f" * (len(edge) // 2), edge[:len(edge) // 2 * 2])


@pytest.mark.skipif(two_decimals is None, reason="the compiled extension is not built")
def test_the_compiled_numbers_leave_what_they_cannot_write_to_python():
    """Not finite, not a number, another conversion, too few or too many values: a
    TypeError, for nums' reference to answer (or refuse) as it does."""
    for template, values in (("M%.2f", [float("nan")]), ("M%.2f", [math.inf]),
                             ("M%.2f", ["1"]), ("M%d", [1]), ("M%.2f %.2f", [1.0]),
                             ("M%.2f", [1.0, 2.0])):
        with pytest.raises(TypeError):
            two_decimals(template, values)
    assert nums("%.2f%%", [2**51 + 0.5]) == python_nums("%.2f%%", [2**51 + 0.5]) == "2251799813685248.5%"
    assert nums("%.2f", [2**53 - 1]) == "9007199254740991"
    with pytest.raises(TypeError):
        nums("M%.2f %.2f", [1.0])   # the reference's own error


def test_a_scale_puts_its_ends_on_its_pixels_and_the_values_between_in_proportion():
    """Scale.many is the mapping (a scale called on one value is many of one): data lo and
    hi land on pixels a and b, values between and beyond in proportion, of their logs on a
    log scale, where a value at or below 0 is drawn a thousandth of its low end."""
    y = Scale(0, 12.5, 300.0, 26.0)   # a y axis: up is smaller y
    assert y.many([0, 12.5, 6.25, 25, -12.5]) == [300.0, 26.0, 163.0, -248.0, 574.0]
    assert y.many(iter([6.25, 0])) == [163.0, 300.0]
    assert [y(6.25), y(12.5)] == [163.0, 26.0]
    logs = Scale(1e-3, 10.0, 60.0, 260.0, log=True)   # four decades, 50 pixels each
    assert logs.many([1e-3, 10.0, 0.1, 0, -4]) == [60.0, 260.0, 160.0, -90.0, -90.0]
    assert [logs(0.1), logs(0)] == [160.0, -90.0]
    # no span: every value on the low end's pixel
    assert Scale(5, 5, 10.0, 20.0).many([1, 5, 9]) == [10.0] * 3
    assert Scale(0.1, 0.1, 10.0, 20.0, log=True)(3) == 10.0


def _steps_path_per_point(sx, sy, edges, values) -> str:
    """steps_path's definition, one num() per number."""
    return "".join(f"{'M' if i == 0 else 'L'}{num(sx(edges[i]))} {num(sy(v))}H{num(sx(edges[i + 1]))}"
                   for i, v in enumerate(values))


def _steps_area_per_point(sx, sy, edges, values, floor=0.0) -> str:
    base = sy(floor)
    return (f"M{num(sx(edges[0]))} {num(base)}"
            + "".join(f"V{num(sy(v))}H{num(sx(edges[i + 1]))}" for i, v in enumerate(values))
            + f"V{num(base)}Z") if values else ""


def test_step_lines_areas_dots_and_polylines_are_written_as_point_by_point():
    rng = random.Random(32)
    for n in (0, 1, 2, 40, 300):
        edges = sorted(rng.sample(range(1313152300000, 1313159500000), n + 1))
        values = [rng.choice((0, rng.random() * 40, rng.randint(0, 93))) for _ in range(n)]
        sx, sy = Scale(edges[0], edges[-1], 71.3, 980.0), Scale(0, 100, 158.0, 30.0)
        assert steps_path(sx, sy, edges, values) == _steps_path_per_point(sx, sy, edges, values)
        assert steps_area(sx, sy, edges, values) == _steps_area_per_point(sx, sy, edges, values)
        logs = Scale(1e-3, 100.0, 60.0, 210.0, log=True)
        shares = [v / 40 for v in values]
        assert steps_path(logs, sy, [10 ** (i / 8 - 3) for i in range(n + 1)], shares) == \
            _steps_path_per_point(logs, sy, [10 ** (i / 8 - 3) for i in range(n + 1)], shares)
        xs, ys = sx.many(edges[:n]), sy.many(values)
        assert dots_path(xs, ys) == "".join(f"M{num(x)} {num(y)}h0" for x, y in zip(xs, ys))
        if n:
            assert line_path(xs, ys) == "M" + "L".join(f"{num(x)} {num(y)}"
                                                       for x, y in zip(xs, ys))


def _binned_counts_per_value(values, edges):
    """binned_counts' definition, a value at a time: its bin is the last edge at or below
    it, the first bin for one below every edge, the last for one at or above the last."""
    bins = [0] * (len(edges) - 1)
    for v in values:
        at_or_below = [i for i, e in enumerate(edges) if e <= v]
        bins[min(at_or_below[-1], len(bins) - 1) if at_or_below else 0] += 1
    return bins


@pytest.mark.parametrize("seed", range(20))
def test_values_are_counted_in_the_bin_whose_edges_hold_them(seed):
    rng = random.Random(seed)
    n_bins = rng.choice((1, 2, 40))
    lo, hi = 10.0 ** rng.randint(-4, -1), 10.0 ** rng.randint(0, 3)
    edges = [lo * (hi / lo) ** (i / n_bins) for i in range(n_bins + 1)]
    # values on the edges themselves, below the first, at and above the last, repeated
    values = [rng.choice((rng.choice(edges), rng.uniform(lo / 10, hi * 2),
                          10 ** rng.uniform(math.log10(lo), math.log10(hi))))
              for _ in range(rng.choice((1, 5, 3000)))]
    assert F.binned_counts(values, edges) == _binned_counts_per_value(values, edges)


def test_the_pages_escape_is_htmls():
    """report/svg.escape, written out so that the report does not import html, against
    html.escape: markup, quotes, ampersands already escaped, entities, text without any."""
    import html

    from dpmstream.report.svg import escape

    for text in ("", "plain words", "<b>bold</b> & 'single' \"double\"", "&amp; &lt;",
                 "a < b > c", "x=\"1\" y='2'", "é ü — ∞", "&&&<<<>>>'''\"\"\""):
        assert escape(text) == html.escape(text), text


def test_the_scatter_draws_the_busiest_clients_by_name_and_the_rest_as_other_hosts():
    requests = []
    for i in range(10):   # client c<i> sends i + 1 requests; the 8 busiest get a colour each
        requests += [{"client": f"c{i}", "accepted": JULY + 1000 * k, "total_ms": 500 + i}
                     for k in range(i + 1)]
    requests += [{"client": None, "started": JULY, "total_ms": 700},      # its host unknown: "?"
                 {"client": "c9", "accepted": JULY, "total_ms": None},    # no duration: no point
                 {"client": "c0", "total_ms": 900}]                        # no time: no point
    svg = F.duration_scatter(requests, ZURICH)
    for i in range(3, 10):
        assert f">c{i} ({i + 1})<" in svg, i
    # c0 (1 + its point-less one), c1 (2), c2 (3) and "?" (1): c2 has a colour, the others
    # are "other hosts", counted by their points
    assert ">c2 (3)<" in svg and ">other hosts (4)<" in svg
    assert ">c0 " not in svg and ">c1 " not in svg and ">? (" not in svg
    assert svg.count("h0") == sum(range(1, 11)) + 1 + 9   # a dot a point, and a legend key's


def test_a_phases_histogram_counts_its_values_at_or_below_0_in_the_corner_and_spans_the_rest():
    """Each phase's panel: the values above 0 on decades around the least and the greatest
    of them; the values at or below 0 counted in the corner, a record without the value
    not counted; a request whose op is not recorded (None) counts among the zeros only."""
    records = [{"op": "put", "queue_ms": v} for v in (0, -5, None, 100, 2_000, 100)]
    records += [{"op": "get", "queue_ms": v} for v in (0, 300)]
    records += [{"op": None, "queue_ms": v} for v in (-1, 50_000)]
    svg = F.phase_distributions(records)
    assert svg.count(" at or</text>") == 1 and ">4 at or</text>" in svg
    assert ">queue_s</text>" in svg and ">auth_s</text>" not in svg   # no auth_ms at all
    labels = {t for t in ("0.01", "0.1", "1", "10", "100") if f">{t}</text>" in svg}
    assert labels == {"0.1", "1", "10"}   # 0.1 s to 2 s; the op-less 50 s is not drawn
