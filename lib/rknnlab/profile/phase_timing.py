"""Where a frame's time goes: the phases of one inference, timed frame by frame.

One frame through the general API is five steps, each timed on its own:
rknn_inputs_set (a CPU copy with the conversion to the NPU's layout and
type), rknn_run (the NPU), rknn_outputs_get (a CPU copy, with
dequantization to float32 when want_float = 1), the application's
post-process (numpy, written here: a top-5 softmax for a classifier, the
YOLOv5 head decode for a detector) and rknn_outputs_release.

On the simulator the CPU steps are real work on this machine's CPU and only
rknn_run's time is modeled (from the compiler report), so the split says
how this machine's CPU compares with a modeled RK3588 NPU; on a board every
number is the board's.  Two published RK3588 splits (users' measurements,
airockchip/rknn_model_zoo#167 and airockchip/librga#69; want_float not
stated) are in :func:`published_phases` to set beside it.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .. import models
from ..rknn import abi, buffers
from ._common import progress_bar, run_source

PHASES = ("inputs_set", "run", "outputs_get", "postprocess", "outputs_release")
#: the row that sums the phases of each frame
TOTAL = "total"
#: distinct seeded frames, cycled (the simulator caches the output values of its last 4
#: inputs, so a frame seen before costs its modeled time and not an onnxruntime run)
N_FRAMES = 4
#: YOLOv5's default anchors (w, h in input pixels) per head, strides 8, 16, 32
YOLO_ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))
#: a candidate box is kept when objectness x best class score reaches this (YOLOv5's demo value)
BOX_THRESHOLD = 0.25


# --------------------------------------------------------------------------- post-processing
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def top5(logits: np.ndarray, k: int = 5) -> Tuple[np.ndarray, np.ndarray]:
    """A classifier's post-process: softmax over the classes, then the k most likely
    (indices, probabilities), most likely first."""
    flat = np.asarray(logits, np.float32).ravel()
    k = min(k, flat.size)
    e = np.exp(flat - flat.max())
    p = e / e.sum()
    idx = np.argpartition(-p, k - 1)[:k]
    idx = idx[np.argsort(-p[idx])]
    return idx, p[idx]


def yolov5_decode(heads: Sequence[np.ndarray], input_hw: Tuple[int, int],
                  threshold: float = BOX_THRESHOLD) -> np.ndarray:
    """A YOLOv5 detector's post-process over its three heads (each [1, 3*(5+classes), H, W]),
    as Rockchip's demo orders it: the objectness of every anchor first (sigmoid,
    threshold), then, for the anchors that pass only, the class scores and the box.
    Returns rows (x_center, y_center, w, h, score, class) in input pixels; no NMS (it
    works on the few survivors and costs little next to this)."""
    found = []
    for head, anchors in zip(heads, YOLO_ANCHORS):
        _, c, h, w = head.shape
        t = head.reshape(3, c // 3, h, w)
        a, y, x = np.nonzero(_sigmoid(t[:, 4]) >= threshold)
        if not len(a):
            continue
        cand = t[a, :, y, x]                               # (candidates, 5 + classes)
        cls = _sigmoid(cand[:, 5:])
        score = _sigmoid(cand[:, 4]) * cls.max(axis=1)
        keep = score >= threshold
        cand, cls, score, a, y, x = cand[keep], cls[keep], score[keep], a[keep], y[keep], x[keep]
        stride = input_hw[0] / h
        xy = _sigmoid(cand[:, 0:2])
        wh = _sigmoid(cand[:, 2:4])
        anchor = np.asarray(anchors, np.float32).reshape(3, 2)[a]
        cx = (xy[:, 0] * 2 - 0.5 + x) * stride
        cy = (xy[:, 1] * 2 - 0.5 + y) * stride
        bw, bh = ((wh * 2) ** 2 * anchor).T
        found.append(np.stack([cx, cy, bw, bh, score, cls.argmax(axis=1)], 1))
    return np.concatenate(found) if found else np.zeros((0, 6), np.float32)


def _is_yolov5(shapes: List[Tuple[int, ...]]) -> bool:
    return len(shapes) == 3 and all(len(s) == 4 and s[1] % 3 == 0 and s[1] // 3 > 5 for s in shapes)


def postprocess_for(out_attrs: Sequence[abi.rknn_tensor_attr], input_hw: Tuple[int, int]
                    ) -> Tuple[str, Callable[[List[np.ndarray]], int]]:
    """The post-process a model's outputs call for, as (its name, a function of the float32
    outputs returning how many results it kept): the YOLOv5 decode for three detection
    heads, else a top-5 softmax of the first output."""
    shapes = [buffers.attr_dims(a) for a in out_attrs]
    if _is_yolov5(shapes):
        return "yolov5_decode", lambda outs: len(yolov5_decode(outs, input_hw))
    return "top5", lambda outs: len(top5(outs[0])[0])


# --------------------------------------------------------------------------- one frame
def _input_hwc(attr: abi.rknn_tensor_attr) -> Tuple[int, int, int]:
    """(height, width, channels) of a model's input, whatever layout its attr states."""
    d = buffers.attr_dims(attr)
    return (d[1], d[2], d[3]) if attr.fmt == abi.RKNN_TENSOR_NHWC else (d[2], d[3], d[1])


