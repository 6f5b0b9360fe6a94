"""Text boxes from the detector's int8 probability map, without dequantising the map.

PP-OCR's detector (a DB network: "Differentiable Binarization") outputs one probability
per input pixel that the pixel belongs to text. The NPU delivers that map as int8 values
q with a zero point zp and a scale: the probability is ``(q - zp) * scale``. The usual
post-processing dequantises all 230,400 values of a 480 x 480 map to float (921,600 B
when rknn_outputs_get is asked for want_float = 1) and then thresholds them. Because
dequantisation is monotonic, the threshold can move into the int8 domain instead:
``p >= thresh`` exactly when ``q >= int8_threshold(thresh, zp, scale)``. One number is
converted, not the map.

:func:`find_boxes` then follows DB's post-processing in a simplified form:
connected components of the mask (8-connectivity; own numpy code: run-length labelling
and union-find), a score per component (its mean probability), and a box grown by DB's
"unclip" distance. PaddleOCR grows the component's minimum-area rotated rectangle as a
polygon; this module uses the axis-aligned rectangle, which is what the chapter draws.
examples/c/video_pipeline.c follows the same steps with the same defaults (a test checks
that both find the same boxes).

No map-sized allocation per call: the map-sized arrays (mask, run edges, widened values)
are scratch kept per thread and map shape, written in place by numpy's ``out=``. What a
call still allocates is sized by the runs of text it finds (about 140 B per run: a
page's map has a few hundred runs, about 26 KB), not by the map.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np

if TYPE_CHECKING:
    from .preprocess import Letterbox


@dataclass(frozen=True)
class Box:
    """An axis-aligned text box: left ``x0``, top ``y0``, right ``x1``, bottom ``y1``
    (pixel edges, so the width is ``x1 - x0``) and the component's mean probability."""
    x0: float
    y0: float
    x1: float
    y1: float
    score: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def area(self) -> float:
        return max(0.0, self.width) * max(0.0, self.height)

    def __str__(self) -> str:
        return (f"Box({self.x0:.0f}, {self.y0:.0f}) - ({self.x1:.0f}, {self.y1:.0f}) "
                f"score {self.score:.2f}")


def dequantize(q: int, zp: int, scale: float) -> float:
    """The value one int8 stands for: ``(q - zp) * scale`` (in Python floats)."""
    return (q - zp) * scale


def int8_threshold(prob: float, zp: int, scale: float) -> int:
    """The smallest int8 q with ``(q - zp) * scale >= prob``, clamped to -128..127.

    So ``q >= int8_threshold(prob, zp, scale)`` selects exactly the values whose
    dequantised probability is at least ``prob``. Two edges:

    - every int8 reaches ``prob`` (even -128): the answer is -128, and every value passes;
    - no int8 reaches it (even 127 falls short): the answer is clamped to 127, which does
      NOT reach ``prob``. Check ``dequantize(127, zp, scale) >= prob`` before trusting
      the mask; :func:`find_boxes` does and then returns no boxes.

    The arithmetic is Python's float (double), the same as :func:`dequantize`; the first
    guess ``zp + ceil(prob / scale)`` is corrected by one step if rounding misled it.
    """
    # Python numbers: a zp read as numpy int8 would overflow in the steps below
    zp, scale, prob = int(zp), float(scale), float(prob)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    q = zp + math.ceil(prob / scale)
    q = min(max(q, -129), 128)  # a step outside the range is enough to decide the edges
    while q > -128 and dequantize(q - 1, zp, scale) >= prob:
        q -= 1
    while q <= 127 and dequantize(q, zp, scale) < prob:
        q += 1
    return int(min(max(q, -128), 127))


# Scratch arrays per thread and map geometry: the workers of a pipeline call find_boxes
# at the same time, each on its own map.  One set per route (int8, float), replaced when
# the map's shape changes, so a frame allocates only arrays sized by the runs it finds.
_scratch = threading.local()


