"""Chapter 7 reviews the course: every claim it re-measures links back to where it was first measured.

Static checks of chapters/07_misconceptions.ipynb (its C is compiled by tests/test_notebook_c.py):

- the chapter's rules (R7a-R7d and the reuse rule) appear word for word in their section, and the key
  points are those rules plus the earlier rules the review touches, each word for word as its own
  chapter states it;
- the header asks 2-4 questions and ties each objective (one bold verb) to a Lab 7 exercise;
- every numbered section asks the reader to predict, with a folded answer after it;
- the recipe's wrong claims are shown as published (a ```text fence) after a prompt, in one container;
- every back link names a heading that exists in the chapter it points to (MyST's anchors), and each
  point links back to the section that measured it first (course style 15);
- every RKNN name outside a wrong claim exists in the course's header;
- the C writes rows at w_stride into a mem of size_with_stride bytes;
- the simulator's assumptions the text names are the ones its last cell lists, and exist;
- the notebook defines no functions, keeps code cells short, has no placeholder text, stays within
  the prose budget, and is saved without outputs.

The executed checks run the chapter on the simulator (once per session, tests/notebook_runs.py):
every output is short and names its backend, the run stays within its time budget, and what the
answers commit to is what the run printed.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Dict, List

import chapterhelpers as ch
import pytest

from rknnlab import sim
from rknnlab.rknn import abi

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "chapters/07_misconceptions.ipynb"
CHAPTER = ROOT / NOTEBOOK

#: the chapter's rules, stated in their section ("**The rule.**") and in the key points; Lab 7 quotes them
RULES = {
    "1": "Alignment is about rows, not start addresses. A zero-copy input's rows are w_stride pixels apart, "
         "and its buffer holds size_with_stride bytes. A buffer you pass to rknn_inputs_set needs no "
         "alignment: the runtime copies it.",
    "2": "The runtime puts nothing in SRAM unless you ask: RKNN_FLAG_ENABLE_SRAM at init, or "
         "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM for a mem. Nothing is swapped in and out. RKNN_QUERY_MEM_SIZE and "
         "the RKNN_LOG_LEVEL=3 log show what it placed.",
    "3": "Allocating the largest size once is right for one context whose input shape changes. Contexts that "
         "run at the same time need their own internal memory.",
    "4": "Reuse means no allocation per call. Flat memory only shows there is no leak.",
    "5": "An error code names a kind of problem, not its cause. Before you change code, read the runtime's "
         "log (RKNN_LOG_LEVEL=4), dmesg and the doctor.",
}

#: the earlier rules the review touches: the chapter (and section) that states each, and the rule, which
#: chapter 7 quotes word for word in that section's review and in its key points
EARLIER_RULES = {
    "1": ("chapters/01_memory_layers.ipynb",
          "Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, or "
          "a plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use "
          "n_elems × 4 bytes."),
    "2": ("chapters/05_allocation.ipynb",
          "Only what fits in the free SRAM goes there: at most 956 KiB on RK3588, in 4 KiB pages, shared by "
          "every context. The rest stays in DDR. Check where it landed; never assume it."),
    "3": ("chapters/05_allocation.ipynb",
          "Models that run one after another may share one internal buffer, as large as the largest "
          "`total_internal_size`. Give each context its own view of it, at least as large as that context's "
          "`total_internal_size`. Models whose runs can overlap must not share it."),
    "4": ("chapters/03_bottlenecks.ipynb",
          "Only Conv, depthwise Conv, Add, Concat and ReLU-family layers are split over cores; the rest run on "
          "core 0. A Conv fused with SiLU was not, in one public trace (A17). Measure the speedup of each model: "
          "a small network can get slower."),
}

#: the key points, in this order: each section's rule, the earlier rule it touches after it
KEY_POINTS = [RULES["1"], EARLIER_RULES["1"][1], RULES["2"], EARLIER_RULES["2"][1], RULES["3"],
              EARLIER_RULES["3"][1], RULES["4"], EARLIER_RULES["4"][1], RULES["5"]]

TITLES = {"1": "Align every buffer to 64 bytes", "2": "SRAM is swapped in and out automatically",
          "3": "Allocate the maximum once", "4": "Six more claims, measured again",
          "5": "Error codes, and what to check"}

#: the objectives, one verb each, with the Lab 7 exercises that assess them (1 predict the sizes, 4 write rows
#: at the right stride; 2 make four failing calls succeed, 3 diagnose three memory traces; 5 fit three models
#: in a budget, 6 predict where SRAM goes, 7 choose core masks; ★8 fix a C program)
OBJECTIVES = {"Size": [1, 4], "Diagnose": [2, 3], "Choose": [5, 6, 7], "Fix": [8]}

#: the recipe's wrong claims (words of each box's title), each after the recipe as published and a prompt
WRONG_CLAIMS = ("align every buffer to 64 bytes", "the driver swaps data between sram and ddr",
                "allocate the largest buffer once")

#: the recipe's lines and the six claims, quoted as published (translated) in ```text fences
AS_PUBLISHED = ("The NPU requires input and output buffers aligned to 64 bytes,", "posix_memalign",
                "Zero-copy needs its input memory aligned (usually to 64 bytes).", "NPU SRAM is tiny (RK3588: a few hundred KB).",
                "Over-allocating makes the driver swap between SRAM and DDR all the time.",
                "Releasing the output buffer right after every rknn_outputs_get() fragments memory.",
                "Allocate buffers of the largest possible size at init and reuse them for the whole life.",
                "1. The driver manages NPU memory.", "2. The output pointer did not change, so the buffer is reused.",
                "3. rknn_outputs_release is optional.", "4. NPU memory is separate from system RAM.",
                "5. More NPU cores are always faster.", "6. want_float = 1 is free.")

#: course style 15: each point links back to the section that measured it first (section -> chapter §)
LINKS_BACK = {"1": ("chapter 1 §4", "chapter 6 §2"), "2": ("chapter 5 §7", "chapter 1 §8"),
              "3": ("chapter 3 §5", "chapter 5 §4", "chapter 5 §6"),
              "4": ("chapter 1 §1", "chapter 1 §2", "chapter 1 §7", "chapter 2 §6", "chapter 3 §4",
                    "chapter 3 §6", "chapter 4 §2", "chapter 4 §3")}

#: sources the text must cite
SOURCES = ("airockchip/rknn-toolkit2#554", "User Guide V2.3.0 Table 5-2 and §10.9", "p.57", "§5.4.4.2",
           "API reference V2.3.2 p.19", "airockchip/rknn-toolkit2#554, #287 and #5",
           "rockchip-linux/rknpu2, doc/RK3588_NPU_SRAM_usage.md", "API reference V2.3.2 p.21")

#: names that look like API names but are environment variables
NOT_API = {"RKNN_LOG_LEVEL", "rknn_benchmark"}

#: the earlier rules and the course's canonical sentences (DECISIONS 1, 2, 4', 6 and 7) that a review lab may
#: quote beside this chapter's rules
SHARED_RULES = tuple(rule for _, rule in EARLIER_RULES.values()) + (
    "The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem bound once with "
    "rknn_set_io_mem.",
    "A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, attr.size bytes "
    "with want_float = 0. Reallocate only when it is too small; a larger buffer is fine if rknn_output.size gives "
    "its real capacity.",
    "This course pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1. "
    "Rockchip's code disagrees. Its dynamic-shape demo says every get must be paired with one release (after an "
    "is_prealloc = 0 get). Its model-zoo zipformer demo (examples/zipformer/cpp/rknpu2/zipformer.cc) uses "
    "is_prealloc = 1 and never releases. With is_prealloc = 1 the release frees nothing of yours: a simulator "
    "assumption (A15), not a documented fact.",
    "One set of output buffers per context, and one thread per context at a time.",
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on rk3588, "
    "rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; never assume it.",
)

_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)
_code = partial(ch.code, CHAPTER)


run = ch.printed_run(NOTEBOOK)


class TestTheCourseRules(ch.ExecutedChapterChecks):
    """Rules, header, section arc, wrong claims, RKNN names, assumptions, the board's calls, the
    lab's rules, the notebook's hygiene and budgets, and the run's outputs (tests/chapterhelpers.py)."""
    chapter, lab, lab_notebook = CHAPTER, 7, ROOT / "labs" / "lab07_misconceptions.ipynb"
    rules, titles, objectives, starred = RULES, TITLES, OBJECTIVES, ("Fix",)
    wrong_claims = WRONG_CLAIMS
    not_api = NOT_API
    shared_rules, sources = SHARED_RULES, r"simulated|source: "
    board_calls = ("review.alignment_table(", "review.zero_copy_rows(", "review.unaligned_inputs_set(",
                   "review.undersized_bind(", "review.sram_default(", "review.max_once(",
                   "review.who_allocates(", "review.pointer_reuse(", "review.skip_release(",
                   "review.npu_memory_in_ram(", "review.core_masks(", "review.want_float_cost(",
                   "review.claims_table(", "review.error_codes(", "review.reproduce_error(")

    def test_the_key_points_are_the_rules_and_nothing_else(self) -> None:
        """The key points are the chapter's rules and the earlier rules the review touches, in section order."""
        points = re.findall(r"^- (.*(?:\n  .*)*)", ch.section(_markdown(), "Key points"), flags=re.M)
        assert [ch.flat(p) for p in points] == KEY_POINTS


