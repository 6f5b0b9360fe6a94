"""Dynamic shapes measured: one model built with several input shapes, its io mems
allocated once for the largest shape, and each shape's io, internal memory and time."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import numpy as np

from ..profile._common import spread
from ..rknn import abi
from ._common import MEASURED, BoundIo, frame, io_attrs, mem_size, model_file, run_label, runtime


def input_shapes(rt: Any, ctx: int) -> List[List[List[int]]]:
    """RKNN_QUERY_INPUT_DYNAMIC_RANGE of every input: shapes[k][i] is input i's dims in
    the k-th shape set (the order the model was built with)."""
    n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_input
    ranges = [rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=i)).shapes()
              for i in range(n)]
    return [[ranges[i][k] for i in range(n)] for k in range(len(ranges[0]))]


def set_shape(rt: Any, ctx: int, dims: List[List[int]]) -> None:
    """rknn_set_input_shapes with one attr per input: its plain INPUT_ATTR (index, name,
    fmt) with n_dims and dims of the chosen shape."""
    attrs = []
    for i, d in enumerate(dims):
        a = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=i))
        a.n_dims = len(d)
        for j, v in enumerate(d):
            a.dims[j] = v
        attrs.append(a)
    rt.set_input_shapes(ctx, attrs)


def _shape_name(dims: List[List[int]]) -> str:
    return " + ".join("x".join(str(v) for v in d) for d in dims)


def shape_sweep(model: str = "mobilenet_v2_dynamic", frames: int = 5, rt: Optional[Any] = None) -> Any:
    """Every input shape of a dynamic-shape ``model`` on ``rt`` (default: the simulated
    RK3588), the way the user guide (§5.4.4.2) asks: the io mems allocated once for the
    largest shape; then per shape rknn_set_input_shapes, the CURRENT_NATIVE_* attrs
    queried, the mems bound again with them (rknn_set_io_mem), ``frames`` runs.

    Rows, one per shape in RKNN_QUERY_INPUT_DYNAMIC_RANGE order: shape (dims as the
    range lists them), input_bytes and output_bytes (size_with_stride of the current
    native attrs), io_mem_bytes (the mems allocated once, for the largest shape),
    internal_bytes and dma_bytes (RKNN_QUERY_MEM_SIZE after the shape was set),
    npu_us (median RKNN_QUERY_PERF_RUN: the runtime's own run time; modeled on the
    simulator), median_us / q1_us / q3_us (wall time of rknn_run), repeats, kind.
    ~0.5 s on the simulator."""
    if frames < 1:
        raise ValueError(f"frames={frames}: at least 1")
    rt = runtime(rt)
    ctx = rt.init(model_file(rt, model))
    rows: List[Dict[str, Any]] = []
    try:
        shapes = input_shapes(rt, ctx)
        sizes = []
        for dims in shapes:      # first pass: each shape's io, to allocate the largest once
            set_shape(rt, ctx, dims)
            ins, outs = io_attrs(rt, ctx, current=True)
            sizes.append(([int(a.size_with_stride) for a in ins], [int(a.size_with_stride) for a in outs]))
        largest_in = [max(s[0][i] for s in sizes) for i in range(len(sizes[0][0]))]
        largest_out = [max(s[1][i] for s in sizes) for i in range(len(sizes[0][1]))]
        io = BoundIo(rt, ctx)
        io.inputs = [rt.create_mem(ctx, n) for n in largest_in]
        io.outputs = [rt.create_mem(ctx, n) for n in largest_out]
        try:
            for dims, (in_sizes, out_sizes) in zip(shapes, sizes):
                set_shape(rt, ctx, dims)
                _rebind(rt, io)
                io.write_inputs(0)
                rt.run(ctx)       # the first run at a new shape, unmeasured
                wall, npu = np.empty(frames), np.empty(frames)
                for k in range(frames):
                    t = time.perf_counter()
                    rt.run(ctx)
                    wall[k] = time.perf_counter() - t
                    npu[k] = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration
                m = mem_size(rt, ctx)
                rows.append({"shape": _shape_name(dims), "input_bytes": sum(in_sizes),
                             "output_bytes": sum(out_sizes), "io_mem_bytes": io.nbytes,
                             "internal_bytes": int(m.total_internal_size),
                             "dma_bytes": int(m.total_dma_allocated_size), "npu_us": float(np.median(npu)),
                             **spread(wall), "kind": MEASURED})
        finally:
            io.destroy()
    finally:
        rt.destroy(ctx)
    table = frame(rows, run_label(rt, f"{model}, io mems allocated once for the largest shape, "
                                      f"{frames} run{'s' if frames != 1 else ''} per shape"))
    table.attrs["model"] = model
    return table


def _rebind(rt: Any, io: BoundIo) -> None:
    """Bind the mems again with the CURRENT_NATIVE_* attrs of the shape just set (inputs
    as uint8 NHWC, outputs native)."""
    ins, outs = io_attrs(rt, io.ctx, current=True)
    for mem, a in zip(io.inputs, ins):
        a.type, a.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC
        rt.set_io_mem(io.ctx, mem, a)
    for mem, a in zip(io.outputs, outs):
        rt.set_io_mem(io.ctx, mem, a)
    io.in_attrs, io.out_attrs = ins, outs
    io.frames.clear()      # the input's size changed with the shape
