/* Kernel lab check for kernels/cuda: every kernel against a CPU reference
 * (fp64, written here from the ONNX / com.microsoft semantics the CPU
 * kernels implement) on fresh random inputs, several shapes, fp32, fp16
 * and bf16. Outputs are poisoned with NaN before each run; the check counts
 * non-finite outputs first, then takes the normalised error
 * max|gpu - ref| / max|ref| against a threshold per dtype. Then (without
 * --quick) the bandwidth of the decode GEMV and flash-decoding attention
 * against a device-to-device copy measured in the same run.
 *
 *   test_kernels [--quick]     exit 0 when every check passes, or when
 *                              there is no CUDA device (a skip line)
 *   test_kernels --skeleton    only the E2B decode step's GEMVs chained in a
 *                              CUDA graph (skeleton): no checks
 *   test_kernels --epi         only the fused GEMV variants of E2B's shapes
 *                              timed against the plain GEMV: no checks
 *   test_kernels --attn        only the attention at E2B's short context, its
 *                              norms apart or made by it: no checks */
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/gcuda.h"
#include "kernels/cuda/gcuda_common.cuh" /* gc_div_r (test_div_r) */
#include "kernels/cuda/gcuda_ops.h"

static graft_error E;

static void die(int line, const char *what)
{
    fprintf(stderr, "test_kernels.cu:%d: %s failed: %s\n", line, what, E.msg);
    exit(1);
}
#define CK(call)                                    \
    do {                                            \
        if ((call) != GRAFT_OK) die(__LINE__, #call); \
    } while (0)
#define CUCK(call)                                                                       \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            snprintf(E.msg, sizeof E.msg, "%s", cudaGetErrorString(e_));                 \
            die(__LINE__, #call);                                                        \
        }                                                                                \
    } while (0)

/* ------------------------------------------------------------ dtypes */

static const int DTYPES[3] = {GRAFT_DTYPE_FLOAT, GRAFT_DTYPE_FLOAT16, GRAFT_DTYPE_BFLOAT16};

static const char *dname(int dt)
{
    return dt == GRAFT_DTYPE_FLOAT     ? "fp32"
           : dt == GRAFT_DTYPE_FLOAT16 ? "fp16"
           : dt == GRAFT_DTYPE_INT64   ? "int64"
           : dt == GRAFT_DTYPE_INT32   ? "int32"
           : dt == GRAFT_DTYPE_BOOL    ? "bool"
                                       : "bf16";
}

static double threshold(int dt)
{
    return dt == GRAFT_DTYPE_FLOAT ? 2e-5 : dt == GRAFT_DTYPE_FLOAT16 ? 2e-3 : 1.6e-2;
}

static float round_to(int dt, float v)
{
    if (dt == GRAFT_DTYPE_FLOAT16) return __half2float(__float2half_rn(v));
    if (dt == GRAFT_DTYPE_BFLOAT16) return __bfloat162float(__float2bfloat16_rn(v));
    return v;
}

static void pack(int dt, const float *src, size_t n, void *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == GRAFT_DTYPE_FLOAT)
            ((float *)dst)[i] = src[i];
        else if (dt == GRAFT_DTYPE_FLOAT16)
            ((__half *)dst)[i] = __float2half_rn(src[i]);
        else
            ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
    }
}

static void unpack(int dt, const void *src, size_t n, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == GRAFT_DTYPE_FLOAT)
            dst[i] = ((const float *)src)[i];
        else if (dt == GRAFT_DTYPE_FLOAT16)
            dst[i] = __half2float(((const __half *)src)[i]);
        else
            dst[i] = __bfloat162float(((const __nv_bfloat16 *)src)[i]);
    }
}

/* ------------------------------------------------------------ buffers */

static std::vector<void *> g_allocs;
static unsigned g_seed = 1234;

static void *dalloc(size_t bytes)
{
    void *p;
    CK(gcuda_malloc(&p, bytes, &E));
    g_allocs.push_back(p);
    return p;
}

static void release_all()
{
    for (void *p : g_allocs) gcuda_free(p);
    g_allocs.clear();
}

static void *dupload(int dt, const std::vector<float> &v)
{
    std::vector<unsigned char> h(v.size() * gcuda_dtype_size(dt));
    pack(dt, v.data(), v.size(), h.data());
    void *d = dalloc(h.size());
    CK(gcuda_upload(d, h.data(), h.size(), NULL, &E));
    CK(gcuda_sync(NULL, &E));
    return d;
}

/* n elements of dt, poisoned with NaN */
static void *dpoisoned(int dt, size_t n)
{
    void *d = dalloc(n * gcuda_dtype_size(dt));
    CK(gcuda_fill_nan(dt, d, n, NULL, &E));
    return d;
}

static std::vector<float> ddown(int dt, const void *d, size_t n)
{
    std::vector<unsigned char> h(n * gcuda_dtype_size(dt));
    CK(gcuda_sync(NULL, &E));
    CK(gcuda_download(h.data(), d, h.size(), NULL, &E));
    std::vector<float> f(n);
    unpack(dt, h.data(), n, f.data());
    return f;
}

/* n uniform values in [lo, hi), rounded to dt (GPU and reference see the same inputs) */
static std::vector<float> rnd(int dt, size_t n, float lo = -1.0f, float hi = 1.0f)
{
    std::mt19937 g(g_seed++);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto &x : v) x = round_to(dt, u(g));
    return v;
}

/* ------------------------------------------------------------ results */

struct row {
    std::string kernel, shape;
    int dt;
    size_t nonfinite, n;
    double err, thr;
    bool pass;
};
static std::vector<row> g_rows;

static bool check(const char *kernel, const std::string &shape, int dt, const std::vector<float> &got,
                  const std::vector<double> &ref)
{
    row r{kernel, shape, dt, 0, got.size(), 0.0, threshold(dt), false};
    double mref = 0, mdiff = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!std::isfinite(got[i])) {
            r.nonfinite++;
            continue;
        }
        mref = std::max(mref, std::fabs(ref[i]));
        mdiff = std::max(mdiff, std::fabs((double)got[i] - ref[i]));
    }
    r.err = mdiff / (mref > 0 ? mref : 1.0);
    r.pass = r.nonfinite == 0 && got.size() == ref.size() && r.err <= r.thr;
    g_rows.push_back(r);
    if (getenv("TK_PROGRESS")) /* under compute-sanitizer: where a crash happened */
        fprintf(stderr, "checked %s %s %s\n", kernel, shape.c_str(), dname(dt));
    return r.pass;
}

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
    char b[256];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}

/* ------------------------------------------------------------ norms */

static void test_rmsnorm(int dt, int rows, int dim, bool inplace)
{
    float eps = 1e-6f;
    auto x = rnd(dt, (size_t)rows * dim, -2, 2), g = rnd(dt, dim, 0.5f, 1.5f);
    void *dx = dupload(dt, x), *dg = dupload(dt, g);
    void *dy = inplace ? dx : dpoisoned(dt, x.size());
    CK(gcuda_rmsnorm(dt, dx, dg, dy, rows, dim, eps, NULL, &E));
    auto got = ddown(dt, dy, x.size());
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int i = 0; i < dim; i++) s += (double)x[(size_t)r * dim + i] * x[(size_t)r * dim + i];
        double inv = 1.0 / std::sqrt(s / dim + eps);
        for (int i = 0; i < dim; i++) ref[(size_t)r * dim + i] = x[(size_t)r * dim + i] * inv * g[i];
    }
    check("rmsnorm", fmt("%dx%d%s", rows, dim, inplace ? " in-place" : ""), dt, got, ref);
    release_all();
}

static void test_skip_rmsnorm(int dt, int rows, int dim, bool bias)
{
    float eps = 1e-6f;
    size_t n = (size_t)rows * dim;
    auto x = rnd(dt, n, -2, 2), sk = rnd(dt, n, -2, 2), g = rnd(dt, dim, 0.5f, 1.5f), bi = rnd(dt, dim, -0.5f, 0.5f);
    void *dx = dupload(dt, x), *ds = dupload(dt, sk), *dg = dupload(dt, g), *db = bias ? dupload(dt, bi) : NULL;
    void *dy = dpoisoned(dt, n), *dsum = dpoisoned(dt, n);
    CK(gcuda_skip_rmsnorm(dt, dx, ds, db, dg, dy, dsum, rows, dim, eps, NULL, &E));
    auto got = ddown(dt, dy, n), gsum = ddown(dt, dsum, n);
    std::vector<double> ref(n), rsum(n);
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int i = 0; i < dim; i++) {
            size_t k = (size_t)r * dim + i;
            /* the sum in fp32, as the kernels do (CPU kernel: float t) */
            float t = x[k] + sk[k];
            if (bias) t += bi[i];
            rsum[k] = t;
            s += (double)t * t;
        }
        double inv = 1.0 / std::sqrt(s / dim + eps);
        for (int i = 0; i < dim; i++) ref[(size_t)r * dim + i] = rsum[(size_t)r * dim + i] * inv * g[i];
    }
    std::string sh = fmt("%dx%d%s", rows, dim, bias ? " +bias" : "");
    check("skip_rmsnorm.y", sh, dt, got, ref);
    check("skip_rmsnorm.sum", sh, dt, gsum, rsum);
    release_all();
}

/* ------------------------------------------------------------ rotary */

struct rot_case {
    gcuda_rotary_args a;
    std::vector<double> ref;
    void *dy;
    size_t n;
    std::string name, shape;
};

/* Rotary caches [max_pos, rd / 2] (base 10000), rounded to dt. */
static void rope_tables(int dt, int max_pos, int rd, std::vector<float> &cs, std::vector<float> &sn)
{
    const int half = rd / 2;
    cs.assign((size_t)max_pos * half, 0.0f);
    sn.assign(cs.size(), 0.0f);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            double th = p * std::pow(10000.0, -2.0 * i / rd);
            cs[(size_t)p * half + i] = round_to(dt, (float)std::cos(th));
            sn[(size_t)p * half + i] = round_to(dt, (float)std::sin(th));
        }
}

/* A rotary's arguments on fresh inputs (device) and its fp64 reference.
 * norm: each row RMS-normalised first (gamma, eps 1e-6, rounded to dt as
 * the RMSNorm node stores it), then rotated (the q/k-norm + rotary launch) */
static rot_case rot_make(int dt, int B, int S, int H, int hs, int rd, int interleaved, int bhsd, bool inplace,
                         bool norm)
{
    int half = rd / 2, max_pos = 64;
    size_t n = (size_t)B * S * H * hs;
    auto x = rnd(dt, n), gam = rnd(dt, hs, 0.5f, 1.5f);
    std::vector<float> cs, sn;
    rope_tables(dt, max_pos, rd, cs, sn);
    std::mt19937 gen(g_seed++);
    std::vector<int64_t> pos((size_t)B * S);
    for (auto &p : pos) p = (int64_t)(gen() % max_pos);
    void *dx = dupload(dt, x), *dc = dupload(dt, cs), *dsn = dupload(dt, sn);
    int64_t *dpos = (int64_t *)dalloc(pos.size() * sizeof(int64_t));
    CK(gcuda_upload(dpos, pos.data(), pos.size() * sizeof(int64_t), NULL, &E));
    void *dy = inplace ? dx : dpoisoned(dt, n);
    gcuda_rotary_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.x = dx;
    a.y = dy;
    a.cos_cache = dc;
    a.sin_cache = dsn;
    a.positions = dpos;
    a.batch = B, a.seq = S, a.heads = H, a.head_size = hs, a.rotary_dim = rd, a.max_pos = max_pos;
    if (bhsd) {
        a.stride_b = (int64_t)H * S * hs, a.stride_s = hs, a.stride_h = (int64_t)S * hs;
    } else {
        a.stride_b = (int64_t)S * H * hs, a.stride_s = (int64_t)H * hs, a.stride_h = hs;
    }
    a.interleaved = interleaved;
    if (norm) {
        a.norm_x = dx, a.norm_gamma = dupload(dt, gam), a.norm_eps = 1e-6f;
        for (int b = 0; b < B; b++) /* the reference's input: the normalised rows */
            for (int s2 = 0; s2 < S; s2++)
                for (int h = 0; h < H; h++) {
                    float *xr = &x[(size_t)b * a.stride_b + (size_t)s2 * a.stride_s + (size_t)h * a.stride_h];
                    double ss = 0;
                    for (int i = 0; i < hs; i++) ss += (double)xr[i] * xr[i];
                    double inv = 1.0 / std::sqrt(ss / hs + 1e-6);
                    for (int i = 0; i < hs; i++) xr[i] = round_to(dt, (float)(xr[i] * inv * gam[i]));
                }
    }
    std::vector<double> ref(n);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                size_t off = (size_t)b * a.stride_b + (size_t)s * a.stride_s + (size_t)h * a.stride_h;
                const float *xr = &x[off];
                double *yr = &ref[off];
                int64_t p = pos[(size_t)b * S + s];
                for (int i = 0; i < half; i++) {
                    double c = cs[(size_t)p * half + i], si = sn[(size_t)p * half + i];
                    int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
                    yr[i0] = c * xr[i0] - si * xr[i1];
                    yr[i1] = si * xr[i0] + c * xr[i1];
                }
                for (int i = rd; i < hs; i++) yr[i] = xr[i];
            }
    return {a, ref, dy, n, norm ? "rmsnorm+rotary" : "rotary",
            fmt("B%d S%d H%d hs%d rd%d %s %s%s", B, S, H, hs, rd, interleaved ? "inter" : "half", bhsd ? "BHSD" : "BSHD",
                inplace ? " in-place" : "")};
}

static void test_rotary(int dt, int B, int S, int H, int hs, int rd, int interleaved, int bhsd, bool inplace,
                        bool norm = false)
{
    rot_case c = rot_make(dt, B, S, H, hs, rd, interleaved, bhsd, inplace, norm);
    CK(gcuda_rotary(&c.a, NULL, &E));
    check(c.name.c_str(), c.shape, dt, ddown(dt, c.dy, c.n), c.ref);
    release_all();
}

/* Two rotaries with their norms in one launch (a layer's q and k:
 * gcuda_rotary_pair), each against its own reference. */
static void test_rotary_pair(int dt, int Hq, int hq, int Hk, int hk, int rd, int interleaved)
{
    rot_case q = rot_make(dt, 1, 1, Hq, hq, rd, interleaved, 0, false, true);
    rot_case k = rot_make(dt, 1, 1, Hk, hk, rd, interleaved, 0, false, true);
    CK(gcuda_rotary_pair(&q.a, &k.a, NULL, &E));
    check("rmsnorm+rotary pair (first)", q.shape, dt, ddown(dt, q.dy, q.n), q.ref);
    check("rmsnorm+rotary pair (second)", k.shape, dt, ddown(dt, k.dy, k.n), k.ref);
    release_all();
}

/* ------------------------------------------------------------ GEMV */

static void test_gemv(int dt, int K, int N)
{
    auto x = rnd(dt, K), w = rnd(dt, (size_t)K * N);
    void *dx = dupload(dt, x), *dw = dupload(dt, w), *dy = dpoisoned(dt, N);
    size_t wsb;
    CK(gcuda_gemv_plan(dt, K, N, &wsb, &E));
    void *ws = wsb ? dalloc(wsb) : NULL;
    if (wsb) CK(gcuda_memset(ws, 0, wsb, NULL, &E));
    std::vector<double> ref(N, 0.0);
    for (int k = 0; k < K; k++) {
        double xv = x[k];
        const float *wr = &w[(size_t)k * N];
        for (int n = 0; n < N; n++) ref[n] += xv * wr[n];
    }
    /* twice: the second call checks that the split-K counters reset */
    for (int rep = 0; rep < 2; rep++) {
        if (rep) CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
        CK(gcuda_gemv(dt, dx, dw, dy, K, N, ws, wsb, NULL, &E));
        auto got = ddown(dt, dy, N);
        check("gemv", fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt, got, ref);
    }
    /* the bench sweep's other geometries: eight or sixteen rows in flight, more splits */
    for (gcuda_gemv_tune tn : {gcuda_gemv_tune{8, 8, 128}, gcuda_gemv_tune{16, 4, 64}}) {
        size_t wst;
        CK(gcuda_gemv_tuned_plan(dt, K, N, &tn, &wst, &E));
        void *ws2 = wst ? dalloc(wst) : NULL;
        if (wst) CK(gcuda_memset(ws2, 0, wst, NULL, &E));
        for (int rep = 0; rep < 2; rep++) {
            CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
            CK(gcuda_gemv_tuned(dt, dx, dw, dy, K, N, ws2, wst, &tn, NULL, &E));
            auto got = ddown(dt, dy, N);
            check(fmt("gemv {%d,%d,%d}", tn.unroll, tn.blocks_per_sm, tn.min_rows).c_str(),
                  fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt, got, ref);
        }
    }
    release_all();
}

/* y = W . x in fp64, W [N, K] row-major (one output per row). */
static std::vector<double> rows_ref(const std::vector<float> &w, const std::vector<float> &x, int K, int64_t N)
{
    std::vector<double> y(N, 0.0);
    for (int64_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) y[r] += (double)w[(size_t)r * K + k] * x[k];
    return y;
}

/* n matrices of one x for the GEMV tests: x, each W (K x N[j] values in
 * the layout the test gives them), poisoned outputs, the shape's name. */
struct gemv_mats {
    std::vector<float> x;
    void *dx;
    std::vector<std::vector<float>> w;
    std::vector<const void *> dw;
    std::vector<void *> dy;
    std::string shape;
};

static gemv_mats gemv_mats_make(int dt, int K, const std::vector<int64_t> &Ns)
{
    gemv_mats m;
    int n = (int)Ns.size();
    m.x = rnd(dt, K);
    m.dx = dupload(dt, m.x);
    m.w.resize(n);
    m.dw.resize(n);
    m.dy.resize(n);
    m.shape = fmt("K%d N", K);
    for (int j = 0; j < n; j++) {
        m.w[j] = rnd(dt, (size_t)K * Ns[j]);
        m.dw[j] = dupload(dt, m.w[j]);
        m.dy[j] = dpoisoned(dt, Ns[j]);
        m.shape += fmt("%s%lld", j ? "+" : "", (long long)Ns[j]);
    }
    return m;
}

/* gcuda_gemv_multi: n GEMVs of one x in one launch (q/k/v, gate/up), each
 * output against its own fp64 reference, twice (split-K counters reset). */
static void test_gemv_multi(int dt, int K, std::vector<int64_t> Ns)
{
    int n = (int)Ns.size();
    gemv_mats m = gemv_mats_make(dt, K, Ns);
    const std::vector<float> &x = m.x;
    size_t wsb;
    CK(gcuda_gemv_multi_plan(dt, K, Ns.data(), n, &wsb, &E));
    void *ws = wsb ? dalloc(wsb) : NULL;
    if (wsb) CK(gcuda_memset(ws, 0, wsb, NULL, &E));
    for (int rep = 0; rep < 2; rep++) {
        for (int j = 0; j < n; j++) CK(gcuda_fill_nan(dt, m.dy[j], Ns[j], NULL, &E));
        CK(gcuda_gemv_multi(dt, m.dx, m.dw.data(), m.dy.data(), Ns.data(), n, K, ws, wsb, NULL, &E));
        std::vector<float> got;
        std::vector<double> ref;
        for (int j = 0; j < n; j++) {
            auto g = ddown(dt, m.dy[j], Ns[j]);
            got.insert(got.end(), g.begin(), g.end());
            std::vector<double> r(Ns[j], 0.0);
            for (int k = 0; k < K; k++)
                for (int64_t c = 0; c < Ns[j]; c++) r[c] += (double)x[k] * m.w[j][(size_t)k * Ns[j] + c];
            ref.insert(ref.end(), r.begin(), r.end());
        }
        check("gemv multi", m.shape + (rep ? " again" : ""), dt, got, ref);
    }
    release_all();
}

#define AM_PF_TEST_MB 9 /* the prefetch check's buffer: 145 pieces of 64 KB, more than a one-block grid's threads */

/* gcuda_gemv_rows[_multi|_tuned]: y = W[N, K] . x, the weight one output
 * per row (the executor's transposed MatMul weights), against fp64; each
 * matrix its own output; twice per geometry, outputs poisoned, the second
 * time with an L2 prefetch list. */
static void test_gemv_rows(int dt, int K, std::vector<int64_t> Ns)
{
    int n = (int)Ns.size();
    gemv_mats m = gemv_mats_make(dt, K, Ns);
    const std::vector<float> &x = m.x;
    std::vector<double> ref;
    for (int j = 0; j < n; j++) {
        auto r = rows_ref(m.w[j], x, K, Ns[j]);
        ref.insert(ref.end(), r.begin(), r.end());
    }
    /* rep 1: with an L2 prefetch list (gcuda_gemv_rows_prefetch_next, a hint: the same output): a buffer of
     * more 64 KB pieces than a small grid has threads, and the weights themselves */
    const size_t es = gcuda_dtype_size(dt), big = ((size_t)AM_PF_TEST_MB << 20) + 48;
    gcuda_prefetch_set pf = {};
    pf.ptr[pf.n] = dalloc(big), pf.bytes[pf.n++] = big;
    for (int j = 0; j < n && pf.n < GCUDA_PREFETCH_MAX; j++)
        if ((uintptr_t)m.dw[j] % 16 == 0) pf.ptr[pf.n] = m.dw[j], pf.bytes[pf.n++] = (size_t)K * Ns[j] * es / 16 * 16;
    for (int unroll : {0, 2, 8, 16}) /* 0: the default (4) */
        for (int rep = 0; rep < 2; rep++) {
            for (int j = 0; j < n; j++) CK(gcuda_fill_nan(dt, m.dy[j], Ns[j], NULL, &E));
            if (n > 1 && unroll) continue;
            if (rep) CK(gcuda_gemv_rows_prefetch_next(&pf, &E));
            if (n > 1) CK(gcuda_gemv_rows_multi(dt, m.dx, m.dw.data(), m.dy.data(), Ns.data(), n, K, NULL, &E));
            else if (unroll) CK(gcuda_gemv_rows_tuned(dt, m.dx, m.dw[0], m.dy[0], K, Ns[0], unroll, NULL, &E));
            else CK(gcuda_gemv_rows(dt, m.dx, m.dw[0], m.dy[0], K, Ns[0], NULL, &E));
            std::vector<float> got;
            for (int j = 0; j < n; j++) {
                auto g = ddown(dt, m.dy[j], Ns[j]);
                got.insert(got.end(), g.begin(), g.end());
            }
            check(unroll ? fmt("gemv rows, unroll %d", unroll).c_str() : n > 1 ? "gemv rows multi" : "gemv rows",
                  m.shape + (rep ? " again, with an L2 prefetch list" : ""), dt, got, ref);
        }
    /* a range that is not a multiple of 16 bytes, or too many: refused, nothing set */
    gcuda_prefetch_set bad = pf;
    bad.bytes[0] = 40;
    gcuda_prefetch_set many = pf;
    many.n = GCUDA_PREFETCH_MAX + 1;
    const bool refused = gcuda_gemv_rows_prefetch_next(&bad, &E) == GRAFT_EINVAL &&
                         gcuda_gemv_rows_prefetch_next(&many, &E) == GRAFT_EINVAL;
    check("gemv rows, a misaligned or too long prefetch list refused (1: accepted)", m.shape, dt,
          std::vector<float>{refused ? 0.0f : 1.0f}, std::vector<double>{0.0});
    release_all();
}

/* ------------------------------------------------------------ GEMM (prefill) */

/* gops_gemm, the executor's MatMul of more than one row: C[b] = A[b] B[b],
 * A shared across the batch when shared_a (ONNX MatMul broadcasting); each
 * product twice (the second from the plan cache), through cuBLASLt and
 * through the cuBLAS fallback (GRAFT_CUDA_NO_LT=1). */
static void test_gemm(int dt, int M, int N, int K, int batch, bool shared_a)
{
    int64_t sa = shared_a ? 0 : (int64_t)M * K, sb = (int64_t)K * N, sc = (int64_t)M * N;
    auto a = rnd(dt, (size_t)(shared_a ? 1 : batch) * M * K), b = rnd(dt, (size_t)batch * K * N);
    void *da = dupload(dt, a), *db = dupload(dt, b), *dc = dpoisoned(dt, (size_t)batch * M * N);
    std::vector<double> ref((size_t)batch * M * N, 0.0);
    for (int bi = 0; bi < batch; bi++)
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) {
                double av = a[(size_t)bi * sa + (size_t)m * K + k];
                const float *br = &b[(size_t)bi * sb + (size_t)k * N];
                double *cr = &ref[(size_t)bi * sc + (size_t)m * N];
                for (int n = 0; n < N; n++) cr[n] += av * br[n];
            }
    /* B transposed (each batch entry N x K), for gops_gemm_bt */
    std::vector<float> bt(b.size());
    for (int bi = 0; bi < batch; bi++)
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) bt[(size_t)bi * sb + (size_t)n * K + k] = b[(size_t)bi * sb + (size_t)k * N + n];
    void *dbt = dupload(dt, bt);
    for (int lt = 1; lt >= 0; lt--) {
        if (lt) unsetenv("GRAFT_CUDA_NO_LT");
        else setenv("GRAFT_CUDA_NO_LT", "1", 1);
        gops_blas *h = NULL;
        CK(gops_blas_create(&h, &E));
        for (int t = 0; t < 2; t++)
            for (int rep = 0; rep < 2; rep++) {
                CK(gcuda_fill_nan(dt, dc, ref.size(), NULL, &E));
                if (t) CK(gops_gemm_bt(h, dt, M, N, K, da, sa, dbt, sb, dc, sc, batch, NULL, &E));
                else CK(gops_gemm(h, dt, M, N, K, da, sa, db, sb, dc, sc, batch, NULL, &E));
                auto got = ddown(dt, dc, ref.size());
                check(fmt("gemm%s (%s)", t ? " B transposed" : "", lt ? "cuBLASLt" : "cuBLAS").c_str(),
                      fmt("M%d N%d K%d batch %d%s%s", M, N, K, batch, shared_a ? " A shared" : "",
                          rep ? " again" : ""),
                      dt, got, ref);
            }
        gops_blas_free(h);
    }
    unsetenv("GRAFT_CUDA_NO_LT");
    release_all();
}