# --------------------------------------------------------------------------- rules, quotes, links
@pytest.mark.parametrize("number", sorted(EARLIER_RULES))
def test_each_earlier_rule_is_quoted_word_for_word_in_its_section(number: str) -> None:
    """The review quotes the rule of an earlier chapter in the words that chapter uses (course style 9)."""
    origin, rule = EARLIER_RULES[number]
    assert rule in ch.flat(ch.markdown(ROOT / origin)), f"{origin} no longer states: {rule[:60]!r}"
    if number != "4":     # §4's table names the cores rule's chapter; the key points quote it
        assert rule in ch.flat(ch.numbered_sections(_markdown())[number]), f"§{number} does not quote {rule[:60]!r}"


def test_the_recipes_lines_are_quoted_as_published() -> None:
    published = ch.flat("\n".join(re.findall(r"```text\n(.*?)```", _markdown(), flags=re.S)))
    for line in AS_PUBLISHED:
        assert line in published, f"not quoted as published: {line!r}"


def _anchors(notebook: Path) -> Dict[str, str]:
    """MyST's anchor (GitHub-style) of every ## heading of ``notebook`` -> the heading."""
    found = {}
    for line in ch.markdown(notebook).splitlines():
        m = re.match(r"^##? (.+)$", line)
        if m:
            title = m.group(1).replace("`", "").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            found[slug] = m.group(1)
    return found


