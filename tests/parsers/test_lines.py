"""parsers/lines.py: one raw line -> an Event, or the reason it is not one.

All through LineParser.parse_python, the pure-Python reference parser, with the bundled
profiles' regexes (the compiled twin is compared against it in test_fastpath.py).
"""

from datetime import datetime, timezone

import pytest

from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.events import Event
from dpmstream.parsers.lines import (
    FOREIGN, MALFORMED, MAX_LINE_BYTES, PARSED, ROUTED, UNMATCHED_RESULT, LineParser, second_key,
)
from dpmstream.parsers.profiles import resolve_profile

from tests import dpmlog
from tests.helpers import REAL

DPM = resolve_profile("lcgdm-dpm")
NS = resolve_profile("lcgdm-ns")
SRM = resolve_profile("lcgdm-srm")


def utc_ms(*when) -> int:
    return int(datetime(*when, tzinfo=timezone.utc).timestamp() * 1000)


def parser(profile=DPM, tz="UTC", year=2011, host="head01", other_tags=frozenset(),
           zone_given=False):
    return LineParser(profile, EventClock(tz, year=year, zone_given=zone_given), host, other_tags)


def real_line(name: str, index: int = 0) -> str:
    with open(f"{REAL}/{name}") as f:
        return f.read().splitlines()[index]


# -- parsed -------------------------------------------------------------------------------

def test_a_dpm_call_line_gives_an_event_with_event_time_from_the_stamp():
    p = parser()
    line = dpmlog.call("08/12 10:00:00.123", 7, "put", client="ui.cern.ch", pid=4242)[0]
    ev = p.parse_python(line)
    assert p.result == PARSED
    assert ev == Event(ts=utc_ms(2011, 8, 12, 10, 0, 0) + 123, host="head01", daemon="dpm",
                       pid=4242, tid=7, func="dpm_srv_put", role="call", op="put",
                       client="ui.cern.ch")


def test_a_token_line_carries_op_token_and_file_count():
    line = dpmlog.put("08/12 10:00:01", 3, dpmlog.T1, surls=("srm://a", "srm://b"))[1]
    ev = parser().parse_python(line)
    assert (ev.role, ev.op, ev.token, ev.nfiles) == ("token", "put", dpmlog.T1, 2)


def test_a_file_line_carries_the_surl():
    line = dpmlog.put("08/12 10:00:01", 3, dpmlog.T1, surls=("srm://head/dpm/x/f9",))[2]
    ev = parser().parse_python(line)
    assert (ev.role, ev.surl) == ("file", "srm://head/dpm/x/f9")


def test_a_returns_line_carries_a_negative_rc_as_an_int():
    ev = parser().parse_python(dpmlog.line("08/12 10:00:02", 3, "dpm_srv_put", "returns -1"))
    assert (ev.role, ev.rc) == ("returns", -1)


def test_a_status_line_carries_the_state():
    ev = parser().parse_python(
        dpmlog.line("08/12 10:00:02", 3, "dpm_srv_getstatus_putreq", "request status DPM_SUCCESS"))
    assert (ev.role, ev.state) == ("status", "SUCCESS")


def test_a_main_thread_line_has_thread_minus_one():
    ev = parser().parse_python(dpmlog.line("08/12 10:00:02", None, "dpm_main", "started (1.8.10)"))
    assert (ev.tid, ev.role, ev.pid) == (-1, "startup", 12345)


def test_a_space_padded_pid_is_read_as_a_number():
    ev = parser().parse_python("08/12 10:00:02   812,1 dpm_srv_put: returns 0")
    assert ev.pid == 812


@pytest.mark.parametrize("frac, ms", [("", 0), (".5", 500), (".12", 120), (".123", 123),
                                      (".123999", 123)])
def test_fractions_of_a_second_become_milliseconds_truncated(frac, ms):
    ev = parser().parse_python(f"08/12 10:00:02{frac} 1,1 dpm_srv_put: returns 0")
    assert ev.ts == utc_ms(2011, 8, 12, 10, 0, 2) + ms


def test_the_stamp_is_read_in_the_streams_time_zone():
    # Zurich is UTC+2 in August: 10:00 local is 08:00 UTC.
    ev = parser(tz="Europe/Zurich").parse_python("08/12 10:00:00 1,1 dpm_srv_put: returns 0")
    assert ev.ts == utc_ms(2011, 8, 12, 8, 0, 0)


def test_lines_of_the_same_second_share_the_second_but_keep_their_fraction():
    p = parser()
    a = p.parse_python("08/12 10:00:00.100 1,1 dpm_srv_put: returns 0")
    b = p.parse_python("08/12 10:00:00.900 1,1 dpm_srv_put: returns 0")
    assert b.ts - a.ts == 800


