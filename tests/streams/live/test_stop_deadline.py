"""streams/live/stop_deadline.py: once armed, the process ends `seconds` later, cleaned up."""

from __future__ import annotations

import logging
import threading

import pytest

from dpmstream.streams.live import stop_deadline
from dpmstream.streams.live.stop_deadline import STOP_WITHIN_S, StopDeadline

WHAT = "what was not committed is read again"


class ManualTimer:
    """threading.Timer that fires only when the test says so."""
    started: list[ManualTimer] = []

    def __init__(self, interval, function):
        self.interval, self.function = interval, function
        self.daemon = False
        self.cancelled = False

    def start(self):
        ManualTimer.started.append(self)

    def cancel(self):
        self.cancelled = True

    def fire(self):
        if not self.cancelled:
            self.function()


class Recorder(logging.Handler):
    def __init__(self, events):
        super().__init__()
        self.events = events

    def emit(self, record):
        self.events.append(("log", record.levelname, record.getMessage()))


@pytest.fixture
def events(monkeypatch):
    """What the deadline did, in order: log lines, cleanups and the exit (which, here,
    records its code and returns instead of ending the test run)."""
    happened: list = []
    monkeypatch.setattr(stop_deadline.os, "_exit", lambda code: happened.append(("exit", code)))
    # logging.shutdown() would close every handler of the test session
    monkeypatch.setattr(stop_deadline.logging, "shutdown", lambda: happened.append("shutdown"))
    return happened


@pytest.fixture
def timers(monkeypatch):
    ManualTimer.started = []
    monkeypatch.setattr(stop_deadline.threading, "Timer", ManualTimer)
    return ManualTimer.started


def a_log(events) -> logging.Logger:
    log = logging.getLogger(f"test_stop_deadline.{len(events)}.{id(events)}")
    log.propagate = False
    log.addHandler(Recorder(events))
    return log


def test_nothing_happens_until_it_is_armed(events, timers):
    StopDeadline(4.0, a_log(events), cleanup=[lambda: events.append("cleanup")], consequence=WHAT)
    assert timers == [] and events == []


def test_arming_starts_one_daemon_timer_of_the_given_seconds(events, timers):
    StopDeadline(2.5, a_log(events), consequence=WHAT).arm()
    (timer,) = timers
    assert timer.interval == 2.5
    assert timer.daemon is True   # never keeps a stopping process alive by itself


def test_on_expiry_it_logs_runs_the_cleanups_in_order_and_exits_with_code_1(events, timers):
    deadline = StopDeadline(4.0, a_log(events),
                            cleanup=[lambda: events.append("first"),
                                     lambda: events.append("second")], consequence=WHAT)
    deadline.arm()
    timers[0].fire()
    (_, level, message), *rest = events
    assert level == "WARNING" and "4.0 s" in message and "not stopped cleanly" in message
    assert message.endswith(WHAT)   # the admin is told what the cut-short stop leaves
    assert rest == ["first", "second", "shutdown", ("exit", 1)]


def test_a_failing_cleanup_is_logged_and_the_others_still_run_before_the_exit(events, timers):
    def broken():
        raise OSError("scratch dir busy")

    deadline = StopDeadline(4.0, a_log(events), cleanup=[broken, lambda: events.append("ran")],
                            consequence=WHAT)
    deadline.arm()
    timers[0].fire()
    assert ("log", "WARNING", "cleanup at exit failed: scratch dir busy") in events
    assert events[-3:] == ["ran", "shutdown", ("exit", 1)]


def test_arming_again_keeps_the_first_deadline(events, timers):
    deadline = StopDeadline(4.0, a_log(events), consequence=WHAT)
    deadline.arm()
    deadline.arm()
    assert len(timers) == 1


def test_a_cancelled_deadline_does_not_end_the_process(events, timers):
    deadline = StopDeadline(4.0, a_log(events), cleanup=[lambda: events.append("cleanup")], consequence=WHAT)
    deadline.arm()
    deadline.cancel()
    timers[0].fire()
    assert events == []


def test_cancelling_before_arming_is_harmless(events, timers):
    StopDeadline(4.0, a_log(events), consequence=WHAT).cancel()
    assert timers == [] and events == []


def test_the_exit_code_is_the_callers_where_it_gives_one(events, timers):
    # `dpmstream run` exits 128 + the signal's number, as a shell reports a killed command
    StopDeadline(4.0, a_log(events), consequence=WHAT, exit_code=143).arm()
    timers[0].fire()
    assert events[-1] == ("exit", 143)


def test_a_real_timer_ends_the_process_after_the_deadline(events):
    ended = threading.Event()
    deadline = StopDeadline(0.05, a_log(events), cleanup=[ended.set], consequence=WHAT)
    deadline.arm()
    assert ended.wait(10)
    deadline._timer.join(10)
    assert events[-1] == ("exit", 1)


def test_the_graceful_stop_leaves_a_second_of_the_five_second_promise():
    assert STOP_WITHIN_S <= 5 - 1
