"""Lab 3 (bottlenecks): one check per exercise.

================================  ==============================================================
:func:`check_bottleneck`          1. ``bottleneck(pipeline)``: the phase that limits a frame
:func:`check_read_bytes`          2. ``predict_read_bytes(layer, native_attr)``: a layer's RW(KB)
:func:`check_want_float`          3. ``choose_want_float(rt, ctx)``: float scores, the cheaper way
:func:`check_ddr_bound`           4. ``ddr_bound(text)``: the DDR-bound layers of a profile
:func:`check_speedup`             5. ★ ``predict_speedup(profile, run_ms, n_cores)``: more cores
================================  ==============================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab03 as checks``.

Each check measures what it judges itself: pipelines it builds and times on the runtime at
hand, the compiler's RW column of every shipped layer, runtimes whose output conversion it
makes costlier, profiles it draws anew, runs it times under each core mask.  The truth lives
in private code; the messages give measured numbers and a hint, never the answer.
"""
from __future__ import annotations

import copy
import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi
from . import _lab03_cases as _cases
from ._core import (CheckResult, Lab, _Fail, _fresh_seed, _model_file, _not_done, _open_runtime,
                    _require_function, _soc_of, _student_error, _whole_number)

__all__ = ["CheckResult", "check_bottleneck", "check_read_bytes", "check_ddr_bound", "check_want_float",
           "check_speedup", "summary", "results", "PHASES", "PRACTICE_MODEL", "WANT_FLOAT_MODEL",
           "practice_pipeline", "practice_model", "practice_profile", "profile_of", "n_cores"]

#: the phases of a frame, in the order a pipeline runs them
PHASES = _cases.PHASES
#: exercise 4's model: three int8 outputs of about two million values (yolov5s)
WANT_FLOAT_MODEL = "yolov5s"
#: exercise 5: the model the notebook calibrates on (the check judges the others; built for
#: RK3588 only: see practice_model)
PRACTICE_MODEL = "yolov5s_relu"
#: exercise 5: the models the check times under each core mask
SPEEDUP_MODELS = ("digits_cnn", "mobilenet_v2", "mobilenet_v2_320", "resnet50", "yolov5n", "yolov5s")
#: exercise 5: a prediction is right within this fraction of the measured speedup
SPEEDUP_TOLERANCE = {"sim": 0.03, "native": 0.10}

#: the exercises' titles (their Chinese titles are registered with the Lab below: zh=)
EX_BOTTLENECK = "Exercise 1 — find the bottleneck phase of a pipeline"  # en-only
EX_READ = "Exercise 2 — predict a layer's DDR read bytes"  # en-only
EX_FLOAT = "Exercise 4 — choose want_float from a measured cost"  # en-only
EX_DDR = "Exercise 3 — spot the DDR-bound layers in a profile"  # en-only
EX_SPEEDUP = "Exercise 5 ★ — predict the multi-core speedup"  # en-only


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _list(items: Sequence[str]) -> str:
    """Items joined as a list in the language the check speaks."""
    return L(", ", "、").join(items)


def _then(text: str) -> str:
    """``text`` after a Chinese word: a space first when it starts with a Latin letter or a digit."""
    return " " + text if text[:1].isascii() else text


# =========================================================================== exercise 1
#: exercise 1: the run phase of a "big" pipeline uses this model, a "small" one the other
_RUN_MODELS = {"big": "mobilenet_v2", "small": "digits_cnn"}
#: CPU phases of a pipeline (ms): the planted one gets _PLANTED_MS; a slow first call costs
#: _FIRST_CALL_MS once
_CPU_MS, _PLANTED_MS, _FIRST_CALL_MS = 0.25, 4.0, 60.0
#: the check judges a pipeline only when its own slowest phase is this much slower than the next
_MARGIN = 1.5


def _pipeline(rt: Any, soc: str, kind: Tuple[str, str, Optional[str]], rng: np.random.Generator
              ) -> "_cases.Pipeline":
    planted, run_model, first = kind
    cpu = {p: (_PLANTED_MS if p == planted else _CPU_MS) for p in ("preprocess", "postprocess")}
    cpu["first_call"] = _FIRST_CALL_MS
    return _cases.Pipeline(rt, _model_file(_RUN_MODELS[run_model], soc), first, cpu, rng)


def practice_pipeline(rt: Any, seed: int = 3) -> List[Tuple[str, Callable[[], Any]]]:
    """A pipeline to try ``bottleneck`` on (a fixed seed; the check builds its own).  Its
    context lives as long as ``rt``."""
    rng = np.random.default_rng(seed)
    kind = _cases.PIPELINE_KINDS[int(rng.integers(len(_cases.PIPELINE_KINDS)))]
    return _pipeline(rt, _soc_of(rt), kind, rng).steps()


