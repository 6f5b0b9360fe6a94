"""The runner panel: pick a model and variants, run, watch memory and timing live.

    from rknnlab.widgets import RunnerPanel
    panel = RunnerPanel()          # model dropdown, variant checkboxes, iterations slider, Run
    panel                           # (display it; press Run)
    panel.result                    # after a run: the rknnlab Result

    RunnerPanel(iterations=300).run()   # or: run now, block, figures as cell outputs

The run happens in a background thread (the kernel stays responsive); the
progress bar and a live figure (RSS over time, time per iteration) update
from the child process's streamed samples, a few times a second.  When a
run started by the Run button ends, the panel shows the description and
the static figures (RSS of the measured loop, time per iteration, phases).

Everything a background thread shows goes into widget *values* (an Image
widget's PNG bytes, an HTML widget's text), never through an Output widget.
A headless executor (nbclient, hence nbconvert and the book build) copies
every output captured by an Output widget back into the kernel as comm
messages; a panel that drew into one left the kernel busy with them at
shutdown (KeyboardInterrupt in the kernel's log).

``run()`` is for notebooks that are executed headless: it runs at once and
displays the description and figures as ordinary cell outputs, which every
HTML export keeps.  The panel's text form (``text/plain``, what a page
without a widget manager falls back to) is a sentence, not the widget's
repr; the book replaces it with its own note.  Needs ipywidgets (the ``lab`` extra).
"""
from __future__ import annotations

import html
import io
import threading
from typing import Any, Dict, List, Optional, Sequence

from .experiment import variants as _variants
from .i18n import pick as L

#: variants offered by default (lite_gc_collect is left out: a gc.collect() per frame
#: makes it ten times slower than the others)
DEFAULT_VARIANTS = ("alloc_per_call", "leak_no_release", "prealloc_output", "zero_copy_io",
                    "rebind_each_iter", "reinit_each_iter", "want_float", "want_int8",
                    "lite_inference", "lite_reuse_outputs")

#: the prefix of every thread the panel starts (a test checks none outlives a run)
THREAD_PREFIX = "rknnlab-panel"


