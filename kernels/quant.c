/* CPU kernels, quantization family: DequantizeLinear and QuantizeLinear
 * (ONNX: per-tensor, per-axis, blocked; 8/16/32-bit integers, packed
 * 4/2-bit integers, float8 and float4 types), MatMulNBits and
 * GatherBlockQuantized (com.microsoft). */
#include <math.h>

#include "kernels/gemm.h"
#include "kernels/kcommon.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q_X86 1
#endif

#define MS "com.microsoft"

/* ------------------------------------------------------------ element codecs */

static int is_int_q(int dt)
{
    switch (dt) {
    case GRAFT_DTYPE_INT8: case GRAFT_DTYPE_UINT8: case GRAFT_DTYPE_INT16: case GRAFT_DTYPE_UINT16:
    case GRAFT_DTYPE_INT32: case GRAFT_DTYPE_INT4: case GRAFT_DTYPE_UINT4: case GRAFT_DTYPE_INT2:
    case GRAFT_DTYPE_UINT2: return 1;
    default: return 0;
    }
}

static int is_small_float(int dt)
{
    return dt == GRAFT_DTYPE_FLOAT8E4M3FN || dt == GRAFT_DTYPE_FLOAT8E4M3FNUZ || dt == GRAFT_DTYPE_FLOAT8E5M2 ||
           dt == GRAFT_DTYPE_FLOAT8E5M2FNUZ || dt == GRAFT_DTYPE_FLOAT4E2M1;
}

/* Raw code of element i (sub-byte types packed low bits first). */
static uint32_t code_at(int dt, const void *p, uint64_t i)
{
    const uint8_t *b = p;
    switch (dt) {
    case GRAFT_DTYPE_INT4: case GRAFT_DTYPE_UINT4: case GRAFT_DTYPE_FLOAT4E2M1: return (b[i / 2] >> (4 * (i % 2))) & 0xf;
    case GRAFT_DTYPE_INT2: case GRAFT_DTYPE_UINT2: return (b[i / 4] >> (2 * (i % 4))) & 0x3;
    default: return b[i];
    }
}

static void code_put(int dt, void *p, uint64_t i, uint32_t c)
{
    uint8_t *b = p;
    switch (dt) {
    case GRAFT_DTYPE_INT4: case GRAFT_DTYPE_UINT4: case GRAFT_DTYPE_FLOAT4E2M1: {
        int sh = 4 * (int)(i % 2);
        b[i / 2] = (uint8_t)((b[i / 2] & ~(0xf << sh)) | ((c & 0xf) << sh));
        break;
    }
    case GRAFT_DTYPE_INT2: case GRAFT_DTYPE_UINT2: {
        int sh = 2 * (int)(i % 4);
        b[i / 4] = (uint8_t)((b[i / 4] & ~(0x3 << sh)) | ((c & 0x3) << sh));
        break;
    }
    default: b[i] = (uint8_t)c;
    }
}

/* Value of a float8/float4 code. */
static float small_float(int dt, uint32_t c)
{
    int ebits, mbits, bias;
    int fnuz = dt == GRAFT_DTYPE_FLOAT8E4M3FNUZ || dt == GRAFT_DTYPE_FLOAT8E5M2FNUZ;
    switch (dt) {
    case GRAFT_DTYPE_FLOAT8E4M3FN: ebits = 4, mbits = 3, bias = 7; break;
    case GRAFT_DTYPE_FLOAT8E4M3FNUZ: ebits = 4, mbits = 3, bias = 8; break;
    case GRAFT_DTYPE_FLOAT8E5M2: ebits = 5, mbits = 2, bias = 15; break;
    case GRAFT_DTYPE_FLOAT8E5M2FNUZ: ebits = 5, mbits = 2, bias = 16; break;
    default: ebits = 2, mbits = 1, bias = 1; break; /* float4e2m1 */
    }
    int nb = 1 + ebits + mbits;
    uint32_t sign = (c >> (nb - 1)) & 1, e = (c >> mbits) & ((1u << ebits) - 1), m = c & ((1u << mbits) - 1);
    if (fnuz && c == 0x80) return NAN;
    if (dt == GRAFT_DTYPE_FLOAT8E4M3FN && e == 15 && m == 7) return sign ? -NAN : NAN;
    if (dt == GRAFT_DTYPE_FLOAT8E5M2 && e == 31) return m ? NAN : (sign ? -INFINITY : INFINITY);
    float v = e == 0 ? ldexpf((float)m, 1 - bias - mbits) : ldexpf((float)(m | (1u << mbits)), (int)e - bias - mbits);
    return sign ? -v : v;
}