def test_every_back_link_names_a_heading_that_exists() -> None:
    links = re.findall(r"\[([Cc]hapter (\d) §(\d))\]\((0\d_\w+\.ipynb)#([\w-]+)\)", _markdown())
    assert len(links) >= 12, f"only {len(links)} back links"
    for label, chapter, number, target, anchor in links:
        assert target.startswith(f"0{chapter}_"), f"{label} points at {target}"
        anchors = _anchors(ROOT / "chapters" / target)
        assert anchor in anchors, f"{target} has no heading #{anchor} (it has {sorted(anchors)})"
        assert anchors[anchor].startswith(f"{number}. "), f"{label} links to {anchors[anchor]!r}"


def test_the_header_says_how_to_reach_a_linked_section_in_jupyterlab() -> None:
    """jupyterlab-myst gives a numbered heading another id than MyST's anchor, so JupyterLab opens a back
    link's notebook at its top (review J-1): the header says how to reach the section from there."""
    header = ch.flat(_markdown().split("## Setup")[0])
    assert "JupyterLab opens it at the top: open the Table of Contents in the left bar" in header


def test_the_anchors_are_mysts() -> None:
    myst_slugs = pytest.importorskip("myst_parser.slugs")
    for target in sorted(set(re.findall(r"\((0\d_\w+\.ipynb)#", _markdown()))):
        for slug, title in _anchors(ROOT / "chapters" / target).items():
            assert slug == myst_slugs.github_slugify(title.replace("`", "")), title


@pytest.mark.parametrize("number", sorted(LINKS_BACK))
def test_each_point_links_back_to_where_it_was_measured_first(number: str) -> None:
    """Course style 15: each section links back to the sections that measured its points first."""
    body = ch.numbered_sections(_markdown())[number]
    linked = {label.lower() for label in re.findall(r"\[([Cc]hapter \d §\d)\]\(", body)}
    missing = set(LINKS_BACK[number]) - linked
    assert not missing, f"§{number} does not link back to {sorted(missing)}"


def test_sources_are_cited() -> None:
    text = ch.flat(_markdown())
    for source in SOURCES:
        assert source in text, f"{source} is not cited"


def test_the_board_and_the_simulator_differ_openly_on_an_undersized_input() -> None:
    """§1 says the simulator refuses the bind while a board may accept it with a warning in its log, then
    fail the run ("failed to submit", -1) or read past the mem; the warning's words are not confirmed."""
    text = ch.flat(ch.numbered_sections(_markdown())["1"])
    for words in ("The simulator refuses the bind",
                  "A board may accept the bind, with a warning in the runtime's log, and then fail the run or "
                  "read past the mem.", "its exact words are not confirmed", "`failed to submit`",
                  "`rknn_run` returns -1, `RKNN_ERR_FAIL`"):
        assert words in text, f"§1 no longer says {words!r}"


