// CPU reference operators of model v1 and of model v2's alignment (weights/denoise_train/model.py,
// weights/denoise_train/align.py). All tensors are fp32, NHWC (token-major: element (y, x, c) of an h x w x C
// map lives at (y * w + x) * C + c) unless stated otherwise. Each operator is in its own file with
// a note on its math and memory traffic. None allocates except where stated; callers pass
// workspaces. Loops run on the engine's pool (parallel.h); GEMMs are OpenBLAS.
#ifndef DENOISE_CPU_OPS_H
#define DENOISE_CPU_OPS_H

#include <cstddef>
#include <cstdint>

namespace denoise {
namespace cpu {

// layernorm.cpp: out[n, :] = (in[n, :] - mean) / sqrt(var + eps) * gamma + beta, per token,
// biased variance (PyTorch). in and out may alias. n tokens of C channels.
// `add` (C floats, may be null; in != out then): after token t is normalised, in[t, :] += add, which
// lets the Swin block put fc2's bias into the residual in the same pass (x is read here anyway and
// the fc2 GEMM then accumulates onto it).
void layernorm(const float *in, float *out, int64_t n, int C, const float *gamma, const float *beta, float eps,
               float *in_add_target = nullptr, const float *add = nullptr);

// layernorm.cpp: window_gather (below) and layernorm in one pass: win = LN(gathered map), for
// windows [win0, win1) only (win holds them from its start).
void window_gather_layernorm(const float *map, int H, int W, int C, int ws, int shift, int win0, int win1,
                             const float *gamma, const float *beta, float eps, float *win);

// linear.cpp: out[n, N] = beta_out * out + in[n, K] (row stride lda) x W^T + b, W in PyTorch layout
// (N, K) row-major with row stride ldw (usually K); b may be null. beta_out 0 overwrites, 1
// accumulates (used to add a residual or a second operand without a concat copy).
void linear(const float *in, int64_t n, int K, int lda, const float *W, int ldw, const float *b, int N,
            float *out, float beta_out);

// linear.cpp: C (M, N) = A (M, K) x op(B) + beta C, row-major, op(B) = B^T (B stored (N, K)) when
// transB, else B stored (K, N). One (OpenBLAS-threaded) sgemm.
void sgemm_rows(bool transB, int64_t M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc);

// gelu.cpp: v = x + bias (per channel; bias may be null), x = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
// in place on rows x C floats (the fc1 output: its bias is added here, not by linear()).
void gelu_tanh(float *x, int64_t rows, int C, const float *bias);

// space_to_depth.cpp: s2d (h, w, C) -> (h/2, w/2, 4C), out channel c*4 + dy*2 + dx; d2s the inverse
// (h, w, 4C) -> (2h, 2w, C). h, w even for s2d.
void s2d_nhwc(const float *in, int h, int w, int C, float *out);
void d2s_nhwc(const float *in, int h, int w, int C4, float *out);

// conv3x3.cpp: 3x3 convolution, zero padding 1, NHWC in (h, w, Cin) -> out (h, w, Cout) + bias.
// `wk` is the weight repacked by conv3x3_pack: 9 taps of (Cin, Cout) row-major.
// `work` needs conv3x3_work_floats(h, w, Cin, Cout) floats.
void conv3x3_pack(const float *w_oihw, int Cout, int Cin, float *wk);
size_t conv3x3_work_floats(int h, int w, int Cin, int Cout);
void conv3x3(const float *in, int h, int w, int Cin, const float *wk, const float *bias, int Cout, float *out,
             float *work);

// window_attention.cpp: Swin's (shifted) window multi-head self-attention core on an already
// projected qkv map, in window order. qkv: (nwin * ws*ws, 3C) with [q | k | v], head h at channels
// h*hd..h*hd+hd-1 of each part, windows in row-major order over the (shifted) map of
// (h/ws) x (w/ws) windows, tokens row-major inside a window. bias: (heads, N, N), N = ws*ws, the
// relative position bias already gathered from the table. shift > 0 applies Swin's region mask
// (regions of the rolled map: [0, H-ws), [H-ws, H-s), [H-s, H) per axis). out: (nwin*N, C).
// qkv_bias (3C, required): the qkv linear's bias, added here as q, k, v are read (v's bias is
// added to the output: the softmax rows sum to 1).
// Windows [win0, win1) of the map only; qkv and out hold those windows from their start.
void window_attention(const float *qkv, const float *qkv_bias, int H, int W, int C, int heads, int ws, int shift,
                      int win0, int win1, const float *bias, float *out);

// window_attention.cpp: gather the map (H, W, C) into window order with a cyclic roll by -shift
// (token (y, x) of the rolled map is token ((y+shift) % H, (x+shift) % W) of the map), and the
// inverse scatter that adds the windowed result (+ bias, C floats, may be null) back onto the map
// (roll by +shift, residual add).
void window_gather(const float *map, int H, int W, int C, int ws, int shift, float *win);
// window_scatter_add: windows [win0, win1) only, win holding them from its start.
void window_scatter_add(const float *win, const float *bias, int H, int W, int C, int ws, int shift, int win0, int win1,
                        float *map);

// head.cpp: conv3d 3x3x3 (time taps t-1, t, t+1, spatial zero padding) as a temporal GEMM to
// 9 x Cout channels followed by a 9-tap stencil, + bias + residual r, clamped to [min(-1, r),
// max(1, r)] (weights/denoise_train/model.py output_clamp).
// F[3]: the three feature maps (h, w, Cin); wt: head_pack output; residual and out (h, w, Cout);
// work: head_work_floats(h, w, Cout) floats.
void head_pack(const float *w_oitkk, int Cout, int Cin, float *wt);  // -> 3 x (Cin, 9*Cout)
size_t head_work_floats(int h, int w, int Cout);
void head_conv3d(const float *const F[3], int h, int w, int Cin, const float *wt, const float *bias, int Cout,
                 const float *residual, float *out, float *work);

// block_match.cpp: per-tile whole-pixel motion of `other` against `centre` (model option
// `align`'s estimation; the formula is weights/denoise_train/align.py's tile_shifts, hierarchical block matching
// after Bierling, SPIE VCIP 1988). Inputs: the CPU engine's network input of each frame, NHWC
// space-to-depth (h2, w2, 12) floats in [-1, 1] (x = 2 R'G'B' - 1 of the padded H x W = 2 h2 x
// 2 w2 frame), channel c*4 + dy*2 + dx for colour c (R', G', B') of pixel (2 y + dy, 2 x + dx).
// Luma L = (R' + G' + B') / 3 per full-resolution pixel. Per tile x tile block of the centre
// frame (H / tile rows of W / tile tiles), the shift s = (dy, dx), |dy|, |dx| <= radius, in
// full-resolution pixels, minimising the mean over the block of |Lc(p) - Lo(clamp(p + s))| (reads
// clamped to the frame's edge), searched coarse to fine: +-ceil(radius / 4) on 4x4 box means,
// +-1 on 2x2 means around twice that, +-1 at full resolution around twice that, then clamped to
// [-radius, radius]. Candidates nearest-first ((|dy| + |dx|), then dy, then dx); a later one
// must be strictly better (a flat tile keeps 0).
// shifts: (H / tile, W / tile, 2) int32, (dy, dx) per tile, row-major: centre(p) ~ other(p + s).
// work: block_match_work_floats(h2, w2) floats (luma and box means of both frames).
// Returns 0, or DENOISE_EINVAL (nothing written) for a null pointer, h2 or w2 <= 0, radius < 0,
// tile <= 0 or not a multiple of 4, or H or W not a multiple of tile.
// Guarantee: every cost is computed in fp32 exactly as align.py computes it with PyTorch's CPU
// kernels (same summation order), so the shifts equal align.py's on the CPU on every tile, ties
// included (tests/unit/block_match_ref.sh checks it); against align.py on a GPU, near-ties may differ.
size_t block_match_work_floats(int h2, int w2);
int block_match(const float *centre, const float *other, int h2, int w2, int radius, int tile, int32_t *shifts,
                float *work);

// shift_tiles.cpp: per-tile whole-pixel warp (model option `align`'s moving half, weights/denoise_train/align.py
// shift_tiles): out(p) = in(clamp(p + s)), s = (dy, dx) the shift of the tile that holds p, the
// source clamped to the map ([0, h-1] x [0, w-1]). in and out must not alias.
// shift_tiles: an NHWC map (h, w, C) at its own resolution, tiles of tile x tile samples;
// shifts (h / tile, w / tile, 2) int32 (dy, dx) per tile, row-major, in samples of the map (the
// head's feature maps: block_match's shifts halved with floor, tile = align_tile / 2).
// Returns 0, or DENOISE_EINVAL (nothing written) for a null pointer, h, w, C or tile <= 0, or h or
// w not a multiple of tile.
int shift_tiles(const float *in, int h, int w, int C, const int32_t *shifts, int tile, float *out);
// shift_tiles_s2d: the same on the full-resolution H x W = 2 h2 x 2 w2 frame behind an NHWC
// space-to-depth map (h2, w2, 12) (channel c*4 + dy*2 + dx for colour c of pixel (2 y + dy,
// 2 x + dx), the engine's network input), tiles of tile x tile pixels, shifts (H / tile, W / tile,
// 2) int32 in full-resolution pixels (block_match's output); out in the same s2d layout.
// Returns 0, or DENOISE_EINVAL (nothing written) for a null pointer, h2 or w2 <= 0, tile <= 0 or
// odd, or H or W not a multiple of tile.
int shift_tiles_s2d(const float *in, int h2, int w2, const int32_t *shifts, int tile, float *out);

}  // namespace cpu
}  // namespace denoise

#endif
