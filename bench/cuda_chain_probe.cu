/* What does a kernel boundary cost a decode step, against a barrier inside
 * one persistent kernel? (Issue 7: on the H200 a step of E2B spends about as
 * long again as its bytes take, most of it in some 300 launches' latencies;
 * sessions 19-35 shortened the launches themselves. This measures the
 * alternative before anyone writes it: the same GEMVs, one launch each
 * against one launch for them all.)
 *
 * A "layer" is six dependent fp16 GEMVs of E2B's shapes, y = W x with x the
 * first K elements of the GEMV before's output: q/k/v 2560 x 1536, o 1536 x
 * 2048, the gate/up pair as one 12288 x 1536, down 1536 x 6144, the per-layer
 * input's gate 256 x 1536 and projection 1536 x 256; L layers (default 35),
 * every matrix its own weights (2.5 GB at 35: nothing stays in L2).
 *
 * Both forms run the same row code: a warp a row, each lane 16-byte loads
 * of the weights (ld.global.nc, 4 in flight) against x, fp32 sums reduced
 * by shuffles in a fixed order, so their outputs are bitwise equal, and
 * each is checked against a host reference in fp64 (with y rounded to fp16
 * after each GEMV as on the device).
 *   launches: one kernel a GEMV, 8 rows a block, each a programmatic
 *     dependent (griddepcontrol: its first 4, 8 or 16 loads a lane issued
 *     before the wait), or plain launches, all captured in one CUDA graph
 *     (graft's replayed step);
 *   persistent: one cooperative launch, blocks looping over the GEMVs' row
 *     groups (a group's first loads issued as the one before ends); between
 *     two GEMVs a grid barrier (an arrival counter, release and acquire at
 *     gpu scope), the block's first weights of the next GEMV loaded before
 *     it; and the same without the barrier, for timing only (its outputs
 *     are wrong): what the barriers cost against how fast the loop streams;
 *   persistent with tickets: the groups dealt by an atomic counter a GEMV
 *     (a block that ends early takes more), then the grid barrier, or a
 *     wait for the GEMV's groups to be done (blocks add the groups they did,
 *     with release: no arrival for a block that had none);
 *   persistent with the block's rows of the next GEMV asked of L2
 *     (prefetch.global.L2) as the GEMV before starts, or at its barrier;
 *   persistent with the block's arrival at the barrier before its first
 *     loads of the next GEMV (a release waits for the loads in flight).
 * Each at 8 loads in flight a lane and 1-4 blocks an SM. Last, the grid barrier alone (no GEMV), timed.
 * Prints us a GEMV and a layer for each, and the floor (the bytes at the copy
 * rate, read + written of a 1 GiB device-to-device copy, as cuda_bench.py).
 *
 *   make build/bench/chain_probe   (here; built by `make` too where nvcc is)
 *   build/bench/chain_probe [L] [blocks an SM for the persistent kernels; default: 1-4, where they fit]
 */
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/gcuda_common.cuh" /* gc_pdl_wait, gc_pdl_trigger, gc_launch */
#include "bench/cuda_probe.cuh" /* CK, ms_of, probe_rng, probe_weights, ldw, dot8 */

#define THREADS 256
#define RPB (THREADS / 32) /* rows a block: a warp a row */
#define MAXG 512           /* GEMVs in a chain */

struct gemv {
    const __half *w; /* [n, k] */
    int n, k;
};
struct chain {
    gemv g[MAXG];
    int count;
    __half *y[2]; /* outputs alternate; x of GEMV i is y[(i + 1) & 1] (y[1] first: the input) */
};

/* The first UU chunks of a lane's row (before x is ready). */
template <int UU> __device__ __forceinline__ void row_first(const gemv &g, int r, int lane, uint4 *wv)
{
    const int C = g.k / 8;
#pragma unroll
    for (int u = 0; u < UU; u++) {
        const int c = lane + 32 * u;
        wv[u] = r < g.n && c < C ? ldw(g.w + (size_t)r * g.k + 8 * c) : make_uint4(0, 0, 0, 0);
    }
}
/* Row r of g against x (plain loads: x was written in this kernel by the persistent form), its first UU
 * chunks in wv; lane 0 stores the fp16 sum. */
