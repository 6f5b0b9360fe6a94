"""The Lab 7 notebook (labs/lab07_misconceptions.ipynb), on the simulator: its structure (a
review lab of eight exercises, each linking back to the sections it reviews, through anchors that
exist), the canonical sentences word for word, and its two editions (instructor: every check
PASSED in under 60 s; student: solution cells removed, every check NOT PASSED, "not done yet")."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import labhelpers as lh
from rknnlab.checks import _lab07_review as review
from rknnlab.checks import lab07 as checks

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab07_misconceptions.ipynb"

pytestmark = pytest.mark.usefixtures("simulator")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _read():
    nbformat = pytest.importorskip("nbformat")
    return nbformat.read(LAB, as_version=4)


def _slug(heading: str) -> str:
    """The anchor the book and JupyterLab give a heading: lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"\s+", "-", text).strip("-")


def _anchors(notebook: Path) -> set:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(notebook, as_version=4)
    return {_slug(line.lstrip("#")) for c in nb.cells if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("#")}


def _assert_solutions_override_their_stubs(nb) -> None:
    """labhelpers' rule for Python cells; a %%writefile solution (exercise 8's C program) writes the
    same file as the cell before it."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        if "solution" not in (cell.metadata.get("tags") or []):
            continue
        if cell.source.startswith("%%writefile"):
            assert code[k - 1].source.split("\n", 1)[0] == cell.source.split("\n", 1)[0], cell.source[:80]
        else:
            assert lh.defined_names(cell.source) >= lh.defined_names(code[k - 1].source) > set(), cell.source[:80]


def test_lab_notebook_structure() -> None:
    nb, text = lh.read_saved_lab(LAB, (
        "**Questions**", "**Objectives**", "## Key points", "## Further reading", "## Your results",
        "**The check**", "**The C it stands for:**", ":class: dropdown", "**Predict**",
        "Lab 7 has eight exercises, more than the other labs: it reviews the whole course."))
    assert "seed 00" not in text.lower()
    _assert_solutions_override_their_stubs(nb)
    headings = [c.source.split("\n")[0] for c in nb.cells if c.source.startswith("## Exercise")]
    numbers = [int(h.split()[2]) for h in headings]
    assert numbers[:4] == [1, 2, 3, 4] and numbers == sorted(numbers), headings
    titles = [h.split(": ", 1)[1] for h in headings[:4]]
    assert titles == [t.split(" — ", 1)[1] for t in checks.EXERCISES[:4]]
    minutes = [int(re.search(r"\((\d+) min\)", h).group(1)) for h in headings[:4]]
    assert minutes == sorted(minutes) == [5, 10, 10, 15], minutes          # rising
    for cell in nb.cells:   # a C program the student edits (exercise 8's %%writefile) is one file, not a step
        if cell.cell_type == "code" and not cell.source.startswith("%%writefile"):
            assert len(cell.source.splitlines()) <= 25, cell.source[:80]
    # every exercise of 1-4 says which chapter sections it reviews, right under its heading
    for h in headings[:4]:
        cell = next(c for c in nb.cells if c.source.startswith(h))
        assert re.search(r"\*Reviews \[Chapter \d §\d\]\(", cell.source.split("\n", 3)[2]), cell.source[:200]


def test_lab_links_back_to_sections_that_exist() -> None:
    text = "\n".join(c.source for c in _read().cells if c.cell_type == "markdown")
    links = set(re.findall(r"\]\(\.\./chapters/([\w.]+\.ipynb)#([\w-]+)\)", text))
    assert len({f for f, _ in links}) >= 6, links                 # the whole course: chapters 1-7
    for notebook, anchor in sorted(links):
        path = ROOT / "chapters" / notebook
        if not path.exists():
            pytest.skip(f"{notebook} is not written yet")
        assert anchor in _anchors(path), f"{notebook}#{anchor}"
    header = _read().cells[0].source
    for n in range(1, 9):                                         # the table: one row per exercise
        assert re.search(rf"^\| {n}\. .*\| \d+ \| \[Chapter", header, re.M), n


def test_lab_teaches_the_canonical_sentences_word_for_word() -> None:
    nb = _read()
    text = _flat("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    key_points = _flat(next(c.source for c in nb.cells if c.source.startswith("## Key points")))
    for rule in (review.ALIGN_RULE, review.ERROR_RULE, review.REUSE_RULE, review.OUTPUT_SIZE_RULE,
                 review.C2_RULE):
        assert _flat(rule) in text and _flat(rule) in key_points, rule
    assert _flat(review.BOUND_SIZE_RULE) in text
    header = _flat(nb.cells[0].source)
    for rule in (checks.RULE_SRAM, checks.RULE_MAX_ONCE, review.ALIGN_RULE, review.REUSE_RULE):   # R7b, R7c
        assert _flat(rule) in header and _flat(rule) in key_points, rule
    assert "as Rockchip's demos do" not in text


def test_lab_objectives_have_chapter_sevens_verbs() -> None:
    """One objective per verb of chapter 7's header, in its order, each naming its exercises."""
    chapter = ROOT / "chapters" / "07_misconceptions.ipynb"
    if not chapter.exists():
        pytest.skip("chapter 7 is not written yet")
    nbformat = pytest.importorskip("nbformat")
    verbs = re.findall(r"- \*\*(\w+)\*\*", nbformat.read(chapter, as_version=4).cells[0].source)
    header = _read().cells[0].source
    assert re.findall(r"\d\. (?:★ )?\*\*(\w+)\*\*", header) == verbs == ["Size", "Diagnose", "Choose", "Fix"]
    assert "4. ★ **Fix**" in header


