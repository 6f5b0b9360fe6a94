"""rknnlab.plot: each figure holds the data it claims (checked on the artists), names its source and units."""
from __future__ import annotations

import io

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="rknnlab.plot needs matplotlib (the lab extra)")
pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
matplotlib.use("Agg")

from harness_results import ITER, WARMUP, make_result  # noqa: E402
from rknnlab import models, plot  # noqa: E402

SOURCE = "simulated RK3588 — rknnlab sim"


@pytest.fixture(scope="module")
def result():
    return make_result(crash=True)


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def _lines(ax):
    return {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}


def test_memory_lines_are_the_samples(result):
    fig = plot.memory(result, "rss")
    ax = fig.axes[0]
    assert SOURCE in ax.get_title(loc="left") and "RSS" in ax.get_title(loc="left")
    assert "(MiB)" in ax.get_ylabel() and "(s)" in ax.get_xlabel()
    lines = _lines(ax)
    assert set(lines) == {"flat", "leaky", "crashy"}
    s = result.samples
    for name, ln in lines.items():
        sv = s[s["variant"] == name]
        np.testing.assert_allclose(ln.get_xdata(), sv["t_s"])
        np.testing.assert_allclose(ln.get_ydata(), sv["rss_kb"] / 1024)
    # iteration marks sit on the curve at iteration starts
    marks = [ln for ln in ax.get_lines() if ln.get_gid() == "marks:leaky"][0]
    its = result.iterations[result.iterations["variant"] == "leaky"]
    assert set(np.round(marks.get_xdata(), 9)) <= set(np.round(its["start_s"], 9))
    assert 2 <= len(marks.get_xdata()) <= 11
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "crashy (crashed)" in texts  # unfinished variants are named on the figure
    fig.savefig(io.BytesIO(), format="svg")  # exports


def test_memory_relative_and_other_metrics(result):
    ax = plot.memory(result, "heap", relative=True).axes[0]
    leaky = _lines(ax)["leaky"].get_ydata()
    # relative to the first measured sample; 4 KiB per iteration in MiB
    assert leaky[WARMUP] == pytest.approx(0.0)
    assert leaky[-1] - leaky[WARMUP] == pytest.approx(4 * (ITER - 1) / 1024)
    assert "change in" in ax.get_ylabel()
    ax = plot.memory(result, "mem_free").axes[0]
    assert "MemFree" in ax.get_title(loc="left")
    ax = plot.memory(result, "pss").axes[0]
    assert len(_lines(ax)["flat"].get_xdata()) == len([i for i in range(WARMUP + ITER) if i % 5 == 0])
    with pytest.raises(ValueError, match="rss"):
        plot.memory(result, "nonsense")
    with pytest.raises(KeyError, match="leaky"):
        plot.memory(result, variants=["nope"])


def test_memory_by_iteration_shows_only_the_measured_loop(result):
    ax = plot.memory(result, "heap", by_iteration=True).axes[0]
    s = result.samples
    for name, ln in _lines(ax).items():
        sv = s[(s["variant"] == name) & (s["stage"] == "measure") & s["heap_in_use_bytes"].notna()]
        np.testing.assert_allclose(ln.get_xdata(), sv["iteration"])
        y = sv["heap_in_use_bytes"].to_numpy(float) / 2**20
        np.testing.assert_allclose(ln.get_ydata(), y - y[0])
    leaky = _lines(ax)["leaky"].get_ydata()
    assert leaky[-1] == pytest.approx(4 * (ITER - 1) / 1024)
    assert ax.get_xlabel() == "measured iteration"


def test_memory_by_iteration_fit_baseline_sets_aside_a_transient_first_sample(result):
    """A first measured sample that caught a transient 0.5 MiB must not move the whole curve."""
    hit = make_result(crash=True)
    s = hit.samples                                 # cached: changes made here are what plot reads
    measured = s[(s["stage"] == "measure") & s["heap_in_use_bytes"].notna()]
    for name in ("flat", "leaky"):
        first = measured[measured["variant"] == name].index[0]
        s.loc[first, "heap_in_use_bytes"] += 0.5 * 2**20
    first_based = _lines(plot.memory(hit, "heap", by_iteration=True).axes[0])
    assert first_based["flat"].get_ydata()[-1] == pytest.approx(-0.5)     # the bug: a whole-curve drop
    ax = plot.memory(hit, "heap", by_iteration=True, baseline="fit").axes[0]
    flat, leaky = (_lines(ax)[n].get_ydata() for n in ("flat", "leaky"))
    assert flat[0] == pytest.approx(0.5) and np.allclose(flat[1:], 0.0)   # one point off, the rest flat
    grown = 4 * (ITER - 1) / 1024
    assert leaky[-1] == pytest.approx(grown, rel=0.05)
    assert "robust line" in ax.get_title(loc="left")
    # without a transient, "fit" draws the same curves as "first"
    clean = _lines(plot.memory(result, "heap", by_iteration=True, baseline="fit").axes[0])
    for name, ln in _lines(plot.memory(result, "heap", by_iteration=True).axes[0]).items():
        np.testing.assert_allclose(clean[name].get_ydata(), ln.get_ydata(), atol=1e-9)
    with pytest.raises(ValueError, match="baseline"):
        plot.memory(result, "heap", by_iteration=True, baseline="median")


