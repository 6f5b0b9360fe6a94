"""One internal buffer for several contexts: what it saves (measured with
RKNN_QUERY_MEM_SIZE), the official reuse demo's steps, N pipelines three ways, and what
happens when two contexts that share it run at the same time."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.buffers import mem_view
from ._common import (MEASURED, PAGE, BoundIo, dma_total, frame, mem_size, mismatch_share, model_file,
                      run_label, runtime, same_outputs)

#: the setups shared_internal compares, in its column order
SETUPS = ("separate", "shared_internal", "all_outside")


class Ledger:
    """The DMA memory a group of contexts really holds: the sum of their
    total_dma_allocated_size, plus the mems this code made that the runtime did not
    count there, minus views (create_mem_from_fd of a mem already counted) that it did.
    Both are measured at each create: no document says what a board's total includes
    (the simulator counts create_mem buffers and not views: A9)."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.contexts: List[int] = []
        self.mems: List[Any] = []          # (ctx, mem) to destroy, views first
        self.extra: Dict[int, int] = {}    # per context: bytes to add to the runtime's total

    def init(self, path: str, flag: int = 0) -> int:
        ctx = self.rt.init(path, flag=flag)
        self.contexts.append(ctx)
        return ctx

    def dup(self, ctx: int) -> int:
        new = self.rt.dup_context(ctx)
        self.contexts.append(new)
        return new

    def create(self, ctx: int, size: int) -> Any:
        before = dma_total(self.rt, ctx)
        mem = self.rt.create_mem(ctx, size)
        self.mems.append((ctx, mem))
        if dma_total(self.rt, ctx) - before < size:   # not counted by the runtime
            self.add(ctx, size)
        return mem

    def view(self, ctx: int, big: Any, size: int) -> Any:
        before = dma_total(self.rt, ctx)
        mem = self.rt.create_mem_from_fd(ctx, big.contents.fd, big.contents.virt_addr, size, 0)
        self.mems.insert(0, (ctx, mem))
        self.add(ctx, -max(dma_total(self.rt, ctx) - before, 0))   # counted, yet no new pages
        return mem

    def add(self, ctx: int, nbytes: int) -> None:
        """Count ``nbytes`` more (or fewer) for ``ctx`` than its total_dma_allocated_size says."""
        self.extra[ctx] = self.extra.get(ctx, 0) + nbytes

    def context_total(self, ctx: int) -> int:
        """What ``ctx`` really holds: its DMA total corrected as above."""
        return dma_total(self.rt, ctx) + self.extra.get(ctx, 0)

    def total(self) -> int:
        return sum(self.context_total(c) for c in self.contexts)

    def close(self) -> None:
        for ctx, mem in self.mems:
            self.rt.destroy_mem(ctx, mem)
        for ctx in reversed(self.contexts):
            self.rt.destroy(ctx)
        self.mems, self.contexts = [], []


def _share_internal(ledger: Ledger, contexts: Sequence[int]) -> List[Any]:
    """The demo's steps 3 and 4: one mem of the largest total_internal_size, made with the
    first context; a create_mem_from_fd view of it per context (made with that context,
    of that context's total_internal_size), set with rknn_set_internal_mem.  Returns the
    views, in the order of ``contexts``."""
    rt = ledger.rt
    sizes = [int(mem_size(rt, c).total_internal_size) for c in contexts]
    big = ledger.create(contexts[0], max(sizes))
    views = [ledger.view(ctx, big, size) for ctx, size in zip(contexts, sizes)]
    for ctx, view in zip(contexts, views):
        rt.set_internal_mem(ctx, view)
    return views


def _weights_outside(ledger: Ledger, ctx: int) -> None:
    """What the demo does and its documentation leaves out: with MEM_ALLOC_OUTSIDE the
    weights are outside too (create_mem of total_weight_size, rknn_set_weight_mem)."""
    size = int(mem_size(ledger.rt, ctx).total_weight_size)
    ledger.rt.set_weight_mem(ctx, ledger.create(ctx, size))


