"""Chapter 5 keeps the course's shared rules, its sources and its own bookkeeping straight.

Static checks of chapters/05_allocation.ipynb (its C is compiled by tests/test_notebook_c.py):

- the chapter's rules appear word for word in their section and in the key points;
- the header asks 2-4 questions and ties each objective (one bold verb) to a Lab 5 exercise;
- every numbered section asks the reader to predict, with a folded answer after it;
- every wrong claim is shown as published (a ```text fence) after a prompt, in one container, and the
  published lines are the recipe's and the reuse demo README's own;
- every RKNN name outside a wrong claim exists in the course's header (lib/rknnlab/c/rknn_api.h);
- the C shows outside allocation, the dynamic-shape calls and both cache flags; the course's
  canonical sentences (bound-buffer size, supported reuse, cache maintenance) are quoted word for word;
- Rockchip's disagreements (SRAM versions, SHARE_SRAM) are taught, not settled;
- the simulator's assumptions the text names are the ones its last cell lists, and exist;
- the notebook defines no functions, keeps code cells short, has no placeholder text, stays within
  the prose budget, and is saved without outputs.

The executed checks run the chapter on the simulator (once per session, tests/notebook_runs.py):
every output is short, every result names its backend, and the numbers the text commits to are the run's.
"""
from __future__ import annotations

import ast
import re
from functools import partial
from pathlib import Path
from typing import Dict

import pytest

import chapterhelpers as ch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "chapters/05_allocation.ipynb"
CHAPTER = ROOT / NOTEBOOK

#: the chapter's rules, stated in their section ("**The rule.**") and in the key points; Lab 5 quotes them
RULES = {
    "1": "Create and bind every mem once, before the first frame. A frame then only writes the input, runs "
         "and reads the output: nothing is allocated per frame.",
    "2": "Cacheable memory is fast for the CPU but needs `rknn_mem_sync` between CPU and NPU access. "
         "Non-cacheable memory needs no sync, but every CPU read of it is slow. Choose by how much the CPU "
         "reads the buffer.",
    "3": "With `RKNN_FLAG_MEM_ALLOC_OUTSIDE` you allocate all of a context's memory: set the weights with "
         "`rknn_set_weight_mem` and the internal memory with `rknn_set_internal_mem` before the first "
         "`rknn_run`. `RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE` hands you the internal memory only.",
    "4": "Models that run one after another may share one internal buffer, as large as the largest "
         "`total_internal_size`. Give each context its own view of it, at least as large as that context's "
         "`total_internal_size`. Models whose runs can overlap must not share it.",
    "5": "For pipelines that run at the same time, `rknn_dup_context` shares the weights. Only pipelines "
         "that never run at the same time may also share the internal memory.",
    "6": "Allocate the io mems for the largest shape once. After each `rknn_set_input_shapes`, query the "
         "`CURRENT_*` attrs and bind the mems again with `rknn_set_io_mem`.",
    "7": "Only what fits in the free SRAM goes there: at most 956 KiB on RK3588, in 4 KiB pages, shared by "
         "every context. The rest stays in DDR. Check where it landed; never assume it.",
    "8": "All the models a board runs share one 4 GiB NPU address space. Add up their memory (compiler "
         "reports, or DMA totals measured one model at a time) before you load them all.",
}

TITLES = {"1": "A widely copied recipe, and what the API offers", "2": "Cacheable or non-cacheable",
          "3": "Allocating outside the runtime", "4": "One internal buffer for models that run in turn",
          "5": "N pipelines: init, dup or share", "6": "Dynamic shapes", "7": "SRAM on RK3588",
          "8": "The 4 GiB address space of the NPU"}

#: the objectives, one verb each, with the Lab 5 exercises that assess them (lab order by difficulty:
#: find the bug, choose the cache flag, compute SRAM, share one internal buffer, ★ shape change)
OBJECTIVES = {"Find": [1], "Choose": [2], "Compute": [3, 4], "Handle": [5]}

#: the wrong claims, each after its prompt: the recipe's (two boxes) and the reuse demo README's typo
WRONG_CLAIMS = ("a memory strategy api", "bind the mems in every frame", "each view is sized from model a")

