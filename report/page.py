"""The report as one self-contained HTML page: inline CSS and SVG, no script, no fetch.

Everything in it is escaped text or the figures' SVG (report/svg.py); links are only to anchors in the
page, so it opens from a file, off-line, and prints (figures never split across pages).
"""

from __future__ import annotations

from datetime import datetime, timezone

from dpmstream import __version__
from dpmstream.parsers.records import PHASES, STATUSES, ms_to_text
from dpmstream.report.svg import escape
from dpmstream.streams.sinks.summary import QUANTILES, time_range_text


class Figure:
    """One figure of the page: its anchor, words and SVG."""

    # A plain class, not a dataclass: every report imports it, and a dataclass compiles
    # its generated methods as its module is imported (issue 30).
    __slots__ = ("id", "title", "caption", "svg")

    def __init__(self, id: str, title: str, caption: str, svg: str):   # noqa: A002
        self.id, self.title, self.caption, self.svg = id, title, caption, svg


CSS = """
:root { --ink: #222; --muted: #666; --rule: #ddd; --accent: #a63603; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
       font: 15px/1.5 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1060px; margin: 0 auto; padding: 28px 32px 48px; }
header { border-bottom: 3px solid var(--accent); padding-bottom: 10px; margin-bottom: 18px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid var(--rule); padding-bottom: 3px; }
.meta { color: var(--muted); font-size: 13px; margin: 0; }
#summary p { font-size: 16.5px; margin: 0 0 6px; }
#summary { background: #fff5eb; border-left: 5px solid var(--accent); padding: 12px 18px; }
#summary h2 { border: 0; margin-top: 0; }
ol.observations li { margin: 0 0 6px; }
a { color: #08519c; }
figure { margin: 22px 0 30px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 13.5px; color: #333; margin: 0 0 6px; }
figcaption b { color: var(--ink); }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 2px 9px; border-bottom: 1px solid #eee; text-align: right; }
th { border-bottom: 1px solid #999; font-weight: 600; }
td.l, th.l { text-align: left; }
.note { color: var(--muted); font-size: 13px; }
ul.gaps li { margin-bottom: 4px; }
@media print {
  body { font-size: 11pt; }
  main { max-width: none; padding: 0; }
  #summary { background: none; }
  a { color: inherit; text-decoration: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
}
@page { size: A4; margin: 14mm; }
"""