/* ------------------------------------------------------------ gc_div_r */

/* gc_div_r (gcuda_common.cuh; the decode attention's v norm) against the
 * device's own correctly rounded division a / b, bit for bit, wherever |a|
 * and |a / b| are at least 2^-100 and a / b is finite: a any finite float,
 * b the square root of a float in [2^-39, 2^126), as a norm's sqrt(mean +
 * eps) is. Per thread `per` pairs from an xorshift of its own. */
__global__ void div_r_kernel(unsigned long long seed, int per, unsigned *bad, unsigned *count)
{
    unsigned long long s = seed ^ (0x9E3779B97F4A7C15ull * (blockIdx.x * blockDim.x + threadIdx.x + 1));
    unsigned nb = 0, nc = 0;
    for (int i = 0; i < per; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        const unsigned u = (unsigned)s, w = (unsigned)(s >> 32);
        const float b = sqrtf(__uint_as_float(0x2c000000u + u % (0x7e800000u - 0x2c000000u))), a = __uint_as_float(w);
        const float q = a / b, got = gc_div_r(a, b, 1.0f / b);
        if (!isfinite(a) || !isfinite(q) || !(fabsf(a) >= 0x1p-100f) || !(fabsf(q) >= 0x1p-100f)) continue;
        nc++;
        nb += __float_as_uint(got) != __float_as_uint(q);
    }
    atomicAdd(bad, nb);
    atomicAdd(count, nc);
}

static void test_div_r()
{
    unsigned *d = (unsigned *)dalloc(2 * sizeof(unsigned)), h[2];
    CUCK(cudaMemset(d, 0, 2 * sizeof(unsigned)));
    div_r_kernel<<<512, 256>>>(0x5eed5eedull, 256, d, d + 1);
    CUCK(cudaGetLastError());
    CUCK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    const std::string sh = fmt("%u pairs of %u", h[1], 512u * 256u * 256u);
    check("gc_div_r against a / b: pairs that differ", sh, GRAFT_DTYPE_FLOAT, {(float)h[0]}, {0.0});
    check("gc_div_r against a / b: fewer than 2^24 pairs compared (1: yes)", sh, GRAFT_DTYPE_FLOAT,
          {h[1] < (1u << 24) ? 1.0f : 0.0f}, {0.0});
    release_all();
}

/* gc_block_sum1 (one barrier; the compact chain prologue's and a 2-byte last
 * block's norms) against gc_block_sum, bit for bit, in every thread: NW
 * warps a block, values of mixed signs and magnitudes from an xorshift of
 * each thread's own, every eighth block all zeros of either sign (the
 * butterfly's added zeros turn a -0 sum into +0: both must agree). */
template <int NW> __global__ void __launch_bounds__(NW * 32) bsum1_kernel(unsigned long long seed, unsigned *bad)
{
    __shared__ float s0[32], s1[32];
    unsigned long long s = seed ^ (0x9E3779B97F4A7C15ull * (blockIdx.x * blockDim.x + threadIdx.x + 1));
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const unsigned u = (unsigned)s;
    float v = __uint_as_float((u & 0x80000000u) | (0x30000000u + (u >> 1) % 0x18000000u)); /* 2^-31 .. 2^17 */
    if (blockIdx.x % 8 == 7) v = u & 1u ? -0.0f : 0.0f;
    const float a = gc_block_sum(v, s0), b = gc_block_sum1<NW>(v, s1);
    if (__float_as_uint(a) != __float_as_uint(b)) atomicAdd(bad, 1u);
}

static void test_block_sum1()
{
    unsigned *d = (unsigned *)dalloc(2 * sizeof(unsigned)), h[2];
    CUCK(cudaMemset(d, 0, 2 * sizeof(unsigned)));
    bsum1_kernel<8><<<4096, 256>>>(0xb5b5b5b5ull, d);
    bsum1_kernel<32><<<1024, 1024>>>(0x1234abcdull, d + 1);
    CUCK(cudaGetLastError());
    CUCK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    check("gc_block_sum1 against gc_block_sum: threads that differ", "4096 blocks of 256 threads",
          GRAFT_DTYPE_FLOAT, {(float)h[0]}, {0.0});
    check("gc_block_sum1 against gc_block_sum: threads that differ", "1024 blocks of 1024 threads",
          GRAFT_DTYPE_FLOAT, {(float)h[1]}, {0.0});
    release_all();
}

/* gops_copy_words from host memory the device maps (the executor's lengths, a kernel node at a step's start)
 * and from device memory; the words past n untouched */
static void test_copy_words()
{
    const int n = 37;
    uint32_t *h = NULL, *hd = NULL;
    CUCK(cudaHostAlloc((void **)&h, n * sizeof *h, cudaHostAllocMapped));
    CUCK(cudaHostGetDevicePointer((void **)&hd, h, 0));
    for (int i = 0; i < n; i++) h[i] = 0x9e3779b9u * (uint32_t)(i + 1);
    uint32_t *d = (uint32_t *)dalloc((n + 3) * sizeof *d), *d2 = (uint32_t *)dalloc((n + 3) * sizeof *d2);
    CUCK(cudaMemset(d, 0xa5, (n + 3) * sizeof *d));
    CUCK(cudaMemset(d2, 0x5a, (n + 3) * sizeof *d2));
    CK(gops_copy_words(d, hd, n, NULL, &E));
    CK(gops_copy_words(d2, d, n, NULL, &E));
    std::vector<uint32_t> got(n + 3), got2(n + 3);
    CK(gcuda_download(got.data(), d, got.size() * sizeof(uint32_t), NULL, &E));
    CK(gcuda_download(got2.data(), d2, got2.size() * sizeof(uint32_t), NULL, &E));
    int bad = 0;
    for (int i = 0; i < n + 3; i++) {
        bad += got[i] != (i < n ? h[i] : 0xa5a5a5a5u);
        bad += got2[i] != (i < n ? h[i] : 0x5a5a5a5au);
    }
    CUCK(cudaFreeHost(h));
    check("gops_copy_words from mapped host memory, then device to device: words wrong", fmt("%d words", n),
          GRAFT_DTYPE_FLOAT, {(float)bad}, {0.0});
    release_all();
}

/* ------------------------------------------------------------ attention */

struct attn_case {
    int B, Hq, Hkv, hd, max_seq;
    std::vector<int> lens;
    long long window_left;
    float softcap, scale; /* scale 0: 1/sqrt(hd) */
    int splits;           /* 0: auto */
};

static int g_attn_impl;  /* gcuda_attn_decode_args.impl for test_attn */

static void test_attn(int dt, const attn_case &c)
{
    int G = c.Hq / c.Hkv;
    float scale = c.scale > 0 ? c.scale : 1.0f / std::sqrt((float)c.hd);
    size_t nq = (size_t)c.B * c.Hq * c.hd, nc = (size_t)c.B * c.Hkv * c.max_seq * c.hd;
    auto q = rnd(dt, nq), K = rnd(dt, nc), V = rnd(dt, nc);
    /* keys the query must not see are NaN: reading one shows in the output */
    for (int b = 0; b < c.B; b++) {
        int L = c.lens[b];
        long long lo = c.window_left >= 0 ? std::max(0LL, L - 1 - c.window_left) : 0;
        for (int h = 0; h < c.Hkv; h++)
            for (int j = 0; j < c.max_seq; j++)
                if (j >= L || j < lo)
                    for (int d = 0; d < c.hd; d++) {
                        size_t k = (((size_t)b * c.Hkv + h) * c.max_seq + j) * c.hd + d;
                        K[k] = V[k] = NAN;
                    }
    }
    void *dq = dupload(dt, q), *dk = dupload(dt, K), *dv = dupload(dt, V), *dout = dpoisoned(dt, nq);
    int32_t *dlens = (int32_t *)dalloc(c.B * sizeof(int32_t));
    CK(gcuda_upload(dlens, c.lens.data(), c.B * sizeof(int32_t), NULL, &E));
    gcuda_attn_decode_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.batch = c.B, a.q_heads = c.Hq, a.kv_heads = c.Hkv, a.head_dim = c.hd, a.max_seq = c.max_seq;
    a.q = dq, a.k_cache = dk, a.v_cache = dv, a.seq_lens = dlens, a.out = dout;
    a.scale = scale, a.softcap = c.softcap, a.window_left = c.window_left;
    a.num_splits = c.splits;
    a.impl = g_attn_impl;
    CK(gcuda_attn_decode_plan(&a, &E));
    a.ws = dpoisoned(GRAFT_DTYPE_FLOAT, a.ws_bytes / 4); /* partials are written before they are read */
    CK(gcuda_attn_decode(&a, NULL, &E));
    auto got = ddown(dt, dout, nq);
    /* fp64 attention of queries q over caches K, V */
    auto attn_ref = [&](const std::vector<float> &q, const std::vector<float> &K, const std::vector<float> &V) {
    std::vector<double> ref(nq, 0.0);
    for (int b = 0; b < c.B; b++) {
        int L = c.lens[b];
        long long lo = c.window_left >= 0 ? std::max(0LL, L - 1 - c.window_left) : 0;
        for (int qh = 0; qh < c.Hq; qh++) {
            int kh = qh / G;
            const float *qr = &q[((size_t)b * c.Hq + qh) * c.hd];
            std::vector<double> s;
            double m = -INFINITY;
            for (long long j = lo; j < L; j++) {
                const float *kr = &K[(((size_t)b * c.Hkv + kh) * c.max_seq + j) * c.hd];
                double d = 0;
                for (int i = 0; i < c.hd; i++) d += (double)qr[i] * kr[i];
                d *= scale;
                if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
                s.push_back(d);
                m = std::max(m, d);
            }
            double sum = 0;
            for (auto &e : s) sum += (e = std::exp(e - m));
            double *o = &ref[((size_t)b * c.Hq + qh) * c.hd];
            for (size_t t = 0; t < s.size(); t++) {
                const float *vr = &V[(((size_t)b * c.Hkv + kh) * c.max_seq + lo + t) * c.hd];
                for (int i = 0; i < c.hd; i++) o[i] += s[t] / sum * vr[i];
            }
        }
    }
    return ref;
    };
    auto ref = attn_ref(q, K, V);
    std::string lens;
    for (int L : c.lens) lens += fmt("%s%d", lens.empty() ? "" : ",", L);
    std::string sh = fmt("B%d Hq%d Hkv%d hd%d L%s", c.B, c.Hq, c.Hkv, c.hd, lens.c_str());
    if (c.window_left >= 0) sh += fmt(" win%lld", c.window_left);
    if (c.softcap > 0) sh += fmt(" cap%g", c.softcap);
    sh += fmt(" sp%d", a.num_splits);
    check(g_attn_impl == 2 && dt != GRAFT_DTYPE_FLOAT ? "attn_decode mma" : "attn_decode", sh, dt, got, ref);
    if (g_attn_impl == 2 && dt != GRAFT_DTYPE_FLOAT) {
        /* an L2 prefetch list (a hint, gcuda_attn_decode_args.pf): a buffer of more pieces than the grid has
         * threads for at once, and the caches themselves; the same output */
        const size_t es = gcuda_dtype_size(dt), big = ((size_t)AM_PF_TEST_MB << 20) + 48;
        gcuda_attn_decode_args t = a;
        t.pf.n = 3;
        t.pf.ptr[0] = dalloc(big), t.pf.bytes[0] = big;
        t.pf.ptr[1] = dk, t.pf.bytes[1] = nc * es / 16 * 16;
        t.pf.ptr[2] = dv, t.pf.bytes[2] = nc * es / 16 * 16;
        for (int late = 0; late < 2; late++) { /* at once, and by the blocks with keys after their partials */
            t.pf_late = late;
            t.cache_ready = late; /* and the first tile asked for before the wait (as without the prefetch) */
            t.out = dpoisoned(dt, nq);
            CK(gcuda_attn_decode(&t, NULL, &E));
            check(late ? "attn_decode mma, L2 prefetch late" : "attn_decode mma, L2 prefetch", sh, dt,
                  ddown(dt, t.out, nq), ref);
        }
        /* a range that is not a multiple of 16 bytes: refused before any launch */
        t.pf.bytes[0] = 40;
        const graft_status bad = gcuda_attn_decode(&t, NULL, &E);
        check("attn_decode, a misaligned prefetch range refused (1: accepted)", sh, dt,
              std::vector<float>{bad == GRAFT_EINVAL ? 0.0f : 1.0f}, std::vector<double>{0.0});
    }
    bool lens_ok = true;
    for (int L : c.lens) lens_ok = lens_ok && L >= 1 && L <= c.max_seq;
    if (g_attn_impl == 2 && dt != GRAFT_DTYPE_FLOAT && lens_ok) {
        /* the newest key's rows given apart (k_new, v_new: [B, Hkv, hd]), its cache rows NaN: the kernel
         * attends to the given rows and stores them into the caches */
        std::vector<float> nk((size_t)c.B * c.Hkv * c.hd), nv(nk.size()), K3 = K, V3 = V;
        for (int b = 0; b < c.B; b++)
            for (int h = 0; h < c.Hkv; h++)
                for (int d = 0; d < c.hd; d++) {
                    size_t k = (((size_t)b * c.Hkv + h) * c.max_seq + c.lens[b] - 1) * c.hd + d;
                    size_t n = ((size_t)b * c.Hkv + h) * c.hd + d;
                    nk[n] = K[k], nv[n] = V[k];
                    K3[k] = V3[k] = NAN;
                }
        void *dk3 = dupload(dt, K3), *dv3 = dupload(dt, V3);
        a.k_cache = dk3, a.v_cache = dv3, a.out = dpoisoned(dt, nq);
        a.cache_ready = 1; /* as the executor sets it with new rows: the first tile asked for before the wait */
        a.k_new = dupload(dt, nk), a.v_new = dupload(dt, nv), a.new_stride_b = (int64_t)c.Hkv * c.hd,
        a.new_stride_h = c.hd;
        CK(gcuda_attn_decode(&a, NULL, &E));
        check("attn_decode mma, new rows apart", sh, dt, ddown(dt, a.out, nq), ref);
        /* the caches' rows at each sequence's newest key against those of Kw, Vw */
        auto check_stored = [&](const char *name, void *dk, void *dv, const std::vector<float> &Kw,
                                const std::vector<float> &Vw) {
            auto kc = ddown(dt, dk, nc), vc = ddown(dt, dv, nc);
            std::vector<float> got;
            std::vector<double> want;
            for (int b = 0; b < c.B; b++)
                for (int h = 0; h < c.Hkv; h++)
                    for (int d = 0; d < c.hd; d++) {
                        size_t k = (((size_t)b * c.Hkv + h) * c.max_seq + c.lens[b] - 1) * c.hd + d;
                        got.push_back(kc[k]), got.push_back(vc[k]);
                        want.push_back(Kw[k]), want.push_back(Vw[k]);
                    }
            check(name, sh, dt, got, want);
        };
        check_stored("attn_decode mma, new rows stored", dk3, dv3, K, V);

        /* the rows before the steps that make them (gcuda_attn_decode_takes_prep): q and the new key
         * RMS-normalised (their gammas, eps 1e-6), rounded, rotated, rounded; the new value v / sqrt(mean(v^2)
         * + 1e-6), rounded. The reference attends to the rows so made (fp64, then rounded to dt as the
         * nodes store them). Twice: with the new rows (q, k, v made), and q alone over full caches (a layer
         * that reads another's cache). */
        const int rd = c.hd >= 512 ? c.hd / 4 : c.hd / 16 * 16, half = rd / 2, inter = c.B > 1, max_pos = 32;
        std::vector<float> cs, sn;
        rope_tables(dt, max_pos, rd, cs, sn);
        std::vector<int64_t> pos(c.B);
        for (int b = 0; b < c.B; b++) pos[b] = (int64_t)((c.lens[b] * 7 + b) % max_pos);
        auto gq = rnd(dt, c.hd, 0.5f, 1.5f), gk = rnd(dt, c.hd, 0.5f, 1.5f);
        /* row x (hd values) made in place: norm (g; NULL: v's), then the rotary at position p */
        auto make = [&](float *x, const float *g, int64_t p) {
            double ss = 0;
            for (int i = 0; i < c.hd; i++) ss += (double)x[i] * x[i];
            double r = std::sqrt(ss / c.hd + 1e-6);
            for (int i = 0; i < c.hd; i++) x[i] = round_to(dt, (float)(g ? x[i] / r * g[i] : x[i] / r));
            if (!g) return;
            for (int i = 0; i < half; i++) {
                int i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + half;
                double cc = cs[(size_t)p * half + i], ssn = sn[(size_t)p * half + i], x0 = x[i0], x1 = x[i1];
                x[i0] = round_to(dt, (float)(cc * x0 - ssn * x1));
                x[i1] = round_to(dt, (float)(ssn * x0 + cc * x1));
            }
        };
        auto qraw = rnd(dt, nq, -2.0f, 2.0f), kraw = rnd(dt, nk.size(), -2.0f, 2.0f), vraw = rnd(dt, nk.size(), -2.0f, 2.0f);
        std::vector<float> qm = qraw, K4 = K, V4 = V, km = kraw, vm = vraw;
        for (int b = 0; b < c.B; b++) {
            for (int h = 0; h < c.Hq; h++) make(&qm[((size_t)b * c.Hq + h) * c.hd], gq.data(), pos[b]);
            for (int h = 0; h < c.Hkv; h++) {
                size_t n = ((size_t)b * c.Hkv + h) * c.hd;
                make(&km[n], gk.data(), pos[b]);
                make(&vm[n], nullptr, 0);
                size_t k = (((size_t)b * c.Hkv + h) * c.max_seq + c.lens[b] - 1) * c.hd;
                std::copy(km.begin() + n, km.begin() + n + c.hd, K4.begin() + k);
                std::copy(vm.begin() + n, vm.begin() + n + c.hd, V4.begin() + k);
            }
        }
        int64_t *dpos = (int64_t *)dalloc(pos.size() * sizeof(int64_t));
        CK(gcuda_upload(dpos, pos.data(), pos.size() * sizeof(int64_t), NULL, &E));
        for (int with_new = 1; with_new >= 0; with_new--) {
            gcuda_attn_decode_args t = a;
            t.cache_ready = with_new; /* q alone: the first tile asked for after the wait */
            t.q = dupload(dt, qraw), t.out = dpoisoned(dt, nq);
            t.q_gamma = dupload(dt, gq), t.q_eps = 1e-6f;
            t.rope_cos = dupload(dt, cs), t.rope_sin = dupload(dt, sn), t.rope_pos = dpos;
            t.rope_max_pos = max_pos, t.rope_dim = rd, t.rope_interleaved = inter;
            void *dk4 = dupload(dt, with_new ? K3 : K4), *dv4 = dupload(dt, with_new ? V3 : V4);
            t.k_cache = dk4, t.v_cache = dv4;
            if (with_new) {
                t.k_new = dupload(dt, kraw), t.v_new = dupload(dt, vraw);
                t.k_gamma = dupload(dt, gk), t.k_eps = 1e-6f, t.v_norm = 1, t.v_eps = 1e-6f;
            } else {
                t.k_new = t.v_new = NULL;
            }
            if (!gcuda_attn_decode_takes_prep(&t)) {
                g_rows.push_back({"attn_decode mma, made first: not taken", sh, dt, 0, 0, 0.0, 0.0, false});
                continue;
            }
            CK(gcuda_attn_decode(&t, NULL, &E));
            check(with_new ? "attn_decode mma, q/k/v made first" : "attn_decode mma, q made first",
                  sh + fmt(" rd%d%s", rd, inter ? " inter" : ""), dt, ddown(dt, t.out, nq), attn_ref(qm, K4, V4));
            if (with_new) check_stored("attn_decode mma, made rows stored", dk4, dv4, K4, V4);
        }
    }
    release_all();
}

/* ------------------------------------------------------------ KV append + prefill attention */

struct prefill_case {
    int B, S, Hq, Hkv, hd, max_seq;
    std::vector<int> past;
    long long window_left;
    float softcap, scale; /* scale 0: 1/sqrt(hd) */
    int src_bhsd;         /* new K/V rows [B,Hkv,S,D] (else [B,S,Hkv,D]) */
    int q_bhsd;           /* q and out [B,Hq,S,D] through strides (else contiguous [B,S,Hq,D]) */
};

static void test_prefill(int dt, const prefill_case &c)
{
    int G = c.Hq / c.Hkv;
    float scale = c.scale > 0 ? c.scale : 1.0f / std::sqrt((float)c.hd);
    size_t nq = (size_t)c.B * c.S * c.Hq * c.hd, nc = (size_t)c.B * c.Hkv * c.max_seq * c.hd;
    size_t nn = (size_t)c.B * c.S * c.Hkv * c.hd;
    auto q = rnd(dt, nq), K = rnd(dt, nc), V = rnd(dt, nc), nk = rnd(dt, nn), nv = rnd(dt, nn);
    auto lo_of = [&](long long pos) { return c.window_left >= 0 ? std::max(0LL, pos - c.window_left) : 0LL; };
    /* the expected cache after the append; keys no query sees are NaN (reading one shows in the output) */
    std::vector<float> K2 = K, V2 = V;
    long long ss = c.src_bhsd ? c.hd : (long long)c.Hkv * c.hd, shd = c.src_bhsd ? (long long)c.S * c.hd : c.hd;
    long long sb = (long long)c.S * c.Hkv * c.hd;
    for (int b = 0; b < c.B; b++) {
        int P = c.past[b];
        long long lo = lo_of(P);
        for (int h = 0; h < c.Hkv; h++)
            for (int j = 0; j < c.max_seq; j++) {
                size_t row = (((size_t)b * c.Hkv + h) * c.max_seq + j) * c.hd;
                bool fresh = j >= P && j < P + c.S, seen = j >= lo && j < P + c.S;
                for (int d = 0; d < c.hd; d++) {
                    if (!seen && !fresh) K[row + d] = V[row + d] = K2[row + d] = V2[row + d] = NAN;
                    if (fresh) {
                        size_t si = (size_t)(b * sb + (j - P) * ss + h * shd + d);
                        K[row + d] = V[row + d] = NAN; /* not yet written */
                        K2[row + d] = nk[si];
                        V2[row + d] = nv[si];
                    }
                }
            }
    }
    void *dq = dupload(dt, q), *dk = dupload(dt, K), *dv = dupload(dt, V), *dnk = dupload(dt, nk), *dnv = dupload(dt, nv);
    void *dout = dpoisoned(dt, nq);
    int32_t *dpast = (int32_t *)dalloc(c.B * sizeof(int32_t));
    CK(gcuda_upload(dpast, c.past.data(), c.B * sizeof(int32_t), NULL, &E));
    gcuda_kv_append_args ka;
    memset(&ka, 0, sizeof ka);
    ka.dtype = dt;
    ka.batch = c.B, ka.seq = c.S, ka.kv_heads = c.Hkv, ka.head_dim = c.hd, ka.max_seq = c.max_seq;
    ka.k = dnk, ka.v = dnv, ka.stride_b = sb, ka.stride_s = ss, ka.stride_h = shd;
    ka.k_cache = dk, ka.v_cache = dv, ka.past_lens = dpast;
    CK(gcuda_kv_append(&ka, NULL, &E));
    std::string lens;
    for (int L : c.past) lens += fmt("%s%d", lens.empty() ? "" : ",", L);
    std::string sh0 = fmt("B%d S%d Hq%d Hkv%d hd%d past%s", c.B, c.S, c.Hq, c.Hkv, c.hd, lens.c_str());
    {
        /* the cache compared where the reference is finite (NaN rows must stay NaN: compare their count) */
        auto gk = ddown(dt, dk, nc), gv = ddown(dt, dv, nc);
        std::vector<float> g2;
        std::vector<double> r2;
        size_t nan_mismatch = 0;
        for (size_t i = 0; i < nc; i++) {
            if (std::isnan(K2[i])) {
                nan_mismatch += !std::isnan(gk[i]) || !std::isnan(gv[i]);
                continue;
            }
            g2.push_back(gk[i]), r2.push_back(K2[i]);
            g2.push_back(gv[i]), r2.push_back(V2[i]);
        }
        if (nan_mismatch) g2.push_back(NAN), r2.push_back(0.0); /* a row written that must not be */
        check("kv_append", sh0 + (c.src_bhsd ? " src BHSD" : " src BSHD"), dt, g2, r2);
    }
    gcuda_attn_prefill_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.batch = c.B, a.seq = c.S, a.q_heads = c.Hq, a.kv_heads = c.Hkv, a.head_dim = c.hd, a.max_seq = c.max_seq;
    a.q = dq, a.k_cache = dk, a.v_cache = dv, a.past_lens = dpast, a.out = dout;
    long long qsb = (long long)c.S * c.Hq * c.hd, qss = (long long)c.Hq * c.hd, qsh = c.hd;
    if (c.q_bhsd) {
        qss = c.hd, qsh = (long long)c.S * c.hd;
        a.q_stride_b = a.o_stride_b = qsb, a.q_stride_s = a.o_stride_s = qss, a.q_stride_h = a.o_stride_h = qsh;
    }
    a.scale = scale, a.softcap = c.softcap, a.window_left = c.window_left;
    CK(gcuda_attn_prefill(&a, NULL, &E));
    auto got = ddown(dt, dout, nq);
    std::vector<double> ref(nq, 0.0);
    for (int b = 0; b < c.B; b++)
        for (int t = 0; t < c.S; t++)
            for (int qh = 0; qh < c.Hq; qh++) {
                int kh = qh / G;
                long long pos = (long long)c.past[b] + t, lo = lo_of(pos), hi = std::min<long long>(pos, c.max_seq - 1);
                size_t qo = (size_t)(b * qsb + t * qss + qh * qsh);
                const float *qr = &q[qo];
                std::vector<double> sc;
                double m = -INFINITY;
                for (long long j = lo; j <= hi; j++) {
                    const float *kr = &K2[(((size_t)b * c.Hkv + kh) * c.max_seq + j) * c.hd];
                    double d = 0;
                    for (int i = 0; i < c.hd; i++) d += (double)qr[i] * kr[i];
                    d *= scale;
                    if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
                    sc.push_back(d);
                    m = std::max(m, d);
                }
                double sum = 0;
                for (auto &e : sc) sum += (e = std::exp(e - m));
                double *o = &ref[qo];
                for (size_t u = 0; u < sc.size(); u++) {
                    const float *vr = &V2[(((size_t)b * c.Hkv + kh) * c.max_seq + lo + u) * c.hd];
                    for (int i = 0; i < c.hd; i++) o[i] += sc[u] / sum * vr[i];
                }
            }
    std::string sh = sh0;
    if (c.window_left >= 0) sh += fmt(" win%lld", c.window_left);
    if (c.softcap > 0) sh += fmt(" cap%g", c.softcap);
    if (c.q_bhsd) sh += " q BHSD";
    check("attn_prefill", sh, dt, got, ref);
    release_all();
}

