"""DOME reassembly: DomeEvents (parsers/dome_lines.py) -> DOME records (parsers/dome_records.py).

    r = DomeReassembler(timeout_ms=120_000)
    for ev in merge_by_time(per_node_events):
        records += r.feed(ev)
    records += r.finish()

Pure: no I/O, no wall clock. Event time is per host: each host's clock is its latest
stamp; a host's calls time out on its own clock, a put on its head's. Bounded: open calls
and open puts are capped, and every record emitted early by a cap is counted. A line that
no rule can use is counted, never fatal. The records of one input come out in one order:
each at the line (or the advance of time) that ends it, records ended by the same line in
the order of the rules below, and at finish() the calls still open by start then the puts
by deadline (docs/dome.md, "The reassembler").
"""

from __future__ import annotations

import heapq
from .plain import Counters

from .dome_calls import CallTable, role_of_query
from .dome_lines import DomeEvent
from .dome_profiles import SUPPRESSED
from .dome_puts import PutTable

# Lines of one second may arrive out of order across threads and nodes by this much.
ALLOWANCE_MS = 2_000
# Roles that say which kind of node logged them.
HEAD_ROLES = frozenset(("put", "put_selected", "putdone_head", "putdone_size", "putdone_error",
                        "fs_enabled", "fs_disabled"))
DISK_ROLES = frozenset(("putdone_disk", "putdone_forward", "capacity", "fs_count"))


class DomeStats(Counters):
    __slots__ = FIELDS = (
        "lines",
        "calls",                  # call records emitted
        "cut_calls",              # ... of them with no `Exiting` line
        "stray_call_ends",        # `Exiting` on a thread with no open call
        "commands_without_call",  # `req:` on a thread with no open call (its opening lines lost)
        "expired_calls",          # calls cut because their thread stayed silent past the timeout
        "call_evictions",         # calls cut because of the cap on open calls
        "process_deaths",         # a new pid, or a startup line, for a host's program
        "puts",                   # put records emitted
        "puts_joined",            # ... of them joined with a putdone (the no-join warning reads it)
        "expired_puts",           # puts emitted at their timeout
        "put_evictions",          # puts emitted early because of the cap on open puts
        "orphan_putdones",        # putdone lines that joined no open put
        "putcount_joins",         # putdones several puts matched, told apart by PUTCOUNT
        "ambiguous_putdones",     # putdones several puts matched and PUTCOUNT did not tell apart
        "repeated_putdones",      # a second putdone line of the same side for one put
        "orphan_putdone_errors",  # putdone error lines naming no joined put
        "unframed_lines",         # lines without a TID: no call can be framed by them
        "unusable_lines",         # lines a rule should read but cannot (a PFN not named by the head)
        "capacity",
        "fs_events",
        "journald_suppressed_lines",  # lines journald's rate limit dropped, as its notices say
    )


def merge_by_time(streams):
    """Several nodes' event streams side by side in event time; ties and each stream's own
    order kept (the first stream first on a tie)."""
    return heapq.merge(*streams, key=lambda ev: ev.ts)


def advance_clocks(clocks: dict, now_ms: int, sweep) -> list[dict]:
    """Every host's clock moved to at least now_ms, then sweep(host, out) per host: the
    records its timeouts end."""
    out: list[dict] = []
    for host in clocks:
        if clocks[host] < now_ms:
            clocks[host] = now_ms
        sweep(host, out)
    return out


