"""``python -m rknnlab export NOTEBOOK --to html``: one self-contained HTML file.

The notebook gets the edition applied (student: solution cells removed; instructor:
kept and marked), is executed through the same cache as the book (so exporting a
notebook the book has just built costs nothing), gets the provenance note, and is
written with nbconvert's HTMLExporter (JupyterLab look) with every image inline
(``embed_images``) and a template that loads nothing from the network.
"""
from __future__ import annotations

import copy
import html
import re
from pathlib import Path
from typing import Callable, Optional, Union

import nbformat

from . import editions
from .build import BookBuildError
from .config import BOOK_FILE
from .execute import resolve_backend, run_one

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"


def _book_root(nb_path: Path) -> Optional[Path]:
    for d in nb_path.resolve().parents:
        if (d / BOOK_FILE).is_file():
            return d
    return None


def export_notebook(notebook: Union[str, Path], to: str = "html", edition: str = "student",
                    out: Union[str, Path, None] = None, backend: str = "auto",
                    execute: bool = True, timeout: int = 600, lang: str = "en",
                    build_dir: Union[str, Path, None] = None,
                    log: Callable[[str], None] = print) -> Path:
    """Export ``notebook`` to one HTML file; returns its path.

    ``out`` defaults to ``<book root>/_build/export/<name>[-instructor].html`` (the book
    root is the nearest directory above the notebook holding book.toml; else the
    notebook's directory)."""
    if to != "html":
        raise ValueError(f"--to {to}: only html is supported")
    src = Path(notebook)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such notebook")
    root = _book_root(src) or src.resolve().parent
    build = Path(build_dir) if build_dir else root / "_build"
    try:
        display = src.resolve().relative_to(root).as_posix()
    except ValueError:
        display = str(src)
    nb = editions.apply_edition(nbformat.read(str(src), as_version=4), edition, lang)
    if execute:
        be = resolve_backend(backend)
        r = run_one(nb, src.resolve().parent, display, build / ".jupyter_cache" / be.name, be,
                    timeout, log)
        if r.error:
            raise BookBuildError(f"the notebook failed, so it was not exported:\n\n{r.error}")
        nb = editions.add_notes(r.nb, lang, be.label, r.executed_at, build_time=False)
    nb = editions.static_widgets(nb, lang)
    if out is None:
        out = build / "export" / (src.stem + ("" if edition == "student" else f"-{edition}") + ".html")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(notebook_to_html(nb, title=_title(nb, src.stem), path=src.resolve().parent),
                   encoding="utf-8")
    log(f"wrote {out} ({edition} edition)")
    return out


def _title(nb, default: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
            break
    return default


# ```{admonition} Title / ```{warning} ... up to the closing fence of the same length
_ADMONITION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<kind>admonition|note|tip|warning|important|caution|attention|danger|error|hint|seealso)\}"
    r"[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.DOTALL | re.MULTILINE)


def _admonitions_to_html(source: str) -> str:
    """MyST admonition blocks as HTML boxes: nbconvert's Markdown knows no MyST
    directives and would print them as code.  The book (myst-nb) renders them itself."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    def box(m: "re.Match[str]") -> str:
        kind, title, body = m.group("kind"), m.group("title").strip(), m.group("body")
        css = kind
        lines = body.splitlines()
        while lines and lines[0].startswith(":"):          # directive options (:class: warning)
            key, _, value = lines.pop(0)[1:].partition(":")
            if key.strip() == "class":
                css = value.strip() or css
        title = title or kind.capitalize()
        # a box inside a box (an Answer inside a "Going further"): the outer fence is longer
        inner = markdown2html_mistune(_admonitions_to_html("\n".join(lines)))
        if "dropdown" in css.split():
            # folded like jupyterlab-myst folds it: an answer or a hint must not show
            # before the reader asks for it
            classes = html.escape(" ".join(dict.fromkeys(["admonition", kind] + css.split())))
            return (f'<details class="{classes}">\n'
                    f'<summary class="admonition-title">{html.escape(title)}</summary>\n'
                    f'{inner}\n</details>')
        return (f'<div class="admonition {html.escape(css)}">\n'
                f'<p class="admonition-title">{html.escape(title)}</p>\n{inner}\n</div>')

    return _ADMONITION.sub(box, source)


def notebook_to_html(nb: nbformat.NotebookNode, title: str = "notebook",
                     path: Optional[Path] = None) -> str:
    """nbconvert's HTML (JupyterLab look), self-contained: images inline, no remote assets.
    ``path``: the notebook's directory, where relative image paths in markdown are found."""
    from nbconvert import HTMLExporter
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _admonitions_to_html(cell.source)
    exporter = HTMLExporter(template_name="rknnlab_html", extra_template_basedirs=[str(TEMPLATES)],
                            embed_images=True)
    css = (HERE / "static" / "rknnlab.css").read_text(encoding="utf-8")
    body, _ = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": title, "path": str(path or Path.cwd())},
                       "rknnlab_css": css})
    return body
