/*
 * video_pipeline.c -- NV12 frames in, text boxes out, on the NPU (chapter 6).
 *
 *   usage: video_pipeline MODEL.rknn [--frames N] [--workers W]
 *                         [--width 1280 --height 720] [--nv12 FILE]
 *                         [--thresh P] [--unclip R]
 *   build on a board: gcc -O2 -pthread -I <rknn_api.h dir> video_pipeline.c -lrknnrt -lm -o video_pipeline
 *
 * A text detector shaped like PP-OCR's (one uint8 image in, one int8
 * probability map out), run on a stream of NV12 frames, as a camera or a
 * decoder delivers them.  Frames come from --nv12 FILE (raw NV12, width x
 * height x 3/2 bytes per frame, rows of `width` bytes; the file is read
 * again from its start when the frames run out) or, without it, from a
 * synthetic moving test pattern: light paper with BARS dark text-like bars.
 *
 * Setup, once:
 *   - one context per worker thread: the first from rknn_init, the others
 *     from rknn_dup_context (they share the model's weights);
 *   - worker i asks rknn_set_core_mask for core i mod 3 (RKNN_NPU_CORE_0,
 *     _1, _2).  The API reference: RK3588 and RK3576 only; a single-core NPU
 *     refuses, and then the program says so and goes on with the runtime's
 *     choice;
 *   - the NATIVE input and output attrs (RKNN_QUERY_NATIVE_INPUT_ATTR,
 *     RKNN_QUERY_NATIVE_OUTPUT_ATTR).  The input is bound as UINT8 NHWC, as
 *     Rockchip's zero-copy demos do: the NPU then normalizes and quantizes it;
 *   - one rknn_create_mem per tensor and context, sized from the attr's
 *     size_with_stride, and one rknn_set_io_mem each.  Size a buffer you
 *     bind from the attr you bind it with.  Use size_with_stride of that
 *     attr (native, or a plain input attr whose rows may be padded).  For a
 *     plain output attr you set to FLOAT32, use n_elems x 4 bytes;
 *   - every other buffer the loop needs: one NV12 frame, a mask and a stack
 *     for the connected components, per worker; the letterbox's tables.
 *     Their pages are touched once, and each context runs once (a warm-up:
 *     a board's runtime may allocate at a context's first rknn_run), so
 *     that RSS before the loop holds all of it.
 *
 * Per frame, in the worker that took it:
 *   source    the NV12 frame: pread from the file, or the pattern drawn;
 *   convert   NV12 -> RGB888 (BT.601, limited range) and a letterbox resize
 *             (nearest pixel, aspect kept, centred) on the CPU, written
 *             straight into the input mem, in rows of w_stride pixels (0
 *             means the width).  On a board RGA can do this step, with its
 *             alignment rules (chapter 6);
 *   sync in   rknn_mem_sync(RKNN_MEMORY_SYNC_TO_DEVICE);
 *   run       rknn_run;
 *   sync out  rknn_mem_sync(RKNN_MEMORY_SYNC_FROM_DEVICE) on the output mem;
 *   post      the int8 map read in place: pixel (y, x) of channel 0 is byte
 *             (y * row pitch + x) * C2 of an NC1HWC2 map.  C2 is the channel
 *             block of NC1HWC2.  It depends on the SoC and the data type: for
 *             int8, C2 is 16 on rk3588, rk3576 and rk3562, and 8 on rk3566 and
 *             rk3568.  Read it from dims[4] of the native attr; never assume
 *             it.  Thresholded in the int8 domain: q >= ceil(P / scale + zp),
 *             so no value of the map is dequantized; connected components
 *             (8-connectivity: pixels that touch at a corner belong together;
 *             flood fill with a preallocated stack); a box per component,
 *             its score the mean probability (one dequantization per box),
 *             kept when the score reaches 0.5 and both sides 3 pixels,
 *             expanded as DB post-processing does (distance = area x R /
 *             perimeter; R = 0 keeps the component's own box), mapped back
 *             to frame coordinates.  The same steps and defaults as the
 *             course's Python (rknnlab.pipeline.find_boxes).
 *
 * Rockchip's sources do not settle when rknn_mem_sync is needed.  The
 * comments of the DISABLE_FLUSH flags imply that the runtime flushes inputs
 * and invalidates outputs by default.  The API reference says cacheable
 * memory shared by the CPU and the NPU needs rknn_mem_sync.  None of
 * Rockchip's demos call it.  A maintainer says to add it yourself if you need
 * it (airockchip/rknn_model_zoo#156).  The course's code syncs: the safe
 * choice.
 *
 * Threads: one set of output buffers per context, and one thread per context
 * at a time (a precaution: no document says whether a context is
 * thread-safe).  Each worker owns its context and its mems; the workers share
 * only a frame counter and read-only tables.  RK3588 has no non-blocking
 * rknn_run (rknn_wait and the async fields of rknn_run_extend are not
 * available), so three cores are kept busy by three threads.
 *
 * It prints one line per frame for the first frames, with their boxes, then
 * the frame rate, the median time of each stage, the boxes found, RSS
 * (/proc/self/statm) before and after the loop.  The loop allocates nothing:
 * every buffer it uses exists before the first frame, and per-frame lines are
 * printed only after the loop.  Teardown: each context's mems, then the
 * duplicated contexts, then the first one; our buffers last.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pread under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rknn_api.h"

#define DEFAULT_FRAMES 100
#define MAX_FRAMES 100000
#define MAX_WORKERS 6
#define BARS 5              /* dark bars in the synthetic pattern */
#define SHOWN_FRAMES 3      /* frames printed with their boxes */
#define MAX_BOXES 256       /* boxes kept per frame; more are counted, not kept */
#define MIN_BOX_SIDE 3      /* components narrower than this (model pixels) are noise */
#define BOX_THRESH 0.5f     /* a box's mean probability must reach this: the course's Python
                               default (RapidOCR's); Rockchip's PPOCR-Det demo uses 0.6 */

enum { SOURCE, CONVERT, SYNC_IN, RUN, SYNC_OUT, POST, N_STAGES };
static const char *const stage_names[N_STAGES] = {"source", "convert", "sync in", "run",
                                                  "sync out", "post"};

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

/* Prints "video_pipeline: <what> failed: <code> (<name>)"; returns 0 so callers can `return fail(...)`. */
static int fail(const char *what, int ret)
{
    fprintf(stderr, "video_pipeline: %s failed: %d (%s)\n", what, ret, error_name(ret));
    return 0;
}

static const char *format_name(int fmt)
{
    static const char *const names[] = {"NCHW", "NHWC", "NC1HWC2", "UNDEFINED"};
    return fmt >= 0 && fmt < (int)(sizeof names / sizeof names[0]) ? names[fmt] : "format?";
}

static const char *type_name(int type)
{
    static const char *const names[] = {"FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16",
                                        "INT32", "UINT32", "INT64", "BOOL", "INT4", "BFLOAT16"};
    return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "type?";
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

/* Writes one byte per page, so that the pages are resident before the loop.  Through a volatile
   pointer: a compiler may turn malloc + memset(0) into calloc, or drop a memset of calloc'd memory,
   and then no page is touched. */
static void touch_pages(void *buf, size_t bytes)
{
    volatile uint8_t *bytes_of = buf;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < bytes; i += page) bytes_of[i] = 0;
}

/* Milliseconds on the monotonic clock: it never jumps when someone sets the system time. */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* main checked once that this clock works */
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ shared setup */

typedef struct { int x0, y0, x1, y1; float score; } box; /* frame pixels, x1/y1 exclusive */

/* What one frame left behind: filled by the worker that ran it, printed after the loop. */
typedef struct {
    int worker;
    int done;              /* 1 once its boxes are in */
    int n_boxes;           /* all boxes found, also those past MAX_BOXES */
    uint64_t hash;         /* of its boxes, so that two runs can be compared */
    double ms[N_STAGES];
} frame_record;

/* Read-only during the loop, except `next_frame`. */
typedef struct {
    int frame_w, frame_h;          /* NV12, rows of frame_w bytes */
    size_t frame_bytes;
    int nv12_fd;                   /* -1: the synthetic pattern */
    long file_frames;
    int frames;
    /* the model, from the native attrs */
    int in_h, in_w, in_pitch;      /* pitch: w_stride, or the width when it is 0 */
    int out_h, out_w, out_pitch, out_c2; /* c2 = 1 for NCHW / NHWC with one channel */
    int out_zp;
    float out_scale;
    int q_thresh;                  /* int8 q >= this is text (may be 128: nothing is) */
    float unclip;
    /* the letterbox */
    double scale;                  /* model pixels per frame pixel */
    int new_w, new_h, pad_x, pad_y;
    int *src_x, *src_y;            /* frame column / row of each letterboxed pixel */
    atomic_int next_frame;
    frame_record *records;
    box shown[SHOWN_FRAMES][MAX_BOXES];
} pipeline;

typedef struct {
    int index;
    pipeline *p;
    rknn_context ctx;
    int live;                      /* ctx came from a successful init / dup */
    rknn_tensor_attr in_attr, out_attr;
    rknn_tensor_mem *in_mem, *out_mem;
    uint8_t *nv12;                 /* this worker's frame buffer */
    uint8_t *mask;                 /* out_h x out_w: 1 where q >= threshold, cleared as visited */
    uint32_t *stack;               /* flood fill, out_h x out_w entries at most */
    box boxes[MAX_BOXES];
    int ok;                        /* 1 when the loop ran out of frames, 0 after a failure */
} worker;

/* ----------------------------------------------------------------- frames */

/* The synthetic frame k: light paper with a slow diagonal ramp, and BARS dark bars that slide
   sideways, each whole inside the frame.  Y = 40 for ink, 190 to 221 for paper. */
static void draw_pattern(uint8_t *nv12, int w, int h, int k)
{
    uint8_t *uv = nv12 + (size_t)w * h;
    int bar_h = (h / 30) & ~1, margin = w / 20;
    if (bar_h < 4) bar_h = 4;
    for (int y = 0; y < h; y++) {
        uint8_t *row = nv12 + (size_t)y * w;
        for (int x = 0; x < w; x++) row[x] = (uint8_t)(190 + ((x + y + 4 * k) / 16) % 32);
    }
    for (int y = 0; y < h / 2; y++) {
        uint8_t *row = uv + (size_t)y * w;
        for (int x = 0; x < w; x += 2) {
            row[x] = 120;     /* U */
            row[x + 1] = 136; /* V: a warm paper */
        }
    }
    for (int j = 0; j < BARS; j++) {
        int len = w * (25 + 10 * j) / 100;
        int room = w - len - 2 * margin;
        int x0 = (margin + (k * 8 + j * 97) % (room > 1 ? room : 1)) & ~1;
        int y0 = (h * (j + 1) / (BARS + 1) - bar_h / 2) & ~1;
        for (int y = y0; y < y0 + bar_h; y++) memset(nv12 + (size_t)y * w + x0, 40, (size_t)len);
        for (int y = y0 / 2; y < (y0 + bar_h) / 2; y++) {
            uint8_t *row = uv + (size_t)y * w;
            for (int x = x0; x < x0 + len; x++) row[x] = 128;
        }
    }
}

static int get_frame(worker *wk, int k)
{
    const pipeline *p = wk->p;
    if (p->nv12_fd < 0) {
        draw_pattern(wk->nv12, p->frame_w, p->frame_h, k);
        return 1;
    }
    off_t at = (off_t)(k % p->file_frames) * (off_t)p->frame_bytes;
    size_t done = 0;
    while (done < p->frame_bytes) {
        ssize_t n = pread(p->nv12_fd, wk->nv12 + done, p->frame_bytes - done, at + (off_t)done);
        if (n <= 0) {
            fprintf(stderr, "video_pipeline: worker %d: reading frame %d of the NV12 file: %s\n",
                    wk->index, k, n < 0 ? strerror(errno) : "unexpected end of file");
            return 0;
        }
        done += (size_t)n;
    }
    return 1;
}

static uint8_t clip255(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* NV12 -> RGB888 (BT.601, limited range, integer) and letterbox, straight into the input mem.
   Only the image area is written: the border was cleared once at setup and nothing else writes
   this mem (the NPU only reads its input). */
static void convert(const pipeline *p, const uint8_t *nv12, uint8_t *dst)
{
    const uint8_t *uv = nv12 + (size_t)p->frame_w * p->frame_h;
    for (int y = 0; y < p->new_h; y++) {
        int sy = p->src_y[y];
        const uint8_t *y_row = nv12 + (size_t)sy * p->frame_w;
        const uint8_t *uv_row = uv + (size_t)(sy / 2) * p->frame_w;
        uint8_t *out = dst + ((size_t)(p->pad_y + y) * p->in_pitch + (size_t)p->pad_x) * 3;
        for (int x = 0; x < p->new_w; x++) {
            int sx = p->src_x[x];
            int c = 298 * (y_row[sx] - 16) + 128;
            int d = uv_row[sx & ~1] - 128, e = uv_row[(sx & ~1) + 1] - 128;
            out[3 * x] = clip255((c + 409 * e) >> 8);
            out[3 * x + 1] = clip255((c - 100 * d - 208 * e) >> 8);
            out[3 * x + 2] = clip255((c + 516 * d) >> 8);
        }
    }
}

/* ---------------------------------------------------------- post-processing */

static uint64_t mix(uint64_t h, int64_t v)
{
    h ^= (uint64_t)v;
    return h * 0x100000001b3ull; /* FNV-1a step */
}

/* A component's box in model pixels (x1, y1 inclusive), expanded by DB's unclip distance and
   mapped back to the frame (x1, y1 exclusive), clipped to it. */
static box to_frame(const pipeline *p, int x0, int y0, int x1, int y1, float score)
{
    double sx = (double)p->in_w / p->out_w, sy = (double)p->in_h / p->out_h; /* map -> input */
    double bx0 = x0 * sx, by0 = y0 * sy, bx1 = (x1 + 1) * sx, by1 = (y1 + 1) * sy;
    double bw = bx1 - bx0, bh = by1 - by0;
    double grow = p->unclip * bw * bh / (2.0 * (bw + bh));
    bx0 -= grow, by0 -= grow, bx1 += grow, by1 += grow;
    box b;
    b.x0 = (int)floor((bx0 - p->pad_x) / p->scale);
    b.y0 = (int)floor((by0 - p->pad_y) / p->scale);
    b.x1 = (int)ceil((bx1 - p->pad_x) / p->scale);
    b.y1 = (int)ceil((by1 - p->pad_y) / p->scale);
    b.x0 = b.x0 < 0 ? 0 : b.x0;
    b.y0 = b.y0 < 0 ? 0 : b.y0;
    b.x1 = b.x1 > p->frame_w ? p->frame_w : b.x1;
    b.y1 = b.y1 > p->frame_h ? p->frame_h : b.y1;
    b.score = score;
    return b;
}

/* Pushes a text pixel not yet visited.  It is cleared when pushed, so each pixel is pushed at most
   once and the stack never holds more than h x w entries. */
static void push(worker *wk, int *top, uint32_t at)
{
    if (!wk->mask[at]) return;
    wk->mask[at] = 0;
    wk->stack[(*top)++] = at;
}

/* Threshold in the int8 domain, connected components (8-connectivity, as the course's Python:
   a diagonal stroke stays one component), boxes.  Reads the output mem in place; writes only this
   worker's mask, stack and boxes. */
static void find_boxes(worker *wk, int k)
{
    const pipeline *p = wk->p;
    const int8_t *map = (const int8_t *)wk->out_mem->virt_addr; /* offset: see bind_mems */
    int h = p->out_h, w = p->out_w, n = 0;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (int y = 0; y < h; y++) {
        const int8_t *row = map + (size_t)y * p->out_pitch * p->out_c2;
        uint8_t *mask = wk->mask + (size_t)y * w;
        for (int x = 0; x < w; x++) mask[x] = row[(size_t)x * p->out_c2] >= p->q_thresh;
    }
    for (int start = 0; start < h * w; start++) {
        if (!wk->mask[start]) continue;
        int top = 0, x0 = w, y0 = h, x1 = -1, y1 = -1;
        long count = 0, sum_q = 0;
        push(wk, &top, (uint32_t)start);
        while (top > 0) {
            uint32_t at = wk->stack[--top];
            int y = (int)(at / (uint32_t)w), x = (int)(at % (uint32_t)w);
            x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1;
            y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
            count++;
            sum_q += map[((size_t)y * p->out_pitch + (size_t)x) * p->out_c2];
            for (int dy = -1; dy <= 1; dy++) {
                if (y + dy < 0 || y + dy >= h) continue;
                for (int dx = -1; dx <= 1; dx++)
                    if ((dx || dy) && x + dx >= 0 && x + dx < w)
                        push(wk, &top, (uint32_t)((y + dy) * w + x + dx));
            }
        }
        float score = ((float)sum_q / (float)count - (float)p->out_zp) * p->out_scale;
        if (x1 - x0 + 1 < MIN_BOX_SIDE || y1 - y0 + 1 < MIN_BOX_SIDE || score < BOX_THRESH) continue;
        box b = to_frame(p, x0, y0, x1, y1, score);
        if (n < MAX_BOXES) wk->boxes[n] = b;
        n++;
        hash = mix(mix(mix(mix(hash, b.x0), b.y0), b.x1), b.y1);
    }
    frame_record *r = &wk->p->records[k];
    r->n_boxes = n;
    r->hash = mix(hash, k);
    if (k < SHOWN_FRAMES) memcpy(wk->p->shown[k], wk->boxes, sizeof wk->boxes);
}

/* ------------------------------------------------------------------ workers */

/* One frame, stage by stage; 0 after a failed call (already reported). */
static int run_frame(worker *wk, int k, frame_record *r)
{
    const pipeline *p = wk->p;
    double t[N_STAGES + 1];
    t[0] = now_ms();
    if (!get_frame(wk, k)) return 0;
    t[1] = now_ms();
    convert(p, wk->nv12, (uint8_t *)wk->in_mem->virt_addr); /* offset: see bind_mems */
    t[2] = now_ms();
    int ret = rknn_mem_sync(wk->ctx, wk->in_mem, RKNN_MEMORY_SYNC_TO_DEVICE);
    if (ret < 0) return fail("rknn_mem_sync(input, RKNN_MEMORY_SYNC_TO_DEVICE)", ret);
    t[3] = now_ms();
    ret = rknn_run(wk->ctx, NULL);
    if (ret < 0) {
        fprintf(stderr, "video_pipeline: worker %d: rknn_run (frame %d) failed: %d (%s)\n", wk->index,
                k, ret, error_name(ret));
        return 0;
    }
    t[4] = now_ms();
    ret = rknn_mem_sync(wk->ctx, wk->out_mem, RKNN_MEMORY_SYNC_FROM_DEVICE);
    if (ret < 0) return fail("rknn_mem_sync(output, RKNN_MEMORY_SYNC_FROM_DEVICE)", ret);
    t[5] = now_ms();
    find_boxes(wk, k);
    t[6] = now_ms();
    for (int s = 0; s < N_STAGES; s++) r->ms[s] = t[s + 1] - t[s];
    r->done = 1;
    return 1;
}

/* A worker takes the next frame until there is none; after a failure it stops the others. */
static void *work(void *arg)
{
    worker *wk = arg;
    pipeline *p = wk->p;
    for (;;) {
        int k = atomic_fetch_add(&p->next_frame, 1);
        if (k >= p->frames) break;
        p->records[k].worker = wk->index;
        if (!run_frame(wk, k, &p->records[k])) {
            atomic_store(&p->next_frame, p->frames);
            return NULL; /* wk->ok stays 0 */
        }
    }
    wk->ok = 1;
    return NULL;
}

/* ------------------------------------------------------------------- setup */

static const rknn_core_mask core_masks[3] = {RKNN_NPU_CORE_0, RKNN_NPU_CORE_1, RKNN_NPU_CORE_2};
static const char *const core_mask_names[3] = {"RKNN_NPU_CORE_0", "RKNN_NPU_CORE_1", "RKNN_NPU_CORE_2"};

/* The native attrs of the one input and the one output, and what the loop reads from them. */
static int query_model(worker *wk, pipeline *p, int first)
{
    rknn_input_output_num num;
    int ret = rknn_query(wk->ctx, RKNN_QUERY_IN_OUT_NUM, &num, sizeof(num));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_IN_OUT_NUM)", ret);
    if (num.n_input != 1 || num.n_output != 1) {
        fprintf(stderr, "video_pipeline: the model has %u inputs and %u outputs; this program runs a "
                "detector with one image in and one probability map out\n", num.n_input, num.n_output);
        return 0;
    }
    memset(&wk->in_attr, 0, sizeof(wk->in_attr));
    memset(&wk->out_attr, 0, sizeof(wk->out_attr));
    ret = rknn_query(wk->ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &wk->in_attr, sizeof(wk->in_attr));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_NATIVE_INPUT_ATTR)", ret);
    ret = rknn_query(wk->ctx, RKNN_QUERY_NATIVE_OUTPUT_ATTR, &wk->out_attr, sizeof(wk->out_attr));
    if (ret < 0) return fail("rknn_query(RKNN_QUERY_NATIVE_OUTPUT_ATTR)", ret);
    const rknn_tensor_attr *in = &wk->in_attr, *out = &wk->out_attr;
    if (in->n_dims != 4 || in->fmt != RKNN_TENSOR_NHWC || in->dims[3] != 3) {
        fprintf(stderr, "video_pipeline: the native input is %s with %u dims; this program needs a "
                "4-D NHWC image with 3 channels\n", format_name(in->fmt), in->n_dims);
        return 0;
    }
    if (out->type != RKNN_TENSOR_INT8) {
        fprintf(stderr, "video_pipeline: the native output is %s; this program reads int8 in place\n",
                type_name(out->type));
        return 0;
    }
    int out_h, out_w, c2 = 1, c1 = 1;
    if (out->fmt == RKNN_TENSOR_NC1HWC2 && out->n_dims == 5) {
        c1 = (int)out->dims[1], out_h = (int)out->dims[2], out_w = (int)out->dims[3];
        c2 = (int)out->dims[4];
    } else if (out->fmt == RKNN_TENSOR_NCHW && out->n_dims == 4 && out->dims[1] == 1) {
        out_h = (int)out->dims[2], out_w = (int)out->dims[3];
    } else if (out->fmt == RKNN_TENSOR_NHWC && out->n_dims == 4 && out->dims[3] == 1) {
        out_h = (int)out->dims[1], out_w = (int)out->dims[2];
    } else {
        fprintf(stderr, "video_pipeline: the native output is %s with %u dims; this program reads "
                "one channel of NC1HWC2, NCHW or NHWC\n", format_name(out->fmt), out->n_dims);
        return 0;
    }
    /* Row pitch of the map: w_stride if given, else the width.  Public librknnrt logs show native
       NC1HWC2 rows padded while w_stride is 0 (size_with_stride larger than C1 x H x W x C2): then
       the pitch is what size_with_stride holds per row. */
    int pitch = out->w_stride ? (int)out->w_stride : out_w;
    uint64_t per_row = (uint64_t)c1 * (uint64_t)out_h * (uint64_t)c2;
    if (out->size_with_stride > per_row * (uint64_t)pitch && out->size_with_stride % per_row == 0)
        pitch = (int)(out->size_with_stride / per_row);
    uint32_t in_pitch = in->w_stride ? in->w_stride : in->dims[2];
    if ((uint64_t)in->size_with_stride < (uint64_t)in->dims[1] * in_pitch * 3 ||
        (uint64_t)out->size_with_stride < per_row * (uint64_t)pitch) {
        fprintf(stderr, "video_pipeline: size_with_stride is smaller than the rows it must hold\n");
        return 0;
    }
    if (!first) return 1; /* a duplicate has the same model: the first context's answers hold */
    p->in_h = (int)in->dims[1];
    p->in_w = (int)in->dims[2];
    p->in_pitch = in->w_stride ? (int)in->w_stride : p->in_w;
    p->out_h = out_h, p->out_w = out_w, p->out_pitch = pitch, p->out_c2 = c2;
    p->out_zp = out->zp;
    p->out_scale = out->scale;
    printf("input %s: native %s %s [%u, %u, %u, %u], w_stride %u, size_with_stride %u B; bound as "
           "UINT8 NHWC\n", in->name, format_name(in->fmt), type_name(in->type), in->dims[0], in->dims[1],
           in->dims[2], in->dims[3], in->w_stride, in->size_with_stride);
    printf("output %s: native %s %s [", out->name, format_name(out->fmt), type_name(out->type));
    for (uint32_t d = 0; d < out->n_dims; d++) printf(d ? ", %u" : "%u", out->dims[d]);
    printf("], map %dx%d, C2 %d, row pitch %d, size_with_stride %u B, zp %d, scale %g\n", out_h, out_w,
           c2, pitch, out->size_with_stride, out->zp, out->scale);
    return 1;
}

