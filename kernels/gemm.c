/* CPU linear algebra shared by kernels: thread pool, fp32 GEMM/GEMV,
 * scratch buffers, dtype conversions. See kernels/gemm.h.
 *
 * GEMM: C is cut into blocks of at most NB columns, narrowed so each
 * thread gets about four (and, when there are still too few to feed every
 * thread, into MC-row chunks); each block is one pool task. A is packed
 * once per call (in parallel) into MR-row panels per KC-deep slice, or,
 * when small and row-major, read in place by the micro-kernel; each
 * task packs its KC x nb slice of B into NR-column panels -- or reads them
 * from a k_bpack, a constant weight packed once -- and runs an MR x NR
 * register-tile micro-kernel (AVX2+FMA when the CPU has it, plain C
 * otherwise). M == 1 takes GEMV paths that stream B once (row-major B, or
 * the prepacked panels). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define K_X86 1
#endif

#include "kernels/gemm.h"
#include "runtime/rt.h"

/* ------------------------------------------------------------ thread pool */

/* Workers and the caller spin for a short while (K_SPIN pause loops, some
 * tens of microseconds) before sleeping on a condition variable: a model's
 * parallel regions come a few microseconds apart, and a futex wake-up costs
 * more than many of them take. The job is published through atomics (its
 * generation last); the condition variables only serve sleepers, so no
 * system call is made while everyone spins. GRAFT_SPIN=0 turns spinning off. */
#define K_SPIN 4000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int n; /* threads, caller included */
    int spin;
    _Atomic uint32_t gen;
    _Atomic(k_task_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n_tasks;
    _Atomic uint64_t ticket; /* gen << 32 | next task */
    _Atomic int64_t done;
    _Atomic int sleepers;   /* workers waiting on cv_work */
    _Atomic int caller_waits; /* the caller waits on cv_done */
    atomic_flag busy;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, K_SPIN, 0, NULL,
          NULL, 0, 0, 0, 0, 0, ATOMIC_FLAG_INIT};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_task;

/* One step of a spin wait: a pause, and every 64th step a sched_yield,
 * so that on a machine with more runnable threads than cores a spinning
 * thread hands its core to the one it waits for (or to anyone) instead of
 * burning its time slice. */
static inline void cpu_relax(int i)
{
#ifdef K_X86
    _mm_pause();
#endif
    if ((i & 63) == 63) sched_yield();
}

/* Claims and runs tasks of generation `gen` until none are left. */
static void pool_drain(uint32_t gen, k_task_fn fn, void *ctx, int64_t n)
{
    int64_t ran = 0;
    for (;;) {
        uint64_t t = atomic_load(&pool.ticket);
        if ((uint32_t)(t >> 32) != gen) break;
        int64_t idx = (int64_t)(t & 0xffffffffu);
        if (idx >= n) break;
        if (!atomic_compare_exchange_weak(&pool.ticket, &t, t + 1)) continue;
        fn(ctx, idx);
        ran++;
    }
    /* seq_cst: either the caller sees done == n, or this sees caller_waits */
    if (ran && atomic_fetch_add(&pool.done, ran) + ran == n && atomic_load(&pool.caller_waits)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv_done);
        pthread_mutex_unlock(&pool.mu);
    }
}

static void *pool_worker(void *arg)
{
    (void)arg;
    in_task = 1;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = atomic_load(&pool.gen);
        for (int i = 0; g == seen && i < pool.spin; i++) {
            cpu_relax(i);
            g = atomic_load(&pool.gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&pool.mu);
            atomic_fetch_add(&pool.sleepers, 1);
            while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.cv_work, &pool.mu);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = g;
        /* fields of a later job at worst: pool_drain then finds the ticket
         * of another generation and claims nothing */
        pool_drain(seen, atomic_load(&pool.fn), atomic_load(&pool.ctx), atomic_load(&pool.n_tasks));
    }
    return NULL;
}

static void pool_init(void)
{
    int n = 0;
    const char *env = getenv("GRAFT_THREADS");
    if (env && *env) n = atoi(env);
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    if (n > 256) n = 256;
    env = getenv("GRAFT_SPIN");
    if (env && *env) pool.spin = atoi(env) > 0 ? atoi(env) : 0; /* 0: no spinning; N: N pause loops */
    int started = 1;
    for (int i = 1; i < n; i++) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, pool_worker, NULL) == 0) started++;
        pthread_attr_destroy(&at);
    }
    pool.n = started;
}

int k_threads(void)
{
    pthread_once(&pool_once, pool_init);
    return pool.n;
}

void k_parallel_for(int64_t n_tasks, k_task_fn fn, void *ctx)
{
    if (n_tasks <= 0) return;
    if (n_tasks == 1 || in_task || k_threads() <= 1 || n_tasks > 0x7fffffff ||
        atomic_flag_test_and_set(&pool.busy)) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    uint32_t gen = atomic_load(&pool.gen) + 1;
    if (gen == 0) gen = 1;
    atomic_store(&pool.fn, fn);
    atomic_store(&pool.ctx, ctx);
    atomic_store(&pool.n_tasks, n_tasks);
    atomic_store(&pool.done, 0);
    atomic_store(&pool.ticket, (uint64_t)gen << 32);
    pthread_mutex_lock(&pool.mu); /* against a worker between its last check and its wait */
    atomic_store(&pool.gen, gen);
    if (atomic_load(&pool.sleepers)) pthread_cond_broadcast(&pool.cv_work);
    pthread_mutex_unlock(&pool.mu);
    in_task = 1;
    pool_drain(gen, fn, ctx, n_tasks);
    in_task = 0;
    for (int i = 0; atomic_load(&pool.done) < n_tasks && i < pool.spin; i++) cpu_relax(i);
    if (atomic_load(&pool.done) < n_tasks) {
        pthread_mutex_lock(&pool.mu);
        atomic_store(&pool.caller_waits, 1);
        while (atomic_load(&pool.done) < n_tasks) pthread_cond_wait(&pool.cv_done, &pool.mu);
        atomic_store(&pool.caller_waits, 0);
        pthread_mutex_unlock(&pool.mu);
    }
    atomic_flag_clear(&pool.busy);
}

/* ------------------------------------------------------------ scratch */

#define K_HUGE ((size_t)2 << 20)
#define K_HUGE_MIN ((size_t)16 << 20)

void *k_buf_get(k_buf *b, size_t bytes)
{
    if (bytes <= b->cap && b->p) return b->p;
    /* more than the machine's memory: fail here (an overcommitted
     * allocation would only fail when touched, by the OOM killer) */
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - 64 || (pages > 0 && psz > 0 && (uint64_t)bytes > (uint64_t)pages * (uint64_t)psz))
        return NULL;
    size_t alloc = (bytes + 63) / 64 * 64;
    if (alloc == 0) alloc = 64;
    void *p;
    if (alloc >= K_HUGE_MIN) { /* 2 MB pages (packed weights): fewer faults, fewer TLB misses when streamed */
        alloc = (alloc + K_HUGE - 1) / K_HUGE * K_HUGE;
        p = aligned_alloc(K_HUGE, alloc);
#ifdef MADV_HUGEPAGE
        if (p) (void)madvise(p, alloc, MADV_HUGEPAGE);
#endif
    } else {
        p = aligned_alloc(64, alloc);
    }
    if (!p) return NULL;
    free(b->p);
    b->p = p;
    b->cap = alloc;
    return p;
}

