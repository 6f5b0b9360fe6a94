/*
 * output_reuse.c -- seed 000's output-reuse program, corrected (chapter 4).
 *
 * What the seed wanted: run many frames without allocating output memory per
 * frame.  What it did: skipped rknn_outputs_release with is_prealloc = 0 (a
 * leak) and "checked" reuse by comparing a pointer with itself.  The supported
 * way is is_prealloc = 1: the caller allocates each output buffer once, sized
 * from RKNN_QUERY_OUTPUT_ATTR, and the runtime writes into it on every get.
 *
 *   usage: output_reuse MODEL.rknn [FRAMES]
 *   build on a board: gcc -O2 -I <rknn_api.h dir> output_reuse.c -lrknnrt -o output_reuse
 *
 * It prints the process's resident memory before and after the loop: with
 * is_prealloc = 1 it stays flat whatever FRAMES is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rknn_api.h"

#define CHECK(call)                                                            \
    do {                                                                       \
        int ret_ = (call);                                                     \
        if (ret_ < 0) {                                                        \
            fprintf(stderr, "%s failed: %d (line %d)\n", #call, ret_, __LINE__); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static unsigned char *read_file(const char *path, uint32_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *size = (uint32_t)n;
    return buf;
}

/* resident set size in kB, from /proc/self/statm (pages) */
static long rss_kb(void)
{
    long pages_total = 0, pages_resident = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (!fp) return -1;
    if (fscanf(fp, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
    fclose(fp);
    return pages_resident < 0 ? -1 : pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.rknn [FRAMES]\n", argv[0]);
        return 2;
    }
    int frames = argc > 2 ? atoi(argv[2]) : 1000;

    uint32_t model_size = 0;
    unsigned char *model = read_file(argv[1], &model_size);
    if (!model) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }

    /* seed error 1: rknn_init takes five arguments (the last: rknn_init_extend *, may be NULL) */
    rknn_context ctx = 0;
    CHECK(rknn_init(&ctx, model, model_size, 0, NULL));

    rknn_input_output_num io_num;
    CHECK(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num)));

    rknn_tensor_attr in_attr;
    memset(&in_attr, 0, sizeof(in_attr));
    in_attr.index = 0;
    CHECK(rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &in_attr, sizeof(in_attr)));

    /* seed error 2: the command is RKNN_QUERY_OUTPUT_ATTR (there is no RKNN_QUERY_OUT_ATTR) */
    rknn_tensor_attr *out_attrs = calloc(io_num.n_output, sizeof(*out_attrs));
    rknn_output *outputs = calloc(io_num.n_output, sizeof(*outputs));
    void **our_buffers = calloc(io_num.n_output, sizeof(*our_buffers));
    for (uint32_t i = 0; i < io_num.n_output; i++) {
        out_attrs[i].index = i;
        CHECK(rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attrs[i], sizeof(out_attrs[i])));
        /* the supported reuse: our buffer, allocated once, float32 because want_float = 1 */
        uint32_t bytes = out_attrs[i].n_elems * (uint32_t)sizeof(float);
        our_buffers[i] = malloc(bytes);
        outputs[i].index = i;
        outputs[i].want_float = 1;
        outputs[i].is_prealloc = 1;
        outputs[i].buf = our_buffers[i];
        outputs[i].size = bytes;
    }

    /* an input in the layout the plain attr describes, as raw uint8 pixels */
    uint32_t in_bytes = in_attr.n_elems;
    unsigned char *pixels = malloc(in_bytes);
    rknn_input input;
    memset(&input, 0, sizeof(input));
    input.index = 0;
    input.buf = pixels;
    input.size = in_bytes;
    input.type = RKNN_TENSOR_UINT8;
    input.fmt = in_attr.fmt == RKNN_TENSOR_NCHW ? RKNN_TENSOR_NCHW : RKNN_TENSOR_NHWC;

    long rss_before = rss_kb();
    int buffers_kept = 1;
    float first_scores[2] = {0, 0};
    for (int frame = 0; frame < frames; frame++) {
        memset(pixels, frame % 256, in_bytes);
        /* seed error 4: set the input before every run, the first included */
        CHECK(rknn_inputs_set(ctx, 1, &input));
        CHECK(rknn_run(ctx, NULL));
        CHECK(rknn_outputs_get(ctx, io_num.n_output, outputs, NULL));
        /* with is_prealloc = 1 the pointer is ours by construction; checking it
           against the pointer we allocated (not against itself) is meaningful */
        for (uint32_t i = 0; i < io_num.n_output; i++)
            buffers_kept &= outputs[i].buf == our_buffers[i];
        if (frame < 2) first_scores[frame] = ((float *)our_buffers[0])[0];
        /* pairs with rknn_outputs_get; with is_prealloc = 1 it frees nothing of ours */
        CHECK(rknn_outputs_release(ctx, io_num.n_output, outputs));
    }
    long rss_after = rss_kb();

    printf("frames: %d\n", frames);
    printf("outputs: %u, output 0: %u elements\n", io_num.n_output, out_attrs[0].n_elems);
    printf("our buffers used on every frame: %s\n", buffers_kept ? "yes" : "no");
    printf("output follows input: %s\n", first_scores[0] != first_scores[1] ? "yes" : "no");
    printf("RSS before the loop: %ld kB, after: %ld kB, growth: %ld kB\n",
           rss_before, rss_after, rss_after - rss_before);

    /* seed error 3: the context is freed by rknn_destroy (there is no rknn_deinit) */
    CHECK(rknn_destroy(ctx));
    for (uint32_t i = 0; i < io_num.n_output; i++) free(our_buffers[i]);
    free(our_buffers);
    free(outputs);
    free(out_attrs);
    free(pixels);
    free(model);
    return 0;
}
