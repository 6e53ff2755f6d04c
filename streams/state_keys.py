"""Pipeline state as flat string keys: how both the Kafka worker's changelog and the
state file of `dpmstream run --state` store it, one entry per key.

    flat = encode(pipeline.take_changes())   # {key: JSON-safe value, or None for a key gone}
    pipeline.restore(decode(store))          # store: the latest value of every key

Keys: "t|host|daemon|pid|tid" a thread, "r|host|token" a request, "f|N" a group of ended
requests' keys, "s|name" a source, "m" the processes and host clocks, "l" what name-server
linking holds, "d|KEY" an entry of the DOME reassembler (KEY as parsers/dome_state.py
names it: a call, a put, an index list, or "x" the rest). Keys split from the right, so
a host name with a "|" still decodes. The store's own keys (the Kafka worker's offsets,
say) sit beside these and are the caller's to take out before decode().
"""

from __future__ import annotations

from typing import Iterable, Mapping

from dpmstream.parsers.lazylog import get_logger
from dpmstream.parsers.pipeline import StateChanges
from dpmstream.parsers.reassembly import RequestKey, ThreadKey

log = get_logger(__name__)  # lazylog: logging imported for a message written

THREAD, REQUEST, FINISHED, SOURCE, DOME = "t|", "r|", "f|", "s|", "d|"
CLOCK, LINKER = "m", "l"


def encode(changes: StateChanges) -> dict[str, object]:
    """{key: JSON-safe value, or None for a key whose entry is gone}."""
    flat: dict[str, object] = {}
    for (host, daemon, pid, tid), state in changes.threads.items():
        flat[f"{THREAD}{host}|{daemon}|{pid}|{tid}"] = state
    for (host, token), state in changes.requests.items():
        flat[f"{REQUEST}{host}|{token}"] = state
    for group, keys in changes.finished.items():
        flat[f"{FINISHED}{group}"] = None if keys is None else [list(k) for k in keys]
    for name, state in changes.sources.items():
        flat[f"{SOURCE}{name}"] = state
    if changes.clock is not None:
        flat[CLOCK] = changes.clock
    if changes.linker is not None:
        flat[LINKER] = changes.linker or None  # nothing held: no entry
    for key, value in changes.dome.items():
        flat[f"{DOME}{key}"] = value
    return flat


def decode(entries: Mapping[str, object] | Iterable[tuple[str, object]]) -> StateChanges:
    """The whole state from the latest value of every pipeline key (entries of None,
    i.e. deleted, are skipped). A key of no known kind is logged and skipped."""
    items = entries.items() if isinstance(entries, Mapping) else entries
    state = StateChanges()
    for key, value in items:
        if value is None:
            continue
        kind, _, rest = key.partition("|")
        try:
            if kind == "t":
                host, daemon, pid, tid = rest.rsplit("|", 3)
                state.threads[ThreadKey(host, daemon, int(pid), int(tid))] = value
            elif kind == "r":
                host, token = rest.rsplit("|", 1)
                state.requests[RequestKey(host, token)] = value
            elif kind == "f":
                state.finished[int(rest)] = [RequestKey(*k) for k in value]
            elif kind == "s":
                state.sources[rest] = value
            elif kind == "d":
                state.dome[rest] = value
            elif key == CLOCK:
                state.clock = value
            elif key == LINKER:
                state.linker = value
            else:
                log.warning("state entry %r is of no known kind: skipped", key)
        except (ValueError, TypeError) as exc:
            log.warning("state entry %r is damaged (%s): skipped", key, exc)
    return state

