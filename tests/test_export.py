"""`python -m rknnlab export NOTEBOOK --to html`: one self-contained, offline HTML file."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bookhelpers as bh

bh.book_needs()

import nbformat  # noqa: E402
from bs4 import BeautifulSoup  # noqa: E402

from rknnlab.book.build import BookBuildError  # noqa: E402
from rknnlab.book.export import export_notebook  # noqa: E402

pytestmark = pytest.mark.timeout(600)

# a 1x1 PNG
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201e221bc330000000049454e44ae426082")


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export") / "book"
    shutil.copytree(bh.FIXTURE, root)
    return root


def remote_refs(html: str):
    s = BeautifulSoup(html, "html.parser")
    bad = [f"<{el.name} {a}={el.get(a)}>" for el in s.find_all(["script", "link", "img", "iframe"])
           for a in ("src", "href") if re.match(r"\s*(https?:)?//", el.get(a) or "")]
    for style in s.find_all("style"):
        bad += re.findall(r"(?:@import[^;]*https?://[^;]*|url\(\s*['\"]?https?://[^)]*\))", style.get_text())
    return bad


def test_export_is_one_self_contained_file_with_the_figure_inline(book):
    out = export_notebook(book / "chapters" / "01_figure.ipynb", backend="sim", log=lambda s: None)
    assert out == book / "_build" / "export" / "01_figure.html"
    html = out.read_text(encoding="utf-8")
    s = BeautifulSoup(html, "html.parser")
    imgs = [img["src"] for img in s.find_all("img")]
    assert imgs and all(src.startswith("data:image/") for src in imgs), imgs
    assert not s.find_all("script", src=True), "no external scripts (no require.js, no MathJax)"
    assert not s.find_all("link", href=True), "stylesheets are inline"
    assert remote_refs(html) == []
    note = s.select_one(".rknnlab-provenance")
    assert note is not None and "simulated RK3588 — rknnlab sim" in note.get_text()
    assert s.title.get_text() == "Fixture chapter: a figure"


def test_student_export_has_no_solution_and_instructor_export_marks_it(book):
    nb = book / "labs" / "lab01_exercise.ipynb"
    student = export_notebook(nb, edition="student", backend="sim", log=lambda s: None)
    text = student.read_text(encoding="utf-8")
    assert "FIXTURE-SOLUTION-TEXT" not in text
    assert not BeautifulSoup(text, "html.parser").select(".celltag_solution")
    assert "double(x)" in text  # the exercise prompt stays
    teacher = export_notebook(nb, edition="instructor", backend="sim", log=lambda s: None)
    assert teacher.name == "lab01_exercise-instructor.html"
    s = BeautifulSoup(teacher.read_text(encoding="utf-8"), "html.parser")
    cells = s.select(".celltag_solution")
    assert len(cells) == 1 and "FIXTURE-SOLUTION-TEXT" in cells[0].get_text()
    assert "Solution (instructor edition)" in s.select_one(".rknnlab-solution-marker").get_text()


def test_markdown_images_are_embedded_and_no_execute_keeps_saved_outputs(tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Pictures\n\n![a picture](pic.png)"),
        nbformat.v4.new_code_cell("1 + 1", execution_count=1, outputs=[
            nbformat.v4.new_output("execute_result", {"text/plain": "SAVED-OUTPUT"}, execution_count=1)]),
    ])
    nbformat.write(nb, str(tmp_path / "pics.ipynb"))
    out = export_notebook(tmp_path / "pics.ipynb", execute=False, out=tmp_path / "o.html",
                          log=lambda s: None)
    html = out.read_text(encoding="utf-8")
    assert "SAVED-OUTPUT" in html
    imgs = [img["src"] for img in BeautifulSoup(html, "html.parser").find_all("img")]
    assert imgs and imgs[0].startswith("data:image/png;base64,"), imgs


def test_cli_export_and_a_failing_notebook(book, tmp_path):
    out = tmp_path / "handout.html"
    proc = subprocess.run([sys.executable, "-m", "rknnlab", "export",
                           str(book / "chapters" / "01_figure.ipynb"), "--to", "html",
                           "--edition", "student", "--backend", "sim", "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and "data:image/png" in out.read_text(encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "rknnlab", "export",
                           str(book / "chapters" / "02_broken.ipynb"), "--backend", "sim",
                           "-o", str(tmp_path / "x.html")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "chapters/02_broken.ipynb, cell 3" in proc.stderr and "ZeroDivisionError" in proc.stderr
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(BookBuildError):
        export_notebook(book / "chapters" / "02_broken.ipynb", backend="sim", log=lambda s: None)


def test_myst_admonitions_become_html_boxes():
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.export import notebook_to_html
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "```{admonition} Errata: who frees the outputs\n:class: warning\n**Seed:** `rknn_deinit(ctx)`\n```\n\n"
        "::::{note}\nplain *note*\n::::")])
    page = notebook_to_html(nb, title="t")
    assert '<div class="admonition warning">' in page
    assert '<p class="admonition-title">Errata: who frees the outputs</p>' in page
    assert "<code>rknn_deinit(ctx)</code>" in page and ":class:" not in page
    assert '<div class="admonition note">' in page and "<em>note</em>" in page
    assert "{admonition}" not in page and "{note}" not in page


def test_instructor_export_frames_solutions_over_jupyterlabs_own_cell_style(book):
    """JupyterLab's `.jp-Cell { border: none; background: transparent }` comes after the
    book's CSS in an export: the solution rule must be more specific to keep the red frame
    (the browser test checks the computed style)."""
    out = export_notebook(book / "labs" / "lab01_exercise.ipynb", edition="instructor",
                          backend="sim", log=lambda s: None)
    html = out.read_text(encoding="utf-8")
    ours = html.index(".jp-Notebook .jp-Cell.celltag_solution")
    assert ".jp-Cell {" in html[ours:], "JupyterLab's cell rule comes later (else this test means nothing)"
    s = BeautifulSoup(html, "html.parser")
    assert s.body is not None and "jp-Notebook" in s.body.get("class", [])
    assert s.select(".jp-Notebook .jp-Cell.celltag_solution")
    # the widget: a note, not its repr
    outputs = " ".join(o.get_text() for o in s.select(".jp-OutputArea-output"))
    assert "IntSlider(" not in outputs and s.select_one(".rknnlab-widget-snapshot") is not None


def test_a_widget_without_a_stored_state_becomes_a_note():
    from rknnlab.book.editions import static_widgets
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2,
                                                         "version_minor": 0},
            "text/plain": "VBox(children=(HBox(children=(Dropdown(...)"}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("panel", outputs=[
        nbformat.v4.new_output("display_data", dict(view)),
        nbformat.v4.new_output("display_data", dict(view, **{"image/png": "AAAA"}))])])
    first, second = static_widgets(nb).cells[0].outputs
    assert "VBox(" not in str(first.data) and "works in JupyterLab" in first.data["text/html"]
    assert second.data["image/png"] == "AAAA", "a static rendering the output has is kept"


def test_dropdown_admonitions_are_folded_until_clicked():
    """`:class: dropdown` holds the answers to Predict questions and the lab hints:
    closed <details> in the export, as jupyterlab-myst folds them in JupyterLab."""
    nbformat = pytest.importorskip("nbformat")
    from bs4 import BeautifulSoup
    from rknnlab.book.export import notebook_to_html
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "Predict the size.\n\n```{admonition} Answer\n:class: dropdown\nThe answer is *forty-two*.\n```\n\n"
        "```{tip}\n:class: dropdown\nA folded hint.\n```\n\n```{note}\nAn open note.\n```")])
    page = BeautifulSoup(notebook_to_html(nb, title="t"), "html.parser")
    answer = page.find(string=lambda s: s and "forty-two" in s).find_parent("details")
    assert answer is not None and not answer.has_attr("open")
    assert answer.summary.get_text(strip=True) == "Answer"
    hint = page.find(string=lambda s: s and "A folded hint" in s).find_parent("details")
    assert hint is not None and not hint.has_attr("open") and "tip" in hint["class"]
    assert page.find(string=lambda s: s and "An open note" in s).find_parent("details") is None


def test_an_answer_inside_a_going_further_box_is_folded_too():
    nbformat = pytest.importorskip("nbformat")
    from bs4 import BeautifulSoup
    from rknnlab.book.export import notebook_to_html
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "````{admonition} Going further\n:class: dropdown\nOuter text.\n\n"
        "```{admonition} Answer\n:class: dropdown\nThe inner *answer*.\n```\n````")])
    page = BeautifulSoup(notebook_to_html(nb, title="t"), "html.parser")
    inner = page.find(string=lambda s: s and "The inner" in s).find_parent("details")
    assert inner is not None and inner.summary.get_text(strip=True) == "Answer"
    outer = inner.find_parent("details")
    assert outer is not None and outer.summary.get_text(strip=True) == "Going further"
    assert "{admonition}" not in str(page) and not inner.has_attr("open")
