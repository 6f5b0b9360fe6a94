"""The course models on disk: every report valid, consistent and traceable to its log."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rknnlab import models
from rknnlab.paths import models_dir

ROOT = models_dir()
REPORTS = sorted(ROOT.glob("*/*.report.json"))
#: reports whose .rknn ships (the others are reports and logs only)
SHIPPED = [p for p in REPORTS if json.loads(p.read_text())["rknn_file"].get("shipped", True)]
TYPE_SIZES = {"RKNN_TENSOR_INT8": 1, "RKNN_TENSOR_UINT8": 1, "RKNN_TENSOR_FLOAT16": 2,
              "RKNN_TENSOR_FLOAT32": 4, "RKNN_TENSOR_INT32": 4, "RKNN_TENSOR_INT64": 8}
EXPECTED = {
    "mobilenet_v2": {"rk3588", "rk3576", "rk3568", "rk3562"},
    "yolov5s": {"rk3588", "rk3576", "rk3568", "rk3562"},
    "digits_cnn": {"rk3588", "rk3576", "rk3568", "rk3562"},
    "yolov5s_relu": {"rk3588"},
    "yolov5n": {"rk3588"},
    "yolov5m": {"rk3588"},
    "resnet50": {"rk3588"},
    "yolov5s_320": {"rk3588"},
    "yolov5s_480": {"rk3588"},
    "mobilenet_v2_160": {"rk3588"},
    "mobilenet_v2_320": {"rk3588"},
    "mobilenet_v2_dynamic": {"rk3588"},
    "ppocr_det": {"rk3588", "rk3576", "rk3568", "rk3562"},
}
#: input-size variants: name -> (base model, input side)
VARIANTS = {"yolov5s_320": ("yolov5s", 320), "yolov5s_480": ("yolov5s", 480),
            "mobilenet_v2_160": ("mobilenet_v2", 160), "mobilenet_v2_320": ("mobilenet_v2", 320)}


def _ids(paths):
    return [f"{p.parent.name}/{p.name.split('.')[0]}" for p in paths]


def _load_log_parser(module_name: str = "rknn_log"):
    path = ROOT.parent.parent / "tools" / "models" / f"{module_name}.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ALL_SOCS = {"rk3588", "rk3576", "rk3568", "rk3562"}
#: the timing law's calibration models (issue 17): reports on every SoC, no .rknn
CALIBRATION_ONLY = {"yolov6n", "yolov8n", "yolox_s", "retinaface_mobile320", "deeplabv3plus_mobilenet_v2"}


def test_catalogue_is_complete():
    for name, socs in EXPECTED.items():
        assert set(models.model_socs(name)) >= socs, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_course_model_has_a_report_for_every_soc(name: str):
    """The timing law and the memory plans need every model on every SoC; the .rknn ships
    only where a notebook runs it."""
    assert set(models.report_socs(name)) == ALL_SOCS
    for soc in ALL_SOCS - set(models.model_socs(name)):
        report = models.load_report(name, soc)
        assert not report.rknn_shipped and not (ROOT / name / f"{soc}.rknn").exists()
        with pytest.raises(models.ReportError, match=f"no .rknn.*ships for: {', '.join(models.model_socs(name))}"):
            report.rknn_path


def test_runnable_models_and_report_only_models_are_told_apart():
    listed = set(models.list_models())
    assert set(EXPECTED) <= listed
    everything = models.list_reports()
    assert {name for name, _ in everything} >= listed | CALIBRATION_ONLY
    for name in CALIBRATION_ONLY & {n for n, _ in everything}:
        assert name not in listed and models.model_socs(name) == []
        with pytest.raises(models.ReportError, match="no SoC has a .rknn"):
            models.model_path(name, "rk3588")
    # the .rknn on disk is what model_socs says: no more, no less
    for name, soc in everything:
        assert (ROOT / name / f"{soc}.rknn").exists() == (soc in models.model_socs(name)), (name, soc)


def test_size_budget():
    total = sum(p.stat().st_size for p in ROOT.rglob("*") if p.is_file())
    assert total < 200 * 1024 * 1024, f"data/models holds {total / 2**20:.1f} MiB"


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_report_validates(path: Path):
    models.validate_report(json.loads(path.read_text()))


def test_validation_rejects_a_broken_report():
    data = json.loads(REPORTS[0].read_text())
    data["memory"]["total_internal_size"] = "1568KB"
    with pytest.raises(models.ReportError, match="total_internal_size"):
        models.validate_report(data)
    data = json.loads(REPORTS[0].read_text())
    data["schema_version"] = 99
    with pytest.raises(models.ReportError, match="schema_version"):
        models.validate_report(data)


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_files_match_their_hashes(path: Path):
    report = json.loads(path.read_text())
    for key in ("rknn_file", "onnx_file"):
        entry = report[key]
        if entry is None or entry.get("shipped", True) is False:
            continue
        blob = (path.parent / entry["path"]).read_bytes()
        assert len(blob) == entry["bytes"]
        assert hashlib.sha256(blob).hexdigest() == entry["sha256"], f"{entry['path']} changed since the report"
    info = models.model_info(path.parent.name)
    assert (path.parent / "model.onnx").exists() == info["onnx_twin"]


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_io_attr_sizes_are_consistent(path: Path):
    report = json.loads(path.read_text())
    for kind in ("inputs", "outputs"):
        for index, tensor in enumerate(report[kind]):
            for which in ("plain", "native", "native_nhwc"):
                attr = tensor[which]
                assert attr["index"] == index
                assert attr["n_dims"] == len(attr["dims"])
                assert attr["n_elems"] == int(np.prod(attr["dims"])), (kind, which)
                assert attr["size"] == attr["n_elems"] * TYPE_SIZES[attr["type"]], (kind, which)
                assert attr["size_with_stride"] >= attr["size"], (kind, which)
                if attr["fmt"] == "RKNN_TENSOR_NHWC" and attr["w_stride"]:
                    n, h, _, c = attr["dims"]
                    assert attr["size_with_stride"] == n * h * attr["w_stride"] * c * TYPE_SIZES[attr["type"]]
            q = tensor["plain"]
            lo, hi = tensor["calibration"]["min"], tensor["calibration"]["max"]
            if q["type"] not in ("RKNN_TENSOR_INT8", "RKNN_TENSOR_UINT8"):
                # a float output (retinaface's float16 conf): no quantization, as the runtime
                # reports a float tensor
                for which in ("plain", "native", "native_nhwc"):
                    attr = tensor[which]
                    assert (attr["qnt_type"], attr["zp"], attr["scale"]) == ("RKNN_TENSOR_QNT_NONE", 0, 1.0)
                assert lo is None and hi is None
                continue
            assert q["qnt_type"] == "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC"
            if tensor["sources"]["zp_scale"].startswith("the range [0, 1]"):
                # a sigmoid's output quantized over its whole range, the calibrated one inside it
                assert 0.0 <= lo <= hi <= 1.0
                lo, hi = 0.0, 1.0
            # the int8 grid spans the calibrated range widened to hold 0 (a sigmoid output
            # calibrated on [0.017, 0.98] gets [0, 0.98]): -128 maps to its min, 127 to its max
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            assert (-128 - q["zp"]) * q["scale"] == pytest.approx(lo, abs=q["scale"])
            assert (127 - q["zp"]) * q["scale"] == pytest.approx(hi, abs=q["scale"])


def _in_place_pairs(rows) -> set:
    """(input, output) of the layers that write their output over their input, the same
    bytes (retinaface's standalone Relu after each SSH Concat): sound, the layer reads each
    element before writing it."""
    read = {}
    for r in rows:
        read.setdefault(r["layer_id"], set()).add((r["start"], r["end"], r["tensor"]))
    pairs = set()
    for r in rows:
        for start, end, tensor in read.get(r["producer_layer_id"], ()):
            if (start, end) == (r["start"], r["end"]) and tensor != r["tensor"]:
                pairs.add(frozenset((tensor, r["tensor"])))
    return pairs


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_memory_plan_is_sound(path: Path):
    report = models.load_report(path.parent.name, path.name.split(".")[0])
    internal = report.total_internal_size
    rows = report.data["feature_tensors"]
    peak = max(r["end"] for r in rows)
    assert peak == internal
    for row in rows:
        assert 0 <= row["start"] < row["end"] <= internal, row["tensor"]
        assert row["size"] == row["end"] - row["start"]
        assert row["producer_layer_id"] < row["layer_id"]
        # the compiler stars exactly the rows that reach the plan's high-water mark
        assert row["starred"] == (row["end"] == peak), row["tensor"]
    lifetimes = report.lifetimes()
    views = {frozenset(pair) for pair in report.view_pairs()} | _in_place_pairs(rows)
    clashes = [(a.tensor, b.tensor) for i, a in enumerate(lifetimes) for b in lifetimes[i + 1:]
               if a.alive_with(b) and a.overlaps(b) and frozenset((a.tensor, b.tensor)) not in views]
    assert not clashes, clashes[:5]
    assert report.naive_activation_bytes() >= internal
    for const in report.data["const_tensors"]:
        assert 0 <= const["start"] <= const["end"] <= report.data["memory"]["const_extent"]
    assert report.data["memory"]["const_extent"] <= report.total_weight_size


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_report_tables_come_from_the_shipped_log(path: Path):
    """Every table in the report can be re-derived from the raw log kept beside it."""
    parser = _load_log_parser()
    report = json.loads(path.read_text())
    text = gzip.decompress((path.parent / report["log_file"]).read_bytes()).decode()
    parsed = parser.parse_log(text)
    assert parsed["layers"] == report["layers"]
    assert parsed["const_tensors"] == report["const_tensors"]
    stripped = [{k: v for k, v in row.items() if k != "producer_layer_id"} for row in report["feature_tensors"]]
    assert parsed["feature_tensors"] == stripped
    assert parsed["totals"]["weight"]["printed"] == report["memory"]["printed"]["weight"]
    assert parsed["compiler_version"] == report["toolkit"]["librknnc"]
    assert parsed["toolkit_version"] == report["toolkit_version"] == report["toolkit"]["rknn_toolkit2"]
    # a dynamic-shape model: every shape's tables are one graph of the same log
    assert len(parsed["graphs"]) == len(report.get("dynamic_shapes", []))
    for entry in report.get("dynamic_shapes", []):
        graph = parsed["graphs"][entry["sources"]["log_graph"]]
        assert graph["layers"] == entry["layers"]
        assert graph["const_tensors"] == entry["const_tensors"]
        assert graph["feature_tensors"] == [{k: v for k, v in row.items() if k != "producer_layer_id"}
                                            for row in entry["feature_tensors"]]
        assert graph["totals"]["internal"]["printed"] == entry["memory"]["printed"]["internal"]


@pytest.mark.parametrize("path", SHIPPED, ids=_ids(SHIPPED))
def test_toolkit_version_is_the_one_the_rknn_names(path: Path):
    report = models.load_report(path.parent.name, path.name.split(".")[0])
    blob = report.rknn_path.read_bytes()
    assert models.rknn_toolkit_version(blob) == report.toolkit_version
    # the full maker string, as `strings` shows it
    maker = f"{report.toolkit_version}(compiler version: {report.data['toolkit']['librknnc']})".encode()
    assert maker in blob
    assert models.toolkit_version(report.model, report.target) == report.toolkit_version


def test_course_models_load_on_the_runtime_the_course_names():
    """The README tells board users to install librknnrt 2.3.2: no course model may be newer."""
    for path in REPORTS:
        report = models.load_report(path.parent.name, path.name.split(".")[0])
        verdict = models.check_runtime(report.toolkit_version, "2.3.2 (429f97ae6b@2025-04-09T09:09:27)")
        assert verdict.ok, (report.model, report.target, str(verdict))


def test_c2_depends_on_soc_and_is_read_from_the_native_attr():
    """int8 NC1HWC2 tensors: C2 = 8 on rk3568, 16 on rk3588/rk3576/rk3562 (facts sheet section 4)."""
    expected = {"rk3568": 8, "rk3588": 16, "rk3576": 16, "rk3562": 16}
    seen = set()
    for path in REPORTS:
        report = models.load_report(path.parent.name, path.name.split(".")[0])
        for attr in report.attrs("outputs", "native"):
            if attr["fmt"] == "RKNN_TENSOR_NC1HWC2" and attr["type"] == "RKNN_TENSOR_INT8":
                assert attr["dims"][4] == expected[report.target], (report.model, report.target, attr["dims"])
                seen.add(report.target)
        # every int8 activation with more channels than one block follows the same C2
        for row in report.data["feature_tensors"]:
            shape = row["native_shape"]
            if row["fmt"] == "NC1HWC2" and row["dtype"].upper() == "INT8" and row["orig_shape"][1] > 16:
                assert shape[4] == expected[report.target], (report.model, report.target, row["tensor"])
    assert seen == set(expected), "some SoC has no NC1HWC2 int8 output to check"


def test_report_without_toolkit_version_is_a_clear_error():
    data = json.loads(REPORTS[0].read_text())
    del data["toolkit_version"]
    with pytest.raises(models.ReportError, match="toolkit_version"):
        models.validate_report(data)
    with pytest.raises(models.ReportError, match="schema version 2"):
        models.CompilerReport(data).toolkit_version


def test_log_parser_fails_loudly_on_a_truncated_log():
    parser = _load_log_parser()
    report = json.loads(REPORTS[0].read_text())
    text = gzip.decompress((REPORTS[0].parent / report["log_file"]).read_bytes()).decode()
    cut = text[: text.index("Const Tensor Information Table")]
    with pytest.raises(parser.LogParseError, match="Const Tensor"):
        parser.parse_log(cut)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_input_size_variants_are_their_base_network(name: str):
    """yolov5s_320 & co.: the base's network and weights, compiled for another input size."""
    base, side = VARIANTS[name]
    info, base_info = models.model_info(name), models.model_info(base)
    assert info["variant_of"] == base
    assert info["weights_sha256"] == base_info["weights_sha256"], "weights differ from the base's"
    assert info["input_shape_nchw"] == [1, 3, side, side]
    report, base_report = models.load_report(name), models.load_report(base)
    assert report.attrs("inputs")[0]["dims"] == [1, side, side, 3]
    # every output keeps its channels; its spatial size scales with the input
    base_side = base_info["input_shape_nchw"][2]
    for attr, base_attr in zip(report.attrs("outputs"), base_report.attrs("outputs")):
        dims, base_dims = attr["dims"], base_attr["dims"]
        assert dims[:2] == base_dims[:2]
        assert [d * base_side for d in dims[2:]] == [d * side for d in base_dims[2:]], (dims, base_dims)
    # the compiler stored the same weight tensors (its own '*_2conv*' constants, which turn a
    # global average pool into convolutions, depend on the input size and are left out)
    def weights(r):
        return {c["tensor"]: (c["orig_shape"], c["size"]) for c in r.data["const_tensors"] if "_2conv" not in c["tensor"]}
    assert weights(report) == weights(base_report)
    # a smaller input means fewer cycles and less activation memory, a larger one more
    bigger = side > base_side
    assert (report.npu_cycles > base_report.npu_cycles) == bigger
    assert (report.total_internal_size > base_report.total_internal_size) == bigger


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_simulator_runs_each_input_size_variant(name: str):
    """rknn_init from the .rknn bytes finds the variant's own report (not its base's)."""
    from rknnlab import open_runtime
    from rknnlab.rknn import abi, buffers
    rt = open_runtime("sim", soc="rk3588")
    ctx = rt.init(str(models.model_path(name)))
    try:
        dims = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0)).dims
        side = VARIANTS[name][1]
        assert list(dims[:4]) == [1, side, side, 3]
        image = np.zeros((1, side, side, 3), np.uint8)
        rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        report = models.load_report(name)
        outputs = [abi.rknn_output(index=i, want_float=1) for i in range(len(report.attrs("outputs")))]
        rt.outputs_get(ctx, outputs)
        try:
            sizes = [out.size for out in outputs]
        finally:
            rt.outputs_release(ctx, outputs)
        assert sizes == [attr["n_elems"] * 4 for attr in report.attrs("outputs")]
    finally:
        rt.destroy(ctx)


