"""rknnlab.plot in the zh edition: the same figure drawn in English and in Chinese.

For a set of figures (memory, timing, phases, the compiler's plan, a context's life, the
per-layer profile, chapter 5's and chapter 6's figures, the runner panel's live figure,
chapter 1's bar charts), each drawn from the inputs the other plot tests use:

- every text on it (titles, axis labels, annotations, legend entries, tick labels the
  function names) that says something in English (3+ English words, once the names it was
  given are taken out: variants, models, sources) has Chinese in it in zh;
- every text holds the same numbers in both languages;
- the Chinese figure saves to PNG without a "Glyph ... missing" warning (needs a CJK font:
  skipped without one, except under CI=true, where it fails);
- in English, the font settings are left alone.
"""
from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="rknnlab.plot needs matplotlib (the lab extra)")
pd = pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter  # noqa: E402

import rknnlab  # noqa: E402
from harness_results import make_result  # noqa: E402
from rknnlab import fonts, i18n, layers, plot, profile, widgets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PERF_FIXTURE = ROOT / "tests" / "fixtures" / "perf_detail_board_format.txt"

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
#: an English word: 2+ letters, some lower case, not part of a name (rknn_init, RK3588, free())
WORD = re.compile(r"(?<![\w.#/-])[A-Za-z]*[a-z][A-Za-z]*(?:'[a-z]+)?(?![\w(/#-])")
UNITS = {"ms", "us", "MiB", "KiB", "GiB", "x", "s", "it"}
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _words(text: str) -> list:
    return [w for w in WORD.findall(text) if w not in UNITS and len(w) > 1]


def _texts(fig) -> list:
    """(where, text) of every text the figure draws, in a fixed order: the same artists in
    both languages.  Tick labels only where the function named the ticks (fixed ticks with labels):
    numeric ticks depend on the axes' size, which the text's length changes."""
    out = []
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle.get_text()))
    out += [("figure text", t.get_text()) for t in fig.texts]
    for k, legend in enumerate(fig.legends):
        out += [(f"figure legend {k}", t.get_text()) for t in legend.get_texts()]
        out.append((f"figure legend {k} title", legend.get_title().get_text()))
    seen, axes = set(), []
    for ax in fig.axes:
        for a in [ax] + list(getattr(ax, "child_axes", [])):
            if id(a) not in seen:
                seen.add(id(a))
                axes.append(a)
    for i, ax in enumerate(axes):
        if hasattr(ax, "get_title"):           # not a secondary axis
            for loc in ("left", "center", "right"):
                out.append((f"axes {i} title {loc}", ax.get_title(loc=loc)))
        out.append((f"axes {i} xlabel", ax.xaxis.get_label().get_text()))
        out.append((f"axes {i} ylabel", ax.yaxis.get_label().get_text()))
        out += [(f"axes {i} text", t.get_text()) for t in ax.texts]
        legend = ax.get_legend() if hasattr(ax, "get_legend") else None
        if legend is not None:
            out += [(f"axes {i} legend", t.get_text()) for t in legend.get_texts()]
            out.append((f"axes {i} legend title", legend.get_title().get_text()))
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            locator, formatter = axis.get_major_locator(), axis.get_major_formatter()
            if isinstance(locator, FixedLocator) and isinstance(formatter, (FixedFormatter, FuncFormatter)):
                out += [(f"axes {i} {name}tick", str(formatter(v, k))) for k, v in enumerate(locator.locs)]
    return [(where, text) for where, text in out if text and text.strip()]


def _without(text: str, names) -> str:
    """``text`` with the names it was given (sources, variants, models) taken out."""
    flat = " ".join(text.split())
    for name in sorted({" ".join(str(n).split()) for n in names if str(n).strip()}, key=len, reverse=True):
        flat = flat.replace(name, " ")
    return flat


# --------------------------------------------------------------------------- the inputs
@pytest.fixture(scope="module")
def result():
    return make_result(crash=True)


@pytest.fixture(scope="module")
def life():
    pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")
    from rknnlab import lifecycle
    r = rknnlab.run([lifecycle.from_buffer], model="mobilenet_v2", iterations=2, warmup=0, backend="sim",
                    sample_calls=True, progress=False)
    assert not r.errors, r.errors
    return r


@pytest.fixture(scope="module")
def sim():
    pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")
    from rknnlab.sim import SimRuntime
    rt = SimRuntime("rk3588")
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def frames():
    pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")
    from rknnlab.pipeline.loop import distinct_frames
    return distinct_frames(2)


