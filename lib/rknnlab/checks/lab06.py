"""Lab 6 (a video pipeline): one check per exercise.

================================  ==============================================================
:func:`check_frame_sizes`         1. ``nv12_bytes(w, h, stride, height_stride)`` and
                                  ``rgb_input_bytes(w, h, soc)``: a frame's bytes, with strides
:func:`check_int8_threshold`      2. ``int8_threshold(value, zp, scale) -> q`` and ``text_mask(out,
                                  zp, scale, value)``: in the int8 domain
:func:`check_synced_loop`         3. ``detect(rt, frames) -> [boxes]``: boxes that stop
                                  changing, fixed
:func:`check_allocation_once`     4. ``detect_once(rt, frames, letterbox) -> [boxes]``: no
                                  allocation per frame
:func:`check_workers`             5. ★ ``choose_workers(table, target_fps, p95_budget_ms)
                                  -> int | None``
================================  ==============================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab06 as checks``.

Each check measures what it judges itself: it draws made-up frames, quantisation parameters
and measurement tables no notebook prints, runs the student's loop on frames it chooses and
compares every frame's boxes with its own run of the same frames, counts what the loop asks
of the runtime, watches the buffer handed to the letterbox stage and the student's own heap
in each frame.  While a check runs the student's functions, rknnlab.pipeline's nv12_size,
rgb_size and int8_threshold (and, in exercise 3, rknnlab.open_runtime) raise, however they are
reached: their code is swapped for the call and restored after (calling them teaches nothing).  The truth lives in private
code; the messages give measured numbers and a hint, never the answer.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import tracemalloc as _tracemalloc_module
import numpy as np
from tracemalloc import get_object_traceback as _traceback_of
from tracemalloc import get_traced_memory as _traced, is_tracing as _is_tracing, reset_peak as _reset_peak
from tracemalloc import start as _trace_start, stop as _trace_stop

from ..i18n import pick as L
from ..rknn.errors import RknnError
from . import _lab06_cases as _cases
from ._core import CheckResult, Lab, _Fail, _fresh_seed, _not_done, _require_function, _student_error

__all__ = ["CheckResult", "check_frame_sizes", "check_int8_threshold", "check_synced_loop",
           "check_allocation_once", "check_workers", "summary", "results", "PIPE_MODEL", "compare_frames",
           "LOOP_FRAMES", "REUSE_RULE", "SYNC_RULE", "REUSE_RULE_ZH", "measure_workers", "try_choice"]

#: the model of exercises 3 and 4 (PP-OCRv4's text detector, 480 x 480)
PIPE_MODEL = "ppocr_det"

EX_SIZES = "Exercise 1 — size an NV12 frame and its RGB input"  # en-only
EX_THRESH = "Exercise 2 — threshold in the int8 domain"  # en-only
EX_SYNC = "Exercise 3 — find why the boxes stop changing"  # en-only
EX_ALLOC = "Exercise 4 — make the per-frame allocation go away"  # en-only
EX_WORKERS = "Exercise 5 ★ — choose the number of workers"  # en-only

# the canonical sentences (DECISIONS 5 and 9'), as the English lab states them word for word (its
# tests read them); a message says the first through _reuse_rule(), in the language rknnlab speaks
REUSE_RULE = "Reuse means no allocation per call. Flat memory only shows there is no leak."  # en-only
SYNC_RULE = ("Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the "
             "DISABLE_FLUSH flags imply that the runtime flushes inputs and invalidates outputs by default. "
             "The API reference says cacheable memory shared by the CPU and the NPU needs rknn_mem_sync. None "
             "of Rockchip's demos call it. A maintainer says to add it yourself if you need it "
             "(airockchip/rknn_model_zoo#156). The course's code syncs: the safe choice.")  # en-only
# the same sentence as the Chinese lab (labs/zh) states it
REUSE_RULE_ZH = "复用意味着每次调用都不分配内存。内存平稳只能说明没有内存泄漏。"


def _reuse_rule() -> str:
    return L(REUSE_RULE, REUSE_RULE_ZH)


def _todo(name: str) -> str:
    """The hint of an exercise not started: no recipe (the folded hints hold it)."""
    return L(f"write {name}, then run this check again. Open a folded hint if you are stuck.",
             f"先编写 {name}，再运行一次这个检查。卡住时，打开一条折叠起来的提示。")


def _call(fn: Callable[..., Any], args: Tuple[Any, ...], what: str, name: str, hint: str) -> Any:
    try:
        return fn(*args)
    except _LibraryCalled as exc:
        raise _library_error(exc, what)
    except NotImplementedError as exc:
        raise _student_error(exc, what, _todo(name))
    except Exception as exc:
        raise _student_error(exc, what, hint)


class _LibraryCalled(Exception):
    """Raised by rknnlab's answer functions while a check runs the student's code."""


_LIBRARY_MODULES = {"nv12_size": "rknnlab.pipeline.frames", "rgb_size": "rknnlab.pipeline.frames",
                    "int8_threshold": "rknnlab.pipeline.postprocess", "open_runtime": "rknnlab"}


def _refused(*args: Any, **kwargs: Any) -> Any:
    # runs as the switched-off function's own code: its name is the label _switched_off gave it
    import sys
    from rknnlab.checks.lab06 import _LibraryCalled
    raise _LibraryCalled(sys._getframe().f_code.co_name)


@contextlib.contextmanager
def _library_refused(*names: str) -> Iterator[None]:
    """While the block runs, the function objects of rknnlab's ``names`` raise _LibraryCalled:
    their code is swapped (and restored after), so every way of reaching them (an alias, a
    default argument, functools.partial, a module imported under another name) raises too."""
    saved = []
    for name in names:
        fn = getattr(importlib.import_module(_LIBRARY_MODULES[name]), name)
        label = f"{_LIBRARY_MODULES[name].replace('.frames', '').replace('.postprocess', '')}.{name}"
        code = _refused.__code__.replace(co_name=label)
        if hasattr(code, "co_qualname"):
            code = code.replace(co_qualname=label)
        saved.append((fn, fn.__code__))
        fn.__code__ = code
    try:
        yield
    finally:
        for fn, code in saved:
            fn.__code__ = code


def _refuse_library_function(fn: Any, what: str) -> None:
    if getattr(fn, "__module__", "") and str(fn.__module__).startswith("rknnlab."):
        name = f"{fn.__module__}.{getattr(fn, '__name__', '?')}"
        raise _Fail(L(f"{what} is rknnlab's own function ({name}).", f"{what} 是 rknnlab 自己的函数（{name}）。"),
                    _library_hint())


def _library_hint() -> str:
    return L("Write the arithmetic yourself: the check switches rknnlab.pipeline's size and threshold "
             "functions off while it runs yours (calling them passes nothing you learn).",
             "算术要自己写：检查运行你的函数时，会关掉 rknnlab.pipeline 中计算大小和阈值的函数"
             "（调用它们学不到东西，也通不过检查）。")


def _library_error(exc: _LibraryCalled, what: str) -> _Fail:
    if str(exc).endswith("open_runtime"):
        return _Fail(L(f"{what} called {exc}, which this check switches off: a second runtime is not the loop "
                       "it judges.",
                       f"{what} 调用了 {exc}，而这个检查运行期间关掉了它：第二个运行时不是检查要判断的循环。"),
                     L("Use the runtime the check passes in (rt), for every frame.",
                       "每一帧都使用检查传给你的运行时（rt）。"))
    return _Fail(L(f"{what} called {exc}, which this check switches off.",
                   f"{what} 调用了 {exc}，而这个检查运行期间关掉了它。"), _library_hint())


def _shown(wrong: List[str], limit: int = 5) -> List[str]:
    more = len(wrong) - limit
    return wrong[:limit] + ([L(f"... and {more} more", f"……另有 {more} 项")] if more > 0 else [])


# =========================================================================== exercise 1: sizes
def _args_text(w: int, h: int, s: Optional[int], hs: Optional[int]) -> str:
    return f"{w}, {h}, stride={s}, height_stride={hs}"


def check_frame_sizes(nv12_bytes: Callable[..., int], rgb_input_bytes: Callable[[int, int, str], int]) -> CheckResult:
    """Exercise 1: ``nv12_bytes(width, height, stride=None, height_stride=None)``, the bytes of a
    decoder's NV12 buffer, and ``rgb_input_bytes(width, height, soc)``, the bytes of an RGB888
    zero-copy input of that size on ``soc`` ("rk3588", "rk3566" or "rk3568").

    The check draws 36 made-up frames at every call: even sizes, widths that are and are not
    multiples of 8 and 16, strides rounded up to a multiple of 2 to 256 bytes or padded by a
    fixed amount, height strides given or not (some not multiples of 16).  Every answer must
    be an exact int (a size in bytes is never a float).  rknnlab.pipeline's nv12_size and
    rgb_size raise while the check runs.  A failure lists the frames whose size is wrong and
    whether the answer is too small or too large, never the size."""
    def body() -> CheckResult:
        for fn, name in ((nv12_bytes, "nv12_bytes"), (rgb_input_bytes, "rgb_input_bytes")):
            _require_function(fn, L(f"pass the functions themselves: check_frame_sizes(nv12_bytes, "
                                    f"rgb_input_bytes) ({name} is not a function)",
                                    f"请传入函数本身：check_frame_sizes(nv12_bytes, rgb_input_bytes)"
                                    f"（{name} 不是函数）"))
        _refuse_library_function(nv12_bytes, "nv12_bytes")
        _refuse_library_function(rgb_input_bytes, "rgb_input_bytes")
        rng = np.random.default_rng(_fresh_seed())
        frames = _cases.made_up_frames(rng)
        with _library_refused("nv12_size", "rgb_size"):
            return _judge_sizes(nv12_bytes, rgb_input_bytes, frames)

    return _LAB.run(EX_SIZES, body)


def _size_verdict(got: Any, truth: int) -> Optional[str]:
    """None when ``got`` is the size; else what is wrong with it (never the size): "float",
    "not int", "small" or "large" (:func:`_size_wrong` says it)."""
    if isinstance(got, (float, np.floating)):
        return "float"
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
        return "not int"
    if int(got) == truth:
        return None
    return "small" if got < truth else "large"


def _size_wrong(what: str, got: Any, side: str) -> str:
    """One wrong size: '<call>: <answer> is <what is wrong>'."""
    shown = _shown_size(got)
    if side == "float":
        return L(f"{what}: {shown} is a float: a size in bytes is an int (use // rather than * 1.5 or /)",
                 f"{what}：{shown} 是 float：以字节计的大小是 int（用 //，不要用 * 1.5 或 /）")
    if side == "not int":
        return L(f"{what}: {shown} is not an int", f"{what}：{shown} 不是 int")
    if side == "small":
        return L(f"{what}: {shown} is too small", f"{what}：{shown} 偏小")
    return L(f"{what}: {shown} is too large", f"{what}：{shown} 偏大")


def _shown_size(got: Any) -> str:
    return f"{got:,} B" if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else repr(got)


def _judge_sizes(nv12_bytes: Callable[..., Any], rgb_input_bytes: Callable[..., Any],
                 frames: List[Tuple[int, int, Optional[int], Optional[int], str]]) -> CheckResult:
    wrong_nv12: List[str] = []
    wrong_rgb: List[str] = []
    floats = 0
    for n, (w, h, s, hs, soc) in enumerate(frames):
        kwargs = {k: v for k, v in (("stride", s), ("height_stride", hs)) if v is not None}
        what = f"nv12_bytes({_args_text(w, h, s, hs)})"
        try:
            got = nv12_bytes(w, h, **kwargs)
        except _LibraryCalled as exc:
            raise _library_error(exc, what)
        except NotImplementedError as exc:
            raise _student_error(exc, what, _todo("nv12_bytes"))
        except Exception as exc:
            raise _student_error(exc, what, L("stride and height_stride may be missing: they then equal the "
                                              "width and the height.",
                                              "stride 和 height_stride 可能没有给出：这时它们分别等于宽度和高度。"))
        if got is None and n == 0:
            raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                            L("return the number of bytes, an int.", "请返回字节数，一个 int。"))
        side = _size_verdict(got, _cases.nv12_bytes(w, h, s, hs))
        if side:
            wrong_nv12.append(_size_wrong(what, got, side))
            floats += side == "float"
        what = f"rgb_input_bytes({w}, {h}, {soc!r})"
        got = _call(rgb_input_bytes, (w, h, soc), what, "rgb_input_bytes",
                    L("soc is one of 'rk3588', 'rk3566', 'rk3568'.", "soc 是 'rk3588'、'rk3566'、'rk3568' 之一。"))
        side = _size_verdict(got, _cases.rgb_input_bytes(w, h, soc))
        if side:
            wrong_rgb.append(_size_wrong(what, got, side))
            floats += side == "float"
    wrong_all = wrong_nv12 + wrong_rgb
    if wrong_all and floats == len(wrong_all):
        raise _Fail(L(f"{len(wrong_all)} sizes of {2 * len(frames)} are floats:",
                      f"{2 * len(frames)} 个大小中有 {len(wrong_all)} 个是 float："),
                    L("A size in bytes is an int, as malloc and rknn_create_mem take it: compute with integer "
                      "arithmetic (// 2, not * 1.5).",
                      "以字节计的大小是 int，malloc 和 rknn_create_mem 接受的就是 int：用整数运算来算"
                      "（// 2，而不是 * 1.5）。"),
                    _shown(wrong_all))
    if wrong_nv12:
        also = [L(f"rgb_input_bytes: also wrong for {len(wrong_rgb)} of {len(frames)} made-up inputs",
                  f"rgb_input_bytes：{len(frames)} 个虚构的输入中，也有 {len(wrong_rgb)} 个算错了")] \
            if wrong_rgb else []
        raise _Fail(L(f"nv12_bytes is wrong for {len(wrong_nv12)} of {len(frames)} made-up frames:",
                      f"nv12_bytes 在 {len(frames)} 个虚构的帧中算错了 {len(wrong_nv12)} 个："),
                    L("NV12 keeps a full-size Y plane and one UV plane of half the rows (each row holds U and V "
                      "in turn). A decoder's buffer has rows of stride bytes and height_stride rows: size both "
                      "planes from the strides, not from the picture.",
                      "NV12 有一个全尺寸的 Y 平面，和一个行数减半的 UV 平面（每行交替存放 U 和 V）。"
                      "解码器的缓冲区每行 stride 字节，共 height_stride 行：两个平面都要按跨度计算大小，"
                      "而不是按画面。"),
                    _shown(wrong_nv12) + also)
    if wrong_rgb:
        raise _Fail(L(f"rgb_input_bytes is wrong for {len(wrong_rgb)} of {len(frames)} made-up inputs:",
                      f"rgb_input_bytes 在 {len(frames)} 个虚构的输入中算错了 {len(wrong_rgb)} 个："),
                    L("An RGB888 pixel is 3 bytes. A zero-copy input's rows are padded: the width goes up to "
                      "the SoC's alignment (w_stride), the height does not. The alignment depends on the SoC: "
                      "see the alignment table of exercise 1.",
                      "一个 RGB888 像素占 3 字节。零拷贝输入的行带填充：宽度向上取整到 SoC 要求的对齐"
                      "（w_stride），高度不变。对齐取决于 SoC：见练习 1 的对齐表。"),
                    _shown(wrong_rgb))
    strides = sum(s is not None for _, _, s, _, _ in frames)
    height_strides = sum(hs is not None for _, _, _, hs, _ in frames)
    return CheckResult(EX_SIZES, "passed",
                       L(f"Both sizes right for {len(frames)} made-up frames: you sized the NV12 planes from the "
                         "decoder's strides and padded the RGB rows to the SoC's alignment.",
                         f"两种大小在 {len(frames)} 个虚构的帧上都正确：你按解码器的跨度计算了 NV12 平面的大小，"
                         "并把 RGB 的行填充到了 SoC 要求的对齐。"),
                       [L(f"{strides} frames with a stride, {height_strides} with a height_stride, 3 SoCs",
                          f"{strides} 帧给出了 stride，{height_strides} 帧给出了 height_stride，3 种 SoC")])


# =========================================================================== exercise 2: threshold
def _kind_text(kind: str) -> str:
    """What a made-up value is, after "the value is" (English) or "这个值" (Chinese)."""
    return {"between": lambda: L("between two int8 levels (two neighbouring values of q)",
                                 "落在两个 int8 级别（q 的两个相邻取值）之间"),
            "level": lambda: L("exactly on an int8 level", "正好落在一个 int8 级别上"),
            "above": lambda: L("above the largest value the output can hold", "高于输出所能表示的最大值"),
            "below": lambda: L("below the smallest value the output can hold", "低于输出所能表示的最小值"),
            }[kind]()


#: exercise 2: a mask may allocate less than this many bytes per pixel of the map (a float32 copy
#: of the map is 4; the bool mask itself is 1, an int16 copy 2)
MASK_BYTES_PER_PIXEL = 4


_TRACEMALLOC_CALLS = ("start", "stop", "reset_peak", "clear_traces")


@contextlib.contextmanager
def _tracemalloc_watched() -> Iterator[List[str]]:
    """While the block runs, tracemalloc's start/stop/reset_peak/clear_traces (the names in
    tracemalloc and _tracemalloc) still work but note their calls into the list yielded; a
    marker allocated before the block must still be traced after it (a restart or a
    clear_traces forgets it).  The check's own calls go through functions bound at import."""
    import _tracemalloc
    called: List[str] = []
    saved = []
    for module in (_tracemalloc_module, _tracemalloc):
        for name in _TRACEMALLOC_CALLS:
            original = getattr(module, name, None)
            if original is None:
                continue

            def noted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                called.append(f"tracemalloc.{_name}")
                return _original(*args, **kwargs)
            saved.append((module, name, original))
            setattr(module, name, noted)
    marker = bytearray(64)
    try:
        yield called
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        if _is_tracing() and _traceback_of(marker) is None and not called:
            called.append(L("a restart of tracemalloc", "重启 tracemalloc"))