/* Nearest float8/float4 code to x, ties to even, saturating. */
static uint32_t small_float_code(int dt, float x, int saturate)
{
    int nb = dt == GRAFT_DTYPE_FLOAT4E2M1 ? 4 : 8;
    uint32_t sbit = 1u << (nb - 1);
    int fnuz = dt == GRAFT_DTYPE_FLOAT8E4M3FNUZ || dt == GRAFT_DTYPE_FLOAT8E5M2FNUZ;
    if (isnan(x)) {
        if (dt == GRAFT_DTYPE_FLOAT4E2M1) return 0;
        return fnuz ? 0x80 : (dt == GRAFT_DTYPE_FLOAT8E5M2 ? 0x7f : 0x7f);
    }
    uint32_t sign = signbit(x) ? sbit : 0;
    float a = fabsf(x);
    uint32_t best = 0, maxc = 0;
    float bestd = INFINITY, maxv = 0;
    for (uint32_t c = 0; c < sbit; c++) {
        float v = small_float(dt, c);
        if (isnan(v) || isinf(v)) continue;
        if (v > maxv) maxv = v, maxc = c;
        float d = fabsf(v - a);
        if (d < bestd || (d == bestd && !(c & 1))) bestd = d, best = c;
    }
    if (a > maxv) {
        if (isinf(a) && !saturate && dt == GRAFT_DTYPE_FLOAT8E5M2) return sign | 0x7c;
        if (!saturate && dt != GRAFT_DTYPE_FLOAT4E2M1) return fnuz ? 0x80 : (dt == GRAFT_DTYPE_FLOAT8E5M2 ? sign | 0x7c : sign | 0x7f);
        best = maxc;
    }
    if (fnuz && best == 0) sign = 0; /* no negative zero */
    return sign | best;
}

/* Element i of a quantized tensor as a float. */
static float qvalue(int dt, const void *p, uint64_t i)
{
    switch (dt) {
    case GRAFT_DTYPE_INT8: return ((const int8_t *)p)[i];
    case GRAFT_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case GRAFT_DTYPE_INT16: return ((const int16_t *)p)[i];
    case GRAFT_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case GRAFT_DTYPE_INT32: return (float)((const int32_t *)p)[i];
    case GRAFT_DTYPE_UINT4: case GRAFT_DTYPE_UINT2: return (float)code_at(dt, p, i);
    case GRAFT_DTYPE_INT4: {
        int v = (int)code_at(dt, p, i);
        return (float)(v >= 8 ? v - 16 : v);
    }
    case GRAFT_DTYPE_INT2: {
        int v = (int)code_at(dt, p, i);
        return (float)(v >= 2 ? v - 4 : v);
    }
    default: return small_float(dt, code_at(dt, p, i));
    }
}

static void qrange(int dt, double *lo, double *hi)
{
    switch (dt) {
    case GRAFT_DTYPE_INT8: *lo = -128, *hi = 127; break;
    case GRAFT_DTYPE_UINT8: *lo = 0, *hi = 255; break;
    case GRAFT_DTYPE_INT16: *lo = -32768, *hi = 32767; break;
    case GRAFT_DTYPE_UINT16: *lo = 0, *hi = 65535; break;
    case GRAFT_DTYPE_INT32: *lo = -2147483648.0, *hi = 2147483647.0; break;
    case GRAFT_DTYPE_INT4: *lo = -8, *hi = 7; break;
    case GRAFT_DTYPE_UINT4: *lo = 0, *hi = 15; break;
    case GRAFT_DTYPE_INT2: *lo = -2, *hi = 1; break;
    default: *lo = 0, *hi = 3; break; /* uint2 */
    }
}

