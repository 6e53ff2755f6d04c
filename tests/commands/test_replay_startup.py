"""What `dpmstream replay` loads before its first line: only what replaying needs.

Start-up is paid by every replay (a third of a 100 k-line one; issue 30), so the modules
and work that only some paths use stay out of it: the Kafka clients and the other commands'
machinery, socket (the host name comes from uname), the decompressors (imported for a .gz
or .bz2 input only), the DOME engine's modules and the DOME profiles' regexes (compiled
only when no DPM profile reads a file's head), and the rsyslog forms of the DPM profiles
that a native log's lines never reach. Each run is a fresh interpreter, as a user's is."""

import json
import subprocess
import sys

from tests.dpmlog import T1, closing, proc, put, status

# Run in a fresh interpreter: replay as the command line runs it, then report the modules
# loaded and how many DOME profiles were read (a counting wrapper around the real loader).
PROBE = """
import json, sys
from dpmstream.parsers import dome_profiles
read = []
real = dome_profiles.dome_profile_from_dict
def counted(*args, **kwargs):
    read.append(1)
    return real(*args, **kwargs)
dome_profiles.dome_profile_from_dict = counted
from dpmstream.cli import main
rc = main(["replay", "--quiet", *sys.argv[1:]])
from dpmstream.parsers.profiles import bundled_profiles
rsyslog = sorted(p.name for p in bundled_profiles() if "rsyslog" in vars(p))  # compiled
print(json.dumps({"rc": rc, "modules": sorted(sys.modules), "dome_profiles_read": len(read),
                  "rsyslog_forms_compiled": rsyslog}))
"""

# Modules of other paths: none is imported by a replay of archives.
NOT_FOR_REPLAY = (
    "socket", "selectors", "ssl", "asyncio", "http", "email", "tempfile", "subprocess",
    "gzip", "aiokafka", "confluent_kafka", "faust", "prometheus_client",
    "dpmstream.streams.live", "dpmstream.streams.metrics", "dpmstream.simulator",
    "dpmstream.report", "dpmstream.probes",
    # The DOME engine's modules (either engine): imported at the first DOME log.
    "dpmstream.parsers.dome_reassembly", "dpmstream.parsers.dome_checksums",
    "dpmstream.parsers.dome_state", "dpmstream.parsers.compiled_dome",
    # The bundled profiles' TOML is kept parsed (regex_profiles/parsed.json); tomllib reads
    # only a file given by path or edited since. The inputs' fingerprint is BLAKE2b, which
    # needs no OpenSSL: hashlib loads libcrypto (~11 M instructions).
    "tomllib", "hashlib", "_hashlib",
    # Messages go through parsers/lazylog: logging is imported for one written (-v, a warning).
    "logging",
    # typing: TYPE_CHECKING is a constant False, NamedTuples are collections.namedtuple.
    "typing",
    # Replay's value classes are parsers/plain.py's: dataclasses (with inspect, ast, dis)
    # and the methods each compiled at import were ~57 M of a two-line replay's ~286 M.
    "dataclasses", "inspect", "ast", "dis",
    # argparse's help width is read without shutil (with bz2, lzma: ~6 M); --tz UTC is
    # datetime's UTC, without zoneinfo (its path search reads sysconfig: ~12 M).
    "shutil", "zoneinfo", "sysconfig",
)


def replay_probe(*files, options=("--tz", "UTC", "--year", "2011")) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *options, *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules
            if any(m == name or m.startswith(name + ".") for name in NOT_FOR_REPLAY)]


def a_dpm_log(tmp_path):
    log = tmp_path / "log"
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
             + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
             + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
    log.write_text("\n".join(lines) + "\n")
    return log


def test_replaying_a_dpm_log_loads_no_module_of_another_path_nor_any_dome_profile(tmp_path):
    got = replay_probe(a_dpm_log(tmp_path))
    assert got["rc"] == 0
    assert heavy(got["modules"]) == []
    assert got["dome_profiles_read"] == 0
    # The profile reading the log parses its rsyslog-wrapped lines too; the others were
    # only tried on native lines, which their native form reads.
    assert got["rsyslog_forms_compiled"] == ["lcgdm-dpm"]


def test_an_empty_log_compiles_no_profile_of_dome_either(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    got = replay_probe(empty)
    assert got["rc"] == 1  # nothing parsed: said so, as before
    assert heavy(got["modules"]) == []
    assert got["dome_profiles_read"] == 0
    assert got["rsyslog_forms_compiled"] == []
    # No line to date and no --tz to check: no time zone is loaded.
    assert "zoneinfo" not in replay_probe(empty, options=())["modules"]


def test_a_gzip_input_brings_its_decompressor_and_a_dome_log_its_profiles(tmp_path):
    import gzip
    packed = tmp_path / "log.gz"
    packed.write_bytes(gzip.compress(a_dpm_log(tmp_path).read_bytes()))
    assert "gzip" in replay_probe(packed)["modules"]
    dome = tmp_path / "dome.log"
    dome.write_text("Nov 26 10:00:00 disk01 dmlite[123]: a line no DPM profile reads\n")
    got = replay_probe(dome)
    assert got["rc"] == 1 and got["dome_profiles_read"] > 0  # tried as a DOME log


def test_a_dome_log_brings_the_dome_engine_it_needs(tmp_path):
    from dpmstream.parsers import engines
    dome = tmp_path / "dome.log"
    dome.write_text("May 30 08:44:00 dpmhead01 dome[2345]: {139914452218445}[1] dmlite dome "
                    "workerFunc : Accepted connection, ipcfd: 10, keepConnection: 1\n")
    got = replay_probe(dome)
    assert got["rc"] == 0
    modules = got["modules"]
    # a DOME source started: its reassembler (the compiled one where built) came with it
    compiled = "dpmstream.parsers.compiled_dome" in modules
    assert compiled == engines.compiled_dome_available()
    assert "dpmstream.parsers.dome_checksums" in modules
    # its counters and profiles are plain values too (parsers/plain.py)
    assert not {"dataclasses", "inspect", "ast", "dis"} & set(modules)


def replay_stderr(*args) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "dpmstream", "replay", "--quiet", "--tz", "UTC",
                           "--year", "2011", *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_without_logging_imported_replay_still_writes_its_messages_as_configured(tmp_path):
    log = a_dpm_log(tmp_path)
    copy = tmp_path / "copy"
    copy.write_bytes(log.read_bytes())
    # a warning (the same archive twice), formatted by the deferred configuration
    lines = len(log.read_text().splitlines())
    assert replay_stderr(log, copy) == [
        f"dpmstream: WARNING: {copy}: its first {lines} lines repeat {log}: counted once"]
    # -v: the INFO messages too, the profile each file is read with among them
    info = replay_stderr("-v", log)
    assert info and all(line.startswith("dpmstream: INFO: ") for line in info)
    assert any("profile lcgdm-dpm" in line for line in info)
    assert replay_stderr(log) == []
