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

EX_BOTTLENECK = "Exercise 1 — find the bottleneck phase of a pipeline"
EX_READ = "Exercise 2 — predict a layer's DDR read bytes"
EX_FLOAT = "Exercise 4 — choose want_float from a measured cost"
EX_DDR = "Exercise 3 — spot the DDR-bound layers in a profile"
EX_SPEEDUP = "Exercise 5 ★ — predict the multi-core speedup"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


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
                    what = f"bottleneck(<pipeline {n}>)"
                    try:
                        answer = bottleneck(list(steps))
                    except Exception as exc:
                        raise _student_error(exc, what, "call every step of a frame in order, many frames, "
                                             "and time each step with time.perf_counter().")
                    if answer is None:
                        if n == 1:
                            raise _not_done(f"{what} returned None.", "return one of: " + ", ".join(PHASES) + ".")
                        raise _Fail(f"{what} returned None.", "return one of: " + ", ".join(PHASES) + ".")
                    word = str(answer).strip()
                    if word not in PHASES:
                        raise _Fail(f"{what} returned {answer!r}, not a phase of the pipeline.",
                                    "return the name of a phase: " + ", ".join(PHASES) + ".")
                    medians = _cases.measure_phases(steps, frames=8, skip=2)
                    ranked = sorted(medians, key=medians.get, reverse=True)
                    if medians[ranked[0]] < _MARGIN * medians[ranked[1]]:
                        details.append(f"pipeline {n}: not judged (this machine was too busy for a clear "
                                       "slowest phase)")
                        continue
                    judged += 1
                    shown = ", ".join(f"{p} {_ms(medians[p])}" for p in PHASES)
                    if word != ranked[0]:
                        if word == kind[2]:
                            hint = ("The phase you named was slow on its first call only (a lazy set-up). Run "
                                    "many frames, leave out the first ones (the warm-up) and judge each phase by "
                                    "its median wall time (time.perf_counter()).")
                        elif ranked[0] == "run":
                            hint = ("rknn_run waits for the NPU, and a CPU clock (time.process_time) does not "
                                    "count waiting. Time each step alone in wall time, with time.perf_counter().")
                        else:
                            hint = ("Time each step alone with time.perf_counter() (wall time: the run waits for "
                                    "the NPU, and a CPU clock does not count waiting). Start the clock before "
                                    "each step, not once per frame. Run many frames and leave out the first: a "
                                    "lazy set-up makes one phase slow once. Judge by the median.")
                        raise _Fail(f"pipeline {n}: you said {word!r}, but the check's own timing (medians over "
                                    f"8 frames) shows another phase is the slowest: {shown}.", hint,
                                    details)
                    details.append(f"pipeline {n}: {word} — right ({shown})")
                finally:
                    pipe.close()
        finally:
            rt.close()
        if judged < 3:
            raise _Fail(f"only {judged} of the pipelines had a clear slowest phase on this machine.",
                        "run the check again when the machine is less busy.", details)
        return CheckResult(EX_BOTTLENECK, "passed", f"All {judged} judged pipelines right: you timed the phases "
                           "in wall time, and a slow first call did not decide your answer (leaving out the "
                           "warm-up, or a median, keeps it out).", details)

    return _LAB.run(EX_BOTTLENECK, body)


# =========================================================================== exercise 2
def _native_attrs(rt: Any, socs: Sequence[str]) -> Tuple[Dict[str, abi.rknn_tensor_attr], str]:
    """{soc: the NC1HWC2 native output attr of a model built for it}: queried from a real
    context for the runtime's own SoC, read from the compiler report for the others."""
    own = _soc_of(rt)
    attrs = {soc: _cases.native_attr_from_report(soc) for soc in socs}
    model = _cases.nc1hwc2_model(own)
    how = "from the compiler reports"
    if own in attrs and model:
        ctx = rt.init(_model_file(model, own))
        try:
            attrs[own] = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        finally:
            rt.destroy(ctx)
        how = f"queried with RKNN_QUERY_NATIVE_OUTPUT_ATTR for {own}, from the compiler reports for the others"
    return attrs, how


