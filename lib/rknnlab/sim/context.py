"""What the simulated runtime holds for one rknn_context."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..rknn import abi
from .cache import DeviceSide
from .layout import Layout
from .memory import DmaBuffer, heap_alloc, heap_free
from .mems import TensorMem, give_iova
from .model import SimModel
from .sram import SramAllocator, SramBlock
from .weightprint import WeightPrint


@dataclass(eq=False)
class ModelBytes:
    """The .rknn bytes the runtime keeps: its own malloc'd copy (``heap`` set),
    or the caller's create_mem2 buffer (RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
    ``mem`` set).  Shared by dup_context; ``refs`` counts the contexts."""
    address: int
    size: int
    heap: bool
    mem: Optional[TensorMem] = None
    refs: int = 1

    def release(self) -> None:
        self.refs -= 1
        if self.refs == 0 and self.heap:
            heap_free(self.address)


@dataclass(eq=False)
class Weights:
    """Where a context's weights are, shared by dup_context and SHARE_WEIGHT_MEM.

    ``buffer``: allocated by the runtime for context ``owner`` (whose DMA total
    counts it).  ``mem``: the caller's (set_weight_mem) or the model buffer
    itself (MODEL_BUFFER_ZERO_COPY).  Neither: MEM_ALLOC_OUTSIDE before
    set_weight_mem.
    """
    owner: int
    buffer: Optional[DmaBuffer] = None
    mem: Optional[TensorMem] = None
    refs: int = 1
    #: a sample of what set_weight_mem wrote into ``mem``, checked around every run (A58)
    written: Optional[WeightPrint] = None

    @property
    def present(self) -> bool:
        return self.buffer is not None or (self.mem is not None and not self.mem.dead)

    def release(self) -> None:
        self.refs -= 1
        if self.refs == 0 and self.buffer is not None:
            self.buffer.close()


@dataclass(eq=False)
class Binding:
    """A mem bound to an io tensor by set_io_mem, in the layout of the attr given.
    ``zero_copy``: that layout is the native one, so the NPU uses the mem as is;
    otherwise the runtime converts between the mem and its own buffer."""
    mem: TensorMem
    layout: Layout
    zero_copy: bool
    #: the tensor's logical (NCHW) shape when it was bound: a dynamic-shape model's
    #: binding holds only for that shape
    logical: Tuple[int, ...] = ()
    #: what the NPU uses instead of the bytes virt_addr shows: the mem's device side, for a
    #: cacheable mem bound to a DISABLE_FLUSH context (rknnlab.sim.cache; ASSUMPTIONS A60)
    device: Optional[DeviceSide] = None
    #: the mem's whole NC1HWC2 padding blocks hold zeros since this binding's last run
    #: wrote them: later runs write only the blocks holding channels (Layout.data)
    clean_padding: bool = False


@dataclass(eq=False)
class Context:
    """One live context: its model, its buffers, its bindings."""
    handle: int
    model: SimModel
    flags: int
    model_bytes: Optional[ModelBytes] = None
    weights: Optional[Weights] = None
    internal: Optional[DmaBuffer] = None         # allocated by the runtime
    internal_mem: Optional[TensorMem] = None     # set_internal_mem
    # RKNN_FLAG_ENABLE_SRAM: the first bytes of the runtime's internal buffer in NPU SRAM
    # (``internal`` then holds only the rest, in DDR), and the allocator they came from
    sram: Optional[SramBlock] = None
    sram_allocator: Optional[SramAllocator] = None
    # made-up NPU addresses for the SRAM log: the internal buffer, then each io tensor
    log_addresses: Optional[Dict[str, int]] = None
    # the runtime's own io buffers in native layout (None: not allocated yet)
    input_staging: List[Optional[DmaBuffer]] = field(default_factory=list)
    output_staging: List[Optional[DmaBuffer]] = field(default_factory=list)
    input_bindings: Dict[int, Binding] = field(default_factory=dict)
    output_bindings: Dict[int, Binding] = field(default_factory=dict)
    # outputs whose staging buffer has zeros in its whole padding blocks (as allocated)
    clean_padding: Set[int] = field(default_factory=set)
    core_mask: int = abi.RKNN_NPU_CORE_AUTO
    # a dynamic-shape model: the shape rknn_set_input_shapes chose (index into model.shapes)
    shape_index: Optional[int] = None
    # outputs_get buffers (is_prealloc = 0) not yet released: address -> bytes
    heap_outputs: Dict[int, int] = field(default_factory=dict)
    runs: int = 0
    # the model (the shape, for a dynamic-shape model) of the last run: its outputs and profile
    last_run_model: Optional[SimModel] = None
    last_run_us: int = 0
    last_run_cores: Tuple[int, ...] = ()
    # the last RKNN_QUERY_PERF_DETAIL text: malloc'd (address, bytes incl. NUL), or None
    perf_text: Optional[Tuple[int, int]] = None
    alive: bool = True
    # held for the whole of each API call on this context
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.input_staging = [None] * len(self.model.inputs)
        self.output_staging = [None] * len(self.model.outputs)

    def has(self, flag: int) -> bool:
        return bool(self.flags & flag)

    @property
    def current(self) -> SimModel:
        """The model as it runs now: the shape set last for a dynamic-shape model (the
        model itself, largest shape first, before any rknn_set_input_shapes), else the model."""
        if self.shape_index is None:
            return self.model
        return self.model.shapes[self.shape_index]

    @property
    def info_only(self) -> bool:
        return self.has(abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)

    @property
    def internal_present(self) -> bool:
        return (self.internal is not None or self.sram is not None
                or (self.internal_mem is not None and not self.internal_mem.dead))

    @property
    def sram_bytes(self) -> int:
        """Bytes of the runtime's internal buffer that lie in NPU SRAM."""
        return self.sram.nbytes if self.sram is not None else 0

    def own_dma_bytes(self) -> int:
        """Bytes of the DMA buffers the runtime allocated for this context
        (weights it allocated, internal, io staging; not create_mem mems)."""
        total = sum(b.size for b in self.input_staging + self.output_staging if b is not None)
        if self.internal is not None:
            total += self.internal.size
        if self.weights is not None and self.weights.owner == self.handle and self.weights.buffer is not None:
            total += self.weights.buffer.size
        return total

    def staging(self, outputs: bool, index: int) -> DmaBuffer:
        """The runtime's own buffer for an io tensor, allocated on first use."""
        buffers = self.output_staging if outputs else self.input_staging
        if buffers[index] is None:
            spec = (self.model.outputs if outputs else self.model.inputs)[index]
            buffers[index] = DmaBuffer.allocate(spec.native.nbytes, f"rknn-{'out' if outputs else 'in'}{index}")
            if outputs:  # allocated zero-filled
                self.clean_padding.add(index)
        return buffers[index]

    def set_perf_text(self, text: bytes) -> int:
        """Keep ``text`` (NUL-terminated) in a new malloc'd block, freeing the
        previous one; returns its address."""
        address = heap_alloc(len(text) + 1)
        ctypes.memmove(address, text + b"\0", len(text) + 1)
        self.free_perf_text()
        self.perf_text = (address, len(text) + 1)
        return address

    def free_perf_text(self) -> None:
        if self.perf_text is not None:
            heap_free(self.perf_text[0])
            self.perf_text = None

    def release_buffers(self) -> None:
        """Free everything the runtime allocated for this context (rknn_destroy)."""
        self.free_perf_text()
        for iova in (self.log_addresses or {}).values():
            give_iova(iova)
        self.log_addresses = None
        for address in self.heap_outputs:
            heap_free(address)
        self.heap_outputs.clear()
        for buffer in self.input_staging + self.output_staging:
            if buffer is not None:
                buffer.close()
        if self.internal is not None:
            self.internal.close()
        if self.sram is not None and self.sram_allocator is not None:
            self.sram_allocator.give_back(self.sram)
            self.sram = None
        if self.weights is not None:
            self.weights.release()
        if self.model_bytes is not None:
            self.model_bytes.release()
        self.input_bindings.clear()
        self.output_bindings.clear()
