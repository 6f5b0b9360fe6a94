"""Variants: plain functions that run an inference loop through a runtime.

A variant takes one argument, ``lab`` (a :class:`VariantContext`), and uses

- ``lab.rt``: the runtime, one method per C function; every call is timed
  automatically, so a variant needs no timing code;
- ``lab.model_path``: the .rknn file; ``lab.inputs``: seeded uint8 NHWC
  frames (``lab.input(i)`` cycles through them);
- ``for i in lab.loop():``: ``lab.warmup`` warm-up iterations, then
  ``lab.iterations`` measured ones; each iteration's number is attached to
  the calls and memory samples made during it (``with lab.iteration(i):``
  does the same for a loop of your own);
- ``lab.timed("name")``: time a block that is not a runtime call.

The harness runs each variant in a fresh process.  A variant defined in a
notebook cell is sent there as source code: use modules, plain values and
functions of the notebook freely, but objects (arrays, open runtimes) must
be made inside the variant.

The built-ins below are the course's, each with the C it stands for.
"""
from __future__ import annotations

import ctypes
import gc
import os
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi, buffers
from ..rknn.abi import (RKNN_MEMORY_SYNC_FROM_DEVICE, RKNN_MEMORY_SYNC_TO_DEVICE,
                        RKNN_QUERY_IN_OUT_NUM, RKNN_QUERY_INPUT_ATTR,
                        RKNN_QUERY_NATIVE_INPUT_ATTR, RKNN_QUERY_NATIVE_OUTPUT_ATTR,
                        RKNN_QUERY_OUTPUT_ATTR, RKNN_TENSOR_NHWC, RKNN_TENSOR_UINT8,
                        rknn_output, rknn_tensor_attr)
from .instrument import Recorder


class VariantUnavailable(RuntimeError):
    """This variant cannot run here (e.g. needs a board); the result marks it skipped."""


class VariantContext:
    """What a variant gets: the instrumented runtime, the model, the inputs, the loop."""

    def __init__(self, rt: Any, recorder: Recorder, model_path: str, inputs: Sequence[np.ndarray],
                 iterations: int, warmup: int = 0, model: str = "", soc: str = "",
                 params: Optional[Dict[str, Any]] = None,
                 progress: Optional[Callable[[int, bool], None]] = None,
                 trim_after_warmup: bool = True) -> None:
        self.rt = rt
        self.recorder = recorder
        self.model_path = str(model_path)
        self.model = model
        self.soc = soc
        self.inputs = list(inputs)
        self.iterations = int(iterations)
        self.warmup = int(warmup)
        self.params = dict(params or {})
        self._progress = progress
        self.trim_after_warmup = trim_after_warmup

    @property
    def total(self) -> int:
        """warm-up + measured iterations."""
        return self.warmup + self.iterations

    def input(self, i: int) -> np.ndarray:
        """The seeded frame for iteration ``i`` (the frames repeat in a cycle)."""
        return self.inputs[i % len(self.inputs)]

    def stage_of(self, i: int) -> str:
        return "warmup" if i < self.warmup else "measure"

    @contextmanager
    def iteration(self, i: int) -> Iterator[int]:
        """Mark iteration ``i`` (0 .. total-1; the first ``warmup`` are warm-up)."""
        rec = self.recorder
        stage = self.stage_of(i)
        if i == self.warmup and self.trim_after_warmup:
            malloc_trim()
            fill_tcache()
            if rec.poll is not None:  # a reading after the trim: it is no step's change
                rec.poll()
        rec.iteration, rec.stage = i, stage
        if self._progress is not None:
            self._progress(i, False)
        t = time.perf_counter_ns()
        try:
            yield i
        finally:
            rec.add_iteration(i, stage, t, time.perf_counter_ns() - t)
            rec.iteration = None
            if self._progress is not None:
                self._progress(i, True)

    def loop(self) -> Iterator[int]:
        """``for i in lab.loop():`` the warm-up iterations, then the measured ones."""
        for i in range(self.total):
            with self.iteration(i):
                yield i
        self.recorder.stage = "teardown"

    def timed(self, name: str, nbytes: Optional[int] = None):
        """``with lab.timed("postprocess"):`` records the block like a runtime call."""
        return self.recorder.timed(name, nbytes)


