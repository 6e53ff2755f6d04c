"""Every knob of a simulation run, with defaults that reproduce the 2011 thesis setup.

Defaults: 3 clients x 25 concurrent puts against 20 fast and 20 slow threads
(M. Hellmich, CERN openlab 2011). Times of day are local to `tz`; all other times are
milliseconds of simulated time.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from dpmstream.parsers.plain import Value
from dpmstream.simulator.service import ServiceTimes

# The start as calibrate writes it (and as most users type it): every field of its full
# width. strptime's first call costs ~12 M instructions (importing _strptime, reading the
# locale, compiling its patterns), a noticeable part of `report`'s what-if; a string of
# this form reads the same either way (tests/simulator/test_config_start.py pins it).
_PLAIN_START = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,6}))?)?", re.ASCII)

STRPTIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")


def _plain_local(text: str) -> datetime | None:
    """`text` as a naive datetime when it has _PLAIN_START's form and names a real
    moment; None otherwise (then strptime reads it, or says what is wrong)."""
    m = _PLAIN_START.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction = m.groups()
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute),
                        int(second or 0), int((fraction or "0").ljust(6, "0")))
    except ValueError:
        return None


class SimConfig(Value):
    """Every knob of one simulation run (the module's docstring: the thesis defaults).

    A plain class, not a dataclass: the report's what-if imports it, and importing
    dataclasses (inspect, ast, dis, tokenize) and making this one of 51 fields was ~50 M
    instructions of the report's ~1,390 M on the thesis log (issue 30). It keeps the
    dataclass's ways (parsers/plain.Value): its fields (annotated below, in order, each
    with its default) given by name or position, compared and shown by them, `replace`."""

    # Load.
    clients: int = 3
    concurrency: int = 25              # concurrent request streams per client (closed loop)
    requests: int | None = None        # request cycles to start (default 3000 unless duration/lines)
    duration: float | None = None      # simulated seconds; the run stops there, mid-call if need be
    lines: int | None = None           # start cycles until the DPM log has this many lines
    rate: float | None = None          # open loop: Poisson arrivals per second instead of streams
    files: int = 1                     # files per put/get
    get_fraction: float = 0.0
    plain_rate: float = 0.05           # chance a cycle begins with a ping or getpools call
    # Daemon.
    fthreads: int = 20                 # NB_FTHREADS
    sthreads: int = 20                 # NB_STHREADS
    dpns_threads: int = 20
    backlog: int = 50                  # listen backlog; beyond it connections are refused
    sync_get: bool = False             # DPM_USE_SYNCGET: gets served in the fast thread
    same_dir: bool = False             # all files in one directory (one DPNS lock)
    accept_lines: bool = True
    whole_seconds: bool = False        # older builds: no milliseconds
    restart_at: float | None = None    # seconds after start: the DPM daemon restarts
    restart_downtime: float = 3.0
    # Failures (probabilities per call or per request).
    auth_fail_rate: float = 0.01
    put_fail_rate: float = 0.005       # put/get returns rc != 0
    proc_fail_rate: float = 0.005      # processing returns rc != 0 -> status FAILED
    done_fail_rate: float = 0.0        # putdone/relfiles returns rc != 0 (still a success)
    abort_rate: float = 0.005          # client aborts after a QUEUED/ACTIVE answer
    abandon_rate: float = 0.005        # client disappears (no polls, or no putdone/relfiles)
    # Log envelope.
    seed: int = 1
    start: str = "2011-08-12 14:31:40"
    tz: str = "Europe/Zurich"
    host: str = "dpmhead01.cern.ch"
    pid: int = 12345
    dpns_pid: int = 9876
    jitter_rate: float = 0.01          # share of lines written a few ms after their stamp
    jitter_ms: int = 5
    # Logs shaped differently (issue 11); every one is off by default.
    stray_lines: int = 0               # calls (1 in 3: a main-thread line) by another DPM process
    stray_pid: int = 23456             # that process's pid (a probe's ping helper)
    restart_overlap: float = 0.0       # the old process finishes its calls this long after the
                                       # new one starts (0: a clean restart with downtime)
    syslog_file: bool = False          # also PREFIX.messages: DPM + DPNS + other programs via rsyslog
    clock_step_at: float | None = None  # seconds after start: the head node's clock steps back
    clock_step_s: float = 30.0         # by this much (NTP)
    future_lines: int = 0              # stray DPM lines stamped `future_ahead_s` ahead
    future_ahead_s: float = 3660.0     # an hour and a minute: past the default timeout
    # Replayed load (issue 15, `dpmstream whatif`): instead of the closed-loop streams,
    # one cycle per (offset ms from start, "put"|"get", client index), as a log showed them.
    arrivals: tuple | None = None
    # Client status polls: the first this long after the put/get's reply, each next one
    # `poll_factor` times later, at most `poll_max_ms` apart.
    poll_first_ms: int = 125
    poll_factor: float = 2.0
    poll_max_ms: int = 4000
    service: ServiceTimes = None       # each config its own ServiceTimes() unless given
    dirs: int | None = None            # files spread over this many directories (None: one per
                                       # client, or one with same_dir)
    # Each new file in directory k with probability dir_shares[k] (a log's directories, as
    # `whatif` calibrates them; each may hold its lock for its own time, service.dpns_creat_dirs).
    dir_shares: tuple[float, ...] | None = None
    dpns_gap: tuple[float, float] | None = None  # seconds after start: DPNS lines of [a, b) lost
    # Name-server clients (issue 27): the head node as the DPNS names it (None: `host`), and
    # whether disk nodes (at each transfer's end) and an SRM (before each put/get) call it too.
    ns_head_client: str | None = None
    ns_other_clients: bool = False

    DEFAULT_REQUESTS = 3000

    def __init__(self, *args, **given):
        if len(args) > len(self.FIELDS):
            raise TypeError(f"SimConfig() takes at most {len(self.FIELDS)} arguments")
        for name, value in zip(self.FIELDS, args):
            if name in given:
                raise TypeError(f"SimConfig() got multiple values for argument {name!r}")
            given[name] = value
        unknown = given.keys() - _DEFAULTS.keys()
        if unknown:
            raise TypeError(f"SimConfig() got an unexpected keyword argument {min(unknown)!r}")
        for name, default in _DEFAULTS.items():
            setattr(self, name, given[name] if name in given else default)
        if "service" not in given:
            self.service = ServiceTimes()

    def request_budget(self) -> int | None:
        """Cycles to start; None means unlimited (the duration or line target stops it)."""
        if self.requests is not None:
            return self.requests
        if self.arrivals is not None:
            return len(self.arrivals)
        if self.duration is None and self.lines is None:
            return self.DEFAULT_REQUESTS
        return None

    def start_ms(self) -> int:
        """The start instant (UTC ms) of `start`, read as local time in `tz` (first
        occurrence when the hour repeats)."""
        text = self.start.strip().replace("T", " ")
        local = _plain_local(text)
        for fmt in STRPTIME_FORMATS if local is None else ():
            try:
                local = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
        if local is None:
            raise ValueError(f"--start {self.start!r}: expected YYYY-MM-DD HH:MM[:SS[.fff]]")
        aware = local.replace(tzinfo=ZoneInfo(self.tz), fold=0)
        return int(round(aware.timestamp() * 1000))

    def validate(self) -> None:
        """Raise ValueError with a clear message on impossible settings."""
        ZoneInfo(self.tz)  # raises ZoneInfoNotFoundError (a KeyError) on unknown zones
        checks = [
            (self.clients >= 1, "clients must be >= 1"),
            (self.concurrency >= 1, "concurrency must be >= 1"),
            (self.files >= 1, "files must be >= 1"),
            (self.fthreads >= 1 and self.sthreads >= 1 and self.dpns_threads >= 1,
             "thread pools must have >= 1 thread"),
            (self.backlog >= 0, "backlog must be >= 0"),
            (self.requests is None or self.requests >= 0, "requests must be >= 0"),
            (self.duration is None or self.duration > 0, "duration must be > 0"),
            (self.lines is None or self.lines >= 0, "lines must be >= 0"),
            (self.rate is None or self.rate > 0, "rate must be > 0"),
            (self.restart_at is None or self.restart_at >= 0, "restart-at must be >= 0"),
            # A restart shorter than the jitter could interleave old- and new-pid lines.
            (self.restart_downtime >= 1.0, "restart downtime must be >= 1 s"),
            (0 <= self.jitter_ms <= 500, "jitter-ms must be within 0..500"),
            (0 < self.pid < 2**22 and 0 < self.dpns_pid < 2**22, "pids must be positive"),
            (self.pid != self.dpns_pid, "the DPM and DPNS pids must differ"),
            (bool(self.host) and " " not in self.host, "host must be a non-empty name"),
            (self.ns_head_client is None or (bool(self.ns_head_client)
                                             and " " not in self.ns_head_client),
             "ns-head-client must be a non-empty name"),
            (self.stray_lines >= 0, "stray-lines must be >= 0"),
            (0 < self.stray_pid < 2**22, "pids must be positive"),
            (self.stray_lines == 0 or self.stray_pid not in (self.pid, self.dpns_pid),
             "the stray pid must differ from the DPM and DPNS pids"),
            (self.restart_overlap >= 0, "restart-overlap must be >= 0"),
            (self.restart_overlap == 0 or self.restart_at is not None,
             "restart-overlap needs restart-at"),
            (self.clock_step_at is None or self.clock_step_at >= 0, "clock-step-at must be >= 0"),
            (self.clock_step_s > 0, "clock-step-s must be > 0"),
            (self.future_lines >= 0, "future-lines must be >= 0"),
            (self.future_ahead_s >= 60, "future-ahead-s must be >= 60"),
            (self.dirs is None or self.dirs >= 1, "dirs must be >= 1"),
            (self.dir_shares is None or (self.dir_shares and all(w >= 0 for w in self.dir_shares)
                                         and sum(self.dir_shares) > 0),
             "dir-shares must be non-negative with a positive sum"),
            (self.dir_shares is None or self.dirs is None, "give dirs or dir-shares, not both"),
            (self.poll_first_ms >= 1 and self.poll_max_ms >= self.poll_first_ms,
             "poll-first-ms must be >= 1 and <= poll-max-ms"),
            (self.poll_factor >= 1.0, "poll-factor must be >= 1"),
            (self.arrivals is None or all(
                offset >= 0 and kind in ("put", "get") and client >= 0
                for offset, kind, client in self.arrivals),
             "arrivals must be (offset ms >= 0, put|get, client index >= 0)"),
            (self.dpns_gap is None or 0 <= self.dpns_gap[0] < self.dpns_gap[1],
             "dpns-gap must be A:B with 0 <= A < B seconds"),
        ]
        for name in ("get_fraction", "plain_rate", "auth_fail_rate", "put_fail_rate",
                     "proc_fail_rate", "done_fail_rate", "abort_rate", "abandon_rate",
                     "jitter_rate"):
            value = getattr(self, name)
            checks.append((0.0 <= value <= 1.0, f"{name.replace('_', '-')} must be within 0..1"))
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        self.start_ms()


# The fields: the class body's annotations, in order; their defaults, its values.
SimConfig.FIELDS = tuple(SimConfig.__annotations__)
_DEFAULTS = {name: getattr(SimConfig, name) for name in SimConfig.FIELDS}
