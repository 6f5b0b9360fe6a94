"""Chapter 3 keeps the course's shared rules, its sources and its own bookkeeping straight.

Static checks of chapters/03_bottlenecks.ipynb (its C is compiled by tests/test_notebook_c.py):

- the chapter's rules appear word for word in their section and in the key points;
- the header asks 2-4 questions and ties each objective (one bold verb) to a Lab 3 exercise;
- every numbered section asks the reader to predict, with a folded answer after it;
- every wrong claim is shown as published (a ```text fence) after a prompt, in one container;
- every RKNN name outside a wrong claim exists in the course's header (lib/rknnlab/c/rknn_api.h);
- the C shows the profiling flag, both perf queries and a monotonic clock around each phase;
- the published board figures are quoted with their source; the timing check's published table
  holds the facts sheet's numbers;
- the simulator's assumptions the text names are the ones its last cell lists, and exist;
- the notebook defines no functions, keeps code cells short, has no placeholder text, stays within
  the prose budget, and is saved without outputs.

The executed checks run the chapter on the simulator (once per session, tests/notebook_runs.py):
every output is short, every result names its backend, and the numbers the text quotes from the run
are the run's.
"""
from __future__ import annotations

import math
import re
from functools import partial
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

import chapterhelpers as ch
from chapterhelpers import flat as _flat
from chapterhelpers import numbered_sections as _numbered_sections
from chapterhelpers import sentences as _sentences
from chapterhelpers import source as _source
from chapterhelpers import unfolded_prose as _unfolded_prose

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "chapters/03_bottlenecks.ipynb"
CHAPTER = ROOT / NOTEBOOK

#: the chapter's rules, stated in their section ("**The rule.**") and in the key points
RULES = {
    "1": "Time every phase of a frame, not only `rknn_run`. The copies and conversions around it are CPU "
         "work whose share differs between setups: measure it, do not expect it.",
    "2": "A layer whose DDR cycles exceed its NPU cycles is DDR-bound: it waits for memory, so fewer bytes "
         "help it more than faster arithmetic.",
    "3": "A frame reads its weights once and its activations in proportion to its pixels. Its bytes read "
         "over the peak DDR bandwidth give a lower bound for its run time; any other rate gives an estimate.",
    "4": "On the CPU, bytes and conversions cost time; splitting a copy into pieces matters only when the "
         "pieces are tiny. Each API call has its own fixed cost: call `rknn_inputs_set` once per frame.",
    "5": "Allocate the buffers of a frame once: a fragmented heap keeps memory, and the NPU needs no "
         "contiguous memory on RK3588.",
    "6": "Only Conv, depthwise Conv, Add, Concat and ReLU-family layers are split over cores; the rest run on "
         "core 0. A Conv fused with SiLU was not, in one public trace (A17). Measure the speedup of each model: a "
         "small network can get slower.",
    "7": "The simulator's NPU times come from a law fitted on published figures of seven networks. For a "
         "network unlike them it can be off by half: time a board for real numbers.",
}

#: the section titles (the old §4 "CPU-side costs and fragmentation" is two sections, one idea each)
TITLES = {"1": "Where a frame's time goes", "2": "Inside `rknn_run`: the per-layer profile",
          "3": "Bytes per frame and DDR bandwidth", "4": "CPU-side costs", "5": "Heap fragmentation",
          "6": "More cores", "7": "How close the simulator's timing is"}

#: the objectives, one verb each, with the Lab 3 exercises that assess them (CH3 plan)
OBJECTIVES = {"Find": [1], "Predict": [2, 5], "Spot": [3], "Choose": [4]}

#: the wrong claims of the widely copied text, each after its prompt (CH3 plan)
WRONG_CLAIMS = ("a 45 ms frame", "inference time grows non-linearly", "copies go through dma",
                "fragmentation makes a large contiguous")

#: published board figures the text quotes, each with its source next to it
PUBLISHED = {
    "airockchip/rknn_model_zoo#167": ("yolov5s_relu at 640×640: 14.85 ms", "17.49 ms run and 1.23 ms",
                                      "1.80, 2.65 and 0.03 ms"),
    "airockchip/librga#69": ("0.75 ms to 15 ms", "0.75 ms `inputs_set`, 20 ms run and 1.3 ms", "1.2 ms",
                             "2.3 ms"),
    "airockchip/rknn-toolkit2#179": (),
    "airockchip/rknn-toolkit2#129": (),
    "User Guide V2.3.0 §4.1.3.2": ("10,563 KB",),
    "Push Yolov8n Pre-train Model To rk3588 (4)": ("8.84 %", "3.75 %", "2.46 %", "1.56–1.65"),
}