def _tracemalloc_touched(called: List[str]) -> _Fail:
    names = sorted(set(called))
    return _Fail(L(f"your code called {', '.join(names)} during the check: it cannot measure your memory then.",
                   f"检查期间，你的代码动了 tracemalloc（{'、'.join(names)}）：这时检查无法测量你的内存。"),
                 L("Leave tracemalloc alone; the check starts, stops and reads it itself.",
                   "不要动 tracemalloc；检查会自己启动、停止并读取它。"))


def _leave_tracemalloc_alone() -> str:
    return L("Leave tracemalloc alone; the check starts and stops it itself.",
             "不要动 tracemalloc；检查会自己启动和停止它。")


def _traced_call(fn: Callable[..., Any], args: Tuple[Any, ...]) -> Tuple[Any, int]:
    """(fn(*args), the most bytes the call had allocated at once beyond what it started with),
    by tracemalloc (its functions bound at import), which numpy reports its arrays to.  A call
    that stops, restarts or resets tracemalloc fails."""
    started = not _is_tracing()
    if started:
        _trace_start()
    try:
        _reset_peak()
        base = _traced()[0]
        with _tracemalloc_watched() as called:
            got = fn(*args)
        if not _is_tracing():
            raise _Fail(L("tracemalloc was stopped during the call: the check cannot measure its memory.",
                          "调用期间 tracemalloc 被停止了：检查无法测量这次调用的内存。"),
                        _leave_tracemalloc_alone())
        if called:
            raise _tracemalloc_touched(called)
        return got, _traced()[1] - base
    finally:
        if started and _is_tracing():
            _trace_stop()


