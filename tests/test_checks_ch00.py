"""rknnlab.checks.ch00 (chapter 0's self-check) and the chapter's student edition, on the simulator.

Each check passes the reference answer and a legitimate alternative, and fails at least
three planted wrong answers: a backend rule that ignores the device node, the environment
variable or the library; an output size that ignores want_float, counts elements, reads
only the last dimension, or is right only for int8 (n_elems for want_float = 0, size × 4 for
want_float = 1: the check's float32 and float16 outputs catch both); a leak judged by MemFree, by the peak RSS, by a slope without its
interval, by an interval that only has to exclude 0, by a fixed 1,000 B/iteration threshold
(a small leak and a noisy run catch it), by the RSS verdict alone (RSS cannot see the small
leak), by the heap's verdict with "cannot tell" read as a yes or a no, or by the
variant's name.  A check never raises.  Then the chapter's student
edition (solution cells removed) runs to the end, every check "not done yet".
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labhelpers as lh
from rknnlab import board
from rknnlab.checks import ch00 as checks
from rknnlab.rknn import abi

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "00_setup.ipynb"


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    monkeypatch.delenv("RKNNLAB_SIM_SOC", raising=False)


def _failed(result, *words: str) -> str:
    text = repr(result)
    assert result.status == "failed" and not result.passed, text
    assert "Traceback" not in text
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    return text


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


# =========================================================================== question 1
RIGHT = {"A": "sim", "B": "sim", "C": "sim", "D": "native", "E": "sim"}


def test_q1_reference_passes() -> None:
    r = checks.check_backends(RIGHT)
    assert r.passed, repr(r)
    assert "this machine uses sim" in r.message


def test_q1_alternative_passes() -> None:
    """Answers computed with choose_backend itself, in other letter case and spacing."""
    answers = {" a": board.choose_backend()[0].upper()}
    answers.update({k.lower(): f" {v.title()} " for k, v in RIGHT.items() if k != "A"})
    assert checks.check_backends(answers).passed


@pytest.mark.parametrize("wrong", [
    {**RIGHT, "B": "native"},                        # the library is enough
    {**RIGHT, "C": "native"},                        # the environment variable ignored
    {**RIGHT, "E": "native"},                        # the device node is enough
    {**RIGHT, "D": "sim"},                           # the course always simulates
    {**RIGHT, "A": "native"},                        # this machine is a board
], ids=["library-enough", "env-ignored", "device-enough", "always-sim", "this-machine"])
def test_q1_wrong_answers_fail_without_naming_the_letter(wrong) -> None:
    text = _failed(checks.check_backends(wrong), "1 of the 5 backends differ")
    for k in wrong:
        assert f" {k}:" not in text and f"'{k}'" not in text


def test_q1_truth_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a board (native chosen), the answer for A is native: the check asks, it does not know."""
    monkeypatch.setattr(board, "choose_backend",
                        lambda requested="auto", board=None, env=None:
                        ("native", "") if board is None else _real_choose(requested, board, env))
    assert checks.check_backends({**RIGHT, "A": "native"}).passed
    _failed(checks.check_backends(RIGHT))


_real_choose = board.choose_backend


def test_q1_not_done_and_malformed() -> None:
    assert checks.check_backends(dict.fromkeys("ABCDE")).status == "not done"
    assert checks.check_backends(None).status == "not done"
    assert checks.check_backends({"A": "sim"}).status == "not done"
    _failed(checks.check_backends({**RIGHT, "B": "npu"}), "not a backend")


# =========================================================================== question 2
def output_bytes(attr, want_float):
    return attr.n_elems * 4 if want_float else attr.size


def output_bytes_from_dims(attr, want_float):
    """A legitimate alternative: the shape times the element size of the type given."""
    n = int(np.prod(attr.dims[:attr.n_dims]))
    return n * (4 if want_float else abi.TYPE_TO_NUMPY[attr.type].itemsize)


def test_q2_reference_and_alternative_pass() -> None:
    for fn in (output_bytes, output_bytes_from_dims):
        r = checks.check_output_bytes(fn)
        assert r.passed, repr(r)


