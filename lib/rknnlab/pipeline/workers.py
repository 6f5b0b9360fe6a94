"""Workers and NPU cores: frames per second and latency for 1, 2 and 3 workers.

A worker is a thread with its own context (rknn_dup_context of the first: the weights
are shared, the io buffers are each worker's own) and its own core mask.  RK3588 has
no non-blocking run (rknn_wait and the async fields of rknn_run_extend are not
available there), so overlap comes from threads: while one worker's rknn_run blocks,
another converts its frame.  The CPU stages of all workers share this host's CPU
cores: on a 2-core PC, 3 workers' conversions compete for 2 cores, which a board's
8 cores would not; the table records the host's CPU count so the text can say it.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from .loop import NPU_CORES, STAGES, distinct_frames, mask_name, mask_value, open_runtime, run, source_of

def configurations(soc: str = "rk3588") -> Tuple[Tuple[int, Tuple[Optional[str], ...]], ...]:
    """(workers, core mask of each worker): the configurations the chapter compares, with
    only the masks ``soc`` has.  Three cores (RK3588): 1 worker on CORE_0, 1 on 0_1_2
    (the run split over three cores), 2 on CORE_0/CORE_1 (double buffering), 3 on
    CORE_0/1/2, 3 on AUTO.  Two (RK3576): CORE_0, 0_1, CORE_0/CORE_1, 3 on AUTO.  One
    (RK3562, RK3566, RK3568): 1, 2 and 3 workers with no mask set (rknn_set_core_mask
    has nothing to choose): more workers only double-buffer on the one core."""
    cores = NPU_CORES.get(str(soc).lower(), 1)
    if cores == 1:
        return tuple((w, (None,) * w) for w in (1, 2, 3))
    single = ("CORE_0", "CORE_1", "CORE_2")[:cores]
    every = "0_1_2" if cores == 3 else "0_1"
    configs = [(1, ("CORE_0",)), (1, (every,)), (2, ("CORE_0", "CORE_1"))]
    if cores >= 3:
        configs.append((3, single))
    configs.append((3, ("AUTO",) * 3))
    return tuple(configs)


#: the configurations on RK3588 (see configurations)
CONFIGURATIONS = configurations("rk3588")
#: frames of the untimed run before the first configuration (its first-call costs)
WARMUP_FRAMES = 12


def npu_runs_at_once(masks: Sequence[int], npu_cores: int) -> int:
    """How many of these workers' rknn_run calls the NPU can serve at once: one per
    distinct single core (CORE_0, CORE_1, CORE_2); AUTO workers spread over the SoC's
    cores; a mask over several cores (0_1, 0_1_2) takes them all for one run."""
    from ..rknn import abi
    single = {abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2}
    if any(m not in single and m != abi.RKNN_NPU_CORE_AUTO for m in masks):
        return 1
    auto = sum(1 for m in masks if m == abi.RKNN_NPU_CORE_AUTO)
    fixed = {m for m in masks if m in single}
    return max(1, min(len(fixed) + auto, npu_cores))


def bound(workers: int, cpu_ms: float, run_cpu_ms: float, npu_ms: float, host_cpus: int,
          at_once: int) -> Tuple[float, str]:
    """(frames per second, limit): the smallest of three rates and the name of its term.
    "one worker's frame": workers / (cpu_ms + max(npu_ms, run_cpu_ms)) (the CPU work
    inside rknn_run overlaps the NPU's time); "host CPUs (N)": N / (cpu_ms + run_cpu_ms);
    "NPU cores (K at once)": K / npu_ms.  Times in ms per frame; a term with no time
    allows any rate."""
    frame_ms = cpu_ms + max(npu_ms, run_cpu_ms)
    host_ms = cpu_ms + run_cpu_ms
    rates = {"one worker's frame": 1e3 * workers / frame_ms if frame_ms > 0 else np.inf,
             f"host CPUs ({host_cpus})": 1e3 * host_cpus / host_ms if host_cpus and host_ms > 0 else np.inf,
             f"NPU cores ({at_once} at once)": 1e3 * at_once / npu_ms if npu_ms > 0 else np.inf}
    limit = min(rates, key=rates.get)
    return float(rates[limit]), limit


def scaling(workers: Sequence[int] = (1, 2, 3), masks: Optional[Sequence[Sequence[Union[int, str]]]] = None,
            n_frames: int = 60, frames: Any = None, runtime: Optional[Any] = None,
            model: str = "ppocr_det", values: bool = False, soc: Optional[str] = None,
            mode: str = "zero_copy"):
    """Frames per second and latency per configuration of workers and core masks.

    Default configurations: configurations(soc) (only the masks the SoC has), kept
    where their number of workers is in ``workers``.  ``masks``: your own list of
    per-worker masks instead (one configuration each, workers = its length).  An
    untimed run of the first configuration (WARMUP_FRAMES frames) comes first, so the
    first row does not pay the process's first-call costs.

    One row per configuration: config ("2 x CORE_0/CORE_1"), workers, masks, fps
    (frames over the wall time), latency_median_ms, latency_p95_ms (frame available
    to boxes ready; frames are available as soon as a worker is free), run_ms
    (median wall time of the run stage), cpu_ms (CPU work per frame: the median of
    the thread CPU time, time.thread_time, of the four CPU stages, convert + input +
    output + post; waiting for a CPU or the interpreter lock is not work),
    run_cpu_ms (the thread CPU time inside rknn_run: on the simulator its own Python,
    done while the modeled NPU time runs; near 0 on a board), npu_ms (median
    RKNN_QUERY_PERF_RUN: the runtime's own account of the run, the modeled NPU time
    on the simulator), speedup (fps over the first row's), bound_fps and limit (see
    bound): the smallest of three rates, and what sets it:

    * "one worker's frame": each worker does one frame at a time;
    * "host CPUs (N)": the host's N CPUs share all workers' CPU work;
    * "NPU cores (K at once)": K = the runs the masks let the NPU serve at once
      (npu_runs_at_once).

    The measured fps stays under the bound; the gap is time no term counts: threads
    waiting for each other (the interpreter lock, a CPU busy with another worker).
    attrs: source, host_cpus, npu_cores, note (what the host's CPU count means for
    the rows), runs (config -> the PipelineRun the row was computed from: draw its
    Gantt with rknnlab.plot.pipeline_gantt, and the figure and the row are one run).

    ``values=False`` (default): output values replayed on the simulator, so the
    rows measure the modeled NPU and the pipeline's CPU stages, not the twin's
    onnxruntime on this PC."""
    import pandas as pd
    rt = open_runtime(runtime, soc)
    src = frames if frames is not None else distinct_frames()
    chip = str(getattr(rt, "soc", soc or "rk3588")).lower()
    if masks is None:
        configs = [(w, m) for w, m in configurations(chip) if w in tuple(workers)]
    else:
        configs = [(len(m), tuple(m)) for m in masks]
    if not configs:
        raise ValueError(f"no configuration with {tuple(workers)} workers")
    rows, runs = [], {}
    source = ""
    cpus = os.cpu_count() or 0
    npu = NPU_CORES.get(chip, 1)

    def values_of(config: Tuple[Any, ...]) -> list:
        return [None if m is None else mask_value(m) for m in config]

    n0, config0 = configs[0]
    run(src, mode=mode, workers=n0, core_masks=values_of(config0), n_frames=WARMUP_FRAMES,
        runtime=rt, model=model, values=values, keep_boxes=False)       # untimed: first-call costs
    for n_workers, config in configs:
        values_masks = values_of(config)
        r = run(src, mode=mode, workers=n_workers, core_masks=values_masks, n_frames=n_frames,
                runtime=rt, model=model, values=values, keep_boxes=False)
        names = [mask_name(m) for m in values_masks]
        label = names[0] if len(set(names)) == 1 else "/".join(names)
        run_ms = float(np.median(r.stage_ms()[:, STAGES.index("run")]))
        k_run = STAGES.index("run")
        cpu_ms = float(np.median(np.delete(r.cpu_s, k_run, axis=1).sum(axis=1))) * 1e3
        run_cpu_ms = float(np.median(r.cpu_s[:, k_run])) * 1e3
        npu_ms = float(np.median(r.npu_us)) / 1e3
        bound_fps, limit = bound(n_workers, cpu_ms, run_cpu_ms, npu_ms, cpus, npu_runs_at_once(values_masks, npu))
        config = f"{n_workers} x {label}"
        rows.append({"config": config, "workers": n_workers, "masks": "/".join(names),
                     "fps": r.fps, "latency_median_ms": r.latency["median_ms"],
                     "latency_p95_ms": r.latency["p95_ms"], "run_ms": run_ms, "cpu_ms": cpu_ms,
                     "run_cpu_ms": run_cpu_ms, "npu_ms": npu_ms, "bound_fps": bound_fps, "limit": limit})
        runs[config] = r
        source = r.conditions
    table = pd.DataFrame(rows)
    table.insert(table.columns.get_loc("bound_fps"), "speedup", table["fps"] / table["fps"].iloc[0])
    more = int(table["workers"].max())
    table.attrs.update(
        runs=runs,
        source=source_of(rt, f"{model}, {mode}, {n_frames} frames per configuration after {WARMUP_FRAMES} "
                             f"untimed; CPU work = thread CPU time, NPU = RKNN_QUERY_PERF_RUN{source}"),
        host_cpus=cpus, npu_cores=npu,
        note=(f"The CPU work of every worker shares this host's {cpus} CPU cores"
              + (f": with {more} workers, {more} threads take turns on {cpus} cores and on the interpreter "
                 "lock, which no term of the bound counts." if cpus and cpus < more else ".")))
    return table
