"""Lab 7, exercises 1-4: the review of chapters 1-7.

================================  ==============================================================
:func:`check_sizes`               1. ``predicted``: a dict of five sizes in bytes, judged
                                  against the simulator's own queries of the SoC each names
:func:`check_failing_calls`       2. four fixed functions ``f(rt, image) -> scores``: no RKNN
                                  error (caught or not) and the check's own scores
:func:`check_traces`              3. ``check_traces(traces, names)``: the name of each run of
                                  :func:`memory_traces`, judged by the check's measurement
:func:`check_rows`                4. ``fill(buf, image, attr)``: an 8×8 digit written into a
                                  bound input mem, on simulated RK3588 and RK3568
================================  ==============================================================

Each check measures what it judges on a runtime it opens itself; the truth lives in private
code; the messages give measured numbers and a hint, never the answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.errors import RknnError
from . import _lab07_review_cases as _cases
from ._core import (CheckResult, _Fail, _current_soc, _fresh_seed, _not_done, _open_runtime, _require_function,
                    _soc_of, _student_error, _whole_number)
from ._lab07_common import EX_CALLS, EX_ROWS, EX_SIZES, EX_TRACES, _LAB

__all__ = ["check_sizes", "check_failing_calls", "check_traces", "check_rows", "SIZE_QUESTIONS",
           "TRACE_NAMES", "memory_traces", "Traces", "ALIGN_RULE", "ERROR_RULE", "REUSE_RULE",
           "OUTPUT_SIZE_RULE", "BOUND_SIZE_RULE", "C2_RULE"]

# the canonical sentences (chapter 7's R7a and R7d; DECISIONS 1, 2, 3' and 5)
ALIGN_RULE = ("Alignment is about rows, not start addresses. A zero-copy input's rows are w_stride pixels "
              "apart, and its buffer holds size_with_stride bytes. A buffer you pass to rknn_inputs_set needs "
              "no alignment: the runtime copies it.")
ERROR_RULE = ("An error code names a kind of problem, not its cause. Before you change code, read the "
              "runtime's log (RKNN_LOG_LEVEL=4), dmesg and the doctor.")
REUSE_RULE = "Reuse means no allocation per call. Flat memory only shows there is no leak."
OUTPUT_SIZE_RULE = ("A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, "
                    "attr.size bytes with want_float = 0. Reallocate only when it is too small; a larger buffer "
                    "is fine if rknn_output.size gives its real capacity.")
BOUND_SIZE_RULE = ("Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr "
                   "(native, or a plain input attr whose rows may be padded). For a plain output attr you set "
                   "to FLOAT32, use n_elems × 4 bytes.")
C2_RULE = ("C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on "
           "rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; "
           "never assume it.")


def _todo(name: str) -> str:
    return f"write {name}, then run this check again. Open a folded hint if you are stuck."


# =========================================================================== exercise 1: sizes
#: exercise 1's questions: key -> what to predict (bytes)
SIZE_QUESTIONS = {
    "digits_input_rk3588": "digits_cnn on RK3588: size_with_stride of the native input attr",
    "digits_input_rk3568": "digits_cnn on RK3568: size_with_stride of the native input attr",
    "mobilenet_float_output": "mobilenet_v2: the bytes an is_prealloc = 1 output buffer needs with want_float = 1",
    "ppocr_native_output_rk3568": "ppocr_det on RK3568: the bytes of the native (NC1HWC2) output",
    "ppocr_native_output_rk3588": "ppocr_det on RK3588: the bytes of the native (NC1HWC2) output",
}

_MISTAKES = {
    "n_elems": "n_elems × 1 byte: the rows are not padded here, yet a zero-copy input's rows are",
    "other_soc": "the other SoC's size: the width alignment is not the same on both",
    "float": "a float32 size: the native input is 1 byte per element",
    "align64": "rows or the buffer padded to 64 bytes: no document asks for that",
    "int8_for_float": "1 byte per element: that is the int8 output, not the float32 buffer",
    "float16": "2 bytes per element: want_float = 1 gives float32",
    "plain": "the plain output's size: the native output is NC1HWC2, in blocks of C2 channels",
    "c2_assumed": "a C2 of the other SoC family",
    "c1_from_ceil": "C1 computed as ceil(C / C2): the native attr's dims[1] says otherwise",
}

#: each question's hint: the rules it uses, each given once however many answers break it
_SIZE_HINTS = {
    "digits_input_rk3588": (ALIGN_RULE,),
    "digits_input_rk3568": (ALIGN_RULE,),
    "mobilenet_float_output": (OUTPUT_SIZE_RULE,),
    "ppocr_native_output_rk3568": (C2_RULE,),
    "ppocr_native_output_rk3588": (C2_RULE, "C1 too: read dims[1] of the native attr (the compiler report "
                                            "lists it)."),
}


def check_sizes(predicted: Dict[str, Any]) -> CheckResult:
    """Exercise 1: ``predicted`` maps every key of :data:`SIZE_QUESTIONS` to a size in bytes (an
    int).  The check opens a simulator of each SoC named and reads the sizes from the runtime's
    own queries (rknn_query of the native and plain attrs).  A wrong size is named "too small" or
    "too large", with the plausible mistake it matches, never the size."""
    def body() -> CheckResult:
        if not isinstance(predicted, dict):
            raise _not_done(f"expected a dict of predictions, got {type(predicted).__name__}.",
                            "pass the dict itself: check_sizes(predicted)")
        missing = [k for k in SIZE_QUESTIONS if predicted.get(k) is None]
        if len(missing) == len(SIZE_QUESTIONS):
            raise _not_done("no size predicted yet (every key missing or None).", _todo("your five numbers"))
        if missing:
            raise _not_done(f"{len(missing)} of {len(SIZE_QUESTIONS)} sizes missing or None: "
                            f"{', '.join(missing)}.",
                            "predict every size, then run this check again.")
        truth = _cases.measured_sizes()
        wrong: List[str] = []
        hints: List[str] = []
        for key in SIZE_QUESTIONS:
            got = predicted[key]
            n = _whole_number(got)
            if n is None:
                wrong.append(f"{key}: {got!r} is not a whole number of bytes")
                continue
            right, mistakes = truth[key]
            if n == right:
                continue
            side = "too small" if n < right else "too large"
            why = _MISTAKES.get(mistakes.get(n, ""), "")
            wrong.append(f"{key}: {n:,} B is {side}" + (f" ({why})" if why else ""))
            hints += [rule for rule in _SIZE_HINTS[key] if rule not in hints]
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(SIZE_QUESTIONS)} sizes differ from what the simulator's queries "
                        "give:", " ".join(hints) if hints else "a size in bytes is a whole number (an int).",
                        wrong)
        return CheckResult(EX_SIZES, "passed", f"All {len(SIZE_QUESTIONS)} sizes equal the simulator's own "
                           "queries (simulated RK3588 and RK3568):",
                           [f"{key}: {truth[key][0]:,} B" for key in SIZE_QUESTIONS])

    return _LAB.run(EX_SIZES, body)


# =========================================================================== exercise 2: failing calls
_CALLS = (("fixed_prealloc", "an is_prealloc = 1 output buffer", OUTPUT_SIZE_RULE),
          ("fixed_load", "the model's bytes", "rknn_init takes a model that rknn-toolkit2 exported for this SoC, "
                                              "as its bytes or its path."),
          ("fixed_input", "the input", "rknn_input.index counts from 0 up to n_input − 1 "
                                       "(RKNN_QUERY_IN_OUT_NUM)."),
          ("fixed_soc", "the model file", "A .rknn file is compiled for one SoC: load the one built for the "
                                          "SoC of the runtime you are given (rt.soc), and change nothing else."))
_IMAGES_PER_CALL = 3
_SOC_HINT = ("Every function gets its runtime as rt: take the model for rt.soc (an RK3566 runs the RK3568 "
             "files), not for a SoC you know.")


def _other_soc(soc: str) -> str:
    """The SoC of the second runtime exercise 2 hands each function: another alignment and C2."""
    return "rk3588" if soc == "rk3568" else "rk3568"


def _judge_call(fn: Callable[..., Any], name: str, images: List[np.ndarray],
                soc: Optional[str] = None) -> Optional[str]:
    """None when ``fn`` runs on a fresh runtime (this machine's, or with ``soc`` a simulator of
    that SoC) with no RKNN error and gives the check's own scores for every image; else what is
    wrong.  Raises not done for a stub."""
    rt = _open_runtime() if soc is None else _cases.sim_runtime(soc)
    soc = _soc_of(rt)
    watch = _cases.ErrorWatch(rt)
    try:
        reference = _cases.reference_scores(rt, _cases.model_file(_cases.DIGITS, soc), images)
        differ: List[float] = []
        for image, ref in zip(images, reference):
            try:
                got = fn(watch, image.copy())
            except NotImplementedError as exc:
                raise _student_error(exc, f"{name}(rt, image)", _todo(name))
            except RknnError as exc:
                return f"{name}: {exc.function} still returned {exc.code} ({exc.name})."
            except Exception as exc:
                return f"{name} raised {type(exc).__name__}: {exc}"
            if watch.errors:
                e = watch.errors[0]
                return (f"{name}: {e.function} returned {e.code} ({e.name}) inside it, and your code caught "
                        "the error: catching an error does not fix the call.")
            if watch.inits == 0 or watch.gets == 0:
                return (f"{name}: it did not init a context and get its outputs on the runtime it was given "
                        f"({watch.inits} rknn_init, {watch.gets} rknn_outputs_get on rt).")
            if name == "fixed_prealloc" and 1 not in watch.prealloc_flags:
                return (f"{name}: every rknn_outputs_get had is_prealloc = 0: the runtime allocated the output, "
                        "so your buffer was never tried. Keep is_prealloc = 1 and size the buffer.")
            if got is None:
                return f"{name} returned None instead of the 10 scores."
            try:
                arr = np.asarray(got, dtype=np.float64).ravel()
            except (TypeError, ValueError):
                return f"{name} returned {type(got).__name__}, not the 10 scores."
            if arr.shape != ref.shape:
                return f"{name} returned {arr.size} values; the model gives {ref.size} scores."
            differ.append(float(np.max(np.abs(arr - ref))))
        bad = [d for d in differ if not d <= 1e-5]
        if bad:
            return (f"{name}: the scores differ from the check's own run for {len(bad)} of {len(images)} digits "
                    f"(largest difference {max(bad):.3g}).")
        return None
    finally:
        watch.cleanup()
        rt.close()


def check_failing_calls(fixed_prealloc: Callable[..., Any], fixed_load: Callable[..., Any],
                        fixed_input: Callable[..., Any], fixed_soc: Callable[..., Any]) -> CheckResult:
    """Exercise 2: four functions ``f(rt, image) -> scores`` (digits_cnn's 10 float32 scores of
    one 8×8 uint8 image, want_float = 1), the fixed versions of the four failing ones.

    Each runs on a fresh runtime the check opens (the board's, or the simulator of
    $RKNNLAB_SIM_SOC), then on a simulator of another SoC (RK3568, or RK3588 when the first is
    an RK3568), on three test digits it picks.  It passes when no RKNN function raised
    an error inside it (caught or not), it made its context on the runtime it was given, and its
    scores equal the check's own run (rknn_inputs_set, rknn_outputs_get) within 1e-5.
    ``fixed_prealloc`` must keep an is_prealloc = 1 output."""
    def body() -> CheckResult:
        functions = (fixed_prealloc, fixed_load, fixed_input, fixed_soc)
        for fn, (name, _, _) in zip(functions, _CALLS):
            _require_function(fn, f"pass the four functions themselves: check_failing_calls(fixed_prealloc, "
                              f"fixed_load, fixed_input, fixed_soc) ({name} is not a function)")
        rt_soc = _current_soc()
        images, _ = _cases.digits(rt_soc)
        pick = np.random.default_rng(_fresh_seed()).choice(len(images), _IMAGES_PER_CALL, replace=False)
        chosen = [np.ascontiguousarray(images[i]) for i in pick]
        wrong: List[str] = []
        hints: List[str] = []
        not_done: List[str] = []
        other = _other_soc(rt_soc)
        for fn, (name, what, hint) in zip(functions, _CALLS):
            try:
                problem = _judge_call(fn, name, chosen)
                if not problem:        # right for one SoC only is not a fix: the same call on another
                    problem = _judge_call(fn, name, chosen, soc=other)
                    if problem:
                        problem = f"on simulated {other.upper()} (the check's second runtime): {problem}"
            except _Fail as f:
                if f.status != "not done":
                    raise
                not_done.append(name)
                continue
            if problem:
                wrong.append(problem)
                hints.append(hint)
                if problem.startswith("on simulated") and _SOC_HINT not in hints:
                    hints.append(_SOC_HINT)
        if len(not_done) == len(functions):
            raise _not_done("the four functions still raise NotImplementedError.", _todo("the four fixed functions"))
        if wrong or not_done:
            details = wrong + [f"{n}: still raises NotImplementedError" for n in not_done]
            raise _Fail(f"{len(wrong) + len(not_done)} of 4 functions do not run yet:", " ".join(
                hints + [ERROR_RULE]) if hints else _todo(" and ".join(not_done)), details)
        return CheckResult(EX_CALLS, "passed", "All four functions run with no RKNN error and give the check's own "
                           f"scores for {_IMAGES_PER_CALL} digits it picked, on two runtimes.",
                           [f"runtimes: {rt_soc.upper()} (the one a notebook opens here) and simulated {other.upper()}",
                            "no error was caught and hidden: each call succeeded",
                            "each made its context on the runtime it was given"])

    return _LAB.run(EX_CALLS, body)


# =========================================================================== exercise 3: traces
#: the names exercise 3 accepts for a run
TRACE_NAMES = _cases.KINDS


def _trace_store() -> Tuple[Callable[[int, Tuple[str, ...]], None], Callable[[int], Optional[Tuple[str, ...]]]]:
    """Which loop each letter of a :class:`Traces` is, reachable only through these closures."""
    orders: Dict[int, Tuple[str, ...]] = {}

    def remember(token: int, order: Tuple[str, ...]) -> None:
        orders[token] = order

    def recall(token: int) -> Optional[Tuple[str, ...]]:
        return orders.get(token)

    return remember, recall


_remember, _recall = _trace_store()
_LETTERS = ("A", "B", "C")
_PLOT_OFFSET_KIB = 0.15    # runs A, B, C drawn this far apart, so equal numbers stay visible


@dataclass(frozen=True)
class Traces:
    """Three unlabelled runs of the same mobilenet_v2 loop body (inputs_set, run, outputs_get
    with want_float = 1), measured in this process: the heap in use after each frame and the
    heap's change inside each rknn_outputs_get (glibc mallinfo2)."""
    runs: Tuple[str, ...]
    after: Tuple[Tuple[float, ...], ...]
    inside: Tuple[Tuple[float, ...], ...]
    output_bytes: int
    source: str
    _token: int

    @property
    def table(self) -> Any:
        import pandas as pd
        from ..experiment.growth import HEAP_RESOLUTION, HEAP_STEP, growth
        rows = []
        for run, after, inside in zip(self.runs, self.after, self.inside):
            g = growth(np.arange(len(after)), after, step=HEAP_STEP, resolution=HEAP_RESOLUTION)
            rows.append({"run": run, "frames": len(after),
                         "heap after each frame": _growth_text(g),
                         "heap change inside each get (median)": f"{np.median(inside):+,.0f} B"})
        df = pd.DataFrame(rows)
        df.attrs["source"] = self.source
        return df

    def __repr__(self) -> str:
        lines = [f"Three runs of {_cases.TRACE_FRAMES} frames — {self.source} (output: "
                 f"{self.output_bytes:,} B of float32 per get)"]
        lines += self.table.to_string(index=False).splitlines()
        return "\n".join(lines)

    def plot(self) -> Any:
        """The heap in use after each frame (relative to the first) and the heap's change inside
        each get, one line per run.  Two runs can give the same numbers, so each run's points
        are drawn a little apart (by 0.15 KiB, said on the axis), as chapter 4 does."""
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
        # distinct line styles and markers: two runs may lie on top of each other
        styles = (("-", "o", 7), ("--", "x", 6), (":", ".", 4))
        offsets = (-_PLOT_OFFSET_KIB, 0.0, _PLOT_OFFSET_KIB)
        for k, (run, after, inside) in enumerate(zip(self.runs, self.after, self.inside)):
            line, marker, size = styles[k]
            a = np.asarray(after)
            left.plot(np.arange(1, len(a) + 1), (a - a[0]) / 1024 + offsets[k], linestyle=line, linewidth=2,
                      label=f"run {run}")
            right.plot(np.arange(1, len(inside) + 1), np.asarray(inside) / 1024 + offsets[k], label=f"run {run}",
                       marker=marker, markersize=size, markerfacecolor="none", linestyle="none")
        apart = f"runs drawn {_PLOT_OFFSET_KIB} KiB apart"
        left.set(xlabel="frame", ylabel=f"heap in use (KiB, vs frame 1)\n{apart}", title="after each frame")
        right.set(xlabel="frame", ylabel=f"heap change (KiB)\n{apart}", title="inside each rknn_outputs_get")
        for ax in (left, right):
            ax.legend(loc="best", fontsize=8)
            ax.grid(alpha=0.3)
        fig.suptitle(f"Three unlabelled loops — {self.source}", fontsize=10)
        fig.tight_layout()
        return fig


