"""Stale caches under the DISABLE_FLUSH init flags (ASSUMPTIONS A60).

Simulated memory is coherent (A11) except here.  rknn_api.h says that with
RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE the runtime does not flush the input
cache before a run (the caller must), and that with
RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE it does not invalidate the output
cache, so a CPU read through virt_addr needs
rknn_mem_sync(ctx, mem, RKNN_MEMORY_SYNC_FROM_DEVICE) first.  For a cacheable
mem bound with rknn_set_io_mem to such a context, the simulator keeps a second
copy of the mem's bytes, the :class:`DeviceSide`: what the NPU sees in memory,
while virt_addr (every numpy view of the mem) shows what the CPU's cache holds.

- Input (INPUT flag): the NPU reads the device side, which takes the CPU's
  bytes at rknn_set_io_mem and at each rknn_mem_sync with the TO_DEVICE bit.
- Output bound with the native attr (OUTPUT flag): a run writes the device
  side only; rknn_mem_sync with the FROM_DEVICE bit copies it to virt_addr.

A whole buffer goes stale at once: a simplification, since a board shows stale
cache lines, some old and some new.  Costs: a copy of the mem's bytes per
sync and per bind, and the outputs written to the device side instead of to
virt_addr (no extra copy per run).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..rknn import abi

if TYPE_CHECKING:
    from .mems import TensorMem

#: the two init flags this module models
DISABLE_FLUSH_FLAGS = (abi.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE
                       | abi.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE)


class DeviceSide:
    """The bytes the NPU sees of one mem (from its offset to its end) when they
    may differ from the CPU's view at virt_addr."""

    def __init__(self, cpu: np.ndarray) -> None:
        self._lock = threading.Lock()
        self.bytes = np.array(cpu, copy=True)
        #: the NPU wrote bytes the CPU has not been shown yet (no FROM_DEVICE sync since)
        self.npu_ahead = False

    def to_device(self, cpu: np.ndarray) -> None:
        """The CPU's bytes reach memory (a cache clean: TO_DEVICE, or a bind).  Bytes
        the NPU wrote and the CPU has not read stay: clean lines are not written back."""
        with self._lock:
            if not self.npu_ahead:
                self.bytes[:] = cpu

    def from_device(self, cpu: np.ndarray) -> None:
        """The CPU sees memory again (a cache invalidate: FROM_DEVICE)."""
        with self._lock:
            cpu[:] = self.bytes
            self.npu_ahead = False

    def npu_read(self, nbytes: int) -> np.ndarray:
        """The first ``nbytes`` as the NPU reads them."""
        return self.bytes[:nbytes]

    def npu_write(self, native: np.ndarray, zero_to: int) -> None:
        """A run writes ``native`` at the start of the mem and zeros after it up to
        byte ``zero_to``; the CPU does not see it."""
        with self._lock:
            self.bytes[:native.size] = native
            self.bytes[native.size:zero_to] = 0
            self.npu_ahead = True


def goes_stale(context_flags: int, flag: int, mem: "TensorMem") -> bool:
    """Whether ``mem`` bound to a context with ``context_flags`` skips the runtime's
    cache maintenance that ``flag`` turns off: a cacheable mem only (one imported
    from an fd the runtime did not allocate counts as cacheable: the runtime
    cannot tell, and syncing is the safe choice)."""
    return bool(context_flags & flag) and mem.cacheable is not False


def device_side(mem: "TensorMem") -> DeviceSide:
    """The mem's device side, made from its current bytes on first use."""
    with mem.device_lock:
        if mem.device is None:
            mem.device = DeviceSide(mem.data(mem.available))
        return mem.device


def sync(mem: "TensorMem", mode: int) -> None:
    """rknn_mem_sync on a mem: nothing unless it has a device side (it was bound
    to a DISABLE_FLUSH context).  BIDIRECTIONAL cleans, then invalidates: the CPU's
    writes reach memory, or, where the NPU wrote last, the CPU sees the NPU's bytes.
    FROM_DEVICE alone drops what the CPU wrote since the last clean."""
    device: Optional[DeviceSide] = mem.device
    if device is None:
        return
    cpu = mem.data(mem.available)
    if mode & abi.RKNN_MEMORY_SYNC_TO_DEVICE:
        device.to_device(cpu)
    if mode & abi.RKNN_MEMORY_SYNC_FROM_DEVICE:
        device.from_device(cpu)
