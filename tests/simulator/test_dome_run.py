"""simulator/dome_*.py: a simulated DOME site (head + disk nodes) and its truth: deterministic
by seed, and self-consistent: puts before their putdones, the PFN naming the put's second
and the head's PUTCOUNT (from 1 again after a restart), one call at a time per thread,
whole-second times under the traditional stamp, a disk node down disabling its
filesystems, journald's gap counted, puts without putdone `incomplete` after the timeout."""

from __future__ import annotations

import csv
import random
import re
from collections import defaultdict

import pytest

from dpmstream.simulator.dome_config import CAPACITY_INTERVAL_S, DomeConfig
from dpmstream.simulator.dome_model import Site
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.simulator.dome_truth import EPOCH_SLACK_S
from dpmstream.simulator.dome_writer import Stamper
from tests.helpers import dpmstream_in_process

# The default site, shortened: disk node 1 down 60-160 s, journald's gap 200-204 s on the
# head, the head restarting at 260 s.
SITE = dict(duration=330.0, rate=2.0, disk_down_at=60.0, disk_down_s=100.0, gap_at=200.0,
            gap_s=4.0, restart_at=260.0, timeout=45.0)


@pytest.fixture(scope="module")
def traditional(tmp_path_factory):
    return simulate_dome(DomeConfig(envelope="messages", **SITE), tmp_path_factory.mktemp("t") / "site")


@pytest.fixture(scope="module")
def precise(tmp_path_factory):
    return simulate_dome(DomeConfig(envelope="dmlite-log", stamp="rfc3339", **SITE),
                         tmp_path_factory.mktemp("p") / "site")


def _csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_a_run_is_a_function_of_its_seed(tmp_path, traditional):
    again = simulate_dome(DomeConfig(envelope="messages", **SITE), tmp_path / "again")
    for host, path in traditional.logs.items():
        assert again.logs[host].read_bytes() == path.read_bytes()
    for name, path in traditional.paths.items():
        assert again.paths[name].read_bytes() == path.read_bytes()
    other = simulate_dome(DomeConfig(envelope="messages", seed=2, **SITE), tmp_path / "other")
    assert other.logs["dpmhead01"].read_bytes() != traditional.logs["dpmhead01"].read_bytes()


def test_every_joined_put_has_its_putdones_after_it_and_a_pfn_naming_its_second(traditional):
    joined = [p for p in traditional.truth.puts if p["pfn"] is not None]
    assert len(joined) > 300
    for p in joined:
        assert p["put_time"] <= (p["putdone_disk_time"] or p["putdone_head_time"])
        if p["putdone_disk_time"] is not None and p["putdone_head_time"] is not None:
            assert p["putdone_disk_time"] <= p["putdone_head_time"]
        assert p["put_to_putdone"] == (p["putdone_head_time"] or p["putdone_disk_time"]) - p["put_time"] >= 0
        fs, base, count, epoch = re.fullmatch(r"(/srv/dpm/\d\d)/\w+/\d{4}-\d\d-\d\d/(.+)\.(\d+)\.(\d+)", p["pfn"]).groups()
        assert (fs, base) == (p["fs"], p["lfn"].rsplit("/", 1)[1])
        assert 0 <= int(epoch) - p["put_time"] // 1000 <= EPOCH_SLACK_S  # dome_put takes ms here
        assert (p["status"], p["end_reason"], p["ended"]) in (
            ("success", "line", p["put_time"] + p["put_to_putdone"]),
            ("failed", "line", p["put_time"] + p["put_to_putdone"]))
        assert (p["status"] == "success") == (p["putdone_code"] in (200, None))


