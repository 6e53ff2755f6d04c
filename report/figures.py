"""The report's figures: matplotlib, drawn to SVG text that the page inlines.

Text is drawn as paths (svg.fonttype "path"), so a figure looks the same in any browser
and on paper without fonts; large scatters are rasterised inside the SVG to keep the page
small. Each figure gets its own id salt, so ids never clash once several are inlined.
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from dpmstream.parsers.quantiles import nearest_rank  # noqa: E402
from dpmstream.parsers.records import column_of  # noqa: E402
from dpmstream.report import analysis as A  # noqa: E402
from dpmstream.streams.sinks.summary import moment  # noqa: E402

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
WIDTH = 10.0          # inches; the page shows figures at most this wide
RASTER_ABOVE = 4000   # points in one scatter past which it is drawn as an image

STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold", "axes.titlelocation": "left",
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "grid.color": "#e5e5e5", "grid.linewidth": 0.6, "axes.axisbelow": True,
    "legend.frameon": False, "legend.fontsize": 8, "svg.fonttype": "path",
    "axes.edgecolor": "#888888", "xtick.color": "#444444", "ytick.color": "#444444",
    "axes.labelcolor": "#333333", "figure.dpi": 100,
}


def to_svg(fig, salt: str) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.08)
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]   # drop the XML prolog and DOCTYPE: inlined in HTML


# The date under a time axis, with the abbreviation valid then (docs/report.md, "Time labels").
OFFSET_FORMATS = ["%Z", "%Y %Z", "%Y-%b %Z", "%Y-%b-%d %Z", "%Y-%b-%d %Z", "%Y-%b-%d %H:%M %Z"]


def _time_axis(ax, zone) -> None:
    locator = mdates.AutoDateLocator(tz=zone, minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone,
                                                             offset_formats=OFFSET_FORMATS))


def _legend(ax, ncol: int, empty_note: str) -> None:
    """The legend above the panel's right end, or a note when nothing was drawn."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", bbox_to_anchor=(1, 0.98), ncol=ncol, borderaxespad=0)
    else:
        ax.text(0.5, 0.5, empty_note, transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="#666666")


def _seconds(x, _pos=None) -> str:
    return f"{x:g}"