def check_bottleneck(bottleneck: Callable[[List[Tuple[str, Callable[[], Any]]]], str]) -> CheckResult:
    """Exercise 1: ``bottleneck(pipeline) -> phase name``; ``pipeline`` is a list of (name,
    step) pairs, one frame = every step once, in order.

    The check builds four pipelines from a fresh seed on the runtime at hand: real
    inputs_set, run and outputs_get on a model's context, and numpy work for the CPU phases.
    One phase is made the slowest; in some, another phase is slow on its first call only.
    After your function, the check times every phase itself (medians over 8 frames, after 2
    warm-up frames) and judges each pipeline whose slowest phase is at least 1.5 times the
    next.  A failure shows the check's own medians for that pipeline."""
    def body() -> CheckResult:
        _require_function(bottleneck, "check_bottleneck(bottleneck)")
        rng = np.random.default_rng(_fresh_seed())
        rt = _open_runtime()
        soc = _soc_of(rt)
        details: List[str] = []
        judged = 0
        try:
            for n, kind in enumerate(_cases.plan_pipelines(rng), 1):
                pipe = _pipeline(rt, soc, kind, rng)
                try:
                    steps = pipe.steps()
                    what = L(f"bottleneck(<pipeline {n}>)", f"bottleneck(<流水线 {n}>)")
                    try:
                        answer = bottleneck(list(steps))
                    except Exception as exc:
                        raise _student_error(exc, what, L(
                            "call every step of a frame in order, many frames, "
                            "and time each step with time.perf_counter().",
                            "按顺序调用一帧的每个步骤，运行很多帧，并用 time.perf_counter() 为每个步骤计时。"))
                    phases = _list(PHASES)
                    if answer is None:
                        none = L(f"{what} returned None.", f"{what} 返回了 None。")
                        one_of = L(f"return one of: {phases}.", f"请返回以下之一：{phases}。")
                        if n == 1:
                            raise _not_done(none, one_of)
                        raise _Fail(none, one_of)
                    word = str(answer).strip()
                    if word not in PHASES:
                        raise _Fail(L(f"{what} returned {answer!r}, not a phase of the pipeline.",
                                      f"{what} 返回了 {answer!r}，这不是流水线的阶段。"),
                                    L(f"return the name of a phase: {phases}.", f"请返回一个阶段的名字：{phases}。"))
                    medians = _cases.measure_phases(steps, frames=8, skip=2)
                    ranked = sorted(medians, key=medians.get, reverse=True)
                    if medians[ranked[0]] < _MARGIN * medians[ranked[1]]:
                        details.append(L(f"pipeline {n}: not judged (this machine was too busy for a clear "
                                         "slowest phase)",
                                         f"流水线 {n}：未评判（本机太忙，测不出明确的最慢阶段）"))
                        continue
                    judged += 1
                    shown = _list([f"{p} {_ms(medians[p])}" for p in PHASES])
                    if word != ranked[0]:
                        if word == kind[2]:
                            hint = L("The phase you named was slow on its first call only (a lazy set-up). Run "
                                     "many frames, leave out the first ones (the warm-up) and judge each phase by "
                                     "its median wall time (time.perf_counter()).",
                                     "你说的阶段只在第一次调用时慢（一次延迟初始化）。请运行很多帧，去掉最前面的"
                                     "几帧（预热），再按每个阶段墙钟时间（time.perf_counter()）的中位数来判断。")
                        elif ranked[0] == "run":
                            hint = L("rknn_run waits for the NPU, and a CPU clock (time.process_time) does not "
                                     "count waiting. Time each step alone in wall time, with time.perf_counter().",
                                     "rknn_run 会等待 NPU，而 CPU 时钟（time.process_time）不计等待的时间。"
                                     "请用 time.perf_counter() 以墙钟时间为每个步骤单独计时。")
                        else:
                            hint = L("Time each step alone with time.perf_counter() (wall time: the run waits for "
                                     "the NPU, and a CPU clock does not count waiting). Start the clock before "
                                     "each step, not once per frame. Run many frames and leave out the first: a "
                                     "lazy set-up makes one phase slow once. Judge by the median.",
                                     "用 time.perf_counter() 为每个步骤单独计时（墙钟时间：run 要等待 NPU，"
                                     "而 CPU 时钟不计等待的时间）。在每个步骤之前启动计时，而不是每帧只计一次。"
                                     "运行很多帧并去掉最前面的几帧：一次延迟初始化会让某个阶段慢一次。"
                                     "按中位数判断。")
                        raise _Fail(L(f"pipeline {n}: you said {word!r}, but the check's own timing (medians over "
                                      f"8 frames) shows another phase is the slowest: {shown}.",
                                      f"流水线 {n}：你的答案是 {word!r}，但检查自己的计时（8 帧的中位数）显示，"
                                      f"最慢的是另一个阶段：{shown}。"), hint,
                                    details)
                    details.append(L(f"pipeline {n}: {word} — right ({shown})", f"流水线 {n}：{word} — 正确（{shown}）"))
                finally:
                    pipe.close()
        finally:
            rt.close()
        if judged < 3:
            raise _Fail(L(f"only {judged} of the pipelines had a clear slowest phase on this machine.",
                          f"在本机上，只有 {judged} 条流水线有明确的最慢阶段。"),
                        L("run the check again when the machine is less busy.",
                          "请在机器不那么忙时再运行一次检查。"), details)
        return CheckResult(EX_BOTTLENECK, "passed", L(
            f"All {judged} judged pipelines right: you timed the phases "
            "in wall time, and a slow first call did not decide your answer (leaving out the "
            "warm-up, or a median, keeps it out).",
            f"评判的 {judged} 条流水线全部正确：你用墙钟时间为各阶段计时，而且一次很慢的首次调用"
            "没有左右你的答案（去掉预热，或者取中位数，都能把它排除在外）。"), details)

    return _LAB.run(EX_BOTTLENECK, body)


# =========================================================================== exercise 2
def _native_attrs(rt: Any, socs: Sequence[str]) -> Tuple[Dict[str, abi.rknn_tensor_attr], str]:
    """{soc: the NC1HWC2 native output attr of a model built for it}: queried from a real
    context for the runtime's own SoC, read from the compiler report for the others."""
    own = _soc_of(rt)
    attrs = {soc: _cases.native_attr_from_report(soc) for soc in socs}
    model = _cases.nc1hwc2_model(own)
    how = L("from the compiler reports", "取自编译报告")
    if own in attrs and model:
        ctx = rt.init(_model_file(model, own))
        try:
            attrs[own] = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        finally:
            rt.destroy(ctx)
        how = L(f"queried with RKNN_QUERY_NATIVE_OUTPUT_ATTR for {own}, from the compiler reports for the others",
                f"{own} 的用 RKNN_QUERY_NATIVE_OUTPUT_ATTR 查询，其他 SoC 的取自编译报告")
    return attrs, how


