"""parsers/profiles.py: regex profiles are data: bundled ones load, name the roles a
fitting profile must produce, and are detected; a site's rewording needs only a new
profile file."""

import re

import pytest

from dpmstream.parsers.profiles import (
    ProfileError, bundled_profiles, detect_profile, load_profile, match_line, profile_from_dict, read_profile_file,
    resolve_profile,
)

from tests.helpers import DATA, reassemble, requests_of
from tests.parsers.test_reassembly import REFERENCE_PUT

REWORDED = f"{DATA}/profiles/site-reworded.toml"


def reword(text: str) -> str:
    text = re.sub(r"\[[\d.]+\] \((\S+)\): request accepted", r"connection from \1 accepted", text)
    text = re.sub(r"request by (.*) \((\d+),\d+\) from (\S+)", r"requested by \1 on behalf of uid \2 from host \3", text)
    text = text.replace("processing put request", "slow thread picked put request")
    text = text.replace("request status DPM_", "answering ")
    return re.sub(r"returns (-?\d+)$", r"exit code \1", text)


def test_the_three_bundled_profiles_load():
    assert {p.name: p.daemon for p in bundled_profiles()} == {
        "lcgdm-dpm": "dpm", "lcgdm-ns": "dpns", "lcgdm-srm": "srmv2.2"}


def test_a_dpm_log_is_detected_as_the_dpm_profile():
    assert detect_profile(REFERENCE_PUT).name == "lcgdm-dpm"


def test_a_reworded_site_log_reassembles_identically_with_its_own_profile_file():
    reworded = [reword(text) for text in REFERENCE_PUT]
    assert reworded != REFERENCE_PUT and "exit code 0" in reworded[-1]
    standard, _ = reassemble(REFERENCE_PUT)
    site_profile = load_profile(REWORDED)
    site, pipeline = reassemble(reworded, profile=site_profile)
    assert requests_of(site) == requests_of(standard)
    assert pipeline.stats.total("unmatched") == 0


def test_the_bundled_profile_does_not_understand_the_reworded_log():
    reworded = [reword(text) for text in REFERENCE_PUT]
    records, pipeline = reassemble(reworded, profile=resolve_profile("lcgdm-dpm"))
    assert pipeline.stats.total("unmatched") > 0
    assert all(r["status"] == "incomplete" for r in requests_of(records))


def test_detection_picks_a_site_profile_among_candidates():
    reworded = [reword(text) for text in REFERENCE_PUT]
    candidates = bundled_profiles() + [load_profile(REWORDED)]
    assert detect_profile(reworded, candidates).name == "site-reworded"


def test_a_profile_with_an_unknown_role_or_group_is_rejected_with_the_reason():
    base = {"name": "x", "daemon": "dpm", "envelope": {"native": "(?P<month>..)", "rsyslog": ""}}
    with pytest.raises(ProfileError, match="unknown role"):
        profile_from_dict({**base, "roles": {"acept": "x"}})
    with pytest.raises(ProfileError, match="unknown group"):
        profile_from_dict({**base, "roles": {"call": "(?P<dn>.*)"}})
    with pytest.raises(ProfileError, match="missing key"):
        profile_from_dict({"name": "x"})


def test_the_bundled_profiles_name_the_roles_a_fitting_profile_must_produce():
    assert {p.name: p.required_roles for p in bundled_profiles()} == {
        "lcgdm-dpm": ("call", "returns", "token", "status", "slow_start"),
        "lcgdm-ns": ("call", "returns"),
        "lcgdm-srm": ("call", "returns"),
    }


def test_a_required_role_without_a_pattern_is_rejected_when_loading():
    base = {"name": "x", "daemon": "dpm", "envelope": {
        "native": "(?P<month>..)", "rsyslog": ""}, "roles": {"returns": "returns"}}
    with pytest.raises(ProfileError, match=r"required role\(s\) \['call'\] have no pattern"):
        profile_from_dict({**base, "required_roles": ["call", "returns"]})


def test_every_bundled_profile_compiles_and_passes_the_checks_a_site_file_passes_as_it_loads():
    # Bundled profiles compile each form at first use (start-up); a broken one would only
    # fail then, so every pattern of each is compiled and checked here.
    for profile in bundled_profiles():
        profile.check()
        assert profile.native.regex.groups and profile.rsyslog.regex.groups


def _site_profile(tmp_path, **envelope) -> str:
    path = tmp_path / "site.toml"
    native = envelope.get("native", r"(?P<month>\d\d)/(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):"
                          r"(?P<second>\d\d)\.(?P<frac>\d+) +(?P<pid>\d+),(?P<tid>\d+) (?P<func>\w+): ")
    rsyslog = envelope.get("rsyslog", r"(?P<rtime>\S+) (?P<host>\S+) (?P<tag>\w+): ")
    path.write_text(f"name = 'site'\ndaemon = 'dpm'\n[envelope]\nnative = '''{native}'''\n"
                    f"rsyslog = '''{rsyslog}'''\n[roles]\ncall = 'returns (?P<rc>\\d+)'\n")
    return str(path)


