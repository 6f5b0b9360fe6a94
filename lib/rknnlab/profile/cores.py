"""More NPU cores: the run time of one model under several core masks, measured.

RK3588 has three NPU cores.  rknn_set_core_mask(ctx, RKNN_NPU_CORE_0_1_2)
lets one model use all three, but Rockchip's API reference lists only some
ops as split across cores (Conv, depthwise Conv, Add, Concat and the
ReLU-family activations); the others run on core 0, and the user guide
warns that small networks can get slower because switching cores needs the
CPU.  A public RK3588 trace shows a Conv fused with SiLU (ConvExSwish) not
split at all.  So the speedup of a model depends on the share of its work
in ops that split: :func:`multicore` reports both.

On the simulator the run times are the timing model's (rknnlab.sim.npu:
which ops split, how much faster, the cost per split layer are listed
assumptions); on a board they are the board's.
"""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence, Union

import numpy as np

from .. import models
from ..rknn import abi
from ._common import progress_bar, ratio_interval, run_source, spread
from .phase_timing import _open, frame_inputs

DEFAULT_MASKS = (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0_1, abi.RKNN_NPU_CORE_0_1_2)


def split_share(model: str, soc: str = "rk3588") -> float:
    """The share of ``model``'s compiler cycles (cycles_total) in layers whose op type
    a multi-core mask splits (the simulator's rule, rknnlab.sim.npu.SPLIT_OPS).

    Layers the compiler gives no cycles (MaxPool, Resize, ... in the shipped reports)
    count for nothing here, although they take time on a board: the share is the
    compiler's view, the one the simulator's timing follows."""
    from ..sim.npu import is_split
    layers = models.load_report(model, soc).layers
    total = sum(layer["cycles_total"] for layer in layers)
    split = sum(layer["cycles_total"] for layer in layers if is_split(layer["op"]))
    return split / total if total else 0.0


#: timed runs per mask between two switches of the mask (see _timed_runs)
BLOCK = 5


def _timed_runs(rt: Any, ctx: int, masks: Sequence[int], runs: int, at=None):
    """Wall time (s) of ``runs`` rknn_run calls per mask, and what RKNN_QUERY_PERF_RUN said
    each took (us: the runtime's own account of the NPU time).

    The masks take turns in blocks of BLOCK runs, each block after one untimed run
    under the new mask: a machine whose load changes during the measurement then
    slows every mask alike instead of the one measured last, and whatever a switch
    of mask costs stays out of the timed runs."""
    wall = {m: [] for m in masks}
    perf = {m: [] for m in masks}
    done = 0
    while len(wall[masks[0]]) < runs:
        for mask in masks:
            rt.set_core_mask(ctx, mask)
            rt.run(ctx)
            for _ in range(min(BLOCK, runs - len(wall[mask]))):
                t = time.perf_counter()
                rt.run(ctx)
                wall[mask].append(time.perf_counter() - t)
                perf[mask].append(rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration)
            done += 1
            if at is not None:
                at(done)
    return ({m: np.asarray(v) for m, v in wall.items()}, {m: np.asarray(v, float) for m, v in perf.items()})


#: a speedup within this of 1 is "about the same" even when its interval excludes 1:
#: interleaved runs of the simulator resolve 0.2 %, which no application notices
MIN_CHANGE = 0.01


def _verdict(ratio: float, low: float, high: float) -> str:
    if low <= 1 <= high:
        return "cannot tell apart"
    if abs(ratio - 1) < MIN_CHANGE:
        return "about the same"
    return "faster" if low > 1 else "slower"


def multicore(model: Union[str, Sequence[str]], soc: str = "rk3588",
              masks: Sequence[int] = DEFAULT_MASKS, runs: int = 20,
              backend: Union[None, str, Any] = None, seed: int = 0,
              progress: Optional[bool] = None) -> Any:
    """Time ``runs`` rknn_run calls of each model under each core mask, one context per
    model, the same seeded input throughout; the masks take turns in blocks of 5 runs
    (each after one untimed run), so a change in the machine's load hits them alike.

    Rows: model, mask (its name), cores, median_ms, q1_ms, q3_ms (wall time of
    rknn_run: what the application waits), perf_run_ms (the median of
    RKNN_QUERY_PERF_RUN after each run: the runtime's own account), speedup
    (median on RKNN_NPU_CORE_0 over this mask's median), speedup_low /
    speedup_high (its 95% bootstrap interval; NaN on the reference row),
    verdict ("faster" or "slower" than one core: the interval excludes 1
    and the speedup is at least 1 % from 1; "about the same": the interval
    excludes 1 but the change is under 1 %; "cannot tell apart": the
    interval includes 1; "reference" for RKNN_NPU_CORE_0),
    split_share (share of the compiler cycles in ops that split) and
    modeled_ms (rknnlab.sim.modeled_run_ms for that mask: the simulator's
    prediction, also on a board).  ``masks`` must start with
    RKNN_NPU_CORE_0, the reference.  Typical time on the simulator: digits_cnn,
    mobilenet_v2, yolov5s_relu and yolov5s, 3 masks, 20 runs: ~3 s (yolov5s ~15
    ms a run)."""
    import pandas as pd
    from ..sim import modeled_run_ms
    from ..sim.npu import cores_of_mask
    names = [model] if isinstance(model, str) else list(model)
    if not names or not masks or masks[0] != abi.RKNN_NPU_CORE_0:
        raise ValueError("multicore: give at least one model, and masks starting with RKNN_NPU_CORE_0 "
                         "(the one-core reference)")
    if runs < 2:
        raise ValueError(f"runs must be at least 2 (a spread needs repeats), not {runs}")
    unknown = [m for m in masks if m not in abi.CORE_MASK_NAMES]
    if unknown:
        raise ValueError(f"unknown core mask(s) {unknown}; use the RKNN_NPU_CORE_* constants")
    rt, owned = _open(backend, soc)
    rows = []
    try:
        blocks = -(-runs // BLOCK) * len(masks)
        with progress_bar(progress, len(names) * blocks, "profile.multicore") as at:
            for k, name in enumerate(names):
                ctx = rt.init(str(models.model_path(name, rt.soc)))
                try:
                    rt.inputs_set(ctx, frame_inputs(rt, ctx, seed))
                    times, perf_run = _timed_runs(rt, ctx, masks, runs,
                                                  lambda b, k=k: at(k * blocks + b))
                finally:
                    rt.destroy(ctx)
                share = split_share(name, rt.soc)
                base = times[masks[0]]
                for mask in masks:
                    s = spread(times[mask])
                    reference = mask == masks[0]
                    r = (dict(ratio=1.0, low=np.nan, high=np.nan) if reference
                         else ratio_interval(base, times[mask], seed=seed))
                    rows.append({"model": name, "mask": abi.CORE_MASK_NAMES[mask],
                                 "cores": len(cores_of_mask(mask, rt.soc)),
                                 "median_ms": s["median_us"] / 1e3, "q1_ms": s["q1_us"] / 1e3,
                                 "q3_ms": s["q3_us"] / 1e3,
                                 "perf_run_ms": float(np.median(perf_run[mask])) / 1e3,
                                 "speedup": r["ratio"], "speedup_low": r["low"], "speedup_high": r["high"],
                                 "verdict": "reference" if reference else _verdict(r["ratio"], r["low"], r["high"]),
                                 "split_share": share, "modeled_ms": modeled_run_ms(name, rt.soc, mask)})
        source = run_source(rt, "rknn_run timed on this machine, NPU time modeled")
    finally:
        if owned:
            rt.close()
    table = pd.DataFrame(rows)
    table.attrs["source"] = source
    return table