#: lines the chapter quotes "as published": the widely copied recipe's, and the reuse demo's README
AS_PUBLISHED = ("rknn_set_mem_strategy(ctx, RKNN_MEM_STRATEGY_SEQUENTIAL);",
                "rknn_tensor_mem *input_mem  = rknn_create_mem(ctx, input_attr.size);",
                "rknn_set_io_mem(ctx, input_mem, &input_attr);", "rknn_free_mem(ctx, input_mem);",
                "internal_mem_b = rknn_create_mem_from_fd(ctx_b, internal_mem_max->fd,")

#: the course's canonical sentences (DECISIONS 3', 6 and 9') the chapter quotes word for word
CANONICAL = (
    "Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, or a "
    "plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use n_elems × 4 bytes.",
    "The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem bound once with "
    "rknn_set_io_mem.",
    "Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the DISABLE_FLUSH flags "
    "imply that the runtime flushes inputs and invalidates outputs by default. The API reference says "
    "cacheable memory shared by the CPU and the NPU needs rknn_mem_sync. None of Rockchip's demos call it. "
    "A maintainer says to add it yourself if you need it (airockchip/rknn_model_zoo#156). The course's code "
    "syncs: the safe choice.",
)

#: canonical sentences a lab may quote beside this chapter's rules (DECISIONS 10': the DMA total)
SHARED_RULES = CANONICAL + (
    "On a board, total_dma_allocated_size holds more than weights + internal + io. The runtime also allocates "
    "register-command and task buffers, and it rounds allocations to 4 KiB. User Guide §9.1.1 lists register "
    "config, and public librknnrt logs show these buffers. The io buffers may be allocated only at the first "
    "rknn_run. The simulator allocates exactly weights + internal + io at init (assumptions A9, A10).",
)

#: sources the text must cite
SOURCES = ("airockchip/rknn-toolkit2#287", "airockchip/rknn_model_zoo#156", "airockchip/librga#69",
           "User Guide V2.3.0 (§5.4.4.2)", "RK3588_NPU_SRAM_usage.md", "rknn_internal_mem_reuse_demo",
           "API reference V2.3.2 p.19", "(p.35)")

#: names that look like API names but are files, demos, repositories or environment variables
NOT_API = {"rknn_model_zoo", "rknn_benchmark", "rknn_api", "rknn_internal_mem_reuse_demo", "rknn_create_mem_demo",
           "rknn_dynamic_shape_input_demo", "rknn_dynshape_inference_zero_copy_alloc_outside", "rknn_with_mmz_demo",
           "RKNN_LOG_LEVEL", "RKNN_INTERNAL_MEM_TYPE", "RKNN_SEPARATE_WEIGHT_MEM", "RKNN_WEIGHT_MEM_TYPE",
           "rknn_c"}                                              # the %rknn_c magic (rknnlab.cmagic)

#: Rockchip's SRAM figure, quoted once in Rockchip's unit beside ours; everywhere else KiB/MiB/GiB and DDR
ROCKCHIP_KB = "956 KB in Rockchip's note (978,944 B = 956 KiB"

_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)
_code = partial(ch.code, CHAPTER)


run = ch.printed_run(NOTEBOOK)


class TestTheCourseRules(ch.ExecutedChapterChecks):
    """Rules, header, section arc, wrong claims, RKNN names, assumptions, the board's calls, the
    lab's rules, the notebook's hygiene and budgets, and the run's outputs (tests/chapterhelpers.py)."""
    chapter, lab, lab_notebook = CHAPTER, 5, ROOT / "labs" / "lab05_allocation.ipynb"
    rules, titles, objectives, starred = RULES, TITLES, OBJECTIVES, ("Handle",)
    wrong_claims, boxes_may_share_a_prompt = WRONG_CLAIMS, True      # §1: two boxes after one prompt
    not_api, invented = NOT_API, ("rknn_set_mem_strategy", "RKNN_MEM_STRATEGY", "rknn_free_mem")
    shared_rules, sources = SHARED_RULES, r"simulated|source: |compiler reports"
    board_calls = ("allocation.prealloc_vs_per_frame(", "allocation.cache_choices(", "allocation.shared_internal(",
                   "allocation.parallel_corruption(", "allocation.pipelines_memory(", "allocation.shape_sweep(",
                   "allocation.sram_fit(", "allocation.sram_usage(", "allocation.iommu_budget(",
                   "rt.set_weight_mem(", "rt.set_internal_mem(", "rt.create_mem_from_fd(")