def _check_threshold_values(int8_threshold: Callable[[float, int, float], int],
                            cases: List[Tuple[float, int, float, str]]) -> None:
    wrong: List[str] = []
    kinds_wrong = set()
    for n, (value, zp, scale, kind) in enumerate(cases):
        what = f"int8_threshold({value:.6g}, zp={zp}, scale={scale:.6g})"
        truth = _cases.int8_threshold(value, zp, scale)
        try:
            got = int8_threshold(value, zp, scale)
        except _LibraryCalled as exc:
            raise _library_error(exc, what)
        except NotImplementedError as exc:
            raise _student_error(exc, what, _todo("int8_threshold"))
        except ValueError:
            if truth is not None:
                wrong.append(L(f"{what}: raised ValueError, yet some int8 values reach {value:.6g}",
                               f"{what}：抛出了 ValueError，但有些 int8 值能达到 {value:.6g}"))
                kinds_wrong.add(kind)
            continue
        except Exception as exc:
            raise _student_error(exc, what, L("return an int from -128 to 127, or raise ValueError when no "
                                              "int8 value reaches the threshold.",
                                              "返回 -128 到 127 之间的一个 int；没有任何 int8 值能达到阈值时，"
                                              "抛出 ValueError。"))
        if got is None and n == 0:
            raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                            L("return an int from -128 to 127.", "请返回 -128 到 127 之间的一个 int。"))
        q = int(got) if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else None
        if truth is None:
            wrong.append(L(f"{what}: returned {got!r}; the value is {_kind_text(kind)}",
                           f"{what}：返回了 {got!r}；这个值{_kind_text(kind)}"))
            kinds_wrong.add(kind)
        elif q is None or not -128 <= q <= 127:
            wrong.append(L(f"{what}: {got!r} is not an int8 value (-128 to 127)",
                           f"{what}：{got!r} 不是 int8 值（-128 到 127）"))
            kinds_wrong.add(kind)
        elif q != truth:
            effect = (L("lets through pixels whose value is below the threshold", "会放过值低于阈值的像素")
                      if q < truth else L("drops pixels whose value reaches the threshold", "会丢掉值达到阈值的像素"))
            wrong.append(L(f"{what}: q = {q} {effect}", f"{what}：q = {q} {effect}"))
            kinds_wrong.add(kind)
    if wrong:
        hint = L("A pixel passes when (q - zp) * scale >= value. Find the smallest such q; rounding to the "
                 "nearest level or down can pick a level below the value, and a value exactly on a level is "
                 "reached by that level.",
                 "当 (q - zp) * scale >= value 时，像素通过。找出满足它的最小 q；四舍五入到最近的级别或向下取整，"
                 "都可能选中低于该值的级别；而正好落在某个级别上的值，由这个级别本身达到。")
        if kinds_wrong & {"above", "below"}:
            hint += L(" A q outside -128..127 does not fit an int8_t: clamp it at the bottom, and raise "
                      "ValueError when even 127 is below the value (no pixel could ever pass).",
                      "超出 -128..127 的 q 放不进 int8_t：在下端截断它；连 127 都低于该值时"
                      "（任何像素都不可能通过），抛出 ValueError。")
        raise _Fail(L(f"{len(wrong)} of {len(cases)} made-up thresholds are wrong:",
                      f"{len(cases)} 个虚构的阈值中有 {len(wrong)} 个算错了："), hint, _shown(wrong))


def _mask_hint() -> str:
    return L("Compare the raw int8 map with one int8 q, computed once by your int8_threshold; no float copy "
             "of the map. When your int8_threshold raises ValueError, no pixel passes.",
             "用你的 int8_threshold 算一次 q，再把原始的 int8 图与这一个 int8 q 比较；不要把图拷贝成 float。"
             "你的 int8_threshold 抛出 ValueError 时，没有任何像素通过。")


@contextlib.contextmanager
def _counted_calls(fn: Callable[..., Any], target: Callable[..., Any], calls: List[Optional[int]],
                   shift: int) -> Iterator[None]:
    """While the block runs, the global name, closure cell or default argument through which
    ``fn`` reads ``target`` (the student's own int8_threshold) goes through a stand-in that
    notes each q it returns into ``calls`` (None when it raised ValueError), after moving it
    ``shift`` int8 levels (kept in -128..127): the mask must follow the q it was given."""
    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            q = target(*args, **kwargs)
        except ValueError:
            calls.append(None)
            raise
        if isinstance(q, (int, np.integer)) and not isinstance(q, bool) and -128 <= int(q) <= 127:
            moved = int(q) + shift
            q = moved if -128 <= moved <= 127 else int(q) - shift
        calls.append(int(q) if isinstance(q, (int, np.integer)) else None)
        return q
    scope = getattr(fn, "__globals__", None) or {}
    names = [n for n in getattr(getattr(fn, "__code__", None), "co_names", ()) if scope.get(n) is target]
    cells = [c for c in (getattr(fn, "__closure__", None) or ()) if _cell_holds(c, target)]
    defaults = getattr(fn, "__defaults__", None)
    kwdefaults = getattr(fn, "__kwdefaults__", None)
    for n in names:
        scope[n] = counted
    for c in cells:
        c.cell_contents = counted
    if defaults:
        fn.__defaults__ = tuple(counted if d is target else d for d in defaults)
    if kwdefaults:
        fn.__kwdefaults__ = {k: counted if d is target else d for k, d in kwdefaults.items()}
    try:
        yield
    finally:
        for n in names:
            scope[n] = target
        for c in cells:
            c.cell_contents = target
        if defaults:
            fn.__defaults__ = defaults
        if kwdefaults:
            fn.__kwdefaults__ = kwdefaults


def _cell_holds(cell: Any, target: Any) -> bool:
    try:
        return cell.cell_contents is target
    except ValueError:          # an empty cell
        return False


