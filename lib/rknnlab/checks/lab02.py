"""Lab 2 (lifecycle): one check per exercise.

==============================  ================================================================
:func:`check_diagnose`          1. ``diagnose(result)``: which lifecycle leak a run shows (``MYSTERY``)
:func:`check_dup_prediction`    2. ``predict_dma_total(sizes, n, how)``: N contexts by init or by dup
:func:`check_load_from_buffer`  3. ``load_from_buffer`` and ``load_zero_copy``: who owns the model bytes
:func:`check_teardown`          4. ``teardown(rt, ctx, mems, model_mem=None)``: everything back, in order
:func:`check_verdict`           5. ★ ``verdict(trace)``: grows, flat or cannot tell yet
==============================  ================================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab02 as checks``.

Each check measures the student's code itself (runs, contexts, the heap, open file
descriptors, the order of the calls), with cases the student cannot look up: the truth
lives in private code, and the messages give the measured numbers and a hint, never the
answer.
"""
from __future__ import annotations

import ctypes
import gc
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi, errors
from . import _lab02_cases as _cases
from ._core import (CheckResult, Lab, _current_soc, _Fail, _frames, _model_file, _not_done,
                    _open_runtime, _soc_of, _student_error, _whole_number)

__all__ = ["CheckResult", "check_diagnose", "check_dup_prediction", "check_load_from_buffer",
           "check_teardown", "check_verdict", "summary", "results", "MYSTERY", "KINDS",
           "LAB2_MODEL", "DUP_MODELS", "RESOLUTION", "practice_traces", "one_run"]

#: the model of exercises 1, 3 and 4 (a 4 MB file: one copy of it stands far above the
#: harness's noise in the heap)
LAB2_MODEL = "mobilenet_v2"
#: exercise 2's two models: a large weight part (mobilenet_v2) and large io (yolov5n)
DUP_MODELS = ("mobilenet_v2", "yolov5n")
#: exercise 1: iterations per mystery run, each recorded with a full memory sample after every
#: runtime call (rknnlab.run's sample_calls): the heap's verdicts are then sure in 200 frames
DIAGNOSE_ITERATIONS = 200
#: exercise 5: "flat" means growth above this many bytes per iteration is ruled out
RESOLUTION = 1024

EX_DIAGNOSE = "Exercise 1 — find the leak in a lifecycle"
EX_DUP = "Exercise 2 — what dup_context saves: predict, then verify"
EX_BUFFER = "Exercise 3 — load from a buffer, ownership right"
EX_TEARDOWN = "Exercise 4 — teardown order"
EX_VERDICT = "Exercise 5 ★ — does it grow?"

#: the words diagnose() returns, with what each means (shown in the notebook)
KINDS: Dict[str, str] = {
    "context_per_frame": "a whole context (rknn_init ... rknn_destroy) for every frame",
    "outputs_not_released": "is_prealloc = 0 outputs never given back with rknn_outputs_release",
    "mems_not_destroyed": "a mem made with rknn_create_mem every frame, never rknn_destroy_mem",
    "python_keeps_outputs": "correct runtime calls, but the program keeps a copy of every output",
    "clean": "none of these: nothing grows per frame",
}
#: exercise 1's anonymous lifecycles (A is mystery_A, ...): one of each kind
MYSTERY: Dict[str, Callable[[Any], None]] = {"A": _cases.mystery_A, "B": _cases.mystery_B,
                                             "C": _cases.mystery_C, "D": _cases.mystery_D,
                                             "E": _cases.mystery_E}

#: the course's teardown convention, word for word (chapter 2, this lab, key points)
TEARDOWN_RULE = ("No document gives the order of rknn_destroy_mem and rknn_destroy; this is the course's "
                 "convention. Destroy every mem made with a context before that context. Free a zero-copy "
                 "model buffer or a shared mem after the last rknn_destroy. Free your own buffers last.")


def _fresh_seed() -> int:
    """A seed no student can know in advance (the traces and the sixth variant are drawn from it)."""
    return int.from_bytes(os.urandom(8), "little")


def _fmt(n: float) -> str:
    return f"{n:,.0f}"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _heap() -> Optional[int]:
    from ..probe import Heap
    heap = Heap()
    if not heap.available:
        return None
    gc.collect()
    return int(heap.sample()["heap_in_use_bytes"])


def _dma_fds() -> Dict[int, int]:
    """{fd: bytes} of this process's open DMA buffers: memfds (the simulator's) and
    dma-bufs (a board's mems)."""
    found = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
            if target.startswith("/memfd:") or "dmabuf" in target:
                found[int(name)] = os.fstat(int(name)).st_size
        except OSError:        # closed meanwhile (the listing's own fd)
            continue
    return found


