"""Lab 6 (a video pipeline): one check per exercise.

================================  ==============================================================
:func:`check_frame_sizes`         1. ``nv12_bytes(w, h, stride, height_stride)`` and
                                  ``rgb_input_bytes(w, h, soc)``: a frame's bytes, with strides
:func:`check_int8_threshold`      2. ``int8_threshold(value, zp, scale) -> q`` and ``text_mask(out,
                                  zp, scale, value)``: in the int8 domain
:func:`check_synced_loop`         3. ``detect(rt, frames, letterbox) -> [boxes]``: boxes one
                                  frame late, fixed
:func:`check_allocation_once`     4. ``detect_once(rt, frames, letterbox) -> [boxes]``: no
                                  allocation per frame
:func:`check_workers`             5. ★ ``choose_workers(table, target_fps, p95_budget_ms,
                                  npu_cores) -> int | None``
================================  ==============================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab06 as checks``.

Each check measures what it judges itself: it draws made-up frames, quantisation parameters
and measurement tables no notebook prints, runs the student's loop on frames it chooses and
compares every frame's boxes with its own run of the same frames, and watches what the
buffer handed to the letterbox stage held before each call.  The truth lives in private
code; the messages give measured numbers and a hint, never the answer.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn.errors import RknnError
from . import _lab06_cases as _cases
from ._core import (CheckResult, Lab, _Fail, _fresh_seed, _not_done, _require_function, _student_error,
                    _whole_number)

__all__ = ["CheckResult", "check_frame_sizes", "check_int8_threshold", "check_synced_loop",
           "check_allocation_once", "check_workers", "summary", "results", "PIPE_MODEL", "compare_frames",
           "LOOP_FRAMES", "REUSE_RULE", "SYNC_RULE", "measure_workers", "try_choice"]

#: the model of exercises 3 and 4 (PP-OCRv4's text detector, 480 x 480)
PIPE_MODEL = "ppocr_det"

EX_SIZES = "Exercise 1 — size an NV12 frame and its RGB input"
EX_THRESH = "Exercise 2 — threshold in the int8 domain"
EX_SYNC = "Exercise 3 — find why the boxes come one frame late"
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
    except NotImplementedError as exc:
        raise _student_error(exc, what, _todo(name))
    except Exception as exc:
        raise _student_error(exc, what, hint)


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
    multiples of 8 and 16, strides padded to 2 to 256 bytes or by a decoder's own amount,
    height strides given or not (some not multiples of 16).  Every answer must be exact.  A
    failure lists the frames whose size is wrong and whether the answer is too small or too
    large, never the size."""
    def body() -> CheckResult:
        for fn, name in ((nv12_bytes, "nv12_bytes"), (rgb_input_bytes, "rgb_input_bytes")):
            _require_function(fn, f"pass the functions themselves: check_frame_sizes(nv12_bytes, rgb_input_bytes) "
                              f"({name} is not a function)")
        rng = np.random.default_rng(_fresh_seed())
        frames = _cases.made_up_frames(rng)
        wrong_nv12: List[str] = []
        wrong_rgb: List[str] = []
        for n, (w, h, s, hs, soc) in enumerate(frames):
            kwargs = {k: v for k, v in (("stride", s), ("height_stride", hs)) if v is not None}
            what = f"nv12_bytes({_args_text(w, h, s, hs)})"
            try:
                got = nv12_bytes(w, h, **kwargs)
            except NotImplementedError as exc:
                raise _student_error(exc, what, _todo("nv12_bytes"))
            except Exception as exc:
                raise _student_error(exc, what, "stride and height_stride may be missing: they then equal the "
                                     "width and the height.")
            if got is None and n == 0:
                raise _not_done(f"{what} returned None.", "return the number of bytes, an int.")
            value = _whole_number(got)
            truth = _cases.nv12_bytes(w, h, s, hs)
            if value != truth:
                side = "not a whole number" if value is None else ("too small" if value < truth else "too large")
                wrong_nv12.append(f"{what}: {got!r} is {side}")
            what = f"rgb_input_bytes({w}, {h}, {soc!r})"
            got = _call(rgb_input_bytes, (w, h, soc), what, "rgb_input_bytes",
                        "soc is one of 'rk3588', 'rk3566', 'rk3568'.")
            value = _whole_number(got)
            truth = _cases.rgb_input_bytes(w, h, soc)
            if value != truth:
                side = "not a whole number" if value is None else ("too small" if value < truth else "too large")
                wrong_rgb.append(f"{what}: {got!r} is {side}")
        if wrong_nv12:
            raise _Fail(f"nv12_bytes is wrong for {len(wrong_nv12)} of {len(frames)} made-up frames:",
                        "NV12 keeps a full-size Y plane and one UV plane of half the rows (each row holds U and V "
                        "in turn). A decoder's buffer has rows of stride bytes and height_stride rows: size both "
                        "planes from the strides, not from the picture.", _shown(wrong_nv12))
        if wrong_rgb:
            raise _Fail(f"rgb_input_bytes is wrong for {len(wrong_rgb)} of {len(frames)} made-up inputs:",
                        "An RGB888 pixel is 3 bytes. A zero-copy input's rows are padded: the width goes up to "
                        "the SoC's alignment (w_stride), the height does not. The alignment depends on the SoC: "
                        "see this lab's table of rules.", _shown(wrong_rgb))
        return CheckResult(EX_SIZES, "passed", f"Both sizes right for {len(frames)} made-up frames: you sized the "
                           "NV12 planes from the decoder's strides and padded the RGB rows to the SoC's alignment.",
                           [f"{sum(s is not None for _, _, s, _, _ in frames)} frames with a stride, "
                            f"{sum(hs is not None for _, _, _, hs, _ in frames)} with a height_stride, 3 SoCs"])

    return _LAB.run(EX_SIZES, body)


