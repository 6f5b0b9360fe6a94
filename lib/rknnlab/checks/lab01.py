"""Lab 1 (memory layers): one check per exercise.

==============================  ==================================================================
:func:`check_mem_size`          1. the fields of ``rknn_mem_size``, and a DMA account of a context
:func:`check_size_prediction`   2. a recorded prediction, then ``predict_sizes(native_attr)``
:func:`check_plan`              3. bytes in use per layer, the high-water mark, what reuse saves
:func:`check_diagnosis`         4. model, SoC and init flag of unknown contexts, from queries only
:func:`check_dominant`          5 ★. the largest activations, and the property that explains them
==============================  ==================================================================

The truth comes from measurements the checks make themselves: the runtime at hand (the
board's NPU, or the simulator) for ``RKNN_QUERY_MEM_SIZE`` and the attrs, a simulator of the
other SoC for the SoC the board is not, and the compiler reports in data/models for the
memory plans.  No figure is written down here: the models can be rebuilt and the checks
follow.  :func:`summary` lists the lab's checks and whether each passed.  The notebook
imports ``from rknnlab.checks import lab01 as checks``.
"""
from __future__ import annotations

import ctypes
import math
import random
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.buffers import attr_dims
from ._core import (CheckResult, Lab, _Fail, _current_soc, _not_done, _open_runtime, _student_error,
                    _whole_number)

__all__ = ["CheckResult", "check_mem_size", "check_size_prediction", "check_plan",
           "check_diagnosis", "check_dominant", "summary", "results",
           "MEANINGS", "MEM_SIZE_FIELDS", "REASONS", "PREDICTED_TENSOR", "other_soc", "runtime_for"]

EX1 = "Exercise 1 — the fields of rknn_mem_size"
EX2 = "Exercise 2 — predict an io buffer's size"
EX3 = "Exercise 3 — the high-water mark, and what reuse saves"
EX4 = "Exercise 4 — diagnose unknown contexts"
EX5 = "Exercise 5 ★ — which activations dominate, and where that fails"


def _of_yours(wrong: int, total: int, noun: str) -> str:
    """'1 of your 6 answers is wrong' / '2 of your 6 answers are wrong'."""
    return f"{wrong} of your {total} {noun} {'is' if wrong == 1 else 'are'} wrong"

#: the five fields of rknn_mem_size that exercise 1 asks about (reserved[] is not one)
MEM_SIZE_FIELDS = ("total_weight_size", "total_internal_size", "total_dma_allocated_size",
                   "total_sram_size", "free_sram_size")

#: what exercise 1 offers as meanings, in no particular order; three of them belong to no field
MEANINGS = {
    "A": "the sum of every activation tensor's size, each in a buffer of its own",
    "B": "the part of the NPU's SoC SRAM that is not in use yet",
    "C": "the quantized weights and biases, as the compiler laid them out for the NPU",
    "D": "the size of the .rknn file",
    "E": "all the NPU-accessible (DMA) memory the runtime has allocated for this context so far",
    "F": "the one buffer that the compiler planned for the activations between layers",
    "G": "the process's resident memory (VmRSS) after rknn_init",
    "H": "the SoC SRAM that the runtime can give the NPU",
}
_FIELD_MEANING = {"total_weight_size": "C", "total_internal_size": "F", "total_dma_allocated_size": "E",
                  "total_sram_size": "H", "free_sram_size": "B"}
_NAIVE_SUM, _FILE_SIZE = "A", "D"      # the distractors that two hints answer

#: exercise 2's recorded prediction: the native size_with_stride of this io tensor, on two SoCs
PREDICTED_TENSOR = ("yolov5s", "output", 1)

#: the properties exercise 5 offers to explain why some activations are the largest
REASONS = {
    "height x width": "the tensor's height times width (its spatial resolution)",
    "channels": "the tensor's channel count",
    "lifetime": "how many layers the tensor stays alive",
    "npu cycles": "the NPU cycles of the layer that writes the tensor",
    "depth": "how early in the network the tensor is written (the earlier, the higher)",
}

#: SoC -> the SoC with the other int8 C2 (16 on rk3588/rk3576/rk3562, 8 on rk3566/rk3568)
_PAIRED_SOC = {"rk3588": "rk3568", "rk3576": "rk3568", "rk3562": "rk3568", "rk3568": "rk3588"}

_TOP_K = 5


def other_soc(soc: str) -> str:
    """The SoC whose int8 C2 differs from ``soc``'s (rk3568 for rk3588, and back)."""
    return _PAIRED_SOC.get(soc, "rk3568")


def runtime_for(soc: str) -> Any:
    """The runtime that runs ``soc``'s models here: the one at hand on a board for its own
    SoC, a simulator of ``soc`` otherwise.  A simulator's contexts carry a board-like
    remainder in their DMA total (see :class:`_WithRuntimeExtras`)."""
    if soc == _current_soc():
        here = _open_runtime()
        return here if getattr(here, "backend", "") == "native" else _WithRuntimeExtras(here)
    from ..sim import SimRuntime
    return _WithRuntimeExtras(SimRuntime(soc))


class _WithRuntimeExtras:
    """A simulator whose every context also holds a mem of its own, as large as weights +
    internal (rounded up to 4 KiB), with every init flag.  On a board the DMA total holds more
    than weights + internal + io: on an RK3588 with librknnrt 2.1.0, yolov5s holds 9.46 MB
    beyond its 13.46 MB of weights + internal right after init (airockchip/rknn-toolkit2#129).  With this remainder, comparing one DMA total with weight +
    internal + io fails, as it would on a board; comparing the same model with and without
    the flag still works.  The simulator frees the mem with its context (A7)."""

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def init(self, model: Any, flag: int = 0, *args: Any, **kwargs: Any) -> int:
        ctx = self._sim.init(model, flag, *args, **kwargs)
        m = self._sim.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        planned = int(m.total_weight_size) + int(m.total_internal_size)
        self._sim.create_mem(ctx, -(-max(planned, 1) // 4096) * 4096)
        return ctx


# =========================================================================== shared helpers
def _reports() -> List[Any]:
    from .. import models
    return [models.load_report(name, soc) for name in models.list_models() for soc in models.model_socs(name)]


def _label(report: Any) -> str:
    return f"{report.model} on {report.target}"


def _call(exc: BaseException, call: str, where: str) -> str:
    """The call to name in a message: where it failed, unless it is a stub (not done yet)."""
    return call if isinstance(exc, NotImplementedError) else f"{call} for {where}"


def _native_attrs(rt: Any, ctx: int) -> Tuple[List[abi.rknn_tensor_attr], List[abi.rknn_tensor_attr]]:
    io_num = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    ins = [rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=i))
           for i in range(io_num.n_input)]
    outs = [rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
            for i in range(io_num.n_output)]
    return ins, outs


