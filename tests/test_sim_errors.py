"""Every misuse raises the RknnError subclass of the code a runtime returns, with
a message that says what was wrong; nothing crashes the process."""
from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _path(name: str, soc: str = "rk3588") -> str:
    return str(models.model_path(name, soc))


@pytest.fixture
def digits(rt):
    """A digits_cnn context with an input set and one run done."""
    ctx = rt.init(_path("digits_cnn"))
    image = np.zeros((1, 8, 8, 1), np.uint8)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    return ctx


# ---------------------------------------------------------------------------- rknn_init
def test_init_refuses_a_model_compiled_for_another_soc():
    runtime = SimRuntime("rk3568")
    try:
        with pytest.raises(errors.RknnTargetPlatformUnmatchError, match="compiled for rk3588.*rk3568.rknn"):
            runtime.init(_path("digits_cnn", "rk3588"))
    finally:
        runtime.close()


def test_an_rk3566_runs_the_models_compiled_for_rk3568():
    runtime = SimRuntime("rk3566")
    try:
        ctx = runtime.init(_path("digits_cnn", "rk3568"))
        runtime.inputs_set(ctx, [buffers.input_from_array(0, np.zeros((1, 8, 8, 1), np.uint8),
                                                          abi.RKNN_TENSOR_NHWC)])
        runtime.run(ctx)
        with pytest.raises(errors.RknnTargetPlatformUnmatchError, match="rk3568.rknn"):
            runtime.init(_path("digits_cnn", "rk3588"))
    finally:
        runtime.close()


def test_init_refuses_what_is_not_an_rknn_model(rt, tmp_path):
    with pytest.raises(errors.RknnModelInvalidError, match="start with 'RKNN'"):
        rt.init(b"\x08\x01onnx-ish bytes")
    with pytest.raises(errors.RknnModelInvalidError, match="cannot read"):
        rt.init(str(tmp_path / "missing.rknn"))


def test_init_names_the_sha256_of_an_unknown_model(rt):
    data = b"RKNN" + bytes(100)
    with pytest.raises(errors.RknnModelInvalidError) as caught:
        rt.init(data)
    message = str(caught.value)
    assert models.sha256_of(data) in message
    assert "course models" in message and "native backend" in message


def test_init_refuses_a_model_built_for_another_soc(rt):
    with pytest.raises(errors.RknnTargetPlatformUnmatchError, match="rk3568"):
        rt.init(_path("mobilenet_v2", "rk3568"))


@pytest.mark.parametrize("flag,name", [
    (abi.RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU, "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU"),
    (abi.RKNN_FLAG_ASYNC_MASK, "RKNN_FLAG_ASYNC_MASK"),
    (abi.RKNN_FLAG_PRIOR_LOW | abi.RKNN_FLAG_FENCE_IN_OUTSIDE, "RKNN_FLAG_FENCE_IN_OUTSIDE"),
    (0x3, "not a priority"),
])
def test_init_refuses_flags_it_does_not_model(rt, flag, name):
    with pytest.raises(errors.RknnParamInvalidError, match=name) as caught:
        rt.init(_path("digits_cnn"), flag)
    assert "not modeled" in str(caught.value)


def test_init_accepts_the_priorities(rt):
    for flag in (abi.RKNN_FLAG_PRIOR_HIGH, abi.RKNN_FLAG_PRIOR_MEDIUM, abi.RKNN_FLAG_PRIOR_LOW):
        rt.destroy(rt.init(_path("digits_cnn"), flag))


def test_zero_copy_needs_a_create_mem2_buffer(rt):
    data = models.model_path("digits_cnn").read_bytes()
    with pytest.raises(errors.RknnParamInvalidError, match="create_mem2"):
        rt.init(data, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY)
    holder = np.frombuffer(data, np.uint8).copy()
    with pytest.raises(errors.RknnParamInvalidError, match="create_mem2"):
        rt.init(holder.ctypes.data, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, size=holder.nbytes)
    mem = rt.create_mem2(0, len(data), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:] = holder
    with pytest.raises(errors.RknnParamInvalidError, match="model_buffer_fd"):
        rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                abi.rknn_init_extend(model_buffer_fd=mem.contents.fd + 100), size=len(data))
    ctx = rt.init(buffers.mem_view(mem), abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY)  # a view of it works too
    rt.destroy(ctx)
    rt.destroy_mem(0, mem)


