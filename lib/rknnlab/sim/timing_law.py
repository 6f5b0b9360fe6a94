"""The NPU timing law: how long one single-core rknn_run takes, from the compiler report alone.

The compiler's layer table (rknn-toolkit2 2.3.2, the course's reports) gives each layer
its NPU cycles (compute), DDR cycles and RW(KB) (its read/write figure), op type and weight
shape.  On one core, a run of a model on SoC ``s`` lasts

    t = sum over NPU layers with cycles:   k(op) x NPU cycles / F_s
      + sum over NPU layers with 0 cycles: RW bytes / B_s
      + number of CPU layers (not the Input/OutputOperator) x c_s
      + b_s

with five numbers per SoC and one shared:

- ``F`` (compute_hz): compiler NPU cycles the core gets through per second of wall time
  (clock x how busy the compiler's schedule really keeps the core);
- ``k(op)``: 1 for a plain Conv; ``depthwise_factor`` (per SoC) for a depthwise Conv
  (weights [1, C, kh, kw], C = the input's and the output's channels; this includes the
  Conv the compiler makes of a global average pool): the compiler counts it as cheap, the
  calibration models say it is not (the factor rests mostly on DeepLab: fitted without it,
  it falls to 0 on three SoCs); :data:`SILU_FACTOR` (every SoC) for a Conv fused with SiLU
  (ConvExSwish): the compiler gives yolov5s and yolov5s_relu the same cycles, yet the zoo
  measures the SiLU network slower.  The factor is fitted on yolov8n and yolox_s (that pair
  is not in the fit) and overestimates the YOLOv5 family (yolov5s +8 to +18 %, yolov5m +29 %);
- ``B`` (zero_cycle_bytes_per_s): a fitted rate, not a DDR bandwidth, at which the layers the
  compiler gives 0 cycles (Add, Concat, Resize, Split, MaxPool, ...) are charged for their
  RW(KB), the compiler's read/write figure (about the bytes a layer reads: chapter 3 §3; what
  it counts for RetinaFace's class Concat on RK3588, 17,267 KB for 8,400 output elements, is
  unknown).  On RK3576 it comes out near 100 GB/s: 0-cycle layers cost nothing there;
- ``c`` (cpu_layer_s): each layer the runtime runs on the CPU in the middle of the graph
  (a hand-over NPU -> CPU -> NPU: cache maintenance, a wait, a new job).  It is fitted as 0
  on RK3588, RK3576 and RK3562, and exists on RK3568 only through RetinaFace;
- ``b`` (run_s): the fixed cost of a run (submission, interrupt, wake-up; the
  Input/OutputOperator conversions), at least :data:`MIN_RUN_S`.  Poorly identified: the
  smallest calibration network takes 2.1 ms, and refits without one network move it
  between 0.02 and 2.5 ms.

The compiler's DDR cycles are not used: the same fit on its total cycles (per layer the
larger of DDR and NPU cycles) did worse (worst row 17.6 % instead of 8.2 %, mean
leave-one-out error 24 % instead of 18 %).  Seven rows per SoC fit five coefficients, so
the fitted rows say little: the leave-one-out errors are the measure.

Method (:func:`fit`): the law is linear in 1/F, k_dw/F, 1/B, b and c once the SiLU factor
is fixed.  For each SiLU factor tried, each SoC's five coefficients are the non-negative
least-squares solution of "modeled / published = 1" over the calibration models (relative
error, so a 2 ms and a 90 ms model weigh the same); the SiLU factor minimizing the total
squared relative error of all four SoCs is found by a grid then golden-section search.
The calibration data: the RKNN model zoo's published single-core INT8 FPS of seven models on
RK3588, RK3576, RK3566/68 and RK3562 (data/timing/zoo_fps.json); the models are compiled by
the course's pipeline from their published architectures with seeded-random weights (the
compiler's cycles and traffic do not depend on weight values).  :func:`leave_one_out`
refits without each model in turn and predicts it.  The fitted numbers are fixed in
:data:`LAWS` so that timing does not move when a report is rebuilt; tests refit them.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

#: layers that are not work of the NPU's: their cost is part of the run's fixed cost
IO_OPS = frozenset({"InputOperator", "OutputOperator"})
CALIBRATION_FILE = "timing/zoo_fps.json"


@dataclass(frozen=True)
class SocLaw:
    """The timing law's numbers for one SoC (module docstring)."""
    compute_hz: float
    depthwise_factor: float
    zero_cycle_bytes_per_s: float
    cpu_layer_s: float
    run_s: float


