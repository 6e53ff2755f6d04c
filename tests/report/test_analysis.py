"""report/analysis.py: what the report derives from records, on records written out by hand.

put() and call() write those records; test_story and test_window use them too.
"""

from __future__ import annotations

import bisect
import random
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers import extension
from dpmstream.report import analysis as A
from dpmstream.streams.sinks.summary import Summary

T0 = 1_313_152_300_000   # 2011-08-12 14:31:40 CEST
ZURICH = ZoneInfo("Europe/Zurich")


def put(start, *, request=5, queue=600, proc=500, ready=None, polls=3, poll=9,
        transfer=80, done=6, status="success", client="lxfsra01.cern.ch", auth=20, ns=None,
        op="put"):
    accepted = start - auth
    ready = ready if ready is not None else queue + proc + 300
    total = auth + request + ready + transfer + done
    r = {"kind": "request", "host": "dpmhead01", "token": f"t{start}", "op": op,
         "client": client, "nfiles": 1, "status": status, "accepted": accepted,
         "started": start, "ended": accepted + total, "auth_ms": auth, "request_ms": request,
         "queue_ms": queue, "proc_ms": proc, "polls": polls, "poll_ms": poll,
         "ready_wait_ms": ready, "transfer_ms": transfer, "done_ms": done, "total_ms": total}
    if ns is not None:
        r["ns_ms"] = ns
    return r


def call(start, duration, op="statg", daemon="dpns", pid=20713, thread=3):
    return {"kind": "call", "host": "dpmhead01", "daemon": daemon, "pid": pid, "thread": thread,
            "op": op, "client": "wn01", "started": start, "ended": start + duration,
            "duration_ms": duration, "rc": 0, "auth_ms": None, "session": None}


def test_a_requests_segments_do_not_overlap_and_add_up_to_its_total():
    r = put(T0)
    seg = A.segments_of(r)
    assert sum(seg.values()) == r["total_ms"]
    assert seg["queue"] == 600 and seg["proc"] == 500 and seg["after_proc"] == 300
    assert seg["between"] == 0


def test_a_slightly_negative_queue_counts_as_none_and_the_total_still_adds_up():
    r = put(T0, queue=-1)
    seg = A.segments_of(r)
    assert seg["queue"] == 0 and sum(seg.values()) == r["total_ms"]


def _segments_by_definition(r):
    """segments_of as SEGMENTS reads: each step's time in turn (queue never below 0, the
    name server's share of processing at most all of it, the wait after processing what
    ready_wait leaves of queue and processing), each cut to what the earlier steps leave
    of total_ms and never below 0; "between" takes the rest."""
    queue = max(r["queue_ms"] or 0, 0)
    proc = r["proc_ms"] or 0
    ns = r["ns_ms"] if r["ns_ms"] is not None and r["ns_ms"] > 0 else 0
    after = max(r["ready_wait_ms"] - queue - proc, 0) if r["ready_wait_ms"] is not None else 0
    wanted = (r["auth_ms"] or 0, r["request_ms"] or 0, queue, min(ns, proc), proc - min(ns, proc),
              after, r["transfer_ms"] or 0, r["done_ms"] or 0)
    seg, used = {}, 0
    for name, value in zip(A.SEGMENT_NAMES, wanted):
        seg[name] = max(0, min(value, r["total_ms"] - used))
        used += seg[name]
    seg["between"] = max(r["total_ms"] - used, 0)
    return seg


@pytest.mark.parametrize("seed", range(10))
def test_each_segment_is_its_step_cut_to_what_the_earlier_steps_leave(seed):
    # Missing, negative, zero and large values in every field, totals shorter and longer
    # than the steps.
    rng = random.Random(seed)
    fields = ("total_ms", "auth_ms", "request_ms", "queue_ms", "proc_ms", "ns_ms",
              "ready_wait_ms", "transfer_ms", "done_ms")
    for _ in range(300):
        r = {k: rng.choice((None, -40, -1, 0, 1, 30, 500, 2000)) for k in fields}
        if r["total_ms"] is None:
            assert A.segments_of(r) is None
        else:
            assert A.segments_of(r) == _segments_by_definition(r), r


def test_name_server_time_is_cut_out_of_processing_only_when_the_record_has_it():
    assert A.segments_of(put(T0))["proc_ns"] == 0
    seg = A.segments_of(put(T0, ns=120))
    assert seg["proc_ns"] == 120 and seg["proc"] == 380


