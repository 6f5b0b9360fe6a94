"""Lab 7, exercise 8 (★ fix a C program): check_c_program compiles the student's program
against the course's rknn_api.h and runs it against the C test double of librknnrt.

Planted wrong answers (each must fail with a message naming what was measured): the program
as published, the published program with only its compile errors fixed (the leak), a buffer
of n_elems bytes for want_float = 1, a buffer allocated anew every frame (malloc, calloc,
never freed), a buffer the program writes into between gets, is_prealloc = 0
released every frame, a mem bound inside the loop, a mem created every frame, outputs read
as the wrong type, a FLOAT32-bound output in a mem of attr.size bytes or in a layout the
runtime does not convert to, no rknn_destroy, mems never destroyed, a crash, a hang; a
program that never runs the model and prints the double's documented formula applied to
the frames (with or without the salt it reads from the model file), one that runs and gets
each frame but prints the formula without the salt, one that gets only one of the outputs,
two runs per frame.  A crash's hint follows the last call the runtime recorded.
Legitimate alternatives that must pass: is_prealloc = 1 into buffers allocated once (with and
without the release), a larger buffer with its real capacity, zero-copy with every mem bound
once (outputs as int8 dequantised by hand, or bound as FLOAT32 the way Rockchip's zero-copy
demos bind them), and the notebook's solution cell.  The program as published, untouched, is
"not done"; any edit of it is judged."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rknnlab.checks import _lab07_c, lab07
from rknnlab.checks._lab07_c_cases import FRAME_BYTES, PUBLISHED, expected, frames, model_bytes, salt

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "labs" / "lab07_misconceptions.ipynb"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found: the check cannot compile")

#: is_prealloc = 1 into buffers allocated once, sized n_elems x 4 (want_float = 1), a release per get
SOLUTION = r"""/* Reuse the output buffers: is_prealloc = 1 into buffers allocated once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rknn_api.h"

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s MODEL < FRAMES\n", argv[0]); return 2; }
    rknn_context ctx;             /* five arguments: the last, rknn_init_extend *, may be NULL */
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) < 0) { fprintf(stderr, "rknn_init failed\n"); return 1; }

    rknn_input_output_num io_num;
    rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num));
    rknn_tensor_attr in_attr = {.index = 0};
    rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &in_attr, sizeof(in_attr));
    rknn_tensor_attr out_attr[io_num.n_output];
    rknn_output outputs[io_num.n_output];
    memset(outputs, 0, sizeof(outputs));
    for (uint32_t i = 0; i < io_num.n_output; i++) {
        out_attr[i].index = i;
        rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attr[i], sizeof(out_attr[i]));
        outputs[i].index = i;
        outputs[i].want_float = 1;
        outputs[i].is_prealloc = 1;                               /* our buffer, allocated once */
        outputs[i].size = out_attr[i].n_elems * sizeof(float);    /* want_float = 1: n_elems x 4 */
        outputs[i].buf = malloc(outputs[i].size);
        if (!outputs[i].buf) { fprintf(stderr, "out of memory\n"); return 1; }
    }

    unsigned char *pixels = malloc(in_attr.n_elems);          /* one uint8 per element, NHWC */
    rknn_input input = {.index = 0, .buf = pixels, .size = in_attr.n_elems,
                        .type = RKNN_TENSOR_UINT8, .fmt = RKNN_TENSOR_NHWC};
    for (int f = 0; fread(pixels, 1, in_attr.n_elems, stdin) == in_attr.n_elems; f++) {
        rknn_inputs_set(ctx, 1, &input);
        rknn_run(ctx, NULL);
        if (rknn_outputs_get(ctx, io_num.n_output, outputs, NULL) < 0) { fprintf(stderr, "get failed\n"); return 1; }
        for (uint32_t i = 0; i < io_num.n_output; i++) {
            const float *values = outputs[i].buf;
            printf("frame %d output %u:", f, i);
            for (uint32_t k = 0; k < out_attr[i].n_elems; k++) printf(" %.2f", values[k]);
            printf("\n");
        }
        rknn_outputs_release(ctx, io_num.n_output, outputs);   /* every get, one release */
    }
    rknn_destroy(ctx);
    for (uint32_t i = 0; i < io_num.n_output; i++) free(outputs[i].buf);
    free(pixels);
    return 0;
}
"""

#: zero-copy: the input and every output in a mem created and bound once, dequantised by hand
ZERO_COPY = r"""/* Zero-copy: every tensor in a mem created and bound once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rknn_api.h"

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    rknn_context ctx;
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) < 0) return 1;
    rknn_input_output_num io_num;
    rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num));
    rknn_tensor_attr in_attr = {.index = 0};
    rknn_query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &in_attr, sizeof(in_attr));
    in_attr.type = RKNN_TENSOR_UINT8;                   /* we write uint8 pixels */
    rknn_tensor_mem *in_mem = rknn_create_mem(ctx, in_attr.size_with_stride);
    if (!in_mem || rknn_set_io_mem(ctx, in_mem, &in_attr) < 0) return 1;
    rknn_tensor_attr out_attr[io_num.n_output];
    rknn_tensor_mem *out_mem[io_num.n_output];
    for (uint32_t i = 0; i < io_num.n_output; i++) {
        memset(&out_attr[i], 0, sizeof(out_attr[i]));
        out_attr[i].index = i;
        rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attr[i], sizeof(out_attr[i]));
        out_mem[i] = rknn_create_mem(ctx, out_attr[i].size_with_stride);
        if (!out_mem[i] || rknn_set_io_mem(ctx, out_mem[i], &out_attr[i]) < 0) return 1;
    }
    uint32_t h = in_attr.dims[1], w = in_attr.dims[2], c = in_attr.dims[3];
    unsigned char *frame = malloc((size_t)h * w * c);
    for (int f = 0; fread(frame, 1, (size_t)h * w * c, stdin) == (size_t)h * w * c; f++) {
        for (uint32_t y = 0; y < h; y++)      /* rows are w_stride pixels apart */
            memcpy((unsigned char *)in_mem->virt_addr + (size_t)y * in_attr.w_stride * c, frame + (size_t)y * w * c, (size_t)w * c);
        rknn_mem_sync(ctx, in_mem, RKNN_MEMORY_SYNC_TO_DEVICE);
        if (rknn_run(ctx, NULL) < 0) return 1;
        for (uint32_t i = 0; i < io_num.n_output; i++) {
            rknn_mem_sync(ctx, out_mem[i], RKNN_MEMORY_SYNC_FROM_DEVICE);
            const int8_t *q = out_mem[i]->virt_addr;
            printf("frame %d output %u:", f, i);
            for (uint32_t k = 0; k < out_attr[i].n_elems; k++)
                printf(" %.2f", (q[k] - out_attr[i].zp) * out_attr[i].scale);
            printf("\n");
        }
    }
    for (uint32_t i = 0; i < io_num.n_output; i++) rknn_destroy_mem(ctx, out_mem[i]);
    rknn_destroy_mem(ctx, in_mem);
    rknn_destroy(ctx);
    free(frame);
    return 0;
}
"""


def replaced(text: str, *pairs: str) -> str:
    """text with each (old, new) pair replaced; every old must be there (a planted bug that
    silently planted nothing would pass for the wrong reason)."""
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert old in text, old
        text = text.replace(old, new)
    return text


def check(text: str):
    result = lab07.check_c_program(text)
    return result, str(result)


#: zero-copy as Rockchip's demos bind outputs: the plain attr with type FLOAT32, n_elems x 4 bytes
ZERO_COPY_FLOAT32 = replaced(
    ZERO_COPY,
    "        rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attr[i], sizeof(out_attr[i]));\n",
    "        rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attr[i], sizeof(out_attr[i]));\n"
    "        out_attr[i].type = RKNN_TENSOR_FLOAT32;            /* the runtime dequantises */\n",
    "rknn_create_mem(ctx, out_attr[i].size_with_stride);\n        if (!out_mem[i]",
    "rknn_create_mem(ctx, out_attr[i].n_elems * sizeof(float));\n        if (!out_mem[i]",
    "const int8_t *q = out_mem[i]->virt_addr;", "const float *v = out_mem[i]->virt_addr;",
    "(q[k] - out_attr[i].zp) * out_attr[i].scale", "v[k]")

NAMES_FIXED = replaced(PUBLISHED, "argv[1], 0, 0) < 0)", "argv[1], 0, 0, NULL) < 0)",
                       "RKNN_QUERY_OUT_ATTR", "RKNN_QUERY_OUTPUT_ATTR", "rknn_deinit(ctx)", "rknn_destroy(ctx)")


# --------------------------------------------------------------------------- must pass
def test_the_solution_passes():
    result, text = check(SOLUTION)
    assert result.passed, text
    assert "one rknn_run each: every printed output equals what the runtime computes" in text
    assert "Note:" not in text


def test_the_solution_from_a_file_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("lab07_fixed.c").write_text(SOLUTION)
    assert lab07.check_c_program("lab07_fixed.c").passed
    assert lab07.check_c_program().passed   # the default name is the notebook's %%writefile file


def test_is_prealloc_1_without_the_release_passes_with_a_note():
    result, text = check(replaced(SOLUTION, "        rknn_outputs_release(ctx, io_num.n_output, outputs);   "
                                  "/* every get, one release */\n", ""))
    assert result.passed, text
    assert "Note:" in text and "A15" not in text and "zipformer" in text


def test_a_larger_buffer_with_its_real_capacity_passes():
    result, text = check(replaced(SOLUTION, "outputs[i].size = out_attr[i].n_elems * sizeof(float);",
                                  "outputs[i].size = out_attr[i].n_elems * sizeof(float) + 256;"))
    assert result.passed, text


def test_zero_copy_bound_once_passes():
    result, text = check(ZERO_COPY)
    assert result.passed, text
    assert "3 mem(s) created and 3 bound, all before the first rknn_run; 3 destroyed" in text


def test_zero_copy_with_float32_outputs_passes():
    """Rockchip's zero-copy demos (rknn_create_mem_demo.cpp) bind each output with the plain
    OUTPUT_ATTR, type set to FLOAT32, in a mem of n_elems x 4 bytes, and read float32."""
    result, text = check(ZERO_COPY_FLOAT32)
    assert result.passed, text
    assert "3 mem(s) created and 3 bound, all before the first rknn_run; 3 destroyed" in text


def test_the_notebooks_solution_cell_passes():
    if not NOTEBOOK.exists():
        pytest.skip("labs/lab07_misconceptions.ipynb is not built yet")
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    if not any("check_c_program" in "".join(c["source"]) for c in cells):
        pytest.skip("lab 7's notebook has no exercise 8 yet")
    sources = ["".join(c["source"]) for c in cells
               if "solution" in c.get("metadata", {}).get("tags", []) and "%%writefile" in "".join(c["source"])]
    assert sources, "no solution cell with %%writefile in lab 7"
    program = sources[0].split("\n", 1)[1]
    result, text = check(program)
    assert result.passed, text


# --------------------------------------------------------------------------- the stub as shipped
@pytest.mark.parametrize("variant", ["as is", "as %%writefile leaves it", "CRLF"])
def test_the_program_as_published_untouched_is_not_done(variant: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    if variant == "as is":
        result = lab07.check_c_program(PUBLISHED)
    else:
        text = PUBLISHED.strip("\n") + "\n" if variant != "CRLF" else PUBLISHED.replace("\n", "\r\n")
        monkeypatch.chdir(tmp_path)
        Path("lab07_fixed.c").write_bytes(text.encode())
        result = lab07.check_c_program("lab07_fixed.c")
    assert result.status == "not done", str(result)
    assert "not done yet" in str(result) and "Hint 1" in str(result)
    assert "rknn_destroy" not in str(result) and "OUTPUT_ATTR" not in str(result)   # no answer given


# --------------------------------------------------------------------------- planted wrong answers
def test_the_program_as_published_edited_a_little_does_not_compile():
    result, text = check(replaced(PUBLISHED, "keep them, never release them.", "keep them."))
    assert result.status == "failed"
    assert "does not compile" in text
    assert "too few arguments to function 'rknn_init'" in text
    assert "'RKNN_QUERY_OUT_ATTR' undeclared" in text and "'rknn_deinit'" in text
    assert "did you mean" not in text     # gcc's guess for rknn_deinit is rknn_init: wrong


@pytest.mark.parametrize("name", ["rknn_free_mem(ctx, NULL);", "rknn_set_mem_strategy(ctx, 0);"])
def test_invented_functions_do_not_compile(name: str):
    result, text = check(replaced(SOLUTION, "    rknn_destroy(ctx);", f"    {name}\n    rknn_destroy(ctx);"))
    assert not result.passed and "does not compile" in text and name.split("(")[0] in text


def test_only_the_compile_errors_fixed_is_the_leak():
    result, text = check(NAMES_FIXED)
    assert result.status == "failed"
    assert "The leak:" in text
    assert "had no rknn_outputs_release" in text and "still held when rknn_destroy ran" in text


def test_a_buffer_of_n_elems_bytes_for_want_float_1_fails():
    result, text = check(replaced(SOLUTION, "outputs[i].size = out_attr[i].n_elems * sizeof(float);",
                                  "outputs[i].size = out_attr[i].n_elems;"))
    assert result.status == "failed"
    assert "rknn_outputs_get returned -9 (RKNN_ERR_OUTPUT_INVALID)" in text
    assert "too small" in text and "n_elems × 4 bytes with want_float = 1" in text


def test_attr_size_for_want_float_1_fails_even_without_checking_the_return_code():
    result, text = check(replaced(SOLUTION,
                                  "outputs[i].size = out_attr[i].n_elems * sizeof(float);",
                                  "outputs[i].size = out_attr[i].size;",
                                  "if (rknn_outputs_get(ctx, io_num.n_output, outputs, NULL) < 0) "
                                  "{ fprintf(stderr, \"get failed\\n\"); return 1; }",
                                  "rknn_outputs_get(ctx, io_num.n_output, outputs, NULL);"))
    assert result.status == "failed" and "returned -9" in text, text


PER_FRAME_BUFFER = replaced(
    SOLUTION,
    "        outputs[i].buf = malloc(outputs[i].size);\n"
    "        if (!outputs[i].buf) { fprintf(stderr, \"out of memory\\n\"); return 1; }\n", "",
    "        rknn_run(ctx, NULL);\n",
    "        rknn_run(ctx, NULL);\n"
    "        for (uint32_t i = 0; i < io_num.n_output; i++) outputs[i].buf = malloc(outputs[i].size);\n",
    "        rknn_outputs_release(ctx, io_num.n_output, outputs);   /* every get, one release */\n",
    "        rknn_outputs_release(ctx, io_num.n_output, outputs);   /* every get, one release */\n"
    "        for (uint32_t i = 0; i < io_num.n_output; i++) free(outputs[i].buf);\n",
    "    rknn_destroy(ctx);\n    for (uint32_t i = 0; i < io_num.n_output; i++) free(outputs[i].buf);\n",
    "    rknn_destroy(ctx);\n")


def test_a_buffer_allocated_anew_every_frame_fails_even_at_the_same_address():
    result, text = check(PER_FRAME_BUFFER)
    assert result.status == "failed"
    assert "did not hold what the last get wrote into it" in text
    assert "freshly allocated" in text or "freed" in text, text


def test_a_new_buffer_every_frame_never_freed_fails():
    result, text = check(replaced(PER_FRAME_BUFFER,
                                  "        for (uint32_t i = 0; i < io_num.n_output; i++) free(outputs[i].buf);\n",
                                  ""))
    assert result.status == "failed" and "did not hold what the last get wrote into it" in text, text
    assert "freshly allocated" in text or "new address" in text, text


def test_a_buffer_calloced_every_frame_fails():
    result, text = check(replaced(PER_FRAME_BUFFER, "outputs[i].buf = malloc(outputs[i].size);",
                                  "outputs[i].buf = calloc(1, outputs[i].size);"))
    assert result.status == "failed" and "did not hold what the last get wrote into it" in text, text


def test_a_buffer_overwritten_between_gets_fails():
    """In-place post-processing: the course's measurement of reuse (the buffer still holds what
    the last get wrote into it) cannot tell it from a new buffer, so it fails with its own hint."""
    result, text = check(replaced(SOLUTION, "            printf(\"\\n\");\n",
                                  "            printf(\"\\n\");\n            ((float *)outputs[i].buf)[0] += 1000.0f;\n"))
    assert result.status == "failed" and "changed by your program since the last get" in text, text
    assert "only read the buffer" in text


def test_is_prealloc_0_released_every_frame_is_no_reuse():
    result, text = check(replaced(NAMES_FIXED,
                                  "    rknn_outputs_release(ctx, io_num.n_output, outputs);       /* once, at the end */\n",
                                  "",
                                  "            printf(\"\\n\");\n        }\n",
                                  "            printf(\"\\n\");\n        }\n"
                                  "        rknn_outputs_release(ctx, io_num.n_output, outputs);\n"))
    assert result.status == "failed"
    assert "allocated" in text and "inside rknn_outputs_get" in text and "no reuse" in text
    assert "The leak" not in text


def test_a_mem_bound_inside_the_loop_fails():
    moved = replaced(ZERO_COPY,
                     "        if (rknn_run(ctx, NULL) < 0) return 1;\n",
                     "        for (uint32_t i = 0; i < io_num.n_output; i++)\n"
                     "            if (rknn_set_io_mem(ctx, out_mem[i], &out_attr[i]) < 0) return 1;\n"
                     "        if (rknn_run(ctx, NULL) < 0) return 1;\n")
    result, text = check(moved)
    assert result.status == "failed"
    assert "rknn_set_io_mem" in text and "binds inside the loop" in text


def test_a_mem_created_every_frame_fails():
    per_frame = replaced(ZERO_COPY,
                         "        if (rknn_run(ctx, NULL) < 0) return 1;\n",
                         "        rknn_tensor_mem *scratch = rknn_create_mem(ctx, 64);\n"
                         "        if (rknn_run(ctx, NULL) < 0) return 1;\n"
                         "        rknn_destroy_mem(ctx, scratch);\n")
    result, text = check(per_frame)
    assert result.status == "failed" and "created" in text and "after the first rknn_run" in text, text


def test_outputs_read_as_the_wrong_type_fail():
    result, text = check(replaced(ZERO_COPY, "(q[k] - out_attr[i].zp) * out_attr[i].scale", "(float)q[k]"))
    assert result.status == "failed" and "differ from what the runtime computes" in text, text


def test_a_float32_output_in_a_mem_of_attr_size_fails_with_type_and_layout():
    result, text = check(replaced(ZERO_COPY_FLOAT32, "rknn_create_mem(ctx, out_attr[i].n_elems * sizeof(float));",
                                  "rknn_create_mem(ctx, out_attr[i].size);"))
    assert result.status == "failed" and "rknn_set_io_mem returned -5 (RKNN_ERR_PARAM_INVALID)" in text, text
    assert "attr type FLOAT32, fmt NCHW" in text and "mem of 10 bytes" in text
    assert "type and layout" in text and "n_elems × 4 bytes" in text


def test_a_float32_output_in_the_native_blocked_layout_fails():
    result, text = check(replaced(ZERO_COPY_FLOAT32, "RKNN_QUERY_OUTPUT_ATTR", "RKNN_QUERY_NATIVE_OUTPUT_ATTR"))
    assert result.status == "failed" and "returned -5" in text and "fmt NC1HWC2" in text, text


def test_float32_outputs_read_as_int8_fail():
    result, text = check(replaced(ZERO_COPY_FLOAT32, "const float *v = out_mem[i]->virt_addr;",
                                  "const int8_t *v = out_mem[i]->virt_addr;",
                                  "v[k]", "(v[k] - out_attr[i].zp) * out_attr[i].scale"))
    assert result.status == "failed" and "differ from what the runtime computes" in text, text


def test_one_frame_short_fails():
    result, text = check(replaced(SOLUTION, "; f++) {\n        rknn_inputs_set", "; f++) {\n        if (f == 0) continue;\n        rknn_inputs_set"))
    assert result.status == "failed" and "printed no `frame F output I:` line for frame 0" in text, text


#: no rknn_run, no rknn_outputs_get: the double's documented formula (salt 0) applied to each frame
#: (a student's program, from the review of lab 7)
FORMULA_ONLY = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rknn_api.h"
int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    rknn_context ctx;
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) < 0) return 1;
    rknn_tensor_attr in_attr = {.index = 0};
    rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &in_attr, sizeof(in_attr));
    unsigned char *pixels = malloc(in_attr.n_elems);
    long salt = 0;
    for (int f = 0; fread(pixels, 1, in_attr.n_elems, stdin) == in_attr.n_elems; f++) {
        long sum = 0;
        for (uint32_t i = 0; i < in_attr.n_elems; i++) sum += (int)pixels[i] - 128;
        printf("frame %d output 0:", f);
        for (int k = 0; k < 10; k++) printf(" %.2f", (float)((int8_t)(uint8_t)((unsigned long)(sum + k + salt) & 0xff) + 10) * 0.5f);
        printf("\nframe %d output 1:", f);
        for (int k = 0; k < 16; k++) printf(" %.2f", (float)(int8_t)(uint8_t)(((int)pixels[k] - 128 + salt) & 0xff) * 0.25f);
        printf("\n");
    }
    rknn_destroy(ctx);
    free(pixels);
    return 0;
}
"""