# --------------------------------------------------------------------------- quoted lines and takeaways
def test_the_quoted_lines_are_as_published() -> None:
    """The ```text fences hold the recipe's and the README's own lines (API names as they print them)."""
    published = "\n".join(re.findall(r"```text\n(.*?)```", _markdown(), flags=re.S))
    for line in AS_PUBLISHED:
        assert line in published, f"not quoted as published: {line!r}"
    assert published.count("mem_size_a.total_internal_size, 0);") == 2, "the README's typo: both views sized from A"


def test_every_table_is_followed_by_its_takeaway() -> None:
    cells = _cells()
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not re.search(r"profile\.show\(|plt\.show\(\)", ch.source(cell)):
            continue
        after = next(ch.source(c) for c in cells[index + 1:] if c["cell_type"] == "markdown")
        assert re.match(r"What the (figure|table) shows: ", after), f"cell {index} has no takeaway after it"


# --------------------------------------------------------------------------- names, C, sources
def test_c_blocks_allocate_outside_bind_once_and_change_shapes() -> None:
    blocks = ch.c_blocks(_markdown())
    calls = " ".join(blocks)
    for name in ("RKNN_FLAG_MEM_ALLOC_OUTSIDE", "rknn_set_weight_mem(", "rknn_set_internal_mem(",
                 "RKNN_FLAG_MEMORY_NON_CACHEABLE", "RKNN_FLAG_MEMORY_CACHEABLE", "rknn_set_input_shapes(",
                 "RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR", "RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR",
                 "RKNN_MEMORY_SYNC_FROM_DEVICE", "size_with_stride", "rknn_destroy_mem("):
        assert name in calls, f"no C block shows {name}"
    loop = next(b for b in blocks if "for (int k = 0; k < n_frames" in b)
    body = loop[loop.index("for (int k"):]
    body = body[:body.index("\n}") + 2]
    for per_frame in ("rknn_create_mem", "rknn_set_io_mem", "rknn_outputs_get", "malloc"):
        assert per_frame not in body, f"the corrected loop calls {per_frame} in every frame"
    assert loop.index("rknn_set_io_mem") < loop.index("for (int k")
    for block in blocks:
        ch.assert_gets_are_released(block)


def test_the_canonical_sentences_are_quoted_word_for_word() -> None:
    text = ch.flat(_markdown())
    for sentence in CANONICAL:
        assert sentence in text, f"not quoted word for word: {sentence[:60]!r}"
    assert "as Rockchip's demos do" not in re.sub(r"```c\n.*?```", "", _markdown(), flags=re.S) \
        .split("## 2.")[1].split("## 3.")[0], "never 'as Rockchip's demos do' about syncing"


def test_sources_are_cited_and_disagreements_taught() -> None:
    text = ch.flat(_markdown())
    for source in SOURCES:
        assert source in text, f"{source} is not cited"
    sram = ch.flat(ch.numbered_sections(_markdown())["7"])
    for fact in ("driver 0.9.2", "runtime 1.6.0", "driver 0.8.0 and runtime 1.3.4b14", "RKNN_INTERNAL_MEM_TYPE=sram",
                 "RKNN_SEPARATE_WEIGHT_MEM=1", "RKNN_WEIGHT_MEM_TYPE=sram", '"not yet implemented"',
                 "Whether those still work in 2.3 is not documented", "/sys/kernel/debug/rknpu/mm",
                 "RKNN_LOG_LEVEL=3", ROCKCHIP_KB):
        assert fact in sram, f"§7 lacks {fact!r}"
    assert "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM" in sram and "the API reference omits it" in sram
    dyn = ch.flat(ch.numbered_sections(_markdown())["6"])
    assert "from runtime 1.6.0" in dyn and "may not be duplicated" in dyn


# --------------------------------------------------------------------------- units, the worked example, the counts
def test_units_are_binary_and_the_external_memory_is_ddr() -> None:
    """Our own text says KiB/MiB/GiB and DDR; Rockchip's "956 KB" appears once, beside its value in bytes
    and KiB. Quoted lines (```text fences) keep their own units."""
    text = ch.flat(re.sub(r"```text\n.*?```", "", _markdown(), flags=re.S))
    assert text.count(ROCKCHIP_KB) == 1, f"quote Rockchip's figure once as {ROCKCHIP_KB!r}"
    decimal = re.findall(r"\b\d[\d.,]* ?[KMG]B\b", text.replace(ROCKCHIP_KB, ""))
    assert not decimal, f"decimal units in our own text: {decimal}"
    assert "DRAM" not in text, "the external memory is DDR"


