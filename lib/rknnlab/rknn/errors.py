"""Exceptions for RKNN return codes, and for a runtime library that is missing.

A negative return from a runtime function becomes the exception class of
that code, carrying the code, its C name, the C function that returned it
and a hint on the usual cause.  ``except RknnError`` catches them all.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Type

from . import abi


class RknnError(Exception):
    """A runtime function returned a negative RKNN error code."""

    #: the RKNN_ERR_* value this class stands for (None on the base class)
    code_value: Optional[int] = None
    #: what usually causes the code, and what to try
    hint: str = "see the runtime's own log (environment variable RKNN_LOG_LEVEL=4) for details."

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
    hint = ("a generic failure with no more specific code: set the environment variable "
            "RKNN_LOG_LEVEL=4 before starting Python and read the runtime's log; check dmesg "
            "for NPU driver messages.")


class RknnTimeoutError(RknnError):
    code_value = abi.RKNN_ERR_TIMEOUT
    hint = ("the NPU did not finish in time: look for rknpu messages in dmesg (a hung or "
            "reset NPU), lower the number of contexts running at once, or raise "
            "rknn_run_extend.timeout_ms.")


class RknnDeviceUnavailableError(RknnError):
    code_value = abi.RKNN_ERR_DEVICE_UNAVAILABLE
    hint = ("the NPU could not be opened: is the rknpu driver loaded (vendor kernel), is "
            "/dev/dri/card* (or renderD*) readable by this user (video/render group), and, "
            "in a container, is the device passed through?")


class RknnMallocError(RknnError):
    code_value = abi.RKNN_ERR_MALLOC_FAIL
    hint = ("memory ran out: outputs_get without outputs_release, mems never destroyed and "
            "contexts never destroyed are the usual leaks; check MemAvailable and the "
            "process's RSS.")


class RknnParamInvalidError(RknnError):
    code_value = abi.RKNN_ERR_PARAM_INVALID
    hint = ("an argument is wrong: a buffer too small for the tensor (an is_prealloc "
            "output needs n_elems x 4 bytes with want_float; a bound mem needs the size of "
            "the attr you bind it with), an index past n_input/n_output, a NULL pointer, a query size "
            "that is not sizeof() of the struct the command fills, or a flag or command this "
            "runtime does not support (the message says which).")


class RknnModelInvalidError(RknnError):
    code_value = abi.RKNN_ERR_MODEL_INVALID
    hint = ("the bytes are not a usable .rknn model: a wrong or truncated file, an ONNX file, "
            "or a path passed with a non-zero size (size 0 means 'model is a path'); also a "
            "model exported by a toolkit newer than this librknnrt.so.")


class RknnCtxInvalidError(RknnError):
    code_value = abi.RKNN_ERR_CTX_INVALID
    hint = ("the context is not live: it was never initialised (0), or already destroyed, "
            "or belongs to another runtime instance.")


class RknnInputInvalidError(RknnError):
    code_value = abi.RKNN_ERR_INPUT_INVALID
    hint = ("an input does not match the model: wrong count or index, NULL buf, or a size "
            "that is not n_elems x the element size of the type you declared (with "
            "pass_through, the native attr's size_with_stride).")


class RknnOutputInvalidError(RknnError):
    code_value = abi.RKNN_ERR_OUTPUT_INVALID
    hint = ("an output request does not match the model or the context's state: wrong "
            "count or index, or outputs asked for before any rknn_run.")


class RknnDeviceUnmatchError(RknnError):
    code_value = abi.RKNN_ERR_DEVICE_UNMATCH
    hint = ("runtime and NPU driver do not fit together: compare the versions from "
            "RKNN_QUERY_SDK_VERSION and update librknnrt.so or the kernel driver.")


class RknnIncompatiblePreCompileModelError(RknnError):
    code_value = abi.RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL
    hint = ("the model was pre-compiled for another runtime/driver version: export it again "
            "with the rknn-toolkit2 version that matches this librknnrt.so.")


class RknnIncompatibleOptimizationLevelVersionError(RknnError):
    code_value = abi.RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION
    hint = ("the model's optimisation level is not supported by this runtime: export it "
            "again with the matching rknn-toolkit2 version.")


class RknnTargetPlatformUnmatchError(RknnError):
    code_value = abi.RKNN_ERR_TARGET_PLATFORM_UNMATCH
    hint = ("the model was built for another SoC: export it with target_platform set to this "
            "board's SoC (e.g. 'rk3588').")


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
