// The network on the CPU, the U-Net and head that models v1 and v2 share (v2's alignment is in
// backend_cpu.cpp, its sigma gate in engine.cpp): the weight repacks, one U-Net pass (F_s) and
// the head.
// All maps fp32 NHWC; "h x w" below is the half-resolution grid (padded frame size / 2).
#ifndef DENOISE_CPU_UNET_H
#define DENOISE_CPU_UNET_H

#include <functional>
#include <string>
#include <vector>

#include "../model.h"

namespace denoise {
namespace cpu {

// The model as the CPU operators run it: the model layer's views (PyTorch layouts) plus the two
// weights this backend repacks, the fusion conv (conv3x3_pack) and the head (head_pack).
struct CpuModel {
    const Model *model = nullptr;
    std::vector<float> fusion_wk;  // unet.fusion.weight as 9 taps of (Cin, c0) row-major
    std::vector<float> head_wt;    // head.weight as 3 time taps of (c0, 9 Cout)
};

// Pack `m` (which must outlive `out`). Throws std::bad_alloc.
void pack_model(const Model &m, CpuModel *out);

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
void unet_forward(const CpuModel &M, const float *fusion_in, int h, int w, float *F, Workspace &ws,
                  const StageHook &hook = StageHook());

// Head: F[0..2] = F_{t-1}, F_t, F_{t+1} (h, w, channels[0]); centre = s2d of the noisy frame t
// (h, w, 12); out (h, w, 12) = clamp(conv3d(F) + bias + centre, -1, 1).
void head_forward(const CpuModel &M, const float *const F[3], const float *centre, int h, int w, float *out,
                  Workspace &ws);

}  // namespace cpu
}  // namespace denoise

#endif
