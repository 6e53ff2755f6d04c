"""simulator/calibrate.py: the model's settings read back from a log's records."""

from __future__ import annotations

import random
import statistics

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.simulator.calibrate import calibrate
from dpmstream.simulator.fits import closed_loop, directory_locks, lock_fit, lock_holds


def records_of(*paths) -> tuple[list[dict], list[dict]]:
    """(request records, call records) of the logs, read one after the other."""
    from dpmstream.parsers.pipeline import Pipeline

    records = []
    pipeline = Pipeline(records.append)
    for path in paths:
        src = pipeline.source(str(path), host="head01", path=str(path), year=2011)
        src.feed_lines(path.read_bytes().splitlines())
    pipeline.finish()
    return ([r for r in records if r["kind"] == "request"],
            [r for r in records if r["kind"] == "call"])


def test_calibration_finds_one_directory_and_a_closed_loop_in_the_same_dir_thesis_log(tmp_path):
    log = simulate(SimConfig(requests=600, seed=7, same_dir=True), tmp_path / "log")
    requests, calls = records_of(log.log_path, log.dpns_log_path)
    cal = calibrate(requests, calls)
    assert cal.load == "closed" and cal.lock_contention
    assert cal.config.dirs is None and len(cal.config.dir_shares) == 1
    assert cal.directories == ["/dpm/cern.ch/home/dteam/perf/shared"]
    assert cal.config.sthreads == 20 and cal.config.clients == 3
    assert cal.config.concurrency == 25
    assert (cal.config.poll_first_ms, cal.config.poll_factor) == (125, 2.0)
    hold, _ = lock_fit([(c["started"], c["ended"]) for c in calls if c["op"] == "creat"])
    assert 30 <= statistics.median(hold) <= 40            # the model's 35 ms
    dispersion, streams, _ = closed_loop(requests)
    assert dispersion < 0.1 and streams == cal.config.concurrency


def test_a_lock_hold_is_its_end_less_the_later_of_its_start_and_the_previous_end():
    # Idle, then a queue: the second waits for the first, the third comes after both.
    creats = [(0, 30), (10, 55), (100, 120)]
    assert lock_holds(creats) == [30, 25, 20]


def test_creates_are_grouped_by_parent_directory_and_each_queue_read_on_its_own():
    # Two directories whose creates overlap: read as one queue they would seem to hold
    # the lock 5 ms; per directory each holds it 30 ms.
    creats = [(0, 30, "/d/a/f1"), (5, 35, "/d/b/f2"), (0, 60, "/d/a/f3"), (5, 65, "/d/b/f4"),
              (200, 230, None)]
    locks, pathless = directory_locks(creats)
    assert pathless == 1
    assert [(lock.name, lock.holds) for lock in locks] == [("/d/a", [30, 30]), ("/d/b", [30, 30])]
    assert lock_holds([(s, e) for s, e, p in creats if p]) == [30, 5, 25, 5]


def test_without_a_dpns_log_the_lock_is_said_not_to_be_calibrated_and_what_is_assumed(tmp_path):
    log = simulate(SimConfig(requests=200, seed=3), tmp_path / "log")
    cal = calibrate(*records_of(log.log_path))
    note = next(w for w in cal.warnings if "lock" in w)
    assert "cannot be calibrated" in note and "assumes no lock" in note
    assert cal.config.dir_shares is None and cal.config.service.dpns_creat.median_ms == 0


def test_the_model_deals_files_to_the_logged_directories_each_holding_its_lock_its_own_time(tmp_path):
    from dpmstream.parsers.linking import directory_of
    from dpmstream.simulator.identities import Namespace
    from dpmstream.simulator.service import Dist, ServiceTimes

    svc = ServiceTimes(dpns_creat_dirs=(Dist(40.0, 0.0), Dist(10.0, 0.0)))
    result = simulate(SimConfig(requests=400, seed=4, dir_shares=(300.0, 100.0), service=svc,
                                put_fail_rate=0.0, auth_fail_rate=0.0), tmp_path / "run")
    by_dir: dict = {}
    for c in result.calls:
        if c["op"] == "creat" and c["ended"] is not None:
            by_dir.setdefault(directory_of(c["path"]), []).append((c["started"], c["ended"]))
    hot, cold = Namespace.weighted_dir(0), Namespace.weighted_dir(1)
    assert set(by_dir) == {hot, cold}
    # Its logged count of creates to each directory, dealt from a bag in random order.
    assert (len(by_dir[hot]), len(by_dir[cold])) == (300, 100)
    first = sorted((start, name) for name, spans in by_dir.items() for start, _ in spans)[:40]
    assert {name for _, name in first} == {hot, cold}
    assert set(lock_holds(by_dir[hot])) == {40} and set(lock_holds(by_dir[cold])) == {10}


