"""Preallocation measured: the widely copied recipe's loop, a loop that makes its io
mems anew every frame, and the supported way (create once, bind once, run many)."""
from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ..profile._common import spread
from ..probe import Heap
from ..rknn import abi
from ..rknn.buffers import mem_view
from ._common import MEASURED, BoundIo, dma_total, frame, model_file, run_label, runtime, seeded_frame

#: the three loops, in the order of the table (short: a printed table stays within 100 columns)
STRATEGIES = ("recipe: rebind + get",        # set_io_mem every frame, outputs_get on the bound output
              "new io mems every frame",     # create_mem, set_io_mem, destroy_mem every frame
              "create once, bind once")      # and run many: the supported reuse


def _float_outputs(rt: Any, ctx: int) -> List[np.ndarray]:
    """Every output of the last run as rknn_outputs_get gives it with want_float = 1
    (float32, the plain layout), copied; the get paired with its release."""
    n = int(rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output)
    outs = [abi.rknn_output(index=i, want_float=1, is_prealloc=0) for i in range(n)]
    rt.outputs_get(ctx, outs)
    try:
        return [np.frombuffer(ctypes.string_at(o.buf, int(o.size)), np.float32).copy() for o in outs]
    finally:
        rt.outputs_release(ctx, outs)


class _Loop:
    """One strategy on one context: ``setup()``, then ``frame(probe)`` per frame, then
    ``teardown()``.  ``probe()`` is called after every runtime call of a frame (the
    probed pass reads the DMA total there); ``get_heap`` collects the heap change
    inside each outputs_get."""

    def __init__(self, rt: Any, ctx: int) -> None:
        self.rt, self.ctx = rt, ctx
        self.calls = 0
        self.get_heap: List[int] = []
        self.heap = Heap()
        self.capture = False                      # keep the float outputs of the next frame
        self.outputs: List[np.ndarray] = []

    def call(self, fn: Callable[..., Any], *args: Any, probe: Optional[Callable[[], None]] = None) -> Any:
        out = fn(*args)
        self.calls += 1
        if probe is not None:
            probe()
        return out


class _Recipe(_Loop):
    """As published: mems sized from the PLAIN attrs' size, made once; every frame the
    input copied in, both mems bound again (set_io_mem), run, then outputs_get
    (want_float = 1) on the bound output and outputs_release."""

    def setup(self) -> None:
        rt, ctx = self.rt, self.ctx
        self.in_attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        self.out_attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        self.in_mem = rt.create_mem(ctx, int(self.in_attr.size))
        self.out_mem = rt.create_mem(ctx, int(self.out_attr.size))
        self.data = seeded_frame(self.in_attr)[:int(self.in_attr.size)]

    def frame(self, probe: Optional[Callable[[], None]] = None) -> None:
        rt, ctx = self.rt, self.ctx
        mem_view(self.in_mem, np.uint8, self.data.size)[:] = self.data
        self.call(rt.set_io_mem, ctx, self.in_mem, self.in_attr, probe=probe)
        self.call(rt.set_io_mem, ctx, self.out_mem, self.out_attr, probe=probe)
        self.call(rt.run, ctx, probe=probe)
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
        before = self.heap.sample()["heap_in_use_bytes"]
        self.call(rt.outputs_get, ctx, outs, probe=probe)
        after = self.heap.sample()["heap_in_use_bytes"]
        if before is not None and after is not None and probe is None:
            self.get_heap.append(after - before)
        self.call(rt.outputs_release, ctx, outs, probe=probe)
        if self.capture:
            self.outputs = _float_outputs(rt, ctx)

    def teardown(self) -> None:
        self.rt.destroy_mem(self.ctx, self.in_mem)
        self.rt.destroy_mem(self.ctx, self.out_mem)


class _PerFrame(_Loop):
    """Every frame: create_mem for each io tensor (native size_with_stride), set_io_mem,
    write the input, run, read the output after rknn_mem_sync, destroy_mem."""

    def setup(self) -> None:
        self.seed = 0

    def frame(self, probe: Optional[Callable[[], None]] = None) -> None:
        rt, ctx = self.rt, self.ctx
        io = BoundIo.bind(rt, ctx)
        self.calls += 2 * len(io.inputs + io.outputs)   # a create_mem and a set_io_mem each
        if probe is not None:
            probe()
        io.write_inputs(self.seed)
        self.call(rt.run, ctx, probe=probe)
        io.read_outputs()
        self.calls += len(io.inputs) + len(io.outputs)   # the mem_syncs
        if self.capture:
            self.outputs = _float_outputs(rt, ctx)
        io.destroy()
        self.calls += len(io.inputs) + len(io.outputs)
        if probe is not None:
            probe()

    def teardown(self) -> None:
        pass