@pytest.mark.parametrize("wrong, words", [
    (lambda attr, wf: attr.size, ["too small"]),                         # want_float ignored
    (lambda attr, wf: attr.n_elems * 4, ["too large"]),                  # always float32
    (lambda attr, wf: attr.n_elems, ["too small"]),                      # elements, not bytes
    (lambda attr, wf: attr.dims[attr.n_dims - 1] * (4 if wf else 1), ["too small"]),   # last dim only
    (lambda attr, wf: attr.size * 4 + 64 if wf else attr.size, ["too large"]),  # an aligned guess
    # right for every int8 output, wrong once an output is float32 or float16
    (lambda attr, wf: attr.n_elems * 4 if wf else attr.n_elems, ["too small", "as a float16 output"]),
    (lambda attr, wf: attr.size * 4 if wf else attr.size, ["too large", "as a float32 output"]),
], ids=["want-float-ignored", "always-float", "elements", "last-dim", "aligned",
        "elements-when-int8", "size-times-4"])
def test_q2_wrong_answers_fail(wrong, words) -> None:
    _failed(checks.check_output_bytes(wrong), "sizes differ", *words)


def test_q2_not_done_and_errors() -> None:
    assert checks.check_output_bytes(_stub).status == "not done"
    assert checks.check_output_bytes(None).status == "not done"
    assert checks.check_output_bytes(lambda a, wf: None).status == "not done"
    _failed(checks.check_output_bytes(lambda a, wf: 1000.5), "not a whole number")
    _failed(checks.check_output_bytes(lambda a, wf: a.no_such_field), "AttributeError")


# =========================================================================== question 3
_WORDS = {"grows": "leaks", "flat": "no leak", "cannot tell": "cannot tell"}


def leak_verdict(result, variant):
    return _WORDS[result.summary.loc[variant, "heap_verdict"]]


def leak_verdict_from_words(result, variant):
    """A legitimate alternative: the heap's verdict in words, in another case."""
    words = result.summary.loc[variant, "heap_growth"]
    return "LEAKS" if words.startswith("grows") else "No leak " if words.startswith("flat") else "cannot tell"


def _by_bound(result, variant, bound):
    """The heap slope's interval against ``bound`` bytes per iteration."""
    s = result.summary.loc[variant]
    low = s["heap_slope_bytes_per_iter"] - s["heap_slope_pm_bytes"]
    high = s["heap_slope_bytes_per_iter"] + s["heap_slope_pm_bytes"]
    return "leaks" if low > bound else "no leak" if high < bound else "cannot tell"


def leak_verdict_by_interval(result, variant):
    """Another: the interval against the harness's own few dozen bytes per iteration."""
    return _by_bound(result, variant, 100)


def test_q3_reference_and_alternatives_pass() -> None:
    for fn in (leak_verdict, leak_verdict_from_words, leak_verdict_by_interval):
        r = checks.check_leak_verdicts(fn, draws=5)
        assert r.passed, repr(r)


def _two_valued(rule):
    return lambda r, v: "leaks" if rule(r.summary.loc[v]) else "no leak"


@pytest.mark.parametrize("wrong, trap", [
    (_two_valued(lambda s: s["memfree_drop_kb"] > 20 * 1024), "MemFree falls"),     # the recipe
    (lambda r, v: "leaks" if r.summary.loc[v, "rss_peak_kb"] == r.summary["rss_peak_kb"].max()
     else "no leak", "highest peak RSS"),
    (_two_valued(lambda s: s["heap_slope_bytes_per_iter"] > 0), "a few dozen bytes"),
    # the interval is above 0, but the harness's own few dozen bytes are not a leak
    (lambda r, v: _by_bound(r, v, 0), "a few dozen bytes"),
    # a fixed threshold with no interval: misses a small leak, decides noise
    (_two_valued(lambda s: s["heap_slope_bytes_per_iter"] > 1000), "a few hundred bytes"),
    (_two_valued(lambda s: s["heap_slope_bytes_per_iter"] > 1000), "a noisy variant"),
    # the RSS verdict alone: RSS moves in pages and cannot see a small leak
    (lambda r, v: _WORDS[r.summary.loc[v, "rss_verdict"]], "too little for RSS"),
    (_two_valued(lambda s: s["rss_growth"].startswith("grows")), "too little for RSS"),
    # the heap's verdict, but "cannot tell" read as no leak (or as a leak)
    (_two_valued(lambda s: s["heap_verdict"] == "grows"), "a noisy variant"),
    (_two_valued(lambda s: s["heap_verdict"] != "flat"), "a noisy variant"),
    # a three-valued rule with the bound set too high
    (lambda r, v: _by_bound(r, v, 1000), "a few hundred bytes"),
    (lambda r, v: "leaks" if "leak" in v else "no leak", "grow steadily"),            # by name
], ids=["memfree", "peak-rss", "slope-without-interval", "interval-above-zero", "fixed-1000-small-leak",
        "fixed-1000-noise", "rss-verdict", "rss-grows", "cannot-tell-as-no-leak", "cannot-tell-as-leak",
        "interval-bound-1000", "by-name"])
