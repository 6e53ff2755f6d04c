"""Ground truth: the records docs/record-rules.md defines, built from what the model
knows (which line belongs to which request or call) and the instants it printed.

Nothing here reads the log back. Every instant is the printed one (UTC ms, truncated to
the second with whole-second stamps), so durations are differences of what a reader of
the log sees, never below 0 (a clock stepped back, or a slow thread logging before the
put's `returns`). Rule numbers refer to "Where the request ends" in the rules.

Name-server linking ("Linking name-server calls" in the rules; the head node's client
learned as a reader not told its name learns it): the model knows which
processing run asked for each name-server call. A call counts for that run's request
when the run returned while the request was open, the call's record as a reader sees it
(its NS092 and `returns` lines, a gap in the DPNS log may take either) lies inside the
run, and no run of another request naming the same file also holds it (ambiguous).
"""

from __future__ import annotations

import csv

from dpmstream.parsers.records import (
    CALL_COLUMNS, REQUEST_COLUMNS, call_row, request_row,
)


def span(later, earlier):
    """A duration: the difference of two printed instants, never below 0; None when
    either step did not happen."""
    if later is None or earlier is None:
        return None
    return later - earlier if later > earlier else 0


class RequestTruth:
    """One request (host, token) as the rules define it; fields are printed instants."""

    __slots__ = (
        "token", "op", "client", "nfiles", "accepted", "started", "put_ret",
        "first_run", "proc", "polls", "poll_ms", "first_success", "first_done_open",
        "done_open", "done_ret", "status", "ended", "last_line", "closed",
        "runs", "ns_calls", "ns_ms",
    )

    def __init__(self, token, op, client, nfiles, accepted, started):
        self.token, self.op, self.client, self.nfiles = token, op, client, nfiles
        self.accepted = accepted          # accept line attached to the put/get call
        self.started = started            # DP092 of the put/get
        self.put_ret = None               # put/get `returns`
        self.first_run = None             # first line of the first processing run
        self.proc = None                  # duration of the run that returned
        self.polls = 0
        self.poll_ms = 0
        self.first_success = None         # returns of the first status call answering SUCCESS
        self.first_done_open = None       # DP092 of the first putdone/relfiles
        self.done_open = None             # the closing call: DP092 ...
        self.done_ret = None              # ... and returns
        self.status = None
        self.ended = None
        self.last_line = started
        self.closed = False               # ended by rules 1-4: later lines change nothing
        self.runs = []                    # its processing runs (RunTruth)
        self.ns_calls = 0                 # name-server calls linked to it, and their ms
        self.ns_ms = 0

    def line(self, printed: int) -> None:
        """A line of the request was printed (accept lines are not lines of it)."""
        if not self.closed and printed > self.last_line:
            self.last_line = printed

    def close(self, status: str, printed: int) -> None:
        """Rules 1-4: the request ends at this line."""
        if not self.closed:
            self.status, self.ended, self.closed = status, printed, True

    def record(self, host: str, idle_before: int | None = None, ns_read: bool = True) -> dict:
        """`idle_before`: a request not ended by its lines whose latest line is before
        this instant was emitted by the timeout, not at the end of the input."""
        if self.closed:
            status, ended = self.status, self.ended
        elif self.op == "get" and self.first_success is not None:
            status, ended = "success", self.first_success          # rule 5
        else:
            status, ended = "incomplete", self.last_line           # rule 6
        origin = self.accepted if self.accepted is not None else self.started
        return {
            "kind": "request", "host": host, "token": self.token, "op": self.op,
            "client": self.client, "nfiles": self.nfiles, "status": status,
            "accepted": self.accepted, "started": self.started, "ended": ended,
            "auth_ms": span(self.started, self.accepted),
            "request_ms": span(self.put_ret, self.started),
            "queue_ms": span(self.first_run, self.put_ret),
            "proc_ms": self.proc,
            "polls": self.polls, "poll_ms": self.poll_ms,
            "ready_wait_ms": span(self.first_success, self.put_ret),
            "transfer_ms": span(self.first_done_open, self.first_success) if self.op == "put" else None,
            "done_ms": span(self.done_ret, self.done_open),
            "total_ms": span(ended, origin),
            "end_reason": self._end_reason(idle_before),
            "ns_calls": self.ns_calls if ns_read else None,
            "ns_ms": self.ns_ms if ns_read else None,
        }

    def _end_reason(self, idle_before: int | None) -> str:
        # The simulator never fills the cap (`evicted`).
        if self.closed:
            return "line"
        if idle_before is not None and self.last_line < idle_before:
            return "timeout"
        return "input_end"


