"""PREFIX.messages: the head node's DPM and DPNS logs as rsyslog writes them into one
file (/var/log/messages, RSYSLOG_FileFormat), among lines of other programs:

    2011-08-12T14:31:43.118402+02:00 dpmhead01.cern.ch dpm: 08/12 14:31:43.118 12345,3 dpm_srv_put: ...
    2011-08-12T14:31:43.121007+02:00 dpmhead01.cern.ch dpns: 08/12 14:31:43.120  9876,2 Cns_srv_creat: ...
    2011-08-12T14:31:43.125310+02:00 dpmhead01.cern.ch sshd[2211]: Accepted publickey for root ...

rsyslog reads each daemon's file as it is written (imfile, tags `dpm` and `dpns`) and
stamps a line with the time it read it: a few ms after the line was written, with
microseconds and the zone offset, by the same (possibly stepped) clock. Each daemon's
lines keep their file order; the file is in rsyslog-time order. The host is written as
the full name (`$PreserveFQDN on`), so the records are those of the separate files.
"""

from __future__ import annotations

import heapq
import os
import random
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from dpmstream.simulator.logwriter import FLUSH_EVERY
from dpmstream.simulator.stamps import Clock

FOREIGN = (
    "sshd[2211]: Accepted publickey for root from 10.0.0.1 port 22 ssh2",
    "kernel: nfs: server nfs01.cern.ch OK",
    "CRON[99]: (root) CMD (/usr/lib64/sa/sa1 1 1)",
    "systemd[1]: Started Session 4242 of user root.",
)
READ_DELAY_US = (300, 4000)      # from a line's write to rsyslog's stamp


class SyslogWriter:
    def __init__(self, path, host: str, tz: str, clock: Clock, rng: random.Random,
                 foreign_rate: float = 0.002):
        self.path = path
        self._fh = open(path, "w", encoding="utf-8", newline="\n")
        self.host = host
        self.zone = ZoneInfo(tz)
        self.clock = clock
        self.rng = rng
        self.foreign_rate = foreign_rate
        self._heap: list = []
        self._out: list[str] = []              # lines written, not yet handed to the file
        self._seq = 0
        self._last_us: dict[str, int] = {}     # per program tag: its latest rsyslog time
        self._sec = None
        self._sec_text = ("", "")
        self.count = 0
        self.foreign = 0
        self.last_us = None

    def tap(self, tag: str):
        """The callback a LogWriter calls with each line it writes (write key, line)."""
        def take(key: int, text: str) -> None:
            lo, hi = READ_DELAY_US
            at = max(self._last_us.get(tag, 0), key * 1000 + self.rng.randint(lo, hi))
            self._last_us[tag] = at
            heapq.heappush(self._heap, (at, self._seq, f"{tag}: {text}"))
            self._seq += 1
        return take

    def _stamp(self, true_us: int) -> str:
        ms, us = divmod(true_us, 1000)
        sec, frac_ms = divmod(self.clock.shows(ms), 1000)
        if sec != self._sec:
            local = datetime.fromtimestamp(sec, timezone.utc).astimezone(self.zone)
            iso = local.isoformat()
            self._sec, self._sec_text = sec, (local.strftime("%Y-%m-%dT%H:%M:%S"), iso[19:])
        head, offset = self._sec_text
        return f"{head}.{frac_ms * 1000 + us:06d}{offset}"

    def _write(self, bound_us: int | None) -> None:
        heap, out, rng = self._heap, self._out, self.rng
        while heap and (bound_us is None or heap[0][0] < bound_us):
            at, _, body = heapq.heappop(heap)
            stamp = self._stamp(at)
            if rng.random() < self.foreign_rate:
                out.append(f"{stamp} {self.host} {rng.choice(FOREIGN)}\n")
                self.foreign += 1
            out.append(f"{stamp} {self.host} {body}")
            self.count += 1
            self.last_us = at
        # Called once per simulated event: the text is handed to the file in batches.
        if bound_us is None or len(out) >= FLUSH_EVERY:
            self._fh.writelines(out)
            out.clear()

    def flush_before(self, now: int) -> None:
        """Lines the daemons write from `now` on are read after `now`: write the rest."""
        self._write(now * 1000)

    def close(self) -> None:
        self._write(None)
        self._fh.close()
        if self.last_us is not None:
            mtime = self.clock.shows(self.last_us // 1000) * 1_000_000
            os.utime(self.path, ns=(mtime, mtime))
