"""NativeRuntime end to end against a C double of librknnrt.so.

lib/rknnlab/c/rknn_double.c implements the runtime's functions for one
fake model and logs every call with the arguments it received, so these tests
check what actually crossed the ABI, not just what Python thinks it passed.
The fake model: input "input" 1x4x4x3 NHWC int8 (zp -128, scale 1/255;
native rows padded to w_stride 8), outputs "scores" 1x10 (zp -10, scale 0.5,
scores[k] = sum of the quantized inputs + k + salt, mod 256) and "boxes" 1x4x2x2
(zp 0, scale 0.25, boxes[k] = quantized input k + salt, mod 256; native NC1HWC2 of 64
bytes); salt is the payload's word "salt=N", 0 without it.
A payload "detector=HxW ..." describes instead a fake text detector for
examples/c/video_pipeline.c (tests at the end of this file).
"""
from __future__ import annotations

import ctypes
import gc
import os
import re
import weakref
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np
import pytest

from rknnlab.rknn import abi, buffers, errors, native
from rknnlab.rknn.native import NativeRuntime

MODEL = b"RKNN" + b"fake model for tests"
PAYLOAD = "fake model for tests"

Value = Union[int, str]


class Double:
    """The double's inspection functions, over the same loaded library."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))  # same path: dlopen hands back the same instance
        self.lib.double_call_log.restype = ctypes.c_char_p
        self.lib.double_sizeof.argtypes = [ctypes.c_char_p]
        self.lib.double_offsetof.argtypes = [ctypes.c_char_p, ctypes.c_char_p]

    def reset(self) -> None:
        self.lib.double_reset()

    def calls(self, function: str) -> List[Dict[str, Value]]:
        """The logged calls of ``function`` (or of ``function[i]``, array
        elements), each as {key: value}, ints parsed."""
        found = []
        for line in self.lib.double_call_log().decode().splitlines():
            name, _, rest = line.partition(" ")
            if name != function:
                continue
            fields: Dict[str, Value] = {}
            for key, text in re.findall(r"(\w+)=(\S*)", rest):
                try:
                    fields[key] = int(text, 0)
                except ValueError:
                    fields[key] = text
            found.append(fields)
        return found

    def last(self, function: str) -> Dict[str, Value]:
        calls = self.calls(function)
        assert calls, f"{function} was never called"
        return calls[-1]

    def sizeof(self, struct: str) -> int:
        return self.lib.double_sizeof(struct.encode())

    def offsetof(self, struct: str, field: str) -> int:
        return self.lib.double_offsetof(struct.encode(), field.encode())

    def live_outputs(self) -> int:
        return self.lib.double_live_outputs()

    def live_mems(self) -> int:
        return self.lib.double_live_mems()


@pytest.fixture
def rt(rknn_double_path: Path) -> NativeRuntime:
    return NativeRuntime(rknn_double_path)


@pytest.fixture
def double(rknn_double_path: Path) -> Double:
    d = Double(rknn_double_path)
    d.reset()
    return d


@pytest.fixture
def ctx(rt: NativeRuntime, double: Double):
    context = rt.init(MODEL)
    double.reset()
    yield context
    try:
        rt.destroy(context)
    except errors.RknnCtxInvalidError:  # the test destroyed it
        pass


def input_image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (1, 4, 4, 3), dtype=np.uint8)


def expected_outputs(quantized: np.ndarray, salt: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """What the fake model computes from its int8 input (NHWC order)."""
    flat = quantized.astype(np.int8).reshape(-1)
    total = int(flat.astype(np.int64).sum())
    scores = (((total + salt + np.arange(10)) & 0xFF).astype(np.uint8)).view(np.int8)
    boxes = ((flat[:16].astype(np.int64) + salt) & 0xFF).astype(np.uint8).view(np.int8)
    return scores, boxes


def outputs(*indexes: int, **fields: int) -> List[abi.rknn_output]:
    return [abi.rknn_output(index=i, **fields) for i in indexes]


# ---------------------------------------------------------------- layout

def test_ctypes_layout_matches_gcc(double: Double):
    for name, cls in abi.C_STRUCTS.items():
        assert double.sizeof(name) == ctypes.sizeof(cls), name
        for field, *_ in cls._fields_:
            assert double.offsetof(name, field) == getattr(cls, field).offset, f"{name}.{field}"


def test_double_knows_no_field_we_lack(double: Double):
    assert double.sizeof("rknn_no_such_struct") == -1
    assert double.offsetof("rknn_tensor_attr", "no_such_field") == -1


# ---------------------------------------------------------------- loading

def test_missing_library_lists_the_path_tried(tmp_path: Path):
    missing = tmp_path / "librknnrt.so"
    with pytest.raises(errors.RuntimeLibraryNotFound) as caught:
        NativeRuntime(missing)
    assert caught.value.tried == [(str(missing), "no such file")]
    assert str(missing) in str(caught.value)
    assert "LIBRKNNRT_PATH" in str(caught.value) and "librknnrt.so" in str(caught.value)


def test_default_search_lists_every_path(monkeypatch, tmp_path: Path):
    candidates = (str(tmp_path / "a" / "librknnrt.so"), str(tmp_path / "b" / "librknnrt.so"))
    monkeypatch.delenv("LIBRKNNRT_PATH", raising=False)
    monkeypatch.setattr(native, "DEFAULT_LIBRARY_PATHS", candidates)
    monkeypatch.setattr(native.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(errors.RuntimeLibraryNotFound) as caught:
        NativeRuntime()
    tried = [path for path, _ in caught.value.tried]
    assert tried == [*candidates, 'ctypes.util.find_library("rknnrt")']
    for path in tried:
        assert path in str(caught.value)


def test_env_var_names_the_library(monkeypatch, rknn_double_path: Path, tmp_path: Path):
    monkeypatch.setenv("LIBRKNNRT_PATH", str(rknn_double_path))
    assert NativeRuntime().library_path == str(rknn_double_path)
    monkeypatch.setenv("LIBRKNNRT_PATH", str(tmp_path / "gone.so"))
    with pytest.raises(errors.RuntimeLibraryNotFound) as caught:
        NativeRuntime()
    assert [path for path, _ in caught.value.tried] == [str(tmp_path / "gone.so")]


def test_unloadable_file_reports_the_loader_error(tmp_path: Path):
    bogus = tmp_path / "librknnrt.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(errors.RuntimeLibraryNotFound) as caught:
        NativeRuntime(bogus)
    (path, reason), = caught.value.tried
    assert path == str(bogus) and reason != "no such file"


def test_function_missing_from_an_older_runtime_fails_when_called(build_rknn_double):
    old = NativeRuntime(build_rknn_double("DOUBLE_OLD_RUNTIME"))
    context = old.init(MODEL)  # everything else still works
    with pytest.raises(errors.RuntimeFunctionMissing, match="rknn_set_input_shapes"):
        old.set_input_shapes(context, [abi.rknn_tensor_attr()])
    with pytest.raises(errors.RuntimeFunctionMissing, match="rknn_create_mem2"):
        old.create_mem2(context, 64, 0)
    old.destroy(context)


def test_backend_name(rt: NativeRuntime):
    assert rt.backend == "native"


# ---------------------------------------------------------------- init

def test_init_from_path_passes_the_path_with_size_0(rt, double, tmp_path: Path):
    model_file = tmp_path / "model.rknn"
    model_file.write_bytes(MODEL)
    for model in (str(model_file), model_file):  # str and PathLike
        context = rt.init(model)
        call = double.last("rknn_init")
        assert (call["size"], call["flag"], call["ext"], call["path"]) == (0, 0, 0, str(model_file))
        assert rt.query(context, abi.RKNN_QUERY_CUSTOM_STRING).string.decode() == PAYLOAD
        rt.destroy(context)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_init_from_bytes_passes_pointer_and_length(rt, double, wrap):
    model = wrap(MODEL)
    context = rt.init(model, flag=abi.RKNN_FLAG_COLLECT_PERF_MASK)
    call = double.last("rknn_init")
    assert call["size"] == len(MODEL)
    assert call["flag"] == abi.RKNN_FLAG_COLLECT_PERF_MASK
    assert call["model"] == np.frombuffer(model, dtype=np.uint8).ctypes.data  # no copy on our side
    assert rt.query(context, abi.RKNN_QUERY_CUSTOM_STRING).string.decode() == PAYLOAD
    rt.destroy(context)


def test_init_extend_reaches_the_runtime(rt, double, ctx):
    rt.init(MODEL, flag=abi.RKNN_FLAG_SHARE_WEIGHT_MEM, extend=abi.rknn_init_extend(ctx=ctx))
    call = double.last("rknn_init")
    assert (call["ext"], call["ext_ctx"], call["flag"]) == (1, ctx, abi.RKNN_FLAG_SHARE_WEIGHT_MEM)


def test_init_zero_copy_from_an_address_uses_the_buffer_in_place(rt, double):
    buffer = ctypes.create_string_buffer(MODEL, 64)
    zero_copy = rt.init(ctypes.addressof(buffer), flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                        size=len(MODEL))
    call = double.last("rknn_init")
    assert (call["model"], call["size"]) == (ctypes.addressof(buffer), len(MODEL))
    copied = rt.init(ctypes.addressof(buffer), size=len(MODEL))
    buffer.value = b"RKNNchanged in place"
    assert rt.query(zero_copy, abi.RKNN_QUERY_CUSTOM_STRING).string == b"changed in place"
    assert rt.query(copied, abi.RKNN_QUERY_CUSTOM_STRING).string.decode() == PAYLOAD
    rt.destroy(zero_copy)
    rt.destroy(copied)


def test_zero_copy_model_buffer_lives_as_long_as_its_context(rt):
    model = np.frombuffer(MODEL, dtype=np.uint8).copy()
    alive = weakref.ref(model)
    context = rt.init(model, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY)
    del model
    gc.collect()
    assert alive() is not None
    assert rt.query(context, abi.RKNN_QUERY_CUSTOM_STRING).string.decode() == PAYLOAD
    rt.destroy(context)
    gc.collect()
    assert alive() is None


def test_init_argument_errors(rt, tmp_path: Path):
    with pytest.raises(ValueError, match="size"):
        rt.init(0x1000)
    with pytest.raises(ValueError):
        rt.init(str(tmp_path / "m.rknn"), size=10)
    with pytest.raises(ValueError):
        rt.init(MODEL, size=len(MODEL) + 1)


def test_invalid_model_raises_model_invalid(rt, tmp_path: Path):
    with pytest.raises(errors.RknnModelInvalidError) as caught:
        rt.init(b"ONNX not a model")
    error = caught.value
    assert (error.code, error.name, error.function) == (-6, "RKNN_ERR_MODEL_INVALID", "rknn_init")
    assert "RKNN_ERR_MODEL_INVALID" in str(error) and "rknn_init" in str(error)
    with pytest.raises(errors.RknnModelInvalidError):
        rt.init(str(tmp_path / "missing.rknn"))


def test_dup_context(rt, double, ctx):
    dup = rt.dup_context(ctx)
    assert dup != ctx
    assert double.last("rknn_dup_context")["in"] == ctx
    assert rt.query(dup, abi.RKNN_QUERY_IN_OUT_NUM).n_output == 2
    rt.destroy(dup)


def _mem_size(rt, context) -> abi.rknn_mem_size:
    return rt.query(context, abi.RKNN_QUERY_MEM_SIZE)


def test_dup_context_shares_the_weights(rt, ctx):
    """A duplicate allocates its own internal and io, not weights (simulator assumption A23)."""
    dup = rt.dup_context(ctx)
    first, second = _mem_size(rt, ctx), _mem_size(rt, dup)
    assert second.total_dma_allocated_size == first.total_dma_allocated_size - first.total_weight_size
    assert (second.total_weight_size, second.total_internal_size) == (first.total_weight_size,
                                                                      first.total_internal_size)
    rt.destroy(dup)


def test_model_info_only_context_answers_sizes_and_nothing_else(rt, ctx):
    plain = _mem_size(rt, ctx)
    info_only = rt.init(MODEL, flag=abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)
    sizes = _mem_size(rt, info_only)
    assert (sizes.total_weight_size, sizes.total_internal_size) == (plain.total_weight_size,
                                                                    plain.total_internal_size)
    assert sizes.total_dma_allocated_size == 0 < plain.total_dma_allocated_size
    assert rt.query(info_only, abi.RKNN_QUERY_IN_OUT_NUM).n_output == 2
    with pytest.raises(errors.RknnParamInvalidError):
        rt.query(info_only, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    with pytest.raises(errors.RknnCtxInvalidError):
        rt.run(info_only)
    with pytest.raises(errors.RknnCtxInvalidError):
        rt.dup_context(info_only)
    with pytest.raises(errors.RknnMallocError):  # the create_mem family returns NULL
        rt.create_mem(info_only, 64)
    rt.destroy(info_only)


def _model_in_mem(rt, offset: int = 0):
    mem = rt.create_mem2(0, offset + len(MODEL), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[offset:] = np.frombuffer(MODEL, np.uint8)
    return mem


def test_zero_copy_model_in_a_mem_without_context(rt, double, ctx):
    """The API reference's steps (p.20): create_mem2(0, size, ALLOC_NO_CONTEXT), copy the model in,
    rknn_init_extend{offset, size, fd}, MODEL_BUFFER_ZERO_COPY.  The weights are read in place (A5)."""
    mem = _model_in_mem(rt, offset=16)
    m = mem.contents
    extend = abi.rknn_init_extend(real_model_offset=16, real_model_size=len(MODEL), model_buffer_fd=m.fd)
    context = rt.init(m.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend=extend, size=m.size)
    call = double.last("rknn_init")
    assert (call["ext_offset"], call["ext_size"], call["ext_fd"]) == (16, len(MODEL), m.fd)
    assert rt.query(context, abi.RKNN_QUERY_CUSTOM_STRING).string.decode() == PAYLOAD
    plain = _mem_size(rt, ctx)
    assert _mem_size(rt, context).total_dma_allocated_size == (plain.total_dma_allocated_size
                                                               - plain.total_weight_size)
    rt.destroy(context)
    rt.destroy_mem(0, mem)


def test_zero_copy_init_refuses_a_wrong_extend(rt):
    mem = _model_in_mem(rt)
    m = mem.contents
    zero_copy = abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY
    other = rt.create_mem2(0, 64, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    with pytest.raises(errors.RknnParamInvalidError):   # the fd of another mem
        rt.init(m.virt_addr, flag=zero_copy, size=m.size,
                extend=abi.rknn_init_extend(real_model_size=m.size, model_buffer_fd=other.contents.fd))
    with pytest.raises(errors.RknnModelInvalidError):   # the model would end past the buffer
        rt.init(m.virt_addr, flag=zero_copy, size=m.size,
                extend=abi.rknn_init_extend(real_model_offset=8, real_model_size=m.size, model_buffer_fd=m.fd))
    rt.destroy_mem(0, other)
    rt.destroy_mem(0, mem)


def test_zero_copy_model_mem_destroyed_before_its_context_fails_the_next_run(rt):
    """The buffer must stay valid until rknn_destroy (API reference p.20); the double refuses to
    run on weights that are gone (A27) instead of reading unmapped memory."""
    mem = _model_in_mem(rt)
    m = mem.contents
    extend = abi.rknn_init_extend(real_model_size=m.size, model_buffer_fd=m.fd)
    context = rt.init(m.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend=extend, size=m.size)
    dup = rt.dup_context(context)
    rt.run(context)
    rt.destroy_mem(0, mem)
    for c in (context, dup):
        with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
            rt.run(c)
        with pytest.raises(errors.RknnParamInvalidError):
            rt.query(c, abi.RKNN_QUERY_CUSTOM_STRING)
        rt.destroy(c)


def test_destroyed_context_is_invalid(rt, double):
    context = rt.init(MODEL)
    assert context >= 2**32  # the double's handles need all 64 bits
    rt.destroy(context)
    assert double.last("rknn_destroy")["ctx"] == context
    with pytest.raises(errors.RknnCtxInvalidError, match="RKNN_ERR_CTX_INVALID"):
        rt.run(context)
    with pytest.raises(errors.RknnCtxInvalidError):
        rt.query(12345, abi.RKNN_QUERY_IN_OUT_NUM)


# ---------------------------------------------------------------- query

@pytest.mark.parametrize("cmd", sorted(abi.QUERY_STRUCTS), ids=lambda c: abi.QUERY_NAMES[c])
def test_query_passes_sizeof_the_c_struct(rt, double, ctx, cmd):
    if cmd == abi.RKNN_QUERY_PERF_DETAIL:   # answered only for a context made with this flag
        ctx = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        info = rt.query(ctx, cmd)
        assert isinstance(info, abi.QUERY_STRUCTS[cmd])
        call = double.last("rknn_query")
        assert (call["ctx"], call["cmd"]) == (ctx, cmd)
        assert call["size"] == double.sizeof(type(info).__name__)
    finally:
        if cmd == abi.RKNN_QUERY_PERF_DETAIL:
            rt.destroy(ctx)


def test_query_answers(rt, ctx):
    num = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    assert (num.n_input, num.n_output) == (1, 2)

    attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    assert (attr.name, buffers.attr_dims(attr)) == (b"input", (1, 4, 4, 3))
    assert (attr.fmt, attr.type, attr.qnt_type) == (
        abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_INT8, abi.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC)
    assert (attr.zp, attr.size, attr.size_with_stride) == (-128, 48, 48)
    assert attr.scale == pytest.approx(1 / 255)

    boxes = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    assert (boxes.name, buffers.attr_dims(boxes), boxes.size) == (b"boxes", (1, 4, 2, 2), 16)
    native_boxes = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    assert native_boxes.fmt == abi.RKNN_TENSOR_NC1HWC2
    assert (buffers.attr_dims(native_boxes), native_boxes.size_with_stride) == ((1, 1, 2, 2, 16), 64)

    mem = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    assert (mem.total_weight_size, mem.total_internal_size) == (4096, 2048)
    assert mem.total_dma_allocated_size == 4096 + 2048 + 74
    assert rt.query(ctx, abi.RKNN_QUERY_SDK_VERSION).api_version.startswith(b"0.0.1")
    assert rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration == 0
    rt.run(ctx)
    assert rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration == 1234


def test_query_index_reaches_the_runtime(rt, ctx):
    with pytest.raises(errors.RknnParamInvalidError):
        rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=2))


def test_query_with_the_wrong_struct_is_param_invalid(rt, double, ctx):
    with pytest.raises(errors.RknnParamInvalidError) as caught:
        rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM, abi.rknn_mem_size())
    assert double.last("rknn_query")["size"] == 64
    message = str(caught.value)
    assert "rknn_query" in message and "RKNN_ERR_PARAM_INVALID" in message
    assert "RKNN_QUERY_IN_OUT_NUM" in message and "Hint:" in message


def test_query_without_a_default_struct_needs_info(rt, ctx):
    with pytest.raises(ValueError, match="RKNN_QUERY_DEVICE_MEM_INFO"):
        rt.query(ctx, abi.RKNN_QUERY_DEVICE_MEM_INFO)


def test_input_range_crosses_the_abi(rt, ctx):
    input_range = rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE)
    assert (input_range.shape_number, input_range.n_dims, input_range.name) == (1, 4, b"input")
    assert input_range.fmt == abi.RKNN_TENSOR_NHWC
    assert input_range.shapes() == [[1, 4, 4, 3]]
    with pytest.raises(errors.RknnParamInvalidError):
        rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=1))


# ---------------------------------------------------------------- inputs

def test_inputs_set_passes_every_field(rt, double, ctx):
    image = input_image()
    tensor_input = buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)
    rt.inputs_set(ctx, [tensor_input])
    assert double.last("rknn_inputs_set") == {"ctx": ctx, "n": 1}
    assert double.last("rknn_inputs_set[0]") == {
        "index": 0, "buf": image.ctypes.data, "size": 48, "pass_through": 0,
        "type": abi.RKNN_TENSOR_UINT8, "fmt": abi.RKNN_TENSOR_NHWC}
    rt.run(ctx)
    outs = outputs(0, 1)
    rt.outputs_get(ctx, outs)
    scores, boxes = expected_outputs(image.astype(np.int16) - 128)
    np.testing.assert_array_equal(buffers.output_view(outs[0], np.int8), scores)
    np.testing.assert_array_equal(buffers.output_view(outs[1], np.int8, (1, 4, 2, 2)).ravel(), boxes)
    rt.outputs_release(ctx, outs)


def test_inputs_set_float_and_pass_through(rt, double, ctx):
    image = input_image(1)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image.astype(np.float32) / 255,
                                                 abi.RKNN_TENSOR_NHWC)])
    assert (double.last("rknn_inputs_set[0]")["type"], double.last("rknn_inputs_set[0]")["size"]) \
        == (abi.RKNN_TENSOR_FLOAT32, 192)
    rt.run(ctx)
    from_float = outputs(0, 1)
    rt.outputs_get(ctx, from_float)
    expected = [view.copy() for view in (buffers.output_view(o, np.int8) for o in from_float)]
    rt.outputs_release(ctx, from_float)

    # the same image, already quantized and in the native layout (rows padded to w_stride 8)
    native_attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr())
    padded = np.zeros((1, 4, native_attr.w_stride, 3), dtype=np.int8)
    padded[:, :, :4, :] = (image.astype(np.int16) - 128).astype(np.int8)
    assert padded.nbytes == native_attr.size_with_stride
    rt.inputs_set(ctx, [buffers.input_from_array(0, padded, abi.RKNN_TENSOR_NHWC, pass_through=1)])
    assert double.last("rknn_inputs_set[0]")["pass_through"] == 1
    rt.run(ctx)
    from_native = outputs(0, 1)
    rt.outputs_get(ctx, from_native)
    for out, values in zip(from_native, expected):
        np.testing.assert_array_equal(buffers.output_view(out, np.int8), values)
    rt.outputs_release(ctx, from_native)


def test_inputs_set_accepts_a_ctypes_array(rt, double, ctx):
    image = input_image()
    array = (abi.rknn_input * 1)(buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC))
    rt.inputs_set(ctx, array)
    assert double.last("rknn_inputs_set[0]")["buf"] == image.ctypes.data


def test_too_small_input_is_param_invalid(rt, ctx):
    half = input_image()[:, :2]
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_inputs_set"):
        rt.inputs_set(ctx, [buffers.input_from_array(0, np.ascontiguousarray(half),
                                                     abi.RKNN_TENSOR_NHWC)])


def test_larger_input_is_read_up_to_the_size_needed(rt, ctx):
    image = input_image()
    longer = np.concatenate([image.reshape(-1), np.full(16, 255, image.dtype)])
    inp = buffers.input_from_array(0, longer, abi.RKNN_TENSOR_NHWC)
    assert rt.inputs_set(ctx, [inp]) == 0
    rt.run(ctx)
    outs = outputs(0)
    rt.outputs_get(ctx, outs)
    got = np.ctypeslib.as_array(ctypes.cast(outs[0].buf, ctypes.POINTER(ctypes.c_int8)), (10,)).copy()
    rt.outputs_release(ctx, outs)
    rt.inputs_set(ctx, [buffers.input_from_array(0, np.ascontiguousarray(image), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    outs = outputs(0)
    rt.outputs_get(ctx, outs)
    want = np.ctypeslib.as_array(ctypes.cast(outs[0].buf, ctypes.POINTER(ctypes.c_int8)), (10,)).copy()
    rt.outputs_release(ctx, outs)
    assert np.array_equal(got, want)


# ---------------------------------------------------------------- outputs

def test_outputs_get_runtime_allocates_and_release_frees(rt, double, ctx):
    rt.run(ctx)
    before = double.live_outputs()
    outs = outputs(0, 1)
    rt.outputs_get(ctx, outs)
    assert [double.last("rknn_outputs_get[%d]" % i) for i in range(2)] == [
        {"index": 0, "want_float": 0, "is_prealloc": 0, "buf": 0, "size": 0},
        {"index": 1, "want_float": 0, "is_prealloc": 0, "buf": 0, "size": 0}]
    assert all(o.buf for o in outs)  # written back into the caller's structs
    assert [o.size for o in outs] == [10, 16]
    with pytest.raises(ValueError, match="want_float"):
        buffers.output_view(outs[0], np.float32)  # 10 int8 bytes are no whole float32s
    assert double.live_outputs() == before + 2
    released = [o.buf for o in outs]
    rt.outputs_release(ctx, outs)
    assert [c["buf"] for c in double.calls("rknn_outputs_release[0]") +
            double.calls("rknn_outputs_release[1]")] == released
    assert double.live_outputs() == before
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_outputs_release"):
        rt.outputs_release(ctx, outs)  # the double refuses a second release


def test_outputs_get_into_a_ctypes_array(rt, ctx):
    rt.run(ctx)
    array = (abi.rknn_output * 2)()
    array[1].index = 1
    rt.outputs_get(ctx, array)
    assert array[0].buf and array[1].size == 16
    rt.outputs_release(ctx, array)


def test_want_float_dequantizes(rt, double, ctx):
    image = input_image(2)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    outs = outputs(0, 1, want_float=1)
    rt.outputs_get(ctx, outs)
    assert double.last("rknn_outputs_get[1]")["want_float"] == 1
    assert [o.size for o in outs] == [40, 64]
    scores, boxes = expected_outputs(image.astype(np.int16) - 128)
    np.testing.assert_allclose(buffers.output_view(outs[0], np.float32),
                               (scores.astype(np.float32) + 10) * 0.5)
    np.testing.assert_allclose(buffers.output_view(outs[1], np.float32), boxes * 0.25)
    rt.outputs_release(ctx, outs)


def test_prealloc_outputs_write_into_the_callers_buffers(rt, double, ctx):
    image = input_image(3)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    scores_buf, boxes_buf = np.zeros(10, np.int8), np.full(32, 99, np.int8)
    outs = [abi.rknn_output(index=0, is_prealloc=1, buf=scores_buf.ctypes.data, size=10),
            abi.rknn_output(index=1, is_prealloc=1, buf=boxes_buf.ctypes.data, size=32)]
    before = double.live_outputs()
    rt.outputs_get(ctx, outs)
    assert double.last("rknn_outputs_get[1]") == {
        "index": 1, "want_float": 0, "is_prealloc": 1, "buf": boxes_buf.ctypes.data, "size": 32}
    assert [(o.buf, o.size) for o in outs] == [(scores_buf.ctypes.data, 10),
                                               (boxes_buf.ctypes.data, 32)]
    assert double.live_outputs() == before
    scores, boxes = expected_outputs(image.astype(np.int16) - 128)
    np.testing.assert_array_equal(scores_buf, scores)
    np.testing.assert_array_equal(boxes_buf[:16], boxes)
    assert (boxes_buf[16:] == 99).all()  # nothing past the output
    rt.outputs_release(ctx, outs)  # frees nothing of ours
    assert double.live_outputs() == before


def test_prealloc_buffer_too_small_is_output_invalid(rt, double, ctx):
    small = np.zeros(10, np.int8)  # 10 bytes: enough for int8 scores, not for float32
    out = abi.rknn_output(index=0, is_prealloc=1, want_float=1, buf=small.ctypes.data, size=10)
    before = double.live_outputs()
    with pytest.raises(errors.RknnOutputInvalidError, match="rknn_outputs_get"):
        rt.outputs_get(ctx, [out])
    assert double.live_outputs() == before


def test_outputs_get_extend_gets_the_frame_id(rt, ctx):
    rt.run(ctx)
    rt.run(ctx)
    extend = abi.rknn_output_extend()
    outs = outputs(0)
    rt.outputs_get(ctx, outs, extend)
    assert extend.frame_id == 2
    rt.outputs_release(ctx, outs)


# ---------------------------------------------------------------- run, cores, shapes

def test_run_and_wait_pass_the_extend(rt, double, ctx):
    rt.run(ctx, abi.rknn_run_extend(non_block=1, timeout_ms=500))
    assert double.last("rknn_run") == {"ctx": ctx, "ext": 1, "non_block": 1, "timeout_ms": 500}
    rt.wait(ctx, abi.rknn_run_extend())
    assert double.last("rknn_wait") == {"ctx": ctx, "ext": 1}
    rt.run(ctx)
    assert double.last("rknn_run")["ext"] == 0


def test_core_mask_and_batch_core_num(rt, double, ctx):
    rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0_1_2)
    assert double.last("rknn_set_core_mask")["mask"] == 7
    with pytest.raises(errors.RknnParamInvalidError, match="core_mask=0x5"):
        rt.set_core_mask(ctx, 5)
    rt.set_batch_core_num(ctx, 3)
    assert double.last("rknn_set_batch_core_num")["n"] == 3


def test_set_input_shapes(rt, double, ctx):
    attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr())
    rt.set_input_shapes(ctx, [attr])
    assert double.last("rknn_set_input_shapes[0]")["dims"] == "1x4x4x3"
    attr.dims[1] = 8
    with pytest.raises(errors.RknnInputInvalidError):
        rt.set_input_shapes(ctx, [attr])


# ---------------------------------------------------------------- memory

def test_create_mem_and_destroy_mem(rt, double, ctx):
    before = double.live_mems()
    mem = rt.create_mem(ctx, 4096)
    assert isinstance(mem, ctypes.POINTER(abi.rknn_tensor_mem))
    assert double.last("rknn_create_mem") == {"ctx": ctx, "size": 4096}
    m = mem.contents
    assert (m.size, m.flags) == (4096, abi.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE)
    assert m.virt_addr and m.fd >= 0 and os.fstat(m.fd).st_size == 4096
    view = buffers.mem_view(mem)
    view[:] = 7
    assert os.pread(m.fd, 4, 100) == b"\x07" * 4  # the CPU mapping is the fd's pages
    assert double.live_mems() == before + 1
    address = ctypes.addressof(m)
    rt.destroy_mem(ctx, mem)
    assert double.last("rknn_destroy_mem")["mem"] == address
    assert double.live_mems() == before
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_destroy_mem"):
        rt.destroy_mem(ctx, mem)


def test_create_mem_null_is_malloc_error(rt, ctx):
    with pytest.raises(errors.RknnMallocError) as caught:
        rt.create_mem(ctx, 0)
    assert caught.value.function == "rknn_create_mem"
    assert "NULL" in str(caught.value) and "RKNN_ERR_MALLOC_FAIL" in str(caught.value)


def test_create_mem2_without_context(rt, double):
    flags = abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT | abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
    mem = rt.create_mem2(0, 2**20, flags)
    assert double.last("rknn_create_mem2") == {"ctx": 0, "size": 2**20, "alloc_flags": flags}
    assert mem.contents.size == 2**20
    rt.destroy_mem(0, mem)
    with pytest.raises(errors.RknnMallocError, match="rknn_create_mem2"):
        rt.create_mem2(0, 64, abi.RKNN_FLAG_MEMORY_CACHEABLE)


def test_create_mem_from_fd_and_phys(rt, double, ctx):
    base = rt.create_mem(ctx, 8192).contents
    shared = rt.create_mem_from_fd(ctx, base.fd, base.virt_addr + 4096, 4096, 4096)
    assert double.last("rknn_create_mem_from_fd") == {
        "ctx": ctx, "fd": base.fd, "virt": base.virt_addr + 4096, "size": 4096, "offset": 4096}
    s = shared.contents
    assert (s.fd, s.offset, s.flags) == (base.fd, 4096, abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD)
    buffers.mem_view(shared)[:4] = 5
    assert bytes(buffers.mem_view(base, offset=4096)[:4]) == b"\x05" * 4  # same pages
    phys = rt.create_mem_from_phys(ctx, 0x8000_0000, base.virt_addr, 8192)
    assert double.last("rknn_create_mem_from_phys")["phys"] == 0x8000_0000
    assert phys.contents.flags == abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS
    for mem in (phys, shared, ctypes.pointer(base)):
        rt.destroy_mem(ctx, mem)


def test_zero_copy_io_with_native_attrs(rt, double, ctx):
    in_attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    out_attrs = [rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
                 for i in range(2)]
    in_mem = rt.create_mem(ctx, in_attr.size_with_stride)
    out_mems = [rt.create_mem(ctx, a.size_with_stride) for a in out_attrs]
    rt.set_io_mem(ctx, in_mem, in_attr)
    call = double.last("rknn_set_io_mem")
    assert (call["index"], call["name"], call["size_with_stride"], call["w_stride"],
            call["mem"], call["mem_size"]) == (
        0, "input", 96, 8, ctypes.addressof(in_mem.contents), 96)
    for mem, attr in zip(out_mems, out_attrs):
        rt.set_io_mem(ctx, mem, attr)
    assert [(c["name"], c["size_with_stride"]) for c in double.calls("rknn_set_io_mem")] == [
        ("input", 96), ("scores", 10), ("boxes", 64)]

    image = input_image(4)
    quantized = (image.astype(np.int16) - 128).astype(np.int8)
    strided = buffers.mem_view(in_mem, np.int8, (1, 4, in_attr.w_stride, 3))
    strided[:, :, :4, :] = quantized
    rt.mem_sync(ctx, in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
    rt.run(ctx)
    for mem in out_mems:
        rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
    assert [c["mode"] for c in double.calls("rknn_mem_sync")] == [1, 2, 2]
    scores, boxes = expected_outputs(quantized)
    np.testing.assert_array_equal(buffers.mem_view(out_mems[0], np.int8), scores)
    nc1hwc2 = buffers.mem_view(out_mems[1], np.int8, (1, 1, 2, 2, 16))
    nchw = nc1hwc2[..., :4].transpose(0, 1, 4, 2, 3).reshape(1, 4, 2, 2)
    np.testing.assert_array_equal(nchw.ravel(), boxes)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_mem_sync"):
        rt.mem_sync(ctx, in_mem, 4)
    for mem in (in_mem, *out_mems):
        rt.destroy_mem(ctx, mem)


@pytest.mark.parametrize("salt", [1, 128, 255])
def test_the_payloads_salt_shifts_every_output_byte(rt, salt):
    """"salt=N" (documented in the double's header) adds N to every output byte, mod 256, by
    get and in a bound mem alike, and a duplicate context keeps it: a checker that draws N
    makes the outputs something only a program that runs the model prints."""
    image = input_image(5)
    quantized = (image.astype(np.int16) - 128).astype(np.int8)
    context = rt.init(b"RKNN salted salt=%d" % salt)
    dup = rt.dup_context(context)
    for c in (context, dup):
        rt.inputs_set(c, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
        rt.run(c)
        outs = outputs(0, 1)
        rt.outputs_get(c, outs)
        scores, boxes = expected_outputs(quantized, salt)
        got_scores = buffers.output_view(outs[0], np.int8)
        np.testing.assert_array_equal(got_scores, scores)
        np.testing.assert_array_equal(buffers.output_view(outs[1], np.int8, (1, 4, 2, 2)).ravel(), boxes)
        unsalted, _ = expected_outputs(quantized)
        assert (got_scores != unsalted).all()      # no score left where the formula without salt puts it
        rt.outputs_release(c, outs)
    attr = rt.query(context, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    attr.type = abi.RKNN_TENSOR_FLOAT32
    mem = rt.create_mem(context, attr.n_elems * 4)
    rt.set_io_mem(context, mem, attr)
    rt.run(context)
    np.testing.assert_array_equal(buffers.mem_view(mem, np.float32),
                                  expected_outputs(quantized, salt)[1].astype(np.float32) * np.float32(0.25))
    rt.destroy_mem(context, mem)
    rt.destroy(dup)
    rt.destroy(context)


def test_salt_0_is_the_model_without_salt(rt, ctx):
    image = input_image(6)
    results = []
    for context in (ctx, rt.init(b"RKNN salt=0")):
        rt.inputs_set(context, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
        rt.run(context)
        outs = outputs(0, 1)
        rt.outputs_get(context, outs)
        results.append([buffers.output_view(o, np.int8).copy() for o in outs])
        rt.outputs_release(context, outs)
    rt.destroy(context)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [b"RKNN salt=256", b"RKNN salt=-1", b"RKNN salt=+1", b"RKNN salt=",
                                 b"RKNN salt=1x", b"RKNN salt= 1"])
def test_a_malformed_salt_is_model_invalid(rt, bad: bytes):
    with pytest.raises(errors.RknnModelInvalidError):
        rt.init(bad)


def test_set_io_mem_too_small_for_the_layout(rt, ctx):
    plain = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    native_attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    mem = rt.create_mem(ctx, plain.size)  # a buffer sized from the plain attr's size: 16 bytes, not the native size_with_stride 64
    with pytest.raises(errors.RknnParamInvalidError, match="'boxes'"):
        rt.set_io_mem(ctx, mem, native_attr)
    rt.destroy_mem(ctx, mem)


@pytest.mark.parametrize("fmt", [abi.RKNN_TENSOR_NCHW, abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_UNDEFINED])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_outputs_bound_as_float_get_dequantised_values_at_each_run(rt, double, ctx, dtype, fmt):
    """Rockchip's zero-copy demos bind each output with the plain OUTPUT_ATTR, type set to
    FLOAT32, in a mem of n_elems x 4 bytes: every run writes (q - zp) x scale there (FLOAT16:
    n_elems x 2).  NHWC lays the 4-D "boxes" out as 1x2x2x4."""
    rknn_type = abi.RKNN_TENSOR_FLOAT32 if dtype is np.float32 else abi.RKNN_TENSOR_FLOAT16
    attrs = [rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i)) for i in range(2)]
    mems = []
    for attr in attrs:
        attr.type, attr.fmt = rknn_type, fmt
        mem = rt.create_mem(ctx, attr.n_elems * np.dtype(dtype).itemsize)
        mems.append(mem)
        rt.set_io_mem(ctx, mem, attr)
    assert [(c["name"], c["type"], c["fmt"]) for c in double.calls("rknn_set_io_mem")] == [
        ("scores", rknn_type, fmt), ("boxes", rknn_type, fmt)]
    for seed in (1, 2):                                   # each run rewrites the bound mems
        image = input_image(seed)
        rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        scores, boxes = expected_outputs((image.astype(np.int16) - 128).astype(np.int8))
        want_scores = (scores.astype(np.float32) + 10) * np.float32(0.5)
        want_boxes = boxes.astype(np.float32).reshape(1, 4, 2, 2) * np.float32(0.25)
        if fmt == abi.RKNN_TENSOR_NHWC:
            want_boxes = want_boxes.transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(buffers.mem_view(mems[0], dtype), want_scores.astype(dtype))
        np.testing.assert_array_equal(buffers.mem_view(mems[1], dtype), want_boxes.ravel().astype(dtype))
    for mem in mems:
        rt.destroy_mem(ctx, mem)


def test_float_outputs_refused_in_a_small_mem_or_a_layout_the_double_does_not_convert(rt, ctx):
    plain = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    native_boxes = rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    mem = rt.create_mem(ctx, 256)
    small = rt.create_mem(ctx, plain.n_elems * 4 - 1)
    try:
        as_float = abi.rknn_tensor_attr.from_buffer_copy(plain)
        as_float.type = abi.RKNN_TENSOR_FLOAT32
        with pytest.raises(errors.RknnParamInvalidError, match="'scores'"):
            rt.set_io_mem(ctx, small, as_float)               # n_elems x 4 - 1 bytes
        as_half = abi.rknn_tensor_attr.from_buffer_copy(plain)
        as_half.type = abi.RKNN_TENSOR_FLOAT16
        rt.set_io_mem(ctx, small, as_half)                    # n_elems x 2 fits
        blocked = abi.rknn_tensor_attr.from_buffer_copy(native_boxes)
        blocked.type = abi.RKNN_TENSOR_FLOAT32
        with pytest.raises(errors.RknnParamInvalidError, match="'boxes'"):
            rt.set_io_mem(ctx, mem, blocked)                  # NC1HWC2: int8 only
        other = abi.rknn_tensor_attr.from_buffer_copy(plain)
        other.type = abi.RKNN_TENSOR_UINT8
        with pytest.raises(errors.RknnParamInvalidError):
            rt.set_io_mem(ctx, mem, other)
    finally:
        rt.destroy_mem(ctx, small)
        rt.destroy_mem(ctx, mem)


def test_weight_and_internal_mem_sized_from_mem_size(rt, double):
    context = rt.init(MODEL, flag=abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    sizes = rt.query(context, abi.RKNN_QUERY_MEM_SIZE)
    assert sizes.total_dma_allocated_size == 0  # the runtime allocated nothing itself
    weight = rt.create_mem(context, sizes.total_weight_size)
    internal = rt.create_mem(context, sizes.total_internal_size)
    rt.set_weight_mem(context, weight)
    rt.set_internal_mem(context, internal)
    assert double.last("rknn_set_weight_mem")["size"] == 4096
    assert double.last("rknn_set_internal_mem")["size"] == 2048
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_weight_mem"):
        rt.set_weight_mem(context, internal)
    for mem in (weight, internal):
        rt.destroy_mem(context, mem)
    rt.destroy(context)


def test_memory_outside_must_be_set_before_a_run(rt, double):
    """MEM_ALLOC_OUTSIDE: rknn_run refuses until both the weight and the internal mem are set
    (PARAM_INVALID, as the simulator's A15); destroying one unsets it again."""
    context = rt.init(MODEL, flag=abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    rt.inputs_set(context, [buffers.input_from_array(0, input_image(3), abi.RKNN_TENSOR_NHWC)])
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
        rt.run(context)
    internal = rt.create_mem(context, 2048)
    rt.set_internal_mem(context, internal)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
        rt.run(context)                                    # the weights are still missing
    weight = rt.create_mem(context, 4096)
    rt.set_weight_mem(context, weight)
    rt.run(context)
    rt.destroy_mem(context, weight)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
        rt.run(context)
    assert double.last("rknn_destroy_mem")["size"] == 4096   # the log says which mem went
    rt.destroy_mem(context, internal)
    rt.destroy(context)


def test_internal_alloc_outside_needs_only_the_internal_mem(rt):
    context = rt.init(MODEL, flag=abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    rt.inputs_set(context, [buffers.input_from_array(0, input_image(3), abi.RKNN_TENSOR_NHWC)])
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
        rt.run(context)
    weight = rt.create_mem(context, 4096)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_weight_mem"):
        rt.set_weight_mem(context, weight)                 # the runtime owns the weights (A25)
    internal = rt.create_mem(context, 2048)
    rt.set_internal_mem(context, internal)
    rt.run(context)
    for mem in (weight, internal):
        rt.destroy_mem(context, mem)
    rt.destroy(context)


def test_a_plain_context_refuses_weight_and_internal_mems(rt, ctx):
    mem = rt.create_mem(ctx, 8192)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_weight_mem"):
        rt.set_weight_mem(ctx, mem)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_internal_mem"):
        rt.set_internal_mem(ctx, mem)
    rt.destroy_mem(ctx, mem)


def test_the_payload_sets_the_model_s_memory_sizes(rt):
    """"weights=N" and "internal=N" in the payload (whole words) give several fake models
    different sizes; the set_*_mem checks and the DMA total follow them."""
    model = b"RKNN big internal=9000 weights=12345"
    context = rt.init(model)
    sizes = rt.query(context, abi.RKNN_QUERY_MEM_SIZE)
    assert (sizes.total_weight_size, sizes.total_internal_size) == (12345, 9000)
    assert sizes.total_dma_allocated_size == 12345 + 9000 + 74
    assert rt.query(context, abi.RKNN_QUERY_CUSTOM_STRING).string == b" big internal=9000 weights=12345"
    rt.destroy(context)
    context = rt.init(b"RKNN xinternal=5", flag=abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)   # not a whole word
    assert rt.query(context, abi.RKNN_QUERY_MEM_SIZE).total_internal_size == 2048
    small = rt.create_mem(context, 2047)
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_internal_mem"):
        rt.set_internal_mem(context, small)
    rt.destroy_mem(context, small)
    rt.destroy(context)
    for bad in (b"RKNN internal=0", b"RKNN weights=12x", b"RKNN internal=2000000000"):
        with pytest.raises(errors.RknnModelInvalidError):
            rt.init(bad)


def test_contexts_share_views_of_one_internal_buffer(rt, double):
    """The documented reuse: one mem of the largest internal size, a view per context with its own
    size; a view larger than the buffer behind the fd is refused."""
    small = rt.init(b"RKNN small internal=1024", flag=abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    large = rt.init(b"RKNN large internal=3072", flag=abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    shared = rt.create_mem(large, 3072)
    s = shared.contents
    views = [rt.create_mem_from_fd(c, s.fd, s.virt_addr, n, 0) for c, n in ((small, 1024), (large, 3072))]
    for c, view in zip((small, large), views):
        rt.set_internal_mem(c, view)
    assert [c["fd"] for c in double.calls("rknn_set_internal_mem")] == [s.fd, s.fd]
    for c in (small, large):
        rt.inputs_set(c, [buffers.input_from_array(0, input_image(1), abi.RKNN_TENSOR_NHWC)])
        rt.run(c)
    with pytest.raises(errors.RknnMallocError, match="rknn_create_mem_from_fd"):
        rt.create_mem_from_fd(small, s.fd, s.virt_addr, 3072, 1)     # one byte past the end
    for c, view in zip((small, large), views):
        rt.destroy_mem(c, view)
    rt.destroy_mem(large, shared)
    with pytest.raises(errors.RknnMallocError, match="rknn_create_mem_from_fd"):
        rt.create_mem_from_fd(small, s.fd, 0, 16, 0)                 # the fd is closed now
    rt.destroy(small)
    rt.destroy(large)


# ---------------------------------------------------------------- buffers, no runtime needed

def test_input_from_array_keeps_the_array_alive():
    array = np.arange(48, dtype=np.int8).reshape(1, 4, 4, 3)
    alive = weakref.ref(array)
    tensor_input = buffers.input_from_array(2, array, abi.RKNN_TENSOR_NHWC)
    address = array.ctypes.data
    del array
    gc.collect()
    assert alive() is not None
    assert (tensor_input.index, tensor_input.buf, tensor_input.size, tensor_input.type) == (
        2, address, 48, abi.RKNN_TENSOR_INT8)


def test_input_from_array_refuses_what_it_cannot_point_at():
    image = np.zeros((1, 3, 4, 4), np.uint8)
    with pytest.raises(ValueError, match="contiguous"):
        buffers.input_from_array(0, image.transpose(0, 2, 3, 1), abi.RKNN_TENSOR_NHWC)
    with pytest.raises(ValueError, match="float64"):
        buffers.input_from_array(0, np.zeros(4), abi.RKNN_TENSOR_NHWC)
    with pytest.raises(TypeError):
        buffers.input_from_array(0, [1, 2, 3], abi.RKNN_TENSOR_NHWC)
    explicit = buffers.input_from_array(0, np.zeros(4, np.uint16), abi.RKNN_TENSOR_NCHW,
                                        type=abi.RKNN_TENSOR_FLOAT16, pass_through=1)
    assert (explicit.type, explicit.pass_through, explicit.size) == (abi.RKNN_TENSOR_FLOAT16, 1, 8)


def test_views_share_memory_and_check_sizes():
    storage = (ctypes.c_ubyte * 64)()
    mem = abi.rknn_tensor_mem(virt_addr=ctypes.addressof(storage), size=64)
    view = buffers.mem_view(mem, np.float32)
    assert view.shape == (16,)
    view[0] = 1.0
    assert bytes(storage[:4]) == np.float32(1.0).tobytes()
    assert buffers.mem_view(mem, np.uint8, (2, 3), offset=60 - 6).shape == (2, 3)
    with pytest.raises(ValueError, match="needs"):
        buffers.mem_view(mem, np.uint8, (2, 3), offset=60)
    with pytest.raises(ValueError, match="outside"):
        buffers.mem_view(mem, offset=65)
    with pytest.raises(ValueError, match="NULL"):
        buffers.mem_view(abi.rknn_tensor_mem(size=4))
    out = abi.rknn_output(buf=ctypes.addressof(storage), size=12)
    np.testing.assert_array_equal(buffers.output_view(out, np.float32, (3,)), view[:3])
    with pytest.raises(ValueError, match="NULL"):
        buffers.output_view(abi.rknn_output(), np.int8)


def test_every_function_of_our_c_header_has_a_signature():
    """native.SIGNATURES and lib/rknnlab/c/rknn_api.h (what the course's C compiles
    against) declare the same functions with the same number of arguments."""
    header = (Path(__file__).parents[1] / "lib" / "rknnlab" / "c" / "rknn_api.h").read_text()
    declared = {name: len([a for a in args.split(",") if a.strip()])
                for name, args in re.findall(r"^[\w ]+?\**\s*\b(rknn_\w+)\(([^)]*)\);", header, re.M)}
    assert len(declared) >= 20
    assert {name: len(argtypes) for name, (_, argtypes) in native.SIGNATURES.items()} == declared


# ------------------------------------------------------- per-layer profile

def _perf_rows(text: str) -> List[List[str]]:
    """The layer rows of a PERF_DETAIL text, each split into its 12 cells."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("ID   OpType")) + 2
    end = next(k for k in range(start, len(lines)) if set(lines[k]) == {"-"})
    return [line.split(None, 11) for line in lines[start:end]]


def test_perf_detail_needs_a_context_made_with_collect_perf_mask(rt, double, ctx):
    """The API reference: the query works only when rknn_init had RKNN_FLAG_COLLECT_PERF_MASK.
    Refused with PARAM_INVALID (the simulator's code, A48), before and after a run."""
    for _ in range(2):
        with pytest.raises(errors.RknnParamInvalidError):
            rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
        assert double.last("rknn_query")["cmd"] == abi.RKNN_QUERY_PERF_DETAIL
        rt.run(ctx)
    profiled = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    twin = rt.dup_context(profiled)          # a duplicate keeps the flag
    try:
        for context in (profiled, twin):
            detail = rt.query(context, abi.RKNN_QUERY_PERF_DETAIL)
            assert detail.data_len == len(detail.perf_data) > 1000   # without the NUL
            assert detail.text().startswith("-" * 203 + "\n")
        with pytest.raises(errors.RknnParamInvalidError):   # the query struct's size is checked
            rt.query(profiled, abi.RKNN_QUERY_PERF_DETAIL, abi.rknn_perf_run())
    finally:
        rt.destroy(twin)
        rt.destroy(profiled)


def test_perf_detail_text_has_the_runtime_layout(rt):
    """Finding F1's layout: titled tables between dashed lines, a layer table numbered from 1,
    totals that are the sums of its rows, then the time per op type, longest first."""
    context = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.run(context)
        text = rt.query(context, abi.RKNN_QUERY_PERF_DETAIL).text()
    finally:
        rt.destroy(context)
    lines = text.splitlines()
    assert lines[0] == lines[2] == lines[4] == "-" * 203
    assert lines[1] == " " * 86 + "Network Layer Information Table"
    assert lines[3].split() == ["ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
                                "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)", "WorkLoad(0/1/2)",
                                "RW(KB)", "FullName"]
    rows = _perf_rows(text)
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert [r[1] for r in rows] == ["InputOperator", "ConvRelu", "Conv", "Reshape", "OutputOperator",
                                    "OutputOperator"]
    assert rows[0][4] == "\\" and rows[-1][5] == "\\" and rows[-2][5] == "\\"
    assert (rows[0][5], rows[1][4]) == ("(1,3,4,4)", "(1,3,4,4),(4,3,3,3),(4)")
    for row in rows:
        ddr, npu, total = map(int, row[6].split("/"))
        assert total == max(ddr, npu)
        assert (row[8] == "\\") == (row[1] not in ("ConvRelu", "Conv"))
    total_us = sum(int(r[7]) for r in rows)
    assert f"Total Operator Elapsed Per Frame Time(us): {total_us}" in lines
    assert f"Total Memory Read/Write Per Frame Size(KB): {sum(int(r[10]) for r in rows)}" in lines
    ranking_title = lines.index(" " * 30 + "Operator Time Consuming Ranking Table")
    assert lines[ranking_title + 2].split() == ["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)",
                                                "NPUTime(us)", "TotalTime(us)", "TimeRatio(%)"]
    ranking = [line.split() for line in lines[ranking_title + 4:-1]]
    assert lines[-1] == "-" * 98 and text.endswith("\n")
    by_op: Dict[str, List[int]] = {}
    for row in rows:
        entry = by_op.setdefault(row[1], [0, 0, 0])
        entry[0] += 1
        entry[1 if row[3] == "CPU" else 2] += int(row[7])
    assert [r[0] for r in ranking] == sorted(by_op, key=lambda op: -(by_op[op][1] + by_op[op][2]))
    for op, calls, cpu, gpu, npu, total, ratio in ranking:
        assert [int(calls), int(cpu), int(npu)] == by_op[op] and gpu == "0"
        assert int(total) == int(cpu) + int(npu)
        assert ratio == f"{100 * int(total) / total_us:.2f}%"


@pytest.mark.parametrize("mask, split_load, other_load", [
    (None, "100.0%/0.0%/0.0%", "100.0%/0.0%/0.0%"),                  # AUTO: core 0 here
    (abi.RKNN_NPU_CORE_1, "0.0%/100.0%/0.0%", "0.0%/100.0%/0.0%"),
    (abi.RKNN_NPU_CORE_0_1, "50.0%/50.0%/0.0%", "100.0%/0.0%/0.0%"),
    (abi.RKNN_NPU_CORE_0_1_2, "33.3%/33.3%/33.3%", "100.0%/0.0%/0.0%"),
    (abi.RKNN_NPU_CORE_ALL, "33.3%/33.3%/33.3%", "100.0%/0.0%/0.0%"),
])
def test_perf_detail_workload_follows_the_core_mask(rt, mask, split_load, other_load):
    """Conv layers are split over the mask's cores (API reference p.21), a Reshape is not, CPU
    layers load no core; MacUsage is finding F2's MACs / (time x 1024 MACs/cycle x 1 GHz)."""
    context = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        if mask is not None:
            rt.set_core_mask(context, mask)
        rt.run(context)
        rows = {r[1]: r for r in _perf_rows(rt.query(context, abi.RKNN_QUERY_PERF_DETAIL).text())}
    finally:
        rt.destroy(context)
    assert rows["ConvRelu"][9] == rows["Conv"][9] == split_load
    assert rows["Reshape"][9] == other_load
    assert rows["InputOperator"][9] == rows["OutputOperator"][9] == "0.0%/0.0%/0.0%"
    cores = sum(1 for load in split_load.split("/") if load != "0.0%")
    macs = {"ConvRelu": 1 * 4 * 2 * 2 * 3 * 3 * 3, "Conv": 1 * 10 * 1 * 1 * 4 * 2 * 2}
    for op, n in macs.items():
        usage = 100 * (n / cores) / (int(rows[op][7]) * 1e-6 * 1024 * 1e9)
        assert rows[op][8] == "/".join(f"{usage:.2f}" if load != "0.0%" else "0.00"
                                       for load in split_load.split("/"))


def test_perf_detail_text_stays_until_the_next_query(rt):
    """The text is the context's: the same address is handed out again, and another context's
    text (a different core mask) does not overwrite it."""
    first = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    second = rt.init(MODEL, abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.set_core_mask(second, abi.RKNN_NPU_CORE_0_1_2)
        mine = rt.query(first, abi.RKNN_QUERY_PERF_DETAIL)
        text = mine.text()
        theirs = rt.query(second, abi.RKNN_QUERY_PERF_DETAIL)
        assert theirs.address() != mine.address() and theirs.text() != text
        assert mine.text() == text
        assert rt.query(first, abi.RKNN_QUERY_PERF_DETAIL).address() == mine.address()
    finally:
        rt.destroy(second)
        rt.destroy(first)


def test_delays_make_the_named_calls_slower(rt, ctx, monkeypatch):
    """$RKNN_DOUBLE_DELAY_US (for tests that time a C program's calls): "A" sleeps A us in every
    call, "A+B" sleeps A + k*B in the k-th; "rknn_outputs_get_float" adds to a want_float get."""
    import time

    def timed(call) -> float:
        started = time.monotonic()
        call()
        return (time.monotonic() - started) * 1e3

    rt.inputs_set(ctx, [buffers.input_from_array(0, input_image(), abi.RKNN_TENSOR_NHWC)])
    assert min(timed(lambda: rt.run(ctx)) for _ in range(3)) < 3   # no delay without the variable
    monkeypatch.setenv("RKNN_DOUBLE_DELAY_US", "rknn_run=3000+2000,rknn_outputs_get_float=4000")
    # A sleep is never shorter than asked; a busy machine can make one much longer: three tries.
    tries = []
    for attempt in range(3):
        runs = [timed(lambda: rt.run(ctx)) for _ in range(3)]
        tries.append(runs)
        if all(3 + 2 * k <= ms <= 3 + 2 * k + 4 for k, ms in enumerate(runs, 3 * attempt)):
            break
    else:
        pytest.fail(f"rknn_run's k-th call should sleep 3 + 2k ms: {tries}")
    ours = np.zeros(16, np.int8)
    raw = min(timed(lambda: rt.outputs_get(ctx, [abi.rknn_output(index=1, want_float=0, is_prealloc=1,
                                                                 buf=ours.ctypes.data, size=16)]))
              for _ in range(3))
    floats = np.zeros(16, np.float32)
    converted = timed(lambda: rt.outputs_get(ctx, [abi.rknn_output(index=1, want_float=1, is_prealloc=1,
                                                                   buf=floats.ctypes.data, size=64)]))
    assert raw < 3 and converted >= 4


# ------------------------------------------------------- the fake text detector (video_pipeline.c)

DETECTOR = b"RKNN detector=6x8 c1=2 c2=4 zp=-100 scale=0.005"


def detector_probability(rgb: np.ndarray, zp: int = -100, scale: float = 0.005) -> np.ndarray:
    """What the double's fake detector computes from a uint8 HxWx3 image (its header comment):
    luma, then (255 - luma) / 255 except for letterbox black, quantized to int8."""
    r, g, b = (rgb[..., c].astype(np.int64) for c in range(3))
    luma = (77 * r + 150 * g + 29 * b) >> 8
    p = np.where(luma < 16, 0.0, (255.0 - luma) / 255.0).astype(np.float32)
    q = np.floor(p / np.float32(scale) + np.float32(0.5)).astype(np.int64) + zp
    return np.clip(q, -128, 127).astype(np.int8)


def _detector_attrs(rt, context):
    attrs = {}
    for name, cmd in (("in", abi.RKNN_QUERY_INPUT_ATTR), ("out", abi.RKNN_QUERY_OUTPUT_ATTR),
                      ("native_in", abi.RKNN_QUERY_NATIVE_INPUT_ATTR),
                      ("native_out", abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR),
                      ("nhwc_out", abi.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR)):
        a = rt.query(context, cmd, abi.rknn_tensor_attr(index=0))
        attrs[name] = a
    return attrs


def _dims(a) -> List[int]:
    return [a.dims[d] for d in range(a.n_dims)]


def test_the_payload_describes_a_text_detector(rt):
    """"detector=HxW": one NHWC image in, one probability map out; the native output is NC1HWC2
    with the payload's C2 in dims[4]; the native input's rows have the payload's w_stride."""
    context = rt.init(DETECTOR + b" w_stride=10")
    try:
        num = rt.query(context, abi.RKNN_QUERY_IN_OUT_NUM)
        assert (num.n_input, num.n_output) == (1, 1)
        a = _detector_attrs(rt, context)
        assert (_dims(a["in"]), a["in"].fmt, a["in"].name) == ([1, 6, 8, 3], abi.RKNN_TENSOR_NHWC, b"x")
        assert (a["native_in"].w_stride, a["native_in"].size_with_stride) == (10, 6 * 10 * 3)
        assert (a["in"].w_stride, a["in"].size_with_stride) == (8, 6 * 8 * 3)
        assert (_dims(a["out"]), a["out"].fmt) == ([1, 1, 6, 8], abi.RKNN_TENSOR_NCHW)
        assert (_dims(a["native_out"]), a["native_out"].fmt) == ([1, 2, 6, 8, 4], abi.RKNN_TENSOR_NC1HWC2)
        assert a["native_out"].size_with_stride == 2 * 6 * 8 * 4
        assert (_dims(a["nhwc_out"]), a["nhwc_out"].fmt) == ([1, 6, 8, 1], abi.RKNN_TENSOR_NHWC)
        for out in (a["out"], a["native_out"]):
            assert (out.type, out.zp, out.scale) == (abi.RKNN_TENSOR_INT8, -100, pytest.approx(0.005))
        assert rt.query(context, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size == 4096 + 2048 + 6 * 8 * 4
        twin = rt.dup_context(context)                          # a duplicate is the same detector
        assert _dims(rt.query(twin, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))) == \
            [1, 2, 6, 8, 4]
        rt.destroy(twin)
    finally:
        rt.destroy(context)
    for bad in (b"RKNN detector=6", b"RKNN detector=0x8", b"RKNN detector=6x8y", b"RKNN detector=6x8 c2=0",
                b"RKNN detector=6x8 c1=0", b"RKNN detector=6x8 w_stride=7", b"RKNN detector=6x8 zp=200", b"RKNN detector=6x8 scale=-1",
                b"RKNN detector=6x5000"):
        with pytest.raises(errors.RknnModelInvalidError):
            rt.init(bad)


def _bind(rt, context, attr, size=None):
    mem = rt.create_mem(context, size if size is not None else attr.size_with_stride)
    rt.set_io_mem(context, mem, attr)
    return mem


@pytest.mark.parametrize("in_type", [abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_INT8])
def test_the_detector_computes_its_map_from_the_bound_input(rt, in_type):
    """Input rows at the bound attr's w_stride; channel 0 of each NC1HWC2 pixel (block 0) is the
    formula, every other byte holds 127; a plain NCHW-bound output gets the dense map."""
    context = rt.init(DETECTOR + b" w_stride=10")
    mems = []
    try:
        a = _detector_attrs(rt, context)
        a["native_in"].type = in_type
        in_mem = _bind(rt, context, a["native_in"])
        out_mem = _bind(rt, context, a["native_out"])
        mems += [in_mem, out_mem]
        image = np.random.default_rng(5).integers(0, 256, (6, 8, 3), dtype=np.uint8)
        image[0, :3] = 0                                          # letterbox black: no text
        image[1, :2] = 255                                        # white paper
        rows = buffers.mem_view(in_mem, np.uint8, (6, 10, 3))
        rows[:] = 77                                              # the padding must not be read
        rows[:, :8] = image if in_type == abi.RKNN_TENSOR_UINT8 else (image.astype(np.int16) - 128).astype(np.uint8)
        rt.run(context)
        blocked = buffers.mem_view(out_mem, np.int8, (2, 6, 8, 4))    # C1, H, W, C2
        expected = detector_probability(image)
        np.testing.assert_array_equal(blocked[0, ..., 0], expected)
        assert (blocked[0, ..., 1:] == 127).all() and (blocked[1] == 127).all()
        assert (expected[0, :3] == -100).all() and expected[1, 0] == -100   # p = 0 -> q = zp
        dense = _bind(rt, context, a["out"])
        mems.append(dense)
        rt.run(context)
        np.testing.assert_array_equal(buffers.mem_view(dense, np.int8, (6, 8)), expected)
    finally:
        for mem in mems:
            rt.destroy_mem(context, mem)
        rt.destroy(context)


def test_the_detector_runs_only_from_bound_mems_of_the_right_size(rt):
    context = rt.init(DETECTOR)
    mems = []
    try:
        a = _detector_attrs(rt, context)
        with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
            rt.run(context)                                        # nothing bound: zero-copy only
        with pytest.raises(errors.RknnInputInvalidError):
            rt.inputs_set(context, [buffers.input_from_array(0, np.zeros((1, 6, 8, 3), np.uint8),
                                                             abi.RKNN_TENSOR_NHWC)])
        small = rt.create_mem(context, 6 * 8 * 3 - 1)
        short_map = rt.create_mem(context, 6 * 8 * 4)                # one block of two
        mems.append(short_map)
        with pytest.raises(errors.RknnParamInvalidError):
            rt.set_io_mem(context, short_map, a["native_out"])
        mems.append(small)
        with pytest.raises(errors.RknnParamInvalidError):
            rt.set_io_mem(context, small, a["native_in"])
        wrong_c2 = abi.rknn_tensor_attr.from_buffer_copy(a["native_out"])
        wrong_c2.dims[4] = 16
        big = rt.create_mem(context, 2 * 6 * 8 * 16)
        mems.append(big)
        with pytest.raises(errors.RknnParamInvalidError):
            rt.set_io_mem(context, big, wrong_c2)                  # C2 is the model's, never assumed
        as_float = abi.rknn_tensor_attr.from_buffer_copy(a["out"])
        as_float.type = abi.RKNN_TENSOR_FLOAT32
        with pytest.raises(errors.RknnParamInvalidError):
            rt.set_io_mem(context, big, as_float)
        mems.append(_bind(rt, context, a["native_in"]))
        with pytest.raises(errors.RknnParamInvalidError, match="rknn_run"):
            rt.run(context)                                        # the output is not bound yet
        mems.append(_bind(rt, context, a["native_out"]))
        rt.run(context)
        out = abi.rknn_output(index=0, want_float=0, is_prealloc=0)
        with pytest.raises(errors.RknnOutputInvalidError):
            rt.outputs_get(context, [out])
    finally:
        for mem in mems:
            rt.destroy_mem(context, mem)
        rt.destroy(context)


def test_two_threads_in_one_detector_context_are_refused(rt, double, monkeypatch):
    """One thread per context at a time: a run entering while another runs the same context is
    logged ("rknn_run_overlap") and refused; two contexts run side by side."""
    import threading
    monkeypatch.setenv("RKNN_DOUBLE_DELAY_US", "rknn_run=300000")
    contexts, mems = [rt.init(DETECTOR)], []
    contexts.append(rt.dup_context(contexts[0]))
    try:
        for context in contexts:
            a = _detector_attrs(rt, context)
            mems += [(context, _bind(rt, context, a["native_in"])), (context, _bind(rt, context, a["native_out"]))]

        def run_all(targets):
            failures: List[Exception] = []

            def one(context):
                try:
                    rt.run(context)
                except errors.RknnError as error:
                    failures.append(error)
            threads = [threading.Thread(target=one, args=(c,)) for c in targets]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return failures

        double.reset()
        assert run_all(contexts) == []                             # one thread per context: fine
        assert double.calls("rknn_run_overlap") == []
        failures = run_all([contexts[0], contexts[0]])
        assert len(failures) == 1 and isinstance(failures[0], errors.RknnCtxInvalidError)
        assert len(double.calls("rknn_run_overlap")) == 1
        rt.run(contexts[0])                                        # the context is free again
    finally:
        for context, mem in mems:
            rt.destroy_mem(context, mem)
        for context in reversed(contexts):
            rt.destroy(context)


@pytest.mark.parametrize("cores, refused", [(1, [abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2, abi.RKNN_NPU_CORE_0_1,
                                                 abi.RKNN_NPU_CORE_0_1_2]),
                                            (2, [abi.RKNN_NPU_CORE_2, abi.RKNN_NPU_CORE_0_1_2]),
                                            (3, [])])
def test_npu_cores_in_the_payload_limit_the_core_masks(rt, cores, refused):
    """"npu_cores=N": a mask naming a core the SoC lacks is refused (PARAM_INVALID, as the simulator);
    AUTO and ALL always pass; a duplicate has the same cores."""
    context = rt.init(b"RKNN npu_cores=%d" % cores)
    twin = rt.dup_context(context)
    try:
        for c in (context, twin):
            for mask in (abi.RKNN_NPU_CORE_AUTO, abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2,
                         abi.RKNN_NPU_CORE_0_1, abi.RKNN_NPU_CORE_0_1_2, abi.RKNN_NPU_CORE_ALL):
                if mask in refused:
                    with pytest.raises(errors.RknnParamInvalidError):
                        rt.set_core_mask(c, mask)
                else:
                    rt.set_core_mask(c, mask)
    finally:
        rt.destroy(twin)
        rt.destroy(context)
    for bad in (b"RKNN npu_cores=0", b"RKNN npu_cores=4"):
        with pytest.raises(errors.RknnModelInvalidError):
            rt.init(bad)