template <int UU>
__device__ __forceinline__ void row_rest(const gemv &g, int r, int lane, uint4 *wv, const __half *x, __half *y)
{
    const int C = g.k / 8;
    float acc = 0.0f;
    for (int c0 = 0;;) {
#pragma unroll
        for (int u = 0; u < UU; u++) {
            const int c = c0 + lane + 32 * u;
            if (r < g.n && c < C) acc = dot8(wv[u], *reinterpret_cast<const uint4 *>(x + 8 * c), acc);
        }
        c0 += 32 * UU;
        if (c0 >= C) break;
#pragma unroll
        for (int u = 0; u < UU; u++) {
            const int c = c0 + lane + 32 * u;
            if (r < g.n && c < C) wv[u] = ldw(g.w + (size_t)r * g.k + 8 * c);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0 && r < g.n) y[r] = __float2half_rn(acc);
}

/* One GEMV, a block a group of RPB rows, a programmatic dependent of the kernel before (its first UU
 * loads a lane issued before the wait). */
template <int UU> __global__ void __launch_bounds__(THREADS) gemv_launch_kernel(gemv g, const __half *x, __half *y)
{
    const int lane = threadIdx.x & 31, r = blockIdx.x * RPB + (threadIdx.x >> 5);
    uint4 wv[UU];
    row_first<UU>(g, r, lane, wv);
    gc_pdl_wait();
    gc_pdl_trigger();
    row_rest<UU>(g, r, lane, wv, x, y);
}

/* The barrier in two halves: the arrival (the block's stores released) and the wait (acquired), so that
 * loads may be issued between them: a release waits for the thread's loads in flight too. */
__device__ __forceinline__ void bar_arrive(unsigned *bar)
{
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned *bar, unsigned target)
{
    if (threadIdx.x == 0) {
        unsigned v;
        do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        while (v < target);
    }
    __syncthreads();
}

__device__ __forceinline__ void arrive_and_wait(unsigned *bar, unsigned target)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
        unsigned v;
        do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        while (v < target);
    }
    __syncthreads();
}

/* n grid barriers and nothing else: what one costs by itself. */
__global__ void __launch_bounds__(THREADS) barrier_only_kernel(unsigned *bar, int n)
{
    for (int i = 0; i < n; i++) arrive_and_wait(bar, (unsigned)(i + 1) * gridDim.x);
}

/* The rows this block takes of g (groups dealt in turn) asked of L2, a 128-byte line a lane at a time. */
__device__ __forceinline__ void l2_ask(const gemv &g, int warp, int lane)
{
    const int groups = (g.n + RPB - 1) / RPB, lines = g.k * 2 / 128;
    for (int b = blockIdx.x; b < groups; b += gridDim.x) {
        const int r = b * RPB + warp;
        if (r < g.n)
            for (int l = lane; l < lines; l += 32)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(g.w + (size_t)r * g.k + 64 * l));
    }
}

/* Every GEMV of the chain, blocks looping over each one's row groups, a grid barrier between two (BAR
 * false: none, for timing alone: the outputs are then wrong). PF: the block's rows of the next GEMV asked
 * of L2 as this one starts (1), or just before the barrier (2); 0 not; 3: no L2 asks, and the block arrives
 * at the barrier before it loads its first weights of the next GEMV (bar_arrive, then the loads, then
 * bar_wait), not after. */
template <int UU, bool BAR, int PF = 0>
__global__ void __launch_bounds__(THREADS) chain_persistent_kernel(const chain *cp, unsigned *bar)
{
    const chain &c = *cp;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint4 wv[UU];
    row_first<UU>(c.g[0], blockIdx.x * RPB + warp, lane, wv);
    for (int i = 0; i < c.count; i++) {
        const gemv &g = c.g[i];
        const __half *x = c.y[(i + 1) & 1];
        __half *y = c.y[i & 1];
        const int groups = (g.n + RPB - 1) / RPB;
        if (PF == 1 && i + 1 < c.count) l2_ask(c.g[i + 1], warp, lane);
        for (int b = blockIdx.x; b < groups; b += gridDim.x) {
            row_rest<UU>(g, b * RPB + warp, lane, wv, x, y);
            if (b + (int)gridDim.x < groups) row_first<UU>(g, (b + gridDim.x) * RPB + warp, lane, wv);
        }
        if (i + 1 < c.count) {
            if (PF == 2) l2_ask(c.g[i + 1], warp, lane);
            if constexpr (BAR && PF == 3) bar_arrive(bar);
            row_first<UU>(c.g[i + 1], blockIdx.x * RPB + warp, lane, wv); /* in flight across the barrier */
            if constexpr (BAR && PF == 3) bar_wait(bar, (unsigned)(i + 1) * gridDim.x);
            else if constexpr (BAR) arrive_and_wait(bar, (unsigned)(i + 1) * gridDim.x);
        }
    }
}