def _frames(hwc: Tuple[int, int, int], seed: int) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (1,) + tuple(hwc), dtype=np.uint8) for _ in range(N_FRAMES)]


def frame_inputs(rt: Any, ctx: int, seed: int = 0) -> List[abi.rknn_input]:
    """The rknn_input list for one seeded uint8 NHWC frame of ``ctx``'s input size
    (inputs[0]: .buf = the frame, .type = UINT8, .fmt = NHWC): what a camera would hand over."""
    from ..experiment.variants import query_io
    in_attrs, _ = query_io(rt, ctx)
    frame = _frames(_input_hwc(in_attrs[0]), seed)[0]
    return [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)]


def _own_type_as_float(out: abi.rknn_output, attr: abi.rknn_tensor_attr) -> np.ndarray:
    """A want_float = 0 output (the attr's own type) as float32: (q - zp) x scale when
    it is affine-quantized, a plain conversion otherwise."""
    q = buffers.output_view(out, abi.TYPE_TO_NUMPY[attr.type], buffers.attr_dims(attr))
    if attr.qnt_type == abi.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC:
        return (q.astype(np.float32) - np.float32(attr.zp)) * np.float32(attr.scale)
    return q.astype(np.float32)


def _one_frame(rt: Any, ctx: int, frame: np.ndarray, out_attrs: Sequence[abi.rknn_tensor_attr],
               want_float: int, post) -> Tuple[List[float], int]:
    """The five phases of one frame, seconds each, and how many results the post-process
    kept (boxes, or classes of the top 5)."""
    inputs = [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)]
    outs = [abi.rknn_output(index=a.index, want_float=want_float, is_prealloc=0) for a in out_attrs]
    t0 = time.perf_counter()
    rt.inputs_set(ctx, inputs)
    t1 = time.perf_counter()
    rt.run(ctx)
    t2 = time.perf_counter()
    rt.outputs_get(ctx, outs)
    t3 = time.perf_counter()
    if want_float:
        arrays = [buffers.output_view(o, np.float32, buffers.attr_dims(a)) for o, a in zip(outs, out_attrs)]
    else:  # the output's own type; quantized values are dequantized first, as part of the post-process
        arrays = [_own_type_as_float(o, a) for o, a in zip(outs, out_attrs)]
    kept = post(arrays)
    t4 = time.perf_counter()
    rt.outputs_release(ctx, outs)
    t5 = time.perf_counter()
    return [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4], kept


def _open(backend: Any, soc: Optional[str]) -> Tuple[Any, bool]:
    """(runtime, whether we opened it and must close it)."""
    if backend is None or isinstance(backend, str):
        from .. import open_runtime
        return open_runtime(backend or "auto", soc), True
    return backend, False


