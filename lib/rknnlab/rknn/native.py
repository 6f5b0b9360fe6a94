"""The ``native`` backend: the Runtime interface as ctypes calls into librknnrt.so.

Nothing is interpreted on the way: each method hands its arguments to the C
function of the same name and turns a negative return into an exception.
What crosses the boundary is exactly what a C program would pass, which the
tests verify against a C double of the runtime (lib/rknnlab/c/).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

import numpy as np

from . import abi, errors
from .runtime import MemPtr, ModelSource, Runtime

#: Where the runtime is looked for when neither a path nor $LIBRKNNRT_PATH is
#: given, before the dynamic linker's own search (same list as rknnlab.board).
DEFAULT_LIBRARY_PATHS = (
    "/usr/lib/librknnrt.so",
    "/usr/lib64/librknnrt.so",
    "/usr/local/lib/librknnrt.so",
    "/usr/lib/aarch64-linux-gnu/librknnrt.so",
)

LibraryPath = Union[str, "os.PathLike[str]"]

_ctx = abi.rknn_context
_mem_p = ctypes.POINTER(abi.rknn_tensor_mem)
_u32 = ctypes.c_uint32

#: C function -> (restype, argtypes), as the runtime declares them.
SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    "rknn_init": (ctypes.c_int, [ctypes.POINTER(_ctx), ctypes.c_void_p, _u32, _u32,
                                 ctypes.POINTER(abi.rknn_init_extend)]),
    "rknn_dup_context": (ctypes.c_int, [ctypes.POINTER(_ctx), ctypes.POINTER(_ctx)]),
    "rknn_destroy": (ctypes.c_int, [_ctx]),
    "rknn_query": (ctypes.c_int, [_ctx, ctypes.c_int, ctypes.c_void_p, _u32]),
    "rknn_inputs_set": (ctypes.c_int, [_ctx, _u32, ctypes.POINTER(abi.rknn_input)]),
    "rknn_set_batch_core_num": (ctypes.c_int, [_ctx, ctypes.c_int]),
    "rknn_set_core_mask": (ctypes.c_int, [_ctx, ctypes.c_int]),
    "rknn_run": (ctypes.c_int, [_ctx, ctypes.POINTER(abi.rknn_run_extend)]),
    "rknn_wait": (ctypes.c_int, [_ctx, ctypes.POINTER(abi.rknn_run_extend)]),
    "rknn_outputs_get": (ctypes.c_int, [_ctx, _u32, ctypes.POINTER(abi.rknn_output),
                                        ctypes.POINTER(abi.rknn_output_extend)]),
    "rknn_outputs_release": (ctypes.c_int, [_ctx, _u32, ctypes.POINTER(abi.rknn_output)]),
    "rknn_create_mem": (_mem_p, [_ctx, _u32]),
    "rknn_create_mem2": (_mem_p, [_ctx, ctypes.c_uint64, ctypes.c_uint64]),
    "rknn_create_mem_from_fd": (_mem_p, [_ctx, ctypes.c_int32, ctypes.c_void_p, _u32,
                                         ctypes.c_int32]),
    "rknn_create_mem_from_phys": (_mem_p, [_ctx, ctypes.c_uint64, ctypes.c_void_p, _u32]),
    "rknn_destroy_mem": (ctypes.c_int, [_ctx, _mem_p]),
    "rknn_set_weight_mem": (ctypes.c_int, [_ctx, _mem_p]),
    "rknn_set_internal_mem": (ctypes.c_int, [_ctx, _mem_p]),
    "rknn_set_io_mem": (ctypes.c_int, [_ctx, _mem_p, ctypes.POINTER(abi.rknn_tensor_attr)]),
    "rknn_mem_sync": (ctypes.c_int, [_ctx, _mem_p, ctypes.c_int]),
    "rknn_set_input_shapes": (ctypes.c_int, [_ctx, _u32, ctypes.POINTER(abi.rknn_tensor_attr)]),
    # deprecated (one input), and RV1103/RV1106 only: declared, so a program may call them
    "rknn_set_input_shape": (ctypes.c_int, [_ctx, ctypes.POINTER(abi.rknn_tensor_attr)]),
    "rknn_create_mem_from_mb_blk": (_mem_p, [_ctx, ctypes.c_void_p, ctypes.c_int32]),
}


def load_library(path: Optional[LibraryPath] = None) -> Tuple[str, ctypes.CDLL]:
    """Load librknnrt.so: ``path`` if given, else $LIBRKNNRT_PATH if set (only
    that file, as rknnlab.board and rknn-toolkit-lite2 read it), else the first
    of DEFAULT_LIBRARY_PATHS and then the dynamic linker's
    find_library("rknnrt") that loads.  Raises RuntimeLibraryNotFound listing
    every path tried and why it failed."""
    explicit = os.fspath(path) if path is not None else os.environ.get("LIBRKNNRT_PATH")
    candidates = [explicit] if explicit else list(DEFAULT_LIBRARY_PATHS)
    tried: List[Tuple[str, str]] = []
    for candidate in candidates:
        if not os.path.exists(candidate):
            tried.append((candidate, "no such file"))
            continue
        try:
            return candidate, ctypes.CDLL(candidate)
        except OSError as exc:  # e.g. an aarch64 library on an x86_64 host
            tried.append((candidate, str(exc)))
    if not explicit:
        soname = ctypes.util.find_library("rknnrt")
        if soname is None:
            tried.append(('ctypes.util.find_library("rknnrt")', "not known to the dynamic linker"))
        else:
            try:
                return soname, ctypes.CDLL(soname)
            except OSError as exc:
                tried.append((soname, str(exc)))
    raise errors.RuntimeLibraryNotFound(tried)


def _bind(lib: ctypes.CDLL) -> Dict[str, Callable[..., Any]]:
    """Declare the signature of every runtime function the library exports."""
    functions = {}
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            function = getattr(lib, name)
        except AttributeError:  # an older runtime; reported when called
            continue
        function.restype = restype
        function.argtypes = argtypes
        functions[name] = function
    return functions


_S = TypeVar("_S", bound=ctypes.Structure)


def _c_array(cls: Type[_S], items: Sequence[_S]) -> Tuple["ctypes.Array[_S]", bool]:
    """A C array of ``items``, and whether it is a copy.  A ctypes array of the
    right type is passed as is, so the runtime writes straight into it."""
    if isinstance(items, ctypes.Array) and items._type_ is cls:
        return items, False
    return (cls * len(items))(*items), True


def _copy_back(array: "ctypes.Array[_S]", items: Sequence[_S]) -> None:
    """Copy what the runtime wrote into ``array`` back into the caller's structs."""
    size = ctypes.sizeof(array._type_)
    for element, item in zip(array, items):
        ctypes.memmove(ctypes.addressof(item), ctypes.addressof(element), size)