class DomeReassembler:
    def __init__(self, timeout_ms: int = 3_600_000, max_calls: int = 100_000,
                 max_puts: int = 1_000_000, allowance_ms: int = ALLOWANCE_MS):
        self.timeout_ms = timeout_ms
        self.allowance_ms = allowance_ms
        self.stats = DomeStats()
        self.clocks: dict[str, int] = {}          # host -> its latest stamp
        self.roles: dict[str, str] = {}           # host -> head / disk
        self.pids: dict[tuple, int] = {}          # (host, program) -> the pid logging now
        self.fs_enabled: dict[tuple, bool] = {}   # (server, fs) -> enabled, as the head last said
        self.calls = CallTable(self.stats, self.roles, max_calls, timeout_ms)
        self.puts = PutTable(self.stats, max_puts, timeout_ms)

    # -- the API -------------------------------------------------------------------------
    def feed(self, ev) -> list[dict]:
        out: list[dict] = []
        self.stats.lines += 1
        host, role = ev.host, ev.role
        if ev.ts > self.clocks.get(host, ev.ts - 1):
            self.clocks[host] = ev.ts
        if role == SUPPRESSED:  # journald's notice: no process's line, a record of the gap
            self._on_suppressed(ev, out)
            self._sweep(host, out)
            return out
        self._learn_role(ev)
        self._process_life(ev, out)
        if role in ("accept", "call") and ev.tid >= 0:
            self.puts.thread_reopened(ev)
        handler = self._HANDLERS.get(role)
        if handler is not None:
            handler(self, ev, out)
        if ev.tid >= 0:
            self.calls.line(ev, out)
        elif role in ("accept", "call", "command", "returns"):
            self.stats.unframed_lines += 1
        self._sweep(host, out)
        return out

    def advance(self, now_ms: int) -> list[dict]:
        """Every host's event time is at least now_ms (all sources are past it): timeouts."""
        return advance_clocks(self.clocks, now_ms, self._sweep)

    def finish(self) -> list[dict]:
        """The end of input: every open call is cut, every open put emitted."""
        out: list[dict] = []
        self.calls.finish(out)
        self.puts.finish(self.clocks, out)
        return out

    def snapshot(self) -> dict:
        """Everything the reassembler holds, as plain JSON-able values: a driver that
        stores it and builds a reassembler from it (from_snapshot) goes on as one that
        never stopped (the records, the order and the counters the same)."""
        return {**self._hosts_state(), "calls": self.calls.state(), "puts": self.puts.state()}

    def track_changes(self) -> None:
        """From now on take_changes() says what changed (the first time: all that is open)."""
        self.calls.track_changes()
        self.puts.track_changes()

    def take_changes(self) -> dict:
        """What changed since the last take, as snapshot() lists it (parsers/dome_state.py
        keeps it as entries): `calls` [host, pid, tid, row or None], `puts` [seq, row or
        None, its items in the indices by seq, whether it moved], the moved ones in
        activity order; `unselected`, `by_name` [*key, seqs or None]; `rest` whole (bounded
        by hosts, processes and filesystems). Its cost follows the changes."""
        return {"calls": self.calls.changes(), **self.puts.changes(),
                "rest": {**self._hosts_state(), **self.puts.rest()}}

    def _hosts_state(self) -> dict:
        return {
            "clocks": dict(self.clocks), "roles": dict(self.roles),
            "pids": [[h, prog, pid] for (h, prog), pid in self.pids.items()],
            "fs_enabled": [[server, fs, on] for (server, fs), on in self.fs_enabled.items()],
            "stats": self.stats.as_dict(),
        }

    @classmethod
    def from_snapshot(cls, state: dict, **settings) -> "DomeReassembler":
        r = cls(**settings)
        r.clocks.update(state["clocks"])
        r.roles.update(state["roles"])
        r.pids.update({(h, prog): pid for h, prog, pid in state["pids"]})
        r.fs_enabled.update({(server, fs): on for server, fs, on in state["fs_enabled"]})
        for name, value in state["stats"].items():
            setattr(r.stats, name, value)
        r.calls.load_state(state["calls"])
        r.puts.load_state(state["puts"], DomeEvent)
        return r

    # -- rules ---------------------------------------------------------------------------
    def _learn_role(self, ev) -> None:
        role = None
        if ev.role == "command":
            role = role_of_query(ev.fields.get("query"))
        elif ev.role in HEAD_ROLES:
            role = "head"
        elif ev.role in DISK_ROLES:
            role = "disk"
        if role is not None:
            self.roles[ev.host] = role

    def _process_life(self, ev, out: list) -> None:
        """A new pid for the host's program, or a startup line, ends the process before it."""
        key = (ev.host, ev.program)
        before = self.pids.get(key)
        self.pids[key] = ev.pid
        if ev.role == "startup":
            if before is not None:
                self.stats.process_deaths += 1
            self.calls.end_process(ev.host, None, out)
            self.puts.process_started(ev.host, ev.pid)
        elif before is not None and before != ev.pid:
            self.stats.process_deaths += 1
            self.calls.end_process(ev.host, ev.pid, out)

    def _on_put(self, ev, out):
        self.puts.entering(ev, out)

    def _on_selected(self, ev, out):
        self.puts.selected(ev, out)

    def _on_returns(self, ev, out):
        if ev.tid >= 0:
            self.puts.returns(ev, out)

    def _on_putdone_disk(self, ev, out):
        self.puts.putdone(ev, "disk", out)

    def _on_putdone_head(self, ev, out):
        self.puts.putdone(ev, "head", out)

    def _on_putdone_error(self, ev, out):
        self.puts.putdone_error(ev)

    def _on_capacity(self, ev, out):
        f = ev.fields
        self.stats.capacity += 1
        out.append({"kind": "dome_capacity", "time": ev.ts, "host": ev.host, "fs": f["fs"],
                    "phys": f["phys"], "free": f["free"]})

    def _on_fs(self, ev, out):
        f = ev.fields
        key = (f["server"], f["fs"])
        enabled = ev.role == "fs_enabled"
        self.stats.fs_events += 1
        out.append({"kind": "dome_fs_event", "time": ev.ts, "host": ev.host, "server": f["server"],
                    "fs": f["fs"], "event": "enabled" if enabled else "disabled",
                    "transition": int(self.fs_enabled.get(key, True) != enabled)})
        self.fs_enabled[key] = enabled

    def _on_suppressed(self, ev, out):
        lines = ev.fields["count"]
        self.stats.journald_suppressed_lines += lines
        out.append({"kind": "dome_journald_gap", "time": ev.ts, "host": ev.host,
                    "program": ev.program, "lines": lines})

    _HANDLERS = {
        "put": _on_put, "put_selected": _on_selected, "returns": _on_returns,
        "putdone_disk": _on_putdone_disk, "putdone_head": _on_putdone_head,
        "putdone_error": _on_putdone_error, "capacity": _on_capacity,
        "fs_enabled": _on_fs, "fs_disabled": _on_fs,
    }

    def _sweep(self, host: str, out: list) -> None:
        horizon = self.clocks[host] - self.allowance_ms - self.timeout_ms
        self.calls.expire(host, horizon, out)
        self.puts.expire(self.clocks, self.allowance_ms, out)
