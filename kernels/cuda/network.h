// The network of models v1 and v2 on the GPU (network.cu), at any level widths c0/c1/c2 that are
// multiples of 32 up to 256 with c[i+1] <= 4 c[i] (v1 / v2: 32/64/128; the v3 study's wide64:
// 64/64/128; model.py's PatchMerge 4C -> C', PatchExpand C -> 4C'): the weights uploaded once (bf16 GEMM
// operands, fp32 norms/biases/bias tables, packed from the model layer's PyTorch layouts; per Swin
// block also the fused kernel's weight image), one U-Net pass F_s and the head on a domain of h x w
// tokens, on one stream.
// Each Swin block runs as one fused kernel (swin_block_fused.h) where one is built for its width
// and fits the device, else as the correct-first sequence of the ops of ops.h; the head likewise
// as one tensor-core kernel (head_tc.cu) or the two-pass reference (GEMMs + stencil). The token-wise
// phases of the correct-first path run in chunks (windows for the attention half, rows of tokens
// for the MLP half, the merges and the expands, bands of rows for the head) so that the workspace
// is bounded independently of the domain size except for the three residual-stream maps.
//
// Environment: DENOISE_CUDA_FUSED=0 makes upload() choose the correct-first sequence for every
// block and the two-pass head (any other value or unset: fused where supported); DENOISE_CUDA_DEBUG (any value) prints
// the chosen path and the reason of any correct-first block to stderr once per upload.
// Host-only header (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_NETWORK_H
#define DENOISE_CUDA_NETWORK_H

#include <string>
#include <vector>

#include "../model.h"
#include "ops.h"

namespace denoise {
namespace cuda {

struct DevLinear {
    bf16 *w = nullptr;      // (out, in) row-major
    float *b32 = nullptr;   // bias for fp32 outputs (null: no bias)
    bf16 *b16 = nullptr;    // the same bias for bf16 outputs
    int in = 0, out = 0;
};
struct DevNorm {
    float *g = nullptr, *b = nullptr;
};
struct DevBlock {
    DevNorm n1, n2;
    DevLinear qkv, proj, fc1, fc2;
    float *relb = nullptr;  // (heads, 64, 64)
    uint8_t *image = nullptr;  // the fused kernel's weight image (null: the stage runs correct-first)
    int shift = 0;
};
// A patch merge / patch expand's weights packed for patch_tc.cu's fused kernels (patch_tc.h).
struct DevPatchTc {
    bf16 *w = nullptr;   // merge: pack_merge's weight; expand: pack_expand's expand weight
    float *g = nullptr;  // merge: gamma in the packed order; expand: the expand bias in that order
    float *b = nullptr;  // merge: beta in the packed order
    bf16 *w2 = nullptr;  // expand: the packed skip weight
    std::string no_tc;   // why the fused kernel cannot run it ("" when it can)
};
struct DevStage {
    int C = 0, heads = 0;
    std::vector<DevBlock> blocks;
    std::string no_fused;  // why the fused kernel cannot run this stage ("" when it can)
    std::string fused_kernel;  // the kernel that runs it (swin_fused_kernel_name), when one can
};

// GPU time per op kind of the work between marks (benchmarks: the per-kernel table). A mark
// records a CUDA event on ctx.stream and tags it with a kind; the time from one mark to the next
// is the earlier mark's kind's, so a sequence of marks splits a stream's work without gaps. One
// event per op group: not for a timed loop.
class OpTimer {
public:
    OpTimer() = default;
    ~OpTimer();
    OpTimer(const OpTimer &) = delete;
    OpTimer &operator=(const OpTimer &) = delete;
    // Record a mark of `kind` on ctx.stream (events are created as needed and reused). 0 or
    // DENOISE_EDEVICE with the runtime's message in ctx.err.
    int mark(Ctx &ctx, const std::string &kind);
    // Wait for the last mark, add the time (ms) between consecutive marks to each earlier mark's
    // kind in *ms (kinds in order of first appearance; entries already in *ms are added to), and
    // drop the marks. 0 or DENOISE_EDEVICE.
    int collect(Ctx &ctx, std::vector<std::pair<std::string, double>> *ms);

private:
    std::vector<cudaEvent_t> events_;
    std::vector<std::string> kinds_;
    size_t used_ = 0;
};

// What the workspace is sized for: domains up to h x w tokens (multiples of 4 windows), the
// token-wise phases in chunks of at most `chunk` level-0 tokens (raised to at least two rows of
// the domain and 4096), the two-pass head in bands of `band` rows; band 0: no G buffer, only the
// tensor-core head runs (Net::head_fused(); the two-pass head then refuses with DENOISE_EINVAL).
struct NetShape {
    int h = 0, w = 0;
    int64_t chunk = 0;
    int band = 0;
};

// Device memory is allocated through (and accounted in) the Ctx passed to upload/resize:
// destroy(ctx) frees it, and ctx_destroy() frees whatever is left.
class Net {
public:
    Net() = default;
    Net(const Net &) = delete;
    Net &operator=(const Net &) = delete;

