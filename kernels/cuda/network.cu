// The network on the GPU, the U-Net and head that models v1 and v2 share (v2's alignment is in
// alignment_pass.cpp, its sigma gate in engine.cpp), from the ops of ops.h (weights/denoise_train/model.py's
// UNet and Denoiser.head_out).
//
// Per Swin block on the fp32 map x (H, W, C) (model.py SwinBlock): where the stage's width has a
// fused kernel that fits the device (swin_block_fused.h), one launch of swin_block_fused on x in
// place (all phases per tile of windows in shared memory and registers; x read and written once,
// 8 C bytes per token). Otherwise (or with DENOISE_CUDA_FUSED=0) the correct-first sequence,
// attention half per chunk of windows [w0, w1) (nc = 64 (w1 - w0) tokens):
//   layernorm_window (LN1 + shifted window gather)  -> a    (nc, C)  bf16
//   linear qkv (+ bias epilogue)                    -> q    (nc, 3C) bf16
//   window_attention (bias table, shift mask)       -> b    (nc, C)  bf16
//   linear proj (+ fp32 bias)                       -> q    (nc, C)  fp32 (in q's room: 2 nc C of
//                                                                    its 3 nc C bf16 slots)
//   window_scatter_add (roll back, x += )           -> x    fp32
// then the MLP half per chunk of tokens [t0, t1):
//   layernorm_rows (LN2)                            -> a    (nc, C)  bf16
//   linear fc1 (+ fp32 bias)                        -> q    (nc, 4C) fp32
//   gelu_tanh (fp32 in, one rounding)               -> b    (nc, 4C) bf16
//   linear fc2 (+ bias, beta = 1: x += in the GEMM) -> x    fp32
// (nc = ea / 4C tokens: the fp32 hidden fills q, 2 ea bf16 slots, the bf16 one b).
// The roundings are the fused block's (swin_block_fused.cu) but for P, kept fp32 here: neither the
// proj output (added to the residual stream) nor fc1's (the GELU's input) is rounded to bf16.
// Rounding both, with bf16 biases, cost 0.088 dB against the CPU engine on the bedroom sample
// (the fused block 0.049); a PyTorch emulation of the block roundings alone puts the two at
// 0.067 and 0.029 dB, and this sequence at the fused block's 0.029.
// The attention half reads the whole map only through its own windows and the MLP half is
// token-wise, so chunking changes no value. U-Net: fusion_conv3x3 -> x0; enc0; merge -> x1; enc1;
// -> x2; mid; expand -> y1 (in x1's buffer), each merge / expand one fused tensor-core kernel
// (patch_tc.cu, no intermediate in DRAM) where built for its widths, unless DENOISE_CUDA_FUSED=0,
// else the op sequence: merge in rows of output tokens (merge_s2d_layernorm + linear), expand in
// rows of input tokens (cast + linear expand + d2s_concat [up | skip_hi | skip_lo] + linear skip: the
// skip map, the encoder's fp32 stream, enters the skip linear as two bf16 parts on both paths);
// dec1; -> y0 (in x0's buffer); dec0 -> F (bf16, the feature ring's format): on the fused path its
// last block stores its output rounded to bf16 straight into F (swin_block_fused's bf16_out: x0
// is left as that block's input), else the fp32 map is cast into F after it.
// Head: on the fused path (where the device takes it) one launch of head_conv3d_tc on the whole map
// (head_tc.cu: the 27 taps as a tensor-core implicit GEMM + bias + residual + clamp; no G); else
// (DENOISE_CUDA_FUSED=0, the reference) per band of rows [r0, r1): 3 GEMMs into G rows [r0 - 1,
// r1 + 1) (n, 112) fp32 + head_stencil. G exists only when the workspace is sized with a band.
#include "network.h"

#include "common.cuh"
#include "tile_shift.h"
#include "patch_tc.h"
#include "swin_block_fused.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace denoise {
namespace cuda {

namespace {

std::vector<bf16> to_bf16(const float *p, size_t n) {
    std::vector<bf16> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = __float2bfloat16_rn(p[i]);
    return v;
}

int head_gc(const ModelConfig &c) { return (9 * c.head_out_channels() + 15) / 16 * 16; }

// Element counts of the chunk buffers a/b and q for a shape (see NetShape).
void chunk_elems(const ModelConfig &c, const NetShape &s, int64_t *ea, int64_t *eq) {
    // no chunk larger than the domain; at least two rows of it and 4096 tokens, and one row of
    // each patch expand's skip GEMM operand (Net::expand: 4 w (C2 / 4 + 2 Cs) bf16 per input row,
    // C2 / 4 = Cs: the expand of level l + 1 writes d2s maps of level l's width)
    const int64_t c0 = c.channels[0], c1 = c.channels[1];
    const int64_t expand_row = std::max((s.w / 2) * 4 * (3 * c0), (s.w / 4) * 4 * (3 * c1));
    const int64_t K = std::max<int64_t>({std::min<int64_t>(s.chunk, (int64_t)s.h * s.w), 2 * (int64_t)s.w, 4096,
                                         (expand_row + 2 * c0 - 1) / (2 * c0)});
    *ea = 2 * c0 * K;
    *eq = 4 * (int64_t)c.channels[0] * K;
}

}  // namespace


void Net::destroy(Ctx &ctx) {
    release(ctx);
    for (void *p : wallocs_) dev_free(ctx, p);
    wallocs_.clear();
    wbytes_ = 0;
    up_ = false;
}

template <typename T>
int Net::put(Ctx &ctx, T **dst, const std::vector<T> &host, const char *what) {
    void *p = nullptr;
    TRY(dev_alloc(ctx, &p, host.size() * sizeof(T), what));
    wallocs_.push_back(p);
    wbytes_ += host.size() * sizeof(T);
    *dst = (T *)p;
    // on the compute stream: a plain cudaMemcpy (legacy default stream) may return before its
    // DMA lands, and the non-blocking compute stream would not wait for it; from pageable memory
    // cudaMemcpyAsync returns once `host` is staged, so the vector may go right after
    return cuda_check(ctx, cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, ctx.stream),
                      "cudaMemcpyAsync (weights)");
}

