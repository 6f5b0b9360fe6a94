"""Lab 7, exercises 5 to 7: choose a strategy from measurements.

================================  ==============================================================
:func:`check_budget`              5. ``setup(rt, model_paths, pattern, budget) -> [ctx, ...]``:
                                  three models in a DMA budget, for a run pattern (Chapter 5)
:func:`check_sram`                6. ``sram_plan(free_sram, contexts) -> [bytes, ...]``: where
                                  SRAM goes with RKNN_FLAG_ENABLE_SRAM (Chapters 5 and 7)
:func:`check_core_masks`          7. ``choose_mask(table) -> {model: mask}``: the fastest core
                                  mask from measurements, within their noise (Chapters 3 and 6)
================================  ==============================================================

Helpers the notebook uses: :func:`practice_case` and :func:`try_budget` (exercise 5),
:func:`measure_sram` and :func:`try_sram` (exercise 6), :func:`measure_masks` and :func:`try_masks`
(exercise 7).  Each check measures
what it judges on the runtime itself (or on the simulated RK3588 where this board cannot show
it); the truth lives in private code, and the messages give measured numbers and a hint, never
the answer.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.errors import RknnError
from . import _lab05_cases as _io
from . import _lab07_strategy_cases as _cases
from ._core import (CheckResult, _Fail, _fresh_seed, _model_file, _not_done, _open_runtime, _require_function,
                    _soc_of, _student_error, _whole_number)
from ._lab07_common import EX_BUDGET, EX_CORES, EX_SRAM, _LAB

__all__ = ["check_budget", "check_sram", "check_core_masks", "practice_case", "try_budget", "try_sram",
           "measure_sram", "measure_masks", "try_masks", "RULE_MAX_ONCE", "RULE_SRAM", "RULE_SHARE", "RULE_SRAM_BUDGET", "PRACTICE_MODELS",
           "SRAM_EXAMPLE", "MASK_MODELS"]

#: rule R7c (chapter 7 §3), in the same words everywhere
RULE_MAX_ONCE = ("Allocating the largest size once is right for one context whose input shape changes. Contexts "
                 "that run at the same time need their own internal memory.")
#: rule R7b (chapter 7 §2), in the same words everywhere
RULE_SRAM = ("The runtime puts nothing in SRAM unless you ask: RKNN_FLAG_ENABLE_SRAM at init, or "
             "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM for a mem. Nothing is swapped in and out. RKNN_QUERY_MEM_SIZE and "
             "the RKNN_LOG_LEVEL=3 log show what it placed.")

#: chapter 5's rule for sharing (chapter 5 §4 and Lab 5), in the same words
RULE_SHARE = ("Models that run one after another may share one internal buffer, as large as the largest "
              "total_internal_size. Give each context its own view of it, at least as large as that context's "
              "total_internal_size. Models whose runs can overlap must not share it.")
#: chapter 5's rule for SRAM (chapter 5 §7 and Lab 5), in the same words
RULE_SRAM_BUDGET = ("Only what fits in the free SRAM goes there: at most 956 KiB on RK3588, in 4 KiB pages, shared "
                    "by every context. The rest stays in DDR. Check where it landed; never assume it.")

#: exercise 5: the models of the notebook's practice case (the check draws others)
PRACTICE_MODELS = ("mobilenet_v2_160", "mobilenet_v2", "yolov5s_320")
#: exercise 6: the situation the notebook predicts (the check draws others, with other free SRAM)
SRAM_EXAMPLE = (("mobilenet_v2", 0), ("mobilenet_v2_160", abi.RKNN_FLAG_ENABLE_SRAM),
                ("resnet50", abi.RKNN_FLAG_ENABLE_SRAM))
#: exercise 7: the models the notebook measures (the check measures others)
MASK_MODELS = ("mobilenet_v2", "yolov5s")
#: exercise 7: the models the check measures itself
_CHECK_MASK_MODELS = ("digits_cnn", "resnet50", "yolov5s_relu", "mobilenet_v2_320", "yolov5s_320")


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


def _todo(name: str) -> str:
    return f"write {name}, then run this check again. Open a folded hint if you are stuck."


def _refusal(exc: RknnError) -> str:
    return f"{exc.function} returned {exc.code} ({exc.name}): {exc.detail}"


def _student_failure(exc: BaseException, what: str, name: str, hint: str) -> _Fail:
    if isinstance(exc, NotImplementedError):   # the function's name only: the case stays unprinted
        return _student_error(exc, f"{name}(…)", _todo(name))
    if isinstance(exc, RknnError):
        return _Fail(f"{what}: the runtime refused: {_refusal(exc)}", hint)
    return _student_error(exc, what, hint)


def _rk3588_models(soc: str, names: Sequence[str]) -> None:
    from .. import models
    missing = [m for m in names if soc not in models.model_socs(m)]
    if missing:
        raise _Fail(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} built for RK3588 only, not for "
                    f"the {soc}.", "run this exercise on the simulator: RKNNLAB_BACKEND=sim, without "
                    "RKNNLAB_SIM_SOC (it then plays an RK3588).")


# =========================================================================== exercise 5: budget
_BUDGET_HINT = ("Query RKNN_QUERY_MEM_SIZE of every context first. The models of one thread run one after "
                "another; the threads run at the same time. " + RULE_SHARE + " " + RULE_MAX_ONCE)


def _pattern_text(models: Sequence[str], pattern: Sequence[Sequence[int]]) -> str:
    threads = ["[" + ", ".join(models[i] for i in t) + "]" for t in pattern]
    if len(threads) == 1:
        return f"one thread runs {threads[0]} in turn"
    return f"{len(threads)} threads at the same time: " + " and ".join(threads)


def _frames_of(rt: Any, ctx: int, n: int, rng: np.random.Generator) -> List[np.ndarray]:
    from ..experiment.variants import query_io
    from ..rknn import buffers
    ins, _ = query_io(rt, ctx, native=False)
    d = buffers.attr_dims(ins[0])
    shape = d if ins[0].fmt == abi.RKNN_TENSOR_NHWC else (d[0], d[2], d[3], d[1])
    return [rng.integers(0, 256, size=tuple(shape), dtype=np.uint8) for _ in range(n)]


def _infer(rt: Any, ctx: int, frame: np.ndarray) -> Tuple[List[bytes], float, float]:
    """One frame with the general API: (every output's bytes, want_float = 0), the run's start
    and end (perf_counter)."""
    from ..experiment.variants import frame_input
    rt.inputs_set(ctx, frame_input(frame))
    start = time.perf_counter()
    rt.run(ctx)
    end = time.perf_counter()
    n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
    outs = [abi.rknn_output(index=k, want_float=0, is_prealloc=0) for k in range(n_out)]
    rt.outputs_get(ctx, outs)
    data = [ctypes.string_at(o.buf, o.size) for o in outs]
    rt.outputs_release(ctx, outs)
    return data, start, end


def _references(rt: Any, paths: Sequence[str], frames: Sequence[Sequence[np.ndarray]]
                ) -> Tuple[List[List[List[bytes]]], List[int], List[int]]:
    """Flag-0 contexts of each model, alone: (outputs per frame, DMA total after the runs,
    total_internal_size)."""
    outs, totals, internals = [], [], []
    for path, fr in zip(paths, frames):
        ctx = rt.init(path)
        try:
            outs.append([_infer(rt, ctx, f)[0] for f in fr])
            size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
            totals.append(int(size.total_dma_allocated_size))
            internals.append(int(size.total_internal_size))
        finally:
            rt.destroy(ctx)
    return outs, totals, internals


def _thread_masks(rt: Any, n_threads: int) -> Optional[List[int]]:
    """One core per thread where the NPU has enough cores (the threads' runs then overlap,
    whatever masks the setup chose), else None."""
    from ..sim.npu import soc_npu
    try:
        cores = soc_npu(_soc_of(rt)).cores
    except ValueError:
        return None
    singles = (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2)
    return list(singles[:n_threads]) if cores >= n_threads > 1 else None


def _run_pattern(rt: Any, ctxs: Sequence[int], pattern: Sequence[Sequence[int]],
                 frames: Sequence[Sequence[np.ndarray]]) -> Tuple[Dict[int, List[List[bytes]]], int]:
    """Run ``pattern`` on the contexts: each thread its models in turn, frame after frame, the
    threads started together.  (outputs per model per frame, run pairs of different threads
    whose times overlapped)."""
    masks = _thread_masks(rt, len(pattern))
    if masks:
        for thread, mask in zip(pattern, masks):
            for i in thread:
                rt.set_core_mask(ctxs[i], mask)
    got: Dict[int, List[List[bytes]]] = {i: [] for t in pattern for i in t}
    windows: List[List[Tuple[float, float]]] = [[] for _ in pattern]
    errors: List[Tuple[int, BaseException]] = []
    barrier = threading.Barrier(len(pattern))

    def work(k: int, thread: Sequence[int]) -> None:
        try:
            barrier.wait(timeout=30)
            for f in range(len(frames[thread[0]])):
                for i in thread:
                    data, start, end = _infer(rt, ctxs[i], frames[i][f])
                    got[i].append(data)
                    windows[k].append((start, end))
        except BaseException as exc:   # reported in the check's thread
            errors.append((thread[0], exc))

    workers = [threading.Thread(target=work, args=(k, t)) for k, t in enumerate(pattern)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0][1]
    overlaps = sum(1 for a in range(len(windows)) for b in range(a + 1, len(windows))
                   for s1, e1 in windows[a] for s2, e2 in windows[b] if min(e1, e2) > max(s1, s2))
    return got, overlaps


def _judged_run(rt: Any, ctxs: Sequence[int], pattern: Sequence[Sequence[int]],
                frames: Sequence[Sequence[np.ndarray]], ref_out: Sequence[List[List[bytes]]]
                ) -> Tuple[Dict[int, int], int]:
    """Run the pattern until it can be judged: ({model index: wrong outputs}, overlapping runs).
    With two threads their runs must overlap at least once, and a wrong output ends it early;
    at most three tries (then the overlaps say 0)."""
    wrong: Dict[int, int] = {}
    overlaps = 0
    for _ in range(3):
        outs, overlaps = _run_pattern(rt, ctxs, pattern, frames)
        wrong = {i: sum(a != b for a, b in zip(outs[i], ref_out[i])) for i in outs}
        if any(wrong.values()) or len(pattern) == 1 or overlaps:
            break
    return wrong, overlaps


def _as_contexts(got: Any, ledger: Any, n: int, what: str) -> List[int]:
    try:
        ctxs = [_whole_number(c) for c in got]
    except TypeError:
        raise _Fail(f"{what} returned {got!r}, not a list of contexts.",
                    "return [ctx_0, ctx_1, ctx_2], one per model, in the order of model_paths.")
    if len(ctxs) != n or len(set(ctxs)) != n or any(c not in ledger.contexts for c in ctxs):
        raise _Fail(f"{what} returned {len(ctxs)} values ({len(set(ctxs))} different) for {n} models, or a "
                    "context it did not make.", "return one context per model, made by your function, in the "
                    "order of model_paths.")
    return ctxs  # type: ignore[return-value]


def _backing(mem: Any) -> Tuple[Tuple[Any, ...], int]:
    """(what identifies the memory behind ``mem``, its bytes): the file behind the mem's fd
    (device and inode: every fd and view of one buffer gives the same key) and that file's
    size, or, without a readable fd, the mem's own address and size."""
    m = mem.contents if isinstance(mem, ctypes._Pointer) else mem
    size = int(m.size)
    try:
        st = os.fstat(int(m.fd))
        return ("file", st.st_dev, st.st_ino), max(int(st.st_size), size)
    except (OSError, ValueError, OverflowError):
        return ("address", int(m.virt_addr or 0) - int(m.offset)), size


class _Ledger(_io.Ledger):
    """Lab 5's recording runtime, plus the memory behind every mem: what a runtime counts in
    a context's DMA total depends on how the mem was made (the simulator counts rknn_create_mem
    in its context, a view or an RKNN_MEM_FLAG_ALLOC_NO_CONTEXT mem nowhere, A9; no document
    says what a board counts).  So the check measures what each mem added to its context's
    total, takes that off again, and counts the buffers themselves: every one allocated, and
    every one behind a mem set as a context's internal, weight or io memory, each once."""

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        self.counted: Dict[int, int] = {}                                  # id(mem) -> bytes its context counted
        self.backing: Dict[int, Tuple[Tuple[Any, ...], int]] = {}         # id(mem) -> (buffer key, bytes)
        self.used: Dict[Tuple[Any, ...], int] = {}                         # buffers behind set_* mems -> bytes
        self.internal: Dict[int, Tuple[Tuple[Any, ...], int]] = {}        # ctx -> (buffer key, offset)

    def _measured(self, how: str, ctx: int, make: Callable[[], Any]) -> Any:
        before = self._dma(ctx)
        mem = make()
        after = self._dma(ctx)
        self.counted[id(mem)] = max(after - before, 0) if before is not None and after is not None else 0
        self.backing[id(mem)] = _backing(mem)
        m = mem.contents if isinstance(mem, ctypes._Pointer) else mem
        return self._made(how, ctx, int(m.size), mem)

    def _dma(self, ctx: int) -> Optional[int]:
        if ctx not in self.contexts:
            return None
        try:
            return _io.dma_total(self._rt, ctx)
        except RknnError:
            return None

    def create_mem(self, ctx: int, size: int) -> Any:
        return self._measured("create_mem", ctx, lambda: self._rt.create_mem(ctx, size))

    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> Any:
        return self._measured("create_mem2", ctx, lambda: self._rt.create_mem2(ctx, size, alloc_flags))

    def create_mem_from_fd(self, ctx: int, fd: int, virt: int, size: int, offset: int) -> Any:
        return self._measured("create_mem_from_fd", ctx,
                              lambda: self._rt.create_mem_from_fd(ctx, fd, virt, size, offset))

    def create_mem_from_phys(self, ctx: int, phys: int, virt: int, size: int) -> Any:
        return self._measured("create_mem_from_phys", ctx,
                              lambda: self._rt.create_mem_from_phys(ctx, phys, virt, size))

    def _use(self, mem: Any) -> Tuple[Tuple[Any, ...], int]:
        key, size = self.backing.get(id(mem)) or _backing(mem)
        self.used[key] = max(self.used.get(key, 0), size)
        return key, size

    def set_internal_mem(self, ctx: int, mem: Any) -> int:
        ret = super().set_internal_mem(ctx, mem)
        key, _ = self._use(mem)
        m = mem.contents if isinstance(mem, ctypes._Pointer) else mem
        self.internal[ctx] = (key, int(m.offset))
        return ret

    def set_weight_mem(self, ctx: int, mem: Any) -> int:
        ret = super().set_weight_mem(ctx, mem)
        self._use(mem)
        return ret

    def set_io_mem(self, ctx: int, mem: Any, attr: abi.rknn_tensor_attr) -> int:
        ret = super().set_io_mem(ctx, mem, attr)
        self._use(mem)
        return ret

    def buffers(self) -> Dict[Tuple[Any, ...], int]:
        """Every buffer your code allocated and is still alive, and every buffer behind a mem
        it set on a context: {key: bytes}."""
        out = dict(self.used)
        for _, how, size, mem in self.alive_mems():
            if how in ("create_mem", "create_mem2"):
                key, nbytes = self.backing[id(mem)]
                out[key] = max(out.get(key, 0), nbytes)
        return out

    def total(self) -> int:
        """The DMA memory of every context made (less what its total counted of your mems) plus
        every buffer of :meth:`buffers`, each counted once."""
        runtime = sum(_io.dma_total(self._rt, c) - sum(self.counted.get(id(row[3]), 0) for row in self.alive_mems(c))
                      for c in self.contexts)
        return runtime + sum(self.buffers().values())


#: frames per model in a budget case (the pattern runs them all)
BUDGET_FRAMES = 3


def _budget_round(setup: Callable[..., Any], rt: Any, models: List[str], pattern: List[List[int]], slack: int,
                  rng: np.random.Generator, first: bool) -> str:
    """One case: references, the budget, the student's setup, the pattern run; a detail line."""
    soc = _soc_of(rt)
    paths = [_model_file(m, soc) for m in models]
    probe = [rt.init(p) for p in paths]
    try:
        frames = [_frames_of(rt, c, BUDGET_FRAMES, rng) for c in probe]
    finally:
        for c in probe:
            rt.destroy(c)
    ref_out, ref_totals, internals = _references(rt, paths, frames)
    separate = sum(ref_totals)
    budget = separate - sum(internals) + _cases.least_internal(internals, pattern) + slack
    shown = f"{', '.join(models)}; {_pattern_text(models, pattern)}; budget {_kib(budget)}"
    what = f"setup(rt, <{', '.join(models)}>, {pattern}, {budget})"
    ledger = _Ledger(rt)
    try:
        try:
            got = setup(ledger, list(paths), [list(t) for t in pattern], budget)
        except Exception as exc:
            raise _student_failure(exc, what, "setup", "read the runtime's message: it names the call and the "
                                   "size it expected. " + _BUDGET_HINT)
        if got is None:
            raise (_not_done if first else _Fail)(f"{'setup(…)' if first else what} returned None.",
                                                  "return the list of your contexts, one per model.")
        ctxs = _as_contexts(got, ledger, len(models), what)
        try:
            wrong, overlaps = _judged_run(rt, ctxs, pattern, frames, ref_out)
        except RknnError as exc:
            raise _Fail(f"{shown}: running your contexts: the runtime refused: {_refusal(exc)}", _BUDGET_HINT)
        if len(pattern) > 1 and not overlaps and not any(wrong.values()):
            raise _Fail(f"{shown}: the two threads' runs never overlapped in time (3 tries), so the check cannot "
                        "tell whether they may share.", "run the check again when the machine is less busy.")
        total = ledger.total()
        internal = {i: ledger.internal.get(c) for i, c in enumerate(ctxs)}
        buffers = ledger.buffers()
    finally:
        ledger.cleanup()
    bad = [f"{models[i]}: {n} of {BUDGET_FRAMES} outputs differ" for i, n in wrong.items() if n]
    if bad:
        together = (f" While they ran, {overlaps} runs of different threads overlapped in time."
                    if len(pattern) > 1 else "")
        raise _Fail(f"{shown}: {'; '.join(bad)} from a flag-0 context's, for the same frames.{together}",
                    RULE_MAX_ONCE + " Each context needs its own weights; a view of a shared buffer must hold its "
                    "own total_internal_size.")
    holds = (f"your contexts and mems hold {_kib(total)} of DMA memory after the runs; separate flag-0 contexts "
             f"{_kib(separate)}")
    if total > budget:
        own = {v[0] for v in internal.values() if v}
        counted = (f" Behind your {len(internal)} contexts' rknn_set_internal_mem: {len(own)} internal buffer"
                   f"{'s' if len(own) != 1 else ''} ({', '.join(_kib(buffers.get(k, 0)) for k in own)})."
                   if own else "")
        raise _Fail(f"{shown}: {holds}: {_kib(total - budget)} over the budget.{counted}", _BUDGET_HINT)
    shared = _judge_sharing(models, pattern, internal, internals, buffers, shown)
    return f"{shown}: outputs right; {shared}; {holds}: within the budget"


def _judge_sharing(models: Sequence[str], pattern: Sequence[Sequence[int]],
                   internal: Dict[int, Optional[Tuple[Tuple[Any, ...], int]]], internals: Sequence[int],
                   buffers: Dict[Tuple[Any, ...], int], shown: str) -> str:
    """The sharing itself, from the buffers behind rknn_set_internal_mem: the contexts of a
    thread with several models point into one buffer; contexts of different threads never
    use the same bytes of one.  A line that says what was found."""
    for thread in pattern:
        if len(thread) < 2:
            continue
        keys = {internal[i][0] if internal[i] else ("own", i) for i in thread}
        if len(keys) > 1:
            names = ", ".join(models[i] for i in thread)
            raise _Fail(f"{shown}: the models of the thread [{names}] run in turn, but their contexts hold "
                        f"{len(keys)} internal buffers (not shared).", _BUDGET_HINT)
    for a, ta in enumerate(pattern):
        for tb in pattern[a + 1:]:
            for i in ta:
                for j in tb:
                    if internal[i] and internal[j] and internal[i][0] == internal[j][0]:
                        lo_i, lo_j = internal[i][1], internal[j][1]
                        if lo_i < lo_j + internals[j] and lo_j < lo_i + internals[i]:
                            raise _Fail(f"{shown}: {models[i]} and {models[j]} run at the same time, but their "
                                        "internal memory uses the same bytes of one buffer.", RULE_MAX_ONCE)
    keys = {internal[i][0] for t in pattern for i in t if internal[i]}
    sizes = ", ".join(_kib(buffers.get(k, 0)) for k in keys)
    return (f"internal memory: {len(keys)} buffer{'s' if len(keys) != 1 else ''} of yours ({sizes}); each "
            "thread of several models points into one of them, no two threads into the same bytes")


def practice_case(pattern: Sequence[Sequence[int]] = ((0, 2), (1,)), slack: int = 32 * 1024,
                  rt: Any = None) -> Optional[Tuple[List[str], List[List[int]], int]]:
    """(PRACTICE_MODELS' paths, ``pattern``, a budget) to try ``setup`` on: the budget is the
    sum of the models' flag-0 DMA totals measured on this runtime, less the internal memory
    the pattern lets them share, plus ``slack`` (the check draws its own models, patterns and
    slack).  None on a SoC the models are not built for (RK3588 only)."""
    from .. import models
    own = rt is None
    rt = rt or _open_runtime()
    try:
        soc = _soc_of(rt)
        if any(soc not in models.model_socs(m) for m in PRACTICE_MODELS):
            return None
        paths = [_model_file(m, soc) for m in PRACTICE_MODELS]
        frames = []
        for p in paths:
            ctx = rt.init(p)
            try:
                frames.append(_frames_of(rt, ctx, 1, np.random.default_rng(0)))
            finally:
                rt.destroy(ctx)
        _, totals, internals = _references(rt, paths, frames)
        pattern = [list(t) for t in pattern]
        return paths, pattern, sum(totals) - sum(internals) + _cases.least_internal(internals, pattern) + slack
    finally:
        if own:
            rt.close()


def try_budget(setup: Callable[..., Any], case: Optional[Tuple[List[str], List[List[int]], int]],
               rt: Any = None) -> str:
    """Run ``setup`` on a :func:`practice_case`, run the pattern with seeded frames, and say in
    one line whether the outputs equal flag-0 contexts' and the DMA total fits the budget
    (never raises; everything made is destroyed)."""
    if case is None:
        return "no practice case on this SoC: its models are built for RK3588 only (run on the simulator)"
    own = rt is None
    rt = rt or _open_runtime()
    paths, pattern, budget = case
    ledger = _Ledger(rt)
    try:
        ctxs = setup(ledger, list(paths), [list(t) for t in pattern], budget)
        ctxs = _as_contexts(ctxs, ledger, len(paths), "setup")
        frames = [_frames_of(rt, c, BUDGET_FRAMES, np.random.default_rng(1)) for c in ctxs]
        ref, _, _ = _references(rt, paths, frames)
        wrong, _ = _judged_run(rt, ctxs, pattern, frames, ref)
        total = ledger.total()
        right = not any(wrong.values())
        return (f"outputs equal to flag-0 contexts': {'yes' if right else 'NO'}; DMA total {total:,} B, budget "
                f"{budget:,} B: {'fits' if total <= budget else 'OVER'}")
    except NotImplementedError:
        return "not done yet: setup still raises NotImplementedError"
    except _Fail as f:
        return f.message
    except RknnError as exc:
        return f"the runtime refused: {exc.function} returned {exc.code} {exc.name}"
    except Exception as exc:
        return f"setup raised {type(exc).__name__}: {exc}"
    finally:
        ledger.cleanup()
        if own:
            rt.close()


def check_budget(setup: Callable[[Any, List[str], List[List[int]], int], List[int]]) -> CheckResult:
    """Exercise 5: ``setup(rt, model_paths, pattern, budget) -> [ctx, ...]``: one context per
    model (same order), ready to run in ``pattern``, holding at most ``budget`` bytes of DMA
    memory.  ``pattern`` lists the threads, each the model indices it runs in turn; the
    threads run at the same time (``[[0, 1, 2]]``: all in turn; ``[[0, 2], [1]]``: model 1
    runs beside models 0 and 2).

    The check draws two cases at every call, with models some notebook never prints: all in
    turn, and two threads at once.  In each, the models that may share do not come largest
    first, and the two cases' largest shared buffers differ.  It measures the DMA total
    (RKNN_QUERY_MEM_SIZE) of flag-0 contexts of each model after a run; the budget is their
    sum, less the internal memory the pattern allows to share, plus a slack under 48 KiB and
    under half the smallest internal buffer that has a partner.  It calls your function with
    a runtime that records the mems you make, then runs the pattern itself (each thread on a
    core of its own), three frames per model, with the general API, and:

    - compares every output byte with the flag-0 context's for the same frame;
    - adds up the DMA totals of every context you made, after the runs, less what each of
      your mems added to them, plus the buffers themselves, each counted once: every buffer
      you allocated, and the one behind every mem you set on a context (a runtime's mem or
      your own fd, measured by its file): at most the budget;
    - judges the sharing from the buffers behind rknn_set_internal_mem: the contexts of a
      thread point into one buffer, and contexts of different threads never use the same
      bytes of one.

    It destroys your mems and contexts afterwards."""
    def body() -> CheckResult:
        _require_function(setup, "check_budget(setup)")
        rt = _open_runtime()
        rng = np.random.default_rng(_fresh_seed())
        details: List[str] = []
        try:
            soc = _soc_of(rt)
            _rk3588_models(soc, _cases.BUDGET_MODELS)
            from .. import models
            internal_of = {m: models.load_report(m, soc).total_internal_size for m in _cases.BUDGET_MODELS}
            for n, (_, chosen, pattern, slack) in enumerate(_cases.budget_cases(rng, internal_of)):
                details.append(_budget_round(setup, rt, chosen, pattern, slack, rng, first=n == 0))
        finally:
            rt.close()
        return CheckResult(EX_BUDGET, "passed", "Both cases fit their budgets with every output right. The check "
                           "counted the buffers behind your mems, each once: the models that run in turn share one "
                           "internal buffer, and the ones that run at the same time use different bytes.", details)

    return _LAB.run(EX_BUDGET, body)


# =========================================================================== exercise 6: SRAM
def _sram_runtime() -> Tuple[Any, str]:
    """A runtime that shows free SRAM: this one when it is an RK3588 that shows it, else the
    simulated RK3588.  (runtime, where the numbers come from)."""
    from ..allocation.sram import free_sram
    rt = _open_runtime()
    if _soc_of(rt) == "rk3588":
        probe = rt.init(_model_file("digits_cnn", "rk3588"))
        try:
            if free_sram(rt, probe) is not None:
                return rt, f"measured on {rt.source}"
        finally:
            rt.destroy(probe)
    rt.close()
    import rknnlab
    sim = rknnlab.open_runtime("sim", soc="rk3588")
    return sim, f"measured on {sim.source}; this runtime shows no NPU SRAM"


def _situation(rt: Any, hold_pages: int, made: Sequence[Tuple[str, int]]) -> Tuple[int, List[Dict[str, int]],
                                                                                     List[int]]:
    """Hold ``hold_pages`` of SRAM with a TRY_ALLOC_SRAM mem, then make the contexts in turn:
    (free SRAM before the first, [{"flag", "total_internal_size"}], SRAM each one took)."""
    from ..allocation.sram import free_sram
    holder = rt.init(_model_file("digits_cnn", "rk3588"))
    held = (rt.create_mem2(holder, hold_pages * _cases.SRAM_PAGE, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)
            if hold_pages else None)
    ctxs: List[int] = []
    try:
        start = free_sram(rt, holder)
        free, contexts, taken = start, [], []
        for model, flag in made:
            ctxs.append(rt.init(_model_file(model, "rk3588"), flag))
            now = free_sram(rt, ctxs[-1])
            size = rt.query(ctxs[-1], abi.RKNN_QUERY_MEM_SIZE)
            contexts.append({"flag": int(flag), "total_internal_size": int(size.total_internal_size)})
            taken.append(int(free - now))
            free = now
        return int(start), contexts, taken
    finally:
        for c in reversed(ctxs):
            rt.destroy(c)
        if held is not None:
            rt.destroy_mem(holder, held)
        rt.destroy(holder)


def measure_sram(situation: Sequence[Tuple[str, int]] = SRAM_EXAMPLE) -> str:
    """Make ``situation``'s contexts ((model, flag), in turn) on an RK3588 that shows its SRAM
    (else the simulated RK3588) and say, one line each, what each took and what was left."""
    rt, source = _sram_runtime()
    try:
        start, _, taken = _situation(rt, 0, situation)
    finally:
        rt.close()
    lines = [f"free SRAM before: {start:,} B ({source})"]
    left = start
    for (model, flag), t in zip(situation, taken):
        left -= t
        name = "RKNN_FLAG_ENABLE_SRAM" if flag & abi.RKNN_FLAG_ENABLE_SRAM else "flag 0"
        lines.append(f"{model} ({name}): took {t:,} B of SRAM; {left:,} B free after")
    return "\n".join(lines)


def _attempt(call: Callable[[], Any], name: str) -> str:
    """What a student's function returns on the notebook's own example, as one line: never
    raises (a stub says "not done yet")."""
    try:
        return repr(call())
    except NotImplementedError:
        return f"not done yet: {name} still raises NotImplementedError"
    except Exception as exc:
        return f"{name} raised {type(exc).__name__}: {exc}"


def try_sram(sram_plan: Callable[[int, List[Dict[str, int]]], Sequence[int]],
             situation: Sequence[Tuple[str, int]] = SRAM_EXAMPLE, free_sram: int = 978_944) -> str:
    """Your ``sram_plan`` on the notebook's example (RK3588 reports, all SRAM free): the list
    it returns, or why there is none.  It judges nothing: compare with :func:`measure_sram`."""
    from .. import models
    contexts = [{"flag": int(flag), "total_internal_size": int(models.load_report(m, "rk3588").total_internal_size)}
                for m, flag in situation]
    return "your sram_plan: " + _attempt(lambda: sram_plan(free_sram, contexts), "sram_plan")


def try_masks(choose_mask: Callable[[Any], Dict[str, Any]], table: Any) -> str:
    """Your ``choose_mask`` on a table of :func:`measure_masks`: the dict it returns, or why
    there is none.  It judges nothing (the check does)."""
    return "your choose_mask: " + _attempt(lambda: choose_mask(table.copy()), "choose_mask")


def _sram_text(free: int, contexts: Sequence[Dict[str, int]]) -> str:
    names = ", ".join(("ENABLE_SRAM" if c["flag"] & abi.RKNN_FLAG_ENABLE_SRAM else "flag 0")
                      + f" {c['total_internal_size']:,} B" for c in contexts)
    return f"free {free:,} B; {names}"


def _sram_hint(free: int, contexts: Sequence[Dict[str, int]], values: Sequence[int], truth: Sequence[int]) -> str:
    """The principle the first wrong value breaks, without its number."""
    left = free
    for c, v, t in zip(contexts, values, truth):
        if v != t:
            need = -(-c["total_internal_size"] // _cases.SRAM_PAGE) * _cases.SRAM_PAGE
            if not c["flag"] & abi.RKNN_FLAG_ENABLE_SRAM:
                return RULE_SRAM
            if v > left:
                return ("A context can take only the SRAM that is still free: what the contexts before it took "
                        "is gone.")
            if v > need:
                return "A context takes no more SRAM than its internal buffer needs, in whole 4 KiB pages."
            if v % _cases.SRAM_PAGE:
                return "SRAM is handed out in whole 4 KiB pages (the driver's bitmap has one bit per page)."
            break
        left -= t
    return RULE_SRAM_BUDGET + " " + RULE_SRAM


def check_sram(sram_plan: Callable[[int, List[Dict[str, int]]], Sequence[int]]) -> CheckResult:
    """Exercise 6: ``sram_plan(free_sram, contexts) -> [bytes, ...]``: the SRAM each context
    takes when ``contexts`` (dicts with "flag" and "total_internal_size") are made in turn
    and ``free_sram`` bytes of the NPU's SRAM are free before the first.

    The check makes four situations at every call, on an RK3588 that shows its free SRAM
    (else the simulated RK3588): a flag-0 context with a large plan among ENABLE_SRAM ones, a
    small plan first, a large plan first, and part of the SRAM held by a TRY_ALLOC_SRAM mem of
    a random size, so that no free size is one the notebook prints.  It measures the free SRAM
    before and after each rknn_init, and compares your numbers with what each context took,
    exactly.  A failure shows your number and the principle it breaks, never the measurement."""
    def body() -> CheckResult:
        _require_function(sram_plan, "check_sram(sram_plan)")
        rng = np.random.default_rng(_fresh_seed())
        rt, source = _sram_runtime()
        try:
            from .. import models
            available = {m for m in models.list_models() if "rk3588" in models.model_socs(m)}
            cases = [_situation(rt, hold, made) for hold, made in _cases.sram_situations(rng, available)]
        finally:
            rt.close()
        wrong: List[str] = []
        for n, (free, contexts, truth) in enumerate(cases):
            what = f"sram_plan({free}, <{len(contexts)} contexts>)"
            try:
                got = sram_plan(free, [dict(c) for c in contexts])
            except Exception as exc:
                raise _student_failure(exc, what, "sram_plan", "return one number of bytes per context.")
            if got is None:
                raise (_not_done if n == 0 else _Fail)(f"{'sram_plan(…)' if n == 0 else what} returned None.",
                                                       "return a list with one number of bytes per context.")
            try:
                items = list(got)
            except TypeError:
                raise _Fail(f"{what} returned {got!r}, not a list.", "return a list with one int per context.")
            values = [_whole_number(v) for v in items]
            not_whole = [k for k, v in enumerate(values) if v is None]
            if not_whole:
                k = not_whole[0]
                raise _Fail(f"{what}: value {k + 1} of your list is {items[k]!r}, not a whole number of bytes.",
                            "return one int per context, in the order they are made.")
            if len(values) != len(contexts):
                raise _Fail(f"{what} returned {len(values)} values for {len(contexts)} contexts.",
                            "return one int per context, in the order they are made.")
            bad = [k for k, (v, t) in enumerate(zip(values, truth)) if v != t]
            if bad:
                wrong.append((f"situation {n + 1} ({_sram_text(free, contexts)}): you said "
                              + ", ".join(f"{values[k]:,} B for context {k + 1}" for k in bad)
                              + "; the measurement differs", _sram_hint(free, contexts, values, truth)))
        if wrong:
            raise _Fail(f"{len(wrong)} of {len(cases)} situations have a wrong number ({source}):",
                        wrong[0][1], [w for w, _ in wrong])
        return CheckResult(EX_SRAM, "passed", f"Every context of {len(cases)} situations right ({source}): SRAM goes "
                           "only where RKNN_FLAG_ENABLE_SRAM asks, as much as is free and the plan needs.",
                           [f"{len(cases)} situations, {sum(len(c[1]) for c in cases)} contexts"])

    return _LAB.run(EX_SRAM, body)


# =========================================================================== exercise 7: core masks
def _mask_runtime(rt: Any) -> Tuple[Any, bool]:
    """A runtime with three NPU cores: ``rt`` when it is an RK3588, else the simulated RK3588
    (True: opened here)."""
    if _soc_of(rt) == "rk3588":
        return rt, False
    import rknnlab
    return rknnlab.open_runtime("sim", soc="rk3588"), True


def measure_masks(models: Sequence[str] = MASK_MODELS, runs: int = 10, rt: Any = None, seed: int = 0) -> Any:
    """Time ``runs`` rknn_run calls of each model under RKNN_NPU_CORE_0, _0_1 and _0_1_2 (the
    masks take turns in blocks, each after one untimed run: rknnlab.profile.multicore's
    method) on an RK3588 (the simulated one where this board is another SoC).  One row per
    run: model, mask (its name), run, ms (wall time of rknn_run); ``attrs["source"]``."""
    import pandas as pd
    from ..profile.cores import _timed_runs
    from ..profile.phase_timing import frame_inputs
    from .. import models as _models
    if runs < 2:
        raise ValueError(f"runs must be at least 2 (a spread needs repeats), not {runs}")
    own = rt is None
    rt = rt or _open_runtime()
    timed, opened = _mask_runtime(rt)
    rows = []
    try:
        for name in models:
            ctx = timed.init(str(_models.model_path(name, "rk3588")))
            try:
                timed.inputs_set(ctx, frame_inputs(timed, ctx, seed))
                wall, _ = _timed_runs(timed, ctx, list(_cases.MASKS), runs)
            finally:
                timed.destroy(ctx)
            for mask in _cases.MASKS:
                rows += [{"model": name, "mask": abi.CORE_MASK_NAMES[mask], "run": k + 1, "ms": float(t) * 1e3}
                         for k, t in enumerate(wall[mask])]
        table = pd.DataFrame(rows, columns=list(_cases.COLUMNS))
        table.attrs["source"] = f"{timed.source}: wall time of rknn_run, {runs} runs per mask"
        return table
    finally:
        if opened:
            timed.close()
        if own:
            rt.close()


_MASK_HINT = ("Per model, compare the medians of the masks, not single runs or means: one slow run moves a mean. "
              "A mask is as good as the fastest when the interval of the ratio of their medians holds 1. "
              "Return one measured mask per model.")


def _mask_value(got: Any) -> Optional[int]:
    """A student's mask as the header's value: an int, or a name (with or without RKNN_NPU_)."""
    if isinstance(got, str):
        name = got.strip().upper()
        name = name if name.startswith("RKNN_NPU_") else "RKNN_NPU_" + name
        found = [v for v, n in abi.CORE_MASK_NAMES.items() if n == name]
        return found[0] if found else None
    return _whole_number(got)


def _judge_choice(table: Any, choice: Any, label: str, seed: int) -> List[str]:
    """What is wrong with ``choice`` for ``table`` (one line per model)."""
    verdicts = _cases.judge(table, seed)
    if not isinstance(choice, dict):
        return [f"{label}: you returned {type(choice).__name__}, not a dict {{model: mask}}"]
    wrong = []
    for model, v in verdicts.items():
        if model not in choice:
            wrong.append(f"{label}: no mask for {model}")
            continue
        value = _mask_value(choice[model])
        name = abi.CORE_MASK_NAMES.get(value) if value is not None else None
        if value == abi.RKNN_NPU_CORE_AUTO:
            wrong.append(f"{label}, {model}: RKNN_NPU_CORE_AUTO was not measured (it runs on one idle core)")
        elif name not in v["medians"]:
            wrong.append(f"{label}, {model}: {choice[model]!r} is not one of the measured masks")
        elif name not in v["accepted"]:
            ratio, low, high = v["intervals"][name]
            wrong.append(f"{label}, {model}: you chose {name}; its median {v['medians'][name]:.3f} ms is "
                         f"{ratio - 1:+.1%} against the fastest median (95% interval of the ratio {low:.3f}-"
                         f"{high:.3f}, which excludes 1)")
    return wrong


def check_core_masks(choose_mask: Callable[[Any], Dict[str, Any]]) -> CheckResult:
    """Exercise 7: ``choose_mask(table) -> {model: mask}``: per model of ``table`` (one row per
    run: model, mask, run, ms), the core mask with the lowest latency, as a value of
    ``abi.RKNN_NPU_CORE_*`` or its name.

    The check hands your function tables no notebook prints, new at every call: for each
    mask that is fastest somewhere under the simulator's timing law, the model where it wins
    by most; the model whose masks the law sets closest, with noise above the difference (a
    tie); a clear model where one run of the fastest mask took several times as long (a busy
    machine); a clear model where the first and the last run of each slower mask were faster
    than any of the fastest mask (a warm cache); all scaled by a random factor and renamed.
    Then it times two course models itself (:func:`measure_masks`) and hands you that table too.  A choice is right when its
    median cannot be told apart from the fastest median: the 95% bootstrap interval of the
    ratio of the two medians holds 1, or they differ by under 1 % (rknnlab.profile.multicore's
    rules).  Within a tie, every mask of the tie passes."""
    def body() -> CheckResult:
        _require_function(choose_mask, "check_core_masks(choose_mask)")
        seed = _fresh_seed()
        rng = np.random.default_rng(seed)
        tables = _cases.made_up_tables(rng)
        picked = [_CHECK_MASK_MODELS[int(i)] for i in rng.permutation(len(_CHECK_MASK_MODELS))[:2]]
        measured = measure_masks(picked, runs=10, seed=int(rng.integers(1000)))
        tables.append(("measured", measured))
        wrong: List[str] = []
        ties: List[str] = []
        for n, (kind, table) in enumerate(tables):
            label = f"table {n + 1}" + (f" ({measured.attrs['source'].split(':')[0]})" if kind == "measured" else "")
            what = f"choose_mask(<{label}: {', '.join(sorted(table['model'].unique()))}>)"
            try:
                got = choose_mask(table.copy())
            except Exception as exc:
                raise _student_failure(exc, what, "choose_mask", _MASK_HINT)
            if got is None:
                raise (_not_done if n == 0 else _Fail)(f"{'choose_mask(…)' if n == 0 else what} returned None.",
                                                       "return a dict {model: mask}, one entry per model.")
            wrong += _judge_choice(table, got, label, seed % 1000)
            ties += [f"{label}, {model}: cannot tell {', '.join(sorted(v['accepted']))} apart, so each of them "
                     "passed" for model, v in _cases.judge(table, seed % 1000).items() if len(v["accepted"]) > 1]
        if wrong:
            raise _Fail(f"{len(wrong)} wrong choice{'s' if len(wrong) != 1 else ''} in {len(tables)} tables:",
                        _MASK_HINT, wrong[:6])
        return CheckResult(EX_CORES, "passed", f"All {len(tables)} tables right: your choices equal the fastest "
                           "median, or tie with it (the noise decided which masks count as equally fast).",
                           [f"{len(tables)} tables ({len(tables) - 1} made up, 1 measured here: "
                            f"{', '.join(picked)})"] + ties)

    return _LAB.run(EX_CORES, body)
