"""A DOME site in motion: a head node and N disk nodes, their processes, calls and lines.

Everything is generated up front from the configuration and one seeded generator per
concern, so a run is a function of its DomeConfig:

- each node runs one DOME process at a time (a `Life`: pid, from, until); the first disk
  node goes down and comes back with a new pid, the head restarts (its PUTCOUNT starts again: the first PFN has 1);
- a put is a chain of calls: a frontend's `dome_put` on the head, the client's transfer
  (not logged), `dome_putdone` on the target disk node forwarded to the head, and, for a
  share of puts, the frontend's `dome_chksum` polls with the head's `dome_dochksum` to the
  disk and the disk's `dome_chksumstatus` back;
- every 60 s each disk node logs its filesystems' capacity, and the head asks every disk
  node for it (`dome_getspaceinfo`), disabling the filesystems of one that does not answer
  and enabling them again when it does; the head selects only enabled filesystems;
- each call then gets a worker thread of its process (one call per thread at a time).

Each Line carries the role and fields a profile must read from it, and whether it reached
the log: lines after their process died, after the end of the run, or inside a journald
gap are lost (`lost` says why), as in a real log.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from dpmstream.simulator.dome_config import (
    CAPACITY_INTERVAL_S, CHKSUM_MAX_S, CHKSUM_POLL_S, DomeConfig,
)

DOMAIN = "example.org"
TB = 1_000_000_000_000
PHYS_BYTES = 40 * TB
VOS = ("atlas", "cms", "lhcb", "dteam")


@dataclass(eq=False)
class Life:
    """One DOME process on a node."""
    pid: int
    begin: int                       # ms
    end: int | None                  # ms it dies; None: runs past the end
    main_tid: int
    checker_tid: int
    putcount: int = 0                # the head's PUTCOUNT (in memory: 0 at each start, 1 the first put)

    def alive(self, t: int) -> bool:
        return self.begin <= t and (self.end is None or t < self.end)


@dataclass(eq=False)
class Node:
    host: str                        # as syslog writes it (short name)
    role: str                        # head or disk
    lives: list[Life]
    filesystems: list[str] = field(default_factory=list)

    @property
    def fqdn(self) -> str:
        return f"{self.host}.{DOMAIN}"

    @property
    def dn(self) -> str:
        return f"/DC=org/DC=example/CN={self.fqdn}"

    def life_at(self, t: int) -> Life | None:
        for life in self.lives:
            if life.alive(t):
                return life
        return None


@dataclass(eq=False)
class Line:
    t: int                           # true instant, ms
    node: Node
    life: Life
    tid: int                         # set for a call's lines when threads are assigned
    level: int                       # dmlite level; -1: an Err (`!!!`) line
    where: str
    func: str
    text: str
    role: str                        # the role a profile must read
    fields: dict                     # ... and the fields
    call: "Call | None" = None
    lost: str = ""                   # "", killed, end, gap

    @property
    def kept(self) -> bool:
        return not self.lost


@dataclass(eq=False)
class Call:
    node: Node
    life: Life
    start: int
    end: int
    command: str
    code: int
    caller: Node
    remote_dn: str
    remote_host: str
    lines: list[Line] = field(default_factory=list)
    tid: int = -1
    open_lines: tuple = ()           # accept and clientdn lines (either opens the call)
    exit_line: Line | None = None
    command_line: Line | None = None
    caller_line: Line | None = None


@dataclass(eq=False)
class Put:
    """A frontend's dome_put and what followed it."""
    lfn: str
    call: Call
    entering: Line
    selected: Line | None = None
    server: str | None = None
    fs: str | None = None
    pfn: str | None = None
    size: int | None = None
    putdone_disk: Line | None = None
    putdone_head: Line | None = None
    disk_call: Call | None = None
    head_call: Call | None = None


