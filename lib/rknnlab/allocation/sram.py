"""RK3588's NPU SRAM: what a model's plan puts there and what it saves, read from the
runtime's RKNN_LOG_LEVEL=3 table (board or simulator), and how much of it is in use
(/sys/kernel/debug/rknpu/mm).

Facts used (Rockchip's RK3588 NPU SRAM note and user guide §5.7): 956 KiB (978,944 B) of
the 1 MB SRAM can be given to the NPU, in 4 KiB pages; RKNN_FLAG_ENABLE_SRAM (driver >=
0.9.2, runtime >= 1.6.0) puts intermediate tensors there "as much as possible"; the log's
SramHit column is the bytes of a tensor in SRAM, which "generally saves the read+write
bandwidth of that size", and "Predict SRAM Hit RW Amount" is the whole network's (in the
note's own example it is twice the sum of the SramHit column).
"""
from __future__ import annotations

import re
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

from ..rknn import abi
from ._common import MEASURED, MODELED, PAGE, frame, model_file, runtime

#: the NPU's share of RK3588's SRAM at most (the note's DTS example: 0xef000 bytes)
RK3588_SRAM_BYTES = 978_944

_ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\([\d,\s]*\))\s+(\([\d,\s]*\))\s*\|\s*"
                  r"(0x[0-9a-fA-F]+)\s*\*?\s*(0x[0-9a-fA-F]+)\s+(0x[0-9a-fA-F]+)\s*\|\s*(\S+)")
_TOTAL_SRAM = re.compile(r"Total allocated Internal SRAM Size:\s*(\d+)")
_FOOTER = {"total_weight_bytes": "Total Weight Memory Size", "total_internal_bytes": "Total Internal Memory Size",
           "predict_internal_rw_bytes": "Predict Internal Memory RW Amount",
           "predict_weight_rw_bytes": "Predict Weight Memory RW Amount",
           "predict_sram_hit_rw_bytes": "Predict SRAM Hit RW Amount"}
_COLUMNS = ("id", "user", "tensor", "dtype", "orig_shape", "native_shape", "start", "end", "size_bytes",
            "sram_hit_bytes", "in_sram")


def _shape(text: str) -> tuple:
    return tuple(int(x) for x in text.strip("()").split(",") if x.strip())


def sram_hits(log_text: str, source: str = "RKNN_LOG_LEVEL=3 log") -> Any:
    """The SRAM table of a runtime log (RKNN_LOG_LEVEL=3, a context made with
    RKNN_FLAG_ENABLE_SRAM), from a board or from SimRuntime.sram_log.

    Rows, one per line of the table: id, user (the layer's op), tensor, dtype,
    orig_shape, native_shape, start, end, size_bytes (addresses as printed),
    sram_hit_bytes (NaN where the log prints "\\": a tensor outside the internal
    memory, the model's input or output), in_sram (hit > 0).  ``attrs``: sram_bytes
    ("Total allocated Internal SRAM Size"), hit_bytes (the SramHit column's sum), and
    the footer's numbers where printed: total_weight_bytes, total_internal_bytes,
    predict_internal_rw_bytes, predict_weight_rw_bytes, predict_sram_hit_rw_bytes.
    A text without the table raises ValueError saying how to get one."""
    rows: List[Dict[str, Any]] = []
    for line in log_text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        hit_text = m.group(10)
        hit = int(hit_text, 16) if hit_text.lower().startswith("0x") else None
        rows.append({"id": int(m.group(1)), "user": m.group(2), "tensor": m.group(3), "dtype": m.group(4),
                     "orig_shape": _shape(m.group(5)), "native_shape": _shape(m.group(6)),
                     "start": int(m.group(7), 16), "end": int(m.group(8), 16), "size_bytes": int(m.group(9), 16),
                     "sram_hit_bytes": hit, "in_sram": bool(hit)})
    total = _TOTAL_SRAM.search(log_text)
    if not rows and total is None:
        raise ValueError("no SRAM table in this text: it comes from rknn_init with RKNN_FLAG_ENABLE_SRAM while "
                         "RKNN_LOG_LEVEL=3 is set (on a board the runtime prints it to the terminal)")
    table = frame(rows, source, _COLUMNS)
    attrs: Dict[str, Any] = {"sram_bytes": int(total.group(1)) if total else 0,
                             "hit_bytes": sum(r["sram_hit_bytes"] or 0 for r in rows)}
    for key, label in _FOOTER.items():
        found = re.search(re.escape(label) + r":\s*(\d+)", log_text)
        attrs[key] = int(found.group(1)) if found else None
    table.attrs.update(attrs)
    return table