def _log_seconds(axis) -> None:
    """Ticks at 1, 2 and 5 of each decade, written as plain seconds (0.02, not 2x10^-2)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(_seconds))
    axis.set_minor_formatter(NullFormatter())


# -- 1. the phase breakdown ---------------------------------------------------------------

def phase_breakdown(breakdowns: dict, has_ns: bool) -> str:
    with plt.rc_context(STYLE):
        ops = list(breakdowns)
        fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 1.9 + 0.75 * len(ops)),
                                          sharey=True, layout="constrained")
        segs = [k for k, _ in A.SEGMENTS if has_ns or k != "proc_ns"]
        ys = list(range(len(ops)))
        for ax, values, title, unit in (
                (left, lambda b, k: 100 * b.share(k), "Share of the request's time", "%"),
                (right, lambda b, k: b.mean_s(k), "Seconds per request (mean)", "s")):
            lefts = [0.0] * len(ops)
            for k in segs:
                widths = [values(breakdowns[op], k) for op in ops]
                ax.barh(ys, widths, left=lefts, height=0.5, color=COLOURS[k],
                        label=A.SEGMENT_LABELS[k], edgecolor="white", linewidth=0.5)
                for y, w, l0 in zip(ys, widths, lefts):
                    if breakdowns[ops[y]].share(k) >= 0.08:   # room for a label
                        ax.text(l0 + w / 2, y, f"{w:.0f}%" if unit == "%" else f"{w:.2f}",
                                ha="center", va="center", fontsize=7.5,
                                color="white" if k in ("request", "queue", "proc_ns", "transfer", "done") else "#222222")
                lefts = [a + b for a, b in zip(lefts, widths)]
            ax.set_title(title)
            ax.grid(axis="y", visible=False)
            ax.set_xlabel("% of total_s" if unit == "%" else "seconds")
        left.set_xlim(0, 100)
        # Status polls run on fast threads while the request waits: shown beside, not stacked.
        poll_y = [y + 0.33 for y in ys]
        right.barh(poll_y, [breakdowns[op].poll_ms / max(breakdowns[op].requests, 1) / 1000 for op in ops],
                   height=0.12, color="none", edgecolor="#555555", hatch="////", linewidth=0.6,
                   label="status polls (overlap the wait)")
        left.set_yticks(ys, [f"{op}\n({breakdowns[op].requests:,})" for op in ops])
        left.set_ylim(len(ops) - 0.5, -0.4)   # top to bottom, snug around the bars
        handles, labels = right.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=5)
        return to_svg(fig, "phases")


# -- 2. duration against start time (the thesis's Figure 1) -------------------------------

def duration_scatter(requests: list, zone) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(WIDTH, 3.6))
        counts: dict[str, int] = {}
        for r in requests:
            counts[r.get("client") or "?"] = counts.get(r.get("client") or "?", 0) + 1
        top = [c for c, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:len(CLIENT_COLOURS)]]
        groups = top + (["other hosts"] if len(counts) > len(top) else [])
        raster = len(requests) > RASTER_ABOVE
        for i, group in enumerate(groups):
            pts = [(A.start_of(r), r["total_ms"]) for r in requests
                   if r.get("total_ms") is not None and A.start_of(r) is not None
                   and ((r.get("client") or "?") == group
                        or (group == "other hosts" and (r.get("client") or "?") not in top))]
            if not pts:
                continue
            ax.scatter([moment(t, zone) for t, _ in pts], [v / 1000 for _, v in pts], s=7,
                       alpha=0.6, linewidths=0, rasterized=raster,
                       color=CLIENT_COLOURS[i] if group != "other hosts" else "#aaaaaa",
                       label=f"{group} ({len(pts):,})")
        _time_axis(ax, zone)
        ax.set_ylabel("request duration total_s (s)")
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(4, len(groups)),
                  markerscale=2.5, borderaxespad=0.2, handletextpad=0.2)
        fig.tight_layout()
        return to_svg(fig, "scatter")


# -- 3. the distribution of each phase ----------------------------------------------------

def phase_distributions(requests: list) -> str:
    fields = [(f, w) for f, w in A.PHASE_FIELDS
              if any(r.get(f) is not None for r in requests)]
    ops = sorted({r["op"] or "?" for r in requests})
    cols = 4
    rows = max(1, math.ceil(len(fields) / cols))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 2.1 * rows + 0.3), squeeze=False)
        for ax in axes.flat[len(fields):]:
            ax.set_visible(False)
        for ax, (fieldname, words) in zip(axes.flat, fields):
            positive = {op: [r[fieldname] / 1000 for r in requests
                             if r["op"] == op and r.get(fieldname) is not None and r[fieldname] > 0]
                        for op in ops}
            zeros = sum(1 for r in requests if r.get(fieldname) is not None and r[fieldname] <= 0)
            everything = [v for vs in positive.values() for v in vs]
            ax.set_title(column_of(fieldname), fontsize=9)  # the column the user knows
            if everything:
                lo, hi = min(everything), max(everything)
                lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi) + 1e-9)
                n_bins = 40
                edges = [lo * (hi / lo) ** (i / n_bins) for i in range(n_bins + 1)]
                for op in ops:
                    if positive[op]:
                        colour = OP_COLOURS.get(op, "#777777")
                        ax.hist(positive[op], bins=edges, histtype="stepfilled", alpha=0.45,
                                facecolor=colour, edgecolor=colour, linewidth=0.9, label=op)
                ax.set_xscale("log")
                ax.xaxis.set_major_locator(LogLocator(base=10))
                ax.xaxis.set_major_formatter(FuncFormatter(_seconds))
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_locator(MaxNLocator(4, integer=True))
            if zeros:
                ax.text(0.03, 0.97, f"{zeros:,} at or\nbelow 0 s", transform=ax.transAxes,
                        ha="left", va="top", fontsize=7, color="#666666")
        axes.flat[0].set_ylabel("requests")
        if len(ops) > 1:
            axes.flat[0].legend(loc="upper left")
        fig.supxlabel("seconds (log scale)", fontsize=8.5)
        fig.tight_layout()
        return to_svg(fig, "dists")


# -- 4. over time -------------------------------------------------------------------------

def _slow_lines(ax, mids, mean, peak) -> None:
    ax.fill_between(mids, mean, step="mid", color="#e6550d", alpha=0.25, linewidth=0)
    ax.step(mids, mean, where="mid", color="#e6550d", linewidth=1.4, label="slow: mean")
    ax.step(mids, peak, where="mid", color="#e6550d", linewidth=0.8, linestyle=":",
            label="slow: max")


def timeline(t: dict, zone) -> str:
    """t: edges, rate (status -> per s), fast/slow (means, peaks), slow_pool, queue (means,
    peaks), polls (op -> mean per request), restarts [(ms, daemon)], unparsed [(ms, n)]."""
    edges = t["edges"]
    mids = [moment((a + b) // 2, zone) for a, b in zip(edges, edges[1:])]
    width_days = (edges[1] - edges[0]) / 86_400_000
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(5, 1, figsize=(WIDTH, 9.2), sharex=True,
                                 gridspec_kw={"height_ratios": [1.1, 1.2, 1, 0.9, 0.6]})
        rate, threads, queue, polls, health = axes
        bottom = [0.0] * len(mids)
        for status, values in t["rate"].items():
            rate.bar(mids, values, width=width_days * 0.92, bottom=bottom,
                     color=STATUS_COLOURS[status], label=status, linewidth=0)
            bottom = [a + b for a, b in zip(bottom, values)]
        rate.set_ylabel("requests / s")
        rate.set_title("a. Requests finished per second, by status")
        _legend(rate, 4, "no put/get requests")

        slow_mean, slow_peak = t["slow"]
        fast_mean, fast_peak = t["fast"]
        if any(slow_peak):
            _slow_lines(threads, mids, slow_mean, slow_peak)
        if any(fast_peak):
            threads.step(mids, fast_mean, where="mid", color="#3182bd", linewidth=1.4,
                         label="fast: mean" + ("" if t.get("polls_in_fast") else
                                               " (polls left out)"))
            threads.step(mids, fast_peak, where="mid", color="#3182bd", linewidth=0.8,
                         linestyle=":", label="fast: max")
        if t["ns_busy"] is not None:
            threads.step(mids, t["ns_busy"][0], where="mid", color="#756bb1", linewidth=1.2,
                         label="name server: mean")
        if t["slow_pool"]:
            threads.axhline(t["slow_pool"], color="#e6550d", linewidth=0.8, linestyle="--")
            threads.annotate(f"{t['slow_pool']} slow threads: the most busy at once for 50 ms",
                             xy=(0.005, t["slow_pool"]), xycoords=("axes fraction", "data"),
                             xytext=(0, 3), textcoords="offset points", fontsize=7.5,
                             color="#a63603")
        threads.set_ylabel("threads")
        ns_peak = t["ns_busy"][1] if t["ns_busy"] is not None else []
        threads.set_ylim(bottom=0, top=max([1, *slow_peak, *fast_peak, *ns_peak]) * 1.25)
        threads.set_title("b. Busy threads (a call's first line to its returns)")
        _legend(threads, 3 if t["ns_busy"] is not None else 4, "no calls placed in time")

        q_mean, q_peak = t["queue"]
        if any(q_peak):
            queue.fill_between(mids, q_mean, step="mid", color="#fdae6b", alpha=0.5, linewidth=0)
            queue.step(mids, q_mean, where="mid", color="#e6550d", linewidth=1.2, label="mean")
            queue.step(mids, q_peak, where="mid", color="#a63603", linewidth=0.8, linestyle=":",
                       label="max")
        queue.set_ylabel("requests")
        queue.set_ylim(bottom=0, top=max([1, *q_peak]) * 1.15)
        queue.set_title("c. Slow-queue depth (requests waiting for a slow thread)")
        _legend(queue, 2, "no request waited for a slow thread")

        for op, values in t["polls"].items():
            pts = [(m, v) for m, v in zip(mids, values) if v is not None]
            if pts:
                polls.plot([m for m, _ in pts], [v for _, v in pts], marker="o", markersize=2.5,
                           linewidth=1.2, color=OP_COLOURS.get(op, "#777777"), label=op)
        polls.set_ylabel("polls / request")
        polls.set_ylim(bottom=0)
        polls.set_title("d. Status polls per request (mean, by start time)")
        _legend(polls, 2, "no put/get requests")

        bad_times = [moment(ms, zone) for ms, _ in t["unparsed"]]
        if bad_times:
            health.bar(bad_times, [n for _, n in t["unparsed"]], width=width_days * 0.8,
                       color="#636363", label="unparsed lines")
        health.set_ylabel("lines")
        health.set_ylim(bottom=0, top=max([1, *(n for _, n in t["unparsed"])]) * 1.3)
        health.yaxis.set_major_locator(MaxNLocator(3, integer=True))
        health.set_title("e. Log health: unparsed lines and daemon restarts"
                         + ("" if t["unparsed_known"] else " (line counts: only when reading logs)"))
        for ax in axes:
            for ms, _daemon in t["restarts"]:
                ax.axvline(moment(ms, zone), color=MARK_COLOUR, linewidth=1.0, linestyle="--")
        for ms, daemon in t["restarts"]:
            health.annotate(f"restart {daemon}".strip(), xy=(moment(ms, zone), 1), xycoords=("data", "axes fraction"),
                            xytext=(3, -10), textcoords="offset points", fontsize=7, color=MARK_COLOUR)
        if not bad_times and not t["restarts"]:
            health.text(0.5, 0.5, "no unparsed lines, no restarts", transform=health.transAxes,
                        ha="center", va="center", fontsize=8, color="#31a354")
        health.set_xlim(moment(edges[0], zone), moment(edges[-1], zone))
        _time_axis(health, zone)
        fig.align_ylabels(axes)
        fig.tight_layout(h_pad=0.6)
        return to_svg(fig, "timeline")


# -- 5. the name server -------------------------------------------------------------------

def ns_latency(latency: dict[str, list[int]]) -> str:
    ops = list(latency)[::-1]
    data = [[v / 1000 for v in latency[op]] for op in ops]
    every = sorted(v for vs in data for v in vs)
    low, high = nearest_rank(every, 0.05), nearest_rank(every, 0.95)
    log_axis = high / max(low, 0.0005) > 20   # only where the durations span decades
    if log_axis:
        data = [[max(v, 0.0005) for v in vs] for vs in data]   # 0 ms drawn at 0.5 ms
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(WIDTH, 0.8 + 0.32 * len(ops)))
        ax.boxplot(data, vert=False, whis=(5, 95), showfliers=False, widths=0.6,
                   patch_artist=True, medianprops={"color": "#08306b", "linewidth": 1.4},
                   boxprops={"facecolor": "#c6dbef", "edgecolor": "#4292c6"},
                   whiskerprops={"color": "#4292c6"}, capprops={"color": "#4292c6"})
        ax.set_yticks(range(1, len(ops) + 1), [f"{op} ({len(latency[op]):,})" for op in ops])
        if log_axis:
            ax.set_xscale("log")
            _log_seconds(ax.xaxis)
        else:
            ax.set_xlim(left=0)
        ax.set_xlabel("call duration (s" + (", log scale" if log_axis else "")
                      + "): box 25-75%, line median, whiskers 5-95%")
        ax.set_title("Name-server call latency by op (number of calls)")
        ax.grid(axis="y", visible=False)
        fig.tight_layout()
        return to_svg(fig, "ns")


def hot_directories(rows: list[dict]) -> str:
    """The top directories by name-server time, with their creats' peak concurrency."""
    rows = rows[::-1]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(WIDTH, 0.9 + 0.34 * len(rows)))
        seconds = [float(r["ns_s"] or 0) for r in rows]
        ax.barh(range(len(rows)), seconds, color="#9e9ac8", edgecolor="#54278f")
        ax.set_yticks(range(len(rows)), [_short_path(r["directory"]) for r in rows])
        for i, r in enumerate(rows):
            note = f" {int(r['creats'] or 0):,} creats"
            if r.get("creat_p50_s"):
                note += f", p50 {float(r['creat_p50_s']):.3f} s"
            if int(r.get("peak_creats") or 0) > 1:
                note += f", up to {r['peak_creats']} at once"
            ax.annotate(note, xy=(seconds[i], i), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7.5, color="#3f007d")
        ax.set_xlim(0, max(seconds) * 1.6 if max(seconds) > 0 else 1)
        ax.set_xlabel("name-server time in the directory (s)")
        ax.set_title("Hot directories: name-server time, creats and their peak concurrency")
        ax.grid(axis="y", visible=False)
        fig.tight_layout()
        return to_svg(fig, "dirs")


def _short_path(path: str, width: int = 48) -> str:
    return path if len(path) <= width else "..." + path[-(width - 3):]
