"""Chapter 1's analysis: the memory of a context, layer by layer.

- the compiler's memory plan: the most bytes alive at one layer, the tensors
  alive there, what reuse saves (:func:`plan_summary`, :func:`alive_at_peak`);
- which layers' activations are largest (:func:`largest_activations`);
- a context's NATIVE io attrs (:func:`native_attrs`);
- a process's memory counters in bytes (:func:`process_memory`);
- a system-wide counter with its spread over repeats (:func:`memfree_changes`),
  because one reading of MemFree cannot tell an allocation from the noise of
  every other process on the machine;
- the chapter's two bar charts (:func:`plot_context_memory`,
  :func:`plot_weights_and_activations`, on a :func:`course_plans` table).
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import probe
from .i18n import pick as L
from .models import CompilerReport, Lifetime
from .rknn import abi


def native_attrs(runtime: Any, ctx: int) -> Tuple[List[abi.rknn_tensor_attr], List[abi.rknn_tensor_attr]]:
    """A context's NATIVE input and output attrs: the layouts of the buffers the NPU really uses."""
    io_num = runtime.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    ins = [runtime.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=i))
           for i in range(io_num.n_input)]
    outs = [runtime.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
            for i in range(io_num.n_output)]
    return ins, outs


def _union_bytes(spans: List[Tuple[int, int]]) -> int:
    """Bytes covered by [start, end) ranges, a byte in two ranges counted once."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def live_bytes_per_layer(report: CompilerReport) -> List[int]:
    """The bytes in use at each layer: bytes of the internal buffer that hold a live tensor.

    A tensor is alive from the layer that writes it to the last layer that
    reads it, both included (the plan may not reuse its bytes before then).
    Tensors that the compiler lays inside each other (Concat/Split views)
    share bytes on purpose; those bytes count once."""
    spans = report.lifetimes()
    last = max(t.last_layer for t in spans)
    return [_union_bytes([(t.start, t.end) for t in spans if t.first_layer <= layer <= t.last_layer])
            for layer in range(last + 1)]


def peak_live_bytes(report: CompilerReport) -> int:
    """The high-water mark: the most bytes in use at one layer.

    A lower bound for the internal buffer: no plan that keeps the live
    bytes apart can use less."""
    return max(live_bytes_per_layer(report))


@dataclass(frozen=True)
class Peak:
    """The high-water mark of a plan: the layer and the tensors alive there."""
    layer: int
    live_bytes: int                 # bytes in use, shared bytes counted once
    tensors: Tuple[Lifetime, ...]   # largest first


def alive_at_peak(report: CompilerReport) -> Peak:
    """The first layer with the most live activation bytes, and the tensors alive at it."""
    live = live_bytes_per_layer(report)
    layer = live.index(max(live))
    alive = [t for t in report.lifetimes() if t.first_layer <= layer <= t.last_layer]
    alive.sort(key=lambda t: (-t.size, t.tensor))
    return Peak(layer, live[layer], tuple(alive))


def plan_summary(report: CompilerReport) -> Dict[str, float]:
    """The plan against the naive sum (every tensor its own buffer) and the peak."""
    internal = report.total_internal_size
    naive = report.naive_activation_bytes()
    peak = peak_live_bytes(report)
    return {"activation tensors": len(report.lifetimes()), "naive (sum of all)": naive,
            "peak alive at one layer": peak, "total_internal_size": internal,
            "naive / internal": round(naive / internal, 2),
            "internal / peak": round(internal / peak, 3),
            "saved by reuse": naive - internal}


def largest_activations(report: CompilerReport, n: int = 3) -> List[Dict[str, object]]:
    """The n layers whose output activations take the most bytes in the plan.

    Each row: the producing layer's id and op, the tensor, its shape (as in
    the ONNX graph, NCHW) and its bytes in the internal buffer."""
    ops = {layer["id"]: layer["op"] for layer in report.layers}
    shapes = {row["tensor"]: row["orig_shape"] for row in report.data["feature_tensors"]}
    rows = [{"layer": t.first_layer, "op": ops.get(t.first_layer, "?"), "tensor": t.tensor,
             "shape": tuple(shapes[t.tensor]), "bytes": t.size} for t in report.lifetimes()]
    rows.sort(key=lambda r: (-int(r["bytes"]), int(r["layer"])))
    return rows[:n]


_STATUS_KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def process_memory(heap: Optional[probe.Heap] = None) -> Dict[str, int]:
    """This process, in bytes: VmRSS and its parts (/proc/self/status), and
    glibc's heap in use and free-but-kept (mallinfo2; chapter 0 section 4).

    Collects Python's garbage first, so that dead Python objects do not show
    as memory the runtime holds."""
    gc.collect()
    now: Dict[str, int] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in _STATUS_KEYS:
                now[key] = int(value.split()[0]) * 1024
    sample = (heap or probe.Heap()).sample()
    if sample["heap_in_use_bytes"] is not None:
        now["heap in use"] = int(sample["heap_in_use_bytes"])
        now["heap free, kept by malloc"] = int(sample["heap_free_bytes"] or 0)
    return now


@dataclass(frozen=True)
class Spread:
    """Repeated readings of one change, in bytes."""
    values: Tuple[int, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> int:
        return min(self.values)

    @property
    def high(self) -> int:
        return max(self.values)

    def resolves(self, effect: float, noise: "Spread") -> bool:
        """True when an effect of this size stands out of the noise's range."""
        width = max(abs(noise.low), abs(noise.high))
        return abs(effect) > 2 * width


