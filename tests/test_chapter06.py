"""Chapter 6 keeps the course's shared rules, its sources and its own bookkeeping straight.

Static checks of chapters/06_video_pipeline.ipynb (its C is compiled by tests/test_notebook_c.py):

- the chapter's rules appear word for word in their section and in the key points;
- the header asks 2-4 questions and ties each objective (one bold verb) to a Lab 6 exercise;
- every numbered section asks the reader to predict, with a folded answer after it;
- the recipe's wrong claims are shown as published (a ```text fence) after a prompt, in one container;
- every RKNN name outside a wrong claim exists in the course's header (lib/rknnlab/c/rknn_api.h), and the
  recipe's invented names appear only inside wrong claims;
- the chapter reuses the methods of chapters 2-5 and links back to where each was taught (course style 15);
- the C binds once, syncs both directions and allocates nothing per frame; the course's canonical
  sentences (bound-buffer size, C2, threads, cache maintenance) are quoted word for word;
- the simulator's assumptions the text names are the ones its last cell lists, and exist;
- the notebook defines no functions, keeps code cells short, has no placeholder text, stays within
  the prose budget, and is saved without outputs.

The executed checks run the chapter on the simulator (once per session, tests/notebook_runs.py):
every output is short and names its backend, the run stays within its time budget, and the numbers
the text commits to are the run's.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Dict

import chapterhelpers as ch
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "chapters/06_video_pipeline.ipynb"
CHAPTER = ROOT / NOTEBOOK

#: the chapter's rules, stated in their section ("**The rule.**") and in the key points; Lab 6 quotes them
RULES = {
    "1": "Zero-copy is a mem made with `rknn_create_mem` and bound once with `rknn_set_io_mem`: no init flag "
         "turns it on. `rknn_inputs_set` always copies, and no tensor format of the runtime is NV12.",
    "2": "Size every frame buffer from its strides: NV12 takes stride × height stride × 3 / 2 bytes, RGB888 "
         "takes w_stride × height × 3 bytes. Width × height is the picture, not the buffer.",
    "3": "Threshold an int8 output in its own domain. Turn the threshold once into the smallest q with "
         "(q − zp) × scale ≥ threshold, then compare the raw bytes with q.",
    "4": "Zero-copy removes the copies into and out of the runtime, not the NPU's work. Time every stage in "
         "both modes before you choose one.",
    "5": "Give each worker its own context, made with `rknn_dup_context`, and its own io mems. Choose the "
         "fewest workers whose measured frame rate meets the target with the latency in budget.",
    "6": "Reuse means no allocation per call. Flat memory only shows there is no leak.",
    "7": "Call `rknn_mem_sync` with `RKNN_MEMORY_SYNC_FROM_DEVICE` after each `rknn_run`, before the CPU reads "
         "a cacheable output mem. Call it with `RKNN_MEMORY_SYNC_TO_DEVICE` after the CPU writes an input mem.",
}

TITLES = {"1": "The task and the model", "2": "Frames: NV12 and strides", "3": "One frame, stage by stage",
          "4": "General API or zero-copy", "5": "Workers and NPU cores", "6": "Steady state over many frames",
          "7": "What Rockchip's examples do per frame"}

#: the objectives, one verb each, with the Lab 6 exercises that assess them (1 size an NV12 frame and its
#: RGB input; 2 threshold in the int8 domain; 3 fix a pipeline that reads outputs without syncing; 4 make a
#: per-frame allocation go away; ★5 choose the number of workers for a frame rate)
OBJECTIVES = {"Size": [1], "Threshold": [2], "Fix": [3, 4], "Choose": [5]}

#: the recipe's wrong claims (words of each box's title), each after the recipe as published and a prompt
WRONG_CLAIMS = ("rknn_flag_zero_copy", "the npu converts nv12", "rknn_inputs_set passes the address")

#: the recipe's lines, quoted as published (translated) in the ```text fence
AS_PUBLISHED = ("NV12 frame: about 3 MB; RGB888: about 6.2 MB.",
                "Per frame 45 ms = 12 ms conversion + 8 ms input copy + 5 ms output copy + 20 ms inference.",
                "zero-copy mode (RKNN_FLAG_ZERO_COPY)", "it just passes the address.",
                "rknn_set_io_mem and let the NPU convert.",
                "Double-buffer the outputs: the CPU reads frame N-1 while the NPU runs frame N.",
                "Zero-copy needs its input memory aligned (usually to 64 bytes).")

#: the course's canonical sentences (DECISIONS 1, 3', 7 and 9') the chapter quotes word for word
CANONICAL = (
    "Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, or a "
    "plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use n_elems × 4 bytes.",
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on rk3588, "
    "rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; never assume it.",
    "One set of output buffers per context, and one thread per context at a time.",
    "Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the DISABLE_FLUSH flags "
    "imply that the runtime flushes inputs and invalidates outputs by default. The API reference says "
    "cacheable memory shared by the CPU and the NPU needs rknn_mem_sync. None of Rockchip's demos call it. "
    "A maintainer says to add it yourself if you need it (airockchip/rknn_model_zoo#156). The course's code "
    "syncs: the safe choice.",
)

#: canonical sentences a lab may quote beside this chapter's rules (DECISIONS 5 and 10')
SHARED_RULES = CANONICAL + (
    "The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem bound once with "
    "rknn_set_io_mem.",
    "On a board, total_dma_allocated_size holds more than weights + internal + io. The runtime also allocates "
    "register-command and task buffers, and it rounds allocations to 4 KiB. User Guide §9.1.1 lists register "
    "config, and public librknnrt logs show these buffers. The io buffers may be allocated only at the first "
    "rknn_run. The simulator allocates exactly weights + internal + io at init (assumptions A9, A10).",
)

#: course style 15: chapter 6 reuses earlier methods and links back to the section that taught each
LINKS_BACK = {"chapter 1 §6": "weights against activations", "chapter 2 §4": "rknn_dup_context and the DMA total",
              "chapter 2 §7": "growth verdicts", "chapter 3 §1": "time per phase",
              "chapter 3 §6": "core masks", "chapter 4 §1": "native layouts, C2",
              "chapter 4 §3": "the heap inside a call", "chapter 5 §1": "create and bind once"}

#: sources the text must cite
SOURCES = ("airockchip/rknn_model_zoo#156", "Tab 4-1", "User Guide V2.3.0 §5.2.3", "User Guide V2.3.0 §8.1.2",
           "rapidocr-onnxruntime", "Apache-2.0", "examples/c/video_pipeline.c", "main_video.cc", "PPOCR-Det")

#: names that look like API names but are files, demos, repositories or environment variables
NOT_API = {"rknn_model_zoo", "rknn_api"}

_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)
_code = partial(ch.code, CHAPTER)


run = ch.printed_run(NOTEBOOK)


class TestTheCourseRules(ch.ExecutedChapterChecks):
    """Rules, header, section arc, wrong claims, RKNN names, assumptions, the board's calls, the
    lab's rules, the notebook's hygiene and budgets, and the run's outputs (tests/chapterhelpers.py)."""
    chapter, lab, lab_notebook = CHAPTER, 6, ROOT / "labs" / "lab06_video_pipeline.ipynb"
    rules, titles, objectives, starred = RULES, TITLES, OBJECTIVES, ("Choose",)
    wrong_claims, boxes_may_share_a_prompt = WRONG_CLAIMS, True      # §1: three boxes after one prompt
    not_api, invented = NOT_API, ("RKNN_FLAG_ZERO_COPY", "RKNN_TENSOR_NV12")
    shared_rules, sources = SHARED_RULES, r"simulated|source: "
    board_calls = ("pipeline.compare_modes(", "pipeline.scaling(", "pipeline.run(", "pipeline.steady_state(",
                   "pipeline.letterbox(", "pipeline.find_boxes(", "pipeline.int8_threshold(",
                   "rt.set_io_mem(", "rt.mem_sync(", "pipeline.inputs_set_copies(",
                   "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE")