static void qstore(int dt, void *p, uint64_t i, double v)
{
    switch (dt) {
    case GRAFT_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case GRAFT_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case GRAFT_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case GRAFT_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case GRAFT_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: code_put(dt, p, i, (uint32_t)((int32_t)v) & 0xff); break;
    }
}

/* ------------------------------------------------------------ (De)QuantizeLinear */

/* Scale layout of x for axis/block_size: fills outer/A/inner and kind
 * (0 per-tensor, 1 per-axis, 2 blocked). */
typedef struct qlayout {
    int kind;
    int64_t outer, A, inner, bs, Ab;
} qlayout;

static graft_status q_layout(rt_node *n, const rt_tensor *x, const rt_tensor *s, qlayout *L, graft_error *err)
{
    memset(L, 0, sizeof *L);
    int64_t bs = n->opset >= 21 ? rt_attr_int(n, "block_size", 0) : 0;
    if (s->numel == 1 && s->rank <= 1 && bs == 0) {
        L->kind = 0;
        return GRAFT_OK;
    }
    int ax = k_axis(rt_attr_int(n, "axis", 1), x->rank);
    if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    L->outer = (int64_t)rt_numel(ax, x->dims);
    L->A = x->dims[ax];
    L->inner = (int64_t)rt_numel(x->rank - ax - 1, x->dims + ax + 1);
    if (bs > 0) {
        L->kind = 2;
        L->bs = bs;
        L->Ab = (L->A + bs - 1) / bs;
        if (s->rank != x->rank || s->dims[ax] != L->Ab || (int64_t)s->numel != L->outer * L->Ab * L->inner)
            return rt_err(n, err, GRAFT_EINVAL, "blocked scale shape does not match the input");
        return GRAFT_OK;
    }
    if (s->rank != 1 || s->dims[0] != L->A)
        return rt_err(n, err, GRAFT_EINVAL, "per-axis scale must be 1-D with %lld values", (long long)L->A);
    L->kind = 1;
    return GRAFT_OK;
}

static inline uint64_t q_sidx(const qlayout *L, uint64_t i)
{
    if (L->kind == 0) return 0;
    uint64_t in = (uint64_t)L->inner, a = (i / in) % (uint64_t)L->A;
    if (L->kind == 1) return a;
    uint64_t o = i / (in * (uint64_t)L->A);
    return (o * (uint64_t)L->Ab + a / (uint64_t)L->bs) * in + i % in;
}

