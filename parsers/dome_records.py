"""The DOME record kinds (docs/dome.md, "The records"), their columns and units, declared once.

Kinds: `dome_call` (one HTTP call a DOME worker thread served), `dome_put` (a put across
the head and a disk node), `dome_capacity` (a disk node's `fs: phys: free:` line) and
`dome_fs_event` (the head enabling or disabling a filesystem), `dome_journald_gap` (journald's
notice that its rate limit dropped `lines` of a node's `program` before syslog saw them)
and `dome_checksum` (a
frontend's wait for a checksum, from the call records: parsers/dome_checksums.py). Internally every time and
duration is integer milliseconds since the epoch (UTC); files show seconds with three
decimals, as the DPM records (parsers/records.py). The columns of docs/dome.md come first,
in order; `whole_seconds` (1 when the stamps the record is built on have no fraction of a
second, so its durations are good to a second only) comes after them.
"""

from __future__ import annotations

import csv
import io
import json

from .extension import compiled
from .records import ms_to_text

KINDS = {
    "dome_call": (
        ("host", "pid", "tid", "role", "command", "http_code", "caller", "remote_client",
         "start", "end", "duration", "cut",
         # extra columns
         "whole_seconds"),
        frozenset(("start", "end", "duration")),
    ),
    "dome_put": (
        ("head", "lfn", "put_time", "put_code", "server", "fs", "pfn", "size",
         "putdone_disk_time", "putdone_head_time", "putdone_code", "put_to_putdone",
         "status", "end_reason", "ended",
         # extra columns
         "whole_seconds"),
        frozenset(("put_time", "putdone_disk_time", "putdone_head_time", "put_to_putdone", "ended")),
    ),
    "dome_checksum": (
        ("head", "caller", "remote_client", "start", "end", "wait", "polls", "outcome", "http_code",
         "endings", "overlap",
         # extra columns
         "whole_seconds"),
        frozenset(("start", "end", "wait")),
    ),
    "dome_capacity": (("time", "host", "fs", "phys", "free"), frozenset(("time",))),
    "dome_fs_event": (("time", "host", "server", "fs", "event", "transition"), frozenset(("time",))),
    "dome_journald_gap": (("time", "host", "program", "lines"), frozenset(("time",))),
}
# The instant a record is known at (what an event-time export dates it by): its end, else
# its start (a cut call has no end).
EVENT_TIME = {"dome_call": ("end", "start"), "dome_put": ("ended", "put_time"),
              "dome_checksum": ("end", "start"),
              "dome_capacity": ("time",), "dome_fs_event": ("time",), "dome_journald_gap": ("time",)}
DOME_CALL_COLUMNS = KINDS["dome_call"][0]
DOME_PUT_COLUMNS = KINDS["dome_put"][0]
DOME_CHECKSUM_COLUMNS = KINDS["dome_checksum"][0]
DOME_CAPACITY_COLUMNS = KINDS["dome_capacity"][0]
DOME_FS_EVENT_COLUMNS = KINDS["dome_fs_event"][0]
DOME_JOURNALD_GAP_COLUMNS = KINDS["dome_journald_gap"][0]


def row(record: dict) -> list[str]:
    """The record's cells in its kind's column order: ms as seconds, None empty."""
    cols, ms_fields = KINDS[record["kind"]]
    out = []
    for col in cols:
        value = record.get(col)
        out.append(ms_to_text(value) if col in ms_fields else ("" if value is None else str(value)))
    return out


# The compiled formatting (native/src/dome_csv.rs); python_csv_line is the reference
DomeCsv = compiled("DomeCsv")
_compiled_csv = DomeCsv(KINDS).line if DomeCsv is not None else None


def csv_line(record: dict) -> str:
    """The record's CSV row as Python's csv writer writes it (excel dialect, "\r\n")."""
    if _compiled_csv is not None:
        line = _compiled_csv(record)
        if line is not None:
            return line
    return python_csv_line(record)


def python_csv_line(record: dict) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow(row(record))
    return buf.getvalue()


def to_json_dict(record: dict) -> dict:
    """`kind` first, then the columns; times and durations as float seconds."""
    cols, ms_fields = KINDS[record["kind"]]
    out = {"kind": record["kind"]}
    for col in cols:
        value = record.get(col)
        out[col] = value / 1000.0 if col in ms_fields and value is not None else value
    return out


def json_text(record: dict, *, ensure_ascii: bool = False) -> str:
    return json.dumps(to_json_dict(record), ensure_ascii=ensure_ascii, separators=(",", ":"))


# The commands a DOME server answers (dmlite's DomeCore dispatch of `cmd:`; src/dome):
# the bounded set a metric label or summary row takes; any other command is "other".
KNOWN_COMMANDS = frozenset((
    "dome_access", "dome_accessreplica", "dome_addfstopool", "dome_addpool", "dome_addreplica",
    "dome_chksum", "dome_chksumstatus", "dome_create", "dome_delquotatoken", "dome_delreplica",
    "dome_deletegroup", "dome_deleteuser", "dome_dochksum", "dome_get", "dome_getcomment",
    "dome_getdir", "dome_getdirspaces", "dome_getgroup", "dome_getgroupsvec", "dome_getidmap",
    "dome_getquotatoken", "dome_getreplicainfo", "dome_getreplicavec", "dome_getspaceinfo",
    "dome_getstatinfo", "dome_getuser", "dome_getusersvec", "dome_info", "dome_makedir",
    "dome_makespace", "dome_modifyfs", "dome_modifypool", "dome_modquotatoken", "dome_newgroup",
    "dome_newuser", "dome_pull", "dome_pullstatus", "dome_put", "dome_putdone", "dome_readlink",
    "dome_removedir", "dome_rename", "dome_rmfs", "dome_rmpool", "dome_setacl",
    "dome_setchecksum", "dome_setcomment", "dome_setmode", "dome_setowner", "dome_setquotatoken",
    "dome_setsize", "dome_statpfn", "dome_statpool", "dome_symlink", "dome_unlink",
    "dome_updategroup", "dome_updatereplica", "dome_updateuser", "dome_updatexattr",
))
OTHER_COMMAND = "other"
CODE_CLASSES = ("2xx", "3xx", "4xx", "5xx", "none")


def command_label(command: str | None) -> str:
    """The call's command as a bounded label: a known dome_* command, else "other"."""
    return command if command in KNOWN_COMMANDS else OTHER_COMMAND


def code_class(http_code: int | None) -> str:
    """2xx..5xx, or "none": a cut call (no `Exiting` line) or a code outside 200..599."""
    if http_code is None or not 200 <= http_code <= 599:
        return "none"
    return f"{http_code // 100}xx"


# The node a record belongs to (what the Kafka worker keys it by): a put and a checksum
# wait by their head node, the rest by the node that logged them.
NODE_FIELD = {"dome_call": "host", "dome_put": "head", "dome_checksum": "head",
              "dome_capacity": "host", "dome_fs_event": "host", "dome_journald_gap": "host"}


def node_of(record: dict) -> str | None:
    return record.get(NODE_FIELD[record["kind"]])


def event_ms(record: dict) -> int | None:
    """The record's EVENT_TIME: the first of its fields that is set."""
    for field in EVENT_TIME[record["kind"]]:
        if record.get(field) is not None:
            return record[field]
    return None