/* ------------------------------------------------------------ MatMulNBits */

struct nbits_case {
    int M, N, K, block;
    int zp;   /* 0 none, 1 packed uint4, 2 typed (dtype) */
    int bias;
    int misalign; /* B placed 8 bytes past a 16-byte boundary */
};

static void test_nbits(int dt, const nbits_case &c)
{
    int kb = (c.K + c.block - 1) / c.block, blob = c.block / 2, zpw = (kb + 1) / 2;
    std::mt19937 g(g_seed++);
    std::vector<uint8_t> B((size_t)c.N * kb * blob), zp8((size_t)c.N * zpw);
    for (auto &v : B) v = (uint8_t)(g() & 0xff);
    for (auto &v : zp8) v = (uint8_t)(g() & 0xff);
    auto A = rnd(dt, (size_t)c.M * c.K), S = rnd(dt, (size_t)c.N * kb, 0.01f, 0.1f), bias = rnd(dt, c.N);
    std::vector<float> zt((size_t)c.N * kb);
    for (auto &z : zt) z = round_to(dt, (float)(g() % 64) / 4.0f); /* 0 .. 15.75, fractional */
    void *dA = dupload(dt, A), *dS = dupload(dt, S), *dbias = c.bias ? dupload(dt, bias) : NULL;
    void *dz = NULL;
    if (c.zp == 1) {
        dz = dalloc(zp8.size());
        CK(gcuda_upload(dz, zp8.data(), zp8.size(), NULL, &E));
    } else if (c.zp == 2) {
        dz = dupload(dt, zt);
    }
    uint8_t *dBbase = (uint8_t *)dalloc(B.size() + 16), *dB = dBbase + (c.misalign ? 8 : 0);
    CK(gcuda_upload(dB, B.data(), B.size(), NULL, &E));
    void *dY = dpoisoned(dt, (size_t)c.M * c.N);
    gcuda_matmul_nbits_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.M = c.M, a.N = c.N, a.K = c.K, a.block_size = c.block;
    a.a = dA, a.b = dB, a.scales = dS, a.zero_points = dz, a.zp_dtype = c.zp == 1 ? GRAFT_DTYPE_UINT8 : dt;
    a.bias = dbias, a.y = dY;
    CK(gcuda_matmul_nbits(&a, NULL, &E));
    auto got = ddown(dt, dY, (size_t)c.M * c.N);
    std::vector<double> ref((size_t)c.M * c.N, 0.0), w(c.K);
    for (int n = 0; n < c.N; n++) {
        for (int k = 0; k < c.K; k++) {
            int blk = k / c.block;
            unsigned q = (B[((size_t)n * kb + blk) * blob + (k % c.block) / 2] >> (4 * (k & 1))) & 15u;
            double z = c.zp == 1 ? (double)((zp8[(size_t)n * zpw + blk / 2] >> (4 * (blk & 1))) & 15u)
                       : c.zp == 2 ? (double)zt[(size_t)n * kb + blk] : 8.0;
            w[k] = ((double)q - z) * S[(size_t)n * kb + blk];
        }
        for (int m = 0; m < c.M; m++) {
            double acc = c.bias ? bias[n] : 0.0;
            for (int k = 0; k < c.K; k++) acc += (double)A[(size_t)m * c.K + k] * w[k];
            ref[(size_t)m * c.N + n] = acc;
        }
    }
    const char *zn[] = {"zp8", "zp packed", "zp typed"};
    check("matmul_nbits", fmt("M%d N%d K%d blk%d %s%s%s", c.M, c.N, c.K, c.block, zn[c.zp], c.bias ? " +bias" : "",
                              c.misalign ? " B+8" : ""),
          dt, got, ref);
    release_all();
}

/* ------------------------------------------------------------ softmax, binary, gather */

static void test_softmax(int dt, int rows, int dim)
{
    auto x = rnd(dt, (size_t)rows * dim, -8, 8);
    void *dx = dupload(dt, x), *dy = dpoisoned(dt, x.size());
    CK(gcuda_softmax(dt, dx, dy, rows, dim, NULL, &E));
    auto got = ddown(dt, dy, x.size());
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; r++) {
        const float *xr = &x[(size_t)r * dim];
        double m = -INFINITY, s = 0;
        for (int i = 0; i < dim; i++) m = std::max(m, (double)xr[i]);
        for (int i = 0; i < dim; i++) s += std::exp(xr[i] - m);
        for (int i = 0; i < dim; i++) ref[(size_t)r * dim + i] = std::exp(xr[i] - m) / s;
    }
    check("softmax", fmt("%dx%d", rows, dim), dt, got, ref);
    release_all();
}

/* gops_fused (the executor's elementwise chains) against the same chain
 * evaluated here op by op, each result rounded to the stored type as the
 * unfused nodes leave it: gelu(a) * b; (a + b) * s with s a scalar;
 * RMSNorm(x) * gamma -> r + . -> . * s (the norm head); and a broadcast
 * chain ((m + eps) -> sqrt -> x / . -> cast) with m [rows, 1] and the
 * arithmetic in fp32 cast to the dtype last (Gemma's fp32 v_norm). */
static double gelu_tanh_ref(double v)
{
    double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v / (1.0 + std::exp(-2.0 * u));
}

static void test_fused(int dt, int rows, int dim)
{
    const size_t n = (size_t)rows * dim;
    gops_fuse f;
    auto base = [&](int n_ins) {
        memset(&f, 0, sizeof f);
        f.rank = 2;
        f.dims[0] = rows;
        f.dims[1] = dim;
        f.y_dtype = dt;
        f.n_ins = n_ins;
    };
    /* a leaf of dtype ldt: the output's shape, [rows, 1] (col) or one value (scalar) */
    auto leaf = [&](int ldt, const std::vector<float> &v, bool col, bool scalar) {
        int l = f.n_leaf++;
        f.leaf[l] = dupload(ldt, v);
        f.leaf_dtype[l] = ldt;
        f.st[l][0] = scalar ? 0 : col ? 1 : dim;
        f.st[l][1] = scalar || col ? 0 : 1;
        return l;
    };
    auto run = [&]() {
        f.y = dpoisoned(dt, n);
        CK(gops_fused(&f, NULL, &E));
        return ddown(dt, f.y, n);
    };
    std::vector<double> ref(n);
    { /* gelu(a) * b */
        auto a = rnd(dt, n, -3, 3), b = rnd(dt, n, -2, 2);
        base(2);
        leaf(dt, a, false, false);
        int lb = leaf(dt, b, false, false);
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, lb, 0, dt, 0, 0};
        auto got = run();
        for (size_t i = 0; i < n; i++) ref[i] = round_to(dt, round_to(dt, (float)gelu_tanh_ref(a[i])) * b[i]);
        check("fused gelu*mul", fmt("%dx%d", rows, dim), dt, got, ref);
        release_all();
    }
    { /* (a + b) * s, chain value second in the Mul */
        auto a = rnd(dt, n), b = rnd(dt, n), sc = rnd(dt, 1, 0.5f, 2.0f);
        base(2);
        leaf(dt, a, false, false);
        int lb = leaf(dt, b, false, false), ls = leaf(dt, sc, false, true);
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, lb, 0, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 1, dt, 0, 0};
        auto got = run();
        for (size_t i = 0; i < n; i++) ref[i] = round_to(dt, sc[0] * round_to(dt, a[i] + b[i]));
        check("fused add*scalar", fmt("%dx%d", rows, dim), dt, got, ref);
        release_all();
    }
    { /* RMSNorm head, then r + ., then . * s */
        auto xv = rnd(dt, n, -2, 2), g = rnd(dt, dim, 0.5f, 1.5f), r = rnd(dt, n), sc = rnd(dt, 1, 0.5f, 2.0f);
        base(2);
        leaf(dt, xv, false, false);
        int lg = leaf(dt, g, false, false); /* gamma: read by the norm, not through strides */
        int lr = leaf(dt, r, false, false), ls = leaf(dt, sc, false, true);
        f.norm_dim = dim, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, lr, 1, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 0, dt, 0, 0};
        auto got = run();
        for (int rr = 0; rr < rows; rr++) {
            double ss = 0;
            for (int i = 0; i < dim; i++) ss += (double)xv[(size_t)rr * dim + i] * xv[(size_t)rr * dim + i];
            double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
            for (int i = 0; i < dim; i++) {
                size_t k = (size_t)rr * dim + i;
                float nv = round_to(dt, (float)(xv[k] * inv * g[i]));
                ref[k] = round_to(dt, round_to(dt, r[k] + nv) * sc[0]);
            }
        }
        check("fused rmsnorm+add*scalar", fmt("%dx%d", rows, dim), dt, got, ref);
        release_all();
    }
    { /* the spelled-out norm (no scale, x / sqrt(mean + eps)) of fp32 rows, cast to dt */
        const int F = GRAFT_DTYPE_FLOAT;
        auto xv = rnd(F, n, -2, 2);
        base(1);
        leaf(F, xv, false, false);
        leaf(F, xv, false, false); /* the gamma slot, unread */
        f.norm_dim = dim, f.gamma = NULL, f.eps = 1e-6f, f.norm_dtype = F, f.norm_div = 1;
        f.ins[0] = {GOPS_FUSE_CAST, 0, 0, 0, dt, 0, 0};
        auto got = run();
        for (int rr = 0; rr < rows; rr++) {
            double ss = 0;
            for (int i = 0; i < dim; i++) ss += (double)xv[(size_t)rr * dim + i] * xv[(size_t)rr * dim + i];
            for (int i = 0; i < dim; i++)
                ref[(size_t)rr * dim + i] = round_to(dt, (float)(xv[(size_t)rr * dim + i] / std::sqrt(ss / dim + 1e-6)));
        }
        check("fused spelled-out norm+cast", fmt("%dx%d", rows, dim), dt, got, ref);
        release_all();
    }
    { /* fp32 m [rows, 1] + eps -> sqrt -> x / . -> cast to dt */
        const int F = GRAFT_DTYPE_FLOAT;
        auto m = rnd(F, rows, 0.1f, 2.0f), eps = rnd(F, 1, 1e-6f, 1e-6f), xv = rnd(F, n, -2, 2);
        base(4);
        leaf(F, m, true, false);
        int le = leaf(F, eps, false, true), lx = leaf(F, xv, false, false);
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, le, 0, F, 0, 0};
        f.ins[1] = {GOPS_FUSE_UNARY, GOPS_SQRT, 0, 0, F, -INFINITY, INFINITY};
        f.ins[2] = {GOPS_FUSE_BINARY, GOPS_DIV, lx, 1, F, 0, 0};
        f.ins[3] = {GOPS_FUSE_CAST, 0, 0, 0, dt, 0, 0};
        auto got = run();
        for (size_t i = 0; i < n; i++) ref[i] = round_to(dt, xv[i] / std::sqrt(m[i / dim] + eps[0]));
        check("fused bcast add-sqrt-div-cast", fmt("%dx%d", rows, dim), dt, got, ref);
        release_all();
    }
}

/* gcuda_gemv_rows_tail: the GEMV (W [N, K]) with the chain that reads its
 * output in the same launch, against the product in fp64 rounded to the
 * dtype and the chain evaluated here op by op (as test_fused): gelu(y) *
 * b per element; RMSNorm(y) * gamma -> r + . -> . * s over the whole
 * output, run by the last block (twice: its counter resets); a pair
 * (gate, up) with gelu(y) * y2. The GEMV outputs are checked too. */
static void test_gemv_tail(int dt, int K, int N)
{
    auto x = rnd(dt, K), w = rnd(dt, (size_t)K * N, -0.1f, 0.1f);
    void *dx = dupload(dt, x), *dw = dupload(dt, w), *dy = dpoisoned(dt, N);
    std::vector<double> yref = rows_ref(w, x, K, N);
    std::vector<float> y(N);
    for (int r = 0; r < N; r++) y[r] = round_to(dt, (float)yref[r]);
    unsigned *counter = (unsigned *)dalloc(sizeof(unsigned));
    CK(gcuda_memset(counter, 0, sizeof(unsigned), NULL, &E));
    gops_fuse f;
    auto base = [&](int n_ins) {
        memset(&f, 0, sizeof f);
        f.rank = 3;
        f.dims[0] = 1, f.dims[1] = 1, f.dims[2] = N;
        f.y_dtype = dt;
        f.n_ins = n_ins;
        f.leaf[0] = dy, f.leaf_dtype[0] = dt, f.st[0][2] = 1;
        f.n_leaf = 1;
    };
    /* RMSNorm(y) * g (eps 1e-6) in fp64, rounded to the dtype */
    auto normed = [&](const std::vector<float> &g) {
        double ss = 0;
        for (int r = 0; r < N; r++) ss += (double)y[r] * y[r];
        double inv = 1.0 / std::sqrt(ss / N + 1e-6);
        std::vector<float> nv(N);
        for (int r = 0; r < N; r++) nv[r] = round_to(dt, (float)(y[r] * inv * g[r]));
        return nv;
    };
    auto leaf = [&](const std::vector<float> &v, bool scalar) {
        int l = f.n_leaf++;
        f.leaf[l] = dupload(dt, v);
        f.leaf_dtype[l] = dt;
        f.st[l][2] = scalar ? 0 : 1;
        return l;
    };
    std::vector<double> ref(N);
    { /* gelu(y) * b */
        auto b = rnd(dt, N, -2, 2);
        base(2);
        int lb = leaf(b, false);
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, lb, 0, dt, 0, 0};
        for (int r = 0; r < N; r++) ref[r] = round_to(dt, round_to(dt, (float)gelu_tanh_ref(y[r])) * b[r]);
        for (int rep = 0; rep < 2; rep++) {
            f.y = dpoisoned(dt, N);
            CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
            CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, NULL, NULL, &E));
            check("gemv rows + gelu*mul: y", fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt, ddown(dt, dy, N), yref);
            check("gemv rows + gelu*mul", fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt, ddown(dt, f.y, N), ref);
        }
    }
    for (int form = 0; form < 3; form++) { /* a softcap c2 tanh(y / c1) (E2B's LM head), with * c1, and with c1 in
                                             * fp32 (the form the kernel writes out: the first two; the third
                                             * interpreted for 2-byte types, the first again for fp32) */
        auto c1 = rnd(dt, 1, 2.0f, 8.0f), c2 = rnd(dt, 1, 2.0f, 8.0f);
        base(3);
        int l1 = leaf(c1, true), l2 = leaf(c2, true);
        if (form == 2 && dt != GRAFT_DTYPE_FLOAT) /* the same value (rnd rounds to dt), stored as fp32 */
            f.leaf[l1] = dupload(GRAFT_DTYPE_FLOAT, c1), f.leaf_dtype[l1] = GRAFT_DTYPE_FLOAT;
        const int op1 = form == 1 ? GOPS_MUL : GOPS_DIV;
        f.ins[0] = {GOPS_FUSE_BINARY, op1, l1, 0, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_UNARY, GOPS_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[2] = {GOPS_FUSE_BINARY, GOPS_MUL, l2, 1, dt, 0, 0};
        for (int r = 0; r < N; r++) {
            float a = round_to(dt, op1 == GOPS_MUL ? y[r] * c1[0] : y[r] / c1[0]);
            ref[r] = round_to(dt, c2[0] * round_to(dt, (float)std::tanh((double)a)));
        }
        const char *name = form == 0 ? "gemv rows + softcap (div)" : form == 1 ? "gemv rows + softcap (mul)"
                                                                               : "gemv rows + softcap, c1 fp32";
        f.y = dpoisoned(dt, N);
        CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, NULL, NULL, &E));
        check(name, fmt("K%d N%d", K, N), dt, ddown(dt, f.y, N), ref);
    }
    if (N % 2 == 0) { /* (y - c) * s with c [N / 2] broadcast over two halves (offsets by index arithmetic), s one value */
        auto c = rnd(dt, N / 2, -2, 2), sc = rnd(dt, 1, 0.5f, 2.0f);
        base(2);
        f.dims[1] = 2, f.dims[2] = N / 2;
        f.st[0][1] = N / 2;
        int lc = leaf(c, false), ls = leaf(sc, true);
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_SUB, lc, 0, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 1, dt, 0, 0};
        for (int r = 0; r < N; r++) ref[r] = round_to(dt, sc[0] * round_to(dt, y[r] - c[r % (N / 2)]));
        f.y = dpoisoned(dt, N);
        CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, NULL, NULL, &E));
        check("gemv rows + broadcast sub, scalar mul", fmt("K%d N%d", K, N), dt, ddown(dt, f.y, N), ref);
    }
    { /* RMSNorm(y) * gamma, then r + ., then . * s */
        auto g = rnd(dt, N, 0.5f, 1.5f), rr = rnd(dt, N), sc = rnd(dt, 1, 0.5f, 2.0f);
        base(2);
        int lg = leaf(g, false), lr = leaf(rr, false), ls = leaf(sc, true);
        f.norm_dim = N, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, lr, 1, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 0, dt, 0, 0};
        auto nv = normed(g);
        for (int r = 0; r < N; r++) ref[r] = round_to(dt, round_to(dt, rr[r] + nv[r]) * sc[0]);
        for (int rep = 0; rep < 2; rep++) {
            f.y = dpoisoned(dt, N);
            CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
            CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, counter, NULL, &E));
            check("gemv rows + rmsnorm+add*scalar: y", fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt,
                  ddown(dt, dy, N), yref);
            check("gemv rows + rmsnorm+add*scalar", fmt("K%d N%d%s", K, N, rep ? " again" : ""), dt,
                  ddown(dt, f.y, N), ref);
        }
    }
    { /* RMSNorm(y) * gamma, then r2 - . (the leaf on the left) kept in fp32, . - r rounded, then r2 - . in fp32
       * and a cast: both operand orders of a subtraction, instructions without rounding, a cast
       * (GRAFT_CUDA_ROWS_V8=2's compact row takes them all) */
        auto g = rnd(dt, N, 0.5f, 1.5f), rr = rnd(dt, N), r2 = rnd(dt, N);
        for (int cast = 0; cast < 2; cast++) {
            base(cast ? 3 : 2);
            int lg = leaf(g, false), lr = leaf(rr, false), l2 = leaf(r2, false);
            f.norm_dim = N, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
            f.ins[0] = {GOPS_FUSE_BINARY, GOPS_SUB, l2, 1, GRAFT_DTYPE_FLOAT, 0, 0};
            f.ins[1] = {GOPS_FUSE_BINARY, GOPS_SUB, lr, 0, dt, 0, 0};
            if (cast) {
                f.ins[1].dtype = GRAFT_DTYPE_FLOAT;
                f.ins[2] = {GOPS_FUSE_CAST, 0, 0, 0, dt, 0, 0};
            }
            auto nv = normed(g);
            for (int r = 0; r < N; r++) ref[r] = round_to(dt, (r2[r] - nv[r]) - rr[r]);
            f.y = dpoisoned(dt, N);
            CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, counter, NULL, &E));
            check(cast ? "gemv rows + rmsnorm, leaf-sub, sub (fp32), cast" : "gemv rows + rmsnorm, leaf-sub (fp32), sub",
                  fmt("K%d N%d", K, N), dt, ddown(dt, f.y, N), ref);
        }
    }
    { /* RMSNorm(y) * gamma, then tanh, r + ., . * s, . - r2: past the leaves loaded before the norm's sum
       * (GO_PRE, the first two instructions: here a unary one and a binary one) */
        auto g = rnd(dt, N, 0.5f, 1.5f), rr = rnd(dt, N), sc = rnd(dt, 1, 0.5f, 2.0f), r2 = rnd(dt, N);
        base(4);
        int lg = leaf(g, false), lr = leaf(rr, false), ls = leaf(sc, true), l2 = leaf(r2, false);
        f.norm_dim = N, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_ADD, lr, 1, dt, 0, 0};
        f.ins[2] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 0, dt, 0, 0};
        f.ins[3] = {GOPS_FUSE_BINARY, GOPS_SUB, l2, 0, dt, 0, 0};
        auto nv = normed(g);
        for (int r = 0; r < N; r++) {
            float t = round_to(dt, (float)std::tanh((double)nv[r]));
            ref[r] = round_to(dt, round_to(dt, round_to(dt, rr[r] + t) * sc[0]) - r2[r]);
        }
        f.y = dpoisoned(dt, N);
        CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, counter, NULL, &E));
        check("gemv rows + rmsnorm+tanh+add*scalar-sub", fmt("K%d N%d", K, N), dt, ddown(dt, f.y, N), ref);
    }
    { /* four binary instructions: more leaves than go_norm_chain_row_v8 loads at once (the other path) */
        auto g = rnd(dt, N, 0.5f, 1.5f), rr = rnd(dt, N), sc = rnd(dt, 1, 0.5f, 2.0f), r2 = rnd(dt, N);
        base(4);
        int lg = leaf(g, false), lr = leaf(rr, false), ls = leaf(sc, true), l2 = leaf(r2, false);
        f.norm_dim = N, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
        f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, lr, 1, dt, 0, 0};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, ls, 0, dt, 0, 0};
        f.ins[2] = {GOPS_FUSE_BINARY, GOPS_SUB, l2, 0, dt, 0, 0};
        f.ins[3] = {GOPS_FUSE_BINARY, GOPS_ADD, lr, 0, dt, 0, 0};
        auto nv = normed(g);
        for (int r = 0; r < N; r++)
            ref[r] = round_to(dt, round_to(dt, round_to(dt, round_to(dt, rr[r] + nv[r]) * sc[0]) - r2[r]) + rr[r]);
        f.y = dpoisoned(dt, N);
        CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, counter, NULL, &E));
        check("gemv rows + rmsnorm+add*scalar-sub+add", fmt("K%d N%d", K, N), dt, ddown(dt, f.y, N), ref);
    }
    { /* RMSNorm(y) * gamma, then the skip RMSNorm of residual + that (+ bias): sum and output */
        auto g = rnd(dt, N, 0.5f, 1.5f), rr = rnd(dt, N), bb = rnd(dt, N, -0.5f, 0.5f), g2 = rnd(dt, N, 0.5f, 1.5f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            base(0);
            int lg = leaf(g, false);
            f.norm_dim = N, f.gamma = f.leaf[lg], f.eps = 1e-6f, f.norm_dtype = dt;
            f.sk_x = dupload(dt, rr), f.sk_gamma = dupload(dt, g2), f.sk_eps = 1e-5f;
            f.sk_bias = with_bias ? dupload(dt, bb) : NULL;
            auto nv = normed(g);
            std::vector<double> sum(N), ref2(N);
            double ss2 = 0;
            for (int r = 0; r < N; r++) {
                sum[r] = (double)rr[r] + nv[r] + (with_bias ? bb[r] : 0.0);
                ss2 += sum[r] * sum[r];
            }
            double inv2 = 1.0 / std::sqrt(ss2 / N + 1e-5);
            for (int r = 0; r < N; r++) ref2[r] = sum[r] * inv2 * g2[r];
            std::string sh = fmt("K%d N%d%s", K, N, with_bias ? " bias" : "");
            for (int rep = 0; rep < 2; rep++) {
                f.y = dpoisoned(dt, N);
                f.sk_y = dpoisoned(dt, N), f.sk_sum = dpoisoned(dt, N);
                CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
                CK(gcuda_gemv_rows_tail(dt, dx, dw, dy, K, N, &f, counter, NULL, &E));
                check("gemv rows + rmsnorm, skip rmsnorm: sum", sh, dt, ddown(dt, f.sk_sum, N), sum);
                check("gemv rows + rmsnorm, skip rmsnorm", sh, dt, ddown(dt, f.sk_y, N), ref2);
            }
        }
    }
    { /* a pair (gate, up): gelu(y) * y2, y2 the second matrix's output */
        auto w2 = rnd(dt, (size_t)K * N, -0.1f, 0.1f);
        void *dw2 = dupload(dt, w2), *dy2 = dpoisoned(dt, N);
        std::vector<double> y2ref = rows_ref(w2, x, K, N);
        for (int r = 0; r < N; r++)
            ref[r] = round_to(dt, round_to(dt, (float)gelu_tanh_ref(y[r])) * round_to(dt, (float)y2ref[r]));
        base(2);
        f.leaf[1] = dy2, f.leaf_dtype[1] = dt, f.st[1][2] = 1, f.n_leaf = 2;
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
        for (int rep = 0; rep < 2; rep++) {
            f.y = dpoisoned(dt, N);
            CK(gcuda_fill_nan(dt, dy, N, NULL, &E));
            CK(gcuda_fill_nan(dt, dy2, N, NULL, &E));
            CK(gcuda_gemv_rows_pair_tail(dt, dx, dw, dw2, dy, dy2, K, N, &f, NULL, &E));
            std::string sh = fmt("K%d N%d%s", K, N, rep ? " again" : "");
            check("gemv rows pair + gelu*mul: y", sh, dt, ddown(dt, dy, N), yref);
            check("gemv rows pair + gelu*mul: y2", sh, dt, ddown(dt, dy2, N), y2ref);
            check("gemv rows pair + gelu*mul", sh, dt, ddown(dt, f.y, N), ref);
        }
    }
    release_all();
}

