/* CPU kernels, nn family (ONNX domain): MatMul, Gemm, the normalizations
 * (LayerNormalization, RMSNormalization, BatchNormalization,
 * InstanceNormalization, GroupNormalization), Dropout (inference) and
 * RotaryEmbedding. Floating types compute in fp32 (fp16/bf16/double are
 * converted on the way in and out); MatMul also takes integer types. */
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/gemm.h"
#include "kernels/kcommon.h"
#include "kernels/kvec.h"

/* ------------------------------------------------------------ MatMul */

/* MatMul state: the scratch buffers (first, so the k_scratch helpers see
 * them) and, when B is a 2-D float weight, B prepacked once. */
typedef struct matmul_state {
    k_scratch s;
    k_bpack pb;
    const void *pb_key;
    size_t pb_bytes;
} matmul_state;

static graft_status matmul_init(rt_node *n, graft_error *err)
{
    if (!(n->state = calloc(1, sizeof(matmul_state)))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    return GRAFT_OK;
}

static void matmul_fini(rt_node *n)
{
    matmul_state *st = n->state;
    if (st) k_bpack_free(&st->pb);
    k_scratch_fini(n);
}

/* B prepacked when it is a constant 2-D float matrix worth packing; NULL otherwise. */
static const k_bpack *matmul_packed_b(rt_node *n, const rt_tensor *b)
{
    matmul_state *st = n->state;
    if (b->rank != 2 || !k_is_float(b->dtype) || b->dims[0] * b->dims[1] < 4096 || !k_input_is_const(n, 1))
        return NULL;
    if (k_bpack_ready(&st->pb) && st->pb_key == b->data && st->pb_bytes == b->nbytes) return &st->pb;
    st->pb_key = NULL;
    if (!k_bpack_init(&st->pb, b->dtype, b->data, b->dims[0], b->dims[1])) return NULL; /* fall back */
    st->pb_key = b->data;
    st->pb_bytes = b->nbytes;
#ifdef MADV_PAGEOUT
    /* The packed copy is what runs from now on: the original's pages (the
     * mapped weight file, or a heap copy) are handed back to the kernel.
     * MADV_PAGEOUT keeps the contents (clean file pages are dropped and
     * read again if touched, anonymous ones swapped or kept), so another
     * reader of the same initializer still sees it. Whole pages inside the
     * tensor only; a failure changes nothing. */
    long psz = sysconf(_SC_PAGESIZE);
    uintptr_t pm = psz > 0 ? (uintptr_t)psz - 1 : 4095;
    uintptr_t lo = ((uintptr_t)b->data + pm) & ~pm, hi = ((uintptr_t)b->data + b->nbytes) & ~pm;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_PAGEOUT);
#endif
    return &st->pb;
}

#define IMATMUL(T, ACC)                                                                    \
    do {                                                                                   \
        const T *A = a->data, *B = b->data;                                                \
        T *C = o->data;                                                                    \
        for (int64_t bi = 0; bi < nb; bi++) {                                              \
            const T *pa = A + aoff[bi], *pb = B + boff[bi];                                \
            T *pc = C + bi * M * N;                                                        \
            for (int64_t i = 0; i < M; i++)                                                \
                for (int64_t j = 0; j < N; j++) {                                          \
                    ACC s = 0;                                                             \
                    for (int64_t k = 0; k < K; k++) s += (ACC)pa[i * K + k] * (ACC)pb[k * N + j]; \
                    pc[i * N + j] = (T)s;                                                  \
                }                                                                          \
        }                                                                                  \
    } while (0)

