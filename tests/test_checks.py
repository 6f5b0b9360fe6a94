"""Lab 4's notebook with its checks, on the simulator.

The lab runs twice with nbclient: as is (instructor edition: every check PASSED, the
notebook's own solutions run end to end) and with the cells tagged ``solution`` removed
(student edition: runs to the end, every check NOT PASSED, "not done yet", with a hint
and no traceback).  The checks themselves are tried, wrong answer by wrong answer, in
tests/test_checks_lab04.py; their shared machinery in tests/test_checks_core.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import labhelpers as lh

pytest.importorskip("pandas")
pytest.importorskip("onnxruntime")


ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab04_output_reuse.ipynb"


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")


# =========================================================================== the notebook
def test_lab_notebook_structure() -> None:
    nb, text = lh.read_saved_lab(LAB, ("**Questions**", "**Objectives**", "## Key points", "## Further reading",
                                       "**A widely copied recipe says**", "★", "(15 min)"))
    lh.assert_solutions_override_their_stubs(nb)


@pytest.mark.timeout(300)
def test_lab_instructor_edition_passes_every_check(execute_notebook) -> None:
    lh.assert_instructor_edition_passes(execute_notebook, LAB, html=True)


@pytest.mark.timeout(300)
def test_lab_student_edition_runs_and_reports_not_done(execute_notebook) -> None:
    lh.assert_student_edition_is_not_done(execute_notebook, LAB, min_checks=5, says_not_done_yet=False, html=True)