def _copy_attr(attr: abi.rknn_tensor_attr) -> abi.rknn_tensor_attr:
    copy = abi.rknn_tensor_attr()
    ctypes.memmove(ctypes.addressof(copy), ctypes.addressof(attr), ctypes.sizeof(copy))
    return copy


def _layer_text(case: Dict[str, Any]) -> str:
    layer = case["layer"]
    shapes = ",".join("(" + ",".join(map(str, s)) + ")" for s in layer["input_shapes"])
    if case["model"] == "made-up":
        return L(f"made-up layer {layer['id']} ({case['soc']}) {layer['op']} {shapes}",
                 f"虚构层 {layer['id']}（{case['soc']}）{layer['op']} {shapes}")
    # the profile's ID counts from 1, the compiler's layer from 0 (chapter 3 §2)
    return L(f"{case['model']} {case['soc']}, compiler layer {layer['id'] - 1} (profile ID {layer['id']}) "
             f"{layer['op']} {shapes}",
             f"{case['model']} {case['soc']}，编译器第 {layer['id'] - 1} 层（性能分析 ID {layer['id']}）"
             f"{layer['op']} {shapes}")


def _shown_layer(case: Dict[str, Any], value: int) -> str:
    """A wrong layer of exercise 2: your number and the expected one."""
    layer, truth = _layer_text(case), int(case["truth"])
    if case["model"] == "made-up":
        return L(f"{layer}: you said {value:,} bytes, the rule gives {truth:,}",
                 f"{layer}：你给出 {value:,} 字节，按规则应为 {truth:,}")
    return L(f"{layer}: you said {value:,} bytes, the compiler's RW column says {truth:,}",
             f"{layer}：你给出 {value:,} 字节，编译器的 RW 列为 {truth:,}")


def check_read_bytes(predict_read_bytes: Callable[[Dict[str, Any], abi.rknn_tensor_attr], int]) -> CheckResult:
    """Exercise 2: ``predict_read_bytes(layer, native_attr) -> bytes``: what a layer reads per
    frame, from ``layer`` ({"id", "op", "input_shapes", "output_shape"}, as the profile shows
    them) and the NC1HWC2 native output attr of a model built for the layer's SoC.

    Two sets of layers, none listed in the lab:

    - every layer of every shipped model, for every SoC (about a thousand), against the RW(KB)
      column the compiler gives it.  Left out: the layers whose shapes do not list everything
      they read (fused adds, the first layer, a cut list) and the few where the course's rule
      itself misses by more than the tolerance (under 1%: the rule is validated there).
    - about fifty made-up layers, new at every call: Add, Concat and Conv layers with shapes
      and channel counts no shipped model has, half on a SoC whose C2 is 8 and half on SoCs
      whose C2 is 16, several of them weight-heavy.  Their truth is that rule (plus the 8 B
      per output channel a Conv's column holds in the reports, counted from the output
      shape), so a table read from the reports cannot answer them, and C2 = 8, C2 = 16, no
      padding and padded weights each give a different answer on several of them.  Part of
      that truth is inferred, not confirmed: the reports show padding for Conv inputs of
      24 channels at C2 = 16 and, in ppocr_det's, for Add, Mul and Conv inputs at C2 = 16 and
      C2 = 8.  The padded bytes of a made-up Concat follow from the NC1HWC2 layout; no shipped
      report confirms them.

    An answer is right within 8% of the figure plus 2 KiB (the compiler rounds to whole KB and
    adds the 8 B per output channel).  A failure shows a few layers with your number and the
    expected one, and where the wrong ones are (SoC, op)."""
    def body() -> CheckResult:
        _require_function(predict_read_bytes, "check_read_bytes(predict_read_bytes)")
        real = _cases.judged_layers()
        made_up = _cases.made_up_layers(np.random.default_rng(_fresh_seed()), _cases.shipped_c2())
        cases = [case for pair in zip(made_up, real) for case in pair] + real[len(made_up):]
        socs = sorted({c["soc"] for c in cases})
        rt = _open_runtime()
        try:
            attrs, how = _native_attrs(rt, socs)
        finally:
            rt.close()
        wrong: List[Tuple[Dict[str, Any], int]] = []
        for n, case in enumerate(cases):
            layer_text = _layer_text(case)
            what = L(f"predict_read_bytes(<{layer_text}>, <native attr>)",
                     f"predict_read_bytes(<{layer_text}>, <原生属性>)")
            try:   # copies: the student's function may change what it is given
                got = predict_read_bytes(copy.deepcopy(case["layer"]), _copy_attr(attrs[case["soc"]]))
            except Exception as exc:
                raise _student_error(exc, what, L(
                    "read C2 from dims[4] of the native attr, then add up what the layer reads, in bytes.",
                    "从原生属性的 dims[4] 读取 C2，再把这一层读取的内容加起来，单位为字节。")
                    if isinstance(exc, NotImplementedError) else L(
                    "your function raised on this layer: try it on the layers the notebook "
                    "prints, and on an Add with two inputs and a Concat with three.",
                    "你的函数在这一层上抛出了异常：请在笔记本打印的各层上试一试，"
                    "再试一个有两个输入的 Add 和一个有三个输入的 Concat。"))
            if got is None:
                none = L(f"{what} returned None.", f"{what} 返回了 None。")
                bytes_hint = L("return a number of bytes.", "请返回字节数。")
                if n == 0:
                    raise _not_done(none, bytes_hint)
                raise _Fail(none, bytes_hint)
            value = float(got) if isinstance(got, (float, np.floating)) else _whole_number(got)
            if value is None or (isinstance(value, float) and not np.isfinite(value)):
                raise _Fail(L(f"{what} returned {got!r}, not a number of bytes.",
                              f"{what} 返回了 {got!r}，这不是字节数。"),
                            L("return an int.", "请返回一个 int。"))
            if not _cases.within(value, case["truth"]):
                wrong.append((case, int(value)))
        n_models = len({c["model"] for c in real})
        details = [L(f"{len(real)} layers from {n_models} shipped models and {len(socs)} SoCs "
                     f"({', '.join(socs)}), and {len(made_up)} made-up layers; native attrs {how}",
                     f"课程附带的 {n_models} 个模型、{len(socs)} 个 SoC（{'、'.join(socs)}）上的 "
                     f"{len(real)} 层，以及 {len(made_up)} 个虚构层；原生属性：{how}")]
        if wrong:
            where: Dict[str, int] = {}
            for case, _ in wrong:
                key = f"{case['soc']} {case['layer']['op']}"
                where[key] = where.get(key, 0) + 1
            shown = [_shown_layer(c, v) for c, v in wrong[:4]]
            places = _list([L(f"{k} ({v})", f"{k}（{v} 层）")
                            for k, v in sorted(where.items(), key=lambda kv: -kv[1])[:6]])
            n_made_up = sum(c["model"] == "made-up" for c, _ in wrong)
            kb = [v for c, v in wrong if c["truth"] > 0 and abs(v * 1024 / c["truth"] - 1) < 0.1]
            hint = L("Count what the layer reads: every activation input at 1 byte per element, its channels "
                     "padded up to a multiple of C2, plus the weights (not padded). Not the output. C2 is "
                     "the channel block of NC1HWC2: read it from dims[4] of the native attr; never assume it.",
                     "数一数这一层读取了什么：每个激活输入按每个元素 1 字节计，通道数向上填充到 C2 的倍数，"
                     "再加上权重（不填充）。输出不计在内。C2 是 NC1HWC2 的通道块大小：请从原生属性的 dims[4] "
                     "读取，不要自行假定。")
            if len(kb) > len(wrong) // 2:
                hint = L("Your numbers are about 1024 times too small: did you return KB? Return bytes. ",
                         "你的数字大约小了 1024 倍：你返回的是 KB 吗？请返回字节数。") + hint
            raise _Fail(L(f"{len(wrong)} of {len(cases)} layers are off by more than 8% of the expected figure "
                          f"plus 2 KiB ({n_made_up} of them made-up). Where they are: {places}.",
                          f"{len(cases)} 层中有 {len(wrong)} 层与期望值相差超过 8% 加 2 KiB（其中 {n_made_up} "
                          f"层是虚构的）。出错的层集中在：{places}。"), hint,
                        shown + details)
        return CheckResult(EX_READ, "passed", L(
            f"All {len(cases)} layers within 8% + 2 KiB of the expected figure, "
            "shipped and made-up: activations padded to C2, plus the weights.",
            f"全部 {len(cases)} 层（课程附带的和虚构的）都在期望值的 8% + 2 KiB 以内："
            "激活填充到 C2，再加上权重。"), details)

    return _LAB.run(EX_READ, body)


