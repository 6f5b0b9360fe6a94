"""Benchmark of the measurement harness (rknnlab.probe + rknnlab.experiment).

    PYTHONPATH=lib python benchmarks/bench_harness.py [--quick]

Prints:
1. the sampler's CPU cost at 200 Hz and 1 kHz when nothing polls it (the
   thread takes every row), as a share of one core, for each backend (the C
   thread, the Python thread): the sampler thread's own CPU clock, and the
   whole process's CPU time (time.process_time) with the sampler on against
   off over the same wall time, while it samples this process (with
   onnxruntime and the simulator loaded, so smaps_rollup has a realistic
   number of mappings to walk);
2. sampling at 200 Hz the way rknnlab.run does it, inside a variant loop
   whose runtime calls poll the probe: (a) its CPU cost (the thread's CPU
   clock + the time spent in polls), (b) the change of the variant's median
   iteration time against sampling off (pairs of blocks in one process),
   per backend; (c) the same median through rknnlab.run (a fresh process per
   run, runs alternated);
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


class _Loop:
    """The prealloc_output loop on the simulator through the instrumented
    runtime, in this process: what a variant's process runs."""

    def __init__(self) -> None:
        import numpy as np
        import rknnlab
        from rknnlab import models
        from rknnlab.experiment.instrument import InstrumentedRuntime, Recorder
        from rknnlab.experiment.variants import frame_input, query_io, _prealloc
        self.rec = Recorder()
        self.rt = InstrumentedRuntime(rknnlab.open_runtime("sim"), self.rec)
        self.ctx = self.rt.init(str(models.model_path("mobilenet_v2")))
        _, out_attrs = query_io(self.rt.inner, self.ctx)
        self.outs, self._keep = _prealloc(out_attrs, want_float=1)
        rng = np.random.default_rng(0)
        self.inputs = [frame_input(rng.integers(0, 256, (1, 224, 224, 3), dtype=np.uint8))
                       for _ in range(4)]
        self.run(20)  # warm-up

    def run(self, n: int) -> list:
        """n iterations; their times (ms)."""
        rt, ctx, outs, inputs, clock = self.rt, self.ctx, self.outs, self.inputs, time.perf_counter_ns
        times = []
        for i in range(n):
            t = clock()
            rt.inputs_set(ctx, inputs[i % 4])
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            times.append((clock() - t) / 1e6)
        return times

    def probe(self, backend: str, polls: bool = True, poll_wrapper=None):
        from rknnlab import probe
        p = probe.Probe(hz=200, backend=backend, extra_columns=("iteration", "stage", "dma_bytes"))
        self.rec.share_state(p.extra_values)
        if polls:
            self.rec.poll = poll_wrapper(p.poll) if poll_wrapper else p.poll
        return p

    def unprobe(self, p) -> None:
        p.stop()
        self.rec.poll = None
        self.rec.share_state(None)

    def close(self) -> None:
        self.rt.destroy(self.ctx)
        self.rt.close()


def loop_cost(loop: _Loop, iterations: int, backend: str, polls: bool = True) -> dict:
    """Sampling at 200 Hz during ``iterations`` of the loop, as rknnlab.run
    samples (the probe runs for the whole loop, the runtime calls poll it):
    the sampler thread's CPU clock, and the time spent in poll() on the
    variant's thread: each call timed, minus what the timing itself costs
    around an empty function (measured here)."""
    clock = time.perf_counter_ns
    spent = [0, 0]

    def timed(fn):
        def timed_poll():
            t = clock()
            fn()
            spent[0] += clock() - t
            spent[1] += 1
        return timed_poll

    empty = timed(lambda: None)
    for _ in range(200_000):
        empty()
    timing_ns = spent[0] / spent[1]
    spent[:] = [0, 0]
    p = loop.probe(backend, polls, timed)
    w = clock()
    p.start()
    loop.run(iterations)
    loop.unprobe(p)
    wall = clock() - w
    poll_ns = max(0.0, spent[0] - spent[1] * timing_ns)
    out = {"backend": p.backend, "wall_s": wall / 1e9, "thread_share": p.cpu_ns / wall,
           "poll_share": poll_ns / wall, "total_share": (p.cpu_ns + poll_ns) / wall,
           "polls": spent[1], "poll_rows": p.poll_rows, "rows": p.ticks, "late": p.late_ticks,
           "wakes": p.wakes, "rate_hz": p.ticks / (wall / 1e9), "timing_ns": timing_ns,
           "c_poll_share": p.poll_ns / wall}
    p.close()
    return out


