/* What the device probes of bench/ (cuda_*_probe.cu) share: CK, a CUDA
 * runtime call checked, the program ended with the call's text on failure
 * (a probe has nothing to unwind); ms_of, the milliseconds between two
 * events; probe_rng, xorshift64* values in [-1, 1) from a seed;
 * probe_weights, a random fp16 matrix on the host and the device; ldw, 16
 * bytes of weights read past L1; dot8, 8 fp16 weights against 8 fp16 x
 * added to an fp32 sum in order. */
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cstdint>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static inline float ms_of(cudaEvent_t a, cudaEvent_t b)
{
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

struct probe_rng {
    uint64_t s;
    float operator()()
    {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        return (float)((s * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
    }
};

/* An n x k fp16 matrix uniform in +-sqrt(3 / k) (a GEMV's outputs keep x's scale), drawn from rnd into hw
 * (kept for the fp64 reference) and uploaded: its device copy. */
static inline __half *probe_weights(probe_rng &rnd, int n, int k, std::vector<__half> &hw)
{
    hw.resize((size_t)n * k);
    const float sc = sqrtf(3.0f / (float)k);
    for (auto &v : hw) v = __float2half_rn(rnd() * sc);
    __half *d;
    CK(cudaMalloc(&d, hw.size() * sizeof(__half)));
    CK(cudaMemcpy(d, hw.data(), hw.size() * sizeof(__half), cudaMemcpyHostToDevice));
    return d;
}

__device__ __forceinline__ uint4 ldw(const __half *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float a)
{
    const __half2 *wh = reinterpret_cast<const __half2 *>(&w), *xh = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 wf = __half22float2(wh[i]), xf = __half22float2(xh[i]);
        a = fmaf(wf.x, xf.x, a);
        a = fmaf(wf.y, xf.y, a);
    }
    return a;
}