def memfree_changes(action: Callable[[], Callable[[], None]], repeats: int = 5,
                    meminfo_path: str = "/proc/meminfo") -> Tuple[Spread, Spread]:
    """How far MemFree falls across ``action()``, repeated, and with no action.

    ``action`` does the allocation and returns the function that undoes it
    (run after the reading, so every repeat starts from the same state).
    Returns (fall across the action, fall across nothing) as two Spreads of
    bytes; the second is the system's own noise over an interval as long
    as the action took.  MemFree is system-wide: other processes move it, and the
    kernel folds per-CPU counters into it in steps (vm.stat_interval)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    meminfo = probe.MemInfo(meminfo_path)
    try:
        def free_bytes() -> int:
            return int(meminfo.sample()["mem_free_kb"]) * 1024
        falls, idle = [], []
        for _ in range(repeats):
            before, started = free_bytes(), time.monotonic()
            undo = action()
            falls.append(before - free_bytes())
            took = time.monotonic() - started
            undo()
            before = free_bytes()
            time.sleep(took)                  # the same interval, with nothing done in it
            idle.append(before - free_bytes())
        return Spread(tuple(falls)), Spread(tuple(idle))
    finally:
        meminfo.close()


# --------------------------------------------------------------------------- chapter 1's figures
def course_plans(model_names: Optional[List[str]] = None) -> Any:
    """Every (model, soc) the course ships, from the compiler reports: the weights beside
    :func:`plan_summary` (naive sum, internal buffer, high-water mark).

    A pandas DataFrame indexed by (model, soc), with the columns "weights", "internal",
    "naive" and every column of :func:`plan_summary`; ``.attrs["toolkits"]`` lists the
    rknn-toolkit2 versions that built the reports."""
    import pandas as pd
    from . import models
    rows, toolkits = [], set()
    for name in model_names or models.list_models():
        for soc in models.model_socs(name):
            report = models.load_report(name, soc)
            toolkits.add(str(report.data["toolkit"]["rknn_toolkit2"]))
            summary = plan_summary(report)
            rows.append({"model": name, "soc": soc, "weights": report.total_weight_size,
                         "internal": summary["total_internal_size"], "naive": summary["naive (sum of all)"],
                         **summary})
    table = pd.DataFrame(rows).set_index(["model", "soc"])
    table.attrs["toolkits"] = sorted(toolkits)
    return table


def plot_context_memory(parts: Dict[str, Dict[str, float]], source: str) -> Any:
    """One stacked horizontal bar per context: ``parts[name][kind]`` in bytes (the kinds in
    the order given, e.g. weights, internal, io, CPU heap), its total in MiB at the end."""
    import matplotlib.pyplot as plt
    import numpy as np
    from .plot import _speak
    _speak()                  # a CJK font when the figure's text is Chinese
    names = list(parts)
    kinds = list(next(iter(parts.values())))
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.85 * len(names)), layout="constrained")
    left = np.zeros(len(names))
    for j, kind in enumerate(kinds):
        widths = np.array([parts[n][kind] for n in names], float) / 2**20
        ax.barh(names, widths, left=left, label=kind, color=f"C{j}", hatch=("//", "", "xx", "..")[j % 4],
                edgecolor="white")
        left += widths
    for y, total in enumerate(left):
        ax.annotate(f"{total:.1f} MiB", (total, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8)
    ax.set_xlim(0, left.max() * 1.15)
    ax.set_xlabel("MiB")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(L("The memory of one context, by kind", "一个上下文的内存，按类型") + f"\n{source}", fontsize=10,
                 loc="left")
    return fig


def plot_weights_and_activations(table: Any, soc: str) -> Any:
    """Grouped bars, log scale: weights, internal buffer and naive activations of every
    model on ``soc``, from a :func:`course_plans` table."""
    import matplotlib.pyplot as plt
    import numpy as np
    from .plot import _speak
    _speak()                  # a CJK font when the figure's text is Chinese
    on_soc = table.xs(soc, level="soc").sort_values("weights")
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    x = np.arange(len(on_soc))
    for j, (col, label, hatch) in enumerate([("weights", L("weights", "权重"), "//"),
                                             ("internal", L("internal", "内部内存"), ""),
                                             ("naive", L("naive activations", "激活的朴素总和"), "..")]):
        ax.bar(x + (j - 1) * 0.27, on_soc[col] / 2**20, width=0.27, label=label, color=f"C{j}", hatch=hatch,
               edgecolor="white")
    ax.set_xticks(x, on_soc.index)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel(L("MiB (log scale)", "MiB（对数坐标）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    toolkits = ', '.join(table.attrs.get('toolkits', []))
    built = L(f"rknn-toolkit2 {toolkits} compiler reports, data/models", f"rknn-toolkit2 {toolkits} 编译报告，data/models")
    ax.set_title(L(f"Weights and activations of every course model, {soc.upper()}",
                   f"课程中每个模型的权重与激活，{soc.upper()}") + f"\n{built}", fontsize=10, loc="left")
    return fig
