/*
 * mem_layers.c -- a context's memory as the runtime accounts for it (chapter 1, lab 1).
 *
 * For one model it prints the NATIVE attr of every input and output, then the
 * account of RKNN_QUERY_MEM_SIZE: weight + internal + io, where io is the sum of
 * the native size_with_stride of every input and output, and the remainder of
 * the DMA total beyond those three.  It prints the account twice, right after
 * rknn_init and after one rknn_run, because a board's runtime may allocate its
 * io buffers only at the first run.  With a flag argument it also inits the same
 * model with that flag: the DMA total falls by the part the flag makes yours,
 * and the runtime's own extras largely cancel in the difference (not
 * documented: the printed difference shows it).
 *
 *   usage: mem_layers MODEL.rknn [internal|all]
 *   internal: RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE; all: RKNN_FLAG_MEM_ALLOC_OUTSIDE
 *   build on a board: gcc -O2 -I <rknn_api.h dir> mem_layers.c -lrknnrt -o mem_layers
 *
 * On a board, total_dma_allocated_size holds more than weights + internal + io.
 * The runtime also allocates register-command and task buffers, and it rounds
 * allocations to 4 KiB.  User Guide §9.1.1 lists register config, and public
 * librknnrt logs show these buffers.  The io buffers may be allocated only at
 * the first rknn_run.  The simulator allocates exactly weights + internal + io
 * at init (assumptions A9, A10).  Board evidence: airockchip/rknn-toolkit2#129
 * (yolov5s on an RK3588, librknnrt 2.1.0: 22,917,120 B right after init against
 * 13,459,840 B of weights + internal).  So the remainder can be negative at init.  The documents disagree
 * on when RKNN_QUERY_MEM_SIZE may be asked: the API reference says it requires
 * RKNN_FLAG_MEM_ALLOC_OUTSIDE; rknn_benchmark and the user guide query it after
 * a plain init (flag 0), as this program does.  It reports the error if your
 * runtime refuses.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rknn_api.h"

static const char *format_name(rknn_tensor_format fmt)
{
    switch (fmt) {
    case RKNN_TENSOR_NCHW: return "NCHW";
    case RKNN_TENSOR_NHWC: return "NHWC";
    case RKNN_TENSOR_NC1HWC2: return "NC1HWC2";
    default: return "other";
    }
}

/* Prints the native attr of every input and output; returns the sum of their
   size_with_stride (the runtime's io buffers, padding included), or -1. */
static int64_t print_native_io(rknn_context ctx, const rknn_input_output_num *io_num)
{
    int64_t io = 0;
    for (uint32_t k = 0; k < io_num->n_input + io_num->n_output; k++) {
        int is_input = k < io_num->n_input;
        rknn_tensor_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.index = is_input ? k : k - io_num->n_input;
        int ret = rknn_query(ctx, is_input ? RKNN_QUERY_NATIVE_INPUT_ATTR : RKNN_QUERY_NATIVE_OUTPUT_ATTR,
                             &attr, sizeof(attr));
        if (ret < 0) {
            fprintf(stderr, "rknn_query(native attr of %s %u): %d\n", is_input ? "input" : "output",
                    attr.index, ret);
            return -1;
        }
        printf("%s %u: native %s dims [", is_input ? "input" : "output", attr.index, format_name(attr.fmt));
        for (uint32_t d = 0; d < attr.n_dims && d < RKNN_MAX_DIMS; d++)
            printf("%s%u", d ? ", " : "", attr.dims[d]);
        printf("], size %u, size_with_stride %u, w_stride %u\n", attr.size, attr.size_with_stride,
               attr.w_stride);
        io += attr.size_with_stride;
    }
    return io;
}

/* RKNN_QUERY_MEM_SIZE of ctx into *mem; prints the error and returns 0 if the runtime refuses. */
static int query_mem_size(rknn_context ctx, rknn_mem_size *mem, const char *when)
{
    memset(mem, 0, sizeof(*mem));
    int ret = rknn_query(ctx, RKNN_QUERY_MEM_SIZE, mem, sizeof(*mem));
    if (ret < 0)
        fprintf(stderr, "rknn_query(RKNN_QUERY_MEM_SIZE) %s: %d\n", when, ret);
    return ret >= 0;
}

static void print_account(const char *when, const rknn_mem_size *mem, int64_t io)
{
    int64_t planned = (int64_t)mem->total_weight_size + mem->total_internal_size + io;
    printf("%-20s weight %u + internal %u + io %lld = %lld B; DMA total %llu B; remainder %lld B\n",
           when, mem->total_weight_size, mem->total_internal_size, (long long)io, (long long)planned,
           (unsigned long long)mem->total_dma_allocated_size,
           (long long)((int64_t)mem->total_dma_allocated_size - planned));
}

