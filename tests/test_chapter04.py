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
