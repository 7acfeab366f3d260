/* com.microsoft MatMulNBits, bits = 4: Y = A . dequant(B)^T (+ bias).
 *
 * B is [N, k_blocks, block/2] bytes: row n of the weight matrix is a
 * contiguous run of row_bytes = k_blocks * block / 2 bytes, codes low nibble
 * first along K; weight (n, k) = (code - z) * s with s, z of block k / block.
 *
 * M == 1 (decode): bandwidth-bound GEMV. The block stages x in shared memory
 * as fp32, padded by 16 bytes after every chunk so that lanes reading
 * neighbouring chunks hit different banks (zeros past K up to k_blocks *
 * block, so the padding codes of a partial last block add nothing). LPR
 * lanes (8, 16 or 32, from the row length) share a row; each takes chunks
 * of CW 32-bit words (16 bytes: 32 codes, or 8 bytes when rows are not
 * 16-byte aligned), four loads in flight before the first use. A code
 * becomes a float without a conversion instruction: its byte is permuted
 * into the mantissa of 2^23 (0x4B000000 | q is 2^23 + q exactly), and one
 * subtraction of 2^23 + z gives q - z exactly (z an integer 0..15). Typed
 * zero points (dtype) may be fractional: their integer part goes into that
 * subtraction and the rest is taken off through the sum of x over the
 * 16-weight group (kept in shared memory). Per group the dot is scaled
 * once; the LPR partial sums meet through warp shuffles.
 *
 * M > 1: a tiled kernel, 64x64 outputs a block, K in steps of 32; A and the
 * dequantized B tile go through shared memory in fp32, 4x4 outputs a thread. */
#include "kernels/cuda/gcuda_common.cuh"

enum { NB_ZP_NONE = 0, NB_ZP_PACKED = 1, NB_ZP_TYPED = 2 };

struct nb_params {
    const void *a;
    const uint8_t *b;
    const void *scales, *zp, *bias;
    void *y;
    int M, N, K, kb, block, row_bytes, zpw, Kp; /* Kp = kb * block */
};

/* zero point of block blk of row n */
template <typename T, int ZP> __device__ __forceinline__ float nb_zero(const nb_params &p, int n, int blk)
{
    if constexpr (ZP == NB_ZP_PACKED) {
        unsigned v = __ldg((const uint8_t *)p.zp + (size_t)n * p.zpw + (blk >> 1));
        return (float)((v >> (4 * (blk & 1))) & 15u);
    } else if constexpr (ZP == NB_ZP_TYPED) {
        return gc_f(((const T *)p.zp)[(size_t)n * p.kb + blk]);
    } else {
        return 8.0f;
    }
}

/* ------------------------------------------------------------ GEMV (M == 1) */

#define NB_THREADS 256
#define NB_UNROLL 4

/* padded shared-memory index of x[k] for chunks of CW words (8 CW codes) */
template <int CW> __device__ __forceinline__ int nb_pad(int k) { return k + (k / (8 * CW)) * 4; }
static inline int64_t nb_pad_host(int64_t k, int cw) { return k + (k / (8 * cw)) * 4; }

/* d += x . (q - mz) over the 8 codes of word w, x at xp[0..7] */
__device__ __forceinline__ float nb_word(unsigned w, const float *xp, float mz, float d)
{
    unsigned lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
    float4 xa = *reinterpret_cast<const float4 *>(xp), xb = *reinterpret_cast<const float4 *>(xp + 4);
    d = fmaf(xa.x, __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7650)) - mz, d);
    d = fmaf(xa.y, __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7650)) - mz, d);
    d = fmaf(xa.z, __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7651)) - mz, d);
    d = fmaf(xa.w, __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7651)) - mz, d);
    d = fmaf(xb.x, __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7652)) - mz, d);
    d = fmaf(xb.y, __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7652)) - mz, d);
    d = fmaf(xb.z, __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7653)) - mz, d);
    d = fmaf(xb.w, __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7653)) - mz, d);
    return d;
}

template <int CW> struct nb_chunk {
    unsigned w[CW];
};