static graft_status dequantize_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1), *z = rt_in(n, 2);
    if (!x || !s) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (!is_int_q(x->dtype) && !is_small_float(x->dtype))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "input dtype %s", graft_dtype_name(x->dtype));
    if (!k_is_float(s->dtype)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "scale dtype %s", graft_dtype_name(s->dtype));
    if (z && z->dtype != x->dtype) return rt_err(n, err, GRAFT_EINVAL, "zero point dtype differs from input's");
    qlayout L;
    graft_status rc = q_layout(n, x, s, &L, err);
    if (rc != GRAFT_OK) return rc;
    if (z && z->numel != s->numel) return rt_err(n, err, GRAFT_EINVAL, "zero point and scale shapes differ");
    int odt = (int)rt_attr_int(n, "output_dtype", 0);
    if (odt == 0 || n->opset < 23) odt = s->dtype;
    if (!k_is_float(odt)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output dtype %s", graft_dtype_name(odt));
    rt_tensor *y = rt_out(n, 0, odt, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    if (x->numel == 0) return GRAFT_OK;
    const float *S = k_input_f32(n, 1, 0, err);
    if (!S) return err->code;
    float *Y = odt == GRAFT_DTYPE_FLOAT ? y->data : k_scratch_get(n, 1, (size_t)x->numel * 4, err);
    if (!Y) return err->code;
    for (uint64_t i = 0; i < x->numel; i++) {
        uint64_t si = q_sidx(&L, i);
        float zp = z ? qvalue(z->dtype, z->data, si) : 0.0f;
        Y[i] = (qvalue(x->dtype, x->data, i) - zp) * S[si];
    }
    if (Y != y->data) k_from_f32(odt, Y, y->data, (size_t)y->numel);
    return GRAFT_OK;
}

static graft_status quantize_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1), *z = rt_in(n, 2);
    if (!x || !s) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (!k_is_float(x->dtype) || !k_is_float(s->dtype))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "input dtype %s", graft_dtype_name(x->dtype));
    int odt = z ? z->dtype : (n->opset >= 21 ? (int)rt_attr_int(n, "output_dtype", 0) : 0);
    if (odt == 0) odt = GRAFT_DTYPE_UINT8;
    if (!is_int_q(odt) && !is_small_float(odt))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "output dtype %s", graft_dtype_name(odt));
    qlayout L;
    graft_status rc = q_layout(n, x, s, &L, err);
    if (rc != GRAFT_OK) return rc;
    if (z && z->numel != s->numel) return rt_err(n, err, GRAFT_EINVAL, "zero point and scale shapes differ");
    int saturate = (int)rt_attr_int(n, "saturate", 1);
    rt_tensor *y = rt_out(n, 0, odt, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    if (x->numel == 0) return GRAFT_OK;
    memset(y->data, 0, y->nbytes);
    const float *X = k_input_f32(n, 0, 0, err), *S = k_input_f32(n, 1, 1, err);
    if (!X || !S) return err->code;
    double lo = 0, hi = 0;
    if (is_int_q(odt)) qrange(odt, &lo, &hi);
    for (uint64_t i = 0; i < x->numel; i++) {
        uint64_t si = q_sidx(&L, i);
        float zp = z ? qvalue(z->dtype, z->data, si) : 0.0f;
        if (is_int_q(odt)) {
            double v = (double)nearbyintf(X[i] / S[si]) + zp;
            if (isnan(v)) v = 0;
            v = v < lo ? lo : v > hi ? hi : v;
            qstore(odt, y->data, i, v);
        } else {
            code_put(odt, y->data, i, small_float_code(odt, X[i] / S[si] + zp, saturate));
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ MatMulNBits */

typedef struct nbits_job {
    const uint8_t *B, *zp8;
    const float *scales, *zpf, *A, *bias;
    float *Y, *W; /* W: dequantized rows (GEMM path) */
    int64_t M, N, K, kb, blob, block, zpw, n0, rows;
    int bits;
    _Atomic int nomem; /* a task could not allocate its row scratch */
} nbits_job;

/* MatMulNBits state: scratch (first, for the k_scratch helpers) and, for
 * products of more than 4 rows, B dequantized once and prepacked for the
 * GEMM (when it takes at most NBITS_PACK_MAX bytes), keyed by B's data. */
#define NBITS_PACK_MAX ((size_t)96 << 20)
typedef struct nbits_state {
    k_scratch s;
    k_bpack pb;
    const void *pb_key;
} nbits_state;

static graft_status nbits_init(rt_node *n, graft_error *err)
{
    if (!(n->state = calloc(1, sizeof(nbits_state)))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    return GRAFT_OK;
}

static void nbits_fini(rt_node *n)
{
    nbits_state *st = n->state;
    if (st) k_bpack_free(&st->pb);
    k_scratch_fini(n);
}

/* Dequantizes row n of B (K values) into w. */
static void nbits_row(const nbits_job *j, int64_t n, float *w)
{
    const uint8_t *row = j->B + n * j->kb * j->blob;
    int per = 8 / j->bits;
    uint32_t mask = (1u << j->bits) - 1;
    float defz = (float)(1 << (j->bits - 1));
    for (int64_t b = 0; b < j->kb; b++) {
        float s = j->scales[n * j->kb + b], z = defz;
        if (j->zp8) z = (float)((j->zp8[n * j->zpw + b / per] >> (j->bits * (b % per))) & mask);
        else if (j->zpf) z = j->zpf[n * j->kb + b];
        const uint8_t *blk = row + b * j->blob;
        int64_t k0 = b * j->block, cnt = j->K - k0 < j->block ? j->K - k0 : j->block;
        if (j->bits == 4) {
            for (int64_t i = 0; i < cnt; i++) w[k0 + i] = ((float)((blk[i / 2] >> (4 * (i % 2))) & 0xf) - z) * s;
        } else {
            for (int64_t i = 0; i < cnt; i++)
                w[k0 + i] = ((float)((blk[i / per] >> (j->bits * (i % per))) & mask) - z) * s;
        }
    }
}

static _Thread_local k_buf tl_wrow;

#ifdef Q_X86
__attribute__((target("avx2,fma"))) static inline float q_hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* 4-bit B, M (1..4) rows of A: Y[m, n] for rows n in [n0, n1). Each group
 * of 16 weights is unpacked and dequantized in registers, (q - z) * s as
 * nbits_row does, and multiplied into every A row; no fp32 copy of B. */
__attribute__((target("avx2,fma"), always_inline)) static inline void nbits4_rows(const nbits_job *j, int64_t n0,
                                                                                    int64_t n1, const int M)
{
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const int64_t K = j->K;
    for (int64_t n = n0; n < n1; n++) {
        __m256 acc[4][2];
        float tail[4] = {0, 0, 0, 0};
        for (int m = 0; m < M; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
        const uint8_t *row = j->B + n * j->kb * j->blob;
        for (int64_t b = 0; b < j->kb; b++) {
            float s = j->scales[n * j->kb + b], z = 8.0f;
            if (j->zp8) z = (float)((j->zp8[n * j->zpw + b / 2] >> (4 * (b % 2))) & 0xf);
            else if (j->zpf) z = j->zpf[n * j->kb + b];
            __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
            const uint8_t *blk = row + b * j->blob;
            int64_t k0 = b * j->block, cnt = K - k0 < j->block ? K - k0 : j->block, i = 0;
            for (; i + 16 <= cnt; i += 16) {
                __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(blk + i / 2));
                __m128i q = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
                __m256 w0 = _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), vz), vs);
                __m256 w1 = _mm256_mul_ps(
                    _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), vz), vs);
                for (int m = 0; m < M; m++) {
                    const float *a = j->A + m * K + k0 + i;
                    acc[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a), acc[m][0]);
                    acc[m][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a + 8), acc[m][1]);
                }
            }
            for (; i < cnt; i++) {
                float w = ((float)((blk[i / 2] >> (4 * (i % 2))) & 0xf) - z) * s;
                for (int m = 0; m < M; m++) tail[m] += w * j->A[m * K + k0 + i];
            }
        }
        for (int m = 0; m < M; m++)
            j->Y[m * j->N + n] = q_hsum(_mm256_add_ps(acc[m][0], acc[m][1])) + tail[m] + (j->bias ? j->bias[n] : 0.0f);
    }
}

