/* Would the o projection's GEMV merging the decode attention's splits in
 * its own prologue beat the separate merge kernel? (Issue 7: the merge,
 * attn_combine_kernel, adds about 3.4 us a layer on the H100; three ways of
 * folding it into the attention lost, sessions 34-35. This prices the
 * other side before anyone writes it into graft.)
 *
 * A layer here is: a kernel standing for the attention (it writes the
 * splits' partials, [heads, splits, head_dim] fp32, and their max and sum),
 * then either
 *   A: a merge kernel of graft's form (a block a head and 64 columns, a warp
 *      8 columns, its lanes over the splits, merged across the warp by
 *      shuffles; x stored fp16), then the o GEMV reading x;
 *   B: the o GEMV alone, each block merging every column of x into shared
 *      memory after its wait (a warp a head weighs the splits; then a
 *      thread its columns, a weighted sum over the splits with every load
 *      in flight at once; x rounded to fp16 as A stores it), then its rows;
 * all kernels programmatic dependents (griddepcontrol), the GEMV a warp a
 * row with 4 16-byte loads a lane issued before its wait (as graft's), 35
 * layers captured in one graph, every layer its own weights (o 1536 x
 * heads * head_dim fp16) and partials. Both forms' outputs are checked
 * against an fp64 reference (the merge, x rounded to fp16, the GEMV).
 * Prints us a layer for A and B at 1-64 splits with keys, head_dim 256 and
 * 512, 8 query heads (E2B's).
 *
 *   make build/bench/merge_probe   (here; built by `make` too where nvcc is)
 *   build/bench/merge_probe        (on the GPU machine)
 */
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/gcuda_common.cuh" /* gc_pdl_wait, gc_pdl_trigger, gc_launch, gc_attn_merge8 */
#include "bench/cuda_probe.cuh"          /* CK, ms_of, probe_rng, probe_weights, ldw, dot8 */

#define THREADS 256
#define RPB (THREADS / 32)
#define U 4
#define HQ 8
#define N_OUT 1536
#define LAYERS 35

struct layer {
    const float *src_o, *src_ml; /* what the stand-in attention copies (the partials it "computes") */
    float *opart, *ml;           /* [HQ, S, hd], [HQ, S, 2] */
    __half *x;                   /* A: the merged row [HQ * hd] */
    const __half *w;             /* [N_OUT, HQ * hd] */
    __half *y;                   /* [N_OUT] */
};

/* The attention's stand-in: its partials written (copied from src), so the next kernel depends on them. */
__global__ void __launch_bounds__(THREADS) attn_standin_kernel(layer L, int n_o, int n_ml)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n_o; i += gridDim.x * THREADS) L.opart[i] = L.src_o[i];
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n_ml; i += gridDim.x * THREADS) L.ml[i] = L.src_ml[i];
}

/* A's merge: attn_combine_kernel's launch (kernels/cuda/attention.cu, where it is internal to the decode
 * attention's) around the same gc_attn_merge8, so that the probe times graft's form on its own; grid: heads,
 * hd / 64. */
__global__ void __launch_bounds__(THREADS) merge_kernel(layer L, int S, int hd)
{
    const int qh = blockIdx.x, lane = threadIdx.x & 31, col = blockIdx.y * 64 + 8 * (int)(threadIdx.x >> 5);
    gc_pdl_wait();
    gc_pdl_trigger();
    if (col >= hd) return;
    const float r = gc_attn_merge8<__half>(L.ml, L.opart, (size_t)qh * S, S, hd, col, lane);
    if (lane < 8) L.x[qh * hd + col + lane] = __float2half_rn(r);
}

/* The o GEMV; MERGE: x merged by the block into shared memory (B), else read from L.x (A). B's merge: a
 * warp a head takes the splits' max and each split's weight exp(m_s - max) and the denominator (lanes over
 * the splits, shuffles); then each thread its HD * HQ / THREADS columns, the splits in order, every load
 * independent of the others (a weighted sum, no online rescaling). */
