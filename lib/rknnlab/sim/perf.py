"""The runtime's per-layer profile text (RKNN_QUERY_PERF_DETAIL), from a compiler report.

On a board, a context made with RKNN_FLAG_COLLECT_PERF_MASK answers
RKNN_QUERY_PERF_DETAIL after a run with a text in two tables (librknnrt
1.6-2.x, as public RK3588 printouts show it; User Guide V2.3.0 section 3.2.3
defines the columns):

- "Network Layer Information Table": one row per layer, numbered from 1 (the
  compiler's id + 1), with ID, OpType, DataType, Target, InputShape,
  OutputShape, Cycles(DDR/NPU/Total), Time(us), MacUsage(%), WorkLoad(0/1/2),
  RW(KB), FullName; then the per-frame totals of Time(us) and RW(KB);
- "Operator Time Consuming Ranking Table": one row per op type, sorted by
  total time, longest first.

Here: shapes, cycles, RW(KB) and names come from the report's layer table;
Time(us) is the layer's modeled time in the last run (rknnlab.sim.npu);
MacUsage = MACs / (time x MACs per cycle x clock) per core, for layers with
MACs (a Conv's weights [Cout, Cin/groups, kh, kw]: MACs = output elements x
Cin/groups x kh x kw), "\\" otherwise; WorkLoad = each core's share of the
layer.  Columns are fixed-width and separated by at least one space; no field
contains a space, so ``line.split(None, 11)`` gives the 12 fields of a row.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

from .npu import LayerTime, soc_npu

#: (header, width) of the layer table; the WorkLoad header names the SoC's cores
_LAYER_COLUMNS = (("ID", 5), ("OpType", 17), ("DataType", 9), ("Target", 7), ("InputShape", 41),
                  ("OutputShape", 23), ("Cycles(DDR/NPU/Total)", 25), ("Time(us)", 13),
                  ("MacUsage(%)", 21), (None, 21), ("RW(KB)", 13), ("FullName", 0))
_RANKING_COLUMNS = (("OpType", 19), ("CallNumber", 13), ("CPUTime(us)", 13), ("GPUTime(us)", 13),
                    ("NPUTime(us)", 13), ("TotalTime(us)", 15), ("TimeRatio(%)", 0))
_LAYER_TITLE = "Network Layer Information Table"
_RANKING_TITLE = "Operator Time Consuming Ranking Table"
#: a shape list longer than this is cut and ends with ",..."
_SHAPES_SHOWN = 3


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    """Cells left-aligned in their widths, always at least one space apart."""
    parts = [cell if width == 0 else cell.ljust(width - 1) + " " for cell, width in zip(cells, widths)]
    return "".join(parts).rstrip()


def _shapes(shapes: Sequence[Sequence[int]], cut: bool = False) -> str:
    if not shapes:
        return "\\"
    text = ",".join("(" + ",".join(str(d) for d in shape) + ")" for shape in shapes[:_SHAPES_SHOWN])
    return text + (",..." if cut or len(shapes) > _SHAPES_SHOWN else "")


def inputs_cut(layer: Mapping[str, Any]) -> bool:
    """Whether the compiler cut this layer's input shape list.  The reports keep
    the shapes its log printed but not the ",..." that ends a cut list; the
    list was cut where the shapes cannot account for the layer: a Conv fused
    with an Add (input, weights, bias, addend) showing fewer than four, a
    Concat whose inputs' channels fall short of its output's, an Add showing
    one.  This matches the shipped logs on every row but the rk3562 OutputOperators
    of yolov5s and ppocr_det, whose hidden tensors nothing in the report reveals."""
    shapes, op = layer["input_shapes"], layer["op"]
    if op.startswith("Conv") and "Add" in op[4:]:
        return len(shapes) < 4
    if op == "Concat" and shapes and layer["output_shapes"]:
        return sum(shape[1] for shape in shapes) < layer["output_shapes"][0][1]
    if op == "Add":
        return len(shapes) < 2
    return False


def layer_macs(layer: Mapping[str, Any]) -> int:
    """Multiply-accumulates of one layer of a report: a Conv-type layer's output
    elements x Cin/groups x kh x kw, its weights being input_shapes[1], shaped
    [Cout, Cin/groups, kh, kw]; the compiler prints a depthwise Conv's weights
    as [1, C, kh, kw] (C = its output channels), one input channel per output.
    0 for layers without weights."""
    shapes, outputs = layer["input_shapes"], layer["output_shapes"]
    if not layer["op"].startswith("Conv") or len(shapes) < 2 or len(shapes[1]) != 4 or not outputs:
        return 0
    cout, per_group, kh, kw = shapes[1]
    out_channels = outputs[0][1] if len(outputs[0]) > 1 else 0
    if cout == 1 and per_group == out_channels > 1:  # depthwise
        per_group = 1
    return math.prod(outputs[0]) * per_group * kh * kw


def _per_core(values: Dict[int, float], n_cores: int, fmt: str) -> str:
    return "/".join(fmt.format(values.get(core, 0.0)) for core in range(n_cores))


def mac_usage(macs: int, timing: LayerTime, soc: str) -> Dict[int, float]:
    """MacUsage (%) of each core a layer ran on: its share of the MACs over what
    the core could do in the layer's time."""
    npu = soc_npu(soc)
    if not macs or not timing.cores or timing.seconds <= 0:
        return {}
    share = macs / len(timing.cores)
    usage = 100.0 * share / (timing.seconds * npu.macs_per_cycle * npu.clock_hz)
    return {core: usage for core in timing.cores}