def test_share_weight_mem_needs_a_live_context_of_the_same_network(rt):
    with pytest.raises(errors.RknnParamInvalidError, match="extend.ctx"):
        rt.init(_path("digits_cnn"), abi.RKNN_FLAG_SHARE_WEIGHT_MEM)
    other = rt.init(_path("mobilenet_v2"))
    with pytest.raises(errors.RknnParamInvalidError, match="same network"):
        rt.init(_path("digits_cnn"), abi.RKNN_FLAG_SHARE_WEIGHT_MEM, abi.rknn_init_extend(ctx=other))
    rt.destroy(other)
    with pytest.raises(errors.RknnCtxInvalidError):
        rt.init(_path("digits_cnn"), abi.RKNN_FLAG_SHARE_WEIGHT_MEM, abi.rknn_init_extend(ctx=other))


# ---------------------------------------------------------------------------- rknn_query
def test_query_errors(rt, digits):
    with pytest.raises(errors.RknnParamInvalidError, match="index 1 is out of range"):
        rt.query(digits, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    with pytest.raises(errors.RknnParamInvalidError, match="cmd 999 is not modeled"):
        rt.query(digits, 999)
    # the course models carry no custom string (A74): an empty one, not a refusal
    assert rt.query(digits, abi.RKNN_QUERY_CUSTOM_STRING).string == b""
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_perf_detail"):
        rt.query(digits, abi.RKNN_QUERY_PERF_DETAIL, abi.rknn_perf_run())
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_mem_size"):
        rt.query(digits, abi.RKNN_QUERY_MEM_SIZE, abi.rknn_tensor_attr())


def test_model_info_only_context_answers_mem_size_only(rt):
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)
    rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    with pytest.raises(errors.RknnParamInvalidError, match="COLLECT_MODEL_INFO_ONLY"):
        rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR)
    with pytest.raises(errors.RknnCtxInvalidError, match="COLLECT_MODEL_INFO_ONLY"):
        rt.run(ctx)
    with pytest.raises(errors.RknnCtxInvalidError):
        rt.create_mem(ctx, 100)


def test_sdk_version_says_simulator(rt, digits):
    version = rt.query(digits, abi.RKNN_QUERY_SDK_VERSION)
    assert b"rknnlab simulator" in version.api_version
    assert version.drv_version == b"none (simulated)"


# ---------------------------------------------------------------------------- inputs
def test_inputs_set_errors(rt, digits):
    """Too small a buffer is -5, as librknnrt 2.3.2 logs show (airockchip/rknn-toolkit2#558);
    every other fault of an rknn_input is -8 (ASSUMPTIONS A64)."""
    image = np.zeros((1, 8, 8, 1), np.uint8)
    wrong_size = abi.rknn_input(index=0, buf=image.ctypes.data, size=63, type=abi.RKNN_TENSOR_UINT8,
                                fmt=abi.RKNN_TENSOR_NHWC)
    with pytest.raises(errors.RknnParamInvalidError, match="63 B given, fewer than the 64 B") as short:
        rt.inputs_set(digits, [wrong_size])
    assert "airockchip/rknn-toolkit2#558" in short.value.detail and "A64" in short.value.detail
    assert "FLOAT32" not in short.value.detail  # the type note is for FLOAT32 only
    as_float = buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_FLOAT32)
    with pytest.raises(errors.RknnParamInvalidError, match="64 B given, fewer than the 256 B") as declared:
        rt.inputs_set(digits, [as_float])
    assert "rknn_input.type 0 means FLOAT32" in declared.value.detail
    with pytest.raises(errors.RknnParamInvalidError, match="128 B it needs .pass_through"):
        rt.inputs_set(digits, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC, pass_through=1)])
    with pytest.raises(errors.RknnInputInvalidError, match="out of range"):
        rt.inputs_set(digits, [buffers.input_from_array(1, image, abi.RKNN_TENSOR_NHWC)])
    with pytest.raises(errors.RknnInputInvalidError, match="NULL"):
        rt.inputs_set(digits, [abi.rknn_input(index=0, size=64, type=abi.RKNN_TENSOR_UINT8)])
    with pytest.raises(errors.RknnInputInvalidError, match="not modeled"):
        rt.inputs_set(digits, [buffers.input_from_array(0, image.astype(np.int16), abi.RKNN_TENSOR_NHWC)])
    with pytest.raises(errors.RknnInputInvalidError, match="NHWC or NCHW"):
        rt.inputs_set(digits, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NC1HWC2)])


