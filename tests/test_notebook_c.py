"""Every C block in the course's notebooks compiles.

Each fenced ```c block (also ```{code-block} c, and blocks nested in MyST
admonitions) in a markdown cell of a notebook under chapters/ or labs/ (any
depth) is compiled with ``gcc -fsyntax-only -std=c11 -Wall -Wextra -Werror``
against lib/rknnlab/c/rknn_api.h, the project's own declarations of the RKNN C
API written from the facts sheets.

- A block that defines a function at top level (a line at column 0 that
  declares a function and has no ``;``, e.g. ``int main(void)`` or
  ``static int f(rknn_context ctx,``) is a whole translation unit: it gets the
  #includes <stdio.h> <stdlib.h> <string.h> <stdint.h> <stdbool.h>
  "rknn_api.h", then its prelude at file scope, then the block.
- Any other block is a fragment, compiled as
  ``int fragment(void) { <prelude> <block> return 0; }`` after the same
  #includes, with -Wno-unused-variable -Wno-unused-but-set-variable on top.
  Its preprocessor lines (``#include <malloc.h>``) go to the top of the file.
- The prelude declares what the block uses without showing it: an HTML
  comment ``<!-- c-prelude: rknn_context ctx = 0; -->`` directly above the
  fence (blank lines between are allowed), in the same markdown cell.  Its
  preprocessor lines go to the top of the file, before the standard
  #includes: ``<!-- c-prelude: #define _POSIX_C_SOURCE 200809L`` then, on the
  next line, ``#include <time.h>`` and the declarations.

Test ids are ``<notebook>:<cell>:<block>``: the notebook's path from the repo
root, the cell's index in the notebook (0-based, as nbformat counts) and the
block's number in the cell (1-based).

``python tests/test_notebook_c.py [-o FILE]`` lists the failing blocks with
gcc's first error (and writes the list to FILE).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
C_API = ROOT / "lib" / "rknnlab" / "c"
NOTEBOOK_DIRS = ("chapters", "labs")

GCC_FLAGS = ["-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror"]
FRAGMENT_FLAGS = ["-Wno-unused-variable", "-Wno-unused-but-set-variable"]
INCLUDES = ("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stdint.h>\n"
            "#include <stdbool.h>\n#include \"rknn_api.h\"\n")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_PRELUDE = re.compile(r"^\s*<!--\s*c-prelude:(?P<text>.*?)-->\s*$", re.DOTALL)
_C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "goto",
               "typedef", "_Static_assert", "_Alignof", "_Generic"}
# a type (one or more words, maybe pointers), then the function's name and "("
_FUNCTION_START = re.compile(r"^(?:[A-Za-z_]\w*[ \t*]+)+\**(?P<name>[A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class CBlock:
    notebook: str      # path from the repo root
    cell: int          # index of the cell in the notebook, 0-based
    number: int        # the block's number in its cell, 1-based
    code: str
    prelude: str       # "" when the block has none

    @property
    def id(self) -> str:
        return f"{self.notebook}:{self.cell}:{self.number}"

    @property
    def is_translation_unit(self) -> bool:
        return defines_a_function(self.code)


class Compiled(NamedTuple):
    ok: bool
    errors: str        # gcc's stderr
    source: str        # what gcc compiled


def defines_a_function(code: str) -> bool:
    """True if a line at column 0 starts a function definition: a function's
    declarator followed by ``{`` or by nothing that ends it (``;`` ends a
    prototype or a statement)."""
    for line in code.splitlines():
        match = _FUNCTION_START.match(line)
        if not match or match.group("name") in _C_KEYWORDS or line.split()[0] in _C_KEYWORDS:
            continue
        rest = line[match.end():]
        if ";" not in rest or ("{" in rest and rest.index("{") < rest.index(";")):
            return True
    return False


def _prelude_above(lines: List[str]) -> str:
    """The c-prelude comment that ends on the last non-blank line of ``lines``, or ""."""
    end = len(lines)
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    if end == 0 or not lines[end - 1].rstrip().endswith("-->"):
        return ""
    start = end - 1
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    if start < 0:
        return ""
    match = _PRELUDE.match("\n".join(lines[start:end]))
    return match.group("text").strip() if match else ""


def _is_c(info: str) -> bool:
    words = info.split()
    if not words:
        return False
    if words[0].lower() == "c":
        return True
    # MyST's {code-block} c / {code} c / {code-cell} c
    return words[0] in ("{code-block}", "{code}", "{code-cell}", "{sourcecode}") \
        and len(words) > 1 and words[1].lower() == "c"


def extract_c_blocks(markdown: str) -> List[Tuple[str, str]]:
    """The C blocks of one markdown text, in order, each as (code, prelude).

    Fences whose info string is a MyST directive ({note}, {admonition}, ...)
    hold markdown: their content is searched too.  Any other fence is
    literal: a ```c fence inside a ```python one is not C."""
    lines = markdown.splitlines()
    blocks: List[Tuple[str, str]] = []
    directives: List[Tuple[str, int]] = []    # open directive fences: (char, length)
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info, indent = match.group("fence"), match.group("info"), len(match.group("indent"))
        if not info:   # a bare fence closes the innermost directive it matches
            if directives and directives[-1][0] == fence[0] and len(fence) >= directives[-1][1]:
                directives.pop()
            i += 1
            continue
        if info.startswith("{") and not _is_c(info):
            directives.append((fence[0], len(fence)))
            i += 1
            continue
        # a literal block: read to its closing fence
        body: List[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and not close.group("info") and close.group("fence")[0] == fence[0] \
                    and len(close.group("fence")) >= len(fence):
                break
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip())):])
            j += 1
        if _is_c(info):
            blocks.append(("\n".join(body) + "\n", _prelude_above(lines[:i])))
        i = j + 1
    return blocks


def orphan_preludes(markdown: str) -> int:
    """How many c-prelude comments in ``markdown`` sit above no C block."""
    return markdown.count("c-prelude:") - sum(1 for _, prelude in extract_c_blocks(markdown)
                                              if prelude)


def notebooks(root: Path = ROOT) -> List[Path]:
    found = []
    for top in NOTEBOOK_DIRS:
        found += [p for p in (root / top).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def c_blocks(root: Path = ROOT) -> Iterator[CBlock]:
    for path in notebooks(root):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "markdown":
                continue
            for number, (code, prelude) in enumerate(extract_c_blocks(_cell_source(cell)), 1):
                yield CBlock(path.relative_to(root).as_posix(), index, number, code, prelude)


def _split_directives(code: str) -> Tuple[str, str]:
    """(the preprocessor lines of ``code``, the rest with those lines blanked,
    so that line numbers stay those of the block)."""
    lines = code.splitlines()
    directives = "".join(line + "\n" for line in lines if line.lstrip().startswith("#"))
    rest = "\n".join("" if line.lstrip().startswith("#") else line for line in lines)
    return directives, rest


def source_of(block: CBlock) -> str:
    """The C file gcc compiles for ``block``.  Preprocessor lines of the
    prelude (and of a fragment) come first, before the standard #includes, so
    that a feature-test macro (#define _POSIX_C_SOURCE 200809L) works; #line
    directives make gcc count lines in the block and in the prelude."""
    name = block.id.replace('"', "'")
    prelude_directives, prelude = _split_directives(block.prelude)
    if block.is_translation_unit:
        return (prelude_directives + INCLUDES + f'#line 1 "{name} (prelude)"\n{prelude}\n'
                + f'#line 1 "{name}"\n{block.code}')
    directives, body = _split_directives(block.code)
    return (prelude_directives + directives + INCLUDES
            + "int fragment(void)\n{\n"
            + f'#line 1 "{name} (prelude)"\n{prelude}\n'
            + f'#line 1 "{name}"\n{body}\n'
            + "return 0;\n}\n")


def compile_block(block: CBlock, gcc: str) -> Compiled:
    source = source_of(block)
    flags = GCC_FLAGS + ([] if block.is_translation_unit else FRAGMENT_FLAGS)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "block.c"
        path.write_text(source, encoding="utf-8")
        run = subprocess.run([gcc, *flags, "-I", str(C_API), str(path)], capture_output=True,
                             text=True, timeout=60, env=dict(os.environ, LC_ALL="C"))
    return Compiled(run.returncode == 0, run.stderr, source)


def failure_message(block: CBlock, compiled: Compiled) -> str:
    numbered = "\n".join(f"{n:3d} | {line}" for n, line in enumerate(block.code.splitlines(), 1))
    kind = "translation unit" if block.is_translation_unit else "fragment"
    return (f"the C block {block.id} ({kind}) does not compile:\n{compiled.errors}\n"
            f"--- prelude ---\n{block.prelude or '(none)'}\n--- block ---\n{numbered}\n")


def find_gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("gcc not found, and CI is set: the notebooks' C must be compiled in CI")
        pytest.skip("gcc not found: the notebooks' C blocks cannot be compiled")
    return gcc


BLOCKS = list(c_blocks())


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_c_block_compiles(block: CBlock):
    compiled = compile_block(block, find_gcc())
    assert compiled.ok, failure_message(block, compiled)


def test_the_course_has_c_blocks():
    assert len(BLOCKS) >= 10   # the extractor finding nothing must not pass silently


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_c_prelude_sits_above_a_c_block(path: Path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    orphans = [index for index, cell in enumerate(cells) if cell.get("cell_type") == "markdown"
               and orphan_preludes(_cell_source(cell))]
    assert orphans == [], (f"cells {orphans}: a <!-- c-prelude: ... --> comment that is not "
                           "directly above a ```c fence is ignored")


# ----------------------------------------------------------------- the tester tested

def _block(code: str, prelude: str = "") -> CBlock:
    return CBlock("unit.ipynb", 0, 1, code, prelude)


def test_extractor_finds_c_blocks_with_their_preludes():
    markdown = "\n".join([
        "Text.", "", "<!-- c-prelude: rknn_context ctx = 0; -->", "```c", "rknn_destroy(ctx);", "```",
        "```python", "```c", "not C: inside a python block", "```",
        "````{note}", "Nested.", "", "<!--", "c-prelude: int x = 1;", "-->", "", "```C", "x++;", "```",
        "````",
        "```sh", "gcc demo.c", "```",
        "~~~{code-block} c", "int y = 2;", "~~~",
        "```c", "no prelude here;", "```",
    ])
    assert extract_c_blocks(markdown) == [
        ("rknn_destroy(ctx);\n", "rknn_context ctx = 0;"),
        ("x++;\n", "int x = 1;"),
        ("int y = 2;\n", ""),
        ("no prelude here;\n", ""),
    ]
    assert orphan_preludes(markdown) == 0
    assert orphan_preludes("<!-- c-prelude: int x; -->\n\nText.\n```c\nx;\n```\n") == 1


def test_extractor_reads_only_markdown_cells(tmp_path: Path):
    (tmp_path / "chapters" / "zh").mkdir(parents=True)
    cells = [{"cell_type": "code", "source": "# ```c\n# int broken(\n# ```\n", "metadata": {}},
             {"cell_type": "markdown", "source": ["```c\n", "int a = 1;\n", "```\n"], "metadata": {}}]
    (tmp_path / "chapters" / "zh" / "x.ipynb").write_text(json.dumps({"cells": cells}))
    assert [(b.id, b.code) for b in c_blocks(tmp_path)] == [("chapters/zh/x.ipynb:1:1", "int a = 1;\n")]


def test_translation_units_and_fragments_are_told_apart():
    assert defines_a_function("int main(void)\n{\n    return 0;\n}\n")
    assert defines_a_function("static int f(rknn_context ctx,\n             int n) {\n}\n")
    assert defines_a_function("static void *worker(void *arg)\n{\n}\n")
    assert not defines_a_function("rknn_run(ctx, NULL);\nif (ret < 0) printf(\"x\");\n")
    assert not defines_a_function("rknn_tensor_mem *mem = rknn_create_mem(ctx, 64);\n")
    assert not defines_a_function("int postprocess(float *scores);\n")
    assert defines_a_function("static int one(void) { return 1; }\n")
    assert not defines_a_function("    int inner(void) {\n")   # not at column 0
    assert not defines_a_function("else if (x) {\n")


def test_a_broken_block_fails_with_gcc_message_block_and_prelude():
    gcc = find_gcc()
    broken = _block("rknn_output outs[1] = {{ .index = 0 }};\nrknn_output outs[1];\n",
                    prelude="rknn_context ctx = 0;")
    compiled = compile_block(broken, gcc)
    assert not compiled.ok
    message = failure_message(broken, compiled)
    assert "redefinition of 'outs'" in message or "redeclaration of 'outs'" in message
    assert "unit.ipynb:0:1:2:" in message              # gcc points into the block, at line 2
    assert "rknn_context ctx = 0;" in message and "  2 | rknn_output outs[1];" in message


@pytest.mark.parametrize("code, prelude", [
    ("rknn_deinit(ctx);\n", "rknn_context ctx = 0;"),                     # invented function
    ("int q = RKNN_QUERY_OUT_ATTR;\n", ""),                               # invented constant
    ("rknn_init(&ctx, \"m.rknn\", 0, 0);\n", "rknn_context ctx;"),        # four arguments
    ("int i = 0; uint32_t n = 3; if (i < n) {}\n", ""),                   # -Wsign-compare
    ("rknn_destroy(ctx);\n", ""),                                         # ctx not declared
    ("int main(void) { int unused; return 0; }\n", ""),                  # -Wunused in a whole program
])
def test_wrong_c_is_refused(code: str, prelude: str):
    assert not compile_block(_block(code, prelude), find_gcc()).ok


@pytest.mark.parametrize("code, prelude", [
    ("rknn_tensor_mem *mem = rknn_create_mem(ctx, 64);\nrknn_destroy_mem(ctx, mem);\n",
     "rknn_context ctx = 0;"),
    ("#include <malloc.h>\nstruct mallinfo2 before = mallinfo2();\n", ""),
    ("static int twice(int x)\n{\n    return 2 * x;\n}\nint main(void) { return twice(1) - 2; }\n", ""),
    ("static int use(rknn_context c) { return rknn_destroy(c); }\n", "struct job { int n; };"),
    ("int unused_in_a_fragment = 0;\n", ""),
    ("struct timespec t0;\nclock_gettime(CLOCK_MONOTONIC, &t0);\n",
     "#define _POSIX_C_SOURCE 200809L\n#include <time.h>"),
])
def test_right_c_is_accepted(code: str, prelude: str):
    compiled = compile_block(_block(code, prelude), find_gcc())
    assert compiled.ok, compiled.errors


# ----------------------------------------------------------------- the list for the notebooks' owners

def _error_lines(block: CBlock, errors: str) -> List[str]:
    """gcc's error lines, each as "line L:C: error: ..." (L counts in the block)."""
    found = []
    for line in errors.splitlines():
        if "error:" not in line:
            continue
        line = line.strip()
        for prefix, shown in ((block.id + " (prelude):", "prelude line "), (block.id + ":", "line ")):
            if line.startswith(prefix):
                line = shown + line[len(prefix):]
                break
        found.append(line)
    return found or [errors.strip() or "(gcc gave no message)"]


def main(argv: Optional[List[str]] = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description="List the notebooks' C blocks that do not compile.")
    parser.add_argument("-o", "--output", help="also write the list to this file")
    args = parser.parse_args(argv)
    gcc = shutil.which("gcc")
    if gcc is None:
        print("gcc not found", file=sys.stderr)
        return 2
    lines = []
    blocks = list(c_blocks())
    for block in blocks:
        compiled = compile_block(block, gcc)
        if not compiled.ok:
            lines.append(block.id + "".join(f"\n    {error}"
                                            for error in _error_lines(block, compiled.errors)))
    report = (f"{len(lines)} of {len(blocks)} C blocks fail to compile "
              f"(python tests/test_notebook_c.py; pytest -q tests/test_notebook_c.py for gcc's full "
              f"output).\nA name a fragment uses but does not declare goes in a hidden prelude "
              f"directly above the fence: <!-- c-prelude: rknn_context ctx = 0; -->; the rules are "
              f"in the docstring of tests/test_notebook_c.py.\nEach entry is notebook:cell:block (cell: "
              f"0-based index in the notebook; block: 1-based in the cell), then gcc's errors, "
              f"lines counted in the block.\n\n" + "".join(line + "\n" for line in lines))
    print(report, end="")
    if args.output:
        Path(args.output).write_text(report, encoding="utf-8")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
