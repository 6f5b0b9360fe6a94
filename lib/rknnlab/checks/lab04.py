"""Lab 4 (output reuse): one check per exercise.

==============================  ===========================================================
:func:`check_prealloc_variant`  1. a variant with ``is_prealloc = 1`` output buffers
:func:`check_reuse_detector`    2. ``reuses_output_memory(variant) -> bool`` by measurement
:func:`check_which_is_which`    3. leak / release / prealloc among ``MYSTERY`` A, B, C
:func:`check_output_guard`      4. ``ensure_output_buffer``: reallocate when the size changes
:func:`check_two_threads`       5. two threads, one output buffer each
==============================  ===========================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab04 as checks``.
"""
from __future__ import annotations

import ctypes
import math
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..rknn import abi, buffers
from ._core import (CheckResult, Lab, _Fail, _frames, _model_file, _not_done, _open_runtime,
                    _recorded_run, _reference_output, _soc_of, _Spy, _student_error, _current_soc,
                    _kb_per_1k_to_bytes_per_iter, _out_bytes, _variant_error)

__all__ = ["CheckResult", "check_prealloc_variant", "check_reuse_detector", "check_which_is_which",
           "check_output_guard", "check_two_threads", "summary", "results", "MYSTERY", "REUSE_CASES",
           "LAB4_MODEL", "load_digits_testset", "single_thread_predictions"]

#: the model of exercises 1-3: MobileNetV2's 1000-class output is 4,000 bytes as float32,
#: so a buffer allocated per call stands well above the harness's own noise
LAB4_MODEL = "mobilenet_v2"

#: RSS growth (kB per 1,000 iterations) the checks count as "grows": half a MobileNetV2 float
#: output per iteration.  The harness itself moves RSS by up to ~1 MiB per 1,000 iterations.
GROWTH_KB_PER_1K = 2048.0

# =========================================================================== exercise 1
EX1 = "Exercise 1 — the prealloc variant"


