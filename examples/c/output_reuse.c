/*
 * output_reuse.c -- the widely copied "output reuse" program, corrected (chapter 4).
 *
 * What that recipe wants: run many frames without allocating output memory per
 * frame.  What it does: skips rknn_outputs_release with is_prealloc = 0 (a
 * leak) and "checks" reuse by comparing a pointer with itself.  The supported
 * way is is_prealloc = 1: the caller allocates each output buffer once, sized
 * from RKNN_QUERY_OUTPUT_ATTR, and the runtime writes into it on every get.
 *
 *   usage: output_reuse MODEL.rknn [FRAMES] [float|raw]
 *   float (the default): want_float = 1, float32 outputs;
 *   raw: want_float = 0, each output in its own type (int8 for a quantized model).
 *   build on a board: gcc -O2 -I <rknn_api.h dir> output_reuse.c -lrknnrt -o output_reuse
 *
 * It prints the process's resident memory before and after the loop.  Reuse
 * means no allocation per call.  Flat memory only shows there is no leak.
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

/* The bytes rknn_outputs_get writes for an output with is_prealloc = 1.
   want_float = 1: n_elems x 4 bytes (float32); want_float = 0: attr.size bytes
   (the output's own type: int8, fp16, int32, ...), from the plain attr.  A larger
   buffer is fine as long as rknn_output.size says its real capacity. */
