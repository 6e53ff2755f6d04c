"""dpmstream/cli.py: one program, each command registered with its own help."""

from tests.commands.test_replay import dpmstream


def test_every_subcommand_has_help():
    for command in ("replay", "run", "simulate", "profile", "worker", "stack"):
        out = dpmstream(command, "--help").stdout.decode()
        assert out.startswith("usage: dpmstream " + command), command
    assert b"profile" in dpmstream("--help").stdout
