"""Heap fragmentation with the real glibc: what "fragmentation" means for the CPU's
heap, and why it is not what stops an NPU buffer.

Each pattern runs in a fresh child process (the notebook's heap stays out of
it, and a crash cannot take the kernel down) that calls libc's malloc and
free through ctypes and reads mallinfo2 and RSS after each step:

- "small": many blocks of seeded sizes (16 B up to 4 KiB by default) are
  malloc'ed and written, then all are freed except every 64th.  The
  survivors sit all over the heap, so glibc cannot give the freed space
  back by lowering the heap's top: RSS stays high after the frees and
  mallinfo2 shows the bytes as free-but-kept (fordblks).  malloc_trim(0)
  then returns the whole free pages inside the heap to the kernel
  (madvise), so RSS falls while the arena keeps its size.
- "large": blocks above M_MMAP_THRESHOLD (128 KiB by default) are each
  served by their own mmap and unmapped by free: RSS falls right after
  the frees, with no trim.
- "large_after_free": the same blocks after one block of their size was
  freed first.  glibc then raises its dynamic mmap threshold to that size
  (up to 32 MiB on 64-bit), so the blocks come from the heap instead, and
  behave like small ones.

On RK3588 none of this decides whether an NPU buffer can be allocated: the
NPU sits behind an IOMMU, so its buffers (DRM GEM / dma-buf objects backed by
ordinary pages) need not be physically contiguous, and they are not carved
out of the malloc heap at all.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

PATTERNS = ("small", "large", "large_after_free")
#: glibc's default M_MMAP_THRESHOLD (mallopt(3)): blocks at least this big are mmap'ed
MMAP_THRESHOLD = 128 * 1024
IOMMU_NOTE = ("RK3588's NPU is behind an IOMMU: its buffers need not be physically contiguous and "
              "do not come from the malloc heap.")
_CHILD = Path(__file__).with_name("_heap_child.py")


def _run_child(spec: dict, timeout: float) -> dict:
    try:
        done = subprocess.run([sys.executable, "-I", str(_CHILD), json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"fragmentation pattern {spec['pattern']!r} did not finish in {timeout} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"fragmentation pattern {spec['pattern']!r} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-500:]}")
    out = json.loads(done.stdout)
    if "error" in out:
        raise RuntimeError(f"fragmentation pattern {spec['pattern']!r}: {out['error']}")
    return out


def fragmentation(pattern: Any = PATTERNS, seed: int = 0, blocks: Optional[int] = None,
                  small_max: int = 4096, large_size: int = 256 * 1024, keep_every: int = 64,
                  timeout: float = 30.0) -> Any:
    """Run seeded malloc/free patterns with this machine's glibc, each in its own process.

    ``pattern``: one of PATTERNS or a list of them (default: all three).
    ``blocks``: blocks per pattern (default 20,000 small ones, about 40 MB;
    200 large ones, 50 MB).  ``keep_every``: every n-th block stays
    allocated (0: free all).

    Returns one row per pattern and step ("before", "after malloc", "after
    free", "after malloc_trim(0)"): pattern, step, rss_bytes, arena_bytes
    (the heap the main arena got by brk), in_use_bytes, free_kept_bytes
    (free space held inside the heap, fordblks), top_free_bytes (of which at
    the heap's top), mmapped_bytes and mmapped_blocks (blocks served by their
    own mmap), and rss_change_bytes (against "before").  ``attrs``: source
    (the glibc version), seed, allocated_bytes and kept_bytes per pattern, the
    IOMMU note.  About 0.3 s per pattern."""
    import pandas as pd
    names = [pattern] if isinstance(pattern, str) else list(pattern)
    unknown = [p for p in names if p not in PATTERNS]
    if unknown or not names:
        raise ValueError(f"unknown pattern {unknown or names}; choose from {', '.join(PATTERNS)}")
    if large_size <= MMAP_THRESHOLD:
        raise ValueError(f"large_size must exceed M_MMAP_THRESHOLD ({MMAP_THRESHOLD} B) to be mmap'ed, "
                         f"not {large_size}")
    rows, allocated, kept, glibc = [], {}, {}, "?"
    for name in names:
        n = blocks if blocks is not None else (20_000 if name == "small" else 200)
        out = _run_child({"pattern": name, "blocks": n, "seed": seed, "small_max": small_max,
                          "large_size": large_size, "keep_every": keep_every}, timeout)
        glibc = out["glibc"]
        allocated[name], kept[name] = out["allocated_bytes"], out["kept_bytes"]
        before = out["readings"][0]["rss_bytes"]
        for r in out["readings"]:
            rows.append({"pattern": name, **r, "rss_change_bytes": r["rss_bytes"] - before})
    table = pd.DataFrame(rows)
    table.attrs.update(source=f"glibc {glibc} on this machine (measured, one process per pattern)",
                       seed=seed, allocated_bytes=allocated, kept_bytes=kept, iommu=IOMMU_NOTE)
    return table


def retained(table: Any, pattern: str) -> float:
    """The share of ``pattern``'s RSS growth that RSS still held right after the frees
    (about 0: given back to the kernel; about 1: kept by the heap), the verdict of a
    fragmentation table.  The blocks kept on purpose (1 in ``keep_every``) hold a
    little of it in any case."""
    rows = table[table["pattern"] == pattern].set_index("step")["rss_bytes"]
    grown = rows["after malloc"] - rows["before"]
    if grown <= 0:
        raise ValueError(f"pattern {pattern!r} allocated nothing RSS could see")
    return float(min(max((rows["after free"] - rows["before"]) / grown, 0.0), 1.0))
