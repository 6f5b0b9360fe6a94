"""The modeled NPU: calibration against the model zoo, blocking runs, cores."""
from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime, npu

ZOO_SECONDS = dict(npu.CALIBRATION_POINTS)  # rk3588 single core, facts sheet section 5


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


def test_calibration_constants_follow_from_the_reports():
    (fast, fast_s), (slow, slow_s) = npu.CALIBRATION_POINTS
    clock = npu.SOCS["rk3588"].clock_hz
    scale, overhead = npu.calibrate(models.load_report(fast).npu_cycles, fast_s,
                                    models.load_report(slow).npu_cycles, slow_s, clock)
    assert scale == pytest.approx(npu.CYCLE_TIME_SCALE, rel=1e-4)
    assert overhead == pytest.approx(npu.RUN_OVERHEAD_S, rel=1e-4)
    for name, zoo in npu.CALIBRATION_POINTS:
        modeled = npu.run_seconds(models.load_report(name).npu_cycles, "rk3588")
        assert modeled == pytest.approx(zoo, rel=0.15)


def _first_passing(measure: Callable[[], float], check: Callable[[float], bool], attempts: int = 3) -> float:
    """Measure until ``check`` holds, at most ``attempts`` times: wall-time tests
    on a shared machine need a second chance when another process grabs the CPU.
    Returns the last measurement (assert ``check`` on it)."""
    for _ in range(attempts):
        value = measure()
        if check(value):
            break
    return value


@pytest.mark.parametrize("name,runs", [("mobilenet_v2", 9), ("yolov5s_relu", 5)])
def test_run_blocks_for_the_modeled_time(rt, name, runs):
    ctx = _ready(rt, name)
    expected = pytest.approx(ZOO_SECONDS[name], rel=0.15)
    assert _first_passing(lambda: _median_run(rt, ctx, runs), lambda t: t == expected) == expected
    perf = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN)
    assert perf.run_duration == round(npu.run_seconds(models.load_report(name).npu_cycles, "rk3588") * 1e6)


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
    alone = runs * ZOO_SECONDS["mobilenet_v2"]
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


def test_a_multi_core_run_lasts_what_its_layers_make():
    """PERF_RUN of a CORE_0_1_2 run = the report's layer times on three cores
    (split ops 1.6x faster plus the switch cost, the rest on core 0) + overhead."""
    report = models.load_report("yolov5s_relu")
    times = npu.layer_times(report, "rk3588", abi.RKNN_NPU_CORE_0_1_2)
    by_hand = npu.RUN_OVERHEAD_S
    for layer, timing in zip(report.layers, times):
        if layer["target"] != "NPU":
            continue
        one_core = npu.CYCLE_TIME_SCALE * layer["cycles_total"] / npu.SOCS["rk3588"].clock_hz
        by_hand += (one_core / 1.6 + npu.CORE_SWITCH_S) if layer["op"] in npu.SPLIT_OPS else one_core
    assert npu.run_seconds_of(times) == pytest.approx(by_hand, rel=1e-12)
    rt = SimRuntime("rk3588")
    ctx = _ready(rt, "yolov5s_relu", abi.RKNN_NPU_CORE_0_1_2)
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


#: the RKNN model zoo README (v2.3.2, "Model performance benchmark(FPS)", RK3588 and RK3576
#: single core): the published figures A20 compares the timing law with
ZOO_FPS_V232 = {("yolov5s", "rk3588"): 48.4, ("yolov5s", "rk3576"): 57.5,
                ("yolov5s", "rk3568"): 19.3, ("yolov5s", "rk3562"): 23.6,
                ("mobilenet_v2", "rk3576"): 467.0, ("mobilenet_v2", "rk3568"): 180.7,
                ("mobilenet_v2", "rk3562"): 281.3}


def test_a20_quotes_the_errors_the_timing_law_gives_today() -> None:
    from rknnlab.sim import ASSUMPTIONS, modeled_run_ms
    text = {key: assumption for key, assumption, _ in ASSUMPTIONS}["A20"]
    assert "yolov5s_relu (66.1)" in text and "mobilenet_v2 (450.7)" in text
    for (model, soc), fps in ZOO_FPS_V232.items():
        error = modeled_run_ms(model, soc, abi.RKNN_NPU_CORE_0) / (1e3 / fps) - 1
        assert f"{soc} {fps:g} FPS {error * 100:+.0f} %" in text, (model, soc, error)
    # the SiLU figures: the law models yolov5s as fast as yolov5s_relu (same cycles)
    assert modeled_run_ms("yolov5s", "rk3588") == pytest.approx(modeled_run_ms("yolov5s_relu", "rk3588"))


#: the same README's ppocrv4_det [1,3,480,480] INT8 row (RK3566/68, RK3562, RK3588 and RK3576 single core)
PPOCR_DET_ZOO_FPS_V232 = {"rk3588": 50.7, "rk3576": 64.3, "rk3568": 22.1, "rk3562": 28.0}


def test_a20_quotes_ppocr_det_against_the_zoo_and_why() -> None:
    from rknnlab.sim import ASSUMPTIONS, modeled_run_ms
    text = {key: assumption for key, assumption, _ in ASSUMPTIONS}["A20"]
    for soc, fps in PPOCR_DET_ZOO_FPS_V232.items():
        modeled = modeled_run_ms("ppocr_det", soc, abi.RKNN_NPU_CORE_0)
        assert f"{soc} {modeled:.2f} ms" in text, (soc, modeled)
        assert f"{soc} {fps:.1f} FPS {(modeled / (1e3 / fps) - 1) * 100:+.0f} %" in text, (soc, modeled)
    layers = models.load_report("ppocr_det", "rk3588").layers
    idle = [layer for layer in layers if layer["cycles_total"] == 0]
    idle_npu = [layer for layer in idle if layer["target"] == "NPU"]
    moved = sum(layer["rw_kb"] for layer in idle_npu)
    npu_moved = sum(layer["rw_kb"] for layer in layers if layer["target"] == "NPU")
    assert f"{len(idle)} of its {len(layers)} rk3588 layers ({len(idle_npu)} on the NPU" in text
    assert f"{moved:,.0f} KB of the {npu_moved:,.0f} KB" in text
    ratios = [1e3 / fps / modeled_run_ms("ppocr_det", soc, abi.RKNN_NPU_CORE_0)
              for soc, fps in PPOCR_DET_ZOO_FPS_V232.items()]
    assert f"{min(ratios):.1f} to {max(ratios):.1f} times" in text and f"({ratios[0]:.1f} times on rk3588)" in text
