"""How close is the simulator's timing?  Its modeled run time beside published board FPS.

The single-core timing model (rknnlab.sim.npu) is fitted on two of the RKNN
model zoo's RK3588 figures, mobilenet_v2 and yolov5s_relu: on those two the
agreement is by construction, so :func:`timing_check` marks them; every other
row is a test of the model.

:func:`published_fps` holds the model zoo's single-core FPS (its README,
"Model performance benchmark(FPS)", v2.3.x; INT8; RK3588 and RK3576 "@single_core")
for the networks the course has a model of: mobilenetv2-12 (mobilenet_v2, 224),
yolov5s_relu, yolov5s (SiLU), yolov5n and yolov5m (640).  The README's
"RK3566/RK3568" column is one figure for both (rk3566 boards run the rk3568
models).  resnet50 is left out: the course's is ResNet-50 v1.5, the zoo's
resnet50-v2-7 another network.  Published, not measured here.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from ..rknn import abi

ZOO_SOURCE = "RKNN model zoo README v2.3.x, INT8, one core"

#: model zoo single-core FPS, {(course model, soc): FPS}
_ZOO_FPS: Dict[Tuple[str, str], float] = {
    ("mobilenet_v2", "rk3588"): 450.7, ("mobilenet_v2", "rk3576"): 467.0,
    ("mobilenet_v2", "rk3568"): 180.7, ("mobilenet_v2", "rk3562"): 281.3,
    ("yolov5s_relu", "rk3588"): 66.1, ("yolov5s_relu", "rk3576"): 65.0,
    ("yolov5s_relu", "rk3568"): 25.5, ("yolov5s_relu", "rk3562"): 33.2,
    ("yolov5s", "rk3588"): 48.4, ("yolov5s", "rk3576"): 57.5,
    ("yolov5s", "rk3568"): 19.3, ("yolov5s", "rk3562"): 23.6,
    ("yolov5n", "rk3588"): 82.5, ("yolov5m", "rk3588"): 20.9,
}
#: where the course has no report of a model for a SoC: a report with the same cycles (the
#: ReLU and SiLU yolov5s reports have identical cycles; the timing law sees only cycles)
SAME_CYCLES = {"yolov5s_relu": "yolov5s"}


def published_fps(models: Optional[Sequence[str]] = None) -> Dict[Tuple[str, str], float]:
    """The model zoo's published single-core FPS, {(model, soc): FPS}, for the course's
    models (all of them, or those named in ``models``).  Source: the module docstring."""
    if models is None:
        return dict(_ZOO_FPS)
    unknown = sorted(set(models) - {m for m, _ in _ZOO_FPS})
    if unknown:
        raise ValueError(f"no published FPS for {', '.join(unknown)}; "
                         f"the table has {', '.join(sorted({m for m, _ in _ZOO_FPS}))}")
    return {key: fps for key, fps in _ZOO_FPS.items() if key[0] in models}


def _modeled_as(model: str, soc: str) -> str:
    """The report the law runs on: the model's own, else one with the same cycles."""
    from .. import models
    if model not in SAME_CYCLES or soc in models.model_socs(model):
        return model
    return SAME_CYCLES[model]


def timing_check(published: Optional[Dict[Tuple[str, str], float]] = None) -> Any:
    """Modeled single-core rknn_run time against published FPS, one row per (model, soc).

    ``published``: {(model, soc): frames per second}; by default :func:`published_fps`
    (the model zoo's single-core table).  Rows: model, soc, published_fps,
    published_ms (1000 / FPS), modeled_as (the report the law used: the model's
    own, or one with the same cycles where the course has none, e.g. yolov5s for
    yolov5s_relu off RK3588), modeled_ms (rknnlab.sim.modeled_run_ms,
    RKNN_NPU_CORE_0), ratio (modeled / published), error (ratio - 1: negative =
    the law is faster than the board), calibration_point (True where the model was
    fitted on that very figure)."""
    import pandas as pd
    from .. import models
    from ..sim import modeled_run_ms
    from ..sim import timing_law
    table_ = timing_law.calibration_table()
    fitted = {(row["course_model"], soc) for row in table_["models"] for soc in row["fps"]}
    rows = []
    for (model, soc), fps in (published_fps() if published is None else published).items():
        if fps <= 0:
            raise ValueError(f"published FPS of {model} on {soc} must be positive, not {fps}")
        name = _modeled_as(model, models.SOC_MODELS.get(soc, soc))
        modeled = modeled_run_ms(name, soc, abi.RKNN_NPU_CORE_0)
        ratio = modeled / (1e3 / fps)
        rows.append({"model": model, "soc": soc, "published_fps": fps, "published_ms": 1e3 / fps,
                     "modeled_as": name, "modeled_ms": modeled, "ratio": ratio, "error": ratio - 1,
                     "calibration_point": (model, models.SOC_MODELS.get(soc, soc)) in fitted})
    table = pd.DataFrame(rows)
    table.attrs["source"] = ("modeled: sim timing law; published: "
                             + (ZOO_SOURCE if published is None else "figures as given"))
    return table