def _run_all(rt: Any, ios: Sequence[BoundIo], seed: int = 0) -> List[List[Any]]:
    """Each context once, one after another, on the seeded input; their native outputs."""
    outs = []
    for io in ios:
        io.write_inputs(seed)
        rt.run(io.ctx)
        outs.append(io.read_outputs())
    return outs


def _setup(rt: Any, paths: Sequence[str], setup: str) -> Dict[str, Any]:
    """Init every model in ``setup``, bind io, share internal memory where asked, run each
    once; returns the ledger's total, per-context totals and the outputs."""
    flag = {"separate": 0, "shared_internal": abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE,
            "all_outside": abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE}[setup]
    ledger = Ledger(rt)
    try:
        contexts = [ledger.init(p, flag) for p in paths]
        if setup == "all_outside":
            for ctx in contexts:
                _weights_outside(ledger, ctx)
        ios = []
        for ctx in contexts:   # io mems through the ledger too: they count in every setup alike
            ios.append(BoundIo.bind(rt, ctx))
            ledger.mems.extend((ctx, m) for m in ios[-1].inputs + ios[-1].outputs)
            ledger.add(ctx, _uncounted_io(rt, ctx, ios[-1]))
        if setup != "separate":
            _share_internal(ledger, contexts)
        outputs = _run_all(rt, ios)
        return {"total": ledger.total(), "outputs": outputs,
                "per_context": [ledger.context_total(c) for c in contexts]}
    finally:
        for io in locals().get("ios", []):
            io.inputs, io.outputs = [], []          # the ledger destroys them
        ledger.close()


def _uncounted_io(rt: Any, ctx: int, io: BoundIo) -> int:
    """0 when the runtime counts the io mems in the context's DMA total, else their bytes
    (measured by making one more mem of the same size and watching the total)."""
    if not io.inputs:
        return 0
    size = int(io.inputs[0].contents.size)
    before = dma_total(rt, ctx)
    probe = rt.create_mem(ctx, size)
    try:
        counted = dma_total(rt, ctx) - before >= size
    finally:
        rt.destroy_mem(ctx, probe)
    return 0 if counted else io.nbytes


