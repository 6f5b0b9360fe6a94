/*
 * allocation.c -- allocate NPU memory once, bind it once, run many (chapter 5).
 *
 * A widely copied recipe wants flat memory and no fragmentation over many
 * frames.  It calls functions librknnrt does not have (rknn_set_mem_strategy,
 * RKNN_MEM_STRATEGY_*, rknn_free_mem), sizes its mems from the plain
 * attr.size, calls rknn_set_io_mem in every iteration and then asks
 * rknn_outputs_get for an output it had bound.  This program does what it
 * meant with the runtime's real API.
 *
 *   usage: allocation prealloc MODEL.rknn [FRAMES >= 2]
 *          allocation shared [--internal-only | --skip-weight-mem] A.rknn B.rknn [C.rknn]
 *   build on a board: gcc -O2 -I <rknn_api.h dir> allocation.c -lrknnrt -o allocation
 *
 * prealloc  rknn_init with flag 0; the NATIVE attr of every input and output;
 *           one rknn_create_mem per tensor, sized from that attr's
 *           size_with_stride; one rknn_set_io_mem per tensor.  Then FRAMES
 *           frames (1000 by default): the input written into its mem row by
 *           row (w_stride), rknn_mem_sync TO_DEVICE, rknn_run, rknn_mem_sync
 *           FROM_DEVICE, and the output read from its bound mem.  No
 *           rknn_inputs_set, no rknn_outputs_get: the mems are the inputs and
 *           outputs.  It prints RSS and the DMA total (RKNN_QUERY_MEM_SIZE)
 *           before the loop, after frame 1 and after the last frame, and
 *           the growth from frame 1 (the first frame may allocate).  Reuse
 *           means no allocation per call.  Flat memory only shows there is
 *           no leak.
 * shared    two or three models that run one after another share one
 *           internal buffer: the steps of Rockchip's
 *           rknn_internal_mem_reuse_demo, with every return code checked.
 *           Each model is initialised with RKNN_FLAG_MEM_ALLOC_OUTSIDE, its
 *           RKNN_QUERY_MEM_SIZE asked, one rknn_create_mem of the largest
 *           total_internal_size made, and each context gets a view of it
 *           (rknn_create_mem_from_fd with its own size) through
 *           rknn_set_internal_mem.  The flag makes weights and io the
 *           caller's too: each model gets rknn_create_mem(total_weight_size)
 *           + rknn_set_weight_mem (the step the documentation's snippets
 *           leave out) and io mems bound as in prealloc.  The models run in
 *           turn, twice; the second round's outputs must equal the first's.
 *           --internal-only: RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE instead; the
 *           runtime keeps the weights.  --skip-weight-mem: leaves out
 *           rknn_set_weight_mem, as the snippets do, to show what your
 *           runtime answers (the simulator: PARAM_INVALID, assumption A15).
 *           Never run contexts that share an internal buffer at the same time
 *           (User Guide): one run's intermediate tensors overwrite the other's.
 *           Teardown: each context's mems before its rknn_destroy; the shared
 *           buffer after every view of it, with model A's context, before
 *           model A's rknn_destroy (the demo destroys it first of all).
 *
 * Cache maintenance.  Rockchip's sources do not settle when rknn_mem_sync is
 * needed.  The comments of the DISABLE_FLUSH flags imply that the runtime
 * flushes inputs and invalidates outputs by default.  The API reference says
 * cacheable memory shared by the CPU and the NPU needs rknn_mem_sync.  None of
 * Rockchip's demos call it.  A maintainer says to add it yourself if you need
 * it (airockchip/rknn_model_zoo#156).  The course's code syncs: the safe
 * choice.
 *
 * RKNN_QUERY_MEM_SIZE: the API reference says it requires
 * RKNN_FLAG_MEM_ALLOC_OUTSIDE; rknn_benchmark and the user guide query it
 * after a plain init (flag 0), as prealloc does.  prealloc reports a refusal
 * and goes on; shared needs the sizes and stops.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rknn_api.h"

#define DEFAULT_FRAMES 1000
#define MAX_MODELS 3
#define SHOWN_VALUES 8    /* output elements printed */
#define COMPARED_BYTES 64 /* output bytes compared between two frames */

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

