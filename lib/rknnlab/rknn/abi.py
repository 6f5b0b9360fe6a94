"""The binary interface of librknnrt.so as ctypes: structs and constants.

Every struct, enum value, flag and error code keeps its C name, so notebook
code and the C it teaches use the same words.  Struct layouts reproduce the
runtime's header on the platform Python runs on (the sizes quoted in the
docstrings are those of 64-bit Linux, which the tests pin down).

Written for this project from the facts in shared/reference/rknn-facts.md
and the names and values of Rockchip's rknn_api.h (SDK 2.3.2), which it
carries all of (tests/test_abi.py checks both ways); no text of the header is
copied.
"""
from __future__ import annotations

import ctypes
from typing import Dict, List, Type

import numpy as np

# ---------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------

#: rknn_context: a 64-bit handle on 64-bit platforms, 32-bit on 32-bit ARM.
rknn_context = ctypes.c_uint64 if ctypes.sizeof(ctypes.c_void_p) == 8 else ctypes.c_uint32

# C enums are passed and stored as int.
_enum = ctypes.c_int

RKNN_MAX_DIMS = 16
RKNN_MAX_NUM_CHANNEL = 15  # the most channels an input tensor may have
RKNN_MAX_NAME_LEN = 256
RKNN_MAX_DYNAMIC_SHAPE_NUM = 512  # the most shapes a dynamic-shape input may list

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

RKNN_SUCC = 0
RKNN_ERR_FAIL = -1
RKNN_ERR_TIMEOUT = -2
RKNN_ERR_DEVICE_UNAVAILABLE = -3
RKNN_ERR_MALLOC_FAIL = -4
RKNN_ERR_PARAM_INVALID = -5
RKNN_ERR_MODEL_INVALID = -6
RKNN_ERR_CTX_INVALID = -7
RKNN_ERR_INPUT_INVALID = -8
RKNN_ERR_OUTPUT_INVALID = -9
RKNN_ERR_DEVICE_UNMATCH = -10
RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL = -11  # (sic) the C spelling
RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION = -12  # (sic)
RKNN_ERR_TARGET_PLATFORM_UNMATCH = -13

# rknn_init flags (bit mask, except the three priorities, which are values of the low bits)
RKNN_FLAG_PRIOR_HIGH = 0x0
RKNN_FLAG_PRIOR_MEDIUM = 0x1
RKNN_FLAG_PRIOR_LOW = 0x2
RKNN_FLAG_ASYNC_MASK = 0x4
RKNN_FLAG_COLLECT_PERF_MASK = 0x8
RKNN_FLAG_MEM_ALLOC_OUTSIDE = 0x10
RKNN_FLAG_SHARE_WEIGHT_MEM = 0x20
RKNN_FLAG_FENCE_IN_OUTSIDE = 0x40
RKNN_FLAG_FENCE_OUT_OUTSIDE = 0x80
RKNN_FLAG_COLLECT_MODEL_INFO_ONLY = 0x100
RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE = 0x200
RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU = 0x400
RKNN_FLAG_ENABLE_SRAM = 0x800
RKNN_FLAG_SHARE_SRAM = 0x1000
RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY = 0x2000
RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE = 0x4000
RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE = 0x8000
RKNN_FLAG_MODEL_BUFFER_ZERO_COPY = 0x10000
#: an alloc flag of rknn_create_mem2 (lets ctx be 0), numbered among the init flags
RKNN_MEM_FLAG_ALLOC_NO_CONTEXT = 0x20000

# rknn_create_mem2 alloc_flags
RKNN_FLAG_MEMORY_FLAGS_DEFAULT = 0  # same as CACHEABLE
RKNN_FLAG_MEMORY_CACHEABLE = 1
RKNN_FLAG_MEMORY_NON_CACHEABLE = 2
RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM = 4

