"""rknnlab.rknn.abi against the facts sheet (shared/reference/rknn-facts.md, section 1).

Layouts are those of 64-bit Linux.  The offsets below were worked out by hand
from the sheet's field lists with the C alignment rules (each field at a
multiple of its own alignment, the struct padded to its largest alignment);
tests/test_native_double.py also compares them with what gcc lays out.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict

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
    # from the header's field lists (the facts sheet names them only)
    "rknn_perf_detail": (16, {"perf_data": (0, 8), "data_len": (8, 8)}),
    "rknn_input_range": (33040, {
        "index": (0, 4), "shape_number": (4, 4), "fmt": (8, 4), "name": (12, 256),
        "dyn_range": (268, 32768), "n_dims": (33036, 4)}),
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
    "RKNN_MAX_NUM_CHANNEL": 15, "RKNN_MAX_DYNAMIC_SHAPE_NUM": 512,
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
    "RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR": 8, "RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR": 9,
    "RKNN_QUERY_CMD_MAX": 18,
    # tensor types, formats, quantization
    "RKNN_TENSOR_FLOAT32": 0, "RKNN_TENSOR_FLOAT16": 1, "RKNN_TENSOR_INT8": 2,
    "RKNN_TENSOR_UINT8": 3, "RKNN_TENSOR_INT16": 4, "RKNN_TENSOR_UINT16": 5,
    "RKNN_TENSOR_INT32": 6, "RKNN_TENSOR_UINT32": 7, "RKNN_TENSOR_INT64": 8,
    "RKNN_TENSOR_BOOL": 9, "RKNN_TENSOR_INT4": 10, "RKNN_TENSOR_BFLOAT16": 11,
    "RKNN_TENSOR_NCHW": 0, "RKNN_TENSOR_NHWC": 1, "RKNN_TENSOR_NC1HWC2": 2,
    "RKNN_TENSOR_UNDEFINED": 3,
    "RKNN_TENSOR_QNT_NONE": 0, "RKNN_TENSOR_QNT_DFP": 1, "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC": 2,
    "RKNN_TENSOR_TYPE_MAX": 12, "RKNN_TENSOR_FORMAT_MAX": 4, "RKNN_TENSOR_QNT_MAX": 3,
    # core masks
    "RKNN_NPU_CORE_AUTO": 0, "RKNN_NPU_CORE_0": 1, "RKNN_NPU_CORE_1": 2, "RKNN_NPU_CORE_2": 4,
    "RKNN_NPU_CORE_0_1": 3, "RKNN_NPU_CORE_0_1_2": 7, "RKNN_NPU_CORE_ALL": 0xFFFF,
    "RKNN_NPU_CORE_UNDEFINED": 0x10000,
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
                               if k.startswith("RKNN_QUERY_") and "NC1HWC2" not in k
                               and not k.endswith("_MAX")}
    assert abi.QUERY_NAMES[8] == "RKNN_QUERY_NATIVE_INPUT_ATTR"   # not its NC1HWC2 alias


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
    attr_queries = {v for k, v in EXPECTED_CONSTANTS.items()
                    if k.startswith("RKNN_QUERY_") and k.endswith("_ATTR")}
    assert len(attr_queries) == 10
    for cmd in attr_queries:
        assert abi.QUERY_STRUCTS[cmd] is abi.rknn_tensor_attr
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_IN_OUT_NUM] is abi.rknn_input_output_num
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_SDK_VERSION] is abi.rknn_sdk_version
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_MEM_SIZE] is abi.rknn_mem_size
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_PERF_RUN] is abi.rknn_perf_run
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_CUSTOM_STRING] is abi.rknn_custom_string
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_PERF_DETAIL] is abi.rknn_perf_detail
    assert abi.QUERY_STRUCTS[abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE] is abi.rknn_input_range
    assert abi.RKNN_QUERY_DEVICE_MEM_INFO not in abi.QUERY_STRUCTS   # no struct in the header


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


# ---------------------------------------------------------------- completeness

ROOT = Path(__file__).resolve().parents[1]
ROCKCHIP_CONSTANTS = ROOT / "tests" / "c_api" / "rockchip_header_constants.txt"
OUR_HEADER = ROOT / "lib" / "rknnlab" / "c" / "rknn_api.h"
FACTS_DIR = ROOT / ".." / "shared" / "reference"


def _abi_constants() -> Dict[str, int]:
    return {name: value for name, value in vars(abi).items()
            if name.startswith("RKNN_") and isinstance(value, int)}


def _rockchip_constants() -> Dict[str, int]:
    """NAME -> value as read from Rockchip's rknn_api.h (the recorded facts)."""
    found = {}
    for line in ROCKCHIP_CONSTANTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split()
            found[name] = int(value, 0)
    return found


