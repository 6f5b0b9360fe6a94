"""Lab 5 (allocation strategy): one check per exercise.

================================  ==============================================================
:func:`check_outside_setup`       1. ``setup_outside(rt, model_path) -> ctx``: everything outside
:func:`check_cache_choice`        2. ``choose_cacheable(pattern) -> flag``: from a measurement
:func:`check_sram_hits`           3. ``sram_hits(rows, total_internal_size, free_sram) -> [bytes]``
:func:`check_shared_internal`     4. ``share_internal(rt, model_paths) -> [ctx, ...]``: one buffer
:func:`check_shape_change`        5. ★ ``infer_shapes(rt, ctx, frames) -> [outputs]``: shape changes
================================  ==============================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab05 as checks``.

Each check measures what it judges itself: it runs the student's contexts with its own io
mems and compares their outputs with contexts it makes the plain way, reads the runtime's
DMA total of every context, times made-up CPU access patterns, draws memory plans no model
has, and counts the allocations of a run.  The truth lives in private code; the messages
give measured numbers and a hint, never the answer.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi
from ..rknn.errors import RknnError
from . import _lab05_cases as _cases
from ._core import (CheckResult, Lab, _Fail, _fresh_seed, _model_file, _not_done, _open_runtime,
                    _require_function, _soc_of, _student_error, _whole_number)

__all__ = ["CheckResult", "check_outside_setup", "check_cache_choice", "check_shared_internal",
           "check_sram_hits", "check_shape_change", "summary", "results", "OUTSIDE_MODELS",
           "SHARED_MODELS", "NOTEBOOK_SHARED", "SRAM_MODELS", "DYNAMIC_MODEL", "practice_pattern", "plan_of", "try_setup"]

#: exercise 1: one model whose weights are larger than its internal buffer, one the other way
OUTSIDE_MODELS = ("mobilenet_v2", "yolov5n")
#: exercise 2: the check judges a pattern only when one choice costs this many times the other
CACHE_MARGIN = 2.0
#: exercise 3: the shipped plans the check judges (RK3588: the SoC with NPU SRAM)
SRAM_MODELS = ("mobilenet_v2", "mobilenet_v2_160", "mobilenet_v2_320", "resnet50", "yolov5n", "yolov5s")
#: exercise 4: the three models whose sizes the notebook prints (its Predict)
NOTEBOOK_SHARED = ("mobilenet_v2_160", "mobilenet_v2", "yolov5s_320")
#: exercise 4: the check draws three of these per call (internal 0.8 to 4.3 MiB), some the notebook
#: never prints
SHARED_MODELS = ("mobilenet_v2_160", "mobilenet_v2", "mobilenet_v2_320", "yolov5s_320", "yolov5s_480",
                 "resnet50", "yolov5n")
#: exercise 5: compiled for several input shapes
DYNAMIC_MODEL = "mobilenet_v2_dynamic"

#: the exercises' titles: the results' keys (their Chinese is registered with Lab(..., zh=) below)
EX_OUTSIDE = "Exercise 1 — find the bug in a MEM_ALLOC_OUTSIDE setup"  # en-only
EX_CACHE = "Exercise 2 — choose cacheable or non-cacheable from a measurement"  # en-only
EX_SRAM = "Exercise 3 — compute what fits in SRAM"  # en-only
EX_SHARED = "Exercise 4 — share one internal buffer between three models"  # en-only
EX_SHAPES = "Exercise 5 ★ — handle a shape change"  # en-only


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


def _list(items: Sequence[str]) -> str:
    """Items joined as a list in the language the check speaks."""
    return L(", ", "、").join(items)


def _frames_for(shape: Sequence[int], n: int, rng: np.random.Generator) -> List[np.ndarray]:
    return [rng.integers(0, 256, size=tuple(shape), dtype=np.uint8) for _ in range(n)]


def _reference(rt: Any, path: str, frames: Sequence[np.ndarray]) -> Tuple[List[List[bytes]], int]:
    """Outputs of a context made the plain way (flag 0), through the check's own io mems, and
    that context's DMA total right after rknn_init."""
    ctx = rt.init(path)
    try:
        total = _cases.dma_total(rt, ctx)
        io = _cases.CheckIo(rt, ctx)
        try:
            return [io.run(f) for f in frames], total
        finally:
            io.close()
    finally:
        rt.destroy(ctx)


def _refusal(exc: RknnError) -> str:
    """The runtime's answer without the error class's generic advice."""
    return L(f"{exc.function} returned {exc.code} ({exc.name}): {exc.detail}",
             f"{exc.function} 返回了 {exc.code}（{exc.name}）：{exc.detail}")


def _refused(what: str, exc: RknnError) -> str:
    """"<what>: the runtime refused: <its answer>"."""
    return L(f"{what}: the runtime refused: {_refusal(exc)}", f"{what}：运行时拒绝了这次调用：{_refusal(exc)}")


def _student_failure(exc: BaseException, what: str, name: str, hint: str) -> _Fail:
    """What an exception from the student's function ``name`` means: not started yet (the stub's
    NotImplementedError), a runtime refusal shown as the runtime's answer only (no generic advice
    of the error class: the exercise's hint follows), or any other error."""
    if isinstance(exc, NotImplementedError):
        return _student_error(exc, what, _todo(name))
    if isinstance(exc, RknnError):
        return _Fail(_refused(what, exc), hint)
    return _student_error(exc, what, hint)


def _todo(name: str) -> str:
    """The hint of an exercise not started: no recipe (the folded hints hold it)."""
    return L(f"write {name}, then run this check again. Open a folded hint if you are stuck.",
             f"先编写 {name}，再运行一次这个检查。如果卡住了，就打开一条折叠的提示。")


def _require_models(soc: str, names: Sequence[str]) -> None:
    """A failure that says where to run the exercise when a model it needs is not built for ``soc``."""
    from .. import models
    missing = [m for m in names if soc not in models.model_socs(m)]
    if missing:
        names = _list(missing)
        raise _Fail(L(f"{names} {'is' if len(missing) == 1 else 'are'} built for RK3588 only, not for "
                      f"the {soc}.", f"{names} 只为 RK3588 构建，没有 {soc} 的版本。"),
                    L("run this exercise on the simulator: RKNNLAB_BACKEND=sim, without "
                      "RKNNLAB_SIM_SOC (it then plays an RK3588).",
                      "请在模拟器上运行这个练习：设置 RKNNLAB_BACKEND=sim，不设置 RKNNLAB_SIM_SOC"
                      "（模拟器这时扮演一块 RK3588）。"))


def _run_error(exc: RknnError, what: str, hint: str) -> _Fail:
    return _Fail(_refused(what, exc), hint)


