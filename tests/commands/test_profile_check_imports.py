"""What importing profile check's own modules costs: each check pays it on a cold start.

A dataclass compiles its generated methods as its module is imported (~0.5 ms CPU each,
issue 30): the findings and counts of parsers/fit.py, which only the check imports, are
plain classes."""

from tests.report.test_report_imports import dataclasses_made

# A module known to make a dataclass (the DOME simulator's config), imported after the
# check's: the probe must see its classes, or it no longer watches dataclasses being made.
KNOWN = "dpmstream.simulator.dome_config"


def test_the_check_makes_no_dataclass_at_all():
    # Replay's value classes are parsers/plain.py's too: the check's whole import (its own
    # findings and counts, and the replay path it reads logs with) makes none.
    made = dataclasses_made(("dpmstream.commands.profile_check", "dpmstream.parsers.fit", KNOWN))
    assert made, "the probe saw no dataclass at all: it no longer watches them being made"
    assert [(m, name) for m, name, _ in made if m != KNOWN] == []


def test_the_findings_and_counts_compare_and_show_by_their_fields_as_dataclasses_did():
    # The compiled tally is held to the line-by-line one by these (test_profile_check_compiled)
    from dpmstream.parsers.fit import DomePutsSeen, Finding, Reassembled

    assert Reassembled(orphans=3) == Reassembled(orphans=3) != Reassembled(orphans=4)
    assert Finding("no line", "call") == Finding("no line", "call") != Finding("no line")
    seen, other = DomePutsSeen(), DomePutsSeen()
    other.joined += 1
    assert seen == DomePutsSeen() != other
    assert Finding("x") != ("x", None)
    assert repr(Finding("no line", "call")) == "Finding(message='no line', role='call')"
    assert repr(Reassembled(requests=2)).startswith("Reassembled(requests=2, orphans=0, ")


def test_a_finding_is_set_once_and_hashed_and_the_counts_are_made_as_before():
    # Finding was a frozen dataclass, Reassembled and DomePutsSeen dataclasses with
    # defaults (given by position or name).
    import pytest

    from dpmstream.parsers.fit import DomePutsSeen, Finding, Reassembled

    assert len({Finding("x", "call"), Finding("x", "call"), Finding("y")}) == 2
    with pytest.raises(AttributeError):
        Finding("x").message = "y"
    assert Reassembled(5, 2) == Reassembled(requests=5, orphans=2)
    assert DomePutsSeen(3, joined=1) == DomePutsSeen(entered=3, joined=1)
    assert DomePutsSeen().replace(joined=2).joined == 2


def test_a_check_imports_no_typing_and_compiles_only_the_forms_of_the_daemons_present(tmp_path):
    # Its DOME tallies load the DOME engine's modules on any log (parsers/compiled_dome.py):
    # their tuples are collections.namedtuple, as replay's are (typing: ~11 M instructions).
    # A DPM profile's forms are compiled by re (~1 ms each) for the reassembly of its
    # daemon's lines, made at the first one: the other profiles' tallies read the lines
    # with their patterns alone (fastpath.role_plan), their group numbers kept.
    import json
    import subprocess
    import sys

    log = tmp_path / "dpm.log"
    log.write_text("08/12 14:31:40.236 12345,0 dpm_srv_put: DP092 - put request by /CN=x (1,2) from h\n")
    probe = ("import json, sys\nfrom dpmstream.cli import main\nrc = main(sys.argv[1:])\n"
             "from dpmstream.parsers.profiles import bundled_profiles\n"
             "forms = sorted(p.name + ' ' + f for p in bundled_profiles() for f in ('native', 'rsyslog')"
             " if f in vars(p))\n"
             "print(json.dumps({'rc': rc, 'typing': 'typing' in sys.modules, 'forms': forms,"
             " 'dome': 'dpmstream.parsers.compiled_dome' in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", probe, "profile", "check", str(log)],
                          capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["dome"], "the DOME tallies no longer load the engine: the probe sees nothing"
    assert seen["typing"] is False
    assert seen["forms"] == ["lcgdm-dpm native", "lcgdm-dpm rsyslog"]
