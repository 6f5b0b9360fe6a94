"""The command line: ``python -m rknnlab <command>`` (also installed as ``rknnlab``).

Adding a command is one function: decorate a function that receives the argparse
sub-parsers object with :func:`command`, add your parser there and set ``func`` to a
handler that takes the parsed arguments and returns the exit code::

    @command
    def _run(sub):
        p = sub.add_parser("run", help="run a variant")
        p.add_argument("variant")
        p.set_defaults(func=lambda args: _do_run(args))

Handlers import what they need inside themselves, so ``doctor`` stays fast and works
with only the core dependencies installed.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, List, Optional

from . import __version__

_COMMANDS: List[Callable[["argparse._SubParsersAction"], None]] = []


def command(register: Callable[["argparse._SubParsersAction"], None]):
    """Register a function that adds one sub-command to the parser."""
    _COMMANDS.append(register)
    return register


# --------------------------------------------------------------------------- doctor
@command
def _doctor(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("doctor", help="what this machine has for the course (board, NPU, runtime, "
                                      "packages, backend, models) and what to do about what is missing",
                       description="Check the board, the NPU driver and runtime, the Python packages, "
                                   "the backend `auto` picks and the course models.")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of text")
    p.set_defaults(func=_doctor_main)


def _doctor_main(args: argparse.Namespace) -> int:
    from . import doctor
    rows = doctor.doctor_report()
    if args.json:
        import json
        print(json.dumps([r._asdict() for r in rows], indent=1))
    else:
        doctor.print_doctor(rows=rows)
    return 0


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rknnlab",
        description="rknnlab: the command line of the RKNN memory course.")
    parser.add_argument("--version", action="version", version=f"rknnlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for register in _COMMANDS:
        register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
