/*
 * phases.c -- where a frame's time goes (chapter 3).
 *
 *   usage: phases MODEL.rknn [--perf] [--frames N] [--core-mask M]
 *   build on a board: gcc -O2 -I <rknn_api.h dir> phases.c -lrknnrt -o phases
 *
 * A frame with the general API is four calls: rknn_inputs_set copies the
 * image into the runtime's input buffer (converting its type and layout),
 * rknn_run runs the model, rknn_outputs_get copies (and converts) the
 * outputs into the caller's buffers, rknn_outputs_release ends the get.
 * The program times each call of every frame with
 * clock_gettime(CLOCK_MONOTONIC) and prints the median, min and max of each
 * over the frames, and its time in the first frame of the pass: pass 1's
 * first frame is the context's first run, when a board may still allocate
 * buffers (see mem_layers.c).  The input is a uint8 NHWC image of the
 * model's input size; the runtime converts it to the model's input.
 *
 * It runs the frames twice: pass 1 gets the outputs with want_float = 0
 * (each output in its own type: int8 for a quantized model), pass 2 with
 * want_float = 1 (float32: the runtime dequantizes on the CPU).  Outputs use
 * is_prealloc = 1 into buffers allocated once, sized by the course's rule:
 * n_elems x 4 bytes with want_float = 1, attr.size bytes with want_float = 0.
 * After every run it asks RKNN_QUERY_PERF_RUN: run_duration, which the API
 * reference describes as the inference time without setting inputs and
 * outputs, in microseconds.
 *
 *   --perf         rknn_init with RKNN_FLAG_COLLECT_PERF_MASK, and print the
 *                  RKNN_QUERY_PERF_DETAIL text (per-layer times) after the
 *                  last run.  The API reference says that query works only
 *                  for a context made with the flag.  Rockchip's eval_perf
 *                  warns that per-layer numbers are for debugging and may be
 *                  worse than actual performance.
 *   --frames N     frames per pass (default 100).
 *   --core-mask M  rknn_set_core_mask(ctx, M) before the first run: 0 AUTO,
 *                  1 CORE_0, 2 CORE_1, 4 CORE_2, 3 CORE_0_1, 7 CORE_0_1_2,
 *                  0xffff ALL.  The API reference: RK3588 and RK3576 only; a
 *                  single-core NPU returns an error.
 *
 * Teardown: every get is paired with one release, the context is destroyed,
 * then our own buffers are freed.  The PERF_DETAIL text is the runtime's: it
 * is printed before rknn_destroy and never freed here.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime and CLOCK_MONOTONIC under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rknn_api.h"

#define DEFAULT_FRAMES 100
#define MAX_FRAMES 100000

/* The columns of one frame's record: the four calls, the whole frame, run_duration. */
enum { INPUTS_SET, RUN, OUTPUTS_GET, OUTPUTS_RELEASE, WHOLE_FRAME, RUN_DURATION, N_COLUMNS };
static const char *const column_names[N_COLUMNS] = {
    "rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release",
    "whole frame (the four calls)", "run_duration (RKNN_QUERY_PERF_RUN)",
};

static const char *error_name(int ret)
{
    switch (ret) {
    case RKNN_ERR_FAIL: return "RKNN_ERR_FAIL";
    case RKNN_ERR_TIMEOUT: return "RKNN_ERR_TIMEOUT";
    case RKNN_ERR_DEVICE_UNAVAILABLE: return "RKNN_ERR_DEVICE_UNAVAILABLE";
    case RKNN_ERR_MALLOC_FAIL: return "RKNN_ERR_MALLOC_FAIL";
    case RKNN_ERR_PARAM_INVALID: return "RKNN_ERR_PARAM_INVALID";
    case RKNN_ERR_MODEL_INVALID: return "RKNN_ERR_MODEL_INVALID";
    case RKNN_ERR_CTX_INVALID: return "RKNN_ERR_CTX_INVALID";
    case RKNN_ERR_INPUT_INVALID: return "RKNN_ERR_INPUT_INVALID";
    case RKNN_ERR_OUTPUT_INVALID: return "RKNN_ERR_OUTPUT_INVALID";
    case RKNN_ERR_DEVICE_UNMATCH: return "RKNN_ERR_DEVICE_UNMATCH";
    case RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL: return "RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL";
    case RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION:
        return "RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION";
    case RKNN_ERR_TARGET_PLATFORM_UNMATCH: return "RKNN_ERR_TARGET_PLATFORM_UNMATCH";
    default: return "an RKNN error";
    }
}

