// The model layer (model.h): a safetensors weight file checked against its own __metadata__
// config and bound to the network's tensors as fp32 views in PyTorch layouts.
//
// Checks, in order, each failure naming the file and the field or tensor to blame: the file itself
// (safetensors.cpp: header, dtypes, spans, truncation), __metadata__ "format" == "denoise-swin" and
// "version" "1" or "2" (model v2 files run here when their config uses only its sigma gate),
// "sigma_range" (optional: [lo, hi], the noise levels of the training), the "config" JSON
// (model_config.cpp: every field, what this engine implements),
// then every tensor the config implies (expected_tensors: name and shape, none missing, none extra)
// and every value of every tensor finite (a NaN or Inf weight would turn every output into NaN).
// The finiteness scan reads the ~0.5 M weights of model v1 once (about 1 ms).
#include "model.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "denoise.h"

namespace denoise {

namespace {

bool check_metadata(const StFile &f, const std::string &file, std::string *config, std::string *err) {
    auto meta = [&](const char *k) -> const std::string * {
        auto it = f.metadata.find(k);
        return it == f.metadata.end() ? nullptr : &it->second;
    };
    const std::string *fmt = meta("format"), *ver = meta("version"), *cj = meta("config");
    if (!fmt) {
        *err = file + ": __metadata__ has no 'format' (expected \"denoise-swin\")";
        return false;
    }
    if (*fmt != "denoise-swin") {
        *err = file + ": __metadata__ 'format' is \"" + *fmt + "\", expected \"denoise-swin\"";
        return false;
    }
    if (!ver) {
        *err = file + ": __metadata__ has no 'version' (expected \"1\" or \"2\")";
        return false;
    }
    if (*ver != "1" && *ver != "2") {
        *err = file + ": __metadata__ 'version' is \"" + *ver + "\", this engine runs versions \"1\" and \"2\"";
        return false;
    }
    if (!cj) {
        *err = file + ": __metadata__ has no 'config'";
        return false;
    }
    *config = *cj;
    return true;
}

// __metadata__ "sigma_range": absent -> the default range of denoise.h; else a JSON list of two
// numbers 0 <= lo < hi <= 255 (8-bit code values), anything else refuses the file.
bool read_sigma_range(const StFile &f, const std::string &file, Model *m, std::string *err) {
    m->sigma_lo = DENOISE_SIGMA_TRAINED_MIN;
    m->sigma_hi = DENOISE_SIGMA_TRAINED_MAX;
    m->sigma_range_from_file = false;
    auto it = f.metadata.find("sigma_range");
    if (it == f.metadata.end()) return true;
    const nlohmann::json v = nlohmann::json::parse(it->second, nullptr, false);
    if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()) {
        const double lo = v[0].get<double>(), hi = v[1].get<double>();
        if (lo >= 0 && lo < hi && hi <= 255) {
            m->sigma_lo = (float)lo;
            m->sigma_hi = (float)hi;
            m->sigma_range_from_file = true;
            return true;
        }
    }
    *err = file + ": __metadata__ 'sigma_range' is \"" + it->second +
           "\", expected a JSON list [lo, hi] of 8-bit code values with 0 <= lo < hi <= 255";
    return false;
}

// Names and shapes against the config; then every value finite, in state_dict order so that the
// first bad tensor of the file is the one named.
bool check_tensors(const StFile &f, const ModelConfig &cfg, const std::string &file, std::string *err) {
    const auto expected = expected_tensors(cfg);
    for (const auto &e : expected) {
        auto it = f.tensors.find(e.first);
        if (it == f.tensors.end()) {
            *err = file + ": tensor '" + e.first + "' is missing (expected shape " + shape_str(e.second) + ")";
            return false;
        }
        if (it->second.shape != e.second) {
            *err = file + ": tensor '" + e.first + "' has shape " + shape_str(it->second.shape) + ", expected " +
                   shape_str(e.second);
            return false;
        }
    }
    if (f.tensors.size() != expected.size()) {
        for (const auto &t : f.tensors) {
            bool known = std::any_of(expected.begin(), expected.end(), [&](const auto &e) { return e.first == t.first; });
            if (!known) {
                *err = file + ": unexpected tensor '" + t.first + "' " + shape_str(t.second.shape) +
                       " (not part of the model the config describes)";
                return false;
            }
        }
    }
    for (const auto &e : expected) {
        const std::vector<float> &d = f.tensors.at(e.first).data;
        for (size_t i = 0; i < d.size(); ++i) {
            if (std::isfinite(d[i])) continue;
            *err = file + ": tensor '" + e.first + "' holds " +
                   (std::isnan(d[i]) ? "NaN" : d[i] > 0 ? "+Inf" : "-Inf") + " at element " + std::to_string(i) +
                   " (weights must be finite)";
            return false;
        }
    }
    return true;
}

void bind(const StFile &f, const ModelConfig &cfg, ModelWeights *W) {
    auto T = [&](const std::string &n) { return f.tensors.at(n).data.data(); };
    auto lin = [&](const std::string &p, int in, int out, bool bias) {
        LinearW l;
        l.w = T(p + ".weight");
        l.b = bias ? T(p + ".bias") : nullptr;
        l.in = in;
        l.out = out;
        return l;
    };
    auto norm = [&](const std::string &p, int n) { return NormW{T(p + ".weight"), T(p + ".bias"), n}; };
    auto stage = [&](const std::string &name, int C, int heads, int depth) {
        StageW s;
        s.C = C;
        s.heads = heads;
        const int N = cfg.window * cfg.window;
        for (int i = 0; i < depth; ++i) {
            const std::string p = "unet." + name + ".blocks." + std::to_string(i) + ".";
            BlockW b;
            b.norm1 = norm(p + "norm1", C);
            b.norm2 = norm(p + "norm2", C);
            b.qkv = lin(p + "attn.qkv", C, 3 * C, true);
            b.proj = lin(p + "attn.proj", C, C, true);
            b.fc1 = lin(p + "fc1", C, cfg.mlp_ratio * C, true);
            b.fc2 = lin(p + "fc2", cfg.mlp_ratio * C, C, true);
            b.rel_table = T(p + "attn.relative_position_bias_table");
            b.rel_bias.resize((size_t)heads * N * N);
            gather_relative_bias(b.rel_table, cfg.window, heads, b.rel_bias.data());
            b.shift = (i % 2 == 1) ? cfg.shift : 0;
            s.blocks.push_back(std::move(b));
        }
        return s;
    };
    const int c0 = cfg.channels[0], c1 = cfg.channels[1], c2 = cfg.channels[2];
    W->fusion_w = T("unet.fusion.weight");
    W->fusion_b = T("unet.fusion.bias");
    W->enc0 = stage("enc0", c0, cfg.heads[0], cfg.depth_enc0);
    W->merge0_norm = norm("unet.merge0.norm", 4 * c0);
    W->merge0_red = lin("unet.merge0.reduction", 4 * c0, c1, false);
    W->enc1 = stage("enc1", c1, cfg.heads[1], cfg.depth_enc1);
    W->merge1_norm = norm("unet.merge1.norm", 4 * c1);
    W->merge1_red = lin("unet.merge1.reduction", 4 * c1, c2, false);
    W->mid = stage("mid", c2, cfg.heads[2], cfg.depth_mid);
    W->expand1 = lin("unet.expand1.expand", c2, 4 * c1, true);
    W->skip1 = lin("unet.skip1", 2 * c1, c1, true);
    W->dec1 = stage("dec1", c1, cfg.heads[1], cfg.depth_dec1);
    W->expand0 = lin("unet.expand0.expand", c1, 4 * c0, true);
    W->skip0 = lin("unet.skip0", 2 * c0, c0, true);
    W->dec0 = stage("dec0", c0, cfg.heads[0], cfg.depth_dec0);
    W->head_w = T("head.weight");
    W->head_b = T("head.bias");
}

}  // namespace

bool load_model(const std::string &path, Model *m, std::string *err) {
    const std::string file = base_name(path);
    if (!load_safetensors(path, &m->file, err)) return false;
    std::string config;
    if (!check_metadata(m->file, file, &config, err)) return false;
    if (!read_sigma_range(m->file, file, m, err)) return false;
    if (!parse_model_config(config, &m->cfg, err)) {
        *err = file + ": __metadata__ " + *err;
        return false;
    }
    if (!check_tensors(m->file, m->cfg, file, err)) return false;
    bind(m->file, m->cfg, &m->w);
    m->config_json = config;
    return true;
}

void gather_relative_bias(const float *table, int ws, int heads, float *out) {
    const int N = ws * ws, span = 2 * ws - 1;
    for (int h = 0; h < heads; ++h)
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < N; ++j) {
                const int dy = i / ws - j / ws + ws - 1, dx = i % ws - j % ws + ws - 1;
                out[((size_t)h * N + i) * N + j] = table[(size_t)(dy * span + dx) * heads + h];
            }
}

}  // namespace denoise
