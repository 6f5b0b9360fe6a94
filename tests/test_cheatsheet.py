"""chapters/cheatsheet.ipynb: one page of the memory API, in the book and on paper.

- Every rknn_*/RKNN_* name the sheet uses exists: rknnlab's binding has it (a function of
  rknnlab.rknn.native.SIGNATURES, or a constant or struct of rknnlab.rknn.abi) and the course's
  header declares it; the topics the sheet must cover are named.
- The canonical sentences stand word for word; no sentence is over 30 words.
- The rows a practitioner needs say how, not only what: rebinding per shape, the zero-copy model
  buffer, the DISABLE_FLUSH flags, sharing an internal buffer, a bound mem of another type, dup and
  dynamic shapes.
- The errors a memory mistake gives are on the page, each code with its name, what triggers it and
  where it was seen (a public board log, the simulator: checked against rknnlab.review, which
  reproduces them), with the three places to look (RKNN_LOG_LEVEL, dmesg, the doctor).
- Every table row links to a section, and every link reaches a real file and heading.
- ``python -m rknnlab export chapters/cheatsheet.ipynb --print`` writes a page for paper: no
  prompts, no code, no screen-only cell, no dead links to notebooks.
- The book build writes the printable page next to the sheet's page, with its links pointing
  at the built sections, and the sheet's page links to it. This builds a small book of its own
  (the sheet and the headings of the chapters it links to, markdown only: nothing executes),
  not the course book.
- Headless Chromium prints the printable page (the export's and the book's) to exactly one A4
  page, errors included, no text under 6.8 pt, with no browser header or footer (Chrome's print
  to PDF with its default settings, pages counted and read with pypdf). Without chromium or pypdf
  these tests skip, saying so, except in CI (CI=true), where they fail.
"""
from __future__ import annotations