#: fitted by :func:`fit` on data/timing/zoo_fps.json with the shipped reports
#: (tests/test_timing_law.py refits them); SILU_FACTOR is shared by all SoCs
SILU_FACTOR = 1.4071
LAWS: Dict[str, SocLaw] = {
    'rk3562': SocLaw(compute_hz=8.43763e+08, depthwise_factor=2.83391, zero_cycle_bytes_per_s=2.02863e+09, cpu_layer_s=0, run_s=0.000358954),
    'rk3568': SocLaw(compute_hz=6.88557e+08, depthwise_factor=3.51381, zero_cycle_bytes_per_s=1.5517e+09, cpu_layer_s=0.000201222, run_s=2e-05),
    'rk3576': SocLaw(compute_hz=8.13408e+08, depthwise_factor=1.61956, zero_cycle_bytes_per_s=1.0434e+11, cpu_layer_s=0, run_s=0.000352325),
    'rk3588': SocLaw(compute_hz=7.87059e+08, depthwise_factor=2.07402, zero_cycle_bytes_per_s=7.76658e+09, cpu_layer_s=0, run_s=4.83799e-05),
}
SOC_LAW_ALIASES = {"rk3566": "rk3568", "rk3588s": "rk3588"}


def law_for(soc: str) -> SocLaw:
    """The law of ``soc`` (RK3566 uses RK3568's: one NPU); ValueError for another SoC."""
    name = SOC_LAW_ALIASES.get(soc.lower(), soc.lower())
    if name not in LAWS:
        raise ValueError(f"no timing law for SoC {soc!r}; known: {', '.join(sorted(LAWS))}")
    return LAWS[name]


def is_depthwise(layer: Mapping[str, Any]) -> bool:
    """A Conv layer whose weights are [1, C, kh, kw] with C the input's and the output's
    channels (C > 1)."""
    shapes = layer.get("input_shapes") or []
    if not layer["op"].startswith("Conv") or len(shapes) < 2 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return False
    outputs = layer.get("output_shapes") or []
    channels = shapes[0][1]
    # a ReduceSum turned into a conv has weights [1, C, 1, 1] too, but one output channel
    return (shapes[1][0] == 1 and shapes[1][1] == channels > 1
            and bool(outputs) and len(outputs[0]) == 4 and outputs[0][1] == channels)


def is_silu(layer: Mapping[str, Any]) -> bool:
    """A Conv the compiler fused with SiLU (its name for it: ConvExSwish)."""
    return "ExSwish" in layer["op"]


def layer_kind(layer: Mapping[str, Any]) -> str:
    """Which term of the law a layer falls in: "io" (Input/OutputOperator), "cpu", "zero"
    (an NPU layer with 0 cycles), "depthwise", "silu" or "conv" (any other NPU layer)."""
    if layer["op"] in IO_OPS:
        return "io"
    if layer["target"] != "NPU":
        return "cpu"
    if layer["cycles_total"] == 0:
        return "zero"
    if is_depthwise(layer):
        return "depthwise"
    return "silu" if is_silu(layer) else "conv"


def layer_seconds(layer: Mapping[str, Any], law: SocLaw, silu_factor: float = None) -> float:
    """One layer's modeled time on one core (an "io" layer: 0, it is inside ``run_s``)."""
    kind = layer_kind(layer)
    if kind == "io":
        return 0.0
    if kind == "cpu":
        return law.cpu_layer_s
    if kind == "zero":
        return (layer["rw_kb"] or 0.0) * 1024 / law.zero_cycle_bytes_per_s
    factor = {"conv": 1.0, "depthwise": law.depthwise_factor,
              "silu": SILU_FACTOR if silu_factor is None else silu_factor}[kind]
    return factor * layer["cycles_npu"] / law.compute_hz


def run_seconds(layers: Sequence[Mapping[str, Any]], soc: str) -> float:
    """The modeled duration of one single-core run of a model with this layer table."""
    law = law_for(soc)
    return math.fsum(layer_seconds(layer, law) for layer in layers) + law.run_s


