"""Per-line cost against the amount of open state (issue 11: bounded and flat).

For N = 1k, 10k, 100k and 1M open threads, open requests and open name-server sessions,
a log first opens N of them, then a steady tail of ordinary calls follows; the figure is
the replay time per line of the tail, with the timeout sweep running as in replay (every
4,096 lines). Flat means the figure does not grow with N. `LC_ALL=C grep -cE` on the
same tail file, timed in the same run, is printed beside each figure.

    .venv/bin/python bench/bench_state.py [--sizes 1000,10000,100000,1000000] [--tail 200000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
import uuid

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings

ENVELOPE_RE = r"^[0-9]{2}/[0-9]{2} [0-9:.]+ +[0-9]+(,[0-9]+)? [^ :]+: "
DN = "/DC=ch/DC=cern/CN=bench (1,1)"


def stamp(ms: int) -> str:
    s, ms = divmod(ms, 1000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"08/12 {10 + h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def opening_lines(kind: str, n: int) -> list[str]:
    """N open things, one line-set each, within the first minutes."""
    out = []
    for i in range(n):
        t = stamp(i * 50_000 // max(n, 1))  # within the grace period: none is retired
        pid, tid = 1000 + i // 1000, i % 1000
        if kind == "threads":
            out.append(f"{t} {pid:5d},{tid} dpm_srv_ping: DP092 - ping request by {DN} from c")
        elif kind == "requests":
            token = uuid.UUID(int=i + 1)
            out += [f"{t}  1000,{i % 50} dpm_srv_put: DP092 - put request by {DN} from c",
                    f"{t}  1000,{i % 50} dpm_srv_put: DP098 - put 1 {token}",
                    f"{t}  1000,{i % 50} dpm_srv_put: returns 0"]
        else:  # sessions
            out += [f"{t} {pid:5d},{tid} Cns_srv_startsess: NS092 - startsess request by {DN} from c",
                    f"{t} {pid:5d},{tid} Cns_srv_startsess: returns 0"]
    return out


def tail_lines(n: int, kind: str) -> list[str]:
    daemon = "Cns_srv_statg" if kind == "sessions" else "dpm_srv_ping"
    word = "NS092 - statg" if kind == "sessions" else "DP092 - ping"
    out = []
    for i in range(n // 2):
        t = stamp(200_000 + i * 2)
        # pid 1000 is the oldest process: the open ones stay open beside it
        out += [f"{t}  1000,{2000 + i % 20} {daemon}: {word} request by {DN} from c",
                f"{t}  1000,{2000 + i % 20} {daemon}: returns 0"]
    return out


def grep_rate(path: str) -> float:
    start = time.perf_counter()
    out = subprocess.run(["grep", "-cE", ENVELOPE_RE, path], capture_output=True, text=True,
                         env={**os.environ, "LC_ALL": "C"})
    elapsed = time.perf_counter() - start
    return int(out.stdout.strip() or 0) / elapsed


def measure(kind: str, n: int, tail_n: int, workdir: str) -> tuple[float, float, int]:
    opening = opening_lines(kind, n)
    tail = tail_lines(tail_n, kind)
    tail_path = os.path.join(workdir, f"tail-{kind}-{n}.log")
    with open(tail_path, "w") as f:
        f.write("\n".join(tail) + "\n")
    pipeline = Pipeline(lambda r: None, ReassemblySettings(max_in_flight=4_000_000, max_threads=4_000_000))
    src = pipeline.source("bench", host="h", tz="UTC", year=2011)
    src.feed_lines(opening)
    start = time.perf_counter()
    src.feed_lines(tail)
    elapsed = time.perf_counter() - start
    r = pipeline.reassembler
    open_now = {"threads": len(r.threads), "requests": len(r.requests),
                "sessions": sum(1 for t in r.threads.values() if t.sess)}[kind]
    return elapsed / len(tail) * 1e6, grep_rate(tail_path), open_now


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--tail", type=int, default=200_000)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'open state':<10} {'N':>9} {'open at tail':>12} {'us/line':>8} {'lines/s':>10} "
          f"{'grep lines/s':>13}")
    with tempfile.TemporaryDirectory() as workdir:
        for kind in ("threads", "requests", "sessions"):
            for n in sizes:
                us, grep, open_now = measure(kind, n, args.tail, workdir)
                print(f"{kind:<10} {n:>9,} {open_now:>12,} {us:>8.2f} {1e6 / us:>10,.0f} "
                      f"{grep:>13,.0f}", flush=True)


if __name__ == "__main__":
    main()