#: the RKNN model zoo's single-core FPS the timing law is fitted on (facts sheet §5 and issue 17's
#: table: seven networks on rk3588, rk3576, rk3566/68 and rk3562)
CALIBRATION_FPS = {
    ("mobilenet_v2", "rk3588"): 450.7, ("mobilenet_v2", "rk3576"): 467.0,
    ("mobilenet_v2", "rk3568"): 180.7, ("mobilenet_v2", "rk3562"): 281.3,
    ("yolov5s_relu", "rk3588"): 66.1, ("yolov5s_relu", "rk3576"): 65.0,
    ("yolov5s_relu", "rk3568"): 25.5, ("yolov5s_relu", "rk3562"): 33.2,
    ("yolov6n", "rk3588"): 106.4, ("yolov6n", "rk3576"): 109.1, ("yolov6n", "rk3568"): 48.8, ("yolov6n", "rk3562"): 56.4,
    ("yolov8n", "rk3588"): 73.5, ("yolov8n", "rk3576"): 90.2, ("yolov8n", "rk3568"): 34.0, ("yolov8n", "rk3562"): 40.9,
    ("yolox_s", "rk3588"): 37.1, ("yolox_s", "rk3576"): 41.5, ("yolox_s", "rk3568"): 15.2, ("yolox_s", "rk3562"): 18.3,
    ("retinaface_mobile320", "rk3588"): 227.2, ("retinaface_mobile320", "rk3576"): 470.5,
    ("retinaface_mobile320", "rk3568"): 156.4, ("retinaface_mobile320", "rk3562"): 300.8,
    ("deeplabv3plus_mobilenet_v2", "rk3588"): 34.0, ("deeplabv3plus_mobilenet_v2", "rk3576"): 39.4,
    ("deeplabv3plus_mobilenet_v2", "rk3568"): 10.9, ("deeplabv3plus_mobilenet_v2", "rk3562"): 21.4}
#: the zoo README's rows that only judge the law: yolov5s (SiLU), yolov5n, yolov5m and ppocrv4_det
JUDGE_FPS = {("yolov5s", "rk3588"): 48.4, ("yolov5s", "rk3576"): 57.5,
             ("yolov5s", "rk3568"): 19.3, ("yolov5s", "rk3562"): 23.6,
             ("yolov5n", "rk3588"): 82.5, ("yolov5m", "rk3588"): 20.9,
             ("ppocr_det", "rk3588"): 50.7, ("ppocr_det", "rk3576"): 64.3,
             ("ppocr_det", "rk3568"): 22.1, ("ppocr_det", "rk3562"): 28.0}
ZOO_FPS = {**CALIBRATION_FPS, **JUDGE_FPS}
TIMING_SOCS = ("rk3588", "rk3576", "rk3568", "rk3562")             # §7's columns

#: the course's shared canonical sentences (DECISIONS.md) a lab may quote beside this chapter's rules
SHARED_RULES = {
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on "
    "rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; "
    "never assume it.",
    "A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, attr.size "
    "bytes with want_float = 0. Reallocate only when it is too small; a larger buffer is fine if "
    "rknn_output.size gives its real capacity.",
    "Reuse means no allocation per call. Flat memory only shows there is no leak.",
}

#: names that look like API names but are files, repositories or modules
NOT_API = {"rknn_model_zoo", "rknn_benchmark"}

_cells = partial(ch.cells, CHAPTER)
_markdown = partial(ch.markdown, CHAPTER)
_code = partial(ch.code, CHAPTER)


run = ch.printed_run(NOTEBOOK)


class TestTheCourseRules(ch.ExecutedChapterChecks):
    """The checks every chapter passes (tests/chapterhelpers.py), with chapter 3's data."""
    chapter = CHAPTER
    lab = 3
    lab_notebook = ROOT / "labs" / "lab03_bottlenecks.ipynb"
    rules, shared_rules = RULES, SHARED_RULES
    titles, objectives, wrong_claims = TITLES, OBJECTIVES, WRONG_CLAIMS
    not_api = NOT_API
    invented = ("RKNN_FLAG_ZERO_COPY", "rknn_set_mem_strategy", "RKNN_TENSOR_NV12")
    sources = r"simulated|published|on this machine|compiler report"
    board_calls = ("abi.RKNN_FLAG_COLLECT_PERF_MASK", "abi.RKNN_QUERY_PERF_RUN", "profile.perf_detail(rt, ctx)",
                   "profile.perf_table(rt, ctx)", "profile.phases(", "profile.multicore(",
                   "profile.fragmentation(", "modeled_run_ms")


def test_the_prerequisites_give_the_later_chapters_fact() -> None:
    header = _source(_cells()[0])
    prerequisites = _flat(header[header.index("**Prerequisites:**"):header.index("**Glossary:**")])
    assert "chapter 4, which comes later" in prerequisites and "want_float = 1" in prerequisites
    assert "chapter 4 §" not in prerequisites


