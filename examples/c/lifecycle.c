/*
 * lifecycle.c -- a context's life and the memory each step holds (chapter 2).
 *
 *   usage: lifecycle info MODEL.rknn
 *          lifecycle path|buffer|zerocopy MODEL.rknn [FRAMES]
 *          lifecycle dup MODEL.rknn N [path|buffer|zerocopy]
 *   build on a board: gcc -O2 -I <rknn_api.h dir> lifecycle.c -lrknnrt -o lifecycle
 *
 * The program targets 4-D image models (one uint8 pixel buffer per input).
 *
 * info      rknn_init with RKNN_FLAG_COLLECT_MODEL_INFO_ONLY: a dummy context
 *           that only answers size queries (API reference V2.3.2 p.19).  It
 *           prints the model's weight and internal sizes, then destroys it.
 * path      rknn_init(ctx, path, 0, ...): size 0 means the model is a path.
 * buffer    rknn_init(ctx, buf, size, ...) from a malloc'd copy of the file,
 *           freed right after rknn_init.  The runtime no longer needs it
 *           then (the model zoo frees it there).  Whether the runtime keeps a
 *           whole copy is an inference from the API reference's wording
 *           (RKNN_FLAG_MODEL_BUFFER_ZERO_COPY avoids copying the buffer "once
 *           inside", p.20); the simulator assumes it (A4).
 * zerocopy  the model in a rknn_create_mem2(0, size,
 *           RKNN_MEM_FLAG_ALLOC_NO_CONTEXT) buffer, rknn_init with
 *           RKNN_FLAG_MODEL_BUFFER_ZERO_COPY and rknn_init_extend.  The
 *           runtime reads that buffer in place, so it must stay valid until
 *           rknn_destroy (p.20).  The reference's own sample destroys it
 *           before rknn_destroy; this program destroys it after.  Then it
 *           runs the last frame again on a path-loaded context and prints
 *           whether the outputs are identical: the mem is cacheable (the
 *           default of rknn_create_mem2) and this program does not sync it
 *           after the memcpy, so stale cache lines on a board would show
 *           here.
 * Each of these three runs FRAMES frames (default 100): inputs set before
 * every run, outputs with is_prealloc = 1 into buffers allocated once, every
 * rknn_outputs_get paired with one rknn_outputs_release.  It prints the
 * context's total_dma_allocated_size and the process's RSS after each step.
 *
 * dup       one rknn_init (path by default) and N-1 rknn_dup_context, one frame
 *           on each new context; after each it prints the DMA total summed over
 *           the live contexts.  A duplicate reuses the weights (API p.21).
 *           That it has its own internal and io memory is a simulator
 *           assumption (A23); the nearest Rockchip statement is the User
 *           Guide's on multi-batch (§5.6.1: internal memory is copied, weight
 *           memory reused).
 *
 * Teardown.  Every Rockchip demo we checked destroys a context's mems before
 * rknn_destroy of that context, and the API reference says to free a
 * zero-copy model buffer after destroying the context (p.20).  This program
 * does both, and frees your own malloc'd buffers last.  The course's own
 * choice, not Rockchip's: a mem shared by several contexts goes after the
 * last rknn_destroy (rknn_internal_mem_reuse_demo.cc destroys its shared
 * buffer first).
 *
 * The documents disagree on when RKNN_QUERY_MEM_SIZE may be asked: the API
 * reference says it requires RKNN_FLAG_MEM_ALLOC_OUTSIDE (p.26);
 * rknn_benchmark and the user guide query it after a plain init (flag 0), as
 * path, buffer, zerocopy and dup do.  info passes the flag (see mode_info).
 * On a board the DMA total holds more than weights + internal + io, and the
 * io buffers may be allocated only at the first rknn_run (see mem_layers.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rknn_api.h"

#define DEFAULT_FRAMES 100
#define MAX_CONTEXTS 64

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

/* Prints "lifecycle: <what> failed: <code> (<name>)"; returns 0 so callers can `return fail(...)`. */
static int fail(const char *what, int ret)
{
    fprintf(stderr, "lifecycle: %s failed: %d (%s)\n", what, ret, error_name(ret));
    return 0;
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

/* The whole file in a malloc'd buffer (the caller frees it), or NULL with a message. */
static unsigned char *read_file(const char *path, uint32_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "lifecycle: cannot open %s\n", path);
        return NULL;
    }
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    unsigned char *buf = NULL;
    if (n <= 0 || (unsigned long)n > UINT32_MAX) {
        fprintf(stderr, "lifecycle: %s is empty, unreadable or larger than 4 GiB\n", path);
    } else if (fseek(fp, 0, SEEK_SET) != 0 || (buf = malloc((size_t)n)) == NULL) {
        fprintf(stderr, "lifecycle: cannot read %s into memory (%ld bytes)\n", path, n);
    } else if (fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        fprintf(stderr, "lifecycle: short read from %s\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *size = buf ? (uint32_t)n : 0;
    return buf;
}

/* total_dma_allocated_size of one context, or -1 after printing the error. */
static long long dma_total(rknn_context ctx)
{
    rknn_mem_size mem;
    memset(&mem, 0, sizeof(mem));
    int ret = rknn_query(ctx, RKNN_QUERY_MEM_SIZE, &mem, sizeof(mem));
    if (ret < 0) {
        fail("rknn_query(RKNN_QUERY_MEM_SIZE)", ret);
        return -1;
    }
    return (long long)mem.total_dma_allocated_size;
}

static void print_step(const char *step, long long dma)
{
    if (dma >= 0)
        printf("%-26s DMA total %lld B, RSS %ld kB\n", step, dma, rss_kb());
    else
        printf("%-26s no context, RSS %ld kB\n", step, rss_kb());
}

/* ------------------------------------------------------------ loading */

enum load_way { LOAD_PATH, LOAD_BUFFER, LOAD_ZERO_COPY, LOAD_UNKNOWN };

static enum load_way parse_load_way(const char *word)
{
    if (strcmp(word, "path") == 0) return LOAD_PATH;
    if (strcmp(word, "buffer") == 0) return LOAD_BUFFER;
    if (strcmp(word, "zerocopy") == 0) return LOAD_ZERO_COPY;
    return LOAD_UNKNOWN;
}

/* A context made by rknn_init, and what of the model it still needs. */
typedef struct {
    rknn_context ctx;
    unsigned char *file;          /* buffer: our copy, free once rknn_init has returned */
    rknn_tensor_mem *model_mem;   /* zerocopy: read in place; destroy after the last rknn_destroy */
} loaded_model;

/* buffer: frees our copy of the file right after rknn_init (the runtime no longer needs it),
   and shows the step with the context's DMA total (unless the query failed: dma < 0). */
static void free_model_buffer(loaded_model *model, long long dma)
{
    if (model->file == NULL) return;
    free(model->file);
    model->file = NULL;
    if (dma >= 0) print_step("after free(model buffer):", dma);
}

/* rknn_init of `path` the way `way` says; prints the steps before rknn_init.  Returns 1 on
   success (the caller then calls free_model_buffer); on failure everything it got is freed. */
static int load(enum load_way way, const char *path, loaded_model *out)
{
    memset(out, 0, sizeof(*out));
    int ret;
    if (way == LOAD_PATH) {
        print_step("before rknn_init:", -1);
        ret = rknn_init(&out->ctx, (void *)path, 0, 0, NULL);     /* size 0: a path */
        return ret < 0 ? fail("rknn_init(path, size 0)", ret) : 1;
    }

    uint32_t size = 0;
    unsigned char *file = read_file(path, &size);
    if (!file) return 0;
    if (way == LOAD_BUFFER) {
        print_step("file read into a buffer:", -1);
        ret = rknn_init(&out->ctx, file, size, 0, NULL);          /* size > 0: the model's bytes */
        if (ret < 0) {
            free(file);
            return fail("rknn_init(buffer, size > 0)", ret);
        }
        out->file = file;
        return 1;
    }

    /* zerocopy: the model's bytes in NPU-accessible memory that belongs to no context (ctx 0) */
    out->model_mem = rknn_create_mem2(0, size, RKNN_MEM_FLAG_ALLOC_NO_CONTEXT);
    if (out->model_mem == NULL) {
        fprintf(stderr, "lifecycle: rknn_create_mem2(0, %u, RKNN_MEM_FLAG_ALLOC_NO_CONTEXT) "
                "returned NULL\n", size);
        free(file);
        return 0;
    }
    /* No rknn_mem_sync after the copy: it takes a context, and there is none yet.  The API
       reference's steps (p.20) go straight from the copy to rknn_init. */
    memcpy(out->model_mem->virt_addr, file, size);
    free(file);                    /* a malloc'd staging copy: the mem now holds the model */
    printf("model mem: %u B, fd %d (yours until after rknn_destroy)\n", size, out->model_mem->fd);
    print_step("model copied into it:", -1);
    rknn_init_extend extend;
    memset(&extend, 0, sizeof(extend));
    extend.real_model_offset = 0;  /* the model starts at the start of the mem */
    extend.real_model_size = size;
    extend.model_buffer_fd = out->model_mem->fd;
    extend.model_buffer_flags = out->model_mem->flags;   /* the flags of the mem holding it */
    ret = rknn_init(&out->ctx, out->model_mem->virt_addr, size, RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, &extend);
    if (ret < 0) {
        fail("rknn_init(RKNN_FLAG_MODEL_BUFFER_ZERO_COPY)", ret);
        rknn_destroy_mem(0, out->model_mem);
        out->model_mem = NULL;
        return 0;
    }
    return 1;
}

/* After the last rknn_destroy: the zero-copy model mem, read in place until then. */
static int unload(loaded_model *model)
{
    if (model->model_mem == NULL) return 1;
    /* The API reference says a no-context mem may be released with any context (p.20); with
       none left we pass 0, the call airockchip/rknn-toolkit2#532 reports leaking fds. */
    int ret = rknn_destroy_mem(0, model->model_mem);
    model->model_mem = NULL;
    if (ret < 0) return fail("rknn_destroy_mem(0, model mem)", ret);
    print_step("after rknn_destroy_mem:", -1);
    return 1;
}

/* -------------------------------------------------------------- frames */

/* One context's inputs and outputs: our buffers, allocated once. */
typedef struct {
    rknn_input_output_num num;
    rknn_input *inputs;
    rknn_output *outputs;
    unsigned long gets, releases;
} frame_io;

static void io_free(frame_io *io)
{
    for (uint32_t i = 0; io->inputs && i < io->num.n_input; i++) free(io->inputs[i].buf);
    for (uint32_t i = 0; io->outputs && i < io->num.n_output; i++) free(io->outputs[i].buf);
    free(io->inputs);
    free(io->outputs);
    io->inputs = NULL;
    io->outputs = NULL;
}

/* Queries ctx's inputs and outputs and allocates one buffer for each: raw uint8 pixels for an
   input (n_elems bytes, the plain attr's layout); for an output with want_float = 1,
   n_elems x 4 bytes (float32).  Returns 1, or 0 with everything freed. */
static int io_setup(rknn_context ctx, frame_io *io)
{
    memset(io, 0, sizeof(*io));
    int ret = rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io->num, sizeof(io->num));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_IN_OUT_NUM)", ret);
    io->inputs = calloc(io->num.n_input ? io->num.n_input : 1, sizeof(*io->inputs));
    io->outputs = calloc(io->num.n_output ? io->num.n_output : 1, sizeof(*io->outputs));
    if (io->inputs == NULL || io->outputs == NULL) {
        fprintf(stderr, "lifecycle: cannot allocate the tables of %u inputs and %u outputs\n",
                io->num.n_input, io->num.n_output);
        io_free(io);
        return 0;
    }
    for (uint32_t k = 0; k < io->num.n_input + io->num.n_output; k++) {
        int is_input = k < io->num.n_input;
        rknn_tensor_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.index = is_input ? k : k - io->num.n_input;
        ret = rknn_query(ctx, is_input ? RKNN_QUERY_INPUT_ATTR : RKNN_QUERY_OUTPUT_ATTR, &attr, sizeof(attr));
        if (ret < 0) {
            fail(is_input ? "rknn_query(RKNN_QUERY_INPUT_ATTR)" : "rknn_query(RKNN_QUERY_OUTPUT_ATTR)", ret);
            io_free(io);
            return 0;
        }
        uint32_t bytes = is_input ? attr.n_elems : attr.n_elems * (uint32_t)sizeof(float);
        void *buf = malloc(bytes ? bytes : 1);
        if (buf == NULL) {
            fprintf(stderr, "lifecycle: cannot allocate %u bytes for %s %u\n", bytes,
                    is_input ? "input" : "output", attr.index);
            io_free(io);
            return 0;
        }
        if (is_input) {
            rknn_input *in = &io->inputs[attr.index];
            in->index = attr.index;
            in->buf = buf;
            in->size = bytes;
            in->type = RKNN_TENSOR_UINT8;
            /* an image model's layout: right for 4-D inputs, wrong for 2-D or undefined ones */
            in->fmt = attr.fmt == RKNN_TENSOR_NCHW ? RKNN_TENSOR_NCHW : RKNN_TENSOR_NHWC;
        } else {
            rknn_output *out = &io->outputs[attr.index];
            out->index = attr.index;
            out->want_float = 1;
            out->is_prealloc = 1;  /* the runtime writes into our buffer */
            out->buf = buf;
            out->size = bytes;     /* its real capacity */
        }
    }
    return 1;
}

