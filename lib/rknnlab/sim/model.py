"""The models the simulator can load: course models, known by their compiler report.

A .rknn file is identified by the sha256 of its bytes (rknnlab.models); the
report then says everything the runtime would read from the file: the io
tensors' attrs, the weight and internal sizes, the NPU cycles, the
normalisation baked in at build time.  One :class:`SimModel` per model and
process, shared by every context (and every SimRuntime) that loads it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .. import models
from ..rknn import abi
from .layout import InputQuantizer, Layout, Shape, layout_for, logical_shape
from .internal import input_regions
from .npu import LayerTime, layer_times_on, run_seconds_of
from .sram import TensorHit, layers_with_sram, tensor_hits

#: the attrs a report holds per tensor: INPUT/OUTPUT_ATTR, NATIVE_*, NATIVE_NHWC_*
ATTR_KINDS = ("plain", "native", "native_nhwc")


def attr_from_report(row: Dict[str, Any]) -> abi.rknn_tensor_attr:
    """An rknn_tensor_attr filled from one attr of a compiler report (enum
    fields there are C constant names)."""
    attr = abi.rknn_tensor_attr()
    attr.index = row["index"]
    attr.n_dims = row["n_dims"]
    for i, dim in enumerate(row["dims"]):
        attr.dims[i] = dim
    attr.name = row["name"].encode("utf-8")[:abi.RKNN_MAX_NAME_LEN - 1]
    attr.n_elems = row["n_elems"]
    attr.size = row["size"]
    attr.fmt = getattr(abi, row["fmt"])
    attr.type = getattr(abi, row["type"])
    attr.qnt_type = getattr(abi, row["qnt_type"])
    attr.zp = row["zp"]
    attr.scale = row["scale"]
    attr.w_stride = row["w_stride"]
    attr.size_with_stride = row["size_with_stride"]
    attr.h_stride = row["h_stride"]
    attr.pass_through = row["pass_through"]
    return attr


@dataclass
class TensorSpec:
    """One io tensor of a model, as the simulator needs it."""
    index: int
    name: str
    attrs: Dict[str, abi.rknn_tensor_attr]   # by ATTR_KINDS
    logical: Shape
    native: Layout                           # where the NPU reads/writes it
    zp: int
    scale: float
    # layouts asked for on every inputs_set (by fmt, type) and outputs_get (by type)
    _dense: Dict[Tuple[int, int], Layout] = field(default_factory=dict)
    _plain: Dict[int, Layout] = field(default_factory=dict)

    def layout(self, fmt: int, rknn_type: int, attr: Optional[abi.rknn_tensor_attr] = None) -> Layout:
        """This tensor in another format/type (strides from ``attr``)."""
        if attr is not None:
            return layout_for(fmt, rknn_type, self.logical, attr)
        key = (fmt, rknn_type)
        if key not in self._dense:
            self._dense[key] = layout_for(fmt, rknn_type, self.logical)
        return self._dense[key]

    def plain_layout(self, rknn_type: int) -> Layout:
        """What rknn_outputs_get hands out: the plain attr's format, in ``rknn_type``."""
        if rknn_type not in self._plain:
            self._plain[rknn_type] = layout_for(self.plain.fmt, rknn_type, self.logical, self.plain)
        return self._plain[rknn_type]

    @property
    def plain(self) -> abi.rknn_tensor_attr:
        return self.attrs["plain"]


def _tensor_spec(row: Dict[str, Any]) -> TensorSpec:
    attrs = {kind: attr_from_report(row[kind]) for kind in ATTR_KINDS}
    native_attr = attrs["native"]
    logical = logical_shape(attrs["plain"])
    native = layout_for(native_attr.fmt, native_attr.type, logical, native_attr)
    declared = native_attr.size_with_stride or native_attr.size
    if native.nbytes != declared:
        raise models.ReportError(
            f"tensor {row['native']['name']}: native layout needs {native.nbytes} bytes, "
            f"the report's size_with_stride says {declared}")
    return TensorSpec(native_attr.index, row["native"]["name"], attrs, logical, native,
                      native_attr.zp, native_attr.scale)


