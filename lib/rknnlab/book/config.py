"""book.toml: the book's metadata, languages, table of contents and build options.

book.toml is the single source of the table of contents. Its schema (every key is
checked: an unknown or misspelt key is an error that names where it is)::

    [book]
    title = "Memory in RKNN inference"          # or a table per language: {en = "...", zh = "..."}
    authors = ["..."]                           # list of names (at least one)
    licence = "CC-BY-4.0"                       # shown on every page's footer and the index
    languages = ["en", "zh"]                    # the first one is the default
    description = "..."                         # optional; a paragraph on the index page

    [build]                                     # all optional
    backend = "auto"                            # auto | sim | native
    timeout = 600                               # seconds per cell; -1 = no limit
    edition = "student"                         # student | instructor
    jobs = 0                                    # notebooks executed at once; 0 = one per CPU
    missing_translation = "fallback"            # fallback (English page + a visible note) | error

    [[parts]]
    title = "Getting started"                   # string or {en = ..., zh = ...}

    [[parts.chapters]]
    title = "Setup and tour"
    file = "chapters/00_setup.ipynb"            # relative to book.toml
    status = "ready"                            # ready (default) | draft | planned
    translations = {zh = "chapters/zh/00_setup.ipynb"}   # optional; default <dir>/<lang>/<name>

    [[parts.chapters.labs]]                     # zero or more labs, listed after their chapter
    title = "Lab 0: ..."
    file = "labs/lab00_setup.ipynb"
    status = "planned"

``status``: *ready* notebooks must exist (a missing one is an error); *draft* notebooks are
built when the file exists and otherwise listed as not yet written; *planned* ones are never
built, only listed on the index page as not yet written. No placeholder notebook is ever made.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

BOOK_FILE = "book.toml"
EDITIONS = ("student", "instructor")
BACKENDS = ("auto", "sim", "native")
STATUSES = ("ready", "draft", "planned")
MISSING_TRANSLATION = ("fallback", "error")
#: language names shown in notes; any BCP-47-ish code is accepted, these just read nicer
LANGUAGE_NAMES = {"en": "English", "zh": "中文 (Chinese)"}


class BookConfigError(ValueError):
    """book.toml is missing, is not valid TOML, or breaks the schema. The message says
    which file, which entry and what is wrong."""


@dataclass
class BuildOptions:
    backend: str = "auto"
    timeout: int = 600
    edition: str = "student"
    jobs: int = 0
    missing_translation: str = "fallback"


@dataclass
class Entry:
    """A chapter or a lab: one notebook (once written)."""
    kind: str                      # "chapter" | "lab"
    title: Dict[str, str]          # language -> title ("*" = any language)
    file: str                      # relative to the book root, posix
    status: str = "ready"
    translations: Dict[str, str] = field(default_factory=dict)
    labs: List["Entry"] = field(default_factory=list)
    where: str = ""                # "parts[1].chapters[2]" for messages

    @property
    def docname(self) -> str:
        """The page name in the site: the file path without .ipynb."""
        return self.file[: -len(".ipynb")]

    def title_in(self, lang: str) -> str:
        return pick_text(self.title, lang)

    def translation_file(self, lang: str, default_lang: str) -> str:
        """Where the notebook in ``lang`` lives (relative to the root), existing or not."""
        if lang == default_lang:
            return self.file
        if lang in self.translations:
            return self.translations[lang]
        p = Path(self.file)
        return (p.parent / lang / p.name).as_posix()


@dataclass
class Part:
    title: Dict[str, str]
    chapters: List[Entry] = field(default_factory=list)

    def title_in(self, lang: str) -> str:
        return pick_text(self.title, lang)

    def entries(self) -> Iterator[Entry]:
        """Chapters and labs in table-of-contents order (each chapter, then its labs)."""
        for ch in self.chapters:
            yield ch
            yield from ch.labs


@dataclass
class BookConfig:
    path: Path                     # the book.toml
    title: Dict[str, str]
    authors: List[str]
    licence: str
    languages: List[str]
    description: Dict[str, str] = field(default_factory=dict)
    build: BuildOptions = field(default_factory=BuildOptions)
    parts: List[Part] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def default_language(self) -> str:
        return self.languages[0]

    def title_in(self, lang: str) -> str:
        return pick_text(self.title, lang)

    def entries(self) -> Iterator[Entry]:
        for part in self.parts:
            yield from part.entries()

    def check_language(self, lang: str) -> str:
        if lang not in self.languages:
            raise BookConfigError(f"{self.path}: language {lang!r} is not one of the book's "
                                  f"languages {self.languages} ([book] languages)")
        return lang


def pick_text(texts: Mapping[str, str], lang: str) -> str:
    """The text for ``lang``, else the one for any language ("*"), else the first one."""
    if lang in texts:
        return texts[lang]
    if "*" in texts:
        return texts["*"]
    return next(iter(texts.values()))


# --------------------------------------------------------------------------- parsing
def find_book(start: Union[str, Path, None] = None) -> Path:
    """book.toml: ``start`` itself if it is a file, else the first book.toml in
    ``start`` (default: the current directory) or above it."""
    p = Path(start) if start is not None else Path.cwd()
    if p.is_file():
        return p.resolve()
    if start is not None and not p.exists():
        raise BookConfigError(f"{p}: no such file or directory (expected a {BOOK_FILE})")
    for d in [p.resolve(), *p.resolve().parents]:
        if (d / BOOK_FILE).is_file():
            return d / BOOK_FILE
    raise BookConfigError(f"no {BOOK_FILE} in {p.resolve()} or any directory above it "
                          "(run from the course repository, or pass --book PATH)")


def load_book(path: Union[str, Path, None] = None) -> BookConfig:
    """Read and validate book.toml (see the module docstring for the schema)."""
    path = find_book(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise BookConfigError(f"{path}: not valid TOML: {e}") from None
    return parse_book(data, path)


def parse_book(data: Mapping[str, Any], path: Union[str, Path] = BOOK_FILE) -> BookConfig:
    path = Path(path)
    where = str(path)

    def err(msg: str) -> BookConfigError:
        return BookConfigError(f"{where}: {msg}")

    _keys(data, "top level", {"book", "build", "parts"}, err)
    book = _table(data.get("book"), "[book]", err, required=True)
    _keys(book, "[book]", {"title", "authors", "licence", "languages", "description"}, err)
    title = _text(book.get("title"), "[book] title", err, required=True)
    authors = book.get("authors")
    if (not isinstance(authors, list) or not authors
            or not all(isinstance(a, str) and a.strip() for a in authors)):
        raise err("[book] authors must be a non-empty list of names, e.g. authors = [\"Ada\"]")
    licence = book.get("licence")
    if not isinstance(licence, str) or not licence.strip():
        raise err("[book] licence must be a non-empty string, e.g. licence = \"CC-BY-4.0\"")
    languages = book.get("languages", ["en"])
    if (not isinstance(languages, list) or not languages
            or not all(isinstance(x, str) and x.strip() for x in languages)):
        raise err("[book] languages must be a non-empty list of language codes, e.g. [\"en\", \"zh\"]")
    if len(set(languages)) != len(languages):
        raise err(f"[book] languages lists a language twice: {languages}")
    description = _text(book.get("description"), "[book] description", err) or {}

    b = _table(data.get("build"), "[build]", err) or {}
    _keys(b, "[build]", {"backend", "timeout", "edition", "jobs", "missing_translation"}, err)
    build = BuildOptions()
    build.backend = _choice(b.get("backend", build.backend), BACKENDS, "[build] backend", err)
    build.edition = _choice(b.get("edition", build.edition), EDITIONS, "[build] edition", err)
    build.missing_translation = _choice(b.get("missing_translation", build.missing_translation),
                                        MISSING_TRANSLATION, "[build] missing_translation", err)
    build.timeout = _int(b.get("timeout", build.timeout), "[build] timeout", err, minimum=-1)
    if build.timeout == 0:
        raise err("[build] timeout must be a number of seconds per cell (> 0), or -1 for no limit")
    build.jobs = _int(b.get("jobs", build.jobs), "[build] jobs", err, minimum=0)

    parts_raw = data.get("parts")
    if not isinstance(parts_raw, list) or not parts_raw:
        raise err("the book has no parts: add at least one [[parts]] table with [[parts.chapters]]")
    parts: List[Part] = []
    seen: Dict[str, str] = {}
    for i, praw in enumerate(parts_raw, 1):
        pw = f"[[parts]] #{i}"
        praw = _table(praw, pw, err, required=True)
        _keys(praw, pw, {"title", "chapters"}, err)
        part = Part(title=_text(praw.get("title"), f"{pw} title", err, required=True))
        chapters = praw.get("chapters")
        if not isinstance(chapters, list) or not chapters:
            raise err(f"{pw} ({part.title_in(languages[0])!r}) has no chapters: "
                      "add [[parts.chapters]] tables after it")
        for j, craw in enumerate(chapters, 1):
            cw = f"{pw} chapter #{j}"
            ch = _entry(craw, "chapter", cw, languages, err, seen)
            labs = craw.get("labs", [])
            if not isinstance(labs, list):
                raise err(f"{cw}: labs must be written as [[parts.chapters.labs]] tables")
            for k, lraw in enumerate(labs, 1):
                ch.labs.append(_entry(lraw, "lab", f"{cw} lab #{k}", languages, err, seen))
            part.chapters.append(ch)
        parts.append(part)
    return BookConfig(path=path.resolve() if path.exists() else path, title=title,
                      authors=list(authors), licence=licence, languages=list(languages),
                      description=description, build=build, parts=parts)


def _entry(raw: Any, kind: str, where: str, languages: List[str], err, seen: Dict[str, str]) -> Entry:
    raw = _table(raw, where, err, required=True)
    title = _text(raw.get("title"), f"{where} title", err, required=True)
    where = f"{where} ({pick_text(title, languages[0])!r})"
    allowed = {"title", "file", "status", "translations"} | ({"labs"} if kind == "chapter" else set())
    _keys(raw, where, allowed, err)
    file = raw.get("file")
    if not isinstance(file, str) or not file.strip():
        raise err(f"{where}: file is required, the notebook's path relative to book.toml, "
                  "e.g. file = \"chapters/01_memory_layers.ipynb\"")
    file = _relpath(file, f"{where} file", err)
    status = _choice(raw.get("status", "ready"), STATUSES, f"{where} status", err)
    translations = raw.get("translations", {})
    if not isinstance(translations, dict):
        raise err(f"{where}: translations must be a table, e.g. translations = {{zh = \"chapters/zh/x.ipynb\"}}")
    tr: Dict[str, str] = {}
    for lang, tpath in translations.items():
        if lang not in languages[1:]:
            raise err(f"{where}: translations names {lang!r}, which is not one of the book's other "
                      f"languages {languages[1:]} ([book] languages)")
        tr[lang] = _relpath(tpath, f"{where} translations.{lang}", err)
    if file in seen:
        raise err(f"{where}: {file} is already listed by {seen[file]}")
    seen[file] = where
    return Entry(kind=kind, title=title, file=file, status=status, translations=tr, where=where)


def _relpath(value: Any, where: str, err) -> str:
    if not isinstance(value, str) or not value.strip():
        raise err(f"{where} must be a path relative to book.toml")
    p = Path(value)
    if p.is_absolute() or ".." in p.parts:
        raise err(f"{where} = {value!r}: must be a path inside the book (relative, no '..')")
    if p.suffix != ".ipynb":
        raise err(f"{where} = {value!r}: must name a Jupyter notebook (.ipynb)")
    return p.as_posix()


def _keys(table: Mapping[str, Any], where: str, allowed: set, err) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise err(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                  f"{', '.join(repr(k) for k in unknown)} (allowed: {', '.join(sorted(allowed))})")


def _table(value: Any, where: str, err, required: bool = False) -> Optional[Dict[str, Any]]:
    if value is None:
        if required:
            raise err(f"{where} is missing")
        return None
    if not isinstance(value, dict):
        raise err(f"{where} must be a table")
    return value


def _text(value: Any, where: str, err, required: bool = False) -> Optional[Dict[str, str]]:
    """A string, or a table language -> string. Returns {lang: text}, "*" = any language."""
    if value is None:
        if required:
            raise err(f"{where} is missing")
        return None
    if isinstance(value, str) and value.strip():
        return {"*": value}
    if (isinstance(value, dict) and value
            and all(isinstance(v, str) and v.strip() for v in value.values())):
        return dict(value)
    raise err(f"{where} must be a non-empty string or a table of strings per language "
              "(e.g. {en = \"Setup\", zh = \"准备\"})")


def _choice(value: Any, choices: Tuple[str, ...], where: str, err) -> str:
    if value not in choices:
        raise err(f"{where} = {value!r}: expected one of {', '.join(choices)}")
    return value


def _int(value: Any, where: str, err, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise err(f"{where} = {value!r}: expected a whole number >= {minimum}")
    return value
