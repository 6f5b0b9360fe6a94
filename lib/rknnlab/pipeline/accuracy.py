"""Does the int8 NPU path still find the text? Boxes compared with the fp32 model's.

:func:`reference_boxes` runs the fp32 ONNX twin (data/models/<model>/model.onnx) with
onnxruntime on the same letterboxed input the NPU gets. It normalises the input with
the mean and std the compiler baked into the .rknn (read from the compiler report's
build section), then applies the same post-processing in float. :func:`box_agreement`
matches the NPU's boxes one to one against those reference boxes by overlap (IoU) and
counts how many agree.

So the comparison isolates what INT8 quantisation changes: the input bytes, the
letterbox and the post-processing are the same on both sides.

Which quantisation that is depends on where the int8 map came from. On a board it is
the whole INT8 network. On the course's simulator the NPU's output is computed by this
same fp32 twin, so agreement there only measures the quantisation of the input and the
output. :func:`toolkit_agreement` uses maps that rknn-toolkit2's own INT8 simulation
computed (recorded when the model was built): evidence about the INT8 network itself.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .frames import Nv12Frame
from .postprocess import Box, find_boxes, find_boxes_float
from .preprocess import Letterbox, letterbox as _letterbox

if TYPE_CHECKING:
    import pandas


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes: 1 for the same box, 0 when they do not overlap."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / (a.area + b.area - inter)


@dataclass(frozen=True)
class Agreement:
    """How well a set of boxes agrees with a reference set.

    ``matched`` boxes found a partner among the ``n_ref`` reference boxes (one partner
    each, IoU at least ``iou``); ``n`` is the number of boxes judged. ``precision`` =
    matched / n (1.0 when there are no boxes: none is wrong), ``recall`` = matched / n_ref
    (1.0 when the reference has none), ``f1`` = 2 matched / (n + n_ref) (1.0 when both
    are empty). ``pairs`` lists the matches as (box index, reference index, IoU).
    """
    matched: int
    n: int
    n_ref: int
    precision: float
    recall: float
    f1: float
    iou: float = 0.5
    pairs: Tuple[Tuple[int, int, float], ...] = field(default=(), repr=False)

    def __str__(self) -> str:
        if self.n == 0 and self.n_ref == 0:
            return "no boxes and no reference boxes: full agreement (F1 1.00)"
        return (f"{self.matched} of {self.n} boxes match one of the {self.n_ref} reference "
                f"boxes at IoU >= {self.iou:g}: precision {self.precision:.2f}, "
                f"recall {self.recall:.2f}, F1 {self.f1:.2f}")


def box_agreement(boxes: Sequence[Box], reference: Sequence[Box], iou: float = 0.5) -> Agreement:
    """Match ``boxes`` to ``reference`` one to one, greedily by IoU, and count.

    The pair with the highest IoU is matched first, then the best pair among the boxes
    left, and so on while the IoU is at least ``iou``. Greedy matching is what detection
    benchmarks use; with well-separated text lines it equals the best possible matching.
    """
    if not 0 < iou <= 1:
        raise ValueError(f"iou must be in (0, 1], got {iou}")
    n, n_ref = len(boxes), len(reference)
    pairs: List[Tuple[int, int, float]] = []
    if n and n_ref:
        overlap = _iou_matrix(boxes, reference)
        order = np.argsort(-overlap, axis=None, kind="stable")
        used_box, used_ref = set(), set()
        for flat in order:
            value = float(overlap.flat[flat])
            if value < iou:
                break
            i, j = divmod(int(flat), n_ref)
            if i in used_box or j in used_ref:
                continue
            used_box.add(i)
            used_ref.add(j)
            pairs.append((i, j, value))
    m = len(pairs)
    precision = m / n if n else 1.0
    recall = m / n_ref if n_ref else 1.0
    f1 = 2 * m / (n + n_ref) if n + n_ref else 1.0
    return Agreement(m, n, n_ref, precision, recall, f1, iou, tuple(pairs))


def _iou_matrix(boxes: Sequence[Box], reference: Sequence[Box]) -> np.ndarray:
    a = np.array([(b.x0, b.y0, b.x1, b.y1) for b in boxes], np.float64)
    r = np.array([(b.x0, b.y0, b.x1, b.y1) for b in reference], np.float64)
    w = np.minimum(a[:, None, 2], r[None, :, 2]) - np.maximum(a[:, None, 0], r[None, :, 0])
    h = np.minimum(a[:, None, 3], r[None, :, 3]) - np.maximum(a[:, None, 1], r[None, :, 1])
    inter = np.clip(w, 0, None) * np.clip(h, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_r = (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])
    union = area_a[:, None] + area_r[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


# ---------------------------------------------------------------- the fp32 twin

_sessions: Dict[str, Any] = {}
_sessions_lock = threading.Lock()
#: onnxruntime threads: the course's hosts have as few as 2 cores
ONNX_THREADS = 2


def _session(path: str):  # -> onnxruntime.InferenceSession
    with _sessions_lock:
        if path not in _sessions:
            try:
                import onnxruntime
            except ImportError as exc:
                raise ImportError("reference_boxes runs the fp32 twin with onnxruntime, which "
                                  "is not installed: pip install onnxruntime") from exc
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = ONNX_THREADS
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            _sessions[path] = onnxruntime.InferenceSession(path, options,
                                                           providers=["CPUExecutionProvider"])
        return _sessions[path]


def _model_setup(model: str, soc: str) -> Tuple[str, np.ndarray, np.ndarray, int, int]:
    """The twin's path, the mean and std baked into the .rknn, and the input's size."""
    from .. import models
    report = models.load_report(model, soc)
    path = report.onnx_path
    if path is None or not path.exists():
        raise FileNotFoundError(f"{model} has no fp32 twin (model.onnx) to compare with")
    build = report.data.get("build", {})
    mean = np.asarray(build.get("mean_values", [0, 0, 0]), np.float32)
    std = np.asarray(build.get("std_values", [1, 1, 1]), np.float32)
    dims = report.attrs("inputs")[0]["dims"]  # NHWC: [1, H, W, 3]
    return str(path), mean, std, int(dims[1]), int(dims[2])


def fp32_probabilities(rgb: np.ndarray, model: str = "ppocr_det", soc: str = "rk3588") -> np.ndarray:
    """The fp32 twin's H x W probability map for an H x W x 3 uint8 model input.

    The input is normalised as the compiled model does it, ``(x - mean) / std`` per
    channel with the compiler report's mean_values and std_values, and laid out NCHW.
    """
    path, mean, std, _, _ = _model_setup(model, soc)
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an H x W x 3 uint8 model input, got {rgb.dtype} {rgb.shape}")
    x = ((rgb.astype(np.float32) - mean) / std).transpose(2, 0, 1)[None]
    session = _session(path)
    out = session.run(None, {session.get_inputs()[0].name: np.ascontiguousarray(x)})[0]
    return np.asarray(out, np.float32).reshape(rgb.shape[:2])


def reference_boxes(image: Union[Nv12Frame, np.ndarray], letterbox: Optional[Letterbox] = None,
                    model: str = "ppocr_det", soc: str = "rk3588", thresh: float = 0.3,
                    box_thresh: float = 0.5, unclip_ratio: float = 1.6) -> List[Box]:
    """Boxes from the fp32 twin (onnxruntime) on the input the NPU gets.

    ``image`` is an :class:`Nv12Frame` (letterboxed here exactly as :func:`letterbox`
    does for the NPU; boxes come in frame coordinates) or an already letterboxed
    H x W x 3 uint8 model input (boxes in model coordinates, or in frame coordinates
    when you pass its ``letterbox``). The thresholds are :func:`find_boxes`'s.
    """
    if isinstance(image, Nv12Frame):
        _, _, _, height, width = _model_setup(model, soc)
        rgb = np.empty((height, width, 3), np.uint8)
        letterbox = _letterbox(image, rgb, width, height)
    else:
        rgb = image
    prob = fp32_probabilities(rgb, model, soc)
    return find_boxes_float(prob, letterbox, thresh, box_thresh, unclip_ratio)


def toolkit_agreement(model: str = "ppocr_det", iou: float = 0.5,
                      **box_args: Any) -> "pandas.DataFrame":
    """Box agreement of rknn-toolkit2's own INT8 simulation with the fp32 twin.

    data/models/<model>/toolkit_int8.npz holds letterboxed inputs and the int8 output
    maps rknn-toolkit2 computed for them (RKNN.inference on its x86 simulator, recorded
    when the model was built). Each map's boxes (:func:`find_boxes`) are compared with the
    fp32 twin's on the same input (:func:`reference_boxes`). One row per stored input.
    """
    import pandas as pd

    from .. import models
    path = models.models_dir() / model / "toolkit_int8.npz"
    if not path.exists():
        raise FileNotFoundError(f"no recorded toolkit simulation for {model} ({path})")
    with np.load(path, allow_pickle=False) as data:
        inputs, maps = data["inputs"], data["int8"]
        zp, scale = int(data["zp"]), float(data["scale"])
        names = [str(n) for n in data["names"]]
    info = models.model_info(model).get("toolkit_int8", {})
    rows = []
    for name, rgb, out in zip(names, inputs, maps):
        boxes = find_boxes(out, zp, scale, **box_args)
        reference = reference_boxes(rgb, model=model, **box_args)
        a = box_agreement(boxes, reference, iou)
        # with nothing to match, a ratio is undefined: NaN, printed "-" (Agreement itself says 1.0)
        rows.append({"view": name, "boxes": a.n, "reference": a.n_ref, "matched": a.matched,
                     "precision": a.precision if a.n else float("nan"),
                     "recall": a.recall if a.n_ref else float("nan"),
                     "f1": a.f1 if a.n or a.n_ref else float("nan")})
    table = pd.DataFrame(rows).set_index("view")
    try:
        toolkit = models.toolkit_version(model)
    except Exception:  # an old report without the field: the source line says less
        toolkit = ""
    table.attrs["source"] = (f"rknn-toolkit2 {toolkit} INT8 simulation (x86), recorded"
                             if toolkit else "rknn-toolkit2 INT8 simulation (x86), recorded")
    table.attrs["how"] = info.get("how", "")
    return table
