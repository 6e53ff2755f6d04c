"""A raw line's time stamps, read by its profile's envelope alone (the message is not parsed).

    stamps = LineStamps(profile)
    stamps.local(line)         # the daemon's own stamp: LocalStamp(month, day, hour, ...) or None
    stamps.received_ms(line)   # rsyslog's receive time (epoch ms), None if rsyslog did not wrap it

For the readers that only need *when* a line is, not what it says: `replay --to-kafka`
paces and stamps the envelopes it publishes, `check_dpm --log` finds where a window
starts in a log's tail. Both read the stamps the profile defines, so a site's own wording
(regex_profiles/) dates lines for them exactly as for the parser.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dpmstream.parsers.clock import rfc3339_to_ms
from dpmstream.parsers.profiles import Profile


class LocalStamp(NamedTuple):
    """A stamp as the daemon wrote it: local time, no year."""
    month: int
    day: int
    hour: int
    minute: int
    second: int
    ms: int

    @property
    def to_second(self) -> tuple[int, int, int, int, int]:
        return self[:5]


_FIELDS = ("month", "day", "hour", "minute", "second")


class LineStamps:
    def __init__(self, profile: Profile):
        native = profile.native_envelope.encode()
        rsyslog = profile.rsyslog_envelope.encode()
        # the daemon's stamp stands at the start, or right after rsyslog's prefix
        self._local_forms = (re.compile(native), re.compile(rsyslog + native))
        self._rsyslog = re.compile(rsyslog)

    def local(self, line: bytes) -> LocalStamp | None:
        for form in self._local_forms:
            m = form.match(line)
            if m is not None:
                frac = m.group("frac")
                ms = int((frac.decode() + "00")[:3]) if frac else 0
                return LocalStamp(*map(int, m.group(*_FIELDS)), ms)
        return None

    def received_ms(self, line: bytes) -> int | None:
        """rsyslog's receive time; None for a line rsyslog did not write. Raises
        clock.ClockError for an rsyslog line whose time does not read."""
        m = self._rsyslog.match(line)
        if m is None:
            return None
        return rfc3339_to_ms(m.group("rtime").decode())
