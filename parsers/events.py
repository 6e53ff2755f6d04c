"""The event: one recognised log line, with its event time and role-specific fields."""

from __future__ import annotations

from typing import NamedTuple


class Event(NamedTuple):
    ts: int          # event time, ms since the epoch (UTC)
    host: str
    daemon: str      # dpm, dpns, srmv2.2 (from the profile)
    pid: int
    tid: int         # -1 for the main thread (no ",T")
    func: str        # FUNC of the envelope, e.g. dpm_srv_put
    role: str        # accept, call, token, file, detail, slow_start, status, returns, ...
    op: str | None = None
    client: str | None = None
    token: str | None = None
    nfiles: int | None = None
    state: str | None = None   # status answer: QUEUED, ACTIVE, SUCCESS, FAILED, ...
    rc: int | None = None
    surl: str | None = None    # the file a DPM line names (DP098 `put|get <i> <surl>`)
    path: str | None = None    # the path a name-server line names (NS098 `<op> <path>`)
