"""Time and bytes per layer and per frame, from the compiler report alone (no run).

The compiler's "Network Layer Information Table" gives each layer DDR cycles
(moving its data), NPU cycles (computing) and their maximum, and RW(KB).
Two readings follow from the numbers, not from a run:

- **Bound.**  A layer whose DDR cycles exceed its NPU cycles waits for
  memory ("DDR"), the reverse for the MACs ("compute"); Rockchip's guide
  reads the table the same way (DDR much larger than NPU: bandwidth-bound).
  Add, Concat, MaxPool, Resize, Split, Reshape get 0 cycles of both from
  the compiler ("no cycles") although they read megabytes and take real
  time on a board.
- **Bytes.**  The course counts RW(KB) as the bytes a layer READS: each
  activation input at 1 byte per int8 element, its channels padded up to a
  multiple of C2 (16 on RK3588), plus the weights at 1 B each; a Conv
  fused with an Add (ConvAdd, ConvAddRelu, ConvReluAdd) also reads the
  tensor it adds.  The output is not in it.  A Conv's column also holds
  about 8 bytes per output channel (its bias, and one more value per
  channel, we infer: the median over the shipped reports' Conv layers).
  The 3-channel input layer reads far less than its padded size.
  Rockchip's documents say "read/written"; the numbers say reads: the
  User Guide (V2.3.0, section 4.1.3.2) prints a total of 10,563 KB for its
  MobileNetV2, which is the sum of RW (reads) of the course's mobilenet_v2
  (10,534 KB), not reads plus writes (about 18,250 KB).  The bytes written
  are estimated here as each activation tensor's size in the compiler's
  memory plan (every tensor is written once, by its producer).

DDR bandwidth (the constants below):

- ``DDR_BUS_BYTES`` = 8: RK3588's external memory interface is
  "LPDDR4/LPDDR4X/LPDDR5, quad-channel x16bit" (Rockchip, RK3588 Brief
  Datasheet, 2022), i.e. 64 bits.
- ``DDR_CLOCK_HZ`` = 2112 MHz: the LPDDR4X clock a public RK3588 boot log
  reports at DDR init ("LPDDR4X, 2112MHz", four channels of BW=16;
  pastebin.com/Pj2i4sZC).  The same figure is said to appear as the DDR
  frequency in eval_perf's printout in Rockchip's user guide; that was not
  rechecked against the guide for this module (UNCONFIRMED).  Boards differ:
  read your board's boot log.
- ``DDR_PEAK_BYTES_PER_S`` = 2 transfers per clock x 2112 MHz x 8 B =
  33.8 GB/s (LPDDR4X-4224).  DERIVED from the two figures above, not
  printed by Rockchip: a theoretical peak that no real traffic reaches; an
  LPDDR5 board at a higher data rate has more.  The only FLOOR here: no
  frame reads its bytes faster than this.
- ``TRACE_BYTES_PER_DDR_CYCLE`` = 11.8: about 11.8 bytes per DDR cycle in a
  board trace (a user's RK3588 yolov8n at 1920x1920 on one core:
  channyhuang.github.io, "Push Yolov8n Pre-train Model To rk3588 (4)",
  2024-07-18, appendix 2): the runtime's DDR cycles of the layers the
  compiler gives 0 cycles (Concat, Add, Split) are about their RW bytes
  (reads) / 11.8.  Not a measured bandwidth.
- ``READ_RATE_ESTIMATE_BYTES_PER_S`` = 11.8 B x 1e9 = 11.8 GB/s: an
  ESTIMATE, not a lower bound.  It assumes the DDR cycles tick at the NPU's
  1 GHz; at the 2112 MHz DDR clock (the User Guide defines the column as
  "DDR read/write clock cycles") the same ratio is about 25 GB/s.  Apply
  it to reads, the quantity it was fitted on.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Union

from .. import models
from ..sim.perf import layer_macs
from ._common import REPORT_SOURCE

DDR_BUS_BYTES = 8
DDR_CLOCK_HZ = 2112e6
DDR_PEAK_BYTES_PER_S = 2 * DDR_CLOCK_HZ * DDR_BUS_BYTES
TRACE_BYTES_PER_DDR_CYCLE = 11.8
#: the cycle clock the estimate assumes: the NPU's (RK3588, facts sheet section 3), not the DDR's
ASSUMED_CYCLE_HZ = 1.0e9
READ_RATE_ESTIMATE_BYTES_PER_S = TRACE_BYTES_PER_DDR_CYCLE * ASSUMED_CYCLE_HZ
#: bytes per output channel a Conv-family layer's RW column holds beyond its weights (the
#: median over the shipped reports' Conv layers: a 32-bit bias and one more 32-bit value, inferred)
CONV_BYTES_PER_OUTPUT_CHANNEL = 8


def _prod(shape: Sequence[int]) -> int:
    return int(math.prod(shape)) if shape else 0


def _weights(layer: Dict[str, Any]) -> Optional[List[int]]:
    """The weight tensor's shape [Cout, Cin/groups, kh, kw] of a convolution-like layer."""
    shapes = layer["input_shapes"]
    if layer["op"].startswith("Conv") and len(shapes) >= 2 and len(shapes[1]) == 4:
        return list(shapes[1])
    return None


