"""Every runtime call, timed: the proxy a variant gets as ``lab.rt``.

:class:`InstrumentedRuntime` has the same methods as the runtime it wraps
(so a variant reads like the C it teaches); each call appends one row to the
:class:`Recorder`: function, iteration, stage, start, duration, bytes moved
or allocated, thread, context, and whether it raised.  Phases are the
function names.  After the calls that change device memory (init, the
create_mem family, destroy_mem, the set_*_mem binders, destroy) it asks the
runtime for RKNN_QUERY_MEM_SIZE on every live context, unrecorded, and keeps
the sum of ``total_dma_allocated_size`` as ``recorder.dma_bytes``, which the
memory sampler copies into each sample (:meth:`Recorder.share_state` mirrors
iteration, stage and DMA total into the array the sampler reads).  After
every call (outside its timing, after the DMA total is updated) it calls
``recorder.poll`` (rknnlab.probe.Probe.poll, when a probe runs), which takes
a memory sample if one is due: the samples then fall between calls, and the
sampler's thread need not wake 200 times a second.  With
``rknnlab.run(..., sample_calls=True)`` the poll is Probe.sample: a full
sample (every source) after every call and every ``timed`` block.
"""
from __future__ import annotations

import os
import threading
from array import array
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from ..rknn import abi

CALL_COLUMNS = ("function", "iteration", "stage", "t_start_ns", "duration_ns", "bytes",
                "thread", "ctx", "core_mask", "ok")
ITERATION_COLUMNS = ("iteration", "stage", "t_start_ns", "duration_ns")

#: calls after which the runtime's DMA total may have changed
DMA_CHANGING = frozenset({
    "init", "dup_context", "destroy", "create_mem", "create_mem2", "create_mem_from_fd",
    "create_mem_from_phys", "destroy_mem", "set_io_mem", "set_weight_mem", "set_internal_mem",
})


STAGES = ("setup", "warmup", "measure", "teardown")
_STAGE_CODE = {name: i for i, name in enumerate(STAGES)}
_NONE = -1  # stands for None in the integer arrays
_NAN = float("nan")  # stands for None in the sampler's state array


class _Table:
    """Typed columns in fixed-capacity ring buffers (``array.array``, preallocated):
    rows are written at ``written % capacity`` and handed out once by
    :meth:`take`, which frees their slots.  Writing a row allocates nothing,
    so a recording that is drained as it goes adds no memory to the process
    it measures.  Not locked: the :class:`Recorder` holds its lock around
    both ends."""

    def __init__(self, typecodes: Dict[str, str], capacity: int) -> None:
        self.typecodes = dict(typecodes)
        self.capacity = int(capacity)
        self.cols = {k: array(tc, bytes(array(tc).itemsize * self.capacity))
                     for k, tc in self.typecodes.items()}
        self.written = 0  # rows written since the start
        self.taken = 0    # rows handed out by take()

    def pending(self) -> int:
        return self.written - self.taken

    def grow(self) -> None:
        """Double the capacity, keeping the rows not taken yet (for a Recorder
        nobody drains; the child drains instead)."""
        rows = self._span(self.taken, self.written)
        self.capacity *= 2
        self.cols = {k: array(tc, bytes(array(tc).itemsize * self.capacity))
                     for k, tc in self.typecodes.items()}
        n = self.written - self.taken
        for k, col in self.cols.items():
            col[0:n] = rows[k]
        self.written, self.taken = n, 0

    def put(self, values: tuple) -> None:
        """One row (values in column order); the caller makes room first."""
        j = self.written % self.capacity
        for col, v in zip(self.cols.values(), values):
            col[j] = v
        self.written += 1

    def _span(self, a: int, b: int) -> Dict[str, array]:
        cap = self.capacity
        i, j = a % cap, b % cap
        if b - a <= 0:
            return {k: col[0:0] for k, col in self.cols.items()}
        if i < j:
            return {k: col[i:j] for k, col in self.cols.items()}
        return {k: col[i:] + col[:j] for k, col in self.cols.items()}

    def take(self) -> Dict[str, array]:
        """The rows written since the last take (their slots are free again)."""
        rows = self._span(self.taken, self.written)
        self.taken = self.written
        return rows

    def peek(self) -> Dict[str, array]:
        """The rows not taken yet, left in place."""
        return self._span(self.taken, self.written)


