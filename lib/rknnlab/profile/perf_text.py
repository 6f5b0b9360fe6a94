"""The runtime's per-layer profile: the text RKNN_QUERY_PERF_DETAIL returns, as a table.

On a board, a context created with RKNN_FLAG_COLLECT_PERF_MASK answers
RKNN_QUERY_PERF_DETAIL after a run with a text (``perf_data``, ``data_len``
bytes) that librknnrt 1.6-2.x lays out as two tables:

- "Network Layer Information Table": one row per layer, numbered from 1
  (the compiler's log numbers the same layers from 0: runtime ID = compiler
  id + 1), with the columns ID, OpType, DataType, Target, InputShape,
  OutputShape, Cycles(DDR/NPU/Total), Time(us), MacUsage(%),
  WorkLoad(0/1/2) (per core; WorkLoad(0/1) on RK3576), RW(KB), FullName;
  then the totals "Total Operator Elapsed Per Frame Time(us)" and
  "Total Memory Read/Write Per Frame Size(KB)";
- "Operator Time Consuming Ranking Table": per op type, CallNumber,
  CPUTime/GPUTime/NPUTime/TotalTime (us) and TimeRatio(%).

What the columns mean (Rockchip's user guide, section "model performance
evaluation"): DDR cycles = DDR read/write clock cycles, NPU cycles =
compute cycles, Total = the larger of the two, MacUsage = MAC utilisation,
WorkLoad = each core's share of the layer, RW(KB) = data read/written.  The
guide says "read/written"; in every shipped compiler report the numbers
are the bytes the layer reads: padded activation inputs + weights + about
8 B per output channel of a Conv; writes are not in it (see
rknnlab.profile.report).

Rockchip's eval_perf warns that these debug numbers may be worse than real
performance: collecting them serialises the layers.  The simulator writes
the same text from the compiler report and its timing model; the text does
not say it is simulated, so :func:`perf_table` labels the table with where
it came from.
"""
from __future__ import annotations

import math
import re
from typing import Any, List, Optional, Tuple

from ..rknn import abi
from ._common import run_source

#: the first header cell of each table
_LAYER_HEADER = "ID"
_RANKING_HEADER = "OpType"
_TOTAL_TIME = re.compile(r"Total Operator Elapsed Per Frame Time\(us\):\s*([0-9.]+)")
_TOTAL_RW = re.compile(r"Total Memory Read/Write Per Frame Size\(KB\):\s*([0-9.]+)")
#: columns of the layer table: (header cell, or its prefix for the per-core ones)
_LAYER_COLUMNS = ("ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
                  "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)", "WorkLoad(", "RW(KB)",
                  "FullName")
_RANKING_COLUMNS = ("OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)",
                    "TotalTime(us)", "TimeRatio(%)")