static graft_status matmul_run(rt_node *n, graft_error *err)
{
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1);
    if (!a || !b) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (a->rank == 0 || b->rank == 0) return rt_err(n, err, GRAFT_EINVAL, "scalar operand");
    if (a->dtype != b->dtype)
        return rt_err(n, err, GRAFT_EINVAL, "input types differ (%s, %s)", graft_dtype_name(a->dtype),
                      graft_dtype_name(b->dtype));
    int a1 = a->rank == 1, b1 = b->rank == 1;
    int64_t M = a1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
    int64_t K2 = b1 ? b->dims[0] : b->dims[b->rank - 2], N = b1 ? 1 : b->dims[b->rank - 1];
    if (K != K2)
        return rt_err(n, err, GRAFT_EINVAL, "inner dimensions differ (%lld, %lld)", (long long)K,
                      (long long)K2);
    int rab = a1 ? 0 : a->rank - 2, rbb = b1 ? 0 : b->rank - 2, rob;
    int64_t ob[RT_MAX_RANK], od[RT_MAX_RANK];
    if (!k_broadcast(rab, a->dims, rbb, b->dims, &rob, ob))
        return rt_err(n, err, GRAFT_EINVAL, "batch dimensions do not broadcast");
    int ro = 0;
    for (int i = 0; i < rob; i++) od[ro++] = ob[i];
    if (!a1) od[ro++] = M;
    if (!b1) od[ro++] = N;
    rt_tensor *o = rt_out(n, 0, a->dtype, ro, od, err);
    K_OUT_OR_FAIL(o);
    int64_t nb = (int64_t)rt_numel(rob, ob);
    if (o->numel == 0) return GRAFT_OK;
    /* batch offsets (elements) */
    int64_t sa[RT_MAX_RANK], sb[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_bstrides(rab, a->dims, rob, ob, sa);
    k_bstrides(rbb, b->dims, rob, ob, sb);
    int64_t *aoff = k_scratch_get(n, 5, (size_t)(2 * nb) * sizeof(int64_t), err);
    if (!aoff) return err->code;
    int64_t *boff = aoff + nb;
    int b_shared = 1;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t ia = 0, ib = 0;
        for (int d = 0; d < rob; d++) {
            ia += idx[d] * sa[d];
            ib += idx[d] * sb[d];
        }
        aoff[bi] = ia * M * K;
        boff[bi] = ib * K * N;
        if (boff[bi] != 0) b_shared = 0;
        if (aoff[bi] != bi * M * K) b_shared = 0;
        k_next(rob, ob, idx);
    }
    switch (a->dtype) {
    case GRAFT_DTYPE_FLOAT:
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: {
        const k_bpack *pb = b_shared ? matmul_packed_b(n, b) : NULL;
        const float *A = k_input_f32(n, 0, 0, err), *B = pb ? NULL : k_input_f32(n, 1, 1, err);
        if (!A || (!pb && !B)) return err->code;
        float *C = k_out_f32(n, o, 2, err);
        if (!C) return err->code;
        int rc = 0;
        if (pb) {
            rc = k_sgemm_packed(nb * M, A, K, pb, C, N);
        } else if (b_shared) {
            rc = k_sgemm(0, 0, nb * M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        } else {
            for (int64_t bi = 0; bi < nb && !rc; bi++)
                rc = k_sgemm(0, 0, M, N, K, 1.0f, A + aoff[bi], K, B + boff[bi], N, 0.0f, C + bi * M * N, N);
        }
        if (rc) return rt_err(n, err, GRAFT_ENOMEM, "out of memory for GEMM scratch");
        k_out_f32_done(o, C);
        return GRAFT_OK;
    }
    case GRAFT_DTYPE_DOUBLE: IMATMUL(double, double); return GRAFT_OK;
    case GRAFT_DTYPE_INT32: IMATMUL(int32_t, int64_t); return GRAFT_OK;
    case GRAFT_DTYPE_INT64: IMATMUL(int64_t, int64_t); return GRAFT_OK;
    case GRAFT_DTYPE_UINT32: IMATMUL(uint32_t, uint64_t); return GRAFT_OK;
    case GRAFT_DTYPE_UINT64: IMATMUL(uint64_t, uint64_t); return GRAFT_OK;
    default:
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(a->dtype));
    }
}

/* ------------------------------------------------------------ Gemm */