def test_lab_rules_are_chapter_sevens_words() -> None:
    """R7a and R7d: the chapter's key points hold the lab's sentences, word for word."""
    chapter = ROOT / "chapters" / "07_misconceptions.ipynb"
    if not chapter.exists():
        pytest.skip("chapter 7 is not written yet")
    nbformat = pytest.importorskip("nbformat")
    text = _flat("\n".join(c.source for c in nbformat.read(chapter, as_version=4).cells
                           if c.cell_type == "markdown"))
    for rule in (review.ALIGN_RULE, review.ERROR_RULE):
        assert _flat(rule) in text, rule


def test_no_answer_in_a_cell_a_student_sees() -> None:
    """The sizes of exercise 1 are in its solution cell only: the folded answer after the check
    explains them without the numbers (the student edition keeps it: JupyterLab review J-2)."""
    nb = _read()
    k = next(k for k, c in enumerate(nb.cells) if c.source.strip().startswith("checks.check_sizes"))
    assert nb.cells[k + 1].source.startswith("```{admonition} Answer")
    sizes = [f"{n:,}" for n in (4 * 480 * 480 * 16, 480 * 480 * 8, 1000 * 4)] + ["128 B", "64 B"]
    for cell in nb.cells:
        if "solution" not in cell.metadata.get("tags", []):
            assert not [n for n in sizes if n in cell.source], cell.source[:200]


def test_header_says_how_links_open_and_what_the_summary_is() -> None:
    header = _flat(_read().cells[0].source)
    assert ("In JupyterLab a § link opens the notebook at its top: use the Table of Contents (left bar) to "
            "reach the section.") in header
    assert "The summary at the end is for you. A grade re-runs your functions in a fresh kernel." in header


def test_exercise_8_wrong_claim_is_folded_above_the_program() -> None:
    """Spot the bug first: the wrong-claim box is folded and comes before the program to fix;
    no text describes a PASSED box the student has not seen (JupyterLab review J-5)."""
    nb = _read()
    box = next(k for k, c in enumerate(nb.cells) if "Wrong claim: keeping the output buffers" in c.source)
    stub = next(k for k, c in enumerate(nb.cells) if c.source.startswith("%%writefile"))
    assert box < stub and ":class: dropdown" in nb.cells[box].source
    assert not any("passing lines" in c.source.lower() for c in nb.cells)


def test_code_lines_fit_the_editor_and_metadata_is_jupyterlabs() -> None:
    """No code line over 100 columns (the editor at 1366 px); the kernelspec JupyterLab writes,
    so the notebook does not open modified (JupyterLab review J-15)."""
    nb = _read()
    ex5 = next(k for k, c in enumerate(nb.cells) if c.source.startswith("## Exercise 5"))
    for k, cell in enumerate(nb.cells):      # exercises 1-4 and the C program of exercise 8
        if cell.cell_type == "code" and (k < ex5 or cell.source.startswith("%%writefile")):
            assert all(len(line) <= 100 for line in cell.source.splitlines()), cell.source[:80]
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.metadata["kernelspec"]["display_name"] != "Python 3"


def _n_checks() -> int:
    return len(lh.check_cells(_read()))


@pytest.mark.timeout(300)
def test_lab_instructor_edition_passes_every_check(execute_notebook) -> None:
    lh.assert_instructor_edition_passes(execute_notebook, LAB, n_checks=_n_checks())


@pytest.mark.timeout(300)
def test_lab_student_edition_runs_and_reports_not_done(execute_notebook) -> None:
    n = _n_checks()
    assert n >= 4
    lh.assert_student_edition_is_not_done(execute_notebook, LAB, n_checks=n)
