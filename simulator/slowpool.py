"""The DPM's slow threads: queued put/get requests, taken first come first served.

A run logs `processing <op> request <token>`, asks the DPNS about each file (a create
for a put, a stat for a get), logs `selected <fs> for <surl>` per file and `returns`.
A restart kills the runs in progress; their requests go back to the queue, in the order
they were first queued, and are processed again under the new pid.
"""

from __future__ import annotations

import heapq
from collections import deque

from dpmstream.simulator.model import ABORTED, ACTIVE, FAILED, QUEUED, SUCCESS, Request

PROC_FAIL_RC = (28, 1015)   # ENOSPC, an internal serrno


class SlowPool:
    def __init__(self, dpm, first_tid: int, threads: int):
        self.dpm = dpm
        self.first_tid, self.threads = first_tid, threads
        self.queue: deque[Request] = deque()
        self._seq = 0
        self.reset()

    def reset(self) -> None:
        self.free = list(range(self.first_tid, self.first_tid + self.threads))
        self.busy: dict[int, Request] = {}

    def depth(self) -> int:
        return sum(1 for req in self.queue if req.state == QUEUED)

    def submit(self, req: Request) -> None:
        self._seq += 1
        req.seq = self._seq
        req.state = QUEUED
        self.queue.append(req)
        self.dispatch()

    def dispatch(self) -> None:
        dpm = self.dpm
        while dpm.up and self.free and self.queue:
            req = self.queue.popleft()
            if req.state != QUEUED:      # aborted while waiting
                continue
            tid = heapq.heappop(self.free)
            req.state = ACTIVE
            self.busy[tid] = req
            dpm.eng.after(dpm.svc.slow_pickup.draw(dpm.rng), self._start, tid, req, dpm.epoch)

    def _release(self, tid: int) -> None:
        del self.busy[tid]
        heapq.heappush(self.free, tid)
        self.dispatch()

    def _start(self, tid: int, req: Request, epoch: int) -> None:
        dpm = self.dpm
        if epoch != dpm.epoch:
            return
        if req.state == ABORTED:
            self._release(tid)
            return
        printed = dpm.req_line(req, tid, f"dpm_srv_proc_{req.op}",
                               f"processing {req.op} request {req.token}")
        truth = req.truth
        if not truth.closed and truth.first_run is None:
            truth.first_run = printed
        truth.runs.append(dpm.truth.new_run(truth, printed, req.paths))
        pre = dpm.svc.proc_put_pre if req.op == "put" else dpm.svc.proc_get_pre
        dpm.eng.after(pre.draw(dpm.rng), self._file, tid, req, 0, printed, epoch)

    def _file(self, tid: int, req: Request, i: int, run_start: int, epoch: int) -> None:
        dpm = self.dpm
        if epoch != dpm.epoch:
            return
        if i == req.nfiles:
            dpm.eng.after(dpm.svc.proc_post.draw(dpm.rng), self._end, tid, req, run_start, epoch)
            return
        op = "creat" if req.op == "put" else "statg"
        dpm.dpns.call(op, req.client, req.paths[i], req.guids[i],
                      self._answered, tid, req, i, run_start, epoch, run=req.truth.runs[-1])

    def _answered(self, tid: int, req: Request, i: int, run_start: int, epoch: int) -> None:
        dpm = self.dpm
        if epoch != dpm.epoch:
            return
        dpm.eng.after(dpm.svc.select.draw(dpm.rng), self._selected, tid, req, i, run_start, epoch)

    def _selected(self, tid: int, req: Request, i: int, run_start: int, epoch: int) -> None:
        dpm = self.dpm
        if epoch != dpm.epoch:
            return
        dpm.req_line(req, tid, f"dpm_srv_proc_{req.op}",
                     f"selected {dpm.namespace.disk()} for {req.surls[i]}")
        self._file(tid, req, i + 1, run_start, epoch)

    def _end(self, tid: int, req: Request, run_start: int, epoch: int) -> None:
        dpm = self.dpm
        if epoch != dpm.epoch:
            return
        rng = dpm.rng
        rc = rng.choice(PROC_FAIL_RC) if rng.random() < dpm.cfg.proc_fail_rate else 0
        printed = dpm.req_line(req, tid, f"dpm_srv_proc_{req.op}", f"returns {rc}")
        truth = req.truth
        if not truth.closed:
            truth.proc = printed - run_start
            truth.runs[-1].end = printed  # a run that counts: name-server calls link to it
        if req.state == ACTIVE:
            req.state = SUCCESS if rc == 0 else FAILED
            if rc == 0 and req.op == "put":
                dpm.namespace.written.extend(req.paths)
        self._release(tid)

    def requeue_after_restart(self) -> None:
        """The runs in progress died with the daemon: their requests wait again."""
        again = [req for req in self.busy.values() if req.state == ACTIVE]
        for req in again:
            req.state = QUEUED
        waiting = [req for req in self.queue if req.state == QUEUED]
        self.queue = deque(sorted(again + waiting, key=lambda r: r.seq))
        self.reset()