def _board_log(rt: Any, path: str) -> str:
    """The runtime's log of an ENABLE_SRAM init on a board, from a child process run with
    RKNN_LOG_LEVEL=3 (the runtime reads it at load time and prints to the terminal)."""
    import os
    code = ("import sys, rknnlab; from rknnlab.rknn import abi; rt = rknnlab.open_runtime('native'); "
            "ctx = rt.init(sys.argv[1], flag=abi.RKNN_FLAG_ENABLE_SRAM); rt.destroy(ctx)")
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RKNN_LOG_LEVEL": "3"})
    if done.returncode != 0:
        raise RuntimeError(f"rknn_init with RKNN_FLAG_ENABLE_SRAM failed on this board (exit {done.returncode}): "
                           f"{done.stderr.strip()[-400:]}")
    return done.stdout + "\n" + done.stderr


def sram_log(model: str = "mobilenet_v2", rt: Optional[Any] = None) -> str:
    """The SRAM table text of ``model`` inited with RKNN_FLAG_ENABLE_SRAM on ``rt``
    (default: the simulated RK3588): SimRuntime.sram_log on the simulator, the
    RKNN_LOG_LEVEL=3 output of a child process on a board."""
    rt = runtime(rt)
    path = model_file(rt, model)
    if rt.backend == "native":
        return _board_log(rt, path)
    if not hasattr(rt, "sram_log"):
        raise NotImplementedError("this simulator does not model the NPU SRAM (no SimRuntime.sram_log)")
    ctx = rt.init(path, flag=abi.RKNN_FLAG_ENABLE_SRAM)
    try:
        return rt.sram_log(ctx)
    finally:
        rt.destroy(ctx)


