"""The video pipeline's loop, stage by stage and timed: NV12 frames in, text boxes out.

One frame goes through five stages, each timed with ``time.perf_counter`` (wall time)
and ``time.thread_time`` (the CPU time of the worker's thread: work, not waiting):

=========  =====================================  =====================================
stage      zero_copy                              general
=========  =====================================  =====================================
convert    NV12 -> RGB888 + letterbox, written    the same, into a numpy array
           straight into the input mem (rows of   allocated once (rows of the model's
           the native attr's w_stride)            width)
input      rknn_mem_sync TO_DEVICE (the mem was   rknn_inputs_set: the runtime copies
           bound once with rknn_set_io_mem)       (and converts) the frame
run        rknn_run                               rknn_run
output     rknn_mem_sync FROM_DEVICE on the       rknn_outputs_get (want_float = 0,
           output mem bound once                  is_prealloc = 1, buffers allocated
                                                  once) + rknn_outputs_release
post       find_boxes on the int8 map, read in    find_boxes on the int8 map in the
           place (a strided view of channel 0     preallocated buffer
           of a native NC1HWC2 output: no copy)
=========  =====================================  =====================================

Rockchip's sources do not settle when rknn_mem_sync is needed. The course's code
syncs: the safe choice (in both directions, see the chapter's cache section).

``planted="letterbox_malloc"`` allocates a fresh letterbox destination every frame,
as Rockchip's model-zoo demos do (PPOCR-Det: a 480x480 RGB888 buffer malloc'ed and
freed per call), and copies it into the input: a real per-frame allocation.

Workers (rknnlab.pipeline.workers) run the same per-frame code in threads, one context
each (rknn_dup_context of the first), each with its own io buffers: "One set of output
buffers per context, and one thread per context at a time."
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import board as _board
from ..probe import Heap
from ..rknn import abi
from ..rknn.buffers import input_from_array, mem_view, output_view
from .postprocess import find_boxes
from .preprocess import letterbox

#: the stages of a frame, in order
STAGES = ("convert", "input", "run", "output", "post")
MODES = ("zero_copy", "general")
#: the stages that run the pipeline's own code (the others are runtime calls)
OWN_STAGES = [STAGES.index("convert"), STAGES.index("post")]
PLANTED = (None, "letterbox_malloc")
#: core mask names a caller may use, besides the RKNN_NPU_CORE_* ints: the header's names
#: without RKNN_NPU_CORE_, a single core keeping its CORE_ ("CORE_0", "0_1_2", "AUTO", "ALL")
MASKS = {(f"CORE_{short}" if short.isdigit() else short): value
         for value, short in ((v, n[len("RKNN_NPU_CORE_"):]) for v, n in abi.CORE_MASK_NAMES.items())}
#: frames the timing functions render once and cycle through (the camera is not timed)
DISTINCT_FRAMES = 8
#: the first of them: the seeded camera's zoom over a page of text (boxes to find)
FIRST_FRAME = 80


def mask_value(mask: Union[int, str]) -> int:
    """An RKNN_NPU_CORE_* value from an int or a name ("CORE_0", "0_1_2", "AUTO",
    "RKNN_NPU_CORE_1")."""
    if isinstance(mask, (int, np.integer)):
        return int(mask)
    name = str(mask).upper()
    name = name[len("RKNN_NPU_"):] if name.startswith("RKNN_NPU_") else name
    if name not in MASKS and name.startswith("CORE_"):
        name = name[len("CORE_"):]
    if name not in MASKS:
        raise ValueError(f"unknown core mask {mask!r}; use one of {', '.join(MASKS)} or an RKNN_NPU_CORE_* value")
    return MASKS[name]


def mask_name(mask: Optional[int]) -> str:
    """"CORE_0", "0_1_2", "AUTO" ... for an RKNN_NPU_CORE_* value; "not set" for None."""
    if mask is None:
        return "not set"
    for name, value in MASKS.items():
        if value == int(mask):
            return name
    return abi.CORE_MASK_NAMES.get(int(mask), hex(int(mask))).replace("RKNN_NPU_", "")


#: NPU cores per SoC, from rknnlab.board's table (and its aliases); a count the facts sheet
#: lacks (rk3562) is taken as one core, as the simulator plays it
NPU_CORES = {soc: cores or 1 for soc, cores in
             {**_board.SOC_NPU_CORES,
              **{alias: _board.SOC_NPU_CORES[soc] for alias, soc in _board.SOC_ALIASES.items()}}.items()}


def default_masks(workers: int, soc: str = "rk3588") -> List[Optional[int]]:
    """Worker i on RKNN_NPU_CORE_i, cycling over the SoC's cores; on a one-core SoC None
    (rknn_set_core_mask is not called: there is nothing to choose)."""
    cores = (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2)[:NPU_CORES.get(str(soc).lower(), 1)]
    if len(cores) == 1:
        return [None] * workers
    return [cores[i % len(cores)] for i in range(workers)]


# --------------------------------------------------------------------------- helpers
def open_runtime(runtime: Optional[Any], soc: Optional[str] = None) -> Any:
    """``runtime``, or the simulator (rknnlab.open_runtime("sim", soc))."""
    if runtime is not None:
        return runtime
    import rknnlab
    return rknnlab.open_runtime("sim", soc)


def model_path(rt: Any, model: str) -> str:
    from ..allocation._common import model_file
    return model_file(rt, model)


def source_of(rt: Any, what: str = "") -> str:
    """"simulated RK3588 — rknnlab sim: <what>" or the board's name: <what>."""
    return f"{rt.source}: {what}" if what else rt.source


