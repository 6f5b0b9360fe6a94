"""What the chapter tests share: reading a chapter's cells and markdown, finding its
sections, and the checks every chapter passes (its rules in their section and the key points,
the header's questions and objectives, each section's arc with a Predict and a folded answer,
wrong claims shown as published after a prompt, RKNN names the course's header declares, the
assumptions named inline against the generated USED list, C gets paired with releases, the
board's calls, a lab quoting the chapter's rules, no seed names, short code cells saved without
outputs, short labelled outputs of the executed chapter) and the prose measures (unfolded words,
sentences) against the course's budgets.  Each tests/test_chapterNN.py keeps its own data
(rules, titles, objectives, names)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence

import pytest

#: the course's budgets (course style 2, 5, 6 and 10): lines of a code cell, lines a cell prints,
#: unfolded words of a chapter and of a section, words of a sentence
MAX_CODE_LINES, MAX_OUTPUT_LINES = 25, 15
MAX_WORDS, MAX_SECTION_WORDS, MAX_SENTENCE_WORDS = 3000, 600, 30

#: the course's own declarations of the RKNN C API (written from facts)
C_API_HEADER = Path(__file__).resolve().parents[1] / "lib" / "rknnlab" / "c" / "rknn_api.h"


def cells(chapter: Path) -> List[dict]:
    return json.loads(chapter.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def markdown(chapter: Path) -> str:
    return "\n".join(source(c) for c in cells(chapter) if c["cell_type"] == "markdown")


def code(chapter: Path) -> str:
    return "\n".join(source(c) for c in cells(chapter) if c["cell_type"] == "code")


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


def assert_prose_within_budget(markdown: str, max_words: int = MAX_WORDS,
                               max_section_words: int = MAX_SECTION_WORDS,
                               max_sentence_words: int = MAX_SENTENCE_WORDS) -> None:
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
    used_lists = [node for node in ast.walk(ast.parse(python_of(source(last_code))))
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


def python_of(cell_source: str) -> str:
    """A code cell as the Python IPython runs: magics (``%load_ext``, ``%%rknn_c``) become
    get_ipython() calls, so a C cell is one call holding its C as a string."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(cell_source)


