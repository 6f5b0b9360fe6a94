"""The simulator's per-layer timing, multi-core op rule and RKNN_QUERY_PERF_DETAIL text."""
from __future__ import annotations

import ctypes
import gzip
import math
import re
import time
from typing import Dict, List

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.rknn.native import NativeRuntime
from rknnlab.sim import ASSUMPTIONS, SimRuntime, context as sim_context, modeled_run_ms, npu, perf, timing_law

ALL_REPORTS = [(name, soc) for name in models.list_models() for soc in models.model_socs(name)]
#: with the reports of SoCs no .rknn ships for and of the timing law's calibration models
EVERY_REPORT = models.list_reports()
LAYER_HEADER = ["ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
                "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)", None, "RW(KB)", "FullName"]
RANKING_HEADER = ["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)", "TotalTime(us)",
                  "TimeRatio(%)"]


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _run(rt: SimRuntime, name: str, core_mask: int = abi.RKNN_NPU_CORE_0,
         flag: int = abi.RKNN_FLAG_COLLECT_PERF_MASK) -> int:
    ctx = rt.init(str(models.model_path(name, rt.soc)), flag)
    rt.set_core_mask(ctx, core_mask)
    rt.run(ctx)
    return ctx


def _text(rt: SimRuntime, ctx: int) -> str:
    detail = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    assert isinstance(detail, abi.rknn_perf_detail)
    return detail.text()


def _report_text(name: str, soc: str, core_mask: int) -> str:
    report = models.load_report(name, soc)
    return perf.perf_detail_text(report.layers, npu.layer_times(report, soc, core_mask), soc)


# ------------------------------------------------------------------ a parser of our own
def _is_dashes(line: str) -> bool:
    return bool(line) and set(line) == {"-"}


def _parse(text: str) -> Dict[str, object]:
    """Split a profile text into its parts, failing on anything out of place."""
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert _is_dashes(lines[0]) and lines[1].strip() == "Network Layer Information Table"
    assert _is_dashes(lines[2]) and _is_dashes(lines[4])
    header = lines[3].split()
    end = next(i for i in range(5, len(lines)) if _is_dashes(lines[i]))
    rows = [line.split(None, 11) for line in lines[5:end]]
    assert all(len(row) == 12 for row in rows), [row for row in rows if len(row) != 12][:1]
    time_label, total_us = lines[end + 1].split(": ")
    rw_label, total_kb = lines[end + 2].split(": ")
    assert time_label == "Total Operator Elapsed Per Frame Time(us)"
    assert rw_label == "Total Memory Read/Write Per Frame Size(KB)"
    assert _is_dashes(lines[end + 3])
    assert lines[end + 4].strip() == "Operator Time Consuming Ranking Table"
    assert _is_dashes(lines[end + 5]) and _is_dashes(lines[end + 7]) and _is_dashes(lines[-1])
    ranking = [line.split() for line in lines[end + 8:-1]]
    return {"header": header, "rows": rows, "total_us": int(total_us), "total_kb": int(total_kb),
            "ranking_header": lines[end + 6].split(), "ranking": ranking}


def _shapes_text(shapes: List[List[int]], cut: bool = False) -> str:
    if not shapes:
        return "\\"
    text = ",".join("(" + ",".join(map(str, s)) + ")" for s in shapes[:3])
    return text + (",..." if cut or len(shapes) > 3 else "")


def _log_cuts(name: str, soc: str, graph: int = -1) -> Dict[int, bool]:
    """Layer id -> whether the compiler's own log ends its InputShape with ",...".  A
    dynamic-shape build prints one table per shape (graph[0], graph[1], ...) in order;
    ``graph`` picks one (the last table by default)."""
    lines = gzip.decompress(models.load_report(name, soc).log_path.read_bytes()).decode().splitlines()
    start = [i for i, line in enumerate(lines) if "Network Layer Information Table" in line][graph]
    cuts = {}
    for line in lines[start + 3:]:
        fields = line.split("] ", 1)[-1].split()
        if fields and fields[0].isdigit():
            cuts[int(fields[0])] = fields[4].endswith(",...")
        elif cuts:
            break
    return cuts


# ------------------------------------------------------------------ the op rule
def _fused_with(op: str) -> str:
    """What a Conv op type is fused with, once the ReLU family (Relu, LeakyRelu, Clip = ReLU6)
    and Add are taken out: "" for a Conv the API reference's list (p.21) splits."""
    rest = op[len("Conv"):]
    for part in ("LeakyRelu", "Relu", "Clip", "Add"):
        rest = rest.replace(part, "")
    return rest