def test_a_real_name_server_call_line_is_parsed_with_the_ns_profile():
    ev = parser(NS, tz="Europe/Prague", year=2013).parse_python(real_line("lfc/lfc-mkdir.log", 0))
    # 19:21:50.736 in Prague (CEST, UTC+2) on 10 July 2013.
    assert ev == Event(ts=utc_ms(2013, 7, 10, 17, 21, 50) + 736, host="head01", daemon="dpns",
                       pid=20713, tid=4, func="Cns_srv_mkdir", role="call", op="mkdir",
                       client="ui1.egee.cesnet.cz")


def test_a_real_name_server_detail_line_carries_the_path():
    p = parser(NS, tz="Europe/Prague", year=2013)
    ev = p.parse_python(real_line("lfc/lfc-mkdir.log", 1))
    assert p.result == PARSED
    assert (ev.role, ev.path) == ("detail", "/grid/voce/ludacka2")


@pytest.mark.parametrize("message, path", [
    ("NS098 - lstat 0 /grid/voce/ludacka2", "/grid/voce/ludacka2"),
    ("NS098 - access 6 /grid/voce/ludacka/text_file.txt", "/grid/voce/ludacka/text_file.txt"),
    ("NS098 - statg /grid/voce/f1 6f2b", "/grid/voce/f1"),
    ("NS098 - chdir ..", None),
    ("NS098 - getlinks  08043bf1-37e7-4f53-b642-cb474db58f90", None),
])
def test_a_name_server_detail_line_carries_the_path_after_the_op_or_after_its_number(message, path):
    """Real LFC wording: access and lstat put a number (the mode, a file id) before the path."""
    p = parser(NS, tz="Europe/Prague", year=2013)
    ev = p.parse_python(f"07/10 19:28:38.919 20713,5 Cns_srv_x: {message}")
    assert p.result == PARSED
    assert (ev.role, ev.path) == ("detail", path)


def test_a_real_name_server_returns_line_carries_its_rc():
    ev = parser(NS, tz="Europe/Prague", year=2013).parse_python(real_line("lfc/lfc-ls-2.log", 2))
    assert (ev.role, ev.rc, ev.func) == ("returns", 2, "Cns_srv_lstat")


def test_a_real_srm_request_line_is_a_call_of_the_srm_daemon():
    p = parser(SRM, year=2011)
    ev = p.parse_python(real_line("srmv2-manpage-example.log", 0))
    assert p.result == PARSED
    assert (ev.daemon, ev.func, ev.role, ev.client, ev.pid, ev.tid) == (
        "srmv2.2", "PrepareToPut", "call", "testbed006.cnaf.infn.it", 22343, 0)
    assert ev.ts == utc_ms(2011, 8, 4, 21, 18, 47)


def test_an_rsyslog_line_takes_its_host_from_the_prefix():
    p = parser()
    ev = p.parse_python("2011-08-12T10:00:00.000000+00:00 disk07 dpm[4242]: "
                        "08/12 10:00:00.250 4242,3 dpm_srv_put: returns 0")
    assert p.result == PARSED
    assert (ev.host, ev.pid, ev.tid, ev.rc) == ("disk07", 4242, 3, 0)
    assert ev.ts == utc_ms(2011, 8, 12, 10, 0, 0) + 250


def test_an_rsyslog_line_dates_the_stamp_by_its_receive_year_not_the_streams():
    p = parser(year=2011)
    ev = p.parse_python("2014-08-12T10:00:00Z disk07 dpm: "
                        "08/12 10:00:00 4242,3 dpm_srv_put: returns 0")
    assert ev.ts == utc_ms(2014, 8, 12, 10, 0, 0)


def rsyslog_line(rtime: str, stamp: str, msg: str = "dpm_srv_put: returns 0") -> str:
    return f"{rtime} dpmhead01 dpm[12345]: {stamp} 12345,3 {msg}"


def test_without_tz_an_rsyslog_lines_stamp_is_read_in_the_offset_its_prefix_states():
    """Issue 27: a Zurich log written through rsyslog, replayed on a UTC machine with no
    --tz, read two hours off. The prefix says +02:00: the stamp is 12:31:43.118 UTC."""
    p = parser(tz="UTC")
    ev = p.parse_python(rsyslog_line("2011-08-12T14:31:43.118402+02:00", "08/12 14:31:43.118"))
    assert p.result == PARSED
    assert ev.ts == utc_ms(2011, 8, 12, 12, 31, 43) + 118
    winter = p.parse_python(rsyslog_line("2011-01-12T14:31:43.900000+01:00", "01/12 14:31:43.899"))
    assert winter.ts == utc_ms(2011, 1, 12, 13, 31, 43) + 899


