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

EX_OUTSIDE = "Exercise 1 — find the bug in a MEM_ALLOC_OUTSIDE setup"
EX_CACHE = "Exercise 2 — choose cacheable or non-cacheable from a measurement"
EX_SRAM = "Exercise 3 — compute what fits in SRAM"
EX_SHARED = "Exercise 4 — share one internal buffer between three models"
EX_SHAPES = "Exercise 5 ★ — handle a shape change"


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


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
    return f"{exc.function} returned {exc.code} ({exc.name}): {exc.detail}"


def _student_failure(exc: BaseException, what: str, name: str, hint: str) -> _Fail:
    """What an exception from the student's function ``name`` means: not started yet (the stub's
    NotImplementedError), a runtime refusal shown as the runtime's answer only (no generic advice
    of the error class: the exercise's hint follows), or any other error."""
    if isinstance(exc, NotImplementedError):
        return _student_error(exc, what, _todo(name))
    if isinstance(exc, RknnError):
        return _Fail(f"{what}: the runtime refused: {_refusal(exc)}", hint)
    return _student_error(exc, what, hint)


def _todo(name: str) -> str:
    """The hint of an exercise not started: no recipe (the folded hints hold it)."""
    return f"write {name}, then run this check again. Open a folded hint if you are stuck."


def _require_models(soc: str, names: Sequence[str]) -> None:
    """A failure that says where to run the exercise when a model it needs is not built for ``soc``."""
    from .. import models
    missing = [m for m in names if soc not in models.model_socs(m)]
    if missing:
        raise _Fail(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} built for RK3588 only, not for "
                    f"the {soc}.", "run this exercise on the simulator: RKNNLAB_BACKEND=sim, without "
                    "RKNNLAB_SIM_SOC (it then plays an RK3588).")


def _run_error(exc: RknnError, what: str, hint: str) -> _Fail:
    return _Fail(f"{what}: the runtime refused: {_refusal(exc)}", hint)