import json
import os
import re
import unicodedata
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHEET = ROOT / "chapters" / "cheatsheet.ipynb"
#: the course's own declarations of the C API (moving from tests/c_api/ into the package)
HEADERS = [ROOT / "lib" / "rknnlab" / "c" / "rknn_api.h", ROOT / "tests" / "c_api" / "rknn_api.h"]
CHROMIUM = os.environ.get("RKNNLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
A4_POINTS = (595.28, 841.89)
#: the smallest printed text that stays readable on paper
SMALLEST_PT = 6.8

#: DECISIONS 1, 2, 3', 7, the alignment rule of chapter 7, and the parts of 4' and 9' the sheet keeps
CANONICAL = [
    "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is 16 on "
    "rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native attr; "
    "never assume it.",
    "A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, attr.size "
    "bytes with want_float = 0. Reallocate only when it is too small; a larger buffer is fine if "
    "rknn_output.size gives its real capacity.",
    "Size a buffer you bind from the attr you bind it with. Use size_with_stride of that attr (native, or a "
    "plain input attr whose rows may be padded). For a plain output attr you set to FLOAT32, use n_elems × 4 "
    "bytes.",
    "One set of output buffers per context, and one thread per context at a time.",
    "Alignment is about rows, not start addresses. A zero-copy input's rows are w_stride pixels apart, and "
    "its buffer holds size_with_stride bytes. A buffer you pass to rknn_inputs_set needs no alignment: the "
    "runtime copies it.",
    "This course pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1.",
    "Rockchip's demos differ: one pairs them, one (is_prealloc = 1) never releases.",
    "With is_prealloc = 1 the release frees nothing of yours: a simulator assumption (A15), not a documented "
    "fact.",
    "Rockchip's sources do not settle when rknn_mem_sync is needed.",
    "The course's code syncs: the safe choice.",
    "The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem bound once with "
    "rknn_set_io_mem.",
    # chapter 7 §1 (h_stride) and §5's rule
    "h_stride you may set yourself, for an input whose height is padded.",
    "An error code names a kind of problem, not its cause. Before you change code, read the runtime's log "
    "(RKNN_LOG_LEVEL=4), dmesg and the doctor.",
]

#: what the sheet must cover (the brief of issue 16): who allocates and frees, flags, sync, attrs
REQUIRED = [
    "rknn_init", "rknn_dup_context", "rknn_destroy", "rknn_outputs_get", "rknn_outputs_release",
    "is_prealloc = 0", "is_prealloc = 1", "rknn_create_mem", "rknn_create_mem2", "rknn_create_mem_from_fd",
    "rknn_create_mem_from_phys", "rknn_destroy_mem", "rknn_set_io_mem", "rknn_set_weight_mem",
    "rknn_set_internal_mem", "RKNN_FLAG_MEM_ALLOC_OUTSIDE", "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE",
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY", "RKNN_FLAG_ENABLE_SRAM", "rknn_mem_sync",
    "RKNN_MEMORY_SYNC_TO_DEVICE", "RKNN_MEMORY_SYNC_FROM_DEVICE", "RKNN_MEMORY_SYNC_BIDIRECTIONAL",
    "RKNN_QUERY_INPUT_ATTR", "RKNN_QUERY_OUTPUT_ATTR", "RKNN_QUERY_NATIVE_INPUT_ATTR",
    "RKNN_QUERY_NATIVE_OUTPUT_ATTR", "RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR", "RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR",
    "size_with_stride", "w_stride", "h_stride", "read-only", "RKNN_QUERY_MEM_SIZE", "total_weight_size",
    "total_internal_size", "total_sram_size", "free_sram_size", "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM",
    "rknn_set_input_shapes", "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT", "rknn_init_extend",
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE", "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE",
]

#: how a row starts -> what that row must say (plain text), and the sections it must link to
PRACTICE: Dict[str, Tuple[List[str], List[str]]] = {
    # io is bound again after each shape change (User Guide V2.3.0 §5.4.4.2); binding allocates nothing
    "rknn_set_io_mem": (["Bind io once per shape", "after each rknn_set_input_shapes", "CURRENT_* attrs",
                         "a bind is not an allocation"], ["§5.6"]),
    "rknn_dup_context": (["Not for dynamic-shape models."], ["§5.6"]),
    # how the model buffer is made and named, when it goes, and the two public problems with it
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY": (
        ["rknn_create_mem2(0, size, RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)", "rknn_init_extend", "real_model_offset",
         "real_model_size", "model_buffer_fd", "model_buffer_flags", "after the last rknn_destroy",
         "the API reference's sample destroys it before", "airockchip/rknn-toolkit2#532"], ["§2.2"]),
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE": (
        ["RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE", "the sync is yours",
         "Not with rknn_inputs_set or rknn_outputs_get"], ["§5.2"]),
    # one mem of the largest size, a view per context of at least its own size, never run together
    "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE": (
        ["never run at the same time", "one rknn_create_mem of the largest total_internal_size",
         "rknn_create_mem_from_fd view of at least its own size", "rknn_set_internal_mem",
         "The API reference's sample uses RKNN_FLAG_MEM_ALLOC_OUTSIDE"], ["§5.4"]),
    "mem you bind": (["Any other type you set: n_elems × that type's size."], ["§1.5"]),
}

#: environment variables the runtime reads: not names of the API, so not in its header
ENVIRONMENT = {"RKNN_LOG_LEVEL"}

#: code -> where the sheet says it was seen. "board": a public board log shows it (the issue threads
#: of rknnlab.review.errors: -1 #554, -4 rockchip-linux/rknn-toolkit2#44, -5 #558, -6 librknnrt 1.5.0).
#: "sim": the simulator reproduces it, which test_the_errors_are_on_the_page checks by reproducing it.
ERRORS: Dict[int, Tuple[str, ...]] = {-1: ("board",), -4: ("board", "sim"), -5: ("board", "sim"),
                                      -6: ("board", "sim"), -7: ("sim",), -8: ("sim",), -13: ("sim",)}

#: a table's separator row, |---|---| (a row may start with a negative number: | -1 | ...)
SEPARATOR = re.compile(r"\|(?:\s*:?-+:?\s*\|)+\s*$")
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\)")
NAME = re.compile(r"\b(?:rknn|RKNN)_\w+")


