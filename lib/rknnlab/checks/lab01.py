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
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..i18n import Texts, pick as L
from ..rknn import abi
from ..rknn.buffers import attr_dims
from ._core import (CheckResult, Lab, _Fail, _current_soc, _not_done, _open_runtime, _student_error,
                    _whole_number)

__all__ = ["CheckResult", "check_mem_size", "check_size_prediction", "check_plan",
           "check_diagnosis", "check_dominant", "summary", "results",
           "MEANINGS", "MEM_SIZE_FIELDS", "REASONS", "PREDICTED_TENSOR", "other_soc", "runtime_for"]

# the titles are the results' keys; their Chinese is registered with Lab(zh=) at the end
EX1 = "Exercise 1 — the fields of rknn_mem_size"  # en-only: a key, translated in zh=
EX2 = "Exercise 2 — predict an io buffer's size"  # en-only: a key, translated in zh=
EX3 = "Exercise 3 — the high-water mark, and what reuse saves"  # en-only: a key, translated in zh=
EX4 = "Exercise 4 — diagnose unknown contexts"  # en-only: a key, translated in zh=
EX5 = "Exercise 5 ★ — which activations dominate, and where that fails"  # en-only: a key, translated in zh=


def _of_yours(wrong: int, total: int, noun: str) -> str:
    """'1 of your 6 answers is wrong' / '2 of your 6 answers are wrong'; ``noun`` is already
    in the language of the moment (L("answers", "答案"))."""
    return L(f"{wrong} of your {total} {noun} {'is' if wrong == 1 else 'are'} wrong",
             f"你的 {total} 个{noun}中有 {wrong} 个错误")




#: the five fields of rknn_mem_size that exercise 1 asks about (reserved[] is not one)
MEM_SIZE_FIELDS = ("total_weight_size", "total_internal_size", "total_dma_allocated_size",
                   "total_sram_size", "free_sram_size")

#: what exercise 1 offers as meanings, in no particular order; three of them belong to no field
MEANINGS: Mapping = Texts({
    "A": lambda: L("the sum of every activation tensor's size, each in a buffer of its own",
                   "每个激活张量的大小之和，每个张量各占一个缓冲区"),
    "B": lambda: L("the part of the NPU's SoC SRAM that is not in use yet",
                   "NPU 所在 SoC 的 SRAM 中尚未使用的部分"),
    "C": lambda: L("the quantized weights and biases, as the compiler laid them out for the NPU",
                   "量化后的权重和偏置，按编译器为 NPU 安排的布局存放"),
    "D": lambda: L("the size of the .rknn file", ".rknn 文件的大小"),
    "E": lambda: L("all the NPU-accessible (DMA) memory the runtime has allocated for this context so far",
                   "到目前为止，运行时为这个上下文分配的全部 NPU 可访问（DMA）内存"),
    "F": lambda: L("the one buffer that the compiler planned for the activations between layers",
                   "编译器为各层之间的激活规划的那一块缓冲区"),
    "G": lambda: L("the process's resident memory (VmRSS) after rknn_init",
                   "rknn_init 之后进程的常驻内存（VmRSS）"),
    "H": lambda: L("the SoC SRAM that the runtime can give the NPU", "运行时可以分配给 NPU 的 SoC SRAM"),
})
_FIELD_MEANING = {"total_weight_size": "C", "total_internal_size": "F", "total_dma_allocated_size": "E",
                  "total_sram_size": "H", "free_sram_size": "B"}
_NAIVE_SUM, _FILE_SIZE = "A", "D"      # the distractors that two hints answer

#: exercise 2's recorded prediction: the native size_with_stride of this io tensor, on two SoCs
PREDICTED_TENSOR = ("yolov5s", "output", 1)

#: the properties exercise 5 offers to explain why some activations are the largest
REASONS: Mapping = Texts({   # the keys are what the student answers
    "height x width": lambda: L("the tensor's height times width (its spatial resolution)",
                                "张量的高乘以宽（即它的空间分辨率）"),
    "channels": lambda: L("the tensor's channel count", "张量的通道数"),
    "lifetime": lambda: L("how many layers the tensor stays alive", "张量存活多少层"),
    "npu cycles": lambda: L("the NPU cycles of the layer that writes the tensor",
                            "写入该张量的那一层的 NPU 周期数"),
    "depth": lambda: L("how early in the network the tensor is written (the earlier, the higher)",
                       "张量在网络中多早被写入（越早，值越大）"),
})

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
    if report.model == _MADE_UP_PLAN:
        return L("a made-up plan on no SoC", "一个虚构的规划（不针对任何 SoC）")
    return L(f"{report.model} on {report.target}", f"{report.target} 上的 {report.model}")