def _as_context(got: Any, ledger: "_cases.Ledger", what: str) -> int:
    ctx = _whole_number(got)
    if ctx is None or ctx not in ledger.contexts:
        raise _Fail(f"{what} returned {got!r}, not a context it made.",
                    "return the rknn_context your function made with rt.init (and keep it alive).")
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
            cases.append((f"{model} (free SRAM {free:,} B)", rows, total, free, truth))
    for k in range(8):
        rows, total, free = _cases.made_up_plan(rng, fits=k < 2)
        cases.append((f"made-up plan {k + 1} ({len(rows)} rows, free SRAM {free:,} B)", rows, total, free,
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
                raise _student_failure(exc, what, "sram_hits", "compare each row's [start, end) with the "
                                       "part of the internal buffer that lives in SRAM.")
            if got is None:
                raise (_not_done if n == 0 else _Fail)(f"{what} returned None.",
                                                       "return a list with one number of bytes per row.")
            try:
                values = [_whole_number(v) for v in got]
            except TypeError:
                raise _Fail(f"{what} returned {got!r}, not a list.", "return a list with one int per row.")
            if len(values) != len(rows) or any(v is None for v in values):
                raise _Fail(f"{what} returned {len(values)} values for {len(rows)} rows (or one is not a whole "
                            "number).", "return one int per row, in the order of the rows (0 for no hit).")
            bad = sum(v != t for v, t in zip(values, truth))
            if bad:
                side = "more" if sum(values) > sum(truth) else "less"
                wrong.append(f"{name}: {bad} of {len(rows)} rows wrong; your total is {side} than the expected "
                             "total")
        if wrong:
            shown = f" (first 6 shown)" if len(wrong) > 6 else ""
            raise _Fail(f"{len(wrong)} of {len(cases)} plans have wrong rows{shown}:",
                        "ENABLE_SRAM places the first part of the internal buffer in SRAM: as much as is free "
                        "(whole 4 KiB pages), never more than the buffer. A row's hit is the number of bytes of "
                        "[start, end) in that part; a tensor can be partly in it. The model's input and output "
                        "rows get none. Use the free SRAM you are given, not the SoC's total.", wrong[:6])
        return CheckResult(EX_SRAM, "passed", f"Every row of {len(cases)} plans right, shipped and made-up: "
                           "you placed the SRAM part by the plan's offsets and the free pages.",
                           [f"{len(cases)} plans, {sum(len(c[1]) for c in cases)} rows"])

    return _LAB.run(EX_SRAM, body)


# =========================================================================== exercise 1: find the bug
_OUTSIDE_HINT = ("RKNN_FLAG_MEM_ALLOC_OUTSIDE means the runtime allocates none of the model's memory: "
                 "query RKNN_QUERY_MEM_SIZE, then give the context every part it needs before the first "
                 "rknn_run, each mem at least as large as its field says.")


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
            return f"{model}: setup returned {ctx!r}, not a context it made"
        io = _cases.CheckIo(rt, ctx)
        frame = _frames_for(io.frame_shape, 1, np.random.default_rng(0))
        try:
            got = io.run(frame[0])
        finally:
            io.close()
        ref, _ = _reference(rt, path, frame)
        return (f"{model}: rknn_run returned 0 RKNN_SUCC; outputs equal to a flag-0 context's: "
                f"{'yes' if [got] == ref else 'NO'}")
    except RknnError as exc:
        return f"{model}: {exc.function} returned {exc.code} {exc.name}"
    finally:
        ledger.cleanup()


#: exercise 1: a weight or internal mem may hold this much more than its field of RKNN_QUERY_MEM_SIZE
#: (one page: a size rounded up to 4 KiB, or to 128 B as Rockchip's dynamic-shape demo does)
_PART_SLACK = 4096


def _require_sized_parts(model: str, ledger: "_cases.Ledger", ctx: int, size: abi.rknn_mem_size,
                         details: List[str]) -> None:
    """A weight or internal mem far larger than its field (one fixed size for every model)
    runs right and moves everything outside, yet wastes the memory the flag is for."""
    fields = (("weight", "total_weight_size", int(size.total_weight_size)),
              ("internal", "total_internal_size", int(size.total_internal_size)))
    for part, field, need in fields:
        held = ledger.parts.get((ctx, part))
        if held is not None and held > need + _PART_SLACK:
            raise _Fail(f"{model}: your {part} mem holds {_kib(held)}; the context's {field} is "
                        f"{_kib(need)}, so {_kib(held - need)} of it is never used.",
                        f"Size each mem from its own field of RKNN_QUERY_MEM_SIZE, queried for this context: "
                        f"the {part} mem from {field} (up to one 4 KiB page more is fine).", details)


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
                        raise _student_failure(exc, what, "setup_outside", "read the runtime's message: it "
                                               "names the call and the size it expected. " + _OUTSIDE_HINT)
                    if got is None:
                        raise (_not_done if n == 0 else _Fail)(f"{what} returned None.",
                                                                "return the context you made.")
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
                            raise _Fail(f"{model}: rknn_run on your context returned {exc.code} {exc.name}.",
                                        _OUTSIDE_HINT + " Keep every mem alive until the context is destroyed.")
                    finally:
                        io.close()
                    ref_out, ref_total = _reference(rt, path, frames)
                    saved = ref_total - own
                    if saved < 0.9 * need:
                        raise _Fail(f"{model}: the runtime still allocates memory of its own for your context: "
                                    f"its DMA total less your mems is {_kib(own)}, a flag-0 context's is "
                                    f"{_kib(ref_total)}, so only {_kib(saved)} moved outside. Weights + internal "
                                    f"are {_kib(need)}.",
                                    "Make the context with RKNN_FLAG_MEM_ALLOC_OUTSIDE (weights, internal and io "
                                    "all outside): RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE moves the internal buffer only.",
                                    details)
                    wrong = sum(a != b for fa, fb in zip(got_out, ref_out) for a, b in zip(fa, fb))
                    if wrong:
                        raise _Fail(f"{model}: {wrong} of {len(frames) * len(ref_out[0])} outputs differ from a "
                                    "context made with flag 0, for the same frames.",
                                    "Every part must stay alive and unchanged while the context runs: do not "
                                    "destroy, reuse or overwrite a mem you gave it, and give the weights and the "
                                    "internal memory bytes of their own (the runtime writes the internal memory "
                                    "at every run).", details)
                    _require_sized_parts(model, ledger, ctx, size, details)
                    details.append(f"{model}: runs, outputs equal to a flag-0 context's; its DMA total less your "
                                   f"mems is {_kib(saved)} below a flag-0 context's (weights + internal: "
                                   f"{_kib(need)}; a flag-0 context also holds its io)")
                finally:
                    ledger.cleanup()
        finally:
            rt.close()
        return CheckResult(EX_OUTSIDE, "passed", "Your context runs with every part of its memory given from "
                           "outside, and its outputs equal a plain context's.", details)

    return _LAB.run(EX_OUTSIDE, body)


# =========================================================================== exercise 4: share
_SHARED_HINT = ("Query RKNN_QUERY_MEM_SIZE of every context first. Allocate one buffer of the largest "
                "total_internal_size, then give each context its own view of it, made with that context and "
                "at least as large as that context's total_internal_size.")


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
            raise _student_failure(exc, what, "share_internal", "read the runtime's message: it names what "
                                   "it needed. " + _SHARED_HINT)
        if got is None:
            raise (_not_done if first else _Fail)(f"{what} returned None.",
                                                  "return the list of your contexts, one per model.")
        try:
            ctxs = [_as_context(c, ledger, what) for c in got]
        except TypeError:
            raise _Fail(f"{what} returned {got!r}, not a list of contexts.",
                        "return [ctx_0, ctx_1, ctx_2], one per model, in the order of model_paths.")
        if len(ctxs) != len(paths) or len(set(ctxs)) != len(ctxs):
            raise _Fail(f"{what} returned {len(ctxs)} contexts ({len(set(ctxs))} different) for "
                        f"{len(paths)} models.", "return one context per model, in the order of model_paths.")
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
                    raise _run_error(exc, f"{chosen[k]}: rknn_run on your context", _SHARED_HINT)
        refs = [_reference(rt, p, f) for p, f in zip(paths, frames)]
        ref_total = sum(t for _, t in refs)
        for k, (ref_out, _) in enumerate(refs):
            if got_out[k] != ref_out:
                raise _Fail(f"{chosen[k]}: its outputs differ from a context made with flag 0, for the "
                            "same frames.",
                            "Each context needs its own weights and its own view of the shared buffer that holds "
                            "its whole total_internal_size; the models must run one after another.")
        need = sum(internal) - max(internal)
        saved = ref_total - total
        sums = (f"your three contexts hold {_kib(total)} of DMA memory, three flag-0 contexts "
                f"{_kib(ref_total)}: a saving of {_kib(saved)}")
        if saved < need - 64 * 1024:
            raise _Fail(f"{', '.join(chosen)}: {sums}. Sharing one internal buffer should save more (internal "
                        f"sizes {', '.join(_kib(i) for i in internal)}).",
                        "Allocate the internal memory once, for the largest model, and give every context a "
                        "view of that one buffer: one buffer per model, or one buffer with a region per "
                        "model, shares nothing.")
        return [f"{', '.join(chosen)}: outputs equal to flag-0 contexts, run one after another; {sums}"]
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
        return CheckResult(EX_SHARED, "passed", "The models run one after another on one internal buffer, "
                           "with the outputs of separate contexts, and the DMA total shows the saving.", details)

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
            what = f"choose_cacheable(<pattern {n}: {pattern!r}>)"
            try:
                got = choose_cacheable(pattern)
            except Exception as exc:
                raise _student_failure(exc, what, "choose_cacheable", "time pattern.cpu(buf) on a buffer of "
                                       "pattern.nbytes, then compare the two modeled costs per frame.")
            if got is None:
                raise (_not_done if n == 1 else _Fail)(f"{what} returned None.",
                                                       "return abi.RKNN_FLAG_MEMORY_CACHEABLE or "
                                                       "abi.RKNN_FLAG_MEMORY_NON_CACHEABLE.")
            value = _whole_number(got)
            if value not in _FLAGS:
                raise _Fail(f"{what} returned {got!r}, not a flag of rknn_create_mem2.",
                            "return abi.RKNN_FLAG_MEMORY_CACHEABLE or abi.RKNN_FLAG_MEMORY_NON_CACHEABLE.")
            cached = _cases.cached_us(pattern)
            cost = _cases.costs_us(pattern, cached)
            cheap, dear = sorted(cost, key=cost.get)
            shown = (f"CPU time on a cached buffer {cached:,.1f} us (measured); cacheable: + mem_sync = "
                     f"{cost[abi.RKNN_FLAG_MEMORY_CACHEABLE]:,.1f} us; non-cacheable: "
                     f"{cost[abi.RKNN_FLAG_MEMORY_NON_CACHEABLE]:,.1f} us (both modeled)")
            if cost[dear] < CACHE_MARGIN * cost[cheap]:
                details.append(f"pattern {n}: not judged (the two costs are too close: {shown})")
                continue
            judged += 1
            ratios.append(cost[dear] / cost[cheap])
            if value != cheap:
                if value == abi.RKNN_FLAG_MEMORY_CACHEABLE:
                    why = ("A cacheable buffer pays for a cache sync over the whole buffer, once per mode in "
                           "pattern.syncs, each frame: cpu.sync_cost prices it. A large buffer may be touched "
                           "in a few bytes only.")
                else:
                    why = ("An uncached buffer pays on every access: the CPU's time x cpu.UNCACHED_SLOWDOWN. A "
                           "buffer the CPU reads or writes in full costs far more than its sync.")
                raise _Fail(f"pattern {n}: you chose {_FLAGS[value]}, but the check's costs per frame are: "
                            f"{shown}.", "Time what the CPU does on the buffer (pattern.cpu), not its size. "
                            + why, details)
            details.append(f"pattern {n}: {_FLAGS[value]} — right ({shown})")
        if judged < 5:
            raise _Fail(f"only {judged} patterns had a clear answer on this machine.",
                        "run the check again when the machine is less busy.", details)
        return CheckResult(EX_CACHE, "passed", f"{judged} of {judged} judged patterns right (the cheaper choice "
                           f"cost {min(ratios):.1f}–{max(ratios):,.0f}× less): you measured what the CPU does and "
                           "priced both choices with the same model.")

    return _LAB.run(EX_CACHE, body)


# =========================================================================== exercise 5 ★
_SHAPES_HINT = ("Allocate the io mems once, for the largest shape RKNN_QUERY_INPUT_DYNAMIC_RANGE lists. When a "
                "frame's shape differs from the last one: rknn_set_input_shapes, then the CURRENT_* attrs, then "
                "rknn_set_io_mem again with the same mems.")
#: canonical sentence 3' (the course's sizing rule), for a mem the runtime finds too small
_BOUND_SIZE = ("Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, "
               "or a plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use "
               "n_elems × 4 bytes.")
_OWN_VALUES = ("Each array you return must own its values: copy out of the mem (.copy()) before the next run, "
               "which overwrites it.")


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
            what = f"infer_shapes(rt, ctx, <{len(frames)} frames: {' '.join(f'{h}x{w}' for h, w in seq)}>)"
            try:
                try:
                    got = infer_shapes(ledger, ctx, [f.copy() for f in frames])
                except Exception as exc:
                    if isinstance(exc, RknnError):
                        small = "B, the tensor needs" in exc.detail or "too small" in exc.detail
                        raise _Fail(f"{what}: the runtime refused: {_refusal(exc)}",
                                    (_BOUND_SIZE + " " if small else "") + _SHAPES_HINT)
                    raise _student_error(exc, what, _todo("infer_shapes") if isinstance(exc, NotImplementedError)
                                         else _SHAPES_HINT)
                if got is None:
                    raise _not_done(f"{what} returned None.", "return a list with one float32 array per frame.")
                views = any(_borrowed(o) for o in got)
                try:
                    outs = [np.asarray(o, dtype=np.float64).reshape(-1) for o in got]
                except (TypeError, ValueError):
                    raise _Fail(f"{what} returned {type(got).__name__}, not a list of arrays.",
                                "return a list with one float32 array of the output's values per frame.")
                if len(outs) != len(frames):
                    raise _Fail(f"{what} returned {len(outs)} outputs for {len(frames)} frames.",
                                "return one output per frame, in the order of the frames.")
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
        details = [f"{len(frames)} frames, {sum(a != b for a, b in zip(seq, seq[1:]))} shape changes"]
        if wrong:
            where = ", ".join(f"frame {k} ({seq[k][0]}x{seq[k][1]})" for k in wrong[:4])
            raise _Fail(f"{len(wrong)} of {len(frames)} outputs differ from a context that sets each frame's shape: "
                        f"{where}.", (_OWN_VALUES + " " if views else "") + "After a shape change the input and "
                        "output attrs change: query the CURRENT_* attrs and bind with them. Return the float32 "
                        "values (n_elems of the output).", details)
        if late:
            raise _Fail(f"your function created {late} mem(s) after its first rknn_run: an allocation per shape "
                        "change.", _SHAPES_HINT, details)
        if not bound:
            raise _Fail("no input mem was bound with rknn_set_io_mem before the first rknn_run.",
                        "this exercise uses zero-copy mems: " + _SHAPES_HINT, details)
        return CheckResult(EX_SHAPES, "passed", "Every output right at every shape, with the mems allocated once "
                           "for the largest shape and bound again at each change. (The simulator's memory is "
                           "coherent, A11: the check cannot see whether you call rknn_mem_sync.)", details)

    return _LAB.run(EX_SHAPES, body)


_LAB = Lab("Lab 5", [EX_OUTSIDE, EX_CACHE, EX_SRAM, EX_SHARED, EX_SHAPES])
summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_outside_setup": EX_OUTSIDE, "check_cache_choice": EX_CACHE,
                      "check_shared_internal": EX_SHARED, "check_sram_hits": EX_SRAM,
                      "check_shape_change": EX_SHAPES})
