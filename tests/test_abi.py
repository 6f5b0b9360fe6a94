"""rknnlab.rknn.abi against the facts sheet (shared/reference/rknn-facts.md, section 1).

Layouts are those of 64-bit Linux.  The offsets below were worked out by hand
from the sheet's field lists with the C alignment rules (each field at a
multiple of its own alignment, the struct padded to its largest alignment);
tests/test_native_double.py also compares them with what gcc lays out.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rknnlab.rknn import abi, errors

is_64bit = ctypes.sizeof(ctypes.c_void_p) == 8
only_64bit = pytest.mark.skipif(not is_64bit, reason="the facts sheet lists 64-bit layouts")

# struct -> (sizeof, {field: (offset, size)})
LAYOUTS = {
    "rknn_input_output_num": (8, {"n_input": (0, 4), "n_output": (4, 4)}),
    "rknn_tensor_attr": (376, {
        "index": (0, 4), "n_dims": (4, 4), "dims": (8, 64), "name": (72, 256),
        "n_elems": (328, 4), "size": (332, 4), "fmt": (336, 4), "type": (340, 4),
        "qnt_type": (344, 4), "fl": (348, 1), "zp": (352, 4), "scale": (356, 4),
        "w_stride": (360, 4), "size_with_stride": (364, 4), "pass_through": (368, 1),
        "h_stride": (372, 4)}),
    "rknn_mem_size": (64, {
        "total_weight_size": (0, 4), "total_internal_size": (4, 4),
        "total_dma_allocated_size": (8, 8), "total_sram_size": (16, 4),
        "free_sram_size": (20, 4), "reserved": (24, 40)}),
    "rknn_tensor_mem": (40, {
        "virt_addr": (0, 8), "phys_addr": (8, 8), "fd": (16, 4), "offset": (20, 4),
        "size": (24, 4), "flags": (28, 4), "priv_data": (32, 8)}),
    "rknn_input": (32, {
        "index": (0, 4), "buf": (8, 8), "size": (16, 4), "pass_through": (20, 1),
        "type": (24, 4), "fmt": (28, 4)}),
    "rknn_output": (24, {
        "want_float": (0, 1), "is_prealloc": (1, 1), "index": (4, 4), "buf": (8, 8),
        "size": (16, 4)}),
    "rknn_init_extend": (136, {
        "ctx": (0, 8), "real_model_offset": (8, 4), "real_model_size": (12, 4),
        "model_buffer_fd": (16, 4), "model_buffer_flags": (20, 4), "reserved": (24, 112)}),
    "rknn_run_extend": (24, {
        "frame_id": (0, 8), "non_block": (8, 4), "timeout_ms": (12, 4), "fence_fd": (16, 4)}),
    "rknn_output_extend": (8, {"frame_id": (0, 8)}),
    "rknn_sdk_version": (512, {"api_version": (0, 256), "drv_version": (256, 256)}),
    "rknn_perf_run": (8, {"run_duration": (0, 8)}),
    "rknn_custom_string": (1024, {"string": (0, 1024)}),
}


def test_c_structs_lists_every_struct_of_the_facts_sheet():
    assert set(abi.C_STRUCTS) == set(LAYOUTS)
    for name, cls in abi.C_STRUCTS.items():
        assert cls.__name__ == name
        assert issubclass(cls, ctypes.Structure)
        assert getattr(abi, name) is cls


@pytest.mark.parametrize("struct", sorted(LAYOUTS))
def test_field_names_and_order_are_those_of_c(struct):
    assert [f[0] for f in abi.C_STRUCTS[struct]._fields_] == list(LAYOUTS[struct][1])


@only_64bit
@pytest.mark.parametrize("struct", sorted(LAYOUTS))
def test_struct_size_and_field_offsets(struct):
    size, fields = LAYOUTS[struct]
    cls = abi.C_STRUCTS[struct]
    assert ctypes.sizeof(cls) == size
    for field, (offset, field_size) in fields.items():
        descriptor = getattr(cls, field)
        assert (descriptor.offset, descriptor.size) == (offset, field_size), field


def test_field_signedness():
    attr = abi.rknn_tensor_attr(fl=-3, zp=-128, fmt=-1)
    assert (attr.fl, attr.zp, attr.fmt) == (-3, -128, -1)
    mem = abi.rknn_tensor_mem(fd=-1, offset=-4)
    assert (mem.fd, mem.offset) == (-1, -4)
    assert abi.rknn_perf_run(run_duration=-1).run_duration == -1
    assert abi.rknn_run_extend(fence_fd=-1).fence_fd == -1
    assert abi.rknn_output(want_float=255).want_float == 255  # uint8


def test_rknn_context_follows_the_pointer_size():
    assert ctypes.sizeof(abi.rknn_context) == ctypes.sizeof(ctypes.c_void_p)
    assert abi.rknn_context(2**32 + 5).value == (2**32 + 5 if is_64bit else 5)


EXPECTED_CONSTANTS = {
    "RKNN_MAX_DIMS": 16, "RKNN_MAX_NAME_LEN": 256,
    # errors
    "RKNN_SUCC": 0, "RKNN_ERR_FAIL": -1, "RKNN_ERR_TIMEOUT": -2, "RKNN_ERR_DEVICE_UNAVAILABLE": -3,
    "RKNN_ERR_MALLOC_FAIL": -4, "RKNN_ERR_PARAM_INVALID": -5, "RKNN_ERR_MODEL_INVALID": -6,
    "RKNN_ERR_CTX_INVALID": -7, "RKNN_ERR_INPUT_INVALID": -8, "RKNN_ERR_OUTPUT_INVALID": -9,
    "RKNN_ERR_DEVICE_UNMATCH": -10, "RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL": -11,
    "RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION": -12,
    "RKNN_ERR_TARGET_PLATFORM_UNMATCH": -13,
    # queries
    "RKNN_QUERY_IN_OUT_NUM": 0, "RKNN_QUERY_INPUT_ATTR": 1, "RKNN_QUERY_OUTPUT_ATTR": 2,
    "RKNN_QUERY_PERF_DETAIL": 3, "RKNN_QUERY_PERF_RUN": 4, "RKNN_QUERY_SDK_VERSION": 5,
    "RKNN_QUERY_MEM_SIZE": 6, "RKNN_QUERY_CUSTOM_STRING": 7, "RKNN_QUERY_NATIVE_INPUT_ATTR": 8,
    "RKNN_QUERY_NATIVE_OUTPUT_ATTR": 9, "RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR": 10,
    "RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR": 11, "RKNN_QUERY_DEVICE_MEM_INFO": 12,
    "RKNN_QUERY_INPUT_DYNAMIC_RANGE": 13, "RKNN_QUERY_CURRENT_INPUT_ATTR": 14,
    "RKNN_QUERY_CURRENT_OUTPUT_ATTR": 15, "RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR": 16,
    "RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR": 17,
    # tensor types, formats, quantization
    "RKNN_TENSOR_FLOAT32": 0, "RKNN_TENSOR_FLOAT16": 1, "RKNN_TENSOR_INT8": 2,
    "RKNN_TENSOR_UINT8": 3, "RKNN_TENSOR_INT16": 4, "RKNN_TENSOR_UINT16": 5,
    "RKNN_TENSOR_INT32": 6, "RKNN_TENSOR_UINT32": 7, "RKNN_TENSOR_INT64": 8,
    "RKNN_TENSOR_BOOL": 9, "RKNN_TENSOR_INT4": 10, "RKNN_TENSOR_BFLOAT16": 11,
    "RKNN_TENSOR_NCHW": 0, "RKNN_TENSOR_NHWC": 1, "RKNN_TENSOR_NC1HWC2": 2,
    "RKNN_TENSOR_UNDEFINED": 3,
    "RKNN_TENSOR_QNT_NONE": 0, "RKNN_TENSOR_QNT_DFP": 1, "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC": 2,
    # core masks
    "RKNN_NPU_CORE_AUTO": 0, "RKNN_NPU_CORE_0": 1, "RKNN_NPU_CORE_1": 2, "RKNN_NPU_CORE_2": 4,
    "RKNN_NPU_CORE_0_1": 3, "RKNN_NPU_CORE_0_1_2": 7, "RKNN_NPU_CORE_ALL": 0xFFFF,
    # init flags
    "RKNN_FLAG_PRIOR_HIGH": 0x0, "RKNN_FLAG_PRIOR_MEDIUM": 0x1, "RKNN_FLAG_PRIOR_LOW": 0x2,
    "RKNN_FLAG_ASYNC_MASK": 0x4, "RKNN_FLAG_COLLECT_PERF_MASK": 0x8,
    "RKNN_FLAG_MEM_ALLOC_OUTSIDE": 0x10, "RKNN_FLAG_SHARE_WEIGHT_MEM": 0x20,
    "RKNN_FLAG_FENCE_IN_OUTSIDE": 0x40, "RKNN_FLAG_FENCE_OUT_OUTSIDE": 0x80,
    "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY": 0x100, "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE": 0x200,
    "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU": 0x400, "RKNN_FLAG_ENABLE_SRAM": 0x800,
    "RKNN_FLAG_SHARE_SRAM": 0x1000, "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY": 0x2000,
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE": 0x4000,
    "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE": 0x8000,
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY": 0x10000, "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT": 0x20000,
    # memory
    "RKNN_FLAG_MEMORY_FLAGS_DEFAULT": 0, "RKNN_FLAG_MEMORY_CACHEABLE": 1,
    "RKNN_FLAG_MEMORY_NON_CACHEABLE": 2, "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM": 4,
    "RKNN_MEMORY_SYNC_TO_DEVICE": 1, "RKNN_MEMORY_SYNC_FROM_DEVICE": 2,
    "RKNN_MEMORY_SYNC_BIDIRECTIONAL": 3,
    "RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE": 1, "RKNN_TENSOR_MEMORY_FLAGS_FROM_FD": 2,
    "RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS": 3, "RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN": 4,
}


def test_constant_values():
    wrong = {name: getattr(abi, name, "missing") for name, value in EXPECTED_CONSTANTS.items()
             if getattr(abi, name, None) != value}
    assert wrong == {}


def test_no_constant_beyond_the_facts_sheet():
    exported = {name for name in vars(abi) if name.startswith("RKNN_")}
    assert exported == set(EXPECTED_CONSTANTS)


@pytest.mark.parametrize("name", [
    "RKNN_QUERY_OUT_ATTR", "RKNN_FLAG_ZERO_COPY", "RKNN_MEM_STRATEGY_SEQUENTIAL",
    "RKNN_MEM_STRATEGY_DEFAULT", "RKNN_ERR_INCOMPATIBLE_PRE_COMPILE_MODEL",
])
def test_seed_inventions_do_not_exist(name):
    assert not hasattr(abi, name)


@pytest.mark.parametrize("table, prefix, count", [
    ("TYPE_NAMES", "RKNN_TENSOR_", 12), ("FMT_NAMES", "RKNN_TENSOR_", 4),
    ("QNT_NAMES", "RKNN_TENSOR_QNT_", 3), ("QUERY_NAMES", "RKNN_QUERY_", 18),
    ("ERROR_NAMES", "RKNN_", 14), ("CORE_MASK_NAMES", "RKNN_NPU_CORE_", 7),
    ("INIT_FLAG_NAMES", "RKNN_", 19), ("MEM_ALLOC_FLAG_NAMES", "RKNN_FLAG_MEMORY_", 4),
    ("MEM_SYNC_NAMES", "RKNN_MEMORY_SYNC_", 3),
    ("TENSOR_MEM_FLAG_NAMES", "RKNN_TENSOR_MEMORY_FLAGS_", 4),
])
def test_name_tables_map_values_to_their_constants(table, prefix, count):
    names = getattr(abi, table)
    assert len(names) == count
    for value, name in names.items():
        assert name.startswith(prefix)
        assert getattr(abi, name) == value


def test_name_tables_keep_types_and_formats_apart():
    assert abi.TYPE_NAMES[2] == "RKNN_TENSOR_INT8"
    assert abi.FMT_NAMES[2] == "RKNN_TENSOR_NC1HWC2"
    assert abi.QNT_NAMES[2] == "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC"
    assert abi.QUERY_NAMES == {v: k for k, v in EXPECTED_CONSTANTS.items()
                               if k.startswith("RKNN_QUERY_")}


def test_name_of():
    assert abi.name_of("RKNN_TENSOR_", 2) == "RKNN_TENSOR_INT8"
    assert abi.name_of("RKNN_TENSOR_N", 2) == "RKNN_TENSOR_NC1HWC2"
    assert abi.name_of("RKNN_TENSOR_QNT_", 2) == "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC"
    assert abi.name_of("RKNN_QUERY_", 6) == "RKNN_QUERY_MEM_SIZE"
    assert abi.name_of("RKNN_ERR_", -11) == "RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL"
    assert abi.name_of("RKNN_FLAG_", 0x10) == "RKNN_FLAG_MEM_ALLOC_OUTSIDE"
    assert abi.name_of("RKNN_FLAG_MEMORY_", 1) == "RKNN_FLAG_MEMORY_CACHEABLE"
    assert abi.name_of("RKNN_NPU_CORE_", 7) == "RKNN_NPU_CORE_0_1_2"
    with pytest.raises(KeyError):
        abi.name_of("RKNN_QUERY_", 99)


def test_query_structs():
    attr_queries = [v for k, v in EXPECTED_CONSTANTS.items()
                    if k.startswith("RKNN_QUERY_") and k.endswith("_ATTR")]
    assert len(attr_queries) == 10
    for cmd in attr_queries:
        assert abi.QUERY_STRUCTS[cmd] is abi.rknn_tensor_attr
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_IN_OUT_NUM] is abi.rknn_input_output_num
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_SDK_VERSION] is abi.rknn_sdk_version
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_MEM_SIZE] is abi.rknn_mem_size
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_PERF_RUN] is abi.rknn_perf_run
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_CUSTOM_STRING] is abi.rknn_custom_string
    for undocumented in (abi.RKNN_QUERY_PERF_DETAIL, abi.RKNN_QUERY_DEVICE_MEM_INFO,
                         abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE):
        assert undocumented not in abi.QUERY_STRUCTS


def test_type_sizes_and_numpy_dtypes():
    assert set(abi.TYPE_SIZES) == set(abi.TYPE_NAMES)
    assert abi.TYPE_SIZES[abi.RKNN_TENSOR_INT4] == 0.5
    assert abi.TYPE_SIZES[abi.RKNN_TENSOR_BFLOAT16] == 2
    assert set(abi.TYPE_TO_NUMPY) == set(abi.TYPE_NAMES) - {abi.RKNN_TENSOR_INT4,
                                                            abi.RKNN_TENSOR_BFLOAT16}
    for rknn_type, dtype in abi.TYPE_TO_NUMPY.items():
        assert dtype.itemsize == abi.TYPE_SIZES[rknn_type]
    assert abi.TYPE_TO_NUMPY[abi.RKNN_TENSOR_INT8] == np.int8
    assert abi.TYPE_TO_NUMPY[abi.RKNN_TENSOR_FLOAT16] == np.float16
    assert abi.TYPE_TO_NUMPY[abi.RKNN_TENSOR_BOOL] == np.bool_


def _attr() -> abi.rknn_tensor_attr:
    attr = abi.rknn_tensor_attr(index=0, n_dims=4, name=b"images", n_elems=1228800,
                                size=1228800, fmt=abi.RKNN_TENSOR_NHWC,
                                type=abi.RKNN_TENSOR_INT8,
                                qnt_type=abi.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC, zp=-128,
                                scale=0.003922, w_stride=640, size_with_stride=1228800)
    attr.dims[:4] = [1, 640, 640, 3]
    return attr


def test_describe_attr():
    assert abi.describe_attr(_attr()) == (
        "index=0, name=images, n_dims=4, dims=[1, 640, 640, 3], n_elems=1228800, "
        "size=1228800, w_stride=640, size_with_stride=1228800, fmt=NHWC, type=INT8, "
        "qnt_type=AFFINE_ASYMMETRIC, zp=-128, scale=0.003922")


def test_describe_attr_survives_garbage():
    attr = abi.rknn_tensor_attr(n_dims=99, fmt=42, type=-1, qnt_type=7)
    text = abi.describe_attr(attr)
    assert "fmt=UNKNOWN(42)" in text and "type=UNKNOWN(-1)" in text
    assert text.count(",") > 10  # all 16 dims, no IndexError


def test_repr_is_readable():
    text = repr(_attr())
    assert text.startswith("rknn_tensor_attr(index=0, n_dims=4, dims=[1, 640, 640, 3], "
                           "name='images', ")
    assert "fmt=RKNN_TENSOR_NHWC" in text and "type=RKNN_TENSOR_INT8" in text
    assert "qnt_type=RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC" in text
    assert "scale=0.003922" in text
    assert repr(abi.rknn_output(index=1, buf=0x1000, size=40)) == (
        "rknn_output(want_float=0, is_prealloc=0, index=1, buf=0x1000, size=40)")
    mem_text = repr(abi.rknn_tensor_mem(flags=abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD))
    assert "virt_addr=NULL" in mem_text and "flags=RKNN_TENSOR_MEMORY_FLAGS_FROM_FD" in mem_text
    assert "reserved" not in repr(abi.rknn_mem_size())
    assert repr(abi.rknn_sdk_version(api_version=b"2.3.2")).startswith(
        "rknn_sdk_version(api_version='2.3.2'")


# ---------------------------------------------------------------- errors

ERROR_CLASS_NAMES = {
    -1: "RknnFailError", -2: "RknnTimeoutError", -3: "RknnDeviceUnavailableError",
    -4: "RknnMallocError", -5: "RknnParamInvalidError", -6: "RknnModelInvalidError",
    -7: "RknnCtxInvalidError", -8: "RknnInputInvalidError", -9: "RknnOutputInvalidError",
    -10: "RknnDeviceUnmatchError", -11: "RknnIncompatiblePreCompileModelError",
    -12: "RknnIncompatibleOptimizationLevelVersionError", -13: "RknnTargetPlatformUnmatchError",
}


@pytest.mark.parametrize("code", sorted(ERROR_CLASS_NAMES))
def test_each_code_raises_its_own_class(code):
    with pytest.raises(errors.RknnError) as caught:
        errors.check(code, "rknn_run", "detail text")
    error = caught.value
    assert type(error).__name__ == ERROR_CLASS_NAMES[code]
    assert type(error).code_value == code == error.code
    assert error.name == abi.ERROR_NAMES[code] and error.function == "rknn_run"
    message = str(error)
    assert message.startswith(f"rknn_run returned {code} ({error.name}): detail text. Hint: ")
    assert len(error.hint) > 40
    assert type(errors.error_for(code, "f")) is type(error)


def test_hints_differ_per_code():
    hints = [getattr(errors, name).hint for name in ERROR_CLASS_NAMES.values()]
    assert len(set(hints)) == len(hints)


def test_check_passes_non_negative_returns():
    assert errors.check(0, "rknn_run") == 0
    assert errors.check(3, "rknn_run") == 3


def test_unknown_code_is_a_plain_rknn_error():
    error = errors.error_for(-99, "rknn_init")
    assert type(error) is errors.RknnError
    assert error.name == "unknown error code -99" and "rknn_init returned -99" in str(error)


def test_library_errors_are_not_rknn_errors():
    assert issubclass(errors.RuntimeLibraryNotFound, OSError)
    assert not issubclass(errors.RuntimeLibraryNotFound, errors.RknnError)
    error = errors.RuntimeLibraryNotFound([("/usr/lib/librknnrt.so", "no such file")])
    assert "/usr/lib/librknnrt.so: no such file" in str(error)