#define MAXS 64
template <bool MERGE, int HD> __global__ void __launch_bounds__(THREADS) o_kernel(layer L, int S)
{
    constexpr int K = HQ * HD, C = K / 8, J = K / THREADS;
    __shared__ __align__(16) __half xs[MERGE ? K : 8];
    __shared__ float ws[MERGE ? HQ : 1][MERGE ? MAXS : 1], inv[HQ];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = blockIdx.x * RPB + warp;
    uint4 wv[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int c = lane + 32 * u;
        wv[u] = c < C ? ldw(L.w + (size_t)r * K + 8 * c) : make_uint4(0, 0, 0, 0);
    }
    gc_pdl_wait();
    gc_pdl_trigger();
    const __half *x = L.x;
    if constexpr (MERGE) {
        static_assert(RPB == HQ, "a warp a head");
        float2 ml[2];
        float M = -INFINITY;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int sp = lane + 32 * i;
            ml[i] = sp < S ? *reinterpret_cast<const float2 *>(L.ml + ((size_t)warp * S + sp) * 2) : make_float2(-INFINITY, 0.0f);
            if (ml[i].y > 0.0f) M = fmaxf(M, ml[i].x);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
        float den = 0.0f;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int sp = lane + 32 * i;
            const float w = ml[i].y > 0.0f ? __expf(ml[i].x - M) : 0.0f;
            if (sp < S) ws[warp][sp] = w;
            den += w * ml[i].y;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) den += __shfl_xor_sync(0xffffffffu, den, off);
        if (lane == 0) inv[warp] = den > 0.0f ? 1.0f / den : 0.0f;
        __syncthreads();
        float a[J];
#pragma unroll
        for (int j = 0; j < J; j++) a[j] = 0.0f;
#pragma unroll 4
        for (int sp = 0; sp < S; sp++)
#pragma unroll
            for (int j = 0; j < J; j++) {
                const int k = (int)threadIdx.x + THREADS * j, h = k / HD;
                a[j] = fmaf(ws[h][sp], L.opart[((size_t)h * S + sp) * HD + (k - h * HD)], a[j]);
            }
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int k = (int)threadIdx.x + THREADS * j;
            xs[k] = __float2half_rn(a[j] * inv[k / HD]);
        }
        __syncthreads();
        x = xs;
    }
    float acc = 0.0f;
    for (int c0 = 0;;) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + lane + 32 * u;
            if (c < C) acc = dot8(wv[u], *reinterpret_cast<const uint4 *>(x + 8 * c), acc);
        }
        c0 += 32 * U;
        if (c0 >= C) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + lane + 32 * u;
            if (c < C) wv[u] = ldw(L.w + (size_t)r * K + 8 * c);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) L.y[r] = __float2half_rn(acc);
}

template <bool MERGE> static void launch_o(int hd, cudaStream_t st, const layer &L, int S)
{
    if (hd == 256) gc_launch(true, o_kernel<MERGE, 256>, dim3(N_OUT / RPB), dim3(THREADS), 0, st, L, S);
    else gc_launch(true, o_kernel<MERGE, 512>, dim3(N_OUT / RPB), dim3(THREADS), 0, st, L, S);
}