static graft_status gemm_run(rt_node *n, graft_error *err)
{
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1), *c = rt_in(n, 2);
    if (!a || !b) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (a->rank != 2 || b->rank != 2) return rt_err(n, err, GRAFT_EINVAL, "A and B must be 2-D");
    if (!k_is_float(a->dtype) || b->dtype != a->dtype || (c && c->dtype != a->dtype))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(a->dtype));
    int ta = (int)rt_attr_int(n, "transA", 0), tb = (int)rt_attr_int(n, "transB", 0);
    float alpha = rt_attr_float(n, "alpha", 1.0f), beta = rt_attr_float(n, "beta", 1.0f);
    int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
    int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
    if (K != K2)
        return rt_err(n, err, GRAFT_EINVAL, "inner dimensions differ (%lld, %lld)", (long long)K,
                      (long long)K2);
    int64_t od[2] = {M, N};
    if (c) {
        int ro;
        int64_t bd[RT_MAX_RANK];
        if (c->rank > 2 || !k_broadcast(2, od, c->rank, c->dims, &ro, bd) || bd[0] != M || bd[1] != N)
            return rt_err(n, err, GRAFT_EINVAL, "C does not broadcast to (%lld, %lld)", (long long)M,
                          (long long)N);
    }
    rt_tensor *o = rt_out(n, 0, a->dtype, 2, od, err);
    K_OUT_OR_FAIL(o);
    if (o->numel == 0) return GRAFT_OK;
    const float *A = k_input_f32(n, 0, 0, err), *B = k_input_f32(n, 1, 1, err);
    if (!A || !B) return err->code;
    float *Y = k_out_f32(n, o, 2, err);
    if (!Y) return err->code;
    float bt = 0.0f;
    if (c && beta != 0.0f) {
        const float *C = k_input_f32(n, 2, 3, err);
        if (!C) return err->code;
        int64_t sc[2];
        k_bstrides(c->rank, c->dims, 2, od, sc);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) Y[i * N + j] = C[i * sc[0] + j * sc[1]];
        bt = beta;
    }
    if (k_sgemm(ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, bt, Y, N))
        return rt_err(n, err, GRAFT_ENOMEM, "out of memory for GEMM scratch");
    k_out_f32_done(o, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ shared: normalized-axes helpers */

/* Offsets of a parameter tensor p (broadcast unidirectionally to the
 * trailing `rd` dims `d` of X) for each of the rows' D inner positions. */
static int64_t *inner_offsets(rt_node *n, const rt_tensor *p, int rd, const int64_t *d, int64_t D, int buf,
                              graft_error *err)
{
    if (p->rank > rd) {
        for (int i = 0; i < p->rank - rd; i++)
            if (p->dims[i] != 1) {
                rt_err(n, err, GRAFT_EUNSUPPORTED, "parameter of rank %d over the normalized rank %d",
                       p->rank, rd);
                return NULL;
            }
    }
    int pr = p->rank > rd ? rd : p->rank;
    const int64_t *pd = p->dims + (p->rank - pr);
    for (int i = 0; i < pr; i++)
        if (pd[i] != 1 && pd[i] != d[rd - pr + i]) {
            rt_err(n, err, GRAFT_EINVAL, "parameter shape does not broadcast to the normalized shape");
            return NULL;
        }
    int64_t *off = k_scratch_get(n, buf, (size_t)D * sizeof(int64_t) + 8, err);
    if (!off) return NULL;
    int64_t st[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_bstrides(pr, pd, rd, d, st);
    for (int64_t i = 0; i < D; i++) {
        int64_t o = 0;
        for (int k = 0; k < rd; k++) o += idx[k] * st[k];
        off[i] = o;
        k_next(rd, d, idx);
    }
    return off;
}

/* ------------------------------------------------------------ LayerNormalization */

static graft_status layernorm_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *sc = rt_in(n, 1), *bi = rt_in(n, 2);
    if (!x || !sc) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int ax = k_axis(rt_attr_int(n, "axis", -1), x->rank);
    if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    float eps = rt_attr_float(n, "epsilon", 1e-5f);
    int64_t R = (int64_t)rt_numel(ax, x->dims), D = (int64_t)rt_numel(x->rank - ax, x->dims + ax);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    int64_t sd[RT_MAX_RANK];
    for (int i = 0; i < x->rank; i++) sd[i] = i < ax ? x->dims[i] : 1;
    rt_tensor *mo = NULL, *io = NULL;
    int stash = (int)rt_attr_int(n, "stash_type", 1);
    int sdt = stash == GRAFT_DTYPE_DOUBLE || stash == GRAFT_DTYPE_FLOAT16 || stash == GRAFT_DTYPE_BFLOAT16
                  ? stash
                  : GRAFT_DTYPE_FLOAT;
    if (n->n_out > 1) K_OUT_OR_FAIL(mo = rt_out(n, 1, sdt, x->rank, sd, err));
    if (n->n_out > 2) K_OUT_OR_FAIL(io = rt_out(n, 2, sdt, x->rank, sd, err));
    if (x->numel == 0) return GRAFT_OK;
    const float *X = k_input_f32(n, 0, 0, err), *S = k_input_f32(n, 1, 1, err), *B = NULL;
    if (!X || !S) return err->code;
    if (bi && !(B = k_input_f32(n, 2, 2, err))) return err->code;
    int64_t *so = inner_offsets(n, sc, x->rank - ax, x->dims + ax, D, 3, err), *bo = NULL;
    if (!so) return err->code;
    if (bi && !(bo = inner_offsets(n, bi, x->rank - ax, x->dims + ax, D, 4, err))) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    float *stats = k_scratch_get(n, 6, (size_t)(2 * R) * sizeof(float), err);
    if (!stats) return err->code;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = X + r * D;
        float *yr = Y + r * D;
        double s = 0;
        for (int64_t i = 0; i < D; i++) s += xr[i];
        float mean = (float)(s / (double)D);
        double v = 0;
        for (int64_t i = 0; i < D; i++) {
            float d = xr[i] - mean;
            v += (double)d * d;
        }
        float inv = (float)(1.0 / sqrt(v / (double)D + (double)eps));
        for (int64_t i = 0; i < D; i++) {
            float t = (xr[i] - mean) * inv * S[so[i]];
            yr[i] = B ? t + B[bo[i]] : t;
        }
        stats[r] = mean;
        stats[R + r] = inv;
    }
    k_out_f32_done(y, Y);
    if (mo) k_from_f32(mo->dtype, stats, mo->data, (size_t)R);
    if (io) k_from_f32(io->dtype, stats + R, io->data, (size_t)R);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ RMSNormalization */

typedef struct rms_job {
    const float *X, *S;
    const int64_t *so;
    float *Y;
    int64_t R, D, per;
    int contiguous; /* so[i] == i */
    float eps;
} rms_job;

#ifdef KV_X86
/* One row: the sum of squares in double over eight lanes (each term as in
 * the scalar loop, only the order of the double additions differs), then
 * y = x * inv * s. */
__attribute__((target("avx2,fma"))) static void rms_row_avx2(const rms_job *j, int64_t r)
{
    const float *xr = j->X + r * j->D;
    float *yr = j->Y + r * j->D;
    int64_t D = j->D, i = 0;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    for (; i + 8 <= D; i += 8) {
        __m256 v = _mm256_loadu_ps(xr + i);
        __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
    }
    double q[4];
    _mm256_storeu_pd(q, _mm256_add_pd(a0, a1));
    double s = (q[0] + q[1]) + (q[2] + q[3]);
    for (; i < D; i++) s += (double)xr[i] * xr[i];
    float inv = (float)(1.0 / sqrt(s / (double)D + (double)j->eps));
    i = 0;
    if (j->contiguous) {
        __m256 vi = _mm256_set1_ps(inv);
        for (; i + 8 <= D; i += 8)
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vi), _mm256_loadu_ps(j->S + i)));
    }
    for (; i < D; i++) yr[i] = xr[i] * inv * j->S[j->so[i]];
}
#endif