def test_the_worked_example_forgets_the_internal_memory_not_the_weights() -> None:
    """Lab 5 exercise 1 diagnoses a MEM_ALLOC_OUTSIDE setup that forgets the weights: the chapter's
    worked example must not be that bug (it forgets rknn_set_internal_mem with INTERNAL_ALLOC_OUTSIDE)."""
    section = ch.numbered_sections(_markdown())["3"]
    predict = ch.flat(section[section.index("**Predict.**"):].split("\n\n")[0])
    assert "`RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE`" in predict and "forget `rknn_set_internal_mem`" in predict, predict
    cell = next(ch.source(c) for c in _cells() if c["cell_type"] == "code" and "rt.set_internal_mem(ctx, internal)" in
                ch.source(c))
    assert "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE" in cell and "set_weight_mem" not in cell


def test_the_iommu_answer_gives_the_librarys_counts() -> None:
    """§8's answer commits to the counts of YOLOv5m contexts in one 4 GiB domain, from RK3588's compiler
    reports (no run: the same on every backend)."""
    from rknnlab import allocation
    init = int(allocation.iommu_budget(["yolov5m"], soc="rk3588")["max_count"].iloc[0])
    dup = int(allocation.iommu_budget(["yolov5m"], soc="rk3588", share_weights=True)["max_count"].iloc[0])
    assert dup > init
    assert f"{init} YOLOv5m contexts by `rknn_init`, {dup} by dup, on RK3588's compiler reports" in ch.flat(_markdown())


def test_the_shared_models_need_a_buffer_of_the_largest() -> None:
    """§4 shares three models whose internal sizes differ, so the saving (sum minus the largest) is not 0,
    and the README's typo matters: the first model's internal size is smaller than another's. The
    models are the first three of a list that exist for the SoC: check RK3588 and RK3568."""
    from rknnlab import models
    shared = re.search(r"SHARED = \[m for m in (\(.*?\)) if m in MODEL\]\[:3\]", _code())
    assert shared, "SHARED: the first three of a tuple of models, those compiled for the SoC"
    for soc in ("rk3588", "rk3568"):
        names = [m for m in ast.literal_eval(shared.group(1)) if soc in models.model_socs(m)][:3]
        sizes = [models.load_report(m, soc).total_internal_size for m in names]
        assert len(names) == 3 and sum(sizes) - max(sizes) > 0 and sizes[0] < max(sizes), (soc, names)

# --------------------------------------------------------------------------- the run
def _printed_by(run: Dict[int, str], needle: str) -> str:
    found = [text for index, text in run.items() if needle in ch.source(_cells()[index])]
    assert found, f"no code cell calls {needle}"
    return found[0]


def test_the_recipes_loop_allocates_per_get_and_the_corrected_one_nothing(run) -> None:
    """§1's answer: the recipe's get allocates per frame and its output differs (same_output, A13); the
    "new io mems" loop allocates DMA per frame; "create once, bind once" allocates nothing."""
    text = _printed_by(run, "allocation.prealloc_vs_per_frame(")
    recipe = re.search(r"^\s*recipe: rebind \+ get\s+[\d,.]+ us\s+\d+\s+0 B\s+([\d.]+) (B|KiB)\s+False\s*$", text,
                       flags=re.M)
    assert recipe and float(recipe.group(1)) > 0, f"the recipe's get allocates and its output differs:\n{text}"
    once = re.search(r"^\s*create once, bind once\s+[\d,.]+ us\s+\d+\s+0 B\s+-\s+True\s*$", text, flags=re.M)
    assert once, f"the corrected loop allocates in a frame:\n{text}"
    per_frame = re.search(r"^\s*new io mems every frame\s+[\d,.]+ us\s+\d+\s+([\d.]+) KiB\s+-\s+True\s*$", text,
                          flags=re.M)
    assert per_frame and float(per_frame.group(1)) > 0, text
    answer = ch.flat(_markdown())
    assert "the recipe's output differs from the corrected loop's (`same_output`)" in answer


def test_a_forgotten_internal_mem_stops_the_run_and_setting_it_fixes_it(run) -> None:
    text = _printed_by(run, "rt.set_internal_mem(ctx, internal)")
    assert "rknn_run without internal memory" in text and "RKNN_ERR_PARAM_INVALID" in text
    assert "rknn_set_internal_mem" in text.split("RKNN_ERR_PARAM_INVALID", 1)[1], "the message names the missing call"
    assert "after rknn_set_internal_mem: rknn_run returned 0" in text


