"""The busy intervals of each kind of DPM thread, from the log itself: "slow" (processing
runs), "fast" (every DPM call, status polls included), "ns" (name-server calls). The
reassembler hands each call's span to its `on_span` as it reads the call's returns; set
this as `on_span`, it keeps those of the three kinds, and `windowed` gives them cut to the
report's window, and `fast_thread_ids` the threads that served a DPM call (`whatif`'s
calibration counts them). The compiled engine fills the compiled twin
(native/src/busy_spans.rs) with no call into Python per span; tests/report/test_spans.py
pins the two equal."""

from __future__ import annotations

from dpmstream.parsers import extension
from dpmstream.report import analysis as A
from dpmstream.report.analysis import FAST_DAEMON, NS_DAEMONS


class BusySpans:
    def __init__(self):
        self.found: dict[str, list] = {"slow": [], "fast": [], "ns": []}
        self.fast_threads: set[int] = set()

    def __call__(self, host, daemon, pid, tid, kind, started, ended) -> None:
        if daemon == FAST_DAEMON:
            if kind == "proc":
                self.found["slow"].append((started, ended))
            else:
                self.found["fast"].append((started, ended))
                if tid is not None and tid >= 0:
                    self.fast_threads.add(tid)
        elif daemon in NS_DAEMONS:
            self.found["ns"].append((started, ended))

    def fast_thread_ids(self) -> list[int]:
        """The ids of the fast daemon's threads that served a call (not a processing
        run), ascending."""
        return sorted(self.fast_threads)

    def windowed(self, since: int | None = None, until: int | None = None) -> dict:
        """Each kind's spans that overlap [since, until] (None: open), in the order they ended."""
        return {kind: [(a, b) for a, b in found
                       if (since is None or b >= since) and (until is None or a <= until)]
                for kind, found in self.found.items()}


    def busy(self, since: int | None = None, until: int | None = None) -> dict:
        """Each kind's spans that `windowed` gives, as (times, levels, count, busy ms): the
        steps of how many are open at once, how many they are, their lengths summed. The
        compiled twin makes these without a Python tuple per span (issue 30)."""
        out = {}
        for kind, spans in self.windowed(since, until).items():
            b = A.busy(spans)
            out[kind] = (b.steps.times, b.steps.levels, b.count, b.ms)
        return out

    def held(self, since: int | None = None, until: int | None = None) -> dict:
        """`busy`, each kind's steps as an analysis.Steps: (steps, count, busy ms), what
        the report reads. The compiled twin's steps stay in the extension (a HeldSteps,
        which the report reads through analysis.KeptSteps)."""
        return {kind: (A.Steps(times, levels), count, ms)
                for kind, (times, levels, count, ms) in self.busy(since, until).items()}


def busy_spans(compiled: bool):
    """The on_span for an engine: the compiled twin for the compiled one."""
    twin = extension.compiled("BusySpans") if compiled else None
    if twin is not None:
        return twin(FAST_DAEMON, sorted(NS_DAEMONS))
    return BusySpans()
