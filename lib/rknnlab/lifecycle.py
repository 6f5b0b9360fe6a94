"""A context's life, measured: the lifecycle variants and their tables (Chapter 2).

Variants (run them with ``rknnlab.run(..., sample_calls=True)`` so that every
step has its own memory reading; each does one whole life, with
``lab.loop()`` for the frames, and no trim in the middle of the life; on
the simulator each first runs its frames through a throwaway context,
unrecorded, so that the simulator's own memory, the onnxruntime session
computing output values, is not counted as the first rknn_run's):

- :func:`from_path`: rknn_init with a path (size = 0);
- :func:`from_buffer`: the file read into a buffer, rknn_init with the
  buffer (size > 0), the caller's buffer freed right after init;
- :func:`from_buffer_zero_copy`: the file copied into a create_mem2
  (RKNN_MEM_FLAG_ALLOC_NO_CONTEXT) buffer, rknn_init with
  RKNN_FLAG_MODEL_BUFFER_ZERO_COPY and rknn_init_extend; the buffer is
  destroyed after the context;
- :func:`lite_life`: rknn-toolkit-lite2's RKNNLite, from load_rknn to the
  object's end (its model bytes outlive release()).

Tables:

- :func:`phase_table`: one row per step of a recorded life, with the change
  each step made in RSS, the malloc heap, the DMA total and MemFree;
  :func:`show_phases` prints it in one unit (KiB);
- :func:`contexts_memory`: N contexts made by rknn_init or by
  rknn_dup_context, measured in this process;
- :func:`cycle` and :func:`cycle_verdict`: a create/destroy cycle repeated,
  and whether anything grows per cycle; :func:`open_fds`;
- :func:`show_growth`: the growth verdicts of a run of several variants, one
  line each.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from .experiment.variants import (VariantContext, VariantUnavailable, fill_tcache, frame_input, malloc_trim,
                                  query_io, settle_simulator)
from .experiment.instrument import DMA_CHANGING
from .rknn import abi, buffers

#: the memory columns of phase_table: (its column, the samples' column)
_CHANGE_COLUMNS = (("rss_kib", "rss_kb"), ("heap_bytes", "heap_in_use_bytes"),
                   ("dma_bytes", "dma_bytes"), ("mem_free_kib", "mem_free_kb"))


# --------------------------------------------------------------------------- variants
def _prealloc_outputs(out_attrs: List[abi.rknn_tensor_attr]):
    """Float32 buffers of n_elems x 4 bytes, allocated once (is_prealloc = 1, want_float = 1)."""
    keep, outs = [], []
    for a in out_attrs:
        arr = np.empty(a.n_elems, dtype=np.float32)
        keep.append(arr)
        outs.append(abi.rknn_output(index=a.index, want_float=1, is_prealloc=1,
                                    buf=arr.ctypes.data, size=arr.nbytes))
    return outs, keep


def _prepare(lab: VariantContext) -> None:
    """Before the life starts: settle the process, then take a fresh reading.

    The harness's trim before the first measured frame (trim_after_warmup) is
    turned off: it would free in the middle of the life what earlier steps
    left in the heap, and show it as the first frame's.  The trim and the
    tcache fill happen here instead, before the first step.  On the simulator
    the frames first run through a throwaway context (settle_simulator): the
    memory of its onnxruntime session is the simulator's, not the runtime's.
    On a board nothing runs before the life."""
    lab.trim_after_warmup = False
    settle_simulator(lab)
    malloc_trim()
    fill_tcache()
    if lab.recorder.poll is not None:
        lab.recorder.poll()


def _frames(lab: VariantContext, ctx: int) -> Callable[[], None]:
    """Query the io; allocate the output buffers once (step "alloc_outputs"), then
    per frame: inputs_set, run, outputs_get into them, outputs_release (paired,
    with is_prealloc = 1 too).  Returns the step that frees the buffers
    ("free_outputs"), for the caller to call after rknn_destroy: the caller's
    own buffers go last."""
    rt = lab.rt
    _, out_attrs = query_io(rt, ctx)
    with lab.timed("alloc_outputs"):
        owned = list(_prealloc_outputs(out_attrs))   # [rknn_output structs, the arrays behind them]
    outs = owned[0]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    del outs

    def free_outputs() -> None:
        with lab.timed("free_outputs"):
            owned.clear()
    return free_outputs


def from_path(lab: VariantContext) -> None:
    """rknn_init from a file path (size = 0): the runtime reads the file itself.

    C::

        rknn_init(&ctx, (void *)"model.rknn", 0, 0, NULL);   /* size 0: a path */
        /* query io; per frame: inputs_set, run, outputs_get, outputs_release */
        rknn_destroy(ctx);
    """
    _prepare(lab)
    ctx = lab.rt.init(lab.model_path)
    free_outputs = _frames(lab, ctx)
    lab.rt.destroy(ctx)
    free_outputs()


def from_buffer(lab: VariantContext) -> None:
    """rknn_init from a buffer (size > 0); the caller frees its buffer right
    after init, as the model zoo does: the runtime no longer needs it then.
    That the runtime keeps a whole copy of the file instead is an inference
    from API reference V2.3.2 p.20 and what the simulator does (A4), not a
    documented fact.

    C::

        void *model = read_file("model.rknn", &size);        /* read_file */
        rknn_init(&ctx, model, size, 0, NULL);              /* size > 0: a buffer */
        free(model);                                        /* free_buffer */
        /* query io; frames */
        rknn_destroy(ctx);
    """
    rt = lab.rt
    _prepare(lab)
    with lab.timed("read_file"):
        with open(lab.model_path, "rb") as f:
            model = f.read()
    ctx = rt.init(model, size=len(model))
    with lab.timed("free_buffer"):
        del model
    free_outputs = _frames(lab, ctx)
    rt.destroy(ctx)
    free_outputs()


def from_buffer_zero_copy(lab: VariantContext) -> None:
    """RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: the model in a create_mem2 buffer made
    without a context; the runtime does not copy it, so the buffer must stay
    valid until rknn_destroy (API reference V2.3.2 p.20): destroy_mem comes
    after.  That the NPU then reads the weights in place, with no weight
    buffer of the context's own, is the simulator's model (A5); the extend's
    four fields are filled as p.20 fills them (the reference's own p.18 says
    extend must be NULL: A42).

    C::

        rknn_tensor_mem *m = rknn_create_mem2(0, size, RKNN_MEM_FLAG_ALLOC_NO_CONTEXT);
        fread(m->virt_addr, 1, size, f);                    /* copy_model */
        rknn_init_extend ext = {.real_model_offset = 0, .real_model_size = size,
                                .model_buffer_fd = m->fd,
                                .model_buffer_flags = m->flags};   /* as API p.20 */
        rknn_init(&ctx, m->virt_addr, size, RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, &ext);
        /* query io; frames */
        rknn_destroy(ctx);
        rknn_destroy_mem(0, m);                             /* after the context */
    """
    rt = lab.rt
    _prepare(lab)
    size = os.path.getsize(lab.model_path)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    with lab.timed("copy_model", size):
        view = buffers.mem_view(mem)
        with open(lab.model_path, "rb") as f:
            if f.readinto(memoryview(view)[:size]) != size:
                raise OSError(f"{lab.model_path} changed size while it was read")
    # all four fields, as the API reference's own text and sample fill them (p.20);
    # whether the runtime needs the mem's flags is not documented
    extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=size,
                                  model_buffer_fd=mem.contents.fd,
                                  model_buffer_flags=mem.contents.flags)
    ctx = rt.init(mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                  extend=extend, size=size)
    free_outputs = _frames(lab, ctx)
    rt.destroy(ctx)
    rt.destroy_mem(0, mem)
    free_outputs()


def lite_life(lab: VariantContext) -> None:
    """rknn-toolkit-lite2's life: ``RKNNLite()``, ``load_rknn(path)``,
    ``init_runtime()``, ``inference(inputs=[frame])`` per frame, ``release()``,
    then the object goes (``del lite``).  ``load_rknn`` reads the whole file
    into ``lite.rknn_data`` (step "load_rknn"); ``init_runtime`` hands those
    bytes to rknn_init, so the runtime's copy sits beside them (A65);
    ``release`` is rknn_destroy and leaves ``rknn_data``; the bytes go with the
    object (step "del_rknnlite").

    On the simulator the class's runtime calls (init, query, set_core_mask, the
    frames' four calls, destroy) are recorded like a C program's, so the phase
    table maps each method onto its C calls.  On a board the wheel calls
    librknnrt.so itself, unrecorded: each method is then one timed step
    ("init_runtime", "inference", "release").

    C it stands for::

        void *model = read_file("model.rknn", &size);        /* load_rknn: kept */
        rknn_init(&ctx, model, size, 0, NULL);              /* init_runtime */
        rknn_set_core_mask(ctx, RKNN_NPU_CORE_AUTO);
        /* per frame: inputs_set, run, outputs_get (want_float = 1,
           is_prealloc = 1), outputs_release                   inference */
        rknn_destroy(ctx);                                  /* release */
        free(model);                                        /* the object goes */
    """
    from contextlib import nullcontext
    from .lite import RKNNLite
    _prepare(lab)
    try:
        lite = RKNNLite()
    except ImportError as exc:  # a board without rknn-toolkit-lite2
        raise VariantUnavailable(str(exc)) from None
    on_board = not isinstance(lite, RKNNLite)   # the wheel's own object: its calls are not recorded

    def method(name: str):
        return lab.timed(name) if on_board else nullcontext()
    with lab.timed("load_rknn"):
        ret = lite.load_rknn(lab.model_path)
    if ret != 0:
        raise RuntimeError(f"RKNNLite.load_rknn({lab.model_path!r}) failed (see the E line above)")
    with method("init_runtime"):
        ret = lite.init_runtime()
    if ret != 0:
        raise RuntimeError("RKNNLite.init_runtime() failed (see the E line above)")
    for i in lab.loop():
        with method("inference"):
            outputs = lite.inference(inputs=[lab.input(i)])
        if outputs is None:
            raise RuntimeError("RKNNLite.inference returned None (see the E line above)")
        del outputs
    with method("release"):
        lite.release()
    with lab.timed("del_rknnlite"):
        del lite


# --------------------------------------------------------------------------- phase table
def _pick_variant(result: Any, variant: Optional[str]) -> str:
    names = list(result.variants)
    if variant is None:
        if len(names) != 1:
            raise ValueError(f"this result has {len(names)} variants ({', '.join(names)}): "
                             "say which with variant=")
        return names[0]
    if variant not in names:
        raise KeyError(f"no variant {variant!r} in this result; it has {', '.join(names)}")
    return variant


def step_readings(result: Any, variant: Optional[str] = None):
    """One row per recorded call or ``lab.timed`` block of ``variant``, in order:
    ``step`` (the function or the timed name), ``phase`` ("frames" for a step
    inside ``lab.loop()``, else the step), ``iteration``, ``start_ms`` and
    ``end_ms`` (from the run's start), ``ok``, and for each memory column
    (rss_kib, heap_bytes, dma_bytes, mem_free_kib) its reading ``<col>_before``
    (the last sample before the step started) and ``<col>_after`` (the first
    sample after it ended, if it came before the next step: with
    ``sample_calls=True`` the full sample taken right after it).  What the
    code does between two steps (allocating its own buffers, the harness's
    trim before the first measured frame) is no step's change.  A reading
    no sample gave is NaN.  The DMA total is 0 before the first call that
    changes it."""
    import pandas as pd
    name = _pick_variant(result, variant)
    calls = result.calls
    calls = calls[calls["variant"] == name].sort_values("start_s", kind="stable")
    smp = result.samples
    smp = smp[smp["variant"] == name].sort_values("t_s", kind="stable") if len(smp) else smp
    start = calls["start_s"].to_numpy(float) * 1e3
    end = start + calls["duration_us"].to_numpy(float) / 1e3
    nxt = np.append(start[1:], np.inf)
    it = calls["iteration"]
    df = pd.DataFrame({"step": calls["function"].astype(str).to_numpy(),
                       "phase": np.where(it.isna().to_numpy(), calls["function"].astype(str).to_numpy(),
                                         "frames"),
                       "iteration": it.to_numpy(), "start_ms": start, "end_ms": end,
                       "ok": calls["ok"].to_numpy(bool)})
    t = smp["t_s"].to_numpy(float) * 1e3 if len(smp) else np.array([])
    for col, source in _CHANGE_COLUMNS:
        values = smp[source].to_numpy(float) if source in smp else np.full(len(t), math.nan)
        if source == "dma_bytes":
            # NaN before the first call that can change the total: nothing allocated yet;
            # NaN later: such a call was in progress (its new total not read yet): no reading
            changing = calls["function"].isin(DMA_CHANGING).to_numpy()
            first = start[changing].min() if changing.any() else np.inf
            values = np.where(np.isnan(values) & (t < first), 0.0, values)
        good = np.isfinite(values)
        tt, vv = t[good], values[good]
        i = np.searchsorted(tt, start, side="left") - 1   # the last reading before the step
        j = np.searchsorted(tt, end, side="left")         # the first one after it ...
        j[j >= len(tt)] = -1
        j[j >= 0] = np.where(tt[j[j >= 0]] < nxt[j >= 0], j[j >= 0], -1)  # ... before the next step
        df[f"{col}_before"] = _at(vv, i)
        df[f"{col}_after"] = _at(vv, j)
    return df


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[index], NaN where index < 0."""
    out = np.full(len(index), math.nan)
    ok = index >= 0
    out[ok] = values[index[ok]]
    return out


def phase_table(result: Any, variant: Optional[str] = None, collapse: bool = True):
    """The steps of a recorded life and what each changed.

    One row per step, in order: ``step`` (the runtime function, e.g. "init",
    or the ``lab.timed`` name, e.g. "read_file"), ``phase`` ("frames" for the
    steps inside ``lab.loop()``), ``calls``, ``ms`` (their total time), and
    the change the step made (the sample after it minus the sample before it,
    summed over its calls) in ``rss_kib`` (process RSS, KiB), ``heap_bytes``
    (malloc heap in use), ``dma_bytes`` (the runtime's DMA total: the sum of
    total_dma_allocated_size over the live contexts) and ``mem_free_kib``
    (system MemFree, KiB).

    ``collapse=True`` merges the frames' calls per function (one
    "inputs_set" row with ``calls`` = the frames) and consecutive calls of
    one function outside the frames (the queries), so a whole life fits in
    about a dozen rows; ``collapse=False`` gives one row per call.  Record
    the run with ``rknnlab.run(..., sample_calls=True)``: without it most
    steps have no sample of their own and their changes are NaN."""
    import pandas as pd
    steps = step_readings(result, variant)
    cols = [c for c, _ in _CHANGE_COLUMNS]
    for c in cols:
        steps[c] = steps[f"{c}_after"] - steps[f"{c}_before"]
    steps["ms"] = steps["end_ms"] - steps["start_ms"]
    if not collapse:
        out = steps[["step", "phase", "iteration"] + ["ms"] + cols].copy()
        out.insert(3, "calls", 1)
        return out.reset_index(drop=True)
    groups: List[Dict[str, Any]] = []
    frame_rows: Dict[str, Dict[str, Any]] = {}
    prev_phase = None
    for row in steps.itertuples(index=False):
        if row.phase == "frames":
            if prev_phase != "frames":
                frame_rows = {}  # a new block of frames
            g = frame_rows.get(row.step)
            if g is None:
                g = frame_rows[row.step] = {"step": row.step, "phase": "frames", "calls": 0, "ms": 0.0,
                                            **{c: 0.0 for c in cols}}
                groups.append(g)
        elif groups and prev_phase == row.phase and groups[-1]["step"] == row.step:
            g = groups[-1]
        else:
            g = {"step": row.step, "phase": row.phase, "calls": 0, "ms": 0.0, **{c: 0.0 for c in cols}}
            groups.append(g)
        g["calls"] += 1
        g["ms"] += row.ms
        for c in cols:
            g[c] += getattr(row, c)  # NaN stays NaN: a step without its own reading
        prev_phase = row.phase
    return pd.DataFrame(groups, columns=["step", "phase", "calls", "ms"] + cols)


#: show_phases's memory columns: (phase_table's column, its header, bytes per unit of it)
_SHOWN_CHANGES = (("rss_kib", "RSS", 1024.0), ("heap_bytes", "heap", 1.0),
                  ("dma_bytes", "DMA", 1.0), ("mem_free_kib", "MemFree", 1024.0))


def _kib(value: float) -> str:
    """A change in KiB: signed, thousands separators, whole KiB; one decimal
    below 10 KiB where whole KiB would hide it; "0" for no change; "n/a" for
    no reading."""
    if math.isnan(value):
        return "n/a"
    if value == 0:
        return "0"
    kib = value / 1024.0
    if abs(kib) < 10 and round(kib) != round(kib, 1):
        return f"{kib:+.1f}"
    return f"{kib:+,.0f}"


def show_phases(table: Any) -> str:
    """A :func:`phase_table` as text to print: every memory change in KiB
    (signed, with thousands separators), ms with two decimals, and the phase
    named only where it is not the step itself ("frames").  The numbers stay
    in the table: this is for reading.

    >>> print(lifecycle.show_phases(lifecycle.phase_table(result)))   # doctest: +SKIP
    """
    missing = {"step", "phase", "calls", "ms"} - set(table.columns)
    missing |= {c for c, _, _ in _SHOWN_CHANGES} - set(table.columns)
    if missing:
        raise ValueError(f"not a phase_table: no column {', '.join(sorted(missing))}")
    rows = []
    for r in table.itertuples(index=False):
        phase = "" if r.phase == r.step else str(r.phase)
        rows.append([str(r.step), phase, f"{int(r.calls):,}", f"{r.ms:,.2f}"]
                    + [_kib(float(getattr(r, c)) * unit) for c, _, unit in _SHOWN_CHANGES])
    header = ["step", "phase", "calls", "ms"] + [h for _, h, _ in _SHOWN_CHANGES]
    if not any(row[1] for row in rows):   # no frames: the phase column says nothing
        header.pop(1)
        rows = [row[:1] + row[2:] for row in rows]
    widths = [max(len(header[k]), *(len(row[k]) for row in rows)) for k in range(len(header))]
    left = 2 if header[1] == "phase" else 1      # step (and phase) read from the left

    def line(cells: List[str]) -> str:
        return "  ".join(c.ljust(w) if k < left else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    n = len(_SHOWN_CHANGES)
    changes = sum(widths[-n:]) + 2 * (n - 1)
    lead = sum(widths[:-n]) + 2 * (len(widths) - n)
    title = "change made by the step, KiB".center(changes).rstrip()
    return "\n".join([" " * lead + title, line(header)] + [line(row) for row in rows])


# --------------------------------------------------------------------------- in this process
def _dma_total(rt: Any, contexts: List[int]) -> int:
    """The sum of RKNN_QUERY_MEM_SIZE total_dma_allocated_size over ``contexts``."""
    return sum(int(rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size) for c in contexts)


class _Readings:
    """This process's RSS (KiB), malloc heap in use (bytes) and the system's MemFree (KiB)."""

    def __init__(self) -> None:
        from .probe import Heap, MemInfo, ProcessMemory
        self._process, self._heap, self._meminfo = ProcessMemory(), Heap(), MemInfo()

    def now(self) -> Dict[str, float]:
        heap = self._heap.sample()["heap_in_use_bytes"]
        free = self._meminfo.sample().get("mem_free_kb")
        return {"rss_kib": float(self._process.rss_kb()),
                "heap_bytes": math.nan if heap is None else float(heap),
                "mem_free_kib": math.nan if free is None else float(free)}

    def close(self) -> None:
        self._process.close()
        self._meminfo.close()


def contexts_memory(rt: Any, model_path: Union[str, os.PathLike], n: int = 4):
    """Memory of N contexts made by rknn_init each, or by one rknn_init and
    rknn_dup_context of it, measured in this process.

    For ``how`` in ("init", "dup"): contexts are made one by one; after each,
    a row: ``how``, ``n`` (contexts made), ``alive`` (contexts alive),
    ``dma_total`` (the sum of total_dma_allocated_size over the live
    contexts; on the simulator a duplicate's total holds its own internal
    and io buffers and not the weights it shares, A9 and A23: no document
    says what a board's duplicate reports), ``rss_kib`` and ``heap_bytes``
    (change since before the first).  Then all are destroyed (duplicates first) and a last row with
    ``alive`` = 0 says whether RSS and the heap came back.  ``weights`` and
    ``internal`` (total_weight_size and total_internal_size of the model,
    from RKNN_QUERY_MEM_SIZE) are on every row, for predictions.

    One init and destroy comes first, unmeasured: one-off costs of a
    process's first init are not a context's.  On a board the runtime may
    allocate a context's io buffers only at its first rknn_run (A10), which
    this does not call."""
    import pandas as pd
    if n < 1:
        raise ValueError(f"n={n}: make at least one context")
    model_path = os.fspath(model_path)
    first = rt.init(model_path)
    try:
        sizes = rt.query(first, abi.RKNN_QUERY_MEM_SIZE)
        weights, internal = int(sizes.total_weight_size), int(sizes.total_internal_size)
    finally:
        rt.destroy(first)
    readings = _Readings()
    rows: List[Dict[str, Any]] = []
    try:
        for how in ("init", "dup"):
            malloc_trim()
            base = readings.now()
            alive: List[int] = []

            def row(made: int) -> None:
                now = readings.now()
                rows.append({"how": how, "n": made, "alive": len(alive),
                             "dma_total": _dma_total(rt, alive),
                             "rss_kib": now["rss_kib"] - base["rss_kib"],
                             "heap_bytes": now["heap_bytes"] - base["heap_bytes"],
                             "weights": weights, "internal": internal})
            try:
                for k in range(n):
                    alive.append(rt.init(model_path) if how == "init" or not alive
                                 else rt.dup_context(alive[0]))
                    row(k + 1)
            finally:
                for ctx in reversed(alive):
                    rt.destroy(ctx)
                alive.clear()
            malloc_trim()
            row(n)
    finally:
        readings.close()
    return pd.DataFrame(rows, columns=["how", "n", "alive", "dma_total", "rss_kib", "heap_bytes",
                                       "weights", "internal"])


def open_fds() -> int:
    """How many file descriptors this process has open (entries of /proc/self/fd,
    less the one listing them)."""
    return len(os.listdir("/proc/self/fd")) - 1


#: what cycle() can repeat, by name
CYCLES = ("init_destroy", "mem_no_context")


def cycle(rt: Any, what: Union[str, Callable[[Any], Optional[int]]], cycles: int = 30,
          model_path: Optional[Union[str, os.PathLike]] = None, size: int = 1 << 20,
          warmup: int = 1):
    """Repeat a create/destroy cycle ``cycles`` times in this process; one row
    per cycle.

    ``what``: "init_destroy" (rknn_init of ``model_path`` then rknn_destroy),
    "mem_no_context" (rknn_create_mem2(0, ``size``,
    RKNN_MEM_FLAG_ALLOC_NO_CONTEXT) then rknn_destroy_mem(0, mem)), or a
    function doing one cycle with ``rt`` (returning its DMA total, or None).
    ``model_path`` defaults to mobilenet_v2 for the runtime's SoC (an RK3566
    runs the RK3568 model).

    Columns: ``cycle`` (0, 1, ...), ``rss_kib``, ``heap_bytes`` and
    ``mem_free_kib`` (change since before the first cycle), ``open_fds``
    (the count after the cycle: the limit, ``ulimit -n``, is on the count),
    ``dma_total`` (the sum of total_dma_allocated_size over the contexts the
    cycle made, queried before it destroyed them: what one cycle holds; 0
    for mem_no_context, whose mem counts in no context's total on the
    simulator: A9).
    ``warmup`` cycles run first, unrecorded.  Judge a column with
    :func:`cycle_verdict`."""
    import pandas as pd
    if cycles < 1 or warmup < 0:
        raise ValueError("cycles must be at least 1 and warmup at least 0")
    step = _cycle_step(rt, what, model_path, size)
    for _ in range(warmup):
        step()
    malloc_trim()
    readings = _Readings()
    rows = []
    try:
        base = readings.now()
        for k in range(cycles):
            dma = step()
            now = readings.now()
            rows.append({"cycle": k, "rss_kib": now["rss_kib"] - base["rss_kib"],
                         "heap_bytes": now["heap_bytes"] - base["heap_bytes"],
                         "open_fds": open_fds(), "dma_total": 0 if dma is None else int(dma),
                         "mem_free_kib": now["mem_free_kib"] - base["mem_free_kib"]})
    finally:
        readings.close()
    return pd.DataFrame(rows, columns=["cycle", "rss_kib", "heap_bytes", "open_fds", "dma_total",
                                       "mem_free_kib"])


def _cycle_step(rt: Any, what: Union[str, Callable[[Any], Optional[int]]],
                model_path: Optional[Union[str, os.PathLike]], size: int) -> Callable[[], Optional[int]]:
    if callable(what):
        return lambda: what(rt)
    if what == "init_destroy":
        if model_path is None:
            from . import models
            soc = getattr(rt, "soc", "") or "rk3588"
            model_path = models.model_path("mobilenet_v2", {"rk3566": "rk3568"}.get(soc, soc))
        path = os.fspath(model_path)

        def init_destroy() -> int:
            ctx = rt.init(path)
            try:
                return _dma_total(rt, [ctx])
            finally:
                rt.destroy(ctx)
        return init_destroy
    if what == "mem_no_context":
        def mem_no_context() -> int:
            mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
            rt.destroy_mem(0, mem)
            return 0
        return mem_no_context
    raise ValueError(f"what={what!r}: expected one of {', '.join(CYCLES)} or a function of rt")


#: cycle_verdict's scale per column: (bytes per unit, step, flat floor per cycle, unit words)
_CYCLE_SCALES = {"rss_kib": (1024.0, "rss", "bytes"), "mem_free_kib": (1024.0, "rss", "bytes"),
                 "heap_bytes": (1.0, "heap", "bytes"), "dma_total": (1.0, "dma", "bytes"),
                 "open_fds": (1.0, "fds", "fds")}


def cycle_verdict(df: Any, column: str) -> str:
    """Does ``column`` of a :func:`cycle` table grow with the cycles?  The
    verdict words of rknnlab.experiment.growth, per cycle: "grows X ± Y
    bytes/cycle", "flat (|slope| < Z bytes/cycle, the floor of this run)" or
    "cannot tell yet: run about N more cycles".  open_fds is judged in fds
    (flat below 0.1 fd per cycle); dma_total, an exact count, to the byte
    (growth.DMA_STEP, DMA_RESOLUTION).  It needs at least 24 cycles."""
    from .experiment import growth as g
    if column not in _CYCLE_SCALES:
        raise ValueError(f"column {column!r}: expected one of {', '.join(_CYCLE_SCALES)}")
    scale, kind, unit = _CYCLE_SCALES[column]
    step, resolution = {"rss": (g.RSS_STEP, g.RSS_RESOLUTION), "heap": (g.HEAP_STEP, g.HEAP_RESOLUTION),
                        "dma": (g.DMA_STEP, g.DMA_RESOLUTION), "fds": (1.0, 0.1)}[kind]
    values = np.asarray(df[column], float) * scale
    words = g.growth(np.asarray(df["cycle"], float), values, step=step, resolution=resolution).words()
    return (words.replace("bytes/iteration", f"{unit}/cycle").replace("iterations", "cycles")
            .replace("iteration", "cycle"))


#: summary column -> its heading in show_growth (the two B/frame slopes: heap, then DMA)
_GROWTH_COLUMNS = {"iter_median_ms": "ms/frame", "heap_verdict": "heap:", "heap_slope_bytes_per_iter": "B/frame",
                   "rss_verdict": "RSS:", "dma_verdict": "DMA:", "dma_slope_bytes_per_iter": "B/frame "}


def _whole_bytes(value: float) -> str:
    return f"{value:+,.0f}" if round(value) else "0"       # no "-0" for a change under one byte


def show_growth(result: Any) -> str:
    """The growth verdicts of every variant of ``result`` (rknnlab.run), one line each:
    ms per frame, heap / RSS / DMA verdicts, the heap and DMA slopes in bytes per frame,
    and how much MemFree changed (MiB)."""
    table = result.summary[list(_GROWTH_COLUMNS)].rename(columns=_GROWTH_COLUMNS)
    table["MemFree change MiB"] = -result.summary["memfree_drop_kb"] / 1024
    formats = {"ms/frame": "{:.1f}".format, "B/frame": _whole_bytes, "B/frame ": _whole_bytes,
               "MemFree change MiB": lambda v: f"{v:+.1f}" if round(v, 1) else "0"}
    return table.to_string(formatters=formats)
