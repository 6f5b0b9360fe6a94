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

from ..rknn.errors import RknnError
from . import _lab06_cases as _cases
from ._core import CheckResult, Lab, _Fail, _fresh_seed, _not_done, _require_function, _student_error

__all__ = ["CheckResult", "check_frame_sizes", "check_int8_threshold", "check_synced_loop",
           "check_allocation_once", "check_workers", "summary", "results", "PIPE_MODEL", "compare_frames",
           "LOOP_FRAMES", "REUSE_RULE", "SYNC_RULE", "measure_workers", "try_choice"]

#: the model of exercises 3 and 4 (PP-OCRv4's text detector, 480 x 480)
PIPE_MODEL = "ppocr_det"

EX_SIZES = "Exercise 1 — size an NV12 frame and its RGB input"
EX_THRESH = "Exercise 2 — threshold in the int8 domain"
EX_SYNC = "Exercise 3 — find why the boxes stop changing"
EX_ALLOC = "Exercise 4 — make the per-frame allocation go away"
EX_WORKERS = "Exercise 5 ★ — choose the number of workers"

# the canonical sentences (DECISIONS 5 and 9')
REUSE_RULE = "Reuse means no allocation per call. Flat memory only shows there is no leak."
SYNC_RULE = ("Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the "
             "DISABLE_FLUSH flags imply that the runtime flushes inputs and invalidates outputs by default. "
             "The API reference says cacheable memory shared by the CPU and the NPU needs rknn_mem_sync. None "
             "of Rockchip's demos call it. A maintainer says to add it yourself if you need it "
             "(airockchip/rknn_model_zoo#156). The course's code syncs: the safe choice.")


def _todo(name: str) -> str:
    """The hint of an exercise not started: no recipe (the folded hints hold it)."""
    return f"write {name}, then run this check again. Open a folded hint if you are stuck."


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
        raise _Fail(f"{what} is rknnlab's own function ({fn.__module__}.{getattr(fn, '__name__', '?')}).",
                    _LIBRARY_HINT)


_LIBRARY_HINT = ("Write the arithmetic yourself: the check switches rknnlab.pipeline's size and threshold "
                 "functions off while it runs yours (calling them passes nothing you learn).")


def _library_error(exc: _LibraryCalled, what: str) -> _Fail:
    if str(exc).endswith("open_runtime"):
        return _Fail(f"{what} called {exc}, which this check switches off: a second runtime is not the loop "
                     "it judges.", "Use the runtime the check passes in (rt), for every frame.")
    return _Fail(f"{what} called {exc}, which this check switches off.", _LIBRARY_HINT)


def _shown(wrong: List[str], limit: int = 5) -> List[str]:
    return wrong[:limit] + ([f"... and {len(wrong) - limit} more"] if len(wrong) > limit else [])


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
            _require_function(fn, f"pass the functions themselves: check_frame_sizes(nv12_bytes, rgb_input_bytes) "
                              f"({name} is not a function)")
        _refuse_library_function(nv12_bytes, "nv12_bytes")
        _refuse_library_function(rgb_input_bytes, "rgb_input_bytes")
        rng = np.random.default_rng(_fresh_seed())
        frames = _cases.made_up_frames(rng)
        with _library_refused("nv12_size", "rgb_size"):
            return _judge_sizes(nv12_bytes, rgb_input_bytes, frames)

    return _LAB.run(EX_SIZES, body)


def _size_verdict(got: Any, truth: int) -> Optional[str]:
    """None when ``got`` is the size; else what is wrong with it (never the size)."""
    if isinstance(got, (float, np.floating)):
        return "a float: a size in bytes is an int (use // rather than * 1.5 or /)"
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
        return "not an int"
    if int(got) == truth:
        return None
    return "too small" if got < truth else "too large"


def _shown_size(got: Any) -> str:
    return f"{got:,} B" if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else repr(got)