def sram_fit(model: str = "mobilenet_v2", budget: Optional[int] = None, rt: Optional[Any] = None) -> Any:
    """Which of ``model``'s intermediate tensors land in SRAM, and the DDR traffic that saves.

    ``budget`` None: MEASURED on ``rt`` (default: the simulated RK3588): the runtime's
    own SRAM table after rknn_init with RKNN_FLAG_ENABLE_SRAM (see :func:`sram_hits`
    for the columns; SRAM other contexts hold is not free for this one).
    ``budget`` in bytes: MODELED from the compiler report of the runtime's SoC, with
    the simulator's placement rule: the first ``budget`` bytes (whole 4 KiB pages) of
    the compiler's internal plan sit in SRAM, and a tensor's hit is its overlap with
    them (a listed simulator assumption, not a documented rule: check on a board with
    RKNN_LOG_LEVEL=3); the model's inputs and outputs live in io buffers of their own
    (sram_hit_bytes NaN, as the runtime's "\\").  Rows, one per row of the compiler's feature table: id,
    user, tensor, dtype, orig_shape, native_shape, start, end (offsets in the internal
    plan), size_bytes, sram_hit_bytes, in_sram.

    ``attrs`` in both: sram_bytes, hit_bytes, predict_sram_hit_rw_bytes (twice
    hit_bytes when modeled: each hit byte is written once and read once),
    total_internal_bytes, kind ("measured" / "MODELED").  Instant."""
    rt = runtime(rt)
    if budget is None:
        table = sram_hits(sram_log(model, rt),
                          f"{rt.source}: {model}, the runtime's SRAM table at rknn_init with RKNN_FLAG_ENABLE_SRAM")
        table.attrs["kind"] = MEASURED
        return table
    if budget < 0:
        raise ValueError(f"budget={budget}: bytes of SRAM, 0 or more")
    from .. import models
    soc = models.SOC_MODELS.get(rt.soc, rt.soc)
    report = models.load_report(model, soc)
    sram = budget // PAGE * PAGE
    # the model's inputs and outputs live in io buffers of their own: the runtime's table prints "\"
    io_names = {a["name"] for kind in ("inputs", "outputs") for a in report.attrs(kind)}
    rows = []
    for r in report.data["feature_tensors"]:
        hit = None if r["tensor"] in io_names else max(0, min(r["end"], sram) - max(r["start"], 0))
        rows.append({"id": r["layer_id"], "user": r["user"], "tensor": r["tensor"], "dtype": r["dtype"],
                     "orig_shape": tuple(r["orig_shape"]), "native_shape": tuple(r["native_shape"]),
                     "start": r["start"], "end": r["end"], "size_bytes": r["size"], "sram_hit_bytes": hit,
                     "in_sram": bool(hit)})
    hits = sum(r["sram_hit_bytes"] or 0 for r in rows)
    table = frame(rows, f"MODELED: {model} on {soc.upper()} compiler report, the first {sram:,} B (whole 4 KiB "
                        "pages) of the internal plan in SRAM (the simulator's placement rule)", _COLUMNS)
    table.attrs.update(sram_bytes=min(sram, report.total_internal_size), hit_bytes=hits,
                       predict_sram_hit_rw_bytes=2 * hits, total_internal_bytes=report.total_internal_size,
                       kind=MODELED)
    return table


_BITMAP_TOTALS = re.compile(r"SRAM total size:\s*(\d+),\s*used:\s*(\d+),\s*free:\s*(\d+)")


def parse_sram_bitmap(text: str) -> Dict[str, int]:
    """/sys/kernel/debug/rknpu/mm as numbers: total_bytes, used_bytes, free_bytes (its last
    line), pages and used_pages (the bitmap: one character per 4 KiB page, "*" used)."""
    totals = _BITMAP_TOTALS.search(text)
    if totals is None:
        raise ValueError("not an rknpu SRAM bitmap: no 'SRAM total size: ..., used: ..., free: ...' line")
    bits = "".join(re.findall(r"^\s*\[\d+\]\s*\[([*.]*)\]", text, flags=re.M))
    return {"total_bytes": int(totals.group(1)), "used_bytes": int(totals.group(2)),
            "free_bytes": int(totals.group(3)), "pages": len(bits), "used_pages": bits.count("*")}


def sram_usage(rt: Optional[Any] = None) -> Any:
    """How much NPU SRAM is in use now, for every process: on a board the driver's bitmap
    /sys/kernel/debug/rknpu/mm (debugfs: root only), on the simulator
    SimRuntime.sram_bitmap() (the same text).  One row: total_bytes, used_bytes,
    free_bytes, pages, used_pages; ``attrs["text"]``: the bitmap as printed.

    Raises PermissionError on a board without root (run ``sudo cat
    /sys/kernel/debug/rknpu/mm`` in a terminal), FileNotFoundError where the file does
    not exist (debugfs not mounted, a kernel without CONFIG_ROCKCHIP_RKNPU_SRAM, no
    SRAM given to the NPU in the device tree)."""
    from ..board import NEEDS_ROOT, SRAM_BITMAP, read_sram_bitmap
    rt = runtime(rt)
    if rt.backend == "native":
        text, why = read_sram_bitmap()
        if text is None:
            if why == NEEDS_ROOT:
                raise PermissionError(f"{SRAM_BITMAP} is in debugfs, readable by root only: run "
                                      f"'sudo cat {SRAM_BITMAP}' in a terminal, or start JupyterLab as root")
            raise FileNotFoundError(f"{SRAM_BITMAP}: {why} (debugfs not mounted? a kernel without "
                                    "CONFIG_ROCKCHIP_RKNPU_SRAM, or no SRAM given to the NPU in the device tree)")
    elif hasattr(rt, "sram_bitmap"):
        text = rt.sram_bitmap()
    else:
        raise NotImplementedError("this simulator does not model the NPU SRAM (no SimRuntime.sram_bitmap)")
    table = frame([parse_sram_bitmap(text)], f"{rt.source}: {SRAM_BITMAP}")
    table.attrs["text"] = text
    return table


