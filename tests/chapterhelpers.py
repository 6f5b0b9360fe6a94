"""What the static chapter tests share: reading a chapter's cells and markdown, finding its
sections, and the checks every chapter passes (each section's Predict with a folded answer,
the assumptions named inline against the generated USED list, C gets paired with releases,
no seed names, short code cells saved without outputs) and the prose measures (unfolded words,
sentences).  Each tests/test_chapterNN.py keeps its own data (rules, names, budgets)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Dict, List


def cells(chapter: Path) -> List[dict]:
    return json.loads(chapter.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def markdown(chapter: Path) -> str:
    return "\n".join(source(c) for c in cells(chapter) if c["cell_type"] == "markdown")


def flat(text: str) -> str:
    """Whitespace collapsed, so that a rule wrapped over lines still matches."""
    return re.sub(r"\s+", " ", text)


def section(markdown: str, heading: str) -> str:
    """From the ``## <heading>`` line to the next ``## `` heading."""
    start = markdown.index(f"\n## {heading}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end >= 0 else None]


def numbered_sections(markdown: str) -> Dict[str, str]:
    """Number -> body of every ``## <n>. `` section."""
    return {number: section(markdown, f"{number}. ")
            for number in re.findall(r"^## (\d+)\. ", markdown, flags=re.M)}


def c_blocks(markdown: str) -> List[str]:
    return re.findall(r"```c\n(.*?)```", markdown, flags=re.S)


def prose(markdown: str, folded: bool) -> str:
    """The markdown without code blocks and HTML comments; ``folded=False`` also drops the
    contents of dropdowns (what a reader sees without opening anything)."""
    markdown = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    out, code, boxes = [], None, []          # boxes: [fence, folded?]
    for line in markdown.splitlines():
        m = re.match(r"\s*(`{3,}|~{3,})\s*(.*)$", line)
        if code is not None:
            if m and not m.group(2) and len(m.group(1)) >= len(code):
                code = None
            continue
        if m:
            fence, info = m.group(1), m.group(2).strip()
            if info.startswith("{"):
                boxes.append([fence, False])
            elif not info and boxes and len(fence) == len(boxes[-1][0]):
                boxes.pop()
            else:
                code = fence
            out.append("")
            continue
        if line.startswith(":class:"):
            if boxes and "dropdown" in line:
                boxes[-1][1] = True
            continue
        if folded or not any(f for _, f in boxes):
            out.append(line)
    return "\n".join(out)


def unfolded_prose(markdown: str) -> str:
    """What a reader reads without opening anything, less tables (as the course's style measure counts)."""
    return "\n".join(ln for ln in prose(markdown, folded=False).splitlines() if not ln.lstrip().startswith("|"))


def without_wrong_claims(markdown: str) -> str:
    """The markdown without ```text fences (claims as published) and Wrong claim boxes."""
    markdown = re.sub(r"```text\n.*?```", "", markdown, flags=re.S)
    return re.sub(r"```\{admonition\} Wrong claim:.*?\n```", "", markdown, flags=re.S)


def sentences(markdown: str) -> List[str]:
    """The sentences of the prose, boxes included (code, comments and table rows left out);
    a list item or a heading ends a sentence."""
    lines = [ln for ln in prose(markdown, folded=True).splitlines() if not ln.lstrip().startswith("|")]
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:- |\d+\. |#))", "\n".join(lines))
    out = []
    for block in blocks:
        out += [s for s in re.split(r"(?<=[.!?])\s+", flat(block).strip()) if s]
    return out


def assert_prose_within_budget(markdown: str, max_words: int, max_section_words: int,
                               max_sentence_words: int) -> None:
    """Unfolded prose at most ``max_words`` in all and ``max_section_words`` per ``## `` section;
    no sentence (boxes included) over ``max_sentence_words``."""
    text = unfolded_prose(markdown)
    assert len(text.split()) <= max_words, f"{len(text.split())} words of unfolded prose"
    for part in re.split(r"\n(?=## )", text):
        title = part.strip().splitlines()[0]
        assert len(part.split()) <= max_section_words, f"{title}: {len(part.split())} words"
    for sentence in sentences(markdown):
        assert len(sentence.split()) <= max_sentence_words, \
            f"a sentence over {max_sentence_words} words: {sentence!r}"


def assert_sections_predict_with_folded_answers(markdown: str, min_sections: int, expected: str) -> Dict[str, str]:
    """At least ``min_sections`` numbered sections, each with a **Predict.** and a folded
    Answer admonition after it; returns the sections (``expected`` names them when too few)."""
    sections = numbered_sections(markdown)
    assert len(sections) >= min_sections, expected
    for number, body in sections.items():
        assert "**Predict.**" in body, f"section {number} has no **Predict.**"
        after = body[body.index("**Predict.**"):]
        assert re.search(r"```+\{admonition\} Answer\s*\n:class: dropdown", after), \
            f"section {number}: the prediction's answer is not in a folded admonition after it"
    return sections


def assert_inline_assumptions_match_the_generated_list(chapter: Path) -> None:
    """The assumptions named in the prose (A<n>) are exactly the last code cell's USED, and each is
    listed in rknnlab.sim.ASSUMPTIONS."""
    from rknnlab.sim import ASSUMPTIONS
    prose = re.sub(r"```c\n.*?```", "", markdown(chapter), flags=re.S)   # C blocks are not prose
    named = set(re.findall(r"\bA\d+\b", prose))
    last_code = [c for c in cells(chapter) if c["cell_type"] == "code"][-1]
    used_lists = [node for node in ast.walk(ast.parse(source(last_code)))
                  if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "USED" for t in node.targets)]
    assert used_lists, "the last code cell must define USED, the assumptions the chapter relies on"
    used = set(ast.literal_eval(used_lists[0].value))
    known = {key for key, _, _ in ASSUMPTIONS}
    assert used <= known, f"USED names assumptions that rknnlab.sim does not list: {sorted(used - known)}"
    assert named - used == set(), f"named in the text but missing from USED: {sorted(named - used)}"
    assert used - named == set(), f"in USED but never named in the text: {sorted(used - named)}"