def test_the_cache_answer_holds_for_the_run(run) -> None:
    """§2's answer commits to a flag for each pattern: (a) non-cacheable, (b) cacheable, (c) non-cacheable;
    and the head of (b) is 1.6 MiB."""
    text = _printed_by(run, "allocation.cache_choices(")
    cheaper = dict(re.findall(r"^\s*\(([abc])\) .*? (CACHEABLE|NON_CACHEABLE|cannot tell)(?: \(.*\))?\s*$", text,
                              flags=re.M))
    assert cheaper == {"a": "NON_CACHEABLE", "b": "CACHEABLE", "c": "NON_CACHEABLE"}, \
        f"the answer commits to (a) non-cacheable, (b) cacheable, (c) non-cacheable; the run says {cheaper}:\n{text}"
    answer = ch.flat(_markdown())
    assert "(a): non-cacheable, by a few microseconds" in answer and answer.index("(a): non") < \
        answer.index("(b): cacheable") < answer.index("(c): non-cacheable"), "answer in the order (a), (b), (c)"
    from rknnlab import models
    head = models.load_report("yolov5s", "rk3588").attrs("outputs", "native")[0]["size_with_stride"]
    assert f"{head / 2**20:.1f} MiB" == "1.6 MiB" and "80×80 head (1.6 MiB)" in answer


def test_sharing_saves_the_sum_minus_the_largest_and_overlap_corrupts(run) -> None:
    text = _printed_by(run, "allocation.shared_internal(")
    saving = re.search(r"sharing saves ([\d,]+) B; sum of internal minus the largest: ([\d,]+) B", text)
    assert saving and saving.group(1) == saving.group(2) and saving.group(1) != "0", text
    assert re.search(r"^\s*total .* True\s*$", text, flags=re.M), "the outputs must be the same in turn"
    overlap = _printed_by(run, "allocation.parallel_corruption(")
    rows = re.findall(r"^\s*(one after another|at the same time)\s+(\w+)\s+(in turn|first, core 0|second, core 1)"
                      r"\s+(\d+)\s+(\d+)\s", overlap, flags=re.M)
    assert len(rows) == 4, overlap
    assert all(runs == ok and runs != "0" for mode, _, _, runs, ok in rows if mode == "one after another")
    started = {start: (int(runs), int(ok)) for mode, _, start, runs, ok in rows if mode == "at the same time"}
    assert started["first, core 0"][0] > 0 and started["first, core 0"][1] < started["first, core 0"][0], \
        "the text says the second run damages the first here"
    assert started["second, core 1"][1] == started["second, core 1"][0] > 0, overlap
    text = ch.flat(_markdown())
    assert "Here (A28's stand-in) the second run damages the first; on a board either run, or both, can be damaged" \
        in text, "which run is damaged is the stand-in's (A28), not a board's"


def test_the_pipelines_answer_holds_for_the_run(run) -> None:
    """§5's answer: dup with one shared internal buffer needs the least (one at a time); of the ways
    whose pipelines may run at once, dup alone."""
    text = _printed_by(run, "allocation.pipelines_memory(")
    least = re.search(r"^\s*the least memory: (.+?) \(([\d.]+) MiB\)", text, flags=re.M)
    parallel = re.search(r"the least of the ways that may run at once: (.+?) \(([\d.]+) MiB\)", text)
    assert least and parallel and "N = 4 (" in text, text
    assert least.group(1) == "rknn_dup_context + one internal mem" and parallel.group(1) == "rknn_dup_context"
    assert float(least.group(2)) < float(parallel.group(2))
    answer = ch.flat(_markdown())
    assert "Dup with one shared internal buffer needs the least, but its pipelines run one at a time" in answer
    assert "For parallel streams, dup alone" in answer

