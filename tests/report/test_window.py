"""report/window.py: the ends of the report's time window, as the user writes them."""

from __future__ import annotations

from datetime import datetime

import pytest

from dpmstream.report.window import WindowError, parse_moment
from tests.report.test_analysis import T0, ZURICH


@pytest.mark.parametrize("text, expected", [
    ("2011-08-12T14:35:00+02:00", datetime(2011, 8, 12, 14, 35, tzinfo=ZURICH)),
    ("2011-08-12T12:35Z", datetime(2011, 8, 12, 14, 35, tzinfo=ZURICH)),
    ("2011-08-12 14:35", datetime(2011, 8, 12, 14, 35, tzinfo=ZURICH)),
    ("08/12 14:35:30.5", datetime(2011, 8, 12, 14, 35, 30, 500_000, tzinfo=ZURICH)),
    ("14:35", datetime(2011, 8, 12, 14, 35, tzinfo=ZURICH)),
])
def test_a_window_end_is_iso_8601_or_local_time_of_the_log(text, expected):
    assert parse_moment(text, ZURICH, T0) == round(expected.timestamp() * 1000)


def test_an_unreadable_window_end_is_a_clear_error():
    with pytest.raises(WindowError, match="ISO 8601"):
        parse_moment("yesterday", ZURICH, T0)
