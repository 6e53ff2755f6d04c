"""The checksum waits (parsers/dome_checksums.py) against the DOME simulator's truth,
PREFIX.checksums.csv, at a site's size: thousands of puts, several seeds, both stamp
styles, frontends that give up, answers lost in journald's gap or a head restart, and
clients polling two files at once.

Each node's log is read as tests/scenarios/test_dome_truth.py does, into a DOME
reassembler wrapped by WithChecksumWaits (the hook a driver uses), fed event by event,
time advanced every 500 events on two of the sites. The truth lists every wait the model made, one per
file; the stage sees (head, caller, remote client) only, so:

- a wait alone on its key (no other wait of the key within the timeout of its span) is
  exactly one record, every column equal;
- a record not flagged `overlap` is exactly one such wait of the truth, or (the rule's
  known limit) joins a wait whose frontend gave up to the key's next wait begun within
  the timeout;
- a record flagged `overlap` spans at least two waits of its key, and every wait the
  truth marks `overlap` (polled at once with another) lies inside one.
"""

import pytest

from dpmstream.parsers.dome_checksums import TIMEOUT_MS, WithChecksumWaits
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import DomeReassembler, merge_by_time
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome

from tests.scenarios.test_dome_truth import as_cells, node_events, truth_rows

INTS = ("start", "end")


def key(row) -> tuple:
    return (row["head"], row["caller"], row["remote_client"])


def span(row) -> tuple[int, int]:
    return int(row["start"]), int(row["end"])


def alone(row, rows_of_key) -> bool:
    start, end = span(row)
    return not any(other is not row and span(other)[0] <= end + TIMEOUT_MS and start <= span(other)[1] + TIMEOUT_MS
                   for other in rows_of_key)


def inside(row, record) -> bool:
    return span(record)[0] <= span(row)[0] and span(row)[1] <= span(record)[1]


def waits_of(result, cfg, advance_every=None):
    profile = resolve_dome_profile("dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid")
    dome = WithChecksumWaits(DomeReassembler(timeout_ms=int(cfg.timeout * 1000)))
    out = []
    for n, ev in enumerate(merge_by_time([node_events(path, cfg, profile) for path in result.logs.values()]), 1):
        out += dome.feed(ev)
        if advance_every and n % advance_every == 0:
            out += dome.advance(ev.ts)    # every node's log is in time order: all are past it
    out += dome.finish()
    return dome.waits, [r for r in out if r["kind"] == "dome_checksum"]


SITES = [
    # seed, stamp, clients: 12 clients on 4 frontends make many keys busy; 200 leave most waits alone
    (1, "traditional", 12), (2, "rfc3339", 12), (3, "traditional", 200), (4, "rfc3339", 200),
]
# The fast loop (`make check`) runs two sites, each stamp style, client count and way of
# advancing time (odd seeds advance it) once; `make test` runs all four (the rest are
# marked slow: a site each).
FAST_LOOP = {(1, "traditional", 12), (4, "rfc3339", 200)}
assert all({(s % 2, st, c)[i] for s, st, c in FAST_LOOP} == {(s % 2, st, c)[i] for s, st, c in SITES}
           for i in range(3))


@pytest.mark.parametrize("seed, stamp, clients", [
    pytest.param(*site, id="seed{}-{}-{}clients".format(*site),
                 marks=() if site in FAST_LOOP else pytest.mark.slow) for site in SITES])
def test_the_checksum_waits_of_a_simulated_site_are_those_of_its_truth(tmp_path, seed, stamp, clients):
    """On both stamp styles, with busy keys (12 clients) and mostly lonely waits (200),
    time advanced as a driver does (odd seeds) or only by the events. The fast loop runs
    seed1-traditional-12clients and seed4-rfc3339-200clients."""
    cfg = DomeConfig(seed=seed, stamp=stamp, duration=900.0, rate=4.0, disks=4, clients=clients,
                     accept_lines=stamp == "traditional", disk_down_at=200.0, restart_at=500.0,
                     gap_at=300.0, gap_s=4.0, chksum_give_up_rate=0.05, chksum_pair_rate=0.05)
    result = simulate_dome(cfg, tmp_path / "site")
    stage, records = waits_of(result, cfg, advance_every=500 if seed % 2 else None)
    truth = truth_rows(result.paths["checksums"])
    columns = list(truth[0])
    mine = [as_cells(r, columns) for r in records]
    by_key: dict = {}
    for row in truth:
        by_key.setdefault(key(row), []).append(row)

    lonely = [row for row in truth if alone(row, by_key[key(row)])]
    unmatched = [row for row in lonely if row not in mine]
    assert unmatched == []

    merged_after_give_up = 0
    for record in mine:
        if record["overlap"] == "1":
            assert sum(inside(row, record) for row in by_key[key(record)]) >= 2, record
        elif record not in truth:
            covered = [row for row in by_key[key(record)] if inside(row, record)]
            gave_up = [row for row in covered[:-1] if row["endings"] == "0"]
            assert len(covered) >= 2 and gave_up, record
            merged_after_give_up += 1
    for row in truth:
        if row["overlap"] == "1":
            assert any(r["overlap"] == "1" and key(r) == key(row) and inside(row, r) for r in mine), row

    outcomes = {o: sum(r["outcome"] == o for r in mine) for o in ("done", "failed", "timeout")}
    overlapped = sum(r["overlap"] == "1" for r in truth)
    print(f"seed {seed} {stamp} {clients} clients: {len(truth)} waits in the truth, {len(lonely)} alone "
          f"(all matched), {len(mine)} records {outcomes}, {stage.stats.overlaps} overlap records for "
          f"{overlapped} waits polled at once, {merged_after_give_up} joined after a give-up; "
          f"{stage.stats.as_dict()}")
    assert result.summary["puts"] > 2500 and len(lonely) >= (700 if clients > 100 else 80)
    assert all(n > 0 for n in outcomes.values())
    assert overlapped > 0 and stage.stats.overlaps > 0
    assert {r["whole_seconds"] for r in records} == {int(cfg.whole_seconds)}
    assert stage.stats.evictions == 0


def test_without_thread_ids_there_are_no_calls_and_so_no_checksum_waits(tmp_path):
    cfg = DomeConfig(generation="notid", duration=300.0, rate=4.0)
    result = simulate_dome(cfg, tmp_path / "site")
    stage, records = waits_of(result, cfg)
    assert truth_rows(result.paths["checksums"]) == [] and records == []