def test_the_head_restart_sets_putcount_back_to_zero(traditional):
    site = traditional.site
    old, new = site.head.lives
    assert old.pid != new.pid and traditional.summary["pids"]["dpmhead01"] == [old.pid, new.pid]
    by_life = defaultdict(list)
    for put in site.puts:
        if put.pfn is not None:
            by_life[put.call.life.pid].append(int(put.pfn.rsplit(".", 2)[1]))
    # the counter is incremented before it is read: a process's first PFN has 1
    assert by_life[old.pid] == list(range(1, len(by_life[old.pid]) + 1))
    assert by_life[new.pid] == list(range(1, len(by_life[new.pid]) + 1)) and by_life[new.pid]
    assert any(c["cut"] for c in traditional.truth.calls if c["pid"] == old.pid)


def test_one_call_at_a_time_per_thread_and_cut_calls_have_no_end(traditional):
    spans = defaultdict(list)
    for c in traditional.truth.calls:
        spans[(c["host"], c["pid"], c["tid"])].append(c)
        if c["cut"]:
            assert c["end"] is None and c["http_code"] is None and c["duration"] is None
        else:
            assert c["duration"] == c["end"] - c["start"] >= 0
    for calls in spans.values():
        # (whole seconds: calls of one second on a thread tie on start; the earlier ended first)
        calls.sort(key=lambda c: (c["start"], float("inf") if c["end"] is None else c["end"]))
        for a, b in zip(calls, calls[1:]):
            assert a["end"] is None or a["end"] <= b["start"]
    cut = [c for c in traditional.truth.calls if c["cut"]]
    assert cut and traditional.summary["cut_calls"] == len(cut)


def test_traditional_stamps_give_whole_second_times_and_rfc3339_ones_milliseconds(traditional, precise):
    def times(result):
        calls = result.truth.calls
        return [t for c in calls for t in (c["start"], c["end"]) if t is not None] + \
               [p[k] for p in result.truth.puts for k in ("put_time", "putdone_disk_time", "putdone_head_time")
                if p[k] is not None]
    assert all(t % 1000 == 0 for t in times(traditional))
    assert {c["duration"] for c in traditional.truth.calls if not c["cut"]} <= {0, 1000}
    assert sum(t % 1000 != 0 for t in times(precise)) > 0.9 * len(times(precise))
    # the same model underneath: the same puts, only the stamps differ
    assert sorted(p["lfn"] for p in precise.truth.puts) == sorted(p["lfn"] for p in traditional.truth.puts)


def test_a_disk_node_down_disables_its_filesystems_until_it_answers_again(traditional):
    site, events = traditional.site, traditional.truth.fs_events
    disk = site.disks[0]
    assert [life.pid for life in disk.lives] == traditional.summary["pids"]["dpmdisk01"] and len(disk.lives) == 2
    mine = [e for e in events if e["server"] == disk.fqdn]
    assert {e["fs"] for e in mine} == set(disk.filesystems)
    transitions = [(e["fs"], e["event"]) for e in mine if e["transition"]]
    assert sorted(transitions) == sorted([(fs, ev) for fs in disk.filesystems for ev in ("disabled", "enabled")])
    off = min(e["time"] for e in mine if e["event"] == "disabled")
    on = max(e["time"] for e in mine if e["event"] == "enabled")
    assert disk.lives[0].end <= off < on and on >= disk.lives[1].begin
    assert not [p for p in traditional.truth.puts if p["server"] == disk.fqdn and off < p["put_time"] < on]
    down = [c for c in traditional.truth.capacity if c["host"] == disk.host
            and disk.lives[0].end <= c["time"] < disk.lives[1].begin]
    assert not down


def test_capacity_lines_come_every_minute_per_filesystem_and_free_space_only_shrinks(traditional):
    series = defaultdict(list)
    for row in traditional.truth.capacity:
        series[(row["host"], row["fs"])].append(row)
    assert len(series) == 3 * 2
    for rows in series.values():
        for a, b in zip(rows, rows[1:]):
            # a multiple of the interval, to the second the stamps are good for
            off = (b["time"] - a["time"]) % (CAPACITY_INTERVAL_S * 1000)
            assert min(off, CAPACITY_INTERVAL_S * 1000 - off) <= 1000
            assert b["free"] <= a["free"] and a["phys"] == b["phys"]


