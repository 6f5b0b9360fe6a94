"""Lab 4's notebook with its checks, on the simulator.

The lab runs twice with nbclient: as is (instructor edition: every check PASSED, the
notebook's own solutions run end to end) and with the cells tagged ``solution`` removed
(student edition: runs to the end, every check NOT PASSED, "not done yet", with a hint
and no traceback).  The checks themselves are tried, wrong answer by wrong answer, in
tests/test_checks_lab04.py; their shared machinery in tests/test_checks_core.py.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("pandas")
pytest.importorskip("onnxruntime")


ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab04_output_reuse.ipynb"


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")


# =========================================================================== the notebook
def _check_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("checks.check_")]


def _defined_names(source: str) -> set:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_lab_notebook_structure() -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(LAB, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit without outputs"
    assert len(_check_cells(nb)) >= 5
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for heading in ("**Questions**", "**Objectives**", "## Key points", "## Further reading",
                    "**A widely copied recipe says**", "★", "(15 min)"):
        assert heading in text
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        if "solution" in (cell.metadata.get("tags") or []):
            # the cell before is the stub: the solution defines the same names, so it overrides it
            assert _defined_names(cell.source) >= _defined_names(code[k - 1].source) > set(), cell.source[:80]



def _check_outputs(nb):
    out = []
    for cell in _check_cells(nb):
        texts = [o["data"]["text/plain"] for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{cell.source}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        assert len(texts) == 1, f"{cell.source}: no check result shown"
        assert "text/html" in [k for o in cell.outputs if o.get("output_type") == "execute_result" for k in o["data"]]
        out.append((cell.source.strip(), texts[0]))
    return out



@pytest.mark.timeout(300)
def test_lab_instructor_edition_passes_every_check(execute_notebook) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "instructor")
    elapsed = execute_notebook(nb, LAB)
    results = _check_outputs(nb)
    for source, text in results:
        assert text.startswith("PASSED"), f"{source}\n{text}"
    assert elapsed < 60, f"the instructor edition took {elapsed:.0f} s (budget 60 s)"


@pytest.mark.timeout(300)
def test_lab_student_edition_runs_and_reports_not_done(execute_notebook) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "student")
    assert not any("solution" in (c.metadata.get("tags") or []) for c in nb.cells)
    execute_notebook(nb, LAB)   # raises CellExecutionError if any cell fails
    results = _check_outputs(nb)
    assert len(results) >= 5
    for source, text in results:
        assert text.startswith("NOT PASSED"), f"{source}\n{text}"
        assert "Hint:" in text and "Traceback" not in text, text
