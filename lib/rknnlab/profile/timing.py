"""How close is the simulator's timing?  Its modeled run time beside published board FPS.

The single-core timing model (rknnlab.sim.npu) is fitted on two of the RKNN
model zoo's RK3588 figures, mobilenet_v2 and yolov5s_relu: on those two the
agreement is by construction, so :func:`timing_check` marks them; every other
row is a test of the model.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from ..rknn import abi


def timing_check(published_fps: Dict[Tuple[str, str], float]) -> Any:
    """Modeled single-core rknn_run time against published FPS, one row per (model, soc).

    ``published_fps``: {(model, soc): frames per second} (e.g. the model zoo's
    single-core table).  Rows: model, soc, published_fps, published_ms
    (1000 / FPS), modeled_ms (rknnlab.sim.modeled_run_ms, RKNN_NPU_CORE_0),
    ratio (modeled / published), calibration_point (True where the model was
    fitted on that very figure)."""
    import pandas as pd
    from ..sim import modeled_run_ms
    from ..sim.npu import CALIBRATION_POINTS
    fitted = {name for name, _ in CALIBRATION_POINTS}
    rows = []
    for (model, soc), fps in published_fps.items():
        if fps <= 0:
            raise ValueError(f"published FPS of {model} on {soc} must be positive, not {fps}")
        modeled = modeled_run_ms(model, soc, abi.RKNN_NPU_CORE_0)
        rows.append({"model": model, "soc": soc, "published_fps": fps, "published_ms": 1e3 / fps,
                     "modeled_ms": modeled, "ratio": modeled / (1e3 / fps),
                     "calibration_point": soc == "rk3588" and model in fitted})
    table = pd.DataFrame(rows)
    table.attrs["source"] = ("modeled: rknnlab.sim timing model (compiler reports); published: "
                             "figures as given (e.g. the RKNN model zoo's single-core FPS)")
    return table
