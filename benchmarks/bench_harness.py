"""Benchmark of the measurement harness (rknnlab.probe + rknnlab.experiment).

    PYTHONPATH=lib python benchmarks/bench_harness.py [--quick]

Prints:
1. the sampler's CPU cost at 200 Hz and 1 kHz, as a share of one core, for
   each backend (the C thread, the Python thread): the sampler thread's own
   CPU clock, and the whole process's CPU time (time.process_time) with the
   sampler on against off over the same wall time, while it samples this
   process (with onnxruntime and the simulator loaded, so smaps_rollup has a
   realistic number of mappings to walk);
2. the change of a variant's median iteration time with sampling at 200 Hz
   against sampling off (prealloc_output on the simulator, runs alternated),
   per backend;
3. the wall time of a 200-iteration mobilenet_v2 run of three variants on
   the simulator (budget: 15 s);
4. the instrumentation's overhead per runtime call.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def sampler_cost(hz: float, seconds: float, backend: str = "auto", rss_only: bool = False) -> dict:
    """The sampler thread's CPU time over ``seconds``, and the process's CPU
    time with the sampler on minus the same wall time with it off.
    ``rss_only``: meminfo, heap, PSS read once only (the floor: a wake-up and
    a statm read per tick)."""
    from rknnlab import probe
    c0 = time.process_time()
    time.sleep(seconds)
    idle = time.process_time() - c0
    rates = {"mid_hz": 1e-6, "slow_hz": 1e-6, "npu": False} if rss_only else {}
    p = probe.Probe(hz=hz, backend=backend, **rates)
    c0 = time.process_time()
    p.start()
    time.sleep(seconds)
    p.stop()
    busy = time.process_time() - c0
    ticks, cpu = p.ticks, p.cpu_ns
    p.close()
    return {"hz": hz, "backend": p.backend, "ticks": ticks, "expected": int(hz * seconds),
            "late": p.late_ticks, "cpu_share": cpu / (seconds * 1e9),
            "process_share": (busy - idle) / seconds, "us_per_sample": cpu / max(ticks, 1) / 1e3}


def median_impact(reps: int, iterations: int, backend: str = "auto") -> dict:
    import rknnlab
    on, off = [], []
    saved = os.environ.get("RKNNLAB_SAMPLER")
    os.environ["RKNNLAB_SAMPLER"] = backend  # the child processes inherit it
    try:
        for _ in range(reps):
            for hz, bucket in ((0, off), (200, on)):
                r = rknnlab.run(["prealloc_output"], iterations=iterations, backend="sim", sample_hz=hz)
                bucket.append(float(r.summary.loc["prealloc_output", "iter_median_ms"]))
    finally:
        if saved is None:
            os.environ.pop("RKNNLAB_SAMPLER", None)
        else:
            os.environ["RKNNLAB_SAMPLER"] = saved
    m_on, m_off = statistics.median(on), statistics.median(off)
    return {"off_ms": off, "on_ms": on, "median_off": m_off, "median_on": m_on,
            "change": (m_on - m_off) / m_off}


def paired_impact(blocks: int, per_block: int, backend: str = "auto") -> dict:
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
            p = probe.Probe(hz=200, backend=backend)
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

    from rknnlab import probe
    lib, note = probe.load_sampler()
    backends = ["c", "python"] if lib is not None else ["python"]
    if lib is None:
        print(f"   (no C sampler: {note})")

    print("1. sampler CPU cost, one core = 100% (the sampler thread's CPU clock; the process's "
          "CPU time on minus off over the same wall time)")
    for backend in backends:
        for hz in (200.0, 1000.0):
            c = sampler_cost(hz, seconds, backend)
            print(f"   {backend:>6} {hz:6.0f} Hz: thread {c['cpu_share'] * 100:.2f}%, process "
                  f"{c['process_share'] * 100:+.2f}% of one core, {c['us_per_sample']:.1f} us per "
                  f"sample, {c['ticks']} samples of {c['expected']} expected ({c['late']} skipped late)")
    if "c" in backends:  # what is left when the sampler only wakes and reads statm
        c = sampler_cost(200.0, seconds, "c", rss_only=True)
        print(f"   floor: c 200 Hz reading RSS only: thread {c['cpu_share'] * 100:.2f}%, "
              f"{c['us_per_sample']:.1f} us per sample (mostly the kernel's wake-up of the thread)")
    rt.destroy(ctx)
    rt.close()

    for backend in backends:
        print(f"2a. [{backend}] median iteration time, sampler off vs 200 Hz, in one process "
              "(prealloc_output loop, sim, alternating blocks of 50 iterations)")
        pm = paired_impact(16 if args.quick else 40, 50, backend)
        print(f"   off {pm['median_off']:.4f} ms, on {pm['median_on']:.4f} ms ({pm['n']} iterations "
              f"each): change {pm['change'] * 100:+.2f}%")
    for backend in backends:
        print(f"2b. [{backend}] the same through rknnlab.run (a fresh process per run, runs "
              "alternated; includes run-to-run noise)")
        m = median_impact(reps, 300, backend)
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
