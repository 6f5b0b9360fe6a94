"""``python -m rknnlab book build``: execute the book's notebooks and build the HTML site.

Steps (all under ``<book root>/_build/``):

1. read book.toml (:mod:`.config`); pick the language, edition and backend;
2. for each written chapter/lab: read the notebook (the translation, or the default
   language with a visible note), apply the edition (:mod:`.editions`);
3. execute them through jupyter-cache, several at once (:mod:`.execute`); unchanged
   notebooks come from the cache; a failing notebook fails the build with a message
   naming the notebook, the cell and the error;
4. stage the executed notebooks (with the provenance note) and a generated index page
   into ``stage/<lang>-<edition>/``, writing only files whose content changed, so Sphinx
   re-reads only what changed;
5. run Sphinx (myst-nb, sphinx-book-theme; execution off: outputs are already there)
   into ``html/`` (the default language and edition), or ``html-<lang>``,
   ``html-instructor``, ``html-<lang>-instructor``;
6. write the printable page of each notebook whose metadata has ``rknnlab.printable = true``
   (the cheat sheet) next to its page: ``<docname>-print.html``, one sheet of A4, its links
   pointing at the site's pages (:func:`rknnlab.book.export.print_html`).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import nbformat

from . import editions
from .config import LANGUAGE_NAMES, BookConfig, BookConfigError, Entry, load_book
from .execute import Backend, ExecReport, Job, execute_all, resolve_backend

HERE = Path(__file__).resolve().parent

_INDEX_TEXT = {
    "en": {"planned": "Not yet written", "planned_intro": "These are planned and have no page yet:",
           "authors": "Authors", "licence": "Licence", "edition": "Edition",
           "student": "student (without solutions)", "instructor": "instructor (with solutions)",
           "lab": "lab", "chapter": "chapter"},
    "zh": {"planned": "尚未撰写", "planned_intro": "以下内容已列入计划，暂无页面：",
           "authors": "作者", "licence": "许可", "edition": "版本",
           "student": "学生版（不含答案）", "instructor": "教师版（含答案）",
           "lab": "实验", "chapter": "章节"},
}


class BookBuildError(RuntimeError):
    """The build failed; the message says why (for a notebook: which one, which cell, what error)."""


@dataclass
class Page:
    entry: Entry
    source: Path                  # the notebook read (translation or fallback)
    display_path: str             # source relative to the book root
    fallback: bool = False        # a translation was missing: the default language is shown


@dataclass
class BuildReport:
    out_dir: Path
    lang: str
    edition: str
    backend: Backend
    pages: List[str] = field(default_factory=list)          # docnames, in TOC order
    planned: List[str] = field(default_factory=list)        # entries listed without a page
    fallbacks: List[str] = field(default_factory=list)      # pages shown in the default language
    executed: List[str] = field(default_factory=list)
    cached: List[str] = field(default_factory=list)
    printables: List[str] = field(default_factory=list)     # printable pages written, site paths
    seconds: Dict[str, float] = field(default_factory=dict)  # phase -> seconds


def output_dir_name(cfg: BookConfig, lang: str, edition: str) -> str:
    name = "html"
    if lang != cfg.default_language:
        name += f"-{lang}"
    if edition != cfg.build.edition:
        name += f"-{edition}"
    return name


def build_book(book: Union[str, Path, None] = None, lang: Optional[str] = None,
               edition: Optional[str] = None, backend: Optional[str] = None,
               out_dir: Union[str, Path, None] = None, build_dir: Union[str, Path, None] = None,
               jobs: Optional[int] = None, log: Callable[[str], None] = print) -> BuildReport:
    t_start = time.monotonic()
    cfg = load_book(book)
    lang = cfg.check_language(lang or cfg.default_language)
    edition = edition or cfg.build.edition
    if edition not in ("student", "instructor"):
        raise BookConfigError(f"edition {edition!r}: expected student or instructor")
    be = resolve_backend(backend or cfg.build.backend)
    build_dir = Path(build_dir) if build_dir else cfg.root / "_build"
    out = Path(out_dir) if out_dir else build_dir / output_dir_name(cfg, lang, edition)
    stage = build_dir / "stage" / f"{lang}-{edition}"
    doctrees = build_dir / "doctrees" / f"{lang}-{edition}"
    n_jobs = jobs if jobs is not None else cfg.build.jobs
    report = BuildReport(out.resolve(), lang, edition, be)
    log(f"book: {cfg.path} — language {lang}, {edition} edition, backend {be.name} ({be.reason})")

    # 1-2. what to build
    pages: List[Page] = []
    for entry in cfg.entries():
        page = _plan_page(cfg, entry, lang)
        if page is None:
            report.planned.append(entry.file)
        else:
            pages.append(page)
            if page.fallback:
                report.fallbacks.append(entry.docname)
    report.pages = [p.entry.docname for p in pages]

    # 3. execute
    t0 = time.monotonic()
    jobs_ = [Job(p.entry.docname, editions.apply_edition(nbformat.read(str(p.source), as_version=4),
                                                          edition, lang),
                 p.source.parent, p.display_path) for p in pages]
    ex: ExecReport = execute_all(jobs_, build_dir / ".jupyter_cache" / be.name, be,
                                 cfg.build.timeout, n_jobs, log)
    report.seconds["execute"] = time.monotonic() - t0
    report.executed, report.cached = ex.executed, ex.cached
    if ex.errors:
        raise BookBuildError(
            f"{len(ex.errors)} notebook(s) failed, so the book was not built:\n\n"
            + "\n\n".join(ex.errors))

    printable = {job.key for job in jobs_ if job.nb.metadata.get("rknnlab", {}).get("printable")}
    staged: Dict[str, nbformat.NotebookNode] = {}

    # 4. stage
    stage.mkdir(parents=True, exist_ok=True)
    wanted = {"conf.py", "index.md"}
    default_name = LANGUAGE_NAMES.get(cfg.default_language, cfg.default_language)
    for p in pages:
        r = ex.results[p.entry.docname]
        # the cache is per backend, so cached outputs too were produced by this backend
        nb = editions.add_notes(r.nb, lang, be.label, r.executed_at,
                                fallback_from=cfg.default_language if p.fallback else None,
                                default_lang_name=default_name,
                                lang_name=LANGUAGE_NAMES.get(lang, lang))
        nb = editions.static_widgets(nb, lang)
        if p.source.resolve() != (cfg.root / p.entry.file).resolve():
            _rebase_links(nb, p.source, cfg.root / p.entry.file, _twins(cfg, lang))
        elif lang != cfg.default_language:
            _translate_anchors(nb, p.source, _anchor_maps(cfg, lang))
        staged[p.entry.docname] = nb
        nb.metadata["rknnlab"] = {"edition": edition, "backend": be.name,
                                  "executed_at": r.executed_at, "source": p.display_path}
        rel = p.entry.docname + ".ipynb"
        wanted.add(rel)
        _write_if_changed(stage / rel, nbformat.writes(nb))
        _copy_local_images(p.source, nb, stage / rel)
    # the table of contents changed (a page added or gone, a title): every page's sidebar
    # changes, so Sphinx must write all pages (it still re-reads only changed notebooks)
    toc_changed = _write_if_changed(stage / "index.md", _index_md(cfg, pages, lang, edition))
    search_terms = None
    if lang == "zh":
        search_terms = stage / SEARCH_TERMS
        _write_if_changed(search_terms, _chinese_terms(staged.values()))
    _write_if_changed(stage / "conf.py", _conf_py(cfg, lang, edition, be, search_terms))
    for f in stage.rglob("*.ipynb"):  # pages no longer in the book: gone from the site too
        rel = f.relative_to(stage).as_posix()
        if rel not in wanted:
            f.unlink()
            docname = rel[: -len(".ipynb")]
            for stale in (out / (docname + ".html"), _printable_path(out, docname)):
                if stale.is_file():
                    stale.unlink()

    # 5. sphinx
    t0 = time.monotonic()
    _run_sphinx(stage, out, doctrees, n_jobs, log, write_all=toc_changed)
    report.seconds["sphinx"] = time.monotonic() - t0

    # 6. printable pages
    for p in pages:
        target = _printable_path(out, p.entry.docname)
        if p.entry.docname in printable:
            _write_printable(staged[p.entry.docname], p, lang, target)
            report.printables.append(target.relative_to(out).as_posix())
        elif target.is_file():       # no longer printable
            target.unlink()
    report.seconds["total"] = time.monotonic() - t_start
    (build_dir / "reports").mkdir(parents=True, exist_ok=True)
    (build_dir / "reports" / f"{lang}-{edition}.json").write_text(json.dumps({
        "out_dir": str(report.out_dir), "lang": lang, "edition": edition, "backend": be.name,
        "backend_label": be.label, "pages": report.pages, "planned": report.planned,
        "fallbacks": report.fallbacks, "executed": report.executed, "cached": report.cached,
        "printables": report.printables, "seconds": report.seconds}, indent=1), encoding="utf-8")
    log(f"built {len(pages)} page(s) into {out} in {report.seconds['total']:.1f} s "
        f"({len(report.executed)} executed, {len(report.cached)} from the cache"
        + (f", {len(report.planned)} planned and listed on the index page" if report.planned else "")
        + ")")
    return report


def _printable_path(out: Path, docname: str) -> Path:
    return out / (docname + "-print.html")


def _write_printable(nb: nbformat.NotebookNode, page: Page, lang: str, target: Path) -> None:
    """The page as one printable sheet, written after Sphinx: its links to other notebooks
    point at their built pages and sections (a page the site lacks: plain text)."""
    from .export import print_html, site_link_resolver
    html = print_html(nb, page.entry.title_in(lang), page.source.parent,
                      link=site_link_resolver(target.parent))
    # the provenance note's build time (a notebook with code), as the site's pages show it
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    _write_if_changed(target, html.replace(editions.BUILD_TIME_TOKEN, now))


#: a markdown link to a notebook: (the "](" ) (the relative path) (an anchor and the ")")
_NOTEBOOK_LINK = re.compile(r"(\]\()([^)\s#:]+\.ipynb)((?:#[^)\s]*)?\))")


def _twins(cfg: BookConfig, lang: str) -> Dict[Path, Path]:
    """{a translation's file: its original's file} (resolved paths)."""
    return {(cfg.root / e.translation_file(lang, cfg.default_language)).resolve(): (cfg.root / e.file).resolve()
            for e in cfg.entries()}


def _rebase_links(nb: nbformat.NotebookNode, source: Path, staged_as: Path, twins: Dict[Path, Path]) -> None:
    """A translated page links the way JupyterLab follows links, from its own folder
    (chapters/zh/01.ipynb -> ``../../labs/zh/lab01.ipynb``); the book puts it where its
    original is (chapters/01.ipynb), with every language's pages at the same names.  So each
    link to a notebook is made relative to that place, and a link to a translation points at
    its original's page name (which, in this language's book, is the translation)."""
    def rebase(m: "re.Match[str]") -> str:
        target = (source.parent / m.group(2)).resolve()
        page = twins.get(target, target)
        return m.group(1) + Path(os.path.relpath(page, staged_as.resolve().parent)).as_posix() + m.group(3)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _NOTEBOOK_LINK.sub(rebase, cell.source)


def _heading_anchors(path: Path) -> List[str]:
    """The anchors MyST gives the notebook's headings of levels 1-3 (myst_heading_anchors),
    in order."""
    try:
        from myst_parser.slugs import github_slugify as slug
    except ImportError:    # an older myst-parser: the same GitHub-style rule
        def slug(title: str) -> str:
            return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.lower().replace(" ", "-"))
    anchors: List[str] = []
    for cell in nbformat.read(str(path), as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        code, directives = None, []     # an open code fence; the open directives' fences
        for line in cell.source.splitlines():
            m = re.match(r"\s*(`{3,}|~{3,})(.*)$", line)
            if code:
                code = None if m and m.group(1) == code and not m.group(2).strip() else code
            elif m and m.group(2).startswith("{"):
                directives.append(m.group(1))
            elif m and not m.group(2).strip() and directives and m.group(1) == directives[-1]:
                directives.pop()
            elif m:
                code = m.group(1)
            else:
                h = re.match(r"(#{1,3}) (.+)", line)
                if h:
                    anchors.append(slug(h.group(2).strip()))
    return anchors


def _anchor_maps(cfg: BookConfig, lang: str) -> Dict[Path, Dict[str, str]]:
    """{an original page: {its heading's anchor: the translation's anchor}} for each page that
    has a translation: the two have the same headings in the same order (a test holds the
    Chinese edition to it), so the k-th heading of one is the k-th of the other."""
    maps: Dict[Path, Dict[str, str]] = {}
    for e in cfg.entries():
        original, translation = cfg.root / e.file, cfg.root / e.translation_file(lang, cfg.default_language)
        if e.status != "planned" and original.is_file() and translation.is_file():
            a, b = _heading_anchors(original), _heading_anchors(translation)
            if len(a) == len(b):
                maps[original.resolve()] = dict(zip(a, b))
    return maps


def _translate_anchors(nb: nbformat.NotebookNode, source: Path, maps: Dict[Path, Dict[str, str]]) -> None:
    """A page shown in the default language inside another language's book (no translation
    yet) links to sections of pages that are translated there: their anchors are the
    translation's."""
    def translate(m: "re.Match[str]") -> str:
        target, tail = m.group(2), m.group(3)
        anchors = maps.get((source.parent / target).resolve(), {})
        if tail.startswith("#") and tail[1:-1] in anchors:
            return f"{m.group(1)}{target}#{anchors[tail[1:-1]]})"
        return m.group(0)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _NOTEBOOK_LINK.sub(translate, cell.source)