class LiveData:
    """Streamed progress, accumulated per variant (the panel's plot data).

    ``feed(msg)`` takes a runner progress message; ``rss[variant]`` is
    (t_s list, MiB list), ``iter_ms[variant]`` (iteration list, ms list)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.rss: Dict[str, tuple] = {}
        self.iter_ms: Dict[str, tuple] = {}
        self.done: Dict[str, int] = {}
        self.lock = threading.Lock()
        self.version = 0

    def feed(self, msg: Dict[str, Any]) -> None:
        name = msg["variant"]
        with self.lock:
            s = msg.get("samples") or {}
            if s.get("t_ns"):
                ts, ys = self.rss.setdefault(name, ([], []))
                for t, r in zip(s["t_ns"], s.get("rss_kb", [])):
                    if r is not None:
                        ts.append(t / 1e9)
                        ys.append(r / 1024)
            it = msg.get("iterations") or {}
            if it.get("iteration"):
                xs, ys = self.iter_ms.setdefault(name, ([], []))
                xs.extend(it["iteration"])
                ys.extend(d / 1e6 for d in it["duration_ns"])
                self.done[name] = it["iteration"][-1] + 1
            self.version += 1


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def result_figures(result) -> List[bytes]:
    """The panel's static figures of a run, as PNG bytes: RSS of the measured
    loop (where a leak shows), time per iteration, phases.

    Drawn on bare matplotlib Figures, not pyplot: safe in a background
    thread, and nothing is left open for the inline backend to show in a
    later cell.  MemFree is left out: one run cannot show its spread."""
    from matplotlib.figure import Figure
    from . import plot
    plot._speak()             # before the axes are made: their texts keep the font they were made with
    pngs = []
    for draw in (lambda ax: plot.memory(result, "rss", by_iteration=True, ax=ax),
                 lambda ax: plot.iteration_times(result, log=True, ax=ax),
                 lambda ax: plot.phases(result, ax=ax)):
        fig = Figure(figsize=plot.FIGSIZE, layout="constrained")
        draw(fig.subplots())
        pngs.append(_png(fig))
    return pngs


def live_figure(live: LiveData) -> bytes:
    """RSS over time and time per iteration so far, as PNG bytes (thread-safe)."""
    from matplotlib.figure import Figure
    from .plot import _speak
    _speak()                  # a CJK font when the figure's text is Chinese
    with live.lock:
        rss = {k: (list(a), list(b)) for k, (a, b) in live.rss.items()}
        its = {k: (list(a), list(b)) for k, (a, b) in live.iter_ms.items()}
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    a1, a2 = fig.subplots(1, 2)
    for i, (name, (t, y)) in enumerate(rss.items()):
        a1.plot(t, y, label=name, color=f"C{i}")
    for i, (name, (x, y)) in enumerate(its.items()):
        a2.plot(x, y, label=name, color=f"C{i}", linewidth=0.8)
    a1.set_xlabel(L("time (s)", "时间（s）"))
    a1.set_ylabel(L("RSS (MiB)", "RSS（MiB）"))
    a1.set_title(L("RSS of the variant's process (live)", "变体进程的 RSS（实时）"), fontsize=9, loc="left")
    a2.set_xlabel(L("iteration", "迭代"))
    a2.set_ylabel(L("time per iteration (ms)", "每次迭代的时间（ms）"))
    a2.set_title(L("Time per iteration (live)", "每次迭代的时间（实时）"), fontsize=9, loc="left")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
        if a.lines:
            a.legend(fontsize=7)
    return _png(fig)


class RunnerPanel:
    """Model dropdown, variant checkboxes, iterations slider, Run button,
    progress bar, a live figure; after a run, the description and the static figures."""

    def __init__(self, models: Optional[Sequence[str]] = None,
                 variants: Sequence[str] = DEFAULT_VARIANTS, iterations: int = 200,
                 backend: str = "auto", sample_hz: float = 200.0, refresh_s: float = 0.5,
                 **run_kwargs: Any) -> None:
        import ipywidgets as w
        from . import models as _models
        self.backend = backend
        self.sample_hz = sample_hz
        self.refresh_s = refresh_s
        self.run_kwargs = run_kwargs
        self.result = None
        self.error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        self._live_data: Optional[LiveData] = None
        self._below = True        # run(): the description and figures go under the cell
        names = list(models) if models is not None else _models.list_models()
        self.model = w.Dropdown(options=names, value="mobilenet_v2" if "mobilenet_v2" in names else names[0],
                                description="model")
        self.checks = {v: w.Checkbox(value=v in ("leak_no_release", "prealloc_output"), description=v,
                                     indent=False, layout=w.Layout(width="210px"))
                       for v in variants if v in _variants.BUILTIN}
        self.iterations = w.IntSlider(value=iterations, min=10, max=2000, step=10,
                                      description="iterations", continuous_update=False)
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="", bar_style="info")
        self.status = w.HTML(value="")
        self.live = w.Image(format="png", layout=w.Layout(display="none"))
        self.report = w.HTML(value="")
        self.figures = w.VBox([])
        self.button.on_click(lambda _b: self.start())
        self.widget = w.VBox([
            w.HBox([self.model, self.iterations]),
            w.HBox(list(self.checks.values()), layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self.button, self.progress, self.status]),
            self.live, self.report, self.figures])

    # ------------------------------------------------------------------ display
    def static_text(self) -> str:
        """The panel's text form: what a frontend without widgets shows instead of the form."""
        return (f"Runner panel: model {self.model.value}, variants {', '.join(self.selected) or 'none'}, "
                f"{self.iterations.value} iterations. It is interactive in JupyterLab; "
                "a static page cannot run it.")

    def _repr_mimebundle_(self, **kwargs: Any) -> Dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}   # None once the widget is closed
        text = self.static_text()
        bundle["text/plain"] = text     # not the widget's repr, VBox(children=(HBox(...
        return bundle

    @property
    def selected(self) -> List[str]:
        return [name for name, box in self.checks.items() if box.value]

    # ------------------------------------------------------------------ running
    def start(self, show_in_panel: bool = True) -> None:
        """Start a run in a background thread (what the Run button does).

        ``show_in_panel``: put the description and figures into the panel
        when the run ends (``run()`` puts them under the cell instead)."""
        if self._thread is not None and self._thread.is_alive():
            return
        chosen = self.selected
        if not chosen:
            self.status.value = "<b>pick at least one variant</b>"
            return
        n = int(self.iterations.value)
        warmup = int(self.run_kwargs.get("warmup", 10))
        live = LiveData(total=(n + warmup) * len(chosen))
        self.progress.max = live.total
        self.progress.value = 0
        self.progress.bar_style = "info"
        self.button.disabled = True
        self.report.value = ""
        self.figures.children = ()
        self.status.value = f"running {html.escape(', '.join(chosen))} ..."
        self._live_data = live
        self._thread = threading.Thread(target=self._run, args=(chosen, n, live, show_in_panel),
                                        daemon=True, name=THREAD_PREFIX)
        self._thread.start()

    def run(self, timeout: Optional[float] = None, show: bool = True) -> Any:
        """Run with the panel's current choices, block until done, and show the
        description and static figures as ordinary outputs of the calling cell.

        Use this in notebooks that are executed headless (book builds,
        nbconvert): a button click never happens there, and ordinary cell
        outputs, unlike a widget's, are in every HTML export.  ``show=False``
        shows only the form: for a notebook that prints what it needs from the
        result (the description and figures repeat what the page showed already)."""
        from IPython.display import display
        display(self)
        self._below = show
        self.start(show_in_panel=False)
        result = self.wait(timeout)
        if show:
            self.show()
        return result

    def show(self) -> None:
        """Display the last result's description and figures in the current cell."""
        from IPython.display import Image, display
        if self.result is None:
            print("no result yet" + (f": {self.error}" if self.error else ""))
            return
        print(self.result.describe())
        for png in result_figures(self.result):
            display(Image(data=png, format="png"))

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until the run ends; returns the result (for scripts and tests)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.result

    def _run(self, chosen: List[str], n: int, live: LiveData, show_in_panel: bool) -> None:
        from . import run
        stop = threading.Event()
        drawer = threading.Thread(target=self._draw_loop, args=(live, stop), daemon=True,
                                  name=f"{THREAD_PREFIX}-draw")
        drawer.start()
        try:
            self.result = run(chosen, model=self.model.value, iterations=n, backend=self.backend,
                              sample_hz=self.sample_hz, on_progress=live.feed, **self.run_kwargs)
            self.error = None
        except BaseException as exc:  # shown in the panel; the kernel goes on
            self.error = exc
        finally:
            stop.set()
            drawer.join()
        try:
            self._finish(show_in_panel)
        finally:
            self.button.disabled = False

    def _draw_loop(self, live: LiveData, stop: threading.Event) -> None:
        seen = -1
        while not stop.wait(self.refresh_s):
            if live.version != seen:
                seen = live.version
                self._draw_live(live)

    def _draw_live(self, live: LiveData) -> None:
        with live.lock:
            done = sum(live.done.values())
        self.progress.value = min(done, self.progress.max)
        self.live.value = live_figure(live)
        self.live.layout.display = None

    def _finish(self, show_in_panel: bool) -> None:
        self.live.layout.display = "none"
        if self.error is not None:
            self.progress.bar_style = "danger"
            self.status.value = (f"<b>run failed:</b> {html.escape(type(self.error).__name__)}: "
                                 f"{html.escape(str(self.error))}")
            return
        r = self.result
        self.progress.value = self.progress.max
        self.progress.bar_style = "success" if not r.errors else "warning"
        problems = "; ".join(f"{k}: {v}" for k, v in r.errors.items())
        self.status.value = "done" + (f" — {html.escape(problems)}" if problems else "")
        if show_in_panel:
            self.report.value = f"<pre>{html.escape(r.describe())}</pre>"
            import ipywidgets as w
            self.figures.children = tuple(w.Image(value=png, format="png") for png in result_figures(r))
        elif self._below:
            self.status.value += ": the description and figures are below"
