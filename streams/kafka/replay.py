"""Archived logs -> the raw-lines topic, in the rsyslog JSON envelope (`replay --to-kafka`).

    publish_files(["log-20110812.gz"], "kafka://127.0.0.1:9092", host="head01", speed=None)

Each line becomes {"host", "path", "offset", "received", "line"} keyed by host, with
offset = the line's byte offset in the (decompressed) file, as imfile would report it, so
the worker's duplicate filter treats a file published twice as one.

`received` is what rsyslog would have stamped had it read the line live: the line's own
time (its rsyslog prefix when it has one, else its DPM stamp dated like `dpmstream replay`
dates it: --year, a rotated file's name, else the file's mtime). The worker takes the year
from it; stamping the publish time instead would move a 2011 archive into this year.
Lines without a stamp take the previous line's.

speed None: as fast as the broker takes them. speed X: paced so that event time runs X
times faster than the wall clock (the event time stays the line's own).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import time
from collections.abc import Iterator

from dpmstream.parsers.clock import ClockError, EventClock, stream_reference
from dpmstream.parsers.profiles import bundled_profiles
from dpmstream.parsers.stamps import LineStamps
from dpmstream.streams.kafka.envelope import encode, ms_to_rfc3339
from dpmstream.streams.inputs import InputError, describe, open_once
from dpmstream.streams.lanes import daemons_of

log = logging.getLogger("dpmstream.replay")

_PACE_SLICE_S = 0.05     # never sleep in smaller slices than this (wall clock)


class LineTimes:
    """The instant of each line of one file (epoch ms), for `received` and for pacing.

    The stamps are read with the profile's own envelope patterns (the first bundled
    profile unless one is given: the bundled ones share the LCGDM envelope), and the year
    follows the rule every reader uses (parsers/clock.stream_reference)."""

    def __init__(self, path: str | None, mtime_ms: int | None, year: int | None, tz: str | None,
                 profile=None):
        profile = profile or bundled_profiles()[0]
        self.clock = EventClock(tz or profile.timezone, year=year)
        if year is None:
            self.clock = EventClock(tz or profile.timezone, year=year,
                                    ref=stream_reference(path, mtime_ms, self.clock.zone))
        self.stamps = LineStamps(profile)
        self.last: int | None = None

    def of(self, raw: bytes) -> int | None:
        try:
            received = self.stamps.received_ms(raw)
        except ClockError:   # an rsyslog line whose own time does not read: keep the last
            return self.last
        if received is not None:   # a file rsyslog wrote: exactly what it received
            self.last = received
            return received
        st = self.stamps.local(raw)
        if st is not None:
            try:
                self.last = self.clock.to_ms(*st)
            except (ClockError, ValueError):
                pass
        return self.last


class Pacer:
    """Sleeps so that event time advances `speed` times faster than the wall clock."""

    def __init__(self, speed: float | None):
        self.speed = speed
        self.t0_event: int | None = None
        self.t0_wall = 0.0

    async def wait(self, event_ms: int | None) -> None:
        if not self.speed or event_ms is None:
            return
        if self.t0_event is None:
            self.t0_event, self.t0_wall = event_ms, time.monotonic()
            return
        due = self.t0_wall + (event_ms - self.t0_event) / 1000.0 / self.speed
        delay = due - time.monotonic()
        if delay >= _PACE_SLICE_S:  # out-of-order stamps (negative delays) never wait
            await asyncio.sleep(delay)


async def _require_topic(producer, topic: str) -> None:
    """Refuse to publish to a topic the broker does not have: sends to it would only time
    out (or, on a broker that auto-creates topics, land in a topic with defaults nobody
    chose). Creating the lines topic is the deployment's job (docker-compose's kafka-init,
    `dpmstream stack up`, or the worker's own start)."""
    from dpmstream.streams.kafka.config import KafkaConfigError

    metadata = await producer.client.fetch_all_metadata()
    if topic not in metadata.topics():
        raise KafkaConfigError(
            f"topic {topic!r} does not exist on the broker; create it first (or start "
            "`dpmstream worker`, which creates its lines topic), or name another with "
            "--lines-topic")