class _Once(_Loop):
    """The supported reuse: io mems made and bound once; every frame the input written,
    run, the output read from the bound mem after rknn_mem_sync FROM_DEVICE."""

    def setup(self) -> None:
        self.io = BoundIo.bind(self.rt, self.ctx)

    def frame(self, probe: Optional[Callable[[], None]] = None) -> None:
        self.io.write_inputs(0)
        self.call(self.rt.run, self.ctx, probe=probe)
        self.io.read_outputs()
        self.calls += len(self.io.inputs) + len(self.io.outputs)   # the mem_syncs
        if self.capture:
            self.outputs = _float_outputs(self.rt, self.ctx)

    def teardown(self) -> None:
        self.io.destroy()


_LOOPS = dict(zip(STRATEGIES, (_Recipe, _PerFrame, _Once)))


def _measure(rt: Any, path: str, name: str, frames: int) -> Dict[str, Any]:
    ctx = rt.init(path)
    try:
        loop = _LOOPS[name](rt, ctx)
        loop.setup()
        try:
            loop.frame()                                   # warm-up: first-call costs are not a frame's
            loop.calls, loop.get_heap = 0, []
            heap0, dma0 = loop.heap.sample()["heap_in_use_bytes"], dma_total(rt, ctx)
            seconds = np.empty(frames)
            for i in range(frames):
                t = time.perf_counter()
                loop.frame()
                seconds[i] = time.perf_counter() - t
            calls = loop.calls / frames
            heap1, dma1 = loop.heap.sample()["heap_in_use_bytes"], dma_total(rt, ctx)
            rises: List[int] = []
            for _ in range(min(frames, 3)):                # probed pass: the DMA total after each call
                start = dma_total(rt, ctx)
                seen = [start]
                loop.frame(probe=lambda: seen.append(dma_total(rt, ctx)))
                rises.append(max(seen) - start)
            loop.capture = True                            # one more frame: its outputs, for same_output
            loop.frame()
            scales = [float(rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i)).scale)
                      for i in range(len(loop.outputs))]
        finally:
            loop.teardown()
    finally:
        rt.destroy(ctx)
    get_heap = float(np.median(loop.get_heap)) if loop.get_heap else float("nan")
    return {"strategy": name, "frames": frames, **spread(seconds), "calls_per_frame": calls,
            "dma_rise_bytes": int(max(rises)), "heap_per_get_bytes": get_heap,
            "dma_change_bytes": dma1 - dma0,
            "heap_change_bytes": (heap1 - heap0) if heap0 is not None and heap1 is not None else float("nan"),
            "kind": MEASURED, "outputs": loop.outputs, "scales": scales}


def _same(outputs: List[np.ndarray], reference: List[np.ndarray], scales: List[float]) -> bool:
    """Equal within one quantization step of each output (its attr's scale; exact for float outputs)."""
    return len(outputs) == len(reference) and all(
        a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1.0001 * s))
        for a, b, s in zip(outputs, reference, scales))


def prealloc_vs_per_frame(model: str = "mobilenet_v2", frames: int = 20, rt: Optional[Any] = None) -> Any:
    """The same frames of ``model`` through three loops, each on a fresh context of ``rt``
    (default: the simulated RK3588), named in STRATEGIES:

    - "recipe: rebind + get", the widely copied recipe: io mems sized from the plain
      attrs' size, made once, but bound again every frame (rknn_set_io_mem), and the
      output fetched with rknn_outputs_get (want_float = 1) although it is bound;
    - "new io mems every frame": io mems created, bound and destroyed every frame;
    - "create once, bind once": and run many (native attrs' size_with_stride; the output
      read from its mem after rknn_mem_sync FROM_DEVICE).

    Rows (one per strategy): strategy, frames, median_us / q1_us / q3_us (wall time per
    frame), repeats, calls_per_frame (runtime calls in a frame), dma_rise_bytes (the
    largest rise of total_dma_allocated_size inside a frame, read after every call: the
    DMA memory a frame allocates and frees again), heap_per_get_bytes (malloc heap in
    use after minus before each outputs_get: the runtime's allocation per get; NaN where
    there is none), dma_change_bytes and heap_change_bytes (over all measured frames:
    growth), kind, same_output (True when this loop's outputs on the seeded frame equal
    those of "create once, bind once" on the same pixels within one quantization step
    (each output attr's scale), all read with rknn_outputs_get, want_float = 1, after
    one more frame, unmeasured; the recipe's differs on the simulator because its uint8
    pixels go into a mem bound with the plain INT8 attr: A13).  One frame runs first,
    unmeasured.  The DMA columns assume the runtime counts create_mem buffers in the
    context's total, as the simulator does (A9); where a board does not,
    dma_rise_bytes is 0 there.  ~1 s on the simulator for mobilenet_v2."""
    if frames < 3:
        raise ValueError(f"frames={frames}: at least 3, for a median with quartiles")
    rt = runtime(rt)
    path = model_file(rt, model)
    rows = [_measure(rt, path, name, frames) for name in STRATEGIES]
    reference = rows[-1]["outputs"]
    for r in rows:
        r["same_output"] = _same(r.pop("outputs"), reference, r.pop("scales"))
    table = frame(rows, run_label(rt, f"{model}, {frames} frames per strategy, wall time measured"))
    table.attrs["model"] = model
    return table