#: ... and with the salt read from the model file the check wrote (the double's payload)
READS_THE_SALT = replaced(
    FORMULA_ONLY,
    "    long salt = 0;\n",
    "    long salt = 0;\n"
    "    FILE *model = fopen(argv[1], \"rb\");\n"
    "    char payload[1024] = \"\";\n"
    "    if (model) { size_t got = fread(payload, 1, sizeof(payload) - 1, model); payload[got] = 0; fclose(model); }\n"
    "    const char *word = strstr(payload, \"salt=\");\n"
    "    if (word) salt = atol(word + 5);\n")


def test_the_reads_the_salt_plant_prints_the_runtimes_values(tmp_path: Path):
    """The plant below must fail on what it skips (rknn_run), not on its values: run against a
    model it can read, it prints the check's truth."""
    cc = shutil.which("gcc")
    source, exe = tmp_path / "p.c", str(tmp_path / "p")
    source.write_text(READS_THE_SALT)
    _lab07_c._compile(cc, str(source), _lab07_c._double_library(cc), exe)
    n = salt()
    model = tmp_path / "model.rknn"
    model.write_bytes(model_bytes(n))
    frame = frames(1)
    out = subprocess.run([exe, str(model)], input=frame.tobytes(), stdout=subprocess.PIPE, check=True,
                         env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1")).stdout
    lines = out.decode().splitlines()
    for i, values in enumerate(expected(frame[0], n)):
        assert [float(v) for v in lines[i].split(":")[1].split()] == pytest.approx(values, abs=0.006)


@pytest.mark.parametrize("program", [FORMULA_ONLY, READS_THE_SALT], ids=["formula", "formula with the salt"])
def test_printing_without_running_fails_on_the_run_count(program: str):
    result, text = check(program)
    assert result.status == "failed", text
    assert " 0 rknn_run and 0 rknn_outputs_get for " in text and "frames: get each frame's outputs" in text, text


def test_running_and_getting_but_printing_the_formula_fails_on_the_values():
    """The salt drawn at every check: the header's formula without it is not the runtime's output."""
    program = replaced(
        FORMULA_ONLY,
        "    unsigned char *pixels = malloc(in_attr.n_elems);\n",
        "    unsigned char *pixels = malloc(in_attr.n_elems);\n"
        "    rknn_input input = {.index = 0, .buf = pixels, .size = in_attr.n_elems,\n"
        "                        .type = RKNN_TENSOR_UINT8, .fmt = RKNN_TENSOR_NHWC};\n"
        "    float scores[10], boxes[16];\n"
        "    rknn_output outputs[2] = {{.want_float = 1, .is_prealloc = 1, .index = 0, .buf = scores, "
        ".size = sizeof scores},\n"
        "                              {.want_float = 1, .is_prealloc = 1, .index = 1, .buf = boxes, "
        ".size = sizeof boxes}};\n",
        "        long sum = 0;\n",
        "        rknn_inputs_set(ctx, 1, &input);\n"
        "        rknn_run(ctx, NULL);\n"
        "        rknn_outputs_get(ctx, 2, outputs, NULL);\n"
        "        rknn_outputs_release(ctx, 2, outputs);\n"
        "        long sum = 0;\n")
    result, text = check(program)
    assert result.status == "failed", text
    assert "printed values differ from what the runtime computes" in text, text


def test_getting_one_output_and_computing_the_other_fails():
    program = replaced(SOLUTION,
                       "if (rknn_outputs_get(ctx, io_num.n_output, outputs, NULL) < 0)",
                       "if (rknn_outputs_get(ctx, 1, outputs, NULL) < 0)",
                       "        rknn_outputs_release(ctx, io_num.n_output, outputs);",
                       "        rknn_outputs_release(ctx, 1, outputs);")
    result, text = check(program)
    assert result.status == "failed", text
    assert "Output 1 (boxes): 0 rknn_outputs_get returned it for" in text, text


def test_two_runs_per_frame_fail_on_the_run_count():
    result, text = check(replaced(SOLUTION, "        rknn_run(ctx, NULL);\n",
                                  "        rknn_run(ctx, NULL);\n        rknn_run(ctx, NULL);\n"))
    assert result.status == "failed" and "rknn_run and " in text and "get each frame's outputs" in text, text


def test_no_rknn_destroy_fails():
    result, text = check(replaced(SOLUTION, "    rknn_destroy(ctx);\n", ""))
    assert result.status == "failed" and "context(s) were still alive" in text, text


def test_mems_never_destroyed_fail():
    result, text = check(replaced(ZERO_COPY, "    rknn_destroy_mem(ctx, in_mem);\n", ""))
    assert result.status == "failed" and "1 mem(s) were still alive" in text, text
    assert "rknn_create_mem: 3, rknn_destroy_mem: 2" in text


def test_a_crash_is_reported_not_raised():
    result, text = check(replaced(SOLUTION, "    rknn_destroy(ctx);\n", "    abort();\n"))
    assert result.status == "failed" and "crashed (SIGABRT)" in text, text


@pytest.mark.parametrize("where, last, hint, not_hint", [
    ("double free", "rknn_destroy", "double free, or a free() of a buffer the runtime owns", "rknn_output.size"),
    ("after get", "rknn_outputs_get", "wrote past the end of a buffer", "double free"),
    ("after release", "rknn_outputs_release", "after rknn_outputs_release", "double free"),
    ("after run", "rknn_run", "before any get", "double free"),
])
def test_a_crashs_hint_follows_the_last_recorded_call(where: str, last: str, hint: str, not_hint: str):
    """The review's own bug (free(pixels) twice, after rknn_destroy) got the hint for a crash
    after rknn_outputs_get: the hint now follows the last call the runtime recorded."""
    if where == "double free":
        program = replaced(SOLUTION, "    free(pixels);\n",   # a loop's body freeing the wrong buffer
                           "    for (uint32_t i = 0; i < io_num.n_output; i++) free(pixels);\n")
    elif where == "after get":
        program = replaced(SOLUTION, "{ fprintf(stderr, \"get failed\\n\"); return 1; }\n",
                           "{ fprintf(stderr, \"get failed\\n\"); return 1; }\n        if (f == 1) abort();\n")
    elif where == "after release":
        program = replaced(SOLUTION, "    rknn_destroy(ctx);\n", "    abort();\n")
    else:
        program = replaced(SOLUTION, "        rknn_run(ctx, NULL);\n",
                           "        rknn_run(ctx, NULL);\n        if (f == 1) abort();\n")
    result, text = check(program)
    assert result.status == "failed" and "crashed (SIGABRT)" in text, text
    assert f"The last memory call the runtime recorded was {last}." in text, text
    assert hint in text and not_hint not in text, text


def test_a_hang_is_stopped(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_lab07_c, "_RUN_TIMEOUT_S", 1)
    result, text = check(replaced(SOLUTION, "    rknn_destroy(ctx);\n", "    for (;;) {}\n"))
    assert result.status == "failed" and "did not finish within 1 s" in text, text


# --------------------------------------------------------------------------- not available, not done
def test_no_compiler_is_not_a_failure(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_lab07_c, "_compiler", lambda: None)
    result, text = check(SOLUTION)
    assert result.status == "not done"
    assert "Not available here" in text and "build-essential" in text


def test_a_missing_file_is_not_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = lab07.check_c_program("lab07_fixed.c")
    assert result.status == "not done" and "%%writefile" in str(result)


def test_the_summary_counts_the_check():
    assert lab07.check_c_program(SOLUTION).passed
    assert lab07.results()["Exercise 8 ★ — fix a C program"].passed


# --------------------------------------------------------------------------- the truth
def test_expected_follows_the_doubles_documented_model():
    frame = frames(1)[0]
    assert len(frame) == FRAME_BYTES
    q = [int(u) - 128 for u in frame]
    total = sum(q)
    for n in (0, 1, 200):
        scores, boxes = expected(frame, n)
        assert boxes == tuple(((((v + n) & 0xFF) ^ 0x80) - 0x80) * 0.25 for v in q[:16])
        assert scores[3] == ((((total + 3 + n) & 0xFF) ^ 0x80) - 0x80 + 10) * 0.5


def test_the_salt_is_drawn_and_changes_every_output():
    drawn = {salt() for _ in range(200)}
    assert 0 not in drawn and drawn <= set(range(1, 256)) and len(drawn) > 50
    frame = frames(1)[0]
    for n in (1, 128, 255):
        assert b" salt=%d" % n in model_bytes(n)
        for salted, plain in zip(expected(frame, n), expected(frame, 0)):
            assert all(a != b for a, b in zip(salted, plain))


@pytest.mark.parametrize("allocated", [
    "out_attr[i].n_elems * sizeof(float) - 4",       # hidden by glibc's rounding without the check's malloc debug
    "out_attr[i].n_elems",                           # glibc may abort at the end
])
def test_a_buffer_smaller_than_its_declared_size_fails(allocated: str):
    """Review N-1: rknn_output.size says n_elems x 4 bytes, the program's malloc'd block holds
    fewer; the runtime writes past its end (the double reads the block's real size)."""
    result, text = check(replaced(SOLUTION, "outputs[i].buf = malloc(outputs[i].size);",
                                  f"outputs[i].buf = malloc({allocated});"))
    assert result.status == "failed", text
    assert "rknn_output.size says 40 bytes, the buffer holds only" in text, text


def test_glibcs_heap_message_adds_the_short_buffer_to_the_hint():
    from rknnlab.checks import _lab07_c
    run = _lab07_c._Run(-6, "", "free(): invalid next size (fast)\n", [{"call": "rknn_destroy", "ret": 0}])
    with pytest.raises(_lab07_c._Fail) as failed:
        _lab07_c._judge_exit(run)
    assert "rknn_output.size larger than what you allocated" in failed.value.hint, failed.value.hint


def test_a_larger_buffer_with_its_real_size_still_passes():
    """The rule allows a larger buffer when rknn_output.size gives its real capacity."""
    result, text = check(replaced(SOLUTION, "outputs[i].buf = malloc(outputs[i].size);",
                                  "outputs[i].buf = malloc(outputs[i].size + 64); outputs[i].size += 64;"))
    assert result.passed, text
