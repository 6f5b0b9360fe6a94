"""What the modeled NPU computes: output values from native input bytes.

Two sources, chosen per model by whether its fp32 ONNX twin is present:

- :class:`TwinValues` (mobilenet_v2, yolov5n, digits_cnn, ppocr_det): the native int8
  input is dequantized, laid out NCHW and run through the twin with
  onnxruntime; the float outputs are quantized with each output's zp/scale
  into its native layout.  Values match the INT8 model up to quantization
  error (the twin is the network before INT8 conversion).  Results are cached
  on the exact input bytes, so a repeated input costs a fingerprint and a
  memcmp instead of an inference.  Inside :func:`values_replayed` it skips the
  inference and writes the outputs it computed last (timing runs).
- :class:`StandInValues` (yolov5s, yolov5s_relu, yolov5m, resnet50: no twin
  shipped): a fixed pseudo-random int8 pattern per output (seeded by the model
  name), rotated by a checksum of all input bytes.  Deterministic, changes
  with any input byte, costs one roll per output; the values mean nothing
  (no detections, no classes) and padding bytes are not kept zero.
"""
from __future__ import annotations

import threading
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import models
from .layout import dequantize, quantize
from .memory import address_of, same_bytes

if TYPE_CHECKING:
    from .model import SimModel

#: inputs remembered per model; a small number keeps the simulator's own RSS out
#: of the measurements (a video pipeline with double buffering needs 2)
CACHE_ENTRIES = 4
#: onnxruntime threads per inference: small, so contexts on several threads
#: do not oversubscribe the host's cores
ONNX_THREADS = 2
# bytes sampled (evenly spread) for the cheap fingerprint that precedes memcmp
_FINGERPRINT_SAMPLES = 1024


# how many values_replayed() blocks are open, in any thread
_replaying = 0
_replaying_lock = threading.Lock()
# held around every onnxruntime inference once one_inference_at_a_time() was called
_serial: Optional[threading.Lock] = None


def one_inference_at_a_time() -> None:
    """From now on, in this process, compute one model output at a time.  Concurrent
    onnxruntime inferences each take memory of their own, which stays in the process;
    the C library (rknnlab.sim.capi) calls this so that a C program's RSS does not
    grow with how many of its threads happened to run at once.  The modeled NPU time
    of each rknn_run is unchanged."""
    global _serial
    if _serial is None:
        _serial = threading.Lock()


@contextmanager
def values_replayed() -> Iterator[None]:
    """Inside this block, in every thread, a model whose outputs come from its ONNX
    twin writes the outputs it computed last (for the last input it was given
    outside a replay; the first time, it computes them) instead of running
    onnxruntime.  Timing runs then measure the
    modeled NPU and the caller's CPU work, not onnxruntime on this computer.  Only
    the values change: timing, memory and every API call stay as they are.  Blocks
    nest (and may overlap across threads): replay lasts until the last one closes."""
    global _replaying
    with _replaying_lock:
        _replaying += 1
    try:
        yield
    finally:
        with _replaying_lock:
            _replaying -= 1


def replaying() -> bool:
    """Whether a values_replayed() block is open."""
    return _replaying > 0


