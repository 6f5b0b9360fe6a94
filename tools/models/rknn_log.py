"""Parse the verbose log of rknn-toolkit2's build() into plain data (written
against 2.5.0 and 2.3.2, whose tables have the same columns).

Three tables and two totals are read (see rknn-facts.md section 4): the Network
Layer Information Table, the Feature Tensor Information Table (the compiler's
memory plan), the Const Tensor Information Table, and the Total Internal /
Weight Memory Size lines.  Anything that does not parse raises LogParseError
naming the line: a report is never written from a half-understood log.
"""
from __future__ import annotations

import re
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RKNN_PREFIX = re.compile(r"^D RKNN: \[[0-9:.]+\] ?")
SHAPE = re.compile(r"\(([0-9,]*)\)")
HEX = r"0x[0-9a-fA-F]+"
SIZE_LINE = re.compile(r"Total (Internal|Weight) Memory Size: ([0-9.]+)(KB|MB|B)")
UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024}


class LogParseError(ValueError):
    pass


def clean_lines(text: str) -> list[str]:
    """The log's lines without colour codes and the 'D RKNN: [time]' prefix."""
    return [RKNN_PREFIX.sub("", ANSI.sub("", line)).rstrip() for line in text.splitlines()]


def _shapes(field: str) -> list[list[int]]:
    if field == "\\":
        return []
    found = SHAPE.findall(field)
    if not found:
        raise LogParseError(f"not a shape list: {field!r}")
    return [[int(d) for d in group.split(",") if d] for group in found]


def _table(lines: list[str], title: str) -> list[str]:
    """The data rows of the table whose title line contains ``title``."""
    try:
        start = next(i for i, line in enumerate(lines) if title in line)
    except StopIteration:
        raise LogParseError(f"the log has no {title!r}") from None
    rows: list[str] = []
    dashes_seen = 0
    for line in lines[start + 1:]:
        if line.startswith("---"):
            dashes_seen += 1
            if dashes_seen == 3:  # top rule, rule under the header, closing rule
                return rows
            continue
        if dashes_seen == 2 and line.strip():
            rows.append(line)
    raise LogParseError(f"the {title!r} never ends")


def parse_layers(lines: list[str]) -> list[dict[str, Any]]:
    layers = []
    for row in _table(lines, "Network Layer Information Table"):
        parts = row.split()
        if len(parts) < 9 or not parts[0].isdigit():
            raise LogParseError(f"layer row: {row!r}")
        cycles = parts[6].split("/")
        if len(cycles) != 3:
            raise LogParseError(f"cycles field in layer row: {row!r}")
        rest = parts[7:]
        sparse = rest.pop(0) if rest[0].endswith("%") else None  # rk3576 logs add SparseRatio
        if len(rest) < 2:
            raise LogParseError(f"layer row: {row!r}")
        layers.append({
            "id": int(parts[0]),
            "op": parts[1],
            "dtype": parts[2],
            "target": parts[3],
            "input_shapes": _shapes(parts[4]),
            "output_shapes": _shapes(parts[5]),
            "cycles_ddr": int(cycles[0]),
            "cycles_npu": int(cycles[1]),
            "cycles_total": int(cycles[2]),
            "sparse_ratio": sparse,
            "rw_kb": float(rest[0]),
            "name": " ".join(rest[1:]),
        })
    return layers


_FEATURE = re.compile(
    rf"^(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\([0-9,]*\))\s+(\([0-9,]*\))\s*\|\s*({HEX})(\*?)\s*({HEX})\s+({HEX})$")
_CONST = re.compile(
    rf"^(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\([0-9,]*\))\s*\|\s*({HEX})(\*?)\s*({HEX})\s+({HEX})$")


def parse_feature_tensors(lines: list[str]) -> list[dict[str, Any]]:
    tensors = []
    for row in _table(lines, "Feature Tensor Information Table"):
        m = _FEATURE.match(row.strip())
        if not m:
            raise LogParseError(f"feature tensor row: {row!r}")
        start, end, size = (int(m.group(i), 16) for i in (8, 10, 11))
        if end - start != size:
            raise LogParseError(f"feature tensor row with end - start != size: {row!r}")
        tensors.append({
            "layer_id": int(m.group(1)),
            "user": m.group(2),
            "tensor": m.group(3),
            "dtype": m.group(4),
            "fmt": m.group(5),
            "orig_shape": _shapes(m.group(6))[0],
            "native_shape": _shapes(m.group(7))[0],
            "start": start,
            "end": end,
            "size": size,
            "starred": m.group(9) == "*",
        })
    return tensors