def test_a_shape_change_allocates_nothing_and_needs_a_new_binding(run) -> None:
    sweep = _printed_by(run, "allocation.shape_sweep(")
    rows = re.findall(r"^\s*1x(\d+)x\d+x3\s+([\d.]+) KiB\s+[\d,]+ B\s+([\d.]+) KiB\s+([\d.]+) MiB\s+([\d.]+) MiB\s+"
                      r"([\d,.]+) us", sweep, flags=re.M)
    assert [int(r[0]) for r in rows] == [160, 224, 320], sweep
    assert len({r[2] for r in rows}) == 1 and len({r[3] for r in rows}) == 1 and len({r[4] for r in rows}) == 1, \
        "the io mems, the internal memory and the DMA total are the same at every shape"
    inputs = [float(r[1]) for r in rows]
    assert inputs == sorted(inputs) and max(inputs) <= float(rows[0][2]), "the largest shape's mem holds every one"
    times = [float(r[5].replace(",", "")) for r in rows]
    assert times == sorted(times), "the run time falls with the pixels"
    rebind = _printed_by(run, "rt.set_input_shapes(ctx, [attr])")
    assert "320x320: rknn_run returned 0" in rebind
    assert "160x160 with the 320x320 binding: RKNN_ERR_PARAM_INVALID" in rebind


def test_sram_holds_at_most_its_budget_and_the_second_context_gets_none(run) -> None:
    fit = _printed_by(run, "allocation.sram_fit(")
    sizes = re.search(r"([\d,]+) B of ([\d,]+) B internal memory in SRAM\n\s+(\d+) of (\d+) tensors have a hit", fit)
    assert sizes, fit
    sram, internal = (int(g.replace(",", "")) for g in sizes.group(1, 2))
    assert sram == 978_944 < internal, "mobilenet_v2's internal memory is larger than the 956 KiB: all of SRAM is used"
    hits = re.search(r"adding up to ([\d,]+) B; Predict SRAM Hit RW Amount ([\d,]+) B", fit)
    assert int(hits.group(1).replace(",", "")) > sram, "the hits add up to more than the SRAM (addresses reused)"
    assert int(hits.group(2).replace(",", "")) == 2 * int(hits.group(1).replace(",", ""))
    # the timing law times layers with cycles by their arithmetic (A20, A54): SRAM shortens only
    # the layers the compiler gives 0 cycles, and mobilenet_v2 has none on the NPU
    from rknnlab import models
    from rknnlab.sim import timing_law
    kinds = {timing_law.layer_kind(layer) for layer in models.load_report("mobilenet_v2", "rk3588").layers}
    assert "zero" not in kinds and "ENABLE_SRAM saves nothing here" in fit, "the run does not get faster"
    three = _printed_by(run, "FLAGS = {")
    totals = dict(re.findall(r"^\s*(flag 0|ENABLE_SRAM, first|ENABLE_SRAM, second)\s.*DMA total\s+([\d,]+) B",
                             three, flags=re.M))
    dma = {k: int(v.replace(",", "")) for k, v in totals.items()}
    assert dma["ENABLE_SRAM, first"] == dma["flag 0"] - sram, "the DMA total counts only the DDR part"
    reserved = re.findall(r"total_sram_size\s+([\d,]+) B", three)
    assert reserved == ["978,944"] * 3, "total_sram_size is the NPU's reservation, the same for every context (A53)"
    free = re.findall(r"free_sram_size\s+([\d,]+) B", three)
    assert free == ["0"] * 3 and "`free_sram_size` is what is free at the query, with all three alive: 0 even for " \
        "the flag-0 context" in ch.flat(_markdown()), "queried with all three alive, free_sram_size is 0 for each"
    assert dma["ENABLE_SRAM, second"] == dma["flag 0"], "the second context gets no SRAM"
    assert "used: 978944, free: 0" in three
    spill = _printed_by(run, "allocation.try_alloc_sram(")
    assert re.search(r"^\s*512\.0 KiB\s+188\.0 KiB\s+324\.0 KiB\s+0 B\s*$", spill, flags=re.M), spill
    worked = _printed_by(run, "by_hand = ")
    pair = re.search(r"hit by hand ([\d,]+) B; the runtime's table .*: ([\d,]+) B", worked)
    assert pair and pair.group(1) == pair.group(2) and pair.group(1) != "0"
    text = ch.flat(_markdown())
    assert "956 KiB of the 1.5 MiB here" in text and f"{internal / 2**20:.1f}" == "1.5"
    assert f"{sram / 1024:.0f} KiB" == "956 KiB" and "internal buffer is 1.5 MiB" in text