def _check_masks(text_mask: Callable[..., Any], int8_threshold: Callable[..., Any],
                 cases: List[Tuple[float, int, float, str]], rng: np.random.Generator) -> int:
    """The masks of made-up int8 maps: right pixel by pixel, and allocating less than
    MASK_BYTES_PER_PIXEL per pixel at once.  Returns the most bytes per pixel seen."""
    most = 0.0
    picked = [c for c in cases if c[3] not in ("between", "level")][:3] + \
        [c for c in cases if c[3] == "between"][:6]
    # the last two maps are one row and one column: a loop that dequantises a row (or a column) at a
    # time then copies the whole map at once
    long = int(rng.integers(20000, 40001))
    shapes = [(int(rng.integers(200, 481)), int(rng.integers(200, 481))) for _ in picked[:-2]] + \
        [(1, long), (long, 1)]
    for (value, zp, scale, kind), shape in zip(picked, shapes):
        out = rng.integers(-128, 128, size=shape).astype(np.int8)
        what = L(f"text_mask(<int8 map {shape[0]}x{shape[1]}>, zp={zp}, scale={scale:.6g}, value={value:.6g})",
                 f"text_mask(<{shape[0]}x{shape[1]} 的 int8 图>, zp={zp}, scale={scale:.6g}, value={value:.6g})")
        calls: List[Optional[int]] = []
        try:
            with _counted_calls(text_mask, int8_threshold, calls, int(rng.choice([-2, -1, 1, 2]))):
                got, peak = _traced_call(text_mask, (out.copy(), zp, scale, value))
        except _Fail:
            raise
        except _LibraryCalled as exc:
            raise _library_error(exc, what)
        except NotImplementedError as exc:
            raise _student_error(exc, what, _todo("text_mask"))
        except Exception as exc:
            raise _student_error(exc, what, _mask_hint())
        if got is None:
            raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                            L("return a bool array of the map's shape.", "请返回一个与图形状相同的 bool 数组。"))
        mask = np.asarray(got)
        if mask.shape != out.shape:
            raise _Fail(L(f"{what} returned an array of shape {mask.shape}, not the map's {out.shape}.",
                          f"{what} 返回的数组形状是 {mask.shape}，不是图的形状 {out.shape}。"), _mask_hint())
        per_pixel = peak / out.size
        most = max(most, per_pixel)
        if per_pixel >= MASK_BYTES_PER_PIXEL:
            raise _Fail(L(f"{what} allocated {per_pixel:.1f} bytes per pixel of the map at once (a float32 copy "
                          f"would be {MASK_BYTES_PER_PIXEL}). The call needs a copy of the map's size.",
                          f"{what} 同时分配了图中每像素 {per_pixel:.1f} 字节的内存（float32 拷贝是 "
                          f"{MASK_BYTES_PER_PIXEL} 字节）。这次调用用到了一份与图一样大的拷贝。"),
                        _mask_hint(), [L(f"limit: less than {MASK_BYTES_PER_PIXEL} bytes per pixel (the bool mask "
                                         "itself is 1)",
                                         f"上限：每像素少于 {MASK_BYTES_PER_PIXEL} 字节（bool 掩码本身占 1 字节）")])
        if not calls:
            raise _Fail(L(f"{what}: text_mask never called your int8_threshold.",
                          f"{what}：text_mask 从未调用你的 int8_threshold。"),
                        L("Turn the threshold into q with your int8_threshold, once per call, then compare the "
                          "raw bytes with q.",
                          "每次调用时，用你的 int8_threshold 把阈值换算成 q（只算一次），再用原始字节与 q 比较。"))
        given = calls[-1]
        truth = np.zeros(out.shape, bool) if given is None else out >= given
        bad = int(np.count_nonzero(mask.astype(bool) != truth))
        if bad:
            levels = (_cases.INT8 - zp) * scale >= value
            if np.array_equal(mask.astype(bool), levels[out.astype(np.int16) + 128]):
                raise _Fail(L(f"{what}: your mask does not follow the q your int8_threshold returned.",
                              f"{what}：你的掩码没有按你的 int8_threshold 返回的 q 来计算。"),
                            _mask_hint())
            raise _Fail(L(f"{what}: {bad:,} of {out.size:,} pixels wrong (case: the value is {_kind_text(kind)}).",
                          f"{what}：{out.size:,} 个像素中有 {bad:,} 个错误（情形：这个值{_kind_text(kind)}）。"),
                        _mask_hint())
    return len(picked)


def check_int8_threshold(int8_threshold: Callable[[float, int, float], int],
                         text_mask: Callable[..., Any]) -> CheckResult:
    """Exercise 2: ``int8_threshold(value, zp, scale) -> q``: the smallest int8 value q
    (-128 to 127) whose dequantised value (q - zp) * scale is at least ``value``; ValueError
    when no int8 value reaches it.  ``text_mask(out, zp, scale, value)``: the bool mask of the
    pixels of the int8 map ``out`` that reach ``value``, computed in the int8 domain.

    The check draws 22 made-up triples at every call: values between two int8 levels with
    the fraction below and above one half, two exactly on a level (a power-of-two scale, so
    that floating point cannot blur it), zero points from -128 to 100, values above the
    largest and below the smallest value the output can hold.  Every q must be an exact int.
    Then it calls text_mask on nine made-up int8 maps (three with values out of range; one of
    a single row and one of a single column):
    text_mask must call your int8_threshold (through a global name, a closure or a default
    argument), every pixel must be right for the q it returned, and the call must allocate
    less than MASK_BYTES_PER_PIXEL bytes per pixel at once (tracemalloc; a float32 copy of the
    map takes 4; a call that stops, starts or resets tracemalloc fails).
    rknnlab.pipeline.int8_threshold raises while the check runs.
    A failure says what a wrong q does to the map, never the q."""
    def body() -> CheckResult:
        for fn, name in ((int8_threshold, "int8_threshold"), (text_mask, "text_mask")):
            _require_function(fn, L(f"pass the functions themselves: check_int8_threshold(int8_threshold, "
                                    f"text_mask) ({name} is not a function)",
                                    f"请传入函数本身：check_int8_threshold(int8_threshold, text_mask)"
                                    f"（{name} 不是函数）"))
        _refuse_library_function(int8_threshold, "int8_threshold")
        rng = np.random.default_rng(_fresh_seed())
        cases = _cases.made_up_thresholds(rng)
        with _library_refused("int8_threshold"):
            _check_threshold_values(int8_threshold, cases)
            n_maps = _check_masks(text_mask, int8_threshold, cases, rng)
        n = {kind: sum(k == kind for *_, k in cases) for kind in ("between", "level", "above", "below")}
        between, level, above, below = n["between"], n["level"], n["above"], n["below"]
        return CheckResult(EX_THRESH, "passed",
                           L(f"All {len(cases)} made-up thresholds right, and {n_maps} masks right pixel by pixel "
                             "without a float copy of the map: out >= q keeps exactly the pixels that reach the "
                             "value.",
                             f"{len(cases)} 个虚构的阈值全部正确，{n_maps} 个掩码逐像素正确，而且没有把图拷贝成 "
                             "float：out >= q 恰好保留了达到该值的像素。"),
                           [L(f"{between} between two int8 levels, {level} exactly on a level, {above} above the "
                              f"largest value, {below} below the smallest",
                              f"{between} 个落在两个 int8 级别之间，{level} 个正好落在某个级别上，{above} 个高于"
                              f"最大值，{below} 个低于最小值")])

    return _LAB.run(EX_THRESH, body)


# =========================================================================== exercise 5: workers
def _workers_hint() -> str:
    return L("Look at the worker counts one at a time, fewest first. A count meets the goal when every "
             "run of it reaches the target rate and keeps its p95 latency within the budget; a run exactly "
             "at the target or at the budget meets it.",
             "从最少的数量开始，逐个查看工作线程数。一个数量达到目标，是指它的每一次运行都达到目标帧率，"
             "并且 p95 延迟不超出预算；正好等于目标或预算的运行也算达到。")


def _goal(target: float, budget: float) -> str:
    return L(f"goal: >= {target:g} frames/s and p95 <= {budget:g} ms",
             f"目标：>= {target:g} 帧/秒，且 p95 <= {budget:g} ms")


