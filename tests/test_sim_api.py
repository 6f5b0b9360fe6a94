"""rknnlab.open_runtime, the ASSUMPTIONS list, and contexts used from several threads."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import rknnlab
from rknnlab import models, sim
from rknnlab.rknn import abi, buffers
from rknnlab.rknn.runtime import Runtime

LIB = Path(__file__).resolve().parents[1] / "lib"


def test_open_runtime_sim(monkeypatch):
    monkeypatch.delenv("RKNNLAB_SIM_SOC", raising=False)
    rt = rknnlab.open_runtime("sim")
    assert isinstance(rt, Runtime) and rt.backend == "sim" and rt.soc == "rk3588"
    assert rknnlab.open_runtime("sim", soc="rk3576").soc == "rk3576"
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    assert rknnlab.open_runtime("sim").soc == "rk3568"


def test_open_runtime_auto_honours_the_environment(monkeypatch):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    assert rknnlab.open_runtime().backend == "sim"


def test_importing_rknnlab_stays_light():
    code = "import sys, rknnlab; print(sorted(m for m in ('numpy', 'onnxruntime', 'rknnlab.sim') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(LIB)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_assumptions_list_is_complete_and_printable():
    ids = [key for key, _, _ in sim.ASSUMPTIONS]
    assert len(ids) == len(set(ids)) == len(sim.ASSUMPTIONS)
    assert ids == [f"A{i}" for i in range(1, len(ids) + 1)]
    for key, assumption, check in sim.ASSUMPTIONS:
        assert assumption.strip() and check.strip()
        assert f"{key}: {assumption}" in sim.__doc__


def test_contexts_in_threads_do_not_disturb_each_other():
    """One context per thread, all running at once on the shared NPU."""
    rt = sim.SimRuntime("rk3588")
    data = np.load(models.load_report("digits_cnn").directory / "testset.npz", allow_pickle=False)
    images = data["images"][:12]
    expected = {}
    ctx = rt.init(str(models.model_path("digits_cnn")))
    for i, image in enumerate(images):
        rt.inputs_set(ctx, [buffers.input_from_array(0, np.ascontiguousarray(image[None]), abi.RKNN_TENSOR_NCHW)])
        rt.run(ctx)
        out = abi.rknn_output(want_float=0)
        rt.outputs_get(ctx, [out])
        expected[i] = buffers.output_view(out, np.int8).copy()
        rt.outputs_release(ctx, [out])
    contexts = [rt.dup_context(ctx) for _ in range(4)]
    failures = []

    def work(context: int, offset: int) -> None:
        try:
            for round_ in range(3):
                for j in range(len(images)):
                    i = (j + offset) % len(images)
                    image = np.ascontiguousarray(images[i][None])
                    rt.inputs_set(context, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NCHW)])
                    rt.run(context)
                    out = abi.rknn_output(want_float=0)
                    rt.outputs_get(context, [out])
                    if not (buffers.output_view(out, np.int8) == expected[i]).all():
                        failures.append((context, i))
                    rt.outputs_release(context, [out])
        except Exception as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(c, k * 3)) for k, c in enumerate(contexts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rt.close()
    assert failures == []


def test_query_does_not_wait_for_a_run_but_destroy_does():
    rt = sim.SimRuntime("rk3588")
    ctx = rt.init(str(models.model_path("yolov5s_relu")))
    image = np.zeros((1, 640, 640, 3), np.uint8)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    started, results = threading.Event(), []

    def run_once() -> None:
        started.set()
        results.append(rt.run(ctx))

    runner = threading.Thread(target=run_once)
    runner.start()
    started.wait()
    time.sleep(0.003)  # well inside the ~15 ms run
    begin = time.perf_counter()
    rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    queried = time.perf_counter() - begin
    rt.destroy(ctx)  # waits for the run to finish, then frees its buffers
    destroyed = time.perf_counter() - begin
    runner.join()
    assert results == [0]
    assert queried < 0.004 < destroyed
    rt.close()