def _copy_attr(attr: abi.rknn_tensor_attr) -> abi.rknn_tensor_attr:
    copy = abi.rknn_tensor_attr()
    ctypes.memmove(ctypes.addressof(copy), ctypes.addressof(attr), ctypes.sizeof(copy))
    return copy


def _layer_text(case: Dict[str, Any]) -> str:
    layer = case["layer"]
    shapes = ",".join("(" + ",".join(map(str, s)) + ")" for s in layer["input_shapes"])
    if case["model"] == "made-up":
        return f"made-up layer {layer['id']} ({case['soc']}) {layer['op']} {shapes}"
    # the profile's ID counts from 1, the compiler's layer from 0 (chapter 3 §2)
    return (f"{case['model']} {case['soc']}, compiler layer {layer['id'] - 1} (profile ID {layer['id']}) "
            f"{layer['op']} {shapes}")


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
            what = f"predict_read_bytes(<{_layer_text(case)}>, <native attr>)"
            try:   # copies: the student's function may change what it is given
                got = predict_read_bytes(copy.deepcopy(case["layer"]), _copy_attr(attrs[case["soc"]]))
            except Exception as exc:
                raise _student_error(exc, what, "read C2 from dims[4] of the native attr, then add up what the "
                                     "layer reads, in bytes." if isinstance(exc, NotImplementedError) else
                                     "your function raised on this layer: try it on the layers the notebook "
                                     "prints, and on an Add with two inputs and a Concat with three.")
            if got is None:
                if n == 0:
                    raise _not_done(f"{what} returned None.", "return a number of bytes.")
                raise _Fail(f"{what} returned None.", "return a number of bytes.")
            value = float(got) if isinstance(got, (float, np.floating)) else _whole_number(got)
            if value is None or (isinstance(value, float) and not np.isfinite(value)):
                raise _Fail(f"{what} returned {got!r}, not a number of bytes.", "return an int.")
            if not _cases.within(value, case["truth"]):
                wrong.append((case, int(value)))
        details = [f"{len(real)} layers from {len({c['model'] for c in real})} shipped models and {len(socs)} SoCs "
                   f"({', '.join(socs)}), and {len(made_up)} made-up layers; native attrs {how}"]
        if wrong:
            where: Dict[str, int] = {}
            for case, _ in wrong:
                key = f"{case['soc']} {case['layer']['op']}"
                where[key] = where.get(key, 0) + 1
            shown = [f"{_layer_text(c)}: you said {v:,} bytes, "
                     + ("the rule gives" if c["model"] == "made-up" else "the compiler's RW column says")
                     + f" {int(c['truth']):,}" for c, v in wrong[:4]]
            places = ", ".join(f"{k} ({v})" for k, v in sorted(where.items(), key=lambda kv: -kv[1])[:6])
            n_made_up = sum(c["model"] == "made-up" for c, _ in wrong)
            kb = [v for c, v in wrong if c["truth"] > 0 and abs(v * 1024 / c["truth"] - 1) < 0.1]
            hint = ("Count what the layer reads: every activation input at 1 byte per element, its channels "
                    "padded up to a multiple of C2, plus the weights (not padded). Not the output. C2 is "
                    "the channel block of NC1HWC2: read it from dims[4] of the native attr; never assume it.")
            if len(kb) > len(wrong) // 2:
                hint = "Your numbers are about 1024 times too small: did you return KB? Return bytes. " + hint
            raise _Fail(f"{len(wrong)} of {len(cases)} layers are off by more than 8% of the expected figure "
                        f"plus 2 KiB ({n_made_up} of them made-up). Where they are: {places}.", hint,
                        shown + details)
        return CheckResult(EX_READ, "passed", f"All {len(cases)} layers within 8% + 2 KiB of the expected figure, "
                           "shipped and made-up: activations padded to C2, plus the weights.", details)

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
            what = f"ddr_bound(<profile {n}>)"
            try:
                got = ddr_bound(text)
            except Exception as exc:
                raise _student_error(exc, what, "read the rows between the header's dashed line and the next "
                                     "dashed line; the Cycles column is DDR/NPU/Total.")
            if got is None:
                if n == 1:
                    raise _not_done(f"{what} returned None.", "return the IDs, e.g. a list of ints.")
                raise _Fail(f"{what} returned None.", "return the IDs, e.g. a list of ints.")
            ids = _as_ids(got)
            if ids is None:
                items = [] if isinstance(got, (str, bytes)) else list(got) if hasattr(got, "__iter__") else []
                if isinstance(got, (str, bytes)) or any(isinstance(i, (str, bytes)) for i in items):
                    raise _Fail(f"{what} returned strings, not ints: IDs as the text prints them.",
                                "convert each ID with int(...) and return a list of ints, e.g. [4, 9, 17].")
                kinds = sorted({type(i).__name__ for i in items}) or [type(got).__name__]
                raise _Fail(f"{what} returned {type(got).__name__} of {', '.join(kinds)}, not a collection of "
                            "whole-number layer IDs.", "return the IDs of the ID column as ints, e.g. [4, 9, 17].")
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
                lines = [f"you returned {v} {_cases.trap_words(k)}" for k, v in groups.items()]
                lines += [f"you left out {v} {_cases.trap_words(k)}" for k, v in lost.items()]
                hint = ("A layer is DDR-bound when its DDR cycles are more than its NPU cycles (Cycles is "
                        "DDR/NPU/Total). Equal cycles are not DDR-bound; 0/0 says nothing. Not the slowest "
                        "layers, not the largest RW(KB). Return the IDs as the profile prints them.")
                shifted = [k for k in (-1, 1) if {i - k for i in ids} == right]
                if shifted:
                    hint = (f"Your IDs look shifted by {shifted[0]:+d}: the profile numbers layers from 1 (the "
                            "compiler's log numbers them from 0). Return the ID column as printed. " + hint)
                raise _Fail(f"profile {n} ({len(rows)} layers): your IDs are not its DDR-bound layers.", hint,
                            lines + details)
            details.append(f"profile {n}: {len(right)} of {len(rows)} layers — right")
        return CheckResult(EX_DDR, "passed", f"All {len(cases)} profiles right: more DDR cycles than NPU cycles, "
                           "ties and 0/0 layers left out.", details)

    return _LAB.run(EX_DDR, body)


