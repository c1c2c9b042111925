// linear: every matrix product of the network through cuBLASLt (bf16 operands, fp32 compute):
// qkv, proj, fc1, fc2, the merge reductions, the expands, the skip linears and the head's
// temporal GEMM.
//
// Math: out[n, N] = beta * out + in[n, K] W^T + bias, W (N, K) row-major (PyTorch's layout).
// cuBLASLt is column-major, so the row-major product is computed as its transpose:
// D (N x n, ld ldo) = op_T(A = W as K x N, ld K) x B (= in as K x n, ld lda) (+ beta C, C = D).
// The bias is per row of D (= output channel): cuBLASLt's BIAS epilogue, bias dtype = D's dtype
// (its default); where the heuristic offers no algorithm with that epilogue, the GEMM runs
// without it and bias_kernel adds the bias after (one more read+write of out).
// Rounding: fp32 accumulation over K, one rounding on the store when out is bf16; with beta = 1
// (fp32 out only) the residual add happens inside the GEMM's epilogue in fp32.
// Traffic per token: 2K B read + (2 or 4) N B written (+ 4N B read when beta != 0); the weights
// (2NK B) stay in L2. At 1080p the GEMMs are 190 of the 212 GFLOP per frame (docs/cuda.md).
// Algorithms: heuristic's first choice per (shape, dtype, epilogue, alignment), cached in ctx.
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

template <typename T>
__global__ void bias_kernel(T *__restrict__ out, int64_t n, int N, int ldo, const T *__restrict__ bias) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * N) return;
    const int64_t r = i / N;
    const int c = (int)(i % N);
    T *p = out + r * ldo + c;
    if constexpr (sizeof(T) == 4)
        *p = *p + bias[c];
    else
        *p = __float2bfloat16_rn(__bfloat162float(*p) + __bfloat162float(bias[c]));
}

int alignment_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a % al)) al >>= 1;
    return al;
}

struct LtGuard {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtGuard() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

// One attempt with or without the bias epilogue. *no_algo: the heuristic found nothing.
int run_lt(Ctx &ctx, const bf16 *in, int64_t n, int K, int lda, const bf16 *W, const void *bias, int N, void *out,
           bool out_f32, int ldo, float beta, bool *no_algo) {
    *no_algo = false;
    LtGuard g;
    int rc;
    const cudaDataType_t dt = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
    if ((rc = cublas_check(ctx, cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate")))
        return rc;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if ((rc = cublas_check(ctx, cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA")))
        return rc;
    if ((rc = cublas_check(ctx, cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB")))
        return rc;
    if (bias) {
        const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        if ((rc = cublas_check(ctx, cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep),
                               "EPILOGUE")))
            return rc;
        if ((rc = cublas_check(ctx, cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                                   sizeof bias),
                               "BIAS_POINTER")))
            return rc;
    }
    if ((rc = cublas_check(ctx, cublasLtMatrixLayoutCreate(&g.a, CUDA_R_16BF, K, N, K), "layout A"))) return rc;
    if ((rc = cublas_check(ctx, cublasLtMatrixLayoutCreate(&g.b, CUDA_R_16BF, K, (uint64_t)n, lda), "layout B")))
        return rc;
    if ((rc = cublas_check(ctx, cublasLtMatrixLayoutCreate(&g.d, dt, N, (uint64_t)n, ldo), "layout D"))) return rc;

    const int al_a = alignment_of(W), al_b = alignment_of(in), al_d = alignment_of(out),
              al_bias = bias ? alignment_of(bias) : 256;
    const std::string key = std::to_string(n) + "," + std::to_string(K) + "," + std::to_string(lda) + "," +
                            std::to_string(N) + "," + std::to_string(ldo) + "," + (out_f32 ? "f" : "h") +
                            (bias ? "b" : "-") + (beta != 0.f ? "a" : "-") + "," + std::to_string(al_a) + "," +
                            std::to_string(al_b) + "," + std::to_string(al_d) + "," + std::to_string(al_bias);
    auto it = ctx.algos.find(key);
    if (it == ctx.algos.end()) {
        if ((rc = cublas_check(ctx, cublasLtMatmulPreferenceCreate(&g.pref), "cublasLtMatmulPreferenceCreate")))
            return rc;
        const uint64_t wsb = ctx.lt_ws_bytes;
        const uint32_t ua = al_a, ub = al_b, ud = al_d;
        cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
        cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ua, sizeof ua);
        cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ub, sizeof ub);
        cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ud, sizeof ud);
        cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ud, sizeof ud);
        cublasLtMatmulHeuristicResult_t res{};
        int nres = 0;
        cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(ctx.lt, g.op, g.a, g.b, g.d, g.d, g.pref, 1, &res, &nres);
        if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && nres == 0)) {
            *no_algo = true;
            return fail(ctx, DENOISE_EDEVICE, "cublasLtMatmulAlgoGetHeuristic: no algorithm for " + key);
        }
        if ((rc = cublas_check(ctx, s, "cublasLtMatmulAlgoGetHeuristic"))) return rc;
        it = ctx.algos.emplace(key, res.algo).first;
    }
    const float alpha = 1.f;
    return cublas_check(ctx,
                        cublasLtMatmul(ctx.lt, g.op, &alpha, W, g.a, in, g.b, &beta, out, g.d, out, g.d, &it->second,
                                       ctx.lt_ws, ctx.lt_ws_bytes, ctx.stream),
                        ("cublasLtMatmul " + key).c_str());
}

}  // namespace

int linear(Ctx &ctx, const bf16 *in, int64_t n, int K, int lda, const bf16 *W, const void *bias, int N, void *out,
           bool out_f32, int ldo, float beta) {
    DN_REQUIRE(in && W && out, "null pointer");
    DN_REQUIRE(n >= 1 && K >= 1 && N >= 1, "empty product n=" + std::to_string(n) + " K=" + std::to_string(K) +
                                               " N=" + std::to_string(N));
    DN_REQUIRE(lda >= K && ldo >= N, "leading dimension smaller than the row (lda " + std::to_string(lda) + " < K " +
                                         std::to_string(K) + " or ldo " + std::to_string(ldo) + " < N " +
                                         std::to_string(N) + ")");
    DN_REQUIRE(beta == 0.f || out_f32, "beta != 0 needs an fp32 output");
    bool no_algo = false;
    if (!ctx.no_bias_epilogue || !bias) {
        int rc = run_lt(ctx, in, n, K, lda, W, bias, N, out, out_f32, ldo, beta, &no_algo);
        if (!no_algo || !bias) return rc;
    }
    // No algorithm with the BIAS epilogue (or the tests force this path): plain GEMM + bias kernel.
    int rc = run_lt(ctx, in, n, K, lda, W, nullptr, N, out, out_f32, ldo, beta, &no_algo);
    if (rc) return rc;
    unsigned blocks;
    DN_REQUIRE(grid_1d(n * N, 256, &blocks), "grid too large");
    if (out_f32)
        bias_kernel<float><<<blocks, 256, 0, ctx.stream>>>((float *)out, n, N, ldo, (const float *)bias);
    else
        bias_kernel<bf16><<<blocks, 256, 0, ctx.stream>>>((bf16 *)out, n, N, ldo, (const bf16 *)bias);
    return launch_check(ctx, "bias_kernel");
}

}  // namespace cuda
}  // namespace denoise