def assert_gets_are_released(block: str) -> None:
    if "rknn_outputs_get(" in block:
        assert "rknn_outputs_release(" in block, f"a C block gets outputs and never releases:\n{block}"


def assert_no_seed_names(chapter: Path) -> None:
    for index, cell in enumerate(cells(chapter)):
        assert not re.search(r"\bseed\s*0\d\d\b", source(cell), flags=re.I), f"cell {index} names a seed text"


def assert_no_functions_defined(chapter: Path) -> None:
    """No function, lambda or class in a code cell: analysis code belongs in rknnlab."""
    for index, cell in enumerate(cells(chapter)):
        if cell["cell_type"] == "code":
            defs = [type(n).__name__ for n in ast.walk(ast.parse(source(cell)))
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
            assert not defs, f"cell {index} defines {defs}: analysis code belongs in rknnlab"


def assert_no_placeholder_text(chapter: Path) -> None:
    for index, cell in enumerate(cells(chapter)):
        assert not re.search(r"placeholder|\bTODO\b|\bTBD\b|\bFIXME\b|\bXXX\b", source(cell)), \
            f"cell {index} has placeholder text"


def assert_code_cells_short_and_without_outputs(chapter: Path, max_lines: int) -> None:
    for index, cell in enumerate(cells(chapter)):
        if cell["cell_type"] != "code":
            continue
        lines = source(cell).splitlines()
        assert len(lines) <= max_lines, f"cell {index} has {len(lines)} lines (at most {max_lines})"
        assert not cell.get("outputs") and cell.get("execution_count") is None, \
            f"cell {index} was saved with outputs"
