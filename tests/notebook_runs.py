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
executed here with nbclient, once per session, and kept in the session's directory.

A session may be several processes (pytest-xdist's workers, tests/session.py): each
notebook has a lock, held while one process takes it from the cache or executes it, so
the others wait for that run and take it instead of executing the notebook again.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from unittest import mock
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

import session

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "_build" / ".jupyter_cache" / "sim"
#: seconds for a whole notebook (the course's budget is 60 s each on the simulator)
TIMEOUT = 120
#: when this session began (the same in every process of the session)
SESSION_STARTED = session.started()

_runs: Dict[str, "Run"] = {}
_cache_ready = False


@dataclass
class Run:
    nb: object          # the executed notebook (nbformat.NotebookNode), student edition
    seconds: float      # how long its execution took
    from_book: bool     # True when the book's build (or another process) executed it in this session


def _student_edition(notebook: str):
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    return apply_edition(nbformat.read(str(ROOT / notebook), as_version=4), "student", "en")


def _lock_name(notebook: str) -> str:
    return "notebook-" + notebook.replace("/", "__")


def executed(notebook: str) -> Run:
    """``notebook`` (a path relative to the repository) executed on the simulator in this
    session; fails the calling test with the failing cell's message if it does not run."""
    if notebook in _runs:
        return _runs[notebook]
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    with session.lock(_lock_name(notebook)):
        if importlib.util.find_spec("jupyter_cache") is None:
            # the lab extra alone (the Python 3.9 run in CI) has no jupyter-cache: run it here
            run = _kept(notebook) or _execute_without_cache(notebook, _student_edition(notebook))
        else:
            run = _execute_with_cache([notebook], n_jobs=1)[notebook]
    if isinstance(run, str):
        pytest.fail(run, pytrace=False)
    _runs[notebook] = run
    return run


def execute_ahead(notebooks: Sequence[str]) -> None:
    """Execute those of ``notebooks`` that no process of the session has executed yet,
    one per CPU at a time, through the cache that the course book's build reads: the build
    then executes none of them again. A notebook another process is executing is left to
    it; one that fails is left for the build to report."""
    if importlib.util.find_spec("jupyter_cache") is None:
        return
    todo = [nb for nb in notebooks if nb not in _runs]
    at_once = os.cpu_count() or 1
    while todo:
        # lock only the notebooks about to run: a test that needs a later one meanwhile
        # executes it itself instead of waiting for the whole list
        held, batch = [], []
        try:
            while todo and len(batch) < at_once:
                notebook = todo.pop(0)
                f = session.acquire(_lock_name(notebook), blocking=False)
                if f is not None:
                    held.append(f)
                    batch.append(notebook)
            for notebook, run in _execute_with_cache(batch, n_jobs=len(batch)).items():
                if not isinstance(run, str):
                    _runs[notebook] = run
        finally:
            for f in held:
                session.release(f)


def _execute_with_cache(notebooks: List[str], n_jobs: int) -> Dict[str, object]:
    """Each of ``notebooks`` from the cache (executed this session) or executed into it: its
    Run, or the failure's message (the caller holds the notebooks' locks)."""
    if not notebooks:
        return {}
    from rknnlab.book.execute import Job, execute_all, resolve_backend
    global _cache_ready
    if not _cache_ready:
        # jupyter-cache creates its database on first use: not in two processes at once
        from jupyter_cache import get_cache
        with session.lock("jupyter-cache"):
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            get_cache(str(CACHE_DIR)).list_cache_records()
        _cache_ready = True
    jobs = [Job(nb, _student_edition(nb), (ROOT / nb).parent, nb) for nb in notebooks]
    report = execute_all(jobs, CACHE_DIR, resolve_backend("sim"), timeout=TIMEOUT, n_jobs=n_jobs,
                         log=lambda s: None, executed_since=SESSION_STARTED)
    out: Dict[str, object] = {}
    for nb in notebooks:
        result = report.results[nb]
        out[nb] = result.error if result.error else Run(result.nb, result.seconds, result.from_cache)
    return out


def _kept(notebook: str):
    """The run another process of this session executed without the cache, if any."""
    kept = session.directory() / (_lock_name(notebook) + ".ipynb")
    if not kept.exists():
        return None
    import nbformat
    data = json.loads(kept.read_text(encoding="utf-8"))
    return Run(nbformat.reads(data["nb"], as_version=4), float(data["seconds"]), True)


def _execute_without_cache(notebook: str, nb):
    import nbclient
    import nbformat
    path = ROOT / notebook
    env = {"RKNNLAB_BACKEND": "sim",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    started = time.monotonic()
    with mock.patch.dict(os.environ, env):
        try:
            nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}}).execute()
        except nbclient.exceptions.CellExecutionError as exc:
            return f"{notebook}: {exc}"
    run = Run(nb, time.monotonic() - started, False)
    kept = session.directory() / (_lock_name(notebook) + ".ipynb")
    tmp = kept.with_suffix(".tmp")
    tmp.write_text(json.dumps({"nb": nbformat.writes(nb), "seconds": run.seconds}), encoding="utf-8")
    tmp.replace(kept)
    return run


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