def _as_context(got: Any, ledger: "_cases.Ledger", what: str) -> int:
    ctx = _whole_number(got)
    if ctx is None or ctx not in ledger.contexts:
        raise _Fail(L(f"{what} returned {got!r}, not a context it made.",
                      f"{what} 返回了 {got!r}，这不是它创建的上下文。"),
                    L("return the rknn_context your function made with rt.init (and keep it alive).",
                      "请返回你的函数用 rt.init 创建的 rknn_context（并让它保持存活）。"))
    return ctx


# =========================================================================== exercise 3: SRAM
def plan_of(model: str, soc: str = "rk3588") -> Tuple[List[Dict[str, Any]], int]:
    """(the rows of a model's memory plan, its total_internal_size) from its compiler report:
    one row per (layer, tensor), with "tensor", "user", "start", "end", "size" and
    "producer_layer_id" (0 for the model's input)."""
    from .. import models
    report = models.load_report(model, soc)
    keys = ("layer_id", "user", "tensor", "orig_shape", "start", "end", "size", "producer_layer_id")
    return [{k: row[k] for k in keys} for row in report.data["feature_tensors"]], report.total_internal_size


def _measured_hits(rt: Any, model: str, hold_pages: int) -> Tuple[int, List[int]]:
    """(free SRAM before the context, the SramHit column of the runtime's own table) for
    ``model`` initialised with RKNN_FLAG_ENABLE_SRAM while a TRY_ALLOC_SRAM mem of
    ``hold_pages`` pages holds part of the SRAM (the simulator: its bitmap and its
    RKNN_LOG_LEVEL=3 table)."""
    from ..allocation import parse_sram_bitmap, sram_hits as parse_table
    holder = rt.init(_model_file("digits_cnn", "rk3588"))
    held = rt.create_mem2(holder, hold_pages * _cases.SRAM_PAGE, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM) \
        if hold_pages else None
    try:
        free = parse_sram_bitmap(rt.sram_bitmap())["free_bytes"]
        ctx = rt.init(_model_file(model, "rk3588"), abi.RKNN_FLAG_ENABLE_SRAM)
        try:
            text = rt.sram_log(ctx)
            rows, _ = plan_of(model)
            if not text:
                return free, [0] * len(rows)
            return free, [int(h) for h in parse_table(text)["sram_hit_bytes"].fillna(0)]
        finally:
            rt.destroy(ctx)
    finally:
        if held is not None:
            rt.destroy_mem(holder, held)
        rt.destroy(holder)


def _sram_cases(rng: np.random.Generator, rt: Any = None) -> List[Tuple[str, List[Dict[str, Any]], int, int, List[int]]]:
    """(name, rows, total_internal_size, free SRAM, truth) for the shipped plans (each with all
    of the SRAM free and with part of it held) and eight made-up plans.  The shipped plans'
    truth is the runtime's own SRAM table where it prints one (the simulator of an RK3588),
    else the rule; the made-up plans' truth is the rule."""
    cases = []
    measured = rt is not None and hasattr(rt, "sram_log") and _soc_of(rt) == "rk3588"
    for model in SRAM_MODELS:
        rows, total = plan_of(model)
        for hold in (0, int(rng.integers(20, 220))):
            if measured:
                free, truth = _measured_hits(rt, model, hold)
            else:
                free = _cases.RK3588_SRAM - hold * _cases.SRAM_PAGE
                truth = _cases.sram_hits(rows, total, free)
            cases.append((L(f"{model} (free SRAM {free:,} B)", f"{model}（空闲 SRAM {free:,} B）"),
                          rows, total, free, truth))
    for k in range(8):
        rows, total, free = _cases.made_up_plan(rng, fits=k < 2)
        cases.append((L(f"made-up plan {k + 1} ({len(rows)} rows, free SRAM {free:,} B)",
                        f"编造的内存规划 {k + 1}（{len(rows)} 行，空闲 SRAM {free:,} B）"), rows, total, free,
                      _cases.sram_hits(rows, total, free)))
    order = rng.permutation(len(cases))
    return [cases[int(i)] for i in order]


def check_sram_hits(sram_hits: Callable[[List[Dict[str, Any]], int, int], Sequence[int]]) -> CheckResult:
    """Exercise 3: ``sram_hits(rows, total_internal_size, free_sram) -> [bytes per row]``: the
    SramHit the runtime's RKNN_LOG_LEVEL=3 table gives every row of a model's memory plan when
    the context is made with RKNN_FLAG_ENABLE_SRAM and ``free_sram`` bytes of the NPU's SRAM
    are free.

    Cases: the shipped RK3588 plans of SRAM_MODELS, each with all 978,944 B free and with
    part of the SRAM held by a TRY_ALLOC_SRAM mem (on the simulator their truth is the
    runtime's own SRAM table; elsewhere the rule), and eight made-up plans, new at every call
    (reused offsets, sizes that are not multiples of 4 KiB, free SRAM larger or smaller than
    the plan).  Every row must be exact.  A failure shows how many rows are wrong and how
    the wrong total compares, never the expected values."""
    def body() -> CheckResult:
        _require_function(sram_hits, "check_sram_hits(sram_hits)")
        rng = np.random.default_rng(_fresh_seed())
        wrong: List[str] = []
        rt = _open_runtime()
        try:
            cases = _sram_cases(rng, rt)
        finally:
            rt.close()
        for n, (name, rows, total, free, truth) in enumerate(cases):
            what = f"sram_hits(<{name}>, {total}, {free})"
            try:
                got = sram_hits([dict(r) for r in rows], total, free)
            except Exception as exc:
                raise _student_failure(exc, what, "sram_hits", L(
                    "compare each row's [start, end) with the part of the internal buffer that lives in SRAM.",
                    "把每一行的 [start, end) 与内部内存中位于 SRAM 的那部分进行比较。"))
            if got is None:
                raise (_not_done if n == 0 else _Fail)(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                                       L("return a list with one number of bytes per row.",
                                                         "请返回一个列表，每一行对应一个字节数。"))
            try:
                values = [_whole_number(v) for v in got]
            except TypeError:
                raise _Fail(L(f"{what} returned {got!r}, not a list.", f"{what} 返回了 {got!r}，不是列表。"),
                            L("return a list with one int per row.", "请返回一个列表，每一行对应一个 int。"))
            if len(values) != len(rows) or any(v is None for v in values):
                raise _Fail(L(f"{what} returned {len(values)} values for {len(rows)} rows (or one is not a whole "
                              "number).",
                              f"{what} 为 {len(rows)} 行返回了 {len(values)} 个值（或者其中有一个不是整数）。"),
                            L("return one int per row, in the order of the rows (0 for no hit).",
                              "请按行的顺序，每一行返回一个 int（没有命中则为 0）。"))
            bad = sum(v != t for v, t in zip(values, truth))
            if bad:
                side = L("more", "高") if sum(values) > sum(truth) else L("less", "低")
                wrong.append(L(f"{name}: {bad} of {len(rows)} rows wrong; your total is {side} than the expected "
                               "total",
                               f"{name}：{len(rows)} 行中有 {bad} 行错误；你的总数{side}于期望的总数"))
        if wrong:
            shown = L(" (first 6 shown)", "（只列出前 6 个）") if len(wrong) > 6 else ""
            raise _Fail(L(f"{len(wrong)} of {len(cases)} plans have wrong rows{shown}:",
                          f"{len(cases)} 个内存规划中有 {len(wrong)} 个含有错误的行{shown}："),
                        L("ENABLE_SRAM places the first part of the internal buffer in SRAM: as much as is free "
                          "(whole 4 KiB pages), never more than the buffer. A row's hit is the number of bytes of "
                          "[start, end) in that part; a tensor can be partly in it. The model's input and output "
                          "rows get none. Use the free SRAM you are given, not the SoC's total.",
                          "ENABLE_SRAM 把内部内存的开头部分放在 SRAM 中：空闲多少就放多少（以完整的 4 KiB "
                          "页为单位），但绝不超过内部内存本身。一行的命中量是 [start, end) 中位于这部分的字节数；"
                          "一个张量可以部分位于其中。模型的输入行和输出行没有命中。请使用给你的空闲 SRAM，"
                          "而不是 SoC 的总量。"), wrong[:6])
        n_rows = sum(len(c[1]) for c in cases)
        return CheckResult(EX_SRAM, "passed", L(
            f"Every row of {len(cases)} plans right, shipped and made-up: "
            "you placed the SRAM part by the plan's offsets and the free pages.",
            f"{len(cases)} 个内存规划（随课程提供的和编造的）的每一行都正确：你按内存规划的偏移和空闲页"
            "确定了 SRAM 部分。"),
            [L(f"{len(cases)} plans, {n_rows} rows", f"{len(cases)} 个内存规划，共 {n_rows} 行")])

    return _LAB.run(EX_SRAM, body)