def test_a_mix_of_models_can_overflow_the_domain_that_each_count_alone_fits(run) -> None:
    """§8's answer: 100 YOLOv5m and 60 ResNet50 contexts do not fit in one 4 GiB domain together, though
    each count alone would (the table's max_count)."""
    text = _printed_by(run, "allocation.iommu_budget(")
    counts = dict(re.findall(r"^\s*(yolov5m|resnet50)\s+[\d.]+ MiB\s+[\d.]+ MiB\s+[\d.]+ MiB\s+([\d,]+)\s", text,
                             flags=re.M))
    assert int(counts["yolov5m"].replace(",", "")) > 100 and int(counts["resnet50"].replace(",", "")) > 60, text
    share = re.search(r"^100 yolov5m \+ 60 resnet50 contexts: [\d.]+ GiB, (\d+)% of one 4 GiB domain$", text, flags=re.M)
    assert share and int(share.group(1)) > 100, f"the answer says the mix does not fit:\n{text}"
    text = ch.flat(_markdown())
    assert "Do 100 YOLOv5m and 60 ResNet50 contexts fit together?" in text
    assert "The mix does not fit, although each count alone would" in text


def test_the_chapter_runs_on_a_soc_without_the_rk3588_only_models() -> None:
    """The chapter executed on a simulated RK3568 (one NPU core, no SRAM, no dynamic-shape model, no
    resnet50): it runs to the end and says what it cannot show there instead of failing."""
    import os
    from unittest import mock
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(CHAPTER), as_version=4)
    with mock.patch.dict(os.environ, {"RKNNLAB_BACKEND": "sim", "RKNNLAB_SIM_SOC": "rk3568"}):
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(CHAPTER.parent)}}).execute()
    printed = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                        for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "simulated RK3568" in printed and "simulated RK3588" not in printed.replace("RK3588 compiler", "")
    assert "the course compiles mobilenet_v2_dynamic for RK3588 only" in printed
    assert "no SRAM table (RK3588 only" in printed
    assert re.search(r"sharing saves ([\d,]+) B; sum of internal minus the largest: \1 B", printed)


# --------------------------------------------------------------------------- RKNNLite (rknn-toolkit-lite2)
def _lite_boxes(body: str) -> list:
    return re.findall(r"(`{3,})\{admonition\} With RKNNLite(?::[^\n]*)?\n:class: dropdown\n(.*?)\n\1\n", body,
                      flags=re.S)


def test_every_section_with_c_says_what_an_rknnlite_user_does() -> None:
    """§1-§4 and §6-§8 show C calls or flags: each has a folded "With RKNNLite" box saying what
    RKNNLite cannot do (§8: that the limit holds for it too); §5 runs the RKNNLite way. The wheel's
    names only."""
    sections = ch.numbered_sections(_markdown())
    for number in ("1", "2", "3", "4", "6", "7", "8"):
        boxes = _lite_boxes(sections[number])
        assert boxes, f"§{number} has no folded 'With RKNNLite' box"
        assert number == "8" or any("RKNNLite" in box and ("cannot" in box or "no `" in box) for _, box in boxes), \
            f"§{number}'s box does not say what RKNNLite lacks"      # §8: the limit holds for RKNNLite too
    assert "allocation.lite_vs_dup(" in _code() and "immich-app/immich#15241" in sections["5"]
    ch.assert_rknnlite_names_are_the_wheels(_markdown() + "\n" + _code())
    for invented in ("create_mem(", "set_io_mem(", "dup_context(", "set_input_shapes("):
        assert not re.search(rf"\blite\w*\.{re.escape(invented)}", _markdown()), f"RKNNLite has no {invented}"


def test_the_rknnlite_objects_hold_the_weights_and_the_file_per_object(run) -> None:
    """§5's RKNNLite answer: (N - 1) more weight buffers of DMA, the file six times against once
    (5 more files of heap, and a little for the staging buffers)."""
    text = _printed_by(run, "allocation.lite_vs_dup(")
    assert "['NPU_CORE_0', 'NPU_CORE_1', 'NPU_CORE_2']" in text, text
    extra = re.search(r"RKNNLite minus dup: ([\d.]+) x total_weight_size of DMA, ([\d.]+) x the model file of heap",
                      text)
    assert extra, text
    assert float(extra.group(1)) == 2.0, "three objects against one init and two dups: two more weight buffers"
    assert 5.0 <= float(extra.group(2)) < 5.5, "six copies of the file against one, plus the staging buffers"
    rows = re.findall(r"^\s*(3 RKNNLite objects|1 rknn_init \+ 2 rknn_dup_context)\s+([\d.]+) MiB\s+([\d.]+) (MiB|B)",
                      text, flags=re.M)
    assert [r[0] for r in rows] == ["3 RKNNLite objects", "1 rknn_init + 2 rknn_dup_context"], text
    assert float(rows[0][1]) > float(rows[1][1]) and rows[1][2:] == ("0", "B"), "the C path keeps no file in Python"
    answer = ch.flat(ch.numbered_sections(_markdown())["5"])
    assert "The file stays six times, against once: three `bytes` objects and three runtime copies" in answer
    assert "Two more weight buffers" in answer
    # the immich figures with their qualifiers (issue 18 review E8): who, which models, which peak
    assert ("a peak of 2,308 MiB with RKNNLite on one core against 1,261 MiB with a 3-core C-API pool that "
            "shares the weights (immich-app/immich#23958)") in answer
    assert "two models, SigLIP2 and antelopev2, at the peak while a photo is uploaded" in answer


