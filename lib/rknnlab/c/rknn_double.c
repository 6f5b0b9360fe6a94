/*
 * rknn_double.c -- a test double of librknnrt.so, for rknnlab's tests and for
 * lab 7's C check (rknnlab.checks._lab07_c builds it on first use).
 *
 * It exports the runtime's C functions with the runtime's signatures and
 * struct layouts (declared here from the project's facts sheet, not from
 * Rockchip's header) and implements their documented behaviour for one fake
 * model, so that tests can drive rknnlab.rknn.native end to end on any Linux
 * machine.  It is never a runtime: no NPU, no real model.
 *
 * The fake model
 *   A model is any byte string starting with "RKNN"; the rest of it (up to
 *   the first NUL, at most 1023 bytes) is what RKNN_QUERY_CUSTOM_STRING
 *   returns, so tests can see that the model's bytes arrived.
 *   input  0 "input":  1x4x4x3 NHWC int8, affine zp=-128 scale=1/255
 *                      (native: same, rows padded to w_stride 8 -> 96 bytes)
 *   output 0 "scores": 1x10 NCHW int8, affine zp=-10 scale=0.5
 *                      scores[k] = (sum of the 48 quantized inputs + k + salt) mod 256
 *   output 1 "boxes":  1x4x2x2 NCHW int8, affine zp=0 scale=0.25
 *                      boxes[k] = (quantized input byte k + salt) mod 256
 *                      (native: NC1HWC2 1x1x2x2x16 -> 64 bytes)
 *   (mod 256 read as int8.)  salt is the payload's word "salt=N" (0 to 255, 0
 *   without the word): a checker that draws it per run makes the outputs
 *   something only a program that runs the model can print, not one that
 *   applies the formula above to its frames.
 *   Inputs given as uint8 are quantized as the model's mean/std would
 *   (q = u - 128), float32 as (q = round(x * 255) - 128); NHWC only.
 *   An input buffer shorter than its type needs is refused with PARAM_INVALID
 *   (as librknnrt 2.3.2 logs show); a longer one is read up to the size needed
 *   (the simulator's assumption A64).
 *   Zero-copy (rknn_set_io_mem finds the tensor by the attr's name): the input
 *   bound as INT8 or UINT8 NHWC, rows at the attr's w_stride (4 if 0); an
 *   output bound as INT8 with its plain attr (attr.size bytes) or its native
 *   one (size_with_stride), or as FLOAT32 or FLOAT16 with fmt NCHW, NHWC or
 *   UNDEFINED, as Rockchip's zero-copy demos bind every output (the plain
 *   OUTPUT_ATTR with type set to RKNN_TENSOR_FLOAT32, in a mem of n_elems x 4
 *   bytes: rknpu2/examples/rknn_api_demo/src/rknn_create_mem_demo.cpp).  Each
 *   rknn_run then writes the dequantised values, (q - zp) x scale with the
 *   model's zp and scale, into the mem.  NHWC lays "boxes" out as 1x2x2x4.
 *   Another type or fmt, or a mem smaller than n_elems x the type's size,
 *   is refused with PARAM_INVALID.
 *   A payload may set the model's memory sizes with the words "weights=N"
 *   and "internal=N" (bytes, 1 to 2^30; 4096 and 2048 by default), so that
 *   tests can give several models different sizes.
 *   "npu_cores=N" (1 to 3, 3 by default) stands for a SoC with N NPU cores:
 *   rknn_set_core_mask refuses a mask naming a core it lacks with
 *   PARAM_INVALID, as the simulator does (AUTO and ALL are always accepted).
 *
 * The fake detector (for examples/c/video_pipeline.c)
 *   A payload with the word "detector=HxW" describes a text detector shaped
 *   like PP-OCR's (one image in, one probability map of the same size out)
 *   instead of the model above.  Optional words: "c2=N" (the native output's
 *   channel block, 16 by default: rk3588's int8 C2), "c1=N" (its number of
 *   blocks, 1 by default: the compiler may give a 1-channel output more, as
 *   for ppocr_det on rk3588: 1x4x480x480x16), "w_stride=N" (the
 *   native input's row pitch in pixels, the width by default), "zp=N" and
 *   "scale=X" (the output's quantization, -128 and 1/255 by default).
 *   input  0 "x":    1xHxWx3 NHWC int8 (native: rows of w_stride pixels)
 *   output 0 "prob": 1x1xHxW NCHW int8; native NC1HWC2 1xC1xHxWxC2
 *   Its "network" is a fake ink detector, a function of each pixel alone, so
 *   that a test can predict it: luma l = (77 R + 150 G + 29 B) >> 8 of the
 *   uint8 pixel; probability p = (255 - l) / 255 (dark marks on light paper
 *   are text), but p = 0 where l < 16 (the black of a letterbox border is no
 *   text); q = round(p / scale) + zp, clamped to int8.  In an NC1HWC2 mem
 *   every byte but channel 0 (block 0, first of each C2 group) holds 127 (the
 *   most probable value), from rknn_set_io_mem on: a reader that ignores C2
 *   sees text everywhere.  Its contexts run only from
 *   mems bound with rknn_set_io_mem (zero-copy: rknn_run refuses,
 *   PARAM_INVALID, until the input and the output are bound; inputs_set and
 *   outputs_get refuse with INPUT_INVALID / OUTPUT_INVALID).  The input may be
 *   bound as UINT8 or INT8 (q = u - 128) NHWC, the output as NC1HWC2 (with
 *   the double's C2 in dims[4]), NCHW or NHWC.
 *
 * Threads: the call log, the delay counters and the tables of contexts and
 *   mems are guarded by one mutex, so several threads may call the double at
 *   once.  A context used by two threads at the same time is an error the
 *   double reports: rknn_run on a context whose previous rknn_run has not
 *   returned logs "rknn_run_overlap" and fails with CTX_INVALID (the course's
 *   rule is one thread per context at a time; no document says whether a
 *   context is thread-safe).
 *
 * Its memory account (RKNN_QUERY_MEM_SIZE), as the simulator's assumptions
 *   give it: weights 4096 B, internal 2048 B (or the payload's sizes), io 74 B
 *   (the plain sizes).
 *   total_dma_allocated_size counts what the runtime allocated for that
 *   context (A9): no weights when they are read in place from a
 *   MODEL_BUFFER_ZERO_COPY buffer (A5) or shared by rknn_dup_context (A23);
 *   no internal with *_ALLOC_OUTSIDE; nothing for a
 *   COLLECT_MODEL_INFO_ONLY context, which answers only MEM_SIZE and
 *   IN_OUT_NUM (other queries PARAM_INVALID, other calls CTX_INVALID: A15).
 *   rknn_init_extend.real_model_offset/size select the model inside the
 *   buffer; with ZERO_COPY a model_buffer_fd > 0 must be the fd of the mem
 *   holding those bytes.  Destroying that mem while a context reads it makes
 *   the context's next rknn_run fail with PARAM_INVALID (A27).
 *   Memory outside (A15, A25): rknn_set_weight_mem needs
 *   RKNN_FLAG_MEM_ALLOC_OUTSIDE, rknn_set_internal_mem needs it or
 *   RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE (else PARAM_INVALID), and each refuses a
 *   mem smaller than the context's size.  rknn_run refuses (PARAM_INVALID)
 *   until the mems its flag makes the caller's are set: weights and internal
 *   with MEM_ALLOC_OUTSIDE, internal with INTERNAL_ALLOC_OUTSIDE.  io mems are
 *   not required (the double's io never needs a buffer: A10).  Destroying a
 *   set weight or internal mem unsets it.  The double keeps nothing in the
 *   internal mem, so contexts sharing one are never corrupted here.
 *   rknn_create_mem_from_fd refuses (NULL) a closed fd, and a view that
 *   does not fit in the file behind the fd (offset + size > its size: every
 *   mem of the double is such a file).
 *
 * Its timing answers are fakes: it measures nothing.
 *   RKNN_QUERY_PERF_RUN: run_duration 1234 us once the context has run, 0
 *   before.  RKNN_QUERY_PERF_DETAIL: only for a context made with
 *   RKNN_FLAG_COLLECT_PERF_MASK (else PARAM_INVALID, the code the simulator
 *   gives: A48); a NUL-terminated text in the runtime's layout (the course's
 *   finding F1) for an invented six-layer graph of the fake model, with fixed
 *   cycles and times; WorkLoad and MacUsage follow rknn_set_core_mask.
 *   data_len counts the text without the NUL.  The text is the context's
 *   until its next PERF_DETAIL query or rknn_destroy.  Unlike the simulator,
 *   the double does not require a run before the query (the API reference
 *   describes the query after rknn_run; what a board answers before one is
 *   not documented).
 *
 * Inspection (extra exports, not part of the runtime):
 *   double_call_log()   every call so far, one "function key=value ..." line
 *                       per call plus one "function[i] ..." line per array
 *                       element; double_reset() clears it.
 *   double_sizeof(), double_offsetof()  the C layout of the structs above.
 *   double_live_outputs(), double_live_mems()  allocations not yet freed.
 *   $RKNN_DOUBLE_LOG_FILE  if set, the call log is written to that file when
 *                       the process exits (for C programs, which cannot call
 *                       double_call_log themselves).
 *   $RKNN_DOUBLE_EVENTS_FILE  if set, one JSON object per line is written
 *                       to that file as each memory call returns (a crash
 *                       leaves the lines before it), for lab 7's C check:
 *                       {"call": "rknn_init"|"rknn_destroy"|"rknn_inputs_set"|
 *                       "rknn_run"|"rknn_outputs_get"|"rknn_outputs_release"|
 *                       "rknn_create_mem"|"rknn_destroy_mem"|"rknn_set_io_mem"|
 *                       "rknn_mem_sync", "ret": the return code (create_mem*:
 *                       0, or -4 for NULL), ...}.  rknn_destroy adds
 *                       "unreleased": the outputs its gets allocated that no
 *                       release freed (they go with the context).  A get adds
 *                       "outputs": [index, is_prealloc, want_float, size given,
 *                       bytes the output needs, what the buffer held before
 *                       the get]; that last is "runtime" (is_prealloc = 0: the
 *                       get allocates), or for a caller's buffer "new" (no get
 *                       wrote there before), "same" (still what the last get
 *                       wrote there: reused), "fresh" / "freed" (the fill
 *                       glibc gives blocks it hands out / takes back, under
 *                       $MALLOC_PERTURB_), "zero", "changed", or "small" (no
 *                       buffer, or smaller than the output: refused), and
 *                       "capacity": per output, the bytes its buffer really
 *                       holds (glibc's malloc_usable_size: the size asked for
 *                       under MALLOC_CHECK_=3, as lab 7's check runs programs,
 *                       else glibc's rounded size) when it is a block of the
 *                       brk heap, else -1 (not from malloc, mmapped, or
 *                       is_prealloc = 0); never a refusal: a buffer smaller than
 *                       rknn_output.size says is written past its end, as a
 *                       runtime would.  create_mem*
 *                       (all kinds log "rknn_create_mem") adds "size";
 *                       set_io_mem adds the attr's "name", "type", "fmt",
 *                       "n_elems", "size", "size_with_stride" and the mem's
 *                       "mem_size" (-1: not a mem of the double).  At exit: {"call":
 *                       "exit", "contexts", "mems", "outputs": still live}.
 *   $RKNN_DOUBLE_DELAY_US  e.g. "rknn_run=2000,rknn_inputs_set=500+100": each
 *                       named call sleeps that many microseconds (A+B: the
 *                       k-th call, from 0, sleeps A + k*B), so that a test
 *                       can see a program attribute time to the right call
 *                       and compute its statistics right.
 *                       "rknn_outputs_get_float" adds to a get that asks any
 *                       output with want_float = 1.
 *
 * Built by tests/conftest.py (and by lab 7's check) with gcc -shared -fPIC -O1.  Defining
 * DOUBLE_OLD_RUNTIME leaves out rknn_create_mem2 and rknn_set_input_shapes,
 * to stand for a runtime older than those functions.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ ABI */

#define RKNN_MAX_DIMS 16
#define RKNN_MAX_NAME_LEN 256
#define RKNN_MAX_DYNAMIC_SHAPE_NUM 512

#if UINTPTR_MAX > 0xffffffffu
typedef uint64_t rknn_context;
#define HANDLE_BASE 0x5eed000000000000ull /* high bits set: a 32-bit slip shows */
#else
typedef uint32_t rknn_context;
#define HANDLE_BASE 0x5eed0000u
#endif

