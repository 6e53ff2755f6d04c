"""The DPM daemon: listen backlog, fast threads serving client calls, restarts.

A connection takes the lowest free fast thread (or waits in the backlog; past the
backlog it is refused and nothing is logged). The thread logs `request accepted`,
authenticates the client (or logs a connection failure), then serves one call:
DP092, DP098 lines, and `returns`. Put/get queue their request for the slow threads
(`slowpool.py`) just before their `returns` is logged, so a slow thread may log
`processing` first.

Each daemon process (`Process`) has its pid and its own thread pools; every scheduled
step carries its process, and the steps of a dead process do nothing. A restart kills
the process at once and starts a new one after a downtime; an overlapping restart
(`restart_overlap`) starts the new one at once and lets the old one finish the calls it
has in progress, slowly (it is shutting down), until it dies `restart_overlap` seconds
later with the calls still unfinished. Requests (the database) survive both.
"""

from __future__ import annotations

import heapq
import random
from collections import deque

from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.dpns import NameServer
from dpmstream.simulator.engine import Engine
from dpmstream.simulator.identities import Namespace, make_uuid
from dpmstream.simulator.logwriter import LogWriter
from dpmstream.simulator.model import ABORTED, FAILED, SUCCESS, Conn, Request
from dpmstream.simulator.slowpool import SlowPool
from dpmstream.simulator.truth import Truth, span

AUTH_FAILURES = (
    "Could not establish an authenticated connection: _Csec_recv_token: Connection closed by remote end !",
    "Failure getting the request: Timed out",
)
PUT_FAIL_RC = (13, 28, 1015)     # EACCES, ENOSPC, an internal serrno
GET_FAIL_RC = (2, 13)            # ENOENT, EACCES
EARLY_FAIL_RC = 22               # EINVAL: refused before a token exists
STATUS_OPS = {"put": "getstatus_putreq", "get": "getstatus_getreq"}


class Process:
    """One DPM daemon process: its pid and thread pools (fast: 0..F-1, slow: F..F+S-1)."""

    __slots__ = ("pid", "free_fast", "busy_fast", "free_slow", "busy_slow", "draining", "dead")

    def __init__(self, pid: int, fthreads: int, sthreads: int):
        self.pid = pid
        self.free_fast = list(range(fthreads))
        self.busy_fast: dict[int, Conn] = {}
        self.free_slow = list(range(fthreads, fthreads + sthreads))
        self.busy_slow: dict[int, Request] = {}
        self.draining = False      # replaced by a newer process: finishes, takes nothing new
        self.dead = False