def check_workers(choose_workers: Callable[[Any, float, float], Optional[int]]) -> CheckResult:
    """Exercise 5 ★: ``choose_workers(table, target_fps, p95_budget_ms)``: the fewest workers
    whose every measured run reaches ``target_fps`` with its p95 latency at most
    ``p95_budget_ms``; None when no count meets both.

    ``table`` has one row per run: workers, run, fps, mean_ms, p95_ms (repeated runs of each
    count, shuffled).  The check makes twelve tables at every call, never the lab's numbers,
    each built so that one plausible wrong rule answers differently: ties (several counts
    meet the goal), the fastest count, latency over budget, a mean within the budget but a
    p95 over it, a count beyond the NPU's cores that alone meets it (double buffering), a
    count that meets the rate in most runs but not all, a count whose p95 is over the budget in
    one run of three (the first, or another), a count whose worst run sits exactly
    on the goal, and no count at all.  Every answer must be exact.  A failure shows the goal
    and the worst run of the count you chose, never the right count."""
    def body() -> CheckResult:
        _require_function(choose_workers, "check_workers(choose_workers)")
        rng = np.random.default_rng(_fresh_seed())
        tables = _cases.made_up_tables(rng)
        wrong: List[str] = []
        for n, (kind, table, target, budget, cores) in enumerate(tables):
            goal = _goal(target, budget)
            what = L(f"table {n + 1} ({goal})", f"表 {n + 1}（{goal}）")
            truth = _cases.choose_workers(table, target, budget)
            got = _call(choose_workers, (table.copy(), target, budget), f"choose_workers(<{what}>)",
                        "choose_workers", _workers_hint())
            value = int(got) if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else None
            worst = _cases.worst_runs(table)
            if got is not None and value is None:
                wrong.append(L(f"{what}: returned {got!r}, not a number of workers or None",
                               f"{what}：返回了 {got!r}，既不是工作线程数，也不是 None"))
            elif value == truth:
                continue
            elif value is None:
                wrong.append(L(f"{what}: you returned None; some count meets both goals in every run",
                               f"{what}：你返回了 None；有某个数量在每次运行中都同时满足两个目标"))
            elif value not in worst:
                wrong.append(L(f"{what}: you chose {value}, a count the table never measured",
                               f"{what}：你选了 {value}，表中没有测量过这个数量"))
            else:
                fps, p95 = worst[value]
                meets = fps >= target and p95 <= budget
                wrong.append(L(f"{what}: you chose {value}; with {value} workers the worst run gives {fps:g} "
                               f"frames/s and p95 {p95:g} ms" + ("; a smaller count also meets the goal" if meets
                                                                  else ""),
                               f"{what}：你选了 {value}；{value} 个工作线程时，最差的那次运行是 {fps:g} 帧/秒，"
                               f"p95 为 {p95:g} ms" + ("；更少的数量也能达到目标" if meets else "")))
        if wrong:
            raise _Fail(L(f"{len(wrong)} of {len(tables)} made-up tables get a wrong choice:",
                          f"{len(tables)} 张虚构的表中有 {len(wrong)} 张选错了："),
                        _workers_hint() + L(" Return None when no count meets both goals.",
                                            "没有哪个数量同时满足两个目标时，返回 None。"), _shown(wrong))
        nones = sum(_cases.choose_workers(t, f, b) is None for _, t, f, b, _ in tables)
        return CheckResult(EX_WORKERS, "passed",
                           L(f"All {len(tables)} made-up tables right: the fewest workers that meet the rate and "
                             "the p95 budget in every run (at the goal exactly counts), and None when none does.",
                             f"{len(tables)} 张虚构的表全部正确：选出了在每次运行中都达到帧率、且 p95 不超出预算的"
                             "最少工作线程数（正好等于目标也算），没有哪个数量达到时返回 None。"),
                           [L(f"{len(tables)} tables, {nones} with no count that meets both goals",
                              f"{len(tables)} 张表，其中 {nones} 张没有任何数量同时满足两个目标")])

    return _LAB.run(EX_WORKERS, body)


# =========================================================================== exercises 3 and 4: the loop
#: frames per check run (the simulator runs the 480 x 480 model in a few hundred ms)
LOOP_FRAMES = 4

#: exercise 4: the most bytes the student's own code may allocate inside one frame (Python and
#: numpy, by tracemalloc; the runtime's and rknnlab's stages set aside): well below the 230,400 B
#: of one output map, far below the 691,200 B of one letterboxed input
FRAME_HEAP_LIMIT = 96 * 1024


def _model_file_here(rt: Any) -> str:
    from ._core import _model_file
    soc = getattr(rt, "soc", None) or "rk3588"
    return _model_file(PIPE_MODEL, {"rk3566": "rk3568"}.get(soc, soc))


def _loop_result(fn: Callable[..., Any], args: Tuple[Any, ...], what: str, name: str, hint: str,
                 n_frames: int) -> List[Any]:
    try:
        got = fn(*args)
    except _LibraryCalled:
        raise
    except NotImplementedError as exc:
        raise _student_error(exc, what, _todo(name))
    except RknnError as exc:
        raise _Fail(L(f"{what}: the runtime refused: {exc.function} returned {exc.code} ({exc.name}): {exc.detail}",
                      f"{what}：运行时拒绝了调用：{exc.function} 返回 {exc.code}（{exc.name}）：{exc.detail}"),
                    hint)
    except _Fail:
        raise
    except Exception as exc:
        raise _student_error(exc, what, hint)
    if got is None:
        raise _not_done(L(f"{what} returned None.", f"{what} 返回了 None。"),
                        L("return a list with the boxes of every frame, in order.",
                          "请返回一个列表，按顺序包含每一帧的框。"))
    try:
        got = list(got)
    except TypeError:
        raise _Fail(L(f"{what} returned {type(got).__name__}, not a list.",
                      f"{what} 返回了 {type(got).__name__}，不是列表。"),
                    L("return one list of boxes per frame.", "每一帧返回一个框的列表。"))
    if len(got) != n_frames:
        raise _Fail(L(f"{what} returned {len(got)} lists of boxes for {n_frames} frames.",
                      f"{what} 为 {n_frames} 帧返回了 {len(got)} 个框的列表。"),
                    L("return one list of boxes per frame, in the order of the frames.",
                      "每一帧返回一个框的列表，按帧的顺序排列。"))
    keys = [_cases.box_key(b) for b in got]
    if any(k is None for k in keys):
        raise _Fail(L(f"{what}: a frame's result is not a list of boxes.", f"{what}：有一帧的结果不是框的列表。"),
                    L("append what pipeline.find_boxes returns for each frame.",
                      "对每一帧，把 pipeline.find_boxes 返回的结果追加到列表中。"))
    return keys


def _count_boxes(key: Any) -> str:
    return L(f"{len(key)} box{'es' if len(key) != 1 else ''}", f"{len(key)} 个框")


def _frame_boxes(k: int, got: Any, ref: Any) -> str:
    """One wrong frame (k from 0): how many boxes the student's loop and the reference found."""
    line = L(f"frame {k + 1}: your {_count_boxes(got)}, the reference's {_count_boxes(ref)}",
             f"第 {k + 1} 帧：你的 {_count_boxes(got)}，参考运行的 {_count_boxes(ref)}")
    return line + (L(" (other boxes)", "（框不同）") if len(got) == len(ref) else "")


def _reference(rt: Any, frames: Sequence[Any]) -> List[Any]:
    """The check's own boxes of ``frames``; refuses a reference with no box at all (the
    frames are drawn from shots the detector finds text in)."""
    ref = _cases.reference_boxes(rt, _model_file_here(rt), frames)
    if not any(ref):
        raise _Fail(L("the check's own run found no box in any frame, so it cannot judge your loop.",
                      "检查自己的运行在所有帧中都没有找到框，所以无法判断你的循环。"),
                    L("Restart the kernel and run the notebook from the top (was rknnlab's find_boxes or "
                      "letterbox replaced?).",
                      "重启内核，从头运行笔记本（rknnlab 的 find_boxes 或 letterbox 是不是被替换了？）。"))
    return ref


@contextlib.contextmanager
def _find_boxes_set_aside(heap: "_cases.StudentHeap") -> Iterator[None]:
    """While the block runs, rknnlab.pipeline.find_boxes is the original (bound at import), with
    its own allocations set aside from the student's heap."""
    package = importlib.import_module("rknnlab.pipeline")
    module = importlib.import_module("rknnlab.pipeline.postprocess")
    saved = (module.find_boxes, package.__dict__.get("find_boxes"))
    real = _cases._find_boxes

    def find_boxes(*args: Any, **kwargs: Any) -> Any:
        heap.enter()
        try:
            return real(*args, **kwargs)
        finally:
            heap.leave(end_frame=True)
    module.find_boxes = find_boxes
    package.find_boxes = find_boxes
    try:
        yield
    finally:
        module.find_boxes = saved[0]
        if saved[1] is None:
            package.__dict__.pop("find_boxes", None)
        else:
            package.find_boxes = saved[1]