def _judge_sizes(nv12_bytes: Callable[..., Any], rgb_input_bytes: Callable[..., Any],
                 frames: List[Tuple[int, int, Optional[int], Optional[int], str]]) -> CheckResult:
    wrong_nv12: List[str] = []
    wrong_rgb: List[str] = []
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
            raise _student_error(exc, what, "stride and height_stride may be missing: they then equal the "
                                 "width and the height.")
        if got is None and n == 0:
            raise _not_done(f"{what} returned None.", "return the number of bytes, an int.")
        side = _size_verdict(got, _cases.nv12_bytes(w, h, s, hs))
        if side:
            wrong_nv12.append(f"{what}: {_shown_size(got)} is {side}")
        what = f"rgb_input_bytes({w}, {h}, {soc!r})"
        got = _call(rgb_input_bytes, (w, h, soc), what, "rgb_input_bytes",
                    "soc is one of 'rk3588', 'rk3566', 'rk3568'.")
        side = _size_verdict(got, _cases.rgb_input_bytes(w, h, soc))
        if side:
            wrong_rgb.append(f"{what}: {_shown_size(got)} is {side}")
    wrong_all = wrong_nv12 + wrong_rgb
    if wrong_all and all("a float" in w for w in wrong_all):
        raise _Fail(f"{len(wrong_all)} sizes of {2 * len(frames)} are floats:", "A size in bytes is an int, as "
                    "malloc and rknn_create_mem take it: compute with integer arithmetic (// 2, not * 1.5).",
                    _shown(wrong_all))
    if wrong_nv12:
        also = [f"rgb_input_bytes: also wrong for {len(wrong_rgb)} of {len(frames)} made-up inputs"] \
            if wrong_rgb else []
        raise _Fail(f"nv12_bytes is wrong for {len(wrong_nv12)} of {len(frames)} made-up frames:",
                    "NV12 keeps a full-size Y plane and one UV plane of half the rows (each row holds U and V "
                    "in turn). A decoder's buffer has rows of stride bytes and height_stride rows: size both "
                    "planes from the strides, not from the picture.", _shown(wrong_nv12) + also)
    if wrong_rgb:
        raise _Fail(f"rgb_input_bytes is wrong for {len(wrong_rgb)} of {len(frames)} made-up inputs:",
                    "An RGB888 pixel is 3 bytes. A zero-copy input's rows are padded: the width goes up to "
                    "the SoC's alignment (w_stride), the height does not. The alignment depends on the SoC: "
                    "see the alignment table of exercise 1.", _shown(wrong_rgb))
    return CheckResult(EX_SIZES, "passed", f"Both sizes right for {len(frames)} made-up frames: you sized the "
                       "NV12 planes from the decoder's strides and padded the RGB rows to the SoC's alignment.",
                       [f"{sum(s is not None for _, _, s, _, _ in frames)} frames with a stride, "
                        f"{sum(hs is not None for _, _, _, hs, _ in frames)} with a height_stride, 3 SoCs"])


# =========================================================================== exercise 2: threshold
_KIND_TEXT = {"between": "between two int8 levels (two neighbouring values of q)",
              "level": "exactly on an int8 level",
              "above": "above the largest value the output can hold",
              "below": "below the smallest value the output can hold"}


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
            called.append("a restart of tracemalloc")


