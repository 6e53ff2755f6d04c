"""A head node's DPM and name-server logs reach the worker from two files, and one may run
seconds ahead of the other (rsyslog ships each file on its own). Through the real worker
and a real broker: the links are kept, and no record is held past the bound
docs/record-rules.md gives (issue 26 item 9)."""

from __future__ import annotations


import pytest

from tests.dpmlog import T1, call
from tests.parsers.test_linking import F1, F2, HEAD, a_put, ns_call
from tests.streams.kafka.test_worker import DPM, DPNS, run_worker, topics, worker_output
from tests.worker_helpers import RECEIVED_2011, encode, produce

pytestmark = pytest.mark.services


class Files:
    """Envelopes of one head node's DPM and DPNS files, each with its own byte offsets."""

    def __init__(self):
        self.offsets = {DPM: 0, DPNS: 0}

    def __call__(self, path, lines):
        out = []
        for text in lines:
            out.append((HEAD.encode(), encode(HEAD, path, self.offsets[path], RECEIVED_2011, text)))
            self.offsets[path] += len(text.encode()) + 1
        return out


def requests_and_calls(broker, t):
    out = worker_output(broker, t)
    return ([r for r in out if r["kind"] == "request"],
            [r for r in out if r["kind"] == "call" and r["op"] == "creat"])


@pytest.mark.parametrize("restart", [False, True], ids=["one-worker", "restarted"])
def test_a_name_server_log_read_ahead_of_the_dpm_logs_last_lines_loses_no_link(
        kafka_broker, engine, restart):
    """The DPNS file's lines reach the worker 11 s ahead of the DPM file's last lines (the
    request's processing run): the run and its creat call still link, in a worker that
    never stopped and in one restored from its state between the two logs' lines."""
    t = topics("lag")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    files = Files()
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    first = (files(DPM, dpm[:3])
             + files(DPNS, ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1))
             + files(DPNS, ns_call("08/12 10:00:12.000", "08/12 10:00:12.001", 1, "statg", F2,
                                   client="wn1")))
    # The DPM log's last lines, then its next call 20 s on: the DPM log has moved past the
    # request, the name-server log past its call.
    rest = files(DPM, dpm[3:] + call("08/12 10:00:20.000", 4, "ping", end="08/12 10:00:20.001"))
    produce(kafka_broker.bootstrap, t["lines"], first)
    if restart:
        run_worker(kafka_broker, t, len(first), partitions=1)
        produce(kafka_broker.bootstrap, t["lines"], rest)
        run_worker(kafka_broker, t, len(rest), partitions=1)
    else:
        produce(kafka_broker.bootstrap, t["lines"], rest)
        run_worker(kafka_broker, t, len(first) + len(rest), partitions=1)
    (req,), (creat,) = requests_and_calls(kafka_broker, t)
    assert (req["token"], req["ns_calls"], req["ns_s"]) == (T1, 1, 0.25)
    assert creat["token"] == T1


def test_a_name_server_log_quiet_for_over_a_minute_holds_no_record_of_the_worker(
        kafka_broker, engine):
    """The bound: the name-server log falls quiet after the request's call while the DPM
    log goes on. The request is held while the name-server log lags by up to a minute of
    the DPM log's event time, then let out: a live worker never holds a record for a log
    that stopped."""
    t = topics("quiet")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    files = Files()
    dpm = a_put(T1, [f"srm://{HEAD}{F1}"], 1, done="10:00:03.000")
    creat = files(DPNS, ns_call("08/12 10:00:01.200", "08/12 10:00:01.450", 2, "creat", F1))
    within = files(DPM, dpm + call("08/12 10:00:50.000", 4, "ping", end="08/12 10:00:50.001"))
    produce(kafka_broker.bootstrap, t["lines"], creat + within)
    run_worker(kafka_broker, t, len(creat) + len(within), partitions=1)
    assert requests_and_calls(kafka_broker, t)[0] == []  # the name-server log may still come
    past = files(DPM, call("08/12 10:01:10.000", 4, "ping", end="08/12 10:01:10.001"))
    produce(kafka_broker.bootstrap, t["lines"], past)
    run_worker(kafka_broker, t, len(past), partitions=1)
    (req,), (linked,) = requests_and_calls(kafka_broker, t)
    assert (req["ns_calls"], linked["token"]) == (1, T1)
