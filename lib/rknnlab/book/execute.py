"""Execute notebooks through a cache (jupyter-cache), several at once.

The cache is keyed by the notebook's code cells (jupyter-cache's hash), one cache per
backend (``<build dir>/.jupyter_cache/<backend>``), so outputs made by the simulator are
never shown as the board's or the other way round; translations have a cache of their own
(``<backend>-zh``: :func:`cache_name`). A notebook whose code is unchanged is
not executed again; a notebook that fails is not cached (the next build retries it).
Kernels run with ``RKNNLAB_BACKEND`` set to the backend and the source notebook's
directory as their working directory, as in JupyterLab.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import nbformat

from .editions import source_cell_number

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class Backend:
    name: str        # "sim" | "native"
    label: str       # "the rknnlab simulator (simulated RK3588 — rknnlab sim)"
    reason: str = ""


def resolve_backend(requested: str = "auto") -> Backend:
    """The backend that will run the notebooks, and a label naming it and its SoC."""
    from .. import board
    name, reason = board.choose_backend(requested)
    if name == "sim":
        return Backend("sim", "the rknnlab simulator (simulated RK3588 — rknnlab sim)", reason)
    b = board.read_board()
    soc = (b.soc_variant or b.soc or "unknown SoC").upper()
    what = b.model or "a Rockchip board"
    ver = f", librknnrt {b.librknnrt_version_number}" if b.librknnrt_version_number else ""
    return Backend("native", f"the real NPU of {what} ({soc}{ver}) — rknnlab native", reason)


def cache_name(backend: str, cwd: Path) -> str:
    """The cache's folder name: the backend's, and the language the notebook's kernel speaks
    (rknnlab.i18n: a notebook in a zh folder).  A translation has the same code cells as its
    original, so jupyter-cache would hand it the original's outputs, whose check messages
    and figure labels are in the other language."""
    return f"{backend}-zh" if Path(cwd).name == "zh" else backend


@dataclass
class Job:
    key: str                       # e.g. the docname, for messages and results
    nb: nbformat.NotebookNode      # the notebook to execute (edition applied)
    cwd: Path                      # the kernel's working directory
    display_path: str              # the source notebook, as the author knows it


@dataclass
class Result:
    key: str
    nb: Optional[nbformat.NotebookNode] = None   # executed notebook (None if it failed)
    executed_at: str = ""                        # when its outputs were produced (UTC)
    seconds: float = 0.0                         # execution time (of the run that made them)
    from_cache: bool = False
    error: Optional[str] = None                  # the message naming notebook, cell and error


@dataclass
class ExecReport:
    results: Dict[str, Result] = field(default_factory=dict)

    @property
    def executed(self) -> List[str]:
        return [k for k, r in self.results.items() if not r.from_cache]

    @property
    def cached(self) -> List[str]:
        return [k for k, r in self.results.items() if r.from_cache]

    @property
    def errors(self) -> List[str]:
        return [r.error for r in self.results.values() if r.error]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


#: what an executed notebook in the cache holds; an entry of another format is executed
#: again (since 2, widget outputs carry a static picture: widget_snapshot)
CACHE_FORMAT = 3


def execute_all(jobs: Sequence[Job], cache_dir: Path, backend: Backend, timeout: int = 600,
                n_jobs: int = 0, log: Callable[[str], None] = print,
                executed_since: Optional[float] = None) -> ExecReport:
    """Execute (or take from the cache) every job's notebook. Never raises for a failing
    notebook: its Result has ``error`` set (all notebooks are tried, all errors reported).
    With ``executed_since`` (a time.time() value), a cached run made before then is not
    taken: the notebook is executed again (the tests use it to run each notebook once per
    session, since the cache's key is the notebook's code, not the library's).
    ``cache_dir`` is the backend's cache; a translation's run goes to its sibling
    (:func:`cache_name`)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    caches: Dict[str, Any] = {}

    def cache_of(job: Job) -> Any:
        name = cache_name(cache_dir.name, job.cwd)
        if name not in caches:
            (cache_dir.parent / name).mkdir(parents=True, exist_ok=True)
            caches[name] = get_cache(str(cache_dir.parent / name))
        return caches[name]

    report = ExecReport()
    todo: List[Job] = []
    for job in jobs:
        cache = cache_of(job)
        try:
            pk, merged = cache.merge_match_into_notebook(job.nb)
        except KeyError:
            todo.append(job)
            continue
        data = cache.get_cache_record(pk).data or {}
        if data.get("format") != CACHE_FORMAT or (
                executed_since is not None and float(data.get("executed_epoch", 0.0)) < executed_since):
            todo.append(job)
            continue
        report.results[job.key] = Result(job.key, merged, data.get("executed_at", "an earlier build"),
                                         float(data.get("seconds", 0.0)), from_cache=True)
    if not todo:
        return report

    env = {"RKNNLAB_BACKEND": backend.name, "JUPYTER_PLATFORM_DIRS": "1",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    workers = min(len(todo), n_jobs or os.cpu_count() or 1)
    log(f"executing {len(todo)} notebook(s) on {backend.label}, {workers} at a time "
        f"({len(report.results)} unchanged, taken from the cache)")
    logs = cache_dir.parent.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    args = [(nbformat.writes(j.nb), str(j.cwd), timeout,
             dict(env, RKNNLAB_KERNEL_LOG=str(logs / (j.display_path.replace("/", "__") + ".kernel.log"))))
            for j in todo]
    if workers == 1:
        outcomes = [_run_notebook(*a) for a in args]
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            outcomes = list(pool.map(_run_notebook, *zip(*args)))
    for job, out in zip(todo, outcomes):
        if out["ok"]:
            nb = nbformat.reads(out["nb"], as_version=4)
            executed_at = _now()
            cache_of(job).cache_notebook_bundle(
                CacheBundleIn(nb, job.display_path,
                              data={"format": CACHE_FORMAT, "executed_at": executed_at,
                                    "executed_epoch": time.time(), "seconds": out["seconds"],
                                    "backend": backend.name, "label": backend.label}),
                check_validity=False, overwrite=True)
            report.results[job.key] = Result(job.key, nb, executed_at, out["seconds"])
            log(f"  ok    {job.display_path} ({out['seconds']:.1f} s)")
        else:
            msg = describe_failure(job, out)
            report.results[job.key] = Result(job.key, error=msg)
            log(f"  FAIL  {job.display_path}")
    return report


def describe_failure(job: Job, out: dict) -> str:
    """"chapters/x.ipynb, cell 3 (`y = 1/0`): ZeroDivisionError: division by zero" + details."""
    idx = out.get("index")
    cell = job.nb.cells[idx] if idx is not None and 0 <= idx < len(job.nb.cells) else None
    where = job.display_path
    src = ""
    if cell is not None:
        n = source_cell_number(cell)
        code_no = sum(1 for c in job.nb.cells[: idx + 1] if c.cell_type == "code")
        where += f", cell {n if n is not None else idx + 1} (code cell {code_no})"
        src = cell.source
    ename, evalue = out.get("ename") or "Error", out.get("evalue") or ""
    msg = f"{where}: {ename}: {evalue}".rstrip(": ")
    details = []
    if src:
        details.append("the cell:\n" + "\n".join("    " + line for line in src.splitlines()))
    tb = _ANSI.sub("", out.get("traceback") or "").strip()
    if tb.startswith("An error occurred while executing") and tb.count("-" * 18) >= 2:
        tb = tb.split("-" * 18, 2)[2].strip()  # nbclient repeats the cell's source first
    if tb:
        lines = tb.splitlines()
        if len(lines) > 30:
            lines = ["    ..."] + lines[-30:]
        details.append("traceback:\n" + "\n".join("    " + line for line in lines))
    return msg + ("\n" + "\n".join(details) if details else "")


def _run_notebook(nb_json: str, cwd: str, timeout: int, env: Dict[str, str]) -> dict:
    """Execute one notebook (in a worker process). Returns a plain dict (picklable)."""
    os.environ.update(env)
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from .widget_snapshot import add_snapshots

    nb = nbformat.reads(nb_json, as_version=4)
    state: Dict[str, Optional[int]] = {"index": None}

    def on_start(cell=None, cell_index=None, **_):
        state["index"] = cell_index

    client = NotebookClient(nb, timeout=None if timeout < 0 else timeout, kernel_name="python3",
                            resources={"metadata": {"path": cwd}}, on_cell_start=on_start,
                            record_timing=False,
                            # the widgets' state: a static picture of each displayed widget is
                            # drawn from it below (and nbclient 0.11's Output-widget capture
                            # fails without it); the state itself is then dropped
                            store_widget_state=True)
    t0 = time.monotonic()
    # the kernel's own stderr (ipykernel's start-up warnings, a crash's last words) goes to a log
    log_path = env.get("RKNNLAB_KERNEL_LOG")
    kernel_err = open(log_path, "w", encoding="utf-8") if log_path else None
    try:
        client.execute(**({"stderr": kernel_err} if kernel_err else {}))
    except CellExecutionError as e:
        return {"ok": False, "index": state["index"], "ename": e.ename, "evalue": e.evalue,
                "traceback": e.traceback}
    except Exception as e:  # timeout, dead kernel, no kernel...
        hint = ""
        if type(e).__name__ == "CellTimeoutError":
            hint = f" (the cell ran longer than the timeout of {timeout} s; raise [build] timeout in book.toml)"
        if log_path:
            hint += f" (the kernel's log: {log_path})"
        return {"ok": False, "index": state["index"], "ename": type(e).__name__,
                "evalue": (str(e).strip().splitlines() or [""])[0][:500] + hint, "traceback": ""}
    finally:
        if kernel_err:
            kernel_err.close()
    add_snapshots(nb)
    nb.metadata.pop("widgets", None)
    return {"ok": True, "nb": nbformat.writes(nb), "seconds": time.monotonic() - t0}


def run_one(nb: nbformat.NotebookNode, cwd: Path, display_path: str, cache_dir: Path,
            backend: Backend, timeout: int = 600, log: Callable[[str], None] = print) -> Result:
    """Execute one notebook through the cache (for export)."""
    rep = execute_all([Job("nb", nb, cwd, display_path)], cache_dir, backend, timeout, 1, log)
    return rep.results["nb"]
