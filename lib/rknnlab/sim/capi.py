"""The Python half of the simulator's librknnrt.so for PCs (rknnlab/c/librknnrt_sim.c).

A C program linked with that library calls ``rknn_run(ctx, NULL)``; the library
hands the arguments here as integers (pointers are addresses in the program's
memory) and returns what the function of the same name returns.  Each function
maps the caller's structs onto ctypes with ``from_address`` (no copy: what the
simulator writes lands in the caller's struct), calls the one process-wide
:class:`rknnlab.sim.SimRuntime`, and turns its :class:`RknnError` into the C
return code, so a C program and a Python notebook get the same codes for the
same mistakes.  Nothing here decides semantics: the simulator does.

What the C side needs that Python's signatures do not carry:

- ``rknn_query``'s ``size``: a buffer smaller than the struct the command fills
  is refused with RKNN_ERR_PARAM_INVALID, after the simulator has checked the
  context and the command (ASSUMPTIONS A72).
- NULL for a pointer the call needs (the context out-parameter, the model, an
  attr, an array with n > 0): RKNN_ERR_PARAM_INVALID (A72).
- Which SoC to play: $RKNNLAB_SIM_SOC when set; otherwise the SoC the first
  model given to ``rknn_init`` was compiled for (a program that makes a mem
  before any context starts on rk3588, the course's SoC).

Every refusal prints one ``E RKNN:`` line on stderr, as librknnrt logs its
errors, naming the function, the code and the simulator's reason.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
import threading
import traceback
from typing import Any, Callable, List, Optional, TypeVar

from .. import ENV_SIM_SOC
from ..rknn import abi, errors
from .mems import MEM_POINTER
from .model import UnknownModelError, identify
from .outputs import one_inference_at_a_time
from .runtime import SimRuntime

#: the version of the contract with librknnrt_sim.c (its CAPI_ABI)
ABI = 2

_lock = threading.Lock()
_runtime: Optional[SimRuntime] = None
_settled = False            # a context or a mem exists: the SoC can no longer change
_announced = False
_embedding = ""             # what starting Python cost, for the first line printed

F = TypeVar("F", bound=Callable[..., int])


def started(abi_version: int, major: int, minor: int, rss_before_kb: int, rss_after_kb: int,
            embedded: int) -> int:
    """Called once by the C library after it imported this module: ``embedded`` when it
    started Python itself (a C program), 0 when it was loaded into a Python process."""
    global _embedding
    if abi_version != ABI:
        raise RuntimeError(f"librknnrt_sim.c speaks capi ABI {abi_version}, rknnlab.sim.capi {ABI}: "
                           "rebuild the library (python -m rknnlab cc rebuilds it when its source changes)")
    if not embedded:
        _embedding = f"in this Python {major}.{minor} process"
        return 0
    one_inference_at_a_time()  # the whole process is the C program's: its RSS stays readable
    grown = rss_after_kb - rss_before_kb if rss_before_kb >= 0 and rss_after_kb >= 0 else None
    _embedding = (f"Python {major}.{minor} and the simulator started: "
                  + (f"+{grown / 1024:.1f} MB RSS" if grown is not None else "RSS not readable"))
    return 0


def runtime() -> SimRuntime:
    """The simulator every C call of this process drives."""
    global _runtime
    with _lock:
        if _runtime is None:
            soc = os.environ.get(ENV_SIM_SOC)
            try:
                _runtime = SimRuntime(soc or "rk3588")
            except ValueError as exc:
                raise ValueError(f"{ENV_SIM_SOC}={soc}: {exc}") from None
        return _runtime


def _settle() -> None:
    global _settled
    _settled = True


def _announce() -> None:
    global _announced
    if _announced or _runtime is None:
        return
    _announced = True
    sys.stderr.write(f"rknnlab: librknnrt for PCs, simulated {_runtime.soc.upper()} "
                     f"({_embedding or 'Python started'})\n")


def _log_error(exc: errors.RknnError) -> None:
    _announce()
    # the simulator's Python advice, in the words a C program's user acts on
    detail = re.sub(r"SimRuntime\(soc='(\w+)'\)", r"set RKNNLAB_SIM_SOC=\1", exc.detail)
    sys.stderr.write(f"E RKNN: [sim] {exc.function} returned {exc.code} ({exc.name})"
                     + (f": {detail}" if detail else "") + "\n")


def _c_function(fallback: int) -> Callable[[F], F]:
    """Run a C entry point: RknnError -> its code (and an E line); anything else
    -> ``fallback`` with the traceback, since a C caller cannot see an exception."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: int) -> int:
            try:
                result = fn(*args)
            except errors.RknnError as exc:
                _log_error(exc)
                result = exc.code if fallback < 0 else 0
            except (ValueError, OSError) as exc:  # the setup (RKNNLAB_SIM_SOC), the host's limits
                sys.stderr.write(f"E RKNN: [sim] {fn.__name__}: {exc}\n")
                result = fallback
            except Exception:  # a simulator bug or a bad pointer's consequence: say where
                sys.stderr.write(f"E RKNN: [sim] {fn.__name__} failed inside the simulator:\n")
                traceback.print_exc()
                result = fallback
            _announce()
            return result
        return call  # type: ignore[return-value]
    return wrap


