"""commands/stack/process.py: the local services' processes, known by their pid files."""

from __future__ import annotations

import signal
import subprocess
import sys

from dpmstream.commands.stack.process import ManagedProcess


def test_stop_ignores_a_pid_file_naming_a_process_that_is_not_ours(tmp_path):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid_file = tmp_path / "kafka.pid"
        pid_file.write_text(f"{stranger.pid}\n")
        proc = ManagedProcess("kafka", pid_file, tmp_path / "log", marker=str(tmp_path / "server.properties"))

        assert proc.pid() is None
        assert proc.stop() is False
        assert stranger.poll() is None
    finally:
        stranger.send_signal(signal.SIGKILL)
        stranger.wait()
