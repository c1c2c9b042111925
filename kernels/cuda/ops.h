// CUDA operators of model v1 (weights/denoise_train/model.py), correct-first version: cuBLASLt for every
// matrix product, one simple kernel per remaining op; the frame conversions between native
// frames and the network (frame_in, frame_out); model v2's alignment (block_match, shift_tiles).
// Fused per-layer kernels are checked against these.
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

#include "../backend.h"

// Return a non-zero status (the layer's DENOISE_* code) to the caller.
#define TRY(x)                  \
    do {                        \
        int rc_ = (x);          \
        if (rc_) return rc_;    \
    } while (0)

namespace denoise {
namespace cuda {
struct TileShift;  // tile_shift.h: the shifts a consumer applies to one of its inputs as it reads it
}
namespace cuda {

using bf16 = __nv_bfloat16;

// One per engine: its stream, the cuBLASLt handle and workspace, the last error, and the
// account of every device allocation the engine makes (the cap is StreamSpec.gpu_memory).
struct Ctx {
    int device = 0;
    cudaStream_t stream = nullptr;  // the compute stream (non-blocking, owned)
    cublasLtHandle_t lt = nullptr;
    void *lt_ws = nullptr;
    size_t lt_ws_bytes = 0;
    std::string err;
    std::map<std::string, cublasLtMatmulAlgo_t> algos;  // linear.cu's heuristic cache
    bool no_bias_epilogue = false;                      // tests: force the bias-kernel path
    int64_t cap = INT64_MAX;                            // bytes dev_alloc may hold at once
    int64_t used = 0, peak = 0;                         // bytes held now / at most so far
    std::map<void *, size_t> live;                      // dev_alloc'd blocks and their sizes
    struct SmemKernel {
        size_t attr = 0;                   // the MaxDynamicSharedMemorySize set on the function
        std::map<size_t, int> per_sm;      // CTAs per SM, by dynamic shared memory bytes
    };
    std::map<const void *, SmemKernel> smem_kernels;    // smem_kernel's cache, by kernel function
    int sms = 0;                                        // the device's SM count (smem_kernel)
};

constexpr size_t kLtWorkspaceBytes = (size_t)16 << 20;

// context.cu: create: with set_device, cudaSetDevice(device) first; without, the context current
// on the calling thread is used as it is (memory CUDA: the caller's context) and ctx.device is
// its device. Then a non-blocking stream, the cuBLASLt handle and a workspace of lt_ws_bytes
// (counted against ctx.cap, which must be set before). destroy: synchronises the stream, frees
// every block still allocated, destroys the handle and the stream.
int ctx_create(Ctx &ctx, int device, bool set_device, size_t lt_ws_bytes = kLtWorkspaceBytes);
void ctx_destroy(Ctx &ctx);

// Helpers that set ctx.err. `what` names the call site.
int fail(Ctx &ctx, int code, const std::string &msg);
int cuda_check(Ctx &ctx, cudaError_t e, const char *what);       // 0, ENOMEM (allocation) or EDEVICE
int cublas_check(Ctx &ctx, cublasStatus_t s, const char *what);  // 0, ENOMEM (allocation) or EDEVICE
int launch_check(Ctx &ctx, const char *kernel);                  // cudaGetLastError after a launch

// Before launching kernel `fn` (`name` in messages) with `threads` threads and `smem` bytes of
// dynamic shared memory: checks the bytes against the device's opt-in limit per block, raises the
// function's MaxDynamicSharedMemorySize to them, and gives the CTAs of that size that fit on one
// SM (*per_sm) and the device's SM count (*sms) for persistent grids (either may be null). The
// queries run once per (function, bytes) and this Ctx keeps them: an engine's calls all run in
// its one CUDA context (ctx_create), where the attribute, once set, holds. DENOISE_EINVAL when the
// bytes exceed the limit or no CTA fits on an SM (the message names the kernel and both sizes),
// DENOISE_EDEVICE for a CUDA error.
int smem_kernel(Ctx &ctx, const void *fn, const char *name, int threads, size_t smem, int *per_sm = nullptr,
                int *sms = nullptr);

// Device allocation through ctx: DENOISE_ENOMEM when ctx.used + bytes would exceed ctx.cap or when
// cudaMalloc reports cudaErrorMemoryAllocation, with a message naming `what`, the size, the bytes
// in use and the cap; DENOISE_EDEVICE for any other CUDA error. dev_free(nullptr) is a no-op.
int dev_alloc(Ctx &ctx, void **p, size_t bytes, const char *what);
void dev_free(Ctx &ctx, void *p);

// A native frame in device memory: row y of plane p starts at data[p] + y * pitch[p] (bytes,
// positive). Which bytes hold what is the DenoisePixelFormat's business (denoise.h).
struct DevFrame {
    uint8_t *data[4] = {nullptr, nullptr, nullptr, nullptr};
    int64_t pitch[4] = {0, 0, 0, 0};
};

// ---- frame_in.cu: a native frame (fmt, W x H; chroma planes -((-W) >> log2_chroma_w) x ...) ->
// the network input x = 2 R'G'B' - 1 of the domain rows [oy, oy + hd), columns [ox, ox + wd) of
// the padded frame (model.py's reflect_index maps padded rows/columns >= H/W into the frame),
// space-to-depth 2x2: out (hd/2, wd/2, 12) bf16, channel c*4 + dy*2 + dx. The pixel work is
// denoise.h's "in" rule with col's matrix (common/frame_color.cpp). oy, ox, hd, wd even.
// luma (may be null; out may be null when it is not): also (hd, wd) fp32, pixel (y, x) of the
// domain L = ((x_R + x_G) + x_B) / 3 of the fp32 x before its bf16 rounding, the luma the CPU's
// block_match forms (model option align). out and luma 8-byte aligned.
int frame_in(Ctx &ctx, const DevFrame &src, const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H,
             int oy, int ox, int hd, int wd, bf16 *out, float *luma = nullptr);

// ---- frame_out.cu: the change (hd/2, wd/2, 12) fp32 in R'G'B' units ([0,1] scale, s2d like the
// input) of the domain at (oy, ox) -> output samples of the interior: pixels [ix0, ix1) x
// [iy0, iy1) of the frame (clipped to W x H) and the chroma samples k whose luma position
// k << log2_chroma falls inside, written into dst (same format and layout as orig, whose samples
// the change is added to): denoise.h's "out" rule (inverse matrix, chroma adjoint as a gather per
// chroma sample, amounts, blue-noise dither noise (64 x 64 floats on the device), clip).
// Only colour component words are written. The domain must hold every pixel the chroma gather
// reads: 3 << log2_chroma pixels beyond the interior on each side (or the frame edge).
int frame_out(Ctx &ctx, const float *change, int oy, int ox, int hd, int wd, const DevFrame &orig, const DevFrame &dst,
              const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H, int iy0, int iy1, int ix0, int ix1,
              Amount amount, const float *noise);
// frame_out.cu: copy the colour components of every sample from src to dst (both device frames of
// the same format and size), components in the planes of plane_mask (bit p = plane p) only. With
// whole_words false each sample's depth bits at its shift are replaced and every other bit of dst
// is kept (alpha, padding bytes, the low bits of p010-style words), as the CPU backend's write
// does; with whole_words true each word holding a sample is copied whole (its other bits from
// src), and only bytes that hold no sample (alpha plane, padding bytes) are kept. The kernels run
// on `stream` (ctx.stream, or memory CUDA's output copy stream).
int frame_copy_components(Ctx &ctx, const DevFrame &src, const DevFrame &dst, const DenoisePixelFormat &fmt, int W,
                          int H, unsigned plane_mask, bool whole_words, cudaStream_t stream);

// ---- conv3x3.cu: the input fusion conv, zero padding 1, on the virtual 61-channel map
// [frames[0] (12) | ... | frames[n-1] (12) | sigma/255 (1)] without building it: frames are
// (h, w, 12) bf16, wk (9, Cin, Cout) bf16 (tap-major, conv3x3_pack's layout), bias fp32,
// out (h, w, Cout) fp32. Cin = 12 n + 1. fusion_conv3x3 runs conv3x3_tc.cu's tensor-core implicit
// GEMM when it takes (n, Cout) on the device, else the direct form. fusion_conv3x3_direct: CUDA
// cores, Cout a multiple of 32 up to 256, n <= 8. fusion_conv3x3_tc: n 1..8, Cout 16..64 in steps of 16, and
// fusion_conv3x3_tc_smem(n, Cout) bytes of shared memory per block (0: a shape it refuses) within
// the device's opt-in limit; DENOISE_EINVAL with a message otherwise.
// shifts (model v2's alignment; null: none): per frame a TileShift (tile_shift.h); frame k with a
// map is read moved by its tiles' full-resolution shifts, reads clamped to the h x w map (the
// values shift_tiles_s2d would write, bit for bit), so the fusion window's frames are never copied
// moved. The maps of one call share their tile and stride; 8-byte aligned.
int fusion_conv3x3(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w,
                   const bf16 *wk, const float *bias, int Cout, float *out, const TileShift *shifts = nullptr);
int fusion_conv3x3_direct(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w,
                          const bf16 *wk, const float *bias, int Cout, float *out, const TileShift *shifts = nullptr);
int fusion_conv3x3_tc(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w,
                      const bf16 *wk, const float *bias, int Cout, float *out, const TileShift *shifts = nullptr);
size_t fusion_conv3x3_tc_smem(int nframes, int Cout);


// ---- layernorm.cu: per token LN over C (biased variance, eps), fp32 in, bf16 out.
// layernorm_rows: n tokens in place order. layernorm_window: the map (H, W, C) read through the
// cyclic shift and written in window order (token (i, j) of window (wy, wx) is map token
// ((wy ws + i + shift) % H, (wx ws + j + shift) % W)): the roll is index math, no copy.
// One warp per token; C <= 1024.
int layernorm_rows(Ctx &ctx, const float *x, int64_t n, int C, const float *g, const float *b, float eps, bf16 *out);
// layernorm_window covers windows [win0, win1) of the map, written from out's start.
int layernorm_window(Ctx &ctx, const float *x, int H, int W, int C, int ws, int shift, int win0, int win1,
                     const float *g, const float *b, float eps, bf16 *out);

// ---- linear.cu (cuBLASLt): out[n, N] = beta * out + in[n, K] (row stride lda) x W^T + bias, W
// (N, K) row-major bf16 (PyTorch layout, row stride K). in bf16; out bf16 or fp32 (out_f32), row
// stride ldo; bias (N floats or bf16, the dtype of out; may be null) through cuBLASLt's BIAS
// epilogue where the heuristic offers one, else a bias kernel after the GEMM. fp32 compute.
// beta != 0 needs out_f32 (accumulating a residual in bf16 would round it every layer).
int linear(Ctx &ctx, const bf16 *in, int64_t n, int K, int lda, const bf16 *W, const void *bias, int N, void *out,
           bool out_f32, int ldo, float beta);

// ---- gelu.cu: out = GELU_tanh(x + bias) on rows x C, x fp32 (fc1's output), out bf16 (not
// aliasing x; bias fp32 per channel, may be null), fp32 math, one rounding on the store.
int gelu_tanh(Ctx &ctx, const float *x, int64_t rows, int C, const float *bias, bf16 *out);

// ---- window_attention.cu: Swin W-MSA core on qkv (n, 3C) bf16 in window order ([q | k | v],
// head h at channels h*32..h*32+31 of each part); qkv_bias (3C fp32, may be null: already added);
// rel_bias (heads, N, N) fp32 (gathered table); shift > 0: Swin's region mask in the rolled map.
// out (n, C) bf16 in window order. Windows [win0, win1) of the map; qkv and out hold them from
// their start. Window ws = 8 (N = 64), head dim 32 only.
int window_attention(Ctx &ctx, const bf16 *qkv, const float *qkv_bias, int H, int W, int C, int heads, int ws,
                     int shift, int win0, int win1, const float *rel_bias, bf16 *out);

// ---- residual.cu: x (H, W, C) fp32 += win (window order, fp32) (+ bias fp32, may be null), the
// inverse of layernorm_window's gather (roll by +shift folded into the index), windows [win0,
// win1) held from win's start; cast fp32 -> bf16.
int window_scatter_add(Ctx &ctx, const float *win, const float *bias, int H, int W, int C, int ws, int shift, int win0,
                       int win1, float *x);
int cast_to_bf16(Ctx &ctx, const float *in, int64_t n, bf16 *out);
// out[i] = a[i] + b[i] (fp32), n elements (a or b may alias out).
int add_f32(Ctx &ctx, const float *a, const float *b, int64_t n, float *out);

// ---- patch.cu: patch merge front half: s2d 2x2 of x (H, W, C) fp32 -> LN over 4C -> (H/2, W/2,
// 4C) bf16 (then linear 4C -> C', no bias). d2s_concat: the expand's second half and the skip
// concat: out (2h, 2w, C4/4 + 2 Cs) bf16 = [d2s(up (h, w, C4) bf16) | skip_hi | skip_lo], the skip
// map (2h, 2w, Cs) fp32 as two bf16 parts (hi = bf16(s), lo = bf16(s - hi)).
int merge_s2d_layernorm(Ctx &ctx, const float *x, int H, int W, int C, const float *g, const float *b, float eps,
                        bf16 *out);
int d2s_concat(Ctx &ctx, const bf16 *up, int h, int w, int C4, const float *skip, int Cs, bf16 *out);

// ---- patch_tc.cu: the fused patch merge and patch expand on tensor cores (one launch each, fp32
// maps in and out; weights packed by patch_tc.h). patch_merge_tc: out (H/2, W/2, Co) fp32 =
// LN(s2d(x)) W^T for x (H, W, C) fp32, wp = pack_merge(W (Co, 4C)), g / b its gamma / beta in the
// packed order. patch_expand_tc: out (2h, 2w, Co) fp32 = [d2s(lo We^T + be) | skip] Ws^T + bs for
// lo (h, w, C) fp32, skip (2h, 2w, Cs) fp32 (out may be skip), we / be / ws = pack_expand(...),
// bs (Co) fp32 (the skip map enters the skip GEMM as two bf16 parts, patch_tc.cu). *_refusal: ""
// where the kernel is built for the shape, else why not; *_smem: dynamic shared memory bytes.
std::string patch_merge_tc_refusal(int C, int Co);
std::string patch_expand_tc_refusal(int C, int C2, int Cs, int Co);
size_t patch_merge_tc_smem(int C);
size_t patch_expand_tc_smem(int C, int C2, int Cs);
int patch_merge_tc(Ctx &ctx, const float *x, int H, int W, int C, const bf16 *wp, const float *g, const float *b, int Co,
                   float eps, float *out);
int patch_expand_tc(Ctx &ctx, const float *lo, int h, int w, int C, const bf16 *we, const float *be, int C2,
                    const float *skip, int Cs, const bf16 *ws, const float *bs, int Co, float *out);

// ---- head.cu: the stencil pass of the head on rows [r0, r1) of an h x w map. G holds the
// temporal GEMM's output for map rows g0.. (at least max(0, r0-1) .. min(h, r1+1) - 1), (w, Gc)
// fp32 per row, channel (ky*3 + kx)*Cout + o = spatial tap (ky, kx) of output o (Gc >= 9 Cout);
// o = clamp(bias + r + sum of the 9 shifted taps (zero outside the map), min(-1, r), max(1, r)), r the
// residual (h, w, Cout) bf16 (the s2d centre frame; weights/denoise_train/model.py output_clamp); out (h, w, Cout)
// fp32 receives o, or with as_change the change 0.5 (o - residual) (R'G'B' units). Cout <= 16.
int head_stencil(Ctx &ctx, const float *G, int Gc, int g0, int h, int w, int r0, int r1, const float *bias, int Cout,
                 const bf16 *residual, float *out, bool as_change);

// ---- head_tc.cu: the whole head (conv3d 3x3x3 of F[0..2] = F_{t-1}, F_t, F_{t+1}, each (h, w, Cin)
// bf16 16-byte aligned, Cin 32 or 64, spatial zero padding; + bias (Cout fp32) + residual (h, w,
// Cout) bf16, clamped to [min(-1, r), max(1, r)]; out (h, w, Cout) fp32, or with as_change 0.5 (o
// - r)) in one tensor-core kernel on the whole map; the same value as the three GEMMs +
// head_stencil up to fp32 summation order. wk: (9, 16, 3 Cin) bf16 from head_conv3d_tc_pack
// (PyTorch's head.weight (Cout, Cin, 3, 3, 3) fp32; false for Cin other than 32 or 64 or Cout
// outside 1..16). head_conv3d_tc_smem: its shared memory per block (0: a Cin it is not built
// for). head_conv3d_tc_supported: 0 when the kernel is built for Cin and the device's shared
// memory per block takes it, DENOISE_EINVAL with the reason in *why (may be null) otherwise,
// DENOISE_EDEVICE when the device cannot be queried. head_conv3d_tc: 0, DENOISE_EINVAL (bad
// shape / pointer / device, with a message), EDEVICE.
// shifts (model v2's alignment; null: none): per time tap a TileShift (tile_shift.h); F[dt] with a
// map is read moved by its tiles' full-resolution shifts halved with floor, reads clamped to the
// h x w map (the values shift_tiles(..., halve) would write, bit for bit), so F_{t-1} and F_{t+1}
// are never copied moved. The maps share their tile and stride; 8-byte aligned.
int head_conv3d_tc(Ctx &ctx, const bf16 *const F[3], int h, int w, int Cin, const bf16 *wk, const float *bias, int Cout,
                   const bf16 *residual, float *out, bool as_change, const TileShift *shifts = nullptr);
bool head_conv3d_tc_pack(const float *w_oitkk, int Cout, int Cin, uint16_t *wk);
size_t head_conv3d_tc_smem(int Cin);
// Work of the head on `tokens` tokens of Cin feature channels for the roofline: FLOP issued on
// tensor cores by head_conv3d_tc (N padded to 16), FLOP of the conv itself (2 x 27 x Cin x Cout per
// token), and the least DRAM bytes each form moves (three feature maps + residual read, output
// written; the two-pass form also writes and reads G, (9 Cout rounded up to 16) fp32 per token).
inline double head_conv3d_tc_flop(int64_t tokens, int Cin) { return 2.0 * 9 * 3 * Cin * 16 * (double)tokens; }
inline double head_conv3d_flop(int64_t tokens, int Cout, int Cin) { return 2.0 * 27 * Cin * Cout * (double)tokens; }
inline double head_conv3d_tc_bytes(int64_t tokens, int Cout, int Cin) {
    return (3.0 * 2 * Cin + 6.0 * Cout) * (double)tokens;
}
inline double head_two_pass_bytes(int64_t tokens, int Cout, int Cin) {
    return head_conv3d_tc_bytes(tokens, Cout, Cin) + 2.0 * 4 * ((9 * Cout + 15) / 16 * 16) * (double)tokens;
}
int head_conv3d_tc_supported(int device, int Cin, std::string *why);

// ---- block_match.cu: per-tile whole-pixel motion of frames against a centre frame (model option
// align's estimation; kernels/cpu/block_match.cpp, weights/denoise_train/align.py tile_shifts), same shifts as
// the CPU's on every tile, ties included.
// A luma pyramid of an H x W frame (H, W multiples of 4) is luma_pyramid_floats(H, W) fp32: L
// (H, W) (frame_in's luma plane), then L1 (H/2, W/2) and L2 (H/4, W/4), the 2x2 and 4x4 box means
// of L. luma_pyramid: L1 and L2 from L, in place.
// block_match: for each of `pairs` pyramids others[k], shifts[k] (H / tile, W / tile, 2) int32
// (dy, dx) per tile of the centre frame, in full-resolution pixels, |dy|, |dx| <= radius (0..64):
// centre(p) ~ others[k](p + s); tile a multiple of 4 dividing H and W. All pairs in one launch (up
// to 8; more in launches of 8), each pair's shifts those of the pair alone. pairs 0: nothing.
// Both: 0 or DENOISE_EINVAL (shape, pointer) / DENOISE_EDEVICE.
size_t luma_pyramid_floats(int H, int W);
int luma_pyramid(Ctx &ctx, float *pyr, int H, int W);
int block_match(Ctx &ctx, const float *centre, const float *const *others, int32_t *const *shifts, int pairs, int H,
                int W, int radius, int tile);

// ---- shift_tiles.cu: per-tile whole-pixel warps (align's moving half; kernels/cpu/
// shift_tiles.cpp, weights/denoise_train/align.py shift_tiles): out(p) = in(clamp(p + s)), s the shift of the
// tile holding p, reads clamped to the domain's edge; bf16 copies, the CPU's values bit for bit.
// The shift map is (rows, stride, 2) int32 (dy, dx); `shifts` points at the domain's first tile.
// shift_tiles_s2d: the full-resolution 2 h2 x 2 w2 frame behind the s2d input in (h2, w2, 12)
// (pixel (Y, X) of colour c at token (Y/2, X/2), channel c*4 + (Y&1)*2 + (X&1)), tiles of tile px
// (even, dividing 2 h2 and 2 w2), shifts in full-resolution pixels; out (h2, w2, 12), 8-byte
// aligned, not aliasing in.
// shift_tiles: an NHWC map (h, w, C) bf16, C a multiple of 8, 16-byte aligned, tiles of tile
// samples dividing h and w, shifts in samples of the map, or with halve full-resolution pixels
// halved with floor (the head's feature maps); out (h, w, C), not aliasing in.
// Both: 0 or DENOISE_EINVAL (shape, pointer, alignment) / DENOISE_EDEVICE.
int shift_tiles_s2d(Ctx &ctx, const bf16 *in, int h2, int w2, const int32_t *shifts, int stride, int tile, bf16 *out);
int shift_tiles(Ctx &ctx, const bf16 *in, int h, int w, int C, const int32_t *shifts, int stride, int tile, bool halve,
                bf16 *out);
// The consumers' side (fusion_conv3x3, head_conv3d_tc read through TileShift, no copy): the maps
// of shifts[0..n) into map[0..n) (null where none; shifts null: none), their common stride and
// tile; DENOISE_EINVAL with a message for a misaligned map, a stride narrower than the w-token
// map, or maps of different tiles or strides in one call.
int tile_shifts_check(Ctx &ctx, const TileShift *shifts, int n, int w, const int32_t **map, int *stride, int *tile);

// Small helpers for tests: fill n floats / bf16 with a NaN pattern (0xFF bytes).
int poison(Ctx &ctx, void *p, size_t bytes);

}  // namespace cuda
}  // namespace denoise

#endif
