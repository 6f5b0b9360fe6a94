"""The machinery every lab's checks share.  A lab module (``lab04.py``) uses it so:

.. code-block:: python

    from ._core import CheckResult, Lab, _Fail, _not_done, _student_error

    _LAB = Lab("Lab 4", ["Exercise 1 — ...", "Exercise 2 — ..."])

    def check_thing(student_function) -> CheckResult:
        def body() -> CheckResult:
            if not callable(student_function):
                raise _not_done("expected your function, ...", "hint")
            try:
                answer = student_function(...)            # the student's code
            except Exception as exc:
                raise _student_error(exc, "student_function(...)", "hint")
            ...                                           # measure; raise _Fail(message, hint,
            return CheckResult(EX1, "passed", "...", details)   # details) when it is wrong
        return _LAB.run(EX1, body)

    summary = _LAB.summary          # the notebook's last cell: checks.summary()
    results = _LAB.results
    _LAB.seal(globals(), ["check_thing", ...])   # at the end of the module

A notebook imports one lab module: ``from rknnlab.checks import lab04 as checks``.

Rules the machinery enforces:

- A check never raises (``Lab.run``): a stub raising NotImplementedError or returning None
  gives "not done yet", an error in the student's code is reported with its line, the
  check's own failure is reported without a traceback.
- The summary cannot be forged from the notebook: ``Lab.run`` keeps a frozen copy of each
  result in a store only this module's closures reach (no module attribute holds it);
  ``results()`` returns copies; a result built by hand or returned by a replaced check
  never reaches the store; and :meth:`Lab.summary` says so when a sealed check function
  has been reassigned in the lab module.
- Helpers for measuring: :class:`_Spy` (a runtime that records every call the checks look
  at), :func:`_recorded_run` (a variant run by ``rknnlab.run`` in its own process through
  :func:`recording_runtime`, with the records returned), :func:`_reference_output`.
"""
from __future__ import annotations

import ctypes
import html
import os
import re
import threading
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])   # rknnlab/: frames there are not the student's


