"""Linking name-server calls to DPM requests (docs/record-rules.md, "Linking name-server
calls"), on hand-built DPM and DPNS lines fed side by side as `run` and the worker do."""

import json

import pytest

from dpmstream.parsers import engines, schema
from dpmstream.parsers.linking import Linker, surl_path
from dpmstream.parsers.profiles import resolve_profile
from dpmstream.parsers.pipeline import Pipeline, StateChanges
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.streams import state_keys

from tests.dpmlog import DN, T1, T2, call, closing, line, put, status
from tests.helpers import calls_of, requests_of

HEAD = "dpmhead01.cern.ch"
F1 = "/dpm/cern.ch/home/dteam/a/f1"
F2 = "/dpm/cern.ch/home/dteam/a/f2"
DPM, NS = resolve_profile("lcgdm-dpm"), resolve_profile("lcgdm-ns")


def ns_call(start, end, tid, op, path, client=HEAD, pid=9876):
    func = f"Cns_srv_{op}"
    return [line(start, tid, func, f"NS092 - {op} request by {DN} (1001,1001) from {client}", pid),
            line(start, tid, func, f"NS098 - {op} {path} 0b9f0f2e-1111 664 22", pid),
            line(end, tid, func, "returns 0", pid)]


def proc_run(start, end, tid, token, surls, op="put"):
    out = [line(start, tid, f"dpm_srv_proc_{op}", f"processing {op} request {token}")]
    out += [line(end, tid, f"dpm_srv_proc_{op}", f"selected disk01:/srv/dpm/01 for {s}") for s in surls]
    out.append(line(end, tid, f"dpm_srv_proc_{op}", "returns 0"))
    return out


def a_put(token, surls, t0, tids=(3, 27, 5, 9), done="10:00:09.000"):
    """A put at 10:00:0t0 whose processing run lasts from .100 to .900 of the next second."""
    fast, slow, poll, close = tids
    dpm = (put(f"08/12 10:00:0{t0}.000", fast, token, surls=surls, end=f"08/12 10:00:0{t0}.010")
           + proc_run(f"08/12 10:00:0{t0}.100", f"08/12 10:00:0{t0 + 1}.900", slow, token, surls)
           + status(f"08/12 10:00:0{t0 + 2}.000", f"08/12 10:00:0{t0 + 2}.001", poll, token, "SUCCESS")
           + closing(f"08/12 {done}", f"08/12 {done[:-3]}010", close, "putdone", token))
    return dpm


def link(dpm_lines, dpns_lines, host=HEAD, **kw):
    """Both logs through one pipeline, line by line in stamp order (as they interleave)."""
    records: list[dict] = []
    pipeline = Pipeline(records.append, **kw)
    dpm = pipeline.source("dpm", host=host, tz="UTC", year=2011, profile=DPM)
    ns = (pipeline.source("dpns", host=host, tz="UTC", year=2011, profile=NS)
          if dpns_lines is not None else None)
    tagged = [(l[:18], 0, l, dpm) for l in dpm_lines] + [(l[:18], 1, l, ns) for l in dpns_lines or ()]
    for _, _, text, src in sorted(tagged, key=lambda t: (t[0], t[1])):
        src.feed(text)
    pipeline.finish()
    return requests_of(records), calls_of(records)


def side_by_side(host=HEAD):
    """A pipeline reading a head node's DPM and DPNS logs, fed by hand: (records, the
    pipeline, the DPM source, the DPNS source)."""
    records: list[dict] = []
    pipeline = Pipeline(records.append)
    return (records, pipeline, pipeline.source("dpm", host=host, tz="UTC", year=2011, profile=DPM),
            pipeline.source("dpns", host=host, tz="UTC", year=2011, profile=NS))


def test_the_path_of_a_surl_is_after_the_host_or_after_sfn():
    assert surl_path(f"srm://{HEAD}{F1}") == F1
    assert surl_path(f"srm://{HEAD}:8446/srm/managerv2?SFN={F1}") == F1
    assert surl_path(F1) == F1