/* Frames first .. first + frames - 1 on ctx (frame f's pixels are all f mod 256): inputs set
   before every run, every get paired with one release. */
static int run_frames(rknn_context ctx, frame_io *io, int first, int frames)
{
    for (int frame = first; frame < first + frames; frame++) {
        for (uint32_t i = 0; i < io->num.n_input; i++) memset(io->inputs[i].buf, frame % 256, io->inputs[i].size);
        int ret = rknn_inputs_set(ctx, io->num.n_input, io->inputs);
        if (ret < 0) return fail("rknn_inputs_set", ret);
        ret = rknn_run(ctx, NULL);
        if (ret < 0) return fail("rknn_run", ret);
        ret = rknn_outputs_get(ctx, io->num.n_output, io->outputs, NULL);
        if (ret < 0) return fail("rknn_outputs_get", ret);
        io->gets++;
        /* This course pairs every rknn_outputs_get with one rknn_outputs_release, also with
           is_prealloc = 1.  Rockchip's code disagrees.  Its dynamic-shape demo says every get
           must be paired with one release (after an is_prealloc = 0 get).  Its model-zoo
           zipformer demo (examples/zipformer/cpp/rknpu2/zipformer.cc) uses is_prealloc = 1 and
           never releases.  With is_prealloc = 1 the release frees nothing of yours: a simulator
           assumption (A15), not a documented fact. */
        ret = rknn_outputs_release(ctx, io->num.n_output, io->outputs);
        if (ret < 0) return fail("rknn_outputs_release", ret);
        io->releases++;
    }
    return 1;
}