# =========================================================================== exercise 2: threshold
_KIND_TEXT = {"between": "between two levels", "above": "above the largest value the output can hold",
              "below": "below the smallest value the output can hold"}


#: exercise 2: a mask may allocate less than this many bytes per pixel of the map (a float32 copy
#: of the map is 4; the bool mask itself is 1, an int16 copy 2)
MASK_BYTES_PER_PIXEL = 4


def _traced_call(fn: Callable[..., Any], args: Tuple[Any, ...]) -> Tuple[Any, int]:
    """(fn(*args), the most bytes the call had allocated at once beyond what it started with),
    by tracemalloc, which numpy reports its arrays to."""
    import tracemalloc
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        got = fn(*args)
        return got, tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()


def _check_threshold_values(int8_threshold: Callable[[float, int, float], int],
                            cases: List[Tuple[float, int, float, str]]) -> None:
    wrong: List[str] = []
    kinds_wrong = set()
    for n, (value, zp, scale, kind) in enumerate(cases):
        what = f"int8_threshold({value:.6g}, zp={zp}, scale={scale:.6g})"
        truth = _cases.int8_threshold(value, zp, scale)
        try:
            got = int8_threshold(value, zp, scale)
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
        q = _whole_number(got)
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
               "nearest level or down can pick a level below the value."
        if kinds_wrong & {"above", "below"}:
            hint += " A q outside -128..127 does not fit an int8_t: clamp it at the bottom, and raise " \
                    "ValueError when even 127 is below the value (no pixel could ever pass)."
        raise _Fail(f"{len(wrong)} of {len(cases)} made-up thresholds are wrong:", hint, _shown(wrong))


_MASK_HINT = ("Compare the raw int8 map with one int8 q, computed once by your int8_threshold; no float copy "
              "of the map. When no int8 value reaches the threshold, no pixel passes.")