def phases(model: Union[str, Sequence[str]], frames: int = 20, want_float: bool = True,
           backend: Union[None, str, Any] = None, soc: Optional[str] = None, seed: int = 0,
           progress: Optional[bool] = None) -> Any:
    """Time each phase of ``frames`` frames of ``model`` (a course model's name, or a
    list of them), one context per model, seeded uint8 NHWC frames (4 distinct ones,
    cycled, after one untimed pass over them).

    ``want_float``: outputs_get's want_float (True: float32, the runtime
    dequantizes; False: int8, and the post-process dequantizes in numpy).
    ``backend``: None or "auto" (the board when there is one, else the
    simulator), "sim", "native", or a Runtime you opened (left open).
    ``soc``: the SoC the simulator plays (default rk3588).  ``progress``: a
    bar as rknnlab.run shows (None: only where a person watches).

    Returns one row per model and phase, plus a "total" row per model:
    model, input ("640x640"), want_float, phase, median_ms, q1_ms, q3_ms
    (the middle half of the frames: the spread), share (the phase's median
    over the sum of the model's phase medians), frames, ms (every frame's
    time, in order).  ``attrs["source"]`` says what was measured and what
    modeled; ``attrs["postprocess"]`` says per model how many boxes (or
    classes) the post-process kept: the course's detectors have
    seeded-random weights, so on noise frames about half of their anchors
    pass the threshold, where a trained model on a real image keeps tens,
    and the decode costs accordingly more.  Typical time on the simulator, 20 frames: mobilenet_v2 ~0.15 s,
    yolov5s 640 ~0.7 s."""
    import pandas as pd
    names = [model] if isinstance(model, str) else list(model)
    if not names:
        raise ValueError("phases: give at least one model name")
    if frames < 1:
        raise ValueError(f"frames must be at least 1, not {frames}")
    rt, owned = _open(backend, soc)
    tables, post = [], {}
    try:
        total = len(names) * (N_FRAMES + frames)
        with progress_bar(progress, total, "profile.phases") as at:
            for k, name in enumerate(names):
                done = k * (N_FRAMES + frames)
                hw, times, post[name] = _time_model(rt, name, frames, int(want_float), seed,
                                                    lambda i, done=done: at(done + i))
                tables.append(_summary(name, f"{hw[1]}x{hw[0]}", bool(want_float), times * 1e3))
        source = run_source(rt)
    finally:
        if owned:
            rt.close()
    table = pd.concat(tables, ignore_index=True)
    table.attrs.update(source=source, postprocess=post)
    return table


def _time_model(rt: Any, model: str, frames: int, want_float: int, seed: int, at
                ) -> Tuple[Tuple[int, int], np.ndarray, str]:
    """(input height and width, seconds per frame and phase, what the post-process did)
    of one model."""
    from ..experiment.variants import query_io
    ctx = rt.init(str(models.model_path(model, rt.soc)))
    try:
        in_attrs, out_attrs = query_io(rt, ctx)
        hwc = _input_hwc(in_attrs[0])
        hw = hwc[:2]
        post_name, post = postprocess_for(out_attrs, hw)
        pool = _frames(hwc, seed)
        for i, frame in enumerate(pool):  # untimed: first-run costs, the simulator's cache
            _one_frame(rt, ctx, frame, out_attrs, want_float, post)
            at(i + 1)
        times = np.empty((frames, len(PHASES)))
        kept = []
        for i in range(frames):
            times[i], n = _one_frame(rt, ctx, pool[i % len(pool)], out_attrs, want_float, post)
            kept.append(n)
            at(len(pool) + i + 1)
    finally:
        rt.destroy(ctx)
    return hw, times, f"{post_name}: median {int(np.median(kept))} results kept per frame"


