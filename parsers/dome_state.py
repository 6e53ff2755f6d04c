"""The DOME reassembler's state as keyed entries, taken as net changes: what a store that
writes one record per key (the Kafka worker's compacted state topic) keeps of it.

    tracker = DomeStateTracker()
    reassembler.track_changes()
    changes = tracker.take(reassembler.take_changes())  # {key: JSON-safe value, or None: gone}
    ...                                                  # the store keeps the latest per key
    reassembler = DomeReassembler.from_snapshot(snapshot_of(entries), **settings)
    reassembler.track_changes(); reassembler.take_changes()   # what is stored now ...
    tracker.restored(entries)                            # ... later changes are taken against

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
entries sorted by them are the table in its order. An entry changed in place (a put's
codes, its error, its threads) keeps its number: nothing moved it past another.

Cost: proportional to what changed. The reassembler (either engine) notes the calls,
puts and index keys it changes (take_changes(): those, the moved ones in the table's
order, and the bounded rest whole); the tracker keeps only the order numbers and the
rest, and walks none of the open state. The keys are built from JSON lists, so no host,
LFN or server name can make two keys one.
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
    time), from what the reassembler says changed (its take_changes(), once it tracks
    them: track_changes()). An entry gone is None, and only if an earlier take reported
    it. Holds the order numbers of the entries stored and the bounded rest, no copy of
    the tables."""

    def __init__(self) -> None:
        self._orders: dict[str, int] = {}    # CALL and PUT keys stored -> their order number
        self._indexed: set[str] = set()      # UNSELECTED and BY_NAME keys stored
        self._rest: object = None
        self._checksums: object = None
        self._next_order = 0

    def take(self, changes: dict, checksums: dict | None = None) -> dict[str, object]:
        """The entries of the reassembler's `changes` (take_changes(): the calls and puts
        changed, the index keys changed, the rest) and, when given, of the checksum
        stage's snapshot (one entry)."""
        out: dict[str, object] = {}
        for host, pid, tid, row in changes["calls"]:
            key = _key(CALL, host, pid, tid)
            if row is None:
                self._gone(key, out)
            else:   # every change of a call moved it to the end of its host's order
                out[key] = [host, self._new_order(key), row]
        for seq, row, items, moved in changes["puts"]:
            key = _key(PUT, seq)
            if row is None:
                self._gone(key, out)
            else:   # a put changed in place keeps its number: it did not move
                order = None if moved else self._orders.get(key)
                out[key] = [items, self._new_order(key) if order is None else order, row]
        for prefix, name in ((UNSELECTED, "unselected"), (BY_NAME, "by_name")):
            for *index_key, seqs in changes[name]:
                key = _key(prefix, *index_key)
                if seqs is None:
                    self._gone(key, out)
                else:
                    self._indexed.add(key)
                    out[key] = [*index_key, seqs]
        rest = _as_json(changes["rest"])
        if rest != self._rest:
            self._rest = out[REST] = rest
        if checksums is not None:
            value = _as_json(checksums)
            if value != self._checksums:
                self._checksums = out[CHECKSUMS] = value
        return out

    def restored(self, entries: dict[str, object]) -> None:
        """The store's entries a reassembler was just rebuilt from: what is stored now."""
        live = {key: value for key, value in entries.items() if value is not None}
        self._orders = {key: value[1] for key, value in live.items() if key.startswith((CALL, PUT))}
        self._indexed = {key for key in live if key.startswith((UNSELECTED, BY_NAME))}
        self._rest = live.get(REST)
        self._checksums = live.get(CHECKSUMS)
        self._next_order = max(self._orders.values(), default=-1) + 1

    def _new_order(self, key: str) -> int:
        order = self._orders[key] = self._next_order
        self._next_order += 1
        return order

    def _gone(self, key: str, out: dict) -> None:
        if self._orders.pop(key, None) is not None or key in self._indexed:
            self._indexed.discard(key)
            out[key] = None


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


def _as_json(value):
    """`value` as JSON gives it back (tuples as lists), so that it compares equal to the
    same value restored from a store."""
    return json.loads(json.dumps(value))


def _live(entries: dict, prefix: str):
    return [(key, value) for key, value in entries.items()
            if value is not None and key.startswith(prefix)]
