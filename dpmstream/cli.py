"""The `dpmstream` command: one subcommand per module in dpmstream.commands.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code.
Modules are imported lazily so that `dpmstream replay` never pays for Faust.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys

from dpmstream import __version__

# name -> (module, one-line help); the module is imported only when it runs.
COMMANDS = {
    "replay": ("dpmstream.commands.replay", "reassemble archived logs into request and call records"),
    "run": ("dpmstream.commands.run", "follow live log files and serve Prometheus metrics"),
    "simulate": ("dpmstream.commands.simulate", "simulate a DPM head node: a log plus its ground truth"),
    "report": ("dpmstream.commands.report", "one self-contained HTML page of where the time goes"),
    "whatif": ("dpmstream.commands.whatif", "calibrate the simulator on a log and predict the effect of tuning"),
    "profile": ("dpmstream.commands.profile", "inspect regex profiles against log files"),
    "worker": ("dpmstream.commands.worker", "run a Faust stream worker on Kafka"),
    "stack": ("dpmstream.commands.stack", "start or stop a local Kafka/rsyslog/worker/Prometheus stack"),
}


class ArgumentParser(argparse.ArgumentParser):
    """Every (sub)command's parser: a bad option or value is one line on stderr, naming
    the option and the value, and exit 2; --help shows each default once (HelpFormatter).
    Subparsers inherit the class, so nested commands (`profile check`, `stack up`) too."""

    def __init__(self, *args, **kwargs):
        from dpmstream.commands.common import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="dpmstream",
        description="Per-phase timings of DPM head-node requests, from live or archived logs.",
    )
    parser.add_argument("--version", action="version", version=f"dpmstream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Import only the chosen command's module. Without one (top-level --help, a name that
    # is no command) each command is only listed: its name and help line, which is all the
    # top-level help and argparse's "invalid choice" show (importing every command's
    # module was 70% of `dpmstream --help`'s instructions).
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        if chosen == name:
            importlib.import_module(module).register(sub, name, help_text)
        elif chosen not in COMMANDS:
            sub.add_parser(name, help=help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    own_process = argv is None   # the entry point's call: the process ends with the command
    argv = sys.argv[1:] if argv is None else argv
    # The process ends after the command, and the interpreter's last collections walk
    # every object still alive (the modules, their functions and types) for cycles: ~25 M
    # instructions, 2 % of a replay of 200 k lines (issue 30). A command has written and
    # closed its outputs by then, and reference counts still free what they free: frozen
    # at exit (gc.freeze), what is left is skipped. At exit, not now: an in-process
    # caller (the tests) keeps its collections until its own end; registered once.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    code = _run(args)
    if own_process and getattr(args, "nothing_left_at_exit", False):
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """End the process now, as a command that declares nothing left for the interpreter's
    exit (nothing_left_at_exit: its outputs written and closed, no thread, no atexit
    work of its own) asks. The interpreter's teardown of the modules and what they hold
    is ~3 ms CPU of every `report` (~6 ms with the kernel's unmapping, which remains;
    issue 30). Only where the process is the command's (argv read from sys.argv): an
    in-process caller (the tests) gets the code back."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # a reader that has gone away, as main's own (exit 0)
        code = 0
    os._exit(code)


def _run(args) -> int:
    where = f"dpmstream {args.command}"
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as exc:  # a path that cannot be used, a bad setting
        print(f"{where}: {describe_error(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line, and the traceback for whoever asks
        from dpmstream.parsers.lazylog import get_logger
        get_logger("dpmstream").debug("traceback", exc_info=True)
        print(f"{where}: internal error: {type(exc).__name__}: {exc} "
              "(-vv shows the traceback)", file=sys.stderr)
        return 70


def describe_error(exc: BaseException) -> str:
    """One line for an error a user can fix: the path and the system's reason."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)