int main()
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("%s, %d SMs: %d layers of (attention stand-in, [merge], o GEMV %d x %d * head_dim), us a layer\n\n",
           p.name, p.multiProcessorCount, LAYERS, N_OUT, HQ);
    printf("| head_dim | splits with keys | A: merge kernel + o | B: o merging in its prologue | B - A | "
           "max error A, B (of max abs y) |\n|---:|---:|---:|---:|---:|---:|\n");
    probe_rng rnd{0x2545f4914f6cdd1dull};
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    bool ok = true;
    for (int hd : {256, 512}) {
        const int K = HQ * hd;
        std::vector<std::vector<__half>> hw(LAYERS); /* the layers' o weights, for every S */
        std::vector<const __half *> dw(LAYERS);
        for (int l = 0; l < LAYERS; l++) dw[l] = probe_weights(rnd, N_OUT, K, hw[l]);
        for (int S : {1, 2, 4, 6, 8, 16, 64}) {
            const int n_o = HQ * S * hd, n_ml = HQ * S * 2;
            std::vector<layer> Ls(LAYERS);
            std::vector<std::vector<float>> ho(LAYERS), hml(LAYERS);
            std::vector<void *> allocs;
            auto dalloc = [&](size_t b) {
                void *d;
                CK(cudaMalloc(&d, b));
                allocs.push_back(d);
                return d;
            };
            for (int l = 0; l < LAYERS; l++) {
                ho[l].resize(n_o);
                hml[l].resize(n_ml);
                for (auto &v : ho[l]) v = rnd() * 4.0f;
                for (int i = 0; i < HQ * S; i++) {
                    hml[l][2 * i] = rnd() * 3.0f;                /* the split's max score */
                    hml[l][2 * i + 1] = 1.0f + 4.5f * (rnd() + 1.0f); /* its sum, > 0: every split has keys */
                }
                layer &L = Ls[l];
                L.src_o = (const float *)dalloc(n_o * sizeof(float));
                L.src_ml = (const float *)dalloc(n_ml * sizeof(float));
                L.opart = (float *)dalloc(n_o * sizeof(float));
                L.ml = (float *)dalloc(n_ml * sizeof(float));
                L.x = (__half *)dalloc(K * sizeof(__half));
                L.w = dw[l];
                L.y = (__half *)dalloc(N_OUT * sizeof(__half));
                CK(cudaMemcpy((void *)L.src_o, ho[l].data(), n_o * sizeof(float), cudaMemcpyHostToDevice));
                CK(cudaMemcpy((void *)L.src_ml, hml[l].data(), n_ml * sizeof(float), cudaMemcpyHostToDevice));
            }
            cudaGraphExec_t gx[2];
            for (int f = 0; f < 2; f++) {
                cudaGraph_t g;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
                for (int l = 0; l < LAYERS; l++) {
                    gc_launch(true, attn_standin_kernel, dim3(HQ), dim3(THREADS), 0, st, Ls[l], n_o, n_ml);
                    if (f == 0) {
                        gc_launch(true, merge_kernel, dim3(HQ, (unsigned)(hd / 64)), dim3(THREADS), 0, st, Ls[l], S, hd);
                        launch_o<false>(hd, st, Ls[l], S);
                    } else {
                        launch_o<true>(hd, st, Ls[l], S);
                    }
                    CK(cudaGetLastError());
                }
                CK(cudaStreamEndCapture(st, &g));
                CK(cudaGraphInstantiate(&gx[f], g, 0));
                CK(cudaGraphDestroy(g));
            }
            /* checks: every layer's y against fp64 */
            double err[2] = {0, 0};
            for (int f = 0; f < 2; f++) {
                for (const layer &L : Ls) CK(cudaMemsetAsync(L.y, 0xff, N_OUT * sizeof(__half), st)); /* NaN */
                CK(cudaGraphLaunch(gx[f], st));
                CK(cudaStreamSynchronize(st));
                double e = 0, m = 0;
                std::vector<__half> y(N_OUT);
                std::vector<float> x(K);
                for (int l = 0; l < LAYERS; l++) {
                    CK(cudaMemcpy(y.data(), Ls[l].y, N_OUT * sizeof(__half), cudaMemcpyDeviceToHost));
                    for (int k = 0; k < K; k++) {
                        const int qh = k / hd, col = k % hd;
                        double M = -INFINITY;
                        for (int s = 0; s < S; s++) M = std::max(M, (double)hml[l][2 * (qh * S + s)]);
                        double num = 0, den = 0;
                        for (int s = 0; s < S; s++) {
                            const double w = exp(hml[l][2 * (qh * S + s)] - M);
                            num += w * ho[l][(size_t)(qh * S + s) * hd + col];
                            den += w * hml[l][2 * (qh * S + s) + 1];
                        }
                        x[k] = __half2float(__float2half_rn((float)(num / den)));
                    }
                    for (int r = 0; r < N_OUT; r++) {
                        double a = 0;
                        for (int k = 0; k < K; k++) a += (double)__half2float(hw[l][(size_t)r * K + k]) * x[k];
                        const double d = __half2float(y[r]);
                        e = std::isnan(d) ? INFINITY : std::max(e, fabs(d - a));
                        m = std::max(m, fabs(a));
                    }
                }
                err[f] = e / m;
            }
            std::vector<float> t[2];
            for (int i = 0; i < 15; i++)
                for (int f = 0; f < 2; f++) {
                    CK(cudaEventRecord(e0, st));
                    CK(cudaGraphLaunch(gx[f], st));
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    t[f].push_back(ms_of(e0, e1));
                }
            double us[2];
            for (int f = 0; f < 2; f++) {
                std::sort(t[f].begin(), t[f].end());
                us[f] = t[f][t[f].size() / 2] * 1e3 / LAYERS;
            }
            printf("| %d | %d | %.2f | %.2f | %+.2f | %.1e, %.1e |\n", hd, S, us[0], us[1], us[1] - us[0], err[0],
                   err[1]);
            ok = ok && err[0] < 1e-2 && err[1] < 1e-2;
            for (int f = 0; f < 2; f++) CK(cudaGraphExecDestroy(gx[f]));
            for (void *d : allocs) CK(cudaFree(d));
        }
        for (const __half *d : dw) CK(cudaFree((void *)d));
    }
    printf("%s\n", ok ? "merge_probe: ok" : "merge_probe: FAIL (an output off the fp64 reference)");
    return ok ? 0 : 1;
}
