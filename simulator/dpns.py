"""The name server (DPNS) as the DPM uses it: one synchronous call per file.

Calls take a thread of the DPNS's own pool (waiting for one when all are busy) and log
NS092/NS098/returns on it. A create holds its parent directory's lock for its whole
transaction, so creates in one directory run one after another: that is what makes a
shared directory slow. The DPNS never restarts here; when the DPM restarts, its calls
still finish and log their `returns`, and nobody listens for the answer.
"""

from __future__ import annotations

import heapq
import random
from collections import deque

from dpmstream.simulator.engine import Engine
from dpmstream.simulator.identities import Client, Namespace
from dpmstream.simulator.logwriter import LogWriter
from dpmstream.simulator.service import ServiceTimes
from dpmstream.simulator.truth import Truth


class NameServer:
    def __init__(self, eng: Engine, rng: random.Random, svc: ServiceTimes, log: LogWriter,
                 truth: Truth, pid: int, threads: int, head_host: str,
                 holds: dict | None = None):
        self.eng, self.rng, self.svc, self.log, self.truth = eng, rng, svc, log, truth
        self.pid = pid
        self.head = head_host
        self._free = list(range(threads))
        self._waiting: deque = deque()
        self._locks: dict[str, deque] = {}     # directory -> creates waiting for its lock
        self._holds = holds or {}              # directory -> its own hold time, if it has one
        self._fileid = 37336000
        self.calls = 0
        self.max_lock_waiters = 0

    def call(self, op: str, client: Client, path: str, guid: str, callback, *args,
             run=None, caller: str | None = None) -> None:
        """Ask for `op` ("creat" or "statg") on `path` for `client`; `callback(*args)`
        runs when the answer is back at the caller. `run`: the processing run (RunTruth)
        that asks, if any; `caller`: the host calling (NS092 `from`), the head by default."""
        job = (op, client, path, guid, callback, args, run, caller or self.head)
        if self._free:
            self._start(heapq.heappop(self._free), job)
        else:
            self._waiting.append(job)

    def _start(self, tid: int, job) -> None:
        op, client, path, guid, _, _, run, caller = job
        now, func = self.eng.now, f"Cns_srv_{op}"
        self.calls += 1
        opened = self.log.emit(now, self.pid, tid, func,
                               f"NS092 - {op} request by {client.dn} ({client.ids}) from {caller}")
        call = self.truth.new_call("dpns", self.pid, tid, op, caller, None, opened)
        call.path, call.run, call.open_kept = path, run, self.log.kept(opened)
        if op == "creat":
            self.log.emit(now, self.pid, tid, func, f"NS098 - creat {path} {guid} 664 22")
            self._lock(Namespace.directory(path), (tid, job, call))
        else:
            self.log.emit(now, self.pid, tid, func, f"NS098 - {op} {path} {guid}")
            self.eng.after(self.svc.dpns_statg.draw(self.rng), self._finish, tid, job, call, None)

    def _lock(self, directory: str, item) -> None:
        waiters = self._locks.get(directory)
        if waiters is None:
            self._locks[directory] = deque()
            self.eng.after(self._hold(directory), self._created, directory, item)
        else:
            waiters.append(item)
            self.max_lock_waiters = max(self.max_lock_waiters, len(waiters))

    def _hold(self, directory: str) -> int:
        return self._holds.get(directory, self.svc.dpns_creat).draw(self.rng)

    def _created(self, directory: str, item) -> None:
        tid, job, call = item
        self._fileid += 1
        self.log.emit(self.eng.now, self.pid, tid, "Cns_srv_creat", f"file {self._fileid} created")
        self._finish(tid, job, call, directory)

    def _finish(self, tid: int, job, call, directory: str | None) -> None:
        op, _, _, _, callback, args, _, _ = job
        printed = self.log.emit(self.eng.now, self.pid, tid, f"Cns_srv_{op}", "returns 0")
        call.returned(printed, 0)
        call.ret_kept = self.log.kept(printed)
        if directory is not None:  # commit: the next create in this directory goes
            waiters = self._locks[directory]
            if waiters:
                nxt = waiters.popleft()
                self.eng.after(self._hold(directory), self._created, directory, nxt)
            else:
                del self._locks[directory]
        heapq.heappush(self._free, tid)
        if self._waiting:
            self._start(heapq.heappop(self._free), self._waiting.popleft())
        self.eng.after(self.svc.dpns_reply.draw(self.rng), callback, *args)
