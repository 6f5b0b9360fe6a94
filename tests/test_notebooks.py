"""Every listed notebook runs top to bottom on the simulator.

Each notebook in NOTEBOOKS is executed with nbclient in its own directory,
with RKNNLAB_BACKEND=sim, at most TIMEOUT seconds per notebook. A failure
names the notebook, the cell and the error. Append your notebook to NOTEBOOKS
once it runs.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]

#: notebooks to execute, relative to the repository root
NOTEBOOKS = [
    "chapters/00_setup.ipynb",
    "chapters/01_memory_layers.ipynb",
    "chapters/02_lifecycle.ipynb",
    "chapters/04_output_reuse.ipynb",
]

#: seconds for a whole notebook (the course's budget is 60 s each on the simulator)
TIMEOUT = 120


def _failing_cell(nb) -> str:
    """'cell N (code cell M): Error: message' for the first cell with an error output."""
    code_index = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code_index += 1
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                source = "\n".join("    " + line for line in cell.source.splitlines()[:12])
                return (f"cell {index} (code cell {code_index}): {output.get('ename')}: "
                        f"{output.get('evalue')}\n  source:\n{source}")
    return "no cell has an error output"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_on_the_simulator(notebook: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = ROOT / notebook
    assert path.exists(), f"{notebook} is listed in tests/test_notebooks.py but does not exist"
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    # the kernel must import the rknnlab of this checkout, with this Python
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "lib")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as exc:
        pytest.fail(f"{notebook}: a cell ran longer than {TIMEOUT} s: {exc}", pytrace=False)
    except nbclient.exceptions.CellExecutionError:
        pytest.fail(f"{notebook}, {_failing_cell(nb)}", pytrace=False)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT, f"{notebook} took {elapsed:.0f} s (budget {TIMEOUT} s)"