_CALL_TYPES = {"function": "H", "iteration": "q", "stage": "b", "t_start_ns": "q",
               "duration_ns": "q", "bytes": "q", "thread": "H", "ctx": "q", "core_mask": "q",
               "ok": "b"}
_ITERATION_TYPES = {"iteration": "q", "stage": "b", "t_start_ns": "q", "duration_ns": "q"}


class Recorder:
    """Calls and iterations as typed column arrays, and the state samples copy.

    Storage is two fixed-capacity ring buffers of ``array.array`` columns
    (:class:`_Table`, 54 bytes a call and 25 an iteration, allocated up
    front): recording a row allocates nothing.  Whoever collects the rows
    takes them with :meth:`take_calls` / :meth:`take_iterations` as the run
    goes (rknnlab.experiment's child process streams them to the parent a
    few times a second), so the recording does not grow inside the process
    it measures.  When a buffer fills before it was drained, the recorder
    calls :attr:`on_full` (the child: send what is pending now, from the
    variant's thread) or, with no ``on_full``, doubles the buffer (a
    Recorder used on its own keeps everything).  :meth:`call_columns` and
    :meth:`iteration_columns` give the rows not taken yet as JSON-ready
    lists (names, None)."""

    def __init__(self, t0_ns: Optional[int] = None, capacity: int = 1 << 14) -> None:
        self.t0_ns = time.perf_counter_ns() if t0_ns is None else t0_ns
        self._calls = _Table(_CALL_TYPES, capacity)
        self._iterations = _Table(_ITERATION_TYPES, capacity)
        #: called (without the recorder's lock) when a buffer is about to fill:
        #: it should take the rows (take_calls / take_iterations); None: grow
        self.on_full: Optional[Callable[[], None]] = None
        #: ctx -> the mask of its last rknn_set_core_mask (RKNN_NPU_CORE_AUTO = 0 before)
        self.core_masks: Dict[int, int] = {}
        self.functions: List[str] = []
        self._function_code: Dict[str, int] = {}
        # Size the name table now: a dict that grows inside a measured step shows up as
        # heap growth of that step (Python 3.9 resizes at different sizes than 3.11).
        # Deleted keys leave the table at its grown size.
        for placeholder in range(128):
            self._function_code[str(placeholder)] = 0
        for placeholder in range(128):
            del self._function_code[str(placeholder)]
        #: where iteration, stage_code and dma_bytes are mirrored (see share_state)
        self._shared: Any = None
        self._iteration: Optional[int] = None
        self._stage_code = 0
        self._dma_bytes: Optional[int] = None
        self.sdk: Dict[str, str] = {}
        #: called after every recorded call: a memory sampler's poll
        #: (rknnlab.probe.Probe.poll), or None
        self.poll: Optional[Callable[[], None]] = None
        self._threads: Dict[int, int] = {}
        self._lock = threading.Lock()
        #: held by the process's other Python threads while they work (the harness's
        #: streaming thread, while it sends what was recorded): code that reads the malloc
        #: heap around one call holds it too, so another thread's allocations do not land
        #: between its two readings (re-entrant: the variant's own thread sends when a
        #: buffer is full)
        self.quiet = threading.RLock()

    def share_state(self, values: Any) -> None:
        """Mirror ``iteration``, ``stage_code`` and ``dma_bytes`` into
        ``values[0:3]`` (floats, NaN for None) on every change: the memory
        sampler (rknnlab.probe.Probe.extra_values) copies them each tick
        without calling Python, so it also sees the moments between two
        iterations: there the mirror keeps the iteration just finished (a
        sample in the warm-up or measured stage always has an iteration
        number), and it goes to NaN when the stage changes outside an
        iteration (teardown).  ``None`` stops mirroring."""
        self._shared = values
        if values is not None:
            for k, v in enumerate((self._iteration, self._stage_code, self._dma_bytes)):
                values[k] = _NAN if v is None else v

    @property
    def iteration(self) -> Optional[int]:
        """The iteration in progress (None between iterations)."""
        return self._iteration

    @iteration.setter
    def iteration(self, value: Optional[int]) -> None:
        self._iteration = value
        if self._shared is not None and value is not None:
            self._shared[0] = value

    @property
    def stage_code(self) -> int:
        """The index of the current stage in STAGES."""
        return self._stage_code

    @stage_code.setter
    def stage_code(self, value: int) -> None:
        self._stage_code = value
        shared = self._shared
        if shared is not None:
            shared[1] = value
            if self._iteration is None:
                shared[0] = _NAN

    @property
    def dma_bytes(self) -> Optional[int]:
        """The runtime's DMA total after the last call that changes it (None before)."""
        return self._dma_bytes

    @dma_bytes.setter
    def dma_bytes(self, value: Optional[int]) -> None:
        self._dma_bytes = value
        if self._shared is not None:
            self._shared[2] = _NAN if value is None else value

    def dma_pending(self) -> None:
        """A call that may change the DMA total has started: the samples taken
        until it is read again (after the call) hold NaN.  Without this, the
        sampler's thread could take a row after the call ended but before the
        total was read, showing the old total as the state after the call."""
        if self._shared is not None:
            self._shared[2] = _NAN

    def dma_settled(self) -> None:
        """The total kept is valid again (the call failed, or totals are not tracked)."""
        if self._shared is not None:
            self._shared[2] = _NAN if self._dma_bytes is None else self._dma_bytes

    @property
    def stage(self) -> str:
        return STAGES[self.stage_code]

    @stage.setter
    def stage(self, name: str) -> None:
        self.stage_code = _STAGE_CODE[name]

    def thread_lane(self) -> int:
        ident = threading.get_ident()
        lane = self._threads.get(ident)
        if lane is None:
            with self._lock:
                lane = self._threads.setdefault(ident, len(self._threads))
        return lane

    def function_code(self, name: str) -> int:
        code = self._function_code.get(name)
        if code is None:
            with self._lock:
                if name not in self._function_code:
                    self._function_code[name] = len(self.functions)
                    self.functions.append(name)
                code = self._function_code[name]
        return code

    def _put(self, table: _Table, row: tuple) -> None:
        # room first, outside the lock (on_full takes the rows, which locks);
        # the margin covers other threads writing between the check and the lock
        if table.capacity - table.pending() <= 256 and self.on_full is not None:
            self.on_full()
        with self._lock:  # rows stay whole when pipeline threads record at once
            if table.pending() >= table.capacity:
                table.grow()
            table.put(row)

    def add_call(self, function: Union[str, int], t_start: int, duration: int, nbytes: Optional[int],
                 ctx: Optional[int], ok: bool) -> None:
        """One call; ``function`` is a name or a code from :meth:`function_code`."""
        lane = self._threads.get(threading.get_ident())
        if lane is None:
            lane = self.thread_lane()
        code = function if isinstance(function, int) else self.function_code(function)
        it = self._iteration
        self._put(self._calls, (
            code, _NONE if it is None else it, self._stage_code, t_start - self.t0_ns, duration,
            _NONE if nbytes is None else int(nbytes), lane,
            _NONE if ctx is None or ctx < 0 or ctx >= 1 << 63 else ctx,
            self.core_masks.get(ctx, 0) if ctx is not None else _NONE, 1 if ok else 0))

    def add_iteration(self, i: int, stage: str, t_start: int, duration: int) -> None:
        self._put(self._iterations, (i, _STAGE_CODE[stage], t_start - self.t0_ns, duration))

    @property
    def calls_recorded(self) -> int:
        """Calls recorded since the start (taken or not)."""
        return self._calls.written

    @property
    def iterations_recorded(self) -> int:
        """Iterations recorded since the start (taken or not)."""
        return self._iterations.written

    def _call_lists(self, c: Dict[str, array]) -> Dict[str, list]:
        names, stages = self.functions, STAGES
        opt = lambda col: [None if x == _NONE else x for x in c[col]]  # noqa: E731
        return {"function": [names[x] for x in c["function"]], "iteration": opt("iteration"),
                "stage": [stages[x] for x in c["stage"]], "t_start_ns": c["t_start_ns"].tolist(),
                "duration_ns": c["duration_ns"].tolist(), "bytes": opt("bytes"),
                "thread": c["thread"].tolist(), "ctx": opt("ctx"), "core_mask": opt("core_mask"),
                "ok": [bool(x) for x in c["ok"]]}

    @staticmethod
    def _iteration_lists(it: Dict[str, array]) -> Dict[str, list]:
        return {"iteration": it["iteration"].tolist(), "stage": [STAGES[x] for x in it["stage"]],
                "t_start_ns": it["t_start_ns"].tolist(), "duration_ns": it["duration_ns"].tolist()}

    def take_calls(self) -> Dict[str, list]:
        """The calls recorded since the last take, as JSON-ready columns; their
        slots are reused."""
        with self._lock:
            rows = self._calls.take()
        return self._call_lists(rows)

    def take_iterations(self) -> Dict[str, list]:
        """The iterations recorded since the last take (see :meth:`take_calls`)."""
        with self._lock:
            rows = self._iterations.take()
        return self._iteration_lists(rows)

    def call_columns(self) -> Dict[str, list]:
        """The calls not taken yet (all of them, when nobody takes), left in place."""
        with self._lock:
            rows = self._calls.peek()
        return self._call_lists(rows)

    def iteration_columns(self) -> Dict[str, list]:
        """The iterations not taken yet, left in place."""
        with self._lock:
            rows = self._iterations.peek()
        return self._iteration_lists(rows)

    @contextmanager
    def timed(self, function: str, nbytes: Optional[int] = None) -> Iterator[None]:
        """Record a block as if it were a runtime call named ``function``."""
        t = time.perf_counter_ns()
        ok = False
        try:
            yield
            ok = True
        finally:
            self.add_call(function, t, time.perf_counter_ns() - t, nbytes, None, ok)
            if self.poll is not None:
                self.poll()


