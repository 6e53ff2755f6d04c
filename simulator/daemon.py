"""The DPM daemon: listen backlog, fast threads serving client calls, restarts.

A connection takes the lowest free fast thread (or waits in the backlog; past the
backlog it is refused and nothing is logged). The thread logs `request accepted`,
authenticates the client (or logs a connection failure), then serves one call:
DP092, DP098 lines, and `returns`. Put/get queue their request for the slow threads
(`slowpool.py`) just before their `returns` is logged, so a slow thread may log
`processing` first. Every scheduled step carries the daemon's epoch: a restart bumps
it, and the steps of the dead daemon do nothing.
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
from dpmstream.simulator.truth import Truth

AUTH_FAILURES = (
    "Could not establish an authenticated connection: _Csec_recv_token: Connection closed by remote end !",
    "Failure getting the request: Timed out",
)
PUT_FAIL_RC = (13, 28, 1015)     # EACCES, ENOSPC, an internal serrno
GET_FAIL_RC = (2, 13)            # ENOENT, EACCES
EARLY_FAIL_RC = 22               # EINVAL: refused before a token exists
STATUS_OPS = {"put": "getstatus_putreq", "get": "getstatus_getreq"}


class Dpm:
    def __init__(self, eng: Engine, rng: random.Random, cfg: SimConfig, log: LogWriter,
                 dpns: NameServer, truth: Truth, namespace: Namespace):
        self.eng, self.rng, self.cfg, self.svc = eng, rng, cfg, cfg.service
        self.log, self.dpns, self.truth, self.namespace = log, dpns, truth, namespace
        self.pid = cfg.pid
        self.pids = [cfg.pid]
        self.epoch = 0
        self.up = True
        self.backlog: deque[Conn] = deque()
        self.slow = SlowPool(self, cfg.fthreads, cfg.sthreads)
        self._reset_fast()
        self.refused = 0
        self.auth_failures = 0
        self.killed_calls = 0

    def _reset_fast(self) -> None:
        self.free_fast = list(range(self.cfg.fthreads))
        self.busy_fast: dict[int, Conn] = {}

    # -- logging helpers -------------------------------------------------------------

    def line(self, tid: int, func: str, msg: str) -> int:
        return self.log.emit(self.eng.now, self.pid, tid, func, msg)

    def req_line(self, req: Request, tid: int, func: str, msg: str) -> int:
        """A line of a request: ordered with its other lines, and counted for `ended`."""
        printed = self.log.emit(self.eng.now, self.pid, tid, func, msg, req)
        req.truth.line(printed)
        return printed

    def _by(self, conn: Conn, op: str) -> str:
        client = conn.stream.client
        return f"DP092 - {op} request by {client.dn} ({client.ids}) from {client.host}"

    # -- connections -----------------------------------------------------------------

    def start(self) -> None:
        self.line(-1, "dpm_serv", "started")

    def connect(self, conn: Conn) -> None:
        if self.up:
            if self.free_fast:
                self._accept(heapq.heappop(self.free_fast), conn)
                return
            if len(self.backlog) < self.cfg.backlog:
                self.backlog.append(conn)
                return
        self.refused += 1
        self._fail(conn, restart=not self.up)

    def _accept(self, tid: int, conn: Conn) -> None:
        self.busy_fast[tid] = conn
        conn.accepted = None
        if self.cfg.accept_lines:
            client = conn.stream.client
            conn.accepted = self.line(tid, "dpm_serv", f"[{client.ip}] ({client.host}): request accepted")
        self.eng.after(self.svc.auth.draw(self.rng), self._authenticated, tid, conn, self.epoch)

    def _authenticated(self, tid: int, conn: Conn, epoch: int) -> None:
        if epoch != self.epoch:
            return
        if self.rng.random() < self.cfg.auth_fail_rate:
            client = conn.stream.client
            self.line(tid, "dpm_serv", f"[{client.ip}] ({client.host}): {self.rng.choice(AUTH_FAILURES)}")
            self.auth_failures += 1
            self._release(tid)
            self._fail(conn, restart=False)
            return
        kind = conn.kind
        if kind in ("put", "get"):
            self._serve_request(tid, conn)
        elif kind == "status":
            self._serve_status(tid, conn)
        elif kind in ("putdone", "relfiles", "abortreq"):
            self._serve_closing(tid, conn)
        else:
            self._serve_plain(tid, conn)

    def _release(self, tid: int) -> None:
        del self.busy_fast[tid]
        heapq.heappush(self.free_fast, tid)
        if self.backlog:
            self._accept(heapq.heappop(self.free_fast), self.backlog.popleft())

    def _reply(self, tid: int, conn: Conn, result) -> None:
        self._release(tid)
        self.eng.after(self.svc.net.draw(self.rng), conn.stream.on_reply, conn, result)

    def _fail(self, conn: Conn, restart: bool) -> None:
        self.eng.after(self.svc.net.draw(self.rng), conn.stream.on_fail, conn, restart)

    # -- put and get -----------------------------------------------------------------

    def _serve_request(self, tid: int, conn: Conn) -> None:
        op, client, rng = conn.kind, conn.stream.client, self.rng
        func = f"dpm_srv_{op}"
        opened = self.line(tid, func, self._by(conn, op))
        fail = rng.random()
        if fail < self.cfg.put_fail_rate / 2:
            # Refused before a token exists: a plain call record. DP092 and returns come
            # in one step so that no restart can separate them.
            call = self.truth.new_call("dpm", self.pid, tid, op, client.host, conn.accepted, opened)
            call.returned(self.line(tid, func, f"returns {EARLY_FAIL_RC}"), EARLY_FAIL_RC)
            self._reply(tid, conn, (EARLY_FAIL_RC, None))
            return
        n = self.cfg.files
        if op == "put":
            paths = [self.namespace.new_path(client) for _ in range(n)]
        else:
            paths = [self.namespace.existing_path() for _ in range(n)]
        req = Request(make_uuid(rng), op, client, paths,
                      [self.namespace.surl(p) for p in paths], [make_uuid(rng) for _ in range(n)])
        req.truth = self.truth.new_request(req.token, op, client.host, n, conn.accepted, opened)
        self.req_line(req, tid, func, f"DP098 - {op} {n} {req.token}")
        for i, surl in enumerate(req.surls):
            self.req_line(req, tid, func, f"DP098 - {op} {i} {surl}")
        delay = self.svc.put_call.draw(rng)
        if fail < self.cfg.put_fail_rate:
            rc = rng.choice(PUT_FAIL_RC if op == "put" else GET_FAIL_RC)
            self.eng.after(delay, self._request_returns, tid, conn, req, rc, self.epoch)
        elif op == "get" and self.cfg.sync_get:
            self.eng.after(delay, self._sync_get_file, tid, conn, req, 0, self.epoch)
        else:
            self.eng.after(delay, self._enqueue, tid, conn, req, self.epoch)

    def _enqueue(self, tid: int, conn: Conn, req: Request, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.slow.submit(req)
        self.eng.after(self.svc.reply.draw(self.rng), self._request_returns, tid, conn, req, 0, epoch)

    def _request_returns(self, tid: int, conn: Conn, req: Request, rc: int, epoch: int) -> None:
        if epoch != self.epoch:
            return
        printed = self.req_line(req, tid, f"dpm_srv_{req.op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.put_ret = printed
            if rc != 0:
                truth.close("failed", printed)                       # rule 1
        self._reply(tid, conn, (rc, req))

    def _sync_get_file(self, tid: int, conn: Conn, req: Request, i: int, epoch: int) -> None:
        """DPM_USE_SYNCGET: the fast thread itself resolves each file, no slow thread."""
        if epoch != self.epoch:
            return
        if i == req.nfiles:
            req.state = SUCCESS
            self.eng.after(self.svc.reply.draw(self.rng), self._request_returns, tid, conn, req, 0, epoch)
            return
        self.dpns.call("statg", req.client, req.paths[i], req.guids[i],
                       self._sync_get_selected, tid, conn, req, i, epoch)

    def _sync_get_selected(self, tid: int, conn: Conn, req: Request, i: int, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.req_line(req, tid, "dpm_srv_get", f"selected {self.namespace.disk()} for {req.surls[i]}")
        self._sync_get_file(tid, conn, req, i + 1, epoch)

    # -- calls naming a token --------------------------------------------------------

    def _serve_status(self, tid: int, conn: Conn) -> None:
        req = conn.req
        op = STATUS_OPS[req.op]
        func = f"dpm_srv_{op}"
        opened = self.req_line(req, tid, func, self._by(conn, op))
        self.req_line(req, tid, func, f"DP098 - {op} {req.token} {req.nfiles}")
        self.eng.after(self.svc.status_call.draw(self.rng), self._status_answer,
                       tid, conn, opened, self.epoch)

    def _status_answer(self, tid: int, conn: Conn, opened: int, epoch: int) -> None:
        if epoch != self.epoch:
            return
        req = conn.req
        state = req.state
        func = f"dpm_srv_{STATUS_OPS[req.op]}"
        # The answer and `returns` share one step (and one ms, as in real logs).
        self.req_line(req, tid, func, f"request status DPM_{state}")
        printed = self.req_line(req, tid, func, "returns 0")
        truth = req.truth
        if not truth.closed:
            truth.polls += 1
            truth.poll_ms += printed - opened
            if state == SUCCESS and truth.first_success is None:
                truth.first_success = printed
            elif state == FAILED:
                truth.close("failed", printed)                       # rule 2
        self._reply(tid, conn, state)

    def _serve_closing(self, tid: int, conn: Conn) -> None:
        req, op = conn.req, conn.kind
        func = f"dpm_srv_{op}"
        opened = self.req_line(req, tid, func, self._by(conn, op))
        self.req_line(req, tid, func, f"DP098 - {op} {req.token} {req.nfiles}")
        if op != "abortreq":
            for i, surl in enumerate(req.surls):
                self.req_line(req, tid, func, f"DP098 - {op} {i} {surl}")
        truth = req.truth
        if op == "putdone" and not truth.closed and truth.first_done_open is None:
            truth.first_done_open = opened
        dist = self.svc.abort_call if op == "abortreq" else self.svc.done_call
        self.eng.after(dist.draw(self.rng), self._closing_returns, tid, conn, opened, self.epoch)

    def _closing_returns(self, tid: int, conn: Conn, opened: int, epoch: int) -> None:
        if epoch != self.epoch:
            return
        req, op = conn.req, conn.kind
        rc = 0
        if op != "abortreq" and self.rng.random() < self.cfg.done_fail_rate:
            rc = 22
        if op == "abortreq":
            req.state = ABORTED
        printed = self.req_line(req, tid, f"dpm_srv_{op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.done_open, truth.done_ret = opened, printed
            truth.close("aborted" if op == "abortreq" else "success", printed)   # rules 3, 4
        self._reply(tid, conn, rc)

    # -- plain calls -----------------------------------------------------------------

    def _serve_plain(self, tid: int, conn: Conn) -> None:
        op = conn.kind
        opened = self.line(tid, f"dpm_srv_{op}", self._by(conn, op))
        call = self.truth.new_call("dpm", self.pid, tid, op, conn.stream.client.host,
                                   conn.accepted, opened)
        self.eng.after(self.svc.plain_call.draw(self.rng), self._plain_returns, tid, conn, call, self.epoch)

    def _plain_returns(self, tid: int, conn: Conn, call, epoch: int) -> None:
        if epoch != self.epoch:
            return
        call.returned(self.line(tid, f"dpm_srv_{conn.kind}", "returns 0"), 0)
        self._reply(tid, conn, 0)

    # -- restart ---------------------------------------------------------------------

    def restart(self) -> None:
        """The daemon dies now: calls in progress never log their `returns`, their
        clients see the connection drop; the new daemon (new pid) comes up later."""
        if not self.up:
            return
        self.epoch += 1
        self.up = False
        dropped = list(self.busy_fast.values()) + list(self.backlog)
        self.killed_calls += len(self.busy_fast)
        self.backlog.clear()
        self._reset_fast()
        self.slow.requeue_after_restart()
        for conn in dropped:
            self._fail(conn, restart=True)
        self.eng.after(int(self.cfg.restart_downtime * 1000), self._come_up)

    def _come_up(self) -> None:
        pid = self.pid
        while pid in self.pids or pid == self.cfg.dpns_pid:
            pid = 300 + (pid + self.rng.randint(50, 5000) - 300) % 32000
        self.pid = pid
        self.pids.append(pid)
        self.up = True
        self.start()
        self.slow.dispatch()