def cells() -> List[dict]:
    return json.loads(SHEET.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def sheet_markdown() -> str:
    return "\n".join(source(c) for c in cells() if c["cell_type"] == "markdown")


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def plain_text(markdown: str) -> str:
    """What a reader reads, one paragraph, heading or table cell a line: links as their text, no
    backticks, bold marks or HTML tags (a <br> is a space), no table separators."""
    units: List[str] = []
    for block in re.split(r"\n\s*\n", markdown):
        lines = block.strip().splitlines()
        prose = [ln for ln in lines if not ln.startswith("|")]
        if prose:
            units.append(" ".join(prose))
        for row in (ln for ln in lines if ln.startswith("|") and not SEPARATOR.match(ln)):
            units += row.strip().strip("|").split(" | ")
    text = "\n".join(flat(u).strip() for u in units).replace("<br>", " ")
    return LINK.sub(lambda m: m.group("text"), re.sub(r"<[^>]+>", "", text)).replace("`", "").replace("**", "")


def myst_slug(title: str) -> str:
    """MyST's heading anchor (myst_heading_anchors: GitHub style), written out independently."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.strip().lower().replace(" ", "-"))


def heading_anchors(notebook: Path) -> Dict[str, str]:
    """anchor -> heading line ("## 4. Native layouts"), for the headings of levels 1-3 outside
    code blocks and boxes, in their order."""
    found: Dict[str, str] = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        fences: List[str] = []                       # open code blocks and MyST boxes
        for line in source(cell).splitlines():
            m = re.match(r"\s*(`{3,}|~{3,}|:{3,})(.*)$", line)
            if m:
                if not m.group(2).strip() and fences and len(m.group(1)) >= len(fences[-1]):
                    fences.pop()
                else:
                    fences.append(m.group(1))
                continue
            h = re.match(r"(#{1,3}) (.+)", line)
            if h and not fences:
                found[myst_slug(h.group(2))] = line
    return found


def section_links(markdown: str) -> List[str]:
    return [m.group("href") for m in LINK.finditer(markdown) if ".ipynb" in m.group("href")]


# --- the notebook ------------------------------------------------------------------------------

def test_the_sheet_is_markdown_saved_valid_and_printable_by_the_book():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(SHEET), as_version=4)
    nbformat.validate(nb)
    assert all(c.cell_type == "markdown" for c in nb.cells), "a code cell would need to run on the simulator"
    assert nb.metadata["rknnlab"]["printable"] is True, "the book build writes its printable page"
    assert "```c" not in sheet_markdown(), "no C block: every name is checked below instead"


def test_every_rknn_name_exists_in_the_binding_and_the_header():
    from rknnlab.rknn import abi, native
    header = next((h for h in HEADERS if h.is_file()), None)
    assert header is not None, f"the course's rknn_api.h is in none of {HEADERS}"
    declared = set(NAME.findall(header.read_text(encoding="utf-8")))
    used = set(NAME.findall(sheet_markdown())) - ENVIRONMENT
    assert len(used) >= 30, sorted(used)
    unknown_to_binding = sorted(n for n in used if n not in native.SIGNATURES and not hasattr(abi, n))
    assert not unknown_to_binding, f"names rknnlab's binding does not have: {unknown_to_binding}"
    undeclared = sorted(used - declared)
    assert not undeclared, f"names the course's header does not declare: {undeclared}"
    # a name used as a call is a function of the runtime
    calls = set(re.findall(r"\b(rknn_\w+)\(", sheet_markdown()))
    assert calls <= set(native.SIGNATURES), sorted(calls - set(native.SIGNATURES))


def test_the_errors_are_on_the_page():
    """The codes a memory mistake gives, each with its name, and where each was seen: "sim" only
    where rknnlab.review really reproduces the code on the simulated RK3588, "board" where a public
    board log shows it; then the three places to look."""
    from rknnlab import review
    from rknnlab.rknn import abi
    reproduced = review.error_codes(soc="rk3588")
    rows = {int(cells[0]): flat(cells[1]) for cells in table_rows(sheet_markdown())
            if re.fullmatch(r"-\d+", cells[0])}
    assert sorted(rows) == sorted(ERRORS), f"the error rows are {sorted(rows)}"
    for code, text in rows.items():
        name = re.match(r"(RKNN_ERR_\w+): ", text)
        assert name and getattr(abi, name.group(1)) == code, f"{code}: {text[:60]}"
        seen = tuple(t for t in ("board", "sim") if re.search(rf"\({t}[;,)]|, {t}\)", text))
        assert seen == ERRORS[code], f"{code} says it was seen on {seen}, not {ERRORS[code]}: {text}"
        assert ("sim" in seen) == reproduced.row(code).reproduced_here, \
            f"{code}: the sheet and rknnlab.review disagree on the simulator reproducing it"
    assert "a board may say -1" in rows[-13] and "the simulator refuses that bind: -5" in rows[-1]
    assert "a size or argument" in rows[-5] and "too-small input" in rows[-5]
    text = plain_text(sheet_markdown())
    for place in ("RKNN_LOG_LEVEL=4 ./app", "before the program starts", "dmesg | tail",
                  "python -m rknnlab doctor"):
        assert place in text, f"the sheet does not say where to look: {place}"


def test_the_sheet_keeps_the_review_facts():
    """SRAM in pages, pairing in the row of the preallocated get, and where the export writes."""
    text = plain_text(sheet_markdown())
    assert 956 * 1024 == 239 * 4096 and "956 KiB = 239 pages of 4 KiB" in text
    prealloc = [c for c in table_rows(sheet_markdown()) if c[0] == "rknn_outputs_get, is_prealloc = 1"]
    assert len(prealloc) == 1 and "one release per get: see Pairing" in prealloc[0][2]
    assert "write-only" not in text, "h_stride is set by you, not unreadable"


def test_the_sheet_covers_its_topics():
    text = sheet_markdown()
    missing = [n for n in REQUIRED if not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)]
    assert not missing, f"the sheet no longer names: {missing}"
    for heading in ("Who allocates, who frees", "Which attr sizes which buffer"):
        assert f"\n## {heading}" in "\n" + text


@pytest.mark.parametrize("sentence", CANONICAL, ids=lambda s: s[:40])
def test_the_canonical_sentences_stand_word_for_word(sentence):
    assert any(sentence in unit for unit in plain_text(sheet_markdown()).splitlines())


def table_rows(markdown: str) -> List[List[str]]:
    """The cells of every table row (header and separator rows left out), as plain text."""
    rows = [ln for ln in markdown.splitlines() if ln.startswith("| ") and not SEPARATOR.match(ln)]
    return [[plain_text(cell).strip() for cell in row.strip().strip("|").split(" | ")] for row in rows]


@pytest.mark.parametrize("first_cell", PRACTICE)
def test_the_rows_a_practitioner_needs_say_how(first_cell):
    rows = [cells for cells in table_rows(sheet_markdown()) if cells[0].startswith(first_cell)]
    assert len(rows) == 1, f"{len(rows)} rows start with {first_cell!r}"
    text = flat(" ".join(rows[0]))
    phrases, sections = PRACTICE[first_cell]
    missing = [p for p in phrases if p not in text]
    assert not missing, f"the row of {first_cell} no longer says {missing}:\n{text}"
    unlinked = [s for s in sections if s not in rows[0][-1].split()]
    assert not unlinked, f"the row of {first_cell} does not link {unlinked}"


def test_binding_is_not_taught_as_once_for_ever():
    """A bind is repeated after a shape change: the sheet never says "bind once" without "per shape"."""
    text = plain_text(sheet_markdown())
    assert not re.search(r"[Bb]ind (?:io )?once(?! per shape)", text), "bind once, without 'per shape'"


def test_short_sentences():
    """Readers are often Chinese developers reading English: no sentence over 30 words (the
    canonical sentences included: they were split to fit)."""
    text = plain_text(sheet_markdown())
    for line in text.splitlines():
        # a sentence may open with a code name (h_stride, size_with_stride): its backticks are gone
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z`(]|[a-z]\w*_\w)", line):
            assert len(sentence.split()) <= 30, sentence


def test_every_row_links_to_the_section_that_teaches_it():
    rows = [ln for ln in sheet_markdown().splitlines()
            if ln.startswith("| ") and not SEPARATOR.match(ln) and "| § |" not in ln]
    assert len(rows) >= 25
    for row in rows:
        last = row.rstrip().rstrip("|").rsplit("|", 1)[-1]
        assert section_links(last), f"a row without a § link in its last column: {row[:80]}"


def test_every_link_reaches_a_file_and_a_heading():
    links = section_links(sheet_markdown())
    assert len(links) >= 30
    anchors: Dict[Path, Dict[str, str]] = {}
    for href in links:
        target, _, anchor = href.partition("#")
        path = (SHEET.parent / target).resolve()
        assert path.is_file(), f"{href}: no such notebook"
        assert anchor, f"{href}: a link to a notebook names its section"
        anchors.setdefault(path, heading_anchors(path))
        assert anchor in anchors[path], f"{href}: {target} has no heading with that anchor"
        # the link's text is that section's number: [§4.1](04_….ipynb#1-…)
        text = next(m.group("text") for m in LINK.finditer(sheet_markdown()) if m.group("href") == href)
        chapter = re.match(r"0?(\d+)_", target).group(1)
        assert text == f"§{chapter}.{anchor.split('-')[0]}", f"{href} is labelled {text!r}"


def test_the_page_says_where_its_printable_version_is_in_the_book_and_in_jupyterlab():
    screen = [c for c in cells() if "screen-only" in c.get("metadata", {}).get("tags", [])]
    assert len(screen) == 1
    text = source(screen[0])
    assert 'href="cheatsheet-print.html"' in text                 # the book's file, next to the page
    assert "python -m rknnlab export chapters/cheatsheet.ipynb --print" in text
    assert "_build/export/cheatsheet-print.html" in text
    assert "chapters/_build/export/cheatsheet-print.html" in text     # where it goes from the workspace


# --- printing ------------------------------------------------------------------------------------

def _needs_printing():
    missing = []
    if not Path(CHROMIUM).is_file():
        missing.append(f"chromium ({CHROMIUM} not found)")
    try:
        import pypdf  # noqa: F401
    except ImportError:
        missing.append("the Python package pypdf")
    if missing:
        msg = f"printing needs {', '.join(missing)}: apt-get install chromium; pip install pypdf"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg} (CI=true: this test must run in CI)")
        pytest.skip(msg)


def print_to_pdf(page: Path, tmp: Path) -> List[Tuple[float, float, str, float]]:
    """Headless Chromium prints ``page`` with a browser's default print settings (its headers and
    footers on, the page's own @page size and margins); (width, height, text, size of the smallest
    text) of each PDF page, sizes in points."""
    _needs_printing()
    import pypdf
    pdf = tmp / (page.stem + ".pdf")
    proc = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", f"--user-data-dir={tmp / 'chromium-profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--print-to-pdf={pdf}", page.resolve().as_uri()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert pdf.is_file(), f"chromium wrote no PDF (exit {proc.returncode}):\n{proc.stderr[-2000:]}"

    def printed(p) -> Tuple[float, float, str, float]:
        sizes: List[float] = []

        def scale(m) -> float:                      # how a matrix scales lengths (no rotation here)
            return abs(m[0] * m[3] - m[1] * m[2]) ** 0.5

        text = p.extract_text(visitor_text=lambda t, cm, tm, font, size: sizes.append(
            size * scale(tm) * scale(cm)) if t.strip() else None)
        return float(p.mediabox.width), float(p.mediabox.height), text, min(sizes, default=0.0)
    return [printed(p) for p in pypdf.PdfReader(str(pdf)).pages]


def assert_one_clean_a4_page(pages: List[Tuple[float, float, str, float]], page: Path,
                             first_parts: Tuple[str, ...] = ("Who allocates, who frees", "Threads"),
                             when_a_call_fails: str = "When a call fails") -> None:
    assert len(pages) == 1, f"the printable page prints to {len(pages)} pages, not one"
    (w, h, text, smallest), = pages
    assert smallest >= SMALLEST_PT - 0.01, f"text printed at {smallest:.2f} pt: below {SMALLEST_PT} pt"
    assert abs(w - A4_POINTS[0]) < 2 and abs(h - A4_POINTS[1]) < 2, f"not A4 portrait: {w:.1f} x {h:.1f} pt"
    printed = flat(text)
    # pypdf gives CJK as the PDF's compatibility forms (⼀ for 一) with spaces around Latin runs
    normal = re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))
    def same(t: str) -> str:
        return re.sub(r"\s+", "", unicodedata.normalize("NFKC", t))
    assert all(same(p) in normal for p in first_parts), "the sheet's first parts and its rules"
    errors = [when_a_call_fails, "RKNN_LOG_LEVEL=4", "dmesg", "python -m rknnlab doctor"]
    errors += [f"-{-code} " for code in ERRORS] + ["RKNN_ERR_TARGET_PLATFORM_UNMATCH"]
    missing = [e for e in errors if e not in printed and same(e) not in normal]
    assert not missing, f"the printed page lacks the errors' {missing}"
    # the browser's header and footer (date, title, address, "1/1") find no room in the margins
    assert page.name not in text and "1/1" not in text, f"a browser header or footer is printed:\n{text[-300:]}"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`python -m rknnlab export chapters/cheatsheet.ipynb --print`, through the CLI (the sheet is
    markdown only: --no-execute exports the same page without starting a kernel)."""
    pytest.importorskip("nbconvert")
    from rknnlab import cli
    out = tmp_path_factory.mktemp("export") / "cheatsheet-print.html"
    assert cli.main(["export", str(SHEET), "--print", "--no-execute", "-o", str(out)]) == 0
    return out