def check_prealloc_variant(variant: Callable[[Any], None], model: str = LAB4_MODEL,
                           iterations: int = 200, dry_iterations: int = 6) -> CheckResult:
    """Exercise 1: ``variant(lab)`` gets its outputs with ``is_prealloc = 1`` into buffers it
    allocated once, sized from RKNN_QUERY_OUTPUT_ATTR.

    Two measurements, each in a fresh process (a crash cannot take the notebook down): a
    short run through a recording runtime (every rknn_outputs_get must write into the
    caller's buffer, the same one every iteration, with the values a runtime-allocated get
    gives for the same input), then ``rknnlab.run(variant, iterations=iterations)`` (RSS
    must stay flat).
    """
    def body() -> CheckResult:
        if not callable(variant):
            raise _not_done(f"expected your variant function, got {type(variant).__name__}.",
                            "pass the function itself: check_prealloc_variant(my_prealloc_variant)")
        soc = _current_soc()
        model_file = _model_file(model, soc)
        name = getattr(variant, "__name__", "your variant")
        hint = ("query the output attr, allocate one buffer per output before the loop, and pass it "
                "with is_prealloc=1 to rt.outputs_get.")
        dry, records = _recorded_run(variant, model, soc, dry_iterations)
        if not dry.ok:
            if (dry.error or "").startswith("NotImplementedError"):
                text = dry.error.split(":", 1)[1].strip() if ":" in dry.error else ""
                raise _not_done(f"{name}(lab) still raises NotImplementedError"
                                + (f": {text.rstrip('.')}." if text else "."), hint)
            if dry.status == "crashed":
                hint = ("with is_prealloc=1 the runtime writes `size` bytes at `buf`: buf must be "
                        "arr.ctypes.data of an array you keep alive for the whole loop, and size at most "
                        "arr.nbytes.")
            raise _Fail(_variant_error(dry, f"{name}(lab)"), hint)
        gets = records.get("gets", [])
        if not gets and not records.get("queries"):
            raise _not_done("your variant returned without calling the runtime.",
                            "write the loop: rt.init, query the output attr, allocate, then per "
                            "iteration inputs_set, run, outputs_get with is_prealloc=1.")
        details: List[str] = []
        if len(gets) < dry_iterations:
            raise _Fail(f"rknn_outputs_get was called {len(gets)} times in {dry_iterations} iterations.",
                        "call rt.outputs_get(ctx, outs) once per iteration, inside `for i in lab.loop():`.")
        rt = _open_runtime()
        ref_ctx = None
        try:
            first = gets[0]["outputs"]
            for n, g in enumerate(gets):
                if g["inputs"] is None:
                    raise _Fail("rknn_run ran before any rknn_inputs_set on this context: the model saw "
                                "no frame (seed 000 makes the same mistake).",
                                "set the frame every iteration: rt.inputs_set(ctx, frame_input(lab.input(i))).")
                for o in g["outputs"]:
                    if not o["is_prealloc"]:
                        raise _Fail(f"output {o['index']} was fetched with is_prealloc = 0: the runtime "
                                    f"allocated its buffer (at 0x{o['buf']:x}) inside rknn_outputs_get.",
                                    "set is_prealloc=1 and give buf/size of a buffer you allocated once, "
                                    "before the loop.")
                    if o["buf"] != o["buf_before"]:
                        raise _Fail(f"rknn_outputs_get moved output {o['index']}'s buf from "
                                    f"0x{o['buf_before']:x} to 0x{o['buf']:x}.",
                                    "with is_prealloc=1 the runtime writes into buf; set buf to your buffer.")
            by_index: Dict[int, set] = {}
            for g in gets:
                for o in g["outputs"]:
                    by_index.setdefault(o["index"], set()).add(o["buf"])
            moving = {i: b for i, b in by_index.items() if len(b) > 1}
            if moving:
                i, bufs = next(iter(moving.items()))
                raise _Fail(f"output {i} was written to {len(bufs)} different buffers in {len(gets)} gets: "
                            "a new buffer per iteration is still an allocation per call.",
                            "allocate the buffers once, before `for i in lab.loop():`, and reuse the same "
                            "rknn_output structs.")
            ref_ctx = rt.init(model_file)
            n_out = rt.query(ref_ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
            fetched = {o["index"] for o in first}
            if fetched != set(range(n_out)):
                raise _Fail(f"the model has {n_out} output(s); your variant fetches {sorted(fetched)}.",
                            "fetch every output, one rknn_output per output index.")
            cache: Dict[Any, bytes] = {}
            for g in gets:
                for o in g["outputs"]:
                    attr = rt.query(ref_ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=o["index"]))
                    need = _out_bytes(attr, o["want_float"])
                    if o["size_given"] != need:
                        kind = "float32, 4 bytes" if o["want_float"] else "int8, 1 byte"
                        raise _Fail(f"output {o['index']}: size = {o['size_given']} bytes, but n_elems = "
                                    f"{attr.n_elems} with want_float = {o['want_float']} ({kind} each) needs "
                                    f"{need} (the runtime accepts a larger buffer, but a size that does not "
                                    "match the data hides mistakes).",
                                    "size = n_elems * 4 for want_float=1, n_elems for want_float=0, with "
                                    "n_elems from RKNN_QUERY_OUTPUT_ATTR.")
                    ref = _reference_output(rt, ref_ctx, g["inputs"], o["index"], o["want_float"], cache)
                    if o["data"][:len(ref)] != ref:
                        raise _Fail(f"output {o['index']} differs from what a runtime-allocated "
                                    "rknn_outputs_get gives for the same input.",
                                    "fetch after rt.run of the frame you set, into a buffer of the right "
                                    "type (float32 for want_float=1, int8 for want_float=0).")
            sizes = ", ".join(f"{o['size_given']} B" for o in first)
            details.append(f"recorded run of {dry_iterations} iterations: every rknn_outputs_get wrote into "
                           f"your buffer(s) ({sizes}), the same address every time, with the values a "
                           "runtime-allocated get gives for the same frames")
            if records.get("releases"):
                details.append(f"rknn_outputs_release was called {records['releases']} times: fine, it "
                               "pairs with each get and, with is_prealloc=1, frees nothing of yours")
        finally:
            if ref_ctx is not None:
                rt.destroy(ref_ctx)
            rt.close()

        import rknnlab
        res = rknnlab.run(variant, model=model, soc=soc, iterations=iterations, warmup=5)
        run = res.runs[0]
        if not run.ok:
            raise _Fail(_variant_error(run, f"in rknnlab.run, {name}(lab)"), hint)
        row = res.summary.loc[run.name]
        slope = float(row["rss_slope_kb_per_1k_iter"])
        per_iter = _kb_per_1k_to_bytes_per_iter(slope)
        details.append(f"rknnlab.run, {iterations} measured iterations ({res.source}): RSS "
                       f"{slope:+.0f} kB per 1,000 iterations (about {per_iter:+.0f} bytes per iteration)")
        if not math.isnan(slope) and slope >= GROWTH_KB_PER_1K:
            raise _Fail(f"the outputs are preallocated, but the process grows by about {per_iter:.0f} bytes "
                        "per iteration: something else in the loop keeps memory (a list of outputs, a new "
                        "array per frame, ...).",
                        "keep nothing per iteration: read the values you need from the buffer and let "
                        "them go.", details)
        return CheckResult(EX1, "passed",
                           "Your variant writes every output into its own buffer, allocated once; memory "
                           "stays flat and the values are right.", details)

    return _LAB.run(EX1, body)


