"""``rknnlab.run``: each variant in its own fresh process, one after another.

Why a child process per variant, started as ``python -m rknnlab.experiment._child``
(not multiprocessing): every variant starts from the same clean memory
baseline; a variant that crashes (even with a segfault inside the runtime)
kills only its own process, and the result says so; "fork" of a Jupyter
kernel that runs threads is unsafe, and "spawn" cannot import a function
defined in a notebook cell.  So the variant travels as data: a built-in's
name, an importable module + qualname, or its source code (with the plain
values, modules and functions it refers to).  Everything crosses as JSON;
nothing is pickled.

Why the sampler runs in the child: glibc's mallinfo2 and the runtime's DMA
total can only be read from inside the process; the /proc files are read
with pread on descriptors kept open.  The instrumented runtime polls the
sampler after every call (a sample when one is due: at most one per 5 ms
slot), and a C thread that never takes the GIL fills the slots the polls
leave empty, e.g. during a call that blocks (rknnlab.probe; the same in
Python where no C compiler is found: the result's ``probe["backend"]``
says which, ``probe["poll_rows"]`` how many rows the polls took).  See benchmarks/bench_harness.py for the measured cost.

Why the child streams its recording out: every call, iteration and sample
recorded inside the measured process would be growth of that process.  The
child keeps them in fixed ring buffers and sends what is new a few times a
second (rknnlab.experiment._child), so the recording adds a few bytes per
iteration (0.1 to 13 on the heap in flat 10,000-iteration runs, where it
added over 200 before; benchmarks/bench_floor.py measures it); the parent
collects the columns.  The progress bar reads the iteration the child is at
from a 16-byte shared file mapping (rknnlab.experiment.progress).
"""
from __future__ import annotations

import ast
import builtins
import inspect
import json
import mmap
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import __version__
from .. import run as _public_run
from . import variants as _variants
from .progress import RunProgress, choose as _choose_progress
from .result import Result, VariantRun

VariantLike = Union[str, Callable[..., Any], Sequence[Any]]

_LIB_DIR = str(Path(__file__).resolve().parents[2])


class RunError(RuntimeError):
    """The run could not start (bad arguments, unknown model or variant)."""