def test_the_export_is_a_page_for_paper(exported):
    html = exported.read_text(encoding="utf-8")
    assert "size: A4" in html and "@page" in html
    body = html.split("<body", 1)[1]
    assert "cheatsheet-print.html" not in body, "the screen-only cell is left out"
    assert ".ipynb" not in body, "a link to a notebook leads nowhere from the exported file"
    assert "§4.1" in body and "Who allocates, who frees" in body
    assert not re.search(r"""<(?:script|link|img)[^>]+(?:src|href)=["']https?:""", html), "loads from the network"


def test_a_printed_notebook_keeps_outputs_and_drops_code_and_prompts():
    """Any notebook printed: code and prompts are left out of the page (not hidden), outputs
    and markdown stay."""
    pytest.importorskip("nbconvert")
    import nbformat
    from rknnlab.book.export import print_html
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\nSee [§4.1](04_output_reuse.ipynb#1-who-owns-an-output-buffer)."),
        nbformat.v4.new_code_cell("print('CODE-' + 'TEXT')", execution_count=3, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="CODE-TEXT printed\n")]),
        nbformat.v4.new_markdown_cell("SCREEN-ONLY-TEXT", metadata={"tags": ["screen-only"]})])
    body = print_html(nb, "Title").split("<body", 1)[1]
    assert "CODE-TEXT printed" in body and "See §4.1." in body
    assert "&#39;CODE-&#39;" not in body and "'CODE-'" not in body and "CODE-</span>" not in body
    assert not re.search(r'class="jp-(?:Input|Output)Prompt', body) and "In&nbsp;[" not in body
    assert "SCREEN-ONLY-TEXT" not in body
    # in a built site the link points at the section instead
    site = print_html(nb, "Title", link=lambda href: "04_output_reuse.html#who-owns-an-output-buffer")
    assert '<a href="04_output_reuse.html#who-owns-an-output-buffer">§4.1</a>' in site