/* gcuda_gemv_rows_fused with a norm prologue: the GEMV's x is the RMSNorm
 * (skip: of x + skip + bias, whose sum is stored too) of its input, rounded
 * to the dtype as the norm kernels store it, computed by each block; against
 * the norm and the products in fp64 on that rounded x. n matrices, or a
 * pair with gelu(y0) * y1. */
/* n random matrices [Ns[j], K] on the device, poisoned outputs, and their
 * products with x (fp64), for the prologue tests; shape names them. */
struct pro_mats {
    std::vector<const void *> dw;
    std::vector<void *> dy;
    std::vector<std::vector<double>> yref;
    std::string shape;
};
/* A GEMV prologue's x: the RMSNorm of row t (squares summed in fp64) times
 * g, rounded to dt as the norm node stores it. */
static std::vector<float> rms_ref(int dt, const std::vector<float> &t, const std::vector<float> &g, double eps)
{
    const size_t K = t.size();
    double ss = 0;
    for (size_t k = 0; k < K; k++) ss += (double)t[k] * t[k];
    double inv = 1.0 / std::sqrt(ss / (double)K + eps);
    std::vector<float> xn(K);
    for (size_t k = 0; k < K; k++) xn[k] = round_to(dt, (float)(t[k] * inv * g[k]));
    return xn;
}

static pro_mats pro_matrices(int dt, int K, const std::vector<int64_t> &Ns, const std::vector<float> &x)
{
    pro_mats g;
    g.shape = fmt("K%d N", K);
    for (size_t j = 0; j < Ns.size(); j++) {
        auto w = rnd(dt, (size_t)K * Ns[j], -0.1f, 0.1f);
        g.dw.push_back(dupload(dt, w));
        g.dy.push_back(dpoisoned(dt, Ns[j]));
        g.shape += fmt("%s%lld", j ? "+" : "", (long long)Ns[j]);
        g.yref.push_back(rows_ref(w, x, K, Ns[j]));
    }
    return g;
}

/* The chain a chain prologue computes: c = (RMSNorm(y0) * g1 + r) * s
 * (longer: tanh after the norm, minus r2 last), y0 the previous GEMV's
 * raw output; c in fp64 with each op rounded to the dtype as the separate
 * nodes store it. f.y left to the caller. */
struct pro_chain {
    gops_fuse f;
    std::vector<float> c;
};
static pro_chain make_pro_chain(int dt, int K, bool longer)
{
    pro_chain pc;
    auto y0 = rnd(dt, K, -2, 2), g1 = rnd(dt, K, 0.5f, 1.5f), rr = rnd(dt, K), sc = rnd(dt, 1, 0.5f, 2.0f),
         r2 = rnd(dt, K);
    std::vector<float> &c = pc.c;
    c.resize(K);
    double ss = 0;
    for (int k = 0; k < K; k++) ss += (double)y0[k] * y0[k];
    double inv = 1.0 / std::sqrt(ss / K + 1e-6);
    for (int k = 0; k < K; k++) {
        float nv = round_to(dt, (float)(y0[k] * inv * g1[k]));
        if (longer) nv = round_to(dt, (float)std::tanh((double)nv));
        c[k] = round_to(dt, round_to(dt, rr[k] + nv) * sc[0]);
        if (longer) c[k] = round_to(dt, c[k] - r2[k]);
    }
    gops_fuse &f = pc.f;
    memset(&f, 0, sizeof f);
    f.rank = 3, f.dims[0] = 1, f.dims[1] = 1, f.dims[2] = K, f.y_dtype = dt, f.n_leaf = 4, f.n_ins = 2;
    f.leaf[0] = dupload(dt, y0), f.leaf_dtype[0] = dt, f.st[0][2] = 1;
    f.leaf[1] = dupload(dt, g1), f.leaf_dtype[1] = dt, f.st[1][2] = 1;
    f.leaf[2] = dupload(dt, rr), f.leaf_dtype[2] = dt, f.st[2][2] = 1;
    f.leaf[3] = dupload(dt, sc), f.leaf_dtype[3] = dt;
    f.norm_dim = K, f.gamma = f.leaf[1], f.eps = 1e-6f, f.norm_dtype = dt;
    f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, 2, 1, dt, 0, 0};
    f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 3, 0, dt, 0, 0};
    if (longer) { /* tanh first, a sub last: past the leaves loaded before the norm's sum (GO_PRE) */
        f.leaf[4] = dupload(dt, r2), f.leaf_dtype[4] = dt, f.st[4][2] = 1, f.n_leaf = 5, f.n_ins = 4;
        f.ins[2] = f.ins[1], f.ins[1] = f.ins[0];
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[3] = {GOPS_FUSE_BINARY, GOPS_SUB, 4, 0, dt, 0, 0};
    }
    return pc;
}

/* gcuda_gemv_rows_chain_pro: x is the RMSNorm of c (make_pro_chain),
 * computed by every block; c stored by block 0; against c and the GEMVs of
 * x in fp64. */
static void test_gemv_chain_pro(int dt, int K, std::vector<int64_t> Ns, bool longer = false)
{
    int n = (int)Ns.size();
    pro_chain pc = make_pro_chain(dt, K, longer);
    gops_fuse &f = pc.f;
    const std::vector<float> &c = pc.c;
    auto g2 = rnd(dt, K, 0.5f, 1.5f);
    std::vector<float> xn = rms_ref(dt, c, g2, 1e-5);
    gops_rows_norm pn = {};
    pn.gamma = dupload(dt, g2);
    pn.eps = 1e-5f;
    pro_mats gm = pro_matrices(dt, K, Ns, xn);
    std::vector<const void *> &dw = gm.dw;
    std::vector<void *> &dy = gm.dy;
    std::vector<std::vector<double>> &yref = gm.yref;
    std::string shape = gm.shape + (longer ? " tanh,add,mul,sub" : "");
    std::vector<double> cref(c.begin(), c.end());
    for (int rep = 0; rep < 2; rep++) {
        f.y = dpoisoned(dt, K);
        for (int j = 0; j < n; j++) CK(gcuda_fill_nan(dt, dy[j], Ns[j], NULL, &E));
        CK(gcuda_gemv_rows_chain_pro(dt, &f, &pn, dw.data(), dy.data(), Ns.data(), n, K, NULL, &E));
        std::string sh = shape + (rep ? " again" : "");
        check("gemv rows, chain prologue: c", sh, dt, ddown(dt, f.y, K), cref);
        for (int j = 0; j < n; j++) check("gemv rows, chain prologue", sh + fmt(" y%d", j), dt, ddown(dt, dy[j], Ns[j]), yref[j]);
    }
    release_all();
}

/* gcuda_gemv_rows_chain_pro_tail, the compact chain's forms (2-byte types):
 * x = c (form 1: down's post-norm and residual add before the per-layer
 * input's gate, gelu(y) * the layer's input per element), the RMSNorm of c
 * with that per-element tail (2), the skip RMSNorm of c + skip + bias
 * before the gate/up pair (3: o's post-norm before the MLP, gelu(gate) *
 * up); c stored or not (store_c); leaf_is_y (forms 1, 2): the chain's L is
 * the GEMV's own output, gelu(y) * y, which must be read after the store
 * (no early read of such an L by rows_gm_pre; the poisoned y would
 * show). Against fp64 as the separate nodes
 * round; then a chain the compact form does not take (tanh, four
 * instructions) and an fp32 one must be refused (GRAFT_EUNSUPPORTED). */
static void test_gemv_chain_pro_tail(int dt, int K, int form, int64_t N, bool store_c, bool leaf_is_y = false)
{
    const bool pair = form == 3;
    pro_chain pc = make_pro_chain(dt, K, false);
    gops_fuse &f = pc.f;
    const std::vector<float> &c = pc.c;
    auto g2 = rnd(dt, K, 0.5f, 1.5f), sk = rnd(dt, K), bias = rnd(dt, K, -0.5f, 0.5f), ple = rnd(dt, N);
    std::vector<float> t(c);
    if (form == 3)
        for (int k = 0; k < K; k++) t[k] = c[k] + sk[k] + bias[k];
    std::vector<float> xn = form == 1 ? c : rms_ref(dt, t, g2, 1e-5);
    gops_rows_norm pn = {};
    pn.gamma = dupload(dt, g2);
    pn.eps = 1e-5f;
    if (form == 3) pn.skip = dupload(dt, sk), pn.bias = dupload(dt, bias), pn.sum = dpoisoned(dt, K);
    std::vector<int64_t> Ns(pair ? 2 : 1, N);
    pro_mats gm = pro_matrices(dt, K, Ns, xn);
    std::vector<std::vector<double>> &yref = gm.yref;
    gops_fuse tl; /* gelu(y0) * (y1 of the pair, or the layer's input) */
    memset(&tl, 0, sizeof tl);
    tl.rank = 1, tl.dims[0] = N, tl.y_dtype = dt, tl.n_ins = 2, tl.n_leaf = 2;
    tl.leaf[0] = gm.dy[0], tl.leaf_dtype[0] = dt, tl.st[0][0] = 1;
    tl.leaf[1] = pair ? gm.dy[1] : leaf_is_y ? gm.dy[0] : dupload(dt, ple), tl.leaf_dtype[1] = dt, tl.st[1][0] = 1;
    tl.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
    tl.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
    std::vector<double> tref;
    for (int64_t r = 0; r < N; r++)
        tref.push_back(round_to(dt, round_to(dt, (float)gelu_tanh_ref(round_to(dt, (float)yref[0][r]))) *
                                        (pair        ? round_to(dt, (float)yref[1][r])
                                         : leaf_is_y ? round_to(dt, (float)yref[0][r])
                                                     : ple[r])));
    const char *name = form == 1 ? "gemv rows, compact chain prologue, x = c, gelu*mul"
                       : form == 2 ? "gemv rows, compact chain prologue, norm, gelu*mul"
                                   : "gemv rows pair, compact chain prologue, skip norm, gelu*mul";
    std::string shape = gm.shape + (store_c ? "" : ", c not stored") + (leaf_is_y ? ", gelu(y) * y" : "");
    std::vector<double> cref(c.begin(), c.end()), sref(t.begin(), t.end());
    for (int rep = 0; rep < 2; rep++) {
        f.y = store_c ? dpoisoned(dt, K) : NULL;
        tl.y = dpoisoned(dt, N);
        for (size_t j = 0; j < Ns.size(); j++) CK(gcuda_fill_nan(dt, gm.dy[j], Ns[j], NULL, &E));
        CK(gcuda_gemv_rows_chain_pro_tail(dt, &f, form == 1 ? NULL : &pn, gm.dw.data(), gm.dy.data(), Ns.data(),
                                          (int)Ns.size(), K, &tl, pair, NULL, &E));
        std::string sh = shape + (rep ? " again" : "");
        if (store_c) check(name, sh + " c", dt, ddown(dt, f.y, K), cref);
        if (form == 3) check(name, sh + " sum", dt, ddown(dt, pn.sum, K), sref);
        for (size_t j = 0; j < Ns.size(); j++) check(name, sh + fmt(" y%d", (int)j), dt, ddown(dt, gm.dy[j], Ns[j]), yref[j]);
        check(name, sh + " tail", dt, ddown(dt, tl.y, N), tref);
    }
    /* refused: a chain the compact form does not take; the same call in fp32 */
    pro_chain lp = make_pro_chain(dt, K, true);
    lp.f.y = NULL;
    graft_status st = gcuda_gemv_rows_chain_pro_tail(dt, &lp.f, form == 1 ? NULL : &pn, gm.dw.data(), gm.dy.data(),
                                                     Ns.data(), (int)Ns.size(), K, &tl, pair, NULL, &E);
    check(name, shape + ", tanh,add,mul,sub refused", dt, {st == GRAFT_EUNSUPPORTED ? 0.0f : 1.0f}, {0.0});
    f.y_dtype = tl.y_dtype = f.leaf_dtype[0] = GRAFT_DTYPE_FLOAT;
    st = gcuda_gemv_rows_chain_pro_tail(GRAFT_DTYPE_FLOAT, &f, form == 1 ? NULL : &pn, gm.dw.data(), gm.dy.data(),
                                        Ns.data(), (int)Ns.size(), K, &tl, pair, NULL, &E);
    check(name, shape + ", fp32 refused", dt, {st == GRAFT_EUNSUPPORTED ? 0.0f : 1.0f}, {0.0});
    release_all();
}

static void test_gemv_pro(int dt, int K, std::vector<int64_t> Ns, bool skip, bool pair)
{
    int n = (int)Ns.size();
    auto xin = rnd(dt, K, -2, 2), sk = rnd(dt, K), bias = rnd(dt, K, -0.5f, 0.5f), g = rnd(dt, K, 0.5f, 1.5f);
    std::vector<float> t(K);
    for (int k = 0; k < K; k++) t[k] = skip ? xin[k] + sk[k] + bias[k] : xin[k];
    std::vector<float> xn = rms_ref(dt, t, g, 1e-6);
    gops_rows_norm pn = {};
    pn.x = dupload(dt, xin);
    pn.gamma = dupload(dt, g);
    pn.eps = 1e-6f;
    if (skip) {
        pn.skip = dupload(dt, sk);
        pn.bias = dupload(dt, bias);
        pn.sum = dpoisoned(dt, K);
    }
    pro_mats gm = pro_matrices(dt, K, Ns, xn);
    std::vector<const void *> &dw = gm.dw;
    std::vector<void *> &dy = gm.dy;
    std::vector<std::vector<double>> &yref = gm.yref;
    std::string shape = gm.shape;
    gops_fuse f;
    memset(&f, 0, sizeof f);
    std::vector<double> cref;
    if (pair) { /* gelu(y0) * y1 */
        f.rank = 1, f.dims[0] = Ns[0], f.y_dtype = dt, f.n_ins = 2, f.n_leaf = 2;
        f.leaf[0] = dy[0], f.leaf_dtype[0] = dt, f.st[0][0] = 1;
        f.leaf[1] = dy[1], f.leaf_dtype[1] = dt, f.st[1][0] = 1;
        f.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
        f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
        f.y = dpoisoned(dt, Ns[0]);
        for (int64_t r = 0; r < Ns[0]; r++)
            cref.push_back(round_to(dt, round_to(dt, (float)gelu_tanh_ref(round_to(dt, (float)yref[0][r]))) *
                                            round_to(dt, (float)yref[1][r])));
    }
    const char *name = skip ? (pair ? "gemv rows pair, skip-norm prologue" : "gemv rows, skip-norm prologue")
                            : (pair ? "gemv rows pair, norm prologue" : "gemv rows, norm prologue");
    for (int rep = 0; rep < 2; rep++) {
        for (int j = 0; j < n; j++) CK(gcuda_fill_nan(dt, dy[j], Ns[j], NULL, &E));
        CK(gcuda_gemv_rows_fused(dt, &pn, dw.data(), dy.data(), Ns.data(), n, K, pair ? &f : NULL, NULL, pair,
                                 NULL, &E));
        std::string sh = shape + (rep ? " again" : "");
        for (int j = 0; j < n; j++) check(name, sh + fmt(" y%d", j), dt, ddown(dt, dy[j], Ns[j]), yref[j]);
        if (skip) {
            std::vector<double> sref(t.begin(), t.end());
            check(name, sh + " sum", dt, ddown(dt, pn.sum, K), sref);
        }
        if (pair) check(name, sh + " gelu*mul", dt, ddown(dt, f.y, Ns[0]), cref);
    }
    release_all();
}

/* gops_argmax against the host's greedy loop (best = 0; x[i] > x[best]
 * moves it) on the values as stored: ties (many, in 16-bit types), all
 * equal, -inf everywhere, NaN at 0 and elsewhere, the maximum last. Exact:
 * the row's error is the number of cases whose index differs. */
static void test_argmax(int dt, int n)
{
    int bad = 0, cases = 0;
    for (int c = 0; c < 8; c++) {
        std::vector<float> x = rnd(dt, (size_t)n, -8, 8);
        if (c == 6) x[n - 1] = 9.0f; /* in the scalar tail when n is no multiple of the vector */
        /* c == 7: x from its second element (not 16-byte aligned: the scalar path), the maximum near the end */
        if (c == 7) x[n - 2] = 9.0f;
        if (c == 1) std::fill(x.begin(), x.end(), 0.5f);
        if (c == 2) std::fill(x.begin(), x.end(), -INFINITY);
        if (c == 3) x[0] = NAN;
        if (c == 4) {
            x[n / 3] = NAN;
            x[n - 1] = 9.0f;
        }
        if (c == 5) x[n / 2] = x[n / 5] = 8.5f; /* a tie for the maximum: the lower index */
        std::vector<unsigned char> h(x.size() * gcuda_dtype_size(dt));
        pack(dt, x.data(), x.size(), h.data());
        unpack(dt, h.data(), x.size(), x.data());
        const int off = c == 7 ? 1 : 0;
        int64_t want = 0;
        for (int64_t i = 1; i < n - off; i++)
            if (x[i + off] > x[want + off]) want = i;
        void *dx = (char *)dupload(dt, x) + off * gcuda_dtype_size(dt);
        int64_t *dout = (int64_t *)dalloc(sizeof(int64_t)), got = -7;
        void *ws = dalloc(GOPS_ARGMAX_WS);
        CUCK(cudaMemset(dout, 0xff, sizeof(int64_t)));
        CUCK(cudaMemset(ws, 0, GOPS_ARGMAX_WS));
        /* twice on one workspace: its counter resets itself */
        CK(gops_argmax(dt, dx, n - off, dout, ws, NULL, &E));
        CK(gops_argmax(dt, dx, n - off, dout, ws, NULL, &E));
        /* the pipelined decode's form: the id as int32 too, the row kept
         * (byte for byte; the keep buffer's head poisoned; at c == 7 the
         * keep buffer misaligned like x, the scalar path) */
        const size_t es = gcuda_dtype_size(dt), kb = (size_t)(n - off) * es;
        char *dkeep = (char *)dalloc(kb + 16) + off * es;
        int32_t *d32 = (int32_t *)dalloc(sizeof(int32_t)), got32 = -7;
        int64_t *dout2 = (int64_t *)dalloc(sizeof(int64_t)), got2 = -7;
        CUCK(cudaMemset(dkeep, 0xa5, kb));
        CUCK(cudaMemset(d32, 0xff, sizeof(int32_t)));
        CUCK(cudaMemset(dout2, 0xff, sizeof(int64_t)));
        /* and into host memory the device maps (the pipelined decode's pick, read once the kernel is done) */
        int64_t *hmap = NULL, *hmap_d = NULL;
        CUCK(cudaHostAlloc((void **)&hmap, sizeof *hmap, cudaHostAllocMapped));
        CUCK(cudaHostGetDevicePointer((void **)&hmap_d, hmap, 0));
        *hmap = -7;
        CK(gops_argmax_to(dt, dx, n - off, c % 2 ? NULL : dout2, d32, c % 3 ? hmap_d : NULL, dkeep, ws, NULL, &E));
        CK(gcuda_sync(NULL, &E));
        const int64_t goth = *hmap;
        CUCK(cudaFreeHost(hmap));
        CK(gcuda_download(&got, dout, sizeof got, NULL, &E));
        CK(gcuda_download(&got32, d32, sizeof got32, NULL, &E));
        CK(gcuda_download(&got2, dout2, sizeof got2, NULL, &E));
        std::vector<unsigned char> kept(kb);
        CK(gcuda_download(kept.data(), dkeep, kb, NULL, &E));
        const bool keep_ok = !memcmp(kept.data(), h.data() + off * es, kb);
        const bool ok2 = got32 == want && (c % 2 ? got2 == -1 : got2 == want) && (c % 3 ? goth == want : goth == -7);
        cases++;
        if (got != want || !ok2 || !keep_ok) {
            bad++;
            fprintf(stderr, "argmax %s n%d case %d: got %lld (int32 %d, second %lld), want %lld; row kept: %s\n",
                    dname(dt), n, c, (long long)got, (int)got32, (long long)got2, (long long)want,
                    keep_ok ? "yes" : "NO");
        }
        release_all();
    }
    row r{"argmax", fmt("n%d (%d cases)", n, cases), dt, 0, (size_t)cases, (double)bad, 0.0, bad == 0};
    g_rows.push_back(r);
}

static void test_binary(int dt, gcuda_binary_op op, int n, int bn)
{
    auto a = rnd(dt, n, -4, 4), b = rnd(dt, bn, -4, 4);
    void *da = dupload(dt, a), *db = dupload(dt, b), *dy = dpoisoned(dt, n);
    CK(gcuda_binary(op, dt, da, db, dy, n, bn, NULL, &E));
    auto got = ddown(dt, dy, n);
    std::vector<double> ref(n);
    for (int i = 0; i < n; i++)
        ref[i] = op == GCUDA_BINARY_ADD ? (double)a[i] + b[i % bn] : (double)a[i] * b[i % bn];
    check(op == GCUDA_BINARY_ADD ? "add" : "mul", fmt("n%d b%d", n, bn), dt, got, ref);
    release_all();
}

/* n tables of rows[j] x dim[j] gathered at the same ids in one launch
 * (gcuda_gather_rows_multi), each against the ONNX Gather rule as
 * test_gather's; rows of 16 bytes and of other widths (the launch's two
 * element sizes). */
static void test_gather_multi(int dt, std::vector<int> rows, std::vector<int> dim)
{
    const int n = (int)rows.size();
    std::vector<int64_t> ids = {5, -1, 0, 40, -41, 3, 3, 39};
    std::vector<std::vector<float>> t(n);
    std::vector<const void *> tab(n);
    std::vector<void *> out(n);
    std::vector<int64_t> r64(rows.begin(), rows.end()), d64(dim.begin(), dim.end());
    for (int j = 0; j < n; j++) {
        t[j] = rnd(dt, (size_t)rows[j] * dim[j]);
        tab[j] = dupload(dt, t[j]);
        out[j] = dpoisoned(dt, ids.size() * dim[j]);
    }
    int64_t *dids = (int64_t *)dalloc(ids.size() * sizeof(int64_t));
    CK(gcuda_upload(dids, ids.data(), ids.size() * sizeof(int64_t), NULL, &E));
    CK(gcuda_gather_rows_multi(dt, n, tab.data(), r64.data(), d64.data(), dids, (int64_t)ids.size(), out.data(), NULL,
                               &E));
    for (int j = 0; j < n; j++) {
        auto got = ddown(dt, out[j], ids.size() * dim[j]);
        std::vector<double> ref(got.size(), 0.0);
        for (size_t i = 0; i < ids.size(); i++) {
            int64_t id = ids[i] < 0 ? ids[i] + rows[j] : ids[i];
            if (id < 0 || id >= rows[j]) continue;
            for (int d = 0; d < dim[j]; d++) ref[i * dim[j] + d] = t[j][(size_t)id * dim[j] + d];
        }
        check("gather_rows_multi", fmt("table %d of %d: %dx%d, %zu ids", j, n, rows[j], dim[j], ids.size()), dt, got,
              ref);
    }
    release_all();
}

