"""C programs against the RKNN runtime, on a board or on a PC (``python -m rknnlab cc``).

A program is compiled against the course's header (``rknnlab/c/rknn_api.h``: the
runtime's declarations, written from the facts sheets) and linked with

- on a board (the native backend): Rockchip's librknnrt.so, where ``rknnlab
  doctor`` finds it (/usr/lib, or $LIBRKNNRT_PATH);
- elsewhere: the simulator's librknnrt.so, built here on first use from
  ``rknnlab/c/librknnrt_sim.c`` (it embeds this Python and forwards every call to
  :mod:`rknnlab.sim.capi`), cached per user like the C sampler.

Either way the program records where its library is (``-Wl,-rpath``), so it runs
from a shell with no LD_LIBRARY_PATH.  On the simulator it plays
$RKNNLAB_SIM_SOC, else the SoC of the first model it loads.

    >>> from rknnlab import cc
    >>> program = cc.compile_program("examples/c/output_reuse.c")
    >>> cc.run_program(program, ["data/models/mobilenet_v2/rk3588.rknn", "100"]).stdout
"""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

from .probe import _cache_dir, _compiler

#: where built libraries and programs are kept ($XDG_CACHE_HOME/rknnlab)
cache_dir = _cache_dir

C_DIR = Path(__file__).resolve().parent / "c"
SIM_SOURCE = C_DIR / "librknnrt_sim.c"
#: what every program gets: the course header's directory, threads and libm (as
#: examples/c/README.md's board commands use)
BASE_FLAGS = ("-O2", "-Wall", "-pthread")
LINK_LIBS = ("-lm",)


class CBuildError(RuntimeError):
    """A C build failed; the message holds the command and the compiler's own words
    (``compiler_output`` alone: what a notebook shows)."""

    def __init__(self, message: str, compiler_output: str = "") -> None:
        super().__init__(message)
        self.compiler_output = compiler_output or message


class Program(NamedTuple):
    """A compiled C program and the runtime library it was linked with."""
    path: Path
    backend: str       # "sim" or "native"
    library: Path      # the librknnrt.so it loads
    warnings: str = ""  # what the compiler said about a program it compiled


def _python_library() -> Path:
    """The directory of libpython, refusing a Python without a shared one."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        raise CBuildError(
            f"this Python ({sys.executable}) was built without a shared libpython, so the "
            "simulator's librknnrt.so cannot embed it: use a Python built with --enable-shared "
            "(Debian's python3 with libpython3-dev, pyenv with PYTHON_CONFIGURE_OPTS=--enable-shared)")
    return Path(sysconfig.get_config_var("LIBDIR"))


def _python_link_name() -> str:
    version = sysconfig.get_config_var("LDVERSION") or sysconfig.get_config_var("VERSION")
    return f"python{version}"


def _sim_build_command(cc: List[str], out: Path) -> List[str]:
    libdir = _python_library()
    include = sysconfig.get_paths()["include"]
    package_parent = Path(__file__).resolve().parent.parent
    return [*cc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-pthread",
            f"-I{include}", f"-I{C_DIR}",
            f'-DRKNNLAB_PYTHON="{sys.executable}"', f'-DRKNNLAB_LIB="{package_parent}"',
            str(SIM_SOURCE), "-o", str(out),
            f"-L{libdir}", f"-l{_python_link_name()}", f"-Wl,-rpath,{libdir}",
            "-Wl,-soname,librknnrt.so"]


def simulator_library(rebuild: bool = False) -> Path:
    """The simulator's librknnrt.so for this Python (built now if not cached).

    Cached under $XDG_CACHE_HOME/rknnlab (~/.cache/rknnlab), keyed by the sources,
    the Python executable and the compiler command, so a changed source or another
    venv gets its own build.  Raises :class:`CBuildError` when it cannot be built."""
    cc = _compiler()
    if cc is None:
        raise CBuildError("no C compiler found (cc, gcc, clang; or set CC): sudo apt install gcc")
    probe_out = Path("librknnrt.so")
    key_parts = [SIM_SOURCE.read_bytes(), (C_DIR / "rknn_api.h").read_bytes(),
                 " ".join(_sim_build_command(cc, probe_out)).encode()]
    key = hashlib.sha256(b"\0".join(key_parts)).hexdigest()[:16]
    directory = Path(_cache_dir()) / f"librknnrt-sim-{key}"
    library = directory / "librknnrt.so"
    if library.exists() and not rebuild:
        return library
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    # build beside it and rename: processes building at once never load a half-written file
    fd, tmp_name = tempfile.mkstemp(prefix=".librknnrt-", suffix=".so", dir=directory)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _run_compiler(_sim_build_command(cc, tmp), "the simulator's librknnrt.so")  # no warnings
        os.replace(tmp, library)
    finally:
        tmp.unlink(missing_ok=True)
    return library


def _run_compiler(command: List[str], what: str) -> str:
    """Run the compiler; its warnings (stderr) when it succeeds, CBuildError when it fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as exc:
        raise CBuildError(f"building {what}: {shlex.join(command)}: {exc}") from None
    if done.returncode != 0:
        raise CBuildError(f"building {what} failed (exit {done.returncode}):\n$ "
                          f"{shlex.join(command)}\n{done.stderr.strip()}", done.stderr.strip())
    return done.stderr.strip()


