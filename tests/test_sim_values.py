"""Output values: the ONNX twin through real conversions, the stand-in, zero-copy."""
from __future__ import annotations

import re

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers
from rknnlab.sim import SimRuntime
from rknnlab.sim.model import identify

ort = pytest.importorskip("onnxruntime")


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _init(rt: SimRuntime, name: str) -> int:
    return rt.init(str(models.model_path(name)))


def _get(rt: SimRuntime, ctx: int, index: int = 0, want_float: int = 1) -> np.ndarray:
    output = abi.rknn_output(want_float=want_float, index=index)
    rt.outputs_get(ctx, [output])
    values = buffers.output_view(output, np.float32 if want_float else np.int8).copy()
    rt.outputs_release(ctx, [output])
    return values


def _set(rt: SimRuntime, ctx: int, image: np.ndarray, fmt: int = abi.RKNN_TENSOR_NHWC) -> None:
    rt.inputs_set(ctx, [buffers.input_from_array(0, np.ascontiguousarray(image), fmt)])


def _twin(name: str):
    return ort.InferenceSession(str(models.load_report(name).onnx_path), providers=["CPUExecutionProvider"])


def _normalised_nchw(name: str, image_nhwc: np.ndarray) -> np.ndarray:
    build = models.load_report(name).data["build"]
    x = (image_nhwc.astype(np.float32) - np.float32(build["mean_values"])) / np.float32(build["std_values"])
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32)


def test_mobilenet_matches_the_fp32_twin_within_quantization_error(rt):
    """The simulator's int8 output is the twin's output on the int8-quantized
    input, quantized with the output's zp/scale (saturating at the calibrated
    range): equal to within one output step.  (Seeded-random weights: the
    values are numbers, not predictions.)"""
    ctx = _init(rt, "mobilenet_v2")
    in_attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    out_attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    image = np.random.default_rng(7).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    _set(rt, ctx, image)
    rt.run(ctx)
    got = _get(rt, ctx, want_float=0).astype(np.int32)

    x = _normalised_nchw("mobilenet_v2", image)
    q_in = np.clip(np.round(x / in_attr.scale) + in_attr.zp, -128, 127)
    expected = _twin("mobilenet_v2").run(None, {"input": ((q_in - in_attr.zp) * in_attr.scale).astype(np.float32)})[0]
    q_out = np.clip(np.round(expected.ravel() / out_attr.scale) + out_attr.zp, -128, 127).astype(np.int32)
    assert np.abs(got - q_out).max() <= 1
    # and the outputs really depend on the input: another image moves them by many steps
    _set(rt, ctx, image[:, ::-1].copy())
    rt.run(ctx)
    assert np.abs(_get(rt, ctx, want_float=0).astype(np.int32) - got).max() > 4


def test_outputs_follow_the_input(rt):
    ctx = _init(rt, "digits_cnn")
    images = np.load(models.load_report("digits_cnn").directory / "testset.npz", allow_pickle=False)["images"]
    results = []
    for image in images[:2]:
        _set(rt, ctx, image[None], abi.RKNN_TENSOR_NCHW)
        rt.run(ctx)
        results.append(_get(rt, ctx, want_float=0))
    assert not np.array_equal(results[0], results[1])


def test_digits_predictions_on_the_shipped_test_set(rt):
    ctx = _init(rt, "digits_cnn")
    data = np.load(models.load_report("digits_cnn").directory / "testset.npz", allow_pickle=False)
    images, labels = data["images"], data["labels"]  # uint8 NCHW (N, 1, 8, 8)
    twin = _twin("digits_cnn")
    name = twin.get_inputs()[0].name
    fp32 = np.array([twin.run(None, {name: im[None].astype(np.float32) / 255})[0].argmax() for im in images])
    predicted = []
    for image in images:
        _set(rt, ctx, image[None], abi.RKNN_TENSOR_NCHW)  # NCHW in, native NHWC with w_stride
        rt.run(ctx)
        predicted.append(_get(rt, ctx, want_float=0).argmax())
    predicted = np.array(predicted)
    assert (predicted == fp32).mean() >= 0.95
    assert (predicted == labels).mean() >= 0.9


