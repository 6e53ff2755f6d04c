"""The report's DOME section (report/dome_analysis.py's numbers) as HTML: escaped text
and tables, no script, as the rest of the page (report/page.py)."""

from __future__ import annotations

from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.parsers.records import ms_to_text
from dpmstream.report.dome_analysis import (
    CODE_CLASSES, MAX_EVENTS, PUT_STATUSES, QUANTILES, DomeNumbers,
)
from dpmstream.report.svg import escape
from dpmstream.streams.sinks.summary import moment_text

WHOLE_SECONDS = ("Durations are whole-second rounded: {what} built on log stamps without a "
                 "fraction of a second (rsyslog's traditional format, docs/dome.md section 3). "
                 "A DOME call takes milliseconds, so its duration from such stamps is 0 or 1 s "
                 "and says nothing of its latency: {left}. Put-to-putdone times are good to "
                 "a second. dmlite.log written with RSYSLOG_FileFormat gives microseconds.")


def dome_section(n: DomeNumbers, zone) -> str:
    """The section, or "" when the window holds no DOME record."""
    if n.empty:
        return ""
    out = ['<section id="dome"><h2>DOME</h2>']
    whole = n.whole_second_calls + n.whole_second_puts
    if whole:
        what = ", ".join(part for part in (
            f"{n.whole_second_calls:,} of {n.calls:,} calls" if n.whole_second_calls else "",
            f"{n.whole_second_puts:,} of {n.puts:,} puts" if n.whole_second_puts else "") if part)
        left = ("their call durations are left out of the quantiles below"
                if n.whole_second_calls else "no call is affected")
        out.append(f'<p class="note" id="dome-whole-seconds"><b>'
                   f"{escape(WHOLE_SECONDS.format(what=what, left=left))}</b></p>")
    out.append(_calls(n))
    out.append(_puts(n))
    out.append(_filesystems(n, zone))
    out.append("</section>")
    return "\n".join(part for part in out if part)


def dome_summary(n: DomeNumbers) -> str:
    """One sentence for the page's summary when the window holds DOME records only."""
    parts = [f"{n.calls:,} DOME calls"]
    answered = sum(row.calls - row.classes["none"] for row in n.commands)
    errors = sum(row.classes.get("4xx", 0) + row.classes.get("5xx", 0) for row in n.commands)
    if answered:
        parts[0] += f" ({errors / answered * 100:.1f}% of those answered were 4xx or 5xx)"
    parts.append(f"{n.puts:,} puts ({n.puts_by_status.get('success', 0):,} succeeded)")
    if n.fs_event_lines:
        parts.append(f"{len(n.disabled_now)} filesystems disabled at the end")
    return ", ".join(parts) + " (the DOME section has the details)."


def _calls(n: DomeNumbers) -> str:
    if not n.calls:
        return "<p>No DOME call in the window.</p>"
    classes = CODE_CLASSES
    out = [f"<p>{n.calls:,} DOME calls: per command, by HTTP code class (none: a cut call, "
           "with no Exiting line, so no code), and their durations from the first line to the Exiting "
           "line (s).</p>",
           '<table id="dome-calls-table"><tr><th class="l">role</th><th class="l">command</th>'
           "<th>calls</th>" + "".join(f"<th>{c}</th>" for c in classes)
           + "".join(f"<th>p{round(q * 100)} (s)</th>" for q in QUANTILES)
           + "<th>max (s)</th></tr>"]
    for row in n.commands:
        d = row.durations
        out.append(f'<tr><td class="l">{escape(row.role)}</td><td class="l">{escape(row.command)}'
                   f"</td><td>{row.calls:,}</td>"
                   + "".join(f"<td>{row.classes.get(c, 0):,}</td>" for c in classes)
                   + "".join(f"<td>{ms_to_text(d.quantile(q))}</td>" for q in QUANTILES)
                   + f"<td>{ms_to_text(d.max)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _puts(n: DomeNumbers) -> str:
    if not n.puts:
        return "<p>No DOME put in the window.</p>"
    values = n.put_to_putdone
    # Every put on whole-second stamps: its time is good to a second, and shown so.
    whole = n.whole_second_puts == n.puts

    def cell(ms):
        return f"{ms // 1000}" if whole and ms is not None else ms_to_text(ms)
    cells = "".join(f"<td>{cell(nearest_rank(values, q))}</td>" for q in QUANTILES)
    return "\n".join([
        f"<p>{n.puts:,} puts (dome_put on the head joined to its putdone): success, failed "
        "(put or putdone refused), incomplete (no putdone within the request timeout, or "
        "none yet at the end of the logs).</p>",
        '<table id="dome-puts-table"><tr>' + "".join(f"<th>{s}</th>" for s in PUT_STATUSES)
        + "<th>with a putdone</th>" + "".join(f"<th>put to putdone p{round(q * 100)} (s)</th>"
                                               for q in QUANTILES)
        + "<th>max (s)</th></tr>",
        "<tr>" + "".join(f"<td>{n.puts_by_status.get(s, 0):,}</td>" for s in PUT_STATUSES)
        + f"<td>{len(values):,}</td>{cells}<td>{cell(values[-1] if values else None)}</td>"
        "</tr></table>"])


def _filesystems(n: DomeNumbers, zone) -> str:
    out = []
    if n.capacity:
        out.append("<p>Filesystems, as each disk node's latest capacity line in the window "
                   "left them:</p>")
        out.append('<table id="dome-fs-table"><tr><th class="l">server</th><th class="l">fs</th>'
                   '<th class="l">at</th><th>size (GB)</th><th>free (GB)</th><th>free</th></tr>')
        for host, fs, t, phys, free in n.capacity:
            share = f"{free / phys * 100:.1f}%" if phys and free is not None else ""
            out.append(f'<tr><td class="l">{escape(str(host))}</td><td class="l">{escape(str(fs))}'
                       f'</td><td class="l">{escape(moment_text(t, zone)) if t is not None else ""}'
                       f"</td><td>{_gb(phys)}</td><td>{_gb(free)}</td><td>{share}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No filesystem capacity line in the window (the disk nodes' logs "
                   "hold them).</p>")
    if n.fs_event_lines:
        disabled = ", ".join(f"{s} {fs}" for s, fs in n.disabled_now) or "none"
        out.append(f"<p>The head's filesystem lines: {n.fs_event_lines:,} (a disabled "
                   "filesystem is logged at every check while its node stays down), "
                   f"{len(n.transitions):,} changes of state; disabled at the end: "
                   f"{escape(disabled)}.</p>")
        out.append('<table id="dome-fs-events-table"><tr><th class="l">at</th>'
                   '<th class="l">server</th><th class="l">fs</th><th class="l">event</th></tr>')
        for t, server, fs, event in n.transitions[:MAX_EVENTS]:
            out.append(f'<tr><td class="l">{escape(moment_text(t, zone))}</td>'
                       f'<td class="l">{escape(str(server))}</td><td class="l">{escape(str(fs))}'
                       f'</td><td class="l">{escape(str(event))}</td></tr>')
        out.append("</table>")
        if len(n.transitions) > MAX_EVENTS:
            out.append(f'<p class="note">The first {MAX_EVENTS} of {len(n.transitions):,} '
                       "changes.</p>")
    return "\n".join(out)


def _gb(value) -> str:
    return "" if value is None else f"{value / 1e9:,.1f}"
