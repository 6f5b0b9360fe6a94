"""How close is the simulator's timing?  Its modeled run time beside published board FPS.

The single-core timing law (rknnlab.sim.timing_law) is fitted on the RKNN model zoo's
single-core INT8 FPS of seven networks on four SoCs (data/timing/zoo_fps.json:
mobilenetv2-12, yolov5s_relu, yolov6n, yolov8n, yolox_s, RetinaFace_mobile320 and
deeplab-v3-plus-mobilenet-v2 on RK3588, RK3576, RK3566/68 and RK3562).  On those 28
rows, :func:`timing_check` marks ``calibration_point`` and adds the leave-one-out error
(the law refitted without that network); every other row is a test the fit never saw.

:func:`published_fps` holds the calibration rows and the zoo's rows that only judge the
law (its README, "Model performance benchmark(FPS)", v2.3.x; INT8; RK3588 and RK3576
"@single_core"): yolov5s (SiLU) on the four SoCs, yolov5n and yolov5m (640) on RK3588,
and ppocrv4_det (the course's ppocr_det, 480) on the four SoCs.  The README's
"RK3566/RK3568" column is one figure for both (rk3566 boards run the rk3568 models).
resnet50 is left out: the course's is ResNet-50 v1.5, the zoo's resnet50-v2-7 another
network.  Published, not measured here.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Dict, Optional, Sequence, Tuple

from ..rknn import abi

ZOO_SOURCE = "RKNN model zoo README v2.3.x, INT8, one core"

#: model zoo single-core FPS of rows kept out of the fit, {(course model, soc): FPS}
_JUDGE_FPS: Dict[Tuple[str, str], float] = {
    ("yolov5s", "rk3588"): 48.4, ("yolov5s", "rk3576"): 57.5,
    ("yolov5s", "rk3568"): 19.3, ("yolov5s", "rk3562"): 23.6,
    ("yolov5n", "rk3588"): 82.5, ("yolov5m", "rk3588"): 20.9,
    ("ppocr_det", "rk3588"): 50.7, ("ppocr_det", "rk3576"): 64.3,
    ("ppocr_det", "rk3568"): 22.1, ("ppocr_det", "rk3562"): 28.0,
}


def _calibration_fps() -> Dict[Tuple[str, str], float]:
    """The rows the law is fitted on, {(course model, soc): FPS}, from data/timing/zoo_fps.json."""
    from ..sim import timing_law
    table = timing_law.calibration_table()
    return {(row["course_model"], soc): float(fps) for row in table["models"] for soc, fps in row["fps"].items()}


def published_fps(models: Optional[Sequence[str]] = None) -> Dict[Tuple[str, str], float]:
    """The model zoo's published single-core FPS, {(model, soc): FPS}: the timing law's
    calibration rows, then the rows that only judge it (all of them, or those of the models
    named in ``models``).  Source: the module docstring."""
    table = {**_calibration_fps(), **_JUDGE_FPS}
    if models is None:
        return table
    unknown = sorted(set(models) - {m for m, _ in table})
    if unknown:
        raise ValueError(f"no published FPS for {', '.join(unknown)}; "
                         f"the table has {', '.join(sorted({m for m, _ in table}))}")
    return {key: fps for key, fps in table.items() if key[0] in models}


@lru_cache(maxsize=1)
def _leave_one_out_ms() -> Dict[Tuple[str, str], float]:
    """{(calibration model, soc): its modeled ms when the law is fitted without it} (about 2 s:
    seven refits, so computed once per process)."""
    from ..sim import timing_law
    points = timing_law.calibration_points()
    errors = timing_law.leave_one_out(points)
    return {(p.model, p.soc): (1 + errors[(p.model, p.soc)]) * p.seconds * 1e3 for p in points}


def timing_check(published: Optional[Dict[Tuple[str, str], float]] = None) -> Any:
    """Modeled single-core rknn_run time against published FPS, one row per (model, soc).

    ``published``: {(model, soc): frames per second}; by default :func:`published_fps`
    (the model zoo's single-core table).  Rows: model, soc, published_fps,
    published_ms (1000 / FPS), modeled_ms (rknnlab.sim.modeled_run_ms, RKNN_NPU_CORE_0,
    from the model's own compiler report for that SoC), ratio (modeled / published), error
    (ratio - 1: negative = the law is faster than the board), calibration_point (True
    where the law was fitted on this very figure: a calibration model, its SoC and its FPS),
    loo_error (calibration points only, else NaN: the error of the law fitted without that
    model, on every SoC; :func:`rknnlab.sim.timing_law.leave_one_out`)."""
    import pandas as pd
    from .. import models
    from ..sim import modeled_run_ms
    fitted = _calibration_fps()
    rows = []
    for (model, soc), fps in (published_fps() if published is None else published).items():
        if not fps > 0:
            raise ValueError(f"published FPS of {model} on {soc} must be positive, not {fps}")
        modeled = modeled_run_ms(model, soc, abi.RKNN_NPU_CORE_0)
        published_ms = 1e3 / fps
        key = (model, models.SOC_MODELS.get(soc, soc))
        calibration = fitted.get(key) == fps
        loo = _leave_one_out_ms()[key] / published_ms - 1 if calibration else math.nan
        rows.append({"model": model, "soc": soc, "published_fps": fps, "published_ms": published_ms,
                     "modeled_ms": modeled, "ratio": modeled / published_ms, "error": modeled / published_ms - 1,
                     "calibration_point": calibration, "loo_error": loo})
    table = pd.DataFrame(rows)
    table.attrs["source"] = ("modeled: sim timing law; published: "
                             + (ZOO_SOURCE if published is None else "figures as given"))
    return table