def test_the_per_core_pattern_is_cited_to_its_source_and_immich_only_for_the_tripling() -> None:
    """Issue 18 review J6: immich gives every instance NPU_CORE_AUTO, so #15241 is cited only for
    three instances tripling the memory; one object per core is leafqycc/rknn-multi-threaded's."""
    section = ch.flat(ch.numbered_sections(_markdown())["5"])
    assert "(leafqycc/rknn-multi-threaded)" in section
    assert "three RKNNLite instances, all on `NPU_CORE_AUTO`, triple the memory (immich-app/immich#15241)" in section
    for sentence in re.split(r"(?<=[.!?])\s+", section):
        if "15241" in sentence:
            assert "NPU_CORE_0" not in sentence and "per NPU core" not in sentence, sentence
    from rknnlab.allocation import lite_pool
    doc = ch.flat(lite_pool.lite_vs_dup.__doc__)
    assert "leafqycc/rknn-multi-threaded" in doc and "all on NPU_CORE_AUTO there" in doc


def test_rknnlite_has_no_flags_argument_rather_than_no_init_flags() -> None:
    """Issue 18 review E7: the wheel reaches two init flags (async_mode, load_model_in_npu), so the
    chapter says "no flags argument", never "no init flags"."""
    text = ch.flat(_markdown())
    assert "no init flags" not in text and "passes no init flags" not in text
    assert text.count("has no flags argument") >= 3
    assert "only `async_mode` and the attribute `load_model_in_npu` reach an init flag" in text


def test_the_rknnlite_cell_is_skipped_on_a_board_without_the_wheel() -> None:
    """Issue 18 review J4: the cell that makes RKNNLite objects (allocation.lite_vs_dup) asks
    missing_wheel() first and prints its line instead."""
    cells = [c for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "lite_vs_dup(" in ch.source(c)]
    assert len(cells) == 1
    text = ch.source(cells[0])
    assert "why = missing_wheel()" in text and text.index("if why:") < text.index("lite_vs_dup(")


# --------------------------------------------------------------------------- the C program (issue 21)
def test_allocation_c_prealloc_runs_in_section_1_and_allocates_nothing_per_frame(run) -> None:
    """§1 runs examples/c/allocation.c prealloc with the line magic, on the chapter's SoC's model: on
    the simulator's librknnrt its first line says so; two io mems bound before the loop; the output
    follows the input; from frame 1 to the last the DMA total does not move and RSS grows by less than
    1 MB (the first frame's rise, the simulator's output cache, is before frame 1)."""
    code = [ch.source(c) for c in _cells() if c["cell_type"] == "code" and "%rknn_c" in ch.source(c)]
    assert code == ['%rknn_c examples/c/allocation.c -- prealloc {MODEL["mobilenet_v2"]} 100']
    assert "%load_ext rknnlab" in ch.source(_cells()[2])
    (text,) = [t for t in run.values() if "created and bound before the loop" in t]
    lines = text.splitlines()
    assert lines[0].startswith("rknnlab: librknnrt for PCs, simulated RK3588 ("), lines
    assert "io mems: 2, 151528 B in all, created and bound before the loop" in lines
    assert "output follows input: yes" in lines
    rss, dma = (int(g) for g in re.search(r"growth from frame 1 to frame 100: RSS (-?\d+) kB, DMA total (-?\d+) B",
                                          text).groups())
    assert dma == 0 and rss < 1024, text
    assert len(lines) <= 15 and all(len(line) <= 100 for line in lines)
    one = ch.flat(ch.numbered_sections(_markdown())["1"])
    assert "`allocation.c prealloc` runs this loop" in one and "Simulated RSS includes the embedded Python" in one