def _destroy_all(rt: Any, contexts: Iterable[int]) -> None:
    for ctx in contexts:
        try:
            rt.destroy(ctx)
        except Exception:
            pass


# =========================================================================== exercise 1
def _accounting_truth(rt: Any, ctx: int) -> Dict[str, int]:
    m = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    ins, outs = _native_attrs(rt, ctx)
    io = sum(int(a.size_with_stride) for a in ins + outs)
    return {"weight": int(m.total_weight_size), "internal": int(m.total_internal_size), "io": io,
            "remainder": int(m.total_dma_allocated_size) - int(m.total_weight_size)
            - int(m.total_internal_size) - io}


def check_mem_size(my_fields: Any, my_flags: Any, dma_accounting: Any,
                   models_to_try: Sequence[str] = ("digits_cnn", "mobilenet_v2", "yolov5s")) -> CheckResult:
    """Exercise 1: ``my_fields`` maps each field of rknn_mem_size to a letter of
    :data:`MEANINGS`; ``my_flags`` says which init flag the API reference requires for
    RKNN_QUERY_MEM_SIZE and which one rknn_benchmark uses; ``dma_accounting(rt, ctx)``
    returns ``{"weight", "internal", "io", "remainder"}`` in bytes for a live context: the
    remainder is the part of total_dma_allocated_size that the three parts do not cover
    (on a board: register commands, task buffers, 4 KiB rounding; negative while io buffers
    are not yet allocated).

    The check runs ``dma_accounting`` on contexts of several models (one of them with an
    extra ``rknn_create_mem`` of the check's own, so that the DMA total holds memory that is
    neither weights, internal nor io: the simulator counts a mem in the context's DMA total,
    assumption A9) and compares every number with its own queries."""
    def body() -> CheckResult:
        if my_fields is None or not isinstance(my_fields, dict) or all(v is None for v in my_fields.values()):
            raise _not_done("my_fields is still empty.",
                            "fill in a letter of checks.MEANINGS for each of the five fields.")
        letters = {str(k): (str(v).strip().upper() if v is not None else None) for k, v in my_fields.items()}
        missing = [f for f in MEM_SIZE_FIELDS if not letters.get(f)]
        if missing:
            raise _not_done(f"no letter yet for {', '.join(missing)}.",
                            "every field of rknn_mem_size gets one letter of checks.MEANINGS.")
        unknown = [f"{f}: {letters[f]!r}" for f in MEM_SIZE_FIELDS if letters[f] not in MEANINGS]
        if unknown:
            raise _Fail(f"not letters of checks.MEANINGS: {', '.join(unknown)}.",
                        "use the letters A to H of checks.MEANINGS.")
        wrong = [f for f in MEM_SIZE_FIELDS if letters[f] != _FIELD_MEANING[f]]
        if wrong:
            hint = "read the table in chapter 1 §2 again: which of these are sizes the compiler decided, " \
                   "which is what the runtime allocated, and which are about SRAM?"
            if "total_internal_size" in wrong and letters["total_internal_size"] == _NAIVE_SUM:
                hint = ("total_internal_size is not the sum of all activations: the compiler reuses the "
                        "bytes of dead tensors (chapter 1 §3).")
            elif "total_weight_size" in wrong and letters["total_weight_size"] == _FILE_SIZE:
                hint = "the .rknn file holds more than the weights (the graph, the plan, the attrs)."
            # the wrong fields are named, never the right letter
            raise _Fail(f"{_of_yours(len(wrong), len(MEM_SIZE_FIELDS), 'answers')}: "
                        f"{', '.join(wrong)} {'has' if len(wrong) == 1 else 'have'} the wrong meaning.", hint)
        if not isinstance(my_flags, dict) or any(my_flags.get(k) is None for k in ("API reference", "rknn_benchmark")):
            raise _not_done("my_flags is not filled in yet.",
                            "give the init flag (an abi.RKNN_FLAG_... constant, or 0) for both keys.")
        ref, bench = _whole_number(my_flags.get("API reference")), _whole_number(my_flags.get("rknn_benchmark"))
        if ref != abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE or bench != 0:
            raise _Fail("my_flags does not say what the two documents say.",
                        "one of Rockchip's documents asks for a flag before this query, the other "
                        "queries after a plain rknn_init; the section 'Two documents disagree' names both.")
        if not callable(dma_accounting):
            raise _not_done(f"expected your dma_accounting function, got {type(dma_accounting).__name__}.",
                            "pass the function itself: checks.check_mem_size(my_fields, my_flags, dma_accounting)")

        rt = _open_runtime()
        soc = _current_soc()
        from .. import models
        names = [m for m in models_to_try if soc in models.model_socs(m)]
        details, problems = [], []
        for k, name in enumerate(names):
            ctx = rt.init(str(models.model_path(name, soc)))
            extra = None
            try:
                if k == len(names) - 1:   # DMA memory that is neither weights, internal nor io
                    extra = rt.create_mem(ctx, 65536 + 4096 * random.randrange(1, 16))
                truth = _accounting_truth(rt, ctx)
                try:
                    got = dma_accounting(rt, ctx)
                except Exception as exc:
                    raise _student_error(exc, _call(exc, "dma_accounting(rt, ctx)", name),
                                         "query RKNN_QUERY_MEM_SIZE, then the NATIVE attrs of every input "
                                         "and output; add up their size_with_stride.")
                if got is None:
                    raise _not_done("dma_accounting returned None.",
                                    "return a dict with the keys weight, internal, io and remainder.")
                if not isinstance(got, dict):
                    raise _Fail(f"dma_accounting returned a {type(got).__name__}, not a dict.",
                                "return {'weight': ..., 'internal': ..., 'io': ..., 'remainder': ...}.")
                for key, want in truth.items():
                    value = _whole_number(got.get(key))
                    if value is None:
                        raise _Fail(f"dma_accounting gave no whole number of bytes for {key!r} ({name}).",
                                    "every value is a number of bytes (an int).")
                    if value != want:
                        problems.append((name, key, value, want, extra is not None))
                if not any(p[0] == name for p in problems):
                    details.append(f"{name}: all four numbers agree with the check's own queries"
                                   + (" (with the check's extra rknn_create_mem in the DMA total)" if extra else ""))
            finally:
                if extra is not None:
                    rt.destroy_mem(ctx, extra)
                rt.destroy(ctx)
        if problems:
            lines = [f"{name}: your {key} is {value:,} B: {'too large' if value > want else 'too small'}"
                     + (" (this context holds an extra mem the check created)" if extra else "")
                     for name, key, value, want, extra in problems]
            keys = {p[1] for p in problems}
            if "io" in keys and all(p[4] for p in problems if p[1] == "io"):
                hint = ("the io buffers are not whatever is left of the DMA total: add up the NATIVE attrs' "
                        "size_with_stride. What the three parts do not cover belongs in 'remainder'.")
            elif "io" in keys:
                hint = ("size the io buffers from RKNN_QUERY_NATIVE_INPUT_ATTR / NATIVE_OUTPUT_ATTR and their "
                        "size_with_stride, for every input and every output: the runtime keeps each io tensor "
                        "in the NPU's layout, padding included.")
            elif keys & {"weight", "internal"}:
                hint = "take total_weight_size and total_internal_size from RKNN_QUERY_MEM_SIZE on this context."
            else:
                hint = "remainder = total_dma_allocated_size - (weight + internal + io)."
            raise _Fail(f"{len(problems)} {'number differs' if len(problems) == 1 else 'numbers differ'} from the check's own queries "
                        f"({rt.source if hasattr(rt, 'source') else soc}).", hint, lines)
        return CheckResult(EX1, "passed",
                           "The five fields are right, the two documents are told apart, and your DMA "
                           "account agrees with the runtime on every context the check made.", details)

    return _LAB.run(EX1, body)