/* Prints "allocation: <what> failed: <code> (<name>)"; returns 0 so callers can `return fail(...)`. */
static int fail(const char *what, int ret)
{
    fprintf(stderr, "allocation: %s failed: %d (%s)\n", what, ret, error_name(ret));
    return 0;
}

/* The create_mem family returns NULL on failure, with no code. */
static int fail_mem(const char *what, uint64_t size)
{
    fprintf(stderr, "allocation: %s of %llu B returned NULL\n", what, (unsigned long long)size);
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

static const char *format_name(rknn_tensor_format fmt)
{
    switch (fmt) {
    case RKNN_TENSOR_NCHW: return "NCHW";
    case RKNN_TENSOR_NHWC: return "NHWC";
    case RKNN_TENSOR_NC1HWC2: return "NC1HWC2";
    default: return "UNDEFINED";
    }
}

static const char *type_name(rknn_tensor_type type)
{
    switch (type) {
    case RKNN_TENSOR_FLOAT32: return "FLOAT32";
    case RKNN_TENSOR_FLOAT16: return "FLOAT16";
    case RKNN_TENSOR_INT8: return "INT8";
    case RKNN_TENSOR_UINT8: return "UINT8";
    case RKNN_TENSOR_INT16: return "INT16";
    case RKNN_TENSOR_INT32: return "INT32";
    default: return "other";
    }
}

/* One model: its context, the native attr and bound mem of each input then each output, and the
   mems the caller owns under RKNN_FLAG_MEM_ALLOC_OUTSIDE / INTERNAL_ALLOC_OUTSIDE. */
typedef struct {
    const char *path;
    char name;                   /* 'A', 'B', 'C' in the printout */
    rknn_context ctx;
    int live;                    /* ctx came from a successful rknn_init */
    rknn_input_output_num io_num;
    uint32_t n_io;               /* inputs first, then outputs */
    rknn_tensor_attr *attrs;
    rknn_tensor_mem **io_mems;
    rknn_mem_size sizes;
    rknn_tensor_mem *weight_mem;
    rknn_tensor_mem *internal_view;
} model;

/* rknn_init from a path (size 0), after checking that the file opens: a missing model gets the
   system's reason, not only the runtime's code. */
static int init_model(model *m, uint32_t flag)
{
    FILE *fp = fopen(m->path, "rb");
    if (!fp) {
        fprintf(stderr, "allocation: cannot open model %s: %s\n", m->path, strerror(errno));
        return 0;
    }
    fclose(fp);
    int ret = rknn_init(&m->ctx, (void *)m->path, 0, flag, NULL);
    if (ret < 0) {
        fprintf(stderr, "allocation: rknn_init(%s, flag 0x%x) failed: %d (%s)\n", m->path, flag, ret,
                error_name(ret));
        return 0;
    }
    m->live = 1;
    return 1;
}

static int query_sizes(model *m)
{
    memset(&m->sizes, 0, sizeof(m->sizes));
    int ret = rknn_query(m->ctx, RKNN_QUERY_MEM_SIZE, &m->sizes, sizeof(m->sizes));
    return ret < 0 ? fail("rknn_query(RKNN_QUERY_MEM_SIZE)", ret) : 1;
}

/* The native attr of every input and output (the layout the NPU uses, so the runtime converts
   nothing between the mem and the NPU). */
static int query_native_attrs(model *m)
{
    int ret = rknn_query(m->ctx, RKNN_QUERY_IN_OUT_NUM, &m->io_num, sizeof(m->io_num));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_IN_OUT_NUM)", ret);
    m->n_io = m->io_num.n_input + m->io_num.n_output;
    m->attrs = calloc(m->n_io, sizeof(*m->attrs));
    m->io_mems = calloc(m->n_io, sizeof(*m->io_mems));
    if (!m->attrs || !m->io_mems) {
        fprintf(stderr, "allocation: cannot allocate the tables of %u tensors\n", m->n_io);
        return 0;
    }
    for (uint32_t k = 0; k < m->n_io; k++) {
        int is_input = k < m->io_num.n_input;
        m->attrs[k].index = is_input ? k : k - m->io_num.n_input;
        ret = rknn_query(m->ctx, is_input ? RKNN_QUERY_NATIVE_INPUT_ATTR : RKNN_QUERY_NATIVE_OUTPUT_ATTR,
                         &m->attrs[k], sizeof(m->attrs[k]));
        if (ret < 0)
            return fail(is_input ? "rknn_query(RKNN_QUERY_NATIVE_INPUT_ATTR)"
                                 : "rknn_query(RKNN_QUERY_NATIVE_OUTPUT_ATTR)", ret);
    }
    return 1;
}