# =========================================================================== exercise 1: find the bug
def _outside_hint() -> str:
    return L("RKNN_FLAG_MEM_ALLOC_OUTSIDE means the runtime allocates none of the model's memory: "
             "query RKNN_QUERY_MEM_SIZE, then give the context every part it needs before the first "
             "rknn_run, each mem at least as large as its field says.",
             "RKNN_FLAG_MEM_ALLOC_OUTSIDE 表示运行时不为模型分配任何内存：先查询 RKNN_QUERY_MEM_SIZE，"
             "然后在第一次 rknn_run 之前，把上下文需要的每一部分都交给它，每个张量内存都至少要有它的字段"
             "所给出的大小。")


def try_setup(rt: Any, setup: Callable[[Any, str], int], model: str = "mobilenet_v2") -> str:
    """Run ``setup(rt, model_path)``, bind zero-copy io mems to the context it returns, run one
    seeded frame and compare the outputs with a flag-0 context's: one line saying what
    happened.  A refusal shows only the call, its return code and the code's name (the
    student reasons from the rule, not from the runtime's sentence).  Everything made is
    destroyed afterwards."""
    path = _model_file(model, _soc_of(rt))
    ledger = _cases.Ledger(rt)
    try:
        ctx = setup(ledger, path)
        if ctx not in ledger.contexts:
            return L(f"{model}: setup returned {ctx!r}, not a context it made",
                     f"{model}：setup 返回了 {ctx!r}，这不是它创建的上下文")
        io = _cases.CheckIo(rt, ctx)
        frame = _frames_for(io.frame_shape, 1, np.random.default_rng(0))
        try:
            got = io.run(frame[0])
        finally:
            io.close()
        ref, _ = _reference(rt, path, frame)
        same = [got] == ref
        return L(f"{model}: rknn_run returned 0 RKNN_SUCC; outputs equal to a flag-0 context's: "
                 f"{'yes' if same else 'NO'}",
                 f"{model}：rknn_run 返回了 0 RKNN_SUCC；输出与标志为 0 的上下文相同："
                 f"{'是' if same else '否'}")
    except RknnError as exc:
        return L(f"{model}: {exc.function} returned {exc.code} {exc.name}",
                 f"{model}：{exc.function} 返回了 {exc.code} {exc.name}")
    finally:
        ledger.cleanup()


#: exercise 1: a weight or internal mem may hold this much more than its field of RKNN_QUERY_MEM_SIZE
#: (one page: a size rounded up to 4 KiB, or to 128 B as Rockchip's dynamic-shape demo does)
_PART_SLACK = 4096


def _require_sized_parts(model: str, ledger: "_cases.Ledger", ctx: int, size: abi.rknn_mem_size,
                         details: List[str]) -> None:
    """A weight or internal mem far larger than its field (one fixed size for every model)
    runs right and moves everything outside, yet wastes the memory the flag is for."""
    fields = (("weight", "权重内存", "total_weight_size", int(size.total_weight_size)),
              ("internal", "内部内存", "total_internal_size", int(size.total_internal_size)))
    for part, part_zh, field, need in fields:
        held = ledger.parts.get((ctx, part))
        if held is not None and held > need + _PART_SLACK:
            raise _Fail(L(f"{model}: your {part} mem holds {_kib(held)}; the context's {field} is "
                          f"{_kib(need)}, so {_kib(held - need)} of it is never used.",
                          f"{model}：你的{part_zh}有 {_kib(held)}；这个上下文的 {field} 是 {_kib(need)}，"
                          f"所以其中 {_kib(held - need)} 从未被使用。"),
                        L(f"Size each mem from its own field of RKNN_QUERY_MEM_SIZE, queried for this context: "
                          f"the {part} mem from {field} (up to one 4 KiB page more is fine).",
                          f"按 RKNN_QUERY_MEM_SIZE 中各自的字段（针对这个上下文查询）确定每个张量内存的大小："
                          f"{part_zh}按 {field} 确定（最多多出一个 4 KiB 页没关系）。"), details)