/* Prints "phases: <what> failed: <code> (<name>)"; returns 0 so callers can `return fail(...)`. */
static int fail(const char *what, int ret)
{
    fprintf(stderr, "phases: %s failed: %d (%s)\n", what, ret, error_name(ret));
    return 0;
}

static const char *type_name(int type)
{
    static const char *const names[] = {"FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16",
                                        "INT32", "UINT32", "INT64", "BOOL", "INT4", "BFLOAT16"};
    return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "type?";
}

static const char *format_name(int fmt)
{
    static const char *const names[] = {"NCHW", "NHWC", "NC1HWC2", "UNDEFINED"};
    return fmt >= 0 && fmt < (int)(sizeof names / sizeof names[0]) ? names[fmt] : "format?";
}

/* Milliseconds on the monotonic clock: it never jumps when someone sets the system time. */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* main checked once that this clock works */
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ buffers */

/* Our inputs and both sets of outputs, allocated once before the frames. */
typedef struct {
    rknn_input_output_num num;
    rknn_input *inputs;              /* buf: a uint8 NHWC image each */
    rknn_tensor_attr *output_attrs;
    rknn_output *outputs;            /* the table given to get and release */
    void **buffers[2];               /* [want_float][output]: our output buffers */
    uint32_t *capacity[2];           /* their sizes, kept here: the runtime may rewrite .size */
} frame_io;

static void io_free(frame_io *io)
{
    for (uint32_t i = 0; io->inputs && i < io->num.n_input; i++) free(io->inputs[i].buf);
    for (int wf = 0; wf < 2; wf++) {
        for (uint32_t i = 0; io->buffers[wf] && i < io->num.n_output; i++) free(io->buffers[wf][i]);
        free(io->buffers[wf]);
        free(io->capacity[wf]);
    }
    free(io->inputs);
    free(io->output_attrs);
    free(io->outputs);
    memset(io, 0, sizeof(*io));
}

/* N, H, W, C of a plain input attr (NHWC or NCHW), for an NHWC image; 0 if not a 4-D image. */
static int image_shape(const rknn_tensor_attr *attr, uint32_t nhwc[4])
{
    if (attr->n_dims != 4) return 0;
    const uint32_t *d = attr->dims;
    if (attr->fmt != RKNN_TENSOR_NCHW && attr->fmt != RKNN_TENSOR_NHWC) return 0;
    int nchw = attr->fmt == RKNN_TENSOR_NCHW;
    nhwc[0] = d[0];
    nhwc[1] = d[nchw ? 2 : 1];
    nhwc[2] = d[nchw ? 3 : 2];
    nhwc[3] = d[nchw ? 1 : 3];
    return 1;
}

/* Queries ctx's inputs and outputs and allocates every buffer.  Returns 1, or 0 with a
   message (the caller frees whatever was allocated with io_free). */