def test_the_prefixs_offset_comes_before_the_profiles_zone():
    p = parser(tz="America/New_York")   # the profile's zone: no --tz given
    ev = p.parse_python(rsyslog_line("2011-08-12T14:31:43+02:00", "08/12 14:31:43"))
    assert ev.ts == utc_ms(2011, 8, 12, 12, 31, 43)


def test_a_given_tz_comes_before_the_prefixs_offset():
    p = parser(tz="Europe/London", zone_given=True)
    ev = p.parse_python(rsyslog_line("2011-08-12T14:31:43+02:00", "08/12 14:31:43"))
    assert ev.ts == utc_ms(2011, 8, 12, 13, 31, 43)   # 14:31:43 BST
    assert p.stated_offsets == []


def test_the_repeated_hour_of_a_prefixed_file_is_told_apart_by_the_offsets():
    """Zurich, 2011-10-30: 02:59:59 CEST, then the clock goes back to 02:00:00 CET."""
    p = parser(tz="UTC")
    lines = [("2011-10-30T02:30:00.000000+02:00", "10/30 02:30:00.000"),
             ("2011-10-30T02:59:59.900000+02:00", "10/30 02:59:59.900"),
             ("2011-10-30T02:00:00.100000+01:00", "10/30 02:00:00.100"),
             ("2011-10-30T02:30:00.000000+01:00", "10/30 02:30:00.000")]
    times = [p.parse_python(rsyslog_line(*pair)).ts for pair in lines]
    assert times == [utc_ms(2011, 10, 30, 0, 30, 0), utc_ms(2011, 10, 30, 0, 59, 59) + 900,
                     utc_ms(2011, 10, 30, 1, 0, 0) + 100, utc_ms(2011, 10, 30, 1, 30, 0)]
    assert p.stated_offsets == [(times[0], 120), (times[2], 60)]


@pytest.mark.parametrize("before, after", [
    # autumn: written at 02:59:59.950 CEST, stamped by rsyslog at 02:00:00.050 CET
    (("2011-10-30T02:59:59.000000+02:00", "10/30 02:59:59.000"),
     ("2011-10-30T02:00:00.050000+01:00", "10/30 02:59:59.950")),
    # spring: written at 01:59:59.950 CET, stamped by rsyslog at 03:00:00.050 CEST
    (("2011-03-27T01:59:59.000000+01:00", "03/27 01:59:59.000"),
     ("2011-03-27T03:00:00.050000+02:00", "03/27 01:59:59.950")),
])
def test_a_line_written_before_an_offset_change_and_received_after_it_keeps_the_old_offset(
        before, after):
    p = parser(tz="UTC")
    first = p.parse_python(rsyslog_line(*before)).ts
    late = p.parse_python(rsyslog_line(*after)).ts
    assert late - first == 950


def test_a_line_queued_across_the_autumn_change_keeps_the_offset_it_was_written_in():
    """Written at 02:40 CEST, stamped by rsyslog 30 minutes later at 02:10 CET: read at
    +01:00 the stamp would come 30 minutes after its own receipt."""
    p = parser(tz="UTC")
    p.parse_python(rsyslog_line("2011-10-30T02:39:00+02:00", "10/30 02:39:00"))
    ev = p.parse_python(rsyslog_line("2011-10-30T02:10:00+01:00", "10/30 02:40:00"))
    assert ev.ts == utc_ms(2011, 10, 30, 0, 40, 0)


def test_a_line_written_after_the_change_and_queued_keeps_its_prefixs_offset():
    """Written at 02:20 CET (after the change), stamped 20 minutes later at 02:40 CET:
    read at +02:00 instead it would wait an hour longer for its receipt."""
    p = parser(tz="UTC")
    p.parse_python(rsyslog_line("2011-10-30T02:59:00+02:00", "10/30 02:59:00"))
    ev = p.parse_python(rsyslog_line("2011-10-30T02:40:00+01:00", "10/30 02:20:00"))
    assert ev.ts == utc_ms(2011, 10, 30, 1, 20, 0)


def test_the_line_ref_dates_a_native_line():
    p = parser(year=2011)
    p.line_ref = (2015, 1)  # received in January 2015: a December stamp is of 2014
    ev = p.parse_python("12/31 23:59:59 1,1 dpm_srv_put: returns 0")
    assert ev.ts == utc_ms(2014, 12, 31, 23, 59, 59)