def test_a_creat_from_the_head_node_on_a_file_of_the_request_inside_its_run_is_linked():
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1)
    dpns = ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1)
    (req,), (creat,) = link(dpm, dpns)
    assert (req["ns_calls"], req["ns_ms"]) == (1, 250)
    assert creat["token"] == T1


def test_every_call_of_a_multi_file_request_counts_once():
    surls = [f"srm://{HEAD}{F1}", f"srm://{HEAD}:8446/srm/managerv2?SFN={F2}"]
    dpm = a_put(T1, surls, 1)
    dpns = (ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1)
            + ns_call("08/12 10:00:01.400", "08/12 10:00:01.700", 2, "creat", F2))
    (req,), calls = link(dpm, dpns)
    assert (req["ns_calls"], req["ns_ms"]) == (2, 400)
    assert [c["token"] for c in calls] == [T1, T1]


@pytest.mark.parametrize("why, call", [
    ("another file", ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F2)),
    ("before the run", ns_call("08/12 10:00:01.050", "08/12 10:00:01.300", 2, "creat", F1)),
    ("after the run", ns_call("08/12 10:00:02.800", "08/12 10:00:02.950", 2, "creat", F1)),
])
def test_a_call_is_not_linked_from(why, call):
    (req,), (ns,) = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call)
    assert (req["ns_calls"], req["ns_ms"], ns["token"]) == (0, 0, None), why


def test_a_call_of_another_client_is_not_linked_when_the_head_node_is_named():
    call = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1,
                   client="wn37.example.org")
    (req,), (ns,) = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call, learn_head=False)
    assert (req["ns_calls"], ns["token"]) == (0, None)


def test_the_head_node_as_the_name_server_names_it_is_learned_from_the_first_call_that_links():
    # `replay` without --host: the records' host is the replaying machine's name, the
    # name server calls the head dpmhead01.cern.ch. Disk nodes call it too, before.
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1) + a_put(T2, [f"srm://{HEAD}{F2}"], 3, tids=(4, 28, 6, 10))
    dpns = (ns_call("08/12 10:00:00.500", "08/12 10:00:00.600", 1, "statg", F1, client="disk01")
            + ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1)
            + ns_call("08/12 10:00:03.200", "08/12 10:00:03.300", 2, "creat", F2))
    reqs, calls = link(dpm, dpns, host="replaying-machine")
    assert [(r["token"], r["ns_calls"]) for r in reqs] == [(T1, 1), (T2, 1)]
    assert [(c["client"], c["token"]) for c in calls] == [
        ("disk01", None), (HEAD, T1), (HEAD, T2)]


def test_once_the_head_is_learned_another_clients_call_inside_a_run_is_not_linked():
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1) + a_put(T2, [f"srm://{HEAD}{F2}"], 3, tids=(4, 28, 6, 10))
    dpns = (ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1)
            + ns_call("08/12 10:00:03.200", "08/12 10:00:03.300", 3, "statg", F2, client="disk01"))
    reqs, calls = link(dpm, dpns, host="replaying-machine")
    assert [(r["token"], r["ns_calls"]) for r in reqs] == [(T1, 1), (T2, 0)]
    assert [c["token"] for c in calls] == [T1, None]


def test_when_no_call_links_the_end_warns_once_naming_the_clients_seen(caplog):
    call = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1, client="dpmhead01")
    with caplog.at_level("WARNING"):
        (req,), _ = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call,
                          settings=ReassemblySettings(head_aliases=("other",)))
    warned = [r.getMessage() for r in caplog.records if "linked" in r.getMessage()]
    assert req["ns_calls"] == 0
    assert len(warned) == 1 and "name-server clients seen: dpmhead01" in warned[0]


def test_no_warning_when_calls_link(caplog):
    call = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1)
    with caplog.at_level("WARNING"):
        link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call)
    assert not [r for r in caplog.records if "linked" in r.getMessage()]