static void rms_rows(const rms_job *j, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
#ifdef KV_X86
        if (k_have_avx2()) {
            rms_row_avx2(j, r);
            continue;
        }
#endif
        const float *xr = j->X + r * j->D;
        float *yr = j->Y + r * j->D;
        double s = 0;
        for (int64_t i = 0; i < j->D; i++) s += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(s / (double)j->D + (double)j->eps));
        for (int64_t i = 0; i < j->D; i++) yr[i] = xr[i] * inv * j->S[j->so[i]];
    }
}

static void rms_task(void *ctx, int64_t t)
{
    const rms_job *j = ctx;
    int64_t r0 = t * j->per, r1 = r0 + j->per < j->R ? r0 + j->per : j->R;
    rms_rows(j, r0, r1);
}

static graft_status rmsnorm_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *sc = rt_in(n, 1);
    if (!x || !sc) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int ax = k_axis(rt_attr_int(n, "axis", -1), x->rank);
    if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    float eps = rt_attr_float(n, "epsilon", 1e-5f);
    int64_t R = (int64_t)rt_numel(ax, x->dims), D = (int64_t)rt_numel(x->rank - ax, x->dims + ax);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    if (x->numel == 0) return GRAFT_OK;
    const float *X = k_input_f32(n, 0, 0, err), *S = k_input_f32(n, 1, 1, err);
    if (!X || !S) return err->code;
    int64_t *so = inner_offsets(n, sc, x->rank - ax, x->dims + ax, D, 3, err);
    if (!so) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    rms_job j = {X, S, so, Y, R, D, 0, 1, eps};
    for (int64_t i = 0; i < D && j.contiguous; i++) j.contiguous = so[i] == i;
    j.per = 4096 / (D ? D : 1) > 1 ? 4096 / (D ? D : 1) : 1;
    if (R * D >= 8192 && R > j.per && k_threads() > 1) k_parallel_for((R + j.per - 1) / j.per, rms_task, &j);
    else rms_rows(&j, 0, R);
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ BatchNormalization */