def check_outside_setup(setup_outside: Callable[[Any, str], int]) -> CheckResult:
    """Exercise 1: ``setup_outside(rt, model_path) -> ctx``: a context made with
    RKNN_FLAG_MEM_ALLOC_OUTSIDE and given every memory it needs before its first run.

    For each model of OUTSIDE_MODELS (one whose weights are larger than its internal
    buffer, one the other way), the check calls your function on a runtime that records
    the mems you make, then:

    - reads the context's DMA total (RKNN_QUERY_MEM_SIZE) less the bytes of your own mems
      made with it, against a context made with flag 0: with everything outside, the runtime
      must hold at least weights + internal less (90% of it: a board's extras largely
      cancel in a comparison of the same model);
    - binds its own io mems, runs 3 seeded frames, and compares every output byte with the
      flag-0 context's outputs for the same frames;
    - compares the bytes your weight and internal mems offer (size - offset) with
      total_weight_size and total_internal_size: at most one 4 KiB page more each.

    It destroys your mems and your context afterwards."""
    def body() -> CheckResult:
        _require_function(setup_outside, "check_outside_setup(setup_outside)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        rng = np.random.default_rng(_fresh_seed())
        details: List[str] = []
        try:
            _require_models(soc, OUTSIDE_MODELS)
            for n, model in enumerate(OUTSIDE_MODELS):
                path = _model_file(model, soc)
                ledger = _cases.Ledger(rt)
                what = f"setup_outside(rt, <{model}>)"
                try:
                    try:
                        got = setup_outside(ledger, path)
                    except Exception as exc:
                        raise _student_failure(exc, what, "setup_outside", L(
                            "read the runtime's message: it names the call and the size it expected. ",
                            "读一下运行时的消息：它指出了是哪个调用，以及它期望的大小。") + _outside_hint())
                    if got is None:
                        raise (_not_done if n == 0 else _Fail)(L(f"{what} returned None.",
                                                                 f"{what} 返回了 None。"),
                                                               L("return the context you made.",
                                                                 "请返回你创建的上下文。"))
                    ctx = _as_context(got, ledger, what)
                    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
                    need = int(size.total_weight_size) + int(size.total_internal_size)
                    own = ledger.runtime_bytes(ctx)
                    io = _cases.CheckIo(rt, ctx)
                    frames = _frames_for(io.frame_shape, 3, rng)
                    try:
                        try:
                            got_out = [io.run(f) for f in frames]
                        except RknnError as exc:
                            # the code and its name only, as the notebook shows them: the runtime's
                            # sentence would name the missing call (the student reasons from the rule)
                            raise _Fail(L(f"{model}: rknn_run on your context returned {exc.code} {exc.name}.",
                                          f"{model}：rknn_run 在你的上下文上返回了 {exc.code} {exc.name}。"),
                                        _outside_hint() + L(" Keep every mem alive until the context is destroyed.",
                                                            "让每个张量内存都一直存活到上下文销毁。"))
                    finally:
                        io.close()
                    ref_out, ref_total = _reference(rt, path, frames)
                    saved = ref_total - own
                    if saved < 0.9 * need:
                        raise _Fail(L(f"{model}: the runtime still allocates memory of its own for your context: "
                                      f"its DMA total less your mems is {_kib(own)}, a flag-0 context's is "
                                      f"{_kib(ref_total)}, so only {_kib(saved)} moved outside. Weights + internal "
                                      f"are {_kib(need)}.",
                                      f"{model}：运行时仍在为你的上下文分配它自己的内存：它的 DMA 总量减去你的"
                                      f"张量内存后是 {_kib(own)}，标志为 0 的上下文是 {_kib(ref_total)}，所以只有 "
                                      f"{_kib(saved)} 移到了外部。权重内存 + 内部内存共 {_kib(need)}。"),
                                    L("Make the context with RKNN_FLAG_MEM_ALLOC_OUTSIDE (weights, internal and io "
                                      "all outside): RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE moves the internal buffer "
                                      "only.",
                                      "用 RKNN_FLAG_MEM_ALLOC_OUTSIDE 创建上下文（权重内存、内部内存和输入/输出内存"
                                      "都由外部提供）：RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE 只把内部内存移到外部。"),
                                    details)
                    wrong = sum(a != b for fa, fb in zip(got_out, ref_out) for a, b in zip(fa, fb))
                    n_outputs = len(frames) * len(ref_out[0])
                    if wrong:
                        raise _Fail(L(f"{model}: {wrong} of {n_outputs} outputs differ from a "
                                      "context made with flag 0, for the same frames.",
                                      f"{model}：对同样的帧，{n_outputs} 个输出中有 {wrong} 个与标志为 0 的"
                                      "上下文不同。"),
                                    L("Every part must stay alive and unchanged while the context runs: do not "
                                      "destroy, reuse or overwrite a mem you gave it, and give the weights and the "
                                      "internal memory bytes of their own (the runtime writes the internal memory "
                                      "at every run).",
                                      "上下文运行期间，每一部分都必须保持存活且不被改动：不要销毁、复用或覆盖你交给"
                                      "它的张量内存，并让权重内存和内部内存各自拥有自己的字节（运行时每次运行都会"
                                      "写入内部内存）。"), details)
                    _require_sized_parts(model, ledger, ctx, size, details)
                    details.append(L(f"{model}: runs, outputs equal to a flag-0 context's; its DMA total less your "
                                     f"mems is {_kib(saved)} below a flag-0 context's (weights + internal: "
                                     f"{_kib(need)}; a flag-0 context also holds its io)",
                                     f"{model}：能运行，输出与标志为 0 的上下文相同；它的 DMA 总量减去你的张量内存"
                                     f"后，比标志为 0 的上下文少 {_kib(saved)}（权重内存 + 内部内存：{_kib(need)}；"
                                     "标志为 0 的上下文还持有它的输入/输出内存）"))
                finally:
                    ledger.cleanup()
        finally:
            rt.close()
        return CheckResult(EX_OUTSIDE, "passed", L(
            "Your context runs with every part of its memory given from "
            "outside, and its outputs equal a plain context's.",
            "你的上下文的全部内存都由外部提供，它能运行，输出也与普通上下文的相同。"), details)

    return _LAB.run(EX_OUTSIDE, body)


# =========================================================================== exercise 4: share
def _shared_hint() -> str:
    return L("Query RKNN_QUERY_MEM_SIZE of every context first. Allocate one buffer of the largest "
             "total_internal_size, then give each context its own view of it, made with that context and "
             "at least as large as that context's total_internal_size.",
             "先查询每个上下文的 RKNN_QUERY_MEM_SIZE。按其中最大的 total_internal_size 分配一块缓冲区，"
             "然后给每个上下文一个它自己的视图：用该上下文创建，大小不小于该上下文的 total_internal_size。")


def _internal_size(model: str, soc: str) -> int:
    from .. import models
    return models.load_report(model, soc).total_internal_size


def _shared_orders(soc: str, rng: np.random.Generator) -> List[List[str]]:
    """Two triples of SHARED_MODELS, each with a model the notebook does not print: the first
    with its largest internal buffer last and without the largest model the notebook prints,
    the second with its largest first.  The two largest differ by more than the check's
    64 KiB slack, so no buffer size copied from a printout or hard-coded serves both calls."""
    from .. import models
    pool = [m for m in SHARED_MODELS if soc in models.model_socs(m)]
    size = {m: _internal_size(m, soc) for m in pool}
    printed_largest = max((m for m in NOTEBOOK_SHARED if m in size), key=size.get)

    def draw(allowed: List[str]) -> List[str]:
        while True:
            three = [allowed[int(i)] for i in rng.permutation(len(allowed))[:3]]
            if any(m not in NOTEBOOK_SHARED for m in three) and len({size[m] for m in three}) == 3:
                return sorted(three, key=size.get)

    first = draw([m for m in pool if m != printed_largest])
    while True:
        second = draw(pool)
        if abs(size[second[-1]] - size[first[-1]]) > 64 * 1024:
            break
    head, tail = first[:2], second[:2]
    rng.shuffle(head)
    rng.shuffle(tail)
    return [head + [first[-1]], [second[-1]] + tail]


def _shared_round(share_internal: Callable[[Any, List[str]], List[int]], rt: Any, chosen: List[str],
                  rng: np.random.Generator, first: bool) -> List[str]:
    """One call of the student's function on three models; the details of a pass."""
    soc = _soc_of(rt)
    paths = [_model_file(m, soc) for m in chosen]
    ledger = _cases.Ledger(rt)
    what = f"share_internal(rt, <{', '.join(chosen)}>)"
    ios: List[Any] = []
    try:
        try:
            got = share_internal(ledger, list(paths))
        except Exception as exc:
            raise _student_failure(exc, what, "share_internal", L(
                "read the runtime's message: it names what it needed. ",
                "读一下运行时的消息：它指出了它需要什么。") + _shared_hint())
        if got is None:
            raise (_not_done if first else _Fail)(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                                  L("return the list of your contexts, one per model.",
                                                    "请返回你的上下文列表，每个模型一个。"))
        try:
            ctxs = [_as_context(c, ledger, what) for c in got]
        except TypeError:
            raise _Fail(L(f"{what} returned {got!r}, not a list of contexts.",
                          f"{what} 返回了 {got!r}，不是上下文列表。"),
                        L("return [ctx_0, ctx_1, ctx_2], one per model, in the order of model_paths.",
                          "请按 model_paths 的顺序返回 [ctx_0, ctx_1, ctx_2]，每个模型一个。"))
        if len(ctxs) != len(paths) or len(set(ctxs)) != len(ctxs):
            n_different = len(set(ctxs))
            raise _Fail(L(f"{what} returned {len(ctxs)} contexts ({n_different} different) for "
                          f"{len(paths)} models.",
                          f"{what} 为 {len(paths)} 个模型返回了 {len(ctxs)} 个上下文（其中 {n_different} 个"
                          "互不相同）。"),
                        L("return one context per model, in the order of model_paths.",
                          "请按 model_paths 的顺序，每个模型返回一个上下文。"))
        sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE) for c in ctxs]
        internal = [int(s.total_internal_size) for s in sizes]
        # what the runtime holds for the contexts, plus every mem the function allocated
        total = sum(ledger.runtime_bytes(c) for c in ctxs) + ledger.made_bytes()
        ios = [_cases.CheckIo(rt, c) for c in ctxs]
        frames = [_frames_for(io.frame_shape, 2, rng) for io in ios]
        got_out: List[List[List[bytes]]] = [[] for _ in ctxs]
        for round_ in range(2):
            for k, io in enumerate(ios):      # one after another: A, B, C, A, B, C
                try:
                    got_out[k].append(io.run(frames[k][round_]))
                except RknnError as exc:
                    raise _run_error(exc, L(f"{chosen[k]}: rknn_run on your context",
                                            f"{chosen[k]}：在你的上下文上调用 rknn_run"), _shared_hint())
        refs = [_reference(rt, p, f) for p, f in zip(paths, frames)]
        ref_total = sum(t for _, t in refs)
        for k, (ref_out, _) in enumerate(refs):
            if got_out[k] != ref_out:
                raise _Fail(L(f"{chosen[k]}: its outputs differ from a context made with flag 0, for the "
                              "same frames.",
                              f"{chosen[k]}：对同样的帧，它的输出与标志为 0 的上下文不同。"),
                            L("Each context needs its own weights and its own view of the shared buffer that holds "
                              "its whole total_internal_size; the models must run one after another.",
                              "每个上下文都需要它自己的权重内存，以及共享缓冲区的一个它自己的视图，这个视图要能"
                              "容纳它的整个 total_internal_size；这些模型必须依次运行。"))
        need = sum(internal) - max(internal)
        saved = ref_total - total
        sums = L(f"your three contexts hold {_kib(total)} of DMA memory, three flag-0 contexts "
                 f"{_kib(ref_total)}: a saving of {_kib(saved)}",
                 f"你的三个上下文占用 {_kib(total)} DMA 内存，三个标志为 0 的上下文占用 "
                 f"{_kib(ref_total)}：节省了 {_kib(saved)}")
        names = _list(chosen)
        if saved < need - 64 * 1024:
            sizes_shown = _list([_kib(i) for i in internal])
            raise _Fail(L(f"{names}: {sums}. Sharing one internal buffer should save more (internal "
                          f"sizes {sizes_shown}).",
                          f"{names}：{sums}。共享一块内部内存应当省下更多（各内部内存大小：{sizes_shown}）。"),
                        L("Allocate the internal memory once, for the largest model, and give every context a "
                          "view of that one buffer: one buffer per model, or one buffer with a region per "
                          "model, shares nothing.",
                          "按最大的模型只分配一次内部内存，并给每个上下文一个这块缓冲区的视图：每个模型一块"
                          "缓冲区，或者一块缓冲区中每个模型各占一段区域，都没有共享任何内存。"))
        return [L(f"{names}: outputs equal to flag-0 contexts, run one after another; {sums}",
                  f"{names}：依次运行，输出与标志为 0 的上下文相同；{sums}")]
    finally:
        for io in ios:
            io.close()
        ledger.cleanup()