# =========================================================================== exercise 4
def _pairing_note(unpaired: int, gets: int, runtime_buffers: int) -> str:
    """Two sentences: the course's pairing rule, and why a missing release is no failure here.
    Rockchip's demos disagree with each other on it: the lab's folded detail under exercise 4
    gives both (the course's pairing sentence)."""
    why = ("with is_prealloc = 1 the release frees nothing of yours, a simulator assumption (A15)"
           if not runtime_buffers else
           f"but {runtime_buffers} of your gets used is_prealloc = 0, whose buffers only a release frees")
    return (f"Note: {unpaired} of your {gets} rknn_outputs_get calls had no rknn_outputs_release; pair every get "
            f"with one release (the course's pairing rule, chapter 4). Not a failure here: {why}.")


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
                what = f"choose_want_float(<runtime {n}>, ctx)"
                try:
                    got = choose_want_float(planted, ctx)
                except Exception as exc:
                    raise _student_error(exc, what, "time rt.outputs_get (and your dequantize) several times each "
                                         "way; pair every get with rt.outputs_release.")
                if got is None:
                    if n == 1:
                        raise _not_done(f"{what} returned None.", "return 0 or 1.")
                    raise _Fail(f"{what} returned None.", "return 0 or 1.")
                value = _whole_number(got)
                if value not in (0, 1):
                    raise _Fail(f"{what} returned {got!r}, not 0 or 1.", "return the want_float you choose: 0 or 1.")
                unpaired = max(planted.gets - planted.releases, 0)
                if unpaired and not noted:
                    noted = True
                    details.append(_pairing_note(unpaired, planted.gets, planted.gets_runtime_buffers))
                cost = _cases.cost_both_ways(planted, ctx, repeats=5)
                right = _cases.PROFILE_TRUTH[profile]
                shown = (f"want_float = 1: {_ms(cost[1])} per get; want_float = 0 + dequantize: {_ms(cost[0])}")
                if value != right:
                    raise _Fail(f"runtime {n}: you chose want_float = {value}, but the check measured: {shown}.",
                                "Measure what you will pay per frame on the runtime you are given: the get with "
                                "want_float = 1, against the get with want_float = 0 plus your dequantize of every "
                                "output. Repeat each several times and compare medians.", details)
                details.append(f"runtime {n}: want_float = {value} — right ({shown})")
        finally:
            rt.destroy(ctx)
            rt.close()
        return CheckResult(EX_FLOAT, "passed", "Every choice matches the check's own measurement: you measured the "
                           "whole cost of each way on the runtime you were given.", details)

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
        out.append((f"made-up model {len(out) + 1} ({len(layers)} layers)", table, run_ms, truth))
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
            what = f"predict_speedup(<{name} profile>, {run_ms:.3f}, {n})"
            asked[0] += 1
            try:
                got = predict_speedup(table.copy(), run_ms, n)
            except Exception as exc:
                raise _student_error(exc, what, "use the profile's op, target and time_us columns and run_ms; "
                                     "the model may hold ops the practice model does not.")
            if got is None:
                if asked[0] == 1:
                    raise _not_done(f"{what} returned None.", "return a number: the predicted speedup.")
                raise _Fail(f"{what} returned None.", "return a number: the predicted speedup.")
            try:
                value = float(got)
            except (TypeError, ValueError):
                raise _Fail(f"{what} returned {got!r}, not a number.", "return a float, e.g. 1.25.")
            if np.isfinite(value) and abs(value - truth) <= tol * truth:
                details.append(f"{name} on {n} cores: you predicted {value:.3f}x — right")
                return
            # the speedup is not shown: a table of them would pass without a model
            off = "more than 10%" if not np.isfinite(value) or abs(value - truth) > 0.1 * truth \
                else f"{tol:.0%} to 10%"
            wrong.append(f"{name} on {n} cores: you predicted {value:.3f}x, {off} "
                         + ("too high" if value > truth else "too low"))

        try:
            if not cores:
                where = ("unset RKNNLAB_SIM_SOC: the simulator then plays an RK3588." if rt.backend == "sim"
                         else "run this exercise on an RK3588, or on the simulator: RKNNLAB_BACKEND=sim.")
                raise _Fail(f"the {soc} has one NPU core: there is no multi-core speedup to measure here.", where)
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
            raise _Fail(f"{len(wrong)} of {asked[0]} predictions are off by more than {tol:.0%} of the "
                        "speedup:", "Only some ops are split over the cores; the others run on one core, "
                        "and the run's fixed overhead does not shrink. A split layer is not n times faster, and "
                        "each one pays for the hand-over between cores. Measure both on the practice model's "
                        "profiles first. Made-up models cannot be run: predict from the profile alone.",
                        wrong + details)
        return CheckResult(EX_SPEEDUP, "passed", f"All {asked[0]} predictions within {tol:.0%} of the "
                           "speedups, measured and made-up: only the split ops gain, each at its own rate and "
                           "cost.", details)

    return _LAB.run(EX_SPEEDUP, body)


_LAB = Lab("Lab 3", [EX_BOTTLENECK, EX_READ, EX_DDR, EX_FLOAT, EX_SPEEDUP])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_bottleneck": EX_BOTTLENECK, "check_read_bytes": EX_READ,
                      "check_want_float": EX_FLOAT, "check_ddr_bound": EX_DDR, "check_speedup": EX_SPEEDUP})
