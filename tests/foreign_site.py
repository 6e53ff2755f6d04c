"""A second, independent writer of DPM and DPNS logs, for validating `dpmstream whatif`
on logs the project's simulator did not write (issue 29).

Written from the log format reference (/work/shared/dpm-log-format.md, sections 1-4)
alone: nothing here imports or copies simulator/. It is a plain event loop over one
head node: open arrivals (Poisson, or in bursts), a fast-thread pool serving client
calls, N slow threads taking queued put/get requests first come first served, a
name-server thread pool, and one lock per directory that a create holds for a
gamma-distributed time (the simulator draws log-normals). Clients poll with their own
back-off (first delay, factor, cap). Its service times are gammas with other shapes and
medians than the simulator's defaults, and its processing has work both before and
after the name-server call.

It writes PREFIX.log (DPM) and PREFIX.dpns.log (DPNS) in the native envelope, stamps in
UTC (read them with --tz UTC --year YEAR --host HEAD), and computes from its own events
the phases of every put and get as section 4 defines them, so a test knows the true
p50s of a run without reading the logs back.
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

HEAD = "head01"
YEAR = 2024
START = datetime(YEAR, 3, 5, 10, 0, 0, tzinfo=timezone.utc)
DPM_PID, NS_PID = 4242, 3131
PHASES = ("queue", "proc", "ready_wait", "total")


@dataclass(frozen=True)
class Site:
    """One head node and its load. Times in ms, rates per second."""
    requests: int = 2000
    rate: float = 40.0                 # arrivals per second, on the whole run
    burst: int = 1                     # arrivals come in clumps of this many (within 200 ms)
    get_share: float = 0.0
    dirs: int = 2                      # directories the puts write into
    dir_weights: tuple = ()            # their shares (default: equal)
    hold_ms: float = 30.0              # mean create time under the directory lock
    hold_shape: float = 4.0            # gamma shape of the hold (CV = 1/sqrt(shape))
    pre_ms: float = 180.0              # a slow thread's work before the name-server call
    post_ms: float = 60.0              # and after it
    statg_ms: float = 4.0
    sthreads: int = 20
    fthreads: int = 30
    ns_threads: int = 20               # the DPNS default
    clients: int = 4
    auth_ms: float = 15.0
    call_ms: float = 3.0               # put/get, status, putdone/relfiles: the call's own time
    transfer_ms: float = 80.0
    poll_first_ms: int = 300
    poll_factor: float = 1.5
    poll_max_ms: int = 2000
    seed: int = 1

    def but(self, **changes) -> "Site":
        return replace(self, **changes)


@dataclass
class _Req:
    token: str
    op: str
    client: int
    path: str
    arrived: int
    accepted: int | None = None
    put_ret: int | None = None
    proc_start: int | None = None
    proc_end: int | None = None
    ready: int | None = None           # end of the first status call answering SUCCESS
    ended: int | None = None
    state: str = "QUEUED"
    backoff: int = 0


@dataclass
class Run:
    site: Site
    log_path: Path
    dpns_log_path: Path
    records: list = field(default_factory=list)     # (op, {phase: ms}) per finished request

    def p50s(self, op: str = "put") -> dict[str, float]:
        """The true p50 (s) of each checked phase over the run's requests of `op`."""
        return pooled_p50s([self], op)


def pooled_p50s(runs, op: str = "put") -> dict[str, float]:
    """The true p50 (s) of each checked phase over the requests of `op` of all `runs`."""
    return {phase: statistics.median(r[phase] for run in runs for o, r in run.records
                                     if o == op) / 1000
            for phase in PHASES}


class _Loop:
    def __init__(self):
        self.now = 0
        self._heap: list = []
        self._seq = 0

    def at(self, when: int, fn, *args) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, args))

    def after(self, delay: int, fn, *args) -> None:
        self.at(self.now + max(0, int(delay)), fn, *args)

    def run(self) -> None:
        while self._heap:
            self.now, _, fn, args = heapq.heappop(self._heap)
            fn(*args)