def test_the_learned_head_survives_a_restore():
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1)
    dpns = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1)
    records, pipeline, d, n = side_by_side(host="replaying-machine")
    for text, src in sorted([(t, d) for t in dpm] + [(t, n) for t in dpns], key=lambda p: p[0][:18]):
        src.feed(text)
    pipeline.finish()
    state = json.loads(json.dumps(pipeline.linker.state()))
    assert state["heads"] == {"replaying-machine": HEAD}
    again = Pipeline(records.append)
    again.linker.restore(state)
    assert again.linker.state()["heads"] == {"replaying-machine": HEAD}


def test_a_few_ms_outside_the_run_still_count():
    call = ns_call("08/12 10:00:01.097", "08/12 10:00:02.903", 2, "creat", F1)
    (req,), (ns,) = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call)
    assert (req["ns_calls"], ns["token"]) == (1, T1)


def test_an_alias_of_the_head_node_is_the_head_node():
    call = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "creat", F1, client="localhost")
    (req,), _ = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), call,
                      settings=ReassemblySettings(head_aliases=("localhost",)))
    assert req["ns_calls"] == 1


def test_a_call_inside_the_runs_of_two_requests_naming_its_file_is_linked_to_neither():
    surls = [f"srm://{HEAD}{F1}"]
    dpm = a_put(T1, surls, 1) + a_put(T2, surls, 1, tids=(4, 28, 6, 10))
    call = ns_call("08/12 10:00:01.200", "08/12 10:00:01.300", 2, "statg", F1)
    reqs, (ns,) = link(dpm, call)
    assert [r["ns_calls"] for r in reqs] == [0, 0] and ns["token"] is None


def test_without_a_name_server_log_ns_fields_are_empty():
    (req,), _ = link(a_put(T1, [f"srm://{HEAD}{F1}"], 1), None)
    assert req.get("ns_calls") is None and req.get("ns_ms") is None


def test_name_server_lines_arriving_after_the_request_ended_still_link():
    """The creat's lines come in after the request's last DPM line (within the delay)."""
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    records, pipeline, d, n = side_by_side()
    for text in ns_call("08/12 10:00:00.500", "08/12 10:00:00.501", 1, "statg", F2, client="wn1"):
        n.feed(text)
    for text in dpm:
        d.feed(text)
    assert not requests_of(records)  # held for the name server's lines
    for text in ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1):
        n.feed(text)
    pipeline.finish()
    (req,) = requests_of(records)
    assert (req["ns_calls"], req["ns_ms"]) == (1, 250)


def test_a_request_record_waits_only_a_few_seconds_of_event_time_in_both_logs():
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    later = call("08/12 10:00:09.000", 4, "ping", end="08/12 10:00:09.001")
    records, pipeline, d, n = side_by_side()
    for text in ns_call("08/12 10:00:00.500", "08/12 10:00:00.501", 1, "statg", F2, client="wn1"):
        n.feed(text)
    for text in dpm:
        d.feed(text)
    assert not requests_of(records)
    for text in later:  # 10:00:09: the request's delay (3 s past the 2 s allowance) is over
        d.feed(text)
    assert not requests_of(records)  # ... in the DPM log: the name server's may lag
    for text in ns_call("08/12 10:00:09.000", "08/12 10:00:09.001", 1, "statg", F2, client="wn1"):
        n.feed(text)
    assert [r["token"] for r in requests_of(records)] == [T1]