# =========================================================================== exercise 2
EX2 = "Exercise 2 — reuse, proved by measurement"


# The cases carry no docstrings on purpose: help() would give the answer away.
def reuse_case_1(lab: Any) -> None:
    from ..experiment import variants
    variants.alloc_per_call(lab)


def reuse_case_2(lab: Any) -> None:
    from ..experiment import variants
    variants.prealloc_output(lab)


def reuse_case_3(lab: Any) -> None:
    from ..experiment import variants
    variants.leak_no_release(lab)


def reuse_case_4(lab: Any) -> None:
    from ..experiment import variants
    variants.zero_copy_io(lab)


#: the variants exercise 2's check feeds to reuses_output_memory, with the truth and why
REUSE_CASES: List[Tuple[Callable[[Any], None], bool, str]] = [
    (reuse_case_1, False,
     "it sets is_prealloc = 0, so every rknn_outputs_get mallocs a new output buffer, and "
     "rknn_outputs_release frees it. RSS stays flat and malloc hands the freed block straight back, so "
     "the address repeats: neither a flat curve nor an equal pointer shows the allocation made on "
     "every call"),
    (reuse_case_2, True,
     "it passes one caller-owned buffer with is_prealloc = 1, allocated once before the loop: the "
     "runtime writes into it and allocates nothing per call"),
    (reuse_case_3, False,
     "it sets is_prealloc = 0 and never calls rknn_outputs_release: a new buffer on every call, never "
     "freed (the classic leak, and what seed 000 calls 'reuse')"),
    (reuse_case_4, True,
     "it binds DMA buffers from rknn_create_mem once with rknn_set_io_mem and never calls "
     "rknn_outputs_get: the same memory serves every run"),
]

_REUSE_HINTS = {
    reuse_case_1: "measure what each rknn_outputs_get allocates: read the heap in use "
                  "(rknnlab.probe.Heap().sample()['heap_in_use_bytes']) right before and right after the "
                  "call, inside the variant's process (wrap lab.rt.outputs_get).",
    reuse_case_2: "your measurement sees allocation where there is none: is the threshold above the "
                  "noise? The harness itself moves RSS by up to about 1 kB per iteration.",
    reuse_case_3: "a variant that never frees grows by about one output per iteration: look at the "
                  "heap gained per get, or the RSS slope.",
    reuse_case_4: "a variant without rknn_outputs_get calls allocates nothing per call: make sure your "
                  "function does not answer 'no' just because there is nothing to measure.",
}


