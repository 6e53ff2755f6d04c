"""DOME puts: the put table of the DOME reassembler (docs/dome.md, "Puts").

A put is the head's `dome_put`: its `Entering` and `Selected fs` lines (tied by their
thread, or by their LFN without {TID}), the `Exiting` line ending its thread's call (the
put code). The head names the replica FS/VO/DATE/BASENAME.PUTCOUNT.EPOCH; a putdone line
(the disk's, then the head's) joins the open put of the same (server, BASENAME), whose PFN
starts with its FS, whose `Selected fs` second is EPOCH or EPOCH-1 and whose put_time is
at most `timeout` before the putdone. Several such puts are told apart by PUTCOUNT: the
table counts each head process's `Selected fs` lines and calibrates the count's offset on
every putdone only one put matches.

A joined put ends once its disk putdone call has returned (the disk's `Exiting`, which
relays the head's code) and its head's watermark is past that line (so the head's lines of
the same second have come), else at its timeout. A put
not joined within `timeout` of its put_time is `incomplete`.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque

from .lines import MAX_DIGITS
from .schema import BY_EVICTION, BY_INPUT_END, BY_LINE, BY_TIMEOUT, FAILED, INCOMPLETE, SUCCESS

# EPOCH is the head's time(0) read just after the `Selected fs` line: that line's second or the next.
EPOCH_SLACK_S = 1
# A put record ends, and is named, as a request record does (schema.py, one declaration).
LINE, TIMEOUT, EVICTED, INPUT_END = BY_LINE, BY_TIMEOUT, BY_EVICTION, BY_INPUT_END


class OpenPut:
    __slots__ = ("seq", "head", "pid", "lfn", "put_time", "latest", "put_code", "server", "fs",
                 "sel_sec", "count", "pfn", "size", "disk_time", "head_time", "disk_code",
                 "head_code", "error", "whole", "threads", "done",
                 # not its state row: what the indices by seq hold of it (take_changes)
                 "deadline", "settled", "thread")

    def __init__(self, seq, ev, lfn):
        self.seq = seq
        self.head, self.pid, self.lfn = ev.host, ev.pid, lfn
        self.put_time = self.latest = ev.ts
        self.put_code = self.server = self.fs = self.sel_sec = self.count = None
        self.pfn = self.size = self.disk_time = self.head_time = None
        self.disk_code = self.head_code = None
        self.error = False
        self.whole = ev.whole_seconds
        self.threads: list = []   # (host, pid, tid) of its putdone calls awaiting their Exiting
        self.done = False
        self.deadline = None      # put_time + the table's timeout
        self.settled: list = []   # its disk putdone calls' Exiting times (the settling heap's)
        self.thread = None        # (host, pid, tid) of its dome_put call (put_threads' key)


# An open put's state: its slots but the `done` flag (an open put is not done) and what
# the indices hold of it.
PUT_STATE = OpenPut.__slots__[:OpenPut.__slots__.index("done")]


def split_pfn(pfn: str) -> tuple[str, int, int] | None:
    """BASENAME, PUTCOUNT, EPOCH of a PFN named by the head; None for any other name
    (PUTCOUNT and EPOCH are decimal numbers the head printed: ASCII digits, at most
    MAX_DIGITS of them; `str.isdigit` alone took `²`, which int() refuses)."""
    parts = basename(pfn).rsplit(".", 2)
    if len(parts) != 3 or not parts[0] or not all(_decimal(p) for p in parts[1:]):
        return None
    return parts[0], int(parts[1]), int(parts[2])


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS


def _seqs(puts: list | None) -> list | None:
    return None if puts is None else [p.seq for p in puts]


def basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _discard(index: dict, key, put) -> None:
    """Take put out of index[key], a list, dropping the key when it empties."""
    same = index.get(key)
    if same and put in same:
        same.remove(put)
        if not same:
            del index[key]


class PutTable:
    def __init__(self, stats, max_open: int, timeout_ms: int):
        self.stats = stats
        self.max_open = max_open
        self.timeout_ms = timeout_ms
        self.seq = 0
        self.open: OrderedDict[int, OpenPut] = OrderedDict()  # seq -> put, least recently active first
        self.deadlines: list = []                               # heap of (put_time + timeout, seq)
        self.settling: list = []                                # heap of (disk's Exiting, seq)
        self.put_threads: dict[tuple, OpenPut] = {}            # head thread -> its dome_put call's put
        self.done_threads: dict[tuple, tuple] = {}             # putdone thread -> (put, "disk"/"head")
        self.unselected: dict[tuple, list] = {}                # notid: (head, pid, lfn) -> puts
        self.by_name: dict[tuple, list] = {}                   # (server, basename) -> joinable puts
        self.by_pfn: dict[str, OpenPut] = {}                   # joined puts
        self.selected_count: dict[tuple, int] = {}             # (head, pid) -> Selected lines seen
        self.offset: dict[tuple, int] = {}                     # (head, pid) -> PUTCOUNT - count
        # Putdones that joined nothing yet: a disk's line may come before the head's
        # `Selected fs` line of the same whole second. [event, side, waiting] per line.
        self.waiting: dict[tuple, list] = {}                   # (server, basename) -> items
        self.waiting_order: deque = deque()                    # (key, item), oldest first
        self.heads: set = set()                                # hosts that logged puts
        # Once tracked (take_changes): puts changed since the last take, seq -> whether
        # it moved to the end of the activity order (those in the order of their last
        # move: the table's), and the index keys changed.
        self.changed: dict | None = None
        self.changed_unselected: set = set()
        self.changed_by_name: set = set()

    # -- lines -------------------------------------------------------------------------
    def entering(self, ev, out: list) -> None:
        self.heads.add(ev.host)
        put = self._new(ev, ev.fields["lfn"], out)
        if ev.tid >= 0:
            self._put_thread((ev.host, ev.pid, ev.tid), put)
        else:
            self.unselected.setdefault((ev.host, ev.pid, put.lfn), []).append(put)
            self._index_changed(self.changed_unselected, (ev.host, ev.pid, put.lfn))

    def selected(self, ev, out: list) -> None:
        f = ev.fields
        proc = (ev.host, ev.pid)
        self.heads.add(ev.host)
        self.selected_count[proc] = self.selected_count.get(proc, 0) + 1
        put = None
        if ev.tid >= 0:
            put = self.put_threads.get((ev.host, ev.pid, ev.tid))
            if put is not None and (put.lfn != f["lfn"] or put.sel_sec is not None):
                put = None
        else:
            waiting = self.unselected.get((ev.host, ev.pid, f["lfn"]))
            if waiting:
                put = waiting[-1]   # the latest Entering of that LFN: an older one was refused
                _discard(self.unselected, (ev.host, ev.pid, f["lfn"]), put)
                self._index_changed(self.changed_unselected, (ev.host, ev.pid, f["lfn"]))
        if put is None or put.done:
            put = self._new(ev, f["lfn"], out)
            if ev.tid >= 0:
                self._put_thread((ev.host, ev.pid, ev.tid), put)
        self._touch(put, ev)
        put.server, put.fs, put.sel_sec = f["server"], f["fs"], ev.ts // 1000
        put.count = self.selected_count[proc]
        key = (put.server, basename(put.lfn))
        self.by_name.setdefault(key, []).append(put)
        self._index_changed(self.changed_by_name, key)
        for item in self.waiting.pop(key, ()):
            item[2] = False
            self.putdone(item[0], item[1], out)

    def returns(self, ev, out: list) -> None:
        """An `Exiting` line: the code of a put or putdone call on that thread, if any."""
        thread = (ev.host, ev.pid, ev.tid)
        code = ev.fields["code"]
        put = self.put_threads.pop(thread, None)
        if put is not None and not put.done:
            self._touch(put, ev)
            put.put_code = code
            if code != 200:
                self._emit(put, FAILED, LINE, ev.ts, out)
        done = self.done_threads.pop(thread, None)
        if done is not None:
            put, side = done
            if put.done:
                return
            self._changed(put)
            put.threads.remove(thread)
            if side == "disk":
                put.disk_code = code
                put.settled.append(ev.ts)
                # The disk relays the head's answer: the put is over, but lines of the head
                # stamped as late may still come (other node, same second): wait for them.
                heapq.heappush(self.settling, (ev.ts, put.seq))
            else:
                put.head_code = code

    def process_started(self, host: str, pid: int) -> None:
        """A process (maybe a reused pid) started: its PUTCOUNT starts again from 1, and the
        count of its `Selected fs` lines from here is PUTCOUNT itself (offset 0)."""
        self.selected_count.pop((host, pid), None)
        self.offset[(host, pid)] = 0

    def thread_reopened(self, ev) -> None:
        """A new call on a thread: the Exiting that comes is not an older call's."""
        thread = (ev.host, ev.pid, ev.tid)
        put = self.put_threads.pop(thread, None)
        if put is not None:
            self._changed(put)
        done = self.done_threads.pop(thread, None)
        if done is not None:
            self._changed(done[0])

    def putdone(self, ev, side: str, out: list) -> None:
        f = ev.fields
        pfn = f["pfn"]
        put = self.by_pfn.get(pfn)
        if put is None:
            put = self._join(ev, side, pfn)
            if put is None:
                return
        if (put.disk_time if side == "disk" else put.head_time) is not None:
            self.stats.repeated_putdones += 1
            return
        if side == "disk":
            put.disk_time = ev.ts
        else:
            put.head_time = ev.ts
        put.size = f.get("size")
        put.whole = put.whole or ev.whole_seconds
        self._move_to_end(put)
        if ev.tid >= 0:
            thread = (ev.host, ev.pid, ev.tid)
            before = self.done_threads.get(thread)
            if before is not None and before[0] is not put:
                self._changed(before[0])
            self.done_threads[thread] = (put, side)
            put.threads.append(thread)

    def putdone_error(self, ev) -> None:
        put = self.by_pfn.get(ev.fields["pfn"])
        if put is None:
            self.stats.orphan_putdone_errors += 1
        else:
            self._changed(put)
            put.error = True

    def _join(self, ev, side: str, pfn: str) -> OpenPut | None:
        parts = split_pfn(pfn)
        if parts is None:
            self.stats.unusable_lines += 1
            return None
        base, putcount, epoch = parts
        candidates = [p for p in self.by_name.get((ev.fields["server"], base), ())
                      if pfn.startswith(p.fs + "/") and 0 <= epoch - p.sel_sec <= EPOCH_SLACK_S
                      and ev.ts - p.put_time <= self.timeout_ms]
        if not candidates:
            item = [ev, side, True]
            self.waiting.setdefault((ev.fields["server"], base), []).append(item)
            self.waiting_order.append(((ev.fields["server"], base), item))
            return None
        if len(candidates) == 1:
            put = candidates[0]
            self.offset[(put.head, put.pid)] = putcount - put.count
        else:
            named = [p for p in candidates
                     if (p.head, p.pid) in self.offset and p.count + self.offset[(p.head, p.pid)] == putcount]
            if len(named) == 1:
                put = named[0]
                self.stats.putcount_joins += 1
            else:
                self.stats.ambiguous_putdones += 1
                put = candidates[0]
        _discard(self.by_name, (put.server, base), put)
        self._index_changed(self.changed_by_name, (put.server, base))
        self._changed(put)
        put.pfn = pfn
        self.by_pfn[pfn] = put
        return put

    # -- time ---------------------------------------------------------------------------
    # -- changes, for a checkpoint ------------------------------------------------------
    def track_changes(self) -> None:
        """From now on changes() names what changed (the first time: all that is open)."""
        self.changed = dict.fromkeys(self.open, True)
        self.changed_unselected = set(self.unselected)
        self.changed_by_name = set(self.by_name)

    def changes(self) -> dict:
        """What changed since the last call, as state() lists it: puts [seq, row or None
        (gone), their items in the indices by seq, moved] (the moved ones in activity
        order), the index keys changed [*key, seqs or None]; then tracking starts again."""
        puts = []
        for seq, moved in self.changed.items():
            put = self.open.get(seq)
            puts.append([seq, None, None, False] if put is None
                        else [seq, self._row(put), self._items(put), moved])
        out = {
            "puts": puts,
            "unselected": [[*k, _seqs(self.unselected.get(k))] for k in self.changed_unselected],
            "by_name": [[*k, _seqs(self.by_name.get(k))] for k in self.changed_by_name],
        }
        self.changed, self.changed_unselected, self.changed_by_name = {}, set(), set()
        return out

    def rest(self) -> dict:
        """The counts, offsets, waiting putdones and heads: bounded by processes, hosts and
        the allowance, not by traffic."""
        return {
            "seq": self.seq,
            "selected_count": [[*k, n] for k, n in self.selected_count.items()],
            "offset": [[*k, n] for k, n in self.offset.items()],
            "waiting": [[*key, list(item[0]), item[1]] for key, item in self.waiting_order if item[2]],
            "heads": sorted(self.heads),
        }

    @staticmethod
    def _row(put: OpenPut) -> list:
        return [getattr(put, name) if name != "threads" else [list(t) for t in put.threads]
                for name in PUT_STATE]

    def _items(self, put: OpenPut) -> dict:
        """The put's items in the indices by seq, as state() lists them."""
        items = {"deadlines": [[put.deadline, put.seq]]}
        if put.settled:
            items["settling"] = [[at, put.seq] for at in sorted(put.settled)]
        if put.thread is not None and self.put_threads.get(put.thread) is put:
            items["put_threads"] = [[*put.thread, put.seq]]
        done = [[*t, put.seq, self.done_threads[t][1]] for t in dict.fromkeys(put.threads)
                if self.done_threads.get(t, (None,))[0] is put]
        if done:
            items["done_threads"] = done
        return items

    def _changed(self, put: OpenPut) -> None:
        if self.changed is not None:
            self.changed.setdefault(put.seq, False)

    def _move_to_end(self, put: OpenPut) -> None:
        self.open.move_to_end(put.seq)
        if self.changed is not None:
            self.changed.pop(put.seq, None)
            self.changed[put.seq] = True

    def _index_changed(self, keys: set, key: tuple) -> None:
        if self.changed is not None:
            keys.add(key)

    def _put_thread(self, thread: tuple, put: OpenPut) -> None:
        """`thread`'s dome_put call is `put`'s (a put it named before changes too)."""
        before = self.put_threads.get(thread)
        if before is not None and before is not put:
            self._changed(before)
        self.put_threads[thread] = put
        put.thread = thread

    def expire(self, clocks: dict, allowance_ms: int, out: list) -> None:
        """Puts whose disk putdone call returned, once their head's watermark is past that
        line; then puts whose head's watermark is past put_time + timeout: nothing can
        join them now. A putdone waiting for its put is an orphan once the heads' latest
        watermark is past it."""
        if self.waiting_order:
            heads = [clocks[h] for h in self.heads] or list(clocks.values())
            now = max(heads) - allowance_ms
            while self.waiting_order:
                key, item = self.waiting_order[0]
                if item[2] and item[0].ts >= now:
                    break
                self.waiting_order.popleft()
                if item[2]:
                    self._orphan(key, item)
        while self.settling:
            returned, seq = self.settling[0]
            put = self.open.get(seq)
            if put is not None and clocks[put.head] - allowance_ms <= returned:
                break
            heapq.heappop(self.settling)
            if put is not None:
                self._end_joined(put, LINE, out)
        while self.deadlines:
            deadline, seq = self.deadlines[0]
            put = self.open.get(seq)
            if put is None:
                heapq.heappop(self.deadlines)
                continue
            if clocks[put.head] - allowance_ms <= deadline:
                return
            heapq.heappop(self.deadlines)
            self.stats.expired_puts += 1
            self._end_unfinished(put, TIMEOUT, out)

    def finish(self, clocks: dict, out: list) -> None:
        """The end of input: a putdone still waiting is an orphan; a put whose timeout has
        passed by its head's last line timed out."""
        for key, item in self.waiting_order:
            if item[2]:
                self._orphan(key, item)
        self.waiting_order.clear()
        for deadline, seq in sorted(self.deadlines):
            put = self.open.get(seq)
            if put is not None:
                self._end_unfinished(put, TIMEOUT if deadline <= clocks[put.head] else INPUT_END, out)
        self.deadlines.clear()
        self.settling.clear()

    def state(self) -> dict:
        """The open puts and every index over them (puts by seq), as plain lists."""
        return {
            "open": [[getattr(p, name) for name in PUT_STATE] for p in self.open.values()],
            "deadlines": sorted(d for d in self.deadlines if d[1] in self.open),
            "settling": sorted(d for d in self.settling if d[1] in self.open),
            "put_threads": [[*t, p.seq] for t, p in self.put_threads.items() if not p.done],
            "done_threads": [[*t, p.seq, side] for t, (p, side) in self.done_threads.items() if not p.done],
            "unselected": [[*k, [p.seq for p in ps]] for k, ps in self.unselected.items()],
            "by_name": [[*k, [p.seq for p in ps]] for k, ps in self.by_name.items()],
            **self.rest(),
        }

    def load_state(self, state: dict, event_type) -> None:
        self.seq = state["seq"]
        self.open = OrderedDict()
        for values in state["open"]:
            put = OpenPut.__new__(OpenPut)
            for name, value in zip(PUT_STATE, values):
                setattr(put, name, value)
            put.threads = [tuple(t) for t in put.threads]
            put.done = False
            put.deadline, put.settled, put.thread = None, [], None
            self.open[put.seq] = put
        self.deadlines = [tuple(d) for d in state["deadlines"]]
        self.settling = [tuple(d) for d in state["settling"]]
        for deadline, s in self.deadlines:
            if s in self.open:
                self.open[s].deadline = deadline
        for returned, s in self.settling:
            if s in self.open:
                self.open[s].settled.append(returned)
        seq = self.open.__getitem__
        self.put_threads = {(h, pid, tid): seq(s) for h, pid, tid, s in state["put_threads"]}
        for thread, put in self.put_threads.items():
            put.thread = thread
        self.done_threads = {(h, pid, tid): (seq(s), side) for h, pid, tid, s, side in state["done_threads"]}
        self.unselected = {(h, pid, lfn): [seq(s) for s in ss] for h, pid, lfn, ss in state["unselected"]}
        self.by_name = {(server, base): [seq(s) for s in ss] for server, base, ss in state["by_name"]}
        self.by_pfn = {p.pfn: p for p in self.open.values() if p.pfn is not None}
        self.selected_count = {(h, pid): n for h, pid, n in state["selected_count"]}
        self.offset = {(h, pid): n for h, pid, n in state["offset"]}
        self.waiting, self.waiting_order = {}, deque()
        for server, base, fields, side in state["waiting"]:
            key, item = (server, base), [event_type(*fields), side, True]
            self.waiting.setdefault(key, []).append(item)
            self.waiting_order.append((key, item))
        self.heads = set(state["heads"])

    def _orphan(self, key, item) -> None:
        item[2] = False
        _discard(self.waiting, key, item)
        self.stats.orphan_putdones += 1

    # -- records -----------------------------------------------------------------------
    def _new(self, ev, lfn: str, out: list) -> OpenPut:
        if len(self.open) >= self.max_open:
            self.stats.put_evictions += 1
            self._end_unfinished(next(iter(self.open.values())), EVICTED, out)
        self.seq += 1
        put = OpenPut(self.seq, ev, lfn)
        self.open[put.seq] = put
        self._move_to_end(put)
        put.deadline = put.put_time + self.timeout_ms
        heapq.heappush(self.deadlines, (put.deadline, put.seq))
        return put

    def _touch(self, put: OpenPut, ev) -> None:
        put.latest = max(put.latest, ev.ts)
        put.whole = put.whole or ev.whole_seconds
        self._move_to_end(put)

    def _end_unfinished(self, put: OpenPut, reason: str, out: list) -> None:
        if put.disk_time is not None or put.head_time is not None:
            self._end_joined(put, LINE, out)
        else:
            self._emit(put, INCOMPLETE, reason, put.latest, out)

    def _end_joined(self, put: OpenPut, reason: str, out: list) -> None:
        codes = [c for c in (put.head_code, put.disk_code) if c is not None]
        failed = put.error or any(c != 200 for c in codes)
        ended = put.head_time if put.head_time is not None else put.disk_time
        self._emit(put, FAILED if failed else SUCCESS, reason, ended, out)

    def _emit(self, put: OpenPut, status: str, reason: str, ended: int, out: list) -> None:
        put.done = True
        del self.open[put.seq]
        self._changed(put)
        if put.pfn is not None:
            self.by_pfn.pop(put.pfn, None)
        elif put.sel_sec is not None:
            _discard(self.by_name, (put.server, basename(put.lfn)), put)
            self._index_changed(self.changed_by_name, (put.server, basename(put.lfn)))
        else:
            _discard(self.unselected, (put.head, put.pid, put.lfn), put)
            self._index_changed(self.changed_unselected, (put.head, put.pid, put.lfn))
        for thread in put.threads:
            done = self.done_threads.pop(thread, None)
            if done is not None and done[0] is not put:
                self._changed(done[0])
        if status == INCOMPLETE or put.pfn is None:
            pfn_cols = {"pfn": None, "size": None, "putdone_code": None}
        else:
            codes = [c for c in (put.head_code, put.disk_code) if c is not None]
            pfn_cols = {"pfn": put.pfn, "size": put.size, "putdone_code": codes[0] if codes else None}
        joined = put.pfn is not None
        self.stats.puts += 1
        if joined and (put.disk_time is not None or put.head_time is not None):
            self.stats.puts_joined += 1
        out.append({
            "kind": "dome_put", "head": put.head, "lfn": put.lfn, "put_time": put.put_time,
            "put_code": put.put_code, "server": put.server, "fs": put.fs, **pfn_cols,
            "putdone_disk_time": put.disk_time if joined else None,
            "putdone_head_time": put.head_time if joined else None,
            "put_to_putdone": max(0, ended - put.put_time) if joined else None,
            "status": status, "end_reason": reason, "ended": ended, "whole_seconds": int(put.whole),
        })