def _phase_table():
    rows = []
    for phase, m in zip(profile.PHASES, (10, 15, 12, 13, 0.5)):
        rows.append({"model": "yolov5s_relu", "input": "640x640", "want_float": True, "phase": phase, "median_ms": m,
                     "q1_ms": m * 0.9, "q3_ms": m * 1.1, "share": m / 50.5, "frames": 7, "ms": (m,)})
    rows.append({"model": "yolov5s_relu", "input": "640x640", "want_float": True, "phase": "total",
                 "median_ms": 50.5, "q1_ms": 49.5, "q3_ms": 52.5, "share": 1.0, "frames": 7, "ms": (50.5,)})
    t = pd.DataFrame(rows)
    t.attrs["source"] = "made up for a test"
    return t


def _multicore():
    rows = []
    for model, share, speedups in (("a", 1.0, (1.0, 1.3, 1.6)), ("b", 0.05, (1.0, 0.98, 0.97))):
        for mask, s in zip(("RKNN_NPU_CORE_0", "RKNN_NPU_CORE_0_1", "RKNN_NPU_CORE_0_1_2"), speedups):
            ref = mask == "RKNN_NPU_CORE_0"
            rows.append({"model": model, "mask": mask, "speedup": s, "speedup_low": np.nan if ref else s - 0.05,
                         "speedup_high": np.nan if ref else s + 0.05, "split_share": share})
    df = pd.DataFrame(rows)
    df.attrs["source"] = "made up for a test"
    return df


def _fragmentation():
    rows = []
    for pattern, changes in (("small", (40, 40, 3)), ("large", (50, 1, 1))):
        rows.append({"pattern": pattern, "step": "before", "rss_change_bytes": 0})
        for step, mib in zip(("after malloc", "after free", "after malloc_trim(0)"), changes):
            rows.append({"pattern": pattern, "step": step, "rss_change_bytes": mib * 2 ** 20})
    df = pd.DataFrame(rows)
    df.attrs["source"] = "glibc 9.99, made up"
    return df


def _cpu_costs():
    df = pd.DataFrame([
        {"what": "copy", "bytes": 10, "median_us": 50.0, "q1_us": 45.0, "q3_us": 60.0, "kind": "measured"},
        {"what": "sync", "bytes": 10, "median_us": 160.0, "q1_us": np.nan, "q3_us": np.nan, "kind": "MODELED"},
    ])
    df.attrs["source"] = "made up for a test"
    return df


def _live_figure(monkeypatch):
    """The runner panel's live figure (it returns PNG bytes: the Figure is caught on its way)."""
    live = widgets.LiveData(total=4)
    live.feed({"variant": "leak_no_release", "samples": {"t_ns": [0, 10 ** 9], "rss_kb": [1024, 2048]},
               "iterations": {"iteration": [0, 1], "duration_ns": [2_000_000, 3_000_000]}})
    caught = []
    monkeypatch.setattr(widgets, "_png", lambda fig: caught.append(fig) or b"")
    widgets.live_figure(live)
    return caught[0]


SOURCE = "simulated RK3588 — rknnlab sim"
VARIANTS = ("flat", "leaky", "crashy (crashed)", SOURCE)


def _steady(request):
    from rknnlab.pipeline.steady import SteadyState
    traces = sorted((ROOT / "data" / "traces").glob("ch06_steady_*.json"))
    if not traces:
        pytest.skip("no recorded steady-state trace")
    s = SteadyState.load(traces[-1])
    return lambda: plot.pipeline_steady(s), ()


def _pipeline_gantt(request):
    from rknnlab.pipeline.loop import run
    r = run(request.getfixturevalue("frames"), workers=2, n_frames=4, runtime=rknnlab.open_runtime("sim"),
            values=False)
    return lambda: plot.pipeline_gantt(r), ()


def _pipeline_frames(request):
    from rknnlab.pipeline.postprocess import Box
    frames = request.getfixturevalue("frames")
    boxes = [[Box(10, 20, 300, 80, 0.9)], []]
    reference = [[Box(12, 22, 298, 78, 1.0)], [Box(1, 1, 9, 9, 1.0)]]
    return lambda: plot.pipeline_frames(frames, boxes, reference=reference, source="simulated RK3588 — test"), ()


def _pipeline_scaling(request):
    from rknnlab.pipeline.workers import scaling
    t = scaling(workers=(1, 2), n_frames=4, frames=request.getfixturevalue("frames"),
                runtime=rknnlab.open_runtime("sim"))
    return lambda: plot.pipeline_scaling(t), [t.attrs.get("note", "")]


def _contexts(request):
    from rknnlab import lifecycle, models
    df = lifecycle.contexts_memory(request.getfixturevalue("sim"), str(models.model_path("mobilenet_v2", "rk3588")),
                                   n=2)
    return lambda: plot.contexts_memory(df, "simulated RK3588"), ["simulated RK3588"] + list(df["how"])