def check_shared_internal(share_internal: Callable[[Any, List[str]], List[int]]) -> CheckResult:
    """Exercise 4: ``share_internal(rt, model_paths) -> [ctx, ...]``: one context per model
    (same order), ready to run one after another, with one internal buffer shared by all.

    The check calls your function twice, each time on three models of SHARED_MODELS drawn
    from a fresh seed (see _shared_orders): once with the largest internal buffer last, once
    with it first, the two largest different.  It
    passes a runtime that records the mems you make.  Then it:

    - adds up the DMA totals (RKNN_QUERY_MEM_SIZE) of your three contexts and compares the
      sum with three contexts made with flag 0: sharing must save at least the sum of the
      internal sizes less the largest (less 64 KiB);
    - binds its own io mems to every context and runs them one after another, twice around,
      with seeded frames: every output must equal the flag-0 context's for the same frame.

    It destroys your mems and contexts afterwards."""
    def body() -> CheckResult:
        _require_function(share_internal, "check_shared_internal(share_internal)")
        rt = _open_runtime()
        rng = np.random.default_rng(_fresh_seed())
        details: List[str] = []
        try:
            _require_models(_soc_of(rt), SHARED_MODELS)
            for n, chosen in enumerate(_shared_orders(_soc_of(rt), rng)):
                details += _shared_round(share_internal, rt, chosen, rng, first=n == 0)
        finally:
            rt.close()
        return CheckResult(EX_SHARED, "passed", L(
            "The models run one after another on one internal buffer, "
            "with the outputs of separate contexts, and the DMA total shows the saving.",
            "这些模型在一块内部内存上依次运行，输出与各自独立的上下文相同，DMA 总量也显示出了节省量。"), details)

    return _LAB.run(EX_SHARED, body)


