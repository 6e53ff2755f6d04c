"""streams/kafka/envelope.py: a log line as it travels on the lines topic, and its received time."""

from __future__ import annotations

import os

import pytest

from dpmstream.streams.kafka import envelope as envelope_module
from dpmstream.streams.kafka.envelope import (
    EnvelopeError, decode, decode_fields, encode, ms_to_rfc3339, received_to_ms, rfc3339_to_ms,
)


def test_envelope_round_trips_and_received_gives_epoch_milliseconds():
    raw = encode("h1", "/var/log/dpm/log", 42, "2011-08-12T14:31:43.118402+02:00", "08/12 line")
    env = decode(raw)
    assert (env.host, env.path, env.offset, env.line) == ("h1", "/var/log/dpm/log", 42, "08/12 line")
    assert env.received_ms == 1313152303118
    assert ms_to_rfc3339(1313152303118) == "2011-08-12T12:31:43.118000Z"
    assert rfc3339_to_ms(ms_to_rfc3339(1313152303118)) == 1313152303118


@pytest.mark.parametrize("raw, reason", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"path": "/p", "offset": 1, "line": "x"}', "missing host"),
    (b'{"host": "h", "offset": 1, "line": "x"}', "missing path"),
    (b'{"host": "h", "path": "/p", "offset": -1, "line": "x"}', "offset"),
    (b'{"host": "h", "path": "/p", "offset": 1}', "missing line"),
    (None, "empty"),
])
def test_envelope_that_cannot_be_used_is_rejected_with_its_reason(raw, reason):
    with pytest.raises(EnvelopeError, match=reason):
        decode(raw)


@pytest.mark.parametrize("raw, reason", [
    (b'{"host":"h","path":"/p","offset":' + b"[" * 1100 + b"]" * 1100 + b',"line":"x"}', "too_deep"),
    (b"[" * 1100 + b"]" * 1100, "too_deep"),
    (b"{" * 1100, "not_json"),
    (b'{"host":"h\xff","path":"/p","offset":1,"line":"x"}', "not_utf8"),
    (b"", "no_value"),
    (None, "no_value"),
    (b"null", "not_object"),
    (b'"a text"', "not_object"),
    (b'{"host":null,"path":"/p","offset":1,"line":"x"}', "bad_host"),
    (encode("h" * 254, "/p", 1, "2011-08-12T14:31:43.118402Z", "x"), "bad_host"),
    (b'{"host":"\\ud800","path":"/p","offset":1,"line":"x"}', "bad_host"),
    (encode("h", "/" * 4097, 1, "2011-08-12T14:31:43.118402Z", "x"), "bad_path"),
    (b'{"host":"h","path":"/p","offset":true,"line":"x"}', "bad_offset"),
    (b'{"host":"h","path":"/p","offset":9223372036854775808,"line":"x"}', "bad_offset"),
    (b'{"host":"h","path":"/p","offset":"' + b"9" * 5000 + b'","line":"x"}', "bad_offset"),
    (b'{"host":"h","path":"/p","offset":NaN,"line":"x"}', "bad_offset"),
    (b'{"host":"h","path":"/p","offset":1,"line":7}', "bad_line"),
    (b"x" * ((1 << 20) + 1), "too_large"),
])
def test_hostile_records_are_refused_with_a_reason_from_the_bounded_set(raw, reason):
    with pytest.raises(EnvelopeError) as refused:
        decode_fields(raw)
    assert refused.value.reason == reason
    assert reason in envelope_module.BAD_REASONS
    assert len(str(refused.value)) < 200   # says why, never repeats the record


def test_the_longest_host_and_path_rsyslog_can_send_are_taken():
    raw = encode("h" * 253, "/" * 4096, 9223372036854775807, "2011-08-12T14:31:43.118402Z", "x")
    assert decode_fields(raw)[:3] == ("h" * 253, "/" * 4096, 9223372036854775807)


@pytest.mark.parametrize("stamp", [
    "2011-08-12T14:31:43.118402+02:00", "2011-08-12T14:31:43.999999-05:30",
    "2011-08-12T14:31:43.000999Z", "2011-08-12T14:31:43.118402z",   # rsyslog's forms
    "2011-08-12T14:31:43Z", "2011-08-12T14:31:43.1+02:00", "2011-08-12T14:31:43.118+00:00",
])
def test_received_times_in_every_rfc3339_form_give_the_same_milliseconds_as_a_full_parse(stamp):
    import datetime as dt
    full = dt.datetime.fromisoformat(stamp.replace("z", "Z"))
    assert rfc3339_to_ms(stamp) == int(full.timestamp()) * 1000 + full.microsecond // 1000
    assert rfc3339_to_ms(stamp) == rfc3339_to_ms(stamp)   # again, from the cached second