# =========================================================================== exercise 3
def _as_ids(answer: Any) -> Optional[Set[int]]:
    if isinstance(answer, (str, bytes)):
        return None
    try:
        items = list(answer)
    except TypeError:
        return None
    ids = set()
    for item in items:
        value = _whole_number(item)
        if value is None:
            return None
        ids.add(value)
    return ids


def check_ddr_bound(ddr_bound: Callable[[str], Sequence[int]]) -> CheckResult:
    """Exercise 3: ``ddr_bound(text) -> layer IDs``: the layers of a per-layer profile (the
    text RKNN_QUERY_PERF_DETAIL gives) that are DDR-bound: more DDR cycles than NPU cycles.

    The check draws six profiles from a fresh seed, from the layers of the shipped models
    with new cycles: some as a board prints them (a layer the compiler gives no cycles shows
    DDR cycles only), some with 0/0/0 for those layers, and with ties (DDR = NPU cycles);
    headers of 3-core and 2-core SoCs.  A failure says what kind of layers your answer got
    wrong and how many, never which IDs."""
    def body() -> CheckResult:
        _require_function(ddr_bound, "check_ddr_bound(ddr_bound)")
        cases = _cases.profile_cases(_fresh_seed())
        details: List[str] = []
        for n, (text, truth) in enumerate(cases, 1):
            what = L(f"ddr_bound(<profile {n}>)", f"ddr_bound(<性能分析 {n}>)")
            try:
                got = ddr_bound(text)
            except Exception as exc:
                raise _student_error(exc, what, L(
                    "read the rows between the header's dashed line and the next "
                    "dashed line; the Cycles column is DDR/NPU/Total.",
                    "读取表头下方的虚线与下一条虚线之间的各行；Cycles 列是 DDR/NPU/Total。"))
            if got is None:
                none = L(f"{what} returned None.", f"{what} 返回了 None。")
                ids_hint = L("return the IDs, e.g. a list of ints.", "请返回这些 ID，例如一个 int 的列表。")
                if n == 1:
                    raise _not_done(none, ids_hint)
                raise _Fail(none, ids_hint)
            ids = _as_ids(got)
            if ids is None:
                items = [] if isinstance(got, (str, bytes)) else list(got) if hasattr(got, "__iter__") else []
                if isinstance(got, (str, bytes)) or any(isinstance(i, (str, bytes)) for i in items):
                    raise _Fail(L(f"{what} returned strings, not ints: IDs as the text prints them.",
                                  f"{what} 返回的是字符串（文本中打印出的 ID 原样），不是 int。"),
                                L("convert each ID with int(...) and return a list of ints, e.g. [4, 9, 17].",
                                  "用 int(...) 转换每个 ID，返回一个 int 的列表，例如 [4, 9, 17]。"))
                kinds = sorted({type(i).__name__ for i in items}) or [type(got).__name__]
                raise _Fail(L(f"{what} returned {type(got).__name__} of {', '.join(kinds)}, not a collection of "
                              "whole-number layer IDs.",
                              f"{what} 返回的是元素为 {'、'.join(kinds)} 的 {type(got).__name__}，"
                              "不是由整数层 ID 组成的集合。"),
                            L("return the IDs of the ID column as ints, e.g. [4, 9, 17].",
                              "以 int 的形式返回 ID 列中的 ID，例如 [4, 9, 17]。"))
            rows = {r["id"]: r for r in _cases.parse_rows(text)}
            right = truth["ddr"]
            extra, missed = ids - right, right - ids
            if extra or missed:
                groups: Dict[str, int] = {}
                for i in extra:
                    kind = ("not_a_layer" if i not in rows else "tie" if i in truth["tie"] else
                            "zero" if i in truth["zero"] else "compute")
                    groups[kind] = groups.get(kind, 0) + 1
                lost: Dict[str, int] = {}
                for i in missed:
                    kind = "ddr_only" if i in truth["ddr_only"] else "ddr"
                    lost[kind] = lost.get(kind, 0) + 1
                lines = [L(f"you returned {v} {_cases.trap_words(k)}", f"你多返回了 {v} 个{_then(_cases.trap_words(k))}")
                         for k, v in groups.items()]
                lines += [L(f"you left out {v} {_cases.trap_words(k)}", f"你漏掉了 {v} 个{_then(_cases.trap_words(k))}")
                          for k, v in lost.items()]
                hint = L("A layer is DDR-bound when its DDR cycles are more than its NPU cycles (Cycles is "
                         "DDR/NPU/Total). Equal cycles are not DDR-bound; 0/0 says nothing. Not the slowest "
                         "layers, not the largest RW(KB). Return the IDs as the profile prints them.",
                         "DDR 周期多于 NPU 周期的层是带宽受限的（Cycles 是 DDR/NPU/Total）。周期相等的层不算带宽"
                         "受限；0/0 说明不了什么。不是最慢的层，也不是 RW(KB) 最大的层。请按性能分析打印的样子返回 ID。")
                shifted = [k for k in (-1, 1) if {i - k for i in ids} == right]
                if shifted:
                    hint = L(f"Your IDs look shifted by {shifted[0]:+d}: the profile numbers layers from 1 (the "
                             "compiler's log numbers them from 0). Return the ID column as printed. ",
                             f"你的 ID 看起来偏移了 {shifted[0]:+d}：性能分析从 1 开始给层编号（编译器的日志从 0 "
                             "开始）。请按打印出的样子返回 ID 列。") + hint
                raise _Fail(L(f"profile {n} ({len(rows)} layers): your IDs are not its DDR-bound layers.",
                              f"性能分析 {n}（{len(rows)} 层）：你给出的 ID 不是其中带宽受限的层。"), hint,
                            lines + details)
            details.append(L(f"profile {n}: {len(right)} of {len(rows)} layers — right",
                             f"性能分析 {n}：{len(rows)} 层中的 {len(right)} 层 — 正确"))
        return CheckResult(EX_DDR, "passed", L(
            f"All {len(cases)} profiles right: more DDR cycles than NPU cycles, "
            "ties and 0/0 layers left out.",
            f"全部 {len(cases)} 份性能分析都正确：DDR 周期多于 NPU 周期，周期相等的层和 0/0 的层都已排除。"),
            details)

    return _LAB.run(EX_DDR, body)