def test_the_export_prints_to_one_a4_page(exported, tmp_path):
    assert_one_clean_a4_page(print_to_pdf(exported, tmp_path), exported)


def test_the_default_export_file_is_named_print(tmp_path):
    from rknnlab.book.export import export_notebook
    out = export_notebook(SHEET, printable=True, execute=False, build_dir=tmp_path, log=lambda s: None)
    assert out == tmp_path / "export" / "cheatsheet-print.html" and out.is_file()


# --- the book --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_book(tmp_path_factory):
    """A book of the sheet and, for each chapter it links to, a notebook of that chapter's
    headings (the real ones, so that Sphinx gives their sections the real ids); markdown only."""
    for mod in ("sphinx", "myst_nb", "sphinx_book_theme", "nbconvert", "jupyter_cache"):
        pytest.importorskip(mod, reason=f"{mod} is missing: pip install -e '.[book]'")
    import nbformat
    from rknnlab.book.build import build_book
    root = tmp_path_factory.mktemp("book")
    (root / "chapters").mkdir()
    shutil.copy(SHEET, root / "chapters" / SHEET.name)
    targets = sorted({href.partition("#")[0] for href in section_links(sheet_markdown())})
    toml = ['[book]', 'title = "Cheat sheet test book"', 'authors = ["rknnlab tests"]', 'licence = "CC0-1.0"',
            'languages = ["en"]', "", "[build]", 'backend = "sim"', "", "[[parts]]", 'title = "Chapters"']
    for target in targets:
        headings = list(heading_anchors(SHEET.parent / target).values())
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(h + "\n\nText.") for h in headings])
        nbformat.write(nb, str(root / "chapters" / target))
        toml += ["", "[[parts.chapters]]", f'title = "{target}"', f'file = "chapters/{target}"']
    toml += ["", "[[parts.chapters]]", 'title = "Cheat sheet"', 'file = "chapters/cheatsheet.ipynb"']
    (root / "book.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")
    report = build_book(root / "book.toml", backend="sim", log=lambda s: None)
    return report