def test_a_name_server_log_running_on_past_the_dpm_logs_end_loses_no_link():
    """Issue 26 item 9: the DPNS log goes on 8 s and more past the DPM log's last line
    while the DPM log's last lines are still to be read: the request's run and its
    calls are linked whatever the name server's log does after them."""
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    records, pipeline, d, n = side_by_side()
    for text in dpm[:3]:  # the put: the DPM log read up to 10:00:01.010
        d.feed(text)
    for text in ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1):
        n.feed(text)
    for text in ns_call("08/12 10:00:12.000", "08/12 10:00:12.001", 1, "statg", F2, client="wn1"):
        n.feed(text)  # the name server runs on, its lines read before the DPM's last ones
    for text in dpm[3:]:
        d.feed(text)
    pipeline.finish()
    (req,) = requests_of(records)
    assert (req["ns_calls"], req["ns_ms"]) == (1, 250)


def test_a_log_quiet_for_over_a_minute_holds_nothing_back():
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    records, pipeline, d, n = side_by_side()
    for text in ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1):
        n.feed(text)
    for text in dpm + call("08/12 10:01:05.000", 4, "ping", end="08/12 10:01:05.001"):
        d.feed(text)
    (req,) = requests_of(records)  # the name server silent since 10:00:01: not waited for
    assert req["ns_calls"] == 1


def test_a_restored_cut_run_beside_a_run_of_the_same_path_completes_like_before_the_save():
    # A request processed again after a restart: its first run was cut, the second one
    # names the same file. Its record must complete after a restore as without one.
    def drive(restart: bool):
        records: list[dict] = []
        linker = Linker(records.append, expect_ns=True)
        linker.run_started(HEAD, T1, 1000, [f"srm://{HEAD}{F1}"])
        linker.run_ended(HEAD, T1, 1000, None)
        linker.run_started(HEAD, T2, 2000, [f"srm://{HEAD}{F1}"])
        if restart:
            state = json.loads(json.dumps(linker.state()))
            linker = Linker(records.append, expect_ns=True)
            linker.restore(state)
        linker.take({"kind": "request", "host": HEAD, "token": T1, "ended": 3000})
        linker.run_ended(HEAD, T2, 2000, 2500)
        linker.take({"kind": "request", "host": HEAD, "token": T2, "ended": 3000})
        linker.finish()
        return records

    assert drive(restart=True) == drive(restart=False)
    assert [r["ns_calls"] for r in drive(restart=False)] == [0, 0]


ENGINES = [e for e in engines.ENGINES if e == engines.PYTHON or engines.compiled_available()]


def _a_put_whose_creat_is_held():
    """The lines of a put whose creat the linker holds until later lines come: (the put's
    DPM lines, an earlier name-server call, the creat, a later name-server call, a later
    DPM call)."""
    return (a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000"),
            ns_call("08/12 10:00:00.500", "08/12 10:00:00.501", 1, "statg", F2, client="wn1"),
            ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1),
            ns_call("08/12 10:00:09.000", "08/12 10:00:09.001", 1, "statg", F2, client="wn1"),
            call("08/12 10:00:09.000", 4, "ping", end="08/12 10:00:09.001"))


def _held_put_pipeline(records: list, engine: str):
    """(pipeline, its DPM source, its DPNS source) of one head, records to `records`."""
    pipeline = Pipeline(records.append, engine=engine)
    return (pipeline, pipeline.source("dpm", host=HEAD, tz="UTC", year=2011, profile=DPM),
            pipeline.source("dpns", host=HEAD, tz="UTC", year=2011, profile=NS))


def _feed_dpns_first(d, n, dpm_lines, dpns_lines) -> None:
    for text in dpns_lines:
        n.feed(text)
    for text in dpm_lines:
        d.feed(text)


def _records_never_stopped(engine: str) -> list[dict]:
    """The records of the held-creat put's lines read by one pipeline that never stops."""
    dpm, early, creat, later, tail = _a_put_whose_creat_is_held()
    records: list[dict] = []
    pipeline, d, n = _held_put_pipeline(records, engine)
    _feed_dpns_first(d, n, dpm, early + creat)
    _feed_dpns_first(d, n, tail, later)
    pipeline.finish()
    return records


