"""Bad input is counted and reported; it never crashes the run nor loses good lines."""

import random

from dpmstream.parsers.pipeline import Pipeline

from tests.dpmlog import T1, closing, proc, put, status
from tests.helpers import requests_of

GOOD = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
        + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
        + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
        + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))


def run(lines):
    records = []
    pipeline = Pipeline(records.append)
    src = pipeline.source("bad", host="h", tz="UTC", year=2011)
    for item in lines:
        src.feed(item)
    pipeline.finish()
    return records, pipeline


def interleave(bad):
    """Each bad item between two good lines, so the good ones must survive around it."""
    out = []
    for i, good in enumerate(GOOD):
        out.append(good.encode() + b"\n")
        out.append(bad[i % len(bad)])
    return out


def expect_request_intact(records):
    (req,) = requests_of(records)
    assert (req["status"], req["request_ms"], req["proc_ms"], req["done_ms"]) == ("success", 2, 200, 1)


def test_garbage_lines_are_malformed_and_counted():
    records, pipeline = run(interleave([b"hello world\n", b"\n", b"   \n", b"}{ json? \n"]))
    expect_request_intact(records)
    assert pipeline.stats.total("malformed") == len(GOOD)
    assert pipeline.stats.total("parsed") == len(GOOD)
    assert pipeline.stats.bad_examples


def test_binary_data_is_malformed_and_counted():
    rng = random.Random(7)
    blobs = [bytes(rng.randrange(256) for _ in range(200)) + b"\n" for _ in range(5)]
    blobs.append(b"08/12 10:00:00.000 12345,3 dpm_srv_put: \x00\x01\x02 returns 0\n")
    records, pipeline = run(interleave(blobs))
    expect_request_intact(records)
    assert pipeline.stats.total("parsed") == len(GOOD)
    assert pipeline.stats.total() == 2 * len(GOOD)


def test_invalid_utf8_in_a_good_line_is_counted_and_the_line_still_parses():
    latin1 = GOOD[0].replace("Some One", "J\xfcrgen M\xfcller").encode("latin-1") + b"\n"
    items = [latin1] + [g.encode() for g in GOOD[1:]]
    records, pipeline = run(items)
    expect_request_intact(records)
    assert pipeline.stats.decode_errors == 1


def test_truncated_lines_are_counted_not_fatal():
    cut = [GOOD[0][:n].encode() for n in (5, 17, 30, 45)]
    records, pipeline = run(interleave(cut))
    expect_request_intact(records)
    assert pipeline.stats.total("malformed") + pipeline.stats.total("unmatched") == len(GOOD)


def test_a_one_megabyte_line_is_malformed_and_reported_as_too_long():
    huge = ("08/12 10:00:00.000 12345,3 dpm_srv_put: DP092 - put request by /CN=" + "x" * 1_000_000).encode()
    records, pipeline = run(interleave([huge]))
    expect_request_intact(records)
    assert pipeline.stats.total("malformed") == len(GOOD)
    assert any("longer than" in reason for _, _, reason, _ in pipeline.stats.bad_examples)


def test_lines_out_of_order_by_hours_do_not_crash_and_are_kept():
    stray = [b"08/12 07:00:00.000 12345,9 dpm_srv_ping: returns 0\n",
             b"08/11 23:59:59.000 12345,9 dpm_srv_put: DP098 - put 0 srm://x\n"]
    records, pipeline = run(interleave(stray))
    expect_request_intact(records)
    assert pipeline.stats.total("parsed") == 2 * len(GOOD)
    assert pipeline.stats.reassembly.stray_returns >= 1


def test_an_impossible_date_is_malformed_with_its_reason():
    records, pipeline = run(interleave([b"02/30 10:00:00.000 12345,3 dpm_srv_ping: returns 0\n"]))
    expect_request_intact(records)
    assert any("invalid date" in reason for _, _, reason, _ in pipeline.stats.bad_examples)
