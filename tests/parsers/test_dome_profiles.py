"""parsers/dome_profiles.py and dome_lines.py: the DOME profiles (regex_profiles/dmlite-dome*.toml)
read every dmlite line shape of /work/shared/dome-log-format.md, in both syslog stamps, in
both logger generations, and every line the DOME simulator writes, in every envelope, into
the role and fields it stands for; other programs' lines are foreign, not errors.
(The Python line path: the compiled parser reads DPM profiles only, docs/dome.md.)"""

import pytest

from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.dome_profiles import (
    SUPPRESSED, bundled_dome_profiles, dome_profile_from_dict, resolve_dome_profile,
)
from dpmstream.parsers.lines import FOREIGN, MALFORMED, PARSED, UNMATCHED_RESULT
from dpmstream.parsers.profiles import ProfileError, bundled_profiles, load_profile, resolve_profile
from dpmstream.simulator.dome_config import ENVELOPES, DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.kafka.envelope import decode

from tests.helpers import sampled

TID = "140685573784640"
TRADITIONAL = "May 30 08:44:05 dpmhead01 dome[2345]: "
RFC3339 = "2017-05-30T08:44:05.118402+02:00 dpmhead01 dome[2345]: "
JOURNAL = "2017-05-30T08:44:05.118402+0200 dpmhead01 dome[2345]: "
DN = "/DC=ch/DC=cern/OU=computers/CN=dpmdisk01.cern.ch"
USER = "/DC=ch/DC=cern/OU=Users/CN=Jane O'Doe (jdoe)"
PFN = "/srv/dpm/01/atlas/2017-05-30/f.root.12.1496126645"

# (what follows `dmlite ` in a Log line, role, fields), from the format reference.
LOG_LINES = [
    ("dome workerFunc : Accepted connection, ipcfd: 12, keepConnection: 1", "accept", {}),
    (f"dome workerFunc : clientdn: '{DN}' clienthost: 'dpmdisk01.cern.ch' remoteclient: '{USER}' "
     "remoteclienthost: '192.0.2.5'", "call",
     {"client_dn": DN, "client_host": "dpmdisk01.cern.ch", "remote_dn": USER, "remote_host": "192.0.2.5"}),
    ("dome workerFunc : req:POST cmd:dome_put query:/domehead/command/dome_put bodyitems: 1", "command",
     {"method": "POST", "op": "dome_put", "query": "/domehead/command/dome_put"}),
    ("dome SendSimpleResp : Exiting: code: 202", "returns", {"code": 202}),
    ("dome_put SendSimpleResp : Exiting: code: 507", "returns", {"code": 507}),
    ("dome dome_put : Entering. lfn: '/dpm/cern.ch/home/atlas/f.root' addreplica: 0 pool: '' host: '' fs: ''",
     "put", {"lfn": "/dpm/cern.ch/home/atlas/f.root"}),
    ("dome dome_put : Selected fs: 'dpmdisk01.cern.ch:/srv/dpm/01 from 4 matchings for lfn: "
     "'/dpm/cern.ch/home/atlas/f.root'", "put_selected",
     {"server": "dpmdisk01.cern.ch", "fs": "/srv/dpm/01", "matchings": 4, "lfn": "/dpm/cern.ch/home/atlas/f.root"}),
    (f"dome dome_putdone_disk :  server: 'dpmdisk01.cern.ch' pfn: '{PFN}'  size: 1048576 cksumt: 'adler32' "
     "cksumv: '0a1b2c3d'", "putdone_disk", {"server": "dpmdisk01.cern.ch", "pfn": PFN, "size": 1048576}),
    (f"dome dome_putdone_disk :  Forwarding to headnode. server: 'dpmdisk01.cern.ch' pfn: '{PFN}'  size: 7 "
     "cksumt: '' cksumv: ''", "putdone_forward", {"server": "dpmdisk01.cern.ch", "pfn": PFN, "size": 7}),
    (f"dome dome_putdone_head :  server: 'dpmdisk01.cern.ch' pfn: '{PFN}'  size: 7 cksumt: '' cksumv: ''",
     "putdone_head", {"server": "dpmdisk01.cern.ch", "pfn": PFN, "size": 7}),
    ("dome dome_putdone_head :  Final size:   1048576", "putdone_size", {"size": 1048576}),
    (f"dome dome_chksumstatus : Checksum calculation failed. LFN: /dpm/cern.ch/home/atlas/f.rootPFN: {PFN}. "
     "Reason: read error", "chksum_failed",
     {"lfn": "/dpm/cern.ch/home/atlas/f.root", "pfn": PFN, "reason": "read error"}),
    ("dome tick :  Queue item with key '/dpm/x[#]dpmdisk01:/srv/x[#]adler32' timed out after 1800 seconds.",
     "queue_timeout", {"key": "/dpm/x[#]dpmdisk01:/srv/x[#]adler32", "timeout": 1800}),
    ("dome checkDiskSpaces : fs: /srv/dpm/01 phys: 39999997952 free: 1234567", "capacity",
     {"fs": "/srv/dpm/01", "phys": 39999997952, "free": 1234567}),
    ("dome checkDiskSpaces : Number of local filesystems: 2", "fs_count", {"count": 2}),
    ("dome checkDiskSpaces : Enabling filesystem: dpmdisk01.cern.ch /srv/dpm/01", "fs_enabled",
     {"server": "dpmdisk01.cern.ch", "fs": "/srv/dpm/01"}),
    ("dome DomeStatus : My automatically detected hostname is: dpmhead01.cern.ch", "startup",
     {"server": "dpmhead01.cern.ch"}),
    ("dome dome_getdirspaces : Lfn not found: '/dpm/x'", "other", {}),
]
# (Err form: WHERE, FUNC, TEXT, role, fields)
ERR_LINES = [
    ("dome", "checkDiskSpaces", "Server down or other trouble. Disabling filesystem: 'dpmdisk01.cern.ch /srv/dpm/01'",
     "fs_disabled", {"server": "dpmdisk01.cern.ch", "fs": "/srv/dpm/01"}),
    ("dome", "dome_putdone_head", f"Replica not found 'dpmdisk01.cern.ch:{PFN}'", "putdone_error",
     {"reason": "Replica not found", "server": "dpmdisk01.cern.ch", "pfn": PFN}),
    ("checkDiskSpaces", "checkDiskSpaces", "Error when issuing dome_getspaceinfo: timeout", "other", {}),
]


