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

import json
import re
from functools import partial
from pathlib import Path

import pytest

import chapterhelpers as ch
from chapterhelpers import flat as _flat
from chapterhelpers import section as _section
from chapterhelpers import source as _source

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "04_output_reuse.ipynb"

#: the team's decided words (one rule per concept: chapter, lab and key points say the same)
RULES = [
    "Reuse means no allocation per call. Flat memory only shows there is no leak.",
    "A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, attr.size "
    "bytes with want_float = 0. Reallocate only when it is too small; a larger buffer is fine if "
    "rknn_output.size gives its real capacity.",
    "This course pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1. "
    "Rockchip's code disagrees. Its dynamic-shape demo says every get must be paired with one release "
    "(after an is_prealloc = 0 get). Its model-zoo zipformer demo "
    "(examples/zipformer/cpp/rknpu2/zipformer.cc) uses is_prealloc = 1 and never releases. With "
    "is_prealloc = 1 the release frees nothing of yours: a simulator assumption (A15), not a documented fact.",
    "The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem bound once "
    "with rknn_set_io_mem.",
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on "
    "rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; "
    "never assume it.",
    "One set of output buffers per context, and one thread per context at a time.",
    "Prove reuse with two measurements. The heap inside each get shows the runtime's allocations. Whether "
    "each buffer still holds what the last get wrote into it shows the caller's.",
    "Apply the size rule before every get whose output may have changed size: after `rknn_set_input_shapes` "
    "(with `RKNN_QUERY_CURRENT_OUTPUT_ATTR`) and after a model switch.",
]

#: Rockchip's sources disagree on cache maintenance: the chapter says so, never "as the demos do"
CACHE_SENTENCE = (
    "Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the DISABLE_FLUSH flags "
    "imply that the runtime flushes inputs and invalidates outputs by default. The API reference says "
    "cacheable memory shared by the CPU and the NPU needs rknn_mem_sync. None of Rockchip's demos call it. "
    "A maintainer says to add it yourself if you need it (airockchip/rknn_model_zoo#156). The course's code "
    "syncs: the safe choice.")


MAX_CODE_LINES = 25


_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r[:40])
def test_key_points_state_the_shared_rule_in_its_words(rule: str) -> None:
    key_points = _flat(_section(_markdown(), "Key points"))
    assert rule in key_points, f"the key points do not state this rule word for word: {rule!r}"


def test_the_lab_states_the_shared_rules_in_the_same_words() -> None:
    lab = json.loads((ROOT / "labs" / "lab04_output_reuse.ipynb").read_text(encoding="utf-8"))["cells"]
    text = _flat("\n".join(_source(c) for c in lab if c["cell_type"] == "markdown"))
    for rule in RULES:
        if rule.startswith("C2 "):
            continue                     # lab 4 does not use C2
        assert rule in text, f"lab 4 does not state this rule word for word: {rule!r}"


def test_cache_maintenance_is_taught_as_a_disagreement() -> None:
    markdown = _flat(_markdown())
    assert CACHE_SENTENCE in markdown
    assert "as Rockchip's demos do" not in markdown


def test_the_recipe_is_shown_as_published_before_its_wrong_claims() -> None:
    section = _section(_markdown(), "2. Spot the bug")
    published = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert published, "§2 shows no 'as published' snippet"
    for wrong in ("RKNN_QUERY_OUT_ATTR", "rknn_deinit", "outputs[0].buf == outputs[0].buf", "rknn_init(&ctx, model, model_len, 0)"):
        assert wrong in published.group(1)
    first_claim = section.index("{admonition} Wrong claim:")
    assert published.start() < section.index("**Predict.**") < first_claim
    assert "Errata:" not in _markdown()


def test_inline_assumptions_match_the_generated_list() -> None:
    ch.assert_inline_assumptions_match_the_generated_list(CHAPTER)


def test_every_section_asks_for_a_prediction_with_a_folded_answer() -> None:
    ch.assert_sections_predict_with_folded_answers(_markdown(), 4, "expected the chapter's numbered sections")


def test_c_blocks_pair_every_get_with_a_release() -> None:
    blocks = ch.c_blocks(_markdown())
    assert blocks, "no C blocks found"
    for block in blocks:
        ch.assert_gets_are_released(block)


def test_no_reader_visible_seed_names() -> None:
    ch.assert_no_seed_names(CHAPTER)


def test_code_cells_are_short_and_saved_without_outputs() -> None:
    ch.assert_code_cells_short_and_without_outputs(CHAPTER, MAX_CODE_LINES)


def test_the_reuse_check_hint_uses_the_key_point_words() -> None:
    """Lab 4's exercise 5 hint states the two measurements in the key points' words."""
    from rknnlab.checks.lab04 import TWO_MEASUREMENTS
    assert TWO_MEASUREMENTS in RULES