/* Input UINT8 NHWC and output as queried: one mem each, sized from size_with_stride, bound once. */
static int bind_mems(worker *wk)
{
    wk->in_attr.type = RKNN_TENSOR_UINT8;
    wk->in_attr.fmt = RKNN_TENSOR_NHWC;
    /* A mem from rknn_create_mem starts at its virt_addr (offset 0), so the program reads and writes
       virt_addr alone, as Rockchip's zero-copy demos do.  Adapting it to rknn_create_mem_from_fd?
       That mem carries the offset you passed, and no document says whether virt_addr already
       includes it: check on your board before adding it, or you may apply it twice. */
    wk->in_mem = rknn_create_mem(wk->ctx, wk->in_attr.size_with_stride);
    wk->out_mem = rknn_create_mem(wk->ctx, wk->out_attr.size_with_stride);
    if (!wk->in_mem || !wk->out_mem) {
        fprintf(stderr, "video_pipeline: worker %d: rknn_create_mem of %u B and %u B returned NULL\n",
                wk->index, wk->in_attr.size_with_stride, wk->out_attr.size_with_stride);
        return 0;
    }
    memset(wk->in_mem->virt_addr, 0, wk->in_attr.size_with_stride); /* the letterbox border: black */
    int ret = rknn_mem_sync(wk->ctx, wk->in_mem, RKNN_MEMORY_SYNC_TO_DEVICE);
    if (ret < 0) return fail("rknn_mem_sync(input border, RKNN_MEMORY_SYNC_TO_DEVICE)", ret);
    ret = rknn_set_io_mem(wk->ctx, wk->in_mem, &wk->in_attr);
    if (ret < 0) return fail("rknn_set_io_mem(input)", ret);
    ret = rknn_set_io_mem(wk->ctx, wk->out_mem, &wk->out_attr);
    if (ret < 0) return fail("rknn_set_io_mem(output)", ret);
    return 1;
}