def test_journalds_gap_is_counted_and_announced_and_no_line_of_it_is_written(traditional):
    summary, site = traditional.summary, traditional.site
    dropped = summary["journald_dropped"]
    assert dropped > 0 and summary["lost_lines"]["dpmhead01:gap"] == dropped
    text = traditional.logs["dpmhead01"].read_text()
    assert f"systemd-journald[412]: Suppressed {dropped} messages from /system.slice/dome.service" in text
    a, b = site.gap
    assert not [ln for ln in site.lines if ln.kept and ln.node is site.head and a <= ln.t < b]


def test_puts_without_a_putdone_are_incomplete_by_the_timeout_or_the_end_of_input(traditional):
    puts, timeout = traditional.truth.puts, 45_000
    head_end = max(ln.t for ln in traditional.site.lines if ln.kept and ln.node is traditional.site.head)
    ends = {(p["status"], p["end_reason"]) for p in puts}
    assert ends == {("success", "line"), ("failed", "line"), ("incomplete", "timeout"), ("incomplete", "input_end")}
    refused = [p for p in puts if p["put_code"] not in (200, None)]
    assert refused and all(p["status"] == "failed" and p["putdone_code"] is None for p in refused)
    assert [p for p in puts if p["putdone_code"] not in (200, None) and p["status"] == "failed"]
    for p in puts:
        if p["status"] == "incomplete":
            assert p["putdone_head_time"] is None and p["putdone_disk_time"] is None
            assert p["put_time"] <= p["ended"] <= p["put_time"] + 1000
            assert (p["put_time"] + timeout <= head_end - head_end % 1000) == (p["end_reason"] == "timeout")


def test_checksums_are_polled_with_202_until_done(traditional):
    calls = traditional.truth.calls
    polls = [c for c in calls if c["command"] == "dome_chksum"]
    assert {c["http_code"] for c in polls} >= {202, 200}
    assert {c["http_code"] for c in calls if c["command"] == "dome_dochksum"} <= {202, None}
    assert all(c["role"] == "disk" for c in calls if c["command"] == "dome_dochksum")


def test_each_checksum_wait_of_the_truth_is_its_frontends_polls_from_the_first_202_to_the_answer(traditional):
    """Per wait, from the model: its polls 5 s apart on the head, 202 but the last; the
    truth's row starts at the first and ends at the last, `done`/`failed` by the answer,
    `timeout` for a frontend that gave up; waits of one key polled at once are marked."""
    truth, site = traditional.truth, traditional.site
    assert len(truth.checksums) > 50
    for wait in site.checksums:
        starts = [c.start for c in wait.polls]
        assert all(b - a in (5_000, 10_000) for a, b in zip(starts, starts[1:]))   # one lost in the restart
        assert all(c.code == 202 for c in wait.polls[:-1]) and all(c.node is site.head for c in wait.polls)
    outcomes = {r["outcome"] for r in truth.checksums}
    assert outcomes >= {"done", "timeout"}
    for r in truth.checksums:
        assert r["start"] % 1000 == r["end"] % 1000 == 0 and r["wait"] == r["end"] - r["start"] >= 0
        assert (r["outcome"] in ("done", "failed")) == (r["endings"] == 1) == (r["http_code"] is not None)
        assert r["polls"] >= 1 and r["whole_seconds"] == 1
    assert len(_csv(traditional.paths["checksums"])) == len(truth.checksums)


