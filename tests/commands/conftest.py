"""Fixtures shared by the command tests."""

from __future__ import annotations

import os

import pytest

from tests.helpers import dpmstream_in_process

# A DOME site at a site's size (`dpmstream simulate --dome`): a head and three disk nodes,
# ten minutes, a disk node down and back, the head restarting, a journald gap.
DOME_SITE = ("--duration", "600", "--rate", "4", "--disks", "3", "--disk-down-at", "150",
             "--restart-at", "400", "--gap-at", "250", "--seed", "7")


@pytest.fixture(scope="session")
def dome_site(tmp_path_factory):
    """dome_site(*options) -> (prefix, the nodes' logs): DOME_SITE simulated with these
    options on top, once per session for every test that only reads its files."""
    made: dict[tuple, tuple[str, list[str]]] = {}

    def get(*options: str) -> tuple[str, list[str]]:
        if options not in made:
            folder = tmp_path_factory.mktemp("dome-site")
            prefix = str(folder / "site")
            done = dpmstream_in_process("simulate", "--dome", "--out", prefix, *DOME_SITE, *options)
            assert done.returncode == 0, done.stderr.decode()
            logs = sorted(str(folder / name) for name in os.listdir(folder)
                          if name.startswith("site.") and name.endswith(".log"))
            assert len(logs) == 4   # the head and three disk nodes
            made[options] = prefix, logs
        return made[options]
    return get