def _tracemalloc_touched(called: List[str]) -> _Fail:
    return _Fail(f"your code called {', '.join(sorted(set(called)))} during the check: it cannot measure "
                 "your memory then.", "Leave tracemalloc alone; the check starts, stops and reads it itself.")


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
            raise _Fail("tracemalloc was stopped during the call: the check cannot measure its memory.",
                        "Leave tracemalloc alone; the check starts and stops it itself.")
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
                wrong.append(f"{what}: raised ValueError, yet some int8 values reach {value:.6g}")
                kinds_wrong.add(kind)
            continue
        except Exception as exc:
            raise _student_error(exc, what, "return an int from -128 to 127, or raise ValueError when no "
                                 "int8 value reaches the threshold.")
        if got is None and n == 0:
            raise _not_done(f"{what} returned None.", "return an int from -128 to 127.")
        q = int(got) if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else None
        if truth is None:
            wrong.append(f"{what}: returned {got!r}; the value is {_KIND_TEXT[kind]}")
            kinds_wrong.add(kind)
        elif q is None or not -128 <= q <= 127:
            wrong.append(f"{what}: {got!r} is not an int8 value (-128 to 127)")
            kinds_wrong.add(kind)
        elif q != truth:
            effect = ("lets through pixels whose value is below the threshold" if q < truth
                      else "drops pixels whose value reaches the threshold")
            wrong.append(f"{what}: q = {q} {effect}")
            kinds_wrong.add(kind)
    if wrong:
        hint = "A pixel passes when (q - zp) * scale >= value. Find the smallest such q; rounding to the "\
               "nearest level or down can pick a level below the value, and a value exactly on a level is " \
               "reached by that level."
        if kinds_wrong & {"above", "below"}:
            hint += " A q outside -128..127 does not fit an int8_t: clamp it at the bottom, and raise " \
                    "ValueError when even 127 is below the value (no pixel could ever pass)."
        raise _Fail(f"{len(wrong)} of {len(cases)} made-up thresholds are wrong:", hint, _shown(wrong))


_MASK_HINT = ("Compare the raw int8 map with one int8 q, computed once by your int8_threshold; no float copy "
              "of the map. When your int8_threshold raises ValueError, no pixel passes.")


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
        what = f"text_mask(<int8 map {shape[0]}x{shape[1]}>, zp={zp}, scale={scale:.6g}, value={value:.6g})"
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
            raise _student_error(exc, what, _MASK_HINT)
        if got is None:
            raise _not_done(f"{what} returned None.", "return a bool array of the map's shape.")
        mask = np.asarray(got)
        if mask.shape != out.shape:
            raise _Fail(f"{what} returned an array of shape {mask.shape}, not the map's {out.shape}.", _MASK_HINT)
        per_pixel = peak / out.size
        most = max(most, per_pixel)
        if per_pixel >= MASK_BYTES_PER_PIXEL:
            raise _Fail(f"{what} allocated {per_pixel:.1f} bytes per pixel of the map at once (a float32 copy "
                        f"would be {MASK_BYTES_PER_PIXEL}). The call needs a copy of the map's size.",
                        _MASK_HINT, [f"limit: less than {MASK_BYTES_PER_PIXEL} bytes per pixel (the bool mask "
                                     "itself is 1)"])
        if not calls:
            raise _Fail(f"{what}: text_mask never called your int8_threshold.",
                        "Turn the threshold into q with your int8_threshold, once per call, then compare the "
                        "raw bytes with q.")
        given = calls[-1]
        truth = np.zeros(out.shape, bool) if given is None else out >= given
        bad = int(np.count_nonzero(mask.astype(bool) != truth))
        if bad:
            levels = (_cases.INT8 - zp) * scale >= value
            if np.array_equal(mask.astype(bool), levels[out.astype(np.int16) + 128]):
                raise _Fail(f"{what}: your mask does not follow the q your int8_threshold returned.",
                            _MASK_HINT)
            raise _Fail(f"{what}: {bad:,} of {out.size:,} pixels wrong (case: the value is {_KIND_TEXT[kind]}).",
                        _MASK_HINT)
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
            _require_function(fn, f"pass the functions themselves: check_int8_threshold(int8_threshold, text_mask) "
                              f"({name} is not a function)")
        _refuse_library_function(int8_threshold, "int8_threshold")
        rng = np.random.default_rng(_fresh_seed())
        cases = _cases.made_up_thresholds(rng)
        with _library_refused("int8_threshold"):
            _check_threshold_values(int8_threshold, cases)
            n_maps = _check_masks(text_mask, int8_threshold, cases, rng)
        return CheckResult(EX_THRESH, "passed", f"All {len(cases)} made-up thresholds right, and {n_maps} masks "
                           "right pixel by pixel without a float copy of the map: out >= q keeps exactly the "
                           "pixels that reach the value.",
                           [f"{sum(k == 'between' for *_, k in cases)} between two int8 levels, "
                            f"{sum(k == 'level' for *_, k in cases)} exactly on a level, "
                            f"{sum(k == 'above' for *_, k in cases)} above the largest value, "
                            f"{sum(k == 'below' for *_, k in cases)} below the smallest"])

    return _LAB.run(EX_THRESH, body)