/* zerocopy: frame `frame` again on a context loaded from the path, and whether its outputs
   are byte for byte those of `io` (the zero-copy context's, from the same frame).  Returns 1
   when the comparison ran, whatever it found. */
static int compare_with_path(const char *path, const frame_io *io, int frame)
{
    rknn_context ctx = 0;
    int ret = rknn_init(&ctx, (void *)path, 0, 0, NULL);
    if (ret < 0) return fail("rknn_init(path) of the context to compare with", ret);
    frame_io theirs;
    int ok = io_setup(ctx, &theirs) && run_frames(ctx, &theirs, frame, 1);
    if (ok && theirs.num.n_output != io->num.n_output) {
        fprintf(stderr, "lifecycle: the path-loaded context has %u outputs, not %u\n",
                theirs.num.n_output, io->num.n_output);
        ok = 0;
    }
    if (ok) {
        unsigned long bytes = 0, differ = 0;
        for (uint32_t i = 0; i < io->num.n_output; i++) {
            const unsigned char *a = io->outputs[i].buf, *b = theirs.outputs[i].buf;
            uint32_t n = io->outputs[i].size < theirs.outputs[i].size ? io->outputs[i].size
                                                                     : theirs.outputs[i].size;
            for (uint32_t j = 0; j < n; j++) differ += a[j] != b[j];
            bytes += n;
        }
        if (differ == 0)
            printf("outputs of frame %d, zero-copy vs path: identical (%lu bytes)\n", frame, bytes);
        else
            printf("outputs of frame %d, zero-copy vs path: DIFFER in %lu of %lu bytes "
                   "(stale cache lines in the model mem? see examples/c/README.md)\n", frame,
                   differ, bytes);
    }
    ret = rknn_destroy(ctx);
    if (ret < 0) ok = fail("rknn_destroy of the context compared with", ret);
    io_free(&theirs);              /* io_setup cleared it first, so this is safe even after a failure */
    return ok;
}