def _same_records(a: list[dict], b: list[dict]) -> bool:
    """The same records, in any order."""
    def canonical(records):
        return sorted(json.dumps(r, sort_keys=True) for r in records)

    return canonical(a) == canonical(b)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_state_handed_in_or_out_is_not_changed_by_the_lines_read_after(engine):
    """`run --state` and the Kafka worker keep the state they restored from and every
    change taken, and store them as they are: the linker must share no record with them.
    A pipeline stopped while it holds a request and its creat for linking is rebuilt
    from its state; lines that link the creat are read; every change taken stays as it
    was taken, the linker's change is reported, and a pipeline rebuilt from all of them
    gives the records of one that never stopped."""
    dpm, early, creat, later, tail = _a_put_whose_creat_is_held()
    never_stopped = _records_never_stopped(engine)
    assert requests_of(never_stopped)[0]["ns_calls"] == 1  # what the restart must keep

    records: list[dict] = []
    before, d, n = _held_put_pipeline(records, engine)
    before.track_changes()
    _feed_dpns_first(d, n, dpm, early + creat)
    first = before.take_changes()
    assert len(first.linker["requests"]) == 1 and len(first.linker["calls"]) == 1  # held

    store = StateChanges()
    store.merge(first)
    as_taken = json.dumps(state_keys.encode(store), sort_keys=True)
    after, d, n = _held_put_pipeline(records, engine)
    after.track_changes()
    after.restore(store)
    takes = [after.take_changes()]
    _feed_dpns_first(d, n, tail, later)  # moves event time on: the creat links, the request is let out
    assert requests_of(records)[0]["ns_calls"] == 1
    takes.append(after.take_changes())
    assert json.dumps(state_keys.encode(store), sort_keys=True) == as_taken  # restored from
    assert takes[-1].linker is not None and not takes[-1].linker.get("requests")
    for taken in takes:
        store.merge(taken)
    as_taken = json.dumps(state_keys.encode(store), sort_keys=True)

    again, d, n = _held_put_pipeline(records, engine)
    again.track_changes()
    again.restore(store)
    again.finish()
    assert json.dumps(state_keys.encode(store), sort_keys=True) == as_taken
    assert _same_records(records, never_stopped)  # a restart may emit them in another order


@pytest.mark.parametrize("engine", ENGINES)
def test_a_state_saved_when_durations_were_keyed_by_their_columns_restores_to_the_same_records(engine):
    """`run --state` files and the worker's state topic written before a record's durations
    were keyed `*_ms` hold the linker's held records under their column names (`auth_s`,
    `total_s`, a call's `duration_s`). Such a state, stored as JSON by the flat keys, restores
    into a pipeline that then gives the records of one that never stopped, under today's
    keys."""
    dpm, early, creat, later, tail = _a_put_whose_creat_is_held()
    never_stopped = _records_never_stopped(engine)

    records: list[dict] = []
    before, d, n = _held_put_pipeline(records, engine)
    before.track_changes()
    _feed_dpns_first(d, n, dpm, early + creat)
    store = StateChanges()
    store.merge(before.take_changes())
    flat = json.loads(json.dumps(state_keys.encode(store)))
    held = flat[state_keys.LINKER]
    assert len(held["requests"]) == 1 and len(held["calls"]) == 1  # a request and its creat

    def as_saved_before(record):  # each key as its column: the old code's records
        return {schema.column_of(key): value for key, value in record.items()}

    held["requests"] = [as_saved_before(r) for r in held["requests"]]
    held["calls"] = [[as_saved_before(row[0]), *row[1:]] for row in held["calls"]]
    assert "total_s" in held["requests"][0] and "duration_s" in held["calls"][0][0]

    after, d, n = _held_put_pipeline(records, engine)
    after.restore(state_keys.decode(flat))
    _feed_dpns_first(d, n, tail, later)
    after.finish()
    (req,) = requests_of(records)
    assert (req["ns_calls"], req["ns_ms"]) == (1, 250) and req["total_ms"] > 0
    assert tuple(req) == schema.REQUEST_KEYS + schema.LINKED_REQUEST_FIELDS
    assert all(tuple(c) == schema.CALL_KEYS for c in calls_of(records))

    assert _same_records(records, never_stopped)  # a restart may emit them in another order


