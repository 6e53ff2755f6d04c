"""native/src/dome_summary_tally.rs: the summary's DOME section gathered in the extension is
the one streams/sinks/dome_summary.DomeSummary (the reference) gathers from the same
records: the same counters and labels in the same order, the same reservoir samples and
quantiles, the same time range, capacities, filesystem events and journald gaps, and the
same rendered text. Records come as dicts (the checksum stage's, any driver's) or as the
compiled DOME engine's own values (DomeCore's `receiver`: no dict made)."""

from __future__ import annotations

import os

import pytest

from dpmstream.parsers import engines, extension
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_checksums import ChecksumWaits, with_checksums
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import merge_by_time
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.sinks import summary as summary_module
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.dome_summary import DomeSummary
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary
from dpmstream.streams.sinks.tally import Aggregates

pytestmark = pytest.mark.skipif(
    extension.compiled("DomeSummaryTally") is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the extension is not built here")

# Both stamp kinds, each site with a disk node down and back, the head restarting and a
# journald gap (in an envelope that keeps journald's notices); rfc3339 stamps give
# sub-second times.
SITES = {"traditional": "messages", "rfc3339": "journal"}
TIMEOUT_S = 120


def site_config(stamp: str) -> DomeConfig:
    return DomeConfig(duration=600.0, rate=3.0, disks=3, tz="UTC", stamp=stamp, envelope=SITES[stamp],
                      disk_down_at=150.0, disk_down_s=120.0, restart_at=380.0, gap_at=250.0,
                      gap_s=4.0, timeout=float(TIMEOUT_S))


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Each stamp kind's simulated site: {node: its lines}."""
    made = {}
    for stamp in SITES:
        result = simulate_dome(site_config(stamp), tmp_path_factory.mktemp(stamp) / "site")
        made[stamp] = {host: path.read_text(encoding="utf-8").splitlines()
                       for host, path in result.logs.items()}
    return made


PROFILE = resolve_dome_profile("dmlite-dome")


def pipeline_records(lines: dict) -> list[dict]:
    """A site's DOME records as a pipeline hands them on, checksum waits included."""
    records: list[dict] = []
    feed_site(Pipeline(records.append, ReassemblySettings(timeout_s=TIMEOUT_S),
                       on_dome_record=records.append), lines)
    return records


def feed_site(pipeline: Pipeline, lines: dict, profile=PROFILE) -> None:
    """A site's lines ({node: its lines}) fed to `pipeline`, a source per node, to the end."""
    for host, node_lines in lines.items():
        src = pipeline.source(host, host=host, profile=profile, tz="UTC", year=2017)
        for line in node_lines:
            src.feed(line)
    pipeline.finish()


def reference(records) -> Summary:
    summary = Summary()
    for record in records:
        summary.write_dome(record)
    return summary


def tallied(records) -> Summary:
    """The records through the tally replay wires (Aggregates.on_dome_record), loaded."""
    summary = Summary()
    aggregates = Aggregates(summary, DirectoryStats(), compiled=True)
    on_dome_record = aggregates.on_dome_record(FanOut([]))
    assert on_dome_record is aggregates.dome_tally
    for record in records:
        on_dome_record(record)
    aggregates.close()
    return summary


def series_state(series):
    rng = series._rng.getstate() if series._rng is not None else None
    return (series.count, series.sum, series.max, list(series.values), rng)


def state_of(dome: DomeSummary) -> dict:
    """Everything the DOME section holds, in its dicts' order."""
    return {
        "cover": (dome.first_ms, dome.last_ms),
        "calls": list(dome.calls.items()),
        "call_seconds": [(k, series_state(s)) for k, s in dome.call_seconds.items()],
        "whole_second_calls": dome.whole_second_calls,
        "puts": list(dome.puts.items()),
        "put_to_putdone": series_state(dome.put_to_putdone),
        "put_to_putdone_whole": series_state(dome.put_to_putdone_whole),
        "checksums": list(dome.checksums.items()),
        "checksum_wait": series_state(dome.checksum_wait),
        "checksum_wait_whole": series_state(dome.checksum_wait_whole),
        "capacity": list(dome.capacity.items()),
        "fs_events": list(dome.fs_events.items()),
        "suppressed": list(dome.suppressed.items()),
    }


def assert_same(got: Summary, want: Summary) -> None:
    assert state_of(got.dome) == state_of(want.dome)
    assert (got.first_ms, got.last_ms) == (want.first_ms, want.last_ms)
    assert got.render() == want.render()


@pytest.fixture(scope="module")
def site_records(sites):
    return {stamp: pipeline_records(lines) for stamp, lines in sites.items()}


@pytest.mark.parametrize("stamp", list(SITES))
def test_a_sites_records_give_the_same_dome_summary_from_the_tally(site_records, stamp):
    records = site_records[stamp]
    kinds = {r["kind"] for r in records}
    assert kinds >= {"dome_call", "dome_put", "dome_checksum", "dome_capacity", "dome_fs_event",
                     "dome_journald_gap"}
    want = reference(records)
    # what the site must show for the comparison to mean something
    assert want.dome.whole_second_calls if stamp == "traditional" else want.dome.call_seconds
    assert want.dome.fs_events and want.dome.suppressed and want.dome.checksum_wait_whole.count + want.dome.checksum_wait.count
    assert_same(tallied(records), want)


@pytest.mark.parametrize("stamp", list(SITES))
def test_series_past_the_reservoir_keep_the_same_sample(site_records, stamp, monkeypatch):
    monkeypatch.setattr(summary_module, "RESERVOIR", 40)
    records = site_records[stamp]
    want = reference(records)
    assert any(s.sampled for s in (*want.dome.call_seconds.values(), want.dome.put_to_putdone,
                                   want.dome.put_to_putdone_whole))
    assert_same(tallied(records), want)


def odd_records() -> list[dict]:
    """Records a site rarely or never logs, each by DomeSummary.write's rules."""
    def call(role, command, code, start, end, duration, whole=0):
        return {"kind": "dome_call", "host": "h", "pid": 1, "tid": 2, "role": role, "command": command,
                "http_code": code, "caller": None, "remote_client": None, "start": start, "end": end,
                "duration": duration, "cut": int(end is None), "whole_seconds": whole}
    return [
        call(None, "dome_put", 201, 5_000, 5_300, 300),
        call("", "dome_x", 199, 4_000, None, None),          # no role, unknown command, cut
        call("disk", None, 600, 4_500, 4_700, 200),
        call("head", "dome_get", -1, 6_000, 6_001, 1, whole=1),
        call("head", "dome_get", 404, 6_000, 6_100, 100),
        {"kind": "dome_put", "head": "h", "put_time": 3_000, "ended": 9_000, "status": "failed",
         "end_reason": "line", "put_to_putdone": None, "whole_seconds": 0},
        {"kind": "dome_checksum", "head": "h", "start": 1_000, "end": 2_000, "wait": 1_000,
         "outcome": "done", "overlap": 1, "whole_seconds": 0},   # overlapping: not timed
        {"kind": "dome_checksum", "head": "h", "start": 1_000, "end": 3_000, "wait": 2_000,
         "outcome": "timeout", "overlap": 0, "whole_seconds": 1},
        {"kind": "dome_capacity", "time": 7_000, "host": "d1", "fs": "/a", "phys": 10, "free": 3},
        {"kind": "dome_capacity", "time": 7_500, "host": "d2", "fs": 7, "phys": 0, "free": 0},
        {"kind": "dome_capacity", "time": 8_000, "host": "d1", "fs": "/a", "phys": 20, "free": 5},
        {"kind": "dome_fs_event", "time": 500, "host": "h", "server": "s", "fs": "/a", "event": "disabled",
         "transition": 0},   # the state it had: no change counted
        {"kind": "dome_fs_event", "time": 600, "host": "h", "server": None, "fs": None, "event": "enabled",
         "transition": 1},
        {"kind": "dome_journald_gap", "time": 9_500, "host": "h", "program": "dome", "lines": 0},
        {"kind": "dome_something_new", "time": 1},   # a kind the summary does not read
    ]


def test_rare_shapes_of_records_are_tallied_as_the_reference_sums_them():
    records = odd_records()
    assert_same(tallied(records), reference(records))


def test_a_record_missing_a_field_the_summary_reads_is_an_error_not_a_silent_skip():
    record = odd_records()[0]
    del record["http_code"]
    tally = Aggregates(Summary(), DirectoryStats(), compiled=True).dome_tally
    with pytest.raises(KeyError):
        tally(record)
    with pytest.raises(TypeError):
        tally({**odd_records()[0], "role": 3})


def test_records_forwarded_after_the_tally_are_the_same_dicts(site_records):
    records = site_records["traditional"][:500]
    seen: list[dict] = []

    class Collect:
        def write(self, record):
            seen.append(record)

        def close(self):
            pass

    summary = Summary()
    aggregates = Aggregates(summary, DirectoryStats(), compiled=True)
    on_dome_record = aggregates.on_dome_record(FanOut([Collect()]))
    for record in records:
        on_dome_record(record)
    aggregates.close()
    assert seen == records and all(a is b for a, b in zip(seen, records))
    assert_same(summary, reference(records))


@pytest.mark.skipif(not engines.compiled_dome_available(), reason="compiled DOME engine not built")
@pytest.mark.parametrize("stamp", list(SITES))
def test_the_engines_records_handed_over_undicted_are_tallied_as_their_dicts(sites, stamp):
    """The compiled DOME engine with the tally as its receiver returns no dicts: its own
    values are tallied. The checksum stage's records still come as dicts (from the engine
    run beside it that returns dicts), into the same tally."""
    def engine():
        return engines.new_dome_reassembler(engines.COMPILED, timeout_ms=TIMEOUT_S * 1000)

    def events():
        streams = []
        for node_lines in sites[stamp].values():
            parser = engines.new_dome_parser(engines.COMPILED, PROFILE, EventClock("UTC", year=2017))
            streams.append([ev for ev in map(parser.parse, node_lines) if ev is not None])
        return merge_by_time(streams)

    dicts = engine()
    engine_records = [r for ev in events() for r in dicts.feed(ev)] + dicts.finish()
    called = engine()   # a receiver that is no tally: the same records, as their dicts
    called.receiver = (handed_dicts := []).append
    assert [r for ev in events() for r in called.feed(ev)] + called.finish() == []
    assert handed_dicts == engine_records
    waits = ChecksumWaits()
    checksums = [r for r in with_checksums(engine_records, waits) + waits.finish()
                 if r["kind"] == "dome_checksum"]
    assert engine_records and checksums

    summary = Summary()
    aggregates = Aggregates(summary, DirectoryStats(), compiled=True)
    undicted = engine()
    undicted.receiver = aggregates.dome_tally
    returned = [r for ev in events() for r in undicted.feed(ev)] + undicted.finish()
    for record in checksums:
        aggregates.dome_tally(record)
    handed = aggregates.dome_tally.engine_records
    aggregates.close()
    assert returned == [] and handed == len(engine_records)
    assert_same(summary, reference(engine_records + checksums))