def shared_internal(models: Sequence[str] = ("mobilenet_v2", "resnet50", "yolov5s"),
                    rt: Optional[Any] = None) -> Any:
    """What sharing one internal buffer between models that run one after another saves,
    measured on ``rt`` (default: the simulated RK3588) in three setups:

    - ``separate``: a plain rknn_init per model (the runtime allocates everything);
    - ``shared_internal``: RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE per model, one mem of the
      largest total_internal_size, a create_mem_from_fd view of it per context,
      rknn_set_internal_mem;
    - ``all_outside``: the official reuse demo's steps, RKNN_FLAG_MEM_ALLOC_OUTSIDE: the
      same shared internal mem, plus each model's weights in a mem of its own
      (rknn_set_weight_mem), which the documentation's snippets leave out.

    In every setup each context's io is bound once with mems sized from the native
    attrs, and each model runs once, one after another, on the same seeded input.

    Rows: one per model, then "total".  Columns: model, weights_bytes, internal_bytes
    (RKNN_QUERY_MEM_SIZE), io_bytes (size_with_stride of the native io), and the DMA
    memory of that model's context in each setup: separate_bytes, shared_internal_bytes,
    all_outside_bytes (its total_dma_allocated_size, corrected for mems the runtime does
    not count there: see Ledger).  In the two shared setups the shared buffer is counted
    once, in the FIRST model's row (the first context allocates it, as the demo does; the
    others hold only views of it), so the first row grows by the largest internal size
    and the others lose theirs; the "total" row is the sum over the contexts.
    same_outputs: the outputs of both shared setups equal the separate ones, byte for
    byte.  ``attrs``: max_internal_bytes, saving_bytes (separate total minus
    shared_internal total), source.  ~0.5 s on the simulator for the default models."""
    if len(models) < 2:
        raise ValueError(f"models={list(models)}: sharing needs at least two models")
    rt = runtime(rt)
    paths = [model_file(rt, m) for m in models]
    results = {s: _setup(rt, paths, s) for s in SETUPS}
    rows: List[Dict[str, Any]] = []
    reference = results["separate"]["outputs"]
    sizes = []
    for i, (name, path) in enumerate(zip(models, paths)):
        ctx = rt.init(path, flag=abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)
        try:
            m = mem_size(rt, ctx)
            weights, internal = int(m.total_weight_size), int(m.total_internal_size)
        finally:
            rt.destroy(ctx)
        io = _io_bytes_of(rt, path)
        sizes.append(internal)
        same = all(same_outputs(results[s]["outputs"][i], reference[i]) for s in SETUPS[1:])
        rows.append({"model": name, "weights_bytes": weights, "internal_bytes": internal, "io_bytes": io,
                     **{f"{s}_bytes": results[s]["per_context"][i] for s in SETUPS},
                     "same_outputs": same})
    rows.append({"model": "total", "weights_bytes": sum(r["weights_bytes"] for r in rows),
                 "internal_bytes": sum(sizes), "io_bytes": sum(r["io_bytes"] for r in rows),
                 **{f"{s}_bytes": results[s]["total"] for s in SETUPS},
                 "same_outputs": all(r["same_outputs"] for r in rows)})
    table = frame(rows, run_label(rt, "RKNN_QUERY_MEM_SIZE after one run of each model, one after another"))
    table.attrs.update(max_internal_bytes=max(sizes),
                       saving_bytes=results["separate"]["total"] - results["shared_internal"]["total"],
                       models=list(models))
    return table


def _io_bytes_of(rt: Any, path: str) -> int:
    ctx = rt.init(path)
    try:
        from ._common import io_bytes
        return io_bytes(rt, ctx)
    finally:
        rt.destroy(ctx)


#: the ways of making N pipelines of one model that pipelines_memory compares
PIPELINES = ("rknn_init each", "rknn_dup_context", "rknn_init each + one internal mem",
             "rknn_dup_context + one internal mem")


def _run_once(rt: Any, ctx: int) -> None:
    """One frame through the runtime's own io buffers (so that a board has allocated them: A10)."""
    from ..experiment.variants import frame_input
    from ._common import seeded_frame
    a = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    dims = [int(d) for d in a.dims[:a.n_dims]]
    data = seeded_frame(a)[:int(a.n_elems)].reshape(dims)
    rt.inputs_set(ctx, frame_input(data))
    rt.run(ctx)


def pipelines_memory(model: str = "mobilenet_v2", n_values: Sequence[int] = (1, 2, 3, 4),
                     rt: Optional[Any] = None) -> Any:
    """The DMA memory of N pipelines of ``model`` (one context each), four ways, measured on
    ``rt`` (default: the simulated RK3588) after one run of every context:

    - "rknn_init each": N independent contexts;
    - "rknn_dup_context": one rknn_init, N - 1 rknn_dup_context of it (weights shared);
    - "rknn_init each + one internal mem": N contexts made with
      RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE sharing one internal mem (create_mem_from_fd views);
    - "rknn_dup_context + one internal mem": both.

    Rows: how, n, dma_bytes (the contexts' total_dma_allocated_size plus the mems made here
    that the runtime does not count: see Ledger), per_pipeline_bytes (dma_bytes / n),
    run_at_once (False where the contexts share internal memory: they must run one
    after another), kind.  ~1 s on the simulator for mobilenet_v2."""
    ns = sorted(set(int(n) for n in n_values))
    if not ns or ns[0] < 1:
        raise ValueError(f"n_values={list(n_values)}: positive counts of pipelines")
    rt = runtime(rt)
    path = model_file(rt, model)
    rows = []
    for how in PIPELINES:
        shared = how.endswith("internal mem")
        flag = abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE if shared else 0
        for n in ns:
            ledger = Ledger(rt)
            try:
                first = ledger.init(path, flag)
                for _ in range(n - 1):
                    ledger.dup(first) if how.startswith("rknn_dup") else ledger.init(path, flag)
                if shared:
                    _share_internal(ledger, ledger.contexts)
                for ctx in ledger.contexts:
                    _run_once(rt, ctx)
                total = ledger.total()
            finally:
                ledger.close()
            rows.append({"how": how, "n": n, "dma_bytes": total, "per_pipeline_bytes": total / n,
                         "run_at_once": not shared, "kind": MEASURED})
    table = frame(rows, run_label(rt, f"{model}, RKNN_QUERY_MEM_SIZE after one run of each context"))
    table.attrs["model"] = model
    return table