def test_an_ops_breakdown_is_the_sum_of_its_requests_segments_on_a_simulated_thesis_log():
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    requests = simulate(scenario("thesis", requests=300), None).requests
    requests[0] = dict(requests[0], poll_ms=None, polls=None)   # a request without polls
    out = A.breakdowns(requests)
    assert list(out) == ["put"]   # the thesis workload: puts only
    for op, b in out.items():
        mine = [r for r in requests if r["op"] == op and r.get("total_ms") is not None]
        assert (b.requests, b.total_ms) == (len(mine), sum(r["total_ms"] for r in mine))
        assert b.segments == {k: sum(A.segments_of(r)[k] for r in mine) for k in A.SEGMENT_NAMES}
        assert b.poll_ms == sum(r.get("poll_ms") or 0 for r in mine)
        assert b.polls == sum(r.get("polls") or 0 for r in mine)
        shares = A.phase_shares(requests, op)
        for fieldname in A.PHASE_WORDS:
            assert shares[fieldname] == sum(r[fieldname] for r in mine if r.get(fieldname) is not None) \
                / b.total_ms


def test_the_share_of_a_phase_is_its_summed_time_over_the_summed_total_as_the_replay_says():
    requests = [put(T0), put(T0 + 1000, queue=100), put(T0 + 2000, op="get", transfer=0)]
    summary = Summary()
    for r in requests:
        summary.write(r)
    assert A.phase_shares(requests, "put")["queue_ms"] == pytest.approx(summary.share("put", "queue"))
    assert A.dominant_phase(requests, "put")[0] == "proc_ms"   # 1000 ms against 700 queued


def test_an_ops_shares_are_of_its_own_requests_and_an_op_without_time_has_none():
    requests = [put(T0, transfer=900), put(T0 + 1000, op="get", transfer=0)]
    get = requests[1]
    shares = A.phase_shares(requests, "get")
    assert shares["transfer_ms"] == 0   # the put's 900 ms are not the get's
    assert shares["queue_ms"] == pytest.approx(get["queue_ms"] / get["total_ms"])
    assert A.phase_shares(requests, "ls") is None


def test_concurrency_counts_open_intervals_and_the_time_spent_at_a_level():
    steps = A.concurrency([(0, 10), (5, 20), (5, 8)])
    assert steps.peak == 3
    assert steps.time_at_least(3, 0, 20) == 3
    assert steps.time_at_least(1, 0, 20) == 20
    assert steps.time_at_least(2, 0, 20) == 5


def _sustained_by_definition(steps, min_ms):
    """sustained_peak as it reads: each step's level held from its time while no later
    step is below it, to that step's time (or the last step's); the highest level held
    for min_ms or more."""
    times, levels, best = steps.times, steps.levels, 0
    for i in range(len(times) - 1):
        j = i
        while j + 1 < len(times) and levels[j + 1] >= levels[i]:
            j += 1
        end = times[j + 1] if j + 1 < len(times) else times[j]
        if end - times[i] >= min_ms:
            best = max(best, levels[i])
    return best


def test_the_sustained_peak_is_the_highest_level_held_long_enough():
    steps = A.Steps([0, 10, 30, 100, 140], [2, 5, 3, 1, 0])
    assert steps.sustained_peak(50) == 3    # 5 holds 20 ms, 3 holds 70, 2 holds 100
    assert steps.sustained_peak(20) == 5
    assert steps.sustained_peak(200) == 0
    assert A.Steps([], []).sustained_peak() == 0
    assert A.Steps([0, 60], [4, 4]).sustained_peak() == 4    # held to the last step's time
    assert A.Steps([0, 40, 60], [5, 3, 0]).sustained_peak() == 0   # 3 from its own step only


@pytest.mark.parametrize("seed", range(40))
def test_the_sustained_peak_is_its_definition_on_random_steps(seed):
    # Equal levels in a row, plateaus, a last step above zero, spans around min_ms.
    rng = random.Random(seed)
    n = rng.randrange(0, 120)
    times = sorted(rng.sample(range(0, 2000), n))
    steps = A.Steps(times, [rng.choice((0, 1, 2, 3, 3, 4, 7, 20)) for _ in range(n)])
    for min_ms in (0, 1, 17, 50, 300):
        want = _sustained_by_definition(steps, min_ms)
        assert steps.sustained_peak(min_ms) == want
        assert A.python_sustained_peak(steps.times, steps.levels, min_ms) == want   # the reference


