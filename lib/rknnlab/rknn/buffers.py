"""numpy on both sides of the runtime's buffers, without copies.

``input_from_array`` points an rknn_input at an array's own bytes;
``output_view`` and ``mem_view`` look at runtime-owned bytes through numpy.
A view is only as alive as the memory under it: see each function.
"""
from __future__ import annotations

import ctypes
import math
from typing import Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import DTypeLike

from . import abi

_NUMPY_TO_TYPE = {dtype: rknn_type for rknn_type, dtype in abi.TYPE_TO_NUMPY.items()}

Shape = Union[int, Sequence[int]]


def attr_dims(attr: abi.rknn_tensor_attr) -> Tuple[int, ...]:
    """The tensor's shape: ``dims`` cut to ``n_dims``."""
    return tuple(attr.dims[:min(attr.n_dims, abi.RKNN_MAX_DIMS)])


def input_from_array(index: int, array: np.ndarray, fmt: int, type: Optional[int] = None,
                     pass_through: int = 0) -> abi.rknn_input:
    """An rknn_input whose ``buf``/``size`` are ``array``'s own bytes.

    ``type`` defaults to the RKNN type of the array's dtype.  The array must be
    C-contiguous (the runtime reads ``size`` bytes from ``buf``); it is kept
    alive as long as the returned struct is.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy array, got {array.__class__.__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("the array is not C-contiguous: pass np.ascontiguousarray(array)")
    if type is None:
        if array.dtype not in _NUMPY_TO_TYPE:
            raise ValueError(f"no RKNN tensor type for dtype {array.dtype}; convert the array "
                             "(e.g. to float32 or uint8) or pass type=")
        type = _NUMPY_TO_TYPE[array.dtype]
    tensor_input = abi.rknn_input(index=index, buf=array.ctypes.data, size=array.nbytes,
                                  pass_through=pass_through, type=type, fmt=fmt)
    tensor_input.array = array  # the struct only holds an address: keep the bytes alive
    return tensor_input


class _RawBytes:
    """Raw memory described through numpy's array interface.  A ctypes array type
    made per size (``c_ubyte * n``) would be a cyclic object of a few KiB that
    only the garbage collector frees, at moments that show up in heap readings."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}


def raw_bytes(address: int, nbytes: int) -> np.ndarray:
    """A writable uint8 view of ``nbytes`` bytes at ``address`` (no copy)."""
    return np.asarray(_RawBytes(address, nbytes))


def _view(address: int, nbytes: int, dtype: np.dtype, count: int,
          shape: Optional[Shape]) -> np.ndarray:
    array = raw_bytes(address, nbytes)[:count * np.dtype(dtype).itemsize].view(dtype)
    return array if shape is None else array.reshape(shape)


def output_view(output: abi.rknn_output, dtype: DTypeLike,
                shape: Optional[Shape] = None) -> np.ndarray:
    """A numpy array over ``output.buf``/``output.size``, without a copy.

    The array is valid only until the memory goes: for ``is_prealloc = 0``
    that is rknn_outputs_release (reading it later reads freed memory);
    copy with ``.copy()`` to keep values.
    """
    if not output.buf:
        raise ValueError("output.buf is NULL: call outputs_get first")
    dtype = np.dtype(dtype)
    if output.size % dtype.itemsize:
        raise ValueError(f"output.size={output.size} is not a whole number of {dtype} "
                         "elements: is want_float what you think it is?")
    return _view(output.buf, output.size, dtype, output.size // dtype.itemsize, shape)


def mem_view(mem_ptr: Union["ctypes._Pointer[abi.rknn_tensor_mem]", abi.rknn_tensor_mem],
             dtype: DTypeLike = np.uint8, shape: Optional[Shape] = None,
             offset: int = 0) -> np.ndarray:
    """A numpy array over an rknn_tensor_mem's CPU mapping (``virt_addr``),
    starting ``offset`` bytes in, without a copy.

    Without ``shape`` it spans as many whole elements as fit in ``size``.
    ``virt_addr`` is used as is (``mem.offset`` is not added).  The array is
    valid until rknn_destroy_mem; for cacheable mems call rknn_mem_sync
    (FROM_DEVICE before reading what the NPU wrote, TO_DEVICE after writing).
    """
    mem = mem_ptr.contents if isinstance(mem_ptr, ctypes._Pointer) else mem_ptr
    if not mem.virt_addr:
        raise ValueError("the mem has no CPU mapping (virt_addr is NULL)")
    dtype = np.dtype(dtype)
    available = mem.size - offset
    if offset < 0 or available < 0:
        raise ValueError(f"offset {offset} is outside the mem's {mem.size} bytes")
    if shape is None:
        count = available // dtype.itemsize
    else:
        count = math.prod((shape,) if isinstance(shape, int) else shape)
        if count * dtype.itemsize > available:
            raise ValueError(f"shape {shape} of {dtype} needs {count * dtype.itemsize} bytes, "
                             f"the mem has {available} from offset {offset}")
    return _view(mem.virt_addr + offset, available, dtype, count, shape)