#: overlapping attempts per run asked for, at most: an attempt whose runs did not overlap as
#: planned (the machine was busy) is retried, and reported in attrs["retried"]
ATTEMPTS_PER_RUN = 10
#: how often the wait for the first run polls the shared buffer (seconds)
_POLL_S = 50e-6


@dataclass
class _Run:
    """One rknn_run of one context: when it was called and returned (perf_counter),
    its native outputs, and its run time as RKNN_QUERY_PERF_RUN reports it."""
    ctx: int
    start: float = 0.0
    end: float = 0.0
    run_us: int = 0
    outputs: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None


def _run(rt: Any, io: BoundIo, seed: int) -> _Run:
    """The seeded input written, one rknn_run, its outputs read: times and outputs."""
    r = _Run(io.ctx)
    try:
        io.write_inputs(seed)
        r.start = time.perf_counter()
        rt.run(io.ctx)
        r.end = time.perf_counter()
        r.run_us = int(rt.query(io.ctx, abi.RKNN_QUERY_PERF_RUN).run_duration)
        r.outputs = io.read_outputs()
    except BaseException as exc:   # reported in the calling thread
        r.error = exc
    return r


def _zero(rt: Any, ctx: int, view: Any) -> None:
    mem_view(view, np.uint8)[:] = 0
    rt.mem_sync(ctx, view, abi.RKNN_MEMORY_SYNC_TO_DEVICE)


