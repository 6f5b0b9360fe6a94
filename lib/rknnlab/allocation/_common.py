"""What every measurement of rknnlab.allocation shares: the runtime to measure on, the
course model's file for it, the memory a context costs, and the io mems of a context."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi
from ..rknn.buffers import mem_view

#: the page the runtime and the kernel allocate in (decision 10: allocations are rounded to 4 KiB)
PAGE = 4096
MODELED = "MODELED"
MEASURED = "measured"


def runtime(rt: Optional[Any]) -> Any:
    """``rt``, or the simulated RK3588 (rknnlab.open_runtime("sim")) when None."""
    if rt is not None:
        return rt
    import rknnlab
    return rknnlab.open_runtime("sim")


def model_file(rt: Any, model: str) -> str:
    """The .rknn of a course model for the runtime's SoC (a path passes through)."""
    from .. import models
    if model.endswith(".rknn"):
        return model
    soc = models.SOC_MODELS.get(rt.soc, rt.soc)
    return str(models.model_path(model, soc))


def frame(rows: List[Dict[str, Any]], source: str, columns: Optional[Sequence[str]] = None) -> Any:
    """A DataFrame of ``rows`` with its source in attrs (rknnlab.profile.show prints it)."""
    import pandas as pd
    table = pd.DataFrame(rows, columns=list(columns) if columns else None)
    table.attrs["source"] = source
    return table


def run_label(rt: Any, what: str) -> str:
    """The source line of a measurement on ``rt``: "simulated RK3588 — rknnlab sim: <what>"."""
    return f"{rt.source}: {what}"


def mem_size(rt: Any, ctx: int) -> abi.rknn_mem_size:
    return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)


def dma_total(rt: Any, ctx: int) -> int:
    """total_dma_allocated_size of ``ctx`` (RKNN_QUERY_MEM_SIZE)."""
    return int(mem_size(rt, ctx).total_dma_allocated_size)


def io_attrs(rt: Any, ctx: int, current: bool = False) -> Tuple[List[abi.rknn_tensor_attr],
                                                               List[abi.rknn_tensor_attr]]:
    """(native input attrs, native output attrs); ``current``: the CURRENT_NATIVE_* ones
    (dynamic shapes: the shape set last)."""
    n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    q_in = abi.RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR if current else abi.RKNN_QUERY_NATIVE_INPUT_ATTR
    q_out = abi.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR if current else abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR
    ins = [rt.query(ctx, q_in, abi.rknn_tensor_attr(index=i)) for i in range(n.n_input)]
    outs = [rt.query(ctx, q_out, abi.rknn_tensor_attr(index=i)) for i in range(n.n_output)]
    return ins, outs


def io_bytes(rt: Any, ctx: int) -> int:
    """Bytes of the native io buffers: size_with_stride of every native input and output."""
    ins, outs = io_attrs(rt, ctx)
    return sum(int(a.size_with_stride) for a in ins + outs)


def seeded_frame(attr: abi.rknn_tensor_attr, seed: int = 0) -> np.ndarray:
    """A seeded uint8 input for an NHWC uint8 binding of ``attr`` (w_stride rows padded)."""
    dims = [int(d) for d in attr.dims[:attr.n_dims]]
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, max(int(attr.size_with_stride), int(np.prod(dims))), dtype=np.uint8)


@dataclass
class BoundIo:
    """The io mems of one context, made once and bound once: every input as uint8 NHWC
    (the zero-copy demos' choice), every output in its native layout; sized from
    size_with_stride of the attr each is bound with."""
    rt: Any
    ctx: int
    inputs: List[Any] = field(default_factory=list)
    outputs: List[Any] = field(default_factory=list)
    in_attrs: List[abi.rknn_tensor_attr] = field(default_factory=list)
    out_attrs: List[abi.rknn_tensor_attr] = field(default_factory=list)
    frames: Dict[int, List[np.ndarray]] = field(default_factory=dict)   # seed -> the inputs' bytes

    @classmethod
    def bind(cls, rt: Any, ctx: int, current: bool = False) -> "BoundIo":
        io = cls(rt, ctx)
        ins, outs = io_attrs(rt, ctx, current)
        try:
            for a in ins:
                a.type, a.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC
                mem = rt.create_mem(ctx, int(a.size_with_stride))
                io.inputs.append(mem)
                rt.set_io_mem(ctx, mem, a)
            for a in outs:
                mem = rt.create_mem(ctx, int(a.size_with_stride))
                io.outputs.append(mem)
                rt.set_io_mem(ctx, mem, a)
        except BaseException:
            io.destroy()
            raise
        io.in_attrs, io.out_attrs = ins, outs
        return io

    @property
    def nbytes(self) -> int:
        return sum(int(m.contents.size) for m in self.inputs + self.outputs)

    def write_inputs(self, seed: int = 0) -> None:
        if seed not in self.frames:
            self.frames[seed] = [seeded_frame(a, seed) for a in self.in_attrs]
        for mem, data in zip(self.inputs, self.frames[seed]):
            view = mem_view(mem, np.uint8)
            view[:min(view.size, data.size)] = data[:view.size]
            self.rt.mem_sync(self.ctx, mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)

    def read_outputs(self) -> List[np.ndarray]:
        """Copies of the native output bytes (after rknn_mem_sync FROM_DEVICE)."""
        out = []
        for mem, a in zip(self.outputs, self.out_attrs):
            self.rt.mem_sync(self.ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
            out.append(mem_view(mem, np.uint8, int(a.size_with_stride)).copy())
        return out

    def destroy(self) -> None:
        for mem in self.inputs + self.outputs:
            self.rt.destroy_mem(self.ctx, mem)
        self.inputs, self.outputs = [], []


def counted_in_dma_total(rt: Any, ctx: int, mem_bytes: int, before: int) -> bool:
    """Did the runtime add a mem just made with ``ctx`` to its total_dma_allocated_size?
    (The simulator does, assumption A9; no document says whether a board does, so the
    functions here measure it and add the mems it does not count.)"""
    return dma_total(rt, ctx) - before >= mem_bytes


def same_outputs(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def mismatch_share(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """The share of output bytes that differ between two runs (0: identical)."""
    total = sum(x.size for x in a)
    differ = sum(int(np.count_nonzero(x != y)) for x, y in zip(a, b))
    return differ / total if total else 0.0