# --------------------------------------------------------------------------- quoted lines, takeaways, links
def test_the_recipes_lines_are_quoted_as_published() -> None:
    published = "\n".join(re.findall(r"```text\n(.*?)```", _markdown(), flags=re.S))
    for line in AS_PUBLISHED:
        assert line in ch.flat(published), f"not quoted as published: {line!r}"


def test_every_figure_and_table_is_followed_by_its_takeaway() -> None:
    cells = _cells()
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not re.search(r"profile\.show\(|show_table\(|plt\.show\(\)", ch.source(cell)):
            continue
        after = next(ch.source(c) for c in cells[index + 1:] if c["cell_type"] == "markdown")
        assert re.match(r"What the (figure|table) shows: ", after), f"cell {index} has no takeaway after it"


def test_the_methods_of_earlier_chapters_are_linked_back() -> None:
    """Course style 15: chapter 6 reuses the methods of chapters 1-5 and says where each was taught."""
    text = ch.flat(_markdown())
    for link, what in LINKS_BACK.items():
        assert link in text.lower(), f"no link back to {link} ({what})"


def test_sources_are_cited() -> None:
    text = ch.flat(_markdown())
    for source in SOURCES:
        assert source in text, f"{source} is not cited"


def test_the_canonical_sentences_are_quoted_word_for_word() -> None:
    text = ch.flat(_markdown())
    for sentence in CANONICAL:
        assert sentence in text, f"not quoted word for word: {sentence[:60]!r}"
    assert "as Rockchip's demos do" not in ch.flat(ch.numbered_sections(_markdown())["7"]), \
        "never 'as Rockchip's demos do' about syncing"