class RunTruth:
    """A processing run: its first line, its `returns` if it counted (returned while the
    request was open), and the paths of its files."""

    __slots__ = ("request", "start", "end", "paths", "true_start")

    def __init__(self, request, start, paths):
        self.request, self.start, self.paths = request, start, frozenset(paths)
        self.end = None
        self.true_start = None            # the true instant of its first line (Truth.now)

    def holds(self, started: int, ended: int, slack: int) -> bool:
        return (self.end is not None and started >= self.start - slack
                and ended <= self.end + slack)


class CallTruth:
    """A synchronous call that is not a step of a request."""

    __slots__ = ("daemon", "pid", "thread", "op", "client", "accepted", "started", "ended", "rc",
                 "path", "run", "open_kept", "ret_kept", "seen", "token", "true_start")

    def __init__(self, daemon, pid, thread, op, client, accepted, started):
        self.daemon, self.pid, self.thread, self.op = daemon, pid, thread, op
        self.client, self.accepted, self.started = client, accepted, started
        self.ended = None                 # stays None when `returns` never comes
        self.rc = None
        self.path = None                  # a name-server call's path
        self.run = None                   # the processing run that asked for it (RunTruth)
        self.open_kept = self.ret_kept = True  # its NS092 / returns lines are in the log
        self.seen = None                  # (started, ended, rc) as a reader sees them
        self.token = None                 # the request it is linked to
        self.true_start = None            # the true instant of its open line (Truth.now)

    def returned(self, printed: int, rc: int) -> None:
        self.ended, self.rc = printed, rc

    def record(self, host: str) -> dict:
        started, ended, rc = self.seen if self.seen is not None else (self.started, self.ended, self.rc)
        return {
            "kind": "call", "host": host, "daemon": self.daemon, "pid": self.pid,
            "thread": self.thread, "op": self.op, "client": self.client,
            "started": started, "ended": ended,
            "duration_ms": span(ended, started),
            "rc": rc,
            "auth_ms": span(started, self.accepted),
            "session": None, "token": self.token, "path": self.path,
        }


# The reader's defaults (docs/record-rules.md, "Timeout"): requests idle this long are
# emitted by the timeout; the watermark lags the latest event time by the allowance.
TIMEOUT_MS = 3_600_000
ALLOWANCE_MS = 2_000
# How far outside a processing run a linked name-server call may lie (parsers/linking.py).
LINK_SLACK_MS = 5
# A run of another request makes a call ambiguous only if it is on the call's side of
# every clock step back (docs/record-rules.md, "A clock stepped back") and the linker
# still holds it: both within seconds of true time. Runs last < 10 s and the model's steps
# are longer, so a run and a call of either side of a step whose printed windows meet are
# further apart than this in true time.
HELD_RUN_MS = 10_000