# =========================================================================== exercise 2
def _layout_rule(attr: abi.rknn_tensor_attr) -> Tuple[int, int]:
    """size and size_with_stride of a buffer in the attr's layout: the product of its dims
    times the element size; rows of max(w_stride, W) pixels for size_with_stride."""
    dims = attr_dims(attr)
    item = abi.TYPE_TO_NUMPY[attr.type].itemsize
    size = math.prod(dims) * item
    if attr.fmt == abi.RKNN_TENSOR_NHWC and len(dims) == 4:
        n, h, w, c = dims
        return size, n * h * max(int(attr.w_stride), w) * c * item
    if attr.fmt == abi.RKNN_TENSOR_NC1HWC2 and len(dims) == 5:
        n, c1, h, w, c2 = dims
        return size, n * c1 * h * max(int(attr.w_stride), w) * c2 * item
    return size, size


def _blanked(attr: abi.rknn_tensor_attr) -> abi.rknn_tensor_attr:
    """A copy with the answer taken out: no size, size_with_stride, n_elems, name or index."""
    copy = abi.rknn_tensor_attr()
    ctypes.memmove(ctypes.addressof(copy), ctypes.addressof(attr), ctypes.sizeof(copy))
    copy.size = copy.size_with_stride = copy.n_elems = 0
    copy.index = 0
    copy.name = b""
    return copy


def _made_up_attr(dims: Sequence[int], fmt: int, rknn_type: int, w_stride: int = 0) -> abi.rknn_tensor_attr:
    attr = abi.rknn_tensor_attr(n_dims=len(dims), fmt=fmt, type=rknn_type, w_stride=w_stride)
    for i, d in enumerate(dims):
        attr.dims[i] = d
    return attr


