"""A bound on how long a long-running command takes to stop once asked to.

    deadline = StopDeadline(4.0, log, cleanup=[remove_scratch_dir],
                            consequence="what was not committed is read again")
    ... on SIGTERM/SIGINT: deadline.arm(); then begin the graceful stop

The graceful stop of a Kafka worker commits the batch in hand, leaves the group and
closes its producers; with the broker gone each of those retries for a long time (a
worker ignored SIGTERM for 4 s, a Faust worker for over a minute). Nothing is lost by
cutting that short: what was not committed is aborted by the next owner's fencing and
read again. So once armed, a daemon timer gives the graceful stop `seconds`, then logs
what happened, runs the cleanups and ends the process (exit code 1, or the caller's: it
did not stop cleanly). `dpmstream run` uses it too: a full pipe or a hung disk can block
its loop, and the state it saved last stands on its own.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable

EXIT_CODE = 1
# The promise is "stopped within 5 s of SIGTERM": the graceful stop gets 4 s, which
# leaves a loaded machine a second to deliver the signal and end the process.
STOP_WITHIN_S = 4.0


class StopDeadline:
    def __init__(self, seconds: float, log: logging.Logger,
                 cleanup: Iterable[Callable[[], None]] = (), *, consequence: str,
                 exit_code: int = EXIT_CODE) -> None:
        self.seconds = seconds
        self.log = log
        self.cleanup = list(cleanup)
        self.consequence = consequence   # what the cut-short stop leaves, for the admin
        self.exit_code = exit_code
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        """Start the countdown (once; later calls keep the first deadline)."""
        if self._timer is None:
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self) -> None:
        self.log.warning("not stopped cleanly %.1f s after the stop signal: exiting now; %s",
                         self.seconds, self.consequence)
        for step in self.cleanup:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - exiting anyway
                self.log.warning("cleanup at exit failed: %s", exc)
        logging.shutdown()
        sys.stderr.flush()
        os._exit(self.exit_code)