# --------------------------------------------------------------------------- sources and figures
def test_published_board_figures_come_with_their_source() -> None:
    text = _flat(_markdown())
    for source, figures in PUBLISHED.items():
        assert source in text, f"{source} is not cited"
        for figure in figures:
            assert figure in text, f"{figure} ({source}) is not quoted"
    assert "a user's measurement" in text, "the phase split is a user's measurement, not Rockchip's"
    assert "neither states `want_float`" in text, "the published splits do not say which want_float they used"
    assert "YOLOv5s at 640×640 gives 14.85" not in text and "yolov5s 640x640 published" not in text


def test_the_per_layer_disagreements_are_taught_not_settled() -> None:
    text = _flat(_markdown())
    assert '"read/written"' in text and "bytes *read*" in text, "RW(KB): the docs' words and the numbers'"
    assert ("The list does not say what happens to a Conv fused with an activation outside it. A board trace "
            "shows that `ConvExSwish` (Conv fused with SiLU) stays on core 0.") in text
    assert "The list says Conv; the profile says" not in text, "the trace fills a gap in the list; it does not contradict it"
    assert "API reference (V2.3.2 p.21)" in text and "User Guide (V2.3.0 §5.3)" in text


def test_the_bandwidth_words_keep_estimate_and_lower_bound_apart() -> None:
    """11.8 is bytes per DDR cycle in a board trace; a rate derived from it gives an estimate, and
    only the (derived) peak gives a lower bound. "Floor" is chapter 0's glossary term (the
    harness's floor), so chapter 3 does not use the word."""
    section = _flat(_numbered_sections(_markdown())["3"])
    assert "about 11.8 bytes per DDR cycle" in section and "an estimate of the read time, not a lower bound" in section
    assert "derived, not measured" in section and "peak bandwidth give a lower bound" in section
    assert "11.8 GB/s is what the NPU got" not in section
    assert not re.search(r"\bfloors?\b", _flat(_markdown()), flags=re.I), "'floor' is chapter 0's term"


def test_copies_cost_by_the_byte_but_each_call_has_its_own_cost() -> None:
    text = _flat(_markdown())
    assert ("Memcpy pieces cost by the byte: 3 pieces cost as much as one. But each API call has its own fixed "
            "cost, so call `rknn_inputs_set` once per frame.") in text


def test_every_figure_and_table_is_followed_by_its_takeaway() -> None:
    """Course style 5: a takeaway sentence right after each figure or printed table (before any
    Answer box), and no 'table above' where the section prints no table."""
    cells = _cells()
    for index, cell in enumerate(cells):
        src = _source(cell)
        if cell["cell_type"] != "code" or not re.search(r"plt\.show\(\)|to_string\(|profile\.show\(", src):
            continue
        after = next(_source(c) for c in cells[index + 1:] if c["cell_type"] == "markdown")
        assert re.match(r"What the (figure|table) shows: ", after), f"cell {index} has no takeaway after it"
    assert "From the table above" not in _markdown()


def test_the_published_fps_are_the_facts_sheets_and_none_is_left_out() -> None:
    """§7 compares the law with every published figure: the library's table holds exactly the
    calibration table's and the zoo README's judge rows, marks the fitted ones, and the chapter
    prints every row of profile.timing_check() (checked on the run below)."""
    from rknnlab import profile
    assert profile.published_fps() == ZOO_FPS
    code = _code()
    assert "profile.timing_check()" in code, "§7 must compare against the library's whole published table"
    fitted = profile.timing_check().set_index(["model", "soc"])["calibration_point"]
    assert set(fitted.index[fitted]) == set(CALIBRATION_FPS)


# --------------------------------------------------------------------------- names and C
def test_c_blocks_profile_and_time_each_phase() -> None:
    blocks = ch.c_blocks(_markdown())
    assert len(blocks) >= 3
    calls = " ".join(blocks)
    for name in ("RKNN_FLAG_COLLECT_PERF_MASK", "RKNN_QUERY_PERF_DETAIL", "RKNN_QUERY_PERF_RUN",
                 "clock_gettime(CLOCK_MONOTONIC", "rknn_set_core_mask", "RKNN_NPU_CORE_0_1_2"):
        assert name in calls, f"no C block shows {name}"
    timed = next(b for b in blocks if "clock_gettime" in b)
    calls_in_order = re.findall(r"(now_ms\(\)|rknn_\w+\()", timed[timed.index("time_one_frame"):])
    assert calls_in_order == ["now_ms()", "rknn_inputs_set(", "now_ms()", "rknn_run(", "now_ms()",
                              "rknn_outputs_get(", "now_ms()", "rknn_outputs_release(", "now_ms()"], calls_in_order
    for block in blocks:
        ch.assert_gets_are_released(block)


# --------------------------------------------------------------------------- the prose measures
def test_the_prose_measures_can_fail() -> None:
    long = " ".join(["word"] * 31) + "."
    text = (f"Seen one. {long}\n```{{admonition}} Answer\n:class: dropdown\nhidden words here\n```\n"
            "```c\nint x;\n```\n| a | table |\n")
    assert long in _sentences(text)
    assert "hidden" not in _unfolded_prose(text) and "int" not in _unfolded_prose(text)
    assert "table" not in _unfolded_prose(text)


