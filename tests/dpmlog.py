"""Builds DPM daemon lines in the reference wording, for hand-written test scenarios."""

from __future__ import annotations

DN = "/DC=ch/DC=cern/OU=Users/CN=Some One (12345)"
T1 = "6d4c2a8e-3f5b-4e0c-9a71-2b8f0c1d9e47"
T2 = "0b9f0f2e-1111-4c2d-8e3f-aaaaaaaaaaaa"
T3 = "0b9f0f2e-2222-4c2d-8e3f-bbbbbbbbbbbb"


def line(stamp: str, tid, func: str, msg: str, pid: int = 12345) -> str:
    thread = f"{pid:5d}" if tid is None else f"{pid:5d},{tid}"
    return f"{stamp} {thread} {func}: {msg}"


def accept(stamp, tid, client="lxfsra01.cern.ch", pid=12345):
    return [line(stamp, tid, "dpm_serv", f"[137.138.40.11] ({client}): request accepted", pid)]


def call(stamp, tid, op, details=(), end=None, rc=0, status=None, client="lxfsra01.cern.ch", pid=12345):
    """A whole synchronous call: DP092, DP098 lines, optional status answer, returns."""
    func = f"dpm_srv_{op}"
    out = [line(stamp, tid, func, f"DP092 - {op} request by {DN} (1001,1001) from {client}", pid)]
    out += [line(stamp, tid, func, f"DP098 - {op} {d}", pid) for d in details]
    if status:
        out.append(line(end or stamp, tid, func, f"request status DPM_{status}", pid))
    if rc is not None:
        out.append(line(end or stamp, tid, func, f"returns {rc}", pid))
    return out


def put(stamp, tid, token, surls=("srm://head/dpm/x/f1",), end=None, rc=0, **kw):
    details = [f"{len(surls)} {token}"] + [f"{i} {s}" for i, s in enumerate(surls)]
    return call(stamp, tid, "put", details, end, rc, **kw)


def get(stamp, tid, token, surls=("srm://head/dpm/x/f1",), end=None, rc=0, **kw):
    details = [f"{len(surls)} {token}"] + [f"{i} {s}" for i, s in enumerate(surls)]
    return call(stamp, tid, "get", details, end, rc, **kw)


def proc(start, end, tid, token, op="put", rc=0, pid=12345):
    out = [line(start, tid, f"dpm_srv_proc_{op}", f"processing {op} request {token}", pid)]
    if end is not None:
        out.append(line(end, tid, f"dpm_srv_proc_{op}", "selected disk01:/srv/dpm/01 for srm://x", pid))
        out.append(line(end, tid, f"dpm_srv_proc_{op}", f"returns {rc}", pid))
    return out


def status(stamp, end, tid, token, answer, op="put", pid=12345):
    return call(stamp, tid, f"getstatus_{op}req", [f"{token} 1"], end, 0, status=answer, pid=pid)


def closing(stamp, end, tid, op, token, pid=12345, rc=0):
    return call(stamp, tid, op, [f"{token} 1"], end, rc, pid=pid)