static int is_image(const rknn_tensor_attr *attr)
{
    return attr->n_dims == 4 && attr->fmt == RKNN_TENSOR_NHWC;
}

/* One mem per tensor, created once and bound once.  Size a buffer you bind from the attr you bind
   it with.  Use size_with_stride of that attr (native, or a plain input attr whose rows may be
   padded).  For a plain output attr you set to FLOAT32, use n_elems x 4 bytes.  Here every attr is
   native: the recipe's plain attr.size is too small whenever the native rows are padded. */
static int bind_io(model *m, uint64_t *io_bytes)
{
    for (uint32_t k = 0; k < m->n_io; k++) {
        rknn_tensor_attr *attr = &m->attrs[k];
        int is_input = k < m->io_num.n_input;
        /* An image input given as uint8: the NPU then normalizes and quantizes it, as Rockchip's
           zero-copy demos do.  The native attr's size_with_stride holds it (1 B per element). */
        if (is_input && is_image(attr)) attr->type = RKNN_TENSOR_UINT8;
        m->io_mems[k] = rknn_create_mem(m->ctx, attr->size_with_stride);
        if (!m->io_mems[k]) return fail_mem("rknn_create_mem(size_with_stride)", attr->size_with_stride);
        int ret = rknn_set_io_mem(m->ctx, m->io_mems[k], attr);
        if (ret < 0) return fail("rknn_set_io_mem", ret);
        *io_bytes += attr->size_with_stride;
        printf("  %s %u: native %s %s, w_stride %u, size %u B, size_with_stride %u B: mem bound once\n",
               is_input ? "input" : "output", attr->index, format_name(attr->fmt), type_name(attr->type),
               attr->w_stride, attr->size, attr->size_with_stride);
    }
    return 1;
}

/* Writes frame's input into every input mem, then syncs it for the NPU.  An image gets pixel
   (frame + i) mod 256 at dense index i = (h*W + w)*C + c, stored at row pitch w_stride (0 means
   the width); any other input gets that pattern over its size bytes. */
static int write_inputs(model *m, int frame)
{
    for (uint32_t k = 0; k < m->io_num.n_input; k++) {
        const rknn_tensor_attr *attr = &m->attrs[k];
        uint8_t *dst = (uint8_t *)m->io_mems[k]->virt_addr + m->io_mems[k]->offset;
        if (is_image(attr)) {
            uint32_t h = attr->dims[1], w = attr->dims[2], c = attr->dims[3];
            uint32_t pitch = (attr->w_stride ? attr->w_stride : w) * c;
            for (uint32_t y = 0; y < h; y++)
                for (uint32_t i = 0; i < w * c; i++)
                    dst[(size_t)y * pitch + i] = (uint8_t)(frame + y * w * c + i);
        } else {
            for (uint32_t i = 0; i < attr->size; i++) dst[i] = (uint8_t)(frame + i);
        }
        int ret = rknn_mem_sync(m->ctx, m->io_mems[k], RKNN_MEMORY_SYNC_TO_DEVICE);
        if (ret < 0) return fail("rknn_mem_sync(input, RKNN_MEMORY_SYNC_TO_DEVICE)", ret);
    }
    return 1;
}