def _bound(ddr: int, npu: int) -> str:
    if ddr == 0 and npu == 0:
        return "no cycles"
    return "DDR" if ddr > npu else "compute"


def bound_counts(layers: Any) -> Any:
    """How many layers of a table are "DDR"-bound, "compute"-bound or have "no cycles",
    and their share of the time (time_us, a perf-detail table) or of the compiler's
    cycles (a :func:`layer_table`).  Takes either table; counts NPU layers only."""
    import pandas as pd
    npu = layers[layers["target"] == "NPU"]
    bound = [_bound(d, n) for d, n in zip(npu["cycles_ddr"], npu["cycles_npu"])]
    weight = npu["time_us"] if "time_us" in npu else npu["cycles_total"]
    what = "time" if "time_us" in npu else "cycles"
    table = (pd.DataFrame({"bound": bound, "w": weight.to_numpy(float)})
             .groupby("bound").agg(layers=("w", "size"), total=("w", "sum")))
    table[f"share_of_{what}"] = table["total"] / table["total"].sum()
    table = table.drop(columns="total").reindex(["DDR", "compute", "no cycles"], fill_value=0)
    table.attrs["source"] = layers.attrs.get("source", "")
    return table


def layer_table(model: str, soc: str = "rk3588", bandwidth: float = READ_RATE_ESTIMATE_BYTES_PER_S) -> Any:
    """The compiler's per-layer numbers of ``model`` for ``soc``, one row per layer.

    Columns: id (the compiler's, from 0), runtime_id (id + 1: how the
    runtime's perf-detail text numbers the same layer), op, target,
    cycles_ddr, cycles_npu, cycles_total, read_bytes (RW(KB) x 1024: what
    the layer reads: padded activation inputs + weights + about 8 B per
    output channel of a Conv), macs (rknnlab.sim.perf.layer_macs: output elements x
    Cin/groups x kh x kw for a convolution, 0 otherwise), bound ("DDR" when DDR
    cycles exceed NPU cycles, "compute" when NPU >= DDR > 0, "no cycles"
    for 0/0), npu_us (NPU cycles at the NPU clock), read_us_estimate
    (read_bytes at ``bandwidth`` B/s: by default READ_RATE_ESTIMATE_BYTES_PER_S,
    from about 11.8 bytes per DDR cycle in a board trace, an estimate; pass
    DDR_PEAK_BYTES_PER_S for the lower bound at the theoretical peak).

    Why both a cycles verdict and read_us_estimate: the cycles are the
    compiler's estimate; read_us_estimate prices the bytes independently, and
    it is the only estimate for the "no cycles" layers."""
    import pandas as pd
    report = models.load_report(model, soc)
    clock = _npu_clock(soc)
    rows = []
    for layer in report.layers:
        read = float(layer["rw_kb"]) * 1024
        rows.append({
            "id": layer["id"], "runtime_id": layer["id"] + 1, "op": layer["op"],
            "target": layer["target"], "cycles_ddr": layer["cycles_ddr"],
            "cycles_npu": layer["cycles_npu"], "cycles_total": layer["cycles_total"],
            "read_bytes": read, "macs": layer_macs(layer),
            "bound": _bound(layer["cycles_ddr"], layer["cycles_npu"]),
            "npu_us": layer["cycles_npu"] / clock * 1e6, "read_us_estimate": read / bandwidth * 1e6,
        })
    table = pd.DataFrame(rows)
    table.attrs.update(source=REPORT_SOURCE.format(soc=soc.upper(), toolkit=report.toolkit_version),
                       model=model, soc=soc, bandwidth_bytes_per_s=bandwidth)
    return table


