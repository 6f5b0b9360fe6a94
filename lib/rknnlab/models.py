"""The catalogue of course models and their compiler reports.

data/models/<name>/ holds model.onnx (the fp32 ONNX twin, where kept),
<soc>.rknn (INT8, compiled by the rknn-toolkit2 its report names in
``toolkit_version``), <soc>.report.json (what the compiler decided, schema in
rknnlab/schemas/compiler_report.schema.json, documented in
data/models/README.md), <soc>.log.gz (the raw verbose log) and model.json (how
the model was made).

A model should be compiled by a toolkit no newer than the librknnrt that loads
it: :func:`check_runtime` compares the two versions and says what to do.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .paths import models_dir

SCHEMA_PATH = Path(__file__).with_name("schemas") / "compiler_report.schema.json"
SCHEMA_NAME = "rknnlab.compiler_report"
SCHEMA_VERSION = 2

#: where a board user gets librknnrt.so
RUNTIME_SOURCE = ("Rockchip's rknn-toolkit2 repository (github.com/airockchip/rknn-toolkit2), "
                  "file rknpu2/runtime/Linux/librknn_api/aarch64/librknnrt.so")


class ReportError(ValueError):
    """A compiler report that is missing, unreadable or not of our schema."""


#: names the compiler gives the scratch buffers it adds for one layer (rk3588's Concat and
#: rk3568/rk3562's OutputOperator in ppocr_det); no ONNX node outputs them
SCRATCH = re.compile(r"_exSecondary\d*$")


@dataclass(frozen=True)
class Lifetime:
    """One activation tensor's place in the internal buffer and the layers it lives across."""
    tensor: str
    first_layer: int   # the layer that writes it
    last_layer: int    # the last layer that reads it
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def alive_with(self, other: "Lifetime") -> bool:
        return self.first_layer <= other.last_layer and other.first_layer <= self.last_layer

    def overlaps(self, other: "Lifetime") -> bool:
        return self.start < other.end and other.start < self.end


