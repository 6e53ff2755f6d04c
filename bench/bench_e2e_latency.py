"""End-to-end latency: a log line appended to a file -> its request record on dpm.requests.

A private broker, rsyslog (the shipped config) and one `dpmstream worker` are
started; the lines of a simulated head node (DPM + DPNS logs, merged by
stamp) are appended to two files at --rate lines/s for --warmup + --seconds, in chunks
every --chunk-ms, each chunk flushed. A consumer reads the requests topic (read_committed).
Only requests ending after the warm-up are measured: a fresh broker creates its internal
topics (__consumer_offsets, __transaction_state) at the worker's first transactions and
answers NOT_ENOUGH_REPLICAS for a second or two, which a running site never sees; the
warm-up's own figures are printed apart.

Per request, latency = wall time its record was consumed - wall time the line that ends
it (the one that fixes `ended`: putdone/relfiles/abortreq returns, a FAILED status
returns, a failing put/get returns) was appended and flushed. Which line ends a request
is found by feeding the same lines, in the same order, to the core Pipeline: the record
comes out when its ending line goes in.

Prints the count, p50/p95/p99/max latency, the achieved line rate, the worker's peak RSS
(VmHWM), and where the ending lines' time went (read by rsyslog, then readable on the
lines topic).

    .venv/bin/python bench/bench_e2e_latency.py [--rate 5000] [--seconds 60]
        [--chunk-ms 20] [--batch 20000] [--conf-param linger.ms=5 ...] [--keep]

Target: p99 <= 1 s at 5,000 lines/s. Needs `make install-system install-kafka`.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import heapq
import json
import os
import shutil
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

HERE = Path(__file__).resolve().parent
TZ = "Europe/Zurich"


def simulated_lines(workdir: Path, total: int, dpm_file: Path, dpns_file: Path):
    """(file, line bytes, byte offset) of a simulated head node, merged by stamp, `total` long.

    The simulated day is today: log stamps have no year, the worker takes it from
    rsyslog's receive time."""
    from dpmstream.simulator import SimConfig, simulate

    start = (datetime.now(ZoneInfo(TZ)) - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    # The DPM log alone reaches `total`; the DPNS log adds ~12% more to merge in.
    sim = simulate(SimConfig(lines=total, start=start, tz=TZ, get_fraction=0.3), workdir / "sim")

    def read(src, dest):
        offset = 0
        with open(src, "rb") as fh:
            for raw in fh:
                yield dest, raw.rstrip(b"\n"), offset
                offset += len(raw)

    merged = heapq.merge(read(sim.log_path, dpm_file), read(sim.dpns_log_path, dpns_file),
                         key=lambda item: item[1][:18])
    return [item for _, item in zip(range(total), merged)], sim.config.host


def ending_lines(lines, host: str) -> dict[str, int]:
    """token -> index of the line whose feeding emits the request's record (core Pipeline)."""
    from dpmstream.parsers.pipeline import Pipeline

    emitted: list[dict] = []
    pipeline = Pipeline(emitted.append)
    now_ms = int(time.time() * 1000)
    sources = {}
    ends: dict[str, int] = {}
    for i, (path, line, _offset) in enumerate(lines):
        src = sources.get(path)
        if src is None:
            src = sources[path] = pipeline.source(str(path), host=host, path=str(path), tz=TZ,
                                                  year_hint_ms=now_ms)
        detecting = src.parser is None
        src.feed(line, received_ms=now_ms)
        for rec in emitted:
            # Records released by the profile detection's first flush have no single line.
            if rec["kind"] == "request" and not detecting:
                ends[rec["token"]] = i
        emitted.clear()
    return ends


class Writer(threading.Thread):
    """Appends the lines at `rate` lines/s in chunks every `chunk_s`; records when each chunk
    was flushed."""

    def __init__(self, lines, rate: float, chunk_s: float):
        super().__init__(name="writer", daemon=True)
        self.lines, self.rate, self.chunk_s = lines, rate, chunk_s
        self.ends: list[int] = []      # lines written after chunk k
        self.times: list[float] = []   # wall time after chunk k was flushed
        self.started = self.finished = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            handles = {p: open(p, "ab") for p in {p for p, _l, _o in self.lines}}
            try:
                self._write(handles)
            finally:
                for fh in handles.values():
                    fh.close()
        except BaseException as exc:  # noqa: BLE001 - reported by main
            self.error = exc

    def _write(self, handles) -> None:
        n, written, tick = len(self.lines), 0, 0
        self.started = start = time.monotonic()
        while written < n:
            tick += 1
            due = min(n, int(tick * self.chunk_s * self.rate))
            touched = set()
            for path, line, _offset in self.lines[written:due]:
                handles[path].write(line + b"\n")
                touched.add(path)
            for path in touched:
                handles[path].flush()
            if due > written:
                written = due
                self.ends.append(due)
                self.times.append(time.time())
            delay = start + tick * self.chunk_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.finished = time.monotonic()

    def appended_at(self, index: int) -> float:
        return self.times[bisect.bisect_right(self.ends, index)]


class Consumer(threading.Thread):
    """Reads the requests topic (read_committed) and the lines topic, noting wall times."""

    def __init__(self, bootstrap: str, requests_topic: str, lines_topic: str):
        super().__init__(name="consumer", daemon=True)
        self.bootstrap, self.requests_topic, self.lines_topic = bootstrap, requests_topic, lines_topic
        self.requests: dict[str, float] = {}       # token -> wall time consumed (first time)
        self.duplicates = 0
        # (path, offset) -> (rsyslog's read time, wall time the line was consumed from Kafka)
        self.lines: dict[tuple[str, int], tuple[float, float]] = {}
        self.ready = threading.Event()
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # noqa: BLE001 - reported by main
            self.error = exc
            self.ready.set()

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.admin import AIOKafkaAdminClient

        from dpmstream.streams.kafka.envelope import rfc3339_to_ms

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="bench-e2e")
        await admin.start()
        try:   # all topics: naming one could auto-create it
            partitions = {t["topic"]: [p["partition"] for p in t["partitions"]]
                          for t in await admin.describe_topics()}
        finally:
            await admin.close()

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                    isolation_level="read_committed", enable_auto_commit=False,
                                    fetch_max_wait_ms=20)
        await consumer.start()
        try:
            tps = []
            for topic in (self.requests_topic, self.lines_topic):
                tps += [TopicPartition(topic, p) for p in partitions.get(topic) or [0]]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            self.ready.set()
            while not self.stop_event.is_set():
                batch = await consumer.getmany(timeout_ms=50)
                now = time.time()
                for tp, msgs in batch.items():
                    if tp.topic == self.requests_topic:
                        for m in msgs:
                            token = m.key.decode()
                            if token in self.requests:
                                self.duplicates += 1
                            else:
                                self.requests[token] = now
                    else:
                        for m in msgs:
                            env = json.loads(m.value)
                            received = rfc3339_to_ms(env["received"]) / 1000
                            self.lines[(env["path"], env["offset"])] = (received, now)
        finally:
            await consumer.stop()


def percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}

    def pct(p):
        return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
    return {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": values[-1]}


def fmt(stats: dict[str, float]) -> str:
    return "  ".join(f"{k} {v * 1000:7.1f} ms" for k, v in stats.items())


def vm_hwm_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=5000, help="lines/s appended")
    ap.add_argument("--seconds", type=float, default=60, help="how long to append (measured)")
    ap.add_argument("--warmup", type=float, default=5, help="seconds appended before, not measured")
    ap.add_argument("--chunk-ms", type=float, default=20, help="append and flush every N ms")
    ap.add_argument("--batch", type=int, default=None, help="worker --batch (default: its own)")
    ap.add_argument("--conf-param", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka setting for rsyslog's omkafka (repeatable)")
    ap.add_argument("--drain", type=float, default=60, help="max seconds to wait for the last records")
    ap.add_argument("--workdir", default=str(HERE / "out"), help="parent of the run's directory")
    ap.add_argument("--keep", action="store_true", help="keep the run directory (logs, broker data)")
    args = ap.parse_args()

    from dpmstream.commands.stack.kafka import KafkaBroker
    from dpmstream.commands.stack.rsyslog import RsyslogShipper
    from dpmstream.commands.stack.worker_process import WorkerProcess

    run = Path(args.workdir).resolve() / f"e2e-latency-{os.getpid()}"
    dpm_file, dpns_file = run / "logs" / "dpm" / "log", run / "logs" / "dpns" / "log"
    warm = int(args.rate * args.warmup)
    total = warm + int(args.rate * args.seconds)
    t0 = time.monotonic()
    lines, host = simulated_lines(run, total, dpm_file, dpns_file)
    ends = ending_lines(lines, host)
    print(f"{len(lines):,} lines ({sum(1 for p, _l, _o in lines if p == dpm_file):,} DPM), "
          f"{len(ends):,} requests end in them; prepared in {time.monotonic() - t0:.1f} s")
    for f in (dpm_file, dpns_file):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")

    tag = uuid.uuid4().hex[:8]
    topics = {"lines": f"lat-lines-{tag}", "requests": f"lat-req-{tag}", "calls": f"lat-calls-{tag}"}
    broker = KafkaBroker(run / "kafka", heap="1g")
    shipper = worker = consumer = None
    try:
        print(f"broker ready in {broker.start():.1f} s")
        broker.create_topics([topics["lines"], topics["requests"], topics["calls"]], partitions=1)
        extra = ["--batch", str(args.batch)] if args.batch else []
        worker = WorkerProcess(run / "worker", broker.url, extra_args=[
            "--lines-topic", topics["lines"], "--requests-topic", topics["requests"],
            "--calls-topic", topics["calls"], "--group-id", f"lat-{tag}", "--partitions", "1",
            "--tz", TZ, *extra])
        print(f"worker ready in {worker.start():.1f} s")
        shipper = RsyslogShipper(run / "rsyslog", [dpm_file, dpns_file], [broker.bootstrap],
                                 topic=topics["lines"], hostname=host, resume_interval=1,
                                 extra_conf_params=["reconnect.backoff.max.ms=1000", *args.conf_param])
        print(f"rsyslog ready in {shipper.start():.1f} s")
        consumer = Consumer(broker.bootstrap, topics["requests"], topics["lines"])
        consumer.start()
        if not consumer.ready.wait(60) or consumer.error:
            raise RuntimeError(f"consumer did not start: {consumer.error!r}")

        writer = Writer(lines, args.rate, args.chunk_ms / 1000)
        writer.start()
        writer.join(args.seconds * 3 + 60)
        if writer.error or writer.is_alive():
            raise RuntimeError(f"writer failed or overran: {writer.error!r}")
        write_s = writer.finished - writer.started
        deadline = time.monotonic() + args.drain
        while len(consumer.requests) < len(ends) and time.monotonic() < deadline:
            if consumer.error:
                raise RuntimeError(f"consumer failed: {consumer.error!r}")
            time.sleep(0.1)
        hwm = vm_hwm_mib(worker.process.pid() or -1)
        consumer.stop_event.set()
        consumer.join(10)

        latencies, to_read, to_kafka, worst, warmup = [], [], [], [], []
        for token, index in ends.items():
            appended = writer.appended_at(index)
            if index < warm:
                if token in consumer.requests:
                    warmup.append(consumer.requests[token] - appended)
                continue
            if token in consumer.requests:
                latencies.append(consumer.requests[token] - appended)
                worst.append((latencies[-1], appended - writer.times[0]))
            path, _line, offset = lines[index]
            seen = consumer.lines.get((str(path), offset))
            if seen is not None:
                to_read.append(seen[0] - appended)
                to_kafka.append(seen[1] - appended)
        measured = sum(1 for index in ends.values() if index >= warm)
        missing = len(ends) - len(latencies) - len(warmup)
        extra_records = len(set(consumer.requests) - set(ends))
        p = percentiles(latencies)
        print(f"appended {len(lines):,} lines in {write_s:.2f} s = {len(lines) / write_s:,.0f} lines/s "
              f"(target {args.rate:,.0f}), chunks every {args.chunk_ms:g} ms")
        print(f"requests measured: {len(latencies):,} of {measured:,} ending after the {args.warmup:g} s "
              f"warm-up (missing in all: {missing}; records of requests not ending in the lines: "
              f"{extra_records}; consumed twice: {consumer.duplicates})")
        print(f"warm-up ({len(warmup)} requests):             {fmt(percentiles(warmup))}")
        print(f"line appended -> record consumed:  {fmt(p)}")
        print(f"  ... -> line read by rsyslog:     {fmt(percentiles(to_read))}")
        print(f"  ... -> line consumed from Kafka: {fmt(percentiles(to_kafka))}")
        print("slowest: " + ", ".join(f"{lat * 1000:.0f} ms at {at:.1f} s"
                                      for lat, at in sorted(worst, reverse=True)[:8]))
        print(f"worker peak RSS (VmHWM): {hwm:.0f} MiB" if hwm else "worker peak RSS: unknown")
        verdict = "met" if p and p["p99"] <= 1.0 and missing == 0 else "NOT met"
        print(f"target p99 <= 1 s with no request missing: {verdict}")
        return 0 if verdict == "met" else 1
    finally:
        if consumer is not None:
            consumer.stop_event.set()
        for svc in (shipper, worker):
            if svc is not None:
                svc.stop()
        broker.stop()
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)
        else:
            print(f"kept {run}")


if __name__ == "__main__":
    sys.exit(main())
