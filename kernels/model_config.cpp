// Config JSON parsing and validation; see model_config.h.
#include "model_config.h"

#include <nlohmann/json.hpp>
#include <set>

namespace denoise {

using json = nlohmann::json;

namespace {

bool bad(std::string *err, const std::string &field, const json &v, const std::string &why) {
    *err = "config field '" + field + "' = " + v.dump() + ": " + why;
    return false;
}

bool get_int(const json &d, const char *k, int lo, int hi, int *out, std::string *err) {
    if (!d.contains(k)) { *err = std::string("config field '") + k + "' is missing"; return false; }
    const json &v = d[k];
    if (!v.is_number_integer()) return bad(err, k, v, "expected an integer");
    long long x = v.get<long long>();
    if (x < lo || x > hi) return bad(err, k, v, "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = (int)x;
    return true;
}

bool get_triple(const json &d, const char *k, int out[3], std::string *err) {
    if (!d.contains(k)) { *err = std::string("config field '") + k + "' is missing"; return false; }
    const json &v = d[k];
    if (!v.is_array() || v.size() != 3) return bad(err, k, v, "expected a list of 3 integers");
    for (int i = 0; i < 3; ++i) {
        if (!v[i].is_number_integer() || v[i].get<long long>() < 1 || v[i].get<long long>() > 4096)
            return bad(err, k, v, "expected a list of 3 integers in [1, 4096]");
        out[i] = v[i].get<int>();
    }
    return true;
}

}  // namespace

bool parse_model_config(const std::string &text, ModelConfig *c, std::string *err) {
    json d;
    try {
        d = json::parse(text);
    } catch (const std::exception &e) {
        *err = std::string("config is not valid JSON: ") + e.what();
        return false;
    }
    if (!d.is_object()) { *err = "config is not a JSON object"; return false; }

    static const std::set<std::string> known = {
        "channels", "heads", "depths", "window", "shift", "head_dim", "mlp_ratio", "fusion_radius",
        "head_radius", "s2d", "pad_multiple", "ln_eps", "temporal_radius", "format", "version", "sigma_gate",
        "align", "align_tile"};
    for (auto it = d.begin(); it != d.end(); ++it)
        if (!known.count(it.key()))
            return bad(err, it.key(), it.value(),
                       "unknown field (this engine implements model v1 and model v2's sigma gate and alignment; not "
                       "the per-frame encoder)");

    if (d.contains("format") && d["format"] != "denoise-swin") return bad(err, "format", d["format"], "expected \"denoise-swin\"");
    if (d.contains("version") && d["version"] != 1 && d["version"] != 2)
        return bad(err, "version", d["version"], "expected 1 or 2");
    if (d.contains("sigma_gate")) {
        const json &g = d["sigma_gate"];
        if (!g.is_number() || !(g.get<double>() >= 0) || g.get<double>() > 255)
            return bad(err, "sigma_gate", g, "expected a number in [0, 255] (8-bit code values)");
        c->sigma_gate = g.get<double>();
    }

    if (!get_triple(d, "channels", c->channels, err) || !get_triple(d, "heads", c->heads, err)) return false;
    if (!d.contains("depths")) { *err = "config field 'depths' is missing"; return false; }
    const json &dep = d["depths"];
    static const char *stages[5] = {"enc0", "enc1", "mid", "dec1", "dec0"};
    int *dst[5] = {&c->depth_enc0, &c->depth_enc1, &c->depth_mid, &c->depth_dec1, &c->depth_dec0};
    if (!dep.is_object() || dep.size() != 5) return bad(err, "depths", dep, "expected {enc0, enc1, mid, dec1, dec0}");
    for (int i = 0; i < 5; ++i) {
        if (!dep.contains(stages[i])) return bad(err, "depths", dep, std::string("missing stage '") + stages[i] + "'");
        if (!get_int(dep, stages[i], 1, 64, dst[i], err)) { *err = "depths: " + *err; return false; }
    }
    if (!get_int(d, "window", 1, 64, &c->window, err) || !get_int(d, "shift", 0, 64, &c->shift, err) ||
        !get_int(d, "head_dim", 1, 1024, &c->head_dim, err) || !get_int(d, "mlp_ratio", 1, 64, &c->mlp_ratio, err) ||
        !get_int(d, "fusion_radius", 0, 16, &c->fusion_radius, err) ||
        !get_int(d, "head_radius", 0, 16, &c->head_radius, err) || !get_int(d, "s2d", 1, 16, &c->s2d, err) ||
        !get_int(d, "pad_multiple", 1, 4096, &c->pad_multiple, err))
        return false;
    if (!d.contains("ln_eps")) { *err = "config field 'ln_eps' is missing"; return false; }
    if (!d["ln_eps"].is_number() || !(d["ln_eps"].get<double>() > 0) || d["ln_eps"].get<double>() > 1)
        return bad(err, "ln_eps", d["ln_eps"], "expected a number in (0, 1]");
    c->ln_eps = d["ln_eps"].get<double>();

    if (d.contains("align") && !get_int(d, "align", 0, 64, &c->align, err)) return false;
    if (d.contains("align_tile")) {
        int t = 0;
        if (!get_int(d, "align_tile", 4, 4096, &t, err)) return false;
        if (c->align) {   // without alignment the tile means nothing (model.py resets it)
            if (t % 4 || c->pad_multiple % t)
                return bad(err, "align_tile", d["align_tile"],
                           "expected a multiple of 4 dividing pad_multiple = " + std::to_string(c->pad_multiple));
            c->align_tile = t;
        }
    }

    if (c->s2d != 2) return bad(err, "s2d", d["s2d"], "this engine implements space-to-depth 2x2 only");
    if (c->head_radius != 1) return bad(err, "head_radius", d["head_radius"], "this engine implements the 3x3x3 head only (radius 1)");
    if (d.contains("temporal_radius") && d["temporal_radius"] != c->temporal_radius())
        return bad(err, "temporal_radius", d["temporal_radius"], "expected fusion_radius + head_radius = " + std::to_string(c->temporal_radius()));
    for (int i = 0; i < 3; ++i) {
        if (c->channels[i] != c->heads[i] * c->head_dim)
            return bad(err, "channels", d["channels"], "channels[" + std::to_string(i) + "] = " + std::to_string(c->channels[i]) +
                       " != heads[" + std::to_string(i) + "] * head_dim = " + std::to_string(c->heads[i] * c->head_dim));
        // the CPU decoder keeps y1 (h/2 x w/2 x c1) in F's storage (h x w x c0) (unet.cpp), and
        // the CUDA engine sizes its merge / expand chunks for c[i+1] <= 4 c[i] (network.cu)
        if (i && c->channels[i] > 4 * c->channels[i - 1])
            return bad(err, "channels", d["channels"], "a stage may have at most 4x the channels of the one before it");
    }
    if (c->shift <= 0 || c->shift >= c->window)
        return bad(err, "shift", d["shift"], "expected 0 < shift < window = " + std::to_string(c->window));
    if (c->pad_multiple % (c->s2d * 4 * c->window))
        return bad(err, "pad_multiple", d["pad_multiple"], "must be a multiple of s2d * 4 * window = " + std::to_string(c->s2d * 4 * c->window));
    return true;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig &c) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> v;
    const int64_t c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2];
    const int64_t ws2 = (2 * c.window - 1) * (2 * c.window - 1);
    auto stage = [&](const std::string &name, int64_t C, int64_t heads, int depth) {
        for (int b = 0; b < depth; ++b) {
            const std::string p = "unet." + name + ".blocks." + std::to_string(b) + ".";
            v.push_back({p + "norm1.weight", {C}});
            v.push_back({p + "norm1.bias", {C}});
            v.push_back({p + "attn.relative_position_bias_table", {ws2, heads}});
            v.push_back({p + "attn.qkv.weight", {3 * C, C}});
            v.push_back({p + "attn.qkv.bias", {3 * C}});
            v.push_back({p + "attn.proj.weight", {C, C}});
            v.push_back({p + "attn.proj.bias", {C}});
            v.push_back({p + "norm2.weight", {C}});
            v.push_back({p + "norm2.bias", {C}});
            v.push_back({p + "fc1.weight", {c.mlp_ratio * C, C}});
            v.push_back({p + "fc1.bias", {c.mlp_ratio * C}});
            v.push_back({p + "fc2.weight", {C, c.mlp_ratio * C}});
            v.push_back({p + "fc2.bias", {C}});
        }
    };
    v.push_back({"unet.fusion.weight", {c0, c.fusion_in_channels(), 3, 3}});
    v.push_back({"unet.fusion.bias", {c0}});
    stage("enc0", c0, c.heads[0], c.depth_enc0);
    v.push_back({"unet.merge0.norm.weight", {4 * c0}});
    v.push_back({"unet.merge0.norm.bias", {4 * c0}});
    v.push_back({"unet.merge0.reduction.weight", {c1, 4 * c0}});
    stage("enc1", c1, c.heads[1], c.depth_enc1);
    v.push_back({"unet.merge1.norm.weight", {4 * c1}});
    v.push_back({"unet.merge1.norm.bias", {4 * c1}});
    v.push_back({"unet.merge1.reduction.weight", {c2, 4 * c1}});
    stage("mid", c2, c.heads[2], c.depth_mid);
    v.push_back({"unet.expand1.expand.weight", {4 * c1, c2}});
    v.push_back({"unet.expand1.expand.bias", {4 * c1}});
    v.push_back({"unet.skip1.weight", {c1, 2 * c1}});
    v.push_back({"unet.skip1.bias", {c1}});
    stage("dec1", c1, c.heads[1], c.depth_dec1);
    v.push_back({"unet.expand0.expand.weight", {4 * c0, c1}});
    v.push_back({"unet.expand0.expand.bias", {4 * c0}});
    v.push_back({"unet.skip0.weight", {c0, 2 * c0}});
    v.push_back({"unet.skip0.bias", {c0}});
    stage("dec0", c0, c.heads[0], c.depth_dec0);
    v.push_back({"head.weight", {c.head_out_channels(), c0, 2 * c.head_radius + 1, 3, 3}});
    v.push_back({"head.bias", {c.head_out_channels()}});
    return v;
}

}  // namespace denoise
