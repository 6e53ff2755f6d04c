"""`dpmstream report` as an admin sees it: the page opened from a file in a real headless
Chromium (Debian's, installed by `make install-system`), compared with what
`dpmstream replay` says about the same logs."""

from __future__ import annotations

import csv
import io
import re

import pytest

from dpmstream.parsers.pipeline import Pipeline
from PIL import Image

from dpmstream.parsers.records import text_to_ms
from dpmstream.report.chromium import Chromium
from tests.helpers import dpmstream

pytestmark = pytest.mark.services  # a headless Chromium started by the test

TZ = "Europe/Zurich"


@pytest.fixture(scope="module")
def thesis(tmp_path_factory):
    """The thesis setup (3 clients x 25 puts, 20 slow threads), shortened, with a daemon
    restart; replayed, and reported from the logs and from the replay's directory."""
    d = tmp_path_factory.mktemp("report")
    prefix = str(d / "t20")
    dpmstream("simulate", "--out", prefix, "--requests", "600", "--restart-at", "6",
              "--quiet")
    logs = [prefix + ".log", prefix + ".dpns.log"]
    replay_out = dpmstream("replay", "--tz", TZ, "--host", "dpmhead01", "--out",
                           str(d / "replay"), *logs)
    dpmstream("report", "--tz", TZ, "--host", "dpmhead01", "--out", str(d / "page.html"), *logs)
    dpmstream("report", "--tz", TZ, "--out", str(d / "from-dir.html"), str(d / "replay"))
    with Chromium() as browser:
        pages = {name: _load(browser, d / f"{name}.html") for name in ("page", "from-dir")}
    with open(d / "replay" / "requests.csv", newline="") as f:
        requests = list(csv.DictReader(f))
    with open(d / "replay" / "calls.csv", newline="") as f:
        calls = list(csv.DictReader(f))
    return {"replay": replay_out, "pages": pages, "requests": requests, "calls": calls,
            "slow_runs": _slow_runs(logs)}


def _slow_runs(logs):
    """Every processing run of the DPM daemon that returned, read from the logs."""
    runs = []
    pipeline = Pipeline(lambda record: None)
    pipeline.reassembler.on_span = lambda host, daemon, pid, tid, kind, a, b: (
        runs.append((a, b)) if daemon == "dpm" and kind == "proc" else None)
    for path in logs:
        src = pipeline.source(path, host="dpmhead01", path=path, tz=TZ)
        with open(path, "rb") as f:
            src.feed_lines(f)
    pipeline.finish()
    return runs


# Every text drawn in each figure's SVG, with the box the browser laid it out in, and the
# SVG's own box (both in page pixels): what a reader sees, not what the file says.
FIGURE_TEXTS = """
[...document.querySelectorAll('figure')].map(f => {
  const svg = f.querySelector('svg'), box = svg.getBoundingClientRect();
  return {id: f.id, box: [box.left, box.top, box.right, box.bottom],
          texts: [...svg.querySelectorAll('text')].map(t => {
            const r = t.getBoundingClientRect();
            return {text: t.textContent, box: [r.left, r.top, r.right, r.bottom]};
          })};
})"""

# What each figure must say for a reader to read it alone: panel titles, axis labels with
# their units, legend entries, and the date with the zone's abbreviation under time axes.
FIGURE_LABELS = {
    "fig-phases": ["Share of the request's time", "Seconds per request (mean)", "% of total_s",
                   "seconds", "put", "waiting for a slow thread", "status polls (overlap the wait)"],
    "fig-scatter": ["request duration total_s (s)", "2011-Aug-12 CEST"],
    "fig-dists": ["auth_s", "queue_s", "ready_wait_s", "requests", "seconds (log scale)",
                  "0.001", "0.01", "0.1"],
    "fig-timeline": ["a. Requests finished per second, by status", "requests / s", "success",
                     "b. Busy threads (a call's first line to its returns)", "slow: mean",
                     "slow: max", "fast: max", "name server: mean", "threads",
                     "20 slow threads: the most busy at once for 50 ms",
                     "c. Slow-queue depth (requests waiting for a slow thread)",
                     "d. Status polls per request (mean, by start time)", "polls / request",
                     "e. Log health: unparsed lines and daemon restarts", "restart dpm",
                     "2011-Aug-12 CEST"],
    "fig-ns": ["Name-server call latency by op (number of calls)"],
    "fig-dirs": ["name-server time in the directory (s)"],
}


