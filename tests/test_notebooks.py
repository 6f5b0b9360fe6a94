"""Every listed notebook runs top to bottom on the simulator.

Each notebook in NOTEBOOKS is executed on the simulator (RKNNLAB_BACKEND=sim) in its own
directory, at most TIMEOUT seconds per notebook, once per test session: the run is shared
with the course book's build and with the chapter tests that read its outputs
(tests/notebook_runs.py). A failure names the notebook, the cell and the error. Append
your notebook to NOTEBOOKS once it runs.
"""
from __future__ import annotations

import pytest

from notebook_runs import TIMEOUT, executed

#: notebooks to execute, relative to the repository root
NOTEBOOKS = [
    "chapters/00_setup.ipynb",
    "chapters/01_memory_layers.ipynb",
    "chapters/02_lifecycle.ipynb",
    "chapters/03_bottlenecks.ipynb",
    "chapters/04_output_reuse.ipynb",
    "chapters/05_allocation.ipynb",
    "chapters/06_video_pipeline.ipynb",
    "chapters/07_misconceptions.ipynb",
    "chapters/cheatsheet.ipynb",
]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_on_the_simulator(notebook: str) -> None:
    run = executed(notebook)
    errors = [o for cell in run.nb.cells if cell.cell_type == "code"
              for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{notebook}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    assert run.seconds < TIMEOUT, f"{notebook} took {run.seconds:.0f} s (budget {TIMEOUT} s)"