# =========================================================================== exercise 2: choose
def practice_pattern(seed: int = 7) -> "_cases.Pattern":
    """An access pattern to try ``choose_cacheable`` on (a fixed seed; the check draws its own)."""
    return _cases.made_up_patterns(np.random.default_rng(seed))[0]


_FLAGS = {abi.RKNN_FLAG_MEMORY_CACHEABLE: "RKNN_FLAG_MEMORY_CACHEABLE",
          abi.RKNN_FLAG_MEMORY_NON_CACHEABLE: "RKNN_FLAG_MEMORY_NON_CACHEABLE"}


def check_cache_choice(choose_cacheable: Callable[[Any], int]) -> CheckResult:
    """Exercise 2: ``choose_cacheable(pattern) -> abi.RKNN_FLAG_MEMORY_CACHEABLE or
    abi.RKNN_FLAG_MEMORY_NON_CACHEABLE``: the cheaper allocation for a buffer the CPU uses as
    ``pattern.cpu(buf)`` does once per frame (``pattern.nbytes``; ``pattern.syncs``: the
    rknn_mem_sync modes a cacheable buffer needs per frame).

    The check draws ten made-up patterns, new at every call: scans and fills of large and
    small buffers, a small region or a few scattered bytes of a large buffer, a top-k.  After
    your answer it measures each pattern's CPU time on a cached buffer itself (median of 9)
    and models the rest as rknnlab.profile.cpu does: cacheable adds the modeled
    rknn_mem_sync of every sync; non-cacheable multiplies the CPU time by UNCACHED_SLOWDOWN.
    It judges the patterns where one choice costs at least twice the other.  A failure
    shows its measured and modeled numbers for that pattern."""
    def body() -> CheckResult:
        _require_function(choose_cacheable, "check_cache_choice(choose_cacheable)")
        rng = np.random.default_rng(_fresh_seed())
        details: List[str] = []
        judged = 0
        ratios: List[float] = []
        for n, pattern in enumerate(_cases.made_up_patterns(rng), 1):
            what = L(f"choose_cacheable(<pattern {n}: {pattern!r}>)", f"choose_cacheable(<模式 {n}：{pattern!r}>)")
            try:
                got = choose_cacheable(pattern)
            except Exception as exc:
                raise _student_failure(exc, what, "choose_cacheable", L(
                    "time pattern.cpu(buf) on a buffer of pattern.nbytes, then compare the two modeled costs "
                    "per frame.",
                    "在一个大小为 pattern.nbytes 的缓冲区上为 pattern.cpu(buf) 计时，然后比较两种选择每帧的"
                    "推算（非实测）的开销。"))
            return_flag = L("return abi.RKNN_FLAG_MEMORY_CACHEABLE or abi.RKNN_FLAG_MEMORY_NON_CACHEABLE.",
                            "请返回 abi.RKNN_FLAG_MEMORY_CACHEABLE 或 abi.RKNN_FLAG_MEMORY_NON_CACHEABLE。")
            if got is None:
                raise (_not_done if n == 1 else _Fail)(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                                       return_flag)
            value = _whole_number(got)
            if value not in _FLAGS:
                raise _Fail(L(f"{what} returned {got!r}, not a flag of rknn_create_mem2.",
                              f"{what} 返回了 {got!r}，这不是 rknn_create_mem2 的标志。"), return_flag)
            cached = _cases.cached_us(pattern)
            cost = _cases.costs_us(pattern, cached)
            cheap, dear = sorted(cost, key=cost.get)
            cacheable_us = cost[abi.RKNN_FLAG_MEMORY_CACHEABLE]
            uncached_us = cost[abi.RKNN_FLAG_MEMORY_NON_CACHEABLE]
            shown = L(f"CPU time on a cached buffer {cached:,.1f} us (measured); cacheable: + mem_sync = "
                      f"{cacheable_us:,.1f} us; non-cacheable: {uncached_us:,.1f} us (both modeled)",
                      f"CPU 在经缓存的缓冲区上的时间 {cached:,.1f} us（实测）；可缓存：+ mem_sync = "
                      f"{cacheable_us:,.1f} us；不可缓存：{uncached_us:,.1f} us（两者均为推算，非实测）")
            if cost[dear] < CACHE_MARGIN * cost[cheap]:
                details.append(L(f"pattern {n}: not judged (the two costs are too close: {shown})",
                                 f"模式 {n}：未评判（两种开销太接近：{shown}）"))
                continue
            judged += 1
            ratios.append(cost[dear] / cost[cheap])
            if value != cheap:
                if value == abi.RKNN_FLAG_MEMORY_CACHEABLE:
                    why = L("A cacheable buffer pays for a cache sync over the whole buffer, once per mode in "
                            "pattern.syncs, each frame: cpu.sync_cost prices it. A large buffer may be touched "
                            "in a few bytes only.",
                            "可缓存的缓冲区每帧都要为覆盖整个缓冲区的缓存同步付出开销，pattern.syncs 中的每种"
                            "模式各一次：cpu.sync_cost 给出它的开销。一个大缓冲区可能只被访问几个字节。")
                else:
                    why = L("An uncached buffer pays on every access: the CPU's time x cpu.UNCACHED_SLOWDOWN. A "
                            "buffer the CPU reads or writes in full costs far more than its sync.",
                            "不经缓存的缓冲区在每次访问时都要付出开销：CPU 的时间 × cpu.UNCACHED_SLOWDOWN。"
                            "对 CPU 完整读写的缓冲区来说，这部分开销远高于它的同步开销。")
                chosen = _FLAGS[value]
                raise _Fail(L(f"pattern {n}: you chose {chosen}, but the check's costs per frame are: "
                              f"{shown}.",
                              f"模式 {n}：你选择了 {chosen}，但检查算出的每帧开销是：{shown}。"),
                            L("Time what the CPU does on the buffer (pattern.cpu), not its size. ",
                              "要为 CPU 对缓冲区所做的工作（pattern.cpu）计时，而不是看缓冲区的大小。") + why,
                            details)
            chosen = _FLAGS[value]
            details.append(L(f"pattern {n}: {chosen} — right ({shown})", f"模式 {n}：{chosen} — 正确（{shown}）"))
        if judged < 5:
            raise _Fail(L(f"only {judged} patterns had a clear answer on this machine.",
                          f"在本机上，只有 {judged} 个模式有明确的答案。"),
                        L("run the check again when the machine is less busy.",
                          "请在机器不那么忙时再运行一次检查。"), details)
        low, high = min(ratios), max(ratios)
        return CheckResult(EX_CACHE, "passed", L(
            f"{judged} of {judged} judged patterns right (the cheaper choice "
            f"cost {low:.1f}–{high:,.0f}× less): you measured what the CPU does and "
            "priced both choices with the same model.",
            f"评判的 {judged} 个模式中，{judged} 个正确（另一种选择的开销是较省那种的 {low:.1f}–{high:,.0f} "
            "倍）：你测量了 CPU 所做的工作，并用同一个模型为两种选择计算了开销。"))

    return _LAB.run(EX_CACHE, body)