def _bound_counts(soc: str) -> Dict[str, object]:
    """mobilenet_v2's layers by kind in ``soc``'s compiler report, and its profile ID with the
    most cycles (compiler layer N is profile ID N+1)."""
    from rknnlab import models
    layers = models.load_report("mobilenet_v2", soc).layers
    ddr = sum(l["cycles_ddr"] > l["cycles_npu"] for l in layers)
    none = sum(l["cycles_total"] == 0 for l in layers)
    slowest = max(range(len(layers)), key=lambda i: layers[i]["cycles_total"])
    return {"ddr": ddr, "compute": len(layers) - ddr - none, "layers": len(layers),
            "slowest_id": layers[slowest]["id"] + 1, "slowest": layers[slowest]}


def test_the_per_layer_answer_names_each_socs_counts_from_its_report() -> None:
    """§2's answer depends on the SoC: mostly compute-bound on RK3588, mostly DDR-bound elsewhere,
    and another slowest layer on rk3576. Every number it gives is recomputed from the reports."""
    from rknnlab import models
    text = _flat(_markdown())
    socs = {soc: _bound_counts(soc) for soc in models.model_socs("mobilenet_v2")}
    rk3588 = socs.pop("rk3588")
    assert rk3588["compute"] > rk3588["ddr"]
    assert f"RK3588 has {rk3588['compute']} compute-bound layers and {rk3588['ddr']} DDR-bound" in text
    assert all(c["ddr"] > c["compute"] for c in socs.values()), "'The other SoCs are the other way round'"
    assert (f"{socs['rk3576']['ddr']} of {socs['rk3576']['layers']} layers are DDR-bound on rk3576, "
            f"{socs['rk3568']['ddr']} on rk3568 (and rk3566) and {socs['rk3562']['ddr']} on rk3562") in text
    slow = rk3588["slowest"]
    assert rk3588["slowest_id"] == 5 and slow["input_shapes"][0] == [1, 16, 112, 112]
    assert slow["input_shapes"][1][:2] == [96, 16] and slow["input_shapes"][1][2:] == [1, 1]
    assert "a 1×1 convolution at 112×112 that expands 16 channels to 96 (ID 5 in the figure)" in text
    other = socs["rk3576"]["slowest"]
    assert socs["rk3576"]["slowest_id"] == 6 and other["input_shapes"][1][:1] == [1]      # depthwise 3x3
    assert other["input_shapes"][0][2:] == [112, 112] and "On rk3576 that depthwise convolution (ID 6)" in text
    assert socs["rk3568"]["slowest_id"] == socs["rk3562"]["slowest_id"] == rk3588["slowest_id"] == 5
    assert "on rk3568 and rk3562, ID 5, as on RK3588" in text
    assert "Most layers are compute-bound" not in text


def test_the_chapter_runs_on_a_one_core_soc_and_says_what_it_finds() -> None:
    """The chapter executed on a simulated RK3568 (one NPU core, C2 = 8): §2 prints that SoC's
    counts from its own profile (the ones the answer gives), and §6 says nothing is split instead
    of predicting a 3-core speedup."""
    import os
    from unittest import mock
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(CHAPTER), as_version=4)
    env = {"RKNNLAB_BACKEND": "sim", "RKNNLAB_SIM_SOC": "rk3568"}
    with mock.patch.dict(os.environ, env):
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(CHAPTER.parent)}}).execute()
    printed = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                        for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "simulated RK3568" in printed
    bound = _bound_counts("rk3568")
    counts = re.search(r"DDR-bound (\d+), compute-bound (\d+), no cycles (\d+)", printed)
    assert counts and (int(counts.group(1)), int(counts.group(2))) == (bound["ddr"], bound["compute"])
    assert int(counts.group(1)) > int(counts.group(2))
    assert f"the most cycles: ID {bound['slowest_id']}, " in printed
    assert "rk3568 has one NPU core: nothing to split" in printed
    assert "nothing is split, the speedup is 1" in printed and "on 3 cores" not in printed


# --------------------------------------------------------------------------- the run
def _timing_rows(printed: str):
    """§7's printed grid, {(model, soc): (error in the fit, error left out)} in %, and its
    not-fitted rows, {(model, soc): error} in %."""
    grid, judged = {}, {}
    cell = r"\s+([+-][\d.]+)% /\s*([+-][\d.]+)%"
    for line in printed.splitlines():
        row = re.match(r"^(\w+)" + cell * len(TIMING_SOCS) + r"$", line)
        if row:
            values = [float(v) for v in row.groups()[1:]]
            for i, soc in enumerate(TIMING_SOCS):
                grid[(row.group(1), soc)] = (values[2 * i], values[2 * i + 1])
        elif line.startswith("not fitted: "):
            model = line.split()[2]
            judged.update({(model, soc): float(e) for soc, e in re.findall(r"(rk\d+) ([+-][\d.]+)%", line)})
    return grid, judged