static graft_status batchnorm_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    for (int i = 0; i < 5; i++)
        if (!rt_in(n, i)) return rt_err(n, err, GRAFT_EINVAL, "missing input %d", i);
    if (x->rank < 2) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], S = (int64_t)rt_numel(x->rank - 2, x->dims + 2);
    for (int i = 1; i < 5; i++)
        if ((int64_t)rt_in(n, i)->numel != C)
            return rt_err(n, err, GRAFT_EINVAL, "input %d does not hold %lld channel values", i, (long long)C);
    float eps = rt_attr_float(n, "epsilon", 1e-5f), mom = rt_attr_float(n, "momentum", 0.9f);
    int training = (int)rt_attr_int(n, "training_mode", 0) && n->opset >= 14;
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    const float *X = k_input_f32(n, 0, 0, err), *sc = k_input_f32(n, 1, 1, err), *bi = k_input_f32(n, 2, 2, err);
    const float *mean = k_input_f32(n, 3, 3, err), *var = k_input_f32(n, 4, 4, err);
    if (!X || !sc || !bi || !mean || !var) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    float *st = k_scratch_get(n, 6, (size_t)(4 * C + 1) * sizeof(float), err);
    if (!Y || !st) return err->code;
    float *um = st, *uv = st + C, *rm = st + 2 * C, *rv = st + 3 * C;
    for (int64_t c = 0; c < C; c++) {
        if (training) {
            double s = 0, q = 0, cnt = (double)(N * S);
            for (int64_t b = 0; b < N; b++)
                for (int64_t i = 0; i < S; i++) s += X[(b * C + c) * S + i];
            double m = cnt > 0 ? s / cnt : 0;
            for (int64_t b = 0; b < N; b++)
                for (int64_t i = 0; i < S; i++) {
                    double d = X[(b * C + c) * S + i] - m;
                    q += d * d;
                }
            um[c] = (float)m;
            uv[c] = (float)(cnt > 0 ? q / cnt : 0);
            rm[c] = mean[c] * mom + um[c] * (1 - mom);
            rv[c] = var[c] * mom + uv[c] * (1 - mom);
        } else {
            um[c] = mean[c];
            uv[c] = var[c];
        }
    }
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++) {
            float inv = 1.0f / sqrtf(uv[c] + eps), m = um[c];
            const float *xr = X + (b * C + c) * S;
            float *yr = Y + (b * C + c) * S;
            for (int64_t i = 0; i < S; i++) yr[i] = (xr[i] - m) * inv * sc[c] + bi[c];
        }
    k_out_f32_done(y, Y);
    if (training) {
        int64_t cd[1] = {C};
        for (int k = 1; k < n->n_out && k < 3; k++) {
            rt_tensor *o = rt_out(n, k, rt_in(n, 3)->dtype, 1, cd, err);
            K_OUT_OR_FAIL(o);
            k_from_f32(o->dtype, k == 1 ? rm : rv, o->data, (size_t)C);
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ InstanceNormalization */

static graft_status instancenorm_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1), *b = rt_in(n, 2);
    if (!x || !s || !b) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (x->rank < 2) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], S = (int64_t)rt_numel(x->rank - 2, x->dims + 2);
    if ((int64_t)s->numel != C || (int64_t)b->numel != C)
        return rt_err(n, err, GRAFT_EINVAL, "scale and B must hold %lld values", (long long)C);
    float eps = rt_attr_float(n, "epsilon", 1e-5f);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    const float *X = k_input_f32(n, 0, 0, err), *sc = k_input_f32(n, 1, 1, err), *bi = k_input_f32(n, 2, 2, err);
    if (!X || !sc || !bi) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    for (int64_t r = 0; r < N * C; r++) {
        const float *xr = X + r * S;
        float *yr = Y + r * S;
        double sum = 0, q = 0;
        for (int64_t i = 0; i < S; i++) sum += xr[i];
        double m = S ? sum / (double)S : 0;
        for (int64_t i = 0; i < S; i++) q += (xr[i] - m) * (xr[i] - m);
        float inv = (float)(1.0 / sqrt((S ? q / (double)S : 0) + eps));
        int64_t c = r % C;
        for (int64_t i = 0; i < S; i++) yr[i] = (float)(xr[i] - m) * inv * sc[c] + bi[c];
    }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ GroupNormalization */