def _call(exc: BaseException, call: str, where: str) -> str:
    """The call to name in a message: where it failed, unless it is a stub (not done yet)."""
    return call if isinstance(exc, NotImplementedError) else L(f"{call} for {where}", f"{call}（{where}）")


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
            raise _not_done(L("my_fields is still empty.", "my_fields 还是空的。"),
                            L("fill in a letter of checks.MEANINGS for each of the five fields.",
                              "为五个字段各填上 checks.MEANINGS 中的一个字母。"))
        letters = {str(k): (str(v).strip().upper() if v is not None else None) for k, v in my_fields.items()}
        missing = [f for f in MEM_SIZE_FIELDS if not letters.get(f)]
        if missing:
            raise _not_done(L(f"no letter yet for {', '.join(missing)}.", f"{'、'.join(missing)} 还没有填字母。"),
                            L("every field of rknn_mem_size gets one letter of checks.MEANINGS.",
                              "rknn_mem_size 的每个字段都要填上 checks.MEANINGS 中的一个字母。"))
        unknown = [f"{f}: {letters[f]!r}" for f in MEM_SIZE_FIELDS if letters[f] not in MEANINGS]
        if unknown:
            raise _Fail(L(f"not letters of checks.MEANINGS: {', '.join(unknown)}.",
                          f"不是 checks.MEANINGS 中的字母：{'；'.join(unknown)}。"),
                        L("use the letters A to H of checks.MEANINGS.", "请使用 checks.MEANINGS 中的字母 A 到 H。"))
        wrong = [f for f in MEM_SIZE_FIELDS if letters[f] != _FIELD_MEANING[f]]
        if wrong:
            hint = L("read the table in chapter 1 §2 again: which of these are sizes the compiler decided, "
                     "which is what the runtime allocated, and which are about SRAM?",
                     "再读一遍第 1 章 §2 的表：其中哪些是编译器决定的大小，哪个是运行时已经分配的内存，"
                     "哪些与 SRAM 有关？")
            if "total_internal_size" in wrong and letters["total_internal_size"] == _NAIVE_SUM:
                hint = L("total_internal_size is not the sum of all activations: the compiler reuses the "
                         "bytes of dead tensors (chapter 1 §3).",
                         "total_internal_size 不是所有激活之和：编译器会复用已不再存活的张量的字节（第 1 章 §3）。")
            elif "total_weight_size" in wrong and letters["total_weight_size"] == _FILE_SIZE:
                hint = L("the .rknn file holds more than the weights (the graph, the plan, the attrs).",
                         ".rknn 文件里不只有权重（还有计算图、内存规划和属性）。")
            # the wrong fields are named, never the right letter
            mine = _of_yours(len(wrong), len(MEM_SIZE_FIELDS), L("answers", "答案"))
            raise _Fail(L(f"{mine}: {', '.join(wrong)} {'has' if len(wrong) == 1 else 'have'} the wrong meaning.",
                          f"{mine}：{'、'.join(wrong)} 的含义不对。"), hint)
        if not isinstance(my_flags, dict) or any(my_flags.get(k) is None for k in ("API reference", "rknn_benchmark")):
            raise _not_done(L("my_flags is not filled in yet.", "my_flags 还没有填写。"),
                            L("give the init flag (an abi.RKNN_FLAG_... constant, or 0) for both keys.",
                              "为两个键各填上初始化标志（一个 abi.RKNN_FLAG_... 常量，或者 0）。"))
        ref, bench = _whole_number(my_flags.get("API reference")), _whole_number(my_flags.get("rknn_benchmark"))
        if ref != abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE or bench != 0:
            raise _Fail(L("my_flags does not say what the two documents say.", "my_flags 与两份文档的说法不符。"),
                        L("one of Rockchip's documents asks for a flag before this query, the other "
                          "queries after a plain rknn_init; the section 'Two documents disagree' names both.",
                          "Rockchip 的一份文档要求在这个查询之前设置一个标志，另一份则在普通的 rknn_init "
                          "之后就查询；“两份文档说法不一”一节列出了这两份文档。"))
        if not callable(dma_accounting):
            raise _not_done(L(f"expected your dma_accounting function, got {type(dma_accounting).__name__}.",
                              f"这里要的是你的 dma_accounting 函数，收到的是 {type(dma_accounting).__name__}。"),
                            L("pass the function itself: checks.check_mem_size(my_fields, my_flags, dma_accounting)",
                              "请传入函数本身：checks.check_mem_size(my_fields, my_flags, dma_accounting)"))

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
                                         L("query RKNN_QUERY_MEM_SIZE, then the NATIVE attrs of every input "
                                           "and output; add up their size_with_stride.",
                                           "查询 RKNN_QUERY_MEM_SIZE，再查询每个输入和输出的原生（NATIVE）属性，"
                                           "把它们的 size_with_stride 加起来。"))
                if got is None:
                    raise _not_done(L("dma_accounting returned None.", "dma_accounting 返回了 None。"),
                                    L("return a dict with the keys weight, internal, io and remainder.",
                                      "请返回一个 dict，键为 weight、internal、io 和 remainder。"))
                if not isinstance(got, dict):
                    raise _Fail(L(f"dma_accounting returned a {type(got).__name__}, not a dict.",
                                  f"dma_accounting 返回的是 {type(got).__name__}，不是 dict。"),
                                L("return {'weight': ..., 'internal': ..., 'io': ..., 'remainder': ...}.",
                                  "请返回 {'weight': ..., 'internal': ..., 'io': ..., 'remainder': ...}。"))
                for key, want in truth.items():
                    value = _whole_number(got.get(key))
                    if value is None:
                        raise _Fail(L(f"dma_accounting gave no whole number of bytes for {key!r} ({name}).",
                                      f"dma_accounting 没有为 {key!r} 给出整数个字节（{name}）。"),
                                    L("every value is a number of bytes (an int).", "每个值都是一个字节数（int）。"))
                    if value != want:
                        problems.append((name, key, value, want, extra is not None))
                if not any(p[0] == name for p in problems):
                    details.append(L(f"{name}: all four numbers agree with the check's own queries",
                                     f"{name}：四个数字都与检查自己的查询结果一致")
                                   + (L(" (with the check's extra rknn_create_mem in the DMA total)",
                                        "（DMA 总量中包含检查额外创建的 rknn_create_mem 内存）") if extra else ""))
            finally:
                if extra is not None:
                    rt.destroy_mem(ctx, extra)
                rt.destroy(ctx)
        if problems:
            lines = [L(f"{name}: your {key} is {value:,} B: {'too large' if value > want else 'too small'}",
                       f"{name}：你的 {key} 为 {value:,} B：{'偏大' if value > want else '偏小'}")
                     + (L(" (this context holds an extra mem the check created)",
                          "（这个上下文还持有检查额外创建的一块 rknn_create_mem 内存）") if extra else "")
                     for name, key, value, want, extra in problems]
            keys = {p[1] for p in problems}
            if "io" in keys and all(p[4] for p in problems if p[1] == "io"):
                hint = L("the io buffers are not whatever is left of the DMA total: add up the NATIVE attrs' "
                         "size_with_stride. What the three parts do not cover belongs in 'remainder'.",
                         "输入/输出缓冲区不是 DMA 总量减去其余部分后剩下的量：请把原生（NATIVE）属性的 "
                         "size_with_stride 加起来。三项没有覆盖的部分归入 'remainder'。")
            elif "io" in keys:
                hint = L("size the io buffers from RKNN_QUERY_NATIVE_INPUT_ATTR / NATIVE_OUTPUT_ATTR and their "
                         "size_with_stride, for every input and every output: the runtime keeps each io tensor "
                         "in the NPU's layout, padding included.",
                         "根据 RKNN_QUERY_NATIVE_INPUT_ATTR / NATIVE_OUTPUT_ATTR 及其 size_with_stride "
                         "确定输入/输出缓冲区的大小，每个输入和每个输出都要算：运行时按 NPU 的布局保存每个"
                         "输入/输出张量，包括填充。")
            elif keys & {"weight", "internal"}:
                hint = L("take total_weight_size and total_internal_size from RKNN_QUERY_MEM_SIZE on this context.",
                         "在这个上下文上用 RKNN_QUERY_MEM_SIZE 取得 total_weight_size 和 total_internal_size。")
            else:
                hint = L("remainder = total_dma_allocated_size - (weight + internal + io).",
                         "余量：remainder = total_dma_allocated_size - (weight + internal + io)。")
            raise _Fail(L(f"{len(problems)} {'number differs' if len(problems) == 1 else 'numbers differ'} from the "
                          f"check's own queries ({rt.source if hasattr(rt, 'source') else soc}).",
                          f"有 {len(problems)} 个数字与检查自己的查询结果不同"
                          f"（{rt.source if hasattr(rt, 'source') else soc}）。"), hint, lines)
        return CheckResult(EX1, "passed",
                           L("The five fields are right, the two documents are told apart, and your DMA "
                             "account agrees with the runtime on every context the check made.",
                             "五个字段都对，两份文档也区分清楚了；在检查创建的每个上下文上，"
                             "你的 DMA 账目都与运行时一致。"), details)

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
        (L("a made-up NHWC uint8 input with padded rows", "一个虚构的 NHWC uint8 输入，行带填充"),
         _made_up_attr((1, h, w, 3), abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_UINT8, -(-w // 16) * 16 + 16)),
        (L("a made-up NC1HWC2 float16 tensor (C2 = 8)", "一个虚构的 NC1HWC2 float16 张量（C2 = 8）"),
         _made_up_attr((1, rng.randrange(2, 9), h, w, 8), abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_FLOAT16)),
        (L("a made-up NC1HWC2 int8 tensor (C2 = 8)", "一个虚构的 NC1HWC2 int8 张量（C2 = 8）"),
         _made_up_attr((1, rng.randrange(3, 12), h // 2, w // 2, 8), abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_INT8)),
        (L("a made-up 2-D float32 output", "一个虚构的二维 float32 输出"),
         _made_up_attr((1, rng.randrange(11, 99)), abi.RKNN_TENSOR_UNDEFINED, abi.RKNN_TENSOR_FLOAT32)),
        (L("a made-up NHWC int8 input, 1 channel, padded rows", "一个虚构的 NHWC int8 输入，1 个通道，行带填充"),
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
            for kind, attrs in ((L("input", "输入"), ins), (L("output", "输出"), outs)):
                for a in attrs:
                    what = L(f"{name} {kind} {a.index} on {soc} ({abi.FMT_NAMES.get(a.fmt, a.fmt)}, "
                             f"{abi.TYPE_NAMES.get(a.type, a.type)}, dims {list(attr_dims(a))})",
                             f"{soc} 上的 {name} {kind} {a.index}（{abi.FMT_NAMES.get(a.fmt, a.fmt)}，"
                             f"{abi.TYPE_NAMES.get(a.type, a.type)}，dims {list(attr_dims(a))}）")
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
        raise _not_done(L("no prediction recorded yet.", "还没有记录预测。"),
                        L(f"fill in predicted = {shape} with numbers of bytes, before you run the cell that "
                          "prints the native attrs.",
                          f"在运行打印原生属性的那个单元格之前，先把字节数填进 predicted = {shape}。"))
    if not isinstance(predicted, dict):
        raise _Fail(L(f"predicted is a {type(predicted).__name__}, not a dict.",
                      f"predicted 是 {type(predicted).__name__}，不是 dict。"), f"predicted = {shape}.")
    given = {str(k).lower(): v for k, v in predicted.items()}
    if set(given) != set(truth):
        raise _Fail(L(f"predicted has the keys {sorted(given)}; expected one per SoC: {shape}.",
                      f"predicted 的键是 {sorted(given)}；应当每个 SoC 一个：{shape}。"),
                    f"predicted = {shape}.")
    parts = []
    for soc, want in truth.items():
        value = _whole_number(given[soc])
        if value is None:
            raise _Fail(L(f"predicted[{soc!r}] = {given[soc]!r:.40} is not a whole number of bytes.",
                          f"predicted[{soc!r}] = {given[soc]!r:.40} 不是整数个字节。"),
                        L("a prediction is a number of bytes (an int).", "预测值是一个字节数（int）。"))
        verdict = (L("equals the runtime's", "与运行时的相等") if value == want else
                   L(f"the runtime's is {'smaller' if value > want else 'larger'}",
                     f"运行时的{'更小' if value > want else '更大'}"))
        parts.append(L(f"{soc} {value:,} B ({verdict})", f"{soc} {value:,} B（{verdict}）"))
    return L(f"your prediction for {model} {kind} {index}, recorded, not graded: {'; '.join(parts)}"
             ". The cell after the check shows the runtime's numbers and why.",
             f"你对 {model} {'输出' if kind == 'output' else '输入'} {index} 的预测（已记录，不评分）："
             f"{'；'.join(parts)}。检查之后的单元格会给出运行时的数字及其原因。")


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
            raise _not_done(L(f"expected your predict_sizes function, got {type(predict_sizes).__name__}.",
                              f"这里要的是你的 predict_sizes 函数，收到的是 {type(predict_sizes).__name__}。"),
                            L("pass the function itself: checks.check_size_prediction(predict_sizes, predicted)",
                              "请传入函数本身：checks.check_size_prediction(predict_sizes, predicted)"))
        cases, left_out = _runtime_cases(socs)
        made_up = [("made up", what, a, _layout_rule(a)) for what, a in _made_up_attrs()]
        wrong, c2_suspect, stride_suspect, item_suspect = [], 0, 0, 0
        for soc, what, attr, (size, with_stride) in cases + made_up:
            try:
                got = predict_sizes(_blanked(attr))
            except Exception as exc:
                raise _student_error(exc, _call(exc, "predict_sizes(attr)", what),
                                     L("use only dims, n_dims, fmt, type and w_stride of the attr.",
                                       "只使用 attr 的 dims、n_dims、fmt、type 和 w_stride。"))
            if got is None:
                raise _not_done(L("predict_sizes returned None.", "predict_sizes 返回了 None。"),
                                L("return a pair: (size, size_with_stride).", "请返回一对值：(size, size_with_stride)。"))
            try:
                p_size, p_stride = (_whole_number(v) for v in got)
            except (TypeError, ValueError):
                raise _Fail(L(f"predict_sizes returned {type(got).__name__} {got!r:.60}, not a pair of numbers.",
                              f"predict_sizes 返回了 {type(got).__name__} {got!r:.60}，不是一对数字。"),
                            L("return a pair: (size, size_with_stride), both in bytes.",
                              "请返回一对值：(size, size_with_stride)，都以字节计。")) from None
            if p_size is None or p_stride is None:
                raise _Fail(L(f"predict_sizes returned {got!r:.60}: not two whole numbers of bytes.",
                              f"predict_sizes 返回了 {got!r:.60}：不是两个整数字节数。"),
                            L("return a pair of ints: (size, size_with_stride).",
                              "请返回一对 int：(size, size_with_stride)。"))
            if (p_size, p_stride) == (size, with_stride):
                continue
            verdict = []
            for label, p, t in (("size", p_size, size), ("size_with_stride", p_stride, with_stride)):
                if p != t:
                    verdict.append(L(f"{label} too {'large' if p > t else 'small'} (your {p:,} B)",
                                     f"{label} {'偏大' if p > t else '偏小'}（你的 {p:,} B）"))
            wrong.append(L(f"{what}: {', '.join(verdict)}", f"{what}：{'，'.join(verdict)}"))
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
                hint = L("C2 is not always 16: on rk3566/rk3568 it is 8 for int8. Read it from the native "
                         "attr's dims[4], never assume it.",
                         "C2 不总是 16：在 rk3566/rk3568 上，int8 的 C2 是 8。请从原生属性的 dims[4] 读取，"
                         "不要自行假定。")
            elif stride_suspect:
                hint = L("size_with_stride counts the padding at the end of each row: rows of w_stride "
                         "pixels (when w_stride is larger than the width).",
                         "size_with_stride 计入每行末尾的填充：当 w_stride 大于宽度时，每行有 w_stride 个像素。")
            elif item_suspect:
                hint = L("not every tensor is int8: multiply by the element size of attr.type (2 for float16, "
                         "4 for float32).",
                         "并非每个张量都是 int8：要乘以 attr.type 的元素大小（float16 为 2，float32 为 4）。")
            else:
                hint = L("the native buffer is the product of the native dims times the element size; the size and "
                         "size_with_stride fields are set to 0 in the attrs the check passes you.",
                         "原生缓冲区的大小是原生维度的乘积再乘以元素大小；检查传给你的属性中，"
                         "size 和 size_with_stride 字段都被置为 0。")
            mine = _of_yours(len(wrong), len(cases) + len(made_up), L("results", "结果"))
            raise _Fail(L(f"{mine} (compared with the runtime's, or, for the made-up tensors, with the layout rule "
                          f"the runtime's numbers follow).",
                          f"{mine}（与运行时的结果比较；对虚构的张量，则与运行时的数字所遵循的布局规则比较）。"),
                        hint, wrong[:6] + ([L(f"... and {len(wrong) - 6} more", f"……另外还有 {len(wrong) - 6} 个")]
                                           if len(wrong) > 6 else []))
        details = [prediction]
        for s in socs:
            n_soc = sum(c[0] == s for c in cases)
            details.append(L(f"{n_soc} io tensors of the course models on {s}",
                             f"{s} 上课程模型的 {n_soc} 个输入/输出张量"))
        details.append(L(f"{len(made_up)} made-up tensors (other shapes, float16, float32)",
                         f"{len(made_up)} 个虚构的张量（其他形状、float16、float32）"))
        if left_out:
            details.append(L(f"left out, because their reported size_with_stride pads rows that w_stride "
                             f"does not show: {'; '.join(left_out[:4])}",
                             f"已排除，因为它们报告的 size_with_stride 对行做了 w_stride 没有体现的填充："
                             f"{'；'.join(left_out[:4])}"))
        return CheckResult(EX2, "passed", L("predict_sizes computes the size and size_with_stride that the runtime "
                                            "reports, for every tensor it was given, on both SoCs.",
                                            "对传给它的每个张量，predict_sizes 在两种 SoC 上算出的 size 和 "
                                            "size_with_stride 都与运行时报告的一致。"), details)

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
            raise _Fail(L(f"your code calls rknnlab.layers ({', '.join(public)}): chapter 1's own analysis, "
                          "which computes what this exercise asks for.",
                          f"你的代码调用了 rknnlab.layers（{'、'.join(public)}）：这是第 1 章自己的分析，"
                          "它算的正是本练习要求你算的东西。"),
                        L("write it yourself from report.lifetimes(): that is the skill the exercise assesses.",
                          "请根据 report.lifetimes() 自己编写：这正是本练习考查的技能。"))


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


#: the name of the made-up plan (its label is said in the language of the moment: _label)
_MADE_UP_PLAN = "a made-up plan"


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
    data = {"model": _MADE_UP_PLAN, "target": "no SoC", "layers": layers, "feature_tensors": rows,
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
    return L(f"the runtime at hand ({getattr(rt, 'source', soc)}) reports the plan's total_internal_size "
             f"for {same} of {len(names)} models on {soc}",
             f"当前的运行时（{getattr(rt, 'source', soc)}）在 {soc} 的 {len(names)} 个模型中，"
             f"有 {same} 个报告的 total_internal_size 与规划一致")


def _judge_high_water(in_use_bytes: Callable[..., Any], high_water_mark: Callable[..., Any],
                      plans: List[Any], call: "_Student") -> None:
    """Part (a): _Fail unless bytes in use and the high-water mark are right on every plan."""
    wrong_bytes, wrong_peak, wrong_plans = [], [], []
    for report in plans:
        bad_layers = []
        for layer in _layers(report):
            try:
                got = call(in_use_bytes, report, layer)
            except Exception as exc:
                raise _student_error(exc, _call(exc, "in_use_bytes(report, layer)",
                                                L(f"layer {layer} of {_label(report)}",
                                                  f"{_label(report)} 的第 {layer} 层")),
                                     L("use report.lifetimes(): a tensor is alive from first_layer to "
                                       "last_layer, both included.",
                                       "使用 report.lifetimes()：一个张量从 first_layer 到 last_layer 都处于存活状态，"
                                       "两端都包括。"))
            if got is None:
                raise _not_done(L("in_use_bytes returned None.", "in_use_bytes 返回了 None。"),
                                L("return a number of bytes.", "请返回一个字节数。"))
            value = _whole_number(got)
            if value != _in_use(report, layer):
                bad_layers.append((layer, value))
        if bad_layers:
            layer, value = bad_layers[0]
            truth = _in_use(report, layer)
            how = (L("not a whole number", "不是整数") if value is None
                   else L(f"your {value:,} B is too {'large' if value > truth else 'small'}",
                          f"你的 {value:,} B {'偏大' if value > truth else '偏小'}"))
            wrong_bytes.append(L(f"{_label(report)}: wrong at {len(bad_layers)} layer(s), e.g. layer {layer} ({how})",
                                 f"{_label(report)}：有 {len(bad_layers)} 层出错，例如第 {layer} 层（{how}）"))
            wrong_plans.append(report.model)
        try:
            got = call(high_water_mark, report)
        except Exception as exc:
            raise _student_error(exc, _call(exc, "high_water_mark(report)", _label(report)),
                                 L("find the layer with the most bytes in use, then the tensors alive there.",
                                   "找出在用字节数最多的那一层，再找出在该层存活的张量。"))
        if got is None:
            raise _not_done(L("high_water_mark returned None.", "high_water_mark 返回了 None。"),
                            L("return (layer, set of tensor names).", "请返回 (layer, 张量名称的集合)。"))
        try:
            layer, names = got
            layer, names = _whole_number(layer), {str(n) for n in names}
        except (TypeError, ValueError):
            raise _Fail(L(f"high_water_mark returned {got!r:.60}, not (layer, names).",
                          f"high_water_mark 返回了 {got!r:.60}，不是 (layer, names)。"),
                        L("return a pair: the layer (an int) and the names of the tensors alive there.",
                          "请返回一对值：层号（int），以及在该层存活的张量的名称。")) from None
        top, top_layers = _peak(report)
        if layer not in top_layers:
            mine = _in_use(report, layer) if layer is not None and layer in _layers(report) else None
            wrong_peak.append(L(f"{_label(report)}: your layer {layer} is not where the most bytes are in use",
                                f"{_label(report)}：你给出的第 {layer} 层不是在用字节数最多的层")
                              + (L(f" (it has {100 * mine / top:.0f}% of the most)",
                                   f"（它的在用字节数是最大值的 {100 * mine / top:.0f}%）") if mine is not None else ""))
            wrong_plans.append(report.model)
        elif names != _alive(report, layer):
            truth = _alive(report, layer)
            wrong_peak.append(L(f"{_label(report)}: at layer {layer}, your {len(names)} names: "
                                f"{len(names - truth)} too many, {len(truth - names)} missing",
                                f"{_label(report)}：在第 {layer} 层，你的 {len(names)} 个名称中"
                                f"多了 {len(names - truth)} 个，缺了 {len(truth - names)} 个"))
            wrong_plans.append(report.model)
    call.refuse_shortcut()
    if wrong_bytes or wrong_peak:
        if all(model == _MADE_UP_PLAN for model in wrong_plans):
            hint = L("a Concat's inputs can be laid inside its output: those bytes are shared, so count "
                     "the bytes of the buffer in use (the union of the [start, end) ranges), not the sum of sizes.",
                     "Concat 的输入可能就放在它的输出之内：这些字节是共享的，所以要统计缓冲区中在用的字节"
                     "（各个 [start, end) 范围的并集），而不是把各个大小相加。")
        elif wrong_bytes:
            hint = L("a tensor is alive from the layer that writes it (first_layer) to the last layer that "
                     "reads it (last_layer), both included; count each byte of the buffer once.",
                     "一个张量从写入它的层（first_layer）到最后一个读取它的层（last_layer）都处于存活状态，"
                     "两端都包括；缓冲区的每个字节只计一次。")
        else:
            hint = L("use your in_use_bytes: the high-water mark is a layer where it is largest.",
                     "用你的 in_use_bytes：峰值占用在它取最大值的那一层。")
        raise _Fail(L(f"part (a): {len(wrong_bytes)} of {len(plans)} plans with wrong bytes in use, "
                      f"{len(wrong_peak)} with a wrong high-water mark.",
                      f"(a) 部分：{len(plans)} 个规划中，有 {len(wrong_bytes)} 个的在用字节数不对，"
                      f"{len(wrong_peak)} 个的峰值占用不对。"), hint, (wrong_bytes + wrong_peak)[:6])


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
                                 L("each tensor once, from report.lifetimes(); the plan's size is total_internal_size.",
                                   "每个张量只计一次，取自 report.lifetimes()；规划的大小是 total_internal_size。"))
        if got is None:
            raise _not_done(L("reuse_saving returned None.", "reuse_saving 返回了 None。"),
                            L("return a dict with naive, internal, saved and above_lower_bound.",
                              "请返回一个包含 naive、internal、saved 和 above_lower_bound 的 dict。"))
        if not isinstance(got, dict):
            raise _Fail(L(f"reuse_saving returned a {type(got).__name__}, not a dict.",
                          f"reuse_saving 返回的是 {type(got).__name__}，不是 dict。"),
                        L("return {'naive': ..., 'internal': ..., 'saved': ..., 'above_lower_bound': ...}.",
                          "请返回 {'naive': ..., 'internal': ..., 'saved': ..., 'above_lower_bound': ...}。"))
        for key, want in _saving_truth(report).items():
            value = _whole_number(got.get(key))
            if value != want:
                how = (L("missing", "缺失") if value is None else
                       L(f"your {value:,} B is too {'large' if value > want else 'small'}",
                         f"你的 {value:,} B {'偏大' if value > want else '偏小'}"))
                wrong.setdefault(key, []).append(L(f"{_label(report)}: {key}: {how}", f"{_label(report)}：{key}：{how}"))
    call.refuse_shortcut()
    if wrong:
        first = next(iter(wrong))
        hints = {
            "naive": L("one buffer per tensor: count each tensor once (a tensor has one row per layer that "
                       "reads it), with the bytes the plan gives it (end - start, padding included).",
                       "每个张量一个缓冲区：每个张量只计一次（一个张量在每个读取它的层上各有一行），"
                       "大小取规划分配给它的字节数（end - start，包括填充）。"),
            "internal": L("the plan's size is the internal buffer the runtime allocates: total_internal_size.",
                          "规划的大小就是运行时分配的内部缓冲区：total_internal_size。"),
            "saved": L("saved = naive - internal: what one buffer per tensor would cost beyond the plan.",
                       "saved = naive - internal：每个张量各用一个缓冲区时，比规划多花的字节数。"),
            "above_lower_bound": L("above_lower_bound = internal - the high-water mark of part (a) "
                                   "(bytes in use, shared bytes counted once).",
                                   "above_lower_bound = internal - (a) 部分的峰值占用"
                                   "（在用字节数，共享的字节只计一次）。"),
        }
        lines = [line for key in wrong for line in wrong[key][:2]]
        raise _Fail(L(f"part (b): wrong for {', '.join(f'{k} ({len(v)} of {len(plans)} plans)' for k, v in wrong.items())}.",
                      f"(b) 部分出错：{'，'.join(f'{k}（{len(plans)} 个规划中有 {len(v)} 个）' for k, v in wrong.items())}。"),
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
                raise _not_done(L(f"expected your {name} function, got {type(f).__name__}.",
                                  f"这里要的是你的 {name} 函数，收到的是 {type(f).__name__}。"),
                                L("pass the functions themselves: "
                                  "checks.check_plan(in_use_bytes, high_water_mark, reuse_saving)",
                                  "请传入这些函数本身：checks.check_plan(in_use_bytes, high_water_mark, reuse_saving)"))
        plans = _plans()
        _judge_high_water(in_use_bytes, high_water_mark, plans, _Student())
        _judge_saving(reuse_saving, plans, _Student())
        return CheckResult(EX3, "passed", L(f"Bytes in use, the high-water mark, the saving and the distance to "
                                            f"the lower bound are right for all {len(plans)} plans (every course "
                                            "model on every SoC, and a made-up one with a Concat).",
                                            f"全部 {len(plans)} 个规划（每个 SoC 上的每个课程模型，以及一个带 Concat "
                                            "的虚构规划）的在用字节数、峰值占用、节省量以及与下限的差距都正确。"),
                           [_runtime_agrees_with_reports()])

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
        raise _not_done(L("my_exception is still None.", "my_exception 还是 None。"),
                        L("measure the rank correlation of 'height x width' with the bytes for each plan.",
                          "对每个规划，测量 'height x width' 与字节数的秩相关。"))
    if not isinstance(my_exception, (tuple, list)) or len(my_exception) != 2:
        raise _Fail(L(f"my_exception is {my_exception!r:.60}, not a pair (model, soc).",
                      f"my_exception 是 {my_exception!r:.60}，不是一对 (model, soc)。"),
                    L("my_exception = (model, soc), for example ('yolov5s', 'rk3588').",
                      "my_exception = (model, soc)，例如 ('yolov5s', 'rk3588')。"))
    pair = (str(my_exception[0]).lower(), str(my_exception[1]).lower())
    agreement, lowest = _least_explained(key)
    if pair not in agreement:
        raise _Fail(L(f"{pair} is not a course plan with 10 tensors or more.",
                      f"{pair} 不是有 10 个或更多张量的课程规划。"),
                    L("take (report.model, report.target) of a plan with at least 10 tensors.",
                      "取一个至少有 10 个张量的规划的 (report.model, report.target)。"))
    if agreement[pair] > lowest + 0.005:
        raise _Fail(L(f"for {pair[0]} on {pair[1]}, the rank correlation of '{key}' with the bytes is "
                      f"{agreement[pair]:+.2f}; another plan agrees less.",
                      f"对 {pair[1]} 上的 {pair[0]}，'{key}' 与字节数的秩相关为 {agreement[pair]:+.2f}；"
                      "另有一个规划的一致程度更低。"),
                    L("compute the correlation plan by plan, not the mean, and take the lowest.",
                      "逐个规划计算相关系数（不要取平均值），再取最低的那个。"))
    mean = float(np.mean(list(agreement.values())))
    return L(f"{pair[0]} on {pair[1]}: '{key}' explains its bytes least (rank correlation "
             f"{agreement[pair]:+.2f}, against a mean of {mean:+.2f})",
             f"{pair[1]} 上的 {pair[0]}：'{key}' 对它的字节数解释得最差（秩相关 "
             f"{agreement[pair]:+.2f}，而平均值为 {mean:+.2f}）")


def check_dominant(largest_activations: Any, my_reason: Any, my_exception: Any = None) -> CheckResult:
    """Exercise 5: ``largest_activations(report, k)`` returns the names of the k activation
    tensors that take the most bytes in the plan, largest first; ``my_reason`` is the key
    of :data:`REASONS` whose ranking agrees best with the tensors' bytes, measured as the
    mean rank correlation over the course models; ``my_exception`` is ``(model, soc)``, the
    plan (10 tensors or more) whose bytes that key explains least."""
    def body() -> CheckResult:
        if not callable(largest_activations):
            raise _not_done(L(f"expected your largest_activations function, got {type(largest_activations).__name__}.",
                              f"这里要的是你的 largest_activations 函数，收到的是 {type(largest_activations).__name__}。"),
                            L("pass the function itself: checks.check_dominant(largest_activations, my_reason)",
                              "请传入函数本身：checks.check_dominant(largest_activations, my_reason)"))
        wrong, plans, call = [], _reports(), _Student()
        for report in plans:
            sizes = {t.tensor: t.size for t in report.lifetimes()}
            want = sorted(sizes.values(), reverse=True)[:_TOP_K]
            try:
                got = call(largest_activations, report, _TOP_K)
            except Exception as exc:
                raise _student_error(exc, _call(exc, f"largest_activations(report, {_TOP_K})", _label(report)),
                                     L("rank the tensors of report.lifetimes() by their size in the plan.",
                                       "按张量在规划中的大小，给 report.lifetimes() 中的张量排序。"))
            if got is None:
                raise _not_done(L("largest_activations returned None.", "largest_activations 返回了 None。"),
                                L("return a list of tensor names, largest first.",
                                  "请返回一个张量名称的列表，从大到小排列。"))
            names = [str(n) for n in got] if isinstance(got, (list, tuple)) else None
            if names is None:
                raise _Fail(L(f"largest_activations returned a {type(got).__name__}, not a list of names.",
                              f"largest_activations 返回的是 {type(got).__name__}，不是名称的列表。"),
                            L("return a list of tensor names, largest first.",
                              "请返回一个张量名称的列表，从大到小排列。"))
            if len(names) != _TOP_K or len(set(names)) != len(names):
                wrong.append(L(f"{_label(report)}: {len(names)} names, {len(set(names))} different "
                               f"(want {_TOP_K} different)",
                               f"{_label(report)}：{len(names)} 个名称，其中 {len(set(names))} 个互不相同"
                               f"（应为 {_TOP_K} 个互不相同的名称）"))
            elif any(n not in sizes for n in names):
                wrong.append(L(f"{_label(report)}: a name that is not an activation tensor of the plan",
                               f"{_label(report)}：有一个名称不是该规划中的激活张量"))
            elif sorted((sizes[n] for n in names), reverse=True) != want:
                share = sum(sizes[n] for n in names) / sum(want)
                wrong.append(L(f"{_label(report)}: your {_TOP_K} names hold {share:.0%} of the bytes of the "
                               f"{_TOP_K} largest",
                               f"{_label(report)}：你的 {_TOP_K} 个名称占有的字节数是最大的 {_TOP_K} 个张量的 "
                               f"{share:.0%}"))
            elif [sizes[n] for n in names] != want:
                wrong.append(L(f"{_label(report)}: the {_TOP_K} largest, but not largest first",
                               f"{_label(report)}：是最大的 {_TOP_K} 个，但没有从大到小排列"))
        call.refuse_shortcut()
        if wrong:
            hint = L("count each tensor once (a tensor has one row per layer that reads it) and rank by the bytes "
                     "the plan gives it (end - start), largest first; not by its channel count.",
                     "每个张量只计一次（一个张量在每个读取它的层上各有一行），按规划分配给它的字节数"
                     "（end - start）从大到小排序；不要按通道数排序。")
            raise _Fail(L(f"wrong for {len(wrong)} of {len(plans)} plans.",
                          f"{len(plans)} 个规划中有 {len(wrong)} 个出错。"), hint, wrong[:6])
        if my_reason is None:
            raise _not_done(L("my_reason is still None.", "my_reason 还是 None。"),
                            L("pick one key of checks.REASONS, from your measurement.",
                              "根据你的测量，从 checks.REASONS 中选一个键。"))
        if my_reason not in REASONS:
            raise _Fail(L(f"my_reason {my_reason!r:.40} is not a key of checks.REASONS.",
                          f"my_reason {my_reason!r:.40} 不是 checks.REASONS 的键。"),
                        L(f"one of: {', '.join(repr(k) for k in REASONS)}.",
                          f"应为以下之一：{'、'.join(repr(k) for k in REASONS)}。"))
        agreement = _agreement_by_reason()
        best = max(agreement, key=agreement.get)
        if my_reason != best:
            raise _Fail(L(f"'{my_reason}' ranks the tensors in an order that agrees with their bytes with a mean rank "
                          f"correlation of {agreement[my_reason]:+.2f}; another property agrees better.",
                          f"按 '{my_reason}' 给张量排序，与按字节数排序的平均秩相关为 "
                          f"{agreement[my_reason]:+.2f}；另有一个属性与字节数更一致。"),
                        L("measure it: for each key, compare the tensors' order by that property with their order "
                          "by bytes (a rank correlation), over all the course models.",
                          "去测量：对每个键，在所有课程模型上，比较张量按该属性的排序与按字节数的排序（秩相关）。"))
        exception = _judge_exception(my_exception, my_reason)
        return CheckResult(EX5, "passed", L(f"The {_TOP_K} largest activations are right for all {len(plans)} plans, "
                                            f"'{my_reason}' is the property that explains their size best "
                                            f"(mean rank correlation {agreement[my_reason]:+.2f}), and you found "
                                            "where it explains least.",
                                            f"全部 {len(plans)} 个规划中最大的 {_TOP_K} 个激活都正确；'{my_reason}' "
                                            f"是最能解释它们大小的属性（平均秩相关 {agreement[my_reason]:+.2f}）；"
                                            "你也找到了它解释得最差的地方。"), [exception])

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
            raise ValueError(L(f"this exercise answers {', '.join(abi.QUERY_NAMES[c] for c in _QUERIES_ALLOWED)}",
                               f"本练习只回答这些查询：{'、'.join(abi.QUERY_NAMES[c] for c in _QUERIES_ALLOWED)}"))
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
            raise _not_done(L(f"expected your diagnose function, got {type(diagnose).__name__}.",
                              f"这里要的是你的 diagnose 函数，收到的是 {type(diagnose).__name__}。"),
                            L("pass the function itself: checks.check_diagnosis(diagnose)",
                              "请传入函数本身：checks.check_diagnosis(diagnose)"))
        from .. import models
        rng = random.Random()
        wrong, n, missed = [], 0, set()
        for k, (model, soc, flag) in enumerate(_mysteries(rng), start=1):
            rt = runtime_for(soc)
            ctx = rt.init(str(models.model_path(model, soc)), flag)
            try:
                got = diagnose(_query_function(rt, ctx))
            except Exception as exc:
                raise _student_error(exc, _call(exc, "diagnose(query)", L(f"unknown context {k}", f"未知上下文 {k}")),
                                     L("call query(abi.RKNN_QUERY_MEM_SIZE) and the NATIVE attr queries, then "
                                       "compare with every course model's compiler report.",
                                       "调用 query(abi.RKNN_QUERY_MEM_SIZE) 和原生（NATIVE）属性查询，"
                                       "再与每个课程模型的编译报告比较。"))
            finally:
                _destroy_all(rt, [ctx])
            if got is None:
                raise _not_done(L("diagnose returned None.", "diagnose 返回了 None。"),
                                L("return {'model': ..., 'soc': ..., 'runtime_allocated': {...}}.",
                                  "请返回 {'model': ..., 'soc': ..., 'runtime_allocated': {...}}。"))
            if not isinstance(got, dict):
                raise _Fail(L(f"diagnose returned a {type(got).__name__}, not a dict.",
                              f"diagnose 返回的是 {type(got).__name__}，不是 dict。"),
                            L("return {'model': ..., 'soc': ..., 'runtime_allocated': {...}}.",
                              "请返回 {'model': ..., 'soc': ..., 'runtime_allocated': {...}}。"))
            n += 1
            answer = (str(got.get("model")), str(got.get("soc")).lower())
            if answer not in _accepted(model, soc):
                which = [w for w, ok in (("model", any(answer[0] == m for m, _ in _accepted(model, soc))),
                                         ("SoC", any(answer[1] == s for _, s in _accepted(model, soc)))) if not ok]
                missed.update(which or ["pair"])
                what = {("model",): "模型", ("SoC",): "SoC ", ("model", "SoC"): "模型和 SoC "}.get(
                    tuple(which), "模型与 SoC 的组合")
                wrong.append(L(f"unknown context {k}: the {' and the '.join(which) or 'pair'} "
                               f"{'does' if len(which) < 2 else 'do'} not fit what the queries show",
                               f"未知上下文 {k}：{what}与查询结果不符"))
            allocated = got.get("runtime_allocated")
            allocated = {str(a) for a in allocated} if isinstance(allocated, (set, list, tuple, frozenset)) else None
            if allocated != _RUNTIME_ALLOCATES[flag]:
                yours = (L("not a set", "不是集合") if allocated is None
                         else ("{" + ", ".join(sorted(allocated)) + "}" if allocated else "set()"))
                wrong.append(L(f"unknown context {k}: your runtime_allocated {yours} does not fit its DMA total",
                               f"未知上下文 {k}：你的 runtime_allocated（{yours}）与它的 DMA 总量不符"))
                missed.add("flag")
        if wrong:
            if "SoC" in missed:
                hint = L("C2 tells rk3568 from the others, but not rk3588 from rk3576 or rk3562: compare "
                         "total_weight_size and total_internal_size with every report too.",
                         "C2 能把 rk3568 与其他 SoC 区分开，但区分不了 rk3588 与 rk3576 或 rk3562："
                         "还要把 total_weight_size 和 total_internal_size 与每份报告比较。")
            elif "model" in missed:
                hint = L("several models share their output shapes: compare MEM_SIZE's weight and internal "
                         "sizes and every native attr with each report.",
                         "有几个模型的输出形状相同：把 MEM_SIZE 中权重和内部内存的大小以及每个原生属性"
                         "都与每份报告比较。")
            else:
                hint = L("once you know the model and SoC, init the same model with flag 0 (checks.runtime_for(soc)) "
                         "and compare the two DMA totals: the difference is the part that the flag makes yours "
                         "(about 0, about total_internal_size, or about everything).",
                         "知道模型和 SoC 之后，用标志 0 初始化同一个模型（checks.runtime_for(soc)），"
                         "比较两个 DMA 总量：差值就是该标志交给你的部分（约为 0、约为 total_internal_size，"
                         "或者约为全部）。")
            mine = _of_yours(len(wrong), 2 * n, L("answers", "答案"))
            raise _Fail(L(f"{mine} (a model-and-SoC pair and a runtime_allocated for each of {n} unknown contexts).",
                          f"{mine}（{n} 个未知上下文，每个都要给出模型与 SoC 的组合和 runtime_allocated）。"),
                        hint, wrong)
        return CheckResult(EX4, "passed", L(f"All {n} unknown contexts diagnosed: model, SoC and what the runtime "
                                            "allocated itself.",
                                            f"全部 {n} 个未知上下文都诊断正确：模型、SoC，以及运行时自己分配了什么。"))

    return _LAB.run(EX4, body)


_LAB = Lab("Lab 1", [EX1, EX2, EX3, EX4, EX5],
           zh=("实验 1", ["练习 1 — rknn_mem_size 的各个字段", "练习 2 — 预测一个输入/输出缓冲区的大小",
                        "练习 3 — 峰值占用，以及复用省下多少", "练习 4 — 诊断未知上下文",
                        "练习 5 ★ — 哪些激活占主导，以及这一规律在哪里失效"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_mem_size": 3, "check_size_prediction": 4, "check_plan": 6, "check_diagnosis": 5,
          "check_dominant": 6}
_LAB.seal(globals(), {"check_mem_size": EX1, "check_size_prediction": EX2, "check_plan": EX3,
                      "check_diagnosis": EX4, "check_dominant": EX5})