/* Context (init or dup), core mask, attrs, mems and buffers of worker i. */
static int setup_worker(worker *wk, worker *first, pipeline *p, const char *model)
{
    int ret;
    if (wk == first) {
        ret = rknn_init(&wk->ctx, (void *)model, 0, 0, NULL);
        if (ret < 0) {
            fprintf(stderr, "video_pipeline: rknn_init(%s) failed: %d (%s)\n", model, ret, error_name(ret));
            return 0;
        }
    } else {
        ret = rknn_dup_context(&first->ctx, &wk->ctx);
        if (ret < 0) return fail("rknn_dup_context", ret);
    }
    wk->live = 1;
    int core = wk->index % 3;
    ret = rknn_set_core_mask(wk->ctx, core_masks[core]);
    printf("worker %d: context from %s, ", wk->index, wk == first ? "rknn_init" : "rknn_dup_context");
    if (ret < 0)
        printf("rknn_set_core_mask(%s) refused: %d (%s); the runtime picks the core\n",
               core_mask_names[core], ret, error_name(ret));
    else
        printf("core mask %s\n", core_mask_names[core]);
    if (!query_model(wk, p, wk == first) || !bind_mems(wk)) return 0;
    size_t map = (size_t)p->out_h * (size_t)p->out_w;
    wk->nv12 = malloc(p->frame_bytes);
    wk->mask = malloc(map);
    wk->stack = malloc(map * sizeof(*wk->stack));
    if (!wk->nv12 || !wk->mask || !wk->stack) {
        fprintf(stderr, "video_pipeline: worker %d: cannot allocate its frame and map buffers\n", wk->index);
        return 0;
    }
    /* Touch every page now, so that RSS before the loop already holds these buffers. */
    touch_pages(wk->nv12, p->frame_bytes);
    touch_pages(wk->mask, map);
    touch_pages(wk->stack, map * sizeof(*wk->stack));
    /* One warm-up run per context, outside the loop: a board's runtime may allocate buffers at a
       context's first rknn_run (see mem_layers.c), which is not the per-frame cost. */
    ret = rknn_run(wk->ctx, NULL);
    if (ret < 0) return fail("rknn_run (warm-up)", ret);
    ret = rknn_mem_sync(wk->ctx, wk->out_mem, RKNN_MEMORY_SYNC_FROM_DEVICE);
    if (ret < 0) return fail("rknn_mem_sync(output, RKNN_MEMORY_SYNC_FROM_DEVICE)", ret);
    return 1;
}

