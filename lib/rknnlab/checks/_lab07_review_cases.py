"""What Lab 7's review checks (exercises 1-4) measure, with the truth kept here (import it from
nowhere).

- exercise 1: the sizes, each read by the check from a simulator of the SoC it names (the
  runtime's own queries), and the plausible wrong answers it recognises;
- exercise 2: the check's reference scores of digits_cnn (rknn_inputs_set, rknn_outputs_get
  with want_float = 1, is_prealloc = 0) and a runtime wrapper that notes every RKNN error
  raised inside the student's function, caught or not;
- exercise 3: three loops (a leak, an allocation per call, reuse), their measurement (the heap
  after each frame and inside each rknn_outputs_get) and the verdict that measurement gives;
- exercise 4: a context with a zero-copy input bound once, and the general API's scores for
  the same digits.

Names are neutral and help() says nothing of the answers.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from ..rknn import abi, buffers
from ..rknn.errors import RknnError
from ._core import _soc_of

DIGITS = "digits_cnn"


def sim_runtime(soc: str) -> Any:
    """A simulator of ``soc``, whatever the machine (the sizes are asked of a named SoC)."""
    from ..sim import SimRuntime
    return SimRuntime(soc)


def model_file(name: str, soc: str) -> str:
    from .. import models
    return str(models.model_path(name, soc))


def digits(soc: str) -> Tuple[np.ndarray, np.ndarray]:
    """digits_cnn's test set: images uint8 NHWC (N, 8, 8, 1) and labels (N,)."""
    from .. import models
    path = models.model_path(DIGITS, soc).parent / "testset.npz"
    with np.load(path, allow_pickle=False) as data:
        images, labels = data["images"], data["labels"]
    return np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels.astype(np.int64)


# =========================================================================== exercise 1: sizes
def _attr(rt: Any, ctx: int, cmd: int) -> abi.rknn_tensor_attr:
    return rt.query(ctx, cmd, abi.rknn_tensor_attr(index=0))