void k_buf_free(k_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

/* ------------------------------------------------------------ conversions */

#ifdef K_X86
static int have_avx2(void);
static int have_f16c(void);

/* fp16 -> fp32 eight at a time (vcvtph2ps: exact, as rt_f16_to_f32);
 * returns how many were converted (a multiple of 8). */
__attribute__((target("avx2,f16c"))) static size_t f16_to_f32_f16c(const uint16_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    return i;
}

/* fp32 -> fp16 eight at a time, round to nearest even (vcvtps2ph, as
 * rt_f32_to_f16 for every number; a NaN keeps more of its payload). */
__attribute__((target("avx2,f16c"))) static size_t f32_to_f16_f16c(const float *s, uint16_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

/* bf16 -> fp32 eight at a time (the 16 bits shifted up, as rt_bf16_to_f32). */
__attribute__((target("avx2"))) static size_t bf16_to_f32_avx2(const uint16_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    return i;
}
#endif

int k_is_float(int dtype)
{
    return dtype == GRAFT_DTYPE_FLOAT || dtype == GRAFT_DTYPE_FLOAT16 || dtype == GRAFT_DTYPE_BFLOAT16 ||
           dtype == GRAFT_DTYPE_DOUBLE;
}

int k_to_f32(int dtype, const void *src, float *dst, size_t n)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT:
        if (dst != src) memmove(dst, src, n * 4);
        return 1;
    case GRAFT_DTYPE_FLOAT16: {
        const uint16_t *s = src;
        size_t i = 0;
#ifdef K_X86
        if (have_f16c()) i = f16_to_f32_f16c(s, dst, n);
#endif
        for (; i < n; i++) dst[i] = rt_f16_to_f32(s[i]);
        return 1;
    }
    case GRAFT_DTYPE_BFLOAT16: {
        const uint16_t *s = src;
        size_t i = 0;
#ifdef K_X86
        if (have_avx2()) i = bf16_to_f32_avx2(s, dst, n);
#endif
        for (; i < n; i++) dst[i] = rt_bf16_to_f32(s[i]);
        return 1;
    }
    case GRAFT_DTYPE_DOUBLE: {
        const double *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = (float)s[i];
        return 1;
    }
    default: return 0;
    }
}

int k_from_f32(int dtype, const float *src, void *dst, size_t n)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT:
        if (dst != src) memmove(dst, src, n * 4);
        return 1;
    case GRAFT_DTYPE_FLOAT16: {
        uint16_t *d = dst;
        size_t i = 0;
#ifdef K_X86
        if (have_f16c()) i = f32_to_f16_f16c(src, d, n);
#endif
        for (; i < n; i++) d[i] = rt_f32_to_f16(src[i]);
        return 1;
    }
    case GRAFT_DTYPE_BFLOAT16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = rt_f32_to_bf16(src[i]);
        return 1;
    }
    case GRAFT_DTYPE_DOUBLE: {
        double *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = src[i];
        return 1;
    }
    default: return 0;
    }
}

/* k_to_f32 / k_from_f32 in chunks on the pool (large tensors). */
typedef struct conv_job {
    int dtype, to;
    const void *src;
    void *dst;
    size_t n;
} conv_job;

#define CONV_CHUNK 16384

static void conv_task(void *ctx, int64_t t)
{
    const conv_job *j = ctx;
    size_t a = (size_t)t * CONV_CHUNK, m = j->n - a < CONV_CHUNK ? j->n - a : CONV_CHUNK;
    size_t es = rt_dtype_size(j->dtype);
    if (j->to) k_to_f32(j->dtype, (const char *)j->src + a * es, (float *)j->dst + a, m);
    else k_from_f32(j->dtype, (const float *)j->src + a, (char *)j->dst + a * es, m);
}

static int conv_par(int dtype, int to, const void *src, void *dst, size_t n)
{
    if (!k_is_float(dtype)) return 0;
    if (n < 4 * CONV_CHUNK || dtype == GRAFT_DTYPE_FLOAT || k_threads() <= 1)
        return to ? k_to_f32(dtype, src, dst, n) : k_from_f32(dtype, src, dst, n);
    conv_job j = {dtype, to, src, dst, n};
    k_parallel_for((int64_t)((n + CONV_CHUNK - 1) / CONV_CHUNK), conv_task, &j);
    return 1;
}

int k_to_f32_par(int dtype, const void *src, float *dst, size_t n) { return conv_par(dtype, 1, src, dst, n); }
int k_from_f32_par(int dtype, const float *src, void *dst, size_t n) { return conv_par(dtype, 0, src, dst, n); }

/* ------------------------------------------------------------ CPU features */

static int have_avx2(void)
{
#ifdef K_X86
    static int v = -1;
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        const char *env = getenv("GRAFT_NO_SIMD");
        if (env && *env && *env != '0') v = 0;
    }
    return v;
#else
    return 0;
#endif
}

int k_have_avx2(void) { return have_avx2(); }

/* AVX2 and F16C (vcvtph2ps: fp16 widened in registers; CPUID.1:ECX bit 29). */
static int have_f16c(void)
{
#ifdef K_X86
    static int v = -1;
    if (v < 0) {
        unsigned a, b, c, d;
        v = have_avx2() && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    }
    return v;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------ vector helpers */

#ifdef K_X86
__attribute__((target("avx2,fma"))) static float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void axpy_avx2(int64_t n, float a, const float *x, float *y)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
#endif

#ifdef K_X86
/* out[j] = dot_avx2(a, B + j * ldb, n) for j in [0, nb), four rows of B at
 * a time: each product keeps dot_avx2's two accumulators, order and final
 * sum, so the results are bit-identical to k_dot. */
/* dot_avx2's two accumulators summed (s0 + s1), before the horizontal sum. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 dot_acc_avx2(const float *a, const float *b,
                                                                                     int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    if (i + 8 <= n) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    return _mm256_add_ps(s0, s1);
}

/* hsum256 of eight vectors at once, same additions in the same order:
 * out[j] = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)) of v[j]. */
__attribute__((target("avx2,fma"), always_inline)) static inline void hsum8_avx2(const __m256 *v, float *out)
{
    /* [lo + hi of v[a] | lo + hi of v[a + 4]] */
    __m256 w04 = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[4], 0x20), _mm256_permute2f128_ps(v[0], v[4], 0x31));
    __m256 w15 = _mm256_add_ps(_mm256_permute2f128_ps(v[1], v[5], 0x20), _mm256_permute2f128_ps(v[1], v[5], 0x31));
    __m256 w26 = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[6], 0x20), _mm256_permute2f128_ps(v[2], v[6], 0x31));
    __m256 w37 = _mm256_add_ps(_mm256_permute2f128_ps(v[3], v[7], 0x20), _mm256_permute2f128_ps(v[3], v[7], 0x31));
    /* (t0 + t2, t1 + t3) of each */
    __m256 x0145 = _mm256_add_ps(_mm256_shuffle_ps(w04, w15, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(w04, w15, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 x2367 = _mm256_add_ps(_mm256_shuffle_ps(w26, w37, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(w26, w37, _MM_SHUFFLE(3, 2, 3, 2)));
    /* (t0 + t2) + (t1 + t3), in key order */
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(x0145, x2367, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(x0145, x2367, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out, r);
}

__attribute__((target("avx2,fma"))) static void dots_avx2(const float *a, const float *B, int64_t ldb, int64_t nb,
                                                          int64_t n, float *out)
{
    int64_t j = 0;
    /* no scalar tail: eight keys per horizontal reduction; the usual head
     * sizes get a constant n (loops unrolled) */
#define DOTS8(NCONST)                                                                      \
    for (; j + 8 <= nb; j += 8) {                                                          \
        __m256 v[8];                                                                       \
        for (int k = 0; k < 8; k++) v[k] = dot_acc_avx2(a, B + (j + k) * ldb, NCONST);     \
        hsum8_avx2(v, out + j);                                                            \
    }
    if (n == 16) {
        DOTS8(16)
    } else if (n == 32) {
        DOTS8(32)
    } else if (n == 64) {
        DOTS8(64)
    } else if (n % 8 == 0) {
        DOTS8(n)
    }
#undef DOTS8
    for (; j + 4 <= nb; j += 4) {
        const float *b0 = B + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        __m256 p0 = _mm256_setzero_ps(), q0 = _mm256_setzero_ps(), p1 = _mm256_setzero_ps(), q1 = _mm256_setzero_ps();
        __m256 p2 = _mm256_setzero_ps(), q2 = _mm256_setzero_ps(), p3 = _mm256_setzero_ps(), q3 = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m256 x0 = _mm256_loadu_ps(a + i), x1 = _mm256_loadu_ps(a + i + 8);
            p0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b0 + i), p0);
            q0 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b0 + i + 8), q0);
            p1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b1 + i), p1);
            q1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b1 + i + 8), q1);
            p2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b2 + i), p2);
            q2 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b2 + i + 8), q2);
            p3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b3 + i), p3);
            q3 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b3 + i + 8), q3);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 x0 = _mm256_loadu_ps(a + i);
            p0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b0 + i), p0);
            p1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b1 + i), p1);
            p2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b2 + i), p2);
            p3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b3 + i), p3);
        }
        float s0 = hsum256(_mm256_add_ps(p0, q0)), s1 = hsum256(_mm256_add_ps(p1, q1));
        float s2 = hsum256(_mm256_add_ps(p2, q2)), s3 = hsum256(_mm256_add_ps(p3, q3));
        for (; i < n; i++) {
            s0 += a[i] * b0[i];
            s1 += a[i] * b1[i];
            s2 += a[i] * b2[i];
            s3 += a[i] * b3[i];
        }
        out[j] = s0, out[j + 1] = s1, out[j + 2] = s2, out[j + 3] = s3;
    }
    for (; j < nb; j++) out[j] = dot_avx2(a, B + j * ldb, n);
}
#endif