@pytest.mark.parametrize("engine", ENGINES)
def test_the_linker_state_taken_stays_as_it_was_taken(engine):
    """A change handed out (to be stored, perhaps later) is a snapshot: the held records
    in it are not the live linker's, which fills in `token` and `ns_calls` as it links."""
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    records: list[dict] = []
    pipeline = Pipeline(records.append, engine=engine)
    d = pipeline.source("dpm", host=HEAD, tz="UTC", year=2011, profile=DPM)
    n = pipeline.source("dpns", host=HEAD, tz="UTC", year=2011, profile=NS)
    pipeline.track_changes()
    for text in ns_call("08/12 10:00:00.500", "08/12 10:00:00.501", 1, "statg", F2, client="wn1"):
        n.feed(text)
    for text in dpm + ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1):
        (n if "Cns_" in text else d).feed(text)
    taken = pipeline.take_changes().linker
    as_taken = json.dumps(taken, sort_keys=True)
    pipeline.finish()
    assert [r["token"] for r in calls_of(records) if r["op"] == "creat"] == [T1]
    assert json.dumps(taken, sort_keys=True) == as_taken


def put_at(token, surls, s, tids):
    """A put whose put call is at 10:00:<s>, its run from <s>.100 to <s+1>.900, putdone
    at <s+4>: whole seconds `s` of two digits."""
    fast, slow, poll, close = tids
    return (put(f"08/12 10:00:{s:02}.000", fast, token, surls=surls, end=f"08/12 10:00:{s:02}.010")
            + proc_run(f"08/12 10:00:{s:02}.100", f"08/12 10:00:{s + 1:02}.900", slow, token, surls)
            + status(f"08/12 10:00:{s + 2:02}.000", f"08/12 10:00:{s + 2:02}.001", poll, token, "SUCCESS")
            + closing(f"08/12 10:00:{s + 4:02}.000", f"08/12 10:00:{s + 4:02}.010", close, "putdone", token))


