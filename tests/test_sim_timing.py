"""The modeled NPU: blocking runs, cores, and what A20 says about the timing law's errors
(the law itself and its fit: tests/test_timing_law.py)."""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime, modeled_run_ms, npu, timing_law


def _zoo_seconds(name: str, soc: str = "rk3588") -> float:
    """The model zoo's single-core time of a calibration model (data/timing/zoo_fps.json)."""
    row = next(r for r in timing_law.calibration_table()["models"] if r["course_model"] == name)
    return 1.0 / row["fps"][soc]


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _ready(rt: SimRuntime, name: str, core_mask: int = abi.RKNN_NPU_CORE_AUTO) -> int:
    """A context with its input set and one run done (so the next runs hit the output cache)."""
    ctx = rt.init(str(models.model_path(name)))
    shape = models.load_report(name).data["inputs"][0]["plain"]["dims"]
    rt.inputs_set(ctx, [buffers.input_from_array(0, np.full(shape, 90, np.uint8), abi.RKNN_TENSOR_NHWC)])
    rt.set_core_mask(ctx, core_mask)
    rt.run(ctx)
    return ctx


def _median_run(rt: SimRuntime, ctx: int, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        rt.run(ctx)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _first_passing(measure: Callable[[], float], check: Callable[[float], bool], attempts: int = 3) -> float:
    """Measure until ``check`` holds, at most ``attempts`` times: wall-time tests
    on a shared machine need a second chance when another process grabs the CPU.
    Returns the last measurement (assert ``check`` on it)."""
    for _ in range(attempts):
        value = measure()
        if check(value):
            break
    return value


@pytest.mark.parametrize("name,runs,modeled_ms", [("mobilenet_v2", 9, 2.23), ("yolov5s_relu", 5, 16.1)])
def test_run_blocks_for_the_modeled_time(rt, name, runs, modeled_ms):
    """rknn_run lasts modeled_run_ms (about 2.23 and 16.1 ms on one rk3588 core), which is
    within the law's 10 % target of the zoo's figure the law was fitted on."""
    modeled = modeled_run_ms(name, "rk3588", abi.RKNN_NPU_CORE_0) / 1e3
    assert modeled * 1e3 == pytest.approx(modeled_ms, rel=0.01)
    assert modeled == pytest.approx(_zoo_seconds(name), rel=0.10)
    ctx = _ready(rt, name, abi.RKNN_NPU_CORE_0)

    def within(t: float) -> bool:  # a wake-up may come late on a busy machine, never early
        return modeled * 0.98 < t < modeled * 1.15

    median = _first_passing(lambda: _median_run(rt, ctx, runs), within)
    assert within(median), (median, modeled)
    perf = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN)
    assert perf.run_duration == round(modeled * 1e6)


def _wall_time_of_parallel_runs(rt: SimRuntime, contexts, runs: int) -> float:
    barrier = threading.Barrier(len(contexts))

    def loop(ctx: int) -> None:
        barrier.wait()
        for _ in range(runs):
            rt.run(ctx)

    threads = [threading.Thread(target=loop, args=(ctx,)) for ctx in contexts]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def test_contexts_on_different_cores_overlap_and_on_one_core_queue(rt):
    runs = 20
    alone = runs * modeled_run_ms("mobilenet_v2", "rk3588") / 1e3
    layouts = {
        "alone": [abi.RKNN_NPU_CORE_0],
        "apart": [abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1],
        "auto": [abi.RKNN_NPU_CORE_AUTO, abi.RKNN_NPU_CORE_AUTO],  # AUTO spreads them over free cores
        "together": [abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0],
    }
    # bands that tell 1x from 2x with room for thread wake-ups on a busy machine
    bands = {"alone": (0.8, 1.3), "apart": (0.8, 1.4), "auto": (0.8, 1.4), "together": (1.7, 2.6)}
    for name, masks in layouts.items():
        contexts = [_ready(rt, "mobilenet_v2", mask) for mask in masks]
        low, high = bands[name]
        ratio = _first_passing(lambda: _wall_time_of_parallel_runs(rt, contexts, runs) / alone,
                               lambda r: low < r < high)
        assert low < ratio < high, (name, ratio)