# =========================================================================== exercise 5: workers
_WORKERS_HINT = ("Look at the worker counts one at a time, fewest first. A count meets the goal when every "
                 "run of it reaches the target rate and keeps its p95 latency within the budget; a run exactly "
                 "at the target or at the budget meets it.")


def _goal(target: float, budget: float) -> str:
    return f"goal: >= {target:g} frames/s and p95 <= {budget:g} ms"


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
            what = f"table {n + 1} ({_goal(target, budget)})"
            truth = _cases.choose_workers(table, target, budget)
            got = _call(choose_workers, (table.copy(), target, budget), f"choose_workers(<{what}>)",
                        "choose_workers", _WORKERS_HINT)
            value = int(got) if isinstance(got, (int, np.integer)) and not isinstance(got, bool) else None
            worst = _cases.worst_runs(table)
            if got is not None and value is None:
                wrong.append(f"{what}: returned {got!r}, not a number of workers or None")
            elif value == truth:
                continue
            elif value is None:
                wrong.append(f"{what}: you returned None; some count meets both goals in every run")
            elif value not in worst:
                wrong.append(f"{what}: you chose {value}, a count the table never measured")
            else:
                fps, p95 = worst[value]
                meets = fps >= target and p95 <= budget
                wrong.append(f"{what}: you chose {value}; with {value} workers the worst run gives {fps:g} "
                             f"frames/s and p95 {p95:g} ms" + ("; a smaller count also meets the goal" if meets
                                                                else ""))
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(tables)} made-up tables get a wrong choice:", _WORKERS_HINT +
                        " Return None when no count meets both goals.", _shown(wrong))
        nones = sum(_cases.choose_workers(t, f, b) is None for _, t, f, b, _ in tables)
        return CheckResult(EX_WORKERS, "passed", f"All {len(tables)} made-up tables right: the fewest workers that "
                           "meet the rate and the p95 budget in every run (at the goal exactly counts), and None "
                           "when none does.", [f"{len(tables)} tables, {nones} with no count that meets both goals"])

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
        raise _Fail(f"{what}: the runtime refused: {exc.function} returned {exc.code} ({exc.name}): {exc.detail}",
                    hint)
    except _Fail:
        raise
    except Exception as exc:
        raise _student_error(exc, what, hint)
    if got is None:
        raise _not_done(f"{what} returned None.", "return a list with the boxes of every frame, in order.")
    try:
        got = list(got)
    except TypeError:
        raise _Fail(f"{what} returned {type(got).__name__}, not a list.", "return one list of boxes per frame.")
    if len(got) != n_frames:
        raise _Fail(f"{what} returned {len(got)} lists of boxes for {n_frames} frames.",
                    "return one list of boxes per frame, in the order of the frames.")
    keys = [_cases.box_key(b) for b in got]
    if any(k is None for k in keys):
        raise _Fail(f"{what}: a frame's result is not a list of boxes.",
                    "append what pipeline.find_boxes returns for each frame.")
    return keys


def _count_boxes(key: Any) -> str:
    return f"{len(key)} box{'es' if len(key) != 1 else ''}"


