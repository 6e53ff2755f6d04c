"""A DOME node's log, in the envelope a site reads it from.

- dmlite-log: /var/log/dmlite/dmlite.log, what the packaged rsyslog snippet copies (every
  message containing ` dmlite `), in the traditional or the RFC 3339 stamp;
- messages: /var/log/messages, the same lines among other programs' (sshd, cron, systemd,
  the kernel, and journald telling how many lines its rate limit dropped);
- journal: `journalctl -q -o short-iso-precise` (microseconds, offset as +0200), with the
  other programs too;
- kafka: one JSON envelope per line of dmlite.log, as the project's rsyslog config ships
  it (streams/kafka/envelope.py: host, path, offset, received, line).

Lines are written in the order of their instant, a thread's lines in their own order.
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from dpmstream.simulator.dome_model import Line, Node
from dpmstream.streams.kafka.envelope import encode, ms_to_rfc3339

DMLITE_LOG = "/var/log/dmlite/dmlite.log"
FOREIGN = (
    "sshd[2211]: Accepted publickey for root from 192.0.2.1 port 52022 ssh2",
    "CRON[3120]: (root) CMD (/usr/lib64/sa/sa1 1 1)",
    "systemd[1]: Started Session 4242 of user root.",
    "kernel: nfs: server nfs01.example.org OK",
    "xinetd[880]: START: sftp pid=9001 from=192.0.2.7",
)
RECEIVE_DELAY_US = (200, 3000)   # from a line's syslog() to rsyslog reading it (kafka)


def message(ln: Line, generation: str) -> str:
    """dmlite's text (include/dmlite/cpp/utils/logger.h): Log or Err, with or without {TID}."""
    if generation == "tid":
        if ln.level < 0:
            return f"{{{ln.tid}}}!!! dmlite {ln.where}{ln.func} : {ln.text}"
        return f"{{{ln.tid}}}[{ln.level}] dmlite {ln.where} {ln.func} : {ln.text}"
    if ln.level < 0:
        return f"dmlite {ln.where} !! {ln.func} : {ln.text}"
    return f"[{ln.level}] dmlite {ln.where} {ln.func} : {ln.text}"


class Stamper:
    """The syslog stamp of an instant, in one style: traditional (`May 30 08:44:05`),
    rfc3339 (`2017-05-30T08:44:05.123456+02:00`) or journal (`...+0200`)."""

    def __init__(self, style: str, tz: str, rng: random.Random):
        self.style, self.zone, self.rng = style, ZoneInfo(tz), rng
        self._second, self._parts = None, ("", "")   # the last second's parts, made once:
        # a node's lines come in time order, many in one second

    def __call__(self, ms: int) -> str:
        if ms // 1000 != self._second:
            self._second, self._parts = ms // 1000, self._second_parts(ms // 1000)
        whole, offset = self._parts
        if self.style == "traditional":
            return whole
        micros = (ms % 1000) * 1000 + self.rng.randrange(1000)
        return f"{whole}.{micros:06d}{offset}"

    def _second_parts(self, second: int) -> tuple[str, str]:
        """The stamp of a whole second, and its offset (empty: the traditional style)."""
        local = datetime.fromtimestamp(second, timezone.utc).astimezone(self.zone)
        if self.style == "traditional":
            return f"{local:%b} {local.day:>2} {local:%H:%M:%S}", ""
        offset = local.strftime("%z")
        if self.style == "rfc3339":
            offset = f"{offset[:3]}:{offset[3:]}"
        return f"{local:%Y-%m-%dT%H:%M:%S}", offset


def write_node_log(path, node: Node, lines: list[Line], cfg, gap, rng: random.Random,
                   dropped: int = 0) -> list:
    """Write one node's kept lines; returns what each written line is: its Line, or None
    for another program's line. `dropped` lines of journald's `gap` are announced, as
    journald does, after it (in the envelopes that show other programs)."""
    style = "journal" if cfg.envelope == "journal" else cfg.stamp
    stamp = Stamper(style, cfg.tz, random.Random(f"{cfg.seed}/{node.host}/micros"))
    mixed = cfg.envelope in ("messages", "journal")
    written, out, offset = [], [], 0
    suppressed_at = gap[1] if gap is not None and dropped else None
    for ln in lines:
        if suppressed_at is not None and ln.t >= suppressed_at:
            if mixed:
                out.append(f"{stamp(suppressed_at)} {node.host} systemd-journald[412]: Suppressed "
                           f"{dropped} messages from /system.slice/{cfg.program}.service\n")
                written.append(None)
            suppressed_at = None
        if mixed and rng.random() < cfg.foreign_rate:
            out.append(f"{stamp(ln.t)} {node.host} {rng.choice(FOREIGN)}\n")
            written.append(None)
        text = f"{stamp(ln.t)} {node.host} {cfg.program}[{ln.life.pid}]: {message(ln, cfg.generation)}"
        if cfg.envelope == "kafka":
            received = ms_to_rfc3339(ln.t, rng.randint(*RECEIVE_DELAY_US))
            out.append(encode(node.host, DMLITE_LOG, offset, received, text).decode("utf-8") + "\n")
            offset += len(text.encode("utf-8")) + 1
        else:
            out.append(text + "\n")
        written.append(ln)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(out)
    if lines:
        # Like a live log, the file's mtime is its last line's time: a reader dating
        # year-less traditional stamps by the mtime gets the right year.
        mtime = lines[-1].t * 1_000_000
        os.utime(path, ns=(mtime, mtime))
    return written
