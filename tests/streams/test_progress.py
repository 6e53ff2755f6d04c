"""The replay progress bar: only on a terminal and for long inputs, unless asked."""

import io

from dpmstream.streams.progress import LONG_INPUT_BYTES, Progress


class FakeTty(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_shows_percent_and_rate_when_enabled():
    out = io.StringIO()
    bar = Progress(1000, enabled=True, stream=out)
    bar.update(500, 12345)
    bar.close()
    text = out.getvalue()
    assert "50.0%" in text and "12,345 lines" in text and text.endswith("\n")


def test_it_is_off_for_short_inputs_and_when_not_a_terminal():
    assert not Progress(LONG_INPUT_BYTES - 1, stream=FakeTty()).enabled
    assert Progress(LONG_INPUT_BYTES, stream=FakeTty()).enabled
    assert not Progress(LONG_INPUT_BYTES, stream=io.StringIO()).enabled


def test_a_disabled_bar_writes_nothing():
    out = io.StringIO()
    bar = Progress(10, enabled=False, stream=out)
    bar.update(5, 5)
    bar.close()
    assert out.getvalue() == ""