def runtime_library(backend: str = "auto") -> Program:
    """(no path yet, backend, library): which librknnrt.so a program links with here."""
    from .board import choose_backend, find_librknnrt
    chosen, _why = choose_backend(backend)
    if chosen == "native":
        found = find_librknnrt()
        if found is None:  # choose_backend found it a moment ago; the file went away
            raise CBuildError("librknnrt.so is no longer where `rknnlab doctor` found it")
        return Program(Path(), "native", Path(found).resolve())
    return Program(Path(), "sim", simulator_library())


def compile_program(source: "str | os.PathLike[str]", output: "str | os.PathLike[str] | None" = None,
                    backend: str = "auto", cflags: Sequence[str] = ()) -> Program:
    """Compile ``source`` against the course header and the runtime this machine has.

    ``output``: the program's path (default: a cache file keyed by the preprocessed source,
    so the headers it includes count too, the flags and the library: an unchanged program
    is not compiled again).  ``cflags``: extra compiler arguments (``-DNAME=1``, ``-I...``,
    ``-O0 -g``).  The compiler's warnings come back in ``Program.warnings``."""
    source = Path(source)
    if not source.is_file():
        raise CBuildError(f"cannot read {source}: " + ("a directory" if source.is_dir() else "no such file"))
    lib = runtime_library(backend)
    cc = _compiler()
    if cc is None:
        raise CBuildError("no C compiler found (cc, gcc, clang; or set CC): sudo apt install gcc")
    compile_flags = [*BASE_FLAGS, f"-I{C_DIR}", *cflags]

    def command(out: Path) -> List[str]:
        return [*cc, *compile_flags, str(source), "-o", str(out),
                str(lib.library), f"-Wl,-rpath,{lib.library.parent}", *LINK_LIBS]

    if output is None:
        try:
            expanded = subprocess.run([*cc, *compile_flags, "-E", str(source)], capture_output=True)
        except OSError as exc:
            raise CBuildError(f"building {source}: {exc}") from None
        if expanded.returncode != 0:  # a missing header, a bad flag: the compiler says which
            message = expanded.stderr.decode(errors="replace").strip()
            raise CBuildError(f"building {source} failed:\n{message}", message)
        key = hashlib.sha256(expanded.stdout + b"\0" + " ".join(command(Path("p"))).encode()).hexdigest()[:16]
        target = Path(_cache_dir()) / "c-programs" / f"{source.stem}-{key}"
        said = target.with_name(target.name + ".warnings")
        if target.exists():
            return Program(target, lib.backend, lib.library, said.read_text() if said.exists() else "")
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    else:
        target = Path(output)
        said = None
        if target.is_dir():
            raise CBuildError(f"-o {target}: a directory; name the program's file")
        if not target.resolve().parent.is_dir():
            raise CBuildError(f"-o {target}: the directory {target.resolve().parent} does not exist")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.resolve().parent)
    os.close(fd)
    try:
        warnings = _run_compiler(command(Path(tmp_name)), str(source))
        if said is not None:
            said.write_text(warnings)
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return Program(target, lib.backend, lib.library, warnings)


def run_program(program: Program, args: Sequence[str] = (), timeout: Optional[float] = None,
                cwd: "str | os.PathLike[str] | None" = None,
                env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    """Run a compiled program and capture what it prints (stdout, stderr: text).  It needs
    no environment of its own: its library's path is in the program, and the simulator's
    Python in the library."""
    return subprocess.run([str(program.path), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)