def compare_frames(detect: Callable[..., Any], n_frames: int = LOOP_FRAMES, seed: int = 0) -> str:
    """Run ``detect(rt, frames)`` (or ``detect(rt, frames, letterbox)``) on ``n_frames`` camera
    frames of a seeded choice: one line per frame with the boxes it found, and whether they are
    the boxes a plain run of the same frame finds (the check's reference).  With a letterbox
    argument, each line also says whether the letterbox got a buffer an earlier frame used.
    An error in ``detect`` becomes one line: this never raises."""
    import inspect
    from .. import open_runtime
    rt = open_runtime()
    counting = _cases.Counting(rt)
    watched = _cases.WatchedLetterbox()
    with_letterbox = callable(detect) and len(inspect.signature(detect).parameters) >= 3
    try:
        frames = _cases.pick_frames(np.random.default_rng(seed), n_frames)
        args = (counting, frames, watched) if with_letterbox else (counting, frames)
        try:
            got = [_cases.box_key(b) for b in detect(*args)]
        except NotImplementedError:
            return L("not done yet: the function still raises NotImplementedError",
                     "尚未完成：函数仍然抛出 NotImplementedError")
        except Exception as exc:
            name = getattr(detect, "__name__", "detect")
            return L(f"{name} raised {type(exc).__name__}: {exc}", f"{name} 抛出了 {type(exc).__name__}：{exc}")
        finally:
            counting.cleanup()
        calls = list(watched.calls)
        watched.release()
        ref = _cases.reference_boxes(rt, _model_file_here(rt), frames)
    finally:
        watched.release()
        counting.cleanup()
        rt.close()
    lines = []
    for k, (g, r) in enumerate(zip(got, ref)):
        verdict = L("the same boxes", "框相同") if g == r else (
            L("the boxes of frame 1", "第 1 帧的框") if k and g == got[0] == ref[0] else L("other boxes", "框不同"))
        line = L(f"frame {k + 1}: yours {_count_boxes(g or ()):>9}, reference {_count_boxes(r):>9}: {verdict}",
                 f"第 {k + 1} 帧：你的 {_count_boxes(g or ()):>5}，参考运行 {_count_boxes(r):>5}：{verdict}")
        if with_letterbox and k and k < len(calls):
            line += L("; letterbox buffer " + ("reused" if calls[k][1] else "new"),
                      "；letterbox 缓冲区：" + ("复用" if calls[k][1] else "新的"))
        lines.append(line)
    return "\n".join(lines)


def measure_workers(counts: Sequence[int] = (1, 2, 3), repeats: int = 3, n_frames: int = 24) -> Any:
    """Measure the pipeline with each number of workers, ``repeats`` runs each: a table with
    one row per run (workers, run, fps, mean_ms, p95_ms), the runs in the order they were
    made.  On the simulator the runs replay one real output (rknnlab.pipeline.run with
    values=False: rknnlab.sim.values_replayed), so they time the modeled NPU and this host's
    CPU stages; the boxes are not the frames'."""
    import pandas as pd
    from ..pipeline import distinct_frames, run
    runs = repeats * len(counts)
    print(L(f"{runs} runs of {n_frames} frames: about 5-10 s", f"{runs} 次运行，每次 {n_frames} 帧：约 5-10 s"),
          flush=True)
    frames = distinct_frames(4)
    run(frames, workers=max(counts), n_frames=n_frames, values=False)    # a warm-up, not kept
    rows = []
    source = ""
    for r in range(repeats):
        for w in counts:
            res = run(frames, workers=w, n_frames=n_frames, values=False)
            lat = res.latencies_ms
            rows.append({"workers": w, "run": r + 1, "fps": round(float(res.fps), 1),
                         "mean_ms": round(float(np.mean(lat)), 1), "p95_ms": round(float(res.latency["p95_ms"]), 1)})
            source = res.source.split(" — ")[0]
    table = pd.DataFrame(rows, columns=list(_cases.COLUMNS)).sort_values(["workers", "run"]).reset_index(drop=True)
    table.attrs["source"] = L(f"{source}: {repeats} runs of {n_frames} frames per worker count",
                              f"{source}：每个工作线程数运行 {repeats} 次，每次 {n_frames} 帧")
    return table


def try_choice(choose_workers: Callable[..., Any], table: Any, target_fps: float, p95_budget_ms: float) -> str:
    """One line: what ``choose_workers`` answers for the lab's own table (never raises)."""
    if table is None:
        return L("no measured table", "没有测量得到的表")
    try:
        got = choose_workers(table.copy(), target_fps, p95_budget_ms)
    except NotImplementedError:
        return L("not done yet: choose_workers still raises NotImplementedError",
                 "尚未完成：choose_workers 仍然抛出 NotImplementedError")
    except Exception as exc:
        return L(f"choose_workers raised {type(exc).__name__}: {exc}",
                 f"choose_workers 抛出了 {type(exc).__name__}：{exc}")
    goal = _goal(target_fps, p95_budget_ms)
    if got is None:
        return L(f"{goal}: no count meets both", f"{goal}：没有哪个数量同时满足两者")
    return L(f"{goal}: {got} worker{'s' if got != 1 else ''}", f"{goal}：{got} 个工作线程")


def _sync_hint() -> str:
    return L("The NPU writes the output mem during rknn_run. On a context made with this flag, when does the "
             "CPU's view of a cacheable mem take the NPU's new bytes?",
             "NPU 在 rknn_run 期间写入输出 mem。在用这个标志创建的上下文上，CPU 看到的可缓存 mem，"
             "什么时候才会换成 NPU 写入的新字节？")


def _gap_lines(gaps: Sequence[str], runs: int, ends: bool) -> List[str]:
    """One line per missing sync; the loop's two ends (one sync at either is enough; ``ends``: the
    last gap is there) on two lines, since they protect different reads (frame 1's and the last
    frame's)."""
    lines = [L(f"{gap}: no sync of the output mem", f"{gap}：没有同步输出 mem")
             for gap in (gaps[:-1] if ends else gaps)]
    if ends:
        lines += [L(f"after frame {runs}'s run: no sync of the output mem", f"第 {runs} 帧运行之后：没有同步输出 mem"),
                  L("before frame 1's run: no sync either (one of these two places is enough)",
                    "第 1 帧运行之前：也没有同步（这两处有一处就够了）")]
    return lines


def _sync_before_note() -> str:
    return L("Your loop syncs the output before rknn_run. Here that shows the fresh map (the sync drops "
             "the CPU's cached lines and the NPU writes afterwards), but on a board the CPU may read "
             "lines in again between the sync and the run (speculative reads): the safe place is after "
             "the run, before the read.",
             "你的循环在 rknn_run 之前同步输出。在这里这样能看到新的图（同步丢弃 CPU 的缓存行，之后 NPU 才写入），"
             "但在开发板上，CPU 可能在同步和运行之间又把缓存行读进来（推测读取）：稳妥的位置是运行之后、读取之前。")


def _non_cacheable_note() -> str:
    return L("Your output mem is non-cacheable: right, but every CPU read of the map is then uncached "
             "(much slower, chapter 3). Rockchip's rknpu driver refuses its sync ioctl for a buffer "
             "made without its cacheable flag; what rknn_mem_sync returns then is not documented "
             "(A11). The sync is not needed: drop it for that mem.",
             "你的输出 mem 不可缓存：这是对的，但这样 CPU 对这张图的每次读取都不经过缓存（慢得多，第 3 章）。"
             "对没有带可缓存标志创建的缓冲区，Rockchip 的 rknpu 驱动会拒绝它的同步 ioctl；"
             "这时 rknn_mem_sync 返回什么，没有文档说明（A11）。这里不需要同步：对这个 mem 去掉它。")


def _no_flag_note() -> str:
    return L("Your context is made without RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE: right, the runtime then "
             "does the output's cache maintenance itself after each run.",
             "你的上下文创建时没有带 RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE：这是对的，这时运行时会在每次运行"
             "之后自己对输出做缓存维护。")


