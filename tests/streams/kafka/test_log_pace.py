"""streams/kafka/log_pace.py: a warning repeated many times a second costs a few log lines."""

from __future__ import annotations

import logging

from dpmstream.streams.kafka.log_pace import RepeatFilter


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _logging_through(quiet):
    out = _Lines()
    out.addFilter(quiet)
    for name in ("aiokafka.conn", "dpmstream.worker"):
        logger = logging.getLogger(name)
        logger.addHandler(out)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return out


def _detach(out):
    for name in ("aiokafka.conn", "dpmstream.worker"):
        logger = logging.getLogger(name)
        logger.removeHandler(out)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


def test_an_error_repeated_through_an_outage_is_written_first_then_every_ten_seconds_then_once_when_over():
    now = [0.0]
    quiet = RepeatFilter(10.0, clock=lambda: now[0])
    out = _logging_through(quiet)
    conn = logging.getLogger("aiokafka.conn")
    try:
        for tick in range(210):                  # 21 s, ten errors a second
            now[0] = tick / 10
            conn.error("Unable connect to node with id %s: %s", 1, "Connect call failed")
            conn.error("Unable to update metadata from %s", [1])
            quiet.flush()
        logging.getLogger("dpmstream.worker").info("partition %d: resumed", 0)   # INFO: never held
        now[0] = 31.0
        quiet.flush()
        quiet.flush()
    finally:
        _detach(out)
    assert out.lines == [
        "ERROR aiokafka.conn: Unable connect to node with id 1: Connect call failed",
        "ERROR aiokafka.conn: Unable to update metadata from [1]",
        "ERROR aiokafka.conn: Unable connect to node with id 1: Connect call failed "
        "[and 99 more like it held back; this for 10 s]",
        "ERROR aiokafka.conn: Unable to update metadata from [1] "
        "[and 99 more like it held back; this for 10 s]",
        "ERROR aiokafka.conn: Unable connect to node with id 1: Connect call failed "
        "[and 99 more like it held back; this for 20 s]",
        "ERROR aiokafka.conn: Unable to update metadata from [1] "
        "[and 99 more like it held back; this for 20 s]",
        "INFO dpmstream.worker: partition 0: resumed",
        # Both kinds end at the same flush: neither line holds the other back.
        "WARNING dpmstream.worker: aiokafka.conn: no more of 'Unable connect to node with id "
        "%s: %s' since 10 s (it lasted 21 s; 207 more like it were held back)",
        "WARNING dpmstream.worker: aiokafka.conn: no more of 'Unable to update metadata from "
        "%s' since 10 s (it lasted 21 s; 207 more like it were held back)",
    ]


def test_other_kinds_of_warning_are_paced_apart_and_a_record_is_judged_once_for_two_handlers():
    now = [0.0]
    quiet = RepeatFilter(10.0, clock=lambda: now[0])
    out = _logging_through(quiet)
    second = _Lines()
    second.addFilter(quiet)
    conn = logging.getLogger("aiokafka.conn")
    conn.addHandler(second)
    try:
        conn.warning("metadata of %s failed", "t")
        conn.warning("fetch from %s failed", 1)
        conn.warning("metadata of %s failed", "u")
    finally:
        conn.removeHandler(second)
        _detach(out)
    assert out.lines == second.lines == ["WARNING aiokafka.conn: metadata of t failed",
                                         "WARNING aiokafka.conn: fetch from 1 failed"]


def test_installing_twice_leaves_one_filter_on_a_handler():
    from dpmstream.streams.kafka.log_pace import install
    out = _Lines()
    install([out])
    install([out])
    assert sum(isinstance(f, RepeatFilter) for f in out.filters) == 1