/* ---------------------------------------------------------------- modes */

static int mode_info(const char *path)
{
    rknn_context ctx = 0;
    /* The API reference says RKNN_QUERY_MEM_SIZE requires RKNN_FLAG_MEM_ALLOC_OUTSIDE (p.26), and
       Rockchip's only dummy-init example (rknn_dynshape_inference_zero_copy_alloc_outside.cc)
       passes both flags.  A context that allocates nothing loses nothing by it. */
    int ret = rknn_init(&ctx, (void *)path, 0,
                        RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | RKNN_FLAG_MEM_ALLOC_OUTSIDE, NULL);
    if (ret < 0)
        return fail("rknn_init(RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | RKNN_FLAG_MEM_ALLOC_OUTSIDE)", ret);
    rknn_mem_size mem;
    memset(&mem, 0, sizeof(mem));
    ret = rknn_query(ctx, RKNN_QUERY_MEM_SIZE, &mem, sizeof(mem));
    if (ret < 0) {
        fail("rknn_query(RKNN_QUERY_MEM_SIZE) of the model-info context", ret);
        rknn_destroy(ctx);
        return 0;
    }
    printf("model info only: weights %u B, internal %u B, DMA total %llu B\n", mem.total_weight_size,
           mem.total_internal_size, (unsigned long long)mem.total_dma_allocated_size);
    ret = rknn_destroy(ctx);
    if (ret < 0) return fail("rknn_destroy", ret);
    print_step("after rknn_destroy:", -1);
    return 1;
}

