"""``python -m rknnlab export NOTEBOOK --to html [--print]``: one self-contained HTML file.

The notebook gets the edition applied (student: solution cells removed; instructor:
kept and marked), is executed through the same cache as the book (so exporting a
notebook the book has just built costs nothing), gets the provenance note, and is
written with nbconvert's HTMLExporter (JupyterLab look) with every image inline
(``embed_images``) and a template that loads nothing from the network.

``--print`` writes the page for paper instead (``<name>-print.html``): A4 with its margins
(static/rknnlab-print.css, template rknnlab_print), no prompts and no code, compact type, tables
kept whole; markdown cells tagged ``screen-only`` are left out, and links to other notebooks
become plain text (the book build, which knows the site, points them at its pages instead:
see :func:`site_link_resolver`).  A notebook whose metadata has ``rknnlab.printable = true``
(the cheat sheet) is also written that way by the book build, next to its page.
"""
from __future__ import annotations

import copy
import html
import re
from pathlib import Path
from typing import Callable, Dict, Optional, Set, Union

import nbformat

from . import editions
from .build import BookBuildError
from .config import BOOK_FILE
from .execute import resolve_backend, run_one

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
SCREEN_TEMPLATE, PRINT_TEMPLATE = "rknnlab_html", "rknnlab_print"
#: a markdown cell with this tag is for the screen only: the printable page leaves it out
SCREEN_ONLY_TAG = "screen-only"
#: returns where a link to another notebook points in the printable page (None: plain text)
LinkResolver = Callable[[str], Optional[str]]


def _book_root(nb_path: Path) -> Optional[Path]:
    for d in nb_path.resolve().parents:
        if (d / BOOK_FILE).is_file():
            return d
    return None


def export_notebook(notebook: Union[str, Path], to: str = "html", edition: str = "student",
                    out: Union[str, Path, None] = None, backend: str = "auto",
                    execute: bool = True, timeout: int = 600, lang: str = "en",
                    build_dir: Union[str, Path, None] = None, printable: bool = False,
                    log: Callable[[str], None] = print) -> Path:
    """Export ``notebook`` to one HTML file; returns its path.

    ``out`` defaults to ``<book root>/_build/export/<name>[-zh][-instructor][-print].html`` (the
    book root is the nearest directory above the notebook holding book.toml; else the
    notebook's directory).  ``printable``: the page for paper (see the module doc)."""
    if to != "html":
        raise ValueError(f"--to {to}: only html is supported")
    src = Path(notebook)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such notebook")
    if src.resolve().parent.name == "zh":   # a page of the Chinese edition (chapters/zh/...)
        lang = "zh"
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
        out = build / "export" / (src.stem + ("" if lang == "en" else f"-{lang}")
                                  + ("" if edition == "student" else f"-{edition}")
                                  + ("-print" if printable else "") + ".html")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    title, where = _title(nb, src.stem), src.resolve().parent
    page = print_html(nb, title, where) if printable else notebook_to_html(nb, title=title, path=where)
    out.write_text(page, encoding="utf-8")
    log(f"wrote {out} ({edition} edition{', printable page' if printable else ''})")
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
                     path: Optional[Path] = None, template: str = SCREEN_TEMPLATE) -> str:
    """nbconvert's HTML (JupyterLab look), self-contained: images inline, no remote assets.
    ``path``: the notebook's directory, where relative image paths in markdown are found.
    ``template``: rknnlab_html (the screen), or rknnlab_print (paper: use :func:`print_html`)."""
    from nbconvert import HTMLExporter
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _admonitions_to_html(cell.source)
    # paper: no code and no prompts (they are left out of the page, not hidden)
    bare = dict(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    # extra_template_paths: the print template extends 'rknnlab_html/index.html.j2' by name
    exporter = HTMLExporter(template_name=template, extra_template_basedirs=[str(TEMPLATES)],
                            extra_template_paths=[str(TEMPLATES)], embed_images=True,
                            **(bare if template == PRINT_TEMPLATE else {}))
    static = HERE / "static"
    body, _ = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": title, "path": str(path or Path.cwd())},
                       "rknnlab_css": (static / "rknnlab.css").read_text(encoding="utf-8"),
                       "rknnlab_print_css": (static / "rknnlab-print.css").read_text(encoding="utf-8")})
    return body


# [text](target.ipynb) or [text](target.ipynb#anchor), not an image
_NOTEBOOK_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+\.ipynb(?:#[^)\s]*)?)\)")


def print_html(nb: nbformat.NotebookNode, title: str, path: Optional[Path] = None,
               link: Optional[LinkResolver] = None) -> str:
    """The notebook as one page for paper (see the module doc).  ``link`` maps a link to
    another notebook ("04_output_reuse.ipynb#1-who-owns-an-output-buffer") to its target in
    the printable page, or None for plain text (the default: the section's number stays)."""
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown"
                                            and SCREEN_ONLY_TAG in c.get("metadata", {}).get("tags", []))]

    def relink(m: "re.Match[str]") -> str:
        target = link(m.group("href")) if link else None
        return f"[{m.group('text')}]({target})" if target else m.group("text")

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _NOTEBOOK_LINK.sub(relink, cell.source)
    return notebook_to_html(nb, title=title, path=path, template=PRINT_TEMPLATE)


def site_link_resolver(page_dir: Path) -> LinkResolver:
    """For a printable page written into ``page_dir`` of a built site: a link to a notebook
    becomes a link to its built page, at the same anchor (MyST gives each heading an element
    with its anchor's id, myst_heading_anchors); None when the site has no such page or anchor."""
    ids: Dict[Path, Set[str]] = {}

    def resolve(href: str) -> Optional[str]:
        target, _, anchor = href.partition("#")
        page = target[: -len(".ipynb")] + ".html"
        built = (page_dir / page).resolve()
        if not built.is_file():
            return None
        if not anchor:
            return page
        if built not in ids:
            ids[built] = set(re.findall(r'\bid="([^"]+)"', built.read_text(encoding="utf-8")))
        return f"{page}#{anchor}" if anchor in ids[built] else None

    return resolve
