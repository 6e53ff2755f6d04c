"""The check_dpm command lines the README and the shipped Nagios objects show work as
written: the shell passes each argument exactly as it reads (no tilde expanded), and
check_dpm accepts every one of them."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from dpmstream.probes import check_dpm

REPO = Path(__file__).resolve().parents[2]
NAGIOS = REPO / "probes" / "nagios"


def readme_commands() -> list[str]:
    """check_dpm lines of the README's sh blocks, continuation lines joined."""
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("check_dpm "):
                commands.append(line.strip())
    return commands


def nagios_commands() -> list[str]:
    """Each example service's check_command, expanded with the shipped command_line."""
    definitions = dict(re.findall(r"command_name\s+(\S+)\s+command_line\s+(.+)",
                                  (NAGIOS / "dpmstream-commands.cfg").read_text()))
    commands = []
    for call in re.findall(r"check_command\s+(.+)", (NAGIOS / "dpmstream-services.cfg").read_text()):
        name, *args = call.strip().split("!")
        line = definitions[name].replace("$USER1$/", "")
        for i, arg in enumerate(args, 1):
            line = line.replace(f"${'ARG'}{i}$", arg)
        commands.append(line)
    return commands


def argv_from(shell: str, line: str) -> list[str]:
    """The arguments `shell` passes to check_dpm for this line."""
    script = 'check_dpm() { printf "%s\\0" "$@"; }\n' + line
    out = subprocess.run([shell, "-c", script], capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1]


def assert_accepted(argv: list[str]) -> None:
    args = check_dpm.build_parser().parse_args(argv)
    check_dpm.build_check(args, time.monotonic() + 10)  # thresholds, durations: all valid


def test_the_readme_shows_check_dpm_lines():
    assert len(readme_commands()) >= 3


@pytest.mark.parametrize("line", readme_commands())
def test_a_readme_example_pasted_into_bash_passes_its_arguments_as_written(line):
    argv = argv_from("bash", line)
    assert argv == shlex.split(line, comments=True)[1:]
    assert not any("/root" in a or "/home" in a for a in argv if "=" in a)
    assert_accepted(argv)


def test_the_nagios_examples_cover_both_sources():
    commands = nagios_commands()
    assert any("--prometheus" in c for c in commands) and any("--log" in c for c in commands)
    assert all("--max-age" in c for c in commands)


@pytest.mark.parametrize("line", nagios_commands())
def test_a_nagios_example_runs_its_arguments_as_written(line):
    argv = argv_from("/bin/sh", line)  # Nagios runs a command line with shell characters by sh
    assert argv == shlex.split(line)[1:]
    assert_accepted(argv)
