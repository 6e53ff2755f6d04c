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

from tests.scenarios.test_dome_truth import SITE, SMALL_SITE, as_cells, node_events, truth_rows

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
# The sites of test_dome_truth.py: a site's size (`make test`, every site of SITES: each a
# 900 s site) and a smaller one with the same events for the fast loop (`make check`),
# each with the counts it must reach: puts, and waits alone on their key with 12 clients
# and with 200.
SITE_AT_LEAST = {"puts": 2500, "alone": {12: 80, 200: 700}}
SMALL_SITE_AT_LEAST = {"puts": 1400, "alone": {12: 15, 200: 250}}
# The fast loop's sites: each stamp style, client count and way of advancing time (odd
# seeds advance it) once.
SMALL_LOOP = [(1, "traditional", 12), (4, "rfc3339", 200)]
assert all({(s % 2, st, c)[i] for s, st, c in SMALL_LOOP} == {(s % 2, st, c)[i] for s, st, c in SITES}
           for i in range(3))


def site_config(size: dict, seed: int, stamp: str, clients: int) -> DomeConfig:
    return DomeConfig(seed=seed, stamp=stamp, clients=clients, accept_lines=stamp == "traditional",
                      chksum_give_up_rate=0.05, chksum_pair_rate=0.05, **size)


@pytest.mark.slow   # a 900 s site each; the fast loop runs the small sibling below
@pytest.mark.parametrize("seed, stamp, clients", SITES, ids=[f"seed{s}-{st}-{c}clients" for s, st, c in SITES])
def test_the_checksum_waits_of_a_simulated_site_are_those_of_its_truth(tmp_path, seed, stamp, clients):
    """On both stamp styles, with busy keys (12 clients) and mostly lonely waits (200),
    time advanced as a driver does (odd seeds) or only by the events, at a site's size.
    Its fast-loop sibling: test_the_checksum_waits_of_a_small_simulated_site_are_those_of_its_truth."""
    cfg = site_config(SITE, seed, stamp, clients)
    assert_the_waits_are_the_truths(simulate_dome(cfg, tmp_path / "site"), cfg, SITE_AT_LEAST)


@pytest.mark.parametrize("seed, stamp, clients", SMALL_LOOP, ids=[f"seed{s}-{st}-{c}clients" for s, st, c in SMALL_LOOP])
def test_the_checksum_waits_of_a_small_simulated_site_are_those_of_its_truth(tmp_path, seed, stamp, clients):
    """The fast loop's sibling of the test above: the same checks on a cover of its sites
    (SMALL_LOOP), each a 400 s site with the same events."""
    cfg = site_config(SMALL_SITE, seed, stamp, clients)
    assert_the_waits_are_the_truths(simulate_dome(cfg, tmp_path / "site"), cfg, SMALL_SITE_AT_LEAST)


def assert_the_waits_are_the_truths(result, cfg: DomeConfig, at_least: dict) -> None:
    seed, stamp, clients = cfg.seed, cfg.stamp, cfg.clients
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
    assert result.summary["puts"] > at_least["puts"] and len(lonely) >= at_least["alone"][clients]
    assert all(n > 0 for n in outcomes.values())
    assert overlapped > 0 and stage.stats.overlaps > 0
    assert {r["whole_seconds"] for r in records} == {int(cfg.whole_seconds)}
    assert stage.stats.evictions == 0


def test_without_thread_ids_there_are_no_calls_and_so_no_checksum_waits(tmp_path):
    cfg = DomeConfig(generation="notid", duration=300.0, rate=4.0)
    result = simulate_dome(cfg, tmp_path / "site")
    stage, records = waits_of(result, cfg)
    assert truth_rows(result.paths["checksums"]) == [] and records == []