/* rknn_run, then every output mem synced for the CPU: its bytes are then the run's outputs. */
static int run_and_sync(model *m)
{
    int ret = rknn_run(m->ctx, NULL);
    if (ret < 0) {
        fprintf(stderr, "allocation: rknn_run(model %c, %s) failed: %d (%s)\n", m->name, m->path, ret,
                error_name(ret));
        return 0;
    }
    for (uint32_t k = m->io_num.n_input; k < m->n_io; k++) {
        ret = rknn_mem_sync(m->ctx, m->io_mems[k], RKNN_MEMORY_SYNC_FROM_DEVICE);
        if (ret < 0) return fail("rknn_mem_sync(output, RKNN_MEMORY_SYNC_FROM_DEVICE)", ret);
    }
    return 1;
}

static const uint8_t *output_bytes(const model *m, uint32_t output)
{
    const rknn_tensor_mem *mem = m->io_mems[m->io_num.n_input + output];
    return (const uint8_t *)mem->virt_addr + mem->offset;
}

static float half_to_float(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    float mantissa = (float)(h & 0x3ff);
    float value = exponent == 0 ? mantissa / 16777216.0f                          /* 2^-24: subnormal */
                : exponent == 31 ? (mantissa ? NAN : INFINITY)
                : (1.0f + mantissa / 1024.0f) * (float)(1u << exponent) / 32768.0f; /* 2^(e-15) */
    return (h & 0x8000) ? -value : value;
}

/* The first elements of output 0 in its bound mem, in the native layout's order, as values
   (quantized types dequantized with the attr's zp and scale). */
static void print_output0(const model *m)
{
    const rknn_tensor_attr *attr = &m->attrs[m->io_num.n_input];
    const uint8_t *bytes = output_bytes(m, 0);
    uint32_t shown = attr->n_elems < SHOWN_VALUES ? attr->n_elems : SHOWN_VALUES;
    printf("  output 0 (native %s %s), first %u of %u values:", format_name(attr->fmt),
           type_name(attr->type), shown, attr->n_elems);
    for (uint32_t i = 0; i < shown; i++) {
        float value;
        switch (attr->type) {
        case RKNN_TENSOR_INT8: value = ((float)((const int8_t *)bytes)[i] - (float)attr->zp) * attr->scale; break;
        case RKNN_TENSOR_UINT8: value = ((float)bytes[i] - (float)attr->zp) * attr->scale; break;
        case RKNN_TENSOR_FLOAT16: {
            uint16_t h;
            memcpy(&h, bytes + 2 * i, sizeof(h));
            value = half_to_float(h);
            break;
        }
        case RKNN_TENSOR_FLOAT32: memcpy(&value, bytes + 4 * i, sizeof(value)); break;
        default:
            printf(" (type %d: not decoded)", (int)attr->type);
            i = shown;
            continue;
        }
        printf(" %g", value);
    }
    printf("\n");
}

/* Destroys the model's mems (io, weights, internal view), then `also` if not NULL (a mem created
   with this context that others viewed), then the context.  Every Rockchip demo destroys a
   context's mems before rknn_destroy of that context.  1 if every call succeeded. */
static int teardown(model *m, rknn_tensor_mem *also)
{
    int ok = 1, ret;
    for (uint32_t k = 0; m->io_mems && k < m->n_io; k++)
        if (m->io_mems[k] && (ret = rknn_destroy_mem(m->ctx, m->io_mems[k])) < 0)
            ok = fail("rknn_destroy_mem(io mem)", ret);
    if (m->weight_mem && (ret = rknn_destroy_mem(m->ctx, m->weight_mem)) < 0)
        ok = fail("rknn_destroy_mem(weight mem)", ret);
    if (m->internal_view && (ret = rknn_destroy_mem(m->ctx, m->internal_view)) < 0)
        ok = fail("rknn_destroy_mem(internal view)", ret);
    if (also && (ret = rknn_destroy_mem(m->ctx, also)) < 0)
        ok = fail("rknn_destroy_mem(shared internal buffer)", ret);
    if (m->live && (ret = rknn_destroy(m->ctx)) < 0)
        ok = fail("rknn_destroy", ret);
    free(m->io_mems);
    free(m->attrs);
    memset(m, 0, sizeof(*m));
    return ok;
}