# rknn_mem_sync modes
RKNN_MEMORY_SYNC_TO_DEVICE = 1
RKNN_MEMORY_SYNC_FROM_DEVICE = 2
RKNN_MEMORY_SYNC_BIDIRECTIONAL = 3

# rknn_tensor_mem.flags: who made the mem (and so what rknn_destroy_mem frees)
RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE = 1
RKNN_TENSOR_MEMORY_FLAGS_FROM_FD = 2
RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS = 3
RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN = 4

# rknn_query commands
RKNN_QUERY_IN_OUT_NUM = 0
RKNN_QUERY_INPUT_ATTR = 1
RKNN_QUERY_OUTPUT_ATTR = 2
RKNN_QUERY_PERF_DETAIL = 3
RKNN_QUERY_PERF_RUN = 4
RKNN_QUERY_SDK_VERSION = 5
RKNN_QUERY_MEM_SIZE = 6
RKNN_QUERY_CUSTOM_STRING = 7
RKNN_QUERY_NATIVE_INPUT_ATTR = 8
RKNN_QUERY_NATIVE_OUTPUT_ATTR = 9
#: other names of NATIVE_INPUT_ATTR / NATIVE_OUTPUT_ATTR (same values)
RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR = 8
RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR = 9
RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR = 10
RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR = 11
RKNN_QUERY_DEVICE_MEM_INFO = 12
RKNN_QUERY_INPUT_DYNAMIC_RANGE = 13
RKNN_QUERY_CURRENT_INPUT_ATTR = 14
RKNN_QUERY_CURRENT_OUTPUT_ATTR = 15
RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR = 16
RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR = 17
RKNN_QUERY_CMD_MAX = 18  # one past the last command, not a command

# tensor element types
RKNN_TENSOR_FLOAT32 = 0
RKNN_TENSOR_FLOAT16 = 1
RKNN_TENSOR_INT8 = 2
RKNN_TENSOR_UINT8 = 3
RKNN_TENSOR_INT16 = 4
RKNN_TENSOR_UINT16 = 5
RKNN_TENSOR_INT32 = 6
RKNN_TENSOR_UINT32 = 7
RKNN_TENSOR_INT64 = 8
RKNN_TENSOR_BOOL = 9
RKNN_TENSOR_INT4 = 10
RKNN_TENSOR_BFLOAT16 = 11
RKNN_TENSOR_TYPE_MAX = 12  # one past the last type

# tensor layouts
RKNN_TENSOR_NCHW = 0
RKNN_TENSOR_NHWC = 1
RKNN_TENSOR_NC1HWC2 = 2
RKNN_TENSOR_UNDEFINED = 3
RKNN_TENSOR_FORMAT_MAX = 4  # one past the last format

# quantization schemes
RKNN_TENSOR_QNT_NONE = 0
RKNN_TENSOR_QNT_DFP = 1
RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC = 2
RKNN_TENSOR_QNT_MAX = 3  # one past the last scheme

# rknn_set_core_mask values (RK3588 has cores 0..2)
RKNN_NPU_CORE_AUTO = 0
RKNN_NPU_CORE_0 = 1
RKNN_NPU_CORE_1 = 2
RKNN_NPU_CORE_2 = 4
RKNN_NPU_CORE_0_1 = 3
RKNN_NPU_CORE_0_1_2 = 7
RKNN_NPU_CORE_ALL = 0xFFFF
RKNN_NPU_CORE_UNDEFINED = 0x10000  # one past ALL, not a mask to pass


def _name_table(names: str) -> Dict[int, str]:
    """value -> C name for the constants named (whitespace separated)."""
    return {globals()[name]: name for name in names.split()}


TYPE_NAMES = _name_table("""
    RKNN_TENSOR_FLOAT32 RKNN_TENSOR_FLOAT16 RKNN_TENSOR_INT8 RKNN_TENSOR_UINT8
    RKNN_TENSOR_INT16 RKNN_TENSOR_UINT16 RKNN_TENSOR_INT32 RKNN_TENSOR_UINT32
    RKNN_TENSOR_INT64 RKNN_TENSOR_BOOL RKNN_TENSOR_INT4 RKNN_TENSOR_BFLOAT16""")
