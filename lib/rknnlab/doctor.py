"""``python -m rknnlab doctor``: what this machine has for the course, and what to do
about anything missing.

:func:`doctor_report` returns rows ``(section, item, value, status, advice)`` with
status "ok", "warn" or "missing"; :func:`print_doctor` prints them as aligned plain
text (readable in a terminal and in a notebook cell). On a PC with no board, the
simulator is used and that is fine: the doctor says so and exits 0.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import textwrap
from pathlib import Path
from typing import IO, List, Mapping, NamedTuple, Optional

from . import __version__, board as _board
from . import models as _models
from . import paths

OK, WARN, MISSING = "ok", "warn", "missing"

#: packages the course uses, and which extra installs each
KEY_PACKAGES = (
    ("numpy", ""),
    ("psutil", ""),
    ("onnxruntime", "sim"),
    ("matplotlib", "lab"),
    ("pandas", "lab"),
    ("ipywidgets", "lab"),
    ("jupyterlab", "lab"),
)

RUNTIME_SOURCE = _models.RUNTIME_SOURCE
ON_PC = "board only; on a PC the simulator stands in (fine for the course)"


class Row(NamedTuple):
    section: str
    item: str
    value: str
    status: str   # "ok" | "warn" | "missing"
    advice: str


def _pkg_version(name: str) -> Optional[str]:
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:
        return None


def _mhz(hz: Optional[int]) -> str:
    return f"{hz / 1e6:.0f} MHz" if hz else "?"


def _gib(kb: Optional[int]) -> str:
    return f"{kb / 1024 / 1024:.1f} GiB" if kb else "?"


def _board_rows(b: _board.BoardInfo) -> List[Row]:
    rows: List[Row] = []
    S = "board"
    if b.is_rockchip:
        rows.append(Row(S, "Rockchip board", "yes", OK, ""))
    else:
        rows.append(Row(S, "Rockchip board", f"no ({b.machine or 'unknown'} machine)", OK,
                        "the simulator will be used; that's fine for the course"))
    rows.append(Row(S, "model", b.model or "unknown", OK, ""))
    if b.soc:
        label = b.soc + (f" ({b.soc_variant})" if b.soc_variant else "")
        if b.soc in _board.SOC_NPU_CORES:
            cores = f", {b.npu_cores} NPU core{'s' if b.npu_cores != 1 else ''}" if b.npu_cores else ""
            rows.append(Row(S, "SoC", label + cores, OK, ""))
        else:
            rows.append(Row(S, "SoC", label, WARN,
                            b.notes.get("soc", "") + "; the simulator will be used"))
    elif b.is_rockchip:
        rows.append(Row(S, "SoC", "not named in the device tree", WARN,
                        "compatible: " + ", ".join(b.compatible)))
    else:
        rows.append(Row(S, "SoC", "none", MISSING, ON_PC))
    rows.append(Row(S, "kernel", f"{b.kernel} ({b.machine})", OK, ""))
    mem = f"MemTotal {_gib(b.mem_total_kb)}"
    if b.cma_total_kb:
        mem += f", CmaTotal {b.cma_total_kb // 1024} MiB"
    rows.append(Row(S, "memory", mem, OK if b.mem_total_kb else WARN, ""))
    return rows


def _npu_rows(b: _board.BoardInfo) -> List[Row]:
    rows: List[Row] = []
    S = "npu"
    on_board = b.is_rockchip or b.rknpu_present or b.npu_driver is not None
    note = b.notes.get("npu_device", "")
    if b.npu_device:
        others = [n for n in b.npu_device_nodes if n != b.npu_device]
        value = b.npu_device + (f" (also {', '.join(others)})" if others else "") + f", driver {b.npu_driver}"
        if b.npu_device_access is False:
            rows.append(Row(S, "NPU device", value, WARN,
                            f"this user cannot open {b.npu_device}: add it to the group that owns it "
                            f"(ls -l {b.npu_device}; e.g. sudo usermod -aG render,video $USER, then log in "
                            "again) or run as root"))
        else:
            rows.append(Row(S, "NPU device", value, OK, note if note.startswith("guessed") else ""))
    elif not on_board:
        rows.append(Row(S, "NPU device", "none", MISSING, ON_PC))
        return rows
    elif b.npu_driver == "rocket":
        rows.append(Row(S, "NPU device", "none for librknnrt (mainline 'rocket' driver)", MISSING,
                        "boot a vendor (Rockchip BSP) kernel, e.g. the board maker's image; "
                        "librknnrt.so talks to the rknpu driver only"))
    else:
        rows.append(Row(S, "NPU device", "none", MISSING,
                        note if note and note != _board.MISSING else
                        "no rknpu driver: boot a vendor (Rockchip BSP) kernel image for the board "
                        "(the board maker's Debian/Ubuntu image has it)"))

    def unreadable(key: str, what: str, path: str) -> Row:
        why = b.notes.get(key, _board.MISSING)
        if why.startswith(_board.NEEDS_ROOT):
            return Row(S, what, _board.NEEDS_ROOT, WARN,
                       f"readable as root: sudo cat {path} (or run the doctor with sudo)")
        return Row(S, what, why, WARN, "this kernel does not publish it where we look; not needed "
                   "for the course")

    if b.driver_version:
        rows.append(Row(S, "rknpu driver", b.driver_version, OK, ""))
    else:
        rows.append(unreadable("driver_version", "rknpu driver", "/sys/kernel/debug/rknpu/version"))
    if b.npu_load:
        rows.append(Row(S, "NPU load", b.npu_load, OK, ""))
    else:
        rows.append(unreadable("npu_load", "NPU load", "/sys/kernel/debug/rknpu/load"))
    if b.npu_freq_hz:
        value = _mhz(b.npu_freq_hz) + (f" (max {_mhz(b.npu_max_freq_hz)})" if b.npu_max_freq_hz else "")
        rows.append(Row(S, "NPU frequency", value, OK, ""))
    else:
        rows.append(unreadable("npu_freq", "NPU frequency", "/sys/kernel/debug/rknpu/freq"))
    return rows


def _runtime_rows(b: _board.BoardInfo) -> List[Row]:
    rows: List[Row] = []
    S = "runtime"
    on_board = b.is_rockchip or b.rknpu_present
    if b.librknnrt_path:
        rows.append(Row(S, "librknnrt.so", b.librknnrt_path, OK, ""))
        ver = b.librknnrt_version_number
        if not b.librknnrt_version:
            rows.append(Row(S, "librknnrt version", "unknown", WARN,
                            "no version string in the file: is it really librknnrt.so? "
                            "Take 2.3.x from " + RUNTIME_SOURCE))
        elif ver and not ver.startswith("2."):
            rows.append(Row(S, "librknnrt version", b.librknnrt_version, WARN,
                            "the course is written against the RKNPU2 runtime 2.3.x: take it from "
                            + RUNTIME_SOURCE))
        else:
            rows.append(Row(S, "librknnrt version", b.librknnrt_version, OK, ""))
        machine = (b.machine or "").lower()
        arch = b.librknnrt_arch
        if arch and machine in ("aarch64", "arm64", "x86_64", "amd64") and \
                arch != {"arm64": "aarch64", "amd64": "x86_64"}.get(machine, machine):
            rows.append(Row(S, "librknnrt arch", arch, WARN,
                            f"built for {arch} but this machine is {b.machine}: it will not load here"
                            + ("; take the aarch64 build" if machine in ("aarch64", "arm64") else "")))
    elif on_board:
        why = b.notes.get("librknnrt", "")
        rows.append(Row(S, "librknnrt.so", "not found", MISSING,
                        "copy librknnrt.so 2.3.x to /usr/lib (sudo cp librknnrt.so /usr/lib/), from "
                        + RUNTIME_SOURCE + f"; or set {_board.ENV_LIBRKNNRT}"
                        + (f" [{why}]" if why.startswith(_board.ENV_LIBRKNNRT) else "")))
    else:
        rows.append(Row(S, "librknnrt.so", "not found", MISSING, ON_PC))

    machine = (b.machine or "").lower()
    if b.toolkit_lite2_version:
        rows.append(Row(S, "rknn-toolkit-lite2", b.toolkit_lite2_version, OK, ""))
    elif machine in ("aarch64", "arm64", "armv7l", "armv8l"):
        rows.append(Row(S, "rknn-toolkit-lite2", "not installed", WARN if on_board else MISSING,
                        "pip install rknn-toolkit-lite2 (aarch64 wheels on PyPI; needs librknnrt.so too)"))
    else:
        rows.append(Row(S, "rknn-toolkit-lite2", "not installed", MISSING,
                        f"ARM only (no {b.machine} wheels); rknnlab.lite.RKNNLite simulates it"))
    return rows


def _python_rows() -> List[Row]:
    S = "python"
    rows = []
    v = sys.version_info
    rows.append(Row(S, "Python", f"{platform.python_version()} ({sys.executable})",
                    OK if v >= (3, 9) else WARN, "" if v >= (3, 9) else "rknnlab needs Python 3.9 or newer"))
    here = os.path.dirname(os.path.abspath(__file__))
    rows.append(Row(S, "rknnlab", f"{__version__} ({here})", OK, ""))
    for name, extra in KEY_PACKAGES:
        ver = _pkg_version(name)
        if ver:
            rows.append(Row(S, name, ver, OK, ""))
        elif not extra:
            rows.append(Row(S, name, "not installed", MISSING, "pip install -e . (in the repository)"))
        elif extra == "sim":
            rows.append(Row(S, name, "not installed", MISSING,
                            "pip install -e '.[sim]': the simulator computes output values with it"))
        else:
            rows.append(Row(S, name, "not installed", WARN,
                            f"pip install -e '.[{extra}]' for the notebooks (or: make lab)"))
    return rows


def _sampler_row(env: Mapping[str, str]) -> Row:
    """Which memory sampler rknnlab.run will use: the C one (built on first use
    with the system's C compiler) or its Python fallback, which costs more
    CPU (it reads /proc and glibc through the interpreter, and its thread
    takes the GIL)."""
    from . import probe
    forced = (env.get("RKNNLAB_SAMPLER") or "").lower()
    if forced == "python":
        return Row("python", "memory sampler", "Python (RKNNLAB_SAMPLER=python)", OK,
                   "unset RKNNLAB_SAMPLER for the cheaper C sampler")
    lib, why = probe.load_sampler()
    if lib is not None:
        return Row("python", "memory sampler", f"C ({lib._name})", OK, "")
    return Row("python", "memory sampler", f"Python: {why}", WARN,
               "install a C compiler (sudo apt install gcc) for the C sampler: the Python one "
               "costs about 1.5-2x the CPU at 200 Hz (benchmarks/bench_harness.py)")


def _c_programs_row(b: _board.BoardInfo, env: Mapping[str, str]) -> Row:
    """What `python -m rknnlab cc` and %%rknn_c link C programs with: the board's
    librknnrt.so, or the simulator's (built on first use: it needs a C compiler and
    a Python with a shared libpython, which it embeds)."""
    import sysconfig

    from .probe import _compiler
    item = "C programs"
    if _compiler() is None:
        return Row("python", item, "no C compiler", WARN, "sudo apt install gcc")
    try:
        native = _board.choose_backend("auto", b, env=env)[0] == "native"
    except (ValueError, _board.BackendUnavailableError):
        native = False
    if native:
        return Row("python", item, f"linked with {b.librknnrt_path}", OK, "")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return Row("python", item, "no shared libpython", WARN,
                   "the simulator's librknnrt.so embeds Python: use a Python built with "
                   "--enable-shared (Debian's python3 with libpython3-dev; pyenv: "
                   "PYTHON_CONFIGURE_OPTS=--enable-shared)")
    return Row("python", item, "the simulator's librknnrt.so (built on first use)", OK, "")


def _backend_rows(b: _board.BoardInfo, env: Mapping[str, str]) -> List[Row]:
    S = "backend"
    rows = []
    forced = env.get(_board.ENV_BACKEND)
    try:
        name, reason = _board.choose_backend("auto", b, env=env)
    except (ValueError, _board.BackendUnavailableError) as e:
        rows.append(Row(S, "auto picks", "error", WARN, str(e)))
        return rows
    advice = ""
    if name == "sim" and (b.is_rockchip or b.rknpu_present) and not forced:
        advice = "fix what is missing above to drive the real NPU"
    elif forced:
        advice = f"set by {_board.ENV_BACKEND}={forced}; unset it to let rknnlab decide"
    rows.append(Row(S, "auto picks", f"{name}: {reason}", OK, advice))
    return rows


def _toolkit_versions(d: Path, socs: List[str]) -> List[str]:
    """The rknn-toolkit2 versions that compiled ``socs``' models in directory ``d``: what each
    .rknn names (its head holds the string), else what its report records."""
    found = set()
    for s in socs:
        version = None
        try:
            with open(d / f"{s}.rknn", "rb") as f:
                version = _models.rknn_toolkit_version(f.read(1 << 16))
        except OSError:
            pass
        if version is None:
            try:
                version = json.loads((d / f"{s}.report.json").read_text()).get("toolkit_version")
            except (OSError, ValueError, AttributeError):
                version = None
        if version:
            found.add(version)
    return sorted(found, key=_models.version_tuple)


def _model_rows(b: _board.BoardInfo, native: bool) -> List[Row]:
    """One row per model directory: its SoCs, its ONNX twin, the toolkit that compiled it
    and, on a board whose librknnrt version is readable, whether that runtime is new enough."""
    S = "models"
    try:
        mdir = paths.models_dir()
    except paths.DataNotFoundError as e:
        return [Row(S, "data/models", "not found", MISSING, str(e))]
    rows = [Row(S, "data/models", str(mdir), OK, "")]
    soc = b.soc
    board_soc = _models.SOC_MODELS.get(soc, soc) if soc else None
    runtime = b.librknnrt_version if b.librknnrt_path else None
    found = False
    newest: List[str] = []     # each model's newest toolkit
    too_new: List[str] = []    # those newer than the board's librknnrt
    for d in sorted(p for p in mdir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        names = [f.name for f in d.iterdir() if f.is_file()]
        socs = sorted({n[:-len(".rknn")] for n in names if n.endswith(".rknn")})
        reports = {n[:-len(".report.json")] for n in names if n.endswith(".report.json")}
        has_onnx = any(n.endswith(".onnx") for n in names)
        if not (socs or reports or has_onnx):
            continue
        found = True
        parts = []
        for s in sorted(set(socs) | reports):
            kinds = [k for k, ok in (("rknn", s in socs), ("report", s in reports)) if ok]
            parts.append(s if len(kinds) == 2 else f"{s} ({kinds[0]} only)")
        value = ", ".join(parts) or "no SoC files"
        value += "; ONNX twin" if has_onnx else "; no ONNX twin"
        status, advice = OK, []
        if native and soc and soc not in socs and board_soc not in socs:
            status, advice = WARN, [f"no {soc}.rknn: the native backend cannot run this model here"]
        # on a board, only the file it would load counts; elsewhere every SoC's
        mine = [board_soc] if b.librknnrt_path and board_soc in socs else sorted(set(socs) | reports)
        versions = _toolkit_versions(d, mine)
        if versions:
            value += "; rknn-toolkit2 " + " / ".join(versions)
            newest.append(versions[-1])
            if runtime and b.librknnrt_version_number:
                verdict = _models.check_runtime(versions[-1], runtime)
                if verdict.status == "runtime older":
                    value += f" (newer than librknnrt {verdict.runtime_version})"
                    status = WARN
                    advice.append(f"upgrade librknnrt.so to {versions[-1]} or newer, or rebuild the model with "
                                  f"rknn-toolkit2 {verdict.runtime_version} or older: see 'toolkit vs runtime'")
                    too_new.append(versions[-1])
                else:
                    value += f" (librknnrt {verdict.runtime_version}: ok)"
        elif socs or reports:
            value += "; toolkit version not recorded"
        rows.append(Row(S, d.name, value, status, "; ".join(advice)))
    if not found:
        rows.append(Row(S, "models", "none yet", WARN, f"{mdir} holds no model directories"))
    elif b.librknnrt_path and newest and (too_new or not b.librknnrt_version_number):
        # one row with the whole advice, for the newest toolkit among the models
        verdict = _models.check_runtime(max(too_new or newest, key=_models.version_tuple), b.librknnrt_version)
        rows.append(Row(S, "toolkit vs runtime", verdict.message, WARN,
                        verdict.advice.replace("strings librknnrt.so", f"strings {b.librknnrt_path}")))
    return rows


def doctor_report(board: Optional[_board.BoardInfo] = None,
                  env: Optional[Mapping[str, str]] = None) -> List[Row]:
    """Everything the doctor checks, as rows (section, item, value, status, advice)."""
    env = os.environ if env is None else env
    b = board if board is not None else _board.read_board(env=env)
    rows: List[Row] = []
    rows += _board_rows(b)
    rows += _npu_rows(b)
    rows += _runtime_rows(b)
    rows += _python_rows()
    rows.append(_sampler_row(env))
    rows.append(_c_programs_row(b, env))
    rows += _backend_rows(b, env)
    try:
        native = _board.choose_backend("auto", b, env=env)[0] == "native"
    except Exception:
        native = False
    rows += _model_rows(b, native)
    return rows


def format_doctor(rows: List[Row], width: int = 100) -> str:
    """The rows as aligned plain text, grouped by section."""
    iw = max([len(r.item) for r in rows] + [4])
    sw = max(len(s) for s in (OK, WARN, MISSING))
    indent = " " * (2 + sw + 2 + iw + 2)
    out = [f"rknnlab doctor (rknnlab {__version__})"]
    section = None
    for r in rows:
        if r.section != section:
            section = r.section
            out.append(f"[{section}]")
        head = f"  {r.status:<{sw}}  {r.item:<{iw}}  "
        out.append(textwrap.fill(r.value, width=max(width, len(head) + 20), initial_indent=head,
                                 subsequent_indent=indent, break_on_hyphens=False,
                                 break_long_words=False))
        if r.advice:
            out.append(textwrap.fill("-> " + r.advice, width=max(width, len(indent) + 20),
                                     initial_indent=indent, subsequent_indent=indent + "   ",
                                     break_on_hyphens=False, break_long_words=False))
    return "\n".join(out)


def print_doctor(file: Optional[IO[str]] = None, rows: Optional[List[Row]] = None) -> List[Row]:
    """Print the doctor's report (to stdout by default) and return its rows."""
    rows = doctor_report() if rows is None else rows
    print(format_doctor(rows), file=file if file is not None else sys.stdout)
    return rows