def _scratch_for(shape: Tuple[int, int], route: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(padded mask, run edges, values) for an H x W map: a bool H x (W + 2) array whose
    first and last columns stay False (they close every run), a bool H x (W + 1) array,
    and H x W sums' dtype (int32 for int8 maps, float64 for float maps)."""
    sets = getattr(_scratch, "sets", None)
    if sets is None:
        sets = _scratch.sets = {}
    arrays = sets.get(route)
    if arrays is None or arrays[2].shape != shape:
        h, w = shape
        arrays = (np.zeros((h, w + 2), np.bool_), np.empty((h, w + 1), np.bool_),
                  np.empty((h, w), np.int32 if route == "int8" else np.float64))
        sets[route] = arrays
    return arrays


def _runs(padded: np.ndarray, edges: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of True along each row of the mask ``padded[:, 1:-1]``: (row, start, end) with
    end exclusive, in row-major order.  ``edges`` is scratch of shape H x (W + 1)."""
    w = edges.shape[1] - 1
    # True where a pixel differs from its left neighbour: a run's start, or one past its
    # end.  In a row they alternate start, end, start, end (the False columns close runs)
    np.not_equal(padded[:, 1:], padded[:, :-1], out=edges)
    at = np.flatnonzero(edges)
    rows = at[0::2] // (w + 1)
    row_start = rows * (w + 1)
    return rows, at[0::2] - row_start, at[1::2] - row_start


def _label_runs(rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, width: int) -> np.ndarray:
    """A component label per run (8-connectivity): runs on adjacent rows whose column
    ranges touch or meet diagonally are joined, by union-find done with array steps."""
    n = rows.size
    parent = np.arange(n)
    if n < 2:
        return parent
    pitch = width + 2
    # key of a run: its row and column in one number, sorted as the runs are
    start_key = rows * pitch + starts
    end_key = rows * pitch + ends
    # for each run, the runs of the next row that touch it (8-connected): start <= end and
    # end >= start (end exclusive), a contiguous range because runs in a row are sorted
    first = np.searchsorted(end_key, (rows + 1) * pitch + starts, side="left")
    last = np.searchsorted(start_key, (rows + 1) * pitch + ends, side="right")
    counts = np.maximum(last - first, 0)
    a = np.repeat(np.arange(n), counts)
    b = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) \
        + np.repeat(first, counts)
    keep = rows[b] == rows[a] + 1
    a, b = a[keep], b[keep]
    # union-find: hook the larger root under the smaller one, then jump pointers until
    # every run points at its root; repeat until both ends of every edge share a root
    while a.size:
        ra, rb = parent[a], parent[b]
        differ = ra != rb
        if not differ.any():
            break
        ra, rb = ra[differ], rb[differ]
        parent[np.maximum(ra, rb)] = np.minimum(ra, rb)
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
        a, b = a[differ], b[differ]
    return parent


def find_boxes(out: np.ndarray, zp: int, scale: float, letterbox: Optional["Letterbox"] = None,
               thresh: float = 0.3, box_thresh: float = 0.5, unclip_ratio: float = 1.6,
               min_size: int = 3) -> List[Box]:
    """Text boxes from an H x W int8 probability map, read in place.

    ``out`` may be any 2-D int8 view: the output buffer itself, or channel 0 of an
    NC1HWC2 buffer (a strided view); nothing is copied or dequantised as a whole.

    1. mask: ``out >= int8_threshold(thresh, zp, scale)`` (pixels with p >= thresh);
    2. connected components of the mask, 8-connectivity: pixels that touch at a corner
       belong together, so a diagonal stroke stays one component;
    3. score: the mean of the component's int8 values, dequantised (one number). This
       is close to DB's "slow" score (the mean inside the contour); DB's "fast" score
       averages the whole bounding rectangle, pixels below the threshold included, so
       it usually comes out lower;
    4. drop a component whose score is below ``box_thresh`` or whose box is thinner than
       ``min_size`` pixels (DB's min_size is 3);
    5. grow the box on every side by DB's unclip distance ``d = area * unclip_ratio /
       perimeter`` of the box (axis-aligned here; PaddleOCR offsets the rotated
       rectangle as a polygon), clipped to the map;
    6. map to frame coordinates with ``letterbox`` when it is given.

    The defaults (thresh 0.3, box_thresh 0.5, unclip_ratio 1.6) are the values in
    RapidOCR's config.yaml for this detector; RapidOCR also dilates the mask and scores
    in the "fast" mode, which this function does not. Rockchip's PPOCR-Det C demo (model
    zoo v2.3.2) uses thresh 0.3, box_thresh 0.6, unclip_ratio 1.5 and the "slow" score.
    Boxes come sorted top to bottom, then left to right.

    Per call nothing the size of the map is allocated: the mask and the other map-sized
    arrays are scratch kept per thread (several workers may call at once) and per map
    shape; a call allocates only arrays sized by the runs of text it finds.
    """
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.dtype != np.int8:
        raise ValueError(f"out must be an H x W int8 array (a view of the output), got "
                         f"{getattr(out, 'dtype', type(out).__name__)} "
                         f"{getattr(out, 'shape', '')}")
    zp, scale = int(zp), float(scale)
    q = int8_threshold(thresh, zp, scale)
    if dequantize(q, zp, scale) < thresh:
        return []  # no int8 value reaches the threshold
    # the component sums stay in int8 units: the score dequantises one mean per component
    return _boxes(out, q, "int8", lambda mean: (mean - zp) * scale, letterbox, box_thresh,
                  unclip_ratio, min_size)


def find_boxes_float(prob: np.ndarray, letterbox: Optional["Letterbox"] = None,
                     thresh: float = 0.3, box_thresh: float = 0.5, unclip_ratio: float = 1.6,
                     min_size: int = 3) -> List[Box]:
    """The same boxes as :func:`find_boxes`, from a float probability map.

    This is the usual route: the whole map dequantised (or the fp32 model's own output),
    then ``prob >= thresh``. :func:`reference_boxes` uses it on the fp32 twin's output.
    """
    prob = np.asarray(prob)
    if prob.ndim != 2 or prob.dtype.kind != "f":
        raise ValueError(f"prob must be an H x W float array, got {prob.dtype} {prob.shape}")
    return _boxes(prob, thresh, "float", lambda mean: mean, letterbox, box_thresh,
                  unclip_ratio, min_size)


def _boxes(values_map: np.ndarray, thresh: float, route: str, to_prob,
           letterbox: Optional["Letterbox"], box_thresh: float, unclip_ratio: float,
           min_size: int) -> List[Box]:
    h, w = values_map.shape
    padded, edges, values = _scratch_for((h, w), route)
    np.greater_equal(values_map, thresh, out=padded[:, 1:-1])
    rows, starts, ends = _runs(padded, edges)
    if rows.size == 0:
        return []
    parent = _label_runs(rows, starts, ends, w)
    roots, label = np.unique(parent, return_inverse=True)
    k = roots.size
    lengths = ends - starts
    area = np.bincount(label, weights=lengths, minlength=k)
    # the sum of each run: the rows that hold runs, widened (int8 sums overflow) into
    # scratch, then one reduceat over [start, end, start, end, ...]: the even slices are
    # the runs (the odd ones, the gaps, are dropped).  The slice of the flat scratch ends
    # at the last run's end, so the last slice is that run
    first_row, last_row = int(rows[0]), int(rows[-1])
    np.copyto(values[first_row:last_row + 1], values_map[first_row:last_row + 1])
    flat = values.reshape(-1)
    bounds = np.empty(2 * rows.size, np.int64)
    bounds[0::2] = rows * w + starts
    bounds[1::2] = rows * w + ends
    lo = first_row * w
    # dtype: numpy would sum int32 in int64 and copy the whole slice to do it
    run_sums = np.add.reduceat(flat[lo:int(bounds[-1])], bounds[:-1] - lo,
                               dtype=values.dtype)[0::2]
    sums = np.bincount(label, weights=run_sums, minlength=k)
    x0 = np.full(k, w, np.int64)
    np.minimum.at(x0, label, starts)
    x1 = np.zeros(k, np.int64)
    np.maximum.at(x1, label, ends)
    y0 = np.full(k, h, np.int64)
    np.minimum.at(y0, label, rows)
    y1 = np.zeros(k, np.int64)
    np.maximum.at(y1, label, rows + 1)

    # filter and grow with array steps: a noisy map has thousands of tiny components
    bw, bh = (x1 - x0).astype(np.float64), (y1 - y0).astype(np.float64)
    score = to_prob(sums / area)
    keep = (np.minimum(bw, bh) >= min_size) & (score >= box_thresh)
    bw, bh, score = bw[keep], bh[keep], score[keep]
    d = bw * bh * unclip_ratio / (2.0 * (bw + bh))
    bx0 = np.maximum(0.0, x0[keep] - d)
    by0 = np.maximum(0.0, y0[keep] - d)
    bx1 = np.minimum(float(w), x1[keep] + d)
    by1 = np.minimum(float(h), y1[keep] + d)
    boxes: List[Box] = []
    for i in range(score.size):
        a, b, c, e = float(bx0[i]), float(by0[i]), float(bx1[i]), float(by1[i])
        if letterbox is not None:
            a, b = letterbox.to_frame(a, b)
            c, e = letterbox.to_frame(c, e)
            if c <= a or e <= b:
                continue  # the box lies in the letterbox's padding: nothing of the frame
        boxes.append(Box(a, b, c, e, float(score[i])))
    boxes.sort(key=lambda b: (b.y0, b.x0))
    return boxes