def parser(name="dmlite-dome", tz="Europe/Zurich", year=2017):
    return DomeLineParser(resolve_dome_profile(name), EventClock(tz, year=year))


@pytest.mark.parametrize("prefix", [TRADITIONAL, RFC3339, JOURNAL], ids=["traditional", "rfc3339", "journal"])
@pytest.mark.parametrize("text, role, fields", LOG_LINES, ids=[r for _, r, _ in LOG_LINES])
def test_every_level_1_message_of_the_reference_reads_as_its_role_in_both_stamps(prefix, text, role, fields):
    p = parser()
    ev = p.parse(f"{prefix}{{{TID}}}[1] dmlite {text}")
    assert p.result == PARSED, p.reason
    assert (ev.role, ev.fields) == (role, fields)
    assert (ev.host, ev.program, ev.pid, ev.tid, ev.level, ev.error) == ("dpmhead01", "dome", 2345, int(TID), 1, False)


@pytest.mark.parametrize("where, func, text, role, fields", ERR_LINES, ids=[e[3] for e in ERR_LINES])
def test_an_err_line_has_where_and_func_glued_and_reads_as_an_error(where, func, text, role, fields):
    p = parser()
    ev = p.parse(f"{RFC3339}{{{TID}}}!!! dmlite {where}{func} : {text}")
    assert (ev.role, ev.fields, ev.error, ev.level, ev.tid) == (role, fields, True, -1, int(TID))


@pytest.mark.parametrize("text, role, fields", [l for l in LOG_LINES if l[1] != "accept"],
                         ids=[r for _, r, _ in LOG_LINES if r != "accept"])