static int mode_one(enum load_way way, const char *path, int frames)
{
    loaded_model model;
    if (!load(way, path, &model)) return 0;
    int ok = 1;
    long long dma = dma_total(model.ctx);
    if (dma < 0) ok = 0;
    else print_step("after rknn_init:", dma);
    free_model_buffer(&model, dma);

    frame_io io;
    memset(&io, 0, sizeof(io));
    if (ok) ok = io_setup(model.ctx, &io);
    if (ok) ok = run_frames(model.ctx, &io, 0, frames);
    if (ok) ok = (dma = dma_total(model.ctx)) >= 0;
    if (ok) {
        char step[32];
        snprintf(step, sizeof step, "after %d frame%s:", frames, frames == 1 ? "" : "s");
        print_step(step, dma);
        printf("outputs_get %lu, outputs_release %lu\n", io.gets, io.releases);
    }
    if (ok && way == LOAD_ZERO_COPY) ok = compare_with_path(path, &io, frames - 1);

    /* teardown: no mems were made with this context; then the context; then the model mem
       it read in place; our own buffers last */
    int ret = rknn_destroy(model.ctx);
    if (ret < 0) ok = fail("rknn_destroy", ret);
    else print_step("after rknn_destroy:", -1);
    if (!unload(&model)) ok = 0;
    io_free(&io);
    return ok;
}

