"""Read what the runtime will report about a model's inputs and outputs, and
which toolkit wrote it, from a .rknn file (rknn-toolkit2 2.3.2 and 2.5.0).

The file names its maker in one string, e.g.
"2.3.2(compiler version: 2.3.2 (<commit>@<date>))": the toolkit's version,
then the compiler's (librknnc) version line.

The build log lacks the io tensors' quantization parameters and io layouts.
The .rknn file carries both, in two places we can read without Rockchip code:

* a JSON object per direction, {"<name>": {"dtype": "int8", "layout": "NHWC"}},
  giving the io type and layout the runtime reports (INPUT_ATTR/OUTPUT_ATTR);
* a Python-literal dict with a 'quant_tab' entry: the calibrated min/max of
  each io tensor.  For asymmetric int8 the toolkit derives
  scale = (max - min) / 255 and zp = round(-min / scale) - 128.

We then find that exact (zp int32, scale float32) pair in the model's
flatbuffer, where each appears as a one-element vector (a uint32 length 1
followed by the value).  A tensor whose pair is not found fails the build:
the formula is checked against the compiled model, never trusted blindly.
"""
from __future__ import annotations

import ast
import json
import re
import struct
from typing import Any

IO_JSON = re.compile(rb'\{"[^"{}]+": \{"dtype": "[a-z0-9]+", "layout": "[A-Za-z0-9]+"\}(?:, "[^"{}]+": \{"dtype": "[a-z0-9]+", "layout": "[A-Za-z0-9]+"\})*\}')


VERSIONS = re.compile(rb"(\d+(?:\.\d+)+)\(compiler version: (\d+(?:\.\d+)+(?: \([^()\x00]*\))?)\)")


class RknnFileError(ValueError):
    pass


def read_versions(path: str) -> dict[str, str]:
    """{"toolkit": "2.3.2", "compiler": "2.3.2 (<commit>@<date>)"} as the .rknn file names them."""
    with open(path, "rb") as f:
        blob = f.read()
    found = {m.groups() for m in VERSIONS.finditer(blob)}
    if len(found) != 1:
        raise RknnFileError(f"{path}: expected one '<version>(compiler version: ...)' string, found {len(found)}")
    toolkit, compiler = found.pop()
    return {"toolkit": toolkit.decode(), "compiler": compiler.decode()}


def _io_layouts(blob: bytes) -> dict[str, dict[str, str]]:
    layouts: dict[str, dict[str, str]] = {}
    for match in IO_JSON.finditer(blob):
        layouts.update(json.loads(match.group(0)))
    if not layouts:
        raise RknnFileError("no io dtype/layout JSON found in the .rknn file")
    return layouts


def _quant_tab(blob: bytes) -> dict[str, Any]:
    start = blob.find(b"{'attrs':")
    if start < 0:
        raise RknnFileError("no 'attrs'/'quant_tab' dict found in the .rknn file")
    depth = 0
    for end in range(start, len(blob)):
        ch = blob[end:end + 1]
        if ch == b"{":
            depth += 1
        elif ch == b"}":
            depth -= 1
            if depth == 0:
                break
    # a plain literal (dicts, lists, str, float, bool): literal_eval runs no code
    info = ast.literal_eval(blob[start:end + 1].decode("utf-8"))
    if "quant_tab" not in info:
        raise RknnFileError("the .rknn attrs dict has no quant_tab")
    return info


def affine_params(min_value: float, max_value: float) -> tuple[int, float]:
    """zp and scale of asymmetric int8 quantization of [min, max] (float32 scale); the range
    is widened to hold 0, as the toolkit does (a sigmoid output calibrated on [0.017, 0.98]
    is stored with zp -128, scale 0.98 / 255)."""
    min_value, max_value = min(min_value, 0.0), max(max_value, 0.0)
    scale = (max_value - min_value) / 255.0
    scale32 = struct.unpack("<f", struct.pack("<f", scale))[0]
    zp = int(round(-min_value / scale)) - 128
    return zp, scale32


def _stored_pair_found(blob: bytes, zp: int, scale: float) -> bool:
    one = struct.pack("<I", 1)
    return one + struct.pack("<i", zp) + one + struct.pack("<f", scale) in blob