@pytest.mark.parametrize("mask,n", [(abi.RKNN_NPU_CORE_0_1, 2), (abi.RKNN_NPU_CORE_0_1_2, 3)])
def test_a_multi_core_run_lasts_what_its_layers_make(mask, n):
    """PERF_RUN of a multi-core run = each layer's single-core time under the law, split
    ops 1.3x / 1.6x faster plus the switch cost, the rest whole on core 0, plus the SoC's
    fixed cost per run (the Input/OutputOperator rows are inside it)."""
    report = models.load_report("yolov5s_relu")
    law = timing_law.law_for("rk3588")
    times = npu.layer_times(report, "rk3588", mask)
    by_hand, split = law.run_s, 0
    for layer, timing in zip(report.layers, times):
        one_core = timing_law.layer_seconds(layer, law)
        if layer["op"] in ("InputOperator", "OutputOperator"):
            assert not timing.counted
            continue
        if layer["target"] == "NPU" and layer["op"] in npu.SPLIT_OPS:
            expected, cores = one_core / {2: 1.3, 3: 1.6}[n] + npu.CORE_SWITCH_S, tuple(range(n))
            split += 1
        else:
            expected, cores = one_core, ((0,) if layer["target"] == "NPU" else ())
        assert (timing.seconds, timing.cores) == (pytest.approx(expected, rel=1e-12), cores), layer["op"]
        by_hand += expected
    assert split > 20 and npu.run_seconds_of(times, "rk3588") == pytest.approx(by_hand, rel=1e-12)
    assert modeled_run_ms("yolov5s_relu", "rk3588", mask) == pytest.approx(by_hand * 1e3, rel=1e-12)
    rt = SimRuntime("rk3588")
    ctx = _ready(rt, "yolov5s_relu", mask)
    assert rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration == round(by_hand * 1e6)
    rt.close()


def test_core_masks_follow_the_soc():
    single = SimRuntime("rk3568")
    ctx = single.init(str(models.model_path("digits_cnn", "rk3568")))
    single.set_core_mask(ctx, abi.RKNN_NPU_CORE_0)
    with pytest.raises(errors.RknnParamInvalidError, match="1 NPU core"):
        single.set_core_mask(ctx, abi.RKNN_NPU_CORE_1)
    dual = SimRuntime("rk3576")
    ctx = dual.init(str(models.model_path("digits_cnn", "rk3576")))
    dual.set_core_mask(ctx, abi.RKNN_NPU_CORE_0_1)
    with pytest.raises(errors.RknnParamInvalidError, match="CORE_0_1"):
        dual.set_core_mask(ctx, abi.RKNN_NPU_CORE_0_1_2)
    single.close()
    dual.close()


SOCS = ("rk3588", "rk3576", "rk3568", "rk3562")


def _a20() -> str:
    from rknnlab.sim import ASSUMPTIONS
    return {key: assumption for key, assumption, _ in ASSUMPTIONS}["A20"]


def test_a20_quotes_the_fit_errors_the_law_gives_today() -> None:
    text = _a20()
    points = timing_law.calibration_points()
    worst = max(abs(error) for error in timing_law.residuals(points).values())
    assert f"Every calibration row is within {math.ceil(worst * 100)} %" in text
    assert f"(the smallest calibration network takes {min(p.seconds for p in points) * 1e3:.1f} ms)" in text


def test_a20_quotes_the_errors_on_rows_the_fit_never_saw() -> None:
    """The zoo's rows kept out of the fit (rknnlab.profile.timing.published_fps) judge the
    law; A20 quotes the error of each as the simulator gives it today."""
    from rknnlab.profile import timing
    fitted = {(p.model, p.soc) for p in timing_law.calibration_points()}
    judge = {key: fps for key, fps in timing.published_fps().items() if key not in fitted}
    assert set(judge) == {("yolov5s", soc) for soc in SOCS} | {("ppocr_det", soc) for soc in SOCS} | \
        {("yolov5n", "rk3588"), ("yolov5m", "rk3588")}
    error = {key: modeled_run_ms(*key, abi.RKNN_NPU_CORE_0) / (1e3 / fps) - 1 for key, fps in judge.items()}
    text = _a20()
    silu = [error[("yolov5s", soc)] * 100 for soc in SOCS]
    assert f"yolov5s (SiLU) {min(silu):+.0f} % to {max(silu):+.0f} %" in text
    for model in ("yolov5n", "yolov5m"):
        assert f"{model} rk3588 {error[(model, 'rk3588')] * 100:+.0f} %" in text, model
    ppocr = text[text.index("ppocr_det"):]
    quoted = ", ".join(f"{soc} {error[('ppocr_det', soc)] * 100:+.0f} %" for soc in SOCS)
    assert quoted in ppocr, quoted