def test_the_c_binds_once_syncs_both_ways_and_allocates_nothing_per_frame() -> None:
    blocks = ch.c_blocks(_markdown())
    loop = next(b for b in blocks if "for (int k = 0; k < n_frames" in b)
    for name in ("RKNN_QUERY_NATIVE_INPUT_ATTR", "RKNN_QUERY_NATIVE_OUTPUT_ATTR", "size_with_stride", "w_stride",
                 "dims[4]", "RKNN_TENSOR_UINT8", "RKNN_MEMORY_SYNC_TO_DEVICE", "RKNN_MEMORY_SYNC_FROM_DEVICE",
                 "rknn_destroy_mem("):
        assert name in loop, f"the pipeline's C lacks {name}"
    body = loop[loop.index("for (int k"):]
    body = body[:body.index("\n}") + 2]
    for per_frame in ("rknn_create_mem", "rknn_set_io_mem", "rknn_inputs_set", "rknn_outputs_get", "malloc"):
        assert per_frame not in body, f"the pipeline's loop calls {per_frame} in every frame"
    assert body.index("RKNN_MEMORY_SYNC_TO_DEVICE") < body.index("rknn_run(") < \
        body.index("RKNN_MEMORY_SYNC_FROM_DEVICE") < body.index("out_mem->virt_addr"), "sync in, run, sync out, then read"
    for block in blocks:
        ch.assert_gets_are_released(block)


def test_the_threshold_answer_gives_the_models_q() -> None:
    """§3's answer commits to the int8 value of the threshold 0.3: the model file's zp and scale, the
    same on every backend (the compiler's report)."""
    import math
    from rknnlab import models, pipeline
    out = models.load_report("ppocr_det", "rk3588").attrs("outputs", "native")[0]
    q = pipeline.int8_threshold(0.3, out["zp"], out["scale"])
    assert q == math.ceil(out["zp"] + 0.3 / out["scale"] - 1e-9)
    answer = ch.flat(ch.numbered_sections(_markdown())["3"])
    assert f"q = {q}" in answer, f"§3's answer does not commit to q = {q}"


# --------------------------------------------------------------------------- the run
def _printed_by(run: Dict[int, str], needle: str) -> str:
    found = [text for index, text in run.items() if needle in ch.source(_cells()[index])]
    assert found, f"no code cell calls {needle}"
    return found[0]


def test_the_chapter_runs_within_its_budget(run) -> None:
    """The course's budget is 60 s on the simulator; this shared test machine gets half as much again."""
    from notebook_runs import executed
    seconds = executed(NOTEBOOK).seconds
    assert seconds < 90, f"chapter 6 took {seconds:.0f} s on the simulator (budget 60 s)"


