"""rknn_tensor_mem objects: the struct the caller holds and the buffer behind it.

The struct is malloc'd, as librknnrt mallocs it, and rknn_destroy_mem frees
it.  The Python pointer handed out carries the mem's id, so destroying the
same pointer twice is recognised even after malloc has reused the address.
"""
from __future__ import annotations

import ctypes
import errno
import itertools
import threading
from typing import TYPE_CHECKING, Callable, Dict, Optional

import numpy as np

from ..rknn import abi
from .memory import PAGE_SIZE, DmaBuffer, heap_alloc, heap_free
from .sram import SramBlock

if TYPE_CHECKING:
    from .cache import DeviceSide

MEM_POINTER = ctypes.POINTER(abi.rknn_tensor_mem)
#: attribute of the returned pointer objects that holds the mem's id
ID_ATTRIBUTE = "_rknnlab_mem_id"

_ids = itertools.count(1)
# Made-up NPU (IOMMU) addresses for phys_addr: the NPU sees buffers at IOVAs, not at CPU
# physical addresses, all in one 4 GiB domain (airockchip/rknn-toolkit2#287). Each buffer gets
# the first free page-aligned range from IOVA_BASE; a freed range is used again.
IOVA_BASE, IOVA_END = 0x1000_0000, 0x1_0000_0000
_iova_lock = threading.Lock()
_live_iovas: Dict[int, int] = {}   # start -> bytes (whole pages)


def take_iova(size: int) -> int:
    """The first free range of the domain that holds ``size`` bytes (in whole pages)."""
    span = -(-max(size, 1) // PAGE_SIZE) * PAGE_SIZE
    with _iova_lock:
        cursor = IOVA_BASE
        for start in sorted(_live_iovas):
            if start - cursor >= span:
                break
            cursor = max(cursor, start + _live_iovas[start])
        if cursor + span > IOVA_END:
            raise OSError(errno.ENOMEM, f"no free range of {span:,} B left in the NPU's 4 GiB IOVA "
                                        "domain (made-up addresses: ASSUMPTIONS A30)")
        _live_iovas[cursor] = span
        return cursor


def give_iova(iova: int) -> None:
    """Make a range from :func:`take_iova` free again."""
    with _iova_lock:
        _live_iovas.pop(iova, None)


class TensorMem:
    """One rknn_tensor_mem the runtime made: struct, buffer and bookkeeping.

    ``ctx`` is the context it was created with (0 for
    RKNN_MEM_FLAG_ALLOC_NO_CONTEXT); ``imported`` marks create_mem_from_fd and
    create_mem_from_phys mems, whose pages somebody else allocated.
    ``alloc_flags``: the RKNN_FLAG_MEMORY_* bits of rknn_create_mem2 (0 for
    rknn_create_mem); ``cacheable``: whether the CPU maps the pages cached
    (None: an imported mem whose allocator the runtime does not know).
    ``users`` counts runtime calls touching the bytes right now: a mem
    destroyed meanwhile is unmapped when the last of them is done.
    ``device``: what the NPU sees of the bytes when a DISABLE_FLUSH context
    lets the CPU's view go stale (rknnlab.sim.cache), else None.
    """

    def __init__(self, buffer: DmaBuffer, size: int, offset: int, ctx: int, imported: bool,
                 alloc_flags: int = 0, cacheable: Optional[bool] = True,
                 phys_addr: Optional[int] = None) -> None:
        self.mem_id = next(_ids)
        self.buffer = buffer
        self.size = size
        self.offset = offset
        self.ctx = ctx
        self.imported = imported
        self.alloc_flags = alloc_flags
        self.cacheable = cacheable
        #: the NPU SRAM pages holding this mem's first bytes (TRY_ALLOC_SRAM), and
        #: what gives them back when the mem is freed
        self.sram: Optional[SramBlock] = None
        self.sram_release: Optional[Callable[[], None]] = None
        self.users = 0
        self.dead = False
        self.device: Optional["DeviceSide"] = None
        self.device_lock = threading.Lock()
        iova = take_iova(size) if phys_addr is None else phys_addr  # first: it may fail (ENOMEM)
        self.struct_address = heap_alloc(ctypes.sizeof(abi.rknn_tensor_mem))
        self.pointer = ctypes.cast(self.struct_address, MEM_POINTER)
        struct = self.pointer.contents
        struct.virt_addr = buffer.address
        self._own_iova = phys_addr is None
        struct.phys_addr = iova
        struct.fd = buffer.fd if phys_addr is None else -1
        struct.offset = offset
        struct.size = size
        struct.flags = (abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS if phys_addr is not None
                        else abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD if imported
                        else abi.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE)
        struct.priv_data = None
        setattr(self.pointer, ID_ATTRIBUTE, self.mem_id)
        self.phys_addr = struct.phys_addr

    def phys_offset(self, phys: int, nbytes: int) -> Optional[int]:
        """Where [phys, phys + nbytes) starts inside this mem's pages (counted from
        the start of its buffer), or None if that range is not all in the mem."""
        if self.phys_addr <= phys and phys + nbytes <= self.phys_addr + self.size:
            return phys - self.phys_addr
        return None

    @property
    def sram_bytes(self) -> int:
        """Bytes of this mem in the NPU's SRAM (from its start); the rest is DDR."""
        return self.sram.nbytes if self.sram is not None else 0

    @property
    def available(self) -> int:
        """Bytes from ``offset`` to the end: what a tensor bound here may use."""
        return self.size - self.offset

    def data(self, nbytes: int) -> np.ndarray:
        """uint8 view of the tensor bytes (``nbytes`` from ``offset``)."""
        return self.buffer.array(nbytes, self.offset)

    def contains(self, address: int, nbytes: int) -> bool:
        """Whether [address, address + nbytes) lies in this mem's mapping."""
        return self.buffer.address <= address and address + nbytes <= self.buffer.address + self.size

    def free(self) -> None:
        """Unmap the buffer (closing its fd unless imported) and free the struct."""
        self.buffer.close()
        heap_free(self.struct_address)
        if self._own_iova:
            give_iova(self.phys_addr)
        if self.sram_release is not None:
            self.sram_release()
            self.sram, self.sram_release = None, None