void k_dots(const float *a, const float *B, int64_t ldb, int64_t nb, int64_t n, float *out)
{
#ifdef K_X86
    if (have_avx2()) {
        dots_avx2(a, B, ldb, nb, n, out);
        return;
    }
#endif
    for (int64_t j = 0; j < nb; j++) out[j] = k_dot(a, B + j * ldb, n);
}

float k_dot(const float *a, const float *b, int64_t n)
{
#ifdef K_X86
    if (have_avx2()) return dot_avx2(a, b, n);
#endif
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

void k_axpy(int64_t n, float a, const float *x, float *y)
{
#ifdef K_X86
    if (have_avx2()) {
        axpy_avx2(n, a, x, y);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ------------------------------------------------------------ GEMM blocking */

#define MR 6
#define NR 16
#define KC 256
#define MC 240 /* rows per L2 block of packed A (multiple of MR; 240 x KC floats = 240 KiB) */
#define NB 256 /* columns per task (multiple of NR) */

/* C[mr x nr] (+)= alpha * Ap(kc x MR)^T Bp(kc x NR); `acc` says whether to
 * add to C (else C is overwritten). */
static void ukr_c(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc, float alpha, int mr,
                  int nr, int store)
{
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *a = Ap + k * MR, *b = Bp + k * NR;
        for (int r = 0; r < MR; r++)
            for (int c = 0; c < NR; c++) acc[r][c] += a[r] * b[c];
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) C[r * ldc + c] = alpha * acc[r][c] + (store ? 0.0f : C[r * ldc + c]);
}

#ifdef K_X86
/* The micro-kernel for the last panel of 1-3 rows (M = 128 leaves 2):
 * the same FMA chain per element as ukr_avx2, without the 6-row work.
 * Row r's depth k is at ar[k * astep] (packed panel: astep MR). */
__attribute__((target("avx2,fma"))) static void ukr3_avx2(int64_t kc, const float *a0, const float *a1, const float *a2,
                                                          int64_t astep, const float *Bp, float *C, int64_t ldc,
                                                          float alpha, int mr, int nr, int store)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8), a;
        a = _mm256_broadcast_ss(a0 + k * astep);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(a1 + k * astep);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(a2 + k * astep);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        Bp += NR;
    }
    __m256 va = _mm256_set1_ps(alpha);
    __m256 rows[3][2] = {{c00, c01}, {c10, c11}, {c20, c21}};
    for (int r = 0; r < mr; r++) {
        float *c = C + r * ldc;
        if (nr == NR && store) {
            _mm256_storeu_ps(c, _mm256_mul_ps(va, rows[r][0]));
            _mm256_storeu_ps(c + 8, _mm256_mul_ps(va, rows[r][1]));
        } else if (nr == NR) {
            _mm256_storeu_ps(c, _mm256_fmadd_ps(va, rows[r][0], _mm256_loadu_ps(c)));
            _mm256_storeu_ps(c + 8, _mm256_fmadd_ps(va, rows[r][1], _mm256_loadu_ps(c + 8)));
        } else {
            float tmp[NR];
            _mm256_storeu_ps(tmp, rows[r][0]);
            _mm256_storeu_ps(tmp + 8, rows[r][1]);
            for (int x = 0; x < nr; x++) c[x] = alpha * tmp[x] + (store ? 0.0f : c[x]);
        }
    }
}
#endif

#ifdef K_X86
/* The micro-kernels' store: C[r][0, nr) = alpha * acc[r] (store) or
 * += alpha * acc[r], for r < mr. */
__attribute__((target("avx2,fma"), always_inline)) static inline void ukr_store_avx2(__m256 rows[][2], float *C,
                                                                                     int64_t ldc, float alpha,
                                                                                     int mr, int nr, int store)
{
    __m256 va = _mm256_set1_ps(alpha);
    if (nr == NR && store) {
        for (int r = 0; r < mr; r++) {
            float *c = C + r * ldc;
            _mm256_storeu_ps(c, _mm256_mul_ps(va, rows[r][0]));
            _mm256_storeu_ps(c + 8, _mm256_mul_ps(va, rows[r][1]));
        }
    } else if (nr == NR) {
        for (int r = 0; r < mr; r++) {
            float *c = C + r * ldc;
            _mm256_storeu_ps(c, _mm256_fmadd_ps(va, rows[r][0], _mm256_loadu_ps(c)));
            _mm256_storeu_ps(c + 8, _mm256_fmadd_ps(va, rows[r][1], _mm256_loadu_ps(c + 8)));
        }
    } else {
        float tmp[NR];
        for (int r = 0; r < mr; r++) {
            _mm256_storeu_ps(tmp, rows[r][0]);
            _mm256_storeu_ps(tmp + 8, rows[r][1]);
            for (int c = 0; c < nr; c++) C[r * ldc + c] = alpha * tmp[c] + (store ? 0.0f : C[r * ldc + c]);
        }
    }
}