@dataclass(eq=False)
class ChecksumWait:
    """One file's checksum as a frontend waited for it: its dome_chksum polls on the head
    (those made while the head was up), in order; the last answers 200 or 500 unless the
    frontend gave up or the run ended first."""
    frontend: Node
    user: tuple[str, str]
    asked: int                       # ms of its first poll
    polls: list[Call] = field(default_factory=list)


class Site:
    def __init__(self, cfg: DomeConfig):
        self.cfg = cfg
        self.zone = ZoneInfo(cfg.tz)
        self.t0 = cfg.start_ms()
        self.t_end = self.t0 + int(cfg.duration * 1000)
        self.lines: list[Line] = []
        self.calls: list[Call] = []
        self.puts: list[Put] = []
        self.checksums: list[ChecksumWait] = []
        self.checksum_rng = random.Random(f"{cfg.seed}/checksums")
        self.not_logged = 0          # frontend calls made while the node was down
        rng = random.Random(f"{cfg.seed}/tids")
        self._tid_rng = rng
        self.head = Node(cfg.head, "head", self._lives(2345, cfg.restart_at, cfg.restart_downtime))
        self.disks = []
        for i in range(cfg.disks):
            down = cfg.disk_down_at if i == 0 else None
            node = Node(f"dpmdisk{i + 1:02d}", "disk", self._lives(3101 + 100 * i, down, cfg.disk_down_s),
                        [f"/srv/dpm/{j + 1:02d}" for j in range(cfg.filesystems)])
            self.disks.append(node)
        self.users = [(f"/DC=ch/DC=example/OU=Users/CN=user{u:02d}", f"192.0.2.{10 + u}")
                      for u in range(cfg.clients)]

    # -- processes ------------------------------------------------------------------
    def _tid(self) -> int:
        return 139_900_000_000_000 + self._tid_rng.randrange(1, 10**12)

    def _life(self, pid: int, begin: int, end: int | None) -> Life:
        return Life(pid, begin, end, self._tid(), self._tid())

    def _lives(self, pid: int, down_at: float | None, down_s: float) -> list[Life]:
        if down_at is None:
            return [self._life(pid, self.t0, None)]
        stop = self.t0 + int(down_at * 1000)
        back = stop + int(down_s * 1000)
        return [self._life(pid, self.t0, stop), self._life(pid + 1 + (pid % 7), back, None)]

    # -- lines and calls ------------------------------------------------------------
    def line(self, t, node, life, tid, level, where, func, text, role, fields=None, call=None) -> Line:
        ln = Line(t, node, life, tid, level, where, func, text, role, fields or {}, call)
        self.lines.append(ln)
        if call is not None:
            call.lines.append(ln)
        return ln

    def call(self, node: Node, t: int, duration: int, method: str, command: str, code: int,
             caller: Node, user: tuple[str, str], handler=()) -> Call | None:
        """A call on `node` at t (None when its DOME is down: nothing is logged). `handler`:
        (offset ms, level, func, text, role, fields) lines between the framing lines."""
        life = node.life_at(t)
        if life is None:
            self.not_logged += 1
            return None
        c = Call(node, life, t, t + duration, command, code, caller, user[0], user[1])
        opens = []
        if self.cfg.accept_lines and self.cfg.generation == "tid":
            opens.append(self.line(t, node, life, -1, 1, "dome", "workerFunc",
                                   f"Accepted connection, ipcfd: {self._ipcfd(t)}, keepConnection: 1",
                                   "accept", call=c))
        fields = {"client_dn": caller.dn, "client_host": caller.fqdn, "remote_dn": user[0],
                  "remote_host": user[1]}
        c.caller_line = self.line(
            t, node, life, -1, 1, "dome", "workerFunc",
            f"clientdn: '{caller.dn}' clienthost: '{caller.fqdn}' remoteclient: '{user[0]}' "
            f"remoteclienthost: '{user[1]}'", "call", fields, c)
        opens.append(c.caller_line)
        c.open_lines = tuple(opens)
        query = f"/domehead/command/{command}" if node.role == "head" else f"/domedisk/command/{command}"
        c.command_line = self.line(t + 1, node, life, -1, 1, "dome", "workerFunc",
                                   f"req:{method} cmd:{command} query:{query} bodyitems: {3 if method == 'POST' else 0}",
                                   "command", {"method": method, "op": command, "query": query}, c)
        for offset, level, func, text, role, fields in handler:
            self.line(t + offset, node, life, -1, level, "dome", func, text, role, fields, c)
        c.exit_line = self.line(t + duration, node, life, -1, 1, "dome", "SendSimpleResp",
                                f"Exiting: code: {code}", "returns", {"code": code}, c)
        self.calls.append(c)
        return c

    def _ipcfd(self, t: int) -> int:
        return 10 + t % 7

    def local_date(self, t: int) -> str:
        return datetime.fromtimestamp(t / 1000, timezone.utc).astimezone(self.zone).strftime("%Y-%m-%d")