def memory_traces() -> Traces:
    """Run the three loops of exercise 3 in an order drawn now (runs A, B and C) and return their
    measurements (about 1 s)."""
    order = tuple(str(k) for k in np.random.default_rng(_fresh_seed()).permutation(list(_cases.KINDS)))
    measured = [_cases.measure_loop(kind, seed=k) for k, kind in enumerate(order)]
    token = _fresh_seed()
    _remember(token, order)
    return Traces(_LETTERS, tuple(tuple(m["after"]) for m in measured),
                  tuple(tuple(m["inside"]) for m in measured), measured[0]["output_bytes"],
                  measured[0]["source"], token)


def _growth_text(g: Any) -> str:
    """A growth verdict in a few words, per frame."""
    if g.verdict == "grows":
        return f"grows {g.slope:,.0f} ± {g.half_width:,.0f} B/frame"
    if g.verdict == "flat":
        return f"flat (|slope| < {g.floor:,.2g} B/frame)"
    return "cannot tell"


def _words(numbers: Dict[str, Any]) -> str:
    return (f"heap change inside each get {numbers['inside']:+,.0f} B (median; the output is "
            f"{numbers['output_bytes']:,} B), heap after each frame {_growth_text(numbers['growth'])}")


def check_traces(traces: Any, names: Any) -> CheckResult:
    """Exercise 3: ``names`` maps each run of ``traces`` (what :func:`memory_traces` returned) to
    one of :data:`TRACE_NAMES`.  The check runs the same three loops again and judges each by
    its own measurement: the heap's change inside each rknn_outputs_get and the growth of the
    heap after each frame (a slope with its 95% interval)."""
    def body() -> CheckResult:
        if not isinstance(names, dict) or all(v is None for v in names.values()):
            raise _not_done("no run named yet.", _todo("the name of each run"))
        if not isinstance(traces, Traces) or _recall(traces._token) is None:
            raise _Fail("traces is not what memory_traces() returned in this session.",
                        "pass the object memory_traces() gave you: check_traces(traces, names)")
        order = _recall(traces._token)
        given = {str(k).strip().upper(): (str(v).strip().lower() if v is not None else None)
                 for k, v in names.items()}
        missing = [r for r in traces.runs if given.get(r) is None]
        if missing:
            raise _not_done(f"run {', '.join(missing)} not named yet.", "name every run: A, B and C.")
        unknown = [f"{r}: {given[r]!r}" for r in traces.runs if given[r] not in _cases.KINDS]
        if unknown:
            raise _Fail(f"{len(unknown)} names are not one of {', '.join(repr(k) for k in _cases.KINDS)}:",
                        "use the three names exactly as written.", unknown)
        wrong: List[str] = []
        measured: List[str] = []
        for run, kind in zip(traces.runs, order):
            verdict, numbers = _cases.judge_loop(_cases.measure_loop(kind, seed=_fresh_seed() % 1000))
            if verdict == "cannot tell":          # a busy host: once more
                verdict, numbers = _cases.judge_loop(_cases.measure_loop(kind, seed=_fresh_seed() % 1000))
            if verdict == "cannot tell":
                raise _Fail(f"the check could not tell what run {run} does on this host: {_words(numbers)}.",
                            "run the check again when the machine is less busy.")
            measured.append(f"run {run}: {_words(numbers)}")
            if given[run] != verdict:
                wrong.append(f"run {run}: you named it {given[run]!r}; the check measured {_words(numbers)}")
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(traces.runs)} runs named wrongly (the check ran each loop again):",
                        REUSE_RULE + " Read both measurements of each run: the heap inside each get says whether "
                        "a get allocates; the heap after each frame says whether memory is given back.", wrong)
        return CheckResult(EX_TRACES, "passed", f"All {len(traces.runs)} runs named as the check's own "
                           f"measurement of the same loops says ({traces.source}):", measured)

    return _LAB.run(EX_TRACES, body)