def check_synced_loop(detect: Callable[[Any, Sequence[Any]], Sequence[Any]]) -> CheckResult:
    """Exercise 3: ``detect(rt, frames) -> [boxes of each frame]``: the zero-copy loop of the
    lab, fixed so that each frame's boxes are that frame's.

    The check draws LOOP_FRAMES camera frames at every call, from shots of different
    sources in turn (so consecutive frames have different boxes), runs your function on them
    with a runtime that counts its calls, and runs the same frames itself on a plain context
    (flag 0, rknn_inputs_set, rknn_outputs_get: nothing cached) through letterbox and
    find_boxes bound at import.  Your loop must run the model once per frame, read the output
    from its bound mem (no rknn_outputs_get), use one context and at most two output mems for
    the whole call, open no runtime of its own (rknnlab.open_runtime raises while it runs),
    and every frame's boxes must equal the reference's.  On a context made with
    RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE and a cacheable output mem, a FROM_DEVICE or
    BIDIRECTIONAL sync of that mem must come between every two runs: the simulator cannot see
    the CPU's reads (A60), so the check reads the order of your calls.  A failure says how
    many frames differ and how."""
    def body() -> CheckResult:
        _require_function(detect, "check_synced_loop(detect)")
        from .. import open_runtime
        rt = open_runtime()
        counting = _cases.Counting(rt)
        try:
            frames = _cases.pick_frames(np.random.default_rng(_fresh_seed()), LOOP_FRAMES)
            ref = _reference(rt, frames)
            what = L(f"detect(rt, <{LOOP_FRAMES} frames>)", f"detect(rt, <{LOOP_FRAMES} 帧>)")
            try:
                with _library_refused("open_runtime"):
                    got = _loop_result(detect, (counting, frames), what, "detect", _sync_hint(), LOOP_FRAMES)
            except _LibraryCalled as exc:
                raise _library_error(exc, what)
        finally:
            counting.cleanup()
            rt.close()
        if counting.gets:
            raise _Fail(L(f"your loop reads the output with rknn_outputs_get ({counting.gets} calls): that is the "
                          "general API, not the zero-copy loop to fix.",
                          f"你的循环用 rknn_outputs_get 读取输出（{counting.gets} 次调用）：这是通用 API，"
                          "不是要修的零拷贝循环。"),
                        L("Keep bind_io's bound mems and read the map where the NPU writes it. ",
                          "保留 bind_io 绑定的 mem，在 NPU 写入的地方读取这张图。") + _sync_hint())
        if counting.contexts_after_first_run or counting.mems_after_first_run:
            contexts, mems = counting.contexts_after_first_run, counting.mems_after_first_run
            raise _Fail(L(f"your loop made {contexts} contexts and {mems} mems after its first rknn_run: a fresh "
                          "mem hides the stale cache instead of fixing it.",
                          f"你的循环在第一次 rknn_run 之后创建了 {contexts} 个上下文和 {mems} 个 mem："
                          "新的 mem 只是掩盖了过期的缓存，而没有修好它。"),
                        _keep_one_context() + _sync_hint())
        if counting.contexts_made > 1 or len(counting.output_mems) > 2:
            contexts, mems = counting.contexts_made, len(counting.output_mems)
            raise _Fail(L(f"your loop made {contexts} contexts and bound {mems} output mems for {LOOP_FRAMES} "
                          "frames: a fresh mem hides the stale cache instead of fixing it (frame 100 would be "
                          "stale again).",
                          f"你的循环为 {LOOP_FRAMES} 帧创建了 {contexts} 个上下文，绑定了 {mems} 个输出 mem："
                          "新的 mem 只是掩盖了过期的缓存，而没有修好它（到第 100 帧又会过期）。"),
                        _keep_one_context() + _sync_hint())
        if counting.runs != LOOP_FRAMES:
            raise _Fail(L(f"your loop ran the model {counting.runs} times for {LOOP_FRAMES} frames: one run per "
                          "frame.",
                          f"你的循环为 {LOOP_FRAMES} 帧运行了 {counting.runs} 次模型：应该每帧运行一次。"),
                        L("Run each frame once and read that run's output. ",
                          "每帧运行一次，并读取这次运行的输出。") + _sync_hint())
        from ..rknn import abi
        flagged = any(f & abi.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE for f in counting.init_flags)
        unsynced = counting.unsynced_gaps() if flagged and counting.cacheable_outputs else []
        if unsynced:
            n = len(unsynced)
            places = L("1 place" if n == 1 else f"{n} places", f"{n} 处")
            raise _Fail(L(f"your loop skips the output sync in {places}: a frame read there may "
                          "show the lines the CPU cached from an earlier frame (on a board; the simulator cannot "
                          "see the CPU's reads, A60).",
                          f"你的循环有 {places}漏掉了输出同步：在那里读取的帧，可能显示 CPU 从更早的帧缓存下来的"
                          "缓存行（在开发板上；模拟器看不到 CPU 的读取，A60）。"),
                        _sync_hint(), _gap_lines(unsynced, counting.runs, counting.ends_unsynced))
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        details = [_frame_boxes(k, got[k], ref[k]) for k in wrong]
        if wrong and len(set(got)) == 1 and len(set(ref)) > 1:
            first = L("the first frame's boxes", "第一帧的框") if got[0] == ref[0] else L("one set of boxes", "同一组框")
            sets = len(set(ref))
            raise _Fail(L(f"the boxes stop changing: all {LOOP_FRAMES} frames show {first}, while the reference run "
                          f"of the same frames finds {sets} different sets: the CPU never sees a new map.",
                          f"框不再变化：所有 {LOOP_FRAMES} 帧都显示{first}，而同样这些帧的参考运行找到了 {sets} "
                          "组不同的框：CPU 从来没有看到新的图。"),
                        _sync_hint(), details)
        late = [k for k in wrong if k and got[k] == ref[k - 1]]
        if late:
            raise _Fail(L(f"{len(wrong)} of {LOOP_FRAMES} frames are wrong; {len(late)} of them show the boxes of "
                          "the frame before: your loop reads outputs one frame late.",
                          f"{LOOP_FRAMES} 帧中有 {len(wrong)} 帧错误；其中 {len(late)} 帧显示的是前一帧的框："
                          "你的循环读取输出晚了一帧。"),
                        _sync_hint(), details)
        if wrong:
            raise _Fail(L(f"{len(wrong)} of {LOOP_FRAMES} frames are wrong: their boxes differ from the reference "
                          "run of the same frames.",
                          f"{LOOP_FRAMES} 帧中有 {len(wrong)} 帧错误：它们的框与同样这些帧的参考运行不同。"),
                        L("Keep the lab's letterbox, model and find_boxes with its default thresholds; change "
                          "only what the CPU reads, and when. ",
                          "保留实验的 letterbox、模型和使用默认阈值的 find_boxes；只改变 CPU 读取什么、"
                          "什么时候读取。") + _sync_hint(), details)
        notes = []
        if counting.synced_before_run_only:
            notes.append(_sync_before_note())
        if counting.non_cacheable:
            notes.append(_non_cacheable_note())
        if counting.init_flags and not flagged:
            notes.append(_no_flag_note())
        indices, boxes = [str(f.index) for f in frames], sum(len(r) for r in ref)
        return CheckResult(EX_SYNC, "passed",
                           L(f"Every frame's boxes are its own, for {LOOP_FRAMES} frames the check drew, with one "
                             "run per frame: the CPU reads what the NPU wrote for that frame.",
                             f"在检查抽取的 {LOOP_FRAMES} 帧上，每一帧的框都是它自己的，每帧运行一次："
                             "CPU 读到的是 NPU 为这一帧写入的内容。"),
                           [L(f"frames {', '.join(indices)} of the camera; {boxes} boxes in all",
                              f"摄像头的第 {'、'.join(indices)} 帧；共 {boxes} 个框")]
                           + [L(f"Note: {n}", f"说明：{n}") for n in notes])

    return _LAB.run(EX_SYNC, body)


def _keep_one_context() -> str:
    return L("Keep one context and bind_io's mems, made once. ", "只保留一个上下文和 bind_io 的 mem，都只创建一次。")


def _alloc_hint() -> str:
    return L("Make the buffer the letterbox writes into once, before the loop, sized for the model's input, "
             "and hand it to every frame; make the output buffer, the inputs and every context or mem before "
             "the loop too. ",
             "在循环之前，按模型输入的大小，一次性创建 letterbox 写入的缓冲区，并把它交给每一帧；"
             "输出缓冲区、输入以及所有上下文和 mem，也都在循环之前创建。") + _reuse_rule()