# =========================================================================== results
@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    ``status`` is "passed", "failed" or "not done"; ``message`` says what is
    right or wrong, ``details`` are the measurements behind it, ``hint`` how
    to fix it.  ``bool(result)`` is ``result.passed``.  Frozen: the summary
    keeps its own copy anyway.
    """
    exercise: str
    status: str
    message: str
    details: Sequence[str] = field(default_factory=tuple)
    hint: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", tuple(self.details))

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def headline(self) -> str:
        if self.passed:
            return f"PASSED  {self.exercise}"
        if self.status == "not done":
            return f"NOT PASSED  {self.exercise}: not done yet"
        return f"NOT PASSED  {self.exercise}"

    def __repr__(self) -> str:
        lines = [self.headline, f"  {self.message}"]
        lines += [f"  - {d}" for d in self.details]
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        colour = {"passed": ("#1b7f3b", "#e9f7ee"), "not done": ("#9a6700", "#fff8e1")}.get(
            self.status, ("#b42318", "#fdecea"))
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        hint = (f'<p style="margin:0.4em 0 0 0"><strong>Hint:</strong> {html.escape(self.hint)}</p>'
                if self.hint else "")
        return (f'<div class="rknnlab-check rknnlab-check-{self.status.replace(" ", "-")}" '
                f'style="border-left:6px solid {colour[0]};background:{colour[1]};'
                f'padding:0.6em 0.9em;margin:0.3em 0;border-radius:4px">'
                f'<p style="margin:0;color:{colour[0]}"><strong>{html.escape(self.headline)}</strong></p>'
                f'<p style="margin:0.4em 0 0 0">{html.escape(self.message)}</p>'
                + (f'<ul style="margin:0.3em 0 0 0">{items}</ul>' if items else "")
                + hint + "</div>")


class Summary:
    """What a lab's ``summary()`` returns: one line per exercise, and a warning for every
    check function that was replaced in this session (its results do not count)."""

    def __init__(self, title: str, items: Dict[str, Optional[CheckResult]], replaced: Sequence[str] = ()) -> None:
        self.title = title
        self.items = items
        self.replaced = list(replaced)

    @property
    def passed(self) -> int:
        return sum(bool(r and r.passed) for r in self.items.values())

    def _status(self, r: Optional[CheckResult]) -> Tuple[str, str]:
        if r is None:
            return "NOT RUN", "not run yet"
        return ("PASSED" if r.passed else "NOT PASSED"), r.status

    def __repr__(self) -> str:
        lines = [f"{self.title}: {self.passed} of {len(self.items)} checks passed"]
        lines += [f"  {self._status(r)[0]:<10}  {name}" for name, r in self.items.items()]
        lines += [f"  WARNING: checks.{n} was replaced in this session; a replaced check proves nothing "
                  "(restart the kernel and run the notebook as it is)." for n in self.replaced]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f'<tr><td style="color:{"#1b7f3b" if r and r.passed else "#b42318"}"><strong>'
            f'{self._status(r)[0]}</strong></td><td>{html.escape(name)}</td>'
            f'<td>{html.escape(self._status(r)[1])}</td></tr>' for name, r in self.items.items())
        warn = "".join(f'<p style="color:#b42318"><strong>WARNING:</strong> checks.{html.escape(n)} was '
                       "replaced in this session; a replaced check proves nothing (restart the kernel and "
                       "run the notebook as it is).</p>" for n in self.replaced)
        return (f"<p><strong>{html.escape(self.title)}: {self.passed} of {len(self.items)} checks passed"
                f"</strong></p><table><tr><th>result</th><th>exercise</th><th>status</th></tr>{rows}</table>"
                + warn)


def _make_store() -> Tuple[Callable[[str, CheckResult], None], Callable[[str], Dict[str, CheckResult]],
                           Callable[[str, Dict[str, Any]], None], Callable[[str], Dict[str, Any]]]:
    """The results and the sealed check functions, reachable only through these closures
    (no module attribute holds them, so a notebook cell cannot edit them by name)."""
    results: Dict[str, Dict[str, CheckResult]] = {}
    sealed: Dict[str, Dict[str, Any]] = {}

    def record(lab: str, result: CheckResult) -> None:
        results.setdefault(lab, {})[result.exercise] = replace(result)

    def read(lab: str) -> Dict[str, CheckResult]:
        return {k: replace(v) for k, v in results.get(lab, {}).items()}

    def seal(lab: str, functions: Dict[str, Any]) -> None:
        sealed.setdefault(lab, dict(functions))

    def originals(lab: str) -> Dict[str, Any]:
        return dict(sealed.get(lab, {}))

    return record, read, seal, originals


_record, _read, _seal, _originals = _make_store()


class Lab:
    """One lab's checks: runs them (:meth:`run`) and summarises them (:meth:`summary`)."""

    def __init__(self, title: str, exercises: Sequence[str]) -> None:
        self.title = title
        self.exercises = list(exercises)
        self._module: Dict[str, Any] = {}

    def run(self, exercise: str, body: Callable[[], CheckResult]) -> CheckResult:
        """Run a check's body; never raises; records the result for :meth:`summary`."""
        result = _run_check(exercise, body)
        _record(self.title, result)
        return result

    def results(self) -> Dict[str, CheckResult]:
        """The latest result of every check of this lab run in this session (copies)."""
        return _read(self.title)

    def summary(self) -> Summary:
        """Every exercise of the lab, passed or not (or not run yet), from the results the
        check functions recorded themselves."""
        got = _read(self.title)
        replaced = [name for name, f in _originals(self.title).items() if self._module.get(name) is not f]
        if replaced:   # a replaced check may have recorded nothing, but the notebook's run is suspect
            got = {k: v for k, v in got.items() if v.exercise not in replaced}
        return Summary(self.title, {ex: got.get(ex) for ex in self.exercises}, replaced)

    def seal(self, module_globals: Dict[str, Any], names: Sequence[str]) -> None:
        """Remember the lab module's check functions: :meth:`summary` warns when one is replaced."""
        self._module = module_globals
        _seal(self.title, {n: module_globals[n] for n in names})