def _refuse(function: str, detail: str, code: int = abi.RKNN_ERR_PARAM_INVALID) -> errors.RknnError:
    return errors.error_for(code, function, detail)


def _need(address: int, what: str, function: str) -> None:
    if not address:
        raise _refuse(function, f"{what} is NULL")


def _array(cls: Any, address: int, n: int, what: str, function: str) -> List[Any]:
    """The caller's C array of ``n`` structs, in place."""
    if n == 0:
        return []
    _need(address, what, function)
    return list((cls * n).from_address(address))


def _mem(address: int) -> Any:
    """The caller's rknn_tensor_mem pointer as the simulator takes one."""
    return abi.rknn_tensor_mem.from_address(address) if address else MEM_POINTER()


def _mem_address(mem: Any) -> int:
    return ctypes.addressof(mem.contents)


# ----------------------------------------------------------------------------- lifecycle
@_c_function(abi.RKNN_ERR_FAIL)
def rknn_init(context: int, model: int, size: int, flag: int, extend: int) -> int:
    fn = "rknn_init"
    _need(context, "context (the rknn_context* to fill)", fn)
    _need(model, "model", fn)
    ext = abi.rknn_init_extend.from_address(extend) if extend else None
    source: Any = os.fsdecode(ctypes.string_at(model)) if size == 0 else model
    length = None if size == 0 else size
    try:
        handle = runtime().init(source, flag, ext, size=length)
    except errors.RknnError as exc:
        if exc.code != abi.RKNN_ERR_TARGET_PLATFORM_UNMATCH or not _replay_as_models_soc(source, length):
            raise
        handle = runtime().init(source, flag, ext, size=length)
    try:
        _prepare_values(handle)
    except BaseException:  # a failed rknn_init leaves no context behind
        runtime().destroy(handle)
        raise
    abi.rknn_context.from_address(context).value = handle
    _settle()
    return 0


def _rss_kb() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _prepare_values(handle: int) -> None:
    """Load the model's onnxruntime session inside rknn_init and say what it cost, so
    that a C program's RSS read after rknn_init does not count it as growth later."""
    announced_before = _announced
    before = _rss_kb()
    name = runtime().prepare_values(handle)
    if name is not None:
        if not announced_before:
            _announce()
        sys.stderr.write(f"rknnlab: onnxruntime for {name}'s outputs, loaded and run in rknn_init: "
                         f"+{(_rss_kb() - before) / 1024:.1f} MB RSS\n")


def _replay_as_models_soc(source: Any, size: Optional[int]) -> bool:
    """Before anything exists and without $RKNNLAB_SIM_SOC, play the SoC of the first
    model (True when the runtime changed and init should be tried again)."""
    global _runtime
    if _settled or os.environ.get(ENV_SIM_SOC):
        return False
    try:
        if isinstance(source, str):
            with open(source, "rb") as f:
                data = f.read()
        else:
            data = ctypes.string_at(source, size or 0)
        target = identify(data).target
    except (OSError, UnknownModelError):
        return False
    with _lock:
        if _runtime is not None:
            _runtime.close()
        _runtime = SimRuntime(target)
    if _announced:  # the first line named the SoC played before this model came
        sys.stderr.write(f"rknnlab: now simulated {target.upper()}, the SoC this model was built for\n")
    return True


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_dup_context(context_in: int, context_out: int) -> int:
    fn = "rknn_dup_context"
    _need(context_in, "context_in", fn)
    _need(context_out, "context_out", fn)
    handle = runtime().dup_context(abi.rknn_context.from_address(context_in).value)
    abi.rknn_context.from_address(context_out).value = handle
    return 0


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_destroy(context: int) -> int:
    return runtime().destroy(context)


# ----------------------------------------------------------------------------- information
@_c_function(abi.RKNN_ERR_FAIL)
def rknn_query(context: int, cmd: int, info: int, size: int) -> int:
    fn = "rknn_query"
    expected = abi.QUERY_STRUCTS.get(cmd)
    if expected is None:  # the simulator names an unknown command after checking the context
        runtime().query(context, cmd)
        raise _refuse(fn, f"cmd {cmd} is not a query command")
    _need(info, "info", fn)
    if size < ctypes.sizeof(expected):
        # refused without asking (PERF_DETAIL would replace the text an earlier answer points
        # to), after the context is known to be valid, as for any other call
        runtime().query(context, abi.RKNN_QUERY_IN_OUT_NUM)
        raise _refuse(fn, f"{abi.QUERY_NAMES.get(cmd, cmd)} fills an {expected.__name__} of "
                          f"{ctypes.sizeof(expected)} B; size is {size}")
    # in place: the caller's fields that a query reads (an attr's index) are there, and only
    # the struct's own bytes are written, whatever larger size the caller gives
    runtime().query(context, cmd, expected.from_address(info))
    return 0