/* ------------------------------------------------------------------ prealloc */

/* total_dma_allocated_size of the context, or -1 (with a message) when the runtime refuses the
   query after a flag-0 init. */
static long long dma_total(const model *m)
{
    rknn_mem_size sizes;
    memset(&sizes, 0, sizeof(sizes));
    int ret = rknn_query(m->ctx, RKNN_QUERY_MEM_SIZE, &sizes, sizeof(sizes));
    if (ret < 0) {
        fail("rknn_query(RKNN_QUERY_MEM_SIZE) after a flag-0 init", ret);
        return -1;
    }
    return (long long)sizes.total_dma_allocated_size;
}

static int mode_prealloc(const char *path, int frames)
{
    model m;
    memset(&m, 0, sizeof(m));
    m.path = path;
    m.name = 'A';
    if (!init_model(&m, 0)) return 0;
    printf("model %s, %d frames\n", path, frames);
    uint64_t io_bytes = 0;
    int ok = query_native_attrs(&m) && bind_io(&m, &io_bytes);
    if (ok) printf("io mems: %u, %llu B in all, created and bound before the loop\n", m.n_io,
                   (unsigned long long)io_bytes);

    /* output 0's first bytes on two frames far apart, to see the output follow the input */
    const rknn_tensor_attr *out0 = ok ? &m.attrs[m.io_num.n_input] : NULL;
    size_t compared = out0 && out0->size_with_stride < COMPARED_BYTES ? out0->size_with_stride : COMPARED_BYTES;
    uint8_t first[COMPARED_BYTES], later[COMPARED_BYTES];
    int later_frame = frames > 100 ? 100 : frames - 1; /* frames >= 2: main checks it */

    /* Memory is taken three times: before the loop, after frame 1 and after the last frame.  The
       first frame may allocate (a board's runtime may allocate its io buffers only at the first
       rknn_run; the first calls also load code pages), so growth is counted from frame 1. */
    long long dma[3] = {-1, -1, -1};
    long rss[3] = {-1, -1, -1};
    if (ok) {
        dma[0] = dma_total(&m);
        rss[0] = rss_kb();
    }
    for (int frame = 0; ok && frame < frames; frame++) {
        ok = write_inputs(&m, frame) && run_and_sync(&m);
        if (ok && frame == 0) memcpy(first, output_bytes(&m, 0), compared);
        if (ok && frame == later_frame) memcpy(later, output_bytes(&m, 0), compared);
        if (ok && frame == 0) {
            rss[1] = rss_kb();
            dma[1] = dma_total(&m);
        }
    }
    if (ok) {
        rss[2] = rss_kb();
        dma[2] = dma_total(&m);
        printf("frame %d:\n", frames);
        print_output0(&m);
        printf("output follows input: %s\n", memcmp(first, later, compared) != 0 ? "yes" : "no");
        const char *when[3] = {"before the loop:", "after frame 1:", "after the last frame:"};
        for (int k = 0; k < 3; k++)
            printf("%-22s RSS %ld kB, DMA total %lld B\n", when[k], rss[k], dma[k]);
        printf("growth from frame 1 to frame %d: RSS %ld kB, DMA total %lld B\n", frames, rss[2] - rss[1],
               dma[1] >= 0 && dma[2] >= 0 ? dma[2] - dma[1] : -1);
    }
    return teardown(&m, NULL) && ok;
}

/* -------------------------------------------------------------------- shared */

