"""What Lab 7's exercise 8 hands to the student, and the truth its check judges by (import
it from nowhere).

- the program as the widely copied recipe writes it (the notebook shows it in a ``text``
  fence: it does not compile against the runtime's API);
- the check's fake model and frames: a model file for the course's C test double of
  librknnrt (lib/rknnlab/c/rknn_double.c) with a salt drawn at every check, and random
  uint8 frames;
- what that double computes for a frame (its header comment documents the fake model),
  printed the way the program prints it.
"""
from __future__ import annotations

import os
from typing import List, Tuple

import numpy as np

#: the file the notebook's %%writefile cell writes, and the check reads by default
FILE_NAME = "lab07_fixed.c"

#: the program as published: three names the runtime does not have, and the outputs kept
#: without rknn_outputs_release
PUBLISHED = r"""/* Reuse the output buffers: keep them, never release them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rknn_api.h"

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s MODEL < FRAMES\n", argv[0]); return 2; }
    rknn_context ctx;
    if (rknn_init(&ctx, argv[1], 0, 0) < 0) { fprintf(stderr, "rknn_init failed\n"); return 1; }

    rknn_input_output_num io_num;
    rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num));
    rknn_tensor_attr in_attr = {.index = 0};
    rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &in_attr, sizeof(in_attr));
    rknn_tensor_attr out_attr[io_num.n_output];
    rknn_output outputs[io_num.n_output];
    memset(outputs, 0, sizeof(outputs));
    for (uint32_t i = 0; i < io_num.n_output; i++) {
        out_attr[i].index = i;
        rknn_query(ctx, RKNN_QUERY_OUT_ATTR, &out_attr[i], sizeof(out_attr[i]));
        outputs[i].index = i;
        outputs[i].want_float = 1;
    }

    unsigned char *pixels = malloc(in_attr.n_elems);          /* one uint8 per element, NHWC */
    rknn_input input = {.index = 0, .buf = pixels, .size = in_attr.n_elems,
                        .type = RKNN_TENSOR_UINT8, .fmt = RKNN_TENSOR_NHWC};
    for (int f = 0; fread(pixels, 1, in_attr.n_elems, stdin) == in_attr.n_elems; f++) {
        rknn_inputs_set(ctx, 1, &input);
        rknn_run(ctx, NULL);
        /* key point: no rknn_outputs_release, the runtime overwrites the same buffers */
        rknn_outputs_get(ctx, io_num.n_output, outputs, NULL);
        for (uint32_t i = 0; i < io_num.n_output; i++) {
            const float *values = outputs[i].buf;
            printf("frame %d output %u:", f, i);
            for (uint32_t k = 0; k < out_attr[i].n_elems; k++) printf(" %.2f", values[k]);
            printf("\n");
        }
    }
    rknn_outputs_release(ctx, io_num.n_output, outputs);       /* once, at the end */
    rknn_deinit(ctx);
    free(pixels);
    return 0;
}
"""

#: the fake model's input: 1x4x4x3 uint8 NHWC pixels (48 bytes per frame)
FRAME_BYTES = 48

#: the fake model's outputs, by index, as the double names them (rknn_set_io_mem finds them by name)
OUTPUT_NAMES = ("scores", "boxes")


def model_bytes(salt: int) -> bytes:
    """The C double's fake model: bytes starting with "RKNN" (the rest is its custom string),
    whose word "salt=N" the double adds to every output byte (its header comment)."""
    return b"RKNN lab 7 exercise 8: the check's fake model salt=%d" % salt


def salt() -> int:
    """A salt from 1 to 255, new at every check: 0 would leave the outputs the header formula's."""
    return 1 + os.urandom(1)[0] % 255


def frames(n: int) -> np.ndarray:
    """``n`` random frames (uint8, one row of FRAME_BYTES per frame) no student can know."""
    return np.frombuffer(os.urandom(n * FRAME_BYTES), dtype=np.uint8).reshape(n, FRAME_BYTES)


def _int8(value: int) -> int:
    value &= 0xFF
    return value - 256 if value > 127 else value


def expected(frame: np.ndarray, salt: int) -> List[Tuple[float, ...]]:
    """What the double's fake model (made with ``model_bytes(salt)``) gives for one uint8 NHWC
    frame, per output, dequantised (want_float = 1): the values the program prints.  The
    double's header comment: inputs given as uint8 are quantised as q = u - 128;
    scores[k] = (sum of the 48 q + k + salt) mod 256 as int8 (zp -10, scale 0.5);
    boxes[k] = (q[k] + salt) mod 256 as int8 for k < 16 (zp 0, scale 0.25)."""
    q = frame.astype(np.int64) - 128
    total = int(q.sum())
    scores = [_int8(total + k + salt) for k in range(10)]
    boxes = [_int8(int(v) + salt) for v in q[:16]]
    return [tuple((s + 10) * 0.5 for s in scores), tuple(b * 0.25 for b in boxes)]
