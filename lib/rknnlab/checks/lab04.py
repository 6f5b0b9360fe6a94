"""Lab 4 (output reuse): one check per exercise.

==============================  ================================================================
:func:`check_two_threads`       1. two threads, one output buffer per context
:func:`check_output_guard`      2. predict each output's buffer size, then ``ensure_output_buffer``
:func:`check_prealloc_variant`  3. a variant with ``is_prealloc = 1`` buffers allocated once
:func:`check_which_is_which`    4. ``classify(variant)``: leak / release / prealloc / fresh (``MYSTERY``)
:func:`check_reuse_detector`    5. ★ ``reuses_output_memory(variant) -> bool``, by measurement
==============================  ================================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab04 as checks``.

Each check measures the student's code in its own run (every rknn_outputs_get recorded,
over the whole run), with cases the student cannot look up: the truth lives in private
code, and the messages give the measured numbers and a hint, never the answer.
"""
from __future__ import annotations

import ctypes
import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi, buffers
from . import _lab04_cases as _cases
from ._core import (_FREED, _CHANGED, _FRESH, _ZERO, CheckResult, Lab, _crc, _current_soc, _Fail,
                    _frames, _fresh_seed, _model_file, _not_done, _open_runtime, _require_function,
                    _out_bytes, _recorded_run, _reference_outputs, _soc_of, _Spy, _student_error,
                    _variant_error)

__all__ = ["CheckResult", "check_output_guard", "check_prealloc_variant", "check_which_is_which",
           "check_reuse_detector", "check_two_threads", "summary", "results", "MYSTERY",
           "LAB4_MODEL", "SIZES_MODEL", "load_digits_testset", "single_thread_predictions"]

#: the model of exercises 3-5: MobileNetV2's 1000-class output is 4,000 bytes as float32,
#: so a buffer allocated per call stands well above the harness's own noise
LAB4_MODEL = "mobilenet_v2"
#: exercise 2's model, and exercise 3's second one: three outputs of different sizes
SIZES_MODEL = "yolov5n"

#: exercise 3's want_float per output: output 0 as float32, every other output as int8
#: (post-processing with zp and scale); the chapter shows one float32 output only.  Output 0
#: stays float32 so that mobilenet_v2's buffer (4,000 B) is above numpy's own cache of small
#: blocks (under 1,024 B), which never reaches malloc, so MALLOC_PERTURB_ cannot see it
#: (glibc's tcache, which would skip the fill too, is off in the checks' runs)
def _wanted_float(index: int) -> int:
    return 1 if index == 0 else 0


#: heap growth per iteration that exercise 3's check counts as "keeps memory": a quarter of
#: MobileNetV2's float output.  The heap in use (glibc mallinfo2, read after every get) is
#: exact where an RSS slope over a few hundred iterations is not: the harness moves RSS by
#: 1-3 MiB per 1,000 iterations in short runs.
KEPT_BYTES_PER_ITERATION = 1000.0

#: the exercises' titles (their Chinese titles are registered with the Lab below: zh=)
EX_GUARD = "Exercise 2 — output buffer sizes: predict, then guard"  # en-only
EX_PREALLOC = "Exercise 3 — the prealloc variant"  # en-only
EX_THREADS = "Exercise 1 — two threads, one buffer each"  # en-only
EX_WHICH = "Exercise 4 — which is which"  # en-only
EX_REUSE = "Exercise 5 ★ — reuse, proved by measurement"  # en-only


def _fmt(n: float) -> str:
    return f"{n:,.0f}"


def _said(answer: Any) -> str:
    """A student's bool answer of exercise 5 in words ("reuse" / "no reuse")."""
    return L("reuse", "复用") if answer else L("no reuse", "不复用")


# =========================================================================== exercise 2
def _measured_sizes(rt: Any, model_file: str, soc: str) -> Dict[Tuple[int, int], int]:
    """{(index, want_float): the bytes a runtime-allocated rknn_outputs_get gives}."""
    ctx = rt.init(model_file)
    try:
        frame = _frames(SIZES_MODEL, soc, n=1)[0]
        rt.inputs_set(ctx, [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC,
                                                     type=abi.RKNN_TENSOR_UINT8)])
        rt.run(ctx)
        n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
        sizes = {}
        for wf in (1, 0):
            outs = [abi.rknn_output(index=k, want_float=wf, is_prealloc=0) for k in range(n_out)]
            rt.outputs_get(ctx, outs)
            sizes.update({(int(o.index), wf): int(o.size) for o in outs})
            rt.outputs_release(ctx, outs)
        return sizes
    finally:
        rt.destroy(ctx)


def _judge_predictions(predicted: Any, measured: Dict[Tuple[int, int], int]) -> List[str]:
    keys = sorted(measured)
    shape = "{" + ", ".join(f"({i}, {wf}): ..." for i, wf in keys) + "}"
    if predicted is None or (isinstance(predicted, dict) and all(v is None for v in predicted.values())):
        raise _not_done(L("no predictions yet.", "还没有预测。"),
                        L(f"fill in predicted_bytes = {shape} with numbers, before you run anything.",
                          f"在运行其他任何东西之前，在 predicted_bytes = {shape} 中填入数字。"))
    if not isinstance(predicted, dict) or set(predicted) != set(keys):
        got = sorted(predicted) if isinstance(predicted, dict) else type(predicted).__name__
        raise _Fail(L(f"predicted_bytes has the keys {got}; expected (output index, want_float) for each of "
                      f"{SIZES_MODEL}'s outputs: {shape}.",
                      f"predicted_bytes 的键是 {got}；应当是 {SIZES_MODEL} 每个输出的 (output index, want_float)："
                      f"{shape}。"))
    wrong = []
    for key in keys:
        value = predicted[key]
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise _Fail(L(f"predicted_bytes[{key}] = {value!r} is not a number of bytes.",
                          f"predicted_bytes[{key}] = {value!r} 不是一个字节数。")) from None
        if value != measured[key]:
            wrong.append(L(f"output {key[0]}, want_float = {key[1]}: your {_fmt(value)} bytes is too "
                           f"{'large' if value > measured[key] else 'small'}",
                           f"输出 {key[0]}，want_float = {key[1]}：你的 {_fmt(value)} 字节"
                           f"{'太大' if value > measured[key] else '太小'}"))
    if wrong:
        raise _Fail(L(f"{len(wrong)} of your {len(keys)} predictions {'differs' if len(wrong) == 1 else 'differ'} "
                      "from what rknn_outputs_get "
                      "gives (the measured sizes are shown once all are right).",
                      f"你的 {len(keys)} 个预测中，有 {len(wrong)} 个与 rknn_outputs_get 给出的结果不同"
                      "（全部正确之后才会显示测得的大小）。"),
                    L("A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, "
                      "attr.size bytes with want_float = 0. Read n_elems and size from RKNN_QUERY_OUTPUT_ATTR of "
                      "that index.",
                      "预分配的输出缓冲区必须装得下输出：want_float = 1 时为 n_elems × 4 字节，want_float = 0 时为 "
                      "attr.size 字节。从该下标的 RKNN_QUERY_OUTPUT_ATTR 读取 n_elems 和 size。"),
                    wrong)
    sizes = L(", ", "，").join(L(f"output {i} wf={wf}: {_fmt(measured[(i, wf)])} B",
                                  f"输出 {i} wf={wf}：{_fmt(measured[(i, wf)])} B") for i, wf in keys)
    return [L(f"predicted sizes: all {len(keys)} right ({sizes})", f"预测的大小：{len(keys)} 个全部正确（{sizes}）")]


