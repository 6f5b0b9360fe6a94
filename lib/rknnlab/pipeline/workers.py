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
    post), speedup (fps over the first row's).  attrs: source, host_cpus (this
    host's CPU count: the CPU stages of all workers share them), npu_cores (3 on
    RK3588; the default configurations need them all), note (what the host's CPU count means for the rows).

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
    rows = []
    source = ""
    for n_workers, config in configs:
        values_masks = [mask_value(m) for m in config]
        r = run(src, mode=mode, workers=n_workers, core_masks=values_masks, n_frames=n_frames,
                runtime=rt, model=model, values=values, keep_boxes=False)
        ms = r.stage_ms()
        names = [mask_name(m) for m in values_masks]
        label = names[0] if len(set(names)) == 1 else "/".join(names)
        rows.append({"config": f"{n_workers} x {label}", "workers": n_workers, "masks": "/".join(names),
                     "fps": r.fps, "latency_median_ms": r.latency["median_ms"],
                     "latency_p95_ms": r.latency["p95_ms"],
                     "run_ms": float(np.median(ms[:, STAGES.index("run")])),
                     "cpu_ms": float(np.median(ms[:, [k for k, s in enumerate(STAGES) if s != "run"]].sum(axis=1)))})
        source = r.conditions
    table = pd.DataFrame(rows)
    table["speedup"] = table["fps"] / table["fps"].iloc[0]
    cpus = os.cpu_count() or 0
    npu = NPU_CORES.get(str(getattr(rt, "soc", "")).lower(), 1)
    table.attrs.update(
        source=source_of(rt, f"{model}, {mode}, {n_frames} frames per configuration{source}"),
        host_cpus=cpus, npu_cores=npu,
        note=(f"The CPU stages of every worker share this host's {cpus} CPU cores"
              + (f": with 3 workers, 3 threads compete for {cpus} cores." if cpus and cpus < 3 else ".")))
    return table