/* One rknn_inputs_set of zero bytes (uint8, the plain attr's layout) and one rknn_run. */
static int run_once(rknn_context ctx, uint32_t n_input)
{
    rknn_input *inputs = calloc(n_input, sizeof(*inputs));
    int ret = inputs ? 0 : -1;
    for (uint32_t i = 0; ret >= 0 && i < n_input; i++) {
        rknn_tensor_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.index = i;
        ret = rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &attr, sizeof(attr));
        inputs[i].index = i;
        inputs[i].size = attr.n_elems;                       /* uint8: one byte per element */
        inputs[i].buf = ret >= 0 ? calloc(attr.n_elems ? attr.n_elems : 1, 1) : NULL;
        inputs[i].type = RKNN_TENSOR_UINT8;
        inputs[i].fmt = attr.fmt == RKNN_TENSOR_NCHW ? RKNN_TENSOR_NCHW : RKNN_TENSOR_NHWC;
        if (ret >= 0 && inputs[i].buf == NULL) ret = -1;
    }
    if (ret >= 0) ret = rknn_inputs_set(ctx, n_input, inputs);
    if (ret >= 0) ret = rknn_run(ctx, NULL);
    if (ret < 0) fprintf(stderr, "one rknn_inputs_set + rknn_run: %d\n", ret);
    for (uint32_t i = 0; inputs && i < n_input; i++) free(inputs[i].buf);
    free(inputs);
    return ret >= 0;
}

int main(int argc, char **argv)
{
    uint32_t flag = 0;
    const char *flag_name = NULL;
    if (argc == 3 && strcmp(argv[2], "internal") == 0) {
        flag = RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE;
        flag_name = "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE";
    } else if (argc == 3 && strcmp(argv[2], "all") == 0) {
        flag = RKNN_FLAG_MEM_ALLOC_OUTSIDE;
        flag_name = "RKNN_FLAG_MEM_ALLOC_OUTSIDE";
    } else if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.rknn [internal|all]\n", argv[0]);
        return 2;
    }

    rknn_context ctx = 0;
    int ret = rknn_init(&ctx, argv[1], 0, 0, NULL);          /* size 0: a path; flag 0 */
    if (ret < 0) {
        fprintf(stderr, "rknn_init(%s): %d\n", argv[1], ret);
        return 1;
    }
    int ok = 1;
    rknn_sdk_version version;
    memset(&version, 0, sizeof(version));
    if (rknn_query(ctx, RKNN_QUERY_SDK_VERSION, &version, sizeof(version)) >= 0)
        printf("runtime %s, driver %s\n", version.api_version, version.drv_version);

    rknn_input_output_num io_num;
    rknn_mem_size at_init, after_run;
    int64_t io = -1;
    if (rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io_num, sizeof(io_num)) < 0) {
        fprintf(stderr, "rknn_query(RKNN_QUERY_IN_OUT_NUM) failed\n");
        ok = 0;
    }
    if (ok) ok = (io = print_native_io(ctx, &io_num)) >= 0;
    if (ok) ok = query_mem_size(ctx, &at_init, "after rknn_init");
    if (ok) print_account("after rknn_init:", &at_init, io);
    if (ok) ok = run_once(ctx, io_num.n_input) && query_mem_size(ctx, &after_run, "after rknn_run");
    if (ok) print_account("after one rknn_run:", &after_run, io);

    if (ok && flag) {
        /* the same model with the flag, compared at the same moment (right after init) */
        rknn_context flagged = 0;
        rknn_mem_size with_flag;
        ret = rknn_init(&flagged, argv[1], 0, flag, NULL);
        if (ret < 0) {
            fprintf(stderr, "rknn_init(%s, %s): %d\n", argv[1], flag_name, ret);
            ok = 0;
        } else {
            ok = query_mem_size(flagged, &with_flag, "after rknn_init with the flag");
            if (ok)
                printf("%s: DMA total %llu B; flag 0 minus this %lld B "
                       "(internal %u B, weight + internal %llu B)\n", flag_name,
                       (unsigned long long)with_flag.total_dma_allocated_size,
                       (long long)at_init.total_dma_allocated_size - (long long)with_flag.total_dma_allocated_size,
                       at_init.total_internal_size,
                       (unsigned long long)at_init.total_weight_size + at_init.total_internal_size);
            rknn_destroy(flagged);
        }
    }

    rknn_destroy(ctx);
    return ok ? 0 : 1;
}