def test_thread_pools_never_seen_full_are_taken_at_least_at_the_daemons_defaults(tmp_path):
    log = simulate(SimConfig(requests=300, seed=9, dirs=50), tmp_path / "log")
    requests, calls = records_of(log.log_path, log.dpns_log_path)
    cal = calibrate(requests, calls)
    assert cal.config.fthreads == 20 and cal.config.dpns_threads >= 20
    # The ids of every fast-thread call (status calls included) bound the pool from below.
    cal = calibrate(requests, calls, fast_thread_ids=list(range(34)))
    assert cal.config.fthreads == 34


try:
    from dpmstream.parsers._native import closed_loop_clients
except ImportError:  # not built
    closed_loop_clients = None


@pytest.mark.skipif(closed_loop_clients is None, reason="the compiled extension is not built")
def test_the_compiled_closed_loop_is_the_python_one():
    """native/src/fits.rs against python_closed_loop_clients, the reference, to the float:
    the thesis scenario's closed loop and an open load's Poisson arrivals (the model's
    records), and random records (clients None or named, no accept line, no end, an end
    before the start, one request to a client)."""
    from dpmstream.simulator.fits import python_closed_loop_clients

    cases = [simulate(SimConfig(requests=400, seed=3), None).requests,
             simulate(SimConfig(requests=400, seed=4, rate=40.0, get_fraction=0.3), None).requests]
    rng = random.Random(34)
    for _ in range(100):
        records = []
        for _ in range(rng.randrange(1, 80)):
            start = 1_313_000_000_000 + rng.randrange(0, 20_000)
            records.append({
                "client": rng.choice((None, "lxfsra01.cern.ch", "lxfsra02.cern.ch", "c3")),
                "accepted": rng.choice((None, start - rng.randrange(0, 30))),
                "started": start,
                "ended": rng.choice((None, start + rng.randrange(-20, 3000), start))})
        cases.append(records)
    for records in cases:
        assert closed_loop_clients(records) == python_closed_loop_clients(records)
    # times past 2^53 (native/src/exact_ints.rs) go the Python way
    far = [{"client": "c", "accepted": None, "started": s, "ended": s + 2 ** 60}
           for s in (2 ** 62, 2 ** 62 + 10, 2 ** 62 + 20)]
    with pytest.raises(OverflowError):
        closed_loop_clients(far)
    dispersions, streams, thinks = python_closed_loop_clients(far)
    assert closed_loop(far) == (statistics.median(dispersions), round(statistics.median(streams)),
                                thinks)


try:
    from dpmstream.parsers._native import request_columns as compiled_request_columns
except ImportError:  # not built
    compiled_request_columns = None

COLUMNS = [pytest.param("python", id="python")] + (
    [pytest.param("compiled", id="compiled")] if compiled_request_columns else [])


def columns_of(which, reqs, dpm_calls=()):
    from dpmstream.simulator.fits import python_request_columns

    fn = compiled_request_columns if which == "compiled" else python_request_columns
    return fn(list(reqs), list(dpm_calls))


def request(**fields) -> dict:
    """A put request record with every field calibrate reads, None unless given."""
    names = ("accepted", "ended", "nfiles", "polls", "queue_ms", "proc_ms", "auth_ms",
             "request_ms", "poll_ms", "ready_wait_ms", "done_ms", "transfer_ms", "total_ms",
             "ns_ms", "ns_calls")
    return {**dict.fromkeys(names), "op": "put", "status": "success", "client": "c1",
            "started": 1_000, **fields}


