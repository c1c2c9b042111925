// Model hyper-parameters as stored in a weight file's __metadata__ "config" (weights/denoise_train/model.py's
// Config.to_json()), their validation, and the tensor list (names and shapes) they imply.
#ifndef DENOISE_MODEL_CONFIG_H
#define DENOISE_MODEL_CONFIG_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace denoise {

struct ModelConfig {
    int channels[3] = {32, 64, 128};  // enc0/dec0, enc1/dec1, mid
    int heads[3] = {1, 2, 4};
    int depth_enc0 = 2, depth_enc1 = 2, depth_mid = 3, depth_dec1 = 2, depth_dec0 = 2;
    int window = 8;
    int shift = 4;
    int head_dim = 32;
    int mlp_ratio = 4;
    int fusion_radius = 2;  // frames s-r..s+r feed F_s
    int head_radius = 1;    // F_{t-1}, F_t, F_{t+1} feed the head
    int s2d = 2;
    int pad_multiple = 64;
    double ln_eps = 1e-5;
    // Model v2's sigma gate (8-bit code values; 0: none, model v1): the change of output t is
    // scaled by min(1, sigma_t / sigma_gate), sigma_t the sigma of F_t, so that sigma 0 returns the
    // input exactly (weights/denoise_train/model.py Config.sigma_gate; engine.cpp folds it into the amounts).
    double sigma_gate = 0.0;
    // Model v2's alignment (weights/denoise_train/align.py; weights/denoise_train/model.py Config.align): align > 0 moves every
    // frame of F_s's fusion window onto x_s by one whole-pixel shift (dy, dx), |dy|, |dx| <= align
    // px, per align_tile x align_tile tile of the padded frame, found by block matching of the noisy
    // frames' luma; the head reads F_{t-1} and F_{t+1} through window t's shifts of x_{t-1} and
    // x_{t+1}, halved (floor), on tiles of align_tile / 2. 0: none (model v1).
    int align = 0;
    int align_tile = 64;      // px, a multiple of 4 dividing pad_multiple

    int temporal_radius() const { return fusion_radius + head_radius; }
    int fusion_in_channels() const { return (2 * fusion_radius + 1) * 3 * s2d * s2d + 1; }
    int head_out_channels() const { return 3 * s2d * s2d; }
};

// Parse the config JSON and check that this engine can run it. Every field of model.py's Config
// must be present with the right type (model v2's optional fields: sigma_gate, a number in
// [0, 255]; align, an integer in [0, 64], and align_tile, a multiple of 4 dividing pad_multiple,
// 64 when absent; version 1 or 2), no unknown field is accepted (it could change the math: model v2's
// per-frame encoder, "fusion" / "frame_channels", is refused by name),
// and the values must fit what the CPU engine implements: s2d 2, head_radius 1,
// channels[i] = heads[i] * head_dim, channels[i+1] <= 4 channels[i] (patch merging 4C -> C' and
// expanding C -> 4C' for any widths: model.py PatchMerge, PatchExpand), 0 < shift < window, and
// pad_multiple a multiple of s2d * 4 * window (the mid stage must tile into whole windows).
// Returns false with *err naming the field ("config field 'channels' = [32,32,256]: ...").
bool parse_model_config(const std::string &json_text, ModelConfig *cfg, std::string *err);

// Every tensor the network needs, with its PyTorch name and shape, in state_dict order.
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig &cfg);

}  // namespace denoise

#endif