# --------------------------------------------------------------------------- variants -> specs
def expand_variants(variants: Union[VariantLike, Iterable[VariantLike]]) -> List[Callable[..., Any]]:
    """Names ("prealloc_output", "want_float_vs_int8"), functions, and tuples/lists of them."""
    if isinstance(variants, str) or callable(variants):
        variants = [variants]
    out: List[Callable[..., Any]] = []
    for v in variants:
        if isinstance(v, str):
            if v in _variants.GROUPS:
                out.extend(_variants.GROUPS[v])
            elif v in _variants.BUILTIN:
                out.append(_variants.BUILTIN[v])
            else:
                raise RunError(f"no built-in variant named {v!r}; built in: "
                               + ", ".join(list(_variants.BUILTIN) + list(_variants.GROUPS)))
        elif isinstance(v, (tuple, list)):
            out.extend(expand_variants(v))
        elif callable(v):
            out.append(v)
        else:
            raise RunError(f"a variant is a function or a built-in's name, not {type(v).__name__}")
    if not out:
        raise RunError("no variants to run")
    names = [f.__name__ for f in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RunError(f"two variants share the name {', '.join(dup)}: give them different names")
    return out


def _names_used(func: Callable[..., Any]) -> List[str]:
    names: List[str] = []
    stack = [func.__code__]
    while stack:
        code = stack.pop()
        names.extend(code.co_names)
        names.extend(code.co_freevars)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return list(dict.fromkeys(names))


def _source(func: Callable[..., Any]) -> str:
    source = textwrap.dedent(inspect.getsource(func))
    tree = ast.parse(source)
    node = tree.body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
        node.decorator_list = []  # decorators may not exist in the child
        source = ast.unparse(tree) if hasattr(ast, "unparse") else source
    return source


def _importable(obj: Any) -> Optional[Tuple[str, str]]:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    return module, qualname


def variant_spec(func: Callable[..., Any]) -> Dict[str, Any]:
    """How the child gets ``func``: as a built-in, by import, or as source."""
    name = func.__name__
    if _variants.BUILTIN.get(name) is func:
        return {"kind": "builtin", "name": name}
    where = _importable(func)
    if where and where[0].startswith("rknnlab."):
        return {"kind": "import", "name": name, "module": where[0], "qualname": where[1]}
    try:
        source = _source(func)
    except (OSError, TypeError, SyntaxError):
        if where:
            return {"kind": "import", "name": name, "module": where[0], "qualname": where[1]}
        raise RunError(f"cannot find the source of variant {name!r} (defined with exec or in the "
                       "console?): define it in a notebook cell or a .py file") from None
    spec: Dict[str, Any] = {"kind": "source", "name": name, "source": source,
                            "globals": {}, "imports": {}, "functions": {}}
    _collect_globals(func, spec, seen={name})
    return spec


def _collect_globals(func: Callable[..., Any], spec: Dict[str, Any], seen: set) -> None:
    g = getattr(func, "__globals__", {})
    closure = dict(zip(func.__code__.co_freevars,
                       (c.cell_contents for c in (func.__closure__ or ()))))
    for name in _names_used(func):
        if name in seen:
            continue
        if name in closure:
            value = closure[name]
        elif name in g:
            value = g[name]
        else:
            continue  # a builtin, an attribute name, or undefined
        if hasattr(builtins, name) and getattr(builtins, name) is value:
            continue
        seen.add(name)
        if isinstance(value, types.ModuleType):
            spec["imports"][name] = [value.__name__, None]
        elif isinstance(value, (bool, int, float, str, type(None))) or _json_ok(value):
            spec["globals"][name] = value
        elif isinstance(value, types.FunctionType):
            where = _importable(value)
            if where and "." not in where[1]:
                spec["imports"][name] = [where[0], where[1]]
                continue
            try:
                spec["functions"][name] = _source(value)
            except (OSError, TypeError, SyntaxError):
                continue
            if value.__name__ != name:   # reached under another name (alias = f, a closure variable)
                spec.setdefault("aliases", {})[name] = value.__name__
            _collect_globals(value, spec, seen)
        else:
            where = _importable(value)
            if where and "." not in where[1]:
                spec["imports"][name] = [where[0], where[1]]


def _json_ok(value: Any) -> bool:
    if not isinstance(value, (list, dict, tuple)):
        return False
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------- model
def resolve_model(model: Union[str, os.PathLike], soc: str) -> Dict[str, Any]:
    """{name, soc, path, sha256, report_sha256, input_shape} for a course model name or a .rknn path."""
    from .. import models
    import hashlib
    p = Path(os.fspath(model))
    if p.suffix == ".rknn" or p.exists():
        if not p.exists():
            raise RunError(f"no model file {p}")
        data = p.read_bytes()
        report = models.report_for_model_bytes(data)
        info = {"name": report.model if report else p.stem, "soc": report.target if report else soc,
                "path": str(p.resolve()), "sha256": hashlib.sha256(data).hexdigest()}
    else:
        try:
            report = models.load_report(str(model), soc)
        except models.ReportError as exc:
            raise RunError(str(exc)) from None
        info = {"name": report.model, "soc": report.target, "path": str(report.rknn_path),
                "sha256": report.rknn_sha256}
    if report is None:
        raise RunError(f"{p} is not a course model: no compiler report to take the input shape from")
    report_file = report.directory / f"{report.target}.report.json" if report.directory else None
    info["report_sha256"] = (hashlib.sha256(report_file.read_bytes()).hexdigest()
                             if report_file and report_file.exists() else None)
    attr = report.attrs("inputs")[0]
    dims = [int(d) for d in attr["dims"][:attr["n_dims"]]]
    if attr["fmt"] == "RKNN_TENSOR_NCHW" and len(dims) == 4:
        dims = [dims[0], dims[2], dims[3], dims[1]]
    info["input_shape"] = dims  # NHWC, what a camera frame looks like
    return info


def describe_source(backend: str, soc: str) -> Tuple[str, Dict[str, Any]]:
    """(the source line of figures, e.g. "simulated RK3588 — rknnlab sim" or the
    board's name (rknnlab.board.source_label), the board facts for a trace)."""
    from .. import board
    if backend == "native":
        b = board.read_board()
        return board.source_label("native", soc, b), {
            "model": b.model, "soc": b.soc, "soc_variant": b.soc_variant, "kernel": b.kernel,
            "driver_version": b.driver_version, "librknnrt_version": b.librknnrt_version,
            "toolkit_lite2_version": b.toolkit_lite2_version}
    if backend == "sim":
        return board.source_label("sim", soc), {"model": None, "soc": soc, "simulated": True}
    return f"{backend} backend ({soc.upper()})", {"model": None, "soc": soc, "simulated": True}


# --------------------------------------------------------------------------- one child
ProgressFn = Callable[[Dict[str, Any]], None]


def _iterations_done(marker: Any) -> int:
    """Iterations finished, from the child's (iteration started + 1, finished) pair."""
    started, done = struct.unpack_from("qq", marker, 0)
    return max(0, started - 1 + done)


def run_one(func: Callable[..., Any], base_spec: Dict[str, Any], timeout: Optional[float] = None,
            on_progress: Optional[ProgressFn] = None, bar: Optional[RunProgress] = None) -> VariantRun:
    name = func.__name__
    doc = inspect.getdoc(func) or ""
    try:
        vspec = variant_spec(func)
    except RunError as exc:
        return VariantRun(name=name, status="error", error=str(exc), doc=doc)
    read_fd, write_fd = os.pipe()
    marker = tempfile.NamedTemporaryFile(prefix="rknnlab-progress-", delete=False)
    marker.write(bytes(16))
    marker.close()
    spec = dict(base_spec, variant=vspec, fd=write_fd, progress_file=marker.name)
    env = dict(os.environ)
    paths = [_LIB_DIR] + [p for p in sys.path if p and os.path.isdir(p) and p != _LIB_DIR]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONFAULTHANDLER", "1")
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    stream: Dict[str, Dict[str, list]] = {"samples": {}, "iterations": {}, "calls": {}}
    final: Dict[str, Any] = {}
    t_start = time.perf_counter()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "rknnlab.experiment._child"],
                                stdin=subprocess.PIPE, stdout=out_f, stderr=err_f,
                                pass_fds=(write_fd,), env=env, close_fds=True)
    except BaseException:
        os.close(read_fd)
        os.unlink(marker.name)
        raise
    finally:
        os.close(write_fd)

    def reader() -> None:
        with os.fdopen(read_fd, "r") as f:
            for line in f:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("event") == "progress":
                    for key in ("samples", "iterations", "calls"):
                        for col, vals in (msg.get(key) or {}).items():
                            stream[key].setdefault(col, []).extend(vals)
                    if on_progress is not None:
                        try:
                            on_progress(dict(msg, variant=name))
                        except Exception:
                            pass
                elif msg.get("event") == "result":
                    final.update(msg)

    t = threading.Thread(target=reader, name=f"rknnlab-read-{name}", daemon=True)
    t.start()
    timed_out = False
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    deadline = None if timeout is None else time.perf_counter() + timeout
    shared = None
    if bar is not None and bar.mode is not None:
        try:
            with open(marker.name, "rb") as f:
                shared = mmap.mmap(f.fileno(), 16, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            shared = None
    try:
        while True:  # wait, reading the child's iteration for the bar ten times a second
            step = 0.1 if deadline is None else min(0.1, max(0.0, deadline - time.perf_counter()))
            try:
                proc.wait(timeout=step)
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.perf_counter() >= deadline:
                    timed_out = True
                    proc.kill()
                    proc.wait()
                    break
                if shared is not None:
                    bar.at(_iterations_done(shared))
    except BaseException:  # KeyboardInterrupt in the notebook: do not leave the child running
        proc.kill()
        proc.wait()
        raise
    finally:
        if shared is not None:
            shared.close()
    t.join(timeout=10)
    wall = time.perf_counter() - t_start
    out_f.seek(0)
    err_f.seek(0)
    stdout = out_f.read().decode("utf-8", "replace")
    stderr = err_f.read().decode("utf-8", "replace")
    out_f.close()
    err_f.close()
    try:
        with open(marker.name, "rb") as f:
            started, done = struct.unpack("qq", f.read(16))
        os.unlink(marker.name)
    except (OSError, struct.error):
        started, done = 0, 0

    run = VariantRun(name=name, doc=doc, returncode=proc.returncode, wall_s=wall,
                     stdout=_tail(stdout), stderr=_tail(stderr),
                     source=vspec.get("source") or f"{vspec.get('module', 'rknnlab.experiment.variants')}.{name}",
                     samples=stream["samples"], iterations=stream["iterations"],
                     calls=stream["calls"])
    if final:
        run.status = final.get("status", "error")
        run.error = final.get("error")
        run.traceback = final.get("traceback")
        run.sdk = final.get("sdk") or {}
        run.rknnlite = final.get("rknnlite")
        run.probe = final.get("probe")
        run.backend = final.get("backend")
        run.wall_s = (final.get("wall_ns") or 0) / 1e9 or wall
    if timed_out:
        run.status = "timeout"
        run.error = f"the variant did not finish within {timeout:g} s and was killed"
    elif proc.returncode and proc.returncode < 0:
        sig = -proc.returncode
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = f"signal {sig}"
        what = {"SIGSEGV": "segmentation fault: memory access outside what the process owns",
                "SIGABRT": "abort (e.g. glibc found the heap corrupted: double free, overflow)",
                "SIGKILL": "killed (the kernel's out-of-memory killer, or a kill -9)",
                "SIGBUS": "bus error (e.g. a mapped buffer past its end)",
                "SIGFPE": "arithmetic error"}.get(signame, "killed by a signal")
        if started == 0:
            where = " before its first iteration"
        elif done:
            where = f" after iteration {started - 1}"
        else:
            where = f" during iteration {started - 1}"
        run.status = "crashed"
        run.error = f"the variant's process died with {signame} ({what}){where}; the notebook is fine"
    elif not final:
        run.status = "crashed"
        run.error = (f"the variant's process exited with code {proc.returncode} without a result"
                     + (": " + stderr.strip().splitlines()[-1] if stderr.strip() else ""))
    return run


def _tail(text: str, limit: int = 20000) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


# --------------------------------------------------------------------------- run
def run(variants: Union[VariantLike, Iterable[VariantLike]], model: str = "mobilenet_v2",
        iterations: int = 200, backend: str = "auto", sample_hz: float = 200.0,
        warmup: int = 10, soc: Optional[str] = None, seed: int = 0, n_frames: int = 4,
        params: Optional[Dict[str, Any]] = None, timeout: Optional[float] = 300.0,
        on_progress: Optional[ProgressFn] = None, trim_after_warmup: bool = True,
        progress: Optional[bool] = None, sample_calls: bool = False) -> Result:
    from ..probe import MAX_HZ
    funcs = expand_variants(variants)
    if iterations < 1 or warmup < 0:
        raise RunError("iterations must be at least 1 and warmup at least 0")
    if sample_hz and not 0 < sample_hz <= MAX_HZ:
        raise RunError(f"sample_hz={sample_hz}: expected 0 (off) or up to {MAX_HZ:g}")
    if sample_calls and not sample_hz:
        raise RunError("sample_calls=True needs the memory sampler: give sample_hz > 0")
    if ":" in backend:
        chosen, why = backend, "a runtime factory given by name"
    else:
        from .. import board
        try:
            chosen, why = board.choose_backend(backend)
        except (ValueError, board.BackendUnavailableError) as exc:
            raise RunError(str(exc)) from None
    if soc is None:
        # the SoC the simulator plays unless told: $RKNNLAB_SIM_SOC, as rknnlab.open_runtime("sim")
        from .. import ENV_SIM_SOC
        soc = os.environ.get(ENV_SIM_SOC) or "rk3588"
        if chosen == "native":
            from .. import board
            soc = board.read_board().soc or soc
    minfo = resolve_model(model, soc)
    source, board_info = describe_source(chosen if ":" not in chosen else "sim", minfo["soc"])
    if ":" in chosen:
        source = f"simulated {minfo['soc'].upper()} — {chosen}"
    parameters = {"iterations": int(iterations), "warmup": int(warmup), "sample_hz": float(sample_hz),
                  "seed": int(seed), "n_frames": int(n_frames), "input_shape": minfo["input_shape"],
                  "params": params or {}, "timeout_s": timeout,
                  "trim_after_warmup": bool(trim_after_warmup), "sample_calls": bool(sample_calls)}
    base = {"backend": chosen, "model_path": minfo["path"], "model": minfo["name"], "soc": minfo["soc"],
            "iterations": int(iterations), "warmup": int(warmup), "seed": int(seed),
            "n_frames": int(n_frames), "input_shape": minfo["input_shape"],
            "sample_hz": float(sample_hz), "params": params or {},
            "trim_after_warmup": bool(trim_after_warmup), "sample_calls": bool(sample_calls)}
    bar = RunProgress(_choose_progress(progress, follows_itself=on_progress is not None),
                      len(funcs), int(warmup) + int(iterations))
    runs = []
    try:
        for k, f in enumerate(funcs):
            bar.variant(k, f.__name__)
            runs.append(run_one(f, base, timeout=timeout, on_progress=on_progress, bar=bar))
            bar.variant_done()
    finally:
        bar.close()
    sdk = next((r.sdk for r in runs if r.sdk and "api_version" in r.sdk), {})
    meta = {
        "backend": chosen, "backend_reason": why, "source": source, "board": board_info,
        "runtime_versions": sdk, "model": {k: minfo[k] for k in ("name", "soc", "path", "sha256", "report_sha256")},
        "rknnlab_version": __version__,
        "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                 "machine": platform.machine(), "python": platform.python_version(),
                 "cpu_count": os.cpu_count()},
        "parameters": parameters,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return Result(meta, runs)


run.__doc__ = _public_run.__doc__  # one text, shown by help(rknnlab.run) and help() of this
