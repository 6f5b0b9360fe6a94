"""rknnlab.widgets: the runner panel runs in the background, updates live and ends with the static figures."""
from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib", reason="the panel draws with matplotlib (the lab extra)")
matplotlib.use("Agg")
pytest.importorskip("ipywidgets", reason="the runner panel needs ipywidgets (the lab extra)")
pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")

from rknnlab import widgets  # noqa: E402

BACKEND = "sim"


def test_live_data_accumulates_progress():
    live = widgets.LiveData(total=20)
    live.feed({"variant": "a", "samples": {"t_ns": [1e9, 2e9], "rss_kb": [1024, None]},
               "iterations": {"iteration": [0, 1], "duration_ns": [2e6, 3e6]}})
    live.feed({"variant": "a", "samples": {}, "iterations": {"iteration": [2], "duration_ns": [1e6]}})
    assert live.rss["a"] == ([1.0], [1.0])
    assert live.iter_ms["a"] == ([0, 1, 2], [2.0, 3.0, 1.0])
    assert live.done == {"a": 3}


def test_panel_runs_and_shows_the_static_figures():
    panel = widgets.RunnerPanel(backend=BACKEND, iterations=20, refresh_s=0.1, warmup=2)
    assert panel.model.value == "mobilenet_v2"
    assert set(panel.selected) == {"leak_no_release", "prealloc_output"}
    assert "lite_inference" not in panel.checks  # board-only variants are not offered by default
    panel.checks["leak_no_release"].value = False
    panel.iterations.value = 30
    panel.start()
    result = panel.wait(120)
    assert panel.error is None, panel.error
    assert result.variants == ["prealloc_output"]
    assert result.summary.loc["prealloc_output", "iterations"] == 30
    assert panel.progress.value == panel.progress.max == 32
    assert panel.progress.bar_style == "success"
    assert panel.status.value == "done"
    assert not panel.button.disabled
    assert panel._live_data.done == {"prealloc_output": 32}
    # what headless notebooks use: the figures as ordinary outputs
    import matplotlib.figure
    shown = []
    import IPython.display
    real = IPython.display.display
    IPython.display.display = lambda obj, *a, **k: shown.append(obj)
    try:
        panel.show()
    finally:
        IPython.display.display = real
    assert [type(f) for f in shown] == [matplotlib.figure.Figure] * 4


def test_panel_needs_a_variant():
    panel = widgets.RunnerPanel(backend=BACKEND)
    for box in panel.checks.values():
        box.value = False
    panel.start()
    assert "at least one" in panel.status.value
