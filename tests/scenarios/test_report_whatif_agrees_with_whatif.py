"""`dpmstream report`'s what-if section (report/whatif.py) answers for doubled slow threads
what `dpmstream whatif` answers, end to end through both commands (run by their entry
point's function in this process: what they write is what is tested, not their process)."""

import csv
import re

import pytest

from tests.helpers import dpmstream_in_process

TZ = "Europe/Zurich"


def dpmstream(*args: str) -> None:
    """`dpmstream ARGS`, which must succeed."""
    done = dpmstream_in_process(*args, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def thesis(tmp_path_factory):
    d = tmp_path_factory.mktemp("whatif-report")
    prefix = str(d / "t20")
    dpmstream("simulate", "--out", prefix, "--requests", "800", "--quiet")
    return d, [prefix + ".log", prefix + ".dpns.log"]


def table_of(html: str) -> dict:
    section = html[html.index('<section id="whatif">'):]
    section = section[:section.index("</section>")]
    rows = re.findall(r'<tr><td class="l">(\w+)</td><td class="l">(\w+)</td>'
                      r"<td>([\d.]+)</td><td>([\d.]+)</td></tr>", section)
    return {(op, phase): (float(now), float(then)) for op, phase, now, then in rows}


def test_the_report_answers_what_doubled_slow_threads_would_do_as_whatif_does(thesis):
    d, logs = thesis
    dpmstream("report", "--tz", TZ, "--host", "dpmhead01", "--out", str(d / "page.html"), *logs)
    html = (d / "page.html").read_text()
    table = table_of(html)
    now_threads, then_threads = map(int, re.search(
        r"run with (\d+) slow threads .* and with (\d+)", html).groups())
    assert then_threads == 2 * now_threads and now_threads > 0
    assert {phase for _, phase in table} == {"queue", "proc", "ready_wait", "total"}

    dpmstream("whatif", "--tz", TZ, "--host", "dpmhead01", "--sthreads", str(then_threads),
              "--seeds", "2", "--model-requests", "1000", "--out", str(d / "whatif"), *logs)
    with open(d / "whatif" / "prediction.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for (op, phase), (now, then) in table.items():
        cur = next(r for r in rows if (r["scenario"], r["op"], r["phase"]) == ("current", op, phase))
        new = next(r for r in rows if (r["scenario"], r["op"], r["phase"]) == ("whatif", op, phase))
        assert (round(float(cur["p50"]), 3), round(float(new["p50"]), 3)) == (now, then)
    # The thesis setup waits for its 20 slow threads: twice as many cut the wait.
    queue_now, queue_then = table[("put", "queue")]
    assert queue_then < queue_now / 2


def test_no_whatif_leaves_the_section_out(thesis):
    d, logs = thesis
    dpmstream("report", "--no-whatif", "--tz", TZ, "--host", "dpmhead01",
              "--out", str(d / "plain.html"), *logs)
    assert 'id="whatif"' not in (d / "plain.html").read_text()
