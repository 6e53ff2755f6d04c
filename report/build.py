"""From a Dataset (report/sources.py) to the page: the story, the figures, the gaps."""

from __future__ import annotations

import bisect

from dpmstream.report import analysis as A
from dpmstream.report import figures as F
from dpmstream.report.dome_analysis import dome_numbers, time_of
from dpmstream.report.dome_page import dome_section, dome_summary
from dpmstream.report.page import Figure, numbers_table, render, whatif_section
from dpmstream.report.story import pct, span_text, tell
from dpmstream.streams.sinks.summary import moment_text, time_range_text


def build_page(data) -> tuple[str, object]:
    """The HTML text and the story told in it (None when the window holds no record)."""
    story = tell(data)
    requests, calls, zone = data.requests, data.calls, data.zone
    dome = dome_numbers(data.dome)
    dome_html = dome_section(dome, zone)
    hosts = sorted({r["host"] for r in requests} | {c["host"] for c in calls}
                   | {r.get("host") or r.get("head") for r in data.dome} - {None})
    title = f"Where {', '.join(hosts) if hosts else 'the head node'} spends its time"
    meta = [f"From {data.origin}: {', '.join(data.inputs)}"]
    windowed = data.since is not None or data.until is not None
    if data.dome:
        times = [t for t in map(time_of, data.dome) if t is not None]
        meta.append(f"DOME records from {time_range_text(min(times), max(times), zone)} "
                    "(each at its start, put time, or line).")
    if story is not None:
        within = " within the window" if windowed else ""
        meta.append(f"Every figure covers the data's span{within}: "
                    f"{time_range_text(story.t0, story.t1, zone)} (the first record's start to "
                    "the last record's end); shares of time are of that span.")
    if windowed:
        meta.append("Window asked for: " + " to ".join(
            moment_text(t, zone) if t is not None else "open"
            for t in (data.since, data.until)))
    if story is None:
        summary = [dome_summary(dome)] if dome_html else ["No records in this window."]
        return render(title=title, meta=meta, summary=summary, observations=[], figures=[],
                      numbers_html="", gaps=[], dome_html=dome_html), None

    has_ns = any(r.get("ns_ms") for r in requests)
    figures: list[Figure] = []
    if requests:
        figures.append(Figure(
            "fig-phases", "Where a request's time goes, per op.",
            "Each bar cuts the requests' total time (accept to end) into the steps in the "
            "order they happen; \"after processing: until the client's next poll\" is the "
            "time from the end of processing to the status call that reports SUCCESS. The "
            "record's ready_wait in the table is longer: from the put/get's reply to that "
            "status call, it holds the queue and the processing too. The hatched bar is the "
            "time spent in status polls, which overlap the wait.",
            F.phase_breakdown(story.breakdowns, has_ns)))
        figures.append(Figure(
            "fig-scatter", "Request duration against start time, by client host.",
            "One point per request (the 2011 thesis's Figure 1).",
            F.duration_scatter(requests, zone)))
        figures.append(Figure(
            "fig-dists", "The distribution of each phase.",
            "Histograms on logarithmic bins; durations of 0 s or less are counted in the corner.",
            F.phase_distributions(requests)))
    latency = story.ns_latency
    timeline = _timeline(data, story, latency)
    figures.append(Figure(
        "fig-timeline", f"Over time, between {span_text(story.t0, story.t1, zone)}.",
        "Dashed vertical lines: daemon restarts. Busy threads and queue depth are time-weighted "
        "means per interval, dotted lines the maxima.", F.timeline(timeline, zone)))
    if latency:
        figures.append(Figure("fig-ns", "Name-server call latency by op.",
                              "The busiest name-server ops, from the DPNS log's call records.",
                              F.ns_latency(latency)))
    if data.directories:
        figures.append(Figure(
            "fig-dirs", "Hot directories.",
            "The directories where the name server spent most time (creats wait on their "
            "parent directory's lock: many at once means they queued); directories.csv has "
            "the numbers.", F.hot_directories(data.directories)))
    html = render(title=title, meta=meta, summary=story.summary, observations=story.observations,
                  figures=figures,
                  numbers_html=numbers_table(data.summary, data, zone, (story.t0, story.t1)),
                  whatif_html=whatif_section(data.whatif), dome_html=dome_html,
                  gaps=_gaps(data, has_ns, bool(latency), timeline))
    return html, story


def _timeline(data, story, latency) -> dict:
    requests, calls = data.requests, data.calls
    edges = A.bin_edges(story.t0, story.t1)
    spans = data.spans  # from the log itself; a replay directory holds only records
    fast = spans["fast"] if spans else A.busy(A.fast_calls(requests, calls))
    ns = None  # the name-server busy steps are drawn only with the calls' latency
    if latency:
        ns = spans["ns"] if spans else A.busy(A.ns_calls(calls))
    restarts = data.restarts if data.lines is not None else A.restarts_from_calls(calls)
    return {
        "edges": edges,
        "rate": A.rate_by_status(requests, edges),
        "slow": story.slow.binned(edges),
        "fast": fast.steps.binned(edges),
        "ns_busy": ns.steps.binned(edges) if latency else None,
        "slow_pool": story.slow_pool,
        "queue": story.queue.binned(edges),
        "polls": A.polls_by_bin(requests, edges),
        "restarts": [(t, d) for t, d in restarts if edges[0] <= t <= edges[-1]],
        "unparsed": _per_bin(data.unparsed, edges),
        "unparsed_known": data.lines is not None,
        "fast_ms": fast.ms,
        "polls_in_fast": bool(spans),   # the log's own calls include every status poll
        "poll_ms": 0 if spans else sum(r.get("poll_ms") or 0 for r in requests),
    }


def _per_bin(marks, edges) -> list[tuple[int, int]]:
    """(bin middle, summed count) for the bins holding marks: one bar per bin."""
    counts = [0] * (len(edges) - 1)
    for t, n in marks:
        k = bisect.bisect_right(edges, t) - 1
        if 0 <= k < len(counts):
            counts[k] += n
    return [((a + b) // 2, n) for a, b, n in zip(edges, edges[1:], counts) if n]


def _gaps(data, has_ns: bool, has_ns_calls: bool, timeline: dict) -> list[str]:
    gaps = []
    if timeline["poll_ms"]:
        share = timeline["poll_ms"] / (timeline["poll_ms"] + timeline["fast_ms"])
        gaps.append("Busy fast threads leave out status polls: a request record holds their "
                    "number and summed time, not when each ran. Polls were "
                    f"{pct(share)} of the fast threads' busy time.")
    gaps.append("The slow-thread pool size (NB_STHREADS) is not in the log: the report takes "
                f"the most slow threads busy at once for {A.SUSTAINED_MS} ms or more.")
    if not has_ns:
        gaps.append("Processing is not split into name-server time and the rest: these request "
                    "records carry no ns_s column (it needs the DPNS log, and records that "
                    "link a slow thread's name-server calls to its request).")
    if not has_ns_calls:
        gaps.append("No name-server calls in the records: give the DPNS log too to see their "
                    "latency.")
    if not data.directories:
        gaps.append("Hot directories cannot be shown: no name-server call with its path (give "
                    "the DPNS log, or a replay directory with directories.csv).")
    if data.lines is None:
        gaps.append("A replay's output directory holds no line counts, so unparsed lines are not "
                    "marked; daemon restarts are taken from new pids in the call records.")
    return gaps