@pytest.mark.parametrize("engine", ENGINES)
def test_after_a_clock_step_back_runs_and_calls_from_either_side_of_the_step_do_not_meet(engine):
    """The head node's clock steps back 30 s at 10:00:36. A put processed at 10:00:31 before
    the step, and another of the same file processed 30 s later, its lines stamped
    10:00:31 again: each links its own creat, neither is ambiguous."""
    surls = [f"srm://{HEAD}{F1}"]
    records: list[dict] = []
    pipeline = Pipeline(records.append, engine=engine)
    d = pipeline.source("dpm", host=HEAD, tz="UTC", year=2011, profile=DPM)
    n = pipeline.source("dpns", host=HEAD, tz="UTC", year=2011, profile=NS)
    # Read as replay reads them: each log up to the step, then each log after it.
    for text in ns_call("08/12 10:00:30.500", "08/12 10:00:30.501", 1, "statg", F2, client="wn1"):
        n.feed(text)
    for text in put_at(T1, surls, 31, (3, 27, 5, 9)):
        d.feed(text)
    for text in ns_call("08/12 10:00:31.200", "08/12 10:00:31.450", 2, "creat", F1):
        n.feed(text)
    # The step: stamps 30 s back (10:00:06 is 10:00:36), then 25 s on.
    for text in (call("08/12 10:00:06.000", 4, "ping", end="08/12 10:00:06.001")
                 + put_at(T2, surls, 31, (6, 28, 7, 10))):
        d.feed(text)
    for text in (ns_call("08/12 10:00:06.000", "08/12 10:00:06.001", 1, "statg", F2, client="wn1")
                 + ns_call("08/12 10:00:31.300", "08/12 10:00:31.500", 3, "creat", F1)):
        n.feed(text)
    pipeline.finish()
    assert {r["token"]: r["ns_calls"] for r in requests_of(records)} == {T1: 1, T2: 1}
    assert sorted((c["started"] % 100_000, c["token"]) for c in calls_of(records)
                  if c["op"] == "creat") == [(31_200, T1), (31_300, T2)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_linker_state_saved_before_clock_steps_were_counted_still_loads(engine):
    """`run --state` files and Kafka changelogs written before runs and calls carried the
    steps back of their logs: runs of 8 fields, calls of 3. They load as steps 0 and link
    as before."""
    records: list[dict] = []
    pipeline = Pipeline(records.append, engine=engine)
    d = pipeline.source("dpm", host=HEAD, tz="UTC", year=2011, profile=DPM)
    n = pipeline.source("dpns", host=HEAD, tz="UTC", year=2011, profile=NS)
    for text in ns_call("08/12 10:00:00.500", "08/12 10:00:00.501", 1, "statg", F2, client="wn1"):
        n.feed(text)
    for text in a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000"):
        d.feed(text)
    for text in ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1):
        n.feed(text)
    state = json.loads(json.dumps(pipeline.linker.state()))
    assert [len(r) for r in state["runs"]] == [10] and [len(c) for c in state["calls"]] == [4]
    old = dict(state, runs=[r[:8] for r in state["runs"]], calls=[c[:3] for c in state["calls"]])
    again = Pipeline(records.append, engine=engine)
    again.linker.restore(old)
    assert json.loads(json.dumps(again.linker.state())) == state
    again.linker.finish()
    (req,) = requests_of(records)
    assert (req["ns_calls"], req["ns_ms"]) == (1, 250)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_call_due_after_one_still_inside_an_open_run_goes_out_first_and_that_one_at_the_runs_end(engine):
    """A creat of F1 inside a processing run that lasts eight seconds waits for the run's
    end; a creat of F2 (in no run), held after it, goes out before it once due (the
    DPM log's ping of 08.000 takes the horizon past it). The run's end (08.900) lets the
    first creat of F1 out at once, before the ping of 09.000; a second creat of F1, due
    later, follows. Both link to the run's request."""
    surls = [f"srm://{HEAD}{F1}"]
    dpm = (put("08/12 10:00:01.000", 3, T1, surls=surls, end="08/12 10:00:01.010")
           + proc_run("08/12 10:00:01.100", "08/12 10:00:08.900", 27, T1, surls)
           + status("08/12 10:00:09.000", "08/12 10:00:09.001", 5, T1, "SUCCESS")
           + closing("08/12 10:00:09.500", "08/12 10:00:09.510", 9, "putdone", T1)
           + [text for s in range(4, 10) for text in
              call(f"08/12 10:00:0{s}.000", 4, "ping", end=f"08/12 10:00:0{s}.001")])
    dpns = (ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1)
            + ns_call("08/12 10:00:02.000", "08/12 10:00:02.100", 4, "creat", F2)
            + ns_call("08/12 10:00:03.000", "08/12 10:00:03.100", 2, "creat", F1)
            + [text for s in range(4, 9) for text in
               ns_call(f"08/12 10:00:0{s}.000", f"08/12 10:00:0{s}.001", 1, "statg", F2, client="wn1")])
    (req,), calls = link(dpm, dpns, engine=engine)
    out = [(c["op"], c["started"] % 100_000, c["token"]) for c in calls if c["op"] in ("creat", "ping")]
    assert out == [("ping", 4_000, None), ("ping", 5_000, None), ("ping", 6_000, None),
                   ("ping", 7_000, None), ("ping", 8_000, None),
                   ("creat", 2_000, None), ("creat", 1_200, T1), ("ping", 9_000, None),
                   ("creat", 3_000, T1)]
    assert (req["ns_calls"], req["ns_ms"]) == (2, 350)