def test_digits_model_records_its_accuracy():
    info = models.model_info("digits_cnn")
    assert info["weights"] == "trained here"
    assert 0.9 < info["fp32_test_accuracy"] <= 1.0
    data = np.load(ROOT / "digits_cnn" / "testset.npz", allow_pickle=False)
    assert data["images"].shape == (info["test_set"]["n"], 1, 8, 8)
    assert data["images"].dtype == np.uint8


def test_report_lookup_by_model_bytes():
    report = models.load_report("mobilenet_v2", "rk3588")
    found = models.report_for_model_bytes(report.rknn_path.read_bytes())
    assert (found.model, found.target) == ("mobilenet_v2", "rk3588")
    assert models.report_for_model_bytes(b"RKNN" + b"\0" * 64) is None


def test_unknown_model_or_soc_is_a_clear_error():
    # every course model has a report for the four SoCs; an SoC the course does not build for
    with pytest.raises(models.ReportError, match="yolov5m is compiled for: rk3562, rk3568, rk3576, rk3588"):
        models.load_report("yolov5m", "rk1808")
    with pytest.raises(models.ReportError, match="known models"):
        models.load_report("no_such_model")


def test_rk3566_boards_get_the_rk3568_models():
    report = models.load_report("mobilenet_v2", "rk3566")
    assert report.target == "rk3568"