def test_inputs_set_copies(run) -> None:
    """§1: the array changed after rknn_inputs_set does not reach the run (while the control shows the output
    depends on the input), and the larger input takes longer."""
    text = _printed_by(run, "pipeline.inputs_set_copies(")
    rows = dict((m, (int(us.replace(",", "")), seen, control)) for m, us, seen, control in
                re.findall(r"^(mobilenet_v2|ppocr_det)\s+[\d,]+\s+([\d,]+)\s+(yes|no)\s+(yes|no)$", text, flags=re.M))
    assert set(rows) == {"mobilenet_v2", "ppocr_det"}, text
    assert all(seen == "no" and control == "yes" for _, seen, control in rows.values()), text
    assert rows["ppocr_det"][0] > rows["mobilenet_v2"][0], f"the copy grows with the bytes:\n{text}"
    assert '"change after call seen: no"' in ch.flat(ch.numbered_sections(_markdown())["1"])


def test_the_frame_sizes_are_the_answers(run) -> None:
    text = _printed_by(run, "pipeline.nv12_size(")
    for line in ("1280x720, height stride 720: NV12 1,382,400 B", "1920x1080, height stride 1080: NV12 3,110,400 B, "
                 "RGB888 6,220,800 B", "1920x1080, height stride 1088: NV12 3,133,440 B"):
        assert line in text, f"{line!r} not printed:\n{text}"
    answer = ch.flat(ch.numbered_sections(_markdown())["2"])
    assert "1,382,400 B" in answer and "3,110,400 B" in answer and "23,040 B" in answer


def test_the_printed_q_is_the_threshold(run) -> None:
    text = _printed_by(run, "pipeline.int8_threshold(")
    printed = re.search(r"threshold 0\.3 -> q = (-?\d+): ([\d,]+) pixels pass, (\d+) boxes", text)
    assert printed and int(printed.group(3)) > 0, f"the page frame must show text boxes:\n{text}"
    assert f"q = {printed.group(1)}" in ch.flat(ch.numbered_sections(_markdown())["3"])


def test_a_read_without_sync_is_stale_and_the_sync_fixes_it(run) -> None:
    """§7: the simulator plays the worst case (A60): every changed pixel read without a sync is frame A's;
    a board prints a smaller share, which the answer says."""
    text = _printed_by(run, "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE")
    stale = re.search(r"frame B read without a sync: (\d+)% of the ([\d,]+) changed pixels still show frame A's map",
                      text)
    assert stale and stale.group(1) == "100" and int(stale.group(2).replace(",", "")) > 1000, text
    assert "below 100 %" in ch.flat(ch.numbered_sections(_markdown())["7"]), "the answer says what a board shows"
    assert "after rknn_mem_sync(FROM_DEVICE) it differs from A's: True" in text, text


def test_the_int8_path_finds_the_fp32_boxes(run) -> None:
    """§3: on the page frames the int8 path finds the fp32 model's boxes; rknn-toolkit2's INT8 run too."""
    text = _printed_by(run, "pipeline.box_agreement(")
    rows = re.findall(r"\((\w+) of (\w+)\): int8 (\d+), fp32 (\d+), matched (\d+)$", text, flags=re.M)
    page = [r for r in rows if r[1] == "page"]
    assert page and all(int(r[4]) == int(r[3]) >= 3 for r in page), f"every page frame shows lines of text:\n{text}"
    toolkit = _printed_by(run, "pipeline.toolkit_agreement(")
    assert "INT8 simulation (x86), recorded" in toolkit
    assert re.search(r"^\s*page\s+(\d+)\s+\1\s+\1\s+1\s+1$", toolkit, flags=re.M), toolkit


def _ms(text: str, mode: str) -> Dict[str, float]:
    """One row of §4's table (pipeline.show_table: units in the headers, plain numbers) and the heap
    rise printed under it for that mode."""
    row = re.search(rf"^{mode}" + r"\s+([\d.]+)" * 7 + "$", text, flags=re.M)
    assert row, f"no {mode} row:\n{text}"
    heap = re.search(rf"^  {mode}\s+heap rise\s+([\d,]+) B;", text, flags=re.M)
    assert heap, f"no heap rise for {mode}:\n{text}"
    names = ("convert", "input", "run", "output", "post", "frame", "dma", "heap")
    return dict(zip(names, (float(g.replace(",", "")) for g in (*row.groups(), heap.group(1)))))


