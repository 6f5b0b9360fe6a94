"""From an NV12 frame to the model's RGB input: colour conversion and letterbox in one pass.

:func:`letterbox` is the CPU's version of what RGA does on a board. It converts NV12
(BT.601, limited range) to RGB888 and resizes the frame to fit the model's input while
keeping its aspect ratio. The rest of the input is padding, and the result is written
straight into the destination buffer, whose rows may be padded to ``w_stride`` pixels.
That buffer is typically the input mem made with rknn_create_mem and sized from the
native attr's ``size_with_stride``.

The resize is **nearest neighbour**: each output pixel copies one frame pixel. That is
the cheapest resize (one gather per plane) and keeps a 1280 x 720 frame under a few
milliseconds in numpy; bilinear would read four pixels and cost about four times as much.
Text strokes survive it at the scales used here (0.375 for 1280 x 720 into 480 x 480).

What Rockchip's model zoo does for this model: its PP-OCR detection demo (examples/PPOCR/
PPOCR-Det, v2.3.2) does not letterbox. It stretches the image to 480 x 480, with a
separate scale for width and height. Python resizes with cv2.resize (bilinear). C calls
the zoo's convert_image: RGA when both widths are multiples of 16, else a bilinear CPU
loop. This module keeps the aspect ratio instead, so text is not squashed: a deliberate
difference, not a match. On the camera's frames, nearest and bilinear letterboxes give
nearly the same fp32 boxes (most frames agree fully at IoU 0.5).

:func:`rga_problems` checks a buffer against RGA's documented alignment rules, so a
pipeline can tell beforehand whether RGA would take it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from .frames import Nv12Frame, _G_U, _G_V, _R_V, _B_U, _Y_GAIN


@dataclass(frozen=True)
class Letterbox:
    """Where the frame landed in the model's input.

    The frame was scaled by ``scale`` (the same factor on both axes) to ``new_w`` x
    ``new_h`` pixels and placed at column ``pad_x``, row ``pad_y`` of the input; the rest
    is padding. ``frame_w`` and ``frame_h`` are the frame's size (0 when unknown).
    """
    scale: float
    pad_x: int
    pad_y: int
    new_w: int
    new_h: int
    frame_w: int = 0
    frame_h: int = 0

    def to_frame(self, x: float, y: float) -> Tuple[float, float]:
        """Model-input coordinates -> frame coordinates (clipped to the frame when its
        size is known). Pixel edges map to pixel edges: (pad_x, pad_y) -> (0, 0)."""
        fx = (x - self.pad_x) / self.scale
        fy = (y - self.pad_y) / self.scale
        if self.frame_w:
            fx = min(max(fx, 0.0), float(self.frame_w))
        if self.frame_h:
            fy = min(max(fy, 0.0), float(self.frame_h))
        return fx, fy

    def to_model(self, x: float, y: float) -> Tuple[float, float]:
        """Frame coordinates -> model-input coordinates (the inverse of :meth:`to_frame`)."""
        return x * self.scale + self.pad_x, y * self.scale + self.pad_y


def fit(frame_w: int, frame_h: int, width: int, height: int) -> Letterbox:
    """The letterbox geometry of a ``frame_w`` x ``frame_h`` frame in a ``width`` x
    ``height`` input: the largest scale that fits, the image centred (pad split evenly,
    the odd pixel going right or down)."""
    scale = min(width / frame_w, height / frame_h)
    new_w = min(width, max(1, int(round(frame_w * scale))))
    new_h = min(height, max(1, int(round(frame_h * scale))))
    return Letterbox(scale, (width - new_w) // 2, (height - new_h) // 2, new_w, new_h,
                     frame_w, frame_h)


# fixed-point BT.601 limited range: R = (298 (Y-16) + 409 (V-128) + 128) >> 8, and so on.
# The products are computed in place in int32 scratch; a lookup table would be shorter
# but numpy turns uint8 indices into a temporary intp array (8 bytes per pixel) per call.
_Y_OFFSET = 128 - _Y_GAIN * 16

_Geometry = Tuple[int, int, int, int, int, int]
# index tables per geometry (read-only, shared by threads); a few geometries at most
_tables: Dict[_Geometry, Tuple[Letterbox, np.ndarray, np.ndarray]] = {}
_tables_lock = threading.Lock()
_TABLES_KEPT = 8
# scratch arrays per thread and geometry: the workers of a pipeline letterbox in parallel
_scratch = threading.local()


def _index_tables(frame: Nv12Frame, width: int, height: int) -> Tuple[Letterbox, np.ndarray, np.ndarray]:
    key = (frame.width, frame.height, frame.stride, frame.height_stride, width, height)
    with _tables_lock:
        found = _tables.get(key)
    if found is not None:
        return found
    box = fit(frame.width, frame.height, width, height)
    # nearest: output pixel centre (d + 0.5) comes from the frame pixel under it
    xs = np.minimum(((np.arange(box.new_w) + 0.5) / box.scale).astype(np.intp), frame.width - 1)
    ys = np.minimum(((np.arange(box.new_h) + 0.5) / box.scale).astype(np.intp), frame.height - 1)
    # flat offsets into the whole NV12 buffer: Y at row*stride + col; the U of the pair
    # covering (row, col) at the UV plane's start + (row//2)*stride + (col//2)*2, V next
    y_index = (ys[:, None] * frame.stride + xs[None, :]).ravel()
    uv_start = frame.stride * frame.height_stride
    u_index = (uv_start + (ys[:, None] // 2) * frame.stride + (xs[None, :] // 2) * 2).ravel()
    found = (box, y_index, u_index)
    with _tables_lock:
        if len(_tables) >= _TABLES_KEPT:
            _tables.pop(next(iter(_tables)))
        _tables[key] = found
    return found


def _scratch_for(n: int) -> Tuple[np.ndarray, ...]:
    arrays = getattr(_scratch, "arrays", None)
    if arrays is None or arrays[0].size != n:
        # three uint8 planes and four int32 accumulators of the output's size (not the
        # frame's): reallocated only when the output geometry changes
        arrays = (np.empty(n, np.uint8), np.empty(n, np.uint8), np.empty(n, np.uint8),
                  np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int32),
                  np.empty(n, np.int32))
        _scratch.arrays = arrays
    return arrays


def _rows(dst: np.ndarray, width: int, height: int, w_stride: int) -> np.ndarray:
    if not isinstance(dst, np.ndarray) or dst.dtype != np.uint8:
        raise TypeError("dst must be a uint8 numpy array (e.g. a view of the input mem)")
    if not dst.flags.c_contiguous:
        raise ValueError("dst must be contiguous: the rows are written at a w_stride pitch")
    need = height * w_stride * 3
    if dst.size < need:
        raise ValueError(f"dst holds {dst.size:,} bytes; {height} rows of w_stride {w_stride} "
                         f"RGB888 pixels need {need:,} (size it from size_with_stride)")
    return dst.reshape(-1)[:need].reshape(height, w_stride, 3)


def letterbox(frame: Nv12Frame, dst: np.ndarray, width: int, height: int,
              w_stride: Optional[int] = None, pad: int = 0) -> Letterbox:
    """Convert an NV12 frame to RGB888 and letterbox it into ``dst``, in one pass.

    ``dst`` is a contiguous uint8 buffer of at least ``height * w_stride * 3`` bytes,
    read as ``height`` rows of ``w_stride`` RGB pixels (``w_stride`` defaults to
    ``width``; pass the native attr's w_stride when it pads rows). Only the first
    ``width`` pixels of each row are written; bytes past them, and past the last row, are
    left alone. The area around the image is set to ``pad`` (0, black: the value the
    course's calibration images were padded with).

    Colour: BT.601 limited range, chroma shared by each 2 x 2 block. Resize: nearest
    neighbour (see the module's help). The index tables are computed once per geometry
    and scratch arrays are kept per thread, so a call allocates nothing that grows with
    the frame. Returns the :class:`Letterbox` that maps boxes back to the frame.
    """
    if not isinstance(frame, Nv12Frame):
        raise TypeError(f"letterbox takes an Nv12Frame, got {type(frame).__name__}")
    w_stride = width if not w_stride else int(w_stride)
    if width <= 0 or height <= 0 or w_stride < width:
        raise ValueError(f"bad input geometry: {width} x {height} with w_stride {w_stride}")
    if not 0 <= pad <= 255:
        raise ValueError(f"pad is one byte value (0..255), got {pad}")
    rows = _rows(dst, width, height, w_stride)
    box, y_index, u_index = _index_tables(frame, width, height)
    y8, u8, v8, c, d, e, acc = _scratch_for(y_index.size)
    data = frame.data
    # mode="clip": numpy copies the index table first in the default mode
    np.take(data, y_index, out=y8, mode="clip")
    np.take(data, u_index, out=u8, mode="clip")
    np.take(data[1:], u_index, out=v8, mode="clip")  # V follows U in each pair
    # dtype=int32 picks the int32 loop: numpy 1.x would otherwise multiply uint8 by 298
    # in uint16 (value-based casting) and wrap around above 65,535
    np.multiply(y8, _Y_GAIN, out=c, dtype=np.int32)
    c += _Y_OFFSET
    np.subtract(u8, 128, out=d, dtype=np.int32)
    np.subtract(v8, 128, out=e, dtype=np.int32)

    image = rows[box.pad_y:box.pad_y + box.new_h, box.pad_x:box.pad_x + box.new_w]
    shape = (box.new_h, box.new_w)

    def store(channel: int) -> None:
        # >> 8 undoes the fixed point; clip because saturated colours overshoot 0..255
        np.add(acc, c, out=acc)
        np.right_shift(acc, 8, out=acc)
        np.clip(acc, 0, 255, out=acc)
        np.copyto(image[..., channel], acc.reshape(shape), casting="unsafe")

    np.multiply(e, np.int32(_R_V), out=acc)
    store(0)
    np.multiply(d, np.int32(_G_U), out=acc)
    e *= np.int32(_G_V)          # e is not needed after green
    acc += e
    store(1)
    np.multiply(d, np.int32(_B_U), out=acc)
    store(2)

    # the padding, written every call: the buffer may hold anything from before
    rows[:box.pad_y, :width] = pad
    rows[box.pad_y + box.new_h:, :width] = pad
    rows[box.pad_y:box.pad_y + box.new_h, :box.pad_x] = pad
    rows[box.pad_y:box.pad_y + box.new_h, box.pad_x + box.new_w:width] = pad
    return box


# ---------------------------------------------------------------- RGA's rules

_RGA_DG = "Rockchip's RGA developer guide (librga, Rockchip_Developer_Guide_RGA_EN.md)"
_RGA_FAQ = "Rockchip's RGA FAQ (librga, Rockchip_FAQ_RGA_EN.md, Q4.5; airockchip/librga#146)"
_FORMATS = {"RGB888": "rgb", "BGR888": "rgb", "NV12": "yuv420sp", "NV21": "yuv420sp",
            "YUV420SP": "yuv420sp", "I420": "yuv420p", "YV12": "yuv420p", "YUV420P": "yuv420p"}


def rga_problems(fmt: str, width: int, height: int, w_stride: Optional[int] = None,
                 height_stride: Optional[int] = None, x: int = 0, y: int = 0,
                 w: Optional[int] = None, h: Optional[int] = None, soc: str = "rk3588",
                 phys_above_4g: bool = False, fill: bool = False) -> List[str]:
    """The documented RGA rules this image (or its rectangle x, y, w, h) breaks.

    An empty list means RGA accepts it as far as the documented rules go. Each problem
    is one sentence that names its source. ``fmt`` is "RGB888", "NV12" (or "NV21",
    "YUV420SP") or a planar "I420" / "YV12" / "YUV420P". ``w_stride`` is the row length
    in pixels and ``height_stride`` the number of rows the buffer holds (defaults: the
    width and the height; a decoder may pad 1080 rows to 1088). ``phys_above_4g`` says
    the buffer's physical pages lie above 4 GiB; ``fill`` says the operation fills a
    rectangle (imfill, as a letterbox's padding does).

    The rules checked are RK3588's, from Rockchip's RGA developer guide. RK3588 has RGA3
    and RGA2 cores, and the guide says that with several RGA versions on a chip the
    strictest alignment rule applies (note 2 under its alignment table), so RGA3's rules
    are the ones checked where both apply: a width stride that is a multiple of 16 for
    RGB888 and for YUV420SP; for YUV420SP an even x, y, width, height and height stride
    (the same on RGA3 and RGA2). RGA3's smallest input is 68 x 2 pixels (the guide's
    design index table; RGA2's is 2 x 2), and an operation's rectangle is at least 2 x 2.
    RGA2 has a 32-bit MMU, and on RK3588 only RGA2 does imfill and YUV planar formats
    (its planar rule: width stride a multiple of 4, even x, y, width, height and height
    stride). For another SoC this course has no checked rules: the answer then says so
    instead of claiming RGA accepts the image.
    """
    kind = _FORMATS.get(str(fmt).upper())
    if kind is None:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(_FORMATS)}")
    w_stride = width if not w_stride else int(w_stride)
    height_stride = height if not height_stride else int(height_stride)
    w = width if w is None else w
    h = height if h is None else h
    if min(width, height, w, h) <= 0 or w_stride < width or height_stride < height:
        raise ValueError(f"bad geometry: {width} x {height}, w_stride {w_stride}, height stride "
                         f"{height_stride}, rectangle {w} x {h}")
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise ValueError(f"the rectangle ({x}, {y}, {w} x {h}) is not inside the "
                         f"{width} x {height} image")
    if str(soc).lower() != "rk3588":
        return [f"Unknown: the RGA rules this course checked ({_RGA_DG}; {_RGA_FAQ}) are "
                f"RK3588's; {soc}'s RGA alignment rules are not among them, so this is not a "
                f"yes."]
    problems: List[str] = []
    needs_rga2 = kind == "yuv420p" or fill
    if not needs_rga2 and (width < 68 or height < 2):
        problems.append(f"RGA3 takes an image of at least 68 x 2 pixels; this one is {width} x "
                        f"{height}, so only RGA2 (at least 2 x 2, memory below 4 GiB) can take "
                        f"it ({_RGA_DG}, design index table).")
    if w < 2 or h < 2:
        problems.append(f"RGA needs a rectangle of at least 2 x 2 pixels; it is {w} x {h} "
                        f"({_RGA_DG}, note 2 under the design index table).")
    if kind == "rgb" and w_stride % 16:
        problems.append(f"RGA3 needs an RGB888 width stride that is a multiple of 16 pixels; "
                        f"it is {w_stride} ({_RGA_DG}).")
    if kind == "yuv420sp" and w_stride % 16:
        problems.append(f"RGA3 needs a YUV420SP width stride that is a multiple of 16; "
                        f"it is {w_stride} ({_RGA_DG}).")
    if kind == "yuv420p" and w_stride % 4:
        problems.append(f"RGA2 needs a YUV420P width stride that is a multiple of 4; it is "
                        f"{w_stride} ({_RGA_DG}).")
    if kind in ("yuv420sp", "yuv420p"):
        odd = [f"{name} = {value}" for name, value in (
            ("x", x), ("y", y), ("width", w), ("height", h), ("height stride", height_stride))
            if value % 2]
        if odd:
            who = "RGA3 and RGA2 need" if kind == "yuv420sp" else "RGA2 needs"
            layout = "YUV420SP" if kind == "yuv420sp" else "YUV420P"
            problems.append(f"{who} an even x, y, width, height and height stride for {layout}; "
                            f"odd: {', '.join(odd)} ({_RGA_DG}).")
    if needs_rga2 and phys_above_4g:
        why = "imfill" if fill else "YUV planar formats"
        problems.append(f"On RK3588 only RGA2 does {why}, and RGA2's 32-bit MMU cannot reach "
                        f"a buffer above 4 GiB: allocate it below 4 GiB, e.g. from the dma32 "
                        f"heap ({_RGA_FAQ}).")
    return problems