def _check_masks(text_mask: Callable[..., Any], cases: List[Tuple[float, int, float, str]],
                 rng: np.random.Generator) -> int:
    """The masks of made-up int8 maps: right pixel by pixel, and allocating less than
    MASK_BYTES_PER_PIXEL per pixel at once.  Returns the most bytes per pixel seen."""
    most = 0.0
    picked = [c for c in cases if c[3] != "between"][:3] + [c for c in cases if c[3] == "between"][:4]
    for value, zp, scale, kind in picked:
        shape = (int(rng.integers(200, 481)), int(rng.integers(200, 481)))
        out = rng.integers(-128, 128, size=shape).astype(np.int8)
        what = f"text_mask(<int8 map {shape[0]}x{shape[1]}>, zp={zp}, scale={scale:.6g}, value={value:.6g})"
        try:
            got, peak = _traced_call(text_mask, (out.copy(), zp, scale, value))
        except NotImplementedError as exc:
            raise _student_error(exc, what, _todo("text_mask"))
        except Exception as exc:
            raise _student_error(exc, what, _MASK_HINT)
        if got is None:
            raise _not_done(f"{what} returned None.", "return a bool array of the map's shape.")
        mask = np.asarray(got)
        if mask.shape != out.shape:
            raise _Fail(f"{what} returned an array of shape {mask.shape}, not the map's {out.shape}.", _MASK_HINT)
        levels = (_cases.INT8 - zp) * scale >= value
        truth = levels[out.astype(np.int16) + 128]
        bad = int(np.count_nonzero(mask.astype(bool) != truth))
        if bad:
            raise _Fail(f"{what}: {bad:,} of {out.size:,} pixels wrong ({_KIND_TEXT[kind]}).", _MASK_HINT)
        per_pixel = peak / out.size
        most = max(most, per_pixel)
        if per_pixel >= MASK_BYTES_PER_PIXEL:
            raise _Fail(f"{what} allocated {per_pixel:.1f} bytes per pixel of the map at once: a float32 copy of "
                        f"the map takes {MASK_BYTES_PER_PIXEL}. The mask is right, but the map was dequantised.",
                        _MASK_HINT, [f"limit: less than {MASK_BYTES_PER_PIXEL} bytes per pixel (the bool mask "
                                     "itself is 1)"])
    return len(picked)


def check_int8_threshold(int8_threshold: Callable[[float, int, float], int],
                         text_mask: Callable[..., Any]) -> CheckResult:
    """Exercise 2: ``int8_threshold(value, zp, scale) -> q``: the smallest int8 value q
    (-128 to 127) whose dequantised value (q - zp) * scale is at least ``value``; ValueError
    when no int8 value reaches it.  ``text_mask(out, zp, scale, value)``: the bool mask of the
    pixels of the int8 map ``out`` that reach ``value``, computed in the int8 domain.

    The check draws 20 made-up triples at every call: values between two dequantised
    levels with the fraction below and above one half, zero points from -128 to 100, values
    above the largest and below the smallest value the output can hold.  None of them falls
    on a level exactly (float rounding would decide it).  Every q must be exact.  Then it
    calls text_mask on seven made-up int8 maps (three with values out of range): every pixel
    must be right, and the call must allocate less than MASK_BYTES_PER_PIXEL bytes per pixel
    at once (tracemalloc; a float32 copy of the map takes 4).  A failure says what a wrong q
    does to the map, never the q."""
    def body() -> CheckResult:
        for fn, name in ((int8_threshold, "int8_threshold"), (text_mask, "text_mask")):
            _require_function(fn, f"pass the functions themselves: check_int8_threshold(int8_threshold, text_mask) "
                              f"({name} is not a function)")
        rng = np.random.default_rng(_fresh_seed())
        cases = _cases.made_up_thresholds(rng)
        _check_threshold_values(int8_threshold, cases)
        n_maps = _check_masks(text_mask, cases, rng)
        return CheckResult(EX_THRESH, "passed", f"All {len(cases)} made-up thresholds right, and {n_maps} masks "
                           "right pixel by pixel without a float copy of the map: `out >= q` keeps exactly the "
                           "pixels that reach the value.",
                           [f"{sum(k == 'between' for *_, k in cases)} between two levels, "
                            f"{sum(k == 'above' for *_, k in cases)} above the largest value, "
                            f"{sum(k == 'below' for *_, k in cases)} below the smallest"])

    return _LAB.run(EX_THRESH, body)