# =========================================================================== exercise 4: rows
ROWS_SOCS = ("rk3588", "rk3568")
_DIGITS_PER_SOC = 12


def _rows_found(view: np.ndarray, image: np.ndarray, attr: abi.rknn_tensor_attr, what: str = "digit") -> str:
    """Where the image's rows landed in the mem, in words (for a failure)."""
    h, w, c = image.shape
    row = w * c
    for pitch in sorted({int(attr.w_stride) * c, int(attr.w_stride), row, 64, 16 * c, 8 * c}):
        end = (h - 1) * pitch + row
        if end <= view.size and all(np.array_equal(view[y * pitch:y * pitch + row], image[y].ravel())
                                    for y in range(h)):
            return f"the {what}'s rows start {pitch} bytes apart"
    return f"the {what}'s pixels are not found row by row in the mem (converted, or written elsewhere)"


def _judge_rows(fill: Callable[..., Any], soc: str, rng: np.random.Generator) -> Optional[str]:
    label = f"simulated {soc.upper()}"
    rt = _cases.sim_runtime(soc)
    try:
        path = _cases.model_file(_cases.DIGITS, soc)
        images, _ = _cases.digits(soc)
        chosen = [np.ascontiguousarray(images[i]) for i in rng.choice(len(images), _DIGITS_PER_SOC, replace=False)]
        reference = _cases.reference_scores(rt, path, chosen)
        ctx, mem, attr, view = _cases.zero_copy_context(rt, path)
        agree = 0
        where = ""
        try:
            for image, ref in zip(chosen, reference):
                view[:] = rng.integers(0, 256, view.size, dtype=np.uint8)    # no earlier digit helps
                given = abi.rknn_tensor_attr.from_buffer_copy(attr)
                try:
                    fill(view, image.copy(), given)
                except NotImplementedError as exc:
                    raise _student_error(exc, "fill(buf, image, attr)", _todo("fill"))
                except Exception as exc:
                    raise _Fail(f"{label}: fill(buf, image, attr) raised {type(exc).__name__}: {exc}",
                                ALIGN_RULE + " Read the distance between rows from the attr you are given.",
                                [f"{label}: w_stride {attr.w_stride}, size_with_stride {attr.size_with_stride} B, "
                                 f"the digit {image.shape[1]}×{image.shape[0]}"])
                rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
                rt.run(ctx)
                got = _cases.scores(rt, ctx)
                if np.allclose(got, ref, rtol=0, atol=1e-6):
                    agree += 1
                elif not where:
                    where = _rows_found(view, image, attr)
        finally:
            rt.destroy_mem(ctx, mem)
            rt.destroy(ctx)
        if agree == len(chosen):
            return None
        return (f"{label}: {agree} of {len(chosen)} digits give the scores of rknn_inputs_set; {where} "
                f"(attr: w_stride {attr.w_stride}, size_with_stride {attr.size_with_stride} B)")
    finally:
        rt.close()


