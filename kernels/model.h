// The model layer: a weight file loaded, validated against its own config and bound to the
// network's tensors, ready for any backend. Each backend packs these weights its own way (the
// CPU backend its conv/head repacks, the CUDA backend bf16 GEMM operands and weight images).
#ifndef DENOISE_MODEL_H
#define DENOISE_MODEL_H

#include <string>
#include <vector>

#include "model_config.h"
#include "safetensors.h"

namespace denoise {

// Views into Model::file (fp32, PyTorch layouts and names; weights/denoise_train/model.py).
struct LinearW { const float *w = nullptr, *b = nullptr; int in = 0, out = 0; };  // w (out, in) row-major; b may be null
struct NormW { const float *g = nullptr, *b = nullptr; int n = 0; };

struct BlockW {
    NormW norm1, norm2;
    LinearW qkv, proj, fc1, fc2;
    const float *rel_table = nullptr;  // relative_position_bias_table ((2 ws - 1)^2, heads)
    std::vector<float> rel_bias;       // the table gathered to (heads, N, N), N = ws^2 (gather_relative_bias)
    int shift = 0;
};

struct StageW {
    int C = 0, heads = 0;
    std::vector<BlockW> blocks;
};

struct ModelWeights {
    const float *fusion_w = nullptr;  // unet.fusion.weight (c0, Cin, 3, 3) OIHW
    const float *fusion_b = nullptr;  // (c0)
    StageW enc0, enc1, mid, dec1, dec0;
    NormW merge0_norm, merge1_norm;
    LinearW merge0_red, merge1_red, expand1, expand0, skip1, skip0;
    const float *head_w = nullptr;    // head.weight (Cout, c0, 3, 3, 3): out, in, time, y, x
    const float *head_b = nullptr;    // (Cout)
};

struct Model {
    StFile file;              // owns the tensors the views point into
    ModelConfig cfg;
    std::string config_json;  // __metadata__ "config"
    ModelWeights w;
    // Noise levels of the training (8-bit code values): __metadata__ "sigma_range" [lo, hi] when
    // present (sigma_range_from_file), else DENOISE_SIGMA_TRAINED_MIN..MAX (denoise.h).
    float sigma_lo = 0.f, sigma_hi = 0.f;
    bool sigma_range_from_file = false;

    Model() = default;
    Model(const Model &) = delete;  // w points into file
    Model &operator=(const Model &) = delete;
};

// Load `path`, check __metadata__ (format "denoise-swin", a version this engine runs, config, and
// "sigma_range" when present: a JSON list [lo, hi] with 0 <= lo < hi <= 255),
// every tensor's name and shape against what the config implies (no missing or extra tensor),
// and that every value is finite; bind m->w. Returns false with *err naming the file and, where
// one is to blame, the field or tensor ("w.safetensors: tensor 'unet.fusion.bias' has shape [31],
// expected [32]", "w.safetensors: tensor 'head.weight' holds NaN at element 17").
bool load_model(const std::string &path, Model *m, std::string *err);

// (table ((2 ws - 1)^2, heads)) -> (heads, N, N), N = ws^2, index (dy + ws - 1) (2 ws - 1) +
// (dx + ws - 1) with dy = y_q - y_k, dx = x_q - x_k (Swin's relative position index).
void gather_relative_bias(const float *table, int ws, int heads, float *out);

}  // namespace denoise

#endif