def parse_const_tensors(lines: list[str]) -> list[dict[str, Any]]:
    tensors = []
    for row in _table(lines, "Const Tensor Information Table"):
        m = _CONST.match(row.strip())
        if not m:
            raise LogParseError(f"const tensor row: {row!r}")
        start, end, size = (int(m.group(i), 16) for i in (6, 8, 9))
        tensors.append({
            "layer_id": int(m.group(1)),
            "user": m.group(2),
            "tensor": m.group(3),
            "dtype": m.group(4),
            "orig_shape": _shapes(m.group(5))[0],
            "start": start,
            "end": end,
            "size": size,
        })
    return tensors


def parse_totals(lines: list[str]) -> dict[str, dict[str, Any]]:
    totals = {}
    for line in lines:
        m = SIZE_LINE.search(line)
        if m:
            kind = m.group(1).lower()
            totals[kind] = {"printed": m.group(2) + m.group(3),
                            "bytes": float(m.group(2)) * UNITS[m.group(3)]}
    if set(totals) != {"internal", "weight"}:
        raise LogParseError("the log lacks a Total Internal/Weight Memory Size line")
    return totals


OPTION = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*([^,\s]+)")
ANY_RKNN_PREFIX = re.compile(r"^[A-Z] RKNN: \[[0-9:.]+\] ?")


def parse_options(lines: list[str]) -> dict[str, str]:
    """The compiler's option line: 'compress=0, global_fuse=1, ..., memory_plan_strategy=BestFit'
    in 2.5.0, 'compress = 0, conv_eltwise_activation_fuse = 1, global_fuse = 1, ...' in 2.3.2
    (which prints no memory_plan_strategy)."""
    for line in lines:
        body = ANY_RKNN_PREFIX.sub("", line)
        if "global_fuse" in body and body.lstrip().startswith("compress"):
            return dict(OPTION.findall(body))
    raise LogParseError("the log has no compiler option line (compress=..., global_fuse=...)")


def parse_compiler_version(lines: list[str]) -> str:
    for line in lines:
        if "librknnc version:" in line:
            return line.split("librknnc version:", 1)[1].strip()
    raise LogParseError("the log has no 'librknnc version:' line")


def parse_toolkit_version(lines: list[str]) -> str:
    """The 'rknn-toolkit2 version: X.Y.Z' line the toolkit prints when it starts."""
    for line in lines:
        m = re.search(r"rknn-toolkit2 version: (\d+(?:\.\d+)+)", line)
        if m:
            return m.group(1)
    raise LogParseError("the log has no 'rknn-toolkit2 version:' line")


GRAPH_DONE = re.compile(r"Dynamic Shape: build graph\[(\d+)\] done!")


def _graph(lines: list[str]) -> dict[str, Any]:
    return {
        "layers": parse_layers(lines),
        "feature_tensors": parse_feature_tensors(lines),
        "const_tensors": parse_const_tensors(lines),
        "totals": parse_totals(lines),
    }


def split_graphs(lines: list[str]) -> list[list[str]]:
    """A dynamic-shape build's log, cut into one piece per compiled graph.

    With config(dynamic_input=...) the compiler builds one graph per input shape and
    prints, for each, its three tables and two totals, then 'Dynamic Shape: build
    graph[i] done!'.  Piece i ends at that line."""
    pieces: list[list[str]] = []
    start = 0
    for i, line in enumerate(lines):
        m = GRAPH_DONE.search(line)
        if m:
            if int(m.group(1)) != len(pieces):
                raise LogParseError(f"graph[{m.group(1)}] done where graph[{len(pieces)}] was expected: {line!r}")
            pieces.append(lines[start:i])
            start = i + 1
    return pieces


def parse_log(text: str) -> dict[str, Any]:
    """The whole log: versions and options, plus the tables of its one graph, or with
    'graphs' holding one entry per graph of a dynamic-shape build (the top-level
    tables are then graph[0]'s)."""
    lines = clean_lines(text)
    pieces = split_graphs(lines)
    graphs = [_graph(piece) for piece in pieces]
    return {
        "toolkit_version": parse_toolkit_version(lines),
        "compiler_version": parse_compiler_version(lines),
        "options": parse_options(lines),
        **(graphs[0] if graphs else _graph(lines)),
        "graphs": graphs,
    }