template <int CW> __device__ __forceinline__ nb_chunk<CW> nb_load(const uint8_t *p)
{
    nb_chunk<CW> c;
    if constexpr (CW == 4) {
        uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
        c.w[0] = v.x, c.w[1] = v.y, c.w[2] = v.z, c.w[3] = v.w;
    } else {
        uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
        c.w[0] = v.x, c.w[1] = v.y;
    }
    return c;
}

template <typename T, int CW, int LPR, int ZP>
__global__ void __launch_bounds__(NB_THREADS) nbits_gemv_kernel(nb_params p)
{
    constexpr int CODES = 8 * CW, RPW = 32 / LPR, WARPS = NB_THREADS / 32;
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);
    float *xsum = xs + nb_pad<CW>(p.Kp); /* per 16 codes, typed zero points only */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, rs = lane / LPR, sl = lane % LPR;
    const T *x = (const T *)p.a;
    for (int k = tid; k < p.Kp; k += NB_THREADS) xs[nb_pad<CW>(k)] = k < p.K ? gc_f(x[k]) : 0.0f;
    if constexpr (ZP == NB_ZP_TYPED) {
        for (int g = tid; g < p.Kp / 16; g += NB_THREADS) {
            float s = 0.0f;
            for (int i = 0; i < 16; i++) s += 16 * g + i < p.K ? gc_f(x[16 * g + i]) : 0.0f;
            xsum[g] = s;
        }
    }
    __syncthreads();

    const int cpr = p.row_bytes / (4 * CW);
    const bool sub16 = CW == 4 && p.block == 16; /* two blocks per chunk */
    const T *sc = (const T *)p.scales;
    for (int nb = (blockIdx.x * WARPS + warp) * RPW; nb < p.N; nb += gridDim.x * WARPS * RPW) {
        const int n = nb + rs;
        const bool valid = n < p.N;
        const uint8_t *row = p.b + (size_t)(valid ? n : 0) * p.row_bytes;
        float acc = 0.0f;
        for (int c0 = sl; c0 < cpr; c0 += LPR * NB_UNROLL) {
            nb_chunk<CW> ch[NB_UNROLL];
#pragma unroll
            for (int u = 0; u < NB_UNROLL; u++) {
                int c = c0 + u * LPR;
                if (valid && c < cpr) ch[u] = nb_load<CW>(row + (size_t)c * 4 * CW);
            }
#pragma unroll
            for (int u = 0; u < NB_UNROLL; u++) {
                int c = c0 + u * LPR;
                if (!valid || c >= cpr) continue;
                const int k0 = c * CODES, blk0 = k0 / p.block;
                const float *xp = xs + nb_pad<CW>(k0);
                float s0 = gc_f(sc[(size_t)n * p.kb + blk0]), z0 = nb_zero<T, ZP>(p, n, blk0);
                float zi0 = rintf(z0), mz0 = 8388608.0f + zi0;
                if (!sub16) {
                    float d = 0.0f;
#pragma unroll
                    for (int wi = 0; wi < CW; wi++) d = nb_word(ch[u].w[wi], xp + 8 * wi, mz0, d);
                    if constexpr (ZP == NB_ZP_TYPED) {
                        float xsm = 0.0f;
#pragma unroll
                        for (int g = 0; g < CODES / 16; g++) xsm += xsum[k0 / 16 + g];
                        d = fmaf(-(z0 - zi0), xsm, d);
                    }
                    acc = fmaf(s0, d, acc);
                } else {
                    float s1 = gc_f(sc[(size_t)n * p.kb + blk0 + 1]), z1 = nb_zero<T, ZP>(p, n, blk0 + 1);
                    float zi1 = rintf(z1), mz1 = 8388608.0f + zi1;
                    float d0 = nb_word(ch[u].w[0], xp, mz0, 0.0f);
                    d0 = nb_word(ch[u].w[1], xp + 8, mz0, d0);
                    float d1 = nb_word(ch[u].w[2 % CW], xp + 16, mz1, 0.0f);
                    d1 = nb_word(ch[u].w[3 % CW], xp + 24, mz1, d1);
                    if constexpr (ZP == NB_ZP_TYPED) {
                        d0 = fmaf(-(z0 - zi0), xsum[k0 / 16], d0);
                        d1 = fmaf(-(z1 - zi1), xsum[k0 / 16 + 1], d1);
                    }
                    acc = fmaf(s0, d0, fmaf(s1, d1, acc));
                }
            }
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (valid && sl == 0) {
            if (p.bias) acc += gc_f(((const T *)p.bias)[n]);
            ((T *)p.y)[n] = gc_to<T>(acc);
        }
    }
}