__attribute__((target("avx2,fma"))) static void ukr_avx2(int64_t kc, const float *Ap, const float *Bp, float *C,
                                                         int64_t ldc, float alpha, int mr, int nr, int store)
{
    if (mr <= 3) {
        ukr3_avx2(kc, Ap, Ap + (mr > 1), Ap + (mr > 2) * 2, MR, Bp, C, ldc, alpha, mr, nr, store);
        return;
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8), a;
        a = _mm256_broadcast_ss(Ap);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(Ap + 1);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(Ap + 2);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(Ap + 3);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(Ap + 4);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(Ap + 5);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
        Ap += MR;
        Bp += NR;
    }
    __m256 rows[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    ukr_store_avx2(rows, C, ldc, alpha, mr, nr, store);
}
#endif

#ifdef K_X86
/* ukr_avx2 with A read in place: rows A, A + lda, ... (mr of them; the
 * others alias the first and are not stored), depth k at A[r * lda + k].
 * Same FMA chain per element as ukr_avx2 on the packed panel. */
__attribute__((target("avx2,fma"))) static void ukr_rows_avx2(int64_t kc, const float *A, int64_t lda,
                                                              const float *Bp, float *C, int64_t ldc, float alpha,
                                                              int mr, int nr, int store)
{
    if (mr <= 3) {
        ukr3_avx2(kc, A, A + (mr > 1 ? lda : 0), A + (mr > 2 ? 2 * lda : 0), 1, Bp, C, ldc, alpha, mr, nr, store);
        return;
    }
    const float *a0 = A, *a1 = A + (mr > 1 ? lda : 0), *a2 = A + (mr > 2 ? 2 * lda : 0),
                *a3 = A + (mr > 3 ? 3 * lda : 0), *a4 = A + (mr > 4 ? 4 * lda : 0), *a5 = A + (mr > 5 ? 5 * lda : 0);
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8), a;
        a = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(a1 + k);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(a2 + k);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(a3 + k);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(a4 + k);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(a5 + k);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
        Bp += NR;
    }
    __m256 rows[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    ukr_store_avx2(rows, C, ldc, alpha, mr, nr, store);
}
#endif

typedef struct gemm_job {
    int transA, transB;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
    const float *Apack; /* all of A, packed; NULL: the micro-kernel reads A in place (row-major, AVX2) */
    const float *Bpre;  /* all of B, prepacked (k_bpack layout) or NULL */
    const uint16_t *Bpre16; /* ... or prepacked in 16 bits (dtype hdt), widened a slice at a time */
    int hdt;
    int64_t Np;         /* prepacked B: columns padded to NR */
    int64_t nbw, n_nblocks, n_mchunks, mchunk; /* column block width, blocks, row chunks */
    _Atomic int nomem; /* a task could not allocate its B panel scratch */
} gemm_job;

static _Thread_local k_buf tl_apack, tl_bpack;

/* Packs A rows [m0, m1) (m0 a multiple of MR) x depth [k0, k0+kc) into
 * MR-row panels (zero-padded); dst is the slice's start. */
static void pack_a(const gemm_job *j, int64_t k0, int64_t kc, int64_t m0, int64_t m1, float *dst)
{
    dst += m0 * kc;
    for (int64_t i0 = m0; i0 < m1; i0 += MR) {
        int mr = (int)(j->M - i0 < MR ? j->M - i0 : MR);
        if (!j->transA && mr == MR) { /* six row streams, no branch per element */
            const float *r0 = j->A + i0 * j->lda + k0, *r1 = r0 + j->lda, *r2 = r1 + j->lda, *r3 = r2 + j->lda,
                        *r4 = r3 + j->lda, *r5 = r4 + j->lda;
            for (int64_t k = 0; k < kc; k++) {
                float *d = dst + k * MR;
                d[0] = r0[k], d[1] = r1[k], d[2] = r2[k], d[3] = r3[k], d[4] = r4[k], d[5] = r5[k];
            }
            dst += kc * MR;
            continue;
        }
        for (int64_t k = 0; k < kc; k++) {
            float *d = dst + k * MR;
            for (int r = 0; r < mr; r++)
                d[r] = j->transA ? j->A[(k0 + k) * j->lda + i0 + r] : j->A[(i0 + r) * j->lda + k0 + k];
            for (int r = mr; r < MR; r++) d[r] = 0;
        }
        dst += kc * MR;
    }
}

/* One MR-row panel of A, every depth slice (into j->Apack). */
static void pack_a_task(void *ctx, int64_t t)
{
    const gemm_job *j = ctx;
    int64_t Mp = (j->M + MR - 1) / MR * MR, m0 = t * MR, m1 = m0 + MR < j->M ? m0 + MR : j->M;
    for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
        int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
        pack_a(j, k0, kc, m0, m1, (float *)j->Apack + k0 * Mp);
    }
}

/* Packs B depth [k0, k0+kc) x columns [n0, n0+nb) into NR-column panels.
 * Untransposed B is read row by row (one contiguous run of nb floats per
 * depth step, the next rows prefetched): the weights stream from memory
 * here, so the access pattern decides the cost. */
#define PF_ROWS 6
static void pack_b(const gemm_job *j, int64_t k0, int64_t kc, int64_t n0, int64_t nb, float *dst)
{
    int64_t full = nb / NR * NR;
    if (!j->transB) {
        for (int64_t k = 0; k < kc; k++) {
            const float *src = j->B + (k0 + k) * j->ldb + n0;
            float *d = dst + k * NR;
            if (k + PF_ROWS < kc)
                for (int64_t c0 = 0; c0 < nb; c0 += NR) __builtin_prefetch(src + PF_ROWS * j->ldb + c0, 0, 0);
            for (int64_t c0 = 0; c0 < full; c0 += NR) memcpy(d + c0 * kc, src + c0, NR * sizeof(float));
            if (full < nb) {
                float *t = d + full * kc;
                int64_t nr = nb - full;
                memcpy(t, src + full, (size_t)nr * sizeof(float));
                memset(t + nr, 0, (size_t)(NR - nr) * sizeof(float));
            }
        }
        return;
    }
    for (int64_t c0 = 0; c0 < nb; c0 += NR) {
        int nr = (int)(nb - c0 < NR ? nb - c0 : NR);
        for (int c = 0; c < nr; c++) {
            const float *src = j->B + (n0 + c0 + c) * j->ldb + k0;
            for (int64_t k = 0; k < kc; k++) dst[k * NR + c] = src[k];
        }
        for (int c = nr; c < NR; c++)
            for (int64_t k = 0; k < kc; k++) dst[k * NR + c] = 0;
        dst += kc * NR;
    }
}