def test_table_5_2_is_quoted_with_both_its_columns() -> None:
    """User Guide V2.3.0 Table 5-2 has two columns: RK3588, RK3576 and RK3562 align to 16, RK3566/RK3568 to 8,
    for the width of a 4-D input with 1, 3 or 4 channels and for the total size otherwise. The guide says
    bytes; w_stride counts pixels, and the reader is told to read it."""
    text = ch.flat(ch.numbered_sections(_markdown())["1"])
    assert "On RK3588, RK3576 and RK3562 a 4-D input with 1, 3 or 4 channels needs its width aligned to 16 " \
           "(RK3566/RK3568: 8). Other inputs need a total size aligned to 16 (RK3566/RK3568: 8)." in text
    assert "RK3576 and RK3562 pad its rows to 16 pixels, as Table 5-2 says" in text
    assert '("16-byte aligned")' in text and "read it, never compute it" in text
    takeaway = text[text.index("What the table shows: the documented width alignment"):]
    assert takeaway.index("`w_stride` counts pixels") < takeaway.index("**Predict.**"), \
        "bytes against pixels is said right after the table, not only in the footnote or the box"
    assert "no document states their rule" not in text


def test_every_cited_report_is_explained_and_h_stride_is_plain() -> None:
    """The Wrong claim box says what #5 showed; h_stride is described as the header does (write-only: you set
    it), not by an idiom; the C prelude is an HTML comment, which no viewer shows (tests/test_notebook_c.py)."""
    text = ch.flat(ch.numbered_sections(_markdown())["1"])
    assert "#5 (zero-copy and `rknn_inputs_set` disagree where `w_stride` is not the width)" in text
    assert "`h_stride` is write-only: you may set it, for an input whose height is padded." in text
    assert "the opposite" not in text
    assert "<!-- c-prelude:" in _markdown() and "% c-prelude" not in _markdown()


def test_the_recipes_create_mem_line_is_answered() -> None:
    """The recipe's "rknn_create_mem() guarantees the alignment" gets its answer: page-aligned in practice
    (mapped DMA buffers, 4 KiB rounding in one public log), beside the point; nothing documented for
    create_mem_from_fd offsets."""
    text = ch.flat(ch.numbered_sections(_markdown())["1"])
    assert "`rknn_create_mem` buffers do start on a page boundary in practice" in text
    assert "airockchip/rknn-toolkit2#287" in text and "`rknn_create_mem_from_fd` offsets" in text


def test_sram_requests_and_the_mem_size_query_are_taught_with_their_doubts() -> None:
    """§2 names the SRAM note's environment variables (unconfirmed for 2.3.x) and the documents' disagreement
    on RKNN_QUERY_MEM_SIZE after a plain init (A35)."""
    text = ch.flat(ch.numbered_sections(_markdown())["2"])
    for name in ("RKNN_INTERNAL_MEM_TYPE", "RKNN_SEPARATE_WEIGHT_MEM", "RKNN_WEIGHT_MEM_TYPE"):
        assert f"`{name}`" in text
    assert "Whether runtime 2.3.x still reads them is not confirmed." in text
    assert ("The API reference says this query needs `RKNN_FLAG_MEM_ALLOC_OUTSIDE`; the User Guide's SRAM "
            "section and rknn_benchmark query it after a plain `rknn_init`, as the course does (A35).") in text


def test_the_relu_family_is_listed_where_chapter_7_first_uses_it() -> None:
    text = ch.flat(_markdown())
    listed = "ReLU-family means Relu, Clip, Relu6, PRelu, LeakyRelu and ThresholdedRelu (API reference V2.3.2 p.21)."
    assert listed in text and text.index(listed) < text.index("## Key points")
    assert text.index("ReLU-family") > text.index("## 4. "), "the list comes where the term is first used"


def test_the_c_writes_rows_at_w_stride_into_a_mem_of_size_with_stride() -> None:
    blocks = ch.c_blocks(_markdown())
    assert len(blocks) == 1, "one C block: the zero-copy input of §1"
    block = blocks[0]
    assert "rknn_create_mem(ctx, attr.size_with_stride)" in block
    assert "attr.w_stride ? attr.w_stride : width" in block, "w_stride 0 means the width"
    assert "y * w_stride * channels" in block and "y * width * channels" in block, "rows at w_stride, read at width"
    assert block.index("rknn_set_io_mem") < block.index("for (uint32_t y"), "bound once, before the writes"
    assert block.index("RKNN_MEMORY_SYNC_TO_DEVICE") < block.index("rknn_run("), "synced after the writes"


def test_every_table_is_followed_by_its_takeaway() -> None:
    cells = _cells()
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not re.search(r"profile\.show\(|print\(codes\)", ch.source(cell)):
            continue
        after = next(ch.source(c) for c in cells[index + 1:] if c["cell_type"] == "markdown")
        assert after.startswith("What the table shows: "), f"cell {index} has no takeaway after it"


