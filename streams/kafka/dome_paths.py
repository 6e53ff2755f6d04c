"""Which files on the lines topic hold DOME (dmlite) messages: the worker reads those with
a DOME profile, every other file with the DPM daemons' (docs/kafka-worker.md, "DOME").

A DOME node ships either the file the project's drop-in writes
(rsyslog/dpmstream-dome.conf: /var/log/dmlite/dmlite-rfc3339.log, RFC 3339 stamps with
microseconds) or the packaged snippet's /var/log/dmlite/dmlite.log (traditional stamps:
whole seconds, no year). The choice goes by the file's name, not its directory: a site (or
a test) may keep the copy elsewhere, and no DPM daemon's log has either name.
"""

from __future__ import annotations

DOME_FILE_NAMES = frozenset(("dmlite-rfc3339.log", "dmlite.log"))
# The profile of a DOME file when the worker is given none of the DOME family: the
# generation with a thread id (dmlite 0.8.4 on, every DOME release); `--profile
# dmlite-dome-notid` reads the older one.
DEFAULT_DOME_PROFILE = "dmlite-dome"


def is_dome_path(path: str) -> bool:
    """Whether the envelope's path names a file of dmlite's syslog messages."""
    return path.rsplit("/", 1)[-1] in DOME_FILE_NAMES
