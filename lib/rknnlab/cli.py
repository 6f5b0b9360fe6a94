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


# --------------------------------------------------------------------------- book, export
@command
def _book(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("book", help="build the course as an HTML book (for instructors)",
                       description="Build the course book from book.toml.")
    bsub = p.add_subparsers(dest="book_command", metavar="<book command>")
    b = bsub.add_parser(
        "build", help="execute every notebook and build the static HTML site",
        description="Execute every written notebook listed in book.toml (unchanged ones come "
                    "from the cache) and build a static, offline HTML site into _build/html/ "
                    "(_build/html-<lang>, _build/html-instructor, ... for the other languages "
                    "and editions).")
    b.add_argument("--lang", help="language (one of book.toml's [book] languages; default: the first)")
    b.add_argument("--edition", choices=("student", "instructor"),
                   help="student: solution cells removed; instructor: kept and marked "
                        "(default: book.toml's [build] edition)")
    b.add_argument("--backend", choices=("auto", "sim", "native"),
                   help="what executes the notebooks (default: book.toml's [build] backend)")
    b.add_argument("--book", help="the book.toml (default: ./book.toml or the first one above)")
    b.add_argument("-o", "--out", help="output directory (default: _build/html...)")
    b.add_argument("--jobs", type=int, help="notebooks executed at once (default: one per CPU)")
    b.set_defaults(func=_book_build_main)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _book_build_main(args: argparse.Namespace) -> int:
    from .book.build import BookBuildError, build_book
    from .book.config import BookConfigError
    try:
        build_book(args.book, lang=args.lang, edition=args.edition, backend=args.backend,
                   out_dir=args.out, jobs=args.jobs)
    except (BookConfigError, BookBuildError) as e:
        print(f"book build failed: {e}", file=sys.stderr)
        return 1
    return 0


@command
def _export(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("export", help="export one notebook to a self-contained HTML file",
                       description="Execute one notebook (through the book's cache) and write it "
                                   "as one self-contained HTML file, figures inline, nothing "
                                   "loaded from the network.")
    p.add_argument("notebook", help="the .ipynb to export")
    p.add_argument("--to", choices=("html",), default="html", help="output format (html)")
    p.add_argument("--edition", choices=("student", "instructor"), default="student",
                   help="student (default): solution cells removed; instructor: kept and marked")
    p.add_argument("--backend", choices=("auto", "sim", "native"), default="auto")
    p.add_argument("--no-execute", action="store_true",
                   help="export the notebook's saved outputs instead of executing it")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    p.add_argument("--print", dest="printable", action="store_true",
                   help="a page for paper: A4, no code or prompts, compact type, tables kept whole "
                        "(default file: _build/export/<name>[-zh]-print.html); print it from a browser")
    p.add_argument("-o", "--out",
                   help="output file (default: _build/export/<name>[-zh][-instructor][-print].html)")
    p.set_defaults(func=_export_main)


def _export_main(args: argparse.Namespace) -> int:
    from .book.build import BookBuildError
    from .book.export import export_notebook
    try:
        export_notebook(args.notebook, to=args.to, edition=args.edition, out=args.out,
                        backend=args.backend, execute=not args.no_execute, timeout=args.timeout,
                        printable=args.printable)
    except (BookBuildError, FileNotFoundError, ValueError) as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- workspace
@command
def _workspace(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("workspace", help="make or update your working copy of the course "
                                         "(labs without solutions); `make lab` opens it",
                       description="Copy the course into a workspace of your own: chapters as "
                                   "they are, labs without their solution cells, links to data/ "
                                   "and examples/. Run again after updating the course: new "
                                   "notebooks are added, notebooks you never edited are updated, "
                                   "and a notebook you edited is kept, with the course's new "
                                   "version written beside it as <name>.updated.ipynb.")
    p.add_argument("--dir", help="the workspace (default: workspace/ in the course repository)")
    p.add_argument("--course", help="the course repository (default: the one rknnlab is run from)")
    p.add_argument("--quiet", action="store_true", help="print the summary line only, not a line per file")
    p.set_defaults(func=_workspace_main)


def _workspace_main(args: argparse.Namespace) -> int:
    from .workspace import main
    return main(args.dir, args.course, quiet=args.quiet)


# --------------------------------------------------------------------------- nbgrader
@command
def _nbgrader(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("nbgrader", help="grade the labs with nbgrader (for instructors)",
                       description="Write an nbgrader course directory from the labs: solution "
                                   "cells become nbgrader solution cells, each check an "
                                   "autograded test cell with its points, everything else "
                                   "read-only. The labs themselves are not changed.")
    nsub = p.add_subparsers(dest="nbgrader_command", metavar="<nbgrader command>")
    e = nsub.add_parser("export", help="write the nbgrader course directory (source/<lab>/...)")
    e.add_argument("--out", default="nbgrader-course",
                   help="the course directory (default: nbgrader-course)")
    e.add_argument("--course-id", default="rknn-memory", help="nbgrader's course id (default: rknn-memory)")
    e.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="the labs' language: en (labs/) or zh (labs/zh/, checks in Chinese)")
    e.add_argument("--force", action="store_true",
                   help="overwrite source notebooks that exist (an instructor's edits are lost)")
    e.set_defaults(func=_nbgrader_export)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _nbgrader_export(args: argparse.Namespace) -> int:
    from .classroom.nbgrader_export import main
    return main(args)


# --------------------------------------------------------------------------- run, show
@command
def _run_cmd(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("run", help="run variants (each in a fresh process) and print the summary",
                       description="Run one or more variants of an inference loop, each in its own "
                                   "process, with every runtime call timed and memory sampled; "
                                   "print the summary and optionally save a JSON trace.  A progress "
                                   "bar of the iterations goes to stderr when it is a terminal.")
    p.add_argument("--variant", "-v", action="append", required=True, metavar="V",
                   help="a built-in variant (repeat for several); 'list' lists them")
    p.add_argument("--model", "-m", default="mobilenet_v2", help="course model name or .rknn path")
    p.add_argument("--iterations", "-n", type=int, default=200, help="measured iterations (default 200)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up iterations (default 10)")
    p.add_argument("--backend", default="auto", help="auto, sim or native (default auto)")
    p.add_argument("--soc", help="SoC the simulator plays (default rk3588; a board is itself)")
    p.add_argument("--sample-hz", type=float, default=200.0, help="memory samples per second (0: off)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input frames (default 0)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per variant before its process is killed (default 300)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar (it goes to stderr, and only when stderr is a terminal)")
    p.add_argument("--out", "-o", help="write the result as a JSON trace here")
    p.set_defaults(func=_run_main)


def _run_main(args: argparse.Namespace) -> int:
    from .experiment import BUILTIN, GROUPS, RunError, run
    if "list" in args.variant:
        import inspect
        import textwrap
        for name, f in BUILTIN.items():
            summary = " ".join((inspect.getdoc(f) or "").split("\n\n")[0].split())
            print(textwrap.fill(summary, 100, initial_indent=f"{name:20s} ", subsequent_indent=" " * 21))
        for name, group in GROUPS.items():
            print(f"{name:20s} = {', '.join(g.__name__ for g in group)}")
        return 0
    try:
        result = run(args.variant, model=args.model, iterations=args.iterations, warmup=args.warmup,
                     backend=args.backend, soc=args.soc, sample_hz=args.sample_hz, seed=args.seed,
                     timeout=args.timeout, progress=False if args.quiet else None)
    except RunError as exc:
        print(f"rknnlab run: {exc}", file=sys.stderr)
        return 2
    _print_result(result)
    if args.out:
        result.save(args.out)
        print(f"trace written to {args.out}")
    return 0 if not result.errors else 1


def _print_result(result) -> None:
    import pandas as pd
    cols = ["status", "iterations", "iter_median_ms", "iter_p95_ms", "iters_per_s", "rss_slope_kb_per_1k_iter",
            "rss_peak_kb", "memfree_drop_kb", "dma_peak_bytes"]
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.precision", 2):
        print(result.summary[[c for c in cols if c in result.summary]])
    print()
    print(result.describe())


@command
def _show(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("show", help="summarize a saved JSON trace (and draw its figures)",
                       description="Load a trace written by `run --out` or Result.save, print its "
                                   "summary and, with --png, write the standard figures.")
    p.add_argument("trace", help="the trace (.json or .json.gz)")
    p.add_argument("--png", metavar="DIR", help="write memory, timing and phase figures here as PNG")
    p.set_defaults(func=_show_main)


def _show_main(args: argparse.Namespace) -> int:
    from .experiment import TraceError, load
    try:
        result = load(args.trace)
    except TraceError as exc:
        print(f"rknnlab show: {exc}", file=sys.stderr)
        return 2
    meta = result.meta
    print(f"{args.trace}: {meta['model']['name']} ({meta['model']['soc']}), {result.source}; "
          f"rknnlab {meta['rknnlab_version']}, recorded {meta.get('created', '?')} on "
          f"{meta['host'].get('hostname', '?')}")
    _print_result(result)
    if args.png:
        import os
        import matplotlib
        matplotlib.use("Agg")
        from . import plot
        os.makedirs(args.png, exist_ok=True)
        figs = {"memory_rss": plot.memory(result, "rss"), "memory_memfree": plot.memory(result, "mem_free"),
                "iteration_times": plot.iteration_times(result), "phases": plot.phases(result)}
        for name, fig in figs.items():
            path = os.path.join(args.png, f"{name}.png")
            fig.savefig(path, dpi=120)
            print(f"wrote {path}")
    return 0


# --------------------------------------------------------------------------- cc
@command
def _cc(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser(
        "cc", help="compile (and run) a C program against the RKNN runtime: the board's "
                   "librknnrt.so, or the simulator's on a PC",
        description="Compile a C program against the course's rknn_api.h and link it with the "
                    "runtime this machine has: Rockchip's librknnrt.so on a board, else the "
                    "simulator's librknnrt.so (built on first use; it plays $RKNNLAB_SIM_SOC, "
                    "else the SoC of the first model loaded). The program records where its "
                    "library is, so it runs from a shell as it is.",
        epilog="example: python -m rknnlab cc examples/c/output_reuse.c --run "
               "data/models/mobilenet_v2/rk3588.rknn 100")
    p.add_argument("source", help="the C file")
    p.add_argument("-o", "--output", help="the program to write (default: ./<source name>; "
                                          "with --run and no -o, a cached build)")
    p.add_argument("--backend", choices=("auto", "sim", "native"), default="auto",
                   help="which librknnrt.so to link (default auto: the board's where `rknnlab "
                        "doctor` finds an NPU, else the simulator's)")
    p.add_argument("--soc", help="the SoC the simulator plays (sets RKNNLAB_SIM_SOC for --run)")
    p.add_argument("--cflags", default="", help='extra compiler arguments, e.g. "-O0 -g -DDEBUG"')
    p.add_argument("--run", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="run the program after compiling it, with the arguments that follow")
    p.set_defaults(func=_cc_main)


def _cc_main(args: argparse.Namespace) -> int:
    import os
    import shlex
    import subprocess
    from pathlib import Path

    from . import cc
    from .board import BackendUnavailableError
    if args.soc:
        from .sim.npu import soc_npu
        try:
            soc_npu(args.soc)
        except ValueError as exc:
            print(f"rknnlab cc: --soc {args.soc}: {exc}", file=sys.stderr)
            return 2
    output = args.output
    if output is None and args.run is None:
        output = Path(args.source).stem
    try:
        program = cc.compile_program(args.source, output, backend=args.backend,
                                     cflags=shlex.split(args.cflags))
    except (cc.CBuildError, BackendUnavailableError, ValueError) as exc:
        print(f"rknnlab cc: {exc}", file=sys.stderr)
        return 1
    if program.warnings:
        print(program.warnings, file=sys.stderr)
    where = "the simulator's" if program.backend == "sim" else "the board's"
    if args.run is None:
        print(f"wrote {program.path} (linked with {where} {program.library})")
        if args.soc:
            print(f"--soc is for --run: run it as RKNNLAB_SIM_SOC={args.soc} ./{program.path.name} ...",
                  file=sys.stderr)
        return 0
    env = dict(os.environ)
    if args.soc:
        env["RKNNLAB_SIM_SOC"] = args.soc
    sys.stdout.flush()
    return subprocess.call([str(program.path), *args.run], env=env)


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


def joined_values(argv: List[str], options: "tuple[str, ...]" = ("--cflags",)) -> List[str]:
    """``--cflags -DDEBUG`` as ``--cflags=-DDEBUG``: argparse takes a value that starts with
    "-" and has no space for an option of its own (the C flags always start with "-")."""
    out: List[str] = []
    words = iter(argv)
    for word in words:
        if word in options:
            value = next(words, None)
            out.append(word if value is None else f"{word}={value}")
        elif word == "--run":  # the program's own arguments follow, untouched
            out.append(word)
            out.extend(words)
        else:
            out.append(word)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(joined_values(list(sys.argv[1:] if argv is None else argv)))
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
