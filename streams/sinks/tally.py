"""The summary and the directory table of a run, gathered by the extension's Tally
(native/src/tally.rs) instead of by Python per record:

    aggregates = Aggregates(summary, directories, compiled=True)
    pipeline = Pipeline(aggregates.on_record(FanOut(other_sinks)))
    ...
    FanOut([aggregates, *other_sinks]).close()   # summary and directories hold the run

The Tally applies Summary.write's and DirectoryStats.write's rules to the same records in
the same order, with the same reservoir sample, then hands each record to the other sinks
(none in a replay without --out: no Python per record at all; the CSV files alone with
--out: the records go on undicted, fan_out.FanOut.receiver). The Python sinks stay the
reference and the fallback (no extension, the Python engine, a live directory window).

The DOME records (a pipeline's on_dome_record) go to the extension's DomeSummaryTally
(native/src/dome_summary_tally.rs) the same way, with DomeSummary's rules, the summary's DOME
part loading its figures at the end; the compiled DOME engine hands it its records as they
are, no dict made (parsers/pipeline.py, Pipeline._dome_receives), and with the CSV files
alone after it (--out) they go on undicted to the CSV sink's DOME writer:

    pipeline = Pipeline(aggregates.on_record(others), on_dome_record=aggregates.on_dome_record(others))
"""

from __future__ import annotations

from dpmstream.parsers import extension
from dpmstream.parsers.dome_records import KNOWN_COMMANDS, OTHER_COMMAND
from dpmstream.parsers.linking import NS_DAEMON
from dpmstream.streams.sinks import dome_summary
from dpmstream.streams.sinks import directories as directories_module
from dpmstream.streams.sinks import summary as summary_module
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary


class Aggregates:
    """A sink: Summary and DirectoryStats, tallied in the extension when `compiled`."""

    def __init__(self, summary: Summary, directories: DirectoryStats, compiled: bool):
        self.summary, self.directories = summary, directories
        self.tally = None
        self._loaded = False
        # keep_ms (run's sliding window of creats) is Python's alone
        Tally = extension.compiled("Tally") if compiled else None
        if Tally is not None and directories.keep_ms is None:
            self.tally = Tally(summary_module.RESERVOIR, directories.max_dirs, NS_DAEMON,
                               directories_module.FOLD_MS, directories_module.FOLD_AT)
        self.dome_tally = None
        DomeSummaryTally = extension.compiled("DomeSummaryTally") if compiled else None
        if DomeSummaryTally is not None:
            self.dome_tally = DomeSummaryTally(summary_module.RESERVOIR, sorted(KNOWN_COMMANDS),
                                        OTHER_COMMAND, dome_summary.UNKNOWN_ROLE,
                                        list(dome_summary.TIMED_OUTCOMES))

    @property
    def compiled(self) -> bool:
        return self.tally is not None

    def on_record(self, others: FanOut):
        """The callable a pipeline hands each record: the tally (forwarding to `others`),
        or a FanOut of the Python sinks and `others`."""
        if self.tally is None:
            return FanOut([self.summary, self.directories, *others.sinks]).write
        self.tally.forward = others.receiver()
        return self.tally

    def on_dome_record(self, others: FanOut):
        """The callable a pipeline hands each DOME record (its on_dome_record): the DOME
        tally (forwarding to `others`), or the summary's DOME part and `others`."""
        if self.dome_tally is None:
            return FanOut([self.summary, *others.sinks]).write if others.sinks else self.summary.write_dome
        self.dome_tally.forward = others.receiver("compiled_dome_receiver")
        return self.dome_tally

    def write(self, record: dict) -> None:
        if self.tally is None:
            self.summary.write(record)
            self.directories.write(record)
        else:
            self.tally.write(record)

    def close(self) -> None:
        """The tally's figures into the Python sinks, then close them (directories.csv)."""
        if not self._loaded:  # taken once: the tallies are then empty
            if self.tally is not None:
                self.summary.load(self.tally.take_summary_state())
                self.directories.load(self.tally.take_directories_state())
            if self.dome_tally is not None:
                self.summary.load_dome(self.dome_tally.take_state())
            self._loaded = True
        self.summary.close()
        self.directories.close()