def check_reuse_detector(reuses_output_memory: Callable[[Callable[[Any], None]], bool]) -> CheckResult:
    """Exercise 2: ``reuses_output_memory(variant) -> bool`` says whether the same memory serves
    every iteration with no allocation per call, from a measurement.

    The check calls it on the four :data:`REUSE_CASES` (seeded order) and compares its
    answers with the truth; a function that trusts pointer equality (or a flat RSS curve)
    calls ``reuse_case_1`` (allocate + release every call) a reuse, and fails.
    """
    def body() -> CheckResult:
        if not callable(reuses_output_memory):
            raise _not_done(f"expected your function, got {type(reuses_output_memory).__name__}.",
                            "pass the function itself: check_reuse_detector(reuses_output_memory)")
        order = np.random.default_rng(2).permutation(len(REUSE_CASES))
        details, wrong = [], []
        for k in order:
            case, truth, why = REUSE_CASES[int(k)]
            try:
                answer = reuses_output_memory(case)
            except Exception as exc:
                raise _student_error(exc, f"reuses_output_memory({case.__name__})",
                                     "run the variant with rknnlab.run and decide from what you measured.")
            if answer is None:
                raise _not_done(f"reuses_output_memory({case.__name__}) returned None.",
                                "return True (the same memory serves every iteration) or False.")
            if not isinstance(answer, (bool, np.bool_)):
                raise _Fail(f"reuses_output_memory({case.__name__}) returned {answer!r} "
                            f"({type(answer).__name__}), not True or False.",
                            "return a bool, e.g. `return bytes_per_get < 64`.")
            ok = bool(answer) == truth
            details.append(f"{case.__name__}: you said {'reuse' if answer else 'no reuse'} — "
                           f"{'right' if ok else 'wrong'}: {why}")
            if not ok:
                wrong.append(case)
        if not wrong:
            return CheckResult(EX2, "passed", "Your function told all four variants apart by measurement, "
                               "including the one whose address repeats although it allocates on every call.",
                               details)
        if wrong == [reuse_case_1]:
            message = ("Your function calls reuse_case_1 a reuse. It allocates a new output buffer on every "
                       "call and frees it again: its address repeats and its RSS is flat, so a function that "
                       "compares pointers (or looks at the RSS curve only) is fooled.")
        else:
            message = f"{len(wrong)} of the {len(REUSE_CASES)} answers are wrong."
        return CheckResult(EX2, "failed", message, details, _REUSE_HINTS[wrong[0]])

    return _LAB.run(EX2, body)


# =========================================================================== exercise 3
EX3 = "Exercise 3 — which is which"

#: the three behaviours of exercise 3, in the words the answer uses
BEHAVIOURS = ("leak", "release", "prealloc")
_SYNONYMS = {"leak": "leak", "leak_no_release": "leak", "release": "release", "alloc_per_call": "release",
             "prealloc": "prealloc", "prealloc_output": "prealloc", "is_prealloc": "prealloc"}
_BEHAVIOUR_TEXT = {
    "leak": "is_prealloc = 0 and no rknn_outputs_release: grows by about one output per iteration",
    "release": "is_prealloc = 0, rknn_outputs_release after every get: flat, but calls outputs_release",
    "prealloc": "is_prealloc = 1 into one buffer: flat, and no outputs_release",
}
_MYSTERY_ORDER = [BEHAVIOURS[int(i)] for i in np.random.default_rng(404).permutation(3)]


def _behaviour(name: str) -> Callable[[Any], None]:
    from ..experiment import variants
    return {"leak": variants.leak_no_release, "release": variants.alloc_per_call,
            "prealloc": variants.prealloc_output}[name]


# No docstrings on purpose (help() would give the answer away); the order is seeded.
def mystery_A(lab: Any) -> None:
    _behaviour(_MYSTERY_ORDER[0])(lab)


def mystery_B(lab: Any) -> None:
    _behaviour(_MYSTERY_ORDER[1])(lab)


def mystery_C(lab: Any) -> None:
    _behaviour(_MYSTERY_ORDER[2])(lab)


#: exercise 3's anonymous variants: one leaks, one releases, one preallocates (seeded order)
MYSTERY: Dict[str, Callable[[Any], None]] = {"A": mystery_A, "B": mystery_B, "C": mystery_C}


def _mystery_evidence(result: Any) -> Dict[str, Dict[str, float]]:
    s = result.summary
    calls = result.calls
    measured = calls[calls["stage"] == "measure"] if len(calls) and "stage" in calls else calls
    evidence = {}
    for letter, func in MYSTERY.items():
        name = func.__name__
        if name not in s.index or s.loc[name, "status"] != "ok":
            continue
        mine = measured[measured["variant"] == name]
        its = max(1, int(s.loc[name, "iterations"]))
        evidence[letter] = {
            "slope": float(s.loc[name, "rss_slope_kb_per_1k_iter"]),
            "releases": float((mine["function"] == "outputs_release").sum()) / its,
            "gets": float((mine["function"] == "outputs_get").sum()) / its}
    return evidence


