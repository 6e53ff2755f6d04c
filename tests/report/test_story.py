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