def check_allocation_once(detect_once: Callable[[Any, Sequence[Any], Callable[..., Any]], Sequence[Any]]) -> CheckResult:
    """Exercise 4: ``detect_once(rt, frames, letterbox) -> [boxes of each frame]``: the
    per-frame loop of the lab with its allocation moved out of the loop.

    The check draws LOOP_FRAMES camera frames at every call and measures the whole frame:
    the contexts and mems made after the first rknn_run, the rknn_outputs_get calls with
    is_prealloc = 0 (the runtime allocates their buffers), the bytes your own Python code
    allocates inside each frame after the first (tracemalloc; the runtime's, the letterbox's
    and find_boxes' own allocations set aside; limit FRAME_HEAP_LIMIT), and the buffer each
    letterbox call is handed (by data pointer; every buffer stays referenced until the check
    ends, so a new one cannot take an old one's address): from the third frame on it must be
    one an earlier frame used (a pool of two made before the loop passes).  One context for
    the whole loop (made before or after the first run).  A frame ends when its find_boxes
    returns, so an allocation at the top of a frame counts in that frame.  Calls of
    tracemalloc's start, stop, reset_peak or clear_traces fail.  Every frame's boxes must equal
    the reference run's (exercise 3).

    Deliberately not measured: memory from outside Python's heap, such as an mmap.mmap or a
    libc malloc through ctypes per frame.  tracemalloc cannot see it, and the malloc heap of a
    shared kernel is too noisy to judge one frame by; grading re-runs the lab in a fresh kernel.
    A known limit: the heap is read at the calls the check sees (the runtime, the letterbox,
    find_boxes), so a buffer freed after one frame's find_boxes and made again before the next
    frame's first such call shows no rise in that frame; it shows in the first frame that makes
    one while no older one is freed."""
    def body() -> CheckResult:
        _require_function(detect_once, "check_allocation_once(detect_once)")
        from .. import open_runtime
        rt = open_runtime()
        heap = _cases.StudentHeap()
        counting = _cases.Counting(rt, heap)
        watched = _cases.WatchedLetterbox(heap=heap)
        try:
            frames = _cases.pick_frames(np.random.default_rng(_fresh_seed()), LOOP_FRAMES)
            ref = _reference(rt, frames)
            heap.start()
            try:
                with _find_boxes_set_aside(heap), _tracemalloc_watched() as touched:
                    got = _loop_result(detect_once, (counting, frames, watched),
                                       L(f"detect_once(rt, <{LOOP_FRAMES} frames>, letterbox)",
                                         f"detect_once(rt, <{LOOP_FRAMES} 帧>, letterbox)"),
                                       "detect_once", _alloc_hint(), LOOP_FRAMES)
            finally:
                heap.stop()
            calls = list(watched.calls)
        finally:
            watched.release()
            counting.cleanup()
            rt.close()
        if heap.tracing_lost:
            raise _Fail(L("tracemalloc was stopped during your loop: the check cannot measure its memory.",
                          "你的循环运行期间 tracemalloc 被停止了：检查无法测量它的内存。"),
                        _leave_tracemalloc_alone())
        if touched:
            raise _tracemalloc_touched(touched)
        if len(calls) < LOOP_FRAMES:
            raise _Fail(L(f"the letterbox stage you were given ran {len(calls)} times for {LOOP_FRAMES} frames.",
                          f"传给你的 letterbox 阶段为 {LOOP_FRAMES} 帧运行了 {len(calls)} 次。"),
                        L("call the letterbox argument of detect_once once per frame (not pipeline.letterbox "
                          "itself): the check watches the buffer you hand it.",
                          "每帧调用一次 detect_once 的 letterbox 参数（而不是 pipeline.letterbox 本身）："
                          "检查会监视你交给它的缓冲区。"))
        if counting.contexts_made > 1:
            contexts, after = counting.contexts_made, counting.contexts_after_first_run
            raise _Fail(L(f"your loop made {contexts} contexts for {LOOP_FRAMES} frames"
                          f"{' (some after its first rknn_run)' if after else ''}: a "
                          "model load, its weights and its internal memory for each.",
                          f"你的循环为 {LOOP_FRAMES} 帧创建了 {contexts} 个上下文"
                          f"{'（有些在第一次 rknn_run 之后）' if after else ''}：每个上下文都要加载一次模型，"
                          "都有自己的权重和内部内存。"),
                        L("Make one context, before the loop. ", "在循环之前创建一个上下文。") + _reuse_rule())
        if counting.mems_after_first_run:
            mems = counting.mems_after_first_run
            raise _Fail(L(f"your loop made {mems} mems after its first rknn_run: a DMA "
                          f"allocation per frame ({LOOP_FRAMES} frames).",
                          f"你的循环在第一次 rknn_run 之后创建了 {mems} 个 mem：每帧一次 DMA 分配"
                          f"（共 {LOOP_FRAMES} 帧）。"),
                        L("Create every mem once, before the loop, and bind it once. ",
                          "每个 mem 都在循环之前创建一次，并且只绑定一次。") + _reuse_rule())
        if counting.runtime_allocated_gets:
            allocated, gets = counting.runtime_allocated_gets, counting.gets
            raise _Fail(L(f"{allocated} of {gets} rknn_outputs_get calls used "
                          "is_prealloc = 0: the runtime allocates the output's buffer in every frame.",
                          f"{gets} 次 rknn_outputs_get 调用中有 {allocated} 次使用了 is_prealloc = 0："
                          "运行时每帧都要为输出分配缓冲区。"),
                        L("Give rknn_outputs_get your own buffer, made once (is_prealloc = 1). ",
                          "给 rknn_outputs_get 一个你自己的、只创建一次的缓冲区（is_prealloc = 1）。") + _reuse_rule())
        rises = heap.rises()
        over = [(k + 2, r) for k, r in enumerate(rises) if r > FRAME_HEAP_LIMIT]
        if over:
            raise _Fail(L(f"your code allocated up to {max(rises):,} B inside a frame, in {len(over)} of "
                          f"{len(rises)} frames after the first (limit: {FRAME_HEAP_LIMIT:,} B (96 KiB); "
                          "tracemalloc, the runtime's and rknnlab's stages set aside).",
                          f"在第一帧之后的 {len(rises)} 帧中，有 {len(over)} 帧你的代码在帧内部分配了内存，"
                          f"最多 {max(rises):,} B（上限：{FRAME_HEAP_LIMIT:,} B（96 KiB）；由 tracemalloc 测量，"
                          "运行时和 rknnlab 各阶段的分配不计入）。"),
                        _alloc_hint(), [L(f"frame {k}: {r:,} B", f"第 {k} 帧：{r:,} B") for k, r in over])
        fresh = sum(not used for _, used in calls[2:])
        if fresh:
            sizes = [f"{n:,} B" for n, _ in calls]
            raise _Fail(L(f"{fresh} of {len(calls) - 2} letterbox calls from the third frame on got a buffer no "
                          "earlier frame had used (a new buffer).",
                          f"从第三帧起的 {len(calls) - 2} 次 letterbox 调用中，有 {fresh} 次拿到的缓冲区"
                          "是之前任何一帧都没有用过的（新的缓冲区）。"),
                        _alloc_hint(),
                        [L(f"letterbox buffers: {', '.join(sizes)}", f"letterbox 的缓冲区：{'、'.join(sizes)}")])
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        if wrong:
            raise _Fail(L(f"{len(wrong)} of {LOOP_FRAMES} frames have other boxes than the reference run of the "
                          "same frames.",
                          f"{LOOP_FRAMES} 帧中有 {len(wrong)} 帧的框与同样这些帧的参考运行不同。"),
                        L("Reusing the buffer must not change what each frame computes: letterbox each "
                          "frame before its run, and read its output after the run.",
                          "复用缓冲区不能改变每一帧的计算结果：每一帧都在它运行之前做 letterbox，"
                          "在运行之后读取它的输出。"),
                        [_frame_boxes(k, got[k], ref[k]) for k in wrong])
        buffers = sum(not used for _, used in calls)
        size, most = calls[0][0], max(rises, default=0)
        return CheckResult(EX_ALLOC, "passed",
                           L(f"No allocation per frame, for {LOOP_FRAMES} frames: no context, mem or "
                             "runtime-allocated output after the first run, your own code's heap flat inside "
                             "each frame, the letterbox buffer reused, and every frame's boxes right.",
                             f"在 {LOOP_FRAMES} 帧上每帧都不分配内存：第一次运行之后没有创建上下文或 mem，"
                             "也没有由运行时分配的输出；你自己的代码在每帧内部的堆保持平稳；letterbox 缓冲区"
                             "得到复用；每一帧的框都正确。"),
                           [L(f"letterbox: {buffers} buffer{'' if buffers == 1 else 's'} of {size:,} B for "
                              f"{len(calls)} calls; your heap inside a frame: at most {most:,} B",
                              f"letterbox：{len(calls)} 次调用用了 {buffers} 个 {size:,} B 的缓冲区；"
                              f"你在一帧内部的堆：最多 {most:,} B")])

    return _LAB.run(EX_ALLOC, body)


_LAB = Lab("Lab 6", [EX_SIZES, EX_THRESH, EX_SYNC, EX_ALLOC, EX_WORKERS],
           zh=("实验 6", ["练习 1 — 计算 NV12 帧及其 RGB 输入的大小",
                        "练习 2 — 在 int8 域中做阈值判断",
                        "练习 3 — 找出框不再变化的原因",
                        "练习 4 — 去掉每帧的内存分配",
                        "练习 5 ★ — 选择工作线程数"]))
summary = _LAB.summary
results = _LAB.results
#: each check's points when a class grades this lab with nbgrader (`python -m rknnlab
#: nbgrader export`): the exercise's minutes / 5
POINTS = {"check_frame_sizes": 2, "check_int8_threshold": 3, "check_synced_loop": 4,
          "check_allocation_once": 4, "check_workers": 6}
_LAB.seal(globals(), {"check_frame_sizes": EX_SIZES, "check_int8_threshold": EX_THRESH,
                      "check_synced_loop": EX_SYNC, "check_allocation_once": EX_ALLOC,
                      "check_workers": EX_WORKERS})