def test_memory_says_when_there_is_nothing(result):
    ax = plot.memory(result, "cma_free").axes[0]
    assert any("no CmaFree" in t.get_text() for t in ax.texts)


def test_iteration_times(result):
    ax = plot.iteration_times(result).axes[0]
    assert "(ms)" in ax.get_ylabel() and SOURCE in ax.get_title(loc="left")
    its = result.iterations
    for name, ln in _lines(ax).items():
        m = its[(its["variant"] == name) & (its["stage"] == "measure")]
        np.testing.assert_array_equal(ln.get_xdata(), m["iteration"])
        np.testing.assert_allclose(ln.get_ydata(), m["duration_ms"])
    warm = [ln for ln in ax.get_lines() if ln.get_gid() == "warmup:flat"][0]
    assert list(warm.get_xdata()) == list(range(WARMUP))


def test_phases_stack_the_per_iteration_medians(result):
    table = plot.phase_table(result)
    assert list(table.columns) == ["inputs_set", "run", "outputs_get"]
    assert table.loc["flat", "run"] == pytest.approx(1.0)
    assert table.loc["flat", "inputs_set"] == pytest.approx(0.1)
    ax = plot.phases(result).axes[0]
    assert "(ms)" in ax.get_ylabel() and SOURCE in ax.get_title(loc="left")
    bars = {}
    for p in ax.patches:
        bars.setdefault(p.get_gid(), []).append(p)
    run = bars["phase:run"]
    np.testing.assert_allclose([p.get_height() for p in run], table["run"].fillna(0))
    # stacked: run sits on inputs_set
    np.testing.assert_allclose([p.get_y() for p in run], table["inputs_set"].fillna(0))
    assert "1.15 ms" in [t.get_text() for t in ax.texts]


def test_memory_plan_has_one_bar_per_lifetime():
    report = models.load_report("mobilenet_v2", "rk3588")
    spans = report.lifetimes()
    ax = plot.memory_plan(report).axes[0]
    bars = [p for p in ax.patches if (p.get_gid() or "").startswith("tensor:")]
    assert len(bars) == len(spans)
    by_name = {p.get_gid()[len("tensor:"):]: p for p in bars}
    for t in spans:
        p = by_name[t.tensor]
        assert p.get_x() == t.first_layer
        assert p.get_width() == t.last_layer - t.first_layer + 1
        assert p.get_y() == pytest.approx(t.start / 1024)
        assert p.get_height() == pytest.approx(t.size / 1024)
    # reuse is visible: two tensors alive at different layers share offsets
    assert any(a.overlaps(b) and not a.alive_with(b) for a in spans for b in spans if a is not b)
    note = " ".join(t.get_text() for t in ax.texts)
    assert f"{report.total_internal_size / 1024:,.0f} KiB" in note
    assert f"{report.naive_activation_bytes() / 1024:,.0f} KiB" in note
    assert "KiB" in ax.get_ylabel() and "layer" in ax.get_xlabel()
    assert "RK3588" in ax.get_title(loc="left")
    # by name works too
    assert len(plot.memory_plan("mobilenet_v2").axes[0].patches) == len(spans)


def test_gantt_draws_the_calls_of_the_window(result):
    ax = plot.gantt(result, "flat", iterations=(WARMUP, WARMUP + 2)).axes[0]
    c = result.calls
    c = c[(c["variant"] == "flat") & (c["iteration"] >= WARMUP) & (c["iteration"] <= WARMUP + 2)]
    bars = [p for p in ax.patches if (p.get_gid() or "").startswith("calls:")]
    assert len(bars) == len(c) == 9
    runs = sorted((p for p in bars if p.get_gid() == "calls:run"), key=lambda p: p.get_x())
    np.testing.assert_allclose([p.get_width() for p in runs], 1.0)  # 1 ms each
    t0 = c["start_s"].min()
    np.testing.assert_allclose([p.get_x() for p in runs],
                               (c[c["function"] == "run"]["start_s"] - t0) * 1e3)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["thread 0"]
    assert "(ms)" in ax.get_xlabel() and SOURCE in ax.get_title(loc="left")
    ax2 = plot.gantt(result, "flat", lanes="thread_ctx").axes[0]
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["thread 0 / ctx 1"]


def test_overview_and_draw_into_given_axes(result):
    import matplotlib.pyplot as plt
    figs = plot.overview(result)
    assert len(figs) == 4
    fig, axes = plt.subplots(1, 2)
    assert plot.memory(result, "rss", ax=axes[0]) is fig
    assert plot.phases(result, ax=axes[1]) is fig


def test_gantt_core_lanes():
    from harness_results import make_result
    r = make_result()
    run = r["flat"]
    run.calls["core_mask"] = [4 if i % 2 else 1 for i in range(len(run.calls["function"]))]
    r._cache.clear()
    ax = plot.gantt(r, "flat", lanes="core").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["NPU CORE_0", "NPU CORE_2"]