# -- the fit ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One calibration row on one SoC: the law's features and the published time."""
    model: str
    soc: str
    seconds: float           # 1 / published FPS
    conv_cycles: float       # NPU cycles of plain Conv layers
    silu_cycles: float       # NPU cycles of ConvExSwish layers
    depthwise_cycles: float  # NPU cycles of depthwise Conv layers
    zero_cycle_bytes: float  # RW bytes of 0-cycle NPU layers
    cpu_layers: int


def features(layers: Sequence[Mapping[str, Any]]) -> Dict[str, float]:
    """The sums the law needs from a layer table."""
    out = {"conv": 0.0, "silu": 0.0, "depthwise": 0.0, "zero": 0.0, "cpu": 0.0}
    for layer in layers:
        kind = layer_kind(layer)
        if kind in ("conv", "silu", "depthwise"):
            out[kind] += layer["cycles_npu"]
        elif kind == "zero":
            out["zero"] += (layer["rw_kb"] or 0.0) * 1024
        elif kind == "cpu":
            out["cpu"] += 1
    return out


def calibration_table(path: Optional[Path] = None) -> Dict[str, Any]:
    """data/timing/zoo_fps.json: the published FPS the law is fitted on (ValueError naming the
    file, and the model and SoC, for a table that cannot be fitted on)."""
    if path is None:
        from ..paths import data_dir
        path = data_dir() / CALIBRATION_FILE
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the timing calibration table {path}: {exc}") from None
    problem = _table_problem(table)
    if problem:
        raise ValueError(f"timing calibration table {path}: {problem}")
    return table


def _table_problem(table: Any) -> Optional[str]:
    """What makes a calibration table unusable (None: nothing)."""
    if not isinstance(table, dict) or not isinstance(table.get("socs"), list) or not isinstance(table.get("models"), list):
        return "not a table with a list of socs and a list of models"
    for row in table["models"]:
        name = row.get("course_model") if isinstance(row, dict) else None
        if not isinstance(name, str):
            return f"a model row without a course_model: {row!r}"
        fps = row.get("fps")
        if not isinstance(fps, dict):
            return f"{name} has no fps table"
        for soc in table["socs"]:
            if soc not in fps:
                return f"{name} has no FPS for {soc}"
            value = fps[soc]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                return f"{name} on {soc}: FPS {value!r} is not a positive number"
    return None


def calibration_points(table: Optional[Mapping[str, Any]] = None) -> List[Point]:
    """One Point per (calibration model, SoC), features read from the shipped reports."""
    from .. import models
    table = table or calibration_table()
    points = []
    for row in table["models"]:
        for soc in table["socs"]:
            f = features(models.load_report(row["course_model"], soc).layers)
            points.append(Point(row["course_model"], soc, 1.0 / row["fps"][soc], f["conv"], f["silu"],
                                f["depthwise"], f["zero"], int(f["cpu"])))
    return points


def _design(points: Sequence[Point], silu_factor: float) -> np.ndarray:
    # columns: 1/F, k_dw/F, 1/B, c, b; rows divided by the published time (relative error)
    rows = [[p.conv_cycles + silu_factor * p.silu_cycles, p.depthwise_cycles, p.zero_cycle_bytes,
             p.cpu_layers, 1.0] for p in points]
    return np.array(rows, float) / np.array([p.seconds for p in points])[:, None]