def _run_once(rt: Any, ctx: int, frame: np.ndarray) -> bytes:
    """Set one frame, run, get every output as float32 (runtime-allocated, released): the bytes."""
    from ..experiment.variants import frame_input
    rt.inputs_set(ctx, frame_input(frame))
    rt.run(ctx)
    n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
    outs = [abi.rknn_output(index=k, want_float=1, is_prealloc=0) for k in range(n_out)]
    rt.outputs_get(ctx, outs)
    data = b"".join(ctypes.string_at(o.buf, o.size) for o in outs)
    rt.outputs_release(ctx, outs)
    return data


# =========================================================================== exercise 1
def one_run(result: Any, name: str) -> Any:
    """A Result holding the run of the variant ``name`` only: what diagnose() is given."""
    from ..experiment.result import Result
    return Result(dict(result.meta), [result[name]])


def check_diagnose(diagnose: Callable[[Any], str]) -> CheckResult:
    """Exercise 1: ``diagnose(result) -> one of KINDS``, from a Result of one variant run
    by ``rknnlab.run`` (its calls, samples and summary).

    The check runs the five letters (A is mystery_A, ...) and one variant more, whose kind
    it draws anew for each check, all in one ``rknnlab.run``; then it hands ``diagnose``
    each run alone, in a random order.  It stops at the first wrong answer; it names the
    letter when A-E is wrong (the student can run those anyway), keeps the sixth variant
    anonymous, and never says which word would be right."""
    def body() -> CheckResult:
        if not callable(diagnose):
            raise _not_done(f"expected your function, got {type(diagnose).__name__}.",
                            "pass the function itself: check_diagnose(diagnose)")
        import rknnlab
        rng = np.random.default_rng(_fresh_seed())
        x_kind = str(rng.choice(_cases.KINDS))
        saved = os.environ.get(_cases.CASE_X_ENV)
        os.environ[_cases.CASE_X_ENV] = x_kind
        try:
            res = rknnlab.run(_cases.leak_cases(), model=LAB2_MODEL, iterations=DIAGNOSE_ITERATIONS,
                              warmup=5, soc=_current_soc(), progress=False, sample_calls=True)
        finally:
            if saved is None:
                os.environ.pop(_cases.CASE_X_ENV, None)
            else:
                os.environ[_cases.CASE_X_ENV] = saved
        if res.errors:
            raise _Fail("the check's own runs failed: " + "; ".join(res.errors.values()),
                        "please report this to the course's authors.")
        cases = _cases.leak_cases()
        details = []
        for n, k in enumerate(rng.permutation(len(cases)), 1):
            case = cases[int(k)]
            letter = next((key for key, f in MYSTERY.items() if f is case), None)
            what = f"diagnose(<the run of {case.__name__}>)"
            try:
                answer = diagnose(one_run(res, case.__name__))
            except Exception as exc:
                raise _student_error(exc, what, "read result.calls (which calls, how many per iteration) "
                                     "and result.summary or result.samples (what grows).")
            if answer is None:
                if n == 1:
                    raise _not_done(f"{what} returned None.", "return one of: " + ", ".join(KINDS) + ".")
                raise _Fail(f"{what} returned None.", "return one of: " + ", ".join(KINDS) + ".")
            word = str(answer).strip().lower()
            if word not in KINDS:
                raise _Fail(f"{what} returned {answer!r}, not one of: {', '.join(KINDS)}.",
                            "copy the word from checks.KINDS.")
            if word != _cases.leak_truth(case, x_kind):
                where = (f"Your answer for {letter} (checks.MYSTERY[{letter!r}]) is wrong: you said {word!r}. "
                         "Look at that run's calls and its memory again."
                         if letter else "Your answer for the sixth variant, the one the check keeps to itself "
                         f"(its kind is drawn anew for each check), is wrong: you said {word!r}.")
                return CheckResult(EX_DIAGNOSE, "failed", f"{where} {n - 1} answer(s) were right before it; "
                                   "the check stops at the first wrong one.", details,
                                   "Judge each run on two things. What does the program call per "
                                   "iteration (rknn_init, rknn_create_mem against rknn_destroy_mem, "
                                   "rknn_outputs_get against rknn_outputs_release)? And what grows: the "
                                   "malloc heap, the DMA total, or nothing? Memory alone cannot tell a "
                                   "forgotten release from a Python list; calls alone cannot see the list.")
            details.append(f"{letter or 'the sixth variant'}: {word} — right")
        return CheckResult(EX_DIAGNOSE, "passed", f"All {len(cases)} right: the calls per iteration say what the "
                           "program does, and the growing column says what it keeps.", details)

    return _LAB.run(EX_DIAGNOSE, body)


# =========================================================================== exercise 2
def _mem_size(rt: Any, ctx: int) -> abi.rknn_mem_size:
    return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)