def check_which_is_which(answer: Optional[Dict[str, Optional[str]]], result: Any = None,
                         iterations: int = 200) -> CheckResult:
    """Exercise 3: ``answer`` maps "A", "B", "C" (the :data:`MYSTERY` variants) to "leak",
    "release" and "prealloc".  ``result``: your ``rknnlab.run`` of the three, whose
    measurements the explanation quotes (the check measures them itself if it is None)."""
    def body() -> CheckResult:
        if answer is None or (isinstance(answer, dict) and all(v is None for v in answer.values())):
            raise _not_done("no answer yet.",
                            'measure the three with rknnlab.run(list(checks.MYSTERY.values()), ...) and fill '
                            'in {"A": ..., "B": ..., "C": ...} with "leak", "release" or "prealloc".')
        if not isinstance(answer, dict):
            raise _Fail(f"the answer is a {type(answer).__name__}; expected a dict like "
                        '{"A": "leak", "B": "release", "C": "prealloc"}.')
        keys = {str(k).upper() for k in answer}
        if keys != set(MYSTERY):
            raise _Fail(f"the answer has the keys {sorted(map(str, answer))}; expected A, B and C.")
        given: Dict[str, str] = {}
        for k, v in answer.items():
            word = _SYNONYMS.get(str(v).strip().lower()) if v is not None else None
            if word is None:
                raise _Fail(f"{k}: {v!r} is not one of leak, release, prealloc.")
            given[str(k).upper()] = word
        if sorted(given.values()) != sorted(BEHAVIOURS):
            raise _Fail(f"each of leak, release, prealloc is used exactly once; your answer is {given}.",
                        "there is one of each among A, B and C.")
        res = result
        evidence = _mystery_evidence(res) if res is not None else {}
        details = []
        if len(evidence) < 3:
            import rknnlab
            res = rknnlab.run(list(MYSTERY.values()), model=LAB4_MODEL, iterations=iterations, warmup=5)
            evidence = _mystery_evidence(res)
            details.append(f"measured by the check: {iterations} iterations each, {res.source}")
        else:
            details.append(f"from your measurement ({res.source})")
        truth = dict(zip(MYSTERY, _MYSTERY_ORDER))
        for letter in MYSTERY:
            e = evidence.get(letter)
            seen = (f"RSS {e['slope']:+.0f} kB per 1,000 iterations, {e['releases']:.0f} rknn_outputs_release "
                    f"per iteration" if e else "not measured")
            mark = "right" if given[letter] == truth[letter] else f"wrong, it is '{truth[letter]}'"
            details.append(f"{letter} = {given[letter]} ({mark}): {seen}; "
                           f"{truth[letter]} = {_BEHAVIOUR_TEXT[truth[letter]]}")
        if given == truth:
            return CheckResult(EX3, "passed", "All three right: the slope finds the leak, the calls tell "
                               "release from prealloc.", details)
        return CheckResult(EX3, "failed", "Not all three are right (see the measurements below).", details,
                           "The leak is the one whose RSS climbs. The other two are both flat: the one that "
                           "calls rknn_outputs_release every iteration is 'release' (look at result.phases "
                           "or result.calls).")

    return _LAB.run(EX3, body)


# =========================================================================== exercise 4
EX4 = "Exercise 4 — guard against a shape change"