static graft_status groupnorm_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1), *b = rt_in(n, 2);
    if (!x || !s || !b) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (x->rank < 2) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t G = rt_attr_int(n, "num_groups", 0);
    int64_t N = x->dims[0], C = x->dims[1], S = (int64_t)rt_numel(x->rank - 2, x->dims + 2);
    if (G <= 0 || C % G) return rt_err(n, err, GRAFT_EINVAL, "num_groups %lld does not divide %lld channels",
                                       (long long)G, (long long)C);
    /* opset 18: scale/bias per group; opset 21: per channel */
    int per_group = (int64_t)s->numel == G && n->opset < 21;
    if (!per_group && ((int64_t)s->numel != C || (int64_t)b->numel != C))
        return rt_err(n, err, GRAFT_EINVAL, "scale and bias must hold %lld values", (long long)C);
    float eps = rt_attr_float(n, "epsilon", 1e-5f);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    const float *X = k_input_f32(n, 0, 0, err), *sc = k_input_f32(n, 1, 1, err), *bi = k_input_f32(n, 2, 2, err);
    if (!X || !sc || !bi) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    int64_t cg = C / G, L = cg * S;
    for (int64_t bg = 0; bg < N * G; bg++) {
        const float *xr = X + bg * L;
        float *yr = Y + bg * L;
        double sum = 0, q = 0;
        for (int64_t i = 0; i < L; i++) sum += xr[i];
        double m = L ? sum / (double)L : 0;
        for (int64_t i = 0; i < L; i++) q += (xr[i] - m) * (xr[i] - m);
        float inv = (float)(1.0 / sqrt((L ? q / (double)L : 0) + eps));
        int64_t g = bg % G;
        for (int64_t i = 0; i < L; i++) {
            int64_t c = per_group ? g : g * cg + i / S;
            yr[i] = (float)(xr[i] - m) * inv * sc[c] + bi[c];
        }
    }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Dropout (inference) */

