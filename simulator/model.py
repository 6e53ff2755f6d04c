"""The shared objects of the model: a request as the DPM database holds it, and a client
connection carrying one call."""

from __future__ import annotations

from dpmstream.simulator.identities import Client

# Request states, as `request status DPM_<STATE>` prints them.
QUEUED, ACTIVE, SUCCESS, FAILED, ABORTED = "QUEUED", "ACTIVE", "SUCCESS", "FAILED", "ABORTED"

# Calls that are not steps of a request.
PLAIN_OPS = ("ping", "getpools")


class Request:
    __slots__ = ("token", "op", "client", "paths", "surls", "guids", "state", "seq",
                 "truth", "write_key")

    def __init__(self, token: str, op: str, client: Client, paths: list[str],
                 surls: list[str], guids: list[str]):
        self.token, self.op, self.client = token, op, client
        self.paths, self.surls, self.guids = paths, surls, guids
        self.state = None      # None until queued (a sync get goes straight to SUCCESS)
        self.seq = 0           # submission order, for requeueing after a restart
        self.truth = None      # its RequestTruth
        self.write_key = 0     # keeps this request's lines in order in the log (LogWriter)

    @property
    def nfiles(self) -> int:
        return len(self.surls)


class Conn:
    """One connection to the DPM: a call of `kind` by a client stream."""

    __slots__ = ("stream", "kind", "req", "accepted", "attempt")

    def __init__(self, stream, kind: str, req: Request | None = None, attempt: int = 1):
        self.stream, self.kind, self.req, self.attempt = stream, kind, req, attempt
        self.accepted = None   # printed instant of its accept line, when one was logged