def _whole(percent: float) -> int:
    """A printed percentage rounded to a whole number the way a reader does (half away from 0)."""
    return int(math.copysign(math.floor(abs(percent) + 0.5), percent))


def _depthwise_share(model: str) -> float:
    """The share of a model's RK3588 compiler cycles in depthwise convolutions (the timing law's split)."""
    from rknnlab import models
    from rknnlab.sim import timing_law
    f = timing_law.features(models.load_report(model, "rk3588").layers)
    return f["depthwise"] / (f["conv"] + f["silu"] + f["depthwise"])


def test_numbers_quoted_in_the_text_come_from_the_run(run) -> None:
    text, everything = _flat(_markdown()), "\n".join(run.values())
    timing = next(t for t in run.values() if "law fitted on all 7 / on the other 6" in t)
    grid, judged = _timing_rows(timing)
    assert set(grid) == set(CALIBRATION_FPS) and set(judged) == set(JUDGE_FPS), "§7 must print every published row"
    assert "timing law (A20) vs published FPS" in timing
    fit_max = max(abs(f) for f, _ in grid.values())
    assert f"Every fitted row is within about {_whole(fit_max)} %" in text and fit_max < 10, fit_max
    # the networks built on depthwise convolutions: a third of their cycles; the detectors: almost none
    depthwise = {m for m, _ in CALIBRATION_FPS if _depthwise_share(m) > 0.2}
    assert depthwise == {"mobilenet_v2", "retinaface_mobile320", "deeplabv3plus_mobilenet_v2"}
    assert all(_depthwise_share(m) < 0.01 for m, _ in CALIBRATION_FPS if m not in depthwise)
    detectors = [loo for (m, _), (_, loo) in grid.items() if m not in depthwise]
    assert f"the four detectors stay within {math.ceil(max(abs(e) for e in detectors))} %" in text, detectors
    loo = {m: [grid[(m, soc)][1] for soc in TIMING_SOCS] for m in depthwise}
    assert all(max(abs(e) for e in errors) > 20 for errors in loo.values()), "the three fail the test"
    deeplab = loo["deeplabv3plus_mobilenet_v2"]
    assert max(deeplab) < 0 and f"DeepLab misses by −{-_whole(max(deeplab))} % to −{-_whole(min(deeplab))} %" in text
    assert f"MobileNetV2 by up to +{_whole(max(loo['mobilenet_v2']))} %" in text
    assert f"RetinaFace by up to −{-_whole(min(loo['retinaface_mobile320']))} %" in text
    assert abs(min(loo["retinaface_mobile320"])) > max(loo["retinaface_mobile320"])
    silu = [judged[("yolov5s", soc)] for soc in TIMING_SOCS]
    assert f"The law predicts times {_whole(min(silu))} % to {_whole(max(silu))} % too long for YOLOv5s with SiLU" in text, silu
    assert f"and {_whole(judged[('yolov5n', 'rk3588')])} % for yolov5n on RK3588" in text
    assert judged[("yolov5m", "rk3588")] > 25 and "is more than 25 % too slow" in text
    ocr = [-_whole(judged[("ppocr_det", soc)]) for soc in TIMING_SOCS]
    assert "ppocr_det is −{} % on RK3588 and −{} % on rk3576, but only −{} % and −{} % on rk3568".format(*ocr) in text
    assert "off by half" in RULES["7"] and max(abs(e) for _, e in grid.values()) > 45
    # the reasons the answer gives are facts of the compiler reports and of the fitted law
    from rknnlab import models
    from rknnlab.sim import timing_law
    kinds = {soc: [timing_law.layer_kind(l) for l in models.load_report("retinaface_mobile320", soc).layers]
             for soc in ("rk3568", "rk3588")}
    others = [timing_law.layer_kind(l) for m, s in CALIBRATION_FPS if m != "retinaface_mobile320"
              for l in models.load_report(m, s).layers]
    assert kinds["rk3568"].count("cpu") == 11 > others.count("cpu") and "hands 11 layers to the CPU on rk3568" in text
    concat = max(l["rw_kb"] for l in models.load_report("retinaface_mobile320", "rk3588").layers
                 if timing_law.layer_kind(l) == "zero")
    assert f"a Concat that moves {concat:,.0f} KB with 0 cycles" in text
    ocr = models.load_report("ppocr_det", "rk3588").layers
    zero = sum(timing_law.layer_kind(l) == "zero" for l in ocr)
    hardswish = sum(l["op"] == "ConvHardSwish" for l in ocr)
    assert f"{zero} layers with 0 cycles" in text and f"{hardswish} Convs fused with HardSwish" in text
    assert {timing_law.layer_kind(l) for l in ocr if l["op"] == "ConvHardSwish"} <= {"conv", "depthwise"}
    assert "which get no factor of their own, unlike SiLU" in text
    rk3576, rk3588 = (timing_law.law_for(s).zero_cycle_bytes_per_s for s in ("rk3576", "rk3588"))
    assert rk3576 > 10 * rk3588 and "On rk3576 the fit made 0-cycle layers almost free" in text
    assert max(abs(e) for e in judged.values()) > 45
    cores = next(t for t in run.values() if "3 cores against one" in t)
    split = re.search(r"^\s*yolov5s\s+([\d.]+)%", cores, flags=re.M)
    assert split and 100 - round(float(split.group(1))) == 97 and "97 % of its cycles stay on core 0" in text
    small = re.search(r"^\s*digits_cnn\s+[\d.]+%\s+[\d.]+ ms\s+[\d.]+x\s+[\w ]+?\s+([\d.]+)x$", cores, flags=re.M)
    assert small and round(1 / float(small.group(1)) - 1, 1) == 0.2 and "slower, by a fifth on RK3588" in text, cores
    counts = re.search(r"DDR-bound (\d+), compute-bound (\d+), no cycles (\d+)", everything)
    bound = _bound_counts("rk3588")
    assert counts and (int(counts.group(1)), int(counts.group(2))) == (bound["ddr"], bound["compute"])
    assert int(counts.group(3)) == 3 and "Three rows have no cycles" in text
    assert re.search(r"the most cycles: ID 5, ConvClip \(1, 16, 112, 112\)", everything)