def check_output_guard(ensure_output_buffer: Callable[..., Any], predicted_bytes: Any = None) -> CheckResult:
    """Exercise 2.  ``predicted_bytes``: {(output index, want_float): bytes} for yolov5n's
    outputs, compared with what a runtime-allocated rknn_outputs_get gives.
    ``ensure_output_buffer(rt, ctx, index, buf, want_float) -> numpy array``: ``buf`` itself
    when it is large enough for that output (``buf.nbytes >= need``), else a new array.

    The runtime sees only a pointer and a size, never a numpy dtype: the check judges
    ``nbytes`` and nothing about dtype (a float32 buffer that holds an int8 output's bytes
    is kept, and may be returned).  The guard is driven across three models and several
    output indices, with buffers the check makes itself (one of exactly the right size for
    another index than 0, a larger one, a too small one, one of another dtype that is large
    enough); every buffer it returns is then used with is_prealloc = 1 and must receive the
    values a runtime-allocated get gives."""
    def body() -> CheckResult:
        _require_function(ensure_output_buffer, "check_output_guard(ensure_output_buffer, predicted_bytes)")
        rt = _open_runtime()
        spy = _Spy(rt)
        soc = _soc_of(rt)
        ctxs: Dict[str, int] = {}
        try:
            details = _judge_predictions(predicted_bytes, _measured_sizes(rt, _model_file(SIZES_MODEL, soc), soc))
            for name in ("digits_cnn", "mobilenet_v2", SIZES_MODEL):
                ctx = rt.init(_model_file(name, soc))
                ctxs[name] = ctx
                frame = _frames(name, soc, n=1, seed=4)[0]
                rt.inputs_set(ctx, [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC,
                                                             type=abi.RKNN_TENSOR_UINT8)])
                rt.run(ctx)

            def need(name: str, index: int, wf: int) -> int:
                attr = rt.query(ctxs[name], abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
                return _out_bytes(attr, wf)

            def own(name: str, index: int, wf: int, factor: float = 1.0) -> np.ndarray:
                nbytes = int(need(name, index, wf) * factor)
                return np.empty(nbytes // 4, np.float32) if wf else np.empty(nbytes, np.int8)

            # (model, index, want_float, the buffer given: "returned" = the last one returned)
            steps: List[Tuple[str, int, int, Any]] = [
                ("digits_cnn", 0, 1, None), ("digits_cnn", 0, 1, "returned"),
                ("mobilenet_v2", 0, 1, "returned"),                         # 40 B given, too small
                ("mobilenet_v2", 0, 0, "returned"),                         # float32, large enough: keep
                (SIZES_MODEL, 1, 1, own(SIZES_MODEL, 1, 1)),                # exactly fits output 1
                (SIZES_MODEL, 2, 1, "returned"),                            # larger than output 2 needs
                (SIZES_MODEL, 0, 1, "returned"),                            # too small for output 0
                (SIZES_MODEL, 2, 0, own(SIZES_MODEL, 2, 0, 0.5)),           # half of what output 2 needs
                ("digits_cnn", 0, 0, "returned"),                           # larger: keep
            ]
            buf: Any = None
            for n, (name, index, wf, given) in enumerate(steps, 1):
                if not isinstance(given, str):
                    buf = given
                ctx = ctxs[name]
                nbytes = need(name, index, wf)
                fits = buf is not None and buf.nbytes >= nbytes      # the runtime sees buf and size only
                shown = "None" if buf is None else L(f"<{buf.dtype} array of {_fmt(buf.nbytes)} B>",
                                                     f"<{buf.dtype} 数组，{_fmt(buf.nbytes)} B>")
                what = L(f"step {n}: ensure_output_buffer(rt, ctx_{name}, {index}, {shown}, want_float={wf})",
                         f"第 {n} 步：ensure_output_buffer(rt, ctx_{name}, {index}, {shown}, want_float={wf})")
                try:
                    new = ensure_output_buffer(spy, ctx, index, buf, wf)
                except Exception as exc:
                    raise _student_error(exc, what, L(
                        "query RKNN_QUERY_OUTPUT_ATTR for that index, compute the "
                        "bytes needed, and allocate only when buf is None or too small.",
                        "查询该下标的 RKNN_QUERY_OUTPUT_ATTR，算出所需的字节数，只在 buf 为 None 或太小时才分配。"))
                if new is None:
                    none = L(f"{what} returned None.", f"{what} 返回了 None。")
                    if n == 1:
                        raise _not_done(none, L("return the buffer (a numpy array).", "请返回缓冲区（一个 numpy 数组）。"))
                    raise _Fail(none, L("return the buffer you keep or the one you allocated.",
                                        "请返回你保留的缓冲区，或者你新分配的缓冲区。"))
                if not isinstance(new, np.ndarray):
                    raise _Fail(L(f"{what} returned a {type(new).__name__}; expected a numpy array.",
                                  f"{what} 返回了 {type(new).__name__}；应当返回一个 numpy 数组。"),
                                L("allocate with np.empty(need, dtype=np.uint8), or any dtype with need bytes.",
                                  "用 np.empty(need, dtype=np.uint8) 分配，或者用任意 dtype，只要有 need 个字节。"))
                same_memory = buf is not None and new.size > 0 and new.ctypes.data == buf.ctypes.data
                if fits and not same_memory:
                    raise _Fail(L(f"{what} allocated a new buffer although the one given is large enough for "
                                  f"output {index} ({_fmt(buf.nbytes)} B of {buf.dtype}): an allocation the "
                                  "program does not need.",
                                  f"{what} 分配了一个新缓冲区，而传入的缓冲区已经装得下输出 {index}"
                                  f"（{_fmt(buf.nbytes)} B 的 {buf.dtype}）：这是程序不需要的一次分配。"),
                                L("keep buf when buf.nbytes >= the bytes output `index` needs (a larger buffer "
                                  "is fine if rknn_output.size gives its real capacity).",
                                  "当 buf.nbytes >= 输出 `index` 所需的字节数时，保留 buf（只要 rknn_output.size "
                                  "给出它的实际容量，更大的缓冲区也没有问题）。"))
                if not fits and same_memory:
                    raise _Fail(L(f"{what} kept the buffer, but it is too small for that output: it needs "
                                  f"more than its {_fmt(buf.nbytes)} B. rknn_outputs_get then refuses it (the "
                                  "simulator does: assumption A15) or writes past its end.",
                                  f"{what} 保留了缓冲区，但它对该输出来说太小：该输出需要的不止它的 "
                                  f"{_fmt(buf.nbytes)} B。这样 rknn_outputs_get 要么拒绝它（模拟器就是这样：假设 A15），"
                                  "要么越界写入。"),
                                L("compare buf.nbytes with the bytes needed and allocate a new array when it "
                                  "is smaller.",
                                  "把 buf.nbytes 与所需的字节数比较，小于所需时分配一个新数组。"))
                if new.nbytes < nbytes:
                    raise _Fail(L(f"{what} returned {_fmt(new.nbytes)} B: too small for that output.",
                                  f"{what} 返回了 {_fmt(new.nbytes)} B：对该输出来说太小。"),
                                L("n_elems × 4 bytes with want_float = 1, attr.size bytes with want_float = 0.",
                                  "want_float = 1 时为 n_elems × 4 字节，want_float = 0 时为 attr.size 字节。"))
                if not new.flags.c_contiguous or not new.flags.writeable:
                    raise _Fail(L(f"{what} returned an array that is not contiguous and writeable.",
                                  f"{what} 返回的数组不是连续且可写的。"),
                                L("use np.empty(n, dtype=...).", "请使用 np.empty(n, dtype=...)。"))
                outs = [abi.rknn_output(index=index, want_float=wf, is_prealloc=1, buf=new.ctypes.data,
                                        size=new.nbytes)]
                rt.outputs_get(ctx, outs)
                rt.outputs_release(ctx, outs)
                ref = [abi.rknn_output(index=index, want_float=wf, is_prealloc=0)]
                rt.outputs_get(ctx, ref)
                ok = ctypes.string_at(ref[0].buf, ref[0].size) == ctypes.string_at(new.ctypes.data, ref[0].size)
                rt.outputs_release(ctx, ref)
                if not ok:
                    raise _Fail(L(f"{what}: rknn_outputs_get into the returned buffer gave other values than a "
                                  "runtime-allocated get.",
                                  f"{what}：rknn_outputs_get 写入返回的缓冲区得到的值，与由运行时分配的 get "
                                  "给出的值不同。"))
                details.append(L(f"step {n}: {name} output {index}, want_float={wf}: "
                                 f"{'kept the buffer' if same_memory else 'a new buffer'} — right",
                                 f"第 {n} 步：{name} 输出 {index}，want_float={wf}："
                                 f"{'保留了缓冲区' if same_memory else '新缓冲区'} — 正确"))
                buf = new
        finally:
            for ctx in ctxs.values():
                try:
                    rt.destroy(ctx)
                except Exception:
                    pass
            rt.close()
        return CheckResult(EX_GUARD, "passed", L(
            "Your predictions match the runtime, and your guard keeps a buffer "
            "that fits and allocates one only when it does not.",
            "你的预测与运行时一致；你的尺寸保护保留装得下的缓冲区，只在装不下时才分配新的。"), details)

    return _LAB.run(EX_GUARD, body)


# =========================================================================== exercise 3
def _heap_slope(gets: List[Any]) -> float:
    """Least-squares growth of the heap in use, in bytes per get (NaN where unread)."""
    heap = [g[6] for g in gets if g[6] is not None]
    if len(heap) < 10:
        return math.nan
    return float(np.polyfit(np.arange(len(heap)), np.asarray(heap, float), 1)[0])


def _judge_recorded(records: Dict[str, Any], model: str, iterations: int, frames: List[np.ndarray],
                    ref: Dict[Tuple[int, int, int], int], n_out: int) -> List[str]:
    """Exercise 3's verdict on one recorded run; raises _Fail. Returns details."""
    events = records.get("events", [])
    gets = [e[1] for e in events if e[0] == "get"]
    if not gets:
        raise _not_done(L("your variant made no rknn_outputs_get call.",
                          "你的变体没有调用 rknn_outputs_get。"),
                        L("write the loop: rt.init, query the output attrs, allocate, then per iteration "
                          "inputs_set, run, outputs_get with is_prealloc = 1, outputs_release.",
                          "写出这个循环：rt.init，查询输出属性，分配，然后每次迭代依次 inputs_set、run、"
                          "is_prealloc = 1 的 outputs_get、outputs_release。"))
    if len(gets) != iterations:
        raise _Fail(L(f"{model}: rknn_outputs_get was called {len(gets)} times in {iterations} iterations "
                      "(expected one per iteration).",
                      f"{model}：{iterations} 次迭代中 rknn_outputs_get 被调用了 {len(gets)} 次"
                      "（应当每次迭代一次）。"),
                    L("call rt.outputs_get(ctx, outs) once per iteration, inside `for i in lab.loop():`.",
                      "在 `for i in lab.loop():` 内部，每次迭代调用一次 rt.outputs_get(ctx, outs)。"))
    frame_crc = [_crc(f.tobytes()) for f in frames]
    counts = {k: {"fresh": 0, "freed": 0, "changed": 0} for k in range(n_out)}
    for k, (ctx, _thread, _t, frame, caller, outs, _heap) in enumerate(gets):
        if caller:
            raise _Fail(L(f"the rknn_outputs_get calls were made by rknnlab's own {caller}, not by your code.",
                          f"这些 rknn_outputs_get 调用是 rknnlab 自己的 {caller} 做的，不是你的代码。"),
                        L("write the loop yourself: the exercise is the code, not the result.",
                          "请自己写出这个循环：练习要的是代码，而不是结果。"))
        if frame is None:
            raise _Fail(L(f"{model}: get {k + 1} followed an rknn_run with no rknn_inputs_set on this context: "
                          "the model saw no frame.",
                          f"{model}：第 {k + 1} 次 get 之前的 rknn_run，在这个上下文上没有调用 rknn_inputs_set："
                          "模型没有收到帧。"),
                        L("set the frame every iteration: rt.inputs_set(ctx, frame_input(lab.input(i))).",
                          "每次迭代都设置帧：rt.inputs_set(ctx, frame_input(lab.input(i)))。"))
        if frame != frame_crc[k % len(frame_crc)]:
            same = k > 0 and frame == gets[k - 1][3]
            raise _Fail(L(f"{model}: get {k + 1} ran on " + ("the same frame as the get before it: the inputs "
                          "did not change" if same else "another frame than lab.input(i)") + ".",
                          f"{model}：第 {k + 1} 次 get " + ("用的帧与前一次 get 相同：输入没有改变"
                                                           if same else "用的不是 lab.input(i) 这一帧") + "。"),
                        L("call rt.inputs_set(ctx, frame_input(lab.input(i))) inside the loop, before rt.run.",
                          "在循环内部、rt.run 之前调用 rt.inputs_set(ctx, frame_input(lab.input(i)))。"))
        indices = sorted(o[0] for o in outs)
        if indices != list(range(n_out)):
            raise _Fail(L(f"{model} has {n_out} output(s); get {k + 1} fetched {indices}.",
                          f"{model} 有 {n_out} 个输出；第 {k + 1} 次 get 获取的是 {indices}。"),
                        L("fetch every output: one rknn_output per index from RKNN_QUERY_IN_OUT_NUM.",
                          "获取每一个输出：按 RKNN_QUERY_IN_OUT_NUM 给出的每个下标各用一个 rknn_output。"))
        for index, pre, wf, buf, size_given, _size, held, crc in outs:
            if not pre:
                raise _Fail(L(f"{model}: output {index} was fetched with is_prealloc = 0: the runtime allocated "
                              "its buffer inside rknn_outputs_get.",
                              f"{model}：输出 {index} 是以 is_prealloc = 0 获取的：运行时在 rknn_outputs_get "
                              "内部分配了它的缓冲区。"),
                            L("set is_prealloc = 1 and give buf/size of a buffer you allocated once, before the loop.",
                              "设置 is_prealloc = 1，并传入你在循环之前只分配一次的缓冲区的 buf/size。"))
            if wf != _wanted_float(index):
                raise _Fail(L(f"{model}: output {index} was fetched with want_float = {wf}; the exercise asks for "
                              f"want_float = {_wanted_float(index)} there (output 0 as float32, every other "
                              "output as int8).",
                              f"{model}：输出 {index} 是以 want_float = {wf} 获取的；练习要求这里用 "
                              f"want_float = {_wanted_float(index)}（输出 0 为 float32，其他所有输出为 int8）。"),
                            L("set want_float per output, and size each buffer by the size rule for that "
                              "want_float.",
                              "为每个输出分别设置 want_float，并按该 want_float 对应的尺寸规则确定每个缓冲区的大小。"))
            want = ref.get((frame, index, wf))
            if want is not None and crc != want:
                raise _Fail(L(f"{model}: output {index} of get {k + 1} differs from what a runtime-allocated "
                              "rknn_outputs_get gives for the same frame.",
                              f"{model}：第 {k + 1} 次 get 的输出 {index}，与对同一帧由运行时分配的 "
                              "rknn_outputs_get 给出的结果不同。"),
                            L("fetch after rt.run of the frame you set; read a want_float = 1 buffer as float32 "
                              "and a want_float = 0 buffer as int8.",
                              "在对你设置的帧执行 rt.run 之后再获取；把 want_float = 1 的缓冲区读作 float32，"
                              "把 want_float = 0 的缓冲区读作 int8。"))
            if held in (_FRESH, _ZERO):
                counts[index]["fresh"] += 1
            elif held == _FREED:
                counts[index]["freed"] += 1
            elif held == _CHANGED:
                counts[index]["changed"] += 1
    for index, c in counts.items():
        if c["freed"]:
            raise _Fail(L(f"{model}: in {c['freed']} of {len(gets)} gets, output {index}'s buffer had been freed "
                          "before the runtime wrote into it (a dangling pointer: the array behind buf was gone).",
                          f"{model}：{len(gets)} 次 get 中有 {c['freed']} 次，输出 {index} 的缓冲区在运行时写入之前"
                          "已经被释放（悬空指针：buf 背后的数组已经不在了）。"),
                        L("keep the arrays in a variable for the whole loop; a temporary such as "
                          "np.empty(n).ctypes.data is freed at once.",
                          "在整个循环期间把数组保存在一个变量中；np.empty(n).ctypes.data 这样的临时对象"
                          "会立即被释放。"))
        if c["fresh"] > 2:
            raise _Fail(L(f"{model}: in {c['fresh']} of {len(gets)} gets, output {index}'s buffer had just been "
                          "allocated (its bytes still held the allocator's fill pattern): an allocation per "
                          "iteration, even if the address repeats. Expected: at most 2 (the first use of each "
                          "buffer).",
                          f"{model}：{len(gets)} 次 get 中有 {c['fresh']} 次，输出 {index} 的缓冲区是刚刚分配的"
                          "（它的字节仍是分配器的填充值）：即使地址重复，也是每次迭代一次分配。"
                          "应当最多 2 次（每个缓冲区第一次使用时）。"),
                        L("allocate the buffers once, before `for i in lab.loop():`, and reuse them.",
                          "在 `for i in lab.loop():` 之前只分配一次缓冲区，然后复用它们。"))
        if c["changed"]:
            raise _Fail(L(f"{model}: in {c['changed']} of {len(gets)} gets, output {index}'s buffer no longer "
                          "held what the previous get wrote: something else used that memory in between.",
                          f"{model}：{len(gets)} 次 get 中有 {c['changed']} 次，输出 {index} 的缓冲区已不再保存"
                          "上一次 get 写入的内容：在这之间有别的东西用了这块内存。"),
                        L("keep the buffer alive and only read it; copy the values you want to keep "
                          "(np.copy), do not write into the buffer.",
                          "让缓冲区保持存活，只读取它；要保留的值请复制出来（np.copy），不要写入缓冲区。"))
    per_ctx: Dict[int, int] = {}
    unpaired = 0
    for e in events:
        if e[0] == "get":
            ctx = e[1][0]
            unpaired += per_ctx.get(ctx, 0)
            per_ctx[ctx] = 1
        elif e[0] == "release":
            per_ctx[e[1]] = 0
    unpaired += sum(per_ctx.values())
    releases = sum(1 for e in events if e[0] == "release")
    sizes = L(", ", "、").join(f"{o[4]:,} B" for o in sorted(gets[0][5]))
    details = [L(f"{model}, {len(gets)} recorded iterations: every get wrote the right values into your buffer(s) "
                 f"({sizes}), which still held what the last get wrote into it each time (no allocation per call)",
                 f"{model}，记录的 {len(gets)} 次迭代：每次 get 都把正确的值写入了你的缓冲区（{sizes}），"
                 "而且每次缓冲区都仍保存着上一次 get 写入的内容（每次调用都不分配）")]
    if unpaired:
        # every get here used is_prealloc = 1 (checked above): Rockchip's own code disagrees on
        # whether such a get needs a release, so a missing one is a note, not a failure
        details.append(L(f"Note: {unpaired} of {len(gets)} gets had no rknn_outputs_release after them. This course "
                         "pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1. "
                         "Rockchip's code disagrees: its dynamic-shape demo pairs them, its zipformer demo "
                         "(is_prealloc = 1) never releases. Not a failure here.",
                         f"说明：{len(gets)} 次 get 中有 {unpaired} 次之后没有 rknn_outputs_release。本课程把每次 "
                         "rknn_outputs_get 都与一次 rknn_outputs_release 配对，is_prealloc = 1 时也一样。"
                         "Rockchip 的代码在这一点上说法不一：它的动态形状示例把它们配对，它的 zipformer 示例"
                         "（is_prealloc = 1）从不 release。这里不判为失败。"))
    else:
        details.append(L(f"{model}: each of the {len(gets)} gets was paired with one release",
                         f"{model}：{len(gets)} 次 get 中的每一次都与一次 release 配对"))
    return details


def check_prealloc_variant(variant: Callable[[Any], None], iterations: int = 200) -> CheckResult:
    """Exercise 3: ``variant(lab)`` gets every output with ``is_prealloc = 1`` into buffers it
    allocated once (output 0 with want_float = 1, the others with want_float = 0), and pairs
    every get with one release.  A missing release after an is_prealloc = 1 get is a note,
    not a failure: Rockchip's code disagrees on it (the course's pairing convention).

    Two runs, each in a process of its own with every call recorded (there is no unrecorded
    run): mobilenet_v2 for ``iterations`` (the heap in use, read after every get, must not
    grow) and yolov5n (three outputs of different sizes).  With MALLOC_PERTURB_ set (and
    glibc's tcache off), a buffer's bytes just before each get say whether it was allocated
    or freed since the last get wrote into it: an allocation per
    iteration is found even when the allocator hands back the same address."""
    def body() -> CheckResult:
        if not callable(variant):
            raise _not_done(L(f"expected your variant function, got {type(variant).__name__}.",
                              f"这里要的是你的变体函数，收到的是 {type(variant).__name__}。"),
                            L("pass the function itself: check_prealloc_variant(my_prealloc_variant)",
                              "请传入函数本身：check_prealloc_variant(my_prealloc_variant)"))
        soc = _current_soc()
        name = getattr(variant, "__name__", L("your variant", "你的变体"))
        details: List[str] = []
        rt = _open_runtime()
        try:
            refs = {}
            for model in (LAB4_MODEL, SIZES_MODEL):
                frames = _frames(model, soc)
                refs[model] = (frames, _reference_outputs(rt, _model_file(model, soc), frames))
        finally:
            rt.close()
        kept = math.nan
        for model, n in ((LAB4_MODEL, iterations), (SIZES_MODEL, 4)):
            warmup = 5 if model == LAB4_MODEL else 0
            res, run, records = _recorded_run(variant, model, soc, n, warmup=warmup)
            if not run.ok:
                hint = L("query the output attrs, allocate one buffer per output before the loop, and pass it "
                         "with is_prealloc = 1 to rt.outputs_get.",
                         "查询输出属性，在循环之前为每个输出分配一个缓冲区，并以 is_prealloc = 1 把它传给 "
                         "rt.outputs_get。")
                if (run.error or "").startswith("NotImplementedError"):
                    text = run.error.split(":", 1)[1].strip() if ":" in run.error else ""
                    raise _not_done(L(f"{name}(lab) still raises NotImplementedError"
                                      + (f": {text.rstrip('.')}." if text else "."),
                                      f"{name}(lab) 仍然抛出 NotImplementedError"
                                      + (f"：{text.rstrip('.')}。" if text else "。")), hint)
                message = _variant_error(run, L(f"{name}(lab) on {model}", f"{name}(lab)（{model}）"))
                if run.status == "crashed":
                    hint = L("with is_prealloc = 1 the runtime writes the output at `buf`: buf must be "
                             "arr.ctypes.data of an array you keep alive for the whole loop, and size at most "
                             "arr.nbytes.",
                             "is_prealloc = 1 时，运行时把输出写到 `buf` 处：buf 必须是一个在整个循环期间保持存活的"
                             "数组的 arr.ctypes.data，size 不能超过 arr.nbytes。")
                    freed = sum(o[6] == _FREED for e in records.get("events", []) if e[0] == "get"
                                for o in e[1][5])
                    if freed:
                        message = L(f"{model}: in {freed} get(s), your output buffer had been freed before the "
                                    "runtime wrote into it (a dangling pointer: the array behind buf was gone); "
                                    "then " + message,
                                    f"{model}：有 {freed} 次 get，你的输出缓冲区在运行时写入之前已经被释放"
                                    "（悬空指针：buf 背后的数组已经不在了）；随后" + message)
                raise _Fail(message, hint)
            frames, ref = refs[model]
            n_out = len({k[1] for k in ref})
            details += _judge_recorded(records, model, n + warmup, frames, ref, n_out)
            if model == LAB4_MODEL:
                kept = _heap_slope([e[1] for e in records["events"] if e[0] == "get"][warmup:])
        details.append(L(f"{LAB4_MODEL}, {iterations} iterations: the heap in use grew by {kept:+,.0f} bytes per "
                         f"iteration (expected below {_fmt(KEPT_BYTES_PER_ITERATION)})",
                         f"{LAB4_MODEL}，{iterations} 次迭代：已用堆内存每次迭代增长 {kept:+,.0f} 字节"
                         f"（应当低于 {_fmt(KEPT_BYTES_PER_ITERATION)}）"))
        if not math.isnan(kept) and kept >= KEPT_BYTES_PER_ITERATION:
            raise _Fail(L(f"the outputs are preallocated, but the process keeps about {_fmt(kept)} bytes more "
                          f"per iteration (expected below {_fmt(KEPT_BYTES_PER_ITERATION)}): something else in "
                          "the loop keeps memory (a list of outputs, a new array per frame...).",
                          f"输出是预分配的，但进程每次迭代多保留约 {_fmt(kept)} 字节"
                          f"（应当低于 {_fmt(KEPT_BYTES_PER_ITERATION)}）：循环中有别的东西在保留内存"
                          "（一个输出的列表、每帧一个新数组……）。"),
                        L("keep nothing per iteration: read the values you need from the buffer and let them go.",
                          "每次迭代都不要保留任何东西：从缓冲区读出你需要的值，用完即弃。"),
                        details)
        note = any(d.startswith(L("Note:", "说明：")) for d in details)
        return CheckResult(EX_PREALLOC, "passed", L(
            "Your variant writes every output into its own buffer, allocated "
            "once; memory stays flat and the values are right"
            + (" (see the note on the release)." if note else "; every get is paired with a "
               "release."),
            "你的变体把每个输出写入它自己的、只分配一次的缓冲区；内存保持平稳，值也正确"
            + ("（见关于 release 的说明）。" if note else "；每次 get 都与一次 release 配对。")), details)

    return _LAB.run(EX_PREALLOC, body)


# =========================================================================== exercise 4
#: exercise 4's anonymous variants (A is mystery_A, ...): each one leaks, releases,
#: preallocates, or passes is_prealloc = 1 a buffer allocated fresh every frame
MYSTERY: Dict[str, Callable[[Any], None]] = {"A": _cases.mystery_A, "B": _cases.mystery_B,
                                             "C": _cases.mystery_C, "D": _cases.mystery_D}
_KINDS = ("leak", "release", "prealloc", "fresh")
#: the key point of chapter 4 and lab 4, word for word (in English: chapter 4's test reads it here;
#: the checks say it with _two_measurements(), in the language they speak)
TWO_MEASUREMENTS = ("Prove reuse with two measurements. The heap inside each get shows the runtime's "  # en-only
                    "allocations. Whether each buffer still holds what the last get wrote into it shows "  # en-only
                    "the caller's.")


def _two_measurements() -> str:
    """TWO_MEASUREMENTS, or the zh chapter 4's and lab 4's key point word for word."""
    return L(TWO_MEASUREMENTS, "证明复用要靠两项测量：每次 get 内部的堆变化反映运行时的分配；"
                               "每个缓冲区是否仍保存着上一次 get 写入的内容，反映调用方的分配。")


def check_which_is_which(classify: Callable[[Callable[[Any], None]], str]) -> CheckResult:
    """Exercise 4: ``classify(variant) -> "leak" | "release" | "prealloc" | "fresh"``, decided
    from what it measures ("fresh": is_prealloc = 1 into a buffer allocated every frame).  The check calls it on the four letters (A is mystery_A, ...) and on one
    more variant whose kind it draws anew for each check, one at a time in a random order:
    a rule must stand on one variant's measurements (no ranking of several, no lookup).  It
    stops at the first wrong answer; it names the letter when A-D is wrong (the student can
    run those anyway), keeps the fifth variant anonymous, and never says which word would be
    right."""
    def body() -> CheckResult:
        _require_function(classify, "check_which_is_which(classify)")
        cases = _cases.which_cases()
        rng = np.random.default_rng(_fresh_seed())
        order = rng.permutation(len(cases))
        saved = os.environ.get(_cases.CASE_X_ENV)
        os.environ[_cases.CASE_X_ENV] = str(rng.choice(_cases.CASE_X_KINDS))
        try:
            return _classify_all(cases, order)
        finally:
            if saved is None:
                os.environ.pop(_cases.CASE_X_ENV, None)
            else:
                os.environ[_cases.CASE_X_ENV] = saved

    def _classify_all(cases: List[Callable[[Any], None]], order: Any) -> CheckResult:
        details = []
        for n, k in enumerate(order, 1):
            case = cases[int(k)]
            what = f"classify({case.__name__})"
            try:
                answer = classify(case)
            except Exception as exc:
                raise _student_error(exc, what, L("measure the variant (m = watch.measure(variant)), then "
                                                  "return one word.",
                                                  "测量该变体（m = watch.measure(variant)），然后返回一个词。"))
            if answer is None:
                none = L(f"{what} returned None.", f"{what} 返回了 None。")
                if n == 1:
                    raise _not_done(none, L('return "leak", "release", "prealloc" or "fresh".',
                                            '请返回 "leak"、"release"、"prealloc" 或 "fresh"。'))
                raise _Fail(none, L('return "leak", "release", "prealloc" or "fresh" for every variant.',
                                    '请对每个变体都返回 "leak"、"release"、"prealloc" 或 "fresh"。'))
            word = str(answer).strip().lower()
            if word not in _KINDS:
                raise _Fail(L(f"{what} returned {answer!r}, not one of leak, release, prealloc, fresh.",
                              f"{what} 返回了 {answer!r}，不是 leak、release、prealloc、fresh 之一。"))
            if word != _cases.which_truth(case):
                letter = next((k for k, f in MYSTERY.items() if f is case), None)
                where = (L(f"Your answer for {letter} (checks.MYSTERY[{letter!r}]) is wrong: you said {word!r}. "
                           "Run that variant yourself and look at your two numbers.",
                           f"你对 {letter}（checks.MYSTERY[{letter!r}]）的答案是错的：你的答案是 {word!r}。"
                           "请自己运行这个变体，看看你的两个数字。")
                         if letter else L("Your answer for the fifth variant, the one the check keeps to itself, "
                                          "is wrong.",
                                          "你对第五个变体（检查自己保留的那个）的答案是错的。"))
                return CheckResult(EX_WHICH, "failed", L(
                    f"{where} {n - 1} answer(s) were right before it; the check stops at the first wrong one.",
                    f"{where}在它之前有 {n - 1} 个答案正确；检查在第一个错误的答案处停止。"), (),
                    L("Judge each variant on its own measurements. Does rknn_outputs_get allocate "
                      "(the heap gained inside the call: about the output's size, or about 0)? "
                      "Does the process keep what it allocated (the heap in use, last get minus "
                      "first, per get: about one output, or about 0)? Does the caller's buffer "
                      "still hold what the last get wrote into it (new_buffers)? Calling "
                      "rknn_outputs_release says nothing by itself: with is_prealloc = 1 it is "
                      "paired with every get too.",
                      "只根据每个变体自己的测量来判断。rknn_outputs_get 是否分配（调用内部增长的堆：约一个输出"
                      "的大小，还是约 0）？进程是否保留了分配的内存（已用堆内存，最后一次 get 减去第一次，"
                      "按每次 get 计：约一个输出，还是约 0）？调用方的缓冲区是否仍保存着上一次 get 写入的内容"
                      "（new_buffers）？调用 rknn_outputs_release 本身说明不了什么：is_prealloc = 1 时，"
                      "它同样与每次 get 配对。"))
            letter = next((k for k, f in MYSTERY.items() if f is case), L("the fifth variant", "第五个变体"))
            details.append(L(f"{letter}: {word} — right", f"{letter}：{word} — 正确"))
        return CheckResult(EX_WHICH, "passed", L(
            f"All {len(cases)} right: the heap gained inside the get shows "
            "the runtime's allocations, the caller's buffer bytes show the caller's, and the "
            "heap kept over the run tells the leak from the release.",
            f"{len(cases)} 个全部正确：get 内部增长的堆反映运行时的分配，调用方缓冲区的字节反映调用方的"
            "分配，而整个运行中保留下来的堆把泄漏与分配后释放区分开。"),
            details)

    return _LAB.run(EX_WHICH, body)


# =========================================================================== exercise 5 ★
def check_reuse_detector(reuses_output_memory: Callable[[Callable[[Any], None]], bool]) -> CheckResult:
    """Exercise 5 ★: ``reuses_output_memory(variant) -> bool`` says whether the same memory
    serves every iteration with no allocation per call, from a measurement.

    The check calls it on six private variants in a random order; their names say nothing.
    Among them: allocate-and-release (flat RSS, the address may repeat), preallocation that
    also calls release (the pairing rule), a fresh is_prealloc = 1 buffer every iteration
    (the flag says prealloc, the program allocates), two buffers used in turn (the address
    changes, nothing is allocated), zero-copy (no get at all), and the leak.  A failure names
    the trap each wrong answer fell into, by what that variant does (never by its name)."""
    def body() -> CheckResult:
        _require_function(reuses_output_memory, "check_reuse_detector(reuses_output_memory)")
        cases = _cases.reuse_cases()
        order = np.random.default_rng(_fresh_seed()).permutation(len(cases))
        details: List[str] = []
        traps: List[str] = []
        for k in order:
            case = cases[int(k)]
            what = f"reuses_output_memory({case.__name__})"
            try:
                answer = reuses_output_memory(case)
            except Exception as exc:
                raise _student_error(exc, what, L("measure the variant (m = watch.measure(variant)) and decide "
                                                  "from what you measured.",
                                                  "测量该变体（m = watch.measure(variant)），根据测得的结果判断。"))
            if answer is None:
                raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                                L("return True (the same memory serves every iteration) or False.",
                                  "请返回 True（每次迭代都使用同一块内存）或 False。"))
            if not isinstance(answer, (bool, np.bool_)):
                raise _Fail(L(f"{what} returned {answer!r} ({type(answer).__name__}), not True or False.",
                              f"{what} 返回了 {answer!r}（{type(answer).__name__}），不是 True 或 False。"),
                            L("return a bool, e.g. `return allocations_per_iteration < 0.5`.",
                              "请返回一个 bool，例如 `return allocations_per_iteration < 0.5`。"))
            why = _cases.reuse_why(case)
            if bool(answer) != _cases.reuse_truth(case):
                traps.append(L(f"a variant that {why}: you said {_said(answer)}",
                               f"一个变体，它{why}：你的答案是“{_said(answer)}”"))
            details.append(L(f"{case.__name__}: you said {_said(answer)}: it {why}",
                             f"{case.__name__}：你的答案是“{_said(answer)}”：它{why}"))
        if not traps:
            return CheckResult(EX_REUSE, "passed", L(
                f"Your function told all {len(cases)} variants apart by measurement.",
                f"你的函数通过测量区分了全部 {len(cases)} 个变体。"), details)
        # the traps are named by what the variant does, not by its (random) position or name:
        # the hidden variants are not answers to learn, so this teaches without giving one away
        wrong = len(traps)
        return CheckResult(EX_REUSE, "failed", L(
            f"{wrong} of your {len(cases)} answers {'is' if wrong == 1 else 'are'} wrong. "
            "The trap(s) your function fell into:",
            f"你的 {len(cases)} 个答案中有 {wrong} 个是错的。你的函数落入了这些陷阱："),
            traps,
            L("Reuse means no allocation per call. Flat memory only shows there is no leak. "
              + TWO_MEASUREMENTS + " Measure allocations, not flags or addresses. Run with "
              "MALLOC_PERTURB_ set and glibc's tcache off (watch.malloc_perturb does both): a "
              "freshly allocated block is then filled with one byte value. The tcache (blocks "
              "up to 1,032 B) skips that fill.",
              "复用就是每次调用都不分配内存。内存平稳只说明没有内存泄漏。" + _two_measurements()
              + "要测量分配，而不是看标志或地址。在设置了 MALLOC_PERTURB_ 并关闭 glibc 的 tcache 的情况下运行"
              "（watch.malloc_perturb 两者都会做）：这样新分配的块会被填充为同一个字节值。tcache"
              "（不超过 1,032 B 的块）会跳过这种填充。"))

    return _LAB.run(EX_REUSE, body)


# =========================================================================== exercise 1
def _load_digits_testset(soc: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    from .. import models
    path = models.model_path("digits_cnn", soc or "rk3588").parent / "testset.npz"
    with np.load(path, allow_pickle=False) as data:
        images, labels = data["images"], data["labels"]
    return np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels.astype(np.int64)


def _single_thread_predictions(rt: Any, model_file: str, images: np.ndarray) -> np.ndarray:
    ctx = rt.init(model_file)
    try:
        attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        out = np.empty(attr.n_elems, np.float32)
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=out.ctypes.data, size=out.nbytes)]
        preds = np.empty(len(images), np.int64)
        for i, image in enumerate(images):
            rt.inputs_set(ctx, [buffers.input_from_array(0, image, fmt=abi.RKNN_TENSOR_NHWC,
                                                         type=abi.RKNN_TENSOR_UINT8)])
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            preds[i] = int(np.argmax(out))
            rt.outputs_release(ctx, outs)
        return preds
    finally:
        rt.destroy(ctx)