def test_the_sustained_peak_is_its_definition_on_a_simulated_thesis_log():
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    run = simulate(scenario("thesis", requests=300), None)
    for steps in (A.concurrency(A.slow_runs(run.requests)), A.concurrency(A.queue_stays(run.requests))):
        assert steps.peak > 1
        for min_ms in (1, 50, 500):
            want = _sustained_by_definition(steps, min_ms)
            assert steps.sustained_peak(min_ms) == want
            assert A.python_sustained_peak(steps.times, steps.levels, min_ms) == want
        if sustained_peak is not None:   # the extension's own, at epoch-ms times
            assert sustained_peak(steps.times, steps.levels, 50) == steps.sustained_peak(50)


try:
    from dpmstream.parsers._native import sustained_peak
except ImportError:  # not built
    sustained_peak = None


@pytest.mark.skipif(sustained_peak is None, reason="the compiled extension is not built")
def test_the_compiled_sustained_peak_leaves_what_it_cannot_read_exactly_to_python():
    far = A.Steps([0, 2 ** 62], [3, 0])   # its span wraps no i64 but passes 2^53
    with pytest.raises(OverflowError):
        sustained_peak(far.times, far.levels, 50)
    assert far.sustained_peak(50) == A.python_sustained_peak(far.times, far.levels, 50) == 3
    with pytest.raises(TypeError):   # unequal lists: Python answers (or fails) its own way
        sustained_peak([0, 10], [1], 5)


def test_binned_levels_are_time_weighted_means_and_maxima():
    steps = A.concurrency([(0, 10), (5, 20)])
    means, peaks = steps.binned([0, 10, 20])
    assert means == [1.5, 1.0] and peaks == [2, 1]


@pytest.mark.parametrize("seed", range(20))
def test_concurrency_steps_at_each_start_and_end_to_the_number_open_there(seed):
    rng = random.Random(seed)
    intervals = [(a, a + rng.choice((-3, 0, 1, 2, 40))) for a in
                 (rng.randrange(0, 100) for _ in range(rng.randrange(0, 80)))]
    steps = A.concurrency(iter(intervals))   # a generator, as slow_runs gives
    kept = [(a, b) for a, b in intervals if b > a]
    assert steps.times == sorted({t for span in kept for t in span})
    assert steps.levels == [sum(1 for a, b in kept if a <= t < b) for t in steps.times]


try:
    from dpmstream.parsers._native import concurrency_steps
except ImportError:  # not built
    concurrency_steps = None