class _Fail(Exception):
    """Raised inside a check to stop with a failure (never leaves the package)."""

    def __init__(self, message: str, hint: str = "", details: Sequence[str] = (),
                 status: str = "failed") -> None:
        super().__init__(message)
        self.message, self.hint, self.details, self.status = message, hint, list(details), status


def _not_done(what: str, hint: str) -> _Fail:
    return _Fail(what, hint, status="not done")


def _where(exc: BaseException) -> str:
    """' (in my_variant, line 7: rt.outputs_get(ctx, outs))' for the innermost frame outside rknnlab."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_PACKAGE_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    line = f" `{f.line.strip()}`" if f.line else ""
    return f" (in {f.name}, line {f.lineno}:{line})"


def _student_error(exc: BaseException, what: str, hint: str) -> _Fail:
    """A _Fail for an exception raised by the student's code (NotImplementedError: not done)."""
    if isinstance(exc, NotImplementedError):
        text = str(exc) or "the stub raises NotImplementedError"
        return _not_done(f"{what} still raises NotImplementedError: {text.rstrip('.')}.", hint)
    return _Fail(f"{what} raised {type(exc).__name__}: {exc}{_where(exc)}", hint)


def _run_check(exercise: str, body: Callable[[], CheckResult]) -> CheckResult:
    try:
        result = body()
    except _Fail as f:
        result = CheckResult(exercise, f.status, f.message, f.details, f.hint)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the check's own failure: still no traceback in the notebook
        result = CheckResult(
            exercise, "failed",
            f"The check could not run: {type(exc).__name__}: {exc}{_where(exc)}",
            hint="If the message names your code, fix that; otherwise please report this to the "
                 "course's authors with the message above.")
    return result


# =========================================================================== helpers for measuring
def _soc_of(rt: Any) -> str:
    soc = getattr(rt, "soc", None)
    if not soc:
        from .. import board
        soc = board.read_board().soc or "rk3588"
    return {"rk3566": "rk3568"}.get(soc, soc)


def _model_file(name: str, soc: str) -> str:
    from .. import models
    return str(models.model_path(name, soc))


def _open_runtime() -> Any:
    from .. import open_runtime
    return open_runtime()


def _frames(model: str, soc: str, n: int = 4, seed: int = 0) -> List[np.ndarray]:
    """The seeded uint8 NHWC frames rknnlab.run gives a variant (same recipe as its child)."""
    from ..experiment.runner import resolve_model
    shape = tuple(resolve_model(model, soc)["input_shape"])
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=shape, dtype=np.uint8) for _ in range(n)]


def _out_bytes(attr: abi.rknn_tensor_attr, want_float: int) -> int:
    return int(attr.n_elems) * (4 if want_float else 1)