static int mode_shared(const char **paths, int n, int internal_only, int skip_weight_mem)
{
    uint32_t flag = internal_only ? RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE : RKNN_FLAG_MEM_ALLOC_OUTSIDE;
    int weights_outside = !internal_only;
    model models[MAX_MODELS];
    memset(models, 0, sizeof(models));
    rknn_tensor_mem *shared = NULL;
    uint8_t *first_round[MAX_MODELS] = {NULL};
    uint64_t max_internal = 0, sum_internal = 0, weight_bytes = 0, io_bytes = 0;
    int ok = 1;

    printf("flag: %s\n", internal_only ? "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE (internal memory is yours; "
                                         "the runtime keeps weights and io)"
                                       : "RKNN_FLAG_MEM_ALLOC_OUTSIDE (weights, internal memory and io "
                                         "are all yours)");
    /* 1. init each model with the flag and ask its sizes */
    for (int i = 0; ok && i < n; i++) {
        model *m = &models[i];
        m->path = paths[i];
        m->name = (char)('A' + i);
        ok = init_model(m, flag) && query_sizes(m);
        if (!ok) break;
        printf("model %c %s: weights %u B, internal %u B, DMA total after init %llu B\n", m->name, m->path,
               m->sizes.total_weight_size, m->sizes.total_internal_size,
               (unsigned long long)m->sizes.total_dma_allocated_size);
        sum_internal += m->sizes.total_internal_size;
        if (m->sizes.total_internal_size > max_internal) max_internal = m->sizes.total_internal_size;
    }

    /* 2. one buffer of the largest total_internal_size, made with model A's context */
    if (ok) {
        shared = rknn_create_mem(models[0].ctx, (uint32_t)max_internal);
        ok = shared ? 1 : fail_mem("rknn_create_mem(largest total_internal_size)", max_internal);
    }
    if (ok) printf("one internal buffer of %llu B (the largest total_internal_size)\n",
                   (unsigned long long)max_internal);

    /* 3. per context: a view of that buffer with its own size, its weights, its io */
    for (int i = 0; ok && i < n; i++) {
        model *m = &models[i];
        m->internal_view = rknn_create_mem_from_fd(m->ctx, shared->fd, shared->virt_addr,
                                                   m->sizes.total_internal_size, shared->offset);
        if (!m->internal_view) {
            ok = fail_mem("rknn_create_mem_from_fd(shared buffer)", m->sizes.total_internal_size);
            break;
        }
        int ret = rknn_set_internal_mem(m->ctx, m->internal_view);
        if (ret < 0) {
            ok = fail("rknn_set_internal_mem", ret);
            break;
        }
        if (weights_outside && !skip_weight_mem) {
            /* the step the documentation's snippets leave out: with MEM_ALLOC_OUTSIDE the weights
               are yours too, or rknn_run has none */
            m->weight_mem = rknn_create_mem(m->ctx, m->sizes.total_weight_size);
            if (!m->weight_mem) {
                ok = fail_mem("rknn_create_mem(total_weight_size)", m->sizes.total_weight_size);
                break;
            }
            ret = rknn_set_weight_mem(m->ctx, m->weight_mem);
            if (ret < 0) {
                ok = fail("rknn_set_weight_mem", ret);
                break;
            }
            weight_bytes += m->sizes.total_weight_size;
        }
        printf("model %c: internal view of %u B set%s\n", m->name, m->sizes.total_internal_size,
               !weights_outside ? "; weights stay the runtime's"
               : skip_weight_mem ? "; NO weight mem set (--skip-weight-mem)"
               : "; weight mem set");
        ok = query_native_attrs(m) && bind_io(m, &io_bytes);
    }
    if (ok) {
        printf("DMA total the runtime allocated itself, after setup:");
        for (int i = 0; ok && i < n; i++) {
            ok = query_sizes(&models[i]);
            if (ok) printf(" %c %llu B", models[i].name,
                           (unsigned long long)models[i].sizes.total_dma_allocated_size);
        }
        printf("\n");
    }

    /* 4. the models one after another, twice, each with its own input (frame = its index): the
       second round follows the other models' use of the shared buffer, yet must give the same
       outputs.  Sharing is safe only because the runs never overlap. */
    for (int round = 0; ok && round < 2; round++) {
        for (int i = 0; ok && i < n; i++) {
            model *m = &models[i];
            ok = write_inputs(m, i) && run_and_sync(m);
            if (!ok && weights_outside && skip_weight_mem)
                fprintf(stderr, "allocation: with RKNN_FLAG_MEM_ALLOC_OUTSIDE the weights are yours too: "
                                "rknn_create_mem(total_weight_size) + rknn_set_weight_mem before rknn_run\n");
            if (!ok) break;
            const rknn_tensor_attr *out0 = &m->attrs[m->io_num.n_input];
            if (round == 0) {
                first_round[i] = malloc(out0->size_with_stride);
                if (!first_round[i]) {
                    fprintf(stderr, "allocation: cannot allocate %u B\n", out0->size_with_stride);
                    ok = 0;
                    break;
                }
                memcpy(first_round[i], output_bytes(m, 0), out0->size_with_stride);
            } else {
                printf("model %c, round 2:\n", m->name);
                print_output0(m);
                printf("  output 0 equal to round 1: %s\n",
                       memcmp(first_round[i], output_bytes(m, 0), out0->size_with_stride) == 0 ? "yes" : "no");
            }
        }
    }
    if (ok && skip_weight_mem)
        printf("rknn_run succeeded without a weight mem: your runtime did not refuse it\n");

    if (ok) {
        printf("internal memory: separate buffers");
        for (int i = 0; i < n; i++)
            printf("%s%u", i ? " + " : " ", models[i].sizes.total_internal_size);
        printf(" = %llu B; one shared buffer %llu B; saved %llu B\n", (unsigned long long)sum_internal,
               (unsigned long long)max_internal, (unsigned long long)(sum_internal - max_internal));
        printf("mems you allocated: internal %llu B + weights %llu B + io %llu B = %llu B\n",
               (unsigned long long)max_internal, (unsigned long long)weight_bytes,
               (unsigned long long)io_bytes, (unsigned long long)(max_internal + weight_bytes + io_bytes));
    }

    /* 5. teardown: the other models first, then model A, whose context made the shared buffer;
       it goes after every view of it and before A's rknn_destroy */
    for (int i = n - 1; i >= 0; i--) {
        ok = teardown(&models[i], i == 0 ? shared : NULL) && ok;
        free(first_round[i]);
    }
    return ok;
}