enum {
    RKNN_SUCC = 0, RKNN_ERR_FAIL = -1, RKNN_ERR_MALLOC_FAIL = -4, RKNN_ERR_PARAM_INVALID = -5,
    RKNN_ERR_MODEL_INVALID = -6, RKNN_ERR_CTX_INVALID = -7, RKNN_ERR_INPUT_INVALID = -8,
    RKNN_ERR_OUTPUT_INVALID = -9,
};
enum { T_FLOAT32 = 0, T_FLOAT16 = 1, T_INT8 = 2, T_UINT8 = 3 };
enum { F_NCHW = 0, F_NHWC = 1, F_NC1HWC2 = 2, F_UNDEFINED = 3 };
enum { QNT_AFFINE = 2 };
enum {
    Q_IN_OUT_NUM = 0, Q_INPUT_ATTR = 1, Q_OUTPUT_ATTR = 2, Q_PERF_DETAIL = 3, Q_PERF_RUN = 4,
    Q_SDK_VERSION = 5, Q_INPUT_DYNAMIC_RANGE = 13,
    Q_MEM_SIZE = 6, Q_CUSTOM_STRING = 7, Q_NATIVE_INPUT_ATTR = 8, Q_NATIVE_OUTPUT_ATTR = 9,
    Q_NATIVE_NHWC_INPUT_ATTR = 10, Q_NATIVE_NHWC_OUTPUT_ATTR = 11, Q_CURRENT_INPUT_ATTR = 14,
    Q_CURRENT_OUTPUT_ATTR = 15, Q_CURRENT_NATIVE_INPUT_ATTR = 16, Q_CURRENT_NATIVE_OUTPUT_ATTR = 17,
};
#define FLAG_MEM_ALLOC_OUTSIDE 0x10u
#define FLAG_INTERNAL_ALLOC_OUTSIDE 0x200u
#define FLAG_MODEL_BUFFER_ZERO_COPY 0x10000u
#define MEM_FLAG_ALLOC_NO_CONTEXT 0x20000u
#define MEM_ALLOC_INSIDE 1u
#define MEM_FROM_FD 2u
#define MEM_FROM_PHYS 3u

typedef struct { uint32_t n_input; uint32_t n_output; } rknn_input_output_num;

typedef struct {
    uint32_t index;
    uint32_t n_dims;
    uint32_t dims[RKNN_MAX_DIMS];
    char name[RKNN_MAX_NAME_LEN];
    uint32_t n_elems;
    uint32_t size;
    int fmt;
    int type;
    int qnt_type;
    int8_t fl;
    int32_t zp;
    float scale;
    uint32_t w_stride;
    uint32_t size_with_stride;
    uint8_t pass_through;
    uint32_t h_stride;
} rknn_tensor_attr;

typedef struct {
    uint32_t total_weight_size;
    uint32_t total_internal_size;
    uint64_t total_dma_allocated_size;
    uint32_t total_sram_size;
    uint32_t free_sram_size;
    uint32_t reserved[10];
} rknn_mem_size;

typedef struct {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    int32_t offset;
    uint32_t size;
    uint32_t flags;
    void *priv_data;
} rknn_tensor_mem;

typedef struct {
    uint32_t index;
    void *buf;
    uint32_t size;
    uint8_t pass_through;
    int type;
    int fmt;
} rknn_input;

typedef struct {
    uint8_t want_float;
    uint8_t is_prealloc;
    uint32_t index;
    void *buf;
    uint32_t size;
} rknn_output;

typedef struct {
    rknn_context ctx;
    int32_t real_model_offset;
    uint32_t real_model_size;
    int32_t model_buffer_fd;
    uint32_t model_buffer_flags;
    uint8_t reserved[112];
} rknn_init_extend;

typedef struct {
    uint64_t frame_id;
    int32_t non_block;
    int32_t timeout_ms;
    int32_t fence_fd;
} rknn_run_extend;

typedef struct { uint64_t frame_id; } rknn_output_extend;

typedef struct {
    char api_version[256];
    char drv_version[256];
} rknn_sdk_version;

typedef struct { int64_t run_duration; } rknn_perf_run;

typedef struct { char string[1024]; } rknn_custom_string;

typedef struct {
    char *perf_data;
    uint64_t data_len;
} rknn_perf_detail;

typedef struct {
    uint32_t index;
    uint32_t shape_number;
    int fmt;
    char name[RKNN_MAX_NAME_LEN];
    uint32_t dyn_range[RKNN_MAX_DYNAMIC_SHAPE_NUM][RKNN_MAX_DIMS];
    uint32_t n_dims;
} rknn_input_range;

#define EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------- layout */

#define STRUCT(s) { #s, NULL, sizeof(s) }
#define FIELD(s, f) { #s, #f, offsetof(s, f) }
static const struct { const char *type; const char *field; size_t value; } layout[] = {
    STRUCT(rknn_input_output_num), FIELD(rknn_input_output_num, n_input),
    FIELD(rknn_input_output_num, n_output),
    STRUCT(rknn_tensor_attr), FIELD(rknn_tensor_attr, index), FIELD(rknn_tensor_attr, n_dims),
    FIELD(rknn_tensor_attr, dims), FIELD(rknn_tensor_attr, name), FIELD(rknn_tensor_attr, n_elems),
    FIELD(rknn_tensor_attr, size), FIELD(rknn_tensor_attr, fmt), FIELD(rknn_tensor_attr, type),
    FIELD(rknn_tensor_attr, qnt_type), FIELD(rknn_tensor_attr, fl), FIELD(rknn_tensor_attr, zp),
    FIELD(rknn_tensor_attr, scale), FIELD(rknn_tensor_attr, w_stride),
    FIELD(rknn_tensor_attr, size_with_stride), FIELD(rknn_tensor_attr, pass_through),
    FIELD(rknn_tensor_attr, h_stride),
    STRUCT(rknn_mem_size), FIELD(rknn_mem_size, total_weight_size),
    FIELD(rknn_mem_size, total_internal_size), FIELD(rknn_mem_size, total_dma_allocated_size),
    FIELD(rknn_mem_size, total_sram_size), FIELD(rknn_mem_size, free_sram_size),
    FIELD(rknn_mem_size, reserved),
    STRUCT(rknn_tensor_mem), FIELD(rknn_tensor_mem, virt_addr), FIELD(rknn_tensor_mem, phys_addr),
    FIELD(rknn_tensor_mem, fd), FIELD(rknn_tensor_mem, offset), FIELD(rknn_tensor_mem, size),
    FIELD(rknn_tensor_mem, flags), FIELD(rknn_tensor_mem, priv_data),
    STRUCT(rknn_input), FIELD(rknn_input, index), FIELD(rknn_input, buf), FIELD(rknn_input, size),
    FIELD(rknn_input, pass_through), FIELD(rknn_input, type), FIELD(rknn_input, fmt),
    STRUCT(rknn_output), FIELD(rknn_output, want_float), FIELD(rknn_output, is_prealloc),
    FIELD(rknn_output, index), FIELD(rknn_output, buf), FIELD(rknn_output, size),
    STRUCT(rknn_init_extend), FIELD(rknn_init_extend, ctx),
    FIELD(rknn_init_extend, real_model_offset), FIELD(rknn_init_extend, real_model_size),
    FIELD(rknn_init_extend, model_buffer_fd), FIELD(rknn_init_extend, model_buffer_flags),
    FIELD(rknn_init_extend, reserved),
    STRUCT(rknn_run_extend), FIELD(rknn_run_extend, frame_id), FIELD(rknn_run_extend, non_block),
    FIELD(rknn_run_extend, timeout_ms), FIELD(rknn_run_extend, fence_fd),
    STRUCT(rknn_output_extend), FIELD(rknn_output_extend, frame_id),
    STRUCT(rknn_sdk_version), FIELD(rknn_sdk_version, api_version),
    FIELD(rknn_sdk_version, drv_version),
    STRUCT(rknn_perf_run), FIELD(rknn_perf_run, run_duration),
    STRUCT(rknn_custom_string), FIELD(rknn_custom_string, string),
    STRUCT(rknn_perf_detail), FIELD(rknn_perf_detail, perf_data),
    FIELD(rknn_perf_detail, data_len),
    STRUCT(rknn_input_range), FIELD(rknn_input_range, index),
    FIELD(rknn_input_range, shape_number), FIELD(rknn_input_range, fmt),
    FIELD(rknn_input_range, name), FIELD(rknn_input_range, dyn_range),
    FIELD(rknn_input_range, n_dims),
};

/* sizeof(struct), or -1 if the double does not declare it */
EXPORT int double_sizeof(const char *type)
{
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++)
        if (!layout[i].field && strcmp(layout[i].type, type) == 0)
            return (int)layout[i].value;
    return -1;
}

/* offsetof(struct, field), or -1 if unknown */
EXPORT int double_offsetof(const char *type, const char *field)
{
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++)
        if (layout[i].field && strcmp(layout[i].type, type) == 0 &&
            strcmp(layout[i].field, field) == 0)
            return (int)layout[i].value;
    return -1;
}

/* ------------------------------------------------------------- call log */

/* guards the call log, the delay counters and the tables of contexts and mems */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static char *call_log;
static size_t log_len, log_cap;

static void log_line(const char *fmt, ...)
{
    /* long-running programs (the C examples' memory checks) turn the log off:
       it grows with every call */
    static int off = -1;
    if (off < 0)
        off = getenv("RKNN_DOUBLE_NO_LOG") != NULL;
    if (off)
        return;
    va_list args;
    va_start(args, fmt);
    int need = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (need < 0)
        return;
    pthread_mutex_lock(&table_lock);
    if (log_len + (size_t)need + 2 > log_cap) {
        size_t cap = (log_cap ? log_cap * 2 : 4096) + (size_t)need;
        char *grown = realloc(call_log, cap);
        if (!grown) {
            pthread_mutex_unlock(&table_lock);
            return;
        }
        call_log = grown;
        log_cap = cap;
    }
    va_start(args, fmt);
    vsnprintf(call_log + log_len, log_cap - log_len, fmt, args);
    va_end(args);
    log_len += (size_t)need;
    call_log[log_len++] = '\n';
    call_log[log_len] = '\0';
    pthread_mutex_unlock(&table_lock);
}

EXPORT const char *double_call_log(void) { return call_log ? call_log : ""; }

__attribute__((destructor)) static void write_log_file(void)
{
    const char *path = getenv("RKNN_DOUBLE_LOG_FILE");
    if (!path || !call_log)
        return;
    FILE *fp = fopen(path, "w");
    if (!fp)
        return;
    fputs(call_log, fp);
    fclose(fp);
}

EXPORT void double_reset(void)
{
    log_len = 0;
    if (call_log)
        call_log[0] = '\0';
}

/* Sleeps as $RKNN_DOUBLE_DELAY_US says for `call` (read at every call: tests change it). */
static void delay(const char *call)
{
    static struct { const char *call; long count; } seen[8]; /* calls so far, per name */
    const char *spec = getenv("RKNN_DOUBLE_DELAY_US");
    size_t n = strlen(call);
    for (const char *p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, call, n) != 0 || p[n] != '=')
            continue;
        char *end = NULL;
        long us = strtol(p + n + 1, &end, 10);
        if (*end == '+') {
            long step = strtol(end + 1, NULL, 10);
            int k = 0;
            pthread_mutex_lock(&table_lock);
            while (k < 8 && seen[k].call && strcmp(seen[k].call, call) != 0)
                k++;
            if (k < 8) {
                seen[k].call = call; /* a string literal of the caller: lives forever */
                us += step * seen[k].count++;
            }
            pthread_mutex_unlock(&table_lock);
        }
        struct timespec t = {us / 1000000, (us % 1000000) * 1000};
        if (us > 0)
            while (nanosleep(&t, &t) != 0) /* a signal cut it short: sleep the rest */
                ;
        return;
    }
}

#define ULL(x) ((unsigned long long)(x))
#define PTR(p) ((unsigned long)(uintptr_t)(p))

/* ------------------------------------------------------------ the model */

#define N_IN_ELEMS 48
#define N_OUTPUTS 2
#define WEIGHT_SIZE 4096u
#define INTERNAL_SIZE 2048u
#define IO_SIZE (48u + 10u + 16u)