def _sample(rt: Any, ctx: int, view: Any, nbytes: int) -> np.ndarray:
    """One byte per 4 KiB page of the first ``nbytes`` of ``view`` and its last byte, as the
    CPU sees them after rknn_mem_sync."""
    rt.mem_sync(ctx, view, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
    data = mem_view(view, np.uint8, nbytes)
    return np.append(data[::PAGE], data[-1])


def _written(sample: np.ndarray) -> bool:
    """Tensors written over the whole sampled range of a zeroed buffer: its last byte is
    no longer zero, and it holds more than one value (not a fill still under way)."""
    return bool(sample[-1]) and bool(np.any(sample != sample[0]))


def _attempt(rt: Any, first: BoundIo, second: BoundIo, seeds: Sequence[int], second_view: Any,
             watched: int) -> Tuple[_Run, _Run, bool]:
    """One try at overlapping runs: ``first`` runs in a thread; once its tensors are in the
    shared buffer (zeroed before, its first ``watched`` bytes watched through ``second``'s
    view of it: written up to the last byte, more than one value, the same in two polls)
    the first run is on the NPU, and ``second`` runs at
    once in this thread.  The try counts (``nested``) when the second run was called
    after those tensors appeared and returned before the first run's own run time
    (PERF_RUN) had passed since it was called: then the second run used the buffer
    entirely inside the first one's use of it, whatever the machine's load did to the
    threads."""
    _zero(rt, second.ctx, second_view)
    box: List[_Run] = []
    thread = threading.Thread(target=lambda: box.append(_run(rt, first, seeds[0])))
    thread.start()
    seen, last = None, None
    while thread.is_alive():
        sample = _sample(rt, second.ctx, second_view, watched)
        if last is not None and _written(sample) and np.array_equal(sample, last):
            seen = time.perf_counter()
            break
        last = sample
        time.sleep(_POLL_S)
    later = _run(rt, second, seeds[1])
    thread.join()
    earlier = box[0]
    for r in (earlier, later):
        if r.error is not None:
            raise r.error
    nested = seen is not None and seen <= later.start and later.end <= earlier.start + earlier.run_us / 1e6
    return earlier, later, nested


def _reference(rt: Any, path: str, seeds: Sequence[int]) -> Tuple[List[List[Any]], int]:
    """The model alone (its own internal memory) on each seeded input: outputs, PERF_RUN us."""
    ledger = Ledger(rt)
    try:
        io = BoundIo.bind(rt, ledger.init(path))
        outputs = [_run_all(rt, [io], seed=s)[0] for s in seeds]
        run_us = int(rt.query(io.ctx, abi.RKNN_QUERY_PERF_RUN).run_duration)
        io.destroy()
    finally:
        ledger.close()
    return outputs, run_us


def parallel_corruption(models: Sequence[str] = ("mobilenet_v2", "resnet50"), repeats: int = 3,
                        rt: Optional[Any] = None) -> Any:
    """Two contexts sharing one internal mem (RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE, a
    create_mem_from_fd view per context, the demo's steps), run ``repeats`` times one
    after another and ``repeats`` times at the same time, on ``rt`` (default: the
    simulated RK3588).  Each model gets its own seeded input; its outputs are compared
    byte for byte with a context of its own (plain rknn_init) on the same input.

    At the same time: the model with the longer run (PERF_RUN) starts first, pinned to
    NPU core 0; the other, pinned to core 1, starts as soon as the first run's tensors are
    in the shared buffer, and must return before the first run's own run time has
    passed since it was called.  An attempt where it did not (a busy machine delays a
    thread) is not counted and is tried again, at most ATTEMPTS_PER_RUN x ``repeats``
    attempts; attrs["retried"] says how many were dropped.  So the shorter run always
    uses the buffer inside the longer one's use of it, and the table is the same on
    every build, or says it could not make the runs overlap.

    Rows: mode ("one after another" / "at the same time"), model, started ("in turn";
    "first, core 0" / "second, core 1"), runs (counted runs), correct_runs (outputs equal
    to the reference), mismatch_share (the share of output bytes that differ from the
    reference, mean over the runs; NaN with no run), other_input_share (the share of
    output bytes that differ between the model's outputs on its input and on another
    seeded input: what a different real input changes, for scale), overlap_ms (mean
    time both were inside rknn_run together: 0 one after another), kind.
    ``attrs``: verdict (:func:`corruption_verdict`), retried, attempts, models.  Both
    models need a total_internal_size above 0.  ~0.3 s on the simulator."""
    if len(models) != 2:
        raise ValueError(f"models={list(models)}: two models")
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: at least 1")
    rt = runtime(rt)
    paths = [model_file(rt, m) for m in models]
    seeds = (1, 2)
    other_seeds = (11, 12)
    reference, other, run_us = [], [], []
    for path, seed, other_seed in zip(paths, seeds, other_seeds):   # each model alone
        outs, us = _reference(rt, path, (seed, other_seed))
        reference.append(outs[0])
        other.append(mismatch_share(outs[1], outs[0]))
        run_us.append(us)
    longer = 0 if run_us[0] >= run_us[1] else 1
    order = (longer, 1 - longer)
    masks = _core_masks(rt)
    ledger = Ledger(rt)
    runs: Dict[str, List[List[_Run]]] = {"one after another": [[], []], "at the same time": [[], []]}
    attempts = 0
    try:
        contexts = [ledger.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in paths]
        if min(int(mem_size(rt, c).total_internal_size) for c in contexts) == 0:
            raise ValueError(f"{', '.join(models)}: a model with no internal memory shares nothing")
        views = _share_internal(ledger, contexts)
        watched = min(int(mem_size(rt, c).total_internal_size) for c in contexts)   # both runs' plans
        ios = [BoundIo.bind(rt, c) for c in contexts]
        if masks:
            for i, mask in zip(order, masks):
                rt.set_core_mask(contexts[i], mask)
        for _ in range(repeats):
            for i in order:
                r = _run(rt, ios[i], seeds[i])
                if r.error is not None:
                    raise r.error
                runs["one after another"][i].append(r)
        at_once = runs["at the same time"]
        while len(at_once[0]) < repeats and attempts < ATTEMPTS_PER_RUN * repeats:
            attempts += 1
            earlier, later, nested = _attempt(rt, ios[order[0]], ios[order[1]], [seeds[i] for i in order],
                                              views[order[1]], watched)
            if nested:
                at_once[order[0]].append(earlier)
                at_once[order[1]].append(later)
        for io in ios:
            io.destroy()
    finally:
        ledger.close()
    rows = []
    for mode, per_model in runs.items():
        for i, name in enumerate(models):
            mine = per_model[i]
            partner = per_model[1 - i]
            started = "in turn" if mode == "one after another" else \
                ("first" if i == longer else "second") + (f", core {0 if i == longer else 1}" if masks else "")
            overlaps = [max(0.0, min(a.end, b.end) - max(a.start, b.start)) for a, b in zip(mine, partner)]
            rows.append({"mode": mode, "model": name, "started": started, "runs": len(mine),
                         "correct_runs": sum(same_outputs(r.outputs, reference[i]) for r in mine),
                         "mismatch_share": (sum(mismatch_share(r.outputs, reference[i]) for r in mine) / len(mine)
                                            if mine else float("nan")),
                         "other_input_share": other[i],
                         "overlap_ms": 1e3 * sum(overlaps) / len(overlaps) if overlaps else 0.0,
                         "kind": MEASURED})
    cores = "pinned to NPU cores 0 and 1" if masks else "one NPU core"
    table = frame(rows, run_label(rt, f"two contexts sharing one internal mem, {cores}, outputs compared "
                                      "with a context of each model's own"))
    table.attrs.update(models=list(models), retried=attempts - len(runs["at the same time"][0]),
                       attempts=attempts)
    table.attrs["verdict"] = corruption_verdict(table)
    return table


def corruption_verdict(table: Any) -> str:
    """What a parallel_corruption table shows, with its uncertainty: corrupted, not seen
    (which does not make sharing safe), or "cannot tell" when the runs never overlapped."""
    seq = table[table["mode"] == "one after another"]
    both = table[table["mode"] == "at the same time"]
    if (seq["correct_runs"] < seq["runs"]).any():
        return ("cannot tell: runs one after another were wrong too, so something other than "
                "the sharing is broken")
    if not len(both) or (both["runs"] == 0).all() or (both["overlap_ms"] <= 0).all():
        tried = table.attrs.get("attempts")
        return ("cannot tell: the runs at the same time never overlapped in time"
                + (f" ({tried} attempts)" if tried else ""))
    wrong, runs = int((both["runs"] - both["correct_runs"]).sum()), int(both["runs"].sum())
    if wrong:
        return (f"corrupted: {wrong} of {runs} outputs of runs at the same time were wrong; all "
                f"{int(seq['runs'].sum())} outputs of runs one after another were right")
    return (f"no wrong output in {runs} overlapping runs: this does not show that sharing is safe "
            "(no document says it is)")


def _core_masks(rt: Any) -> Optional[Sequence[int]]:
    """Cores 0 and 1 where the SoC has at least two NPU cores (RK3588, RK3576), else None."""
    from ..sim.npu import soc_npu
    try:
        cores = soc_npu(rt.soc).cores
    except ValueError:
        return None
    return (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1) if cores >= 2 else None