@pytest.mark.parametrize("stamp", ["2011-08-12T14:31:43", "2011-08-12T14:31:43.11840x+02:00",
                                   "2011-08-12T14:31:43.118402+0200x", "yesterday"])
def test_received_times_without_an_offset_or_malformed_are_refused(stamp):
    with pytest.raises(ValueError):
        rfc3339_to_ms(stamp)


def test_envelope_with_an_escaped_lone_surrogate_is_still_decoded():
    env = decode(b'{"host":"h","path":"/p","offset":1,"line":"a\\ud800b"}')
    assert env.line == "a\ud800b"


def test_envelope_with_a_bad_received_time_keeps_the_line():
    env = decode(b'{"host":"h","path":"/p","offset":"7","received":"yesterday","line":"x"}')
    assert env.offset == 7 and env.received_ms is None and env.line == "x"


@pytest.mark.parametrize("stamps", [
    ["2011-08-12T14:31:43.118402+02:00", "2011-08-12T14:31:43.999999+02:00",
     "2011-08-12T14:31:43.000001-05:30", "2011-08-12T14:31:43.118402Z", "2011-08-12T14:31:43.118402z"],
    ["2011-08-12T14:31:43.11840x+02:00", "2011-08-12T14:31:43.118402+0200x", "yesterday",
     "2011-08-12T14:31:43Z", "2011-08-12T14:31:43.1+02:00", "2011-08-12T14:31:61.118402+02:00"],
])
def test_received_times_read_through_the_per_second_cache_match_a_full_parse(stamps):
    """Same second, other offsets or fractions, refused forms: the cache never answers
    for a stamp the full parse reads otherwise."""
    def full(stamp):
        try:
            return rfc3339_to_ms(stamp)
        except ValueError:
            return None
    for _ in range(2):   # the second time from the cache
        assert [received_to_ms(s) for s in stamps] == [full(s) for s in stamps]


def test_envelope_fields_are_the_envelope_as_a_plain_tuple():
    raw = encode("h1", "/p", 42, "2011-08-12T14:31:43.118402+02:00", "08/12 line\r\n")
    assert decode_fields(raw) == tuple(decode(raw)) == ("h1", "/p", 42, 1313152303118, "08/12 line")


# -- the extension's decoder (native/src/envelope.rs) against python_decode_fields ----------