def measured_sizes() -> Dict[str, Tuple[int, Dict[str, int]]]:
    """{question: (the size the simulator's queries give, {wrong answer: its mistake code})}.
    The mistake codes name a plausible wrong answer (the check words them, never the size)."""
    out: Dict[str, Tuple[int, Dict[str, int]]] = {}
    found: Dict[str, Dict[str, Any]] = {}
    for soc in ("rk3588", "rk3568"):
        rt = sim_runtime(soc)
        try:
            for model in (DIGITS, "mobilenet_v2", "ppocr_det"):
                ctx = rt.init(model_file(model, soc))
                try:
                    found[f"{model}@{soc}"] = {
                        "nin": _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR),
                        "out": _attr(rt, ctx, abi.RKNN_QUERY_OUTPUT_ATTR),
                        "nout": _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)}
                finally:
                    rt.destroy(ctx)
        finally:
            rt.close()
    for key, soc, other in (("digits_input_rk3588", "rk3588", "rk3568"),
                            ("digits_input_rk3568", "rk3568", "rk3588")):
        a, b = found[f"{DIGITS}@{soc}"]["nin"], found[f"{DIGITS}@{other}"]["nin"]
        wrong = {int(a.n_elems): "n_elems"}
        wrong.setdefault(int(b.size_with_stride), "other_soc")
        wrong.setdefault(int(a.n_elems) * 4, "float")
        dims = list(a.dims[:a.n_dims])
        wrong.setdefault(-(-dims[2] // 64) * 64 * dims[1] * dims[3], "align64")
        wrong.setdefault(dims[1] * 64, "align64")
        out[key] = (int(a.size_with_stride), wrong)
    o = found["mobilenet_v2@rk3588"]["out"]
    out["mobilenet_float_output"] = (int(o.n_elems) * 4, {int(o.n_elems): "int8_for_float",
                                                          int(o.size): "int8_for_float",
                                                          int(o.n_elems) * 2: "float16"})
    for key, soc in (("ppocr_native_output_rk3568", "rk3568"), ("ppocr_native_output_rk3588", "rk3588")):
        n, plain = found[f"ppocr_det@{soc}"]["nout"], found[f"ppocr_det@{soc}"]["out"]
        d = list(n.dims[:n.n_dims])                          # N, C1, H, W, C2
        channels = int(plain.dims[1])                        # the plain output is NCHW
        wrong = {int(plain.n_elems): "plain", int(plain.n_elems) * 4: "plain"}
        for c2 in (8, 16):
            if c2 != d[4]:
                wrong.setdefault(-(-channels // c2) * d[2] * d[3] * c2, "c2_assumed")
                wrong.setdefault(d[1] * d[2] * d[3] * c2, "c2_assumed")
        wrong.setdefault(-(-channels // d[4]) * d[2] * d[3] * d[4], "c1_from_ceil")
        truth = int(n.size_with_stride)
        out[key] = (truth, {k: v for k, v in wrong.items() if k != truth})
    return out


# =========================================================================== exercise 2: failing calls
def reference_scores(rt: Any, path: str, images: Sequence[np.ndarray]) -> List[np.ndarray]:
    """digits_cnn's float32 scores for each image, by the general API on the check's own context."""
    ctx = rt.init(path)
    try:
        out = []
        for image in images:
            rt.inputs_set(ctx, [buffers.input_from_array(0, image, fmt=abi.RKNN_TENSOR_NHWC,
                                                         type=abi.RKNN_TENSOR_UINT8)])
            rt.run(ctx)
            outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
            rt.outputs_get(ctx, outs)
            out.append(np.frombuffer(ctypes.string_at(outs[0].buf, outs[0].size), np.float32).copy())
            rt.outputs_release(ctx, outs)
        return out
    finally:
        rt.destroy(ctx)


class ErrorWatch:
    """A runtime that passes every call through, notes every RknnError one of them raises (the
    student's code may catch it: the note stays), and counts the contexts made on it."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        self.source = getattr(rt, "source", "")
        self.errors: List[RknnError] = []
        self.inits = 0
        self.gets = 0
        self.prealloc_flags: List[int] = []          # is_prealloc of every output asked for
        self.contexts: List[int] = []
        for name in dir(rt):
            if not name.startswith("_") and callable(getattr(rt, name, None)):
                setattr(self, name, self._watched(name, getattr(rt, name)))

    def _watched(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                ret = fn(*args, **kwargs)
            except RknnError as exc:
                self.errors.append(exc)
                raise
            if name == "init":
                self.inits += 1
                self.contexts.append(ret)
            elif name == "outputs_get":
                self.gets += 1
                outputs = args[1] if len(args) > 1 else kwargs.get("outputs", ())
                self.prealloc_flags += [int(o.is_prealloc) for o in outputs]
            elif name == "destroy" and args and args[0] in self.contexts:
                self.contexts.remove(args[0])
            return ret
        call.__name__ = name
        return call

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def cleanup(self) -> None:
        for ctx in list(self.contexts):
            try:
                self._rt.destroy(ctx)
            except Exception:
                pass
        self.contexts.clear()


# =========================================================================== exercise 3: traces
TRACE_MODEL = "mobilenet_v2"
TRACE_FRAMES = 120
KINDS = ("leak", "allocates per call", "reuses")


def _loop_leak(rt: Any, ctx: int, n_elems: int, frame: Callable[[], None], record: Callable[..., None]) -> None:
    kept = [[abi.rknn_output(index=0, want_float=1, is_prealloc=0)] for _ in range(TRACE_FRAMES)]
    for outs in kept:
        frame()
        record(lambda: rt.outputs_get(ctx, outs))            # not released in the loop
    for outs in kept:                                        # measured: now give it back (a board's
        rt.outputs_release(ctx, outs)                        # rknn_destroy may not, A6)


def _loop_per_call(rt: Any, ctx: int, n_elems: int, frame: Callable[[], None], record: Callable[..., None]) -> None:
    for _ in range(TRACE_FRAMES):
        frame()
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
        record(lambda: rt.outputs_get(ctx, outs))
        rt.outputs_release(ctx, outs)


def _loop_reuse(rt: Any, ctx: int, n_elems: int, frame: Callable[[], None], record: Callable[..., None]) -> None:
    buf = np.empty(n_elems, np.float32)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
    for _ in range(TRACE_FRAMES):
        frame()
        record(lambda: rt.outputs_get(ctx, outs))
        rt.outputs_release(ctx, outs)


LOOPS = {"leak": _loop_leak, "allocates per call": _loop_per_call, "reuses": _loop_reuse}


def measure_loop(kind: str, seed: int) -> Dict[str, Any]:
    """Run one loop on a fresh runtime: the heap in use after each frame, the heap's change
    inside each rknn_outputs_get (glibc mallinfo2, this process), the output's bytes."""
    from .. import open_runtime
    from ..probe import Heap
    heap = Heap()
    rt = open_runtime()
    ctx = rt.init(model_file(TRACE_MODEL, _soc_of(rt)))
    # filled in place: a list growing frame by frame would put its own allocations in the heap
    after = np.zeros(TRACE_FRAMES)
    inside = np.zeros(TRACE_FRAMES)
    n = [0]
    try:
        attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        shape = tuple(rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0)).dims[1:4])
        image = np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)
        inputs = [buffers.input_from_array(0, image, fmt=abi.RKNN_TENSOR_NHWC)]

        def frame() -> None:
            rt.inputs_set(ctx, inputs)
            rt.run(ctx)

        def record(get: Callable[[], Any]) -> None:
            before = heap.sample()["heap_in_use_bytes"] or 0
            get()
            now = heap.sample()["heap_in_use_bytes"] or 0
            inside[n[0]] = now - before
            after[n[0]] = now
            n[0] += 1
        LOOPS[kind](rt, ctx, int(attr.n_elems), frame, record)
        return {"after": after.tolist(), "inside": inside.tolist(), "output_bytes": int(attr.n_elems) * 4,
                "source": _label(rt), "available": heap.available}
    finally:
        rt.destroy(ctx)            # frees what the leaking loop never released
        rt.close()


def _label(rt: Any) -> str:
    if getattr(rt, "backend", "") == "sim":
        return f"simulated {str(rt.soc).upper()}"
    return str(getattr(rt, "source", "") or "board")


def judge_loop(m: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """The verdict the measurement gives (a kind of KINDS, or "cannot tell") and its numbers."""
    from ..experiment.growth import HEAP_RESOLUTION, HEAP_STEP, growth
    g = growth(np.arange(len(m["after"])), m["after"], step=HEAP_STEP, resolution=HEAP_RESOLUTION)
    inside = float(np.median(m["inside"])) if m["inside"] else math.nan
    allocates = inside >= m["output_bytes"] / 2
    numbers = {"growth": g, "inside": inside, "output_bytes": m["output_bytes"]}
    half = m["output_bytes"] / 2
    grows = g.verdict == "grows" or (not math.isnan(g.slope) and g.slope - g.half_width > half)
    if allocates and grows:
        return "leak", numbers
    if allocates and g.verdict == "flat":
        return "allocates per call", numbers
    if not allocates and not (not math.isnan(g.slope) and g.slope > half):
        return "reuses", numbers          # no allocation in any get: what reuse means
    return "cannot tell", numbers


# =========================================================================== exercise 4: rows
def zero_copy_context(rt: Any, path: str) -> Tuple[int, Any, abi.rknn_tensor_attr, np.ndarray]:
    """(ctx, input mem, the attr it is bound with, a uint8 view of the mem): the native input
    attr with type UINT8 and fmt NHWC (the runtime converts the pixels), a mem of its
    size_with_stride bytes, bound once."""
    ctx = rt.init(path)
    attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    attr.type = abi.RKNN_TENSOR_UINT8
    attr.fmt = abi.RKNN_TENSOR_NHWC
    mem = rt.create_mem(ctx, attr.size_with_stride)
    rt.set_io_mem(ctx, mem, attr)
    return ctx, mem, attr, buffers.mem_view(mem, np.uint8, shape=int(attr.size_with_stride))


def scores(rt: Any, ctx: int) -> np.ndarray:
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
    rt.outputs_get(ctx, outs)
    try:
        return np.frombuffer(ctypes.string_at(outs[0].buf, outs[0].size), np.float32).copy()
    finally:
        rt.outputs_release(ctx, outs)


def made_up_rgb_input(rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray, abi.rknn_tensor_attr]:
    """(buf, image, attr) for a 3-channel input no course model has: an H×W×3 uint8 image whose
    width is not a multiple of 16, a native-like NHWC UINT8 attr with rows padded to 16 pixels,
    and a buffer of its size_with_stride random bytes.  A digit has one channel, so only a case
    like this shows whether a fill multiplies w_stride by C."""
    h, w, c = int(rng.integers(5, 10)), int(rng.integers(3, 14)), 3
    w_stride = 16
    attr = abi.rknn_tensor_attr(index=0)
    attr.n_dims = 4
    for k, d in enumerate((1, h, w, c)):
        attr.dims[k] = d
    attr.name = b"made_up_rgb"
    attr.n_elems = attr.size = h * w * c
    attr.fmt, attr.type = abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_UINT8
    attr.w_stride, attr.size_with_stride = w_stride, h * w_stride * c
    buf = rng.integers(0, 256, h * w_stride * c, dtype=np.uint8)
    image = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    return buf, image, attr


def pixels_read(buf: np.ndarray, attr: abi.rknn_tensor_attr) -> np.ndarray:
    """The H×W×C pixels the NPU reads from a zero-copy input: byte y·w_stride·C + x·C + c."""
    h, w, c = (int(attr.dims[k]) for k in (1, 2, 3))
    return buf[: h * attr.w_stride * c].reshape(h, attr.w_stride * c)[:, : w * c].reshape(h, w, c)