def load_digits_testset(soc: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """digits_cnn's test set as (images uint8 NHWC (N, 8, 8, 1), labels int64 (N,))."""
    return _load_digits_testset(soc)


def single_thread_predictions(rt: Any, model_file: str, images: np.ndarray) -> np.ndarray:
    """digits_cnn's predicted digits, one image after another on one context (the reference)."""
    return _single_thread_predictions(rt, model_file, images)


def _shared_buffers(gets: List[tuple]) -> List[Tuple[int, int]]:
    """(address, get number) where a thread's get found that another thread had written into
    the same buffer since its own previous get there: the threads took turns in one buffer.
    An address that one thread uses only after another has finished with it is not counted:
    numpy and malloc hand a freed block to the next allocation, so an equal address alone
    proves no sharing."""
    last_by: Dict[int, int] = {}
    seen: Dict[Tuple[int, int], bool] = {}
    found = []
    for n, (_ctx, thread, _t, _frame, _caller, outs, _heap) in enumerate(sorted(gets, key=lambda g: g[2])):
        for o in outs:
            if not o[1]:
                continue
            buf = o[3]
            if seen.get((buf, thread)) and last_by.get(buf) != thread:
                found.append((buf, n + 1))
            seen[(buf, thread)] = True
            last_by[buf] = thread
    return found


def check_two_threads(classify_two_threads: Callable[[Any, str, np.ndarray], Any]) -> CheckResult:
    """Exercise 1: ``classify_two_threads(rt, model_path, images) -> predictions`` classifies
    the images on two threads at once, each with its own ``is_prealloc = 1`` output buffer.

    The check hands it digits_cnn's test images in a fresh random order and records every
    call: each image classified once, from at least two threads that overlap in time
    (threads are told apart by an identity the check gives each, since thread ids may be
    reused after a join), is_prealloc = 1, no buffer into which two threads take turns, and
    the predictions of one thread on one context, image for image."""
    def body() -> CheckResult:
        _require_function(classify_two_threads, "check_two_threads(classify_two_threads)")
        rt = _open_runtime()
        spy = _Spy(rt)
        soc = _soc_of(rt)
        model_file = _model_file("digits_cnn", soc)
        images, labels = _load_digits_testset(soc)
        order = np.random.default_rng(_fresh_seed()).permutation(len(images))
        images, labels = np.ascontiguousarray(images[order]), labels[order]
        try:
            try:
                preds = classify_two_threads(spy, model_file, images.copy())
            except Exception as exc:
                raise _student_error(exc, "classify_two_threads(rt, model_path, images)", L(
                    "give each thread its own output buffer: pass classify_two_threads_shared a "
                    "make_buffer that returns a new float32 array each time it is called.",
                    "给每个线程它自己的输出缓冲区：传给 classify_two_threads_shared 一个 make_buffer，"
                    "它每次被调用时都返回一个新的 float32 数组。"))
            if preds is None:
                raise _not_done(L("classify_two_threads returned None.", "classify_two_threads 返回了 None。"),
                                L("return the predicted digit of every image, in order.",
                                  "请按顺序返回每张图像的预测数字。"))
            reference = _single_thread_predictions(rt, model_file, images)
        finally:
            spy.cleanup()
            rt.close()
        preds = np.asarray(preds)
        n = len(images)
        if preds.shape != (n,):
            raise _Fail(L(f"expected one prediction per image ({n}), got an array of shape {preds.shape}.",
                          f"应当每张图像一个预测（{n} 个），收到的是形状为 {preds.shape} 的数组。"))
        gets = spy.gets
        releases = sum(1 for e in spy.events if e[0] == "release")
        threads = sorted({g[1] for g in gets})
        differ = int((preds != reference).sum())
        acc, ref_acc = float((preds == labels).mean()), float((reference == labels).mean())
        details = [L(f"your predictions: accuracy {acc:.1%}; one thread on one context: {ref_acc:.1%} "
                     f"({n} test images of digits_cnn, in a random order)",
                     f"你的预测：准确率 {acc:.1%}；单线程、单上下文：{ref_acc:.1%}"
                     f"（digits_cnn 的 {n} 张测试图像，随机顺序）"),
                   L(f"{differ} of {n} predictions differ from the single-thread ones (expected 0)",
                     f"{n} 个预测中有 {differ} 个与单线程的结果不同（应当为 0）"),
                   L(f"{len(gets)} rknn_outputs_get calls (expected {n}: one per image) from {len(threads)} "
                     "thread(s) (expected 2 or more)",
                     f"{len(gets)} 次 rknn_outputs_get 调用（应当为 {n} 次：每张图像一次），来自 "
                     f"{len(threads)} 个线程（应当为 2 个或更多）")]
        callers = {g[4] for g in gets if g[4]}
        if callers:
            raise _Fail(L("some images were classified by rknnlab's own single-thread helper "
                          "(checks.single_thread_predictions), not by your threads.",
                          "有些图像是由 rknnlab 自己的单线程辅助函数（checks.single_thread_predictions）"
                          "分类的，而不是由你的线程。"),
                        L("classify every image in your two worker threads.",
                          "在你的两个工作线程中对每张图像进行分类。"), details)
        not_pre = [g for g in gets if any(not o[1] for o in g[5])]
        if not_pre:
            leak = releases < len(not_pre)
            raise _Fail(L(f"{len(not_pre)} of {len(gets)} gets used is_prealloc = 0"
                          + (f" and only {releases} were released: a leak of one output per image."
                             if leak else ": the runtime allocated a buffer on every call."),
                          f"{len(gets)} 次 get 中有 {len(not_pre)} 次使用了 is_prealloc = 0"
                          + (f"，而只有 {releases} 次被 release：每张图像泄漏一个输出。"
                             if leak else "：运行时在每次调用时都分配了一个缓冲区。")),
                        L("keep is_prealloc = 1 and give each thread its own buffer, allocated once in the worker.",
                          "保持 is_prealloc = 1，并给每个线程它自己的缓冲区，在工作线程中只分配一次。"),
                        details)
        if len(gets) != n:
            raise _Fail(L(f"{len(gets)} rknn_outputs_get calls for {n} images: each image is classified once "
                          "(not once per thread, and not again on one thread).",
                          f"{n} 张图像有 {len(gets)} 次 rknn_outputs_get 调用：每张图像只分类一次"
                          "（不是每个线程一次，也不是在一个线程上再分类一次）。"),
                        L("split the images between the two threads, as the shared version does.",
                          "像共用缓冲区的版本那样，把图像分给两个线程。"), details)
        if len(threads) < 2:
            raise _Fail(L("all rknn_outputs_get calls came from one thread: the exercise keeps the two threads.",
                          "所有 rknn_outputs_get 调用都来自同一个线程：本练习要保留两个线程。"),
                        L("fix the sharing, not the threading: give each worker its own buffer.",
                          "要修正的是共用，而不是线程：给每个工作线程它自己的缓冲区。"), details)
        spans = {t: (min(g[2] for g in gets if g[1] == t), max(g[2] for g in gets if g[1] == t)) for t in threads}
        overlap = any(spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
                      for a in threads for b in threads if a < b)
        if not overlap:
            raise _Fail(L("the threads ran one after the other (no get of one thread fell between two gets of "
                          "another): that is one thread at a time.",
                          "这些线程是一个接一个运行的（没有一个线程的 get 落在另一个线程的两次 get 之间）："
                          "这等于同一时刻只有一个线程。"),
                        L("start both threads before joining either.",
                          "先启动两个线程，再 join 其中任何一个。"), details)
        shared = _shared_buffers(gets)
        if shared:
            message = L(f"threads took turns writing into the same buffer ({len(shared)} times; first at get "
                        f"{shared[0][1]}): one buffer shared, or buffers allocated per image that the allocator "
                        "passed from one thread to the other" + (f"; {differ} predictions came out wrong." if differ else
                                              "; the predictions came out right this time (by luck, or a lock "
                                              "makes the threads take turns), but one thread's get can overwrite "
                                              "the other's output before it is read."),
                        f"线程轮流写入同一个缓冲区（{len(shared)} 次；第一次在第 {shared[0][1]} 次 get）："
                        "共用了一个缓冲区，或者每张图像分配的缓冲区被分配器从一个线程转给了另一个线程"
                        + (f"；有 {differ} 个预测出错。" if differ else
                           "；这次预测结果是对的（靠运气，或者有一把锁让线程轮流执行），但一个线程的 get "
                           "可能在另一个线程读取之前覆盖它的输出。"))
            raise _Fail(message, L("One set of output buffers per context, and one thread per context at a "
                                   "time. Give each worker its own buffer, allocated once before its loop (pass a "
                                   "make_buffer that allocates). A buffer shared under a lock is correct on a board, "
                                   "but this exercise asks for one buffer per context.",
                                   "每个上下文一套输出缓冲区，同一时刻每个上下文只由一个线程使用。给每个工作线程"
                                   "它自己的缓冲区，在它的循环之前只分配一次（传入一个会分配的 make_buffer）。"
                                   "在开发板上，加锁共用一个缓冲区是正确的，但本练习要求每个上下文一个缓冲区。"),
                        details)
        if differ:
            raise _Fail(L(f"{differ} predictions differ from one thread's, although no buffer is shared.",
                          f"有 {differ} 个预测与单线程的结果不同，尽管没有共用缓冲区。"),
                        L("check the order of the predictions and that each thread reads its own buffer "
                          "after its own rknn_outputs_get, and that the buffer is float32: want_float = 1 "
                          "writes n × 4 bytes.",
                          "检查预测的顺序；检查每个线程是否在它自己的 rknn_outputs_get 之后读取它自己的缓冲区，"
                          "以及缓冲区是否为 float32：want_float = 1 写入 n × 4 字节。"), details)
        return CheckResult(EX_THREADS, "passed", L(
            "Each thread has its own output buffer, both threads ran at once, "
            "and the predictions match one thread's, image for image.",
            "每个线程都有自己的输出缓冲区，两个线程同时运行，而且预测结果与单线程的逐张图像一致。"), details)

    return _LAB.run(EX_THREADS, body)


_LAB = Lab("Lab 4", [EX_THREADS, EX_GUARD, EX_PREALLOC, EX_WHICH, EX_REUSE],
           zh=("实验 4", ["练习 1 — 修正两个线程共用缓冲区的错误",
                         "练习 2 — 输出缓冲区大小——先预测，再保护",
                         "练习 3 — 编写预分配变体",
                         "练习 4 — 诊断未知变体——哪个是哪个？",
                         "练习 5 ★ — 用测量证明或否定复用"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_two_threads": 2, "check_output_guard": 3, "check_prealloc_variant": 3,
          "check_which_is_which": 4, "check_reuse_detector": 4}
_LAB.seal(globals(), {"check_output_guard": EX_GUARD, "check_prealloc_variant": EX_PREALLOC, "check_which_is_which": EX_WHICH,
                      "check_reuse_detector": EX_REUSE, "check_two_threads": EX_THREADS})