def test_zero_copy_saves_the_copies_not_the_run(run) -> None:
    """§4's answer: on the simulator the input and output stages shrink to tens of microseconds (its syncs
    are free, A11), rknn_run is the same, neither mode keeps heap memory past a frame, and zero-copy's DMA
    total is larger by its two mems (A10)."""
    text = _printed_by(run, "pipeline.compare_modes(")
    general, zero = _ms(text, "general"), _ms(text, "zero_copy")
    # relative to the general API's copies, which a loaded host slows alike (zero-copy's input stage took
    # 0.10 ms against 1.95 ms in a CI replica of Python 3.9's run)
    assert 0.1 < general["input"] and 0.1 < general["output"], text
    assert zero["input"] < min(0.25, general["input"] / 4) and zero["output"] < min(0.25, general["output"] / 3), text
    assert abs(zero["run"] - general["run"]) <= 0.25 * general["run"], "rknn_run does the same work in both modes"
    assert general["heap"] < 1024 and zero["heap"] < 1024, "neither mode allocates in a frame"
    from rknnlab import models
    report = models.load_report("ppocr_det", "rk3588")
    mems = sum(report.attrs(kind, "native")[0]["size_with_stride"] for kind in ("inputs", "outputs"))
    assert abs((zero["dma"] - general["dma"]) - mems / 2**20) < 0.02, "zero-copy adds its two mems"
    assert re.search(r"^zero_copy vs general: [\d.]+x the time per frame \(95% interval", text, flags=re.M), text
    assert "cannot tell apart" not in text, "the verdict says one thing"
    for mode in (general, zero):        # the frame column is each frame's total: at least its run and post
        assert mode["frame"] >= mode["run"] + mode["post"] - 0.05, text
        assert 0 < mode["convert"] < mode["frame"], "the table shows the conversion the frame includes"
    peaks = re.findall(r"^  (general|zero_copy)\s+heap rise\s+[\d,]+ B; peaks: convert\s+([\d,]+) B, post\s+([\d,]+) B,",
                       text, flags=re.M)
    assert len(peaks) == 2, text
    for _, convert, post in peaks:      # "far below one frame": Python's temporaries, no frame-sized buffer
        assert int(convert.replace(",", "")) < 691_200 / 4 and int(post.replace(",", "")) < 691_200 / 4, text


def test_workers_answer_holds_for_the_run(run) -> None:
    """§5: the table has every configuration and says the host's CPUs are shared; the answer's "about
    15 %" is the NPU time saved (RKNN_QUERY_PERF_RUN, independent of the host's load) by one run on
    three cores against one."""
    text = _printed_by(run, "pipeline.scaling(")
    configs = re.findall(r"^\s*(\d x [\w/]+)\s+[\d.]+\s+[\d.]+\s+\D", text, flags=re.M)
    assert configs == ["1 x CORE_0", "1 x 0_1_2", "2 x CORE_0/CORE_1", "3 x CORE_0/CORE_1/CORE_2", "3 x AUTO"], text
    assert "CPU cores" in text, "the host's CPU count is said"
    limits = re.findall(r"^\s*\d x [\w/]+\s+[\d.]+\s+[\d.]+\s+(.+?)\s+[\d.]+$", text, flags=re.M)
    assert len(limits) == 5 and all(re.fullmatch(r"one worker's frame|host CPUs \(\d+\)|NPU cores \(\d at once\)", l)
                                    for l in limits), text
    perf = dict(re.findall(r"^\s+(RKNN_NPU_CORE_0|RKNN_NPU_CORE_0_1_2)\s+([\d,]+) µs of NPU time$",
                           _printed_by(run, "RKNN_QUERY_PERF_RUN"), flags=re.M))
    one, three = (int(perf[k].replace(",", "")) for k in ("RKNN_NPU_CORE_0", "RKNN_NPU_CORE_0_1_2"))
    assert 0.8 < three / one < 0.97, f"three cores shorten the run by a small part: {one} us -> {three} us"
    section = ch.flat(ch.numbered_sections(_markdown())["5"])
    assert f"falls by about {round(100 * (1 - three / one))} %" in section, (one, three)
    assert "twice" not in section, "the answer promises no multiple: it says what bounds the rate"
    assert "the limit column names what sets it" in section and "A20" in section
    assert "can show neither this nor runs on several cores" in section, "§5 says what one NPU core cannot show"
    gantt = _printed_by(run, "plot.pipeline_gantt(")
    assert "the run of the table's row 3 x CORE_0/CORE_1/CORE_2" in gantt, gantt


