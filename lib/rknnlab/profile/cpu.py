"""The CPU's share of a frame, one cost at a time: layout, dequantization, copies,
cache maintenance, uncached reads.

Three are MEASURED on this machine's CPU, each as a median and interquartile
range over repeats (numpy and ctypes doing the same work the runtime does):

- :func:`layout_cost`: NHWC -> NC1HWC2 (the NPU's layout, channels in blocks
  of C2) and back to NCHW, next to a plain copy of the same bytes;
- :func:`dequant_cost`: int8 -> float32, ``(q - zp) * scale``, what
  want_float = 1 asks outputs_get to do, next to copying the int8 bytes;
- :func:`copy_cost`: the same bytes copied in one piece or in many
  chunks (row by row), so the per-piece cost and the per-byte cost separate.

Two are MODELED, because this machine cannot show them (its memory is
coherent and cached; the simulator's rknn_mem_sync costs nothing, assumption
A11, and moves bytes only for a context made with a DISABLE_FLUSH flag, A60),
and say so in the ``kind`` column and in ``attrs["source"]``:

- :func:`sync_cost`: rknn_mem_sync, i.e. cache clean/invalidate over a
  buffer (zero-copy only: a frame through rknn_inputs_set and
  rknn_outputs_get does not call it).  No official figure exists.  Model: a fixed cost per call plus a
  cost per 64-byte cache line (the line size of RK3588's Cortex-A76 and
  A55); both constants are assumptions, and BIDIRECTIONAL is modeled as
  both passes.  Board check: time rknn_mem_sync(TO_DEVICE / FROM_DEVICE /
  BIDIRECTIONAL) on create_mem buffers from 64 KiB to 16 MiB, 100 times
  each, and fit fixed + per-byte.
- :func:`uncached_read`: the CPU reading a NON_CACHEABLE buffer.  Model: the
  cached read measured here, times 20: airockchip/librga#69 reports
  rknn_inputs_set taking 15 ms instead of 0.75 ms when its input came from
  an uncached dma32 heap (the maintainer: uncached buffers are slow for the
  CPU).  With a board runtime (``rt=``) both are measured instead, on
  buffers of a context opened for the measurement (never context 0).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..rknn import abi
from ._common import measured_here, spread, time_repeats

#: cache line of the Cortex-A76 and Cortex-A55 (Arm's technical reference manuals)
CACHE_LINE_BYTES = 64
#: ASSUMPTION: one rknn_mem_sync call's fixed cost (a DMA-buf sync ioctl and its bookkeeping)
SYNC_FIXED_US = 10.0
#: ASSUMPTION: clean or invalidate of one cache line by address, walking a buffer larger than the caches
SYNC_NS_PER_LINE = 8.0
#: librga#69: rknn_inputs_set from an uncached dma32 heap 15 ms, from a cached one 0.75 ms
UNCACHED_SLOWDOWN = 15.0 / 0.75
UNCACHED_MODEL = f"MODELED as cached x {UNCACHED_SLOWDOWN:g} (airockchip/librga#69: inputs_set 0.75 -> 15 ms)"
MODELED = "MODELED"
MEASURED = "measured"
#: how sync_cost models rknn_mem_sync, with its two assumed constants (the label of every modeled sync)
SYNC_MODEL = (f"(zero-copy only) MODELED: {SYNC_FIXED_US:g} us per call + {SYNC_NS_PER_LINE:g} ns per "
              f"{CACHE_LINE_BYTES}-byte cache line, both assumptions")

#: the largest YOLOv5s 640 output head as NHWC: 80 x 80 cells x 255 channels
YOLO_HEAD_NHWC = (1, 80, 80, 255)
#: one 640 x 640 RGB frame, the input rknn_inputs_set copies for yolov5s
FRAME_BYTES = 640 * 640 * 3


def _rows_frame(rows: List[Dict[str, Any]], source: str) -> Any:
    import pandas as pd
    table = pd.DataFrame(rows)
    table.attrs["source"] = source
    return table


def _measured(what: str, fn, repeats: int, **extra: Any) -> Dict[str, Any]:
    row = {"what": what, **extra, **spread(time_repeats(fn, repeats)), "kind": MEASURED}
    return row


def to_nc1hwc2(nhwc: np.ndarray, c2: int) -> np.ndarray:
    """NHWC -> NC1HWC2: channels padded with zeros to a multiple of ``c2`` and split into
    C1 blocks of C2, each block stored [H][W][C2] (C2 varies fastest)."""
    n, h, w, c = nhwc.shape
    c1 = -(-c // c2)
    padded = np.zeros((n, h, w, c1 * c2), nhwc.dtype)
    padded[..., :c] = nhwc
    return np.ascontiguousarray(padded.reshape(n, h, w, c1, c2).transpose(0, 3, 1, 2, 4))


def nc1hwc2_to_nchw(native: np.ndarray, channels: int) -> np.ndarray:
    """NC1HWC2 -> NCHW, the padding channels dropped (what outputs_get does for a native output)."""
    n, c1, h, w, c2 = native.shape
    return np.ascontiguousarray(native.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c2, h, w)[:, :channels])


def layout_cost(shape: Sequence[int] = YOLO_HEAD_NHWC, c2: int = 16, repeats: int = 15) -> Any:
    """Time the layout conversions of one int8 tensor of NHWC ``shape`` on this CPU.

    Rows: "copy (no conversion)", "NHWC -> NC1HWC2", "NC1HWC2 -> NCHW", each with
    bytes_in, bytes_out, median_us, q1_us, q3_us, repeats, kind ("measured"),
    mb_per_s (bytes_in over the median).  C2 depends on the SoC and dtype (16 for
    int8 on RK3588): read it from the native attr's dims[4].  Default: the largest
    YOLOv5s 640 output head; ~0.1 s."""
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(f"shape: NHWC, four positive sizes, not {tuple(shape)}")
    if c2 < 1:
        raise ValueError(f"c2 must be positive, not {c2}")
    rng = np.random.default_rng(0)
    nhwc = rng.integers(-128, 128, tuple(shape), dtype=np.int8)
    native = to_nc1hwc2(nhwc, c2)
    channels = shape[3]
    rows = [
        _measured("copy (no conversion)", lambda: nhwc.copy(), repeats, bytes_in=nhwc.nbytes,
                  bytes_out=nhwc.nbytes),
        _measured("NHWC -> NC1HWC2", lambda: to_nc1hwc2(nhwc, c2), repeats, bytes_in=nhwc.nbytes,
                  bytes_out=native.nbytes),
        _measured("NC1HWC2 -> NCHW", lambda: nc1hwc2_to_nchw(native, channels), repeats,
                  bytes_in=native.nbytes, bytes_out=nhwc.nbytes),
    ]
    for r in rows:
        r["mb_per_s"] = r["bytes_in"] / r["median_us"]
    table = _rows_frame(rows, measured_here())
    table.attrs.update(shape=tuple(shape), c2=c2)
    return table


def dequantize(q: np.ndarray, zp: int, scale: float) -> np.ndarray:
    """int8 -> float32: (q - zp) * scale, the affine dequantization of RKNN's int8 tensors."""
    return (q.astype(np.float32) - np.float32(zp)) * np.float32(scale)


