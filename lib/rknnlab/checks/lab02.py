"""Lab 2 (lifecycle): one check per exercise.

==============================  ================================================================
:func:`check_dup_prediction`    1. ``predict_dma_total(sizes, n, how)``: N contexts by init or by dup
:func:`check_teardown`          2. ``teardown(rt, contexts, mems, model_mem=None)``: everything back
:func:`check_load_from_buffer`  3. ``load_from_buffer`` and ``load_zero_copy``: who owns the model bytes
:func:`check_diagnose`          4. ``diagnose(result)``: which lifecycle leak a run shows (``MYSTERY``)
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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..i18n import Texts, pick as L
from ..rknn import abi, errors
from . import _lab02_cases as _cases
from ._core import (CheckResult, Lab, _current_soc, _Fail, _frames, _fresh_seed, _model_file, _not_done,
                    _open_runtime, _require_function, _soc_of, _student_error, _where,
                    _whole_number)

__all__ = ["CheckResult", "check_diagnose", "check_dup_prediction", "check_load_from_buffer",
           "check_teardown", "check_verdict", "summary", "results", "MYSTERY", "KINDS",
           "LAB2_MODEL", "DUP_MODELS", "RESOLUTION", "practice_traces", "one_run"]

#: the model of exercises 2, 3 and 4 (a 4 MB file: one copy of it stands far above the
#: harness's noise in the heap)
LAB2_MODEL = "mobilenet_v2"
#: exercise 1's two models: a large weight part (mobilenet_v2) and large io (yolov5n)
DUP_MODELS = ("mobilenet_v2", "yolov5n")
#: exercise 4: iterations per mystery run, each recorded with a full memory sample after every
#: runtime call (rknnlab.run's sample_calls): the heap's verdicts are then sure in 200 frames
DIAGNOSE_ITERATIONS = 200
#: exercise 5: "flat" means growth above this many bytes per iteration is ruled out
RESOLUTION = 1024

#: the exercises' titles: the results' keys (their Chinese is registered with Lab(..., zh=) below)
EX_DUP = "Exercise 1 — predict what rknn_dup_context saves"  # en-only
EX_TEARDOWN = "Exercise 2 — order a teardown"  # en-only
EX_BUFFER = "Exercise 3 — load a model from a buffer, ownership right"  # en-only
EX_DIAGNOSE = "Exercise 4 — find a leak in a lifecycle"  # en-only
EX_VERDICT = "Exercise 5 ★ — does it grow?"  # en-only




#: the words diagnose() returns, with what each means (shown in the notebook)
KINDS: Mapping = Texts({
    "context_per_frame": lambda: L("a whole context (rknn_init ... rknn_destroy) for every frame",
                                   "每一帧都创建一个完整的上下文（rknn_init ... rknn_destroy）"),
    "outputs_not_released": lambda: L("is_prealloc = 0 outputs never given back with rknn_outputs_release",
                                      "is_prealloc = 0 的输出从未用 rknn_outputs_release 归还"),
    "mems_not_destroyed": lambda: L("a mem made with rknn_create_mem every frame, never rknn_destroy_mem",
                                    "每一帧都用 rknn_create_mem 创建一块张量内存，从不调用 rknn_destroy_mem"),
    "python_keeps_outputs": lambda: L("correct runtime calls, but the program keeps a copy of every output",
                                      "运行时调用都正确，但程序保留了每个输出的一份副本"),
    "clean": lambda: L("none of these: nothing grows per frame", "以上都不是：没有任何东西逐帧增长"),
})
#: exercise 4's anonymous lifecycles (A is mystery_A, ...): one of each kind
MYSTERY: Dict[str, Callable[[Any], None]] = {"A": _cases.mystery_A, "B": _cases.mystery_B,
                                             "C": _cases.mystery_C, "D": _cases.mystery_D,
                                             "E": _cases.mystery_E}

def _see_the_rule() -> str:
    """Where a teardown failure sends the student (the check never prints the rule's order)."""
    return L("Compare what failed with the teardown rule in the lab's header.",
             "把失败的调用与实验开头的资源释放规则对照一下。")


def _no_hint(text: str) -> str:
    """A runtime error without the runtime's own hint (which lists every cause of its code)."""
    return text.split(" Hint:")[0].split("。提示：")[0]


def _is_note(detail: str) -> bool:
    """A detail that is a note (it starts with "Note:" or "说明：")."""
    return detail.startswith(("Note:", "说明："))


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
        names = os.listdir("/proc/self/fd")  # en-only
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")  # en-only
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


def _dup_counts_shared_weights(measured: Dict[str, List[int]], weights: int) -> bool:
    """True when the runtime's per-context total of a duplicate holds the shared weights too:
    N duplicates then add up to about N whole contexts (no document says how a duplicate is
    counted; the simulator counts only what it allocated, assumption A9)."""
    init, dup = measured["init"], measured["dup"]
    if weights <= 0 or len(dup) < 2:
        return False
    return all(abs(d - i) < 0.5 * (n - 1) * weights for n, (i, d) in enumerate(zip(init, dup), 1) if n > 1)


def _off_by(value: int, total: int) -> str:
    diff = value - total
    return L(f"{abs(diff):,} bytes too {'much' if diff > 0 else 'little'}",
             f"{'多' if diff > 0 else '少'}了 {abs(diff):,} 字节")


def check_dup_prediction(predict_dma_total: Callable[[Dict[str, int], int, str], int]) -> CheckResult:
    """Exercise 1: ``predict_dma_total(sizes, n, how) -> bytes``: the DMA total of ``n``
    contexts of one model made by rknn_init each ("init") or by rknn_dup_context of the
    first ("dup"), from ``sizes`` = {"weights", "internal", "io"} of one context.

    The check measures real contexts (1 to 4, each run once) of two models and compares.
    A prediction counts as right when it is within 1% of the measured total, plus 4 KiB for
    each context (a board adds buffers of its own and rounds to 4 KiB).  A failure shows
    the prediction, the measurement and how far apart they are, never the formula.  On a
    runtime whose per-context total of a duplicate counts the shared weights (the measured
    dup totals then equal the init ones), the dup predictions cannot be judged: the check
    says so and judges the rest."""
    def body() -> CheckResult:
        _require_function(predict_dma_total, "check_dup_prediction(predict_dma_total)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        details, wrong, unjudged = [], [], []
        right = 0
        try:
            for model in DUP_MODELS:
                path = _model_file(model, soc)
                frame = _frames(model, soc, n=1, seed=2)[0]
                sizes = _model_sizes(rt, path, frame)
                measured = {how: _measure_contexts(rt, path, frame, how) for how in ("init", "dup")}
                blind = _dup_counts_shared_weights(measured, sizes["weights"])
                if blind:
                    unjudged.append(model)
                for how in ("init", "dup"):
                    for n, total in enumerate(measured[how], 1):
                        what = L(f"predict_dma_total(sizes of {model}, {n}, {how!r})",
                                 f"predict_dma_total({model} 的 sizes, {n}, {how!r})")
                        try:
                            got = predict_dma_total(dict(sizes), n, how)
                        except Exception as exc:
                            raise _student_error(exc, what, L("add up weights, internal and io: which of them "
                                                              "does every context need, and which do dup'd "
                                                              "contexts share?",
                                                              "把 weights、internal 和 io 相加：哪些是每个上下文"
                                                              "都需要的，哪些由复制上下文共享？"))
                        if got is None:
                            raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                            L("return a number of bytes.", "请返回一个字节数。"))
                        value = _whole_number(got)
                        if value is None:
                            raise _Fail(L(f"{what} returned {got!r}, not a whole number of bytes.",
                                          f"{what} 返回了 {got!r}，不是一个整数字节数。"),
                                        L("return an int: a sum of the sizes, each counted as many times as "
                                          "there are copies of it.",
                                          "请返回一个 int：各项大小之和，每一项有几份副本就计几次。"))
                        if blind and how == "dup" and n > 1:
                            continue
                        if abs(value - total) > 0.01 * total + 4096 * n:
                            wrong.append(L(f"{model}, {n} context(s) by {how}: you predicted {_mib(value)}, "
                                           f"measured {_mib(total)}: {_off_by(value, total)}",
                                           f"{model}，用 {how} 创建 {n} 个上下文：你预测 {_mib(value)}，"
                                           f"测得 {_mib(total)}：{_off_by(value, total)}"))
                        else:
                            right += 1
                    details.append(L(f"{model} by {how}, N = 1..4: measured ", f"{model} 用 {how} 创建，"
                                     "N = 1..4：测得 ")
                                   + ", ".join(f"{t / 2**20:.2f}" for t in measured[how]) + " MiB")
        finally:
            rt.close()
        if unjudged:
            details.append(L("Note: cannot judge the dup predictions for N > 1 on this runtime "
                             f"({', '.join(unjudged)}). "
                             "Its RKNN_QUERY_MEM_SIZE counts the shared weights in each duplicate's own total. "
                             "No document says how a duplicate is counted (the simulator's way is assumption A9).",
                             f"说明：在这个运行时上，无法评判 N > 1 时对 dup 的预测（{'、'.join(unjudged)}）。"
                             "它的 RKNN_QUERY_MEM_SIZE 在每个复制上下文自己的总量中都计入了共享的权重。"
                             "没有文档说明复制上下文应如何计算（模拟器的做法是假设 A9）。"))
        if wrong:
            raise _Fail(L(f"{len(wrong)} of {len(wrong) + right} predictions are off by more than 1% of the measured "
                          "total plus 4 KiB per context:",
                          f"{len(wrong) + right} 个预测中有 {len(wrong)} 个偏差超过（测量总量的 1%）+"
                          "（每个上下文 4 KiB）："),
                        L("Compare each difference with the three sizes the model "
                          "gives (weights, internal, io). A context made by rknn_init has all three of its own. A "
                          "dup'd context shares some of them with the first: which ones grow with n?",
                          "把每个偏差与模型给出的三项大小（weights、internal、io）比较一下。由 rknn_init "
                          "创建的上下文三项都各有一份。复制上下文与第一个上下文共享其中的一部分：哪些随 n 增长？"),
                        wrong[:6] + ([L(f"... and {len(wrong) - 6} more", f"……另外还有 {len(wrong) - 6} 个")]
                                     if len(wrong) > 6 else []) +
                        [d for d in details if _is_note(d)])
        if unjudged:
            return CheckResult(EX_DUP, "passed", L(f"All {right} predictions the check could judge match the measured "
                               "DMA totals (within 1% of each plus 4 KiB per context). See the note: this runtime "
                               "does not let it judge the duplicates.",
                               f"检查能够评判的 {right} 个预测全部与测得的 DMA 总量相符（误差不超过各自的 1% 加每个"
                               "上下文 4 KiB）。请看说明：这个运行时无法让检查评判复制上下文。"), details)
        return CheckResult(EX_DUP, "passed", L(f"All {right} predictions match the measured DMA totals of real "
                           "contexts (within 1% of each plus 4 KiB per context). On this runtime, dup'd contexts "
                           "share the weights and each has its own internal and io memory.",
                           f"全部 {right} 个预测都与真实上下文测得的 DMA 总量相符（误差不超过各自的 1% 加每个上下文 "
                           "4 KiB）。在这个运行时上，复制上下文共享权重，并各自拥有自己的内部内存和输入/输出内存。"),
                           details)

    return _LAB.run(EX_DUP, body)


# =========================================================================== exercises 2 and 3: a recording runtime
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
        info = {"model": kind, "flag": int(flag), "size": size,
                "extend": None if extend is None else {"fd": int(extend.model_buffer_fd),
                                                       "size": int(extend.real_model_size),
                                                       "flags": int(extend.model_buffer_flags)}}
        return self._call("rknn_init", info, lambda: self._rt.init(model, flag, extend, size))

    def destroy(self, ctx: int) -> int:
        return self._call("rknn_destroy", {"ctx": ctx}, lambda: self._rt.destroy(ctx))

    def dup_context(self, ctx: int) -> int:
        return self._call("rknn_dup_context", {"ctx": ctx}, lambda: self._rt.dup_context(ctx))

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


# =========================================================================== exercise 2
#: the scenes of exercise 2: (name, zero-copy model, mems per context, duplicates)
_SCENES = (("plain", False, False, 0), ("bound", False, True, 0), ("zero_copy", True, True, 0),
           ("dup", True, True, 1))


def _zero_copy_model(rt: Any, path: str) -> Tuple[Any, abi.rknn_init_extend]:
    size = os.path.getsize(path)
    model_mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    with open(path, "rb") as f:
        ctypes.memmove(model_mem.contents.virt_addr, f.read(), size)
    return model_mem, abi.rknn_init_extend(real_model_offset=0, real_model_size=size,
                                           model_buffer_fd=model_mem.contents.fd,
                                           model_buffer_flags=model_mem.contents.flags)


class _SceneRefused(Exception):
    """The runtime refused to build a scene (rknn_dup_context of a zero-copy context): the
    scene is skipped, with the runtime's error."""


def _teardown_scene(rt: Any, path: str, scene: str, frame: np.ndarray
                    ) -> Tuple[List[int], List[Tuple[int, Any]], Any]:
    """(the contexts, [(ctx, a mem made with it)], the zero-copy model mem or None), each
    context run once.  With a duplicate, the first context is rknn_init's and the others
    are rknn_dup_context of it: on the simulator they read the same weights and the same
    model buffer (assumption A23).  No document says rknn_dup_context accepts a zero-copy
    context: when the runtime refuses, what was made is given back and _SceneRefused is
    raised."""
    from ..experiment.variants import frame_input, query_io
    _name, zero_copy, with_mems, dups = next(sc for sc in _SCENES if sc[0] == scene)
    model_mem = None
    if zero_copy:
        model_mem, extend = _zero_copy_model(rt, path)
        first = rt.init(model_mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend,
                        size=os.path.getsize(path))
    else:
        first = rt.init(path)
    contexts = [first]
    try:
        for _ in range(dups):
            contexts.append(rt.dup_context(first))
    except errors.RknnError as exc:
        for ctx in reversed(contexts):
            rt.destroy(ctx)
        if model_mem is not None:
            rt.destroy_mem(0, model_mem)
        raise _SceneRefused(_no_hint(str(exc))) from exc
    mems: List[Tuple[int, Any]] = []
    for ctx in contexts:
        if with_mems:
            _, out_attrs = query_io(rt, ctx, native=True)
            for a in out_attrs:
                mem = rt.create_mem(ctx, a.size_with_stride)
                rt.set_io_mem(ctx, mem, a)
                mems.append((ctx, mem))
            mems.append((ctx, rt.create_mem(ctx, 4096)))     # a scratch mem, bound to nothing
        rt.inputs_set(ctx, frame_input(frame))
        rt.run(ctx)
    return contexts, mems, model_mem


def _tear_down_right(rt: Any, contexts: Sequence[int], mems: Sequence[Tuple[int, Any]], model_mem: Any) -> None:
    """The check's own teardown (the warm-up): not shown to the student."""
    for ctx, mem in mems:
        rt.destroy_mem(ctx, mem)
    for ctx in reversed(contexts):
        rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def _judge_teardown(spy: _RecordingRuntime, contexts: Sequence[int], mems: Sequence[Tuple[int, Any]],
                    model_mem: Any, scene: str) -> None:
    """Raises _Fail naming what went wrong (which call, on what), never the right order."""
    owner = {ctypes.addressof(m.contents): ctx for ctx, m in mems}
    model_address = ctypes.addressof(model_mem.contents) if model_mem is not None else None
    failed = [(k, name, info, err) for k, (name, info, err) in enumerate(spy.calls) if err]
    if failed:
        k, name, info, err = failed[0]
        dead = {i["ctx"] for n, i, e in spy.calls[:k] if n == "rknn_destroy" and e is None}
        with_ctx = False
        if name == "rknn_destroy":
            which = (L("a context that was already destroyed", "一个已经销毁的上下文") if info["ctx"] in dead
                     else L("a context", "一个上下文"))
        elif model_address is not None and info.get("mem") == model_address:
            with_ctx = bool(info.get("ctx"))
            which = L("the zero-copy model buffer", "零拷贝模型缓冲区") + (
                L(f" with ctx = {info['ctx']:#x}", f"（ctx = {info['ctx']:#x}）") if with_ctx else "")
        else:
            which = (L("a mem made with a context that was already destroyed",
                       "一块张量内存（创建它的上下文已经销毁）") if owner.get(info.get("mem")) in dead
                     else L("a mem made with a context", "一块用上下文创建的张量内存"))
        err = _no_hint(err)        # the runtime's own hint is about another mistake
        raise _Fail(L(f"{scene}: {name} of {which} failed: {err}", f"{scene}：对{which}调用 {name} 失败：{err}"),
                    (L("The model buffer was made with no context. ", "模型缓冲区是在没有上下文时创建的。")
                     if with_ctx else "") + _see_the_rule())
    for ctx in contexts:
        n = sum(1 for name, info, _e in spy.calls if name == "rknn_destroy" and info["ctx"] == ctx)
        if n != 1:
            raise _Fail(L(f"{scene}: rknn_destroy was called {n} time(s) for one of the {len(contexts)} "
                          "context(s); each needs exactly one.",
                          f"{scene}：{len(contexts)} 个上下文中，有一个被调用了 {n} 次 rknn_destroy；"
                          "每个上下文恰好需要一次。"), _see_the_rule())
    destroyed_at = {info["ctx"]: k for k, (name, info, _e) in enumerate(spy.calls) if name == "rknn_destroy"}
    gone = {info["mem"]: k for k, (name, info, _e) in enumerate(spy.calls) if name == "rknn_destroy_mem"}
    left = [a for a in owner if a not in gone]
    if left:
        raise _Fail(L(f"{scene}: {len(left)} of the {len(owner)} mems made with a context were left to "
                      "rknn_destroy. The simulator frees them there (assumption A7); no document says a "
                      "board does.",
                      f"{scene}：用上下文创建的 {len(owner)} 块张量内存中，有 {len(left)} 块留给了 rknn_destroy。"
                      "模拟器会在那里释放它们（假设 A7）；没有文档说开发板也会这样做。"), _see_the_rule())
    late = [a for a in owner if gone[a] > destroyed_at[owner[a]]]
    if late:
        raise _Fail(L(f"{scene}: {len(late)} mem(s) were destroyed after rknn_destroy of the context they "
                      "were made with.",
                      f"{scene}：有 {len(late)} 块张量内存是在创建它们的上下文执行 rknn_destroy 之后才销毁的。"),
                    _see_the_rule())
    if model_address is not None:
        if model_address not in gone:
            raise _Fail(L(f"{scene}: the zero-copy model buffer was never destroyed: its DMA buffer and its "
                          "file descriptor stay (airockchip/rknn-toolkit2#532 reports such fds running out "
                          "after 1,020 loads).",
                          f"{scene}：零拷贝模型缓冲区从未被销毁：它的 DMA 缓冲区和文件描述符一直保留"
                          "（airockchip/rknn-toolkit2#532 报告过这类 fd 在加载 1,020 次之后耗尽）。"),
                        _see_the_rule())
        alive = [c for c in contexts if destroyed_at[c] > gone[model_address]]
        if alive:
            raise _Fail(L(f"{scene}: the zero-copy model buffer was destroyed while {len(alive)} of the "
                          f"{len(contexts)} context(s) reading it still lived. The API reference (V2.3.2 "
                          "p.20) says it must stay valid until rknn_destroy; a board may read freed memory.",
                          f"{scene}：零拷贝模型缓冲区被销毁时，读取它的 {len(contexts)} 个上下文中仍有 "
                          f"{len(alive)} 个存活。API 参考手册（V2.3.2 第 20 页）说它必须在 rknn_destroy 之前"
                          "一直有效；开发板可能会读到已释放的内存。"),
                        _see_the_rule())


def _other_context_note(spy: _RecordingRuntime, mems: Sequence[Tuple[int, Any]], scene: str) -> Optional[str]:
    """A note when a mem made with a context was destroyed naming another (live) context: the
    runtime accepted it, but the course's convention is the context that made it."""
    owner = {ctypes.addressof(m.contents): ctx for ctx, m in mems}
    other = sum(1 for name, info, err in spy.calls if name == "rknn_destroy_mem" and err is None
                and info["mem"] in owner and info["ctx"] != owner[info["mem"]])
    if not other:
        return None
    return L(f"Note: {scene}: {other} mem(s) made with one context were destroyed with another. This "
             "runtime accepted it. The API reference (p.20) lets a mem made with no context be released "
             "with any context; for a mem made with a context, the course passes that context (a "
             "convention: no document says another one fails).",
             f"说明：{scene}：有 {other} 块用一个上下文创建的张量内存是用另一个上下文销毁的。这个运行时"
             "接受了这种做法。API 参考手册（第 20 页）允许用任意上下文释放没有上下文时创建的张量内存；"
             "对于用某个上下文创建的张量内存，本课程传入创建它的那个上下文（这是一个约定：没有文档说"
             "传入别的上下文会失败）。")


def _runtime_keeps_model_fd(rt: Any, path: str, frame: np.ndarray) -> bool:
    """The check's own zero-copy life, torn down right: True when the model buffer's file
    descriptor is still open afterwards (airockchip/rknn-toolkit2#532 reports this of
    rknn_destroy_mem on an ALLOC_NO_CONTEXT mem).  It also opens what a process's first
    rknn_init keeps (caches, libraries), which are not a scene's."""
    before = set(_dma_fds())
    contexts, mems, model_mem = _teardown_scene(rt, path, "zero_copy", frame)
    model_fd = int(model_mem.contents.fd)
    _tear_down_right(rt, contexts, mems, model_mem)
    return model_fd in set(_dma_fds()) - before


def check_teardown(teardown: Callable[..., Any]) -> CheckResult:
    """Exercise 2: ``teardown(rt, contexts, mems, model_mem=None)`` gives back everything:
    ``contexts`` (one context, or the first and then its duplicate), ``mems`` = [(ctx, mem made with
    ctx)], and a zero-copy model buffer read by every context, or None.

    Four scenes, in a random order: a plain context; a context with output mems bound and a
    scratch mem; a zero-copy context with such mems; a zero-copy context and its duplicate,
    each with such mems (skipped with a note when the runtime refuses to duplicate a
    zero-copy context).  Measured: every call's return code, the order of the calls, the
    open file descriptors (each DMA buffer holds one) and, on the simulator only, that each
    context fails a query afterwards (on a board a call on a destroyed context is
    undocumented).  A mem destroyed with another live context than its maker passes with a
    note.
    A failure names the call that failed or the object freed out of order, and sends the
    student to the rule in the lab's header; it never states the order.  When the check's
    own right teardown leaves the model buffer's fd open (the runtime's reported leak,
    #532), that fd is reported on its own line and not counted against the student."""
    def body() -> CheckResult:
        _require_function(teardown, "check_teardown(teardown)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        path = _model_file(LAB2_MODEL, soc)
        frame = _frames(LAB2_MODEL, soc, n=1, seed=4)[0]
        details = []
        rng = np.random.default_rng(_fresh_seed())
        try:
            runtime_leak = _runtime_keeps_model_fd(rt, path, frame)
            for k in rng.permutation(len(_SCENES)):
                scene = _SCENES[int(k)][0]
                before = set(_dma_fds())
                try:
                    contexts, mems, model_mem = _teardown_scene(rt, path, scene, frame)
                except _SceneRefused as exc:
                    details.append(L(f"Note: {scene}: skipped. This runtime refused rknn_dup_context of a "
                                     f"zero-copy context ({exc}). No document says it accepts one; on the "
                                     "simulator the duplicate reads the same model buffer (A23).",
                                     f"说明：{scene}：已跳过。这个运行时拒绝对零拷贝上下文调用 rknn_dup_context"
                                     f"（{exc}）。没有文档说它接受零拷贝上下文；在模拟器上，复制上下文读取"
                                     "同一个模型缓冲区（A23）。"))
                    continue
                made = {fd: n for fd, n in _dma_fds().items() if fd not in before}
                model_fd = int(model_mem.contents.fd) if model_mem is not None else None
                spy = _RecordingRuntime(rt)
                shuffled = list(mems)
                rng.shuffle(shuffled)
                given = list(contexts)         # the first context, then its duplicates
                what = (L(f"teardown(rt, <{len(given)} context(s)>, <{len(mems)} mems>",
                          f"teardown(rt, <{len(given)} 个上下文>, <{len(mems)} 块张量内存>")
                        + (", model_mem)" if model_mem is not None else ")"))
                try:
                    if model_mem is None:
                        teardown(spy, given, shuffled)
                    else:
                        teardown(spy, given, shuffled, model_mem)
                except Exception as exc:
                    # a runtime call that failed is judged below, with the others
                    if not (isinstance(exc, errors.RknnError) and any(c[2] for c in spy.calls)):
                        raise _student_error(exc, what, L("contexts is a list of contexts; mems is a list of "
                                                          "(ctx, mem) pairs, each mem with the context it was "
                                                          "made with.",
                                                          "contexts 是上下文的列表；mems 是 (ctx, mem) 对的列表，"
                                                          "每块张量内存都附有创建它的上下文。"))
                if not spy.calls:
                    raise _not_done(L(f"{what} made no runtime call.", f"{what} 没有调用任何运行时函数。"),
                                    L("call rt.destroy_mem(...) and rt.destroy(...).",
                                      "请调用 rt.destroy_mem(...) 和 rt.destroy(...)。"))
                _judge_teardown(spy, contexts, mems, model_mem, scene)
                if rt.backend == "sim":
                    # a call on a destroyed context fails on the simulator; on a board no document
                    # says what it does (it may read freed memory): there the recorded calls judge
                    for ctx in contexts:
                        try:
                            rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
                            raise _Fail(L(f"{scene}: a context still answers rknn_query after teardown.",
                                          f"{scene}：资源释放之后，仍有一个上下文响应 rknn_query。"),
                                        _see_the_rule())
                        except errors.RknnError:
                            pass
                left = {fd: n for fd, n in _dma_fds().items() if fd in made}
                if runtime_leak and model_fd in left:
                    details.append(L(f"{scene}: the zero-copy model buffer's fd stays open after rknn_destroy_mem, "
                                     "as after the check's own teardown: the runtime's reported leak "
                                     "(airockchip/rknn-toolkit2#532), not counted against you",
                                     f"{scene}：零拷贝模型缓冲区的 fd 在 rknn_destroy_mem 之后仍保持打开，"
                                     "与检查自己释放资源之后一样：这是运行时已被报告的泄漏"
                                     "（airockchip/rknn-toolkit2#532），不算作你的错误"))
                    del left[model_fd]
                if left:
                    raise _Fail(L(f"{scene}: {sum(left.values()):,} of the {sum(made.values()):,} DMA bytes the scene "
                                  f"allocated ({len(left)} of its {len(made)} buffers) are still held after "
                                  "teardown.",
                                  f"{scene}：资源释放之后，该场景分配的 {sum(made.values()):,} 个 DMA 字节中仍有 "
                                  f"{sum(left.values()):,} 个被占用（{len(made)} 个缓冲区中的 {len(left)} 个）。"),
                                _see_the_rule())
                n = len(spy.calls)
                details.append(L(f"{scene}: {n} call{'s' if n != 1 else ''}, none failed; all "
                                 f"{sum(made.values()):,} DMA bytes ({len(made)} buffers) came back",
                                 f"{scene}：{n} 次调用，没有一次失败；全部 {sum(made.values()):,} 个 DMA 字节"
                                 f"（{len(made)} 个缓冲区）都已归还"))
                note = _other_context_note(spy, mems, scene)
                if note:
                    details.append(note)
        finally:
            rt.close()
        note = any(_is_note(d) for d in details)
        return CheckResult(EX_TEARDOWN, "passed", L("Everything comes back, no call fails, and every buffer "
                                                    "outlives the contexts that use it",
                                                    "一切都已归还，没有调用失败，每个缓冲区都比使用它的上下文"
                                                    "活得更久")
                           + (L(" (see the note).", "（请看说明）。") if note else L(".", "。")), details)

    return _LAB.run(EX_TEARDOWN, body)


# =========================================================================== exercise 3
def _load_hint(name: str) -> str:
    """What to try when a load function raises, per function (the runtime's generic hint is left out)."""
    if name == "load_from_buffer":
        return L("read the file into a buffer, then rt.init(buffer) (size > 0: a buffer; size = 0: a path).",
                 "把文件读入一个缓冲区，然后调用 rt.init(buffer)（size > 0：缓冲区；size = 0：路径）。")
    return L("the message names the argument that was refused. Compare your rt.create_mem2 and rt.init "
             "calls with the exercise's C block and its table of C and Python calls.",
             "消息指出了被拒绝的参数。把你的 rt.create_mem2 和 rt.init 调用与练习中的 C 代码块以及"
             "C 与 Python 调用对照表比较一下。")


def _loaded_context(rt: Any, spy: _RecordingRuntime, load: Callable[..., Any], name: str, path: str
                    ) -> Tuple[Any, Optional[int]]:
    """(what load returned, the growth of the heap in use across the call)."""
    h0 = _heap()
    try:
        got = load(spy, path)
    except errors.RknnError as exc:
        # the runtime's own hint lists every cause of its code: the hint here is about this function
        raise _Fail(L(f"{name}(rt, model_path) raised {type(exc).__name__}: {_no_hint(str(exc))}{_where(exc)}",
                      f"{name}(rt, model_path) 抛出了 {type(exc).__name__}：{_no_hint(str(exc))}{_where(exc)}"),
                    _load_hint(name))
    except Exception as exc:
        raise _student_error(exc, f"{name}(rt, model_path)", _load_hint(name))
    h1 = _heap()
    return got, (h1 - h0 if h0 is not None and h1 is not None else None)


def _reference_loads(rt: Any, path: str, size: int) -> Dict[str, Optional[int]]:
    """The heap growth of the check's own loads, each measured like the student's and then
    torn down: "path" (rknn_init of the path), "buffer" (its own buffer, dropped after
    rknn_init) and "zero_copy" (a create_mem2 buffer with ZERO_COPY).  What a correct load
    keeps on this runtime, so the student is judged against it, not against a fixed size."""
    def path_load(r: Any, p: str) -> Tuple[int, Any]:
        return r.init(p), None

    def buffer_load(r: Any, p: str) -> Tuple[int, Any]:
        with open(p, "rb") as f:
            data = f.read()
        ctx = r.init(data)
        del data
        return ctx, None

    def zero_copy_load(r: Any, p: str) -> Tuple[int, Any]:
        mem = r.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
        with open(p, "rb") as f:
            f.readinto((ctypes.c_uint8 * size).from_address(mem.contents.virt_addr))
        ext = abi.rknn_init_extend(real_model_offset=0, real_model_size=size, model_buffer_fd=mem.contents.fd,
                                   model_buffer_flags=mem.contents.flags)
        return r.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, ext, size=size), mem

    grown: Dict[str, Optional[int]] = {}
    for key, load in (("path", path_load), ("buffer", buffer_load), ("zero_copy", zero_copy_load)):
        h0 = _heap()
        ctx, mem = load(rt, path)
        h1 = _heap()
        rt.destroy(ctx)
        if mem is not None:
            rt.destroy_mem(0, mem)
        grown[key] = h1 - h0 if h0 is not None and h1 is not None else None
    return grown


#: rknn_init's model argument as the recording runtime names it, in Chinese
_MODEL_ARG_ZH = {"path": "路径", "buffer": "缓冲区", "address": "地址"}


def _inits(spy: _RecordingRuntime) -> List[Dict[str, Any]]:
    return [info for name, info, err in spy.calls if name == "rknn_init" and err is None]


def _judge_plain(rt: Any, load_from_buffer: Callable[..., Any], path: str, size: int,
                 reference: bytes, frame: np.ndarray, own: Dict[str, Optional[int]]) -> List[str]:
    spy = _RecordingRuntime(rt)
    ctx, grew = _loaded_context(rt, spy, load_from_buffer, "load_from_buffer", path)
    if ctx is None:
        raise _not_done(L("load_from_buffer returned None.", "load_from_buffer 返回了 None。"),
                        L("return the context rt.init gave you.", "请返回 rt.init 给你的上下文。"))
    try:
        inits = _inits(spy)
        if len(inits) != 1:
            raise _Fail(L(f"load_from_buffer made {len(inits)} successful rknn_init calls; expected one.",
                          f"load_from_buffer 成功调用了 {len(inits)} 次 rknn_init；应当只有一次。"),
                        L("read the file once, call rt.init once, return its context.",
                          "读一次文件，调用一次 rt.init，返回它的上下文。"))
        if inits[0]["model"] == "path":
            raise _Fail(L("load_from_buffer passed rknn_init a path (size = 0): the runtime read the file "
                          "itself.", "load_from_buffer 传给 rknn_init 的是路径（size = 0）：运行时自己读取了文件。"),
                        L("read the file into a buffer (open(path, 'rb').read()), then pass the "
                          "buffer: size > 0 means the model is a buffer.",
                          "把文件读入一个缓冲区（open(path, 'rb').read()），然后传入这个缓冲区：size > 0 "
                          "表示模型是一个缓冲区。"))
        if inits[0]["flag"] & abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY:
            raise _Fail(L("load_from_buffer used RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: that is the second "
                          "function's job.",
                          "load_from_buffer 使用了 RKNN_FLAG_MODEL_BUFFER_ZERO_COPY：那是第二个函数的任务。"),
                        L("init from an ordinary buffer with flag 0 here.", "这里请用标志 0 从普通缓冲区初始化。"))
        _check_outputs(rt, ctx, frame, reference, "load_from_buffer")
        details = [L("rknn_init got a buffer (size > 0); the context's outputs equal those of a context "
                     "loaded from the path",
                     "rknn_init 收到的是一个缓冲区（size > 0）；该上下文的输出与从路径加载的上下文相同")]
        base = own.get("buffer")
        if grew is not None and base is not None:
            line = L(f"heap in use after load_from_buffer returned: {grew:+,} bytes; after the check's own "
                     f"load from a buffer it dropped: {base:+,} bytes (model file: {size:,} bytes)",
                     f"load_from_buffer 返回后的已用堆内存：{grew:+,} 字节；检查自己从缓冲区加载并丢弃缓冲区之后："
                     f"{base:+,} 字节（模型文件：{size:,} 字节）")
            if grew - base > 0.5 * size:
                raise _Fail(line + L(f": about {(grew - base) / size:.1f} copies of the model more than a load "
                                     "that drops its buffer. Your buffer is still alive.",
                                     f"：比丢弃缓冲区的加载多出约 {(grew - base) / size:.1f} 份模型副本。"
                                     "你的缓冲区仍然存活。"),
                            L("after rt.init, nothing may refer to your buffer any more: do not return it, "
                              "store it in a global or an attribute, or keep it in a list.",
                              "rt.init 之后，任何东西都不能再引用你的缓冲区：不要返回它，不要把它存到全局变量"
                              "或对象属性中，也不要把它放进列表。"))
            if rt.backend == "sim" and grew < base - 0.5 * size:
                raise _Fail(line + L(": less than the runtime's copy of the model is held. That is what a "
                                     "zero-copy load does, not an ordinary one.",
                                     "：保留的内存比运行时自己的那份模型副本还少。这是零拷贝加载的表现，"
                                     "不是普通加载。"),
                            L("init from an ordinary buffer with flag 0.", "请用标志 0 从普通缓冲区初始化。"))
            details.append(line + (L(" (on the simulator that is one copy, the runtime's own: assumption A4)",
                                     "（在模拟器上，这就是一份副本，即运行时自己的那份：假设 A4）")
                                   if rt.backend == "sim" else ""))
        return details
    finally:
        if isinstance(ctx, (int, np.integer)) and not isinstance(ctx, bool):
            try:
                rt.destroy(int(ctx))
            except errors.RknnError:
                pass


def _check_outputs(rt: Any, ctx: Any, frame: np.ndarray, reference: bytes, name: str) -> None:
    if not isinstance(ctx, (int, np.integer)) or isinstance(ctx, bool):
        raise _Fail(L(f"{name} returned {type(ctx).__name__} where the context (an int) was expected.",
                      f"{name} 返回了 {type(ctx).__name__}，这里应当是上下文（一个 int）。"),
                    L("return the context rt.init gave you.", "请返回 rt.init 给你的上下文。"))
    try:
        got = _run_once(rt, int(ctx), frame)
    except errors.RknnError as exc:
        raise _Fail(L(f"running the context {name} returned failed: {exc}",
                      f"运行 {name} 返回的上下文失败：{exc}"),
                    L("return a live context: the buffers it needs must stay valid until rknn_destroy.",
                      "请返回一个存活的上下文：它所需的缓冲区必须在 rknn_destroy 之前一直有效。"))
    if got != reference:
        raise _Fail(L(f"the context from {name} gives other outputs than a context loaded from the path.",
                      f"{name} 返回的上下文给出的输出与从路径加载的上下文不同。"),
                    L("load the whole file: size is the file's size.", "请加载整个文件：size 就是文件的大小。"))


def _judge_zero_copy(rt: Any, load_zero_copy: Callable[..., Any], path: str, size: int,
                     reference: bytes, frame: np.ndarray, weights: int,
                     own: Dict[str, Optional[int]]) -> List[str]:
    spy = _RecordingRuntime(rt)
    got, grew = _loaded_context(rt, spy, load_zero_copy, "load_zero_copy", path)
    if got is None:
        raise _not_done(L("load_zero_copy returned None.", "load_zero_copy 返回了 None。"),
                        L("return (ctx, model_mem).", "请返回 (ctx, model_mem)。"))
    if not isinstance(got, tuple) or len(got) != 2:
        raise _Fail(L(f"load_zero_copy returned {type(got).__name__}; expected a tuple (ctx, model_mem).",
                      f"load_zero_copy 返回了 {type(got).__name__}；应当是一个元组 (ctx, model_mem)。"),
                    "return ctx, mem")     # en-only (code)
    ctx, mem = got
    destroyed_ctx = False
    try:
        inits = _inits(spy)
        if len(inits) != 1 or inits[0]["model"] != "address":
            got_what = (L(f"{len(inits)} successful rknn_init calls", f"成功调用了 {len(inits)} 次 rknn_init")
                        if len(inits) != 1 else
                        L(f"it got a {inits[0]['model']}",
                          f"它收到的是{_MODEL_ARG_ZH.get(inits[0]['model'], inits[0]['model'])}"))
            raise _Fail(L("rknn_init did not get the virtual address of a mem (", "rknn_init 收到的不是张量内存的"
                          "虚拟地址（") + got_what + L(").", "）。"),
                        L("copy the file into a create_mem2 buffer, then rt.init(mem.contents.virt_addr, "
                          "flag, extend, size=file size).",
                          "把文件复制到一个 create_mem2 缓冲区中，然后调用 rt.init(mem.contents.virt_addr, "
                          "flag, extend, size=文件大小)。"))
        mems = [info for name, info, err in spy.calls if name == "rknn_create_mem2" and err is None]
        if any(name == "rknn_destroy_mem" for name in spy.names()):
            raise _Fail(L("load_zero_copy called rknn_destroy_mem: the model buffer must stay valid until "
                          "rknn_destroy of its context (API reference V2.3.2 p.20).",
                          "load_zero_copy 调用了 rknn_destroy_mem：模型缓冲区必须在它的上下文执行 rknn_destroy "
                          "之前一直有效（API 参考手册 V2.3.2 第 20 页）。"),
                        L("return the mem with the context; teardown destroys it after rknn_destroy.",
                          "把张量内存与上下文一起返回；由 teardown 在 rknn_destroy 之后销毁它。"))
        _check_outputs(rt, ctx, frame, reference, "load_zero_copy")
        details = [L("rknn_init got the mem's virt_addr; the context's outputs equal those of a context "
                     "loaded from the path",
                     "rknn_init 收到的是张量内存的 virt_addr；该上下文的输出与从路径加载的上下文相同")]
        base = own.get("zero_copy")
        if grew is not None and base is not None:
            line = L(f"heap in use after load_zero_copy returned: {grew:+,} bytes; after the check's own "
                     f"zero-copy load: {base:+,} bytes (model file: {size:,} bytes)",
                     f"load_zero_copy 返回后的已用堆内存：{grew:+,} 字节；检查自己的零拷贝加载之后："
                     f"{base:+,} 字节（模型文件：{size:,} 字节）")
            if grew - base > 0.5 * size:
                raise _Fail(line + L(f": about {(grew - base) / size:.1f} copies of the model more than the "
                                     "check's own zero-copy load. Either the runtime copied the buffer (no "
                                     "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY), or your own buffer is still alive.",
                                     f"：比检查自己的零拷贝加载多出约 {(grew - base) / size:.1f} 份模型副本。"
                                     "要么运行时复制了缓冲区（没有使用 RKNN_FLAG_MODEL_BUFFER_ZERO_COPY），"
                                     "要么你自己的缓冲区仍然存活。"),
                            L("pass RKNN_FLAG_MODEL_BUFFER_ZERO_COPY; drop the bytes you read once they are "
                              "in the mem.",
                              "请传入 RKNN_FLAG_MODEL_BUFFER_ZERO_COPY；读到的字节一旦写入张量内存，就丢弃它们。"))
            details.append(line + (L(" (on the simulator: no copy, the weights are read in the mem, "
                                     "assumption A5)",
                                     "（在模拟器上：没有副本，权重直接从张量内存中读取，假设 A5）")
                                   if rt.backend == "sim" else ""))
        total = int(_mem_size(rt, int(ctx)).total_dma_allocated_size)
        details.append(L(f"the context's DMA total: {_fmt(total)} bytes; a context loaded from the path "
                         f"reports {_fmt(weights)} bytes of weights",
                         f"该上下文的 DMA 总量：{_fmt(total)} 字节；从路径加载的上下文报告的权重为 "
                         f"{_fmt(weights)} 字节")
                       + (L(" (on the simulator the weights are read in place, in your mem: assumption A5)",
                            "（在模拟器上，权重就地从你的张量内存中读取：假设 A5）")
                          if rt.backend == "sim" else ""))
        if not mems or not any(m["flags"] & abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT for m in mems):
            raise _Fail(L("the model's mem was not made with rknn_create_mem2(0, size, "
                          "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT), which the exercise asks for.",
                          "存放模型的张量内存不是用练习要求的 rknn_create_mem2(0, size, "
                          "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT) 创建的。"),
                        "rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)")
        extend = inits[0]["extend"]
        if extend is None:
            details.append(L("Note: your rknn_init got no rknn_init_extend. Rockchip's API reference V2.3.2 "
                             "disagrees with itself: p.20 fills one for ZERO_COPY (real_model_size, "
                             "model_buffer_fd, model_buffer_flags), p.18 says to pass NULL. ",
                             "说明：你的 rknn_init 没有收到 rknn_init_extend。Rockchip 的 API 参考手册 V2.3.2 "
                             "对此自相矛盾：第 20 页为 ZERO_COPY 填写了一个（real_model_size、model_buffer_fd、"
                             "model_buffer_flags），第 18 页却说要传 NULL。")
                           + (L("The simulator runs without it (assumption A42). ",
                                "模拟器没有它也能运行（假设 A42）。") if rt.backend == "sim" else
                              L("This runtime ran without it. ", "这个运行时没有它也运行了。"))
                           + L("Fill it, as p.20's sample does.", "请像第 20 页的示例那样填写它。"))
        else:
            if extend["fd"] != int(mem.contents.fd):
                details.append(L(f"Note: model_buffer_fd is {extend['fd']}, the mem's fd is "
                                 f"{int(mem.contents.fd)}. The API reference's sample (p.20) passes the mem's "
                                 "fd; a runtime that needs it cannot find the buffer without it.",
                                 f"说明：model_buffer_fd 是 {extend['fd']}，而张量内存的 fd 是 "
                                 f"{int(mem.contents.fd)}。API 参考手册的示例（第 20 页）传入的是张量内存的 fd；"
                                 "需要它的运行时没有它就找不到缓冲区。"))
            if extend["size"] != size:
                details.append(L(f"Note: real_model_size is {extend['size']:,}, the model file has {size:,} "
                                 "bytes. The API reference's sample (p.20) passes the model's size.",
                                 f"说明：real_model_size 是 {extend['size']:,}，而模型文件有 {size:,} 字节。"
                                 "API 参考手册的示例（第 20 页）传入的是模型的大小。"))
            if extend["flags"] != int(mem.contents.flags):
                details.append(L(f"Note: model_buffer_flags is {extend['flags']}, the mem's flags are "
                                 f"{int(mem.contents.flags)}. The API reference's sample (p.20) passes the mem's "
                                 "flags; no document says what the runtime does with them.",
                                 f"说明：model_buffer_flags 是 {extend['flags']}，而张量内存的 flags 是 "
                                 f"{int(mem.contents.flags)}。API 参考手册的示例（第 20 页）传入的是张量内存的 "
                                 "flags；没有文档说明运行时如何使用它们。"))
        if rt.backend == "sim":
            # the returned mem must be the one the context reads: without it, the run fails
            rt.destroy_mem(0, mem)
            try:
                _run_once(rt, int(ctx), frame)
            except errors.RknnError:
                details.append(L("after rknn_destroy_mem of the mem you returned, the context's next run "
                                 "fails: the context reads its model from that mem",
                                 "对你返回的张量内存调用 rknn_destroy_mem 之后，该上下文的下一次运行失败："
                                 "上下文从这块张量内存中读取模型"))
            else:
                raise _Fail(L("the context still runs after rknn_destroy_mem of the mem you returned: it "
                              "does not read its model from that mem.",
                              "对你返回的张量内存调用 rknn_destroy_mem 之后，该上下文仍能运行：它并不是从这块"
                              "张量内存中读取模型的。"),
                            L("return the mem whose virt_addr you passed to rt.init.",
                              "请返回你传给 rt.init 的 virt_addr 所属的那块张量内存。"))
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
    mem is destroyed (it is the buffer the context reads).  The heap is judged against the
    check's own loads (from a buffer it drops; zero-copy), measured the same way on the
    runtime at hand, not against a fixed multiple of the file size.  A zero-copy init with
    no rknn_init_extend, or with model_buffer_flags other than the mem's, passes with a note
    (the API reference disagrees with itself on the extend: p.18 against p.20)."""
    def body() -> CheckResult:
        _require_function(load_from_buffer, L("pass the functions: check_load_from_buffer(load_from_buffer, "
                                              "load_zero_copy)",
                                              "请传入这两个函数：check_load_from_buffer(load_from_buffer, "
                                              "load_zero_copy)"))
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
            own = _reference_loads(rt, path, size)
            details = _judge_plain(rt, load_from_buffer, path, size, reference, frame, own)
            if not callable(load_zero_copy):
                raise _not_done(L("load_from_buffer is right; load_zero_copy is not done yet.",
                                  "load_from_buffer 是对的；load_zero_copy 尚未完成。"),
                                L("pass both functions: check_load_from_buffer(load_from_buffer, load_zero_copy)",
                                  "请传入两个函数：check_load_from_buffer(load_from_buffer, load_zero_copy)"))
            details += _judge_zero_copy(rt, load_zero_copy, path, size, reference, frame, weights, own)
        finally:
            rt.close()
        note = any(_is_note(d) for d in details)
        return CheckResult(EX_BUFFER, "passed", L("Both loads are right: each keeps no more than the check's own "
                                                  "load of its kind, and the zero-copy buffer outlives the function",
                                                  "两种加载都正确：每种保留的内存都不超过检查自己的同类加载，"
                                                  "而且零拷贝缓冲区比函数活得更久")
                           + (L(" (see the note).", "（请看说明）。") if note else L(".", "。")), details)

    return _LAB.run(EX_BUFFER, body)


# =========================================================================== exercise 4
def one_run(result: Any, name: str) -> Any:
    """A Result holding the run of the variant ``name`` only: what diagnose() is given."""
    from ..experiment.result import Result
    return Result(dict(result.meta), [result[name]])


def check_diagnose(diagnose: Callable[[Any], str]) -> CheckResult:
    """Exercise 4: ``diagnose(result) -> one of KINDS``, from a Result of one variant run
    by ``rknnlab.run`` (its calls, samples and summary).

    The check runs the five letters (A is mystery_A, ...) and one variant more, whose kind
    it draws anew for each check, all in one ``rknnlab.run``; then it hands ``diagnose``
    each run alone, in a random order.  It stops at the first wrong answer; it names the
    letter when A-E is wrong (the student can run those anyway), keeps the sixth variant
    anonymous, and never says which word would be right."""
    def body() -> CheckResult:
        _require_function(diagnose, "check_diagnose(diagnose)")
        import rknnlab
        rng = np.random.default_rng(_fresh_seed())
        x_kind = str(rng.choice(_cases.KINDS))
        saved = os.environ.get(_cases.CASE_X_ENV)
        os.environ[_cases.CASE_X_ENV] = x_kind
        print(L(f"Running {len(_cases.leak_cases())} programs of {DIAGNOSE_ITERATIONS} frames each, about 15 s "
                "on the simulator ...",
                f"正在运行 {len(_cases.leak_cases())} 个程序，每个 {DIAGNOSE_ITERATIONS} 帧，在模拟器上约需 15 s……"),
              flush=True)
        try:
            # progress: the library's default (a bar in JupyterLab, nothing in the book)
            res = rknnlab.run(_cases.leak_cases(), model=LAB2_MODEL, iterations=DIAGNOSE_ITERATIONS,
                              warmup=5, soc=_current_soc(), sample_calls=True)
        finally:
            if saved is None:
                os.environ.pop(_cases.CASE_X_ENV, None)
            else:
                os.environ[_cases.CASE_X_ENV] = saved
        if res.errors:
            raise _Fail(L("the check's own runs failed: ", "检查自己的运行失败了：") + "; ".join(res.errors.values()),
                        L("please report this to the course's authors.", "请把这个问题报告给课程作者。"))
        cases = _cases.leak_cases()
        details = []
        for n, k in enumerate(rng.permutation(len(cases)), 1):
            case = cases[int(k)]
            letter = next((key for key, f in MYSTERY.items() if f is case), None)
            what = L(f"diagnose(<the run of {case.__name__}>)", f"diagnose(<{case.__name__} 的运行>)")
            try:
                answer = diagnose(one_run(res, case.__name__))
            except Exception as exc:
                raise _student_error(exc, what, L("read result.calls (which calls, how many per iteration) "
                                                  "and result.summary or result.samples (what grows).",
                                                  "读取 result.calls（有哪些调用，每次迭代各多少次），以及 "
                                                  "result.summary 或 result.samples（什么在增长）。"))
            if answer is None:
                one_of = L("return one of: ", "请返回以下之一：") + ", ".join(KINDS) + L(".", "。")
                if n == 1:
                    raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"), one_of)
                raise _Fail(L(f"{what} returned None.", f"{what} 返回了 None。"), one_of)
            word = str(answer).strip().lower()
            if word not in KINDS:
                raise _Fail(L(f"{what} returned {answer!r}, not one of: {', '.join(KINDS)}.",
                              f"{what} 返回了 {answer!r}，不在以下之中：{', '.join(KINDS)}。"),
                            L("copy the word from checks.KINDS.", "请从 checks.KINDS 中复制这个词。"))
            if word != _cases.leak_truth(case, x_kind):
                where = (L(f"Your answer for {letter} (checks.MYSTERY[{letter!r}]) is wrong: you said {word!r}. "
                           "Look at that run's calls and its memory again.",
                           f"你对 {letter}（checks.MYSTERY[{letter!r}]）的回答是错的：你回答的是 {word!r}。"
                           "请重新看一看那次运行的调用记录和内存。")
                         if letter else
                         L("Your answer for the sixth variant, the one the check keeps to itself "
                           f"(its kind is drawn anew for each check), is wrong: you said {word!r}.",
                           "你对第六个程序（检查不公开的那个，它的类型在每次检查时重新抽取）的回答是错的："
                           f"你回答的是 {word!r}。"))
                return CheckResult(EX_DIAGNOSE, "failed",
                                   L(f"{where} {n - 1} answer(s) were right before it; "
                                     "the check stops at the first wrong one.",
                                     f"{where}在它之前有 {n - 1} 个回答正确；检查在第一个错误的回答处停止。"),
                                   details,
                                   L("Judge each run on two things. What does the program call per "
                                     "iteration (rknn_init, rknn_create_mem against rknn_destroy_mem, "
                                     "rknn_outputs_get against rknn_outputs_release)? And what grows: the "
                                     "malloc heap, the DMA total, or nothing? Memory alone cannot tell a "
                                     "forgotten release from a Python list; calls alone cannot see the list.",
                                     "从两方面判断每次运行。程序每次迭代调用了什么（rknn_init；rknn_create_mem "
                                     "与 rknn_destroy_mem 相比；rknn_outputs_get 与 rknn_outputs_release 相比）？"
                                     "什么在增长：malloc 堆、DMA 总量，还是什么都没有？只看内存，分不清忘记的 "
                                     "release 和 Python 列表；只看调用记录，看不到那个列表。"))
            details.append(L(f"{letter or 'the sixth variant'}: {word} — right",
                             f"{letter or '第六个程序'}：{word}，正确"))
        return CheckResult(EX_DIAGNOSE, "passed", L(f"All {len(cases)} right: the calls per iteration say what the "
                           "program does, and the growing column says what it keeps.",
                           f"全部 {len(cases)} 个都正确：每次迭代的调用说明程序做了什么，增长的那一列说明它"
                           "占住了什么。"), details)

    return _LAB.run(EX_DIAGNOSE, body)


# =========================================================================== exercise 5 ★
def _as_trace(trace: Dict[str, np.ndarray]) -> Any:
    import pandas as pd
    return pd.DataFrame({"iteration": trace["iteration"].astype(int), "rss_bytes": trace["rss_bytes"]})


def practice_traces() -> List[Any]:
    """Four RSS traces to try a verdict on (one of each kind the check uses, shuffled, from
    a fixed seed; the check draws its own)."""
    return [_as_trace(t) for _kind, t in _cases.trace_cases(seed=20_502, per_kind=1)]


_VERDICTS = ("grows", "flat", "cannot tell yet")  # en-only


def check_verdict(verdict: Callable[[Any], str]) -> CheckResult:
    """Exercise 5 ★: ``verdict(trace) -> "grows" | "flat" | "cannot tell yet"`` for an RSS
    trace (a DataFrame with ``iteration`` and ``rss_bytes``).

    The check draws 12 traces from a fresh seed, three of each kind: flat (a start that
    settles, page-sized jitter, short spikes), a steady leak of a few KiB per iteration, a
    one-off step of several MiB then level, and a window too short for its noise.  "flat"
    means growth above RESOLUTION bytes per iteration is ruled out.  A failure names each
    trap by what the trace does, never by a number the student could look up."""
    def body() -> CheckResult:
        _require_function(verdict, "check_verdict(verdict)")
        cases = _cases.trace_cases(seed=_fresh_seed())
        traps: Dict[Tuple[str, str], List[int]] = {}
        details: List[str] = []
        for n, (kind, trace) in enumerate(cases, 1):
            frame = _as_trace(trace)
            span = int(np.ptp(trace["iteration"])) + 1
            what = L(f"verdict(<trace {n}: {len(frame)} samples over {span:,} iterations>)",
                     f"verdict(<记录 {n}：{len(frame)} 个样本，跨越 {span:,} 次迭代>)")
            try:
                answer = verdict(frame)
            except Exception as exc:
                raise _student_error(exc, what, L("work on trace['iteration'] and trace['rss_bytes'].",
                                                  "请使用 trace['iteration'] 和 trace['rss_bytes']。"))
            if answer is None:
                three = L('return "grows", "flat" or "cannot tell yet".', '请返回 "grows"、"flat" 或 "cannot tell yet"。')
                if n == 1:
                    raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"), three)
                raise _Fail(L(f"{what} returned None.", f"{what} 返回了 None。"), three)
            word = str(answer).strip().lower()
            if word == "cannot tell":
                word = "cannot tell yet"  # en-only
            if word not in _VERDICTS:
                raise _Fail(L(f"{what} returned {answer!r}, not one of: grows, flat, cannot tell yet.",
                              f"{what} 返回了 {answer!r}，不是 grows、flat、cannot tell yet 之一。"),
                            L('return one of the three strings exactly: "grows", "flat", "cannot tell yet".',
                              '请原样返回这三个字符串之一："grows"、"flat"、"cannot tell yet"。'))
            if word != _cases.TRACE_TRUTH[kind]:
                traps.setdefault((kind, word), []).append(n)
            else:
                details.append(L(f"trace {n}: {word} — right", f"记录 {n}：{word}，正确"))
        if not traps:
            return CheckResult(EX_VERDICT, "passed", L(f"All {len(cases)} verdicts right, on traces drawn for this "
                                                       "check.",
                                                       f"全部 {len(cases)} 个判定都正确，所用的记录是为这次检查"
                                                       "新抽取的。"), details)
        # the traps are named by what the traces do: they are drawn anew, so this gives nothing away
        wrong = sum(len(v) for v in traps.values())
        lines = [L(f"{len(ns)} trace{'s' if len(ns) > 1 else ''} {_cases.trace_why(kind)}: you said "
                   f"{word!r} (trace {', '.join(map(str, ns))})",
                   f"{len(ns)} 条记录{_cases.trace_why(kind)}：你回答的是 {word!r}（记录 {'、'.join(map(str, ns))}）")
                 for (kind, word), ns in traps.items()]
        return CheckResult(EX_VERDICT, "failed", L(f"{wrong} of your {len(cases)} verdicts are wrong. The "
                                                   "trap(s) your function fell into:",
                                                   f"你的 {len(cases)} 个判定中有 {wrong} 个是错的。你的函数"
                                                   "掉进了这些陷阱："), lines,
                           L("Look at the lower envelope of the trace (the smallest sample of each range of "
                             "iterations), not single samples: spikes and settling are not growth. A leak raises "
                             "the envelope at every step; a one-off step raises it "
                             "once. Say \"flat\" only when your uncertainty rules out growth above "
                             f"{RESOLUTION:,} bytes per iteration, and \"grows\" only when it rules out zero.",
                             "请看记录的下包络线（每一段迭代中最小的样本），而不是单个样本：尖峰和启动稳定期都"
                             "不是增长。内存泄漏在每一段都会抬高下包络线；一次性台阶只抬高一次。只有当你的不确定度"
                             f"排除了每次迭代超过 {RESOLUTION:,} 字节的增长时，才判定为“flat”；只有当它排除了零增长"
                             "时，才判定为“grows”。"))

    return _LAB.run(EX_VERDICT, body)


_LAB = Lab("Lab 2", [EX_DUP, EX_TEARDOWN, EX_BUFFER, EX_DIAGNOSE, EX_VERDICT],
           zh=("实验 2", ["练习 1 — 预测 rknn_dup_context 节省多少内存", "练习 2 — 安排资源释放的顺序",
                          "练习 3 — 从缓冲区加载模型，并正确处理归属", "练习 4 — 找出生命周期中的内存泄漏",
                          "练习 5 ★ — 会不会增长？"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_dup_prediction": 3, "check_teardown": 3, "check_load_from_buffer": 4,
          "check_diagnose": 4, "check_verdict": 4}
_LAB.seal(globals(), {"check_dup_prediction": EX_DUP, "check_teardown": EX_TEARDOWN,
                      "check_load_from_buffer": EX_BUFFER, "check_diagnose": EX_DIAGNOSE,
                      "check_verdict": EX_VERDICT})