# =========================================================================== exercise 5: workers
_WORKERS_HINT = ("Look at the worker counts one at a time, fewest first. A count meets the goal when every "
                 "run of it reaches the target rate and keeps its p95 latency within the budget. More workers "
                 "than NPU cores only share a core.")


def check_workers(choose_workers: Callable[[Any, float, float, int], Optional[int]]) -> CheckResult:
    """Exercise 5 ★: ``choose_workers(table, target_fps, p95_budget_ms, npu_cores)``: the
    fewest workers whose every measured run reaches ``target_fps`` with its p95 latency at most
    ``p95_budget_ms``, never more workers than ``npu_cores``; None when no count meets both.

    ``table`` has one row per run: workers, run, fps, mean_ms, p95_ms (repeated runs of each
    count, shuffled).  The check makes ten tables at every call, never the lab's numbers,
    each built so that one plausible wrong rule answers differently: ties (several counts
    meet the goal), the fastest count, latency over budget, a mean within the budget but a
    p95 over it, only more workers than cores meeting it, a count that meets the rate in most
    runs but not all, and no count at all.  Every answer must be exact."""
    def body() -> CheckResult:
        _require_function(choose_workers, "check_workers(choose_workers)")
        rng = np.random.default_rng(_fresh_seed())
        tables = _cases.made_up_tables(rng)
        wrong: List[str] = []
        for n, (kind, table, target, budget, cores) in enumerate(tables):
            what = f"table {n + 1} ({target} fps, p95 <= {budget} ms, {cores} NPU cores)"
            truth = _cases.choose_workers(table, target, budget, cores)
            got = _call(choose_workers, (table.copy(), target, budget, cores), f"choose_workers(<{what}>)",
                        "choose_workers", _WORKERS_HINT)
            value = None if got is None else _whole_number(got)
            if got is not None and value is None:
                wrong.append(f"{what}: returned {got!r}, not a number of workers or None")
            elif value != truth:
                if truth is None:
                    wrong.append(f"{what}: you chose {value}; check that it meets both goals in every run")
                elif value is None:
                    wrong.append(f"{what}: you returned None; some count meets both goals")
                else:
                    wrong.append(f"{what}: you chose {value} ({'too many' if value > truth else 'too few'})")
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(tables)} made-up tables get a wrong choice:", _WORKERS_HINT +
                        " Return None when no count meets both goals.", _shown(wrong))
        nones = sum(_cases.choose_workers(t, f, b, c) is None for _, t, f, b, c in tables)
        return CheckResult(EX_WORKERS, "passed", f"All {len(tables)} made-up tables right: the fewest workers that "
                           "meet the rate and the p95 budget in every run, one per NPU core at most, and None when "
                           "none does.", [f"{len(tables)} tables, {nones} with no count that meets both goals"])

    return _LAB.run(EX_WORKERS, body)


# =========================================================================== exercises 3 and 4: the loop
#: frames per check run (the simulator runs the 480 x 480 model in a few hundred ms)
LOOP_FRAMES = 4


def _model_file_here(rt: Any) -> str:
    from ._core import _model_file
    soc = getattr(rt, "soc", None) or "rk3588"
    return _model_file(PIPE_MODEL, {"rk3566": "rk3568"}.get(soc, soc))