def workload(timing: LayerTime) -> Dict[int, float]:
    """Each core's share (%) of a layer: 100 on its one core, 100/n over n split cores."""
    return {core: 100.0 / len(timing.cores) for core in timing.cores}


def workload_header(soc: str) -> str:
    """WorkLoad(0/1/2) on rk3588, WorkLoad(0/1) on rk3576, WorkLoad(0) on one-core SoCs."""
    return "WorkLoad(" + "/".join(str(core) for core in range(soc_npu(soc).cores)) + ")"


def perf_detail_text(layers: Sequence[Mapping[str, Any]], times: Sequence[LayerTime], soc: str) -> str:
    """The PERF_DETAIL text of one run: ``layers`` from the report, ``times``
    the modeled time of each (same order)."""
    n_cores = soc_npu(soc).cores
    widths = [width for _, width in _LAYER_COLUMNS]
    header = [name if name is not None else workload_header(soc) for name, _ in _LAYER_COLUMNS]
    rows: List[str] = []
    total_us = total_kb = 0
    by_op: Dict[str, List[int]] = {}   # op -> [calls, cpu us, npu us]
    for layer, timing in zip(layers, times):
        if timing.id != layer["id"]:
            raise ValueError(f"layer {layer['id']} paired with the time of layer {timing.id}")
        us = round(timing.seconds * 1e6)
        kb = round(layer["rw_kb"])
        usage = mac_usage(layer_macs(layer), timing, soc)
        cells = [str(layer["id"] + 1), layer["op"], layer["dtype"], layer["target"],
                 _shapes(layer["input_shapes"], inputs_cut(layer)), _shapes(layer["output_shapes"]),
                 f"{layer['cycles_ddr']}/{layer['cycles_npu']}/{layer['cycles_total']}", str(us),
                 _per_core(usage, n_cores, "{:.2f}") if usage else "\\",
                 _per_core(workload(timing), n_cores, "{:.1f}%"), str(kb), layer["name"]]
        rows.append(_line(cells, widths))
        total_us += us
        total_kb += kb
        entry = by_op.setdefault(layer["op"], [0, 0, 0])
        entry[0] += 1
        entry[1 if layer["target"] == "CPU" else 2] += us
    dashes = "-" * (sum(widths) + len("FullName"))
    lines = [dashes, _LAYER_TITLE.center(len(dashes)).rstrip(), dashes,
             _line(header, widths), dashes, *rows, dashes,
             f"Total Operator Elapsed Per Frame Time(us): {total_us}",
             f"Total Memory Read/Write Per Frame Size(KB): {total_kb}", dashes]
    lines += _ranking(by_op, total_us)
    return "\n".join(lines) + "\n"


def _ranking(by_op: Dict[str, List[int]], total_us: int) -> List[str]:
    widths = [width for _, width in _RANKING_COLUMNS]
    dashes = "-" * (sum(widths) + len("TimeRatio(%)"))
    # longest first; ties keep the order in which the op types first appear
    ranked = sorted(by_op.items(), key=lambda item: -(item[1][1] + item[1][2]))
    rows = []
    for op, (calls, cpu_us, npu_us) in ranked:
        op_total = cpu_us + npu_us
        ratio = 100.0 * op_total / total_us if total_us else 0.0
        rows.append(_line([op, str(calls), str(cpu_us), "0", str(npu_us), str(op_total), f"{ratio:.2f}%"],
                          widths))
    return [_RANKING_TITLE.center(len(dashes)).rstrip(), dashes,
            _line([name for name, _ in _RANKING_COLUMNS], widths), dashes, *rows, dashes]


__all__ = ["perf_detail_text", "inputs_cut", "layer_macs", "mac_usage", "workload", "workload_header"]