def _plan_page(cfg: BookConfig, entry: Entry, lang: str) -> Optional[Page]:
    root = cfg.root
    src = root / entry.file
    if entry.status == "planned":
        return None
    if not src.is_file():
        if entry.status == "draft":
            return None
        raise BookConfigError(
            f"{cfg.path}: {entry.where}: {entry.file} does not exist. Write it, or mark the entry "
            "status = \"draft\" (built once it exists) or status = \"planned\"")
    if lang == cfg.default_language:
        return Page(entry, src, entry.file)
    tfile = entry.translation_file(lang, cfg.default_language)
    if (root / tfile).is_file():
        return Page(entry, root / tfile, tfile)
    if cfg.build.missing_translation == "error":
        raise BookConfigError(
            f"{cfg.path}: {entry.where}: no {lang} version ({tfile} does not exist) and "
            "[build] missing_translation = \"error\". Translate it, or set "
            "missing_translation = \"fallback\" to show the original with a note")
    return Page(entry, src, entry.file, fallback=True)


def _write_if_changed(path: Path, text: str) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def _copy_local_images(source: Path, nb, staged: Path) -> None:
    """Images a markdown cell refers to by a relative path go next to the staged notebook."""
    import re
    pat = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?|<img[^>]*\bsrc=[\"']([^\"']+)[\"']")
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in pat.finditer(cell.source):
            ref = m.group(1) or m.group(2)
            if ":" in ref or ref.startswith(("/", "#")):
                continue
            src = (source.parent / ref).resolve()
            dst = (staged.parent / ref).resolve()
            if src.is_file() and (not dst.is_file() or dst.stat().st_mtime < src.stat().st_mtime):
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)