static int io_setup(rknn_context ctx, frame_io *io)
{
    int ret = rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io->num, sizeof(io->num));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_IN_OUT_NUM)", ret);
    uint32_t n_in = io->num.n_input, n_out = io->num.n_output;
    io->inputs = calloc(n_in ? n_in : 1, sizeof(*io->inputs));
    io->output_attrs = calloc(n_out ? n_out : 1, sizeof(*io->output_attrs));
    io->outputs = calloc(n_out ? n_out : 1, sizeof(*io->outputs));
    for (int wf = 0; wf < 2; wf++) {
        io->buffers[wf] = calloc(n_out ? n_out : 1, sizeof(*io->buffers[wf]));
        io->capacity[wf] = calloc(n_out ? n_out : 1, sizeof(*io->capacity[wf]));
    }
    if (!io->inputs || !io->output_attrs || !io->outputs || !io->buffers[0] || !io->buffers[1] ||
        !io->capacity[0] || !io->capacity[1]) {
        fprintf(stderr, "phases: cannot allocate the tables of %u inputs and %u outputs\n", n_in, n_out);
        return 0;
    }

    for (uint32_t i = 0; i < n_in; i++) {
        rknn_tensor_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.index = i;
        ret = rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &attr, sizeof(attr));
        if (ret < 0) return fail("rknn_query(RKNN_QUERY_INPUT_ATTR)", ret);
        uint32_t nhwc[4];
        if (!image_shape(&attr, nhwc)) {
            fprintf(stderr, "phases: input %u is %u-D %s, not an image: this program feeds 4-D "
                    "NHWC or NCHW inputs\n", i, attr.n_dims, format_name(attr.fmt));
            return 0;
        }
        uint64_t bytes = (uint64_t)nhwc[0] * nhwc[1] * nhwc[2] * nhwc[3];   /* uint8: 1 B each */
        unsigned char *image = bytes && bytes <= UINT32_MAX ? malloc((size_t)bytes) : NULL;
        if (image == NULL) {
            fprintf(stderr, "phases: cannot allocate %llu bytes for input %u\n",
                    (unsigned long long)bytes, i);
            return 0;
        }
        /* any pixels do: the calls' time does not depend on their values */
        for (uint64_t k = 0; k < bytes; k++) image[k] = (unsigned char)(k % 251);
        rknn_input *in = &io->inputs[i];
        in->index = i;
        in->buf = image;
        in->size = (uint32_t)bytes;
        in->pass_through = 0;            /* the runtime converts: that work is part of the phase */
        in->type = RKNN_TENSOR_UINT8;
        in->fmt = RKNN_TENSOR_NHWC;
        printf("input %u: uint8 NHWC image %ux%ux%ux%u, %u B (the model's input: %s %s)\n", i,
               nhwc[0], nhwc[1], nhwc[2], nhwc[3], in->size, format_name(attr.fmt), type_name(attr.type));
    }

    uint64_t total[2] = {0, 0};
    for (uint32_t i = 0; i < n_out; i++) {
        rknn_tensor_attr *attr = &io->output_attrs[i];
        attr->index = i;
        ret = rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, attr, sizeof(*attr));
        if (ret < 0) return fail("rknn_query(RKNN_QUERY_OUTPUT_ATTR)", ret);
        /* A preallocated output buffer must hold the output: n_elems x 4 bytes with
           want_float = 1, attr.size bytes with want_float = 0. */
        uint32_t need[2] = {attr->size, attr->n_elems * (uint32_t)sizeof(float)};
        for (int wf = 0; wf < 2; wf++) {
            io->buffers[wf][i] = malloc(need[wf] ? need[wf] : 1);
            if (io->buffers[wf][i] == NULL) {
                fprintf(stderr, "phases: cannot allocate %u bytes for output %u\n", need[wf], i);
                return 0;
            }
            io->capacity[wf][i] = need[wf];
            total[wf] += need[wf];
        }
    }
    printf("outputs: %u; want_float = 0: %llu B per frame, each in its own type; "
           "want_float = 1: %llu B per frame, float32\n", n_out, (unsigned long long)total[0],
           (unsigned long long)total[1]);
    return 1;
}

/* ------------------------------------------------------------- frames */

