"""Chapter 5's figures (rknnlab.plot.alloc_*): each draws what its table holds, names the
table's source, and stays inside the figure at JupyterLab's width."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rknnlab import allocation, plot  # noqa: E402
from rknnlab.sim import SimRuntime  # noqa: E402


@pytest.fixture(scope="module")
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _titles(fig) -> str:
    texts = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    return "\n".join(texts + [a.get_title(loc="left") for a in fig.axes])


def _hidden_ticks(fig) -> set:
    """Tick labels matplotlib keeps for ticks outside the axis limits (never drawn)."""
    hidden = set()
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks():
                if not lo <= tick.get_loc() <= hi:
                    hidden.update({id(tick.label1), id(tick.label2)})
    return hidden


def _inside(fig) -> None:
    """Every text the figure draws lies within it (nothing cut off at its width)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    hidden = _hidden_ticks(fig)
    for text in fig.findobj(matplotlib.text.Text):
        if not text.get_visible() or not text.get_text().strip() or id(text) in hidden:
            continue
        ext = text.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 2 and ext.x1 <= box.x1 + 2, f"text cut off: {text.get_text()!r}"
        assert ext.y0 >= box.y0 - 2 and ext.y1 <= box.y1 + 2, f"text cut off: {text.get_text()!r}"


def test_alloc_loops_bars_are_the_table(rt):
    df = allocation.prealloc_vs_per_frame(frames=3, rt=rt)
    fig = plot.alloc_loops(df)
    left, right = fig.axes[:2]
    assert [p.get_width() for p in left.patches] == pytest.approx(list(df["median_us"] / 1e3))
    assert [p.get_width() for p in right.patches] == pytest.approx(list(df["dma_rise_bytes"] / 1024))
    assert "simulated RK3588" in _titles(fig)
    _inside(fig)


def test_alloc_sharing_stacks_each_model_and_labels_the_totals(rt):
    df = allocation.shared_internal(("mobilenet_v2", "resnet50"), rt=rt)
    fig = plot.alloc_sharing(df)
    ax = fig.axes[0]
    heights = np.array([p.get_height() for p in ax.patches]).reshape(2, 3)   # models x setups
    total = df[df["model"] == "total"].iloc[0]
    for j, col in enumerate(("separate_bytes", "shared_internal_bytes", "all_outside_bytes")):
        assert heights[:, j].sum() == pytest.approx(total[col] / 2 ** 20)
    assert any(f"{total['separate_bytes'] / 2 ** 20:.1f} MiB" in t.get_text() for t in ax.texts)
    assert "simulated RK3588" in _titles(fig)
    _inside(fig)


def test_alloc_pipelines_dashes_the_ways_that_cannot_run_at_once(rt):
    df = allocation.pipelines_memory(n_values=(1, 2), rt=rt)
    fig = plot.alloc_pipelines(df)
    lines = fig.axes[0].get_lines()
    assert len(lines) == len(allocation.PIPELINES)
    for line, how in zip(lines, allocation.PIPELINES):
        shared = how.endswith("internal mem")
        assert (line.get_linestyle() == "--") == shared
        assert list(line.get_ydata()) == pytest.approx(list(df[df["how"] == how]["dma_bytes"] / 2 ** 20))
    _inside(fig)


def test_alloc_sram_splits_each_tensor_into_sram_and_dram(rt):
    df = allocation.sram_fit(budget=allocation.RK3588_SRAM_BYTES, rt=rt)
    fig = plot.alloc_sram(df)
    ax = fig.axes[0]
    inside = df[df["sram_hit_bytes"].notna()]          # io tensors ("\\") are left out
    n = len(inside)
    assert len(ax.patches) == 2 * n < 2 * len(df)
    hits = [p.get_height() for p in ax.patches[:n]]
    rests = [p.get_height() for p in ax.patches[n:2 * n]]
    assert hits == pytest.approx(list(inside["sram_hit_bytes"] / 1024))
    assert np.add(hits, rests) == pytest.approx(list(inside["size_bytes"] / 1024))
    assert "MODELED" in _titles(fig)
    _inside(fig)


def test_alloc_iommu_draws_the_domain_and_each_model():
    df = allocation.iommu_budget(["yolov5m", "resnet50"], [20, 10])
    fig = plot.alloc_iommu(df)
    ax = fig.axes[0]
    assert [p.get_width() for p in ax.patches] == pytest.approx(list(df["total_bytes"] / 2 ** 30))
    assert any(line.get_xdata()[0] == pytest.approx(4.0) for line in ax.get_lines())
    assert "rknn-toolkit2#287" in _titles(fig)
    _inside(fig)


def test_alloc_cache_choice_one_pair_per_pattern():
    tables = {"small, read once": allocation.cache_choice(1000, repeats=3),
              "large, never read": allocation.cache_choice(2 ** 20, reads_per_frame=0, repeats=3)}
    fig = plot.alloc_cache_choice(tables)
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * len(tables)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["small, read once", "large, never read"]
    never = tables["large, never read"].set_index("memory")
    assert any(f"{never.loc['CACHEABLE', 'total_us']:,.1f} us" == t.get_text() for t in ax.texts)
    assert "MODELED" in _titles(fig)
    _inside(fig)


def test_alloc_shapes_groups_each_shape(rt):
    try:
        df = allocation.shape_sweep(frames=1, rt=rt)
    except Exception as exc:   # the simulator without dynamic shapes refuses DYNAMIC_RANGE
        pytest.skip(f"no dynamic shapes on this simulator yet: {exc}")
    fig = plot.alloc_shapes(df)
    left, right = fig.axes[:2]
    assert len(left.patches) == 3 * len(df)
    assert [p.get_height() for p in right.patches] == pytest.approx(list(df["npu_us"] / 1e3))
    assert [t.get_text() for t in left.get_xticklabels()] == list(df["shape"])
    _inside(fig)