__attribute__((target("avx2,fma"))) static void nbits4_avx2(const nbits_job *j, int64_t n0, int64_t n1)
{
    switch (j->M) {
    case 1: nbits4_rows(j, n0, n1, 1); break;
    case 2: nbits4_rows(j, n0, n1, 2); break;
    case 3: nbits4_rows(j, n0, n1, 3); break;
    default: nbits4_rows(j, n0, n1, 4); break;
    }
}
#endif

/* GEMV-like path: rows of B dequantized one at a time, dotted with each A row. */
static void nbits_gemv_task(void *ctx, int64_t t)
{
    const nbits_job *j = ctx;
    int64_t n0 = t * j->rows, n1 = n0 + j->rows < j->N ? n0 + j->rows : j->N;
#ifdef Q_X86
    if (j->bits == 4 && k_have_avx2()) {
        nbits4_avx2(j, n0, n1);
        return;
    }
#endif
    float *w = k_buf_get(&tl_wrow, (size_t)j->K * sizeof(float));
    if (!w) {
        ((nbits_job *)j)->nomem = 1;
        return;
    }
    for (int64_t nn = n0; nn < n1; nn++) {
        nbits_row(j, nn, w);
        for (int64_t m = 0; m < j->M; m++)
            j->Y[m * j->N + nn] = k_dot(j->A + m * j->K, w, j->K) + (j->bias ? j->bias[nn] : 0.0f);
    }
}

static void nbits_deq_task(void *ctx, int64_t t)
{
    const nbits_job *j = ctx;
    for (int64_t r = t * 8; r < (t + 1) * 8 && r < j->rows; r++) nbits_row(j, j->n0 + r, j->W + r * j->K);
}