def _summary(model: str, input_size: str, want_float: bool, ms: np.ndarray) -> Any:
    import pandas as pd
    per_frame = np.column_stack([ms, ms.sum(axis=1)])
    medians = np.median(ms, axis=0)
    rows = []
    for j, phase in enumerate(list(PHASES) + [TOTAL]):
        col = per_frame[:, j]
        q1, med, q3 = np.percentile(col, [25, 50, 75])
        rows.append({"model": model, "input": input_size, "want_float": want_float, "phase": phase,
                     "median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3),
                     "share": float(med / medians.sum()) if phase != TOTAL else 1.0,
                     "frames": len(col), "ms": tuple(float(v) for v in col)})
    return pd.DataFrame(rows)


#: what no published split states: whether its outputs_get converted to float32
WANT_FLOAT_NOT_STATED = "want_float not stated"
#: a published split's model or input size when its source does not name it
NOT_NAMED = "not named"
#: the pre-processing steps on the RGA (Rockchip's 2D engine) a published split timed before inputs_set
RGA_STEPS = ("cvtcolor (RGA)", "letterbox (RGA)")


class _Split(NamedTuple):
    model: str
    input: str
    source: str
    ms: Dict[str, float]


#: two public RK3588 splits (ms per step, as their sources print them; each a user's measurement)
_PUBLISHED: Tuple[_Split, ...] = (
    # rknn_model_zoo#167 ("rknn_inputs_set耗时问题": filed because inputs_set was slow), logs headed
    # "mobilenet_v2" and "yolov5s_relu": averages 1.802/2.652/0.029 and 14.845/17.486/1.226 ms
    _Split("mobilenet_v2", "224x224", "RK3588 board, rknn_model_zoo#167 (a user's measurement)",
           {"inputs_set": 1.80, "run": 2.65, "outputs_get": 0.03}),
    _Split("yolov5s_relu", "640x640", "RK3588 board, rknn_model_zoo#167 (a user's measurement)",
           {"inputs_set": 14.85, "run": 17.49, "outputs_get": 1.23}),
    # librga#69, its case (1): cached (virtual-address) buffers; RK3588 named in the thread; the
    # model and its input size are not named (the input is letterboxed, as for a YOLO detector)
    _Split(NOT_NAMED, NOT_NAMED, "RK3588 board, airockchip/librga#69 (a user's measurement, model not named)",
           {"cvtcolor (RGA)": 1.2, "letterbox (RGA)": 2.3, "inputs_set": 0.75, "run": 20.0,
            "outputs_get": 1.3}),
)
PUBLISHED_SOURCE = ("published, not measured here: RK3588 boards, rknn_model_zoo#167 and "
                    "airockchip/librga#69 (users' measurements; want_float not stated)")


def published_phases() -> Any:
    """Two published RK3588 phase splits in the layout of :func:`phases`: one row per
    step the source timed (median_ms = the published figure; no spread, no frames;
    want_float None), plus the columns ``source`` (where that split comes from) and
    ``note`` ("want_float not stated": neither source says whether outputs_get
    converted to float32).

    - rknn_model_zoo#167: mobilenet_v2 224x224 and yolov5s_relu (YOLOv5s with ReLU)
      640x640; filed because rknn_inputs_set was slow, so not a typical split.
    - airockchip/librga#69: a letterboxed input, model and size not named (model
      and input "not named"), with its two RGA pre-processing steps
      ("cvtcolor (RGA)", "letterbox (RGA)") before inputs_set.

    They differ 20x in inputs_set (14.85 vs 0.75 ms): measure, do not expect a
    share.  Neither times a post-process."""
    import pandas as pd
    rows = [{"model": split.model, "input": split.input, "want_float": None, "phase": phase,
             "median_ms": v, "q1_ms": np.nan, "q3_ms": np.nan, "share": v / sum(split.ms.values()),
             "frames": 0, "ms": (), "source": split.source, "note": WANT_FLOAT_NOT_STATED}
            for split in _PUBLISHED for phase, v in split.ms.items()]
    table = pd.DataFrame(rows)
    table.attrs["source"] = PUBLISHED_SOURCE
    return table
