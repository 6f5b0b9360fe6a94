"""rknnlab.lite.RKNNLite: rknn-toolkit-lite2 2.5.0's class interface, on the simulator and
(handing every call over) on a board.

The interface is checked against tests/fixtures/rknnlite_2_5_0_interface.json, written
down by hand from the 2.5.0 wheel's rknn_lite.py (names, parameters, defaults, constants,
return conventions)."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rknnlab import lite as lite_module
from rknnlab import models
from rknnlab.lite import RKNNLite, provide_rknnlite_api, using_runtime
from rknnlab.rknn import abi
from rknnlab.sim import ASSUMPTIONS, SimRuntime

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "rknnlite_2_5_0_interface.json").read_text())


def model(name: str = "mobilenet_v2", soc: str = "rk3588") -> str:
    return str(models.model_path(name, soc))


def frame(seed: int = 0, shape=(1, 224, 224, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


@pytest.fixture
def sim_lite(monkeypatch):
    """A fresh RKNNLite on a simulated RK3588, released afterwards."""
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    made = []

    def make(name: str = "mobilenet_v2", soc: str = "rk3588", **init):
        lite = RKNNLite()
        assert lite.load_rknn(model(name, soc)) == 0
        assert lite.init_runtime(**init) == 0  # target None: the SoC the model was built for
        made.append(lite)
        return lite
    yield make
    for lite in made:
        lite.release()


# --------------------------------------------------------------------------- the interface
def test_constants_are_the_wheels():
    for name, value in FIXTURE["constants"].items():
        assert getattr(RKNNLite, name) == value, name
    public_constants = {n for n in vars(RKNNLite) if n.isupper()}
    assert public_constants == set(FIXTURE["constants"])


def test_every_method_has_the_wheels_signature():
    for method, spec in FIXTURE["methods"].items():
        params = list(inspect.signature(getattr(RKNNLite, method)).parameters.values())[1:]
        assert [p.name for p in params] == [p[0] for p in spec["params"]], method
        for param, recorded in zip(params, spec["params"]):
            if len(recorded) == 1:
                assert param.default is inspect.Parameter.empty, (method, param.name)
                continue
            expected = getattr(RKNNLite, recorded[1]) if recorded[1].isupper() else eval(recorded[1])
            assert param.default == expected and type(param.default) is type(expected), (method, param.name)
            assert param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def test_no_public_method_the_wheel_lacks():
    ours = {n for n, v in vars(RKNNLite).items() if callable(v) and not n.startswith("_")}
    assert ours == set(FIXTURE["methods"]) - {"__init__"}


def test_the_public_attributes_of_a_new_object(monkeypatch, capsys):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    lite = RKNNLite()
    for name in FIXTURE["attributes_after_init"]:
        assert hasattr(lite, name), name
    assert lite.rknn_data is None and lite.rknn_runtime is None
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("W rknn-toolkit-lite2 version: 2.5.0")


@pytest.mark.skipif(not os.environ.get("RKNNLITE_WHEEL_DIR"),
                    reason="set RKNNLITE_WHEEL_DIR to an unpacked rknn-toolkit-lite2 2.5.0 wheel")
def test_the_fixture_matches_the_wheel():
    """With the wheel unpacked (pip download rknn-toolkit-lite2==2.5.0 --no-deps --platform
    manylinux_2_17_aarch64 --only-binary=:all:, then unzip), its rknn_lite.py is read with ast
    and compared with the fixture: the file's hash, constants, methods, parameters, defaults."""
    import ast
    import hashlib
    source = Path(os.environ["RKNNLITE_WHEEL_DIR"]) / FIXTURE["source"]["file"]
    data = source.read_bytes()
    assert hashlib.sha256(data).hexdigest() == FIXTURE["source"]["file_sha256"]
    cls = next(n for n in ast.parse(data).body if isinstance(n, ast.ClassDef) and n.name == "RKNNLite")
    constants = {n.targets[0].id: ast.literal_eval(n.value) for n in cls.body if isinstance(n, ast.Assign)}
    assert constants == FIXTURE["constants"]
    methods = {}
    for n in cls.body:
        if isinstance(n, ast.FunctionDef):
            args = [a.arg for a in n.args.args][1:]
            defaults = [ast.unparse(d) for d in n.args.defaults]
            params = [[a] for a in args[:len(args) - len(defaults)]]
            params += [[a, d] for a, d in zip(args[len(args) - len(defaults):], defaults)]
            methods[n.name] = params
    assert methods == {name: spec["params"] for name, spec in FIXTURE["methods"].items()}