def test_the_book_build_writes_the_printable_page_next_to_the_sheet(small_book):
    assert small_book.printables == ["chapters/cheatsheet-print.html"]
    out = small_book.out_dir
    printable = out / "chapters" / "cheatsheet-print.html"
    assert printable.is_file()
    # the sheet's page links to it, and the link resolves from where the page is
    page = (out / "chapters" / "cheatsheet.html").read_text(encoding="utf-8")
    assert 'href="cheatsheet-print.html"' in page
    assert (out / "chapters" / "cheatsheet.html").parent.joinpath("cheatsheet-print.html").is_file()
    # no other page got a printable file
    assert sorted(p.name for p in out.rglob("*-print.html")) == ["cheatsheet-print.html"]


def test_the_book_printable_links_reach_the_built_sections(small_book):
    out = small_book.out_dir
    html = (out / "chapters" / "cheatsheet-print.html").read_text(encoding="utf-8")
    assert ".ipynb" not in html
    hrefs = re.findall(r'<a href="([^"#]+\.html)#([^"]+)"', html)
    assert len(hrefs) == len(section_links(sheet_markdown())), "every § link stays a link"
    for page, anchor in hrefs:
        built = (out / "chapters" / page).read_text(encoding="utf-8")
        assert f'id="{anchor}"' in built, f"{page}#{anchor}: no such section in the built page"


