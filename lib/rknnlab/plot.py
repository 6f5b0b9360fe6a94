"""Figures of a run (or of a compiler report), with matplotlib only.

Every function returns a matplotlib Figure; pass ``ax=`` to draw into an
axis of your own.  Each figure names its source in the title ("simulated
RK3588 — rknnlab sim" or the board's name) and its units on the axes, uses
line styles as well as colours (readable in print and in grey), and the
course's fixed size, so exported HTML and PDF look the same.

==========================  ==================================================
:func:`say`                 a text for a figure the notebook draws itself, in the
                            reader's language (English or Chinese)
:func:`memory`              MemFree / MemAvailable / RSS / PSS / heap / DMA
                            over time, one line per variant, iteration marks
:func:`iteration_times`     time per iteration, one line per variant
:func:`phases`              stacked bars: median time per iteration in each
                            phase (runtime function), per variant
:func:`memory_plan`         the compiler's internal-buffer plan: one bar per
                            tensor lifetime (x: layers, y: offset)
:func:`gantt`               the calls over time, one lane per thread (and context)
:func:`overview`            a run's standard figures, one list
:func:`rss_life_and_loop`   RSS over each process's life and over the measured loop
:func:`memfree_table`       MemFree's range in each run beside the heap's growth
:func:`growth_comparison`   two runs' slopes and whether their intervals overlap
:func:`lifecycle`           a context's life: RSS, heap, DMA total, MemFree
                            after each step, phases shaded (Chapter 2)
:func:`contexts_memory`     N contexts by rknn_init vs rknn_dup_context
:func:`frame_phases`        a frame's phases as stacked bars per model and size,
                            beside published board figures (Chapter 3)
:func:`layer_profile`       the slowest layers; DDR vs NPU cycles per layer
:func:`traffic`             bytes per frame against the input's pixels
:func:`multicore`           speedup over one NPU core per model and core mask
:func:`fragmentation`       RSS after malloc, free and malloc_trim(0), per pattern
:func:`cpu_costs`           a frame's CPU-side costs, measured and MODELED apart
:func:`alloc_loops`         Chapter 5: the recipe's loop, mems per frame, create
                            once / bind once (time, DMA allocated per frame)
:func:`alloc_sharing`       separate contexts vs one shared internal buffer
:func:`alloc_pipelines`     N pipelines: init each, dup_context, shared internal
:func:`alloc_shapes`        each input shape of a dynamic-shape model
:func:`alloc_sram`          each tensor's bytes in SRAM and in DRAM
:func:`alloc_iommu`         many models against one 4 GiB IOMMU domain
:func:`alloc_cache_choice`  cacheable vs non-cacheable, per access pattern
:func:`review_claims`       Chapter 7: what each claim predicts beside what was measured
==========================  ==================================================
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import fonts
from .experiment.growth import theil_sen
from .i18n import language
from .i18n import pick as L

FIGSIZE = (8.0, 4.2)
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

#: metric -> (column, label, divisor to the unit, unit)
METRICS: Dict[str, Tuple[str, str, float, str]] = {
    "mem_free": ("mem_free_kb", "MemFree (system)", 1024.0, "MiB"),
    "mem_available": ("mem_available_kb", "MemAvailable (system)", 1024.0, "MiB"),
    "cma_free": ("cma_free_kb", "CmaFree (system)", 1024.0, "MiB"),
    "rss": ("rss_kb", "RSS of the variant's process", 1024.0, "MiB"),
    "pss": ("pss_kb", "PSS of the variant's process", 1024.0, "MiB"),
    "heap": ("heap_in_use_bytes", "malloc heap in use (mallinfo2)", 2.0 ** 20, "MiB"),
    "heap_free": ("heap_free_bytes", "free bytes kept in the malloc heap (mallinfo2)", 2.0 ** 20, "MiB"),
    "dma": ("dma_bytes", "runtime DMA total (RKNN_QUERY_MEM_SIZE)", 2.0 ** 20, "MiB"),
}
#: metric -> its label in Chinese (the zh edition; METRICS keeps the English one)
_METRICS_ZH: Dict[str, str] = {
    "mem_free": "MemFree（系统）",
    "mem_available": "MemAvailable（系统）",
    "cma_free": "CmaFree（系统）",
    "rss": "变体进程的 RSS",
    "pss": "变体进程的 PSS",
    "heap": "已用 malloc 堆内存（mallinfo2）",
    "heap_free": "malloc 堆中保留的空闲字节（mallinfo2）",
    "dma": "运行时 DMA 总量（RKNN_QUERY_MEM_SIZE）",
}


def _speak(*axes) -> None:
    """When rknnlab speaks Chinese, name a CJK font as matplotlib's fallback before anything
    is drawn (rknnlab.fonts.use_cjk); in English nothing changes.

    ``axes``: axes given by the caller (an axes, a pair, a list or an array of them, or
    None), made before the font was named: a text keeps the font it was made with, so their
    titles, axis labels and tick labels (new ticks copy the first one's) get the CJK
    fallback too."""
    if language() != "zh":
        return
    if fonts.use_cjk() is None:
        return
    import matplotlib
    family = matplotlib.rcParams["font.family"]
    for ax in _flat_axes(axes):
        texts = [getattr(ax, name, None) for name in ("title", "_left_title", "_right_title")]
        for axis in (ax.xaxis, ax.yaxis):
            texts.append(axis.label)
            texts += [t for tick in axis.majorTicks + axis.minorTicks for t in (tick.label1, tick.label2)]
        for text in texts:
            if text is not None:
                text.set_fontfamily(family)


def say(en: str, zh: str) -> str:
    """A text of a figure that a notebook's own code draws, in the language rknnlab speaks:
    ``ax.set_title(plot.say("frames", "帧"))``. In Chinese the CJK font is named first (as
    when this module is imported in Chinese: before the notebook makes its figures)."""
    if language() == "zh":
        _speak()
    return L(en, zh)


def _flat_axes(axes) -> List[Any]:
    out: List[Any] = []
    for a in axes:
        if a is None:
            continue
        if hasattr(a, "xaxis"):
            out.append(a)
        else:                                   # a pair, a list or an array of axes
            out += _flat_axes(list(np.ravel(np.asarray(a, dtype=object))))
    return out


_CJK = "\u3400-\u4dbf\u4e00-\u9fff"


def _zs(text: str) -> str:
    """Chinese text with a space between a Chinese character and a Latin letter or digit
    ("RSS 的变化"): the zh edition's spacing, where a name or number is filled in."""
    text = re.sub(f"(?<=[{_CJK}])(?=[A-Za-z0-9_])", " ", text)
    return re.sub(f"(?<=[A-Za-z0-9_%])(?=[{_CJK}])", " ", text)


def _change(short: str) -> str:
    """"的变化" after a Chinese label: "已用 malloc 堆内存的变化", "变体进程的 RSS 变化"."""
    return "变化" if "的" in short else "的变化"


def _metric_label(metric: str) -> Tuple[str, str]:
    """(label, short label) of a metric, in the language rknnlab speaks: "RSS of the
    variant's process" is both; "MemFree (system)" is shortened to "MemFree"."""
    label = METRICS[metric][1]
    label = L(label, _METRICS_ZH[metric])
    return label, re.split(r" \(|（", label)[0]


def _plt(*axes):
    """(matplotlib, pyplot), with the CJK font named first in Chinese (see _speak; ``axes``:
    the caller's axes, if any)."""
    _speak(*axes)
    import matplotlib
    import matplotlib.pyplot as plt  # noqa: F401  (the backend the notebook chose)
    return matplotlib, plt


def _new(ax=None, figsize=FIGSIZE):
    _, plt = _plt(ax)
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def _style(i: int) -> Dict[str, Any]:
    return {"linestyle": LINESTYLES[i % len(LINESTYLES)], "color": f"C{i % 10}"}


def _title(ax, what: str, source: str) -> None:
    ax.set_title(f"{what}\n{source}", fontsize=10, loc="left")


def _variants(result, variants: Optional[Sequence[str]]) -> List[str]:
    names = list(result.variants)
    if variants is None:
        return names
    missing = [v for v in variants if v not in names]
    if missing:
        raise KeyError(f"no variant {', '.join(missing)} in this result; it has {', '.join(names)}")
    return list(variants)


def _note_missing(ax, result, shown: List[str]) -> None:
    failed = [f"{r.name} ({r.status})" for r in result.runs if r.name in shown and r.status != "ok"]
    if failed:
        ax.text(0.99, 0.01, L("not finished: ", "未完成：") + L(", ", "、").join(failed), transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="0.3")


# --------------------------------------------------------------------------- memory over time
def memory(result, metric: str = "mem_free", variants: Optional[Sequence[str]] = None,
           ax=None, marks: int = 10, relative: bool = False, by_iteration: bool = False,
           baseline: str = "first"):
    """``metric`` over time (s since the variant's process started), one line per variant.

    Metrics: mem_free, mem_available, cma_free, rss, pss, heap, heap_free, dma.
    ``marks`` iteration marks per variant (a marker where every k-th iteration
    starts, labelled with its number); the warm-up is shaded.  ``relative``:
    subtract each variant's first measured value (shows growth).
    ``by_iteration``: only the measured iterations, against the iteration
    number, so that start-up and warm-up do not set the scale (small leaks
    show); implies ``relative``.  ``baseline`` (by_iteration only): "first"
    subtracts the first measured sample; "fit" subtracts, per variant, a
    Theil-Sen line's value at the first measured sample, so that one sample
    that caught a transient allocation is one point off its line instead of
    moving the whole curve."""
    if baseline not in ("first", "fit"):
        raise ValueError(f"baseline {baseline!r}: expected 'first' or 'fit'")
    if by_iteration:
        return _memory_by_iteration(result, metric, variants, ax, baseline)
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    col, _, div, unit = METRICS[metric]
    fig, ax = _new(ax)
    label, short = _metric_label(metric)
    samples, its = result.samples, result.iterations
    names = _variants(result, variants)
    drawn = 0
    for i, name in enumerate(names):
        s = samples[samples["variant"] == name] if len(samples) else samples
        if col not in s or s[col].notna().sum() == 0:
            continue
        s = s[s[col].notna()]
        t = s["t_s"].to_numpy(float)
        y = s[col].to_numpy(float) / div
        if relative:
            m = s["stage"].to_numpy() == "measure"
            y = y - (y[m][0] if m.any() else y[0])
        st = _style(i)
        ax.plot(t, y, label=name, linewidth=1.4, **st)
        drawn += 1
        it = its[its["variant"] == name] if len(its) else its
        if len(it) and marks:
            step = max(1, int(math.ceil(len(it) / marks)))
            pick = it.iloc[::step]
            tx = pick["start_s"].to_numpy(float)
            ty = np.interp(tx, t, y)
            ax.plot(tx, ty, linestyle="none", marker=MARKERS[i % len(MARKERS)], markersize=4,
                    color=st["color"], gid=f"marks:{name}")
            for x_, y_, n_ in zip(tx[::2], ty[::2], pick["iteration"].to_numpy()[::2]):
                ax.annotate(str(int(n_)), (x_, y_), textcoords="offset points", xytext=(0, 5),
                            fontsize=6, color=st["color"], ha="center")
            w = it[it["stage"] == "warmup"]
            if len(w):
                ax.axvspan(w["start_s"].iloc[0], w["start_s"].iloc[-1] + w["duration_ms"].iloc[-1] / 1e3,
                           color=st["color"], alpha=0.08, linewidth=0)
    ax.set_xlabel(L("time since the variant's process started (s)", "自变体进程启动以来的时间（s）"))
    ax.set_ylabel(L(f"{'change in ' if relative else ''}{short} ({unit})",
                    _zs(f"{short}{_change(short) if relative else ''}（{unit}）")))
    _title(ax, L(f"{label} over time (markers: iteration starts, numbered; shaded: warm-up)",
                 f"{label}：随时间的变化（标记：迭代开始处，带编号；阴影：预热）"),
           result.source)
    return _finish_lines(fig, ax, drawn, L(f"no {label} samples in this result", _zs(f"此结果中没有{label}的采样")),
                         result, names)


def _finish_lines(fig, ax, drawn: int, empty: str, result, names: List[str]):
    """Grid, legend (or a note that nothing was drawn), unfinished variants named."""
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center")
    _note_missing(ax, result, names)
    return fig


def _memory_by_iteration(result, metric: str, variants: Optional[Sequence[str]], ax,
                         baseline: str = "first"):
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    col, _, div, unit = METRICS[metric]
    fig, ax = _new(ax)
    label, short = _metric_label(metric)
    samples = result.samples
    names = _variants(result, variants)
    drawn = 0
    for i, name in enumerate(names):
        s = samples[samples["variant"] == name] if len(samples) else samples
        if col not in s or "iteration" not in s:
            continue
        s = s[s[col].notna() & (s["stage"] == "measure") & s["iteration"].notna()]
        if not len(s):
            continue
        y = s[col].to_numpy(float) / div
        x = s["iteration"].to_numpy(float)
        ax.plot(x, y - _baseline(x, y, baseline), label=name, linewidth=1.4, **_style(i))
        drawn += 1
    ax.set_xlabel(L("measured iteration", "测量迭代"))
    ax.set_ylabel(L(f"change in {short} ({unit})", _zs(f"{short}{_change(short)}（{unit}）")))
    since = (L("since the first", "相对第一个采样") if baseline == "first"
             else L("from a robust line's start", "相对稳健拟合直线的起点"))
    _title(ax, L(f"{label} during the measured iterations (change {since})",
                 f"{label}：测量迭代期间的变化（{since}）"), result.source)
    return _finish_lines(fig, ax, drawn, L(f"no {label} samples in the measured iterations",
                                           _zs(f"测量迭代中没有{label}的采样")), result, names)


def _baseline(x: np.ndarray, y: np.ndarray, baseline: str) -> float:
    """The value a by-iteration curve is drawn relative to (see memory's ``baseline``)."""
    if baseline == "first" or len(y) < 3:
        return float(y[0])
    slope = theil_sen(x, y)
    return float(np.median(y - slope * (x - x[0])))


def reference_rate(ax, bytes_per_iteration: float, label: str, unit_bytes: float = 2.0 ** 20):
    """A dashed black line through 0 at the axis's first x, rising ``bytes_per_iteration``
    per iteration (drawn in units of ``unit_bytes``: MiB for memory(..., by_iteration=True)),
    over the x range already drawn, added to the legend as ``label``.  For a rate that was
    not measured here (a published one), so say so in ``label``."""
    _speak(ax)        # the label may be Chinese
    left, right = ax.get_xlim()
    x = np.array([left, right])
    ax.plot(x, (x - left) * float(bytes_per_iteration) / unit_bytes, color="black", linestyle="--",
            linewidth=1.0, label=label, gid="reference_rate")
    ax.set_xlim(left, right)
    ax.legend(fontsize=8, loc="upper left")        # the line rises to the right
    return ax


# --------------------------------------------------------------------------- timing
def iteration_times(result, variants: Optional[Sequence[str]] = None, ax=None,
                    warmup: bool = True, log: bool = False):
    """Time per iteration (ms) against the iteration number, one line per variant;
    warm-up iterations in a thin dotted line."""
    fig, ax = _new(ax)
    its = result.iterations
    names = _variants(result, variants)
    for i, name in enumerate(names):
        it = its[its["variant"] == name] if len(its) else its
        if not len(it):
            continue
        st = _style(i)
        m = it[it["stage"] == "measure"]
        ax.plot(m["iteration"].to_numpy(), m["duration_ms"].to_numpy(float), label=name,
                linewidth=1.0, **st)
        w = it[it["stage"] == "warmup"]
        if warmup and len(w):
            ax.plot(w["iteration"].to_numpy(), w["duration_ms"].to_numpy(float), linestyle=":",
                    color=st["color"], linewidth=0.8, gid=f"warmup:{name}")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(L("iteration", "迭代"))
    ax.set_ylabel(L("time per iteration (ms)", "每次迭代的时间（ms）"))
    _title(ax, L("Time per iteration (dotted: warm-up)", "每次迭代的时间（点线：预热）"), result.source)
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8, loc="best")
    _note_missing(ax, result, names)
    return fig