class Dpm:
    def __init__(self, eng: Engine, rng: random.Random, cfg: SimConfig, log: LogWriter,
                 dpns: NameServer, truth: Truth, namespace: Namespace):
        self.eng, self.rng, self.cfg, self.svc = eng, rng, cfg, cfg.service
        self.log, self.dpns, self.truth, self.namespace = log, dpns, truth, namespace
        self.proc = Process(cfg.pid, cfg.fthreads, cfg.sthreads)
        self.pids = [cfg.pid]
        self.up = True
        self.backlog: deque[Conn] = deque()
        self.slow = SlowPool(self)
        # The old process's slowness while it shuts down has its own generator: the
        # model's draws stay those of a run without an overlapping restart.
        self._stall_rng = random.Random(f"{cfg.seed}/overlap")
        self._stall_mean_ms = cfg.restart_overlap * 1000 / 4
        self.refused = 0
        self.auth_failures = 0
        self.killed_calls = 0      # fast-thread calls cut by a restart
        self.killed_runs = 0       # slow-thread processing runs cut by a restart

    # -- logging and scheduling helpers ----------------------------------------------

    def line(self, proc: Process, tid: int, func: str, msg: str) -> int:
        return self.log.emit(self.eng.now, proc.pid, tid, func, msg)

    def req_line(self, req: Request, proc: Process, tid: int, func: str, msg: str) -> int:
        """A line of a request: ordered with its other lines, and counted for `ended`."""
        printed = self.log.emit(self.eng.now, proc.pid, tid, func, msg, req)
        req.truth.line(printed)
        return printed

    def later(self, proc: Process, delay: int, fn, *args) -> None:
        """Schedule the next step of a call of `proc`: a process shutting down is slow."""
        if proc.draining:
            delay += int(self._stall_rng.expovariate(1.0 / self._stall_mean_ms))
        self.eng.after(delay, fn, *args)

    def _by(self, conn: Conn, op: str) -> str:
        client = conn.stream.client
        return f"DP092 - {op} request by {client.dn} ({client.ids}) from {client.host}"

    # -- connections -----------------------------------------------------------------

    def start(self) -> None:
        self.line(self.proc, -1, "dpm_serv", "started")

    def connect(self, conn: Conn) -> None:
        if self.up:
            proc = self.proc
            if proc.free_fast:
                self._accept(proc, heapq.heappop(proc.free_fast), conn)
                return
            if len(self.backlog) < self.cfg.backlog:
                self.backlog.append(conn)
                return
        self.refused += 1
        self._fail(conn, restart=not self.up)

    def _accept(self, proc: Process, tid: int, conn: Conn) -> None:
        proc.busy_fast[tid] = conn
        conn.accepted = None
        if self.cfg.accept_lines:
            client = conn.stream.client
            conn.accepted = self.line(proc, tid, "dpm_serv", f"[{client.ip}] ({client.host}): request accepted")
        self.later(proc, self.svc.auth.draw(self.rng), self._authenticated, proc, tid, conn)

    def _authenticated(self, proc: Process, tid: int, conn: Conn) -> None:
        if proc.dead:
            return
        if self.rng.random() < self.cfg.auth_fail_rate:
            client = conn.stream.client
            self.line(proc, tid, "dpm_serv", f"[{client.ip}] ({client.host}): {self.rng.choice(AUTH_FAILURES)}")
            self.auth_failures += 1
            self._release(proc, tid)
            self._fail(conn, restart=False)
            return
        kind = conn.kind
        if kind in ("put", "get"):
            self._serve_request(proc, tid, conn)
        elif kind == "status":
            self._serve_status(proc, tid, conn)
        elif kind in ("putdone", "relfiles", "abortreq"):
            self._serve_closing(proc, tid, conn)
        else:
            self._serve_plain(proc, tid, conn)

    def _release(self, proc: Process, tid: int) -> None:
        del proc.busy_fast[tid]
        heapq.heappush(proc.free_fast, tid)
        if self.backlog and proc is self.proc:
            self._accept(proc, heapq.heappop(proc.free_fast), self.backlog.popleft())

    def _reply(self, proc: Process, tid: int, conn: Conn, result) -> None:
        self._release(proc, tid)
        self.eng.after(self.svc.net.draw(self.rng), conn.stream.on_reply, conn, result)

    def _fail(self, conn: Conn, restart: bool) -> None:
        self.eng.after(self.svc.net.draw(self.rng), conn.stream.on_fail, conn, restart)

    # -- put and get -----------------------------------------------------------------

    def _serve_request(self, proc: Process, tid: int, conn: Conn) -> None:
        op, client, rng = conn.kind, conn.stream.client, self.rng
        func = f"dpm_srv_{op}"
        opened = self.line(proc, tid, func, self._by(conn, op))
        fail = rng.random()
        if fail < self.cfg.put_fail_rate / 2:
            # Refused before a token exists: a plain call record. DP092 and returns come
            # in one step so that no restart can separate them.
            call = self.truth.new_call("dpm", proc.pid, tid, op, client.host, conn.accepted, opened)
            call.returned(self.line(proc, tid, func, f"returns {EARLY_FAIL_RC}"), EARLY_FAIL_RC)
            self._reply(proc, tid, conn, (EARLY_FAIL_RC, None))
            return
        n = self.cfg.files
        if op == "put":
            paths = [self.namespace.new_path(client) for _ in range(n)]
        else:
            paths = [self.namespace.existing_path() for _ in range(n)]
        req = Request(make_uuid(rng), op, client, paths,
                      [self.namespace.surl(p) for p in paths], [make_uuid(rng) for _ in range(n)])
        req.truth = self.truth.new_request(req.token, op, client.host, n, conn.accepted, opened)
        self.req_line(req, proc, tid, func, f"DP098 - {op} {n} {req.token}")
        for i, surl in enumerate(req.surls):
            self.req_line(req, proc, tid, func, f"DP098 - {op} {i} {surl}")
        delay = self.svc.put_call.draw(rng)
        if fail < self.cfg.put_fail_rate:
            rc = rng.choice(PUT_FAIL_RC if op == "put" else GET_FAIL_RC)
            self.later(proc, delay, self._request_returns, proc, tid, conn, req, rc)
        elif op == "get" and self.cfg.sync_get:
            self.later(proc, delay, self._sync_get_file, proc, tid, conn, req, 0)
        else:
            self.later(proc, delay, self._enqueue, proc, tid, conn, req)

    def _enqueue(self, proc: Process, tid: int, conn: Conn, req: Request) -> None:
        if proc.dead:
            return
        self.slow.submit(req)
        self.later(proc, self.svc.reply.draw(self.rng), self._request_returns, proc, tid, conn, req, 0)

    def _request_returns(self, proc: Process, tid: int, conn: Conn, req: Request, rc: int) -> None:
        if proc.dead:
            return
        printed = self.req_line(req, proc, tid, f"dpm_srv_{req.op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.put_ret = printed
            if rc != 0:
                truth.close("failed", printed)                       # rule 1
        self._reply(proc, tid, conn, (rc, req))

    def _sync_get_file(self, proc: Process, tid: int, conn: Conn, req: Request, i: int) -> None:
        """DPM_USE_SYNCGET: the fast thread itself resolves each file, no slow thread."""
        if proc.dead:
            return
        if i == req.nfiles:
            req.state = SUCCESS
            self.later(proc, self.svc.reply.draw(self.rng), self._request_returns, proc, tid, conn, req, 0)
            return
        self.dpns.call("statg", req.client, req.paths[i], req.guids[i],
                       self._sync_get_selected, proc, tid, conn, req, i)

    def _sync_get_selected(self, proc: Process, tid: int, conn: Conn, req: Request, i: int) -> None:
        if proc.dead:
            return
        self.req_line(req, proc, tid, "dpm_srv_get", f"selected {self.namespace.disk()} for {req.surls[i]}")
        self._sync_get_file(proc, tid, conn, req, i + 1)

    # -- calls naming a token --------------------------------------------------------

    def _serve_status(self, proc: Process, tid: int, conn: Conn) -> None:
        req = conn.req
        op = STATUS_OPS[req.op]
        func = f"dpm_srv_{op}"
        opened = self.req_line(req, proc, tid, func, self._by(conn, op))
        self.req_line(req, proc, tid, func, f"DP098 - {op} {req.token} {req.nfiles}")
        self.later(proc, self.svc.status_call.draw(self.rng), self._status_answer,
                   proc, tid, conn, opened)

    def _status_answer(self, proc: Process, tid: int, conn: Conn, opened: int) -> None:
        if proc.dead:
            return
        req = conn.req
        state = req.state
        func = f"dpm_srv_{STATUS_OPS[req.op]}"
        # The answer and `returns` share one step (and one ms, as in real logs).
        self.req_line(req, proc, tid, func, f"request status DPM_{state}")
        printed = self.req_line(req, proc, tid, func, "returns 0")
        truth = req.truth
        if not truth.closed:
            truth.polls += 1
            truth.poll_ms += span(printed, opened)
            if state == SUCCESS and truth.first_success is None:
                truth.first_success = printed
            elif state == FAILED:
                truth.close("failed", printed)                       # rule 2
        self._reply(proc, tid, conn, state)

    def _serve_closing(self, proc: Process, tid: int, conn: Conn) -> None:
        req, op = conn.req, conn.kind
        func = f"dpm_srv_{op}"
        opened = self.req_line(req, proc, tid, func, self._by(conn, op))
        self.req_line(req, proc, tid, func, f"DP098 - {op} {req.token} {req.nfiles}")
        if op != "abortreq":
            for i, surl in enumerate(req.surls):
                self.req_line(req, proc, tid, func, f"DP098 - {op} {i} {surl}")
        truth = req.truth
        if op == "putdone" and not truth.closed and truth.first_done_open is None:
            truth.first_done_open = opened
        dist = self.svc.abort_call if op == "abortreq" else self.svc.done_call
        self.later(proc, dist.draw(self.rng), self._closing_returns, proc, tid, conn, opened)

    def _closing_returns(self, proc: Process, tid: int, conn: Conn, opened: int) -> None:
        if proc.dead:
            return
        req, op = conn.req, conn.kind
        rc = 0
        if op != "abortreq" and self.rng.random() < self.cfg.done_fail_rate:
            rc = 22
        if op == "abortreq":
            req.state = ABORTED
        printed = self.req_line(req, proc, tid, f"dpm_srv_{op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.done_open, truth.done_ret = opened, printed
            truth.close("aborted" if op == "abortreq" else "success", printed)   # rules 3, 4
        self._reply(proc, tid, conn, rc)

    # -- plain calls -----------------------------------------------------------------

    def _serve_plain(self, proc: Process, tid: int, conn: Conn) -> None:
        op = conn.kind
        opened = self.line(proc, tid, f"dpm_srv_{op}", self._by(conn, op))
        call = self.truth.new_call("dpm", proc.pid, tid, op, conn.stream.client.host,
                                   conn.accepted, opened)
        self.later(proc, self.svc.plain_call.draw(self.rng), self._plain_returns, proc, tid, conn, call)

    def _plain_returns(self, proc: Process, tid: int, conn: Conn, call) -> None:
        if proc.dead:
            return
        call.returned(self.line(proc, tid, f"dpm_srv_{conn.kind}", "returns 0"), 0)
        self._reply(proc, tid, conn, 0)

    # -- restart ---------------------------------------------------------------------

    def restart(self) -> None:
        """The daemon is replaced by a new process (new pid). Clean: the old one dies
        now (calls in progress never log their `returns`, their clients see the
        connection drop) and the new one comes up after the downtime. Overlapping: the
        new one starts now and the old one dies `restart_overlap` seconds later."""
        if not self.up:
            return
        old = self.proc
        if self.cfg.restart_overlap > 0:
            old.draining = True
            self._come_up()
            self.eng.after(int(round(self.cfg.restart_overlap * 1000)), self._die, old)
            return
        self.up = False
        dropped = list(old.busy_fast.values()) + list(self.backlog)
        self.backlog.clear()
        self._die(old, dropped)
        self.eng.after(int(self.cfg.restart_downtime * 1000), self._come_up)

    def _die(self, proc: Process, dropped: list[Conn] | None = None) -> None:
        """`proc` is killed: its calls in progress never return, its processing runs'
        requests wait in the queue again."""
        proc.dead = True
        if dropped is None:
            dropped = list(proc.busy_fast.values())
        self.killed_calls += len(proc.busy_fast)
        self.killed_runs += len(proc.busy_slow)
        proc.busy_fast.clear()
        self.slow.requeue(proc)
        for conn in dropped:
            self._fail(conn, restart=True)
        if self.up:
            self.slow.dispatch()

    def _come_up(self) -> None:
        pid = self.proc.pid
        while pid in self.pids or pid == self.cfg.dpns_pid or (self.cfg.stray_lines and pid == self.cfg.stray_pid):
            pid = 300 + (pid + self.rng.randint(50, 5000) - 300) % 32000
        self.proc = proc = Process(pid, self.cfg.fthreads, self.cfg.sthreads)
        self.pids.append(pid)
        self.up = True
        self.start()
        # After an overlapping restart the new process takes the connections waiting.
        while self.backlog and proc.free_fast:
            self._accept(proc, heapq.heappop(proc.free_fast), self.backlog.popleft())
        self.slow.dispatch()