def _require_pipe_model(rt: Any) -> None:
    """A failure that says where to run the exercise when the runtime is not an RK3588's (the
    only SoC the model's .rknn file is built for)."""
    soc = getattr(rt, "soc", None) or "rk3588"
    if soc != "rk3588":
        raise _Fail(f"{PIPE_MODEL}.rknn is built for RK3588 only, not for the {soc}.",
                    "run this exercise on the simulator: RKNNLAB_BACKEND=sim, without RKNNLAB_SIM_SOC (it then "
                    "plays an RK3588).")


def _loop_result(fn: Callable[..., Any], args: Tuple[Any, ...], what: str, name: str, hint: str,
                 n_frames: int) -> List[Any]:
    try:
        got = fn(*args)
    except NotImplementedError as exc:
        raise _student_error(exc, what, _todo(name))
    except RknnError as exc:
        raise _Fail(f"{what}: the runtime refused: {exc.function} returned {exc.code} ({exc.name}): {exc.detail}",
                    hint)
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


def compare_frames(detect: Callable[..., Any], n_frames: int = LOOP_FRAMES, seed: int = 0) -> str:
    """Run ``detect(rt, frames)`` (or ``detect(rt, frames, letterbox)``) on ``n_frames`` camera
    frames of a seeded choice: one line per frame with the boxes it found, and whether they are
    the boxes a plain run of the same frame finds (the check's reference).  With a letterbox
    argument, each line also says whether the letterbox got a buffer it had written before.
    An error in ``detect`` becomes one line: this never raises."""
    import inspect
    from .. import open_runtime
    from ..pipeline import letterbox
    rt = open_runtime()
    counting = _cases.Counting(rt)
    watched = _cases.WatchedLetterbox(letterbox)
    with_letterbox = callable(detect) and len(inspect.signature(detect).parameters) >= 3
    try:
        try:
            _require_pipe_model(rt)
        except _Fail as f:
            return f"{f.message} Hint: {f.hint}"
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
        verdict = "the same boxes" if g == r else ("the boxes of the frame before" if k and g == ref[k - 1]
                                                   else "other boxes")
        line = f"frame {k + 1}: yours {_count_boxes(g or ()):>9}, reference {_count_boxes(r):>9}: {verdict}"
        if with_letterbox and k and k < len(calls):
            line += "; letterbox buffer " + ("reused" if calls[k][1] else "allocated since the frame before")
        lines.append(line)
    return "\n".join(lines)


def measure_workers(counts: Sequence[int] = (1, 2, 3), repeats: int = 3, n_frames: int = 24) -> Any:
    """Measure the pipeline with each number of workers (one per NPU core), ``repeats`` runs
    each: a table with one row per run (workers, run, fps, mean_ms, p95_ms), the runs in the
    order they were made.  Timing runs replay the model's outputs (rknnlab.sim.values_replayed
    on the simulator), so they time the modeled NPU and this host's CPU stages."""
    import pandas as pd
    from ..pipeline.loop import distinct_frames, run
    frames = distinct_frames(4)
    run(frames, workers=max(counts), n_frames=n_frames, values=True)    # a warm-up, not kept
    rows = []
    source = ""
    for r in range(repeats):
        for w in counts:
            res = run(frames, workers=w, n_frames=n_frames, values=True)
            lat = res.latencies_ms
            rows.append({"workers": w, "run": r + 1, "fps": round(float(res.fps), 1),
                         "mean_ms": round(float(np.mean(lat)), 1), "p95_ms": round(float(res.latency["p95_ms"]), 1)})
            source = res.source.split(" — ")[0]
    table = pd.DataFrame(rows, columns=list(_cases.COLUMNS)).sort_values(["workers", "run"]).reset_index(drop=True)
    table.attrs["source"] = f"{source}: {repeats} runs of {n_frames} frames per worker count"
    return table