static graft_status matmulnbits_run(rt_node *n, graft_error *err)
{
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1), *s = rt_in(n, 2), *z = rt_in(n, 3), *bias = rt_in(n, 5);
    if (!a || !b || !s) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (rt_in(n, 4) && rt_in(n, 4)->numel) return rt_err(n, err, GRAFT_EUNSUPPORTED, "g_idx is not supported");
    int64_t K = rt_attr_int(n, "K", 0), N = rt_attr_int(n, "N", 0), block = rt_attr_int(n, "block_size", 0);
    int bits = (int)rt_attr_int(n, "bits", 4);
    if (bits != 2 && bits != 4 && bits != 8) return rt_err(n, err, GRAFT_EUNSUPPORTED, "bits = %d (2, 4, 8 supported)", bits);
    if (K <= 0 || N <= 0 || block < 16 || (block & (block - 1)))
        return rt_err(n, err, GRAFT_EINVAL, "K, N, block_size invalid");
    if (!k_is_float(a->dtype) || a->rank < 1 || a->dims[a->rank - 1] != K)
        return rt_err(n, err, GRAFT_EINVAL, "A must be float with last dimension K = %lld", (long long)K);
    int64_t kb = (K + block - 1) / block, blob = block * bits / 8;
    if (b->dtype != GRAFT_DTYPE_UINT8 || (int64_t)b->numel != N * kb * blob)
        return rt_err(n, err, GRAFT_EINVAL, "B must be uint8 (N, k_blocks, blob) = (%lld, %lld, %lld)", (long long)N,
                      (long long)kb, (long long)blob);
    if ((int64_t)s->numel != N * kb) return rt_err(n, err, GRAFT_EINVAL, "scales must hold N * k_blocks values");
    nbits_job j = {0};
    j.bits = bits, j.K = K, j.N = N, j.kb = kb, j.blob = blob, j.block = block;
    j.B = b->data;
    if (!(j.scales = k_input_f32(n, 2, 0, err))) return err->code;
    if (z && z->numel) {
        if (z->dtype == GRAFT_DTYPE_UINT8) {
            j.zpw = (kb * bits + 7) / 8;
            if ((int64_t)z->numel != N * j.zpw) return rt_err(n, err, GRAFT_EINVAL, "packed zero_points must be (N, %lld)", (long long)j.zpw);
            j.zp8 = z->data;
        } else {
            if ((int64_t)z->numel != N * kb) return rt_err(n, err, GRAFT_EINVAL, "zero_points must be (N, k_blocks)");
            if (!(j.zpf = k_input_f32(n, 3, 1, err))) return err->code;
        }
    }
    if (bias) {
        if ((int64_t)bias->numel != N) return rt_err(n, err, GRAFT_EINVAL, "bias must hold N values");
        if (!(j.bias = k_input_f32(n, 5, 2, err))) return err->code;
    }
    int64_t od[RT_MAX_RANK];
    memcpy(od, a->dims, (size_t)a->rank * sizeof(int64_t));
    od[a->rank - 1] = N;
    rt_tensor *y = rt_out(n, 0, a->dtype, a->rank, od, err);
    K_OUT_OR_FAIL(y);
    int64_t M = (int64_t)(a->numel / (uint64_t)K);
    if (M == 0) return GRAFT_OK;
    if (!(j.A = k_input_f32(n, 0, 3, err))) return err->code;
    float *Y = a->dtype == GRAFT_DTYPE_FLOAT ? y->data : k_scratch_get(n, 4, (size_t)y->numel * 4, err);
    if (!Y) return err->code;
    j.Y = Y, j.M = M;
    if (M <= 4) {
        /* rows of B per task: all of them when the product is small (a
         * pool wake-up costs more than it saves), else about 8 tasks a thread */
        double work = (double)M * (double)N * (double)K;
        int64_t th = k_threads(), tasks = work < 131072 || th <= 1 ? 1 : 8 * th;
        j.rows = (N + tasks - 1) / tasks;
        if (j.rows < 16 && tasks > 1) j.rows = 16;
        k_parallel_for((N + j.rows - 1) / j.rows, nbits_gemv_task, &j);
        if (j.nomem) return rt_err(n, err, GRAFT_ENOMEM, "out of memory for a dequantized row");
    } else {
        nbits_state *st = n->state;
        int packed = k_bpack_ready(&st->pb) && st->pb_key == b->data;
        if (!packed && (double)N * (double)K * sizeof(float) <= (double)NBITS_PACK_MAX && k_input_is_const(n, 1) &&
            k_input_is_const(n, 2) && (!z || !z->numel || k_input_is_const(n, 3))) {
            /* all of B dequantized (N x K) into scratch 5, packed once, released */
            float *W = k_scratch_get(n, 5, (size_t)(N * K) * sizeof(float), err);
            if (!W) return err->code;
            j.W = W, j.n0 = 0, j.rows = N;
            k_parallel_for((N + 7) / 8, nbits_deq_task, &j);
            st->pb_key = NULL;
            if (k_bpack_init_t(&st->pb, W, K, N)) {
                st->pb_key = b->data;
                packed = 1;
            }
            k_buf_free(&st->s.b[5]);
        }
        if (packed) {
            if (k_sgemm_packed(M, j.A, K, &st->pb, Y, N))
                return rt_err(n, err, GRAFT_ENOMEM, "out of memory for GEMM scratch");
        } else {
            int64_t CH = 256;
            float *W = k_scratch_get(n, 5, (size_t)(CH * K) * sizeof(float), err);
            if (!W) return err->code;
            j.W = W;
            for (int64_t n0 = 0; n0 < N; n0 += CH) {
                j.n0 = n0;
                j.rows = N - n0 < CH ? N - n0 : CH;
                k_parallel_for((j.rows + 7) / 8, nbits_deq_task, &j);
                if (k_sgemm(0, 1, M, j.rows, K, 1.0f, j.A, K, W, K, 0.0f, Y + n0, N))
                    return rt_err(n, err, GRAFT_ENOMEM, "out of memory for GEMM scratch");
            }
        }
        if (j.bias)
            for (int64_t m = 0; m < M; m++)
                for (int64_t c = 0; c < N; c++) Y[m * N + c] += j.bias[c];
    }
    if (Y != y->data) k_from_f32(y->dtype, Y, y->data, (size_t)y->numel);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ GatherBlockQuantized */