def _made_up_attrs() -> List[Tuple[str, abi.rknn_tensor_attr]]:
    """Tensors no course model has (other shapes, fp16 and float32 types): a function that
    computes passes them, one that looks its answers up does not."""
    rng = random.Random()
    h, w = rng.randrange(20, 60), rng.randrange(17, 45)
    return [
        ("a made-up NHWC uint8 input with padded rows",
         _made_up_attr((1, h, w, 3), abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_UINT8, -(-w // 16) * 16 + 16)),
        ("a made-up NC1HWC2 float16 tensor (C2 = 8)",
         _made_up_attr((1, rng.randrange(2, 9), h, w, 8), abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_FLOAT16)),
        ("a made-up NC1HWC2 int8 tensor (C2 = 8)",
         _made_up_attr((1, rng.randrange(3, 12), h // 2, w // 2, 8), abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_INT8)),
        ("a made-up 2-D float32 output",
         _made_up_attr((1, rng.randrange(11, 99)), abi.RKNN_TENSOR_UNDEFINED, abi.RKNN_TENSOR_FLOAT32)),
        ("a made-up NHWC int8 input, 1 channel, padded rows",
         _made_up_attr((1, h, w, 1), abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_INT8, -(-w // 8) * 8 + 8)),
    ]


def _runtime_cases(socs: Sequence[str]) -> Tuple[List[Tuple[str, str, abi.rknn_tensor_attr, Tuple[int, int]]], List[str]]:
    """(soc, description, native attr, (size, size_with_stride) as the runtime reports them)
    for every io tensor of every course model on ``socs``; tensors whose reported sizes the
    layout rule does not explain (a runtime that pads rows without saying so in w_stride)
    are left out and named."""
    from .. import models
    cases, left_out = [], []
    for soc in socs:
        rt = runtime_for(soc)
        for name in models.list_models():
            if soc not in models.model_socs(name):
                continue
            ctx = rt.init(str(models.model_path(name, soc)))
            try:
                ins, outs = _native_attrs(rt, ctx)
            finally:
                rt.destroy(ctx)
            for kind, attrs in (("input", ins), ("output", outs)):
                for a in attrs:
                    what = (f"{name} {kind} {a.index} on {soc} ({abi.FMT_NAMES.get(a.fmt, a.fmt)}, "
                            f"{abi.TYPE_NAMES.get(a.type, a.type)}, dims {list(attr_dims(a))})")
                    reported = (int(a.size), int(a.size_with_stride))
                    if _layout_rule(a) != reported:
                        left_out.append(what)
                        continue
                    cases.append((soc, what, a, reported))
    return cases, left_out


def _predicted_truth(socs: Sequence[str]) -> Dict[str, int]:
    """The native size_with_stride of :data:`PREDICTED_TENSOR` on each SoC, as its runtime reports it."""
    from .. import models
    model, kind, index = PREDICTED_TENSOR
    cmd = abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR if kind == "output" else abi.RKNN_QUERY_NATIVE_INPUT_ATTR
    truth = {}
    for soc in socs:
        rt = runtime_for(soc)
        ctx = rt.init(str(models.model_path(model, soc)))
        try:
            truth[soc] = int(rt.query(ctx, cmd, abi.rknn_tensor_attr(index=index)).size_with_stride)
        finally:
            rt.destroy(ctx)
    return truth


def _record_prediction(predicted: Any, truth: Dict[str, int]) -> str:
    """One line that records the prediction beside the runtimes, without grading it and
    without the runtimes' numbers (the reveal after the check prints them).  _not_done or
    _Fail only when there is no prediction or it is not one number of bytes per SoC.

    Not graded, because an honest prediction can miss: on rk3568 the compiler stores more
    channel blocks than ceil(C / C2), and a board may pad rows that w_stride does not show."""
    model, kind, index = PREDICTED_TENSOR
    shape = "{" + ", ".join(f"{soc!r}: ..." for soc in truth) + "}"
    if predicted is None or (isinstance(predicted, dict) and all(v is None for v in predicted.values())):
        raise _not_done("no prediction recorded yet.",
                        f"fill in predicted = {shape} with numbers of bytes, before you run the cell that "
                        "prints the native attrs.")
    if not isinstance(predicted, dict):
        raise _Fail(f"predicted is a {type(predicted).__name__}, not a dict.", f"predicted = {shape}.")
    given = {str(k).lower(): v for k, v in predicted.items()}
    if set(given) != set(truth):
        raise _Fail(f"predicted has the keys {sorted(given)}; expected one per SoC: {shape}.",
                    f"predicted = {shape}.")
    parts = []
    for soc, want in truth.items():
        value = _whole_number(given[soc])
        if value is None:
            raise _Fail(f"predicted[{soc!r}] = {given[soc]!r:.40} is not a whole number of bytes.",
                        "a prediction is a number of bytes (an int).")
        verdict = ("equals the runtime's" if value == want else
                   f"the runtime's is {'smaller' if value > want else 'larger'}")
        parts.append(f"{soc} {value:,} B ({verdict})")
    return (f"your prediction for {model} {kind} {index}, recorded, not graded: " + "; ".join(parts)
            + ". The cell after the check shows the runtime's numbers and why.")


def check_size_prediction(predict_sizes: Any, predicted: Any = None) -> CheckResult:
    """Exercise 2: ``predicted`` is ``{soc: bytes}``, the native size_with_stride of
    :data:`PREDICTED_TENSOR` on the SoC at hand and on :func:`other_soc`, written down before
    the notebook prints it; ``predict_sizes(native_attr) -> (size, size_with_stride)``.

    The check records the prediction beside the runtimes without grading it (an honest
    prediction can miss: that is the lesson of the reveal).  Then it calls your function on the
    NATIVE attrs of every input and output of every course model on the two SoCs (their int8
    C2 differs) and on a few made-up tensors, each time with ``size``, ``size_with_stride``,
    ``n_elems``, ``name`` and ``index`` set to 0: the function has to compute, not read.  It
    compares with what the runtime reports."""
    def body() -> CheckResult:
        here = _current_soc()
        socs = [here, other_soc(here)]
        prediction = _record_prediction(predicted, _predicted_truth(socs))
        if not callable(predict_sizes):
            raise _not_done(f"expected your predict_sizes function, got {type(predict_sizes).__name__}.",
                            "pass the function itself: checks.check_size_prediction(predict_sizes, predicted)")
        cases, left_out = _runtime_cases(socs)
        made_up = [("made up", what, a, _layout_rule(a)) for what, a in _made_up_attrs()]
        wrong, c2_suspect, stride_suspect, item_suspect = [], 0, 0, 0
        for soc, what, attr, (size, with_stride) in cases + made_up:
            try:
                got = predict_sizes(_blanked(attr))
            except Exception as exc:
                raise _student_error(exc, _call(exc, "predict_sizes(attr)", what),
                                     "use only dims, n_dims, fmt, type and w_stride of the attr.")
            if got is None:
                raise _not_done("predict_sizes returned None.", "return a pair: (size, size_with_stride).")
            try:
                p_size, p_stride = (_whole_number(v) for v in got)
            except (TypeError, ValueError):
                raise _Fail(f"predict_sizes returned {type(got).__name__} {got!r:.60}, not a pair of numbers.",
                            "return a pair: (size, size_with_stride), both in bytes.") from None
            if p_size is None or p_stride is None:
                raise _Fail(f"predict_sizes returned {got!r:.60}: not two whole numbers of bytes.",
                            "return a pair of ints: (size, size_with_stride).")
            if (p_size, p_stride) == (size, with_stride):
                continue
            verdict = []
            for label, p, t in (("size", p_size, size), ("size_with_stride", p_stride, with_stride)):
                if p != t:
                    verdict.append(f"{label} too {'large' if p > t else 'small'} (your {p:,} B)")
            wrong.append(f"{what}: " + ", ".join(verdict))
            dims = attr_dims(attr)
            if attr.fmt == abi.RKNN_TENSOR_NC1HWC2 and len(dims) == 5 and dims[4] != 16 and p_size * dims[4] == size * 16:
                c2_suspect += 1
            if p_size == size and p_stride == p_size and with_stride != size:
                stride_suspect += 1
            item = abi.TYPE_TO_NUMPY[attr.type].itemsize
            if item != 1 and p_size * item == size:
                item_suspect += 1
        if wrong:
            if c2_suspect:
                hint = ("C2 is not always 16: on rk3566/rk3568 it is 8 for int8. Read it from the native "
                        "attr's dims[4], never assume it.")
            elif stride_suspect:
                hint = ("size_with_stride counts the padding at the end of each row: rows of w_stride "
                        "pixels (when w_stride is larger than the width).")
            elif item_suspect:
                hint = "not every tensor is int8: multiply by the element size of attr.type (2 for float16, 4 for float32)."
            else:
                hint = ("the native buffer is the product of the native dims times the element size; the size and "
                        "size_with_stride fields are set to 0 in the attrs the check passes you.")
            raise _Fail(f"{_of_yours(len(wrong), len(cases) + len(made_up), 'results')} "
                        f"(compared with the runtime's, or, for the made-up tensors, with the layout rule "
                        f"the runtime's numbers follow).",
                        hint, wrong[:6] + ([f"... and {len(wrong) - 6} more"] if len(wrong) > 6 else []))
        details = [prediction] + [f"{sum(c[0] == s for c in cases)} io tensors of the course models on {s}"
                                  for s in socs]
        details.append(f"{len(made_up)} made-up tensors (other shapes, float16, float32)")
        if left_out:
            details.append("left out, because their reported size_with_stride pads rows that w_stride "
                           "does not show: " + "; ".join(left_out[:4]))
        return CheckResult(EX2, "passed", "predict_sizes computes the size and size_with_stride that the runtime "
                           "reports, for every tensor it was given, on both SoCs.", details)

    return _LAB.run(EX2, body)


# =========================================================================== exercises 3 and 5: the plan
def _answers_file() -> str:
    """The file name that the code of rknnlab.layers carries (as imported, relative or not)."""
    from .. import layers
    return layers.live_bytes_per_layer.__code__.co_filename


class _Student:
    """Calls the student's functions and notes every call into rknnlab.layers, chapter 1's
    own analysis (high-water mark, largest activations): exercises 3 and 5 ask for that code."""

    def __init__(self) -> None:
        self.target = _answers_file()
        self.used: Set[str] = set()

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        def hook(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename == self.target:
                self.used.add(frame.f_code.co_name)
        previous = sys.getprofile()
        sys.setprofile(hook)
        try:
            return fn(*args)
        finally:
            sys.setprofile(previous)

    def refuse_shortcut(self) -> None:
        if self.used:
            public = sorted(n for n in self.used if n[:1] not in "_<") or sorted(self.used)
            raise _Fail(f"your code calls rknnlab.layers ({', '.join(public)}): chapter 1's own analysis, "
                        "which computes what this exercise asks for.",
                        "write it yourself from report.lifetimes(): that is the skill the exercise assesses.")


def _alive(report: Any, layer: int) -> Set[str]:
    return {t.tensor for t in report.lifetimes() if t.first_layer <= layer <= t.last_layer}


def _union_bytes(spans: Iterable[Tuple[int, int]]) -> int:
    total, end = 0, None
    start = None
    for s, e in sorted(spans):
        if start is None:
            start, end = s, e
        elif s <= end:
            end = max(end, e)
        else:
            total += end - start
            start, end = s, e
    return total + (end - start if start is not None else 0)


def _in_use(report: Any, layer: int) -> int:
    return _union_bytes((t.start, t.end) for t in report.lifetimes() if t.first_layer <= layer <= t.last_layer)


def _layers(report: Any) -> range:
    return range(max(t.last_layer for t in report.lifetimes()) + 1)


def _peak(report: Any) -> Tuple[int, List[int]]:
    per = {layer: _in_use(report, layer) for layer in _layers(report)}
    top = max(per.values())
    return top, [layer for layer, v in per.items() if v == top]


def _made_up_plan() -> Any:
    """A small plan with a Concat whose inputs are laid inside its output: where a sum of
    sizes counts the shared bytes twice, the high-water mark moves to the wrong layer."""
    from ..models import CompilerReport
    ops = ["InputOperator", "Conv", "Conv", "Concat", "Conv", "OutputOperator"]
    layers = [{"id": i, "op": op, "name": f"{op}:{i}", "cycles_total": 0} for i, op in enumerate(ops)]
    # tensor: (producer, readers, start, end, channels, h, w)
    tensors = {"x": (0, (1, 2), 200, 320, 3, 5, 8), "a": (1, (3,), 0, 100, 4, 5, 5),
               "b": (2, (3,), 100, 200, 4, 5, 5), "c": (3, (4,), 0, 200, 8, 5, 5),
               "d": (4, (5,), 200, 260, 3, 4, 5)}
    rows = []
    for name, (producer, readers, start, end, c, h, w) in tensors.items():
        for layer in readers:
            rows.append({"layer_id": layer, "user": ops[layer], "tensor": name, "dtype": "INT8",
                         "fmt": "NC1HWC2", "orig_shape": [1, c, h, w], "native_shape": [1, 1, h, w, 16],
                         "start": start, "end": end, "size": end - start, "starred": False,
                         "producer_layer_id": producer})
    data = {"model": "a made-up plan", "target": "no SoC", "layers": layers, "feature_tensors": rows,
            "memory": {"total_weight_size": 0, "total_internal_size": 320}}
    return CompilerReport(data)


def _plans() -> List[Any]:
    return _reports() + [_made_up_plan()]


def _runtime_agrees_with_reports() -> str:
    """One line: does the runtime at hand report the plans' total_internal_size?"""
    from .. import models
    soc, rt = _current_soc(), _open_runtime()
    same, names = 0, [n for n in models.list_models() if soc in models.model_socs(n)]
    for name in names:
        ctx = rt.init(str(models.model_path(name, soc)))
        try:
            same += rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_internal_size == models.load_report(name, soc).total_internal_size
        finally:
            rt.destroy(ctx)
    return (f"the runtime at hand ({getattr(rt, 'source', soc)}) reports the plan's total_internal_size "
            f"for {same} of {len(names)} models on {soc}")


def _judge_high_water(in_use_bytes: Callable[..., Any], high_water_mark: Callable[..., Any],
                      plans: List[Any], call: "_Student") -> None:
    """Part (a): _Fail unless bytes in use and the high-water mark are right on every plan."""
    wrong_bytes, wrong_peak = [], []
    for report in plans:
        bad_layers = []
        for layer in _layers(report):
            try:
                got = call(in_use_bytes, report, layer)
            except Exception as exc:
                raise _student_error(exc, _call(exc, "in_use_bytes(report, layer)", f"layer {layer} of {_label(report)}"),
                                     "use report.lifetimes(): a tensor is alive from first_layer to "
                                     "last_layer, both included.")
            if got is None:
                raise _not_done("in_use_bytes returned None.", "return a number of bytes.")
            value = _whole_number(got)
            if value != _in_use(report, layer):
                bad_layers.append((layer, value))
        if bad_layers:
            layer, value = bad_layers[0]
            truth = _in_use(report, layer)
            how = ("not a whole number" if value is None
                   else f"your {value:,} B is too {'large' if value > truth else 'small'}")
            wrong_bytes.append(f"{_label(report)}: wrong at {len(bad_layers)} layer(s), e.g. layer {layer} ({how})")
        try:
            got = call(high_water_mark, report)
        except Exception as exc:
            raise _student_error(exc, _call(exc, "high_water_mark(report)", _label(report)),
                                 "find the layer with the most bytes in use, then the tensors alive there.")
        if got is None:
            raise _not_done("high_water_mark returned None.", "return (layer, set of tensor names).")
        try:
            layer, names = got
            layer, names = _whole_number(layer), {str(n) for n in names}
        except (TypeError, ValueError):
            raise _Fail(f"high_water_mark returned {got!r:.60}, not (layer, names).",
                        "return a pair: the layer (an int) and the names of the tensors alive there.") from None
        top, top_layers = _peak(report)
        if layer not in top_layers:
            mine = _in_use(report, layer) if layer is not None and layer in _layers(report) else None
            wrong_peak.append(f"{_label(report)}: your layer {layer} is not where the most bytes are in use"
                              + (f" (it has {100 * mine / top:.0f}% of the most)" if mine is not None else ""))
        elif names != _alive(report, layer):
            truth = _alive(report, layer)
            wrong_peak.append(f"{_label(report)}: at layer {layer}, your {len(names)} names: "
                              f"{len(names - truth)} too many, {len(truth - names)} missing")
    call.refuse_shortcut()
    if wrong_bytes or wrong_peak:
        made_up = [w for w in wrong_bytes + wrong_peak if w.startswith("a made-up plan")]
        if made_up and len(made_up) == len(wrong_bytes + wrong_peak):
            hint = ("a Concat's inputs can be laid inside its output: those bytes are shared, so count "
                    "the bytes of the buffer in use (the union of the [start, end) ranges), not the sum of sizes.")
        elif wrong_bytes:
            hint = ("a tensor is alive from the layer that writes it (first_layer) to the last layer that "
                    "reads it (last_layer), both included; count each byte of the buffer once.")
        else:
            hint = "use your in_use_bytes: the high-water mark is a layer where it is largest."
        raise _Fail(f"part (a): {len(wrong_bytes)} of {len(plans)} plans with wrong bytes in use, "
                    f"{len(wrong_peak)} with a wrong high-water mark.", hint, (wrong_bytes + wrong_peak)[:6])


def _saving_truth(report: Any) -> Dict[str, int]:
    naive = sum(t.size for t in report.lifetimes())
    internal = report.total_internal_size
    return {"naive": naive, "internal": internal, "saved": naive - internal,
            "above_lower_bound": internal - _peak(report)[0]}


def _judge_saving(reuse_saving: Callable[..., Any], plans: List[Any], call: "_Student") -> None:
    """Part (b): _Fail unless the four numbers of reuse_saving are right on every plan."""
    wrong: Dict[str, List[str]] = {}
    for report in plans:
        try:
            got = call(reuse_saving, report)
        except Exception as exc:
            raise _student_error(exc, _call(exc, "reuse_saving(report)", _label(report)),
                                 "each tensor once, from report.lifetimes(); the plan's size is total_internal_size.")
        if got is None:
            raise _not_done("reuse_saving returned None.",
                            "return a dict with naive, internal, saved and above_lower_bound.")
        if not isinstance(got, dict):
            raise _Fail(f"reuse_saving returned a {type(got).__name__}, not a dict.",
                        "return {'naive': ..., 'internal': ..., 'saved': ..., 'above_lower_bound': ...}.")
        for key, want in _saving_truth(report).items():
            value = _whole_number(got.get(key))
            if value != want:
                how = "missing" if value is None else f"your {value:,} B is too {'large' if value > want else 'small'}"
                wrong.setdefault(key, []).append(f"{_label(report)}: {key}: {how}")
    call.refuse_shortcut()
    if wrong:
        first = next(iter(wrong))
        hints = {
            "naive": ("one buffer per tensor: count each tensor once (a tensor has one row per layer that "
                      "reads it), with the bytes the plan gives it (end - start, padding included)."),
            "internal": "the plan's size is the internal buffer the runtime allocates: total_internal_size.",
            "saved": "saved = naive - internal: what one buffer per tensor would cost beyond the plan.",
            "above_lower_bound": ("above_lower_bound = internal - the high-water mark of part (a) "
                                  "(bytes in use, shared bytes counted once)."),
        }
        lines = [line for key in wrong for line in wrong[key][:2]]
        raise _Fail(f"part (b): wrong for {', '.join(f'{k} ({len(v)} of {len(plans)} plans)' for k, v in wrong.items())}.",
                    hints[first], lines[:6])


def check_plan(in_use_bytes: Any, high_water_mark: Any, reuse_saving: Any) -> CheckResult:
    """Exercise 3.  Part (a): ``in_use_bytes(report, layer)`` is the number of bytes of the
    internal buffer that hold live tensors at ``layer`` (bytes shared by two tensors count
    once); ``high_water_mark(report)`` returns ``(layer, names)``: a layer where that number
    is largest, and the set of tensors alive there.  Part (b): ``reuse_saving(report)``
    returns ``{"naive", "internal", "saved", "above_lower_bound"}`` in bytes: one buffer per
    activation tensor, the plan's internal buffer, their difference, and how far the plan is
    above the high-water mark.  Checked on every course model on every SoC, and on a made-up
    plan with a Concat."""
    def body() -> CheckResult:
        for f, name in ((in_use_bytes, "in_use_bytes"), (high_water_mark, "high_water_mark"),
                        (reuse_saving, "reuse_saving")):
            if not callable(f):
                raise _not_done(f"expected your {name} function, got {type(f).__name__}.",
                                "pass the functions themselves: "
                                "checks.check_plan(in_use_bytes, high_water_mark, reuse_saving)")
        plans = _plans()
        _judge_high_water(in_use_bytes, high_water_mark, plans, _Student())
        _judge_saving(reuse_saving, plans, _Student())
        return CheckResult(EX3, "passed", f"Bytes in use, the high-water mark, the saving and the distance to "
                           f"the lower bound are right for all {len(plans)} plans (every course model on every "
                           "SoC, and a made-up one with a Concat).", [_runtime_agrees_with_reports()])

    return _LAB.run(EX3, body)


def _tensor_rows(report: Any) -> Dict[str, Dict[str, Any]]:
    return {row["tensor"]: row for row in report.data["feature_tensors"]}


def _property(report: Any, key: str) -> Dict[str, float]:
    rows = _tensor_rows(report)
    cycles = {layer["id"]: layer.get("cycles_total", 0) for layer in report.layers}
    out = {}
    for t in report.lifetimes():
        shape = rows[t.tensor]["orig_shape"]
        if key == "height x width":
            out[t.tensor] = float(shape[2] * shape[3]) if len(shape) == 4 else 1.0
        elif key == "channels":
            out[t.tensor] = float(shape[1]) if len(shape) >= 2 else 1.0
        elif key == "lifetime":
            out[t.tensor] = float(t.last_layer - t.first_layer)
        elif key == "npu cycles":
            out[t.tensor] = float(cycles.get(t.first_layer, 0))
        else:   # depth: the earlier, the higher
            out[t.tensor] = float(-t.first_layer)
    return out


def _rank_agreement(report: Any, key: str) -> float:
    """Spearman's rank correlation between a property and the tensors' bytes in the plan."""
    spans = report.lifetimes()
    prop = _property(report, key)
    sizes = np.array([t.size for t in spans], float)
    values = np.array([prop[t.tensor] for t in spans], float)

    def ranks(v: np.ndarray) -> np.ndarray:   # average ranks for ties
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):
            tied = v == value
            r[tied] = r[tied].mean()
        return r

    a, b = ranks(sizes), ranks(values)
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _agreement_by_reason() -> Dict[str, float]:
    reports = [r for r in _reports() if len(r.lifetimes()) >= 10]   # too few tensors say nothing
    return {key: float(np.mean([_rank_agreement(r, key) for r in reports])) for key in REASONS}


def _least_explained(key: str) -> Tuple[Dict[Tuple[str, str], float], float]:
    """The rank correlation of ``key`` with the bytes for every plan of 10 tensors or more,
    and the lowest of them."""
    agreement = {(r.model, r.target): _rank_agreement(r, key) for r in _reports() if len(r.lifetimes()) >= 10}
    return agreement, min(agreement.values())


def _judge_exception(my_exception: Any, key: str) -> str:
    """Part 3: ``my_exception`` is ``(model, soc)``, the plan whose bytes ``key`` explains
    least.  Plans within 0.005 of the lowest correlation are accepted (ties of twin builds)."""
    if my_exception is None:
        raise _not_done("my_exception is still None.",
                        "measure the rank correlation of 'height x width' with the bytes for each plan.")
    if not isinstance(my_exception, (tuple, list)) or len(my_exception) != 2:
        raise _Fail(f"my_exception is {my_exception!r:.60}, not a pair (model, soc).",
                    "my_exception = (model, soc), for example ('yolov5s', 'rk3588').")
    pair = (str(my_exception[0]).lower(), str(my_exception[1]).lower())
    agreement, lowest = _least_explained(key)
    if pair not in agreement:
        raise _Fail(f"{pair} is not a course plan with 10 tensors or more.",
                    "take (report.model, report.target) of a plan with at least 10 tensors.")
    if agreement[pair] > lowest + 0.005:
        raise _Fail(f"for {pair[0]} on {pair[1]}, the rank correlation of '{key}' with the bytes is "
                    f"{agreement[pair]:+.2f}; another plan agrees less.",
                    "compute the correlation plan by plan, not the mean, and take the lowest.")
    return (f"{pair[0]} on {pair[1]}: '{key}' explains its bytes least (rank correlation "
            f"{agreement[pair]:+.2f}, against a mean of {float(np.mean(list(agreement.values()))):+.2f})")


def check_dominant(largest_activations: Any, my_reason: Any, my_exception: Any = None) -> CheckResult:
    """Exercise 5: ``largest_activations(report, k)`` returns the names of the k activation
    tensors that take the most bytes in the plan, largest first; ``my_reason`` is the key
    of :data:`REASONS` whose ranking agrees best with the tensors' bytes, measured as the
    mean rank correlation over the course models; ``my_exception`` is ``(model, soc)``, the
    plan (10 tensors or more) whose bytes that key explains least."""
    def body() -> CheckResult:
        if not callable(largest_activations):
            raise _not_done(f"expected your largest_activations function, got {type(largest_activations).__name__}.",
                            "pass the function itself: checks.check_dominant(largest_activations, my_reason)")
        wrong, plans, call = [], _reports(), _Student()
        for report in plans:
            sizes = {t.tensor: t.size for t in report.lifetimes()}
            want = sorted(sizes.values(), reverse=True)[:_TOP_K]
            try:
                got = call(largest_activations, report, _TOP_K)
            except Exception as exc:
                raise _student_error(exc, _call(exc, f"largest_activations(report, {_TOP_K})", _label(report)),
                                     "rank the tensors of report.lifetimes() by their size in the plan.")
            if got is None:
                raise _not_done("largest_activations returned None.", "return a list of tensor names, largest first.")
            names = [str(n) for n in got] if isinstance(got, (list, tuple)) else None
            if names is None:
                raise _Fail(f"largest_activations returned a {type(got).__name__}, not a list of names.",
                            "return a list of tensor names, largest first.")
            if len(names) != _TOP_K or len(set(names)) != len(names):
                wrong.append(f"{_label(report)}: {len(names)} names, {len(set(names))} different (want {_TOP_K} different)")
            elif any(n not in sizes for n in names):
                wrong.append(f"{_label(report)}: a name that is not an activation tensor of the plan")
            elif sorted((sizes[n] for n in names), reverse=True) != want:
                share = sum(sizes[n] for n in names) / sum(want)
                wrong.append(f"{_label(report)}: your {_TOP_K} names hold {share:.0%} of the bytes of the "
                             f"{_TOP_K} largest")
            elif [sizes[n] for n in names] != want:
                wrong.append(f"{_label(report)}: the {_TOP_K} largest, but not largest first")
        call.refuse_shortcut()
        if wrong:
            hint = ("count each tensor once (a tensor has one row per layer that reads it) and rank by the bytes "
                    "the plan gives it (end - start), largest first; not by its channel count.")
            raise _Fail(f"wrong for {len(wrong)} of {len(plans)} plans.", hint, wrong[:6])
        if my_reason is None:
            raise _not_done("my_reason is still None.", "pick one key of checks.REASONS, from your measurement.")
        if my_reason not in REASONS:
            raise _Fail(f"my_reason {my_reason!r:.40} is not a key of checks.REASONS.",
                        f"one of: {', '.join(repr(k) for k in REASONS)}.")
        agreement = _agreement_by_reason()
        best = max(agreement, key=agreement.get)
        if my_reason != best:
            raise _Fail(f"'{my_reason}' ranks the tensors in an order that agrees with their bytes with a mean rank "
                        f"correlation of {agreement[my_reason]:+.2f}; another property agrees better.",
                        "measure it: for each key, compare the tensors' order by that property with their order "
                        "by bytes (a rank correlation), over all the course models.")
        exception = _judge_exception(my_exception, my_reason)
        return CheckResult(EX5, "passed", f"The {_TOP_K} largest activations are right for all {len(plans)} plans, "
                           f"'{my_reason}' is the property that explains their size best "
                           f"(mean rank correlation {agreement[my_reason]:+.2f}), and you found where it explains "
                           "least.", [exception])

    return _LAB.run(EX5, body)


# =========================================================================== exercise 4
_RUNTIME_ALLOCATES = {0: {"weight", "internal", "io"},
                      abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE: {"weight", "io"},
                      abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE: set()}
_QUERIES_ALLOWED = (abi.RKNN_QUERY_IN_OUT_NUM, abi.RKNN_QUERY_MEM_SIZE, abi.RKNN_QUERY_INPUT_ATTR,
                    abi.RKNN_QUERY_OUTPUT_ATTR, abi.RKNN_QUERY_NATIVE_INPUT_ATTR,
                    abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)


def _query_function(rt: Any, ctx: int) -> Callable[..., Any]:
    def query(cmd: int, info: Any = None) -> Any:
        """rknn_query on the unknown context: RKNN_QUERY_IN_OUT_NUM, MEM_SIZE and the
        (NATIVE_)INPUT/OUTPUT_ATTR queries."""
        if cmd not in _QUERIES_ALLOWED:
            raise ValueError(f"this exercise answers {', '.join(abi.QUERY_NAMES[c] for c in _QUERIES_ALLOWED)}")
        return rt.query(ctx, cmd, info)
    return query


def _evidence(report: Any) -> Tuple[Any, ...]:
    def shape(attrs: List[Dict[str, Any]]) -> Tuple[Any, ...]:
        return tuple((tuple(a["dims"]), a["fmt"], a["type"]) for a in attrs)
    return (report.total_weight_size, report.total_internal_size,
            shape(report.attrs("inputs", "native")), shape(report.attrs("outputs", "native")))


def _mysteries(rng: random.Random) -> List[Tuple[str, str, int]]:
    """(model, soc, flag): one on rk3568 (C2 = 8), one on another SoC with C2 = 16 that is not
    rk3588, two models of rk3588 that share their output shapes, the three init flags."""
    from .. import models
    by_soc: Dict[str, List[str]] = {}
    for name in models.list_models():
        for soc in models.model_socs(name):
            by_soc.setdefault(soc, []).append(name)
    picks = []
    if by_soc.get("rk3568"):
        picks.append((rng.choice(by_soc["rk3568"]), "rk3568"))
    others = [s for s in by_soc if s not in ("rk3568", "rk3588")]
    if others:
        soc = rng.choice(sorted(others))
        picks.append((rng.choice(by_soc[soc]), soc))
    groups: Dict[Any, List[str]] = {}
    for name in by_soc.get("rk3588", []):
        groups.setdefault(_evidence(models.load_report(name, "rk3588"))[3], []).append(name)
    twins = max(groups.values(), key=len, default=[])
    picks += [(name, "rk3588") for name in rng.sample(twins, min(2, len(twins)))]
    flags = list(_RUNTIME_ALLOCATES)
    rng.shuffle(flags)
    return [(name, soc, flags[i % len(flags)]) for i, (name, soc) in enumerate(picks)]


def _accepted(model: str, soc: str) -> Set[Tuple[str, str]]:
    """The (model, soc) pairs that no query can tell from the true one."""
    from .. import models
    target = _evidence(models.load_report(model, soc))
    return {(r.model, r.target) for r in _reports() if _evidence(r) == target} | {(model, soc)}


def check_diagnosis(diagnose: Any) -> CheckResult:
    """Exercise 4: ``diagnose(query)`` gets only a query function on an unknown context and
    returns ``{"model": ..., "soc": ..., "runtime_allocated": set}``: the course model, the
    SoC it was compiled for, and which of "weight", "internal", "io" the runtime allocated at
    init or at the first run (which depends on the init flag).  New unknowns every run.

    The method that also works on a board: name the model and SoC first, then init the same
    model with flag 0 (:func:`runtime_for`) and compare the two DMA totals; the difference is
    the part that the flag makes the caller's.  A remainder (register commands, task buffers, 4 KiB
    rounding) is in both totals, so it largely cancels (not documented; check with
    examples/c/mem_layers.c).  The unknown contexts come from :func:`runtime_for`: on the
    simulator they carry a board-like remainder, so comparing one total with weight +
    internal + io fails here as it would on a board."""
    def body() -> CheckResult:
        if not callable(diagnose):
            raise _not_done(f"expected your diagnose function, got {type(diagnose).__name__}.",
                            "pass the function itself: checks.check_diagnosis(diagnose)")
        from .. import models
        rng = random.Random()
        wrong, n = [], 0
        for k, (model, soc, flag) in enumerate(_mysteries(rng), start=1):
            rt = runtime_for(soc)
            ctx = rt.init(str(models.model_path(model, soc)), flag)
            try:
                got = diagnose(_query_function(rt, ctx))
            except Exception as exc:
                raise _student_error(exc, _call(exc, "diagnose(query)", f"unknown context {k}"),
                                     "call query(abi.RKNN_QUERY_MEM_SIZE) and the NATIVE attr queries, then "
                                     "compare with every course model's compiler report.")
            finally:
                _destroy_all(rt, [ctx])
            if got is None:
                raise _not_done("diagnose returned None.", "return {'model': ..., 'soc': ..., 'runtime_allocated': {...}}.")
            if not isinstance(got, dict):
                raise _Fail(f"diagnose returned a {type(got).__name__}, not a dict.",
                            "return {'model': ..., 'soc': ..., 'runtime_allocated': {...}}.")
            n += 1
            answer = (str(got.get("model")), str(got.get("soc")).lower())
            if answer not in _accepted(model, soc):
                which = [w for w, ok in (("model", any(answer[0] == m for m, _ in _accepted(model, soc))),
                                         ("SoC", any(answer[1] == s for _, s in _accepted(model, soc)))) if not ok]
                wrong.append(f"unknown context {k}: the {' and the '.join(which) or 'pair'} "
                             f"{'does' if len(which) < 2 else 'do'} not fit what the queries show")
            allocated = got.get("runtime_allocated")
            allocated = {str(a) for a in allocated} if isinstance(allocated, (set, list, tuple, frozenset)) else None
            if allocated != _RUNTIME_ALLOCATES[flag]:
                yours = "not a set" if allocated is None else ("{" + ", ".join(sorted(allocated)) + "}" if allocated else "set()")
                wrong.append(f"unknown context {k}: your runtime_allocated {yours} does not fit its DMA total")
        if wrong:
            text = " ".join(wrong)
            if "SoC" in text:
                hint = ("C2 tells rk3568 from the others, but not rk3588 from rk3576 or rk3562: compare "
                        "total_weight_size and total_internal_size with every report too.")
            elif "model" in text:
                hint = ("several models share their output shapes: compare MEM_SIZE's weight and internal "
                        "sizes and every native attr with each report.")
            else:
                hint = ("once you know the model and SoC, init the same model with flag 0 (checks.runtime_for(soc)) "
                        "and compare the two DMA totals: the difference is the part that the flag makes yours "
                        "(about 0, about total_internal_size, or about everything).")
            raise _Fail(f"{_of_yours(len(wrong), 2 * n, 'answers')} (a model-and-SoC pair and a "
                        f"runtime_allocated for each of {n} unknown contexts).", hint, wrong)
        return CheckResult(EX4, "passed", f"All {n} unknown contexts diagnosed: model, SoC and what the runtime "
                           "allocated itself.")

    return _LAB.run(EX4, body)


_LAB = Lab("Lab 1", [EX1, EX2, EX3, EX4, EX5])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_mem_size": EX1, "check_size_prediction": EX2, "check_plan": EX3,
                      "check_diagnosis": EX4, "check_dominant": EX5})
