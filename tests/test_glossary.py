"""chapters/glossary.ipynb: every term the chapters and labs define in bold has a row, every row
has a Chinese term and a short definition, and every "Defined in" link reaches a real section.

Course style rule 10: a term is **bold** where it is defined, and it goes into the glossary
(English and Chinese). Bold is also used for labels and emphasis; those are told apart here:

- by shape: a bold span ending in ":", ".", "?" or "!" is a run-in label ("**Predict:**",
  "**What this shows.**", "**Yes.**"); one starting "(a)" or "(c1)" labels a list item; one of
  more than MAX_TERM_WORDS words stresses a phrase (no term of the course is that long);
- by place: the objective verbs of a header's "Objectives" list, and anything inside an Answer
  box (an answer commits to a result, it defines nothing);
- by name: NOT_TERMS below, each with the reason it is not a term.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "chapters" / "glossary.ipynb"

#: bold words that are not terms (normalised: lower case, no backticks)
NOT_TERMS = {
    # labels the course's formats use without final punctuation
    "questions", "objectives",                         # a header's lists
    "predict", "answer", "what this shows", "rule", "the rule", "takeaway", "hint", "hints",
                                                       # a section's arc (course style 3)
    "passed", "not passed",                            # what a lab check prints
    "the check",                                       # a lab exercise's part
    "exercise",                                        # a chapter's worked exercise
    "run",                                             # the runner panel's button
    "jupyterlab on a board", "the html book", "jupyterlab on a pc",   # ch0's table of places
    "bold",                                            # "every term in **bold** is in the glossary"
    "release", "prealloc", "fresh",                    # lab 4's names for its kinds of variant
    # emphasis inside a sentence
    "all", "once", "every", "every time", "new", "one", "why", "computes", "measurement",
    "same network", "two threads", "who allocates", "as published",
}
MAX_TERM_WORDS = 4

LABEL_END = (":", ".", "?", "!")
CJK = re.compile(r"[\u3400-\u9fff]")
FENCE = re.compile(r"\s*(`{3,}|~{3,})\s*(.*)$")
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
LINK = re.compile(r"^\[([^\]]+)\]\(([^)#\s]+)#([^)\s]+)\)$")


def norm(text: str) -> str:
    return " ".join(text.replace("`", "").lower().split())


def markdown_cells(path: Path) -> Iterator[Tuple[int, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            src = cell["source"]
            yield i, src if isinstance(src, str) else "".join(src)


def prose(text: str) -> str:
    """The markdown without code blocks, HTML comments and Answer boxes."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    out: List[str] = []
    code: Optional[str] = None          # the fence of the code block we are in
    boxes: List[bool] = []              # open MyST directives: is it an Answer box?
    for line in text.splitlines():
        m = FENCE.match(line)
        if code is not None:
            if m and not m.group(2) and m.group(1)[0] == code[0] and len(m.group(1)) >= len(code):
                code = None
            continue
        if m:
            fence, info = m.group(1), m.group(2).strip()
            if info.startswith("{"):
                boxes.append(info.startswith("{admonition}") and
                             info[len("{admonition}"):].strip().startswith("Answer"))
            elif not info and boxes:
                boxes.pop()
            else:
                code = fence
            continue
        if not any(boxes):
            out.append(line)
    # inline code that holds "**" (a C pointer to a pointer) is not bold
    return re.sub(r"`[^`\n]*`", lambda m: "``" if "**" in m.group(0) else m.group(0), "\n".join(out))


def without_objectives(header: str) -> str:
    """A header cell without its Objectives list (one bold verb per objective)."""
    out, inside = [], False
    for line in header.splitlines():
        if "**Objectives**" in line:
            inside = True
            continue
        if inside:
            if not line.strip() or re.match(r"\s*(-|\d+\.)\s|\s{2,}\S", line):
                continue
            inside = False
        out.append(line)
    return "\n".join(out)


def bold_spans(markdown: str, header: bool = False) -> List[str]:
    text = prose(markdown)
    if header:
        text = without_objectives(text)
    return [" ".join(m.group(1).split()) for m in BOLD.finditer(text)]


def is_term(span: str) -> bool:
    return not (span.endswith(LABEL_END) or re.match(r"\(\w+\)", span)
                or len(span.split()) > MAX_TERM_WORDS or norm(span) in NOT_TERMS)


def pages() -> List[Path]:
    chapters = [p for p in sorted((ROOT / "chapters").glob("*.ipynb")) if p != GLOSSARY]
    return chapters + sorted((ROOT / "labs").glob("*.ipynb"))


def bold_terms() -> Dict[str, List[str]]:
    """Every bold-defined term of the chapters and labs -> where it is bold."""
    found: Dict[str, List[str]] = {}
    for path in pages():
        for i, text in markdown_cells(path):
            for span in bold_spans(text, header=(i == 0)):
                if is_term(span):
                    found.setdefault(span, []).append(f"{path.relative_to(ROOT)} cell {i}")
    return found


