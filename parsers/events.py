"""The event: one recognised log line, with its event time and role-specific fields."""

from __future__ import annotations

from collections import namedtuple

# A namedtuple, as typing.NamedTuple would make it, without importing typing (~11 M
# instructions of replay's start-up, issue 30). The fields after `role` default to None.
Event = namedtuple("Event", (
    "ts",         # int; event time, ms since the epoch (UTC)
    "host",       # str
    "daemon",     # str; dpm, dpns, srmv2.2 (from the profile)
    "pid",        # int
    "tid",        # int; -1 for the main thread (no ",T")
    "func",       # str; FUNC of the envelope, e.g. dpm_srv_put
    "role",       # str; accept, call, token, file, detail, slow_start, status, returns, ...
    "op",         # str | None
    "client",     # str | None
    "token",      # str | None
    "nfiles",     # int | None
    "state",      # str | None; status answer: QUEUED, ACTIVE, SUCCESS, FAILED, ...
    "rc",         # int | None
    "surl",       # str | None; the file a DPM line names (DP098 `put|get <i> <surl>`)
    "path",       # str | None; the path a name-server line names (NS098 `<op> <path>`)
), defaults=(None,) * 8)