def test_every_op_of_every_report_is_classified():
    ops = {layer["op"] for name, soc in EVERY_REPORT for layer in models.load_report(name, soc).layers}
    assert {name for name, _ in EVERY_REPORT} >= {"yolov6n", "yolov8n", "yolox_s", "retinaface_mobile320",
                                                  "deeplabv3plus_mobilenet_v2"}
    assert not npu.SPLIT_OPS & npu.UNSPLIT_OPS
    assert ops <= npu.SPLIT_OPS | npu.UNSPLIT_OPS, ops - (npu.SPLIT_OPS | npu.UNSPLIT_OPS)
    # the documented families (API p.21) only: Conv, Add, Concat, ReLU family, fused ReLU/Clip/Add
    for op in npu.SPLIT_OPS:
        assert op in ("Add", "Concat", "Relu") or (op.startswith("Conv") and _fused_with(op) == ""), op
    for op in npu.UNSPLIT_OPS:
        assert not op.startswith("Conv") or _fused_with(op) != "", op  # a listed family left out
    assert not npu.is_split("ConvExSwish")  # the board trace: the fused Conv+SiLU stays on core 0
    assert npu.is_split("ConvClip") and npu.is_split("Concat")


def test_split_speedup_and_switch_cost_per_layer():
    assert [npu.split_speedup(n) for n in (1, 2, 3)] == pytest.approx([1.0, 1.3, 1.6])
    report = models.load_report("yolov5s", "rk3588")
    one = npu.layer_times(report, "rk3588", abi.RKNN_NPU_CORE_0)
    three = npu.layer_times(report, "rk3588", abi.RKNN_NPU_CORE_0_1_2)
    two = npu.layer_times(report, "rk3588", abi.RKNN_NPU_CORE_0_1)
    kinds = set()
    for layer, a, b, c in zip(report.layers, one, two, three):
        assert a.id == b.id == c.id == layer["id"]
        if layer["target"] == "CPU":
            assert a.cores == c.cores == () and a.seconds == c.seconds == npu.CPU_LAYER_S
        elif npu.is_split(layer["op"]):
            kinds.add("split")
            assert (c.cores, c.split, b.cores) == ((0, 1, 2), True, (0, 1))
            assert c.seconds == pytest.approx(a.seconds / 1.6 + npu.CORE_SWITCH_S, rel=1e-12)
            assert b.seconds == pytest.approx(a.seconds / 1.3 + npu.CORE_SWITCH_S, rel=1e-12)
        else:
            kinds.add("core 0")
            assert (c.cores, c.split, c.seconds) == ((0,), False, a.seconds)
        assert not a.split and a.cores in ((0,), ())
    assert kinds == {"split", "core 0"}


@pytest.mark.parametrize("name,soc", EVERY_REPORT)
def test_single_core_layers_add_up_to_the_timing_law(name, soc):
    report = models.load_report(name, soc)
    law = timing_law.law_for(soc)
    times = npu.layer_times(report, soc, abi.RKNN_NPU_CORE_0)
    modeled = timing_law.run_seconds(report.layers, soc)
    assert npu.run_seconds_of(times, soc) == pytest.approx(modeled, rel=1e-12)
    assert modeled_run_ms(name, soc) == pytest.approx(modeled * 1e3, rel=1e-12)  # report-only models too
    for layer, timing in zip(report.layers, times):
        io = layer["op"] in ("InputOperator", "OutputOperator")
        if io and layer["target"] == "CPU":  # shown in the profile, inside the run's fixed cost (A46)
            assert (timing.seconds, timing.counted) == (npu.CPU_LAYER_S, False)
        elif io:  # an Input/OutputOperator the compiler puts on the NPU: inside the fixed cost too
            assert (timing.cores, timing.seconds) == ((0,), 0.0)
        elif layer["target"] != "NPU":  # a CPU hand-over in the middle of the graph
            assert (timing.cores, timing.seconds) == ((), law.cpu_layer_s)
        else:
            assert (timing.cores, timing.split) == ((0,), False)
            assert timing.seconds == timing_law.layer_seconds(layer, law)
    assert report.layers[0]["op"] == "InputOperator" and report.layers[-1]["op"] == "OutputOperator"