@pytest.mark.parametrize("toolkit,runtime,status", [
    ("2.3.2", "2.3.2 (429f97ae6b@2025-04-09T09:09:27)", "ok"),
    ("2.3.2", "2.5.0", "ok"),
    ("2.3.2", "2.10.0", "ok"),            # numeric, not string, order
    ("2.5.0", "2.3.2 (429f97ae6b@2025-04-09T09:09:27)", "runtime older"),
    ("2.3.2", "2.3.0", "runtime older"),
    ("2.3.2", "1.6.0 (x)", "runtime older"),
    ("2.3.2", None, "unknown"),
    ("2.3.2", "no version here", "unknown"),
    (None, "2.3.2", "unknown"),
])
def test_check_runtime_verdicts(toolkit, runtime, status):
    verdict = models.check_runtime(toolkit, runtime)
    assert verdict.status == status
    assert verdict.ok == (status == "ok")
    if status == "ok":
        assert not verdict.advice
    else:
        assert verdict.advice, "a verdict that is not ok says what to do"
    if status == "runtime older":
        # both ways out, with the versions that make them work
        assert f"upgrade librknnrt.so to {toolkit} or newer" in verdict.advice
        assert "github.com/airockchip/rknn-toolkit2" in verdict.advice
        assert f"rknn-toolkit2<={verdict.runtime_version}" in verdict.advice
        assert "newer than librknnrt" in verdict.message and verdict.runtime_version in verdict.message