def build(cfg: DomeConfig) -> Site:
    """The whole run: startup lines, filesystem checks, puts, threads, then the losses."""
    site = Site(cfg)
    _startups(site)
    enabled = _space_checks(site)
    _puts(site, enabled)
    _cut_by_death(site)
    _capacity(site)
    _assign_threads(site)
    _losses(site)
    return site


def _startups(site: Site) -> None:
    for node in [site.head, *site.disks]:
        for life in node.lives:
            site.line(life.begin, node, life, life.main_tid, 1, "dome", "DomeStatus",
                      f"My automatically detected hostname is: {node.fqdn}", "startup",
                      {"server": node.fqdn})


def _space_checks(site: Site) -> dict:
    """The head's checks every 60 s; returns, per disk node, the sorted (t, enabled)
    changes of its filesystems' state as the head sees it."""
    cfg, head = site.cfg, site.head
    rng = random.Random(f"{cfg.seed}/checks")
    state = {d.host: [(site.t0, True)] for d in site.disks}
    t = site.t0 + rng.randrange(1000, CAPACITY_INTERVAL_S * 1000)
    while t < site.t_end:
        life = head.life_at(t)
        if life is not None:
            for i, disk in enumerate(site.disks):
                at = t + 3 * i
                answered = site.call(disk, at, rng.randint(2, 9), "GET", "dome_getspaceinfo", 200,
                                     head, (head.dn, head.fqdn)) is not None
                was = state[disk.host][-1][1]
                for fs in disk.filesystems:
                    if not answered:
                        site.line(at + 10, head, life, life.checker_tid, -1, "dome", "checkDiskSpaces",
                                  f"Server down or other trouble. Disabling filesystem: '{disk.fqdn} {fs}'",
                                  "fs_disabled", {"server": disk.fqdn, "fs": fs})
                    elif not was:
                        site.line(at + 10, head, life, life.checker_tid, 1, "dome", "checkDiskSpaces",
                                  f"Enabling filesystem: {disk.fqdn} {fs}", "fs_enabled",
                                  {"server": disk.fqdn, "fs": fs})
                if answered != was:
                    state[disk.host].append((at + 10, answered))
        t += CAPACITY_INTERVAL_S * 1000
    return state


def _enabled_at(changes: list, t: int) -> bool:
    i = bisect.bisect_right([c[0] for c in changes], t) - 1
    return changes[i][1]


def _puts(site: Site, enabled: dict) -> None:
    """Draw every put, then run them in the order their `Selected fs` line would come,
    which is the order the head's counter numbers them in."""
    cfg = site.cfg
    rng = random.Random(f"{cfg.seed}/puts")
    t, n, drawn = site.t0, 0, []
    while True:
        t += max(1, int(rng.expovariate(cfg.rate) * 1000))
        if t >= site.t_end:
            break
        n += 1
        vo = rng.choice(VOS)
        base = f"file{n:06d}.root" if rng.random() > 0.05 else "AOD.pool.root"
        lfn = f"/dpm/{DOMAIN}/home/{vo}/data/run{n % 17:03d}/{base}"
        drawn.append((t, rng.randint(4, 40), rng.choice(site.disks), rng.choice(site.users), lfn, vo, base))
    for t, duration, frontend, user, lfn, vo, base in sorted(drawn, key=lambda d: (d[0] + d[1], d[0])):
        _one_put(site, rng, enabled, t, duration, frontend, user, lfn, vo, base)


