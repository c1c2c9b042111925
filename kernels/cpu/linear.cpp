// Linear layer on a token-major map: out (n, N) = in (n, K) x W^T + b, W in PyTorch's (N, K)
// layout, so cblas_sgemm (RowMajor, NoTrans x Trans) with no repacking.
// Threading: OpenBLAS's own threads run each GEMM. Splitting the rows over the engine's pool with
// a single-threaded sgemm per block was tried: 2 x 200 sgemm 8192x96x32 on 2 threads scaled 2x on
// an idle moment (98 vs 190 ms) but took 0.7-3.2 s against 0.19-0.48 s sequentially while the
// machine was loaded, each call waiting for a descheduled partner (docs/cpu-engine.md).
// Traffic: in and out once each (W, at most 128 KB, stays in cache); 2 n N K FLOP. The bias is a
// separate pass over out (out is still in L2/L3 for the token counts of one tile row).
// beta_out = 1 lets a caller accumulate into out: residual adds (fc2, proj) and the skip
// concat [up, skip] x W^T = up x W[:, :C]^T + skip x W[:, C:]^T without building the concat.
#include "ops.h"
#include "../common/parallel.h"

#include <cblas.h>

namespace denoise {
namespace cpu {

void sgemm_rows(bool transB, int64_t M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc) {
    if (M <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans, (int)M, N, K, 1.0f, A, lda, B, ldb,
                beta, C, ldc);
}

void linear(const float *in, int64_t n, int K, int lda, const float *W, int ldw, const float *b, int N,
            float *out, float beta_out) {
    if (n <= 0) return;
    sgemm_rows(true, n, N, K, in, lda, W, ldw, beta_out, out, N);
    if (!b) return;
    parallel_for(n, grain_for(n), [&](int64_t t0_, int64_t t1_) {
    for (int64_t t = (int64_t)t0_; t < (int64_t)t1_; ++t) {
        float *y = out + t * N;
        for (int j = 0; j < N; ++j) y[j] += b[j];
    }
    });
}

}  // namespace cpu
}  // namespace denoise
