/* CUDA error reporting, device queries and buffer helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "kernels/cuda/gcuda_common.cuh"

graft_status gcuda_fail(graft_error *err, cudaError_t e, const char *what, const char *file, int line)
{
    graft_status code = e == cudaErrorMemoryAllocation ? GRAFT_ENOMEM : GRAFT_EIO;
    if (err) {
        err->code = code;
        snprintf(err->msg, sizeof err->msg, "%s:%d: %s: %s (%s)", file, line, what, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    }
    return code;
}

graft_status gcuda_errf(graft_error *err, graft_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* GRAFT_CUDA_SMS=N, a lab setting: graft runs in a green context of N SMs
 * (rounded as the driver splits them), the rest of the device idle, so
 * that an H100 asks of each SM what an H200 does (2937 GB/s of copy over
 * 96 SMs is the H200's 4134 over 132). Set current by gcuda_sm_limit on
 * the thread that then creates the streams; the SM count every grid is
 * sized by (gcuda_sm_count) is the context's. */
static int g_limit_sms; /* 0: the whole device */

template <typename F> static bool gc_drv(const char *name, F *fp)
{
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12040, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !p) {
        (void)cudaGetLastError();
        return false;
    }
    *fp = (F)p;
    return true;
}

graft_status gcuda_sm_limit(int *sms_out, graft_error *err)
{
    static CUcontext green_ctx = NULL;
    static CUresult (*set_current)(CUcontext) = NULL;
    *sms_out = 0;
    const char *e = getenv("GRAFT_CUDA_SMS");
    if (!e || !*e || !strcmp(e, "0")) return GRAFT_OK;
    if (green_ctx) { /* made once a process; current on this thread too */
        if (set_current(green_ctx) != CUDA_SUCCESS) return gcuda_errf(err, GRAFT_EIO, "GRAFT_CUDA_SMS: cuCtxSetCurrent");
        *sms_out = g_limit_sms;
        return GRAFT_OK;
    }
    char *end = NULL;
    const long want = strtol(e, &end, 10);
    int dev, all;
    GCUDA_CHECK(cudaGetDevice(&dev));
    GCUDA_CHECK(cudaDeviceGetAttribute(&all, cudaDevAttrMultiProcessorCount, dev));
    if (*end || want < 1 || want >= all)
        return gcuda_errf(err, GRAFT_EINVAL, "GRAFT_CUDA_SMS=%s: expected 1..%d (the device has %d SMs)", e, all - 1, all);
    GCUDA_CHECK(cudaFree(0)); /* the primary context, which the green one retains */
    CUresult (*dev_get)(CUdevice *, int);
    CUresult (*res_get)(CUdevice, CUdevResource *, CUdevResourceType);
    CUresult (*split)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned, unsigned);
    CUresult (*gen)(CUdevResourceDesc *, CUdevResource *, unsigned);
    CUresult (*create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
    CUresult (*to_ctx)(CUcontext *, CUgreenCtx);
    if (!gc_drv("cuDeviceGet", &dev_get) || !gc_drv("cuDeviceGetDevResource", &res_get) ||
        !gc_drv("cuDevSmResourceSplitByCount", &split) || !gc_drv("cuDevResourceGenerateDesc", &gen) ||
        !gc_drv("cuGreenCtxCreate", &create) || !gc_drv("cuCtxFromGreenCtx", &to_ctx) ||
        !gc_drv("cuCtxSetCurrent", &set_current))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "GRAFT_CUDA_SMS: the driver has no green contexts (CUDA 12.4+)");
    CUdevice cd;
    CUdevResource in, part, rest;
    CUdevResourceDesc desc;
    CUgreenCtx gx;
    unsigned groups = 1;
    memset(&in, 0, sizeof in);
    memset(&part, 0, sizeof part);
    memset(&rest, 0, sizeof rest);
    CUresult r = dev_get(&cd, dev);
    if (r == CUDA_SUCCESS) r = res_get(cd, &in, CU_DEV_RESOURCE_TYPE_SM);
    if (r == CUDA_SUCCESS) r = split(&part, &groups, &in, &rest, 0, (unsigned)want);
    if (r == CUDA_SUCCESS && groups < 1) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = gen(&desc, &part, 1);
    if (r == CUDA_SUCCESS) r = create(&gx, desc, cd, CU_GREEN_CTX_DEFAULT_STREAM);
    if (r == CUDA_SUCCESS) r = to_ctx(&green_ctx, gx);
    if (r == CUDA_SUCCESS) r = set_current(green_ctx);
    if (r != CUDA_SUCCESS) {
        green_ctx = NULL;
        return gcuda_errf(err, GRAFT_EIO, "GRAFT_CUDA_SMS=%ld: the green context of %ld SMs failed (CUresult %d)", want,
                          want, (int)r);
    }
    g_limit_sms = (int)part.sm.smCount;
    *sms_out = g_limit_sms;
    return GRAFT_OK;
}

