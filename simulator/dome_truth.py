"""The records a simulated DOME site's logs must give, from the lines that reached them.

The rules (docs/dome.md, "The records"), applied to the kept lines only:

- A call is keyed by (host, pid, TID). It opens at its `Accepted connection` line, or at
  its `clientdn` line when that is missing; a call with neither kept gives no record (its
  `Exiting` line, if kept, is a stray end). Its end is its `Exiting: code: N` line; without
  it the call is cut (no end, no code). Caller and remote client come from the `clientdn`
  line, the command from the `req:` line, when kept.
- A put is the head's `dome_put` call: its time is that of the first kept of its
  `Entering` and `Selected fs` lines. It joins the putdones whose PFN is
  SELECTED_FS/.../BASENAME.N.EPOCH on the selected server, with EPOCH within a second of
  its `Selected fs` line (the head reads its clock after logging it) and the putdone within
  the timeout; without its `Selected fs` line nothing can join it. Status, as a DPM
  request's (docs/record-rules.md): `failed` when its dome_put answered != 200; else a
  putdone ends it: `failed` when a putdone code (the head's, or the disk's relaying it)
  is not 200 or the head logged a putdone error, `success` otherwise (end_reason `line`);
  no putdone within the timeout: `incomplete`, end_reason `timeout`, or `input_end` when
  the log ends before the timeout has passed (ended: its latest line).
- Every time is the instant the stamp prints: whole seconds under the traditional stamp
  (the call and put records say so in `whole_seconds`).
- A checksum wait is one file's `dome_chksum` polls on the head, as the model made them:
  the calls whose record shows them (opening, `clientdn`, `req:` and `Exiting` lines
  kept), from the first answered 202 to the last. Its outcome: `done` (200) or `failed`
  (another code) when its answer shows; else `timeout` when the head's last call is at
  least the checksum timeout (parsers/dome_checksums.py) after its last call's end,
  `input_end` before that. `overlap` marks a wait whose span (in true instants, not as the
  stamps show them) meets another wait's of the same (head, caller, remote client): a
  client polling two files at once.
- Without {TID} (dmlite < 0.8.4): no call records, and no code for a put or a putdone
  (only a putdone error line, which names the PFN, makes a put `failed`); no checksum waits.
"""

from __future__ import annotations

from collections import Counter

from dpmstream.parsers.dome_checksums import QUEUED, TIMEOUT_MS as CHECKSUM_TIMEOUT_MS
from dpmstream.parsers.dome_records import (  # the columns, declared once with the record kinds
    DOME_CALL_COLUMNS as CALL_COLUMNS, DOME_CAPACITY_COLUMNS as CAPACITY_COLUMNS,
    DOME_CHECKSUM_COLUMNS as CHECKSUM_COLUMNS,
    DOME_FS_EVENT_COLUMNS as FS_EVENT_COLUMNS, DOME_PUT_COLUMNS as PUT_COLUMNS,
)
from dpmstream.simulator.dome_model import Call, Line, Put, Site
from dpmstream.simulator.truth import write_csv as write_rows
# How far EPOCH may be after the `Selected fs` line's second (the head logs, then reads time(0)).
EPOCH_SLACK_S = 1