def _reference(rt: Any, frames: Sequence[Any]) -> List[Any]:
    """The check's own boxes of ``frames``; refuses a reference with no box at all (the
    frames are drawn from shots the detector finds text in)."""
    ref = _cases.reference_boxes(rt, _model_file_here(rt), frames)
    if not any(ref):
        raise _Fail("the check's own run found no box in any frame, so it cannot judge your loop.",
                    "Restart the kernel and run the notebook from the top (was rknnlab's find_boxes or "
                    "letterbox replaced?).")
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
            return "not done yet: the function still raises NotImplementedError"
        except Exception as exc:
            return f"{getattr(detect, '__name__', 'detect')} raised {type(exc).__name__}: {exc}"
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
        verdict = "the same boxes" if g == r else ("the boxes of frame 1" if k and g == got[0] == ref[0]
                                                   else "other boxes")
        line = f"frame {k + 1}: yours {_count_boxes(g or ()):>9}, reference {_count_boxes(r):>9}: {verdict}"
        if with_letterbox and k and k < len(calls):
            line += "; letterbox buffer " + ("reused" if calls[k][1] else "new")
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
    print(f"{repeats * len(counts)} runs of {n_frames} frames: about 5-10 s", flush=True)
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
    table.attrs["source"] = f"{source}: {repeats} runs of {n_frames} frames per worker count"
    return table


def try_choice(choose_workers: Callable[..., Any], table: Any, target_fps: float, p95_budget_ms: float) -> str:
    """One line: what ``choose_workers`` answers for the lab's own table (never raises)."""
    if table is None:
        return "no measured table"
    try:
        got = choose_workers(table.copy(), target_fps, p95_budget_ms)
    except NotImplementedError:
        return "not done yet: choose_workers still raises NotImplementedError"
    except Exception as exc:
        return f"choose_workers raised {type(exc).__name__}: {exc}"
    if got is None:
        return f"{_goal(target_fps, p95_budget_ms)}: no count meets both"
    return f"{_goal(target_fps, p95_budget_ms)}: {got} worker{'s' if got != 1 else ''}"


_SYNC_HINT = ("The NPU writes the output mem during rknn_run. On a context made with this flag, when does the "
              "CPU's view of a cacheable mem take the NPU's new bytes?")

def _gap_lines(gaps: Sequence[str], runs: int) -> List[str]:
    """One line per missing sync; the loop's two ends (one sync at either is enough) on two lines,
    since they protect different reads (frame 1's and the last frame's)."""
    lines = []
    for gap in gaps:
        if gap.startswith("before frame 1's run"):
            lines += [f"after frame {runs}'s run: no sync of the output mem",
                      "before frame 1's run: no sync either (one of these two places is enough)"]
        else:
            lines.append(f"{gap}: no sync of the output mem")
    return lines


_SYNC_BEFORE_NOTE = ("Your loop syncs the output before rknn_run. Here that shows the fresh map (the sync drops "
                     "the CPU's cached lines and the NPU writes afterwards), but on a board the CPU may read "
                     "lines in again between the sync and the run (speculative reads): the safe place is after "
                     "the run, before the read.")
_NON_CACHEABLE_NOTE = ("Your output mem is non-cacheable: right, but every CPU read of the map is then uncached "
                       "(much slower, chapter 3). Rockchip's rknpu driver refuses its sync ioctl for a buffer "
                       "made without its cacheable flag; what rknn_mem_sync returns then is not documented "
                       "(A11). The sync is not needed: drop it for that mem.")
