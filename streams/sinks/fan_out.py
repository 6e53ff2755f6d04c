"""The one shape of a record sink, and the fan-out of a pipeline's records to several.

    out = FanOut([summary, CsvSink("out"), metrics])
    pipeline = Pipeline(on_record=out.write)
    ...
    out.flush()          # after a batch: what the sinks buffered becomes visible
    out.close()          # at the end: files complete and closed

A sink takes finished records (parsers/records.py dicts) one at a time with write(),
releases what it holds with close(), and may have flush() when it buffers. CSV, JSON
lines, the summary, the directories, OpenMetrics, the Prometheus metrics and the Kafka
record topics (streams/kafka/record_topics.RecordTopics) are sinks.

A sink may also have `compiled_receiver`: an extension object the compiled engine hands
its records to as they are, before any dict is made of them (the CSV sink's CsvBlocks,
native/src/records.rs, formats them to bytes itself), and `compiled_dome_receiver` for
the DOME records (its DomeCsvBlocks, native/src/dome_csv.rs); each takes dicts too, as
write() does. A pipeline whose only receiver is such a sink runs no Python per record
(FanOut.receiver); any other sink gets dicts, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

TYPE_CHECKING = False   # typing.TYPE_CHECKING; typing's import was ~11 M instructions of replay's start-up (issue 30)
if TYPE_CHECKING:
    from typing import Protocol
else:   # a documented interface at run time, a protocol to a type checker
    Protocol = object


class Sink(Protocol):
    def write(self, record: dict) -> None: ...

    def close(self) -> None: ...


class FanOut:
    """Every record to every sink, in the order given; itself a sink."""

    def __init__(self, sinks: Iterable[Sink] = ()) -> None:
        self.sinks = list(sinks)

    def write(self, record: dict) -> None:
        for sink in self.sinks:
            sink.write(record)

    def receiver(self, compiled_as: str = "compiled_receiver"):
        """What a pipeline (or the tally, streams/sinks/tally.py) hands each record: None
        when there is no sink, the one sink's compiled receiver (its attribute
        `compiled_as`: "compiled_dome_receiver" for the DOME records) when it has one (the
        engine's records go to it undicted), else the one sink's write (no call of this
        write between), else write."""
        if not self.sinks:
            return None
        if len(self.sinks) == 1:
            compiled = getattr(self.sinks[0], compiled_as, None)
            return compiled if compiled is not None else self.sinks[0].write
        return self.write

    def flush(self) -> None:
        for sink in self.sinks:
            flush = getattr(sink, "flush", None)
            if flush is not None:
                flush()

    def close(self) -> None:
        """Close every sink, even when one fails (the first failure is raised after)."""
        failure = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - the others must still close
                failure = failure or exc
        if failure is not None:
            raise failure