def _alloc(fn, make, names=lambda df: ()):
    def prepare(request):
        from rknnlab import allocation
        df = make(allocation, request)
        return lambda: getattr(plot, fn)(df), list(names(df))
    return prepare


def _fixed(draw, names=()):
    return lambda request: (draw, names)


def _with(fixture, draw, names=()):
    def prepare(request):
        value = request.getfixturevalue(fixture)
        return lambda: draw(value), names
    return prepare


def _live(request):
    monkeypatch = request.getfixturevalue("monkeypatch")
    return lambda: _live_figure(monkeypatch), ("leak_no_release",)


#: name -> prepare(request) -> (draw() -> Figure, the names given to it, which stay as they are);
#: each figure is drawn twice (English, Chinese) from the same inputs
CASES = {
    "memory": _with("result", lambda r: plot.memory(r, "rss"), VARIANTS),
    "memory_by_iteration": _with("result", lambda r: plot.memory(r, "heap", by_iteration=True, baseline="fit"),
                                 VARIANTS),
    "memory_empty": _with("result", lambda r: plot.memory(r, "cma_free"), VARIANTS),
    "iteration_times": _with("result", plot.iteration_times, VARIANTS),
    "phases": _with("result", plot.phases, VARIANTS),
    "gantt": _with("result", lambda r: plot.gantt(r, "flat", lanes="thread_ctx"), VARIANTS),
    "rss_life_and_loop": _with("result", plot.rss_life_and_loop, VARIANTS),
    "memory_plan": _fixed(lambda: plot.memory_plan("mobilenet_v2")),
    "lifecycle": _with("life", lambda r: plot.lifecycle(r, "from_buffer"), ("from_buffer", SOURCE)),
    "lifecycle_time": _with("life", lambda r: plot.lifecycle(r, "from_buffer", x="time"), ("from_buffer", SOURCE)),
    "contexts_memory": _contexts,
    "frame_phases": _fixed(lambda: plot.frame_phases(_phase_table(), published=profile.published_phases()),
                           ("made up for a test",)),
    "layer_profile": _fixed(lambda: plot.layer_profile(
        profile.parse_perf_detail(PERF_FIXTURE.read_text(), source="made-up board"), top=3), ("made-up board",)),
    "traffic": _fixed(lambda: plot.traffic(profile.traffic(["yolov5s_320", "yolov5s", "mobilenet_v2"]))),
    "multicore": _fixed(lambda: plot.multicore(_multicore()), ("made up for a test",)),
    "fragmentation": _fixed(lambda: plot.fragmentation(_fragmentation()), ("glibc 9.99, made up",)),
    "cpu_costs": _fixed(lambda: plot.cpu_costs(_cpu_costs()), ("made up for a test",)),
    "alloc_loops": _alloc("alloc_loops", lambda a, r: a.prealloc_vs_per_frame(frames=3, rt=r.getfixturevalue("sim")),
                          lambda df: df["strategy"]),
    "alloc_sharing": _alloc("alloc_sharing", lambda a, r: a.shared_internal(("mobilenet_v2", "resnet50"),
                                                                             rt=r.getfixturevalue("sim"))),
    "alloc_pipelines": _alloc("alloc_pipelines", lambda a, r: a.pipelines_memory(n_values=(1, 2),
                                                                                 rt=r.getfixturevalue("sim")),
                              lambda df: df["how"]),
    "alloc_iommu": _alloc("alloc_iommu", lambda a, r: a.iommu_budget(["yolov5m", "resnet50"], [20, 10])),
    "alloc_cache_choice": _alloc("alloc_cache_choice",
                                 lambda a, r: {"small, read once": a.cache_choice(1000, repeats=3)},
                                 lambda tables: list(tables)),
    "pipeline_gantt": _pipeline_gantt,
    "pipeline_frames": _pipeline_frames,
    "pipeline_scaling": _pipeline_scaling,
    "pipeline_steady": _steady,
    "model_balance": _fixed(plot.model_balance),
    "live_figure": _live,
    "course_plans": _fixed(lambda: layers.plot_weights_and_activations(layers.course_plans(), "rk3588")),
    "context_parts": _fixed(lambda: layers.plot_context_memory({"mobilenet_v2": {"weights": 3e6, "internal": 1e6}},
                                                               "simulated RK3588"), ("weights", "internal")),
}
#: the glyph check draws these (one of each kind of figure: lines, bars, a Gantt chart, step
#: lines with a secondary axis, two panels, images, a suptitle, the panel's bare Figure)
GLYPH_CASES = ("memory", "phases", "gantt", "memory_plan", "lifecycle", "layer_profile", "multicore", "cpu_costs",
               "alloc_iommu", "alloc_cache_choice", "pipeline_frames", "pipeline_steady", "model_balance",
               "live_figure", "course_plans")


