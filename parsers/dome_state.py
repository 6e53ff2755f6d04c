"""The DOME reassembler's state as keyed entries, taken as net changes: what a store that
writes one record per key (the Kafka worker's compacted state topic) keeps of it.

    tracker = DomeStateTracker()
    changes = tracker.take(reassembler.snapshot())   # {key: JSON-safe value, or None: gone}
    ...                                               # the store keeps the latest per key
    reassembler = DomeReassembler.from_snapshot(snapshot_of(entries), **settings)
    tracker.restored(entries)                         # later changes are taken against them

Entries (docs/dome.md, "State"): one per open call ("c|" and its (host, pid, tid)), one per
open put ("p|SEQ": the put with its deadlines and its threads), one per list of the put
indices that keep an order ("u|": puts of a generation without TID waiting for their
`Selected fs` line, "n|": puts a putdone may join, by (server, BASENAME)), and "x" for
the rest, which is bounded by hosts, processes and filesystems, not by traffic (clocks,
roles, pids, filesystem states, counters, PUTCOUNT counts and offsets, putdone lines
waiting for their put, at most the allowance old). So a checkpoint writes the calls and
puts that changed since the last one, not the tables.

Order. Calls of a host, and puts, are kept least recently active first (timeouts and the
caps take the front): each entry carries an order number, and an entry that moved (an
active call goes to the end) takes a new, higher one; the numbers only increase, so the
entries sorted by them are the table in its order.

Cost: take() walks the whole snapshot (O(open calls and puts)) to find what changed. The
keys are built from JSON lists, so no host, LFN or server name can make two keys one.
"""

from __future__ import annotations

import json

CALL, PUT, UNSELECTED, BY_NAME, REST = "c|", "p|", "u|", "n|", "x"
# The checksum stage's whole snapshot (parsers/dome_checksums.py: bounded by its cap on
# open runs), as JSON gives it back, so an unchanged stage compares equal to its stored self.
CHECKSUMS = "k"
_REST_OF_PUTS = ("seq", "selected_count", "offset", "waiting", "heads")


def _key(prefix: str, *parts) -> str:
    return prefix + json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


class DomeStateTracker:
    """Net changes of a DOME reassembler's state between two takes (everything, the first
    time). An entry gone is None, and only if an earlier take reported it."""

    def __init__(self) -> None:
        self._last: dict[str, object] = {}
        self._next_order = 0

    def take(self, snapshot: dict, checksums: dict | None = None) -> dict[str, object]:
        """The changes since the last take of the reassembler's `snapshot` and, when
        given, the checksum stage's (one entry)."""
        entries = self.entries(snapshot)
        if checksums is not None:
            entries[CHECKSUMS] = json.loads(json.dumps(checksums))
        last = self._last
        changes = {key: value for key, value in entries.items() if last.get(key) != value}
        for key in last:
            if key not in entries:
                changes[key] = None
        self._last = entries
        return changes

    def restored(self, entries: dict[str, object]) -> None:
        """The store's entries a reassembler was just rebuilt from: what is stored now."""
        self._last = {key: value for key, value in entries.items() if value is not None}
        orders = [value[1] for key, value in self._last.items() if key.startswith((CALL, PUT))]
        self._next_order = max(orders, default=-1) + 1

    def entries(self, snapshot: dict) -> dict[str, object]:
        """The snapshot as entries, order numbers kept where the order held."""
        puts = snapshot["puts"]
        out: dict[str, object] = {REST: {
            "clocks": snapshot["clocks"], "roles": snapshot["roles"], "pids": snapshot["pids"],
            "fs_enabled": snapshot["fs_enabled"], "stats": snapshot["stats"],
            **{name: puts[name] for name in _REST_OF_PUTS}}}
        for host, rows in snapshot["calls"].items():
            self._in_order(out, ((_key(CALL, host, row[0], row[1]), host, row) for row in rows))
        extras: dict[int, dict] = {}
        for name in ("deadlines", "settling", "put_threads", "done_threads"):
            for item in puts[name]:
                seq = item[1] if name in ("deadlines", "settling") else item[3]
                extras.setdefault(seq, {}).setdefault(name, []).append(list(item))
        self._in_order(out, ((_key(PUT, row[0]), extras.get(row[0], {}), _as_json(row))
                             for row in puts["open"]))
        for *index_key, seqs in puts["unselected"]:
            out[_key(UNSELECTED, *index_key)] = [*index_key, seqs]
        for *index_key, seqs in puts["by_name"]:
            out[_key(BY_NAME, *index_key)] = [*index_key, seqs]
        return out

    def _in_order(self, out: dict, keyed) -> None:
        """Entries [tag, order, row] of one ordered table, in its order: an entry keeps its
        order number while its row is unchanged and it still follows the one before."""
        last, floor = self._last, -1
        for key, tag, row in keyed:
            before = last.get(key)
            if before is not None and before[1] > floor and before[0] == tag and before[2] == row:
                order = before[1]
            else:
                order = self._next_order
                self._next_order += 1
            floor = order
            out[key] = [tag, order, row]


def snapshot_of(entries: dict[str, object]) -> dict:
    """The reassembler's snapshot from the latest value of every entry (None: gone)."""
    rest = entries.get(REST)
    if rest is None:   # nothing stored yet
        rest = {"clocks": {}, "roles": {}, "pids": [], "fs_enabled": [], "stats": {},
                "seq": 0, "selected_count": [], "offset": [], "waiting": [], "heads": []}
    calls: dict[str, list] = {}
    puts = {"open": [], "deadlines": [], "settling": [], "put_threads": [], "done_threads": [],
            "unselected": [], "by_name": []}
    for key, value in sorted(_live(entries, CALL), key=lambda kv: kv[1][1]):
        host, _order, row = value
        calls.setdefault(host, []).append(row)
    for key, value in sorted(_live(entries, PUT), key=lambda kv: kv[1][1]):
        extras, _order, row = value
        puts["open"].append(row)
        for name, items in extras.items():
            puts[name] += items
    puts["deadlines"].sort()
    puts["settling"].sort()
    puts["unselected"] = [value for _key, value in _live(entries, UNSELECTED)]
    puts["by_name"] = [value for _key, value in _live(entries, BY_NAME)]
    puts.update((name, rest[name]) for name in _REST_OF_PUTS)
    return {"clocks": rest["clocks"], "roles": rest["roles"], "pids": rest["pids"],
            "fs_enabled": rest["fs_enabled"], "stats": rest["stats"], "calls": calls, "puts": puts}


def _as_json(row: list) -> list:
    """A put's row with its tuples (its threads) as the lists JSON gives back, so a row
    compares equal to the same row restored."""
    return [[list(t) for t in v] if isinstance(v, list) else v for v in row]


def _live(entries: dict, prefix: str):
    return [(key, value) for key, value in entries.items()
            if value is not None and key.startswith(prefix)]