def check_output_guard(ensure_output_buffer: Callable[..., Any]) -> CheckResult:
    """Exercise 4: ``ensure_output_buffer(rt, ctx, index, buf, want_float) -> numpy array``
    re-queries the output attr and returns ``buf`` itself when its size still fits exactly,
    else a new array of n_elems float32 (want_float=1) or int8 (want_float=0).

    Driven across two models with different output sizes (digits_cnn: 10 elements,
    mobilenet_v2: 1000) and both want_float settings; every buffer it returns is then used
    with is_prealloc=1 and must receive the right values."""
    def body() -> CheckResult:
        if not callable(ensure_output_buffer):
            raise _not_done(f"expected your function, got {type(ensure_output_buffer).__name__}.",
                            "pass the function itself: check_output_guard(ensure_output_buffer)")
        rt = _open_runtime()
        spy = _Spy(rt)
        soc = _soc_of(rt)
        details: List[str] = []
        try:
            ctxs = {}
            for name in ("digits_cnn", "mobilenet_v2"):
                ctx = rt.init(_model_file(name, soc))
                frame = _frames(name, soc, n=1, seed=4)[0]
                rt.inputs_set(ctx, [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC,
                                                             type=abi.RKNN_TENSOR_UINT8)])
                rt.run(ctx)
                ctxs[name] = ctx
            # (model, want_float, expect a new buffer?)
            steps = [("digits_cnn", 1, True), ("digits_cnn", 1, False), ("mobilenet_v2", 1, True),
                     ("mobilenet_v2", 1, False), ("mobilenet_v2", 0, True), ("digits_cnn", 0, True),
                     ("digits_cnn", 0, False)]
            buf: Any = None
            for n, (name, wf, fresh) in enumerate(steps, 1):
                ctx = ctxs[name]
                attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
                need = _out_bytes(attr, wf)
                queries = len(spy.queries)
                what = (f"step {n}: ensure_output_buffer(rt, ctx_{name}, 0, "
                        f"{'None' if buf is None else f'<{buf.nbytes} B>'}, want_float={wf})")
                try:
                    new = ensure_output_buffer(spy, ctx, 0, buf, wf)
                except Exception as exc:
                    raise _student_error(exc, what, "query RKNN_QUERY_OUTPUT_ATTR for that index, compute the "
                                         "bytes needed, and allocate only when buf is None or its size differs.")
                if new is None:
                    if n == 1:
                        raise _not_done(f"{what} returned None.", "return the buffer (a numpy array).")
                    raise _Fail(f"{what} returned None.", "return the buffer you keep or the one you allocated.")
                if not isinstance(new, np.ndarray):
                    raise _Fail(f"{what} returned a {type(new).__name__}; expected a numpy array.",
                                "allocate with np.empty(n_elems, dtype=np.float32 or np.int8).")
                if len(spy.queries) == queries:
                    raise _Fail(f"{what} did not call rt.query: it cannot know whether the output's size changed.",
                                "re-query RKNN_QUERY_OUTPUT_ATTR every time (it costs microseconds).")
                dtype = np.float32 if wf else np.int8
                if fresh:
                    if buf is not None and new is buf:
                        raise _Fail(f"{what} kept the {buf.nbytes}-byte buffer, but the output now needs "
                                    f"{need} bytes ({attr.n_elems} elements x {4 if wf else 1}): "
                                    "rknn_outputs_get may refuse it (the simulator does) or write past its end.",
                                    "compare the bytes needed with the buffer's size and allocate a new one "
                                    "when they differ.")
                    if buf is not None and new.ctypes.data == buf.ctypes.data and new.nbytes != buf.nbytes:
                        raise _Fail(f"{what} returned a view of the old buffer with a new size.",
                                    "allocate a new array: a view does not make the memory larger.")
                else:
                    if new is not buf:
                        raise _Fail(f"{what} allocated a new buffer although the size ({need} bytes) did not "
                                    "change: that is an allocation per call again.",
                                    "return buf itself when buf.nbytes equals the bytes needed.")
                if new.nbytes != need or new.dtype != dtype:
                    raise _Fail(f"{what} returned {new.nbytes} bytes of {new.dtype}; the output needs "
                                f"{need} bytes of {np.dtype(dtype)} ({attr.n_elems} elements).",
                                "n_elems x 4 bytes of float32 for want_float=1, n_elems int8 for want_float=0.")
                if not new.flags.c_contiguous or not new.flags.writeable:
                    raise _Fail(f"{what} returned an array that is not contiguous and writeable.",
                                "use np.empty(n_elems, dtype=...).")
                outs = [abi.rknn_output(index=0, want_float=wf, is_prealloc=1, buf=new.ctypes.data,
                                        size=new.nbytes)]
                rt.outputs_get(ctx, outs)
                ref = [abi.rknn_output(index=0, want_float=wf, is_prealloc=0)]
                rt.outputs_get(ctx, ref)
                ok = ctypes.string_at(ref[0].buf, ref[0].size) == new.tobytes()
                rt.outputs_release(ctx, ref)
                if not ok:
                    raise _Fail(f"{what}: rknn_outputs_get into the returned buffer gave other values than a "
                                "runtime-allocated get.")
                details.append(f"step {n}: {name}, want_float={wf}: {need} bytes needed, "
                               f"{'a new buffer' if fresh else 'the same buffer kept'} — right")
                buf = new
        finally:
            for ctx in list(locals().get("ctxs", {}).values()):
                try:
                    rt.destroy(ctx)
                except Exception:
                    pass
            rt.close()
        return CheckResult(EX4, "passed", "Your guard re-queries the output, keeps the buffer while the size "
                           "fits, and allocates a correctly sized one when it changes.", details)

    return _LAB.run(EX4, body)


# =========================================================================== exercise 5
EX5 = "Exercise 5 — two threads, one buffer each"