def _is_rule(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= 10 and set(stripped) <= {"-", "="}


def _check_header(cells: List[str], expected: Tuple[str, ...], number: int, line: str) -> None:
    if len(cells) != len(expected) or not all(c.startswith(e) for c, e in zip(cells, expected)):
        raise ValueError(f"line {number}: a table header with the columns {' '.join(expected)}, "
                         f"expected, got: {line.strip()!r}")


def _shapes(cell: str) -> Tuple[Tuple[int, ...], ...]:
    """"(1,32,112,112),(1,32,3,3),(32)" -> ((1, 32, 112, 112), (1, 32, 3, 3), (32,));
    "\\" (none) -> (); a list the runtime cut after three tensors ends with ",...": the
    shapes it printed are kept (the cut is in ``input_shapes_cut``)."""
    if cell == "\\":
        return ()
    body = cell[:-4] if cell.endswith(",...") else cell
    found = re.findall(r"\(([^()]*)\)", body)
    if not found or re.sub(r"\([^()]*\)|,", "", body):
        raise ValueError(f"not a list of shapes: {cell!r}")
    return tuple(tuple(int(v) for v in s.split(",") if v.strip()) for s in found)


def _per_core(cell: str, percent: bool) -> List[float]:
    """"35.51/0.00/0.00" -> [35.51, 0.0, 0.0]; "33.3%/33.3%/33.3%" (percent) likewise."""
    parts = cell.split("/")
    return [float(p[:-1] if percent and p.endswith("%") else p) for p in parts]


def _layer_row(cells: List[str], number: int, line: str) -> dict:
    try:
        cycles = [int(c) for c in cells[6].split("/")]
        if len(cycles) != 3:
            raise ValueError("Cycles(DDR/NPU/Total) needs three numbers")
        mac = [] if cells[8] == "\\" else _per_core(cells[8], percent=False)
        load = _per_core(cells[9], percent=True)
        return {
            "id": int(cells[0]), "op": cells[1], "dtype": cells[2], "target": cells[3],
            "input_shapes": _shapes(cells[4]), "input_shapes_cut": cells[4].endswith(",..."),
            "output_shape": _shapes(cells[5])[0] if cells[5] != "\\" else (),
            "cycles_ddr": cycles[0], "cycles_npu": cycles[1], "cycles_total": cycles[2],
            "time_us": float(cells[7]),
            "mac_usage": max(mac) if mac else math.nan,
            "workload": cells[9], "cores": sum(1 for v in load if v > 0),
            "rw_kb": float(cells[10]), "name": cells[11],
        }
    except (ValueError, IndexError) as exc:
        raise ValueError(f"line {number}: cannot read this layer row ({exc}): {line.strip()!r}") from None


def _tables(text: str) -> Tuple[List[dict], List[dict], Optional[float], Optional[float]]:
    """The layer rows, the ranking rows and the two totals of a perf-detail text."""
    layers: List[dict] = []
    ranking: List[dict] = []
    total_time = total_rw = None
    table = None  # "layers", "ranking" or None (between tables)
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or _is_rule(line) or stripped.endswith("Information Table") \
                or stripped.endswith("Ranking Table"):
            continue
        m = _TOTAL_TIME.search(line)
        if m:
            total_time, table = float(m.group(1)), None
            continue
        m = _TOTAL_RW.search(line)
        if m:
            total_rw, table = float(m.group(1)), None
            continue
        cells = stripped.split()
        if cells[0] == _LAYER_HEADER and len(cells) > 1 and cells[1] == "OpType":
            _check_header(cells, _LAYER_COLUMNS, number, line)
            table = "layers"
            continue
        if cells[0] == _RANKING_HEADER and len(cells) > 1 and cells[1] == "CallNumber":
            _check_header(cells, _RANKING_COLUMNS, number, line)
            table = "ranking"
            continue
        if table == "layers":
            # FullName is last and may hold spaces: split off the 11 cells before it
            head = stripped.split(None, len(_LAYER_COLUMNS) - 1)
            if len(head) != len(_LAYER_COLUMNS):
                raise ValueError(f"line {number}: a layer row needs {len(_LAYER_COLUMNS)} columns, "
                                 f"this one has {len(head)}: {stripped!r}")
            layers.append(_layer_row(head, number, line))
        elif table == "ranking":
            if len(cells) != len(_RANKING_COLUMNS):
                raise ValueError(f"line {number}: a ranking row needs {len(_RANKING_COLUMNS)} "
                                 f"columns, this one has {len(cells)}: {stripped!r}")
            try:
                ranking.append({"op": cells[0], "calls": int(cells[1]), "cpu_us": float(cells[2]),
                                "gpu_us": float(cells[3]), "npu_us": float(cells[4]),
                                "total_us": float(cells[5]),
                                "time_ratio": float(cells[6].rstrip("%")) / 100})
            except ValueError as exc:
                raise ValueError(f"line {number}: cannot read this ranking row ({exc}): "
                                 f"{stripped!r}") from None
        else:
            raise ValueError(f"line {number}: not part of a perf-detail text (no table header "
                             f"before it): {stripped[:120]!r}")
    return layers, ranking, total_time, total_rw


def parse_perf_detail(text: str, source: Optional[str] = None) -> Any:
    """The per-layer table of a RKNN_QUERY_PERF_DETAIL text, one row per layer.

    Columns: id (the runtime's, from 1), op, dtype, target, input_shapes (a
    tuple of shapes), input_shapes_cut (the runtime printed only the first
    three), output_shape, cycles_ddr, cycles_npu, cycles_total, time_us,
    mac_usage (percent, the largest over the cores; NaN for ops without
    MACs, printed "\\"), workload (the text, e.g. "33.3%/33.3%/33.3%"),
    cores (how many cores had a share), rw_kb, name.
    ``attrs``: total_time_us, total_rw_kb (the text's own totals), source.

    Reads a board's text and the simulator's alike.  Text that is empty or
    not of this layout raises ValueError naming the line, so that a
    truncated copy never passes for a short network."""
    import pandas as pd
    if not isinstance(text, str):
        raise TypeError(f"expected the perf-detail text (str), got {type(text).__name__}; "
                        "for bytes use .decode()")
    if not text.strip():
        raise ValueError("line 1: the perf-detail text is empty (was the context created with "
                         "RKNN_FLAG_COLLECT_PERF_MASK, and did a run come before the query?)")
    layers, _, total_time, total_rw = _tables(text)
    if not layers:
        raise ValueError("line 1: no 'Network Layer Information Table' rows found in the text")
    if total_time is None:
        raise ValueError(f"line {len(text.splitlines())}: the text ends without 'Total Operator "
                         "Elapsed Per Frame Time(us)' (cut short?)")
    table = pd.DataFrame(layers)
    table.attrs.update(total_time_us=total_time, total_rw_kb=total_rw,
                       source=source or "a perf-detail text (source not given)")
    return table


def op_ranking(text: str, source: Optional[str] = None) -> Any:
    """The "Operator Time Consuming Ranking Table" of a perf-detail text: per op type,
    calls, cpu_us, gpu_us, npu_us, total_us, time_ratio (0..1), as printed."""
    import pandas as pd
    _, ranking, _, _ = _tables(text)
    if not ranking:
        raise ValueError("line 1: no 'Operator Time Consuming Ranking Table' rows found in the text")
    table = pd.DataFrame(ranking)
    table.attrs["source"] = source or "a perf-detail text (source not given)"
    return table


def perf_detail(rt: Any, ctx: int) -> str:
    """rknn_query(ctx, RKNN_QUERY_PERF_DETAIL): the runtime's per-layer text.

    The context must have been created with RKNN_FLAG_COLLECT_PERF_MASK and
    have run at least once.  The text is the runtime's (valid until the next
    query or rknn_destroy), so it is copied into a Python str here; its
    length comes from ``data_len`` (abi.rknn_perf_detail.text), not from a
    terminating NUL."""
    detail = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    if not detail.address():
        raise ValueError("RKNN_QUERY_PERF_DETAIL returned no text (perf_data is NULL)")
    return detail.text()


def perf_table(rt: Any, ctx: int) -> Any:
    """:func:`parse_perf_detail` of :func:`perf_detail`, labelled with where it came
    from (the simulator: per-layer times modeled from the compiler report; a board:
    its name)."""
    source = run_source(rt, "per-layer times modeled from the compiler report")
    return parse_perf_detail(perf_detail(rt, ctx), source=source)