static rknn_tensor_attr make_attr(uint32_t index, const char *name, uint32_t n_dims,
                                  const uint32_t *dims, int fmt, int32_t zp, float scale,
                                  uint32_t n_elems, uint32_t w_stride, uint32_t size_with_stride)
{
    rknn_tensor_attr a;
    memset(&a, 0, sizeof a);
    a.index = index;
    a.n_dims = n_dims;
    memcpy(a.dims, dims, n_dims * sizeof dims[0]);
    snprintf(a.name, sizeof a.name, "%s", name);
    a.n_elems = n_elems;
    a.size = n_elems; /* int8: one byte per element */
    a.fmt = fmt;
    a.type = T_INT8;
    a.qnt_type = QNT_AFFINE;
    a.zp = zp;
    a.scale = scale;
    a.w_stride = w_stride;
    a.size_with_stride = size_with_stride;
    return a;
}

/* which: 0 plain, 1 native, 2 native NHWC */
static rknn_tensor_attr input_attr(int which)
{
    static const uint32_t nhwc[] = {1, 4, 4, 3};
    if (which)
        return make_attr(0, "input", 4, nhwc, F_NHWC, -128, 1.0f / 255.0f, 48, 8, 96);
    return make_attr(0, "input", 4, nhwc, F_NHWC, -128, 1.0f / 255.0f, 48, 4, 48);
}

static rknn_tensor_attr output_attr(uint32_t index, int which)
{
    static const uint32_t scores[] = {1, 10}, boxes[] = {1, 4, 2, 2};
    static const uint32_t boxes_native[] = {1, 1, 2, 2, 16}, boxes_nhwc[] = {1, 2, 2, 4};
    if (index == 0)
        return make_attr(0, "scores", 2, scores, F_NCHW, -10, 0.5f, 10, 0, 10);
    if (which == 1)
        return make_attr(1, "boxes", 5, boxes_native, F_NC1HWC2, 0, 0.25f, 64, 2, 64);
    if (which == 2)
        return make_attr(1, "boxes", 4, boxes_nhwc, F_NHWC, 0, 0.25f, 16, 2, 16);
    return make_attr(1, "boxes", 4, boxes, F_NCHW, 0, 0.25f, 16, 0, 16);
}

/* The fake detector of the header comment; h == 0 means the payload describes none. */
typedef struct {
    uint32_t h, w, c1, c2, w_stride;
    int32_t zp;
    float scale;
} detector_model;

/* ------------------------------------------------------------- contexts */

#define MAX_CONTEXTS 64

typedef struct {
    int live;
    uint32_t flag;
    char custom[1024];               /* model payload, copied at init */
    const char *zero_copy_model;     /* MODEL_BUFFER_ZERO_COPY: the caller's bytes, used in place */
    uint32_t zero_copy_size;
    const rknn_tensor_mem *zero_copy_mem; /* the mem holding them, if a create_mem one does */
    int reads_model_in_place;        /* ZERO_COPY from a buffer: no weights of its own */
    int model_gone;                  /* that mem was destroyed while this context lived */
    int weights_shared;              /* a rknn_dup_context copy: the weights are the source's */
    int8_t input[N_IN_ELEMS];        /* quantized input, as inputs_set / the io mem left it */
    int8_t outputs[N_OUTPUTS][16];   /* results of the last run */
    int runs;
    rknn_tensor_mem *io_mem_input;   /* set_io_mem bindings, with the attr they were bound with */
    rknn_tensor_attr io_attr_input;
    rknn_tensor_mem *io_mem_output[N_OUTPUTS];
    rknn_tensor_attr io_attr_output[N_OUTPUTS];
    int core_mask;                   /* the last rknn_set_core_mask, 0 (AUTO) until then */
    uint32_t weight_size;            /* RKNN_QUERY_MEM_SIZE's sizes (the payload may set them) */
    uint32_t internal_size;
    const rknn_tensor_mem *weight_mem;   /* set by rknn_set_weight_mem / set_internal_mem */
    const rknn_tensor_mem *internal_mem;
    char perf_text[8192];            /* the PERF_DETAIL text: the context's until its next
                                        PERF_DETAIL query or rknn_destroy */
    detector_model det;              /* the fake detector, when the payload describes one */
    int running;                     /* inside rknn_run (set atomically: one thread at a time) */
    uint32_t npu_cores;              /* the payload's "npu_cores=N", 3 by default */
    uint8_t salt;                    /* the payload's "salt=N", added to every output byte */
} context_state;

static context_state contexts[MAX_CONTEXTS];

#define FLAG_COLLECT_MODEL_INFO_ONLY 0x100u

/* Any live context, a model-info-only one included (for query and destroy). */
static context_state *lookup_any(rknn_context ctx)
{
    rknn_context slot = ctx - (rknn_context)HANDLE_BASE;
    if (ctx < (rknn_context)HANDLE_BASE || slot >= MAX_CONTEXTS)
        return NULL;
    pthread_mutex_lock(&table_lock);
    int live = contexts[slot].live;
    pthread_mutex_unlock(&table_lock);
    return live ? &contexts[slot] : NULL;
}

/* A live context that can run: a COLLECT_MODEL_INFO_ONLY context cannot (A15). */
static context_state *lookup(rknn_context ctx)
{
    context_state *state = lookup_any(ctx);
    return state && !(state->flag & FLAG_COLLECT_MODEL_INFO_ONLY) ? state : NULL;
}

static rknn_tensor_mem *mem_holding(const void *bytes, uint32_t size);

static int new_context(rknn_context *handle)
{
    pthread_mutex_lock(&table_lock);
    for (int slot = 0; slot < MAX_CONTEXTS; slot++) {
        if (!contexts[slot].live) {
            memset(&contexts[slot], 0, sizeof contexts[slot]);
            contexts[slot].live = 1;
            *handle = (rknn_context)HANDLE_BASE + (rknn_context)slot;
            pthread_mutex_unlock(&table_lock);
            return slot;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return -1;
}

/* The payload of a model in memory, or NULL if the bytes are not a model. */
static const char *model_payload(const char *bytes, uint32_t size)
{
    if (size < 4 || memcmp(bytes, "RKNN", 4) != 0)
        return NULL;
    return bytes + 4;
}

static void copy_payload(char *dst, const char *payload, size_t n)
{
    if (n > 1023)
        n = 1023;
    memcpy(dst, payload, n);
    dst[n] = '\0';
}

/* The size the word "key=N" of the payload gives (fallback without the word), or 0 when N is not
   a number from 1 to 2^30. */
static uint32_t payload_size(const char *payload, const char *key, uint32_t fallback)
{
    const char *word = strstr(payload, key);
    while (word && word != payload && word[-1] != ' ') /* a whole word only */
        word = strstr(word + 1, key);
    if (!word)
        return fallback;
    char *end = NULL;
    unsigned long n = strtoul(word + strlen(key), &end, 10);
    if (end == word + strlen(key) || (*end != '\0' && *end != ' ') || n == 0 || n > (1ul << 30))
        return 0;
    return (uint32_t)n;
}

/* The value after the whole word "key" (e.g. "zp=") in the payload, or NULL. */
static const char *payload_word(const char *payload, const char *key)
{
    const char *word = strstr(payload, key);
    while (word && word != payload && word[-1] != ' ')
        word = strstr(word + 1, key);
    return word ? word + strlen(key) : NULL;
}

static int word_ends(const char *end) { return *end == '\0' || *end == ' '; }

/* The payload's "salt=N" (0 without the word) into *salt: 1, or 0 when N is not 0 to 255. */
static int parse_salt(const char *payload, uint8_t *salt)
{
    const char *value = payload_word(payload, "salt=");
    *salt = 0;
    if (!value)
        return 1;
    char *end = NULL;
    unsigned long n = strtoul(value, &end, 10);
    if (*value < '0' || *value > '9' || !word_ends(end) || n > 255) /* digits only */
        return 0;
    *salt = (uint8_t)n;
    return 1;
}

/* The detector the payload describes ("detector=HxW" ...): 1 if none (det->h stays 0) or a valid
   one, 0 if the words are malformed. */
static int parse_detector(const char *payload, detector_model *det)
{
    memset(det, 0, sizeof *det);
    const char *value = payload_word(payload, "detector=");
    if (!value)
        return 1;
    char *end = NULL;
    unsigned long h = strtoul(value, &end, 10), w = 0;
    if (end == value || *end != 'x')
        return 0;
    value = end + 1;
    w = strtoul(value, &end, 10);
    if (end == value || !word_ends(end) || h == 0 || w == 0 || h > 4096 || w > 4096)
        return 0;
    det->h = (uint32_t)h;
    det->w = (uint32_t)w;
    det->c1 = payload_size(payload, "c1=", 1);
    det->c2 = payload_size(payload, "c2=", 16);
    det->w_stride = payload_size(payload, "w_stride=", det->w);
    if (det->c1 == 0 || det->c1 > 64 || det->c2 == 0 || det->c2 > 64 || det->w_stride < det->w)
        return 0;
    det->zp = -128;
    det->scale = 1.0f / 255.0f;
    if ((value = payload_word(payload, "zp="))) {
        long zp = strtol(value, &end, 10);
        if (end == value || !word_ends(end) || zp < -128 || zp > 127)
            return 0;
        det->zp = (int32_t)zp;
    }
    if ((value = payload_word(payload, "scale="))) {
        float scale = strtof(value, &end);
        if (end == value || !word_ends(end) || !(scale > 0.0f))
            return 0;
        det->scale = scale;
    }
    return 1;
}

static int init_call(rknn_context *context, void *model, uint32_t size, uint32_t flag,
                     rknn_init_extend *extend)
{
    int32_t ext_offset = extend ? extend->real_model_offset : 0;
    uint32_t ext_size = extend ? extend->real_model_size : 0;
    int32_t ext_fd = extend ? extend->model_buffer_fd : 0;
    if (size == 0)
        log_line("rknn_init size=0 flag=0x%x ext=%d ext_ctx=%llu ext_offset=%d ext_size=%u "
                 "ext_fd=%d model=0x%lx path=%s", flag, extend != NULL,
                 ULL(extend ? extend->ctx : 0), ext_offset, ext_size, ext_fd, PTR(model),
                 model ? (const char *)model : "");
    else
        log_line("rknn_init size=%u flag=0x%x ext=%d ext_ctx=%llu ext_offset=%d ext_size=%u "
                 "ext_fd=%d model=0x%lx", size, flag, extend != NULL,
                 ULL(extend ? extend->ctx : 0), ext_offset, ext_size, ext_fd, PTR(model));
    if (!context || !model)
        return RKNN_ERR_PARAM_INVALID;
    /* in place from a buffer; with a path the flag changes nothing here (the documents do
       not say what a runtime does then) */
    int zero_copy = (flag & FLAG_MODEL_BUFFER_ZERO_COPY) != 0 && size > 0;
    if (size > 0 && ext_size > 0) {  /* the model lies inside the buffer */
        if (ext_offset < 0 || (uint64_t)ext_offset + ext_size > size)
            return RKNN_ERR_MODEL_INVALID;
        model = (char *)model + ext_offset;
        size = ext_size;
    }
    const rknn_tensor_mem *holder = size > 0 ? mem_holding(model, size) : NULL;
    if (zero_copy && ext_fd > 0 && (!holder || holder->fd != ext_fd))
        return RKNN_ERR_PARAM_INVALID;

    char custom[1024];
    if (size == 0) {
        FILE *file = fopen((const char *)model, "rb");
        if (!file)
            return RKNN_ERR_MODEL_INVALID;
        char bytes[1028];
        size_t n = fread(bytes, 1, sizeof bytes, file);
        fclose(file);
        const char *payload = model_payload(bytes, (uint32_t)n);
        if (!payload)
            return RKNN_ERR_MODEL_INVALID;
        copy_payload(custom, payload, strnlen(payload, n - 4));
    } else {
        const char *payload = model_payload(model, size);
        if (!payload)
            return RKNN_ERR_MODEL_INVALID;
        copy_payload(custom, payload, strnlen(payload, size - 4));
    }

    uint32_t weight_size = payload_size(custom, "weights=", WEIGHT_SIZE);
    uint32_t internal_size = payload_size(custom, "internal=", INTERNAL_SIZE);
    uint32_t npu_cores = payload_size(custom, "npu_cores=", 3);
    detector_model det;
    uint8_t salt;
    if (!weight_size || !internal_size || !parse_detector(custom, &det) || npu_cores == 0 ||
        npu_cores > 3 || !parse_salt(custom, &salt))
        return RKNN_ERR_MODEL_INVALID;

    rknn_context handle;
    int slot = new_context(&handle);
    if (slot < 0)
        return RKNN_ERR_MALLOC_FAIL;
    contexts[slot].flag = flag;
    contexts[slot].weight_size = weight_size;
    contexts[slot].internal_size = internal_size;
    contexts[slot].det = det;
    contexts[slot].npu_cores = npu_cores;
    contexts[slot].salt = salt;
    memcpy(contexts[slot].custom, custom, sizeof custom);
    if (zero_copy) {
        contexts[slot].zero_copy_model = model;
        contexts[slot].zero_copy_size = size;
        contexts[slot].zero_copy_mem = holder;
        contexts[slot].reads_model_in_place = 1;
    }
    *context = handle;
    return RKNN_SUCC;
}

EXPORT int rknn_dup_context(rknn_context *context_in, rknn_context *context_out)
{
    log_line("rknn_dup_context in=%llu", ULL(context_in ? *context_in : 0));
    if (!context_in || !context_out)
        return RKNN_ERR_PARAM_INVALID;
    context_state *source = lookup(*context_in);
    if (!source)
        return RKNN_ERR_CTX_INVALID;
    rknn_context handle;
    int slot = new_context(&handle);
    if (slot < 0)
        return RKNN_ERR_MALLOC_FAIL;
    contexts[slot].flag = source->flag;
    memcpy(contexts[slot].custom, source->custom, sizeof source->custom);
    contexts[slot].zero_copy_model = source->zero_copy_model;
    contexts[slot].zero_copy_size = source->zero_copy_size;
    contexts[slot].zero_copy_mem = source->zero_copy_mem;
    contexts[slot].model_gone = source->model_gone;
    contexts[slot].reads_model_in_place = source->reads_model_in_place;
    contexts[slot].weights_shared = 1;
    contexts[slot].weight_size = source->weight_size;
    contexts[slot].internal_size = source->internal_size;
    contexts[slot].det = source->det;
    contexts[slot].npu_cores = source->npu_cores;
    contexts[slot].salt = source->salt;
    contexts[slot].weight_mem = source->weight_mem; /* shared weights: the source's mem */
    *context_out = handle;
    return RKNN_SUCC;
}

/* --------------------------------------------------- output allocations */

#define MAX_ALLOCS 256
static struct { rknn_context ctx; void *buf; } allocs[MAX_ALLOCS];

static int track_alloc(rknn_context ctx, void *buf)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].buf) {
            allocs[i].ctx = ctx;
            allocs[i].buf = buf;
            return 1;
        }
    return 0;
}