def test_input_type_and_format_do_not_change_what_the_npu_sees(rt):
    ctx = _init(rt, "mobilenet_v2")
    image = np.random.default_rng(3).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    _set(rt, ctx, image)
    rt.run(ctx)
    reference = _get(rt, ctx, want_float=0)
    for array, fmt in ((image.transpose(0, 3, 1, 2), abi.RKNN_TENSOR_NCHW),
                       (image.astype(np.float32), abi.RKNN_TENSOR_NHWC),
                       (image.astype(np.float16).transpose(0, 3, 1, 2), abi.RKNN_TENSOR_NCHW)):
        _set(rt, ctx, array, fmt)
        rt.run(ctx)
        assert (_get(rt, ctx, want_float=0) == reference).all()


def test_pass_through_takes_native_bytes_as_they_are(rt):
    ctx = _init(rt, "digits_cnn")
    native = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    image = np.arange(64, dtype=np.uint8).reshape(1, 8, 8, 1) * 3
    _set(rt, ctx, image)
    rt.run(ctx)
    reference = _get(rt, ctx, want_float=0)
    # quantize by hand: (x / 255) / scale + zp, rows padded to w_stride
    q = np.clip(np.rint(image / 255 / native.scale) + native.zp, -128, 127).astype(np.int8)
    padded = np.zeros((1, 8, native.w_stride, 1), np.int8)
    padded[:, :, :8, :] = q
    assert padded.nbytes == native.size_with_stride
    rt.inputs_set(ctx, [buffers.input_from_array(0, padded, native.fmt, abi.RKNN_TENSOR_INT8, pass_through=1)])
    rt.run(ctx)
    assert (_get(rt, ctx, want_float=0) == reference).all()


def test_repeated_input_is_served_from_the_cache(rt):
    ctx = _init(rt, "mobilenet_v2")
    values = identify(models.model_path("mobilenet_v2").read_bytes()).values
    _set(rt, ctx, np.full((1, 224, 224, 3), 77, np.uint8))
    rt.run(ctx)
    before = values.inferences
    for _ in range(3):
        rt.run(ctx)
    assert values.inferences == before
    _set(rt, ctx, np.full((1, 224, 224, 3), 78, np.uint8))
    rt.run(ctx)
    assert values.inferences == before + 1


def test_stand_in_outputs_are_deterministic_and_follow_the_input(rt):
    ctx = _init(rt, "yolov5s")
    image = np.zeros((1, 640, 640, 3), np.uint8)
    outs = []
    for value in (0, 0, 1):
        image[0, 0, 0, 0] = value
        _set(rt, ctx, image)
        rt.run(ctx)
        outs.append(_get(rt, ctx, index=2, want_float=0))
    assert outs[0].size == 255 * 20 * 20
    assert (outs[0] == outs[1]).all() and not (outs[0] == outs[2]).all()