static graft_status dropout_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int training = 0;
    float ratio = rt_attr_float(n, "ratio", 0.5f);
    if (n->opset >= 12) {
        rt_tensor *r = rt_in(n, 1), *t = rt_in(n, 2);
        if (r && r->numel) {
            float f;
            if (!k_to_f32(r->dtype, r->data, &f, 1))
                return rt_err(n, err, GRAFT_EINVAL, "ratio of dtype %s", graft_dtype_name(r->dtype));
            ratio = f;
        } else {
            ratio = 0.5f;
        }
        if (t && t->numel) training = ((const uint8_t *)t->data)[0] != 0;
    } else if (n->opset < 7) {
        training = rt_attr_int(n, "is_test", 0) == 0;
    }
    if (training && ratio != 0.0f)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "training-mode dropout (random) is not supported");
    K_OUT_OR_FAIL(rt_out_view(n, 0, x->dtype, x->rank, x->dims, x->data, err));
    if (n->n_out > 1) {
        rt_tensor *m = rt_out(n, 1, GRAFT_DTYPE_BOOL, x->rank, x->dims, err);
        K_OUT_OR_FAIL(m);
        memset(m->data, 1, m->nbytes);
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ RotaryEmbedding (ONNX, opset 23) */

/* Rotates rd leading values of x (stride 1) into y with cos/sin rows of
 * rd/2 values; the rest of the head_size values are copied. */
#ifdef KV_X86
/* rope_row's non-interleaved loop eight pairs at a time (the same products
 * and sums, no FMA); returns the pairs done, a multiple of 8. */
__attribute__((target("avx2"))) static int64_t rope_half_avx2(const float *x, float *y, int64_t h, const float *cs,
                                                              const float *sn)
{
    int64_t i = 0;
    for (; i + 8 <= h; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + h + i);
        __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_mul_ps(c, a), _mm256_mul_ps(s, b)));
        _mm256_storeu_ps(y + h + i, _mm256_add_ps(_mm256_mul_ps(s, a), _mm256_mul_ps(c, b)));
    }
    return i;
}
#endif

static void rope_row(const float *x, float *y, int64_t hs, int64_t rd, const float *cs, const float *sn,
                     int interleaved)
{
    int64_t h = rd / 2;
    if (interleaved) {
        for (int64_t i = 0; i < h; i++) {
            float a = x[2 * i], b = x[2 * i + 1];
            y[2 * i] = cs[i] * a - sn[i] * b;
            y[2 * i + 1] = sn[i] * a + cs[i] * b;
        }
    } else {
        int64_t i = 0;
#ifdef KV_X86
        if (k_have_avx2()) i = rope_half_avx2(x, y, h, cs, sn);
#endif
        for (; i < h; i++) {
            float a = x[i], b = x[i + h];
            y[i] = cs[i] * a - sn[i] * b;
            y[i + h] = sn[i] * a + cs[i] * b;
        }
    }
    for (int64_t i = rd; i < hs; i++) y[i] = x[i];
}