def phase_table(result, variants: Optional[Sequence[str]] = None):
    """variant x function: the median over measured iterations of the time (ms)
    each iteration spent in that function (the data of :func:`phases`)."""
    import pandas as pd
    calls = result.calls
    names = _variants(result, variants)
    if not len(calls) or "stage" not in calls:
        return pd.DataFrame(index=pd.Index(names, name="variant"))
    m = calls[(calls["stage"] == "measure") & calls["variant"].isin(names)]
    per_it = (m.groupby(["variant", "iteration", "function"], observed=True)["duration_us"].sum()
              .unstack("function", fill_value=0.0))
    table = per_it.groupby(level="variant", observed=True).median() / 1e3
    order = list(dict.fromkeys(m["function"]))  # first-call order: init, query, inputs_set, ...
    return table.reindex(index=[n for n in names if n in table.index], columns=order)


def phases(result, variants: Optional[Sequence[str]] = None, ax=None):
    """Stacked bars: per variant, the median time per iteration spent in each
    phase (runtime function, or a lab.timed block), in ms."""
    fig, ax = _new(ax)
    table = phase_table(result, variants)
    x = np.arange(len(table.index))
    bottom = np.zeros(len(x))
    hatches = ("", "//", "..", "xx", "\\\\", "--", "oo", "++")
    for j, fn in enumerate(table.columns):
        h = table[fn].fillna(0.0).to_numpy(float)
        ax.bar(x, h, bottom=bottom, label=fn, color=f"C{j % 10}", hatch=hatches[j % len(hatches)],
               edgecolor="white", linewidth=0.5, gid=f"phase:{fn}")
        bottom += h
    for xi, total in zip(x, bottom):
        ax.annotate(f"{total:.2f} ms", (xi, total), textcoords="offset points", xytext=(0, 3),
                    ha="center", fontsize=8)
    if len(bottom) and bottom.max() > 0:
        ax.set_ylim(0, bottom.max() * 1.12)  # room for the totals under the title
    ax.set_xticks(x, list(table.index), rotation=15 if len(x) > 3 else 0)
    ax.set_ylabel(L("median time per iteration (ms)", "每次迭代时间的中位数（ms）"))
    _title(ax, L("Where an iteration's time goes, by runtime function (measured iterations)",
                 "一次迭代的时间花在哪里：按运行时函数（测量迭代）"),
           result.source)
    ax.grid(True, axis="y", alpha=0.3)
    if len(table.columns):
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


# --------------------------------------------------------------------------- compiler memory plan
def memory_plan(report_or_model: Union[str, Any], soc: str = "rk3588", ax=None,
                labels: int = 0):
    """The compiler's plan of the internal (activation) buffer of a model.

    One bar per tensor lifetime: from the layer that writes it to the last
    layer that reads it (x), at its offset in the internal buffer (y, KiB),
    as tall as its size.  Bars that share a height at different layers are
    reuse.  Annotated: the total internal size against the naive sum (every
    tensor in a buffer of its own).  Accepts a CompilerReport or a model name."""
    from . import models
    report = (models.load_report(report_or_model, soc) if isinstance(report_or_model, str)
              else report_or_model)
    spans = report.lifetimes()
    fig, ax = _new(ax, figsize=(8.0, 4.8))
    kib = 1024.0
    views = {t for pair in report.view_pairs() for t in pair}
    for i, t in enumerate(spans):
        view = t.tensor in views
        ax.bar(t.first_layer, t.size / kib, width=t.last_layer - t.first_layer + 1,
               bottom=t.start / kib, align="edge", color=f"C{i % 10}", alpha=0.75,
               edgecolor="black", linewidth=0.4, hatch="//" if view else None, gid=f"tensor:{t.tensor}")
        if labels and i < labels:
            ax.text(t.first_layer, (t.start + t.size / 2) / kib, t.tensor, fontsize=6, va="center")
    total = report.total_internal_size
    naive = report.naive_activation_bytes()
    ax.axhline(total / kib, color="black", linestyle="--", linewidth=1)
    ax.annotate(L(f"internal buffer: {total / kib:,.0f} KiB (RKNN_QUERY_MEM_SIZE total_internal_size)\n"
                  f"every tensor in its own buffer: {naive / kib:,.0f} KiB "
                  f"({naive / total:.1f}x; reuse saves {(naive - total) / kib:,.0f} KiB)",
                  f"内部内存：{total / kib:,.0f} KiB（RKNN_QUERY_MEM_SIZE total_internal_size）\n"
                  f"每个张量各用一块缓冲区：{naive / kib:,.0f} KiB"
                  f"（{naive / total:.1f}x；复用节省 {(naive - total) / kib:,.0f} KiB）"),
                xy=(0.01, 0.99), xycoords="axes fraction", va="top", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})
    n_layers = max((t.last_layer for t in spans), default=0) + 1
    ax.set_xlim(0, max(n_layers, len(report.layers)))
    ax.set_ylim(0, max(total / kib * 1.25, 1))
    ax.set_xlabel(L("layer (index in the compiled graph)", "层（在编译后计算图中的序号）"))
    ax.set_ylabel(L("offset in the internal buffer (KiB)", "在内部内存中的偏移（KiB）"))
    hatch_note = L("; hatched: concat/split views", "；斜线：concat/split 视图") if views else ""
    _title(ax, L(f"Memory plan of {report.model} ({len(spans)} activation tensors{hatch_note})",
                 f"{report.model} 的内存规划（{len(spans)} 个激活张量{hatch_note}）"),
           L(f"rknn-toolkit2 compiler report, {report.target.upper()}",
             f"rknn-toolkit2 编译报告，{report.target.upper()}"))
    ax.grid(True, alpha=0.3)
    return fig


# --------------------------------------------------------------------------- pipeline Gantt
def gantt(result, variant: Optional[str] = None, iterations: Optional[Tuple[int, int]] = None,
          ax=None, lanes: str = "thread"):
    """The runtime calls of one variant on a time line: one lane per thread
    (``lanes="thread"``), per thread and context (``"thread_ctx"``) or per
    NPU core mask of the call's context (``"core"``: what rknn_set_core_mask
    set, AUTO before), one colour per function.  ``iterations=(first, last)`` limits the window
    (default: the first 5 measured iterations)."""
    import pandas as pd
    pd_na = pd.NA
    fig, ax = _new(ax)
    names = _variants(result, [variant] if variant else None)
    name = names[0]
    calls = result.calls
    c = calls[calls["variant"] == name] if len(calls) else calls
    if iterations is None and len(c):
        measured = c[c["stage"] == "measure"]["iteration"].dropna()
        first = int(measured.min()) if len(measured) else 0
        iterations = (first, first + 4)
    if iterations is not None and len(c):
        c = c[(c["iteration"] >= iterations[0]) & (c["iteration"] <= iterations[1])]
    if not len(c):
        ax.text(0.5, 0.5, L(f"no calls of {name} in this window", f"此时间窗内没有 {name} 的调用"),
                transform=ax.transAxes, ha="center")
        _title(ax, L(f"Calls of {name}", f"{name} 的调用"), result.source)
        return fig
    if lanes == "core":
        from .rknn import abi
        masks = c["core_mask"].astype(object) if "core_mask" in c else [None] * len(c)
        keys = [f"NPU {abi.CORE_MASK_NAMES.get(int(m), hex(int(m)))[len('RKNN_NPU_'):]}"
                if m is not None and m is not pd_na else L("CPU side (no context)", "CPU 端（无上下文）")
                for m in masks]
    elif lanes == "thread_ctx":
        thread, ctx = L("thread", "线程"), L("ctx", "上下文")
        keys = [f"{thread} {int(t)} / {ctx} {'-' if x is None or x is pd_na or x != x else int(x)}"
                for t, x in zip(c["thread"], c["ctx"].astype(object))]
    else:
        keys = [f"{L('thread', '线程')} {int(t)}" for t in c["thread"]]
    lane_names = sorted(set(keys))
    lane_of = {k: i for i, k in enumerate(lane_names)}
    funcs = list(dict.fromkeys(c["function"]))
    t0 = float(c["start_s"].min())
    for j, fn in enumerate(funcs):
        sel = (c["function"] == fn).to_numpy()
        rows = [lane_of[k] for k, s in zip(keys, sel) if s]
        starts = (c["start_s"].to_numpy(float)[sel] - t0) * 1e3
        widths = c["duration_us"].to_numpy(float)[sel] / 1e3
        ax.barh(rows, widths, left=starts, height=0.6, color=f"C{j % 10}", label=fn,
                edgecolor="black", linewidth=0.3, gid=f"calls:{fn}")
    its = result.iterations
    it = its[(its["variant"] == name)]
    if iterations is not None:
        it = it[(it["iteration"] >= iterations[0]) & (it["iteration"] <= iterations[1])]
    for s_, n_ in zip(it["start_s"].to_numpy(float), it["iteration"].to_numpy()):
        ax.axvline((s_ - t0) * 1e3, color="0.5", linewidth=0.6, linestyle=":")
        ax.text((s_ - t0) * 1e3, len(lane_names) - 0.4, L(f"it {n_}", f"迭代 {n_}"), fontsize=7, color="0.3")
    ax.set_yticks(range(len(lane_names)), lane_names)
    ax.set_ylim(-0.6, len(lane_names) - 0.1)
    since = iterations[0] if iterations else ''
    ax.set_xlabel(L(f"time since iteration {since} started (ms)", f"自迭代 {since} 开始以来的时间（ms）"))
    _title(ax, L(f"Runtime calls of {name}, iterations {iterations[0]}-{iterations[1]}",
                 f"{name} 的运行时调用，迭代 {iterations[0]}-{iterations[1]}")
           if iterations else L(f"Runtime calls of {name}", f"{name} 的运行时调用"), result.source)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def overview(result, metric: str = "rss") -> List[Any]:
    """The standard figures of a run, on pyplot (shown inline): memory
    (``metric``, and MemFree next to it unless ``metric`` is "mem_free"),
    iteration times, phases.  The runner panel draws its own set
    (rknnlab.widgets.result_figures: RSS by iteration, iteration times on a
    log scale, phases; no MemFree, which one run cannot show the spread of)."""
    figs = [memory(result, metric), iteration_times(result), phases(result)]
    if metric != "mem_free":
        figs.insert(1, memory(result, "mem_free"))
    return figs