def _one_put(site, rng, enabled, t, duration, frontend, user, lfn, vo, base) -> None:
    cfg, head = site.cfg, site.head
    life = head.life_at(t)
    if life is None:
        site.not_logged += 1
        return
    choices = [(d, fs) for d in site.disks if _enabled_at(enabled[d.host], t) for fs in d.filesystems]
    entering = (1, 1, "dome_put", f"Entering. lfn: '{lfn}' addreplica: 0 pool: '' host: '' fs: ''",
                "put", {"lfn": lfn})
    if not choices or rng.random() < cfg.put_fail_rate:
        code = 507 if not choices else 403
        call = site.call(head, t, duration, "POST", "dome_put", code, frontend, user, [entering])
        site.puts.append(Put(lfn, call, _line_of(call, "put")))
        return
    disk, fs = rng.choice(choices)
    at = t + duration - 1
    handler = [entering, (duration - 1, 1, "dome_put",
                          f"Selected fs: '{disk.fqdn}:{fs} from {len(choices)} matchings for lfn: '{lfn}'",
                          "put_selected", {"server": disk.fqdn, "fs": fs, "matchings": len(choices),
                                           "lfn": lfn})]
    call = site.call(head, t, duration, "POST", "dome_put", 200, frontend, user, handler)
    # PFN = FS/VO/YYYY-MM-DD/BASENAME.PUTCOUNT.EPOCH, the head's counter and clock: the
    # counter is incremented, then read, once per `Selected fs` line (DomeStatus.cpp:114)
    life.putcount += 1
    now = at + rng.randint(0, 3)   # time(0), read just after the line: maybe the next second
    pfn = f"{fs}/{vo}/{site.local_date(now)}/{base}.{life.putcount}.{now // 1000}"
    put = Put(lfn, call, _line_of(call, "put"), _line_of(call, "put_selected"), disk.fqdn, fs, pfn)
    site.puts.append(put)
    if not life.alive(call.end) or rng.random() < cfg.abandon_rate:
        return  # the frontend got no answer, or the client gave up: no putdone
    put.size = int(rng.lognormvariate(20, 1.5)) + 1
    transfer = int(put.size / rng.uniform(50e6, 300e6) * 1000) + rng.randint(200, 3000)
    tp = call.end + transfer
    if not (disk.life_at(call.end) and disk.life_at(call.end) is disk.life_at(tp)):
        return  # the disk node went down during the transfer
    _putdone(site, rng, put, disk, tp, frontend=disk, user=user)