FMT_NAMES = _name_table("RKNN_TENSOR_NCHW RKNN_TENSOR_NHWC RKNN_TENSOR_NC1HWC2 RKNN_TENSOR_UNDEFINED")
QNT_NAMES = _name_table("RKNN_TENSOR_QNT_NONE RKNN_TENSOR_QNT_DFP RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC")
QUERY_NAMES = _name_table("""
    RKNN_QUERY_IN_OUT_NUM RKNN_QUERY_INPUT_ATTR RKNN_QUERY_OUTPUT_ATTR RKNN_QUERY_PERF_DETAIL
    RKNN_QUERY_PERF_RUN RKNN_QUERY_SDK_VERSION RKNN_QUERY_MEM_SIZE RKNN_QUERY_CUSTOM_STRING
    RKNN_QUERY_NATIVE_INPUT_ATTR RKNN_QUERY_NATIVE_OUTPUT_ATTR RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR
    RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR RKNN_QUERY_DEVICE_MEM_INFO RKNN_QUERY_INPUT_DYNAMIC_RANGE
    RKNN_QUERY_CURRENT_INPUT_ATTR RKNN_QUERY_CURRENT_OUTPUT_ATTR
    RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR""")
ERROR_NAMES = _name_table("""
    RKNN_SUCC RKNN_ERR_FAIL RKNN_ERR_TIMEOUT RKNN_ERR_DEVICE_UNAVAILABLE RKNN_ERR_MALLOC_FAIL
    RKNN_ERR_PARAM_INVALID RKNN_ERR_MODEL_INVALID RKNN_ERR_CTX_INVALID RKNN_ERR_INPUT_INVALID
    RKNN_ERR_OUTPUT_INVALID RKNN_ERR_DEVICE_UNMATCH RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL
    RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION RKNN_ERR_TARGET_PLATFORM_UNMATCH""")
CORE_MASK_NAMES = _name_table("""
    RKNN_NPU_CORE_AUTO RKNN_NPU_CORE_0 RKNN_NPU_CORE_1 RKNN_NPU_CORE_2
    RKNN_NPU_CORE_0_1 RKNN_NPU_CORE_0_1_2 RKNN_NPU_CORE_ALL""")
INIT_FLAG_NAMES = _name_table("""
    RKNN_FLAG_PRIOR_HIGH RKNN_FLAG_PRIOR_MEDIUM RKNN_FLAG_PRIOR_LOW RKNN_FLAG_ASYNC_MASK
    RKNN_FLAG_COLLECT_PERF_MASK RKNN_FLAG_MEM_ALLOC_OUTSIDE RKNN_FLAG_SHARE_WEIGHT_MEM
    RKNN_FLAG_FENCE_IN_OUTSIDE RKNN_FLAG_FENCE_OUT_OUTSIDE RKNN_FLAG_COLLECT_MODEL_INFO_ONLY
    RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU
    RKNN_FLAG_ENABLE_SRAM RKNN_FLAG_SHARE_SRAM RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY
    RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE
    RKNN_FLAG_MODEL_BUFFER_ZERO_COPY RKNN_MEM_FLAG_ALLOC_NO_CONTEXT""")
MEM_ALLOC_FLAG_NAMES = _name_table("""
    RKNN_FLAG_MEMORY_FLAGS_DEFAULT RKNN_FLAG_MEMORY_CACHEABLE RKNN_FLAG_MEMORY_NON_CACHEABLE
    RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM""")
MEM_SYNC_NAMES = _name_table(
    "RKNN_MEMORY_SYNC_TO_DEVICE RKNN_MEMORY_SYNC_FROM_DEVICE RKNN_MEMORY_SYNC_BIDIRECTIONAL")