class CompilerReport:
    """A parsed <soc>.report.json with the derived views the course needs."""

    def __init__(self, data: Dict[str, Any], directory: Optional[Path] = None):
        self.data = data
        self.directory = directory

    # identity
    @property
    def model(self) -> str:
        return self.data["model"]

    @property
    def target(self) -> str:
        return self.data["target"]

    @property
    def toolkit_version(self) -> str:
        """The rknn-toolkit2 version that compiled the .rknn ("2.3.2"), as the file names it."""
        try:
            return self.data["toolkit_version"]
        except KeyError:
            raise ReportError(f"report for {self.model}/{self.target} records no toolkit_version "
                              "(written before schema version 2: rebuild it with tools/models/build.sh)") from None

    @property
    def rknn_shipped(self) -> bool:
        """Whether data/models holds this model's .rknn for this SoC (False: a report and a log
        only, for timing and memory plans; the simulator cannot run it)."""
        return self.data["rknn_file"].get("shipped", True)

    @property
    def rknn_path(self) -> Path:
        if not self.rknn_shipped:
            runnable = model_socs(self.model, self.directory.parent if self.directory else None)
            raise ReportError(f"{self.model} has a compiler report for {self.target} but no .rknn (reports "
                              "only: timing and memory plans need no model file); "
                              + (f"a .rknn ships for: {', '.join(runnable)}" if runnable
                                 else "no SoC has a .rknn of it (a timing-calibration model)"))
        return self._file(self.data["rknn_file"]["path"])

    @property
    def rknn_sha256(self) -> str:
        return self.data["rknn_file"]["sha256"]

    @property
    def onnx_path(self) -> Optional[Path]:
        onnx = self.data.get("onnx_file")
        return self._file(onnx["path"]) if onnx else None

    @property
    def log_path(self) -> Path:
        return self._file(self.data["log_file"])

    def _file(self, name: str) -> Path:
        if self.directory is None:
            raise ReportError(f"report for {self.model}/{self.target} was not loaded from a directory")
        return self.directory / name

    # memory
    @property
    def total_weight_size(self) -> int:
        return int(self.data["memory"]["total_weight_size"])

    @property
    def total_internal_size(self) -> int:
        return int(self.data["memory"]["total_internal_size"])

    def attrs(self, kind: str, which: str = "plain") -> List[Dict[str, Any]]:
        """kind: 'inputs' or 'outputs'; which: 'plain', 'native' or 'native_nhwc'."""
        return [t[which] for t in self.data[kind]]

    @property
    def layers(self) -> List[Dict[str, Any]]:
        return self.data["layers"]

    @property
    def npu_cycles(self) -> int:
        """Sum of the compiler's per-layer Total cycles."""
        return sum(layer["cycles_total"] for layer in self.layers)

    def lifetimes(self) -> List[Lifetime]:
        """One Lifetime per activation tensor: written by its producer, read until its last user."""
        spans: Dict[str, Lifetime] = {}
        for row in self.data["feature_tensors"]:
            name = row["tensor"]
            old = spans.get(name)
            # a compiler-made scratch buffer (`<tensor>_exSecondary`, `..._exSecondary0`): no
            # layer writes it before its user, so it lives at its user's layer only
            written = row["layer_id"] if SCRATCH.search(name) else row["producer_layer_id"]
            first = min(written, old.first_layer) if old else written
            last = max(row["layer_id"], old.last_layer) if old else row["layer_id"]
            if old and (old.start, old.end) != (row["start"], row["end"]):
                raise ReportError(f"{self.model}/{self.target}: tensor {name} has two places in the plan")
            spans[name] = Lifetime(name, first, last, row["start"], row["end"])
        return sorted(spans.values(), key=lambda t: (t.first_layer, t.start))

    def view_pairs(self) -> List[Tuple[str, str]]:
        """Pairs of tensors the compiler lays one inside the other on purpose.

        Concat and Split are often free on the NPU: the compiler writes a
        concat's inputs straight into slices of its output, and a split's
        outputs are slices of its input.  Such tensors share bytes while alive
        together; the memory plan is still sound."""
        touching: Dict[int, set] = {}
        for row in self.data["feature_tensors"]:
            touching.setdefault(row["layer_id"], set()).add(row["tensor"])
            touching.setdefault(row["producer_layer_id"], set()).add(row["tensor"])
        spans = {t.tensor: t for t in self.lifetimes()}
        pairs = []
        for layer in self.layers:
            if layer["op"] not in ("Concat", "Split"):
                continue
            names = sorted(touching.get(layer["id"], ()))
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    sa, sb = spans[a], spans[b]
                    inside = (sa.start <= sb.start and sb.end <= sa.end) or (sb.start <= sa.start and sa.end <= sb.end)
                    if inside and sa.overlaps(sb):
                        pairs.append((a, b))
        return pairs

    # dynamic shapes (a model compiled with rknn-toolkit2's config(dynamic_input=...))
    @property
    def dynamic_shapes(self) -> List[Dict[str, Any]]:
        """One entry per input shape set, smallest first: the order the .rknn stores them in
        (taken as RKNN_QUERY_INPUT_DYNAMIC_RANGE's order); [] for a static model.  Each entry has
        input_dims, inputs/outputs (attr rows like the top level's), memory
        (total_internal_size, ...), layers, feature_tensors, const_tensors (null where the
        compiler printed nothing for that shape) and sources."""
        return self.data.get("dynamic_shapes", [])

    def for_shape(self, input_dims: Sequence[Sequence[int]]) -> "CompilerReport":
        """The report of one shape of a dynamic model: the top-level fields replaced by that
        shape's entry, so lifetimes(), npu_cycles, attrs() ... describe that shape's graph.
        ``input_dims``: one NCHW shape per input, e.g. [[1, 3, 160, 160]]."""
        wanted = [list(d) for d in input_dims]
        for entry in self.dynamic_shapes:
            if entry["input_dims"] == wanted:
                missing = [k for k in ("layers", "feature_tensors", "const_tensors") if entry.get(k) is None]
                if missing or entry["memory"].get("total_internal_size") is None:
                    raise ReportError(f"{self.model}/{self.target}: the compiler printed no "
                                      f"{', '.join(missing) or 'memory plan'} for {wanted}; "
                                      f"{entry['sources'].get('static_variant', 'no static variant')} has it")
                data = dict(self.data)
                data.update({k: entry[k] for k in ("inputs", "outputs", "layers", "feature_tensors", "const_tensors")})
                data["memory"] = dict(self.data["memory"], **entry["memory"])
                data.pop("dynamic_shapes")
                return CompilerReport(data, self.directory)
        have = [e["input_dims"] for e in self.dynamic_shapes]
        raise ReportError(f"{self.model}/{self.target} has no shape {wanted}; "
                          + (f"its shapes: {have}" if have else "it is not a dynamic-shape model"))

    @property
    def values_twin_path(self) -> Optional[Path]:
        """The fp32 ONNX file that gives this model's output values: its own twin, or for a
        model without one the twin model.json names ("values_twin": the base model's, same
        weights).  A dynamic model's twin is run at each shape via :func:`onnx_free_hw`."""
        own = self.onnx_path
        if own is not None:
            return own
        info_path = self._file("model.json")
        twin = json.loads(info_path.read_text()).get("values_twin") if info_path.exists() else None
        return (self.directory / twin["path"]).resolve() if twin else None

    def naive_activation_bytes(self) -> int:
        """What the activations would take if every tensor had a buffer of its own."""
        return sum(t.size for t in self.lifetimes())

    def __repr__(self) -> str:
        return (f"<CompilerReport {self.model} {self.target}: weights {self.total_weight_size} B, "
                f"internal {self.total_internal_size} B, {len(self.layers)} layers>")