def _putdone(site, rng, put: Put, disk: Node, tp: int, frontend: Node, user) -> None:
    cfg, head = site.cfg, site.head
    fields = {"server": put.server, "pfn": put.pfn, "size": put.size}
    ck = f"cksumt: 'adler32' cksumv: '{rng.randrange(16**8):08x}'"
    details = f"server: '{put.server}' pfn: '{put.pfn}'  size: {put.size} {ck}"
    head_start = tp + rng.randint(4, 12)
    head_life = head.life_at(head_start)
    failed = rng.random() < cfg.putdone_fail_rate
    head_duration = rng.randint(5, 60)
    if head_life is None:
        head_code, head_end = 500, head_start + 1
    else:
        head_code, head_end = (422 if failed else 200), head_start + head_duration
    disk_duration = head_end - tp + rng.randint(1, 5)
    handler = [(2, 1, "dome_putdone_disk", f" {details}", "putdone_disk", fields),
               (3, 1, "dome_putdone_disk", f" Forwarding to headnode. {details}", "putdone_forward", fields)]
    if head_life is None:
        handler.append((disk_duration - 1, -1, "dome_putdone_disk",
                        f"Could not connect to {head.fqdn}:1094: Connection refused", "other", {}))
    put.disk_call = site.call(disk, tp, disk_duration, "POST", "dome_putdone", head_code, frontend, user, handler)
    put.putdone_disk = _line_of(put.disk_call, "putdone_disk")
    if head_life is None:
        return
    rfn = f"{put.server}:{put.pfn}"
    handler = [(1, 1, "dome_putdone_head", f" {details}", "putdone_head", fields)]
    if failed:
        handler.append((head_duration - 1, -1, "dome_putdone_head",
                        f"Invalid status for replica '{rfn}'", "putdone_error",
                        {"reason": "Invalid status for replica", "server": put.server, "pfn": put.pfn}))
    else:
        handler.append((head_duration - 1, 1, "dome_putdone_head", f" Final size:   {put.size}",
                        "putdone_size", {"size": put.size}))
    put.head_call = site.call(head, head_start, head_duration, "POST", "dome_putdone", head_code,
                              disk, user, handler)
    put.putdone_head = _line_of(put.head_call, "putdone_head")
    if not failed and rng.random() < cfg.chksum_fraction:
        _checksum(site, rng, put, disk, put.disk_call.end + rng.randint(5, 50), frontend, user)


def _checksum(site, rng, put: Put, disk: Node, tc: int, frontend: Node, user, paired: bool = False) -> None:
    """The frontend polls dome_chksum (202 while queued) until the disk node's
    dome_chksumstatus has told the head it is done; a share of frontends give up first
    (after 1 to 4 polls), and a share of clients ask for a second file's checksum at once
    (one of the site's earlier files), on the same frontend: two waits one key."""
    cfg, head = site.cfg, site.head
    site.call(disk, tc + 3, rng.randint(2, 8), "POST", "dome_dochksum", 202, head, user)
    done = tc + 3 + int(put.size / 300e6 * 1000) + rng.randint(500, 20_000)
    failed = rng.random() < cfg.chksum_fail_rate
    handler = []
    if failed:
        handler.append((2, 1, "dome_chksumstatus",
                        f"Checksum calculation failed. LFN: {put.lfn}PFN: {put.pfn}. Reason: read error",
                        "chksum_failed", {"lfn": put.lfn, "pfn": put.pfn, "reason": "read error"}))
    site.call(head, done, rng.randint(3, 10), "POST", "dome_chksumstatus", 200, disk, user, handler)
    # The frontends' and clients' choices draw from their own generator: the puts' stays as it was.
    choices = site.checksum_rng
    limit = min(tc + CHKSUM_MAX_S * 1000, site.t_end)
    if choices.random() < cfg.chksum_give_up_rate:
        limit = min(limit, tc + choices.randint(1, 4) * CHKSUM_POLL_S * 1000)
    if not paired and choices.random() < cfg.chksum_pair_rate:
        earlier = [p for p in site.puts[-50:] if p.size is not None and p is not put]
        if earlier:
            other = choices.choice(earlier)
            other_disk = next(d for d in site.disks if d.fqdn == other.server)
            _checksum(site, choices, other, other_disk, tc + choices.randint(200, 4800), frontend, user,
                      paired=True)
    wait = ChecksumWait(frontend, user, tc)
    site.checksums.append(wait)
    poll = tc
    while poll < limit:
        finished = poll > done + 20
        call = site.call(head, poll, rng.randint(2, 6), "GET", "dome_chksum",
                         (500 if failed else 200) if finished else 202, frontend, user)
        if call is not None:
            wait.polls.append(call)
        if finished:
            return
        poll += CHKSUM_POLL_S * 1000


