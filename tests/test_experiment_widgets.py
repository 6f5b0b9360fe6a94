"""rknnlab.widgets: the runner panel runs in the background, updates live and ends with the static figures,
leaves no thread behind, and leaves a headless kernel (nbclient, the book build) quiet at shutdown."""
from __future__ import annotations

import threading

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
    assert "lite_inference" in panel.checks  # RKNNLite runs on the simulator too
    assert "lite_gc_collect" not in panel.checks  # ten times slower: not offered by default
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
    # the Run button's path: description and figures inside the panel
    assert "prealloc_output" in panel.report.value
    assert [len(img.value) > 1000 and img.value[:4] == b"\x89PNG" for img in panel.figures.children] == [True] * 3
    assert panel.live.layout.display == "none"          # the live figure gives way to the static ones


def test_run_shows_figures_as_cell_outputs_and_leaves_no_thread(monkeypatch):
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, *a, **k: shown.append(obj))
    before = {t.ident for t in threading.enumerate()}
    panel = widgets.RunnerPanel(backend=BACKEND, iterations=20, refresh_s=0.05, warmup=2)
    result = panel.run(120)
    assert result is not None and panel.error is None, panel.error
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == [], f"threads still alive after run(): {left}"
    assert shown[0] is panel                              # the form (its static line on a page)
    assert [type(o).__name__ for o in shown[1:]] == ["Image"] * 3
    assert all(o.data[:4] == b"\x89PNG" for o in shown[1:])
    assert panel.figures.children == ()                   # not twice: the figures are under the cell
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert not bundle["text/plain"].startswith("VBox(")
    assert "interactive in JupyterLab" in bundle["text/plain"]


def test_run_without_show_displays_only_the_form(monkeypatch):
    """run(show=False): the notebook prints what it needs; no description, no figures, and the
    status does not point below the cell."""
    import IPython.display
    shown, printed = [], []
    monkeypatch.setattr(IPython.display, "display", lambda obj, *a, **k: shown.append(obj))
    monkeypatch.setattr("builtins.print", lambda *a, **k: printed.append(a))
    before = {t.ident for t in threading.enumerate()}
    panel = widgets.RunnerPanel(backend=BACKEND, iterations=20, refresh_s=0.05, warmup=2)
    result = panel.run(120, show=False)
    assert result is not None and panel.error is None, panel.error
    assert result.summary.loc["leak_no_release", "iterations"] == 20
    assert shown == [panel] and printed == []
    assert panel.status.value == "done" and panel.figures.children == () and panel.report.value == ""
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == [], f"threads still alive after run(): {left}"


def test_panel_in_a_headless_kernel_leaves_it_quiet(tmp_path, monkeypatch):
    """nbclient copies whatever an Output widget captures back into the kernel as comm messages;
    a panel that drew into one from its threads left the kernel busy with them when the
    notebook ended, and the shutdown's SIGINT landed in a comm handler (KeyboardInterrupt and
    "Got events for closed stream" in the kernel's log, while the build said ok)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from nbclient import output_widget
    sent_to_kernel = []
    real_publish = output_widget.OutputWidget._publish_msg

    def spy(self, msg_type, *args, **kwargs):
        sent_to_kernel.append(msg_type)
        return real_publish(self, msg_type, *args, **kwargs)

    monkeypatch.setattr(output_widget.OutputWidget, "_publish_msg", spy)
    monkeypatch.setenv("RKNNLAB_BACKEND", BACKEND)
    source = ("from rknnlab.widgets import RunnerPanel\n"
              "panel = RunnerPanel(iterations=60, warmup=2, refresh_s=0.1)\n"
              "result = panel.run()")              # the last cell, as in chapter 0
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    log = tmp_path / "kernel.log"
    with open(log, "w") as err:
        client.execute(stderr=err)
    kernel_log = log.read_text()
    for noise in ("Traceback", "KeyboardInterrupt", "closed stream", "Error"):
        assert noise not in kernel_log, kernel_log
    assert sent_to_kernel == [], f"the executor sent {len(sent_to_kernel)} comm message(s) back to the kernel"
    outputs = nb.cells[0].outputs
    panel_out = outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in panel_out
    assert panel_out["text/plain"].startswith("Runner panel"), panel_out["text/plain"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 3, [o.get("data", {}).keys() for o in outputs]


def test_panel_needs_a_variant():
    panel = widgets.RunnerPanel(backend=BACKEND)
    for box in panel.checks.values():
        box.value = False
    panel.start()
    assert "at least one" in panel.status.value