def test_changing_the_line_ref_forgets_seconds_worked_out_under_the_old_one():
    p = parser(year=2011)
    line = "06/01 00:00:00 1,1 dpm_srv_put: returns 0"
    p.line_ref = (2012, 6)
    first = p.parse_python(line)
    p.line_ref = (2013, 6)
    second = p.parse_python(line)
    assert (first.ts, second.ts) == (utc_ms(2012, 6, 1), utc_ms(2013, 6, 1))


# -- unmatched ----------------------------------------------------------------------------

def test_an_enveloped_line_no_role_knows_is_unmatched():
    p = parser()
    assert p.parse_python("08/12 10:00:00 1,1 dpm_srv_put: something nobody logs") is None
    assert p.result == UNMATCHED_RESULT


def test_a_result_is_reset_by_the_next_line():
    p = parser()
    p.parse_python("08/12 10:00:00 1,1 dpm_srv_put: something nobody logs")
    assert p.parse_python("08/12 10:00:00 1,1 dpm_srv_put: returns 0") is not None
    assert p.result == PARSED


# -- malformed ----------------------------------------------------------------------------

@pytest.mark.parametrize("line, reason", [
    ("", "no envelope"),
    ("garbage without a stamp", "no envelope"),
    ("08/12 10:00", "no envelope"),  # truncated
    ("08/12 10:00:00 1,1 dpm_srv_put: returns 0\x00\x01", "binary data (NUL byte)"),
])
def test_lines_without_an_envelope_are_malformed_with_a_reason(line, reason):
    p = parser()
    assert p.parse_python(line) is None
    assert (p.result, p.reason) == (MALFORMED, reason)


@pytest.mark.parametrize("stamp", ["13/12 10:00:00", "02/30 10:00:00", "08/12 25:00:00"])
def test_an_impossible_date_is_malformed_not_a_crash(stamp):
    p = parser()
    assert p.parse_python(f"{stamp} 1,1 dpm_srv_put: returns 0") is None
    assert p.result == MALFORMED
    assert p.reason != ""


def test_a_line_longer_than_the_limit_is_malformed_before_any_matching():
    p = parser()
    head = "08/12 10:00:00 1,1 dpm_srv_put: returns 0 "
    assert p.parse_python(head + "x" * (MAX_LINE_BYTES - len(head) + 1)) is None
    assert (p.result, p.reason) == (MALFORMED, f"line longer than {MAX_LINE_BYTES} bytes")


def test_a_line_exactly_at_the_limit_is_still_read():
    p = parser()
    head = "08/12 10:00:00 1,1 dpm_srv_put: DP098 - put "
    p.parse_python(head + "x" * (MAX_LINE_BYTES - len(head)))
    assert p.result != MALFORMED


# -- routed and foreign -------------------------------------------------------------------

def test_an_rsyslog_line_of_another_profiles_daemon_is_routed_with_its_tag():
    p = parser(other_tags=frozenset({"dpns", "dpm"}))
    line = ("2011-08-12T10:00:00Z head01 dpns[99]: "
            "08/12 10:00:00 99,1 Cns_srv_stat: returns 0")
    assert p.parse_python(line) is None
    assert (p.result, p.routed_tag) == (ROUTED, "dpns")


def test_own_tags_are_never_routed_away():
    p = parser(other_tags=frozenset({"dpm", "dpns"}))
    assert p.other_tags == frozenset({"dpns"})
    p.parse_python("2011-08-12T10:00:00Z head01 dpm: 08/12 10:00:00 1,1 dpm_srv_put: returns 0")
    assert p.result == PARSED


def test_an_rsyslog_line_of_another_daemon_without_a_native_envelope_is_routed():
    p = parser(other_tags=frozenset({"srmv2.2"}))
    assert p.parse_python("2011-08-12T10:00:00Z head01 srmv2.2: not a daemon stamp") is None
    assert (p.result, p.routed_tag) == (ROUTED, "srmv2.2")


def test_an_rsyslog_line_of_a_program_no_profile_knows_is_foreign():
    p = parser(other_tags=frozenset({"dpns"}))
    line = "2011-08-12T10:00:00Z head01 sshd[812]: Accepted publickey for root"
    assert p.parse_python(line) is None
    assert p.result == FOREIGN


def test_an_rsyslog_line_tagged_as_this_daemon_but_without_an_envelope_is_malformed():
    p = parser()
    assert p.parse_python("2011-08-12T10:00:00Z head01 dpm: half a line") is None
    assert (p.result, p.reason) == (MALFORMED, "no envelope")


# -- second_key ---------------------------------------------------------------------------

def test_second_key_packs_two_digit_fields_in_order():
    assert second_key("08", "12", "10", "05", "09") == 812100509
    assert second_key("12", "31", "23", "59", "59") == 1231235959