@pytest.mark.parametrize("soc", ["rk3588", "rk3576", "rk3568", "rk3562"])
def test_the_profile_rows_fit_inside_the_run(soc):
    """A46: the Input/OutputOperator rows lie inside the run's fixed cost, so the sum of a
    profile's rows never exceeds the run it describes."""
    for name in ("digits_cnn", "mobilenet_v2"):
        times = npu.layer_times(models.load_report(name, soc), soc, abi.RKNN_NPU_CORE_0)
        assert math.fsum(t.seconds for t in times) <= npu.run_seconds_of(times, soc), name


def test_more_cores_slow_a_small_network_and_speed_up_relu_networks():
    def speedup(name: str, mask: int) -> float:
        return modeled_run_ms(name, "rk3588") / modeled_run_ms(name, "rk3588", mask)

    three, two = abi.RKNN_NPU_CORE_0_1_2, abi.RKNN_NPU_CORE_0_1
    assert speedup("digits_cnn", three) < 1 and speedup("digits_cnn", two) < 1
    for name in ("mobilenet_v2", "yolov5s_relu", "resnet50"):
        assert 1.05 < speedup(name, two) < speedup(name, three) < 1.6, name
    assert speedup("yolov5s_relu", three) > 1.4
    assert 1.0 <= speedup("yolov5s", three) < 1.05  # SiLU convs stay on core 0; its Add/Concat split
    assert speedup("yolov5s_relu", three) > speedup("yolov5s", three) + 0.4
    # rk3576 has two cores: the same rule, 1.3x per split layer
    rk3576 = [modeled_run_ms("mobilenet_v2", "rk3576", mask) for mask in (abi.RKNN_NPU_CORE_0, two)]
    assert rk3576[0] / rk3576[1] > 1.05


def test_masks_a_soc_lacks_are_refused_by_the_model():
    with pytest.raises(ValueError, match="1 NPU core"):
        modeled_run_ms("mobilenet_v2", "rk3568", abi.RKNN_NPU_CORE_0_1)
    assert modeled_run_ms("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_ALL) == \
        modeled_run_ms("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_0_1_2)
    assert modeled_run_ms("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_AUTO) == \
        modeled_run_ms("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_2)


# ------------------------------------------------------------------ modeled_run_ms vs rknn_run
@pytest.mark.parametrize("name,mask", [("mobilenet_v2", abi.RKNN_NPU_CORE_0),
                                       ("mobilenet_v2", abi.RKNN_NPU_CORE_0_1_2),
                                       ("digits_cnn", abi.RKNN_NPU_CORE_0_1_2)])
def test_perf_run_is_modeled_run_ms(rt, name, mask):
    ctx = _run(rt, name, mask)
    assert rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration == round(modeled_run_ms(name, "rk3588", mask) * 1e3)
    plain = _run(rt, name, mask, flag=0)  # collecting the profile does not change the run (A48)
    assert rt.query(plain, abi.RKNN_QUERY_PERF_RUN).run_duration == \
        rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration


def test_a_timed_run_lasts_modeled_run_ms(rt):
    ctx = _run(rt, "mobilenet_v2", abi.RKNN_NPU_CORE_0_1_2)
    shape = models.load_report("mobilenet_v2").data["inputs"][0]["plain"]["dims"]
    rt.inputs_set(ctx, [buffers.input_from_array(0, np.full(shape, 7, np.uint8), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)  # the values of this input are now cached: the run waits for the model only
    expected = modeled_run_ms("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_0_1_2) / 1e3
    single = modeled_run_ms("mobilenet_v2", "rk3588") / 1e3
    median = math.inf
    for _ in range(5):  # a loaded 2-core machine may need another try
        walls = []
        for _ in range(15):
            start = time.perf_counter()
            rt.run(ctx)
            walls.append(time.perf_counter() - start)
        median = float(np.median(walls))
        if expected * 0.97 < median < expected * 1.15:
            break
    assert expected * 0.97 < median < expected * 1.15, (median, expected)
    assert median < single  # told apart from a single-core run (25 % longer)


# ------------------------------------------------------------------ the text
@pytest.mark.parametrize("name,soc", ALL_REPORTS)
def test_text_parses_and_adds_up(name, soc):
    report = models.load_report(name, soc)
    mask = abi.RKNN_NPU_CORE_0_1_2 if soc == "rk3588" else abi.RKNN_NPU_CORE_0
    times = npu.layer_times(report, soc, mask)
    parsed = _parse(perf.perf_detail_text(report.layers, times, soc))
    n_cores = npu.SOCS[soc].cores
    workload = "WorkLoad(" + "/".join(str(i) for i in range(n_cores)) + ")"
    assert parsed["header"] == [h if h is not None else workload for h in LAYER_HEADER]
    rows = parsed["rows"]
    assert [int(row[0]) for row in rows] == [layer["id"] + 1 for layer in report.layers]
    assert [int(row[0]) for row in rows] == list(range(1, len(rows) + 1))
    for row, layer, timing in zip(rows, report.layers, times):
        assert row[1:4] == [layer["op"], layer["dtype"], layer["target"]]
        assert row[4] == _shapes_text(layer["input_shapes"], perf.inputs_cut(layer))
        assert row[5] == _shapes_text(layer["output_shapes"])
        assert row[6] == f"{layer['cycles_ddr']}/{layer['cycles_npu']}/{layer['cycles_total']}"
        assert int(row[7]) == round(timing.seconds * 1e6)
        assert len(row[9].split("/")) == n_cores and row[9].endswith("%")
        assert row[8] == "\\" or len(row[8].split("/")) == n_cores
        assert int(row[10]) == round(layer["rw_kb"]) and row[11] == layer["name"]
    assert parsed["total_us"] == sum(int(row[7]) for row in rows)
    assert parsed["total_kb"] == sum(int(row[10]) for row in rows)
    # the ranking: one row per op type, longest first, adding up to the same total
    assert parsed["ranking_header"] == RANKING_HEADER
    ranking = parsed["ranking"]
    assert sorted(r[0] for r in ranking) == sorted({layer["op"] for layer in report.layers})
    totals = [int(r[5]) for r in ranking]
    assert totals == sorted(totals, reverse=True)
    for op, calls, cpu_us, gpu_us, npu_us, total, ratio in ranking:
        mine = [row for row in rows if row[1] == op]
        assert int(calls) == len(mine) and gpu_us == "0"
        assert int(cpu_us) == sum(int(r[7]) for r in mine if r[3] == "CPU")
        assert int(npu_us) == sum(int(r[7]) for r in mine if r[3] == "NPU")
        assert int(total) == int(cpu_us) + int(npu_us)
        assert ratio == f"{100 * int(total) / parsed['total_us']:.2f}%"
    assert sum(int(r[1]) for r in ranking) == len(rows)


def test_cut_shape_lists_end_as_in_the_compilers_log():
    rows = _parse(_report_text("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_0))["rows"]
    conv_add = next(row for row in rows if row[1] == "ConvAdd")
    assert conv_add[4].endswith(",...") and conv_add[4].count("(") == 3
    assert _shapes_text([[1]] * 5) == "(1),(1),(1),..."
    wrong = []
    for name, soc in ALL_REPORTS:
        report = models.load_report(name, soc)
        # a dynamic-shape report: its top level is graph[0], each shape names its graph
        tables = [(report.layers, 0 if report.data.get("dynamic_shapes") else -1)]
        tables += [(shape["layers"], shape["sources"]["log_graph"])
                   for shape in report.data.get("dynamic_shapes") or [] if shape["layers"]]
        for layers, graph in tables:
            cuts = _log_cuts(name, soc, graph)
            assert len(cuts) == len(layers)
            wrong += [(name, soc, layer["op"]) for layer in layers
                      if perf.inputs_cut(layer) != cuts[layer["id"]]]
    assert set(wrong) <= {("yolov5s", "rk3562", "OutputOperator"), ("ppocr_det", "rk3562", "OutputOperator")}, wrong
    assert rows[0][1] == "InputOperator" and rows[0][4] == "\\"
    assert rows[-1][1] == "OutputOperator" and rows[-1][5] == "\\"


def _macs_by_hand(layer: dict) -> int:
    """MACs from the shapes: output elements x Cin/groups x kh x kw; a depthwise
    Conv's weights print as [1, C, kh, kw]."""
    weights = layer["input_shapes"][1]
    out = layer["output_shapes"][0]
    cin = layer["input_shapes"][0][1]
    per_group = 1 if (weights[0] == 1 and weights[1] == out[1] == cin and cin > 1) else weights[1]
    return int(np.prod(out)) * per_group * weights[2] * weights[3]


def test_mac_usage_formula():
    # the board printout this formula was checked on (chapter 3 F2): 64.32 %
    board = npu.LayerTime(0, "Conv", "NPU", (0,), False, 1612e-6)
    assert f"{perf.mac_usage(1_061_683_200, board, 'rk3588')[0]:.2f}" == "64.32"
    for soc, mask, n in (("rk3588", abi.RKNN_NPU_CORE_0, 1), ("rk3588", abi.RKNN_NPU_CORE_0_1_2, 3),
                         ("rk3568", abi.RKNN_NPU_CORE_0, 1)):
        report = models.load_report("mobilenet_v2", soc)
        times = npu.layer_times(report, soc, mask)
        rows = _parse(perf.perf_detail_text(report.layers, times, soc))["rows"]
        peak = npu.SOCS[soc].macs_per_cycle * npu.SOCS[soc].clock_hz
        checked = 0
        for row, layer, timing in zip(rows, report.layers, times):
            if not layer["op"].startswith("Conv"):
                assert row[8] == "\\"
                continue
            usage = 100 * _macs_by_hand(layer) / n / (timing.seconds * peak)
            values = row[8].split("/")
            assert values[:n] == [f"{usage:.2f}"] * n and set(values[n:]) <= {"0.00"}
            assert 0 < usage <= 100
            checked += 1
        assert checked > 40


@pytest.mark.parametrize("name,soc", ALL_REPORTS)
def test_macs_per_cycle_is_the_compilers_peak(name, soc):
    report = models.load_report(name, soc)
    rates = [perf.layer_macs(layer) / layer["cycles_npu"] for layer in report.layers if layer["cycles_npu"]]
    peak = npu.SOCS[soc].macs_per_cycle
    if name == "ppocr_det":  # A47: no layer exactly at the peak; the densest at 75/76 of it
        assert max(rates) == pytest.approx(peak * 75 / 76)
    else:
        assert max(rates) == peak  # A47: the densest layers hit it exactly


@pytest.mark.parametrize("mask,split_cell,single_cell", [
    (abi.RKNN_NPU_CORE_0, "100.0%/0.0%/0.0%", "100.0%/0.0%/0.0%"),
    (abi.RKNN_NPU_CORE_1, "0.0%/100.0%/0.0%", "0.0%/100.0%/0.0%"),
    (abi.RKNN_NPU_CORE_0_1, "50.0%/50.0%/0.0%", "100.0%/0.0%/0.0%"),
    (abi.RKNN_NPU_CORE_0_1_2, "33.3%/33.3%/33.3%", "100.0%/0.0%/0.0%"),
])
def test_workload_per_mask(rt, mask, split_cell, single_cell):
    ctx = _run(rt, "yolov5s", mask)
    rows = _parse(_text(rt, ctx))["rows"]
    seen = set()
    for row in rows:
        if row[3] == "CPU":
            assert row[9] == "0.0%/0.0%/0.0%"
        elif row[1] in npu.SPLIT_OPS:
            assert row[9] == split_cell, row
            seen.add("split")
        else:
            assert row[9] == single_cell, row  # ConvExSwish, MaxPool, Resize
            seen.add("single")
    assert seen == {"split", "single"}


def test_workload_header_follows_the_soc():
    for soc, header, cell in (("rk3576", "WorkLoad(0/1)", "50.0%/50.0%"), ("rk3568", "WorkLoad(0)", "100.0%")):
        mask = abi.RKNN_NPU_CORE_0_1 if soc == "rk3576" else abi.RKNN_NPU_CORE_0
        parsed = _parse(_report_text("mobilenet_v2", soc, mask))
        assert parsed["header"][9] == header
        assert {row[9] for row in parsed["rows"] if row[1] in npu.SPLIT_OPS} == {cell}


# ------------------------------------------------------------------ the query
def test_the_query_answers_only_a_context_made_with_the_flag(rt):
    plain = _run(rt, "digits_cnn", flag=0)
    with pytest.raises(errors.RknnParamInvalidError, match="RKNN_FLAG_COLLECT_PERF_MASK"):
        rt.query(plain, abi.RKNN_QUERY_PERF_DETAIL)
    info_only = rt.init(str(models.model_path("digits_cnn")),
                        abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | abi.RKNN_FLAG_COLLECT_PERF_MASK)
    with pytest.raises(errors.RknnParamInvalidError, match="COLLECT_MODEL_INFO_ONLY"):
        rt.query(info_only, abi.RKNN_QUERY_PERF_DETAIL)


def test_the_query_needs_a_run_first_and_dup_keeps_the_flag(rt):
    ctx = rt.init(str(models.model_path("digits_cnn")), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    with pytest.raises(errors.RknnParamInvalidError, match="no rknn_run yet"):
        rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    rt.run(ctx)
    assert _parse(_text(rt, ctx))["rows"]
    twin = rt.dup_context(ctx)
    with pytest.raises(errors.RknnParamInvalidError, match="no rknn_run yet"):
        rt.query(twin, abi.RKNN_QUERY_PERF_DETAIL)
    rt.run(twin)
    assert _text(rt, twin) == _text(rt, ctx)
    plain_twin = rt.dup_context(_run(rt, "digits_cnn", flag=0))
    rt.run(plain_twin)
    with pytest.raises(errors.RknnParamInvalidError, match="RKNN_FLAG_COLLECT_PERF_MASK"):
        rt.query(plain_twin, abi.RKNN_QUERY_PERF_DETAIL)


def test_the_text_describes_the_last_run(rt):
    ctx = _run(rt, "mobilenet_v2", abi.RKNN_NPU_CORE_0)
    one = _parse(_text(rt, ctx))
    rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0_1_2)
    rt.run(ctx)
    three = _parse(_text(rt, ctx))
    assert three["total_us"] < one["total_us"]
    assert one["total_kb"] == three["total_kb"]
    assert _text(rt, ctx) == _report_text("mobilenet_v2", "rk3588", abi.RKNN_NPU_CORE_0_1_2)


def test_the_text_is_owned_by_the_context_until_the_next_query_or_destroy(rt, monkeypatch):
    freed: List[int] = []
    real_free = sim_context.heap_free

    def recording_free(address: int) -> None:
        freed.append(address)
        real_free(address)

    monkeypatch.setattr(sim_context, "heap_free", recording_free)
    ctx = _run(rt, "mobilenet_v2")
    first = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    first_text, first_address = first.data(), first.address()
    assert first.data_len == len(first_text) == len(first.perf_data)  # data_len: no NUL counted (A48)
    assert not first_text.endswith(b"\0") and b"\0" not in first_text
    assert ctypes.string_at(first_address, first.data_len + 1)[-1:] == b"\0"
    rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0_1_2)
    rt.run(ctx)  # a run does not touch the text already handed out
    assert first.data() == first_text and first_address not in freed
    second = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    assert second.data() != first_text
    assert freed == [first_address]  # the next query on the context frees the previous text
    rt.destroy(ctx)
    assert freed[0] == first_address and second.address() in freed[1:]  # rknn_destroy frees the last one


def test_the_native_binding_reads_a_runtime_text(rknn_double_path):
    """NativeRuntime.query hands the struct the C runtime filled: the same
    helpers read its text (the C double answers a fixed text, data_len without NUL)."""
    native = NativeRuntime(rknn_double_path)
    ctx = native.init(b"RKNN" + b"fake model for tests", abi.RKNN_FLAG_COLLECT_PERF_MASK)
    detail = native.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    assert isinstance(detail, abi.rknn_perf_detail)
    assert detail.data() == detail.perf_data and len(detail.data()) == detail.data_len > 0
    assert detail.text() == detail.perf_data.decode()
    assert "bytes at 0x" in repr(detail)
    native.destroy(ctx)


def test_the_assumptions_of_this_behaviour_are_listed():
    keys = {key for key, _, _ in ASSUMPTIONS}
    assert {"A17", "A44", "A45", "A46", "A47", "A48", "A49"} <= keys
    text = dict((key, assumption) for key, assumption, _ in ASSUMPTIONS)
    assert "ConvExSwish" in text["A17"] and "1 + 0.3" in text["A44"] and "3 us" in text["A45"]
    assert "10 us" in text["A46"] and "1024" in text["A47"] and "NUL" in text["A48"]

    assert npu.CORE_SWITCH_S == 3e-6 and npu.CPU_LAYER_S == 10e-6 and npu.SPLIT_GAIN_PER_EXTRA_CORE == 0.3


def test_a17_names_every_op_type_the_simulator_splits():
    """A reader of A17 learns the whole rule: every op type of SPLIT_OPS under the compiler's
    name (ConvLeakyRelu is RetinaFace's, a standalone Relu its SSH blocks')."""
    text = dict((key, assumption) for key, assumption, _ in ASSUMPTIONS)["A17"]
    unnamed = [op for op in sorted(npu.SPLIT_OPS) if not re.search(rf"\b{op}\b", text)]
    assert not unnamed, unnamed
