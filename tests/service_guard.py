"""The `services` marker, enforced: a test that starts a real service and is not marked
`@pytest.mark.services` fails, so `make check` (`pytest -m "not services"`) never starts
one behind the developer's back, whatever order the tests run in.

Two checks, both wired in tests/conftest.py:
  - a test that uses a service fixture (SERVICE_FIXTURES) must carry the marker, checked
    before its set-up: the session broker may already run when an unmarked test asks for
    it, which would hide the mistake until that test ran alone;
  - a process a test starts (an audit hook on subprocess.Popen, os.posix_spawn and os.exec)
    must not be one of the services (`service_started_by`) unless the test is marked. The
    hook refuses the start, and the test fails even if it swallowed the error.

A child process's own children are not seen: a `dpmstream stack up` or `worker` run by a
test starts (or reaches) Kafka from its own process, and the same command line with
`--help` or a refused option starts nothing, so such a test is marked by hand (the
stack's tests in tests/commands/stack/ are).
"""

from __future__ import annotations

import os
import sys

import pytest

SERVICE_FIXTURES = frozenset({"kafka_broker", "kafka_topic", "kafka_broker_factory",
                              "rsyslog_factory", "prometheus_factory"})
CHROMIUM = frozenset({"chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell"})
COMPOSE_STARTS = frozenset({"up", "run", "start", "create", "restart"})


def service_started_by(argv) -> str | None:
    """The service a command line starts, or None. Commands that only check a
    configuration (`rsyslogd -N1`, `nagios4 -v`, `docker-compose config`, promtool) or
    prepare one (Kafka's StorageTool) start nothing."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    args = [os.fsdecode(a) for a in argv]
    if not args:
        return None
    program = os.path.basename(args[0])
    if program == "rsyslogd" and not any(a.startswith("-N") for a in args[1:]):
        return "rsyslog"
    if program == "prometheus":
        return "Prometheus"
    if program in ("nagios4", "nagios") and "-v" not in args[1:]:
        return "Nagios"
    if program in CHROMIUM:
        return "Chromium"
    if (program == "java" and "kafka.Kafka" in args) or program == "kafka-server-start.sh":
        return "Kafka"
    if program in ("docker-compose", "docker") and COMPOSE_STARTS & set(args[1:]):
        return "docker-compose"
    return None


def is_marked(item: pytest.Item) -> bool:
    return item.get_closest_marker("services") is not None


def unmarked_message(item: pytest.Item, what: str) -> str:
    return (f"{item.nodeid} {what} but is not marked @pytest.mark.services: "
            f'`make check` (-m "not services") would start it. Mark the test.')


class Guard:
    """Which test runs now, and the services it started without the marker."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.violations: dict[str, str] = {}

    def audit(self, event: str, args: tuple) -> None:
        if event not in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
            return
        argv = args[1]   # (executable or path, argv, ...) in all three
        item = self.item
        if item is None or is_marked(item):
            return
        try:
            service = service_started_by(argv)
        except (TypeError, ValueError):   # an argv of an unexpected type: not ours to judge
            return
        if service is not None:
            message = unmarked_message(item, f"starts {service} ({' '.join(map(os.fsdecode, argv))[:200]})")
            self.violations.setdefault(item.nodeid, message)
            raise RuntimeError(message)


GUARD = Guard()
sys.addaudithook(GUARD.audit)   # once per process: audit hooks cannot be removed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    GUARD.item = item
    try:
        yield
    finally:
        GUARD.item = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    used = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used and not is_marked(item):
        pytest.fail(unmarked_message(item, f"uses the service fixture(s) {', '.join(sorted(used))}"),
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    message = GUARD.violations.get(item.nodeid)
    if message and report.when == "call" and report.passed:   # the test caught the refusal
        report.outcome = "failed"
        report.longrepr = message