class _Spy:
    """A runtime that passes every call through and records what the checks look at:
    the contexts, the queries, each input set, and each rknn_outputs_get (per output:
    is_prealloc, want_float, buf before and after, size, a copy of the bytes, the thread)."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        # explicit attributes, not only __getattr__: the harness's InstrumentedRuntime wraps
        # the methods that dir() lists
        for name in dir(rt):
            if not name.startswith("_") and not hasattr(type(self), name) and callable(getattr(rt, name, None)):
                setattr(self, name, getattr(rt, name))
        self.contexts: List[int] = []
        self.queries: List[Tuple[int, int]] = []
        self.inputs: Dict[int, list] = {}
        self.gets: List[Dict[str, Any]] = []
        self.releases = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def init(self, *args: Any, **kwargs: Any) -> int:
        ctx = self._rt.init(*args, **kwargs)
        with self._lock:
            self.contexts.append(ctx)
        return ctx

    def dup_context(self, ctx: int) -> int:
        new = self._rt.dup_context(ctx)
        with self._lock:
            self.contexts.append(new)
        return new

    def destroy(self, ctx: int) -> int:
        ret = self._rt.destroy(ctx)
        with self._lock:
            if ctx in self.contexts:
                self.contexts.remove(ctx)
        return ret

    def query(self, ctx: int, cmd: int, info: Any = None) -> Any:
        with self._lock:
            self.queries.append((ctx, cmd))
        return self._rt.query(ctx, cmd, info)

    def inputs_set(self, ctx: int, inputs: Sequence[abi.rknn_input]) -> int:
        copies = []
        for i in inputs:
            data = ctypes.string_at(i.buf, i.size) if i.buf and i.size else b""
            copies.append((i.index, data, i.type, i.fmt, i.pass_through))
        ret = self._rt.inputs_set(ctx, inputs)
        with self._lock:
            self.inputs[ctx] = copies
        return ret

    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output], extend: Any = None) -> int:
        before = [(o.index, int(o.is_prealloc), int(o.want_float), o.buf or 0, int(o.size)) for o in outputs]
        ret = self._rt.outputs_get(ctx, outputs, extend)
        record = {"ctx": ctx, "thread": threading.get_ident(), "inputs": self.inputs.get(ctx),
                  "outputs": []}
        for (index, pre, wf, buf_before, size_before), o in zip(before, outputs):
            record["outputs"].append({
                "index": index, "is_prealloc": pre, "want_float": wf, "buf_before": buf_before,
                "buf": o.buf or 0, "size_given": size_before, "size": int(o.size),
                "data": ctypes.string_at(o.buf, o.size) if o.buf and o.size else b""})
        with self._lock:
            self.gets.append(record)
        return ret

    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        with self._lock:
            self.releases += 1
        return self._rt.outputs_release(ctx, outputs)

    def cleanup(self) -> None:
        """Destroy the contexts the student's code left behind."""
        for ctx in list(self.contexts):
            try:
                self._rt.destroy(ctx)
            except Exception:
                pass
        self.contexts.clear()


#: environment variable naming the file a :func:`recording_runtime` writes its records to
RECORD_ENV = "RKNNLAB_CHECKS_RECORD"


class _FileSpy(_Spy):
    """A :class:`_Spy` for ``rknnlab.run(backend="rknnlab.checks:recording_runtime")``: the
    variant runs in its own process (a crash cannot take the notebook down) and the records
    go to the JSON file named by $RKNNLAB_CHECKS_RECORD when the child closes the runtime."""

    def __init__(self, rt: Any, path: str) -> None:
        super().__init__(rt)
        self.path = path

    def close(self) -> None:
        import base64
        import hashlib
        import json
        blobs: Dict[str, list] = {}

        def input_key(inputs: Optional[list]) -> Optional[str]:
            if inputs is None:
                return None
            key = hashlib.sha1(b"".join(d for _, d, _, _, _ in inputs)).hexdigest()
            blobs.setdefault(key, [[i, base64.b64encode(d).decode(), t, f, p] for i, d, t, f, p in inputs])
            return key

        gets = [{"ctx": g["ctx"], "thread": g["thread"], "inputs": input_key(g["inputs"]),
                 "outputs": [dict(o, data=base64.b64encode(o["data"]).decode()) for o in g["outputs"]]}
                for g in self.gets]
        with open(self.path, "w") as f:
            json.dump({"gets": gets, "inputs": blobs, "releases": self.releases,
                       "queries": self.queries, "contexts_left": len(self.contexts)}, f)
        self._rt.close()


def recording_runtime() -> Any:
    """The runtime ``open_runtime()`` gives, recording what exercise 1's check looks at (see
    :class:`_FileSpy`); a backend factory for ``rknnlab.run(backend="rknnlab.checks:recording_runtime")``."""
    return _FileSpy(_open_runtime(), os.environ[RECORD_ENV])