class _Pool:
    """Numbered threads handed out lowest first; callers wait in turn when none is free."""

    def __init__(self, first: int, count: int):
        self.free = list(range(first, first + count))
        self.waiting: deque = deque()

    def take(self, fn, *args) -> None:
        if self.free:
            fn(heapq.heappop(self.free), *args)
        else:
            self.waiting.append((fn, args))

    def give(self, tid: int) -> None:
        if self.waiting:
            fn, args = self.waiting.popleft()
            fn(tid, *args)
        else:
            heapq.heappush(self.free, tid)


class _Head:
    def __init__(self, site: Site):
        self.s = site
        self.rng = random.Random(site.seed)
        self.loop = _Loop()
        self.dpm_lines: list = []
        self.ns_lines: list = []
        self.fast = _Pool(0, site.fthreads)
        self.slow = _Pool(site.fthreads, site.sthreads)
        self.ns = _Pool(0, site.ns_threads)
        self.locks: dict[str, deque | None] = {}
        self.fileid = 5_000_000
        self.written: list[str] = []
        self.done: list = []
        weights = site.dir_weights or (1.0,) * site.dirs
        self.dirs = [f"/dpm/example.org/home/vo/run{k}" for k in range(site.dirs)]
        self.weights = weights

    # -- helpers ----------------------------------------------------------------------
    def gamma(self, mean: float, shape: float = 3.0) -> int:
        if mean <= 0:
            return 0
        return max(1, int(round(self.rng.gammavariate(shape, mean / shape))))

    def net(self) -> int:
        return self.rng.choice((0, 1, 1, 2))

    def line(self, lines: list, pid: int, tid: int, func: str, msg: str) -> None:
        lines.append((self.loop.now, len(lines), f"{pid:5d},{tid} {func}: {msg}"))

    def dpm(self, tid, func, msg):
        self.line(self.dpm_lines, DPM_PID, tid, func, msg)

    def dn(self, client: int) -> str:
        return f"/DC=org/DC=example/OU=Robots/CN=load robot {client:02d} (bench)"

    def host(self, client: int) -> str:
        return f"ui{client + 1:02d}.example.org"

    # -- arrivals ---------------------------------------------------------------------
    def start(self) -> None:
        # N arrivals (or clumps of them) spread uniformly over N / rate seconds: a Poisson
        # process given its count, so that every seed offers the same load on the whole.
        s, n = self.s, 0
        clumps = -(-s.requests // s.burst)
        span_ms = s.requests / s.rate * 1000
        for t in sorted(self.rng.random() * span_ms for _ in range(clumps)):
            for _ in range(min(s.burst, s.requests - n)):
                at = int(t + (self.rng.random() * 200 if s.burst > 1 else 0))
                op = "get" if self.rng.random() < s.get_share else "put"
                client = self.rng.randrange(s.clients)
                token = "%08x-%04x-4%03x-a%03x-%012x" % (
                    self.rng.getrandbits(32), self.rng.getrandbits(16), self.rng.getrandbits(12),
                    self.rng.getrandbits(12), self.rng.getrandbits(48))
                if op == "put":
                    d = self.rng.choices(self.dirs, self.weights)[0]
                    path = f"{d}/file{n:06d}.dat"
                else:
                    path = f"/dpm/example.org/home/vo/data/in{self.rng.randrange(5000):05d}.dat"
                req = _Req(token, op, client, path, at)
                self.loop.at(at, self.connect, req, "request")
                n += 1

    # -- the fast threads: one call per connection ------------------------------------
    def connect(self, req: _Req, kind: str) -> None:
        self.fast.take(self.accepted, req, kind)

    def accepted(self, tid: int, req: _Req, kind: str) -> None:
        self.dpm(tid, "dpm_serv", f"[10.1.0.{req.client + 10}] ({self.host(req.client)}): request accepted")
        if kind == "request" and req.accepted is None:
            req.accepted = self.loop.now
        self.loop.after(self.gamma(self.s.auth_ms, 6), self.serve, tid, req, kind)

    def serve(self, tid: int, req: _Req, kind: str) -> None:
        op = req.op
        surl = f"srm://{HEAD}.example.org{req.path}"
        if kind == "request":
            func = f"dpm_srv_{op}"
            self.dpm(tid, func, f"DP092 - {op} request by {self.dn(req.client)} (501,501) from {self.host(req.client)}")
            self.dpm(tid, func, f"DP098 - {op} 1 {req.token}")
            self.dpm(tid, func, f"DP098 - {op} 0 {surl}")
            self.loop.after(self.gamma(self.s.call_ms), self.request_returns, tid, req)
        elif kind == "status":
            func = f"dpm_srv_getstatus_{op}req"
            self.dpm(tid, func, f"DP092 - getstatus_{op}req request by {self.dn(req.client)} (501,501) from {self.host(req.client)}")
            self.dpm(tid, func, f"DP098 - getstatus_{op}req {req.token} 1")
            self.loop.after(self.gamma(self.s.call_ms), self.status_answer, tid, req)
        else:                                   # putdone or relfiles
            func = f"dpm_srv_{kind}"
            self.dpm(tid, func, f"DP092 - {kind} request by {self.dn(req.client)} (501,501) from {self.host(req.client)}")
            self.dpm(tid, func, f"DP098 - {kind} {req.token} 1")
            self.dpm(tid, func, f"DP098 - {kind} 0 {surl}")
            self.loop.after(self.gamma(self.s.call_ms * 2), self.closing_returns, tid, req, kind)

    def request_returns(self, tid: int, req: _Req) -> None:
        self.dpm(tid, f"dpm_srv_{req.op}", "returns 0")
        req.put_ret = self.loop.now
        self.slow.take(self.process, req)
        self.fast.give(tid)
        req.backoff = self.s.poll_first_ms
        self.loop.after(self.net() + req.backoff, self.connect, req, "status")

    def status_answer(self, tid: int, req: _Req) -> None:
        func = f"dpm_srv_getstatus_{req.op}req"
        state = req.state
        self.dpm(tid, func, f"request status DPM_{state}")
        self.dpm(tid, func, "returns 0")
        self.fast.give(tid)
        if state == "SUCCESS":
            req.ready = self.loop.now
            closing = "putdone" if req.op == "put" else "relfiles"
            pause = self.gamma(self.s.transfer_ms, 2) if req.op == "put" else self.gamma(10)
            self.loop.after(self.net() + pause, self.connect, req, closing)
        else:
            req.backoff = min(int(round(req.backoff * self.s.poll_factor)), self.s.poll_max_ms)
            self.loop.after(self.net() + req.backoff, self.connect, req, "status")

    def closing_returns(self, tid: int, req: _Req, kind: str) -> None:
        self.dpm(tid, f"dpm_srv_{kind}", "returns 0")
        req.ended = self.loop.now
        self.fast.give(tid)
        self.done.append(req)

    # -- the slow threads -------------------------------------------------------------
    def process(self, tid: int, req: _Req) -> None:
        req.state = "ACTIVE"
        req.proc_start = self.loop.now
        self.dpm(tid, f"dpm_srv_proc_{req.op}", f"processing {req.op} request {req.token}")
        self.loop.after(self.gamma(self.s.pre_ms, 5), self.ask_name_server, tid, req)

    def ask_name_server(self, tid: int, req: _Req) -> None:
        self.loop.after(self.net(), self.ns.take, self.ns_call, tid, req)

    def answered(self, tid: int, req: _Req) -> None:
        self.dpm(tid, f"dpm_srv_proc_{req.op}",
                 f"selected fs{self.rng.randrange(8)}.example.org:/data for srm://{HEAD}.example.org{req.path}")
        self.loop.after(self.gamma(self.s.post_ms, 5), self.processed, tid, req)

    def processed(self, tid: int, req: _Req) -> None:
        self.dpm(tid, f"dpm_srv_proc_{req.op}", "returns 0")
        req.proc_end = self.loop.now
        req.state = "SUCCESS"
        self.slow.give(tid)

    # -- the name server --------------------------------------------------------------
    def ns_call(self, ns_tid: int, slow_tid: int, req: _Req) -> None:
        op = "creat" if req.op == "put" else "statg"
        func = f"Cns_srv_{op}"
        self.line(self.ns_lines, NS_PID, ns_tid, func,
                  f"NS092 - {op} request by /DC=org/DC=example/CN=dpm/{HEAD}.example.org (0,0) from {HEAD}")
        if op == "statg":
            self.line(self.ns_lines, NS_PID, ns_tid, func, f"NS098 - statg {req.path}")
            self.loop.after(self.gamma(self.s.statg_ms), self.ns_returns, ns_tid, slow_tid, req, None)
            return
        self.line(self.ns_lines, NS_PID, ns_tid, func, f"NS098 - creat {req.path} 644 18")
        directory = req.path.rsplit("/", 1)[0]
        queue = self.locks.get(directory)
        if queue is None:
            self.locks[directory] = deque()
            self.loop.after(self.gamma(self.s.hold_ms, self.s.hold_shape), self.created,
                            ns_tid, slow_tid, req, directory)
        else:
            queue.append((ns_tid, slow_tid, req))

    def created(self, ns_tid: int, slow_tid: int, req: _Req, directory: str) -> None:
        self.fileid += 1
        self.line(self.ns_lines, NS_PID, ns_tid, "Cns_srv_creat", f"file {self.fileid} created")
        self.ns_returns(ns_tid, slow_tid, req, directory)

    def ns_returns(self, ns_tid: int, slow_tid: int, req: _Req, directory: str | None) -> None:
        op = "creat" if req.op == "put" else "statg"
        self.line(self.ns_lines, NS_PID, ns_tid, f"Cns_srv_{op}", "returns 0")
        if directory is not None:
            queue = self.locks[directory]
            if queue:
                nxt = queue.popleft()
                self.loop.after(self.gamma(self.s.hold_ms, self.s.hold_shape), self.created,
                                *nxt, directory)
            else:
                del self.locks[directory]
        self.ns.give(ns_tid)
        self.loop.after(self.net(), self.answered, slow_tid, req)


_SECONDS: dict[int, str] = {}


def _stamp(ms: int) -> str:
    """`MM/DD HH:MM:SS.mmm` of `ms` after START (UTC)."""
    whole, frac = divmod(ms, 1000)
    text = _SECONDS.get(whole)
    if text is None:
        text = _SECONDS[whole] = f"{START + timedelta(seconds=whole):%m/%d %H:%M:%S}"
    return f"{text}.{frac:03d}"


def write(site: Site, prefix: str | Path) -> Run:
    """Run `site` and write PREFIX.log and PREFIX.dpns.log; returns the run's truth."""
    head = _Head(site)
    head.start()
    head.loop.run()
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    run = Run(site, Path(f"{prefix}.log"), Path(f"{prefix}.dpns.log"))
    for path, lines in ((run.log_path, head.dpm_lines), (run.dpns_log_path, head.ns_lines)):
        lines.sort()
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(f"{_stamp(ms)} {text}\n" for ms, _, text in lines)
    for r in head.done:
        run.records.append((r.op, {
            "queue": r.proc_start - r.put_ret, "proc": r.proc_end - r.proc_start,
            "ready_wait": r.ready - r.put_ret, "total": r.ended - r.accepted,
        }))
    return run


# The validation matrix of issue 29: (name, the site as logged, slow threads to predict).
# Capacities: the slow threads serve about S / (pre + hold + post + lock wait) per s; a
# directory's lock 1 / hold, times its share of the puts.
CASES = {
    "2 dirs, 30 ms hold, over capacity (issue 29)":
        (Site(rate=80, dirs=2, hold_ms=30, sthreads=20), 70),
    "4 dirs, 5 ms hold, below capacity":
        (Site(rate=30, dirs=4, hold_ms=5, sthreads=20), 12),
    "8 dirs, 60 ms hold, near capacity":
        (Site(rate=60, dirs=8, hold_ms=60, sthreads=30, pre_ms=220), 24),
    "2 dirs, 60 ms hold, lock-bound":
        (Site(rate=28, dirs=2, hold_ms=60, sthreads=12, pre_ms=250, post_ms=90), 40),
    "4 dirs, 20 ms hold, bursts of 10":
        (Site(rate=50, burst=10, dirs=4, hold_ms=20, sthreads=16), 32),
    "2 dirs, 30 ms hold, 40% gets":
        (Site(rate=60, get_share=0.4, dirs=2, hold_ms=30, sthreads=20), 40),
    "4 dirs, 15 ms hold, back-off 100 ms x2.5 up to 5 s":
        (Site(rate=50, dirs=4, hold_ms=15, sthreads=16, poll_first_ms=100, poll_factor=2.5,
              poll_max_ms=5000), 24),
    "8 dirs, 40 ms hold, polls every 250 ms":
        (Site(rate=70, dirs=8, hold_ms=40, sthreads=24, poll_first_ms=250, poll_factor=1.0,
              poll_max_ms=250), 48),
    "4 dirs, one hot (70%), 20 ms hold":
        (Site(rate=60, dirs=4, dir_weights=(0.7, 0.1, 0.1, 0.1), hold_ms=20, sthreads=20), 50),
}
LOG_SEED, TRUTH_SEEDS = 101, (202, 203, 204)


@dataclass
class Outcome:
    name: str
    exit_code: int
    stdout: str
    stderr: str
    truth: dict            # phase -> true p50 (s) at the predicted setting, over TRUTH_SEEDS
    truth_range: dict      # phase -> (lowest, highest) p50 of one truth seed
    predicted: dict        # phase -> whatif's p50 (s)
    current: dict          # phase -> the model's p50 at the logged setting
    logged: dict           # phase -> the log's true p50

    def error(self, phase: str) -> float:
        """Relative error of the prediction (inf against a truth of 0 it misses)."""
        want, got = self.truth[phase], self.predicted[phase]
        if want == 0:
            return 0.0 if got == 0 else float("inf")
        return abs(got - want) / want

    def holds(self, phase: str, tolerance: float, floor_s: float = 0.020) -> bool:
        """Within `tolerance` of the truth, or within `floor_s` of it (a p50 near 0)."""
        want, got = self.truth[phase], self.predicted[phase]
        return abs(got - want) <= max(tolerance * want, floor_s)


def whatif_case(name: str, workdir: Path, requests: int, seeds: int = 3,
                op: str = "put") -> Outcome:
    """Write case `name`'s log at its setting (LOG_SEED), run `dpmstream whatif` on it for
    the other slow-thread count, and run that count with each of TRUTH_SEEDS for the
    truth: their pooled p50s (one seed's swing as much as a quarter where a queue grows,
    or where ready_wait's p50 sits on a poll instant)."""
    import csv
    import subprocess
    import sys

    site, sthreads = CASES[name]
    site = site.but(requests=requests)
    log = write(site.but(seed=LOG_SEED), workdir / "log")
    truths = [write(site.but(sthreads=sthreads, seed=seed), workdir / f"truth{seed}")
              for seed in TRUTH_SEEDS]
    done = subprocess.run(
        [sys.executable, "-m", "dpmstream", "whatif", "--tz", "UTC", "--year", str(YEAR),
         "--host", HEAD, "--sthreads", str(sthreads), "--seeds", str(seeds),
         "--model-requests", str(requests), "--out", str(workdir / "out"),
         str(log.log_path), str(log.dpns_log_path)],
        capture_output=True, text=True, timeout=1800)
    rows = {}
    if (workdir / "out" / "prediction.csv").exists():
        with open(workdir / "out" / "prediction.csv", newline="") as fh:
            rows = {(r["scenario"], r["phase"]): float(r["p50"])
                    for r in csv.DictReader(fh) if r["op"] == op}
    each = [t.p50s(op) for t in truths]
    return Outcome(name, done.returncode, done.stdout, done.stderr, pooled_p50s(truths, op),
                   {p: (min(e[p] for e in each), max(e[p] for e in each)) for p in PHASES},
                   {p: rows.get(("whatif", p), float("nan")) for p in PHASES},
                   {p: rows.get(("current", p), float("nan")) for p in PHASES},
                   log.p50s(op))
