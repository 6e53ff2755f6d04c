"""parsers/pipeline.py with DOME sources (docs/dome.md section 6): the state a pipeline
hands out for a restart (StateChanges.dome) is its own, and a pipeline restored from it
goes on as one that never stopped."""

from __future__ import annotations

import json

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams import state_keys
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome


def site(tmp_path, **settings):
    cfg = DomeConfig(duration=120.0, rate=4.0, disks=2, tz="UTC", **settings)
    result = simulate_dome(cfg, tmp_path / "site")
    return {host: path.read_text(encoding="utf-8").splitlines() for host, path in result.logs.items()}


def new_pipeline(records: list) -> Pipeline:
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=120), on_dome_record=records.append)
    pipeline.track_changes()
    return pipeline


# Resolved once: resolving reads and compiles every bundled profile file, which per round
# of lines was nearly all of this module's time.
PROFILE = resolve_dome_profile("dmlite-dome")


def feed_round(pipeline: Pipeline, lines: dict, i: int) -> None:
    """The i-th line of every node (the nodes side by side)."""
    for host, node_lines in lines.items():
        if i < len(node_lines):
            pipeline.source(host, host=host, profile=PROFILE, tz="UTC", year=2017).feed(node_lines[i])


def test_the_dome_state_taken_does_not_change_with_the_lines_read_after_it(tmp_path):
    lines = site(tmp_path, disk_down_at=None, restart_at=None, gap_at=None)
    records: list[dict] = []
    pipeline = new_pipeline(records)
    taken = []
    for i in range(max(len(v) for v in lines.values())):
        feed_round(pipeline, lines, i)
        if i % 50 == 0:
            dome = pipeline.take_changes().dome
            if dome is not None:
                taken.append((json.dumps(dome, sort_keys=True), dome))
    pipeline.finish()
    assert len(taken) > 20 and any(r["kind"] == "dome_put" for r in records)
    changed = [n for n, (text, state) in enumerate(taken) if json.dumps(state, sort_keys=True) != text]
    assert changed == []


def test_a_pipeline_restored_from_its_stored_dome_state_gives_the_same_records(tmp_path):
    """Stopped every 300 rounds of lines, its state stored as the run state file keeps it
    (state_keys, JSON) and a new pipeline restored from it: the records of one that never
    stopped, in the same order (a disk node down and back, the head restarting)."""
    lines = site(tmp_path, disk_down_at=30.0, disk_down_s=30.0, restart_at=70.0, gap_at=None)
    rounds = max(len(v) for v in lines.values())
    straight: list[dict] = []
    pipeline = new_pipeline(straight)
    for i in range(rounds):
        feed_round(pipeline, lines, i)
    pipeline.finish()

    records: list[dict] = []
    pipeline, store = new_pipeline(records), {}
    for i in range(rounds):
        feed_round(pipeline, lines, i)
        if i % 300 == 299:
            store.update(json.loads(json.dumps(state_keys.encode(pipeline.take_changes()))))
            pipeline = new_pipeline(records)
            pipeline.restore(state_keys.decode(store))
    pipeline.finish()
    assert len(straight) > 1000 and sum(r["kind"] == "dome_put" for r in straight) > 200
    assert records == straight
