"""Each course notebook executed at most once per test session, shared by every test
that needs it to run or needs its outputs.

The course book's build (tests/test_book_browser.py, the ``course_site`` fixture) executes
every ready notebook on the simulator through jupyter-cache, into
``_build/.jupyter_cache/sim``. :func:`executed` takes a notebook from that cache when it was
executed there during this session (an entry from an earlier session may come from
another version of the library, so it is executed again); otherwise it executes the
notebook through the same cache, so the build and the other tests reuse that run.
Only notebooks that ran without an error are cached, so a cached run is a passing run.
Without jupyter-cache (the lab extra alone, as in CI's Python 3.9 run) the notebook is
executed here with nbclient, once per session.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from unittest import mock
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "_build" / ".jupyter_cache" / "sim"
#: seconds for a whole notebook (the course's budget is 60 s each on the simulator)
TIMEOUT = 120
#: when this session began (this module is imported while pytest collects)
SESSION_STARTED = time.time()

_runs: Dict[str, "Run"] = {}


@dataclass
class Run:
    nb: object          # the executed notebook (nbformat.NotebookNode), student edition
    seconds: float      # how long its execution took
    from_book: bool     # True when the book's build executed it in this session


def _student_edition(notebook: str):
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    return apply_edition(nbformat.read(str(ROOT / notebook), as_version=4), "student", "en")


def executed(notebook: str) -> Run:
    """``notebook`` (a path relative to the repository) executed on the simulator in this
    session; fails the calling test with the failing cell's message if it does not run."""
    if notebook in _runs:
        return _runs[notebook]
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = _student_edition(notebook)
    if importlib.util.find_spec("jupyter_cache") is None:
        # the lab extra alone (the Python 3.9 run in CI) has no jupyter-cache: run it here
        run = _execute_without_cache(notebook, nb)
        _runs[notebook] = run
        return run
    from rknnlab.book.execute import Job, execute_all, resolve_backend
    path = ROOT / notebook
    report = execute_all([Job(notebook, nb, path.parent, notebook)], CACHE_DIR,
                         resolve_backend("sim"), timeout=TIMEOUT, n_jobs=1, log=lambda s: None,
                         executed_since=SESSION_STARTED)
    result = report.results[notebook]
    if result.error:
        pytest.fail(result.error, pytrace=False)
    run = Run(result.nb, result.seconds, result.from_cache)
    _runs[notebook] = run
    return run


def _execute_without_cache(notebook: str, nb) -> Run:
    import nbclient
    path = ROOT / notebook
    env = {"RKNNLAB_BACKEND": "sim",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    started = time.monotonic()
    with mock.patch.dict(os.environ, env):
        try:
            nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}}).execute()
        except nbclient.exceptions.CellExecutionError as exc:
            pytest.fail(f"{notebook}: {exc}", pytrace=False)
    return Run(nb, time.monotonic() - started, False)


def printed(notebook: str) -> Dict[int, str]:
    """What each code cell of ``notebook``'s run printed (streams and its value), by the
    cell's index in the executed notebook."""
    out = {}
    for index, cell in enumerate(executed(notebook).nb.cells):
        if cell.cell_type != "code":
            continue
        text = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                text.append(o["text"])
            elif o.get("output_type") == "execute_result":
                text.append(o["data"].get("text/plain", ""))
        out[index] = "".join(text)
    return out