def lines_in_event_time(paths, year: int | None, tz: str | None
                        ) -> Iterator[tuple[str, int, int | None, bytes]]:
    """(path, byte offset, event ms, line) of every line of `paths`, in the order `replay`
    reads them (streams/lanes.py): the files of one daemon one after another, in the order
    given, the daemons side by side in event time. A head node's DPM and DPNS logs published
    one after the other would reach the worker minutes or hours apart in event time, and
    its linker waits for a lagging log only so long (parsers/linking.py MAX_LAG_MS): none of
    their name-server calls would be linked. Ties keep the order the files were given in.

    The lanes interleave line by line in event time, finer than replay's turns of STEP_MS
    (parsers/side_by_side.py): the worker gets no second chance to reorder, and each line's
    time is known here anyway (its `received`)."""
    opened_of: dict[int, object] = {}

    def first_lines(inp) -> list[bytes]:
        try:
            opened = opened_of[id(inp)] = open_once(inp)
        except OSError as exc:
            raise InputError(f"{inp.name}: {exc}") from exc
        opened.release()   # reopened when its turn comes: few files open at once
        return opened.first_lines

    # The daemons as replay's lanes group them; only their inputs are read here (their
    # lines are published below, not fed to a pipeline).
    daemons = daemons_of([describe(os.fspath(name)) for name in paths], bundled_profiles(),
                         None, first_lines=first_lines)
    merged = [_lane_lines([(inp, opened_of[id(inp)]) for inp, _ in group], year, tz)
              for group in daemons.values()]
    if len(merged) == 1:
        return merged[0]
    return heapq.merge(*merged, key=_event_order)


def _event_order(line: tuple) -> int:
    """A line's place in event time: lines before a file's first stamp go first."""
    return -1 if line[2] is None else line[2]


def _lane_lines(files, year, tz) -> Iterator[tuple[str, int, int | None, bytes]]:
    for inp, opened in files:
        times = LineTimes(inp.path, inp.mtime_ms, year, tz)
        path = inp.path or "-"
        stream = opened.stream_again()
        offset = 0
        try:
            for raw in stream:
                line_offset, offset = offset, offset + len(raw)
                yield path, line_offset, times.of(raw), raw
        except (EOFError, OSError, ValueError) as exc:
            raise InputError(f"{inp.name}: input ends early: {exc}") from exc
        finally:
            opened.close()


async def publish_async(paths, bootstrap: str, *, topic: str = "dpm.lines", host: str,
                        speed: float | None = None, security: dict | None = None,
                        year: int | None = None, tz: str | None = None) -> int:
    """Publish every line of `paths` (in lines_in_event_time's order); returns the number
    of lines published."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, client_id="dpmstream-replay", acks="all",
        enable_idempotence=True, linger_ms=20, max_batch_size=512 * 1024,
        compression_type="lz4", **(security or {}))
    try:
        await producer.start()
    except BaseException:
        await producer.stop()  # a producer that failed to connect still holds its client
        raise
    try:
        await _require_topic(producer, topic)
    except BaseException:
        await producer.stop()
        raise
    key = host.encode()
    pacer = Pacer(speed)
    sent = 0
    try:
        pending = []
        for path, line_offset, event_ms, raw in lines_in_event_time(paths, year, tz):
            await pacer.wait(event_ms)
            received_ms = event_ms if event_ms is not None else int(time.time() * 1000)
            text = raw.rstrip(b"\r\n").decode("utf-8", "replace")
            value = encode(host, path, line_offset, ms_to_rfc3339(received_ms), text)
            pending.append(await producer.send(topic, value, key=key))
            sent += 1
            if len(pending) >= 10_000:  # bound memory: wait for the oldest acks
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


def publish_files(paths, broker: str, *, topic: str = "dpm.lines", host: str,
                  speed: float | None = None, security=None, year: int | None = None,
                  tz: str | None = None) -> int:
    """Synchronous entry point. broker: kafka://HOST:PORT[,...]; security: a KafkaSecurity
    (or None for PLAINTEXT). Raises KafkaConfigError, InputError or aiokafka's KafkaError."""
    from dpmstream.streams.kafka.config import parse_broker

    kwargs = security.client_kwargs() if security is not None else {}
    return asyncio.run(publish_async(list(paths), parse_broker(broker), topic=topic, host=host,
                                     speed=speed, security=kwargs, year=year, tz=tz))


def publish_from_args(args) -> int:
    """`dpmstream replay --to-kafka URL ...`: exit code 0, 1 (input or broker failure), 2 (usage)."""
    import sys

    from dpmstream.commands.common import default_host
    from dpmstream.streams.kafka.config import KafkaConfigError, security_from_args

    try:
        security = security_from_args(args)
        n = publish_files(args.files, args.to_kafka, topic=args.lines_topic,
                          host=default_host(getattr(args, "host", None)), speed=args.speed,
                          security=security, year=getattr(args, "year", None),
                          tz=getattr(args, "tz", None))
    except KafkaConfigError as exc:
        print(f"dpmstream replay: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"dpmstream replay: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # aiokafka errors: no broker, topic refused, ...
        print(f"dpmstream replay: Kafka: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"published {n} lines to {args.lines_topic}", file=sys.stderr)
    return 0