def test_abi_carries_exactly_the_constants_of_rockchips_header():
    header, ours = _rockchip_constants(), _abi_constants()
    assert len(header) == 99   # the recorded list is whole (SDK 2.3.2)
    assert sorted(set(header) - set(ours)) == [], "in Rockchip's header, missing from abi"
    assert sorted(set(ours) - set(header)) == [], "in abi, not in Rockchip's header"
    assert {n: ours[n] for n in header if ours[n] != header[n]} == {}


# Each list of the facts sheet (section 1): its label, and the prefix its short
# names take in C.  A short name resolves to the one name of Rockchip's header
# that is prefix + name, or else starts with the prefix and ends in "_" + name.
_FACT_LISTS = [
    ("Query commands (value):", "RKNN_QUERY_"), ("Tensor types:", "RKNN_TENSOR_"),
    ("Formats:", "RKNN_TENSOR_"), ("Quantization:", "RKNN_TENSOR_QNT_"),
    ("Core mask:", "RKNN_NPU_CORE_"), ("Error codes:", "RKNN_ERR_"),
    ("Init flags (value):", "RKNN_"), ("Memory alloc flags for create_mem2:", "RKNN_FLAG_MEMORY_"),
    ("Sync modes:", "RKNN_MEMORY_SYNC_"),
]
_PAIR = re.compile(r"\b([A-Z][A-Z0-9_]*[A-Z0-9])\s+(-?0x[0-9a-fA-F]+|-?\d+)\b")
# a full name with its value: `RKNN_X` (6), RKNN_X = 16
_FULL = re.compile(r"\b(RKNN_[A-Z0-9_]+)`?\s*(?:\((-?0x[0-9a-fA-F]+|-?\d+)\)|=\s+(-?0x[0-9a-fA-F]+|-?\d+))")


def _resolve(prefix: str, short: str, header: Dict[str, int]) -> str:
    if prefix + short in header:
        return prefix + short
    matches = [name for name in header if name.startswith(prefix) and name.endswith("_" + short)]
    assert len(matches) == 1, f"the facts sheet's {short!r} ({prefix}...) names {matches or 'nothing'} " \
                              "in Rockchip's header"
    return matches[0]


def facts_sheet_constants(facts_dir: Path, header: Dict[str, int]) -> Dict[str, int]:
    """Every RKNN constant with a value in the facts sheets: the lists of
    rknn-facts.md section 1 and any full name given with its value."""
    sheet = (facts_dir / "rknn-facts.md").read_text(encoding="utf-8")
    section_1 = sheet[sheet.index("## 1."):sheet.index("## 2.")]
    text = " ".join(section_1.split())
    labels = [label for label, _ in _FACT_LISTS]
    found: Dict[str, int] = {}
    for label, prefix in _FACT_LISTS:
        start = text.index(label) + len(label)
        ends = [text.find(other, start) for other in labels + ["###"]]
        segment = text[start:min([end for end in ends if end >= 0] + [len(text)])]
        pairs = _PAIR.findall(segment)
        assert pairs, f"no name/value pairs after {label!r} in the facts sheet"
        for short, value in pairs:
            found[_resolve(prefix, short, header)] = int(value, 0)
    for path in sorted(facts_dir.glob("rknn-facts*.md")):
        for name, paren, equals in _FULL.findall(path.read_text(encoding="utf-8")):
            found[name] = int(paren or equals, 0)
    return found


@pytest.fixture
def facts_dir() -> Path:
    if not (FACTS_DIR / "rknn-facts.md").exists():
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"the facts sheet is missing: {FACTS_DIR.resolve()}/rknn-facts.md")
        pytest.skip(f"the facts sheets are not at {FACTS_DIR.resolve()} (shared/reference next to "
                    "the repository): the names cannot be compared with them")
    return FACTS_DIR


