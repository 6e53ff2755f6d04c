"""report/story.py: the summary and observations the report tells from the records."""

from __future__ import annotations

from dpmstream.report.sources import Dataset
from dpmstream.report.story import tell
from tests.report.test_analysis import T0, ZURICH, call, put


def dataset(requests, calls=()):
    data = Dataset(requests=list(requests), calls=list(calls), zone=ZURICH)
    for r in (*requests, *calls):
        data.summary.write(r)
    return data


def test_the_summary_names_the_largest_phase_and_the_full_slow_pool():
    # 4 requests, one slow thread each, running at once for 500 ms: the pool is 4.
    requests = [put(T0 + i) for i in range(4)]
    story = tell(dataset(requests))
    text = " ".join(story.summary)
    assert "4 requests (4 puts)" in text and "all succeeded" in text
    assert "Waiting for a slow thread is " in text
    assert story.slow_pool == 4
    assert "All 4 slow threads were busy" in text


def test_observations_are_at_most_three_each_naming_a_figure():
    requests = [put(T0 + 100 * i, client=f"c{i % 2}", queue=600 + 3000 * (i % 2),
                    status="failed" if i % 7 == 0 else "success") for i in range(40)]
    story = tell(dataset(requests, [call(T0 + i, 30) for i in range(20)]))
    assert 1 <= len(story.observations) <= 3
    assert all(o.figure.startswith("fig-") for o in story.observations)
    scores = [o.score for o in story.observations]
    assert scores == sorted(scores, reverse=True)


def test_a_slow_client_host_is_an_observation():
    requests = [put(T0 + 100 * i, client=f"c{i % 2}", queue=600 + 3000 * (i % 2))
                for i in range(40)]
    story = tell(dataset(requests))
    assert any("Requests from c1" in o.text for o in story.observations)


def test_no_records_tell_no_story():
    assert tell(dataset([])) is None


def test_name_server_time_gets_a_sentence_only_when_the_records_carry_it():
    plain = " ".join(tell(dataset([put(T0)])).summary)
    assert "Name-server calls" not in plain
    linked = " ".join(tell(dataset([put(T0, ns=125), put(T0 + 10, ns=375)])).summary)
    assert "Name-server calls are 50% of a put's slow-thread processing." in linked


def _told(data):
    story = tell(data)
    return story.summary, [(o.score, o.text, o.figure) for o in story.observations]


def test_the_story_read_from_the_summary_that_tallied_the_requests_is_the_one_told_from_them(
        monkeypatch):
    """Where the dataset's summary tallied its requests (as every report's does), each op's
    sums and medians are read from it: the same words as from the requests alone (a
    dataset whose summary is empty), and the same where its series keep a sample only."""
    from dpmstream.streams.sinks import summary as S
    requests = [put(T0 + 100 * i, client=f"c{i % 3}", queue=600 + 300 * (i % 5),
                    proc=500 + 70 * (i % 4), ns=200 + i, status="failed" if i % 9 == 0
                    else "success", op="get" if i % 4 == 0 else "put") for i in range(60)]
    unsummarised = Dataset(requests=list(requests), zone=ZURICH)
    told = _told(unsummarised)
    assert any("is " in s and "% of a get's time" in s for s in told[0])
    assert _told(dataset(requests)) == told
    # Every series of an op sampled, the summary's sample not the requests' (it tallied
    # them in another order, as the compiled tally samples by its own draws): the
    # medians come from the requests, the sums (exact either way) from the summary.
    monkeypatch.setattr(S, "RESERVOIR", 4)
    sampled = dataset(requests[::-1])
    sampled.requests = requests
    assert _told(sampled) == _told(unsummarised)