static void test_gather(int dt, int rows, int dim)
{
    auto t = rnd(dt, (size_t)rows * dim);
    std::vector<int64_t> ids = {5, rows - 1, -1, 0, rows, -(int64_t)rows - 1, 3, 3};
    void *dtab = dupload(dt, t), *dy = dpoisoned(dt, ids.size() * dim);
    int64_t *dids = (int64_t *)dalloc(ids.size() * sizeof(int64_t));
    CK(gcuda_upload(dids, ids.data(), ids.size() * sizeof(int64_t), NULL, &E));
    CK(gcuda_gather_rows(dt, dtab, rows, dim, dids, (int64_t)ids.size(), dy, NULL, &E));
    auto got = ddown(dt, dy, ids.size() * dim);
    std::vector<double> ref(got.size(), 0.0);
    for (size_t i = 0; i < ids.size(); i++) {
        int64_t id = ids[i] < 0 ? ids[i] + rows : ids[i];
        if (id < 0 || id >= rows) continue;
        for (int d = 0; d < dim; d++) ref[i * dim + d] = t[(size_t)id * dim + d];
    }
    check("gather_rows", fmt("%dx%d, %zu ids", rows, dim, ids.size()), dt, got, ref);
    release_all();
}

/* The integer ops (the input ids' subgraph on the device) against the
 * host's loops, exactly: a row's error is the number of elements that
 * differ (outputs poisoned first). Values span both signs and the int32
 * range's ends (wrapping arithmetic, as the host's two's complement). */
static void int_row(const char *k, const std::string &shape, int dt, size_t n, size_t bad)
{
    row r{k, shape, dt, 0, n, (double)bad, 0.0, bad == 0};
    g_rows.push_back(r);
}

template <typename T> static std::vector<T> int_rnd(size_t n, std::mt19937 &g)
{
    std::vector<T> v(n);
    std::uniform_int_distribution<int> d(-6, 6);
    for (size_t i = 0; i < n; i++) v[i] = (T)d(g);
    if (n > 3) v[1] = std::numeric_limits<T>::max(), v[2] = std::numeric_limits<T>::min();
    return v;
}

template <typename T> static void *int_up(const std::vector<T> &v)
{
    void *d = dalloc(v.size() * sizeof(T) + 8);
    CK(gcuda_upload(d, v.data(), v.size() * sizeof(T), NULL, &E));
    return d;
}

template <typename T> static std::vector<T> int_down(const void *d, size_t n)
{
    std::vector<T> v(n);
    CK(gcuda_sync(NULL, &E));
    CK(gcuda_download(v.data(), d, n * sizeof(T), NULL, &E));
    return v;
}

static void *poisoned_bytes(size_t n)
{
    void *d = dalloc(n + 8);
    CUCK(cudaMemset(d, 0x5a, n + 8));
    return d;
}

template <typename T> static void test_int_ops(int dt)
{
    std::mt19937 g(7);
    /* a [2, 3, 5] op b [1, 3, 1]: broadcast strides */
    const int64_t A = 2, B = 3, C = 5, n = A * B * C;
    auto a = int_rnd<T>((size_t)n, g), b = int_rnd<T>((size_t)B, g);
    gops_shape sh = {};
    sh.rank = 3;
    sh.dims[0] = A, sh.dims[1] = B, sh.dims[2] = C;
    sh.st[0][0] = B * C, sh.st[0][1] = C, sh.st[0][2] = 1;
    sh.st[1][0] = 0, sh.st[1][1] = 1, sh.st[1][2] = 0;
    void *da = int_up(a), *db = int_up(b);
    const gops_int_op ops[] = {GOPS_I_ADD, GOPS_I_SUB, GOPS_I_MUL, GOPS_I_MAX, GOPS_I_MIN, GOPS_I_EQUAL, GOPS_I_LESS,
                               GOPS_I_GREATER};
    const char *names[] = {"int add", "int sub", "int mul", "int max", "int min", "int equal", "int less", "int greater"};
    for (int k = 0; k < 8; k++) {
        bool cmp = ops[k] >= GOPS_I_EQUAL;
        void *dy = poisoned_bytes((size_t)n * sizeof(T));
        CK(gops_int_binary(ops[k], dt, &sh, da, db, dy, NULL, &E));
        size_t bad = 0;
        std::vector<T> y = cmp ? std::vector<T>() : int_down<T>(dy, (size_t)n);
        std::vector<uint8_t> yb = cmp ? int_down<uint8_t>(dy, (size_t)n) : std::vector<uint8_t>();
        for (int64_t i = 0; i < n; i++) {
            using U = typename std::make_unsigned<T>::type;
            T u = a[(size_t)i], v = b[(size_t)((i / C) % B)];
            int64_t want = ops[k] == GOPS_I_ADD   ? (int64_t)(T)((U)u + (U)v)
                           : ops[k] == GOPS_I_SUB ? (int64_t)(T)((U)u - (U)v)
                           : ops[k] == GOPS_I_MUL ? (int64_t)(T)((U)u * (U)v)
                           : ops[k] == GOPS_I_MAX ? (int64_t)std::max(u, v)
                           : ops[k] == GOPS_I_MIN ? (int64_t)std::min(u, v)
                           : ops[k] == GOPS_I_EQUAL ? (int64_t)(u == v)
                           : ops[k] == GOPS_I_LESS  ? (int64_t)(u < v)
                                                    : (int64_t)(u > v);
            bad += (cmp ? (int64_t)yb[(size_t)i] : (int64_t)y[(size_t)i]) != want;
        }
        int_row(names[k], "[2,3,5] by [1,3,1]", dt, (size_t)n, bad);
    }
    /* clip */
    {
        void *dy = poisoned_bytes((size_t)n * sizeof(T));
        CK(gops_int_clip(dt, da, dy, n, -2, 3, NULL, &E));
        auto y = int_down<T>(dy, (size_t)n);
        size_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += y[(size_t)i] != std::min<T>(std::max<T>(a[(size_t)i], -2), 3);
        int_row("int clip", "30, [-2, 3]", dt, (size_t)n, bad);
    }
    /* casts to and from bool and the other width */
    {
        const int other = dt == GRAFT_DTYPE_INT64 ? GRAFT_DTYPE_INT32 : GRAFT_DTYPE_INT64;
        void *db8 = poisoned_bytes((size_t)n), *dw = poisoned_bytes((size_t)n * 8), *dback = poisoned_bytes((size_t)n * sizeof(T));
        CK(gops_int_cast(dt, GRAFT_DTYPE_BOOL, da, db8, n, NULL, &E));
        CK(gops_int_cast(GRAFT_DTYPE_BOOL, dt, db8, dback, n, NULL, &E));
        CK(gops_int_cast(dt, other, da, dw, n, NULL, &E));
        auto yb = int_down<uint8_t>(db8, (size_t)n);
        auto back = int_down<T>(dback, (size_t)n);
        size_t bad = 0, badw = 0;
        for (int64_t i = 0; i < n; i++) bad += yb[(size_t)i] != (a[(size_t)i] != 0) || back[(size_t)i] != (T)(a[(size_t)i] != 0);
        if (other == GRAFT_DTYPE_INT32) {
            auto w = int_down<int32_t>(dw, (size_t)n);
            for (int64_t i = 0; i < n; i++) badw += w[(size_t)i] != (int32_t)a[(size_t)i];
        } else {
            auto w = int_down<int64_t>(dw, (size_t)n);
            for (int64_t i = 0; i < n; i++) badw += w[(size_t)i] != (int64_t)a[(size_t)i];
        }
        int_row("int cast", "to bool and back", dt, (size_t)n, bad);
        int_row("int cast", other == GRAFT_DTYPE_INT32 ? "to int32" : "to int64", dt, (size_t)n, badw);
    }
    /* cumsum along the middle axis of [2, 3, 5], [1, 300, 1] (runs of 2, the
     * last threads idle) and [2, 2049, 3] (runs of 9, the last one short), each mode */
    for (int shp = 0; shp < 3; shp++) {
        const int64_t o = shp == 1 ? 1 : A, len = shp == 0 ? B : shp == 1 ? 300 : 2049, in = shp == 1 ? 1 : shp ? 3 : C,
                      m = o * len * in;
        auto x = int_rnd<T>((size_t)m, g);
        void *dx = int_up(x);
        for (int mode = 0; mode < 4; mode++) {
            const bool excl = mode & 1, rev = mode & 2;
            void *dy = poisoned_bytes((size_t)m * sizeof(T));
            CK(gops_int_cumsum(dt, dx, dy, o, len, in, excl, rev, NULL, &E));
            auto y = int_down<T>(dy, (size_t)m);
            size_t bad = 0;
            for (int64_t oo = 0; oo < o; oo++)
                for (int64_t ii = 0; ii < in; ii++) {
                    using U = typename std::make_unsigned<T>::type;
                    U acc = 0;
                    for (int64_t k = 0; k < len; k++) {
                        int64_t j = rev ? len - 1 - k : k, at = (oo * len + j) * in + ii;
                        if (excl) {
                            bad += y[(size_t)at] != (T)acc;
                            acc += (U)x[(size_t)at];
                        } else {
                            acc += (U)x[(size_t)at];
                            bad += y[(size_t)at] != (T)acc;
                        }
                    }
                }
            int_row("int cumsum", fmt("[%lld,%lld,%lld]%s%s", (long long)o, (long long)len, (long long)in,
                                      excl ? " exclusive" : "", rev ? " reverse" : ""),
                    dt, (size_t)m, bad);
        }
    }
    /* where over integers: cond [2, 1, 5], x [2, 3, 5], z a scalar */
    {
        std::vector<uint8_t> c((size_t)(A * C));
        for (size_t i = 0; i < c.size(); i++) c[i] = (uint8_t)(g() & 1);
        std::vector<T> z = {(T)-9};
        void *dc = int_up(c), *dz = int_up(z), *dy = poisoned_bytes((size_t)n * sizeof(T));
        gops_shape w = {};
        w.rank = 3;
        w.dims[0] = A, w.dims[1] = B, w.dims[2] = C;
        w.st[0][0] = C, w.st[0][1] = 0, w.st[0][2] = 1;
        w.st[1][0] = B * C, w.st[1][1] = C, w.st[1][2] = 1;
        CK(gops_where(dt, &w, (const uint8_t *)dc, da, dz, dy, NULL, &E));
        auto y = int_down<T>(dy, (size_t)n);
        size_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t i0 = i / (B * C), i2 = i % C;
            bad += y[(size_t)i] != (c[(size_t)(i0 * C + i2)] ? a[(size_t)i] : z[0]);
        }
        int_row("where", "[2,1,5] ? [2,3,5] : scalar", dt, (size_t)n, bad);
    }
    release_all();
}

/* gops_int_prog against the ops' own kernels (each checked above against
 * the host), output by output and byte for byte, every output poisoned:
 * Gemma's token routing over ids [1, S] (S up to GOPS_IPROG_N), then
 * strided operands, scans along an inner and an outer axis of [2, 5, 3],
 * and one-element instructions (the operands read ahead or not). */
static gops_iprog_ins ip_ins(int kind, int op, int ydt, int rank, const int *dims, void *y)
{
    gops_iprog_ins I;
    memset(&I, 0, sizeof I);
    I.kind = (unsigned char)kind, I.op = (unsigned char)op, I.ydt = (unsigned char)ydt, I.rank = (unsigned char)rank;
    I.n = 1;
    for (int d = 0; d < rank; d++) I.dims[d] = dims[d], I.n *= dims[d];
    I.y = y;
    return I;
}
static void ip_arg(gops_iprog_ins &I, int j, const void *a, int dt, const int64_t *st, long long imm = 0)
{
    I.a[j] = a, I.adt[j] = (unsigned char)dt, I.imm[j] = imm;
    for (int d = 0; d < I.rank; d++) I.st[j][d] = a && st ? (int)st[d] : 0;
}
static size_t ip_bytes(int dt) { return dt == GRAFT_DTYPE_INT64 ? 8 : dt == GRAFT_DTYPE_INT32 ? 4 : 1; }
/* The program again with outputs from[j] moved to to[j] (operands that read
 * them too), kept in device memory and run from there (gops_int_prog_keep,
 * _run): its own outputs, for the same comparison. */
static void ip_run_kept(const gops_iprog &p)
{
    gops_iprog_dev kd = {};
    CK(gops_int_prog_keep(&p, &kd, NULL, &E));
    CK(gops_int_prog_run(&kd, NULL, &E));
    CUCK(cudaDeviceSynchronize()); /* before kd's memory goes */
    gops_int_prog_free(&kd);
}
static void ip_kept(const gops_iprog &pr, void *const *from, void *const *to, int n)
{
    gops_iprog p2 = pr;
    for (int k = 0; k < p2.n; k++)
        for (int j = 0; j < n; j++) {
            if (p2.ins[k].y == from[j]) p2.ins[k].y = to[j];
            for (int a = 0; a < 3; a++)
                if (p2.ins[k].a[a] == from[j]) p2.ins[k].a[a] = to[j];
        }
    ip_run_kept(p2);
}

template <typename T> static void test_int_prog(int dt)
{
    std::mt19937 g(11);
    const int other = dt == GRAFT_DTYPE_INT64 ? GRAFT_DTYPE_INT32 : GRAFT_DTYPE_INT64, B8 = GRAFT_DTYPE_BOOL;
    const int Ss[] = {1, 5, 300, GOPS_IPROG_N};
    for (int S : Ss) {
        auto ids = int_rnd<T>((size_t)S, g);
        std::vector<T> bv = {(T)2};
        void *di = int_up(ids), *db = int_up(bv);
        const int dims[2] = {1, S};
        const int64_t st[2] = {S, 1}, sb[2] = {0, 0};
        gops_shape sh = {}, shb = {};
        sh.rank = shb.rank = 2;
        sh.dims[0] = shb.dims[0] = 1, sh.dims[1] = shb.dims[1] = S;
        sh.st[0][1] = sh.st[1][1] = sh.st[2][1] = 1;
        shb.st[0][1] = 1; /* b [1, 1] broadcast */
        /* outputs: program (p) and kernels (k); dtypes */
        const int ydt[9] = {B8, dt, dt, dt, dt, dt, B8, B8, other};
        void *p[9], *k[9], *q[9];
        for (int j = 0; j < 9; j++) {
            p[j] = poisoned_bytes((size_t)S * ip_bytes(ydt[j]));
            k[j] = poisoned_bytes((size_t)S * ip_bytes(ydt[j]));
            q[j] = poisoned_bytes((size_t)S * ip_bytes(ydt[j]));
        }
        std::vector<T> three = {(T)3}, one = {(T)1};
        void *d3 = int_up(three), *d1 = int_up(one);
        gops_iprog pr;
        memset(&pr, 0, sizeof pr);
        gops_iprog_ins *I = pr.ins;
        I[0] = ip_ins(GOPS_IP_BIN, GOPS_I_EQUAL, B8, 2, dims, p[0]); /* ids == 3 (an immediate) */
        ip_arg(I[0], 0, di, dt, st), ip_arg(I[0], 1, NULL, dt, NULL, 3);
        I[1] = ip_ins(GOPS_IP_CAST, 0, dt, 2, dims, p[1]);
        ip_arg(I[1], 0, p[0], B8, st);
        I[2] = ip_ins(GOPS_IP_CUMSUM, 0, dt, 2, dims, p[2]);
        ip_arg(I[2], 0, p[1], dt, st);
        I[2].len = S, I[2].inner = 1;
        I[3] = ip_ins(GOPS_IP_BIN, GOPS_I_SUB, dt, 2, dims, p[3]); /* - 1 (an immediate) */
        ip_arg(I[3], 0, p[2], dt, st), ip_arg(I[3], 1, NULL, dt, NULL, 1);
        I[4] = ip_ins(GOPS_IP_CLIP, 0, dt, 2, dims, p[4]);
        ip_arg(I[4], 0, p[3], dt, st);
        I[4].imm[1] = 0, I[4].imm[2] = 2;
        I[5] = ip_ins(GOPS_IP_WHERE, 0, dt, 2, dims, p[5]); /* mask ? clipped : ids */
        ip_arg(I[5], 0, p[0], B8, st), ip_arg(I[5], 1, p[4], dt, st), ip_arg(I[5], 2, di, dt, st);
        I[6] = ip_ins(GOPS_IP_BIN, GOPS_I_LESS, B8, 2, dims, p[6]); /* ids < b, b [1, 1] on the device */
        ip_arg(I[6], 0, di, dt, st), ip_arg(I[6], 1, db, dt, sb);
        I[7] = ip_ins(GOPS_IP_CAST, 0, B8, 2, dims, p[7]);
        ip_arg(I[7], 0, p[5], dt, st);
        I[8] = ip_ins(GOPS_IP_CAST, 0, other, 2, dims, p[8]);
        ip_arg(I[8], 0, p[5], dt, st);
        pr.n = 9;
        CK(gops_int_prog(&pr, NULL, &E));
        ip_kept(pr, p, q, 9);
        gops_shape shs = sh; /* a scalar on the device for the kernels' immediates */
        shs.st[1][1] = 0;
        CK(gops_int_binary(GOPS_I_EQUAL, dt, &shs, di, d3, k[0], NULL, &E));
        CK(gops_int_cast(B8, dt, k[0], k[1], S, NULL, &E));
        CK(gops_int_cumsum(dt, k[1], k[2], 1, S, 1, 0, 0, NULL, &E));
        CK(gops_int_binary(GOPS_I_SUB, dt, &shs, k[2], d1, k[3], NULL, &E));
        CK(gops_int_clip(dt, k[3], k[4], S, 0, 2, NULL, &E));
        CK(gops_where(dt, &sh, (const uint8_t *)k[0], k[4], di, k[5], NULL, &E));
        CK(gops_int_binary(GOPS_I_LESS, dt, &shb, di, db, k[6], NULL, &E));
        CK(gops_int_cast(dt, B8, k[5], k[7], S, NULL, &E));
        CK(gops_int_cast(dt, other, k[5], k[8], S, NULL, &E));
        const char *what[9] = {"equal", "cast", "cumsum", "sub", "clip", "where", "less", "to bool", "to width"};
        for (int j = 0; j < 9; j++) {
            size_t nb = (size_t)S * ip_bytes(ydt[j]);
            auto a = int_down<uint8_t>(p[j], nb + 8), b = int_down<uint8_t>(k[j], nb + 8), c = int_down<uint8_t>(q[j], nb + 8);
            size_t bad = 0, badk = 0;
            for (size_t i = 0; i < nb + 8; i++) bad += a[i] != b[i], badk += c[i] != b[i]; /* the 8 bytes past: still poisoned */
            int_row("int program", fmt("routing [1,%d]: %s", S, what[j]), dt, nb, bad);
            int_row("int program, kept", fmt("routing [1,%d]: %s", S, what[j]), dt, nb, badk);
        }
    }
    /* [2, 5, 3]: max by b [1, 5, 1], where cond [2, 1, 3] ? x : -9, scans along axis 1 (exclusive) and 0 (reverse) */
    {
        const int A = 2, Bd = 5, C = 3, n = A * Bd * C, dims[3] = {A, Bd, C};
        auto xv = int_rnd<T>((size_t)n, g), bv = int_rnd<T>((size_t)Bd, g);
        std::vector<uint8_t> cv((size_t)(A * C));
        for (auto &c : cv) c = (uint8_t)(g() & 1);
        std::vector<T> m9 = {(T)-9};
        void *dx = int_up(xv), *db = int_up(bv), *dc = int_up(cv), *dm9 = int_up(m9);
        const int64_t sx[3] = {Bd * C, C, 1}, sbv[3] = {0, 1, 0}, sc[3] = {C, 0, 1};
        std::vector<T> seven = {(T)7};
        void *d7 = int_up(seven);
        void *p[6], *k[6], *q[6];
        for (int j = 0; j < 6; j++)
            p[j] = poisoned_bytes((size_t)n * sizeof(T)), k[j] = poisoned_bytes((size_t)n * sizeof(T)),
            q[j] = poisoned_bytes((size_t)n * sizeof(T));
        gops_iprog pr;
        memset(&pr, 0, sizeof pr);
        gops_iprog_ins *I = pr.ins;
        I[0] = ip_ins(GOPS_IP_BIN, GOPS_I_MAX, dt, 3, dims, p[0]);
        ip_arg(I[0], 0, dx, dt, sx), ip_arg(I[0], 1, db, dt, sbv);
        I[1] = ip_ins(GOPS_IP_WHERE, 0, dt, 3, dims, p[1]);
        ip_arg(I[1], 0, dc, B8, sc), ip_arg(I[1], 1, p[0], dt, sx), ip_arg(I[1], 2, NULL, dt, NULL, -9);
        I[2] = ip_ins(GOPS_IP_CUMSUM, 0, dt, 3, dims, p[2]);
        ip_arg(I[2], 0, p[1], dt, sx);
        I[2].len = Bd, I[2].inner = C, I[2].excl = 1;
        I[3] = ip_ins(GOPS_IP_CUMSUM, 0, dt, 3, dims, p[3]);
        ip_arg(I[3], 0, p[2], dt, sx);
        I[3].len = A, I[3].inner = Bd * C, I[3].rev = 1;
        /* a [5] result read back broadcast over [2, 5, 3] (strides 0, 1, 0): another thread's element */
        const int d5[1] = {Bd};
        const int64_t s1[1] = {1};
        I[4] = ip_ins(GOPS_IP_BIN, GOPS_I_ADD, dt, 1, d5, p[4]);
        ip_arg(I[4], 0, db, dt, s1), ip_arg(I[4], 1, NULL, dt, NULL, 7);
        I[5] = ip_ins(GOPS_IP_BIN, GOPS_I_SUB, dt, 3, dims, p[5]);
        ip_arg(I[5], 0, p[3], dt, sx), ip_arg(I[5], 1, p[4], dt, sbv);
        pr.n = 6;
        CK(gops_int_prog(&pr, NULL, &E));
        ip_kept(pr, p, q, 6);
        gops_shape s3 = {};
        s3.rank = 3;
        for (int d = 0; d < 3; d++) s3.dims[d] = dims[d], s3.st[0][d] = sx[d], s3.st[1][d] = sbv[d];
        CK(gops_int_binary(GOPS_I_MAX, dt, &s3, dx, db, k[0], NULL, &E));
        gops_shape w3 = {};
        w3.rank = 3;
        for (int d = 0; d < 3; d++) w3.dims[d] = dims[d], w3.st[0][d] = sc[d], w3.st[1][d] = sx[d], w3.st[2][d] = 0;
        CK(gops_where(dt, &w3, (const uint8_t *)dc, k[0], dm9, k[1], NULL, &E));
        CK(gops_int_cumsum(dt, k[1], k[2], A, Bd, C, 1, 0, NULL, &E));
        CK(gops_int_cumsum(dt, k[2], k[3], 1, A, Bd * C, 0, 1, NULL, &E));
        gops_shape a5 = {};
        a5.rank = 1, a5.dims[0] = Bd, a5.st[0][0] = 1; /* b: the scalar 7 */
        CK(gops_int_binary(GOPS_I_ADD, dt, &a5, db, d7, k[4], NULL, &E));
        gops_shape b3 = s3;
        for (int d = 0; d < 3; d++) b3.st[0][d] = sx[d], b3.st[1][d] = sbv[d];
        CK(gops_int_binary(GOPS_I_SUB, dt, &b3, k[3], k[4], k[5], NULL, &E));
        const char *what[6] = {"max by [1,5,1]", "where [2,1,3] ? x : -9", "cumsum axis 1 exclusive",
                               "cumsum axis 0 reverse", "[5] + 7", "minus the [5] result as [1,5,1]"};
        for (int j = 0; j < 6; j++) {
            size_t nb = (size_t)(j == 4 ? Bd : n) * sizeof(T);
            auto a = int_down<uint8_t>(p[j], nb + 8), b = int_down<uint8_t>(k[j], nb + 8), c = int_down<uint8_t>(q[j], nb + 8);
            size_t bad = 0, badk = 0;
            for (size_t i = 0; i < nb + 8; i++) bad += a[i] != b[i], badk += c[i] != b[i];
            int_row("int program", fmt("[2,5,3]: %s", what[j]), dt, nb, bad);
            int_row("int program, kept", fmt("[2,5,3]: %s", what[j]), dt, nb, badk);
        }
    }
    /* one-element instructions (a decode step's): an operand inside an earlier output that is not its start
     * (not read ahead: written by the program), an input read ahead that a later instruction overwrites */
    {
        auto iv = int_rnd<T>(2, g);
        std::vector<T> seven = {(T)7}, three = {(T)3};
        void *d7 = int_up(seven), *d3 = int_up(three);
        void *ip = int_up(iv), *iq = int_up(iv), *ik = int_up(iv); /* the input, one copy a run */
        void *p[2], *k[2], *q[2];
        for (int j = 0; j < 2; j++)
            p[j] = poisoned_bytes(2 * sizeof(T)), k[j] = poisoned_bytes(2 * sizeof(T)), q[j] = poisoned_bytes(2 * sizeof(T));
        const int d2[1] = {2}, d1[1] = {1};
        const int64_t s1[1] = {1};
        gops_iprog pr;
        memset(&pr, 0, sizeof pr);
        gops_iprog_ins *I = pr.ins;
        I[0] = ip_ins(GOPS_IP_BIN, GOPS_I_ADD, dt, 1, d2, p[0]); /* x + 7, [2] */
        ip_arg(I[0], 0, ip, dt, s1), ip_arg(I[0], 1, NULL, dt, NULL, 7);
        I[1] = ip_ins(GOPS_IP_BIN, GOPS_I_SUB, dt, 1, d1, p[1]); /* that result's element 1 - x[0] */
        ip_arg(I[1], 0, (char *)p[0] + sizeof(T), dt, s1), ip_arg(I[1], 1, ip, dt, s1);
        I[2] = ip_ins(GOPS_IP_BIN, GOPS_I_MUL, dt, 1, d1, ip); /* x[0] = that * 3 */
        ip_arg(I[2], 0, p[1], dt, s1), ip_arg(I[2], 1, NULL, dt, NULL, 3);
        pr.n = 3;
        CK(gops_int_prog(&pr, NULL, &E));
        { /* kept: outputs and the element-1 operand moved to q, the input to its own copy */
            gops_iprog p2 = pr;
            p2.ins[0].y = q[0], p2.ins[0].a[0] = iq;
            p2.ins[1].y = q[1], p2.ins[1].a[0] = (char *)q[0] + sizeof(T), p2.ins[1].a[1] = iq;
            p2.ins[2].y = iq, p2.ins[2].a[0] = q[1];
            ip_run_kept(p2);
        }
        gops_shape a2 = {}, a1 = {};
        a2.rank = a1.rank = 1;
        a2.dims[0] = 2, a1.dims[0] = 1;
        a2.st[0][0] = a1.st[0][0] = 1, a1.st[1][0] = 1; /* a2: b the scalar; a1: two one-element operands */
        CK(gops_int_binary(GOPS_I_ADD, dt, &a2, ik, d7, k[0], NULL, &E));
        CK(gops_int_binary(GOPS_I_SUB, dt, &a1, (char *)k[0] + sizeof(T), ik, k[1], NULL, &E));
        CK(gops_int_binary(GOPS_I_MUL, dt, &a1, k[1], d3, ik, NULL, &E));
        void *const outs[3][3] = {{p[0], q[0], k[0]}, {p[1], q[1], k[1]}, {ip, iq, ik}};
        const char *what[3] = {"x + 7 [2]", "its element 1 - x[0], read at its address", "x[0] overwritten after"};
        for (int j = 0; j < 3; j++) {
            const size_t nb = (j == 1 ? 1 : 2) * sizeof(T);
            auto a = int_down<uint8_t>(outs[j][0], nb), c = int_down<uint8_t>(outs[j][1], nb),
                 b = int_down<uint8_t>(outs[j][2], nb);
            size_t bad = 0, badk = 0;
            for (size_t i = 0; i < nb; i++) bad += a[i] != b[i], badk += c[i] != b[i];
            int_row("int program", fmt("one element: %s", what[j]), dt, nb, bad);
            int_row("int program, kept", fmt("one element: %s", what[j]), dt, nb, badk);
        }
    }
    /* every instruction of one element: kept, one thread runs them (go_ip_run's ONE; GRAFT_CUDA_IPROG_ONE=0:
     * not): an exclusive scan of one element, and (int64) an earlier output read at its address as int32 (its
     * low half: no shared copy, this thread's own store read back from memory) */
    {
        auto iv = int_rnd<T>(1, g);
        std::vector<T> one = {(T)1};
        std::vector<int32_t> one32 = {1};
        void *dx = int_up(iv), *d1 = int_up(one), *d1w = int_up(one32);
        const bool wide = dt == GRAFT_DTYPE_INT64;
        const int n = wide ? 4 : 3, ydt[4] = {dt, dt, dt, GRAFT_DTYPE_INT32};
        void *p[4], *k[4], *q[4];
        for (int j = 0; j < n; j++) {
            const size_t nb = ip_bytes(ydt[j]);
            p[j] = poisoned_bytes(nb), k[j] = poisoned_bytes(nb), q[j] = poisoned_bytes(nb);
        }
        const int d1d[1] = {1};
        const int64_t s1[1] = {1};
        gops_iprog pr;
        memset(&pr, 0, sizeof pr);
        gops_iprog_ins *I = pr.ins;
        I[0] = ip_ins(GOPS_IP_BIN, GOPS_I_SUB, dt, 1, d1d, p[0]); /* x - 1 */
        ip_arg(I[0], 0, dx, dt, s1), ip_arg(I[0], 1, NULL, dt, NULL, 1);
        I[1] = ip_ins(GOPS_IP_CUMSUM, 0, dt, 1, d1d, p[1]); /* exclusive: 0 */
        ip_arg(I[1], 0, p[0], dt, s1);
        I[1].len = 1, I[1].inner = 1, I[1].excl = 1;
        I[2] = ip_ins(GOPS_IP_CUMSUM, 0, dt, 1, d1d, p[2]); /* reverse, inclusive: the element */
        ip_arg(I[2], 0, p[0], dt, s1);
        I[2].len = 1, I[2].inner = 1, I[2].rev = 1;
        if (wide) { /* the low half of x - 1, + 1, as int32 */
            I[3] = ip_ins(GOPS_IP_BIN, GOPS_I_ADD, GRAFT_DTYPE_INT32, 1, d1d, p[3]);
            ip_arg(I[3], 0, p[0], GRAFT_DTYPE_INT32, s1), ip_arg(I[3], 1, NULL, GRAFT_DTYPE_INT32, NULL, 1);
        }
        pr.n = n;
        CK(gops_int_prog(&pr, NULL, &E));
        ip_kept(pr, p, q, n);
        gops_shape a1 = {};
        a1.rank = 1, a1.dims[0] = 1, a1.st[0][0] = 1, a1.st[1][0] = 1;
        CK(gops_int_binary(GOPS_I_SUB, dt, &a1, dx, d1, k[0], NULL, &E));
        CK(gops_int_cumsum(dt, k[0], k[1], 1, 1, 1, 1, 0, NULL, &E));
        CK(gops_int_cumsum(dt, k[0], k[2], 1, 1, 1, 0, 1, NULL, &E));
        if (wide) CK(gops_int_binary(GOPS_I_ADD, GRAFT_DTYPE_INT32, &a1, k[0], d1w, k[3], NULL, &E));
        const char *what[4] = {"x - 1", "its exclusive scan", "its reverse scan", "its low half + 1 as int32"};
        for (int j = 0; j < n; j++) {
            const size_t nb = ip_bytes(ydt[j]);
            auto a = int_down<uint8_t>(p[j], nb + 8), b = int_down<uint8_t>(k[j], nb + 8), c = int_down<uint8_t>(q[j], nb + 8);
            size_t bad = 0, badk = 0;
            for (size_t i = 0; i < nb + 8; i++) bad += a[i] != b[i], badk += c[i] != b[i];
            int_row("int program", fmt("all one element: %s", what[j]), dt, nb, bad);
            int_row("int program, kept", fmt("all one element: %s", what[j]), dt, nb, badk);
        }
    }
    release_all();
}

