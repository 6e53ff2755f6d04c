"""`profile check` with its per-line work in the extension (native/src/profile_tally.rs,
add_block) says exactly what the Python reference (ProfileTally.add, line by
line; DPMSTREAM_PURE_PYTHON=1) says: on the real lines, and on simulated logs with odd
lines planted (unknown wordings, another daemon's lines, no envelope, bytes not UTF-8,
CRLF, rsyslog-wrapped, a catch-all line, an overlong line)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tomllib

import pytest

from dpmstream.commands.profile_check import ProfileTally, add_block
from dpmstream.parsers import extension, fastpath
from dpmstream.parsers.profiles import ROLES, bundled_profiles, profile_from_dict
from dpmstream.parsers.shapes import shape
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.inputs import describe, iter_chunks, open_binary

from tests.commands.test_profile_check import real_files, rewritten
from tests.commands.test_profile_check_dome import check as check_on_the_node
from tests.helpers import dpmstream_in_process, sampled

pytestmark = pytest.mark.skipif(extension.compiled("ProfileLines") is None or not fastpath.available(),
                                reason="the extension is not built (no Rust toolchain at install)")


def check(*args, pure: bool):
    """The check in the DOME node's zone (test_profile_check_dome): the compiled one in
    this process (the module runs where the extension is built), the Python reference in
    a process started with DPMSTREAM_PURE_PYTHON=1 (read as the modules load)."""
    if not pure:
        return check_on_the_node(*args, text=False)
    env = {**os.environ, "TZ": DomeConfig().tz, "DPMSTREAM_PURE_PYTHON": "1"}
    return subprocess.run([sys.executable, "-m", "dpmstream", "profile", "check", *map(str, args)],
                          capture_output=True, timeout=300, env=env)


def assert_same_check(*args):
    compiled, pure = check(*args, pure=False), check(*args, pure=True)
    assert compiled.returncode == pure.returncode, compiled.stderr + pure.stderr
    assert compiled.stdout.decode() == pure.stdout.decode()
    return compiled


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("sim") / "head"
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--requests", "200",
                                "--get-fraction", "0.3", "--seed", "7", "--quiet")
    assert done.returncode == 0, done.stderr
    return prefix


def odd_lines(before: bytes, k: int) -> list[bytes]:
    """Lines a site log may hold, dated as the line `before` them."""
    stamp = b" ".join(before.split(b" ")[:2])
    return [
        stamp + b" 4242,7 dpm_srv_put: quota exceeded for /dpm/cern.ch/home/f%d by %d bytes" % (k, k),
        stamp + b" 4242,8 Cns_srv_stat: NS092 - stat request by /DC=ch/CN=Some One (101,102) from lx.cern.ch",
        b"garbage, no envelope \x01 at all",
        stamp + b" 4242,9 dpm_srv_get: DP092 - get request by /DC=ch/CN=M\xfcller (101,102) from h.cern.ch",
        b"2017-08-12T14:31:43.101+02:00 dpmhead01 dpm[4242]: " + stamp + b" 4242,10 dpm_srv_put: returns 0",
        b"",
        stamp + b" 4242,11 dpm_srv_put: DP098 - put weird words %d" % k,
        stamp + b" 4242,12 dpm_srv_put:\tDP092 - tabbed",
        stamp + b" 4242,13 dpm_srv_put: " + b"x" * 70_000,
    ]


def planted(src, dst, every: int = 97) -> int:
    """dst: src's lines with odd lines planted every `every` lines and every 13th line
    ending in CRLF; returns how many were planted."""
    with open(src, "rb") as f:
        lines = f.read().splitlines()
    out, n = [], 0
    for i, line in enumerate(lines):
        out.append(line + (b"\r" if i % 13 == 0 else b""))
        if i % every == every - 1:
            odd = odd_lines(line, i)
            out.append(odd[(i // every) % len(odd)])
            n += 1
    with open(dst, "wb") as f:
        f.write(b"\n".join(out) + b"\n")
    return n


def test_every_bundled_profile_has_its_compiled_role_lines():
    # else the comparisons below would compare the reference with itself
    for profile in bundled_profiles():
        assert ProfileTally(profile, "x").compiled is not None, profile.name


@pytest.mark.parametrize("every", sampled([1, 5], keep=[5]), ids=lambda n: f"every-{n}")
def test_the_compiled_shapes_are_the_python_ones(simulated, every):
    """Every real and odd line, and of the simulated logs' lines `every` n-th: `make test`
    each one (slow: 5,000 lines four ways in Python), `make check` every fifth
    (tests/helpers.sampled)."""
    compiled = fastpath.compiled_shapes()
    texts, sims = [], []
    for path in real_files():
        with open(path, "rb") as f:
            texts += f.read().splitlines()
    for path in (f"{simulated}.log", f"{simulated}.dpns.log"):
        with open(path, "rb") as f:
            sims += f.read().splitlines()
    texts += sims[::every] + odd_lines(sims[-1], 5)
    texts = [t.decode() for t in texts if t.isascii() and all(c >= 32 or c == 9 for c in t)]
    assert len(texts) > 5000 // every
    for text in texts + texts[:100]:  # and again, remembered
        for message in (text, text[19:], text.split(": ", 1)[-1], text * 10):
            assert compiled.of(message) == shape(message), message


def test_the_real_lines_are_checked_the_same_by_both():
    assert_same_check(*real_files())


def test_simulated_logs_with_odd_lines_planted_are_checked_the_same_by_both(simulated, tmp_path):
    dpm, dpns = tmp_path / "odd.log", tmp_path / "odd.dpns.log"
    assert planted(f"{simulated}.log", dpm) > 30
    assert planted(f"{simulated}.dpns.log", dpns, every=23) > 20
    done = assert_same_check(dpm, dpns)
    out = done.stdout.decode()
    assert "dpm_srv_put: quota exceeded for <PATH> by N bytes" in out   # the planted shapes
    assert "matched lines are under functions not of daemon dpm" in out
    # and with a limit of lines that ends mid-block
    assert_same_check("--max-lines", "3001", dpm)


def test_reworded_and_mixed_logs_are_checked_the_same_by_both(simulated, tmp_path):
    reworded = tmp_path / "reworded.log"
    rewritten(f"{simulated}.log", reworded, r"DP092 - put request by", r"DP092 - put req. from DN")
    tokens = tmp_path / "tokens.log"
    rewritten(f"{simulated}.log", tokens, r"DP098 - (put|get) (\d+) ([0-9a-f-]{36})",
              r"DP098 - \1 token \3 files \2")
    lines = []
    for path in (f"{simulated}.log", f"{simulated}.dpns.log"):
        with open(path, encoding="utf-8") as f:
            lines += f.read().splitlines()
    mixed = tmp_path / "mixed.log"
    mixed.write_text("\n".join(sorted(lines, key=lambda text: text[:18])) + "\n")
    with open(f"{simulated}.log", encoding="utf-8") as f:
        lines = f.read().splitlines()
    middle = tmp_path / "slice.log"  # begins and ends mid-request: the cut watch's work
    middle.write_text("\n".join(lines[len(lines) // 3: 2 * len(lines) // 3]) + "\n")
    assert_same_check(reworded, tokens, mixed, middle)


@pytest.mark.parametrize("generation", ["tid", "notid"])
def test_dome_logs_with_odd_lines_planted_are_checked_the_same_by_both(generation, tmp_path):
    cfg = DomeConfig(envelope="messages", generation=generation, duration=120.0, disk_down_at=30.0,
                     disk_down_s=40.0, restart_at=None, gap_at=None)
    site = simulate_dome(cfg, tmp_path / "site")
    head = tmp_path / "head.log"
    assert planted(site.logs["dpmhead01"], head, every=31) > 30
    assert_same_check(head, *site.logs.values())


def tally_state(t: ProfileTally) -> dict:
    return dict(roles=dict(t.roles), own_roles=dict(t.own_roles), malformed=t.malformed,
                foreign=t.foreign, own=t.own, unmatched=list(t.unmatched.items()),
                unmatched_lines=t.unmatched_lines,
                catch_all=list(t.catch_all.items()), dropped=t.catch_all_dropped,
                examples=list(t.examples.items()), cues=list(t.cues.items()),
                reassembled=t.reassembled, findings=t.findings())


def site_profiles() -> list:
    """The bundled DPM profile as sites may word it: a role pattern looking behind into the
    envelope (matched alone from the envelope's end, it still sees it), and one referring
    to a group by number (which ProfileLines matches in the one regex: fastpath.role_plan)."""
    with open(bundled_profiles()[0].source, "rb") as f:
        data = tomllib.load(f)
    behind = copy.deepcopy(data)
    behind["name"] = "looks-behind"
    behind["roles"]["returns"] = r"(?<=: )returns (?P<rc>-?\d+)"
    refers = copy.deepcopy(data)
    refers["name"] = "refers"
    refers["roles"]["other"] = [r"selected (\w)\w* \1.*", *data["roles"]["other"]]
    return [profile_from_dict(d) for d in (behind, refers)]


def test_role_patterns_are_matched_alone_unless_one_refers_to_a_group():
    assert all(fastpath.role_plan(p, {r: i for i, r in enumerate(ROLES)}) is not None
               for p in (*bundled_profiles(), site_profiles()[0]))
    assert fastpath.role_plan(site_profiles()[1], {}) is None


@pytest.mark.parametrize("shaping", [True, False])
def test_the_compiled_tally_equals_the_line_by_line_one_for_each_profile(simulated, tmp_path, shaping):
    """The profiles tallied together (each line's envelope read once for those sharing
    it, and a role pattern alone that several have matched once a line, whatever its
    place in each one's alternation: tally_profiles; the site profiles share the bundled
    dpm one's, `refers` each a place later), each against its reference alone; shaping
    the lines no role matches, or only counting them (ProfileTally.shape_unmatched)."""
    odd = tmp_path / "odd.log"
    planted(f"{simulated}.log", odd, every=29)
    profiles = (*bundled_profiles(), *site_profiles())
    blocks = [ProfileTally(profile, str(odd)) for profile in profiles]
    references = [ProfileTally(profile, str(odd)) for profile in profiles]
    for block, reference in zip(blocks, references):
        assert block.compiled is not None, block.profile.name
        reference.compiled = None
        for tally in (block, reference):
            tally.shape_unmatched(shaping)
    stream, _ = open_binary(describe(str(odd)))
    with stream:
        for lines in iter_chunks(stream, 500):
            add_block(blocks, lines, len(lines))
            for reference in references:
                add_block([reference], lines, len(lines))
    for block, reference in zip(blocks, references):
        block.finish()
        reference.finish()
        assert tally_state(block) == tally_state(reference), block.profile.name
        assert bool(block.unmatched) == (shaping and block.unmatched_lines > 0), block.profile.name
