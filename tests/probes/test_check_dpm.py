"""probes/check_dpm.py: the probe's entry point runs on a site install without
dpmstream.streams, from either source."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.probes.test_sources_log import TZ, long_log  # noqa: F401 (a fixture)


_NO_STREAMS = """
import sys

class NoStreams:
    def find_spec(self, name, path=None, target=None):
        if name == "dpmstream.streams" or name.startswith("dpmstream.streams."):
            raise ImportError(f"No module named {name!r} (blocked: a site install of the probe)")
        return None

sys.meta_path.insert(0, NoStreams())
from dpmstream.probes.check_dpm import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("source", ["log", "prometheus"])
def test_the_probe_runs_without_dpmstream_streams(source, long_log, tmp_path):
    args = (["--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m"] if source == "log"
            else ["--prometheus", "http://127.0.0.1:9", "-t", "3"])
    done = subprocess.run([sys.executable, "-c", _NO_STREAMS, *args], capture_output=True,
                          text=True, timeout=60)
    assert "No module named" not in done.stdout + done.stderr
    if source == "log":
        assert done.returncode == 0 and done.stdout.startswith("DPM OK"), done.stdout
    else:  # nothing listens on port 9: the probe itself ran to its answer
        assert done.returncode == 3 and "cannot reach Prometheus" in done.stdout, done.stdout