# =========================================================================== exercise 4
def _pairing_note(unpaired: int, gets: int, runtime_buffers: int) -> str:
    """Two sentences: the course's pairing rule, and why a missing release is no failure here.
    Rockchip's demos disagree with each other on it: the lab's folded detail under exercise 4
    gives both (the course's pairing sentence)."""
    if not runtime_buffers:
        why = L("with is_prealloc = 1 the release frees nothing of yours, a simulator assumption (A15)",
                "：在 is_prealloc = 1 时，release 不会释放任何属于你的东西，这是一条模拟器假设（A15）")
    else:
        why = L(f"but {runtime_buffers} of your gets used is_prealloc = 0, whose buffers only a release frees",
                f"，但你有 {runtime_buffers} 次 get 用的是 is_prealloc = 0，它们的缓冲区只有 release 才会释放")
    return L(f"Note: {unpaired} of your {gets} rknn_outputs_get calls had no rknn_outputs_release; pair every get "
             f"with one release (the course's pairing rule, chapter 4). Not a failure here: {why}.",
             f"说明：你的 {gets} 次 rknn_outputs_get 调用中，有 {unpaired} 次没有对应的 rknn_outputs_release；"
             f"每次 get 都要配一次 release（本课程的配对规则，第 4 章）。这里不算失败{why}。")


