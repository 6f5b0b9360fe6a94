"""``RKNNLite``: rknn-toolkit-lite2's Python class, on a board and on the simulator.

Most people who run a model on an RK3588 from Python write::

    from rknnlite.api import RKNNLite
    lite = RKNNLite()
    lite.load_rknn("model.rknn")
    lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0)
    outputs = lite.inference(inputs=[frame])
    lite.release()

``from rknnlab.lite import RKNNLite`` gives a class with the same interface as
rknnlite.api.RKNNLite 2.5.0 (the wheel on PyPI): the same constructor, methods,
arguments, defaults, ``NPU_CORE_*`` constants and return values (0 / -1, None
when inference fails), and log lines of the same meaning ("W ...", "E ...").
On a board it hands every call to the real RKNNLite (``pip install
rknn-toolkit-lite2``). Elsewhere it runs on rknnlab's simulator, built on the
runtime API as the wheel is: the wheel never calls create_mem, set_io_mem or
dup_context, so neither does this class. What the simulated class does, call
by call (from the wheel's rknn_lite.py and the docstrings and messages of its
compiled runtime module; what neither says is an assumption, ASSUMPTIONS A65-A71):

- ``load_rknn(path)`` reads the whole file into a ``bytes`` object kept on the
  instance (``rknn_data``) until the instance goes; ``release()`` does not free it.
- ``init_runtime()`` hands those bytes to rknn_init (so the runtime keeps its
  own copy beside them, A65), sets the core mask (A69: one-core SoCs ignore it;
  RK3576 replaces the masks of a third core), then checks whether the model has
  dynamic shapes.
- ``inference(inputs=[...])`` copies each input into a staging buffer that only
  grows, calls rknn_inputs_set, rknn_run, rknn_outputs_get (float32 outputs into
  a buffer that only grows) and rknn_outputs_release: the general API, no
  zero-copy (A66). It returns new numpy arrays on every call, or with
  ``reuse_outputs=True`` views of per-output staging arrays that the next call
  overwrites and that only grow until ``release()`` (A67). Inputs are checked
  as the wheel's messages say (A68); a dynamic-shape model gets
  rknn_set_input_shapes whenever the fed shape changes.
- ``list_support_target_platform`` lists SoCs by NPU model (A70).

Not faked: the reference cycle per ``inference()`` that a user measured with
lite2 2.3.2 (airockchip/rknn-toolkit2#42, 42.43 kB per call until gc runs). The
simulated class leaves no cycle, so its memory does not grow; the chapters show
the published figures instead.

``provide_rknnlite_api()`` lets code written for the wheel run unchanged where
the wheel is not installed: ``from rknnlite.api import RKNNLite`` then imports
this class.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import types
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .rknn import abi

#: the rknn-toolkit-lite2 release whose interface this class has
LITE_VERSION = "2.5.0"

#: numpy dtype name -> rknn_tensor_type, the input types the wheel accepts (its docstring)
INPUT_TYPES: Dict[str, int] = {
    "int8": abi.RKNN_TENSOR_INT8, "uint8": abi.RKNN_TENSOR_UINT8, "int16": abi.RKNN_TENSOR_INT16,
    "float16": abi.RKNN_TENSOR_FLOAT16, "float32": abi.RKNN_TENSOR_FLOAT32}

#: data_format -> rknn_tensor_format
FORMATS: Dict[str, int] = {"nhwc": abi.RKNN_TENSOR_NHWC, "nchw": abi.RKNN_TENSOR_NCHW}

#: the SoCs where the wheel sets a core mask (its message on the others names them)
CORE_MASK_SOCS = "RK3576 / RK3588"

#: RK3576 has two NPU cores: the wheel replaces a mask that names a third (its messages)
RK3576_REPLACED = {abi.RKNN_NPU_CORE_2: abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0_1_2: abi.RKNN_NPU_CORE_0_1}

_default_runtime: Any = None

#: RKNNLite objects made in this process, by kind ("simulated": this module's model of the
#: wheel, "wheel": Rockchip's class on a board); the harness reports it with each variant
made: Dict[str, int] = {"simulated": 0, "wheel": 0}


def set_default_runtime(rt: Any) -> None:
    """The runtime every RKNNLite made afterwards uses (``None``: choose one, as
    rknnlab.open_runtime does). The harness sets its instrumented runtime here, so
    a variant's RKNNLite calls are timed and run on the variant's SoC."""
    global _default_runtime
    _default_runtime = rt


@contextmanager
def using_runtime(rt: Any) -> Iterator[None]:
    """``with using_runtime(rt):`` RKNNLite instances made inside use ``rt``."""
    previous = _default_runtime
    set_default_runtime(rt)
    try:
        yield
    finally:
        set_default_runtime(previous)


def _backend() -> str:
    if _default_runtime is not None:
        return getattr(_default_runtime, "backend", "sim") or "sim"
    from .board import choose_backend
    return choose_backend("auto")[0]


def missing_wheel() -> Optional[str]:
    """None where ``RKNNLite()`` works here (the simulator, or a board with rknn-toolkit-lite2);
    on a board without the wheel, one line saying so and how to install it, for a notebook
    cell to print instead of failing."""
    if _backend() != "native":
        return None
    try:
        _wheel_class()
    except ImportError:
        return ("this board has no rknn-toolkit-lite2, so the RKNNLite cells are skipped: "
                "pip install rknn-toolkit-lite2 (in the course's venv), then restart the kernel")
    return None


def _wheel_class() -> Any:
    try:
        from rknnlite.api import RKNNLite as Real  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError(
            "this is a board (rknnlab chose the native backend), and on a board rknnlab.lite.RKNNLite "
            "hands every call to Rockchip's rknn-toolkit-lite2, which is not installed: "
            "pip install rknn-toolkit-lite2 (or set RKNNLAB_BACKEND=sim to use the simulator)") from None
    if getattr(Real, "_rknnlab_facade", False):
        raise ImportError("rknnlite.api is rknnlab's own class here (provide_rknnlite_api() ran); "
                          "install rknn-toolkit-lite2 to use the real one on this board")
    return Real


class _Log:
    """The wheel's log lines: a level letter, a space, the message; D lines only when verbose;
    with a verbose_file, each line is also appended to that file."""

    def __init__(self, verbose: bool, verbose_file: Optional[str]) -> None:
        self.verbose = bool(verbose)
        self.path = verbose_file

    def _emit(self, level: str, message: str) -> None:
        line = f"{level} {message}"
        print(line, file=sys.stdout, flush=True)
        if self.path:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError:
                self.path = None

    def d(self, message: str) -> None:
        if self.verbose:
            self._emit("D", message)

    def w(self, message: str) -> None:
        self._emit("W", message)

    def e(self, message: str) -> None:
        self._emit("E", message)

    def p(self, message: str) -> None:
        print(message, file=sys.stdout, flush=True)


class _LiteError(Exception):
    """A fault the wheel reports as an "E ..." line before it gives up on the call."""


def _grown(buffer: Optional[ctypes.Array], size: int) -> ctypes.Array:
    """A ctypes char buffer of at least ``size`` bytes: ``buffer`` when it is big enough,
    else a new one (the staging buffers only grow; A66)."""
    if buffer is None or ctypes.sizeof(buffer) < size:
        return (ctypes.c_char * max(size, 1))()
    return buffer


class _SimSession:
    """One rknn_init'ed context and the wheel's staging buffers around it."""

    def __init__(self, rt: Any, owns_rt: bool, model: bytes, core_mask: int, log: _Log) -> None:
        self.rt, self.owns_rt, self.log = rt, owns_rt, log
        self.ctx = 0
        self.input_buffers: Dict[int, ctypes.Array] = {}
        self.output_buffers: Dict[int, ctypes.Array] = {}
        self.staging: Dict[Any, np.ndarray] = {}
        self.ctx = rt.init(model)
        try:
            n = rt.query(self.ctx, abi.RKNN_QUERY_IN_OUT_NUM)
            self.n_input, self.n_output = n.n_input, n.n_output
            self.in_attrs = self._attrs(abi.RKNN_QUERY_INPUT_ATTR, self.n_input)
            self.out_attrs = self._attrs(abi.RKNN_QUERY_OUTPUT_ATTR, self.n_output)
            self._set_core_mask(core_mask)  # the wheel's order: build, core mask, then the shape check
            self.dynamic = self._has_dynamic_shapes()
        except BaseException:
            self.release()
            raise

    def _attrs(self, cmd: int, n: int) -> List[abi.rknn_tensor_attr]:
        return [self.rt.query(self.ctx, cmd, abi.rknn_tensor_attr(index=i)) for i in range(n)]

    def _has_dynamic_shapes(self) -> bool:
        from .rknn.errors import RknnError
        try:
            self.rt.query(self.ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=0))
        except RknnError as exc:
            # the line a board prints at every init_runtime of a static model
            self.log.w(f"Query dynamic range failed. Ret code: {exc.name}. (If it is a static shape RKNN "
                       "model, please ignore the above warning message.)")
            return False
        return True

    def _set_core_mask(self, core_mask: int) -> None:
        soc, npu = _plain(self.rt).soc, _plain(self.rt).npu
        if npu.n_cores == 1:
            if core_mask != abi.RKNN_NPU_CORE_AUTO:
                self.log.w(f"The core_mask is only supported by {CORE_MASK_SOCS}. Please do not set this "
                           "parameter on other platforms.")
            return
        if soc == "rk3576" and core_mask in RK3576_REPLACED:
            replaced = RK3576_REPLACED[core_mask]
            self.log.w(f'The RK3576 platform has only two NPU cores. "{_mask_name(core_mask)}" is not '
                       f'supported and will be automatically replaced with "{_mask_name(replaced)}".')
            core_mask = replaced
        if not npu.mask_valid(core_mask):
            raise _LiteError(f"The core mode {core_mask} is not supported currently.")
        self.rt.set_core_mask(self.ctx, core_mask)

    # -- inference, call by call ------------------------------------------------
    def set_inputs(self, inputs: Any, data_type: Any, data_format: Any, pass_through: Any) -> None:
        if not isinstance(inputs, list):
            raise _LiteError("Inputs should be placed in a list, like [img1, img2], both the img1 and img2 "
                             "are ndarray.")
        if len(inputs) != self.n_input:
            raise _LiteError(f"Inputs are invalid. (the model has {self.n_input} input(s), "
                             f"{len(inputs)} given)")
        types_ = _per_input(data_type, len(inputs), "data_type")
        formats = _per_input(data_format, len(inputs), "data_format")
        flags = _per_input(pass_through, len(inputs), "inputs_pass_through")
        arrays, fmts = [], []
        for i, (array, attr) in enumerate(zip(inputs, self.in_attrs)):
            if not isinstance(array, np.ndarray):
                raise _LiteError(f"Type of inputs[{i}] is not np.ndarray!")
            dtype = array.dtype.name
            if dtype not in INPUT_TYPES:
                raise _LiteError(f"Unsupport inputs[{i}].dtype: {dtype} (the wheel takes "
                                 f"{', '.join(INPUT_TYPES)})")
            if types_[i] is not None:
                if str(types_[i]) not in INPUT_TYPES:
                    raise _LiteError(f"Unsupport data type: {types_[i]}")
                if str(types_[i]) != dtype:
                    where = f"data_type[{i}]" if isinstance(data_type, (list, tuple)) else "data_type"
                    raise _LiteError(f"inputs[{i}].dtype: {dtype} is not same as {where}")
            fmt = attr.fmt  # None: the data is taken to be in the model's own format (A68)
            if formats[i] is not None:
                name = str(formats[i]).lower()
                if name not in FORMATS:
                    raise _LiteError(f"The data format of input[{i}]({formats[i]}) is not supported currently, "
                                     "this may cause wrong result.")
                fmt = FORMATS[name]
            if array.ndim != attr.n_dims:
                self.log.w(f"The input[{i}] need {attr.n_dims}dims input, but {array.ndim}dims input "
                           "buffer feed. Please try to feed input as 4D data.")
            if fmt == abi.RKNN_TENSOR_NCHW and attr.fmt == abi.RKNN_TENSOR_NHWC:
                if array.ndim == 4:
                    self.log.w(f"The input[{i}] need NHWC data format, but NCHW set, the data format and "
                               "data buffer will be changed to NHWC.")
                    # into a staging array kept for the next call (A68)
                    nhwc = self._staged(("nhwc", i), array.dtype, array.size)
                    nhwc = nhwc.reshape(array.shape[0], array.shape[2], array.shape[3], array.shape[1])
                    np.copyto(nhwc, array.transpose(0, 2, 3, 1))
                    array, fmt = nhwc, abi.RKNN_TENSOR_NHWC
                else:
                    self.log.w(f"The input[{i}] need NHWC data format, but the shape is not 4D, "
                               "no data transpose.")
            arrays.append(array)
            fmts.append(fmt)
        if self.dynamic:
            self._follow_shapes(arrays, fmts)
        rknn_inputs: List[abi.rknn_input] = []
        for i, (array, fmt, attr) in enumerate(zip(arrays, fmts, self.in_attrs)):
            through = int(bool(flags[i])) if flags[i] is not None else 0
            if not through and array.nbytes != attr.n_elems * array.itemsize:
                raise _LiteError(f"Size of inputs[{i}] is invalid! ({array.nbytes} bytes of {array.dtype}; "
                                 f"the model's input {i} holds {attr.n_elems} elements = "
                                 f"{attr.n_elems * array.itemsize} bytes of {array.dtype})")
            data = np.ascontiguousarray(array)
            buffer = self.input_buffers[i] = _grown(self.input_buffers.get(i), data.nbytes)
            ctypes.memmove(buffer, data.ctypes.data, data.nbytes)
            rknn_inputs.append(abi.rknn_input(index=i, buf=ctypes.addressof(buffer), size=data.nbytes,
                                              pass_through=through, type=INPUT_TYPES[array.dtype.name],
                                              fmt=fmt))
        self.rt.inputs_set(self.ctx, rknn_inputs)

    def _follow_shapes(self, arrays: List[np.ndarray], fmts: List[int]) -> None:
        """A dynamic-shape model: rknn_set_input_shapes when a fed shape differs from the current
        one, then the current input and output attrs (their sizes and shapes)."""
        current = [tuple(a.dims[:a.n_dims]) for a in self.in_attrs]
        fed = [tuple(int(d) for d in array.shape) for array in arrays]
        if fed == current:
            return
        attrs = []
        for i, (shape, fmt) in enumerate(zip(fed, fmts)):
            attr = abi.rknn_tensor_attr(index=i)
            attr.name = self.in_attrs[i].name
            attr.n_dims = len(shape)
            for k, d in enumerate(shape):
                attr.dims[k] = d
            attr.fmt = fmt
            attrs.append(attr)
        from .rknn.errors import RknnError
        try:
            self.rt.set_input_shapes(self.ctx, attrs)
        except RknnError as exc:
            raise _LiteError(f"Set shape for input[0] failed. input data format = {fed}, required = one of the "
                             f"shapes the model was built with ({exc})") from None
        self.in_attrs = self._attrs(abi.RKNN_QUERY_CURRENT_INPUT_ATTR, self.n_input)
        self.out_attrs = self._attrs(abi.RKNN_QUERY_CURRENT_OUTPUT_ATTR, self.n_output)

    def _staged(self, key: Any, dtype: Any, n: int) -> np.ndarray:
        """A flat staging array for ``key``: the one kept, viewed at ``n`` elements, unless its
        dtype differs or it is too small (the wheel's _get_staging docstring)."""
        array = self.staging.get(key)
        if array is None or array.dtype != np.dtype(dtype) or array.size < n:
            array = self.staging[key] = np.empty(max(n, 1), dtype=dtype)
        return array[:n]

    def run(self) -> None:
        self.rt.run(self.ctx)

    def get_outputs(self, reuse_outputs: bool) -> Tuple[List[np.ndarray], int]:
        outs: List[abi.rknn_output] = []
        for i, attr in enumerate(self.out_attrs):
            nbytes = attr.n_elems * 4
            if reuse_outputs:
                address = self._staged(("out", i), np.float32, attr.n_elems).ctypes.data
            else:
                buffer = self.output_buffers[i] = _grown(self.output_buffers.get(i), nbytes)
                address = ctypes.addressof(buffer)
            outs.append(abi.rknn_output(want_float=1, is_prealloc=1, index=i, buf=address, size=nbytes))
        extend = abi.rknn_output_extend()
        self.rt.outputs_get(self.ctx, outs, extend)
        try:
            result: List[np.ndarray] = []
            for i, attr in enumerate(self.out_attrs):
                shape = tuple(int(d) for d in attr.dims[:attr.n_dims])
                if reuse_outputs:
                    result.append(self._staged(("out", i), np.float32, attr.n_elems).reshape(shape))
                else:
                    view = np.frombuffer(self.output_buffers[i], dtype=np.float32, count=attr.n_elems)
                    result.append(view.reshape(shape).copy())
        finally:
            self.rt.outputs_release(self.ctx, outs)
        return result, int(extend.frame_id)

    def sdk_version(self) -> str:
        v = self.rt.query(self.ctx, abi.RKNN_QUERY_SDK_VERSION)
        return f"RKNN VERSION:\n  API: {v.api_version.decode()}\n  DRV: {v.drv_version.decode()}"

    def release(self) -> None:
        # the staging buffers are freed here, not earlier (the wheel's docstring)
        self.input_buffers.clear()
        self.output_buffers.clear()
        self.staging.clear()
        try:
            if self.ctx:
                self.rt.destroy(self.ctx)
        finally:
            self.ctx = 0
            if self.owns_rt:
                self.rt.close()
                self.owns_rt = False


class _FailedSession:
    """What init_runtime leaves when rknn_init or the core mask failed: the wheel keeps its
    runtime object, so a later inference() fails while setting the inputs."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def set_inputs(self, *args: Any) -> None:
        raise _LiteError(f"the runtime was not built (init_runtime failed: {self.reason})")

    def sdk_version(self) -> str:
        raise _LiteError(f"the runtime was not built (init_runtime failed: {self.reason})")

    def release(self) -> None:
        pass


def _mask_name(mask: int) -> str:
    return abi.CORE_MASK_NAMES.get(mask, hex(mask)).replace("RKNN_", "")


def _per_input(value: Any, n: int, what: str) -> List[Any]:
    """One entry per input: a list is taken as is (its length must match), anything else is
    used for every input."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise _LiteError(f"The lengths of {what} and inputs are not equal.")
        return list(value)
    return [value] * n


class RKNNLite:
    """rknn-toolkit-lite2's ``RKNNLite`` (2.5.0 interface): the real one on a board, the
    simulator's model of it elsewhere (see the module's docstring)."""

    NPU_CORE_AUTO = abi.RKNN_NPU_CORE_AUTO        # any free core, chosen at each run
    NPU_CORE_0 = abi.RKNN_NPU_CORE_0
    NPU_CORE_1 = abi.RKNN_NPU_CORE_1
    NPU_CORE_2 = abi.RKNN_NPU_CORE_2
    NPU_CORE_0_1 = abi.RKNN_NPU_CORE_0_1
    NPU_CORE_0_1_2 = abi.RKNN_NPU_CORE_0_1_2      # RK3588 (RK3576 replaces it with NPU_CORE_0_1)
    NPU_CORE_ALL = abi.RKNN_NPU_CORE_ALL

    #: lets _wheel_class tell this class from the wheel's after provide_rknnlite_api()
    _rknnlab_facade = True

    def __new__(cls, verbose=False, verbose_file=None):
        # on a board the object *is* the wheel's: every call, attribute and isinstance check
        # is Rockchip's own (Python then skips __init__, the object not being a cls)
        if _backend() == "native":
            wheel = _wheel_class()(verbose=verbose, verbose_file=verbose_file)
            made["wheel"] += 1
            return wheel
        return super().__new__(cls)

    def __init__(self, verbose=False, verbose_file=None):
        made["simulated"] += 1
        if verbose_file is not None and os.path.dirname(verbose_file) \
                and not os.path.isdir(os.path.dirname(verbose_file)):
            verbose_file = None
        self.verbose = verbose
        self.rknn_log = _Log(verbose, verbose_file if verbose else None)
        self.target = "simulator"
        self.rknn_log.w(f"rknn-toolkit-lite2 version: {LITE_VERSION} (rknnlab's simulated RKNNLite)")
        if verbose:
            if verbose_file is None:
                self.rknn_log.w("Verbose file path is invalid, debug info will not dump to file.")
            else:
                self.rknn_log.d(f"Save log info to: {verbose_file}")
        self.rknn_data: Optional[bytes] = None
        self.rknn_user_key: Optional[bytes] = None
        #: the wheel passes it to its runtime's build step; the simulator has no use for it
        self.load_model_in_npu = False
        self.rknn_runtime: Any = None
        self.root_dir = os.path.dirname(os.path.abspath(__file__))

    # -- the wheel's public methods ------------------------------------------------
    def load_rknn(self, path, key_path=None):
        """Read the .rknn file at ``path`` into memory (kept as ``self.rknn_data`` until the
        object goes). ``key_path``: the key file of an encrypted model. Returns 0, or -1."""
        if not os.path.exists(path):  # None raises TypeError here, as in the wheel
            self.rknn_log.e(f"Invalid RKNN model path: {path or 'None'}")
            return -1
        self.rknn_data = self._read(path, "RKNN model")
        if self.rknn_data is None:
            return -1
        self.rknn_user_key = None
        if key_path is not None:
            if not os.path.exists(key_path):
                self.rknn_log.e(f"Invalid key envelope path: {key_path}")
                return -1
            self.rknn_user_key = self._read(key_path, "key envelope")
            if self.rknn_user_key is None:
                return -1
        return 0

    def list_devices(self):
        """Devices reachable over adb / ntb (a PC driving a board). The simulator has none:
        returns ([], [])."""
        self.rknn_log.p("*" * 25)
        self.rknn_log.p("None devices connected.")
        self.rknn_log.p("*" * 25)
        return [], []

    def init_runtime(self, target=None, device_id=None, async_mode=False, core_mask=NPU_CORE_AUTO):
        """rknn_init the loaded model and set ``core_mask`` (RKNNLite.NPU_CORE_*). Leave
        ``target`` as None on a board (a target there means a device reached over adb). On
        the simulator, None plays $RKNNLAB_SIM_SOC if set, else the SoC the model was built
        for; a name ("rk3568") plays that SoC. Returns 0, or -1."""
        self.rknn_log.d(f"target set by user is: {target}")
        if self.rknn_data is None:
            self.rknn_log.e("Model is not loaded yet, this interface should be called after load_rknn!")
            return -1
        if self.rknn_runtime is not None:  # the wheel releases the previous runtime first
            self.rknn_runtime.release()
            self.rknn_runtime = None
        if async_mode:
            self.rknn_log.e("async_mode=True is not simulated by rknnlab (it returns the previous frame's "
                            "outputs on a board); use async_mode=False on the simulator")
            return -1
        if self.rknn_user_key is not None:
            self.rknn_log.e("encrypted models (key_path) are not simulated by rknnlab")
            return -1
        try:
            rt, owns = self._sim_runtime(target)
        except ValueError:
            from .sim.npu import SOCS
            self.rknn_log.e(f"Unsupported target: {target}! Currently, RKNN Toolkit Lite support these "
                            f"targets: {[soc.upper() for soc in SOCS]}")
            return -1
        try:
            self.rknn_runtime = _SimSession(rt, owns, self.rknn_data, core_mask, self.rknn_log)
        except Exception as exc:
            if owns:
                rt.close()
            self.rknn_runtime = _FailedSession(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, _LiteError):  # the core mask
                self.rknn_log.e(str(exc))
            else:
                self.rknn_log.e("Catch exception when init runtime!")
                mismatch = getattr(exc, "code", None) == abi.RKNN_ERR_TARGET_PLATFORM_UNMATCH
                self.rknn_log.e(f"{type(exc).__name__}: {exc}" + (_soc_hint(_plain(rt).soc) if mismatch else ""))
            return -1
        return 0

    def inference(self, inputs, data_type=None, data_format=None, inputs_pass_through=None,
                  get_frame_id=False, reuse_outputs=False):
        """Run the model on ``inputs`` (a list of numpy arrays) and return its outputs as a
        list of float32 arrays, or None after an "E ..." line. ``data_type`` ('uint8',
        'int8', 'int16', 'float16', 'float32'; default: the arrays' dtype), ``data_format``
        ('nhwc' or 'nchw'; default: the model's), ``inputs_pass_through`` (0 or 1 per input).
        ``reuse_outputs=True``: the arrays are views of buffers that the next call
        overwrites (read or copy them first). ``get_frame_id``: the frame id is appended."""
        session = self.rknn_runtime
        if session is None:
            self.rknn_log.e("Runtime environment is not inited, please call init_runtime to init it first!")
            return None
        steps = ((lambda: session.set_inputs(inputs, data_type, data_format, inputs_pass_through),
                  "setting inputs"),
                 (lambda: session.run(), "running RKNN model"),
                 (lambda: session.get_outputs(bool(reuse_outputs)), "getting outputs"))
        got: Any = None
        for step, what in steps:
            try:
                got = step()
            except Exception as exc:  # the wheel catches everything and returns None
                self.rknn_log.e(f"Catch exception when {what}.")
                self.rknn_log.e(f"{type(exc).__name__}: {exc}" if not isinstance(exc, _LiteError) else str(exc))
                return None
        outputs, frame_id = got
        if get_frame_id:
            outputs.append(frame_id)
        return outputs

    def get_sdk_version(self):
        """The runtime's and driver's versions as one string, or None before init_runtime."""
        if self.rknn_runtime is None:
            self.rknn_log.e("Runtime environment is not inited, please call init_runtime to init it first!")
            return None
        try:
            return self.rknn_runtime.sdk_version()
        except Exception as exc:
            self.rknn_log.e("Catch exception when get sdk version")
            self.rknn_log.e(str(exc))
            return None

    def list_support_target_platform(self, rknn_model=None):
        """The target platforms a .rknn file can run on (as a dict), or every platform when
        ``rknn_model`` is None; None when the file does not exist."""
        if rknn_model is not None and not os.path.exists(rknn_model):
            self.rknn_log.e(f"The model {rknn_model} does not exist.")
            return None
        return _support_targets(rknn_model, self.rknn_log)

    def release(self):
        """Free the runtime (rknn_destroy and the staging buffers). The model's bytes stay on
        the object (``rknn_data``) until the object itself goes."""
        if self.rknn_runtime is not None:
            self.rknn_runtime.release()
            self.rknn_runtime = None

    # -- ours ------------------------------------------------------------------------
    def _read(self, path: str, what: str) -> Optional[bytes]:
        """The file's bytes, or None after the wheel's E lines."""
        try:
            with open(path, "rb") as f:
                return f.read()
        except Exception as exc:
            self.rknn_log.e(f"Catch exception when loading {what} [{path}]!")
            self.rknn_log.e(f"{type(exc).__name__}: {exc}")
            return None

    def _sim_runtime(self, target: Optional[str]) -> Tuple[Any, bool]:
        """(the runtime to use, whether this object opened it and must close it)."""
        from .sim import SimRuntime
        from .sim.npu import soc_npu
        rt = _default_runtime
        if target is not None:
            soc = str(target).lower()
            soc_npu(soc)  # ValueError for a SoC the simulator does not play
            if rt is not None and _plain(rt).soc == soc:
                return rt, False
            return SimRuntime(soc), True
        if rt is not None:
            return rt, False
        soc = os.environ.get("RKNNLAB_SIM_SOC") or _built_for(self.rknn_data) or "rk3588"
        return SimRuntime(soc), True


def _plain(rt: Any) -> Any:
    """The simulator under the harness's instrumented runtime (which times calls and carries
    no other attribute), for its soc and npu."""
    return getattr(rt, "inner", rt)


def _built_for(model: Optional[bytes]) -> Optional[str]:
    """The SoC a course model's bytes were compiled for, None for other bytes."""
    from . import models
    report = models.report_for_model_bytes(model) if model else None
    return report.target.lower() if report is not None else None


def _soc_hint(soc: str) -> str:
    return (f" (the simulator plays {soc.upper()}: load the model built for it, or set RKNNLAB_SIM_SOC "
            "to the SoC the model was built for)")


#: NPU model -> SoCs, from the wheel's config/cpu_npu_mapper.yml (2.5.0); listed by NPU model
NPU_FAMILIES: Dict[str, Tuple[str, ...]] = {
    "RKNPU2-T4": ("RK3562",), "RKNPU2-LITE": ("RK3566", "RK3568"), "RKNPU2-V2": ("RK3588",),
    "RKNPU2-F2": ("RK3576",), "RKNPU2-F3": ("RV1126B",)}


def _support_targets(rknn_model: Optional[str], log: _Log) -> Optional[Dict[str, Any]]:
    if rknn_model is None:
        log.p("All RKNN Toolkit supported target platforms:")
        for family, socs in NPU_FAMILIES.items():
            log.p(f"chip family {family}: {', '.join(socs)}")
        return {family: list(socs) for family, socs in NPU_FAMILIES.items()}
    from . import models
    with open(rknn_model, "rb") as f:
        report = models.report_for_model_bytes(f.read())
    if report is None:
        log.e(f"{rknn_model} is not a course model: the simulator reads a model's target "
              "platform from its compiler report")
        return None
    filled = report.target.upper()
    supported = next((list(socs) for socs in NPU_FAMILIES.values() if filled in socs), [filled])
    log.p(f"Target platforms filled in RKNN model:         {[filled]}")
    log.p(f"Target platforms supported by this RKNN model: {supported}")
    return {"support_target_platform": supported, "filled_target_platform": [filled]}


def provide_rknnlite_api() -> str:
    """Make ``from rknnlite.api import RKNNLite`` work where rknn-toolkit-lite2 is not
    installed, by registering this module's class under that name, so a program written
    for the wheel runs unchanged. Returns which class that import now gives:
    "rknnlite" (the wheel is installed: nothing changed) or "rknnlab.lite"."""
    existing = sys.modules.get("rknnlite.api")
    if existing is not None:
        return "rknnlab.lite" if getattr(existing, "RKNNLite", None) is RKNNLite else "rknnlite"
    if importlib.util.find_spec("rknnlite") is not None:
        return "rknnlite"
    package = types.ModuleType("rknnlite")
    package.__doc__ = "rknnlab's stand-in for rknn-toolkit-lite2 (see rknnlab.lite)"
    package.__path__ = []  # a package, so "rknnlite.api" is importable
    package.__spec__ = importlib.machinery.ModuleSpec("rknnlite", None, is_package=True)
    api = types.ModuleType("rknnlite.api")
    api.__spec__ = importlib.machinery.ModuleSpec("rknnlite.api", None)
    api.__doc__ = package.__doc__
    api.RKNNLite = RKNNLite  # type: ignore[attr-defined]
    package.api = api  # type: ignore[attr-defined]
    sys.modules["rknnlite"] = package
    sys.modules["rknnlite.api"] = api
    return "rknnlab.lite"


__all__ = ["RKNNLite", "LITE_VERSION", "missing_wheel", "provide_rknnlite_api", "set_default_runtime",
           "using_runtime"]