static int find_alloc(rknn_context ctx, const void *buf)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (buf && allocs[i].buf == buf && allocs[i].ctx == ctx)
            return i;
    return -1;
}

EXPORT int double_live_outputs(void)
{
    int n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++)
        n += allocs[i].buf != NULL;
    return n;
}

static int destroy_call(rknn_context context)
{
    log_line("rknn_destroy ctx=%llu", ULL(context));
    context_state *state = lookup_any(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    /* what outputs_get allocated and nobody released goes with the context */
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].buf && allocs[i].ctx == context) {
            free(allocs[i].buf);
            allocs[i].buf = NULL;
        }
    pthread_mutex_lock(&table_lock);
    state->live = 0;
    pthread_mutex_unlock(&table_lock);
    return RKNN_SUCC;
}

/* ------------------------------------------------- per-layer profile */

#define FLAG_COLLECT_PERF_MASK 0x8u
#define NPU_CORES 3 /* the double's text is an RK3588's: WorkLoad(0/1/2) */

/* The fake model's layers as a board's RKNN_QUERY_PERF_DETAIL text lists them
 * (IDs from 1).  The graph is invented to fit the fake model's tensors:
 * input -> ConvRelu -> "boxes", and -> Conv -> Reshape -> "scores".  Shapes
 * and MACs follow from it; cycles and Time(us) are fixed invented values (the
 * double measures nothing); RW(KB) is what F3 gives these tiny layers (< 0.5 KB
 * each, so 0).  Only Conv-family layers are split over several cores (the
 * API reference's op list, p.21). */
typedef struct {
    const char *op, *target, *inputs, *output;
    unsigned ddr_cycles, npu_cycles, time_us;
    unsigned long macs; /* 0: no MACs, MacUsage printed "\" */
    int split;
    unsigned rw_kb;
    const char *name;
} fake_layer;

static const fake_layer fake_layers[] = {
    {"InputOperator", "CPU", "\\", "(1,3,4,4)", 0, 0, 12, 0, 0, 0, "InputOperator:input"},
    {"ConvRelu", "NPU", "(1,3,4,4),(4,3,3,3),(4)", "(1,4,2,2)", 31, 108, 40, 432, 1, 0,
     "Conv:boxes_conv"},
    {"Conv", "NPU", "(1,4,2,2),(10,4,2,2),(10)", "(1,10,1,1)", 19, 40, 25, 160, 1, 0,
     "Conv:scores_conv"},
    {"Reshape", "NPU", "(1,10,1,1),(2)", "(1,10)", 0, 0, 8, 0, 0, 0, "Reshape:scores_reshape"},
    {"OutputOperator", "CPU", "(1,10)", "\\", 0, 0, 6, 0, 0, 0, "OutputOperator:scores"},
    {"OutputOperator", "CPU", "(1,4,2,2)", "\\", 0, 0, 6, 0, 0, 0, "OutputOperator:boxes"},
};
#define N_FAKE_LAYERS (sizeof fake_layers / sizeof fake_layers[0])

/* The cores a mask names: AUTO (0) is core 0 here (a board picks an idle one), ALL the three. */
static int mask_cores(int mask, int cores[NPU_CORES])
{
    int bits = mask == 0 ? 1 : mask & 7, n = 0;
    for (int c = 0; c < NPU_CORES; c++)
        if (bits & (1 << c))
            cores[n++] = c;
    return n;
}

/* Appends to the context's text; 0 when it does not fit. */
static int append(context_state *state, size_t *len, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(state->perf_text + *len, sizeof state->perf_text - *len, fmt, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof state->perf_text - *len)
        return 0;
    *len += (size_t)n;
    return 1;
}

/* "v/v/v": value on the cores in use, 0 on the others, each printed with fmt. */
static void per_core(char *out, size_t cap, const char *fmt, double value, const int *cores, int n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int c = 0; c < NPU_CORES; c++) {
        int used = 0;
        for (int k = 0; k < n; k++)
            used |= cores[k] == c;
        if (c)
            len += (size_t)snprintf(out + len, cap - len, "/");
        len += (size_t)snprintf(out + len, cap - len, fmt, used ? value : 0.0);
    }
}

typedef struct { const char *op; unsigned calls, cpu_us, npu_us; } op_time;

#define LAYER_ROW "%-4s %-16s %-8s %-6s %-40s %-22s %-24s %-12s %-20s %-20s %-12s %s\n"
#define RANKING_ROW "%-18s %-12s %-12s %-12s %-12s %-14s %s\n"
#define LAYER_DASHES 203 /* the widths of the columns before FullName, plus its header */
#define RANKING_DASHES 98

static int dashes(context_state *state, size_t *len, int n)
{
    for (int i = 0; i < n; i++)
        if (!append(state, len, "-"))
            return 0;
    return append(state, len, "\n");
}

/* A title centred in width columns as Python's str.center does, trailing spaces dropped. */
static int centred(context_state *state, size_t *len, const char *title, int width)
{
    int margin = width - (int)strlen(title);
    int left = margin / 2 + (margin & width & 1);
    return append(state, len, "%*s%s\n", left, "", title);
}

/* The text of RKNN_QUERY_PERF_DETAIL in the runtime's layout (the course's finding F1): the
   layer table, its totals, then the time per op type, longest first.  WorkLoad and MacUsage
   follow the context's core mask; the times do not.  1 on success. */
static int write_perf_text(context_state *state)
{
    int cores[NPU_CORES];
    int n_cores = mask_cores(state->core_mask, cores);
    size_t len = 0;
    unsigned total_us = 0, total_kb = 0;
    int ok = dashes(state, &len, LAYER_DASHES) &&
             centred(state, &len, "Network Layer Information Table", LAYER_DASHES) &&
             dashes(state, &len, LAYER_DASHES) &&
             append(state, &len, LAYER_ROW, "ID", "OpType", "DataType", "Target", "InputShape",
                    "OutputShape", "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)",
                    "WorkLoad(0/1/2)", "RW(KB)", "FullName") &&
             dashes(state, &len, LAYER_DASHES);
    for (size_t i = 0; ok && i < N_FAKE_LAYERS; i++) {
        const fake_layer *l = &fake_layers[i];
        int on_npu = strcmp(l->target, "NPU") == 0;
        int n = !on_npu ? 0 : l->split ? n_cores : 1; /* not split: the first core of the mask */
        char id[8], cycles[48], time_us[16], usage[48], load[48], rw[16];
        snprintf(id, sizeof id, "%u", (unsigned)i + 1);
        unsigned total_cycles = l->ddr_cycles > l->npu_cycles ? l->ddr_cycles : l->npu_cycles;
        snprintf(cycles, sizeof cycles, "%u/%u/%u", l->ddr_cycles, l->npu_cycles, total_cycles);
        snprintf(time_us, sizeof time_us, "%u", l->time_us);
        /* finding F2: MACs over what 1024 MACs per cycle at 1 GHz do in the layer's time,
           per core for a split layer (each core's share of the MACs) */
        if (l->macs)
            per_core(usage, sizeof usage, "%.2f",
                     100.0 * ((double)l->macs / n) / (l->time_us * 1e-6 * 1024 * 1e9), cores, n);
        else
            snprintf(usage, sizeof usage, "\\");
        per_core(load, sizeof load, "%.1f%%", n ? 100.0 / n : 0.0, cores, n);
        snprintf(rw, sizeof rw, "%u", l->rw_kb);
        ok = append(state, &len, LAYER_ROW, id, l->op, "INT8", l->target, l->inputs, l->output,
                    cycles, time_us, usage, load, rw, l->name);
        total_us += l->time_us;
        total_kb += l->rw_kb;
    }
    ok = ok && dashes(state, &len, LAYER_DASHES) &&
         append(state, &len, "Total Operator Elapsed Per Frame Time(us): %u\n", total_us) &&
         append(state, &len, "Total Memory Read/Write Per Frame Size(KB): %u\n", total_kb) &&
         dashes(state, &len, LAYER_DASHES) &&
         centred(state, &len, "Operator Time Consuming Ranking Table", RANKING_DASHES) &&
         dashes(state, &len, RANKING_DASHES) &&
         append(state, &len, RANKING_ROW, "OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)",
                "NPUTime(us)", "TotalTime(us)", "TimeRatio(%)") &&
         dashes(state, &len, RANKING_DASHES);

    /* one row per op type in order of first appearance, then sorted by total time, longest
       first (a stable sort: ties keep that order) */
    op_time ops[N_FAKE_LAYERS];
    size_t n_ops = 0;
    for (size_t i = 0; i < N_FAKE_LAYERS; i++) {
        const fake_layer *l = &fake_layers[i];
        size_t k = 0;
        while (k < n_ops && strcmp(ops[k].op, l->op) != 0)
            k++;
        if (k == n_ops) {
            ops[k].op = l->op;
            ops[k].calls = ops[k].cpu_us = ops[k].npu_us = 0;
            n_ops++;
        }
        ops[k].calls++;
        if (strcmp(l->target, "CPU") == 0)
            ops[k].cpu_us += l->time_us;
        else
            ops[k].npu_us += l->time_us;
    }
    for (size_t i = 1; i < n_ops; i++)
        for (size_t k = i; k > 0 && ops[k].cpu_us + ops[k].npu_us > ops[k - 1].cpu_us + ops[k - 1].npu_us; k--) {
            op_time swap = ops[k];
            ops[k] = ops[k - 1];
            ops[k - 1] = swap;
        }
    for (size_t k = 0; ok && k < n_ops; k++) {
        char calls[16], cpu[16], npu[16], total[16], ratio[16];
        unsigned op_us = ops[k].cpu_us + ops[k].npu_us;
        snprintf(calls, sizeof calls, "%u", ops[k].calls);
        snprintf(cpu, sizeof cpu, "%u", ops[k].cpu_us);
        snprintf(npu, sizeof npu, "%u", ops[k].npu_us);
        snprintf(total, sizeof total, "%u", op_us);
        snprintf(ratio, sizeof ratio, "%.2f%%", total_us ? 100.0 * op_us / total_us : 0.0);
        ok = append(state, &len, RANKING_ROW, ops[k].op, calls, cpu, "0", npu, total, ratio);
    }
    return ok && dashes(state, &len, RANKING_DASHES);
}