    // Pack and upload m's weights (fp32 on the host, rounded to bf16 for the GEMM operands and the
    // fusion conv; per Swin block of a stage the fused kernel runs on ctx's device, its weight
    // image too), on ctx.stream, waited for. Once. DENOISE_EINVAL for a configuration these
    // kernels do not run.
    int upload(Ctx &ctx, const Model &m);
    bool uploaded() const { return up_; }
    // Device bytes upload() allocates for cfg (to plan memory before anything is allocated).
    static size_t weight_bytes_for(const ModelConfig &cfg);
    // Device bytes of the workspace resize(s) allocates.
    static size_t workspace_bytes_for(const ModelConfig &cfg, const NetShape &s);
    // Size the workspace for s (frees the previous one).
    int resize(Ctx &ctx, const NetShape &s);
    void release(Ctx &ctx);  // free the workspace
    void destroy(Ctx &ctx);  // free the workspace and the weights

    // F (h, w, c0) bf16 = UNet of the fusion window frames[0..n-1] ((h, w, 12) bf16) and sigma
    // (8-bit code values) on a domain of h x w tokens (within the workspace's shape). shifts
    // (model v2's alignment; null: none): per frame a TileShift, the frame read moved onto the
    // centre by the fusion conv (fusion_conv3x3's shifts).
    int features(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma, int h, int w, bf16 *F,
                 const TileShift *shifts = nullptr);
    // out (h, w, 12) fp32 = clamp(conv3d(F[0], F[1], F[2]) + bias + centre, min(-1, centre),
    // max(1, centre)), or with as_change the change 0.5 (that - centre). F: (h, w, c0) bf16,
    // 16-byte aligned; centre (h, w, 12) bf16. head_fused(): one tensor-core kernel (head_tc.cu),
    // else the two-pass head in bands (needs a workspace band >= 1). shifts (model v2's alignment;
    // null: none): per time tap a TileShift, F[dt] read moved (head_conv3d_tc's shifts); only with
    // head_fused() (the two-pass head reads maps the caller moved: DENOISE_EINVAL otherwise).
    int head(Ctx &ctx, const bf16 *const F[3], const bf16 *centre, int h, int w, float *out, bool as_change,
             const TileShift *shifts = nullptr);

    const NetShape &shape() const { return shape_; }
    size_t weight_bytes() const { return wbytes_; }
    size_t workspace_bytes() const { return wsbytes_; }

