"""Simulator: a dynamic-shape model (mobilenet_v2_dynamic, built with dynamic_input
160/224/320): RKNN_QUERY_INPUT_DYNAMIC_RANGE, rknn_set_input_shapes, the CURRENT_*
attrs, buffers sized once for the largest shape, io mems bound again after a shape
change, and each shape's own plan and time (ASSUMPTIONS A56)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime

MODEL = "mobilenet_v2_dynamic"


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def report():
    return models.load_report(MODEL, "rk3588")


def _nhwc(nchw):
    n, c, h, w = nchw
    return [n, h, w, c]


def _attr(rt, ctx, cmd, index=0):
    return rt.query(ctx, cmd, abi.rknn_tensor_attr(index=index))


def _dims(attr):
    return list(attr.dims[:attr.n_dims])


def _set_shape(rt, ctx, side: int, fmt: int = abi.RKNN_TENSOR_NHWC) -> None:
    attr = _attr(rt, ctx, abi.RKNN_QUERY_INPUT_ATTR)
    dims = [1, side, side, 3] if fmt == abi.RKNN_TENSOR_NHWC else [1, 3, side, side]
    attr.fmt = fmt
    for j, dim in enumerate(dims):
        attr.dims[j] = dim
    rt.set_input_shapes(ctx, [attr])


def _image(side: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(1, side, side, 3), dtype=np.uint8)


def _float_output(rt, ctx) -> np.ndarray:
    out = abi.rknn_output(index=0, want_float=1)
    rt.outputs_get(ctx, [out])
    values = buffers.output_view(out, np.float32).copy()
    rt.outputs_release(ctx, [out])
    return values


def test_dynamic_range_lists_the_compiled_shapes(rt, report):
    ctx = rt.init(str(models.model_path(MODEL)))
    got = rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=0))
    assert got.index == 0 and got.name == b"input" and got.fmt == abi.RKNN_TENSOR_NHWC and got.n_dims == 4
    expected = [_nhwc(entry["input_dims"][0]) for entry in report.dynamic_shapes]
    assert got.shape_number == 3 and got.shapes() == expected
    assert expected == [[1, 160, 160, 3], [1, 224, 224, 3], [1, 320, 320, 3]]
    with pytest.raises(errors.RknnParamInvalidError, match="index 1"):
        rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=1))


def test_nothing_runs_before_a_shape_is_set(rt, report):
    ctx = rt.init(str(models.model_path(MODEL)))
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_input_shapes"):
        rt.run(ctx)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_input_shapes"):
        rt.inputs_set(ctx, [buffers.input_from_array(0, _image(320), abi.RKNN_TENSOR_NHWC)])
    # until then the attrs are the largest shape's (the report's top level)
    for cmd in (abi.RKNN_QUERY_INPUT_ATTR, abi.RKNN_QUERY_CURRENT_INPUT_ATTR):
        assert _dims(_attr(rt, ctx, cmd)) == report.data["inputs"][0]["plain"]["dims"] == [1, 320, 320, 3]


@pytest.mark.parametrize("side", [160, 224, 320])
def test_current_attrs_follow_the_shape_set(rt, report, side):
    ctx = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, ctx, side)
    entry = next(e for e in report.dynamic_shapes if e["input_dims"] == [[1, 3, side, side]])
    for cmd, rows, kind in ((abi.RKNN_QUERY_CURRENT_INPUT_ATTR, entry["inputs"], "plain"),
                            (abi.RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR, entry["inputs"], "native"),
                            (abi.RKNN_QUERY_CURRENT_OUTPUT_ATTR, entry["outputs"], "plain"),
                            (abi.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR, entry["outputs"], "native")):
        got = _attr(rt, ctx, cmd)
        row = rows[0][kind]
        assert _dims(got) == row["dims"]
        assert (got.size, got.size_with_stride, got.n_elems) == (row["size"], row["size_with_stride"], row["n_elems"])
    # the plain queries keep answering the largest shape
    assert _dims(_attr(rt, ctx, abi.RKNN_QUERY_INPUT_ATTR)) == [1, 320, 320, 3]
    assert _attr(rt, ctx, abi.RKNN_QUERY_CURRENT_INPUT_ATTR).size == side * side * 3


def test_set_input_shapes_refuses_what_was_not_compiled(rt):
    ctx = rt.init(str(models.model_path(MODEL)))
    with pytest.raises(errors.RknnParamInvalidError) as caught:
        _set_shape(rt, ctx, 256)
    text = str(caught.value)
    assert "[1, 256, 256, 3]" in text
    for side in (160, 224, 320):
        assert f"[1, {side}, {side}, 3]" in text
    attr = _attr(rt, ctx, abi.RKNN_QUERY_INPUT_ATTR)
    attr.name = b"image"
    with pytest.raises(errors.RknnParamInvalidError, match="'image'"):
        rt.set_input_shapes(ctx, [attr])
    with pytest.raises(errors.RknnParamInvalidError, match="n_inputs must be 1"):
        rt.set_input_shapes(ctx, [])
    # NCHW dims in an NCHW attr name the same shape
    _set_shape(rt, ctx, 224, abi.RKNN_TENSOR_NCHW)
    assert _attr(rt, ctx, abi.RKNN_QUERY_CURRENT_INPUT_ATTR).size == 224 * 224 * 3


def test_inputs_set_takes_the_current_shapes_size(rt):
    """A frame smaller than the current shape is -5 (as librknnrt 2.3.2 logs show); a larger
    one is read up to the current shape's size (ASSUMPTIONS A64)."""
    ctx = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, ctx, 224)
    with pytest.raises(errors.RknnParamInvalidError, match="76,800 B given, fewer than the 150,528 B"):
        rt.inputs_set(ctx, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    _set_shape(rt, ctx, 160)
    big = _image(224)
    rt.inputs_set(ctx, [buffers.input_from_array(0, big, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    from_big = _float_output(rt, ctx)
    first_bytes = np.ascontiguousarray(big.reshape(-1)[:160 * 160 * 3].reshape(1, 160, 160, 3))
    rt.inputs_set(ctx, [buffers.input_from_array(0, first_bytes, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    np.testing.assert_array_equal(from_big, _float_output(rt, ctx))


def test_buffers_are_sized_once_for_the_largest_shape(rt, report):
    ctx = rt.init(str(models.model_path(MODEL)))
    first = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    io = sum(t["native"]["size_with_stride"] for t in report.data["inputs"] + report.data["outputs"])
    largest = max(e["memory"]["total_internal_size"] for e in report.dynamic_shapes)
    assert first.total_internal_size == largest == report.total_internal_size
    assert first.total_dma_allocated_size == report.total_weight_size + largest + io
    for side in (160, 224, 320, 160):
        _set_shape(rt, ctx, side)
        rt.inputs_set(ctx, [buffers.input_from_array(0, _image(side), abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        now = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        assert (now.total_internal_size, now.total_dma_allocated_size) == \
            (first.total_internal_size, first.total_dma_allocated_size)


def test_each_shape_runs_its_own_plan(rt):
    """PERF_RUN at each shape equals a static build of that size (the compiler plans each
    shape as the static variant); bigger inputs take longer; the profile has that shape's rows."""
    times, rows = {}, {}
    ctx = rt.init(str(models.model_path(MODEL)), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0)
    for side in (160, 224, 320):
        _set_shape(rt, ctx, side)
        rt.inputs_set(ctx, [buffers.input_from_array(0, _image(side), abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        times[side] = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration
        detail = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
        text = ctypes.string_at(detail.perf_data).decode()
        rows[side] = sum(1 for line in text.splitlines() if line.split(None, 1)[:1] and line.split()[0].isdigit())
    static = {160: "mobilenet_v2_160", 224: "mobilenet_v2", 320: "mobilenet_v2_320"}
    for side, name in static.items():
        other = rt.init(str(models.model_path(name)))
        rt.set_core_mask(other, abi.RKNN_NPU_CORE_0)
        rt.inputs_set(other, [buffers.input_from_array(0, _image(side), abi.RKNN_TENSOR_NHWC)])
        rt.run(other)
        assert times[side] == rt.query(other, abi.RKNN_QUERY_PERF_RUN).run_duration
        assert rows[side] == len(models.load_report(name).layers)
    assert times[160] < times[224] < times[320]


def test_outputs_at_224_agree_with_mobilenet_v2(rt):
    """Same network, weights and input quantization: the float outputs differ only by the
    two builds' output quantization."""
    image = _image(224)
    ctx = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, ctx, 224)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    dynamic = _float_output(rt, ctx)
    static = rt.init(str(models.model_path("mobilenet_v2")))
    rt.inputs_set(static, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(static)
    reference = _float_output(rt, static)
    mine, theirs = _attr(rt, ctx, abi.RKNN_QUERY_OUTPUT_ATTR), _attr(rt, static, abi.RKNN_QUERY_OUTPUT_ATTR)
    assert dynamic.shape == reference.shape == (1000,)
    # where neither build's int8 range clips the value, they differ by rounding only
    lows = [(-128 - a.zp) * a.scale for a in (mine, theirs)]
    highs = [(127 - a.zp) * a.scale for a in (mine, theirs)]
    inside = (dynamic > max(lows) + 1e-6) & (dynamic < min(highs) - 1e-6) & \
             (reference > max(lows) + 1e-6) & (reference < min(highs) - 1e-6)
    assert inside.sum() > 500
    assert np.all(np.abs(dynamic - reference)[inside] <= (mine.scale + theirs.scale) / 2 + 1e-6)
    # a different shape computes from its own input: another image gives another answer
    _set_shape(rt, ctx, 160)
    rt.inputs_set(ctx, [buffers.input_from_array(0, _image(160, seed=9), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    assert not np.allclose(_float_output(rt, ctx), dynamic)


def test_io_mems_allocated_once_and_bound_again_after_a_shape_change(rt):
    """The User Guide's recipe: allocate the largest io mems once; after each
    set_input_shapes, query CURRENT_NATIVE_* and call set_io_mem again."""
    ctx = rt.init(str(models.model_path(MODEL)))
    in_mem = rt.create_mem(ctx, _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR).size_with_stride)
    out_mem = rt.create_mem(ctx, _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR).size_with_stride)

    def bind():
        for mem, cmd in ((in_mem, abi.RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR),
                         (out_mem, abi.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR)):
            rt.set_io_mem(ctx, mem, _attr(rt, ctx, cmd))

    _set_shape(rt, ctx, 320)
    bind()
    rt.inputs_set(ctx, [buffers.input_from_array(0, _image(320), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    _set_shape(rt, ctx, 160)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_io_mem again with the CURRENT_"):
        rt.run(ctx)
    with pytest.raises(errors.RknnParamInvalidError, match="CURRENT_"):
        rt.inputs_set(ctx, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    bind()  # the same mems, large enough for every shape
    rt.inputs_set(ctx, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    bound = buffers.mem_view(out_mem)[:1000].view(np.int8).copy()
    # the same frame through the runtime's own buffers gives the same bytes
    plain = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, plain, 160)
    rt.inputs_set(plain, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    rt.run(plain)
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(plain, [out])
    np.testing.assert_array_equal(buffers.output_view(out, np.int8), bound)
    rt.outputs_release(plain, [out])


def test_the_alloc_outside_demo_steps(rt, report):
    """Rockchip's dynamic-shape alloc-outside steps: MEM_SIZE from an info-only context,
    init with MEM_ALLOC_OUTSIDE, set the shape, weights and internal outside, then the io
    mems from the CURRENT_* attrs."""
    path = str(models.model_path(MODEL))
    info = rt.init(path, abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(info, abi.RKNN_QUERY_MEM_SIZE)
    rt.destroy(info)
    ctx = rt.init(path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    _set_shape(rt, ctx, 224)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_weight_size))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    cur_in = _attr(rt, ctx, abi.RKNN_QUERY_CURRENT_INPUT_ATTR)
    cur_out = _attr(rt, ctx, abi.RKNN_QUERY_CURRENT_OUTPUT_ATTR)
    cur_in.type, cur_out.type = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_FLOAT32
    in_mem = rt.create_mem(ctx, cur_in.size_with_stride)
    out_mem = rt.create_mem(ctx, cur_out.n_elems * 4)
    rt.set_io_mem(ctx, in_mem, cur_in)
    rt.set_io_mem(ctx, out_mem, cur_out)
    buffers.mem_view(in_mem)[:] = _image(224).reshape(-1)
    rt.run(ctx)
    scores = buffers.mem_view(out_mem).view(np.float32)[:1000]
    reference = rt.init(path)
    _set_shape(rt, reference, 224)
    rt.inputs_set(reference, [buffers.input_from_array(0, _image(224), abi.RKNN_TENSOR_NHWC)])
    rt.run(reference)
    np.testing.assert_allclose(scores, _float_output(rt, reference), atol=1e-6)


def test_a_dynamic_shape_context_is_not_duplicated(rt):
    ctx = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, ctx, 160)
    handles = set(rt._contexts)
    with pytest.raises(errors.RknnParamInvalidError, match="5.4.4.1"):
        rt.dup_context(ctx)
    assert set(rt._contexts) == handles  # nothing was made
    rt.inputs_set(ctx, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)  # the original is untouched
    static = rt.init(str(models.model_path("mobilenet_v2")))
    rt.destroy(rt.dup_context(static))  # static models still duplicate


def test_a_dynamic_shape_model_does_not_share_weights(rt):
    """RKNN_FLAG_SHARE_WEIGHT_MEM on a dynamic-shape model is refused as librknnrt 1.5.2's
    log line says (A56), and nothing is made; a second plain init still works."""
    first = rt.init(str(models.model_path(MODEL)))
    handles = set(rt._contexts)
    with pytest.raises(errors.RknnParamInvalidError, match="dynamic shape rknn model is not supported") as refused:
        rt.init(str(models.model_path(MODEL)), abi.RKNN_FLAG_SHARE_WEIGHT_MEM, abi.rknn_init_extend(ctx=first))
    assert "A56" in refused.value.detail
    assert set(rt._contexts) == handles
    second = rt.init(str(models.model_path(MODEL)))
    _set_shape(rt, second, 160)
    rt.inputs_set(second, [buffers.input_from_array(0, _image(160), abi.RKNN_TENSOR_NHWC)])
    rt.run(second)