def test_a_checksum_wait_under_whole_second_stamps_is_good_to_a_second(traditional, precise):
    """The wait between whole-second stamps against the model's true instants: within a
    second (the record says whole_seconds 1); under RFC 3339 stamps, to the millisecond."""
    for result, slack in ((traditional, 1000), (precise, 0)):
        rows = {(r["caller"], r["remote_client"], r["start"]): r for r in result.truth.checksums}
        compared = 0
        for wait in result.site.checksums:
            if not wait.polls or not all(ln.kept for c in wait.polls for ln in c.lines):
                continue
            true_start, true_end = wait.polls[0].start, wait.polls[-1].end
            shown = true_start - true_start % 1000 if slack else true_start
            row = rows.get((wait.frontend.fqdn, wait.user[1], shown))
            if row is None or row["overlap"]:
                continue
            assert abs(row["wait"] - (true_end - true_start)) < max(slack, 1), row
            compared += 1
        assert compared > 50


def test_a_client_polling_two_files_at_once_is_marked_overlap_in_the_truth(tmp_path):
    one_client = simulate_dome(DomeConfig(duration=900.0, rate=0.1, disks=1, clients=1, chksum_pair_rate=0.5,
                                          disk_down_at=None, restart_at=None, gap_at=None), tmp_path / "one")
    waits = one_client.truth.checksums
    at_once = [(a, b) for a, b in zip(waits, waits[1:]) if b["start"] < a["end"]]
    assert at_once and all(a["overlap"] == b["overlap"] == 1 for a, b in at_once)
    alone = [w for i, w in enumerate(waits) if all(o["end"] < w["start"] or w["end"] < o["start"]
                                                   for o in waits[:i] + waits[i + 1:])]
    assert alone and all(w["overlap"] == 0 for w in alone)


def test_the_truth_files_hold_the_records(traditional):
    assert len(_csv(traditional.paths["calls"])) == len(traditional.truth.calls)
    rows = _csv(traditional.paths["puts"])
    assert len(rows) == len(traditional.truth.puts)
    assert rows[0].keys() >= {"put_time", "putdone_disk_time", "putdone_head_time", "status", "server", "fs"}