def test_a_per_frame_allocation_shows_only_inside_the_frame(run) -> None:
    """§6's answer: every curve is flat, and the planted buffer shows as the heap's rise inside a frame."""
    text = _printed_by(run, "pipeline.steady_state(")
    verdicts = re.findall(r"^\s*(clean|letterbox_malloc)\s+(RSS|malloc heap in use|runtime DMA total)\s+(\S+)", text,
                          flags=re.M)
    # a busy host can make a live 300-frame series "cannot tell" (the answer says so); none may grow, and
    # the DMA total, which only the runtime moves, is flat
    assert len(verdicts) == 6 and all(v in ("flat", "cannot") for _, _, v in verdicts), text
    assert all(v == "flat" for _, series, v in verdicts if series == "runtime DMA total"), "the DMA totals are flat"
    assert '"cannot tell" when a busy PC makes a series noisy, even for the clean pipeline' in \
        ch.flat(ch.numbered_sections(_markdown())["6"])
    rises = dict(re.findall(r"^(clean|letterbox_malloc): the heap rises ([\d,]+) B inside a frame", text, flags=re.M))
    planted, clean = (int(rises[k].replace(",", "")) for k in ("letterbox_malloc", "clean"))
    assert 480 * 480 * 3 <= planted < 480 * 480 * 3 + 1024 and clean < 1024, text
    peaks = dict(re.findall(r"^(clean|letterbox_malloc): .*; tracemalloc peak ([\d,]+) B$", text, flags=re.M))
    assert int(peaks["clean"].replace(",", "")) < 691_200 / 4 <= 691_200 <= int(peaks["letterbox_malloc"].replace(",", "")), \
        "tracemalloc's peak sees the planted buffer; the clean pipeline stays far below a frame"
    assert "480 × 480 × 3 = 691,200 B" in ch.flat(ch.numbered_sections(_markdown())["6"])


def test_the_recorded_run_is_long_and_says_where_and_how(run) -> None:
    """§6: the recorded trace has at least 1,000 frames per variant, says where it was recorded and how
    to record it again; the clean pipeline's verdicts in it are flat."""
    text = _printed_by(run, "SteadyState.load(")
    frames = re.search(r"^recorded on (.+): ([\d,]+) frames per variant$", text, flags=re.M)
    assert frames and int(frames.group(2).replace(",", "")) >= 1000, text
    assert re.search(r"^source: simulated RK3588", text, flags=re.M), text
    assert "to record it again: python -m rknnlab.pipeline.steady" in text, text
    from rknnlab import pipeline
    from rknnlab.paths import data_dir
    trace = pipeline.SteadyState.load(data_dir() / "traces" / "ch06_steady_3000.json")
    assert all(trace.verdicts["clean"][s]["verdict"] == "flat" for s in ("rss", "heap", "dma")), trace.summary()


def test_the_syncs_are_priced_with_chapter_3s_model(run) -> None:
    """§4: the simulator's syncs are free (A11), so the chapter prints chapter 3's modeled board cost for the
    two mems; the output's (its whole native size) is the larger, as the takeaway says."""
    from rknnlab import profile
    text = _printed_by(run, "profile.sync_cost(")
    rows = re.findall(r"^\s+(input|output) mem, \w+\s+([\d,]+) B\s+([\d.]+) ms$", text, flags=re.M)
    assert [r[0] for r in rows] == ["input", "output"], text
    cost = {kind: (int(n.replace(",", "")), float(ms)) for kind, n, ms in rows}
    for nbytes, ms in cost.values():
        modeled = profile.sync_cost(nbytes=nbytes, modes=(1,))["modeled_us"].iloc[0] / 1000
        assert abs(ms - modeled) < 0.01, f"{nbytes:,} B: printed {ms} ms, model {modeled:.3f} ms"
    assert cost["output"][1] > 10 * cost["input"][1], text
    assert "MODELED" in text and "A11" in ch.flat(ch.numbered_sections(_markdown())["4"])


