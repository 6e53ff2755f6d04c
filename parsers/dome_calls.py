"""DOME calls: the thread table of the DOME reassembler (docs/dome.md, "Calls").

One call per (host, pid, TID): opened by `accept`, or by `call` (`clientdn`) when no accept
line came first; ended by `returns` (`Exiting: code: N`). A call with no `Exiting` is cut:
a new open line on its thread, its process's death, a silent thread past the timeout, the
cap on open calls, or the end of input closes it. An `Exiting` with no open call is a
stray end (counted, no record). Lines without a TID (dmlite < 0.8.4) frame no call.
"""

from __future__ import annotations

from collections import OrderedDict


class OpenCall:
    __slots__ = ("start", "latest", "framed", "command", "role", "caller", "remote", "whole")

    def __init__(self, start, whole):
        self.start = start
        self.latest = start
        self.framed = False      # its clientdn or req: line came (an accept alone is not)
        self.command = None
        self.role = None         # from its query: /domehead/ or /domedisk/
        self.caller = None
        self.remote = None
        self.whole = whole


CALL_STATE = OpenCall.__slots__


def role_of_query(query: str | None) -> str | None:
    if query is None:
        return None
    if query.startswith("/domehead/"):
        return "head"
    if query.startswith("/domedisk/"):
        return "disk"
    return None


class CallTable:
    """Open calls per host, least recently active first (timeouts and the cap pop the front)."""

    def __init__(self, stats, roles: dict, max_open: int, timeout_ms: int):
        self.stats = stats
        self.roles = roles        # host -> head/disk, shared with the reassembler
        self.max_open = max_open
        self.timeout_ms = timeout_ms
        self.open: dict[str, OrderedDict] = {}   # host -> (pid, tid) -> OpenCall
        self.count = 0
        # Once tracked (take_changes): the calls opened, moved or closed since the last
        # take, in the order of their last change (every change of an open call moves it
        # to the end, so the open ones come in activity order).
        self.changed: dict | None = None

    def line(self, ev, out: list) -> None:
        """A line of a thread (tid >= 0): open, fill, end or touch its call."""
        host, key, role = ev.host, (ev.pid, ev.tid), ev.role
        calls = self.open.setdefault(host, OrderedDict())
        call = calls.get(key)
        if role == "accept" or (role == "call" and call is not None and call.framed):
            if call is not None:
                self._close(host, key, call, None, out)
            call = self._open(host, key, ev, out)
        elif role == "call" and call is None:
            call = self._open(host, key, ev, out)
        if call is None:
            if role == "returns":
                self.stats.stray_call_ends += 1
            elif role == "command":
                self.stats.commands_without_call += 1   # its call's opening lines were lost
            return
        call.latest = max(call.latest, ev.ts)
        call.whole = call.whole or ev.whole_seconds
        calls.move_to_end(key)
        self._mark(host, key)
        f = ev.fields
        if role == "call":
            call.framed = True
            call.caller, call.remote = f.get("client_host"), f.get("remote_host")
        elif role == "command":
            call.framed = True
            call.command = f.get("op")
            call.role = role_of_query(f.get("query"))
        elif role == "returns":
            self._close(host, key, call, ev, out)

    def _open(self, host, key, ev, out) -> OpenCall:
        if self.count >= self.max_open:
            self.evict(out)
        call = OpenCall(ev.ts, ev.whole_seconds)
        self.open[host][key] = call
        self.count += 1
        return call

    def _mark(self, host: str, key: tuple) -> None:
        if self.changed is not None:
            self.changed.pop((host, key), None)
            self.changed[(host, key)] = None

    def track_changes(self) -> None:
        """From now on changes() names what changed (the first time: every open call)."""
        self.changed = {(host, key): None for host, calls in self.open.items() for key in calls}

    def changes(self) -> list:
        """[host, pid, tid, its state row or None (closed)] of each call changed since the
        last call, the open ones in activity order; then tracking starts again."""
        out = []
        for host, key in self.changed:
            call = self.open.get(host, {}).get(key)
            out.append([host, *key, None if call is None else self.row(key, call)])
        self.changed = {}
        return out

    @staticmethod
    def row(key: tuple, call: OpenCall) -> list:
        return [*key, *(getattr(call, name) for name in CALL_STATE)]

    def _close(self, host, key, call: OpenCall, ret, out: list) -> None:
        del self.open[host][key]
        self.count -= 1
        self._mark(host, key)
        end = None if ret is None else ret.ts
        self.stats.calls += 1
        if ret is None:
            self.stats.cut_calls += 1
        out.append({
            "kind": "dome_call", "host": host, "pid": key[0], "tid": key[1],
            "role": call.role or self.roles.get(host), "command": call.command,
            "http_code": None if ret is None else ret.fields.get("code"),
            "caller": call.caller, "remote_client": call.remote,
            "start": call.start, "end": end,
            "duration": None if end is None else max(0, end - call.start),
            "cut": 0 if ret is not None else 1, "whole_seconds": int(call.whole),
        })

    def end_process(self, host: str, keep_pid: int | None, out: list) -> None:
        """A process of the host died: cut every call open on the host's other pids
        (keep_pid None: every pid, a pid reused by a new process)."""
        calls = self.open.get(host)
        if not calls:
            return
        for key in [k for k in calls if k[0] != keep_pid]:
            self._close(host, key, calls[key], None, out)

    def expire(self, host: str, horizon: int, out: list) -> None:
        """Cut the calls of the host silent since before horizon (its watermark less the timeout)."""
        calls = self.open.get(host)
        while calls:
            key, call = next(iter(calls.items()))
            if call.latest >= horizon:
                return
            self.stats.expired_calls += 1
            self._close(host, key, call, None, out)

    def evict(self, out: list) -> None:
        """The cap: cut the least recently active call of any host."""
        fronts = [(next(iter(c.values())).latest, host) for host, c in self.open.items() if c]
        if not fronts:
            return
        _, host = min(fronts)
        key, call = next(iter(self.open[host].items()))
        self.stats.call_evictions += 1
        self._close(host, key, call, None, out)

    def state(self) -> dict:
        """The open calls, per host in least-recently-active order, as plain lists."""
        return {host: [self.row(key, c) for key, c in calls.items()]
                for host, calls in self.open.items() if calls}

    def load_state(self, state: dict) -> None:
        self.open = {}
        for host, rows in state.items():
            calls = self.open[host] = OrderedDict()
            for pid, tid, *values in rows:
                call = OpenCall.__new__(OpenCall)
                for name, value in zip(CALL_STATE, values):
                    setattr(call, name, value)
                calls[(pid, tid)] = call
        self.count = sum(len(c) for c in self.open.values())

    def finish(self, out: list) -> None:
        """The end of input cuts every open call, oldest start first."""
        left = sorted(((c.start, host, key) for host, calls in self.open.items() for key, c in calls.items()))
        for _, host, key in left:
            self._close(host, key, self.open[host][key], None, out)
