/* rknnlab's memory sampler in C: the part of rknnlab.probe.Probe that runs
 * at 200 Hz (up to 1 kHz), as a pthread that never takes Python's GIL.
 *
 * Built on first use by rknnlab.probe (cc -O2 -shared -fPIC -pthread) into a
 * per-user cache and loaded with ctypes; where that fails, Probe falls back to
 * its Python thread.  The thread wakes on an absolute CLOCK_MONOTONIC
 * schedule (the clock of Python's time.perf_counter on Linux) and per tick:
 *
 *   fast tier (every tick): tick, t_ns (CLOCK_MONOTONIC minus t0_ns), the
 *       caller's extra values (a double array it writes), RSS from statm;
 *   mid tier (every mid_every ticks): /proc/meminfo MemFree, MemAvailable,
 *       Cached, Buffers, CmaFree, CmaTotal (kB) and mallinfo2 (mallinfo
 *       before glibc 2.33) arena, uordblks + hblkhd, fordblks (bytes);
 *   slow tier (every slow_every ticks): Pss of smaps_rollup (kB), the rknpu
 *       load (mean %, over cores) and the NPU devfreq cur_freq (Hz).
 *
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
#define W_MID (N_MEMINFO + N_HEAP)
#define W_SLOW 3
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
    const volatile double *extra; /* owned by the caller, read each tick */
    long page_kb;
    /* state */
    int64_t ticks, late;
    int64_t cpu_ns;
    volatile int stopping;
    int running;
    pid_t owner; /* the process the thread runs in (a forked child has no thread) */
    pthread_t thread;
    pthread_mutex_t sample_lock; /* one sample at a time (thread or caller) */
    pthread_mutex_t lock;        /* the buffers */
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

static void read_slow(sampler_t *s, double *out) {
    out[0] = out[1] = out[2] = NAN;
    if (s->fd_rollup >= 0 && read_all(s, s->fd_rollup) >= 0) {
        char *p = strstr(s->buf, "\nPss:");
        if (p) out[0] = (double)strtoll(p + 5, NULL, 10);
    }
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
        if (n) out[1] = sum / n;
    }
    if (s->fd_npu_freq >= 0 && read_all(s, s->fd_npu_freq) >= 0) {
        long long f = strtoll(s->buf, NULL, 10);
        if (f > 0) out[2] = (double)f;
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

static void sample(sampler_t *s) {
    double fast[MAX_EXTRA + 1], mid[W_MID], slow[W_SLOW];
    pthread_mutex_lock(&s->sample_lock);
    int64_t i = s->ticks;
    int64_t t = now_ns(CLOCK_MONOTONIC) - s->t0_ns;
    for (int k = 0; k < s->n_extra; k++) fast[k] = s->extra[k];
    fast[s->n_extra] = rss_kb(s);
    int do_mid = i % s->mid_every == 0, do_slow = i % s->slow_every == 0;
    if (do_mid) {
        read_meminfo(s, mid);
        read_heap(s, mid + N_MEMINFO);
    }
    if (do_slow) read_slow(s, slow);
    pthread_mutex_lock(&s->lock);
    tier_push(&s->fast, i, t, fast);
    if (do_mid) tier_push(&s->mid, i, 0, mid);
    if (do_slow) tier_push(&s->slow, i, 0, slow);
    s->ticks = i + 1;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->sample_lock);
}

static void *loop(void *arg) {
    sampler_t *s = arg;
    int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t period = s->period_ns;
    int64_t next = now_ns(CLOCK_MONOTONIC);
    while (!s->stopping) {
        sample(s);
        next += period;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (now > next) { /* overran: skip the missed ticks rather than burst */
            int64_t missed = (now - next) / period + 1;
            pthread_mutex_lock(&s->lock);
            s->late += missed;
            pthread_mutex_unlock(&s->lock);
            next += missed * period;
        }
        struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
    pthread_mutex_lock(&s->lock);
    s->cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ------------------------------------------------------------------ API */
void rk_sampler_free(void *h);
int rk_sampler_abi(void) { return 1; }

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
    long page = sysconf(_SC_PAGESIZE);
    s->page_kb = page > 0 ? page / 1024 : 4;
    s->buf_size = 8192;
    s->buf = malloc(s->buf_size);
    pthread_mutex_init(&s->sample_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
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
    s->stopping = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&s->thread, &attr, loop, s);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        s->running = 1;
        s->owner = getpid();
    }
    return rc;
}

void rk_sampler_stop(void *h) {
    sampler_t *s = h;
    if (!s->running) return;
    if (getpid() != s->owner) {
        /* after fork(): the thread was not copied, nothing to join; it may have
         * held a lock at the fork, which no one would release in this process */
        s->running = 0;
        pthread_mutex_init(&s->sample_lock, NULL);
        pthread_mutex_init(&s->lock, NULL);
        return;
    }
    s->stopping = 1;
    pthread_join(s->thread, NULL);
    s->running = 0;
}

void rk_sampler_sample(void *h) { sample((sampler_t *)h); }

/* ticks, late ticks, CPU ns of the thread (complete after stop), rows waiting per tier */
void rk_sampler_stats(void *h, int64_t *out) {
    sampler_t *s = h;
    pthread_mutex_lock(&s->lock);
    out[0] = s->ticks;
    out[1] = s->late;
    out[2] = s->cpu_ns;
    out[3] = s->fast.n;
    out[4] = s->mid.n;
    out[5] = s->slow.n;
    pthread_mutex_unlock(&s->lock);
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
    free(s);
}
