"""The one runtime interface that both backends implement.

Every method stands for one C function of librknnrt.so, named without the
``rknn_`` prefix and taking the same arguments in the same order, except that
the C out-parameters become return values and array lengths are taken from the
Python sequence.  Structs are the ctypes classes of :mod:`rknnlab.rknn.abi`, so
notebook code reads like the C it teaches::

    C                                             Python
    rknn_init(&ctx, path, 0, 0, NULL)             ctx = rt.init(path)
    rknn_query(ctx, RKNN_QUERY_MEM_SIZE, &m, sz)  m = rt.query(ctx, RKNN_QUERY_MEM_SIZE)
    rknn_outputs_get(ctx, n, outs, NULL)          rt.outputs_get(ctx, outs)
    rknn_create_mem(ctx, size)                    mem = rt.create_mem(ctx, size)   # POINTER(rknn_tensor_mem)

Return codes: a negative C return raises the matching
:class:`rknnlab.rknn.errors.RknnError` subclass; a non-negative one is returned.
A NULL ``rknn_tensor_mem*`` from the create_mem family raises
:class:`~rknnlab.rknn.errors.RknnMallocError` (the C API has no error code
there, so we name the most likely cause in the message).
"""
from __future__ import annotations

import ctypes
import os
from abc import ABC, abstractmethod
from typing import Optional, Sequence, Union

from . import abi

ModelSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]
MemPtr = "ctypes._Pointer[abi.rknn_tensor_mem]"


class Runtime(ABC):
    """The RKNN C API of one backend (``native`` or ``sim``).

    Contexts are plain ints (``rknn_context``).  One Runtime may hold many
    contexts; they are independent unless shared on purpose (dup_context,
    SHARE_WEIGHT_MEM, a shared internal mem).
    """

    #: "native" or "sim"
    backend: str = ""
    #: the SoC this runtime drives ("rk3588", ...): the board's, or the one simulated
    soc: str = ""

    @property
    def source(self) -> str:
        """What produced the numbers, for figure titles and tables:
        "simulated RK3588 — rknnlab sim" or the board's name and SoC."""
        from ..board import source_label
        return source_label(self.backend, self.soc)

    # -- context lifecycle -------------------------------------------------
    @abstractmethod
    def init(self, model: ModelSource, flag: int = 0,
             extend: Optional[abi.rknn_init_extend] = None, size: Optional[int] = None) -> int:
        """rknn_init.  ``model`` is a path (C: size == 0) or the model bytes
        (C: size == len(bytes)).  For RKNN_FLAG_MODEL_BUFFER_ZERO_COPY pass an
        ``int`` virtual address (the mem's virt_addr) together with ``size``.
        Returns the new context."""

    @abstractmethod
    def dup_context(self, ctx: int) -> int:
        """rknn_dup_context: a new context sharing ``ctx``'s weights."""

    @abstractmethod
    def destroy(self, ctx: int) -> int:
        """rknn_destroy: frees everything the runtime allocated for ``ctx``."""

    # -- information ----------------------------------------------------------
    @abstractmethod
    def query(self, ctx: int, cmd: int, info: Optional[ctypes.Structure] = None) -> ctypes.Structure:
        """rknn_query.  ``info`` defaults to a fresh struct of the type the
        command fills (see :data:`abi.QUERY_STRUCTS`); for the *_ATTR commands
        pass ``abi.rknn_tensor_attr(index=i)``.  Returns the filled struct."""

    # -- inference -----------------------------------------------------------
    @abstractmethod
    def inputs_set(self, ctx: int, inputs: Sequence[abi.rknn_input]) -> int:
        """rknn_inputs_set: copy (and convert unless pass_through) into the
        runtime's input buffers."""

    @abstractmethod
    def run(self, ctx: int, extend: Optional[abi.rknn_run_extend] = None) -> int:
        """rknn_run: blocks until the NPU has finished."""

    @abstractmethod
    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output],
                    extend: Optional[abi.rknn_output_extend] = None) -> int:
        """rknn_outputs_get: fills ``buf``/``size`` (is_prealloc=0: runtime
        allocates; is_prealloc=1: writes into the caller's ``buf``)."""

    @abstractmethod
    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        """rknn_outputs_release: frees what outputs_get allocated."""

    @abstractmethod
    def set_core_mask(self, ctx: int, core_mask: int) -> int:
        """rknn_set_core_mask."""

    @abstractmethod
    def set_input_shapes(self, ctx: int, attrs: Sequence[abi.rknn_tensor_attr]) -> int:
        """rknn_set_input_shapes (n_inputs = len(attrs)): choose one of the input
        shapes a dynamic-shape model was built with.  Fill index, name, n_dims,
        dims and fmt of one attr per input (API reference V2.3.2 p.37); call it
        before the first rknn_run and at every shape change, then query the
        RKNN_QUERY_CURRENT_* attrs."""

    # -- memory ----------------------------------------------------------------
    @abstractmethod
    def create_mem(self, ctx: int, size: int) -> MemPtr:
        """rknn_create_mem: an NPU-accessible (DMA) buffer with a CPU mapping."""

    @abstractmethod
    def create_mem2(self, ctx: int, size: int, alloc_flags: int) -> MemPtr:
        """rknn_create_mem2 (alloc_flags: RKNN_FLAG_MEMORY_*, plus
        RKNN_MEM_FLAG_ALLOC_NO_CONTEXT to allow ctx == 0)."""

    @abstractmethod
    def create_mem_from_fd(self, ctx: int, fd: int, virt: int, size: int, offset: int) -> MemPtr:
        """rknn_create_mem_from_fd: wrap an existing dma-buf fd (shares pages)."""

    @abstractmethod
    def create_mem_from_phys(self, ctx: int, phys: int, virt: int, size: int) -> MemPtr:
        """rknn_create_mem_from_phys: wrap ``size`` bytes at the physical (NPU)
        address ``phys``, mapped by the caller at ``virt``."""

    @abstractmethod
    def destroy_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_destroy_mem."""

    @abstractmethod
    def set_io_mem(self, ctx: int, mem: MemPtr, attr: abi.rknn_tensor_attr) -> int:
        """rknn_set_io_mem: bind ``mem`` to the input or output that ``attr``
        describes (pass the attr you queried for that tensor).  Size the mem
        from the attr you bind: its size_with_stride (native, or a plain input
        attr), or n_elems x 4 bytes for a plain output attr set to FLOAT32.  The
        mem must be this context's (or made with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)."""

    @abstractmethod
    def set_weight_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_set_weight_mem (with RKNN_FLAG_MEM_ALLOC_OUTSIDE)."""

    @abstractmethod
    def set_internal_mem(self, ctx: int, mem: MemPtr) -> int:
        """rknn_set_internal_mem (with *_ALLOC_OUTSIDE)."""

    @abstractmethod
    def mem_sync(self, ctx: int, mem: MemPtr, mode: int) -> int:
        """rknn_mem_sync (RKNN_MEMORY_SYNC_TO_DEVICE / FROM_DEVICE / BIDIRECTIONAL)."""

    def close(self) -> None:
        """Release backend resources (the library handle, simulator threads)."""