@pytest.mark.parametrize("which", COLUMNS)
def test_request_columns_read_each_value_as_calibrate_takes_it(which):
    """Each rule of fits.request_columns on records made for it, for the reference and the
    compiled pass alike: the arrivals (accept else DP092) and the client hosts by first
    appearance, None and "" taken as "?"; a status call's time per poll rounded half to
    even; the own work of linked runs less 1 ms a call, at least 1; a get's gap; the
    processing runs (a queue of 0: from the put's return) and the fast calls at once."""
    reqs = [
        request(client=None, accepted=990, ended=5_000, polls=2, poll_ms=5, ready_wait_ms=300,
                queue_ms=0, proc_ms=50, request_ms=20, ns_ms=30, ns_calls=2, nfiles=2,
                done_ms=4, auth_ms=10, transfer_ms=900),
        request(client="", started=2_000, polls=4, poll_ms=10, queue_ms=40, proc_ms=100,
                request_ms=30, ns_ms=99, ns_calls=1, status="aborted", done_ms=7, ended=2_500),
        request(op="get", client="c2", started=3_000, status="success", total_ms=1_000,
                auth_ms=5, request_ms=15, ready_wait_ms=200, done_ms=3, polls=41, poll_ms=41),
        request(status="failed", started=4_000, nfiles=0),
    ]
    col = columns_of(which, reqs)
    assert col["arrivals"] == [(990, "put", 0), (2_000, "put", 0), (3_000, "get", 1),
                               (4_000, "put", 2)]
    assert col["hosts"] == ["?", "c2", "c1"] and col["accepted"] is True
    assert col["whole_seconds"] is True
    assert col["per_poll"] == [1, 2, 2]             # 5/2 and 10/4 to even, 41/41; sorted
    assert col["samples"] == [(2, 300)]             # 41 polls: past the fit's 40
    assert col["own_put"] == [1, 18]                # 100-99-1 at least 1; 50-30-2; sorted
    assert col["proc_put"] == [50, 100] and col["own_get"] == col["proc_get"] == []
    assert col["gap"] == [1_000 - 5 - 15 - 200 - 3]
    # the service times sorted (fits.SORTED_COLUMNS), the rest in the records' order
    assert col["done_success"] == [3, 4] and col["done_aborted"] == [7]
    assert col["auth"] == [5, 10] and col["request"] == [15, 20, 30]
    assert col["put_request"] == [20, 30] and col["transfer"] == [900]
    assert (col["ended"], col["gets"], col["failed_early"], col["procs"], col["aborted"],
            col["sync_gets"], col["queued"], col["files"]) == (2, 1, 1, 2, 1, 1, 1, 1)
    # runs: [1020, 1050) from the put's return (queue 0), [2070, 2170): not at once
    assert col["intervals"] == 2 and col["proc_overlap"] == 1
    # fast calls: [990, 1020), [4996, 5000), [2000, 2030), [2493, 2500), [3000, 3015) and
    # the DPM call [2480 - 0, 2600) over the closing one
    assert col["fast_overlap"] == 1
    assert columns_of(which, reqs, [{"started": 2_480, "ended": 2_600, "auth_ms": None}]
                      )["fast_overlap"] == 2
    assert columns_of(which, [request(started=1_001)])["whole_seconds"] is False
    # the arrivals sorted as their tuples sort: by instant, then "get" before "put"
    assert columns_of(which, [request(started=5_000), request(op="get", started=5_000, client="c2"),
                              request(started=4_000)])["arrivals"] == [
        (4_000, "put", 0), (5_000, "get", 1), (5_000, "put", 0)]