    // The Swin-block path: fused (where the stage supports it) or the correct-first sequence for
    // every block. upload() sets it from DENOISE_CUDA_FUSED; benchmarks and checks switch it
    // between calls (both paths' weights stay uploaded).
    void set_fused(bool on) { fused_ = on; }
    bool fused() const { return fused_; }
    int swin_blocks() const;  // Swin blocks of the model
    int fused_blocks() const;  // of those, the ones that run fused now
    // One line: "Swin blocks: fused 11 of 11 (C 32 1/4 heur, C 64 1/4 heur, C 128 1/8 heur)" (the
    // kernel per width, swin_fused_kernel_name) / "Swin blocks: correct-first op sequence for all
    // 11 (fused path off)" / "Swin blocks: fused 8 of 11 (...); correct-first: mid (C 128): <reason>".
    std::string swin_path() const;
    // One line: "patch merges/expands: fused 4 of 4" / "... correct-first ops for all 4 (fused path
    // off)" / "... fused 2 of 4; correct-first: merge1 (C 64): <reason>" (patch_tc.cu's kernels).
    std::string patch_path() const;
    // The default path: false when DENOISE_CUDA_FUSED is "0".
    static bool fused_from_env();
    // The head path: the tensor-core head when the fused path is on and the device takes it
    // (uploaded then), else the two-pass head; head_path(): one line saying which and why.
    bool head_fused() const;
    std::string head_path() const;
    // Mark each op group of features() and head() on t (null: none, the default), with kinds such
    // as "Swin block fused C 32", "qkv linear C 64", "patch merge linear", "head stencil".
    void set_op_timer(OpTimer *t) { timer_ = t; }

private:
    int block(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W);
    // out (null: x in place): the block's output rounded to bf16 (swin_block_fused's bf16_out)
    int block_fused(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W, bf16 *out = nullptr);
    // S's blocks on x in place; out (non-null): the stage's output as bf16 (H, W, S.C) there, written
    // by the last fused block or cast from x after the correct-first sequence
    int stage(Ctx &ctx, const DevStage &S, float *x, int H, int W, bf16 *out = nullptr);
    int merge(Ctx &ctx, const DevNorm &n, const DevLinear &red, const DevPatchTc &tc, const float *x, int H, int W, int C,
              float *out);
    int expand(Ctx &ctx, const DevLinear &ex, const DevLinear &skip, const DevPatchTc &tc, const float *lo, int h, int w,
               int C, const float *skipmap, int Cs, float *out);
    int put_merge_tc(Ctx &ctx, DevPatchTc *d, const NormW &n, const LinearW &red, int C);
    int put_expand_tc(Ctx &ctx, DevPatchTc *d, const LinearW &ex, const LinearW &skip, int C);
    template <typename T>
    int put(Ctx &ctx, T **dst, const std::vector<T> &host, const char *what);
    // dup > 0: the weight gets the last dup input columns once more (in = l.in + dup): the skip
    // linears over [d2s(up) | skip_hi | skip_lo] (patch.cu d2s_concat)
    int put_linear(Ctx &ctx, DevLinear *d, const LinearW &l, int dup = 0);
    int put_norm(Ctx &ctx, DevNorm *d, const NormW &n);
    int put_stage(Ctx &ctx, DevStage *d, const StageW &s);

    ModelConfig cfg_;
    bool up_ = false;
    bool fused_ = true;
    OpTimer *timer_ = nullptr;
    int mark(Ctx &ctx, const char *kind, int C = 0);  // timer_->mark(kind + " C <C>" if C), or 0
    std::vector<void *> wallocs_, wsallocs_;
    size_t wbytes_ = 0, wsbytes_ = 0;

    bf16 *fusion_w_ = nullptr;  // (9, Cin, c0): tap-major
    float *fusion_b_ = nullptr;
    DevStage enc0_, enc1_, mid_, dec1_, dec0_;
    DevNorm merge0_n_, merge1_n_;
    DevLinear merge0_r_, merge1_r_, expand1_, expand0_, skip1_, skip0_;
    DevPatchTc merge0_tc_, merge1_tc_, expand1_tc_, expand0_tc_;
    bf16 *head_w_[3] = {nullptr, nullptr, nullptr};  // (Gc, c0) per time tap
    float *head_b_ = nullptr;
    int head_gc_ = 0;
    bf16 *head_wtc_ = nullptr;  // (9, 16, 3 c0): head_conv3d_tc's layout (null: not built for c0, or the device cannot run it)
    std::string no_head_tc_;    // why not ("" when it can)

    NetShape shape_;
    int64_t ea_ = 0, eq_ = 0;  // elements of a_/b_ and q_
    // x0 (y0 reuses it: the skip concat has copied x0 before y0 is written), x1 (y1 likewise), x2
    float *x0_ = nullptr, *x1_ = nullptr, *x2_ = nullptr;
    bf16 *a_ = nullptr, *b_ = nullptr, *q_ = nullptr;  // chunk buffers
    float *G_ = nullptr;                              // head band (band + 2 rows; null with band 0)
};

}  // namespace cuda
}  // namespace denoise

#endif
