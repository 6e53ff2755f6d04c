"""parsers/lazylog.py: a logger that imports `logging` only for a message it writes, and
writes what logging.getLogger(name) would have, configured as configure() was told.

Where logging is not imported yet (a fresh interpreter, as a user's replay is), each case
runs in one; under pytest logging is imported, and the loggers are logging's."""

import json
import logging
import subprocess
import sys

from dpmstream.parsers.lazylog import get_logger

PROBE = """
import json, sys
from dpmstream.parsers import lazylog
verbose, configured = int(sys.argv[1]), sys.argv[2] == "yes"
if configured:
    lazylog.configure(level=30 - 10 * verbose, format="dpmstream: %(levelname)s: %(message)s",
                      stream=sys.stderr)
log = lazylog.get_logger("dpmstream.probe")
log.debug("a debug %s", 1)
log.info("an info %s", 2)
after_info = "logging" in sys.modules
log.warning("a warning %s", 3)
print(json.dumps({"after_info": after_info, "after_warning": "logging" in sys.modules}))
"""


def probe(verbose: int, configured: bool = True) -> tuple[dict, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(verbose), "yes" if configured else "no"],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout), done.stderr.splitlines()


def test_a_message_below_the_level_imports_no_logging_and_one_above_is_written_as_configured():
    got, err = probe(0)
    assert got == {"after_info": False, "after_warning": True}
    assert err == ["dpmstream: WARNING: a warning 3"]


def test_the_configured_level_lets_info_and_debug_through():
    got, err = probe(1)
    assert got["after_info"] is True
    assert err == ["dpmstream: INFO: an info 2", "dpmstream: WARNING: a warning 3"]
    assert probe(2)[1] == ["dpmstream: DEBUG: a debug 1", "dpmstream: INFO: an info 2",
                           "dpmstream: WARNING: a warning 3"]


def test_unconfigured_it_writes_what_logging_unconfigured_does():
    # logging's last resort: WARNING and above, the bare message
    got, err = probe(0, configured=False)
    assert got == {"after_info": False, "after_warning": True}
    assert err == ["a warning 3"]


def test_with_logging_imported_the_messages_are_logging_s_records_from_the_caller(caplog):
    log = get_logger("dpmstream.lazylog_test")
    with caplog.at_level(logging.INFO, logger="dpmstream.lazylog_test"):
        log.debug("not at INFO")
        log.info("read %d lines", 3)
    [record] = caplog.records
    assert (record.name, record.levelname, record.getMessage()) == (
        "dpmstream.lazylog_test", "INFO", "read 3 lines")
    assert record.funcName == "test_with_logging_imported_the_messages_are_logging_s_records_from_the_caller"