# =========================================================================== exercise 5 ★
def _shapes_hint() -> str:
    return L("Allocate the io mems once, for the largest shape RKNN_QUERY_INPUT_DYNAMIC_RANGE lists. When a "
             "frame's shape differs from the last one: rknn_set_input_shapes, then the CURRENT_* attrs, then "
             "rknn_set_io_mem again with the same mems.",
             "按 RKNN_QUERY_INPUT_DYNAMIC_RANGE 列出的最大形状，一次性分配输入/输出张量内存。当一帧的形状与"
             "上一帧不同时：先调用 rknn_set_input_shapes，再查询 CURRENT_* 属性，然后用同样的张量内存再次调用 "
             "rknn_set_io_mem。")


def _bound_size() -> str:
    """Canonical sentence 3' (the course's sizing rule), for a mem the runtime finds too small;
    the Chinese is the zh edition's own wording of it."""
    return L("Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, "
             "or a plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use "
             "n_elems × 4 bytes.",
             "要绑定的缓冲区，按绑定时所用的属性确定大小。用该属性的 size_with_stride（原生属性，或行可能有"
             "填充的普通输入属性）。对于你设为 FLOAT32 的普通输出属性，用 n_elems × 4 字节。")


def _own_values() -> str:
    return L("Each array you return must own its values: copy out of the mem (.copy()) before the next run, "
             "which overwrites it.",
             "你返回的每个数组都必须拥有自己的值：下一次运行会覆盖张量内存，所以在那之前把值复制出来"
             "（.copy()）。")


def _borrowed(value: Any) -> bool:
    """Whether ``value`` is an array over memory it does not own (a mem_view, not a copy)."""
    base = getattr(value, "base", None) if isinstance(value, np.ndarray) else None
    while isinstance(base, np.ndarray):
        base = base.base
    return base is not None and not isinstance(base, (bytes, bytearray))


def _dims_of(shape: Sequence[int], fmt: int) -> Tuple[int, int]:
    """(height, width) of a 4-D shape in ``fmt`` (NHWC or NCHW)."""
    return (shape[1], shape[2]) if fmt == abi.RKNN_TENSOR_NHWC else (shape[2], shape[3])


def _shape_attr(rt: Any, ctx: int, shape: Sequence[int], fmt: int) -> abi.rknn_tensor_attr:
    attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    attr.n_dims = len(shape)
    for k, d in enumerate(shape):
        attr.dims[k] = d
    attr.fmt = fmt
    return attr


def _shape_sequence(sizes: List[Tuple[int, int]], rng: np.random.Generator) -> List[Tuple[int, int]]:
    """Ten frames' (height, width): every shape at least twice, at least five changes, a repeat
    of the same shape somewhere, and never the largest first (sizing from the first frame fails)."""
    largest = max(sizes, key=lambda s: s[0] * s[1])
    while True:
        seq = [sizes[int(i)] for i in rng.integers(0, len(sizes), size=10)]
        changes = sum(a != b for a, b in zip(seq, seq[1:]))
        if (seq[0] != largest and changes >= 5 and changes < 9
                and all(seq.count(s) >= 2 for s in sizes)):
            return seq


def _dynamic_references(rt: Any, path: str, frames: Sequence[np.ndarray], fmt: int,
                        shape_of: Dict[Tuple[int, int], List[int]]) -> List[np.ndarray]:
    """float32 outputs of a context that sets each frame's shape and uses inputs_set / outputs_get."""
    from ..experiment.variants import frame_input
    ctx = rt.init(path)
    try:
        out, last = [], None
        for frame in frames:
            hw = frame.shape[1:3]
            if hw != last:
                rt.set_input_shapes(ctx, [_shape_attr(rt, ctx, shape_of[hw], fmt)])
                last = hw
            rt.inputs_set(ctx, frame_input(frame))
            rt.run(ctx)
            outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
            rt.outputs_get(ctx, outs)
            from ..rknn import buffers
            out.append(buffers.output_view(outs[0], np.float32).copy())
            rt.outputs_release(ctx, outs)
        return out
    finally:
        rt.destroy(ctx)