def test_the_book_printable_prints_to_one_a4_page(small_book, tmp_path):
    printable = small_book.out_dir / "chapters" / "cheatsheet-print.html"
    assert_one_clean_a4_page(print_to_pdf(printable, tmp_path), printable)


ZH_SHEET = ROOT / "chapters" / "zh" / "cheatsheet.ipynb"


@pytest.mark.skipif(not ZH_SHEET.exists(), reason="no Chinese cheat sheet yet")
def test_the_chinese_sheet_prints_to_one_a4_page_too(tmp_path):
    """The Chinese edition's sheet (速查表) keeps the same promise: one A4 page, no text under
    6.8 pt, no browser header or footer (its CJK glyphs are wider than Latin ones)."""
    pytest.importorskip("nbconvert")
    from rknnlab import cli
    out = tmp_path / "cheatsheet-zh-print.html"
    assert cli.main(["export", str(ZH_SHEET), "--print", "--no-execute", "-o", str(out)]) == 0
    cells = json.loads(ZH_SHEET.read_text(encoding="utf-8"))["cells"]
    headings = [m for c in cells for m in re.findall(r"^##+ (.+)$", "".join(c["source"]), re.M)]
    assert len(headings) >= 3
    assert_one_clean_a4_page(print_to_pdf(out, tmp_path), out, first_parts=tuple(headings[:2]),
                             when_a_call_fails=next(h for h in headings if "失败" in h))