def test_a_site_profile_file_is_compiled_and_checked_as_it_loads(tmp_path):
    assert resolve_profile(_site_profile(tmp_path)).name == "site"
    with pytest.raises(ProfileError, match="bad pattern"):
        resolve_profile(_site_profile(tmp_path, rsyslog="(?P<rtime>"))
    with pytest.raises(ProfileError, match="needs groups rtime and host"):
        resolve_profile(_site_profile(tmp_path, rsyslog=r"(?P<rtime>\S+) "))
    with pytest.raises(ProfileError, match=r"envelope lacks group\(s\) \['tid', 'func'\]"):
        resolve_profile(_site_profile(tmp_path, native=r"(?P<month>\d\d)/(?P<day>\d\d) (?P<hour>\d\d):"
                                      r"(?P<minute>\d\d):(?P<second>\d\d)\.(?P<frac>\d+) (?P<pid>\d+) "))


def test_native_lines_are_detected_without_compiling_the_rsyslog_forms_of_other_profiles():
    fresh = [profile_from_dict(read_profile_file(p.source), check_now=False) for p in bundled_profiles()]
    assert detect_profile(REFERENCE_PUT, fresh).name == "lcgdm-dpm"
    assert [p.name for p in fresh if "rsyslog" in vars(p)] == []  # each native form read them



DOME_LINES = [
    "May 30 08:44:05 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome workerFunc : req:GET "
    "cmd:dome_access query:/domehead/command/dome_access bodyitems: 0",
    "2017-05-30T08:44:05.118402+02:00 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome "
    "SendSimpleResp : Exiting: code: 200",
]


def test_a_dome_log_is_no_dpm_daemons_and_detecting_so_compiles_none_of_their_forms():
    fresh = [profile_from_dict(read_profile_file(p.source), check_now=False) for p in bundled_profiles()]
    assert detect_profile(DOME_LINES, fresh) is None
    assert [p.name for p in fresh if {"native", "rsyslog"} & set(vars(p))] == []


def test_a_form_not_yet_compiled_reads_every_line_as_the_compiled_form_does():
    # DPM lines in both envelopes, DOME lines, half an envelope, and nothing
    rsyslog = [f"2017-05-30T08:44:05.118402+02:00 dpmhead01 dpm[2345]: {line}" for line in REFERENCE_PUT]
    lines = [*REFERENCE_PUT, *rsyslog, *DOME_LINES, REFERENCE_PUT[0][:12], rsyslog[0][:40], "", "x"]
    for bundled in bundled_profiles():
        compiled = profile_from_dict(read_profile_file(bundled.source))
        for line in lines:
            fresh = profile_from_dict(read_profile_file(bundled.source), check_now=False)
            want, got = match_line(compiled, line), match_line(fresh, line)
            read = [(m and m.span(), alt and alt.role, form is None) for form, m, alt in (want, got)]
            assert read[1] == read[0], line
    assert any(match_line(compiled, line)[2] is not None for line in rsyslog)


# -- the bundled files' TOML kept parsed (regex_profiles/parsed.json) ----------------------

def test_the_kept_toml_of_every_bundled_file_is_what_tomllib_reads_of_it_now():
    """Fails after a bundled profile is edited: `python -m dpmstream.parsers.profiles`
    writes regex_profiles/parsed.json again (until then each run reads the file with tomllib)."""
    import tomllib
    from dpmstream.parsers.profiles import _parsed_files, bundled_profile_paths, parsed_key
    kept = _parsed_files()
    paths = bundled_profile_paths()
    assert sorted(kept) == sorted(p.name for p in paths)
    for path in paths:
        assert kept[path.name]["key"] == parsed_key(path.read_bytes()), \
            f"{path.name} changed since parsed.json was written"
        # repr: the tables' order and the values' types too, which == would not all see
        assert repr(kept[path.name]["toml"]) == repr(tomllib.loads(path.read_text(encoding="utf-8")))


def test_a_bundled_file_whose_bytes_differ_from_the_kept_ones_is_read_with_tomllib(monkeypatch):
    import tomllib
    from dpmstream.parsers import profiles
    kept = profiles._parsed_files()
    name = "lcgdm-dpm.toml"
    crc, length = kept[name]["key"]
    stale = {**kept[name]["toml"], "description": "as the file was before an edit"}
    kept[name] = {"key": [crc ^ 1, length], "toml": stale}
    monkeypatch.setattr(profiles, "_parsed_files", lambda: kept)
    monkeypatch.setattr(profiles, "_BUNDLED_DATA", [])
    got = {path.name: data for path, data in profiles.bundled_profile_data()}
    path = next(p for p in profiles.bundled_profile_paths() if p.name == name)
    assert got[name] == tomllib.loads(path.read_text(encoding="utf-8")) != stale
    # the others are the kept copies themselves
    assert all(got[n] is entry["toml"] for n, entry in kept.items() if n != name)


def test_without_the_kept_copy_every_bundled_file_is_read_with_tomllib(monkeypatch, tmp_path):
    from dpmstream.parsers import profiles
    monkeypatch.setattr(profiles, "_parsed_path", lambda: tmp_path / "absent.json")
    assert profiles._parsed_files() == {}
    monkeypatch.setattr(profiles, "_BUNDLED_DATA", [])
    assert [data for _, data in profiles.bundled_profile_data()] == [
        read_profile_file(p) for p in profiles.bundled_profile_paths()]


def test_write_parsed_writes_the_file_as_it_is_kept(tmp_path):
    from dpmstream.parsers.profiles import _parsed_path, write_parsed
    written = tmp_path / "parsed.json"
    write_parsed(written)
    assert written.read_text(encoding="utf-8") == _parsed_path().read_text(encoding="utf-8")