def test_the_generation_without_a_thread_id_reads_the_same_roles(text, role, fields):
    p = parser("dmlite-dome-notid")
    ev = p.parse(f"{TRADITIONAL}[1] dmlite {text}")
    assert (ev.role, ev.fields, ev.tid, ev.level, ev.error) == (role, fields, -1, 1, False)


@pytest.mark.parametrize("where, func, text, role, fields", ERR_LINES, ids=[e[3] for e in ERR_LINES])
def test_the_older_err_shape_reads_as_an_error(where, func, text, role, fields):
    p = parser("dmlite-dome-notid")
    ev = p.parse(f"{TRADITIONAL}dmlite {where} !! {func} : {text}")
    assert (ev.role, ev.fields, ev.error, ev.level) == (role, fields, True, -1)


def test_a_traditional_stamp_is_local_time_in_the_profiles_zone_with_the_clocks_year_and_whole_seconds():
    p = parser(tz="Europe/Zurich", year=2017)
    ev = p.parse(f"May  3 08:44:05 dpmhead01 dome[2345]: {{{TID}}}[1] dmlite {LOG_LINES[3][0]}")
    assert ev.ts == 1493793845000 and ev.whole_seconds  # 2017-05-03T06:44:05Z
    rfc = p.parse(f"{RFC3339}{{{TID}}}[1] dmlite {LOG_LINES[3][0]}")
    assert rfc.ts == 1496126645118 and not rfc.whole_seconds


def test_a_traditional_stamp_rolls_into_the_new_year():
    p = parser(tz="UTC", year=2017)
    a = p.parse(f"Dec 31 23:59:59 h dome[1]: {{1}}[1] dmlite {LOG_LINES[3][0]}")
    b = p.parse(f"Jan  1 00:00:00 h dome[1]: {{1}}[1] dmlite {LOG_LINES[3][0]}")
    assert b.ts - a.ts == 1000


@pytest.mark.parametrize("line, result", [
    ("May 30 08:44:05 dpmhead01 sshd[2211]: Accepted publickey for root from 192.0.2.1 port 22 ssh2", FOREIGN),
    ("May 30 08:44:05 dpmhead01 kernel: nfs: server nfs01 OK", FOREIGN),
    # journald's notice for another unit (its notice for DOME's: tests/parsers/test_dome_journald.py)
    (f"{RFC3339[:33]}dpmhead01 systemd-journald[412]: Suppressed 57 messages from /system.slice/named.service", FOREIGN),
    ("May 30 08:44:05 dpmhead01 dome[2345]: FastCGI: starting", FOREIGN),          # ours, not a dmlite message
    (f"May 30 08:44:05 dpmhead01 httpd[77]: {{{TID}}}[1] dmlite dome weird", UNMATCHED_RESULT),
    (f"May 30 08:44:05 dpmhead01 dome: {{{TID}}}[1] dmlite {LOG_LINES[3][0]}", MALFORMED),  # no pid
    ("garbage \x00 binary", MALFORMED),
    ("30/05 08:44:05 not syslog", MALFORMED),
    (f"Feb 30 08:44:05 dpmhead01 dome[1]: {{1}}[1] dmlite {LOG_LINES[3][0]}", MALFORMED),  # no such date
])
def test_other_programs_are_foreign_and_broken_lines_malformed(line, result):
    p = parser()
    assert p.parse(line) is None
    assert p.result == result and p.reason


def test_the_dpm_loader_refuses_a_dome_profile_by_file_or_name_and_the_bundled_sets_do_not_mix():
    assert {p.name for p in bundled_dome_profiles()} == {"dmlite-dome", "dmlite-dome-notid"}
    assert "dmlite-dome" not in {p.name for p in bundled_profiles()}
    with pytest.raises(ProfileError, match="'dome' profile, not a DPM daemon's"):
        load_profile(resolve_dome_profile("dmlite-dome").source)
    with pytest.raises(ProfileError, match="^dmlite-dome-notid: a 'dome' profile, not a DPM daemon's"):
        resolve_profile("dmlite-dome-notid")


