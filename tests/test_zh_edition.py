"""The Chinese edition (chapters/zh, labs/zh): static checks, nothing executes.

- Parity with the English twin: the same cells in the same order (type, id, metadata, tags), and
  every code cell the same code; only comments may differ (Python ``#``, C ``//`` and ``/* */``).
  The code fences inside markdown (C, Python, shell) hold the same code too.
- The same headings, section numbers kept, and every markdown cell that has English prose has
  Chinese in its twin (nothing left untranslated).
- Links: every link to a notebook reaches a file from the page's own folder (as JupyterLab
  follows it) and a heading of that file; a zh page links to the zh twin wherever one exists.
- Terms: the glossary's Chinese column (chapters/glossary.ipynb) is the one list of terms; its
  Chinese page (chapters/zh/glossary.ipynb, 术语表) has the same rows in the same order, and its
  不要写作 column lists renderings that no zh page may use outside code; a term the English defines
  in bold in a section is bold in that section's Chinese twin.
- Rules: a zh chapter repeats every ``**规则。**`` sentence word for word in its 要点, and its
  lab quotes only sentences the zh chapter states.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import nbformat
import pytest

from rknnlab.book import config as book_config
from test_glossary import slug

ROOT = Path(__file__).resolve().parents[1]
CONFIG = book_config.load_book(ROOT / "book.toml")
CJK = re.compile(r"[\u4e00-\u9fff]")


READY = [e for e in CONFIG.entries() if e.status == "ready"]
PAIRS = {Path(e.file).stem: (ROOT / e.file, ROOT / e.translation_file("zh", CONFIG.default_language))
         for e in READY}
PRESENT = sorted(stem for stem, (_, zh) in PAIRS.items() if zh.exists())


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def _zh_pages() -> List[Path]:
    return sorted(list((ROOT / "chapters" / "zh").glob("*.ipynb")) + list((ROOT / "labs" / "zh").glob("*.ipynb")))


# --------------------------------------------------------------------------- code without comments
def _python_tokens(source: str) -> List[Tuple[int, str]]:
    """The cell's tokens without comments and layout; IPython's magic lines are kept whole."""
    lines, magics = [], []
    for line in source.splitlines():
        if line.lstrip().startswith(("%", "!")):
            magics.append(line.strip())
            lines.append(f"_magic_{len(magics) - 1}")
        else:
            lines.append(line)
    out: List[Tuple[int, str]] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
        if tok.type in skip:
            continue
        text = tok.string
        m = re.fullmatch(r"_magic_(\d+)", text)
        out.append((tok.type, magics[int(m.group(1))] if m else text))
    return out


_C_TOKEN = re.compile(r'''//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\S''', re.S)


def _c_tokens(source: str) -> List[str]:
    """The C code's characters outside comments, whitespace dropped; strings kept whole."""
    return [t for t in _C_TOKEN.findall(source) if not t.startswith(("//", "/*"))]


def _code(cell_source: str) -> object:
    lines = cell_source.splitlines()
    if lines and lines[0].startswith("%%"):
        body = "\n".join(lines[1:])
        return lines[0].strip(), (_c_tokens(body) if lines[0].startswith("%%rknn_c") else body.strip())
    return _python_tokens(cell_source)


_FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n(.*?)^\1\s*$", re.M | re.S)
_CODE_LANGS = {"c": _c_tokens, "cpp": _c_tokens, "python": _python_tokens, "py": _python_tokens,
               "bash": str.split, "shell": str.split, "sh": str.split, "console": str.split}


def _fenced_code(markdown: str) -> List[Tuple[str, object]]:
    out = []
    for m in _FENCE.finditer(markdown):
        lang = m.group(2).strip().split(" ")[0].lower()
        if lang in _CODE_LANGS:
            out.append((lang, _CODE_LANGS[lang](m.group(3))))
        elif lang.startswith("{"):
            out.extend(_fenced_code(m.group(3)))   # code inside an admonition
    return out