def paired_impact(loop: _Loop, pairs: int, per_block: int, backend: str) -> dict:
    """The change of the median iteration time with sampling at 200 Hz (as in
    loop_cost, polls not timed) against off: blocks of ``per_block``
    iterations, on then off, ``pairs`` times; the median over the pairs of
    (median on / median off - 1), which cancels the drift of a shared
    machine, and the quartiles of that ratio (the noise)."""
    import numpy as np
    changes, on_all, off_all = [], [], []
    for _ in range(pairs):
        p = loop.probe(backend)
        p.start()
        on = loop.run(per_block)
        loop.unprobe(p)
        p.close()
        off = loop.run(per_block)
        changes.append(float(np.median(on)) / float(np.median(off)) - 1)
        on_all += on
        off_all += off
    q1, med, q3 = (float(x) for x in np.percentile(changes, [25, 50, 75]))
    return {"change": med, "q1": q1, "q3": q3, "n": len(on_all),
            "median_on": float(np.median(on_all)), "median_off": float(np.median(off_all))}


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

    print("1. sampler CPU cost with no polls (the thread takes every row), one core = 100% (the "
          "sampler thread's CPU clock; the process's CPU time on minus off over the same wall time)")
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

    loop = _Loop()
    for backend in backends:
        n = 1000 if args.quick else 3000
        print(f"2a. [{backend}] sampling at 200 Hz inside a variant loop, as rknnlab.run does "
              f"(prealloc_output on the simulator, {n} iterations through the instrumented runtime, "
              "whose calls poll the probe)")
        c = loop_cost(loop, n, backend)
        print(f"   cost: thread {c['thread_share'] * 100:.2f}% + polls {c['poll_share'] * 100:.2f}% "
              f"= {c['total_share'] * 100:.2f}% of one core (budget 1%) over {c['wall_s']:.1f} s")
        print(f"   {c['rows']} rows ({c['rate_hz']:.0f} per s, {c['late']} slots empty), "
              f"{c['poll_rows']} taken by {c['polls']:,} polls (reading those rows: "
              f"{c['c_poll_share'] * 100:.2f}% of a core); the thread woke {c['wakes']} times "
              f"({c['wakes'] / c['wall_s']:.0f} per s)")
        if backend == "c":
            c = loop_cost(loop, n // 2, backend, polls=False)
            print(f"   the same without polls (the thread takes every row): thread "
                  f"{c['thread_share'] * 100:.2f}% of one core, {c['wakes'] / c['wall_s']:.0f} wake-ups per s")
    for backend in backends:
        pairs = 10 if args.quick else 30
        print(f"2b. [{backend}] median iteration time, sampler at 200 Hz against off, in one process "
              f"({pairs} pairs of blocks of 100 iterations, on then off)")
        pm = paired_impact(loop, pairs, 100, backend)
        print(f"   change {pm['change'] * 100:+.2f}% (median over pairs; quartiles "
              f"{pm['q1'] * 100:+.2f}% .. {pm['q3'] * 100:+.2f}%); all on {pm['median_on']:.4f} ms, "
              f"all off {pm['median_off']:.4f} ms ({pm['n']} iterations each) (budget 1%)")
    loop.close()
    for backend in backends:
        print(f"2c. [{backend}] the median through rknnlab.run (a fresh process per run, runs "
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