# --------------------------------------------------------------------------- the run
def _printed_by(run: Dict[int, str], needle: str) -> str:
    found = [text for index, text in run.items() if needle in ch.source(_cells()[index])]
    assert found, f"no code cell calls {needle}"
    return found[0]


def test_the_chapter_runs_within_its_budget(run) -> None:
    """The course's budget is 60 s on the simulator; this shared test machine gets half as much again."""
    from notebook_runs import executed
    seconds = executed(NOTEBOOK).seconds
    assert seconds < 90, f"chapter 7 took {seconds:.0f} s on the simulator (budget 60 s)"


def _percent(text: str, rows: str) -> float:
    block = text[text.index(f"rows at {rows}:"):]
    return float(re.search(r"same digit as rknn_inputs_set: ([\d.]+)%", block).group(1))


def test_only_rows_at_w_stride_agree_with_inputs_set(run) -> None:
    """§1's answer: rows at w_stride give rknn_inputs_set's digits; on RK3588 (w_stride 16, width 8) rows at
    the width and rows 64 bytes apart fall to about chance, and no call fails."""
    text = _printed_by(run, "review.zero_copy_rows(")
    assert "w_stride 16 px, size_with_stride 128 B" in text, text
    assert _percent(text, "w_stride") == 100.0, text
    assert _percent(text, "width") < 30 and _percent(text, "64 bytes") < 30, text
    assert "accuracy 98" in text.splitlines()[1] or float(re.search(r"accuracy ([\d.]+)%", text).group(1)) > 90, text


def test_the_table_documents_rk3576_and_rk3562_as_their_attrs_show(run) -> None:
    """§1's takeaway: RK3576 and RK3562 share RK3588's column of Table 5-2 (16) and their attrs pad
    digits_cnn's rows to 16; RK3566/RK3568 are documented at 8 and give 8."""
    text = _printed_by(run, "review.alignment_table(")
    for soc, documented in (("rk3588", 16), ("rk3576", 16), ("rk3562", 16), ("rk3568", 8), ("rk3566", 8)):
        row = re.search(rf"^{soc}\s+(\d+)\S*\s+(\d+)\s+\d+$", text, flags=re.M)
        assert row and int(row.group(1)) == int(row.group(2)) == documented, f"{soc}:\n{text}"
    assert "not documented" not in text, text


def test_the_codes_the_text_says_have_board_evidence_are_the_ones_reproduced(run) -> None:
    """§5: the reproduced -5 is the wrong-size query (the one public board log, rknn-toolkit#440) and
    the -4 row says the binding names a NULL."""
    assert _printed_by(run, "review.reproduce_error(").startswith("rknn_query -> RKNN_ERR_PARAM_INVALID")
    table = _printed_by(run, "review.error_codes(")
    assert re.search(r"^-4\s+MALLOC_FAIL\s+.*NULL.*-4", table, flags=re.M), table
    assert re.search(r"^-5\s+PARAM_INVALID\s+query", table, flags=re.M), table


def test_inputs_set_from_an_odd_address_gives_the_same_outputs(run) -> None:
    text = _printed_by(run, "review.unaligned_inputs_set(")
    assert re.search(r"address % 64 = [1-9]\d* and at % 64 = 0: identical outputs", text), text


def test_the_undersized_bind_is_refused_here_and_tagged_with_its_assumption(run) -> None:
    """§1: the simulator refuses a mem of n_elems bytes at the bind (-5); the text names the same assumption
    the result does."""
    from rknnlab import review
    text = _printed_by(run, "review.undersized_bind(")
    assert "rknn_set_io_mem refused it: -5 (RKNN_ERR_PARAM_INVALID)" in text, text
    key = review.undersized_bind(model="digits_cnn").assumption
    assert f"({key})" in ch.numbered_sections(_markdown())["1"], f"§1 does not tag the refusal with {key}"


def test_sram_goes_where_the_flag_asks_and_stays(run) -> None:
    """§2's answer: flag 0 places nothing, the first ENABLE_SRAM context takes what fits, nothing moves."""
    text = ch.flat(_printed_by(run, "review.sram_default("))
    assert re.search(r"flag 0 (places )?0 B", text) and re.search(r"changed across \d+ runs: no", text), text
    assert re.search(r"ENABLE_SRAM:? (first )?956 KiB", text), text