def glossary_rows() -> List[Dict[str, object]]:
    rows = []
    for _, text in markdown_cells(GLOSSARY):
        for line in text.splitlines():
            if not line.startswith("|") or re.match(r"\|\s*-", line) or line.startswith("| English"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert len(cells) == 4, f"a glossary row needs 4 columns: {line}"
            english, chinese, meaning, where = cells
            m = re.match(r"(.+?)(?: \(also: (.+)\))?$", english)
            names = [m.group(1)] + (m.group(2).split(", ") if m.group(2) else [])
            rows.append({"line": line, "term": m.group(1), "names": names, "chinese": chinese,
                         "meaning": meaning, "where": where})
    return rows


def matches(term: str, names: set) -> bool:
    t = norm(term)
    return t in names or (t.endswith("s") and t[:-1] in names)


def slug(title: str) -> str:
    """MyST's heading anchor (myst_heading_anchors: GitHub-style)."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.lower().replace(" ", "-"))


def headings(path: Path) -> Dict[str, Optional[str]]:
    """anchor of every heading (levels 1-3) -> the number of its section or exercise."""
    found: Dict[str, Optional[str]] = {}
    number: Optional[str] = None
    for _, text in markdown_cells(path):
        for line in prose(text).splitlines():
            m = re.match(r"(#{1,3}) (.+)", line)
            if not m:
                continue
            title = m.group(2).strip()
            if len(m.group(1)) <= 2:
                n = re.match(r"(?:Exercise )?(\d+)[. ]", title)
                number = n.group(1) if n and len(m.group(1)) == 2 else None
            found[slug(title)] = number
    return found


# --- the glossary page -------------------------------------------------------------------------

def test_glossary_is_a_valid_notebook_of_markdown_cells():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(GLOSSARY), as_version=4)
    nbformat.validate(nb)
    assert nb.cells and all(c.cell_type == "markdown" for c in nb.cells)
    assert len(glossary_rows()) > 50


def test_every_bold_defined_term_has_a_row():
    names = {norm(n) for row in glossary_rows() for n in row["names"]}
    missing = {t: where for t, where in bold_terms().items() if not matches(t, names)}
    assert not missing, ("bold-defined terms without a glossary row (add a row to "
                         "chapters/glossary.ipynb, or un-bold a word that is not a term):\n" +
                         "\n".join(f"  {t!r}: {', '.join(w)}" for t, w in sorted(missing.items())))


def test_every_row_has_a_chinese_term_and_a_short_definition():
    for row in glossary_rows():
        assert row["term"].strip(), row["line"]
        assert CJK.search(row["chinese"]), f"no Chinese term: {row['line']}"
        meaning = row["meaning"]
        assert meaning.endswith("."), f"the definition should be a sentence: {row['line']}"
        for sentence in re.split(r"(?<=[.!?;:])\s+", meaning):
            assert len(sentence.split()) <= 30, f"sentence over 30 words: {sentence!r}"


def test_rows_are_alphabetical_and_each_term_appears_once():
    keys = [norm(row["term"]) for row in glossary_rows()]
    assert keys == sorted(keys), "rows out of alphabetical order"
    assert len(keys) == len(set(keys)), "a term has two rows"


def test_every_link_reaches_a_section_of_an_existing_notebook():
    for row in glossary_rows():
        m = LINK.match(row["where"])
        assert m, f"'Defined in' must be one link [Chapter n §k](file.ipynb#anchor): {row['line']}"
        label, target, anchor = m.groups()
        path = (GLOSSARY.parent / target).resolve()
        assert path.suffix == ".ipynb" and path.is_file(), f"no notebook {target}: {row['line']}"
        anchors = headings(path)
        assert anchor in anchors, (f"{target} has no heading with anchor #{anchor} "
                                   f"(it has {sorted(anchors)}): {row['line']}")
        number = re.search(r"(?:§|exercise )(\d+)$", label)
        if number:
            assert anchors[anchor] == number.group(1), f"{label} links to another section: {row['line']}"


# --- the extraction itself (so the tests above can fail) ---------------------------------------

def test_extraction_finds_terms_and_skips_labels_code_answers_and_objectives():
    header = ("# 9. A chapter\n\n**Time:** 5 minutes.\n\n**Questions**\n\n- Why?\n\n"
              "**Objectives**\n\n- **Explain** the **frob** (exercise 1).\n- **Count**\n  things.\n\n"
              "A **widget** is defined in the header.\n")
    body = ("**Predict:** how big?\n\nA **stride table** is a\n**blob   store** of rows.\n\n"
            "```{admonition} Answer\n:class: dropdown\n**Yes.** A **non-term** here.\n```\n\n"
            "<!-- c-prelude: char **argv = 0; -->\n```c\nint main(int argc, char **argv) { return 0; }\n```\n\n"
            "Call `f(char **p)` or **all** of them, **`size_in_bytes`** and `g()`. "
            "**The output of every layer but the last** is stressed. **(c1) a list label** and **A widely copied recipe says**.\n\n"
            "````{admonition} Going further\n```c\nint **q;\n```\nThe **mmap threshold** matters.\n````\n")
    found = [s for s in bold_spans(header, header=True) + bold_spans(body) if is_term(s)]
    assert found == ["widget", "stride table", "blob store", "`size_in_bytes`", "mmap threshold"]
    names = {"stride table", "blob store", "mmap threshold", "widget"}
    assert matches("Widgets", names) and matches("`Stride table`", names)
    assert not matches("frob", names)


def test_heading_anchors_are_mysts():
    myst_slugs = pytest.importorskip("myst_parser.slugs")
    for title in ["4. Native layouts: NC1HWC2 and strides", "`MemFree`: the system's view",
                  "Exercise 5 ★ (15 min): which activations dominate, and why"]:
        assert slug(title) == myst_slugs.github_slugify(title.replace("`", ""))
