"""The DPM's slow threads: queued put/get requests, taken first come first served.

A run logs `processing <op> request <token>`, asks the DPNS about each file (a create
for a put, a stat for a get), logs `selected <fs> for <surl>` per file and `returns`.
The queue is the database's: it outlives daemon processes. Each process has its own
slow threads (`daemon.Process`); only the current one takes queued requests. A process
that dies kills its runs in progress; their requests go back to the queue, in the order
they were first queued, and are processed again under the new pid.
"""

from __future__ import annotations

import heapq
from collections import deque

from dpmstream.simulator.model import ABORTED, ACTIVE, FAILED, QUEUED, SUCCESS, Request
from dpmstream.simulator.truth import span

PROC_FAIL_RC = (28, 1015)   # ENOSPC, an internal serrno


class SlowPool:
    def __init__(self, dpm):
        self.dpm = dpm
        self.queue: deque[Request] = deque()
        self._seq = 0

    def submit(self, req: Request) -> None:
        self._seq += 1
        req.seq = self._seq
        req.state = QUEUED
        self.queue.append(req)
        self.dispatch()

    def dispatch(self) -> None:
        dpm = self.dpm
        proc = dpm.proc
        while dpm.up and proc.free_slow and self.queue:
            req = self.queue.popleft()
            if req.state != QUEUED:      # aborted while waiting
                continue
            tid = heapq.heappop(proc.free_slow)
            req.state = ACTIVE
            proc.busy_slow[tid] = req
            dpm.later(proc, dpm.svc.slow_pickup.draw(dpm.rng), self._start, proc, tid, req)

    def _release(self, proc, tid: int) -> None:
        del proc.busy_slow[tid]
        heapq.heappush(proc.free_slow, tid)
        self.dispatch()

    def _start(self, proc, tid: int, req: Request) -> None:
        dpm = self.dpm
        if proc.dead:
            return
        if req.state == ABORTED:
            self._release(proc, tid)
            return
        printed = dpm.req_line(req, proc, tid, f"dpm_srv_proc_{req.op}",
                               f"processing {req.op} request {req.token}")
        truth = req.truth
        if not truth.closed and truth.first_run is None:
            truth.first_run = printed
        truth.runs.append(dpm.truth.new_run(truth, printed, req.paths))
        pre = dpm.svc.proc_put_pre if req.op == "put" else dpm.svc.proc_get_pre
        dpm.later(proc, pre.draw(dpm.rng), self._file, proc, tid, req, 0, printed)

    def _file(self, proc, tid: int, req: Request, i: int, run_start: int) -> None:
        dpm = self.dpm
        if proc.dead:
            return
        if i == req.nfiles:
            dpm.later(proc, dpm.svc.proc_post.draw(dpm.rng), self._end, proc, tid, req, run_start)
            return
        op = "creat" if req.op == "put" else "statg"
        dpm.dpns.call(op, req.client, req.paths[i], req.guids[i],
                      self._answered, proc, tid, req, i, run_start, run=_run_of(req, run_start))

    def _answered(self, proc, tid: int, req: Request, i: int, run_start: int) -> None:
        dpm = self.dpm
        if proc.dead:
            return
        dpm.later(proc, dpm.svc.select.draw(dpm.rng), self._selected, proc, tid, req, i, run_start)

    def _selected(self, proc, tid: int, req: Request, i: int, run_start: int) -> None:
        dpm = self.dpm
        if proc.dead:
            return
        dpm.req_line(req, proc, tid, f"dpm_srv_proc_{req.op}",
                     f"selected {dpm.namespace.disk()} for {req.surls[i]}")
        self._file(proc, tid, req, i + 1, run_start)

    def _end(self, proc, tid: int, req: Request, run_start: int) -> None:
        dpm = self.dpm
        if proc.dead:
            return
        rng = dpm.rng
        rc = rng.choice(PROC_FAIL_RC) if rng.random() < dpm.cfg.proc_fail_rate else 0
        printed = dpm.req_line(req, proc, tid, f"dpm_srv_proc_{req.op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.proc = span(printed, run_start)
            _run_of(req, run_start).end = printed  # it counts: name-server calls link to it
        if req.state == ACTIVE:
            req.state = SUCCESS if rc == 0 else FAILED
            if rc == 0 and req.op == "put":
                dpm.namespace.written.extend(req.paths)
        self._release(proc, tid)

    def requeue(self, proc) -> None:
        """`proc` died: the requests of its runs in progress wait again."""
        again = [req for req in proc.busy_slow.values() if req.state == ACTIVE]
        for req in again:
            req.state = QUEUED
        waiting = [req for req in self.queue if req.state == QUEUED]
        self.queue = deque(sorted(again + waiting, key=lambda r: r.seq))
        proc.busy_slow.clear()
        proc.free_slow = []


def _run_of(req: Request, run_start: int):
    """The RunTruth of the request's run that began at `run_start` (after a restart an
    old process may still finish the run it had begun)."""
    return next(run for run in reversed(req.truth.runs) if run.start == run_start)