/* ---------------------------------------------------------------- query */

/* which: 0 plain, 1 native, 2 native NHWC (as input_attr / output_attr) */
static rknn_tensor_attr detector_input_attr(const detector_model *det, int which)
{
    const uint32_t dims[] = {1, det->h, det->w, 3};
    uint32_t n = det->h * det->w * 3, stride = which ? det->w_stride : det->w;
    return make_attr(0, "x", 4, dims, F_NHWC, -128, 1.0f / 255.0f, n, stride,
                     det->h * stride * 3);
}

static rknn_tensor_attr detector_output_attr(const detector_model *det, int which)
{
    const uint32_t plain[] = {1, 1, det->h, det->w}, native[] = {1, det->c1, det->h, det->w, det->c2};
    const uint32_t nhwc[] = {1, det->h, det->w, 1};
    uint32_t n = det->h * det->w;
    if (which == 1)
        return make_attr(0, "prob", 5, native, F_NC1HWC2, det->zp, det->scale,
                         n * det->c1 * det->c2, 0, n * det->c1 * det->c2);
    if (which == 2)
        return make_attr(0, "prob", 4, nhwc, F_NHWC, det->zp, det->scale, n, 0, n);
    return make_attr(0, "prob", 4, plain, F_NCHW, det->zp, det->scale, n, 0, n);
}

static int fill_attr(const context_state *state, int cmd, rknn_tensor_attr *attr)
{
    uint32_t index = attr->index;
    int is_input = cmd == Q_INPUT_ATTR || cmd == Q_NATIVE_INPUT_ATTR ||
                   cmd == Q_NATIVE_NHWC_INPUT_ATTR || cmd == Q_CURRENT_INPUT_ATTR ||
                   cmd == Q_CURRENT_NATIVE_INPUT_ATTR;
    int which = (cmd == Q_NATIVE_INPUT_ATTR || cmd == Q_NATIVE_OUTPUT_ATTR ||
                 cmd == Q_CURRENT_NATIVE_INPUT_ATTR || cmd == Q_CURRENT_NATIVE_OUTPUT_ATTR) ? 1
              : (cmd == Q_NATIVE_NHWC_INPUT_ATTR || cmd == Q_NATIVE_NHWC_OUTPUT_ATTR) ? 2 : 0;
    if (state->det.h) {
        if (index >= 1)
            return RKNN_ERR_PARAM_INVALID;
        *attr = is_input ? detector_input_attr(&state->det, which)
                         : detector_output_attr(&state->det, which);
        return RKNN_SUCC;
    }
    if (is_input ? index >= 1 : index >= N_OUTPUTS)
        return RKNN_ERR_PARAM_INVALID;
    *attr = is_input ? input_attr(which) : output_attr(index, which);
    return RKNN_SUCC;
}