def test_the_modeled_run_is_set_beside_the_zoos_figure(run) -> None:
    """§4: the modeled run of ppocr_det (the timing law, A20) beside the model zoo's published one-core
    figure; the takeaway quotes the RK3588 numbers the run prints, and the law's own table agrees."""
    from rknnlab import profile
    from rknnlab.sim import modeled_run_ms
    text = _printed_by(run, "profile.sync_cost(")
    line = re.search(r"^one rknn_run on one core: modeled ([\d.]+) ms \(A20\), published ([\d.]+) ms "
                     r"\(RKNN model zoo, rk3588\): ([+-]\d+)%$", text, flags=re.M)
    assert line, text
    modeled, published, error = float(line.group(1)), float(line.group(2)), int(line.group(3))
    assert modeled == round(modeled_run_ms("ppocr_det", "rk3588"), 1) and published == round(1e3 / 50.7, 1)
    assert error == round(100 * profile.timing_check({("ppocr_det", "rk3588"): 50.7})["error"].iloc[0]) < 0
    section = ch.flat(ch.numbered_sections(_markdown())["4"])
    assert (f"on RK3588 the modeled run, about {round(modeled)} ms, is {-error} % shorter than the zoo's "
            f"{published} ms") in section
    assert "about 7 ms" not in ch.flat(_markdown())


def test_the_chapter_runs_on_a_one_core_soc_and_says_what_it_cannot_show() -> None:
    """The chapter executed on a simulated RK3568 (one NPU core, C2 = 8): it runs to the end, §5 sets no core
    mask and says the SoC has nothing to split, the table's configurations are that SoC's, the steady state
    runs the same SoC, and every output stays within the course's limits."""
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
    assert "simulated RK3568" in printed and "simulated RK3588 — rknnlab sim:" not in printed.split("recorded on")[0]
    assert re.findall(r"^(\d x not set)\s", printed, flags=re.M) == ["1 x not set", "2 x not set", "3 x not set"], printed
    assert "rk3568 has one NPU core: no run to split, no core to choose" in printed
    assert "the run of the table's row 3 x not set" in printed
    assert re.search(r"output \(1, \d+, 480, 480, 8\) NC1HWC2 int8", printed), "C2 is read from the attr: 8 here"
    assert re.search(r"frame B read without a sync: 100% of the [\d,]+ changed pixels", printed), printed
    for index, text in outputs.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue
        assert len(text.splitlines()) <= ch.MAX_OUTPUT_LINES, f"cell {index} prints {len(text.splitlines())} lines"
        assert all(len(line) <= 100 for line in text.splitlines()), f"cell {index} prints lines over 100 columns"


# --------------------------------------------------------------------------- RKNNLite (rknn-toolkit-lite2)
def test_every_section_with_c_says_what_an_rknnlite_user_does() -> None:
    """§1 and §3-§7 show C calls: each has a folded "With RKNNLite" box (no zero-copy, float32 outputs,
    the general API plus copies, one object per core, the #42 slope, no sync). Only the 2.5.0
    wheel's methods, keywords and constants are used."""
    sections = ch.numbered_sections(_markdown())
    for number in ("1", "3", "4", "5", "6", "7"):
        assert re.search(r"`{3,}\{admonition\} With RKNNLite(?::[^\n]*)?\n:class: dropdown\n", sections[number]), \
            f"§{number} has no folded 'With RKNNLite' box"
    text = _markdown() + "\n" + _code()
    ch.assert_rknnlite_names_are_the_wheels(text)
    for lacks in ("create_mem(", "set_io_mem(", "dup_context(", "mem_sync("):
        assert not re.search(rf"\blite\w*\.{re.escape(lacks)}", text), f"RKNNLite has no {lacks}"
    assert "immich-app/immich#15241" in sections["5"] and "airockchip/rknn-toolkit2#42" in sections["6"]


