"""Linking name-server calls to the DPM request they served (docs/record-rules.md,
"Linking name-server calls").

A name-server call is linked to a request when
  (a) its client (NS092 `from <host>`) is the head node: the record's host, or an alias,
      or (`learn_head`, the default when the head node was not named) the client of the
      host's first call that linked: the head node's name as the name server sees it,
      learned from the logs (a replay's host may be this machine's name, the DPM log
      carrying none; the name server may see the head by its short name or address);
  (b) its path (NS098) is one of the request's files (the path of a SURL of its DP098
      `put|get <i> <surl>` lines);
  (c) it lies inside a processing run of the request that returned: NS092 no earlier than
      the run's first line less `slack_ms`, `returns` no later than the run's `returns`
      plus `slack_ms`;
  (d) it is on the run's side of every clock step back: each log's steps back are counted
      as it is read, and the call's (its name-server log's, at its `returns`) equals the
      run's (its DPM log's, at its `returns`);
and exactly one run qualifies (a call inside the runs of two requests naming its file is
ambiguous and stays unlinked, counted).

The DPM and DPNS lines of a head node interleave with some disorder, so the Linker sits
between the reassembler and the sinks and holds records for a short event-time delay:
a name-server call record until its host's watermark is `delay_ms` past its `returns`
and no run that may hold it is still open; a request record until the watermark is
`delay_ms` past its end and its runs' ends, and every call that may link to it is
decided. The watermark here is held back by the host's DPM or name-server log while that
one lags, by at most MAX_LAG_MS (a log further behind has stopped or is quiet): read from
two files, one log may run ahead, and it must not decide a call before the other log's
runs are read, nor a request before its calls. Request records then carry `ns_calls` and
`ns_ms` (empty when no name-server line of the host was read), call records carry the
`token` they served.

Until a host's first name-server line, its request records pass straight through with
empty `ns_calls`/`ns_ms` (a DPM log read alone is not delayed), unless the driver knows a
name-server log is coming (`expect_ns`: replay given a DPNS file) or a source of the host
is still buffering lines to detect its profile, or a followed log has given no line yet
(`detecting`, the driver's answer: parsers/pipeline.py await_silent_logs): they might be
the name server's, so records wait for the verdict, or for the driver to give up on the
silent log.
"""

from __future__ import annotations

from collections import deque
from .plain import Counters
from collections.abc import Callable

from .schema import key_of

NS_DAEMON = "dpns"  # the daemon name of the name-server profile (DPNS, LFC)
DPM_DAEMON = "dpm"  # the daemon name of the DPM profile: its slow threads make the runs
# A host's DPM or name-server log further behind its latest line than this has stopped
# (or is quiet), not lagging: it no longer holds the linker's records back.
MAX_LAG_MS = 60_000
# How many distinct name-server clients a linker remembers for its "none linked" warning.
MAX_CLIENTS_SEEN = 16


def surl_path(surl: str) -> str:
    """The name-server path of a SURL: after `?SFN=` if present, else after the host
    (`srm://head:8446/srm/managerv2?SFN=/dpm/x` and `srm://head/dpm/x` -> `/dpm/x`)."""
    head, sep, sfn = surl.partition("?SFN=")
    if sep:
        return sfn
    scheme, sep, rest = surl.partition("://")
    if not sep:
        return surl
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def directory_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class Run:
    """One processing run of a request: its window and files, and the calls linked to it."""

    __slots__ = ("host", "token", "start", "end", "cut", "paths", "pending", "calls", "ms",
                 "epoch", "end_epoch")

    def __init__(self, host, token, start, paths, epoch=0):
        self.host, self.token, self.start, self.paths = host, token, start, paths
        self.epoch = epoch     # the steps back its DPM log had taken at its first line ...
        self.end_epoch = None  # ... and at its `returns`
        self.end = None        # its `returns`; None while open
        self.cut = False       # ended without `returns`: links nothing
        self.pending = 0       # held calls that may still link to it
        self.calls = 0
        self.ms = 0

    @property
    def open(self) -> bool:
        return self.end is None and not self.cut


