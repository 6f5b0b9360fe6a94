"""Chapter 2 keeps the course's shared rules, its sources and its own bookkeeping straight.

Static checks of chapters/02_lifecycle.ipynb (it is executed by
tests/test_notebooks.py once listed there, its C by tests/test_notebook_c.py):

- the chapter's rules appear word for word in their section and in the key points;
- the header asks 2-4 questions and ties each objective (one bold verb) to a Lab 2 exercise;
- every numbered section asks the reader to predict, with a folded answer after it;
- every wrong claim is shown as published (a ```text fence) and a prompt comes before its box;
- every RKNN name outside a wrong claim exists in the course's header (lib/rknnlab/c/rknn_api.h);
- a zero-copy model buffer is destroyed after its context in every C block;
- the reported leaks are cited as reports; the simulator's assumptions the text names are the
  ones its last cell lists, and exist in rknnlab.sim;
- the notebook defines no functions (analysis code lives in rknnlab), keeps code cells short,
  has no placeholder text, stays within the prose budget, and is saved without outputs.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import chapterhelpers as ch
from chapterhelpers import flat as _flat
from chapterhelpers import section as _section
from chapterhelpers import sentences as _sentences
from chapterhelpers import source as _source
from chapterhelpers import unfolded_prose as _unfolded_prose

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "02_lifecycle.ipynb"

#: the chapter's rules, stated in their section ("**The rule.**") and in the key points
RULES = {
    "1": "Allocate in `rknn_init`, reuse in the frames, free in `rknn_destroy`. A step in the frames that changes "
         "memory needs an explanation.",
    "2": "Without ZERO_COPY, you may free your model buffer right after `rknn_init`: the runtime no longer "
         "needs it. "
         "With ZERO_COPY, the buffer is the model: keep it until after the last `rknn_destroy`.",
    "3": "To plan memory before you allocate it, init with `RKNN_FLAG_COLLECT_MODEL_INFO_ONLY` and "
         "`RKNN_FLAG_MEM_ALLOC_OUTSIDE`, query, and destroy the dummy before the real init.",
    "4": "`rknn_dup_context` shares the weights, so it saves them for every context after the first. Each "
         "context still needs its own internal and io memory (A23).",
    "5": "Destroy every mem made with a context before that context: all of Rockchip's demos do. Free a "
         "zero-copy model buffer after the last `rknn_destroy` that uses it (API reference V2.3.2 p.20). A mem "
         "shared by several contexts goes after the last of them, and your own buffers last: that part is "
         "the course's choice.",
    "6": "Reuse means no allocation per call. Flat memory only shows there is no leak.",
    "7": "Judge growth by a verdict with its uncertainty, from the process's own counters, never by `MemFree` "
         "alone. A short run may only be able to say \"cannot tell yet\": then run longer.",
}

#: names that look like API names but are files, repositories or modules
NOT_API = {"rknn_model_zoo", "rknn_lite", "rknn_benchmark", "rknn_data",
           "rknn_dynshape_inference_zero_copy_alloc_outside", "rknn_internal_mem_reuse_demo",
           "rknn_c"}                                  # the %rknn_c magic (rknnlab.cmagic)

#: the four objectives, one verb each, in the words of Lab 2 (exercise numbers of Round 2)
OBJECTIVES = {"Predict": [1], "Order": [2], "Load": [3], "Find": [4, 5]}

TITLES = {"1": "The phases of a context's life", "2": "Loading a model: path, buffer or zero-copy",
          "3": "Asking for sizes without allocating", "4": "More contexts: init or dup", "5": "Teardown",
          "6": "Four classic leaks, and their fixes", "7": "How many frames a verdict needs"}

_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)
_code = partial(ch.code, CHAPTER)


class TestTheCourseRules(ch.ChapterChecks):
    """Rules and key points, header, section arc, RKNN names, assumptions, the notebook's hygiene
    and budgets: the checks every chapter passes (tests/chapterhelpers.py)."""
    chapter, lab = CHAPTER, 2
    rules, titles, objectives, not_api = RULES, TITLES, OBJECTIVES, NOT_API
    invented = ("rknn_init_with_mem", "rknn_set_mem_strategy", "RKNN_MEM_STRATEGY", "rknn_free_mem", "rknn_deinit")


# --------------------------------------------------------------------------- header and wrong claims
def test_the_prerequisites_need_no_later_chapter_and_chapter_5_is_linked() -> None:
    header = _source(_cells()[0])
    prerequisites = header[header.index("**Prerequisites:**"):header.index("**Glossary:**")]
    assert "chapter 4 §" not in prerequisites, "chapter 2 comes before chapter 4: give its facts, do not require it"
    assert "which comes later" in prerequisites and "is_prealloc = 1" in prerequisites
    for mention in re.finditer(r"chapter 5\b[^.]*", _markdown()):   # written since: say where
        assert "](05_allocation" in mention.group(0), f"a mention of chapter 5 without its link: {mention.group(0)!r}"


def test_wrong_claims_are_shown_as_published_before_their_boxes() -> None:
    markdown = _markdown()
    assert "Errata:" not in markdown
    boxes = [m.start() for m in re.finditer(r"```\{admonition\} Wrong claim:", markdown)]
    assert len(boxes) >= 4, "expected the chapter's wrong claims (sample order, preloading, strategy, MemFree)"
    for start in boxes:
        section_start = markdown.rfind("\n## ", 0, start)
        before = markdown[section_start:start]
        assert "```text\n" in before, "a wrong claim without its 'as published' text before it"
        assert re.search(r"\*\*(Predict|Spot the bug)\.\*\*", before), "a wrong claim with no prompt first"
        box = markdown[start:markdown.index("\n```", start + 3)]
        assert "**A widely copied" in box or "**The API reference's own sample**" in box, box
        for part in ("**What the runtime does:**", "**Evidence:**"):
            assert part in box, f"a wrong claim box lacks {part!r}:\n{box}"


def test_the_api_references_own_sample_order_is_an_erratum_with_its_page() -> None:
    markdown = _flat(_markdown())
    box = re.search(r"\{admonition\} Wrong claim: free the zero-copy model buffer.*?Evidence:\*\*[^`]*",
                    markdown)
    assert box, "the ZERO_COPY sample-order erratum is missing"
    assert "V2.3.2 p.20" in box.group(0)
    assert "**The API reference's own sample**" in box.group(0), "Rockchip's own sample is not 'widely copied'"
    spot = _flat(_section(_markdown(), "2. "))
    spot = spot[spot.index("**Spot the bug.**"):spot.index("Wrong claim: free the zero-copy")]
    assert "**Predict.**" in spot, "the reader commits before the sample's bug is explained"


# --------------------------------------------------------------------------- names and C
def test_c_blocks_pair_gets_and_destroy_the_zero_copy_buffer_after_its_context() -> None:
    blocks = ch.c_blocks(_markdown())
    assert len(blocks) >= 5, "expected C for the life, buffer, zero-copy, dup and teardown"
    calls = " ".join(blocks)
    for name in ("rknn_init_extend", "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY", "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT",
                 "rknn_dup_context", "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY", "rknn_destroy_mem"):
        assert name in calls, f"no C block shows {name}"
    for block in blocks:
        ch.assert_gets_are_released(block)
        if "rknn_destroy_mem(0, model_mem)" in block and "rknn_destroy(" in block:
            assert block.index("rknn_destroy(") < block.index("rknn_destroy_mem(0, model_mem)"), \
                f"the zero-copy model buffer is freed before its context:\n{block}"


def test_reported_leaks_are_cited_as_reports() -> None:
    markdown = _flat(_markdown())
    for issue in ("rockchip-linux/rknn-toolkit2#284", "airockchip/rknn-toolkit2#532",
                  "PaddlePaddle/FastDeploy#1858", "cnblogs yijunchenhui/18928556", "immich-app/immich#23958"):
        assert issue in markdown, f"{issue} is not cited"
    teardown = _flat(_section(_markdown(), "5. "))
    assert "These are reports, not documented behaviour." in teardown


# --------------------------------------------------------------------------- the notebook itself
def test_the_lives_are_measured_with_the_library() -> None:
    code = _code()
    for call in ("sample_calls=True", "lifecycle.phase_table(", "lifecycle.show_phases(", "plot.lifecycle(", "lifecycle.contexts_memory(",
                 "plot.contexts_memory(", "lifecycle.cycle(", "lifecycle.cycle_verdict("):
        assert call in code, f"the chapter no longer calls {call}"
    for variant in ("reinit_each_iter", "leak_no_release", "mems_never_destroyed", "outputs_kept_in_list",
                    "prealloc_output", "zero_copy_io", "outputs_summarised"):
        assert f'"{variant}"' in code, f"§6 does not run {variant}"


def test_runs_keep_the_default_progress_display() -> None:
    assert "progress=" not in _code(), "the default shows a bar in JupyterLab and nothing in the book"


def test_the_unfolded_prose_check_folds_dropdowns() -> None:
    text = ("Seen one.\n```{admonition} Answer\n:class: dropdown\nhidden words here\n```\n"
            "```{admonition} Wrong claim: x\n:class: warning\nshown two\n```\n```c\nint x;\n```\n"
            "| a | table |\n|---|---|\n")
    assert _unfolded_prose(text).split() == ["Seen", "one.", "shown", "two"]


def test_the_sentence_check_finds_a_long_sentence_and_skips_code() -> None:
    long = " ".join(["word"] * 31) + "."
    text = (f"Short one. {long}\n\n```c\n{' '.join(['int'] * 40)};\n```\n- a list item ends here\n"
            "- and the next starts\n| a | table | row |\n")
    sentences = _sentences(text)
    assert long in sentences
    assert "- a list item ends here" in sentences and not any("int int" in s for s in sentences)
    assert not any("table" in s for s in sentences)


# --------------------------------------------------------------------------- RKNNLite (issue 18)
def _rknnlite_boxes(markdown: str) -> list:
    """The body of every "With RKNNLite" admonition (any fence length)."""
    return re.findall(r"(`{3,})\{admonition\} With RKNNLite[^\n]*\n(.*?)\n\1(?:\n|$)", markdown, flags=re.S)


def test_rknnlite_boxes_are_folded_and_name_only_what_the_class_has() -> None:
    boxes = _rknnlite_boxes(_markdown())
    assert len(boxes) >= 5, "a With RKNNLite box where §1-§6 show C the class stands for or lacks"
    for _, body in boxes:
        assert body.startswith(":class: dropdown"), body[:80]
        ch.assert_rknnlite_names_are_the_wheels(body)
    text = " ".join(body for _, body in boxes)
    assert "no init flags" not in text and "takes no flags" not in text
    for lacking in ("no query", "no `dup_context`", "no flags argument"):
        assert lacking in _flat(text), f"a box should say RKNNLite has {lacking}"


run = ch.printed_run("chapters/02_lifecycle.ipynb")


def _lite_life(run) -> dict:
    text = next(t for t in run.values() if t.startswith("RKNNLite, mobilenet_v2, from load_rknn to del"))
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(\w+)\s+(?:frames\s+)?(\d+)\s+[\d.,]+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", line)
        if m:
            rows[m.group(1)] = [0.0 if v == "0" else float(v.replace(",", "")) for v in m.group(3, 4, 5, 6)]
    return {"rows": rows, "text": text}


def test_the_rknnlite_life_holds_the_file_twice_then_once_until_the_object_goes(run) -> None:
    """§1's RKNNLite run: measured, not asserted. load_rknn and init each take one file of heap,
    destroy (release) gives back one, and only del gives back the other; the text says so."""
    from rknnlab import models
    file_kib = (models.model_path("mobilenet_v2", "rk3588")).stat().st_size / 1024
    life = _lite_life(run)
    rows, heap = life["rows"], {step: values[1] for step, values in life["rows"].items()}
    for step in ("load_rknn", "init", "set_core_mask", "inputs_set", "run", "outputs_get", "outputs_release",
                 "destroy", "del_rknnlite"):
        assert step in rows, f"the RKNNLite life has no {step} step: {life['text']}"
    assert abs(heap["load_rknn"] - file_kib) < 0.01 * file_kib
    assert abs(heap["init"] - file_kib) < 0.01 * file_kib
    assert heap["destroy"] < -file_kib and abs(heap["del_rknnlite"] + file_kib) < 0.01 * file_kib
    assert rows["init"][2] > 0 and rows["destroy"][2] == -rows["init"][2], "release() gives back the DMA"
    assert "load_rknn and init: 2.00 files; given back only when the object went: 1.00 files" in life["text"]
    text = _flat(_markdown())
    assert "*Two* before `release()`, *one* after it." in text
    assert "holds the model file twice while its runtime is up, and once after `release()`" in text
    assert "until the object goes (A65). immich-app/immich#23958 reports the same on a board." in text
    # J7: the rows a user cannot call, and RSS that does not fall with the heap at del
    assert "The `query` and `set_core_mask` rows are calls the class makes inside `init_runtime`" in text
    assert abs(rows["del_rknnlite"][0]) < 0.5 * file_kib, "RSS fell at del: the answer says glibc keeps the pages"
    assert "RSS does not fall here: glibc keeps the freed pages" in text


def test_the_reference_cycle_is_not_faked_and_its_figures_add_up() -> None:
    text = _flat(_markdown())
    assert "The simulated `RKNNLite` leaves no cycle (A71)" in text
    box = next(body for _, body in _rknnlite_boxes(_markdown()) if "42.43 kB" in body)
    before, after, calls = (float(v.replace(",", "")) for v in
                            re.search(r"([\d.]+) → ([\d.]+) MB over ([\d,]+) calls", box).groups())
    assert round((after - before) * 1000 / calls, 2) == 42.43
    assert "0.158 kB" in box and "(A71)" in box
    assert "65–87 MB over 9,733 calls: a sawtooth, no trend" in box and "not given" not in box
    six = _flat(ch.numbered_sections(_markdown())["6"])
    assert six.index("reference cycles (objects that refer to each other, so reference counting never frees them; "
                     "only Python's garbage collector does)") < six.index("no cycle (A71)")


def test_the_rknnlite_life_on_a_board_times_each_method_of_the_wheel(monkeypatch) -> None:
    """On a board RKNNLite() is the wheel's own object, whose runtime calls no harness records:
    lifecycle.lite_life then times each method as one step, in the order of §1's table."""
    import contextlib
    import types

    from rknnlab import lifecycle, lite

    calls = []

    class Wheel:                                   # stands for rknnlite.api.RKNNLite on a board
        def __init__(self, verbose=False, verbose_file=None):
            self.rknn_data = None

        def load_rknn(self, path, key_path=None):
            calls.append("load_rknn")
            self.rknn_data = b"model"
            return 0

        def init_runtime(self, target=None, device_id=None, async_mode=False, core_mask=0):
            calls.append("init_runtime")
            return 0

        def inference(self, inputs, **kwargs):
            calls.append("inference")
            return [inputs[0]]

        def release(self):
            calls.append("release")

    monkeypatch.setattr(lite, "_backend", lambda: "native")
    monkeypatch.setattr(lite, "_wheel_class", lambda: Wheel)
    steps = []

    @contextlib.contextmanager
    def timed(name, nbytes=None):
        steps.append(name)
        yield

    lab = types.SimpleNamespace(rt=types.SimpleNamespace(backend="native"), model_path="model.rknn",
                                recorder=types.SimpleNamespace(poll=None), trim_after_warmup=True,
                                timed=timed, loop=lambda: iter(range(3)), input=lambda i: i)
    lifecycle.lite_life(lab)
    assert calls == ["load_rknn", "init_runtime"] + ["inference"] * 3 + ["release"]
    assert steps == ["load_rknn", "init_runtime"] + ["inference"] * 3 + ["release", "del_rknnlite"]