/* Aspect kept, centred; the source pixel of every letterboxed row and column, computed once. */
static int plan_letterbox(pipeline *p)
{
    double sx = (double)p->in_w / p->frame_w, sy = (double)p->in_h / p->frame_h;
    p->scale = sx < sy ? sx : sy;
    p->new_w = (int)lround(p->frame_w * p->scale);
    p->new_h = (int)lround(p->frame_h * p->scale);
    p->new_w = p->new_w > p->in_w ? p->in_w : p->new_w;
    p->new_h = p->new_h > p->in_h ? p->in_h : p->new_h;
    p->pad_x = (p->in_w - p->new_w) / 2;
    p->pad_y = (p->in_h - p->new_h) / 2;
    p->src_x = malloc((size_t)p->new_w * sizeof(int));
    p->src_y = malloc((size_t)p->new_h * sizeof(int));
    if (!p->src_x || !p->src_y) return 0;
    for (int x = 0; x < p->new_w; x++) {
        int s = (int)((x + 0.5) / p->scale);
        p->src_x[x] = s < p->frame_w ? s : p->frame_w - 1;
    }
    for (int y = 0; y < p->new_h; y++) {
        int s = (int)((y + 0.5) / p->scale);
        p->src_y[y] = s < p->frame_h ? s : p->frame_h - 1;
    }
    printf("letterbox: %dx%d -> %dx%d at (%d, %d) in %dx%d, scale %.4f, nearest pixel\n", p->frame_w,
           p->frame_h, p->new_w, p->new_h, p->pad_x, p->pad_y, p->in_w, p->in_h, p->scale);
    return 1;
}

