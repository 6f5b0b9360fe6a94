"""Samplers: what memory looks like while a variant runs.

Each sampler reads one source cheaply enough to run at 200 Hz (up to 1 kHz)
without disturbing what it measures: files are opened once and re-read with
``os.pread`` (no open/close per sample), and parsed by looking up only the
fields we keep.

=====================  ==============================================  ==========
sampler                source                                          unit
=====================  ==============================================  ==========
:class:`MemInfo`       /proc/meminfo: MemFree, MemAvailable, Cached,   kB
                       Buffers, CmaFree, CmaTotal (where present)
:class:`ProcessMemory` /proc/<pid>/statm (RSS) and, less often,        kB
                       /proc/<pid>/smaps_rollup (PSS)
:class:`Heap`          glibc ``mallinfo2()`` (``mallinfo()`` before     bytes
                       glibc 2.33: 32-bit fields that wrap at 4 GiB)
:class:`NpuLoad`       rknpu ``load`` (debugfs/procfs) and the NPU      %, Hz
                       devfreq ``cur_freq``, where readable (a board)
DMA total              the runtime's RKNN_QUERY_MEM_SIZE                bytes
                       ``total_dma_allocated_size``: queried by the
                       instrumented runtime after each call that
                       changes it, see rknnlab.experiment
=====================  ==============================================  ==========

:class:`Probe` bundles them into one background sampler that appends a row per
5 ms slot to typed column arrays (``array('d')``: 8 bytes a value, no Python
object per value, so the probe's own memory grows by ~150 bytes a sample,
and not at all when a reader hands the rows out with :meth:`Probe.take_new`
as rknnlab.experiment does a few times a second; NaN marks a value not
read).  RSS is read for every row (200 Hz);
/proc/meminfo, the heap and the NPU files at ``mid_hz`` (10 Hz); PSS (the
kernel walks every page table: milliseconds) at ``slow_hz`` (every 5 s) and
in the first and last rows; the other rows hold NaN (None in JSON).

The sampler is small C code (``_sampler.c``, compiled on first use with
the system's C compiler into ``$XDG_CACHE_HOME/rknnlab`` and loaded with
ctypes) with a thread that never takes Python's GIL, so it does not stall
the variant's Python code.  A sampling thread's main cost is the kernel
waking it (30-50 us of CPU a wake-up in a virtual machine: 200 wake-ups a
second are 0.6-1% of a core), so the code being measured may also *poll*
(:meth:`Probe.poll`, which rknnlab.experiment calls after every runtime
call): a poll takes the row when the current 5 ms slot has none yet, which
costs a statm read (a few microseconds; about 0.1 us when no row is due)
and no wake-up.  While polls fill the slots, the thread only takes the PSS
rows and checks on the polls every 40 ms; when polls stop coming (a call
that blocks, code that makes no runtime calls) it takes every slot again
within 40 ms.  benchmarks/bench_harness.py measures both ways.  Where no
compiler is found or the build fails, :class:`Probe` falls back to the same
schedule in Python: the same sources, polls and thread, but the thread
takes Python's GIL and every step costs more (``Probe.backend`` says which
ran, ``Probe.notes`` why; ``python -m rknnlab doctor`` says which one
rknnlab.run will use).  The environment variable
``RKNNLAB_SAMPLER=python`` (or ``c``) forces one.
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import functools
import hashlib
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import weakref
from array import array
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DEFAULT_HZ = 200.0
MAX_HZ = 1000.0

#: /proc/meminfo fields we keep, as (meminfo key, column name)
MEMINFO_FIELDS = (
    ("MemFree", "mem_free_kb"),
    ("MemAvailable", "mem_available_kb"),
    ("Cached", "cached_kb"),
    ("Buffers", "buffers_kb"),
    ("CmaFree", "cma_free_kb"),
    ("CmaTotal", "cma_total_kb"),
)

_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024 if hasattr(os, "sysconf") else 4


class _KeptFile:
    """A file opened once and re-read from offset 0 on every ``read()``."""

    def __init__(self, path: str, size: int = 1 << 14) -> None:
        self.path = path
        self.size = size
        self.fd = os.open(path, os.O_RDONLY)

    def read(self) -> bytes:
        data = os.pread(self.fd, self.size, 0)
        while len(data) == self.size:  # grew beyond the buffer: read it all
            self.size *= 2
            data = os.pread(self.fd, self.size, 0)
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _field_kb(data: bytes, key: bytes) -> Optional[int]:
    """The number after ``\\n<key>`` in a "Key:   123 kB" file (data starts with \\n)."""
    i = data.find(key)
    if i < 0:
        return None
    i += len(key)
    j = data.find(b"\n", i)
    parts = data[i:j if j >= 0 else None].split()
    return int(parts[0]) if parts else None


class MemInfo:
    """/proc/meminfo: the system-wide view (what an out-of-memory comes from)."""

    def __init__(self, path: str = "/proc/meminfo") -> None:
        self._file = _KeptFile(path)
        first = b"\n" + self._file.read()
        #: the fields this kernel has (CmaFree/CmaTotal only with CONFIG_CMA)
        self.fields = [(b"\n" + k.encode() + b":", col) for k, col in MEMINFO_FIELDS
                       if (b"\n" + k.encode() + b":") in first]
        self.columns = [col for _, col in self.fields]

    def sample(self) -> Dict[str, Optional[int]]:
        data = b"\n" + self._file.read()
        return {col: _field_kb(data, key) for key, col in self.fields}

    def close(self) -> None:
        self._file.close()


class ProcessMemory:
    """A process's resident memory: RSS from /proc/<pid>/statm (cheap), PSS
    from /proc/<pid>/smaps_rollup (the kernel walks all mappings: costly,
    so :class:`Probe` reads it less often).  PSS is None where smaps_rollup
    is missing (kernels before 4.14) or unreadable."""

    columns = ("rss_kb", "pss_kb")

    def __init__(self, pid: Optional[int] = None) -> None:
        where = "self" if pid is None else str(pid)
        self._statm = _KeptFile(f"/proc/{where}/statm", 256)
        try:
            self._rollup: Optional[_KeptFile] = _KeptFile(f"/proc/{where}/smaps_rollup", 4096)
        except OSError:
            self._rollup = None

    def rss_kb(self) -> int:
        return int(self._statm.read().split()[1]) * _PAGE_KB

    def pss_kb(self) -> Optional[int]:
        if self._rollup is None:
            return None
        try:
            return _field_kb(self._rollup.read(), b"\nPss:")
        except OSError:
            return None

    def close(self) -> None:
        self._statm.close()
        if self._rollup is not None:
            self._rollup.close()


class _mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


class _mallinfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


class Heap:
    """glibc's malloc statistics of this process (fragmentation made visible).

    ``heap_arena_bytes``: bytes the main arena got from the system (brk);
    ``heap_in_use_bytes``: bytes in allocated chunks, plus mmap'ed chunks
    (``uordblks + hblkhd``); ``heap_free_bytes``: free bytes kept inside the
    arena (``fordblks``): large and growing while in-use stays flat means
    fragmentation.  Uses ``mallinfo2`` (glibc >= 2.33); on older glibc falls
    back to ``mallinfo``, whose int fields wrap above 2 GiB (``self.note``
    says so).  ``available`` is False where there is no glibc (musl)."""

    columns = ("heap_arena_bytes", "heap_in_use_bytes", "heap_free_bytes")

    def __init__(self) -> None:
        self.note = ""
        self._fn: Optional[Callable[[], ctypes.Structure]] = None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            self.note = "no C library found: heap statistics unavailable"
            return
        fn = getattr(libc, "mallinfo2", None)
        if fn is not None:
            fn.restype = _mallinfo2
            fn.argtypes = []
            self.function = "mallinfo2"
        else:
            fn = getattr(libc, "mallinfo", None)
            if fn is None:
                self.note = "libc has neither mallinfo2 nor mallinfo (not glibc?)"
                return
            fn.restype = _mallinfo
            fn.argtypes = []
            self.function = "mallinfo"
            self.note = ("glibc older than 2.33: using mallinfo(), whose fields are 32-bit "
                         "and wrap above 2 GiB")
        self._fn = fn

    @property
    def available(self) -> bool:
        return self._fn is not None

    def sample(self) -> Dict[str, Optional[int]]:
        if self._fn is None:
            return dict.fromkeys(self.columns)
        m = self._fn()
        mask = (1 << 32) - 1 if isinstance(m, _mallinfo) else -1
        return {"heap_arena_bytes": m.arena & mask,
                "heap_in_use_bytes": (m.uordblks & mask) + (m.hblkhd & mask),
                "heap_free_bytes": m.fordblks & mask}


class NpuLoad:
    """rknpu's per-core load (%) and the NPU clock (Hz), where readable.

    On a PC, or on a board where debugfs needs root, ``available`` is False
    and samples are None."""

    columns = ("npu_load_pct", "npu_freq_hz")

    def __init__(self, root: str = "/") -> None:
        from . import board  # only paths and the parser; no hardware access
        self._load: Optional[_KeptFile] = None
        self._freq: Optional[_KeptFile] = None
        for d in board.RKNPU_INFO_DIRS:
            try:
                self._load = _KeptFile(os.path.join(root, d.lstrip("/"), "load"), 512)
                self._load.read()
                break
            except OSError:
                self._load = None
        _, _, freq_path = board.read_npu_freq(root)
        if freq_path:
            try:
                self._freq = _KeptFile(freq_path, 64)
            except OSError:
                self._freq = None

    @property
    def available(self) -> bool:
        return self._load is not None or self._freq is not None

    def sample(self) -> Dict[str, Optional[float]]:
        load: Optional[float] = None
        freq: Optional[int] = None
        if self._load is not None:
            try:
                text = self._load.read()
                pcts = [int(x.split(b"%")[0].split()[-1]) for x in text.split(b",") if b"%" in x]
                load = sum(pcts) / len(pcts) if pcts else None
            except (OSError, ValueError, IndexError):
                load = None
        if self._freq is not None:
            try:
                freq = int(self._freq.read().strip() or 0) or None
            except (OSError, ValueError):
                freq = None
        return {"npu_load_pct": load, "npu_freq_hz": freq}

    def close(self) -> None:
        for f in (self._load, self._freq):
            if f is not None:
                f.close()


# --------------------------------------------------------------------------- the C sampler
SAMPLER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sampler.c")
_SAMPLER_ABI = 4
_MAX_EXTRA = 16  # MAX_EXTRA in _sampler.c
_W_MID = 11      # W_MID in _sampler.c: meminfo (6), heap (3), NPU (2)
_NEVER = 2 ** 63 - 1
_CHECK_NS = 40_000_000  # CHECK_NS in _sampler.c: how often the thread checks on the polls
_loaded: Dict[str, Tuple[Optional[ctypes.CDLL], str]] = {}
_load_lock = threading.Lock()


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rknnlab")


def _compiler() -> Optional[List[str]]:
    cc = os.environ.get("CC")
    if cc:
        return shlex.split(cc)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    i64, vp, cp = ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p
    lib.rk_sampler_abi.restype = ctypes.c_int
    lib.rk_sampler_new.restype = vp
    lib.rk_sampler_new.argtypes = [cp, cp, cp, cp, cp, ctypes.c_int, i64, i64, ctypes.c_long,
                                   ctypes.c_long, ctypes.c_int, vp]
    lib.rk_sampler_start.restype = ctypes.c_int
    lib.rk_sampler_start.argtypes = [vp]
    lib.rk_sampler_poll.restype = i64
    lib.rk_sampler_poll.argtypes = [vp]
    for name in ("rk_sampler_stop", "rk_sampler_sample", "rk_sampler_free"):
        getattr(lib, name).restype = None
        getattr(lib, name).argtypes = [vp]
    lib.rk_sampler_stats.restype = None
    lib.rk_sampler_stats.argtypes = [vp, ctypes.POINTER(i64)]
    lib.rk_sampler_drain.restype = ctypes.c_long
    lib.rk_sampler_drain.argtypes = [vp, ctypes.c_int, ctypes.c_long, vp, vp, vp]
    return lib


def load_sampler() -> Tuple[Optional[ctypes.CDLL], str]:
    """The compiled C sampler (built now if not cached) and a note: ``(lib, "")``
    or ``(None, why not)``.  The library is cached per user under
    ``$XDG_CACHE_HOME/rknnlab`` (``~/.cache/rknnlab``), keyed by a hash of the
    source, the machine and the compiler command (``$CC``, else cc/gcc/clang)."""
    if not sys.platform.startswith("linux"):
        return None, f"the C sampler reads Linux's /proc: not built on {sys.platform}"
    try:
        with open(SAMPLER_SOURCE, "rb") as f:
            source = f.read()
    except OSError as exc:
        return None, f"the C sampler's source is missing ({exc})"
    cc = _compiler()
    key = hashlib.sha256(b"\0".join([source, platform.machine().encode(), sys.platform.encode(),
                                     " ".join(cc or []).encode()])).hexdigest()[:16]
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        result = _build_and_load(source, cc, key)
        _loaded[key] = result
        return result


def _build_and_load(source: bytes, cc: Optional[List[str]], key: str) -> Tuple[Optional[ctypes.CDLL], str]:
    name = f"_sampler-{key}.so"
    dirs = [_cache_dir(), os.path.join(tempfile.gettempdir(), f"rknnlab-{os.getuid()}")]
    for d in dirs:  # already built (by this or another process)
        path = os.path.join(d, name)
        if os.path.exists(path):
            try:
                lib = _declare(ctypes.CDLL(path))
                if lib.rk_sampler_abi() == _SAMPLER_ABI:
                    return lib, ""
            except (OSError, AttributeError):
                pass
    if cc is None:
        return None, "no C compiler found (cc, gcc, clang; or set CC)"
    errors = []
    for d in dirs:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=d)
            os.close(fd)
        except OSError as exc:
            errors.append(f"{d}: {exc}")
            continue
        cmd = cc + ["-O2", "-shared", "-fPIC", "-pthread", "-o", tmp, SAMPLER_SOURCE, "-ldl"]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            if proc.returncode != 0:
                out = proc.stdout.decode("utf-8", "replace").strip()
                return None, (f"the C sampler did not build ({' '.join(cmd[:1])} exited with "
                              f"{proc.returncode}{': ' + out[-500:] if out else ''})")
            path = os.path.join(d, name)
            os.replace(tmp, path)  # atomic: concurrent builders race harmlessly
            lib = _declare(ctypes.CDLL(path))
            if lib.rk_sampler_abi() != _SAMPLER_ABI:
                return None, "the C sampler built but reports another ABI version"
            return lib, ""
        except (OSError, subprocess.SubprocessError, AttributeError) as exc:
            return None, f"the C sampler did not build or load ({type(exc).__name__}: {exc})"
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return None, "no writable cache directory for the C sampler (" + "; ".join(errors) + ")"


_running: "weakref.WeakSet[Probe]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # no C thread reads Python memory while the interpreter shuts down
    for p in list(_running):
        p.stop()


class Probe:
    """Samples memory in the background at ``hz`` (default 200, at most 1000).

    Time is cut into slots of 1/``hz`` from :meth:`start`, and each slot
    gets one row: ``t_ns`` (perf_counter_ns minus ``t0_ns``), the
    ``extra_columns`` values, ``rss_kb``; every 1/``mid_hz`` (10 Hz) a row
    also holds the meminfo, heap and NPU fields, every 1/``slow_hz`` (5 s)
    and in the first and last rows also ``pss_kb`` (NaN / None in the other
    rows).  So the process's RSS is seen at the full rate, and the costlier
    sources at a rate that keeps the probe cheap.  Rows are taken by the sampler thread,
    or (C sampler) by :meth:`poll` from the code being measured, whichever
    comes first in a slot; :attr:`late_ticks` counts the slots that got
    none (the thread was late, or polls left a slot empty while the thread
    was sleeping on their account).

    The extra values (the experiment's iteration number, stage and DMA
    total) come from :attr:`extra_values`, a ctypes double array the caller
    writes (``probe.extra_values[k] = v``, NaN for none) and every row
    copies: the C sampler reads it without Python.  An ``extra()`` callable
    returning one value per column also works, but needs the Python sampler
    (with ``backend="auto"`` it selects it, and says so in :attr:`notes`).

    ``backend``: "auto" (the default, or ``$RKNNLAB_SAMPLER``): the C sampler
    where it builds, else the Python one; "c" (an error if it does not
    build) or "python".  :attr:`backend` is the one that runs.

    ``pid=None`` watches this process (and only then the heap: mallinfo
    works in-process only).  Use as a context manager, or start()/stop().
    """

    def __init__(self, hz: float = DEFAULT_HZ, pid: Optional[int] = None,
                 extra: Optional[Callable[[], Sequence[object]]] = None,
                 extra_columns: Sequence[str] = (), t0_ns: Optional[int] = None,
                 mid_hz: float = 10.0, slow_hz: float = 0.2, npu: bool = True,
                 backend: Optional[str] = None) -> None:
        if not 0 < hz <= MAX_HZ:
            raise ValueError(f"sample rate {hz} Hz: expected more than 0 and at most {MAX_HZ:g} Hz")
        want = (backend or os.environ.get("RKNNLAB_SAMPLER") or "auto").lower()
        if want not in ("auto", "c", "python"):
            raise ValueError(f"sampler backend {want!r}: expected 'auto', 'c' or 'python'")
        self.hz = float(hz)
        self.period_ns = int(1e9 / hz)
        #: PSS is read every this many slots (``slow_hz``, every 5 s by
        #: default: smaps_rollup costs 0.4-2 ms in a 125 MB process with
        #: onnxruntime loaded, the kernel walks all its page tables)
        self.slow_every = max(1, int(round(hz / slow_hz)))
        #: /proc/meminfo, mallinfo2 and the NPU files every this many slots
        #: (``mid_hz``, 10 Hz by default: meminfo costs 5-25 us, mallinfo2
        #: 10-200 us, growing with the free chunks it walks)
        self.mid_every = max(1, int(round(hz / mid_hz)))
        self.t0_ns = time.perf_counter_ns() if t0_ns is None else t0_ns
        self.meminfo = MemInfo()
        self.process = ProcessMemory(pid)
        self.heap: Optional[Heap] = Heap() if pid is None else None
        npu_probe = NpuLoad() if npu else None
        self.npu = npu_probe if npu_probe is not None and npu_probe.available else None
        self._extra = extra
        self.extra_columns = list(extra_columns)
        #: the values the extra columns copy into each row (write them; NaN = none)
        self.extra_values = (ctypes.c_double * max(1, len(self.extra_columns)))(
            *([math.nan] * max(1, len(self.extra_columns))))
        self.mid_columns = (self.meminfo.columns + (list(Heap.columns) if self.heap is not None else [])
                            + (list(NpuLoad.columns) if self.npu is not None else []))
        self.slow_columns = ["pss_kb"]
        self.columns: List[str] = (["t_ns"] + self.extra_columns + ["rss_kb"]
                                   + self.mid_columns + self.slow_columns)
        # every tick: t, extras, rss; mid and slow tiers: their own rows, with
        # the tick number each was read at (no NaN padding on the fast path)
        self._t = array("q")
        self._row0 = 0  # rows handed out by take_new (the arrays start after them)
        self._rss = array("d")
        self._extras = [array("d") for _ in self.extra_columns]
        self._mid_rows = array("q")
        self._mid = {c: array("d") for c in self.mid_columns}
        self._slow_rows = array("q")
        self._slow = {c: array("d") for c in self.slow_columns}
        self.notes: List[str] = []
        if self.heap is not None and self.heap.note:
            self.notes.append(self.heap.note)
        self.ticks = 0       # rows taken
        self.late_ticks = 0  # slots of the schedule that got no row
        self.cpu_ns = 0      # CPU time the sampling thread used
        self.poll_rows = 0   # rows taken by poll()
        self.poll_ns = 0     # wall time poll() spent taking them, on the polling threads
        self.wakes = 0       # the sampler thread's wake-ups after its first row
        self.slot0_ns = 0    # where slot 0 starts, on the t_ns scale
        # when poll() next needs to call the C sampler: what the last call said
        # (the start of the next slot without a row), "never" while stopped
        self._poll_due = [_NEVER]
        # the Python sampler's schedule (the C sampler keeps its own)
        self._py_lock = threading.Lock()
        self._slot0 = self.t0_ns
        self._filled = self._slots_filled = -1
        self._next_mid = self._next_slow = 0
        self._last_poll = 0
        self._stopping = False
        self._thread: Optional[threading.Thread] = None
        self._rss_fd = self.process._statm.fd
        #: "c" (the compiled sampler) or "python" (the same schedule in Python)
        self.backend = "python"
        self._lib: Optional[ctypes.CDLL] = None
        self._h: Optional[int] = None
        self._drain_lock = threading.RLock()  # take_new drains inside it
        if want != "python":
            why = ""
            if extra is not None:
                why = "an extra() callable needs the Python sampler (write Probe.extra_values instead)"
            elif len(self.extra_columns) > _MAX_EXTRA:
                why = f"the C sampler copies at most {_MAX_EXTRA} extra columns"
            else:
                lib, why = load_sampler()
                if lib is not None:
                    self._open_c(lib, pid)
                    if self._h is None:
                        why = "the C sampler could not open its files"
            if self._h is None:
                if want == "c":
                    self.close()
                    raise RuntimeError(f"the C sampler is not available: {why}")
                self.notes.append(f"Python sampler thread (C sampler not used: {why})")
        if self._h is None:
            self.poll = self._make_poll(self._py_poll, self._poll_due)

    def _open_c(self, lib: ctypes.CDLL, pid: Optional[int]) -> None:
        enc = lambda f: f.path.encode() if f is not None else None  # noqa: E731
        heap = self.heap is not None and self.heap.available
        h = lib.rk_sampler_new(
            enc(self.process._statm), enc(self.meminfo._file), enc(self.process._rollup),
            enc(self.npu._load) if self.npu is not None else None,
            enc(self.npu._freq) if self.npu is not None else None,
            int(heap), self.period_ns, self.t0_ns, self.mid_every, self.slow_every,
            len(self.extra_columns), ctypes.addressof(self.extra_values))
        if h:
            self._lib, self._h, self.backend = lib, h, "c"
            self.poll = self._make_poll(functools.partial(lib.rk_sampler_poll, h), self._poll_due)
            self._meminfo_index = [k for k, (_, col) in enumerate(MEMINFO_FIELDS)
                                   if col in self.meminfo.columns]

    @staticmethod
    def _make_poll(take: Callable[[], int], due: List[int]) -> Callable[[], None]:
        """poll() for a sampler whose ``take()`` takes the row if the slot
        needs one and returns when the next is due."""
        clock = time.perf_counter_ns

        def poll() -> None:
            if clock() >= due[0]:  # most polls stop here: no call into the sampler
                due[0] = take()
        poll.__doc__ = Probe.poll.__doc__
        return poll

    def poll(self) -> None:
        """Take the row (RSS, extras; meminfo, heap and NPU in a mid slot) if
        the current slot has none yet.

        Call it from the code being measured, as often as you like (well
        under a microsecond when no row is due, a statm read when one is):
        while polls fill the slots the sampler thread sleeps, which is what
        keeps sampling at 200 Hz under 1% of a core.  Polls come from the
        running code, so their rows fall between its steps
        (rknnlab.experiment polls after every runtime call), and their cost
        lands on the caller's time: a few us per 5 ms slot, and in a mid slot
        (10 a second) the meminfo and mallinfo2 reads, 20-150 us (so the
        median iteration time moves by well under 1%; see
        benchmarks/bench_harness.py).  The thread still fills in when polls
        stop coming.  A no-op while the probe is stopped."""

    # one row -------------------------------------------------------------
    def sample(self) -> None:
        """Take a row with every source now, outside the schedule (the first
        and last rows of a run are such rows)."""
        if self._h is not None:
            self._lib.rk_sampler_sample(self._h)
            return
        t = time.perf_counter_ns()
        row = self._py_read(True, True)
        with self._py_lock:
            self._py_append(t, row)

    # The Python sampler reads outside its lock (a file read releases the
    # GIL, and a lock held meanwhile would turn polls away for a whole GIL
    # switch interval) and appends under it.
    def _py_read(self, mid: bool, slow: bool) -> tuple:
        extras = list(self._extra()) if self._extra is not None else list(self.extra_values)
        rss = int(os.pread(self._rss_fd, 256, 0).split()[1]) * _PAGE_KB
        mids = None
        if mid:
            mids = {}
            for source in (self.meminfo, self.heap, self.npu):
                if source is not None:
                    mids.update(source.sample())
        pss = self.process.pss_kb() if slow else None
        return extras, rss, mids, slow, pss

    def _py_append(self, t: int, row: tuple) -> None:
        """Append a row read by _py_read (the caller holds _py_lock)."""
        extras, rss, mids, slow, pss = row
        i = self.ticks
        self._t.append(t - self.t0_ns)
        for arr, v in zip(self._extras, extras):
            arr.append(math.nan if v is None else v)
        self._rss.append(rss)
        if mids is not None:
            self._mid_rows.append(i)
            for k, v in mids.items():
                self._mid[k].append(math.nan if v is None else v)
        if slow:
            self._slow_rows.append(i)
            self._slow["pss_kb"].append(math.nan if pss is None else pss)
        self.ticks = i + 1
        slot = (t - self._slot0) // self.period_ns
        if slot > self._filled:
            self._filled = slot
            self._slots_filled += 1

    def _py_poll(self) -> int:
        # the Python sampler's rk_sampler_poll: the row if the slot needs one;
        # when the next is due.  Only polls move the due time, so after a row
        # of the thread's the next poll still comes in and is seen.
        t = time.perf_counter_ns()
        self._last_poll = t
        slot = (t - self._slot0) // self.period_ns
        if self._thread is None:
            return _NEVER
        if slot <= self._filled:
            return self._slot0 + (self._filled + 1) * self.period_ns
        mid = slot >= self._next_mid
        row = self._py_read(mid, False)
        with self._py_lock:
            if self._thread is not None and slot > self._filled:  # nobody filled it meanwhile
                if mid:
                    self._next_mid = (slot // self.mid_every + 1) * self.mid_every
                self._py_append(t, row)
                self.poll_rows += 1
                self.poll_ns += time.perf_counter_ns() - t
            return _NEVER if self._thread is None else self._slot0 + (self._filled + 1) * self.period_ns

    # the C sampler's rows -> the column arrays ------------------------------
    def _drain(self) -> None:
        if self._h is None:
            return
        lib, h = self._lib, self._h
        with self._drain_lock:
            stats = (ctypes.c_int64 * 10)()
            lib.rk_sampler_stats(h, stats)
            self.ticks, self.late_ticks = stats[0], stats[1]
            if stats[2]:
                self.cpu_ns = stats[2]
            self.poll_rows, self.poll_ns, self.wakes = stats[6], stats[7], stats[8]
            self.slot0_ns = stats[9]
            for which in (0, 1, 2):
                n = stats[3 + which]
                if n <= 0:
                    continue
                w = len(self.extra_columns) + 1 if which == 0 else (_W_MID if which == 1 else 1)
                ticks = array("q", bytes(8 * n))
                t_ns = array("q", bytes(8 * n)) if which == 0 else None
                v = array("d", bytes(8 * n * w))
                n = lib.rk_sampler_drain(h, which, n, ticks.buffer_info()[0],
                                         t_ns.buffer_info()[0] if t_ns is not None else None,
                                         v.buffer_info()[0])
                col = lambda c: v[c * n:(c + 1) * n]  # noqa: E731
                if which == 0:
                    self._t.extend(t_ns[:n])
                    for k, arr in enumerate(self._extras):
                        arr.extend(col(k))
                    self._rss.extend(col(len(self._extras)))
                elif which == 1:
                    self._mid_rows.extend(ticks[:n])
                    for k, c in zip(self._meminfo_index, self.meminfo.columns):
                        self._mid[c].extend(col(k))
                    if self.heap is not None:
                        for k, c in enumerate(Heap.columns):
                            self._mid[c].extend(col(len(MEMINFO_FIELDS) + k))
                    if self.npu is not None:
                        for k, c in enumerate(NpuLoad.columns):
                            self._mid[c].extend(col(len(MEMINFO_FIELDS) + len(Heap.columns) + k))
                else:
                    self._slow_rows.extend(ticks[:n])
                    self._slow["pss_kb"].extend(col(0))

    # the thread -----------------------------------------------------------
    def _loop(self) -> None:
        # the C sampler's schedule (see _sampler.c), in Python.  time.sleep,
        # not Event.wait: a timed Event.wait costs ~3x the CPU per wake-up
        cpu0 = time.thread_time_ns()
        clock, sleep, p = time.perf_counter_ns, time.sleep, self.period_ns
        check_every = 1 if p >= _CHECK_NS else (_CHECK_NS + p // 2) // p
        sparse, window_slot, window_polls, polled_wakes, next_slot = False, 0, 0, 0, 1
        last_wake = clock()
        row = self._py_read(True, True)
        with self._py_lock:
            self._py_append(last_wake, row)
            self._next_mid, self._next_slow = self.mid_every, self.slow_every
        while not self._stopping:
            sleep(max(0, self._slot0 + next_slot * p - clock()) / 1e9)
            if self._stopping:
                break
            self.wakes += 1
            t = clock()
            slot = (t - self._slot0) // p
            if self._last_poll >= last_wake:
                polled_wakes += 1
            last_wake = t
            mid = slot > self._next_mid if sparse else slot >= self._next_mid
            slow = slot >= self._next_slow
            if mid or slow or (not sparse and slot > self._filled):
                row = self._py_read(mid, slow)
                with self._py_lock:
                    if mid:
                        self._next_mid = (slot // self.mid_every + 1) * self.mid_every
                    if slow:
                        self._next_slow = (slot // self.slow_every + 1) * self.slow_every
                    if mid or slow or slot > self._filled:  # a poll may have filled it meanwhile
                        self._py_append(t, row)
            if slot - window_slot >= check_every:
                supplied = self.poll_rows - window_polls if sparse else polled_wakes
                sparse = supplied * 4 >= (slot - window_slot) * 3
                window_slot, window_polls, polled_wakes = slot, self.poll_rows, 0
            next_slot = window_slot + check_every if sparse else slot + 1
            if not sparse:
                next_slot = min(next_slot, self._next_mid)
            next_slot = min(next_slot, self._next_slow)
        self.cpu_ns = time.thread_time_ns() - cpu0

    def start(self) -> "Probe":
        if self._h is not None:
            if self._lib.rk_sampler_start(self._h) != 0:
                raise RuntimeError("could not start the C sampler thread")
            self._c_running = True
            self._poll_due[0] = 0  # the next poll asks the sampler
            _running.add(self)
            return self
        with self._py_lock:
            self._stopping = False
            self._slot0 = time.perf_counter_ns()
            self.slot0_ns = self._slot0 - self.t0_ns
            self._filled, self._slots_filled = -1, 0
            self._poll_due[0] = 0
            self._thread = threading.Thread(target=self._loop, name="rknnlab-probe", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._h is not None:
            if getattr(self, "_c_running", False):
                self._c_running = False
                self._poll_due[0] = _NEVER  # no poll calls into C from now on (it may be freed)
                _running.discard(self)
                self._lib.rk_sampler_stop(self._h)
                self.sample()  # a last row, so the end state is always recorded
            self._drain()
            return
        if self._thread is not None:
            self._poll_due[0] = _NEVER
            self._stopping = True
            self._thread.join()
            with self._py_lock:
                self._thread = None
                self._poll_due[0] = _NEVER
                slots = (time.perf_counter_ns() - self._slot0) // self.period_ns
                self.late_ticks += max(0, slots - self._slots_filled)
            self.sample()  # a last row, so the end state is always recorded

    def close(self) -> None:
        self.stop()
        if self._h is not None:
            h, self._h = self._h, None
            self._poll_due[0] = _NEVER
            self._lib.rk_sampler_free(h)
        self.meminfo.close()
        self.process.close()
        if self.npu is not None:
            self.npu.close()

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None:  # never leave a C thread reading extra_values after it is freed
            self._h = None
            self._poll_due[0] = _NEVER  # a poll() that outlives us must not call into C
            self._lib.rk_sampler_free(h)

    def __enter__(self) -> "Probe":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take(self, start: int = 0) -> Dict[str, list]:
        """The rows from ``start`` on (counted from the probe's first row), as
        columns of plain lists, None for a value not read on that tick
        (JSON-ready; for streaming partial results).  Rows that
        :meth:`take_new` handed out are gone: ``start`` must not be before
        them."""
        self._drain()
        with self._py_lock:
            row0, n = self._row0, self._row0 + self._rows()
            if start < row0:
                raise ValueError(f"rows before {row0} were handed out by take_new(); start={start}")
            a, b = start - row0, n - row0
            out: Dict[str, list] = {"t_ns": self._t[a:b].tolist()}
            for name, arr in zip(self.extra_columns, self._extras):
                out[name] = [None if x != x else x for x in arr[a:b]]
            out["rss_kb"] = self._rss[a:b].tolist()
            for rows, tier in ((self._mid_rows, self._mid), (self._slow_rows, self._slow)):
                m = min([len(rows)] + [len(v) for v in tier.values()])
                cols = {k: [None] * (n - start) for k in tier}
                for j in range(m):
                    r = rows[j]
                    if start <= r < n:
                        for k, v in tier.items():
                            x = v[j]
                            cols[k][r - start] = None if x != x else x
                out.update(cols)
        return {c: out[c] for c in self.columns}

    def take_new(self) -> Dict[str, list]:
        """The rows since the last ``take_new`` (all rows the first time), as
        :meth:`take` gives them, and forget them: a probe drained this way
        holds only the rows of the last interval, so its memory stays flat
        however long the run (rknnlab.experiment streams its rows out so)."""
        with self._drain_lock:
            out = self.take(self._row0)
            n = len(out["t_ns"])
            with self._py_lock:
                upto = self._row0 + n
                for arr in [self._t, self._rss] + self._extras:
                    del arr[:n]
                for rows, tier in ((self._mid_rows, self._mid), (self._slow_rows, self._slow)):
                    k = 0
                    while k < len(rows) and rows[k] < upto:
                        k += 1
                    del rows[:k]
                    for v in tier.values():
                        del v[:k]
                self._row0 = upto
        return out

    @property
    def data(self) -> Dict[str, list]:
        """All rows so far, as columns (see :meth:`take`)."""
        return self.take()

    def _rows(self) -> int:
        return min([len(self._t), len(self._rss)] + [len(a) for a in self._extras])

    def __len__(self) -> int:
        self._drain()
        return self._rows()


def snapshot(pid: Optional[int] = None) -> Dict[str, Optional[int]]:
    """One reading of every source, as a dict (for a quick look in a notebook)."""
    p = Probe(hz=1, pid=pid, npu=True)
    try:
        p.sample()
        row = {k: v[0] for k, v in p.take().items()}
        row.pop("t_ns")
        return row
    finally:
        p.close()