# --------------------------------------------------------------------------- prose helpers
def _without_code(markdown: str) -> str:
    text = _FENCE.sub(lambda m: _without_code(m.group(3)) if m.group(2).strip().startswith("{") else "",
                      markdown)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)        # link targets
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def _english_words(markdown: str) -> int:
    return len(re.findall(r"\b[A-Za-z]{3,}\b", _without_code(markdown)))


def _headings(markdown: str) -> List[Tuple[int, Optional[str]]]:
    out = []
    for line in _FENCE.sub("", markdown).splitlines():
        m = re.match(r"(#{1,6}) (.+)", line)
        if m:
            n = re.match(r"(?:Exercise |练习 )?(\d+)[. （(]", m.group(2).strip())
            out.append((len(m.group(1)), n.group(1) if n else None))
    return out


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _section(markdown: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    return m.group(1) if m else ""


def _markdown(path: Path) -> str:
    return "\n\n".join(c.source for c in _read(path).cells if c.cell_type == "markdown")


def _anchors(path: Path) -> set:
    found = set()
    for line in _FENCE.sub("", _markdown(path)).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            found.add(slug(m.group(1).strip()))
    found |= set(re.findall(r"^\(([\w-]+)\)=\s*$", _markdown(path), re.M))
    return found


# --------------------------------------------------------------------------- parity
@pytest.mark.parametrize("stem", PRESENT)
def test_same_cells_ids_and_tags(stem):
    en, zh = (_read(p) for p in PAIRS[stem])
    assert [(c.cell_type, c.get("id")) for c in zh.cells] == [(c.cell_type, c.get("id")) for c in en.cells]
    for a, b in zip(en.cells, zh.cells):
        assert b.metadata == a.metadata, f"cell {a.get('id')}: metadata (tags) differ"
        assert not b.get("outputs"), f"cell {b.get('id')}: stored with outputs"
    assert zh.metadata.get("kernelspec") == en.metadata.get("kernelspec")


@pytest.mark.parametrize("stem", PRESENT)
def test_code_cells_are_the_same_code(stem):
    en, zh = (_read(p) for p in PAIRS[stem])
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type == "code" and b.cell_type == "code":
            assert _code(b.source) == _code(a.source), (
                f"cell {a.get('id')}: the code differs from the English (only comments may):\n{b.source}")


@pytest.mark.parametrize("stem", PRESENT)
def test_code_in_markdown_is_the_same_code(stem):
    en, zh = (_read(p) for p in PAIRS[stem])
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type == "markdown":
            assert _fenced_code(b.source) == _fenced_code(a.source), (
                f"cell {a.get('id')}: a code block differs from the English (only comments may)")


@pytest.mark.parametrize("stem", PRESENT)
def test_headings_and_section_numbers_kept(stem):
    en, zh = (_read(p) for p in PAIRS[stem])
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type == "markdown":
            assert _headings(b.source) == _headings(a.source), f"cell {a.get('id')}: headings differ"


@pytest.mark.parametrize("stem", PRESENT)
def test_every_prose_cell_is_translated(stem):
    en, zh = (_read(p) for p in PAIRS[stem])
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type != "markdown" or _english_words(a.source) < 6:
            continue
        assert CJK.search(_without_code(b.source)), f"cell {a.get('id')}: not translated"
        # what is left in Latin letters is names, not sentences
        assert _english_words(b.source) < max(12, 0.5 * _english_words(a.source)), (
            f"cell {a.get('id')}: {_english_words(b.source)} English words remain "
            f"(of {_english_words(a.source)})")


# --------------------------------------------------------------------------- links
_LINK = re.compile(r"\]\(([^)\s]+\.ipynb)(#[^)\s]*)?\)")


@pytest.mark.parametrize("stem", PRESENT)
def test_links_reach_a_file_and_a_heading_from_the_pages_folder(stem):
    _, zh = PAIRS[stem]
    for target, anchor in _LINK.findall(_markdown(zh)):
        if target.startswith(("http:", "https:")):
            continue
        path = (zh.parent / target).resolve()
        assert path.exists(), f"{target}: no such file from {zh.parent.relative_to(ROOT)}/"
        twin = path.parent / "zh" / path.name
        assert path.parent.name == "zh" or not twin.exists(), (
            f"{target}: links to the English page although {twin.relative_to(ROOT)} exists")
        if anchor:
            assert anchor[1:] in _anchors(path), (
                f"{target}{anchor}: no heading with that anchor (it has {sorted(_anchors(path))[:40]})")


# --------------------------------------------------------------------------- terms
GLOSSARY_EN = ROOT / "chapters" / "glossary.ipynb"
GLOSSARY_ZH = ROOT / "chapters" / "zh" / "glossary.ipynb"


def _table_rows(path: Path) -> List[List[str]]:
    rows = []
    for line in _markdown(path).splitlines():
        if line.startswith("|") and not re.match(r"\|\s*-", line):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows[1:]   # the header row


def _glossary_en() -> List[Dict[str, str]]:
    return [{"en": r[0], "zh": r[1], "defined": r[3]} for r in _table_rows(GLOSSARY_EN)]


def _avoid_list() -> List[Tuple[str, str]]:
    """(rendering not to use, the term to use instead) from the 术语表's 不要写作 column."""
    out = []
    for r in _table_rows(GLOSSARY_ZH):
        for word in re.split(r"[,，、;；]", r[4] if len(r) > 4 else ""):
            if word.strip():
                out.append((word.strip(), r[0]))
    return out


needs_zh_glossary = pytest.mark.skipif(not GLOSSARY_ZH.exists(), reason="chapters/zh/glossary.ipynb not written yet")


@needs_zh_glossary
def test_the_zh_glossary_has_the_english_glossarys_rows_and_terms():
    zh = _table_rows(GLOSSARY_ZH)
    assert [r[:2] for r in zh] == [[g["zh"], g["en"]] for g in _glossary_en()], \
        "the 术语表 must list the English glossary's rows, same order, 中文 and English cells as there"
    assert all(len(r) == 5 for r in zh), "columns: 中文 | English | 释义 | 定义位置 | 不要写作"
    assert all(CJK.search(r[2]) for r in zh), "every 释义 is in Chinese"


@needs_zh_glossary
def test_the_avoided_renderings_are_words_no_page_uses():
    avoid = _avoid_list()
    assert len(avoid) >= 10, "the 不要写作 column lists the renderings the edition does not use"
    for page in _zh_pages():
        text = _without_code(_markdown(page))
        if page == GLOSSARY_ZH:
            text = "\n".join(" | ".join(r[:4]) for r in _table_rows(page))
        for word, term in avoid:
            assert word not in text, f"{page.relative_to(ROOT)}: uses {word!r}; the 术语表 says {term!r}"


def _main_terms(zh_cell: str) -> List[str]:
    """激活（特征图） -> [激活, 特征图]; 预分配标志（`is_prealloc`） -> [预分配标志, is_prealloc]."""
    return [t.strip("` ") for t in re.split(r"[（）()]", zh_cell) if t.strip("` ")]


def test_terms_defined_in_bold_are_bold_in_chinese():
    checked = 0
    for row in _glossary_en():
        m = re.search(r"\]\(([^)#]+)#([^)]+)\)", row["defined"])
        if not m:
            continue
        en_page = (GLOSSARY_EN.parent / m.group(1)).resolve()
        zh_page = en_page.parent / "zh" / en_page.name
        if not zh_page.exists():
            continue
        bold = " ".join(re.findall(r"\*\*(.+?)\*\*", _markdown(zh_page)))
        assert any(t in bold for t in _main_terms(row["zh"])), (
            f"{zh_page.relative_to(ROOT)}: the term {row['zh']!r} ({row['en']}) is not bold anywhere")
        checked += 1
    assert checked or not PRESENT


# --------------------------------------------------------------------------- rules
def _rules(markdown: str, label: str = "规则。") -> List[str]:
    """The sentences after ``**规则。**`` (English "**The rule.**"; chapters 0 and 1 write
    "**Rule:**", 规则：)."""
    return [_flat(m) for m in re.findall(rf"\*\*{label}\*\*\s*(.+?)(?:\n\s*\n|\Z)", markdown, re.S)]


@pytest.mark.parametrize("stem", [s for s in PRESENT if re.match(r"\d\d_", s)])
def test_a_chapters_rules_are_repeated_word_for_word_in_its_key_points(stem):
    en, zh = (_markdown(p) for p in PAIRS[stem])
    assert len(_rules(zh)) == en.count("**The rule.**"), "one **规则。** per **The rule.**"
    points = _flat(_section(zh, "要点"))
    if "## Key points" in en:
        assert points, "no ## 要点 section"
    for rule in _rules(zh):
        assert rule in points, f"要点 lacks the rule word for word: {rule!r}"


def _lab_rules(markdown: str) -> List[str]:
    block = re.search(r"\*\*本实验用到的规则\*\*(.*?)(?=\n\s*\n\*\*|\n## |\Z)", markdown, re.S)
    if not block:
        return []
    items = re.split(r"\n- ", "\n" + block.group(1).split("\n- ", 1)[-1] if "\n- " in block.group(1) else "")
    out = []
    for item in items:
        item = re.sub(r"^\*\*[^*]+\*\*\s*", "", _flat(item))   # a bold name before the rule
        if item:
            out.append(item)
    return out


@pytest.mark.parametrize("stem", [s for s in PRESENT if s.startswith("lab")])
def test_a_lab_quotes_its_chapters_rules_word_for_word(stem):
    en, zh = PAIRS[stem]
    lab = _markdown(zh)
    n = int(re.match(r"lab(\d+)", stem).group(1))
    chapter_stem = next((s for s in PAIRS if s.startswith(f"{n:02d}_")), None)
    if "The rules this lab uses" not in _markdown(en):
        return
    quoted = _lab_rules(lab)
    assert quoted, "no **本实验用到的规则** list"
    if chapter_stem is None or not PAIRS[chapter_stem][1].exists():
        pytest.skip(f"the zh chapter {n} is not written yet")
    chapter = _flat(_markdown(PAIRS[chapter_stem][1]))
    # as in English: a sentence the chapter states, or a course-wide sentence another chapter
    # states (C2's, chapter 1)
    course = " ".join(_flat(_markdown(PAIRS[s][1])) for s in PRESENT if re.match(r"\d\d_", s))
    for rule in quoted:
        assert rule in chapter or rule in course, \
            f"no zh chapter states this rule in these words: {rule!r}"


@pytest.mark.parametrize("stem", PRESENT)
def test_the_book_rebases_links_onto_its_pages(stem):
    """The book stages a zh page at its original's name (chapters/zh/01.ipynb is built as
    chapters/01): its links, written for JupyterLab, are rewritten to the pages' names."""
    from rknnlab.book.build import _NOTEBOOK_LINK, _rebase_links, _twins
    en, zh = PAIRS[stem]
    nb = _read(zh)
    before = _LINK.findall(_markdown(zh))
    _rebase_links(nb, zh, en, _twins(CONFIG, "zh"))
    after = _NOTEBOOK_LINK.findall("\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    assert len(after) == len(before)
    pages = {Path(e.file).resolve() for e in CONFIG.entries()}
    for _, target, tail in after:
        page = (en.parent / target).resolve()
        assert page in pages, f"{target}: not a page of the book (from {en.relative_to(ROOT)})"
        assert "/zh/" not in target


def test_rebasing_maps_a_twin_to_its_original_and_keeps_the_anchor(tmp_path):
    from rknnlab.book.build import _rebase_links, _twins
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(
        "见[实验 1](../../labs/zh/lab01_memory_layers.ipynb#练习-115-分钟) 与 [第 2 章](02_lifecycle.ipynb)，"
        "[网页](https://example.com/a.ipynb)。")]
    _rebase_links(nb, ROOT / "chapters" / "zh" / "01_memory_layers.ipynb", ROOT / "chapters" / "01_memory_layers.ipynb",
                  _twins(CONFIG, "zh"))
    assert nb.cells[0].source == ("见[实验 1](../labs/lab01_memory_layers.ipynb#练习-115-分钟) 与 "
                                  "[第 2 章](02_lifecycle.ipynb)，[网页](https://example.com/a.ipynb)。")


@pytest.mark.skipif(not (ROOT / "chapters" / "zh" / "cheatsheet.ipynb").exists(), reason="no zh cheat sheet yet")
def test_exporting_a_zh_page_names_its_file_zh_and_keeps_the_english_export(tmp_path):
    pytest.importorskip("nbconvert")
    from rknnlab.book.export import export_notebook
    out = export_notebook(ROOT / "chapters" / "zh" / "cheatsheet.ipynb", execute=False, printable=True,
                          build_dir=tmp_path, log=lambda s: None)
    assert out == tmp_path / "export" / "cheatsheet-zh-print.html"
    assert len(CJK.findall(out.read_text(encoding="utf-8"))) > 300
    english = export_notebook(ROOT / "chapters" / "cheatsheet.ipynb", execute=False, printable=True,
                              build_dir=tmp_path, log=lambda s: None)
    assert english == tmp_path / "export" / "cheatsheet-print.html" and out.exists()


@needs_zh_glossary
def test_the_library_s_chinese_avoids_them_too():
    """The checks' messages and the figures' labels (L(en, zh) pairs in lib/rknnlab) use the
    术语表's terms as the pages do."""
    avoid = _avoid_list()
    for path in sorted((ROOT / "lib" / "rknnlab").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not CJK.search(text):
            continue
        for word, term in avoid:
            assert word not in text, f"{path.relative_to(ROOT)}: uses {word!r}; the 术语表 says {term!r}"


_CJK_END = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_BLOCK_START = re.compile(r"^\s*([-*+] |\d+\. |\||#|>|:|```|~~~|\$\$|<|%|\(|\[\^)")


def _soft_breaks_between_chinese(markdown: str) -> List[str]:
    """Prose lines that end in a Chinese character (or full-width punctuation) and go on with
    one on the next line: a browser shows a space there (CommonMark makes the break a space)."""
    found, code, directives, prev = [], None, [], ""
    for line in markdown.split("\n"):
        s = line.strip()
        if code:
            code = None if s.startswith(code) and not s[len(code):].strip() else code
            prev = ""
            continue
        m = re.match(r"^(`{3,}|~{3,})(.*)$", s)
        if m:
            fence, rest = m.groups()
            if rest.startswith("{"):
                directives.append(fence)
            elif not rest.strip() and directives and fence == directives[-1]:
                directives.pop()
            else:
                code = fence
            prev = ""
            continue
        if (s and prev.strip() and not _BLOCK_START.match(line) and _CJK_END.search(prev.rstrip())
                and _CJK_START.search(s) and not re.match(r"^\s*(:|\||#)", prev)):
            found.append(prev.strip()[-12:] + "⏎" + s[:12])
        prev = line
    return found


@pytest.mark.parametrize("stem", PRESENT)
def test_no_line_break_inside_chinese_text(stem):
    _, zh = PAIRS[stem]
    found = [b for c in _read(zh).cells if c.cell_type == "markdown" for b in _soft_breaks_between_chinese(c.source)]
    assert not found, f"{len(found)} line breaks between Chinese characters (shown as spaces): {found[:5]}"


def test_the_soft_break_finder_sees_prose_only():
    md = ("第一行的结尾\n第二行\n\n- 列表项\n- 另一项\n\n```c\n// 注释\n// 注释\n```\n\n"
          "````{admonition} 标题\n正文的一行\n接着写\n````\n")
    assert _soft_breaks_between_chinese(md) == ["第一行的结尾⏎第二行", "正文的一行⏎接着写"]


def test_an_english_page_in_the_chinese_book_links_to_the_chinese_sections():
    """Lab 7 (no translation yet) is shown in English in the zh book; its links to chapter
    sections land on the zh chapters' headings (the k-th heading of a page is the k-th of its
    twin)."""
    from rknnlab.book.build import _anchor_maps, _heading_anchors, _translate_anchors
    maps = _anchor_maps(CONFIG, "zh")
    for stem in PRESENT:
        en, zh = PAIRS[stem]
        assert maps[en.resolve()] == dict(zip(_heading_anchors(en), _heading_anchors(zh)))
        assert set(maps[en.resolve()].values()) <= _anchors(zh)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(
        "See [§4](../chapters/01_memory_layers.ipynb#4-native-layouts) and [x](../chapters/01_memory_layers.ipynb).")]
    _translate_anchors(nb, ROOT / "labs" / "lab07_misconceptions.ipynb", maps)
    zh_anchor = maps[(ROOT / "chapters" / "01_memory_layers.ipynb").resolve()]["4-native-layouts"]
    assert CJK.search(zh_anchor)
    assert nb.cells[0].source == (f"See [§4](../chapters/01_memory_layers.ipynb#{zh_anchor}) and "
                                  "[x](../chapters/01_memory_layers.ipynb).")


def test_the_chinese_search_knows_the_terms_the_pages_define():
    pytest.importorskip("jieba")
    import jieba
    from rknnlab.book.build import _chinese_terms
    terms = _chinese_terms([_read(zh) for _, zh in PAIRS.values() if zh.exists()]).split()
    if not PRESENT:
        pytest.skip("no zh page yet")
    assert {"零拷贝", "上下文", "复用"} <= set(terms)
    tokenizer = jieba.Tokenizer()
    assert "零拷贝" not in tokenizer.lcut_for_search("零拷贝模型缓冲区"), "jieba alone cuts the term"
    for term in terms:
        tokenizer.add_word(term)
    assert "零拷贝" in tokenizer.lcut_for_search("零拷贝模型缓冲区")


# the texts a notebook's own code gives matplotlib: a title, an axis label, a legend entry
_FIGURE_CALLS = {"set_title", "suptitle", "set_xlabel", "set_ylabel", "text", "annotate", "set"}
_FIGURE_KEYWORDS = {"title", "xlabel", "ylabel", "label"}
_ENGLISH_WORD = re.compile(r"(?<![\w.#/-])[A-Za-z]*[a-z][A-Za-z]*(?:'[a-z]+)?(?![\w(/#-])")


def _english_words(node) -> int:
    import ast
    if isinstance(node, ast.IfExp):
        return max(_english_words(node.body), _english_words(node.orelse))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parts = [node.value]
    elif isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
    else:                       # a name, or a call such as plot.say("...", "...")
        return 0
    return sum(len([w for w in _ENGLISH_WORD.findall(p) if len(w) > 1]) for p in parts)


def test_a_notebooks_own_figure_texts_are_said_in_both_languages():
    """A title or label that a notebook's own code writes in English (2+ words) would stay
    English in the zh twin, whose code is the same: it must be ``plot.say(english, chinese)``."""
    import ast
    found = []
    for stem, (en, _) in sorted(PAIRS.items()):
        for cell in nbformat.read(str(en), as_version=4).cells:
            if cell.cell_type != "code":
                continue
            code = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                values = node.args[:1] if name in _FIGURE_CALLS else []
                values += [k.value for k in node.keywords if k.arg in _FIGURE_KEYWORDS]
                found += [f"{stem} cell {cell.id}: {ast.get_source_segment(code, v)[:80]}"
                          for v in values if _english_words(v) >= 2]
    assert not found, "write these as plot.say(english, chinese):\n" + "\n".join(found)