@contextlib.contextmanager
def values_mode(rt: Any, values: bool) -> Iterator[str]:
    """Inside: output values computed (``values=True``), or, on the simulator with
    ``values=False``, replayed from the model's last real inference
    (rknnlab.sim.values_replayed), so a timing run measures the modeled NPU and the
    pipeline's CPU stages.  Yields the words for a table's source."""
    if values or getattr(rt, "backend", "") != "sim":
        yield ""
        return
    from .. import sim
    replayed = getattr(sim, "values_replayed", None)
    if replayed is None:   # the simulator of this checkout has no replay: say so, compute them
        yield "output values computed (this simulator has no values_replayed)"
        return
    with replayed():
        yield "output values replayed from the warm-up frame's real inference (rknnlab.sim.values_replayed)"


def int8_channel0(buf: np.ndarray, attr: abi.rknn_tensor_attr, native: bool) -> np.ndarray:
    """Channel 0 of an int8 output as an H x W view of ``buf`` (no copy).

    Native NC1HWC2 (dims [N, C1, H, W, C2]): C2 is read from dims[4], and the row
    length from size_with_stride (boards pad rows of native outputs while w_stride
    stays 0); the view steps over the C2 channels of each pixel.  NHWC and NCHW: the
    plain layouts."""
    dims = [int(d) for d in attr.dims[:attr.n_dims]]
    data = buf.view(np.int8)
    if native and attr.fmt == abi.RKNN_TENSOR_NC1HWC2:
        _, c1, h, w, c2 = dims
        row = w
        total = int(attr.size_with_stride)
        if total and total % (c1 * h * c2) == 0 and total // (c1 * h * c2) >= w:
            row = total // (c1 * h * c2)
        return data[:c1 * h * row * c2].reshape(c1, h, row, c2)[0, :, :w, 0]
    if attr.fmt == abi.RKNN_TENSOR_NHWC:
        h, w, c = dims[-3:]
        return data[:h * w * c].reshape(h, w, c)[:, :, 0]
    c, h, w = dims[-3:]
    return data[:c * h * w].reshape(c, h, w)[0]


