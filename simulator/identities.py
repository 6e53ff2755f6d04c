"""Who and what the log names: client hosts, certificate DNs, tokens, SURLs, disks.

Deterministic from the run's random generator. DNs carry spaces and slashes, and one
in five carries brackets, as real robot certificates do.
"""

from __future__ import annotations

import random


class Client:
    """One simulated client host: its names and its certificate's DN."""

    # A plain class, not a dataclass: every report's what-if imports it (its model runs
    # name the clients), and a dataclass compiles its generated methods as its module is
    # imported (issue 30). Nothing compares, hashes or changes a Client.
    __slots__ = ("index", "host", "ip", "dn", "ids")

    def __init__(self, index: int, host: str, ip: str, dn: str, ids: str):
        self.index, self.host, self.ip, self.dn = index, host, ip, dn
        self.ids = ids   # "uid,gid[,gid...]" as printed in DP092/NS092

    @property
    def short(self) -> str:
        return self.host.split(".", 1)[0]


def make_clients(count: int) -> list[Client]:
    clients = []
    for i in range(count):
        n = i + 1
        host = f"lxfsra{n:02d}.cern.ch" if n < 100 else f"lxfsra{n}.cern.ch"
        ip = f"137.138.{40 + i // 200}.{11 + i % 200}"
        if i % 5 == 2:
            dn = f"/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=robot/CN=Robot: Grid User {n:03d} (perf tests)"
        else:
            dn = f"/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=dteam{n:03d}/CN={700000 + i}/CN=Grid User {n:03d}"
        uid = 1001 + i
        ids = f"{uid},1001" if i % 3 != 1 else f"{uid},1001,1050"
        clients.append(Client(i, host, ip, dn, ids))
    return clients


BAG_SIZE = 1000     # a bag dealt from shares that are not whole counts holds about this many


def bag_counts(shares) -> list[int]:
    """Files per directory in one bag: whole counts (a log's) as they are, other shares
    scaled to BAG_SIZE; every directory with a share has a file in it."""
    total = sum(shares)
    scale = 1.0 if all(float(w).is_integer() for w in shares) else BAG_SIZE / total
    return [max(1, int(round(w * scale))) if w > 0 else 0 for w in shares]


# The bits uuid.UUID(version=4) sets: variant RFC 4122 (10xx) and version 4 (0100).
_V4_CLEAR = ~((0xc000 << 48) | (0xf000 << 64))
_V4_SET = (0x8000 << 48) | (4 << 76)


def make_uuid(rng: random.Random) -> str:
    """A random (version 4) UUID from the run's generator: 36 characters, the text of
    str(uuid.UUID(int=rng.getrandbits(128), version=4)) without building the object (a
    model run makes two per request)."""
    h = "%032x" % (rng.getrandbits(128) & _V4_CLEAR | _V4_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Namespace:
    """SURLs and DPNS paths of the files written, one directory per client unless
    `same_dir`, or spread in turn over `dirs` directories when given, or each file in
    directory k with probability `shares[k]` (`weighted` names them in that order)."""

    BASE = "/dpm/cern.ch/home/dteam/perf"

    def __init__(self, head_host: str, same_dir: bool, rng: random.Random,
                 dirs: int | None = None, shares: tuple[float, ...] | None = None):
        self.head = head_host
        self.same_dir = same_dir
        self.dirs = dirs
        self._rng = rng
        self._seq = 0
        self.weighted = [self.weighted_dir(k) for k in range(len(shares or ()))]
        # Directories are dealt from a shuffled bag holding each in proportion to its share
        # (a log's counts of creates): a run as long as the log gives each its count, as
        # the log did, instead of drawing the counts at random a second time.
        self._bag_counts = bag_counts(shares) if shares else None
        self._bag: list[int] = []
        self.written: list[str] = []          # paths of files put successfully
        self.disks = [f"disk{k:02d}.cern.ch:/srv/dpm/{m:02d}" for k in range(1, 9) for m in (1, 2)]

    def new_path(self, client: Client) -> str:
        self._seq += 1
        if self._bag_counts is not None:
            if not self._bag:
                self._bag = [k for k, n in enumerate(self._bag_counts) for _ in range(n)]
                self._rng.shuffle(self._bag)
            return f"{self.weighted[self._bag.pop()]}/f{self._seq:07d}"
        if self.dirs is not None:
            directory = f"d{self._seq % self.dirs:05d}"
        else:
            directory = "shared" if self.same_dir else client.short
        return f"{self.BASE}/{directory}/f{self._seq:07d}"

    @classmethod
    def weighted_dir(cls, k: int) -> str:
        """The directory of `shares[k]`."""
        return f"{cls.BASE}/w{k:05d}"

    def existing_path(self) -> str:
        if self.written:
            return self._rng.choice(self.written)
        self._seq += 1
        return f"{self.BASE}/data/g{self._seq:07d}"

    def surl(self, path: str) -> str:
        return f"srm://{self.head}{path}"

    def disk(self) -> str:
        return self._rng.choice(self.disks)

    @staticmethod
    def directory(path: str) -> str:
        return path.rsplit("/", 1)[0]