def test_the_phase_answer_claims_nothing_this_pc_decides(run) -> None:
    """The CPU phases' share depends on the PC: the text points to the printed share and states
    no threshold; the run prints it for yolov5s and yolov5s_relu at 640x640."""
    text, everything = _flat(_markdown()), "\n".join(run.values())
    for model in ("yolov5s", "yolov5s_relu"):
        assert re.search(rf"^\s*{model}\s+from rknn_run alone .*CPU phases: \d+% of the frame", everything, flags=re.M)
    assert "more than half" not in text and "the cell above prints it for this run" in text
    mobilenet = re.search(r"^\s*mobilenet_v2\s+from rknn_run alone .*CPU phases: (\d+)% of the frame", everything,
                          flags=re.M)
    assert mobilenet and int(mobilenet.group(1)) < 50 and "For MobileNetV2 the run is the largest phase" in text
    assert "yolov5s_relu" in _code().split("PHASE_MODELS = ", 1)[1].split("]", 1)[0], \
        "§1 times yolov5s_relu at 640x640, the network of the published split"


def test_the_outputs_get_explanation_matches_the_model_and_the_library() -> None:
    """§1 says the simulated outputs_get writes 8.6 MB of new memory per frame (is_prealloc = 0):
    the float32 outputs of yolov5s at 640x640, and how profile.phases gets them."""
    import inspect
    from rknnlab import models
    from rknnlab.profile import phase_timing
    report = models.load_report("yolov5s", "rk3588")
    n_elems = sum(int(np.prod(a["dims"])) for a in report.attrs("outputs", "plain"))
    assert f"{n_elems * 4 / 1e6:.1f} MB of new memory each frame" in _flat(_markdown())
    assert "is_prealloc=0" in inspect.getsource(phase_timing._one_frame)


def test_the_worked_examples_show_what_they_claim(run) -> None:
    """§3's worked layer is numbered both ways and has enough output channels for the ~8 B each to
    show; its ratio of run times comes from the timing law, beside §1's wall times."""
    everything = "\n".join(run.values())
    head = re.search(r"compiler layer (\d+) \(profile ID (\d+)\)", everything)
    assert head and int(head.group(2)) == int(head.group(1)) + 1
    kb = re.search(r"= ([\d.]+) KB \(([\d.]+) KB without the 8 B per channel\)\s+RW\(KB\) in the RK3588 compiler "
                   r"report: ([\d.]+)", everything)
    with_them, without, report = (float(g) for g in kb.groups())
    assert abs(with_them - report) / report < 0.01 < abs(without - report) / report, kb.groups()
    assert re.search(r"rknn_run \(timing law, A20\)\s+x 3\.\d\d", everything)
    fixed = re.search(r"the law's fixed cost per run: ([\d.]+) ms of ([\d.]+) ms", everything)
    from rknnlab.sim import timing_law
    assert fixed and float(fixed.group(1)) == round(timing_law.law_for("rk3588").run_s * 1e3, 2)
    assert "on RK3588 the printed cost is a tiny share of the run" in _flat(_markdown())
    assert float(fixed.group(1)) < 0.01 * float(fixed.group(2))
    assert "0.59 ms" not in _flat(_markdown())


