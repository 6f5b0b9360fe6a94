/* rknnlab's memory sampler in C: the part of rknnlab.probe.Probe that runs
 * at 200 Hz (up to 1 kHz) without taking Python's GIL.
 *
 * Built on first use by rknnlab.probe (cc -O2 -shared -fPIC -pthread) into a
 * per-user cache and loaded with ctypes; where that fails, Probe falls back to
 * its Python thread.  Time is CLOCK_MONOTONIC (the clock of Python's
 * time.perf_counter on Linux), cut into slots of one period from start().
 * A row holds:
 *
 *   fast tier (every row): row number, t_ns (CLOCK_MONOTONIC minus t0_ns), the
 *       caller's extra values (a double array it writes), RSS from statm;
 *   mid tier (one row every mid_every slots): /proc/meminfo MemFree,
 *       MemAvailable, Cached, Buffers, CmaFree, CmaTotal (kB), mallinfo2
 *       (mallinfo before glibc 2.33) arena, uordblks + hblkhd, fordblks
 *       (bytes), the rknpu load (mean %, over cores) and the NPU devfreq
 *       cur_freq (Hz);
 *   slow tier (one row every slow_every slots): Pss of smaps_rollup (kB).
 *
 * Who takes the rows.  Waking a sleeping thread costs 30-50 us of CPU in a
 * virtual machine (a few us on a board), which at 200 Hz alone is 0.6-1% of
 * a core.  So the caller may poll (rk_sampler_poll, e.g. after every
 * runtime call): a poll takes the row when the current slot has none yet
 * and says when the next is due (so Python calls it about once a slot),
 * costing a statm read (2-11 us, depending on how cold the caches are) and
 * no wake-up; in a mid slot also meminfo and mallinfo2 (20-150 us; from the
 * thread, mallinfo2 costs more: it locks every malloc arena the caller is
 * using and walks their free lists from another core's cache).
 * The thread takes the first row at once, the slow rows (smaps_rollup:
 * milliseconds, better on another core than in the caller's loop), and the
 * others in one of two modes:
 *
 *   - dense: it wakes at the start of every slot and takes a row (with the
 *     mid tier in a mid slot) if the slot has none;
 *   - sparse: it wakes only for the slow rows and every 40 ms
 *     (check_every slots) to check on the polls, and takes a mid row only
 *     if its slot went by without a poll.
 *   At every check it picks the mode for the next 40 ms: sparse when polls
 *   came in at least 3/4 of the slots since the last check (dense: a poll
 *   came in since the previous wake-up; sparse: a poll took the slot's
 *   row), dense otherwise.  So without polls the thread samples
 *   every slot itself, and when polls stop (a call that blocks, code that
 *   makes no calls) it is back at the full rate within 40 ms.
 *
 * One row a slot, except that a mid or slow row the thread takes late, in a
 * slot a poll has already filled, comes on top.
 * Files are opened once and re-read with pread.  Rows go to growing buffers
 * under a mutex; Python drains them (column-major) a few times a second.
 * NaN marks a value not read.  Our own code; no dependency but libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_MEMINFO 6
#define N_HEAP 3
#define N_NPU 2
#define W_MID (N_MEMINFO + N_HEAP + N_NPU)
#define W_SLOW 1
#define MAX_EXTRA 16

static const char *const MEMINFO_KEYS[N_MEMINFO] = {
    "MemFree:", "MemAvailable:", "Cached:", "Buffers:", "CmaFree:", "CmaTotal:"};

struct mi2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };
struct mi1 { int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };
typedef struct mi2 (*mallinfo2_fn)(void);
typedef struct mi1 (*mallinfo_fn)(void);

typedef struct {
    int64_t *tick;   /* the tick each row was read at */
    int64_t *t_ns;   /* fast tier only */
    double *v;       /* rows of w values */
    long n, cap;
    int w;
} tier_t;

typedef struct {
    int fd_statm, fd_meminfo, fd_rollup, fd_npu_load, fd_npu_freq;
    int heap;
    mallinfo2_fn mi2;
    mallinfo_fn mi1;
    int64_t period_ns, t0_ns;
    long mid_every, slow_every;
    int n_extra;
    const volatile double *extra; /* owned by the caller, read each row */
    volatile int64_t due_ns;       /* the start of the next slot without a row */
    volatile int64_t last_poll_ns; /* when a poll last came in */
    long page_kb;
    /* state (the schedule: under sample_lock) */
    int64_t grid0_ns;                    /* start of slot 0: the last start() */
    int64_t filled_slot, slots_filled;   /* the last slot with a row; slots with a row since start */
    int64_t next_mid_slot, next_slow_slot;
    int64_t rows, late, poll_rows, poll_ns, wakes;
    int64_t cpu_ns;
    volatile int stopping;
    pthread_mutex_t wake_lock; /* with wake_cond: the thread's sleep, which stop() cuts short */
    pthread_cond_t wake_cond;
    volatile int running;
    pid_t owner; /* the process the thread runs in (a forked child has no thread) */
    pthread_t thread;
    pthread_mutex_t sample_lock; /* one row at a time (thread or callers) */
    pthread_mutex_t lock;        /* the buffers and the counters Python reads */
    tier_t fast, mid, slow;
    char *buf;
    size_t buf_size;
} sampler_t;