@pytest.fixture(autouse=True)
def _back_to_english():
    family = matplotlib.rcParams["font.family"]
    yield
    i18n.set_language(None)
    matplotlib.rcParams["font.family"] = family
    plt.close("all")


def _in(lang, draw):
    i18n.set_language(lang)
    try:
        return draw()
    finally:
        i18n.set_language(None)


@pytest.mark.parametrize("name", list(CASES))
def test_figure_speaks_chinese_with_the_same_numbers(name, request):
    draw, given = CASES[name](request)
    en = _texts(_in("en", draw))
    zh = _texts(_in("zh", draw))
    assert [w for w, _ in en] == [w for w, _ in zh], f"{name}: not the same texts in both languages"
    english = []
    for (where, e), (_, z) in zip(en, zh):
        assert sorted(NUMBER.findall(e)) == sorted(NUMBER.findall(z)), f"{name}, {where}: {e!r} vs {z!r}"
        left = _without(e, set(given))
        if len(_words(left)) >= 3 and not CJK.search(z):
            english.append(f"{where}: {z!r}")
    assert not english, f"{name}: English left in the zh figure:\n" + "\n".join(english)


def _no_cjk_font() -> bool:
    if fonts.cjk_family() is not None:
        return False
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"no CJK font for the zh figures on CI ({fonts.INSTALL_HINT})")
    return True


@pytest.mark.parametrize("name", GLYPH_CASES)
def test_chinese_figure_has_every_glyph(name, request):
    if _no_cjk_font():
        pytest.skip(f"glyph check skipped: no CJK font on this machine ({fonts.INSTALL_HINT}); "
                    "the zh texts and numbers are checked by test_figure_speaks_chinese_with_the_same_numbers")
    draw, _ = CASES[name](request)
    i18n.set_language("zh")               # kept while the figure is saved: tick labels are made then
    fig = draw()
    assert CJK.search("\n".join(t for _, t in _texts(fig)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png", dpi=40)
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, f"{name}: {missing[:3]}"


def test_english_leaves_the_fonts_alone(result):
    family = list(np.atleast_1d(matplotlib.rcParams["font.family"]))
    i18n.set_language("en")
    plot.memory(result, "rss")
    plot.phases(result)
    layers.plot_context_memory({"m": {"weights": 1e6}}, "here")
    assert list(np.atleast_1d(matplotlib.rcParams["font.family"])) == family
    assert plot.iteration_times(result).axes[0].get_xlabel() == "iteration"


def test_axes_made_before_the_chinese_font_get_it_too(result):
    """A notebook makes its axes, then draws into them (ax=...): their titles, labels and
    tick labels were made with the font of that moment, and must get the CJK fallback too.
    The runner panel's figures (bare Figures, PNG bytes) likewise."""
    if _no_cjk_font():
        pytest.skip(f"glyph check skipped: no CJK font on this machine ({fonts.INSTALL_HINT})")
    fig, (top, bottom) = plt.subplots(2, 1, layout="constrained")     # made in English
    i18n.set_language("zh")
    plot.memory(result, "rss", by_iteration=True, ax=top)
    plot.gantt(result, "flat", ax=bottom)                               # lanes: 线程 0
    assert CJK.search(top.get_ylabel()) and CJK.search(bottom.get_yticklabels()[0].get_text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png", dpi=40)
        widgets.result_figures(result)
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, missing[:3]


def test_say_picks_the_language_and_names_the_cjk_font_in_chinese():
    """plot.say: a notebook's own figure text, in the language rknnlab speaks; in Chinese the
    CJK font is named before the text is drawn (matplotlib's own figures then draw it)."""
    before = list(matplotlib.rcParams["font.family"])
    try:
        i18n.set_language("en")
        assert plot.say("frames", "帧") == "frames"
        assert list(matplotlib.rcParams["font.family"]) == before
        i18n.set_language("zh")
        family = fonts.cjk_family()
        if family is None:
            if os.environ.get("CI") == "true":
                pytest.fail("no CJK font: .ci/run installs fonts-noto-cjk")
            pytest.skip("no CJK font on this machine")
        assert plot.say("frames", "帧") == "帧"
        assert family in list(matplotlib.rcParams["font.family"])
        fig, ax = plt.subplots()
        ax.set_title(plot.say("four practice traces", "四条练习记录"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # "Glyph ... missing from font(s)" would raise
            fig.savefig(io.BytesIO(), format="png")
        plt.close(fig)
    finally:
        i18n.set_language(None)
        matplotlib.rcParams["font.family"] = before