def test_the_sizes_the_text_gives_are_the_librarys_defaults() -> None:
    """§4 names the fragmentation patterns' sizes and the head it converts: the library's defaults."""
    import inspect
    from rknnlab import profile
    text = _flat(_markdown())
    params = inspect.signature(profile.fragmentation).parameters
    assert params["small_max"].default == 4096 and params["keep_every"].default == 64
    assert params["large_size"].default == 256 * 1024
    assert inspect.getmodule(profile.fragmentation).MMAP_THRESHOLD == 128 * 1024
    doc = _flat(profile.fragmentation.__doc__)
    assert "default 20,000 small ones" in doc and "200 large ones" in doc
    assert "20,000 blocks of up to 4 KiB, then free all but every 64th" in text
    assert "200 blocks of 256 KiB, above the mmap threshold (128 KiB)" in text
    assert inspect.signature(profile.layout_cost).parameters["shape"].default == (1, 80, 80, 255)
    assert "1.6 million values" in text and 80 * 80 * 255 == 1_632_000


# --------------------------------------------------------------------------- the RKNNLite path (issue 18)
def _lite_boxes(markdown: str):
    """The folded "With RKNNLite" boxes of each numbered section: number -> their texts."""
    boxes = {}
    for number, body in _numbered_sections(markdown).items():
        found = re.findall(r"(`{3,})\{admonition\} With RKNNLite[^\n]*\n:class: dropdown\n(.*?)\n\1(?:\n|$)", body, flags=re.S)
        boxes[number] = [text for _, text in found]
    return boxes


def test_each_c_call_has_its_rknnlite_box() -> None:
    """§1 (the phases), §2 (the perf queries) and §6 (the core mask) show C: each says what an
    RKNNLite user does instead, in a folded box titled "With RKNNLite"."""
    boxes = _lite_boxes(_markdown())
    for number in ("1", "2", "6"):
        assert boxes[number], f"§{number} shows C and has no folded With RKNNLite box"
    copies = _flat(" ".join(boxes["4"]))
    assert "transposed on every call" in copies and "(A68)" in copies, "§4 names the NCHW transpose"
    assert "lite.inference(inputs=[frame])" in boxes["1"][0] and "float32" in boxes["1"][0]
    perf = _flat(boxes["2"][0])
    assert "RKNNLite cannot do this" in perf and "no query method" in perf and "no flags argument" in perf
    cores = _flat(boxes["6"][0])
    assert "init_runtime(core_mask=RKNNLite.NPU_CORE_0_1_2)" in cores and "(A69)" in cores
    assert ("the wheel prints a warning that `core_mask` is only supported by RK3576 / RK3588; the simulator then "
            "ignores the mask (A69). What a board returns then is not public.") in cores
    assert "With a CLIP (ViT) model, a user found that three RKNNLite instances tripled the memory" in cores
    assert "95/15/15 %" in cores and "immich-app/immich#15241" in cores and "no `dup_context`" in cores


def test_the_rknnlite_code_uses_only_what_the_class_has() -> None:
    """Every method and constant the chapter's RKNNLite code names exists on the class (the
    2.5.0 interface), and the constants the text gives have the C values."""
    from rknnlab.lite import RKNNLite
    text = _markdown() + "\n" + _code()
    methods = set(re.findall(r"\blite\.(\w+)\(", text))
    assert methods >= {"inference", "load_rknn", "init_runtime"}
    for name in methods | set(re.findall(r"RKNNLite\.(\w+)", text)):
        assert hasattr(RKNNLite, name), f"RKNNLite has no {name}"
    assert "perf" not in " ".join(methods).lower() and "query" not in methods
    box = _flat(_lite_boxes(_markdown())["6"][0])
    for name, value in re.findall(r"`(NPU_CORE_\w+)` (\d+)", box):
        assert getattr(RKNNLite, name) == int(value), name
    assert len(re.findall(r"`(NPU_CORE_\w+)` (\d+)", box)) == 3


def test_the_rknnlite_copies_come_from_the_run(run) -> None:
    """§4's RKNNLite cell: the C path and RKNNLite make the same calls, only the RKNNLite rows
    carry the class's own work, and reuse_outputs=True removes some of it, not all (the input
    copy stays), as the answer says."""
    everything = "\n".join(run.values())
    own = re.search(r"the class's own work: ([\d.]+) ms with new output arrays, ([\d.]+) ms with "
                    r"reuse_outputs=True", everything)
    assert own, "§4 no longer prints the class's own work"
    plain, reuse = float(own.group(1)), float(own.group(2))
    assert 0 < reuse < plain, (plain, reuse)
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\s*(prealloc_output|lite_inference|lite_reuse_outputs)"
                                                       r"\s+(.*)$", everything, flags=re.M)}
    assert set(rows) == {"prealloc_output", "lite_inference", "lite_reuse_outputs"}
    assert rows["prealloc_output"].split()[-1] == "-", "the C path has no work of the class"
    assert all(rows[v].split()[-1] == "ms" for v in ("lite_inference", "lite_reuse_outputs"))
    text = _flat(_markdown())
    assert "Some. On the simulator (A67) it removes the output copy, and the input copy stays. The wheel " \
           "documents only that it removes the per-call allocation." in text
    assert "What the table shows: both paths make the same calls; their times move with the PC's load." in text
    assert "a board times only the whole `inference()` call" in text
    assert "same four calls" not in text