# ----------------------------------------------------------------------------- inference
@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_core_mask(context: int, core_mask: int) -> int:
    return runtime().set_core_mask(context, core_mask)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_batch_core_num(context: int, core_num: int) -> int:
    return runtime().set_batch_core_num(context, core_num)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_input_shapes(context: int, n_inputs: int, attr: int) -> int:
    attrs = _array(abi.rknn_tensor_attr, attr, n_inputs, "attr", "rknn_set_input_shapes")
    return runtime().set_input_shapes(context, attrs)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_input_shape(context: int, attr: int) -> int:
    """The deprecated one-input form: the same as rknn_set_input_shapes with that attr,
    for a model with one input; a model with more inputs needs the new call (A73)."""
    fn = "rknn_set_input_shape"
    _need(attr, "attr", fn)
    rt = runtime()
    count = rt.query(context, abi.RKNN_QUERY_IN_OUT_NUM)
    if count.n_input != 1:
        raise _refuse(fn, f"the model has {count.n_input} inputs: set every input's shape at once with "
                          "rknn_set_input_shapes (rknn_set_input_shape is deprecated)")
    return rt.set_input_shapes(context, [abi.rknn_tensor_attr.from_address(attr)])


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_inputs_set(context: int, n_inputs: int, inputs: int) -> int:
    return runtime().inputs_set(context, _array(abi.rknn_input, inputs, n_inputs, "inputs",
                                                "rknn_inputs_set"))


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_run(context: int, extend: int) -> int:
    return runtime().run(context, abi.rknn_run_extend.from_address(extend) if extend else None)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_wait(context: int, extend: int) -> int:
    return runtime().wait(context, abi.rknn_run_extend.from_address(extend) if extend else None)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_outputs_get(context: int, n_outputs: int, outputs: int, extend: int) -> int:
    items = _array(abi.rknn_output, outputs, n_outputs, "outputs", "rknn_outputs_get")
    return runtime().outputs_get(context, items,
                                 abi.rknn_output_extend.from_address(extend) if extend else None)


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_outputs_release(context: int, n_outputs: int, outputs: int) -> int:
    items = _array(abi.rknn_output, outputs, n_outputs, "outputs", "rknn_outputs_release")
    return runtime().outputs_release(context, items)


# ----------------------------------------------------------------------------- memory
@_c_function(0)
def rknn_create_mem(ctx: int, size: int) -> int:
    mem = _mem_address(runtime().create_mem(ctx, size))
    _settle()
    return mem


@_c_function(0)
def rknn_create_mem2(ctx: int, size: int, alloc_flags: int) -> int:
    mem = _mem_address(runtime().create_mem2(ctx, size, alloc_flags))
    _settle()
    return mem


@_c_function(0)
def rknn_create_mem_from_fd(ctx: int, fd: int, virt_addr: int, size: int, offset: int) -> int:
    mem = _mem_address(runtime().create_mem_from_fd(ctx, fd, virt_addr, size, offset))
    _settle()
    return mem


@_c_function(0)
def rknn_create_mem_from_phys(ctx: int, phys_addr: int, virt_addr: int, size: int) -> int:
    mem = _mem_address(runtime().create_mem_from_phys(ctx, phys_addr, virt_addr, size))
    _settle()
    return mem


@_c_function(0)
def rknn_create_mem_from_mb_blk(ctx: int, mb_blk: int, offset: int) -> int:
    """RV1103/RV1106 only (their media buffer blocks): NULL on the SoCs the simulator plays."""
    rt = runtime()
    if ctx:
        rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)  # an invalid context is named as such first
    raise _refuse("rknn_create_mem_from_mb_blk",
                  f"MB_BLK media buffers exist on RV1103/RV1106 only, not on the {rt.soc} the simulator "
                  "plays: use rknn_create_mem or rknn_create_mem_from_fd")


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_destroy_mem(ctx: int, mem: int) -> int:
    return runtime().destroy_mem(ctx, _mem(mem))


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_weight_mem(ctx: int, mem: int) -> int:
    return runtime().set_weight_mem(ctx, _mem(mem))


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_internal_mem(ctx: int, mem: int) -> int:
    return runtime().set_internal_mem(ctx, _mem(mem))


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_set_io_mem(ctx: int, mem: int, attr: int) -> int:
    _need(attr, "attr", "rknn_set_io_mem")
    return runtime().set_io_mem(ctx, _mem(mem), abi.rknn_tensor_attr.from_address(attr))


@_c_function(abi.RKNN_ERR_FAIL)
def rknn_mem_sync(context: int, mem: int, mode: int) -> int:
    return runtime().mem_sync(context, _mem(mem), mode)
