"""Followed files -> one Pipeline -> record sinks: the loop of `dpmstream run`.

    feed = LiveFeed([Follower(p) for p in paths], host="head01", metrics=PipelineMetrics(),
                    records=JsonLinesSink(path), sinks=[DirectoriesFile(other_path)])
    while running:
        busy = feed.poll_once()       # read what was appended, feed it, emit, publish stats
        if not busy:
            time.sleep(0.25)
    feed.finish()                     # or feed.drain() to leave open requests unemitted

Separate from the command so that a test can drive it one poll at a time. One pipeline
source per file, created when the file first yields lines, with the file's mtime as the
year hint. Records are handed on per poll to every sink (streams/sinks/fan_out.py: the
metrics, the records file, the other sinks, the summary), then flushed once; then the
pipeline's stats are published to the metrics. The sinks are the caller's to close.

Exactly once across restarts (keep_state=True, `dpmstream run --state`): a line's effect
is durable only once the record it completes is in the records file, and most lines
complete nothing yet: they sit in requests still open. So the offsets are never saved
alone. checkpoint() saves, as one consistent cut, the reassembly state (the open
requests, threads and recently finished tokens: Pipeline.take_changes(), as the Kafka
worker keeps in its changelog) after exactly the lines the followers handed out, with
their offsets and the size of the records file once fsynced. A restart restores that
state and reads on from those offsets, so an open request continues where it was and is
emitted once, whole. Records written between the last checkpoint and a crash are made
again from the same lines; the sink recognises them and does not write them twice
(`records`, a sinks/jsonlines.JsonLinesSink(written_since=)). The other way, resuming at the oldest line of an
open request and suppressing what was already written, would reread up to --timeout
(an hour) of log for one slow request; saving the state is bounded by the open requests.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import islice
from typing import Callable, Sequence

from dpmstream.streams.live.follow import Follower
from dpmstream.streams.lanes import DETECT_LINES, STEP_MS, recognise
from dpmstream.parsers.linking import MAX_LAG_MS
from dpmstream.parsers.pipeline import Pipeline, StateChanges
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams import state_keys
from dpmstream.streams.sinks.fan_out import FanOut, Sink
from dpmstream.streams.sinks.summary import Summary, label_zone

FINISHED_GROUPS_SAVED = 4  # of 1,024 ended tokens each: what a checkpoint keeps


class LiveFeed:
    def __init__(
        self,
        followers: list[Follower],
        *,
        host: str,
        metrics=None,
        records=None,
        sinks: Sequence[Sink] = (),
        summarise: bool = False,
        profile=None,
        tz: str | None = None,
        year: int | None = None,
        settings: ReassemblySettings = ReassemblySettings(),
        log: Callable[[str], None] | None = None,
        keep_state: bool = False,
        state: dict | None = None,
    ) -> None:
        self.followers = followers
        self.host = host
        self.metrics = metrics      # PipelineMetrics: a sink, and the stats published
        self.records = records      # the records file: exactly once across restarts
        # Incremental: quantiles from bounded reservoirs, not a list of every record.
        self._summary = Summary() if summarise else None
        self._out = FanOut(s for s in (metrics, records, *sinks, self._summary) if s is not None)
        self._source_args = dict(profile=profile, tz=tz, year=year)
        self._log = log or (lambda msg: None)
        self._batch: list[dict] = []
        # DOME records (docs/dome.md) take the same batch, sinks and checkpoints.
        self.pipeline = Pipeline(self._batch.append, settings,
                                 on_dome_record=self._batch.append)
        self._state: StateChanges | None = None  # the whole state, as of the last checkpoint
        self.state_changed = False  # the last checkpoint() found the state changed
        if keep_state:
            self.pipeline.track_changes()
            self._state = state_keys.decode(state or {})
            if state:
                self.pipeline.restore(self._state)
        self._sources: dict[int, object] = {}
        self._buffers: dict[int, deque] = {id(f): deque() for f in followers}
        # Files given no line yet, while one may be the other log of a pair: see
        # _await_silent_files. Files read before a restart (resumed) have spoken.
        self._silent = [f for f in followers if not f.resumed] if len(followers) > 1 else []
        self._first_ms: int | None = None   # the feed's position after its first lines fed
        self.pipeline.await_silent_logs(len(self._silent))
        self._seen_events: dict[int, tuple[int, int]] = {}
        self.lines_read = 0
        self.emitted = {"request": 0, "call": 0}

    # -- reading ----------------------------------------------------------------------

    def poll_once(self) -> bool:
        """One pass over every file; True if some file has more to read right away."""
        busy = False
        for f in self.followers:
            buffer = self._buffers[id(f)]
            if not buffer:
                buffer.extend(f.poll_once())
                self._report_file_events(f)
        self._feed_in_time_order()
        self._await_silent_files()
        for f in self.followers:
            if f.pending or self._buffers[id(f)]:
                busy = True
            else:
                # Caught up with the file: a source still buffering lines to detect its
                # profile decides on what it has, or live lines would wait for 200 more.
                src = self._sources.get(id(f))
                if src is not None and src.parser is None:
                    src.settle()
        self.pipeline.advance()
        self.drain()
        if not busy and self.records is not None and self.records.rereading and not any(
                f.waiting_for_copy for f in self.followers):
            # Every line read before the crash has been read again: what was not made
            # again came from lines rotated away while it was down; it stays, once.
            left = self.records.end_replay()
            if left:
                self._log(f"{left} record(s) written before the restart were not made again "
                          "(their lines were not found again); they stay written once")
        return busy

    def open_files(self) -> None:
        """Open every file that can be, reading nothing yet (a checkpoint then holds where
        each starts: a --from-end start keeps its place)."""
        for f in self.followers:
            f.open()
            self._report_file_events(f)

    def read_to_end(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Read every file to its current end, the unterminated last line included."""
        while self.poll_once() and not should_stop():
            pass
        if should_stop():
            return
        for f in self.followers:
            rest = f.flush_partial()
            if rest is not None:
                self._feed(f, [rest])

    def _position(self, f: Follower) -> int:
        src = self._sources.get(id(f))
        return -1 if src is None else src.position

    def _feed_in_time_order(self) -> None:
        """Feed the buffered lines, the file furthest behind in event time first; stop
        when that file's buffer is empty but it has more to read (the next poll)."""
        buffers = self._buffers
        while True:
            active = [f for f in self.followers if buffers[id(f)] or f.pending]
            if not active:
                return
            active.sort(key=self._position)
            f = active[0]
            buffer = buffers[id(f)]
            if not buffer:
                return
            limit = self._position(active[1]) + STEP_MS if len(active) > 1 else None
            if limit is None:
                lines = list(buffer)
                buffer.clear()
                self._feed(f, lines)
                continue
            while buffer:
                self._feed(f, [buffer.popleft()])
                if self._position(f) > limit:
                    break

    def _feed(self, f: Follower, lines: list[bytes]) -> None:
        src = self._sources.get(id(f))
        if src is None:
            args = self._source_args
            if args["profile"] is None:  # a DOME log: its profile from the lines at hand
                first = [*lines, *islice(self._buffers[id(f)], DETECT_LINES)][:DETECT_LINES]
                dome = recognise(first, self.pipeline.profiles, None,
                                 lambda: self.pipeline.dome_profiles)[1]
                args = {**args, "profile": dome}
            src = self._sources[id(f)] = self.pipeline.source(
                f.path, host=self.host, path=f.path, year_hint_ms=f.mtime_ms, **args)
        src.feed_lines(lines)  # the compiled parser's path when it takes the line
        self.lines_read += len(lines)
        if self._first_ms is None and src.position >= 0:
            self._first_ms = src.position

    def _await_silent_files(self) -> None:
        """While a followed file has given no line, request records wait (the pipeline's
        await_silent_logs): started before the name-server log has a line (or at the
        moment both are created), the DPM log's first requests would otherwise go out
        unlinked, a poll before the calls that link to them are read. A file still
        silent once the others' event time is MAX_LAG_MS past the first lines fed is
        taken for quiet, as the linker takes a log lagging by more than that."""
        if not self._silent:
            return
        self._silent = [f for f in self._silent if id(f) not in self._sources]
        if self._silent and self._first_ms is not None:
            latest = max(src.position for src in self._sources.values())
            if latest - self._first_ms > MAX_LAG_MS:
                for f in self._silent:
                    self._log(f"{f.path} has given no line in {MAX_LAG_MS // 1000} s of the "
                              "other logs' time: taken for quiet; records no longer wait for it")
                self._silent = []
        self.pipeline.await_silent_logs(len(self._silent))

    def _report_file_events(self, f: Follower) -> None:
        now = (f.rotations, f.truncations, f.shrinks, f.error)
        before = self._seen_events.get(id(f), (0, 0, 0, None))
        if now != before:
            if now[0] > before[0]:
                self._log(f"{f.path} was rotated; following the new file")
            if now[1] > before[1]:
                self._log(f"{f.path} was truncated; reading it again from the start")
            if now[2] > before[2]:
                self._log(f"{f.path} shrank; reading on where its kept part ends")
            if now[3] != before[3]:
                self._log(f"cannot read {f.path}: {now[3]}; retrying" if now[3]
                          else f"{f.path} is readable again")
            self._seen_events[id(f)] = now
        if f.notices:
            for msg in f.notices:
                self._log(msg)
            f.notices.clear()

    # -- output -----------------------------------------------------------------------

    def drain(self) -> int:
        """Hand the records emitted so far to the sinks; publish the pipeline's stats."""
        batch, self._batch[:] = list(self._batch), []
        if self.records is not None and self.records.replaying:
            # Made again after a restart, already in the records file: not twice.
            batch = [rec for rec in batch if not self.records.is_replayed(rec)]
        for rec in batch:
            self.emitted[rec["kind"]] = self.emitted.get(rec["kind"], 0) + 1
            self._out.write(rec)
        if batch:
            self._out.flush()
        if self.metrics is not None:
            self.metrics.publish(self.pipeline.stats)
        return len(batch)

    def _flush_buffers(self) -> None:
        """Feed every line read but held back for time order, the file furthest behind
        first: after this, what the pipeline has seen is exactly what the followers
        handed out."""
        for f in sorted(self.followers, key=self._position):
            buffer = self._buffers[id(f)]
            if buffer:
                self._feed(f, list(buffer))
                buffer.clear()

    def finish(self) -> None:
        """End of input: partial last lines are fed, every open request is emitted."""
        self._flush_buffers()
        for f in self.followers:
            rest = f.flush_partial()
            if rest is not None:
                self._feed(f, [rest])
        self.pipeline.finish()
        self.drain()
        if self.records is not None and self.records.replaying and not self.records.rereading:
            # This flush made again what the last one wrote (sinks/jsonlines.py); what
            # it did not, nothing will make again: it stays, once. (While lines read
            # before the restart are still ahead, all stays to recognise: the state saved
            # at this stop keeps the records size of the one it resumed from.)
            left = self.records.end_replay(flushed=True)
            if left:
                self._log(f"{left} record(s) written before the restart were not made again; "
                          "they stay written once")

    def checkpoint(self) -> dict:
        """What a restart needs, as one consistent cut (see the module doc): the state of
        the pipeline after exactly the lines handed out, the followers' positions, the
        durable size of the records file. Call between polls."""
        if self._state is None:
            raise RuntimeError("LiveFeed(keep_state=True) keeps the state")
        # The followers' offsets count every line they handed out: none may stay held back.
        # (So while catching up a backlog with --state, files drift apart by up to one
        # poll's read at each checkpoint, where name-server calls may miss their request.)
        self._flush_buffers()
        changes = self.pipeline.take_changes()
        self.state_changed = bool(changes)
        self._state.merge(changes)
        self.drain()  # records that take_changes() completed (profile detection settled)
        size = self.records.sync() if self.records is not None else None
        return {
            "files": {f.path: f.checkpoint() for f in self.followers},
            "pipeline": self._saved_state(),
            "records": {"path": self.records.path if self.records is not None else None,
                        "size": size},
        }

    def _saved_state(self) -> dict:
        """The state, as the state file keeps it (streams/state_keys.py), without the
        oldest ended-token groups: the reassembler remembers 100,000 ended tokens to tell
        a late line, which would make every save megabytes; late lines come seconds after
        the end, so the newest groups serve as well."""
        whole = self._state
        kept = sorted(whole.finished)[-FINISHED_GROUPS_SAVED:]
        if len(kept) < len(whole.finished):
            whole = whole.replace(finished={g: whole.finished[g] for g in kept})
        return {key: value for key, value in state_keys.encode(whole).items()
                if value is not None}

    def close(self) -> None:
        for f in self.followers:
            f.close()

    # -- reporting --------------------------------------------------------------------

    def open_requests(self) -> int:
        return self.pipeline.stats.in_flight

    def status_text(self) -> str:
        stats = self.pipeline.stats
        parts = [f"{self.lines_read} lines"]
        by_result = {r: stats.total(r) for r in ("parsed", "unmatched", "malformed")}
        parts[0] += " (" + ", ".join(f"{n} {r}" for r, n in by_result.items()) + ")"
        parts.append(f"{self.emitted['request']} requests, {self.emitted['call']} calls emitted")
        if self.emitted.get("dome_call") or self.emitted.get("dome_put"):
            parts.append(f"{self.emitted.get('dome_call', 0)} DOME calls, "
                         f"{self.emitted.get('dome_put', 0)} DOME puts emitted")
        parts.append(f"{stats.in_flight} in flight")
        if stats.latest_event_ms:
            lag = time.time() - max(stats.latest_event_ms.values()) / 1000.0
            parts.append(f"event lag {_duration(lag)}")
        return ", ".join(parts)

    def summary(self) -> str:
        """The terminal summary of what was read (needs summarise=True)."""
        if self._summary is None:
            raise RuntimeError("LiveFeed(summarise=True) keeps the summary")
        return self._summary.render(self.pipeline.stats,
                                    zone=label_zone(self.pipeline.sources.values()))


def _duration(seconds: float) -> str:
    if abs(seconds) < 120:
        return f"{seconds:.1f} s"
    if abs(seconds) < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