def test_one_allocation_serves_every_shape_but_not_two_contexts_at_once(run) -> None:
    text = _printed_by(run, "review.max_once(")
    shapes = re.search(r"^\(a\) .*: (\d+) of (\d+) shapes correct$", text, flags=re.M)
    wrong = re.search(r"^\(b\) .*: (\d+) of (\d+) runs wrong$", text, flags=re.M)
    assert shapes and shapes.group(1) == shapes.group(2) == "3", text
    assert wrong and int(wrong.group(1)) > 0, f"§3's answer says the count of wrong runs shows the damage:\n{text}"


def test_the_claims_table_has_every_claim_and_none_holds(run) -> None:
    """§4's answer: none of the six claims (nor §2's and §3's) held; the cores claim may be 'cannot tell'
    for the model with few split layers, never True."""
    text = _printed_by(run, "review.claims_table(")
    rows = re.findall(r"^\s*(.+?)\s+(Chapter \d §\d(?:, §\d)?)\s+(True|False|None)$", text, flags=re.M)
    assert len(rows) == 8, text
    for claim, _, holds in rows:
        allowed = ("False", "None") if "cores" in claim else ("False",)
        assert holds in allowed, f"{claim}: {holds}"
    assert re.search(r"^source: simulated RK3588", text, flags=re.M), text


def test_the_cores_answer_rests_on_the_printed_split_shares(run) -> None:
    text = _printed_by(run, "review.core_masks(")
    shares = dict(re.findall(r"^(mobilenet_v2|yolov5s) \((\d+)% split\)", text, flags=re.M))
    assert int(shares["mobilenet_v2"]) > 50 > int(shares["yolov5s"]), text


def test_a_small_network_gets_slower_where_the_answer_says_so(run) -> None:
    """The cores rule says "a small network can get slower": §4 times digits_cnn with the other two models,
    so its slower masks refute "always faster" in the claims table, and prints its speedups last; on the
    simulator every multi-core mask's median speedup is below 1, as the answer says (A45; the 95% intervals
    are printed beside them, and may touch 1 when the machine is busy)."""
    text = _printed_by(run, "review.core_masks(")
    last = text.strip().splitlines()[-1]
    assert last.startswith("digits_cnn ("), text
    measured = re.findall(r"review\.core_masks\(models=\(([^)]*)\)", _code())
    assert len(measured) == 1 and "digits_cnn" in measured[0], "digits_cnn is one of the claim's models"
    speedups = [float(x) for x in re.findall(r"\b0_1(?:_2)? ([\d.]+)x \[", last)]
    # the wall-time medians carry this machine's noise: below 1, but a busy PC can bring them to 1
    assert len(speedups) == 2 and all(x <= 1.02 for x in speedups), last
    if all(x < 0.98 for x in speedups):      # clearly slower: the claim is refuted in the table
        claims = _printed_by(run, "review.claims_table(")
        assert re.search(r"More NPU cores are always faster\.\s+Chapter 3 §6\s+False$", claims, flags=re.M), claims
    # the model itself is deterministic: every multi-core mask is slower for this small network
    one = sim.modeled_run_ms("digits_cnn", "rk3588", core_mask=abi.RKNN_NPU_CORE_0)
    for mask in (abi.RKNN_NPU_CORE_0_1, abi.RKNN_NPU_CORE_0_1_2):
        assert sim.modeled_run_ms("digits_cnn", "rk3588", core_mask=mask) > one
    answer = ch.flat(ch.numbered_sections(_markdown())["4"])
    assert "`digits_cnn` is modeled slower on more cores, though all its layers are split: its printed " \
           "speedups sit below 1." in answer
    assert "(User Guide V2.3.0 §5.3; A45)" in answer


def test_the_answer_counts_the_claims_the_table_prints(run) -> None:
    """§4's answer names as many claims as the table has rows, and says which six it explains."""
    text = _printed_by(run, "review.claims_table(")
    rows = re.findall(r"\s(?:True|False|None)$", text, flags=re.M)
    words = {6: "six", 8: "eight"}
    answer = ch.flat(ch.numbered_sections(_markdown())["4"])
    assert f"None of the {words.get(len(rows), len(rows))} claims in the table holds as stated." in answer, text
    assert "Here is why for the six of this section." in answer


def test_the_memfree_line_is_read_for_the_reader(run) -> None:
    """§4 (4): the text says why RSS is the better witness before the cell, and the answer says what
    "MemFree did not fall" means, in the words the result prints."""
    text = ch.flat(ch.numbered_sections(_markdown())["4"])
    assert "RSS is the better witness: it counts only this process's pages." in text
    assert "The RSS line decides. If `MemFree` did not fall, it did not see the buffers on this machine" in text
    printed = _printed_by(run, "review.npu_memory_in_ram(")
    line = re.search(r"^MemFree (?:fell [\d.,]+ (?:B|KiB|MiB)|did not fall) \(median", printed, flags=re.M)
    assert line, printed
    if "did not fall" in line.group(0):       # not noise: MemFree did not see the buffers
        assert "MemFree did not see the buffers here" in ch.flat(printed), printed
    assert "up to 0 B" not in printed, printed
    assert "shared RSS grew 1.00x the DMA total" in ch.flat(printed), printed