def _nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares by trying every set of free coefficients (5 columns: 32
    sets): exact, and small enough to need no iterative solver."""
    best, best_err = np.zeros(a.shape[1]), float(np.sum(y ** 2))
    for r in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), r):
            sub = a[:, cols]
            x, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.any(x < 0):
                continue
            err = float(np.sum((sub @ x - y) ** 2))
            if err < best_err - 1e-15:
                full = np.zeros(a.shape[1])
                full[list(cols)] = x
                best, best_err = full, err
    return best


#: the least fixed cost per run a fit may give: the Input/OutputOperator rows of the per-layer
#: profile (10 us each, rknnlab.sim.npu.CPU_LAYER_S) lie inside it (ASSUMPTIONS A46)
MIN_RUN_S = 20e-6


def _fit_socs(points: Sequence[Point], silu_factor: float) -> Tuple[Dict[str, np.ndarray], float]:
    coefs, total = {}, 0.0
    for soc in sorted({p.soc for p in points}):
        mine = [p for p in points if p.soc == soc]
        a = _design(mine, silu_factor)
        # run_s = MIN_RUN_S + a non-negative rest: fit the rest to what the floor leaves
        floor = MIN_RUN_S / np.array([p.seconds for p in mine])
        x = _nnls(a, 1.0 - floor)
        x[-1] += MIN_RUN_S
        coefs[soc] = x
        total += float(np.sum((a @ x - 1.0) ** 2))
    return coefs, total


def fit(points: Sequence[Point], silu_range: Tuple[float, float] = (1.0, 3.0)) -> Tuple[float, Dict[str, SocLaw]]:
    """(SILU_FACTOR, {soc: SocLaw}) minimizing the squared relative error of ``points``."""
    def total(k: float) -> float:
        return _fit_socs(points, k)[1]
    grid = np.linspace(silu_range[0], silu_range[1], 41)
    i = int(np.argmin([total(k) for k in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if total(a) < total(b):
            hi = b
        else:
            lo = a
    silu = round(float(lo + hi) / 2, 4)
    coefs, _ = _fit_socs(points, silu)
    laws = {}
    for soc, (inv_f, kdw_over_f, inv_b, cpu_s, run_s) in coefs.items():
        laws[soc] = SocLaw(compute_hz=1.0 / inv_f if inv_f > 0 else math.inf,
                           depthwise_factor=kdw_over_f / inv_f if inv_f > 0 else 0.0,
                           zero_cycle_bytes_per_s=1.0 / inv_b if inv_b > 0 else math.inf,
                           cpu_layer_s=cpu_s, run_s=run_s)
    return silu, laws


def predict(point: Point, silu_factor: float, law: SocLaw) -> float:
    """The law's time for a calibration point."""
    zero = point.zero_cycle_bytes / law.zero_cycle_bytes_per_s if point.zero_cycle_bytes else 0.0
    return ((point.conv_cycles + silu_factor * point.silu_cycles
             + law.depthwise_factor * point.depthwise_cycles) / law.compute_hz
            + zero + point.cpu_layers * law.cpu_layer_s + law.run_s)


def residuals(points: Sequence[Point], silu_factor: float = None,
              laws: Mapping[str, SocLaw] = None) -> Dict[Tuple[str, str], float]:
    """{(model, soc): modeled / published - 1} (negative: the law is faster than the board)."""
    silu_factor = SILU_FACTOR if silu_factor is None else silu_factor
    laws = LAWS if laws is None else laws
    return {(p.model, p.soc): predict(p, silu_factor, laws[p.soc]) / p.seconds - 1 for p in points}


def leave_one_out(points: Sequence[Point]) -> Dict[Tuple[str, str], float]:
    """{(model, soc): error when the law is fitted without that model (on every SoC)}."""
    out = {}
    for model in sorted({p.model for p in points}):
        rest = [p for p in points if p.model != model]
        silu, laws = fit(rest)
        for p in points:
            if p.model == model:
                out[(p.model, p.soc)] = predict(p, silu, laws[p.soc]) / p.seconds - 1
    return out


def laws_source(silu_factor: float, laws: Mapping[str, SocLaw]) -> str:
    """The Python text of SILU_FACTOR and LAWS (to paste here after a refit)."""
    lines = [f"SILU_FACTOR = {silu_factor!r}", "LAWS: Dict[str, SocLaw] = {"]
    for soc, law in sorted(laws.items()):
        lines.append(f"    {soc!r}: SocLaw(compute_hz={law.compute_hz:.6g}, depthwise_factor={law.depthwise_factor:.6g}, "
                     f"zero_cycle_bytes_per_s={law.zero_cycle_bytes_per_s:.6g}, cpu_layer_s={law.cpu_layer_s:.6g}, "
                     f"run_s={law.run_s:.6g}),")
    lines.append("}")
    return "\n".join(lines).replace("=inf", "=math.inf")


__all__ = ["SocLaw", "SILU_FACTOR", "LAWS", "law_for", "layer_kind", "layer_seconds", "run_seconds",
           "Point", "features", "calibration_table", "calibration_points", "fit", "predict", "residuals",
           "leave_one_out", "laws_source", "is_depthwise", "is_silu"]