static int64_t now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_or_neg(const char *path) {
    if (path == NULL || path[0] == 0) return -1;
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* the whole file from offset 0 into s->buf (grown as needed), NUL-terminated; -1 on error */
static long read_all(sampler_t *s, int fd) {
    for (;;) {
        ssize_t r = pread(fd, s->buf, s->buf_size - 1, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if ((size_t)r < s->buf_size - 1) {
            s->buf[r] = 0;
            return (long)r;
        }
        char *nb = realloc(s->buf, s->buf_size * 2);
        if (nb == NULL) return -1;
        s->buf = nb;
        s->buf_size *= 2;
    }
}

static double rss_kb(sampler_t *s) {
    char b[256];
    ssize_t r = pread(s->fd_statm, b, sizeof b - 1, 0);
    if (r <= 0) return NAN;
    b[r] = 0;
    char *p = b, *end;
    strtoll(p, &end, 10); /* size */
    if (end == p) return NAN;
    p = end;
    long long resident = strtoll(p, &end, 10);
    if (end == p) return NAN;
    return (double)resident * (double)s->page_kb;
}

static void read_meminfo(sampler_t *s, double *out) {
    for (int k = 0; k < N_MEMINFO; k++) out[k] = NAN;
    if (s->fd_meminfo < 0 || read_all(s, s->fd_meminfo) < 0) return;
    int found = 0;
    char *line = s->buf;
    while (line && *line && found < N_MEMINFO) {
        for (int k = 0; k < N_MEMINFO; k++) {
            size_t len = strlen(MEMINFO_KEYS[k]);
            if (isnan(out[k]) && strncmp(line, MEMINFO_KEYS[k], len) == 0) {
                out[k] = (double)strtoll(line + len, NULL, 10);
                found++;
                break;
            }
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
}

static void read_heap(sampler_t *s, double *out) {
    out[0] = out[1] = out[2] = NAN;
    if (!s->heap) return;
    if (s->mi2) {
        struct mi2 m = s->mi2();
        out[0] = (double)m.arena;
        out[1] = (double)m.uordblks + (double)m.hblkhd;
        out[2] = (double)m.fordblks;
    } else if (s->mi1) {
        struct mi1 m = s->mi1(); /* 32-bit fields that wrap: read as unsigned */
        out[0] = (double)(unsigned int)m.arena;
        out[1] = (double)(unsigned int)m.uordblks + (double)(unsigned int)m.hblkhd;
        out[2] = (double)(unsigned int)m.fordblks;
    }
}

static void read_pss(sampler_t *s, double *out) {
    out[0] = NAN;
    if (s->fd_rollup >= 0 && read_all(s, s->fd_rollup) >= 0) {
        char *p = strstr(s->buf, "\nPss:");
        if (p) out[0] = (double)strtoll(p + 5, NULL, 10);
    }
}

static void read_npu(sampler_t *s, double *out) {
    out[0] = out[1] = NAN;
    if (s->fd_npu_load >= 0 && read_all(s, s->fd_npu_load) >= 0) {
        /* "NPU load:  Core0: 30%, Core1:  0%, Core2: 60%,": the number before each % */
        double sum = 0;
        int n = 0;
        for (char *p = strchr(s->buf, '%'); p; p = strchr(p + 1, '%')) {
            char *q = p;
            while (q > s->buf && q[-1] >= '0' && q[-1] <= '9') q--;
            if (q < p) {
                sum += strtod(q, NULL);
                n++;
            }
        }
        if (n) out[0] = sum / n;
    }
    if (s->fd_npu_freq >= 0 && read_all(s, s->fd_npu_freq) >= 0) {
        long long f = strtoll(s->buf, NULL, 10);
        if (f > 0) out[1] = (double)f;
    }
}

static int tier_init(tier_t *t, int w, int with_t) {
    t->n = 0;
    t->cap = 1024;
    t->w = w;
    t->tick = malloc(sizeof(int64_t) * t->cap);
    t->t_ns = with_t ? malloc(sizeof(int64_t) * t->cap) : NULL;
    t->v = malloc(sizeof(double) * t->cap * (w ? w : 1));
    return t->tick && t->v && (!with_t || t->t_ns);
}

static void tier_free(tier_t *t) {
    free(t->tick);
    free(t->t_ns);
    free(t->v);
    t->tick = t->t_ns = NULL;
    t->v = NULL;
}

/* append one row; the caller holds s->lock */
static void tier_push(tier_t *t, int64_t tick, int64_t t_ns, const double *v) {
    if (t->n == t->cap) {
        long cap = t->cap * 2;
        int64_t *a = realloc(t->tick, sizeof(int64_t) * cap);
        if (a == NULL) return;
        t->tick = a;
        if (t->t_ns) {
            int64_t *b = realloc(t->t_ns, sizeof(int64_t) * cap);
            if (b == NULL) return;
            t->t_ns = b;
        }
        double *c = realloc(t->v, sizeof(double) * cap * (t->w ? t->w : 1));
        if (c == NULL) return;
        t->v = c;
        t->cap = cap;
    }
    t->tick[t->n] = tick;
    if (t->t_ns) t->t_ns[t->n] = t_ns;
    memcpy(t->v + (size_t)t->n * t->w, v, sizeof(double) * t->w);
    t->n++;
}

static int64_t slot_of(const sampler_t *s, int64_t t) {
    return t < s->grid0_ns ? -1 : (t - s->grid0_ns) / s->period_ns;
}

/* One row read now (the caller holds sample_lock): the fast tier, and the mid
 * and slow tiers if asked.  Marks the slot filled and moves "due" past it. */
static void take_row(sampler_t *s, int64_t t, int mid, int slow) {
    double fast[MAX_EXTRA + 1], midv[W_MID], slowv[W_SLOW];
    for (int k = 0; k < s->n_extra; k++) fast[k] = s->extra[k];
    fast[s->n_extra] = rss_kb(s);
    if (mid) {
        read_meminfo(s, midv);
        read_heap(s, midv + N_MEMINFO);
        read_npu(s, midv + N_MEMINFO + N_HEAP);
    }
    if (slow) read_pss(s, slowv);
    int64_t slot = slot_of(s, t);
    pthread_mutex_lock(&s->lock);
    int64_t i = s->rows;
    tier_push(&s->fast, i, t - s->t0_ns, fast);
    if (mid) tier_push(&s->mid, i, 0, midv);
    if (slow) tier_push(&s->slow, i, 0, slowv);
    s->rows = i + 1;
    pthread_mutex_unlock(&s->lock);
    if (slot > s->filled_slot) {
        s->filled_slot = slot;
        s->slots_filled++;
    }
    if (s->running) s->due_ns = s->grid0_ns + (s->filled_slot + 1) * s->period_ns;
}

/* sleep until t (CLOCK_MONOTONIC) or until stop() */
static void sleep_until(sampler_t *s, int64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
    pthread_mutex_lock(&s->wake_lock);
    while (!s->stopping && pthread_cond_timedwait(&s->wake_cond, &s->wake_lock, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&s->wake_lock);
}

/* the thread's checks on the polls in sparse mode: every 40 ms */
#define CHECK_NS 40000000LL

static void *loop(void *arg) {
    sampler_t *s = arg;
    int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    const int64_t p = s->period_ns, mid_every = s->mid_every, slow_every = s->slow_every;
    const int64_t check_every = p >= CHECK_NS ? 1 : (CHECK_NS + p / 2) / p;
    int sparse = 0;
    /* the window the mode is chosen on: its first slot, the polls' rows
     * before it, and (dense mode) the wake-ups that saw a poll since the last */
    int64_t window_slot = 0, window_polls = 0, polled_wakes = 0, last_wake, next_slot;

    pthread_mutex_lock(&s->sample_lock);
    last_wake = now_ns(CLOCK_MONOTONIC);
    take_row(s, last_wake, 1, 1);
    s->next_mid_slot = mid_every;
    s->next_slow_slot = slow_every;
    pthread_mutex_unlock(&s->sample_lock);
    next_slot = 1;
    while (!s->stopping) {
        sleep_until(s, s->grid0_ns + next_slot * p);
        if (s->stopping) break;
        pthread_mutex_lock(&s->sample_lock);
        s->wakes++;
        int64_t t = now_ns(CLOCK_MONOTONIC), slot = slot_of(s, t);
        if (s->last_poll_ns >= last_wake) polled_wakes++;
        last_wake = t;
        /* sparse: the polls take the mid rows (on the caller's thread the heap
         * statistics cost a fraction of what they cost from here: no arena
         * lock contention, warm caches); the thread only those a poll missed */
        int mid = sparse ? slot > s->next_mid_slot : slot >= s->next_mid_slot;
        int slow = slot >= s->next_slow_slot;
        if (mid) s->next_mid_slot = (slot / mid_every + 1) * mid_every;
        if (slow) s->next_slow_slot = (slot / slow_every + 1) * slow_every;
        if (mid || slow || (!sparse && slot > s->filled_slot)) take_row(s, t, mid, slow);
        if (slot - window_slot >= check_every) {
            int64_t supplied = sparse ? s->poll_rows - window_polls : polled_wakes;
            sparse = supplied * 4 >= (slot - window_slot) * 3;
            window_slot = slot;
            window_polls = s->poll_rows;
            polled_wakes = 0;
        }
        next_slot = sparse ? window_slot + check_every : slot + 1;
        if (!sparse && s->next_mid_slot < next_slot) next_slot = s->next_mid_slot;
        if (s->next_slow_slot < next_slot) next_slot = s->next_slow_slot;
        pthread_mutex_unlock(&s->sample_lock);
    }
    pthread_mutex_lock(&s->lock);
    s->cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ------------------------------------------------------------------ API */
void rk_sampler_free(void *h);
int rk_sampler_abi(void) { return 4; }

void *rk_sampler_new(const char *statm, const char *meminfo, const char *rollup,
                     const char *npu_load, const char *npu_freq, int heap, int64_t period_ns,
                     int64_t t0_ns, long mid_every, long slow_every, int n_extra,
                     const double *extra) {
    if (n_extra < 0 || n_extra > MAX_EXTRA || period_ns <= 0) return NULL;
    sampler_t *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->fd_statm = open_or_neg(statm);
    s->fd_meminfo = open_or_neg(meminfo);
    s->fd_rollup = open_or_neg(rollup);
    s->fd_npu_load = open_or_neg(npu_load);
    s->fd_npu_freq = open_or_neg(npu_freq);
    s->heap = heap;
    if (heap) {
        s->mi2 = (mallinfo2_fn)dlsym(RTLD_DEFAULT, "mallinfo2");
        if (!s->mi2) s->mi1 = (mallinfo_fn)dlsym(RTLD_DEFAULT, "mallinfo");
    }
    s->period_ns = period_ns;
    s->t0_ns = t0_ns;
    s->mid_every = mid_every > 0 ? mid_every : 1;
    s->slow_every = slow_every > 0 ? slow_every : 1;
    s->n_extra = n_extra;
    s->extra = extra;
    s->due_ns = INT64_MAX;
    long page = sysconf(_SC_PAGESIZE);
    s->page_kb = page > 0 ? page / 1024 : 4;
    s->buf_size = 8192;
    s->buf = malloc(s->buf_size);
    pthread_mutex_init(&s->sample_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->wake_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake_cond, &ca);
    pthread_condattr_destroy(&ca);
    int ok = s->buf && tier_init(&s->fast, n_extra + 1, 1) && tier_init(&s->mid, W_MID, 0) &&
             tier_init(&s->slow, W_SLOW, 0);
    if (!ok || s->fd_statm < 0) {
        rk_sampler_free(s); /* handles a half-built sampler */
        return NULL;
    }
    return s;
}

int rk_sampler_start(void *h) {
    sampler_t *s = h;
    if (s->running) return 0;
    pthread_mutex_lock(&s->sample_lock);
    s->stopping = 0;
    s->grid0_ns = now_ns(CLOCK_MONOTONIC);
    s->filled_slot = -1;
    s->slots_filled = 0;
    s->running = 1;
    s->due_ns = s->grid0_ns;
    pthread_mutex_unlock(&s->sample_lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&s->thread, &attr, loop, s);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        s->owner = getpid();
    } else {
        s->running = 0;
        s->due_ns = INT64_MAX;
    }
    return rc;
}

void rk_sampler_stop(void *h) {
    sampler_t *s = h;
    if (!s->running) return;
    s->due_ns = INT64_MAX;
    if (getpid() != s->owner) {
        /* after fork(): the thread was not copied, nothing to join; it may have
         * held a lock at the fork, which no one would release in this process */
        s->running = 0;
        pthread_mutex_init(&s->sample_lock, NULL);
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->wake_lock, NULL);
        return;
    }
    pthread_mutex_lock(&s->wake_lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake_cond);
    pthread_mutex_unlock(&s->wake_lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->sample_lock);
    s->running = 0;
    s->due_ns = INT64_MAX;
    /* the whole slots since start() that got no row */
    int64_t slots = slot_of(s, now_ns(CLOCK_MONOTONIC));
    if (slots > s->slots_filled) s->late += slots - s->slots_filled;
    pthread_mutex_unlock(&s->sample_lock);
}

/* a row with every tier, now (outside the schedule) */
void rk_sampler_sample(void *h) {
    sampler_t *s = h;
    pthread_mutex_lock(&s->sample_lock);
    take_row(s, now_ns(CLOCK_MONOTONIC), 1, 1);
    pthread_mutex_unlock(&s->sample_lock);
}

/* A row if the current slot has none yet: RSS and the extras, and the mid
 * tier when it is due.  Returns when the next row is due (INT64_MAX while
 * stopped): the caller need not call again before.  Never waits: if the
 * thread is taking a row right now (a slow one can take milliseconds), that
 * row is the slot's, and the caller goes on. */
int64_t rk_sampler_poll(void *h) {
    sampler_t *s = h;
    int64_t t = now_ns(CLOCK_MONOTONIC);
    s->last_poll_ns = t;
    if (!s->running) return INT64_MAX;
    if (t < s->due_ns) return s->due_ns; /* the thread took this slot's row */
    if (pthread_mutex_trylock(&s->sample_lock) != 0) return t;
    int64_t slot = slot_of(s, t);
    if (s->running && slot > s->filled_slot) {
        int mid = slot >= s->next_mid_slot;
        if (mid) s->next_mid_slot = (slot / s->mid_every + 1) * s->mid_every;
        take_row(s, t, mid, 0);
        s->poll_rows++;
        s->poll_ns += now_ns(CLOCK_MONOTONIC) - t;
    }
    int64_t due = s->running ? s->due_ns : INT64_MAX;
    pthread_mutex_unlock(&s->sample_lock);
    return due;
}

/* rows, slots missed (complete after stop), CPU ns of the thread (complete
 * after stop), rows waiting per tier (3), rows taken by polls, ns spent in
 * those polls' rows, the thread's wake-ups, the start of slot 0 (minus t0_ns) */
void rk_sampler_stats(void *h, int64_t *out) {
    sampler_t *s = h;
    pthread_mutex_lock(&s->sample_lock);
    pthread_mutex_lock(&s->lock);
    out[0] = s->rows;
    out[1] = s->late;
    out[2] = s->cpu_ns;
    out[3] = s->fast.n;
    out[4] = s->mid.n;
    out[5] = s->slow.n;
    out[6] = s->poll_rows;
    out[7] = s->poll_ns;
    out[8] = s->wakes;
    out[9] = s->grid0_ns - s->t0_ns;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->sample_lock);
}

/* Move up to max_rows rows of a tier (0 fast, 1 mid, 2 slow) out: ticks and
 * (fast tier) t_ns to their arrays, values column-major to v (column c of
 * the n rows at v[c * n]).  Returns n. */
long rk_sampler_drain(void *h, int which, long max_rows, int64_t *tick, int64_t *t_ns, double *v) {
    sampler_t *s = h;
    tier_t *t = which == 0 ? &s->fast : which == 1 ? &s->mid : &s->slow;
    pthread_mutex_lock(&s->lock);
    long n = t->n < max_rows ? t->n : max_rows;
    memcpy(tick, t->tick, sizeof(int64_t) * n);
    if (t_ns && t->t_ns) memcpy(t_ns, t->t_ns, sizeof(int64_t) * n);
    for (long r = 0; r < n; r++)
        for (int c = 0; c < t->w; c++) v[(size_t)c * n + r] = t->v[(size_t)r * t->w + c];
    long rest = t->n - n;
    if (rest > 0) {
        memmove(t->tick, t->tick + n, sizeof(int64_t) * rest);
        if (t->t_ns) memmove(t->t_ns, t->t_ns + n, sizeof(int64_t) * rest);
        memmove(t->v, t->v + (size_t)n * t->w, sizeof(double) * rest * t->w);
    }
    t->n = rest;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void rk_sampler_free(void *h) {
    sampler_t *s = h;
    if (s == NULL) return;
    rk_sampler_stop(s);
    int fds[] = {s->fd_statm, s->fd_meminfo, s->fd_rollup, s->fd_npu_load, s->fd_npu_freq};
    for (unsigned k = 0; k < sizeof fds / sizeof fds[0]; k++)
        if (fds[k] >= 0) close(fds[k]);
    tier_free(&s->fast);
    tier_free(&s->mid);
    tier_free(&s->slow);
    free(s->buf);
    pthread_mutex_destroy(&s->sample_lock);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->wake_lock);
    pthread_cond_destroy(&s->wake_cond);
    free(s);
}
