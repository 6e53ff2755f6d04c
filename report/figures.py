"""The report's figures, drawn by report/svg.py as SVG text that the page inlines.

Each figure keeps what a reader needs to read it alone: axes with ticks and units, the
title of each panel, a legend, logarithmic axes where durations span decades, and the
date with its zone's abbreviation under a time axis (docs/report.md, "Time labels").
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from itertools import repeat
from operator import itemgetter

from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.parsers.records import column_of
from dpmstream.report import analysis as A
from dpmstream.report.svg import (
    WIDTH, Key, Panel, Svg, dots_path, legend, legend_size, line_path, linear_ticks,
    log_bounds, log_ticks, nice_top, percentile, seconds, steps_area, steps_path,
    text_width,
)

COLOURS = {
    "auth": "#b3a7d6", "request": "#6a51a3", "queue": "#e6550d", "proc_ns": "#08519c",
    "proc": "#6baed6", "after_proc": "#fdae6b", "transfer": "#31a354", "done": "#006d2c",
    "between": "#d9d9d9",
}
STATUS_COLOURS = {"success": "#31a354", "failed": "#de2d26", "aborted": "#8c6d31",
                  "incomplete": "#969696"}
CLIENT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                  "#e377c2", "#17becf")
OP_COLOURS = {"put": "#3182bd", "get": "#e6550d"}
MARK_COLOUR = "#c51b7d"
DARK_SEGMENTS = ("request", "queue", "proc_ns", "transfer", "done")  # white labels on them
RIGHT = 20   # the right margin of every figure


def _label_margin(labels, size=10.0) -> float:
    """A left margin wide enough for the longest tick label."""
    return 14 + max((text_width(s, size) for s in labels), default=20)


# -- 1. the phase breakdown ---------------------------------------------------------------

def phase_breakdown(breakdowns: dict, has_ns: bool) -> str:
    ops = list(breakdowns)
    segs = [k for k, _ in A.SEGMENTS if has_ns or k != "proc_ns"]
    keys = [Key(A.SEGMENT_LABELS[k], COLOURS[k]) for k in segs]
    svg = Svg(WIDTH, 0, "phases")
    keys.append(Key("status polls (overlap the wait)", "#555555", fill=svg.hatch("#555555")))
    names = [(op, f"({breakdowns[op].requests:,})") for op in ops]
    left = _label_margin([s for pair in names for s in pair])
    band = 56
    top, plot_h = 34, band * len(ops)
    _, legend_h, _ = legend_size(keys, 5)
    svg.height = top + plot_h + 44 + legend_h + 8
    gap = 36
    width = (WIDTH - left - RIGHT - gap) / 2
    polls_s = {op: breakdowns[op].poll_ms / max(breakdowns[op].requests, 1) / 1000 for op in ops}
    panels = []
    for i, (title, unit) in enumerate((("Share of the request's time", "%"),
                                       ("Seconds per request (mean)", "s"))):
        p = Panel(svg, left + i * (width + gap), top, width, plot_h)
        if unit == "%":
            hi = 100.0
        else:
            hi = max([sum(breakdowns[op].mean_s(k) for k in segs) for op in ops]
                     + list(polls_s.values()) + [1e-3])
            hi = nice_top(hi * 1.02)
        p.scales(0, hi, 0, len(ops))
        p.xticks(linear_ticks(0, hi, 6), lambda v: f"{v:g}")
        p.frame()
        p.title(title)
        p.xlabel("% of total_s" if unit == "%" else "seconds")
        panels.append((p, unit))
    for y, op in enumerate(ops):
        b = breakdowns[op]
        cy = top + band * (y + 0.5)
        for p, unit in panels:
            x = 0.0
            for k in segs:
                w = 100 * b.share(k) if unit == "%" else b.mean_s(k)
                x0, x1 = p.sx(x), p.sx(x + w)
                svg.rect(x0, cy - band * 0.25, x1 - x0, band * 0.5, COLOURS[k],
                         stroke="#ffffff", stroke_width="0.5")
                if b.share(k) >= 0.08:   # room for a label
                    svg.text((x0 + x1) / 2, cy, f"{w:.0f}%" if unit == "%" else f"{w:.2f}",
                             size=9.5, anchor="middle", valign="middle",
                             colour="#ffffff" if k in DARK_SEGMENTS else "#222222")
                x += w
        # Status polls run on fast threads while the request waits: shown beside, not stacked.
        p, _ = panels[1]
        svg.rect(p.sx(0), cy + band * 0.27, p.sx(polls_s[op]) - p.sx(0), band * 0.14,
                 keys[-1].fill, stroke="#555555", stroke_width="0.6")
        svg.text(left - 8, cy - 6, op, size=10.5, anchor="end", valign="middle")
        svg.text(left - 8, cy + 8, names[y][1], size=10, anchor="end", colour="#444444",
                 valign="middle")
    legend(svg, keys, WIDTH / 2, top + plot_h + 44, 5, anchor="centre")
    return svg.render("Where a request's time goes, per op")


# -- 2. duration against start time (the thesis's Figure 1) -------------------------------

def duration_scatter(requests: list, zone) -> str:
    # Each request's client read once, for the counts (in C) and for its point (issue 30:
    # three lookups of it a request, in two Python passes).
    clients = [c or "?" for c in map(dict.get, requests, repeat("client"))]
    counts = Counter(clients)   # in the order first seen, as a dict
    top = [c for c, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:len(CLIENT_COLOURS)]]
    groups = top + (["other hosts"] if len(counts) > len(top) else [])
    points: dict[str, list] = {g: [] for g in groups}
    group_of = {c: points[c] for c in top}
    others = points.get("other hosts")
    for t, total, client in zip(A.starts_of(requests), map(dict.get, requests, repeat("total_ms")),
                                clients):
        if total is None or t is None:
            continue
        group_of.get(client, others).append((t, total / 1000))
    drawn = [(i, g) for i, g in enumerate(groups) if points[g]]
    keys = [Key(f"{g} ({len(points[g]):,})",
                CLIENT_COLOURS[i] if g != "other hosts" else "#aaaaaa", "dot")
            for i, g in drawn]
    every = [p for g in groups for p in points[g]]
    hi = nice_top(max(max(map(itemgetter(1), every), default=1e-3), 1e-3))
    ticks = linear_ticks(0, hi, 6)
    left = _label_margin([f"{v:g}" for v in ticks]) + 18
    _, legend_h, _ = legend_size(keys, 4)
    svg = Svg(WIDTH, 0, "scatter")
    top_y = 8 + legend_h + 6
    plot_h = 280
    svg.height = top_y + plot_h + 44
    p = Panel(svg, left, top_y, WIDTH - left - RIGHT, plot_h)
    t0 = min(map(itemgetter(0), every), default=0)
    t1 = max(map(itemgetter(0), every), default=t0 + 1)
    pad = max((t1 - t0) * 0.02, 500)
    p.scales(t0 - pad, t1 + pad, 0, hi)
    p.yticks(ticks, lambda v: f"{v:g}")
    p.time_axis(int(t0 - pad), int(t1 + pad), zone)
    p.frame()
    p.ylabel("request duration total_s (s)", left - 12)
    for (i, g), key in zip(drawn, keys):
        ts, vs = zip(*points[g])
        svg.path(dots_path(p.sx.many(ts), p.sy.many(vs)), stroke=key.colour,
                 width=4, stroke_linecap="round", stroke_opacity="0.6")
    legend(svg, keys, left, 8, 4)
    return svg.render("Request duration against start time, by client host")


# -- 3. the distribution of each phase ----------------------------------------------------

def binned_counts(values: list[float], edges: list[float]) -> list[int]:
    """How many of `values` fall in each bin [edges[i], edges[i + 1]) of the increasing
    `edges`; those below the first edge count in the first bin, those at or above the
    last in the last. From one sorted copy and a bisection per edge: a sort compares
    floats directly, where a bisection per value (the histograms' ~24 k values on the
    thesis log) called the comparison protocol ~6 times each (issue 30)."""
    s = sorted(values)
    at_least = [len(s) - bisect.bisect_left(s, e) for e in edges]   # values >= each edge
    n_bins = len(edges) - 1
    bins = [a - b for a, b in zip(at_least, at_least[1:n_bins])]
    bins.append(at_least[n_bins - 1])    # the last bin keeps what lies above it
    bins[0] += len(s) - at_least[0]      # the first, what lies below it
    return bins


def phase_distributions(requests: list) -> str:
    fields = [(f, w) for f, w in A.PHASE_FIELDS
              if any(r.get(f) is not None for r in requests)]
    recorded = list(map(itemgetter("op"), requests))   # each request's op, read in C
    ops = sorted({op or "?" for op in recorded})
    cols = 4
    rows = max(1, math.ceil(len(fields) / cols))
    cell_w, cell_h = (WIDTH - 60 - RIGHT) / cols, 190
    plot_w, plot_h = cell_w - 46, cell_h - 64
    svg = Svg(WIDTH, rows * cell_h + 30, "dists")
    # The requests by their op as recorded, once: each phase's values are then read op by
    # op in C (dict.get mapped; issue 30: a Python step per request and phase, 8 phases).
    # A request whose op is not one of `ops` as recorded (None) counts among the zeros only.
    # Each op's requests picked by a comprehension over the ops read once (issue 30: a
    # setdefault and an append a request).
    by_op = {op: [r for r, o in zip(requests, recorded) if o == op]
             for op in dict.fromkeys(recorded)}
    for n, (fieldname, _words) in enumerate(fields):
        x0 = 60 + (n % cols) * cell_w
        y0 = (n // cols) * cell_h + 26
        p = Panel(svg, x0, y0, plot_w, plot_h)
        positive: dict[str, list[float]] = {op: [] for op in ops}
        zeros = 0
        for op, of_op in by_op.items():
            # The values other than None and 0 (ints, ms) sorted as ints, in C: those
            # below 0 come first, the positive ones after them already in order, which
            # a division by 1000 keeps (issue 30: a comprehension a value fewer, and the
            # histogram's sort of a sorted list is one pass).
            read = list(map(dict.get, of_op, repeat(fieldname)))
            values = sorted(filter(None, read))   # neither None nor 0
            below = bisect.bisect_left(values, 0)
            # The values not above 0 are the zeros: the 0s and those below.
            zeros += len(read) - read.count(None) - len(values) + below
            if op in positive:
                positive[op] = [v / 1000 for v in values[below:]]
        # The bounds from each op's values, not from a list of them all (issue 30): each
        # list is sorted, its ends its least and greatest.
        filled = [vs for vs in positive.values() if vs]
        everything = bool(filled)
        p.title(column_of(fieldname), size=11.5)  # the column the user knows
        counts = {}
        lo, hi = 1e-3, 1.0
        if everything:
            lo, hi = log_bounds(min(vs[0] for vs in filled), max(vs[-1] for vs in filled))
            n_bins = 40
            edges = [lo * (hi / lo) ** (i / n_bins) for i in range(n_bins + 1)]
            for op in ops:
                if positive[op]:
                    counts[op] = binned_counts(positive[op], edges)
        top = nice_top(max([c for bins in counts.values() for c in bins] + [1]), 4, integer=True)
        p.scales(lo, hi, 0, top, xlog=True)
        p.yticks(linear_ticks(0, top, 4, integer=True), lambda v: f"{v:g}")
        if everything:
            p.xticks(log_ticks(lo, hi), seconds)
        for op, bins in counts.items():
            colour = OP_COLOURS.get(op, "#777777")
            area = steps_area(p.sx, p.sy, edges, bins)
            svg.path(area, fill=colour, fill_opacity="0.45")
            svg.path(steps_path(p.sx, p.sy, edges, bins), stroke=colour, width=0.9)
        p.frame()
        if zeros:
            svg.text(x0 + 5, y0 + 5, f"{zeros:,} at or", size=9, colour="#666666", valign="top")
            svg.text(x0 + 5, y0 + 16, "below 0 s", size=9, colour="#666666", valign="top")
        if n == 0:
            p.ylabel("requests", 40)
            if len(ops) > 1:
                legend(svg, [Key(op, OP_COLOURS.get(op, "#777777")) for op in ops],
                       x0 + plot_w, y0 + 2, 1, anchor="right")
    svg.text(WIDTH / 2, svg.height - 6, "seconds (log scale)", size=10.5, anchor="middle")
    return svg.render("The distribution of each phase")


# -- 4. over time -------------------------------------------------------------------------

def timeline(t: dict, zone) -> str:
    """t: edges, rate (status -> per s), fast/slow (means, peaks), slow_pool, queue (means,
    peaks), polls (op -> mean per request), restarts [(ms, daemon)], unparsed [(ms, n)]."""
    edges = t["edges"]
    mids = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
    width = edges[1] - edges[0]
    slow_mean, slow_peak = t["slow"]
    fast_mean, fast_peak = t["fast"]
    ns_peak = t["ns_busy"][1] if t["ns_busy"] is not None else []
    q_mean, q_peak = t["queue"]
    stacked = [sum(vs) for vs in zip(*t["rate"].values())] if t["rate"] else []
    tops = {
        "rate": nice_top(max(stacked + [1e-9]) * 1.05) if any(stacked) else 1.0,
        "threads": nice_top(max([1, *slow_peak, *fast_peak, *ns_peak]) * 1.25),
        "queue": nice_top(max([1, *q_peak]) * 1.15),
        "polls": nice_top(max([v for vs in t["polls"].values() for v in vs if v is not None]
                              + [1e-9]) * 1.05),
        "health": nice_top(max([1, *(n for _, n in t["unparsed"])]) * 1.3, 3, integer=True),
    }
    ratios = {"rate": 1.1, "threads": 1.2, "queue": 1, "polls": 0.9, "health": 0.6}
    tick_labels = [f"{v:g}" for k, top in tops.items()
                   for v in linear_ticks(0, top, 3 if k == "health" else 5, k == "health")]
    left = _label_margin(tick_labels) + 18
    unit_h, gap = 128, 58
    svg = Svg(WIDTH, 0, "timeline")
    y = 30
    panels = {}
    for k, ratio in ratios.items():
        p = Panel(svg, left, y, WIDTH - left - RIGHT, unit_h * ratio)
        p.scales(edges[0], edges[-1], 0, tops[k])
        p.yticks(linear_ticks(0, tops[k], 3 if k == "health" else 5, k == "health"),
                 lambda v: f"{v:g}")
        p.time_axis(edges[0], edges[-1], zone, labels=k == "health")
        panels[k] = p
        y += p.h + gap
    svg.height = y - gap + 46

    rate = panels["rate"]
    bottom = [0.0] * len(mids)
    keys = []
    for status, values in t["rate"].items():
        for i, v in enumerate(values):
            if v:
                x0 = rate.sx(mids[i] - width * 0.46)
                svg.rect(x0, rate.sy(bottom[i] + v), rate.sx(mids[i] + width * 0.46) - x0,
                         rate.sy(bottom[i]) - rate.sy(bottom[i] + v), STATUS_COLOURS[status])
        bottom = [a + b for a, b in zip(bottom, values)]
        keys.append(Key(status, STATUS_COLOURS[status]))
    _panel_head(rate, "a. Requests finished per second, by status", "requests / s",
                keys if any(bottom) else [], 4, "no put/get requests")

    threads = panels["threads"]
    keys = []
    if any(slow_peak):
        keys += _mean_and_max(threads, edges, (slow_mean, slow_peak), ("#e6550d", "#e6550d"),
                              ("slow: mean", "slow: max"), 1.4, ("#e6550d", "0.25"))
    if any(fast_peak):
        keys += _mean_and_max(threads, edges, (fast_mean, fast_peak), ("#3182bd", "#3182bd"),
                              ("fast: mean" + ("" if t.get("polls_in_fast")
                                               else " (polls left out)"), "fast: max"), 1.4)
    if t["ns_busy"] is not None:
        _steps(threads, edges, t["ns_busy"][0], "#756bb1", 1.2)
        keys.append(Key("name server: mean", "#756bb1", "line", width=1.2))
    if t["slow_pool"]:
        py = threads.sy(t["slow_pool"])
        svg.line(threads.x, py, threads.x + threads.w, py, "#e6550d", 0.8, "4 3")
        svg.text(threads.x + 5, py - 4, f"{t['slow_pool']} slow threads: the most busy at once "
                 "for 50 ms", size=9.5, colour="#a63603")
    _panel_head(threads, "b. Busy threads (a call's first line to its returns)", "threads",
                keys, 3 if t["ns_busy"] is not None else 4, "no calls placed in time")

    queue = panels["queue"]
    keys = []
    if any(q_peak):
        keys = _mean_and_max(queue, edges, (q_mean, q_peak), ("#e6550d", "#a63603"),
                             ("mean", "max"), 1.2, ("#fdae6b", "0.5"))
    _panel_head(queue, "c. Slow-queue depth (requests waiting for a slow thread)", "requests",
                keys, 2, "no request waited for a slow thread")

    polls = panels["polls"]
    keys = []
    for op, values in t["polls"].items():
        known = [(m, v) for m, v in zip(mids, values) if v is not None]
        if known:
            colour = OP_COLOURS.get(op, "#777777")
            ms, vs = zip(*known)
            xs, ys = polls.sx.many(ms), polls.sy.many(vs)
            svg.path(line_path(xs, ys), stroke=colour, width=1.2)
            svg.path(dots_path(xs, ys), stroke=colour, width=5, stroke_linecap="round")
            keys.append(Key(op, colour, "line", width=1.2))
    _panel_head(polls, "d. Status polls per request (mean, by start time)", "polls / request",
                keys, 2, "no put/get requests")

    health = panels["health"]
    for ms, n in t["unparsed"]:
        x0 = health.sx(ms - width * 0.4)
        svg.rect(x0, health.sy(n), health.sx(ms + width * 0.4) - x0,
                 health.sy(0) - health.sy(n), "#636363")
    title = ("e. Log health: unparsed lines and daemon restarts"
             + ("" if t["unparsed_known"] else " (line counts: only when reading logs)"))
    _panel_head(health, title, "lines",
                [Key("unparsed lines", "#636363")] if t["unparsed"] else [], 1, "")
    for p in panels.values():
        for ms, _daemon in t["restarts"]:
            svg.line(p.sx(ms), p.y, p.sx(ms), p.y + p.h, MARK_COLOUR, 1.0, "4 3")
    for ms, daemon in t["restarts"]:
        svg.text(health.sx(ms) + 3, health.y + 3, f"restart {daemon}".strip(), size=9,
                 colour=MARK_COLOUR, valign="top")
    if not t["unparsed"] and not t["restarts"]:
        health.note("no unparsed lines, no restarts", colour="#31a354")
    return svg.render("Over time: requests, busy threads, queue depth, polls, log health")


def _steps(p: Panel, edges, values, colour, width, dash=None) -> None:
    p.svg.path(steps_path(p.sx, p.sy, edges, values), stroke=colour, width=width, dash=dash)


def _mean_and_max(p: Panel, edges, series, colours, labels, width, shade=None) -> list[Key]:
    """A mean per bin (solid, its area shaded when `shade` = (colour, opacity)) and the
    maximum (dotted); returns their legend keys."""
    (mean, peak), (mean_colour, peak_colour) = series, colours
    if shade:
        p.svg.path(steps_area(p.sx, p.sy, edges, mean), fill=shade[0], fill_opacity=shade[1])
    _steps(p, edges, mean, mean_colour, width)
    _steps(p, edges, peak, peak_colour, 0.8, "1.5 2")
    return [Key(labels[0], mean_colour, "line", width=width),
            Key(labels[1], peak_colour, "line", "1.5 2", 0.8)]


def _panel_head(p: Panel, title: str, ylabel: str, keys: list, ncol: int, empty: str) -> None:
    """The panel's title, y label and frame, its legend above its right end, or a note
    when nothing was drawn."""
    p.title(title)
    p.ylabel(ylabel, p.x - 14)
    p.frame()
    if keys:
        _, h, _ = legend_size(keys, ncol)
        legend(p.svg, keys, p.x + p.w, p.y - h - 2, ncol, anchor="right")
    elif empty:
        p.note(empty)


# -- 5. the name server -------------------------------------------------------------------

def ns_latency(latency: dict[str, list[int]]) -> str:
    ops = list(latency)
    data = [sorted(v / 1000 for v in latency[op]) for op in ops]
    every = sorted(v for vs in data for v in vs)
    low, high = nearest_rank(every, 0.05), nearest_rank(every, 0.95)
    log_axis = high / max(low, 0.0005) > 20   # only where the durations span decades
    if log_axis:
        data = [[max(v, 0.0005) for v in vs] for vs in data]   # 0 ms drawn at 0.5 ms
    boxes = [tuple(percentile(vs, q) for q in (5, 25, 50, 75, 95)) for vs in data]
    names = [f"{op} ({len(latency[op]):,})" for op in ops]
    band = 30
    svg, p = _rows_panel("ns", names, band)
    left, top = p.x, p.y
    lo_v = min(b[0] for b in boxes)
    hi_v = max(b[4] for b in boxes)
    if log_axis:
        lo, hi = log_bounds(max(lo_v, 0.0005), max(hi_v, 0.001))
        p.scales(lo, hi, 0, 1, xlog=True)
        p.xticks(log_ticks(lo, hi, (1.0, 2.0, 5.0)), seconds)
    else:
        hi = nice_top(max(hi_v, 1e-3) * 1.05)
        p.scales(0, hi, 0, 1)
        p.xticks(linear_ticks(0, hi, 8), lambda v: f"{v:g}")
    p.frame()
    p.title("Name-server call latency by op (number of calls)")
    p.xlabel("call duration (s" + (", log scale" if log_axis else "")
             + "): box 25-75%, line median, whiskers 5-95%")
    for i, (name, (w0, q1, med, q3, w1)) in enumerate(zip(names, boxes)):
        cy = top + 3 + band * (i + 0.5)
        h = band * 0.6
        x = p.sx
        svg.line(x(w0), cy, x(q1), cy, "#4292c6")
        svg.line(x(q3), cy, x(w1), cy, "#4292c6")
        for w in (w0, w1):
            svg.line(x(w), cy - h / 4, x(w), cy + h / 4, "#4292c6")
        svg.rect(x(q1), cy - h / 2, max(x(q3) - x(q1), 0.8), h, "#c6dbef", stroke="#4292c6",
                 stroke_width="1")
        svg.line(x(med), cy - h / 2, x(med), cy + h / 2, "#08306b", 1.6)
        svg.text(left - 8, cy, name, size=10, anchor="end", colour="#444444", valign="middle")
    return svg.render("Name-server call latency by op")


def _rows_panel(prefix: str, names: list[str], band: float) -> tuple[Svg, Panel]:
    """A figure of one panel with a row `band` high per name, the names left of it."""
    left = _label_margin(names)
    svg = Svg(WIDTH, 0, prefix)
    top, plot_h = 30, band * len(names) + 6
    svg.height = top + plot_h + 46
    return svg, Panel(svg, left, top, WIDTH - left - RIGHT, plot_h)


def hot_directories(rows: list[dict]) -> str:
    """The top directories by name-server time, with their creats' peak concurrency."""
    names = [_short_path(r["directory"]) for r in rows]
    seconds_ = [float(r["ns_s"] or 0) for r in rows]
    band = 34
    svg, p = _rows_panel("dirs", names, band)
    left, top = p.x, p.y
    hi = max(seconds_) * 1.6 if max(seconds_) > 0 else 1
    p.scales(0, hi, 0, 1)
    p.xticks(linear_ticks(0, hi, 8), lambda v: f"{v:g}")
    p.frame()
    p.title("Hot directories: name-server time, creats and their peak concurrency")
    p.xlabel("name-server time in the directory (s)")
    for i, (r, name, s) in enumerate(zip(rows, names, seconds_)):
        cy = top + 3 + band * (i + 0.5)
        svg.rect(p.sx(0), cy - band * 0.4, p.sx(s) - p.sx(0), band * 0.8, "#9e9ac8",
                 stroke="#54278f", stroke_width="1")
        note = f"{int(r['creats'] or 0):,} creats"
        if r.get("creat_p50_s"):
            note += f", p50 {float(r['creat_p50_s']):.3f} s"
        if int(r.get("peak_creats") or 0) > 1:
            note += f", up to {r['peak_creats']} at once"
        svg.text(p.sx(s) + 4, cy, note, size=9.5, colour="#3f007d", valign="middle")
        svg.text(left - 8, cy, name, size=10, anchor="end", colour="#444444", valign="middle")
    return svg.render("Hot directories")


def _short_path(path: str, width: int = 48) -> str:
    return path if len(path) <= width else "..." + path[-(width - 3):]
