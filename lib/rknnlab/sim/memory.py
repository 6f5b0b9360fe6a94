"""Real memory for the simulator: libc's heap and shared-memory "DMA" buffers.

What librknnrt.so mallocs (the model copy, rknn_outputs_get buffers with
is_prealloc = 0, the rknn_tensor_mem structs) comes from the same glibc heap a
C program would use, so RSS, mallinfo2 and fragmentation behave as on a board.
What the NPU driver would allocate (weights, internal, io, create_mem) is a
memfd mapped with mmap: a real file descriptor whose pages a second mapping
(rknn_create_mem_from_fd) really shares, and whose pages are backed at
allocation, as the rknpu driver backs its buffers when it creates them.
"""
from __future__ import annotations

import ctypes
import os
from typing import Optional, Tuple

import numpy as np

from ..rknn.buffers import raw_bytes

_libc = ctypes.CDLL(None, use_errno=True)

_malloc = _libc.malloc
_malloc.restype = ctypes.c_void_p
_malloc.argtypes = [ctypes.c_size_t]

_free = _libc.free
_free.restype = None
_free.argtypes = [ctypes.c_void_p]

_memcmp = _libc.memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]

# mmap64 takes a 64-bit offset on every glibc target (mmap's off_t is 32-bit on 32-bit ARM).
_mmap = getattr(_libc, "mmap64", _libc.mmap)
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_int64]

_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

_PROT_READ_WRITE = 0x1 | 0x2
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def heap_alloc(nbytes: int) -> int:
    """malloc(nbytes): the address, or MemoryError when libc returns NULL."""
    address = _malloc(max(nbytes, 1))
    if not address:
        raise MemoryError(f"malloc({nbytes}) returned NULL")
    return address


def heap_free(address: int) -> None:
    """free(address)."""
    _free(address)


def same_bytes(address_a: int, address_b: int, nbytes: int) -> bool:
    """memcmp(a, b, n) == 0, without copying either side into Python."""
    return _memcmp(address_a, address_b, nbytes) == 0


def address_of(array: np.ndarray) -> int:
    """The address of an array's first byte (cheaper than ``array.ctypes.data``)."""
    return array.__array_interface__["data"][0]


def array_at(address: int, nbytes: int, dtype: "np.dtype | type" = np.uint8) -> np.ndarray:
    """A writable numpy view of ``nbytes`` bytes at ``address`` (no copy)."""
    raw = raw_bytes(address, nbytes)
    return raw if np.dtype(dtype) == raw.dtype else raw.view(dtype)


class DmaBuffer:
    """A shared-memory buffer mapped at ``address``: bytes [0, size) of ``fd``.

    ``owns_fd`` says whether closing the buffer also closes the fd (a buffer
    made by :meth:`allocate`) or only unmaps it (a second mapping made by
    :meth:`map_fd` of somebody else's fd).
    """

    def __init__(self, address: int, size: int, fd: int, owns_fd: bool, file_offset: int = 0,
                 mapping: Optional[Tuple[int, int]] = None) -> None:
        self.address = address
        self.size = size
        self.fd = fd
        self.owns_fd = owns_fd
        #: where byte 0 of this buffer lies in the fd's file
        self.file_offset = file_offset
        # what munmap undoes: (start, length) of the page-aligned mapping
        self._mapping = mapping if mapping is not None else (address, size)
        self.closed = False
        self._bytes = array_at(address, size)  # made once: views are sliced from it

    @classmethod
    def allocate(cls, size: int, name: str) -> "DmaBuffer":
        """A new memfd of ``size`` bytes, mapped and zero-filled.

        Writing the zeros backs every page now, so MemFree falls and RSS rises
        at allocation, as when the NPU driver allocates a buffer.
        """
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            buffer = cls(_map(fd, size), size, fd, owns_fd=True)
        except BaseException:
            os.close(fd)
            raise
        ctypes.memset(buffer.address, 0, size)
        return buffer

    @classmethod
    def map_fd(cls, fd: int, size: int) -> "DmaBuffer":
        """A second mapping of bytes [0, size) of an existing fd: the same pages."""
        available = os.fstat(fd).st_size
        if size > available:
            raise ValueError(f"fd {fd} holds {available:,} bytes, {size:,} asked for")
        return cls(_map(fd, size), size, fd, owns_fd=False)

    @classmethod
    def map_fd_range(cls, fd: int, start: int, size: int) -> "DmaBuffer":
        """A mapping of bytes [start, start + size) of an existing fd (``start``
        need not be page-aligned: the pages around it are mapped)."""
        available = os.fstat(fd).st_size
        if start < 0 or size <= 0 or start + size > available:
            raise ValueError(f"bytes [{start}, {start + size}) of fd {fd}: it holds {available} bytes")
        aligned = start - start % PAGE_SIZE
        length = start + size - aligned
        base = _map(fd, length, aligned)
        return cls(base + start - aligned, size, fd, owns_fd=False, file_offset=start,
                   mapping=(base, length))

    def array(self, nbytes: Optional[int] = None, offset: int = 0) -> np.ndarray:
        """uint8 view of ``nbytes`` bytes starting ``offset`` bytes in."""
        if nbytes is None:
            nbytes = self.size - offset
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"bytes [{offset}, {offset + nbytes}) lie outside the buffer's {self.size}")
        return self._bytes[offset:offset + nbytes]

    def close(self) -> None:
        """munmap, and close the fd if this buffer made it.  Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._bytes = None
        _munmap(*self._mapping)
        if self.owns_fd:
            os.close(self.fd)


def _map(fd: int, size: int, offset: int = 0) -> int:
    if size <= 0:
        raise ValueError(f"cannot map {size} bytes")
    address = _mmap(None, size, _PROT_READ_WRITE, _MAP_SHARED, fd, offset)
    if address in (None, _MAP_FAILED):
        errno = ctypes.get_errno()
        raise OSError(errno, f"mmap of fd {fd} ({size} bytes) failed: {os.strerror(errno)}")
    return address
