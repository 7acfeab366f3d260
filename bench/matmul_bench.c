/* matmul_bench: checks k_sgemm against a naive reference at many shapes
 * (all transpose combinations, ragged edges), then prints GFLOP/s (and
 * GB/s of weights streamed for GEMV) for decode- and prefill-shaped
 * products. Threads: GRAFT_THREADS (default: all cores).
 *
 *   matmul_bench [--quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static int check(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, unsigned *seed)
{
    float *A = malloc((size_t)(M * K + 1) * 4), *B = malloc((size_t)(K * N + 1) * 4);
    float *C = malloc((size_t)(M * N + 1) * 4), *R = malloc((size_t)(M * N + 1) * 4);
    fill(A, (size_t)(M * K), seed);
    fill(B, (size_t)(K * N), seed);
    fill(C, (size_t)(M * N), seed);
    memcpy(R, C, (size_t)(M * N) * 4);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            R[i * N + j] = (float)(alpha * s + (beta == 0 ? 0 : beta * R[i * N + j]));
        }
    k_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    double maxe = 0;
    for (int64_t i = 0; i < M * N; i++) {
        double e = fabs(C[i] - R[i]) / (1.0 + fabs(R[i]));
        if (e > maxe) maxe = e;
    }
    int ok = maxe < 1e-4 * (1 + K / 256.0);
    if (!ok)
        printf("MISMATCH ta=%d tb=%d M=%lld N=%lld K=%lld: max rel err %.3g\n", ta, tb, (long long)M, (long long)N,
               (long long)K, maxe);
    free(A), free(B), free(C), free(R);
    return ok;
}

/* k_sgemm_packed (B prepacked, fp32 and fp16 storage) against the same reference */
static int check_packed(int64_t M, int64_t N, int64_t K, unsigned *seed)
{
    float *A = malloc((size_t)(M * K + 1) * 4), *B = malloc((size_t)(K * N + 1) * 4);
    float *C = malloc((size_t)(M * N + 1) * 4), *R = malloc((size_t)(M * N + 1) * 4);
    uint16_t *B16 = malloc((size_t)(K * N + 1) * 2);
    fill(A, (size_t)(M * K), seed);
    fill(B, (size_t)(K * N), seed);
    k_from_f32(GRAFT_DTYPE_FLOAT16, B, B16, (size_t)(K * N));
    int ok = 1;
    for (int half = 0; half < 2; half++) {
        if (half) k_to_f32(GRAFT_DTYPE_FLOAT16, B16, B, (size_t)(K * N));
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
                R[i * N + j] = (float)s;
            }
        k_bpack pb = {0};
        if (!k_bpack_init(&pb, half ? GRAFT_DTYPE_FLOAT16 : GRAFT_DTYPE_FLOAT, half ? (void *)B16 : (void *)B, K, N))
            return 0;
        k_sgemm_packed(M, A, K, &pb, C, N);
        k_bpack_free(&pb);
        double maxe = 0;
        for (int64_t i = 0; i < M * N; i++) {
            double e = fabs(C[i] - R[i]) / (1.0 + fabs(R[i]));
            if (e > maxe) maxe = e;
        }
        if (maxe >= 1e-4 * (1 + K / 256.0)) {
            printf("MISMATCH packed%s M=%lld N=%lld K=%lld: max rel err %.3g\n", half ? " fp16" : "", (long long)M,
                   (long long)N, (long long)K, maxe);
            ok = 0;
        }
    }
    free(A), free(B), free(C), free(R), free(B16);
    return ok;
}

static void bench_packed(const char *label, int64_t M, int64_t N, int64_t K, double min_s)
{
    float *A = aligned_alloc(64, (size_t)(M * K) * 4 + 64), *B = aligned_alloc(64, (size_t)(K * N) * 4 + 64);
    float *C = aligned_alloc(64, (size_t)(M * N) * 4 + 64);
    unsigned seed = 7;
    fill(A, (size_t)(M * K), &seed);
    fill(B, (size_t)(K * N), &seed);
    k_bpack pb = {0};
    if (!k_bpack_init(&pb, GRAFT_DTYPE_FLOAT, B, K, N)) return;
    k_sgemm_packed(M, A, K, &pb, C, N); /* warm */
    int reps = 0;
    double t0 = now(), t;
    do {
        k_sgemm_packed(M, A, K, &pb, C, N);
        reps++;
        t = now() - t0;
    } while (t < min_s);
    double per = t / reps, gf = 2.0 * (double)M * N * K / per * 1e-9;
    printf("%-28s M=%-5lld N=%-6lld K=%-5lld pB  %8.3f ms  %7.2f GFLOP/s", label, (long long)M, (long long)N,
           (long long)K, per * 1e3, gf);
    if (M == 1) printf("  %6.2f GB/s of B", (double)K * N * 4 / per * 1e-9);
    printf("\n");
    k_bpack_free(&pb);
    free(A), free(B), free(C);
}