def _cut_by_death(site: Site) -> None:
    """A slow call in flight when each process dies (the head's restart, a disk node going
    down), so that the log certainly holds calls cut without their `Exiting` line."""
    rng = random.Random(f"{site.cfg.seed}/cut")
    for node in [site.head, *site.disks]:
        for life in node.lives:
            if life.end is not None:
                caller = site.disks[0] if node is site.head else site.head
                command = "dome_getdirspaces" if node is site.head else "dome_statpfn"
                site.call(node, life.end - rng.randint(500, 1500), 5000, "GET", command, 200,
                          caller, rng.choice(site.users))


def _line_of(call: Call | None, role: str) -> Line | None:
    if call is None:
        return None
    return next((ln for ln in call.lines if ln.role == role), None)


def _capacity(site: Site) -> None:
    """Every 60 s on each disk node: per filesystem `fs: FS phys: N free: N`, then the
    count; free space shrinks by the size of each putdone written there."""
    cfg = site.cfg
    rng = random.Random(f"{cfg.seed}/capacity")
    for disk in site.disks:
        used = {fs: rng.randrange(5 * TB, 30 * TB) for fs in disk.filesystems}
        written = sorted((p.putdone_disk.t, p.fs, p.size) for p in site.puts
                         if p.putdone_disk is not None and p.server == disk.fqdn)
        w = 0
        t = site.t0 + rng.randrange(0, CAPACITY_INTERVAL_S * 1000)
        while t < site.t_end:
            while w < len(written) and written[w][0] <= t:
                used[written[w][1]] += written[w][2]
                w += 1
            life = disk.life_at(t)
            if life is not None:
                for i, fs in enumerate(disk.filesystems):
                    free = PHYS_BYTES - used[fs]
                    site.line(t + i, disk, life, life.checker_tid, 1, "dome", "checkDiskSpaces",
                              f"fs: {fs} phys: {PHYS_BYTES} free: {free}", "capacity",
                              {"fs": fs, "phys": PHYS_BYTES, "free": free})
                site.line(t + len(disk.filesystems), disk, life, life.checker_tid, 1, "dome",
                          "checkDiskSpaces", f"Number of local filesystems: {len(disk.filesystems)}",
                          "fs_count", {"count": len(disk.filesystems)})
            t += CAPACITY_INTERVAL_S * 1000


def _assign_threads(site: Site) -> None:
    """One call at a time per worker thread: each call takes a free thread of its process."""
    rng = random.Random(f"{site.cfg.seed}/threads")
    pools: dict[int, list[tuple[int, int]]] = {}   # id(life) -> [(busy until, tid)]
    for call in sorted(site.calls, key=lambda c: (c.start, c.end)):
        pool = pools.get(id(call.life))
        if pool is None:   # drawn once per process (a default drawn per call cost 64 draws a call)
            pool = pools[id(call.life)] = [(0, site._tid()) for _ in range(site.cfg.threads)]
        free = [i for i, (until, _) in enumerate(pool) if until < call.start]
        if not free:
            raise ValueError(f"more than --threads {site.cfg.threads} concurrent calls on "
                             f"{call.node.host}: raise --threads or lower --rate")
        i = rng.choice(free)
        call.tid = pool[i][1]
        pool[i] = (call.end, call.tid)
        for ln in call.lines:
            ln.tid = call.tid


def _losses(site: Site) -> None:
    """Lines a real log would not hold: after their process died, after the end of the
    run, or in a journald gap on the head."""
    cfg = site.cfg
    gap = None
    if cfg.gap_at is not None:
        a = site.t0 + int(cfg.gap_at * 1000)
        gap = (a, a + int(cfg.gap_s * 1000))
    for ln in site.lines:
        if not ln.life.alive(ln.t):
            ln.lost = "killed"
        elif ln.t >= site.t_end:
            ln.lost = "end"
        elif gap is not None and ln.node is site.head and gap[0] <= ln.t < gap[1]:
            ln.lost = "gap"
    site.gap = gap
