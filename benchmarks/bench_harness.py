"""Benchmark of the measurement harness (rknnlab.probe + rknnlab.experiment).

    PYTHONPATH=lib python benchmarks/bench_harness.py [--quick]

Prints:
1. the sampler's CPU cost at 200 Hz (and 1 kHz), as a share of one core,
   measured with the thread's own CPU clock while it samples this process
   (with onnxruntime and the simulator loaded, so smaps_rollup has a
   realistic number of mappings to walk);
2. the change of a variant's median iteration time with sampling at 200 Hz
   against sampling off (prealloc_output on the simulator, runs alternated);
3. the wall time of a 200-iteration mobilenet_v2 run of three variants on
   the simulator (budget: 15 s);
4. the instrumentation's overhead per runtime call.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def sampler_cost(hz: float, seconds: float) -> dict:
    from rknnlab import probe
    p = probe.Probe(hz=hz)
    p.start()
    time.sleep(seconds)
    p.stop()
    ticks, cpu = p.ticks, p.cpu_ns
    p.close()
    return {"hz": hz, "ticks": ticks, "expected": int(hz * seconds), "late": p.late_ticks,
            "cpu_share": cpu / (seconds * 1e9), "us_per_sample": cpu / max(ticks, 1) / 1e3}


def median_impact(reps: int, iterations: int) -> dict:
    import rknnlab
    on, off = [], []
    for _ in range(reps):
        for hz, bucket in ((0, off), (200, on)):
            r = rknnlab.run(["prealloc_output"], iterations=iterations, backend="sim", sample_hz=hz)
            bucket.append(float(r.summary.loc["prealloc_output", "iter_median_ms"]))
    m_on, m_off = statistics.median(on), statistics.median(off)
    return {"off_ms": off, "on_ms": on, "median_off": m_off, "median_on": m_on,
            "change": (m_on - m_off) / m_off}


def paired_impact(blocks: int, per_block: int) -> dict:
    """In one process: the prealloc_output loop on the simulator, in blocks of
    ``per_block`` iterations alternating sampler on (200 Hz) and off; the
    median iteration time of all "on" iterations against all "off" ones.
    Alternating blocks cancels the drift of a shared machine."""
    import numpy as np
    import rknnlab
    from rknnlab import models, probe
    from rknnlab.experiment.variants import frame_input, query_io, _prealloc
    rt = rknnlab.open_runtime("sim")
    ctx = rt.init(str(models.model_path("mobilenet_v2")))
    _, out_attrs = query_io(rt, ctx)
    outs, _keep = _prealloc(out_attrs, want_float=1)
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (1, 224, 224, 3), dtype=np.uint8) for _ in range(4)]
    times = {True: [], False: []}
    clock = time.perf_counter_ns

    def loop(n, bucket):
        for i in range(n):
            t = clock()
            rt.inputs_set(ctx, frame_input(frames[i % 4]))
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            bucket.append((clock() - t) / 1e6)

    loop(20, [])  # warm-up
    for b in range(blocks):
        on = b % 2 == 0
        if on:
            p = probe.Probe(hz=200)
            p.start()
        loop(per_block, times[on])
        if on:
            p.close()
    rt.destroy(ctx)
    rt.close()
    m_on, m_off = float(np.median(times[True])), float(np.median(times[False]))
    return {"median_on": m_on, "median_off": m_off, "change": (m_on - m_off) / m_off,
            "n": len(times[True])}


def three_variants(iterations: int = 200) -> dict:
    import rknnlab
    t = time.perf_counter()
    r = rknnlab.run(["alloc_per_call", "prealloc_output", "zero_copy_io"], model="mobilenet_v2",
                    iterations=iterations, backend="sim", sample_hz=200)
    wall = time.perf_counter() - t
    assert not r.errors, r.errors
    return {"wall_s": wall, "per_variant_s": {x.name: round(x.wall_s, 2) for x in r.runs}}


def call_overhead(n: int = 200_000) -> dict:
    from rknnlab.experiment.instrument import InstrumentedRuntime, Recorder

    class Null:
        backend = "null"

        def run(self, ctx, extend=None):
            return 0

        def close(self):
            pass

    raw = Null()
    inst = InstrumentedRuntime(raw, Recorder())
    t = time.perf_counter_ns()
    for _ in range(n):
        raw.run(1)
    base = (time.perf_counter_ns() - t) / n
    t = time.perf_counter_ns()
    for _ in range(n):
        inst.run(1)
    wrapped = (time.perf_counter_ns() - t) / n
    return {"ns_per_call_raw": base, "ns_per_call_instrumented": wrapped, "overhead_ns": wrapped - base}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter measurements")
    args = ap.parse_args(argv)
    seconds = 2.0 if args.quick else 5.0
    reps = 2 if args.quick else 4

    import rknnlab
    rt = rknnlab.open_runtime("sim")  # load onnxruntime + the simulator: a realistic process
    from rknnlab import models
    ctx = rt.init(str(models.model_path("mobilenet_v2")))

    print("1. sampler CPU cost (thread CPU time / wall time, one core = 100%)")
    for hz in (200.0, 1000.0):
        c = sampler_cost(hz, seconds)
        print(f"   {hz:6.0f} Hz: {c['cpu_share'] * 100:.2f}% of one core, {c['us_per_sample']:.1f} us "
              f"per sample, {c['ticks']} samples of {c['expected']} expected ({c['late']} skipped late)")
    rt.destroy(ctx)
    rt.close()

    print("2a. median iteration time, sampler off vs 200 Hz, in one process "
          "(prealloc_output loop, sim, alternating blocks of 50 iterations)")
    pm = paired_impact(16 if args.quick else 40, 50)
    print(f"   off {pm['median_off']:.4f} ms, on {pm['median_on']:.4f} ms ({pm['n']} iterations each): "
          f"change {pm['change'] * 100:+.2f}%")
    print("2b. the same through rknnlab.run (a fresh process per run, runs alternated; "
          "includes run-to-run noise)")
    m = median_impact(reps, 300)
    print(f"   off: {', '.join(f'{x:.3f}' for x in m['off_ms'])} ms")
    print(f"   on:  {', '.join(f'{x:.3f}' for x in m['on_ms'])} ms")
    print(f"   median of medians: off {m['median_off']:.3f} ms, on {m['median_on']:.3f} ms, "
          f"change {m['change'] * 100:+.2f}%")

    print("3. three variants x 200 iterations of mobilenet_v2 on the simulator")
    w = three_variants(200)
    print(f"   wall {w['wall_s']:.2f} s (budget 15 s); inside each child: {w['per_variant_s']}")

    print("4. instrumentation overhead per runtime call")
    o = call_overhead()
    print(f"   {o['ns_per_call_raw']:.0f} ns raw, {o['ns_per_call_instrumented']:.0f} ns instrumented: "
          f"+{o['overhead_ns'] / 1000:.2f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