def test_zero_copy_native_mems_equal_outputs_get(rt):
    """yolov5s: input NHWC int8, outputs NC1HWC2; write the native input into a
    bound mem, run, read the bound output mems."""
    ctx = _init(rt, "yolov5s")
    n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    in_attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    in_mem = rt.create_mem(ctx, in_attr.size_with_stride)
    rt.set_io_mem(ctx, in_mem, in_attr)
    out_attrs, out_mems = [], []
    for i in range(n.n_output):
        attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
        assert attr.fmt == abi.RKNN_TENSOR_NC1HWC2
        mem = rt.create_mem(ctx, attr.size_with_stride)
        rt.set_io_mem(ctx, mem, attr)
        out_attrs.append(attr)
        out_mems.append(mem)
    native_input = np.random.default_rng(5).integers(-128, 128, in_attr.size_with_stride).astype(np.int8)
    buffers.mem_view(in_mem, np.int8)[:] = native_input
    rt.mem_sync(ctx, in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
    rt.run(ctx)
    # the NPU read the bound mem: the same bytes passed through another context give the same outputs
    other = _init(rt, "yolov5s")
    rt.inputs_set(other, [buffers.input_from_array(0, native_input, in_attr.fmt, pass_through=1)])
    rt.run(other)
    for i, (attr, mem) in enumerate(zip(out_attrs, out_mems)):
        rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
        native = buffers.mem_view(mem, np.int8, shape=tuple(attr.dims[:5]))  # N C1 H W C2
        plain = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
        channels = plain.dims[1]
        nchw = native.transpose(0, 1, 4, 2, 3).reshape(1, -1, attr.dims[2], attr.dims[3])[:, :channels]
        got = _get(rt, ctx, index=i, want_float=0).reshape(nchw.shape)
        assert (got == nchw).all()
        assert (_get(rt, other, index=i, want_float=0).reshape(nchw.shape) == nchw).all()
        as_float = _get(rt, ctx, index=i, want_float=1).reshape(nchw.shape)
        assert np.allclose(as_float, (nchw.astype(np.float32) - plain.zp) * plain.scale)


def test_bound_uint8_input_and_float_output_are_converted_by_the_runtime(rt):
    """The model zoo's zero-copy pattern: a UINT8 input mem holding raw pixels,
    a FLOAT32 NCHW output mem; same values as inputs_set / outputs_get."""
    ctx = _init(rt, "mobilenet_v2")
    image = np.random.default_rng(11).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    _set(rt, ctx, image)
    rt.run(ctx)
    reference = _get(rt, ctx)

    other = _init(rt, "mobilenet_v2")
    in_attr = rt.query(other, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    in_attr.type = abi.RKNN_TENSOR_UINT8
    in_mem = rt.create_mem(other, in_attr.size_with_stride)
    rt.set_io_mem(other, in_mem, in_attr)
    out_attr = rt.query(other, abi.RKNN_QUERY_OUTPUT_ATTR)
    out_attr.type = abi.RKNN_TENSOR_FLOAT32
    out_mem = rt.create_mem(other, out_attr.n_elems * 4)
    rt.set_io_mem(other, out_mem, out_attr)
    buffers.mem_view(in_mem)[:] = image.ravel()
    rt.run(other)
    assert (buffers.mem_view(out_mem, np.float32) == reference).all()


def test_yolov5n_nc1hwc2_outputs_match_the_twin(rt):
    """Three NC1HWC2 outputs (255 channels in 16 blocks of 16), converted back to NCHW."""
    ctx = _init(rt, "yolov5n")
    yy, xx = np.mgrid[0:640, 0:640]
    image = np.stack([xx % 256, yy % 256, (xx * yy) % 256], -1)[None].astype(np.uint8)
    _set(rt, ctx, image)
    rt.run(ctx)
    twin = _twin("yolov5n")
    in_attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    q_in = np.clip(np.round(_normalised_nchw("yolov5n", image) / in_attr.scale) + in_attr.zp, -128, 127)
    x = ((q_in - in_attr.zp) * in_attr.scale).astype(np.float32)   # what the NPU sees
    expected = twin.run(None, {twin.get_inputs()[0].name: x})
    for i, reference in enumerate(expected):
        attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
        q_ref = np.clip(np.round(reference / attr.scale) + attr.zp, -128, 127)
        got = _get(rt, ctx, index=i, want_float=0).reshape(reference.shape).astype(np.int32)
        assert np.abs(got - q_ref).max() <= 1, f"output {i}"


def test_the_twin_values_assumption_names_every_model_by_its_value_source():
    """A61 lists the models whose values come from an fp32 twin and those that get the
    stand-in; the list must follow what ships (a model gaining or losing its twin)."""
    from rknnlab.sim import ASSUMPTIONS
    text = {key: assumption for key, assumption, _ in ASSUMPTIONS}["A61"]
    twin_part, stand_in_part = text.split("The other models", 1)
    for name in models.list_models():
        twin = models.load_report(name).values_twin_path
        has_twin = twin is not None and twin.exists()
        assert re.search(rf"\b{name}\b", twin_part if has_twin else stand_in_part), (name, has_twin)
        assert not re.search(rf"\b{name}\b", stand_in_part if has_twin else twin_part), (name, has_twin)
    assert "values_replayed" in text and "toolkit_int8.npz" in text
    assert "input and output quantisation only" in text