def free_sram(rt: Any, ctx: int = 0) -> Optional[int]:
    """Free NPU SRAM bytes now, or None where this process cannot see it: the simulator's
    bitmap; on a board RKNN_QUERY_MEM_SIZE's free_sram_size of ``ctx`` (RK3588 only,
    no root needed) when the runtime fills total_sram_size, else the driver's bitmap
    (root only)."""
    if rt.backend != "native" and hasattr(rt, "sram_bitmap"):
        return parse_sram_bitmap(rt.sram_bitmap())["free_bytes"]
    if ctx:
        m = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        if m.total_sram_size:
            return int(m.free_sram_size)
    if rt.backend == "native":
        from ..board import read_sram_bitmap
        text, _ = read_sram_bitmap()
        if text is not None:
            return parse_sram_bitmap(text)["free_bytes"]
    return None


def try_alloc_sram(sizes: Sequence[int] = (256 * 1024, 512 * 1024, 512 * 1024), rt: Optional[Any] = None) -> Any:
    """rknn_create_mem2 with RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM, one mem per size in turn,
    all kept until the end, on ``rt`` (default: the simulated RK3588): how much of each
    landed in SRAM and how much spilled to DDR as the SRAM fills.

    Rows: requested_bytes, sram_bytes (free SRAM before minus after: see
    :func:`free_sram`; NaN where it cannot be seen), dma_rise_bytes (the context's
    total_dma_allocated_size before and after: the DDR part where the runtime counts
    create_mem buffers, A9), free_sram_bytes (after), kind.  The mems are made with a
    context of the course model digits_cnn (any context serves) and destroyed at the
    end.  Instant."""
    from ._common import dma_total
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes={list(sizes)}: positive byte counts")
    rt = runtime(rt)
    ctx = rt.init(model_file(rt, "digits_cnn"))
    mems: List[Any] = []
    rows = []
    try:
        for size in sizes:
            free0, dma0 = free_sram(rt, ctx), dma_total(rt, ctx)
            mems.append(rt.create_mem2(ctx, int(size), abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM))
            free1, dma1 = free_sram(rt, ctx), dma_total(rt, ctx)
            taken = float("nan") if free0 is None or free1 is None else free0 - free1
            rows.append({"requested_bytes": int(size), "sram_bytes": taken, "dma_rise_bytes": dma1 - dma0,
                         "free_sram_bytes": float("nan") if free1 is None else free1, "kind": MEASURED})
    finally:
        for mem in mems:
            rt.destroy_mem(ctx, mem)
        rt.destroy(ctx)
    return frame(rows, f"{rt.source}: rknn_create_mem2 with RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM, mems kept")