# --------------------------------------------------------------------------- helpers
def malloc_trim() -> bool:
    """glibc malloc_trim(0): give the heap's free pages back to the system.

    The harness calls it once, just before the first measured iteration
    (``trim_after_warmup``): warm-up (e.g. the first inference) leaves free
    but resident chunks in the heap, which later mallocs would reuse without
    RSS moving, hiding a leak for thousands of iterations.  After the trim,
    RSS growth in the measured loop is new memory.  False where there is no
    glibc."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


#: glibc's per-thread cache of freed chunks (tcache): a bin per 16-byte chunk size from
#: 32 to 1,040 bytes (requests up to 1,032), holding up to ``glibc.malloc.tcache_count``
#: chunks each (7 unless GLIBC_TUNABLES says otherwise)
_TCACHE_BINS = 64
_TCACHE_COUNT = 7


def _tcache_count() -> int:
    for item in os.environ.get("GLIBC_TUNABLES", "").replace(":", ",").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "glibc.malloc.tcache_count" and value.strip().isdigit():
            return int(value)
    return _TCACHE_COUNT


def fill_tcache() -> bool:
    """Fill the calling thread's glibc tcache: malloc ``tcache_count`` chunks of each of
    its sizes, then free them all.

    mallinfo2 counts the chunks a thread's tcache holds as in use, and a thread's cache
    fills up bin by bin as chunk sizes first come to be freed: slowly, over seconds to
    minutes, by up to 7 x 64 chunks (~240 KiB) a thread.  In a measured loop that shows
    as growth of the heap in use that is neither the loop's nor the recording's (a few
    bytes per iteration, more when the machine is loaded and each iteration takes
    longer).  Filled before the measured iterations, each bin stays about full: a free
    beyond it goes back to the arena.  The harness does it on the variant's thread (with
    the trim after warm-up) and on its streaming thread.  False where there is no glibc."""
    try:
        libc = ctypes.CDLL(None)
        malloc, free = libc.malloc, libc.free
    except (OSError, AttributeError):
        return False
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    count = _tcache_count()
    # a request of 24 + 16 k bytes takes a chunk of 32 + 16 k: bin k
    chunks = [malloc(24 + 16 * k) for k in range(_TCACHE_BINS) for _ in range(count)]
    for chunk in chunks:
        if chunk:
            free(chunk)
    return True


def settle_simulator(lab: VariantContext) -> None:
    """On the simulator only: run the frames once through a throwaway context,
    unrecorded, then take a fresh memory reading.

    The simulator computes output values with onnxruntime: a model's first
    run loads a session (tens of MB of RSS and heap) and each new frame fills
    a small output cache.  That memory is the simulator's, not the runtime's;
    a variant measured step by step (``sample_calls=True``, often without
    warm-up) would show it as its first rknn_run's.  On a board it does
    nothing."""
    if getattr(lab.rt, "backend", "") != "sim":
        return
    rt = lab.rt.inner  # calls on the inner runtime are not recorded
    ctx = rt.init(lab.model_path)
    try:
        for k in range(min(lab.total, len(lab.inputs))):
            rt.inputs_set(ctx, frame_input(lab.input(k)))
            rt.run(ctx)
    finally:
        rt.destroy(ctx)
    if lab.recorder.poll is not None:
        lab.recorder.poll()


def query_io(rt: Any, ctx: int, native: bool = False) -> Tuple[List[rknn_tensor_attr], List[rknn_tensor_attr]]:
    """rknn_query IN_OUT_NUM, then INPUT_ATTR/OUTPUT_ATTR (or the NATIVE_* ones) per tensor."""
    n = rt.query(ctx, RKNN_QUERY_IN_OUT_NUM)
    q_in = RKNN_QUERY_NATIVE_INPUT_ATTR if native else RKNN_QUERY_INPUT_ATTR
    q_out = RKNN_QUERY_NATIVE_OUTPUT_ATTR if native else RKNN_QUERY_OUTPUT_ATTR
    ins = [rt.query(ctx, q_in, rknn_tensor_attr(index=i)) for i in range(n.n_input)]
    outs = [rt.query(ctx, q_out, rknn_tensor_attr(index=i)) for i in range(n.n_output)]
    return ins, outs


def frame_input(frame: np.ndarray) -> List[abi.rknn_input]:
    """rknn_input inputs[1] = {.index=0, .buf=frame, .size=..., .type=UINT8, .fmt=NHWC}."""
    return [buffers.input_from_array(0, frame, fmt=RKNN_TENSOR_NHWC, type=RKNN_TENSOR_UINT8)]


def _outputs(out_attrs: Sequence[rknn_tensor_attr], want_float: int) -> List[rknn_output]:
    return [rknn_output(index=a.index, want_float=want_float, is_prealloc=0) for a in out_attrs]


def _prealloc(out_attrs: Sequence[rknn_tensor_attr], want_float: int
              ) -> Tuple[List[rknn_output], List[np.ndarray]]:
    """Buffers for is_prealloc = 1: want_float = 1: n_elems x 4 bytes (float32);
    want_float = 0: attr.size bytes (the output's own type)."""
    keep, outs = [], []
    for a in out_attrs:
        arr = np.empty(a.n_elems, dtype=np.float32) if want_float else np.empty(a.size, dtype=np.int8)
        keep.append(arr)
        outs.append(rknn_output(index=a.index, want_float=want_float, is_prealloc=1,
                                buf=arr.ctypes.data, size=arr.nbytes))
    return outs, keep


# --------------------------------------------------------------------------- the course's variants
def alloc_per_call(lab: VariantContext) -> None:
    """The runtime allocates the outputs on every call; each get is released.

    C::

        rknn_output outs[1] = {{.want_float = 1, .is_prealloc = 0}};
        for (i = 0; i < n; i++) {
            rknn_inputs_set(ctx, 1, inputs);
            rknn_run(ctx, NULL);
            rknn_outputs_get(ctx, 1, outs, NULL);    /* runtime mallocs outs[0].buf */
            rknn_outputs_release(ctx, 1, outs);      /* ... and frees it */
        }
    """
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = _outputs(out_attrs, want_float=1)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def leak_no_release(lab: VariantContext) -> None:
    """The classic leak: is_prealloc = 0 and rknn_outputs_release never called.
    Memory grows by about one output (n_elems x 4 bytes with want_float) per iteration.

    C::

        for (i = 0; i < n; i++) {
            rknn_inputs_set(ctx, 1, inputs);
            rknn_run(ctx, NULL);
            rknn_outputs_get(ctx, 1, outs, NULL);    /* a new buffer every time */
            /* rknn_outputs_release(ctx, 1, outs);      forgotten */
        }
    """
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = _outputs(out_attrs, want_float=1)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def _prealloc_loop(lab: VariantContext, want_float: int) -> None:
    """Set, run, get into buffers allocated once (is_prealloc = 1), release.

    Every rknn_outputs_get is paired with one rknn_outputs_release, with
    is_prealloc = 1 too (Rockchip's dynamic-shape demo says every get must be
    paired with one release).  With is_prealloc = 1, that release frees
    nothing of yours: a simulator assumption, not a documented fact."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    outs, _keep = _prealloc(out_attrs, want_float=want_float)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def prealloc_output(lab: VariantContext) -> None:
    """The caller owns the output buffers (is_prealloc = 1), allocated once.

    C::

        float *buf = malloc(n_elems * sizeof(float));          /* once */
        rknn_output outs[1] = {{.want_float = 1, .is_prealloc = 1,
                                .buf = buf, .size = n_elems * sizeof(float)}};
        for (i = 0; i < n; i++) {
            rknn_inputs_set(ctx, 1, inputs);
            rknn_run(ctx, NULL);
            rknn_outputs_get(ctx, 1, outs, NULL);    /* writes into buf */
            rknn_outputs_release(ctx, 1, outs);      /* paired, with is_prealloc = 1 too */
        }

    Pair every rknn_outputs_get with one rknn_outputs_release, with
    is_prealloc = 1 too (Rockchip's dynamic-shape demo says every get must be
    paired with one release).  With is_prealloc = 1, that release frees
    nothing of yours: a simulator assumption, not a documented fact.
    """
    _prealloc_loop(lab, want_float=1)


def _native_io(rt: Any, ctx: int) -> Tuple[rknn_tensor_attr, List[rknn_tensor_attr], Any]:
    """The native attrs, with the input's set to the uint8 NHWC frames the variants write
    (the runtime converts), and an input mem of its size_with_stride (not bound yet)."""
    in_attrs, out_attrs = query_io(rt, ctx, native=True)
    in_attr = in_attrs[0]
    in_attr.type = RKNN_TENSOR_UINT8
    in_attr.fmt = RKNN_TENSOR_NHWC
    return in_attr, out_attrs, rt.create_mem(ctx, in_attr.size_with_stride)


def _zero_copy(lab: VariantContext, bind_each_iteration: bool) -> None:
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    in_attr, out_attrs, in_mem = _native_io(rt, ctx)
    out_mems = [rt.create_mem(ctx, a.size_with_stride) for a in out_attrs]

    def bind() -> None:
        rt.set_io_mem(ctx, in_mem, in_attr)
        for mem, a in zip(out_mems, out_attrs):
            rt.set_io_mem(ctx, mem, a)

    if not bind_each_iteration:
        bind()
    in_view = buffers.mem_view(in_mem)
    for i in lab.loop():
        if bind_each_iteration:
            bind()
        frame = lab.input(i).reshape(-1)
        in_view[:frame.size] = frame
        rt.mem_sync(ctx, in_mem, RKNN_MEMORY_SYNC_TO_DEVICE)
        rt.run(ctx)
        for mem in out_mems:
            rt.mem_sync(ctx, mem, RKNN_MEMORY_SYNC_FROM_DEVICE)
    for mem in [in_mem] + out_mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)


def zero_copy_io(lab: VariantContext) -> None:
    """Zero-copy: DMA buffers from rknn_create_mem, bound once with rknn_set_io_mem;
    no inputs_set / outputs_get.  Sized from the NATIVE attrs' size_with_stride.

    C::

        rknn_tensor_mem *in = rknn_create_mem(ctx, in_attr.size_with_stride);
        rknn_tensor_mem *out = rknn_create_mem(ctx, out_attr.size_with_stride);
        rknn_set_io_mem(ctx, in, &in_attr);  rknn_set_io_mem(ctx, out, &out_attr);  /* once */
        for (i = 0; i < n; i++) {
            memcpy(in->virt_addr, frame, size);
            rknn_mem_sync(ctx, in, RKNN_MEMORY_SYNC_TO_DEVICE);
            rknn_run(ctx, NULL);
            rknn_mem_sync(ctx, out, RKNN_MEMORY_SYNC_FROM_DEVICE);
        }
        rknn_destroy_mem(ctx, in);  rknn_destroy_mem(ctx, out);
    """
    _zero_copy(lab, bind_each_iteration=False)


def rebind_each_iter(lab: VariantContext) -> None:
    """Zero-copy, but rknn_set_io_mem inside the loop on every frame (a widely copied
    zero-copy recipe binds the buffers again before every rknn_run).

    C::

        for (i = 0; i < n; i++) {
            rknn_set_io_mem(ctx, in, &in_attr);      /* again, every frame */
            rknn_set_io_mem(ctx, out, &out_attr);
            memcpy(in->virt_addr, frame, size);
            rknn_mem_sync(ctx, in, RKNN_MEMORY_SYNC_TO_DEVICE);
            rknn_run(ctx, NULL);
            rknn_mem_sync(ctx, out, RKNN_MEMORY_SYNC_FROM_DEVICE);
        }
    """
    _zero_copy(lab, bind_each_iteration=True)


def reinit_each_iter(lab: VariantContext) -> None:
    """A whole context per frame: rknn_init ... rknn_destroy inside the loop.

    C::

        for (i = 0; i < n; i++) {
            rknn_init(&ctx, model_path, 0, 0, NULL);   /* weights, internal mem, io: all again */
            rknn_inputs_set(ctx, 1, inputs);
            rknn_run(ctx, NULL);
            rknn_outputs_get(ctx, 1, outs, NULL);
            rknn_outputs_release(ctx, 1, outs);
            rknn_destroy(ctx);
        }
    """
    rt = lab.rt
    for i in lab.loop():
        ctx = rt.init(lab.model_path)
        n = rt.query(ctx, RKNN_QUERY_IN_OUT_NUM)
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [rknn_output(index=k, want_float=1, is_prealloc=0) for k in range(n.n_output)]
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        rt.destroy(ctx)


def mems_never_destroyed(lab: VariantContext) -> None:
    """A leak of DMA memory: zero_copy_io, except that a new output mem is made
    and bound every frame and never destroyed.  The runtime's DMA total grows
    by one output's size_with_stride per frame (until rknn_destroy, which
    frees the mems made with its context on the simulator: A7).  Its fix is
    zero_copy_io: every mem made and bound once.

    C::

        rknn_set_io_mem(ctx, in, &in_attr);                     /* once */
        for (i = 0; i < n; i++) {
            rknn_tensor_mem *out = rknn_create_mem(ctx, out_attr.size_with_stride);  /* every frame */
            rknn_set_io_mem(ctx, out, &out_attr);
            memcpy(in->virt_addr, frame, size);
            rknn_mem_sync(ctx, in, RKNN_MEMORY_SYNC_TO_DEVICE);
            rknn_run(ctx, NULL);
            rknn_mem_sync(ctx, out, RKNN_MEMORY_SYNC_FROM_DEVICE);
            /* rknn_destroy_mem(ctx, out);      forgotten */
        }
        rknn_destroy_mem(ctx, in);
    """
    rt = lab.rt
    settle_simulator(lab)
    ctx = rt.init(lab.model_path)
    in_attr, out_attrs, in_mem = _native_io(rt, ctx)
    rt.set_io_mem(ctx, in_mem, in_attr)
    in_view = buffers.mem_view(in_mem)
    for i in lab.loop():
        out_mems = [rt.create_mem(ctx, a.size_with_stride) for a in out_attrs]
        for mem, a in zip(out_mems, out_attrs):
            rt.set_io_mem(ctx, mem, a)
        frame = lab.input(i).reshape(-1)
        in_view[:frame.size] = frame
        rt.mem_sync(ctx, in_mem, RKNN_MEMORY_SYNC_TO_DEVICE)
        rt.run(ctx)
        for mem in out_mems:
            rt.mem_sync(ctx, mem, RKNN_MEMORY_SYNC_FROM_DEVICE)
    rt.destroy_mem(ctx, in_mem)
    rt.destroy(ctx)


def _keep_loop(lab: VariantContext, keep: Callable[[int, np.ndarray], None]) -> None:
    """The correct loop (buffers allocated once, every get paired with a
    release), then ``keep(i, output)`` inside ``lab.timed("keep_result")``."""
    rt = lab.rt
    settle_simulator(lab)
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    outs, buffers_once = _prealloc(out_attrs, want_float=1)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        with lab.timed("keep_result"):
            keep(i, buffers_once[0])
    rt.destroy(ctx)


def outputs_kept_in_list(lab: VariantContext) -> None:
    """A leak in Python, not in the runtime: every runtime call is right, but
    each frame's float32 output is copied into a list that lives as long as
    the loop.  The heap grows by about one output (n_elems x 4 bytes, plus a
    numpy array's header) per frame.  Its fix: outputs_summarised.

    C::

        float *history[N];
        for (i = 0; i < n; i++) {
            /* inputs_set, run, outputs_get into buf, outputs_release */
            history[i] = malloc(n_elems * sizeof(float));        /* a copy per frame */
            memcpy(history[i], buf, n_elems * sizeof(float));
        }
    """
    history: List[np.ndarray] = []
    _keep_loop(lab, lambda i, output: history.append(output.copy()))


def outputs_summarised(lab: VariantContext) -> None:
    """The fix of outputs_kept_in_list: keep only what you need of each frame,
    the top-5 (index, score) pairs, in two arrays sized once for all the
    frames: 40 bytes a frame and no allocation per frame.

    C::

        int32_t top_index[N][5];  float top_score[N][5];        /* once */
        for (i = 0; i < n; i++) {
            /* inputs_set, run, outputs_get into buf, outputs_release */
            top5(buf, n_elems, top_index[i], top_score[i]);      /* 40 bytes kept */
        }
    """
    top_index = np.zeros((lab.total, 5), dtype=np.int32)
    top_score = np.zeros((lab.total, 5), dtype=np.float32)

    def keep(i: int, output: np.ndarray) -> None:
        best = np.argpartition(output, -5)[-5:]
        top_index[i] = best
        top_score[i] = output[best]

    _keep_loop(lab, keep)


def want_float(lab: VariantContext) -> None:
    """Outputs dequantized to float32 by the runtime on the CPU (want_float = 1):
    4 bytes per element and CPU time per element.

    C::

        rknn_output outs[1] = {{.want_float = 1, .is_prealloc = 1, .buf = fbuf, .size = n * 4}};
        rknn_outputs_get(ctx, 1, outs, NULL);
        rknn_outputs_release(ctx, 1, outs);   /* paired, with is_prealloc = 1 too */
    """
    _prealloc_loop(lab, want_float=1)


def want_int8(lab: VariantContext) -> None:
    """Outputs kept as the model's int8 (want_float = 0): 1 byte per element, no dequantize;
    post-process on int8 with the attr's zp/scale (as the model zoo's YOLO demos do).

    C::

        rknn_output outs[1] = {{.want_float = 0, .is_prealloc = 1, .buf = qbuf,
                                .size = out_attr.size}};   /* the output's own type */
        rknn_outputs_get(ctx, 1, outs, NULL);
        rknn_outputs_release(ctx, 1, outs);   /* paired, with is_prealloc = 1 too */
    """
    _prealloc_loop(lab, want_float=0)


#: the pair chapter 4 compares: run them together
want_float_vs_int8 = (want_float, want_int8)


# --------------------------------------------------------------------------- rknn-toolkit-lite2
def _rknnlite(lab: VariantContext) -> Any:
    """An RKNNLite with the variant's model loaded and its runtime up: Rockchip's class on a
    board, the simulator's model of it elsewhere (rknnlab.lite; its calls go through
    ``lab.rt``, so they are timed like any other runtime call)."""
    from ..lite import RKNNLite
    try:
        lite = RKNNLite()
    except ImportError as exc:  # a board without rknn-toolkit-lite2
        raise VariantUnavailable(str(exc)) from None
    if lite.load_rknn(lab.model_path) != 0:
        raise RuntimeError(f"RKNNLite.load_rknn({lab.model_path!r}) failed")
    if lite.init_runtime() != 0:
        raise RuntimeError("RKNNLite.init_runtime() failed (is this the SoC the model was compiled for?)")
    return lite


def lite_inference(lab: VariantContext) -> None:
    """rknn-toolkit-lite2: ``outputs = rknn_lite.inference(inputs=[frame])`` per frame
    (new numpy outputs each time; Python's refcounting frees the old ones). On the
    simulator no reference cycle is left per call (ASSUMPTIONS A71)."""
    lite = _rknnlite(lab)
    try:
        for i in lab.loop():
            with lab.timed("inference"):
                outputs = lite.inference(inputs=[lab.input(i)])
            if outputs is None:
                raise RuntimeError("RKNNLite.inference returned None (see the E line above)")
            del outputs
    finally:
        lite.release()


def lite_reuse_outputs(lab: VariantContext) -> None:
    """rknn-toolkit-lite2 2.5.0: ``inference(inputs=[frame], reuse_outputs=True)``
    returns views of staging buffers that the next call overwrites (read them first)."""
    lite = _rknnlite(lab)
    try:
        for i in lab.loop():
            with lab.timed("inference"):
                outputs = lite.inference(inputs=[lab.input(i)], reuse_outputs=True)
            if outputs is None:
                raise RuntimeError("RKNNLite.inference returned None (see the E line above)")
            del outputs
    finally:
        lite.release()


def lite_gc_collect(lab: VariantContext) -> None:
    """rknn-toolkit-lite2 with ``gc.collect()`` after every frame (the remedy for the
    reference cycles of airockchip/rknn-toolkit2#42; it costs time)."""
    lite = _rknnlite(lab)
    try:
        for i in lab.loop():
            with lab.timed("inference"):
                outputs = lite.inference(inputs=[lab.input(i)])
            if outputs is None:
                raise RuntimeError("RKNNLite.inference returned None (see the E line above)")
            del outputs
            with lab.timed("gc_collect"):
                gc.collect()
    finally:
        lite.release()


#: name -> variant, the ones ``run("name")`` and the CLI accept
BUILTIN: Dict[str, Callable[[VariantContext], None]] = {f.__name__: f for f in (
    alloc_per_call, leak_no_release, prealloc_output, zero_copy_io, rebind_each_iter,
    reinit_each_iter, mems_never_destroyed, outputs_kept_in_list, outputs_summarised,
    want_float, want_int8, lite_inference, lite_reuse_outputs, lite_gc_collect)}

#: names that stand for several variants
GROUPS: Dict[str, Tuple[Callable[[VariantContext], None], ...]] = {
    "want_float_vs_int8": want_float_vs_int8,
    "lite": (lite_inference, lite_reuse_outputs, lite_gc_collect),
}
