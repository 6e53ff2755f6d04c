"""Which directories cost the name server most: per directory, from name-server call
records (they carry their `path`) and the request records (their proc time).

Per directory: name-server calls and their summed time, creats with p50/p95 duration,
the share of all proc time spent in linked calls on that directory, and the peak number
of creats running at once (a create holds its parent directory's lock: many at once
means they queue). Directory names are data here, never metric labels: the top N go to
`directories.csv` (replay: DirectoryStats(csv_path=)) or a JSON file (run: DirectoriesFile).
Both are record sinks (fan_out.py).
"""

from __future__ import annotations

import csv
import json
import os
from array import array

from dpmstream.parsers.linking import NS_DAEMON, directory_of
from dpmstream.parsers.records import ms_to_text
from dpmstream.streams.sinks.summary import Series, drained, int64_array

# A replay folds a directory's creat intervals that ended (and started) more than this
# before its latest end into the peak seen so far (docs/sizing.md): a creat record is
# emitted at its `returns`, in event time within seconds of its neighbours, so none comes
# an hour behind them; one that did would count in the peak from the fold on only.
FOLD_MS = 3_600_000
# Intervals a directory keeps before its first fold (then twice what the last one kept).
FOLD_AT = 4096

COLUMNS = ("directory", "ns_calls", "ns_s", "creats", "creat_p50_s", "creat_p95_s",
           "proc_share", "peak_creats")


class Directory:
    __slots__ = ("calls", "ms", "linked_ms", "creats", "starts", "ends", "folded_peak",
                 "cutoff", "fold_at")

    def __init__(self):
        self.calls = 0
        self.ms = 0
        self.linked_ms = 0          # time of calls linked to a request (part of its proc)
        self.creats = Series()
        self.starts = array("q")    # creat intervals, for the peak concurrency
        self.ends = array("q")
        self.folded_peak = 0        # the peak before `cutoff`, of the intervals folded
        self.cutoff = None          # None: nothing folded
        self.fold_at = FOLD_AT

    def peak(self) -> int:
        """Most creats open at one instant (one ending as another starts: not both)."""
        return max(self.folded_peak, self._sweep(self.cutoff, None))

    def _sweep(self, since: int | None, before: int | None) -> int:
        """The most creats open at an instant in [since, before) (None: unbounded). The
        intervals folded away lie wholly before `since`: they add nothing from it on.
        The starts and the ends each sorted into an array('q') and walked together: one
        list of (time, step) tuples took about 200 bytes a creat."""
        starts, ends = array("q", sorted(self.starts)), array("q", sorted(self.ends))
        peak = now = closed = 0
        for start in starts:
            if before is not None and start >= before:
                break
            while closed < len(ends) and ends[closed] <= start:  # ends first at a tie
                closed += 1
                now -= 1
            now += 1
            if since is None or start >= since:
                peak = max(peak, now)
        return peak

    def fold(self, cutoff: int) -> None:
        """Fold the intervals lying wholly before `cutoff` into the peak (a replay's bound
        on memory, docs/sizing.md): the peak is the same as long as no interval is added
        later that starts before it."""
        self.folded_peak = max(self.folded_peak, self._sweep(self.cutoff, cutoff))
        kept = [(s, e) for s, e in zip(self.starts, self.ends) if max(s, e) >= cutoff]
        self.starts = array("q", (s for s, _ in kept))
        self.ends = array("q", (e for _, e in kept))
        self.cutoff = cutoff
        self.fold_at = max(FOLD_AT, 2 * len(kept))