# --------------------------------------------------------------------------- one worker
class Worker:
    """One context and its buffers, made once: ``frame(nv12, out)`` runs the five
    stages and writes their (start, end) times into ``out`` (a 5 x 2 float array);
    returns the boxes.

    ``ctx``: a context of ``rt`` (the first worker's from rknn_init, the others from
    rknn_dup_context).  ``heap``: a rknnlab.probe.Heap to read between stages (the
    bytes in use rise inside a frame: what it allocates), or None."""

    def __init__(self, rt: Any, ctx: int, mode: str = "zero_copy", planted: Optional[str] = None,
                 core_mask: Optional[int] = None, heap: Optional[Heap] = None,
                 box_args: Optional[Dict[str, Any]] = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: choose 'zero_copy' or 'general'")
        if planted not in PLANTED:
            raise ValueError(f"planted={planted!r}: None or 'letterbox_malloc'")
        self.rt, self.ctx, self.mode, self.planted = rt, ctx, mode, planted
        self.heap = heap
        self.box_args = dict(box_args or {})
        self.core_mask = core_mask
        if core_mask is not None:
            rt.set_core_mask(ctx, core_mask)
        self.mems: List[Any] = []
        self.run_us = 0
        n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
        if n.n_input != 1:
            raise ValueError(f"the pipeline feeds one image input; this model has {n.n_input} inputs")
        native_in = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        if mode == "zero_copy":
            self.in_attr = native_in
            self.out_attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        else:
            self.in_attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
            self.out_attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        dims = [int(d) for d in native_in.dims[:native_in.n_dims]]
        if native_in.fmt == abi.RKNN_TENSOR_NCHW:
            dims = [dims[0], dims[2], dims[3], dims[1]]
        self.height, self.width, channels = dims[1], dims[2], dims[3]
        if channels != 3:
            raise ValueError(f"the pipeline feeds RGB888 (3 channels); this model's input has {channels}")
        self.zp, self.scale = int(self.out_attr.zp), float(self.out_attr.scale)
        try:
            self._make_buffers()
        except BaseException:
            self.close()
            raise

    def _make_buffers(self) -> None:
        rt, ctx = self.rt, self.ctx
        if self.mode == "zero_copy":
            a = self.in_attr
            a.type, a.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC   # the RGB888 bytes we write
            # bound-buffer size rule: size_with_stride of the attr it is bound with
            self.w_stride = int(a.w_stride) or self.width
            self.in_mem = rt.create_mem(ctx, int(a.size_with_stride))
            self.mems.append(self.in_mem)
            rt.set_io_mem(ctx, self.in_mem, a)
            self.out_mem = rt.create_mem(ctx, int(self.out_attr.size_with_stride))
            self.mems.append(self.out_mem)
            rt.set_io_mem(ctx, self.out_mem, self.out_attr)
            self.dst = mem_view(self.in_mem, np.uint8, int(a.size_with_stride))
            self.out_buf = mem_view(self.out_mem, np.uint8, int(self.out_attr.size_with_stride))
            self.out_map = int8_channel0(self.out_buf, self.out_attr, native=True)
        else:
            self.w_stride = self.width
            self.rgb = np.zeros((self.height, self.width, 3), np.uint8)   # once
            self.dst = self.rgb.reshape(-1)
            self.inputs = [input_from_array(0, self.rgb, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)]
            # output size rule, want_float = 0: attr.size bytes (the output's own type)
            self.out_buf = np.zeros(int(self.out_attr.size), np.int8)
            self.outputs = [abi.rknn_output(index=0, want_float=0, is_prealloc=1,
                                            buf=self.out_buf.ctypes.data, size=self.out_buf.nbytes)]
            self.out_map = int8_channel0(self.out_buf, self.out_attr, native=False)

    @property
    def input_bytes(self) -> int:
        return int(self.dst.nbytes)

    def frame(self, nv12: Any, out: np.ndarray, heap_rise: Optional[np.ndarray] = None,
              heap_peak: Optional[np.ndarray] = None, cpu: Optional[np.ndarray] = None) -> list:
        """Run one frame; stage times into ``out[k] = (t0, t1)``; ``cpu[k]``: the
        thread's CPU seconds in stage k (time.thread_time), and ``self.run_us`` the
        runtime's own account of the run (RKNN_QUERY_PERF_RUN, read after the run
        stage, outside its timing).  When measuring:
        the malloc heap in use after each stage minus before the frame into
        ``heap_rise[k]`` (what outlives the stage), and, while tracemalloc traces, the
        peak of Python's traced memory during stage k above its start into
        ``heap_peak[k]`` (temporaries made and freed inside the stage count too)."""
        rt, ctx, clock = self.rt, self.ctx, time.perf_counter
        heap = self.heap
        base = heap.sample()["heap_in_use_bytes"] if heap is not None else None
        peaks = heap_peak is not None and tracemalloc.is_tracing()
        start = [0]
        cpu0 = [0.0]

        def begin() -> None:
            if peaks:
                tracemalloc.reset_peak()
                start[0] = tracemalloc.get_traced_memory()[0]
            cpu0[0] = time.thread_time()

        def mark(k: int) -> None:
            if cpu is not None:
                cpu[k] = time.thread_time() - cpu0[0]
            if peaks:
                heap_peak[k] = tracemalloc.get_traced_memory()[1] - start[0]
            if heap is not None and heap_rise is not None and base is not None:
                heap_rise[k] = heap.sample()["heap_in_use_bytes"] - base

        begin()
        t = clock()
        if self.planted == "letterbox_malloc":   # a fresh destination every frame, as the zoo's demos do
            dst = np.empty(self.height * self.w_stride * 3, np.uint8)
        else:
            dst = self.dst
        lb = letterbox(nv12, dst, self.width, self.height, w_stride=self.w_stride)
        out[0] = t, clock()
        mark(0)
        begin()
        t = clock()
        if self.mode == "zero_copy":
            if dst is not self.dst:              # the demos' buffer, copied into the bound mem
                self.dst[:dst.size] = dst
            rt.mem_sync(ctx, self.in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
        elif dst is not self.dst:                # the demos' buffer, handed to inputs_set
            rt.inputs_set(ctx, [input_from_array(0, dst.reshape(self.height, self.width, 3),
                                                 fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)])
        else:
            rt.inputs_set(ctx, self.inputs)
        out[1] = t, clock()
        mark(1)
        begin()
        t = clock()
        rt.run(ctx)
        out[2] = t, clock()
        mark(2)
        self.run_us = int(rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration)
        begin()
        t = clock()
        if self.mode == "zero_copy":
            rt.mem_sync(ctx, self.out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
        else:
            rt.outputs_get(ctx, self.outputs)
            rt.outputs_release(ctx, self.outputs)   # paired, with is_prealloc = 1 too
        out[3] = t, clock()
        mark(3)
        begin()
        t = clock()
        boxes = find_boxes(self.out_map, self.zp, self.scale, letterbox=lb, **self.box_args)
        out[4] = t, clock()
        mark(4)
        return boxes

    def close(self) -> None:
        for mem in self.mems:
            self.rt.destroy_mem(self.ctx, mem)
        self.mems = []


# --------------------------------------------------------------------------- a run
@dataclass
class PipelineRun:
    """What a pipeline run measured.

    ``times``: frames x stages x 2 array of perf_counter seconds (start, end of each
    of STAGES), frame k in row k; ``available``: when frame k was available (taken
    from the source, or due at ``source_fps``); ``worker``: which worker ran it;
    ``boxes``: each frame's boxes (when kept) and ``n_boxes`` their count;
    ``heap_rise``: frames x stages, the malloc heap in use after each stage minus
    before the frame (mallinfo2: what outlives a stage); ``heap_peak``: frames x
    stages, the peak of Python's traced memory during each stage above its start
    (tracemalloc: numpy's and Python's temporaries, freed inside the stage too); both
    NaN when not measured.  Neither sees the C runtime's own mallocs inside a call
    (chapter 4 measures those); on the simulator, the runtime is Python, so the
    input, run and output stages' peaks are the simulator's.  ``cpu_s``: frames x
    stages, the CPU seconds the worker's thread spent in each stage
    (time.thread_time: work, without the waits for a CPU, the lock or the NPU; in the
    run stage, the simulator's own Python on this PC, near 0 on a board); ``npu_us``:
    per frame, the run's duration by RKNN_QUERY_PERF_RUN (the runtime's own account:
    on the simulator the modeled NPU time).  ``masks``: each worker's core mask;
    ``dma_bytes``: the first context's total_dma_allocated_size after the warm-up."""
    mode: str
    workers: int
    masks: List[Optional[int]]
    times: np.ndarray
    available: np.ndarray
    worker: np.ndarray
    n_boxes: np.ndarray
    boxes: Optional[List[list]]
    heap_rise: np.ndarray
    heap_peak: np.ndarray
    cpu_s: np.ndarray
    npu_us: np.ndarray
    wall_s: float
    source: str
    model: str
    conditions: str = ""
    planted: Optional[str] = None
    input_bytes: int = 0
    dma_bytes: int = 0
    rss_change_bytes: float = math.nan
    frame_size: Tuple[int, int] = (0, 0)
    host_cpus: int = field(default_factory=lambda: os.cpu_count() or 0)
    #: where it ran, in a figure's words ("simulated RK3588 — rknnlab sim" or the board)
    platform: str = ""

    @property
    def n_frames(self) -> int:
        return len(self.times)

    @property
    def fps(self) -> float:
        """Frames over the wall time from the first frame's availability to the last boxes."""
        return self.n_frames / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def latencies_ms(self) -> np.ndarray:
        """Per frame: boxes ready minus frame available (ms)."""
        return (self.times[:, -1, 1] - self.available) * 1e3

    @property
    def latency(self) -> Dict[str, float]:
        lat = self.latencies_ms
        return {"median_ms": float(np.median(lat)), "p95_ms": float(np.percentile(lat, 95))}

    def stage_ms(self) -> np.ndarray:
        """frames x stages: the duration of each stage (ms)."""
        return (self.times[:, :, 1] - self.times[:, :, 0]) * 1e3

    def table(self):
        """One row per frame: frame, worker, core mask, ms per stage, total_ms (the five
        stages), latency_ms, boxes; attrs["source"]."""
        import pandas as pd
        ms = self.stage_ms()
        df = pd.DataFrame({"frame": np.arange(self.n_frames), "worker": self.worker,
                           "core_mask": [mask_name(self.masks[w]) for w in self.worker]})
        for k, s in enumerate(STAGES):
            df[f"{s}_ms"] = ms[:, k]
        df["total_ms"] = ms.sum(axis=1)
        df["latency_ms"] = self.latencies_ms
        df["boxes"] = self.n_boxes
        df.attrs["source"] = self.source
        df.attrs["host_cpus"] = self.host_cpus
        return df

    def gantt(self):
        """One row per frame and stage: frame, worker, stage, start_ms, end_ms (since the
        first frame was available): what rknnlab.plot.pipeline_gantt draws."""
        import pandas as pd
        t0 = float(self.available.min())
        rows = [{"frame": i, "worker": int(self.worker[i]), "stage": s,
                 "start_ms": (self.times[i, k, 0] - t0) * 1e3, "end_ms": (self.times[i, k, 1] - t0) * 1e3}
                for i in range(self.n_frames) for k, s in enumerate(STAGES)]
        df = pd.DataFrame(rows)
        df.attrs["source"] = self.source
        return df

    def summary(self) -> str:
        ms = np.median(self.stage_ms(), axis=0)
        lat = self.latency
        stages = ", ".join(f"{s} {m:.2f}" for s, m in zip(STAGES, ms))
        masks = "/".join(mask_name(m) for m in self.masks)
        return (f"{self.mode}, {self.workers} worker{'s' if self.workers != 1 else ''} ({masks}), "
                f"{self.n_frames} frames: {self.fps:.1f} frames/s, latency median {lat['median_ms']:.1f} ms, "
                f"p95 {lat['p95_ms']:.1f} ms; median ms per stage: {stages}; "
                f"{np.mean(self.n_boxes):.1f} boxes per frame\nsource: {self.source}")

    def __repr__(self) -> str:
        return f"<PipelineRun {self.summary()}>"


def _frame_source(frames: Any, n_frames: Optional[int]) -> Tuple[Any, int]:
    """(a function i -> frame, the number of frames): a Camera renders frame i; a
    sequence is cycled through; any other iterable is read in order."""
    if hasattr(frames, "frame") and callable(frames.frame):          # a Camera
        if n_frames is None:
            raise ValueError("n_frames: how many frames to take from the camera")
        return frames.frame, int(n_frames)
    if isinstance(frames, Sequence):
        if not len(frames):
            raise ValueError("no frames given")
        n = len(frames) if n_frames is None else int(n_frames)
        return (lambda i: frames[i % len(frames)]), n
    iterator = iter(frames)
    if n_frames is None:
        frames = list(iterator)
        return (lambda i: frames[i]), len(frames)
    return (lambda i: next(iterator)), int(n_frames)


def distinct_frames(n: int = DISTINCT_FRAMES, width: int = 1280, height: int = 720, seed: int = 0) -> list:
    """``n`` frames of the seeded camera, spread evenly over its sequence (its shots:
    pans, zooms, cuts), each its own copy (the camera's pool reuses its buffers): what
    the timing functions cycle through, so rendering is not timed."""
    from .frames import Camera, Nv12Frame
    cam = Camera(width=width, height=height, seed=seed)
    out = []
    for i in range(n):   # from frame 80 (a zoom over a page of text): the warm-up frame has text
        f = cam.frame((FIRST_FRAME + i * len(cam) // n) % len(cam))
        out.append(Nv12Frame(f.data.copy(), f.width, f.height, f.stride, f.height_stride, f.index))
    return out


def _dma_total(rt: Any, ctx: int) -> int:
    return int(rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size)


def _rss_bytes() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return math.nan


def run(frames: Any, mode: str = "zero_copy", workers: int = 1,
        core_masks: Optional[Sequence[Union[int, str]]] = None, n_frames: Optional[int] = None,
        runtime: Optional[Any] = None, model: str = "ppocr_det", planted: Optional[str] = None,
        values: bool = True, soc: Optional[str] = None, warmup: int = 1, keep_boxes: bool = True,
        measure_heap: Union[bool, str] = False, source_fps: Optional[float] = None,
        box_args: Optional[Dict[str, Any]] = None) -> PipelineRun:
    """Run ``n_frames`` frames through the pipeline and time every stage.

    ``frames``: a rknnlab.pipeline.Camera (frame i rendered on demand by the worker
    that takes it: in the wall time, as a decoder's work would be, but in no stage), a
    list of Nv12Frames (cycled through; nothing rendered while timing) or an iterable
    of them.  ``mode``:
    "zero_copy" or "general" (see the module docstring).  ``workers``: threads, one
    context each (the first from rknn_init, the others from rknn_dup_context of it),
    each with its own io buffers; they take the frames in order from one queue, so
    with 2 workers the CPU stages of frame N+1 overlap the NPU run of frame N (double
    buffering).  ``core_masks``: one per worker (ints or "CORE_0", "0_1_2",
    "AUTO"; None: no rknn_set_core_mask for that worker); default: worker i on RKNN_NPU_CORE_i (on a one-core SoC no mask is set).  ``values=False`` on the
    simulator: after the warm-up (real values, on the first frame), every run
    replays the warm-up's output values (rknnlab.sim.values_replayed), for timing:
    the boxes are then the first frame's.
    ``planted="letterbox_malloc"``: a fresh letterbox buffer every frame.
    ``warmup``: frames run first per worker, untimed (first-call costs).
    ``measure_heap``: True or "rise" reads mallinfo2 after every stage (heap_rise);
    "peak" traces Python's allocations with tracemalloc (heap_peak: each stage's
    peak; tracing slows Python's allocations inside the timed stages, and its own
    bookkeeping, a few KiB per frame, lands in the malloc heap, so measure the rise
    without it); "both" does both at once.  Tracing resets tracemalloc's peak at
    every stage (a caller already tracing loses its own peak).  One worker only:
    the heap is the process's; on the simulator with values=False, since computing
    output values allocates inside rknn_run, which is the simulator's memory, not the
    pipeline's.  ``source_fps``: frames arrive at this rate (a camera); None:
    a frame is available as soon as a worker is free (throughput).
    ``runtime`` (default: the simulator of ``soc``, rk3588).  ``box_args``: passed to
    find_boxes."""
    if workers < 1:
        raise ValueError(f"workers={workers}: at least 1")
    if measure_heap not in (False, True, "rise", "peak", "both"):
        raise ValueError(f"measure_heap={measure_heap!r}: False, True (= 'rise'), 'rise', 'peak' or 'both'")
    rises, peaks = measure_heap in (True, "rise", "both"), measure_heap in ("peak", "both")
    if measure_heap and workers != 1:
        raise ValueError("measure_heap needs workers=1: mallinfo2 counts the whole process's heap")
    rt = open_runtime(runtime, soc)
    masks = ([None if m is None else mask_value(m) for m in core_masks] if core_masks is not None
             else default_masks(workers, getattr(rt, "soc", "rk3588")))
    if len(masks) != workers:
        raise ValueError(f"{len(masks)} core masks for {workers} workers: give one per worker")
    path = model_path(rt, model)
    get_frame, n = _frame_source(frames, n_frames)
    if n < 1:
        raise ValueError("n_frames: at least 1")
    times = np.zeros((n, len(STAGES), 2))
    available = np.zeros(n)
    worker_of = np.zeros(n, np.int64)
    n_boxes = np.zeros(n, np.int64)
    heap_rise = np.full((n, len(STAGES)), np.nan)
    heap_peak = np.full((n, len(STAGES)), np.nan)
    cpu_s = np.zeros((n, len(STAGES)))
    npu_us = np.zeros(n)
    kept: Optional[List[list]] = [[] for _ in range(n)] if keep_boxes else None
    heap = Heap() if rises else None
    ctxs: List[int] = []
    pool: List[Worker] = []
    with contextlib.ExitStack() as replay:
        if peaks and not tracemalloc.is_tracing():
            tracemalloc.start()
            replay.callback(tracemalloc.stop)
        try:
            ctxs.append(rt.init(path))
            for _ in range(workers - 1):
                ctxs.append(rt.dup_context(ctxs[0]))
            for ctx, mask in zip(ctxs, masks):
                pool.append(Worker(rt, ctx, mode, planted, core_mask=mask, heap=heap, box_args=box_args))
            first = get_frame(0)
            lock = threading.Lock()
            state: Dict[str, Any] = {"next": 0, "t0": 0.0}
            errors: List[BaseException] = []

            def start() -> None:
                """Once every worker has warmed up (in its own thread: per-thread scratch
                and first calls are paid there), before the first timed frame."""
                state["words"] = replay.enter_context(values_mode(rt, values))
                state["dma"] = _dma_total(rt, ctxs[0])   # dup'd contexts share weights: the first's total
                state["rss0"] = _rss_bytes()
                state["t0"] = time.perf_counter()

            ready = threading.Barrier(workers, action=start)

            def take() -> Tuple[int, Any, float]:
                with lock:
                    i = state["next"]
                    if i >= n or errors:
                        return -1, None, 0.0
                    state["next"] = i + 1
                    frame = get_frame(i)
                    now = time.perf_counter()
                if source_fps:
                    due = state["t0"] + i / source_fps
                    if due > now:
                        time.sleep(due - now)
                    return i, frame, due     # late frames waited since they were due
                return i, frame, now

            def work(k: int) -> None:
                w = pool[k]
                try:
                    scratch = np.zeros((len(STAGES), 2))
                    for _ in range(warmup):      # real output values: a replay repeats the last
                        w.frame(first, scratch)
                    ready.wait()
                    while True:
                        i, frame, avail = take()
                        if i < 0:
                            return
                        available[i] = avail
                        worker_of[i] = k
                        boxes = w.frame(frame, times[i], heap_rise[i] if rises else None,
                                        heap_peak[i] if peaks else None, cpu_s[i])
                        npu_us[i] = w.run_us
                        n_boxes[i] = len(boxes)
                        if kept is not None:
                            kept[i] = boxes
                except BaseException as exc:   # reported by the caller's thread below
                    errors.append(exc)
                    ready.abort()              # the others stop waiting for this one

            if workers == 1:
                work(0)
            else:
                threads = [threading.Thread(target=work, args=(k,), name=f"pipeline-worker-{k}")
                           for k in range(workers)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
            if errors:   # the first real error, not the others' broken barrier
                raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
            rss1 = _rss_bytes()
            wall = float(times[:, -1, 1].max() - min(available.min(), state["t0"]))
            values_words, dma, rss0 = state["words"], state["dma"], state["rss0"]
        finally:
            for w in pool:
                w.close()
            for ctx in reversed(ctxs):
                rt.destroy(ctx)
    conditions = ((f"; {values_words}" if values_words else "")
                  + f"; wall time measured on this host ({os.cpu_count()} CPUs)")
    what = (f"{model}, {mode}, {workers} worker{'s' if workers != 1 else ''}, {n} frames"
            + (f", planted {planted}" if planted else "") + conditions)
    nv12 = first
    return PipelineRun(mode=mode, workers=workers, masks=masks, times=times, available=available,
                       worker=worker_of, n_boxes=n_boxes, boxes=kept, heap_rise=heap_rise, heap_peak=heap_peak,
                       cpu_s=cpu_s, npu_us=npu_us, wall_s=wall,
                       source=source_of(rt, what), conditions=conditions, model=model, planted=planted,
                       input_bytes=pool[0].input_bytes if pool else 0, dma_bytes=dma,
                       rss_change_bytes=rss1 - rss0, platform=str(rt.source),
                       frame_size=(int(getattr(nv12, "width", 0)), int(getattr(nv12, "height", 0))))


# --------------------------------------------------------------------------- general vs zero-copy
#: frames of the second, instrumented pass of compare_modes (mallinfo2 and tracemalloc)
HEAP_FRAMES = 20


def verdict_words(c: Any, what: str = "the time per frame") -> str:
    """One phrase for a rknnlab.experiment.timing Comparison: "0.87x the time per
    frame (95% interval 0.84-0.90): faster" (or slower), or "...: cannot tell yet
    (<the reason>)" when the run cannot tell which is faster."""
    if math.isnan(c.ratio):
        head = f"no ratio of {what}"
    else:
        head = f"{c.ratio:.2f}x {what}" + (f" ({c.interval()})" if c.interval() else "")
    if c.verdict in ("faster", "slower"):
        return f"{head}: {c.verdict}"
    return f"{head}: cannot tell yet ({c.reason or 'within the noise'}; more frames may tell)"


def compare_modes(n_frames: int = 100, frames: Any = None, runtime: Optional[Any] = None,
                  model: str = "ppocr_det", values: bool = False, soc: Optional[str] = None,
                  planted: Optional[str] = None, heap_frames: int = HEAP_FRAMES):
    """The same frames through the general API and through zero-copy, one worker on
    RKNN_NPU_CORE_0, one after the other.

    Three passes per mode: ``n_frames`` timed frames with no instrument, then
    ``heap_frames`` frames reading mallinfo2, then ``heap_frames`` traced by
    tracemalloc (which slows Python's allocations inside the stages, and whose own
    bookkeeping would show in mallinfo2).

    Rows: "general", "zero_copy".  Columns: <stage>_ms (median ms per stage),
    frame_ms (the median of each frame's total of the five stages: what the verdict
    compares; the stage medians need not add up to it), latency_ms, fps;
    heap_per_frame_bytes (median over frames of the malloc heap's largest rise,
    read after every stage: what outlives a stage), heap_max_rise_bytes (the
    largest); peak_<stage>_bytes (median of the stage's tracemalloc peak: Python's
    and numpy's temporaries, freed inside the stage too; on the simulator the input,
    run and output stages' are the simulator's own, a board's runtime allocates in C,
    unseen), peak_own_bytes (median over frames of the larger of the convert and post
    peaks: the pipeline's own code, not the runtime's);
    dma_bytes (the context's total_dma_allocated_size, io mems included),
    rss_change_bytes (RSS after the timed frames minus before), input_bytes (the
    buffer the frame is converted into), boxes (per frame, mean; only with
    values=True).  attrs: source, verdict (one phrase: faster or slower with the
    ratio's 95% interval, or "cannot tell yet" with the reason), comparison (the
    rknnlab.experiment.timing Comparison), host_cpus.

    ``values=False`` (default) replays output values on the simulator: the NPU is
    modeled either way, and computing the twin's values on this PC is not the NPU's
    time.  Needs at least 100 frames for a verdict (the timing comparison's rule)."""
    import pandas as pd
    from ..experiment.timing import compare
    rt = open_runtime(runtime, soc)
    src = frames if frames is not None else distinct_frames()
    rows, totals, runs = [], {}, {}
    for mode in ("general", "zero_copy"):
        common = dict(mode=mode, runtime=rt, model=model, values=values, planted=planted, keep_boxes=False,
                      core_masks=default_masks(1, getattr(rt, "soc", "rk3588")))   # CORE_0; none on one core
        r = run(src, n_frames=n_frames, **common)
        h = run(src, n_frames=heap_frames, measure_heap="rise", **common)
        p = run(src, n_frames=heap_frames, measure_heap="peak", **common)   # its bookkeeping is malloc's
        runs[mode] = r
        ms = r.stage_ms()
        totals[mode] = ms.sum(axis=1)
        rise = np.nanmax(h.heap_rise, axis=1)
        row: Dict[str, Any] = {"mode": mode}
        for k, s in enumerate(STAGES):
            row[f"{s}_ms"] = float(np.median(ms[:, k]))
        row.update(frame_ms=float(np.median(totals[mode])), latency_ms=r.latency["median_ms"], fps=r.fps,
                   heap_per_frame_bytes=float(np.median(rise)), heap_max_rise_bytes=float(np.max(rise)))
        for k, s in enumerate(STAGES):
            row[f"peak_{s}_bytes"] = float(np.median(p.heap_peak[:, k]))
        row.update(peak_own_bytes=float(np.median(np.nanmax(p.heap_peak[:, OWN_STAGES], axis=1))),
                   dma_bytes=r.dma_bytes, rss_change_bytes=r.rss_change_bytes, input_bytes=r.input_bytes)
        if values:      # replayed values repeat the first frame's boxes: not a count per frame
            row["boxes"] = float(np.mean(r.n_boxes))
        rows.append(row)
    table = pd.DataFrame(rows).set_index("mode")
    c = compare("zero_copy", totals["zero_copy"], "general", totals["general"])
    mask = runs["zero_copy"].masks[0]
    on = f"on {mask_name(mask)}" if mask is not None else "with no core mask (one NPU core)"
    what = (f"{model}, general vs zero_copy, 1 worker {on}, {n_frames} timed frames each"
            f" (heap: {heap_frames} more)"
            + (f", planted {planted}" if planted else "")
            + runs["zero_copy"].conditions)
    table.attrs.update(source=source_of(rt, what),
                       verdict=f"zero_copy vs general: {verdict_words(c)}", comparison=c,
                       host_cpus=os.cpu_count())
    return table


# --------------------------------------------------------------------------- the general API's input copy
def inputs_set_copies(runtime: Optional[Any] = None, models: Sequence[str] = ("mobilenet_v2", "ppocr_det"),
                      calls: int = 20, soc: Optional[str] = None, seed: int = 1):
    """Does rknn_inputs_set copy the frame?  Per model: the time of one call (median
    of ``calls``), and two runs that answer it from outputs.

    For each model a random uint8 NHWC frame of its input size is set, run, and its
    output read (want_float = 0, the runtime's buffers, each get released).  Then the
    same frame is set again and the array is changed (inverted) AFTER the call,
    before rknn_run: if the output is the first one, the run read the bytes as they
    were at the call: inputs_set copied them.  A control sets the inverted frame
    itself: its output must differ, or the first test would prove nothing.

    One row per model: model, input_bytes, inputs_set_us (median),
    change_after_call_seen (False: inputs_set copied the frame), control_changed
    (True: the output depends on the input at all).  attrs["source"]."""
    import pandas as pd
    from .. import models as course_models
    rt = open_runtime(runtime, soc)
    board = {"rk3566": "rk3568"}.get(str(getattr(rt, "soc", "rk3588")), str(getattr(rt, "soc", "rk3588")))
    rows = []
    for name in models:
        ctx = rt.init(str(course_models.model_path(name, board)))
        try:
            attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
            dims = [int(d) for d in attr.dims[:attr.n_dims]]
            if attr.fmt == abi.RKNN_TENSOR_NCHW:
                dims = [dims[0], dims[2], dims[3], dims[1]]
            frame = np.random.default_rng(seed).integers(0, 256, dims, dtype=np.uint8)
            took = []
            for _ in range(calls):
                inputs = [input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)]
                start = time.perf_counter()
                rt.inputs_set(ctx, inputs)
                took.append(time.perf_counter() - start)

            def output(array: np.ndarray, change_after: bool) -> bytes:
                rt.inputs_set(ctx, [input_from_array(0, array, fmt=abi.RKNN_TENSOR_NHWC,
                                                     type=abi.RKNN_TENSOR_UINT8)])
                if change_after:
                    array[:] = 255 - array
                rt.run(ctx)
                outs = [abi.rknn_output(index=0, want_float=0, is_prealloc=0)]
                rt.outputs_get(ctx, outs)
                try:
                    return output_view(outs[0], np.uint8).tobytes()
                finally:
                    rt.outputs_release(ctx, outs)

            first = output(frame.copy(), change_after=False)
            after = output(frame.copy(), change_after=True)
            control = output(255 - frame, change_after=False)
            rows.append({"model": name, "input_bytes": int(frame.nbytes),
                         "inputs_set_us": float(np.median(took)) * 1e6,
                         "change_after_call_seen": after != first, "control_changed": control != first})
        finally:
            rt.destroy(ctx)
    table = pd.DataFrame(rows)
    table.attrs["source"] = source_of(rt, f"rknn_inputs_set, median of {calls} calls per model; a random "
                                          "uint8 NHWC frame, changed after the call")
    return table


# --------------------------------------------------------------------------- the tables as text
#: readable headers, with their unit, for the columns of this package's tables
HEADERS = {
    "convert_ms": "convert (ms)", "input_ms": "input (ms)", "run_ms": "run (ms)", "output_ms": "output (ms)",
    "post_ms": "post (ms)", "total_ms": "total (ms)", "frame_ms": "frame (ms)", "latency_ms": "latency (ms)", "cpu_ms": "CPU work (ms)", "npu_ms": "NPU run (ms)", "run_cpu_ms": "CPU in run (ms)",
    "latency_median_ms": "latency median (ms)", "latency_p95_ms": "latency p95 (ms)", "fps": "frames/s",
    "bound_fps": "bound (frames/s)", "speedup": "speedup (x)", "heap_per_frame_bytes": "heap rise/frame (B)",
    "heap_max_rise_bytes": "largest heap rise (B)", "peak_own_bytes": "traced peak, own (B)",
    "dma_bytes": "DMA total (MiB)", "rss_change_bytes": "RSS change (B)", "input_bytes": "input (B)",
    "inputs_set_us": "inputs_set (µs)", "change_after_call_seen": "change after call seen",
    "control_changed": "control changed", "slope_bytes_per_frame": "slope (B/frame)", "pm_bytes": "± (B/frame)",
}
#: columns shown in MiB (the others in their header's unit)
_MIB = ("dma_bytes",)


def header(column: str) -> str:
    """A column's header with its unit: "convert (ms)", "peak of post (B)", "frames/s"."""
    if column in HEADERS:
        return HEADERS[column]
    if column.startswith("peak_") and column.endswith("_bytes"):
        return f"peak of {column[5:-6]} (B)"
    if column.startswith("after_") and column.endswith("_bytes"):
        return f"after {column[6:-6]} (B)"
    for suffix, unit in (("_ms", "ms"), ("_us", "µs"), ("_bytes", "B")):
        if column.endswith(suffix):
            return f"{column[:-len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def _formatter(column: str, values: Any):
    """One format for the whole column: ms with 2 decimals, us whole, bytes as whole numbers with
    thousands separators (MiB with 2 decimals for the DMA total), rates whole, ratios
    with 2 decimals, yes/no for booleans, "-" for nothing (NaN, None)."""
    def nothing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    if column in _MIB:
        return lambda v: "-" if nothing(v) else f"{v / 2 ** 20:,.2f}"
    if column.endswith("_bytes") or column.endswith("_bytes_per_frame"):
        small = all(nothing(v) or abs(v) >= 10 for v in values)
        return lambda v: "-" if nothing(v) else (f"{v:,.0f}" if small else f"{v:,.1f}")
    if column.endswith("_ms"):
        return lambda v: "-" if nothing(v) else f"{v:,.2f}"
    if column.endswith("_us"):
        return lambda v: "-" if nothing(v) else f"{v:,.0f}"
    if column.endswith("fps"):
        return lambda v: "-" if nothing(v) else f"{v:,.0f}"
    if column == "speedup":
        return lambda v: "-" if nothing(v) else f"{v:.2f}"
    if all(isinstance(v, (bool, np.bool_)) for v in values):
        return lambda v: "yes" if v else "no"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return lambda v: f"{v:,}"
    if all(isinstance(v, (float, np.floating)) for v in values):
        return lambda v: "-" if nothing(v) else f"{v:,.3g}"
    return lambda v: "-" if nothing(v) else str(v)


def show_table(table: Any, columns: Optional[Sequence[str]] = None, width: int = 100) -> str:
    """One of this package's tables (compare_modes, scaling, inputs_set_copies,
    SteadyState.table() or .rises(), PipelineRun.table()) as aligned text: a header
    with its unit over each column, plain numbers in one format per column (numbers
    right-aligned, text left-aligned), "-" where there is nothing, and the table's
    source under it (wrapped at ``width`` columns)."""
    import textwrap
    shown = table.reset_index() if table.index.name else table
    cols = list(columns) if columns is not None else [c for c in shown.columns if not str(c).startswith("_")]
    missing = [c for c in cols if c not in shown.columns]
    if missing:
        raise KeyError(f"no column {', '.join(missing)} in this table; it has {', '.join(map(str, shown.columns))}")
    cells, numeric = [], []
    for c in cols:
        values = list(shown[c])
        fmt = _formatter(str(c), values)
        cells.append([header(str(c))] + [fmt(v) for v in values])
        numeric.append(all(isinstance(v, (int, float, np.integer, np.floating)) or v is None for v in values))
    widths = [max(len(x) for x in col) for col in cells]
    lines = []
    for r in range(len(shown) + 1):
        parts = [(col[r].rjust(w) if num else col[r].ljust(w)) for col, w, num in zip(cells, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
    source = str(getattr(table, "attrs", {}).get("source", "not recorded"))
    lines.append(textwrap.fill(f"source: {source}", width, break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)