static int mode_dup(const char *path, int n, enum load_way way)
{
    loaded_model model;
    rknn_context ctxs[MAX_CONTEXTS];
    frame_io io[MAX_CONTEXTS];
    memset(ctxs, 0, sizeof ctxs);
    memset(io, 0, sizeof io);
    if (!load(way, path, &model)) return 0;
    ctxs[0] = model.ctx;
    free_model_buffer(&model, dma_total(model.ctx));
    int made = 1, ok = 1;
    long long previous = 0;
    for (int k = 0; ok && k < n; k++) {
        if (k > 0) {
            int ret = rknn_dup_context(&ctxs[0], &ctxs[k]);
            if (ret < 0) {
                ok = fail("rknn_dup_context", ret);
                break;
            }
            made++;
        }
        /* one frame on the new context, with its own buffers: a board may allocate the io
           buffers only at the first run */
        ok = io_setup(ctxs[k], &io[k]) && run_frames(ctxs[k], &io[k], 0, 1);
        long long sum = 0;
        for (int j = 0; ok && j < made; j++) {
            long long dma = dma_total(ctxs[j]);
            if (dma < 0) ok = 0;
            sum += dma;
        }
        if (ok)
            printf("contexts %2d %-21s DMA total %lld B (+%lld B), RSS %ld kB\n", made,
                   k ? "(+ rknn_dup_context):" : "(rknn_init):", sum, sum - previous, rss_kb());
        previous = sum;
    }

    /* teardown: the duplicates first and the context they share weights with last (no document
       says whether shared weights outlive it); no mems were made with a context; then the
       model mem they all read in place; our own buffers last */
    for (int k = made - 1; k >= 0; k--) {
        int ret = rknn_destroy(ctxs[k]);
        if (ret < 0) ok = fail("rknn_destroy", ret);
    }
    print_step("after every rknn_destroy:", -1);
    if (!unload(&model)) ok = 0;
    for (int k = 0; k < made; k++) io_free(&io[k]);
    return ok;
}

static int usage(const char *self)
{
    fprintf(stderr,
            "usage: %s info MODEL.rknn\n"
            "       %s path|buffer|zerocopy MODEL.rknn [FRAMES]\n"
            "       %s dup MODEL.rknn N [path|buffer|zerocopy]   (N from 1 to %d)\n",
            self, self, self, MAX_CONTEXTS);
    return 2;
}

/* A whole number from min to max, or -1. */
static int parse_count(const char *text, int min, int max)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    return end != text && *end == '\0' && value >= min && value <= max ? (int)value : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage(argv[0]);
    const char *mode = argv[1], *path = argv[2];
    int ok;
    if (strcmp(mode, "info") == 0) {
        if (argc != 3) return usage(argv[0]);
        ok = mode_info(path);
    } else if (strcmp(mode, "dup") == 0) {
        int n = argc >= 4 ? parse_count(argv[3], 1, MAX_CONTEXTS) : -1;
        enum load_way way = argc == 5 ? parse_load_way(argv[4]) : LOAD_PATH;
        if (n < 0 || argc > 5 || way == LOAD_UNKNOWN) return usage(argv[0]);
        ok = mode_dup(path, n, way);
    } else {
        enum load_way way = parse_load_way(mode);
        int frames = argc == 4 ? parse_count(argv[3], 1, 1000000000) : DEFAULT_FRAMES;
        if (way == LOAD_UNKNOWN) fprintf(stderr, "lifecycle: unknown mode '%s'\n", mode);
        else if (frames < 0) fprintf(stderr, "lifecycle: FRAMES must be a whole number from 1\n");
        if (way == LOAD_UNKNOWN || frames < 0 || argc > 4) return usage(argv[0]);
        ok = mode_one(way, path, frames);
    }
    return ok ? 0 : 1;
}