def _arg(args: tuple, kwargs: dict, pos: int, name: str, default: Any = None) -> Any:
    if len(args) > pos:
        return args[pos]
    return kwargs.get(name, default)


def _mem_size(mem: Any) -> Optional[int]:
    try:
        return int(mem.contents.size)
    except (AttributeError, ValueError):
        try:
            return int(mem.size)
        except (AttributeError, TypeError, ValueError):
            return None


def _sizes(seq: Any) -> Optional[int]:
    try:
        return sum(int(s.size) for s in seq)
    except (AttributeError, TypeError, ValueError):
        return None


def _model_bytes(args: tuple, kwargs: dict) -> Optional[int]:
    model = _arg(args, kwargs, 0, "model")
    size = _arg(args, kwargs, 3, "size")
    if size:
        return int(size)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return len(model)
    try:
        return os.path.getsize(model)
    except (OSError, TypeError, ValueError):
        return None


# bytes a call moves or allocates: (before the call, after the call)
_BEFORE: Dict[str, Callable[[tuple, dict], Optional[int]]] = {
    "init": _model_bytes,
    "inputs_set": lambda a, k: _sizes(_arg(a, k, 1, "inputs")),
    "outputs_release": lambda a, k: _sizes(_arg(a, k, 1, "outputs")),
    "create_mem": lambda a, k: _arg(a, k, 1, "size"),
    "create_mem2": lambda a, k: _arg(a, k, 1, "size"),
    "create_mem_from_fd": lambda a, k: _arg(a, k, 3, "size"),
    "create_mem_from_phys": lambda a, k: _arg(a, k, 3, "size"),
    "destroy_mem": lambda a, k: _mem_size(_arg(a, k, 1, "mem")),
    "set_io_mem": lambda a, k: _mem_size(_arg(a, k, 1, "mem")),
    "set_weight_mem": lambda a, k: _mem_size(_arg(a, k, 1, "mem")),
    "set_internal_mem": lambda a, k: _mem_size(_arg(a, k, 1, "mem")),
    "mem_sync": lambda a, k: _mem_size(_arg(a, k, 1, "mem")),
}
_AFTER: Dict[str, Callable[[tuple, dict], Optional[int]]] = {
    "outputs_get": lambda a, k: _sizes(_arg(a, k, 1, "outputs")),
}