/* The same chain with the row groups dealt by tickets (an atomic counter a GEMV: a block takes its next
 * group as it starts one, so a block that finishes early takes more), and between two GEMVs either the
 * grid barrier (WAIT 0) or a wait for the GEMV's groups to be done (WAIT 1: each block adds the groups it
 * did to a counter a GEMV, with release; the others wait until it reaches the GEMV's groups). ctr:
 * [0] the barrier, [1, G] the tickets, [G + 1, 2 G] the groups done, zeroed before each run. */
template <int UU, int WAIT>
__global__ void __launch_bounds__(THREADS) chain_ticket_kernel(const chain *cp, unsigned *ctr)
{
    const chain &c = *cp;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, G = c.count;
    __shared__ int s_next;
    uint4 wv[UU];
    if (threadIdx.x == 0) s_next = (int)atomicAdd(ctr + 1, 1u);
    __syncthreads();
    int g = s_next;
    row_first<UU>(c.g[0], g * RPB + warp, lane, wv);
    for (int i = 0; i < G; i++) {
        const gemv &m = c.g[i];
        const __half *x = c.y[(i + 1) & 1];
        __half *y = c.y[i & 1];
        const int groups = (m.n + RPB - 1) / RPB;
        unsigned did = 0;
        while (g < groups) {
            __syncthreads(); /* s_next read by every thread */
            if (threadIdx.x == 0) s_next = (int)atomicAdd(ctr + 1 + i, 1u);
            __syncthreads();
            const int gn = s_next;
            row_rest<UU>(m, g * RPB + warp, lane, wv, x, y);
            did++;
            if (gn < groups) row_first<UU>(m, gn * RPB + warp, lane, wv);
            g = gn;
        }
        if (i + 1 < G) {
            __syncthreads();
            if (threadIdx.x == 0) s_next = (int)atomicAdd(ctr + 2 + i, 1u);
            __syncthreads();
            g = s_next;
            row_first<UU>(c.g[i + 1], g * RPB + warp, lane, wv); /* in flight across the wait */
            if constexpr (WAIT == 0) {
                arrive_and_wait(ctr, (unsigned)(i + 1) * gridDim.x);
            } else {
                __syncthreads(); /* the block's stores before its release */
                if (threadIdx.x == 0) {
                    unsigned *done = ctr + 1 + G + i;
                    if (did) asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(done), "r"(did) : "memory");
                    unsigned v;
                    do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(done) : "memory");
                    while (v < (unsigned)groups);
                }
                __syncthreads();
            }
        }
    }
}