def test_rknn_toolkit_version_reads_the_makers_string():
    blob = b"RKNN\0junk\x3e\0\0\x002.3.2(compiler version: 2.3.2 (e045de294f@2025-04-07T19:48:25))\0rest"
    assert models.rknn_toolkit_version(blob) == "2.3.2"
    assert models.rknn_toolkit_version(b"RKNN" + bytes(64)) is None
    # two different makers in one file: no single answer
    assert models.rknn_toolkit_version(blob + b"2.5.0(compiler version: 2.5.0 (x))") is None


# -- the dynamic-shape model ------------------------------------------------------------------

DYNAMIC = "mobilenet_v2_dynamic"
#: input side -> the static model compiled from the same network for that side
STATIC_OF_SIDE = {160: "mobilenet_v2_160", 224: "mobilenet_v2", 320: "mobilenet_v2_320"}


def _dynamic_report() -> dict:
    return json.loads((ROOT / DYNAMIC / "rk3588.report.json").read_text())


def _stored_weights(report: models.CompilerReport) -> dict:
    # the compiler's own '*_2conv*' constants (a global average pool turned into convolutions)
    # depend on the input size and are not the network's weights
    return {c["tensor"]: (c["orig_shape"], c["size"]) for c in report.data["const_tensors"]
            if "_2conv" not in c["tensor"]}