def try_choice(choose_workers: Callable[..., Any], table: Any, target_fps: float, p95_budget_ms: float,
               npu_cores: int = 3) -> str:
    """One line: what ``choose_workers`` answers for the lab's own table (never raises)."""
    if table is None:
        return "no measured table on this board: run exercise 5 on the simulator"
    try:
        got = choose_workers(table.copy(), target_fps, p95_budget_ms, npu_cores)
    except NotImplementedError:
        return "not done yet: choose_workers still raises NotImplementedError"
    except Exception as exc:
        return f"choose_workers raised {type(exc).__name__}: {exc}"
    goal = f"{target_fps:g} fps with p95 <= {p95_budget_ms:g} ms on {npu_cores} NPU cores"
    return f"{goal}: {'no count meets both' if got is None else f'{got} worker(s)'}"


_SYNC_HINT = ("The NPU writes the output mem during rknn_run. On a context made with this flag, which frame's "
              "map does the CPU see in a cacheable mem, and from which call on?")


def check_synced_loop(detect: Callable[[Any, Sequence[Any]], Sequence[Any]]) -> CheckResult:
    """Exercise 3: ``detect(rt, frames) -> [boxes of each frame]``: the zero-copy loop of the
    lab, fixed so that each frame's boxes are that frame's.

    The check draws LOOP_FRAMES camera frames at every call, from shots of different
    sources in turn (so consecutive frames have different boxes), runs your function on them
    with a runtime that passes every call through, and runs the same frames itself on a plain
    context (flag 0, rknn_inputs_set, rknn_outputs_get: nothing cached) through the same
    letterbox and find_boxes.  Every frame's boxes must equal the reference's.  A failure
    says how many frames differ and how many carry the boxes of the frame before."""
    def body() -> CheckResult:
        _require_function(detect, "check_synced_loop(detect)")
        from .. import open_runtime
        rt = open_runtime()
        counting = _cases.Counting(rt)
        try:
            _require_pipe_model(rt)
            frames = _cases.pick_frames(np.random.default_rng(_fresh_seed()), LOOP_FRAMES)
            got = _loop_result(detect, (counting, frames), f"detect(rt, <{LOOP_FRAMES} frames>)", "detect",
                               _SYNC_HINT, LOOP_FRAMES)
            counting.cleanup()
            ref = _cases.reference_boxes(rt, _model_file_here(rt), frames)
        finally:
            counting.cleanup()
            rt.close()
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        late = [k for k in wrong if k and got[k] == ref[k - 1]]
        details = [f"frame {k + 1}: your {_count_boxes(got[k])}, the reference's {_count_boxes(ref[k])}"
                   for k in wrong]
        if late:
            raise _Fail(f"{len(late)} of {LOOP_FRAMES} frames show the boxes of the frame before: your loop reads "
                        "each output one frame late.", _SYNC_HINT, details)
        if len(set(got)) == 1 and len(set(ref)) > 1:
            raise _Fail(f"all {LOOP_FRAMES} frames show the same boxes, while the reference run of the same frames "
                        f"finds {len(set(ref))} different sets: the CPU never sees a new map.", _SYNC_HINT, details)
        if wrong:
            raise _Fail(f"{len(wrong)} of {LOOP_FRAMES} frames have other boxes than the reference run of the same "
                        "frames.", "Keep the lab's letterbox, model and find_boxes with its default thresholds; "
                        "change only what the CPU reads, and when. " + _SYNC_HINT, details)
        return CheckResult(EX_SYNC, "passed", f"Every frame's boxes are its own, for {LOOP_FRAMES} frames the check "
                           "drew: the CPU reads what the NPU wrote for that frame.",
                           [f"frames {', '.join(str(f.index) for f in frames)} of the camera; "
                            f"{sum(len(r) for r in ref)} boxes in all"])

    return _LAB.run(EX_SYNC, body)


_ALLOC_HINT = ("Allocate the buffer the letterbox writes into once, before the loop, sized for the model's "
               "input, and hand that same buffer to every frame. " + REUSE_RULE)