def test_want_float_costs_four_times_the_bytes_and_more_time(run) -> None:
    text = _printed_by(run, "review.want_float_cost(")
    assert "4x the output bytes" in text and "slower" in text, text


def test_the_error_table_lists_thirteen_codes_and_the_answer_matches(run) -> None:
    """§5: thirteen rows; the codes a single call causes are reproduced, the others marked 'board only'."""
    text = _printed_by(run, "review.error_codes(")
    rows = re.findall(r"^(-\d+)\s+\S+\s+(.*)$", text, flags=re.M)      # a full column leaves one space
    assert [int(code) for code, _ in rows] == list(range(-1, -14, -1)), text
    reproduced = sum(1 for _, rest in rows if not rest.startswith("board only"))
    assert f"{reproduced} of 13 reproduced" in text and 0 < reproduced < 13, text
    message = _printed_by(run, "review.reproduce_error(")
    assert "returned -5 (RKNN_ERR_PARAM_INVALID)" in ch.flat(message), message
    assert "a single call can cause" in ch.flat(ch.numbered_sections(_markdown())["5"])
    # the printed table names no method; the prose says how to print one code in full
    assert ".row(" not in text, text
    assert "`codes.row(-5)` prints one code in full" in ch.flat(ch.numbered_sections(_markdown())["5"])


def test_printed_results_name_no_python_attribute(run) -> None:
    """A reader sees plain words: no ".board" or "(.row(code) ...)" in what the chapter prints."""
    for index, text in run.items():
        found = re.findall(r"(?:^|[\s(])(\.[a-z_]\w*)(?=[(,;)]|$)", text, flags=re.M)
        assert not found, f"cell {index} prints {found}:\n{text}"


def test_the_chapter_runs_on_a_one_core_soc_without_sram() -> None:
    """The chapter executed on a simulated RK3568 (one NPU core, no SRAM, w_stride = width for digits_cnn):
    it runs to the end, the cells that need RK3588 say why they show nothing, rows at the width agree
    there, and every output stays within the course's limits."""
    import os
    from unittest import mock
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(CHAPTER), as_version=4)
    with mock.patch.dict(os.environ, {"RKNNLAB_BACKEND": "sim", "RKNNLAB_SIM_SOC": "rk3568"}):
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(CHAPTER.parent)}}).execute()
    outputs = {index: "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
               for index, cell in enumerate(nb.cells) if cell.cell_type == "code"}
    printed = "\n".join(outputs.values())
    assert "simulated RK3568" in printed and "simulated RK3588" not in printed
    said = ch.flat(printed)
    assert "RK3568 has one NPU core" in said and "reports no SRAM for the NPU" in said, printed
    # the cell says which SoC the dynamic-shape model runs on (models.py words it either way: the .rknn
    # ships for rk3588 only, while every SoC has its compiler report)
    assert re.search(r"mobilenet_v2_dynamic (is compiled for|has a compiler report for rk3568 but no \.rknn\b.*"
                     r"a \.rknn ships for): rk3588\b", said), printed
    assert "rows at width: 8 B apart" in printed and _percent(printed, "width") == 100.0
    for index, text in outputs.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue
        assert len(text.splitlines()) <= ch.MAX_OUTPUT_LINES, f"cell {index} prints {len(text.splitlines())} lines"
        assert all(len(line) <= 100 for line in text.splitlines()), f"cell {index} prints lines over 100 columns"


# --------------------------------------------------------------------------- RKNNLite (rknn-toolkit-lite2)
def test_rknnlite_masks_and_the_review_use_the_wheels_names_only() -> None:
    """§1-§3 say what an RKNNLite user does instead, §4 how they set core masks and what of the
    review applies to them (folded boxes); every RKNNLite method, keyword and constant used exists in the 2.5.0 wheel's class."""
    sections = ch.numbered_sections(_markdown())
    section = sections["4"]
    for number, title in (("1", "alignment"), ("2", "SRAM"), ("3", "allocate once"), ("4", "core masks"),
                          ("4", "what of this review applies")):
        box = rf"`{{3,}}\{{admonition\}} With RKNNLite: {title}\n:class: dropdown\n"
        assert re.search(box, sections[number]), f"§{number} lacks the folded box 'With RKNNLite: {title}'"
    text = _markdown() + "\n" + _code()
    ch.assert_rknnlite_names_are_the_wheels(text)
    assert "immich-app/immich#15241" in section and "airockchip/rknn-toolkit2#42" in section


