"""`profile check` shapes the lines a profile leaves unmatched only while they may be
printed (profile_check._Shaping: the best fit's and the present daemons'), and tallies a
profile again over the file's kept blocks when it becomes one of those: what it prints
is what a check shaping every profile throughout prints, whichever profile turns out to
be printed and however late in the file."""

from __future__ import annotations

import pytest

from dpmstream.commands import profile_check

from tests.commands.test_profile_check import PARSERS, check, rewritten
from tests.helpers import dpmstream_in_process

TALLY = profile_check.ProfileTally


@pytest.fixture(scope="module")
def long_head(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("long") / "head"
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--rate", "10", "--duration",
                                "60", "--get-fraction", "0.3", "--seed", "3", "--quiet")
    assert done.returncode == 0, done.stderr
    return prefix


def checked(monkeypatch, *files, keep: int, parser: str):
    """The check's output, exit status and how many profile tallies were made, with
    files of at most `keep` bytes shaped lazily (-1: none)."""
    made = []

    class Counted(TALLY):
        def __init__(self, *args, **kwargs):
            made.append(args[0].name)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(profile_check, "KEEP_BYTES", keep)
    monkeypatch.setattr(profile_check, "ProfileTally", Counted)
    done = check(*files, parser=parser)
    return done.stdout, done.returncode, made


@pytest.mark.parametrize("parser", PARSERS[:1])  # in this process: the patches hold
@pytest.mark.parametrize("dpm_lines", [2000, None])
def test_a_daemon_whose_lines_come_late_prints_what_shaping_throughout_prints(
        long_head, tmp_path, monkeypatch, parser, dpm_lines):
    """DPM lines (past the first look, or more than a block) then the name server's, with
    some of its call lines reworded: lcgdm-ns stops shaping, is tallied again when its
    daemon shows, and its missing role's unmatched look-alikes are printed as before."""
    dpns = tmp_path / "dpns.log"
    assert rewritten(f"{long_head}.dpns.log", dpns, r"NS092 - creat", "NS092 - make") > 100
    both = tmp_path / "both.log"
    dpm = open(f"{long_head}.log", "rb").read().splitlines(keepends=True)
    assert len(dpm) > 8192 > 2000 > profile_check.FIRST_LOOK  # after the first block, or look
    both.write_bytes(b"".join(dpm[:dpm_lines]) + dpns.read_bytes())
    lazy, code, made = checked(monkeypatch, both, keep=1 << 30, parser=parser)
    eager, eager_code, eager_made = checked(monkeypatch, both, keep=-1, parser=parser)
    assert lazy == eager and code == eager_code
    assert made.count("lcgdm-ns") == 2 and eager_made.count("lcgdm-ns") == 1
    assert "fit of profile lcgdm-ns" in lazy
    assert "most common unmatched shapes" in lazy


@pytest.mark.parametrize("parser", PARSERS[:1])
def test_profiles_that_never_print_shapes_are_not_tallied_again(long_head, monkeypatch, parser):
    """The head node's two logs: the other profiles stop shaping and none is redone."""
    files = (f"{long_head}.log", f"{long_head}.dpns.log")
    lazy, code, made = checked(monkeypatch, *files, keep=1 << 30, parser=parser)
    eager, eager_code, eager_made = checked(monkeypatch, *files, keep=-1, parser=parser)
    assert lazy == eager and code == eager_code
    assert sorted(made) == sorted(eager_made)


@pytest.mark.parametrize("parser", PARSERS[:1])
def test_a_file_found_larger_than_kept_is_shaped_by_every_profile_again(long_head, monkeypatch, parser):
    """A file whose size said small but whose lines pass the bound as read (a compressed
    one, say): the profiles that stopped are redone over what was kept, and shape on."""
    monkeypatch.setattr(profile_check._Shaping, "_larger",
                        lambda self: len(self.kept) > 1)
    log = f"{long_head}.log"
    lazy, code, made = checked(monkeypatch, log, keep=1 << 30, parser=parser)
    monkeypatch.undo()
    eager, eager_code, _ = checked(monkeypatch, log, keep=-1, parser=parser)
    assert lazy == eager and code == eager_code
    assert made.count("lcgdm-ns") == 2 and made.count("lcgdm-srm") == 2
