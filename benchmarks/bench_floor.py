"""Benchmark: how much memory the harness itself adds per iteration (its floor).

    PYTHONPATH=lib python benchmarks/bench_floor.py [--iterations 10000] [--quick]

rknnlab.run records every call, iteration and memory sample inside the
process it measures, so whatever the recording keeps shows up as growth of
that process.  This prints, for flat runs of ``--iterations`` measured
iterations:

1. ``harness_only``: a variant that runs no model, only three recorded
   blocks (``lab.timed``) and ~0.5 ms of busy waiting per iteration (no
   allocation): everything it grows by is the harness's own.  Then the same
   with glibc's per-thread cache of freed chunks turned off
   (``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``, inherited by the
   variant's process): mallinfo2 counts the chunks that cache holds as in
   use, and it fills up over the first seconds of a run (at most 7 chunks of
   each of 64 sizes per thread), which is what is left of the floor.
2. ``prealloc_output`` and ``zero_copy_io`` on digits_cnn and mobilenet_v2
   (``--quick``: digits_cnn only): the course's flat loops, through
   rknnlab.run.
3. The same prealloc_output loop without the harness (a plain loop on the
   simulator in a fresh process, reading RSS and mallinfo2 every 250
   iterations into a preallocated array): the loop's own settling, for
   comparison.

For each: the growth of the malloc heap in use and of RSS, as least-squares
slopes over the second half of the measured iterations (bytes per
iteration; what a flat loop has settled to) and over all of them, and the
verdict ``Result.describe()`` gives.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LIB = str(Path(__file__).resolve().parents[1] / "lib")


def harness_only(lab):
    """No model: three recorded blocks and ~0.5 ms of busy waiting per iteration."""
    import time as _t
    clock = _t.perf_counter_ns
    for i in lab.loop():
        with lab.timed("a"):
            pass
        with lab.timed("b"):
            end = clock() + 500_000
            while clock() < end:
                pass
        with lab.timed("c"):
            pass


def _slopes(it: np.ndarray, y: np.ndarray) -> dict:
    ok = ~(np.isnan(it) | np.isnan(y))
    it, y = it[ok], y[ok]
    if len(it) < 4:
        return {"all": float("nan"), "second_half": float("nan"), "growth": float("nan")}
    half = it >= (it.min() + it.max()) / 2
    return {"all": float(np.polyfit(it, y, 1)[0]),
            "second_half": float(np.polyfit(it[half], y[half], 1)[0]),
            "growth": float(y[-1] - y[0])}


def through_run(variant, model: str, iterations: int) -> dict:
    import rknnlab
    t = time.perf_counter()
    r = rknnlab.run([variant], model=model, iterations=iterations, backend="sim", progress=False)
    wall = time.perf_counter() - t
    name = r.variants[0]
    assert not r.errors, r.errors
    s = r.samples
    sm = s[(s["variant"] == name) & (s["stage"] == "measure")]
    it = sm["iteration"].to_numpy(float, na_value=np.nan)
    out = {"wall_s": wall,
           "heap": _slopes(it, sm["heap_in_use_bytes"].to_numpy(float)),
           "rss": _slopes(it, sm["rss_kb"].to_numpy(float) * 1024)}
    line = [x for x in r.describe().splitlines() if x.startswith(f"- {name}:")]
    out["verdict"] = line[0].split(" over the whole loop; ", 1)[-1] if line else ""
    return out


BARE = r'''
import ctypes, json, sys
import numpy as np
import rknnlab
from rknnlab import models
from rknnlab.rknn.abi import RKNN_TENSOR_NHWC, RKNN_TENSOR_UINT8
from rknnlab.experiment.variants import frame_input, query_io, _prealloc, malloc_trim
from rknnlab.probe import Heap, ProcessMemory
model, n, every = sys.argv[1], int(sys.argv[2]), 250
rt = rknnlab.open_runtime("sim")
ctx = rt.init(str(models.model_path(model)))
_, out_attrs = query_io(rt, ctx)
outs, keep = _prealloc(out_attrs, want_float=1)
attr = rt.query(ctx, __import__("rknnlab").rknn.abi.RKNN_QUERY_INPUT_ATTR,
                __import__("rknnlab").rknn.abi.rknn_tensor_attr(index=0))
dims = [int(d) for d in attr.dims[:attr.n_dims]]
shape = (dims[0], dims[2], dims[3], dims[1]) if attr.fmt == 0 and len(dims) == 4 else tuple(dims)
rng = np.random.default_rng(0)
inputs = [frame_input(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(4)]
for i in range(10):
    rt.inputs_set(ctx, inputs[i % 4]); rt.run(ctx); rt.outputs_get(ctx, outs)
malloc_trim()
heap, proc = Heap(), ProcessMemory()
rows = np.full((n // every + 1, 3), np.nan)
for i in range(n):
    if i % every == 0:
        rows[i // every] = (i, heap.sample()["heap_in_use_bytes"], proc.rss_kb() * 1024)
    rt.inputs_set(ctx, inputs[i % 4]); rt.run(ctx); rt.outputs_get(ctx, outs)
print(json.dumps(rows.tolist()))
'''


def bare_loop(model: str, iterations: int) -> dict:
    env = dict(os.environ, PYTHONPATH=LIB, RKNNLAB_BACKEND="sim")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", BARE, model, str(iterations)], capture_output=True,
                       text=True, env=env, check=True)
    wall = time.perf_counter() - t
    rows = np.array(json.loads(p.stdout.strip().splitlines()[-1]), float)
    return {"wall_s": wall, "heap": _slopes(rows[:, 0], rows[:, 1]), "rss": _slopes(rows[:, 0], rows[:, 2])}


def _print(label: str, m: dict) -> None:
    h, r = m["heap"], m["rss"]
    print(f"   {label:32s} heap {h['second_half']:+8.1f} B/it (2nd half), {h['all']:+8.1f} (all), "
          f"{h['growth'] / 1024:+8.0f} KiB total | RSS {r['second_half']:+8.1f} B/it (2nd half), "
          f"{r['all']:+8.1f} (all), {r['growth'] / 1024:+8.0f} KiB total | {m['wall_s']:.1f} s")
    if m.get("verdict"):
        print(f"   {'':32s} describe(): {m['verdict']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="digits_cnn only")
    args = ap.parse_args(argv)
    n = args.iterations
    print(f"the harness's floor: flat runs of {n:,} measured iterations on the simulator")
    print("1. harness only (no model)")
    _print("harness_only", through_run(harness_only, "digits_cnn", n))
    saved = os.environ.get("GLIBC_TUNABLES")
    os.environ["GLIBC_TUNABLES"] = "glibc.malloc.tcache_count=0"
    try:
        _print("harness_only, no tcache", through_run(harness_only, "digits_cnn", n))
    finally:
        if saved is None:
            os.environ.pop("GLIBC_TUNABLES")
        else:
            os.environ["GLIBC_TUNABLES"] = saved
    models = ["digits_cnn"] if args.quick else ["digits_cnn", "mobilenet_v2"]
    print("2. the course's flat loops through rknnlab.run")
    for model in models:
        for v in ("prealloc_output", "zero_copy_io"):
            _print(f"{model} {v}", through_run(v, model, n))
    print("3. the prealloc_output loop without the harness (fresh process, RSS and heap every 250 iterations)")
    for model in models:
        _print(f"{model} bare loop", bare_loop(model, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