def _npu_clock(soc: str) -> float:
    from ..sim.npu import soc_npu
    return soc_npu(soc).clock_hz


def _io_bytes(report: models.CompilerReport) -> int:
    """Bytes of the NPU's own input and output buffers (native size_with_stride): what
    rknn_inputs_set writes and rknn_outputs_get reads each frame."""
    return sum(int(a["size_with_stride"]) for kind in ("inputs", "outputs")
               for a in report.attrs(kind, "native"))


def _per_channel_bytes(layer: Dict[str, Any]) -> int:
    """The bytes a Conv-family layer's RW column holds beyond its weights: about 8 per
    output channel (0 for every other layer). The channels come from the output shape: the
    compiler prints a depthwise conv's weights as [1, C, kh, kw], so their first dimension
    is not the output channels."""
    if not _weights(layer):
        return 0
    outputs = layer.get("output_shapes") or []
    return CONV_BYTES_PER_OUTPUT_CHANNEL * int(outputs[0][1]) if outputs and len(outputs[0]) > 1 else 0


def _traffic_row(name: str, soc: str) -> Dict[str, Any]:
    report = models.load_report(name, soc)
    read = sum(float(layer["rw_kb"]) * 1024 for layer in report.layers)
    weights = sum(_prod(w) + _per_channel_bytes(layer)
                  for layer, w in ((layer, _weights(layer)) for layer in report.layers) if w)
    written = report.naive_activation_bytes()
    dims = report.attrs("inputs")[0]["dims"]
    height, width = (dims[1], dims[2]) if report.attrs("inputs")[0]["fmt"].endswith("NHWC") \
        else (dims[2], dims[3])
    return {
        "model": name, "soc": soc, "input": f"{width}x{height}", "pixels": int(width * height),
        "weights_and_bias_bytes": weights, "activation_read_bytes": read - weights,
        "read_bytes": read, "activation_write_bytes": written, "io_bytes": _io_bytes(report),
        "total_bytes": read + written, "npu_cycles": report.npu_cycles,
        "read_lower_bound_ms": read / DDR_PEAK_BYTES_PER_S * 1e3,
        "read_estimate_ms": read / READ_RATE_ESTIMATE_BYTES_PER_S * 1e3,
    }


def traffic(model: Union[str, Sequence[str]], soc: str = "rk3588") -> Any:
    """Bytes one frame moves through DDR, per model, from the compiler report.

    One row per model (give a name or a list: models at several resolutions
    make the resolution curve).  Columns: input ("640x640"), pixels,
    weights_and_bias_bytes (1 B per int8 weight, plus about 8 B per output
    channel of each Conv-family layer: its bias and one more value, as RW
    counts them), activation_read_bytes (the rest of RW: the padded
    activation inputs), read_bytes (sum of RW: all reads),
    activation_write_bytes (each activation tensor once, its size in the
    memory plan: an estimate, RW has no writes), io_bytes (the input and
    output buffers the CPU copies into and out of), total_bytes (reads +
    estimated writes), npu_cycles, read_lower_bound_ms (read_bytes at the 33.8 GB/s
    theoretical peak: a lower bound, no frame reads them faster) and
    read_estimate_ms (read_bytes at 11.8 GB/s, from about 11.8 bytes per DDR
    cycle in a board trace: an ESTIMATE, not a lower bound).  Sources and
    assumptions: the module docstring."""
    import pandas as pd
    names = [model] if isinstance(model, str) else list(model)
    if not names:
        raise ValueError("traffic: give at least one model name")
    table = pd.DataFrame([_traffic_row(n, soc) for n in names]).set_index("model")
    toolkits = sorted({models.load_report(n, soc).toolkit_version for n in names})
    table.attrs.update(source=REPORT_SOURCE.format(soc=soc.upper(), toolkit=", ".join(toolkits)),
                       peak_bytes_per_s=DDR_PEAK_BYTES_PER_S,
                       read_rate_estimate_bytes_per_s=READ_RATE_ESTIMATE_BYTES_PER_S)
    return table