def schema() -> Dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate_report(data: Any) -> None:
    """Raise ReportError unless ``data`` is a report of our schema (needs jsonschema)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise ReportError("not an rknnlab compiler report (missing 'schema': 'rknnlab.compiler_report')")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ReportError(f"compiler report schema_version {data.get('schema_version')!r}; "
                          f"this rknnlab reads version {SCHEMA_VERSION}")
    import jsonschema
    try:
        jsonschema.validate(data, schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise ReportError(f"compiler report invalid at {where or '<top>'}: {exc.message}") from None


# ONNX is a protobuf; only the fields on the path to an input's dims are decoded here
# (ModelProto.graph 7 > GraphProto.input 11 > ValueInfoProto.type 2 > TypeProto.tensor_type 1
# > shape 2 > TensorShapeProto.dim 1 > Dimension dim_value 1 / dim_param 2), so freeing two
# dims needs neither the onnx package nor a copy of the weights.

def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _rewrite(data: bytes, field: int, edit) -> bytes:
    """``data`` (a protobuf message) with each length-delimited ``field`` replaced by
    edit(payload, n) (n counts occurrences); everything else copied byte for byte."""
    try:
        return _rewrite_fields(data, field, edit)
    except IndexError:
        raise ReportError("not an ONNX model (the protobuf ends inside a field)") from None


def _rewrite_fields(data: bytes, field: int, edit) -> bytes:
    out, pos, n = bytearray(), 0, 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, body = _varint(data, pos)
            pos = body + length
            if pos > len(data):
                raise IndexError(pos)
            if number == field:
                payload = edit(data[body:pos], n)
                n += 1
                out += _encode_varint(key) + _encode_varint(len(payload)) + payload
                continue
        else:
            raise ReportError(f"not an ONNX model (protobuf wire type {wire} at byte {start})")
        if pos > len(data):
            raise IndexError(pos)
        out += data[start:pos]
    return bytes(out)


def onnx_free_hw(model: bytes) -> bytes:
    """The ONNX model ``model`` with the height and width of every 4-D graph input left free
    (dims 2 and 3 become the names "height" and "width"), so onnxruntime runs it at any
    input size.  A network whose layers all accept any size (MobileNetV2 ends in a global
    average pool) then computes the output of another input size, with the same weights."""
    def dims(shape: bytes, _n: int) -> bytes:
        count = [0]

        def dim(payload: bytes, n: int) -> bytes:
            count[0] += 1
            if n in (2, 3):
                name = b"height" if n == 2 else b"width"
                return b"\x12" + _encode_varint(len(name)) + name   # field 2 (dim_param), a string
            return payload
        free = _rewrite(shape, 1, dim)
        return free if count[0] == 4 else shape

    def value_info(vi: bytes, _n: int) -> bytes:
        return _rewrite(vi, 2, lambda t, _: _rewrite(t, 1, lambda tt, _: _rewrite(tt, 2, dims)))
    graphs = []

    def graph(payload: bytes, _n: int) -> bytes:
        graphs.append(1)
        return _rewrite(payload, 11, value_info)
    free = _rewrite(model, 7, graph)
    if len(graphs) != 1:
        raise ReportError(f"not an ONNX model ({len(graphs)} graphs where a ModelProto has one)")
    return free


def list_models(root: Optional[Path] = None) -> List[str]:
    """The course models a runtime can load: those with a .rknn for at least one SoC."""
    base = root or models_dir()
    return sorted(p.name for p in base.iterdir() if p.is_dir() and model_socs(p.name, base))


def model_socs(name: str, root: Optional[Path] = None) -> List[str]:
    """The SoCs ``name`` has a .rknn for (what rknn_init can be given)."""
    return [soc for soc in report_socs(name, root) if load_report(name, soc, root).rknn_shipped]


def list_reports(root: Optional[Path] = None) -> List[Tuple[str, str]]:
    """(model, soc) of every compiler report in data/models, with or without a .rknn: the
    course models on every SoC and the timing-calibration models (rknnlab.sim.timing_law)."""
    base = root or models_dir()
    return [(p.name, soc) for p in sorted(base.iterdir()) if p.is_dir() for soc in report_socs(p.name, base)]


def report_socs(name: str, root: Optional[Path] = None) -> List[str]:
    """The SoCs ``name`` has a compiler report for (a superset of :func:`model_socs`)."""
    base = (root or models_dir()) / name
    return sorted(p.name[: -len(".report.json")] for p in base.glob("*.report.json"))


def model_info(name: str, root: Optional[Path] = None) -> Dict[str, Any]:
    """model.json: how the model was made (weights, seed, accuracy where trained)."""
    path = (root or models_dir()) / name / "model.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"no model named {name!r} (looked for {path})") from None


#: SoCs that run another SoC's models: RK3566 and RK3568 share one NPU, compiled for as rk3568
SOC_MODELS = {"rk3566": "rk3568"}


def load_report(name: str, soc: str = "rk3588", root: Optional[Path] = None) -> CompilerReport:
    soc = SOC_MODELS.get(soc, soc)
    directory = (root or models_dir()) / name
    path = directory / f"{soc}.report.json"
    if not path.exists():
        have = report_socs(name, root) if directory.exists() else []
        hint = (f"{name} is compiled for: {', '.join(have)}" if have
                else f"known models: {', '.join(list_models(root))}")
        raise ReportError(f"no compiler report {path}; {hint}")
    return _load_path(path)


@functools.lru_cache(maxsize=None)
def _load_path(path: Path) -> CompilerReport:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"cannot read compiler report {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise ReportError(f"{path} is not an rknnlab compiler report")
    return CompilerReport(data, path.parent)


def model_path(name: str, soc: str = "rk3588", root: Optional[Path] = None) -> Path:
    """The .rknn file of a course model (what rknn_init is given)."""
    return load_report(name, soc, root).rknn_path


@functools.lru_cache(maxsize=None)
def _sha_index(root: Path) -> Dict[str, Tuple[str, str]]:
    index: Dict[str, Tuple[str, str]] = {}
    for name in list_models(root):
        for soc in model_socs(name, root):
            index[load_report(name, soc, root).rknn_sha256] = (name, soc)
    return index


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def report_for_model_bytes(data: bytes, root: Optional[Path] = None) -> Optional[CompilerReport]:
    """The report of the course model whose .rknn bytes these are, or None."""
    base = root or models_dir()
    hit = _sha_index(base).get(sha256_of(data))
    return load_report(hit[0], hit[1], base) if hit else None


def toolkit_version(name: str, soc: str = "rk3588", root: Optional[Path] = None) -> str:
    """The rknn-toolkit2 version that compiled a course model for ``soc`` ("2.3.2")."""
    return load_report(name, soc, root).toolkit_version


_LEADING_VERSION = re.compile(r"\s*(\d+(?:\.\d+)*)")
# the .rknn names its maker as "2.3.2(compiler version: 2.3.2 (<commit>@<date>))"
_RKNN_MAKER = re.compile(rb"(\d+(?:\.\d+)+)\(compiler version: ")


def rknn_toolkit_version(data: bytes) -> Optional[str]:
    """The rknn-toolkit2 version a .rknn file names (its first 64 KiB suffice), or None."""
    found = {m.group(1) for m in _RKNN_MAKER.finditer(data)}
    return found.pop().decode() if len(found) == 1 else None


def version_tuple(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    """(2, 3, 2) from "2.3.2" or "2.3.2 (429f97ae6b@2025-04-09T09:09:27)"; None if no number leads."""
    m = _LEADING_VERSION.match(text or "")
    if not m:
        return None
    parts = tuple(int(p) for p in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts))


@dataclass(frozen=True)
class RuntimeVerdict:
    """Whether a librknnrt can be trusted with a model compiled by a given toolkit.

    status: "ok" (runtime as new as the compiler, or newer), "runtime older"
    (the runtime may refuse or mis-run the model) or "unknown" (a version is
    unreadable). ``advice`` says what to do when status is not "ok"."""
    status: str
    toolkit_version: Optional[str]
    runtime_version: Optional[str]
    message: str
    advice: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def __str__(self) -> str:
        return self.message + (f" -> {self.advice}" if self.advice else "")


def check_runtime(toolkit: Optional[str], runtime: Optional[str]) -> RuntimeVerdict:
    """Compare the rknn-toolkit2 version that compiled a model with a librknnrt version.

    The rule (facts sheet section 4): compile with a toolkit no newer than the
    runtime that will load the model. ``runtime`` may be the whole version
    string librknnrt.so carries ("2.3.2 (429f97ae6b@2025-04-09T09:09:27)")."""
    tk, rt = version_tuple(toolkit), version_tuple(runtime)
    runtime_number = _LEADING_VERSION.match(runtime).group(1) if rt else runtime
    if tk is None:
        return RuntimeVerdict("unknown", toolkit, runtime_number,
                              "the model names no rknn-toolkit2 version",
                              "look for its 'compiler version' string (strings model.rknn | grep 'compiler "
                              "version'); the toolkit that wrote it must be no newer than librknnrt")
    if rt is None:
        return RuntimeVerdict("unknown", toolkit, runtime,
                              f"built by rknn-toolkit2 {toolkit}; the librknnrt version is unreadable",
                              "read it with: strings librknnrt.so | grep 'librknnrt version'; it must "
                              f"be {toolkit} or newer, else take librknnrt.so {toolkit} or newer from "
                              + RUNTIME_SOURCE)
    if rt < tk:
        return RuntimeVerdict(
            "runtime older", toolkit, runtime_number,
            f"built by rknn-toolkit2 {toolkit}, newer than librknnrt {runtime_number}: an older runtime "
            "may refuse the model (rknn_init fails) or run it wrongly",
            f"upgrade librknnrt.so to {toolkit} or newer, from {RUNTIME_SOURCE}; or rebuild the model with "
            f"rknn-toolkit2 {runtime_number} or older (on an x86_64 PC: pip install 'rknn-toolkit2<={runtime_number}'; "
            "for the course models, TOOLKIT_VERSION in tools/models/build.sh)")
    relation = "the same version" if rt == tk else "a newer runtime"
    return RuntimeVerdict("ok", toolkit, runtime_number,
                          f"built by rknn-toolkit2 {toolkit}, librknnrt {runtime_number}: {relation}")