def check_want_float(choose_want_float: Callable[[Any, int], int]) -> CheckResult:
    """Exercise 4: ``choose_want_float(rt, ctx) -> 0 or 1``: the cheaper way to get float scores
    on ``rt``: rknn_outputs_get with want_float = 1, or want_float = 0 and then numpy's
    dequantize ((q - zp) * scale).  ``ctx`` is a context of WANT_FLOAT_MODEL that has run.

    The check hands your function the runtime at hand wrapped three times, in a random order:
    each makes rknn_outputs_get take a fixed wall time per want_float (CPU work after the
    real get, as a runtime's conversion on another CPU would cost), sized from this
    machine's own costs well above their jitter.  One of them makes want_float = 0's get
    cheaper than want_float = 1's, but not once the dequantize is added.  The right answer
    of each is known by construction; the check also measures both ways on it and shows
    those numbers when the answer is wrong.  It counts your gets and releases: a get without a
    release is not a failure, it gets a note with the course's pairing rule."""
    def body() -> CheckResult:
        _require_function(choose_want_float, "check_want_float(choose_want_float)")
        from ..experiment.variants import frame_input, query_io
        from ..rknn import buffers
        rng = np.random.default_rng(_fresh_seed())
        rt = _open_runtime()
        soc = _soc_of(rt)
        details: List[str] = []
        ctx = rt.init(_model_file(WANT_FLOAT_MODEL, soc))
        try:
            ins, _ = query_io(rt, ctx)
            dims = buffers.attr_dims(ins[0])
            rt.inputs_set(ctx, frame_input(rng.integers(0, 256, size=dims, dtype=np.uint8)))
            rt.run(ctx)
            base = _cases.cost_both_ways(rt, ctx)
            noted = False
            kinds = list(_cases.PROFILE_TRUTH)
            for n, profile in enumerate([kinds[int(i)] for i in rng.permutation(len(kinds))], 1):
                planted = _cases.CostlyGet(rt, _cases.targets_for(profile, base))
                what = L(f"choose_want_float(<runtime {n}>, ctx)", f"choose_want_float(<运行时 {n}>, ctx)")
                try:
                    got = choose_want_float(planted, ctx)
                except Exception as exc:
                    raise _student_error(exc, what, L(
                        "time rt.outputs_get (and your dequantize) several times each "
                        "way; pair every get with rt.outputs_release.",
                        "每种方式都对 rt.outputs_get（以及你的反量化）计时几次；每次 get 都配一次 rt.outputs_release。"))
                if got is None:
                    none = L(f"{what} returned None.", f"{what} 返回了 None。")
                    if n == 1:
                        raise _not_done(none, L("return 0 or 1.", "请返回 0 或 1。"))
                    raise _Fail(none, L("return 0 or 1.", "请返回 0 或 1。"))
                value = _whole_number(got)
                if value not in (0, 1):
                    raise _Fail(L(f"{what} returned {got!r}, not 0 or 1.", f"{what} 返回了 {got!r}，不是 0 或 1。"),
                                L("return the want_float you choose: 0 or 1.", "请返回你选择的 want_float：0 或 1。"))
                unpaired = max(planted.gets - planted.releases, 0)
                if unpaired and not noted:
                    noted = True
                    details.append(_pairing_note(unpaired, planted.gets, planted.gets_runtime_buffers))
                cost = _cases.cost_both_ways(planted, ctx, repeats=5)
                right = _cases.PROFILE_TRUTH[profile]
                shown = L(f"want_float = 1: {_ms(cost[1])} per get; want_float = 0 + dequantize: {_ms(cost[0])}",
                          f"want_float = 1：每次 get {_ms(cost[1])}；want_float = 0 加反量化：{_ms(cost[0])}")
                if value != right:
                    raise _Fail(L(f"runtime {n}: you chose want_float = {value}, but the check measured: {shown}.",
                                  f"运行时 {n}：你选择了 want_float = {value}，但检查测得：{shown}。"),
                                L("Measure what you will pay per frame on the runtime you are given: the get with "
                                  "want_float = 1, against the get with want_float = 0 plus your dequantize of every "
                                  "output. Repeat each several times and compare medians.",
                                  "在传给你的运行时上，测量每帧实际要付出的开销：want_float = 1 的 get，对比 "
                                  "want_float = 0 的 get 加上你对每个输出的反量化。每种方式都重复几次，比较中位数。"),
                                details)
                details.append(L(f"runtime {n}: want_float = {value} — right ({shown})",
                                 f"运行时 {n}：want_float = {value} — 正确（{shown}）"))
        finally:
            rt.destroy(ctx)
            rt.close()
        return CheckResult(EX_FLOAT, "passed", L(
            "Every choice matches the check's own measurement: you measured the "
            "whole cost of each way on the runtime you were given.",
            "每次选择都与检查自己的测量一致：你在传给你的运行时上测量了每种方式的全部开销。"), details)

    return _LAB.run(EX_FLOAT, body)


# =========================================================================== exercise 5 ★
def _context(rt: Any, model: str, core_mask: int, flags: int = 0) -> Tuple[int, Any]:
    """A context of ``model`` with ``core_mask`` set, and an input frame for it."""
    from ..experiment.variants import frame_input, query_io
    from ..rknn import buffers
    ctx = rt.init(_model_file(model, _soc_of(rt)), flags)
    try:
        if core_mask != abi.RKNN_NPU_CORE_0 or n_cores(rt) > 1:
            rt.set_core_mask(ctx, core_mask)   # a single-core NPU refuses the call (API reference)
        ins, _ = query_io(rt, ctx)
        frame = np.random.default_rng(5).integers(0, 256, size=buffers.attr_dims(ins[0]), dtype=np.uint8)
        return ctx, frame_input(frame)
    except BaseException:
        rt.destroy(ctx)
        raise


def run_ms_of(rt: Any, model: str, core_mask: int, runs: int = 3) -> float:
    """The median run time (ms, RKNN_QUERY_PERF_RUN) of ``model`` with ``core_mask`` on ``rt``,
    in a context made without RKNN_FLAG_COLLECT_PERF_MASK: Rockchip warns that profiled runs
    may be slower."""
    ctx, inputs = _context(rt, model, core_mask)
    try:
        times = []
        for _ in range(runs):
            rt.inputs_set(ctx, inputs)
            rt.run(ctx)
            times.append(rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration / 1e3)
        return float(np.median(times))
    finally:
        rt.destroy(ctx)


