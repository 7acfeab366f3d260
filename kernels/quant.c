/* CPU kernels, quantization family: DequantizeLinear, QuantizeLinear
 * (ONNX), MatMulNBits and GatherBlockQuantized (com.microsoft). */
#include "kernels/gemm.h"
#include "kernels/kcommon.h"

const rt_kernel rt_kernels_quant[] = {
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