int Net::put_linear(Ctx &ctx, DevLinear *d, const LinearW &l, int dup) {
    d->in = l.in + dup;
    d->out = l.out;
    std::vector<bf16> w((size_t)d->in * l.out);
    for (int n = 0; n < l.out; ++n)
        for (int k = 0; k < d->in; ++k) w[(size_t)n * d->in + k] = __float2bfloat16_rn(l.w[(size_t)n * l.in + (k < l.in ? k : k - dup)]);
    TRY(put(ctx, &d->w, w, "linear weight"));
    if (l.b) {
        TRY(put(ctx, &d->b32, std::vector<float>(l.b, l.b + l.out), "linear bias"));
        TRY(put(ctx, &d->b16, to_bf16(l.b, l.out), "linear bias"));
    }
    return 0;
}

int Net::put_norm(Ctx &ctx, DevNorm *d, const NormW &n) {
    TRY(put(ctx, &d->g, std::vector<float>(n.g, n.g + n.n), "layernorm weight"));
    return put(ctx, &d->b, std::vector<float>(n.b, n.b + n.n), "layernorm bias");
}

int Net::put_stage(Ctx &ctx, DevStage *d, const StageW &s) {
    d->C = s.C;
    d->heads = s.heads;
    d->blocks.resize(s.blocks.size());
    SwinFusedKernel k{};
    const int sup = swin_block_fused_choice(ctx.device, s.C, s.heads, &k, &d->no_fused);
    if (sup == DENOISE_EDEVICE) return fail(ctx, sup, d->no_fused);
    d->fused_kernel = sup == 0 ? swin_fused_kernel_name(k) : "";
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        const BlockW &b = s.blocks[i];
        DevBlock &o = d->blocks[i];
        TRY(put_norm(ctx, &o.n1, b.norm1));
        TRY(put_norm(ctx, &o.n2, b.norm2));
        TRY(put_linear(ctx, &o.qkv, b.qkv));
        TRY(put_linear(ctx, &o.proj, b.proj));
        TRY(put_linear(ctx, &o.fc1, b.fc1));
        TRY(put_linear(ctx, &o.fc2, b.fc2));
        TRY(put(ctx, &o.relb, b.rel_bias, "relative position bias"));
        o.shift = b.shift;
        if (d->no_fused.empty()) {
            std::vector<uint8_t> img;
            std::string err;
            const int rc = swin_weight_image_pack(b, s.C, s.heads, &img, &err);
            if (rc) return fail(ctx, rc, "fused Swin block weight image: " + err);
            TRY(put(ctx, &o.image, img, "fused Swin block weight image"));
        }
    }
    return 0;
}

// The fused merge's packed weights, or d->no_tc saying why the kernel cannot run this merge (the
// op sequence then runs it; nothing is uploaded for the kernel).
int Net::put_merge_tc(Ctx &ctx, DevPatchTc *d, const NormW &n, const LinearW &red, int C) {
    d->no_tc = patch_merge_tc_refusal(C, red.out);
    int optin = 0;
    TRY(cuda_check(ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device),
                   "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)"));
    if (d->no_tc.empty() && patch_merge_tc_smem(C) > (size_t)optin)
        d->no_tc = "needs " + std::to_string(patch_merge_tc_smem(C)) + " B of shared memory, the device allows " +
                   std::to_string(optin);
    if (!d->no_tc.empty()) return 0;
    DN_REQUIRE(red.in == 4 * C && n.n == 4 * C, "patch merge weights not 4C = " + std::to_string(4 * C) + " wide");
    std::vector<uint16_t> wp;
    std::vector<float> g, b;
    patch_tc::pack_merge(red.w, C, red.out, n.g, n.b, &wp, &g, &b);
    TRY(put(ctx, reinterpret_cast<uint16_t **>(&d->w), wp, "fused patch merge weight"));
    TRY(put(ctx, &d->g, g, "fused patch merge LN weight"));
    return put(ctx, &d->b, b, "fused patch merge LN bias");
}