# --------------------------------------------------------------------------- chapter 0
def rss_life_and_loop(result, variants: Optional[Sequence[str]] = None, marks: int = 10):
    """Two panels of RSS, one above the other.  Upper: each process's whole life against
    time, as the change since its first measured sample (start-up shows below zero, the
    warm-up is shaded, markers sit on iteration starts).  Lower: the measured loop only,
    against the iteration number, so that start-up does not set the scale."""
    _, plt = _plt()
    fig, (ax_all, ax_loop) = plt.subplots(2, 1, figsize=(8, 8), layout="constrained")
    memory(result, "rss", variants, ax=ax_all, marks=marks, relative=True)
    memory(result, "rss", variants, ax=ax_loop, by_iteration=True)
    ax_loop.set_ylabel(L("change in RSS since the first\nmeasured iteration (MiB)",
                         "RSS 相对第一次\n测量迭代的变化（MiB）"))
    return fig


def memfree_table(result, variants: Optional[Sequence[str]] = None):
    """variant x (what MemFree did, what the heap did) over the measured iterations:
    ``readings`` (MemFree samples), ``memfree_range_mib`` (largest minus smallest),
    ``memfree_drop_mib`` (first minus last), ``heap_growth_mib`` and ``heap_growth_pm_mib``
    (the heap's slope times the iterations, with its 95% half-width).  A leak shows in
    MemFree only when its heap growth is well above the range of the variants that do not
    leak."""
    import pandas as pd
    samples, summary = result.samples, result.summary
    rows = []
    for name in _variants(result, variants):
        s = samples[(samples["variant"] == name) & (samples["stage"] == "measure")] if len(samples) else samples
        mf = (s["mem_free_kb"].dropna() / 1024.0) if "mem_free_kb" in s else pd.Series(dtype=float)
        n = summary.loc[name, "iterations"]
        rows.append({"variant": name, "readings": len(mf),
                     "memfree_range_mib": float(mf.max() - mf.min()) if len(mf) else math.nan,
                     "memfree_drop_mib": float(mf.iloc[0] - mf.iloc[-1]) if len(mf) >= 2 else math.nan,
                     "heap_growth_mib": summary.loc[name, "heap_slope_bytes_per_iter"] * n / 2.0 ** 20,
                     "heap_growth_pm_mib": summary.loc[name, "heap_slope_pm_bytes"] * n / 2.0 ** 20})
    return pd.DataFrame(rows).set_index("variant")


def growth_comparison(first, second, metric: str = "heap"):
    """The slope of ``metric`` ("heap" or "rss", bytes per iteration) of every variant that
    two results share, with its 95% half-width in each, and whether the two intervals
    overlap (``agree``).  Overlapping intervals: the runs cannot be told apart on it."""
    import pandas as pd
    if metric not in ("heap", "rss"):
        raise ValueError(f"metric {metric!r}: expected 'heap' or 'rss'")
    a, b = first.summary, second.summary
    rows = []
    for name in [v for v in first.variants if v in b.index]:
        s1, p1 = a.loc[name, f"{metric}_slope_bytes_per_iter"], a.loc[name, f"{metric}_slope_pm_bytes"]
        s2, p2 = b.loc[name, f"{metric}_slope_bytes_per_iter"], b.loc[name, f"{metric}_slope_pm_bytes"]
        rows.append({"variant": name, "first": s1, "first_pm": p1, "second": s2, "second_pm": p2,
                     "agree": bool(abs(s1 - s2) <= p1 + p2)})
    return pd.DataFrame(rows, columns=["variant", "first", "first_pm", "second", "second_pm", "agree"]
                        ).set_index("variant")


# --------------------------------------------------------------------------- chapter 2
#: the lifecycle timeline's panels: (phase_table column, axis label, divisor to MiB,
#: drawn as the change since the start of the life)
_LIFE_PANELS = (
    ("rss_kib", "RSS of the process\nchange (MiB)", 1024.0, True),
    ("heap_bytes", "malloc heap in use\nchange (MiB)", 2.0 ** 20, True),
    ("dma_bytes", "runtime DMA total\n(MiB)", 2.0 ** 20, False),
    ("mem_free_kib", "MemFree (system)\nchange (MiB)", 1024.0, True),
)
#: the panels' axis labels in Chinese (the zh edition)
_LIFE_LABELS_ZH = {"rss_kib": "进程的 RSS\n变化（MiB）", "heap_bytes": "已用 malloc 堆内存\n变化（MiB）",
                   "dma_bytes": "运行时 DMA 总量\n（MiB）", "mem_free_kib": "MemFree（系统）\n变化（MiB）"}
#: more slots than this and the frames after the first are named by their first step only
_CROWDED = 32
_PHASE_COLOURS = {"init": "C0", "query": "0.6", "frames": "C2", "destroy": "C3", "destroy_mem": "C3",
                  "read_file": "C4", "copy_model": "C4", "free_buffer": "C6", "create_mem2": "C1",
                  "create_mem": "C1"}
#: the smallest y span of a timeline panel (MiB): changes of a few KiB stay small
_LIFE_MIN_SPAN = 1.0


def _phase_colour(phase: str) -> str:
    if phase in _PHASE_COLOURS:
        return _PHASE_COLOURS[phase]
    others = ("C5", "C8", "C9", "C7")
    return others[sum(map(ord, phase)) % len(others)]  # the same colour for a name in every figure


def _life_slots(result, variant: Optional[str]):
    """The timeline's slots: the steps of lifecycle.step_readings, with consecutive
    calls of one function outside the frames (the queries) merged, and each memory
    column's level after the slot (carried forward where a step has no reading).

    A change between two steps (RSS, heap or DMA total moving by at least 64 KiB
    and 5% of the column's range while no step ran) gets a slot of its own, named
    "between steps" ("malloc_trim (harness)" for the harness's trim before the
    first measured frame), so that it is not drawn as the next step's."""
    from .lifecycle import step_readings
    steps = step_readings(result, variant)
    merged: List[Dict[str, Any]] = []
    for row in steps.to_dict("records"):
        last = merged[-1] if merged else None
        if (last is not None and row["phase"] != "frames" and last["phase"] == row["phase"]
                and last["step"] == row["step"]):
            last["calls"] += 1
            last["end_ms"] = row["end_ms"]
            for col, *_ in _LIFE_PANELS:
                if not math.isnan(row[f"{col}_after"]):
                    last[f"{col}_after"] = row[f"{col}_after"]
            continue
        merged.append(dict(row, calls=1))
    params = result.meta.get("parameters", {})
    trim_at = params.get("warmup", 0) if params.get("trim_after_warmup", True) else None
    slots: List[Dict[str, Any]] = []
    for slot in merged:
        if slots and _moved_between(slots[-1], slot, merged):
            first_measured = (trim_at is not None and slot["iteration"] == trim_at
                              and slots[-1]["iteration"] != trim_at)
            gap = {"step": (L("malloc_trim (harness)", "malloc_trim（测量框架）") if first_measured
                            else L("between steps", "步骤之间")),
                   "phase": "between steps", "iteration": None, "calls": 0,
                   "start_ms": slots[-1]["end_ms"], "end_ms": slot["start_ms"]}
            for col, *_ in _LIFE_PANELS:
                gap[f"{col}_before"] = slots[-1][f"{col}_after"]
                gap[f"{col}_after"] = slot[f"{col}_before"]
            slots.append(gap)
        slots.append(slot)
    base = {}
    for col, *_ in _LIFE_PANELS:
        first = [s[f"{col}_before"] for s in slots if not math.isnan(s[f"{col}_before"])]
        base[col] = first[0] if first else math.nan
        level = base[col]
        for s in slots:
            if not math.isnan(s[f"{col}_after"]):
                level = s[f"{col}_after"]
            s[col] = level
    return slots, base


#: a change between steps gets its own slot from this size (bytes) and share of the range
_GAP_BYTES = 64 * 1024
_GAP_SHARE = 0.05


def _moved_between(previous: Dict[str, Any], nxt: Dict[str, Any], slots: List[Dict[str, Any]]) -> bool:
    """Whether RSS, the heap or the DMA total changed between two steps (MemFree is
    the whole system's: it moves between any two readings)."""
    for col, _, _, _ in _LIFE_PANELS:
        if col == "mem_free_kib":
            continue
        scale = 1024.0 if col.endswith("_kib") else 1.0
        gap = abs(nxt[f"{col}_before"] - previous[f"{col}_after"]) * scale
        if math.isnan(gap):
            continue
        values = [v * scale for s in slots for v in (s[f"{col}_before"], s[f"{col}_after"])
                  if not math.isnan(v)]
        span = max(values) - min(values) if values else 0.0
        if gap >= _GAP_BYTES and gap >= _GAP_SHARE * span:
            return True
    return False


def lifecycle(result, variant: Optional[str] = None, x: str = "step", ax=None):
    """A context's life at a glance: four panels sharing the x axis (RSS of
    the process, the malloc heap in use, the runtime's DMA total, MemFree),
    each a step line of the reading after every step, drawn as the change
    since the life started (the DMA total as it is).  Shaded bands mark the
    phases (init, query, frames, destroy, and timed steps such as read_file),
    named along the top; the largest changes are written beside the line.  A
    change while no step ran (the harness's malloc_trim before the first
    measured frame, say) gets a hatched slot of its own, so it is not drawn
    as the next step's.

    ``x="step"``: one slot per step, named along the bottom (readable when
    init takes a hundred times as long as a run); ``x="time"``: milliseconds
    since the first step.  Record the run with ``rknnlab.run(...,
    sample_calls=True)`` (rknnlab.lifecycle).  ``ax``: four axes of your
    own, top to bottom.  MemFree is the whole system's, and the kernel
    updates it lazily (per-CPU counters are folded in about once a second):
    short steps often show no change there."""
    if x not in ("step", "time"):
        raise ValueError(f"x={x!r}: expected 'step' or 'time'")
    _, plt = _plt(ax)
    from .lifecycle import _pick_variant
    name = _pick_variant(result, variant)
    slots, base = _life_slots(result, name)
    if ax is None:
        fig, axes = plt.subplots(len(_LIFE_PANELS), 1, sharex=True, figsize=(8.0, 6.6),
                                 layout="constrained")
    else:
        axes = list(ax)
        if len(axes) != len(_LIFE_PANELS):
            raise ValueError(f"ax: give {len(_LIFE_PANELS)} axes (one per panel), not {len(axes)}")
        fig = axes[0].figure
    if not slots:
        axes[0].text(0.5, 0.5, L(f"no calls of {name} in this result", f"此结果中没有 {name} 的调用"),
                     transform=axes[0].transAxes, ha="center")
        _title(axes[0], L(f"{name}: a context's life", f"{name}：一个上下文的生命周期"), result.source)
        return fig
    n = len(slots)
    if x == "step":
        edges = np.arange(n + 2, dtype=float)     # slot 0 is the start, slot k+1 the k-th step
        left = edges[1:-1]
        right = edges[2:]
    else:
        # time inside the steps: the gaps between them (the harness reading memory
        # after each step, the variant's own Python) are left out
        widths = np.array([s["end_ms"] - s["start_ms"] for s in slots])
        between = np.array([s["phase"] == "between steps" for s in slots])
        widths[between] = 0.015 * widths[~between].sum()  # a change outside the steps: a sliver
        right = np.cumsum(widths)
        left = np.concatenate([[0.0], right[:-1]])
        span = float(right[-1]) or 1.0
        # the start level holds until the first step ends, each step's level until the next ends
        edges = np.concatenate([[-0.02 * span], right, [right[-1] + 0.02 * span]])
    bands = _life_bands(slots)
    for k, (col, label, div, relative) in enumerate(_LIFE_PANELS):
        a = axes[k]
        values = np.array([base[col]] + [s[col] for s in slots], float)
        values = (values - base[col] if relative else values) / div
        for j, (phase, first, last, _) in enumerate(bands):
            if phase == "between steps":  # no step ran: hatched, not coloured
                a.axvspan(left[first], right[last], facecolor="none", hatch="////",
                          edgecolor="0.75", linewidth=0)
            else:
                a.axvspan(left[first], right[last], color=_phase_colour(phase),
                          alpha=0.13 if phase != "frames" else 0.09, linewidth=0)
        if np.isfinite(values).any():
            a.stairs(values, edges, color="black",
                     linewidth=1.6, baseline=None)
            _annotate_changes(a, values, edges, at_edge=x == "time")
            low, high = float(np.nanmin(values)), float(np.nanmax(values))
            if high - low < _LIFE_MIN_SPAN:  # a few KiB must look small beside MiB
                middle = (high + low) / 2
                a.set_ylim(middle - 0.6 * _LIFE_MIN_SPAN, middle + 0.6 * _LIFE_MIN_SPAN)
            if np.nanmax(values) == np.nanmin(values):
                a.text(0.5, 0.5, L("the same reading after every step", "每个步骤之后的读数都相同"),
                       transform=a.transAxes,
                       ha="center", va="bottom", fontsize=8, color="0.35")
        else:
            a.text(0.5, 0.5, L("no readings", "没有读数"), transform=a.transAxes, ha="center", va="center",
                   color="0.4")
        a.set_ylabel(L(label, _LIFE_LABELS_ZH[col]), fontsize=8)
        a.tick_params(axis="y", labelsize=8)
        a.grid(True, axis="y", alpha=0.3)
        if a.get_autoscaley_on():
            a.margins(y=0.25)
    bottom, top = axes[-1], axes[0]
    if x == "step":
        frame_slots = [s for s in slots if s["phase"] == "frames"]
        first_frame = frame_slots[0]["iteration"] if frame_slots else None
        for before, s in zip([None] + slots[:-1], slots):
            s["frame_start"] = s["phase"] == "frames" and (before is None or before["iteration"] != s["iteration"])
        labels = [L("start", "开始")] + [_slot_label(s, first_frame, crowded=n > _CROWDED) for s in slots]
        bottom.set_xticks(edges[:-1] + 0.5, labels, rotation=90, fontsize=7)
        bottom.set_xlim(edges[0], edges[-1])
        bottom.set_xlabel(L("step of the life (one slot each; the line shows the reading after it)",
                            "生命周期中的步骤（每步一格；折线是该步之后的读数）"))
    else:
        bottom.set_xlabel(L("time inside the steps (ms; the time between steps left out)",
                            "步骤内的时间（ms；不含步骤之间的时间）"))
    centres = [(left[first] + right[last]) / 2 for _, first, last, _ in bands]
    names = [text for *_, text in bands]
    sec = top.secondary_xaxis("top")
    sec.set_xticks(centres, names, rotation=90 if x == "step" else 0, fontsize=7)
    sec.tick_params(length=0)
    if x == "time":  # narrow bands' names would overlap: only those wider than 4% are named
        span = edges[-1] - edges[0]
        for tick, (_, first, last, _) in zip(sec.get_xticklabels(), bands):
            tick.set_visible(right[last] - left[first] > 0.04 * span)
    _title(top, L(f"{name}: memory after each step of a context's life (shaded: phases)",
                  f"{name}：上下文生命周期中每个步骤之后的内存（阴影：阶段）"),
           result.source)
    return fig