/* ------------------------------------------------------------ bandwidth */

__global__ void init_kernel_f32(float *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = (float)(h & 0xffff) / 32768.0f - 1.0f;
    }
}
template <typename T> __global__ void init_kernel(T *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = (T)((float)(h & 0xffff) / 32768.0f - 1.0f);
    }
}

static void dinit(int dt, void *p, size_t n, unsigned seed)
{
    if (dt == GRAFT_DTYPE_FLOAT)
        init_kernel_f32<<<1024, 256>>>((float *)p, n, seed);
    else if (dt == GRAFT_DTYPE_FLOAT16)
        init_kernel<__half><<<1024, 256>>>((__half *)p, n, seed);
    else
        init_kernel<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)p, n, seed);
    CUCK(cudaGetLastError());
}

/* median over `outer` runs of `inner` back-to-back launches, microseconds per launch */
/* The median over `outer` runs of body() on stream st, in microseconds per
 * `per` units of work. */
template <class B> static double median_us(cudaStream_t st, int per, int outer, B body)
{
    cudaEvent_t e0, e1;
    CUCK(cudaEventCreate(&e0));
    CUCK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int o = 0; o < outer; o++) {
        CUCK(cudaEventRecord(e0, st));
        body();
        CUCK(cudaEventRecord(e1, st));
        CUCK(cudaEventSynchronize(e1));
        float ms;
        CUCK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0 / per);
    }
    CUCK(cudaEventDestroy(e0));
    CUCK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* Per-launch time of `inner` launches in a row (after 3 to warm up). */
template <class F> static double time_us(F launch, int inner = 20, int outer = 7)
{
    for (int i = 0; i < 3; i++) launch(i);
    CUCK(cudaDeviceSynchronize());
    int k = 0;
    return median_us(NULL, inner, outer, [&] {
        for (int i = 0; i < inner; i++) launch(k++);
    });
}

/* Per-launch time of n launches captured in one CUDA graph and replayed:
 * back to back as in a decode step (the GEMV's programmatic launches
 * overlap), no host launch cost. */
template <class F> static double graph_us(F launch, int n = 20, int outer = 7)
{
    cudaStream_t st;
    CUCK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUCK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < n; i++) launch(i, (gcuda_stream)st);
    CUCK(cudaStreamEndCapture(st, &g));
    CUCK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 2; i++) CUCK(cudaGraphLaunch(ge, st));
    double us = median_us(st, n, outer, [&] { CUCK(cudaGraphLaunch(ge, st)); });
    CUCK(cudaGraphExecDestroy(ge));
    CUCK(cudaGraphDestroy(g));
    CUCK(cudaStreamDestroy(st));
    return us;
}

struct bench_row {
    std::string kernel, shape;
    int dt;
    double us, gbs, frac;
};

/* The device copy rate: 1 GiB D2D, bytes read + written, GB/s. */
static double copy_rate(void)
{
    size_t cb = (size_t)1 << 30;
    void *src = dalloc(cb), *dst = dalloc(cb);
    CUCK(cudaMemset(src, 1, cb));
    double cus = time_us([&](int) { CUCK(cudaMemcpyAsync(dst, src, cb, cudaMemcpyDeviceToDevice, NULL)); }, 5, 7);
    double copy_gbs = 2.0 * cb / (cus * 1e-6) / 1e9;
    release_all();
    printf("\ndevice copy (cudaMemcpy D2D, 1 GiB, read + write): %.1f us, %.1f GB/s\n", cus, copy_gbs);
    return copy_gbs;
}

static void skeleton(double copy_gbs);

static void bench(void)
{
    std::vector<bench_row> rows;
    double copy_gbs = copy_rate();

    const size_t rot_bytes = (size_t)512 << 20; /* rotate buffers over >= 512 MiB: well past the L2 */
    /* E2B's layer shapes first (q 8x256 / 8x512, k/v 256, MLP 6144 / 12288, per-layer 256), then others */
    int gemv_shapes[][2] = {{1536, 2048}, {1536, 4096}, {1536, 256},   {1536, 6144}, {6144, 1536}, {1536, 12288},
                            {12288, 1536}, {1536, 8960}, {8960, 1536}, {4096, 4096}, {1536, 262144}};
    for (int dt : DTYPES) {
        size_t es = gcuda_dtype_size(dt);
        for (auto &sh : gemv_shapes) {
            int K = sh[0], N = sh[1];
            size_t wb = (size_t)K * N * es;
            int copies = (int)std::max<size_t>(1, (rot_bytes + wb - 1) / wb);
            if (copies > 64) copies = 64;
            std::vector<void *> W(copies);
            for (int i = 0; i < copies; i++) {
                W[i] = dalloc(wb);
                dinit(dt, W[i], (size_t)K * N, 77u + i);
            }
            void *x = dalloc((size_t)K * es), *y = dalloc((size_t)N * es);
            dinit(dt, x, K, 5u);
            size_t wsb;
            CK(gcuda_gemv_plan(dt, K, N, &wsb, &E));
            void *ws = wsb ? dalloc(wsb) : NULL;
            if (wsb) CK(gcuda_memset(ws, 0, wsb, NULL, &E));
            double us = time_us([&](int i) { CK(gcuda_gemv(dt, x, W[i % copies], y, K, N, ws, wsb, NULL, &E)); });
            double bytes = (double)wb + (double)(K + N) * es;
            double gbs = bytes / (us * 1e-6) / 1e9;
            rows.push_back({"gemv", fmt("K%d N%d", K, N), dt, us, gbs, gbs / copy_gbs});
            /* the same launches inside a CUDA graph, as in a replayed decode step */
            double gus = graph_us([&](int i, gcuda_stream st) {
                CK(gcuda_gemv(dt, x, W[i % copies], y, K, N, ws, wsb, st, &E));
            });
            double ggbs = bytes / (gus * 1e-6) / 1e9;
            rows.push_back({"gemv in a graph", fmt("K%d N%d", K, N), dt, gus, ggbs, ggbs / copy_gbs});
            /* the same product with the weight stored [N, K] (the executor's
             * layout for constant MatMul weights): each output's row streamed */
            for (int un : {4, 2, 8}) {
                double rus = time_us([&](int i) {
                    CK(gcuda_gemv_rows_tuned(dt, x, W[i % copies], y, K, N, un, NULL, &E));
                });
                double rgbs = bytes / (rus * 1e-6) / 1e9;
                rows.push_back({fmt("gemv rows, unroll %d", un), fmt("K%d N%d", K, N), dt, rus, rgbs,
                                rgbs / copy_gbs});
                if (un != 4) continue;
                double rgus = graph_us([&](int i, gcuda_stream st) {
                    CK(gcuda_gemv_rows(dt, x, W[i % copies], y, K, N, st, &E));
                });
                double rggbs = bytes / (rgus * 1e-6) / 1e9;
                rows.push_back({"gemv rows in a graph", fmt("K%d N%d", K, N), dt, rgus, rggbs, rggbs / copy_gbs});
            }
            release_all();
        }
    }
    struct {
        int B, Hq, Hkv, hd, L;
        long long win;
    } acases[] = {{1, 8, 1, 256, 4096, 511}, {1, 8, 1, 256, 1024, -1}, {1, 8, 1, 256, 4096, -1},
                  {1, 8, 1, 512, 1024, -1},  {1, 8, 1, 512, 4096, -1}, {1, 8, 1, 256, 32768, -1},
                  {1, 8, 1, 512, 32768, -1}, {1, 32, 8, 128, 8192, -1}, {4, 32, 8, 128, 8192, -1}};
    for (int dt : DTYPES)
    for (int impl = 0; impl <= (dt == GRAFT_DTYPE_FLOAT ? 0 : 2); impl += 2) {
        size_t es = gcuda_dtype_size(dt);
        for (auto &c : acases) {
            size_t nc = (size_t)c.B * c.Hkv * c.L * c.hd, kvb = 2 * nc * es;
            int copies = (int)std::max<size_t>(1, (rot_bytes + kvb - 1) / kvb);
            if (copies > 64) copies = 64;
            std::vector<void *> Kc(copies), Vc(copies);
            for (int i = 0; i < copies; i++) {
                Kc[i] = dalloc(nc * es);
                Vc[i] = dalloc(nc * es);
                dinit(dt, Kc[i], nc, 100u + i);
                dinit(dt, Vc[i], nc, 200u + i);
            }
            size_t nq = (size_t)c.B * c.Hq * c.hd;
            void *q = dalloc(nq * es), *o = dalloc(nq * es);
            dinit(dt, q, nq, 9u);
            std::vector<int32_t> lens(c.B, c.L);
            int32_t *dl = (int32_t *)dalloc(c.B * sizeof(int32_t));
            CK(gcuda_upload(dl, lens.data(), c.B * sizeof(int32_t), NULL, &E));
            gcuda_attn_decode_args a;
            memset(&a, 0, sizeof a);
            a.dtype = dt;
            a.batch = c.B, a.q_heads = c.Hq, a.kv_heads = c.Hkv, a.head_dim = c.hd, a.max_seq = c.L;
            a.q = q, a.seq_lens = dl, a.out = o, a.scale = 1.0f / std::sqrt((float)c.hd), a.window_left = c.win;
            a.impl = impl;
            CK(gcuda_attn_decode_plan(&a, &E));
            a.ws = dalloc(a.ws_bytes);
            double us = time_us([&](int i) {
                gcuda_attn_decode_args b = a;
                b.k_cache = Kc[i % copies];
                b.v_cache = Vc[i % copies];
                CK(gcuda_attn_decode(&b, NULL, &E));
            });
            long long keys = c.win >= 0 ? std::min<long long>(c.L, c.win + 1) : c.L; /* read per sequence */
            double gbs = (double)kvb * keys / c.L / (us * 1e-6) / 1e9;
            rows.push_back({impl ? "attn_decode mma" : "attn_decode",
                            fmt("B%d Hq%d Hkv%d hd%d L%d%s sp%d", c.B, c.Hq, c.Hkv, c.hd, c.L,
                                c.win >= 0 ? fmt(" win%lld", c.win).c_str() : "", a.num_splits),
                            dt, us, gbs, gbs / copy_gbs});
            release_all();
        }
    }
    /* MatMulNBits GEMV (M = 1, block 32, packed zero points): bytes = codes + scales + zero points + x + y */
    int nb_shapes[][2] = {{1536, 8960}, {8960, 1536}, {1536, 2048}, {4096, 4096}, {1536, 262144}};
    for (int dt : DTYPES) {
        size_t es = gcuda_dtype_size(dt);
        for (auto &sh : nb_shapes) {
            int K = sh[0], N = sh[1], blk = 32, kb = (K + blk - 1) / blk;
            size_t bb = (size_t)N * kb * blk / 2, sb = (size_t)N * kb * es, zb = (size_t)N * ((kb + 1) / 2);
            size_t per = bb + sb + zb;
            int copies = (int)std::max<size_t>(1, (rot_bytes + per - 1) / per);
            if (copies > 64) copies = 64;
            std::vector<void *> Bq(copies), Sc(copies), Zp(copies);
            for (int i = 0; i < copies; i++) {
                Bq[i] = dalloc(bb);
                Sc[i] = dalloc(sb);
                Zp[i] = dalloc(zb);
                dinit(GRAFT_DTYPE_FLOAT, Bq[i], bb / 4, 300u + i); /* any bits */
                dinit(dt, Sc[i], (size_t)N * kb, 400u + i);
                CUCK(cudaMemset(Zp[i], 0x88, zb));
            }
            void *x = dalloc((size_t)K * es), *y = dalloc((size_t)N * es);
            dinit(dt, x, K, 5u);
            gcuda_matmul_nbits_args a;
            memset(&a, 0, sizeof a);
            a.dtype = dt, a.M = 1, a.N = N, a.K = K, a.block_size = blk, a.a = x, a.y = y;
            a.zp_dtype = GRAFT_DTYPE_UINT8;
            double us = time_us([&](int i) {
                gcuda_matmul_nbits_args b = a;
                b.b = (const uint8_t *)Bq[i % copies], b.scales = Sc[i % copies], b.zero_points = Zp[i % copies];
                CK(gcuda_matmul_nbits(&b, NULL, &E));
            });
            double bytes = (double)per + (double)(K + N) * es;
            double gbs = bytes / (us * 1e-6) / 1e9;
            rows.push_back({"matmul_nbits", fmt("M1 K%d N%d blk32", K, N), dt, us, gbs, gbs / copy_gbs});
            release_all();
        }
    }
    printf("\n| kernel | shape | dtype | us | GB/s | of copy BW |\n|---|---|---|---:|---:|---:|\n");
    for (auto &r : rows)
        printf("| %s | %s | %s | %.2f | %.0f | %.0f%% |\n", r.kernel.c_str(), r.shape.c_str(), dname(r.dt), r.us,
               r.gbs, 100.0 * r.frac);

    /* compute-bound ones: TFLOP/s (causal: the visible (query, key) pairs) */
    printf("\n| kernel | shape | dtype | us | TFLOP/s |\n|---|---|---|---:|---:|\n");
    struct {
        int S, Hq, Hkv, hd;
        long long win;
    } pcases[] = {{2048, 8, 1, 256, 511}, {2048, 8, 1, 512, -1}, {2048, 32, 8, 128, -1}};
    for (int dt : DTYPES) {
        size_t es = gcuda_dtype_size(dt);
        for (auto &c : pcases) {
            size_t nc = (size_t)c.Hkv * c.S * c.hd, nq = (size_t)c.S * c.Hq * c.hd;
            void *K = dalloc(nc * es), *V = dalloc(nc * es), *q = dalloc(nq * es), *o = dalloc(nq * es);
            dinit(dt, K, nc, 1u), dinit(dt, V, nc, 2u), dinit(dt, q, nq, 3u);
            int32_t *dp = (int32_t *)dalloc(sizeof(int32_t));
            CK(gcuda_memset(dp, 0, sizeof(int32_t), NULL, &E));
            gcuda_attn_prefill_args a;
            memset(&a, 0, sizeof a);
            a.dtype = dt, a.batch = 1, a.seq = c.S, a.q_heads = c.Hq, a.kv_heads = c.Hkv, a.head_dim = c.hd;
            a.max_seq = c.S, a.q = q, a.k_cache = K, a.v_cache = V, a.past_lens = dp, a.out = o;
            a.scale = 1.0f / std::sqrt((float)c.hd), a.window_left = c.win;
            double us = time_us([&](int) { CK(gcuda_attn_prefill(&a, NULL, &E)); }, 5, 5);
            double pairs = 0;
            for (long long t = 0; t < c.S; t++) pairs += c.win >= 0 ? std::min<long long>(t + 1, c.win + 1) : t + 1;
            double fl = 4.0 * pairs * c.hd * c.Hq;
            printf("| attn_prefill | S%d Hq%d Hkv%d hd%d%s | %s | %.1f | %.2f |\n", c.S, c.Hq, c.Hkv, c.hd,
                   c.win >= 0 ? fmt(" win%lld", c.win).c_str() : "", dname(dt), us, fl / (us * 1e-6) / 1e12);
            release_all();
        }
        int M = 512, N = 8960, K = 1536, blk = 32, kb = K / blk;
        void *Bq = dalloc((size_t)N * K / 2), *Sc = dalloc((size_t)N * kb * es), *x = dalloc((size_t)M * K * es);
        void *y = dalloc((size_t)M * N * es);
        dinit(GRAFT_DTYPE_FLOAT, Bq, (size_t)N * K / 8, 7u), dinit(dt, Sc, (size_t)N * kb, 8u), dinit(dt, x, (size_t)M * K, 9u);
        gcuda_matmul_nbits_args a;
        memset(&a, 0, sizeof a);
        a.dtype = dt, a.M = M, a.N = N, a.K = K, a.block_size = blk, a.a = x, a.b = (const uint8_t *)Bq;
        a.scales = Sc, a.y = y;
        double us = time_us([&](int) { CK(gcuda_matmul_nbits(&a, NULL, &E)); }, 5, 5);
        printf("| matmul_nbits | M%d K%d N%d blk32 | %s | %.1f | %.2f |\n", M, K, N, dname(dt), us,
               2.0 * M * N * K / (us * 1e-6) / 1e12);
        release_all();
    }
    skeleton(copy_gbs);
}

/* The GEMVs of one E2B decode step (fp16, weights stored [N, K]: the
 * executor's layout) back to back in one CUDA graph, each reading the one
 * before: 35 layers (the first 15 with k and v, every fifth at head_dim 512,
 * MLP 6144 then 12288, the per-layer input's 256), then the LM head. What
 * fraction of the copy bandwidth the GEMVs alone reach when chained, and
 * what a small dependent kernel between them (an RMSNorm, as the norms,
 * rotary and attention of a real step) costs: the bound the step's other
 * kernels leave room for. */