TENSOR_MEM_FLAG_NAMES = _name_table("""
    RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE RKNN_TENSOR_MEMORY_FLAGS_FROM_FD
    RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN""")

# The tables leave out the *_MAX sentinels, RKNN_NPU_CORE_UNDEFINED and the
# NC1HWC2 aliases of the NATIVE queries: each value names one real constant.

# Searched in this order by name_of: a prefix shared by two groups
# ("RKNN_TENSOR_" covers types, formats and quantizations; "RKNN_FLAG_" init
# and memory flags) resolves to the earlier group.
_NAME_GROUPS: List[Dict[int, str]] = [
    TYPE_NAMES, FMT_NAMES, QNT_NAMES, QUERY_NAMES, ERROR_NAMES, CORE_MASK_NAMES,
    INIT_FLAG_NAMES, MEM_ALLOC_FLAG_NAMES, MEM_SYNC_NAMES, TENSOR_MEM_FLAG_NAMES,
]


def name_of(prefix: str, value: int) -> str:
    """The C name of ``value`` among the constants whose names start with ``prefix``.

    ``name_of("RKNN_TENSOR_", 2)`` is ``"RKNN_TENSOR_INT8"``: when a prefix
    spans several groups, the tensor types come before formats and
    quantizations, and init flags before memory flags.  Narrow the prefix
    (``"RKNN_TENSOR_QNT_"``) or use the tables (FMT_NAMES, ...) for the others.
    Raises KeyError when no constant matches.
    """
    for group in _NAME_GROUPS:
        name = group.get(value)
        if name is not None and name.startswith(prefix):
            return name
    raise KeyError(f"no RKNN constant starting with {prefix!r} has the value {value}")


def _short_name(table: Dict[int, str], prefix: str, value: int) -> str:
    name = table.get(value)
    return name[len(prefix):] if name else f"UNKNOWN({value})"


#: Bytes per element of each tensor type.  INT4 packs two elements per byte,
#: hence 0.5: multiply by the element count, then round up.
TYPE_SIZES: Dict[int, float] = {
    RKNN_TENSOR_FLOAT32: 4, RKNN_TENSOR_FLOAT16: 2, RKNN_TENSOR_INT8: 1, RKNN_TENSOR_UINT8: 1,
    RKNN_TENSOR_INT16: 2, RKNN_TENSOR_UINT16: 2, RKNN_TENSOR_INT32: 4, RKNN_TENSOR_UINT32: 4,
    RKNN_TENSOR_INT64: 8, RKNN_TENSOR_BOOL: 1, RKNN_TENSOR_INT4: 0.5, RKNN_TENSOR_BFLOAT16: 2,
}

#: numpy dtype of each tensor type that numpy can hold as is.  INT4 (packed
#: nibbles) and BFLOAT16 have no numpy dtype and are absent: view such
#: buffers as uint8 / uint16 and unpack them yourself.
TYPE_TO_NUMPY: Dict[int, np.dtype] = {
    RKNN_TENSOR_FLOAT32: np.dtype(np.float32), RKNN_TENSOR_FLOAT16: np.dtype(np.float16),
    RKNN_TENSOR_INT8: np.dtype(np.int8), RKNN_TENSOR_UINT8: np.dtype(np.uint8),
    RKNN_TENSOR_INT16: np.dtype(np.int16), RKNN_TENSOR_UINT16: np.dtype(np.uint16),
    RKNN_TENSOR_INT32: np.dtype(np.int32), RKNN_TENSOR_UINT32: np.dtype(np.uint32),
    RKNN_TENSOR_INT64: np.dtype(np.int64), RKNN_TENSOR_BOOL: np.dtype(np.bool_),
}

# ---------------------------------------------------------------------------
# Structs
# ---------------------------------------------------------------------------