def test_abi_agrees_with_the_facts_sheets(facts_dir: Path):
    facts = facts_sheet_constants(facts_dir, _rockchip_constants())
    assert len(facts) >= 85   # every list of section 1 was read
    ours = _abi_constants()
    assert sorted(set(facts) - set(ours)) == [], "in the facts sheets, missing from abi"
    assert {name: (value, ours[name]) for name, value in facts.items() if ours[name] != value} == {}


def test_the_facts_parser_reads_names_and_values(tmp_path: Path):
    (tmp_path / "rknn-facts.md").write_text(
        "## 1. API\n" + "".join(f"{label} A{i}A 1, B{i}B 0x2.\n"
                                   for i, (label, _) in enumerate(_FACT_LISTS[:-1]))
        + "Sync modes: TO_DEVICE 1, FROM_DEVICE\n2, BIDIRECTIONAL 3.\n"
        "Arrays: RKNN_MAX_DIMS = 16. `RKNN_QUERY_MEM_SIZE` (6), RKNN_LOG_LEVEL=4\n## 2. more\n")
    header = {"RKNN_MEMORY_SYNC_TO_DEVICE": 1, "RKNN_MEMORY_SYNC_FROM_DEVICE": 2,
              "RKNN_MEMORY_SYNC_BIDIRECTIONAL": 3, "RKNN_MAX_DIMS": 16, "RKNN_QUERY_MEM_SIZE": 6}
    for i, (_, prefix) in enumerate(_FACT_LISTS[:-1]):
        header.update({f"{prefix}X_A{i}A": 0, f"{prefix}B{i}B": 0})
    found = facts_sheet_constants(tmp_path, header)
    assert found["RKNN_MEMORY_SYNC_FROM_DEVICE"] == 2 and found["RKNN_MAX_DIMS"] == 16
    assert found["RKNN_QUERY_MEM_SIZE"] == 6 and "RKNN_LOG_LEVEL" not in found
    assert found["RKNN_ERR_X_A5A"] == 1 and found["RKNN_ERR_B5B"] == 2
    with pytest.raises(AssertionError, match="names nothing"):
        facts_sheet_constants(tmp_path, {k: v for k, v in header.items() if k != "RKNN_ERR_B5B"})


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("gcc not found, and CI is set")
        pytest.skip("gcc not found")
    return gcc


def _compiles(source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "check.c"
    path.write_text('#include <stddef.h>\n#include "rknn_api.h"\n' + source)
    return subprocess.run([_gcc(), "-fsyntax-only", "-std=c11", "-I", str(OUR_HEADER.parent),
                           str(path)], capture_output=True, text=True)


def test_our_header_has_every_constant_of_abi_with_its_value(tmp_path: Path):
    code = re.sub(r"/\*.*?\*/", "", OUR_HEADER.read_text(), flags=re.S)
    declared = set(re.findall(r"\bRKNN_[A-Z0-9_]+\b", code))
    ours = _abi_constants()
    assert sorted(set(ours) - declared) == [] and sorted(declared - set(ours)) == []
    run = _compiles("".join(f'_Static_assert({name} == {value}, "{name}");\n'
                            for name, value in ours.items()), tmp_path)
    assert run.returncode == 0, run.stderr
    assert _compiles('_Static_assert(RKNN_NPU_CORE_ALL == 0xfffe, "x");\n', tmp_path).returncode != 0


@only_64bit
def test_our_header_lays_out_every_struct_as_abi(tmp_path: Path):
    checks = []
    for name, cls in abi.C_STRUCTS.items():
        checks.append(f'_Static_assert(sizeof({name}) == {ctypes.sizeof(cls)}, "sizeof {name}");')
        for field, *_ in cls._fields_:
            offset = getattr(cls, field).offset
            checks.append(f'_Static_assert(offsetof({name}, {field}) == {offset}, "{name}.{field}");')
    run = _compiles("\n".join(checks) + "\n", tmp_path)
    assert run.returncode == 0, run.stderr
    assert _compiles('_Static_assert(sizeof(rknn_input_range) == 33036, "x");\n',
                     tmp_path).returncode != 0
