"""The progress bar of ``rknnlab.run``: iterations done, across the variants.

Where the count comes from: each variant's process writes the iteration in
progress into a 16-byte shared file mapping (a plain memory store per
iteration, no system call, no message); the parent reads it ten times a
second while it waits for the process.  So the bar costs the measured loop
nothing it could see.

Where the bar goes (``progress=None``, the default, decides):

- in a Jupyter kernel that a person drives (JupyterLab, Notebook, VS Code):
  a widget (tqdm.notebook; text on stderr where ipywidgets is missing).
  When the run ends, the bar's output is replaced by an empty one, so a
  notebook saved or exported afterwards keeps no bar: the result is the
  record of the run, not its progress;
- in a kernel that executes a notebook unattended (nbclient, papermill, the
  book build): nothing.  Such a client cannot answer ``input()``
  (ipykernel's ``allow_stdin`` is False), and a bar there would only leave
  widget state or stderr noise in the executed notebook;
- elsewhere (the command line, a script): text on stderr when stderr is a
  terminal, nothing when it is a file or a pipe.

A run shorter than a second shows no bar at all.  ``progress=True`` forces
a bar (text on stderr outside a kernel), ``progress=False`` none; the
environment variable ``RKNNLAB_PROGRESS`` (``0``/``off`` or ``1``/``on``)
sets the default.  A caller that follows the run itself (``on_progress=``,
as rknnlab.widgets.RunnerPanel does) gets no bar unless it asks for one.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

ENV_PROGRESS = "RKNNLAB_PROGRESS"
#: a run shorter than this shows no bar at all (seconds)
DELAY_S = 1.0
_OFF = ("0", "off", "no", "false")
_ON = ("1", "on", "yes", "true")


def _kernel_driven_by_a_person() -> Optional[bool]:
    """None outside a Jupyter kernel; in one, whether its client can answer
    input() (a person at a frontend) rather than execute a notebook unattended."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
    except Exception:
        return None
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    return bool(getattr(kernel, "_allow_stdin", True))


def choose(progress: Optional[bool] = None, follows_itself: bool = False) -> Optional[str]:
    """"notebook", "text" or None (no bar), for ``run(progress=...)``;
    ``follows_itself``: the caller passed on_progress (no bar by default)."""
    if progress is None and follows_itself:
        return None
    if progress is None:
        env = os.environ.get(ENV_PROGRESS, "").strip().lower()
        if env in _OFF:
            return None
        if env in _ON:
            progress = True
    if progress is False:
        return None
    person = _kernel_driven_by_a_person()
    if person is not None:
        return "notebook" if (person or progress) else None
    if progress:
        return "text"
    try:
        return "text" if sys.stderr is not None and sys.stderr.isatty() else None
    except (AttributeError, ValueError):
        return None


class RunProgress:
    """One bar for the whole run: ``total`` iterations (warm-up + measured,
    per variant), advanced by :meth:`at` with the iterations the current
    variant has done; :meth:`variant_done` fills the variant's share (one that
    stopped early included)."""

    def __init__(self, mode: Optional[str], n_variants: int, per_variant: int) -> None:
        self.mode = mode
        self.per_variant = per_variant
        self.n_variants = n_variants
        self._base = 0   # iterations of the variants already done
        self._shown = 0  # what the bar shows
        self._bar: Any = None
        self._handle: Any = None
        self._start = time.perf_counter()
        if mode is None:
            return
        total = n_variants * per_variant
        kw = dict(total=total, desc="rknnlab.run", unit="it", dynamic_ncols=True, smoothing=0.1)
        if mode == "notebook":
            try:
                from tqdm.notebook import tqdm as notebook_tqdm
                # shown (by _show) once the run has taken DELAY_S
                self._bar = notebook_tqdm(display=False, leave=False, **kw)
                return
            except Exception:  # no ipywidgets: text on stderr instead
                self._bar = None
                mode = self.mode = "text"
        from tqdm import tqdm
        self._bar = tqdm(file=sys.stderr, leave=True, mininterval=0.2, delay=DELAY_S, **kw)

    def _show(self) -> None:
        if (self.mode == "notebook" and self._handle is None and self._bar is not None
                and time.perf_counter() - self._start >= DELAY_S):
            from IPython.display import display
            self._handle = display(self._bar.container, display_id=True)

    def variant(self, k: int, name: str) -> None:
        """Variant ``k`` (0-based) named ``name`` starts."""
        if self._bar is not None:
            self._bar.set_postfix_str(f"{name} ({k + 1}/{self.n_variants})", refresh=False)

    def at(self, done: int) -> None:
        """The current variant has done ``done`` iterations."""
        self._to(self._base + min(max(done, 0), self.per_variant))

    def variant_done(self) -> None:
        self._base += self.per_variant
        self._to(self._base)

    def _to(self, n: int) -> None:
        self._show()
        if self._bar is not None and n > self._shown:
            self._bar.update(n - self._shown)
            self._shown = n

    def close(self) -> None:
        bar, self._bar = self._bar, None
        if bar is None:
            return
        bar.close()
        if self.mode == "notebook":  # leave no bar in the saved notebook
            try:
                bar.container.close()
            except Exception:
                pass
            if self._handle is not None:
                self._handle.update({"text/plain": ""}, raw=True)