def test_the_command_line_writes_a_dome_site_and_refuses_options_of_the_other_simulator(tmp_path):
    def run(*args):
        # The command's own function in this process (what it writes, says and returns).
        return dpmstream_in_process("simulate", "--out", str(tmp_path / "s"), *args, text=True)
    ok = run("--dome", "--duration", "60", "--envelope", "journal", "--disks", "2", "--quiet")
    assert ok.returncode == 0, ok.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "s.calls.csv", "s.capacity.csv", "s.checksums.csv", "s.dpmdisk01.log", "s.dpmdisk02.log", "s.dpmhead01.log",
        "s.fs_events.csv", "s.puts.csv", "s.summary.json"]
    for args, message in ((["--dome", "--sthreads", "3"], "--sthreads: not an option of a DOME site"),
                          (["--disks", "2"], "--disks: not an option of the DPM head node"),
                          (["--dome", "--envelope", "syslog"], "--envelope 'syslog': expected one of"),
                          (["--dome", "--clients", "300"], "--clients must be between 1 and 240")):
        bad = run(*args)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_puts_sharing_a_join_key_are_told_apart_by_the_count_of_selected_lines(tmp_path):
    """(server, fs, basename) and the PFN's EPOCH within a second of `Selected fs` can match
    several puts (a common file name written twice in a second); the head's PUTCOUNT is
    the rank of the put's `Selected fs` line in its process, so the putdone's PFN names
    exactly one of them."""
    busy = simulate_dome(DomeConfig(rate=8.0, duration=150.0, disk_down_at=None, restart_at=None,
                                    gap_at=None), tmp_path / "busy")
    selected = [ln for ln in busy.written["dpmhead01"] if ln is not None and ln.role == "put_selected"]
    rank = {id(ln): i for i, ln in enumerate(selected, 1)}
    joined = [p for p in busy.site.puts if p.pfn is not None]
    assert all(int(p.pfn.rsplit(".", 2)[1]) == rank[id(p.selected)] for p in joined)

    def key(p):
        return p.server, p.fs, p.lfn.rsplit("/", 1)[1]
    sharing: dict = {}      # the puts of each key: each put is compared with its key's only
    for q in joined:
        sharing.setdefault(key(q), []).append(q)
    ambiguous = [p for p in joined if sum(
        1 for q in sharing[key(p)]
        if 0 <= int(p.pfn.rsplit(".", 1)[1]) - busy.truth.shows(q.selected.t) // 1000 <= EPOCH_SLACK_S) > 1]
    assert ambiguous


def test_kafka_envelopes_carry_dmlite_log_lines_with_their_byte_offsets(tmp_path):
    from dpmstream.streams.kafka.envelope import decode

    result = simulate_dome(DomeConfig(envelope="kafka", duration=60.0, disk_down_at=None, restart_at=None,
                                      gap_at=None), tmp_path / "k")
    for host, path in result.logs.items():
        offset = 0
        for raw in path.read_bytes().splitlines():
            env = decode(raw)
            assert (env.host, env.path, env.offset) == (host, "/var/log/dmlite/dmlite.log", offset)
            assert env.received_ms is not None and " dmlite " in env.line
            offset += len(env.line.encode("utf-8")) + 1
        assert offset > 0


def test_without_thread_ids_the_truth_has_no_calls_and_no_codes(tmp_path):
    """dmlite < 0.8.4: a process's threads interleave with nothing to tell them apart."""
    old = simulate_dome(DomeConfig(generation="notid", **SITE), tmp_path / "old")
    assert old.truth.calls == [] and old.summary["calls"] == 0
    puts = old.truth.puts
    assert puts and all(p["put_code"] is None and p["putdone_code"] is None for p in puts)
    failed = [p for p in puts if p["status"] == "failed"]
    # only the head's putdone error line, which names the PFN, tells a failure
    assert failed and all(p["pfn"] is not None for p in failed)
    assert {p["status"] for p in puts} == {"success", "failed", "incomplete"}


def test_each_log_is_dated_by_its_last_line_like_a_live_file(traditional):
    """Traditional stamps have no year: a reader takes it from the file's mtime."""
    for host, path in traditional.logs.items():
        last = max(ln.t for ln in traditional.written[host] if ln is not None)
        assert path.stat().st_mtime_ns == last * 1_000_000


def test_skipping_tid_draws_leaves_the_generator_where_making_them_would():
    """_assign_threads draws a pool of TIDs per call and keeps it for a process's first
    call only; skipping the dropped draws must not move the TIDs of later pools."""
    drawn, skipped = Site(DomeConfig()), Site(DomeConfig())
    for _ in range(500):
        drawn._tid()
    skipped._skip_tids(500)
    assert [skipped._tid() for _ in range(20)] == [drawn._tid() for _ in range(20)]


@pytest.mark.parametrize("style, before, after", [
    ("traditional", r"Oct 29 02:59:59", r"Oct 29 02:00:00"),
    ("rfc3339", r"2017-10-29T02:59:59\.999\d{3}\+02:00", r"2017-10-29T02:00:00\.000\d{3}\+01:00"),
    ("journal", r"2017-10-29T02:59:59\.999\d{3}\+0200", r"2017-10-29T02:00:00\.000\d{3}\+0100"),
])
def test_stamps_follow_the_zone_offset_across_the_autumn_clock_change(style, before, after):
    """A node's stamps are made once per second: the second after the change has the new
    offset (and the hour again), the one before it the old."""
    stamp = Stamper(style, "Europe/Zurich", random.Random(1))
    change = 1509238800000    # 2017-10-29 01:00:00 UTC: Zurich goes from +02:00 to +01:00
    got = [stamp(change - 1), stamp(change - 1), stamp(change), stamp(change + 1000)]
    assert [bool(re.fullmatch(want, s)) for want, s in zip((before, before, after), got)] == [True] * 3
    assert re.fullmatch(after.replace("02:00:00", "02:00:01"), got[3])