static uint32_t output_bytes(const rknn_tensor_attr *attr, int want_float)
{
    return want_float ? attr->n_elems * (uint32_t)sizeof(float) : attr->size;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (argc > 3 && strcmp(argv[3], "float") != 0 && strcmp(argv[3], "raw") != 0)) {
        fprintf(stderr, "usage: %s MODEL.rknn [FRAMES] [float|raw]\n", argv[0]);
        return 2;
    }
    int frames = argc > 2 ? atoi(argv[2]) : 1000;
    int want_float = argc > 3 ? strcmp(argv[3], "float") == 0 : 1;

    uint32_t model_size = 0;
    unsigned char *model = read_file(argv[1], &model_size);
    if (!model) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }

    /* the recipe's error 1: rknn_init takes five arguments (the last: rknn_init_extend *, may be NULL) */
    rknn_context ctx = 0;
    CHECK(rknn_init(&ctx, model, model_size, 0, NULL));

    rknn_input_output_num io_num;
    CHECK(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num)));

    rknn_tensor_attr in_attr;
    memset(&in_attr, 0, sizeof(in_attr));
    in_attr.index = 0;
    CHECK(rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &in_attr, sizeof(in_attr)));

    /* the recipe's error 2: the command is RKNN_QUERY_OUTPUT_ATTR (there is no RKNN_QUERY_OUT_ATTR) */
    rknn_tensor_attr *out_attrs = calloc(io_num.n_output, sizeof(*out_attrs));
    rknn_output *outputs = calloc(io_num.n_output, sizeof(*outputs));
    void **our_buffers = calloc(io_num.n_output, sizeof(*our_buffers));
    if (out_attrs == NULL || outputs == NULL || our_buffers == NULL) {
        fprintf(stderr, "cannot allocate the tables of %u outputs\n", io_num.n_output);
        return 1;
    }
    for (uint32_t i = 0; i < io_num.n_output; i++) {
        out_attrs[i].index = i;
        CHECK(rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &out_attrs[i], sizeof(out_attrs[i])));
        /* the supported reuse: our buffer, allocated once */
        uint32_t bytes = output_bytes(&out_attrs[i], want_float);
        our_buffers[i] = malloc(bytes);
        if (our_buffers[i] == NULL) {
            fprintf(stderr, "cannot allocate %u bytes for output %u\n", bytes, i);
            return 1;
        }
        outputs[i].index = i;
        outputs[i].want_float = (uint8_t)want_float;
        outputs[i].is_prealloc = 1;
        outputs[i].buf = our_buffers[i];
        outputs[i].size = bytes;
    }

    /* an input in the layout the plain attr describes, as raw uint8 pixels */
    uint32_t in_bytes = in_attr.n_elems;
    unsigned char *pixels = malloc(in_bytes);
    if (pixels == NULL) {
        fprintf(stderr, "cannot allocate %u bytes for the input\n", in_bytes);
        return 1;
    }
    if (in_attr.fmt != RKNN_TENSOR_NCHW && in_attr.fmt != RKNN_TENSOR_NHWC)
        fprintf(stderr, "note: input 0 is not an image (fmt %d); it is sent as NHWC uint8 bytes\n",
                (int)in_attr.fmt);
    rknn_input input;
    memset(&input, 0, sizeof(input));
    input.index = 0;
    input.buf = pixels;
    input.size = in_bytes;
    input.type = RKNN_TENSOR_UINT8;
    input.fmt = in_attr.fmt == RKNN_TENSOR_NCHW ? RKNN_TENSOR_NCHW : RKNN_TENSOR_NHWC;

    /* output 0's first bytes on two frames far apart (inputs 0 and 100, or the last frame),
       to see the output follow the input: neighbouring frames may give equal int8 outputs */
    int later = frames > 100 ? 100 : frames - 1;
    unsigned char first_bytes[2][16];
    size_t compared = outputs[0].size < sizeof first_bytes[0] ? outputs[0].size : sizeof first_bytes[0];
    memset(first_bytes, 0, sizeof first_bytes);

    long rss_before = rss_kb();
    int buffers_kept = 1;
    for (int frame = 0; frame < frames; frame++) {
        memset(pixels, frame % 256, in_bytes);
        /* the recipe's error 4: set the input before every run, the first included */
        CHECK(rknn_inputs_set(ctx, 1, &input));
        CHECK(rknn_run(ctx, NULL));
        CHECK(rknn_outputs_get(ctx, io_num.n_output, outputs, NULL));
        /* with is_prealloc = 1 the pointer is ours by construction; checking it
           against the pointer we allocated (not against itself) is meaningful */
        for (uint32_t i = 0; i < io_num.n_output; i++)
            buffers_kept &= outputs[i].buf == our_buffers[i];
        if (frame == 0 || frame == later) memcpy(first_bytes[frame == 0 ? 0 : 1], our_buffers[0], compared);
        /* This course pairs every rknn_outputs_get with one rknn_outputs_release, also
           with is_prealloc = 1.  Rockchip's code disagrees.  Its dynamic-shape demo says
           every get must be paired with one release (after an is_prealloc = 0 get).  Its
           model-zoo zipformer demo (examples/zipformer/cpp/rknpu2/zipformer.cc) uses
           is_prealloc = 1 and never releases.  With is_prealloc = 1 the release frees
           nothing of yours: a simulator assumption (A15), not a documented fact.  The
           check that our buffers stay ours holds either way. */
        CHECK(rknn_outputs_release(ctx, io_num.n_output, outputs));
    }
    long rss_after = rss_kb();

    printf("frames: %d\n", frames);
    printf("outputs: %u, output 0: %u elements, %u bytes per get (%s)\n", io_num.n_output,
           out_attrs[0].n_elems, outputs[0].size, want_float ? "float32" : "its own type");
    printf("our buffers used on every frame: %s\n", buffers_kept ? "yes" : "no");
    printf("output follows input: %s\n",
           later > 0 && memcmp(first_bytes[0], first_bytes[1], compared) != 0 ? "yes" : "no");
    printf("RSS before the loop: %ld kB, after: %ld kB, growth: %ld kB\n",
           rss_before, rss_after, rss_after - rss_before);

    /* the recipe's error 3: the context is freed by rknn_destroy (there is no rknn_deinit) */
    CHECK(rknn_destroy(ctx));
    for (uint32_t i = 0; i < io_num.n_output; i++) free(our_buffers[i]);
    free(our_buffers);
    free(outputs);
    free(out_attrs);
    free(pixels);
    free(model);
    return 0;
}