/* ------------------------------------------------------------------ report */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const pipeline *p, int workers, double wall_ms, long rss_before, long rss_after)
{
    for (int k = 0; k < p->frames && k < SHOWN_FRAMES; k++) {
        const frame_record *r = &p->records[k];
        printf("frame %d worker %d: %d boxes\n", k, r->worker, r->n_boxes);
        for (int b = 0; b < r->n_boxes && b < MAX_BOXES; b++)
            printf("  box %d %d %d %d score %.2f\n", p->shown[k][b].x0, p->shown[k][b].y0,
                   p->shown[k][b].x1, p->shown[k][b].y1, p->shown[k][b].score);
    }
    long total = 0;
    uint64_t hash = 0;
    int per_worker[MAX_WORKERS] = {0};
    for (int k = 0; k < p->frames; k++) {
        total += p->records[k].n_boxes;
        hash += p->records[k].hash; /* a sum: the same whichever worker ran which frame */
        per_worker[p->records[k].worker]++;
    }
    printf("frames: %d, workers: %d, %.1f ms, %.1f frames/s\n", p->frames, workers, wall_ms,
           wall_ms > 0 ? p->frames * 1e3 / wall_ms : 0.0);
    printf("frames per worker:");
    for (int i = 0; i < workers; i++) printf(" %d", per_worker[i]);
    printf("\nms per frame (median):");
    double *column = malloc((size_t)p->frames * sizeof(double));
    for (int s = 0; column && s < N_STAGES; s++) {
        for (int k = 0; k < p->frames; k++) column[k] = p->records[k].ms[s];
        qsort(column, (size_t)p->frames, sizeof(double), compare_doubles);
        printf(" %s %.3f%s", stage_names[s], column[p->frames / 2], s + 1 < N_STAGES ? "," : "");
    }
    free(column);
    printf("\nboxes: %ld in %d frames, checksum %016llx\n", total, p->frames, (unsigned long long)hash);
    printf("RSS: %ld kB before the loop, %ld kB after, growth %ld kB\n", rss_before, rss_after,
           rss_after - rss_before);
    printf("per-frame allocations: none (every buffer the loop uses exists before the first frame)\n");
}

