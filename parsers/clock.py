"""Event time: a log's local stamps without a year -> milliseconds since the epoch (UTC).

One EventClock per log stream. It supplies the year (given, from a reference time such
as the rsyslog prefix, a rotated file's name or its mtime, rolled over at Dec -> Jan) and
resolves the local hour that repeats when daylight saving ends, so that no duration
across it goes negative. A stamp behind an rsyslog prefix is read in the UTC offset the
prefix states instead, unless --tz was given (offset_local_ms). Rules:
docs/record-rules.md, "Time".
"""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime, timezone

TYPE_CHECKING = False   # typing.TYPE_CHECKING; typing's import was ~11 M instructions of replay's start-up (issue 30)

if TYPE_CHECKING:  # zoneinfo itself is imported by load_zone: a run that dates no line skips it
    from zoneinfo import ZoneInfo

# A stamp this far behind the latest one seen in a repeated hour means the clock went back.
FOLD_BACK_MS = 10_000
_CACHE_LIMIT = 8192
_ROTATED_NAME = re.compile(r"(?:^|[-_.])(\d{4})(\d\d)(\d\d)(?:\D|$)")


class ClockError(ValueError):
    pass


def load_zone(name: str | None) -> ZoneInfo | timezone:
    """An IANA zone; None or "local" is this machine's zone (TZ, then /etc/localtime).
    "UTC" is datetime's own UTC: the same offsets, names (str, %Z) and times as the
    database's, without importing zoneinfo, whose path search reads sysconfig (~12 M
    instructions of a replay's start-up, issue 30; every DOME site's replay names UTC)."""
    if name == "UTC":
        return timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    if name in (None, "", "local"):
        tz_env = os.environ.get("TZ", "").lstrip(":")
        if tz_env:
            return load_zone(tz_env)
        try:
            with open("/etc/localtime", "rb") as f:
                return ZoneInfo.from_file(f, key="localtime")
        except OSError:
            return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ClockError(f"unknown time zone {name!r}") from exc


def year_from_file_name(name: str) -> tuple[int, int] | None:
    """(year, month) from a rotated log name such as log-20140101.gz, else None."""
    m = _ROTATED_NAME.search(os.path.basename(name))
    if not m:
        return None
    year, month, day = (int(g) for g in m.groups())
    if 1990 <= year <= 2100 and 1 <= month <= 12 and 1 <= day <= 31:
        return year, month
    return None


def stream_reference(path: str | None, mtime_ms: int | None, zone: ZoneInfo
                     ) -> tuple[int, int] | None:
    """The one rule that dates a stream without a year of its own: the (year, month) of
    its last line, from a rotated file's name (log-YYYYMMDD), else from the file's mtime
    read in the log's own zone (never the machine's); None if neither is known. `--year`
    and rsyslog's receive time, where given, come before this."""
    ref = year_from_file_name(path or "")
    if ref is None and mtime_ms is not None:
        local = datetime.fromtimestamp(mtime_ms / 1000, tz=timezone.utc).astimezone(zone)
        ref = (local.year, local.month)
    return ref


def first_line_year(ref_year: int, ref_month: int, first_month: int) -> int:
    """Year of a file's first line when (ref_year, ref_month) dates its last line."""
    return ref_year if first_month <= ref_month else ref_year - 1


def nearest_year(ref_year: int, ref_month: int, month: int) -> int:
    """The year that puts `month` nearest to a reference (year, month), e.g. rsyslog's."""
    if month - ref_month >= 6:
        return ref_year - 1
    if ref_month - month >= 6:
        return ref_year + 1
    return ref_year