@pytest.mark.skipif(compiled_request_columns is None, reason="the compiled extension is not built")
def test_the_compiled_request_columns_are_the_python_ones():
    """native/src/calibrate_columns.rs against python_request_columns, the reference: the
    model's records (a closed loop, an open load with gets and synchronous gets) and random
    records (any field None, any status, linked or not); a value past 2^53 or of another
    type goes the Python way, and calibrate answers the same through it."""
    from dpmstream.simulator.fits import python_request_columns

    def dpm(calls):
        return [c for c in calls if c.get("daemon") == "dpm"]

    cases = []
    for cfg in (SimConfig(requests=400, seed=3),
                SimConfig(requests=400, seed=4, rate=40.0, get_fraction=0.4, sync_get=True)):
        run = simulate(cfg, None)
        cases.append(([r for r in run.requests if r["op"] in ("put", "get")], dpm(run.calls)))
    rng = random.Random(35)

    def maybe(value):
        return rng.choice((None, value))

    for _ in range(200):
        reqs = []
        for _ in range(rng.randrange(1, 40)):
            start = rng.choice((1_313_000_000_000, 2_000)) + rng.randrange(0, 20) * 500
            reqs.append(request(
                op=rng.choice(("put", "get")), client=rng.choice((None, "", "a", "b")),
                status=rng.choice((None, "success", "failed", "aborted", "incomplete")),
                started=start, accepted=maybe(start - rng.randrange(0, 30)),
                ended=maybe(start + rng.randrange(0, 3000)), nfiles=maybe(rng.randrange(0, 3)),
                polls=maybe(rng.randrange(0, 45)), poll_ms=rng.randrange(0, 500),
                queue_ms=maybe(rng.randrange(0, 30)), proc_ms=maybe(rng.randrange(0, 200)),
                auth_ms=maybe(rng.randrange(0, 20)), request_ms=maybe(rng.randrange(0, 40)),
                ready_wait_ms=maybe(rng.randrange(0, 900)), done_ms=maybe(rng.randrange(0, 9)),
                transfer_ms=maybe(rng.randrange(0, 900)), total_ms=maybe(rng.randrange(0, 4000)),
                ns_ms=maybe(rng.randrange(0, 150)), ns_calls=rng.randrange(0, 3)))
        calls = [{"started": maybe(s), "ended": maybe(s + 5), "auth_ms": maybe(2)}
                 for s in rng.sample(range(2_000, 12_000), rng.randrange(0, 5))]
        cases.append((reqs, calls))
    for reqs, calls in cases:
        assert compiled_request_columns(reqs, calls) == python_request_columns(reqs, calls)
    far = [request(started=2 ** 60)]
    with pytest.raises(OverflowError):
        compiled_request_columns(far, [])
    odd = [request(proc_ms=12.5, queue_ms=0, request_ms=3)]
    with pytest.raises(TypeError):
        compiled_request_columns(odd, [])
    from dpmstream.simulator.fits import request_columns

    assert request_columns(far, []) == python_request_columns(far, [])
    assert request_columns(odd, [])["proc_put"] == [12.5]


try:
    from dpmstream.parsers._native import directory_groups as compiled_directory_groups
except ImportError:  # not built
    compiled_directory_groups = None


@pytest.mark.skipif(compiled_directory_groups is None, reason="the compiled extension is not built")
def test_the_compiled_directory_groups_are_the_python_ones():
    """native/src/calibrate_columns.rs directory_groups against python_directory_groups,
    the reference: creates with no path or an empty one, at the root, in a bare name,
    directories tied on their count (then by name), creates ending out of order and
    overlapping; past 2^53 goes the Python way."""
    from dpmstream.simulator.fits import directory_locks, python_directory_groups

    rng = random.Random(37)
    paths = (None, "", "/f", "f", "/a/b/f1", "/a/b/f2", "/a/c/f", "/a/b/", "/é/f", "/b/x")
    for _ in range(300):
        creats = []
        for _ in range(rng.randrange(0, 40)):
            start = rng.randrange(0, 5_000)
            creats.append((start, start + rng.randrange(0, 300), rng.choice(paths)))
        assert compiled_directory_groups(creats) == python_directory_groups(creats)
    groups, pathless = python_directory_groups(
        [(0, 10, "/a/b/f1"), (5, 12, "/a/c/f"), (2, 30, "/a/b/f2"), (1, 3, None), (4, 6, "/r")])
    assert (pathless, [(name, holds) for name, _, holds in groups]) == (
        1, [("/a/b", [10, 20]), ("/", [2]), ("/a/c", [7])])
    far = [(2 ** 60, 2 ** 60 + 5, "/a/f")]
    with pytest.raises(OverflowError):
        compiled_directory_groups(far)
    locks, _ = directory_locks(far)
    assert (locks[0].name, locks[0].holds) == ("/a", [5])


try:
    from dpmstream.parsers._native import call_columns as compiled_call_columns
except ImportError:  # not built
    compiled_call_columns = None

CALL_COLUMNS = [pytest.param("python", id="python")] + (
    [pytest.param("compiled", id="compiled")] if compiled_call_columns else [])


def call(daemon="dpm", op="ping", **fields) -> dict:
    """A call record with every field calibrate reads, None unless given."""
    names = ("started", "ended", "duration_ms", "auth_ms", "client", "thread", "path")
    return {**dict.fromkeys(names), "daemon": daemon, "op": op, **fields}


