"""Two budgets that decide an allocation: the NPU's 4 GiB IOMMU domain, shared by every
model a process loads, and the CPU's cost of reading cacheable or non-cacheable memory."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..profile._common import measured_here, spread, time_repeats
from ..profile.cpu import FRAME_BYTES, SYNC_MODEL, UNCACHED_MODEL, UNCACHED_SLOWDOWN, sync_cost
from ..rknn import abi
from ._common import MEASURED, MODELED, PAGE, frame

#: one IOMMU domain: the NPU addresses 4 GiB through it (API reference V2.3.2 p.40,
#: rknn_matmul's iommu_domain_id; rknn_init has no such parameter)
IOMMU_DOMAIN_BYTES = 4 * 2 ** 30
IOMMU_SOURCE = ("airockchip/rknn-toolkit2#287: every model sits in domain 0 and loading fails once "
                "their total passes 4 GiB")


def _pages(n: int) -> int:
    return -(-int(n) // PAGE) * PAGE


def iommu_budget(models: Sequence[str], counts: Union[int, Sequence[int]] = 1, soc: str = "rk3588",
                 share_weights: bool = False) -> Any:
    """The NPU memory of ``counts[i]`` contexts of each of ``models``, added up against one
    4 GiB IOMMU domain, from the compiler reports (no run).

    Each buffer (weights, internal, each native io tensor's size_with_stride) is rounded
    up to 4 KiB, as the runtime rounds its allocations; a board also allocates register
    command and task buffers, so the figures are a lower bound.  ``share_weights``: the
    second and later contexts of a model are rknn_dup_context copies, without weights
    of their own.

    Rows in the order given: model, count, weights_bytes, internal_bytes, io_bytes,
    first_bytes (the first context), more_bytes (each further one), total_bytes,
    cumulative_bytes (this model and all above it: the last row is the whole mix),
    domain_share (cumulative over 4 GiB), fits (cumulative within 4 GiB), max_count
    (how many contexts of this model alone fit in a domain).  ``attrs``: domain_bytes,
    share_weights, total_bytes (the whole mix), domain_share (of the whole mix),
    max_mixes (how many copies of the whole mix, every count multiplied, fit in one
    domain).  Print a mix with e.g. ``profile.show(table, ["model", "count",
    "total_bytes", "cumulative_bytes", "domain_share", "fits"])``.  Instant."""
    from .. import models as course_models
    names = list(models)
    numbers = [counts] * len(names) if isinstance(counts, int) else list(counts)
    if not names or len(numbers) != len(names) or min(numbers) < 0:
        raise ValueError(f"models {names} and counts {numbers}: one count (>= 0) per model")
    rows: List[Dict[str, Any]] = []
    cumulative = 0
    toolkit = set()
    for name, count in zip(names, numbers):
        report = course_models.load_report(name, course_models.SOC_MODELS.get(soc, soc))
        toolkit.add(report.data.get("toolkit_version", "?"))
        io = sum(_pages(a["size_with_stride"]) for kind in ("inputs", "outputs")
                 for a in report.attrs(kind, "native"))
        weights, internal = _pages(report.total_weight_size), _pages(report.total_internal_size)
        first = weights + internal + io
        more = internal + io if share_weights else first
        total = (first + (count - 1) * more) if count else 0
        cumulative += total
        rows.append({"model": name, "count": count, "weights_bytes": weights, "internal_bytes": internal,
                     "io_bytes": io, "first_bytes": first, "more_bytes": more, "total_bytes": total,
                     "cumulative_bytes": cumulative, "domain_share": cumulative / IOMMU_DOMAIN_BYTES,
                     "fits": cumulative <= IOMMU_DOMAIN_BYTES,
                     "max_count": 1 + (IOMMU_DOMAIN_BYTES - first) // more if first <= IOMMU_DOMAIN_BYTES else 0})
    how = "rknn_dup_context after the first" if share_weights else "rknn_init each"
    table = frame(rows, f"{soc.upper()} compiler reports (rknn-toolkit2 {', '.join(sorted(toolkit))}), no run; "
                        f"{how}; buffers rounded up to 4 KiB; a lower bound (a board adds command "
                        f"buffers); the 4 GiB domain: {IOMMU_SOURCE}")
    table.attrs.update(domain_bytes=IOMMU_DOMAIN_BYTES, share_weights=share_weights, total_bytes=cumulative,
                       domain_share=cumulative / IOMMU_DOMAIN_BYTES, max_mixes=_max_mixes(rows))
    return table


def _max_mixes(rows: List[Dict[str, Any]]) -> int:
    """How many copies of the mix fit in one domain: n copies hold, per model with a count
    c > 0, first + (n c - 1) more bytes."""
    loaded = [r for r in rows if r["count"]]
    if not loaded:
        return 0
    fixed = sum(r["first_bytes"] - r["more_bytes"] for r in loaded)
    per_mix = sum(r["count"] * r["more_bytes"] for r in loaded)
    return max(0, (IOMMU_DOMAIN_BYTES - fixed) // per_mix)


def _sync_us(rt: Optional[Any], nbytes: int, repeats: int) -> Dict[str, Any]:
    """One rknn_mem_sync FROM_DEVICE over ``nbytes``: measured on a board, else MODELED."""
    if rt is not None and getattr(rt, "backend", "") == "native":
        from .. import models
        ctx = rt.init(str(models.model_path("digits_cnn", models.SOC_MODELS.get(rt.soc, rt.soc))))
        try:
            mem = rt.create_mem2(ctx, nbytes, abi.RKNN_FLAG_MEMORY_CACHEABLE)
            try:
                t = spread(time_repeats(lambda: rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE),
                                        repeats))
            finally:
                rt.destroy_mem(ctx, mem)
        finally:
            rt.destroy(ctx)
        return {"median_us": t["median_us"], "q1_us": t["q1_us"], "q3_us": t["q3_us"], "kind": MEASURED}
    us = float(sync_cost(nbytes, (abi.RKNN_MEMORY_SYNC_FROM_DEVICE,))["modeled_us"].iloc[0])
    return {"median_us": us, "q1_us": us, "q3_us": us, "kind": MODELED}


#: reads of fewer bytes are timed on this many and scaled (per byte)
SCALED_BELOW = 1 << 20


def _read_times(rt: Optional[Any], nbytes: int, repeats: int) -> Dict[str, Dict[str, Any]]:
    """CPU read of ``nbytes`` from cached and uncached memory: on a board both measured on
    create_mem2 buffers (rknnlab.profile.uncached_read), else the cached read measured
    here and the uncached one MODELED (x UNCACHED_SLOWDOWN)."""
    if rt is not None and getattr(rt, "backend", "") == "native":
        from ..profile.cpu import uncached_read
        table = uncached_read(nbytes, repeats, rt=rt)
        return {r["what"]: {"median_us": r["median_us"], "q1_us": r["q1_us"], "q3_us": r["q3_us"],
                            "kind": r["kind"]} for _, r in table.iterrows()}
    # Timed on at least 1 MiB and scaled to nbytes: a copy of a few hundred bytes takes less
    # time than the Python call around it, and x UNCACHED_SLOWDOWN would multiply the call.
    timed = max(nbytes, SCALED_BELOW)
    src = np.random.default_rng(0).integers(0, 256, timed, dtype=np.uint8)
    out = np.empty_like(src)
    cached = spread(time_repeats(lambda: np.copyto(out, src), repeats))
    cached = {k: cached[k] * nbytes / timed for k in ("median_us", "q1_us", "q3_us")}
    return {"cached": {**cached, "kind": MEASURED},
            "uncached": {**{k: v * UNCACHED_SLOWDOWN for k, v in cached.items()}, "kind": MODELED}}


def cache_choice(nbytes: int = FRAME_BYTES, read_share: float = 1.0, reads_per_frame: int = 1,
                 repeats: int = 15, rt: Optional[Any] = None) -> Any:
    """What one frame costs the CPU for a buffer of ``nbytes`` that the NPU writes and
    the CPU reads (an output mem): the CPU reads ``read_share`` of its bytes
    ``reads_per_frame`` times per frame.

    - CACHEABLE: the reads at cached speed plus one rknn_mem_sync FROM_DEVICE over the
      whole mem per frame (the course syncs: the safe choice);
    - NON_CACHEABLE: the reads at uncached speed, no sync.

    On this machine the cached read is measured (per byte, on at least 1 MiB, so that the
    Python call around a small copy does not count) and the rest MODELED (sync:
    rknnlab.profile.cpu's model; uncached read: cached x 20 from librga#69); with
    ``rt`` a board runtime, all three are measured on create_mem2 buffers.

    Rows: memory ("CACHEABLE", "NON_CACHEABLE"), read_bytes (per frame), read_us, sync_us,
    total_us, total_q1_us, total_q3_us (from the reads' and sync's quartiles), kind
    ("measured", "MODELED", or both joined by "+").  ``attrs["verdict"]``: which is
    cheaper, or "cannot tell" when the two totals' q1..q3 ranges overlap.  ~0.1 s."""
    if nbytes < 1 or not 0 < read_share <= 1 or reads_per_frame < 0:
        raise ValueError(f"nbytes={nbytes} (>= 1), read_share={read_share} (0 < share <= 1), "
                         f"reads_per_frame={reads_per_frame} (>= 0)")
    read_bytes = max(1, int(round(nbytes * read_share)))
    reads = _read_times(rt, read_bytes, repeats)
    sync = _sync_us(rt, nbytes, repeats)
    rows = []
    for memory, read, s in (("CACHEABLE", reads["cached"], sync), ("NON_CACHEABLE", reads["uncached"], None)):
        r = {k: reads_per_frame * read[k] for k in ("median_us", "q1_us", "q3_us")}
        sy = s or {"median_us": 0.0, "q1_us": 0.0, "q3_us": 0.0, "kind": ""}
        kinds = "+".join(dict.fromkeys(k for k in (read["kind"], sy["kind"]) if k))
        rows.append({"memory": memory, "read_bytes": read_bytes * reads_per_frame, "read_us": r["median_us"],
                     "sync_us": sy["median_us"], "total_us": r["median_us"] + sy["median_us"],
                     "total_q1_us": r["q1_us"] + sy["q1_us"], "total_q3_us": r["q3_us"] + sy["q3_us"],
                     "kind": kinds})
    if rt is not None and getattr(rt, "backend", "") == "native":
        source = f"{rt.source}: create_mem2 buffers, reads and rknn_mem_sync measured"
    else:
        source = (f"cached read: {measured_here()}, per byte on >= 1 MiB; uncached read: {UNCACHED_MODEL}; "
                  f"rknn_mem_sync FROM_DEVICE: {SYNC_MODEL}")
    table = frame(rows, source)
    table.attrs.update(verdict=_verdict(rows), nbytes=nbytes, read_share=read_share,
                       reads_per_frame=reads_per_frame)
    return table


def _verdict(rows: List[Dict[str, Any]]) -> str:
    a, b = rows
    if math.isnan(a["total_us"]) or math.isnan(b["total_us"]):
        return "cannot tell: a row was not measured"
    if a["total_q3_us"] >= b["total_q1_us"] and b["total_q3_us"] >= a["total_q1_us"]:
        return (f"cannot tell: {a['memory']} {a['total_us']:,.1f} us and {b['memory']} {b['total_us']:,.1f} us "
                "per frame lie within each other's q1-q3 range")
    cheap, dear = (a, b) if a["total_us"] < b["total_us"] else (b, a)
    return (f"{cheap['memory']} is cheaper: {cheap['total_us']:,.1f} us vs {dear['total_us']:,.1f} us per frame "
            f"({_how_much(cheap, dear)})")


def _how_much(cheap: Dict[str, Any], dear: Dict[str, Any]) -> str:
    """How much cheaper: a ratio, or "no CPU cost" when the cheaper one costs nothing."""
    if cheap["total_us"] <= 0:
        return "no CPU cost"
    return f"{dear['total_us'] / cheap['total_us']:.1f}x"


def _cheaper(rows: List[Dict[str, Any]]) -> str:
    """The verdict in a table cell: "CACHEABLE (2.3x)", "NON_CACHEABLE (no CPU cost)", or
    "cannot tell"."""
    if _verdict(rows).startswith("cannot tell"):
        return "cannot tell"
    cheap, dear = (rows[0], rows[1]) if rows[0]["total_us"] < rows[1]["total_us"] else (rows[1], rows[0])
    return f"{cheap['memory']} ({_how_much(cheap, dear)})"


def cache_choices(patterns: Dict[str, Dict[str, Any]], repeats: int = 15, rt: Optional[Any] = None) -> Any:
    """:func:`cache_choice` for several access patterns, as one table: ``patterns`` maps a
    label to cache_choice's keyword arguments (nbytes, read_share, reads_per_frame), e.g.
    ``{"1,000 scores, read once": dict(nbytes=1000)}``.

    Rows: two per pattern (CACHEABLE, NON_CACHEABLE), in the order given: pattern, then
    cache_choice's columns, then cheaper (the pattern's verdict in short, on both of its
    rows: "CACHEABLE (2.3x)", "NON_CACHEABLE (no CPU cost)" or "cannot tell").
    ``attrs``: verdicts (label -> cache_choice's verdict sentence), source (that of
    cache_choice).  ~0.1 s per pattern."""
    import pandas as pd
    if not patterns:
        raise ValueError("patterns: at least one {label: dict(nbytes=..., ...)}")
    tables, verdicts = [], {}
    for label, pattern in patterns.items():
        table = cache_choice(**pattern, repeats=repeats, rt=rt)
        verdicts[label] = table.attrs["verdict"]
        tables.append(table.assign(pattern=label, cheaper=_cheaper(table.to_dict("records"))))
    joined = pd.concat(tables, ignore_index=True)
    joined = joined[["pattern"] + [c for c in joined.columns if c != "pattern"]]
    joined.attrs.update(source=tables[0].attrs["source"], verdicts=verdicts)
    return joined