_NO_FLAG_NOTE = ("Your context is made without RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE: right, the runtime then "
                 "does the output's cache maintenance itself after each run.")


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
            what = f"detect(rt, <{LOOP_FRAMES} frames>)"
            try:
                with _library_refused("open_runtime"):
                    got = _loop_result(detect, (counting, frames), what, "detect", _SYNC_HINT, LOOP_FRAMES)
            except _LibraryCalled as exc:
                raise _library_error(exc, what)
        finally:
            counting.cleanup()
            rt.close()
        if counting.gets:
            raise _Fail(f"your loop reads the output with rknn_outputs_get ({counting.gets} calls): that is the "
                        "general API, not the zero-copy loop to fix.", "Keep bind_io's bound mems and read the "
                        "map where the NPU writes it. " + _SYNC_HINT)
        if counting.contexts_after_first_run or counting.mems_after_first_run:
            raise _Fail(f"your loop made {counting.contexts_after_first_run} contexts and "
                        f"{counting.mems_after_first_run} mems after its first rknn_run: a fresh mem hides the "
                        "stale cache instead of fixing it.", "Keep one context and bind_io's mems, made once. "
                        + _SYNC_HINT)
        if counting.contexts_made > 1 or len(counting.output_mems) > 2:
            raise _Fail(f"your loop made {counting.contexts_made} contexts and bound {len(counting.output_mems)} "
                        f"output mems for {LOOP_FRAMES} frames: a fresh mem hides the stale cache instead of "
                        "fixing it (frame 100 would be stale again).", "Keep one context and bind_io's mems, "
                        "made once. " + _SYNC_HINT)
        if counting.runs != LOOP_FRAMES:
            raise _Fail(f"your loop ran the model {counting.runs} times for {LOOP_FRAMES} frames: one run per "
                        "frame.", "Run each frame once and read that run's output. " + _SYNC_HINT)
        from ..rknn import abi
        flagged = any(f & abi.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE for f in counting.init_flags)
        unsynced = counting.unsynced_gaps() if flagged and counting.cacheable_outputs else []
        if unsynced:
            places = "1 place" if len(unsynced) == 1 else f"{len(unsynced)} places"
            raise _Fail(f"your loop skips the output sync in {places}: a frame read there may "
                        "show the lines the CPU cached from an earlier frame (on a board; the simulator cannot "
                        "see the CPU's reads, A60).", _SYNC_HINT, _gap_lines(unsynced, counting.runs))
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        details = [f"frame {k + 1}: your {_count_boxes(got[k])}, the reference's {_count_boxes(ref[k])}"
                   + (" (other boxes)" if len(got[k]) == len(ref[k]) else "") for k in wrong]
        if wrong and len(set(got)) == 1 and len(set(ref)) > 1:
            first = "the first frame's boxes" if got[0] == ref[0] else "one set of boxes"
            raise _Fail(f"the boxes stop changing: all {LOOP_FRAMES} frames show {first}, while the reference run "
                        f"of the same frames finds {len(set(ref))} different sets: the CPU never sees a new map.",
                        _SYNC_HINT, details)
        late = [k for k in wrong if k and got[k] == ref[k - 1]]
        if late:
            raise _Fail(f"{len(wrong)} of {LOOP_FRAMES} frames are wrong; {len(late)} of them show the boxes of the "
                        "frame before: your loop reads outputs one frame late.", _SYNC_HINT, details)
        if wrong:
            raise _Fail(f"{len(wrong)} of {LOOP_FRAMES} frames are wrong: their boxes differ from the reference "
                        "run of the same frames.", "Keep the lab's letterbox, model and find_boxes with its "
                        "default thresholds; change only what the CPU reads, and when. " + _SYNC_HINT, details)
        notes = []
        if counting.synced_before_run_only:
            notes.append(_SYNC_BEFORE_NOTE)
        if counting.non_cacheable:
            notes.append(_NON_CACHEABLE_NOTE)
        if counting.init_flags and not flagged:
            notes.append(_NO_FLAG_NOTE)
        return CheckResult(EX_SYNC, "passed", f"Every frame's boxes are its own, for {LOOP_FRAMES} frames the check "
                           "drew, with one run per frame: the CPU reads what the NPU wrote for that frame.",
                           [f"frames {', '.join(str(f.index) for f in frames)} of the camera; "
                            f"{sum(len(r) for r in ref)} boxes in all"] + [f"Note: {n}" for n in notes])

    return _LAB.run(EX_SYNC, body)


