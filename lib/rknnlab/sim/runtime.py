"""SimRuntime: the RKNN C API with real CPU-side memory and a modeled NPU.

Each method keeps the semantics of the C function of the same name (facts
sheet section 1) and raises the RknnError subclass of the code the runtime
would return, with a message that says what was wrong.  Where the public docs
are silent, the choice made is listed in rknnlab.sim.ASSUMPTIONS.

Locking: each context has a lock held for the whole of every call that
touches its own buffers (inputs_set, run, outputs_get/release, set_weight_mem,
destroy), so rknn_destroy waits for a run in another thread; the other calls
(query, the mem calls, set_core_mask, dup_context) only take the runtime's
lock, briefly, so that a query from another thread does not wait for a run.
The runtime's lock guards the tables; mems in use by a call are pinned, so
destroying them from another thread unmaps them only when the call is done.
NPU core locks are taken inside a context's lock and never while the
runtime's lock is held.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from .. import models
from ..rknn import abi, errors
from ..rknn.runtime import MemPtr, ModelSource, Runtime
from . import cache
from .context import Binding, Context, ModelBytes, Weights
from .layout import Layout, LayoutError, dequantize
from .memory import DmaBuffer, array_at, heap_alloc, heap_free
from .mems import ID_ATTRIBUTE, MEM_POINTER, TensorMem, take_iova
from .model import SimModel, TensorSpec, UnknownModelError, identify
from .internal import InternalState
from .npu import SOC_ALIASES, npu_for, soc_npu, wait_until
from .perf import perf_detail_text
from .shapes import dims_text, nchw
from .sram import SRAM_PAGE, sram_for, sram_log_text
from .weightprint import WeightPrint

API_VERSION = "2.3.2 (rknnlab simulator, no NPU)"
DRIVER_VERSION = "none (simulated)"

#: init flags the simulator honours (the priorities are values of the low two bits)
_PRIORITY_BITS = abi.RKNN_FLAG_PRIOR_MEDIUM | abi.RKNN_FLAG_PRIOR_LOW
_HONOURED_FLAGS = (_PRIORITY_BITS | abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE | abi.RKNN_FLAG_SHARE_WEIGHT_MEM
                   | abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE
                   | abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY | abi.RKNN_FLAG_COLLECT_PERF_MASK
                   | abi.RKNN_FLAG_ENABLE_SRAM | abi.RKNN_FLAG_SHARE_SRAM | cache.DISABLE_FLUSH_FLAGS)
_MEM_ALLOC_FLAGS = (abi.RKNN_FLAG_MEMORY_CACHEABLE | abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
                    | abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM | abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)

#: query command -> (attr kind, outputs?) for the six attr queries
_ATTR_QUERIES: Dict[int, Tuple[str, bool]] = {
    abi.RKNN_QUERY_INPUT_ATTR: ("plain", False),
    abi.RKNN_QUERY_OUTPUT_ATTR: ("plain", True),
    abi.RKNN_QUERY_NATIVE_INPUT_ATTR: ("native", False),
    abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR: ("native", True),
    abi.RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR: ("native_nhwc", False),
    abi.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR: ("native_nhwc", True),
}
#: the RKNN_QUERY_CURRENT_* attr queries: the attrs of the shape set last (dynamic shapes)
_CURRENT_QUERIES: Dict[int, Tuple[str, bool]] = {
    abi.RKNN_QUERY_CURRENT_INPUT_ATTR: ("plain", False),
    abi.RKNN_QUERY_CURRENT_OUTPUT_ATTR: ("plain", True),
    abi.RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR: ("native", False),
    abi.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR: ("native", True),
}
_ANSWERED = set(_ATTR_QUERIES) | set(_CURRENT_QUERIES) | {
    abi.RKNN_QUERY_IN_OUT_NUM, abi.RKNN_QUERY_MEM_SIZE, abi.RKNN_QUERY_SDK_VERSION,
    abi.RKNN_QUERY_PERF_RUN, abi.RKNN_QUERY_PERF_DETAIL, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE,
    abi.RKNN_QUERY_CUSTOM_STRING}
_INFO_ONLY_ANSWERED = (abi.RKNN_QUERY_MEM_SIZE, abi.RKNN_QUERY_IN_OUT_NUM)

_INPUT_TYPES = (abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_INT8, abi.RKNN_TENSOR_FLOAT32,
                abi.RKNN_TENSOR_FLOAT16)
_OUTPUT_TYPES = (abi.RKNN_TENSOR_INT8, abi.RKNN_TENSOR_FLOAT32, abi.RKNN_TENSOR_FLOAT16)

# context handles are unique in the process, never reused: a stale handle is always caught
_handles = itertools.count(0x5100)


def _error(code: int, function: str, detail: str) -> errors.RknnError:
    return errors.error_for(code, function, detail)


def _type_name(rknn_type: int) -> str:
    return abi.TYPE_NAMES.get(rknn_type, str(rknn_type))


def _fmt_name(fmt: int) -> str:
    return abi.FMT_NAMES.get(fmt, str(fmt))


def _short_input_detail(index: int, tensor_input: abi.rknn_input, needed: int, what: str) -> str:
    """Why an rknn_inputs_set buffer is refused as too small.  librknnrt 2.3.2 returns -5
    for it on boards (airockchip/rknn-toolkit2#558, airockchip/rknn_model_zoo#298); a
    larger buffer is accepted (ASSUMPTIONS A64)."""
    detail = f"input {index}: {tensor_input.size:,} B given, fewer than the {needed:,} B it needs ({what}"
    if not tensor_input.pass_through and tensor_input.type == abi.RKNN_TENSOR_FLOAT32:
        detail += "; rknn_input.type 0 means FLOAT32"
    return (detail + "). librknnrt 2.3.2 on a board returns -5 for this too (airockchip/rknn-toolkit2#558, "
            "airockchip/rknn_model_zoo#298); a larger buffer is read up to the size needed (A64)")


# librknnrt 1.5.2's log line (a string in the RK3588 binary of rockchip-linux/rknpu2) when
# rknn_init gets RKNN_FLAG_SHARE_WEIGHT_MEM for a dynamic-shape model: the evidence for
# refusing both that flag and rknn_dup_context on such a model (ASSUMPTIONS A56)
_DYNAMIC_SHARE_REFUSAL = ("RKNN_FLAG_SHARE_WEIGHT_MEM is invalid, dynamic shape rknn model is "
                          "not supported!")

# What size means in rknn_create_mem_from_fd: the simulator's reading (ASSUMPTIONS A8)
_FD_SIZE_RULE = "size counts from the start of the fd's buffer (ASSUMPTIONS A8)"


def _available_text(record: TensorMem) -> str:
    """'size - offset = N B', saying for a create_mem_from_fd view with an offset
    that its size counts from the buffer's start (A8): a caller reading size as
    the tensor's own bytes sees why the view falls short."""
    text = f"size - offset = {record.available:,} B"
    if record.imported and record.offset:
        text += (f" (a create_mem_from_fd view with offset {record.offset:,}: its size "
                 "counts from the start of the fd's buffer, ASSUMPTIONS A8)")
    return text


def _tensor_kind(rknn_type: int, fmt: int, n_dims: int) -> str:
    """'type FLOAT32, fmt UNDEFINED: a 2-D tensor': the short names, so that the fmt
    of a tensor that is not an image (UNDEFINED) does not read as an error."""
    prefix = "RKNN_TENSOR_"
    kind = f"type {_type_name(rknn_type).replace(prefix, '')}, fmt {_fmt_name(fmt).replace(prefix, '')}"
    if fmt == abi.RKNN_TENSOR_UNDEFINED:
        kind += f": a {n_dims}-D tensor"
    return kind


def _flag_names(bits: int) -> str:
    names = []
    for bit in range(32):
        value = 1 << bit
        if bits & value:
            names.append(abi.INIT_FLAG_NAMES.get(value, f"0x{value:x}"))
    return ", ".join(names)


class SimRuntime(Runtime):
    """The RKNN runtime of one simulated SoC (``rk3588`` by default).

    Memory is real (libc malloc, memfd + mmap DMA stand-ins), layout
    conversion and (de)quantization are real numpy work, and rknn_run blocks
    for the NPU time modeled from the compiler report, on a process-wide NPU
    with the SoC's cores.  Only the course models in data/models load.
    """

    backend = "sim"

    def __init__(self, soc: str = "rk3588") -> None:
        soc_npu(soc)  # ValueError naming the known SoCs
        self.soc = SOC_ALIASES.get(soc.lower(), soc.lower())
        self.npu = npu_for(self.soc)
        self._lock = threading.RLock()
        self._contexts: Dict[int, Context] = {}
        self._destroyed: Set[int] = set()
        self._mems_by_address: Dict[int, TensorMem] = {}
        self._mems_by_id: Dict[int, TensorMem] = {}

    def __repr__(self) -> str:
        return f"<SimRuntime {self.soc}: {len(self._contexts)} contexts, {len(self._mems_by_id)} mems>"

    # ------------------------------------------------------------------ plumbing
    def _context(self, ctx: int, function: str) -> Context:
        with self._lock:
            context = self._contexts.get(ctx)
            if context is not None:
                return context
            if ctx in self._destroyed:
                detail = f"context 0x{ctx:x} was destroyed (rknn_destroy); every later call with it fails"
            elif not ctx:
                detail = "ctx is 0: rknn_init did not succeed, or the context was never made"
            else:
                detail = f"0x{ctx:x} is not a context of this runtime"
            raise _error(abi.RKNN_ERR_CTX_INVALID, function, detail)

    @contextmanager
    def _using(self, ctx: int, function: str, info_only_ok: bool = False,
               exclusive: bool = True) -> Iterator[Context]:
        """The live context ``ctx``; ``exclusive``: locked for the call."""
        context = self._context(ctx, function)
        if context.info_only and not info_only_ok:
            raise _error(abi.RKNN_ERR_CTX_INVALID, function,
                         "this context was made with RKNN_FLAG_COLLECT_MODEL_INFO_ONLY: it only "
                         "answers RKNN_QUERY_MEM_SIZE and RKNN_QUERY_IN_OUT_NUM; init again "
                         "without the flag to run the model")
        if not exclusive:
            yield context
            return
        with context.lock:
            self._check_alive(context, function)  # destroyed while we waited for the lock?
            yield context

    @staticmethod
    def _check_alive(context: Context, function: str) -> None:
        if not context.alive:
            raise _error(abi.RKNN_ERR_CTX_INVALID, function, f"context 0x{context.handle:x} was destroyed")

    def _mem(self, mem: MemPtr, function: str) -> TensorMem:
        """The live TensorMem behind a pointer (or struct) the caller passes."""
        if isinstance(mem, MEM_POINTER):
            if not mem:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, function, "mem is NULL")
            mem_id = getattr(mem, ID_ATTRIBUTE, None)
            address = ctypes.addressof(mem.contents)
        elif isinstance(mem, abi.rknn_tensor_mem):
            mem_id, address = None, ctypes.addressof(mem)
        else:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, function,
                         f"mem must be the rknn_tensor_mem pointer a create_mem call returned, "
                         f"not {type(mem).__name__}")
        with self._lock:
            record = (self._mems_by_id.get(mem_id) if mem_id is not None
                      else self._mems_by_address.get(address))
        if record is None:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, function,
                         "this mem was already destroyed (rknn_destroy_mem, or rknn_destroy of the "
                         "context that created it)" if mem_id is not None else
                         "this rknn_tensor_mem was not made by this runtime's create_mem family, "
                         "or was already destroyed")
        return record

    def _own_mem(self, mem: MemPtr, context: Context, function: str) -> TensorMem:
        """The live TensorMem behind ``mem``, which ``context`` may use: one created with
        it or with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT, not another live context's (A59)."""
        record = self._mem(mem, function)
        if record.ctx and record.ctx != context.handle:
            with self._lock:
                live = record.ctx in self._contexts
            if live:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, function,
                             f"the mem belongs to context 0x{record.ctx:x} (created with it): give "
                             f"this context (0x{context.handle:x}) a view made with "
                             "rknn_create_mem_from_fd(this ctx, mem->fd, mem->virt_addr, size, offset), "
                             "as Rockchip's demos do. This refusal is the simulator's rule: a board "
                             "most likely accepts the mem (ASSUMPTIONS A59)")
        return record

    @contextmanager
    def _pinned(self, mems: Sequence[TensorMem], function: str) -> Iterator[None]:
        """Keep the mems' pages mapped while a call reads or writes them, even if
        another thread destroys them meanwhile."""
        with self._lock:
            if any(mem.dead for mem in mems):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, function,
                             "a mem this call uses was destroyed (rknn_destroy_mem) by another thread")
            for mem in mems:
                mem.users += 1
        try:
            yield
        finally:
            with self._lock:
                for mem in mems:
                    mem.users -= 1
                    if mem.dead and mem.users == 0:
                        mem.free()

    def _register_mem(self, mem: TensorMem, context: Optional[Context], function: str) -> MemPtr:
        with self._lock:
            if context is not None and not context.alive:
                mem.free()
                self._check_alive(context, function)
            self._mems_by_address[mem.struct_address] = mem
            self._mems_by_id[mem.mem_id] = mem
        return mem.pointer

    def _kill_mem(self, mem: TensorMem) -> None:
        """Forget a mem, unbind it everywhere, free it (now, or when its last user is done)."""
        with self._lock:
            self._mems_by_address.pop(mem.struct_address, None)
            self._mems_by_id.pop(mem.mem_id, None)
            mem.dead = True
            for context in self._contexts.values():
                for bindings in (context.input_bindings, context.output_bindings):
                    for index in [i for i, b in bindings.items() if b.mem is mem]:
                        del bindings[index]
                if context.internal_mem is mem:
                    context.internal_mem = None
            if mem.users == 0:
                mem.free()

    def _mem_containing(self, address: int, size: int) -> Optional[TensorMem]:
        with self._lock:
            for mem in self._mems_by_id.values():
                if mem.contains(address, size):
                    return mem
        return None

    # ------------------------------------------------------------------ lifecycle
    def init(self, model: ModelSource, flag: int = 0,
             extend: Optional[abi.rknn_init_extend] = None, size: Optional[int] = None) -> int:
        """rknn_init.  A path, the model bytes, or (MODEL_BUFFER_ZERO_COPY) the
        virt_addr of a create_mem2 buffer holding them plus ``size``.  The
        model must be one of the course models (known by its sha256)."""
        fn = "rknn_init"
        unknown = flag & ~_HONOURED_FLAGS
        if unknown or (flag & _PRIORITY_BITS) == _PRIORITY_BITS:
            what = _flag_names(unknown) if unknown else "PRIOR_MEDIUM | PRIOR_LOW (0x3, not a priority)"
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"flag 0x{flag:x}: {what} is not modeled by the simulator, which does not "
                         "ignore flags silently; drop it here, or use a board (backend='native')")
        if flag & abi.RKNN_FLAG_SHARE_SRAM and not flag & abi.RKNN_FLAG_ENABLE_SRAM:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         "RKNN_FLAG_SHARE_SRAM needs RKNN_FLAG_ENABLE_SRAM too (API reference V2.3.2 "
                         "p.19); the User Guide V2.3.0 (section 5.7.2) says sharing is not yet implemented")
        zero_copy = bool(flag & abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY)
        source = self._read_model(model, zero_copy, extend, size, fn)
        try:
            if bytes(source.view[:4]) != b"RKNN":
                raise _error(abi.RKNN_ERR_MODEL_INVALID, fn,
                             f"the {len(source.view)} bytes do not start with 'RKNN' (an ONNX file? a "
                             "truncated download?)")
            try:
                sim_model = identify(source.view)
            except UnknownModelError as exc:
                raise _error(abi.RKNN_ERR_MODEL_INVALID, fn,
                             "the simulator only knows the course models in data/models; this file's "
                             f"sha256 is {exc.sha256}; on a board the native backend runs any model") from None
            # an RK3566 runs the models compiled for rk3568 (same NPU)
            model_soc = models.SOC_MODELS.get(self.soc, self.soc)
            if sim_model.target != model_soc:
                raise _error(abi.RKNN_ERR_TARGET_PLATFORM_UNMATCH, fn,
                             f"{sim_model.name} was compiled for {sim_model.target}, this simulator is a "
                             f"{self.soc}: {_model_for_soc(sim_model.name, model_soc)}, or "
                             f"SimRuntime(soc='{sim_model.target}')")
            context = Context(next(_handles), sim_model, flag)
            if not context.info_only:  # a model-info context allocates nothing
                if flag & abi.RKNN_FLAG_SHARE_WEIGHT_MEM:
                    context.weights = self._share_weights(extend, sim_model, fn)
                self._allocate_or_fail(context, fn, lambda: self._allocate(context, source))
        finally:
            source.drop_unused()
        handle = self._register(context)
        if context.sram is not None and _log_level() >= 3:  # as the runtime's log prints it
            sys.stderr.write(self.sram_log(handle))
        return handle

    def _read_model(self, model: ModelSource, zero_copy: bool, extend: Optional[abi.rknn_init_extend],
                    size: Optional[int], fn: str) -> "_ModelSource":
        """Where the model bytes are, read without a temporary copy: a file is read
        straight into the runtime's own malloc'd copy (one copy, as a runtime that
        reads the file itself makes); a buffer or an address is only looked at."""
        if isinstance(model, (str, os.PathLike)):
            if size:
                raise ValueError("a model path is passed with size 0; drop size=")
            if zero_copy:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY needs the model in a create_mem2 "
                             "buffer (pass its virt_addr and size), not a path")
            source = _ModelSource.from_file(model, fn)
        elif isinstance(model, int):
            if not size:
                raise ValueError("a model address needs its size: init(address, size=n)")
            if zero_copy and self._mem_containing(model, size) is None:
                source = _ModelSource(memoryview(b""), 0)  # not ours to read: refused below
            else:
                source = _ModelSource(_view_at(model, size), model)
        else:
            view = np.frombuffer(model, dtype=np.uint8)
            if size is not None and size != view.nbytes:
                raise ValueError(f"size={size} but the model buffer holds {view.nbytes} bytes")
            source = _ModelSource(memoryview(view), view.ctypes.data if view.nbytes else 0, keep=view)
        try:
            if extend is not None and extend.real_model_size:
                start, end = extend.real_model_offset, extend.real_model_offset + extend.real_model_size
                is_path = isinstance(model, (str, os.PathLike))
                if not (is_path or zero_copy) and (start, end) != (0, len(source.view)):
                    # valid for a path or a zero-copy buffer only (rknn_api.h, API p.16): ASSUMPTIONS A43
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 f"extend.real_model_offset/size [{start}, {end}) select part of an "
                                 "ordinary buffer; the header and API reference V2.3.2 (p.16) make them "
                                 "valid for a model path or a RKNN_FLAG_MODEL_BUFFER_ZERO_COPY buffer "
                                 "only, and the simulator does not guess what a board does here "
                                 "(ASSUMPTIONS A43): pass the model's own bytes, or leave them 0")
                if start < 0 or end > len(source.view):
                    raise _error(abi.RKNN_ERR_MODEL_INVALID, fn,
                                 f"extend.real_model_offset/size [{start}, {end}) lie outside the "
                                 f"{len(source.view)} bytes given")
                source.narrow(start, end)
            if zero_copy:
                mem = (self._mem_containing(source.address, len(source.view))
                       if source.address and len(source.view) else None)
                if mem is None:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: the model bytes must lie in a buffer "
                                 "from rknn_create_mem2 (RKNN_MEM_FLAG_ALLOC_NO_CONTEXT allows ctx 0); "
                                 "pass its virt_addr and the model size")
                if extend is not None and extend.model_buffer_fd > 0 and extend.model_buffer_fd != mem.buffer.fd:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 f"extend.model_buffer_fd={extend.model_buffer_fd} is not the fd "
                                 f"({mem.buffer.fd}) of the mem holding the model")
                source.mem = mem
        except BaseException:
            source.drop_unused()
            raise
        return source

    def _share_weights(self, extend: Optional[abi.rknn_init_extend], model: SimModel, fn: str) -> Weights:
        """The weights of extend.ctx, with a reference taken for the new context."""
        if model.dynamic:  # the return code is assumed: ASSUMPTIONS A56
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"{model.name} is a dynamic-shape model: librknnrt 1.5.2 says "
                         f"'{_DYNAMIC_SHARE_REFUSAL}'; rknn_init it without the flag (its own "
                         "weights) (ASSUMPTIONS A56)")
        if extend is None or not extend.ctx:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         "RKNN_FLAG_SHARE_WEIGHT_MEM needs extend.ctx = the context whose weights to share")
        with self._lock:
            source = self._context(extend.ctx, fn)
            if source.model.name != model.name:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"RKNN_FLAG_SHARE_WEIGHT_MEM: context 0x{extend.ctx:x} runs "
                             f"{source.model.name}, this model is {model.name}; weights are shared "
                             "between builds of the same network")
            if source.weights is None:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"context 0x{extend.ctx:x} has no weights to share (a model-info-only context)")
            source.weights.refs += 1
            return source.weights

    def _allocate(self, context: Context, source: "_ModelSource") -> None:
        """What rknn_init allocates: the model copy, weights (unless shared),
        internal, io buffers."""
        model = context.model
        if source.mem is not None:
            context.model_bytes = ModelBytes(source.address, len(source.view), heap=False, mem=source.mem)
        else:
            context.model_bytes = ModelBytes(source.take_heap_copy(), len(source.view), heap=True)
        outside = context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
        if context.weights is None:  # not shared with another context (SHARE_WEIGHT_MEM)
            if outside:
                context.weights = Weights(context.handle)
            elif source.mem is not None:  # the NPU reads the weights where they are
                context.weights = Weights(context.handle, mem=source.mem)
            else:
                context.weights = Weights(context.handle, buffer=self._weight_buffer(model, source.view))
        self._allocate_buffers(context)

    def _allocate_buffers(self, context: Context) -> None:
        """A context's own internal and io buffers, unless allocated outside.  With
        RKNN_FLAG_ENABLE_SRAM the internal buffer's first pages come from the NPU's
        SRAM, as many as are free (rknnlab.sim.sram; ASSUMPTIONS A29, A53)."""
        model = context.model
        outside = context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
        internal_size = model.report.total_internal_size
        if not (outside or context.has(abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)) and internal_size:
            if context.has(abi.RKNN_FLAG_ENABLE_SRAM):
                context.sram_allocator = sram_for(self.soc)
                context.sram = context.sram_allocator.take(internal_size)
            if internal_size > context.sram_bytes:
                context.internal = DmaBuffer.allocate(internal_size - context.sram_bytes, "rknn-internal")
        if not outside:
            for i in range(len(model.inputs)):
                context.staging(False, i)
            for i in range(len(model.outputs)):
                context.staging(True, i)

    @staticmethod
    def _weight_buffer(model: SimModel, model_bytes: memoryview) -> Optional[DmaBuffer]:
        size = model.report.total_weight_size
        if not size:
            return None
        buffer = DmaBuffer.allocate(size, "rknn-weight")
        _copy_weights(np.frombuffer(model_bytes, dtype=np.uint8), buffer.array())
        return buffer

    def prepare_values(self, ctx: int) -> Optional[str]:
        """Load what computes ``ctx``'s outputs (its model's onnxruntime session) now
        instead of at the first rknn_run, so that a memory baseline taken after rknn_init
        already holds it.  The model's name when this call loaded it, else None.  For
        callers that measure across a whole program (the C library: rknnlab.sim.capi)."""
        context = self._context(ctx, "prepare_values")
        if context.info_only:
            return None
        return context.model.name if context.model.values.prepare() else None

    def dup_context(self, ctx: int) -> int:
        """rknn_dup_context: a new context of the same model and flags sharing
        the weights (and the model bytes); its own internal and io buffers,
        core mask AUTO, no io mems bound."""
        fn = "rknn_dup_context"
        with self._using(ctx, fn, exclusive=False) as source:
            if source.model.dynamic:  # the return code is not documented: ASSUMPTIONS A56
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{source.model.name} is a dynamic-shape model: the User Guide V2.3.0 "
                             "(section 5.4.4.1) says such a context may not be duplicated, and "
                             "librknnrt 1.5.2 refuses to share its weights "
                             f"('{_DYNAMIC_SHARE_REFUSAL}'); rknn_init the model again for a "
                             "second context (ASSUMPTIONS A56)")
            context = Context(next(_handles), source.model, source.flags)
            with self._lock:
                self._check_alive(source, fn)
                context.model_bytes = source.model_bytes
                context.weights = source.weights
                source.model_bytes.refs += 1
                source.weights.refs += 1
            self._allocate_or_fail(context, fn, lambda: self._allocate_buffers(context))
        return self._register(context)

    # ------------------------------------------------------------------ SRAM
    def sram_bitmap(self) -> str:
        """The text of /sys/kernel/debug/rknpu/mm on a board: the NPU SRAM of this SoC,
        one character per 4 KiB page ("*" used, "." free), then total, used and free
        bytes.  One allocator serves the whole process (ASSUMPTIONS A53)."""
        return sram_for(self.soc).bitmap()

    def sram_log(self, ctx: int) -> str:
        """The SRAM table the runtime prints with RKNN_LOG_LEVEL=3 for context ``ctx``:
        the SRAM part of its internal buffer, each feature tensor's bytes in SRAM
        (SramHit) and the predicted read + write they save.  Empty for a context
        with no SRAM (no RKNN_FLAG_ENABLE_SRAM, no free SRAM, or internal memory
        from outside).  Addresses are made up (ASSUMPTIONS A30)."""
        with self._using(ctx, "sram_log", info_only_ok=True, exclusive=False) as context:
            if context.sram is None:
                return ""
            model = context.current
            with self._lock:
                if context.log_addresses is None:
                    addresses = {"": take_iova(model.report.total_internal_size)}
                    for spec in model.inputs + model.outputs:
                        addresses[spec.name] = take_iova(spec.native.nbytes)
                    context.log_addresses = addresses
                addresses = context.log_addresses
            return sram_log_text(model.sram_hits(context.sram_bytes), context.sram.pages * SRAM_PAGE, addresses[""],
                                 addresses, model.report.total_weight_size, model.report.total_internal_size)

    def _allocate_or_fail(self, context: Context, fn: str, allocate: Callable[[], None]) -> None:
        """Run ``allocate``; on failure free what it got and raise RKNN_ERR_MALLOC_FAIL."""
        try:
            allocate()
        except (OSError, MemoryError) as exc:
            with self._lock:
                context.release_buffers()
            raise _error(abi.RKNN_ERR_MALLOC_FAIL, fn, str(exc)) from None

    def _register(self, context: Context) -> int:
        with self._lock:
            self._contexts[context.handle] = context
        return context.handle

    def destroy(self, ctx: int) -> int:
        """rknn_destroy: frees everything the runtime allocated for the context,
        including outputs_get buffers not yet released and the mems created
        with it (ASSUMPTIONS A6, A7); weights shared with other contexts live
        on until the last of them is destroyed."""
        fn = "rknn_destroy"
        with self._using(ctx, fn, info_only_ok=True) as context:
            with self._lock:
                context.alive = False
                del self._contexts[ctx]
                self._destroyed.add(ctx)
                for mem in [m for m in self._mems_by_id.values() if m.ctx == ctx]:
                    self._kill_mem(mem)
                context.release_buffers()
        return 0

    def close(self) -> None:
        """Destroy every context and mem of this runtime."""
        with self._lock:
            handles = list(self._contexts)
        for handle in handles:
            try:
                self.destroy(handle)
            except errors.RknnCtxInvalidError:  # destroyed by another thread meanwhile
                pass
        with self._lock:
            for mem in list(self._mems_by_id.values()):
                self._kill_mem(mem)

    # ------------------------------------------------------------------ information
    def query(self, ctx: int, cmd: int, info: Optional[ctypes.Structure] = None) -> ctypes.Structure:
        """rknn_query for IN_OUT_NUM, the six *_ATTR commands, MEM_SIZE,
        SDK_VERSION, PERF_RUN (the modeled NPU time of the last run),
        PERF_DETAIL (the last run's per-layer profile text; needs
        RKNN_FLAG_COLLECT_PERF_MASK), INPUT_DYNAMIC_RANGE, the CURRENT_* attrs and
        CUSTOM_STRING (empty: the course models carry none, A74)."""
        fn = "rknn_query"
        name = abi.QUERY_NAMES.get(cmd, f"cmd {cmd}")
        with self._using(ctx, fn, info_only_ok=True, exclusive=False) as context:
            if context.info_only and cmd not in _INFO_ONLY_ANSWERED:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{name}: a RKNN_FLAG_COLLECT_MODEL_INFO_ONLY context only answers "
                             "RKNN_QUERY_MEM_SIZE and RKNN_QUERY_IN_OUT_NUM")
            if cmd not in _ANSWERED:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"{name} is not modeled by the simulator")
            expected = abi.QUERY_STRUCTS[cmd]
            if info is None:
                info = expected()
            elif not isinstance(info, expected):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{name} fills an {expected.__name__} ({ctypes.sizeof(expected)} B), "
                             f"not a {type(info).__name__} ({ctypes.sizeof(info)} B)")
            self._answer(context, cmd, info, fn)
        return info

    def _answer(self, context: Context, cmd: int, info: ctypes.Structure, fn: str) -> None:
        model = context.model
        if cmd in _ATTR_QUERIES or cmd in _CURRENT_QUERIES:
            kind, outputs = _ATTR_QUERIES.get(cmd) or _CURRENT_QUERIES[cmd]
            if cmd in _CURRENT_QUERIES:  # the shape set last (ASSUMPTIONS A52, A56)
                model = context.current
            specs = model.outputs if outputs else model.inputs
            if info.index >= len(specs):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{abi.QUERY_NAMES[cmd]}: index {info.index} is out of range, "
                             f"{model.name} has {len(specs)} {'output' if outputs else 'input'}(s)")
            ctypes.memmove(ctypes.addressof(info), ctypes.addressof(specs[info.index].attrs[kind]),
                           ctypes.sizeof(info))
        elif cmd == abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE:
            self._answer_dynamic_range(model, info, fn)
        elif cmd == abi.RKNN_QUERY_IN_OUT_NUM:
            info.n_input, info.n_output = len(model.inputs), len(model.outputs)
        elif cmd == abi.RKNN_QUERY_MEM_SIZE:
            info.total_weight_size = model.report.total_weight_size
            info.total_internal_size = model.report.total_internal_size
            info.total_dma_allocated_size = self._dma_total(context)
            # the SRAM reserved for the NPU and what is free of it now, for every context
            # (rknn_api.h: "total system sram size reserved for rknn"; ASSUMPTIONS A53)
            sram = sram_for(self.soc)
            info.total_sram_size, info.free_sram_size = sram.total_bytes, sram.free_bytes
        elif cmd == abi.RKNN_QUERY_SDK_VERSION:
            info.api_version = API_VERSION.encode()
            info.drv_version = DRIVER_VERSION.encode()
        elif cmd == abi.RKNN_QUERY_PERF_RUN:
            info.run_duration = context.last_run_us
        elif cmd == abi.RKNN_QUERY_PERF_DETAIL:
            self._answer_perf_detail(context, info, fn)
        elif cmd == abi.RKNN_QUERY_CUSTOM_STRING:
            # the course models carry none (tools/models/build.py passes no custom_string to
            # rknn.config): an empty string (ASSUMPTIONS A74)
            ctypes.memset(ctypes.addressof(info), 0, ctypes.sizeof(info))

    @staticmethod
    def _answer_dynamic_range(model: SimModel, info: abi.rknn_input_range, fn: str) -> None:
        """The shapes one input accepts, in the order the model stores them, each in the
        layout of its INPUT_ATTR (NHWC for an image: ASSUMPTIONS A56)."""
        name = abi.QUERY_NAMES[abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE]
        if not model.dynamic:
            # the code public librknnrt 2.3.0 logs show, after "rknn model is static shape type"
            raise _error(abi.RKNN_ERR_MODEL_INVALID, fn,
                         f"{name}: {model.name} was built with one input shape (no dynamic_input), a "
                         "static shape model; its INPUT_ATTR gives that shape (ASSUMPTIONS A52)")
        if info.index >= len(model.inputs):
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"{name}: index {info.index} is out of range, {model.name} has {len(model.inputs)} input(s)")
        plain = model.inputs[info.index].plain
        info.shape_number = len(model.shapes)
        info.fmt = plain.fmt
        info.name = plain.name
        info.n_dims = plain.n_dims
        for k, shape in enumerate(model.shapes):
            attr = shape.inputs[info.index].plain
            dims = list(attr.dims[:attr.n_dims])
            for j, dim in enumerate(dims):
                info.dyn_range[k][j] = dim

    def _answer_perf_detail(self, context: Context, info: abi.rknn_perf_detail, fn: str) -> None:
        """The per-layer profile of the last run, in the runtime's text form
        (rknnlab.sim.perf).  perf_data points to a NUL-terminated text the
        context owns until the next PERF_DETAIL query on it or rknn_destroy;
        data_len = its length without the NUL (ASSUMPTIONS A48)."""
        if not context.has(abi.RKNN_FLAG_COLLECT_PERF_MASK):
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         "RKNN_QUERY_PERF_DETAIL: the context was made without "
                         "RKNN_FLAG_COLLECT_PERF_MASK, so the runtime kept no per-layer profile; "
                         "rknn_init (or rknn_dup_context of a context made) with that flag")
        with self._lock:
            cores, runs = context.last_run_cores, context.runs
        if not runs:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         "RKNN_QUERY_PERF_DETAIL: no rknn_run yet on this context: the profile "
                         "describes the last run")
        model = context.last_run_model or context.model
        times = model.layer_times(cores, context.sram_bytes)
        text = perf_detail_text(model.report.layers, times, self.soc).encode("ascii")
        with self._lock:
            self._check_alive(context, fn)
            info.perf_data = context.set_perf_text(text)
            info.data_len = len(text)

    def _dma_total(self, context: Context) -> int:
        """DMA bytes of this context: what the runtime allocated for it, plus the
        create_mem buffers made with it (not imported ones: ASSUMPTIONS A9)."""
        with self._lock:
            made_here = sum(m.size - m.sram_bytes for m in self._mems_by_id.values()
                            if m.ctx == context.handle and not m.imported)
            return context.own_dma_bytes() + made_here

    # ------------------------------------------------------------------ inference
    def inputs_set(self, ctx: int, inputs: Sequence[abi.rknn_input]) -> int:
        """rknn_inputs_set: converts each input (UINT8/INT8/FLOAT32/FLOAT16, NHWC
        or NCHW) into the native layout: normalise with the model's mean/std,
        quantize with the native zp/scale, lay out with strides.  pass_through
        copies bytes already in the native layout.  A buffer smaller than the
        input needs is RKNN_ERR_PARAM_INVALID, as on librknnrt 2.3.2; a larger
        one is read up to that size (ASSUMPTIONS A64)."""
        fn = "rknn_inputs_set"
        with self._using(ctx, fn) as context:
            model = self._shape_set(context, fn)
            if not 0 < len(inputs) <= len(model.inputs):
                raise _error(abi.RKNN_ERR_INPUT_INVALID, fn,
                             f"{len(inputs)} inputs given, {model.name} has {len(model.inputs)}")
            plans = [self._input_plan(context, tensor_input, fn) for tensor_input in inputs]
            for tensor_input, (spec, source_layout, binding) in zip(inputs, plans):
                mems = [binding.mem] if binding is not None else []
                with self._pinned(mems, fn):
                    if binding is not None:
                        target = binding.mem.data(spec.native.nbytes)
                    else:
                        target = context.staging(False, spec.index).array(spec.native.nbytes)
                    # a larger buffer is read up to the size the input needs (ASSUMPTIONS A64)
                    needed = spec.native.nbytes if source_layout is None else source_layout.nbytes
                    source = array_at(tensor_input.buf, needed)
                    if source_layout is None:  # pass_through
                        target[:] = source
                    else:
                        raw = source_layout.read(source)
                        spec.native.write(model.quantizers[spec.index](raw), target)
        return 0

    def _input_plan(self, context: Context, tensor_input: abi.rknn_input, fn: str
                    ) -> Tuple[TensorSpec, Optional[Layout], Optional[Binding]]:
        """(spec, layout of the caller's bytes or None for pass_through, zero-copy binding)."""
        model = context.current
        index = tensor_input.index
        if index >= len(model.inputs):
            raise _error(abi.RKNN_ERR_INPUT_INVALID, fn,
                         f"input index {index} is out of range, {model.name} has {len(model.inputs)}")
        spec = model.inputs[index]
        if not tensor_input.buf:
            raise _error(abi.RKNN_ERR_INPUT_INVALID, fn, f"input {index}: buf is NULL")
        binding = context.input_bindings.get(index)
        if binding is not None:
            self._check_binding_shape(binding, spec, "input", fn)
        if binding is None and context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE):
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"input {index}: with RKNN_FLAG_MEM_ALLOC_OUTSIDE the runtime has no input buffer "
                         "of its own: bind a mem with rknn_set_io_mem first (the native attr: then "
                         "rknn_inputs_set writes into it), or write into your bound mem (ASSUMPTIONS A51)")
        if binding is not None and not binding.zero_copy:
            raise _error(abi.RKNN_ERR_INPUT_INVALID, fn,
                         f"input {index} is bound (set_io_mem) to a mem of "
                         f"{_tensor_kind(binding.layout.rknn_type, binding.layout.fmt, len(spec.logical))}: "
                         "write your data into that mem; the simulator "
                         "does not model rknn_inputs_set into a converting binding")
        if tensor_input.pass_through:
            expected, layout = spec.native.nbytes, None
            what = "pass_through: the native attr's size_with_stride"
        else:
            if tensor_input.type not in _INPUT_TYPES:
                raise _error(abi.RKNN_ERR_INPUT_INVALID, fn,
                             f"input {index}: type {_type_name(tensor_input.type)} is not modeled; use "
                             "UINT8, INT8, FLOAT32 or FLOAT16")
            fmt = tensor_input.fmt
            if len(spec.logical) == 4 and fmt not in (abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_NCHW):
                raise _error(abi.RKNN_ERR_INPUT_INVALID, fn,
                             f"input {index}: fmt {_fmt_name(fmt)}; pass NHWC or NCHW (or the native "
                             "layout with pass_through=1)")
            layout = spec.layout(fmt if len(spec.logical) == 4 else abi.RKNN_TENSOR_UNDEFINED,
                                 tensor_input.type)
            expected = layout.nbytes
            what = f"n_elems {layout.n_elems:,} x {layout.dtype.itemsize} B, {_type_name(tensor_input.type)}"
        if tensor_input.size < expected:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, _short_input_detail(index, tensor_input, expected, what))
        return spec, layout, binding

    def run(self, ctx: int, extend: Optional[abi.rknn_run_extend] = None) -> int:
        """rknn_run: reads the native inputs (staging buffer or bound mem),
        computes the outputs, writes them native (staging or bound mem,
        converting for bound mems in another layout) and blocks for the
        modeled NPU time (longer if computing the values takes longer)."""
        fn = "rknn_run"
        with self._using(ctx, fn) as context:
            called_at = time.perf_counter()
            model = self._shape_set(context, fn)
            if not context.weights.present:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "the context has no weight memory: with RKNN_FLAG_MEM_ALLOC_OUTSIDE call "
                             "rknn_set_weight_mem (and rknn_set_internal_mem) before rknn_run, and do "
                             "not destroy that mem (or the zero-copy model buffer) while the context lives")
            if not context.internal_present and model.report.total_internal_size:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "the context has no internal memory: with RKNN_FLAG_MEM_ALLOC_OUTSIDE or "
                             "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE call rknn_set_internal_mem before rknn_run "
                             "(a mem of at least total_internal_size = "
                             f"{context.model.report.total_internal_size:,} B)")
            with self._lock:
                in_bindings = dict(context.input_bindings)
                out_bindings = dict(context.output_bindings)
                internal_mem = context.internal_mem if model.report.total_internal_size else None
                weight_mem = context.weights.mem if context.weights.written is not None else None
            if context.model.dynamic:  # bindings made for another shape do not serve this one
                for specs, bindings, what in ((model.inputs, in_bindings, "input"),
                                              (model.outputs, out_bindings, "output")):
                    for spec in specs:
                        if spec.index in bindings:
                            self._check_binding_shape(bindings[spec.index], spec, what, fn)
            if context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE):
                unbound = _unbound(model, in_bindings, out_bindings)
                if unbound:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 "with RKNN_FLAG_MEM_ALLOC_OUTSIDE the runtime allocates no input or output "
                                 f"buffers: bind {', '.join(unbound)} with rknn_set_io_mem before rknn_run "
                                 "(ASSUMPTIONS A51)")
            mems = [b.mem for b in list(in_bindings.values()) + list(out_bindings.values())]
            mems += [mem for mem in (internal_mem, weight_mem) if mem is not None]
            sram_bytes = context.sram_bytes

            def seconds_on(cores: Tuple[int, ...]) -> float:
                return model.run_seconds(cores, sram_bytes)

            with self._pinned(mems, fn), self.npu.occupy(context.core_mask, seconds_on, called_at) as slot:
                weight_check = (context.weights.written.check(weight_mem.data(context.weights.written.nbytes))
                                if weight_mem is not None else None)
                native_inputs = [self._native_input(context, model, spec, in_bindings.get(spec.index))
                                 for spec in model.inputs]
                state = None
                if internal_mem is not None:  # a caller's buffer, maybe shared: ASSUMPTIONS A28
                    plan = internal_mem.data(model.report.total_internal_size)
                    state = InternalState.enter(plan, model.internal_inputs, native_inputs)
                results = model.values.compute(native_inputs)
                zeros = model.values.zero_padding
                for spec, native in zip(model.outputs, results):
                    self._store_output(context, spec, native, out_bindings.get(spec.index), zeros)
                if state is not None:  # the outputs come from what the plan holds at the end
                    wait_until(slot.start + slot.seconds)
                    results, corrupted = state.leave(results, model.values.compute)
                    for spec, native in zip(model.outputs, results if corrupted else ()):
                        self._store_output(context, spec, native, out_bindings.get(spec.index), zeros)
                if weight_check is not None and weight_check.damaged():
                    # the NPU read weights something else had written over: ASSUMPTIONS A58
                    damaged = weight_check.outputs([spec.native.nbytes for spec in model.outputs])
                    for spec, native in zip(model.outputs, damaged):
                        self._store_output(context, spec, native, out_bindings.get(spec.index), False)
            context.runs += 1
            context.last_run_model = model
            context.last_run_us = round(slot.seconds * 1e6)
            context.last_run_cores = slot.cores
            if extend is not None:  # an output field (rknn_api.h): the frame this run made
                extend.frame_id = context.runs
        return 0

    def _native_input(self, context: Context, model: SimModel, spec: TensorSpec,
                      binding: Optional[Binding]) -> np.ndarray:
        """The native bytes the NPU reads for one input."""
        nbytes = spec.native.nbytes
        if binding is not None and binding.zero_copy:
            return _npu_bytes(binding, nbytes)
        staging = context.staging(False, spec.index).array(nbytes)
        if binding is not None:  # the NPU's input stage converts the bound mem's layout/type
            raw = binding.layout.read(_npu_bytes(binding, binding.layout.nbytes))
            if binding.layout.rknn_type == abi.RKNN_TENSOR_INT8:  # already quantized: layout only
                spec.native.write(raw, staging)
            else:
                spec.native.write(model.quantizers[spec.index](raw), staging)
        return staging

    def _store_output(self, context: Context, spec: TensorSpec, native: np.ndarray,
                      binding: Optional[Binding], zero_padding: bool) -> None:
        """Write one output's native bytes where the NPU puts them.  ``zero_padding``:
        ``native`` leaves out (or holds zeros in) the whole NC1HWC2 padding blocks at the
        end, so a target already holding those zeros gets only the blocks before them
        (a copy per run saved); another target gets the zeros too."""
        data = spec.native.data.nbytes
        if binding is not None and binding.zero_copy:
            zero_to = max(native.size, data if binding.clean_padding and zero_padding else spec.native.nbytes)
            binding.clean_padding = zero_padding
            if binding.device is not None:  # the CPU's view may keep its old bytes (ASSUMPTIONS A60)
                binding.device.npu_write(native, zero_to, binding.mem.data(zero_to))
            else:
                _put(binding.mem.data(zero_to), native)
            return
        clean = spec.index in context.clean_padding
        zero_to = max(native.size, data if clean and zero_padding else spec.native.nbytes)
        _put(context.staging(True, spec.index).array(zero_to), native)
        (context.clean_padding.add if zero_padding else context.clean_padding.discard)(spec.index)
        if binding is not None:  # converted after the run, on the CPU
            _write_output(spec, native, binding.layout, binding.mem.data(binding.layout.nbytes))

    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output],
                    extend: Optional[abi.rknn_output_extend] = None) -> int:
        """rknn_outputs_get: each output in the plain attr's layout (NCHW for
        4-D), float32 dequantized (want_float=1) or int8.  is_prealloc=0:
        mallocs exactly the bytes needed and sets buf/size (release them with
        outputs_release); is_prealloc=1: writes into the caller's buf.

        Allowed on an output bound with set_io_mem too (it copies from the
        bound mem).  A widely copied recipe binds the outputs with
        set_io_mem and still calls outputs_get on them: that copies every
        output twice; read the bound mem instead."""
        fn = "rknn_outputs_get"
        with self._using(ctx, fn) as context:
            model = context.last_run_model or context.model  # the outputs of the last run's shape
            if not context.runs:
                raise _error(abi.RKNN_ERR_OUTPUT_INVALID, fn, "no rknn_run yet: there are no outputs to get")
            if not 0 < len(outputs) <= len(model.outputs):
                raise _error(abi.RKNN_ERR_OUTPUT_INVALID, fn,
                             f"{len(outputs)} outputs asked for, {model.name} has {len(model.outputs)}")
            plans = [self._output_plan(model, output, fn) for output in outputs]
            with self._lock:
                bindings = dict(context.output_bindings)
            for output, (spec, layout) in zip(outputs, plans):
                binding = bindings.get(spec.index)
                zero_copy = binding is not None and binding.zero_copy
                with self._pinned([binding.mem] if zero_copy else [], fn):
                    source = (binding.mem.data(spec.native.nbytes) if zero_copy
                              else context.staging(True, spec.index).array(spec.native.nbytes))
                    if output.is_prealloc:
                        target = array_at(output.buf, layout.nbytes)
                    else:
                        try:
                            address = heap_alloc(layout.nbytes)
                        except MemoryError as exc:
                            raise _error(abi.RKNN_ERR_MALLOC_FAIL, fn, str(exc)) from None
                        context.heap_outputs[address] = layout.nbytes
                        output.buf, output.size = address, layout.nbytes
                        target = array_at(address, layout.nbytes)
                    _write_output(spec, source, layout, target)
            if extend is not None:
                extend.frame_id = context.runs
        return 0

    @staticmethod
    def _output_plan(model: SimModel, output: abi.rknn_output, fn: str) -> Tuple[TensorSpec, Layout]:
        """(spec, layout the caller gets), checking index and preallocated size."""
        if output.index >= len(model.outputs):
            raise _error(abi.RKNN_ERR_OUTPUT_INVALID, fn,
                         f"output index {output.index} is out of range, {model.name} has {len(model.outputs)}")
        spec = model.outputs[output.index]
        layout = spec.plain_layout(abi.RKNN_TENSOR_FLOAT32 if output.want_float else abi.RKNN_TENSOR_INT8)
        if output.is_prealloc:
            if not output.buf:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"output {output.index}: is_prealloc=1 with buf NULL")
            if output.size < layout.nbytes:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"output {output.index}: is_prealloc=1 buffer of {output.size:,} B given, "
                             f"{layout.nbytes:,} B needed ({layout.n_elems:,} x "
                             f"{'float32' if output.want_float else 'int8'})")
        return spec, layout

    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        """rknn_outputs_release: frees the buffers outputs_get allocated
        (is_prealloc=0) and sets their buf to NULL; is_prealloc=1 outputs are
        the caller's and are left alone."""
        fn = "rknn_outputs_release"
        with self._using(ctx, fn) as context:
            to_free: List[abi.rknn_output] = []
            for output in outputs:
                if output.is_prealloc:
                    continue
                if not output.buf or output.buf not in context.heap_outputs or \
                        any(o.buf == output.buf for o in to_free):
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 f"output {output.index}: buf "
                                 f"{'NULL' if not output.buf else hex(output.buf)} was not allocated by "
                                 "rknn_outputs_get of this context (already released?)")
                to_free.append(output)
            for output in to_free:
                del context.heap_outputs[output.buf]
                heap_free(output.buf)
                output.buf = None
        return 0

    def set_core_mask(self, ctx: int, core_mask: int) -> int:
        """rknn_set_core_mask: AUTO takes the least busy core at each run;
        multi-core masks occupy all their cores and split only some ops over
        them (ASSUMPTIONS A17, A44, A45)."""
        fn = "rknn_set_core_mask"
        with self._using(ctx, fn, exclusive=False) as context:
            if not self.npu.mask_valid(core_mask):
                valid = [name for value, name in abi.CORE_MASK_NAMES.items() if self.npu.mask_valid(value)]
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"core mask {abi.CORE_MASK_NAMES.get(core_mask, hex(core_mask))}: the "
                             f"{self.soc} has {self.npu.n_cores} NPU core(s); valid masks: {', '.join(valid)}")
            context.core_mask = core_mask
        return 0

    def set_batch_core_num(self, ctx: int, core_num: int) -> int:
        """rknn_set_batch_core_num: how many cores split a multi-batch model's batch.  The
        course models have batch 1, so it changes nothing here; 1 to the SoC's core count is
        accepted, anything else refused (ASSUMPTIONS A73)."""
        fn = "rknn_set_batch_core_num"
        with self._using(ctx, fn, exclusive=False):
            if not 1 <= core_num <= self.npu.n_cores:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"core_num {core_num}: the {self.soc} has {self.npu.n_cores} NPU core(s)")
        return 0

    def wait(self, ctx: int, extend: Optional[abi.rknn_run_extend] = None) -> int:
        """rknn_wait: refused.  It waits for a non-blocking run, and the API reference
        (V2.3.2, Table 4-1) says non-blocking runs are not available: every rknn_run
        here blocks until the NPU is done, so there is never a run to wait for
        (ASSUMPTIONS A73: the code a board returns is not documented)."""
        fn = "rknn_wait"
        with self._using(ctx, fn, exclusive=False):
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         "non-blocking runs are not available (API reference V2.3.2, Table 4-1): "
                         "rknn_run returns when the NPU is done, so there is nothing to wait for")

    def set_input_shapes(self, ctx: int, attrs: Sequence[abi.rknn_tensor_attr]) -> int:
        """rknn_set_input_shapes: choose one of the input shapes a dynamic-shape model was
        built with (rknn-toolkit2's dynamic_input).  One attr per input with index, name,
        n_dims, dims and fmt filled (API reference V2.3.2 p.37); the dims are read in that
        fmt (NHWC or NCHW).  Buffers stay as rknn_init sized them, for the largest shape;
        io mems bound for another shape must be bound again (ASSUMPTIONS A56).  A model
        built with one shape refuses the call (ASSUMPTIONS A52)."""
        fn = "rknn_set_input_shapes"
        with self._using(ctx, fn) as context:
            model = context.model
            if not model.dynamic:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{model.name} was built with one input shape (no dynamic_input): it has "
                             "no shapes to choose from; query its INPUT_ATTR instead (ASSUMPTIONS A52)")
            if len(attrs) != len(model.inputs):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{len(attrs)} attrs given; n_inputs must be {len(model.inputs)}, one attr "
                             "per input of the model")
            wanted: List[Optional[List[int]]] = [None] * len(model.inputs)
            for attr in attrs:
                spec = model.inputs[attr.index] if attr.index < len(model.inputs) else None
                name = attr.name.decode("utf-8", "replace")
                if spec is None or name != spec.name:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 f"attr index {attr.index}, name {name!r}: the inputs are "
                                 f"{[(s.index, s.name) for s in model.inputs]}; fill index and name "
                                 "from RKNN_QUERY_INPUT_ATTR")
                wanted[attr.index] = nchw(attr)
            for k, shape in enumerate(model.shapes):
                if shape.input_dims == wanted:
                    context.shape_index = k
                    return 0
            allowed = "; ".join(
                " + ".join(dims_text(dims, attrs[0].fmt) for dims in shape.input_dims) for shape in model.shapes)
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"{dims_text(wanted[0], attrs[0].fmt) if wanted[0] else '?'} is not one of the "
                         f"shapes {model.name} was built with: {allowed} (RKNN_QUERY_INPUT_DYNAMIC_RANGE "
                         "lists them)")

    def _shape_set(self, context: Context, fn: str) -> SimModel:
        """The model as it runs now; a dynamic-shape model needs rknn_set_input_shapes first."""
        if context.model.dynamic and context.shape_index is None:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"{context.model.name} is a dynamic-shape model: call rknn_set_input_shapes "
                         "with one of its shapes (RKNN_QUERY_INPUT_DYNAMIC_RANGE) before the first "
                         "rknn_inputs_set and rknn_run")
        return context.current

    @staticmethod
    def _check_binding_shape(binding: Binding, spec: TensorSpec, what: str, fn: str) -> None:
        """A mem bound for one shape of a dynamic model does not serve another (A56)."""
        if binding.logical and binding.logical != tuple(spec.logical):
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"{what} {spec.index} ({spec.name!r}) is bound with an attr of shape "
                         f"{list(binding.logical)}, the current shape is {list(spec.logical)}: after "
                         "rknn_set_input_shapes, query the RKNN_QUERY_CURRENT_* attr and call "
                         "rknn_set_io_mem again with the CURRENT_* attr (ASSUMPTIONS A56)")

    # ------------------------------------------------------------------ memory
    def create_mem(self, ctx: int, size: int) -> MemPtr:
        """rknn_create_mem: a new DMA buffer (memfd + mmap, pages backed now)."""
        return self._create_mem("rknn_create_mem", ctx, size, 0)

    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> MemPtr:
        """rknn_create_mem2: the mem remembers CACHEABLE/NON_CACHEABLE
        (TensorMem.cacheable; memory stays coherent here, ASSUMPTIONS A11, unless
        the context was made with a DISABLE_FLUSH flag, A60; the CPU cost of
        uncached memory is modeled in rknnlab.profile.cpu);
        TRY_ALLOC_SRAM puts as much of the mem as the free NPU SRAM holds in it
        (its first pages), the rest in DDR (ASSUMPTIONS A29);
        RKNN_MEM_FLAG_ALLOC_NO_CONTEXT allows ctx 0 (then no context counts it)."""
        return self._create_mem("rknn_create_mem2", ctx, size, alloc_flags)

    def _create_mem(self, fn: str, ctx: int, size: int, alloc_flags: int) -> MemPtr:
        unknown = alloc_flags & ~_MEM_ALLOC_FLAGS
        both = abi.RKNN_FLAG_MEMORY_CACHEABLE | abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
        if unknown or (alloc_flags & both) == both:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                         f"alloc_flags 0x{alloc_flags:x}: " + (f"unknown bits 0x{unknown:x}" if unknown else
                                                              "CACHEABLE and NON_CACHEABLE together"))
        if size <= 0:
            raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"size {size}: a mem needs at least one byte")
        if alloc_flags & abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT:
            if ctx:
                self._context(ctx, fn)
            return self._new_mem(fn, size, None, alloc_flags)
        with self._using(ctx, fn, exclusive=False) as context:
            return self._new_mem(fn, size, context, alloc_flags)

    def _new_mem(self, fn: str, size: int, context: Optional[Context], alloc_flags: int) -> MemPtr:
        try:
            buffer = DmaBuffer.allocate(size, "rknn-mem")
        except OSError as exc:
            raise _error(abi.RKNN_ERR_MALLOC_FAIL, fn, f"size {size}: {exc}") from None
        # rknn_create_mem and the DEFAULT flags allocate cacheable memory (facts sheet, Ch2)
        cacheable = not alloc_flags & abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
        try:
            mem = TensorMem(buffer, size, 0, context.handle if context is not None else 0, imported=False,
                            alloc_flags=alloc_flags & ~abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT,
                            cacheable=cacheable)
        except OSError as exc:  # no IOVA range left for it (A30)
            buffer.close()
            raise _error(abi.RKNN_ERR_MALLOC_FAIL, fn, f"size {size}: {exc}") from None
        if alloc_flags & abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM:  # the rest stays in DDR (rknn_api.h)
            allocator = sram_for(self.soc)
            block = allocator.take(size)
            if block is not None:
                mem.sram = block
                mem.sram_release = lambda: allocator.give_back(block)
        return self._register_mem(mem, context, fn)

    def _cacheable_of_fd(self, fd: int) -> Optional[bool]:
        """Whether the pages of ``fd`` are cacheable, if one of this runtime's mems made them."""
        with self._lock:
            for mem in self._mems_by_id.values():
                if mem.buffer.fd == fd and not mem.imported:
                    return mem.cacheable
        return None

    def create_mem_from_fd(self, ctx: int, fd: int, virt: int, size: int, offset: int) -> MemPtr:
        """rknn_create_mem_from_fd: maps bytes [0, size) of ``fd`` again (the same
        pages, a new virt_addr: ASSUMPTIONS A8); the tensor starts ``offset``
        bytes in.  ``virt`` is not used."""
        fn = "rknn_create_mem_from_fd"
        with self._using(ctx, fn, exclusive=False) as context:
            if size <= 0 or not 0 <= offset < size:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"size {size:,}, offset {offset:,}: need size > 0 and 0 <= offset < size; "
                             f"{_FD_SIZE_RULE}")
            try:
                buffer = DmaBuffer.map_fd(fd, size)
            except ValueError as exc:  # size is past the end of the fd's buffer
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"{exc}; {_FD_SIZE_RULE}") from None
            except OSError as exc:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"fd {fd}: {exc}") from None
            mem = TensorMem(buffer, size, offset, ctx, imported=True, cacheable=self._cacheable_of_fd(fd))
            return self._register_mem(mem, context, fn)

    def create_mem_from_phys(self, ctx: int, phys: int, virt: int, size: int) -> MemPtr:
        """rknn_create_mem_from_phys: a mem of the ``size`` bytes at NPU address
        ``phys``.  The simulator's phys addresses are made up (ASSUMPTIONS A30),
        so ``phys`` must lie, with all its ``size`` bytes, inside the phys range of
        a live mem of this runtime; the new mem maps the same pages again (a new
        virt_addr; ``virt`` is not used) and has fd -1 (ASSUMPTIONS A50)."""
        fn = "rknn_create_mem_from_phys"
        with self._using(ctx, fn, exclusive=False) as context:
            if size <= 0:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"size {size}: a mem needs at least one byte")
            with self._lock:
                found = [(mem, mem.phys_offset(phys, size)) for mem in self._mems_by_id.values()]
                found = [(mem, start) for mem, start in found if start is not None]
                if not found:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                                 f"phys 0x{phys:x} + size {size}: no NPU memory of this runtime holds all "
                                 "these addresses. The simulator's phys addresses are made up (ASSUMPTIONS "
                                 "A30): pass mem->phys_addr (plus an offset inside it) of a mem you made "
                                 "with rknn_create_mem, and a size that stays inside that mem")
                owner, start = found[0]
                fd, file_start, cacheable = owner.buffer.fd, owner.buffer.file_offset + start, owner.cacheable
            try:
                buffer = DmaBuffer.map_fd_range(fd, file_start, size)
            except (OSError, ValueError) as exc:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"phys 0x{phys:x}: {exc}") from None
            mem = TensorMem(buffer, size, 0, ctx, imported=True, cacheable=cacheable, phys_addr=phys)
            return self._register_mem(mem, context, fn)

    def destroy_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_destroy_mem: unmaps the buffer (closing the fd it made), frees
        the struct and unbinds the mem wherever it was bound."""
        fn = "rknn_destroy_mem"
        if not ctx:
            record = self._mem(mem, fn)
            if record.ctx:
                raise _error(abi.RKNN_ERR_CTX_INVALID, fn,
                             f"ctx is 0 but the mem belongs to context 0x{record.ctx:x}")
            self._kill_mem(record)
            return 0
        with self._using(ctx, fn, info_only_ok=True, exclusive=False):
            self._kill_mem(self._mem(mem, fn))
        return 0

    def set_io_mem(self, ctx: int, mem: MemPtr, attr: abi.rknn_tensor_attr) -> int:
        """rknn_set_io_mem: binds ``mem`` to the tensor named attr.name (attr.index
        decides between an input and an output of the same name).  The mem
        holds the tensor in attr's fmt/type: the native attr means zero-copy,
        anything else is converted by the runtime around the run.  Needs
        mem.size - mem.offset >= the bytes of that layout."""
        fn = "rknn_set_io_mem"
        with self._using(ctx, fn, exclusive=False) as context:
            record = self._own_mem(mem, context, fn)
            model = context.current
            name = attr.name.decode("utf-8", "replace")
            found = [(False, s) for s in model.inputs if s.name == name] + \
                    [(True, s) for s in model.outputs if s.name == name]
            if len(found) > 1:
                found = [(o, s) for o, s in found if s.index == attr.index]
            if len(found) != 1:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"no tensor named {name!r} (index {attr.index}); inputs: "
                             f"{[s.name for s in model.inputs]}, outputs: {[s.name for s in model.outputs]}; "
                             "pass an attr from rknn_query")
            is_output, spec = found[0]
            allowed = _OUTPUT_TYPES if is_output else _INPUT_TYPES
            if attr.type not in allowed:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{name}: type {_type_name(attr.type)} is not modeled for an "
                             f"{'output' if is_output else 'input'} mem; use "
                             + ", ".join(_type_name(t) for t in allowed))
            try:
                layout = spec.layout(attr.fmt, attr.type, attr)
            except LayoutError as exc:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, f"{name}: {exc}") from None
            if record.available < layout.nbytes:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"{name}: the mem has {_available_text(record)}, the tensor needs "
                             f"{layout.nbytes:,} B ({_tensor_kind(attr.type, attr.fmt, len(spec.logical))}). "
                             + _bound_size_rule(layout, layout == spec.native, is_output)
                             # refused here; a board may accept it and fail at the run (A62)
                             + ("" if is_output else ". The simulator refuses it at the bind; a board "
                                "may accept it and fail at rknn_run (ASSUMPTIONS A62)"))
            zero_copy = layout == spec.native
            flush_flag = (abi.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE if is_output
                          else abi.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE)
            # the NPU reads every bound input in place, and writes an output bound with the native
            # attr in place (another layout is converted into the mem by the CPU, which sees it)
            stale = cache.goes_stale(context.flags, flush_flag, record) and (zero_copy or not is_output)
            device = None
            with self._pinned([record], fn):
                if not stale:  # a coherent binding: the NPU and the CPU see the same bytes
                    record.device = None
                else:
                    device = cache.device_side(record)
                    if not is_output:  # binding cleans the CPU's input bytes into memory (A60)
                        device.to_device(record.data(record.available))
            binding = Binding(record, layout, zero_copy=zero_copy, logical=tuple(spec.logical), device=device)
            with self._lock:
                self._check_alive(context, fn)
                if record.dead:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, "the mem was destroyed meanwhile")
                (context.output_bindings if is_output else context.input_bindings)[spec.index] = binding
        return 0

    def set_weight_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_set_weight_mem (RKNN_FLAG_MEM_ALLOC_OUTSIDE): the runtime copies
        the weights from the model into the mem (real writes)."""
        fn = "rknn_set_weight_mem"
        with self._using(ctx, fn) as context:
            record = self._own_mem(mem, context, fn)
            if not context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "the context was not made with RKNN_FLAG_MEM_ALLOC_OUTSIDE: the runtime "
                             "owns its weight memory")
            if context.weights.owner != context.handle:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"the weights belong to context 0x{context.weights.owner:x} (shared by "
                             "RKNN_FLAG_SHARE_WEIGHT_MEM or rknn_dup_context): set them there")
            needed = context.model.report.total_weight_size
            if record.available < needed:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"the mem has {_available_text(record)}, total_weight_size is "
                             f"{needed:,} B")
            source = context.model_bytes
            if source.mem is not None and source.mem.dead:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "the zero-copy model buffer was destroyed: the weights cannot be loaded")
            with self._pinned([record] + ([source.mem] if source.mem is not None else []), fn):
                weights = record.data(needed)
                _copy_weights(array_at(source.address, source.size), weights)
                written = WeightPrint(weights)  # checked around every run: ASSUMPTIONS A58
            with self._lock:
                context.weights.mem, context.weights.written = record, written
        return 0

    def set_internal_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_set_internal_mem (MEM_ALLOC_OUTSIDE / INTERNAL_ALLOC_OUTSIDE).
        One mem may serve several contexts that run one after another (the
        documented pattern: create_mem of the largest size, then
        create_mem_from_fd per context); the pages are really shared."""
        fn = "rknn_set_internal_mem"
        with self._using(ctx, fn, exclusive=False) as context:
            record = self._own_mem(mem, context, fn)
            if not (context.has(abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE) or context.has(abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)):
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             "the context was made without RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE (or "
                             "MEM_ALLOC_OUTSIDE): the runtime owns its internal memory")
            needed = context.model.report.total_internal_size
            if record.available < needed:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"the mem has {_available_text(record)}, total_internal_size is "
                             f"{needed:,} B: give this context a mem (or a view) of at least its own "
                             "total_internal_size (ASSUMPTIONS A57)")
            with self._lock:
                self._check_alive(context, fn)
                if record.dead:
                    raise _error(abi.RKNN_ERR_PARAM_INVALID, fn, "the mem was destroyed meanwhile")
                context.internal_mem = record
        return 0

    def mem_sync(self, ctx: int, mem: MemPtr, mode: int) -> int:
        """rknn_mem_sync: simulated memory is coherent (ASSUMPTIONS A11), so it only
        validates its arguments, except for a cacheable mem bound to a context made with
        a DISABLE_FLUSH flag: FROM_DEVICE is an invalidate (the CPU sees memory again,
        so also the next run's output), TO_DEVICE a clean (the NPU gets what the CPU
        wrote), BIDIRECTIONAL both (rknnlab.sim.cache, A60)."""
        fn = "rknn_mem_sync"
        with self._using(ctx, fn, exclusive=False):
            record = self._mem(mem, fn)
            if mode not in abi.MEM_SYNC_NAMES:
                raise _error(abi.RKNN_ERR_PARAM_INVALID, fn,
                             f"mode {mode}: use RKNN_MEMORY_SYNC_TO_DEVICE (1), FROM_DEVICE (2) or BIDIRECTIONAL (3)")
            with self._pinned([record], fn):
                cache.sync(record, mode)
        return 0


def _model_for_soc(name: str, soc: str) -> str:
    """What to load instead for ``soc``: its .rknn, or (a model shipped with only
    the compiler report for that SoC) where its plan and modeled time are."""
    try:
        if models.model_path(name, soc).exists():
            return f"load data/models/{name}/{soc}.rknn"
    except models.ReportError:
        return f"{name} has no build for {soc}"
    return (f"data/models/{name} holds only the compiler report for {soc}, no .rknn (read it with "
            f"rknnlab.models.load_report('{name}', '{soc}'); its modeled run time: "
            f"rknnlab.sim.modeled_run_ms('{name}', '{soc}'))")


def _log_level() -> int:
    """RKNN_LOG_LEVEL from the environment (0 when unset or not a number)."""
    try:
        return int(os.environ.get("RKNN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def _bound_size_rule(layout: Layout, native: bool, is_output: bool) -> str:
    """How to size a mem for the attr it is bound with (the course's rule for bound
    buffers), worded for the attr the caller passed to rknn_set_io_mem."""
    rule = "Size a buffer you bind from the attr you bind it with: "
    if native:
        return rule + f"use the size_with_stride of the attr you bind ({layout.nbytes:,} B, the native layout)"
    if layout.dtype.kind == "f":
        plain = "output" if is_output else "input"
        return (rule + f"for a plain {plain} attr you set to {_type_name(layout.rknn_type)}, use n_elems x "
                f"{layout.dtype.itemsize} bytes ({layout.n_elems:,} x {layout.dtype.itemsize} = {layout.nbytes:,} B)")
    return rule + f"use size_with_stride of that attr ({layout.nbytes:,} B; its rows may be padded)"


def _unbound(model: SimModel, in_bindings: Dict[int, Binding], out_bindings: Dict[int, Binding]) -> List[str]:
    """The io tensors without a mem bound, as 'input 0 ('name')' phrases."""
    return ([f"input {s.index} ({s.name!r})" for s in model.inputs if s.index not in in_bindings]
            + [f"output {s.index} ({s.name!r})" for s in model.outputs if s.index not in out_bindings])


def _copy_weights(source: np.ndarray, target: np.ndarray) -> None:
    """Fill a weight buffer from the model (uint8): the simulator does not know where
    in the file the weights sit, so it copies the model's first bytes (what counts
    is that the pages are written, as when the runtime loads the weights)."""
    n = min(source.size, target.size)
    target[:n] = source[:n]
    target[n:] = 0


def _view_at(address: int, size: int) -> memoryview:
    """The ``size`` bytes at ``address``, seen in place (no copy)."""
    return memoryview(array_at(address, size))


class _ModelSource:
    """The model bytes rknn_init was given, seen where they are: ``view`` (the
    model, after real_model_offset/size), ``address`` (0 when not known), ``mem``
    (the create_mem2 mem holding them, for ZERO_COPY).  A file is read straight
    into a malloc'd block (``heap``), which becomes the runtime's copy; a block
    nobody took is freed by :meth:`drop_unused`."""

    def __init__(self, view: memoryview, address: int, keep: object = None, heap: int = 0) -> None:
        self.view, self.address, self.mem = view, address, None
        self._keep = keep        # the object whose memory ``view`` shows
        self._heap = heap        # a malloc'd block holding the whole file, or 0
        self._heap_start = 0

    @classmethod
    def from_file(cls, path: "str | os.PathLike", fn: str) -> "_ModelSource":
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                block = heap_alloc(size)
                try:
                    view = _view_at(block, size) if size else memoryview(b"")
                    got = 0
                    while got < size:
                        n = f.readinto(view[got:])
                        if not n:
                            break
                        got += n
                except BaseException:
                    heap_free(block)
                    raise
        except OSError as exc:
            raise _error(abi.RKNN_ERR_MODEL_INVALID, fn, f"cannot read {os.fspath(path)!r}: {exc}") from None
        source = cls(view[:got], block, heap=block)
        return source

    def narrow(self, start: int, end: int) -> None:
        """Keep bytes [start, end) only (rknn_init_extend real_model_offset/size)."""
        self.view = self.view[start:end]
        self.address = self.address + start if self.address else 0
        self._heap_start += start

    def take_heap_copy(self) -> int:
        """The runtime's own copy of the model: the block the file was read into,
        or a new malloc'd copy of a caller's buffer."""
        size = len(self.view)
        if self._heap and self._heap_start == 0:
            block, self._heap = self._heap, 0
            return block
        block = heap_alloc(size)
        if size:  # the caller's bytes, or the part of the file's block real_model_offset names
            ctypes.memmove(block, self.address or (self._heap + self._heap_start), size)
        return block

    def drop_unused(self) -> None:
        """Free the file's block if no context took it; let go of the caller's object."""
        self.view = memoryview(b"")
        if self._heap:
            heap_free(self._heap)
            self._heap = 0
        self._keep = None


def _put(target: np.ndarray, native: np.ndarray) -> None:
    """``native`` at the start of ``target``, zeros after it."""
    target[:native.size] = native
    target[native.size:] = 0


def _npu_bytes(binding: Binding, nbytes: int) -> np.ndarray:
    """The first ``nbytes`` of a bound input mem as the NPU reads them: its device
    side when the CPU's writes may not have reached memory (ASSUMPTIONS A60)."""
    return binding.device.npu_read(nbytes) if binding.device is not None else binding.mem.data(nbytes)


def _write_output(spec: TensorSpec, native: np.ndarray, layout: Layout, target: np.ndarray) -> None:
    """Native int8 output bytes -> ``target`` in ``layout`` (int8, or float dequantized)."""
    q = spec.native.read(native)
    values = q if layout.rknn_type == abi.RKNN_TENSOR_INT8 else dequantize(q, spec.zp, spec.scale)
    layout.write(values, target)
