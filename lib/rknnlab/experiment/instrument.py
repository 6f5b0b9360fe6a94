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
every call (outside its timing) it calls ``recorder.poll``
(rknnlab.probe.Probe.poll, when a probe runs), which takes a memory sample
if one is due: the samples then fall between calls, and the sampler's
thread need not wake 200 times a second.
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


class Recorder:
    """Calls and iterations as typed column arrays, and the state samples copy.

    Storage is ``array.array`` (8 bytes or less a value, no Python object per
    value): the recorder's own memory grows by ~60 bytes a call, which keeps
    the harness out of the RSS it measures.  :meth:`call_columns` and
    :meth:`iteration_columns` give JSON-ready lists (names, None)."""

    def __init__(self, t0_ns: Optional[int] = None) -> None:
        self.t0_ns = time.perf_counter_ns() if t0_ns is None else t0_ns
        self.calls: Dict[str, array] = {
            "function": array("H"), "iteration": array("q"), "stage": array("b"),
            "t_start_ns": array("q"), "duration_ns": array("q"), "bytes": array("q"),
            "thread": array("H"), "ctx": array("q"), "core_mask": array("q"), "ok": array("b")}
        #: ctx -> the mask of its last rknn_set_core_mask (RKNN_NPU_CORE_AUTO = 0 before)
        self.core_masks: Dict[int, int] = {}
        self.iterations: Dict[str, array] = {
            "iteration": array("q"), "stage": array("b"), "t_start_ns": array("q"),
            "duration_ns": array("q")}
        self.functions: List[str] = []
        self._function_code: Dict[str, int] = {}
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

    def add_call(self, function: Union[str, int], t_start: int, duration: int, nbytes: Optional[int],
                 ctx: Optional[int], ok: bool) -> None:
        """One call; ``function`` is a name or a code from :meth:`function_code`."""
        c = self.calls
        lane = self._threads.get(threading.get_ident())
        if lane is None:
            lane = self.thread_lane()
        code = function if isinstance(function, int) else self.function_code(function)
        it = self._iteration
        with self._lock:  # rows stay aligned when pipeline threads call at once
            c["function"].append(code)
            c["iteration"].append(_NONE if it is None else it)
            c["stage"].append(self._stage_code)
            c["t_start_ns"].append(t_start - self.t0_ns)
            c["duration_ns"].append(duration)
            c["bytes"].append(_NONE if nbytes is None else int(nbytes))
            c["thread"].append(lane)
            c["ctx"].append(_NONE if ctx is None or ctx < 0 or ctx >= 1 << 63 else ctx)
            c["core_mask"].append(self.core_masks.get(ctx, 0) if ctx is not None else _NONE)
            c["ok"].append(1 if ok else 0)

    def add_iteration(self, i: int, stage: str, t_start: int, duration: int) -> None:
        it = self.iterations
        with self._lock:
            it["iteration"].append(i)
            it["stage"].append(_STAGE_CODE[stage])
            it["t_start_ns"].append(t_start - self.t0_ns)
            it["duration_ns"].append(duration)

    def call_columns(self) -> Dict[str, list]:
        c = self.calls
        n = min(len(v) for v in c.values())
        names, stages = self.functions, STAGES
        opt = lambda col: [None if x == _NONE else x for x in c[col][:n]]  # noqa: E731
        return {"function": [names[x] for x in c["function"][:n]], "iteration": opt("iteration"),
                "stage": [stages[x] for x in c["stage"][:n]], "t_start_ns": c["t_start_ns"][:n].tolist(),
                "duration_ns": c["duration_ns"][:n].tolist(), "bytes": opt("bytes"),
                "thread": c["thread"][:n].tolist(), "ctx": opt("ctx"), "core_mask": opt("core_mask"),
                "ok": [bool(x) for x in c["ok"][:n]]}

    def iteration_columns(self, start: int = 0) -> Dict[str, list]:
        it = self.iterations
        n = min(len(v) for v in it.values())
        return {"iteration": it["iteration"][start:n].tolist(),
                "stage": [STAGES[x] for x in it["stage"][start:n]],
                "t_start_ns": it["t_start_ns"][start:n].tolist(),
                "duration_ns": it["duration_ns"][start:n].tolist()}

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
                poll = rec.poll
                if poll is not None:
                    poll()
            if ok and dma:
                self._after_memory_call(name, args, kwargs, result)
            elif ok and core:
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