/* ------------------------------------------------------------ tiled (M > 1) */

#define NT_THREADS 256
#define NT_BM 64
#define NT_BN 64
#define NT_BK 32

template <typename T, int ZP> __global__ void __launch_bounds__(NT_THREADS) nbits_tiled_kernel(nb_params p)
{
    __shared__ __align__(16) float As[NT_BK][NT_BM + 4];
    __shared__ __align__(16) float Bs[NT_BK][NT_BN + 4];
    const int tid = threadIdx.x, tm = tid / 16, tn = tid % 16;
    const int m0 = blockIdx.y * NT_BM, n0 = blockIdx.x * NT_BN;
    const T *A = (const T *)p.a, *sc = (const T *)p.scales;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < p.K; k0 += NT_BK) {
        /* A tile: 64 x 32, transposed into As[k][m] */
#pragma unroll
        for (int it = 0; it < NT_BM * NT_BK / NT_THREADS; it++) {
            int i = it * NT_THREADS + tid, mm = i / NT_BK, kk = i % NT_BK;
            int m = m0 + mm, k = k0 + kk;
            As[kk][mm] = m < p.M && k < p.K ? gc_f(A[(size_t)m * p.K + k]) : 0.0f;
        }
        /* B tile: 64 rows x 32 codes; thread: row tid / 4, 8 codes from (tid % 4) * 8 */
        {
            int nn = tid / 4, kq = (tid % 4) * 8, n = n0 + nn, k = k0 + kq;
            float w[8];
            if (n < p.N && k < p.Kp) {
                int blk = k / p.block; /* 8 codes never straddle a block (block >= 16) */
                float s = gc_f(sc[(size_t)n * p.kb + blk]), z = nb_zero<T, ZP>(p, n, blk);
                const uint8_t *src = p.b + (size_t)n * p.row_bytes + k / 2;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    unsigned v = src[i];
                    w[2 * i] = ((float)(v & 15u) - z) * s;
                    w[2 * i + 1] = ((float)(v >> 4) - z) * s;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) w[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) Bs[kq + i][nn] = w[i];
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < NT_BK; kk++) {
            float4 a4 = *reinterpret_cast<const float4 *>(&As[kk][tm * 4]);
            float4 b4 = *reinterpret_cast<const float4 *>(&Bs[kk][tn * 4]);
            float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + tm * 4 + i;
        if (m >= p.M) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tn * 4 + j;
            if (n >= p.N) continue;
            float v = acc[i][j];
            if (p.bias) v += gc_f(((const T *)p.bias)[n]);
            ((T *)p.y)[(size_t)m * p.N + n] = gc_to<T>(v);
        }
    }
}

/* ------------------------------------------------------------ launch */

template <typename T, int CW, int LPR, int ZP>
static graft_status nb_gemv_go(const nb_params *p, gcuda_stream s, graft_error *err)
{
    size_t smem = ((size_t)nb_pad_host(p->Kp, CW) + (ZP == NB_ZP_TYPED ? (size_t)p->Kp / 16 : 0)) * sizeof(float);
    void (*kern)(nb_params) = nbits_gemv_kernel<T, CW, LPR, ZP>;
    GCUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int occ = 0, sms = 0;
    GCUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, NB_THREADS, smem));
    graft_status st = gcuda_sm_count(&sms, err);
    if (st) return st;
    if (occ < 1) occ = 1;
    int64_t rows_per_block = (NB_THREADS / 32) * (32 / LPR);
    int64_t blocks = (p->N + rows_per_block - 1) / rows_per_block;
    if (blocks > (int64_t)sms * occ) blocks = (int64_t)sms * occ;
    kern<<<(unsigned)blocks, NB_THREADS, smem, s>>>(*p);
    GCUDA_CHECK_LAUNCH("nbits_gemv_kernel");
    return GRAFT_OK;
}