class EventClock:
    """Local (month, day, h, m, s, ms) of one stream -> epoch ms, with year and DST state.

    year: the year of the stream's first line, if known.
    ref: (year, month) dating the stream's *last* line (a rotated file's name or mtime),
         used for the first line when `year` is not given.
    """

    def __init__(self, tz: str | None = None, year: int | None = None,
                 ref: tuple[int, int] | None = None, zone_given: bool = False):
        self.zone = load_zone(tz)
        # True when the user named the zone (--tz): it then comes before the offset an
        # rsyslog prefix states; a profile's or this machine's zone comes after it.
        self.zone_given = zone_given
        self.year = year
        self.ref = ref
        # True when nothing dated the stream and its year is this machine's current one:
        # the edge warns (docs/record-rules.md, "Time").
        self.year_guessed = False
        self._last_month: int | None = None
        self._cache: dict[tuple, int] = {}
        # Repeated-hour state: (year, month, day, hour) -> latest local ms seen, and the
        # hours in which the second occurrence has begun.
        self._fold_latest: dict[tuple, int] = {}
        self._fold_second: set[tuple] = set()

    # -- the year ---------------------------------------------------------------------
    def _year_for(self, month: int) -> int:
        if self.year is None:
            if self.ref is not None:
                self.year = first_line_year(self.ref[0], self.ref[1], month)
            else:
                # Nothing dates this stream: the current year is the only guess left.
                self.year = datetime.now(self.zone).year
                self.year_guessed = True
            self._last_month = month
            return self.year
        last = self._last_month
        if last is None or month == last:
            self._last_month = month
            return self.year
        if last - month >= 6:  # 12 -> 01: a new year
            self.year += 1
            self._cache.clear()
        elif month - last >= 6:  # a stray 12/31 line after 01/01: the year before
            return self.year - 1
        self._last_month = month
        return self.year

    # -- local -> UTC -------------------------------------------------------------------
    def to_ms(self, month: int, day: int, hour: int, minute: int, second: int, ms: int,
              year: int | None = None) -> int:
        """Epoch ms of a local stamp; `year` when the line itself dates it (rsyslog)."""
        y = self._year_for(month) if year is None else year
        key = (y, month, day, hour, minute, second)
        base = self._cache.get(key)
        if base is None:
            base = self._resolve(y, month, day, hour, minute, second, ms)
            if base is None:  # inside a repeated hour: decided per stamp, never cached
                return self._resolve_fold(y, month, day, hour, minute, second, ms)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = base
        return base + ms

    def second_ms(self, month: int, day: int, hour: int, minute: int, second: int,
                  year: int | None = None) -> int | None:
        """Epoch ms of a whole local second, or None inside a repeated hour (use to_ms)."""
        y = self._year_for(month) if year is None else year
        key = (y, month, day, hour, minute, second)
        base = self._cache.get(key)
        if base is None:
            base = self._resolve(y, month, day, hour, minute, second, 0)
            if base is not None:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[key] = base
        return base

    def minute_ms(self, month: int, day: int, hour: int, minute: int,
                  year: int | None = None) -> int | None:
        """Epoch ms of a local minute's second 0 when each of its seconds s (0-59) is that
        plus s * 1000 as to_ms dates it: the same offset at its first and last second and
        neither in a repeated hour. None otherwise (an offset change or a repeated hour
        inside it, an impossible date): ask to_ms per second. A reader of whole-second
        stamps asks once a minute instead of once a second (issue 30); the year is decided
        as to_ms decides it, and deciding it again for the same month changes nothing."""
        y = self._year_for(month) if year is None else year
        try:
            first = self._resolve(y, month, day, hour, minute, 0, 0)
            last = self._resolve(y, month, day, hour, minute, 59, 0)
        except ClockError:
            return None
        if first is None or last is None or last - first != 59_000:
            return None
        return first

    def _resolve(self, y, month, day, hour, minute, second, ms) -> int | None:
        try:
            local = datetime(y, month, day, hour, minute, second, tzinfo=self.zone)
        except ValueError as exc:
            raise ClockError(f"invalid date {y}-{month:02d}-{day:02d} {hour}:{minute}:{second}") from exc
        first = local.utcoffset()
        if first != local.replace(fold=1).utcoffset() and first > local.replace(fold=1).utcoffset():
            return None  # ambiguous (the hour that repeats); a gap hour resolves as fold=0
        return int(local.timestamp()) * 1000

    def _resolve_fold(self, y, month, day, hour, minute, second, ms) -> int:
        local = datetime(y, month, day, hour, minute, second, tzinfo=self.zone)
        hour_key = (y, month, day, hour)
        local_ms = ((minute * 60) + second) * 1000 + ms
        latest = self._fold_latest.get(hour_key)
        if hour_key not in self._fold_second and latest is not None and local_ms < latest - FOLD_BACK_MS:
            self._fold_second.add(hour_key)
            latest = None
        if latest is None or local_ms > latest:
            self._fold_latest[hour_key] = local_ms
        fold = 1 if hour_key in self._fold_second else 0
        return int(local.replace(fold=fold).timestamp()) * 1000 + ms

    def state(self) -> dict:
        """JSON-safe state, so a stream can be resumed (Kafka worker)."""
        return {
            "year": self.year, "last_month": self._last_month,
            "fold_latest": [[list(k), v] for k, v in self._fold_latest.items()],
            "fold_second": [list(k) for k in self._fold_second],
        }

    def restore(self, state: dict) -> None:
        self.year = state.get("year")
        self._last_month = state.get("last_month")
        self._fold_latest = {tuple(k): v for k, v in state.get("fold_latest", [])}
        self._fold_second = {tuple(k) for k in state.get("fold_second", [])}
        self._cache.clear()