@pytest.mark.parametrize("which", CALL_COLUMNS)
def test_call_columns_filter_the_records_as_calibrate_takes_them(which):
    """Each rule of fits.call_columns, for the reference and the compiled pass alike: the
    put/get requests with a DP092 (in order, the records themselves); the DPM calls; a
    DPM put/get with a start as an early arrival (its auth before it, a client None or ""
    as "?"); ping/getpools counted, their known durations sorted; the name-server calls
    with a duration: statg durations sorted, creates that ended (path or None), thread
    ids >= 0 counted and the highest + 1 taken on each daemon."""
    from dpmstream.simulator.fits import python_call_columns

    fn = compiled_call_columns if which == "compiled" else python_call_columns
    reqs = [request(), request(op="get", started=None), {"op": "status", "started": 5},
            request(op="get", started=7), {"started": 9}]
    calls = [
        call(op="put", started=100, auth_ms=7, client=None, thread=4),
        call(op="get", started=200, client="", thread=-1),
        call(op="put", started=300, auth_ms=None, client="c9"),
        call(op="put", started=None, thread=9),              # no start: no arrival
        call(op="getpools", duration_ms=9, thread=2), call(op="ping"),
        call(op="ping", duration_ms=3),
        call(daemon="dpns", op="statg", duration_ms=8, thread=3),
        call(daemon="dpns", op="statg", duration_ms=2, thread=-1),
        call(daemon="dpns", op="statg", thread=30),          # no duration: not a dpns call read
        call(daemon="dpns", op="creat", duration_ms=5, started=10, ended=15, path="/a/f",
             thread=0),
        call(daemon="dpns", op="creat", duration_ms=5, started=20, ended=None),
        call(daemon="dpns", op="creat", duration_ms=6, started=30, ended=36),
        call(daemon="srm", op="put", started=400, thread=50),
        {"op": "ping", "started": 1},                        # no daemon
    ]
    col = fn(reqs, calls)
    assert col["reqs"] == [reqs[0], reqs[3]] and col["reqs"][0] is reqs[0]
    assert col["dpm"] == calls[:7] and col["dpm"][0] is calls[0]
    assert col["early"] == [(93, "put", "?"), (200, "get", "?"), (300, "put", "c9")]
    assert (col["plain"], col["plain_ms"]) == (3, [3, 9])
    assert col["statg"] == [2, 8]
    assert col["creates"] == [(10, 15, "/a/f"), (30, 36, None)]
    assert (col["fast_ids"], col["ns_ids"], col["ns_threads"]) == (10, 4, 2)
    empty = fn([], [call(daemon="dpns", op="creat", duration_ms=1, started=1, ended=2)])
    assert (empty["reqs"], empty["dpm"], empty["fast_ids"], empty["ns_ids"]) == ([], [], 0, 0)


@pytest.mark.skipif(compiled_call_columns is None, reason="the compiled extension is not built")
def test_the_compiled_call_columns_are_the_python_ones():
    """native/src/calibrate_columns.rs call_columns against python_call_columns, the
    reference: the model's records and random ones (any daemon, op, field None or
    missing); a float goes the Python way (fits.call_columns falls back to it)."""
    from dpmstream.simulator.fits import call_columns, python_call_columns

    cases = []
    for cfg in (SimConfig(requests=300, seed=5),
                SimConfig(requests=300, seed=6, rate=40.0, get_fraction=0.4, sync_get=True)):
        run = simulate(cfg, None)
        cases.append((run.requests, run.calls))
    rng = random.Random(41)

    def maybe(value):
        return rng.choice((None, value))

    for _ in range(300):
        reqs = [request(op=rng.choice(("put", "get", "status", None)), started=maybe(1_000))
                for _ in range(rng.randrange(0, 6))]
        calls = []
        for _ in range(rng.randrange(0, 30)):
            start = rng.randrange(0, 5_000)
            calls.append(call(
                daemon=rng.choice(("dpm", "dpns", "srm", None)),
                op=rng.choice(("put", "get", "ping", "getpools", "statg", "creat", "rm")),
                started=maybe(start), ended=maybe(start + rng.randrange(0, 50)),
                duration_ms=maybe(rng.randrange(0, 50)), auth_ms=maybe(rng.randrange(0, 9)),
                client=rng.choice((None, "", "a")), thread=maybe(rng.randrange(-2, 20)),
                path=rng.choice((None, "", "/a/b/f"))))
            if rng.random() < 0.1:
                del calls[-1][rng.choice(("thread", "path", "daemon"))]
        cases.append((reqs, calls))
    for reqs, calls in cases:
        assert compiled_call_columns(reqs, calls) == python_call_columns(reqs, calls)
    odd = [call(daemon="dpns", op="statg", duration_ms=2.5)]
    with pytest.raises(TypeError):
        compiled_call_columns([], odd)
    assert call_columns([], odd)["statg"] == [2.5]
