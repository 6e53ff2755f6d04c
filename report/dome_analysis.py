"""The DOME section's numbers (docs/dome.md, "The records"): from the DOME records of the
report's window, per command the calls and their codes and durations, the puts and their
put-to-putdone times, each filesystem's latest capacity and the head's filesystem
events. Pure: records in, numbers out.

Durations are taken only from records built on sub-second stamps: a record marked
`whole_seconds` has a call duration of 0 or 1 s, which says nothing of a latency of
milliseconds (docs/dome.md, section 3). Those records are counted, and the page says so;
put-to-putdone times (seconds to hours) are kept, good to a second.
"""

from __future__ import annotations

from dpmstream.parsers import dome_records
from dpmstream.parsers.quantiles import nearest_rank

QUANTILES = (0.5, 0.95)
CODE_CLASSES = dome_records.CODE_CLASSES
PUT_STATUSES = ("success", "failed", "incomplete")
MAX_EVENTS = 20  # filesystem transitions listed on the page; the rest are counted
# When each DOME record kind happened: what the report's window keeps it by.
TIME_OF = {"dome_call": "start", "dome_put": "put_time", "dome_checksum": "start",
           "dome_capacity": "time", "dome_fs_event": "time", "dome_journald_gap": "time"}


def is_dome(record: dict) -> bool:
    return record["kind"] in TIME_OF


def time_of(record: dict) -> int | None:
    return record.get(TIME_OF[record["kind"]])


def flag(value) -> bool:
    """A record's 0/1 column, as the engine gives it (int, bool) or a CSV cell (text)."""
    return value not in (None, "", 0, "0", False, "false", "False")


# Durations, CommandRow and DomeNumbers are plain classes, not dataclasses: every report
# imports this module (is_dome, time_of), DOME records or none, and a dataclass compiles
# its generated methods as its module is imported (issue 30).

class Durations:
    """Durations in ms of the records that had them from sub-second stamps, sorted; and
    how many records were built on whole-second stamps (left out of the quantiles)."""

    __slots__ = ("values", "whole_seconds")

    def __init__(self):
        self.values: list = []
        self.whole_seconds = 0

    def quantile(self, q: float):
        return nearest_rank(self.values, q)

    @property
    def max(self):
        return self.values[-1] if self.values else None


class CommandRow:
    """One DOME command's calls: their count by code class and their durations."""

    __slots__ = ("role", "command", "calls", "classes", "durations")

    def __init__(self, role: str, command: str):
        self.role, self.command = role, command
        self.calls = 0
        self.classes = dict.fromkeys(CODE_CLASSES, 0)   # by class
        self.durations = Durations()


class DomeNumbers:
    """The DOME section's numbers over the report's window."""

    __slots__ = ("commands", "calls", "whole_second_calls", "puts_by_status",
                 "put_to_putdone", "whole_second_puts", "capacity", "transitions",
                 "fs_event_lines", "disabled_now")

    def __init__(self):
        self.commands: list = []           # CommandRow, the busiest first
        self.calls = 0
        self.whole_second_calls = 0
        self.puts_by_status = dict.fromkeys(PUT_STATUSES, 0)
        self.put_to_putdone: list = []     # ms, sorted
        self.whole_second_puts = 0
        self.capacity: list = []           # (host, fs, time, phys, free)
        self.transitions: list = []        # (time, server, fs, event)
        self.fs_event_lines = 0            # every fs event line, repeats too
        self.disabled_now: list = []       # (server, fs) disabled at the end

    @property
    def puts(self) -> int:
        return sum(self.puts_by_status.values())

    @property
    def empty(self) -> bool:
        return not (self.calls or self.puts or self.capacity or self.fs_event_lines)


def code_class(record: dict) -> str:
    """The call's code class as the metrics name it (dome_records.code_class): 2xx..5xx,
    or none (a cut call: no Exiting line, so no code); a record from a CSV too."""
    code = record.get("http_code")
    return dome_records.code_class(None if code in (None, "") else int(code))


def dome_numbers(records: list) -> DomeNumbers:
    out = DomeNumbers()
    rows: dict = {}
    latest: dict = {}
    state: dict = {}
    for r in sorted(records, key=lambda r: (time_of(r) is None, time_of(r) or 0)):
        kind = r["kind"]
        if kind == "dome_call":
            out.calls += 1
            row = rows.setdefault((r.get("role") or "?", r.get("command") or "?"),
                                  CommandRow(r.get("role") or "?", r.get("command") or "?"))
            row.calls += 1
            row.classes[code_class(r)] += 1
            if flag(r.get("whole_seconds")):
                row.durations.whole_seconds += 1
                out.whole_second_calls += 1
            elif r.get("duration") is not None:
                row.durations.values.append(r["duration"])
        elif kind == "dome_put":
            status = r.get("status") or "incomplete"
            out.puts_by_status[status] = out.puts_by_status.get(status, 0) + 1
            out.whole_second_puts += flag(r.get("whole_seconds"))
            if r.get("put_to_putdone") is not None:
                out.put_to_putdone.append(r["put_to_putdone"])
        elif kind == "dome_capacity":
            latest[(r.get("host"), r.get("fs"))] = r
        elif kind == "dome_fs_event":
            out.fs_event_lines += 1
            key = (r.get("server"), r.get("fs"))
            if flag(r.get("transition")):
                out.transitions.append((r.get("time"), *key, r.get("event")))
            state[key] = r.get("event")
    for row in rows.values():
        row.durations.values.sort()
    out.commands = sorted(rows.values(), key=lambda c: (-c.calls, c.role, c.command))
    out.put_to_putdone.sort()
    out.capacity = [(h, fs, r.get("time"), _int(r.get("phys")), _int(r.get("free")))
                    for (h, fs), r in sorted(latest.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))]
    out.disabled_now = sorted(k for k, e in state.items() if e == "disabled")
    return out


def _int(value):
    return None if value in (None, "") else int(value)