def _recorded_run(variant: Callable[[Any], None], model: str, soc: str, iterations: int) -> Tuple[Any, Dict[str, Any]]:
    """Run ``variant`` for ``iterations`` through :func:`recording_runtime` in a fresh process:
    (the VariantRun, the records with bytes decoded; empty if the process left none)."""
    import base64
    import json
    import tempfile
    import rknnlab
    fd, path = tempfile.mkstemp(prefix="rknnlab-check-", suffix=".json")
    os.close(fd)
    os.unlink(path)
    old = os.environ.get(RECORD_ENV)
    os.environ[RECORD_ENV] = path
    try:
        res = rknnlab.run(variant, model=model, soc=soc, iterations=iterations, warmup=0, sample_hz=0,
                          backend=f"{__name__}:recording_runtime", trim_after_warmup=False, timeout=120)
    finally:
        if old is None:
            os.environ.pop(RECORD_ENV, None)
        else:
            os.environ[RECORD_ENV] = old
    records: Dict[str, Any] = {}
    try:
        with open(path) as f:
            records = json.load(f)
        os.unlink(path)
    except (OSError, ValueError):
        pass
    if records:
        inputs = {k: [(i, base64.b64decode(d), t, fm, p) for i, d, t, fm, p in v]
                  for k, v in records.get("inputs", {}).items()}
        for g in records["gets"]:
            g["inputs"] = inputs.get(g["inputs"]) if g["inputs"] else None
            for o in g["outputs"]:
                o["data"] = base64.b64decode(o["data"])
    return res.runs[0], records


def _current_soc() -> str:
    """The SoC whose models the runtime at hand runs (the board's, or the simulator's)."""
    from .. import ENV_SIM_SOC, board
    chosen, _ = board.choose_backend("auto")
    soc = (board.read_board().soc if chosen == "native" else os.environ.get(ENV_SIM_SOC)) or "rk3588"
    return {"rk3566": "rk3568"}.get(soc.lower(), soc.lower())


def _reference_output(rt: Any, ctx: int, inputs: Optional[list], index: int,
                      want_float: int, cache: Dict[Any, bytes]) -> bytes:
    """The bytes a runtime-allocated rknn_outputs_get gives for these inputs, on the check's
    own context ``ctx`` (outputs depend only on the inputs)."""
    key = (None if inputs is None else tuple(inputs), index, want_float)
    if key in cache:
        return cache[key]
    keep = []
    structs = []
    for i, data, typ, fmt, pt in inputs or ():
        arr = np.frombuffer(data, np.uint8).copy()
        keep.append(arr)
        structs.append(abi.rknn_input(index=i, buf=arr.ctypes.data, size=arr.nbytes,
                                      pass_through=pt, type=typ, fmt=fmt))
    if structs:
        rt.inputs_set(ctx, structs)
    rt.run(ctx)
    outs = [abi.rknn_output(index=index, want_float=want_float, is_prealloc=0)]
    rt.outputs_get(ctx, outs)
    data = ctypes.string_at(outs[0].buf, outs[0].size)
    rt.outputs_release(ctx, outs)
    cache[key] = data
    return data


def _kb_per_1k_to_bytes_per_iter(slope: float) -> float:
    return slope * 1024 / 1000


def _variant_error(run: Any, what: str) -> str:
    """What went wrong in a variant run by rknnlab.run, with the student's line if found."""
    if run.status != "error":
        return f"{what}: {run.error or run.status}"
    where = ""
    frames = re.findall(r'File "<variant [^>]*>", line (\d+), in (\S+)\n\s*(.*)', run.traceback or "")
    if frames:
        line, func, src = frames[-1]
        where = f" (in {func}, line {line}: `{src.strip()}`)" if src.strip() else f" (in {func}, line {line})"
    return f"{what} raised {run.error}{where}"