def test_the_heap_figure_is_drawn_from_robust_lines() -> None:
    """§3's figure has a handful of samples per curve; drawn from the first one, a sample that
    caught a short-lived allocation moved a flat curve by ~0.5 MiB and contradicted the text."""
    figure = [_source(c) for c in _cells()
              if c["cell_type"] == "code" and "by_iteration=True" in _source(c)]
    assert figure, "§3's by-iteration heap figure is gone"
    for source in figure:
        assert 'baseline="fit"' in source, source
    assert "one point off its line" in _flat(_markdown())


def test_the_prose_stays_within_its_budget() -> None:
    """Course style 2 and 10: at most 3,000 unfolded words, 600 per section, 30 per sentence."""
    ch.assert_prose_within_budget(_markdown())


# --------------------------------------------------------------------------- the RKNNLite path (issue 18)
NOTEBOOK = "chapters/04_output_reuse.ipynb"
run = ch.printed_run(NOTEBOOK)

#: airockchip/rknn-toolkit2#42 as the facts sheet gives it: kB per call without gc and with
#: gc.collect() every 5 calls, RSS at the start and the end in MB, calls
PUBLISHED_42 = {"kb": 42.43, "kb_gc5": 0.158, "start": 80.6, "end": 661.5, "calls": 13_690}


def _lite_section() -> str:
    return _section(_markdown(), "6. RKNNLite")


def test_each_c_section_says_what_an_rknnlite_user_does() -> None:
    """§1, §2, §4 and §5 show C; each has a folded "With RKNNLite" box, and the class's
    missing calls are said to be missing, never used."""
    from rknnlab.lite import RKNNLite
    markdown = _markdown()
    for number in ("1", "2", "4", "5"):
        body = ch.numbered_sections(markdown)[number]
        assert re.search(r"`{3,}\{admonition\} With RKNNLite[^\n]*\n:class: dropdown\n", body), \
            f"§{number} shows C and has no folded With RKNNLite box"
    text = _flat(markdown)
    assert "the class has no `create_mem` or `set_io_mem`" in text and "RKNNLite has no `dup_context`" in text
    for missing in ("create_mem", "set_io_mem", "dup_context", "query", "set_input_shapes"):
        assert not hasattr(RKNNLite, missing)
    code = "\n".join(re.findall(r"```python\n(.*?)```", markdown, flags=re.S)) + "\n" + ch.code(CHAPTER)
    for name in set(re.findall(r"\blite\.(\w+)\(", code)):
        assert hasattr(RKNNLite, name), f"RKNNLite has no {name}"


def test_reuse_outputs_is_taught_with_a_run(run) -> None:
    """§6's first run: with reuse_outputs=True the first call's list says the second digit and
    shares memory with the second list; without it, it keeps its own (A67)."""
    from rknnlab.paths import models_dir
    import numpy as np
    labels = np.load(models_dir() / "digits_cnn" / "testset.npz", allow_pickle=False)["labels"]
    everything = "\n".join(run.values())
    found = dict((m.group(1), m.groups()[1:]) for m in re.finditer(
        r"reuse_outputs=(True|False)\s*: first list said (\d+), after the second call (\d+); "
        r"shares memory: (True|False)", everything))
    assert set(found) == {"True", "False"}, everything
    said, after, shared = found["True"]
    assert int(said) != int(after) and shared == "True"
    assert (int(said), int(after)) == (int(labels[0]), int(labels[1])), "the trained model reads both digits"
    said, after, shared = found["False"]
    assert said == after and shared == "False"
    section = _flat(_lite_section())
    assert "What does the first call's list hold after the second call?" in section
    assert ("The chapter's rule holds for RKNNLite too: Reuse means no allocation per call. Flat memory only "
            "shows there is no leak.") in section and "flat memory is not reuse" in section