def _life_bands(slots: List[Dict[str, Any]]) -> List[Tuple[str, int, int, str]]:
    """(phase, first slot, last slot, its name along the top) per run of one phase."""
    bands: List[Tuple[str, int, int, str]] = []
    for i, s in enumerate(slots):
        if bands and bands[-1][0] == s["phase"]:
            bands[-1] = (s["phase"], bands[-1][1], i, "")
        else:
            bands.append((s["phase"], i, i, ""))
    named = []
    for phase, first, last, _ in bands:
        text = phase
        if phase == "frames":
            frames = len({slots[i]["iteration"] for i in range(first, last + 1)})
            text = L(f"frames ({frames})", f"帧（{frames}）")
        elif phase == "between steps":
            text = slots[first]["step"]
        elif slots[first]["calls"] > 1:
            text = f"{phase} ×{slots[first]['calls']}"
        named.append((phase, first, last, text))
    return named


def _slot_label(slot: Dict[str, Any], first_frame: Any, crowded: bool) -> str:
    """A slot's name along the bottom: the step (with its count when merged).  When
    the slots are crowded, only the first frame's steps are named, and the first
    step of every other frame says which frame it starts."""
    label = slot["step"] + (f" ×{slot['calls']}" if slot["calls"] > 1 else "")
    if not crowded or slot["phase"] != "frames" or slot["iteration"] == first_frame:
        return label
    return L(f"frame {int(slot['iteration'])}", f"帧 {int(slot['iteration'])}") if slot.get("frame_start") else ""


def _annotate_changes(a, values: np.ndarray, edges: np.ndarray, at_edge: bool, most: int = 4) -> None:
    """Write the largest steps of a panel's line beside it: at most ``most``, each
    at least 5% of the panel's span (never under _LIFE_MIN_SPAN), in MiB, or KiB
    under 0.1 MiB.  ``at_edge``: at the change itself (time axis), else in the
    middle of the step's slot."""
    d = np.diff(values)
    finite = np.isfinite(d)
    if not finite.any():
        return
    span = max(float(np.nanmax(values) - np.nanmin(values)), _LIFE_MIN_SPAN)
    # the largest first; one too close to a larger one along x is left out (labels would overlap)
    room = 0.06 * (edges[-1] - edges[0])
    placed: List[Tuple[float, float]] = []
    for i in np.argsort(-np.abs(np.where(finite, d, 0.0)), kind="stable"):
        if len(placed) == most or not finite[i] or abs(d[i]) < 0.05 * span:
            break
        xpos = edges[i + 1] if at_edge else (edges[i + 1] + edges[i + 2]) / 2
        if any(abs(xpos - px) < room and abs(values[i + 1] - py) < 0.2 * span for px, py in placed):
            continue
        placed.append((xpos, values[i + 1]))
        size = abs(d[i])
        text = (f"{d[i] * 1024:+.0f} KiB" if size < 0.1 else
                f"{d[i]:+.2f} MiB" if size < 1 else f"{d[i]:+.1f} MiB")
        a.annotate(text, (xpos, values[i + 1]), textcoords="offset points",
                   xytext=(0, 4 if d[i] > 0 else -4), va="bottom" if d[i] > 0 else "top",
                   ha="left" if at_edge else "center", fontsize=7,
                   bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                         "alpha": 0.8})


#: contexts_memory's two measures: (column, legend words, line style, bytes per unit of
#: the column, the panel's y label)
_CONTEXT_MEASURES = (
    ("dma_total", "DMA total", "-", 2.0 ** 20,
     "runtime DMA total (MiB): absolute,\nsum of total_dma_allocated_size"),
    ("rss_kib", "RSS change", "--", 1024.0,
     "process RSS change (MiB)\nsince before the first context"),
)
#: column -> (legend words, the panel's y label) in Chinese (the zh edition)
_CONTEXT_MEASURES_ZH = {
    "dma_total": ("DMA 总量", "运行时 DMA 总量（MiB）：绝对值，\ntotal_dma_allocated_size 之和"),
    "rss_kib": ("RSS 变化", "进程 RSS 的变化（MiB）\n相对创建第一个上下文之前"),
}


def contexts_memory(df, source: str, ax=None):
    """The memory of N contexts made by rknn_init each or by rknn_dup_context
    (a lifecycle.contexts_memory table) against N, one colour per way, each
    line labelled with what one more context adds (the mean step).

    Two panels sharing both axes, because the two measures are not the same
    kind: left, the runtime's DMA total over the live contexts (an absolute
    amount); right, the change in the process's RSS since before the first
    context.  ``ax``: None (a new figure), a pair of axes for the two
    panels, or one axes, which then holds both (solid: DMA total, dashed:
    RSS change) under a y label naming both."""
    _, plt = _plt(ax)
    if ax is None:
        fig, axes = plt.subplots(1, 2, sharex=True, sharey=True, figsize=(10.0, 4.4),
                                 layout="constrained")
        panels = list(zip(axes, _CONTEXT_MEASURES))
    elif isinstance(ax, (list, tuple)) or hasattr(ax, "__len__"):
        if len(ax) != 2:
            raise ValueError(f"ax: one axes or a pair of them, not {len(ax)}")
        fig = ax[0].figure
        panels = list(zip(ax, _CONTEXT_MEASURES))
    else:
        fig = ax.figure
        panels = [(ax, m) for m in _CONTEXT_MEASURES]
    live = df[df["alive"] > 0]
    ways = list(dict.fromkeys(live["how"]))
    for panel, (column, what, style, div, _) in panels:
        what = L(what, _CONTEXT_MEASURES_ZH[column][0])
        for i, how in enumerate(ways):
            d = live[live["how"] == how].sort_values("n")
            n = d["n"].to_numpy(float)
            y = d[column].to_numpy(float) / div
            per = float(np.mean(np.diff(y))) if len(y) > 1 else math.nan
            panel.plot(n, y, linestyle=style, marker=MARKERS[i], color=f"C{i}", linewidth=1.6,
                       label=L(f"{how}: {what} (+{per:.2f} MiB per context)",
                               f"{how}：{what}（每个上下文 +{per:.2f} MiB）") if per == per
                       else L(f"{how}: {what}", f"{how}：{what}"))
    axes_used = list(dict.fromkeys(p for p, _ in panels))
    for k, panel in enumerate(axes_used):
        if ways:
            panel.set_xticks(sorted(set(live["n"].astype(int))))
            panel.legend(fontsize=8, loc="upper left")
        else:
            panel.text(0.5, 0.5, L("no live contexts in this table", "此表中没有存活的上下文"),
                       transform=panel.transAxes,
                       ha="center")
        panel.set_xlabel(L("contexts alive (N)", "存活的上下文数（N）"))
        panel.set_ylim(bottom=0)
        panel.grid(True, alpha=0.3)
    if len(axes_used) == 1:
        axes_used[0].set_ylabel(L("memory (MiB): DMA total, absolute (solid);\n"
                                  "RSS change since before the first context (dashed)",
                                  "内存（MiB）：DMA 总量，绝对值（实线）；\n"
                                  "RSS 相对创建第一个上下文之前的变化（虚线）"))
        _title(axes_used[0], L("N contexts made by rknn_init each vs one rknn_init + rknn_dup_context",
                               "N 个上下文：各自 rknn_init，与一次 rknn_init + rknn_dup_context 对比"),
               source)
    else:
        for panel, (column, _, _, _, label) in panels:
            panel.set_ylabel(L(label, _CONTEXT_MEASURES_ZH[column][1]))
            panel.yaxis.set_tick_params(labelleft=True)
        _title(axes_used[0], L("Runtime DMA total of N contexts:\nrknn_init each vs one rknn_init + "
                               "rknn_dup_context",
                               "N 个上下文的运行时 DMA 总量：\n各自 rknn_init，与一次 rknn_init + "
                               "rknn_dup_context 对比"), source)
        axes_used[1].set_title(L("Process RSS, the same contexts:\nchange since before the first",
                                 "同样这些上下文的进程 RSS：\n相对创建第一个上下文之前的变化"),
                               fontsize=10, loc="left")
    return fig


# --------------------------------------------------------------------------- chapter 3 (rknnlab.profile)
#: the phases of a frame in the order they happen (rknnlab.profile.PHASES)
_FRAME_PHASES = ("inputs_set", "run", "outputs_get", "postprocess", "outputs_release")
_PHASE_HATCHES = ("", "//", "..", "xx", "\\\\")


def _source_of(df, fallback: Optional[str] = None) -> str:
    return str(getattr(df, "attrs", {}).get("source") or fallback or L("source not recorded", "未记录来源"))


def _short_source(source: str) -> str:
    """"model_zoo#167" from "RK3588 board, rknn_model_zoo#167 (...)": the issue a
    published figure comes from, as short as a tick label needs it."""
    import re
    found = re.search(r"([\w.-]+)#(\d+)", source)
    return f"{found.group(1).replace('rknn_', '')}#{found.group(2)}" if found else L("published", "公开数据")


def _bar_label(model: str, size: str, extra: List[str]) -> str:
    # short lines: neighbouring tick labels must not touch at JupyterLab's width
    lines = L("(model\nnot named)", "（模型\n未注明）").split("\n") if model == "not named" else [str(model)]
    side = str(size).split("x")[0]
    if str(model).endswith(f"_{side}"):          # yolov5s_320 at 320x320: the size line says it
        lines = [str(model)[:-len(side) - 1]]
    if size != "not named":
        lines.append(str(size))
    return "\n".join(lines + extra)


def _phase_bars(df, published) -> List[Tuple[str, Any, bool]]:
    """(tick label, rows, published?) per bar: each measured model and size, the published
    split of the same model and size right after it, the other published splits at the end."""
    bars: List[Tuple[str, Any, bool]] = []
    pub_splits: List[Tuple[Tuple[str, str], Any]] = []
    if published is not None:
        keys = ["source", "model", "input"] if "source" in published else ["model", "input"]
        for _, rows in published.groupby(keys, sort=False):
            pub_splits.append(((rows["model"].iloc[0], rows["input"].iloc[0]), rows))
    used = set()
    for model, size, wf in dict.fromkeys(zip(df["model"], df["input"], df["want_float"])):
        rows = df[(df["model"] == model) & (df["input"] == size) & (df["want_float"] == wf)]
        bars.append((_bar_label(model, size, [] if wf is None else [f"want_float={int(wf)}"]), rows, False))
        for k, (key, pub) in enumerate(pub_splits):
            if key == (model, size) and k not in used:
                used.add(k)
                bars.append((_pub_label(pub), pub, True))
    bars += [(_pub_label(pub), pub, True) for k, (_, pub) in enumerate(pub_splits) if k not in used]
    return bars


def _pub_label(pub) -> str:
    source = str(pub["source"].iloc[0]) if "source" in pub else ""
    return _bar_label(pub["model"].iloc[0], pub["input"].iloc[0], [L("published", "公开数据"), _short_source(source)])