EXPORT int rknn_query(rknn_context context, int cmd, void *info, uint32_t size)
{
    log_line("rknn_query ctx=%llu cmd=%d size=%u", ULL(context), cmd, size);
    context_state *state = lookup_any(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    if (!info)
        return RKNN_ERR_PARAM_INVALID;
    if ((state->flag & FLAG_COLLECT_MODEL_INFO_ONLY) && cmd != Q_MEM_SIZE && cmd != Q_IN_OUT_NUM)
        return RKNN_ERR_PARAM_INVALID;
    switch (cmd) {
    case Q_IN_OUT_NUM: {
        if (size != sizeof(rknn_input_output_num))
            return RKNN_ERR_PARAM_INVALID;
        rknn_input_output_num *num = info;
        num->n_input = 1;
        num->n_output = state->det.h ? 1 : N_OUTPUTS;
        return RKNN_SUCC;
    }
    case Q_INPUT_ATTR: case Q_OUTPUT_ATTR: case Q_NATIVE_INPUT_ATTR: case Q_NATIVE_OUTPUT_ATTR:
    case Q_NATIVE_NHWC_INPUT_ATTR: case Q_NATIVE_NHWC_OUTPUT_ATTR: case Q_CURRENT_INPUT_ATTR:
    case Q_CURRENT_OUTPUT_ATTR: case Q_CURRENT_NATIVE_INPUT_ATTR: case Q_CURRENT_NATIVE_OUTPUT_ATTR:
        if (size != sizeof(rknn_tensor_attr))
            return RKNN_ERR_PARAM_INVALID;
        return fill_attr(state, cmd, info);
    case Q_PERF_RUN:
        if (size != sizeof(rknn_perf_run))
            return RKNN_ERR_PARAM_INVALID;
        ((rknn_perf_run *)info)->run_duration = state->runs ? 1234 : 0;
        return RKNN_SUCC;
    case Q_PERF_DETAIL: {
        if (size != sizeof(rknn_perf_detail))
            return RKNN_ERR_PARAM_INVALID;
        /* the API reference: it only works for a context made with the flag (the code a
           board returns otherwise is not documented: PARAM_INVALID, as the simulator's A48) */
        if (!(state->flag & FLAG_COLLECT_PERF_MASK))
            return RKNN_ERR_PARAM_INVALID;
        if (!write_perf_text(state))
            return RKNN_ERR_FAIL;
        /* the text belongs to the runtime: the caller must not free it */
        rknn_perf_detail *perf = info;
        perf->perf_data = state->perf_text;
        perf->data_len = strlen(state->perf_text); /* without the NUL, as the simulator (A48) */
        return RKNN_SUCC;
    }
    case Q_INPUT_DYNAMIC_RANGE: {
        /* the fake model has one fixed input shape: a range of one shape */
        if (size != sizeof(rknn_input_range))
            return RKNN_ERR_PARAM_INVALID;
        rknn_input_range *range = info;
        if (range->index >= 1)
            return RKNN_ERR_PARAM_INVALID;
        rknn_tensor_attr attr = state->det.h ? detector_input_attr(&state->det, 0) : input_attr(0);
        range->shape_number = 1;
        range->fmt = attr.fmt;
        memcpy(range->name, attr.name, sizeof range->name);
        range->n_dims = attr.n_dims;
        memcpy(range->dyn_range[0], attr.dims, sizeof range->dyn_range[0]);
        return RKNN_SUCC;
    }
    case Q_SDK_VERSION: {
        if (size != sizeof(rknn_sdk_version))
            return RKNN_ERR_PARAM_INVALID;
        rknn_sdk_version *version = info;
        snprintf(version->api_version, sizeof version->api_version, "0.0.1 (rknn_double)");
        snprintf(version->drv_version, sizeof version->drv_version, "0.0.0");
        return RKNN_SUCC;
    }
    case Q_MEM_SIZE: {
        if (size != sizeof(rknn_mem_size))
            return RKNN_ERR_PARAM_INVALID;
        rknn_mem_size *mem = info;
        memset(mem, 0, sizeof *mem);
        mem->total_weight_size = state->weight_size;
        mem->total_internal_size = state->internal_size;
        /* what the runtime itself allocated for this context: not the user's
           share, not weights read in place or shared, nothing for model info */
        uint32_t flag = state->flag;
        int outside = (flag & FLAG_MEM_ALLOC_OUTSIDE) != 0;
        uint64_t weights =
            outside || state->reads_model_in_place || state->weights_shared ? 0 : state->weight_size;
        uint64_t internal =
            outside || (flag & FLAG_INTERNAL_ALLOC_OUTSIDE) ? 0 : state->internal_size;
        uint64_t io = outside ? 0
                    : state->det.h ? (uint64_t)state->det.h * state->det.w * 4 /* x + prob, plain */
                    : IO_SIZE;
        mem->total_dma_allocated_size =
            (flag & FLAG_COLLECT_MODEL_INFO_ONLY) ? 0 : weights + internal + io;
        return RKNN_SUCC;
    }
    case Q_CUSTOM_STRING: {
        if (size != sizeof(rknn_custom_string))
            return RKNN_ERR_PARAM_INVALID;
        rknn_custom_string *custom = info;
        if (state->model_gone)
            return RKNN_ERR_PARAM_INVALID;
        if (state->zero_copy_model) /* read in place: the caller's buffer must still be there */
            copy_payload(custom->string, state->zero_copy_model + 4,
                         strnlen(state->zero_copy_model + 4, state->zero_copy_size - 4));
        else
            memcpy(custom->string, state->custom, sizeof custom->string);
        return RKNN_SUCC;
    }
    default:
        return RKNN_ERR_PARAM_INVALID;
    }
}

/* ------------------------------------------------------------ inference */

static int8_t clamp_int8(long q) { return (int8_t)(q < -128 ? -128 : q > 127 ? 127 : q); }

/* Quantize one element of the caller's input into the model's int8. */
static int8_t quantize(const void *buf, int type, size_t i)
{
    if (type == T_INT8)
        return ((const int8_t *)buf)[i];
    if (type == T_UINT8)
        return (int8_t)(((const uint8_t *)buf)[i] - 128);
    float scaled = ((const float *)buf)[i] * 255.0f;
    return clamp_int8((long)(scaled < 0 ? scaled - 0.5f : scaled + 0.5f) - 128);
}

static int inputs_set_call(rknn_context context, uint32_t n_inputs, rknn_input inputs[])
{
    log_line("rknn_inputs_set ctx=%llu n=%u", ULL(context), n_inputs);
    delay("rknn_inputs_set");
    for (uint32_t i = 0; inputs && i < n_inputs; i++)
        log_line("rknn_inputs_set[%u] index=%u buf=0x%lx size=%u pass_through=%u type=%d fmt=%d",
                 i, inputs[i].index, PTR(inputs[i].buf), inputs[i].size,
                 inputs[i].pass_through, inputs[i].type, inputs[i].fmt);
    context_state *state = lookup(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    if (!inputs || n_inputs != 1 || state->det.h) /* the detector runs from bound mems only */
        return RKNN_ERR_INPUT_INVALID;
    const rknn_input *in = &inputs[0];
    if (in->index != 0 || !in->buf)
        return RKNN_ERR_INPUT_INVALID;
    if (in->pass_through) {
        /* already in the native layout: int8 NHWC with rows padded to w_stride */
        rknn_tensor_attr native = input_attr(1);
        if (in->size < native.size_with_stride) /* librknnrt 2.3.2 logs a short input as -5 */
            return RKNN_ERR_PARAM_INVALID;
        const int8_t *src = in->buf;
        for (uint32_t h = 0; h < 4; h++)
            for (uint32_t w = 0; w < 4; w++)
                memcpy(&state->input[(h * 4 + w) * 3], &src[(h * native.w_stride + w) * 3], 3);
        return RKNN_SUCC;
    }
    size_t element = in->type == T_FLOAT32 ? 4 : (in->type == T_INT8 || in->type == T_UINT8) ? 1 : 0;
    if (!element || in->fmt != F_NHWC)
        return RKNN_ERR_INPUT_INVALID;
    /* too short: -5, as public librknnrt 2.3.2 logs show; longer: the first bytes are read,
       as the simulator does (its assumption A64) */
    if (in->size < N_IN_ELEMS * element)
        return RKNN_ERR_PARAM_INVALID;
    for (size_t i = 0; i < N_IN_ELEMS; i++)
        state->input[i] = quantize(in->buf, in->type, i);
    return RKNN_SUCC;
}

/* The input from a bound io mem, laid out as the attr it was bound with says. */
static void read_input_mem(context_state *state)
{
    const rknn_tensor_attr *attr = &state->io_attr_input;
    uint32_t w_stride = attr->w_stride ? attr->w_stride : 4;
    const uint8_t *src = state->io_mem_input->virt_addr;
    for (uint32_t h = 0; h < 4; h++)
        for (uint32_t w = 0; w < 4; w++)
            for (uint32_t c = 0; c < 3; c++) {
                uint8_t byte = src[(h * w_stride + w) * 3 + c];
                state->input[(h * 4 + w) * 3 + c] =
                    attr->type == T_UINT8 ? (int8_t)(byte - 128) : (int8_t)byte;
            }
}

/* float -> IEEE 754 half, rounded to nearest even (an output bound as FLOAT16) */
static uint16_t half_of(float value)
{
    uint32_t x;
    memcpy(&x, &value, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, bits = x & 0x7fffffffu;
    if (bits >= 0x7f800000u) /* inf, NaN */
        return (uint16_t)(sign | 0x7c00u | (bits > 0x7f800000u ? 0x200u : 0u));
    if (bits >= 0x477ff000u) /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (bits < 0x33000000u) /* at most half the smallest subnormal */
        return (uint16_t)sign;
    uint32_t mant, shift;
    if (bits < 0x38800000u) { /* a subnormal half: units of 2^-24 */
        mant = (bits & 0x7fffffu) | 0x800000u;
        shift = 126u - (bits >> 23);
    } else { /* rebias the exponent, drop 13 bits of mantissa (a carry may raise the exponent) */
        mant = bits - 0x38000000u;
        shift = 13u;
    }
    uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

/* An output into a bound io mem, as the attr it was bound with says: int8 NC1HWC2 (C2 = 16,
   "boxes"), or dense in the attr's fmt (NHWC reorders the 4-D "boxes"; NCHW, UNDEFINED and the
   2-D "scores" keep the model's order) as int8, or dequantised with the model's zp and scale
   into FLOAT32 or FLOAT16. */
static void write_output_mem(context_state *state, int index)
{
    const rknn_tensor_attr *bound = &state->io_attr_output[index];
    rknn_tensor_attr model = output_attr((uint32_t)index, 0);
    const int8_t *result = state->outputs[index];
    void *dst = state->io_mem_output[index]->virt_addr;
    if (index == 1 && bound->fmt == F_NC1HWC2) {
        memset(dst, 0, 64);
        for (int c = 0; c < 4; c++)
            for (int hw = 0; hw < 4; hw++)
                ((int8_t *)dst)[hw * 16 + c] = result[c * 4 + hw];
        return;
    }
    for (uint32_t i = 0; i < model.n_elems; i++) {
        /* NHWC "boxes" (1x2x2x4): element i is channel i % 4 of pixel i / 4 */
        int8_t q = result[index == 1 && bound->fmt == F_NHWC ? (i % 4) * 4 + i / 4 : i];
        float value = (float)(q - model.zp) * model.scale;
        if (bound->type == T_FLOAT32)
            memcpy((char *)dst + 4 * (size_t)i, &value, 4);
        else if (bound->type == T_FLOAT16)
            ((uint16_t *)dst)[i] = half_of(value);
        else
            ((int8_t *)dst)[i] = q;
    }
}

/* The fake detector's run: from the bound input mem into the bound output mem (header comment). */
static void run_detector(const context_state *state)
{
    const detector_model *det = &state->det;
    const rknn_tensor_attr *in_attr = &state->io_attr_input, *out_attr = &state->io_attr_output[0];
    const uint8_t *src = state->io_mem_input->virt_addr;
    int8_t *dst = state->io_mem_output[0]->virt_addr;
    size_t pitch = (size_t)(in_attr->w_stride ? in_attr->w_stride : det->w) * 3;
    uint8_t offset = in_attr->type == T_INT8 ? 128 : 0; /* int8 q = u - 128 */
    uint32_t c2 = out_attr->fmt == F_NC1HWC2 ? det->c2 : 1; /* the rest holds 127 since the bind */
    /* the output as the threshold the program applies would see it: one int8 per probability */
    int8_t table[256];
    for (int l = 0; l < 256; l++) {
        float p = l < 16 ? 0.0f : (255.0f - (float)l) / 255.0f;
        float q = p / det->scale;
        table[l] = clamp_int8((long)(q + 0.5f) + det->zp);
    }
    for (uint32_t y = 0; y < det->h; y++) {
        const uint8_t *row = src + y * pitch;
        for (uint32_t x = 0; x < det->w; x++) {
            unsigned r = (uint8_t)(row[3 * x] + offset), g = (uint8_t)(row[3 * x + 1] + offset);
            unsigned b = (uint8_t)(row[3 * x + 2] + offset);
            dst[((size_t)y * det->w + x) * c2] = table[(77 * r + 150 * g + 29 * b) >> 8];
        }
    }
}

/* rknn_run of a detector context.  The whole call, its delay included, counts as the run: a
   second thread entering it meanwhile is reported (log line "rknn_run_overlap") and refused. */
static int run_detector_call(rknn_context context, context_state *state)
{
    if (__atomic_exchange_n(&state->running, 1, __ATOMIC_ACQ_REL)) {
        log_line("rknn_run_overlap ctx=%llu", ULL(context)); /* two threads, one context */
        return RKNN_ERR_CTX_INVALID;
    }
    delay("rknn_run");
    int ret = RKNN_SUCC;
    if (state->model_gone || ((state->flag & FLAG_MEM_ALLOC_OUTSIDE) && !state->weight_mem) ||
        ((state->flag & (FLAG_MEM_ALLOC_OUTSIDE | FLAG_INTERNAL_ALLOC_OUTSIDE)) &&
         !state->internal_mem) ||
        !state->io_mem_input || !state->io_mem_output[0]) {
        ret = RKNN_ERR_PARAM_INVALID; /* as for the fake model, and: zero-copy only */
    } else {
        run_detector(state);
        __atomic_fetch_add(&state->runs, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&state->running, 0, __ATOMIC_RELEASE);
    return ret;
}

static int run_call(rknn_context context, rknn_run_extend *extend)
{
    log_line("rknn_run ctx=%llu ext=%d non_block=%d timeout_ms=%d", ULL(context), extend != NULL,
             extend ? extend->non_block : 0, extend ? extend->timeout_ms : 0);
    context_state *state = lookup(context);
    if (state && state->det.h)
        return run_detector_call(context, state);
    delay("rknn_run");
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    if (state->model_gone) /* its weights were in a mem destroyed meanwhile (A27) */
        return RKNN_ERR_PARAM_INVALID;
    /* the mems the flag made the caller's must be set before the run (A15) */
    if ((state->flag & FLAG_MEM_ALLOC_OUTSIDE) && !state->weight_mem)
        return RKNN_ERR_PARAM_INVALID;
    if ((state->flag & (FLAG_MEM_ALLOC_OUTSIDE | FLAG_INTERNAL_ALLOC_OUTSIDE)) && !state->internal_mem)
        return RKNN_ERR_PARAM_INVALID;
    if (state->io_mem_input)
        read_input_mem(state);
    long sum = 0;
    for (int i = 0; i < N_IN_ELEMS; i++)
        sum += state->input[i];
    for (int k = 0; k < 10; k++)
        state->outputs[0][k] = (int8_t)(uint8_t)((unsigned long)(sum + k + state->salt) & 0xff);
    for (int k = 0; k < 16; k++)
        state->outputs[1][k] = (int8_t)(uint8_t)((state->input[k] + state->salt) & 0xff);
    for (int i = 0; i < N_OUTPUTS; i++)
        if (state->io_mem_output[i])
            write_output_mem(state, i);
    state->runs++;
    return RKNN_SUCC;
}

EXPORT int rknn_wait(rknn_context context, rknn_run_extend *extend)
{
    log_line("rknn_wait ctx=%llu ext=%d", ULL(context), extend != NULL);
    return lookup(context) ? RKNN_SUCC : RKNN_ERR_CTX_INVALID;
}

static uint32_t output_bytes(const rknn_output *out)
{
    return output_attr(out->index, 0).n_elems * (out->want_float ? 4u : 1u);
}

static void write_output(const context_state *state, const rknn_output *out)
{
    rknn_tensor_attr attr = output_attr(out->index, 0);
    const int8_t *result = state->outputs[out->index];
    for (uint32_t i = 0; i < attr.n_elems; i++) {
        if (out->want_float)
            ((float *)out->buf)[i] = (float)(result[i] - attr.zp) * attr.scale;
        else
            ((int8_t *)out->buf)[i] = result[i];
    }
}

static int outputs_get_call(rknn_context context, uint32_t n_outputs, rknn_output outputs[],
                            rknn_output_extend *extend)
{
    log_line("rknn_outputs_get ctx=%llu n=%u ext=%d", ULL(context), n_outputs, extend != NULL);
    for (uint32_t i = 0; outputs && i < n_outputs; i++)
        log_line("rknn_outputs_get[%u] index=%u want_float=%u is_prealloc=%u buf=0x%lx size=%u",
                 i, outputs[i].index, outputs[i].want_float, outputs[i].is_prealloc,
                 PTR(outputs[i].buf), outputs[i].size);
    delay("rknn_outputs_get");
    int any_float = 0;
    for (uint32_t i = 0; outputs && i < n_outputs; i++)
        any_float |= outputs[i].want_float != 0;
    if (any_float)
        delay("rknn_outputs_get_float");
    context_state *state = lookup(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    if (!outputs || n_outputs == 0 || n_outputs > N_OUTPUTS || state->det.h)
        return RKNN_ERR_OUTPUT_INVALID;
    /* check everything first, so that a failed call allocates nothing */
    for (uint32_t i = 0; i < n_outputs; i++) {
        if (outputs[i].index >= N_OUTPUTS)
            return RKNN_ERR_OUTPUT_INVALID;
        if (outputs[i].is_prealloc &&
            (!outputs[i].buf || outputs[i].size < output_bytes(&outputs[i])))
            return RKNN_ERR_OUTPUT_INVALID;
    }
    for (uint32_t i = 0; i < n_outputs; i++) {
        rknn_output *out = &outputs[i];
        if (!out->is_prealloc) {
            out->size = output_bytes(out);
            out->buf = malloc(out->size);
            if (!out->buf || !track_alloc(context, out->buf)) {
                free(out->buf);
                out->buf = NULL;
                return RKNN_ERR_MALLOC_FAIL;
            }
        }
        write_output(state, out);
    }
    if (extend)
        extend->frame_id = (uint64_t)state->runs;
    return RKNN_SUCC;
}

static int outputs_release_call(rknn_context context, uint32_t n_outputs, rknn_output outputs[])
{
    log_line("rknn_outputs_release ctx=%llu n=%u", ULL(context), n_outputs);
    delay("rknn_outputs_release");
    for (uint32_t i = 0; outputs && i < n_outputs; i++)
        log_line("rknn_outputs_release[%u] index=%u is_prealloc=%u buf=0x%lx", i,
                 outputs[i].index, outputs[i].is_prealloc, PTR(outputs[i].buf));
    if (!lookup(context))
        return RKNN_ERR_CTX_INVALID;
    if (!outputs)
        return RKNN_ERR_PARAM_INVALID;
    /* a buffer this context did not hand out (a double release) is refused whole */
    for (uint32_t i = 0; i < n_outputs; i++)
        if (!outputs[i].is_prealloc && find_alloc(context, outputs[i].buf) < 0)
            return RKNN_ERR_PARAM_INVALID;
    for (uint32_t i = 0; i < n_outputs; i++) {
        if (outputs[i].is_prealloc)
            continue; /* the caller's memory */
        int slot = find_alloc(context, outputs[i].buf);
        free(allocs[slot].buf);
        allocs[slot].buf = NULL;
    }
    return RKNN_SUCC;
}

EXPORT int rknn_set_core_mask(rknn_context context, int core_mask)
{
    log_line("rknn_set_core_mask ctx=%llu mask=0x%x", ULL(context), core_mask);
    context_state *state = lookup(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    switch (core_mask) {
    case 0: case 1: case 2: case 4: case 3: case 7: case 0xffff:
        /* a mask naming a core the SoC lacks is refused (AUTO and ALL name none) */
        if (core_mask != 0 && core_mask != 0xffff && (core_mask >> state->npu_cores) != 0)
            return RKNN_ERR_PARAM_INVALID;
        state->core_mask = core_mask; /* PERF_DETAIL's WorkLoad column follows it */
        return RKNN_SUCC;
    default:
        return RKNN_ERR_PARAM_INVALID;
    }
}

EXPORT int rknn_set_batch_core_num(rknn_context context, int core_num)
{
    log_line("rknn_set_batch_core_num ctx=%llu n=%d", ULL(context), core_num);
    if (!lookup(context))
        return RKNN_ERR_CTX_INVALID;
    return core_num >= 1 && core_num <= 3 ? RKNN_SUCC : RKNN_ERR_PARAM_INVALID;
}

#ifndef DOUBLE_OLD_RUNTIME
EXPORT int rknn_set_input_shapes(rknn_context context, uint32_t n_inputs, rknn_tensor_attr attr[])
{
    log_line("rknn_set_input_shapes ctx=%llu n=%u", ULL(context), n_inputs);
    for (uint32_t i = 0; attr && i < n_inputs; i++) {
        char dims[128] = "";
        for (uint32_t d = 0; d < attr[i].n_dims && d < RKNN_MAX_DIMS; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), d ? "x%u" : "%u",
                     attr[i].dims[d]);
        log_line("rknn_set_input_shapes[%u] index=%u n_dims=%u dims=%s fmt=%d type=%d name=%s", i,
                 attr[i].index, attr[i].n_dims, dims, attr[i].fmt, attr[i].type, attr[i].name);
    }
    if (!lookup(context))
        return RKNN_ERR_CTX_INVALID;
    rknn_tensor_attr model = input_attr(0);
    /* the fake model is not dynamic: only its one shape is accepted */
    if (!attr || n_inputs != 1 || attr[0].n_dims != model.n_dims ||
        memcmp(attr[0].dims, model.dims, model.n_dims * sizeof model.dims[0]) != 0)
        return RKNN_ERR_INPUT_INVALID;
    return RKNN_SUCC;
}
#endif

/* --------------------------------------------------------------- memory */

#define MAX_MEMS 256
static rknn_tensor_mem *mems[MAX_MEMS];

EXPORT int double_live_mems(void)
{
    int n = 0;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_MEMS; i++)
        n += mems[i] != NULL;
    pthread_mutex_unlock(&table_lock);
    return n;
}

/* The live mem allocated here whose mapping holds [bytes, bytes + size), or NULL. */
static rknn_tensor_mem *mem_holding(const void *bytes, uint32_t size)
{
    const char *start = bytes;
    rknn_tensor_mem *found = NULL;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_MEMS && !found; i++) {
        const char *virt = mems[i] ? mems[i]->virt_addr : NULL;
        if (virt && mems[i]->flags == MEM_ALLOC_INSIDE && start >= virt &&
            (uint64_t)(start - virt) + size <= mems[i]->size)
            found = mems[i];
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

static int mem_slot(const rknn_tensor_mem *mem)
{
    int slot = -1;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_MEMS && slot < 0; i++)
        if (mem && mems[i] == mem)
            slot = i;
    pthread_mutex_unlock(&table_lock);
    return slot;
}

static rknn_tensor_mem *track_mem(rknn_tensor_mem *mem)
{
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_MEMS; i++)
        if (!mems[i]) {
            mems[i] = mem;
            pthread_mutex_unlock(&table_lock);
            return mem;
        }
    pthread_mutex_unlock(&table_lock);
    free(mem);
    return NULL;
}

/* A shared, file-backed mapping: a dma-buf stand-in with a real fd. */
static rknn_tensor_mem *alloc_mem(uint64_t size)
{
    if (size == 0 || size > UINT32_MAX)
        return NULL;
    rknn_tensor_mem *mem = calloc(1, sizeof *mem);
    if (!mem)
        return NULL;
    int fd = memfd_create("rknn_double_mem", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        free(mem);
        return NULL;
    }
    void *virt = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (virt == MAP_FAILED) {
        close(fd);
        free(mem);
        return NULL;
    }
    mem->virt_addr = virt;
    mem->phys_addr = 0; /* behind an IOMMU there is no single physical address */
    mem->fd = fd;
    mem->size = (uint32_t)size;
    mem->flags = MEM_ALLOC_INSIDE;
    return track_mem(mem);
}

static rknn_tensor_mem *create_mem_call(rknn_context context, uint32_t size)
{
    log_line("rknn_create_mem ctx=%llu size=%u", ULL(context), size);
    return lookup(context) ? alloc_mem(size) : NULL;
}

#ifndef DOUBLE_OLD_RUNTIME
static rknn_tensor_mem *create_mem2_call(rknn_context context, uint64_t size, uint64_t alloc_flags)
{
    log_line("rknn_create_mem2 ctx=%llu size=%llu alloc_flags=0x%llx", ULL(context), ULL(size),
             ULL(alloc_flags));
    if (!lookup(context) && !(context == 0 && (alloc_flags & MEM_FLAG_ALLOC_NO_CONTEXT)))
        return NULL;
    return alloc_mem(size);
}
#endif

static rknn_tensor_mem *create_mem_from_fd_call(rknn_context context, int32_t fd, void *virt_addr,
                                                uint32_t size, int32_t offset)
{
    log_line("rknn_create_mem_from_fd ctx=%llu fd=%d virt=0x%lx size=%u offset=%d", ULL(context),
             fd, PTR(virt_addr), size, offset);
    if (!lookup(context) || fd < 0)
        return NULL;
    /* a buffer has a size: a view must lie inside it (offset + size), and a closed fd is no buffer;
       fds of other kinds (not files) are taken on trust */
    struct stat st;
    if (fstat(fd, &st) != 0 || offset < 0 ||
        (S_ISREG(st.st_mode) && (uint64_t)offset + size > (uint64_t)st.st_size))
        return NULL;
    rknn_tensor_mem *mem = calloc(1, sizeof *mem);
    if (!mem)
        return NULL;
    mem->virt_addr = virt_addr;
    mem->fd = fd;
    mem->offset = offset;
    mem->size = size;
    mem->flags = MEM_FROM_FD;
    return track_mem(mem);
}

static rknn_tensor_mem *create_mem_from_phys_call(rknn_context context, uint64_t phys_addr,
                                                  void *virt_addr, uint32_t size)
{
    log_line("rknn_create_mem_from_phys ctx=%llu phys=0x%llx virt=0x%lx size=%u", ULL(context),
             ULL(phys_addr), PTR(virt_addr), size);
    if (!lookup(context))
        return NULL;
    rknn_tensor_mem *mem = calloc(1, sizeof *mem);
    if (!mem)
        return NULL;
    mem->virt_addr = virt_addr;
    mem->phys_addr = phys_addr;
    mem->fd = -1;
    mem->size = size;
    mem->flags = MEM_FROM_PHYS;
    return track_mem(mem);
}

static int destroy_mem_call(rknn_context context, rknn_tensor_mem *mem)
{
    int slot = mem_slot(mem);
    if (slot < 0) { /* not ours, or destroyed already: its fields cannot be read */
        log_line("rknn_destroy_mem ctx=%llu mem=0x%lx", ULL(context), PTR(mem));
        return RKNN_ERR_PARAM_INVALID;
    }
    /* which mem it was, so that a test can tell a shared buffer from its views */
    log_line("rknn_destroy_mem ctx=%llu mem=0x%lx fd=%d virt=0x%lx size=%u flags=%u", ULL(context),
             PTR(mem), mem->fd, PTR(mem->virt_addr), mem->size, mem->flags);
    for (int c = 0; c < MAX_CONTEXTS; c++) {
        if (!contexts[c].live)
            continue;
        if (contexts[c].zero_copy_mem == mem) { /* a context reading its model from it loses it */
            contexts[c].zero_copy_mem = NULL;
            contexts[c].zero_copy_model = NULL;
            contexts[c].model_gone = 1;
        }
        if (contexts[c].weight_mem == mem) /* a set weight or internal mem is unset */
            contexts[c].weight_mem = NULL;
        if (contexts[c].internal_mem == mem)
            contexts[c].internal_mem = NULL;
    }
    context_state *state = lookup(context);
    if (state) { /* a destroyed mem must not stay bound */
        if (state->io_mem_input == mem)
            state->io_mem_input = NULL;
        for (int i = 0; i < N_OUTPUTS; i++)
            if (state->io_mem_output[i] == mem)
                state->io_mem_output[i] = NULL;
    }
    if (mem->flags == MEM_ALLOC_INSIDE) { /* only what we allocated is ours to unmap */
        munmap(mem->virt_addr, mem->size);
        close(mem->fd);
    }
    free(mem);
    pthread_mutex_lock(&table_lock);
    mems[slot] = NULL;
    pthread_mutex_unlock(&table_lock);
    return RKNN_SUCC;
}

/* rknn_set_weight_mem (weights != 0) or rknn_set_internal_mem: the context must have been made
   with a flag that makes that memory the caller's (A25), and the mem must hold its size. */
static int set_model_mem(const char *function, rknn_context context, rknn_tensor_mem *mem,
                         int weights)
{
    log_line("%s ctx=%llu mem=0x%lx size=%u fd=%d virt=0x%lx", function, ULL(context), PTR(mem),
             mem ? mem->size : 0, mem ? mem->fd : -1, PTR(mem ? mem->virt_addr : NULL));
    context_state *state = lookup(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    uint32_t allowed = weights ? FLAG_MEM_ALLOC_OUTSIDE
                               : FLAG_MEM_ALLOC_OUTSIDE | FLAG_INTERNAL_ALLOC_OUTSIDE;
    uint32_t needed = weights ? state->weight_size : state->internal_size;
    if (!(state->flag & allowed) || mem_slot(mem) < 0 || mem->size < needed)
        return RKNN_ERR_PARAM_INVALID;
    if (weights)
        state->weight_mem = mem;
    else
        state->internal_mem = mem;
    return RKNN_SUCC;
}

EXPORT int rknn_set_weight_mem(rknn_context context, rknn_tensor_mem *mem)
{
    return set_model_mem("rknn_set_weight_mem", context, mem, 1);
}

EXPORT int rknn_set_internal_mem(rknn_context context, rknn_tensor_mem *mem)
{
    return set_model_mem("rknn_set_internal_mem", context, mem, 0);
}

static int set_io_mem_call(rknn_context context, rknn_tensor_mem *mem, rknn_tensor_attr *attr)
{
    if (attr)
        log_line("rknn_set_io_mem ctx=%llu mem=0x%lx mem_size=%u index=%u size=%u "
                 "size_with_stride=%u w_stride=%u type=%d fmt=%d pass_through=%u name=%s",
                 ULL(context), PTR(mem), mem ? mem->size : 0, attr->index, attr->size,
                 attr->size_with_stride, attr->w_stride, attr->type, attr->fmt,
                 attr->pass_through, attr->name);
    else
        log_line("rknn_set_io_mem ctx=%llu mem=0x%lx attr=NULL", ULL(context), PTR(mem));
    context_state *state = lookup(context);
    if (!state)
        return RKNN_ERR_CTX_INVALID;
    if (!attr || mem_slot(mem) < 0)
        return RKNN_ERR_PARAM_INVALID;
    if (state->det.h) { /* the fake detector: its layouts, sized as the bound attr says */
        const detector_model *det = &state->det;
        uint64_t pixels = (uint64_t)det->h * det->w;
        if (strcmp(attr->name, "x") == 0) {
            uint64_t stride = attr->w_stride ? attr->w_stride : det->w;
            if ((attr->type != T_INT8 && attr->type != T_UINT8) || attr->fmt != F_NHWC ||
                stride < det->w || mem->size < det->h * stride * 3)
                return RKNN_ERR_PARAM_INVALID;
            state->io_mem_input = mem;
            state->io_attr_input = *attr;
            return RKNN_SUCC;
        }
        if (strcmp(attr->name, "prob") != 0 || attr->type != T_INT8)
            return RKNN_ERR_PARAM_INVALID;
        int blocked = attr->fmt == F_NC1HWC2;
        if (blocked && (attr->n_dims != 5 || attr->dims[1] != det->c1 || attr->dims[4] != det->c2))
            return RKNN_ERR_PARAM_INVALID;
        uint64_t bytes = pixels * (blocked ? det->c1 * det->c2 : 1);
        if ((!blocked && attr->fmt != F_NCHW && attr->fmt != F_NHWC) || mem->size < bytes)
            return RKNN_ERR_PARAM_INVALID;
        if (blocked) /* what the program must skip: every byte but channel 0 */
            memset(mem->virt_addr, 127, (size_t)bytes);
        state->io_mem_output[0] = mem;
        state->io_attr_output[0] = *attr;
        return RKNN_SUCC;
    }
    /* The tensor is found by name and laid out as the attr says: input int8 or
     * uint8; output int8, or float32/float16 dequantised; a mem too small for
     * that is refused (the real runtime only warns, and then writes past its end). */
    if (strcmp(attr->name, "input") == 0) {
        uint32_t layout_bytes = 4 * (attr->w_stride ? attr->w_stride : 4) * 3;
        if ((attr->type != T_INT8 && attr->type != T_UINT8) || mem->size < layout_bytes)
            return RKNN_ERR_PARAM_INVALID;
        state->io_mem_input = mem;
        state->io_attr_input = *attr;
        return RKNN_SUCC;
    }
    for (int i = 0; i < N_OUTPUTS; i++) {
        rknn_tensor_attr model = output_attr((uint32_t)i, 0);
        if (strcmp(attr->name, model.name) != 0)
            continue;
        /* int8 as the model gives it, or a plain layout the runtime dequantises into
           (Rockchip's zero-copy demos bind the OUTPUT_ATTR with type set to FLOAT32) */
        int dense = attr->fmt == F_NCHW || attr->fmt == F_NHWC || attr->fmt == F_UNDEFINED;
        uint32_t layout_bytes;
        if (attr->type == T_INT8)
            layout_bytes = (i == 1 && attr->fmt == F_NC1HWC2) ? 64 : model.size;
        else if ((attr->type == T_FLOAT32 || attr->type == T_FLOAT16) && dense)
            layout_bytes = model.n_elems * (attr->type == T_FLOAT32 ? 4u : 2u);
        else
            return RKNN_ERR_PARAM_INVALID;
        if (mem->size < layout_bytes)
            return RKNN_ERR_PARAM_INVALID;
        state->io_mem_output[i] = mem;
        state->io_attr_output[i] = *attr;
        return RKNN_SUCC;
    }
    return RKNN_ERR_PARAM_INVALID;
}

static int mem_sync_call(rknn_context context, rknn_tensor_mem *mem, int mode)
{
    log_line("rknn_mem_sync ctx=%llu mem=0x%lx mode=%d", ULL(context), PTR(mem), mode);
    if (!lookup(context))
        return RKNN_ERR_CTX_INVALID;
    if (mem_slot(mem) < 0 || mode < 1 || mode > 3)
        return RKNN_ERR_PARAM_INVALID;
    return RKNN_SUCC;
}

/* ------------------------------------------------- events (lab 7's check) */

/* The runtime's functions as a program calls them: each one runs the double's behaviour above,
   then writes its event to $RKNN_DOUBLE_EVENTS_FILE (header comment). */

static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *events_file;
static int events_off = -1;

/* what a caller's output buffer held, per buffer, after the last get wrote into it */
#define MAX_WRITTEN 64
static struct { const void *buf; uint32_t len; uint64_t hash; } written[MAX_WRITTEN];

static uint64_t fnv1a(const void *bytes, uint32_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ ((const uint8_t *)bytes)[i]) * 1099511628211ull;
    return h;
}

/* Opens the events file at the first event; 0 when there is none.  Called with events_lock held. */
static int events_open(void)
{
    if (events_off < 0) {
        const char *path = getenv("RKNN_DOUBLE_EVENTS_FILE");
        events_file = path && *path ? fopen(path, "w") : NULL;
        if (events_file)
            setvbuf(events_file, NULL, _IOLBF, 0); /* a line per event, written at once */
        events_off = events_file == NULL;
    }
    return !events_off;
}

static void event(const char *fmt, ...)
{
    pthread_mutex_lock(&events_lock);
    if (events_open()) {
        va_list args;
        va_start(args, fmt);
        vfprintf(events_file, fmt, args);
        va_end(args);
        fputc('\n', events_file);
    }
    pthread_mutex_unlock(&events_lock);
}

static int events_wanted(void)
{
    pthread_mutex_lock(&events_lock);
    int on = events_open();
    pthread_mutex_unlock(&events_lock);
    return on;
}

/* What a caller's buffer holds just before a get writes `len` bytes into it (header comment). */
static const char *held_before(const void *buf, uint32_t len)
{
    int slot = -1;
    pthread_mutex_lock(&events_lock);
    for (int i = 0; i < MAX_WRITTEN && slot < 0; i++)
        if (written[i].buf == buf)
            slot = i;
    int same = slot >= 0 && written[slot].len == len && written[slot].hash == fnv1a(buf, len);
    pthread_mutex_unlock(&events_lock);
    if (slot < 0)
        return "new";
    if (same)
        return "same";
    const char *perturb = getenv("MALLOC_PERTURB_");
    int p = perturb ? atoi(perturb) & 0xff : 0;
    uint32_t given = 0, taken = 0, zero = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint8_t b = ((const uint8_t *)buf)[i];
        given += p && b == (p ^ 0xff);
        taken += p && b == p;
        zero += b == 0;
    }
    return 2 * given >= len ? "fresh" : 2 * taken >= len ? "freed" : zero == len ? "zero" : "changed";
}

static void remember_written(const void *buf, uint32_t len)
{
    pthread_mutex_lock(&events_lock);
    int slot = -1, free_slot = -1;
    for (int i = 0; i < MAX_WRITTEN && slot < 0; i++) {
        if (written[i].buf == buf)
            slot = i;
        else if (!written[i].buf && free_slot < 0)
            free_slot = i;
    }
    if (slot < 0)
        slot = free_slot >= 0 ? free_slot : 0; /* a full table forgets its first buffer */
    written[slot].buf = buf;
    written[slot].len = len;
    written[slot].hash = fnv1a(buf, len);
    pthread_mutex_unlock(&events_lock);
}

__attribute__((destructor)) static void events_at_exit(void)
{
    if (events_off != 0) /* no event so far: no file */
        return;
    int contexts_live = 0;
    for (int i = 0; i < MAX_CONTEXTS; i++)
        contexts_live += contexts[i].live != 0;
    event("{\"call\": \"exit\", \"contexts\": %d, \"mems\": %d, \"outputs\": %d}", contexts_live,
          double_live_mems(), double_live_outputs());
    pthread_mutex_lock(&events_lock);
    fclose(events_file);
    events_file = NULL;
    events_off = 1;
    pthread_mutex_unlock(&events_lock);
}

EXPORT int rknn_init(rknn_context *context, void *model, uint32_t size, uint32_t flag,
                     rknn_init_extend *extend)
{
    int ret = init_call(context, model, size, flag, extend);
    event("{\"call\": \"rknn_init\", \"ret\": %d}", ret);
    return ret;
}

EXPORT int rknn_destroy(rknn_context context)
{
    int unreleased = 0;
    for (int i = 0; i < MAX_ALLOCS; i++)
        unreleased += allocs[i].buf && allocs[i].ctx == context;
    int ret = destroy_call(context);
    event("{\"call\": \"rknn_destroy\", \"ret\": %d, \"unreleased\": %d}", ret, ret ? 0 : unreleased);
    return ret;
}

EXPORT int rknn_inputs_set(rknn_context context, uint32_t n_inputs, rknn_input inputs[])
{
    int ret = inputs_set_call(context, n_inputs, inputs);
    event("{\"call\": \"rknn_inputs_set\", \"ret\": %d}", ret);
    return ret;
}

EXPORT int rknn_run(rknn_context context, rknn_run_extend *extend)
{
    int ret = run_call(context, extend);
    event("{\"call\": \"rknn_run\", \"ret\": %d}", ret);
    return ret;
}

/* The bytes glibc's malloc gave the block at p, or -1 when p is not the start of a block of
 * the brk heap (a stack or mmapped buffer, or a pointer into a block: then malloc_usable_size
 * could read outside the heap).  Only for the event log: a get never refuses on it. */
static long heap_capacity(const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = 0, hi = 0;
    if (!a || a % (2 * sizeof(size_t)))
        return -1;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512] = "";
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "[heap]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            break;
    if (maps)
        fclose(maps);
    if (!strstr(line, "[heap]") || a < lo + 2 * sizeof(size_t) || a >= hi)
        return -1;
    size_t header = ((const size_t *)p)[-1], chunk = header & ~(size_t)7;
    if ((header & 2) || chunk < 4 * sizeof(size_t) || chunk > hi - a)   /* 2: IS_MMAPPED */
        return -1;
    size_t usable = malloc_usable_size((void *)p);
    return usable ? (long)usable : -1;
}

EXPORT int rknn_outputs_get(rknn_context context, uint32_t n_outputs, rknn_output outputs[],
                            rknn_output_extend *extend)
{
    if (!events_wanted() || !outputs || n_outputs > N_OUTPUTS)
        return outputs_get_call(context, n_outputs, outputs, extend);
    const char *held[N_OUTPUTS];
    uint32_t need[N_OUTPUTS], given[N_OUTPUTS];
    long capacity[N_OUTPUTS];
    for (uint32_t i = 0; i < n_outputs; i++) {
        const rknn_output *out = &outputs[i];
        capacity[i] = out->is_prealloc ? heap_capacity(out->buf) : -1;
        need[i] = out->index < N_OUTPUTS ? output_bytes(out) : 0;
        given[i] = out->size;
        held[i] = !out->is_prealloc ? "runtime"
                : out->buf && need[i] && out->size >= need[i] ? held_before(out->buf, need[i]) : "small";
    }
    int ret = outputs_get_call(context, n_outputs, outputs, extend);
    char list[N_OUTPUTS * 64] = "";
    for (uint32_t i = 0; i < n_outputs; i++) {
        const rknn_output *out = &outputs[i];
        if (ret == RKNN_SUCC && out->is_prealloc)
            remember_written(out->buf, need[i]);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s[%u, %u, %u, %u, %u, \"%s\"]",
                 i ? ", " : "", out->index, out->is_prealloc, out->want_float, given[i], need[i],
                 held[i]);
    }
    char caps[N_OUTPUTS * 24] = "";
    for (uint32_t i = 0; i < n_outputs; i++)
        snprintf(caps + strlen(caps), sizeof caps - strlen(caps), "%s%ld", i ? ", " : "", capacity[i]);
    event("{\"call\": \"rknn_outputs_get\", \"ret\": %d, \"outputs\": [%s], \"capacity\": [%s]}", ret,
          list, caps);
    return ret;
}

EXPORT int rknn_outputs_release(rknn_context context, uint32_t n_outputs, rknn_output outputs[])
{
    int ret = outputs_release_call(context, n_outputs, outputs);
    event("{\"call\": \"rknn_outputs_release\", \"ret\": %d}", ret);
    return ret;
}

static rknn_tensor_mem *mem_event(rknn_tensor_mem *mem, uint64_t size)
{
    event("{\"call\": \"rknn_create_mem\", \"ret\": %d, \"size\": %llu}",
          mem ? RKNN_SUCC : RKNN_ERR_MALLOC_FAIL, ULL(size));
    return mem;
}

EXPORT rknn_tensor_mem *rknn_create_mem(rknn_context context, uint32_t size)
{
    return mem_event(create_mem_call(context, size), size);
}

#ifndef DOUBLE_OLD_RUNTIME
EXPORT rknn_tensor_mem *rknn_create_mem2(rknn_context context, uint64_t size, uint64_t alloc_flags)
{
    return mem_event(create_mem2_call(context, size, alloc_flags), size);
}
#endif

EXPORT rknn_tensor_mem *rknn_create_mem_from_fd(rknn_context context, int32_t fd, void *virt_addr,
                                                uint32_t size, int32_t offset)
{
    return mem_event(create_mem_from_fd_call(context, fd, virt_addr, size, offset), size);
}

EXPORT rknn_tensor_mem *rknn_create_mem_from_phys(rknn_context context, uint64_t phys_addr,
                                                  void *virt_addr, uint32_t size)
{
    return mem_event(create_mem_from_phys_call(context, phys_addr, virt_addr, size), size);
}

EXPORT int rknn_destroy_mem(rknn_context context, rknn_tensor_mem *mem)
{
    int ret = destroy_mem_call(context, mem);
    event("{\"call\": \"rknn_destroy_mem\", \"ret\": %d}", ret);
    return ret;
}

EXPORT int rknn_set_io_mem(rknn_context context, rknn_tensor_mem *mem, rknn_tensor_attr *attr)
{
    int ret = set_io_mem_call(context, mem, attr);
    char name[64] = "";
    for (size_t i = 0; attr && i + 1 < sizeof name && attr->name[i]; i++) /* JSON-safe characters */
        name[i] = attr->name[i] == '"' || attr->name[i] == '\\' || (unsigned char)attr->name[i] < 32
                      ? '?' : attr->name[i];
    long long mem_size = mem_slot(mem) >= 0 ? (long long)mem->size : -1;
    event("{\"call\": \"rknn_set_io_mem\", \"ret\": %d, \"name\": \"%s\", \"type\": %d, \"fmt\": %d, "
          "\"n_elems\": %u, \"size\": %u, \"size_with_stride\": %u, \"mem_size\": %lld}", ret, name,
          attr ? attr->type : -1, attr ? attr->fmt : -1, attr ? attr->n_elems : 0u, attr ? attr->size : 0u,
          attr ? attr->size_with_stride : 0u, mem_size);
    return ret;
}

EXPORT int rknn_mem_sync(rknn_context context, rknn_tensor_mem *mem, int mode)
{
    int ret = mem_sync_call(context, mem, mode);
    event("{\"call\": \"rknn_mem_sync\", \"ret\": %d}", ret);
    return ret;
}
