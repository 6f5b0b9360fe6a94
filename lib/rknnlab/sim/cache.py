"""Stale caches under the DISABLE_FLUSH init flags (ASSUMPTIONS A60).

Simulated memory is coherent (A11) except here.  rknn_api.h says that with
RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE the runtime does not flush the input
cache before a run (the caller must), and that with
RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE it does not invalidate the output
cache, so a CPU read through virt_addr needs
rknn_mem_sync(ctx, mem, RKNN_MEMORY_SYNC_FROM_DEVICE) first.  rknn_mem_sync
copies nothing: Rockchip's rknpu driver turns TO_DEVICE into a cache clean
(dma_sync_*_for_device) and FROM_DEVICE into an invalidate
(dma_sync_*_for_cpu).  For a cacheable mem bound with rknn_set_io_mem to such a
context, the simulator keeps a second copy of the mem's bytes, the
:class:`DeviceSide`: what the NPU sees in memory, while virt_addr (every numpy
view of the mem) shows what the CPU's cache holds.

- Input (INPUT flag): the NPU reads the device side, which takes the CPU's
  bytes at rknn_set_io_mem and at each rknn_mem_sync with the TO_DEVICE bit
  (a clean: the CPU's writes reach memory).
- Output bound with the native attr (OUTPUT flag): the CPU's cache holds no
  line of the mem when it is bound and after each sync with the FROM_DEVICE
  bit (an invalidate, which shows the CPU the device side).  A run writes the
  device side, and virt_addr too only while the CPU holds no line.  The
  simulator cannot see the CPU's reads, so it takes the CPU to read each
  output right after its run: from then on the CPU holds lines, and the next
  run's bytes stay out of its view until a FROM_DEVICE sync.

So a loop with no sync reads the first run's bytes for ever, and a sync after
the run or before it reads each run's own.  A whole buffer goes stale at once:
the worst case, since a board shows stale cache lines, some old and some new.
Costs: a copy of the mem's bytes per sync and per bind, and a run's output
written twice while the CPU holds no line (to the device side and virt_addr).
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
        #: the CPU's cache holds lines of the mem: an output it read since its last
        #: invalidate (a run's bytes then stay out of its view)
        self.cpu_lines = False

    def to_device(self, cpu: np.ndarray) -> None:
        """The CPU's bytes reach memory (a cache clean: TO_DEVICE, or a bind).  Bytes
        the NPU wrote and the CPU has not read stay: clean lines are not written back.
        The CPU keeps its lines (a clean does not drop them)."""
        with self._lock:
            if not self.npu_ahead:
                self.bytes[:] = cpu

    def from_device(self, cpu: np.ndarray) -> None:
        """The CPU sees memory again (a cache invalidate: FROM_DEVICE): it holds no
        line of the mem until it reads the next run's output."""
        with self._lock:
            cpu[:] = self.bytes
            self.npu_ahead = False
            self.cpu_lines = False

    def npu_read(self, nbytes: int) -> np.ndarray:
        """The first ``nbytes`` as the NPU reads them."""
        return self.bytes[:nbytes]

    def npu_write(self, native: np.ndarray, zero_to: int, cpu: np.ndarray) -> None:
        """A run writes ``native`` at the start of the mem and zeros after it up to
        byte ``zero_to``.  ``cpu`` (the CPU's view of those bytes) shows them only if
        the CPU holds no line of the mem; it is then taken to read them, so it holds
        lines from now on."""
        with self._lock:
            self.bytes[:native.size] = native
            self.bytes[native.size:zero_to] = 0
            if self.cpu_lines:
                self.npu_ahead = True
            else:
                cpu[:native.size] = native
                cpu[native.size:zero_to] = 0
                self.cpu_lines = True


def goes_stale(context_flags: int, flag: int, mem: "TensorMem") -> bool:
    """Whether ``mem`` bound to a context with ``context_flags`` skips the runtime's
    cache maintenance that ``flag`` turns off: a cacheable mem only (one imported
    from an fd the runtime did not allocate counts as cacheable: the runtime
    cannot tell, and syncing is the safe choice)."""
    return bool(context_flags & flag) and mem.cacheable is not False


def device_side(mem: "TensorMem") -> DeviceSide:
    """The mem's device side, made from its current bytes on first use (the CPU
    then holds no line of it)."""
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
