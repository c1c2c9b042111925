// Model v1 on the GPU, correct-first form: the weights uploaded once (bf16 GEMM operands, fp32
// norms/biases/bias tables), one U-Net pass F_s and the head, each a sequence of the ops of ops.h
// on one stream. Host-only header (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_NETWORK_H
#define DENOISE_CUDA_NETWORK_H

#include <vector>

#include "../cpu/unet.h"
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
    int shift = 0;
};
struct DevStage {
    int C = 0, heads = 0;
    std::vector<DevBlock> blocks;
};

class Net {
public:
    Net() = default;
    Net(const Net &) = delete;
    Net &operator=(const Net &) = delete;
    ~Net();

    // Upload W (fp32 on the host, rounded to bf16 for the GEMM operands). Synchronous; once.
    int upload(Ctx &ctx, const cpu::UNetWeights &W);
    bool uploaded() const { return up_; }
    // Size the workspace for an h x w token grid (padded frame / 2; multiples of 32).
    int resize(Ctx &ctx, int h, int w);

    // F (h, w, c0) bf16 = UNet of the fusion window frames[0..n-1] ((h, w, 12) bf16) and sigma
    // (8-bit code values).
    int features(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma, bf16 *F);
    // out (h, w, 12) fp32 = clamp(conv3d(F[0], F[1], F[2]) + bias + centre, -1, 1).
    int head(Ctx &ctx, const bf16 *const F[3], const bf16 *centre, float *out);

    int h() const { return h_; }
    int w() const { return w_; }
    size_t weight_bytes() const { return wbytes_; }
    size_t workspace_bytes() const { return wsbytes_; }

    // Stage outputs (fp32, for the tests): after features() these hold enc0 (x0), merge..enc1
    // (x1), mid (x2), dec1 (y1) and dec0 (y0) maps.
    const float *x0() const { return x0_; }
    const float *x2() const { return x2_; }
    const float *y0() const { return y0_; }

private:
    int block(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W);
    int stage(Ctx &ctx, const DevStage &S, float *x, int H, int W);
    template <typename T>
    int put(Ctx &ctx, T **dst, const std::vector<T> &host, const char *what);
    int put_linear(Ctx &ctx, DevLinear *d, const cpu::LinearW &l, bool bias);
    int put_norm(Ctx &ctx, DevNorm *d, const cpu::NormW &n);
    int put_stage(Ctx &ctx, DevStage *d, const cpu::StageW &s);
    void free_ws();

    ModelConfig cfg_;
    bool up_ = false;
    std::vector<void *> wallocs_, wsallocs_;
    size_t wbytes_ = 0, wsbytes_ = 0;

    bf16 *fusion_w_ = nullptr;
    float *fusion_b_ = nullptr;
    DevStage enc0_, enc1_, mid_, dec1_, dec0_;
    DevNorm merge0_n_, merge1_n_;
    DevLinear merge0_r_, merge1_r_, expand1_, expand0_, skip1_, skip0_;
    bf16 *head_w_[3] = {nullptr, nullptr, nullptr};  // (Gc, c0) per time tap
    float *head_b_ = nullptr;
    int head_gc_ = 0;

    int h_ = 0, w_ = 0;
    float *x0_ = nullptr, *x1_ = nullptr, *x2_ = nullptr, *y1_ = nullptr, *y0_ = nullptr;
    bf16 *tb_ = nullptr, *qkv_ = nullptr, *att_ = nullptr, *hid_ = nullptr;
    float *G_ = nullptr;
};

}  // namespace cuda
}  // namespace denoise

#endif