class _CStruct(ctypes.Structure):
    """Base of the RKNN structs: adds a readable repr, nothing else.

    ``reserved`` fields are left out, char arrays show as str, enum fields
    show the C constant's name, ``dims`` is cut to ``n_dims``, pointers show
    in hex.
    """

    #: field name -> value-to-C-name table, for enum-valued fields
    _value_names: Dict[str, Dict[int, str]] = {}

    def _shown(self, name: str, ctype: type) -> str:
        value = getattr(self, name)
        if name in self._value_names:
            return self._value_names[name].get(value, str(value))
        if ctype is ctypes.c_void_p:
            return "NULL" if value is None else hex(value)
        if isinstance(value, bytes):  # c_char arrays read back as bytes up to the NUL
            return repr(value.decode("utf-8", "replace"))
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, ctypes.Array):
            items = list(value)
            if name == "dims":
                items = items[:min(self.n_dims, RKNN_MAX_DIMS)]
            return str(items)
        return str(value)

    def __repr__(self) -> str:
        shown = (f"{name}={self._shown(name, ctype)}"
                 for name, ctype in self._fields_ if name != "reserved")
        return f"{type(self).__name__}({', '.join(shown)})"


class rknn_input_output_num(_CStruct):
    """Answer of RKNN_QUERY_IN_OUT_NUM (8 B)."""
    _fields_ = [("n_input", ctypes.c_uint32), ("n_output", ctypes.c_uint32)]