def frame_phases(df, published=None, ax=None):
    """Stacked bars: the median time of each phase of a frame (inputs_set, run,
    outputs_get, postprocess, outputs_release), one bar per model and input size, from
    rknnlab.profile.phases; the whisker on top spans the frames' total q1..q3.

    ``published``: a table of the same layout (rknnlab.profile.published_phases()),
    drawn with a dashed outline: a split of a model measured here right beside it, the
    others at the end, each labelled "published" with the issue it comes from, and
    the title says "published, not measured here" with the table's source.  Steps a
    published split timed before inputs_set (the RGA's, say) are stacked under it in
    grey, so a board's published split and this machine's measurement never mix."""
    import textwrap
    fig, ax = _new(ax, figsize=(9.5, 5.0))
    bars = _phase_bars(df, published)
    extra = [] if published is None else [p for p in dict.fromkeys(published["phase"]) if p not in _FRAME_PHASES]
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    steps = [(p, f"0.{5 + 2 * k}", "..") for k, p in enumerate(extra)] + \
        [(p, f"C{j}", _PHASE_HATCHES[j]) for j, p in enumerate(_FRAME_PHASES)]
    for phase, colour, hatch in steps:
        h = np.array([float(r.loc[r["phase"] == phase, "median_ms"].sum()) for _, r, _ in bars])
        ax.bar(x, h, bottom=bottom, color=colour, hatch=hatch, edgecolor="white",
               linewidth=0.5, label=phase if phase in _FRAME_PHASES else L(f"{phase} (published only)",
                                                                          f"{phase}（仅公开数据）"),
               gid=f"phase:{phase}")
        bottom += h
    tops = bottom.copy()
    for xi, (_, rows, is_pub) in zip(x, bars):
        total = rows[rows["phase"] == "total"]
        if len(total) and not is_pub:
            t = total.iloc[0]
            ax.errorbar([xi], [t["median_ms"]], yerr=[[t["median_ms"] - t["q1_ms"]], [t["q3_ms"] - t["median_ms"]]],
                        color="0.2", capsize=3, linewidth=1)
            tops[xi] = max(tops[xi], float(t["q3_ms"]))
        if is_pub:  # outline the published bar so it reads as another source
            ax.bar([xi], [bottom[xi]], fill=False, edgecolor="0.3", linestyle="--", linewidth=1.0)
    for xi, total, top in zip(x, bottom, tops):  # above the whisker, not across it
        ax.annotate(f"{total:.1f} ms", (xi, top), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8, gid="total")
    if len(tops) and tops.max() > 0:
        ax.set_ylim(0, tops.max() * 1.15)
    ax.set_xticks(x, [b[0] for b in bars], fontsize=8)
    ax.set_ylabel(L("median time per frame (ms)", "每帧时间的中位数（ms）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    n = int(df["frames"].max()) if "frames" in df and len(df) else 0
    source = _source_of(df)
    if published is not None:
        note = _source_of(published, L("published figures", "公开数据"))
        if "not measured here" not in note:
            note = L(f"published, not measured here: {note}", f"公开数据，非本机测量：{note}")
        source += "\n" + textwrap.fill(L(f"dashed outline: {note}; no post-process timed",
                                         f"虚线框：{note}；后处理未计时"), 110)
    _title(ax, L(f"Where a frame's time goes, by phase (median of {n} frames; whisker: total q1-q3)",
                 f"一帧的时间花在哪里：按阶段（{n} 帧的中位数；须线：总时间的 q1-q3）"), source)
    return fig


_BOUND_COLOURS = {"DDR": "C3", "compute": "C0", "no cycles": "C7"}
#: the same verdict as a hatch, for print and for readers who do not tell the colours apart
_BOUND_HATCHES = {"DDR": "//", "compute": "", "no cycles": ".."}
#: the verdicts' words in Chinese (the zh edition): (legend, scatter label)
_BOUND_ZH = {"DDR": ("DDR", "DDR 受限"), "compute": ("计算", "计算受限"), "no cycles": ("无周期", "无周期")}


def _bounds(df) -> List[str]:
    ddr, npu = df["cycles_ddr"].to_numpy(float), df["cycles_npu"].to_numpy(float)
    return ["no cycles" if d == 0 and n == 0 else ("DDR" if d > n else "compute") for d, n in zip(ddr, npu)]


def layer_profile(df, top: int = 10, title: Optional[str] = None, ax=None):
    """Two panels of a per-layer profile (rknnlab.profile.parse_perf_detail, or
    rknnlab.profile.layer_table): left, the ``top`` slowest layers as horizontal bars
    (time_us; NPU time from the cycles for a layer_table), coloured by what bounds them;
    right, each NPU layer's DDR cycles against its NPU cycles, log-log, with the diagonal
    where both are equal (above it: the layer waits for memory).  Layers with 0 cycles of
    both (Add, Concat, MaxPool... in the compiler's estimate) cannot sit on a log axis:
    they are counted in a note, with the bytes they read."""
    _, plt = _plt(ax)
    if ax is None:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.6), layout="constrained",
                                          gridspec_kw={"width_ratios": [1.1, 1.0]})
    else:
        if len(ax) != 2:
            raise ValueError(f"ax: a pair of axes, not {len(ax)}")
        left, right = ax
        fig = left.figure
    npu = df[df["target"] == "NPU"].copy()
    npu["bound"] = _bounds(npu)
    time_col, time_label = (("time_us", L("time (us)", "时间（us）")) if "time_us" in npu
                            else ("npu_us", L("NPU time from the cycles (us)", "由周期数推算的 NPU 时间（us）")))
    slow = npu.sort_values(time_col, ascending=False).head(top)
    id_col = "id" if "time_us" in npu else "runtime_id"
    labels = [f"{i} {op}" for i, op in zip(slow[id_col], slow["op"])]
    bars = left.barh(labels, slow[time_col], color=[_BOUND_COLOURS[b] for b in slow["bound"]], edgecolor="white")
    for bar, bound in zip(bars, slow["bound"]):
        bar.set_hatch(_BOUND_HATCHES[bound])
    left.invert_yaxis()
    left.set_xlabel(time_label)
    total = npu[time_col].sum()
    left.set_title(L(f"The {len(slow)} slowest layers ({slow[time_col].sum() / total:.0%} of the NPU layers' time)",
                     f"最慢的 {len(slow)} 层（占 NPU 层总时间的 {slow[time_col].sum() / total:.0%}）")
                   if total > 0 else L(f"The {len(slow)} slowest layers", f"最慢的 {len(slow)} 层"),
                   fontsize=9, loc="left")
    from matplotlib.patches import Patch
    left.legend(handles=[Patch(facecolor=c, hatch=_BOUND_HATCHES[b], edgecolor="white", label=L(b, _BOUND_ZH[b][0]))
                         for b, c in _BOUND_COLOURS.items()], fontsize=8,
                loc="lower right", title=L("bound (cycles)", "受限于（按周期）"), title_fontsize=8)
    left.grid(True, axis="x", alpha=0.3)
    drawn = npu[(npu["cycles_ddr"] > 0) & (npu["cycles_npu"] > 0)]
    for bound, marker in (("DDR", "^"), ("compute", "o")):
        d = drawn[drawn["bound"] == bound]
        right.scatter(d["cycles_npu"], d["cycles_ddr"], s=18, marker=marker, color=_BOUND_COLOURS[bound],
                      label=L(f"{bound}-bound ({len(d)})", f"{_BOUND_ZH[bound][1]}（{len(d)}）"), alpha=0.8)
    if len(drawn):
        lo = float(min(drawn["cycles_npu"].min(), drawn["cycles_ddr"].min())) / 1.5
        hi = float(max(drawn["cycles_npu"].max(), drawn["cycles_ddr"].max())) * 1.5
        right.plot([lo, hi], [lo, hi], color="0.4", linestyle="--", linewidth=1, label="DDR = NPU")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlim(lo, hi)
        right.set_ylim(lo, hi)
    zero = npu[(npu["cycles_ddr"] == 0) | (npu["cycles_npu"] == 0)]
    if len(zero):
        read = zero["rw_kb"].sum() * 1024 if "rw_kb" in zero else zero["read_bytes"].sum()
        ops = ", ".join(sorted(set(zero["op"])))
        right.text(0.02, 0.98, L(f"not drawn: {len(zero)} layers with 0 DDR or 0 NPU cycles\n({ops}),\n"
                                 f"reading {read / 2**20:.1f} MiB",
                                 f"未绘出：{len(zero)} 个 DDR 周期为 0 或 NPU 周期为 0 的层\n（{ops}），\n"
                                 f"共读取 {read / 2**20:.1f} MiB"), transform=right.transAxes, va="top", fontsize=8,
                   color="0.25")
    right.set_xlabel(L("NPU cycles (compute)", "NPU 周期（计算）"))
    right.set_ylabel(L("DDR cycles (moving data)", "DDR 周期（搬运数据）"))
    right.legend(fontsize=8, loc="lower right")
    right.grid(True, which="both", alpha=0.2)
    right.set_title(L("DDR vs NPU cycles per layer (above the line: waits for memory)",
                      "每层的 DDR 周期与 NPU 周期（对角线上方：等待内存）"), fontsize=9, loc="left")
    fig.suptitle(f"{title or L('Per-layer profile', '逐层性能分析')}\n{_source_of(df)}", fontsize=10, x=0.01,
                 ha="left")
    return fig


def _family(model: str) -> str:
    import re
    return re.sub(r"_\d+$", "", str(model))


#: where each family's size labels sit from their points (points, alignment): the first family
#: below and right, the second above and left, so labels of two families at one size do not meet
_LABEL_PLACES = (((5, -5), "left", "top"), ((-5, 5), "right", "bottom"), ((-5, -5), "right", "top"))