static void skeleton(double copy_gbs)
{
    const int dt = GRAFT_DTYPE_FLOAT16, H = 1536, L = 35, Hq = 8, P = 256;
    const int64_t V = 262144;
    size_t es = 2, bytes = 0;
    struct mat {
        void *w;
        int64_t K, N;
    };
    auto mk = [&](int64_t K, int64_t N) {
        mat m = {dalloc((size_t)K * N * es), K, N};
        dinit(dt, m.w, (size_t)K * N, g_seed++);
        bytes += (size_t)K * N * es;
        return m;
    };
    struct layer {
        mat q, k, v, o, gate, up, down, pg, pp;
        bool kv;
    };
    std::vector<layer> ls(L);
    for (int l = 0; l < L; l++) {
        int hd = l % 5 == 4 ? 512 : 256, I = l < 15 ? 6144 : 12288;
        layer &y = ls[l];
        y.kv = l < 15;
        y.q = mk(H, (int64_t)Hq * hd);
        if (y.kv) y.k = mk(H, hd), y.v = mk(H, hd);
        y.o = mk((int64_t)Hq * hd, H);
        y.gate = mk(H, I), y.up = mk(H, I), y.down = mk(I, H);
        y.pg = mk(H, P), y.pp = mk(P, H);
    }
    mat head = mk(H, V);
    void *x = dalloc(H * es), *xn = dalloc(12288 * es), *q = dalloc(4096 * es), *kk = dalloc(512 * es);
    void *vv = dalloc(512 * es), *g = dalloc(12288 * es), *u = dalloc(12288 * es), *pl = dalloc(P * es);
    void *logits = dalloc((size_t)V * es), *gam = dalloc(12288 * es);
    dinit(dt, x, H, 1u), dinit(dt, gam, 12288, 2u);
    CUCK(cudaDeviceSynchronize());
    /* the step as a list: each GEMV (1-3 matrices of one x), the norm
     * after it over (rows, dim) of its first output */
    struct op {
        const void *w[3];
        void *y[3];
        int64_t N[3], K, rows, dim;
        int n;
    };
    std::vector<op> ops;
    /* what the executor fuses into each (modes 4 and 5): the input norm as
     * a prologue, a norm-headed chain by the last block, a per-element
     * chain, gate/up as a pair */
    enum { F_PRO, F_NORM_ADD, F_NORM_ADD_MUL, F_GELU_MUL, F_PAIR, F_SOFTCAP };
    std::vector<int> fk;
    auto add = [&](std::initializer_list<mat> ms, std::initializer_list<void *> ys, int64_t rows) {
        op o = {};
        int j = 0;
        for (const mat &m : ms) o.w[j] = m.w, o.N[j] = m.N, o.K = m.K, j++;
        j = 0;
        for (void *y : ys) o.y[j++] = y;
        o.n = j;
        o.rows = rows, o.dim = o.N[0] / rows;
        ops.push_back(o);
    };
    for (int l = 0; l < L; l++) {
        layer &y = ls[l];
        if (y.kv) add({y.q, y.k, y.v}, {q, kk, vv}, Hq); /* q norm, and attention, stand for a kernel here */
        else add({y.q}, {q}, Hq);
        add({y.o}, {x}, 1);
        add({y.gate, y.up}, {g, u}, 1);
        add({y.down}, {x}, 1);
        add({y.pg}, {pl}, 1);
        add({y.pp}, {x}, 1);
        for (int k : {F_PRO, F_NORM_ADD, F_PAIR, F_NORM_ADD, F_GELU_MUL, F_NORM_ADD_MUL}) fk.push_back(k);
    }
    add({head}, {logits}, 1);
    fk.push_back(F_SOFTCAP);
    void *res = dalloc(H * es), *scal = dalloc(es), *pin = dalloc(P * es), *c1 = dalloc(12288 * es);
    void *sky = dalloc(H * es), *sks = dalloc(H * es), *capped = dalloc((size_t)V * es);
    dinit(dt, res, H, 3u), dinit(dt, scal, 1, 4u), dinit(dt, pin, P, 5u);
    unsigned *ctr = (unsigned *)dalloc(ops.size() * sizeof(unsigned));
    CUCK(cudaMemset(ctr, 0, ops.size() * sizeof(unsigned)));
    /* the chain after op o's GEMV (output y0, N elements) into out */
    auto chain = [&](gops_fuse &f, int kind, void *y0, void *y1, int64_t N, void *out) {
        memset(&f, 0, sizeof f);
        f.rank = 1, f.dims[0] = N, f.y = out, f.y_dtype = dt;
        f.leaf[0] = y0, f.leaf_dtype[0] = dt, f.st[0][0] = 1;
        f.leaf[1] = kind == F_GELU_MUL ? pin : kind == F_PAIR ? y1 : kind == F_SOFTCAP ? scal : res;
        f.leaf_dtype[1] = dt, f.st[1][0] = kind == F_SOFTCAP ? 0 : 1;
        f.leaf[2] = scal, f.leaf_dtype[2] = dt, f.n_leaf = 3;
        if (kind == F_NORM_ADD || kind == F_NORM_ADD_MUL) {
            f.norm_dim = N, f.gamma = gam, f.eps = 1e-6f, f.norm_dtype = dt;
            f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_ADD, 1, 0, dt, 0, 0};
            if (kind == F_NORM_ADD_MUL) f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 2, 0, dt, 0, 0};
        } else if (kind == F_SOFTCAP) {
            f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
            f.ins[f.n_ins++] = {GOPS_FUSE_UNARY, GOPS_TANH, 0, 0, dt, -INFINITY, INFINITY};
            f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
        } else {
            f.ins[f.n_ins++] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
            f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
        }
    };
    /* mode 0: GEMVs only; 1: an RMSNorm after each (read by the next GEMV);
     * 2, 3: fused as the executor does (below) */
    auto step = [&](int mode, gcuda_stream st) {
        const void *in = x;
        for (size_t i = 0; i < ops.size() && mode >= 2; i++) { /* as the executor fuses them */
            op &o = ops[i];
            gops_fuse f;
            void *out = fk[i] == F_SOFTCAP ? capped : i % 2 ? c1 : xn; /* the chain's output: the next GEMV's x */
            switch (fk[i]) {
            case F_PRO: {
                gops_rows_norm pn = {};
                pn.x = in, pn.gamma = gam, pn.eps = 1e-6f;
                CK(gcuda_gemv_rows_fused(dt, &pn, o.w, o.y, o.N, o.n, o.K, NULL, NULL, 0, st, &E));
                in = o.y[0]; /* stands for attention's output */
                continue;
            }
            case F_PAIR:
                chain(f, F_PAIR, o.y[0], o.y[1], o.N[0], out);
                CK(gcuda_gemv_rows_pair_tail(dt, in, o.w[0], o.w[1], o.y[0], o.y[1], o.K, o.N[0], &f, st, &E));
                break;
            default:
                chain(f, fk[i], o.y[0], NULL, o.N[0], out);
                /* o (the first norm-headed chain of a layer, before the pair): the skip norm before gate/up,
                 * as its own kernel (mode 2) or after the chain in the same launch (mode 3) */
                bool skip = fk[i] == F_NORM_ADD && i + 1 < ops.size() && fk[i + 1] == F_PAIR;
                if (skip && mode == 3) f.sk_x = res, f.sk_gamma = gam, f.sk_y = sky, f.sk_sum = sks, f.sk_eps = 1e-6f;
                CK(gcuda_gemv_rows_tail(dt, in, o.w[0], o.y[0], o.K, o.N[0], &f, f.norm_dim ? ctr + i : NULL, st, &E));
                if (skip && mode == 2) CK(gcuda_skip_rmsnorm(dt, out, res, NULL, gam, sky, sks, 1, H, 1e-6f, st, &E));
                if (skip) out = sky;
            }
            in = out;
        }
        for (size_t i = 0; i < ops.size() && mode < 2; i++) {
            op &o = ops[i];
            if (o.n == 1) CK(gcuda_gemv_rows(dt, in, o.w[0], o.y[0], o.K, o.N[0], st, &E));
            else CK(gcuda_gemv_rows_multi(dt, in, o.w, o.y, o.N, o.n, o.K, st, &E));
            in = o.y[0];
            if (mode >= 1 && i + 1 < ops.size()) {
                CK(gcuda_rmsnorm(dt, in, gam, xn, o.rows, o.dim, 1e-6f, st, &E));
                in = xn;
            }
        }
    };
    double floor_us = (double)bytes / (copy_gbs * 1e9) * 1e6;
    printf("\nE2B decode step skeleton (fp16, %d layers, %.3f GB of weights: floor %.0f us at the copy rate):\n", L,
           (double)bytes / 1e9, floor_us);
    printf("| step | kernels | us | of copy BW |\n|---|---:|---:|---:|\n");
    const char *names[] = {"GEMVs only", "GEMVs + an RMSNorm after each",
                           "GEMVs fused as the executor does (norm prologue, chains, pair; the skip norm its own kernel)",
                           "the same, the skip norm after o's chain in its launch"};
    for (int mode = 0; mode <= 3; mode++) {
        double us = graph_us([&](int, gcuda_stream st) { step(mode, st); }, 1, 9);
        int n = (int)ops.size(), kernels = mode == 2 ? n + L : mode == 3 ? n : n + (mode >= 1 ? n - 1 : 0);
        printf("| %s | %d | %.0f | %.1f%% |\n", names[mode], kernels, us, 100.0 * floor_us / us);
    }
    release_all();
}

/* test_kernels --epi: what each fused GEMV variant of an E2B step costs
 * per launch (20 launches in a graph, each reading what the last wrote: the
 * step's dependence), against the plain GEMV of the same shape, at the
 * threads per row GRAFT_CUDA_ROWS_TPR forces (else the launcher's): no checks. */
/* The lab's gelu(a) * b over N elements (rank 1) into y: the gate/up
 * pair's chain, and the per-layer input's gate. */
static void lab_gelu_mul(gops_fuse &f, int dt, int N, void *y, void *a, void *b)
{
    memset(&f, 0, sizeof f);
    f.rank = 1, f.dims[0] = N, f.y = y, f.y_dtype = dt, f.n_leaf = 2;
    f.leaf[0] = a, f.leaf_dtype[0] = dt, f.st[0][0] = 1;
    f.leaf[1] = b, f.leaf_dtype[1] = dt, f.st[1][0] = 1;
    f.ins[f.n_ins++] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
    f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
}

/* test_kernels --attn: a layer's attention at E2B's short context (160
 * keys, caches of 4096; head_dim 256 with E2B's sliding window of 512 keys,
 * 512 without), after the q/k/v GEMV that makes its rows (20 in a graph):
 * the q/k norm + rotary launch and the v norm launch before the kernel,
 * against the kernel making those rows itself (q_gamma, k_gamma, v_norm),
 * the same asking L2 for 32 MB of other weights after its wait
 * (gcuda_attn_decode_args.pf, GRAFT_CUDA_ATTN_PF: each launch of the graph
 * its own 32 MB, so none is in L2 already; what the prefetch costs the
 * attention), and the kernel on given rows (no norms: a floor). No checks. */
static void attn_lab()
{
    const int dt = GRAFT_DTYPE_FLOAT16, Hq = 8, L = 160, MS = 4096, K = 1536;
    const size_t es = 2;
    printf("\nattention after its q/k/v GEMV (fp16, Hq %d, Hkv 1, %d keys), us a layer:\n", Hq, L);
    printf("| head_dim | rotary dim | new k/v | splits | norms apart (launches) | made by the kernel |"
           " made, 32 MB to L2 | made, 32 MB to L2 late | rows as given |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    const int PFN = 20;
    const size_t PFB = (size_t)32 << 20;
    char *pfbuf = (char *)dalloc(PFN * PFB);
    for (int hd : {256, 512})
        for (int kv = 1; kv >= 0; kv--) {
            const int rd = hd >= 512 ? hd / 4 : hd, half = rd / 2, N = (Hq + 2) * hd;
            const long long win = hd == 256 ? 511 : -1; /* E2B: the sliding layers, the full ones */
            void *w = dalloc((size_t)K * N * es), *x = dalloc(K * es), *raw = dalloc(N * es);
            dinit(dt, w, (size_t)K * N, 31u), dinit(dt, x, K, 32u);
            void *qr = dalloc((size_t)Hq * hd * es), *kr = dalloc(hd * es), *vn = dalloc(hd * es);
            void *gq = dalloc(hd * es), *gk = dalloc(hd * es), *cs = dalloc(half * es), *sn = dalloc(half * es);
            dinit(dt, gq, hd, 33u), dinit(dt, gk, hd, 34u), dinit(dt, cs, half, 35u), dinit(dt, sn, half, 36u);
            void *kc = dalloc((size_t)MS * hd * es), *vc = dalloc((size_t)MS * hd * es), *out = dalloc(Hq * hd * es);
            dinit(dt, kc, (size_t)MS * hd, 37u), dinit(dt, vc, (size_t)MS * hd, 38u);
            int32_t *dl = (int32_t *)dalloc(sizeof(int32_t));
            int64_t *dpos = (int64_t *)dalloc(sizeof(int64_t));
            CUCK(cudaMemcpy(dl, &L, sizeof L, cudaMemcpyHostToDevice));
            CUCK(cudaMemset(dpos, 0, sizeof(int64_t)));
            char *q0 = (char *)raw, *k0 = q0 + (size_t)Hq * hd * es, *v0 = k0 + hd * es;
            gcuda_rotary_args rq, rk;
            memset(&rq, 0, sizeof rq);
            rq.dtype = dt, rq.x = q0, rq.y = qr, rq.cos_cache = cs, rq.sin_cache = sn, rq.positions = dpos;
            rq.batch = 1, rq.seq = 1, rq.heads = Hq, rq.head_size = hd, rq.rotary_dim = rd, rq.max_pos = 1;
            rq.stride_b = (int64_t)Hq * hd, rq.stride_s = (int64_t)Hq * hd, rq.stride_h = hd;
            rq.norm_x = q0, rq.norm_gamma = gq, rq.norm_eps = 1e-6f;
            rk = rq;
            rk.x = rk.norm_x = k0, rk.y = kr, rk.heads = 1, rk.norm_gamma = gk, rk.stride_b = rk.stride_s = hd;
            gops_fuse fv;
            memset(&fv, 0, sizeof fv);
            fv.rank = 1, fv.dims[0] = hd, fv.y = vn, fv.y_dtype = dt, fv.n_leaf = 2;
            fv.leaf[0] = fv.leaf[1] = v0, fv.leaf_dtype[0] = fv.leaf_dtype[1] = dt, fv.st[0][0] = 1;
            fv.norm_dim = hd, fv.eps = 1e-6f, fv.norm_div = 1, fv.norm_dtype = GRAFT_DTYPE_FLOAT;
            fv.ins[fv.n_ins++] = {GOPS_FUSE_CAST, 0, 0, 0, dt, 0, 0};
            gcuda_attn_decode_args a;
            memset(&a, 0, sizeof a);
            a.dtype = dt, a.batch = 1, a.q_heads = Hq, a.kv_heads = 1, a.head_dim = hd, a.max_seq = MS;
            a.k_cache = kc, a.v_cache = vc, a.seq_lens = dl, a.out = out, a.scale = 1.0f, a.window_left = win;
            a.impl = 2, a.new_stride_b = a.new_stride_h = hd;
            const char *ea = getenv("GRAFT_CUDA_ATTN_EARLY");
            a.cache_ready = !(ea && !strcmp(ea, "0")); /* as the executor sets it (E2B's layers) */
            CK(gcuda_attn_decode_plan(&a, &E));
            a.ws = dalloc(a.ws_bytes);
            double us[5];
            for (int u = 0; u < 5; u++)
                us[u] = graph_us([&](int i, gcuda_stream st) {
                    CK(gcuda_gemv_rows(dt, x, w, raw, K, N, st, &E));
                    const int v = u >= 3 ? 1 : u; /* 3, 4: 1 with the prefetch, at once and late */
                    gcuda_attn_decode_args t = a;
                    if (u >= 3) {
                        t.pf.n = 1, t.pf.ptr[0] = pfbuf + (size_t)(i % PFN) * PFB, t.pf.bytes[0] = PFB;
                        t.pf_late = u == 4;
                    }
                    t.q = v == 0 ? qr : q0;
                    if (kv) t.k_new = v == 0 ? kr : k0, t.v_new = v == 0 ? vn : v0;
                    if (v == 0) {
                        if (kv) CK(gcuda_rotary_pair(&rq, &rk, st, &E));
                        else CK(gcuda_rotary(&rq, st, &E));
                        if (kv) CK(gops_fused(&fv, st, &E));
                    } else if (v == 1) {
                        t.q_gamma = gq, t.q_eps = 1e-6f, t.rope_cos = cs, t.rope_sin = sn, t.rope_pos = dpos;
                        t.rope_max_pos = 1, t.rope_dim = rd;
                        if (kv) t.k_gamma = gk, t.k_eps = 1e-6f, t.v_norm = 1, t.v_eps = 1e-6f;
                    }
                    CK(gcuda_attn_decode(&t, st, &E));
                }, 20, 7);
            printf("| %d%s | %d | %s | %d | %.2f (%d) | %.2f (3) | %.2f (3) | %.2f (3) | %.2f (3) |\n", hd,
                   win >= 0 ? fmt(", window %lld", win).c_str() : "", rd, kv ? "yes" : "no", a.num_splits, us[0],
                   kv ? 5 : 4, us[1], us[3], us[4], us[2]);
        }
    release_all();
}

/* test_kernels --icache: what a kernel's cold code costs. ic_kernel<N,
 * TAG> is N fused multiply-adds in 8 independent chains (N
 * instructions, 16 bytes each), 4 warps a block, no memory traffic but
 * one conditional store; TAG makes a second copy of the same size. 20
 * launches in a graph: one block each, the same kernel every launch (its
 * code stays in the SM's instruction caches), or two copies alternating
 * (each launch's code was pushed out by the other where both do not fit),
 * and a block on every SM. The difference is the instruction fetches a
 * GEMV's last block or an attention split (code run once a launch) pays. */
template <int N, int TAG> __global__ void __launch_bounds__(128) ic_kernel(float *out, float a)
{
    float x[8], c[8]; /* the addends in registers: no constant-bank operands */
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = (float)(threadIdx.x + k + TAG), c[k] = a * (float)(k + 1);
#pragma unroll
    for (int i = 0; i < N / 8; i++)
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = fmaf(x[k], a, c[k]);
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) t += x[k];
    if (t == 12345.0f) out[threadIdx.x] = t; /* keeps the chains live */
}

template <int N> static void icache_row(float *out, int sms)
{
    double us[4];
    for (int v = 0; v < 4; v++)
        us[v] = graph_us([&](int i, gcuda_stream st) {
            const unsigned blocks = v >= 2 ? (unsigned)sms : 1u;
            cudaStream_t s = (cudaStream_t)st;
            if (v % 2 == 1 && i % 2) ic_kernel<N, 1><<<blocks, 128, 0, s>>>(out, 0.999f);
            else ic_kernel<N, 0><<<blocks, 128, 0, s>>>(out, 0.999f);
        }, 20, 7);
    printf("| %d | %d | %.2f | %.2f | %.2f | %.2f |\n", N, N * 16 / 1024, us[0], us[1], us[2], us[3]);
}

static void icache_lab()
{
    gcuda_device_info info;
    CK(gcuda_device_info_get(&info, &E));
    const int sms = info.sm_count;
    float *out = (float *)dalloc(128 * sizeof(float));
    printf("\ncold code: N fused multiply-adds in a row (N x 16 bytes of code), us a launch, 20 in a graph:\n");
    printf("| N | KB | one block, one kernel | one block, two alternating | a block an SM, one kernel |"
           " a block an SM, two alternating |\n|---:|---:|---:|---:|---:|---:|\n");
    icache_row<256>(out, sms);
    icache_row<1024>(out, sms);
    icache_row<2048>(out, sms);
    icache_row<4096>(out, sms);
    icache_row<8192>(out, sms);
    release_all();
}