static void bench(const char *label, int64_t M, int64_t N, int64_t K, int tb, double min_s)
{
    float *A = aligned_alloc(64, (size_t)(M * K) * 4 + 64), *B = aligned_alloc(64, (size_t)(K * N) * 4 + 64);
    float *C = aligned_alloc(64, (size_t)(M * N) * 4 + 64);
    unsigned seed = 7;
    fill(A, (size_t)(M * K), &seed);
    fill(B, (size_t)(K * N), &seed);
    k_sgemm(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, C, N); /* warm */
    int reps = 0;
    double t0 = now(), t;
    do {
        k_sgemm(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, C, N);
        reps++;
        t = now() - t0;
    } while (t < min_s);
    double per = t / reps, gf = 2.0 * (double)M * N * K / per * 1e-9;
    printf("%-28s M=%-5lld N=%-6lld K=%-5lld %s %8.3f ms  %7.2f GFLOP/s", label, (long long)M, (long long)N, (long long)K,
           tb ? "B^T" : "B  ", per * 1e3, gf);
    if (M == 1) printf("  %6.2f GB/s of B", (double)K * N * 4 / per * 1e-9);
    printf("\n");
    free(A), free(B), free(C);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    unsigned seed = 1;
    int ok = 1;
    const int64_t sizes[][3] = {{1, 1, 1},   {1, 17, 33},  {1, 300, 70},   {2, 5, 7},     {3, 16, 256},
                                {6, 16, 257}, {7, 33, 300}, {13, 129, 513}, {64, 64, 64}, {100, 260, 40},
                                {1, 1500, 64}, {97, 1001, 31}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                ok &= check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], 1.0f, 0.0f, &seed);
                ok &= check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], 0.5f, 2.0f, &seed);
            }
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) ok &= check_packed(sizes[s][0], sizes[s][1], sizes[s][2], &seed);
    ok &= check_packed(1, 1000, 600, &seed) && check_packed(5, 300, 700, &seed) && check_packed(130, 77, 513, &seed);
    printf("correctness: %s (%zu shapes x 4 transposes x 2 alpha/beta; prepacked B fp32/fp16)\n", ok ? "ok" : "FAILED",
           sizeof sizes / sizeof sizes[0]);
    printf("threads: %d\n", k_threads());
    double ms = quick ? 0.2 : 1.0;
    bench("decode GEMV (x W)", 1, 8192, 2048, 0, ms);
    bench("decode GEMV (x W^T)", 1, 8192, 2048, 1, ms);
    bench("decode GEMV small", 1, 1536, 1536, 0, ms);
    bench("prefill GEMM", 64, 2048, 2048, 0, ms);
    bench("prefill GEMM (W^T)", 64, 2048, 2048, 1, ms);
    bench("square GEMM", 512, 512, 512, 0, ms);
    /* llama100m prefill (128 tokens): qkv, o, gate/up, down, lm_head */
    bench("llama100m qkv", 128, 1280, 768, 0, ms);
    bench("llama100m o_proj", 128, 768, 768, 0, ms);
    bench("llama100m gate/up", 128, 2048, 768, 0, ms);
    bench("llama100m down", 128, 768, 2048, 0, ms);
    bench("llama100m lm_head", 128, 16384, 768, 0, ms);
    bench_packed("llama100m qkv", 128, 1280, 768, ms);
    bench_packed("llama100m gate/up", 128, 2048, 768, ms);
    bench_packed("llama100m down", 128, 768, 2048, ms);
    bench_packed("llama100m lm_head", 128, 16384, 768, ms);
    bench_packed("llama100m decode down", 1, 768, 2048, ms);
    bench_packed("llama100m decode lm_head", 1, 16384, 768, ms);
    bench("llama100m decode down", 1, 768, 2048, 0, ms);
    bench("llama100m decode lm_head", 1, 16384, 768, 0, ms);
    return ok ? 0 : 1;
}