def read_io_info(path: str) -> dict[str, dict[str, Any]]:
    """{tensor name: {dtype, layout, zp, scale, qnt_source, calib_min, calib_max}}."""
    with open(path, "rb") as f:
        blob = f.read()
    if not blob.startswith(b"RKNN"):
        raise RknnFileError(f"{path} does not start with the RKNN magic")
    layouts = _io_layouts(blob)
    tab = _quant_tab(blob)["quant_tab"]
    info: dict[str, dict[str, Any]] = {}
    for name, entry in layouts.items():
        item: dict[str, Any] = {"dtype": entry["dtype"], "layout": entry["layout"]}
        if entry["dtype"] == "int8":
            q = tab.get(name)
            if q is None or q.get("qtype") != "asym" or len(q["min"]) != 1:
                raise RknnFileError(f"tensor {name!r}: no per-tensor asymmetric quant entry")
            ranges = [(q["min"][0], q["max"][0], "quant_tab min/max in the .rknn")]
            if 0.0 <= q["min"][0] and q["max"][0] <= 1.0:
                # a sigmoid's output: the toolkit may quantize its whole range [0, 1] instead
                ranges.append((0.0, 1.0, "the range [0, 1] (a sigmoid's output; quant_tab min/max inside it)"))
            found = None
            for low, high, source in ranges:
                zp, scale = affine_params(low, high)
                # the quantizer may nudge zp by one where -min/scale sits on .5
                found = next(((c, scale, source) for c in (zp, zp - 1, zp + 1)
                              if _stored_pair_found(blob, c, scale)), None)
                if found:
                    break
            if found is None:
                zp, scale = affine_params(q["min"][0], q["max"][0])
                raise RknnFileError(
                    f"tensor {name!r}: zp={zp} scale={scale!r} derived from quant_tab "
                    "not found in the model's flatbuffer")
            zp, scale, source = found
            item.update(zp=zp, scale=scale, calib_min=q["min"][0], calib_max=q["max"][0],
                        qnt_source=f"{source}, verified against the flatbuffer's stored (zp, scale) pair")
        else:   # a float tensor (e.g. a float16 softmax output): no quantization parameters
            item.update(zp=0, scale=1.0, calib_min=None, calib_max=None, qnt_type="RKNN_TENSOR_QNT_NONE",
                        qnt_source=f"{entry['dtype']} tensor in the .rknn's io JSON: not quantized "
                                   "(zp 0, scale 1, as rknn_tensor_attr reports a float tensor)")
        info[name] = item
    return info


def read_dynamic_shapes(path: str) -> dict[str, list[list[int]]]:
    """A dynamic-shape model's shapes as the toolkit's attrs dict in the .rknn lists them,
    one per compiled graph, largest first: {"input": [[1, 3, 320, 320], ...], "output":
    [[1, 1000], ...]} (one input and one output here; the dict gives one list per tensor name).
    Empty lists for a static model."""
    with open(path, "rb") as f:
        blob = f.read()
    info = _quant_tab(blob)
    shapes = info.get("dynamic_shapes")
    if shapes is None:
        return {"input": [], "output": []}
    inputs = [name for name, attr in info["attrs"].items() if not attr.get("is_output")]
    outputs = [name for name, attr in info["attrs"].items() if attr.get("is_output")]
    if len(inputs) != 1 or len(outputs) != 1:
        raise RknnFileError(f"{path}: dynamic shapes of {len(inputs)} inputs / {len(outputs)} outputs: "
                            "only one of each is supported here")
    return {"input": shapes[inputs[0]], "output": shapes[outputs[0]]}


def stored_shape_order(path: str, shapes: list[list[int]]) -> list[list[int]]:
    """``shapes`` in the order the .rknn's 'dynamic_shape' table stores them: each shape is a
    flatbuffer int32 vector (a uint32 length, then the dims), found at its first occurrence.
    Found smallest first for two configured orders ([160, 224, 320] and [224, 320, 160])."""
    with open(path, "rb") as f:
        blob = f.read()
    table = blob.find(b"dynamic_shape\x00")
    if table < 0:
        raise RknnFileError(f"{path}: no 'dynamic_shape' table")
    offsets = []
    for dims in shapes:
        at = blob.find(struct.pack(f"<{len(dims) + 1}I", len(dims), *dims))
        if at < 0 or at > table:
            raise RknnFileError(f"{path}: shape {dims} is not stored before the 'dynamic_shape' table")
        offsets.append((at, dims))
    return [dims for _, dims in sorted(offsets)]