class Truth:
    def __init__(self, host: str):
        self.host = host
        self._requests: list[RequestTruth] = []
        self._calls: list[CallTruth] = []
        self._runs: list[RunTruth] = []
        self.ns_read = True               # the DPNS log has lines: ns_calls/ns_ms not empty
        self._linked = False
        self.now = lambda: None           # the model's true instant (set by the run)

    def new_run(self, *args) -> RunTruth:
        run = RunTruth(*args)
        run.true_start = self.now()
        self._runs.append(run)
        return run
    def new_request(self, *args) -> RequestTruth:
        req = RequestTruth(*args)
        self._requests.append(req)
        return req

    def new_call(self, *args) -> CallTruth:
        call = CallTruth(*args)
        call.true_start = self.now()
        self._calls.append(call)
        return call

    def request_records(self, latest: int | None = None, timeout_ms: int = TIMEOUT_MS) -> list[dict]:
        """Sorted by (started, token); every request here has a DP092. `latest`: the
        latest instant printed in the input (lines set aside excluded): a request idle
        for more than `timeout_ms` before the final watermark ends by the timeout."""
        self._link()
        idle_before = None if latest is None else latest - ALLOWANCE_MS - timeout_ms
        records = [r.record(self.host, idle_before, self.ns_read) for r in self._requests]
        records.sort(key=lambda r: (r["started"], r["token"]))
        return records

    def call_records(self) -> list[dict]:
        """Sorted by (started, host, pid, thread)."""
        self._link()
        records = [c.record(self.host) for c in self._calls if c.open_kept]
        records.sort(key=lambda c: (c["started"], c["host"], c["pid"], c["thread"]))
        return records


    def _link(self) -> None:
        """Name-server calls as a reader of the (possibly gapped) DPNS log sees them, and
        the request each one is linked to."""
        if self._linked:
            return
        self._linked = True
        self._read_through_gap()
        by_path: dict[str, list[RunTruth]] = {}
        for run in self._runs:
            if run.end is not None:
                for path in run.paths:
                    by_path.setdefault(path, []).append(run)
        fits = []  # (call, the one run it lies inside), from any client
        for call in self._calls:
            if call.daemon != "dpns" or call.seen is None or call.seen[1] is None:
                continue
            started, ended, _ = call.seen
            run = call.run
            if run is None:  # another client's call (a disk node): inside a run by chance?
                inside = [r for r in by_path.get(call.path, ())
                          if r.holds(started, ended, LINK_SLACK_MS) and held_together(r, call)]
                if len({id(r.request) for r in inside}) == 1:
                    fits.append((call, inside[0]))
                continue
            if run.end is None or not run.holds(started, ended, LINK_SLACK_MS):
                continue
            others = [r for r in by_path.get(call.path, ()) if r is not run
                      and r.request is not run.request and r.holds(started, ended, LINK_SLACK_MS)
                      and held_together(r, call)]
            if others:
                continue  # ambiguous: stays unlinked
            fits.append((call, run))
        # The head node as the name server names it: the reader's host, else the client of
        # the first call that links (the reader is not told the head's name: it learns it).
        first = min(fits, key=lambda f: (f[0].seen[1], f[0].seen[0]), default=None)
        heads = {self.host.lower()} | ({first[0].client.lower()} if first else set())
        for call, run in fits:
            if call.client.lower() not in heads:
                continue
            started, ended, _ = call.seen
            call.token = run.request.token
            run.request.ns_calls += 1
            run.request.ns_ms += ended - started

    def _read_through_gap(self) -> None:
        """`seen` of every name-server call: a `returns` closes the call open on its
        thread, whichever that is; a new NS092 closes an open one without `returns`."""
        threads: dict[tuple, list] = {}
        for call in self._calls:
            if call.daemon == "dpns":
                threads.setdefault((call.pid, call.thread), []).append(call)
        for calls in threads.values():
            open_call = None  # a thread's calls follow one another: open, returns, open...
            for call in calls:
                if call.open_kept:
                    if open_call is not None:
                        open_call.seen = (open_call.started, None, None)
                    open_call = call
                    call.seen = (call.started, None, None)
                if call.ended is not None and call.ret_kept and open_call is not None:
                    open_call.seen = (open_call.started, call.ended, call.rc)
                    open_call = None


def held_together(run: RunTruth, call: CallTruth) -> bool:
    """Whether the linker still holds `run` when `call` is read (HELD_RUN_MS)."""
    if run.true_start is None or call.true_start is None:
        return True
    return abs(call.true_start - run.true_start) <= HELD_RUN_MS


def write_csv(path, columns, rows) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def write_requests_csv(path, records: list[dict]) -> None:
    write_csv(path, REQUEST_COLUMNS, (request_row(r) for r in records))


def write_calls_csv(path, records: list[dict]) -> None:
    write_csv(path, CALL_COLUMNS, (call_row(c) for c in records))