@pytest.mark.skipif(concurrency_steps is None, reason="the compiled extension is not built")
def test_the_compiled_concurrency_is_the_python_one():
    """native/src/steps.rs against python_concurrency, the reference: random intervals
    (empty, reversed, sharing instants, cancelling at one) and a simulated thesis log's
    slow runs, queue stays and call spans."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    rng = random.Random(30)
    cases = [[(a, a + rng.choice((-3, 0, 1, 2, 40))) for a in
              (rng.randrange(0, 100) for _ in range(rng.randrange(0, 80)))] for _ in range(30)]
    cases += [[], [(5, 5)], [(0, 5), (5, 9)], [(1, 2)] * 3]
    run = simulate(scenario("thesis", requests=300), None)
    cases += [list(A.slow_runs(run.requests)), list(A.queue_stays(run.requests)),
              [(c["started"], c["ended"]) for c in run.calls if c["ended"] is not None]]
    assert all(cases[-3:])
    for intervals in cases:
        python = A.python_concurrency(intervals)
        assert concurrency_steps(intervals) == (python.times, python.levels), intervals
        assert A.concurrency(iter(intervals)) == python


try:
    from dpmstream.parsers._native import binned_steps
except ImportError:  # not built
    binned_steps = None


@pytest.mark.skipif(binned_steps is None, reason="the compiled extension is not built")
def test_the_compiled_bins_are_the_python_ones():
    """Steps.binned (native/src/steps.rs's sums) against python_binned, the reference, to
    the float: random steps against random edges (bins before, across, between and after
    the steps, one step, none), and a simulated thesis log's steps at epoch-ms times
    against the page's own bins. The extension's sums are called themselves too (binned
    falls back to Python where they raise), and times past 2^53 go the Python way."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    rng = random.Random(31)
    cases = []
    for _ in range(200):
        intervals = [(a, a + rng.randrange(1, 30)) for a in
                     (rng.randrange(0, 200) for _ in range(rng.randrange(0, 60)))]
        edges = sorted(rng.sample(range(-20, 260), rng.randrange(2, 12)))
        cases.append((A.python_concurrency(intervals), edges))
    run = simulate(scenario("thesis", requests=300), None)
    for intervals in (list(A.slow_runs(run.requests)), list(A.queue_stays(run.requests)),
                      [(c["started"], c["ended"]) for c in run.calls if c["ended"] is not None]):
        steps = A.python_concurrency(intervals)
        assert steps.times
        cases.append((steps, A.bin_edges(steps.times[0], steps.times[-1])))
    for steps, edges in cases:
        assert steps.binned(edges) == steps.python_binned(edges), (steps, edges)
        assert binned_steps(steps.times, steps.levels, edges)[1] == steps.python_binned(edges)[1]
    far = A.python_concurrency([(-2 ** 62, 2 ** 62)])   # its width wraps an i64
    with pytest.raises(OverflowError):
        binned_steps(far.times, far.levels, [-2 ** 62, 2 ** 62])
    assert far.binned([-2 ** 62, 2 ** 62]) == far.python_binned([-2 ** 62, 2 ** 62]) == ([1.0], [1])


segment_sums = extension.compiled("segment_sums")   # the compiled sums, or None


@pytest.mark.skipif(segment_sums is None, reason="the compiled extension is not built")
def test_the_compiled_segment_sums_are_the_python_ones():
    """native/src/segments.rs against python_segment_sums, the reference: records with any
    of the durations missing, None, 0, negative or longer than the total, each its own op
    (its sums are its parts, _segment_parts'), then grouped under a few ops (None and ""
    are "?"), and a simulated thesis log's request records."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    rng = random.Random(32)
    keys = ("total_ms", "auth_ms", "request_ms", "queue_ms", "proc_ms", "ns_ms",
            "ready_wait_ms", "transfer_ms", "done_ms", "poll_ms", "polls")
    records = []
    for k in range(2000):
        record = {"kind": "request", "op": f"op{k}"}
        for key in keys:
            pick = rng.random()
            if pick < 0.15:
                continue                      # absent
            record[key] = None if pick < 0.3 else rng.choice((0, -5, rng.randrange(1, 3000)))
        records.append(record)
    alone = segment_sums(records)
    assert alone == A.python_segment_sums(records)
    assert {op: sums[2] for op, sums in alone.items()} == {
        r["op"]: list(A._segment_parts(r)) for r in records if r.get("total_ms") is not None}
    grouped = [dict(r, op=rng.choice(("put", "get", None, ""))) for r in records]
    assert segment_sums(grouped) == A.python_segment_sums(grouped)
    assert set(segment_sums(grouped)) == {"put", "get", "?"}
    run = simulate(scenario("thesis", requests=300), None)
    assert segment_sums(run.requests) == A.python_segment_sums(run.requests)
    # a total past 2^53 (native/src/exact_ints.rs), or not an int, goes the Python way
    far = [{"op": "put", "total_ms": 2 ** 62, "auth_ms": -2 ** 62, "proc_ms": 2 ** 62}]
    with pytest.raises(OverflowError):
        segment_sums(far)
    assert A.breakdowns(far)["put"].segments == dict(zip(A.SEGMENT_NAMES, A._segment_parts(far[0])))
    halves = [{"op": "put", "total_ms": 10, "poll_ms": 2.5}]
    with pytest.raises(TypeError):
        segment_sums(halves)
    assert A.breakdowns(halves)["put"].poll_ms == 2.5


def _binned_ms_by_ms(steps, edges):
    """binned by definition: the level at each millisecond of a bin (times are whole ms;
    before the first step nothing is open, the last step holds to the end)."""
    means, peaks = [], []
    for a, b in zip(edges, edges[1:]):
        at = [steps.levels[k] if (k := bisect.bisect_right(steps.times, t) - 1) >= 0 else 0
              for t in range(a, b)]
        means.append(sum(at) / (b - a))
        peaks.append(max([0, *at]))
    return means, peaks


def _random_intervals(rng):
    """Up to 60 intervals, empty to 250 ms long, from -50 to 850 ms."""
    return [(a, a + rng.choice((0, 1, 3, 17, 60, 250)))
            for a in (rng.randrange(-50, 600) for _ in range(rng.randrange(0, 60)))]


def _random_steps(rng):
    return A.concurrency(_random_intervals(rng))


@pytest.mark.parametrize("seed", range(40))
def test_binned_is_the_millisecond_by_millisecond_mean_and_maximum(seed):
    # Intervals crossing bin edges, ending on them, inside one bin, empty, outside the
    # bins on either side; bins wider and narrower than the steps.
    rng = random.Random(seed)
    steps = _random_steps(rng)
    width = rng.choice((1, 7, 25, 100, 1000))
    edges = list(range(rng.randrange(0, 40), 560, width)) or [0, width]
    if len(edges) == 1:
        edges.append(edges[0] + width)
    assert steps.binned(edges) == _binned_ms_by_ms(steps, edges)


def _time_at_least_ms_by_ms(steps, level, t0, t1):
    """time_at_least by definition: the milliseconds of [t0, t1) from the first step on
    whose step's level is at least `level` (the last step holds to t1)."""
    return sum(1 for t in range(t0, t1)
               if (k := bisect.bisect_right(steps.times, t) - 1) >= 0 and steps.levels[k] >= level)


@pytest.mark.parametrize("seed", range(40))
def test_time_at_least_counts_the_milliseconds_at_or_above_the_level(seed):
    # Spans starting before, inside and after the steps, empty, and levels from 0 up.
    rng = random.Random(seed)
    steps = _random_steps(rng)
    t0 = rng.randrange(-100, 500)
    t1 = t0 + rng.choice((0, 1, 30, 400, 900))
    for level in range(0, steps.peak + 2):
        assert steps.time_at_least(level, t0, t1) == _time_at_least_ms_by_ms(steps, level, t0, t1)


def test_a_slow_run_starts_at_the_puts_returns_plus_the_queue_wait():
    assert list(A.slow_runs([put(T0)])) == [(T0 + 5 + 600, T0 + 5 + 600 + 500)]


def test_a_new_pid_in_the_call_records_is_a_restart_at_its_first_call():
    calls = [call(T0, 2, pid=1), call(T0 + 10, 2, pid=1), call(T0 + 50, 2, pid=2)]
    assert A.restarts_from_calls(calls) == [(T0 + 50, "dpns")]


def test_time_bins_are_round_and_cover_the_span():
    edges = A.bin_edges(T0 + 123, T0 + 600_000)
    assert edges[0] <= T0 + 123 and edges[-1] >= T0 + 600_000
    assert len(edges) - 1 <= 90 and (edges[1] - edges[0]) % 1000 == 0


def test_a_requests_start_is_its_first_time_accepted_started_or_ended_each_read_once():
    """starts_of is start_of of each request in order (the span, the scatter and the polls
    per bin read it): accepted where the record has it, else started, else ended, else
    None; the accepted times are read in bulk, start_of only for the records without."""
    records = [put(T0), put(T0 + 1000), {"started": T0 + 5, "ended": T0 + 9},
               {"accepted": None, "ended": T0 + 7}, {"op": "get"}, put(T0 + 2000)]
    assert A.starts_of(records) == [A.start_of(r) for r in records] == [
        T0 - 20, T0 + 980, T0 + 5, T0 + 7, None, T0 + 1980]
    assert A.starts_of([]) == []


def test_a_summed_field_adds_the_records_that_have_it_zeros_and_negatives_included():
    records = [{"x": 5}, {"x": None}, {}, {"x": 0}, {"x": -2}, {"x": 10}]
    assert A.summed(records, "x") == 13
    assert A.summed(records, "y") == 0
    assert A.summed([], "x") == 0


def test_polls_per_bin_are_each_ops_mean_by_the_requests_start():
    edges = [T0, T0 + 10_000, T0 + 20_000, T0 + 30_000]
    records = [put(T0 + 1020, polls=2), put(T0 + 2020, polls=4), put(T0 + 21_020, polls=5),
               put(T0 + 3020, polls=None, op="get"), put(T0 + 99_000, polls=7),
               {"op": None, "started": T0 + 15_000, "polls": 1}, {"op": "put"}]
    assert A.polls_by_bin(records, edges) == {
        "?": [None, 1.0, None], "get": [0.0, None, None], "put": [3.0, None, 5.0]}


CompiledBusySpans = extension.compiled("BusySpans")   # the compiled twin, or None


def _kept(intervals) -> A.Busy:
    """The intervals' Busy as the report reads the log's slow-thread runs from the
    compiled engine's spans: steps kept in the extension (BusySpans.held)."""
    spans = CompiledBusySpans(A.FAST_DAEMON, sorted(A.NS_DAEMONS))
    for a, b in intervals:
        spans("h", A.FAST_DAEMON, 1, 2, "proc", a, b)
    return A.Busy(*spans.held()["slow"])


@pytest.mark.skipif(CompiledBusySpans is None, reason="the compiled extension is not built")
@pytest.mark.parametrize("seed", range(40))
def test_steps_kept_in_the_extension_answer_as_the_python_steps(seed):
    """KeptSteps (native/src/steps.rs HeldSteps) against the Python Steps of the same
    intervals, python_binned, python_sustained_peak and the definitions ms by ms."""
    rng = random.Random(seed)
    intervals = _random_intervals(rng)
    kept, want = _kept(intervals).steps, A.python_concurrency(intervals)
    assert type(kept) is A.KeptSteps and type(want) is A.Steps
    assert kept == want and (kept.times, kept.levels, kept.peak) == (want.times, want.levels, want.peak)
    width = rng.choice((1, 7, 25, 100, 1000))
    edges = list(range(rng.randrange(-60, 40), 900, width)) + [900]
    assert kept.binned(edges) == want.python_binned(edges) == _binned_ms_by_ms(want, edges)
    for min_ms in (0, 1, 17, 50, 300):
        assert kept.sustained_peak(min_ms) == A.python_sustained_peak(want.times, want.levels, min_ms)
    t0 = rng.randrange(-100, 500)
    t1 = t0 + rng.choice((0, 1, 30, 400, 900))
    for level in range(0, want.peak + 2):
        assert kept.time_at_least(level, t0, t1) == A.Steps.time_at_least(want, level, t0, t1) \
            == _time_at_least_ms_by_ms(want, level, t0, t1)


@pytest.mark.skipif(CompiledBusySpans is None, reason="the compiled extension is not built")
def test_steps_kept_in_the_extension_leave_what_they_cannot_read_exactly_to_python():
    far = _kept([(0, 2 ** 62)]).steps   # no i64 wraps, but past 2^53
    with pytest.raises(OverflowError):
        far.kept.sustained_peak(50)
    python = A.Steps([0, 2 ** 62], [1, 0])
    assert far.sustained_peak(50) == A.python_sustained_peak(python.times, python.levels, 50) == 1
    assert far.time_at_least(1, 0, 2 ** 63) == A.Steps.time_at_least(python, 1, 0, 2 ** 63) == 2 ** 62
    assert far.binned([-2 ** 62, 2 ** 62]) == python.python_binned([-2 ** 62, 2 ** 62]) == ([0.5], [1])
    near = _kept([(0, 10)]).steps
    assert near.time_at_least(1, 0, 2 ** 70) == 10   # an argument past 64 bits: Python's answer
    assert near.time_at_least(0.5, 0, 20) == 10      # not an int: Python's answer


queue_steps = extension.compiled("queue_steps")   # the queue's steps compiled, or None


@pytest.mark.skipif(queue_steps is None, reason="the compiled extension is not built")
def test_the_compiled_queue_is_the_python_one():
    """native/src/steps.rs queue_steps against concurrency(queue_stays(...)), the
    reference: records with their times missing, None, negative, a queue_ms or not, a
    proc_ms or not, ended or not, succeeded or not; a simulated thesis log's requests;
    and what it leaves to Python."""
    from dpmstream.simulator import simulate
    from dpmstream.simulator.scenarios import scenario

    rng = random.Random(33)
    records = []
    for _ in range(3000):
        record = {"status": rng.choice(("success", "failed", "aborted", "incomplete", None))}
        for key in ("started", "request_ms", "queue_ms", "proc_ms", "ended"):
            pick = rng.random()
            if pick < 0.2:
                continue                      # absent
            record[key] = None if pick < 0.35 else rng.choice((0, -5, rng.randrange(1, 3000)))
        records.append(record)
    for requests in (records, simulate(scenario("thesis", requests=300), None).requests):
        want = A.python_queue_steps(requests)
        got = A.queue_concurrency(requests)
        assert type(got) is A.KeptSteps and type(want) is A.Steps
        assert got == want and want.peak > 1
        assert got == A.python_concurrency(list(A.queue_stays(requests)))
    for odd in ([{"started": 2 ** 62, "request_ms": 5, "queue_ms": 1}],   # past 2^53
                [{"started": 0, "request_ms": 5, "ended": 9}],            # no status
                [{"started": 0.5, "request_ms": 5, "queue_ms": 1}]):      # not an int
        with pytest.raises((TypeError, OverflowError)):
            queue_steps(odd)
    assert A.queue_concurrency([{"started": 0, "request_ms": 5, "queue_ms": 1}]).times == [5, 6]
    with pytest.raises(KeyError):
        A.queue_concurrency([{"started": 0, "request_ms": 5, "ended": 9}])   # as Python fails