def test_dynamic_model_is_mobilenet_v2_with_its_weights():
    info, base = models.model_info(DYNAMIC), models.model_info("mobilenet_v2")
    assert info["variant_of"] == "mobilenet_v2"
    assert info["weights_sha256"] == base["weights_sha256"], "weights differ from mobilenet_v2's"
    assert info["dynamic_input"] == [[[1, 3, side, side]] for side in (160, 224, 320)]
    report = models.load_report(DYNAMIC)
    assert _stored_weights(report) == _stored_weights(models.load_report("mobilenet_v2"))
    for entry in report.dynamic_shapes:
        assert _stored_weights(report.for_shape(entry["input_dims"])) == _stored_weights(report)


def test_static_models_have_no_dynamic_shapes():
    for path in REPORTS:
        if path.parent.name == DYNAMIC:
            continue
        report = models.load_report(path.parent.name, path.name.split(".")[0])
        assert report.dynamic_shapes == []
        with pytest.raises(models.ReportError, match="not a dynamic-shape model"):
            report.for_shape([[1, 3, 224, 224]])


def test_dynamic_shapes_are_well_formed():
    report = models.load_report(DYNAMIC)
    entries = report.dynamic_shapes
    # the configured order (model.json), one entry per shape
    assert [e["input_dims"] for e in entries] == models.model_info(DYNAMIC)["dynamic_input"]
    for entry in entries:
        (n, c, h, w), = entry["input_dims"]
        one = report.for_shape(entry["input_dims"])
        assert one.attrs("inputs")[0]["dims"] == [n, h, w, c]
        assert one.attrs("inputs")[0]["size"] == n * h * w * c
        assert [layer["output_shapes"][0] for layer in one.layers if layer["op"] == "InputOperator"] == [[n, c, h, w]]
        assert one.attrs("outputs")[0]["dims"] == [1, 1000]
        # the shape's memory plan: its total is where its last feature tensor ends
        assert max(row["end"] for row in entry["feature_tensors"]) == entry["memory"]["total_internal_size"]
        assert one.total_internal_size == entry["memory"]["total_internal_size"]
        assert one.naive_activation_bytes() >= one.total_internal_size
        assert entry["sources"]["static_variant"] == STATIC_OF_SIDE[h]
    # the top level is the largest shape's graph (the toolkit's MaxShape)
    largest = max(entries, key=lambda e: e["memory"]["total_internal_size"])
    assert largest["input_dims"] == [[1, 3, 320, 320]]
    for key in ("inputs", "outputs", "layers", "feature_tensors", "const_tensors"):
        assert report.data[key] == largest[key], key
    assert report.total_internal_size == largest["memory"]["total_internal_size"]
    # memory and work grow with the input
    sizes = [e["memory"]["total_internal_size"] for e in entries]
    cycles = [report.for_shape(e["input_dims"]).npu_cycles for e in entries]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3
    assert cycles == sorted(cycles) and len(set(cycles)) == 3
    with pytest.raises(models.ReportError, match="no shape"):
        report.for_shape([[1, 3, 256, 256]])
    # the list's order is the order the .rknn file stores the shapes in
    rknn_file = _load_log_parser("rknn_file")
    dims = [e["input_dims"][0] for e in entries]
    assert rknn_file.stored_shape_order(str(report.rknn_path), list(reversed(dims))) == dims