def traffic(df, ax=None):
    """Bytes one frame moves through DDR against the input's pixels, one line per
    model family (yolov5s, yolov5s_320, yolov5s_480 are one family), from
    rknnlab.profile.traffic: all bytes read (solid: the RW column), of which weights
    and biases (dotted, the same at every size), and the bytes written (dashed: an
    estimate, RW holds no writes).  The legend sits under the axes and every size label
    inside them."""
    fig, ax = _new(ax, figsize=(8.5, 5.2))
    table = df.reset_index() if "model" not in df.columns else df
    top, right = 0.0, 0.0
    for i, (family, rows) in enumerate(table.groupby(table["model"].map(_family), sort=False)):
        rows = rows.sort_values("pixels")
        px = rows["pixels"].to_numpy(float) / 1e3
        colour = f"C{i}"
        ax.plot(px, rows["read_bytes"] / 2**20, marker=MARKERS[i % len(MARKERS)], color=colour,
                label=L(f"{family}: read (RW)", f"{family}：读取（RW）"))
        ax.plot(px, rows["activation_write_bytes"] / 2**20, marker=MARKERS[i % len(MARKERS)], color=colour,
                linestyle="--", label=L(f"{family}: written (estimated)", f"{family}：写入（估算）"))
        ax.plot(px, rows["weights_and_bias_bytes"] / 2**20, color=colour, linestyle=":",
                label=L(f"{family}: of the reads, weights and biases", f"{family}：读取中的权重和偏置"))
        offset, ha, va = _LABEL_PLACES[i % len(_LABEL_PLACES)]
        for x, y, size in zip(px, rows["read_bytes"] / 2**20, rows["input"]):
            ax.annotate(size, (x, y), textcoords="offset points", xytext=offset, ha=ha, va=va, fontsize=8,
                        color=colour, gid="size")
        top = max(top, float(rows["read_bytes"].max()) / 2**20)
        right = max(right, float(px.max()))
    if right:  # room for the labels left of the smallest size and right of the largest
        ax.set_xlim(-0.05 * right, right * 1.08)
    ax.set_ylim(0, top * 1.12 if top else None)
    ax.set_xlabel(L("input pixels (thousands; width x height)", "输入像素数（千；宽 x 高）"))
    ax.set_ylabel(L("MiB per frame", "每帧 MiB"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    _title(ax, L("Bytes per frame vs input size", "每帧字节数与输入尺寸"), _source_of(df))
    return fig


def multicore(df, ax=None):
    """Grouped bars: each model's speedup over one NPU core under each core mask, from
    rknnlab.profile.multicore, with its 95% interval; the line at 1 is no change.  Under
    each model: the share of its compiler cycles in ops that split over cores."""
    fig, ax = _new(ax, figsize=(9.0, 4.6))
    names = list(dict.fromkeys(df["model"]))
    masks = list(dict.fromkeys(df["mask"]))
    width = 0.8 / max(len(masks), 1)
    x = np.arange(len(names))
    for j, mask in enumerate(masks):
        rows = df[df["mask"] == mask].set_index("model").reindex(names)
        s = rows["speedup"].to_numpy(float)
        err = np.nan_to_num(np.vstack([s - rows["speedup_low"].to_numpy(float),
                                       rows["speedup_high"].to_numpy(float) - s]))  # reference: none
        ax.bar(x + (j - (len(masks) - 1) / 2) * width, s, width=width, yerr=err, capsize=2,
               color=f"C{j}", hatch=_PHASE_HATCHES[j % len(_PHASE_HATCHES)], edgecolor="white",
               label=mask.replace("RKNN_NPU_", ""))
    ax.axhline(1.0, color="0.3", linewidth=1, linestyle="--")
    shares = df.drop_duplicates("model").set_index("model")["split_share"].reindex(names)
    ax.set_xticks(x, [L(f"{n}\n{s:.0%} of cycles split", f"{n}\n拆分层占周期的 {s:.0%}") for n, s in zip(names, shares)],
                  fontsize=8)
    ax.set_ylabel(L("speedup over RKNN_NPU_CORE_0 (x)", "相对 RKNN_NPU_CORE_0 的加速比（x）"))
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title=L("core mask", "核心掩码"),
              title_fontsize=8)
    _title(ax, L("Speedup of rknn_run over one NPU core, per model (95% interval)",
                 "rknn_run 相对单个 NPU 核的加速比，按模型（95% 置信区间）"), _source_of(df))
    return fig


_HEAP_STEPS = ("after malloc", "after free", "after malloc_trim(0)")
#: the steps' legend words in Chinese (the zh edition; the table keeps the English)
_HEAP_STEPS_ZH = dict(zip(_HEAP_STEPS, ("malloc 之后", "free 之后", "malloc_trim(0) 之后")))


def fragmentation(df, ax=None):
    """Grouped bars from rknnlab.profile.fragmentation: for each pattern, the change in
    the process's RSS since "before" after each step (malloc, free, malloc_trim(0)), in
    MiB.  A bar that stays high after the frees is memory the heap kept."""
    fig, ax = _new(ax, figsize=(8.5, 4.4))
    patterns = list(dict.fromkeys(df["pattern"]))
    width = 0.8 / len(_HEAP_STEPS)
    x = np.arange(len(patterns))
    for j, step in enumerate(_HEAP_STEPS):
        rows = df[df["step"] == step].set_index("pattern").reindex(patterns)
        h = rows["rss_change_bytes"].to_numpy(float) / 2**20
        ax.bar(x + (j - 1) * width, h, width=width, color=f"C{j}", hatch=_PHASE_HATCHES[j], edgecolor="white",
               label=L(step, _HEAP_STEPS_ZH[step]), gid=f"step:{step}")
        for xi, v in zip(x + (j - 1) * width, h):
            ax.annotate(f"{v:.1f}", (xi, v), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
    ax.set_xticks(x, patterns)
    ax.set_ylabel(L("RSS change since before (MiB)", "RSS 相对开始前的变化（MiB）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _title(ax, L("What free() gives back: RSS after malloc, free and malloc_trim(0)",
                 "free() 还回了什么：malloc、free 和 malloc_trim(0) 之后的 RSS"), _source_of(df))
    return fig


def cpu_costs(df, ax=None):
    """Horizontal bars of rknnlab.profile.cpu_costs (or any table with what, median_us,
    q1_us, q3_us, kind): measured rows solid with their q1..q3 whisker, MODELED rows
    hatched and labelled "(MODELED)", so a model never passes for a measurement."""
    fig, ax = _new(ax, figsize=(9.0, 0.9 + 0.45 * len(df)))
    modeled = (df["kind"] == "MODELED").to_numpy()
    labels = [L(f"{w} (MODELED)", f"{w}（MODELED）") if m else str(w) for w, m in zip(df["what"], modeled)]
    med = df["median_us"].to_numpy(float)
    low = np.nan_to_num(med - df["q1_us"].to_numpy(float))
    high = np.nan_to_num(df["q3_us"].to_numpy(float) - med)
    y = np.arange(len(df))
    ax.barh(y, med, xerr=np.vstack([low, high]), capsize=2, color=["0.75" if m else "C0" for m in modeled],
            hatch=None, edgecolor="0.3", linewidth=0.5)
    for yi, m in zip(y, modeled):
        if m:
            ax.patches[yi].set_hatch("//")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(L("time per frame (us; whisker: q1-q3 of the repeats)", "每帧时间（us；须线：多次重复的 q1-q3）"))
    ax.grid(True, axis="x", alpha=0.3)
    _title(ax, L("CPU-side costs of one frame (grey, hatched: MODELED, not measured)",
                 "一帧的 CPU 端开销（灰色带斜线：MODELED，推算，非实测）"), _source_of(df))
    return fig


# --------------------------------------------------------------------------- chapter 5 (rknnlab.allocation)
def _mib(values) -> np.ndarray:
    return np.asarray(values, float) / 2 ** 20


def _wrap(text: str, width: int = 28) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(str(text), width))


def _alloc_title(ax, what: str, df_or_source: Any, width: int = 95) -> None:
    """The title and the table's source, wrapped to the figure's width."""
    source = df_or_source if isinstance(df_or_source, str) else _source_of(df_or_source)
    _title(ax, what, _wrap(source, width))


def _two_panels(ax, figsize):
    """(fig, left, right): ``ax`` if it is a pair of axes, else a new figure of two panels
    side by side sharing their y axis (one row per bar)."""
    _, plt = _plt(ax)
    if ax is None:
        fig, (left, right) = plt.subplots(1, 2, figsize=figsize, layout="constrained", sharey=True)
        return fig, left, right
    if len(ax) != 2:
        raise ValueError(f"ax: a pair of axes, not {len(ax)}")
    left, right = ax
    return left.figure, left, right


def alloc_loops(df, ax=None):
    """Two panels of rknnlab.allocation.prealloc_vs_per_frame, one bar per strategy: left,
    the median wall time per frame with its q1..q3 whisker; right, the DMA memory
    allocated and freed again inside one frame, labelled with the runtime calls per
    frame.  ``ax``: a pair of axes, or None."""
    fig, left, right = _two_panels(ax, (10.0, 3.8))
    y = np.arange(len(df))
    labels = [_wrap(s) for s in df["strategy"]]
    med = df["median_us"].to_numpy(float) / 1e3
    err = np.vstack([med - df["q1_us"].to_numpy(float) / 1e3, df["q3_us"].to_numpy(float) / 1e3 - med])
    left.barh(y, med, xerr=err, capsize=3, color=[f"C{i}" for i in range(len(df))],
              hatch=None, edgecolor="white")
    for i, patch in enumerate(left.patches):
        patch.set_hatch(_PHASE_HATCHES[i % len(_PHASE_HATCHES)])
    left.set_yticks(y, labels, fontsize=8)
    left.invert_yaxis()
    left.set_xlabel(L("wall time per frame (ms; whisker: q1-q3)", "每帧墙钟时间（ms；须线：q1-q3）"))
    left.grid(True, axis="x", alpha=0.3)
    rise = df["dma_rise_bytes"].to_numpy(float) / 1024
    right.barh(y, rise, color=[f"C{i}" for i in range(len(df))], edgecolor="white")
    for yi, r, calls in zip(y, rise, df["calls_per_frame"]):
        right.annotate(L(f"{r:,.0f} KiB, {calls:g} calls per frame", f"{r:,.0f} KiB，每帧 {calls:g} 次调用"),
                       (r, yi), textcoords="offset points",
                       xytext=(4, 0), va="center", fontsize=8)
    right.set_xlabel(L("DMA memory allocated and freed inside one frame (KiB)", "一帧之内分配又释放的 DMA 内存（KiB）"))
    right.set_xlim(0, max(float(rise.max()) * 1.9, 1.0))
    right.grid(True, axis="x", alpha=0.3)
    model = df.attrs.get("model", "")
    fig.suptitle(L(f"{model}: three ways to run the same frames", _zs(f"{model}：运行相同帧的三种方式"))
                 + f"\n{_wrap(_source_of(df), 120)}", fontsize=10, x=0.01, ha="left")
    return fig


def alloc_sharing(df, ax=None):
    """Stacked bars of rknnlab.allocation.shared_internal: one bar per setup (separate,
    INTERNAL_ALLOC_OUTSIDE, MEM_ALLOC_OUTSIDE), each model's context one segment (the
    shared internal buffer sits in the first model's), the total on top and the
    saving against "separate" under it."""
    fig, ax = _new(ax, figsize=(8.0, 4.6))
    setups = (("separate_bytes", L("separate\n(plain rknn_init)", "各自独立\n（普通 rknn_init）")),
              ("shared_internal_bytes", L("one internal buffer\n(INTERNAL_ALLOC_OUTSIDE)",
                                          "共用一块内部内存\n（INTERNAL_ALLOC_OUTSIDE）")),
              ("all_outside_bytes", L("one internal buffer\n(MEM_ALLOC_OUTSIDE, demo)",
                                      "共用一块内部内存\n（MEM_ALLOC_OUTSIDE，演示）")))
    models = df[df["model"] != "total"]
    totals = df[df["model"] == "total"]
    x = np.arange(len(setups))
    bottom = np.zeros(len(setups))
    for i, (_, row) in enumerate(models.iterrows()):
        h = _mib([row[c] for c, _ in setups])
        ax.bar(x, h, bottom=bottom, color=f"C{i}", hatch=_PHASE_HATCHES[i % len(_PHASE_HATCHES)],
               edgecolor="white", label=row["model"])
        bottom += h
    total = _mib([totals[c].iloc[0] for c, _ in setups]) if len(totals) else bottom
    for xi, t in zip(x, total):
        saved = total[0] - t
        text = f"{t:.1f} MiB" + (f"\n(-{saved:.1f} MiB)" if xi and saved > 0.05 else "")
        ax.annotate(text, (xi, max(t, bottom[xi])), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize=8)
    ax.set_ylim(0, max(float(bottom.max()), float(total.max())) * 1.22)
    ax.set_xticks(x, [label for _, label in setups], fontsize=8)
    ax.set_ylabel(L("DMA memory of the contexts (MiB)", "各上下文的 DMA 内存（MiB）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title=L("context of", "上下文所属模型"),
              title_fontsize=8)
    _alloc_title(ax, L("Models run one after another: separate memory vs one shared internal buffer",
                       "模型依次运行：各自独立的内存与共用一块内部内存"), df, 80)
    return fig


def alloc_pipelines(df, ax=None):
    """rknnlab.allocation.pipelines_memory: the DMA memory of N pipelines against N, one
    line per way of making them; ways whose pipelines may not run at the same time
    (one internal mem) are drawn dashed and say so in the legend."""
    fig, ax = _new(ax, figsize=(8.5, 4.4))
    for i, how in enumerate(dict.fromkeys(df["how"])):
        rows = df[df["how"] == how].sort_values("n")
        at_once = bool(rows["run_at_once"].iloc[0])
        ax.plot(rows["n"], _mib(rows["dma_bytes"]), marker=MARKERS[i % len(MARKERS)], color=f"C{i}",
                linestyle="-" if at_once else "--",
                label=how + ("" if at_once else L(" (one after another only)", "（只能依次运行）")))
    ax.set_xticks(sorted(set(int(n) for n in df["n"])))
    ax.set_xlabel(L("pipelines (contexts of the same model)", "流水线数（同一模型的上下文）"))
    ax.set_ylabel(L("DMA memory (MiB)", "DMA 内存（MiB）"))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    model = df.attrs.get("model", "")
    _alloc_title(ax, L(f"{model}: memory of N pipelines, four ways", _zs(f"{model}：N 条流水线的内存，四种方式")), df, 90)
    return fig


def alloc_shapes(df, ax=None):
    """rknnlab.allocation.shape_sweep, one group per input shape: left, the io bytes the
    shape needs (input, output) beside the mems allocated once for the largest shape;
    right, the runtime's run time per shape (RKNN_QUERY_PERF_RUN)."""
    _, plt = _plt(ax)
    if ax is None:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.4), layout="constrained")
    else:
        left, right = ax
        fig = left.figure
    x = np.arange(len(df))
    width = 0.27
    for j, (col, label) in enumerate((("input_bytes", L("input (current attr)", "输入（当前属性）")),
                                      ("output_bytes", L("output (current attr)", "输出（当前属性）")),
                                      ("io_mem_bytes", L("io mems, allocated once", "输入/输出 mem，只分配一次")))):
        left.bar(x + (j - 1) * width, df[col].to_numpy(float) / 1024, width=width, color=f"C{j}",
                 hatch=_PHASE_HATCHES[j], edgecolor="white", label=label)
    left.set_xticks(x, list(df["shape"]), fontsize=8)
    left.set_ylabel("KiB")
    left.grid(True, axis="y", alpha=0.3)
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3, frameon=False)
    right.bar(x, df["npu_us"].to_numpy(float) / 1e3, color="C3", edgecolor="white")
    right.set_xticks(x, list(df["shape"]), fontsize=8)
    right.set_ylabel(L("ms per run (RKNN_QUERY_PERF_RUN)", "每次运行的 ms（RKNN_QUERY_PERF_RUN）"))
    right.grid(True, axis="y", alpha=0.3)
    model = df.attrs.get("model", "")
    fig.suptitle(L(f"{model}: each input shape", _zs(f"{model}：每种输入形状")) + f"\n{_wrap(_source_of(df), 120)}",
                 fontsize=10, x=0.01, ha="left")
    return fig