# --------------------------------------------------------------------------- load / init / release
def test_load_rknn_keeps_the_whole_file_as_bytes_until_the_object_goes(sim_lite):
    lite = sim_lite()
    data = Path(model()).read_bytes()
    assert isinstance(lite.rknn_data, bytes) and lite.rknn_data == data
    lite.release()
    assert lite.rknn_runtime is None and lite.rknn_data == data  # release frees only the runtime


def test_a_missing_model_is_minus_one_with_an_e_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    lite = RKNNLite()
    assert lite.load_rknn(str(tmp_path / "nope.rknn")) == -1
    assert f"E Invalid RKNN model path: {tmp_path / 'nope.rknn'}" in capsys.readouterr().out
    assert lite.init_runtime() == -1
    assert "E Model is not loaded yet" in capsys.readouterr().out


def test_a_corrupt_model_fails_init_runtime_not_load(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model at all")
    lite = RKNNLite()
    assert lite.load_rknn(str(bad)) == 0
    assert lite.init_runtime() == -1
    out = capsys.readouterr().out
    assert "E Catch exception when init runtime!" in out and "RKNN" in out
    assert lite.inference(inputs=[frame()]) is None


def test_inference_before_init_runtime_is_none(monkeypatch, capsys):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    lite = RKNNLite()
    lite.load_rknn(model())
    assert lite.inference(inputs=[frame()]) is None
    assert "E Runtime environment is not inited" in capsys.readouterr().out


def test_init_runtime_twice_releases_the_first_context(monkeypatch):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    rt = SimRuntime("rk3588")
    with using_runtime(rt):
        lite = RKNNLite()
        lite.load_rknn(model("digits_cnn"))
        assert lite.init_runtime() == 0 and lite.init_runtime() == 0
        assert len(rt._contexts) == 1
        lite.release()
        assert len(rt._contexts) == 0


def test_the_target_picks_the_simulated_soc_and_a_model_of_another_soc_fails(monkeypatch, capsys):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    lite = RKNNLite()
    lite.load_rknn(model("digits_cnn", "rk3568"))
    assert lite.init_runtime(target="rk3568") == 0
    assert lite.inference(inputs=[frame(shape=(1, 8, 8, 1))])[0].shape[-1] == 10
    assert lite.init_runtime(target="rk3588") == -1
    assert "E Catch exception when init runtime!" in capsys.readouterr().out
    assert lite.init_runtime(target="rk9999") == -1
    assert "E Unsupported target: rk9999!" in capsys.readouterr().out
    lite.release()


def test_core_masks(sim_lite, monkeypatch, capsys):
    assert sim_lite("digits_cnn", core_mask=RKNNLite.NPU_CORE_0_1_2) is not None
    capsys.readouterr()
    rk3576 = sim_lite("digits_cnn", "rk3576", core_mask=RKNNLite.NPU_CORE_2)  # two cores: replaced
    assert 'The RK3576 platform has only two NPU cores. "NPU_CORE_2" is not supported and will be ' \
           'automatically replaced with "NPU_CORE_0".' in capsys.readouterr().out
    assert rk3576.rknn_runtime.rt.soc == "rk3576"  # played without a target: the model's SoC
    assert sim_lite("digits_cnn", "rk3576", core_mask=RKNNLite.NPU_CORE_0_1_2) is not None
    assert '"NPU_CORE_0_1_2" is not supported and will be automatically replaced with "NPU_CORE_0_1"' \
        in capsys.readouterr().out
    one = sim_lite("digits_cnn", "rk3568", core_mask=RKNNLite.NPU_CORE_0)  # ignored (A69)
    assert "W The core_mask is only supported by RK3576 / RK3588. Please do not set this parameter" \
        in capsys.readouterr().out
    assert one.inference(inputs=[frame(shape=(1, 8, 8, 1))]) is not None
    lite = RKNNLite()
    lite.load_rknn(model("digits_cnn"))
    assert lite.init_runtime(core_mask=8) == -1
    assert "E The core mode 8 is not supported currently." in capsys.readouterr().out
    assert lite.init_runtime(core_mask=None) == -1  # -1 with an E line, not a TypeError
    assert "E The core mode None is not supported currently." in capsys.readouterr().out
    assert lite.inference(inputs=[frame(shape=(1, 8, 8, 1))]) is None  # the failed runtime stays
    assert "E Catch exception when setting inputs." in capsys.readouterr().out
    lite.release()
    lite.release()


def test_without_a_target_the_simulator_plays_the_soc_the_model_was_built_for(monkeypatch, capsys):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    monkeypatch.delenv("RKNNLAB_SIM_SOC", raising=False)
    lite = RKNNLite()
    lite.load_rknn(model("digits_cnn", "rk3568"))
    assert lite.init_runtime() == 0 and lite.rknn_runtime.rt.soc == "rk3568"
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3588")
    capsys.readouterr()
    assert lite.init_runtime() == -1
    out = capsys.readouterr().out
    assert "RKNN_ERR_TARGET_PLATFORM_UNMATCH" in out and "RKNNLAB_SIM_SOC" in out
    lite.release()


def test_what_the_simulator_does_not_model_is_refused(sim_lite, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    lite = RKNNLite()
    lite.load_rknn(model("digits_cnn"))
    assert lite.init_runtime(async_mode=True) == -1
    assert "async_mode=True is not simulated" in capsys.readouterr().out
    key = tmp_path / "model_key.bin"
    key.write_bytes(b"k" * 32)
    assert lite.load_rknn(model("digits_cnn"), key_path=str(key)) == 0
    assert lite.init_runtime() == -1
    assert "encrypted models" in capsys.readouterr().out
    assert lite.load_rknn(model("digits_cnn"), key_path=str(tmp_path / "none.bin")) == -1


# --------------------------------------------------------------------------- inference
def test_outputs_are_the_c_api_float_outputs(sim_lite):
    lite = sim_lite()
    x = frame(3)
    outputs = lite.inference(inputs=[x])
    rt = SimRuntime("rk3588")
    ctx = rt.init(model())
    rt.inputs_set(ctx, [abi.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes, type=abi.RKNN_TENSOR_UINT8,
                                       fmt=abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    out = [abi.rknn_output(index=0, want_float=1)]
    rt.outputs_get(ctx, out)
    expected = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_float * (out[0].size // 4)).from_address(out[0].buf)).copy()
    rt.outputs_release(ctx, out)
    rt.destroy(ctx)
    assert len(outputs) == 1 and outputs[0].dtype == np.float32 and outputs[0].shape == (1, 1000)
    np.testing.assert_array_equal(outputs[0].ravel(), expected)


def test_each_call_returns_new_arrays_by_default(sim_lite):
    lite = sim_lite()
    first = lite.inference(inputs=[frame(1)])
    kept = first[0].copy()
    second = lite.inference(inputs=[frame(2)])
    assert not np.shares_memory(first[0], second[0])
    np.testing.assert_array_equal(first[0], kept)  # the next call left them alone
    assert not np.array_equal(first[0], second[0])


def test_reuse_outputs_returns_views_the_next_call_overwrites(sim_lite):
    lite = sim_lite()
    first = lite.inference(inputs=[frame(1)], reuse_outputs=True)
    values_of_first = first[0].copy()
    second = lite.inference(inputs=[frame(2)], reuse_outputs=True)
    values_of_second = second[0].copy()
    assert not np.array_equal(values_of_first, values_of_second)
    np.testing.assert_array_equal(first[0], values_of_second)  # overwritten
    assert np.shares_memory(first[0], second[0])
    # the same values as the default path
    np.testing.assert_array_equal(values_of_first, lite.inference(inputs=[frame(1)])[0])


def test_reuse_outputs_allocates_nothing_per_call_and_the_default_allocates_the_outputs(sim_lite):
    import tracemalloc
    lite = sim_lite()
    frames = [frame(i) for i in range(3)]  # the simulator keeps the outputs of its last 4 inputs
    for reuse in (True, False):
        for x in frames:
            lite.inference(inputs=[x], reuse_outputs=reuse)
    tracemalloc.start()
    try:
        grown = {}
        for reuse in (True, False):
            kept = []
            before = tracemalloc.get_traced_memory()[0]
            for i in range(6):
                kept.append(lite.inference(inputs=[frames[i % 3]], reuse_outputs=reuse))
            grown[reuse] = (tracemalloc.get_traced_memory()[0] - before) / 6
            del kept
    finally:
        tracemalloc.stop()
    assert grown[True] < 1500, grown  # views and lists only: no output buffer per call
    assert grown[False] >= 4000, grown  # 1000 float32 (4,000 bytes) per call, kept


def test_a_dynamic_shape_model_follows_the_fed_shape_and_its_buffers_only_grow(sim_lite, capsys):
    lite = sim_lite("mobilenet_v2_dynamic")
    assert "Query dynamic range failed" not in capsys.readouterr().out
    session = lite.rknn_runtime
    sizes = []
    for side in (160, 320, 224):
        x = frame(side, (1, side, side, 3))
        outputs = lite.inference(inputs=[x], reuse_outputs=True)
        assert outputs is not None and outputs[0].shape == (1, 1000), side
        sizes.append(len(session.input_buffers[0]))
        nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))  # as Rockchip's dynamic-shape example feeds it
        again = lite.inference(inputs=[nchw], data_format=["nchw"])
        np.testing.assert_array_equal(again[0], outputs[0])
    assert sizes == [160 * 160 * 3, 320 * 320 * 3, 320 * 320 * 3]  # grown once, never shrunk
    assert lite.inference(inputs=[frame(shape=(1, 200, 200, 3))]) is None
    assert "Set shape for input[0] failed" in capsys.readouterr().out
    lite.release()
    assert session.staging == {} and session.input_buffers == {} and session.ctx == 0


def test_a_static_model_prints_the_boards_dynamic_range_warning(sim_lite, capsys):
    sim_lite("digits_cnn")
    # the line boards print (airockchip/rknn_model_zoo#271, lite2 2.3.0)
    assert "W Query dynamic range failed. Ret code: RKNN_ERR_MODEL_INVALID. (If it is a static shape RKNN " \
           "model, please ignore the above warning message.)" in capsys.readouterr().out


def test_several_outputs_with_reuse_outputs_and_frame_ids(sim_lite):
    lite = sim_lite("yolov5n")
    x1, x2 = frame(1, (1, 640, 640, 3)), frame(2, (1, 640, 640, 3))
    first = lite.inference(inputs=[x1], reuse_outputs=True, get_frame_id=True)
    kept = [o.copy() for o in first[:3]]
    second = lite.inference(inputs=[x2], reuse_outputs=True, get_frame_id=True)
    assert [o.shape for o in first[:3]] == [(1, 255, 80, 80), (1, 255, 40, 40), (1, 255, 20, 20)]
    assert second[3] == first[3] + 1
    for mine, theirs, old in zip(first[:3], second[:3], kept):
        np.testing.assert_array_equal(mine, theirs)  # overwritten by the second call
        assert not np.array_equal(old, theirs)
    lite.release()
    assert lite.inference(inputs=[x1]) is None


def test_the_inputs_are_checked_as_the_wheel_does(sim_lite, capsys):
    lite = sim_lite()
    capsys.readouterr()
    cases = [
        ([frame().astype(np.float64)], {}, "Unsupport inputs[0].dtype: float64"),
        ([frame()[:, :-1]], {}, "Size of inputs[0] is invalid!"),
        ([frame()], {"data_type": "int8"}, "inputs[0].dtype: uint8 is not same as data_type"),
        ([frame()], {"data_type": ["int8"]}, "inputs[0].dtype: uint8 is not same as data_type[0]"),
        (frame(), {}, "Inputs should be placed in a list"),
        ((frame(),), {}, "Inputs should be placed in a list"),
        ([frame()], {"data_type": "int64"}, "Unsupport data type: int64"),
        ([frame(), frame()], {}, "Inputs are invalid."),
        ([frame()], {"inputs_pass_through": [0, 0]}, "The lengths of inputs_pass_through and inputs are not equal."),
    ]
    for inputs, kwargs, message in cases:
        assert lite.inference(inputs=inputs, **kwargs) is None, message
        out = capsys.readouterr().out
        assert "E Catch exception when setting inputs." in out and message in out, (message, out)
    list_input = lite.inference(inputs=[[1, 2, 3]])
    assert list_input is None and "Type of inputs[0] is not np.ndarray!" in capsys.readouterr().out


def test_other_ways_to_feed_a_frame_give_the_same_outputs(sim_lite, capsys):
    lite = sim_lite()
    x = frame(5)
    reference = lite.inference(inputs=[x])[0]
    capsys.readouterr()
    nchw = lite.inference(inputs=[np.ascontiguousarray(x.transpose(0, 3, 1, 2))], data_format="nchw")[0]
    assert "need NHWC data format, but NCHW set" in capsys.readouterr().out
    np.testing.assert_array_equal(nchw, reference)
    hwc = lite.inference(inputs=[x[0]], data_type="uint8", data_format="nhwc")[0]
    assert "need 4dims input, but 3dims" in capsys.readouterr().out
    np.testing.assert_array_equal(hwc, reference)
    as_float = lite.inference(inputs=[x.astype(np.float32)])[0]  # the runtime quantizes float32
    np.testing.assert_array_equal(as_float, reference)


def test_get_frame_id_appends_the_frame_id(sim_lite):
    lite = sim_lite("digits_cnn")
    ids = [lite.inference(inputs=[frame(i, (1, 8, 8, 1))], get_frame_id=True)[-1] for i in range(3)]
    assert all(isinstance(i, int) for i in ids) and ids[1] == ids[0] + 1 and ids[2] == ids[1] + 1


def test_sdk_version_and_target_platforms(sim_lite, capsys, monkeypatch):
    lite = sim_lite("digits_cnn")
    assert lite.get_sdk_version().startswith("RKNN VERSION:\n  API: ")
    capsys.readouterr()
    listed = lite.list_support_target_platform(model("digits_cnn", "rk3568"))
    assert listed == {"support_target_platform": ["RK3566", "RK3568"], "filled_target_platform": ["RK3568"]}
    assert "Target platforms filled in RKNN model" in capsys.readouterr().out
    assert lite.list_support_target_platform(model("digits_cnn"))["support_target_platform"] == ["RK3588"]
    assert lite.list_support_target_platform("/no/such.rknn") is None
    assert lite.list_support_target_platform()["RKNPU2-LITE"] == ["RK3566", "RK3568"]
    assert lite.list_devices() == ([], [])


def test_no_zero_copy_only_the_general_api():
    """The wheel's I/O is inputs_set / outputs_get / outputs_release: the simulated class makes no
    mem and binds none (run through the harness, which records every runtime call)."""
    import rknnlab
    r = rknnlab.run(["lite_inference", "lite_reuse_outputs"], model="digits_cnn", iterations=20, warmup=2,
                    backend="sim", sample_hz=0, progress=False)
    assert r.errors == {}, r.errors
    for variant in ("lite_inference", "lite_reuse_outputs"):
        calls = r.calls[r.calls["variant"] == variant]
        counts = calls["function"].value_counts().to_dict()
        assert counts["inputs_set"] == counts["run"] == counts["outputs_get"] == counts["outputs_release"] == 22
        assert counts["init"] == counts["destroy"] == 1
        assert not {"create_mem", "create_mem2", "set_io_mem", "dup_context"} & set(counts)


# --------------------------------------------------------------------------- on a board
class _RecordingWheel:
    """Stands in for Rockchip's class on a board: records what it was handed."""
    calls: list = []

    def __init__(self, verbose=False, verbose_file=None):
        _RecordingWheel.calls.append(("__init__", (), {"verbose": verbose, "verbose_file": verbose_file}))
        self.rknn_data = b"real"

    def __getattr__(self, name):
        def method(*args, **kwargs):
            _RecordingWheel.calls.append((name, args, kwargs))
            return f"real {name}"
        return method

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


class _NativeRuntime:
    backend = "native"


def test_on_a_board_the_object_is_the_wheels(monkeypatch):
    import types
    api = types.ModuleType("rknnlite.api")
    api.RKNNLite = _RecordingWheel
    monkeypatch.setitem(sys.modules, "rknnlite", types.ModuleType("rknnlite"))
    monkeypatch.setitem(sys.modules, "rknnlite.api", api)
    _RecordingWheel.calls = []
    with using_runtime(_NativeRuntime()):
        lite = RKNNLite(verbose=True, verbose_file="/tmp/x.log")
        assert isinstance(lite, _RecordingWheel)  # every call, attribute and check is the wheel's
        lite.load_model_in_npu = True
        assert lite.load_model_in_npu is True
        assert lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0_1) == "real init_runtime"
    assert _RecordingWheel.calls[0] == ("__init__", (), {"verbose": True, "verbose_file": "/tmp/x.log"})
    assert _RecordingWheel.calls[1] == ("init_runtime", (), {"core_mask": 3})
    assert lite_module.made["wheel"] >= 1


def test_a_board_without_the_wheel_says_what_to_install(monkeypatch):
    assert lite_module.missing_wheel() is None  # the simulator
    monkeypatch.setitem(sys.modules, "rknnlite.api", None)  # import fails
    with using_runtime(_NativeRuntime()):
        with pytest.raises(ImportError, match="pip install rknn-toolkit-lite2"):
            RKNNLite()
        assert "pip install rknn-toolkit-lite2" in lite_module.missing_wheel()


# --------------------------------------------------------------------------- unchanged programs
PROGRAM_FOR_THE_WHEEL = textwrap.dedent("""\
    import numpy as np
    from rknnlite.api import RKNNLite

    rknn_lite = RKNNLite()
    ret = rknn_lite.load_rknn(MODEL)
    if ret != 0:
        print('Load RKNN model failed')
        exit(ret)
    ret = rknn_lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0)
    if ret != 0:
        print('Init runtime environment failed')
        exit(ret)
    img = np.zeros((224, 224, 3), dtype=np.uint8)
    img = np.expand_dims(img, 0)
    outputs = rknn_lite.inference(inputs=[img])
    print('top class', int(np.argmax(outputs[0])), outputs[0].shape)
    rknn_lite.release()
    """)


def test_provide_rknnlite_api_lets_a_program_for_the_wheel_run_unchanged(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text("import importlib.util, rknnlab.lite\nprint('api from', rknnlab.lite.provide_rknnlite_api())\n"
                      + "assert importlib.util.find_spec('rknnlite') is not None\n"
                      + f"MODEL = {model()!r}\n" + PROGRAM_FOR_THE_WHEEL)
    env = dict(os.environ, RKNNLAB_BACKEND="sim", PYTHONPATH=str(ROOT / "lib"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "api from rknnlab.lite" in done.stdout and "top class" in done.stdout and "(1, 1000)" in done.stdout


def test_provide_rknnlite_api_leaves_an_installed_wheel_alone(monkeypatch):
    import types
    real = types.ModuleType("rknnlite.api")
    real.RKNNLite = _RecordingWheel
    monkeypatch.setitem(sys.modules, "rknnlite.api", real)
    assert provide_rknnlite_api() == "rknnlite"
    assert sys.modules["rknnlite.api"] is real


def test_a_notebook_cell_written_for_rknnlite_runs_unchanged_on_the_simulator(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import rknnlab.lite\nrknnlab.lite.provide_rknnlite_api()\n"
                                          f"MODEL = {model()!r}"),
                nbformat.v4.new_code_cell(PROGRAM_FOR_THE_WHEEL)]
    env = dict(os.environ, RKNNLAB_BACKEND="sim")
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RKNNLAB_BACKEND", "sim")
        client.execute()
    text = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream")
    assert "top class" in text and "(1, 1000)" in text and "W rknn-toolkit-lite2 version: 2.5.0" in text
    assert not [o for c in nb.cells for o in c.outputs if o.get("output_type") == "error"]


# --------------------------------------------------------------------------- the assumptions
def test_the_simulated_class_names_its_assumptions():
    keys = {key for key, _, _ in ASSUMPTIONS}
    doc = lite_module.__doc__
    for key in ("A65", "A66", "A67", "A68", "A69", "A70", "A71"):
        assert key in keys and f"{key})" in doc or f"{key}:" in doc or f"{key}," in doc, key
    a71 = dict((k, a) for k, a, _ in ASSUMPTIONS)["A71"]
    assert "airockchip/rknn-toolkit2#42" in a71 and "42.43 kB" in a71 and "does not fake" in a71


def test_the_harness_labels_a_simulated_rknnlite_and_a_trace_keeps_the_label(tmp_path):
    import rknnlab
    from rknnlab.experiment import result as result_module
    from rknnlab.experiment import trace
    assert result_module._LITE_VERSION == lite_module.LITE_VERSION
    r = rknnlab.run(["lite_reuse_outputs", "prealloc_output"], model="digits_cnn", iterations=10, warmup=1,
                    backend="sim", sample_hz=0, progress=False)
    assert [run.rknnlite for run in r.runs] == ["simulated", None]
    line = next(ln for ln in r.describe().splitlines() if ln.startswith("RKNNLite in"))
    assert "lite_reuse_outputs" in line and "prealloc_output" not in line and "A65-A71" in line
    r.save(tmp_path / "t.json")
    again = trace.load(tmp_path / "t.json")
    assert [run.rknnlite for run in again.runs] == ["simulated", None]
    assert any(ln.startswith("RKNNLite in") for ln in again.describe().splitlines())