_ALLOC_HINT = ("Make the buffer the letterbox writes into once, before the loop, sized for the model's input, "
               "and hand it to every frame; make the output buffer, the inputs and every context or mem before "
               "the loop too. " + REUSE_RULE)


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
                    got = _loop_result(detect_once, (counting, frames, watched), f"detect_once(rt, <{LOOP_FRAMES} "
                                       "frames>, letterbox)", "detect_once", _ALLOC_HINT, LOOP_FRAMES)
            finally:
                heap.stop()
            calls = list(watched.calls)
        finally:
            watched.release()
            counting.cleanup()
            rt.close()
        if heap.tracing_lost:
            raise _Fail("tracemalloc was stopped during your loop: the check cannot measure its memory.",
                        "Leave tracemalloc alone; the check starts and stops it itself.")
        if touched:
            raise _tracemalloc_touched(touched)
        if len(calls) < LOOP_FRAMES:
            raise _Fail(f"the letterbox stage you were given ran {len(calls)} times for {LOOP_FRAMES} frames.",
                        "call the letterbox argument of detect_once once per frame (not pipeline.letterbox "
                        "itself): the check watches the buffer you hand it.")
        if counting.contexts_made > 1:
            raise _Fail(f"your loop made {counting.contexts_made} contexts for {LOOP_FRAMES} frames"
                        f"{' (some after its first rknn_run)' if counting.contexts_after_first_run else ''}: a "
                        "model load, its weights and its internal memory for each.",
                        "Make one context, before the loop. " + REUSE_RULE)
        if counting.mems_after_first_run:
            raise _Fail(f"your loop made {counting.mems_after_first_run} mems after its first rknn_run: a DMA "
                        f"allocation per frame ({LOOP_FRAMES} frames).", "Create every mem once, before the loop, "
                        "and bind it once. " + REUSE_RULE)
        if counting.runtime_allocated_gets:
            raise _Fail(f"{counting.runtime_allocated_gets} of {counting.gets} rknn_outputs_get calls used "
                        "is_prealloc = 0: the runtime allocates the output's buffer in every frame.",
                        "Give rknn_outputs_get your own buffer, made once (is_prealloc = 1). " + REUSE_RULE)
        rises = heap.rises()
        over = [(k + 2, r) for k, r in enumerate(rises) if r > FRAME_HEAP_LIMIT]
        if over:
            raise _Fail(f"your code allocated up to {max(rises):,} B inside a frame, in {len(over)} of "
                        f"{len(rises)} frames after the first (limit: {FRAME_HEAP_LIMIT:,} B (96 KiB); "
                        "tracemalloc, the runtime's and rknnlab's stages set aside).", _ALLOC_HINT,
                        [f"frame {k}: {r:,} B" for k, r in over])
        fresh = sum(not used for _, used in calls[2:])
        if fresh:
            raise _Fail(f"{fresh} of {len(calls) - 2} letterbox calls from the third frame on got a buffer no "
                        "earlier frame had used (a new buffer).", _ALLOC_HINT,
                        [f"letterbox buffers: {', '.join(f'{n:,} B' for n, _ in calls)}"])
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        if wrong:
            raise _Fail(f"{len(wrong)} of {LOOP_FRAMES} frames have other boxes than the reference run of the same "
                        "frames.", "Reusing the buffer must not change what each frame computes: letterbox each "
                        "frame before its run, and read its output after the run.",
                        [f"frame {k + 1}: your {_count_boxes(got[k])}, the reference's {_count_boxes(ref[k])}"
                         + (" (other boxes)" if len(got[k]) == len(ref[k]) else "") for k in wrong])
        buffers = sum(not used for _, used in calls)
        return CheckResult(EX_ALLOC, "passed", f"No allocation per frame, for {LOOP_FRAMES} frames: no context, "
                           "mem or runtime-allocated output after the first run, your own code's heap flat inside "
                           "each frame, the letterbox buffer reused, and every frame's boxes right.",
                           [f"letterbox: {buffers} buffer{'' if buffers == 1 else 's'} of {calls[0][0]:,} B for "
                            f"{len(calls)} calls; "
                            f"your heap inside a frame: at most {max(rises, default=0):,} B"])

    return _LAB.run(EX_ALLOC, body)


_LAB = Lab("Lab 6", [EX_SIZES, EX_THRESH, EX_SYNC, EX_ALLOC, EX_WORKERS])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_frame_sizes": EX_SIZES, "check_int8_threshold": EX_THRESH,
                      "check_synced_loop": EX_SYNC, "check_allocation_once": EX_ALLOC,
                      "check_workers": EX_WORKERS})