static graft_status gbq_run(rt_node *n, graft_error *err)
{
    rt_tensor *d = rt_in(n, 0), *ix = rt_in(n, 1), *s = rt_in(n, 2), *z = rt_in(n, 3);
    if (!d || !ix || !s) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int bits = (int)rt_attr_int(n, "bits", 4);
    int64_t block = rt_attr_int(n, "block_size", 128);
    int dt = d->dtype;
    int packed_u8 = dt == GRAFT_DTYPE_UINT8 && bits == 4;
    if (!(dt == GRAFT_DTYPE_INT4 || dt == GRAFT_DTYPE_UINT4 || (dt == GRAFT_DTYPE_UINT8 && (bits == 4 || bits == 8))))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "data dtype %s with bits %d", graft_dtype_name(dt), bits);
    if (z && z->dtype != dt) return rt_err(n, err, GRAFT_EINVAL, "zero_points dtype differs from data's");
    /* logical data dims */
    int r = d->rank;
    int64_t D[RT_MAX_RANK];
    memcpy(D, d->dims, (size_t)r * sizeof(int64_t));
    if (packed_u8) D[r - 1] *= 2;
    int ga = k_axis(rt_attr_int(n, "gather_axis", 0), r), qa = k_axis(rt_attr_int(n, "quantize_axis", 1), r);
    if (ga < 0 || qa < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    if (block <= 0) return rt_err(n, err, GRAFT_EINVAL, "block_size must be positive");
    int64_t SD[RT_MAX_RANK];
    memcpy(SD, D, (size_t)r * sizeof(int64_t));
    SD[qa] = (D[qa] + block - 1) / block;
    if (s->rank != r || (uint64_t)s->numel != rt_numel(r, SD))
        return rt_err(n, err, GRAFT_EINVAL, "scales shape does not match data blocks");
    int64_t nidx = (int64_t)ix->numel;
    int64_t *idx = k_scratch_get(n, 1, (size_t)nidx * sizeof(int64_t) + 8, err);
    if (!idx) return err->code;
    if (rt_read_ints(ix, idx, (size_t)nidx) < 0) return rt_err(n, err, GRAFT_EINVAL, "indices must be int32/int64");
    for (int64_t i = 0; i < nidx; i++) {
        if (idx[i] < 0) idx[i] += D[ga];
        if (idx[i] < 0 || idx[i] >= D[ga]) return rt_err(n, err, GRAFT_EINVAL, "index out of range");
    }
    int ro = 0;
    int64_t od[RT_MAX_RANK];
    for (int i = 0; i < ga; i++) od[ro++] = D[i];
    for (int i = 0; i < ix->rank; i++) od[ro++] = ix->dims[i];
    for (int i = ga + 1; i < r; i++) od[ro++] = D[i];
    if (ro > RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output rank over %d", RT_MAX_RANK);
    rt_tensor *y = rt_out(n, 0, s->dtype, ro, od, err);
    K_OUT_OR_FAIL(y);
    if (y->numel == 0) return GRAFT_OK;
    const float *S = k_input_f32(n, 2, 0, err);
    if (!S) return err->code;
    float *Y = s->dtype == GRAFT_DTYPE_FLOAT ? y->data : k_scratch_get(n, 2, (size_t)y->numel * 4, err);
    if (!Y) return err->code;
    /* data strides (logical elements) */
    int64_t st[RT_MAX_RANK], sst[RT_MAX_RANK];
    st[r - 1] = 1, sst[r - 1] = 1;
    for (int i = r - 2; i >= 0; i--) st[i] = st[i + 1] * D[i + 1], sst[i] = sst[i + 1] * SD[i + 1];
    int qtype = packed_u8 ? GRAFT_DTYPE_UINT4 : dt;
    /* zero points: like scales, but packed uint8 rows hold an even count */
    int64_t zst[RT_MAX_RANK];
    zst[r - 1] = 1;
    if (z) {
        int64_t zl = packed_u8 ? z->dims[r - 1] * 2 : SD[r - 1];
        if (z->rank != r || (packed_u8 ? zl < SD[r - 1] : (uint64_t)z->numel != rt_numel(r, SD)))
            return rt_err(n, err, GRAFT_EINVAL, "zero_points shape does not match the scales");
        for (int i = r - 2; i >= 0; i--) zst[i] = zst[i + 1] * (i + 1 == r - 1 ? zl : SD[i + 1]);
    }
    float defz = dt == GRAFT_DTYPE_UINT8 ? (float)(1 << (bits - 1)) : 0.0f;
    int64_t outer = (int64_t)rt_numel(ga, D), inner = (int64_t)rt_numel(r - ga - 1, D + ga + 1);
    uint64_t o = 0;
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t k = 0; k < nidx; k++)
            for (int64_t in = 0; in < inner; in++) {
                int64_t li = (ou * D[ga] + idx[k]) * inner + in; /* logical data index */
                /* scale index: same multi-index with the quantize axis divided by block */
                int64_t rem = li, si = 0, zi = 0;
                for (int a = 0; a < r; a++) {
                    int64_t c = rem / st[a];
                    rem -= c * st[a];
                    si += (a == qa ? c / block : c) * sst[a];
                    zi += (a == qa ? c / block : c) * zst[a];
                }
                float q = qvalue(qtype, d->data, (uint64_t)li);
                float zp = z ? qvalue(qtype, z->data, (uint64_t)zi) : defz;
                Y[o++] = (q - zp) * S[si];
            }
    if (Y != y->data) k_from_f32(y->dtype, Y, y->data, (size_t)y->numel);
    return GRAFT_OK;
}

const rt_kernel rt_kernels_quant[] = {
    {"", "DequantizeLinear", 10, 0, k_scratch_init, dequantize_run, k_scratch_fini},
    {"", "QuantizeLinear", 10, 0, k_scratch_init, quantize_run, k_scratch_fini},
    {MS, "MatMulNBits", 1, 0, nbits_init, matmulnbits_run, nbits_fini},
    {MS, "GatherBlockQuantized", 1, 0, k_scratch_init, gbq_run, k_scratch_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