def test_q3_wrong_answers_fail_and_name_the_trap(wrong, trap) -> None:
    text = _failed(checks.check_leak_verdicts(wrong), trap, "your function says")
    assert "leak_no_release" not in text


def test_q3_not_done_and_malformed() -> None:
    assert checks.check_leak_verdicts(_stub).status == "not done"
    assert checks.check_leak_verdicts(lambda r, v: None).status == "not done"
    _failed(checks.check_leak_verdicts(lambda r, v: "yes"), "returned 'yes'", "cannot tell")
    _failed(checks.check_leak_verdicts(lambda r, v: True), "returned True")


def test_q3_mystery_runs_hide_the_truth() -> None:
    r = checks.mystery_run(seed=1)
    assert r.variants == [f"V{k}" for k in range(1, 8)]
    assert "made up" in r.source
    names = " ".join(" ".join(run.name for run in checks.mystery_run(seed=s).runs) for s in range(3))
    assert "leak" not in names


def test_q3_noisy_variant_is_undecidable_and_the_small_leak_invisible_to_rss() -> None:
    """What the traps rely on, from the summary itself: the noisy variant's slope is above
    1,000 B/iteration with an interval that includes 0, and the small leak's RSS is not "grows"."""
    for seed in range(5):
        result, traps, truth = checks._mystery(seed)
        s = result.summary
        noisy = next(v for v, t in traps.items() if t.startswith("a noisy"))
        small = next(v for v, t in traps.items() if "too little for RSS" in t)
        assert s.loc[noisy, "heap_slope_bytes_per_iter"] > 1000
        assert s.loc[noisy, "heap_slope_bytes_per_iter"] - s.loc[noisy, "heap_slope_pm_bytes"] < 0
        assert 100 < s.loc[small, "heap_slope_bytes_per_iter"] < 1000
        assert s.loc[small, "rss_verdict"] != "grows"


def test_summary_lists_every_question() -> None:
    checks.check_backends(RIGHT)
    text = repr(checks.summary())
    assert "Chapter 0 self-check" in text and text.count("Question") == 3


# =========================================================================== the chapter's editions
def _check_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and "checks.check_" in c.source]