def test_the_rknnlite_byte_counts_are_the_models() -> None:
    """The boxes' bytes per copy of the input and per float32 output are the detector's plain attrs:
    n_elems of the input (uint8) and n_elems x 4 of the output (want_float = 1)."""
    from rknnlab import models
    report = models.load_report("ppocr_det", "rk3588")
    n_in = report.attrs("inputs", "plain")[0]["n_elems"]
    n_out = report.attrs("outputs", "plain")[0]["n_elems"]
    text = ch.flat(_markdown())
    assert f"480 × 480 × 3 = {n_in:,} B per copy" in text
    assert f"480 × 480 × 4 = {n_out * 4:,} B per frame" in text and f"a new {n_out * 4:,} B array" in text


def test_rknnlite_finds_the_same_boxes_from_a_float32_map(run) -> None:
    """§3's RKNNLite run: frame 30 through RKNNLite gives a float32 map of n_elems x 4 bytes and the
    int8 path's boxes, box for box, as the answer says."""
    text = _printed_by(run, "lite.inference(")
    out = re.search(r"RKNNLite, frame 30 \(simulated RK3588[^)]*\): output float32 \(1, 1, 480, 480\), ([\d,]+) B", text)
    assert out and int(out.group(1).replace(",", "")) == 480 * 480 * 4, text
    boxes = re.search(r"(\d+) boxes; the int8 path's (\d+), matched (\d+) \(IoU >= 0\.5\)", text)
    assert boxes and len(set(boxes.groups())) == 1 and boxes.group(1) != "0", text
    section = ch.flat(ch.numbered_sections(_markdown())["3"])
    assert "The same boxes: the threshold keeps the same pixels in both domains" in section
    assert "four times the plain int8 map" in section


def test_the_rknnlite_cell_is_guarded_and_its_log_wrapped(run) -> None:
    """Issue 18 review J1 and J4: the RKNNLite cell asks missing_wheel() before it makes the
    object, prints the wheel's W lines wrapped at 100 columns (not hidden), and no printed line of
    the chapter is wider than 100 columns."""
    cells = [c for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "RKNNLite()" in ch.source(c)]
    assert len(cells) == 1
    text = ch.source(cells[0])
    assert "why = missing_wheel()" in text and text.index("if why:") < text.index("RKNNLite()")
    assert "textwrap.fill(line, 100" in text and "(chapter 0 §2)" in text
    printed = _printed_by(run, "lite.inference(")
    assert "W Query dynamic range failed." in printed and "please ignore the above warning message." in printed
    # every printed line within 100 columns: ExecutedChapterChecks


def test_the_rknnlite_boxes_count_the_copies_as_chapter_3_does_and_say_what_a_board_times() -> None:
    """Issue 18 review E14 and J8: per frame, two copies of the input and two of the float32
    output (one with reuse_outputs on the simulator, A67); on a board run("lite") times only the
    whole inference() call; §3's float32 box is the code, not a repeat of the run (J14)."""
    text = ch.flat(_markdown())
    assert ("two of the input, and two of the float32 output, into the class's buffer and then into a new "
            "921,600 B array (A66). With `reuse_outputs=True` the second goes") in text
    assert "one float32 output (A66)" not in text
    assert "times its calls on this backend" not in text
    assert "on a board, only the whole `inference()` call, because the wheel calls librknnrt itself" in text
    box = re.search(r"````\{admonition\} With RKNNLite: float32 outputs\n:class: dropdown\n(.*?)\n````", _markdown(), re.S)
    assert box and box.group(1).startswith("```python") and box.group(1).rstrip().endswith("```"), box and box.group(1)


def test_on_a_board_without_the_wheel_the_rknnlite_cell_prints_why_and_skips() -> None:
    """Issue 18 review J4, run as a board without rknn-toolkit-lite2 would: the cell prints
    missing_wheel()'s line and makes no RKNNLite object, instead of raising."""
    import textwrap
    cell = next(ch.source(c) for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and "RKNNLite()" in ch.source(c))
    ch.assert_rknnlite_cell_skips_without_the_wheel(cell, {"textwrap": textwrap, "MODEL": "x.rknn", "SOC": "rk3588",
                                                           "SOURCE": "board"})
