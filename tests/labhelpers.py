"""What the lab notebook tests share: the check cells of a lab, the rule that a solution cell
overrides its stub, the two editions run with nbclient (instructor: every check PASSED in
under 60 s; student: solution cells removed, runs to the end, every check NOT PASSED with a
hint and no traceback), and the summary that cannot be forged.  Each tests/test_checks*.py
keeps its own lab's particulars."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Set, Tuple

import pytest

#: the budget of one edition of a lab, on the simulator (seconds)
LAB_SECONDS = 60


def check_cells(nb) -> list:
    """The code cells that call a check (``checks.check_...``)."""
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("checks.check_")]


def defined_names(source: str) -> Set[str]:
    """The functions and variables a cell defines at top level."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def stub(*args, **kwargs):
    """An exercise left as the student edition hands it out."""
    raise NotImplementedError("your code here")


def assert_failed(result, *words: str) -> str:
    """``result`` is a failed check, shown without a traceback and naming every one of ``words``;
    returns what it shows."""
    text = repr(result)
    assert result.status == "failed" and not result.passed, text
    assert "Traceback" not in text
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    return text


def assert_failed_with_hint(result, *words: str) -> str:
    """:func:`assert_failed`, and the failure comes with a hint and names none of the course's
    source texts; returns what it shows."""
    text = assert_failed(result, *words)
    assert result.hint, text
    assert "seed 0" not in text.lower()
    return text


def read_saved_lab(lab: Path, headings: Iterable[str]) -> Tuple[Any, str]:
    """The lab as committed: valid nbformat 4, saved without outputs, at least five check cells, and
    every one of ``headings`` in its markdown.  Returns the notebook and its markdown text."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(lab, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit without outputs"
    assert len(check_cells(nb)) >= 5
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for heading in headings:
        assert heading in text, heading
    return nb, text


def assert_solutions_override_their_stubs(nb) -> None:
    """The cell before a solution is the stub: the solution defines the same names, so it overrides it."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        if "solution" in (cell.metadata.get("tags") or []):
            assert defined_names(cell.source) >= defined_names(code[k - 1].source) > set(), cell.source[:80]


def check_outputs(nb, html: bool = False) -> List[Tuple[str, str]]:
    """(source, text shown) of every check cell of an executed notebook; each shows exactly one
    result and no error (``html``: the result also has a text/html view)."""
    out = []
    for cell in check_cells(nb):
        texts = [o["data"]["text/plain"] for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{cell.source}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        assert len(texts) == 1, f"{cell.source}: no check result shown"
        if html:
            assert "text/html" in [k for o in cell.outputs if o.get("output_type") == "execute_result" for k in o["data"]]
        out.append((cell.source.strip(), texts[0]))
    return out


def run_edition(execute_notebook: Callable[..., float], lab: Path, edition: str,
                html: bool = False) -> Tuple[List[Tuple[str, str]], float]:
    """Run ``edition`` of the lab with the ``execute_notebook`` fixture (raises
    CellExecutionError if any cell fails): its check outputs and the seconds taken."""
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    if edition == "student":
        # the student edition is what the book and the notebook tests execute: share that run
        nb = student_run(lab)
        return check_outputs(nb, html=html), 0.0
    nb = apply_edition(nbformat.read(lab, as_version=4), edition)
    elapsed = execute_notebook(nb, lab)
    return check_outputs(nb, html=html), elapsed


def student_run(notebook: Path) -> Any:
    """A copy of the student edition of ``notebook`` as executed once this session
    (tests/notebook_runs.py); it has no solution cell."""
    import copy

    from notebook_runs import ROOT, executed
    nb = copy.deepcopy(executed(str(Path(notebook).resolve().relative_to(ROOT))).nb)
    assert not any("solution" in (c.metadata.get("tags") or []) for c in nb.cells)
    return nb


def assert_instructor_edition_passes(execute_notebook: Callable[..., float], lab: Path,
                                     n_checks: Optional[int] = None, html: bool = False) -> None:
    """Every check PASSED (``n_checks`` of them when given), within the lab's budget."""
    results, elapsed = run_edition(execute_notebook, lab, "instructor", html=html)
    if n_checks is not None:
        assert len(results) == n_checks
    for source, text in results:
        assert text.startswith("PASSED"), f"{source}\n{text}"
    assert elapsed < LAB_SECONDS, f"the instructor edition took {elapsed:.0f} s (budget {LAB_SECONDS} s)"


def assert_student_edition_is_not_done(execute_notebook: Callable[..., float], lab: Path,
                                       n_checks: Optional[int] = None, min_checks: int = 0,
                                       says_not_done_yet: bool = True, html: bool = False) -> None:
    """Runs to the end; every check NOT PASSED (``says_not_done_yet``: and "not done yet") with a
    hint and no traceback; ``n_checks`` of them when given, at least ``min_checks``."""
    results, _ = run_edition(execute_notebook, lab, "student", html=html)
    if n_checks is not None:
        assert len(results) == n_checks
    assert len(results) >= min_checks
    for source, text in results:
        assert text.startswith("NOT PASSED") and (not says_not_done_yet or "not done yet" in text), \
            f"{source}\n{text}"
        assert "Hint:" in text and "Traceback" not in text, text


def edition_tests(lab: Path, n_checks: int) -> Tuple[Callable[..., None], Callable[..., None]]:
    """The two edition tests of a lab with ``n_checks`` checks, for a test module to bind to
    the names pytest collects::

        test_lab_instructor_edition_passes_every_check, test_lab_student_edition_runs_and_reports_not_done = \
            lh.edition_tests(LAB, n_checks=5)
    """
    @pytest.mark.timeout(300)
    def test_lab_instructor_edition_passes_every_check(execute_notebook) -> None:
        assert_instructor_edition_passes(execute_notebook, lab, n_checks=n_checks)

    @pytest.mark.timeout(300)
    def test_lab_student_edition_runs_and_reports_not_done(execute_notebook) -> None:
        assert_student_edition_is_not_done(execute_notebook, lab, n_checks=n_checks)

    return test_lab_instructor_edition_passes_every_check, test_lab_student_edition_runs_and_reports_not_done


def assert_summary_cannot_be_forged(checks: Any, exercise: str, check_name: str) -> None:
    """A result built by hand and put into ``checks.results()`` does not reach the store, and
    while the lab module's ``check_name`` is replaced by a function that returns one, the
    summary says the check was replaced (and stops saying so once the real check is back)."""
    forged = checks.CheckResult(exercise, "passed", "trust me")
    checks.results()[exercise] = forged
    assert checks.results().get(exercise) is not forged
    real = getattr(checks, check_name)
    try:
        setattr(checks, check_name, lambda *a, **k: forged)
        assert "was replaced" in repr(checks.summary())
    finally:
        setattr(checks, check_name, real)
    assert "was replaced" not in repr(checks.summary())