static void gemm_task(void *ctx, int64_t t)
{
    gemm_job *j = ctx;
    int64_t nbi = t % j->n_nblocks, mci = t / j->n_nblocks;
    int64_t n0 = nbi * j->nbw, nb = j->N - n0 < j->nbw ? j->N - n0 : j->nbw;
    int64_t m_lo = mci * j->mchunk, m_hi = m_lo + j->mchunk < j->M ? m_lo + j->mchunk : j->M;
    /* beta (beta == 0: the first depth slice stores C without reading it) */
    if (j->beta != 0 && j->beta != 1)
        for (int64_t i = m_lo; i < m_hi; i++) {
            float *c = j->C + i * j->ldc + n0;
            for (int64_t x = 0; x < nb; x++) c[x] *= j->beta;
        }
    int64_t nbp = (nb + NR - 1) / NR * NR;
    float *Bp = NULL;
    if (j->Bpre16) { /* one panel at a time, widened into L1 right before its micro-kernel calls */
        Bp = k_buf_get(&tl_bpack, (size_t)(KC * NR) * sizeof(float));
        if (!Bp) {
            j->nomem = 1;
            return;
        }
    } else if (!j->Bpre) {
        Bp = k_buf_get(&tl_bpack, (size_t)(KC * nbp) * sizeof(float));
        if (!Bp) {
            j->nomem = 1;
            return;
        }
    }
    int64_t Mp = (j->M + MR - 1) / MR * MR;
#ifdef K_X86
    int simd = have_avx2();
#endif
    for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
        int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
        if (j->Bpre) Bp = (float *)j->Bpre + k0 * j->Np + n0 * kc;
        else if (!j->Bpre16) pack_b(j, k0, kc, n0, nb, Bp);
        const float *Ablk = j->Apack ? j->Apack + k0 * Mp : NULL; /* slice k0: Mp x kc, panels of MR */
        for (int64_t mb = m_lo; mb < m_hi; mb += MC) {
            int64_t me = mb + MC < m_hi ? mb + MC : m_hi;
            int store = k0 == 0 && j->beta == 0;
            for (int64_t c0 = 0; c0 < nb; c0 += NR) {
                int nr = (int)(nb - c0 < NR ? nb - c0 : NR);
                const float *bp = Bp + (c0 / NR) * kc * NR;
                /* the next B panel (prepacked: from memory) is prefetched
                 * a slice per micro-kernel call while this one runs */
                const char *pf = (const char *)(bp + kc * NR);
                int64_t pf_lines = c0 + NR < nb ? kc * NR * 4 / 64 : 0, npan = (me - mb + MR - 1) / MR;
                if (j->Bpre16) { /* this panel widened (L1), the next 16-bit one prefetched */
                    const uint16_t *src = j->Bpre16 + k0 * j->Np + (n0 + c0) * kc;
                    k_to_f32(j->hdt, src, Bp, (size_t)(kc * NR));
                    bp = Bp;
                    pf = (const char *)(src + kc * NR);
                    pf_lines = c0 + NR < nb ? kc * NR * 2 / 64 : 0;
                }
                int64_t pf_per = (pf_lines + npan - 1) / npan, pf_at = 0;
                for (int64_t i0 = mb; i0 < me; i0 += MR) {
                    int mr = (int)(me - i0 < MR ? me - i0 : MR);
                    float *c = j->C + i0 * j->ldc + n0 + c0;
                    for (int64_t l = 0; l < pf_per && pf_at < pf_lines; l++, pf_at++)
                        __builtin_prefetch(pf + pf_at * 64, 0, 3);
#ifdef K_X86
                    if (!Ablk) {
                        ukr_rows_avx2(kc, j->A + i0 * j->lda + k0, j->lda, bp, c, j->ldc, j->alpha, mr, nr, store);
                        continue;
                    }
#endif
                    const float *ap = Ablk + (i0 / MR) * kc * MR;
#ifdef K_X86
                    if (simd) ukr_avx2(kc, ap, bp, c, j->ldc, j->alpha, mr, nr, store);
                    else
#endif
                        ukr_c(kc, ap, bp, c, j->ldc, j->alpha, mr, nr, store);
                }
            }
        }
    }
}

/* ------------------------------------------------------------ GEMV (M == 1) */

typedef struct gemv_job {
    int64_t N, K, ldb, chunk, ncb, kch;
    float *partial;
    float alpha, beta;
    const float *x, *B;
    float *y;
} gemv_job;

#ifdef K_X86
/* y[0..n) = sum_k x[k] * B[k*ldb + 0..n), B rows streamed four at a time */
__attribute__((target("avx2,fma"))) static void gemv_n_avx2(const float *x, const float *B, int64_t ldb,
                                                            int64_t K, int64_t n, float *y)
{
    memset(y, 0, (size_t)n * sizeof(float));
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        const float *b0 = B + k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        __m256 x0 = _mm256_set1_ps(x[k]), x1 = _mm256_set1_ps(x[k + 1]);
        __m256 x2 = _mm256_set1_ps(x[k + 2]), x3 = _mm256_set1_ps(x[k + 3]);
        int64_t c = 0;
        for (; c + 8 <= n; c += 8) {
            __m256 acc = _mm256_loadu_ps(y + c);
            acc = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b0 + c), acc);
            acc = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b1 + c), acc);
            acc = _mm256_fmadd_ps(x2, _mm256_loadu_ps(b2 + c), acc);
            acc = _mm256_fmadd_ps(x3, _mm256_loadu_ps(b3 + c), acc);
            _mm256_storeu_ps(y + c, acc);
        }
        for (; c < n; c++) y[c] += x[k] * b0[c] + x[k + 1] * b1[c] + x[k + 2] * b2[c] + x[k + 3] * b3[c];
    }
    for (; k < K; k++) axpy_avx2(n, x[k], B + k * ldb, y);
}

/* y[r] = dot(x, B[r*ldb .. +K)) for r in [0, n) */
__attribute__((target("avx2,fma"))) static void gemv_t_avx2(const float *x, const float *B, int64_t ldb,
                                                            int64_t K, int64_t n, float *y)
{
    int64_t r = 0;
    for (; r + 4 <= n; r += 4) {
        const float *b0 = B + r * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            __m256 xv = _mm256_loadu_ps(x + k);
            s0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + k), s0);
            s1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1 + k), s1);
            s2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2 + k), s2);
            s3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3 + k), s3);
        }
        float t0 = hsum256(s0), t1 = hsum256(s1), t2 = hsum256(s2), t3 = hsum256(s3);
        for (; k < K; k++) {
            t0 += x[k] * b0[k];
            t1 += x[k] * b1[k];
            t2 += x[k] * b2[k];
            t3 += x[k] * b3[k];
        }
        y[r] = t0;
        y[r + 1] = t1;
        y[r + 2] = t2;
        y[r + 3] = t3;
    }
    for (; r < n; r++) y[r] = dot_avx2(x, B + r * ldb, K);
}
#endif

/* Task (column block, depth part): partial[part][cols] = x[k-range] * B[k-range, cols]. */
static void gemv_n_task(void *ctx, int64_t t)
{
    const gemv_job *j = ctx;
    int64_t cb = t % j->ncb, kp = t / j->ncb;
    int64_t c0 = cb * j->chunk, n = j->N - c0 < j->chunk ? j->N - c0 : j->chunk;
    int64_t k0 = kp * j->kch, k1 = k0 + j->kch < j->K ? k0 + j->kch : j->K;
    float *y = j->partial + kp * j->N + c0;
    const float *B = j->B + k0 * j->ldb + c0, *x = j->x + k0;
    if (k1 <= k0) {
        memset(y, 0, (size_t)n * sizeof(float));
        return;
    }
#ifdef K_X86
    if (have_avx2()) {
        gemv_n_avx2(x, B, j->ldb, k1 - k0, n, y);
        return;
    }
#endif
    memset(y, 0, (size_t)n * sizeof(float));
    for (int64_t k = 0; k < k1 - k0; k++) {
        const float *b = B + k * j->ldb;
        float xk = x[k];
        for (int64_t c = 0; c < n; c++) y[c] += xk * b[c];
    }
}

static void gemv_t_task(void *ctx, int64_t t)
{
    const gemv_job *j = ctx;
    int64_t r0 = t * j->chunk, n = j->N - r0 < j->chunk ? j->N - r0 : j->chunk;
    float tmp[1024];
    RT_ASSERT(n <= 1024);
#ifdef K_X86
    if (have_avx2()) {
        gemv_t_avx2(j->x, j->B + r0 * j->ldb, j->ldb, j->K, n, tmp);
    } else
#endif
        for (int64_t r = 0; r < n; r++) tmp[r] = k_dot(j->x, j->B + (r0 + r) * j->ldb, j->K);
    float *y = j->y + r0;
    for (int64_t c = 0; c < n; c++) y[c] = j->alpha * tmp[c] + (j->beta == 0 ? 0 : j->beta * y[c]);
}

