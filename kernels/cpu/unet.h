// The model v1 network on the CPU: weight binding, one U-Net pass (F_s) and the head.
// All maps fp32 NHWC; "h x w" below is the half-resolution grid (padded frame size / 2).
#ifndef DENOISE_CPU_UNET_H
#define DENOISE_CPU_UNET_H

#include <functional>
#include <string>
#include <vector>

#include "../model_config.h"
#include "../safetensors.h"

namespace denoise {
namespace cpu {

struct LinearW { const float *w = nullptr, *b = nullptr; int in = 0, out = 0; };
struct NormW { const float *g = nullptr, *b = nullptr; int n = 0; };

struct BlockW {
    NormW norm1, norm2;
    LinearW qkv, proj, fc1, fc2;
    std::vector<float> bias;  // relative position bias gathered to (heads, N, N)
    int shift = 0;
};

struct StageW {
    int C = 0, heads = 0;
    std::vector<BlockW> blocks;
};

struct UNetWeights {
    ModelConfig cfg;
    std::vector<float> fusion_wk;  // conv3x3_pack of unet.fusion.weight
    const float *fusion_b = nullptr;
    StageW enc0, enc1, mid, dec1, dec0;
    NormW merge0_norm, merge1_norm;
    LinearW merge0_red, merge1_red, expand1, expand0, skip1, skip0;
    std::vector<float> head_wt;    // head_pack of head.weight
    const float *head_b = nullptr;
};

// Check `f` against the tensor list `cfg` implies (names, shapes; no missing or extra tensor) and
// bind the weights. `f` must outlive `w` (w points into f's data). Returns false with *err naming
// the file and tensor, e.g. "w.safetensors: tensor 'unet.fusion.bias' has shape [31], expected [32]".
bool bind_weights(const StFile &f, const ModelConfig &cfg, UNetWeights *w, std::string *err);

// Buffers for one U-Net pass and the head at a given half-resolution grid h x w.
struct Workspace {
    int h = 0, w = 0;
    std::vector<float> conv, x0, x1, x2, a, b, qkv, hidden, head;
    void resize(const ModelConfig &cfg, int h, int w);  // throws std::bad_alloc
};

// Called after each stage with its name (as in golden_tensors: "fusion", "enc0.block0", "enc0",
// "merge0", ...), the NHWC map and its size. For tests; may be empty.
using StageHook = std::function<void(const char *name, const float *data, int h, int w, int C)>;

// The fusion input of F_s: frames[k] (k = 0..2r) are the s2d frames s-r..s+r, each (h, w, 12) in
// network units [-1, 1]; out (h, w, 12 (2r+1) + 1) with the constant sigma/255 channel last.
void build_fusion_input(const float *const *frames, int nframes, int h, int w, float sigma, float *out);

// One U-Net pass: fusion_in (h, w, Cin) NHWC -> F (h, w, channels[0]). h and w multiples of
// pad_multiple / 2. Uses ws (resized to h x w).
void unet_forward(const UNetWeights &W, const float *fusion_in, int h, int w, float *F, Workspace &ws,
                  const StageHook &hook = StageHook());

// Head: F[0..2] = F_{t-1}, F_t, F_{t+1} (h, w, channels[0]); centre = s2d of the noisy frame t
// (h, w, 12); out (h, w, 12) = clamp(conv3d(F) + bias + centre, -1, 1).
void head_forward(const UNetWeights &W, const float *const F[3], const float *centre, int h, int w, float *out,
                  Workspace &ws);

}  // namespace cpu
}  // namespace denoise

#endif