class NativeRuntime(Runtime):
    """The RKNN C API of librknnrt.so.

    ``path`` names the library to load; by default $LIBRKNNRT_PATH, else the
    usual install places (see :func:`load_library`).  ``library_path`` tells
    which one was loaded.
    """

    backend = "native"

    def __init__(self, path: Optional[LibraryPath] = None) -> None:
        self.library_path, self._lib = load_library(path)
        from ..board import read_board
        self.soc = read_board().soc or ""
        self._functions = _bind(self._lib)
        # Model buffers that the runtime uses in place (MODEL_BUFFER_ZERO_COPY)
        # must outlive their context; keyed by context.
        self._model_buffers: Dict[int, Any] = {}

    def _fn(self, name: str) -> Callable[..., Any]:
        try:
            return self._functions[name]
        except KeyError:
            raise errors.RuntimeFunctionMissing(name, self.library_path) from None

    def _call(self, name: str, *args: Any, detail: str = "") -> int:
        return errors.check(self._fn(name)(*args), name, detail)

    def _new_mem(self, name: str, detail: str, *args: Any) -> MemPtr:
        mem = self._fn(name)(*args)
        if not mem:  # NULL: the C API gives no code, out of memory is the usual cause
            raise errors.error_for(abi.RKNN_ERR_MALLOC_FAIL, name, f"returned NULL ({detail})")
        return mem

    # -- context lifecycle -------------------------------------------------
    def init(self, model: ModelSource, flag: int = 0,
             extend: Optional[abi.rknn_init_extend] = None, size: Optional[int] = None) -> int:
        """rknn_init.  A str/PathLike passes the encoded path with size 0; a
        bytes-like object passes a pointer to its bytes with size = its length
        (no copy on our side; the runtime copies them unless
        RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, in which case the object is kept
        alive until destroy); an int is an address and needs ``size``."""
        if isinstance(model, (str, os.PathLike)):
            if size:
                raise ValueError("a model path is passed with size 0; drop size=")
            pointer: Any = os.fsencode(model)
            keep_alive: Any = None  # the runtime reads the file during the call
            size = 0
        elif isinstance(model, int):
            if not size:
                raise ValueError("a model address needs its size: init(address, size=n)")
            pointer, keep_alive = model, None
        else:
            keep_alive = np.frombuffer(model, dtype=np.uint8)  # a view, fails if not contiguous
            if size is not None and size != keep_alive.nbytes:
                raise ValueError(f"size={size} but the model buffer holds {keep_alive.nbytes} bytes")
            pointer, size = keep_alive.ctypes.data, keep_alive.nbytes
        context = _ctx()
        self._call("rknn_init", ctypes.byref(context), pointer, size, flag,
                   ctypes.byref(extend) if extend is not None else None,
                   detail=f"flag=0x{flag:x}, size={size}")
        if flag & abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY and keep_alive is not None:
            self._model_buffers[context.value] = keep_alive
        return context.value

    def dup_context(self, ctx: int) -> int:
        context_in, context_out = _ctx(ctx), _ctx()
        self._call("rknn_dup_context", ctypes.byref(context_in), ctypes.byref(context_out))
        return context_out.value

    def destroy(self, ctx: int) -> int:
        ret = self._call("rknn_destroy", ctx)
        self._model_buffers.pop(ctx, None)
        return ret

    # -- information ----------------------------------------------------------
    def query(self, ctx: int, cmd: int, info: Optional[ctypes.Structure] = None) -> ctypes.Structure:
        if info is None:
            if cmd not in abi.QUERY_STRUCTS:
                raise ValueError(f"{abi.QUERY_NAMES.get(cmd, cmd)} has no default struct; "
                                 "pass info=<the struct it fills>")
            info = abi.QUERY_STRUCTS[cmd]()
        self._call("rknn_query", ctx, cmd, ctypes.byref(info), ctypes.sizeof(info),
                   detail=str(abi.QUERY_NAMES.get(cmd, f"cmd={cmd}")))
        return info

    # -- inference -----------------------------------------------------------
    def inputs_set(self, ctx: int, inputs: Sequence[abi.rknn_input]) -> int:
        array, _ = _c_array(abi.rknn_input, inputs)
        return self._call("rknn_inputs_set", ctx, len(array), array)

    def run(self, ctx: int, extend: Optional[abi.rknn_run_extend] = None) -> int:
        return self._call("rknn_run", ctx, ctypes.byref(extend) if extend is not None else None)

    def wait(self, ctx: int, extend: Optional[abi.rknn_run_extend] = None) -> int:
        """rknn_wait: waits for a non-blocking run (RKNN_FLAG_ASYNC_MASK)."""
        return self._call("rknn_wait", ctx, ctypes.byref(extend) if extend is not None else None)

    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output],
                    extend: Optional[abi.rknn_output_extend] = None) -> int:
        array, copied = _c_array(abi.rknn_output, outputs)
        ret = self._call("rknn_outputs_get", ctx, len(array), array,
                         ctypes.byref(extend) if extend is not None else None)
        if copied:
            _copy_back(array, outputs)
        return ret

    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        array, copied = _c_array(abi.rknn_output, outputs)
        ret = self._call("rknn_outputs_release", ctx, len(array), array)
        if copied:
            _copy_back(array, outputs)
        return ret

    def set_core_mask(self, ctx: int, core_mask: int) -> int:
        return self._call("rknn_set_core_mask", ctx, core_mask,
                          detail=abi.CORE_MASK_NAMES.get(core_mask, f"core_mask=0x{core_mask:x}"))

    def set_batch_core_num(self, ctx: int, core_num: int) -> int:
        """rknn_set_batch_core_num: split a batch over ``core_num`` NPU cores."""
        return self._call("rknn_set_batch_core_num", ctx, core_num)

    def set_input_shapes(self, ctx: int, attrs: Sequence[abi.rknn_tensor_attr]) -> int:
        """rknn_set_input_shapes: choose one of a dynamic-shape model's input shapes."""
        array, _ = _c_array(abi.rknn_tensor_attr, attrs)
        return self._call("rknn_set_input_shapes", ctx, len(array), array)

    # -- memory ----------------------------------------------------------------
    # A mem argument may be the POINTER(rknn_tensor_mem) a create_mem call
    # returned or an rknn_tensor_mem struct (ctypes then passes its address).
    def create_mem(self, ctx: int, size: int) -> MemPtr:
        return self._new_mem("rknn_create_mem", f"size={size}", ctx, size)

    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> MemPtr:
        return self._new_mem("rknn_create_mem2", f"size={size}, alloc_flags=0x{alloc_flags:x}",
                             ctx, size, alloc_flags)

    def create_mem_from_fd(self, ctx: int, fd: int, virt: int, size: int, offset: int) -> MemPtr:
        return self._new_mem("rknn_create_mem_from_fd", f"fd={fd}, size={size}, offset={offset}",
                             ctx, fd, virt, size, offset)

    def create_mem_from_phys(self, ctx: int, phys: int, virt: int, size: int) -> MemPtr:
        """rknn_create_mem_from_phys: wrap a physically contiguous buffer."""
        return self._new_mem("rknn_create_mem_from_phys", f"phys=0x{phys:x}, size={size}",
                             ctx, phys, virt, size)

    def destroy_mem(self, ctx: int, mem: MemPtr) -> int:
        return self._call("rknn_destroy_mem", ctx, mem)

    def set_io_mem(self, ctx: int, mem: MemPtr, attr: abi.rknn_tensor_attr) -> int:
        return self._call("rknn_set_io_mem", ctx, mem, ctypes.byref(attr),
                          detail=f"tensor {attr.name.decode('utf-8', 'replace')!r} index {attr.index}")

    def set_weight_mem(self, ctx: int, mem: MemPtr) -> int:
        return self._call("rknn_set_weight_mem", ctx, mem)

    def set_internal_mem(self, ctx: int, mem: MemPtr) -> int:
        return self._call("rknn_set_internal_mem", ctx, mem)

    def mem_sync(self, ctx: int, mem: MemPtr, mode: int) -> int:
        return self._call("rknn_mem_sync", ctx, mem, mode,
                          detail=abi.MEM_SYNC_NAMES.get(mode, f"mode={mode}"))