def _fingerprint(native_inputs: Sequence[np.ndarray]) -> Tuple[int, ...]:
    prints = []
    for data in native_inputs:
        step = max(1, data.size // _FINGERPRINT_SAMPLES)
        prints.append(hash((data.size, data[::step].tobytes())))
    return tuple(prints)


class TwinValues:
    """Outputs from the model's ONNX twin (onnxruntime), cached on input bytes."""

    #: NC1HWC2 padding channels hold zeros (ASSUMPTIONS A31); whole padding blocks at the
    #: end are left out of the outputs
    zero_padding = True

    def __init__(self, model: "SimModel") -> None:
        self.model = model
        self._session = None
        self._session_lock = threading.Lock()
        # most recent first: (fingerprint, input copies, native outputs)
        self._cache: List[Tuple[Tuple[int, ...], List[np.ndarray], List[np.ndarray]]] = []
        self._cache_lock = threading.Lock()
        self.inferences = 0  # onnxruntime calls so far (the cache's misses)

    def compute(self, native_inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Native int8 output bytes (one uint8 array per output, of its native
        layout's ``data.nbytes``: whole padding blocks at the end left out) for the
        native input bytes given (one uint8 array per input)."""
        if _replaying:
            with self._cache_lock:
                if self._cache:  # the outputs it computed last (values_replayed)
                    return self._cache[0][2]
        fingerprint = _fingerprint(native_inputs)
        with self._cache_lock:
            for position, (cached_print, cached_inputs, outputs) in enumerate(self._cache):
                if cached_print == fingerprint and all(
                        a.nbytes == b.nbytes and same_bytes(address_of(a), address_of(b), a.nbytes)
                        for a, b in zip(cached_inputs, native_inputs)):
                    self._cache.insert(0, self._cache.pop(position))
                    return outputs
        # a private copy: the key, and safe from writes to the io buffers meanwhile
        inputs = [np.array(data, copy=True) for data in native_inputs]
        outputs = self._infer(inputs)
        with self._cache_lock:
            self._cache.insert(0, (fingerprint, inputs, outputs))
            del self._cache[CACHE_ENTRIES:]
        return outputs

    def _infer(self, native_inputs: List[np.ndarray]) -> List[np.ndarray]:
        session = self._get_session()
        onnx_inputs = [i.name for i in session.get_inputs()]
        onnx_outputs = [o.name for o in session.get_outputs()]
        feed = {}
        for spec, data, onnx_name in zip(self.model.inputs, native_inputs,
                                          _matched(self.model.inputs, onnx_inputs)):
            values = dequantize(spec.native.read(data), spec.zp, spec.scale)
            feed[onnx_name] = np.ascontiguousarray(values)
        if _serial is not None:
            with _serial:
                results = dict(zip(onnx_outputs, session.run(None, feed)))
        else:
            results = dict(zip(onnx_outputs, session.run(None, feed)))
        self.inferences += 1
        outputs = []
        for spec, onnx_name in zip(self.model.outputs, _matched(self.model.outputs, onnx_outputs)):
            values = np.asarray(results[onnx_name]).reshape(spec.logical)
            # whole NC1HWC2 padding blocks at the end are left out: the run zeroes them
            native = np.zeros(spec.native.data.nbytes, np.uint8)
            spec.native.data.write(quantize(values, spec.zp, spec.scale), native)
            outputs.append(native)
        return outputs

    def prepare(self) -> bool:
        """Load the onnxruntime session and run it once on zero inputs now rather than
        at the first rknn_run, so the memory both take is there from now on (True when
        this call did it)."""
        with self._session_lock:
            if self._session is not None:
                return False
        zeros = [np.zeros(spec.native.nbytes, np.uint8) for spec in self.model.inputs]
        self._infer(zeros)
        return True

    def _get_session(self):  # -> onnxruntime.InferenceSession
        with self._session_lock:
            if self._session is None:
                report = self.model.report
                own = report.onnx_path is not None and report.onnx_path.exists()
                # a model without a twin of its own (a dynamic-shape model) runs the twin
                # model.json names, with the input's height and width left free
                path = report.onnx_path if own else report.values_twin_path
                self._session = _session_for(path, free_hw=not own, name=self.model.name)
            return self._session


_sessions: Dict[Tuple[str, bool], Any] = {}
_sessions_lock = threading.Lock()


def _session_for(path: Path, free_hw: bool, name: str):  # -> onnxruntime.InferenceSession
    """One onnxruntime session per twin file (and free_hw) for the whole process: the
    shapes of a dynamic model share it."""
    key = (str(path), free_hw)
    with _sessions_lock:
        if key not in _sessions:
            try:
                import onnxruntime
            except ImportError as exc:
                raise ImportError(
                    f"the simulator computes {name}'s outputs with onnxruntime, "
                    "which is not installed: pip install 'rknnlab[sim]' (or onnxruntime)") from exc
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = ONNX_THREADS
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            source = models.onnx_free_hw(Path(path).read_bytes()) if free_hw else str(path)
            _sessions[key] = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        return _sessions[key]


def _matched(specs, onnx_names: List[str]) -> List[str]:
    """The ONNX io name for each RKNN tensor: by name where all match, else by position."""
    names = [spec.name for spec in specs]
    if set(names) <= set(onnx_names):
        return names
    if len(onnx_names) != len(names):
        raise ValueError(f"the ONNX twin has {len(onnx_names)} tensors where the model has {len(names)}")
    return onnx_names


class StandInValues:
    """Deterministic stand-in outputs for models shipped without an ONNX twin."""

    #: the pattern fills NC1HWC2 padding channels too (ASSUMPTIONS A31)
    zero_padding = False

    def __init__(self, model: "SimModel") -> None:
        self.model = model
        self._patterns = []
        for spec in model.outputs:
            seed = zlib.crc32(f"{model.name}/{spec.index}".encode())
            self._patterns.append(
                np.random.default_rng(seed).integers(-128, 128, spec.native.nbytes, dtype=np.int8)
                .view(np.uint8))

    def prepare(self) -> bool:
        """Nothing to load: the patterns exist from the start."""
        return False

    def compute(self, native_inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        checksum = 0
        for data in native_inputs:
            checksum = zlib.crc32(data, checksum)
        return [np.roll(pattern, checksum % pattern.size) for pattern in self._patterns]


def values_for(model: "SimModel") -> Union[TwinValues, StandInValues]:
    """The output source of ``model``: its ONNX twin if shipped (or the twin its model.json
    names, for a dynamic-shape model), else the stand-in."""
    onnx_path = model.report.onnx_path
    if onnx_path is not None and onnx_path.exists():
        return TwinValues(model)
    twin = model.report.values_twin_path
    if twin is not None and twin.exists():
        return TwinValues(model)
    return StandInValues(model)