static graft_status rotary_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *cc = rt_in(n, 1), *sc = rt_in(n, 2), *pos = rt_in(n, 3);
    if (!x || !cc || !sc) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (x->rank != 3 && x->rank != 4) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t B = x->dims[0], S, H, hs;
    int64_t nh = rt_attr_int(n, "num_heads", 0);
    if (x->rank == 4) {
        H = x->dims[1];
        S = x->dims[2];
        hs = x->dims[3];
    } else {
        S = x->dims[1];
        if (nh <= 0 || x->dims[2] % nh)
            return rt_err(n, err, GRAFT_EINVAL, "3-D input needs num_heads dividing %lld", (long long)x->dims[2]);
        H = nh;
        hs = x->dims[2] / nh;
    }
    int64_t rd = rt_attr_int(n, "rotary_embedding_dim", 0);
    if (rd == 0) rd = hs;
    if (rd > hs || rd % 2) return rt_err(n, err, GRAFT_EINVAL, "rotary_embedding_dim %lld for head size %lld",
                                         (long long)rd, (long long)hs);
    int il = (int)rt_attr_int(n, "interleaved", 0);
    int64_t half = rd / 2;
    if (cc->dims[cc->rank - 1] != half || sc->dims[sc->rank - 1] != half)
        return rt_err(n, err, GRAFT_EINVAL, "cos/sin caches' last dimension is not rotary_embedding_dim/2 = %lld",
                      (long long)half);
    int64_t *pids = NULL, maxpos = 0;
    if (pos) {
        if (cc->rank != 2 || sc->rank != 2)
            return rt_err(n, err, GRAFT_EINVAL, "with position_ids, cos/sin caches must be 2-D");
        if (pos->numel != (uint64_t)(B * S) && pos->numel != (uint64_t)S)
            return rt_err(n, err, GRAFT_EINVAL, "position_ids hold %llu values for batch %lld x sequence %lld",
                          (unsigned long long)pos->numel, (long long)B, (long long)S);
        pids = k_scratch_get(n, 3, (size_t)pos->numel * sizeof(int64_t) + 8, err);
        if (!pids) return err->code;
        if (rt_read_ints(pos, pids, pos->numel) < 0)
            return rt_err(n, err, GRAFT_EINVAL, "position_ids must be int64 or int32");
        maxpos = cc->dims[0];
    } else if (cc->rank != 3 || cc->dims[0] != B || cc->dims[1] != S || sc->rank != 3 || sc->dims[0] != B ||
               sc->dims[1] != S) {
        return rt_err(n, err, GRAFT_EINVAL, "without position_ids, cos/sin caches must be (batch, seq, rd/2)");
    }
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    const float *X = k_input_f32(n, 0, 0, err), *C = k_input_f32(n, 1, 1, err), *Sn = k_input_f32(n, 2, 2, err);
    if (!X || !C || !Sn) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t row;
            if (pids) {
                row = pos->numel == (uint64_t)S ? pids[s] : pids[b * S + s];
                if (row < 0 || row >= maxpos)
                    return rt_err(n, err, GRAFT_EINVAL, "position id %lld outside the caches (%lld rows)",
                                  (long long)row, (long long)maxpos);
            } else {
                row = b * S + s;
            }
            const float *cs = C + row * half, *sn = Sn + row * half;
            for (int64_t h = 0; h < H; h++) {
                int64_t off = x->rank == 4 ? ((b * H + h) * S + s) * hs : ((b * S + s) * H + h) * hs;
                rope_row(X + off, Y + off, hs, rd, cs, sn, il);
            }
        }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

const rt_kernel rt_kernels_nn[] = {
    {"", "MatMul", 1, 0, matmul_init, matmul_run, matmul_fini},
    {"", "Gemm", 7, 0, k_scratch_init, gemm_run, k_scratch_fini},
    {"", "LayerNormalization", 17, 0, k_scratch_init, layernorm_run, k_scratch_fini},
    {"", "RMSNormalization", 23, 0, k_scratch_init, rmsnorm_run, k_scratch_fini},
    {"", "BatchNormalization", 9, 0, k_scratch_init, batchnorm_run, k_scratch_fini},
    {"", "InstanceNormalization", 6, 0, k_scratch_init, instancenorm_run, k_scratch_fini},
    {"", "GroupNormalization", 18, 0, k_scratch_init, groupnorm_run, k_scratch_fini},
    {"", "Dropout", 7, 0, NULL, dropout_run, NULL},
    {"", "RotaryEmbedding", 23, 0, k_scratch_init, rotary_run, k_scratch_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
