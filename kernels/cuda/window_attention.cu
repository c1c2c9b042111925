// Swin (shifted) window multi-head self-attention core, one thread block per (8x8 window, head).
//
// Math (model.py WindowAttention): per window and head h, with q, k, v (64 x 32) from the qkv map
// (+ the qkv bias when given): S = (q * 32^-0.5) k^T + B_h + mask, P = softmax_row(S), O = P v.
// B_h (64 x 64) is the relative position bias already gathered from the 15x15 table at load
// time. Shifted blocks (shift > 0): the input is in window order of the map rolled by -shift
// (layernorm_window did that with index math), and keys of another Swin region get -inf: region
// of rolled row p is 0 for p < H - ws, 1 for p < H - shift, else 2 (same for columns), so only
// windows in the last window row/column mix regions. A row always keeps its own key, so the
// softmax is finite.
// Layout: qkv (n, 3C) bf16 in window order, [q | k | v], head h at channels h*32..h*32+31 of
// each; out (n, C) bf16 in window order (the proj GEMM reads it as is); both hold windows
// [win0, win1) of the map from their start (the block's attention half runs in chunks).
// Shared memory: q, k (64 x 33 fp32, padded: conflict-free column access), v (64 x 32), S (64 x 65)
// = 41.7 KB; 256 threads: 16 scores, then 8 softmax rows per warp, then 8 outputs per thread.
// Values: fp32 throughout (expf, fp32 sums); one bf16 rounding on the store.
// Cost per token and head: 2 x 64 x 32 MAC (scores) + the same for P v = 8192 FLOP;
// traffic per token: 6C B read (q, k, v bf16), 2C B written, the bias table from L2.
#include "common.cuh"

#include <cmath>

namespace denoise {
namespace cuda {

namespace {

constexpr int kWs = 8, kN = 64, kHd = 32;

__device__ __forceinline__ int region_of(int p, int n, int ws, int s) { return p < n - ws ? 0 : (p < n - s ? 1 : 2); }

__global__ void __launch_bounds__(256) window_attention_kernel(const bf16 *__restrict__ qkv,
                                                               const float *__restrict__ qkv_bias, int H, int W, int C,
                                                               int shift, int win0, const float *__restrict__ rel_bias,
                                                               bf16 *__restrict__ out) {
    __shared__ float q[kN][kHd + 1], k[kN][kHd + 1], v[kN][kHd], S[kN][kN + 1];
    __shared__ int rid[kN];
    const int wi = win0 + (int)blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    const int nwx = W / kWs, wy = wi / nwx, wx = wi % nwx;
    const float scale = rsqrtf((float)kHd);
    const size_t row0 = (size_t)blockIdx.x * kN;
    for (int e = tid; e < kN * kHd; e += blockDim.x) {
        const int r = e / kHd, d = e % kHd;
        const bf16 *p = qkv + (row0 + r) * 3 * C + h * kHd + d;
        float qv = __bfloat162float(p[0]), kv = __bfloat162float(p[C]), vv = __bfloat162float(p[2 * C]);
        if (qkv_bias) {
            qv += qkv_bias[h * kHd + d];
            kv += qkv_bias[C + h * kHd + d];
            vv += qkv_bias[2 * C + h * kHd + d];
        }
        q[r][d] = qv * scale;
        k[r][d] = kv;
        v[r][d] = vv;
    }
    if (tid < kN) {
        const int py = wy * kWs + tid / kWs, px = wx * kWs + tid % kWs;
        rid[tid] = shift > 0 ? region_of(py, H, kWs, shift) * 3 + region_of(px, W, kWs, shift) : 0;
    }
    __syncthreads();
    const float *B = rel_bias + (size_t)h * kN * kN;
    for (int e = tid; e < kN * kN; e += blockDim.x) {
        const int i = e / kN, j = e % kN;
        float s = 0.f;
#pragma unroll
        for (int d = 0; d < kHd; ++d) s = fmaf(q[i][d], k[j][d], s);
        s += B[e];
        if (rid[i] != rid[j]) s = -INFINITY;
        S[i][j] = s;
    }
    __syncthreads();
    const int warp = tid >> 5, lane = tid & 31;
    for (int i = warp; i < kN; i += blockDim.x >> 5) {
        const float a = S[i][lane], b = S[i][lane + 32];
        const float m = warp_max(fmaxf(a, b));
        const float ea = expf(a - m), eb = expf(b - m);
        const float inv = 1.f / warp_sum(ea + eb);
        S[i][lane] = ea * inv;
        S[i][lane + 32] = eb * inv;
    }
    __syncthreads();
    for (int e = tid; e < kN * kHd; e += blockDim.x) {
        const int i = e / kHd, d = e % kHd;
        float o = 0.f;
#pragma unroll 16
        for (int j = 0; j < kN; ++j) o = fmaf(S[i][j], v[j][d], o);
        out[(row0 + i) * C + h * kHd + d] = __float2bfloat16_rn(o);
    }
}

}  // namespace

int window_attention(Ctx &ctx, const bf16 *qkv, const float *qkv_bias, int H, int W, int C, int heads, int ws,
                     int shift, int win0, int win1, const float *rel_bias, bf16 *out) {
    DN_REQUIRE(qkv && rel_bias && out, "null pointer");
    DN_REQUIRE(ws == kWs, "window " + std::to_string(ws) + " (this kernel is built for 8)");
    DN_REQUIRE(heads >= 1 && C == heads * kHd,
               "C " + std::to_string(C) + " != heads " + std::to_string(heads) + " x head dim 32");
    DN_REQUIRE(H >= ws && W >= ws && H % ws == 0 && W % ws == 0,
               "map " + std::to_string(W) + "x" + std::to_string(H) + " does not tile into 8x8 windows");
    DN_REQUIRE(shift >= 0 && shift < ws, "shift " + std::to_string(shift) + " outside [0, 8)");
    DN_REQUIRE(heads <= 65535, "too many heads");
    const int64_t nwin = (int64_t)(H / ws) * (W / ws);
    DN_REQUIRE(nwin <= 0x7fffffffLL, "too many windows");
    DN_REQUIRE(win0 >= 0 && win0 < win1 && win1 <= nwin, "windows [" + std::to_string(win0) + ", " +
                                                             std::to_string(win1) + ") outside [0, " +
                                                             std::to_string(nwin) + ")");
    window_attention_kernel<<<dim3((unsigned)(win1 - win0), heads), 256, 0, ctx.stream>>>(qkv, qkv_bias, H, W, C,
                                                                                          shift, win0, rel_bias, out);
    return launch_check(ctx, "window_attention_kernel");
}

}  // namespace cuda
}  // namespace denoise