class HeldCall:
    __slots__ = ("record", "path", "cands", "epoch")

    def __init__(self, record, path, epoch=0):
        self.record, self.path, self.cands = record, path, []
        self.epoch = epoch  # the steps back its name-server log had taken at its `returns`


class LinkStats(Counters):
    """How the name-server calls were linked to requests."""

    __slots__ = FIELDS = (
        "ns_calls_linked",     # name-server calls linked to a request
        "ns_calls_ambiguous",  # inside the runs of several requests naming their file
    )


class Linker:
    def __init__(self, emit: Callable[[dict], None], head_aliases=(), delay_ms: int = 3000,
                 slack_ms: int = 5, expect_ns: bool = False, learn_head: bool = True):
        self.emit = emit
        self.expect_ns = expect_ns
        self.aliases = frozenset(a.lower() for a in head_aliases)
        # Whether a host's head client is learned from its first linked call (off when the
        # head node is named: --host or --head-alias).
        self.learn_head = learn_head and not self.aliases
        self._heads: dict[str, str] = {}  # host -> its learned head client (lower case)
        self._clients: dict[str, None] = {}  # name-server clients seen, the first few
        self._ran = False  # whether a processing run was heard of
        self.delay_ms = delay_ms
        self.slack_ms = slack_ms
        self.reassembler = None
        # host -> whether one of its sources still buffers lines to detect its profile.
        # None while no source is detecting (most of a run): nothing to ask per record.
        self.detecting: Callable[[str], bool] | None = None
        self._ns_hosts: set[str] = set()  # hosts whose name-server lines were read
        self.stats = LinkStats()
        self._runs_by_path: dict[tuple, list[Run]] = {}
        self._runs_by_token: dict[tuple, list[Run]] = {}
        self._calls: dict[str, deque[HeldCall]] = {}
        self._calls_by_path: dict[tuple, list[HeldCall]] = {}
        self._requests: dict[str, deque[dict]] = {}
        # (host, daemon) -> [steps back its log has taken, its latest stamp since the last]
        self._epochs: dict[tuple, list] = {}

    def attach(self, reassembler) -> None:
        """Sit behind this reassembler: take its records, hear of its processing runs."""
        self.reassembler = reassembler
        reassembler.emit = self.take
        reassembler.runs = self

    # -- from the reassembler -------------------------------------------------------
    def take(self, record: dict) -> None:
        host = record["host"]
        self._observe(host)
        if record["kind"] == "request":
            if not (self.expect_ns or self._ns_read(host) or self._is_detecting(host)
                    or self._requests.get(host)):
                self._complete(record, self._runs_by_token.get((host, record["token"]), ()))
                return
            self._requests.setdefault(host, deque()).append(record)
        elif self._may_link(record):
            self._hold_call(record)
        else:
            self.emit(record)
        self._release(host)  # any record is a chance to let out what waited long enough

    def run_started(self, host: str, token: str, start: int, surls) -> None:
        paths = frozenset(surl_path(s) for s in surls)
        epoch = self._observe(host)[0]
        run = Run(host, token, start, paths, epoch)
        self._ran = True
        self._runs_by_token.setdefault((host, token), []).append(run)
        lo = start - self.slack_ms
        for path in paths:
            self._runs_by_path.setdefault((host, path), []).append(run)
            for held in self._calls_by_path.get((host, path), ()):
                # A call read before this run's log stepped back is from before the step.
                if held.record["started"] >= lo and held.epoch >= epoch:
                    held.cands.append(run)
                    run.pending += 1

    def run_ended(self, host: str, token: str, start: int, end: int | None) -> None:
        epoch = self._observe(host)[0]
        for run in self._runs_by_token.get((host, token), ()):
            if run.start == start and run.open:
                if end is None:
                    run.cut = True
                else:
                    run.end, run.end_epoch = end, epoch
                break
        self._release(host)

    # -- time ------------------------------------------------------------------------
    def advance(self) -> None:
        for host in self._held_hosts():
            self._release(host)

    def finish(self) -> None:
        """End of input (after the reassembler's finish): decide and emit everything."""
        for host in self._held_hosts():
            self._release(host, final=True)

    def _held_hosts(self) -> list[str]:
        """The hosts holding records, in name order: the order their records come out in
        when several are released at once, the same in every run and in both engines
        (native/src/linking.rs held_hosts), never a set's."""
        return sorted(self._requests.keys() | self._calls.keys())

    @property
    def held(self) -> int:
        return sum(map(len, self._calls.values())) + sum(map(len, self._requests.values()))

    def _observe(self, host: str) -> tuple[int, int]:
        """The steps back the host's (DPM, name-server) logs have taken: a log's stamp more
        than the allowance behind its latest since its last step is one more. A log first
        seen starts at the most its host's other log has taken (it was not read before)."""
        reassembler = self.reassembler
        out = []
        for daemon in (DPM_DAEMON, NS_DAEMON):
            now = reassembler.stream_time(host, daemon) if reassembler is not None else None
            entry = self._epochs.get((host, daemon))
            if entry is None:
                if now is None:
                    out.append(None)
                    continue
                entry = self._epochs[(host, daemon)] = [0, now]
                entry[0] = max([e[0] for (h, _), e in self._epochs.items() if h == host])
            elif now is not None:
                if now < entry[1] - reassembler.allowance_ms:
                    entry[0] += 1
                    entry[1] = now
                elif now > entry[1]:
                    entry[1] = now
            out.append(entry[0])
        dpm, ns = out
        return (dpm if dpm is not None else ns or 0, ns if ns is not None else dpm or 0)

    def _is_detecting(self, host: str) -> bool:
        return self.detecting is not None and self.detecting(host)

    def _ns_read(self, host: str) -> bool:
        if host in self._ns_hosts:
            return True
        if self.reassembler is not None and self.reassembler.seen_daemon(host, NS_DAEMON):
            self._ns_hosts.add(host)
            return True
        return False

    # -- calls -----------------------------------------------------------------------
    def _may_link(self, record: dict) -> bool:
        if record["daemon"] != NS_DAEMON or not record.get("path") or record["ended"] is None:
            return False
        client = (record["client"] or "").lower()
        if len(self._clients) < MAX_CLIENTS_SEEN:
            self._clients[client] = None
        return self._head_client(record["host"], client, learning=True)

    def _head_client(self, host: str, client: str, learning: bool) -> bool:
        """Whether `client` is the head node `host` as the name server sees it; with
        `learning`, also any client while the host's head client is still to be learned."""
        if client == host.lower() or client in self.aliases:
            return True
        head = self._heads.get(host)
        if head is not None:
            return client == head
        # Learning holds calls only where runs may come: the host's DPM log is being read.
        return (learning and self.learn_head and self.reassembler is not None
                and self.reassembler.seen_daemon(host, DPM_DAEMON))

    @property
    def unlinked_clients(self) -> list[str]:
        """When processing runs and name-server calls naming a path were both read and no
        call linked: the clients of those calls (the first MAX_CLIENTS_SEEN), to say which
        names were there; else []."""
        if self.stats.ns_calls_linked or not self._ran:
            return []
        return sorted(self._clients)

    def _hold_call(self, record: dict) -> None:
        host, path = record["host"], record["path"]
        epoch = self._epochs[(host, NS_DAEMON)][0] if (host, NS_DAEMON) in self._epochs else 0
        held = HeldCall(record, path, epoch)
        started, ended, slack = record["started"], record["ended"], self.slack_ms
        for run in self._runs_by_path.get((host, path), ()):
            if run.cut or run.start - slack > started or run.epoch > epoch:
                continue
            if run.end is not None and (ended > run.end + slack or run.end_epoch != epoch):
                continue
            held.cands.append(run)
            run.pending += 1
        self._calls.setdefault(host, deque()).append(held)
        self._calls_by_path.setdefault((host, path), []).append(held)

    def _decide(self, held: HeldCall) -> None:
        record, slack = held.record, self.slack_ms
        inside = []
        for run in held.cands:
            run.pending -= 1
            if (run.end is not None and not run.cut and record["ended"] <= run.end + slack
                    and run.end_epoch == held.epoch):
                inside.append(run)
        if len(inside) == 1:
            host, client = record["host"], (record["client"] or "").lower()
            if self.learn_head and host not in self._heads:
                self._heads[host] = client  # the first call that links names the head
            elif not self._head_client(host, client, learning=False):
                inside = []  # another client (a disk node): inside the run by chance
        if len(inside) == 1:
            run = inside[0]
            run.calls += 1
            run.ms += record["ended"] - record["started"]
            record["token"] = run.token
            self.stats.ns_calls_linked += 1
        elif inside:
            self.stats.ns_calls_ambiguous += 1
        key = (record["host"], held.path)
        same = self._calls_by_path[key]
        same.remove(held)
        if not same:
            del self._calls_by_path[key]
        self.emit(record)

    # -- release ---------------------------------------------------------------------
    def _release(self, host: str, final: bool = False) -> None:
        if final:
            horizon = None
        else:
            base = self._horizon_base(host)
            if base is None:
                return
            horizon = base - self.delay_ms
        calls = self._calls.get(host)
        waiting = []  # due, but inside a run still open: the calls after them go on
        while calls:
            held = calls[0]
            if horizon is not None:
                if held.record["ended"] > horizon:
                    break
                if any(r.open for r in held.cands):
                    waiting.append(calls.popleft())
                    continue
            calls.popleft()
            self._decide(held)
        if waiting:
            calls.extendleft(reversed(waiting))
        requests = self._requests.get(host)
        if horizon is not None and requests and self._is_detecting(host):
            return  # the lines waiting for detection may be the name server's
        while requests:
            record = requests[0]
            runs = self._runs_by_token.get((host, record["token"]), ())
            if horizon is not None:
                due = max([record["ended"] or 0] + [r.end + self.slack_ms for r in runs
                                                     if r.end is not None])
                if due > horizon or any(r.open or r.pending for r in runs):
                    break
            requests.popleft()
            self._complete(record, runs)

    def _horizon_base(self, host: str) -> int | None:
        """The event time up to which `host`'s runs and calls are all read: its watermark,
        held back by its DPM or name-server log when that one lags (read side by side,
        one log may run seconds ahead, and its lines must not decide a call or request
        whose runs or calls the other has yet to give), unless it lags by more than
        MAX_LAG_MS (a log that stopped or is quiet)."""
        reassembler = self.reassembler
        wm = reassembler.watermark(host) if reassembler else None
        if wm is None:
            return None
        base = wm
        for daemon in (DPM_DAEMON, NS_DAEMON):
            now = reassembler.stream_time(host, daemon)
            if now is not None:
                lag = now - reassembler.allowance_ms
                if wm - lag <= MAX_LAG_MS:
                    base = min(base, lag)
        return base

    def _complete(self, record: dict, runs) -> None:
        host = record["host"]
        self._runs_by_token.pop((host, record["token"]), None)
        for run in runs:
            for path in run.paths:
                same = self._runs_by_path.get((host, path))
                if same is not None:
                    same.remove(run)
                    if not same:
                        del self._runs_by_path[(host, path)]
        if self.expect_ns or self._ns_read(host):
            record["ns_calls"] = sum(r.calls for r in runs if r.end is not None)
            record["ns_ms"] = sum(r.ms for r in runs if r.end is not None)
        else:  # no name-server log read: unknown, not zero
            record["ns_calls"] = record["ns_ms"] = None
        self.emit(record)

    # -- state for external stores (the Kafka worker) -------------------------------
    def state(self) -> dict | None:
        """Everything held, JSON-safe (None when nothing is): runs of requests not yet
        emitted, held call and request records. The records are copies: the caller keeps
        and stores them as they are now, while the held ones get their links filled in."""
        runs: dict[int, int] = {}
        run_rows = []
        for group in self._runs_by_token.values():
            for run in group:
                runs[id(run)] = len(run_rows)
                run_rows.append([run.host, run.token, run.start, run.end, run.cut,
                                 sorted(run.paths), run.calls, run.ms, run.epoch, run.end_epoch])
        calls = [[dict(held.record), held.path,
                  [runs[id(r)] for r in held.cands if id(r) in runs], held.epoch]
                 for queue in self._calls.values() for held in queue]
        requests = [dict(record) for queue in self._requests.values() for record in queue]
        for host in self.reassembler.hosts() if self.reassembler else ():
            self._ns_read(host)
        if not (run_rows or calls or requests or self._ns_hosts or self._heads):
            return None
        state = {"runs": run_rows, "calls": calls, "requests": requests,
                 "ns_hosts": sorted(self._ns_hosts), "heads": dict(sorted(self._heads.items()))}
        if any(entry[0] for entry in self._epochs.values()):  # a log stepped back
            state["epochs"] = sorted([host, daemon, *entry]
                                     for (host, daemon), entry in self._epochs.items())
        return state

    def restore(self, state: dict | None) -> None:
        """Hold what `state` (from state()) held. Its records are copied in: the caller's
        state stays as it was while these get their links filled in."""
        if not state:
            return
        state = with_current_keys(state)
        self._ns_hosts.update(state.get("ns_hosts", ()))
        self._heads.update(state.get("heads", {}))
        for host, daemon, epoch, latest in state.get("epochs", ()):
            self._epochs[(host, daemon)] = [epoch, latest]
        runs = []
        for row in state["runs"]:
            # Saved before logs' clock steps were counted: none counted (epochs 0).
            host, token, start, end, cut, paths, calls, ms, epoch, end_epoch = (
                list(row) + [0, None if row[3] is None else 0])[:10]
            run = Run(host, token, start, frozenset(paths), epoch)
            run.end, run.cut, run.calls, run.ms = end, cut, calls, ms
            run.end_epoch = end_epoch
            runs.append(run)
            self._runs_by_token.setdefault((host, token), []).append(run)
            # Cut runs too, as before the save: completing the request removes them.
            for path in run.paths:
                self._runs_by_path.setdefault((host, path), []).append(run)
        for row in state["calls"]:
            record, path, cands, epoch = (list(row) + [0])[:4]
            held = HeldCall(dict(record), path, epoch)
            for i in cands:
                held.cands.append(runs[i])
                runs[i].pending += 1
            host = record["host"]
            self._calls.setdefault(host, deque()).append(held)
            self._calls_by_path.setdefault((host, path), []).append(held)
        for record in state["requests"]:
            self._requests.setdefault(record["host"], deque()).append(dict(record))


def with_current_keys(state: dict) -> dict:
    """A linker state (Linker.state()) whose held records have today's keys. A state saved
    before the durations were named `*_ms` (a `run --state` file, the worker's state topic)
    holds them under their column names (`auth_s`, `ns_s`, ...): each key is read as
    schema.key_of reads a column, so that state restores to the same records. Either
    engine's linker restores through this."""
    def current(record: dict) -> dict:
        return {key_of(key): value for key, value in record.items()}

    return dict(state,
                calls=[[current(row[0]), *row[1:]] for row in state.get("calls", ())],
                requests=[current(record) for record in state.get("requests", ())])