def test_chapter_solution_cells_follow_their_stubs() -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(CHAPTER, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    solutions = [k for k, c in enumerate(code) if "solution" in (c.metadata.get("tags") or [])]
    assert len(solutions) == 3
    for k in solutions:
        stub = code[k - 1].source
        assert "None" in stub or "NotImplementedError" in stub, stub
    assert len(_check_cells(nb)) == 3


@pytest.mark.timeout(300)
def test_chapter_student_edition_runs_and_reports_not_done() -> None:
    nb = lh.student_run(CHAPTER)       # the session's run of the student edition, shared
    for cell in _check_cells(nb):
        texts = [o["data"]["text/plain"] for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        assert len(texts) == 1, cell.source
        assert texts[0].startswith("NOT PASSED") and "not done yet" in texts[0], texts[0]
        assert "Hint:" in texts[0] and "Traceback" not in texts[0]


# =========================================================================== the chapter's text and RKNNLite (issue 18)
def test_chapter_prose_within_budget_and_named_assumptions_are_listed() -> None:
    import chapterhelpers as ch
    ch.assert_prose_within_budget(ch.markdown(CHAPTER))
    ch.assert_inline_assumptions_match_the_generated_list(CHAPTER)


def test_chapter_rknnlite_boxes_are_folded_and_name_only_what_the_class_has() -> None:
    import re

    import chapterhelpers as ch
    from rknnlab.lite import RKNNLite
    boxes = re.findall(r"(`{3,})\{admonition\} With RKNNLite[^\n]*\n(.*?)\n\1(?:\n|$)", ch.markdown(CHAPTER),
                       flags=re.S)
    assert len(boxes) >= 4, "a With RKNNLite box after the C of §2, §3 (SRAM, timing) and §4"
    for _, body in boxes:
        assert body.startswith(":class: dropdown"), body[:80]
        for name in re.findall(r"(?<![\w.])lite\.(\w+)", body) + re.findall(r"\bRKNNLite\.(\w+)", body):
            assert hasattr(RKNNLite, name), f"RKNNLite has no {name!r}"
    assert not hasattr(RKNNLite, "query") and "It has no query" in boxes[0][1]


@pytest.mark.timeout(300)
def test_chapter_rknnlite_cell_runs_the_boards_import_and_returns_float32() -> None:
    """§2's RKNNLite cell: the board's import line gives rknnlab's class on the simulator, and the
    output is float32, n_elems × 4 bytes, as the answer says (measured against a fresh query)."""
    import re

    import chapterhelpers as ch
    from notebook_runs import printed
    from rknnlab import models, open_runtime
    everything = "\n".join(printed("chapters/00_setup.ipynb").values())
    assert "from rknnlite.api import RKNNLite gives: rknnlab.lite" in everything
    shape, dtype, nbytes = re.search(r"RKNNLite\.inference: 1 array, shape \(([\d, ]+)\), (\w+), ([\d,]+) bytes",
                                     everything).groups()
    rt = open_runtime("sim")
    ctx = rt.init(str(models.model_path("mobilenet_v2", rt.soc)))
    try:
        out = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    finally:
        rt.destroy(ctx)
    assert dtype == "float32" and int(nbytes.replace(",", "")) == out.n_elems * 4 != out.size
    assert f"*float32, {out.n_elems * 4:,} bytes.*" in ch.flat(ch.markdown(CHAPTER))


# =========================================================================== issue 18 reviews: JupyterLab look
def _code_cells_with(text: str) -> list:
    import chapterhelpers as ch
    return [ch.source(c) for c in ch.cells(CHAPTER) if c["cell_type"] == "code" and text in ch.source(c)]


@pytest.mark.timeout(300)
def test_chapter_prints_nothing_wider_than_100_columns() -> None:
    """JupyterLab at 1366x768 shows about 100 columns: every printed line fits, the wheel's long
    "W" line too (wrapped by the cell). The generated list of assumptions is HTML in JupyterLab."""
    from notebook_runs import executed
    plain = []              # what JupyterLab shows as text: streams, and values without an HTML form
    for index, cell in enumerate(executed("chapters/00_setup.ipynb").nb.cells):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if o.get("output_type") == "stream":
                plain.append((index, o["text"]))
            elif "text/plain" in data and not {"text/html", "image/png"} & set(data) \
                    and not any("widget" in kind for kind in data):
                plain.append((index, data["text/plain"]))
    for index, text in plain:
        wide = [line for line in text.splitlines() if len(line) > 100]
        assert not wide, f"cell {index} prints a line of {len(wide[0])} columns: {wide[0][:70]}..."
    everything = "\n".join(text for _, text in plain)
    assert "W Query dynamic range failed" in everything, "§2's run no longer shows the line its answer explains"


def test_chapter_explains_the_w_and_e_lines_in_section_2() -> None:
    import chapterhelpers as ch
    two = ch.flat(ch.numbered_sections(ch.markdown(CHAPTER))["2"])
    assert 'The lines that start with "W" are the wheel\'s warnings; "E" marks an error.' in two
    assert "at every `init_runtime` of a model without dynamic shapes, and it is harmless" in two
    assert '"I RKNN" and "W RKNN" lines' in two and "on a board they may print unwrapped" in two


def test_chapter_rknnlite_cell_prints_why_and_skips_on_a_board_without_the_wheel(monkeypatch, capsys) -> None:
    """J4: the cell that constructs RKNNLite runs missing_wheel() first: a board without
    rknn-toolkit-lite2 prints that one line, and nothing else runs (no RKNNLite is made)."""
    import textwrap
    from rknnlab import lite
    (cell,) = _code_cells_with("RKNNLite()")
    monkeypatch.setattr(lite, "missing_wheel", lambda: "no wheel on this board")
    monkeypatch.setattr(lite, "RKNNLite", None)           # any construction would raise now
    exec(compile(cell, "ch0-lite", "exec"), {"np": np, "textwrap": textwrap})
    assert capsys.readouterr().out == "no wheel on this board\n"
    assert "textwrap.fill(line, 100" in cell, "the wheel's lines are wrapped at 100 columns"


def test_chapter_section_3_timing_cell_makes_its_own_frame() -> None:
    """§3 must not depend on §2's RKNNLite cell (skipped on a board without the wheel)."""
    (timing,) = _code_cells_with("wall_ms = []")
    assert "frame = " in timing.split("rt.inputs_set")[0]


def test_chapter_rknnlite_program_runs_as_written_and_section_2_names_no_assumption_before_section_3() -> None:
    import re

    import chapterhelpers as ch
    sections = ch.numbered_sections(ch.markdown(CHAPTER))
    program = re.search(r"```python\n(.*?)```", sections["2"], re.S).group(1)
    assert program.index("import numpy as np") < program.index("frame = np.zeros((1, 224, 224, 3), np.uint8)") \
        < program.index("lite.inference(inputs=[frame])")
    assert not re.search(r"\(A\d+\)", program), "an A-tag in §2's code, before §3 explains them"
    assert len(re.findall(r"\bA\d+\b", sections["2"])) == 1 and "(assumption A66; §3 explains these tags)" in \
        ch.flat(sections["2"])


def test_chapter_boxes_say_no_flags_argument_define_reference_cycle_and_note_the_sram_variables() -> None:
    import chapterhelpers as ch
    text = ch.flat(ch.markdown(CHAPTER))
    assert "no init flags" not in text and "no flags argument" in text
    assert "`RKNN_FLAG_ASYNC_MASK` itself when `async_mode=True`" in text and "`load_model_in_npu`" in text
    assert "`RKNN_INTERNAL_MEM_TYPE=sram`" in text and "whatever wrapper loads it" in text
    four = ch.flat(ch.numbered_sections(ch.markdown(CHAPTER))["4"])
    assert four.index("reference cycle") < four.index("A reference cycle is objects that refer to each other")
    assert "on a board it times only the whole call" in text


# =========================================================================== issue 21: the first C program
@pytest.mark.timeout(300)
def test_chapter_first_c_program_runs_on_the_simulators_library_and_says_so() -> None:
    """§2's %%rknn_c cell: a whole program (rknn_init from argv[1], two queries, one rknn_destroy, each
    code checked) that runs on the simulator's librknnrt.so. Its first line says the library is the
    simulator's and what the embedded Python costs; it prints the model's 1 input and 1 output and the
    same api version as the Python cell; the setup cell loads the extension."""
    import re

    import chapterhelpers as ch
    from notebook_runs import executed
    (setup,) = _code_cells_with("doctor.doctor_report()")
    assert "%load_ext rknnlab" in setup
    (program,) = _code_cells_with("%%rknn_c")
    assert program.startswith("%%rknn_c -- {MODEL}\n") and len(program.splitlines()) <= 25
    for call in ("rknn_init(&ctx, argv[1], 0, 0, NULL)", "RKNN_QUERY_IN_OUT_NUM", "RKNN_QUERY_SDK_VERSION"):
        assert call in program
    assert program.count("rknn_destroy(ctx)") == 1 and program.count("if (ret < 0)") == 4
    nb = executed("chapters/00_setup.ipynb").nb
    texts = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            texts[cell.source] = "".join(o.get("text", "") for o in cell.get("outputs", [])
                                         if o.get("output_type") == "stream")
    printed = texts[program].splitlines()
    assert re.fullmatch(r"rknnlab: librknnrt for PCs, simulated RK3588 \(.*: \+[\d.]+ MB RSS\)", printed[0]), printed
    assert "inputs: 1, outputs: 1" in printed, printed
    python_api = re.search(r"api_version: (.*?);", "\n".join(texts.values())).group(1)
    assert f"api {python_api}, driver " in "\n".join(printed), (python_api, printed)
    assert len(printed) <= 15 and all(len(line) <= 100 for line in printed)
    two = ch.flat(ch.numbered_sections(ch.markdown(CHAPTER))["2"])
    assert "**Your first C program.**" in two and "python -m rknnlab cc prog.c --run MODEL" in two
