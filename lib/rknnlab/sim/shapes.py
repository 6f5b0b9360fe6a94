"""Input shapes of a dynamic-shape model as rknn_set_input_shapes and
RKNN_QUERY_INPUT_DYNAMIC_RANGE carry them: dims in an attr's fmt, compared as NCHW."""
from __future__ import annotations

from typing import List, Sequence

from ..rknn import abi
from ..rknn.buffers import attr_dims


def nchw(attr: abi.rknn_tensor_attr) -> List[int]:
    """An attr's dims as NCHW (set_input_shapes reads them in the attr's fmt)."""
    dims = list(attr_dims(attr))
    if len(dims) == 4 and attr.fmt == abi.RKNN_TENSOR_NHWC:
        n, h, w, c = dims
        return [n, c, h, w]
    return dims


def dims_text(nchw: Sequence[int], fmt: int) -> str:
    """NCHW dims written in ``fmt`` (as the caller passed them)."""
    dims = list(nchw)
    if len(dims) == 4 and fmt == abi.RKNN_TENSOR_NHWC:
        dims = [dims[0], dims[2], dims[3], dims[1]]
    return f"{abi.FMT_NAMES.get(fmt, str(fmt))} {dims}"


__all__ = ["nchw", "dims_text"]
