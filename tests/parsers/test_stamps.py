"""A line's stamps by its profile's envelope alone (parsers/stamps.py)."""

import tomllib

import pytest

from dpmstream.parsers.clock import ClockError
from dpmstream.parsers.profiles import bundled_profile_paths, profile_from_dict, resolve_profile
from dpmstream.parsers.stamps import LineStamps, LocalStamp

DPM = resolve_profile("lcgdm-dpm")


def test_a_native_line_gives_its_local_stamp_with_milliseconds():
    st = LineStamps(DPM).local(b"12/31 23:59:58.123 1234,5 dpm_srv_ping: ping")
    assert st == LocalStamp(12, 31, 23, 59, 58, 123)
    assert st.to_second == (12, 31, 23, 59, 58)


def test_a_stamp_without_fraction_is_at_the_whole_second():
    assert LineStamps(DPM).local(b"01/02 03:04:05 77 dpm_srv_ping: x").ms == 0


def test_a_line_rsyslog_wrapped_gives_the_daemons_stamp_and_rsyslogs_receive_time():
    line = b"2013-01-01T00:00:01.500+01:00 head01 dpm: 12/31 23:59:59.900 1234,5 dpm_srv_ping: x"
    stamps = LineStamps(DPM)
    assert stamps.local(line) == LocalStamp(12, 31, 23, 59, 59, 900)
    assert stamps.received_ms(line) == 1356994801500   # 2012-12-31T23:00:01.5Z


def test_a_native_line_has_no_receive_time():
    assert LineStamps(DPM).received_ms(b"12/31 23:59:58 1234 dpm_srv_ping: x") is None


def test_an_rsyslog_line_whose_time_does_not_read_is_an_error_not_a_guess():
    with pytest.raises(ClockError):
        LineStamps(DPM).received_ms(b"2013-13-45T99:00:00Z head01 dpm: 12/31 23:59:59 1 f: x")


def test_a_line_of_no_known_shape_has_no_stamp():
    stamps = LineStamps(DPM)
    assert stamps.local(b"Jan  1 00:00:01 head01 sshd[42]: Accepted key") is None
    assert stamps.local(b"") is None


def test_the_stamp_layout_is_the_profiles_data_not_code():
    """A site whose daemon writes day.month: the reader follows the profile's envelope."""
    path = next(p for p in bundled_profile_paths() if p.stem == "lcgdm-dpm")
    data = tomllib.loads(path.read_text())
    native = data["envelope"]["native"]
    data["envelope"]["native"] = native.replace(
        r"(?P<month>\d\d)/(?P<day>\d\d)", r"(?P<day>\d\d)\.(?P<month>\d\d)\.")
    assert data["envelope"]["native"] != native
    site = profile_from_dict(data, "site")
    assert LineStamps(site).local(b"31.12. 23:59:58 1234 dpm_srv_ping: x")[:2] == (12, 31)
    assert LineStamps(DPM).local(b"31.12. 23:59:58 1234 dpm_srv_ping: x") is None