def sram_effect(model: str = "mobilenet_v2", frames: int = 5, rt: Optional[Any] = None) -> Any:
    """``model`` inited without and with RKNN_FLAG_ENABLE_SRAM on ``rt`` (default: the
    simulated RK3588), each run ``frames`` times with io mems bound once.

    Rows: flag ("0" / "RKNN_FLAG_ENABLE_SRAM"), sram_bytes (free SRAM before the init
    minus after it), dma_bytes (total_dma_allocated_size), npu_us / npu_q1_us /
    npu_q3_us (RKNN_QUERY_PERF_RUN over the runs: modeled on the simulator),
    median_us (wall time of rknn_run), kind.  ``attrs["verdict"]``: the run time
    saved, or "cannot tell" when the two runs' q1..q3 ranges overlap.  ~0.1 s."""
    import time as _time

    import numpy as np

    from ._common import BoundIo, dma_total
    if frames < 1:
        raise ValueError(f"frames={frames}: at least 1")
    rt = runtime(rt)
    path = model_file(rt, model)
    rows = []
    for name, flag in (("0", 0), ("RKNN_FLAG_ENABLE_SRAM", abi.RKNN_FLAG_ENABLE_SRAM)):
        free0 = free_sram(rt)
        ctx = rt.init(path, flag=flag)
        try:
            free1 = free_sram(rt, ctx)
            io = BoundIo.bind(rt, ctx)
            try:
                io.write_inputs(0)
                rt.run(ctx)
                npu, wall = np.empty(frames), np.empty(frames)
                for k in range(frames):
                    t = _time.perf_counter()
                    rt.run(ctx)
                    wall[k] = _time.perf_counter() - t
                    npu[k] = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration
            finally:
                io.destroy()
            q1, med, q3 = np.percentile(npu, [25, 50, 75])
            rows.append({"flag": name,
                         "sram_bytes": float("nan") if free0 is None or free1 is None else free0 - free1,
                         "dma_bytes": dma_total(rt, ctx), "npu_us": float(med), "npu_q1_us": float(q1),
                         "npu_q3_us": float(q3), "median_us": float(np.median(wall)) * 1e6, "kind": MEASURED})
        finally:
            rt.destroy(ctx)
    table = frame(rows, f"{rt.source}: {model}, {frames} run{'s' if frames != 1 else ''} each, io mems bound once")
    plain, sram = rows
    if plain["npu_q1_us"] <= sram["npu_q3_us"] and sram["npu_q1_us"] <= plain["npu_q3_us"] and \
            plain["npu_us"] != sram["npu_us"]:
        verdict = (f"cannot tell: {plain['npu_us']:,.0f} us without and {sram['npu_us']:,.0f} us with SRAM "
                   "lie within each other's q1-q3 range")
    else:
        saved = plain["npu_us"] - sram["npu_us"]
        verdict = (f"ENABLE_SRAM saves {saved:,.0f} us per run ({saved / plain['npu_us']:.1%})" if saved > 0 else
                   f"ENABLE_SRAM saves nothing here ({plain['npu_us']:,.0f} us vs {sram['npu_us']:,.0f} us)")
    table.attrs.update(model=model, verdict=verdict)
    return table


def show_sram(table: Any, rows: int = 8) -> str:
    """A sram_hits / sram_fit table as a few lines of text: the first ``rows`` rows (layer
    ID, op, size, SramHit; the long tensor names left out), then the totals: SRAM size,
    the SramHit sum over all rows (one SRAM page serves many tensors in turn, so it
    may exceed the SRAM), and the read + write traffic saved per frame."""
    from ..profile.show import _bytes, show, source_line
    if rows < 0:
        raise ValueError(f"rows={rows}: 0 or more")
    head = show(table.head(rows), ["id", "user", "size_bytes", "sram_hit_bytes"]).rsplit("\nsource:", 1)[0]
    a = table.attrs
    inside = int(table["sram_hit_bytes"].notna().sum())
    saved = a.get("predict_sram_hit_rw_bytes")
    lines = [head] if rows else []
    if len(table) > rows:
        lines.append(f"... {len(table) - rows} more rows")
    lines.append(f"SRAM {_bytes(a.get('sram_bytes', 0))}; SramHit summed over {inside} row{'s' if inside != 1 else ''}: "
                 f"{_bytes(a.get('hit_bytes', 0))}; DDR read + write saved per frame: "
                 + (_bytes(saved) if saved is not None else "not printed"))
    lines.append(source_line(str(a.get("source", "not recorded"))))
    return "\n".join(lines)
