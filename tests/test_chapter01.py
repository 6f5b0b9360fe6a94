"""Chapter 1: its text keeps the rules, its worked examples agree with the run, and it has no solution cells.

The chapter's worked examples are untagged (a student edition keeps them): the size of a
native buffer computed by hand from the native dims, the union of live [start, end) ranges
of a toy plan and of MobileNetV2, one rank correlation, and the diagnosis of one unknown
context by comparing its DMA total with the same model at flag 0.  The general functions
are Lab 1's exercises; tests/test_checks_lab01.py runs the lab's reference predict_sizes on
every io tensor of every course model on all four SoCs.

One test executes the chapter on the simulator and compares the numbers its text quotes
with the numbers the run prints.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List

import pytest

from rknnlab import models

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "chapters" / "01_memory_layers.ipynb"

#: DECISIONS' canonical sentences, word for word (inline code marks removed)
CANONICAL = (
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on "
    "rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; never assume it.",
    "Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, or a plain "
    "input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use n_elems × 4 bytes.",
    "The bytes in use at the high-water mark are a lower bound for the internal buffer. The compiler's plan is at "
    "or a little above it, and reuse makes it several times smaller than the naive sum.",
    "On a board, total_dma_allocated_size holds more than weights + internal + io. The runtime also allocates "
    "register-command and task buffers, and it rounds allocations to 4 KiB. User Guide §9.1.1 lists register config, "
    "and public librknnrt logs show these buffers. The io buffers may be allocated only at the first rknn_run. The "
    "simulator allocates exactly weights + internal + io at init (assumptions A9, A10).",
    "Rockchip's sources do not settle when rknn_mem_sync is needed. The comments of the DISABLE_FLUSH flags imply "
    "that the runtime flushes inputs and invalidates outputs by default. The API reference says cacheable memory "
    "shared by the CPU and the NPU needs rknn_mem_sync. None of Rockchip's demos call it. A maintainer says to add "
    "it yourself if you need it (airockchip/rknn_model_zoo#156). The course's code syncs: the safe choice.",
    "RKNN_QUERY_MEM_SIZE: the API reference says it requires RKNN_FLAG_MEM_ALLOC_OUTSIDE; Rockchip's rknn_benchmark "
    "and the user guide query it after a plain init (flag 0). The simulator answers it after flag 0 (a listed "
    "assumption).",
)


def _cells() -> List[dict]:
    return json.loads(NOTEBOOK.read_text())["cells"]


def _markdown() -> str:
    return "\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "markdown")


def _flat(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def test_no_solution_cells_the_worked_examples_stay_in_every_edition():
    tagged = [c for c in _cells() if "solution" in c.get("metadata", {}).get("tags", [])]
    assert tagged == []
    code = "\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
    assert "def predict_sizes" not in code, "the general function is Lab 1's exercise 2"
    assert "alive_at_peak" not in code and "in_use_bytes" not in code, "the union over ranges is Lab 1's exercise 3"
    assert "top = max(top, end)" not in code, "the chapter counts the toy plan byte by byte; the lab asks for ranges"
    assert ".rank().corr(" in code and "bytes_in_use" in code and "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE" in code


def test_no_seed_names_and_no_hand_quoted_assumption_count():
    text = "\n".join("".join(c["source"]) for c in _cells())
    assert not re.search(r"seed\s*0\d\d", text, re.I)
    assert not re.search(r"\bA1\s*[-–]\s*A\d+", text), "generate the number of assumptions, do not type it"


def test_the_shared_rules_are_stated_in_their_words():
    flat = _flat(_markdown())
    for sentence in CANONICAL:
        assert sentence in flat, sentence[:80]


def test_no_certainty_about_syncs_and_no_dma_account_as_expectation():
    flat = _flat(_markdown()).lower()
    assert "redundant" not in flat and "cheap" not in flat
    assert "memory you did not plan for" not in flat and "worth reporting" not in flat


def test_wrong_claims_share_one_container_each_after_a_prompt():
    text = _markdown()
    assert "Errata" not in text
    boxes = [m.start() for m in re.finditer(r"```\{admonition\} Wrong claim: ", text)]
    assert len(boxes) >= 4
    for k, start in enumerate(boxes):
        section = text.rfind("\n## ", 0, start)                    # the box's own section ...
        since = max(section, boxes[k - 1] if k else 0)              # ... after the box before it
        before = text[since:start]
        assert "**Predict:**" in before or "**Spot the bug:**" in before, text[start:start + 80]
        assert "```text" in before or "As published" in before or "as published" in before, text[start:start + 80]
    for box in re.findall(r"```\{admonition\} Wrong claim: .*?\n```", text, re.S):
        assert ":class: warning" in box and "A widely copied recipe says" in box
        assert "What the runtime does" in box and "Evidence:" in box


def test_what_the_text_says_about_the_compiler_reports_is_true():
    """The 2.3.2 builds: no view pairs, no memory_plan_strategy line."""
    text = _markdown()
    for name in models.list_models():
        for soc in models.model_socs(name):
            report = models.load_report(name, soc)
            assert report.view_pairs() == [], (name, soc)
            assert "memory_plan_strategy" not in report.data.get("compiler_options", {}), (name, soc)
    assert "returns `[]` for every course model" in text
    assert "BestFit" in text and "2.3.2 builds name no strategy" in text


# --------------------------------------------------------------------------- the run
@pytest.fixture(scope="module")
def run() -> Dict[int, str]:
    """The chapter executed on the simulator (once per session): cell index -> its printed text."""
    from notebook_runs import printed
    return printed("chapters/01_memory_layers.ipynb")


def test_every_output_is_short_and_no_stray_value(run):
    for index, text in run.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue    # the generated list names every assumption the text relies on (chapterhelpers)
        assert len(text.splitlines()) <= 15, f"cell {index} prints {len(text.splitlines())} lines"
        assert text.strip() not in ("0", "None"), f"cell {index} shows a bare return value"


def test_hand_computed_sizes_equal_the_runtime(run):
    everything = "\n".join(run.values())
    pairs = re.findall(r"= ([\d,]+) B(?: by hand)? \((?:size [\d,]+ B, )?size_with_stride ([\d,]+) B\)", everything)
    assert len(pairs) >= 4, pairs                        # yolov5s output 0 and digits_cnn input, two SoCs each
    assert all(a == b for a, b in pairs), pairs
    assert "[100, 160, 140, 80]" in everything           # the toy plan, as the text works it out


def test_numbers_quoted_in_the_text_come_from_the_run(run):
    text, everything = _flat(_markdown()), "\n".join(run.values())
    ratio = re.search(r"naive [\d.]+ MiB -> plan [\d.]+ MiB: ([\d.]+)x smaller", everything).group(1)
    assert f"About 5× ({ratio}× in the line above)" in text and round(float(ratio)) == 5
    total = re.search(r"yolov5s: DMA total .*?; ([\d.]+) MiB in all for a ([\d.]+) MiB file", everything)
    assert round(float(total.group(1))) == 24 and round(float(total.group(2))) == 8 and "About 24 MiB" in text
    shares = {name: float(dma) / float(size) for name, dma, size in
              re.findall(r"(\w+): DMA total ([\d.]+) MiB .*? for a ([\d.]+) MiB file", everything)}
    assert round(shares["yolov5s"], 1) == 2.0 and round(shares["mobilenet_v2"], 1) == 1.3, shares
    assert "twice the file for YOLOv5s and 1.3 times for MobileNetV2" in text
    assert "1,638,400 bytes on both SoCs: 6,400 bytes more than the tensor" in text
    assert everything.count("= 1,638,400 B (size_with_stride 1,638,400 B)") == 2
    unwrapped = re.sub(r"\n {4}(?=\S)", " ", everything)     # lines the cells wrap at 100 columns
    ratios = dict(re.findall(r"(\w+) (\d+\.\d\d)", re.search(r"weights / internal on rk3588: (.*)", unwrapped).group(1)))
    assert (ratios["mobilenet_v2"], ratios["resnet50"], ratios["yolov5n"], ratios["yolov5m"]) == ("2.30", "12.90", "0.43", "2.08")
    assert "2.3 to 12.9 times" in text and "from 0.43 (YOLOv5n) to 2.08 (YOLOv5m)" in text
    larger = re.search(r"internal buffer larger than the weights: (.*)", unwrapped).group(1)
    on_rk3588 = [m for m, s in re.findall(r"(\w+) \((\w+)\)", larger) if s == "rk3588"]
    assert on_rk3588 == ["ppocr_det", "yolov5n"], larger
    assert round(1 / float(ratios["ppocr_det"])) == 20 and "extreme: 0.05" in text
    assert "YOLOv5n, and chapter 6's text detector, ppocr_det." in text
    assert "fit: ['yolov5s', 'yolov5s_relu']" in everything and "nearest: RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE" in everything
    assert "int8 outputs identical: True" in everything and "int8 outputs of the two contexts identical: True" in everything


def test_round_2_corrections_stay():
    flat = _flat(_markdown())
    assert "[glossary](glossary.ipynb)" in flat
    assert "undersized output mem accepted" not in flat and "no public log shows what the runtime does" in flat
    assert "That runtime padded the rows" not in flat and "airockchip/rknn-toolkit2#129" in flat
    assert "largely cancel" in flat and "and cancel." not in flat
    assert "## 8. " in _markdown()


# --------------------------------------------------------------------------- budgets and RKNNLite (issue 18)
def test_the_prose_stays_within_its_budget():
    import chapterhelpers as ch
    ch.assert_prose_within_budget(_markdown())


def test_every_assumption_named_in_the_text_is_in_the_generated_list():
    """The last cell lists USED, which the cells' assumption(...) calls fill: every A-key the prose
    names (the With RKNNLite boxes too) must be one of them."""
    import ast
    import chapterhelpers as ch
    prose = re.sub(r"```c\n.*?```", "", _markdown(), flags=re.S)
    named = set(re.findall(r"\bA\d+\b", prose))
    code = "\n".join(ch.python_of("".join(c["source"])) for c in _cells() if c["cell_type"] == "code")
    used = {arg.value for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "assumption" for arg in node.args}
    assert named <= used, f"named in the text, never tagged by a cell: {sorted(named - used)}"
    assert {"A65", "A66"} <= named


def _rknnlite_boxes(markdown):
    return re.findall(r"(`{3,})\{admonition\} With RKNNLite[^\n]*\n(.*?)\n\1(?:\n|$)", markdown, flags=re.S)


def test_rknnlite_boxes_are_folded_and_name_only_what_the_class_has():
    import chapterhelpers as ch
    boxes = _rknnlite_boxes(_markdown())
    assert len(boxes) >= 7, "a With RKNNLite box after each C call of §1, §2, §4, §5, §7 and §8"
    for _, body in boxes:
        assert body.startswith(":class: dropdown"), body[:80]
        ch.assert_rknnlite_names_are_the_wheels(body)
    cannot = [body for _, body in boxes if "RKNNLite cannot do this" in body]
    assert len(cannot) >= 5
    from rknnlab.lite import RKNNLite
    for missing in ("create_mem", "set_io_mem", "query"):
        assert not hasattr(RKNNLite, missing), f"a box says RKNNLite has no {missing}"
        assert any(f"no `{missing}`" in body or f"no {missing}" in body for body in cannot), missing


def test_the_rknnlite_heap_holds_the_model_twice_as_the_text_says(run):
    everything = "\n".join(run.values())
    c_files = float(re.search(r"C, rknn_init from the path \(above\): ([\d.]+)", everything).group(1))
    load, init, together = (float(v) for v in re.search(
        r"RKNNLite: load_rknn ([\d.]+), init_runtime ([\d.]+); together ([\d.]+)", everything).groups())
    assert round(c_files) == 1 and round(load) == 1 and round(init) == 1 and round(together) == 2
    got, c_got = re.search(r"one inference\(\): 3 new float32 arrays, ([\d,]+) B \(rknn_outputs_get above: ([\d,]+) B\)",
                           everything).groups()
    assert got == c_got
    assert "a query method on RKNNLite: False" in everything
    text = _flat(_markdown())
    assert "*Two.* load_rknn keeps the file as a Python bytes object" in text
    assert ("an RKNNLite holds two copies of the model on the heap (A65; immich-app/immich#23958 reports the same "
            "on a board). A C context from a path holds one.") in text
    assert "in multiples of the file size (" in everything and "(A65) (measured" not in text


# --------------------------------------------------------------------------- issue 18 reviews: JupyterLab look
def test_every_printed_line_fits_100_columns(run):
    """JupyterLab at 1366x768 shows about 100 columns; the wheel's long "W" line is wrapped by the
    cell (chapter 0 §2 explains it). The generated list of assumptions is HTML in JupyterLab."""
    for index, text in run.items():
        if text.startswith("Simulator assumptions in this chapter:"):
            continue
        wide = [line for line in text.splitlines() if len(line) > 100]
        assert not wide, f"cell {index} prints a line of {len(wide[0])} columns: {wide[0][:70]}..."
    assert "W Query dynamic range failed" in "\n".join(run.values())


def test_the_rknnlite_cell_prints_why_and_skips_on_a_board_without_the_wheel(monkeypatch, capsys):
    """J4: missing_wheel() first; a board without rknn-toolkit-lite2 prints its line, makes no
    RKNNLite, and the cell still tags its assumptions."""
    import textwrap
    from rknnlab import lite
    (cell,) = ["".join(c["source"]) for c in _cells() if c["cell_type"] == "code" and "RKNNLite()" in "".join(c["source"])]
    monkeypatch.setattr(lite, "missing_wheel", lambda: "no wheel on this board")
    monkeypatch.setattr(lite, "RKNNLite", None)           # any construction would raise now
    tagged = []
    exec(compile(cell, "ch1-lite", "exec"), {"os": __import__("os"), "textwrap": textwrap, "MODEL_FILE": {"yolov5s": __file__},
                                           "assumption": lambda *keys: tagged.extend(keys)})
    assert capsys.readouterr().out == "no wheel on this board\n" and tagged == ["A65", "A4", "A66"]
    assert "textwrap.fill(line, 100" in cell, "the wheel's lines are wrapped at 100 columns"


def test_the_init_flags_box_says_no_flags_argument():
    text = _flat(_markdown())
    assert "no init flags" not in text
    assert "no flags argument. The wheel sets RKNN_FLAG_ASYNC_MASK itself when async_mode=True" in text


# --------------------------------------------------------------------------- the C program (issue 21)
def test_mem_layers_c_runs_in_section_7_and_its_account_adds_up(run):
    """§7 runs examples/c/mem_layers.c with the line magic on the chapter's YOLOv5s (MODEL_FILE follows
    the SoC): on the simulator's librknnrt it says so and plays the chapter's SoC; weight + internal + io
    is the DMA total it prints, after init and after one run (A9, A10); weight and internal are the
    compiler report's; the flag takes the internal size off. The folded answer says what it shows."""
    code = [_source for _source in ("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
            if "%rknn_c" in _source]
    assert code == ['%rknn_c examples/c/mem_layers.c -- {MODEL_FILE["yolov5s"]} internal']
    assert "%load_ext rknnlab" in "".join(_cells()[2]["source"])
    soc = re.search(r"simulated (RK\d+)", "\n".join(run.values())).group(1)        # the setup cell's line
    (text,) = [t for t in run.values() if "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE: DMA total" in t]
    lines = text.splitlines()
    assert any(line.startswith(f"rknnlab: librknnrt for PCs, simulated {soc} (") for line in lines[:3]), lines
    assert any(line.startswith("runtime ") and "rknnlab simulator" in line for line in lines[:3]), lines
    unwrapped = re.sub(r"\n {2}(?=\S)", " ", text)                 # the magic wraps lines at 100 columns
    accounts = re.findall(r"^(after rknn_init:|after one rknn_run:) +weight (\d+) \+ internal (\d+) \+ io (\d+) "
                          r"= (\d+) B; DMA total (\d+) B; remainder (-?\d+) B$", unwrapped, flags=re.M)
    assert [a[0] for a in accounts] == ["after rknn_init:", "after one rknn_run:"], unwrapped
    report = models.load_report("yolov5s", soc.lower())
    for _, weight, internal, io, planned, total, remainder in accounts:
        weight, internal, io, planned, total = (int(v) for v in (weight, internal, io, planned, total))
        assert weight + internal + io == planned == total and remainder == "0", accounts
        assert (weight, internal) == (report.total_weight_size, report.total_internal_size)
    sizes = [int(v) for v in re.findall(r"size_with_stride (\d+)", unwrapped)]
    assert len(sizes) == 4 and sum(sizes) == int(accounts[0][3])    # io: one input, three outputs
    moved = re.search(r"RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE: DMA total (\d+) B; flag 0 minus this (\d+) B "
                      r"\(internal (\d+) B", unwrapped)
    assert int(moved.group(2)) == int(moved.group(3)) == report.total_internal_size, moved.group(0)
    assert int(moved.group(1)) == int(accounts[0][5]) - report.total_internal_size
    assert len(lines) <= 15 and all(len(line) <= 100 for line in lines)
    seven = _flat(_markdown()[_markdown().index("\n## 7. "):_markdown().index("\n## 8. ")])
    assert "`examples/c/mem_layers.c` checks it on YOLOv5s" not in seven        # _flat drops the backticks
    assert "examples/c/mem_layers.c checks it on YOLOv5s" in seven
    assert "On the simulator the remainder is 0 both times, and the flag takes exactly the internal size off" in seven
