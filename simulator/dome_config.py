"""The knobs of a simulated DOME site (a head node and N disk nodes): DomeConfig.

Every shape that docs/dome.md (after /work/shared/dome-log-format.md) marks [reference]
is a knob here: the stamp style, the envelope the logs come in, the logger generation
(with or without {TID}), whether the `Accepted connection` line exists, and the program
name dmlite logs under.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpmstream.simulator.config import SimConfig

STAMPS = ("traditional", "rfc3339")
# dmlite-log: /var/log/dmlite/dmlite.log (dmlite lines only); messages: /var/log/messages
# (among other programs); journal: `journalctl -q -o short-iso-precise`; kafka: the
# project's rsyslog -> Kafka envelopes (JSON lines) of dmlite.log.
ENVELOPES = ("dmlite-log", "messages", "journal", "kafka")
GENERATIONS = ("tid", "notid")
CAPACITY_INTERVAL_S = 60        # glb.fscheckinterval
CHKSUM_POLL_S = 5               # a frontend's dome_chksum poll interval
CHKSUM_MAX_S = 1800             # ... for at most this long
MAX_CLIENTS = 240               # remote clients 192.0.2.10 .. 192.0.2.249 (documentation range)


@dataclass
class DomeConfig:
    seed: int = 1
    start: str = "2017-05-30 08:44:00"   # local time in tz
    tz: str = "Europe/Zurich"
    duration: float = 600.0              # simulated seconds
    rate: float = 2.0                    # dome_put calls per second (Poisson)
    head: str = "dpmhead01"
    disks: int = 3                       # disk nodes dpmdisk01..NN
    filesystems: int = 2                 # per disk node
    threads: int = 64                    # DOME worker threads per process (glb.workers)
    program: str = "dome"                # syslog ident: dome (FastCGI) or xrootd (DOME inside it)
    stamp: str = "traditional"
    envelope: str = "dmlite-log"
    generation: str = "tid"
    accept_lines: bool = True            # builds after 2017-05-23 log `Accepted connection`
    put_fail_rate: float = 0.02          # dome_put answered 403
    abandon_rate: float = 0.03           # the client never finishes its transfer
    putdone_fail_rate: float = 0.02      # the head answers 422 (Invalid status for replica)
    chksum_fraction: float = 0.3         # puts whose frontend then polls dome_chksum
    chksum_fail_rate: float = 0.05
    chksum_give_up_rate: float = 0.03    # frontends that stop polling dome_chksum after 1 to 4 polls
    chksum_pair_rate: float = 0.03       # checksum waits during which the client polls a second file at once
    clients: int = 12                    # end-user hosts (remote clients), 192.0.2.10 on
    disk_down_at: float | None = 200.0   # seconds in: the first disk node's DOME goes down ...
    disk_down_s: float = 150.0           # ... for this long (then back with a new pid)
    restart_at: float | None = 400.0     # seconds in: the head's DOME restarts (PUTCOUNT starts again from 1)
    restart_downtime: float = 3.0
    gap_at: float | None = 300.0         # seconds in: journald drops the head's lines ...
    gap_s: float = 4.0                   # ... for this long (rate limit)
    timeout: float = 120.0               # a put with no putdone this long is `incomplete`
    foreign_rate: float = 0.05           # other programs' lines per dmlite line (messages, journal)

    def start_ms(self) -> int:
        return SimConfig(start=self.start, tz=self.tz).start_ms()

    def validate(self) -> None:
        for name, allowed in (("stamp", STAMPS), ("envelope", ENVELOPES),
                              ("generation", GENERATIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"--{name} {getattr(self, name)!r}: expected one of {', '.join(allowed)}")
        if self.disks < 1 or self.filesystems < 1 or self.threads < 1:
            raise ValueError("--disks, --filesystems and --threads must be at least 1")
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise ValueError(f"--clients must be between 1 and {MAX_CLIENTS} (addresses of 192.0.2.0/24)")
        if self.duration <= 0 or self.rate <= 0 or self.timeout <= 0:
            raise ValueError("--duration, --rate and --request-timeout must be positive")
        for name in ("put_fail_rate", "abandon_rate", "putdone_fail_rate", "chksum_fraction",
                     "chksum_fail_rate", "chksum_give_up_rate", "chksum_pair_rate", "foreign_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"--{name.replace('_', '-')} must be between 0 and 1")
        self.start_ms()  # raises on a bad --start

    @property
    def whole_seconds(self) -> bool:
        """Whether the written stamps have whole seconds (journalctl's have microseconds)."""
        return self.stamp == "traditional" and self.envelope != "journal"