def test_the_lite_variants_run_and_the_text_says_what_they_show(run) -> None:
    """§6's harness run: three curves, each with its verdict and an upper bound of its slope
    judged against #42's rate (not a bare slope that reads like a leak), #42's rate drawn as a
    published reference line; gc.collect() costs several frames; the remedy's cost per call
    is a fifth of it; labelled as the simulator's model of the wheel."""
    everything = "\n".join(run.values())
    lines = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^\s*(lite_inference|lite_reuse_outputs|lite_gc_collect)\s+([\d.]+) ms per frame; RSS ([a-z ]+), "
        r"slope < ([\d.]+) kB per call, below #42: (yes|no)$", everything, flags=re.M)}
    assert set(lines) == {"lite_inference", "lite_reuse_outputs", "lite_gc_collect"}, everything
    for name, (ms, verdict, bound, below) in lines.items():
        assert verdict in ("flat", "cannot tell"), f"{name}: RSS {verdict} on the simulator (A71: no cycle)"
        assert below == ("yes" if float(bound) < PUBLISHED_42["kb"] else "no")
        assert below == "yes", f"{name}: the upper bound {bound} kB per call is not below #42's rate"
    assert "RSS slope" not in everything, "a bare slope reads like a leak"
    gc = re.search(r"gc\.collect\(\): ([\d.]+) ms per call, frames ([\d.]+)x slower; every 5 calls: ([\d.]+) ms",
                   everything)
    assert gc, everything
    gc_ms, ratio, every5 = (float(g) for g in gc.groups())
    assert ratio > 2 and gc_ms > float(lines["lite_inference"][0])
    assert abs(every5 - gc_ms / 5) <= 0.051
    code = ch.code(CHAPTER)
    assert 'rknnlab.run("lite", model="mobilenet_v2"' in code and "the simulator's model of RKNNLite" in code
    assert "plot.reference_rate(top, KB_42 * 1e3" in code and "(published, lite2 2.3.2, not simulated)" in code
    iterations = int(re.search(r'rknnlab\.run\("lite".*?iterations=(\d+)', code).group(1))
    assert iterations <= 300, "the test suite is at its time budget"
    section = _flat(_lite_section())
    assert "simulator's model" in section and "(A71)" in section and "about ten times the frame here" in section
    assert "far below" not in section and "several times the frame" not in section
    assert "one point off its line" in section, "the first RSS point below the rest is explained"


def test_reference_rate_draws_a_dashed_published_line() -> None:
    """plot.reference_rate: a dashed line from 0 at the axis's left edge, rising the given bytes
    per iteration in MiB, in the legend under its label; the x range is kept."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rknnlab import plot
    fig, ax = plt.subplots()
    ax.plot([0, 100], [0, 0], label="measured")
    left, right = ax.get_xlim()
    plot.reference_rate(ax, 42.43e3, "published, not simulated")
    line = [l for l in ax.get_lines() if l.get_gid() == "reference_rate"][0]
    x, y = line.get_data()
    assert line.get_linestyle() == "--" and ax.get_xlim() == (left, right)
    assert y[0] == 0 and abs(y[1] - (right - left) * 42.43e3 / 2 ** 20) < 1e-9
    assert "published, not simulated" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_every_rknnlite_cell_copes_with_a_board_without_the_wheel() -> None:
    """Issue 18 review J4: a cell that makes an RKNNLite asks missing_wheel() first and prints
    its line instead; a cell that runs the lite variants checks their status ("skipped" on a
    board without rknn-toolkit-lite2) before it plots or reads them."""
    for cell in _cells():
        text = _source(cell)
        if cell["cell_type"] != "code":
            continue
        if "RKNNLite()" in text:
            assert "why = missing_wheel()" in text and "if why:" in text, text
            assert text.index("if why:") < text.index("RKNNLite()")
        if 'rknnlab.run("lite"' in text:
            assert '(s["status"] == "ok").all()' in text and text.index("status") < text.index("plot.memory")


def test_the_wheels_log_lines_are_wrapped_and_every_output_fits_100_columns(run) -> None:
    """Issue 18 review J1: the wheel's W line (134 columns) is wrapped with textwrap, and no
    printed line is wider than 100 columns, so JupyterLab at 1366x768 shows it whole."""
    everything = "\n".join(run.values())
    assert "W Query dynamic range failed." in everything
    assert "please ignore the above warning message." in everything
    for index, text in run.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue
        for line in text.splitlines():
            assert len(line) <= 100, f"cell {index} prints {len(line)} columns: {line}"
    assert "(chapter 0 §2)" in ch.code(CHAPTER), "the W lines point to where they are explained"


def test_the_published_growth_is_shown_as_published_not_simulated(run) -> None:
    """#42's figures come from the library's table with their source, agree with each other,
    and the text says the simulator does not fake the cycle."""
    from rknnlab import profile
    growth = profile.published_lite_growth()
    first, second = growth.iloc[0], growth.iloc[1]
    assert (first["kb_per_call"], second["kb_per_call"]) == (PUBLISHED_42["kb"], PUBLISHED_42["kb_gc5"])
    assert (first["rss_start_mb"], first["rss_end_mb"], first["calls"]) == \
        (PUBLISHED_42["start"], PUBLISHED_42["end"], PUBLISHED_42["calls"])
    per_call = (PUBLISHED_42["end"] - PUBLISHED_42["start"]) * 1e3 / PUBLISHED_42["calls"]
    assert round(per_call, 2) == PUBLISHED_42["kb"], "the published figures agree with each other"
    assert "published" in growth.attrs["source"] and "not simulated" in growth.attrs["source"]
    assert "airockchip/rknn-toolkit2#42" in growth.attrs["source"]
    everything = "\n".join(run.values())
    assert growth.attrs["source"] in everything
    assert "42.43 kB per call" in everything and "0.158 kB per call" in everything
    assert "over 13,690 calls, RSS 80.6 -> 661.5 MB" in everything
    assert "over 9,733 calls, RSS 65-87 MB, sawtooth, no trend" in everything
    text = _flat(_markdown())
    per_hour = PUBLISHED_42["kb"] * 30 * 3600 / 1e6
    assert f"42.43 kB per call: {per_hour:.1f} GB per hour at 30 frames per second" in text
    assert "The simulator does not fake it (A71)." in text and "every 5 calls cut that to 0.158 kB per call" in text
    assert "and no simulator" not in text, "the old box said lite2 has no simulator"


def test_every_answer_comes_after_its_run_as_in_the_rest_of_the_course() -> None:
    """Issue 18 review J9: Predict -> run -> folded Answer -> What this shows, as chapters 2, 3, 5, 6
    and 7 have it: no unfolded Predict has its Answer before the run (a folded Going-further box
    keeps its own arc), and each numbered section's What this shows comes after an Answer."""
    cells = _cells()
    for i, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] != "markdown" or "**Predict.**" not in text or text.startswith("````{admonition}"):
            continue
        assert "{admonition} Answer" not in text[text.index("**Predict.**"):], text[:80]
        later = [_source(c) for c in cells[i + 1:] if c["cell_type"] == "markdown"]
        answer = next(k for k, t in enumerate(later) if "{admonition} Answer" in t)
        assert any(c["cell_type"] == "code" for c in cells[i + 1:i + 1 + answer + 3]), "a run before the answer"


