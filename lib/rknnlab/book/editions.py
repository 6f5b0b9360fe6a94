"""Editions and the cells the build adds to a notebook.

* student edition: every cell tagged ``solution`` is removed (the exercise prompt, in
  its own cell, stays);
* instructor edition: solution cells stay, each preceded by a visible marker
  "Solution (instructor edition)", and they keep their ``solution`` tag, which becomes
  a CSS class (``tag_solution`` in the book, ``celltag_solution`` in an export) that
  draws them framed in red.

The build also adds a provenance note (which backend produced the outputs, on which
SoC, when) and, for a translation that is missing, a note saying the page falls back
to the default language. Added cells are markdown cells holding plain HTML, so they
render the same in the Sphinx book and in an nbconvert export. Every cell that came
from the source notebook records its position there in ``metadata.rknnlab.source_index``
so that an execution error can name the cell as the author sees it.
"""
from __future__ import annotations

import copy
import html
from typing import Optional

import nbformat

SOLUTION_TAG = "solution"
ADDED_TAG = "rknnlab-added"

_TEXT = {
    "en": {
        "solution": "Solution (instructor edition)",
        "solution_hint": "the next cell is left out of the student edition.",
        "outputs": "Outputs",
        "produced": "The outputs on this page were produced by {backend} on {when}.",
        "built": "Page built {built}.",
        "fallback_title": "Not yet translated",
        "fallback": "This page has no {lang} version yet: it is shown in {default}.",
        "widget": "Interactive widget (ipywidgets): it works in JupyterLab, not on a static "
                  "page. Any outputs below it come from the run made when this page was built.",
        "widget_snapshot": "A picture of the form as it was at the end of the run made when this "
                           "page was built; in JupyterLab it is live.",
    },
    "zh": {
        "solution": "参考答案（教师版）",
        "solution_hint": "学生版不包含下面这个单元格。",
        "outputs": "输出",
        "produced": "本页的输出由 {backend} 于 {when} 生成。",
        "built": "页面生成于 {built}。",
        "fallback_title": "尚未翻译",
        "fallback": "本页还没有{lang}版本，下面显示的是{default}原文。",
        "widget": "交互式控件（ipywidgets）：它在 JupyterLab 中可用，静态页面无法运行。"
                  "下面若有输出，来自生成本页时的那次运行。",
        "widget_snapshot": "这是生成本页时那次运行结束时表单的样子；在 JupyterLab 中它是可交互的。",
    },
}

#: replaced by the page's build time when Sphinx writes the page (see sphinx_ext)
BUILD_TIME_TOKEN = "RKNNLAB-BUILD-TIME"


def text(lang: str, key: str) -> str:
    return _TEXT.get(lang, _TEXT["en"]).get(key, _TEXT["en"][key])


def has_tag(cell, tag: str) -> bool:
    return tag in (cell.get("metadata", {}).get("tags") or [])


def apply_edition(nb: nbformat.NotebookNode, edition: str, lang: str = "en") -> nbformat.NotebookNode:
    """A copy of ``nb`` for ``edition`` ("student" or "instructor"), see the module doc."""
    if edition not in ("student", "instructor"):
        raise ValueError(f"edition {edition!r}: expected student or instructor")
    nb = copy.deepcopy(nb)
    cells = []
    for i, cell in enumerate(nb.cells):
        cell.setdefault("metadata", {}).setdefault("rknnlab", {})["source_index"] = i
        if has_tag(cell, SOLUTION_TAG):
            if edition == "student":
                continue
            cells.append(_added_markdown(
                f'<div class="rknnlab-solution-marker"><strong>{html.escape(text(lang, "solution"))}</strong>'
                f' — {html.escape(text(lang, "solution_hint"))}</div>', f"solution-{i}"))
        cells.append(cell)
    nb.cells = cells
    nb.metadata.setdefault("rknnlab", {})["edition"] = edition
    return nb


