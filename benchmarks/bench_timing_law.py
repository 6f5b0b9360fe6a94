"""How well the NPU timing law (rknnlab.sim.timing_law) predicts the model zoo's boards.

Prints, from the shipped compiler reports and data/timing/zoo_fps.json:

1. the method and the numbers the fit gives each SoC (refitted here and compared with the
   constants the simulator uses);
2. every calibration row: published ms, modeled ms, error, and the leave-one-out error (the
   law refitted without that network, then asked to predict it);
3. the zoo's rows the fit never saw (rknnlab.profile.timing.published_fps): yolov5s (SiLU),
   yolov5n, yolov5m and ppocr_det (the zoo's ppocrv4_det);
4. the errors of the law the simulator used before (a x compiler cycles / clock + b, fitted
   on two RK3588 figures), so the change is visible.

    PYTHONPATH=lib python benchmarks/bench_timing_law.py             # the report above
    PYTHONPATH=lib python benchmarks/bench_timing_law.py --markdown  # the README's table

Published figures, not measured here: the model zoo's README (single core, INT8).
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Dict, List, Mapping, Sequence, Tuple

from rknnlab import models
from rknnlab.rknn import abi
from rknnlab.sim import modeled_run_ms, timing_law

SOCS = ("rk3588", "rk3576", "rk3568", "rk3562")
#: the law the simulator used before issue 17: t = a x compiler cycles / clock + b, a and b
#: fitted on mobilenet_v2 and yolov5s_relu on RK3588 only; clocks as the simulator assumed
OLD_A, OLD_B_S = 1.23924, 0.59207e-3
OLD_CLOCK_HZ = {"rk3588": 1.0e9, "rk3576": 1.0e9, "rk3568": 0.9e9, "rk3562": 1.0e9}

Key = Tuple[str, str]


def old_law_ms(model: str, soc: str) -> float:
    """The previous law's time of one single-core run (ms)."""
    return (OLD_A * models.load_report(model, soc).npu_cycles / OLD_CLOCK_HZ[soc] + OLD_B_S) * 1e3


def calibration_models() -> List[str]:
    """The calibration networks in data/timing/zoo_fps.json's order."""
    return [row["course_model"] for row in timing_law.calibration_table()["models"]]


def judge_rows() -> Dict[Key, float]:
    """{(model, soc): published FPS} of the zoo's rows kept out of the fit."""
    from rknnlab.profile import timing
    fitted = {(p.model, p.soc) for p in timing_law.calibration_points()}
    return {key: fps for key, fps in timing.published_fps().items() if key not in fitted}


def _pct(error: float, digits: int = 1) -> str:
    return f"{error * 100:+.{digits}f} %"