static _Thread_local k_buf tl_x, tl_part;

static int sgemv(int transA, int transB, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C)
{
    const float *x = A;
    if (transA && lda != 1) { /* A is K x 1 with row stride lda: gather */
        float *g = k_buf_get(&tl_x, (size_t)K * sizeof(float));
        if (!g) return -1;
        for (int64_t k = 0; k < K; k++) g[k] = A[k * lda];
        x = g;
    }
    gemv_job j = {N, K, ldb, 0, 0, 0, NULL, alpha, beta, x, B, C};
    int th = k_threads();
    double work = (double)N * (double)K;
    int64_t parts = work < 65536 ? 1 : th * 4;
    if (!transB) {
        /* B streams row by row: column blocks of <= 4096 (the partial sums
         * stay in L1), depth split in parts when there are few blocks;
         * each (block, part) writes its own partial row, summed after */
        int64_t ch = N < 4096 ? N : 4096, ncb = (N + ch - 1) / ch;
        int64_t kparts = work < 65536 ? 1 : (2 * th + ncb - 1) / ncb;
        if (kparts > K / 64) kparts = K / 64 > 1 ? K / 64 : 1;
        int64_t kch = (K + kparts - 1) / kparts;
        kch = (kch + 3) / 4 * 4;
        kparts = (K + kch - 1) / kch;
        float *part = k_buf_get(&tl_part, (size_t)(kparts * N) * sizeof(float));
        if (!part) return -1;
        j.chunk = ch, j.ncb = ncb, j.kch = kch, j.partial = part;
        k_parallel_for(ncb * kparts, gemv_n_task, &j);
        for (int64_t c = 0; c < N; c++) {
            float acc = part[c];
            for (int64_t p = 1; p < kparts; p++) acc += part[p * N + c];
            C[c] = alpha * acc + (beta == 0 ? 0 : beta * C[c]);
        }
    } else {
        int64_t ch = (N + parts - 1) / parts;
        ch = (ch + 3) / 4 * 4;
        if (ch < 4) ch = 4;
        if (ch > 1024) ch = 1024;
        j.chunk = ch;
        k_parallel_for((N + ch - 1) / ch, gemv_t_task, &j);
    }
    return 0;
}

/* The blocked GEMM (M > 1): B either packed per task from B, or prepacked
 * (k_bpack layout, Np): Bpre in fp32 or Bpre16 in 16 bits (dtype hdt). */
static int gemm_blocked(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                        const float *Bpre, const uint16_t *Bpre16, int hdt, int64_t Np)
{
    gemm_job j = {transA, transB, M, N, K, alpha, beta, A, B, lda, ldb, ldc, C, NULL, Bpre, Bpre16, hdt, Np,
                  0, 0, 0, 0, 0};
    int64_t Mp = (M + MR - 1) / MR * MR;
    /* A read in place by the micro-kernel when small (measured: +13% on
     * 128 x 64 products; packing wins on 128 x 768 and larger) */
    if (transA || !have_avx2() || (double)M * (double)K > 65536) {
        if ((double)Mp * (double)K * sizeof(float) > (double)SIZE_MAX / 2) return -1;
        float *Ap = k_buf_get(&tl_apack, (size_t)(Mp * K) * sizeof(float));
        if (!Ap) return -1;
        j.Apack = Ap;
        if ((double)M * (double)K >= 32768 && k_threads() > 1) {
            k_parallel_for(Mp / MR, pack_a_task, &j);
        } else {
            for (int64_t k0 = 0; k0 < K; k0 += KC) {
                int64_t kc = K - k0 < KC ? K - k0 : KC;
                pack_a(&j, k0, kc, 0, M, Ap + k0 * Mp);
            }
        }
    }
    int th = k_threads();
    double work = (double)M * (double)N * (double)K;
    /* column blocks of at most NB, narrower when that gives each thread
     * about four (the pool hands tasks out dynamically, so small tasks
     * even out both ragged shapes and a core taken by another process) */
    int64_t panels = (N + NR - 1) / NR, want = work > 1e5 && th > 1 ? 4 * (int64_t)th : 1;
    int64_t per = (panels + want - 1) / want;
    if (per * NR > NB) per = NB / NR;
    if (per < 4 && panels >= 4) per = 4;
    if (per < 1) per = 1;
    j.nbw = per * NR;
    j.n_nblocks = (N + j.nbw - 1) / j.nbw;
    j.mchunk = M;
    j.n_mchunks = 1;
    if (work > 1e5 && th > 1 && j.n_nblocks < 2 * th && M > MC) {
        int64_t wantm = (2 * th + j.n_nblocks - 1) / j.n_nblocks;
        int64_t ch = (M + wantm - 1) / wantm;
        ch = (ch + MR - 1) / MR * MR;
        if (ch < MC) ch = MC;
        j.mchunk = ch;
        j.n_mchunks = (M + ch - 1) / ch;
    } else if (work > 1e5 && th > 1 && j.n_nblocks < th && M >= 4 * MR * th) {
        /* too few columns to share (a 128 x 32 projection): one row chunk a thread */
        int64_t ch = (M + th - 1) / th;
        ch = (ch + MR - 1) / MR * MR;
        j.mchunk = ch;
        j.n_mchunks = (M + ch - 1) / ch;
    }
    int64_t tasks = j.n_nblocks * j.n_mchunks;
    if (work <= 1e5) {
        for (int64_t t = 0; t < tasks; t++) gemm_task(&j, t);
    } else {
        k_parallel_for(tasks, gemm_task, &j);
    }
    return j.nomem ? -1 : 0;
}


int k_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
            int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t x = 0; x < N; x++) C[i * ldc + x] = beta == 0 ? 0 : beta * C[i * ldc + x];
        return 0;
    }
    if (M == 1) return sgemv(transA, transB, N, K, alpha, A, lda, B, ldb, beta, C);
    return gemm_blocked(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL, 0, 0);
}

/* ------------------------------------------------------------ prepacked B */

/* Layout: depth slices of KC; slice k0 (kc deep) holds Np/NR panels of
 * kc x NR floats (columns past N zero), at Bp + k0 * Np + panel * kc * NR. */
static int bpack_set(k_bpack *pb, const float *p, const uint16_t *h, int hdt, int64_t K, int64_t N, int64_t Np)
{
    pb->p = p;
    pb->h = h;
    pb->hdt = hdt;
    pb->K = K;
    pb->N = N;
    pb->Np = Np;
    return 1;
}

/* Packing rows [k, k + PACK_ROWS) of B per task: each row lands in its
 * depth slice's panels, disjoint from every other row's. */
#define PACK_ROWS 64
typedef struct bpack_job {
    int dtype, half;
    const void *B;
    void *dst;
    int64_t K, N, Np;
} bpack_job;