def rfc3339_to_ms(text: str) -> int:
    """'2011-08-12T14:31:43.118402+02:00' (or ...Z) -> integer ms since the epoch (UTC),
    exactly (no float). rsyslog's form (microseconds and an offset) takes a shortcut: its
    whole second is parsed once per (second, offset), since a burst of lines shares it."""
    text = text.replace("z", "Z")
    try:
        if len(text) in (27, 32) and text[19] == "." and text[20:26].isdigit():
            return _second_ms(text[:19] + text[26:]) + int(text[20:23])
        return _to_ms(text)
    except ValueError as exc:
        raise ClockError(f"bad RFC 3339 time {text!r}: {exc}") from exc


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)


def rfc3339_offset_minutes(text: str) -> int:
    """The UTC offset an RFC 3339 time states, in minutes: '...+02:00' -> 120, 'Z' -> 0."""
    if text[-1:] in ("Z", "z"):
        return 0
    sign, hh, colon, mm = text[-6], text[-5:-3], text[-3], text[-2:]
    if sign not in "+-" or colon != ":" or not (hh + mm).isdigit():
        raise ClockError(f"bad RFC 3339 time {text!r}: no offset")
    minutes = int(hh) * 60 + int(mm)
    return -minutes if sign == "-" else minutes


def offset_name(minutes: int) -> str:
    """An offset as a label: `+02:00`, `-04:30`; `UTC` for none."""
    if minutes == 0:
        return "UTC"
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def offset_local_ms(year: int, month: int, day: int, hour: int, minute: int, second: int,
                    ms: int, offset_minutes: int) -> int:
    """Epoch ms of a local stamp read at a fixed UTC offset (no zone rules: the offset
    itself says which side of a daylight-saving change the stamp is on)."""
    try:
        delta = datetime(year, month, day, hour, minute, second) - _NAIVE_EPOCH
    except ValueError as exc:
        raise ClockError(f"invalid date {year}-{month:02d}-{day:02d} {hour}:{minute}:{second}") from exc
    return ((delta.days * 86_400 + delta.seconds) - offset_minutes * 60) * 1000 + ms


def _to_ms(text: str) -> int:
    stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        raise ValueError("no offset")
    delta = stamp - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


_second_ms = functools.lru_cache(maxsize=4096)(_to_ms)