def test_section_4_rknnlite_run_comes_before_its_answer_and_one_what_this_shows() -> None:
    """J9: Predict -> run -> Answer -> What this shows, as the chapter's other sections."""
    cells = [c for c in ch.cells(CHAPTER)]
    ids = [c.get("id") for c in cells]
    predict, run_cell, after = (ch.source(cells[ids.index(i)]) for i in ("ch3-19c", "ch3-19d", "ch3-19e"))
    assert "**Predict.**" in predict and "{admonition} Answer" not in predict
    assert after.index("{admonition} Answer") < after.index("**What this shows.**")
    assert after.count("**What this shows.**") == 1 and after.count("What the table shows") == 1
    assert "lite_phases" in run_cell


def test_section_4_rknnlite_cell_copes_with_a_board(capsys) -> None:
    """On a board the wheel's calls are not recorded (only inference() is timed): the cell says the
    class's own work is not measured there instead of failing or printing NaN."""
    import types

    import pandas as pd
    from rknnlab import profile
    cell = ch.source([c for c in ch.cells(CHAPTER) if c.get("id") == "ch3-19d"][0])
    calls = pd.DataFrame([(v, it, f, us) for it in range(3) for v, f, us in
                          (("prealloc_output", "run", 2000.0), ("prealloc_output", "inputs_set", 100.0),
                           ("lite_inference", "inference", 3000.0), ("lite_reuse_outputs", "inference", 2500.0))],
                         columns=["variant", "iteration", "function", "duration_us"]).assign(stage="measure")
    board = types.SimpleNamespace(source="a board", variants=["prealloc_output", "lite_inference", "lite_reuse_outputs"],
                                  calls=calls, errors={}, summary=pd.DataFrame({"iterations": [3, 3, 3]}))
    exec(compile(cell, "ch3-lite", "exec"), {"rknnlab": types.SimpleNamespace(run=lambda *a, **k: board),
                                             "profile": profile, "textwrap": __import__("textwrap")})
    out = capsys.readouterr().out
    assert "the class's own work: not measured here" in out and "nan" not in out.lower()


def test_lite_phases_splits_the_inference_block_into_calls_and_the_rest() -> None:
    """profile.lite_phases: per iteration, the inference block less the four calls inside it,
    then the median; a variant without the block gets none, gc.collect() blocks are kept."""
    import pandas as pd
    from rknnlab import profile

    class Result:                               # the two attributes lite_phases reads
        source, variants = "a test table", ["c_path", "lite"]
        rows = []
        for it, extra in enumerate((1000.0, 3000.0, 2000.0)):
            for variant in ("c_path", "lite"):
                for function, us in (("inputs_set", 100.0), ("run", 2000.0), ("outputs_get", 50.0),
                                     ("outputs_release", 5.0)):
                    rows.append((variant, it, function, us))
                if variant == "lite":
                    rows += [(variant, it, "inference", 2155.0 + extra), (variant, it, "gc_collect", 9000.0)]
        calls = pd.DataFrame(rows, columns=["variant", "iteration", "function", "duration_us"]).assign(stage="measure")
        calls = pd.concat([calls, calls.head(2).assign(stage="warmup", duration_us=1e9)])

    table = profile.lite_phases(Result())
    assert list(table.index) == ["c_path", "lite"] and table.attrs["source"] == "a test table"
    assert table.loc["lite", "outside_the_calls_ms"] == pytest.approx(2.0)     # the median of 1, 3, 2 ms
    assert np.isnan(table.loc["c_path", "outside_the_calls_ms"])
    assert table.loc["lite", "outputs_get_ms"] == pytest.approx(0.055)        # get + release
    assert table.loc["lite", "gc_collect_ms"] == pytest.approx(9.0) and np.isnan(table.loc["c_path", "gc_collect_ms"])
    assert table.loc["c_path", "run_ms"] == pytest.approx(2.0)                 # the warm-up is left out


def test_lite_phases_on_a_board_does_not_call_the_whole_block_the_class_s_own_work() -> None:
    """On a board the wheel's runtime calls are not recorded: only the inference block is, so
    the class's own work is unknown (NaN), not the whole call."""
    import pandas as pd
    from rknnlab import profile

    class Result:
        source, variants = "a board", ["lite"]
        calls = pd.DataFrame([("lite", it, "inference", 3000.0) for it in range(3)],
                             columns=["variant", "iteration", "function", "duration_us"]).assign(stage="measure")

    table = profile.lite_phases(Result())
    assert "outside_the_calls_ms" not in table or np.isnan(table.loc["lite", "outside_the_calls_ms"])