class DirectoryStats:
    def __init__(self, max_dirs: int = 100_000, keep_ms: int | None = None,
                 csv_path: str | os.PathLike | None = None):
        """csv_path: where close() writes the top directories (None: nowhere)."""
        self.csv_path = csv_path
        self.dirs: dict[str, Directory] = {}
        self.proc_ms = 0            # proc time of every request record
        self.max_dirs = max_dirs    # memory bound: past it the least costly go (counted)
        self.keep_ms = keep_ms      # live: creat intervals older than this are dropped
        self.dropped_dirs = 0

    def write(self, record: dict) -> None:
        if record["kind"] == "request":
            self.proc_ms += record.get("proc_ms") or 0
            return
        path = record.get("path")
        if record["daemon"] != NS_DAEMON or not path or record["ended"] is None:
            return
        name = directory_of(path)
        d = self.dirs.get(name)
        if d is None:
            if len(self.dirs) >= self.max_dirs + self.max_dirs // 10:
                self._shrink()
            d = self.dirs[name] = Directory()
        ms = max(record["ended"] - record["started"], 0)
        d.calls += 1
        d.ms += ms
        if record.get("token"):
            d.linked_ms += ms
        if record["op"] == "creat":
            d.creats.add(ms)
            d.starts.append(record["started"])
            d.ends.append(record["ended"])
            if self.keep_ms is not None and d.ends[0] < record["ended"] - 2 * self.keep_ms:
                self._forget_old(d, record["ended"] - self.keep_ms)
            elif self.keep_ms is None and len(d.starts) >= d.fold_at:
                d.fold(max(d.ends) - FOLD_MS)

    def close(self) -> None:
        if self.csv_path is not None:
            self.write_csv(self.csv_path)

    def load(self, state: dict) -> None:
        """Take the figures a Tally gathered from a run's records
        (Tally.take_directories_state()): the same as write() given each of those records.
        The state's list of directories is consumed, as Summary.load's are."""
        self.proc_ms, self.dropped_dirs = state["proc_ms"], state["dropped_dirs"]
        self.dirs = {}
        for row in drained(state["dirs"]):
            name, calls, ms, linked_ms, creats, starts, ends, folded_peak, cutoff, fold_at = row
            d = self.dirs[name] = Directory()
            d.calls, d.ms, d.linked_ms = calls, ms, linked_ms
            d.creats = Series.restored(*creats)
            d.starts, d.ends = int64_array(starts), int64_array(ends)
            d.folded_peak, d.cutoff, d.fold_at = folded_peak, cutoff, fold_at

    def _forget_old(self, d: Directory, before: int) -> None:
        kept = [(s, e) for s, e in zip(d.starts, d.ends) if e >= before]
        d.starts = array("q", (s for s, _ in kept))
        d.ends = array("q", (e for _, e in kept))

    def _shrink(self) -> None:
        keep = sorted(self.dirs.items(), key=lambda kv: -kv[1].ms)[:self.max_dirs]
        self.dropped_dirs += len(self.dirs) - len(keep)
        self.dirs = dict(keep)

    def top(self, n: int = 20) -> list[dict]:
        """The n directories with the most name-server time, as rows of COLUMNS."""
        rows = []
        for name, d in sorted(self.dirs.items(), key=lambda kv: (-kv[1].ms, kv[0]))[:n]:
            creats = d.creats.count
            p50, p95 = d.creats.quantiles((0.5, 0.95))
            rows.append({
                "directory": name, "ns_calls": d.calls, "ns_s": ms_to_text(d.ms),
                "creats": creats,
                "creat_p50_s": ms_to_text(p50) if creats else "",
                "creat_p95_s": ms_to_text(p95) if creats else "",
                "proc_share": f"{d.linked_ms / self.proc_ms:.3f}" if self.proc_ms else "",
                "peak_creats": d.peak() if creats else 0,
            })
        return rows

    def write_csv(self, path, n: int = 20) -> None:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(self.top(n))

    def write_json(self, path, n: int = 20) -> None:
        """Atomically (a reader never sees half a file)."""
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"directories": self.top(n), "dropped_directories": self.dropped_dirs}, fh,
                      indent=1)
        os.replace(tmp, path)

    def render(self, n: int = 10) -> str:
        rows = self.top(n)
        if not rows:
            return ""
        out = ["Directories by name-server time (top %d)" % len(rows),
               f"  {'ns_s':>9} {'calls':>7} {'creats':>7} {'p50':>8} {'p95':>8} {'proc%':>6}"
               f" {'peak':>5}  directory"]
        for r in rows:
            share = f"{float(r['proc_share']) * 100:.1f}" if r["proc_share"] else ""
            out.append(f"  {r['ns_s']:>9} {r['ns_calls']:>7} {r['creats']:>7}"
                       f" {r['creat_p50_s']:>8} {r['creat_p95_s']:>8} {share:>6}"
                       f" {r['peak_creats']:>5}  {r['directory']}")
        return "\n".join(out) + "\n"


class DirectoriesFile:
    """A records sink for `run`: keeps a JSON file of the top directories up to date,
    rewritten on flush() at most every `every_s` of wall time (output pacing, not event
    time), and at close()."""

    def __init__(self, path, every_s: float = 10.0, n: int = 20,
                 max_dirs: int = 10_000, keep_ms: int = 3_600_000):
        import time
        self._clock = time.monotonic
        self.path, self.every_s, self.n = path, every_s, n
        self.stats = DirectoryStats(max_dirs=max_dirs, keep_ms=keep_ms)
        self._next = 0.0

    def write(self, record: dict) -> None:
        self.stats.write(record)

    def flush(self) -> None:
        if self._clock() >= self._next:
            self._next = self._clock() + self.every_s
            self.stats.write_json(self.path, self.n)

    def close(self) -> None:
        self.stats.write_json(self.path, self.n)
