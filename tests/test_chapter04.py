"""Chapter 4 keeps the course's shared rules and its own bookkeeping straight.

Static checks of chapters/04_output_reuse.ipynb (it is executed by
tests/test_notebooks.py, its C by tests/test_notebook_c.py):

- the rules shared by chapter, lab and key points appear in the key points in
  the team's exact words;
- every simulator assumption the chapter names inline is in the list its last
  cell generates, and the other way round, and each exists in rknnlab.sim;
- every numbered section asks the reader to predict, with a folded answer;
- every C block that calls rknn_outputs_get also calls rknn_outputs_release;
- no reader-visible text names the course's source texts ("seed 000");
- code cells stay short, and the notebook is saved without outputs.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "04_output_reuse.ipynb"

#: the team's decided words (one rule per concept: chapter, lab and key points say the same)
RULES = [
    "Reuse means no allocation per call. Flat memory only shows there is no leak.",
    "want_float = 1: n_elems × 4 bytes (float32); want_float = 0: attr.size bytes (the output's own "
    "type). Reallocate when the buffer is too small; a larger buffer is fine if rknn_output.size says "
    "its real capacity.",
    "Pair every rknn_outputs_get with one rknn_outputs_release, with is_prealloc = 1 too (Rockchip's "
    "dynamic-shape demo says every get must be paired with one release). With is_prealloc = 1, that "
    "release frees nothing of yours: a simulator assumption, not a documented fact.",
    "C2 (the channel block of NC1HWC2) depends on SoC and dtype: int8 is 16 on rk3588/rk3576/rk3562 "
    "and 8 on rk3566/rk3568; read it from the native attr's dims[4], never assume it.",
]

MAX_CODE_LINES = 25


def _cells() -> List[dict]:
    return json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _markdown() -> str:
    return "\n".join(_source(c) for c in _cells() if c["cell_type"] == "markdown")


def _flat(text: str) -> str:
    """Whitespace collapsed, so that a rule wrapped over lines still matches."""
    return re.sub(r"\s+", " ", text)


def _section(markdown: str, heading: str) -> str:
    start = markdown.index(f"\n## {heading}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end >= 0 else None]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r[:40])
def test_key_points_state_the_shared_rule_in_its_words(rule: str) -> None:
    key_points = _flat(_section(_markdown(), "Key points"))
    assert rule in key_points, f"the key points do not state this rule word for word: {rule!r}"


def test_inline_assumptions_match_the_generated_list() -> None:
    from rknnlab.sim import ASSUMPTIONS
    prose = re.sub(r"```c\n.*?```", "", _markdown(), flags=re.S)   # C blocks are not prose
    named = set(re.findall(r"\bA\d+\b", prose))
    last_code = [c for c in _cells() if c["cell_type"] == "code"][-1]
    used_lists = [node for node in ast.walk(ast.parse(_source(last_code)))
                  if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "USED" for t in node.targets)]
    assert used_lists, "the last code cell must define USED, the assumptions the chapter relies on"
    used = set(ast.literal_eval(used_lists[0].value))
    known = {key for key, _, _ in ASSUMPTIONS}
    assert used <= known, f"USED names assumptions that rknnlab.sim does not list: {sorted(used - known)}"
    assert named - used == set(), f"named in the text but missing from USED: {sorted(named - used)}"
    assert used - named == set(), f"in USED but never named in the text: {sorted(used - named)}"


def test_every_section_asks_for_a_prediction_with_a_folded_answer() -> None:
    markdown = _markdown()
    sections = re.findall(r"^## (\d+)\. ", markdown, flags=re.M)
    assert len(sections) >= 4, "expected the chapter's numbered sections"
    for number in sections:
        body = markdown[markdown.index(f"\n## {number}. "):]
        nxt = body.find("\n## ", 1)
        body = body[:nxt if nxt >= 0 else None]
        assert "**Predict.**" in body, f"section {number} has no **Predict.**"
        predict_at = body.index("**Predict.**")
        assert re.search(r"```+\{admonition\} Answer\s*\n:class: dropdown", body[predict_at:]), \
            f"section {number}: the prediction's answer is not in a folded admonition after it"


def test_c_blocks_pair_every_get_with_a_release() -> None:
    blocks = re.findall(r"```c\n(.*?)```", _markdown(), flags=re.S)
    assert blocks, "no C blocks found"
    for block in blocks:
        if "rknn_outputs_get(" in block:
            assert "rknn_outputs_release(" in block, f"a C block gets outputs and never releases:\n{block}"


def test_no_reader_visible_seed_names() -> None:
    for index, cell in enumerate(_cells()):
        text = _source(cell)
        assert not re.search(r"\bseed\s*0\d\d\b", text, flags=re.I), f"cell {index} names a seed text"


def test_code_cells_are_short_and_saved_without_outputs() -> None:
    for index, cell in enumerate(_cells()):
        if cell["cell_type"] != "code":
            continue
        lines = _source(cell).splitlines()
        assert len(lines) <= MAX_CODE_LINES, f"cell {index} has {len(lines)} lines (at most {MAX_CODE_LINES})"
        assert not cell.get("outputs") and cell.get("execution_count") is None, \
            f"cell {index} was saved with outputs"