def _scores(rt, ctx, tensor_input) -> np.ndarray:
    rt.inputs_set(ctx, [tensor_input])
    rt.run(ctx)
    out = abi.rknn_output(index=0, want_float=1)
    rt.outputs_get(ctx, [out])
    values = buffers.output_view(out, np.float32).copy()
    rt.outputs_release(ctx, [out])
    return values


def test_inputs_set_reads_the_first_bytes_of_a_larger_buffer(rt, digits):
    """ASSUMPTIONS A64: a buffer larger than the input needs is accepted, and only its first
    n_elems x element size bytes (pass_through: size_with_stride) are read."""
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(1, 8, 8, 1), dtype=np.uint8)
    exact = _scores(rt, digits, buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC))
    longer = np.concatenate([image.reshape(-1), rng.integers(0, 256, 192, dtype=np.uint8)])
    tail_ignored = buffers.input_from_array(0, longer, abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)
    np.testing.assert_array_equal(_scores(rt, digits, tail_ignored), exact)
    # float32 data declared UINT8 (256 B for 64): its first 64 bytes are read as pixels
    floats = (image.astype(np.float32) + 0.5).reshape(1, 8, 8, 1)
    as_pixels = floats.reshape(-1).view(np.uint8)[:64].reshape(1, 8, 8, 1).copy()
    misread = _scores(rt, digits, buffers.input_from_array(0, floats, abi.RKNN_TENSOR_NHWC,
                                                           type=abi.RKNN_TENSOR_UINT8))
    np.testing.assert_array_equal(misread, _scores(rt, digits, buffers.input_from_array(
        0, as_pixels, abi.RKNN_TENSOR_NHWC)))
    assert not np.array_equal(misread, exact)
    # pass_through: the native bytes (size_with_stride) first, anything after them ignored
    native = rt.query(digits, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    raw = rng.integers(-128, 128, native.size_with_stride, dtype=np.int8)
    one = _scores(rt, digits, buffers.input_from_array(0, raw, pass_through=1, type=native.type, fmt=native.fmt))
    padded = np.concatenate([raw, rng.integers(-128, 128, 64, dtype=np.int8)])
    np.testing.assert_array_equal(_scores(rt, digits, buffers.input_from_array(
        0, padded, pass_through=1, type=native.type, fmt=native.fmt)), one)


# ---------------------------------------------------------------------------- outputs
def test_outputs_get_before_any_run(rt):
    ctx = rt.init(_path("digits_cnn"))
    with pytest.raises(errors.RknnOutputInvalidError, match="no rknn_run yet"):
        rt.outputs_get(ctx, [abi.rknn_output(want_float=1)])


def test_outputs_get_errors(rt, digits):
    small = np.zeros(9, np.float32)
    output = abi.rknn_output(want_float=1, is_prealloc=1, buf=small.ctypes.data, size=small.nbytes)
    with pytest.raises(errors.RknnParamInvalidError, match="36 B given, 40 B needed"):
        rt.outputs_get(digits, [output])
    with pytest.raises(errors.RknnOutputInvalidError, match="out of range"):
        rt.outputs_get(digits, [abi.rknn_output(index=1)])


def test_outputs_release_errors(rt, digits):
    foreign = ctypes.create_string_buffer(40)
    with pytest.raises(errors.RknnParamInvalidError, match="not allocated"):
        rt.outputs_release(digits, [abi.rknn_output(is_prealloc=0, buf=ctypes.addressof(foreign), size=40)])
    rt.outputs_release(digits, [abi.rknn_output(is_prealloc=1, buf=ctypes.addressof(foreign), size=40)])
    output = abi.rknn_output(want_float=1)
    rt.outputs_get(digits, [output])
    copy = abi.rknn_output(want_float=1, buf=output.buf, size=output.size)
    rt.outputs_release(digits, [output])
    with pytest.raises(errors.RknnParamInvalidError, match="already released"):
        rt.outputs_release(digits, [copy])  # the same buffer twice
    with pytest.raises(errors.RknnParamInvalidError, match="NULL"):
        rt.outputs_release(digits, [output])


# ---------------------------------------------------------------------------- memory
def test_create_mem_errors(rt, digits):
    with pytest.raises(errors.RknnParamInvalidError, match="at least one byte"):
        rt.create_mem(digits, 0)
    with pytest.raises(errors.RknnCtxInvalidError, match="ctx is 0"):
        rt.create_mem(0, 100)
    with pytest.raises(errors.RknnParamInvalidError, match="CACHEABLE and NON_CACHEABLE"):
        rt.create_mem2(digits, 100, abi.RKNN_FLAG_MEMORY_CACHEABLE | abi.RKNN_FLAG_MEMORY_NON_CACHEABLE)
    with pytest.raises(errors.RknnParamInvalidError, match="unknown bits"):
        rt.create_mem2(digits, 100, 0x80)
    sram = rt.create_mem2(digits, 100, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)  # falls back to DRAM
    rt.destroy_mem(digits, sram)


def test_create_mem_from_fd_errors(rt, digits):
    with pytest.raises(errors.RknnParamInvalidError, match="fd"):
        rt.create_mem_from_fd(digits, 987654, None, 4096, 0)
    mem = rt.create_mem(digits, 4096)
    with pytest.raises(errors.RknnParamInvalidError, match="holds 4,096 bytes") as past_end:
        rt.create_mem_from_fd(digits, mem.contents.fd, None, 8192, 0)
    with pytest.raises(errors.RknnParamInvalidError, match="offset") as offset_past_size:
        rt.create_mem_from_fd(digits, mem.contents.fd, None, 4096, 4096)
    # both refusals rest on the simulator's reading of size (from the buffer's start), and say so
    for refusal in (past_end, offset_past_size):
        assert refusal.value.detail.endswith("(ASSUMPTIONS A8)"), refusal.value.detail


def test_a_too_small_view_says_its_size_counts_from_the_start_of_the_buffer(rt, digits):
    """A caller who reads create_mem_from_fd's size as the tensor's own bytes (size = the
    tensor, offset > 0) gets a view too small: the refusal names A8."""
    attr = rt.query(digits, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    offset = attr.size_with_stride // 2
    buffer = rt.create_mem(digits, offset + attr.size_with_stride)
    view = rt.create_mem_from_fd(digits, buffer.contents.fd, None, attr.size_with_stride, offset)
    with pytest.raises(errors.RknnParamInvalidError) as refused:
        rt.set_io_mem(digits, view, attr)
    assert f"create_mem_from_fd view with offset {offset}:" in refused.value.detail
    assert "ASSUMPTIONS A8" in refused.value.detail
    plain = rt.create_mem(digits, attr.size_with_stride - 1)  # not a view: no A8 in the message
    with pytest.raises(errors.RknnParamInvalidError) as plain_refused:
        rt.set_io_mem(digits, plain, attr)
    assert "A8" not in plain_refused.value.detail
    rt.set_io_mem(digits, rt.create_mem_from_fd(digits, buffer.contents.fd, None,
                                                offset + attr.size_with_stride, offset), attr)


def test_destroy_mem_twice_is_an_error_not_a_crash(rt, digits):
    mem = rt.create_mem(digits, 4096)
    rt.destroy_mem(digits, mem)
    with pytest.raises(errors.RknnParamInvalidError, match="already destroyed"):
        rt.destroy_mem(digits, mem)
    again = rt.create_mem(digits, 4096)  # malloc may hand the same struct address back
    with pytest.raises(errors.RknnParamInvalidError, match="already destroyed"):
        rt.destroy_mem(digits, mem)
    assert buffers.mem_view(again).sum() == 0  # ... and the new mem is untouched
    with pytest.raises(errors.RknnParamInvalidError, match="not made by this runtime"):
        rt.destroy_mem(digits, ctypes.pointer(abi.rknn_tensor_mem()))
    with pytest.raises(errors.RknnParamInvalidError, match="NULL"):
        rt.destroy_mem(digits, ctypes.POINTER(abi.rknn_tensor_mem)())


def test_set_io_mem_errors(rt, digits):
    attr = rt.query(digits, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    small = rt.create_mem(digits, attr.size_with_stride - 1)
    with pytest.raises(errors.RknnParamInvalidError, match=f"needs {attr.size_with_stride:,} B"):
        rt.set_io_mem(digits, small, attr)
    offset = rt.create_mem_from_fd(digits, small.contents.fd, None, attr.size_with_stride - 1, 1)
    with pytest.raises(errors.RknnParamInvalidError, match="size - offset"):
        rt.set_io_mem(digits, offset, attr)
    big = rt.create_mem(digits, 4096)
    attr.name = b"nope"
    with pytest.raises(errors.RknnParamInvalidError, match="no tensor named 'nope'"):
        rt.set_io_mem(digits, big, attr)
    out_attr = rt.query(digits, abi.RKNN_QUERY_OUTPUT_ATTR)
    out_attr.type = abi.RKNN_TENSOR_FLOAT32  # 10 floats need 40 B, not size = 10
    with pytest.raises(errors.RknnParamInvalidError, match="needs 40 B"):
        rt.set_io_mem(digits, rt.create_mem(digits, 20), out_attr)
    out_attr.type = abi.RKNN_TENSOR_UINT8
    with pytest.raises(errors.RknnParamInvalidError, match="not modeled"):
        rt.set_io_mem(digits, big, out_attr)


def test_a_too_small_io_mem_is_told_the_rule_of_the_attr_it_was_bound_with(rt, digits):
    """The advice follows the attr passed: native -> its size_with_stride; a plain output
    set to FLOAT32 -> n_elems x 4; a plain input -> that attr's size_with_stride."""
    native = rt.query(digits, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    with pytest.raises(errors.RknnParamInvalidError) as native_error:
        rt.set_io_mem(digits, rt.create_mem(digits, 1), native)
    assert f"size_with_stride of the attr you bind ({native.size_with_stride:,} B" in str(native_error.value)
    out_attr = rt.query(digits, abi.RKNN_QUERY_OUTPUT_ATTR)
    out_attr.type = abi.RKNN_TENSOR_FLOAT32
    with pytest.raises(errors.RknnParamInvalidError) as float_error:
        rt.set_io_mem(digits, rt.create_mem(digits, out_attr.size), out_attr)
    message = str(float_error.value)
    assert f"n_elems x 4 bytes ({out_attr.n_elems} x 4 = {out_attr.n_elems * 4} B)" in message
    assert "NATIVE" not in message and "native" not in message and "size_with_stride" not in message
    plain_in = rt.query(digits, abi.RKNN_QUERY_INPUT_ATTR)
    plain_in.type = abi.RKNN_TENSOR_UINT8
    with pytest.raises(errors.RknnParamInvalidError) as plain_error:
        rt.set_io_mem(digits, rt.create_mem(digits, 1), plain_in)
    assert f"use size_with_stride of that attr ({plain_in.size_with_stride:,} B" in str(plain_error.value)


def test_a_too_small_output_mem_names_a_2d_tensors_fmt_without_alarm(rt):
    """RKNN_TENSOR_UNDEFINED is the fmt of a tensor that is not an image, not an error:
    the message says 'fmt UNDEFINED: a 2-D tensor', with the bytes in thousands."""
    ctx = rt.init(_path("mobilenet_v2"))
    out_attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR)
    assert out_attr.fmt == abi.RKNN_TENSOR_UNDEFINED and out_attr.n_dims == 2
    out_attr.type = abi.RKNN_TENSOR_FLOAT32
    with pytest.raises(errors.RknnParamInvalidError) as refused:
        rt.set_io_mem(ctx, rt.create_mem(ctx, out_attr.size), out_attr)
    detail = refused.value.detail
    assert "size - offset = 1,000 B, the tensor needs 4,000 B (type FLOAT32, fmt UNDEFINED: a 2-D tensor)" \
        in detail, detail
    assert "RKNN_TENSOR_UNDEFINED" not in detail
    native = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)  # an image: no "-D tensor" note
    with pytest.raises(errors.RknnParamInvalidError) as image_refused:
        rt.set_io_mem(ctx, rt.create_mem(ctx, 16), native)
    assert "fmt NHWC)" in image_refused.value.detail and "-D tensor" not in image_refused.value.detail


def test_inputs_set_into_a_converting_binding_is_refused(rt, digits):
    attr = rt.query(digits, abi.RKNN_QUERY_INPUT_ATTR)
    attr.type = abi.RKNN_TENSOR_UINT8
    rt.set_io_mem(digits, rt.create_mem(digits, 4096), attr)
    image = np.zeros((1, 8, 8, 1), np.uint8)
    with pytest.raises(errors.RknnInputInvalidError, match="bound"):
        rt.inputs_set(digits, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])


def test_weight_and_internal_mem_errors(rt, digits):
    big = rt.create_mem(digits, 1 << 16)
    with pytest.raises(errors.RknnParamInvalidError, match="MEM_ALLOC_OUTSIDE"):
        rt.set_weight_mem(digits, big)
    with pytest.raises(errors.RknnParamInvalidError, match="INTERNAL_ALLOC_OUTSIDE"):
        rt.set_internal_mem(digits, big)
    outside = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(outside, abi.RKNN_QUERY_MEM_SIZE)
    small = rt.create_mem(outside, 16)
    with pytest.raises(errors.RknnParamInvalidError, match=f"total_weight_size is {size.total_weight_size:,} B"):
        rt.set_weight_mem(outside, small)
    with pytest.raises(errors.RknnParamInvalidError, match=f"total_internal_size is {size.total_internal_size:,} B"):
        rt.set_internal_mem(outside, small)
    # one byte short is refused too (A57), and the refused mem is not kept as the internal memory
    short = rt.create_mem(outside, size.total_internal_size - 1)
    with pytest.raises(errors.RknnParamInvalidError, match="A57"):
        rt.set_internal_mem(outside, short)
    rt.set_weight_mem(outside, rt.create_mem(outside, size.total_weight_size))
    with pytest.raises(errors.RknnParamInvalidError, match="no internal memory"):
        rt.run(outside)


def test_mem_sync_errors(rt, digits):
    mem = rt.create_mem(digits, 4096)
    for mode in (1, 2, 3):
        rt.mem_sync(digits, mem, mode)
    with pytest.raises(errors.RknnParamInvalidError, match="mode 4"):
        rt.mem_sync(digits, mem, 4)
    rt.destroy_mem(digits, mem)
    with pytest.raises(errors.RknnParamInvalidError, match="already destroyed"):
        rt.mem_sync(digits, mem, 1)


def test_destroying_a_bound_mem_unbinds_it(rt, digits):
    attr = rt.query(digits, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    mem = rt.create_mem(digits, attr.size_with_stride)
    rt.set_io_mem(digits, mem, attr)
    rt.run(digits)
    rt.destroy_mem(digits, mem)
    rt.run(digits)  # back on the runtime's own output buffer, no crash


# ---------------------------------------------------------------------------- contexts
def test_every_call_after_destroy_is_ctx_invalid(rt, digits):
    mem = rt.create_mem(digits, 4096)
    rt.destroy(digits)
    attr = abi.rknn_tensor_attr()
    calls = {
        "query": lambda: rt.query(digits, abi.RKNN_QUERY_IN_OUT_NUM),
        "inputs_set": lambda: rt.inputs_set(digits, []),
        "run": lambda: rt.run(digits),
        "outputs_get": lambda: rt.outputs_get(digits, [abi.rknn_output()]),
        "outputs_release": lambda: rt.outputs_release(digits, [abi.rknn_output()]),
        "set_core_mask": lambda: rt.set_core_mask(digits, abi.RKNN_NPU_CORE_0),
        "create_mem": lambda: rt.create_mem(digits, 100),
        "create_mem2": lambda: rt.create_mem2(digits, 100, 0),
        "create_mem_from_fd": lambda: rt.create_mem_from_fd(digits, 0, None, 100, 0),
        "destroy_mem": lambda: rt.destroy_mem(digits, mem),
        "set_io_mem": lambda: rt.set_io_mem(digits, mem, attr),
        "set_weight_mem": lambda: rt.set_weight_mem(digits, mem),
        "set_internal_mem": lambda: rt.set_internal_mem(digits, mem),
        "mem_sync": lambda: rt.mem_sync(digits, mem, 1),
        "dup_context": lambda: rt.dup_context(digits),
        "destroy": lambda: rt.destroy(digits),
    }
    for name, call in calls.items():
        with pytest.raises(errors.RknnCtxInvalidError, match="destroyed"):
            call()


def test_unknown_contexts_are_ctx_invalid(rt):
    for ctx in (0, 12345, 2 ** 40):
        with pytest.raises(errors.RknnCtxInvalidError):
            rt.run(ctx)
    other = SimRuntime("rk3588")
    ctx = other.init(_path("digits_cnn"))
    with pytest.raises(errors.RknnCtxInvalidError, match="not a context of this runtime"):
        rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    other.close()


def test_unknown_soc_is_a_value_error():
    with pytest.raises(ValueError, match="rk3588"):
        SimRuntime("rk9999")


def test_messages_carry_a_hint(rt):
    with pytest.raises(errors.RknnError) as caught:
        rt.run(4242)
    assert "Hint:" in str(caught.value) and caught.value.name == "RKNN_ERR_CTX_INVALID"


def test_fds_are_not_leaked(rt):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        ctx = rt.init(_path("digits_cnn"))
        mem = rt.create_mem(ctx, 4096)
        rt.create_mem_from_fd(ctx, mem.contents.fd, None, 4096, 0)
        rt.dup_context(ctx)
        rt.destroy(ctx)
    rt.close()
    assert len(os.listdir("/proc/self/fd")) == before
