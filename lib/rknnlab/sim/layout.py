"""How tensor values sit in bytes: layouts, quantization and input normalisation.

Every tensor has a *logical* shape: (N, C, H, W) for 4-D tensors (the ONNX
order), the model's own dims otherwise.  A :class:`Layout` maps that logical
tensor onto a buffer in one RKNN format:

- NCHW / UNDEFINED: dense, in logical order;
- NHWC: rows of ``w_stride`` pixels (>= W; the extra pixels are padding);
- NC1HWC2: channel blocks of C2 (C1 blocks; channels past C are padding).

All conversions are numpy work on the real bytes, as the runtime does them
on the CPU.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.buffers import attr_dims

Shape = Tuple[int, ...]


class LayoutError(ValueError):
    """An attr whose fmt, dims and strides do not describe the tensor."""


def logical_shape(plain: abi.rknn_tensor_attr) -> Shape:
    """The logical shape of a tensor from its plain (INPUT_ATTR/OUTPUT_ATTR) attr."""
    dims = attr_dims(plain)
    if len(dims) == 4 and plain.fmt == abi.RKNN_TENSOR_NHWC:
        n, h, w, c = dims
        return (n, c, h, w)
    if plain.fmt == abi.RKNN_TENSOR_NC1HWC2:
        raise LayoutError("a plain attr in NC1HWC2 does not tell the channel count")
    return dims


@dataclass(frozen=True)
class Layout:
    """One tensor's place in a buffer: format, element type and buffer shape."""
    fmt: int
    rknn_type: int
    logical: Shape
    buffer_shape: Shape

    # cached: these are asked for on every API call
    @functools.cached_property
    def dtype(self) -> np.dtype:
        return abi.TYPE_TO_NUMPY[self.rknn_type]

    @functools.cached_property
    def nbytes(self) -> int:
        return math.prod(self.buffer_shape) * self.dtype.itemsize

    @functools.cached_property
    def n_elems(self) -> int:
        return math.prod(self.logical)

    @functools.cached_property
    def data(self) -> "Layout":
        """This layout up to the end of the last NC1HWC2 channel block that holds
        channels: what follows holds only whole padding blocks (ppocr_det's one-channel
        map on rk3588 has three).  The layout itself for other formats, or when N > 1
        (the padding blocks are then not at the end)."""
        if self.fmt != abi.RKNN_TENSOR_NC1HWC2 or self.logical[0] != 1:
            return self
        used = -(-self.logical[1] // self.buffer_shape[4])
        if used == self.buffer_shape[1]:
            return self
        return Layout(self.fmt, self.rknn_type, self.logical, (1, used) + tuple(self.buffer_shape[2:]))

    def read(self, raw: np.ndarray) -> np.ndarray:
        """The logical tensor held in ``raw`` (bytes, at least ``data.nbytes``): a view
        where the format allows, else a copy (NC1HWC2)."""
        if self.data is not self:  # whole padding blocks are not read
            return self.data.read(raw)
        if self.fmt == abi.RKNN_TENSOR_NC1HWC2:
            n, c, h, w = self.logical
            blocks = self._typed(raw).transpose(0, 1, 4, 2, 3)  # N, C1, C2, H, W
            full, rest = divmod(c, blocks.shape[2])
            dense = np.empty((n, c, h, w), self.dtype)
            for k in range(n):  # only the channels the tensor has are gathered
                if full:
                    dense[k, :c - rest].reshape(full, -1, h, w)[...] = blocks[k, :full]
                if rest:
                    dense[k, c - rest:] = blocks[k, full, :rest]
            return dense
        return self._logical_view(raw)

    def write(self, value: np.ndarray, raw: np.ndarray) -> None:
        """Store the logical tensor ``value`` into ``raw`` (cast to this layout's type).
        Padding (NHWC stride, NC1HWC2 channels past C) is left as it is, except
        that NC1HWC2 padding channels are zeroed."""
        if self.fmt == abi.RKNN_TENSOR_NC1HWC2:
            n, c, h, w = self.logical
            blocks = self._typed(raw).transpose(0, 1, 4, 2, 3)  # N, C1, C2, H, W (a view)
            c2 = blocks.shape[2]
            full, rest = divmod(c, c2)
            blocks[:, :full] = value[:, :full * c2].reshape(n, full, c2, h, w)
            if rest:
                blocks[:, full, :rest] = value[:, full * c2:]
                blocks[:, full, rest:] = 0
            blocks[:, full + (1 if rest else 0):] = 0
            return
        self._logical_view(raw)[...] = value

    def _typed(self, raw: np.ndarray) -> np.ndarray:
        if raw.nbytes < self.nbytes:
            raise LayoutError(f"buffer of {raw.nbytes} bytes, layout needs {self.nbytes}")
        return raw[:self.nbytes].view(self.dtype).reshape(self.buffer_shape)

    def _logical_view(self, raw: np.ndarray) -> np.ndarray:
        typed = self._typed(raw)
        if self.fmt == abi.RKNN_TENSOR_NHWC and len(self.logical) == 4:
            width = self.logical[3]
            return typed[:, :, :width, :].transpose(0, 3, 1, 2)
        return typed


def layout_for(fmt: int, rknn_type: int, logical: Shape, attr: "abi.rknn_tensor_attr | None" = None
               ) -> Layout:
    """The layout of a tensor of ``logical`` shape in format ``fmt``.  ``attr``
    supplies the strides: w_stride for NHWC, the C1/C2 dims for NC1HWC2.
    Raises LayoutError when they do not fit the tensor."""
    if rknn_type not in abi.TYPE_TO_NUMPY:
        raise LayoutError(f"type {abi.TYPE_NAMES.get(rknn_type, rknn_type)} is not modeled")
    if len(logical) != 4 or fmt in (abi.RKNN_TENSOR_NCHW, abi.RKNN_TENSOR_UNDEFINED):
        if fmt == abi.RKNN_TENSOR_NC1HWC2:
            raise LayoutError(f"NC1HWC2 needs a 4-D tensor, this one is {logical}")
        return Layout(fmt, rknn_type, logical, logical)
    n, c, h, w = logical
    if fmt == abi.RKNN_TENSOR_NHWC:
        w_stride = max(attr.w_stride if attr is not None else 0, w)
        return Layout(fmt, rknn_type, logical, (n, h, w_stride, c))
    if fmt == abi.RKNN_TENSOR_NC1HWC2:
        dims = attr_dims(attr) if attr is not None else ()
        if len(dims) != 5 or dims[0] != n or dims[2:4] != (h, w) or dims[1] * dims[4] < c:
            raise LayoutError(f"NC1HWC2 dims {list(dims)} do not hold a tensor of NCHW shape {list(logical)}")
        return Layout(fmt, rknn_type, logical, dims)
    raise LayoutError(f"format {abi.FMT_NAMES.get(fmt, fmt)} is not modeled")


# --------------------------------------------------------------------------- quantization
def quantize(values: np.ndarray, zp: int, scale: float) -> np.ndarray:
    """float -> int8 (affine asymmetric): round(values / scale) + zp, saturated."""
    q = np.asarray(values, dtype=np.float32) / np.float32(scale)
    np.rint(q, out=q)
    q += zp
    np.clip(q, -128, 127, out=q)
    return q.astype(np.int8)


def dequantize(q: np.ndarray, zp: int, scale: float) -> np.ndarray:
    """int8 -> float32: (q - zp) * scale, through a 256-entry table (one pass)."""
    return np.take(_dequantize_table(zp, scale), q.view(np.uint8))


@functools.lru_cache(maxsize=256)
def _dequantize_table(zp: int, scale: float) -> np.ndarray:
    # entry b holds the value of the int8 whose byte is b
    values = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32)
    values -= zp
    values *= np.float32(scale)
    return values