def test_log_parser_splits_a_dynamic_build_into_its_graphs():
    parser = _load_log_parser()
    text = gzip.decompress((ROOT / DYNAMIC / "rk3588.log.gz").read_bytes()).decode()
    assert [len(g["layers"]) for g in parser.parse_log(text)["graphs"]] == [58, 57, 57]
    # a log cut after graph[1] has two graphs; one whose graph numbers skip is refused
    cut = text[: text.index("build graph[1] done!") + len("build graph[1] done!")]
    assert len(parser.parse_log(cut)["graphs"]) == 2
    with pytest.raises(parser.LogParseError, match="graph\\[2\\] done where graph\\[1\\]"):
        parser.parse_log(text.replace("build graph[1] done!", "build graph[2] done!", 1))


@pytest.mark.parametrize("side", sorted(STATIC_OF_SIDE))
def test_each_shape_is_planned_like_its_static_variant(side: int):
    """The compiler builds one graph per shape: the same layers and memory plan as the
    static model of that size; one quantization (calibrated at 320) for all shapes."""
    report = models.load_report(DYNAMIC)
    one = report.for_shape([[1, 3, side, side]])
    static = models.load_report(STATIC_OF_SIDE[side])
    assert one.layers == static.layers
    assert one.data["feature_tensors"] == static.data["feature_tensors"]
    assert one.total_internal_size == static.total_internal_size
    assert one.total_weight_size == static.total_weight_size
    for kind in ("inputs", "outputs"):
        for which in ("plain", "native", "native_nhwc"):
            for mine, theirs in zip(one.attrs(kind, which), static.attrs(kind, which)):
                differ = {k for k in mine if mine[k] != theirs[k]}
                # the quantization parameters are the dynamic model's own (one set for all shapes)
                assert differ <= {"zp", "scale"}, (kind, which, differ)
    assert one.attrs("outputs") == report.attrs("outputs")   # 1x1000 at every shape
    assert [(a["zp"], a["scale"]) for a in one.attrs("inputs")] == [(a["zp"], a["scale"]) for a in report.attrs("inputs")]


def test_dynamic_shapes_schema_rejects_broken_entries():
    report = _dynamic_report()
    models.validate_report(report)
    nulls = json.loads(json.dumps(report))
    nulls["dynamic_shapes"][0].update(layers=None, feature_tensors=None)
    models.validate_report(nulls)   # "the compiler printed nothing for this shape" is allowed
    with pytest.raises(models.ReportError, match="printed no layers"):
        models.CompilerReport(nulls, ROOT / DYNAMIC).for_shape([[1, 3, 160, 160]])
    for breaks in ({"memory": {}},                              # no total_internal_size
                   {"memory": {"total_internal_size": "800KB"}},
                   {"layers": []},                              # an empty table is not "nothing printed"
                   {"input_dims": [1, 3, 160, 160]},            # one shape per input, not a bare shape
                   {"native_plan": 1}):                         # unknown key
        broken = json.loads(json.dumps(report))
        broken["dynamic_shapes"][0].update(breaks)
        with pytest.raises(models.ReportError, match="dynamic_shapes"):
            models.validate_report(broken)
    broken = json.loads(json.dumps(report))
    broken["dynamic_shapes"] = []
    with pytest.raises(models.ReportError, match="dynamic_shapes"):
        models.validate_report(broken)