template <typename T, int CW, int ZP>
static graft_status nb_gemv_lpr(int lpr, const nb_params *p, gcuda_stream s, graft_error *err)
{
    switch (lpr) {
    case 8: return nb_gemv_go<T, CW, 8, ZP>(p, s, err);
    case 16: return nb_gemv_go<T, CW, 16, ZP>(p, s, err);
    default: return nb_gemv_go<T, CW, 32, ZP>(p, s, err);
    }
}

template <typename T, int ZP>
static graft_status nb_run(int gemv, int cw, int lpr, const nb_params *p, gcuda_stream s, graft_error *err)
{
    if (gemv) return cw == 4 ? nb_gemv_lpr<T, 4, ZP>(lpr, p, s, err) : nb_gemv_lpr<T, 2, ZP>(lpr, p, s, err);
    dim3 grid((unsigned)((p->N + NT_BN - 1) / NT_BN), (unsigned)((p->M + NT_BM - 1) / NT_BM));
    nbits_tiled_kernel<T, ZP><<<grid, NT_THREADS, 0, s>>>(*p);
    GCUDA_CHECK_LAUNCH("nbits_tiled_kernel");
    return GRAFT_OK;
}

#define NB_GEMV_SMEM_MAX (200u << 10)

extern "C" graft_status gcuda_matmul_nbits(const gcuda_matmul_nbits_args *a, gcuda_stream s, graft_error *err)
{
    if (!gcuda_dtype_size(a->dtype))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_matmul_nbits: dtype %d not supported", a->dtype);
    if (a->M < 0 || a->N < 1 || a->K < 1 || a->M > 0x7fffffff || a->N > 0x7fffffff || a->K > 0x7fffffff / 2 ||
        a->block_size < 16 || a->block_size > 256 || (a->block_size & (a->block_size - 1)))
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_matmul_nbits: M %lld, N %lld, K %lld, block_size %lld",
                          (long long)a->M, (long long)a->N, (long long)a->K, (long long)a->block_size);
    if (a->M > 65535LL * NT_BM)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_matmul_nbits: M %lld too large", (long long)a->M);
    int zp = NB_ZP_NONE;
    if (a->zero_points) {
        if (a->zp_dtype == GRAFT_DTYPE_UINT8)
            zp = NB_ZP_PACKED;
        else if (a->zp_dtype == a->dtype)
            zp = NB_ZP_TYPED;
        else
            return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_matmul_nbits: zero points of dtype %d (uint8 or %d)",
                              a->zp_dtype, a->dtype);
    }
    if (a->M == 0) return GRAFT_OK;
    nb_params p = {};
    p.a = a->a;
    p.b = a->b;
    p.scales = a->scales;
    p.zp = a->zero_points;
    p.bias = a->bias;
    p.y = a->y;
    p.M = (int)a->M;
    p.N = (int)a->N;
    p.K = (int)a->K;
    p.block = (int)a->block_size;
    p.kb = (int)((a->K + a->block_size - 1) / a->block_size);
    p.row_bytes = p.kb * p.block / 2;
    p.zpw = (p.kb + 1) / 2;
    p.Kp = p.kb * p.block;
    int cw = p.row_bytes % 16 == 0 && (uintptr_t)a->b % 16 == 0 ? 4 : 2;
    if (cw == 2 && (uintptr_t)a->b % 8) cw = 0; /* rows are always 8-byte multiples */
    size_t smem = ((size_t)nb_pad_host(p.Kp, cw ? cw : 2) + (zp == NB_ZP_TYPED ? (size_t)p.Kp / 16 : 0)) * 4;
    int gemv = p.M == 1 && cw && smem <= NB_GEMV_SMEM_MAX;
    int cpr = cw ? p.row_bytes / (4 * cw) : 0, lpr = cpr >= 128 ? 32 : cpr >= 48 ? 16 : 8;
    graft_status st = GRAFT_OK;
    GCUDA_DISPATCH(a->dtype, "gcuda_matmul_nbits", {
        switch (zp) {
        case NB_ZP_PACKED: st = nb_run<T, NB_ZP_PACKED>(gemv, cw, lpr, &p, s, err); break;
        case NB_ZP_TYPED: st = nb_run<T, NB_ZP_TYPED>(gemv, cw, lpr, &p, s, err); break;
        default: st = nb_run<T, NB_ZP_NONE>(gemv, cw, lpr, &p, s, err); break;
        }
    });
    return st;
}