def assert_no_functions_defined(chapter: Path) -> None:
    """No function, lambda or class in a code cell: analysis code belongs in rknnlab."""
    for index, cell in enumerate(cells(chapter)):
        if cell["cell_type"] == "code":
            defs = [type(n).__name__ for n in ast.walk(ast.parse(python_of(source(cell))))
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
            assert not defs, f"cell {index} defines {defs}: analysis code belongs in rknnlab"


def assert_no_placeholder_text(chapter: Path) -> None:
    for index, cell in enumerate(cells(chapter)):
        assert not re.search(r"placeholder|\bTODO\b|\bTBD\b|\bFIXME\b|\bXXX\b", source(cell)), \
            f"cell {index} has placeholder text"


def assert_code_cells_short_and_without_outputs(chapter: Path, max_lines: int = MAX_CODE_LINES) -> None:
    for index, cell in enumerate(cells(chapter)):
        if cell["cell_type"] != "code":
            continue
        lines = source(cell).splitlines()
        assert len(lines) <= max_lines, f"cell {index} has {len(lines)} lines (at most {max_lines})"
        assert not cell.get("outputs") and cell.get("execution_count") is None, \
            f"cell {index} was saved with outputs"


def assert_notebook_keeps_the_course_rules(chapter: Path) -> None:
    """No function defined in a code cell, code cells short and saved without outputs, no seed
    names, no placeholder text."""
    assert_no_functions_defined(chapter)
    assert_code_cells_short_and_without_outputs(chapter)
    assert_no_seed_names(chapter)
    assert_no_placeholder_text(chapter)


# --------------------------------------------------------------------------- rules and header
def assert_rule_stated_in_its_section_and_the_key_points(markdown: str, number: str, rule: str) -> None:
    """Section ``number`` states ``**The rule.** <rule>`` word for word, and the key points hold it."""
    body = flat(numbered_sections(markdown)[number])
    assert f"**The rule.** {rule}" in body, f"§{number} does not state its rule word for word: {rule!r}"
    assert rule in flat(section(markdown, "Key points")), f"the key points lack: {rule!r}"


def assert_key_points_are_the_rules(markdown: str, rules: Mapping[str, str]) -> None:
    points = re.findall(r"^- (.*(?:\n  .*)*)", section(markdown, "Key points"), flags=re.M)
    assert [flat(p) for p in points] == [rules[n] for n in sorted(rules)]


def assert_header_ties_each_objective_to_a_lab_exercise(header: str, lab: int,
                                                         objectives: Mapping[str, List[int]],
                                                         starred: Sequence[str] = ()) -> None:
    """The header asks 2-4 questions and gives ``objectives`` (bold verb -> the Lab ``lab``
    exercises that assess it); ``starred`` are the verbs whose exercise is the optional ★ one.
    It shows the time, the prerequisites and the glossary."""
    questions = re.search(r"\*\*Questions\*\*\n\n((?:- .*\n?)+)", header)
    assert questions and 2 <= len(questions.group(1).strip().splitlines()) <= 4
    rows = re.findall(rf"^- \*\*(\w+)\*\* .*\((?:Lab {lab}, )?exercises? ([\d, and]+)(, the optional ★ one)?\)\.$",
                      header, flags=re.M)
    found = {verb: [int(n) for n in re.findall(r"\d", numbers)] for verb, numbers, _ in rows}
    assert found == objectives, f"the objectives and their Lab {lab} exercises: {found}"
    marked = [verb for verb, _, star in rows if star]
    assert marked == list(starred), f"the objectives whose exercise is the optional ★ one: {marked}"
    assessed = sorted(n for numbers in found.values() for n in numbers)
    assert 2 <= len(found) <= 4 and assessed == list(range(1, len(assessed) + 1)), \
        f"2-4 objectives, and every Lab {lab} exercise assesses one: {assessed}"
    for label in ("**Time.**", "**Prerequisites:**", "**Glossary:**", "(glossary.ipynb)"):
        assert label in header


# --------------------------------------------------------------------------- section arc
def assert_sections_follow_the_arc(markdown: str, titles: Mapping[str, str], expected: str) -> None:
    """The numbered sections are ``titles``, each opening with its **Question:**, with a
    **Predict.** and its folded answer, and a **What this shows.**"""
    sections = assert_sections_predict_with_folded_answers(markdown, len(titles), expected)
    assert sorted(sections) == sorted(titles)
    for number, body in sections.items():
        assert body.startswith(f"\n## {number}. {titles[number]}\n"), f"section {number} is not {titles[number]!r}"
        assert "**What this shows.**" in body, f"section {number} has no **What this shows.**"
        assert "**Question:**" in body, f"section {number} does not open with its question"


def assert_wrong_claims_shown_as_published_after_a_prompt(markdown: str, claims: Iterable[str],
                                                          boxes_may_share_a_prompt: bool = False) -> None:
    """Course style 8: a Wrong claim box for each of ``claims`` (words of its title, lower case),
    each after the claim as published (a ```text fence) and a **Predict.** after that, in the
    format "A widely copied recipe says / What the runtime does / Evidence". With
    ``boxes_may_share_a_prompt``, a box right after another box may share that box's prompt."""
    assert "Errata:" not in markdown
    starts = [m.start() for m in re.finditer(r"```\{admonition\} Wrong claim:", markdown)]
    titles = [markdown[s:markdown.index("\n", s)].lower() for s in starts]
    for claim in claims:
        assert any(claim in t for t in titles), f"no Wrong claim box for {claim!r}: {titles}"
    previous = 0
    for start in starts:
        section_start = markdown.rfind("\n## ", 0, start)
        before = markdown[max(previous, section_start):start]
        if boxes_may_share_a_prompt and "```text\n" not in before:
            before = markdown[section_start:start]
        assert "```text\n" in before, "a wrong claim without its 'as published' text before it"
        assert "**Predict.**" in before[before.index("```text\n"):], "a wrong claim with no prompt after the claim"
        box = markdown[start:markdown.index("\n```", start + 3)]
        assert ":class: warning" in box and "**A widely copied recipe says**" in box, box
        for part in ("**What the runtime does:**", "**Evidence:**"):
            assert part in box, f"a wrong claim box lacks {part!r}:\n{box}"
        previous = markdown.index("\n```", start + 3)


# --------------------------------------------------------------------------- names and calls
def assert_rknn_names_outside_wrong_claims_are_declared(chapter: Path, not_api: Iterable[str],
                                                        invented: Iterable[str]) -> None:
    """Every rknn_/RKNN_ name in the prose outside wrong claims and in the code is declared by the
    course's header (``not_api``: files, demos, repositories that look like API names); the
    ``invented`` names appear only inside wrong claims, and the header declares none of them."""
    declared_text = C_API_HEADER.read_text(encoding="utf-8")
    declared = set(re.findall(r"\b(?:rknn|RKNN)_\w+", declared_text))
    text = without_wrong_claims(markdown(chapter)) + "\n" + code(chapter)
    used = set(re.findall(r"\b(?:rknn|RKNN)_\w+", text))
    unknown = {n for n in used - declared - set(not_api) if not n.endswith("_")}
    assert not unknown, f"RKNN names that the runtime's header does not declare: {sorted(unknown)}"
    for name in invented:
        assert name not in text, f"{name} appears outside a wrong claim"
        assert name not in declared_text


def assert_the_calls_are_the_boards(chapter: Path, calls: Iterable[str]) -> None:
    """The chapter opens the runtime the board uses too, labels its results with ``rt.source``,
    still makes each of ``calls`` and never asks for the simulator by name."""
    text = code(chapter)
    assert "rknnlab.open_runtime()" in text and "SOURCE = rt.source" in text
    for call in calls:
        assert call in text, f"the chapter no longer calls {call}"
    assert 'backend="sim"' not in text and "SimRuntime" not in text, "a board user runs the same calls"


def assert_lab_states_the_chapters_rules(lab: Path, number: int, chapter: Path, rules: Mapping[str, str],
                                         shared_rules: Iterable[str]) -> None:
    """Lab ``number`` lists the rules it uses; each is one of the chapter's ``rules``, a sentence
    the chapter states, or a course-wide canonical sentence (``shared_rules``), word for word."""
    if not lab.exists():
        pytest.skip(f"Lab {number} is not written yet")
    block = re.search(r"\*\*The rules this lab uses\*\*.*?:(.*?)(?:\*\*|## )", flat(markdown(lab)))
    assert block, f"Lab {number} no longer lists the rules it uses"
    quoted = [q.strip() for q in re.split(r"\s- ", " " + block.group(1)) if q.strip()]
    assert quoted, f"Lab {number} lists no rule"
    chapter_text, shared = flat(markdown(chapter)), set(shared_rules)
    for rule in quoted:
        assert rule in rules.values() or rule in shared or rule in chapter_text, \
            f"Lab {number} states a rule that chapter {number} does not state in these words: {rule!r}"


# --------------------------------------------------------------------------- the executed chapter
def printed_run(notebook: str) -> Callable[[], Dict[int, str]]:
    """A module-scoped pytest fixture named ``run``: ``notebook`` executed on the simulator
    (once per session, tests/notebook_runs.py), cell index -> its printed text."""
    @pytest.fixture(scope="module", name="run")
    def run() -> Dict[int, str]:
        from notebook_runs import printed
        return printed(notebook)
    return run


def assert_outputs_short(run: Mapping[int, str], max_lines: int = MAX_OUTPUT_LINES) -> None:
    """At most ``max_lines`` printed per cell, and no bare return value. The generated list of
    assumptions at the chapter's end is exempt: it must name every one the text relies on
    (course style 7), one line each, folded in JupyterLab."""
    for index, text in run.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue
        assert len(text.splitlines()) <= max_lines, f"cell {index} prints {len(text.splitlines())} lines"
        assert text.strip() not in ("0", "None"), f"cell {index} shows a bare return value"


def assert_outputs_name_their_backend(run: Mapping[int, str], sources: str) -> None:
    """Every cell after the setup that prints results (the assumptions table aside) says where
    they come from: ``sources`` is the pattern of the chapter's labels."""
    assert "simulated RK3588" in "\n".join(run.values())
    for index, text in run.items():
        if text.strip() and index > 2 and "assumption" not in text.lower():
            assert re.search(sources, text), f"cell {index} prints results without saying where they come from:\n{text}"


#: rknn-toolkit-lite2 2.5.0's class interface, written down from the wheel (tests/test_lite.py)
LITE_INTERFACE = Path(__file__).resolve().parent / "fixtures" / "rknnlite_2_5_0_interface.json"
#: how a chapter's folded box for RKNNLite users begins
LITE_BOX = re.compile(r"(`{3,})\{admonition\} With RKNNLite(?::[^\n]*)?\n:class: dropdown\n")


def assert_rknnlite_names_are_the_wheels(text: str) -> None:
    """Every RKNNLite method (called on a name starting "lite"), keyword and NPU_CORE_* constant
    in ``text`` exists in the 2.5.0 wheel's class, and none of the C API's memory calls is
    called on an RKNNLite."""
    interface = json.loads(LITE_INTERFACE.read_text(encoding="utf-8"))
    methods = interface["methods"]
    for method, args in re.findall(r"\blite\w*\.(\w+)\(([^()]*)", text):
        assert method in methods, f"RKNNLite has no method {method}()"
        params = {p[0] for p in methods[method]["params"]}
        assert set(re.findall(r"(\w+)=", args)) <= params, f"RKNNLite.{method}() takes no such keyword: {args}"
    for name in re.findall(r"\bRKNNLite\.(\w+)", text):
        assert name in interface["constants"], f"RKNNLite has no constant {name}"


def assert_rknnlite_cell_skips_without_the_wheel(cell: str, names: Mapping[str, Any]) -> str:
    """Run ``cell`` as a board without rknn-toolkit-lite2 would (missing_wheel() gives a reason,
    RKNNLite() must not be called): it must print the reason and make no RKNNLite. Returns
    what it printed."""
    import contextlib
    import io
    from unittest import mock

    import rknnlab.lite
    why = "this board has no rknn-toolkit-lite2, so the RKNNLite cells are skipped: pip install it"

    def no_object(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("RKNNLite() was made on a board without the wheel")

    printed = io.StringIO()
    with mock.patch.object(rknnlab.lite, "missing_wheel", lambda: why), \
            mock.patch.object(rknnlab.lite, "RKNNLite", no_object), contextlib.redirect_stdout(printed):
        exec(cell, dict(names))
    assert "this board has no rknn-toolkit-lite2" in printed.getvalue(), printed.getvalue()
    return printed.getvalue()


# --------------------------------------------------------------------------- the shared tests
class ChapterChecks:
    """The checks every chapter passes, as pytest tests: a chapter's test module subclasses it
    (``class TestTheCourseRules(ch.ChapterChecks)``) and sets the chapter's data below."""
    chapter: Path
    lab: int
    rules: Mapping[str, str]                      # number -> its rule, word for word
    titles: Mapping[str, str]                     # number -> the section's title
    objectives: Mapping[str, List[int]]           # bold verb -> the lab exercises that assess it
    starred: Sequence[str] = ()                   # verbs whose exercise is the optional ★ one
    not_api: Iterable[str] = ()                   # files, demos, repositories named like the API
    invented: Iterable[str] = ()                  # names that only a wrong claim may use

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "rule_number" in metafunc.fixturenames:
            metafunc.parametrize("rule_number", sorted(self.rules))

    def test_each_rule_is_stated_in_its_section_and_in_the_key_points(self, rule_number: str) -> None:
        assert_rule_stated_in_its_section_and_the_key_points(markdown(self.chapter), rule_number,
                                                             self.rules[rule_number])

    def test_the_key_points_are_the_rules_and_nothing_else(self) -> None:
        assert_key_points_are_the_rules(markdown(self.chapter), self.rules)

    def test_header_asks_questions_and_ties_each_objective_to_a_lab_exercise(self) -> None:
        assert_header_ties_each_objective_to_a_lab_exercise(source(cells(self.chapter)[0]), self.lab,
                                                            self.objectives, self.starred)

    def test_every_section_asks_for_a_prediction_with_a_folded_answer(self) -> None:
        assert_sections_follow_the_arc(markdown(self.chapter), self.titles,
                                       f"expected the chapter's {len(self.titles)} numbered sections")

    def test_rknn_names_outside_wrong_claims_exist_in_the_header(self) -> None:
        assert_rknn_names_outside_wrong_claims_are_declared(self.chapter, self.not_api, self.invented)

    def test_inline_assumptions_match_the_generated_list(self) -> None:
        assert_inline_assumptions_match_the_generated_list(self.chapter)

    def test_the_notebook_keeps_the_course_rules(self) -> None:
        """No functions, short code cells saved without outputs, no placeholder text, no seed names."""
        assert_notebook_keeps_the_course_rules(self.chapter)

    def test_the_prose_stays_within_its_budget(self) -> None:
        assert_prose_within_budget(markdown(self.chapter))

    def test_the_rknnlite_path_uses_the_wheels_names_in_folded_boxes(self) -> None:
        """Issue 18: a chapter that shows C shows the RKNNLite path in folded "With RKNNLite"
        boxes, and names only what the 2.5.0 wheel's class has."""
        text = markdown(self.chapter)
        if c_blocks(text):
            assert LITE_BOX.search(text), "C is shown, but no folded 'With RKNNLite' box"
        assert_rknnlite_names_are_the_wheels(text + "\n" + code(self.chapter))


class ExecutedChapterChecks(ChapterChecks):
    """:class:`ChapterChecks`, and those of a chapter that runs on the board's calls, quotes
    wrong claims as published, has a lab that quotes its rules, and is executed by the tests
    (the module defines the fixture ``run = printed_run(NOTEBOOK)``)."""
    wrong_claims: Iterable[str] = ()              # words of each Wrong claim box's title
    boxes_may_share_a_prompt = False
    board_calls: Iterable[str] = ()               # calls the chapter must still make
    lab_notebook: Path
    shared_rules: Iterable[str] = ()              # canonical sentences a lab may quote too
    sources: str                                  # the pattern of the chapter's result labels

    def test_wrong_claims_are_shown_as_published_after_a_prompt(self) -> None:
        assert_wrong_claims_shown_as_published_after_a_prompt(markdown(self.chapter), self.wrong_claims,
                                                              self.boxes_may_share_a_prompt)

    def test_simulated_results_are_labelled_and_the_calls_are_the_boards(self) -> None:
        assert_the_calls_are_the_boards(self.chapter, self.board_calls)

    def test_the_lab_states_the_chapters_rules_in_the_same_words(self) -> None:
        assert_lab_states_the_chapters_rules(self.lab_notebook, self.lab, self.chapter, self.rules,
                                             self.shared_rules)

    def test_every_output_is_short_and_no_stray_value(self, run: Dict[int, str]) -> None:
        assert_outputs_short(run)

    def test_every_printed_line_fits_100_columns(self, run: Dict[int, str]) -> None:
        for index, text in run.items():
            if text.startswith("Simulator assumptions in this chapter:"):
                continue  # HTML in JupyterLab, one folded line per assumption
            wide = [line for line in text.splitlines() if len(line) > 100]
            assert not wide, f"cell {index} prints lines over 100 columns: {wide[0]!r}"

    def test_every_measurement_names_its_backend(self, run: Dict[int, str]) -> None:
        assert_outputs_name_their_backend(run, self.sources)
