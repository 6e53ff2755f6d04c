"""Reassembly: events -> request records and call records (docs/record-rules.md).

Thread state is keyed by (host, daemon, pid, tid): a call runs from its open line to the
`returns` on the same thread. A (host, daemon, pid) is a process: a new pid is a new
process, and an old one's open calls end only by their own `returns`, a new call on the
thread, a `started` line of that same pid (the pid was reused), or the old process
staying silent for `grace_ms` of event time while a newer one logs. So stray lines of
another process and overlapping restarts leave the real daemon's calls alone.

Requests are keyed by (host, token): the token line of a put/get creates one, and every
later step finds it by token. Time is event time only, per host: timeouts run on the
host's watermark (its latest event time less an allowance for lines out of order across
threads), and a lone line far ahead of its host's time is held until the next lines
confirm it or set it aside. Memory is bounded (open requests, threads, processes and
the ended-token memory are capped) and every eviction is counted; sweeps walk state in
order of last activity, so the per-line cost does not grow with what is open.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from .plain import Counters
from collections import namedtuple
from collections.abc import Callable

from .events import Event
from .schema import BY_EVICTION, BY_INPUT_END, BY_LINE, BY_TIMEOUT  # noqa: F401

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
# Lines held while a far-ahead line waits for its neighbours' verdict, at most.
MAX_HELD = 8
# Lines back at the old time that set a held far-ahead line aside.
VOTES_AGAINST = 2


# namedtuples, as typing.NamedTuple would make them, without importing typing (~11 M
# instructions of replay's start-up, issue 30).
ThreadKey = namedtuple("ThreadKey", ("host", "daemon", "pid", "tid"))   # str, str, int, int
ThreadKey.__doc__ = "Which thread a line is from (plain tuples of these four are used inside)."

RequestKey = namedtuple("RequestKey", ("host", "token"))   # str, str
RequestKey.__doc__ = "Which request a line belongs to."

ReassemblyChanges = namedtuple("ReassemblyChanges", (
    "threads",    # dict[ThreadKey, dict | None]
    "requests",   # dict[RequestKey, dict | None]
    "finished",   # dict[int, list[RequestKey] | None]
))
ReassemblyChanges.__doc__ = ("What changed since the last take: a thread's or request's state, "
                             "or None for one gone; a group of ended requests' keys (None: the "
                             "group is forgotten).")


class Call:
    """A call open on a thread (or a slow-thread processing run)."""

    __slots__ = ("op", "client", "accepted", "started", "kind", "token", "state", "session",
                 "path")

    def __init__(self, op, client, accepted, started, kind, token=None, state=None, session=None,
                 path=None):
        self.op = op
        self.client = client
        self.accepted = accepted
        self.started = started
        self.kind = kind
        self.token = token
        self.state = state
        self.session = session
        self.path = path  # the path a name-server call names (its NS098 line)


# At most this many lines of one thread stamped the same millisecond are remembered to
# tell a repeat from a genuine line of that millisecond (docs/record-rules.md, 7).
MAX_SAME_STAMP = 64


class Thread:
    __slots__ = ("daemon", "accept", "call", "sess", "trans", "latest", "at_latest")

    def __init__(self, daemon, accept=None, call=None, sess=False, trans=False, latest=0):
        self.daemon = daemon
        self.accept = accept
        self.call = call
        self.sess = sess
        self.trans = trans
        self.latest = latest
        # The digests of the lines read on the thread at `latest` (an int for one, a tuple
        # for several): a line of that stamp is a repeat only if it is one of them.
        self.at_latest = None

    def read_at_latest(self, digest: int) -> bool:
        same = self.at_latest
        return digest == same if type(same) is int else same is not None and digest in same

    def moved_to(self, ts: int, digest: int) -> None:
        """A line `digest` stamped `ts` was read on the thread."""
        same = self.at_latest
        if ts != self.latest or same is None:
            self.at_latest = digest
        elif type(same) is int:
            self.at_latest = (same, digest)
        elif len(same) < MAX_SAME_STAMP:
            self.at_latest = same + (digest,)
        self.latest = ts


class Process:
    """One (host, daemon, pid): when it was first and last seen, how much it logged."""

    __slots__ = ("first", "last", "lines", "tids", "succeeded")

    def __init__(self, first, last=None, lines=0, tids=None, succeeded=False):
        self.first = first
        self.last = first if last is None else last
        self.lines = lines
        self.tids: set = set(tids or ())
        self.succeeded = succeeded  # a restart was counted for this process replacing another


class HostClock:
    """Event time of one host: its latest line, and far-ahead lines held for a verdict."""

    __slots__ = ("latest", "held", "votes")

    def __init__(self, latest):
        self.latest = latest
        self.held: list | None = None
        self.votes = 0


class Request:
    __slots__ = (
        "host", "token", "op", "client", "nfiles", "accepted", "started", "request_ret",
        "proc_first", "proc_ms", "polls", "poll_ms", "success_end", "done_start", "done_ms",
        "closing", "latest", "queued", "putdone_first", "files",
    )

    def __init__(self, host, token, op=None, client=None, nfiles=None, accepted=None,
                 started=None, request_ret=None, proc_first=None, proc_ms=None, polls=0,
                 poll_ms=0, success_end=None, done_start=None, done_ms=None, closing=None,
                 latest=0, queued=False, putdone_first=None, files=None):
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
        self.files = files  # SURLs of the put/get's DP098 file lines (name-server linking)


class ReassemblyStats(Counters):
    """The reassembler's counters over a run (the replay's summary prints them)."""

    __slots__ = FIELDS = (
        "requests",        # request records emitted
        "calls",           # call records emitted
        "evictions",       # requests emitted early because of the in-flight cap
        "expired",         # requests emitted by the event-time timeout
        "dropped_accepts",  # accept lines whose connection failed or was superseded
        "late_lines",      # lines naming a request that had already ended
        "stray_returns",   # `returns` with no open call on its thread
        "noreturn_calls",  # calls closed without their `returns`
        "orphans",         # requests first seen after their put/get (input began mid-way)
        "restarts",        # daemon restarts: a main process replaced by a newer one
        "stray_processes",  # other processes that logged a while beside the main one
        "thread_evictions",  # threads dropped because of the thread cap
        "expired_threads",   # threads silent past the timeout (open calls closed)
        "expired_sessions",  # name-server sessions cut by the timeout or the cap
        "duplicate_lines",   # lines read twice (overlapping input), ignored
        "future_lines",      # lone lines far ahead of their host's time, set aside
        "clock_steps",       # the stamps of a daemon went back (NTP step)
    )


def _diff(a, b):
    """A duration: never negative (a clock step or lines out of order would make it so)."""
    if a is None or b is None:
        return None
    return a - b if a > b else 0


class Reassembler:
    def __init__(self, emit: Callable[[dict], None], timeout_ms: int = 3_600_000,
                 max_in_flight: int = 1_000_000, allowance_ms: int = 2_000,
                 finished_memory: int = 100_000, max_threads: int = 100_000,
                 grace_ms: int = 60_000, jump_ms: int = 300_000,
                 duplicate_memory: int = 1 << 17):
        self.emit = emit
        # Told when a processing run starts and ends (parsers/linking.py), or None.
        self.runs = None
        self.timeout_ms = timeout_ms
        self.max_in_flight = max_in_flight
        self.allowance_ms = allowance_ms
        self.finished_memory = finished_memory
        self.max_threads = max_threads
        self.grace_ms = grace_ms
        self.jump_ms = jump_ms
        self.duplicate_memory = duplicate_memory
        self.threads: dict[tuple, Thread] = {}
        self.requests: dict[tuple, Request] = {}
        # Per host, least recently active first: timeouts and evictions pop from the front.
        self._thread_order: dict[str, OrderedDict] = {}
        self._request_order: dict[str, OrderedDict] = {}
        # Requests that ended -> their group: a later line of one is late, not an orphan.
        self.finished: OrderedDict[tuple, int] = OrderedDict()
        self.finished_groups: dict[int, dict[tuple, None]] = {}
        self._group = 0
        self.processes: dict[tuple, dict[int, Process]] = {}  # (host, daemon) -> pid -> Process
        self.clocks: dict[str, HostClock] = {}
        self._stream_now: dict[tuple, int] = {}  # (host, daemon) -> its current stamp
        # host -> its last counted clock step: (from, to, daemons whose logs showed it)
        self._host_steps: dict[str, tuple[int, int, list]] = {}
        # Recent events (their hashes), to recognise input read twice.
        self._seen: set[int] = set()
        self._seen_order: deque[int] = deque()
        self.stats = ReassemblyStats()
        # When each counted restart happened: (first line of the new process, host, daemon).
        self.restart_log: deque = deque(maxlen=10_000)
        # Optional observer of every call that returned, for views of busy threads:
        # on_span(host, daemon, pid, tid, kind, started, ended); kind is "proc" for a
        # slow-thread processing run, "call" for anything on a fast or name-server thread.
        self.on_span: Callable | None = None
        self.slow_queue_depth = 0
        self.latest: int | None = None
        # What changed since the last take_changes(), once track_changes() was called.
        self._changed_threads: set | None = None
        self._changed_requests: set | None = None
        self._changed_groups: set | None = None
        self._handlers = {
            "accept": self._on_accept, "conn_failure": self._on_conn_failure,
            "call": self._on_call, "token": self._on_token, "slow_start": self._on_slow_start,
            "status": self._on_status, "returns": self._on_returns,
            "startup": self._on_startup,
            "file": self._on_file, "detail": self._on_detail, "other": self._on_line,
        }

    def stat(self, name: str) -> int:
        """One counter of `stats` by name (the compiled engine's without a snapshot)."""
        return getattr(self.stats, name)

    # -- input ---------------------------------------------------------------------------
    def feed(self, ev: Event) -> None:
        ts, host = ev[0], ev[1]
        clock = self.clocks.get(host)
        if clock is None:
            clock = self.clocks[host] = HostClock(ts)
            if self.latest is None or ts > self.latest:
                self.latest = ts
        elif clock.held is not None:
            if not self._judge_held(clock, ev):
                return
        elif ts > clock.latest:
            if ts > clock.latest + self.jump_ms:
                clock.held = [ev]  # far ahead of its host: wait for the next lines' verdict
                clock.votes = 0
                return
            clock.latest = ts  # the common line: _accept_event inlined (the hot path)
            if ts > self.latest:
                self.latest = ts
            self._process(ev)
            return
        self._accept_event(clock, ev)

    def _judge_held(self, clock: HostClock, ev: Event) -> bool:
        """A line while far-ahead lines are held: True if it is to be processed now."""
        ts, held = ev[0], clock.held
        if ts >= held[0][0] - self.allowance_ms:  # time did move on: release the held lines
            clock.held = None
            for old in held:
                self._accept_event(clock, old)
            return True
        if ts > clock.latest + self.jump_ms:  # another line ahead of the old time
            held.append(ev)
            if len(held) >= MAX_HELD:
                clock.held = None
                for old in held:
                    self._accept_event(clock, old)
            return False
        clock.votes += 1  # back at the old time
        if clock.votes >= VOTES_AGAINST:
            self.stats.future_lines += len(held)
            clock.held = None
        return True

    def _accept_event(self, clock: HostClock, ev: Event) -> None:
        ts = ev[0]
        if ts > clock.latest:
            clock.latest = ts
            if self.latest is None or ts > self.latest:
                self.latest = ts
        self._process(ev)

    def _process(self, ev: Event) -> None:
        ts, host, daemon, pid, tid, _, role = ev[:7]
        key = (host, daemon, pid, tid)
        th = self.threads.get(key)
        digest = hash(ev)
        seen = self._seen
        if digest in seen:
            # The same line again, not moving its thread on: input read twice. (With
            # whole-second stamps, same-second repeats may be genuine: only earlier ones.)
            # A line of the thread's latest stamp is a repeat only if that stamp already
            # gave it: a thread may log the same line twice in one millisecond (a call
            # taking no time), and after a clock step back, a stamp seen before.
            if th is not None and (ts < th.latest or (ts == th.latest and ts % 1000
                                                      and th.read_at_latest(digest))):
                self.stats.duplicate_lines += 1
                return
        else:  # remembered among the last `duplicate_memory` lines
            seen.add(digest)
            order = self._seen_order
            order.append(digest)
            if len(order) > self.duplicate_memory:
                seen.discard(order.popleft())
        stream = (host, daemon)
        now = self._stream_now.get(stream)
        if now is None or ts > now:
            self._stream_now[stream] = ts
        elif ts < now - self.allowance_ms:  # the daemon's clock went back
            if not self._same_step(host, daemon, now, ts):
                self.stats.clock_steps += 1
            self._stream_now[stream] = ts
        if th is None:
            th = self._new_thread(key, daemon, ts)
        else:
            self._thread_order[host].move_to_end(key)
        th.moved_to(ts, digest)
        proc = self.processes[stream][pid]
        proc.lines += 1
        if ts > proc.last:
            proc.last = ts
        rkey = self._handlers[role](ev, th, key)
        if self._changed_threads is not None:
            self._changed_threads.add(key)
            if rkey is not None:
                self._changed_requests.add(rkey)

    def _same_step(self, host: str, daemon: str, old: int, new: int) -> bool:
        """Whether a daemon's step back from `old` to `new` is the host's last counted step
        seen in this daemon's log: the host's clock stepped once, every daemon's stamps go
        back across the same stretch (docs/record-rules.md, "Clock steps")."""
        last = self._host_steps.get(host)
        allowance = self.allowance_ms
        if (last is not None and daemon not in last[2] and new < last[0] - allowance
                and old > last[1] + allowance):
            last[2].append(daemon)
            return True
        self._host_steps[host] = (old, new, [daemon])
        return False

    def _new_thread(self, key: tuple, daemon: str, ts: int) -> Thread:
        host, _, pid, tid = key
        procs = self.processes.setdefault((host, daemon), {})
        proc = procs.get(pid)
        if proc is None:
            proc = procs[pid] = Process(ts)
        proc.tids.add(tid)
        th = self.threads[key] = Thread(daemon, latest=ts)
        order = self._thread_order.get(host)
        if order is None:
            order = self._thread_order[host] = OrderedDict()
        order[key] = None
        if len(self.threads) > self.max_threads:
            self._evict_thread()
        return th

    def _evict_thread(self) -> None:
        """The thread cap is reached: drop the least recently active thread of any host."""
        threads = self.threads
        oldest = least_recent(self._thread_order, lambda key: threads[key].latest)
        self.stats.thread_evictions += 1
        self._drop_thread(oldest)

    def _drop_thread(self, key: tuple) -> None:
        """Forget a thread: its open call never returns, a pending accept is dropped."""
        th = self.threads.pop(key)
        del self._thread_order[key[0]][key]
        if th.call is not None:
            self._close_noreturn(key, th)
        if th.accept is not None:
            self.stats.dropped_accepts += 1
        if th.sess or th.trans:
            self.stats.expired_sessions += 1
        procs = self.processes.get((key[0], key[1]))
        proc = procs.get(key[2]) if procs else None
        if proc is not None:
            proc.tids.discard(key[3])
        if self._changed_threads is not None:
            self._changed_threads.add(key)

    def _on_accept(self, ev, th, key):
        if th.accept is not None:
            self.stats.dropped_accepts += 1
        th.accept = ev.ts

    def _on_conn_failure(self, ev, th, key):
        if th.accept is not None:
            self.stats.dropped_accepts += 1
            th.accept = None
        return self._on_line(ev, th, key)

    def _on_startup(self, ev, th, key):
        """`started`: a process begins. If this pid logged before, the pid was reused:
        the earlier process with this pid is over, and its open calls never return."""
        host, daemon, pid, tid = key
        proc = self.processes[(host, daemon)][pid]
        if proc.lines > 1:
            for other in sorted(t for t in proc.tids if t != tid):  # lowest first: reassembly.rs's order
                self._drop_thread((host, daemon, pid, other))
            self.stats.restarts += 1
            self.restart_log.append((ev.ts, host, daemon))
            proc.first, proc.lines = ev.ts, 1
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
        if self.runs is not None:
            self.runs.run_started(ev.host, ev.token, ev.ts, req.files or ())
        self._dequeue(req)
        self._touch(rkey, req, ev.ts)
        return rkey

    def _on_file(self, ev, th, key):
        """A file of a put/get (`DP098 - put <i> <surl>`): kept for name-server linking."""
        call = th.call
        if ev.surl is not None and call is not None and call.kind == STEP and call.op in REQUEST_OPS:
            req = self.requests.get((ev.host, call.token)) if call.token else None
            if req is not None:
                if req.files is None:
                    req.files = []
                req.files.append(ev.surl)
        return self._on_line(ev, th, key)

    def _on_detail(self, ev, th, key):
        call = th.call
        if ev.path is not None and call is not None and call.kind == PLAIN and call.path is None:
            call.path = ev.path
        return self._on_line(ev, th, key)

    def seen_daemon(self, host: str, daemon: str) -> bool:
        """Whether a line of this host's daemon was ever read."""
        return (host, daemon) in self._stream_now

    def stream_time(self, host: str, daemon: str) -> int | None:
        """The current stamp of a host's daemon (a far-ahead line held or set aside
        does not move it)."""
        return self._stream_now.get((host, daemon))

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
        if self.on_span is not None:
            self.on_span(*key, "proc" if call.op.startswith("proc_") else "call", call.started, ts)
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
            if call.kind == PROC and self.runs is not None:
                self.runs.run_ended(ev.host, call.token, call.started, None)
            return None
        self._touch(rkey, req, ts)
        op = call.op
        if call.kind == PROC:
            req.proc_ms = _diff(ts, call.started)
            if self.runs is not None:
                self.runs.run_ended(ev.host, call.token, call.started, ts)
        elif op in REQUEST_OPS:
            req.request_ret = ts
            if rc != 0:
                self._finish(rkey, req, "failed", ts)
        elif op in STATUS_OPS:
            req.polls += 1
            req.poll_ms += _diff(ts, call.started)
            if call.state == "SUCCESS":
                if req.success_end is None:
                    req.success_end = ts
                self._dequeue(req)
            elif call.state == "FAILED":
                self._finish(rkey, req, "failed", ts)
        else:  # putdone, relfiles, abortreq
            req.done_start = call.started
            req.done_ms = _diff(ts, call.started)
            req.closing = op
            self._finish(rkey, req, "aborted" if op == "abortreq" else "success", ts)
        return rkey

    # -- requests ------------------------------------------------------------------------
    def _admit(self, rkey, req: Request) -> Request:
        self.requests[rkey] = req
        order = self._request_order.get(rkey[0])
        if order is None:
            order = self._request_order[rkey[0]] = OrderedDict()
        order[rkey] = req
        while len(self.requests) > self.max_in_flight:
            self._evict_request()
        return req

    def _evict_request(self) -> None:
        """The cap is reached: emit the least recently active open request of any host."""
        requests = self.requests
        rkey = least_recent(self._request_order, lambda key: requests[key].latest)
        oldest = requests[rkey]
        self._forget(rkey)
        self.stats.evictions += 1
        self._expire(rkey, oldest, BY_EVICTION)

    def _forget(self, rkey) -> None:
        del self.requests[rkey]
        del self._request_order[rkey[0]][rkey]

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
        self._request_order[rkey[0]].move_to_end(rkey)

    def _dequeue(self, req: Request) -> None:
        if req.queued:
            req.queued = False
            self.slow_queue_depth -= 1

    def _finish(self, rkey, req: Request, status: str, ended: int) -> None:
        self._forget(rkey)
        self._dequeue(req)
        self._remember_finished(rkey)
        self.emit(self._request_record(req, status, ended, BY_LINE))
        if self._changed_requests is not None:
            self._changed_requests.add(rkey)

    def _remember_finished(self, rkey) -> None:
        group = self._group
        members = self.finished_groups.setdefault(group, {})
        members[rkey] = None
        self.finished[rkey] = group
        if len(members) >= FINISHED_GROUP:
            self._group += 1
        changed = self._changed_groups
        if changed is not None:
            changed.add(group)
        if len(self.finished) > self.finished_memory:
            old_key, old_group = self.finished.popitem(last=False)
            members = self.finished_groups[old_group]
            del members[old_key]
            if not members:
                del self.finished_groups[old_group]
            if changed is not None:
                changed.add(old_group)

    def _expire(self, rkey, req: Request, reason: str) -> None:
        """Emit a request that saw no end (rules 5 and 6 of the record rules); its token
        is remembered like a finished one, so its later lines are late, never a second
        record."""
        self._dequeue(req)
        self._remember_finished(rkey)
        if req.op == "get" and req.success_end is not None:
            record = self._request_record(req, "success", req.success_end, reason)
        else:
            record = self._request_record(req, "incomplete", req.latest, reason)
        self.emit(record)
        if self._changed_requests is not None:
            self._changed_requests.add(rkey)

    def _request_record(self, req: Request, status: str, ended: int, reason: str) -> dict:
        self.stats.requests += 1
        start = req.accepted if req.accepted is not None else req.started
        # The keys of schema.REQUEST_KEYS, in order (tests/parsers/test_schema.py).
        return {
            "kind": "request", "host": req.host, "token": req.token, "op": req.op,
            "client": req.client, "nfiles": req.nfiles, "status": status,
            "accepted": req.accepted, "started": req.started, "ended": ended,
            "auth_ms": _diff(req.started, req.accepted),
            "request_ms": _diff(req.request_ret, req.started),
            "queue_ms": _diff(req.proc_first, req.request_ret),
            "proc_ms": req.proc_ms,
            "polls": req.polls, "poll_ms": req.poll_ms,
            "ready_wait_ms": _diff(req.success_end, req.request_ret),
            "transfer_ms": _diff(req.putdone_first, req.success_end) if req.closing == "putdone" else None,
            "done_ms": req.done_ms,
            "total_ms": _diff(ended, start),
            "end_reason": reason,
        }

    # -- calls ---------------------------------------------------------------------------
    def _emit_call(self, key, th: Thread, call: Call, ended, rc) -> None:
        if rc == 0 and call.op in SESSION_OPEN:
            setattr(th, SESSION_OPEN[call.op], True)
        if call.op in SESSION_CLOSE:
            setattr(th, SESSION_CLOSE[call.op], False)
        self.stats.calls += 1
        host, daemon, pid, tid = key
        self.emit({  # the keys of schema.CALL_KEYS, in order (tests/parsers/test_schema.py)
            "kind": "call", "host": host, "daemon": daemon, "pid": pid,
            "thread": tid if tid >= 0 else None, "op": call.op, "client": call.client,
            "started": call.started, "ended": ended, "duration_ms": _diff(ended, call.started),
            "rc": rc, "auth_ms": _diff(call.started, call.accepted), "session": call.session,
            "token": None, "path": call.path,
        })

    def _close_noreturn(self, key, th: Thread) -> None:
        """The thread's call will never log its `returns` (a new call, a restart, a timeout)."""
        call = th.call
        th.call = None
        self.stats.noreturn_calls += 1
        if call.kind == PLAIN or (call.kind == STEP and call.token is None):
            self._emit_call(key, th, call, None, None)
        elif call.kind == PROC and self.runs is not None:
            self.runs.run_ended(key[0], call.token, call.started, None)

    # -- processes -----------------------------------------------------------------------
    def _retire_processes(self, grace_ms: int, at_end: bool = False) -> None:
        """End the processes that stayed silent for `grace_ms` while a newer process of the
        same daemon logged on (at the end of the input also those that never logged once a
        newer one had started). The oldest process still alive, so ended, was replaced: a
        restart, counted once for the newest process that replaced it. Any other was a
        stray process that logged for a while beside the main one."""
        for (host, daemon), procs in self.processes.items():
            if len(procs) < 2:
                continue
            # Oldest first; a process is judged against the newer ones after it: the
            # latest line of any of them, and the first line of the next (sorting keeps
            # this O(n log n) in processes, however many strays a day brings).
            by_first = sorted(procs.items(), key=lambda item: item[1].first)
            newer_last, retired = None, []
            for i in range(len(by_first) - 2, -1, -1):
                pid, proc = by_first[i]
                later = by_first[i + 1][1]
                newer_last = later.last if newer_last is None else max(newer_last, later.last)
                if newer_last > proc.last + grace_ms or (at_end and later.first > proc.last):
                    retired.append(pid)
            if not retired:
                continue
            newest = by_first[-1][1]
            alive = [pid for pid, _ in by_first]  # oldest first
            gone: set = set()
            for pid in sorted(retired, key=lambda p: procs[p].last):
                proc = procs[pid]
                while alive[0] in gone:
                    alive.pop(0)
                if alive[0] == pid and not newest.succeeded:
                    newest.succeeded = True
                    self.stats.restarts += 1
                    self.restart_log.append((newest.first, host, daemon))
                else:
                    self.stats.stray_processes += 1
                for tid in sorted(proc.tids):  # lowest first, as reassembly.rs walks them
                    self._drop_thread((host, daemon, pid, tid))
                del procs[pid]
                gone.add(pid)

    def _expire_processes(self, horizons: dict[str, int]) -> None:
        """Forget the processes with no thread left, silent since their host's horizon."""
        for (host, _), procs in self.processes.items():
            horizon = horizons.get(host)
            if horizon is None:  # a host restored without its clock: nothing to judge by
                continue
            for pid in [pid for pid, proc in procs.items() if proc.last < horizon and not proc.tids]:
                del procs[pid]

    # -- event time ----------------------------------------------------------------------
    def watermark(self, host: str | None = None) -> int | None:
        latest = self.latest if host is None else self.clocks[host].latest
        return None if latest is None else latest - self.allowance_ms

    def advance(self) -> None:
        """Emit what has seen no line for `timeout_ms` of its host's event time before the
        host's watermark; end processes replaced by newer ones. Walks only what expires."""
        horizons = {}
        for host, clock in self.clocks.items():
            horizon = horizons[host] = clock.latest - self.allowance_ms - self.timeout_ms
            order = self._request_order.get(host)
            while order:
                rkey, req = next(iter(order.items()))
                if req.latest >= horizon:
                    break
                self._forget(rkey)
                self.stats.expired += 1
                self._expire(rkey, req, BY_TIMEOUT)
            order = self._thread_order.get(host)
            threads = self.threads
            while order:
                key = next(iter(order))
                if threads[key].latest >= horizon:
                    break
                self.stats.expired_threads += 1
                self._drop_thread(key)
        self._expire_processes(horizons)
        self._retire_processes(self.grace_ms)

    def finish(self) -> None:
        """End of input: every open call and request is emitted as it stands."""
        for clock in self.clocks.values():
            held, clock.held = clock.held, None
            if held and clock.votes:
                self.stats.future_lines += len(held)
            elif held:
                for ev in held:
                    self._accept_event(clock, ev)
        self._retire_processes(self.grace_ms, at_end=True)
        for key, th in list(self.threads.items()):
            if th.call is not None:
                self._close_noreturn(key, th)
        self.threads.clear()
        self._thread_order.clear()
        for order in self._request_order.values():
            while order:
                rkey, req = order.popitem(last=False)
                del self.requests[rkey]
                self._expire(rkey, req, BY_INPUT_END)

    @property
    def in_flight(self) -> int:
        return len(self.requests)

    def in_flight_by_host(self) -> dict[str, int]:
        """Open requests per host (O(open requests): for the metrics, not per line)."""
        counts: dict[str, int] = {}
        for host, _ in self.requests:
            counts[host] = counts.get(host, 0) + 1
        return counts

    def slow_queue_by_host(self) -> dict[str, int]:
        """Requests waiting for a slow thread, per host."""
        counts: dict[str, int] = {}
        for req in self.requests.values():
            if req.queued:
                counts[req.host] = counts.get(req.host, 0) + 1
        return counts

    def hosts(self) -> list[str]:
        """The hosts whose event time is known, in the order they were first seen."""
        return list(self.clocks)

    def thread_keys(self) -> list[ThreadKey]:
        """The threads open now."""
        return [ThreadKey(*k) for k in self.threads]

    @property
    def remembered_ended(self) -> int:
        """How many ended requests' tokens are remembered (their late lines stay late)."""
        return len(self.finished)

    def count_duplicates(self, n: int) -> None:
        """Lines found repeated before they reached the reassembler (a re-read archive)."""
        self.stats.duplicate_lines += n

    # -- state, for a restart -------------------------------------------------------
    @property
    def tracking(self) -> bool:
        return self._changed_threads is not None

    def track_changes(self) -> None:
        """From now on, take_changes() returns what changed since its last call."""
        self._changed_threads, self._changed_requests, self._changed_groups = set(), set(), set()

    def take_changes(self) -> ReassemblyChanges:
        """The threads, requests and groups of ended requests changed since the last
        take. The ended groups carry the finished-token memory, so that a restored
        reassembler still knows a late line for one when it sees it."""
        threads = {ThreadKey(*k): thread_state(self.threads.get(k)) for k in self._changed_threads}
        requests = {RequestKey(*k): request_state(self.requests.get(k))
                    for k in self._changed_requests}
        groups = {g: [RequestKey(*k) for k in self.finished_groups[g]]
                  if g in self.finished_groups else None for g in self._changed_groups}
        self._changed_threads.clear()
        self._changed_requests.clear()
        self._changed_groups.clear()
        return ReassemblyChanges(threads, requests, groups)

    def clock_state(self) -> dict:
        """Processes and host clocks, small enough to store whole at every checkpoint."""
        return {
            "processes": [[h, d, pid, p.first, p.last, p.lines]
                          for (h, d), procs in self.processes.items()
                          for pid, p in procs.items()],
            "hosts": [[h, c.latest] for h, c in self.clocks.items()],
            # Each (host, daemon) stream's current stamp: a restored reassembler (and its
            # linker) dates, steps and links as one that never stopped.
            "streams": sorted([h, d, ts] for (h, d), ts in self._stream_now.items()),
        }

    def restore(self, threads: dict, requests: dict, clock: dict | None = None,
                finished: dict | None = None) -> None:
        """Load state saved by take_changes and clock_state (keys as tuples)."""
        for host, daemon, pid, first, last, lines in (clock or {}).get("processes", ()):
            self.processes.setdefault((host, daemon), {})[pid] = Process(first, last, lines)
        for host, latest in (clock or {}).get("hosts", ()):
            self.clocks[host] = HostClock(latest)
            if self.latest is None or latest > self.latest:
                self.latest = latest
        for host, daemon, ts in (clock or {}).get("streams", ()):  # absent in older states
            self._stream_now[(host, daemon)] = ts
        for key, state in sorted(threads.items(), key=lambda kv: kv[1]["latest"]):
            key = tuple(key)
            host, daemon, pid, tid = key
            self.threads[key] = thread_from_state(state)
            self._thread_order.setdefault(host, OrderedDict())[key] = None
            procs = self.processes.setdefault((host, daemon), {})
            proc = procs.get(pid)
            if proc is None:
                proc = procs[pid] = Process(state["latest"])
            proc.tids.add(tid)
        for group in sorted(finished or {}):
            members = self.finished_groups[group] = {}
            for key in finished[group]:
                members[tuple(key)] = None
                self.finished[tuple(key)] = group
            self._group = group + 1  # carry on in a new group: the stored one stays as is
        for key, state in sorted(requests.items(), key=lambda kv: kv[1]["latest"]):
            req = Request(**state)
            key = tuple(key)
            self.requests[key] = req
            self._request_order.setdefault(key[0], OrderedDict())[key] = req
            if req.queued:
                self.slow_queue_depth += 1
            clock_of_host = self.clocks.get(req.host)
            if clock_of_host is None:
                self.clocks[req.host] = HostClock(req.latest)
            elif req.latest > clock_of_host.latest:
                clock_of_host.latest = req.latest
            if self.latest is None or req.latest > self.latest:
                self.latest = req.latest


def least_recent(orders: dict, latest_of: Callable):
    """The key, of any host, least recently active: per-host activity orders hold their
    least recent first, so only the fronts are compared."""
    oldest, oldest_latest = None, None
    for order in orders.values():
        if order:
            key = next(iter(order))
            latest = latest_of(key)
            if oldest is None or latest < oldest_latest:
                oldest, oldest_latest = key, latest
    return oldest


def request_state(req: Request | None) -> dict | None:
    return None if req is None else {s: getattr(req, s) for s in Request.__slots__}


def thread_state(th: Thread | None) -> dict | None:
    if th is None:
        return None
    # at_latest belongs to the duplicate memory, which a state does not carry either.
    state = {s: getattr(th, s) for s in Thread.__slots__ if s not in ("call", "at_latest")}
    call = th.call
    state["call"] = None if call is None else {s: getattr(call, s) for s in Call.__slots__}
    return state


def thread_from_state(state: dict) -> Thread:
    call = state.get("call")
    th = Thread(**{k: v for k, v in state.items() if k != "call"})
    th.call = None if call is None else Call(**call)
    return th
