// CUDA operators of model v1 (weights/model.py), correct-first version (issue 4 step 1): cuBLASLt
// for every matrix product, one simple kernel per remaining op. The fused per-layer kernels come
// later and are checked against these.
//
// Conventions (same as kernels/cpu/ops.h unless stated):
//  - maps are NHWC, token-major: element (y, x, c) of an h x w x C map at (y * w + x) * C + c;
//    "window order" puts the ws*ws tokens of each window together, windows row-major over the
//    (cyclically shifted) map, tokens row-major inside a window.
//  - storage: every GEMM operand and intermediate is bf16 (`bf16` below); the residual stream of
//    a stage (x0, x1, x2 and the decoder maps) and the head's G and output are fp32; accumulation
//    is always fp32. Weights are bf16 for the GEMMs and the fusion conv; LayerNorm parameters,
//    biases and the gathered relative position bias are fp32.
//  - every op checks its shapes and pointers before the launch and refuses with DENOISE_EINVAL
//    and a message in ctx.err rather than read or write out of bounds; a CUDA or cuBLAS failure
//    gives DENOISE_EDEVICE (DENOISE_ENOMEM for an allocation) with the runtime's error string.
//  - all work is queued on ctx.stream; nothing synchronises except where stated.
// Host-only header: includable from g++ (tests, tools) with -I$CUDA_HOME/include.
#ifndef DENOISE_CUDA_OPS_H
#define DENOISE_CUDA_OPS_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace denoise {
namespace cuda {

using bf16 = __nv_bfloat16;

// One per engine: its stream, the cuBLASLt handle and workspace, the last error.
struct Ctx {
    int device = 0;
    cudaStream_t stream = nullptr;
    cublasLtHandle_t lt = nullptr;
    void *lt_ws = nullptr;
    size_t lt_ws_bytes = 0;
    std::string err;
    std::map<std::string, cublasLtMatmulAlgo_t> algos;  // linear.cu's heuristic cache
    bool no_bias_epilogue = false;                      // tests: force the bias-kernel path
};

// context.cu: create (cudaSetDevice, stream, cuBLASLt handle, 32 MiB workspace) / destroy.
int ctx_create(Ctx &ctx, int device);
void ctx_destroy(Ctx &ctx);

// Helpers that set ctx.err. `what` names the call site.
int fail(Ctx &ctx, int code, const std::string &msg);
int cuda_check(Ctx &ctx, cudaError_t e, const char *what);       // 0 or EDEVICE/ENOMEM
int cublas_check(Ctx &ctx, cublasStatus_t s, const char *what);  // 0 or EDEVICE/ENOMEM
int launch_check(Ctx &ctx, const char *kernel);                  // cudaGetLastError after a launch

// Device allocation through ctx (cudaMalloc; ENOMEM with the size and the CUDA message).
int dev_alloc(Ctx &ctx, void **p, size_t bytes, const char *what);

// ---- convert_in.cu: host RGB planes in [0,1] (already on the device as three fp32 planes of
// H x W, row pitch W) -> x = 2v - 1, reflect-padded to hp x wp (model.py's reflect_index rule),
// space-to-depth 2x2 -> (hp/2, wp/2, 12) bf16, channel c*4 + dy*2 + dx.
int convert_in(Ctx &ctx, const float *planes, int H, int W, int hp, int wp, bf16 *out);

// ---- convert_out.cu: head output o (h2, w2, 12) fp32 and the s2d centre frame (h2, w2, 12) bf16
// -> delta = (o - centre) / 2 in [0,1] units, depth-to-space and cropped to H x W, written as three
// fp32 planes of H x W (row pitch W) on the device. H <= 2 h2, W <= 2 w2.
int convert_out(Ctx &ctx, const float *o, const bf16 *centre, int h2, int w2, int H, int W, float *delta);

// ---- conv3x3.cu: the input fusion conv, zero padding 1, on the virtual 61-channel map
// [frames[0] (12) | ... | frames[n-1] (12) | sigma/255 (1)] without building it: frames are
// (h, w, 12) bf16, wk (9, Cin, Cout) bf16 (tap-major, conv3x3_pack's layout), bias fp32,
// out (h, w, Cout) fp32. Cin = 12 n + 1; Cout must be 32; n <= 8.
int fusion_conv3x3(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w,
                   const bf16 *wk, const float *bias, int Cout, float *out);

// ---- layernorm.cu: per token LN over C (biased variance, eps), fp32 in, bf16 out.
// layernorm_rows: n tokens in place order. layernorm_window: the map (H, W, C) read through the
// cyclic shift and written in window order (token (i, j) of window (wy, wx) is map token
// ((wy ws + i + shift) % H, (wx ws + j + shift) % W)): the roll is index math, no copy.
// One warp per token; C <= 1024.
int layernorm_rows(Ctx &ctx, const float *x, int64_t n, int C, const float *g, const float *b, float eps, bf16 *out);
int layernorm_window(Ctx &ctx, const float *x, int H, int W, int C, int ws, int shift, const float *g, const float *b,
                     float eps, bf16 *out);

// ---- linear.cu (cuBLASLt): out[n, N] = beta * out + in[n, K] (row stride lda) x W^T + bias, W
// (N, K) row-major bf16 (PyTorch layout, row stride K). in bf16; out bf16 or fp32 (out_f32), row
// stride ldo; bias (N floats or bf16, the dtype of out; may be null) through cuBLASLt's BIAS
// epilogue where the heuristic offers one, else a bias kernel after the GEMM. fp32 compute.
// beta != 0 needs out_f32 (accumulating a residual in bf16 would round it every layer).
int linear(Ctx &ctx, const bf16 *in, int64_t n, int K, int lda, const bf16 *W, const void *bias, int N, void *out,
           bool out_f32, int ldo, float beta);

// ---- gelu.cu: x = GELU_tanh(x + bias) in place on rows x C bf16 (bias fp32 per channel, may be
// null), fp32 math, one rounding on the store.
int gelu_tanh(Ctx &ctx, bf16 *x, int64_t rows, int C, const float *bias);

// ---- window_attention.cu: Swin W-MSA core on qkv (n, 3C) bf16 in window order ([q | k | v],
// head h at channels h*32..h*32+31 of each part); qkv_bias (3C fp32, may be null: already added);
// rel_bias (heads, N, N) fp32 (gathered table); shift > 0: Swin's region mask in the rolled map.
// out (n, C) bf16 in window order. Window ws = 8 (N = 64), head dim 32 only.
int window_attention(Ctx &ctx, const bf16 *qkv, const float *qkv_bias, int H, int W, int C, int heads, int ws,
                     int shift, const float *rel_bias, bf16 *out);

// ---- residual.cu: x (H, W, C) fp32 += win (window order, bf16) (+ bias fp32, may be null), the
// inverse of layernorm_window's gather (roll by +shift folded into the index); cast fp32 -> bf16.
int window_scatter_add(Ctx &ctx, const bf16 *win, const float *bias, int H, int W, int C, int ws, int shift, float *x);
int cast_to_bf16(Ctx &ctx, const float *in, int64_t n, bf16 *out);
// out[i] = a[i] + b[i] (fp32), n elements (a or b may alias out).
int add_f32(Ctx &ctx, const float *a, const float *b, int64_t n, float *out);

// ---- patch.cu: patch merge front half: s2d 2x2 of x (H, W, C) fp32 -> LN over 4C -> (H/2, W/2,
// 4C) bf16 (then linear 4C -> 2C, no bias). d2s_concat: the expand's second half and the skip
// concat: out (2h, 2w, C4/4 + Cs) bf16 = [d2s(up (h, w, C4) bf16) | skip (2h, 2w, Cs) fp32].
int merge_s2d_layernorm(Ctx &ctx, const float *x, int H, int W, int C, const float *g, const float *b, float eps,
                        bf16 *out);
int d2s_concat(Ctx &ctx, const bf16 *up, int h, int w, int C4, const float *skip, int Cs, bf16 *out);

// ---- head.cu: the stencil pass of the head. G (h, w, Gc) fp32 holds the temporal GEMM's output,
// channel (ky*3 + kx)*Cout + o = spatial tap (ky, kx) of output o (Gc >= 9 Cout, padded);
// out (h, w, Cout) fp32 = clamp(bias + residual + sum of the 9 shifted taps (zero outside), -1, 1);
// residual (h, w, Cout) bf16 (the s2d centre frame). Cout <= 16.
int head_stencil(Ctx &ctx, const float *G, int Gc, int h, int w, const float *bias, int Cout, const bf16 *residual,
                 float *out);

// Small helpers for tests: fill n floats / bf16 with a NaN pattern (0xFF bytes).
int poison(Ctx &ctx, void *p, size_t bytes);

}  // namespace cuda
}  // namespace denoise

#endif
