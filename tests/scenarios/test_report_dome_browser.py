"""`dpmstream report` on a simulated DOME site's logs, as an admin sees it: the page
opened from a file in a real headless Chromium (as test_report_browser.py does for the
legacy daemons), its DOME section's numbers those of the simulator's truth, and the
section saying when durations are whole-second rounded."""

from __future__ import annotations

import csv
from collections import Counter

import pytest

from dpmstream.report.chromium import Chromium
from tests.helpers import dpmstream

pytestmark = pytest.mark.services  # a headless Chromium started by the test

TZ = "Europe/Zurich"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The same site written with rsyslog's traditional stamps (whole seconds) and with
    RFC 3339 ones, reported from its nodes' logs."""
    d = tmp_path_factory.mktemp("dome-report")
    out = {}
    with Chromium() as browser:
        for stamp in ("traditional", "rfc3339"):
            prefix = d / stamp / "site"
            prefix.parent.mkdir()
            dpmstream("simulate", "--dome", "--out", str(prefix), "--stamp", stamp,
                      "--duration", "400", "--rate", "3", "--disk-down-at", "150",
                      "--disk-down-s", "120", "--quiet")
            logs = sorted(str(p) for p in prefix.parent.glob("site.*.log"))
            # the simulated site's request timeout (120 s), as its truth applies it
            settings = ("--tz", TZ, "--year", "2017", "--request-timeout", "120")
            printed = dpmstream("report", *settings, "--out", str(d / f"{stamp}.html"), *logs)
            dpmstream("replay", *settings, "--quiet", "--out", str(d / stamp / "replay"), *logs)
            dpmstream("report", "--tz", TZ, "--out", str(d / f"{stamp}-dir.html"),
                      str(d / stamp / "replay"))
            from_dir = browser.open((d / f"{stamp}-dir.html").as_uri(), width=1200)
            page = browser.open((d / f"{stamp}.html").as_uri(), width=1200)
            out[stamp] = {
                "url": (d / f"{stamp}.html").as_uri(), "printed": printed,
                "errors": page.console_errors, "requests": page.requests, "pdf": page.pdf(),
                "summary": page.evaluate("document.getElementById('summary').innerText"),
                "dome": page.evaluate("(() => { const s = document.getElementById('dome');"
                                      " const r = s.getBoundingClientRect();"
                                      " return {text: s.innerText, h: r.height, w: r.width}; })()"),
                "whole": page.evaluate("(() => { const n = document.getElementById("
                                       "'dome-whole-seconds'); return n ? n.innerText : null; })()"),
                "dir_dome": from_dir.evaluate("document.getElementById('dome').innerText"),
                "tables": {t: page.evaluate(
                    f"[...document.querySelectorAll('#{t} tr')].map(r => [...r.cells]"
                    ".map(c => c.innerText))")
                    for t in ("dome-calls-table", "dome-puts-table", "dome-fs-table",
                              "dome-fs-events-table")},
                # the checksum waits are not the truth's row for row (overlaps):
                # test_dome_checksums_truth compares them; here, those replay wrote
                "checksums": _rows(d / stamp / "replay" / "dome-checksums.csv"),
                "truth": {name: _rows(f"{prefix}.{name}.csv")
                          for name in ("calls", "puts", "capacity", "fs_events")},
            }
    return out


def _rows(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


STAMPS = ("traditional", "rfc3339")


def _command(call: dict) -> tuple[str, str]:
    """A truth call's (role, command) as the page names them: "?" for one not known (a
    call cut before its req: line)."""
    return call["role"] or "?", call["command"] or "?"


@pytest.mark.parametrize("stamp", STAMPS)
def test_the_page_logs_no_console_error_fetches_nothing_and_prints(pages, stamp):
    page = pages[stamp]
    assert page["errors"] == []
    assert [u for u in page["requests"] if u != page["url"] and not u.startswith("data:")] == []
    assert page["pdf"].startswith(b"%PDF")
    assert page["dome"]["h"] > 300 and page["dome"]["w"] > 600  # laid out, not hidden


@pytest.mark.parametrize("stamp", STAMPS)
def test_the_calls_table_is_the_truths_calls_per_command(pages, stamp):
    page = pages[stamp]
    header, *rows = page["tables"]["dome-calls-table"]
    assert header[:3] == ["role", "command", "calls"]
    got = {(r[0], r[1]): int(r[2].replace(",", "")) for r in rows}
    want = Counter(_command(c) for c in page["truth"]["calls"])
    assert got == dict(want) and sum(want.values()) > 1000
    cut = header.index("none")  # a cut call: no code
    cuts = Counter(_command(c) for c in page["truth"]["calls"] if c["cut"] == "1")
    assert {(r[0], r[1]): int(r[cut].replace(",", "")) for r in rows} == \
        {key: cuts.get(key, 0) for key in got}


@pytest.mark.parametrize("stamp", STAMPS)
def test_the_puts_and_filesystems_are_the_truths(pages, stamp):
    page = pages[stamp]
    header, row = page["tables"]["dome-puts-table"]
    statuses = Counter(p["status"] for p in page["truth"]["puts"])
    for status in ("success", "failed", "incomplete"):
        assert int(row[header.index(status)].replace(",", "")) == statuses[status]
    filesystems = {(c["host"], c["fs"]) for c in page["truth"]["capacity"]}
    assert len(page["tables"]["dome-fs-table"]) == 1 + len(filesystems)
    changes = [e for e in page["truth"]["fs_events"] if e["transition"] == "1"]
    assert len(page["tables"]["dome-fs-events-table"]) == 1 + len(changes) > 1


def test_whole_second_stamps_are_said_and_their_call_durations_left_out(pages):
    whole, fine = pages["traditional"], pages["rfc3339"]
    assert "whole-second rounded" in whole["whole"]
    calls, puts = len(whole["truth"]["calls"]), len(whole["truth"]["puts"])
    assert f"{calls:,} of {calls:,} calls, {puts:,} of {puts:,} puts" in whole["whole"]
    header, *rows = whole["tables"]["dome-calls-table"]
    p95 = header.index("p95 (s)")
    assert all(r[p95] == "" for r in rows)  # no latency from whole seconds
    # put to putdone: whole seconds from whole-second stamps, milliseconds from fine ones
    for page, decimals in ((whole, False), (fine, True)):
        header, row = page["tables"]["dome-puts-table"]
        cell = row[header.index("put to putdone p50 (s)")]
        assert cell and ("." in cell) == decimals, cell
    assert fine["whole"] is None
    header, *rows = fine["tables"]["dome-calls-table"]
    assert all(r[header.index("p95 (s)")] for r in rows if int(r[2].replace(",", "")) >
               int(r[header.index("none")].replace(",", "")))


@pytest.mark.parametrize("stamp", STAMPS)
def test_a_replay_directory_gives_the_same_dome_section_as_the_logs(pages, stamp):
    page = pages[stamp]
    records = sum(len(rows) for rows in page["truth"].values()) + len(page["checksums"])
    assert page["checksums"] and f"{records:,} DOME records" in page["printed"]
    assert page["dir_dome"] == page["dome"]["text"]