class DomeTruth:
    def __init__(self, site: Site, whole_seconds: bool):
        self.site = site
        self.whole = whole_seconds
        # Without {TID} a process's threads interleave with nothing to tell them apart:
        # no call records, and no HTTP code can be tied to a put or putdone.
        self.framed = site.cfg.generation == "tid"
        self.counts: Counter = Counter()
        self.calls = self._calls()
        self.puts = self._puts()
        self.checksums = self._checksums()
        kept = self._kept()
        self.capacity = [
            {"time": self.shows(ln.t), "host": ln.node.host, **ln.fields}
            for ln in kept if ln.role == "capacity"]
        self.fs_events = self._fs_events(kept)

    def shows(self, t: int) -> int:
        """The instant a stamp of true instant t prints (UTC ms)."""
        return t - t % 1000 if self.whole else t

    def _kept(self) -> list[Line]:
        return sorted((ln for ln in self.site.lines if ln.kept), key=lambda ln: ln.t)

    def _calls(self) -> list[dict]:
        if not self.framed:
            return []
        out = []
        for c in self.site.calls:
            opener = next((ln for ln in c.open_lines if ln.kept), None)
            exit_kept = c.exit_line.kept
            if opener is None:
                if exit_kept:
                    self.counts["stray_call_ends"] += 1
                continue
            start = self.shows(opener.t)
            end = self.shows(c.exit_line.t) if exit_kept else None
            who = c.caller_line.kept
            out.append({
                "host": c.node.host, "pid": c.life.pid, "tid": c.tid,
                "role": c.node.role, "command": c.command if c.command_line.kept else None,
                "http_code": c.code if exit_kept else None,
                "caller": c.caller.fqdn if who else None,
                "remote_client": c.remote_host if who else None,
                "start": start, "end": end, "duration": None if end is None else end - start,
                "cut": 0 if exit_kept else 1, "whole_seconds": int(self.whole),
            })
        out.sort(key=lambda r: (r["start"], r["host"], r["pid"], r["tid"]))
        return out

    def _puts(self) -> list[dict]:
        site = self.site
        timeout = int(site.cfg.timeout * 1000)
        head_kept = [ln.t for ln in site.lines if ln.kept and ln.node is site.head]
        log_end = self.shows(max(head_kept)) if head_kept else site.t0
        out = []
        for p in site.puts:
            first = next((ln for ln in (p.entering, p.selected) if ln is not None and ln.kept), None)
            if first is None:
                self.counts["puts_without_lines"] += 1
                self._orphans(p)
                continue
            put_time = self.shows(first.t)
            exit_line = p.call.exit_line
            put_code = p.call.code if exit_line.kept and self.framed else None
            framing = (exit_line,) if self.framed else ()
            own = [ln for ln in (p.entering, p.selected, *framing) if ln is not None and ln.kept]
            row = {"head": site.head.host, "lfn": p.lfn, "put_time": put_time, "put_code": put_code,
                   "server": None, "fs": None, "pfn": None, "size": None,
                   "putdone_disk_time": None, "putdone_head_time": None, "putdone_code": None,
                   "put_to_putdone": None, "whole_seconds": int(self.whole)}
            if put_code is not None and put_code != 200:
                out.append({**row, "status": "failed", "end_reason": "line",
                            "ended": self.shows(exit_line.t)})
                continue
            joined = p.selected is not None and p.selected.kept
            if joined:
                row["server"], row["fs"] = p.server, p.fs
            seen = [ln for ln in (p.putdone_disk, p.putdone_head)
                    if ln is not None and ln.kept and self.shows(ln.t) - put_time <= timeout]
            if not joined or not seen:
                self._orphans(p)
                latest = self.shows(max(ln.t for ln in own))
                timed_out = put_time + timeout <= log_end
                out.append({**row, "status": "incomplete",
                            "end_reason": "timeout" if timed_out else "input_end", "ended": latest})
                continue
            self._orphans(p, seen)
            row["pfn"], row["size"] = p.pfn, p.size
            for ln, col in ((p.putdone_disk, "putdone_disk_time"), (p.putdone_head, "putdone_head_time")):
                if ln in seen:
                    row[col] = self.shows(ln.t)
            row["put_to_putdone"] = (row["putdone_head_time"] or row["putdone_disk_time"]) - put_time
            codes = [c.code for c in (p.head_call, p.disk_call)
                     if c is not None and c.exit_line.kept and self.framed]
            row["putdone_code"] = codes[0] if codes else None
            error = p.head_call is not None and any(
                ln.kept and ln.role == "putdone_error" for ln in p.head_call.lines)
            failed = error or any(code != 200 for code in codes)
            out.append({**row, "status": "failed" if failed else "success", "end_reason": "line",
                        "ended": put_time + row["put_to_putdone"]})
        out.sort(key=lambda r: (r["put_time"], r["lfn"]))
        return out

    def _shows_record(self, c: Call) -> bool:
        """Whether the call's record shows it as a checksum poll: opened, named, answered."""
        return (any(ln.kept for ln in c.open_lines) and c.caller_line.kept and c.command_line.kept
                and c.exit_line.kept)

    def _checksums(self) -> list[dict]:
        if not self.framed:
            return []
        head = self.site.head.host
        head_calls = [r["end"] if r["end"] is not None else r["start"] for r in self.calls if r["host"] == head]
        log_end = max(head_calls, default=self.site.t0)
        out = []
        for wait in self.site.checksums:
            polls = [c for c in wait.polls if self._shows_record(c)]
            while polls and polls[0].code != QUEUED:   # its 202s lost: an answer with no wait
                self.counts["checksum_answers_without_wait"] += 1
                polls.pop(0)
            if not polls:
                continue
            last = polls[-1]
            opened = next(ln for ln in polls[0].open_lines if ln.kept).t
            start, end = self.shows(opened), self.shows(last.exit_line.t)
            answered = last.code != QUEUED
            if answered:
                outcome = "done" if last.code == 200 else "failed"
            else:
                outcome = "timeout" if log_end >= end + CHECKSUM_TIMEOUT_MS else "input_end"
            out.append(({"head": head, "caller": wait.frontend.fqdn, "remote_client": wait.user[1],
                         "start": start, "end": end, "wait": end - start, "polls": len(polls),
                         "outcome": outcome, "http_code": last.code if answered else None,
                         "endings": int(answered), "overlap": 0, "whole_seconds": int(self.whole)},
                        (opened, last.exit_line.t)))
        by_key: dict = {}
        for row, instants in out:
            by_key.setdefault((row["caller"], row["remote_client"]), []).append((row, instants))
        for waits in by_key.values():   # polled at once: their true spans meet
            for row, (a, b) in waits:
                row["overlap"] = int(any(r is not row and c <= b and a <= d for r, (c, d) in waits))
        out = [row for row, _ in out]
        out.sort(key=lambda r: (r["start"], r["caller"], r["remote_client"], r["end"]))
        return out

    def _orphans(self, p: Put, joined: list = ()) -> None:
        """Count the putdone lines kept that no put record joins."""
        for ln in (p.putdone_disk, p.putdone_head):
            if ln is not None and ln.kept and ln not in joined:
                self.counts["orphan_putdones"] += 1

    def _fs_events(self, kept: list[Line]) -> list[dict]:
        state: dict = {}
        out = []
        for ln in kept:
            if ln.role not in ("fs_enabled", "fs_disabled"):
                continue
            key = (ln.fields["server"], ln.fields["fs"])
            enabled = ln.role == "fs_enabled"
            out.append({"time": self.shows(ln.t), "host": ln.node.host, **ln.fields,
                        "event": "enabled" if enabled else "disabled",
                        "transition": int(state.get(key, True) != enabled)})
            state[key] = enabled
        return out


def write_csv(path, columns, rows) -> None:
    """The rows' `columns` in that order (an absent or None value as empty), one a line."""
    write_rows(path, columns, (["" if (value := row.get(k)) is None else value for k in columns]
                               for row in rows))