static void bpack_rows(void *ctx, int64_t t)
{
    const bpack_job *j = ctx;
    size_t es = rt_dtype_size(j->dtype);
    int64_t r0 = t * PACK_ROWS, r1 = r0 + PACK_ROWS < j->K ? r0 + PACK_ROWS : j->K;
    for (int64_t r = r0; r < r1; r++) {
        int64_t k0 = r / KC * KC, k = r - k0, kc = j->K - k0 < KC ? j->K - k0 : KC;
        const char *src = (const char *)j->B + (size_t)(r * j->N) * es;
        for (int64_t c0 = 0; c0 < j->N; c0 += NR) {
            int64_t nr = j->N - c0 < NR ? j->N - c0 : NR;
            if (j->half) { /* the 16 bits as they are */
                uint16_t *d = (uint16_t *)j->dst + k0 * j->Np + c0 * kc + k * NR;
                memcpy(d, src + (size_t)c0 * es, (size_t)nr * sizeof(uint16_t));
                memset(d + nr, 0, (size_t)(NR - nr) * sizeof(uint16_t)); /* +0.0 in both */
            } else {
                float row[NR];
                k_to_f32(j->dtype, src + (size_t)c0 * es, row, (size_t)nr);
                for (int64_t c = nr; c < NR; c++) row[c] = 0.0f;
                memcpy((float *)j->dst + k0 * j->Np + c0 * kc + k * NR, row, sizeof row);
            }
        }
    }
}

int k_bpack_init(k_bpack *pb, int dtype, const void *B, int64_t K, int64_t N)
{
    int64_t Np = (N + NR - 1) / NR * NR;
    if (!k_is_float(dtype)) return 0;
    int half = (dtype == GRAFT_DTYPE_FLOAT16 || dtype == GRAFT_DTYPE_BFLOAT16) && have_f16c();
    void *dst = k_buf_get(&pb->buf, (size_t)(K * Np) * (half ? sizeof(uint16_t) : sizeof(float)));
    if (!dst) return 0;
    bpack_job j = {dtype, half, B, dst, K, N, Np};
    int64_t tasks = (K + PACK_ROWS - 1) / PACK_ROWS;
    if ((double)K * (double)N >= 1 << 20) k_parallel_for(tasks, bpack_rows, &j); /* weights stream from memory */
    else
        for (int64_t t = 0; t < tasks; t++) bpack_rows(&j, t);
    return half ? bpack_set(pb, NULL, dst, dtype, K, N, Np) : bpack_set(pb, dst, NULL, 0, K, N, Np);
}

int k_bpack_init_t(k_bpack *pb, const float *Bt, int64_t K, int64_t N)
{
    int64_t Np = (N + NR - 1) / NR * NR;
    if ((double)K * (double)Np * sizeof(float) > (double)SIZE_MAX / 2) return 0;
    float *p = k_buf_get(&pb->buf, (size_t)(K * Np) * sizeof(float));
    if (!p) return 0;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t c0 = 0; c0 < N; c0 += NR) {
            int64_t nr = N - c0 < NR ? N - c0 : NR;
            float *d = p + k0 * Np + c0 * kc;
            for (int64_t c = 0; c < NR; c++) {
                const float *src = Bt + (c0 + c) * K + k0;
                for (int64_t k = 0; k < kc; k++) d[k * NR + c] = c < nr ? src[k] : 0.0f;
            }
        }
    }
    return bpack_set(pb, p, NULL, 0, K, N, Np);
}

void k_bpack_free(k_bpack *pb)
{
    k_buf_free(&pb->buf);
    pb->p = NULL;
    pb->h = NULL;
    pb->K = pb->N = pb->Np = 0;
}

typedef struct pgemv_job {
    const float *x, *P;
    float *y;
    int64_t K, N, Np, per; /* panels per task */
    const uint16_t *H;     /* 16-bit panels (dtype hdt) instead of P, or NULL */
    int hdt;
} pgemv_job;

#ifdef K_X86
/* y[panels p0 .. p1) = x * P for the prepacked layout, four panels at a time */
__attribute__((target("avx2,fma"))) static void pgemv_avx2(const pgemv_job *j, int64_t p0, int64_t p1, float *y)
{
    int64_t p = p0;
    for (; p + 4 <= p1; p += 4) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        __m256 a4 = _mm256_setzero_ps(), a5 = _mm256_setzero_ps(), a6 = _mm256_setzero_ps(), a7 = _mm256_setzero_ps();
        for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
            int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
            const float *b0 = j->P + k0 * j->Np + p * kc * NR, *b1 = b0 + kc * NR, *b2 = b1 + kc * NR,
                        *b3 = b2 + kc * NR, *x = j->x + k0;
            for (int64_t k = 0; k < kc; k++) {
                __m256 xv = _mm256_broadcast_ss(x + k);
                a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0), a0);
                a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + 8), a1);
                a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1), a2);
                a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1 + 8), a3);
                a4 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2), a4);
                a5 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2 + 8), a5);
                a6 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3), a6);
                a7 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3 + 8), a7);
                b0 += NR, b1 += NR, b2 += NR, b3 += NR;
            }
        }
        float *o = y + (p - p0) * NR;
        _mm256_storeu_ps(o, a0), _mm256_storeu_ps(o + 8, a1), _mm256_storeu_ps(o + 16, a2);
        _mm256_storeu_ps(o + 24, a3), _mm256_storeu_ps(o + 32, a4), _mm256_storeu_ps(o + 40, a5);
        _mm256_storeu_ps(o + 48, a6), _mm256_storeu_ps(o + 56, a7);
    }
    for (; p < p1; p++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
            int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
            const float *b0 = j->P + k0 * j->Np + p * kc * NR, *x = j->x + k0;
            for (int64_t k = 0; k < kc; k++, b0 += NR) {
                __m256 xv = _mm256_broadcast_ss(x + k);
                a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0), a0);
                a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + 8), a1);
            }
        }
        _mm256_storeu_ps(y + (p - p0) * NR, a0);
        _mm256_storeu_ps(y + (p - p0) * NR + 8, a1);
    }
}
#endif

#ifdef K_X86
/* pgemv_avx2 on 16-bit panels: the same FMA chain on the same widened values. */
#define PGEMV16(NAME, LOAD)                                                                                    \
    __attribute__((target("avx2,fma,f16c"))) static void NAME(const pgemv_job *j, int64_t p0, int64_t p1,      \
                                                              float *y)                                        \
    {                                                                                                          \
        int64_t p = p0;                                                                                        \
        for (; p + 4 <= p1; p += 4) {                                                                          \
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),               \
                   a3 = _mm256_setzero_ps(), a4 = _mm256_setzero_ps(), a5 = _mm256_setzero_ps(),               \
                   a6 = _mm256_setzero_ps(), a7 = _mm256_setzero_ps();                                         \
            for (int64_t k0 = 0; k0 < j->K; k0 += KC) {                                                        \
                int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;                                                  \
                const uint16_t *b0 = j->H + k0 * j->Np + p * kc * NR, *b1 = b0 + kc * NR, *b2 = b1 + kc * NR,  \
                               *b3 = b2 + kc * NR;                                                             \
                const float *x = j->x + k0;                                                                    \
                for (int64_t k = 0; k < kc; k++) {                                                             \
                    __m256 xv = _mm256_broadcast_ss(x + k);                                                    \
                    a0 = _mm256_fmadd_ps(xv, LOAD(b0), a0);                                                    \
                    a1 = _mm256_fmadd_ps(xv, LOAD(b0 + 8), a1);                                                \
                    a2 = _mm256_fmadd_ps(xv, LOAD(b1), a2);                                                    \
                    a3 = _mm256_fmadd_ps(xv, LOAD(b1 + 8), a3);                                                \
                    a4 = _mm256_fmadd_ps(xv, LOAD(b2), a4);                                                    \
                    a5 = _mm256_fmadd_ps(xv, LOAD(b2 + 8), a5);                                                \
                    a6 = _mm256_fmadd_ps(xv, LOAD(b3), a6);                                                    \
                    a7 = _mm256_fmadd_ps(xv, LOAD(b3 + 8), a7);                                                \
                    b0 += NR, b1 += NR, b2 += NR, b3 += NR;                                                    \
                }                                                                                              \
            }                                                                                                  \
            float *o = y + (p - p0) * NR;                                                                      \
            _mm256_storeu_ps(o, a0), _mm256_storeu_ps(o + 8, a1), _mm256_storeu_ps(o + 16, a2);                \
            _mm256_storeu_ps(o + 24, a3), _mm256_storeu_ps(o + 32, a4), _mm256_storeu_ps(o + 40, a5);          \
            _mm256_storeu_ps(o + 48, a6), _mm256_storeu_ps(o + 56, a7);                                        \
        }                                                                                                      \
        for (; p < p1; p++) {                                                                                  \
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                                         \
            for (int64_t k0 = 0; k0 < j->K; k0 += KC) {                                                        \
                int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;                                                  \
                const uint16_t *b0 = j->H + k0 * j->Np + p * kc * NR;                                          \
                const float *x = j->x + k0;                                                                    \
                for (int64_t k = 0; k < kc; k++, b0 += NR) {                                                   \
                    __m256 xv = _mm256_broadcast_ss(x + k);                                                    \
                    a0 = _mm256_fmadd_ps(xv, LOAD(b0), a0);                                                    \
                    a1 = _mm256_fmadd_ps(xv, LOAD(b0 + 8), a1);                                                \
                }                                                                                              \
            }                                                                                                  \
            _mm256_storeu_ps(y + (p - p0) * NR, a0);                                                           \
            _mm256_storeu_ps(y + (p - p0) * NR + 8, a1);                                                       \
        }                                                                                                      \
    }