def _md_escape(s: str) -> str:
    """Text safe to put in a markdown paragraph or list item ("0. Setup" stays text)."""
    import re
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", s)


def _index_md(cfg: BookConfig, pages: List[Page], lang: str, edition: str) -> str:
    t = _INDEX_TEXT.get(lang, _INDEX_TEXT["en"])
    built = {p.entry.docname for p in pages}
    out = [f"# {_md_escape(cfg.title_in(lang))}", ""]
    if cfg.description:
        out += [_md_escape(cfg.description.get(lang, cfg.description.get("*", next(iter(cfg.description.values()))))), ""]
    out += [f"{t['authors']}: {_md_escape(', '.join(cfg.authors))} · {t['licence']}: "
            f"{_md_escape(cfg.licence)} · {t['edition']}: {t[edition]}", ""]
    for part in cfg.parts:
        entries = list(part.entries())
        written = [e for e in entries if e.docname in built]
        planned = [e for e in entries if e.docname not in built]
        if written:
            out += ["```{toctree}", f":caption: {part.title_in(lang)}", ":maxdepth: 1", ""]
            out += [f"{e.title_in(lang)} <{e.docname}>" for e in written]
            out += ["```", ""]
        if planned:
            out += [f"**{_md_escape(part.title_in(lang))}** — {t['planned']}:", ""]
            out += [f"- {_md_escape(e.title_in(lang))} ({t[e.kind]}, `{e.file}`)" for e in planned]
            out += [""]
    return "\n".join(out)