# --------------------------------------------------------------------------- issue 18 reviews: JupyterLab look
def test_the_rknnlite_life_cell_says_why_when_the_variant_is_skipped(capsys) -> None:
    """J4: on a board without rknn-toolkit-lite2 the harness skips lite_life; the cell prints the
    reason (within 100 columns) instead of failing on an empty table."""
    import textwrap
    import types
    from rknnlab import lifecycle
    (cell,) = [ch.source(c) for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "lifecycle.lite_life" in ch.source(c)]
    reason = "skipped: this board has no rknn-toolkit-lite2, so the RKNNLite cells are skipped: pip install " \
             "rknn-toolkit-lite2 (in the course's venv), then restart the kernel"
    skipped = types.SimpleNamespace(errors={"lite_life": reason})
    fake = types.SimpleNamespace(run=lambda *a, **k: skipped)
    exec(compile(cell, "ch2-lite", "exec"), {"rknnlab": fake, "lifecycle": lifecycle, "textwrap": textwrap})
    out = capsys.readouterr().out
    assert "lite_life: skipped: this board has no rknn-toolkit-lite2" in out.replace("\n", " ")
    assert all(len(line) <= 100 for line in out.splitlines())


# --------------------------------------------------------------------------- the C program (issue 21)
def test_lifecycle_c_dup_runs_in_section_4_and_a_dup_adds_p_not_w(run) -> None:
    """§4 runs examples/c/lifecycle.c dup with the line magic on the chapter's model: on the
    simulator's librknnrt it says so; the first context adds W + P to the DMA total, each of the three
    dups P (internal + io), and W + P - P is the model's weight size; the answer says what RSS holds."""
    import re
    cells = ch.cells(CHAPTER)
    code = [ch.source(c) for c in cells if c["cell_type"] == "code" and "%rknn_c" in ch.source(c)]
    assert code == ["%rknn_c examples/c/lifecycle.c -- dup {PATH} 4"]
    assert "%load_ext rknnlab" in ch.source(cells[2])
    (text,) = [t for t in run.values() if "(+ rknn_dup_context)" in t]
    lines = text.splitlines()
    assert any(l.startswith("rknnlab: librknnrt for PCs, simulated RK3588 (") for l in lines[:3]), lines
    adds = [int(a) for a in re.findall(r"^contexts +\d+ \(.*?\): +DMA total \d+ B \(\+(\d+) B\)", text, flags=re.M)]
    assert len(adds) == 4 and adds[1] == adds[2] == adds[3] < adds[0], text
    from rknnlab import models
    weights = models.load_report("mobilenet_v2", "rk3588").total_weight_size
    assert adds[0] - adds[1] == weights, (adds, weights)
    assert len(lines) <= 15 and all(len(line) <= 100 for line in lines)
    four = ch.flat(ch.numbered_sections(ch.markdown(CHAPTER))["4"])
    assert "`examples/c/lifecycle.c dup`" in four and "W + P for the first context, P for each dup" in four
