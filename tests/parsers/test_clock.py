"""Event time: year inference, Dec -> Jan rollover and the repeated hour of DST's end."""

import pytest

from dpmstream.parsers.clock import (
    ClockError, EventClock, first_line_year, nearest_year, offset_local_ms,
    rfc3339_offset_minutes, year_from_file_name,
)


def utc_ms(text):
    from datetime import datetime, timezone
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


def test_month_going_back_from_december_to_january_starts_a_new_year():
    clock = EventClock("UTC", year=2013)
    assert clock.to_ms(12, 31, 23, 59, 59, 900) == utc_ms("2013-12-31T23:59:59.900")
    assert clock.to_ms(1, 1, 0, 0, 0, 100) == utc_ms("2014-01-01T00:00:00.100")
    assert clock.year == 2014


def test_a_stray_december_line_after_new_year_keeps_the_old_year():
    clock = EventClock("UTC", year=2013)
    clock.to_ms(12, 31, 23, 59, 59, 0)
    clock.to_ms(1, 1, 0, 0, 0, 5)
    assert clock.to_ms(12, 31, 23, 59, 59, 998) == utc_ms("2013-12-31T23:59:59.998")
    assert clock.to_ms(1, 1, 0, 0, 1, 0) == utc_ms("2014-01-01T00:00:01")


def test_the_repeated_hour_at_the_end_of_dst_never_goes_backwards():
    # Europe/Zurich, 2013-10-27: 03:00 CEST -> 02:00 CET; 02:xx happens twice.
    clock = EventClock("Europe/Zurich", year=2013)
    stamps = [(1, 59, 59, 0), (2, 30, 0, 0), (2, 59, 59, 500), (2, 0, 0, 100), (2, 30, 0, 0), (3, 0, 1, 0)]
    ms = [clock.to_ms(10, 27, h, m, s, f) for h, m, s, f in stamps]
    assert ms == [
        utc_ms("2013-10-26T23:59:59"), utc_ms("2013-10-27T00:30:00"), utc_ms("2013-10-27T00:59:59.500"),
        utc_ms("2013-10-27T01:00:00.100"), utc_ms("2013-10-27T01:30:00"), utc_ms("2013-10-27T02:00:01"),
    ]
    assert ms == sorted(ms)


def test_small_disorder_inside_the_repeated_hour_stays_in_the_first_occurrence():
    clock = EventClock("Europe/Zurich", year=2013)
    a = clock.to_ms(10, 27, 2, 10, 0, 500)
    b = clock.to_ms(10, 27, 2, 10, 0, 495)  # 5 ms earlier stamp, written later
    assert a - b == 5


def test_a_rotated_file_name_dates_the_last_line():
    assert year_from_file_name("/var/log/dpm/log-20140101.gz") == (2014, 1)
    assert year_from_file_name("log") is None
    assert first_line_year(2014, 1, 12) == 2013
    assert first_line_year(2014, 3, 2) == 2014


def test_the_nearest_year_to_an_rsyslog_stamp():
    assert nearest_year(2012, 1, 12) == 2011
    assert nearest_year(2011, 12, 1) == 2012
    assert nearest_year(2011, 8, 8) == 2011


def test_reference_year_applies_to_the_first_line():
    clock = EventClock("UTC", ref=(2014, 1))
    assert clock.to_ms(12, 31, 10, 0, 0, 0) == utc_ms("2013-12-31T10:00:00")
    assert clock.to_ms(1, 1, 10, 0, 0, 0) == utc_ms("2014-01-01T10:00:00")


def test_an_impossible_date_is_an_error_not_a_crash():
    clock = EventClock("UTC", year=2013)
    with pytest.raises(ClockError):
        clock.to_ms(2, 30, 0, 0, 0, 0)


def test_an_unknown_zone_is_a_clear_error():
    with pytest.raises(ClockError, match="Mars/Olympus"):
        EventClock("Mars/Olympus")


def test_clock_state_round_trips_inside_a_repeated_hour():
    clock = EventClock("Europe/Zurich", year=2013)
    clock.to_ms(10, 27, 2, 59, 0, 0)
    clock.to_ms(10, 27, 2, 1, 0, 0)  # second occurrence begins
    copy = EventClock("Europe/Zurich")
    copy.restore(clock.state())
    assert copy.to_ms(10, 27, 2, 2, 0, 0) == clock.to_ms(10, 27, 2, 2, 0, 0) == utc_ms("2013-10-27T01:02:00")


@pytest.mark.parametrize("text, minutes", [
    ("2011-08-12T14:31:43.118402+02:00", 120), ("2011-01-12T14:31:43+01:00", 60),
    ("2011-08-12T14:31:43-04:30", -270), ("2011-08-12T14:31:43Z", 0),
    ("2011-08-12T14:31:43.118402z", 0),
])
def test_the_offset_an_rsyslog_time_states_in_minutes(text, minutes):
    assert rfc3339_offset_minutes(text) == minutes