def _model_sizes(rt: Any, model_file: str, frame: np.ndarray) -> Dict[str, int]:
    """{"weights", "internal", "io"}: RKNN_QUERY_MEM_SIZE of one context after one run;
    "io" is the rest of total_dma_allocated_size (on a board it also holds the runtime's
    other buffers: register commands, task buffers, 4 KiB rounding)."""
    ctx = rt.init(model_file)
    try:
        _run_once(rt, ctx, frame)
        m = _mem_size(rt, ctx)
        w, i = int(m.total_weight_size), int(m.total_internal_size)
        return {"weights": w, "internal": i, "io": int(m.total_dma_allocated_size) - w - i}
    finally:
        rt.destroy(ctx)


def _measure_contexts(rt: Any, model_file: str, frame: np.ndarray, how: str, n_max: int = 4) -> List[int]:
    """The DMA total of 1..n_max contexts made by ``how`` ("init": rknn_init each time;
    "dup": rknn_init once, then rknn_dup_context of the first): the sum of every live
    context's total_dma_allocated_size, each context run once."""
    ctxs: List[int] = []
    totals = []
    try:
        for _ in range(n_max):
            ctx = rt.init(model_file) if how == "init" or not ctxs else rt.dup_context(ctxs[0])
            ctxs.append(ctx)
            _run_once(rt, ctx, frame)
            totals.append(sum(int(_mem_size(rt, c).total_dma_allocated_size) for c in ctxs))
        return totals
    finally:
        for ctx in reversed(ctxs):
            rt.destroy(ctx)


def check_dup_prediction(predict_dma_total: Callable[[Dict[str, int], int, str], int]) -> CheckResult:
    """Exercise 2: ``predict_dma_total(sizes, n, how) -> bytes``: the DMA total of ``n``
    contexts of one model made by rknn_init each ("init") or by rknn_dup_context of the
    first ("dup"), from ``sizes`` = {"weights", "internal", "io"} of one context.

    The check measures real contexts (1 to 4, each run once) of two models and compares.
    A prediction counts as right within 1% of the measured total plus 4 KiB per context (a
    board adds buffers of its own and rounds to 4 KiB).  A failure shows the prediction,
    the measurement and their difference, never the formula."""
    def body() -> CheckResult:
        if not callable(predict_dma_total):
            raise _not_done(f"expected your function, got {type(predict_dma_total).__name__}.",
                            "pass the function itself: check_dup_prediction(predict_dma_total)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        details, wrong = [], []
        right = 0
        try:
            for model in DUP_MODELS:
                path = _model_file(model, soc)
                frame = _frames(model, soc, n=1, seed=2)[0]
                sizes = _model_sizes(rt, path, frame)
                for how in ("init", "dup"):
                    measured = _measure_contexts(rt, path, frame, how)
                    for n, total in enumerate(measured, 1):
                        what = f"predict_dma_total(sizes of {model}, {n}, {how!r})"
                        try:
                            got = predict_dma_total(dict(sizes), n, how)
                        except Exception as exc:
                            raise _student_error(exc, what, "add up weights, internal and io: which of them "
                                                 "does every context need, and which do dup'd contexts share?")
                        if got is None:
                            raise _not_done(f"{what} returned None.", "return a number of bytes.")
                        value = _whole_number(got)
                        if value is None:
                            raise _Fail(f"{what} returned {got!r}, not a whole number of bytes.",
                                        "return an int: a sum of the sizes, each counted as many times as "
                                        "there are copies of it.")
                        if abs(value - total) > 0.01 * total + 4096 * n:
                            wrong.append(f"{model}, {n} context(s) by {how}: you predicted {_mib(value)}, "
                                         f"measured {_mib(total)}: off by {value - total:+,} bytes")
                        else:
                            right += 1
                    details.append(f"{model} by {how}, N = 1..4: measured "
                                   + ", ".join(f"{t / 2**20:.2f}" for t in measured) + " MiB")
        finally:
            rt.close()
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(wrong) + right} predictions are off by more than 1% + 4 KiB "
                        "per context:", "Compare each difference with the three sizes the model gives "
                        "(weights, internal, io). A context made by rknn_init has all three of its own. A "
                        "dup'd context shares some of them with the first: which ones grow with n?",
                        wrong[:6] + ([f"... and {len(wrong) - 6} more"] if len(wrong) > 6 else []))
        return CheckResult(EX_DUP, "passed", f"All {right} predictions match the measured DMA totals of real "
                           "contexts (within 1% + 4 KiB per context): dup'd contexts share the weights and "
                           "have their own internal and io memory.", details)

    return _LAB.run(EX_DUP, body)


