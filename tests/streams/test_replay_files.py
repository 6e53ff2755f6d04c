"""streams/replay_files.py as `dpmstream replay` runs it: each input is opened once, its
daemon recognised from the head then read, and that same stream fed on (a .gz is
decompressed once), so an input that can be read only once (a FIFO, stdin) replays whole."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
import threading
import time

from tests.engine_inputs import make_input

OUTPUTS = ("requests.csv", "calls.csv")


class FifoServer(threading.Thread):
    """Writes `data` to the named pipe `path` once for every reader that opens it, and
    counts the opens: how many times the content was read (and, a .gz, decompressed)."""

    def __init__(self, path, data: bytes):
        super().__init__(daemon=True)
        self.path, self.data = path, data
        self.opens = 0
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            with open(self.path, "wb") as pipe:    # returns when a reader opens it
                if self.stopping:
                    return
                self.opens += 1
                try:
                    pipe.write(self.data)
                except BrokenPipeError:            # a reader that stopped reading early
                    pass
            self.until_the_reader_closes()

    def until_the_reader_closes(self) -> None:
        """A writer's open() returns at once while a reader holds the pipe: the next open
        counted must be a new reader's."""
        while not self.stopping:
            try:
                probe = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:       # no reader holds it any more
                    return
                raise
            os.close(probe)
            time.sleep(0.02)

    def stop(self) -> None:
        self.stopping = True
        reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # lets a waiting open return
        try:
            self.join(timeout=60)
        finally:
            os.close(reader)
        assert not self.is_alive()


def replay(inp, out, files, stdin=None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dpmstream", "replay", "--out", str(out), "--host", inp.host,
         "--tz", inp.tz or "UTC", "--year", str(inp.year), *map(str, files)],
        input=stdin, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def same_outputs(a, b) -> int:
    """The records files of two replays are the same bytes; how many rows they hold."""
    rows = 0
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
        rows += (a / name).read_bytes().count(b"\n") - 1
    return rows


def test_a_gzip_through_a_fifo_is_opened_and_decompressed_once_and_replays_whole(tmp_path):
    inp = make_input(tmp_path, "scenario:thesis")
    dpm, dpns = inp.paths
    archive = tmp_path / "dpm.log.gz"
    archive.write_bytes(gzip.compress(dpm.read_bytes()))
    fifo = tmp_path / "dpm.fifo"
    os.mkfifo(fifo)
    server = FifoServer(fifo, archive.read_bytes())
    server.start()
    try:
        replay(inp, tmp_path / "via-fifo", [fifo, dpns])
    finally:
        server.stop()
    replay(inp, tmp_path / "via-file", [archive, dpns])
    assert server.opens == 1
    assert same_outputs(tmp_path / "via-fifo", tmp_path / "via-file") > 0


def test_stdin_is_recognised_from_its_head_and_replays_whole_beside_a_file(tmp_path):
    inp = make_input(tmp_path, "scenario:thesis")
    dpm, dpns = inp.paths
    replay(inp, tmp_path / "via-stdin", ["-", dpns], stdin=dpm.read_bytes())
    replay(inp, tmp_path / "via-file", [dpm, dpns])
    assert same_outputs(tmp_path / "via-stdin", tmp_path / "via-file") > 0


def test_inputs_past_the_held_bound_are_opened_again_at_their_turn_and_replay_whole(
        tmp_path, monkeypatch):
    from dpmstream.parsers import engines
    from dpmstream.streams import replay_files
    from tests.engine_helpers import run_engine

    inp = make_input(tmp_path, "scenario:multi-file")
    held = run_engine(engines.PYTHON, inp).records
    monkeypatch.setattr(replay_files, "HELD_INPUTS", 0)   # every file closed after its head
    reopened = run_engine(engines.PYTHON, inp).records
    assert reopened == held and len(held) > 0