int main(int argc, char **argv)
{
    const int L = argc > 1 ? atoi(argv[1]) : 35, bps_ask = argc > 2 ? atoi(argv[2]) : 0;
    const int shapes[6][2] = {{2560, 1536}, {1536, 2048}, {12288, 1536}, {1536, 6144}, {256, 1536}, {1536, 256}};
    const char *names[6] = {"q/k/v", "o", "gate/up", "down", "pli gate", "pli proj"};
    const int G = 6 * L;
    if (L < 1 || G > MAXG) {
        fprintf(stderr, "chain_probe: layers 1..%d\n", MAXG / 6);
        return 2;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const int sms = p.multiProcessorCount;

    /* the copy rate, as bench/cuda_bench.py measures it */
    const size_t cb = (size_t)1 << 30;
    void *ca, *cbuf;
    CK(cudaMalloc(&ca, cb));
    CK(cudaMalloc(&cbuf, cb));
    CK(cudaMemset(ca, 1, cb));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ct;
    for (int r = 0; r < 11; r++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        ct.push_back(ms_of(e0, e1));
    }
    std::sort(ct.begin(), ct.end());
    const double copy_gbs = 2.0 * cb / (ct[ct.size() / 2] * 1e6);
    CK(cudaFree(ca));
    CK(cudaFree(cbuf));

    /* weights, uniform in +-sqrt(3 / k) (outputs keep x's scale), and x */
    chain h = {};
    h.count = G;
    size_t bytes = 0, maxn = 0;
    std::vector<std::vector<__half>> hw(G);
    probe_rng rnd{0x9e3779b97f4a7c15ull};
    for (int i = 0; i < G; i++) {
        const int n = shapes[i % 6][0], k = shapes[i % 6][1];
        h.g[i] = {probe_weights(rnd, n, k, hw[i]), n, k};
        bytes += hw[i].size() * sizeof(__half);
        maxn = std::max(maxn, (size_t)std::max(n, k));
    }
    std::vector<__half> x0(maxn);
    for (auto &v : x0) v = __float2half_rn(rnd());
    for (int j = 0; j < 2; j++) CK(cudaMalloc(&h.y[j], maxn * sizeof(__half)));

    /* the reference: fp64 sums, each output rounded to fp16 */
    std::vector<float> xr(maxn), yr(maxn);
    for (size_t j = 0; j < maxn; j++) xr[j] = __half2float(x0[j]);
    for (int i = 0; i < G; i++) {
        const int n = h.g[i].n, k = h.g[i].k;
        for (int r = 0; r < n; r++) {
            double a = 0;
            for (int j = 0; j < k; j++) a += (double)__half2float(hw[i][(size_t)r * k + j]) * xr[j];
            yr[r] = __half2float(__float2half_rn((float)a));
        }
        std::swap(xr, yr);
    }
    const int nout = h.g[G - 1].n;
    std::vector<float> ref(xr.begin(), xr.begin() + nout);
    hw.clear();

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto reset = [&] { CK(cudaMemcpyAsync(h.y[1], x0.data(), maxn * sizeof(__half), cudaMemcpyHostToDevice, st)); };
    auto result = [&](std::vector<__half> &out) {
        out.resize(nout);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(out.data(), h.y[(G - 1) & 1], nout * sizeof(__half), cudaMemcpyDeviceToHost));
    };
    auto err_of = [&](const std::vector<__half> &out) {
        double e = 0, m = 0;
        for (int r = 0; r < nout; r++) {
            e = std::max(e, (double)fabsf(__half2float(out[r]) - ref[r]));
            m = std::max(m, (double)fabsf(ref[r]));
        }
        return e / m;
    };

    /* launches: one graph of G launches, programmatic dependents (the first UU loads before the wait) or
     * plain launches */
    struct lform {
        void (*k)(gemv, const __half *, __half *);
        int uu;
        bool pdl;
        cudaGraphExec_t gx;
        std::vector<float> t;
    };
    std::vector<lform> lf = {{gemv_launch_kernel<4>, 4, true, NULL, {}},
                             {gemv_launch_kernel<8>, 8, true, NULL, {}},
                             {gemv_launch_kernel<16>, 16, true, NULL, {}},
                             {gemv_launch_kernel<4>, 4, false, NULL, {}}};
    for (lform &f : lf) {
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < G; i++) {
            gc_launch(f.pdl, f.k, dim3((unsigned)((h.g[i].n + RPB - 1) / RPB)), dim3(THREADS), 0, st, h.g[i],
                      (const __half *)h.y[(i + 1) & 1], h.y[i & 1]);
            CK(cudaGetLastError());
        }
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&f.gx, graph, 0));
        CK(cudaGraphDestroy(graph));
    }
    const cudaGraphExec_t gexec = lf[0].gx;

    /* persistent: one cooperative launch, each variant at each number of blocks an SM that fits */
    struct variant {
        const void *k;
        int uu;
        const char *form;
        bool checked; /* its outputs are the chain's (else timing only) */
    };
    const variant vars[] = {
        {(const void *)chain_persistent_kernel<8, true>, 8, "groups dealt in turn, grid barrier", true},
        {(const void *)chain_persistent_kernel<8, false>, 8, "groups dealt in turn, no barrier (timing only)", false},
        {(const void *)chain_persistent_kernel<8, true, 3>, 8,
         "groups dealt in turn, grid barrier, arrival before the next GEMV's first loads", true},
        {(const void *)chain_persistent_kernel<16, true, 3>, 16,
         "groups dealt in turn, grid barrier, arrival before the next GEMV's first loads", true},
        {(const void *)chain_persistent_kernel<8, true, 1>, 8,
         "groups dealt in turn, grid barrier, the next GEMV's rows asked of L2 as this one starts", true},
        {(const void *)chain_persistent_kernel<8, true, 2>, 8,
         "groups dealt in turn, grid barrier, the next GEMV's rows asked of L2 before the barrier", true},
        {(const void *)chain_ticket_kernel<8, 0>, 8, "tickets, grid barrier", true},
        {(const void *)chain_ticket_kernel<8, 1>, 8, "tickets, wait for the groups done", true}};
    struct run {
        const variant *v;
        int bps;
        std::vector<float> t;
    };
    std::vector<run> runs;
    for (const variant &v : vars) {
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.k, THREADS, 0));
        for (int b : {1, 2, 3, 4})
            if (b <= occ && (bps_ask <= 0 || b == bps_ask)) runs.push_back({&v, b, {}});
    }
    chain *dc;
    unsigned *bar; /* the counters: chain_ticket_kernel's ctr */
    const size_t nctr = 1 + 2 * (size_t)G;
    CK(cudaMalloc(&dc, sizeof h));
    CK(cudaMemcpy(dc, &h, sizeof h, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&bar, nctr * sizeof *bar));
    auto persistent = [&](const run &r) {
        CK(cudaMemsetAsync(bar, 0, nctr * sizeof *bar, st));
        void *args[] = {(void *)&dc, (void *)&bar};
        CK(cudaLaunchCooperativeKernel(r.v->k, dim3(sms * r.bps), dim3(THREADS), args, 0, st));
    };

    std::vector<__half> out_l, out_p;
    reset();
    CK(cudaGraphLaunch(gexec, st));
    result(out_l);
    const double el = err_of(out_l);
    printf("%s, %d SMs, copy %.0f GB/s (read + write); %d layers of 6 GEMVs (%s", p.name, sms, copy_gbs, L, names[0]);
    for (int i = 1; i < 6; i++) printf(", %s", names[i]);
    printf("), %.3f GB of weights\n", bytes / 1e9);
    printf("check against the fp64 reference (max error / max |y|): launches %.2e\n", el);
    bool ok = el < 2e-2;
    for (size_t j = 1; j < lf.size(); j++) {
        reset();
        CK(cudaGraphLaunch(lf[j].gx, st));
        result(out_p);
        size_t diff = 0;
        for (int i = 0; i < nout; i++) diff += __half_as_ushort(out_l[i]) != __half_as_ushort(out_p[i]);
        printf("  launches, %d loads a lane%s: outputs unlike the first form's: %zu of %d\n", lf[j].uu,
               lf[j].pdl ? "" : ", plain", diff, nout);
        ok = ok && diff == 0;
    }
    for (const run &r : runs) {
        if (!r.v->checked) continue;
        reset();
        persistent(r);
        result(out_p);
        size_t diff = 0;
        for (int i = 0; i < nout; i++) diff += __half_as_ushort(out_l[i]) != __half_as_ushort(out_p[i]);
        const double ep = err_of(out_p);
        printf("  persistent, %s, %d loads a lane, %d an SM: %.2e; outputs unlike the launches': %zu of %d\n",
               r.v->form, r.v->uu, r.bps, ep, diff, nout);
        ok = ok && ep < 2e-2 && diff == 0;
    }

    /* timing: the forms alternately, 15 runs each, the median */
    std::vector<float> tb;
    int bocc = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bocc, barrier_only_kernel, THREADS, 0));
    const int bgrid = sms * std::min(bocc, 3);
    for (int i = 0; i < 15; i++) {
        for (lform &f : lf) {
            CK(cudaEventRecord(e0, st));
            CK(cudaGraphLaunch(f.gx, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            f.t.push_back(ms_of(e0, e1));
        }
        CK(cudaMemsetAsync(bar, 0, sizeof *bar, st));
        CK(cudaEventRecord(e0, st));
        {
            int nb = G;
            void *args[] = {(void *)&bar, (void *)&nb};
            CK(cudaLaunchCooperativeKernel((const void *)barrier_only_kernel, dim3(bgrid), dim3(THREADS), args, 0, st));
        }
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        tb.push_back(ms_of(e0, e1));
        for (run &r : runs) {
            CK(cudaEventRecord(e0, st));
            persistent(r);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            r.t.push_back(ms_of(e0, e1));
        }
    }
    auto median_us = [](std::vector<float> &v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2] * 1e3;
    };
    const double floor_us = bytes / (copy_gbs * 1e3);
    printf("\n| form | us the chain | us a layer | us a GEMV | floor / time | us a GEMV over the floor |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    printf("| floor (weights at the copy rate) | %.1f | %.2f | %.2f | 100%% | |\n", floor_us, floor_us / L,
           floor_us / G);
    for (lform &f : lf) {
        const double ml = median_us(f.t);
        printf("| launches (one graph), %s, %d loads a lane | %.1f | %.2f | %.2f | %.1f%% | %.2f |\n",
               f.pdl ? "programmatic dependents" : "plain", f.uu, ml, ml / L, ml / G, 100 * floor_us / ml,
               (ml - floor_us) / G);
    }
    for (run &r : runs) {
        const double mp = median_us(r.t);
        printf("| persistent, %s, %d loads a lane, %d blocks (%d an SM) | %.1f | %.2f | %.2f | %.1f%% | %.2f |\n",
               r.v->form, r.v->uu, sms * r.bps, r.bps, mp, mp / L, mp / G, 100 * floor_us / mp, (mp - floor_us) / G);
    }
    printf("\n%d grid barriers alone, %d blocks (%d an SM): %.2f us each\n", G, bgrid, bgrid / sms,
           median_us(tb) / G);
    printf("%s\n", ok ? "chain_probe: ok" : "chain_probe: FAIL (outputs differ from the reference or each other)");
    return ok ? 0 : 1;
}