graft_status gcuda_sm_count(int *out, graft_error *err)
{
    static int cached_dev = -1, cached_sms = 0;
    int dev;
    if (g_limit_sms) {
        *out = g_limit_sms;
        return GRAFT_OK;
    }
    GCUDA_CHECK(cudaGetDevice(&dev));
    if (dev != cached_dev) {
        int sms;
        GCUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        cached_sms = sms;
        cached_dev = dev;
    }
    *out = cached_sms;
    return GRAFT_OK;
}

extern "C" {

graft_status gcuda_device_count(int *count, graft_error *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError(); /* clear it: no device is an answer, not an error */
        *count = 0;
        return GRAFT_OK;
    }
    if (e != cudaSuccess) {
        *count = 0;
        return gcuda_fail(err, e, "cudaGetDeviceCount", __FILE__, __LINE__);
    }
    *count = n;
    return GRAFT_OK;
}

graft_status gcuda_device_info_get(gcuda_device_info *info, graft_error *err)
{
    int dev;
    cudaDeviceProp p;
    GCUDA_CHECK(cudaGetDevice(&dev));
    GCUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = g_limit_sms ? g_limit_sms : p.multiProcessorCount;
    info->global_bytes = p.totalGlobalMem;
    info->l2_bytes = (size_t)p.l2CacheSize;
    info->smem_optin_bytes = p.sharedMemPerBlockOptin;
    return GRAFT_OK;
}

graft_status gcuda_malloc(void **out, size_t bytes, graft_error *err)
{
    *out = NULL;
    void *p = NULL;
    GCUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    *out = p;
    return GRAFT_OK;
}

void gcuda_free(void *p)
{
    if (p) (void)cudaFree(p);
}

graft_status gcuda_upload(void *dst, const void *src, size_t bytes, gcuda_stream s, graft_error *err)
{
    if (bytes) GCUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    return GRAFT_OK;
}

graft_status gcuda_download(void *dst, const void *src, size_t bytes, gcuda_stream s, graft_error *err)
{
    if (bytes) GCUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    GCUDA_CHECK(cudaStreamSynchronize(s));
    return GRAFT_OK;
}

graft_status gcuda_memset(void *dst, int byte, size_t bytes, gcuda_stream s, graft_error *err)
{
    if (bytes) GCUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, s));
    return GRAFT_OK;
}

graft_status gcuda_sync(gcuda_stream s, graft_error *err)
{
    GCUDA_CHECK(cudaStreamSynchronize(s));
    GCUDA_CHECK(cudaGetLastError());
    return GRAFT_OK;
}

size_t gcuda_dtype_size(int dtype)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: return 4;
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: return 2;
    default: return 0;
    }
}

} /* extern "C" */

template <typename U> __global__ void fill_kernel(U *p, size_t n, U v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

extern "C" graft_status gcuda_fill_nan(int dtype, void *dst, size_t n, gcuda_stream s, graft_error *err)
{
    if (n == 0) return GRAFT_OK;
    unsigned blocks = gc_blocks((int64_t)n, 256, 4096);
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: fill_kernel<uint32_t><<<blocks, 256, 0, s>>>((uint32_t *)dst, n, 0x7fc00000u); break;
    case GRAFT_DTYPE_FLOAT16: fill_kernel<uint16_t><<<blocks, 256, 0, s>>>((uint16_t *)dst, n, (uint16_t)0x7e00); break;
    case GRAFT_DTYPE_BFLOAT16: fill_kernel<uint16_t><<<blocks, 256, 0, s>>>((uint16_t *)dst, n, (uint16_t)0x7fc0); break;
    default: return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_fill_nan: dtype %d not supported", dtype);
    }
    GCUDA_CHECK_LAUNCH("fill_kernel");
    return GRAFT_OK;
}

int gcuda_pdl_mode(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("GRAFT_CUDA_PDL");
        mode = !e || !*e ? 2 : !strcmp(e, "0") ? 0 : !strcmp(e, "gemv") ? 1 : 2;
    }
    return mode;
}