#: the words the Chinese search must know (a jieba user dictionary), written into the stage
SEARCH_TERMS = "search-terms-zh.txt"


def _chinese_terms(notebooks) -> str:
    """The terms the pages define (bold where defined, the course's rule), as a jieba user
    dictionary: Sphinx splits Chinese text into words with jieba, which would cut 零拷贝 into
    零 and 拷贝, and a search for 零拷贝 would find nothing."""
    terms = set()
    for nb in notebooks:
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for bold in re.findall(r"\*\*(.+?)\*\*", cell.source):
                    terms |= {t for t in re.split(r"[（）()：:，,、。\s`]+", bold)
                              if re.search(r"[\u4e00-\u9fff]", t) and 2 <= len(t) <= 12}
    return "".join(f"{t}\n" for t in sorted(terms))


def _conf_py(cfg: BookConfig, lang: str, edition: str, be: Backend,
             search_terms: Optional[Path] = None) -> str:
    year = _dt.date.today().year
    sphinx_lang = {"zh": "zh_CN"}.get(lang, lang)
    settings = {
        "project": cfg.title_in(lang),
        "author": ", ".join(cfg.authors),
        "copyright": f"{year}, {', '.join(cfg.authors)} — {cfg.licence}",
        "language": sphinx_lang,
        "extensions": ["myst_nb", "rknnlab.book.sphinx_ext"],
        "root_doc": "index",
        "exclude_patterns": ["**.ipynb_checkpoints"],
        "nb_execution_mode": "off",
        "nb_merge_streams": True,
        # no widget manager from a CDN: a widget shows the static picture drawn from its state
        # (widget_snapshot), not its live view
        "nb_ipywidgets_js": {},
        "nb_mime_priority_overrides": [("html", "application/vnd.jupyter.widget-view+json", None)],
        "myst_enable_extensions": ["colon_fence", "deflist", "html_image"],
        "myst_heading_anchors": 3,
        "html_theme": "sphinx_book_theme",
        "html_title": cfg.title_in(lang),
        "html_theme_options": {
            "home_page_in_toc": True,
            "show_navbar_depth": 1,
            "use_download_button": False,
            "use_fullscreen_button": False,
            "use_repository_button": False,
            "use_issues_button": False,
            "use_edit_page_button": False,
            "navigation_with_keys": False,
            # one search box (the sidebar's): none in the header bar
            "navbar_persistent": [],
            # no right-hand column: the page's contents go under the chapter list (below),
            # so the text column is ~1060 px wide in a 1400 px window, not ~770
            "secondary_sidebar_items": [],
        },
        "html_sidebars": {"**": ["navbar-logo.html", "search-button-field.html",
                                 "sbt-sidebar-nav.html", "page-toc.html"]},
        # a favicon of our own (else browsers ask for /favicon.ico, a 404 on every site)
        "html_favicon": str(HERE / "static" / "rknnlab-favicon.svg"),
        # light mode: figures are drawn on white (and the theme logs no "invalid theme mode")
        "html_context": {"default_mode": "light"},
        "html_show_sourcelink": False,
        "html_copy_source": False,
        # no MathJax from a CDN: math stays TeX source (a local no-op script satisfies Sphinx)
        "mathjax_path": "rknnlab-nomath.js",
        "rknnlab_edition": edition,
        "rknnlab_backend": be.name,
        "rknnlab_backend_label": be.label,
    }
    if search_terms is not None:
        settings["html_search_options"] = {"dict": str(search_terms)}
    lines = ["# Generated by `python -m rknnlab book build` from book.toml: edit book.toml, not this."]
    lines += [f"{k} = {v!r}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def _run_sphinx(stage: Path, out: Path, doctrees: Path, n_jobs: int, log,
                write_all: bool = False) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(doctrees),
           "-j", str(n_jobs or "auto"), *(["-a"] if write_all else []), str(stage), str(out)]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if proc.stderr.strip():
        log(proc.stderr.rstrip())
    if proc.returncode != 0:
        raise BookBuildError(f"Sphinx failed (exit {proc.returncode}) building {stage} into {out}:\n"
                             + (proc.stderr or proc.stdout)[-4000:])