class InstrumentedRuntime:
    """A Runtime whose every public method is timed into a :class:`Recorder`.

    ``lab.rt.inner`` is the runtime itself (calls on it are not recorded).
    """

    def __init__(self, inner: Any, recorder: Recorder, track_dma: bool = True) -> None:
        self.inner = inner
        self.recorder = recorder
        self.backend = getattr(inner, "backend", "")
        self.track_dma = track_dma
        self._contexts: List[int] = []
        for name in dir(inner):
            if name.startswith("_") or name in ("close", "backend"):
                continue
            attr = getattr(inner, name, None)
            if callable(attr):
                setattr(self, name, self._wrap(name, attr))

    def close(self) -> None:
        self.inner.close()

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        rec = self.recorder
        before = _BEFORE.get(name)
        after = _AFTER.get(name)
        dma = name in DMA_CHANGING
        takes_ctx = name != "init"
        clock = time.perf_counter_ns
        code = rec.function_code(name)
        add = rec.add_call
        core = name == "set_core_mask"

        def call(*args: Any, **kwargs: Any) -> Any:
            nbytes = before(args, kwargs) if before is not None else None
            if dma:  # until the new total is read, a sample holds NaN, not the old total
                rec.dma_pending()
            ok = False
            t = clock()
            try:
                result = fn(*args, **kwargs)
                ok = True
            finally:
                d = clock() - t
                if after is not None and ok:
                    nbytes = after(args, kwargs)
                if takes_ctx:
                    ctx = args[0] if args else kwargs.get("ctx")
                else:
                    ctx = result if ok else None
                add(code, t, d, nbytes, ctx if type(ctx) is int else None, ok)
                if ok and dma:  # before the poll: a sample taken now holds the new DMA total
                    self._after_memory_call(name, args, kwargs, result)
                if dma and not (ok and self.track_dma):
                    rec.dma_settled()
                poll = rec.poll
                if poll is not None:
                    poll()
            if ok and core:
                rec.core_masks[args[0] if args else kwargs.get("ctx")] = (
                    args[1] if len(args) > 1 else kwargs.get("core_mask"))
            return result

        call.__name__ = name
        call.__doc__ = fn.__doc__
        call.__wrapped__ = fn  # type: ignore[attr-defined]
        return call

    def _after_memory_call(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        if name in ("init", "dup_context") and isinstance(result, int):
            self._contexts.append(result)
            if not self.recorder.sdk:
                self._read_sdk(result)
        elif name == "destroy":
            ctx = _arg(args, kwargs, 0, "ctx")
            if ctx in self._contexts:
                self._contexts.remove(ctx)
        if self.track_dma:
            total = 0
            for ctx in self._contexts:
                try:
                    total += int(self.inner.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size)
                except Exception:  # a context that cannot answer (model-info-only, ...)
                    pass
            self.recorder.dma_bytes = total

    def _read_sdk(self, ctx: int) -> None:
        try:
            v = self.inner.query(ctx, abi.RKNN_QUERY_SDK_VERSION)
            self.recorder.sdk = {"api_version": v.api_version.decode("utf-8", "replace"),
                                 "drv_version": v.drv_version.decode("utf-8", "replace")}
        except Exception as exc:
            self.recorder.sdk = {"error": f"{type(exc).__name__}: {exc}"}