def render(*, title: str, meta: list[str], summary: list[str], observations: list,
           figures: list[Figure], numbers_html: str, gaps: list[str],
           whatif_html: str = "", dome_html: str = "") -> str:
    number = {f.id: i for i, f in enumerate(figures, start=1)}
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>",
           f"<header><h1>{escape(title)}</h1>"]
    out += [f'<p class="meta">{escape(line)}</p>' for line in meta]
    out.append("</header>")
    out.append('<section id="summary"><h2>Summary</h2>')
    out += [f"<p>{escape(s)}</p>" for s in summary]
    out.append("</section>")
    if observations:
        out.append('<section id="top-observations"><h2>Top observations</h2><ol class="observations">')
        for o in observations:
            ref = (f' (<a href="#{o.figure}">Figure {number[o.figure]}</a>)'
                   if o.figure in number else "")
            out.append(f"<li>{escape(o.text)}{ref}</li>")
        out.append("</ol></section>")
    out.append(whatif_html)
    if figures:
        out.append('<section id="figures"><h2>Figures</h2>')
        for f in figures:
            out.append(f'<figure id="{f.id}"><figcaption><b>Figure {number[f.id]}. '
                       f"{escape(f.title)}</b> {escape(f.caption)}</figcaption>{f.svg}</figure>")
        out.append("</section>")
    if numbers_html:
        out.append(f'<section id="numbers"><h2>The numbers</h2>{numbers_html}</section>')
    out.append(dome_html)
    if gaps:
        out.append('<section id="gaps"><h2>What these records cannot show</h2><ul class="gaps">')
        out += [f"<li>{escape(g)}</li>" for g in gaps]
        out.append("</ul></section>")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out.append(f'<p class="note">Made by dpmstream {escape(__version__)} report on {stamp}. '
               "Times are the log's own event times.</p>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def numbers_table(summary, data, zone, span: tuple[int, int]) -> str:
    """The replay's summary (streams/sinks/summary.py) as tables: the same numbers, of the
    records that start in the page's one range `span`."""
    ops = sorted({op for op, _ in summary.statuses})
    out = [f'<p class="note">The records that start in {escape(time_range_text(*span, zone))}'
           ", the page's range.</p>"]
    if ops:
        out.append('<table id="requests-table"><tr><th class="l">op</th><th>total</th>'
                   + "".join(f"<th>{s}</th>" for s in STATUSES) + "</tr>")
        for op in ops:
            counts = [summary.statuses[(op, s)] for s in STATUSES]
            out.append(f'<tr><td class="l">{escape(op)}</td><td>{sum(counts)}</td>'
                       + "".join(f"<td>{c}</td>" for c in counts) + "</tr>")
        out.append("</table>")
        out.append('<table id="phases-table"><tr><th class="l">op</th><th class="l">phase</th>'
                   "<th>count</th>" + "".join(f"<th>p{round(q * 100)} (s)</th>" for q in QUANTILES)
                   + "<th>max (s)</th><th>share</th></tr>")
        for op in ops:
            for _, phase in PHASES:
                s = summary.phases.get((op, phase))
                if not s:
                    continue
                share = summary.share(op, phase)
                out.append(f'<tr><td class="l">{escape(op)}</td><td class="l">{phase}</td>'
                           f"<td>{s.count}</td>"
                           + "".join(f"<td>{ms_to_text(q)}</td>" for q in s.quantiles(QUANTILES))
                           + f"<td>{ms_to_text(s.max)}</td>"
                           + f"<td>{'' if share is None else f'{share * 100:.1f}%'}</td></tr>")
        out.append("</table>")
        out.append('<p class="note">share: the phase\'s summed time over the op\'s summed '
                   "total time, as in <code>dpmstream replay</code>: one denominator for every "
                   "phase. ready_wait is the record's: from the put/get's reply to the status "
                   "call answering SUCCESS. The shares add up past 100% because phases overlap: "
                   "queue, proc and the wait after processing (Figure 1) make up ready_wait, "
                   "and poll falls within it. auth, request, ready_wait, transfer and done do "
                   "not overlap; what they leave of 100% is time between steps.</p>")
    if data.lines is not None:
        lines = ", ".join(f"{k} {v:,}" for k, v in data.lines.items())
        out.append(f'<p class="note" id="lines">Lines read (all of the input): {escape(lines)}; '
                   f"daemon restarts {data.restarts_total}.</p>")
    return "\n".join(out)


def whatif_section(answer) -> str:
    """The what-if answer for doubled slow threads (report/whatif.py), or "" without one."""
    if answer is None:
        return ""
    out = ['<section id="whatif"><h2>What if the slow threads were doubled?</h2>']
    if answer.reason:
        out.append(f"<p>No answer: {escape(answer.reason)}.</p></section>")
        return "\n".join(out)
    out.append(f"<p>The simulator, calibrated on these records, run with {answer.sthreads_now} "
               f"slow threads (the most seen busy) and with {answer.sthreads_then}: medians "
               "in seconds, as <code>dpmstream whatif --sthreads "
               f"{answer.sthreads_then}</code> gives them.</p>")
    out.append('<table id="whatif-table"><tr><th class="l">op</th><th class="l">phase</th>'
               f"<th>now</th><th>{answer.sthreads_then} slow threads</th></tr>")
    for op, phase, now, then in answer.rows:
        out.append(f'<tr><td class="l">{escape(op)}</td><td class="l">{escape(phase)}</td>'
                   f"<td>{now:.3f}</td><td>{then:.3f}</td></tr>")
    out.append("</table>")
    if answer.fits:
        out.append('<p class="note">The model at the current settings reproduces the observed '
                   "median of every phase within 10%.</p>")
    else:
        out.append('<p class="note">Warning: the model does not reproduce this log well ('
                   f"{escape(', '.join(answer.misses) or 'too few requests to check')}); "
                   "take the answer as a direction only.</p>")
    out.append("</section>")
    return "\n".join(out)
