/* How fast does the copy engine stream global memory into shared memory on
 * this GPU? (session 19: gemv_stream_kernel, since removed, cp.async.bulk into mbarrier
 * stages, ran at half the register GEMV's rate; this isolates the copies.)
 *
 * One thread a block issues 1-D cp.async.bulk copies of `size` bytes from
 * the block's contiguous share of a 2 GiB buffer into `inflight` shared-
 * memory slots, each completing on its own mbarrier, refilling a slot as
 * soon as its copy has landed; nothing is computed. Against it, the same
 * bytes read by every thread with 16-byte loads (4 in flight a thread).
 * Prints GB/s (bytes read / time, best of 5 after a warm-up), per blocks an
 * SM, copy size and copies in flight a block.
 *
 *   make build/bench/bulk_probe   (here; built by `make` too where nvcc is)
 *   build/bench/bulk_probe        (on the GPU machine)
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/gcuda_common.cuh" /* the mbarrier and bulk-copy helpers */
#include "bench/cuda_probe.cuh" /* CK */

#define MAX_SLOTS 64

__global__ void bulk_kernel(const unsigned char *src, size_t per_block, int size, int inflight, unsigned *sink)
{
    extern __shared__ __align__(128) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[MAX_SLOTS];
    if (threadIdx.x != 0) return;
    gc_mbar_init(bar, inflight);
    const unsigned char *base = src + blockIdx.x * per_block;
    const long n = (long)(per_block / size);
    auto issue = [&](long i) {
        const int s = (int)(i % inflight);
        const uint32_t b = gc_smem_addr(bar + s);
        gc_mbar_expect(b, (uint32_t)size);
        gc_bulk_copy(gc_smem_addr(sm + (size_t)s * size), base + i * size, (uint32_t)size, b);
    };
    for (long i = 0; i < inflight && i < n; i++) issue(i);
    for (long i = 0; i < n; i++) {
        gc_mbar_wait(gc_smem_addr(bar + i % inflight), (uint32_t)((i / inflight) & 1));
        if (i + inflight < n) issue(i + inflight);
    }
    sink[blockIdx.x] = sm[0];
}

__global__ void ldg_kernel(const uint4 *src, size_t n16, unsigned *sink)
{
    unsigned acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (i + u * stride < n16)
                asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(src + i + u * stride));
            else
                v[u] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678u) sink[0] = acc; /* keeps the loads */
}

template <typename F> static float best_ms(F launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    launch();
    CK(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (ms < best) best = ms;
    }
    CK(cudaGetLastError());
    return best;
}

int main()
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const int sms = p.multiProcessorCount;
    const size_t total = (size_t)2 << 30;
    unsigned char *buf;
    unsigned *sink;
    CK(cudaMalloc(&buf, total));
    CK(cudaMalloc(&sink, 4096 * sizeof(unsigned)));
    CK(cudaMemset(buf, 1, total));
    CK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    printf("%s, %d SMs: GB/s reading %zu MiB once\n", p.name, sms, total >> 20);
    float ms = best_ms([&] { ldg_kernel<<<sms * 8, 256>>>((const uint4 *)buf, total / 16, sink); });
    printf("16-byte loads, %d blocks of 256, 4 in flight a thread: %.0f GB/s\n\n", sms * 8, total / (ms * 1e6));
    printf("| blocks an SM | copy bytes | in flight a block | bytes in flight an SM | GB/s |\n|---:|---:|---:|---:|---:|\n");
    const int sizes[] = {1024, 3072, 4096, 8192, 16384, 32768};
    const int flights[] = {2, 4, 8, 16, 32, 64};
    for (int bps : {1, 4})
        for (int size : sizes)
            for (int inflight : flights) {
                const size_t smem = (size_t)size * inflight;
                if (smem * bps > 200 * 1024 || smem > 200 * 1024) continue;
                const int grid = sms * bps;
                const size_t per_block = total / grid / size * size;
                ms = best_ms([&] { bulk_kernel<<<grid, 32, smem>>>(buf, per_block, size, inflight, sink); });
                printf("| %d | %d | %d | %zu KB | %.0f |\n", bps, size, inflight, smem * bps / 1024,
                       (double)per_block * grid / (ms * 1e6));
            }
    return 0;
}