/* ------------------------------------------------------------------- main */

static int usage(const char *self)
{
    fprintf(stderr, "usage: %s MODEL.rknn [--frames N] [--workers W] [--width 1280 --height 720] "
            "[--nv12 FILE] [--thresh P] [--unclip R]\n"
            "  --frames N    1 to %d (default %d)\n"
            "  --workers W   threads, each with its own context, 1 to %d (default 1)\n"
            "  --width, --height   the NV12 frame size, even, 64 to 7680 (default 1280x720)\n"
            "  --nv12 FILE   raw NV12 frames (width x height x 3/2 bytes each); default: a test pattern\n"
            "  --thresh P    text probability threshold, 0 to 1 (default 0.3)\n"
            "  --unclip R    box expansion ratio, 0 to 4 (default 1.6; 0: the component's own box)\n",
            self, MAX_FRAMES, DEFAULT_FRAMES, MAX_WORKERS);
    return 2;
}

/* A whole number from min to max, or -1. */
static long parse_number(const char *text, long min, long max)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    return end != text && *end == '\0' && value >= min && value <= max ? value : -1;
}

static double parse_real(const char *text, double min, double max)
{
    char *end = NULL;
    double value = strtod(text, &end);
    return end != text && *end == '\0' && value >= min && value <= max ? value : -1.0;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *nv12_path = NULL;
    long frames = DEFAULT_FRAMES, workers = 1, width = 1280, height = 720;
    double thresh = 0.3, unclip = 1.6;
    for (int k = 1; k < argc; k++) {
        const char *arg = argv[k], *value = k + 1 < argc ? argv[k + 1] : NULL;
        if (strcmp(arg, "--frames") == 0 && value) {
            if ((frames = parse_number(argv[++k], 1, MAX_FRAMES)) < 0) {
                fprintf(stderr, "video_pipeline: --frames must be 1 to %d, not '%s'\n", MAX_FRAMES, value);
                return usage(argv[0]);
            }
        } else if (strcmp(arg, "--workers") == 0 && value) {
            if ((workers = parse_number(argv[++k], 1, MAX_WORKERS)) < 0) {
                fprintf(stderr, "video_pipeline: --workers must be 1 to %d, not '%s'\n", MAX_WORKERS, value);
                return usage(argv[0]);
            }
        } else if ((strcmp(arg, "--width") == 0 || strcmp(arg, "--height") == 0) && value) {
            long n = parse_number(argv[++k], 64, 7680);
            if (n < 0 || n % 2) {
                fprintf(stderr, "video_pipeline: %s must be even, 64 to 7680 (NV12 halves both), not '%s'\n",
                        arg, value);
                return usage(argv[0]);
            }
            *(arg[2] == 'w' ? &width : &height) = n;
        } else if (strcmp(arg, "--nv12") == 0 && value) {
            nv12_path = argv[++k];
        } else if (strcmp(arg, "--thresh") == 0 && value) {
            if ((thresh = parse_real(argv[++k], 0.0, 1.0)) < 0) {
                fprintf(stderr, "video_pipeline: --thresh must be 0 to 1, not '%s'\n", value);
                return usage(argv[0]);
            }
        } else if (strcmp(arg, "--unclip") == 0 && value) {
            if ((unclip = parse_real(argv[++k], 0.0, 4.0)) < 0) {
                fprintf(stderr, "video_pipeline: --unclip must be 0 to 4, not '%s'\n", value);
                return usage(argv[0]);
            }
        } else if (arg[0] != '-' && model == NULL) {
            model = arg;
        } else {
            fprintf(stderr, "video_pipeline: unexpected argument '%s'\n", arg);
            return usage(argv[0]);
        }
    }
    if (model == NULL) return usage(argv[0]);
    struct timespec probe;
    if (clock_gettime(CLOCK_MONOTONIC, &probe) != 0) {
        perror("video_pipeline: clock_gettime(CLOCK_MONOTONIC)");
        return 1;
    }
    FILE *fp = fopen(model, "rb");
    if (!fp) {
        fprintf(stderr, "video_pipeline: cannot open model %s: %s\n", model, strerror(errno));
        return 1;
    }
    fclose(fp);

    static pipeline p; /* large (the shown boxes): not on the stack */
    p.frame_w = (int)width, p.frame_h = (int)height, p.frames = (int)frames;
    p.frame_bytes = (size_t)width * (size_t)height * 3 / 2;
    p.nv12_fd = -1;
    p.unclip = (float)unclip;
    atomic_init(&p.next_frame, 0);
    if (nv12_path) {
        struct stat st;
        p.nv12_fd = open(nv12_path, O_RDONLY);
        if (p.nv12_fd < 0 || fstat(p.nv12_fd, &st) != 0) {
            fprintf(stderr, "video_pipeline: cannot open NV12 file %s: %s\n", nv12_path, strerror(errno));
            if (p.nv12_fd >= 0) close(p.nv12_fd);
            return 1;
        }
        p.file_frames = (long)(st.st_size / (off_t)p.frame_bytes);
        if (p.file_frames < 1 || st.st_size % (off_t)p.frame_bytes != 0) {
            fprintf(stderr, "video_pipeline: %s holds %lld B, not a whole number of %ldx%ld NV12 frames "
                    "(%zu B each)\n", nv12_path, (long long)st.st_size, width, height, p.frame_bytes);
            close(p.nv12_fd);
            return 1;
        }
        printf("frames: %s, %ld NV12 frames of %ldx%ld (%zu B each)%s\n", nv12_path, p.file_frames, width,
               height, p.frame_bytes, p.file_frames < frames ? ", read again from the start" : "");
    } else {
        printf("frames: synthetic %ldx%ld NV12 pattern with %d dark bars (%zu B each)\n", width, height,
               BARS, p.frame_bytes);
    }

    worker wks[MAX_WORKERS];
    memset(wks, 0, sizeof wks);
    int ok = 1, started = 0;
    for (int i = 0; ok && i < workers; i++) {
        wks[i].index = i;
        wks[i].p = &p;
        ok = setup_worker(&wks[i], &wks[0], &p, model);
        if (ok && i == 0) {
            ok = plan_letterbox(&p);
            if (!ok) fprintf(stderr, "video_pipeline: cannot allocate the letterbox tables\n");
        }
    }
    if (ok) {
        p.records = calloc((size_t)frames, sizeof(*p.records));
        if (!p.records) {
            fprintf(stderr, "video_pipeline: cannot allocate the records of %ld frames\n", frames);
            ok = 0;
        } else {
            touch_pages(p.records, (size_t)frames * sizeof(*p.records));
        }
    }
    long rss_before = 0, rss_after = 0;
    double wall = 0;
    if (ok) {
        /* the smallest int8 q whose probability (q - zp) x scale reaches thresh */
        double q = ceil(thresh / p.out_scale + p.out_zp - 1e-9);
        p.q_thresh = q < -128 ? -128 : q > 128 ? 128 : (int)q;
        printf("threshold: probability %.2f -> int8 q >= %d (zp %d, scale %g); the map is never "
               "dequantized\n", thresh, p.q_thresh, p.out_zp, p.out_scale);
        pthread_t threads[MAX_WORKERS];
        rss_before = rss_kb();
        double t0 = now_ms();
        for (int i = 0; i < workers; i++) {
            int ret = pthread_create(&threads[i], NULL, work, &wks[i]);
            if (ret != 0) {
                fprintf(stderr, "video_pipeline: pthread_create (worker %d): %s\n", i, strerror(ret));
                atomic_store(&p.next_frame, (int)frames); /* the running workers stop */
                ok = 0;
                break;
            }
            started++;
        }
        for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
        wall = now_ms() - t0;
        rss_after = rss_kb();
        for (int i = 0; ok && i < started; i++) ok = wks[i].ok;
        /* the counter passes the end also when a worker stopped: every frame must have a result */
        for (int k = 0; ok && k < frames; k++) ok = p.records[k].done;
        if (!ok && started == workers) fprintf(stderr, "video_pipeline: a worker stopped; no summary\n");
    }
    if (ok) report(&p, (int)workers, wall, rss_before, rss_after);

    /* each context's mems before its rknn_destroy; the duplicates before the first context */
    for (int i = (int)workers - 1; i >= 0; i--) {
        worker *wk = &wks[i];
        if (!wk->live) continue;
        rknn_tensor_mem *mems[2] = {wk->in_mem, wk->out_mem};
        for (int m = 0; m < 2; m++) {
            if (!mems[m]) continue;
            int ret = rknn_destroy_mem(wk->ctx, mems[m]);
            if (ret < 0) ok = fail("rknn_destroy_mem", ret);
        }
        int ret = rknn_destroy(wk->ctx);
        if (ret < 0) ok = fail("rknn_destroy", ret);
        free(wk->nv12);
        free(wk->mask);
        free(wk->stack);
    }
    free(p.src_x);
    free(p.src_y);
    free(p.records);
    if (p.nv12_fd >= 0) close(p.nv12_fd);
    return ok ? 0 : 1;
}
