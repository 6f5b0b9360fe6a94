"""Exceptions for RKNN return codes, and for a runtime library that is missing.

A negative return from a runtime function becomes the exception class of
that code, carrying the code, its C name, the C function that returned it
and a hint on the usual cause.  ``except RknnError`` catches them all.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Type

from . import abi


# Every hint names what to look at, in this order: the runtime's own log (RKNN_LOG_LEVEL is read
# by librknnrt, so it must be set before the process starts), the kernel's log (dmesg: the rknpu
# driver's lines) and the course's doctor (device access, driver and runtime versions). A code
# names a kind of problem, not its cause: the log says which.
_LOG = "RKNN_LOG_LEVEL=4 set before Python starts"


class RknnError(Exception):
    """A runtime function returned a negative RKNN error code."""

    #: the RKNN_ERR_* value this class stands for (None on the base class)
    code_value: Optional[int] = None
    #: what usually causes the code, and what to check
    hint: str = f"read the runtime's own log ({_LOG}); check dmesg and `python -m rknnlab doctor`."

    def __init__(self, code: int, function: str, detail: str = "") -> None:
        self.code = code
        self.name = abi.ERROR_NAMES.get(code, f"unknown error code {code}")
        self.function = function
        self.detail = detail
        message = f"{function} returned {code} ({self.name})"
        if detail:
            message += f": {detail}"
        super().__init__(f"{message}. Hint: {self.hint}")


class RknnFailError(RknnError):
    code_value = abi.RKNN_ERR_FAIL
    hint = ("a failure with no more specific code; the log says what failed. At rknn_run, "
            "'failed to submit' means an NPU job failed: in the first layer with zero-copy, a bound "
            "input smaller than its size_with_stride (User Guide §10.9); in a later layer, a model, "
            "toolkit, runtime or driver mismatch (§10.9: update rknn-toolkit2 and librknnrt; "
            "rockchip-linux/rknn-toolkit2#320: a driver update); or two threads on one context "
            "(airockchip/rknn-toolkit2#531, #533). At rknn_init, 'failed to open rknn device' (no "
            "rknpu driver loaded, or no permission on the device node) also returns -1 with "
            f"librknnrt. Check: the runtime's log ({_LOG}), dmesg | grep -i rknpu, "
            "`python -m rknnlab doctor` (NPU device, versions).")


class RknnTimeoutError(RknnError):
    code_value = abi.RKNN_ERR_TIMEOUT
    hint = ("the NPU did not finish in time. Check dmesg for rknpu lines (a job timeout, an NPU "
            "reset), the NPU load (/sys/kernel/debug/rknpu/load, as root), and how many contexts "
            "run at once. rknn_run's extend argument is not used by this runtime (the API "
            "reference says to pass NULL), so the application cannot raise the limit. "
            f"The runtime's log ({_LOG}) names the op that was running.")


class RknnDeviceUnavailableError(RknnError):
    code_value = abi.RKNN_ERR_DEVICE_UNAVAILABLE
    hint = ("the runtime could not use the NPU device. Public logs of -3 come from the older "
            "RKNPU1 API; librknnrt reports a device it cannot open ('failed to open rknn device') "
            "as -1. Check `python -m rknnlab doctor` (its 'NPU device' line: is the rknpu driver "
            "there, can this user open the device node), dmesg | grep -i rknpu (did the driver "
            "load: a vendor kernel is needed), and in a container whether the device is passed "
            f"through. The log ({_LOG}) says what failed.")


class RknnMallocError(RknnError):
    code_value = abi.RKNN_ERR_MALLOC_FAIL
    hint = ("memory could not be allocated (a NULL from the create_mem family arrives here too: "
            "the C API gives no code). Check dmesg (an NPU IOMMU that is disabled leaves only a "
            "small reserved area; 'swiotlb buffer is full'), MemAvailable, open file descriptors "
            "(each DMA buffer holds one: ulimit -n), and leaks: outputs_get without "
            f"outputs_release, mems or contexts never destroyed. The log ({_LOG}) gives the size.")


class RknnParamInvalidError(RknnError):
    code_value = abi.RKNN_ERR_PARAM_INVALID
    hint = ("an argument is wrong: a buffer too small for the tensor (an rknn_inputs_set buffer "
            "needs n_elems x the size of rknn_input.type, and type left at 0 means FLOAT32: 4x the "
            "bytes of uint8 data; an is_prealloc output needs n_elems x 4 bytes with want_float; a "
            "bound mem needs the bytes of the attr you bind it with, in its type and layout), an "
            "index past n_input/n_output, a NULL pointer, a query size "
            "that is not sizeof() of the struct the command fills (a header older than "
            "librknnrt.so), or a flag or command this runtime does not support. The message, or "
            f"the runtime's log ({_LOG}), names the argument.")


class RknnModelInvalidError(RknnError):
    code_value = abi.RKNN_ERR_MODEL_INVALID
    hint = ("the bytes are not a usable .rknn model: a wrong or truncated file, an ONNX file, "
            "or a path passed with a non-zero size (size 0 means 'model is a path'); also a "
            "model exported by a toolkit newer than this librknnrt.so (the log says 'Invalid "
            "RKNN model version'). Check the file, the runtime's log "
            f"({_LOG}) and the doctor's 'toolkit vs runtime' line.")


class RknnCtxInvalidError(RknnError):
    code_value = abi.RKNN_ERR_CTX_INVALID
    hint = ("the context is not live: it was never initialised (0: check the return code of "
            "rknn_init before using ctx), already destroyed, or belongs to another runtime "
            "instance. On a board a destroyed context may crash the call instead.")


class RknnInputInvalidError(RknnError):
    code_value = abi.RKNN_ERR_INPUT_INVALID
    hint = ("an rknn_input is not acceptable: a count or index past the model's inputs, a NULL "
            "buf, or a type or fmt the runtime does not convert. Compare with RKNN_QUERY_IN_OUT_NUM "
            "and RKNN_QUERY_INPUT_ATTR. (A buffer smaller than the input needs is -5 on librknnrt "
            f"2.3.2.) The runtime's log ({_LOG}) names the field.")


class RknnOutputInvalidError(RknnError):
    code_value = abi.RKNN_ERR_OUTPUT_INVALID
    hint = ("an output request does not match the model or the context's state: wrong "
            "count or index, or outputs asked for before any rknn_run. Compare with "
            "RKNN_QUERY_IN_OUT_NUM and RKNN_QUERY_OUTPUT_ATTR.")


class RknnDeviceUnmatchError(RknnError):
    code_value = abi.RKNN_ERR_DEVICE_UNMATCH
    hint = ("the runtime and the NPU's driver or firmware do not fit together: compare their "
            "versions (RKNN_QUERY_SDK_VERSION, or the doctor's 'librknnrt version' and 'rknpu "
            "driver' lines) and update the older one; dmesg | grep -i rknpu shows the driver's.")


class RknnIncompatiblePreCompileModelError(RknnError):
    code_value = abi.RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL
    hint = ("the model uses a pre-compile mode this driver does not support (this code is in "
            "rknn_api.h only; the API reference's table does not list it): update the driver and "
            "librknnrt.so, or export the model again with the rknn-toolkit2 that matches this "
            "librknnrt.so (the doctor's 'toolkit vs runtime' line compares them).")


class RknnIncompatibleOptimizationLevelVersionError(RknnError):
    code_value = abi.RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION
    hint = ("the model uses an optimisation level this driver does not support: update the "
            "driver and librknnrt.so, or export the model again with the matching rknn-toolkit2 "
            "(the doctor shows the versions). A log line 'ret = -12(ERROR_NOT_SUPPORTED)' from "
            "opening the driver is a driver error number, not this code.")


class RknnTargetPlatformUnmatchError(RknnError):
    code_value = abi.RKNN_ERR_TARGET_PLATFORM_UNMATCH
    hint = ("the model was built for another SoC: export it with target_platform set to this "
            "board's SoC (e.g. 'rk3588'; the doctor's 'SoC' line names it). The runtime's log "
            f"({_LOG}) prints the model's target platform; some runtimes return -1 for this.")


ERROR_CLASSES: Dict[int, Type[RknnError]] = {
    cls.code_value: cls for cls in RknnError.__subclasses__() if cls.code_value is not None
}


def error_for(code: int, function: str, detail: str = "") -> RknnError:
    """The exception for ``code`` returned by ``function`` (RknnError itself for
    an unknown code)."""
    return ERROR_CLASSES.get(code, RknnError)(code, function, detail)


def check(ret: int, function: str, detail: str = "") -> int:
    """Return ``ret`` unless it is negative, in which case raise its exception."""
    if ret < 0:
        raise error_for(ret, function, detail)
    return ret


# Where Rockchip publishes the runtime, for the install hint.
_RUNTIME_SOURCE = ("rknpu2/runtime/Linux/librknn_api/aarch64/librknnrt.so in "
                   "github.com/airockchip/rknn-toolkit2")


class RuntimeLibraryNotFound(OSError):
    """No loadable librknnrt.so was found; ``tried`` lists (path, reason)."""

    def __init__(self, tried: Sequence[Tuple[str, str]]) -> None:
        self.tried = list(tried)
        lines = "\n".join(f"  {path}: {reason}" for path, reason in self.tried)
        super().__init__(
            "librknnrt.so (the RKNN runtime) could not be loaded. Tried:\n"
            f"{lines}\n"
            f"On an RK3588/RK356x board, copy {_RUNTIME_SOURCE} (the version matching your "
            "rknn-toolkit2) to /usr/lib/, or point the LIBRKNNRT_PATH environment variable "
            "at it. On a PC there is no NPU: use the simulator backend (backend='sim').")


class RuntimeFunctionMissing(NotImplementedError):
    """The loaded librknnrt.so does not export a function (an older runtime)."""

    def __init__(self, function: str, library_path: str) -> None:
        self.function = function
        self.library_path = library_path
        super().__init__(
            f"{function} is not exported by {library_path}: this runtime predates it. "
            "Install a newer librknnrt.so (and a matching rknn-toolkit2 for the models).")
