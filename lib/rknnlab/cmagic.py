"""``%%rknn_c``: compile and run a notebook cell's C program (``%load_ext rknnlab``).

Cell magic: the cell is a whole C program.  It is compiled against the course's
rknn_api.h and linked with the runtime this machine has (rknnlab.cc: the board's
librknnrt.so, else the simulator's), then run; what it prints appears below the
cell as it prints it.  The options go on the magic's line, the program's own
arguments after ``--``::

    %%rknn_c -- ../data/models/mobilenet_v2/rk3588.rknn 100
    #include <stdio.h>
    #include "rknn_api.h"
    int main(int argc, char **argv) { ... }

Line magic: the same for a C file, e.g. one of examples/c::

    %rknn_c examples/c/output_reuse.c -- ../data/models/mobilenet_v2/rk3588.rknn 100

(FILE is looked for in the notebook's folder, then in the course's root.)
Options: ``--backend auto|sim|native``, ``--soc rk3576`` (the SoC the simulator
plays), ``--cflags "-O0 -g"``, ``--timeout SECONDS`` (default 300).

The program runs in its own process: a crash ends the program, not the kernel, and
the cell says how it ended.  A program that does not compile stops the cell with
the compiler's messages (line numbers are the cell's).  Lines longer than
:data:`WIDTH` columns are wrapped, as the course's own output is.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pty
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import IO, List, Optional, Tuple

from . import cc, paths

#: what a notebook line may hold (the course's outputs fit 100 columns)
WIDTH = 100
DEFAULT_TIMEOUT = 300.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # a UsageError, not SystemExit, in a notebook
        raise ValueError(message)


def _parser(line_magic: bool) -> argparse.ArgumentParser:
    p = _Parser(prog="%rknn_c" if line_magic else "%%rknn_c", add_help=False)
    if line_magic:
        p.add_argument("source")
    p.add_argument("--backend", choices=("auto", "sim", "native"), default="auto")
    p.add_argument("--soc")
    p.add_argument("--cflags", default="")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    return p


def parse(line: str, line_magic: bool) -> Tuple[argparse.Namespace, List[str]]:
    """(options, the program's arguments) from a magic's line."""
    from .cli import joined_values
    words = shlex.split(line)
    program_args: List[str] = []
    if "--" in words:
        at = words.index("--")
        words, program_args = words[:at], words[at + 1:]
    return _parser(line_magic).parse_args(joined_values(words)), program_args


def _pump(fd: int, out: IO[str]) -> None:
    """Copy the program's terminal output to ``out`` line by line, as it comes."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the program closed its end
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        _write(lines, out)
    _write([pending] if pending else [], out)


def _write(lines: List[bytes], out: IO[str]) -> None:
    for line in lines:
        for piece in _wrapped(line.decode(errors="replace").rstrip("\r")):
            out.write(piece + "\n")
    out.flush()


def _wrapped(line: str) -> List[str]:
    if len(line) <= WIDTH:
        return [line]
    return textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_long_words=True,
                         break_on_hyphens=False) or [line]


def build(source: Path, options: argparse.Namespace, cell: bool = False) -> cc.Program:
    """Compile; a cell also finds the headers beside its notebook (#include "my.h")."""
    here = ["-iquote", os.getcwd()] if cell else []
    return cc.compile_program(source, None, backend=options.backend,
                              cflags=[*here, *shlex.split(options.cflags)])


def run(program: cc.Program, args: List[str], options: argparse.Namespace,
        out: Optional[IO[str]] = None) -> int:
    """Run ``program`` and copy what it prints to ``out`` (the cell's stdout) as it prints
    it; return its exit status (negative: the signal that ended it).

    The program writes to a terminal (a pty), stdout and stderr both, so its lines come
    when it prints them (not when a pipe's buffer fills) and in the order a shell shows."""
    out = out or sys.stdout
    env = dict(os.environ)
    if options.soc:
        env["RKNNLAB_SIM_SOC"] = options.soc
    main, terminal = pty.openpty()
    try:
        # a session of its own: stopping it stops what it started too
        process = subprocess.Popen([str(program.path), *args], stdin=subprocess.DEVNULL,
                                   stdout=terminal, stderr=terminal, env=env, close_fds=True,
                                   start_new_session=True)
    finally:
        os.close(terminal)
    pump = threading.Thread(target=_pump, args=(main, out), daemon=True)
    pump.start()
    note = ""
    try:
        status = process.wait(timeout=options.timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        status = process.wait()
        note = (f"the program ran longer than {options.timeout:g} s and was stopped "
                "(--timeout SECONDS gives it longer)")
    except BaseException:  # the kernel's interrupt (the stop button): stop the program too
        _stop(process)
        process.wait()
        pump.join(timeout=5)
        os.close(main)
        raise
    pump.join(timeout=5)
    os.close(main)
    if not note and status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = str(-status)
        note = f"the program was ended by signal {name} (the kernel is fine)"
    elif not note and status > 0:
        note = f"the program exited with status {status}"
    if note:
        out.write(note + "\n")
        out.flush()
    return status


def _stop(process: "subprocess.Popen[bytes]") -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def rknn_c(line: str, cell: Optional[str] = None) -> None:
    """The magic: ``cell`` is None for the line form."""
    from IPython.core.error import UsageError
    try:
        options, args = parse(line, line_magic=cell is None)
    except ValueError as exc:
        raise UsageError(f"{'%rknn_c' if cell is None else '%%rknn_c'}: {exc}") from None
    source = c_file(options.source) if cell is None else cell_source(cell)

    def said(text: str) -> str:  # the compiler names the cell's file: say "cell.c"
        return text.replace(str(source), "cell.c") if cell is not None else text
    try:
        program = build(source, options, cell=cell is not None)
    except (cc.CBuildError, ValueError) as exc:
        raise UsageError(said(getattr(exc, "compiler_output", str(exc)))) from None
    if program.warnings:
        _write([line.encode() for line in said(program.warnings).splitlines()], sys.stdout)
    run(program, args, options)


def c_file(name: str) -> Path:
    """The line form's FILE: relative to the notebook's folder, or else to the
    course's root, so ``examples/c/x.c`` works the same from chapters/,
    labs/ and the editions' folders (chapters/zh/)."""
    path = Path(name).expanduser()
    if path.is_absolute() or path.exists():
        return path
    try:
        in_course = paths.repo_root() / path
    except paths.DataNotFoundError:
        return path
    return in_course if in_course.exists() else path


def cell_source(cell: str) -> Path:
    """The cell as a C file with a name of its own (so an unchanged cell is not
    compiled again: rknnlab.cc caches programs by source and command)."""
    code = cell.encode()
    directory = Path(cc.cache_dir()) / "c-cells"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"cell-{hashlib.sha256(code).hexdigest()[:16]}.c"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".c")
        with os.fdopen(fd, "wb") as f:
            f.write(code)
        os.replace(tmp, path)
    return path


def load(ipython) -> None:  # noqa: ANN001 - IPython's InteractiveShell
    ipython.register_magic_function(rknn_c, magic_kind="line_cell", magic_name="rknn_c")