@pytest.mark.parametrize("key, change, message", [
    ("roles", {"bogus": "x"}, "unknown role"),
    ("roles", {"put": "(?P<token>x)"}, "unknown group"),
    ("roles", {"put": "(unclosed"}, "bad pattern"),
    ("envelope", {"rfc3339": "(?P<host>\\S+) "}, "lacks group"),
    ("journald", {"suppressed": "Suppressed (?P<lines>\\d+) messages"}, r"\[journald\] suppressed lacks group\(s\) \['program'\]"),
    ("journald", {"suppressed": "Suppressed (?P<lines>"}, "bad pattern"),
    (None, {"family": "dpm"}, "not a DOME profile"),
    (None, {"required_roles": ["queue_timeout"]}, None),
])
def test_a_broken_dome_profile_is_refused_with_the_reason(key, change, message):
    import tomllib
    data = tomllib.loads(open(resolve_dome_profile("dmlite-dome").source).read())
    (data[key] if key else data).update(change)
    if message is None:  # the control: the change alone is fine
        assert dome_profile_from_dict(data).required_roles == ("queue_timeout",)
        return
    with pytest.raises(ProfileError, match=message):
        dome_profile_from_dict(data)


# -- every line the simulator writes ----------------------------------------------------
SHORT = dict(duration=200.0, rate=1.0, disk_down_at=40.0, disk_down_s=70.0, restart_at=150.0,
             gap_at=100.0, gap_s=3.0, timeout=60.0)
CASES = [(env, gen, stamp) for env in ENVELOPES for gen in ("tid", "notid")
         for stamp in (("traditional",) if env == "journal" else ("traditional", "rfc3339"))]


# `make check` reads each envelope once, both generations and both stamp styles among them.
CHECKED_CASES = [("dmlite-log", "tid", "rfc3339"), ("messages", "notid", "traditional"),
                 ("journal", "tid", "traditional"), ("kafka", "notid", "rfc3339")]


@pytest.mark.parametrize("envelope, generation, stamp",
                         sampled(CASES, keep=CHECKED_CASES, ids="-".join))
def test_every_simulated_line_reads_as_the_role_and_fields_it_was_written_for(tmp_path, envelope, generation, stamp):
    cfg = DomeConfig(envelope=envelope, generation=generation, stamp=stamp,
                     accept_lines=stamp == "traditional", **SHORT)
    result = simulate_dome(cfg, tmp_path / "site")
    profile = resolve_dome_profile("dmlite-dome" if generation == "tid" else "dmlite-dome-notid")
    roles, foreign, notices = set(), 0, 0
    for host, path in result.logs.items():
        p = DomeLineParser(profile, EventClock(cfg.tz, year=2017))
        texts = path.read_text(encoding="utf-8").splitlines()
        assert len(texts) == len(result.written[host])
        for text, line in zip(texts, result.written[host]):
            if envelope == "kafka":
                text = decode(text.encode()).line
            ev = p.parse(text)
            if line is None and ev is not None:   # journald's notice of the gap: its true count
                assert (ev.role, ev.host, ev.program) == (SUPPRESSED, host, cfg.program), text
                assert ev.fields == {"count": result.summary["journald_dropped_lines"][host]}
                assert ev.ts == result.truth.shows(result.site.gap[1])
                notices += 1
                continue
            if line is None:
                assert p.result == FOREIGN, text
                foreign += 1
                continue
            assert p.result == PARSED, (p.reason, text)
            assert (ev.role, ev.fields) == (line.role, line.fields), text
            assert (ev.host, ev.pid, ev.tid) == (host, line.life.pid, line.tid if generation == "tid" else -1)
            assert (ev.ts, ev.whole_seconds) == (result.truth.shows(line.t), cfg.whole_seconds)
            assert ev.error == (line.level < 0)
            roles.add(ev.role)
    assert foreign + notices == sum(result.summary["foreign_lines"].values())
    assert (foreign > 0) == (envelope in ("messages", "journal"))
    assert notices == (1 if envelope in ("messages", "journal") else 0)   # the head's one gap
    expected = {"call", "command", "returns", "put", "put_selected", "putdone_disk", "putdone_forward",
                "putdone_head", "putdone_size", "capacity", "fs_count", "fs_enabled", "fs_disabled", "startup"}
    assert expected <= roles
    assert ("accept" in roles) == (generation == "tid" and stamp == "traditional")


