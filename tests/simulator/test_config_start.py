"""SimConfig.start_ms reads a plain start (every field full width) without strptime, and
must read it as strptime's formats do: the same moment for every string both accept, and
strptime (with its refusals) for every other."""

import random
from datetime import datetime

import pytest

from dpmstream.simulator.config import STRPTIME_FORMATS, SimConfig, _plain_local


def by_strptime(text: str):
    for fmt in STRPTIME_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


# Every field at full width: read alike, the moment or None for both.
FULL_WIDTH = [
    "2011-08-12 14:31:40", "2011-08-12 14:31", "2011-08-12 14:31:40.5",
    "2011-08-12 14:31:40.123456", "2011-08-12 14:31:40.000",
    "2012-02-29 23:59:59.999999", "2011-02-29 10:00:00",       # a leap day; none in 2011
    "2011-08-12 24:00:00", "2011-08-12 14:60:00", "2011-08-12 14:31:60", "2011-08-12 14:31:61",
    "2011-00-12 14:31", "2011-13-12 14:31", "2011-08-00 14:31", "2011-08-32 14:31",
    "0000-01-01 00:00", "0001-01-01 00:00", "9999-12-31 23:59:59.999999",
]
# Other forms are strptime's to read or refuse.
OTHERS = [
    "2011-8-12 14:31", "2011-08-12 4:31", "2011-08-12  14:31", "2011-08-12 14:31:40.1234567",
    "2011-08-12 14:31:40.", "2011-08-12 14:31:4", "2011-08-12", "14:31", "",
    "2011-08-12 14:31:40Z", "\uff12\uff10\uff11\uff11-08-12 14:31",     # full-width digits
]


@pytest.mark.parametrize("text", FULL_WIDTH)
def test_a_full_width_start_reads_as_strptime_reads_it(text):
    assert _plain_local(text) == by_strptime(text)


@pytest.mark.parametrize("text", OTHERS)
def test_any_other_start_is_left_to_strptime(text):
    assert _plain_local(text) is None


def _random_start(rng: random.Random) -> str:
    fields = [f"{rng.randint(0, 9999):04d}", f"{rng.randint(0, 13):02d}",
              f"{rng.randint(0, 32):02d}", f"{rng.randint(0, 25):02d}",
              f"{rng.randint(0, 61):02d}", f"{rng.randint(0, 61):02d}"]
    text = "{}-{}-{} {}:{}".format(*fields[:5])
    if rng.random() < 0.7:
        text += ":" + fields[5]
        if rng.random() < 0.5:
            text += "." + str(rng.randint(0, 999999)).zfill(rng.randint(1, 6))[-6:]
    return text


def test_random_full_width_starts_read_as_strptime_reads_them():
    rng = random.Random(30)
    texts = [_random_start(rng) for _ in range(3000)]
    assert sum(by_strptime(t) is not None for t in texts) > 1000   # real moments among them
    for text in texts:
        assert _plain_local(text) == by_strptime(text), text


def test_calibrates_start_and_the_others_give_the_same_instant():
    assert SimConfig(start="2011-08-12 12:31:40.250000", tz="UTC").start_ms() == 1313152300250
    assert SimConfig(start="2011-08-12T14:31", tz="Europe/Zurich").start_ms() == 1313152260000
    # a form only strptime reads, and one nothing reads
    assert SimConfig(start="2011-8-12 14:31", tz="UTC").start_ms() == 1313159460000
    with pytest.raises(ValueError, match="expected YYYY-MM-DD"):
        SimConfig(start="2011-02-29 10:00", tz="UTC").start_ms()