class InputQuantizer:
    """Raw input values -> the model's int8: ((x - mean_c) / std_c) quantized
    with the input's zp/scale, i.e. the normalisation baked into the .rknn plus
    the quantization of the NPU's input tensor, in one step.

    8-bit inputs go through a per-channel table of 256 entries (exactly the
    arithmetic below, done once); float inputs through the arithmetic.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], zp: int, scale: float,
                 logical: Shape) -> None:
        channels = logical[1] if len(logical) == 4 else 1
        mean_c = np.broadcast_to(np.asarray(mean, np.float32), (channels,))
        std_c = np.broadcast_to(np.asarray(std, np.float32), (channels,))
        # q = x * gain + offset, then round and saturate
        self.gain = (1.0 / (std_c * np.float32(scale))).astype(np.float32)
        self.offset = (zp - mean_c * self.gain).astype(np.float32)
        self.channels = channels
        self._channel_shape = (1, channels, 1, 1) if len(logical) == 4 else (1,) * len(logical)
        byte_values = np.arange(256, dtype=np.uint8)
        # one table serves all channels when they share mean and std (one pass, not C)
        self._shared = bool((self.gain == self.gain[0]).all() and (self.offset == self.offset[0]).all())
        self._tables = {
            np.dtype(np.uint8): self._arithmetic(np.tile(byte_values, (channels, 1)), (channels, 1)),
            # int8 tables are indexed by the byte, so entry b holds the result for int8(b)
            np.dtype(np.int8): self._arithmetic(np.tile(byte_values.view(np.int8), (channels, 1)),
                                                (channels, 1)),
        }

    def _arithmetic(self, x: np.ndarray, channel_shape: Shape) -> np.ndarray:
        q = x.astype(np.float32)
        q *= self.gain.reshape(channel_shape)
        q += self.offset.reshape(channel_shape)
        np.rint(q, out=q)
        np.clip(q, -128, 127, out=q)
        return q.astype(np.int8)

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        """``raw`` in logical order (any memory order) -> int8 in the same order."""
        table = self._tables.get(raw.dtype)
        if table is None:
            return self._arithmetic(raw, self._channel_shape)
        index = raw.view(np.uint8)
        q = np.empty_like(raw, dtype=np.int8)
        if self._shared or len(raw.shape) != 4:
            np.take(table[0], index, out=q, mode="clip")
            return q
        for c in range(self.channels):
            np.take(table[c], index[:, c], out=q[:, c], mode="clip")
        return q