int Net::put_expand_tc(Ctx &ctx, DevPatchTc *d, const LinearW &ex, const LinearW &skip, int C) {
    const int Cs = skip.in - ex.out / 4;
    d->no_tc = patch_expand_tc_refusal(C, ex.out, Cs, skip.out);
    int optin = 0;
    TRY(cuda_check(ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device),
                   "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)"));
    if (d->no_tc.empty() && skip.out != Cs) d->no_tc = "skip linear output != skip channels (the engine runs it in place)";
    if (d->no_tc.empty() && patch_expand_tc_smem(C, ex.out, Cs) > (size_t)optin)
        d->no_tc = "needs " + std::to_string(patch_expand_tc_smem(C, ex.out, Cs)) + " B of shared memory, the device allows " +
                   std::to_string(optin);
    if (!d->no_tc.empty()) return 0;
    DN_REQUIRE(ex.in == C, "patch expand weight not C = " + std::to_string(C) + " wide");
    const std::vector<float> zero_e(ex.out, 0.f), zero_s(skip.out, 0.f);
    std::vector<uint16_t> we, ws;
    std::vector<float> be;
    patch_tc::pack_expand(ex.w, ex.b ? ex.b : zero_e.data(), C, ex.out, skip.w, skip.in, skip.out, &we, &be, &ws);
    TRY(put(ctx, reinterpret_cast<uint16_t **>(&d->w), we, "fused patch expand weight"));
    TRY(put(ctx, &d->g, be, "fused patch expand bias"));
    TRY(put(ctx, reinterpret_cast<uint16_t **>(&d->w2), ws, "fused patch expand skip weight"));
    if (!skip.b) TRY(put(ctx, &d->b, zero_s, "fused patch expand skip bias"));
    return 0;
}

size_t Net::weight_bytes_for(const ModelConfig &c) {
    const size_t c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2], r = c.mlp_ratio;
    const size_t N = (size_t)c.window * c.window;
    auto lin = [](size_t in, size_t out, bool bias) { return in * out * 2 + (bias ? out * 6 : 0); };
    // the fused kernel's weight image too wherever a kernel is built for the width (the device's
    // shared-memory limit may still refuse it at upload: then this overestimates)
    auto block = [&](size_t C, size_t heads) {
        const size_t image = swin_fused_kernels((int)C, (int)heads).empty() ? 0 : swin_image_layout((int)C, (int)heads).total();
        return 4 * C * 4 + lin(C, 3 * C, true) + lin(C, C, true) + lin(C, r * C, true) + lin(r * C, C, true) +
               heads * N * N * 4 + image;
    };
    size_t b = (size_t)9 * c.fusion_in_channels() * c0 * 2 + c0 * 4;
    b += block(c0, c.heads[0]) * (c.depth_enc0 + c.depth_dec0) + block(c1, c.heads[1]) * (c.depth_enc1 + c.depth_dec1) +
         block(c2, c.heads[2]) * c.depth_mid;
    b += 4 * c0 * 4 * 2 + lin(4 * c0, c1, false) + 4 * c1 * 4 * 2 + lin(4 * c1, c2, false);
    b += lin(c2, 4 * c1, true) + lin(3 * c1, c1, true) + lin(c1, 4 * c0, true) + lin(3 * c0, c0, true);  // skips: + Cs dup
    // the fused merges' and expands' packed copies where patch_tc.cu builds a kernel for the shape
    // (the device's shared-memory limit may still refuse one at upload: then this overestimates)
    auto merge_tc = [](size_t C, size_t Co) {
        return patch_merge_tc_refusal((int)C, (int)Co).empty() ? 4 * C * Co * 2 + 2 * 4 * C * 4 : 0;
    };
    auto expand_tc = [](size_t C, size_t Cs) {  // C -> 4 Cs, then [d2s | skip_hi | skip_lo] (3 Cs) -> Cs
        return patch_expand_tc_refusal((int)C, (int)(4 * Cs), (int)Cs, (int)Cs).empty() ? 4 * Cs * C * 2 + 4 * Cs * 4 + Cs * 3 * Cs * 2 : 0;
    };
    b += merge_tc(c0, c1) + merge_tc(c1, c2) + expand_tc(c2, c1) + expand_tc(c1, c0);
    b += (size_t)3 * head_gc(c) * c0 * 2 + c.head_out_channels() * 4;
    if (head_conv3d_tc_smem((int)c0)) b += (size_t)9 * 16 * 3 * c0 * 2;  // head_conv3d_tc's weights (9, 16, 3 c0) bf16
    // dev_alloc rounds nothing up; cudaMalloc's own granularity is not the engine's account
    return b;
}