def has_solutions(nb) -> bool:
    return any(has_tag(cell, SOLUTION_TAG) for cell in nb.cells)


def student_copy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook a student works in (their workspace, see :mod:`rknnlab.workspace`):
    the student edition, without the build's bookkeeping (``metadata.rknnlab``), so every
    cell that stays is as the author wrote it."""
    nb = apply_edition(nb, "student")
    for cell in nb.cells:
        cell.metadata.pop("rknnlab", None)
    nb.metadata.pop("rknnlab", None)
    return nb


def _added_markdown(source: str, key: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["tags"] = [ADDED_TAG]
    # ids must be unique and stable (stable, so that an unchanged notebook stays unchanged)
    cell.id = f"rknnlab-{key}"
    return cell


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_STATIC_KINDS = ("text/html", "image/png", "image/svg+xml", "image/jpeg")


def static_widgets(nb: nbformat.NotebookNode, lang: str = "en") -> nbformat.NotebookNode:
    """A static page has no widget manager (no CDN), so a widget output would show its
    ``text/plain`` repr (``VBox(children=(HBox(...``). A widget output with a picture of the
    form (``text/html`` from :mod:`.widget_snapshot`, drawn when the notebook was executed)
    gets a caption saying what it is; one with another static rendering (HTML or an image)
    keeps it; one with none becomes a note saying what is there in JupyterLab."""
    from .widget_snapshot import SNAPSHOT_CLASS
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            if SNAPSHOT_CLASS in str(data.get("text/html", "")):
                caption = html.escape(text(lang, "widget_snapshot"))
                data["text/html"] = (f'{data["text/html"]}'
                                     f'<div class="rknnlab-widget-caption">{caption}</div>')
            elif not any(k in data for k in _STATIC_KINDS):
                note = html.escape(text(lang, "widget"))
                out["data"] = {"text/html": f'<div class="rknnlab-widget-note">{note}</div>',
                               "text/plain": text(lang, "widget")}
    return nb


def source_cell_number(cell) -> Optional[int]:
    """The cell's 1-based position in the source notebook (None for an added cell)."""
    i = cell.get("metadata", {}).get("rknnlab", {}).get("source_index")
    return None if i is None else i + 1


def add_notes(nb: nbformat.NotebookNode, lang: str, backend_label: str, executed_at: str,
              fallback_from: Optional[str] = None, default_lang_name: str = "English",
              lang_name: str = "", build_time: bool = True) -> nbformat.NotebookNode:
    """Insert the provenance note (and the missing-translation note) after the notebook's
    title cell (its first markdown cell that starts with a heading), else at the top.
    A notebook without code cells (the glossary) runs nothing, so it gets no provenance note."""
    nb = copy.deepcopy(nb)
    notes = []
    if any(cell.cell_type == "code" for cell in nb.cells):
        parts = [text(lang, "produced").format(
            backend=f"<strong>{html.escape(backend_label)}</strong>", when=html.escape(executed_at))]
        if build_time:
            parts.append(text(lang, "built").format(
                built=f'<span class="rknnlab-build-time">{BUILD_TIME_TOKEN}</span>'))
        notes.append(_added_markdown(
            '<div class="admonition note rknnlab-provenance">'
            f'<p class="admonition-title">{html.escape(text(lang, "outputs"))}</p>'
            f'<p>{" ".join(parts)}</p></div>', "provenance"))
    if fallback_from:
        notes.append(_added_markdown(
            '<div class="admonition warning rknnlab-fallback">'
            f'<p class="admonition-title">{html.escape(text(lang, "fallback_title"))}</p>'
            f'<p>{html.escape(text(lang, "fallback").format(lang=lang_name or lang, default=default_lang_name))}'
            '</p></div>', "fallback"))
    at = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            if cell.source.lstrip().startswith("#"):
                at = i + 1
            break
    nb.cells[at:at] = notes
    return nb