#define LD_F16(q) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q)))
#define LD_BF16(q) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(q))), 16))
PGEMV16(pgemv_f16_avx2, LD_F16)
PGEMV16(pgemv_bf16_avx2, LD_BF16)
#undef LD_F16
#undef LD_BF16
#undef PGEMV16
#endif

static void pgemv_task(void *ctx, int64_t t)
{
    const pgemv_job *j = ctx;
    int64_t p0 = t * j->per, p1 = p0 + j->per < j->Np / NR ? p0 + j->per : j->Np / NR;
    float tmp[8 * NR];
    for (int64_t q0 = p0; q0 < p1; q0 += 8) {
        int64_t q1 = q0 + 8 < p1 ? q0 + 8 : p1;
#ifdef K_X86
        if (j->H && have_f16c()) {
            if (j->hdt == GRAFT_DTYPE_FLOAT16) pgemv_f16_avx2(j, q0, q1, tmp);
            else pgemv_bf16_avx2(j, q0, q1, tmp);
        } else if (!j->H && have_avx2()) {
            pgemv_avx2(j, q0, q1, tmp);
        } else
#endif
        {
            memset(tmp, 0, sizeof tmp);
            float wide[NR];
            for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
                int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
                for (int64_t q = q0; q < q1; q++) {
                    float *o = tmp + (q - q0) * NR;
                    for (int64_t k = 0; k < kc; k++) {
                        const float *b = j->P ? j->P + k0 * j->Np + q * kc * NR + k * NR : wide;
                        if (!j->P) k_to_f32(j->hdt, j->H + k0 * j->Np + q * kc * NR + k * NR, wide, NR);
                        for (int c = 0; c < NR; c++) o[c] += j->x[k0 + k] * b[c];
                    }
                }
            }
        }
        int64_t c0 = q0 * NR, n = (q1 * NR < j->N ? q1 * NR : j->N) - c0;
        memcpy(j->y + c0, tmp, (size_t)n * sizeof(float));
    }
}

int k_sgemm_packed(int64_t M, const float *A, int64_t lda, const k_bpack *pb, float *C, int64_t ldc)
{
    if (M <= 0 || pb->N <= 0) return 0;
    if (pb->K <= 0) {
        for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)pb->N * sizeof(float));
        return 0;
    }
    if (M > 1)
        return gemm_blocked(0, 0, M, pb->N, pb->K, 1.0f, A, lda, NULL, 0, 0.0f, C, ldc, pb->p, pb->h, pb->hdt, pb->Np);
    pgemv_job j = {A, pb->p, C, pb->K, pb->N, pb->Np, 0, pb->h, pb->hdt};
    int64_t panels = pb->Np / NR, th = k_threads();
    double work = (double)pb->K * (double)pb->N;
    int64_t tasks = work < 65536 || th <= 1 ? 1 : 4 * th;
    j.per = (panels + tasks - 1) / tasks;
    j.per = (j.per + 3) / 4 * 4;
    tasks = (panels + j.per - 1) / j.per;
    k_parallel_for(tasks, pgemv_task, &j);
    return 0;
}

/* ------------------------------------------------------------ kernel scratch */

graft_status k_scratch_init(rt_node *n, graft_error *err)
{
    if (!(n->state = calloc(1, sizeof(k_scratch)))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    return GRAFT_OK;
}

void k_scratch_fini(rt_node *n)
{
    k_scratch *s = n->state;
    if (!s) return;
    for (int i = 0; i < K_SCRATCH_BUFS; i++) k_buf_free(&s->b[i]);
    free(s);
    n->state = NULL;
}

void *k_scratch_get(rt_node *n, int i, size_t bytes, graft_error *err)
{
    k_scratch *s = n->state;
    RT_ASSERT(s && i >= 0 && i < K_SCRATCH_BUFS);
    s->key[i] = NULL;
    void *p = k_buf_get(&s->b[i], bytes);
    if (!p) rt_err(n, err, GRAFT_ENOMEM, "out of memory for %zu bytes of scratch", bytes);
    return p;
}

int k_input_is_const(const rt_node *n, int i)
{
    if (i >= n->n_in) return 0;
    const char *name = graft_node_input(n->src, (size_t)i);
    return *name && graft_graph_find_initializer(n->g, name) != NULL;
}

float *k_out_f32(rt_node *n, rt_tensor *o, int buf, graft_error *err)
{
    if (o->dtype == GRAFT_DTYPE_FLOAT) return o->data;
    return k_scratch_get(n, buf, (size_t)o->numel * sizeof(float) + 4, err);
}

void k_out_f32_done(rt_tensor *o, const float *f)
{
    if (o->dtype != GRAFT_DTYPE_FLOAT) k_from_f32_par(o->dtype, f, o->data, (size_t)o->numel);
}

const float *k_input_f32(rt_node *n, int i, int buf, graft_error *err)
{
    rt_tensor *t = rt_in(n, i);
    if (!t) {
        rt_err(n, err, GRAFT_EINVAL, "missing input %d", i);
        return NULL;
    }
    if (t->dtype == GRAFT_DTYPE_FLOAT) return t->data;
    if (!k_is_float(t->dtype)) {
        rt_err(n, err, GRAFT_EUNSUPPORTED, "input %d has dtype %s", i, graft_dtype_name(t->dtype));
        return NULL;
    }
    k_scratch *s = n->state;
    int cached = k_input_is_const(n, i);
    if (cached && s->key[buf] == t->data && s->key_bytes[buf] == t->nbytes) return s->b[buf].p;
    s->key[buf] = NULL;
    float *d = k_scratch_get(n, buf, (size_t)t->numel * sizeof(float), err);
    if (!d) return NULL;
    k_to_f32_par(t->dtype, t->data, d, (size_t)t->numel);
    if (cached) {
        s->key[buf] = t->data;
        s->key_bytes[buf] = t->nbytes;
    }
    return d;
}
