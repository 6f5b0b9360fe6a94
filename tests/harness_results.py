"""A synthetic rknnlab Result with known numbers (no processes), for the trace and plot tests."""
from __future__ import annotations

from rknnlab.experiment.result import Result, VariantRun

WARMUP = 2
ITER = 20
PHASES = (("inputs_set", 100_000, 150528), ("run", 1_000_000, None), ("outputs_get", 50_000, 4000))
IT_NS = 1_300_000  # an iteration: the three calls plus 150 us of Python


def variant(name: str, rss_step_kb: float, crashed: bool = False) -> VariantRun:
    calls = {k: [] for k in ("function", "iteration", "stage", "t_start_ns", "duration_ns", "bytes",
                             "thread", "ctx", "ok")}
    its = {k: [] for k in ("iteration", "stage", "t_start_ns", "duration_ns")}
    samples = {k: [] for k in ("t_ns", "iteration", "stage", "mem_free_kb", "rss_kb", "pss_kb",
                               "heap_in_use_bytes", "dma_bytes")}
    t0 = 10_000_000
    calls_row = lambda fn, it, st, t, d, b: [calls[k].append(v) for k, v in zip(  # noqa: E731
        calls, (fn, it, st, t, d, b, 0, 1, True))]
    calls_row("init", None, "setup", 1_000_000, 8_000_000, 4_000_000)
    for i in range(WARMUP + ITER):
        stage = "warmup" if i < WARMUP else "measure"
        start = t0 + i * IT_NS
        t = start
        for fn, d, b in PHASES:
            calls_row(fn, i, stage, t, d, b)
            t += d
        dur = IT_NS + (200_000 if i % 2 else 0)  # odd iterations 0.2 ms slower
        its["iteration"].append(i)
        its["stage"].append(stage)
        its["t_start_ns"].append(start)
        its["duration_ns"].append(min(dur, IT_NS))
        samples["t_ns"].append(start + 1000)
        samples["iteration"].append(i)
        samples["stage"].append(stage)
        samples["mem_free_kb"].append(500_000 - rss_step_kb * i)
        samples["rss_kb"].append(100_000 + rss_step_kb * i)
        samples["pss_kb"].append(None if i % 5 else 90_000 + rss_step_kb * i)
        samples["heap_in_use_bytes"].append(1_000_000 + rss_step_kb * 1024 * i)
        samples["dma_bytes"].append(5_000_000)
    calls_row("destroy", None, "teardown", t0 + (WARMUP + ITER) * IT_NS, 500_000, None)
    run = VariantRun(name=name, status="ok", doc=f"{name} doc", source=f"def {name}(lab): ...",
                     returncode=0, wall_s=0.05, calls=calls, iterations=its, samples=samples,
                     sdk={"api_version": "2.3.2", "drv_version": "0.9.8"})
    if crashed:
        run.status, run.error, run.returncode = "crashed", "died with SIGSEGV during iteration 7", -11
        n = 8
        run.iterations = {k: v[:n] for k, v in its.items()}
        run.samples = {k: v[:n] for k, v in samples.items()}
        run.calls = {k: [] for k in calls}
    return run


def meta() -> dict:
    return {"backend": "sim", "backend_reason": "asked", "source": "simulated RK3588 — rknnlab sim",
            "board": {"soc": "rk3588", "simulated": True},
            "runtime_versions": {"api_version": "2.3.2", "drv_version": "0.9.8"},
            "model": {"name": "mobilenet_v2", "soc": "rk3588", "path": "/x/rk3588.rknn",
                      "sha256": "ab" * 32, "report_sha256": "cd" * 32},
            "rknnlab_version": "0.1.0",
            "host": {"hostname": "h", "platform": "Linux", "machine": "x86_64", "python": "3.11",
                     "cpu_count": 2},
            "parameters": {"iterations": ITER, "warmup": WARMUP, "sample_hz": 200.0, "seed": 0,
                           "n_frames": 4, "input_shape": [1, 224, 224, 3], "params": {}},
            "created": "2026-11-29T15:00:00+0000"}


def make_result(crash: bool = False) -> Result:
    runs = [variant("flat", 0.0), variant("leaky", 4.0)]
    if crash:
        runs.append(variant("crashy", 1.0, crashed=True))
    return Result(meta(), runs)