def alloc_sram(df, ax=None):
    """rknnlab.allocation.sram_fit, one bar per row of the SRAM table (a tensor at a layer),
    in layer order: the bytes in SRAM (SramHit, solid) and the rest in DDR (hatched);
    tensors outside the internal memory (the log's "\\") are left out.  The title gives
    the SRAM size and the read + write traffic saved per frame."""
    fig, ax = _new(ax, figsize=(9.5, 4.2))
    rows = df[df["sram_hit_bytes"].notna()]
    x = np.arange(len(rows))
    hit = rows["sram_hit_bytes"].to_numpy(float) / 1024
    rest = rows["size_bytes"].to_numpy(float) / 1024 - hit
    ax.bar(x, hit, color="C2", edgecolor="none", label=L("in SRAM (SramHit)", "在 SRAM 中（SramHit）"))
    ax.bar(x, rest, bottom=hit, color="0.8", hatch="//", edgecolor="0.5", linewidth=0.3,
           label=L("in DDR", "在 DDR 中"))
    step = max(1, len(rows) // 16)
    ax.set_xticks(x[::step], [str(i) for i in rows["id"].to_numpy()[::step]], fontsize=8)
    ax.set_xlabel(L("layer ID (rows of the SRAM table)", "层 ID（SRAM 表的各行）"))
    ax.set_ylabel(L("tensor size (KiB)", "张量大小（KiB）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    sram = df.attrs.get("sram_bytes", 0)
    saved = df.attrs.get("predict_sram_hit_rw_bytes")
    kind = df.attrs.get("kind", "")
    what = L(f"{sram / 1024:,.0f} KiB of SRAM", f"{sram / 1024:,.0f} KiB SRAM") + (
        L(f", {saved / 2 ** 20:.1f} MiB of DDR reads + writes saved per frame",
          f"，每帧节省 {saved / 2 ** 20:.1f} MiB 的 DDR 读写") if saved else "")
    _alloc_title(ax, L(f"Where each tensor lives: {what}", f"每个张量放在哪里：{what}")
                 + (L(f" ({kind})", f"（{kind}）") if kind == "MODELED" else ""), df, 100)
    return fig


def alloc_iommu(df, ax=None):
    """rknnlab.allocation.iommu_budget: the models' NPU memory stacked in the order
    given, against the 4 GiB IOMMU domain (the dashed line), each segment labelled
    with its model and count."""
    fig, ax = _new(ax, figsize=(8.0, 3.6))
    left = 0.0
    for i, (_, row) in enumerate(df.iterrows()):
        w = float(row["total_bytes"]) / 2 ** 30
        ax.barh([0], [w], left=left, color=f"C{i}", hatch=_PHASE_HATCHES[i % len(_PHASE_HATCHES)],
                edgecolor="white", label=f"{row['model']} x {row['count']}")
        left += w
    domain = df.attrs.get("domain_bytes", 2 ** 32) / 2 ** 30
    ax.axvline(domain, color="0.2", linestyle="--", linewidth=1.2)
    ax.annotate(L("one IOMMU domain: 4 GiB", "一个 IOMMU 域：4 GiB"), (domain, 0.0), xytext=(-4, 0),
                textcoords="offset points",
                ha="right", va="center", rotation=90, fontsize=8)
    ax.set_xlim(0, max(left, domain) * 1.05)
    ax.set_yticks([])
    ax.set_xlabel(L("NPU memory (GiB), a lower bound", "NPU 内存（GiB），下限"))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, frameon=False)
    _alloc_title(ax, L("Many models in one 4 GiB domain", "一个 4 GiB 域中的多个模型"), df, 100)
    return fig


def alloc_cache_choice(tables: Dict[str, Any], ax=None):
    """Several rknnlab.allocation.cache_choice tables, one pair of bars per access pattern
    (the dict's keys as labels): CACHEABLE stacked as the CPU reads plus one
    rknn_mem_sync, NON_CACHEABLE as the reads; MODELED parts hatched; log scale, since
    the patterns differ by orders of magnitude."""
    fig, ax = _new(ax, figsize=(9.0, 4.4))
    labels = list(tables)
    x = np.arange(len(labels))
    width = 0.38
    for k, (label, t) in enumerate(tables.items()):
        rows = t.set_index("memory")
        c, n = rows.loc["CACHEABLE"], rows.loc["NON_CACHEABLE"]
        floor = 0.01       # a bar of 0 us cannot sit on a log axis
        ax.bar(x[k] - width / 2, max(c["read_us"], floor), width, color="C0",
               label=L("CACHEABLE: CPU reads", "CACHEABLE：CPU 读取") if k == 0 else None)
        ax.bar(x[k] - width / 2, c["sync_us"], width, bottom=max(c["read_us"], floor), color="C1", hatch="//",
               edgecolor="white", label=L("CACHEABLE: rknn_mem_sync", "CACHEABLE：rknn_mem_sync") if k == 0 else None)
        ax.bar(x[k] + width / 2, max(n["read_us"], floor), width, color="C3", hatch="\\\\" if "MODELED" in
               str(n["kind"]) else "", edgecolor="white",
               label=L("NON_CACHEABLE: CPU reads", "NON_CACHEABLE：CPU 读取") if k == 0 else None)
        for xi, total in ((x[k] - width / 2, c["total_us"]), (x[k] + width / 2, n["total_us"])):
            ax.annotate(f"{total:,.1f} us", (xi, max(total, 0.1)), textcoords="offset points", xytext=(0, 2),
                        ha="center", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.1)
    ax.set_xticks(x, [_wrap(lbl, 24) for lbl in labels], fontsize=8)
    ax.set_ylabel(L("CPU time per frame (us, log scale)", "每帧 CPU 时间（us，对数坐标）"))
    ax.grid(True, axis="y", which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    source = _source_of(next(iter(tables.values()))) if tables else L("no tables", "没有表")
    _alloc_title(ax, L("Cacheable or not: the CPU's cost per frame (hatched: MODELED)",
                       "可缓存与否：每帧的 CPU 开销（斜线：MODELED）"), source, 100)
    return fig


# --------------------------------------------------------------------------- chapter 6: the video pipeline
#: one colour and hatch per pipeline stage (rknnlab.pipeline.STAGES), fixed across figures
_PIPELINE_STAGES = {"convert": ("C0", ""), "input": ("C1", "//"), "run": ("C2", ""),
                    "output": ("C3", ".."), "post": ("C4", "xx")}
#: JupyterLab's output area at 1366 px is 919 px wide; at 100 dpi a figure this wide is not scaled down
_LAB_WIDTH = 9.0
#: int8 boxes: a thin dark line; fp32 boxes: a thick light outline drawn under it
_INT8_BOX = {"edgecolor": "#d62728", "linewidth": 1.3, "zorder": 3}
_FP32_BOX = {"edgecolor": "#7ec8ff", "linewidth": 5.0, "alpha": 0.9, "zorder": 2}


def _platform(source: str) -> str:
    """"simulated RK3588 — rknnlab sim" from "simulated RK3588 — rknnlab sim: ppocr_det,
    ...; values replayed ...": where it ran, the part a figure's title needs (the rest
    goes in the printed source line)."""
    return str(source).split(": ", 1)[0]


#: _count's nouns in Chinese (the zh edition)
_COUNT_ZH = {"box": "个框", "worker": "个工作线程"}


def _count(n: int, what: str = "box") -> str:
    return L(f"{n} {what}" + ("" if n == 1 else ("es" if what.endswith("x") else "s")),
             f"{n} {_COUNT_ZH.get(what, what)}")


def pipeline_frames(frames, boxes, reference=None, source: str = "", titles: Optional[Sequence[str]] = None,
                    ax=None):
    """A few frames (rknnlab.pipeline.Nv12Frame, or RGB arrays), two per row, each
    with its boxes: ``boxes`` one list of Box per frame (the NPU's int8 path: a thin
    red line), or a PipelineRun (its boxes of frames 0..n-1; its platform names the
    figure); ``reference`` the same from the fp32 model (a thick light-blue outline
    under the int8 line, so both show where they coincide), or None.  ``source``
    names where the boxes come from when ``boxes`` is a list (its first part, before
    ": ", goes under the title).  ``titles``: one per frame (default "frame 20: 6
    boxes, fp32 6").  ``ax``: a sequence of axes, one per frame."""
    _, plt = _plt(ax)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    if hasattr(boxes, "boxes") and hasattr(boxes, "source"):
        source = source or getattr(boxes, "platform", "") or boxes.source
        boxes = boxes.boxes
        if boxes is None:
            raise ValueError("this PipelineRun kept no boxes (run it with keep_boxes=True)")
    frames = list(frames)
    if len(boxes) < len(frames) or (reference is not None and len(reference) < len(frames)):
        raise ValueError(f"{len(frames)} frames, {len(boxes)} box lists"
                         + (f", {len(reference)} reference lists" if reference is not None else "")
                         + ": give one list of boxes per frame")
    if ax is None:
        cols = 1 if len(frames) == 1 else 2
        rows = max(1, -(-len(frames) // cols))
        fig, grid = plt.subplots(rows, cols, figsize=(_LAB_WIDTH if cols == 2 else 5.0, 2.75 * rows + 0.8),
                                 layout="constrained", squeeze=False)
        axes = list(grid.ravel())
        for spare in axes[len(frames):]:
            spare.set_axis_off()
    else:
        axes = list(np.ravel(ax)) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        if len(axes) < len(frames):
            raise ValueError(f"{len(frames)} frames need {len(frames)} axes, got {len(axes)}")
        fig = axes[0].figure
    for k, (frame, a) in enumerate(zip(frames, axes)):
        if hasattr(frame, "y") and hasattr(frame, "uv"):
            from .pipeline.frames import nv12_to_rgb
            image = nv12_to_rgb(frame)
            label = L(f"frame {getattr(frame, 'index', k)}", f"帧 {getattr(frame, 'index', k)}")
        else:
            image = np.asarray(frame)
            label = L(f"frame {k}", f"帧 {k}")
        a.imshow(image, interpolation="nearest")
        layers = [(boxes[k], _INT8_BOX, "int8")]
        if reference is not None:
            layers.insert(0, (reference[k], _FP32_BOX, "fp32"))
        for found, style, kind in layers:
            for b in found:
                a.add_patch(Rectangle((b.x0, b.y0), b.x1 - b.x0, b.y1 - b.y0, fill=False, gid=f"box:{kind}",
                                      **style))
        counts = _count(len(boxes[k])) + (L(", fp32 ", "，fp32 ") + str(len(reference[k]))
                                          if reference is not None else "")
        a.set_title(titles[k] if titles is not None else L(f"{label}: {counts}", f"{label}：{counts}"), fontsize=10,
                    loc="left")
        a.set_xticks([])
        a.set_yticks([])
    handles = [Line2D([], [], color=_INT8_BOX["edgecolor"], linewidth=1.5,
                      label=L("int8 (NPU path)", "int8（NPU 路径）"))]
    if reference is not None:
        handles.insert(0, Line2D([], [], color=_FP32_BOX["edgecolor"], linewidth=5,
                                 label=L("fp32 model (onnxruntime)", "fp32 模型（onnxruntime）")))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=10)
    fig.suptitle(L("Text boxes found by the pipeline", "流水线找到的文本框") + (f"\n{_platform(source)}" if source else ""),
                 fontsize=11, x=0.01, ha="left")
    return fig


def pipeline_gantt(run, frames: Optional[Tuple[int, int]] = None, ax=None):
    """The stages of each frame over time, one lane per worker (its core mask in the
    label), one colour per stage (convert, input, run, output, post), frame numbers on
    the run bars.  ``run``: a rknnlab.pipeline.PipelineRun (e.g. one of
    rknnlab.pipeline.scaling(...).attrs["runs"], so the figure shows the table's own
    run); ``frames=(first, last)`` limits the window (default: the first 8 frames).
    The title names the platform; the run's full source is ``run.source``."""
    fig, ax = _new(ax, figsize=(_LAB_WIDTH, 1.5 + 0.55 * max(run.workers, 1)))
    from .pipeline.loop import STAGES, mask_name
    df = run.gantt()
    first, last = frames if frames is not None else (0, min(run.n_frames, 8) - 1)
    df = df[(df["frame"] >= first) & (df["frame"] <= last)]
    if not len(df):
        raise ValueError(f"no frames {first}..{last} in this run ({run.n_frames} frames)")
    origin = float(df["start_ms"].min())
    for stage in STAGES:
        colour, hatch = _PIPELINE_STAGES[stage]
        s = df[df["stage"] == stage]
        ax.barh(s["worker"].to_numpy(), (s["end_ms"] - s["start_ms"]).to_numpy(float),
                left=(s["start_ms"] - origin).to_numpy(float), height=0.6, color=colour, hatch=hatch,
                edgecolor="black", linewidth=0.3, label=stage, gid=f"stage:{stage}")
    for _, r in df[df["stage"] == "run"].iterrows():
        ax.text((r["start_ms"] + r["end_ms"]) / 2 - origin, r["worker"], str(int(r["frame"])),
                ha="center", va="center", fontsize=8, color="white")
    lanes = range(run.workers)
    ax.set_yticks(list(lanes), [L(f"worker {w} ({mask_name(run.masks[w])})", f"工作线程 {w}（{mask_name(run.masks[w])}）")
                                for w in lanes], fontsize=9)
    ax.set_ylim(run.workers - 0.4, -0.6)
    ax.set_xlabel(L(f"time since frame {first} started (ms); numbers: frame on the NPU",
                    f"自帧 {first} 开始以来的时间（ms）；数字：正在 NPU 上运行的帧"))
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title=L("stage", "阶段"), title_fontsize=8)
    mode = {"zero_copy": L("Zero-copy", "零拷贝"), "general": L("General API", "通用 API")}.get(run.mode, run.mode)
    _title(ax, L(f"{mode}, {_count(run.workers, 'worker')}: stages of frames {first}–{last}",
                 _zs(f"{mode}，{_count(run.workers, 'worker')}：帧 {first}–{last} 的各阶段")),
           getattr(run, "platform", "") or _platform(run.source))
    return fig


def pipeline_scaling(table, ax=None):
    """Two panels of rknnlab.pipeline.scaling, one bar per configuration: frames per
    second (left, with the row's bound as a black tick when the table has bound_fps)
    and latency (right: median, whisker to the 95th percentile).  The
    platform and the table's note (the host's CPUs) go under the title; the full
    source is the table's attrs["source"]."""
    fig, left, right = _two_panels(ax, (_LAB_WIDTH, 3.6))
    y = np.arange(len(table))
    colours = [f"C{i}" for i in range(len(table))]
    fps = table["fps"].to_numpy(float)
    left.barh(y, fps, color=colours, edgecolor="white")
    bound = table["bound_fps"].to_numpy(float) if "bound_fps" in table else np.full(len(table), np.nan)
    if np.isfinite(bound).any():
        left.plot(bound, y, ls="none", marker="|", markersize=16, markeredgewidth=2, color="black",
                  label=L("bound (the table's limit)", "上限（表中给出的限制）"), gid="bound")
        left.legend(fontsize=8, loc="lower right")
    ends = np.fmax(fps, np.where(np.isfinite(bound), bound, fps))
    for yi, end, f, s in zip(y, ends, fps, table["speedup"].to_numpy(float)):
        left.annotate(f"{f:,.0f} /s ({s:.2f}x)", (end, yi), textcoords="offset points", xytext=(5, 0),
                      va="center", fontsize=8)
    left.set_yticks(y, list(table["config"]), fontsize=8)
    left.invert_yaxis()
    left.set_xlim(0, float(np.nanmax(ends)) * 1.45)
    left.set_xlabel(L("frames per second", "每秒帧数"))
    left.grid(True, axis="x", alpha=0.3)
    med = table["latency_median_ms"].to_numpy(float)
    p95 = table["latency_p95_ms"].to_numpy(float)
    right.barh(y, med, xerr=np.vstack([np.zeros_like(med), p95 - med]), capsize=3, color=colours,
               edgecolor="white")
    right.set_xlabel(L("latency: frame available to boxes (ms)\nbar: median; whisker: 95th percentile",
                       "延迟：从帧就绪到得出框（ms）\n柱：中位数；须线：第 95 百分位"))
    right.grid(True, axis="x", alpha=0.3)
    note = table.attrs.get("note", "")
    fig.suptitle(L("Workers and NPU cores: throughput and latency", "工作线程与 NPU 核：吞吐量与延迟")
                 + f"\n{_platform(_source_of(table))}"
                 + (f"\n{_wrap(note, 110)}" if note else ""), fontsize=10, x=0.01, ha="left")
    return fig


def _floor(x: np.ndarray, y: np.ndarray, parts: int = 60) -> Tuple[np.ndarray, np.ndarray]:
    """The lowest reading in each of ``parts`` equal ranges of x (the lower envelope the
    growth verdicts fit), placed at the range's centre."""
    edges = np.linspace(x.min(), x.max(), parts + 1)
    xs, ys = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (x >= lo) & (x <= hi)
        if m.any():
            xs.append((lo + hi) / 2)
            ys.append(float(y[m].min()))
    return np.asarray(xs), np.asarray(ys)


#: a heap reading this far above the floor is a spike: the sampler read the heap inside a call
_SPIKE_BYTES = 2 ** 20
#: what the spikes are, on the simulator (measured with tracemalloc per stage: rknn_run's
#: peak with values replayed is 2,768,696 B, inputs_set's in the general API the same)
_SIM_SPIKES = ("spikes: readings taken inside rknn_run: the simulator's\n"
               "input conversion (about 2.6 MiB, freed in the call)")
_SIM_SPIKES_ZH = "尖峰：在 rknn_run 内部取得的读数，即模拟器的\n输入转换（约 2.6 MiB，在调用内释放）"


def pipeline_steady(result, ax=None):
    """Four panels of a rknnlab.pipeline.steady_state result over the frames: RSS, the
    malloc heap in use and the runtime's DMA total (each relative to its first
    reading: the readings light, their lower envelope bold, which the verdicts fit),
    and the heap's rise inside each frame (what a frame allocates and keeps past a
    stage, even if it frees it before the next).  One colour per variant (clean
    solid, planted dashed), one legend under the panels; the verdicts and the
    numbers are the result's table() and summary(), printed beside it.  A panel that
    does not move says "no change: 0 B"; on the simulator, heap readings that spike
    above the floor are labelled (the simulator's own temporaries inside rknn_run)."""
    _, plt = _plt(ax)
    from matplotlib.lines import Line2D
    panels = (("rss_bytes", L("RSS (KiB, from the first reading)", "RSS（KiB，相对第一个读数）")),
              ("heap_bytes", L("malloc heap in use (KiB, from the first)", "已用 malloc 堆内存（KiB，相对第一个读数）")),
              ("dma_bytes", L("runtime DMA total (KiB, from the first)", "运行时 DMA 总量（KiB，相对第一个读数）")))
    if ax is None:
        fig, axes = plt.subplots(2, 2, figsize=(_LAB_WIDTH, 6.2), layout="constrained")
        axes = list(axes.ravel())
    else:
        axes = list(np.ravel(ax))
        if len(axes) != 4:
            raise ValueError(f"ax: four axes, not {len(axes)}")
        fig = axes[0].figure
    moved = [False] * 3
    spikes = False
    handles = []
    for i, v in enumerate(result.variants):
        s = result.series[v]
        x = np.asarray(s["iteration"], float)
        style = _style(i)
        handles.append(Line2D([], [], linewidth=1.8, label=v, **style))
        for k, (a, (column, label)) in enumerate(zip(axes, panels)):
            y = np.asarray([np.nan if val is None else val for val in s[column]], float)
            ok = ~np.isnan(y)
            a.set_title(label, fontsize=10, loc="left")
            if not ok.any():
                continue
            rel = (y[ok] - y[ok][0]) / 1024
            moved[k] = moved[k] or bool(np.ptp(rel) > 0)
            a.plot(x[ok], rel, linewidth=0.6, alpha=0.35, color=style["color"], gid=f"readings:{v}")
            fx, fy = _floor(x[ok], rel)
            a.plot(fx, fy, linewidth=1.8, **style, gid=f"floor:{v}")
            if column == "heap_bytes":
                spikes = spikes or bool(np.max(y[ok] - np.interp(x[ok], fx, fy * 1024 + y[ok][0]))
                                        > _SPIKE_BYTES)
        rise = result.heap_rise.get(v) or {}
        if rise.get("frames"):
            axes[3].plot(rise["frames"], np.asarray(rise["bytes"], float) / 1024, linewidth=1.4, **style,
                         gid=f"rise:{v}")
    for k, a in enumerate(axes[:3]):
        if not moved[k] and a.lines:
            a.set_ylim(-64, 64)
            a.text(0.5, 0.62, L("no change: 0 B", "无变化：0 B"), transform=a.transAxes, ha="center", fontsize=10,
                   color="0.25",
                   gid="no-change")
    if spikes and str(result.meta.get("backend", "")) == "sim":
        low, high = axes[1].get_ylim()
        axes[1].set_ylim(low, high + 0.45 * (high - low))      # room above the spikes for the label
        axes[1].text(0.02, 0.97, L(_SIM_SPIKES, _SIM_SPIKES_ZH), transform=axes[1].transAxes, ha="left", va="top",
                     fontsize=8, color="0.25", gid="spikes",
                     bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    axes[3].set_title(L("the heap's rise inside each frame (KiB)", "每帧之内堆的上升（KiB）"), fontsize=10, loc="left")
    for a in axes:
        a.set_xlabel(L("frame", "帧"))
        a.grid(True, alpha=0.3)
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=10)
    frames = result.meta.get("frames", "?")
    head = (L(f"{frames:,} frames per variant", f"每个变体 {frames:,} 帧") if isinstance(frames, int)
            else L("Steady state", "稳态"))
    fig.suptitle(L(f"{head}: flat memory, and what each frame allocates", f"{head}：内存平稳，以及每帧分配了什么")
                 + f"\n{_platform(result.source)}",
                 fontsize=11, x=0.01, ha="left")
    return fig


def model_balance(models: Sequence[str] = ("mobilenet_v2", "ppocr_det"), soc: str = "rk3588", ax=None):
    """Weights against internal (activation) memory per model, from the compiler
    reports (total_weight_size, total_internal_size; no run): paired bars in MiB on a
    log axis with plain MiB ticks, each bar labelled with its MiB, each model with the
    ratio internal / weights ("20.5×")."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, StrMethodFormatter
    from . import models as course_models
    fig, ax = _new(ax, figsize=(_LAB_WIDTH, 3.8))
    reports = [course_models.load_report(m, soc) for m in models]
    x = np.arange(len(reports))
    width = 0.38
    weights = np.array([r.total_weight_size for r in reports], float)
    internal = np.array([r.total_internal_size for r in reports], float)
    ax.bar(x - width / 2, weights / 2 ** 20, width, color="C0", label=L("weights", "权重"))
    ax.bar(x + width / 2, internal / 2 ** 20, width, color="C1", hatch="//", edgecolor="white",
           label=L("internal memory", "内部内存"))
    for xi, w, n in zip(x, weights, internal):
        for offset, value in ((-width / 2, w), (width / 2, n)):
            ax.annotate(f"{value / 2 ** 20:,.1f} MiB", (xi + offset, value / 2 ** 20), textcoords="offset points",
                        xytext=(0, 2), ha="center", fontsize=9)
    ax.set_yscale("log")
    low = float(min(weights.min(), internal.min())) / 2 ** 20
    high = float(max(weights.max(), internal.max())) / 2 ** 20
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if low / 2.5 <= t <= high * 2.5]
    ax.set_ylim(low / 2.5, high * 2.5)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(x, [L(f"{r.model}\ninternal = {n / w:.1f}× the weights", f"{r.model}\n内部内存 = 权重的 {n / w:.1f}×")
                      for r, w, n in zip(reports, weights, internal)], fontsize=9)
    ax.set_ylabel(L("MiB (log scale)", "MiB（对数坐标）"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    toolkits = sorted({str(r.data.get("toolkit_version", "?")) for r in reports})
    _title(ax, L("Weights vs internal memory: the opposite balance", "权重与内部内存：两类模型的比重相反"),
           L(f"{soc.upper()} compiler reports (rknn-toolkit2 {', '.join(toolkits)}): total_weight_size, "
             "total_internal_size; no run",
             f"{soc.upper()} 编译报告（rknn-toolkit2 {', '.join(toolkits)}）：total_weight_size、"
             "total_internal_size；未运行"))
    return fig


# --------------------------------------------------------------------------- Chapter 7 (review)
def review_claims(table, ax=None):
    """What each claim predicts and what was measured, from
    rknnlab.review.claims.figure_table: one row per quantity, the measurement as a dot
    with its 95% interval, the claim's prediction as a hollow diamond.  Each row is a
    ratio (a multiple of its own reference), so rows share one axis."""
    fig, ax = _new(ax, figsize=(8.0, 0.9 + 0.42 * max(len(table), 1)))
    y = np.arange(len(table))[::-1]
    measured = table["measured"].to_numpy(float)
    low = table["low"].to_numpy(float)
    high = table["high"].to_numpy(float)
    err = np.nan_to_num(np.vstack([measured - low, high - measured]))
    ax.errorbar(measured, y, xerr=err, fmt="o", color="C0", capsize=3,
                label=L("measured (95% interval)", "实测值（95% 置信区间）"))
    ax.scatter(table["claim_value"].to_numpy(float), y, marker="D", facecolors="none", edgecolors="C3",
               s=45, linewidths=1.5, label=L("what the claim predicts", "说法的预测值"), zorder=3)
    for yi, says, value in zip(y, table["claim_says"], measured):
        ax.annotate(f"{value:.2f}", (value, yi), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize=7)
    ax.set_yticks(y, [L(f"{label}\n(claim: {says})", f"{label}\n（说法：{says}）")
                      for label, says in zip(table["label"], table["claim_says"])], fontsize=7)
    ax.set_xlabel(L("ratio (x its reference)", "比值（相对各自参考值的倍数）"))
    ax.set_xlim(left=min(0.0, float(np.nanmin(low)) if len(table) else 0.0) - 0.1)
    ax.set_ylim(-0.7, len(table) - 0.3)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 1.2 / max(len(table), 1) / 10), ncol=2,
              frameon=False)
    _title(ax, L("What each claim predicts, and what was measured", "每种说法的预测与实测结果"), _source_of(table))
    return fig


# a Chinese notebook imports this module in its first cell: its own figures, made with
# matplotlib before any of rknnlab's, then draw Chinese text too
if language() == "zh":
    _speak()