def _load(browser, path):
    page = browser.open(path.as_uri(), width=1200)
    return {
        "url": path.as_uri(),
        "errors": page.console_errors,
        "requests": page.requests,
        "png": page.screenshot(),
        "pdf": page.pdf(),
        "figures": page.evaluate(
            "[...document.querySelectorAll('figure')].map(f => { const r ="
            " f.querySelector('svg').getBoundingClientRect(); return {id: f.id, x: r.x,"
            " y: r.y + window.scrollY, w: r.width, h: r.height}; })"),
        "figure_texts": page.evaluate(FIGURE_TEXTS),
        "summary": page.evaluate("document.getElementById('summary').innerText"),
        "header": page.evaluate("document.querySelector('header').innerText"),
        "numbers": page.evaluate("document.getElementById('numbers').innerText"),
        "phase_rows": page.evaluate(
            "[...document.querySelectorAll('#phases-table tr')].slice(1)"
            ".map(r => [...r.cells].map(c => c.innerText))"),
    }


def test_the_page_logs_no_console_error_and_fetches_nothing(thesis):
    for page in thesis["pages"].values():
        assert page["errors"] == []
        # The page itself, and images a figure carries inline (data: URLs), nothing else.
        others = [u for u in page["requests"] if u != page["url"] and not u.startswith("data:")]
        assert others == []
        assert page["requests"][0] == page["url"]


def test_every_figure_has_drawn_pixels_inside_its_box(thesis):
    page = thesis["pages"]["page"]
    ids = [f["id"] for f in page["figures"]]
    assert ids == ["fig-phases", "fig-scatter", "fig-dists", "fig-timeline", "fig-ns", "fig-dirs"]
    shot = Image.open(io.BytesIO(page["png"])).convert("RGB")
    for fig in page["figures"]:
        box = (round(fig["x"]), round(fig["y"]), round(fig["x"] + fig["w"]), round(fig["y"] + fig["h"]))
        assert fig["w"] > 300 and fig["h"] > 60, fig
        raw = shot.crop(box).tobytes()
        pixels = list(zip(raw[0::3], raw[1::3], raw[2::3]))
        inked = sum(1 for p in pixels if min(p) < 200)
        coloured = {p for p in pixels if max(p) - min(p) > 60}   # not grey: the data, not the axes
        assert inked > 0.02 * len(pixels), (fig["id"], inked, len(pixels))
        assert len(coloured) > 20, (fig["id"], len(coloured))


def test_every_figure_draws_its_titles_axes_and_legends_as_text_inside_it(thesis):
    for page in thesis["pages"].values():
        for fig in page["figure_texts"]:
            drawn = [t for t in fig["texts"] if t["box"][2] - t["box"][0] > 1
                     and t["box"][3] - t["box"][1] > 4]
            assert len(drawn) == len(fig["texts"]) >= 8, fig["id"]
            left, top, right, bottom = fig["box"]
            for t in drawn:   # nothing cut off at the figure's edges
                x0, y0, x1, y1 = t["box"]
                assert left - 0.5 <= x0 and x1 <= right + 0.5, (fig["id"], t)
                assert top - 0.5 <= y0 and y1 <= bottom + 0.5, (fig["id"], t)
            texts = [t["text"] for t in drawn]
            for label in FIGURE_LABELS[fig["id"]]:   # a title may say more (from-dir's)
                assert any(t.startswith(label) for t in texts), (fig["id"], label, texts)


def test_no_two_labels_of_a_figure_overlap(thesis):
    """Legends, tick labels and titles are laid out from estimated text widths: the
    browser's own layout shows that none runs into another."""
    for fig in thesis["pages"]["page"]["figure_texts"]:
        boxes = [t for t in fig["texts"] if t["text"].strip()]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                w = min(a["box"][2], b["box"][2]) - max(a["box"][0], b["box"][0])
                h = min(a["box"][3], b["box"][3]) - max(a["box"][1], b["box"][1])
                assert w <= 1 or h <= 1, (fig["id"], a, b)


def test_the_page_prints(thesis):
    pdf = thesis["pages"]["page"]["pdf"]
    assert pdf.startswith(b"%PDF") and len(pdf) > 50_000


def test_the_counts_and_medians_in_the_summary_are_the_replays(thesis):
    summary = thesis["pages"]["page"]["summary"]
    replay = thesis["replay"]
    put_row = re.search(r"^\s+put\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", replay, re.M)
    total, success, failed, aborted, incomplete = map(int, put_row.groups())
    assert f"{total:,} requests ({total:,} puts)" in summary
    assert f"{success:,} succeeded" in summary
    for n, word in ((failed, "failed"), (aborted, "aborted"), (incomplete, "incomplete")):
        assert (f"{n:,} {word}" in summary) == (n > 0)
    median = re.search(r"^\s+put\s+total\s+\d+\s+([\d.]+)", replay, re.M).group(1)
    assert f"(median put {median} s)" in summary


