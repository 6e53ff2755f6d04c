"""Reassembly: events -> request records and call records (docs/record-rules.md).

Thread state is keyed by (host, pid, tid): a call runs from its open line to the
`returns` on the same thread. Requests are keyed by (host, token): the token line of a
put/get creates one, and every later step (slow-thread processing, status polls,
putdone/relfiles/abortreq) finds it by token. Time is event time only: timeouts run on a
watermark (latest event time less an allowance for lines out of order across threads).
Memory is bounded by `max_in_flight`; every eviction is counted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields as dc_fields
from typing import Callable

from .events import Event

# Ops of the calls that are steps of a request, and the request op they imply.
REQUEST_OPS = frozenset(("put", "get"))
STATUS_OPS = {"getstatus_putreq": "put", "getstatus_getreq": "get"}
CLOSING_OPS = {"putdone": "put", "relfiles": "get", "abortreq": None}
STEP_OPS = REQUEST_OPS | set(STATUS_OPS) | set(CLOSING_OPS)
SESSION_OPEN = {"startsess": "sess", "starttrans": "trans"}
SESSION_CLOSE = {"endsess": "sess", "endtrans": "trans", "aborttrans": "trans"}

PLAIN, STEP, PROC, LATE = "plain", "step", "proc", "late"
# Ended requests are remembered in groups of this many tokens, so that an external state
# store writes one entry per group (per batch), not one per request.
FINISHED_GROUP = 1024


class Call:
    """A call open on a thread (or a slow-thread processing run)."""

    __slots__ = ("op", "client", "accepted", "started", "kind", "token", "state", "session")

    def __init__(self, op, client, accepted, started, kind, token=None, state=None, session=None):
        self.op = op
        self.client = client
        self.accepted = accepted
        self.started = started
        self.kind = kind
        self.token = token
        self.state = state
        self.session = session


class Thread:
    __slots__ = ("daemon", "accept", "call", "sess", "trans", "latest")

    def __init__(self, daemon, accept=None, call=None, sess=False, trans=False, latest=0):
        self.daemon = daemon
        self.accept = accept
        self.call = call
        self.sess = sess
        self.trans = trans
        self.latest = latest


class Request:
    __slots__ = (
        "host", "token", "op", "client", "nfiles", "accepted", "started", "request_ret",
        "proc_first", "proc_ms", "polls", "poll_ms", "success_end", "done_start", "done_ms",
        "closing", "latest", "queued", "putdone_first",
    )

    def __init__(self, host, token, op=None, client=None, nfiles=None, accepted=None,
                 started=None, request_ret=None, proc_first=None, proc_ms=None, polls=0,
                 poll_ms=0, success_end=None, done_start=None, done_ms=None, closing=None,
                 latest=0, queued=False, putdone_first=None):
        self.host = host
        self.token = token
        self.op = op
        self.client = client
        self.nfiles = nfiles
        self.accepted = accepted
        self.started = started
        self.request_ret = request_ret
        self.proc_first = proc_first
        self.proc_ms = proc_ms
        self.polls = polls
        self.poll_ms = poll_ms
        self.success_end = success_end
        self.done_start = done_start
        self.done_ms = done_ms
        self.closing = closing
        self.latest = latest
        self.queued = queued
        self.putdone_first = putdone_first  # DP092 of the first putdone (a retry may follow)


@dataclass
class ReassemblyStats:
    requests: int = 0        # request records emitted
    calls: int = 0           # call records emitted
    evictions: int = 0       # requests emitted early because of the in-flight cap
    expired: int = 0         # requests emitted by the event-time timeout
    dropped_accepts: int = 0  # accept lines whose connection failed or was superseded
    late_lines: int = 0      # lines naming a request that had already ended
    stray_returns: int = 0   # `returns` with no open call on its thread
    noreturn_calls: int = 0  # calls closed without their `returns`
    orphans: int = 0         # requests first seen after their put/get (input began mid-way)
    restarts: int = 0        # daemon restarts (pid changes)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dc_fields(self)}


def _diff(a, b):
    return a - b if a is not None and b is not None else None


class Reassembler:
    def __init__(self, emit: Callable[[dict], None], timeout_ms: int = 3_600_000,
                 max_in_flight: int = 1_000_000, allowance_ms: int = 2_000,
                 finished_memory: int = 100_000):
        self.emit = emit
        self.timeout_ms = timeout_ms
        self.max_in_flight = max_in_flight
        self.allowance_ms = allowance_ms
        self.finished_memory = finished_memory
        self.threads: dict[tuple, Thread] = {}
        # Least recently active first: timeouts and evictions pop from the front.
        self.requests: OrderedDict[tuple, Request] = OrderedDict()
        # Requests that ended -> their group: a later line of one is late, not an orphan.
        self.finished: OrderedDict[tuple, int] = OrderedDict()
        self.finished_groups: dict[int, dict[tuple, None]] = {}
        self._group = 0
        self.pids: dict[tuple, int] = {}   # (host, daemon) -> current pid
        self.stats = ReassemblyStats()
        self.slow_queue_depth = 0
        self.latest: int | None = None
        # Change tracking for external state stores (the Kafka worker's tables).
        self.dirty_threads: set | None = None
        self.dirty_requests: set | None = None
        self.dirty_groups: set | None = None
        self._handlers = {
            "accept": self._on_accept, "conn_failure": self._on_conn_failure,
            "call": self._on_call, "token": self._on_token, "slow_start": self._on_slow_start,
            "status": self._on_status, "returns": self._on_returns,
            "file": self._on_line, "detail": self._on_line, "other": self._on_line,
        }

    # -- input ---------------------------------------------------------------------------
    def feed(self, ev: Event) -> None:
        ts, host, daemon, pid, tid, _, role = ev[:7]
        if self.latest is None or ts > self.latest:
            self.latest = ts
        key = (host, pid, tid)
        th = self.threads.get(key)
        if th is None:  # a new thread, perhaps of a new pid: the daemon restarted
            if self.pids.get((host, daemon)) != pid:
                self._new_pid(host, daemon, pid)
            th = self.threads[key] = Thread(daemon)
        th.latest = ts
        rkey = self._handlers[role](ev, th, key)
        if self.dirty_threads is not None:
            self.dirty_threads.add(key)
            if rkey is not None:
                self.dirty_requests.add(rkey)

    def _new_pid(self, host: str, daemon: str, pid: int) -> None:
        """A daemon's first pid, or a new one: it restarted."""
        old = self.pids.get((host, daemon))
        if old is not None:
            self._restart(host, daemon, old)
        self.pids[(host, daemon)] = pid

    def _on_accept(self, ev, th, key):
        if th.accept is not None:
            self.stats.dropped_accepts += 1
        th.accept = ev.ts

    def _on_conn_failure(self, ev, th, key):
        if th.accept is not None:
            self.stats.dropped_accepts += 1
            th.accept = None
        return self._on_line(ev, th, key)

    def _on_call(self, ev, th, key):
        if th.call is not None:
            self._close_noreturn(key, th)
        op = ev.op or ev.func  # SRM request lines name no op: the function is the method
        session = SESSION_OPEN.get(op) or ("trans" if th.trans else "sess" if th.sess else None)
        th.call = Call(op, ev.client, th.accept, ev.ts, STEP if op in STEP_OPS else PLAIN,
                       session=session)
        th.accept = None

    def _on_token(self, ev, th, key):
        call = th.call
        if call is None or call.kind != STEP or call.token is not None:
            return None  # a token on a plain call, or a second one: only details
        rkey = (ev.host, ev.token)
        call.token = ev.token
        if call.op in REQUEST_OPS:
            if rkey in self.finished:
                call.kind = LATE
                self.stats.late_lines += 1
                return None
            req = self.requests.get(rkey)
            if req is None:
                req = self._admit(rkey, Request(ev.host, ev.token))
            elif req.started is None:
                self.stats.orphans -= 1  # its put/get showed up after all (out of order)
            req.op = call.op
            req.client = call.client
            req.nfiles = ev.nfiles
            req.accepted = call.accepted
            req.started = call.started
            if req.proc_first is None and req.success_end is None and not req.queued:
                req.queued = True
                self.slow_queue_depth += 1
        else:
            req = self._find(rkey, STATUS_OPS.get(call.op) or CLOSING_OPS.get(call.op))
            if req is None:
                call.kind = LATE
                return None
            if call.op == "putdone" and req.putdone_first is None:
                req.putdone_first = call.started
        self._touch(rkey, req, ev.ts)
        return rkey

    def _on_slow_start(self, ev, th, key):
        if th.call is not None:
            self._close_noreturn(key, th)
        rkey = (ev.host, ev.token)
        req = self._find(rkey, ev.op)
        th.call = Call("proc_" + (ev.op or ""), None, None, ev.ts, PROC if req else LATE, ev.token)
        if req is None:
            return None
        if req.proc_first is None:
            req.proc_first = ev.ts
        self._dequeue(req)
        self._touch(rkey, req, ev.ts)
        return rkey

    def _on_status(self, ev, th, key):
        if th.call is not None:
            th.call.state = ev.state
        return self._on_line(ev, th, key)

    def _on_line(self, ev, th, key):
        """Any other line inside a call: it only moves the request's latest line."""
        call = th.call
        if call is None or call.token is None:
            return None
        if call.kind == LATE:
            self.stats.late_lines += 1
            return None
        rkey = (ev.host, call.token)
        req = self.requests.get(rkey)
        if req is not None:
            self._touch(rkey, req, ev.ts)
            return rkey
        return None

    def _on_returns(self, ev, th, key):
        call = th.call
        if call is None:
            self.stats.stray_returns += 1
            return None
        th.call = None
        ts, rc = ev.ts, ev.rc
        if call.kind == PLAIN or (call.kind == STEP and call.token is None):
            self._emit_call(key, th, call, ts, rc)
            return None
        if call.kind == LATE:
            self.stats.late_lines += 1
            return None
        rkey = (ev.host, call.token)
        req = self.requests.get(rkey)
        if req is None:  # emitted meanwhile (timeout or cap)
            self.stats.late_lines += 1
            return None
        self._touch(rkey, req, ts)
        op = call.op
        if call.kind == PROC:
            req.proc_ms = ts - call.started
        elif op in REQUEST_OPS:
            req.request_ret = ts
            if rc != 0:
                self._finish(rkey, req, "failed", ts)
        elif op in STATUS_OPS:
            req.polls += 1
            req.poll_ms += ts - call.started
            if call.state == "SUCCESS":
                if req.success_end is None:
                    req.success_end = ts
                self._dequeue(req)
            elif call.state == "FAILED":
                self._finish(rkey, req, "failed", ts)
        else:  # putdone, relfiles, abortreq
            req.done_start = call.started
            req.done_ms = ts - call.started
            req.closing = op
            self._finish(rkey, req, "aborted" if op == "abortreq" else "success", ts)
        return rkey

    # -- requests ------------------------------------------------------------------------
    def _admit(self, rkey, req: Request) -> Request:
        self.requests[rkey] = req
        while len(self.requests) > self.max_in_flight:
            old_key, old = self.requests.popitem(last=False)
            self.stats.evictions += 1
            self._expire(old_key, old)
        return req

    def _find(self, rkey, op) -> Request | None:
        """The open request of a token; an orphan if never seen; None if it has ended."""
        req = self.requests.get(rkey)
        if req is not None:
            return req
        if rkey in self.finished:
            self.stats.late_lines += 1
            return None
        self.stats.orphans += 1
        return self._admit(rkey, Request(rkey[0], rkey[1], op=op))

    def _touch(self, rkey, req: Request, ts: int) -> None:
        if ts > req.latest:
            req.latest = ts
        self.requests.move_to_end(rkey)

    def _dequeue(self, req: Request) -> None:
        if req.queued:
            req.queued = False
            self.slow_queue_depth -= 1

    def _finish(self, rkey, req: Request, status: str, ended: int) -> None:
        del self.requests[rkey]
        self._dequeue(req)
        self._remember_finished(rkey)
        self.emit(self._request_record(req, status, ended))
        if self.dirty_requests is not None:
            self.dirty_requests.add(rkey)

    def _remember_finished(self, rkey) -> None:
        group = self._group
        members = self.finished_groups.setdefault(group, {})
        members[rkey] = None
        self.finished[rkey] = group
        if len(members) >= FINISHED_GROUP:
            self._group += 1
        dirty = self.dirty_groups
        if dirty is not None:
            dirty.add(group)
        if len(self.finished) > self.finished_memory:
            old_key, old_group = self.finished.popitem(last=False)
            members = self.finished_groups[old_group]
            del members[old_key]
            if not members:
                del self.finished_groups[old_group]
            if dirty is not None:
                dirty.add(old_group)

    def _expire(self, rkey, req: Request) -> None:
        """Emit a request that saw no end: rules 5 and 6 of the record rules."""
        self._dequeue(req)
        if req.op == "get" and req.success_end is not None:
            record = self._request_record(req, "success", req.success_end)
        else:
            record = self._request_record(req, "incomplete", req.latest)
        self.emit(record)
        if self.dirty_requests is not None:
            self.dirty_requests.add(rkey)

    def _request_record(self, req: Request, status: str, ended: int) -> dict:
        self.stats.requests += 1
        start = req.accepted if req.accepted is not None else req.started
        return {
            "kind": "request", "host": req.host, "token": req.token, "op": req.op,
            "client": req.client, "nfiles": req.nfiles, "status": status,
            "accepted": req.accepted, "started": req.started, "ended": ended,
            "auth_s": _diff(req.started, req.accepted),
            "request_s": _diff(req.request_ret, req.started),
            "queue_s": _diff(req.proc_first, req.request_ret),
            "proc_s": req.proc_ms,
            "polls": req.polls, "poll_s": req.poll_ms,
            "ready_wait_s": _diff(req.success_end, req.request_ret),
            "transfer_s": _diff(req.putdone_first, req.success_end) if req.closing == "putdone" else None,
            "done_s": req.done_ms,
            "total_s": _diff(ended, start),
        }

    # -- calls ---------------------------------------------------------------------------
    def _emit_call(self, key, th: Thread, call: Call, ended, rc) -> None:
        if rc == 0 and call.op in SESSION_OPEN:
            setattr(th, SESSION_OPEN[call.op], True)
        if call.op in SESSION_CLOSE:
            setattr(th, SESSION_CLOSE[call.op], False)
        self.stats.calls += 1
        host, pid, tid = key
        self.emit({
            "kind": "call", "host": host, "daemon": th.daemon, "pid": pid,
            "thread": tid if tid >= 0 else None, "op": call.op, "client": call.client,
            "started": call.started, "ended": ended, "duration_s": _diff(ended, call.started),
            "rc": rc, "auth_s": _diff(call.started, call.accepted), "session": call.session,
        })

    def _close_noreturn(self, key, th: Thread) -> None:
        """The thread's call will never log its `returns` (a new call, a restart, a timeout)."""
        call = th.call
        th.call = None
        self.stats.noreturn_calls += 1
        if call.kind == PLAIN or (call.kind == STEP and call.token is None):
            self._emit_call(key, th, call, None, None)

    def _restart(self, host: str, daemon: str, old_pid: int) -> None:
        self.stats.restarts += 1
        for key in [k for k, th in self.threads.items()
                    if k[0] == host and k[1] == old_pid and th.daemon == daemon]:
            th = self.threads.pop(key)
            if th.call is not None:
                self._close_noreturn(key, th)
            if th.accept is not None:
                self.stats.dropped_accepts += 1
            if self.dirty_threads is not None:
                self.dirty_threads.add(key)

    # -- event time ----------------------------------------------------------------------
    def watermark(self) -> int | None:
        return None if self.latest is None else self.latest - self.allowance_ms

    def advance(self, watermark: int | None = None) -> None:
        """Emit what has seen no line for `timeout_ms` of event time before the watermark."""
        mark = self.watermark() if watermark is None else watermark
        if mark is None:
            return
        horizon = mark - self.timeout_ms
        requests = self.requests
        while requests:
            rkey, req = next(iter(requests.items()))
            if req.latest >= horizon:
                break
            del requests[rkey]
            self.stats.expired += 1
            self._expire(rkey, req)
        for key, th in list(self.threads.items()):
            if th.latest >= horizon:
                continue
            if th.call is not None:
                self._close_noreturn(key, th)
            if th.accept is not None:
                self.stats.dropped_accepts += 1
            if not (th.sess or th.trans):
                del self.threads[key]
            else:
                th.accept = None
            if self.dirty_threads is not None:
                self.dirty_threads.add(key)

    def finish(self) -> None:
        """End of input: every open call and request is emitted as it stands."""
        for key, th in list(self.threads.items()):
            if th.call is not None:
                self._close_noreturn(key, th)
        self.threads.clear()
        while self.requests:
            rkey, req = self.requests.popitem(last=False)
            self._expire(rkey, req)

    @property
    def in_flight(self) -> int:
        return len(self.requests)

    # -- state for external stores (Kafka worker tables) ------------------------------
    def track_changes(self) -> None:
        self.dirty_threads, self.dirty_requests, self.dirty_groups = set(), set(), set()

    def take_changes(self) -> tuple[dict, dict, dict]:
        """({thread key: state or None}, {request key: state or None},
        {finished group: [request keys] or None}) changed since the last take. The
        finished groups carry the finished-token memory, so that a restored reassembler
        still knows a late line for one when it sees it."""
        threads = {k: thread_state(self.threads.get(k)) for k in self.dirty_threads}
        requests = {k: request_state(self.requests.get(k)) for k in self.dirty_requests}
        groups = {g: [list(k) for k in self.finished_groups[g]] if g in self.finished_groups
                  else None for g in self.dirty_groups}
        self.dirty_threads.clear()
        self.dirty_requests.clear()
        self.dirty_groups.clear()
        return threads, requests, groups

    def restore(self, threads: dict, requests: dict, pids: dict | None = None,
                finished: dict | None = None) -> None:
        """Load state saved by take_changes (keys as tuples, values as states)."""
        for key, state in threads.items():
            self.threads[tuple(key)] = thread_from_state(state)
        for group in sorted(finished or {}):
            members = self.finished_groups[group] = {}
            for key in finished[group]:
                members[tuple(key)] = None
                self.finished[tuple(key)] = group
            self._group = group + 1  # carry on in a new group: the stored one stays as is
        for key, state in sorted(requests.items(), key=lambda kv: kv[1]["latest"]):
            req = Request(**state)
            self.requests[tuple(key)] = req
            if req.queued:
                self.slow_queue_depth += 1
            if self.latest is None or req.latest > self.latest:
                self.latest = req.latest
        for key, pid in (pids or {}).items():
            self.pids[tuple(key)] = pid


def request_state(req: Request | None) -> dict | None:
    return None if req is None else {s: getattr(req, s) for s in Request.__slots__}


def thread_state(th: Thread | None) -> dict | None:
    if th is None:
        return None
    state = {s: getattr(th, s) for s in Thread.__slots__ if s != "call"}
    call = th.call
    state["call"] = None if call is None else {s: getattr(call, s) for s in Call.__slots__}
    return state


def thread_from_state(state: dict) -> Thread:
    call = state.get("call")
    th = Thread(**{k: v for k, v in state.items() if k != "call"})
    th.call = None if call is None else Call(**call)
    return th