def test_rknnlite_reports_a_failure_with_none_and_an_e_line(run) -> None:
    """§5: inference() on a float64 frame returns None after an "E" line, no exception, no code; the answer
    says so, and the cell runs as written for the wheel (load_rknn and init_runtime return 0)."""
    text = _printed_by(run, "lite.inference(")
    assert re.search(r"^load_rknn: 0, init_runtime: 0, inference\(\) returned None \(simulated RK3588", text,
                     flags=re.M), text
    assert re.search(r"^  E .*float64", text, flags=re.M), f"no E line names the dtype:\n{text}"
    assert "Traceback" not in text
    # the W line names the runtime's code for a static model's dynamic range (A69); no E line names a code
    assert not re.search(r"^  E .*RKNN_ERR", text, flags=re.M) and "returned None" in text
    answer = ch.flat(ch.numbered_sections(_markdown())["5"])
    assert 'Neither an exception nor a code: `inference()` prints an "E" line and returns `None`' in answer
    assert "`init_runtime` return 0 or -1, never one of the 13 codes" in answer


def test_the_rknnlite_cell_is_guarded_and_every_output_fits_100_columns(run) -> None:
    """Issue 18 review J1 and J4: the RKNNLite cell asks missing_wheel() before it makes the object
    and wraps the wheel's lines at 100 columns; no printed line of the chapter is wider."""
    cells = [c for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "RKNNLite()" in ch.source(c)]
    assert len(cells) == 1
    text = ch.source(cells[0])
    assert "why = missing_wheel()" in text and text.index("if why:") < text.index("RKNNLite()")
    assert "textwrap.fill(line, 100" in text
    printed = _printed_by(run, "lite.inference(")
    assert "W Query dynamic range failed." in printed
    # every printed line within 100 columns: ExecutedChapterChecks


def test_section_5_concludes_the_error_codes_before_the_rknnlite_block() -> None:
    """Issue 18 review J2: the error-code run's What this shows and the three sources follow that
    run; then the RKNNLite Predict, its run, its Answer and its own What this shows; one each."""
    section = ch.numbered_sections(_markdown())["5"]
    codes_w = section.index("**What this shows.** The same code has several causes")
    sources = section.index("A code names a kind of problem. Three sources say more")
    lite_predict = section.index("**Predict.** `inference()` gets a float64 frame")
    lite_w = section.index("**What this shows.** RKNNLite turns every failure into -1")
    assert codes_w < sources < lite_predict < lite_w
    assert section.count("**What this shows.**") == 2
    cells = ch.cells(CHAPTER)
    i = next(k for k, c in enumerate(cells) if "review.reproduce_error(" in ch.source(c))
    assert ch.source(cells[i + 1]).startswith("**What this shows.** The same code has several causes")


def test_the_rknnlite_boxes_of_sections_2_and_4_say_what_the_sources_say() -> None:
    """Issue 18 review J12 and E6: the core-mask box uses the agreed words and names the model
    of immich#15241; the SRAM box says the older environment variables act on librknnrt whatever
    loads it, as chapter 5 does, and "no flags argument" (E7)."""
    text = ch.flat(_markdown())
    assert ("the wheel prints a warning that core_mask is only supported by RK3576 / RK3588. The simulator "
            "then ignores the mask (A69); what a board returns is not public.") in text
    assert "A user ran a CLIP (ViT) model on one object with `NPU_CORE_0_1_2`" in text
    assert "consistent with the split rule above" in text and "as the split rule above predicts" not in text
    assert "the wheel ignores the mask with a warning" not in text
    assert "act on librknnrt, whatever wrapper loads it, so they reach an RKNNLite program too" in text
    assert "`init_runtime()` has no flags argument" in text and "passes no init flags" not in text


def test_on_a_board_without_the_wheel_the_rknnlite_cell_prints_why_and_skips() -> None:
    """Issue 18 review J4, run as a board without rknn-toolkit-lite2 would: the cell prints
    missing_wheel()'s line and makes no RKNNLite object, instead of raising."""
    import textwrap
    cell = next(ch.source(c) for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "RKNNLite()" in ch.source(c))
    ch.assert_rknnlite_cell_skips_without_the_wheel(cell, {"textwrap": textwrap, "MODEL": "x.rknn", "SOC": "rk3588",
                                                           "SOURCE": "board"})