class rknn_tensor_attr(_CStruct):
    """One tensor's description (376 B); also the argument of set_io_mem and
    set_input_shapes.  ``size`` is the dense byte size, ``size_with_stride``
    the size with the NPU's row padding (w_stride / h_stride)."""
    _fields_ = [
        ("index", ctypes.c_uint32),
        ("n_dims", ctypes.c_uint32),
        ("dims", ctypes.c_uint32 * RKNN_MAX_DIMS),
        ("name", ctypes.c_char * RKNN_MAX_NAME_LEN),
        ("n_elems", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("fmt", _enum),
        ("type", _enum),
        ("qnt_type", _enum),
        ("fl", ctypes.c_int8),
        ("zp", ctypes.c_int32),
        ("scale", ctypes.c_float),
        ("w_stride", ctypes.c_uint32),
        ("size_with_stride", ctypes.c_uint32),
        ("pass_through", ctypes.c_uint8),
        ("h_stride", ctypes.c_uint32),
    ]
    _value_names = {"fmt": FMT_NAMES, "type": TYPE_NAMES, "qnt_type": QNT_NAMES}


class rknn_mem_size(_CStruct):
    """Answer of RKNN_QUERY_MEM_SIZE (64 B): what the model needs and what the
    runtime has allocated through DMA so far."""
    _fields_ = [
        ("total_weight_size", ctypes.c_uint32),
        ("total_internal_size", ctypes.c_uint32),
        ("total_dma_allocated_size", ctypes.c_uint64),
        ("total_sram_size", ctypes.c_uint32),
        ("free_sram_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32 * 10),
    ]


class rknn_tensor_mem(_CStruct):
    """A buffer the NPU can reach (40 B); the create_mem family returns a
    pointer to one, which rknn_destroy_mem frees."""
    _fields_ = [
        ("virt_addr", ctypes.c_void_p),
        ("phys_addr", ctypes.c_uint64),
        ("fd", ctypes.c_int32),
        ("offset", ctypes.c_int32),
        ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("priv_data", ctypes.c_void_p),
    ]
    _value_names = {"flags": TENSOR_MEM_FLAG_NAMES}


class rknn_input(_CStruct):
    """One element of rknn_inputs_set's array (32 B): ``buf``/``size`` are the
    caller's bytes, ``type``/``fmt`` describe them (the runtime converts to
    the model's unless ``pass_through``)."""
    _fields_ = [
        ("index", ctypes.c_uint32),
        ("buf", ctypes.c_void_p),
        ("size", ctypes.c_uint32),
        ("pass_through", ctypes.c_uint8),
        ("type", _enum),
        ("fmt", _enum),
    ]
    _value_names = {"type": TYPE_NAMES, "fmt": FMT_NAMES}


class rknn_output(_CStruct):
    """One element of rknn_outputs_get's array (24 B).  ``is_prealloc = 0``:
    the runtime fills ``buf``/``size`` and rknn_outputs_release frees them;
    ``is_prealloc = 1``: the caller's ``buf``/``size`` are written into."""
    _fields_ = [
        ("want_float", ctypes.c_uint8),
        ("is_prealloc", ctypes.c_uint8),
        ("index", ctypes.c_uint32),
        ("buf", ctypes.c_void_p),
        ("size", ctypes.c_uint32),
    ]


class rknn_init_extend(_CStruct):
    """Optional last argument of rknn_init (136 B on 64-bit): ``ctx`` names the
    context whose weights a SHARE_WEIGHT_MEM init shares."""
    _fields_ = [
        ("ctx", rknn_context),
        ("real_model_offset", ctypes.c_int32),
        ("real_model_size", ctypes.c_uint32),
        ("model_buffer_fd", ctypes.c_int32),
        ("model_buffer_flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint8 * 112),
    ]


class rknn_run_extend(_CStruct):
    """Optional argument of rknn_run / rknn_wait (24 B)."""
    _fields_ = [
        ("frame_id", ctypes.c_uint64),
        ("non_block", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int32),
        ("fence_fd", ctypes.c_int32),
    ]


class rknn_output_extend(_CStruct):
    """Optional argument of rknn_outputs_get (8 B)."""
    _fields_ = [("frame_id", ctypes.c_uint64)]


class rknn_sdk_version(_CStruct):
    """Answer of RKNN_QUERY_SDK_VERSION (512 B): runtime and driver versions."""
    _fields_ = [
        ("api_version", ctypes.c_char * 256),
        ("drv_version", ctypes.c_char * 256),
    ]


class rknn_perf_detail(_CStruct):
    """Answer of RKNN_QUERY_PERF_DETAIL (16 B): a text the runtime owns
    (``perf_data``, ``data_len`` bytes); the context needs
    RKNN_FLAG_COLLECT_PERF_MASK.  Reading the ``perf_data`` field copies the
    text up to its first NUL; :meth:`data` reads exactly ``data_len`` bytes
    where the runtime keeps them, :meth:`text` gives them as a str."""
    _fields_ = [("perf_data", ctypes.c_char_p), ("data_len", ctypes.c_uint64)]

    def address(self) -> int:
        """Where the runtime keeps the text (0 for NULL)."""
        return ctypes.c_void_p.from_buffer(self, type(self).perf_data.offset).value or 0

    def data(self) -> bytes:
        """The ``data_len`` bytes at ``perf_data`` (b"" when it is NULL); read
        them before the next PERF_DETAIL query or rknn_destroy of the context."""
        address = self.address()
        return ctypes.string_at(address, self.data_len) if address else b""

    def text(self) -> str:
        """:meth:`data` as text, without a trailing NUL (whether or not a
        runtime counts one in ``data_len``)."""
        return self.data().rstrip(b"\0").decode("utf-8", "replace")

    def _shown(self, name: str, ctype: type) -> str:
        if name == "perf_data":  # a text of many KB: say where and how long
            address = self.address()
            return f"<{self.data_len} bytes at {hex(address)}>" if address else "NULL"
        return super()._shown(name, ctype)


class rknn_input_range(_CStruct):
    """Answer of RKNN_QUERY_INPUT_DYNAMIC_RANGE (33,040 B): the
    ``shape_number`` shapes a dynamic-shape input accepts, each ``n_dims``
    long, in ``dyn_range``."""
    _fields_ = [
        ("index", ctypes.c_uint32),
        ("shape_number", ctypes.c_uint32),
        ("fmt", _enum),
        ("name", ctypes.c_char * RKNN_MAX_NAME_LEN),
        ("dyn_range", (ctypes.c_uint32 * RKNN_MAX_DIMS) * RKNN_MAX_DYNAMIC_SHAPE_NUM),
        ("n_dims", ctypes.c_uint32),
    ]
    _value_names = {"fmt": FMT_NAMES}

    def shapes(self) -> List[List[int]]:
        """The shapes, as lists of ``n_dims`` ints."""
        n_dims = min(self.n_dims, RKNN_MAX_DIMS)
        count = min(self.shape_number, RKNN_MAX_DYNAMIC_SHAPE_NUM)
        return [list(self.dyn_range[k][:n_dims]) for k in range(count)]

    def _shown(self, name: str, ctype: type) -> str:
        if name == "dyn_range":   # 512 x 16 ints: show only the shapes in use
            return str(self.shapes())
        return super()._shown(name, ctype)


class rknn_perf_run(_CStruct):
    """Answer of RKNN_QUERY_PERF_RUN (8 B): the last run's duration in microseconds."""
    _fields_ = [("run_duration", ctypes.c_int64)]


class rknn_custom_string(_CStruct):
    """Answer of RKNN_QUERY_CUSTOM_STRING (1024 B): text stored in the model at export."""
    _fields_ = [("string", ctypes.c_char * 1024)]


#: C struct name -> its ctypes class.
C_STRUCTS: Dict[str, Type[ctypes.Structure]] = {
    cls.__name__: cls for cls in (
        rknn_input_output_num, rknn_tensor_attr, rknn_mem_size, rknn_tensor_mem, rknn_input,
        rknn_output, rknn_init_extend, rknn_run_extend, rknn_output_extend, rknn_sdk_version,
        rknn_perf_detail, rknn_perf_run, rknn_custom_string, rknn_input_range,
    )
}

#: rknn_query command -> the struct it fills.  Absent: DEVICE_MEM_INFO, whose
#: answer struct the header does not declare; pass your own struct for it.
QUERY_STRUCTS: Dict[int, Type[ctypes.Structure]] = {
    RKNN_QUERY_IN_OUT_NUM: rknn_input_output_num,
    RKNN_QUERY_INPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_OUTPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_PERF_DETAIL: rknn_perf_detail,
    RKNN_QUERY_PERF_RUN: rknn_perf_run,
    RKNN_QUERY_SDK_VERSION: rknn_sdk_version,
    RKNN_QUERY_MEM_SIZE: rknn_mem_size,
    RKNN_QUERY_CUSTOM_STRING: rknn_custom_string,
    RKNN_QUERY_NATIVE_INPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_NATIVE_OUTPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_INPUT_DYNAMIC_RANGE: rknn_input_range,
    RKNN_QUERY_CURRENT_INPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_CURRENT_OUTPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR: rknn_tensor_attr,
    RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR: rknn_tensor_attr,
}


def describe_attr(attr: rknn_tensor_attr) -> str:
    """One line per tensor, in the order the RKNN demo programs print them."""
    n_dims = min(attr.n_dims, RKNN_MAX_DIMS)
    dims = ", ".join(str(d) for d in attr.dims[:n_dims])
    return (
        f"index={attr.index}, name={attr.name.decode('utf-8', 'replace')}, n_dims={attr.n_dims}, "
        f"dims=[{dims}], n_elems={attr.n_elems}, size={attr.size}, w_stride={attr.w_stride}, "
        f"size_with_stride={attr.size_with_stride}, "
        f"fmt={_short_name(FMT_NAMES, 'RKNN_TENSOR_', attr.fmt)}, "
        f"type={_short_name(TYPE_NAMES, 'RKNN_TENSOR_', attr.type)}, "
        f"qnt_type={_short_name(QNT_NAMES, 'RKNN_TENSOR_QNT_', attr.qnt_type)}, "
        f"zp={attr.zp}, scale={attr.scale:f}"
    )