compiled_decode = envelope_module._compiled_decode
needs_compiled = pytest.mark.skipif(
    compiled_decode is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the extension is not built here")

RSYSLOG_FORM = [   # what rsyslog writes: the extension must take every one of these
    encode("h1", "/var/log/dpm/log", 42, "2011-08-12T14:31:43.118402+02:00", "08/12 line\r\n"),
    encode("h1", "/p", 0, "2012-02-29T23:59:59.999999Z", "leap day"),
    encode("h1", "/p", 7, "1969-12-31T23:59:59.000500-05:30", "before the epoch"),
    encode("héad", "/p/ü", 9, "2011-08-12T14:31:43.118402z", 'quote " backslash \\ tab \t é ✓ 𝄞'),
    b'{ "line" : "x\\u00e9\\ud834\\udd1e\\n" , "offset":5,"path":"/p","host":"h",'
    b'"received":"2011-08-12T14:31:43.118402+14:00" }',
    b'{"host":"h","path":"/p","offset":1,"line":"no received time"}',
    b'{"host":"h","path":"/p","offset":123456789012345678,"received":'
    b'"9999-12-31T23:59:59.999999-23:59","line":"\\/\\b\\f\\r\\r\\n"}',
    # member names spelt with escapes (not the names as rsyslog writes them)
    b'{"h\\u006fst":"h","\\u0070ath":"/p","offse\\u0074":3,"line":"names escaped"}',
    # a host of 253 characters in twice as many bytes: characters are counted
    encode("é" * 253, "/p", 1, "2011-08-12T14:31:43.118402Z", "x"),
]
ELSEWHERE = [   # valid or not, Python's to decode (and to report)
    None, "a str", b"", b"[]", b"{}", b"not json", b'{"host":"h"}',
    b'{"host":"h","path":"/p","offset":"7","received":"2011-08-12T14:31:43.118402Z","line":"x"}',
    b'{"host":"h","path":"/p","offset":-1,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1.0,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1e3,"line":"x"}',
    b'{"host":"h","path":"/p","offset":007,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1234567890123456789012,"line":"x"}',
    b'{"host":"","path":"/p","offset":1,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"line":"x","extra":1}',
    b'{"hostname":"h","path":"/p","offset":1,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"line":"x","line ":"y"}',
    b'{"host":"h","host":"g","path":"/p","offset":1,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"line":"lone \\ud800 surrogate"}',
    b'{"host":"h","path":"/p","offset":1,"line":"raw\tcontrol"}',
    b'{"host":"h","path":"/p","offset":1,"line":"bad utf-8 \xff"}',
    b'{"host":"h","path":"/p","offset":1,"line":"x"} trailing',
    b'{"host":"h","path":"/p","offset":1,"line":null}',
    b'{"host":"h","path":"/p","offset":1,"received":null,"line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-08-12T14:31:43Z","line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-08-12 14:31:43.118402Z","line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-02-29T14:31:43.118402Z","line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-08-12T24:31:43.118402Z","line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-08-12T14:31:43.118402+24:00","line":"x"}',
    b'{"host":"h","path":"/p","offset":1,"received":"2011-08-12T14:31:43.11840\xd9\xa9Z","line":"x"}',
    # hostile (issue 26): nested, too long a host or path, a host no key can carry
    b'{"host":"h","path":"/p","offset":' + b"[" * 1100 + b"]" * 1100 + b',"line":"x"}',
    encode("h" * 254, "/p", 1, "2011-08-12T14:31:43.118402Z", "x"),
    encode("é" * 254, "/p", 1, "2011-08-12T14:31:43.118402Z", "x"),
    encode("h", "/" * 4097, 1, "2011-08-12T14:31:43.118402Z", "x"),
    b'{"host":"\\ud800","path":"/p","offset":1,"line":"x"}',
    encode("h", "/p", 1, "2011-08-12T14:31:43.118402Z", "x" * (1 << 20)),   # too large
]


def reference(raw):
    try:
        return envelope_module.python_decode_fields(raw)
    except EnvelopeError as exc:
        return ("error", str(exc))


@needs_compiled
@pytest.mark.parametrize("raw", RSYSLOG_FORM)
def test_the_extension_decodes_rsyslogs_form_exactly_as_python_does(raw):
    assert compiled_decode(raw) is not None, "left to Python"
    assert compiled_decode(raw) == reference(raw)
    assert decode_fields(raw) == reference(raw)


@needs_compiled
@pytest.mark.parametrize("raw", ELSEWHERE)
def test_the_extension_leaves_every_other_record_to_python(raw):
    assert compiled_decode(raw) is None
    if reference(raw)[0] == "error":
        with pytest.raises(EnvelopeError):
            decode_fields(raw)
    else:
        assert decode_fields(raw) == reference(raw)


@needs_compiled
def test_simulated_envelopes_decode_alike_whichever_decoder_takes_them():
    from random import Random
    rng = Random(17)
    stamps = ["2011-08-12T14:31:43.118402+02:00", "2011-12-31T23:59:59.999999Z",
              "2016-02-29T00:00:00.000000-08:00", "2011-08-12T14:31:43.1184+02:00"]
    for i in range(2000):
        line = "".join(rng.choice('ab "\\\t\r\néü𝄞/{}:,') for _ in range(rng.randrange(40)))
        raw = encode(f"h{i % 3}", "/var/log/dpm/log", rng.randrange(1 << 40),
                     rng.choice(stamps), line)
        assert decode_fields(raw) == reference(raw)


@needs_compiled
def test_host_and_path_stay_right_when_more_files_interleave_than_the_extension_keeps_named():
    """The extension hands out the str objects of the host and path names it decoded
    lately (16 of them): the cycles below go past that, reuse names, and evict them."""
    from random import Random
    rng = Random(5)
    files = [(f"head{n % 7:02d}.example.org", f"/var/log/{'dpm' if n % 2 else 'dpns'}/log.{n}")
             for n in range(40)]
    runs = [files[:3]] * 50 + [files] * 5 + [files[::-1]] * 5
    runs += [[rng.choice(files) for _ in range(300)]]
    for run in runs:
        for host, path in run:
            raw = encode(host, path, rng.randrange(1 << 30), "2011-08-12T14:31:43.118402+02:00", "x")
            assert compiled_decode(raw)[:2] == (host, path)