/* One pass of `frames` frames with outputs got as `want_float` says; record[f * N_COLUMNS + c]
   receives column c of frame f in ms.  Returns 1, or 0 after a failed call (reported). */
static int run_pass(rknn_context ctx, frame_io *io, int want_float, int frames, double *record)
{
    for (int f = 0; f < frames; f++) {
        double *row = &record[(size_t)f * N_COLUMNS];
        /* our buffers again before every get: a get may rewrite buf and size */
        for (uint32_t i = 0; i < io->num.n_output; i++) {
            rknn_output *out = &io->outputs[i];
            out->index = i;
            out->want_float = (uint8_t)want_float;
            out->is_prealloc = 1;   /* the runtime writes into our buffer: no allocation per frame */
            out->buf = io->buffers[want_float][i];
            out->size = io->capacity[want_float][i];
        }
        double t0 = now_ms();
        int ret = rknn_inputs_set(ctx, io->num.n_input, io->inputs);
        double t1 = now_ms();
        if (ret < 0) return fail("rknn_inputs_set", ret);
        ret = rknn_run(ctx, NULL);
        double t2 = now_ms();
        if (ret < 0) return fail("rknn_run", ret);
        ret = rknn_outputs_get(ctx, io->num.n_output, io->outputs, NULL);
        double t3 = now_ms();
        if (ret < 0) return fail(want_float ? "rknn_outputs_get(want_float = 1)"
                                            : "rknn_outputs_get(want_float = 0)", ret);
        /* This course pairs every rknn_outputs_get with one rknn_outputs_release, also with
           is_prealloc = 1.  Rockchip's code disagrees.  Its dynamic-shape demo says every get
           must be paired with one release (after an is_prealloc = 0 get).  Its model-zoo
           zipformer demo (examples/zipformer/cpp/rknpu2/zipformer.cc) uses is_prealloc = 1 and
           never releases.  With is_prealloc = 1 the release frees nothing of yours: a simulator
           assumption (A15), not a documented fact. */
        ret = rknn_outputs_release(ctx, io->num.n_output, io->outputs);
        double t4 = now_ms();
        if (ret < 0) return fail("rknn_outputs_release", ret);
        /* asked after the frame, outside the timed calls: it describes the last run */
        rknn_perf_run perf;
        memset(&perf, 0, sizeof(perf));
        ret = rknn_query(ctx, RKNN_QUERY_PERF_RUN, &perf, sizeof(perf));
        if (ret < 0) return fail("rknn_query(RKNN_QUERY_PERF_RUN)", ret);
        row[INPUTS_SET] = t1 - t0;
        row[RUN] = t2 - t1;
        row[OUTPUTS_GET] = t3 - t2;
        row[OUTPUTS_RELEASE] = t4 - t3;
        row[WHOLE_FRAME] = t4 - t0;
        row[RUN_DURATION] = (double)perf.run_duration / 1e3;   /* microseconds */
    }
    return 1;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of column c over the frames (scratch: room for `frames` values). */
static double column_median(const double *record, int frames, int c, double *scratch)
{
    for (int f = 0; f < frames; f++) scratch[f] = record[(size_t)f * N_COLUMNS + c];
    qsort(scratch, (size_t)frames, sizeof(double), compare_doubles);
    return frames % 2 ? scratch[frames / 2] : (scratch[frames / 2 - 1] + scratch[frames / 2]) / 2;
}

/* The table of one pass: median, min, max and the first frame's value of every column. */
static void print_pass(const double *record, int frames, double *scratch, double medians[N_COLUMNS])
{
    printf("%-36s %10s %10s %10s %10s\n", "ms per frame", "median", "min", "max", "first");
    for (int c = 0; c < N_COLUMNS; c++) {
        medians[c] = column_median(record, frames, c, scratch);
        /* scratch is sorted now: its ends are the min and the max */
        printf("%-36s %10.3f %10.3f %10.3f %10.3f\n", column_names[c], medians[c], scratch[0],
               scratch[frames - 1], record[c]);
    }
}

/* ------------------------------------------------------- per-layer text */

/* RKNN_QUERY_PERF_DETAIL after the last run, printed as the runtime wrote it. */
static int print_perf_detail(rknn_context ctx, uint32_t flag)
{
    rknn_perf_detail detail;
    memset(&detail, 0, sizeof(detail));
    int ret = rknn_query(ctx, RKNN_QUERY_PERF_DETAIL, &detail, sizeof(detail));
    if (ret < 0) {
        fail("rknn_query(RKNN_QUERY_PERF_DETAIL)", ret);
        fprintf(stderr, "phases: no per-layer times.  The runtime answers RKNN_QUERY_PERF_DETAIL only "
                "for a context made with RKNN_FLAG_COLLECT_PERF_MASK (0x%x); this one was made with "
                "flag 0x%x.  The API reference lists RV1103, RV1106 and RK2118 as not supporting it.\n",
                (unsigned)RKNN_FLAG_COLLECT_PERF_MASK, (unsigned)flag);
        return 0;
    }
    if (detail.perf_data == NULL || detail.data_len == 0) {
        fprintf(stderr, "phases: RKNN_QUERY_PERF_DETAIL succeeded but returned no text "
                "(perf_data %s, data_len %llu)\n", detail.perf_data ? "set" : "NULL",
                (unsigned long long)detail.data_len);
        return 0;
    }
    /* data_len bytes, or up to a NUL: no document says whether data_len counts the NUL */
    int len = detail.data_len > 1000000000u ? 1000000000 : (int)detail.data_len;
    printf("\nRKNN_QUERY_PERF_DETAIL after the last run (data_len %llu):\n",
           (unsigned long long)detail.data_len);
    printf("%.*s", len, detail.perf_data);
    size_t shown = strnlen(detail.perf_data, (size_t)len);
    if (shown == 0 || detail.perf_data[shown - 1] != '\n') printf("\n");
    return 1;
}

/* ----------------------------------------------------------------- main */

static int usage(const char *self)
{
    fprintf(stderr, "usage: %s MODEL.rknn [--perf] [--frames N] [--core-mask M]\n"
            "  --frames N     frames per pass, 1 to %d (default %d)\n"
            "  --core-mask M  0 AUTO, 1 CORE_0, 2 CORE_1, 4 CORE_2, 3 CORE_0_1, 7 CORE_0_1_2, 0xffff ALL\n",
            self, MAX_FRAMES, DEFAULT_FRAMES);
    return 2;
}

/* A whole number from min to max (decimal, or hex with 0x), or -1. */
static long parse_number(const char *text, long min, long max)
{
    char *end = NULL;
    long value = strtol(text, &end, 0);
    return end != text && *end == '\0' && value >= min && value <= max ? value : -1;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int perf = 0, frames = DEFAULT_FRAMES;
    long core_mask = -1;   /* -1: not set, the runtime's default */
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--perf") == 0) {
            perf = 1;
        } else if (strcmp(argv[k], "--frames") == 0 && k + 1 < argc) {
            frames = (int)parse_number(argv[++k], 1, MAX_FRAMES);
            if (frames < 0) {
                fprintf(stderr, "phases: --frames takes a whole number from 1 to %d\n", MAX_FRAMES);
                return usage(argv[0]);
            }
        } else if (strcmp(argv[k], "--core-mask") == 0 && k + 1 < argc) {
            core_mask = parse_number(argv[++k], 0, 0xffff);
            if (core_mask < 0) {
                fprintf(stderr, "phases: --core-mask takes a mask from 0 to 0xffff\n");
                return usage(argv[0]);
            }
        } else if (argv[k][0] != '-' && path == NULL) {
            path = argv[k];
        } else {
            fprintf(stderr, "phases: unexpected argument '%s'\n", argv[k]);
            return usage(argv[0]);
        }
    }
    if (path == NULL) return usage(argv[0]);
    struct timespec probe;
    if (clock_gettime(CLOCK_MONOTONIC, &probe) != 0) {
        perror("phases: clock_gettime(CLOCK_MONOTONIC)");
        return 1;
    }

    uint32_t flag = perf ? RKNN_FLAG_COLLECT_PERF_MASK : 0;
    rknn_context ctx = 0;
    int ret = rknn_init(&ctx, (void *)path, 0, flag, NULL);   /* size 0: the model is a path */
    if (ret < 0) {
        fail("rknn_init", ret);
        return 1;
    }
    frame_io io;
    memset(&io, 0, sizeof(io));
    double *record = NULL, *scratch = NULL;
    int ok = 1;

    rknn_sdk_version version;
    memset(&version, 0, sizeof(version));
    ret = rknn_query(ctx, RKNN_QUERY_SDK_VERSION, &version, sizeof(version));
    if (ret < 0) ok = fail("rknn_query(RKNN_QUERY_SDK_VERSION)", ret);
    if (ok) {
        printf("model %s, runtime %s, driver %s\n", path, version.api_version, version.drv_version);
        if (flag & RKNN_FLAG_COLLECT_PERF_MASK)
            printf("init flag 0x%x: RKNN_FLAG_COLLECT_PERF_MASK (per-layer numbers are for debugging: "
                   "Rockchip warns they may be worse than actual performance)\n", (unsigned)flag);
        else
            printf("init flag 0x%x\n", (unsigned)flag);
    }
    if (ok && core_mask >= 0) {
        ret = rknn_set_core_mask(ctx, (rknn_core_mask)core_mask);
        if (ret < 0) {
            char what[64];
            snprintf(what, sizeof what, "rknn_set_core_mask(ctx, 0x%lx)", core_mask);
            ok = fail(what, ret);
            fprintf(stderr, "phases: the API reference says core masks work only on RK3588 and RK3576 "
                    "(a single-core NPU returns an error)\n");
        } else {
            printf("core mask 0x%lx (rknn_set_core_mask)\n", core_mask);
        }
    } else if (ok) {
        printf("core mask: not set (the runtime's default)\n");
    }
    if (ok) ok = io_setup(ctx, &io);
    if (ok) {
        record = malloc((size_t)frames * N_COLUMNS * sizeof(*record));
        scratch = malloc((size_t)frames * sizeof(*scratch));
        if (record == NULL || scratch == NULL) {
            fprintf(stderr, "phases: cannot allocate the timings of %d frames\n", frames);
            ok = 0;
        }
    }
    if (ok) printf("frames: %d per pass; times from clock_gettime(CLOCK_MONOTONIC)\n", frames);

    double medians[2][N_COLUMNS];
    for (int want_float = 0; ok && want_float <= 1; want_float++) {
        printf("\npass %d of 2: rknn_outputs_get with want_float = %d (%s)\n", want_float + 1, want_float,
               want_float ? "float32: the runtime dequantizes on the CPU" : "each output in its own type");
        ok = run_pass(ctx, &io, want_float, frames, record);
        if (ok) print_pass(record, frames, scratch, medians[want_float]);
    }
    if (ok) {
        double extra = medians[1][OUTPUTS_GET] - medians[0][OUTPUTS_GET];
        if (extra > -0.0005 && extra < 0.0005) extra = 0.0;   /* prints +0.000, never -0.000 */
        printf("\nrknn_outputs_get, want_float = 1 minus want_float = 0 (medians): %+.3f ms\n", extra);
    }
    if (ok && perf) ok = print_perf_detail(ctx, flag);

    /* teardown: every get was released in its frame; the context; our buffers last */
    ret = rknn_destroy(ctx);
    if (ret < 0) ok = fail("rknn_destroy", ret);
    io_free(&io);
    free(record);
    free(scratch);
    return ok ? 0 : 1;
}