def dequant_cost(n: int = math.prod(YOLO_HEAD_NHWC), zp: int = -9, scale: float = 0.0873,
                 repeats: int = 15) -> Any:
    """Time dequantizing ``n`` int8 values to float32 on this CPU, next to copying them.

    Rows: "copy int8 (want_float = 0)" and "dequantize to float32 (want_float = 1)",
    with bytes_in, bytes_out (4x for float32), median_us, q1_us, q3_us, repeats,
    kind.  Default: the largest YOLOv5s 640 head (its own zp and scale, rounded);
    ~0.1 s.  The float32 result is also 4x the bytes every later step reads."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    q = np.random.default_rng(0).integers(-128, 128, n, dtype=np.int8)
    rows = [
        _measured("copy int8 (want_float = 0)", lambda: q.copy(), repeats, bytes_in=q.nbytes,
                  bytes_out=q.nbytes),
        _measured("dequantize to float32 (want_float = 1)", lambda: dequantize(q, zp, scale), repeats,
                  bytes_in=q.nbytes, bytes_out=4 * q.nbytes),
    ]
    table = _rows_frame(rows, measured_here())
    table.attrs.update(n=n, zp=zp, scale=scale)
    return table


def _strided_copy(total_bytes: int, pieces: int):
    """A function copying ``total_bytes`` as ``pieces`` separate chunks: the source is
    contiguous, the destination's chunks are a cache line apart, so numpy's C loop copies
    chunk by chunk (as a C program copies an image row by row into a buffer with a row
    stride); with one piece it is one memcpy.  Returns (copy, source, destination view)."""
    piece = total_bytes // pieces
    src = np.random.default_rng(0).integers(0, 256, piece * pieces, dtype=np.uint8).reshape(pieces, piece)
    gap = 0 if pieces == 1 else _CHUNK_GAP
    backing = np.empty(pieces * (piece + gap), np.uint8)
    dst = np.lib.stride_tricks.as_strided(backing, (pieces, piece), (piece + gap, 1))
    return (lambda: np.copyto(dst, src)), src, dst


#: bytes left between the chunks of a many-piece copy, so that they stay separate copies
_CHUNK_GAP = 64


def copy_cost(total_bytes: int = FRAME_BYTES, pieces: Union[int, Sequence[int]] = (1, 64, 1024, 16384),
              repeats: int = 9) -> Any:
    """Copy ``total_bytes`` in one piece and in many smaller ones, on this CPU.

    One row per pieces count: piece_bytes, bytes (piece_bytes x pieces: the
    bytes really copied), median_us, q1_us, q3_us, repeats, gb_per_s (bytes
    over the median), per_piece_ns (median over pieces), kind.  The chunks
    are copied by numpy's C loop, not by calls from Python (a Python call
    costs far more than a C memcpy call and would swamp what is measured).
    The time of one large copy grows with its bytes, with no fixed start-up
    cost to speak of: a CPU copy, not a DMA transfer.  Default: one 640x640
    RGB frame; ~0.1 s."""
    counts = [pieces] if isinstance(pieces, int) else list(pieces)
    if total_bytes < 1 or not counts or min(counts) < 1 or max(counts) > total_bytes:
        raise ValueError(f"need total_bytes >= 1 and 1 <= pieces <= total_bytes "
                         f"(got {total_bytes} bytes, pieces {counts})")
    rows = []
    for count in counts:
        copy, src, dst = _strided_copy(total_bytes, count)
        timing = spread(time_repeats(copy, repeats))
        if not np.array_equal(src, dst):  # a copy that did not copy measures nothing
            raise RuntimeError("copy_cost: the destination does not match the source")
        copied = int(src.size)
        rows.append({"pieces": count, "piece_bytes": copied // count, "bytes": copied, **timing,
                     "gb_per_s": copied / timing["median_us"] / 1e3,
                     "per_piece_ns": timing["median_us"] * 1e3 / count, "kind": MEASURED})
    table = _rows_frame(rows, measured_here())
    table.attrs["total_bytes"] = total_bytes
    return table


def _sync_us(nbytes: int, mode: int) -> float:
    passes = 2 if mode == abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL else 1
    lines = -(-nbytes // CACHE_LINE_BYTES)
    return SYNC_FIXED_US + passes * lines * SYNC_NS_PER_LINE / 1e3


def sync_cost(nbytes: Union[int, Sequence[int]] = (64 * 1024, FRAME_BYTES, 16 * 2 ** 20),
              modes: Sequence[int] = (abi.RKNN_MEMORY_SYNC_TO_DEVICE, abi.RKNN_MEMORY_SYNC_FROM_DEVICE,
                                      abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL)) -> Any:
    """MODELED time of rknn_mem_sync over buffers of ``nbytes``, per mode (no
    measurement: see the module docstring for the model, its two assumed
    constants and the board check).  Rows: nbytes, mode (its name), modeled_us,
    kind = "MODELED".  Instant."""
    sizes = [nbytes] if isinstance(nbytes, int) else list(nbytes)
    if not sizes or min(sizes) < 1:
        raise ValueError(f"nbytes must be positive, not {sizes}")
    for mode in modes:
        if mode not in abi.MEM_SYNC_NAMES:
            raise ValueError(f"mode {mode}: RKNN_MEMORY_SYNC_TO_DEVICE (1), FROM_DEVICE (2) or "
                             "BIDIRECTIONAL (3)")
    rows = [{"nbytes": n, "mode": abi.MEM_SYNC_NAMES[m], "modeled_us": _sync_us(n, m), "kind": MODELED}
            for n in sizes for m in modes]
    table = _rows_frame(rows, f"rknn_mem_sync {SYNC_MODEL}")
    table.attrs.update(fixed_us=SYNC_FIXED_US, ns_per_line=SYNC_NS_PER_LINE)
    return table


#: the course model a board measurement opens its context with: any model serves (the buffers
#: are not bound to it); this one is small and compiled for every course SoC
MEM_CONTEXT_MODEL = "digits_cnn"
UNMEASURED = "unmeasured"


def _mem_read_times(rt: Any, ctx: int, nbytes: int, flags: int, repeats: int) -> np.ndarray:
    """Seconds per copy out of a create_mem2 buffer of context ``ctx`` with ``flags``
    (a board's real memory), released with the same context."""
    from ..rknn.buffers import mem_view
    mem = rt.create_mem2(ctx, nbytes, flags)
    try:
        view = mem_view(mem, np.uint8, nbytes)
        out = np.empty(nbytes, np.uint8)
        return time_repeats(lambda: np.copyto(out, view), repeats)
    finally:
        rt.destroy_mem(ctx, mem)


def _unmeasured(what: str, nbytes: int, reason: str) -> Dict[str, Any]:
    return {"what": what, "nbytes": nbytes, "median_us": math.nan, "q1_us": math.nan, "q3_us": math.nan,
            "repeats": 0, "kind": UNMEASURED, "reason": reason}


def _board_reads(rt: Any, nbytes: int, repeats: int) -> List[Dict[str, Any]]:
    """Both rows measured on create_mem2 buffers of a real context (a course model's,
    destroyed afterwards); a row the board cannot measure says why instead."""
    from .. import models
    from ..rknn.errors import RknnError
    kinds = (("cached", abi.RKNN_FLAG_MEMORY_CACHEABLE), ("uncached", abi.RKNN_FLAG_MEMORY_NON_CACHEABLE))
    try:
        ctx = rt.init(str(models.model_path(MEM_CONTEXT_MODEL, rt.soc)))
    except (RknnError, models.ReportError, OSError) as exc:
        reason = f"no context to allocate with ({MEM_CONTEXT_MODEL} on {rt.soc}): {exc}"
        return [_unmeasured(what, nbytes, reason) for what, _ in kinds]
    rows = []
    try:
        for what, flags in kinds:
            try:
                rows.append({"what": what, "nbytes": nbytes,
                             **spread(_mem_read_times(rt, ctx, nbytes, flags, repeats)),
                             "kind": MEASURED, "reason": ""})
            except RknnError as exc:
                rows.append(_unmeasured(what, nbytes, f"create_mem2 failed: {exc}"))
    finally:
        rt.destroy(ctx)
    return rows


def uncached_read(nbytes: int = FRAME_BYTES, repeats: int = 15, rt: Optional[Any] = None) -> Any:
    """Reading ``nbytes`` with the CPU from cached memory (measured) and from uncached
    memory (MODELED: the cached time x 20, from librga#69), e.g. an input frame that
    rknn_inputs_set reads.

    Rows: "cached" and "uncached", with nbytes, median_us, q1_us, q3_us (the
    uncached row: the cached ones x 20), repeats, kind ("measured" / "MODELED"),
    reason.  With ``rt`` a board runtime (backend "native"), both rows are
    measured on create_mem2 buffers (CACHEABLE / NON_CACHEABLE) of a context the
    function opens for the measurement (on the course model digits_cnn) and
    destroys after it; a row the board cannot measure has kind "unmeasured",
    NaN times and the reason.  ~0.05 s."""
    if nbytes < 1:
        raise ValueError(f"nbytes must be at least 1, not {nbytes}")
    if rt is not None and getattr(rt, "backend", "") == "native":
        return _rows_frame(_board_reads(rt, nbytes, repeats),
                           f"{rt.source}: create_mem2 buffers read by the CPU (measured)")
    src = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    out = np.empty_like(src)
    cached = spread(time_repeats(lambda: np.copyto(out, src), repeats))
    uncached = {k: v * UNCACHED_SLOWDOWN if k.endswith("_us") else v for k, v in cached.items()}
    rows = [{"what": "cached", "nbytes": nbytes, **cached, "kind": MEASURED, "reason": ""},
            {"what": "uncached", "nbytes": nbytes, **uncached, "kind": MODELED,
             "reason": "this machine has no uncached buffer to read"}]
    return _rows_frame(rows, f"cached: {measured_here()}; uncached: {UNCACHED_MODEL}")


def cpu_costs(model: str = "yolov5s", soc: str = "rk3588", repeats: int = 9) -> Any:
    """The CPU-side costs of one frame of ``model`` in one table, sized from its compiler
    report: the input copied in one piece and row by row (measured), its outputs
    converted from NC1HWC2 to NCHW and dequantized to float32 (measured), cache
    maintenance of the input and outputs (MODELED) and the input read from uncached
    memory (MODELED).

    Rows: what, bytes, median_us, q1_us, q3_us, kind ("measured" / "MODELED").
    ``attrs["source"]`` names this machine.  ~0.3 s for yolov5s."""
    from .. import models
    report = models.load_report(model, soc)
    plain_in = report.attrs("inputs")[0]
    in_bytes = int(plain_in["n_elems"])
    rows_of_input = int(plain_in["dims"][1]) if plain_in["fmt"].endswith("NHWC") else int(plain_in["dims"][2])
    rows: List[Dict[str, Any]] = []
    copies = copy_cost(in_bytes, (1, rows_of_input), repeats)
    for _, r in copies.iterrows():
        label = ("input copied in one piece" if r["pieces"] == 1
                 else f"input copied row by row ({r['pieces']} rows)")
        rows.append({"what": label, "bytes": int(r["bytes"]), "median_us": r["median_us"],
                     "q1_us": r["q1_us"], "q3_us": r["q3_us"], "kind": MEASURED})
    natives = [(a, p) for a, p in zip(report.attrs("outputs", "native"), report.attrs("outputs"))
               if a["fmt"].endswith("NC1HWC2")]
    rng = np.random.default_rng(0)
    if natives:
        arrays = [(rng.integers(-128, 128, tuple(a["dims"][:5]), dtype=np.int8), int(p["dims"][1]))
                  for a, p in natives]
        t = _us(time_repeats(lambda: [nc1hwc2_to_nchw(x, c) for x, c in arrays], repeats))
        rows.append({"what": "outputs NC1HWC2 -> NCHW", "bytes": sum(x.nbytes for x, _ in arrays), **t,
                     "kind": MEASURED})
    plain_out = report.attrs("outputs")
    out_elems = sum(int(p["n_elems"]) for p in plain_out)
    q = rng.integers(-128, 128, out_elems, dtype=np.int8)
    zp, scale = int(plain_out[0]["zp"]), float(plain_out[0]["scale"])   # the first output's own
    t = _us(time_repeats(lambda: dequantize(q, zp, scale), repeats))
    rows.append({"what": "outputs dequantized to float32 (want_float = 1)", "bytes": out_elems, **t,
                 "kind": MEASURED})
    out_bytes = sum(int(a["size_with_stride"]) for a in report.attrs("outputs", "native"))
    for what, n, mode in (("rknn_mem_sync TO_DEVICE, input (zero-copy only)", in_bytes,
                           abi.RKNN_MEMORY_SYNC_TO_DEVICE),
                          ("rknn_mem_sync FROM_DEVICE, outputs (zero-copy only)", out_bytes,
                           abi.RKNN_MEMORY_SYNC_FROM_DEVICE)):
        us = _sync_us(n, mode)
        rows.append({"what": what, "bytes": n, "median_us": us, "q1_us": math.nan, "q3_us": math.nan,
                     "kind": MODELED})
    unc = uncached_read(in_bytes, repeats)
    u = unc[unc["what"] == "uncached"].iloc[0]
    rows.append({"what": "input read from uncached memory", "bytes": in_bytes, "median_us": u["median_us"],
                 "q1_us": u["q1_us"], "q3_us": u["q3_us"], "kind": MODELED})
    table = _rows_frame(rows, f"{measured_here()}, {model} {soc.upper()} sizes; MODELED rows, not measured: "
                              f"rknn_mem_sync {SYNC_MODEL}; uncached read {UNCACHED_MODEL}")
    table.attrs.update(repeats=repeats, sync_fixed_us=SYNC_FIXED_US, sync_ns_per_line=SYNC_NS_PER_LINE,
                       uncached_slowdown=UNCACHED_SLOWDOWN)
    return table


def _us(seconds: np.ndarray) -> Dict[str, float]:
    """median_us, q1_us, q3_us of repeated timings (the columns of a cpu_costs row)."""
    t = spread(seconds)
    return {k: t[k] for k in ("median_us", "q1_us", "q3_us")}