def test_the_share_of_the_largest_phase_is_the_replays(thesis):
    rows = [r for r in thesis["requests"] if r["op"] == "put"]
    total = sum(text_to_ms(r["total_s"]) for r in rows if r["total_s"])
    queue = sum(text_to_ms(r["queue_s"]) for r in rows if r["queue_s"])
    summary = thesis["pages"]["page"]["summary"]
    assert f"Waiting for a slow thread is {round(100 * queue / total)}% of a put's time" in summary
    table = re.search(r"^\s+put\s+queue\s+.*\s([\d.]+)%$", thesis["replay"], re.M).group(1)
    assert abs(float(table) - 100 * queue / total) < 0.05


def test_the_slow_thread_sentence_is_derived_from_the_log(thesis):
    """Recomputed here from the log's own processing runs (first line to returns, as the
    reassembler sees them) and the replay's records for the time span; the pool is the
    most busy at once for 50 ms or more."""
    edges = []
    starts, ends = [], []
    for r in thesis["requests"]:
        t = [text_to_ms(r[k]) for k in ("accepted", "started", "ended")]
        starts.append(t[0] if t[0] is not None else t[1])
        ends.append(t[2])
    for a, b in thesis["slow_runs"]:
        edges += [(a, 1), (b, -1)]
    for c in thesis["calls"]:
        starts.append(text_to_ms(c["started"]))
        ends.append(text_to_ms(c["ended"]) if c["ended"] else None)
    t0, t1 = min(t for t in starts if t is not None), max(t for t in ends if t is not None)
    level, busy_at = 0, []
    for t, step in sorted(edges):
        level += step
        busy_at.append((t, level))
    held: dict = {}  # level -> longest stretch at or above it
    for i, (t, lv) in enumerate(busy_at):
        j = i
        while j + 1 < len(busy_at) and busy_at[j + 1][1] >= lv:
            j += 1
        if j + 1 < len(busy_at):
            held[lv] = max(held.get(lv, 0), busy_at[j + 1][0] - t)
    peak = max(lv for lv, ms in held.items() if ms >= 50)
    full = sum(b[0] - a[0] for a, b in zip(busy_at, busy_at[1:]) if a[1] >= peak)
    summary = thesis["pages"]["page"]["summary"]
    assert peak == 20
    assert f"All 20 slow threads were busy {round(100 * full / (t1 - t0))}% of the time" in summary


def test_the_page_states_one_range_the_replays_and_its_table_name_too(thesis):
    records_from = re.search(r"^Records from (.*)$", thesis["replay"], re.M).group(1)
    assert records_from.endswith(" CEST")
    page = thesis["pages"]["page"]
    assert f"Every figure covers the data's span: {records_from} (" in page["header"]
    assert f"The records that start in {records_from}, the page's range." in page["numbers"]


def test_the_numbers_table_is_the_replay_summary(thesis):
    replay_rows = re.findall(r"^\s+(put|get)\s+(auth|request|queue|proc|poll|ready_wait|transfer"
                             r"|done|total)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                             r"\s+([\d.]+%)$", thesis["replay"], re.M)
    assert len(replay_rows) >= 8
    assert [tuple(r) for r in thesis["pages"]["page"]["phase_rows"]] == replay_rows


def test_a_replay_directory_gives_the_same_summary_as_the_logs_but_for_busy_threads(thesis):
    """Records place slow-thread runs only to within a clamped queue time; the logs give
    each run's own first line, so only the busy-thread sentence may differ."""
    def sentences(summary):
        return [s for s in re.split(r"(?<=\.)\s+|\n+", summary)
                if s.strip() and "busy" not in s]
    pages = thesis["pages"]
    assert sentences(pages["from-dir"]["summary"]) == sentences(pages["page"]["summary"])
    assert len(sentences(pages["page"]["summary"])) >= 3


def test_the_browser_checks_would_see_a_fetch_and_a_console_error(tmp_path):
    """The checks above can fail: a page that loads an image from a server and logs an
    error shows both (port 9 on 127.0.0.1: nothing leaves the machine)."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   '<script>console.error("boom")</script></body></html>')
    with Chromium() as browser:
        page = browser.open(bad.as_uri())
        requests, errors = page.requests, page.console_errors
    assert "http://127.0.0.1:9/x.png" in requests
    assert "boom" in errors