def test_dome_inside_xrootd_logs_under_the_xrootd_program_name(tmp_path):
    result = simulate_dome(DomeConfig(program="xrootd", duration=60.0, disk_down_at=None, restart_at=None,
                                      gap_at=None), tmp_path / "x")
    p = parser()
    events = [p.parse(text) for text in result.logs["dpmhead01"].read_text().splitlines()]
    assert events and all(ev is not None and ev.program == "xrootd" for ev in events)


# -- a form's pieces read as its one regex ----------------------------------------------
def _lines_of_every_shape(tmp_path) -> list[str]:
    """The reference's lines in every prefix and generation, their err shapes, lines of no
    role, of other programs, broken ones, and what the simulator writes in two envelopes."""
    lines = [f"{prefix}{tid}[1] dmlite {text}{tail}"
             for prefix in (TRADITIONAL, RFC3339, JOURNAL) for tid in (f"{{{TID}}}", "")
             for text, _, _ in LOG_LINES for tail in ("", "  ", " trailing words")]
    lines += [f"{RFC3339}{{{TID}}}!!! dmlite {where}{func} : {text}" for where, func, text, _, _ in ERR_LINES]
    lines += [f"{TRADITIONAL}dmlite {where} !! {func} : {text}" for where, func, text, _, _ in ERR_LINES]
    lines += ["May 30 08:44:05 dpmhead01 sshd[2211]: Accepted publickey for root",
              f"May 30 08:44:05 dpmhead01 httpd[77]: {{{TID}}}[1] dmlite dome weird",
              f"May 30 08:44:05 dpmhead01 dome: {{{TID}}}[1] dmlite {LOG_LINES[3][0]}",
              "30/05 08:44:05 not syslog", ""]
    for envelope, generation, stamp in (("messages", "notid", "traditional"), ("dmlite-log", "tid", "rfc3339")):
        cfg = DomeConfig(envelope=envelope, generation=generation, stamp=stamp, accept_lines=True, **SHORT)
        for path in simulate_dome(cfg, tmp_path / envelope).logs.values():
            lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def test_a_form_read_piece_by_piece_gives_its_regex_s_envelope_and_role_on_every_line(tmp_path):
    lines = _lines_of_every_shape(tmp_path)
    roles = set()
    for profile in bundled_dome_profiles():
        for form in profile.forms.values():
            assert form.alone   # the bundled patterns refer to no group: read piece by piece
            index = form.regex.groupindex
            assert form.groups == {n: g for n, g in index.items() if g < index["a0"]}
            # the groups numbered without compiling the regex are the regex's
            assert form.roles == {index[f"a{i}"]: (role, {n.split("_", 1)[1]: g for n, g in index.items()
                                                          if n.startswith(f"a{i}_")})
                                  for i, (role, _) in enumerate(form.parts)} | {index["unmatched"]: ("unmatched", {})}
            for line in lines:
                m, read = form.regex.match(line), form.read(line)
                if m is None:
                    assert read is None, line
                    continue
                head, role = read
                assert role == form.roles[m.lastindex][0], line
                assert head.groups() == m.groups()[:len(form.groups)], line
                roles.add(role)
    assert {"accept", "putdone_error", "unmatched", "other"} <= roles


def test_a_role_pattern_referring_to_a_group_is_read_by_the_one_regex():
    import tomllib
    data = tomllib.loads(open(resolve_dome_profile("dmlite-dome").source).read())
    data["roles"]["startup"] = r"dome DomeStatus : My hostname is: (?P=host)"
    form = dome_profile_from_dict(data).forms["traditional"]
    assert not form.alone
    line = f"{TRADITIONAL}{{{TID}}}[1] dmlite dome DomeStatus : My hostname is: dpmhead01"
    assert form.read(line)[1] == "startup"
    assert form.read(line.replace("is: dpmhead01", "is: other"))[1] == "other"   # the catch-all role