def markdown_table(points: Sequence[timing_law.Point], loo: Mapping[Key, float]) -> str:
    """The README's table: one row per calibration network, one column per SoC, each cell
    "published ms / modeled ms (error; leave-one-out error)"."""
    by_key = {(p.model, p.soc): p for p in points}
    residual = timing_law.residuals(points)
    lines = ["| model | " + " | ".join(soc.upper() for soc in SOCS) + " |",
             "|---|" + "---|" * len(SOCS)]
    for model in calibration_models():
        cells = []
        for soc in SOCS:
            point = by_key[(model, soc)]
            published = point.seconds * 1e3
            modeled = (1 + residual[(model, soc)]) * published
            cells.append(f"{published:.2f} / {modeled:.2f} ({_pct(residual[(model, soc)])}; "
                         f"LOO {_pct(loo[(model, soc)], 0)})")
        lines.append(f"| `{model}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


MARKDOWN_CAPTION = ("Published / modeled single-core ms per run (error; LOO = the error when that network "
                    "is left out\nof the fit and predicted):")


def print_method(silu: float, laws: Mapping[str, timing_law.SocLaw], points: Sequence[timing_law.Point]) -> None:
    print("Method: per SoC, t = sum k(op) x NPU cycles / F (layers with cycles; k = 1 conv, "
          "depthwise factor, SiLU factor)\n        + sum RW bytes / B (0-cycle NPU layers) + c x CPU layers + b;"
          " non-negative least squares on the\n        relative error against the zoo's FPS, "
          "the SiLU factor shared by all SoCs (grid, then golden section).")
    print(f"SiLU factor (ConvExSwish): {silu:.4f}  (shipped {timing_law.SILU_FACTOR})")
    print(f"{'SoC':8s} {'F GHz-eq':>9s} {'depthwise':>9s} {'B fitted GB/s':>13s} {'CPU layer ms':>12s} "
          f"{'fixed ms':>9s}  refit vs shipped")
    for soc in SOCS:
        law, shipped = laws[soc], timing_law.LAWS[soc]
        drift = max(abs(getattr(law, f) - getattr(shipped, f)) / max(abs(getattr(shipped, f)), 1e-300)
                    for f in ("compute_hz", "depthwise_factor", "zero_cycle_bytes_per_s", "cpu_layer_s", "run_s")
                    if math.isfinite(getattr(shipped, f)) and getattr(shipped, f) != 0)
        print(f"{soc:8s} {law.compute_hz / 1e9:9.3f} {law.depthwise_factor:9.3f} "
              f"{law.zero_cycle_bytes_per_s / 1e9:13.2f} {law.cpu_layer_s * 1e3:12.3f} {law.run_s * 1e3:9.3f}"
              f"  {drift:.1e} relative")
    print("(rk3566 uses rk3568's law: one NPU. The fixed cost b is poorly identified: the smallest "
          f"calibration network takes {min(p.seconds for p in points) * 1e3:.1f} ms.)")


def print_calibration(points: Sequence[timing_law.Point], loo: Mapping[Key, float]) -> None:
    residual = timing_law.residuals(points)
    print(f"\nCalibration rows (fitted): {'published ms':>12s} {'modeled ms':>10s} {'error':>8s} "
          f"{'LOO':>8s} {'old law':>8s}")
    for model in calibration_models():
        for soc in SOCS:
            point = next(p for p in points if (p.model, p.soc) == (model, soc))
            published = point.seconds * 1e3
            print(f"  {model:28s} {soc} {published:9.2f} {(1 + residual[(model, soc)]) * published:10.2f} "
                  f"{_pct(residual[(model, soc)]):>8s} {_pct(loo[(model, soc)]):>8s} "
                  f"{_pct(old_law_ms(model, soc) / published - 1, 0):>8s}")
    worst = max(residual.values(), key=abs)
    within = sorted({m for m, _ in loo if all(abs(loo[(m, s)]) <= 0.15 for s in SOCS)})
    old = [old_law_ms(p.model, p.soc) / (p.seconds * 1e3) - 1 for p in points]
    print(f"  worst fit error {_pct(worst)} (old law {_pct(max(old, key=abs), 0)}); mean |error| "
          f"{_mean_abs(residual.values()) * 100:.1f} % (old law {_mean_abs(old) * 100:.1f} %, "
          f"leave-one-out {_mean_abs(loo.values()) * 100:.1f} %)")
    print(f"  leave-one-out within 15 % on every SoC: {', '.join(within)}")


def _mean_abs(errors) -> float:
    errors = list(errors)
    return sum(abs(e) for e in errors) / len(errors)


def print_judges() -> None:
    print(f"\nRows the fit never saw:   {'published ms':>12s} {'modeled ms':>10s} {'error':>8s} {'old law':>8s}")
    new, old = [], []
    for (model, soc), fps in judge_rows().items():
        published = 1e3 / fps
        new.append(modeled_run_ms(model, soc, abi.RKNN_NPU_CORE_0) / published - 1)
        old.append(old_law_ms(model, soc) / published - 1)
        print(f"  {model:28s} {soc} {published:9.2f} {(1 + new[-1]) * published:10.2f} {_pct(new[-1]):>8s} "
              f"{_pct(old[-1], 0):>8s}")
    print(f"  mean |error| {_mean_abs(new) * 100:.1f} % (old law {_mean_abs(old) * 100:.1f} %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the README's modeled-vs-published table only")
    args = parser.parse_args()
    start = time.perf_counter()
    points = timing_law.calibration_points()
    loo = timing_law.leave_one_out(points)
    if args.markdown:
        print(MARKDOWN_CAPTION + "\n\n" + markdown_table(points, loo))
        return
    silu, laws = timing_law.fit(points)
    print_method(silu, laws, points)
    print_calibration(points, loo)
    print_judges()
    print(f"\n(published: RKNN model zoo README, single core, INT8; modeled: the shipped reports; "
          f"{time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
