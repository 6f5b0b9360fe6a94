"""`python -m rknnlab book build` on the fixture book (tests/fixtures/book: test data)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bookhelpers as bh

bh.book_needs()

from bs4 import BeautifulSoup  # noqa: E402  (nbconvert's dependency)

from rknnlab.book.build import BookBuildError, build_book  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def exec_lines():
    p = bh.exec_log()
    return p.read_text().splitlines() if p.exists() else []


def html_pages(site: Path):
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


def test_clean_build_executes_every_notebook_in_toc_order():
    rep = bh.build("student")
    site = rep.out_dir
    assert site == (bh.WORK / "_build" / "html").resolve()
    assert rep.pages == ["chapters/01_figure", "labs/lab01_exercise"]
    assert sorted(rep.executed) == sorted(rep.pages) and rep.cached == []
    assert sorted(exec_lines()) == ["01_figure sim", "lab01_exercise sim"]
    assert rep.planned == ["chapters/03_planned.ipynb", "chapters/04_draft.ipynb"]
    # navigation: the sidebar lists the pages in book.toml's order, under the parts' captions
    index = soup(site / "index.html")
    nav = [a["href"] for a in index.select("nav.bd-docs-nav a.reference.internal") if a["href"] != "#"]
    assert nav == ["chapters/01_figure.html", "labs/lab01_exercise.html"]
    assert "Part one" in [c.get_text(strip=True) for c in index.select("nav.bd-docs-nav p.caption")]
    # planned / draft-without-file entries: plain text on the index page, no page, no link
    text = index.get_text(" ", strip=True)
    assert "A chapter only planned" in text and "A draft not written yet" in text
    assert "Not yet written" in text
    assert not (site / "chapters" / "03_planned.html").exists()
    assert not any("03_planned" in (a.get("href") or "") for a in index.find_all("a"))
    # search is there
    assert (site / "search.html").is_file() and (site / "searchindex.js").is_file()


def test_figures_land_in_images_and_are_embedded_in_the_page():
    site = bh.build("student").out_dir
    images = list((site / "_images").glob("*.png"))
    assert images, "the figure of 01_figure should be written to _images/"
    page = soup(site / "chapters" / "01_figure.html")
    srcs = [img["src"] for img in page.select("article img")]
    assert any(s.startswith("../_images/") for s in srcs), srcs
    for s in srcs:
        assert (site / "chapters" / s).resolve().is_file(), s


def test_a_dropdown_answer_is_folded_in_a_closed_details():
    """`:class: dropdown` (answers to Predict questions, lab hints): the theme alone shows
    them open, the answer right under its question; JupyterLab folds them, so must the book."""
    page = soup(bh.build("student").out_dir / "chapters" / "01_figure.html")
    answer = page.find(string=lambda s: s and "folded answer: nine" in s)
    assert answer is not None
    box = answer.find_parent("details")
    assert box is not None and not box.has_attr("open"), "the answer is not folded"
    assert box.summary.get_text(strip=True) == "Answer"
    assert "Predict" in box.find_previous("p").get_text()
    hint = page.find(string=lambda s: s and "nested hint" in s).find_parent("details")
    assert hint is not None and not hint.has_attr("open") and "tip" in hint["class"]
    outer = hint.find_parent("details")
    assert outer is not None and outer.summary.get_text(strip=True) == "Going further"


def test_every_page_says_which_backend_produced_the_outputs_and_when():
    site = bh.build("student").out_dir
    for name in ("chapters/01_figure.html", "labs/lab01_exercise.html"):
        note = soup(site / name).select_one(".rknnlab-provenance")
        assert note is not None, name
        t = note.get_text(" ", strip=True)
        assert "simulated RK3588 — rknnlab sim" in t, t
        assert re.search(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", t), t
        assert re.search(r"Page built \d{4}-\d\d-\d\d \d\d:\d\d UTC", t), t
    # the kernel ran with RKNNLAB_BACKEND set to the backend
    assert "backend for this kernel: sim" in (site / "chapters" / "01_figure.html").read_text()


def test_student_edition_has_no_solution_cell_but_keeps_the_prompt():
    site = bh.build("student").out_dir
    lab = site / "labs" / "lab01_exercise.html"
    html = lab.read_text(encoding="utf-8")
    assert "Write" in html and "double(x)" in html           # the exercise prompt stays
    for page in html_pages(site):
        text = page.read_text(encoding="utf-8")
        assert "FIXTURE-SOLUTION-TEXT" not in text, page
        assert "tag_solution" not in text, page
    assert "double is defined: False" in soup(lab).get_text()  # executed without the solution


def test_instructor_edition_keeps_solutions_visibly_marked():
    before = len(exec_lines())
    rep = bh.build("instructor")
    site = rep.out_dir
    assert site.name == "html-instructor"
    # the chapter has no solution cell: same code as in the student edition, so cached
    assert rep.cached == ["chapters/01_figure"] and rep.executed == ["labs/lab01_exercise"]
    assert exec_lines()[before:] == ["lab01_exercise sim"]
    page = soup(site / "labs" / "lab01_exercise.html")
    cells = page.select("div.cell.tag_solution")
    assert len(cells) == 1 and "FIXTURE-SOLUTION-TEXT" in cells[0].get_text()
    marker = cells[0].find_previous(class_="rknnlab-solution-marker")
    assert marker is not None and "Solution (instructor edition)" in marker.get_text()
    assert "double is defined: True" in page.get_text()


def test_rebuild_with_nothing_changed_executes_nothing_and_is_fast():
    bh.build("student")
    before = exec_lines()
    t0 = time.monotonic()
    rep = build_book(bh.WORK / "book.toml", edition="student", backend="sim", log=lambda s: None)
    elapsed = time.monotonic() - t0
    assert rep.executed == [] and sorted(rep.cached) == ["chapters/01_figure", "labs/lab01_exercise"]
    assert exec_lines() == before, "a rebuild with nothing changed must not start a kernel"
    assert elapsed < 60, f"cached rebuild took {elapsed:.1f} s"


def test_no_remote_assets_in_the_site():
    site = bh.build("student").out_dir
    remote = re.compile(r"^\s*(https?:)?//", re.I)
    bad = []
    for page in html_pages(site):
        s = soup(page)
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"),
                          ("source", "src"), ("video", "src"), ("audio", "src")):
            for el in s.find_all(tag):
                v = el.get(attr)
                if v and remote.match(v):
                    bad.append(f"{page.relative_to(site)}: <{tag} {attr}={v}>")
        for style in s.find_all("style"):
            bad += [f"{page.relative_to(site)}: {u}" for u in re.findall(r"url\(\s*['\"]?https?://[^)]*\)",
                                                                         style.get_text())]
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        bad += [f"{css.relative_to(site)}: {u}" for u in
                re.findall(r"(?:@import\s+(?:url\()?\s*['\"]?https?://[^;]*|url\(\s*['\"]?https?://[^)]*\))", text)]
    assert not bad, "remote assets:\n" + "\n".join(bad)
    # MathJax, if a page needed it, is the local no-op script
    assert (site / "_static" / "rknnlab-nomath.js").is_file()


def test_zh_build_falls_back_to_english_with_a_visible_note():
    before = len(exec_lines())
    rep = bh.build("student", lang="zh")
    assert rep.out_dir.name == "html-zh"
    assert rep.fallbacks == ["chapters/01_figure", "labs/lab01_exercise"]
    assert rep.executed == [] and len(exec_lines()) == before  # same notebooks: cached
    page = soup(rep.out_dir / "chapters" / "01_figure.html")
    assert page.html.get("lang", "").startswith("zh")
    note = page.select_one(".rknnlab-fallback")
    assert note is not None and "尚未翻译" in note.get_text()
    assert "测试书" in (rep.out_dir / "index.html").read_text(encoding="utf-8")


def test_failing_notebook_fails_the_build_naming_notebook_cell_and_error(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(bh.FIXTURE, book)
    with pytest.raises(BookBuildError) as e:
        build_book(book / "book-failing.toml", log=lambda s: None)
    msg = str(e.value)
    assert "chapters/02_broken.ipynb, cell 3 (code cell 2): ZeroDivisionError: division by zero" in msg, msg
    assert "y = x / 0  # FIXTURE-BROKEN-CELL" in msg
    assert not (book / "_build" / "html" / "index.html").exists()
    # the command line: exit 1, the same message on stderr
    proc = subprocess.run([sys.executable, "-m", "rknnlab", "book", "build", "--book",
                           str(book / "book-failing.toml")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "book build failed" in proc.stderr
    assert "chapters/02_broken.ipynb, cell 3" in proc.stderr and "ZeroDivisionError" in proc.stderr


def test_a_changed_notebook_is_executed_again_alone():
    import nbformat
    bh.build("student")
    path = bh.WORK / "labs" / "lab01_exercise.ipynb"
    original = path.read_text(encoding="utf-8")
    try:
        nb = nbformat.read(str(path), as_version=4)
        nb.cells[-1].source += "\nprint('changed')"
        nbformat.write(nb, str(path))
        rep = build_book(bh.WORK / "book.toml", edition="student", backend="sim", log=lambda s: None)
        assert rep.executed == ["labs/lab01_exercise"] and rep.cached == ["chapters/01_figure"]
        assert "changed" in (rep.out_dir / "labs" / "lab01_exercise.html").read_text(encoding="utf-8")
    finally:
        path.write_text(original, encoding="utf-8")
        bh._built.clear()


def test_missing_ready_notebook_is_a_clear_error(tmp_path):
    from rknnlab.book.config import BookConfigError
    book = tmp_path / "book"
    shutil.copytree(bh.FIXTURE, book)
    (book / "labs" / "lab01_exercise.ipynb").unlink()
    with pytest.raises(BookConfigError, match=r"labs/lab01_exercise.ipynb does not exist.*draft"):
        build_book(book / "book.toml", log=lambda s: None)


def test_a_page_dropped_from_book_toml_leaves_the_site_and_every_sidebar():
    bh.build("student")
    toml = bh.WORK / "book.toml"
    original = toml.read_text(encoding="utf-8")
    try:
        toml.write_text(original.replace('file = "labs/lab01_exercise.ipynb"',
                                         'file = "labs/lab01_exercise.ipynb"\nstatus = "planned"'),
                        encoding="utf-8")
        rep = build_book(toml, edition="student", backend="sim", log=lambda s: None)
        assert rep.pages == ["chapters/01_figure"] and rep.executed == []
        assert not (rep.out_dir / "labs" / "lab01_exercise.html").exists()
        chapter = soup(rep.out_dir / "chapters" / "01_figure.html")
        assert not chapter.select('nav.bd-docs-nav a[href*="lab01_exercise"]')
    finally:
        toml.write_text(original, encoding="utf-8")
        bh._built.clear()


def test_a_widget_shows_a_picture_of_itself_not_its_repr():
    """No widget manager on a static page: the fixture's IntSlider must not print its
    Python repr (`IntSlider(value=3, ...)`), but a picture of the slider drawn from the
    widget's state when the notebook ran, captioned."""
    page = soup(bh.build("student").out_dir / "labs" / "lab01_exercise.html")
    outputs = " ".join(o.get_text() for o in page.select("div.cell_output"))
    assert outputs and "IntSlider(" not in outputs
    snap = page.select_one(".rknnlab-widget-snapshot")
    assert snap is not None and "fixture" in snap.get_text()
    slider = snap.select_one('input[type="range"]')
    assert slider is not None and slider.get("value") == "3" and slider.has_attr("disabled")
    caption = page.select_one(".rknnlab-widget-caption")
    assert caption is not None and "in JupyterLab it is live" in caption.get_text()


def test_one_search_box_and_no_right_hand_column():
    """The header bar has no search button (the sidebar has one), and the page's contents
    sit in the left sidebar, leaving the width to the text (the browser test measures it)."""
    page = soup(bh.build("student").out_dir / "chapters" / "01_figure.html")
    assert not page.select(".bd-header .search-button__button")
    assert len(page.select(".bd-sidebar-primary .search-button__button")) == 1
    assert page.select_one(".bd-sidebar-primary nav.page-toc") is not None
    assert not page.select(".bd-sidebar-secondary nav.page-toc")


def test_a_notebook_without_code_cells_gets_no_simulator_note():
    """The glossary runs nothing: "outputs produced by the simulator" would be untrue there."""
    import nbformat
    from rknnlab.book import editions
    words = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Glossary\n\nterms")])
    noted = editions.add_notes(words, "en", "the rknnlab simulator", "now")
    assert "rknnlab-provenance" not in "".join(c.source for c in noted.cells)
    code = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Chapter"),
                                           nbformat.v4.new_code_cell("1 + 1")])
    noted = editions.add_notes(code, "en", "the rknnlab simulator", "now")
    assert "rknnlab-provenance" in noted.cells[1].source