def load_digits_testset(soc: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """digits_cnn's test set as (images uint8 NHWC (N, 8, 8, 1), labels int64 (N,))."""
    from .. import models
    path = models.model_path("digits_cnn", soc or "rk3588").parent / "testset.npz"
    with np.load(path, allow_pickle=False) as data:
        images, labels = data["images"], data["labels"]
    return np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels.astype(np.int64)


def single_thread_predictions(rt: Any, model_file: str, images: np.ndarray) -> np.ndarray:
    """digits_cnn's predicted digits, one image after another on one context (the reference)."""
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
        return preds
    finally:
        rt.destroy(ctx)


def check_two_threads(classify_two_threads: Callable[[Any, str, np.ndarray], Any]) -> CheckResult:
    """Exercise 5: ``classify_two_threads(rt, model_path, images) -> predictions`` classifies
    digits_cnn's test images on two threads, each with its own output buffer.

    It must give the same predictions as one thread on one context, and no two threads
    may write into the same is_prealloc buffer (checked on every rknn_outputs_get, so
    a race that happened not to strike this time is still found)."""
    def body() -> CheckResult:
        if not callable(classify_two_threads):
            raise _not_done(f"expected your function, got {type(classify_two_threads).__name__}.",
                            "pass the function itself: check_two_threads(classify_two_threads)")
        rt = _open_runtime()
        spy = _Spy(rt)
        soc = _soc_of(rt)
        model_file = _model_file("digits_cnn", soc)
        images, labels = load_digits_testset(soc)
        try:
            try:
                preds = classify_two_threads(spy, model_file, images)
            except Exception as exc:
                raise _student_error(exc, "classify_two_threads(rt, model_path, images)",
                                     "give each thread its own output buffer (allocate it inside the worker).")
            if preds is None:
                raise _not_done("classify_two_threads returned None.",
                                "return the predicted digit of every image, in order.")
            reference = single_thread_predictions(rt, model_file, images)
        finally:
            spy.cleanup()
            rt.close()
        preds = np.asarray(preds)
        if preds.shape != (len(images),):
            raise _Fail(f"expected one prediction per image ({len(images)}), got an array of shape {preds.shape}.")
        threads = {g["thread"] for g in spy.gets}
        owners: Dict[int, set] = {}
        for g in spy.gets:
            for o in g["outputs"]:
                if o["is_prealloc"]:
                    owners.setdefault(o["buf"], set()).add(g["thread"])
        shared = {buf: t for buf, t in owners.items() if len(t) > 1}
        differ = int((preds != reference).sum())
        acc, ref_acc = float((preds == labels).mean()), float((reference == labels).mean())
        details = [f"your predictions: accuracy {acc:.1%}; one thread on one context: {ref_acc:.1%} "
                   f"({len(images)} test images of digits_cnn)",
                   f"{differ} of {len(images)} predictions differ from the single-thread ones",
                   f"rknn_outputs_get was called from {len(threads)} thread(s)"]
        if len(threads) < 2:
            raise _Fail("all rknn_outputs_get calls came from one thread: the exercise keeps the two threads.",
                        "fix the sharing, not the threading: give each worker its own buffer.", details)
        if shared:
            buf, t = next(iter(shared.items()))
            message = (f"{len(t)} threads wrote their outputs into the same buffer at 0x{buf:x}"
                       + (f", and {differ} predictions came out wrong." if differ else
                          ": the predictions came out right this time (by luck, or because a lock makes "
                          "the threads take turns), but one thread's rknn_outputs_get can overwrite the "
                          "other's output before it is read."))
            raise _Fail(message, "allocate the output buffer inside each worker (one per thread / context), "
                        "as seed 000's note says: each thread owns its output buffer.", details)
        if differ:
            raise _Fail(f"{differ} predictions differ from one thread's, although no buffer is shared.",
                        "check the order of the predictions and that each thread reads its own buffer "
                        "after its own rknn_outputs_get.", details)
        return CheckResult(EX5, "passed", "Each thread has its own output buffer and the predictions match "
                           "one thread's, image for image.", details)

    return _LAB.run(EX5, body)


_LAB = Lab("Lab 4", [EX1, EX2, EX3, EX4, EX5])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), ["check_prealloc_variant", "check_reuse_detector", "check_which_is_which",
                      "check_output_guard", "check_two_threads"])
