"""report/figures.py: a time axis names its zone as the rest of the page does."""

from __future__ import annotations

import matplotlib.pyplot as plt

from dpmstream.parsers.clock import load_zone
from dpmstream.report import figures as F
from dpmstream.streams.sinks.summary import moment


def test_a_time_axis_says_the_date_and_the_abbreviation_valid_then():
    zone = load_zone("Europe/Zurich")
    july = 1313152300000   # 2011-08-12 14:31:40 CEST
    fig, ax = plt.subplots()
    ax.plot([moment(july, zone), moment(july + 20_000, zone)], [0, 1])
    F._time_axis(ax, zone)
    fig.canvas.draw()
    offset = ax.xaxis.get_major_formatter().get_offset()
    assert offset.startswith("2011-Aug-12 14:3") and offset.endswith(" CEST"), offset
    plt.close(fig)