int Net::upload(Ctx &ctx, const Model &m) {
    if (up_) return 0;
    cfg_ = m.cfg;
    const ModelConfig &c = cfg_;
    const ModelWeights &W = m.w;
    DN_REQUIRE(c.window == 8 && c.head_dim == 32 && c.s2d == 2 && c.head_radius == 1,
               "the CUDA engine runs window 8, head dim 32, s2d 2 and head radius 1");
    // widths: multiples of 32 (head dim 32) up to 256 (merge_s2d_layernorm's 4C <= 1024, the direct
    // fusion conv's Cout); c[i+1] <= 4 c[i] bounds the merges' and expands' rows per chunk
    for (int i = 0; i < 3; ++i)
        DN_REQUIRE(c.channels[i] >= 32 && c.channels[i] <= 256 && c.channels[i] % 32 == 0 &&
                       c.channels[i] == c.heads[i] * 32 && (i == 0 || c.channels[i] <= 4 * c.channels[i - 1]),
                   "channels " + std::to_string(c.channels[0]) + "/" + std::to_string(c.channels[1]) + "/" +
                       std::to_string(c.channels[2]) +
                       ": the CUDA engine runs multiples of 32 up to 256 (heads = C / 32), each at most 4x the one before");
    DN_REQUIRE(c.head_out_channels() <= 16, "head output channels > 16");
    DN_REQUIRE(2 * c.fusion_radius + 1 <= 8, "fusion window > 8 frames");
    DN_REQUIRE(W.fusion_w && W.fusion_b && W.head_w && W.head_b, "model weights not bound");
    const int c0 = c.channels[0], Cin = c.fusion_in_channels(), hc = c.head_out_channels();
    // fusion: OIHW (c0, Cin, 3, 3) -> (9, Cin, c0), tap ky*3 + kx
    {
        std::vector<float> wk((size_t)9 * Cin * c0);
        for (int o = 0; o < c0; ++o)
            for (int ci = 0; ci < Cin; ++ci)
                for (int t = 0; t < 9; ++t) wk[((size_t)t * Cin + ci) * c0 + o] = W.fusion_w[((size_t)o * Cin + ci) * 9 + t];
        TRY(put(ctx, &fusion_w_, to_bf16(wk.data(), wk.size()), "fusion weight"));
    }
    TRY(put(ctx, &fusion_b_, std::vector<float>(W.fusion_b, W.fusion_b + c0), "fusion bias"));
    TRY(put_stage(ctx, &enc0_, W.enc0));
    TRY(put_norm(ctx, &merge0_n_, W.merge0_norm));
    TRY(put_linear(ctx, &merge0_r_, W.merge0_red));
    TRY(put_stage(ctx, &enc1_, W.enc1));
    TRY(put_norm(ctx, &merge1_n_, W.merge1_norm));
    TRY(put_linear(ctx, &merge1_r_, W.merge1_red));
    TRY(put_stage(ctx, &mid_, W.mid));
    TRY(put_linear(ctx, &expand1_, W.expand1));
    TRY(put_linear(ctx, &skip1_, W.skip1, c.channels[1]));  // [d2s(up) | skip_hi | skip_lo]: d2s_concat
    TRY(put_stage(ctx, &dec1_, W.dec1));
    TRY(put_linear(ctx, &expand0_, W.expand0));
    TRY(put_linear(ctx, &skip0_, W.skip0, c.channels[0]));
    TRY(put_stage(ctx, &dec0_, W.dec0));
    TRY(put_merge_tc(ctx, &merge0_tc_, W.merge0_norm, W.merge0_red, c0));
    TRY(put_merge_tc(ctx, &merge1_tc_, W.merge1_norm, W.merge1_red, c.channels[1]));
    TRY(put_expand_tc(ctx, &expand1_tc_, W.expand1, W.skip1, c.channels[2]));
    TRY(put_expand_tc(ctx, &expand0_tc_, W.expand0, W.skip0, c.channels[1]));
    // Head: head.weight (hc, c0, 3 (time), 3, 3) -> per time tap dt a (Gc, c0) row-major matrix,
    // row (ky*3 + kx)*hc + o, column ci = weight[o, ci, dt, ky, kx]; rows 9 hc..Gc-1 zero.
    head_gc_ = head_gc(c);
    for (int dt = 0; dt < 3; ++dt) {
        std::vector<float> mt((size_t)head_gc_ * c0, 0.f);
        for (int o = 0; o < hc; ++o)
            for (int ci = 0; ci < c0; ++ci)
                for (int t = 0; t < 9; ++t)
                    mt[((size_t)t * hc + o) * c0 + ci] = W.head_w[(((size_t)o * c0 + ci) * 3 + dt) * 9 + t];
        TRY(put(ctx, &head_w_[dt], to_bf16(mt.data(), mt.size()), "head weight"));
    }
    TRY(put(ctx, &head_b_, std::vector<float>(W.head_b, W.head_b + hc), "head bias"));
    // the tensor-core head's weights (head_tc.cu's layout), where it is built for c0 and the device runs it
    {
        const int rc = head_conv3d_tc_supported(ctx.device, c0, &no_head_tc_);
        if (rc == DENOISE_EDEVICE) return fail(ctx, rc, no_head_tc_);
        if (rc == 0) {
            std::vector<uint16_t> wk((size_t)9 * 16 * 3 * c0);
            DN_REQUIRE(head_conv3d_tc_pack(W.head_w, hc, c0, wk.data()), "head_conv3d_tc_pack refused the head");
            uint16_t *d = nullptr;
            TRY(put(ctx, &d, wk, "head weight (tensor-core layout)"));
            head_wtc_ = reinterpret_cast<bf16 *>(d);
        }
    }
    TRY(cuda_check(ctx, cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize (weights upload)"));
    up_ = true;
    fused_ = fused_from_env();
    if (std::getenv("DENOISE_CUDA_DEBUG"))
        std::fprintf(stderr, "denoise CUDA engine: %s; %s; %s\n", swin_path().c_str(), patch_path().c_str(),
                     head_path().c_str());
    return 0;
}

bool Net::fused_from_env() {
    const char *e = std::getenv("DENOISE_CUDA_FUSED");
    return !(e && std::string(e) == "0");
}

int Net::swin_blocks() const {
    int n = 0;
    for (const DevStage *s : {&enc0_, &enc1_, &mid_, &dec1_, &dec0_}) n += (int)s->blocks.size();
    return n;
}

int Net::fused_blocks() const {
    if (!fused_) return 0;
    int n = 0;
    for (const DevStage *s : {&enc0_, &enc1_, &mid_, &dec1_, &dec0_})
        if (s->no_fused.empty()) n += (int)s->blocks.size();
    return n;
}

std::string Net::swin_path() const {
    const int n = swin_blocks(), f = fused_blocks();
    if (!fused_) return "Swin blocks: correct-first op sequence for all " + std::to_string(n) + " (fused path off)";
    std::string s = "Swin blocks: fused " + std::to_string(f) + " of " + std::to_string(n);
    const struct {
        const char *name;
        const DevStage *s;
    } st[] = {{"enc0", &enc0_}, {"enc1", &enc1_}, {"mid", &mid_}, {"dec1", &dec1_}, {"dec0", &dec0_}};
    std::string why, kernels;
    for (const auto &x : st) {
        if (!x.s->no_fused.empty() && !x.s->blocks.empty())
            why += std::string(why.empty() ? "" : "; ") + x.name + " (C " + std::to_string(x.s->C) + "): " + x.s->no_fused;
        const std::string one = "C " + std::to_string(x.s->C) + " " + x.s->fused_kernel;
        if (!x.s->fused_kernel.empty() && !x.s->blocks.empty() && kernels.find(one) == std::string::npos)
            kernels += (kernels.empty() ? " (" : ", ") + one;
    }
    s += kernels.empty() ? "" : kernels + ")";
    return why.empty() ? s : s + "; correct-first: " + why;
}

std::string Net::patch_path() const {
    const struct {
        const char *name;
        int C;
        const DevPatchTc *d;
    } p[] = {{"merge0", cfg_.channels[0], &merge0_tc_},
             {"merge1", cfg_.channels[1], &merge1_tc_},
             {"expand1", cfg_.channels[2], &expand1_tc_},
             {"expand0", cfg_.channels[1], &expand0_tc_}};
    if (!fused_) return "patch merges/expands: correct-first ops for all 4 (fused path off)";
    int f = 0;
    std::string why;
    for (const auto &x : p) {
        if (x.d->no_tc.empty()) ++f;
        else why += std::string(why.empty() ? "" : "; ") + x.name + " (C " + std::to_string(x.C) + "): " + x.d->no_tc;
    }
    const std::string s = "patch merges/expands: fused " + std::to_string(f) + " of 4";
    return why.empty() ? s : s + "; correct-first: " + why;
}

bool Net::head_fused() const { return fused_ && head_wtc_; }

std::string Net::head_path() const {
    if (head_fused()) return "head: tensor-core conv3d (one kernel)";
    if (!fused_) return "head: two-pass (temporal GEMMs + stencil; fused path off)";
    return "head: two-pass (temporal GEMMs + stencil): " + no_head_tc_;
}

size_t Net::workspace_bytes_for(const ModelConfig &c, const NetShape &s) {
    int64_t ea, eq;
    chunk_elems(c, s, &ea, &eq);
    const size_t n0 = (size_t)s.h * s.w, n1 = n0 / 4, n2 = n0 / 16;
    return n0 * c.channels[0] * 4 + n1 * c.channels[1] * 4 + n2 * c.channels[2] * 4 + (size_t)(2 * ea + eq) * 2 +
           (s.band > 0 ? (size_t)(std::min(s.band, s.h) + 2) * s.w * head_gc(c) * 4 : 0);
}

void Net::release(Ctx &ctx) {
    for (void *p : wsallocs_) dev_free(ctx, p);
    wsallocs_.clear();
    wsbytes_ = 0;
    shape_ = NetShape();
    x0_ = x1_ = x2_ = nullptr;
    a_ = b_ = q_ = nullptr;
    G_ = nullptr;
}

int Net::resize(Ctx &ctx, const NetShape &s) {
    const int unit = 4 * cfg_.window;  // the mid stage (h/4) must tile into windows
    DN_REQUIRE(up_, "weights not uploaded");
    DN_REQUIRE(s.h >= unit && s.w >= unit && s.h % unit == 0 && s.w % unit == 0,
               "token grid " + std::to_string(s.w) + "x" + std::to_string(s.h) + " not a multiple of " +
                   std::to_string(unit));
    DN_REQUIRE(s.band >= 0, "head band < 0 rows");
    release(ctx);
    const size_t n0 = (size_t)s.h * s.w, n1 = n0 / 4, n2 = n0 / 16;
    chunk_elems(cfg_, s, &ea_, &eq_);
    auto get = [&](void **p, size_t bytes, const char *what) {
        int rc = dev_alloc(ctx, p, bytes, what);
        if (!rc) {
            wsallocs_.push_back(*p);
            wsbytes_ += bytes;
        }
        return rc;
    };
    int rc = 0;
    if (!rc) rc = get((void **)&x0_, n0 * cfg_.channels[0] * 4, "U-Net level-0 map (x0 / y0)");
    if (!rc) rc = get((void **)&x1_, n1 * cfg_.channels[1] * 4, "U-Net level-1 map (x1 / y1)");
    if (!rc) rc = get((void **)&x2_, n2 * cfg_.channels[2] * 4, "U-Net level-2 map (x2)");
    if (!rc) rc = get((void **)&a_, (size_t)ea_ * 2, "U-Net chunk buffer a");
    if (!rc) rc = get((void **)&b_, (size_t)ea_ * 2, "U-Net chunk buffer b");
    if (!rc) rc = get((void **)&q_, (size_t)eq_ * 2, "U-Net chunk buffer q (qkv / MLP hidden)");
    if (!rc && s.band > 0)
        rc = get((void **)&G_, (size_t)(std::min(s.band, s.h) + 2) * s.w * head_gc_ * 4, "head band G");
    if (rc) {
        const std::string e = ctx.err;
        release(ctx);
        ctx.err = e;
        return rc;
    }
    shape_ = s;
    shape_.band = std::min(s.band, s.h);
    return 0;
}

int Net::mark(Ctx &ctx, const char *kind, int C) {
    if (!timer_) return 0;
    return timer_->mark(ctx, C ? std::string(kind) + " C " + std::to_string(C) : std::string(kind));
}

OpTimer::~OpTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

int OpTimer::mark(Ctx &ctx, const std::string &kind) {
    if (used_ == events_.size()) {
        cudaEvent_t e = nullptr;
        TRY(cuda_check(ctx, cudaEventCreate(&e), "cudaEventCreate (op timer)"));
        events_.push_back(e);
        kinds_.emplace_back();
    }
    kinds_[used_] = kind;
    return cuda_check(ctx, cudaEventRecord(events_[used_++], ctx.stream), "cudaEventRecord (op timer)");
}

int OpTimer::collect(Ctx &ctx, std::vector<std::pair<std::string, double>> *ms) {
    const size_t n = used_;
    used_ = 0;
    if (n == 0) return 0;
    TRY(cuda_check(ctx, cudaEventSynchronize(events_[n - 1]), "cudaEventSynchronize (op timer)"));
    for (size_t i = 0; i + 1 < n; ++i) {
        float t = 0;
        TRY(cuda_check(ctx, cudaEventElapsedTime(&t, events_[i], events_[i + 1]), "cudaEventElapsedTime (op timer)"));
        auto it = std::find_if(ms->begin(), ms->end(), [&](const std::pair<std::string, double> &p) { return p.first == kinds_[i]; });
        if (it == ms->end()) ms->emplace_back(kinds_[i], t);
        else it->second += t;
    }
    return 0;
}

int Net::block(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W) {
    const int64_t n = (int64_t)H * W;
    const int ws = cfg_.window, N = ws * ws, Ch = cfg_.mlp_ratio * C;
    const float eps = (float)cfg_.ln_eps;
    const int nwin = (H / ws) * (W / ws);
    const int per = (int)std::max<int64_t>(1, std::min(ea_ / C, eq_ / (3 * C)) / N);  // windows per chunk
    for (int w0 = 0; w0 < nwin; w0 += per) {
        const int w1 = std::min(nwin, w0 + per);
        const int64_t nc = (int64_t)(w1 - w0) * N;
        TRY(mark(ctx, "LN1 + window gather", C));
        TRY(layernorm_window(ctx, x, H, W, C, ws, B.shift, w0, w1, B.n1.g, B.n1.b, eps, a_));
        TRY(mark(ctx, "qkv linear", C));
        TRY(linear(ctx, a_, nc, C, C, B.qkv.w, B.qkv.b16, 3 * C, q_, false, 3 * C, 0.f));
        TRY(mark(ctx, "window attention", C));
        TRY(window_attention(ctx, q_, nullptr, H, W, C, heads, ws, B.shift, w0, w1, B.relb, b_));
        TRY(mark(ctx, "proj linear", C));
        float *pf = reinterpret_cast<float *>(q_);  // qkv is consumed: nc C floats fit its nc 3C bf16
        TRY(linear(ctx, b_, nc, C, C, B.proj.w, B.proj.b32, C, pf, true, C, 0.f));
        TRY(mark(ctx, "window scatter-add", C));
        TRY(window_scatter_add(ctx, pf, nullptr, H, W, C, ws, B.shift, w0, w1, x));
    }
    // fp32 hidden in q (eq = 2 ea bf16 slots), bf16 hidden in b (ea slots)
    const int64_t tper = std::max<int64_t>(1, std::min(ea_ / Ch, eq_ / (2 * Ch)));
    for (int64_t t0 = 0; t0 < n; t0 += tper) {
        const int64_t nc = std::min(n, t0 + tper) - t0;
        float *xt = x + t0 * C;
        TRY(mark(ctx, "LN2", C));
        TRY(layernorm_rows(ctx, xt, nc, C, B.n2.g, B.n2.b, eps, a_));
        TRY(mark(ctx, "fc1 linear", C));
        float *hf = reinterpret_cast<float *>(q_);
        TRY(linear(ctx, a_, nc, C, C, B.fc1.w, B.fc1.b32, Ch, hf, true, Ch, 0.f));
        TRY(mark(ctx, "GELU", C));
        TRY(gelu_tanh(ctx, hf, nc, Ch, nullptr, b_));
        TRY(mark(ctx, "fc2 linear + residual", C));
        TRY(linear(ctx, b_, nc, Ch, Ch, B.fc2.w, B.fc2.b32, C, xt, true, C, 1.f));
    }
    return 0;
}

int Net::block_fused(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W, bf16 *out) {
    TRY(mark(ctx, "Swin block fused", C));
    SwinFusedParams p;
    p.bf16_out = reinterpret_cast<uint16_t *>(out);
    return swin_block_fused(ctx, B.image, C, heads, (float)cfg_.ln_eps, x, false, H, W, B.shift, &p);
}

int Net::stage(Ctx &ctx, const DevStage &S, float *x, int H, int W, bf16 *out) {
    const bool fused = fused_ && S.no_fused.empty() && !S.blocks.empty();
    for (size_t i = 0; i < S.blocks.size(); ++i) {
        const DevBlock &b = S.blocks[i];
        TRY(fused ? block_fused(ctx, b, S.C, S.heads, x, H, W, i + 1 == S.blocks.size() ? out : nullptr)
                  : block(ctx, b, S.C, S.heads, x, H, W));
    }
    if (!out || fused) return 0;
    TRY(mark(ctx, "features cast to bf16"));
    return cast_to_bf16(ctx, x, (int64_t)H * W * S.C, out);
}

// Patch merge of x (H, W, C) -> out (H/2, W/2, C'), C' = red.out (2C in models v1 / v2): on the
// fused path one patch_merge_tc launch, else the op sequence in chunks of output rows.
int Net::merge(Ctx &ctx, const DevNorm &n, const DevLinear &red, const DevPatchTc &tc, const float *x, int H, int W, int C,
               float *out) {
    const int ho = H / 2, wo = W / 2, C4 = 4 * C, Co = red.out;
    const float eps = (float)cfg_.ln_eps;
    if (fused_ && tc.no_tc.empty()) {
        TRY(mark(ctx, "patch merge fused", C));
        return patch_merge_tc(ctx, x, H, W, C, tc.w, tc.g, tc.b, Co, eps, out);
    }
    const int rows = (int)std::max<int64_t>(1, ea_ / ((int64_t)wo * C4));
    for (int r0 = 0; r0 < ho; r0 += rows) {
        const int r1 = std::min(ho, r0 + rows);
        const int64_t nt = (int64_t)(r1 - r0) * wo;
        TRY(mark(ctx, "patch merge s2d + LN", C));
        TRY(merge_s2d_layernorm(ctx, x + (size_t)2 * r0 * W * C, 2 * (r1 - r0), W, C, n.g, n.b, eps, a_));
        TRY(mark(ctx, "patch merge linear", C));
        TRY(linear(ctx, a_, nt, C4, C4, red.w, nullptr, Co, out + (size_t)r0 * wo * Co, true, Co, 0.f));
    }
    return 0;
}

// Patch expand of lo (h, w, C) + skip concat with skipmap (2h, 2w, Cs) + skip linear -> out
// (2h, 2w, skip.out): on the fused path one patch_expand_tc launch, else the op sequence in chunks
// of input rows. out may be skipmap (the fused kernel reads each tile's skip tokens before it
// writes them; the sequence copies each chunk's skip rows into the concat first).
int Net::expand(Ctx &ctx, const DevLinear &ex, const DevLinear &skip, const DevPatchTc &tc, const float *lo, int h, int w,
                int C, const float *skipmap, int Cs, float *out) {
    const int C2 = ex.out, Kz = C2 / 4 + 2 * Cs, Co = skip.out, W2 = 2 * w;
    DN_REQUIRE(skip.in == Kz, "skip linear takes " + std::to_string(skip.in) + " channels, the concat [d2s(up) | skip_hi | skip_lo] has " +
                                  std::to_string(Kz));
    if (fused_ && tc.no_tc.empty()) {
        TRY(mark(ctx, "patch expand fused", C));
        return patch_expand_tc(ctx, lo, h, w, C, tc.w, tc.g, C2, skipmap, Cs, tc.w2, skip.b32 ? skip.b32 : tc.b, Co, out);
    }
    const int64_t per_row = std::max<int64_t>({(int64_t)w * C, (int64_t)4 * w * Kz});
    const int rows = (int)std::max<int64_t>(1, std::min(ea_ / per_row, eq_ / ((int64_t)w * C2)));
    for (int r0 = 0; r0 < h; r0 += rows) {
        const int r1 = std::min(h, r0 + rows);
        const int64_t nt = (int64_t)(r1 - r0) * w;
        TRY(mark(ctx, "patch expand cast + linear", C));
        TRY(cast_to_bf16(ctx, lo + (size_t)r0 * w * C, nt * C, a_));
        TRY(linear(ctx, a_, nt, C, C, ex.w, ex.b16, C2, q_, false, C2, 0.f));
        TRY(mark(ctx, "patch expand d2s + concat", C));
        TRY(d2s_concat(ctx, q_, r1 - r0, w, C2, skipmap + (size_t)2 * r0 * W2 * Cs, Cs, a_));
        TRY(mark(ctx, "patch expand skip linear", C));
        TRY(linear(ctx, a_, 4 * nt, Kz, Kz, skip.w, skip.b32, Co, out + (size_t)2 * r0 * W2 * Co, true, Co, 0.f));
    }
    return 0;
}

int Net::features(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma, int h, int w, bf16 *F,
                  const TileShift *shifts) {
    DN_REQUIRE(up_ && shape_.h > 0, "weights or workspace missing (upload + resize first)");
    DN_REQUIRE(nframes == 2 * cfg_.fusion_radius + 1, "fusion window of " + std::to_string(nframes) + " frames");
    DN_REQUIRE(F, "null F");
    const int unit = 4 * cfg_.window;
    DN_REQUIRE(h >= unit && w >= unit && h % unit == 0 && w % unit == 0 && (int64_t)h * w <= (int64_t)shape_.h * shape_.w &&
                   w <= shape_.w,
               "domain " + std::to_string(w) + "x" + std::to_string(h) + " tokens outside the workspace's " +
                   std::to_string(shape_.w) + "x" + std::to_string(shape_.h));
    const int h1 = h / 2, w1 = w / 2, h2 = h / 4, w2 = w / 4;
    const int c0 = cfg_.channels[0], c1 = cfg_.channels[1], c2 = cfg_.channels[2];
    TRY(mark(ctx, "fusion conv 3x3"));
    TRY(fusion_conv3x3(ctx, frames, nframes, sigma / 255.0f, h, w, fusion_w_, fusion_b_, c0, x0_, shifts));
    TRY(stage(ctx, enc0_, x0_, h, w));
    TRY(merge(ctx, merge0_n_, merge0_r_, merge0_tc_, x0_, h, w, c0, x1_));
    TRY(stage(ctx, enc1_, x1_, h1, w1));
    TRY(merge(ctx, merge1_n_, merge1_r_, merge1_tc_, x1_, h1, w1, c1, x2_));
    TRY(stage(ctx, mid_, x2_, h2, w2));
    TRY(expand(ctx, expand1_, skip1_, expand1_tc_, x2_, h2, w2, c2, x1_, c1, x1_));  // y1 in x1's buffer
    TRY(stage(ctx, dec1_, x1_, h1, w1));
    TRY(expand(ctx, expand0_, skip0_, expand0_tc_, x1_, h1, w1, c1, x0_, c0, x0_));  // y0 in x0's buffer
    return stage(ctx, dec0_, x0_, h, w, F);  // its last block writes F
}

int Net::head(Ctx &ctx, const bf16 *const F[3], const bf16 *centre, int h, int w, float *out, bool as_change,
              const TileShift *shifts) {
    DN_REQUIRE(up_ && shape_.h > 0, "weights or workspace missing (upload + resize first)");
    DN_REQUIRE(F[0] && F[1] && F[2] && centre && out, "null pointer");
    DN_REQUIRE(h >= 1 && w >= 1 && w <= shape_.w, "domain " + std::to_string(w) + "x" + std::to_string(h) +
                                                      " wider than the workspace's " + std::to_string(shape_.w));
    if (head_fused()) {
        TRY(mark(ctx, "head tensor-core conv3d"));
        return head_conv3d_tc(ctx, F, h, w, cfg_.channels[0], head_wtc_, head_b_, cfg_.head_out_channels(), centre, out,
                              as_change, shifts);
    }
    for (int dt = 0; shifts && dt < 3; ++dt)
        DN_REQUIRE(!shifts[dt].map, "the two-pass head reads feature maps as they are: move them first (shift_tiles)");
    DN_REQUIRE(G_ && shape_.band > 0, "the two-pass head needs the workspace sized with a head band (NetShape.band "
                                      ">= 1); it was sized for the tensor-core head only");
    const int c0 = cfg_.channels[0], band = shape_.band;
    for (int r0 = 0; r0 < h; r0 += band) {
        const int r1 = std::min(h, r0 + band), g0 = std::max(0, r0 - 1), g1 = std::min(h, r1 + 1);
        const int64_t ng = (int64_t)(g1 - g0) * w;
        TRY(mark(ctx, "head temporal GEMM"));
        for (int dt = 0; dt < 3; ++dt)
            TRY(linear(ctx, F[dt] + (size_t)g0 * w * c0, ng, c0, c0, head_w_[dt], nullptr, head_gc_, G_, true, head_gc_,
                       dt ? 1.f : 0.f));
        TRY(mark(ctx, "head stencil"));
        TRY(head_stencil(ctx, G_, head_gc_, g0, h, w, r0, r1, head_b_, cfg_.head_out_channels(), centre, out,
                         as_change));
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise
