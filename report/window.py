"""--since/--until: an incident window, in ISO 8601 or in the log's own local time.

Accepted forms (local ones in the zone the log stamps are read in):
  2011-08-12T14:31:00+02:00, 2011-08-12T12:31Z   ISO 8601 with an offset: that instant
  2011-08-12 14:31[:00]                           ISO 8601 without one: local time
  08/12 14:31[:00[.123]]                          the DPM log's own stamp: local, year of the data
  14:31[:00]                                      local time on the day the data begin
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta, tzinfo

LOG_STAMP = re.compile(r"^(\d\d)/(\d\d)\s+(\d\d?:\d\d(?::\d\d(?:\.\d+)?)?)$")
CLOCK_ONLY = re.compile(r"^\d\d?:\d\d(?::\d\d(?:\.\d+)?)?$")


class WindowError(ValueError):
    pass


def parse_moment(text: str, zone: tzinfo, first_ms: int | None) -> int:
    """Milliseconds since the epoch for `text`; `first_ms` (the data's first record) dates
    the forms without a year or a date."""
    text = text.strip()
    reference = (datetime.fromtimestamp(first_ms / 1000, tz=zone) if first_ms is not None
                 else None)
    try:
        if CLOCK_ONLY.match(text):
            if reference is None:
                raise WindowError(f"{text!r} has no date and there are no records to date it")
            moment = datetime.combine(reference.date(), time.fromisoformat(_pad(text)))
        elif m := LOG_STAMP.match(text):
            if reference is None:
                raise WindowError(f"{text!r} has no year and there are no records to date it")
            moment = datetime(reference.year, int(m[1]), int(m[2])) + _clock(m[3])
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        if isinstance(exc, WindowError):
            raise
        raise WindowError(f"cannot read {text!r} as a time: give ISO 8601 "
                          "(2011-08-12T14:31:00+02:00), '2011-08-12 14:31', '08/12 14:31' "
                          "or '14:31' (local time of the log)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return round(moment.timestamp() * 1000)


def _pad(clock: str) -> str:
    return clock if len(clock.split(":")[0]) == 2 else "0" + clock


def _clock(text: str) -> timedelta:
    t = time.fromisoformat(_pad(text))
    return timedelta(hours=t.hour, minutes=t.minute, seconds=t.second, microseconds=t.microsecond)


def in_window(t: int | None, since: int | None, until: int | None) -> bool:
    if t is None:
        return since is None and until is None
    return (since is None or t >= since) and (until is None or t < until)
