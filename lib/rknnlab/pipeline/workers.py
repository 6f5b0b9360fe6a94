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

#: (workers, core mask of each worker): the configurations the chapter compares
CONFIGURATIONS: Tuple[Tuple[int, Tuple[str, ...]], ...] = (
    (1, ("CORE_0",)),
    (1, ("0_1_2",)),
    (2, ("CORE_0", "CORE_1")),
    (3, ("CORE_0", "CORE_1", "CORE_2")),
    (3, ("AUTO", "AUTO", "AUTO")),
)


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


def scaling(workers: Sequence[int] = (1, 2, 3), masks: Optional[Sequence[Sequence[Union[int, str]]]] = None,
            n_frames: int = 60, frames: Any = None, runtime: Optional[Any] = None,
            model: str = "ppocr_det", values: bool = False, soc: Optional[str] = None,
            mode: str = "zero_copy"):
    """Frames per second and latency per configuration of workers and core masks.

    Default configurations (CONFIGURATIONS), kept where their number of workers is in
    ``workers``: 1 worker on CORE_0; 1 worker on 0_1_2 (one context, the run split
    over three cores); 2 workers on CORE_0/CORE_1 (double buffering); 3 workers on
    CORE_0/1/2; 3 workers on AUTO.  ``masks``: your own list of per-worker masks
    instead (one configuration each, workers = its length).

    One row per configuration: config ("2 x CORE_0/CORE_1"), workers, masks, fps
    (frames over the wall time), latency_median_ms, latency_p95_ms (frame available
    to boxes ready; frames are available as soon as a worker is free), run_ms
    (median rknn_run), cpu_ms (median of the CPU stages: convert + input + output +
    post), speedup (fps over the first row's), bound_fps and limit (the frame rate
    the row's own medians allow: the smallest of workers / (cpu_ms + run_ms) "one
    worker's frame", host_cpus / cpu_ms "host CPUs", and NPU runs at once
    / run_ms "NPU cores"; fps stays under it, and its term names the bottleneck).
    attrs: source, host_cpus (this host's CPU count: the CPU stages of all workers
    share them), npu_cores (3 on RK3588; the default configurations need them all),
    note (what the host's CPU count means for the rows), runs (config -> the
    PipelineRun the row was computed from: draw its Gantt with
    rknnlab.plot.pipeline_gantt, and the figure and the row are one run).

    ``values=False`` (default): output values replayed on the simulator, so the
    rows measure the modeled NPU and the pipeline's CPU stages, not the twin's
    onnxruntime on this PC."""
    import pandas as pd
    rt = open_runtime(runtime, soc)
    src = frames if frames is not None else distinct_frames()
    if masks is None:
        configs = [(w, m) for w, m in CONFIGURATIONS if w in tuple(workers)]
    else:
        configs = [(len(m), tuple(m)) for m in masks]
    if not configs:
        raise ValueError(f"no configuration with {tuple(workers)} workers")
    rows, runs = [], {}
    source = ""
    cpus = os.cpu_count() or 0
    npu = NPU_CORES.get(str(getattr(rt, "soc", "")).lower(), 1)
    for n_workers, config in configs:
        values_masks = [mask_value(m) for m in config]
        r = run(src, mode=mode, workers=n_workers, core_masks=values_masks, n_frames=n_frames,
                runtime=rt, model=model, values=values, keep_boxes=False)
        ms = r.stage_ms()
        names = [mask_name(m) for m in values_masks]
        label = names[0] if len(set(names)) == 1 else "/".join(names)
        run_ms = float(np.median(ms[:, STAGES.index("run")]))
        cpu_ms = float(np.median(ms[:, [k for k, s in enumerate(STAGES) if s != "run"]].sum(axis=1)))
        bounds = {"one worker's frame": 1e3 * n_workers / (cpu_ms + run_ms),
                  "host CPUs": 1e3 * cpus / cpu_ms if cpus and cpu_ms > 0 else np.inf,
                  "NPU cores": 1e3 * npu_runs_at_once(values_masks, npu) / run_ms if run_ms > 0 else np.inf}
        limit = min(bounds, key=bounds.get)
        config = f"{n_workers} x {label}"
        rows.append({"config": config, "workers": n_workers, "masks": "/".join(names),
                     "fps": r.fps, "latency_median_ms": r.latency["median_ms"],
                     "latency_p95_ms": r.latency["p95_ms"], "run_ms": run_ms, "cpu_ms": cpu_ms,
                     "bound_fps": bounds[limit], "limit": limit})
        runs[config] = r
        source = r.conditions
    table = pd.DataFrame(rows)
    table.insert(table.columns.get_loc("bound_fps"), "speedup", table["fps"] / table["fps"].iloc[0])
    table.attrs.update(runs=runs,

        source=source_of(rt, f"{model}, {mode}, {n_frames} frames per configuration{source}"),
        host_cpus=cpus, npu_cores=npu,
        note=(f"The CPU stages of every worker share this host's {cpus} CPU cores"
              + (f": with 3 workers, 3 threads compete for {cpus} cores." if cpus and cpus < 3 else ".")))
    return table