class SimModel:
    """A course model as the simulated runtime sees it."""

    def __init__(self, report: models.CompilerReport, sha256: str) -> None:
        self.report = report
        self.sha256 = sha256
        self.name = report.model
        self.target = report.target
        self.inputs: List[TensorSpec] = [_tensor_spec(row) for row in report.data["inputs"]]
        self.outputs: List[TensorSpec] = [_tensor_spec(row) for row in report.data["outputs"]]
        build = report.data["build"]
        self.quantizers = [InputQuantizer(build["mean_values"], build["std_values"], spec.zp,
                                          spec.scale, spec.logical) for spec in self.inputs]
        self.npu_cycles = report.npu_cycles
        self.io_names = [spec.name for spec in self.inputs + self.outputs]
        # where each input lies in the compiler's internal plan (rknnlab.sim.internal)
        self.internal_inputs = input_regions(report, [spec.name for spec in self.inputs])
        # modeled layer times by the cores a run uses and the bytes of its plan in SRAM
        # (a handful of combinations per model)
        self._layer_times: Dict[Tuple[Tuple[int, ...], int], Tuple[List[LayerTime], float]] = {}
        self._values: Any = None
        self._values_lock = threading.Lock()
        #: a dynamic-shape model: one model per input shape, in RKNN_QUERY_INPUT_DYNAMIC_RANGE
        #: order (rknnlab.models.CompilerReport.dynamic_shapes); empty for a static model
        self.shapes: List[SimModel] = [SimModel(report.for_shape(entry["input_dims"]), sha256)
                                       for entry in report.dynamic_shapes]

    @property
    def dynamic(self) -> bool:
        return bool(self.shapes)

    @property
    def input_dims(self) -> List[List[int]]:
        """The NCHW dims of each input (the shape this model, or this shape of a dynamic
        model, was compiled for)."""
        return [list(spec.logical) for spec in self.inputs]

    def layer_times(self, cores: Tuple[int, ...], sram_bytes: int = 0) -> List[LayerTime]:
        """Modeled time of each layer in a run on ``cores`` (rknnlab.sim.npu), with the
        first ``sram_bytes`` of the internal plan in SRAM (rknnlab.sim.sram)."""
        return self._timing(cores, sram_bytes)[0]

    def run_seconds(self, cores: Tuple[int, ...], sram_bytes: int = 0) -> float:
        """Modeled duration of one rknn_run on ``cores``."""
        return self._timing(cores, sram_bytes)[1]

    def sram_hits(self, sram_bytes: int) -> List[TensorHit]:
        """Each feature tensor's SramHit with the first ``sram_bytes`` of the plan in SRAM."""
        return tensor_hits(self.report.data.get("feature_tensors") or [], self.io_names, sram_bytes)

    def _timing(self, cores: Tuple[int, ...], sram_bytes: int) -> Tuple[List[LayerTime], float]:
        key = (cores, sram_bytes)
        timing = self._layer_times.get(key)
        if timing is None:  # two threads may both compute it: same result
            layers = self.report.layers
            if sram_bytes:
                layers = layers_with_sram(layers, self.sram_hits(sram_bytes))
            times = layer_times_on(layers, self.target, cores)
            timing = self._layer_times[key] = (times, run_seconds_of(times, self.target))
        return timing

    @property
    def values(self) -> Any:
        """The output-value source (ONNX twin or stand-in), made on first use."""
        with self._values_lock:
            if self._values is None:
                from .outputs import values_for
                self._values = values_for(self)
            return self._values

    def __repr__(self) -> str:
        return f"<SimModel {self.name} {self.target}>"


class UnknownModelError(LookupError):
    """Bytes that are no course model's .rknn; ``sha256`` names them."""

    def __init__(self, sha256: str) -> None:
        super().__init__(sha256)
        self.sha256 = sha256


_known: Dict[str, SimModel] = {}
_known_lock = threading.Lock()


def identify(model_bytes: bytes) -> SimModel:
    """The course model these .rknn bytes are (UnknownModelError otherwise)."""
    sha256 = models.sha256_of(model_bytes)
    with _known_lock:
        if sha256 not in _known:
            report = models.report_for_model_bytes(model_bytes)
            if report is None:
                raise UnknownModelError(sha256)
            _known[sha256] = SimModel(report, sha256)
        return _known[sha256]