static int usage(const char *program)
{
    fprintf(stderr,
            "usage: %s prealloc MODEL.rknn [FRAMES >= 2]\n"
            "       %s shared [--internal-only | --skip-weight-mem] A.rknn B.rknn [C.rknn]\n",
            program, program);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "prealloc") == 0 && argc <= 4) {
        int frames = DEFAULT_FRAMES;
        if (argc == 4) {
            char *end = NULL;
            long n = strtol(argv[3], &end, 10);
            if (*end != '\0' || n < 2 || n > 100000000) return usage(argv[0]);
            frames = (int)n;
        }
        return mode_prealloc(argv[2], frames) ? 0 : 1;
    }
    if (argc >= 3 && strcmp(argv[1], "shared") == 0) {
        int internal_only = 0, skip_weight_mem = 0, first = 2;
        for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
            if (strcmp(argv[first], "--internal-only") == 0) internal_only = 1;
            else if (strcmp(argv[first], "--skip-weight-mem") == 0) skip_weight_mem = 1;
            else return usage(argv[0]);
        }
        int n = argc - first;
        /* --internal-only leaves the weights inside: there is no weight mem to skip */
        if (n < 2 || n > MAX_MODELS || (internal_only && skip_weight_mem)) return usage(argv[0]);
        return mode_shared((const char **)&argv[first], n, internal_only, skip_weight_mem) ? 0 : 1;
    }
    return usage(argv[0]);
}