def check_shape_change(infer_shapes: Callable[[Any, int, List[np.ndarray]], List[np.ndarray]]) -> CheckResult:
    """Exercise 5 ★: ``infer_shapes(rt, ctx, frames) -> [float32 output per frame]``: ``ctx`` a
    fresh context of DYNAMIC_MODEL, ``frames`` uint8 NHWC frames whose shapes change.

    The check draws ten frames from a fresh seed: every shape the model accepts at least
    twice, at least five shape changes, a shape repeated somewhere, never the largest shape
    first.  It passes a runtime that records every call.  Then it:

    - compares each output with a context of the same model that sets the frame's shape and
      uses rknn_inputs_set / rknn_outputs_get (want_float = 1), within 1e-4 of the largest
      value;
    - counts the mems your function creates after its first rknn_run: any is an allocation
      per shape change, a failure whatever the outputs;
    - requires a bound input mem (rknn_set_io_mem) before the first run: the exercise is about
      the zero-copy mems.

    On a SoC the model is not built for, it says so."""
    def body() -> CheckResult:
        _require_function(infer_shapes, "check_shape_change(infer_shapes)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        try:
            _require_models(soc, [DYNAMIC_MODEL])
            path = _model_file(DYNAMIC_MODEL, soc)
            rng = np.random.default_rng(_fresh_seed())
            probe = rt.init(path)
            try:
                ranges = rt.query(probe, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=0))
                fmt = int(ranges.fmt)
                shape_of = {_dims_of(s, fmt): s for s in ranges.shapes()}
            finally:
                rt.destroy(probe)
            seq = _shape_sequence(list(shape_of), rng)
            frames = [rng.integers(0, 256, size=(1, h, w, 3), dtype=np.uint8) for h, w in seq]
            ledger = _cases.Ledger(rt)
            ctx = rt.init(path)
            dims = " ".join(f"{h}x{w}" for h, w in seq)
            what = L(f"infer_shapes(rt, ctx, <{len(frames)} frames: {dims}>)",
                     f"infer_shapes(rt, ctx, <{len(frames)} 帧：{dims}>)")
            try:
                try:
                    got = infer_shapes(ledger, ctx, [f.copy() for f in frames])
                except Exception as exc:
                    if isinstance(exc, RknnError):
                        small = "B, the tensor needs" in exc.detail or "too small" in exc.detail  # en-only
                        raise _Fail(_refused(what, exc),
                                    (_bound_size() + L(" ", "") if small else "") + _shapes_hint())
                    raise _student_error(exc, what, _todo("infer_shapes") if isinstance(exc, NotImplementedError)
                                         else _shapes_hint())
                if got is None:
                    raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                    L("return a list with one float32 array per frame.",
                                      "请返回一个列表，每帧对应一个 float32 数组。"))
                views = any(_borrowed(o) for o in got)
                try:
                    outs = [np.asarray(o, dtype=np.float64).reshape(-1) for o in got]
                except (TypeError, ValueError):
                    raise _Fail(L(f"{what} returned {type(got).__name__}, not a list of arrays.",
                                  f"{what} 返回了 {type(got).__name__}，不是数组列表。"),
                                L("return a list with one float32 array of the output's values per frame.",
                                  "请返回一个列表，每帧对应一个由输出值组成的 float32 数组。"))
                if len(outs) != len(frames):
                    raise _Fail(L(f"{what} returned {len(outs)} outputs for {len(frames)} frames.",
                                  f"{what} 为 {len(frames)} 帧返回了 {len(outs)} 个输出。"),
                                L("return one output per frame, in the order of the frames.",
                                  "请按帧的顺序，每帧返回一个输出。"))
                events = [e for e, c in ledger.events if c == ctx or e == "mem"]
                first_run = events.index("run") if "run" in events else len(events)
                late = events[first_run:].count("mem")
                bound = "bind" in events[:first_run]
                refs = _dynamic_references(rt, path, frames, fmt, shape_of)
            finally:
                ledger.cleanup()
                try:
                    rt.destroy(ctx)
                except RknnError:      # the student's function destroyed it already
                    pass
        finally:
            rt.close()
        wrong = [k for k, (o, r) in enumerate(zip(outs, refs))
                 if o.shape != r.shape or not np.allclose(o, r, rtol=0, atol=1e-4 * float(np.abs(r).max()))]
        changes = sum(a != b for a, b in zip(seq, seq[1:]))
        details = [L(f"{len(frames)} frames, {changes} shape changes", f"{len(frames)} 帧，{changes} 次形状变化")]
        if wrong:
            where = _list([L(f"frame {k} ({seq[k][0]}x{seq[k][1]})", f"第 {k} 帧（{seq[k][0]}x{seq[k][1]}）")
                           for k in wrong[:4]])
            raise _Fail(L(f"{len(wrong)} of {len(frames)} outputs differ from a context that sets each frame's "
                          f"shape: {where}.",
                          f"{len(frames)} 个输出中有 {len(wrong)} 个与为每帧设置形状的上下文不同：{where}。"),
                        (_own_values() + L(" ", "") if views else "") + L(
                            "After a shape change the input and "
                            "output attrs change: query the CURRENT_* attrs and bind with them. Return the float32 "
                            "values (n_elems of the output).",
                            "形状变化之后，输入和输出属性也随之变化：查询 CURRENT_* 属性，并用它们绑定。返回 "
                            "float32 值（输出的 n_elems 个值）。"), details)
        if late:
            raise _Fail(L(f"your function created {late} mem(s) after its first rknn_run: an allocation per shape "
                          "change.",
                          f"你的函数在第一次 rknn_run 之后创建了 {late} 个张量内存：每次形状变化都分配了一次。"),
                        _shapes_hint(), details)
        if not bound:
            raise _Fail(L("no input mem was bound with rknn_set_io_mem before the first rknn_run.",
                          "在第一次 rknn_run 之前，没有用 rknn_set_io_mem 绑定输入张量内存。"),
                        L("this exercise uses zero-copy mems: ", "这个练习用的是零拷贝张量内存：") + _shapes_hint(),
                        details)
        return CheckResult(EX_SHAPES, "passed", L(
            "Every output right at every shape, with the mems allocated once "
            "for the largest shape and bound again at each change. (The simulator's memory is "
            "coherent, A11: the check cannot see whether you call rknn_mem_sync.)",
            "每种形状下的每个输出都正确，张量内存按最大形状只分配了一次，并在每次形状变化时重新绑定。"
            "（模拟器的内存是一致的，A11：检查看不出你是否调用了 rknn_mem_sync。）"), details)

    return _LAB.run(EX_SHAPES, body)


_LAB = Lab("Lab 5", [EX_OUTSIDE, EX_CACHE, EX_SRAM, EX_SHARED, EX_SHAPES],
           zh=("实验 5", ["练习 1 — 找出 MEM_ALLOC_OUTSIDE 设置中的错误",
                         "练习 2 — 根据测量选择可缓存或不可缓存内存",
                         "练习 3 — 计算哪些内容能放进 SRAM",
                         "练习 4 — 三个模型共享一块内部内存",
                         "练习 5 ★ — 处理形状变化"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_outside_setup": 2, "check_cache_choice": 3, "check_sram_hits": 3,
          "check_shared_internal": 4, "check_shape_change": 6}
_LAB.seal(globals(), {"check_outside_setup": EX_OUTSIDE, "check_cache_choice": EX_CACHE,
                      "check_shared_internal": EX_SHARED, "check_sram_hits": EX_SRAM,
                      "check_shape_change": EX_SHAPES})
