"""rknnlab.plot's chapter 6 figures: drawn from real runs on the simulator (few frames),
each naming its source, each drawing what the data holds."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import rknnlab
from rknnlab import models, plot
from rknnlab.pipeline.loop import STAGES, distinct_frames, run
from rknnlab.pipeline.steady import SteadyState

ROOT = Path(__file__).resolve().parents[1]


def _texts(fig) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(loc="left"), ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        parts += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            parts += [t.get_text() for t in legend.get_texts()]
    for legend in fig.legends:
        parts += [t.get_text() for t in legend.get_texts()]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def frames():
    return distinct_frames(3)


@pytest.fixture(scope="module")
def two_workers(frames):
    return run(frames, workers=2, n_frames=6, runtime=rknnlab.open_runtime("sim"), values=False)


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def test_gantt_draws_every_stage_of_every_frame_in_the_window(two_workers):
    fig = plot.pipeline_gantt(two_workers, frames=(0, 3))
    ax = fig.axes[0]
    for stage in STAGES:
        bars = [p for p in ax.patches if p.get_gid() == f"stage:{stage}"]
        assert len(bars) == 4, stage
    run_bars = sorted((p for p in ax.patches if p.get_gid() == "stage:run"), key=lambda p: p.get_x())
    g = two_workers.gantt()
    g = g[(g["stage"] == "run") & (g["frame"] <= 3)]
    origin = two_workers.gantt().query("frame <= 3")["start_ms"].min()
    assert np.allclose(sorted(p.get_width() for p in run_bars), sorted(g["end_ms"] - g["start_ms"]))
    assert np.isclose(min(p.get_x() for p in run_bars), (g["start_ms"] - origin).min())
    text = _texts(fig)
    assert "simulated RK3588" in text and "worker 1 (CORE_1)" in [t.get_text() for t in ax.get_yticklabels()]
    # a short title: what and where; the run's conditions (values replayed, wall time) stay in its source
    assert ax.get_title(loc="left").startswith("Zero-copy, 2 workers: stages of frames 0–3")
    assert "replayed" not in text and "wall time" not in text


def test_the_gantt_of_a_scaling_row_is_that_rows_run(frames):
    from rknnlab.pipeline.workers import scaling
    t = scaling(workers=(2,), n_frames=6, frames=frames, runtime=rknnlab.open_runtime("sim"))
    r = t.attrs["runs"]["2 x CORE_0/CORE_1"]
    fig = plot.pipeline_gantt(r)
    run_bars = [p for p in fig.axes[0].patches if p.get_gid() == "stage:run"]
    assert np.allclose(sorted(p.get_width() for p in run_bars), sorted(r.stage_ms()[:, STAGES.index("run")]))


def test_frames_figure_draws_one_rectangle_per_box(frames):
    from rknnlab.pipeline.postprocess import Box
    boxes = [[Box(10, 20, 300, 80, 0.9)], [], [Box(5, 5, 50, 50, 0.7), Box(60, 60, 90, 90, 0.8)]]
    reference = [[Box(12, 22, 298, 78, 1.0)], [Box(1, 1, 9, 9, 1.0)], []]
    fig = plot.pipeline_frames(frames, boxes, reference=reference, source="simulated RK3588 — test: more words")
    counts = [sum(1 for p in ax.patches if type(p).__name__ == "Rectangle") for ax in fig.axes]
    assert counts == [2, 1, 2, 0]              # two per row: the fourth axes is empty and hidden
    assert not fig.axes[3].axison
    for ax in fig.axes[:3]:                    # readable at JupyterLab's 919 px: 10 pt titles
        assert ax.title.get_fontsize() >= 10
    int8 = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "box:int8"]
    fp32 = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "box:fp32"]
    assert len(int8) == 3 and len(fp32) == 2
    # fp32: a thick light outline under the thin int8 line, so both show where they coincide
    assert min(p.get_linewidth() for p in fp32) > 2 * max(p.get_linewidth() for p in int8)
    assert max(p.get_zorder() for p in fp32) < min(p.get_zorder() for p in int8)
    assert fig.get_figwidth() <= 9.19          # 919 px at 100 dpi: not scaled down
    text = _texts(fig)
    assert "simulated RK3588" in text and "int8 (NPU path)" in text and "fp32 model" in text
    assert "more words" not in text            # the source's details go in the printed line
    titles = [ax.get_title(loc="left") for ax in fig.axes[:3]]
    assert titles[0].endswith("1 box, fp32 1") and titles[1].endswith("0 boxes, fp32 1"), titles
    with pytest.raises(ValueError, match="one list of boxes per frame"):
        plot.pipeline_frames(frames, boxes[:2])


def test_frames_figure_from_a_run_uses_its_boxes_and_source(frames):
    r = run(frames[:1], n_frames=1, runtime=rknnlab.open_runtime("sim"), values=True, warmup=0)
    fig = plot.pipeline_frames(frames[:1], r)
    assert sum(1 for p in fig.axes[0].patches if type(p).__name__ == "Rectangle") == r.n_boxes[0] >= 1
    text = _texts(fig)
    assert "simulated RK3588" in text and "wall time" not in text


def test_scaling_figure_has_a_bar_per_configuration(frames):
    from rknnlab.pipeline.workers import scaling
    t = scaling(workers=(1, 2), n_frames=6, frames=frames, runtime=rknnlab.open_runtime("sim"))
    fig = plot.pipeline_scaling(t)
    left, right = fig.axes[:2]
    assert len(left.patches) == len(t) == 3
    assert np.allclose(sorted(p.get_width() for p in left.patches), sorted(t["fps"]))
    bound = [line for line in left.lines if line.get_gid() == "bound"]
    assert len(bound) == 1 and np.allclose(bound[0].get_xdata(), t["bound_fps"])
    text = _texts(fig)
    assert "simulated RK3588" in text and "CPU cores" in text and "replayed" not in text


def test_steady_figure_from_the_recorded_trace():
    traces = sorted((ROOT / "data" / "traces").glob("ch06_steady_*.json"))
    if not traces:
        pytest.skip("no recorded steady-state trace yet")
    s = SteadyState.load(traces[-1])
    fig = plot.pipeline_steady(s)
    assert len(fig.axes) == 4
    for ax in fig.axes[:3]:       # per variant: its readings and their lower envelope
        assert sorted(l.get_gid() for l in ax.lines) == sorted(f"{k}:{v}" for k in ("readings", "floor")
                                                               for v in s.variants)
    assert sorted(l.get_gid() for l in fig.axes[3].lines) == sorted(f"rise:{v}" for v in s.variants)
    text = _texts(fig)
    assert "simulated RK3588" in text and "rise inside each frame" in text
    assert "replayed" not in text and "flat" not in fig.legends[0].get_texts()[0].get_text()
    planted = [l for l in fig.axes[3].lines if l.get_gid() == "rise:letterbox_malloc"][0]
    assert np.median(planted.get_ydata()) >= 480 * 480 * 3 / 1024
    heap = [l for l in fig.axes[1].lines if l.get_gid() == "readings:clean"][0].get_ydata()
    series = np.asarray([np.nan if v is None else v for v in s.series["clean"]["heap_bytes"]], float)
    series = series[~np.isnan(series)]
    assert np.allclose(heap, (series - series[0]) / 1024)


def test_model_balance_shows_the_compiler_reports_numbers():
    fig = plot.model_balance()
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    expected = []
    for m in ("mobilenet_v2", "ppocr_det"):
        r = models.load_report(m, "rk3588")
        expected += [r.total_weight_size / 2 ** 20, r.total_internal_size / 2 ** 20]
    # bars are drawn weights first (both models), then internal
    assert np.allclose(sorted(heights), sorted(expected))
    mb, pp = (models.load_report(m, "rk3588") for m in ("mobilenet_v2", "ppocr_det"))
    assert pp.total_internal_size > pp.total_weight_size          # the opposite balance
    assert mb.total_internal_size < mb.total_weight_size
    text = _texts(fig)
    assert "RK3588 compiler reports" in text
    # plain words in the legend; the report's identifiers in the source line
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["weights", "internal memory"]
    assert "total_weight_size" in ax.get_title(loc="left") and "total_internal_size" in ax.get_title(loc="left")


def _steady(heap, dma, backend="sim"):
    n = len(heap)
    data = {"format": "rknnlab.pipeline.steady/1",
            "meta": {"source": "simulated RK3588 — rknnlab sim: test, values replayed", "frames": n,
                     "backend": backend},
            "series": {"clean": {"iteration": list(range(n)), "rss_bytes": [1e8] * n,
                                 "heap_bytes": list(map(float, heap)), "dma_bytes": list(map(float, dma))}},
            "verdicts": {"clean": {k: {"verdict": "flat", "words": "flat", "slope": 0.0, "half_width": 1.0}
                                   for k in ("rss", "heap", "dma")}},
            "heap_rise": {"clean": {"frames": list(range(n)), "bytes": [0.0] * n, "per_frame_median_bytes": 0.0}},
            "status": {"clean": "ok"}}
    return SteadyState.from_dict(data)


def test_a_flat_panel_says_no_change_and_simulator_spikes_are_labelled():
    flat = [5e7] * 200
    spiky = [1e8] * 200
    spiky[50] += 2.7 * 2 ** 20          # a reading inside rknn_run
    fig = plot.pipeline_steady(_steady(spiky, flat))
    rss, heap, dma = fig.axes[:3]
    assert [t.get_gid() for t in dma.texts] == ["no-change"] and dma.texts[0].get_text() == "no change: 0 B"
    assert dma.get_ylim() == (-64, 64)
    assert [t.get_gid() for t in heap.texts] == ["spikes"] and "simulator" in heap.texts[0].get_text()
    assert heap.get_ylim()[1] > 2.7 * 1024     # the spike stays in view under the label
    quiet = plot.pipeline_steady(_steady([1e8 + 32 * (i % 3) for i in range(200)],
                                         [5e7 + 4096 * (i // 100) for i in range(200)]))
    assert not quiet.axes[1].texts and not quiet.axes[2].texts      # no spike, and the DMA total moved
    board = plot.pipeline_steady(_steady(spiky, flat, backend="board"))
    assert not board.axes[1].texts      # the label names the simulator's conversion: not said of a board


def test_model_balance_ticks_are_plain_mib_and_one_ratio_format():
    fig = plot.model_balance()
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and all(t.replace(".", "").isdigit() for t in ticks), ticks     # 1, 2, 5, 10 ... no 10^x
    labels = [t.get_text() for t in ax.get_xticklabels()]
    ratios = []
    for m, label in zip(("mobilenet_v2", "ppocr_det"), labels):
        r = models.load_report(m, "rk3588")
        ratios.append(f"{r.total_internal_size / r.total_weight_size:.1f}×")
        assert label.endswith(f"internal = {ratios[-1]} the weights"), label
    assert ratios[1] == "20.5×"