def profile_of(rt: Any, model: str, core_mask: int, runs: int = 3) -> Tuple[Any, float]:
    """(the per-layer profile of ``model`` run with ``core_mask`` as a DataFrame, the median
    run time in ms), measured on ``rt``.  The profile comes from one run of a context made
    with RKNN_FLAG_COLLECT_PERF_MASK; the run time from another context, made without it
    (:func:`run_ms_of`)."""
    from .. import profile
    ctx, inputs = _context(rt, model, core_mask, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.inputs_set(ctx, inputs)
        rt.run(ctx)
        table = profile.parse_perf_detail(profile.perf_detail(rt, ctx))
    finally:
        rt.destroy(ctx)
    return table, run_ms_of(rt, model, core_mask, runs)


_MASKS = {2: abi.RKNN_NPU_CORE_0_1, 3: abi.RKNN_NPU_CORE_0_1_2}


def n_cores(rt: Any) -> int:
    """How many NPU cores the runtime's SoC has (3 on RK3588, 2 on RK3576, else 1)."""
    from ..sim import npu
    return npu.soc_npu(_soc_of(rt)).cores


def practice_model(rt: Any) -> str:
    """The model exercise 5 calibrates on: PRACTICE_MODEL where it is built for the runtime's
    SoC (RK3588 only), else MobileNetV2."""
    from .. import models
    return PRACTICE_MODEL if _soc_of(rt) in models.model_socs(PRACTICE_MODEL) else "mobilenet_v2"


def practice_profile(rt: Any, cores: int = 1) -> Tuple[Any, float]:
    """The practice model's profile and run time (ms) on ``cores`` cores (1, 2 or 3), measured
    on ``rt``."""
    return profile_of(rt, practice_model(rt), _MASKS.get(cores, abi.RKNN_NPU_CORE_0))


def _made_up_cases(rt: Any, soc: str, cores: Sequence[int], rng: np.random.Generator
                   ) -> List[Tuple[str, Any, float, Dict[int, float]]]:
    """[(name, single-core profile, run ms, {n: speedup})] of made-up models no file holds: their
    profile is the simulator's single-core timing of their layers, in the runtime's text; their
    speedup is the law of A17/A44/A45 computed from that profile, with the simulator's constants
    on the simulator and, on a board, with the gain and the cost per split the check fits on the
    practice model's profiles measured on the board (ops split as the board's profile splits
    them; ops it does not hold, as A17 says)."""
    from .. import profile
    from ..sim import npu, perf
    if getattr(rt, "backend", "") == "sim":
        law = {n: (npu.split_speedup(n), npu.CORE_SWITCH_S * 1e6) for n in cores}
        split: Callable[[str], bool] = npu.is_split
    else:
        one, _ = practice_profile(rt, 1)
        law, seen_split, seen_whole = {}, set(), set()
        for n in cores:
            many, _ = practice_profile(rt, n)
            law[n] = _cases.fit_split(one, many)
            npu_rows = many[many["target"] == "NPU"]
            seen_split |= set(npu_rows.loc[npu_rows["cores"] > 1, "op"])
            seen_whole |= set(npu_rows.loc[npu_rows["cores"] <= 1, "op"])
        split = lambda op: op in seen_split or (op not in seen_whole and npu.is_split(op))   # noqa: E731
    out = []
    for kind in rng.permutation(len(_cases._MADE_UP_MODEL_KINDS)):
        layers = _cases.made_up_model(rng, int(kind), soc)
        times = npu.layer_times_on(layers, soc, (0,))
        table = profile.parse_perf_detail(perf.perf_detail_text(layers, times, soc))
        run_ms = round(npu.run_seconds_of(times, soc) * 1e6) / 1e3       # PERF_RUN gives whole us
        truth = {n: _cases.split_law(table, run_ms, n, *law[n], split) for n in cores}
        out.append((L(f"made-up model {len(out) + 1} ({len(layers)} layers)",
                      f"虚构模型 {len(out) + 1}（{len(layers)} 层）"), table, run_ms, truth))
    return out


def check_speedup(predict_speedup: Callable[[Any, float, int], float]) -> CheckResult:
    """Exercise 5 ★: ``predict_speedup(table, run_ms, n_cores) -> float``: how many times
    faster a model runs on ``n_cores`` cores than on one, from its single-core per-layer
    profile (a DataFrame from rknnlab.profile.parse_perf_detail) and its single-core run
    time in ms.

    Two kinds of model, which differ in their op mix (which ops are split, how many layers,
    how long the run is):

    - six shipped models, timed on the runtime at hand with one core and with every
      multi-core mask the SoC has (RKNN_QUERY_PERF_RUN, the median of 3 runs, in contexts
      made without RKNN_FLAG_COLLECT_PERF_MASK; the profile you get comes from another
      context, made with it);
    - four made-up models, new at every call, that no file holds, so no run can measure them:
      their profile is the simulator's single-core timing of their layers, and their speedup
      is the law the simulator documents (A17, A44, A45) computed from that profile (on a
      board, with the gain and cost per split the check fits on the practice model's board
      profiles).

    A prediction is right within 3% on the simulator, 10% on a board.  A failure shows each
    wrong prediction and whether it is too high or too low (3% to 10%, or more), never the
    speedup: a table of those would pass without a model of the cores."""
    def body() -> CheckResult:
        _require_function(predict_speedup, "check_speedup(predict_speedup)")
        rt = _open_runtime()
        soc = _soc_of(rt)
        cores = [n for n in _MASKS if n <= n_cores(rt)]
        tol = SPEEDUP_TOLERANCE["sim" if getattr(rt, "backend", "") == "sim" else "native"]
        details: List[str] = []
        wrong: List[str] = []
        asked = [0]

        def judge(name: str, table: Any, run_ms: float, n: int, truth: float) -> None:
            what = L(f"predict_speedup(<{name} profile>, {run_ms:.3f}, {n})",
                     f"predict_speedup(<{name}{' ' if name[-1:].isascii() else ''}的性能分析>, {run_ms:.3f}, {n})")
            asked[0] += 1
            try:
                got = predict_speedup(table.copy(), run_ms, n)
            except Exception as exc:
                raise _student_error(exc, what, L(
                    "use the profile's op, target and time_us columns and run_ms; "
                    "the model may hold ops the practice model does not.",
                    "使用性能分析的 op、target 和 time_us 列以及 run_ms；这个模型可能含有练习模型中没有的算子。"))
            if got is None:
                none = L(f"{what} returned None.", f"{what} 返回了 None。")
                number = L("return a number: the predicted speedup.", "请返回一个数：预测的加速比。")
                if asked[0] == 1:
                    raise _not_done(none, number)
                raise _Fail(none, number)
            try:
                value = float(got)
            except (TypeError, ValueError):
                raise _Fail(L(f"{what} returned {got!r}, not a number.", f"{what} 返回了 {got!r}，不是一个数。"),
                            L("return a float, e.g. 1.25.", "请返回一个 float，例如 1.25。"))
            if np.isfinite(value) and abs(value - truth) <= tol * truth:
                details.append(L(f"{name} on {n} cores: you predicted {value:.3f}x — right",
                                 f"{name}，{n} 核：你预测的是 {value:.3f}x — 正确"))
                return
            # the speedup is not shown: a table of them would pass without a model
            far = not np.isfinite(value) or abs(value - truth) > 0.1 * truth
            off = L("more than 10%", "超过 10%") if far else L(f"{tol:.0%} to 10%", f"在 {tol:.0%} 到 10% 之间")
            if value > truth:
                wrong.append(L(f"{name} on {n} cores: you predicted {value:.3f}x, {off} too high",
                               f"{name}，{n} 核：你预测的是 {value:.3f}x，偏高，相差{off}"))
            else:
                wrong.append(L(f"{name} on {n} cores: you predicted {value:.3f}x, {off} too low",
                               f"{name}，{n} 核：你预测的是 {value:.3f}x，偏低，相差{off}"))

        try:
            if not cores:
                where = (L("unset RKNNLAB_SIM_SOC: the simulator then plays an RK3588.",
                           "请取消环境变量 RKNNLAB_SIM_SOC 的设置：模拟器随后会按 RK3588 运行。")
                         if rt.backend == "sim" else
                         L("run this exercise on an RK3588, or on the simulator: RKNNLAB_BACKEND=sim.",
                           "请在 RK3588 上做这个练习，或者在模拟器上做：RKNNLAB_BACKEND=sim。"))
                raise _Fail(L(f"the {soc} has one NPU core: there is no multi-core speedup to measure here.",
                              f"{soc} 只有一个 NPU 核：这里没有多核加速比可以测量。"), where)
            from .. import models
            for model in (m for m in SPEEDUP_MODELS if soc in models.model_socs(m)):
                table, run_ms = profile_of(rt, model, abi.RKNN_NPU_CORE_0)
                for n in cores:
                    judge(model, table, run_ms, n, run_ms / run_ms_of(rt, model, _MASKS[n]))
            for name, table, run_ms, truth in _made_up_cases(rt, soc, cores, np.random.default_rng(_fresh_seed())):
                for n in cores:
                    judge(name, table, run_ms, n, truth[n])
        finally:
            rt.close()
        if wrong:
            raise _Fail(L(f"{len(wrong)} of {asked[0]} predictions are off by more than {tol:.0%} of the "
                          "speedup:",
                          f"{asked[0]} 个预测中有 {len(wrong)} 个与加速比相差超过 {tol:.0%}："),
                        L("Only some ops are split over the cores; the others run on one core, "
                          "and the run's fixed overhead does not shrink. A split layer is not n times faster, and "
                          "each one pays for the hand-over between cores. Measure both on the practice model's "
                          "profiles first. Made-up models cannot be run: predict from the profile alone.",
                          "只有部分算子会拆分到多个核上；其余的在一个核上运行，而且运行的固定开销不会缩短。"
                          "拆分层并不是快 n 倍，而且每个拆分层都要为核之间的交接付出开销。先在练习模型的性能"
                          "分析上把这两者测出来。虚构模型无法运行：只能根据性能分析来预测。"),
                        wrong + details)
        return CheckResult(EX_SPEEDUP, "passed", L(
            f"All {asked[0]} predictions within {tol:.0%} of the "
            "speedups, measured and made-up: only the split ops gain, each at its own rate and "
            "cost.",
            f"全部 {asked[0]} 个预测（实测的和虚构的模型）都与加速比相差在 {tol:.0%} 以内：只有拆分的算子"
            "会变快，各有各的倍率和开销。"), details)

    return _LAB.run(EX_SPEEDUP, body)


_LAB = Lab("Lab 3", [EX_BOTTLENECK, EX_READ, EX_DDR, EX_FLOAT, EX_SPEEDUP],
           zh=("实验 3", ["练习 1 — 找出流水线的瓶颈阶段",
                         "练习 2 — 根据形状预测一层的 DDR 读取字节数",
                         "练习 3 — 在性能分析结果中找出带宽受限的层",
                         "练习 4 — 根据实测开销选择 want_float",
                         "练习 5 ★ — 预测模型的多核加速比"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_bottleneck": 3, "check_read_bytes": 3, "check_ddr_bound": 2,
          "check_want_float": 4, "check_speedup": 6}
_LAB.seal(globals(), {"check_bottleneck": EX_BOTTLENECK, "check_read_bytes": EX_READ,
                      "check_want_float": EX_FLOAT, "check_ddr_bound": EX_DDR, "check_speedup": EX_SPEEDUP})