def test_on_a_board_without_the_wheel_the_rknnlite_cells_print_why_and_skip(capsys) -> None:
    """Issue 18 review J4, run as a board without rknn-toolkit-lite2 would: the RKNNLite cell
    prints missing_wheel()'s line and makes no object; the harness cell, given variants marked
    "skipped" (as rknnlab.run marks them there), says they did not run and plots nothing."""
    from unittest import mock
    import pandas as pd
    import rknnlab
    import rknnlab.lite
    cells = {c.get("id"): _source(c) for c in _cells()}
    why = "this board has no rknn-toolkit-lite2, so the RKNNLite cells are skipped: pip install it"

    class Skipped:                      # what rknnlab.run("lite") returns on such a board
        source = "RK3588 board"
        summary = pd.DataFrame({"status": ["skipped"] * 3},
                               index=["lite_inference", "lite_reuse_outputs", "lite_gc_collect"])

    def no_object(*args, **kwargs):
        raise AssertionError("RKNNLite() was made on a board without the wheel")

    with mock.patch.object(rknnlab.lite, "missing_wheel", lambda: why), \
            mock.patch.object(rknnlab.lite, "RKNNLite", no_object), \
            mock.patch.object(rknnlab, "run", lambda *a, **k: Skipped()):
        exec(cells["ch4-lite-2"], {"MODEL": {}, "LABELS": [], "DIGITS": [], "SOURCE": "board"})
        exec(cells["ch4-lite-4"], {"rknnlab": rknnlab, "plt": None, "plot": None})
    printed = capsys.readouterr().out
    assert "this board has no rknn-toolkit-lite2" in printed
    assert "the lite variants did not run (RK3588 board)" in printed and "skipped" in printed


# --------------------------------------------------------------------------- the C program (issue 21)
def test_output_reuse_c_runs_in_section_2_and_reuses_its_buffers(run) -> None:
    """§2 runs examples/c/output_reuse.c with the line magic: on the simulator's librknnrt its first
    line says so, every get wrote into the program's own buffers, the output followed the input, and
    RSS over the loop grew by less than the simulator's output cache (a few MB), not by a leak."""
    cells = [c for c in _cells() if c["cell_type"] == "code" and "%rknn_c" in _source(c)]
    assert len(cells) == 1 and _source(cells[0]).startswith("%rknn_c examples/c/output_reuse.c -- ")
    assert "%load_ext rknnlab" in _source(_cells()[2])
    (text,) = [t for t in run.values() if "our buffers used on every frame" in t]
    lines = text.splitlines()
    assert lines[0].startswith("rknnlab: librknnrt for PCs, simulated RK3588 ("), lines
    assert "our buffers used on every frame: yes" in lines and "output follows input: yes" in lines
    assert "outputs: 1, output 0: 1000 elements, 4000 bytes per get (float32)" in lines
    growth = int(re.search(r"RSS before the loop: \d+ kB, after: \d+ kB, growth: (-?\d+) kB", text).group(1))
    assert growth < 8 * 1024, f"RSS grew {growth} kB over the loop"
    assert len(lines) <= 15 and all(len(line) <= 100 for line in lines)
    two = _flat(_section(_markdown(), "2. Spot the bug"))
    assert "`examples/c/output_reuse.c`" in two and "fill the simulator's output cache" in two