def _twin_session():
    import onnxruntime as ort
    path = models.load_report(DYNAMIC).values_twin_path
    assert path == (ROOT / "mobilenet_v2" / "model.onnx").resolve()
    info = models.model_info(DYNAMIC)["values_twin"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == info["sha256"]
    return ort.InferenceSession(models.onnx_free_hw(path.read_bytes()), providers=["CPUExecutionProvider"])


def _normalised(image: np.ndarray) -> np.ndarray:
    """uint8 NHWC -> the twin's input: float NCHW with the mean/std the model compiles in."""
    report = models.load_report(DYNAMIC)
    mean = np.array(report.data["build"]["mean_values"], np.float32).reshape(1, 3, 1, 1)
    std = np.array(report.data["build"]["std_values"], np.float32).reshape(1, 3, 1, 1)
    return (image.transpose(0, 3, 1, 2).astype(np.float32) - mean) / std


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel(), b.ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_mobilenet_v2_twin_gives_the_dynamic_models_values_at_each_shape():
    """The values route the simulator uses: mobilenet_v2's twin with H and W freed agrees
    with what the toolkit's own simulator computes on the compiled dynamic .rknn."""
    session = _twin_session()
    recorded = np.load(ROOT / DYNAMIC / "toolkit_simulator.npz", allow_pickle=False)
    sides = sorted(STATIC_OF_SIDE)
    twin = {side: session.run(None, {"input": _normalised(recorded[f"input_{side}"])})[0] for side in sides}
    for side in sides:
        npu = recorded[f"output_{side}"]
        assert twin[side].shape == npu.shape == (1, 1000)
        assert _cosine(twin[side], npu) > 0.95, side
        # it is this shape's output, not another's
        for other in sides:
            if other != side:
                assert _cosine(twin[side], npu) > _cosine(twin[other], npu), (side, other)


def test_onnx_free_hw_changes_only_the_input_size():
    import onnxruntime as ort
    data = (ROOT / "mobilenet_v2" / "model.onnx").read_bytes()
    fixed = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    free = ort.InferenceSession(models.onnx_free_hw(data), providers=["CPUExecutionProvider"])
    assert fixed.get_inputs()[0].shape == [1, 3, 224, 224]
    assert free.get_inputs()[0].shape == [1, 3, "height", "width"]
    x = np.random.default_rng(0).normal(size=(1, 3, 224, 224)).astype(np.float32)
    assert np.array_equal(fixed.run(None, {"input": x})[0], free.run(None, {"input": x})[0])
    small = np.zeros((1, 3, 160, 160), np.float32)
    with pytest.raises(Exception, match="dimensions"):
        fixed.run(None, {"input": small})   # why the twin needs freeing at all
    assert free.run(None, {"input": small})[0].shape == (1, 1000)
    with pytest.raises(models.ReportError, match="not an ONNX model"):
        models.onnx_free_hw(b"\x0f" + data[:100])


# -- ppocr_det: the pretrained text detector, its frames and the toolkit's int8 evidence ------

PPOCR = "ppocr_det"
PPOCR_SOCS = ["rk3588", "rk3576", "rk3568", "rk3562"]
FRAMES = ROOT.parent / "frames"


def _ppocr_evidence():
    return np.load(ROOT / PPOCR / "toolkit_int8.npz", allow_pickle=False)


def _ppocr_session():
    import onnxruntime as ort
    return ort.InferenceSession(str(ROOT / PPOCR / "model.onnx"), providers=["CPUExecutionProvider"])


def _ppocr_fp32(session, images: np.ndarray) -> np.ndarray:
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    x = ((images.astype(np.float32) - mean) / std).transpose(0, 3, 1, 2).astype(np.float32)
    return session.run(None, {"x": x})[0][:, 0]


def _mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_ppocr_det_records_where_its_weights_come_from():
    info = models.model_info(PPOCR)
    assert info["weights"] == "pretrained"
    assert info["licence"].startswith("Apache-2.0")
    assert "Apache License" in (ROOT / PPOCR / "LICENSE-Apache-2.0.txt").read_text()
    assert "PaddleOCR" in info["authors"] and "RapidOCR" in info["authors"]
    source = info["source"]
    assert source["package"] == "rapidocr-onnxruntime==1.4.4"
    assert source["path_in_wheel"] == "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
    twin = (ROOT / PPOCR / "model.onnx").read_bytes()
    # the original file, unmodified, is the twin
    assert len(twin) == source["bytes"] == 4_745_517
    assert hashlib.sha256(twin).hexdigest() == source["sha256"]
    assert info["calibration"]["n"] == len(info["calibration"]["views"]) >= 8
    assert set(info["socs"]) == set(PPOCR_SOCS)


@pytest.mark.parametrize("soc", PPOCR_SOCS)
def test_ppocr_det_reports_follow_the_model_zoo_config(soc: str):
    path = ROOT / PPOCR / f"{soc}.report.json"
    data = json.loads(path.read_text())
    models.validate_report(data)
    assert data["weights"] == "pretrained"
    assert data["build"]["mean_values"] == [123.675, 116.28, 103.53]
    assert data["build"]["std_values"] == [58.395, 57.12, 57.375]
    assert data["onnx_file"]["sha256"] == models.model_info(PPOCR)["source"]["sha256"]
    report = models.load_report(PPOCR, soc)
    assert report.attrs("inputs")[0]["dims"] == [1, 480, 480, 3]
    assert report.attrs("outputs")[0]["dims"] == [1, 1, 480, 480]
    # the opposite balance of mobilenet_v2: the plan is several times the weights
    assert report.total_internal_size > 4 * report.total_weight_size
    assert models.load_report("mobilenet_v2", soc).total_internal_size < \
        models.load_report("mobilenet_v2", soc).total_weight_size


def test_ppocr_det_ships_a_model_for_every_soc():
    """A board of any of the four SoCs runs chapter 6, and lab 1's checks open every course
    model compiled for the SoC they run on: every report has its .rknn."""
    assert sorted(p.name for p in (ROOT / PPOCR).glob("*.rknn")) == sorted(f"{s}.rknn" for s in PPOCR_SOCS)
    assert sorted(p.name.split(".")[0] for p in (ROOT / PPOCR).glob("*.report.json")) == sorted(PPOCR_SOCS)


def test_ppocr_det_scratch_buffers_live_at_their_user_only():
    """rk3568's OutputOperator converts the output's layout in a buffer the compiler adds
    ('sigmoid_0.tmp_0_exSecondary'); it shares bytes with the Sigmoid's input, which is dead
    by then.  Read as written by the layer before, it would clash with that input."""
    report = models.load_report(PPOCR, "rk3568")
    spans = {t.tensor: t for t in report.lifetimes()}
    scratch, sigmoid_in = spans["sigmoid_0.tmp_0_exSecondary"], spans["p2o.Add.281"]
    assert scratch.first_layer == scratch.last_layer == 169
    assert scratch.overlaps(sigmoid_in) and not scratch.alive_with(sigmoid_in)
    row = next(r for r in report.data["feature_tensors"] if r["tensor"] == scratch.tensor)
    as_if_written_before = models.Lifetime(scratch.tensor, row["producer_layer_id"], 169, row["start"], row["end"])
    assert as_if_written_before.alive_with(sigmoid_in)


def test_ppocr_det_toolkit_evidence_loads_without_pickle_and_is_small():
    path = ROOT / PPOCR / "toolkit_int8.npz"
    assert path.stat().st_size < 1_500_000
    data = _ppocr_evidence()
    k = len(data["names"])
    assert k == 8
    assert data["inputs"].shape == (k, 480, 480, 3) and data["inputs"].dtype == np.uint8
    assert data["int8"].shape == (k, 480, 480) and data["int8"].dtype == np.int8
    assert data["fp32_x255"].shape == (k, 480, 480) and data["fp32_x255"].dtype == np.uint8
    out = models.load_report(PPOCR, "rk3588").attrs("outputs")[0]
    assert (int(data["zp"]), float(data["scale"])) == (out["zp"], pytest.approx(out["scale"]))


def test_ppocr_det_int8_still_finds_the_text():
    """The toolkit's own int8 simulation against the fp32 twin, on the held-out views:
    text pixels (p > 0.3) in the same places on the page, nothing on the rocket."""
    data = _ppocr_evidence()
    names = [str(n) for n in data["names"]]
    int8 = (data["int8"].astype(np.float32) - data["zp"]) * data["scale"]
    fp32 = _ppocr_fp32(_ppocr_session(), data["inputs"])
    assert np.abs(np.round(fp32 * 255) - data["fp32_x255"]).max() <= 1   # the file's fp32 maps are the twin's
    pages = [i for i, n in enumerate(names) if n.startswith("page")]
    assert len(pages) >= 2
    for i in pages:
        assert (fp32[i] > 0.3).mean() > 0.03, names[i]
        assert _mask_iou(int8[i] > 0.3, fp32[i] > 0.3) > 0.6, names[i]
    rocket = names.index("rocket")
    assert not (int8[rocket] > 0.3).any() and not (fp32[rocket] > 0.3).any()
    # the int8 map of one view is not another view's
    assert _mask_iou(int8[pages[0]] > 0.3, fp32[pages[1]] > 0.3) < 0.3


def test_ppocr_det_runs_on_the_simulator():
    """rknn_init of the shipped rk3588.rknn; the simulator's map (from the fp32 twin, fed the
    dequantised int8 input) marks the page's text and nothing on a blank frame."""
    from rknnlab import open_runtime
    from rknnlab.rknn import abi, buffers
    data = _ppocr_evidence()
    page = data["inputs"][[str(n) for n in data["names"]].index("page")]
    rt = open_runtime("sim", soc="rk3588")
    ctx = rt.init(str(models.model_path(PPOCR)))
    maps = []
    try:
        for image in (page, np.full_like(page, 128)):
            rt.inputs_set(ctx, [buffers.input_from_array(0, image[None], abi.RKNN_TENSOR_NHWC)])
            rt.run(ctx)
            outputs = [abi.rknn_output(index=0, want_float=1)]
            rt.outputs_get(ctx, outputs)
            try:
                maps.append(buffers.output_view(outputs[0], np.float32).reshape(480, 480).copy())
            finally:
                rt.outputs_release(ctx, outputs)
    finally:
        rt.destroy(ctx)
    on_page, blank = maps
    toolkit = (data["int8"][0].astype(np.float32) - data["zp"]) * data["scale"]
    assert (on_page > 0.3).mean() > 0.03
    assert _mask_iou(on_page > 0.3, toolkit > 0.3) > 0.6
    assert not (blank > 0.3).any()


def test_frames_readme_lists_every_frame():
    readme = (FRAMES / "README.md").read_text()
    pngs = sorted(p.name for p in FRAMES.glob("*.png"))
    assert pngs == ["coffee.png", "page.png", "rocket.png", "text.png"]
    info = models.model_info(PPOCR)["frames"]
    for name in pngs:
        assert f"| `{name}` |" in readme, name
        path = FRAMES / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == info[name[:-4]]["sha256"]
    assert sorted(p.name for p in FRAMES.iterdir()) == ["LICENSE-scikit-image.txt", "README.md"] + pngs
    assert "License: BSD-3-Clause" in (FRAMES / "LICENSE-scikit-image.txt").read_text()
