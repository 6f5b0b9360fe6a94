"""What Lab 5's checks hand to the student, with the truth kept here (import it from nowhere).

- exercises 1, 4 and 5: :class:`Ledger`, a runtime that passes every call through and keeps
  what the checks measure (the mems each context got, the contexts left alive, the io mems
  bound, the order of allocations and runs), :class:`CheckIo`, the check's own zero-copy io
  mems for a context, and whether the runtime counts a caller's mems in its DMA total;
- exercise 2: made-up CPU access patterns on a buffer (each a callable with the buffer's
  size and the syncs a cacheable buffer would need), and the modeled cost of each choice;
- exercise 3: the SRAM rule (which rows of a memory plan overlap the part of the internal
  buffer that lives in SRAM), and made-up memory plans no model has.

The patterns carry neutral names and no docstrings: help() and __name__ must not give the
answer away.
"""
from __future__ import annotations

import ctypes
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi, buffers
from ._core import _destroy_contexts

# =========================================================================== the runtime ledger
#: the calls that allocate a mem, and where the size argument sits
_MEM_MAKERS = ("create_mem", "create_mem2", "create_mem_from_fd", "create_mem_from_phys")


class Ledger:
    """A runtime wrapper: every call passes through; mems made, contexts alive, set_io_mem
    and set_input_shapes calls, and the bytes of the weight and internal mems set are kept
    for the checks."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        self.source = getattr(rt, "source", "")
        self.contexts: List[int] = []
        self.mems: List[Tuple[int, str, int, Any]] = []          # (ctx, how, size, mem)
        self.destroyed: List[Any] = []
        self.bound: Dict[int, List[Tuple[int, int, bytes]]] = {}  # ctx -> [(mem addr, size, attr name)]
        self.shapes: Dict[int, int] = {}                          # ctx -> set_input_shapes calls
        self.parts: Dict[Tuple[int, str], int] = {}               # (ctx, "weight" | "internal") -> bytes
        self.events: List[Tuple[str, int]] = []                   # ("mem" | "bind" | "shape" | "run", ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def init(self, *args: Any, **kwargs: Any) -> int:
        ctx = self._rt.init(*args, **kwargs)
        self.contexts.append(ctx)
        return ctx

    def dup_context(self, ctx: int) -> int:
        new = self._rt.dup_context(ctx)
        self.contexts.append(new)
        return new

    def destroy(self, ctx: int) -> int:
        ret = self._rt.destroy(ctx)
        if ctx in self.contexts:
            self.contexts.remove(ctx)
        return ret

    def _made(self, how: str, ctx: int, size: int, mem: Any) -> Any:
        self.mems.append((ctx, how, int(size), mem))
        self.events.append(("mem", ctx))
        return mem

    def create_mem(self, ctx: int, size: int) -> Any:
        return self._made("create_mem", ctx, size, self._rt.create_mem(ctx, size))

    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> Any:
        return self._made("create_mem2", ctx, size, self._rt.create_mem2(ctx, size, alloc_flags))

    def create_mem_from_fd(self, ctx: int, fd: int, virt: int, size: int, offset: int) -> Any:
        return self._made("create_mem_from_fd", ctx, size, self._rt.create_mem_from_fd(ctx, fd, virt, size, offset))

    def create_mem_from_phys(self, ctx: int, phys: int, virt: int, size: int) -> Any:
        return self._made("create_mem_from_phys", ctx, size, self._rt.create_mem_from_phys(ctx, phys, virt, size))

    def destroy_mem(self, ctx: int, mem: Any) -> int:
        ret = self._rt.destroy_mem(ctx, mem)
        self.destroyed.append(mem)
        return ret

    def set_io_mem(self, ctx: int, mem: Any, attr: abi.rknn_tensor_attr) -> int:
        ret = self._rt.set_io_mem(ctx, mem, attr)
        m = mem.contents if isinstance(mem, ctypes._Pointer) else mem
        self.bound.setdefault(ctx, []).append((int(m.virt_addr or 0), int(m.size), bytes(attr.name)))
        self.events.append(("bind", ctx))
        return ret

    def _part(self, ctx: int, part: str, mem: Any) -> None:
        """The bytes the mem set as ``part`` offers the tensor: size - offset (a view from
        rknn_create_mem_from_fd counts its size from the fd's start, ASSUMPTIONS A8)."""
        m = mem.contents if isinstance(mem, ctypes._Pointer) else mem
        self.parts[(ctx, part)] = int(m.size) - int(m.offset)

    def set_weight_mem(self, ctx: int, mem: Any) -> int:
        ret = self._rt.set_weight_mem(ctx, mem)
        self._part(ctx, "weight", mem)
        return ret

    def set_internal_mem(self, ctx: int, mem: Any) -> int:
        ret = self._rt.set_internal_mem(ctx, mem)
        self._part(ctx, "internal", mem)
        return ret

    def set_input_shapes(self, ctx: int, *args: Any, **kwargs: Any) -> int:
        ret = self._rt.set_input_shapes(ctx, *args, **kwargs)
        self.shapes[ctx] = self.shapes.get(ctx, 0) + 1
        self.events.append(("shape", ctx))
        return ret

    def run(self, ctx: int, *args: Any, **kwargs: Any) -> int:
        ret = self._rt.run(ctx, *args, **kwargs)
        self.events.append(("run", ctx))
        return ret

    def alive_mems(self, ctx: Optional[int] = None) -> List[Tuple[int, str, int, Any]]:
        gone = {id(m) for m in self.destroyed}
        return [row for row in self.mems if id(row[3]) not in gone and (ctx is None or row[0] == ctx)]

    def made_bytes(self, ctx: Optional[int] = None) -> int:
        """Bytes of the mems allocated with create_mem / create_mem2 (with ``ctx``, or with any
        context) and still alive; views of another mem's pages (from_fd, from_phys) are not
        allocations."""
        return sum(size for c, how, size, _ in self.alive_mems(ctx) if how in ("create_mem", "create_mem2"))

    def runtime_bytes(self, ctx: int) -> int:
        """What the runtime allocated for ``ctx`` itself: its DMA total less the caller's mems
        made with it, when this runtime counts those (measured by :func:`counts_user_mems`)."""
        total = dma_total(self._rt, ctx)
        return total - self.made_bytes(ctx) if counts_user_mems(self._rt) else total

    def cleanup(self) -> None:
        """Destroy what the student's code left: its mems, then its contexts."""
        for c, _, _, mem in reversed(self.alive_mems()):
            try:
                self._rt.destroy_mem(c, mem)
            except Exception:
                pass
            self.destroyed.append(mem)
        _destroy_contexts(self._rt, self.contexts)


class CheckIo:
    """The check's own zero-copy io for a context: an input mem the frame is written to as
    uint8 NHWC (the runtime converts it to the native layout) and one native output mem
    per output, each sized from the attr it is bound with (size_with_stride)."""

    def __init__(self, rt: Any, ctx: int) -> None:
        from ..experiment.variants import query_io
        self.rt, self.ctx = rt, ctx
        ins, outs = query_io(rt, ctx, native=True)
        self.in_attr = ins[0]
        self.in_attr.type = abi.RKNN_TENSOR_UINT8
        self.in_attr.fmt = abi.RKNN_TENSOR_NHWC
        self.out_attrs = outs
        self.in_mem = rt.create_mem(ctx, self.in_attr.size_with_stride)
        self.out_mems = [rt.create_mem(ctx, a.size_with_stride) for a in outs]
        rt.set_io_mem(ctx, self.in_mem, self.in_attr)
        for mem, a in zip(self.out_mems, outs):
            rt.set_io_mem(ctx, mem, a)

    @property
    def frame_shape(self) -> Tuple[int, ...]:
        d = buffers.attr_dims(self.in_attr)
        return d if self.in_attr.fmt == abi.RKNN_TENSOR_NHWC else (d[0], d[2], d[3], d[1])

    def run(self, frame: np.ndarray) -> List[bytes]:
        """Write the frame, run, read every output's bytes."""
        view = buffers.mem_view(self.in_mem)
        flat = frame.reshape(-1)
        view[:flat.size] = flat
        self.rt.mem_sync(self.ctx, self.in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
        self.rt.run(self.ctx)
        out = []
        for mem, a in zip(self.out_mems, self.out_attrs):
            self.rt.mem_sync(self.ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
            out.append(bytes(buffers.mem_view(mem)[:a.size_with_stride]))
        return out

    @property
    def nbytes(self) -> int:
        return int(self.in_attr.size_with_stride) + sum(int(a.size_with_stride) for a in self.out_attrs)

    def close(self) -> None:
        for mem in [self.in_mem] + self.out_mems:
            try:
                self.rt.destroy_mem(self.ctx, mem)
            except Exception:
                pass


def dma_total(rt: Any, ctx: int) -> int:
    return int(rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size)


_COUNTS: Dict[int, bool] = {}


def counts_user_mems(rt: Any) -> bool:
    """Whether this runtime's total_dma_allocated_size counts a mem made with rknn_create_mem
    on the context (the simulator does: assumption A9; a board is not documented), measured
    once per runtime with a 1 MiB mem on a small model's context."""
    key = id(rt)
    if key not in _COUNTS:
        from .. import models
        ctx = rt.init(str(models.model_path("digits_cnn", _soc(rt))))
        try:
            before = dma_total(rt, ctx)
            mem = rt.create_mem(ctx, 1 << 20)
            try:
                _COUNTS[key] = dma_total(rt, ctx) - before >= 1 << 20
            finally:
                rt.destroy_mem(ctx, mem)
        finally:
            rt.destroy(ctx)
    return _COUNTS[key]


def _soc(rt: Any) -> str:
    from ._core import _soc_of
    return _soc_of(rt)


# =========================================================================== exercise 2: access patterns
def _scan(passes: int) -> Callable[[np.ndarray], Any]:
    def cpu(buf: np.ndarray) -> Any:
        s = 0
        for _ in range(passes):
            s += int(buf.sum(dtype=np.uint64))
        return s
    return cpu


def _region(offset: int, length: int, passes: int) -> Callable[[np.ndarray], Any]:
    def cpu(buf: np.ndarray) -> Any:
        s = 0
        for _ in range(passes):
            s += int(buf[offset:offset + length].sum(dtype=np.uint64))
        return s
    return cpu


def _fill(value: int, nbytes: int, passes: int) -> Callable[[np.ndarray], Any]:
    def cpu(buf: np.ndarray) -> Any:
        for _ in range(passes):
            buf[:nbytes].fill(value)
        return value
    return cpu


def _calibrated_fill(nbytes: int, value: int) -> Callable[[np.ndarray], Any]:
    """A fill of an input buffer whose CPU time, on this machine, is about a third of the
    modeled sync of the buffer: so the cacheable buffer (CPU time + sync) costs about a
    fifth of the uncached one (CPU time x UNCACHED_SLOWDOWN), and "sync against CPU time
    alone" gets it wrong, whatever the CPU's speed.  A plain fill is not enough: where memset
    runs at ~100 GB/s its two costs are within the check's margin (not judged), and on a slow
    CPU sync and CPU time swap sides."""
    from ..profile import cpu as cpu_model
    sync_us = float(cpu_model.sync_cost(nbytes, [abi.RKNN_MEMORY_SYNC_TO_DEVICE])["modeled_us"].sum())
    probe = np.zeros(nbytes, dtype=np.uint8)
    one_us = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        probe.fill(value)
        one_us = min(one_us, (time.perf_counter() - t0) * 1e6)
    work = sync_us / (3.0 * max(one_us, 1e-3))      # in whole-buffer writes
    if work >= 1:
        return _fill(value, nbytes, int(round(work)))
    return _fill(value, max(4096, int(nbytes * work) // 4096 * 4096), 1)


def _gather(index: np.ndarray) -> Callable[[np.ndarray], Any]:
    def cpu(buf: np.ndarray) -> Any:
        return int(buf[index].sum(dtype=np.uint64))
    return cpu


def _topk(k: int) -> Callable[[np.ndarray], Any]:
    def cpu(buf: np.ndarray) -> Any:
        q = buf.view(np.int8)
        return np.argpartition(q, -k)[-k:]
    return cpu


class Pattern:
    """One buffer the CPU and the NPU share: its size, the syncs a cacheable buffer needs per
    frame, and the CPU's work on it per frame (``cpu(buf)``, ``buf`` a uint8 array of
    ``nbytes``)."""

    def __init__(self, nbytes: int, syncs: Tuple[int, ...], cpu: Callable[[np.ndarray], Any], label: str) -> None:
        self.nbytes, self.syncs, self.cpu = nbytes, syncs, cpu
        self._label = label

    def __repr__(self) -> str:
        names = "+".join(abi.MEM_SYNC_NAMES[s].replace("RKNN_MEMORY_SYNC_", "") for s in self.syncs)
        return L(f"<buffer of {self.nbytes:,} B, syncs per frame: {names}>",
                 f"<大小为 {self.nbytes:,} B 的缓冲区，每帧同步：{names}>")


_SYNC_KINDS = ((abi.RKNN_MEMORY_SYNC_TO_DEVICE,), (abi.RKNN_MEMORY_SYNC_FROM_DEVICE,),
               (abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL,),
               (abi.RKNN_MEMORY_SYNC_TO_DEVICE, abi.RKNN_MEMORY_SYNC_FROM_DEVICE))


def made_up_patterns(rng: np.random.Generator) -> List[Pattern]:
    """Ten patterns, new at every call: whole-buffer scans and fills of large buffers, scans
    and top-ks of small ones, a small region or a scattered gather in a large buffer.  The
    size of the buffer alone decides none of them: large buffers go either way.  (A small
    buffer whose uncached reads win would sit at the model's boundary: numpy's own cost per
    call is about the modeled sync of a few KiB.)"""
    out: List[Pattern] = []

    def add(nbytes: int, cpu: Callable[[np.ndarray], Any], label: str) -> None:
        # a buffer the CPU fills is an input: one sync to the device; the others vary
        syncs = ((abi.RKNN_MEMORY_SYNC_TO_DEVICE,) if label.startswith("fill")
                 else _SYNC_KINDS[int(rng.integers(len(_SYNC_KINDS)))])
        out.append(Pattern(int(nbytes), syncs, cpu, label))

    big = lambda: int(rng.integers(4, 17)) * 2 ** 20 + int(rng.integers(0, 64)) * 4096   # noqa: E731
    small = lambda: int(rng.integers(1, 9)) * 4096                                       # noqa: E731
    add(big(), _scan(int(rng.integers(1, 4))), "scan")
    n = big()
    add(n, _calibrated_fill(n, int(rng.integers(1, 255))), "fill")
    n = big()
    off = int(rng.integers(0, n // 2))
    add(n, _region(off, int(rng.integers(1, 9)) * 256, 1), "region")
    n = big()
    add(n, _gather(np.sort(rng.integers(0, n, size=int(rng.integers(8, 64))))), "gather")
    add(small(), _scan(int(rng.integers(40, 120))), "scan-many")
    add(small(), _topk(int(rng.integers(3, 9))), "topk-small")
    add(int(rng.integers(2, 9)) * 1000, _topk(5), "topk")
    add(big(), _region(int(rng.integers(0, 2 ** 20)), int(rng.integers(1, 5)) * 1024, 2), "region-2")
    add(big(), _scan(1), "scan-once")
    add(big(), _gather(np.sort(rng.integers(0, 2 ** 20, size=int(rng.integers(100, 400))))), "gather-2")
    order = rng.permutation(len(out))
    return [out[int(i)] for i in order]


def cached_us(pattern: Pattern, repeats: int = 9) -> float:
    """The CPU's time for one frame of ``pattern`` on a cached buffer, measured here (median, us)."""
    buf = np.zeros(pattern.nbytes, dtype=np.uint8)            # pages touched: no first-touch faults
    pattern.cpu(buf)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pattern.cpu(buf)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def costs_us(pattern: Pattern, cached: float) -> Dict[int, float]:
    """{alloc flag: modeled cost per frame in us}: cacheable = the measured CPU time + the
    modeled rknn_mem_sync of every sync the frame needs; non-cacheable = the CPU time x
    profile.cpu.UNCACHED_SLOWDOWN, no sync."""
    from ..profile import cpu
    syncs = float(cpu.sync_cost(pattern.nbytes, list(pattern.syncs))["modeled_us"].sum())
    return {abi.RKNN_FLAG_MEMORY_CACHEABLE: cached + syncs,
            abi.RKNN_FLAG_MEMORY_NON_CACHEABLE: cached * cpu.UNCACHED_SLOWDOWN}


# =========================================================================== exercise 3: SRAM
#: one bit of the SRAM bitmap (/sys/kernel/debug/rknpu/mm) and the DTS alignment
SRAM_PAGE = 4096
#: RK3588: 956 KiB of the SoC's 1 MiB SRAM can be given to the NPU (RK3588_NPU_SRAM_usage.md)
RK3588_SRAM = 978_944


def sram_part(total_internal: int, free_sram: int) -> int:
    """Bytes at the start of the internal buffer that live in SRAM with ENABLE_SRAM: as much as
    the free SRAM allows, in whole 4 KiB pages, never more pages than the buffer needs."""
    pages_free = free_sram // SRAM_PAGE
    pages_needed = -(-total_internal // SRAM_PAGE)
    return min(pages_free, pages_needed) * SRAM_PAGE


def is_io_row(row: Dict[str, Any]) -> bool:
    """The model's input (no producer) or output (an OutputOperator's tensor)."""
    return int(row["producer_layer_id"]) == 0 or row["user"] == "OutputOperator"


def sram_hits(rows: Sequence[Dict[str, Any]], total_internal: int, free_sram: int) -> List[int]:
    """The SramHit of every row: the bytes of [start, end) inside the SRAM part; the model's
    input and output rows get none (the runtime's log shows "\\" for them)."""
    part = sram_part(total_internal, free_sram)
    io_rows = [is_io_row(r) for r in rows]
    return [0 if io else max(0, min(int(r["end"]), part) - int(r["start"])) for r, io in zip(rows, io_rows)]


def made_up_plan(rng: np.random.Generator, fits: bool = False) -> Tuple[List[Dict[str, Any]], int, int]:
    """A memory plan no model has (rows as in a report's feature_tensors, the input first and
    the output last) and a free SRAM size; the plan's tensors are reused at low offsets as a
    compiler does, and sizes are not multiples of 4 KiB.  ``fits``: the whole plan fits in the
    free SRAM, its size is not whole pages and an internal tensor ends at its last byte (a
    rule that rounds the plan's size down to pages loses that tensor's tail)."""
    while fits:
        rows, total, _ = made_up_plan(rng)
        last = max(rows, key=lambda r: r["end"])
        pages = -(-total // SRAM_PAGE)
        if total % SRAM_PAGE and not is_io_row(last) and pages < RK3588_SRAM // SRAM_PAGE:
            return rows, total, int(rng.integers(pages, RK3588_SRAM // SRAM_PAGE + 1)) * SRAM_PAGE
    n = int(rng.integers(8, 20))
    rows: List[Dict[str, Any]] = []
    c, h = int(rng.choice([16, 32, 48])), int(rng.choice([56, 80, 112, 160]))
    slots = [0, 0]
    in_size = 3 * h * h
    rows.append({"layer_id": 1, "user": "ConvRelu", "tensor": "input", "orig_shape": [1, 3, h, h],
                 "start": 0, "end": in_size, "size": in_size, "producer_layer_id": 0})
    prev_end = in_size
    for i in range(n):
        if rng.random() < 0.35 and h > 7:
            h = max(7, h // 2)
            c = min(c * 2, 512)
        size = c * h * h + int(rng.integers(0, 8)) * 16 * h
        start = prev_end if i % 2 == 0 else slots[0]
        if i % 3 == 2:
            start = 0
        end = start + size
        rows.append({"layer_id": i + 2, "user": str(rng.choice(["ConvRelu", "Conv", "Add", "ConvClip"])),
                     "tensor": f"t{i}", "orig_shape": [1, c, h, h], "start": start, "end": end, "size": size,
                     "producer_layer_id": i + 1})
        prev_end, slots[0] = end, start
    rows.append({"layer_id": n + 2, "user": "OutputOperator", "tensor": "output", "orig_shape": [1, 10],
                 "start": int(rng.integers(0, 4)) * 64, "end": 0, "size": 40, "producer_layer_id": n + 1})
    rows[-1]["end"] = rows[-1]["start"] + 40
    total = max(r["end"] for r in rows)
    # free SRAM: all of it, or what another context left (whole pages), sometimes more than needed
    free = int(rng.choice([RK3588_SRAM, RK3588_SRAM - int(rng.integers(1, 200)) * SRAM_PAGE,
                           int(rng.integers(8, 120)) * SRAM_PAGE]))
    if total < free and rng.random() < 0.5:
        free = max(SRAM_PAGE, (total // 2 // SRAM_PAGE) * SRAM_PAGE)
    return rows, total, free