# =========================================================================== exercise 3
class _RecordingRuntime:
    """A runtime that passes every call through and records the lifecycle calls (name,
    the arguments that matter, and the error, if any), in order."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        self.calls: List[Tuple[str, Dict[str, Any], Optional[str]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def _call(self, name: str, info: Dict[str, Any], fn: Callable[[], Any]) -> Any:
        try:
            value = fn()
        except Exception as exc:
            self.calls.append((name, info, f"{type(exc).__name__}: {exc}"))
            raise
        self.calls.append((name, info, None))
        return value

    def init(self, model: Any, flag: int = 0, extend: Any = None, size: Optional[int] = None) -> int:
        if isinstance(model, (str, os.PathLike)):
            kind = "path"
        elif isinstance(model, int):
            kind = "address"
        else:
            kind = "buffer"
        info = {"model": kind, "flag": int(flag), "size": size}
        return self._call("rknn_init", info, lambda: self._rt.init(model, flag, extend, size))

    def destroy(self, ctx: int) -> int:
        return self._call("rknn_destroy", {"ctx": ctx}, lambda: self._rt.destroy(ctx))

    def create_mem(self, ctx: int, size: int) -> Any:
        return self._call("rknn_create_mem", {"ctx": ctx, "size": size}, lambda: self._rt.create_mem(ctx, size))

    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> Any:
        return self._call("rknn_create_mem2", {"ctx": ctx, "size": size, "flags": alloc_flags},
                          lambda: self._rt.create_mem2(ctx, size, alloc_flags))

    def destroy_mem(self, ctx: int, mem: Any) -> int:
        address = ctypes.addressof(mem.contents) if mem else 0
        return self._call("rknn_destroy_mem", {"ctx": ctx, "mem": address},
                          lambda: self._rt.destroy_mem(ctx, mem))

    def names(self) -> List[str]:
        return [c[0] for c in self.calls]


def _loaded_context(rt: Any, spy: _RecordingRuntime, load: Callable[..., Any], name: str, path: str
                    ) -> Tuple[Any, Optional[int]]:
    """(what load returned, the growth of the heap in use across the call)."""
    h0 = _heap()
    try:
        got = load(spy, path)
    except Exception as exc:
        raise _student_error(exc, f"{name}(rt, model_path)", "read the file into a buffer, then "
                             "rt.init(buffer) (size > 0: the buffer; size = 0: a path).")
    h1 = _heap()
    return got, (h1 - h0 if h0 is not None and h1 is not None else None)


def _inits(spy: _RecordingRuntime) -> List[Dict[str, Any]]:
    return [info for name, info, err in spy.calls if name == "rknn_init" and err is None]


def _judge_plain(rt: Any, load_from_buffer: Callable[..., Any], path: str, size: int,
                 reference: bytes, frame: np.ndarray) -> List[str]:
    spy = _RecordingRuntime(rt)
    ctx, grew = _loaded_context(rt, spy, load_from_buffer, "load_from_buffer", path)
    if ctx is None:
        raise _not_done("load_from_buffer returned None.", "return the context rt.init gave you.")
    try:
        inits = _inits(spy)
        if len(inits) != 1:
            raise _Fail(f"load_from_buffer made {len(inits)} successful rknn_init calls; expected one.",
                        "read the file once, call rt.init once, return its context.")
        if inits[0]["model"] == "path":
            raise _Fail("load_from_buffer passed rknn_init a path (size = 0): the runtime read the file "
                        "itself.", "read the file into a buffer (open(path, 'rb').read()), then pass the "
                        "buffer: size > 0 means the model is a buffer.")
        if inits[0]["flag"] & abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY:
            raise _Fail("load_from_buffer used RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: that is the second "
                        "function's job.", "init from an ordinary buffer with flag 0 here.")
        _check_outputs(rt, ctx, frame, reference, "load_from_buffer")
        details = [f"rknn_init got a buffer (size > 0); the context's outputs equal those of a context "
                   "loaded from the path"]
        if grew is not None:
            line = (f"heap in use after load_from_buffer returned: {grew:+,} bytes, for a model file of "
                    f"{size:,} bytes")
            if grew > 1.5 * size:
                raise _Fail(line + f": about {grew / size:.1f} copies of the model stay in memory. The "
                            "runtime keeps its own copy of a buffer (assumption A4); yours is still alive.",
                            "after rt.init, nothing may refer to your buffer any more: do not return it, "
                            "store it in a global or an attribute, or keep it in a list.", [line])
            if rt.backend == "sim" and grew < 0.5 * size:
                raise _Fail(line + ": no copy of the model is held. That is what a zero-copy load does, "
                            "not an ordinary one.", "init from an ordinary buffer with flag 0.", [line])
            details.append(line + " (one copy: the runtime's own, A4)")
        return details
    finally:
        if isinstance(ctx, (int, np.integer)) and not isinstance(ctx, bool):
            try:
                rt.destroy(int(ctx))
            except errors.RknnError:
                pass


def _check_outputs(rt: Any, ctx: Any, frame: np.ndarray, reference: bytes, name: str) -> None:
    if not isinstance(ctx, (int, np.integer)) or isinstance(ctx, bool):
        raise _Fail(f"{name} returned {type(ctx).__name__} where the context (an int) was expected.",
                    "return the context rt.init gave you.")
    try:
        got = _run_once(rt, int(ctx), frame)
    except errors.RknnError as exc:
        raise _Fail(f"running the context {name} returned failed: {exc}",
                    "return a live context: the buffers it needs must stay valid until rknn_destroy.")
    if got != reference:
        raise _Fail(f"the context from {name} gives other outputs than a context loaded from the path.",
                    "load the whole file: size is the file's size.")


def _judge_zero_copy(rt: Any, load_zero_copy: Callable[..., Any], path: str, size: int,
                     reference: bytes, frame: np.ndarray, weights: int) -> List[str]:
    spy = _RecordingRuntime(rt)
    got, grew = _loaded_context(rt, spy, load_zero_copy, "load_zero_copy", path)
    if got is None:
        raise _not_done("load_zero_copy returned None.", "return (ctx, model_mem).")
    if not isinstance(got, tuple) or len(got) != 2:
        raise _Fail(f"load_zero_copy returned {type(got).__name__}; expected a tuple (ctx, model_mem).",
                    "return ctx, mem")
    ctx, mem = got
    destroyed_ctx = False
    try:
        inits = _inits(spy)
        if len(inits) != 1 or inits[0]["model"] != "address":
            raise _Fail("rknn_init did not get the virtual address of a mem (" + (
                        f"{len(inits)} successful rknn_init calls" if len(inits) != 1 else
                        f"it got a {inits[0]['model']}") + ").",
                        "copy the file into a create_mem2 buffer, then rt.init(mem.contents.virt_addr, "
                        "flag, extend, size=file size).")
        mems = [info for name, info, err in spy.calls if name == "rknn_create_mem2" and err is None]
        if any(name == "rknn_destroy_mem" for name in spy.names()):
            raise _Fail("load_zero_copy called rknn_destroy_mem: the model buffer must stay valid until "
                        "rknn_destroy of its context (API reference V2.3.2 p.20).",
                        "return the mem with the context; teardown destroys it after rknn_destroy.")
        _check_outputs(rt, ctx, frame, reference, "load_zero_copy")
        details = ["rknn_init got the mem's virt_addr; the context's outputs equal those of a context "
                   "loaded from the path"]
        if grew is not None:
            line = (f"heap in use after load_zero_copy returned: {grew:+,} bytes, for a model file of "
                    f"{size:,} bytes")
            if grew > 0.5 * size:
                raise _Fail(line + ": a copy of the model is held in the heap. Without "
                            "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY the runtime copies the buffer it is given "
                            "(A4); or your own buffer is still alive.",
                            "pass RKNN_FLAG_MODEL_BUFFER_ZERO_COPY and an rknn_init_extend with "
                            "real_model_size and model_buffer_fd; drop the bytes you read once they are in "
                            "the mem.", [line])
            details.append(line + " (no copy: the NPU reads the weights in the mem, A5)")
        total = int(_mem_size(rt, int(ctx)).total_dma_allocated_size)
        details.append(f"the context's DMA total: {_fmt(total)} bytes (the model's weights, "
                       f"{_fmt(weights)} bytes, are read in place)")
        if not mems or not any(m["flags"] & abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT for m in mems):
            raise _Fail("the model's mem was not made with rknn_create_mem2(0, size, "
                        "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT): before rknn_init there is no context to make "
                        "it with.", "rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)")
        if rt.backend == "sim":
            # the returned mem must be the one the context reads: without it, the run fails
            rt.destroy_mem(0, mem)
            try:
                _run_once(rt, int(ctx), frame)
            except errors.RknnError:
                details.append("after rknn_destroy_mem of the mem you returned, the context's next run "
                               "fails: the context reads its model from that mem")
            else:
                raise _Fail("the context still runs after rknn_destroy_mem of the mem you returned: it "
                            "does not read its model from that mem.",
                            "return the mem whose virt_addr you passed to rt.init.")
        rt.destroy(int(ctx))
        destroyed_ctx = True
        if rt.backend != "sim":
            rt.destroy_mem(0, mem)
        return details
    finally:
        if not destroyed_ctx:
            try:
                rt.destroy(int(ctx))
            except Exception:
                pass


def check_load_from_buffer(load_from_buffer: Callable[[Any, str], int],
                           load_zero_copy: Optional[Callable[[Any, str], Tuple[int, Any]]] = None
                           ) -> CheckResult:
    """Exercise 3: ``load_from_buffer(rt, path) -> ctx`` (an ordinary buffer, flag 0) and
    ``load_zero_copy(rt, path) -> (ctx, model_mem)`` (RKNN_FLAG_MODEL_BUFFER_ZERO_COPY from a
    create_mem2 ALLOC_NO_CONTEXT buffer).

    Measured: rknn_init's model argument (a buffer / a mem's address, not a path); the
    context's outputs against a context loaded from the path; the malloc heap in use just
    before and after the call (one copy of the file for an ordinary buffer: the runtime's;
    none for zero-copy); the zero-copy context still runs when the function has returned
    (the buffer was not destroyed), and on the simulator stops running once the returned
    mem is destroyed (it is the buffer the context reads)."""
    def body() -> CheckResult:
        if not callable(load_from_buffer):
            raise _not_done(f"expected your function, got {type(load_from_buffer).__name__}.",
                            "pass the functions: check_load_from_buffer(load_from_buffer, load_zero_copy)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        path = _model_file(LAB2_MODEL, soc)
        size = os.path.getsize(path)
        frame = _frames(LAB2_MODEL, soc, n=1, seed=3)[0]
        try:
            ref_ctx = rt.init(path)
            reference = _run_once(rt, ref_ctx, frame)
            weights = int(_mem_size(rt, ref_ctx).total_weight_size)
            rt.destroy(ref_ctx)
            details = _judge_plain(rt, load_from_buffer, path, size, reference, frame)
            if not callable(load_zero_copy):
                raise _not_done("load_from_buffer is right; load_zero_copy is not done yet.",
                                "pass both functions: check_load_from_buffer(load_from_buffer, load_zero_copy)")
            details += _judge_zero_copy(rt, load_zero_copy, path, size, reference, frame, weights)
        finally:
            rt.close()
        return CheckResult(EX_BUFFER, "passed", "Both loads are right: the ordinary one leaves one copy of the "
                           "model (the runtime's), the zero-copy one none, and its buffer outlives the "
                           "function.", details)

    return _LAB.run(EX_BUFFER, body)


# =========================================================================== exercise 4
def _teardown_scene(rt: Any, path: str, scene: str, frame: np.ndarray) -> Tuple[int, List[Any], Any]:
    """(ctx, the mems made with it, the zero-copy model mem or None), each context run once."""
    from ..experiment.variants import query_io
    model_mem = None
    if scene == "zero_copy":
        size = os.path.getsize(path)
        model_mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
        with open(path, "rb") as f:
            ctypes.memmove(model_mem.contents.virt_addr, f.read(), size)
        extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=size,
                                      model_buffer_fd=model_mem.contents.fd)
        ctx = rt.init(model_mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=size)
    else:
        ctx = rt.init(path)
    mems: List[Any] = []
    if scene in ("bound", "zero_copy"):
        _, out_attrs = query_io(rt, ctx, native=True)
        for a in out_attrs:
            mem = rt.create_mem(ctx, a.size_with_stride)
            rt.set_io_mem(ctx, mem, a)
            mems.append(mem)
        mems.append(rt.create_mem(ctx, 4096))          # a scratch mem, bound to nothing
    from ..experiment.variants import frame_input
    rt.inputs_set(ctx, frame_input(frame))
    rt.run(ctx)
    return ctx, mems, model_mem


def _judge_teardown(spy: _RecordingRuntime, ctx: int, mems: Sequence[Any], model_mem: Any,
                    scene: str) -> None:
    addresses = [ctypes.addressof(m.contents) for m in mems]
    model_address = ctypes.addressof(model_mem.contents) if model_mem is not None else None
    failed = [(k, name, info, err) for k, (name, info, err) in enumerate(spy.calls) if err]
    if failed:
        k, name, info, err = failed[0]
        after = any(n == "rknn_destroy" and i["ctx"] == ctx and e is None for n, i, e in spy.calls[:k])
        if name == "rknn_destroy":
            which = "the context" + (" (a second time)" if after else "")
            after = False
        elif model_address is not None and info.get("mem") == model_address:
            which = "the zero-copy model buffer"
        else:
            which = "a mem made with the context"
        err = err.split(" Hint:")[0]        # the runtime's own hint is about another mistake
        hint = ("The model buffer was made with no context: rt.destroy_mem(0, model_mem). "
                if which == "the zero-copy model buffer" and info.get("ctx") else
                "A mem made with a context is gone after rknn_destroy on the simulator (A7), and every "
                "call naming a destroyed context fails. " if after else "")
        raise _Fail(f"{scene}: {name} of {which}" + (" after rknn_destroy" if after else "")
                    + f" failed: {err}", hint + TEARDOWN_RULE)
    destroys = [k for k, (name, info, _e) in enumerate(spy.calls) if name == "rknn_destroy" and info["ctx"] == ctx]
    if len(destroys) != 1:
        raise _Fail(f"{scene}: rknn_destroy(ctx) was called {len(destroys)} times; expected once.",
                    "call rt.destroy(ctx) once.")
    at = destroys[0]
    gone = {info["mem"]: k for k, (name, info, _e) in enumerate(spy.calls) if name == "rknn_destroy_mem"}
    left = [a for a in addresses if a not in gone]
    if left:
        raise _Fail(f"{scene}: {len(left)} of the {len(addresses)} mems made with the context were left to "
                    "rknn_destroy. The simulator frees them there (assumption A7); no document says a "
                    "board does.", TEARDOWN_RULE)
    late = [a for a in addresses if gone[a] > at]
    if late:
        raise _Fail(f"{scene}: {len(late)} mem(s) made with the context were destroyed after rknn_destroy.",
                    TEARDOWN_RULE)
    if model_address is not None:
        if model_address not in gone:
            raise _Fail(f"{scene}: the zero-copy model buffer was never destroyed: its DMA buffer and its "
                        "file descriptor stay (airockchip/rknn-toolkit2#532 reports such fds running out "
                        "after 1,020 loads).", TEARDOWN_RULE)
        if gone[model_address] < at:
            raise _Fail(f"{scene}: the zero-copy model buffer was destroyed before rknn_destroy. The API "
                        "reference (V2.3.2 p.20) says it must stay valid until rknn_destroy; a board may "
                        "read freed memory.", TEARDOWN_RULE)


def check_teardown(teardown: Callable[..., Any]) -> CheckResult:
    """Exercise 4: ``teardown(rt, ctx, mems, model_mem=None)`` gives back everything: the
    mems made with the context (before rknn_destroy: the course's convention), the context,
    and the zero-copy model buffer (after rknn_destroy: API reference V2.3.2 p.20).

    Three scenes, in a random order: a plain context; a context with output mems bound
    and a scratch mem; a zero-copy context with such mems.  Measured: every call's return
    code, the order of the calls, the open file descriptors (each DMA buffer holds one) and
    the context's state afterwards."""
    def body() -> CheckResult:
        if not callable(teardown):
            raise _not_done(f"expected your function, got {type(teardown).__name__}.",
                            "pass the function itself: check_teardown(teardown)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        path = _model_file(LAB2_MODEL, soc)
        frame = _frames(LAB2_MODEL, soc, n=1, seed=4)[0]
        details = []
        scenes = ["plain", "bound", "zero_copy"]
        order = np.random.default_rng(_fresh_seed()).permutation(len(scenes))
        try:
            # one life torn down by the check itself first: a process's first init may open files
            # it keeps (caches, libraries), which are not the scene's
            ctx, mems, model_mem = _teardown_scene(rt, path, "zero_copy", frame)
            for mem in mems:
                rt.destroy_mem(ctx, mem)
            rt.destroy(ctx)
            rt.destroy_mem(0, model_mem)
            for k in order:
                scene = scenes[int(k)]
                before = set(_dma_fds())
                ctx, mems, model_mem = _teardown_scene(rt, path, scene, frame)
                made = {fd: n for fd, n in _dma_fds().items() if fd not in before}
                spy = _RecordingRuntime(rt)
                shuffled = list(mems)
                np.random.default_rng(int(k)).shuffle(shuffled)
                what = (f"teardown(rt, ctx, <{len(mems)} mems>" + (", model_mem)" if model_mem is not None else ")"))
                try:
                    if model_mem is None:
                        teardown(spy, ctx, shuffled)
                    else:
                        teardown(spy, ctx, shuffled, model_mem)
                except Exception as exc:
                    # a runtime call that failed is judged below, with the others
                    if not (isinstance(exc, errors.RknnError) and any(c[2] for c in spy.calls)):
                        raise _student_error(exc, what, "destroy the mems made with the context, then the "
                                             "context, then the zero-copy model buffer.")
                if not spy.calls:
                    raise _not_done(f"{what} made no runtime call.",
                                    "call rt.destroy_mem(...) and rt.destroy(ctx).")
                _judge_teardown(spy, ctx, mems, model_mem, scene)
                try:
                    rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
                    raise _Fail(f"{scene}: the context still answers rknn_query after teardown.",
                                "call rt.destroy(ctx).")
                except errors.RknnError:
                    pass
                left = {fd: n for fd, n in _dma_fds().items() if fd in made}
                if left:
                    raise _Fail(f"{scene}: {sum(left.values()):,} of the {sum(made.values()):,} DMA bytes the scene "
                                f"allocated ({len(left)} of its {len(made)} buffers) are still held after "
                                "teardown.", TEARDOWN_RULE)
                details.append(f"{scene}: {len(spy.calls)} calls, none failed; all {sum(made.values()):,} DMA bytes "
                               f"({len(made)} buffers) came back; the order follows the convention")
        finally:
            rt.close()
        return CheckResult(EX_TEARDOWN, "passed", "Everything comes back, no call fails, and the order is the "
                           "course's: mems of the context, the context, then the zero-copy model buffer.",
                           details)

    return _LAB.run(EX_TEARDOWN, body)


# =========================================================================== exercise 5 ★
def _as_trace(trace: Dict[str, np.ndarray]) -> Any:
    import pandas as pd
    return pd.DataFrame({"iteration": trace["iteration"].astype(int), "rss_bytes": trace["rss_bytes"]})


def practice_traces() -> List[Any]:
    """Four RSS traces to try a verdict on (one of each kind the check uses, shuffled, from
    a fixed seed; the check draws its own)."""
    return [_as_trace(t) for _kind, t in _cases.trace_cases(seed=20_502, per_kind=1)]


_VERDICTS = ("grows", "flat", "cannot tell yet")


def check_verdict(verdict: Callable[[Any], str]) -> CheckResult:
    """Exercise 5 ★: ``verdict(trace) -> "grows" | "flat" | "cannot tell yet"`` for an RSS
    trace (a DataFrame with ``iteration`` and ``rss_bytes``).

    The check draws 12 traces from a fresh seed, three of each kind: flat (a start that
    settles, page-sized jitter, short spikes), a steady leak of a few KiB per iteration, a
    one-off step of several MiB then level, and a window too short for its noise.  "flat"
    means growth above RESOLUTION bytes per iteration is ruled out.  A failure names each
    trap by what the trace does, never by a number the student could look up."""
    def body() -> CheckResult:
        if not callable(verdict):
            raise _not_done(f"expected your function, got {type(verdict).__name__}.",
                            "pass the function itself: check_verdict(verdict)")
        cases = _cases.trace_cases(seed=_fresh_seed())
        traps: Dict[Tuple[str, str], List[int]] = {}
        details: List[str] = []
        for n, (kind, trace) in enumerate(cases, 1):
            frame = _as_trace(trace)
            what = f"verdict(<trace {n}: {len(frame)} samples over {int(np.ptp(trace['iteration'])) + 1:,} iterations>)"
            try:
                answer = verdict(frame)
            except Exception as exc:
                raise _student_error(exc, what, "work on trace['iteration'] and trace['rss_bytes'].")
            if answer is None:
                if n == 1:
                    raise _not_done(f"{what} returned None.", 'return "grows", "flat" or "cannot tell yet".')
                raise _Fail(f"{what} returned None.", 'return "grows", "flat" or "cannot tell yet".')
            word = str(answer).strip().lower()
            if word == "cannot tell":
                word = "cannot tell yet"
            if word not in _VERDICTS:
                raise _Fail(f"{what} returned {answer!r}, not one of: grows, flat, cannot tell yet.",
                            'return one of the three strings exactly: "grows", "flat", "cannot tell yet".')
            if word != _cases.TRACE_TRUTH[kind]:
                traps.setdefault((kind, word), []).append(n)
            else:
                details.append(f"trace {n}: {word} — right")
        if not traps:
            return CheckResult(EX_VERDICT, "passed", f"All {len(cases)} verdicts right, on traces drawn for this "
                               "check.", details)
        # the traps are named by what the traces do: they are drawn anew, so this gives nothing away
        wrong = sum(len(v) for v in traps.values())
        lines = [f"{len(ns)} trace{'s' if len(ns) > 1 else ''} {_cases.trace_why(kind)}: you said "
                 f"{word!r} (trace {', '.join(map(str, ns))})" for (kind, word), ns in traps.items()]
        return CheckResult(EX_VERDICT, "failed", f"{wrong} of your {len(cases)} verdicts are wrong. The "
                           "trap(s) your function fell into:", lines,
                           "Look at the lower envelope of the trace (the smallest sample of each range of "
                           "iterations), not single samples: spikes and settling are not growth. A leak raises "
                           "the envelope at every step; a one-off step raises it "
                           "once. Say \"flat\" only when your uncertainty rules out growth above "
                           f"{RESOLUTION:,} bytes per iteration, and \"grows\" only when it rules out zero.")

    return _LAB.run(EX_VERDICT, body)


_LAB = Lab("Lab 2", [EX_DIAGNOSE, EX_DUP, EX_BUFFER, EX_TEARDOWN, EX_VERDICT])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_diagnose": EX_DIAGNOSE, "check_dup_prediction": EX_DUP,
                      "check_load_from_buffer": EX_BUFFER, "check_teardown": EX_TEARDOWN,
                      "check_verdict": EX_VERDICT})