def check_allocation_once(detect_once: Callable[[Any, Sequence[Any], Callable[..., Any]], Sequence[Any]]) -> CheckResult:
    """Exercise 4: ``detect_once(rt, frames, letterbox) -> [boxes of each frame]``: the
    per-frame loop of the lab with its allocation moved out of the loop.

    The check draws LOOP_FRAMES camera frames at every call and hands your function a
    runtime that counts the mems made after the first rknn_run (DMA churn), and a letterbox
    stage that records, before every call, whether the buffer it is handed still holds what
    an earlier call wrote (the buffer was reused) or not (it was allocated since).  Every
    buffer an earlier call wrote stays referenced until the check ends, so a new buffer cannot
    take its bytes.  From the second frame on, every letterbox call must get a reused buffer
    and no mem may be made; every frame's boxes must equal the reference run's (exercise 3)."""
    def body() -> CheckResult:
        _require_function(detect_once, "check_allocation_once(detect_once)")
        from .. import open_runtime
        from ..pipeline import letterbox
        rt = open_runtime()
        counting = _cases.Counting(rt)
        watched = _cases.WatchedLetterbox(letterbox)
        try:
            _require_pipe_model(rt)
            frames = _cases.pick_frames(np.random.default_rng(_fresh_seed()), LOOP_FRAMES)
            got = _loop_result(detect_once, (counting, frames, watched), f"detect_once(rt, <{LOOP_FRAMES} frames>, "
                               "letterbox)", "detect_once", _ALLOC_HINT, LOOP_FRAMES)
            counting.cleanup()
            calls = list(watched.calls)
            watched.release()
            ref = _cases.reference_boxes(rt, _model_file_here(rt), frames)
        finally:
            watched.release()
            counting.cleanup()
            rt.close()
        if len(calls) < LOOP_FRAMES:
            raise _Fail(f"the letterbox stage you were given ran {len(calls)} times for {LOOP_FRAMES} frames.",
                        "call the letterbox argument of detect_once once per frame (not pipeline.letterbox "
                        "itself): the check watches the buffer you hand it.")
        if counting.mems_after_first_run:
            raise _Fail(f"your loop made {counting.mems_after_first_run} mems after its first rknn_run: a DMA "
                        f"allocation per frame ({LOOP_FRAMES} frames).", "Create every mem once, before the loop, "
                        "and bind it once. " + REUSE_RULE)
        fresh = sum(not held for _, held in calls[1:])
        if fresh:
            raise _Fail(f"{fresh} of {len(calls) - 1} letterbox calls after the first got a buffer allocated since "
                        "the call before (it did not hold what an earlier call wrote).", _ALLOC_HINT,
                        [f"letterbox buffers: {', '.join(f'{n:,} B' for n, _ in calls)}"])
        wrong = [k for k in range(LOOP_FRAMES) if got[k] != ref[k]]
        if wrong:
            raise _Fail(f"{len(wrong)} of {LOOP_FRAMES} frames have other boxes than the reference run of the same "
                        "frames.", "Reusing the buffer must not change what each frame computes: letterbox each "
                        "frame before its run, and read its output after the run.",
                        [f"frame {k + 1}: your {_count_boxes(got[k])}, the reference's {_count_boxes(ref[k])}"
                         for k in wrong])
        return CheckResult(EX_ALLOC, "passed", f"No allocation per frame: from the second of {LOOP_FRAMES} frames on, "
                           "the letterbox wrote into a buffer it had written before, no mem was made after the first "
                           "run, and every frame's boxes are right.",
                           [f"letterbox buffer: {calls[0][0]:,} B, reused {len(calls) - 1} times"])

    return _LAB.run(EX_ALLOC, body)


_LAB = Lab("Lab 6", [EX_SIZES, EX_THRESH, EX_SYNC, EX_ALLOC, EX_WORKERS])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_frame_sizes": EX_SIZES, "check_int8_threshold": EX_THRESH,
                      "check_synced_loop": EX_SYNC, "check_allocation_once": EX_ALLOC,
                      "check_workers": EX_WORKERS})