def test_a_time_without_an_offset_is_a_clock_error():
    with pytest.raises(ClockError, match="no offset"):
        rfc3339_offset_minutes("2011-08-12T14:31:43.118402")


def test_a_stamp_read_at_a_fixed_offset_needs_no_zone_rules():
    assert offset_local_ms(2011, 8, 12, 14, 31, 43, 118, 120) == utc_ms("2011-08-12T12:31:43.118")
    assert offset_local_ms(2011, 1, 12, 14, 31, 43, 0, 60) == utc_ms("2011-01-12T13:31:43")
    # the repeated hour of 2011-10-30 in Zurich: the offset tells the two 02:30 apart
    assert offset_local_ms(2011, 10, 30, 2, 30, 0, 0, 120) == utc_ms("2011-10-30T00:30:00")
    assert offset_local_ms(2011, 10, 30, 2, 30, 0, 0, 60) == utc_ms("2011-10-30T01:30:00")


def test_an_impossible_date_at_an_offset_is_a_clock_error():
    with pytest.raises(ClockError, match="invalid date"):
        offset_local_ms(2011, 2, 30, 0, 0, 0, 0, 60)


@pytest.mark.parametrize("zone,year,month,day,hour,unanswered", [
    ("Europe/Zurich", 2013, 5, 30, 8, []),
    ("Europe/Zurich", 2013, 3, 31, 1, []), ("Europe/Zurich", 2013, 3, 31, 2, []),   # 02:xx: the gap
    ("Europe/Zurich", 2013, 3, 31, 3, []),
    ("Europe/Zurich", 2013, 10, 27, 1, []), ("Europe/Zurich", 2013, 10, 27, 2, list(range(60))),
    ("Europe/Zurich", 2013, 10, 27, 3, []),
    ("UTC", 2013, 12, 31, 23, []),
    # Lord Howe's half hour: 02:00 +11 -> 01:30 +10:30, so 01:30-01:59 repeats.
    ("Australia/Lord_Howe", 2013, 4, 7, 1, list(range(30, 60))),
    # Bern mean time (+0:29:46) ended at 1894-06-01 00:00, read 00:30:14 CET: a minute
    # whose offset changes at its 14th second.
    ("Europe/Zurich", 1894, 6, 1, 0, [30]),
])
def test_a_minutes_second_0_plus_its_seconds_is_what_to_ms_gives_each_second(zone, year, month, day, hour,
                                                                              unanswered):
    """Where minute_ms answers, each second of the minute is that plus its seconds, as
    to_ms dates it; a minute of a repeated hour or of an offset change is left to to_ms."""
    none = []
    for minute in range(60):
        base = EventClock(zone, year=year).minute_ms(month, day, hour, minute)
        reference = EventClock(zone, year=year)
        seconds = [reference.to_ms(month, day, hour, minute, s, 0) for s in range(60)]
        if base is None:
            none.append(minute)
        else:
            assert seconds == [base + s * 1000 for s in range(60)]
    assert none == unanswered


def test_an_impossible_minute_is_left_to_to_ms_which_says_why():
    clock = EventClock("UTC", year=2013)
    assert clock.minute_ms(2, 30, 10, 0) is None
    with pytest.raises(ClockError):
        clock.to_ms(2, 30, 10, 0, 5, 0)


def test_asking_a_minute_dates_the_year_as_to_ms_does():
    asked, reference = EventClock("UTC", year=2013), EventClock("UTC", year=2013)
    for month, day in [(12, 31), (1, 1), (12, 31), (1, 2)]:
        base = asked.minute_ms(month, day, 0, 0)
        assert base == reference.to_ms(month, day, 0, 0, 0, 0)
        assert (asked.year, asked.state()) == (reference.year, reference.state())


def test_utc_is_read_as_the_zone_database_reads_it():
    # load_zone("UTC") is datetime's own UTC (no zoneinfo import): the same offsets, names
    # and instants as the database's UTC, and a clock in it dates stamps alike.
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from dpmstream.parsers.clock import load_zone
    ours, database = load_zone("UTC"), ZoneInfo("UTC")
    assert str(ours) == str(database) == "UTC"
    for instant in (datetime(2011, 3, 27, 1, 30), datetime(2011, 10, 30, 2, 30), datetime(2026, 6, 1)):
        a, b = instant.replace(tzinfo=ours), instant.replace(tzinfo=database)
        assert (a.utcoffset(), a.tzname(), a.timestamp(), a.isoformat(), f"{a:%Z %z}") == \
               (b.utcoffset(), b.tzname(), b.timestamp(), b.isoformat(), f"{b:%Z %z}")
        assert a.replace(fold=1).utcoffset() == b.replace(fold=1).utcoffset() == timedelta(0)
        assert datetime.fromtimestamp(a.timestamp(), ours) == datetime.fromtimestamp(b.timestamp(), database)
    assert EventClock("UTC", year=2011).to_ms(10, 30, 2, 30, 0, 5) == utc_ms("2011-10-30T02:30:00.005")