static void epi_lab(double copy_gbs)
{
    const int dt = GRAFT_DTYPE_FLOAT16;
    const size_t es = 2;
    struct shape {
        const char *name;
        int K, N;
    };
    const shape shapes[] = {{"pli proj", 256, 1536}, {"o", 2048, 1536}, {"down", 6144, 1536}, {"pli gate", 1536, 256},
                            {"up", 1536, 6144}, {"down 12288", 12288, 1536}, {"lm head", 1536, 262144}};
    void *gam = dalloc(262144 * es), *res = dalloc(262144 * es), *scal = dalloc(es), *sky = dalloc(262144 * es),
         *sks = dalloc(262144 * es);
    dinit(dt, gam, 262144, 2u), dinit(dt, res, 262144, 3u), dinit(dt, scal, 1, 4u);
    unsigned *ctr = (unsigned *)dalloc(sizeof(unsigned));
    CUCK(cudaMemset(ctr, 0, sizeof(unsigned)));
    printf("\nfused GEMV variants, fp16, us a launch (floor: the weights at the copy rate):\n");
    printf("| shape | K | N | TPR | floor | plain | gelu*mul (EPI 1) | norm (EPI 2) | norm+add*s (EPI 2) | + skip norm |"
           " norm prologue | EPI 1, no instructions |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const char *tpr = getenv("GRAFT_CUDA_ROWS_TPR"); /* read once by the launcher: one value a process */
    for (const shape &sh : shapes) {
        {
            int K = sh.K, N = sh.N;
            void *w = dalloc((size_t)K * N * es), *x = dalloc((size_t)(K > N ? K : N) * es),
                 *y = dalloc((size_t)N * es), *o = dalloc((size_t)(K > N ? K : N) * es);
            dinit(dt, w, (size_t)K * N, g_seed++), dinit(dt, x, K > N ? K : N, g_seed++);
            auto chain = [&](gops_fuse &f, int kind) {
                memset(&f, 0, sizeof f);
                f.rank = 1, f.dims[0] = N, f.y = o, f.y_dtype = dt;
                f.leaf[0] = y, f.leaf_dtype[0] = dt, f.st[0][0] = 1;
                f.leaf[1] = res, f.leaf_dtype[1] = dt, f.st[1][0] = 1;
                f.leaf[2] = scal, f.leaf_dtype[2] = dt, f.n_leaf = 3;
                if (kind == 1) {
                    f.ins[f.n_ins++] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
                    f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
                    return;
                }
                f.norm_dim = N, f.gamma = gam, f.eps = 1e-6f, f.norm_dtype = dt;
                if (kind >= 3) {
                    f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_ADD, 1, 0, dt, 0, 0};
                    f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_MUL, 2, 0, dt, 0, 0};
                }
                if (kind == 4) f.sk_x = res, f.sk_gamma = gam, f.sk_y = sky, f.sk_sum = sks, f.sk_eps = 1e-6f;
            };
            double us[7];
            for (int v = 0; v < 7; v++)
                us[v] = graph_us([&](int i, gcuda_stream st) {
                    /* each launch reads the previous one's output (x and o alternate as its input) */
                    const void *in = i % 2 ? o : x;
                    gops_fuse f;
                    if (v == 0) {
                        CK(gcuda_gemv_rows(dt, in, w, y, K, N, st, &E));
                    } else if (v == 5) {
                        gops_rows_norm pn = {};
                        pn.x = in, pn.gamma = gam, pn.eps = 1e-6f;
                        const void *wp[1] = {w};
                        void *yp[1] = {y};
                        int64_t Nn[1] = {N};
                        CK(gcuda_gemv_rows_fused(dt, &pn, wp, yp, Nn, 1, K, NULL, NULL, 0, st, &E));
                    } else {
                        chain(f, v == 6 ? 1 : v);
                        if (v == 6) f.n_ins = 0; /* EPI 1's stores and barriers, no arithmetic */
                        CK(gcuda_gemv_rows_tail(dt, in, w, y, K, N, &f, v >= 2 && v < 6 ? ctr : NULL, st, &E));
                    }
                }, 20, 7);
            double floor_us = (double)K * N * es / (copy_gbs * 1e9) * 1e6;
            printf("| %s | %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", sh.name, K, N,
                   tpr && *tpr ? tpr : "auto", floor_us, us[0], us[1], us[2], us[3], us[4], us[5], us[6]);
            release_all();
            gam = dalloc(262144 * es), res = dalloc(262144 * es), scal = dalloc(es), sky = dalloc(262144 * es),
            sks = dalloc(262144 * es);
            dinit(dt, gam, 262144, 2u), dinit(dt, res, 262144, 3u), dinit(dt, scal, 1, 4u);
            ctr = (unsigned *)dalloc(sizeof(unsigned));
            CUCK(cudaMemset(ctr, 0, sizeof(unsigned)));
        }
    }
    /* the gate/up pair: two matrices of one x side by side (no chain), the
     * pair with gelu(gate) * up per element, and that with the skip-norm
     * prologue (the executor's form before the down projection); then,
     * to tell what the pair's epilogue costs, the pair with a chain of no
     * instructions (its stores and block barriers, no arithmetic) and with
     * the multiply alone (no gelu) */
    for (const int N : {6144, 12288}) {
        const int K = 1536;
        void *w0 = dalloc((size_t)K * N * es), *w1 = dalloc((size_t)K * N * es), *x = dalloc((size_t)N * es),
             *y0 = dalloc((size_t)N * es), *y1 = dalloc((size_t)N * es), *o = dalloc((size_t)N * es);
        dinit(dt, w0, (size_t)K * N, g_seed++), dinit(dt, w1, (size_t)K * N, g_seed++), dinit(dt, x, N, g_seed++);
        double us[5];
        for (int v = 0; v < 5; v++)
            us[v] = graph_us([&](int i, gcuda_stream st) {
                const void *in = i % 2 ? o : x;
                const void *wp[2] = {w0, w1};
                void *yp[2] = {y0, y1};
                int64_t Nn[2] = {N, N};
                if (v == 0) {
                    CK(gcuda_gemv_rows_multi(dt, in, wp, yp, Nn, 2, K, st, &E));
                    return;
                }
                gops_fuse f;
                lab_gelu_mul(f, dt, N, o, y0, y1);
                if (v == 3) f.n_ins = 0;                  /* o = gate */
                if (v == 4) f.ins[0] = f.ins[1], f.n_ins = 1; /* o = gate * up */
                if (v != 2) {
                    CK(gcuda_gemv_rows_pair_tail(dt, in, w0, w1, y0, y1, K, N, &f, st, &E));
                } else {
                    gops_rows_norm pn = {};
                    pn.x = in, pn.skip = res, pn.gamma = gam, pn.sum = sks, pn.eps = 1e-6f;
                    CK(gcuda_gemv_rows_fused(dt, &pn, wp, yp, Nn, 2, K, &f, NULL, 1, st, &E));
                }
            }, 20, 7);
        double floor_us = 2.0 * K * N * es / (copy_gbs * 1e9) * 1e6;
        printf("\ngate/up pair (K %d, N %d each), us a launch:\n| floor | two matrices, one launch | pair + gelu*mul |"
               " + skip-norm prologue | pair, no instructions | pair * alone |\n|---:|---:|---:|---:|---:|---:|\n"
               "| %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", K, N, floor_us, us[0], us[1], us[2], us[3], us[4]);
        release_all();
        gam = dalloc(262144 * es), res = dalloc(262144 * es), sks = dalloc(262144 * es);
        dinit(dt, gam, 262144, 2u), dinit(dt, res, 262144, 3u);
    }
    release_all();
    /* q/k/v (one launch, K 1536): plain, with the input norm as its
     * prologue, and with the per-layer-input projection's chain (norm, add,
     * scale) before that norm (gcuda_gemv_rows_chain_pro); the projection
     * itself plain, as the chain prologue leaves it */
    {
        const int K = 1536;
        const int64_t Nq[3] = {2048, 256, 256};
        void *w[3], *y[3];
        int64_t rows = 0;
        for (int j = 0; j < 3; j++) {
            w[j] = dalloc((size_t)K * Nq[j] * es), y[j] = dalloc((size_t)Nq[j] * es);
            dinit(dt, w[j], (size_t)K * Nq[j], g_seed++);
            rows += Nq[j];
        }
        void *x = dalloc((size_t)K * es), *p = dalloc((size_t)K * es), *c = dalloc((size_t)K * es),
             *g = dalloc((size_t)K * es), *r = dalloc((size_t)K * es), *sc = dalloc(es);
        dinit(dt, x, K, g_seed++), dinit(dt, p, K, g_seed++), dinit(dt, g, K, 2u), dinit(dt, r, K, 3u),
            dinit(dt, sc, 1, 4u);
        /* the per-layer-input projection before it (K 256, N 1536): its chain by its last block then q/k/v with
         * the norm prologue (the default), or the projection plain then q/k/v with the chain prologue */
        const int Kp = 256;
        void *pw = dalloc((size_t)Kp * K * es), *px = dalloc((size_t)Kp * es);
        unsigned *pctr = (unsigned *)dalloc(sizeof(unsigned));
        dinit(dt, pw, (size_t)Kp * K, g_seed++), dinit(dt, px, Kp, g_seed++);
        CUCK(cudaMemset(pctr, 0, sizeof(unsigned)));
        double us[5];
        for (int v = 0; v < 5; v++)
            us[v] = graph_us([&](int i, gcuda_stream st) {
                const void *wp[3] = {w[0], w[1], w[2]};
                void *yp[3] = {y[0], y[1], y[2]};
                gops_rows_norm pn = {};
                pn.x = x, pn.gamma = g, pn.eps = 1e-6f;
                gops_fuse f; /* the projection's post-norm, residual add and scale over p (v 2, 4) */
                memset(&f, 0, sizeof f);
                f.rank = 1, f.dims[0] = K, f.y = c, f.y_dtype = dt, f.n_leaf = 4, f.n_ins = 2;
                f.leaf[0] = p, f.leaf_dtype[0] = dt, f.st[0][0] = 1;
                f.leaf[1] = g, f.leaf_dtype[1] = dt, f.st[1][0] = 1;
                f.leaf[2] = r, f.leaf_dtype[2] = dt, f.st[2][0] = 1;
                f.leaf[3] = sc, f.leaf_dtype[3] = dt;
                f.norm_dim = K, f.gamma = g, f.eps = 1e-6f, f.norm_dtype = dt;
                f.ins[0] = {GOPS_FUSE_BINARY, GOPS_ADD, 2, 1, dt, 0, 0};
                f.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 3, 0, dt, 0, 0};
                if (v == 0) {
                    CK(gcuda_gemv_rows_multi(dt, x, wp, yp, Nq, 3, K, st, &E));
                } else if (v == 1) {
                    CK(gcuda_gemv_rows_fused(dt, &pn, wp, yp, Nq, 3, K, NULL, NULL, 0, st, &E));
                } else if (v == 2) {
                    CK(gcuda_gemv_rows_chain_pro(dt, &f, &pn, wp, yp, Nq, 3, K, st, &E));
                } else if (v == 3) {
                    CK(gcuda_gemv_rows_tail(dt, px, pw, p, Kp, K, &f, pctr, st, &E));
                    pn.x = c;
                    CK(gcuda_gemv_rows_fused(dt, &pn, wp, yp, Nq, 3, K, NULL, NULL, 0, st, &E));
                } else {
                    CK(gcuda_gemv_rows(dt, px, pw, p, Kp, K, st, &E));
                    CK(gcuda_gemv_rows_chain_pro(dt, &f, &pn, wp, yp, Nq, 3, K, st, &E));
                }
                (void)i;
            }, 20, 7);
        double floor_us = (double)K * rows * es / (copy_gbs * 1e9) * 1e6;
        printf("\nq/k/v (K %d, N %lld in one launch), us a launch:\n| floor | plain | norm prologue |"
               " + the chain before the norm |\n|---:|---:|---:|---:|\n| %.2f | %.2f | %.2f | %.2f |\n", K,
               (long long)rows, floor_us, us[0], us[1], us[2]);
        printf("\nthe per-layer-input projection (K %d, N %d) then q/k/v, us a pair of launches:\n| its chain by its"
               " last block, then the norm prologue | plain, then the chain prologue |\n|---:|---:|\n| %.2f | %.2f |\n",
               Kp, K, us[3], us[4]);
    }
    release_all();
    /* the two other norm-headed chains of a layer, by the producer's last
     * block (the default) against the consumer's compact chain prologue
     * (gcuda_gemv_rows_chain_pro_tail): down (K 6144) with its post-norm
     * and residual add, then the per-layer-input gate (N 256, gelu * the
     * layer's input); o (K 2048) with its post-norm, then the skip norm
     * before the gate/up pair (N 6144, gelu(gate) * up) */
    {
        const int H = 1536;
        for (int which = 0; which < 2; which++) {
            const int Kprod = which ? 2048 : 6144, Nc = which ? 6144 : 256, nm = which ? 2 : 1;
            void *wp = dalloc((size_t)Kprod * H * es), *xp = dalloc((size_t)Kprod * es), *yp = dalloc((size_t)H * es),
                 *c = dalloc((size_t)H * es), *g = dalloc((size_t)H * es), *r = dalloc((size_t)H * es),
                 *sky = dalloc((size_t)H * es), *sks = dalloc((size_t)H * es), *lay = dalloc((size_t)Nc * es),
                 *out = dalloc((size_t)Nc * es);
            void *wc[2], *yc[2];
            for (int j = 0; j < nm; j++) {
                wc[j] = dalloc((size_t)H * Nc * es), yc[j] = dalloc((size_t)Nc * es);
                dinit(dt, wc[j], (size_t)H * Nc, g_seed++);
            }
            unsigned *ctr = (unsigned *)dalloc(sizeof(unsigned));
            CUCK(cudaMemset(ctr, 0, sizeof(unsigned)));
            dinit(dt, wp, (size_t)Kprod * H, g_seed++), dinit(dt, xp, Kprod, g_seed++), dinit(dt, g, H, 2u),
                dinit(dt, r, H, 3u), dinit(dt, lay, Nc, 4u);
            double us[2];
            for (int v = 0; v < 2; v++)
                us[v] = graph_us([&](int i, gcuda_stream st) {
                    gops_fuse f; /* the producer's chain: RMSNorm(yp) * g (+ r: down's residual add) */
                    memset(&f, 0, sizeof f);
                    f.rank = 1, f.dims[0] = H, f.y = c, f.y_dtype = dt, f.n_leaf = 3;
                    f.leaf[0] = yp, f.leaf_dtype[0] = dt, f.st[0][0] = 1;
                    f.leaf[1] = g, f.leaf_dtype[1] = dt, f.st[1][0] = 1;
                    f.leaf[2] = r, f.leaf_dtype[2] = dt, f.st[2][0] = 1;
                    f.norm_dim = H, f.gamma = g, f.eps = 1e-6f, f.norm_dtype = dt;
                    if (!which) f.ins[f.n_ins++] = {GOPS_FUSE_BINARY, GOPS_ADD, 2, 0, dt, 0, 0};
                    gops_fuse tl; /* the consumer's: gelu(y0) * (the layer's input, or up) */
                    memset(&tl, 0, sizeof tl);
                    tl.rank = 1, tl.dims[0] = Nc, tl.y = out, tl.y_dtype = dt, tl.n_ins = 2, tl.n_leaf = 2;
                    tl.leaf[0] = yc[0], tl.leaf_dtype[0] = dt, tl.st[0][0] = 1;
                    tl.leaf[1] = which ? yc[1] : lay, tl.leaf_dtype[1] = dt, tl.st[1][0] = 1;
                    tl.ins[0] = {GOPS_FUSE_UNARY, GOPS_GELU_TANH, 0, 0, dt, -INFINITY, INFINITY};
                    tl.ins[1] = {GOPS_FUSE_BINARY, GOPS_MUL, 1, 0, dt, 0, 0};
                    gops_rows_norm pn = {}; /* o's: the skip norm of c + r */
                    pn.skip = r, pn.gamma = g, pn.sum = sks, pn.eps = 1e-6f;
                    const void *wcc[2] = {wc[0], wc[1]};
                    const int64_t Nn[2] = {Nc, Nc};
                    if (v == 0) {
                        if (which) f.sk_x = r, f.sk_gamma = g, f.sk_y = sky, f.sk_sum = sks, f.sk_eps = 1e-6f;
                        CK(gcuda_gemv_rows_tail(dt, xp, wp, yp, Kprod, H, &f, ctr, st, &E));
                        if (which) CK(gcuda_gemv_rows_pair_tail(dt, sky, wc[0], wc[1], yc[0], yc[1], H, Nc, &tl, st, &E));
                        else CK(gcuda_gemv_rows_tail(dt, c, wc[0], yc[0], H, Nc, &tl, NULL, st, &E));
                    } else {
                        CK(gcuda_gemv_rows(dt, xp, wp, yp, Kprod, H, st, &E));
                        CK(gcuda_gemv_rows_chain_pro_tail(dt, &f, which ? &pn : NULL, wcc, yc, Nn, nm, H, &tl, which,
                                                          st, &E));
                    }
                    (void)i;
                }, 20, 7);
            printf("\n%s (K %d, N %d) then %s (K %d, N %d%s), us a pair of launches:\n| its chain by its last block |"
                   " plain, then the compact chain prologue |\n|---:|---:|\n| %.2f | %.2f |\n", which ? "o" : "down",
                   Kprod, H, which ? "the gate/up pair" : "the per-layer-input gate", H, Nc, which ? " each" : "",
                   us[0], us[1]);
            release_all();
        }
    }
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    bool quick = false, skel = false, epi = false, attn = false, icache = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--skeleton")) {
            skel = true;
        } else if (!strcmp(argv[i], "--epi")) {
            epi = true;
        } else if (!strcmp(argv[i], "--attn")) {
            attn = true;
        } else if (!strcmp(argv[i], "--icache")) {
            icache = true;
        } else {
            fprintf(stderr, "usage: %s [--quick | --skeleton | --epi | --attn | --icache]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    if (gcuda_device_count(&ndev, &E) != GRAFT_OK || ndev == 0) {
        printf("test_kernels: skipped (no CUDA device%s%s)\n", ndev == 0 && E.msg[0] ? ": " : "", E.msg);
        return 0;
    }
    int lim_sms = 0; /* GRAFT_CUDA_SMS: the labs on a green context of that many SMs */
    CK(gcuda_sm_limit(&lim_sms, &E));
    gcuda_device_info info;
    CK(gcuda_device_info_get(&info, &E));
    if (lim_sms) printf("GRAFT_CUDA_SMS: a green context of %d SMs\n", lim_sms);
    printf("device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB, smem/block %zu KiB\n", info.name, info.cc_major,
           info.cc_minor, info.sm_count, info.global_bytes / 1073741824.0, info.l2_bytes / 1048576.0,
           info.smem_optin_bytes / 1024);
    if (skel || epi || attn || icache) { /* only the labs (the E2B step skeleton, the fused GEMV variants, the
                                          * attention, cold code): no checks */
        if (icache) icache_lab();
        if (attn) attn_lab();
        if (skel || epi) {
            double cr = copy_rate();
            if (epi) epi_lab(cr);
            if (skel) skeleton(cr);
        }
        return 0;
    }

    test_div_r();
    test_block_sum1();
    test_copy_words();
    for (int dt : DTYPES) {
        test_rmsnorm(dt, 1, 64, false);
        test_rmsnorm(dt, 3, 1536, false);
        test_rmsnorm(dt, 5, 1000, false);
        test_rmsnorm(dt, 4, 2048, true);
        if (!quick) test_rmsnorm(dt, 2, 16384, false);
        test_skip_rmsnorm(dt, 1, 1536, false);
        test_skip_rmsnorm(dt, 4, 2048, true);
        test_skip_rmsnorm(dt, 3, 1000, true);

        test_rotary(dt, 1, 1, 8, 256, 256, 0, 0, false);
        test_rotary(dt, 2, 3, 4, 64, 32, 1, 1, false);
        test_rotary(dt, 1, 5, 2, 512, 128, 0, 0, false);
        test_rotary(dt, 1, 1, 8, 256, 64, 1, 0, false);
        test_rotary(dt, 2, 2, 3, 128, 96, 0, 1, true);
        test_rotary(dt, 1, 1, 8, 256, 256, 0, 0, false, true);
        test_rotary(dt, 1, 1, 4, 512, 512, 0, 0, true, true);
        test_rotary(dt, 2, 3, 2, 128, 64, 1, 1, false, true);
        test_rotary_pair(dt, 8, 256, 1, 256, 256, 0);
        test_rotary_pair(dt, 8, 512, 1, 512, 128, 0);
        test_rotary_pair(dt, 4, 128, 2, 256, 64, 1);

        test_gemv(dt, 64, 64);
        test_gemv(dt, 1536, 1536);
        test_gemv(dt, 1000, 1003);
        test_gemv(dt, 333, 4104);
        test_gemv_multi(dt, 1536, {2048, 256, 256});
        test_gemv_multi(dt, 640, {1000, 36});
        test_gemv_multi(dt, 1536, {6144, 6144});
        test_gemv_rows(dt, 64, {64});
        test_gemv_rows(dt, 1536, {2048});
        test_gemv_rows(dt, 1001, {1003}); /* rows not 16-byte aligned: the scalar kernel */
        test_gemv_rows(dt, 256, {1536});
        test_gemv_rows(dt, 6144, {1536});
        test_gemv_rows(dt, 12288, {200});
        test_gemv_rows(dt, 1536, {4099}); /* an uneven last group of rows */
        test_gemv_rows(dt, 2048, {1536, 520, 40}); /* a group's rows across matrices */
        test_gemv_rows(dt, 40, {7});
        test_gemv_rows(dt, 1536, {2048, 256, 256});
        test_gemv_rows(dt, 640, {1000, 36});
        test_gemv_tail(dt, 1536, 1536);
        test_gemv_tail(dt, 1536, 6144);
        test_gemv_tail(dt, 6144, 1536);
        test_gemv_tail(dt, 256, 1536);
        test_gemv_tail(dt, 1001, 300); /* the scalar kernel */
        if (!quick) test_gemv_tail(dt, 12288, 1536); /* down's shape: a row of 12288 */
        test_gemv_pro(dt, 1536, {2048}, false, false);
        test_gemv_pro(dt, 1536, {2048, 256, 256}, false, false);
        test_gemv_pro(dt, 1536, {1536}, true, false);
        test_gemv_pro(dt, 1536, {6144, 6144}, true, true);
        test_gemv_pro(dt, 1001, {300, 300}, true, true); /* the scalar kernel */
        test_gemv_pro(dt, 1001, {300}, false, false);
        test_gemv_chain_pro(dt, 1536, {2048, 256, 256}); /* E2B's q/k/v after the per-layer-input projection */
        test_gemv_chain_pro(dt, 2048, {512});
        test_gemv_chain_pro(dt, 1001, {300}); /* the scalar kernel */
        test_gemv_chain_pro(dt, 1536, {2048, 256, 256}, true);
        /* groups of rows across two matrices, and a last group in part */
        test_gemv_chain_pro(dt, 1536, {301, 37, 90});
        if (gcuda_dtype_size(dt) == 2) {
            test_gemv_chain_pro_tail(dt, 1536, 1, 256, true); /* E2B's per-layer-input gate after down */
            test_gemv_chain_pro_tail(dt, 1536, 1, 300, false);
            test_gemv_chain_pro_tail(dt, 1536, 1, 256, false, true);
            test_gemv_chain_pro_tail(dt, 1536, 2, 300, true, true);
            /* more groups than blocks: each block's later groups read L at their start */
            test_gemv_chain_pro_tail(dt, 1536, 1, 4102, false);
            test_gemv_chain_pro_tail(dt, 1536, 2, 256, true);
            test_gemv_chain_pro_tail(dt, 1536, 3, 1024, true); /* the gate/up pair after o */
            test_gemv_chain_pro_tail(dt, 2048, 3, 600, false);
            test_gemv_chain_pro_tail(dt, 64, 3, 128, true); /* the gemma4 fixtures' sizes: most threads hold none */
            test_gemv_chain_pro_tail(dt, 64, 1, 16, false);
        }
        if (!quick) {
            test_gemv(dt, 1536, 8960);
            test_gemv(dt, 8960, 1536);
            test_gemv(dt, 1536, 65536);
        }

        test_gemm(dt, 2, 64, 64, 1, false);
        test_gemm(dt, 37, 1536, 1536, 1, false);
        test_gemm(dt, 128, 1003, 1000, 1, false); /* odd N: 2- or 4-byte alignment */
        test_gemm(dt, 5, 64, 48, 3, true);
        test_gemm(dt, 64, 256, 128, 4, false);
        if (!quick) test_gemm(dt, 512, 6144, 1536, 1, false);

        std::vector<attn_case> ac = {
            {1, 8, 1, 256, 1024, {1000}, -1, 0, 0, 0},
            {1, 8, 1, 256, 1024, {1000}, 511, 0, 0, 0},
            {1, 8, 1, 512, 600, {517}, -1, 0, 0, 0},
            {2, 32, 8, 64, 4096, {4096, 1}, -1, 0, 0, 0},
            {2, 16, 16, 128, 300, {300, 77}, -1, 5.0f, 1.0f, 0},
            {1, 12, 1, 64, 2048, {2048}, 100, 2.0f, 0.5f, 0},
            {3, 4, 2, 256, 64, {0, 33, 64}, -1, 0, 0, 0},
            {1, 6, 2, 80, 200, {150}, -1, 0, 0, 0},
            {1, 8, 1, 512, 700, {700}, -1, 0, 0, 3},
            {1, 8, 2, 256, 512, {500}, 64, 0, 0, 1},
        };
        if (quick) ac = {ac[0], ac[1], ac[2], ac[4], ac[6], ac[7], ac[8]};
        ac.push_back({1, 16, 1, 128, 300, {300}, -1, 0, 0, 0});
        ac.push_back({2, 8, 1, 512, 200, {200, 65}, 100, 0, 0, 2});
        /* Gemma's sliding shape, one launch over a sequence of one split's keys and one of several */
        ac.push_back({2, 8, 1, 256, 1024, {20, 300}, 511, 0, 0, 0});
        for (g_attn_impl = 0; g_attn_impl <= (dt == GRAFT_DTYPE_FLOAT ? 0 : 2); g_attn_impl += 2)
        for (auto &c : ac) {
            if (quick && c.max_seq > 256) {
                attn_case s = c; /* sanitizer runs: short sequences */
                s.max_seq = 256;
                for (auto &L : s.lens) L = std::min(L, 256);
                test_attn(dt, s);
            } else {
                test_attn(dt, c);
            }
        }

        std::vector<prefill_case> pc = {
            {1, 37, 8, 1, 256, 600, {0}, -1, 0, 0, 0, 0},
            {1, 70, 8, 1, 256, 800, {500}, 511, 0, 0, 1, 0},
            {1, 40, 8, 1, 512, 300, {200}, -1, 0, 0, 0, 1},
            {2, 50, 32, 8, 64, 256, {0, 170}, -1, 0, 0, 0, 0},
            {2, 33, 16, 16, 128, 128, {95, 10}, -1, 5.0f, 1.0f, 1, 1},
            {1, 64, 12, 1, 64, 512, {100}, 20, 2.0f, 0.5f, 0, 0},
            {1, 19, 6, 2, 80, 100, {7}, -1, 0, 0, 0, 0},
            {1, 1, 8, 2, 256, 64, {30}, 10, 0, 0, 0, 0},
        };
        if (quick) pc = {pc[1], pc[2], pc[4], pc[6], pc[7]};
        for (auto &c : pc) {
            if (quick && c.max_seq > 300) {
                prefill_case s = c; /* sanitizer runs: short sequences */
                s.max_seq = 300;
                for (auto &P : s.past) P = std::min(P, 300 - s.S);
                test_prefill(dt, s);
            } else {
                test_prefill(dt, c);
            }
        }

        std::vector<nbits_case> nc = {
            {1, 1536, 1536, 32, 0, 0, 0},  {1, 2048, 1536, 32, 1, 1, 0}, {1, 300, 8960, 128, 0, 0, 0},
            {1, 77, 1000, 16, 1, 0, 0},    {1, 64, 272, 16, 2, 1, 0},    {1, 100, 4096, 256, 2, 0, 0},
            {1, 129, 1536, 64, 1, 0, 1},   {1, 40, 100, 64, 0, 1, 0},    {5, 300, 1536, 32, 1, 1, 0},
            {70, 130, 1000, 16, 2, 0, 0},  {3, 64, 4096, 128, 0, 0, 1},  {128, 256, 512, 32, 1, 1, 0}, {1, 96, 512, 16, 2, 0, 0},
            {1, 200, 1024, 16, 1, 1, 0},
        };
        if (!quick) nc.push_back({1, 8960, 1536, 32, 1, 0, 0});
        for (auto &c : nc) test_nbits(dt, c);

        test_softmax(dt, 4, 1000);
        test_softmax(dt, 2, 32);
        test_softmax(dt, 8, 4096);
        if (!quick) test_softmax(dt, 1, 262144);
        test_argmax(dt, 1000);
        test_argmax(dt, 1003);
        test_fused(dt, 1, 256); /* the norm head's row at 1, 2, 4 and 8 elements a thread, then looping */
        test_fused(dt, 35, 256);
        test_fused(dt, 2, 500);
        test_fused(dt, 3, 1000);
        test_fused(dt, 8, 1536);
        test_fused(dt, 1, 12288);
        test_argmax(dt, quick ? 32000 : 262144);
        test_argmax(dt, quick ? 32003 : 262147);

        test_binary(dt, GCUDA_BINARY_ADD, 4096, 4096);
        test_binary(dt, GCUDA_BINARY_MUL, 4096, 4096);
        test_binary(dt, GCUDA_BINARY_ADD, 1003, 1003);
        test_binary(dt, GCUDA_BINARY_MUL, 4096, 64);

        test_gather(dt, 1000, 1536);
        test_gather(dt, 50, 100);
        test_gather_multi(dt, {40, 40, 512, 512}, {8, 8, 16, 16}); /* the rotary caches' shapes: 16-byte rows */
        test_gather_multi(dt, {40, 100, 41}, {6, 64, 5});          /* rows of other widths */
    }
    test_int_ops<int64_t>(GRAFT_DTYPE_INT64);
    test_int_ops<int32_t>(GRAFT_DTYPE_INT32);
    test_int_prog<int64_t>(GRAFT_DTYPE_INT64);
    test_int_prog<int32_t>(GRAFT_DTYPE_INT32);

    int fails = 0;
    printf("\n| kernel | shape | dtype | non-finite | max err / max ref | threshold | result |\n"
           "|---|---|---|---:|---:|---:|---|\n");
    for (auto &r : g_rows) {
        printf("| %s | %s | %s | %zu/%zu | %.2e | %.0e | %s |\n", r.kernel.c_str(), r.shape.c_str(), dname(r.dt),
               r.nonfinite, r.n, r.err, r.thr, r.pass ? "ok" : "FAIL");
        fails += !r.pass;
    }
    printf("\n%zu checks, %d failed\n", g_rows.size(), fails);
    if (!quick) bench();
    CK(gcuda_sync(NULL, &E));
    printf("test_kernels: %s\n", fails ? "FAILED" : "passed");
    return fails ? 1 : 0;
}