def _judge_rows_rgb(fill: Callable[..., Any], rng: np.random.Generator) -> Optional[str]:
    """None when ``fill`` writes a made-up 3-channel image where the NPU reads it (rows at
    y × w_stride × C); else where its bytes landed."""
    buf, image, attr = _cases.made_up_rgb_input(rng)
    h, w, c = image.shape
    label = f"a made-up {w}×{h}×{c} uint8 input (w_stride {attr.w_stride})"
    try:
        fill(buf, image.copy(), abi.rknn_tensor_attr.from_buffer_copy(attr))
    except NotImplementedError as exc:
        raise _student_error(exc, "fill(buf, image, attr)", _todo("fill"))
    except Exception as exc:
        return f"{label}: fill(buf, image, attr) raised {type(exc).__name__}: {exc}"
    read = _cases.pixels_read(buf, attr)
    if np.array_equal(read, image):
        return None
    rows = int(np.sum([not np.array_equal(read[y], image[y]) for y in range(h)]))
    return (f"{label}: {rows} of {h} rows differ from what the NPU reads; "
            f"{_rows_found(buf, image, attr, 'image')}")


def check_rows(fill: Callable[..., Any]) -> CheckResult:
    """Exercise 4: ``fill(buf, image, attr)`` writes one 8×8×1 uint8 digit into ``buf``, a uint8
    view of a zero-copy input mem of digits_cnn bound once with rknn_set_io_mem (``attr``: the
    native input attr it is bound with, type UINT8, fmt NHWC).

    The check runs it on simulated RK3588 and RK3568 (whatever the machine), on 12 test digits
    per SoC that it picks, with random bytes in the mem before each fill, and compares the
    scores of each zero-copy run with rknn_inputs_set's for the same digit.  Then it gives
    ``fill`` a made-up 3-channel NHWC attr (rows padded to 16 pixels) and an image of a size it
    draws, and compares the bytes at y × w_stride × C + x × C + c with the image."""
    def body() -> CheckResult:
        _require_function(fill, "pass the function itself: check_rows(fill)")
        rng = np.random.default_rng(_fresh_seed())
        wrong = [w for w in (_judge_rows(fill, soc, rng) for soc in ROWS_SOCS) if w]
        rgb = _judge_rows_rgb(fill, rng)
        wrong += [rgb] if rgb else []
        if wrong:
            hint = (ALIGN_RULE + " Take the distance between rows from the attr you are given, not from a "
                    "number you know.")
            if rgb:
                hint += " Row y starts at byte y × w_stride × C, and each pixel holds C bytes (C channels)."
            if any("not found row by row" in w for w in wrong if w.startswith("simulated")):
                hint += (" The attr you bind says type UINT8: the runtime converts the pixels, so write them "
                         "as they are (no zp or scale).")
            raise _Fail(f"Your rows are not where the NPU reads them in {len(wrong)} of {len(ROWS_SOCS) + 1} "
                        "cases (simulated RK3588, RK3568, a made-up 3-channel input):", hint, wrong)
        return CheckResult(EX_ROWS, "passed", f"Every digit gives the scores of rknn_inputs_set on simulated "
                           "RK3588 and RK3568, and a 3-channel image lands at y × w_stride × C: your rows "
                           "follow the attr's w_stride.",
                           [f"{_DIGITS_PER_SOC} digits per SoC, picked by the check, random bytes in the mem "
                            "before each fill",
                            "a made-up 3-channel input of a size drawn now, its rows padded to 16 pixels"])

    return _LAB.run(EX_ROWS, body)
