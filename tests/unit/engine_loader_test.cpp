// Weight loading and opening: every refusal returns DENOISE_EMODEL (or ENOSYS for CUDA) and names
// the file and, where one is to blame, the tensor or metadata field; the happy path for F32 and
// BF16 files; backend choice and its reason; argument checks of the API.
// Broken files are derived from tests/data/golden_weights.safetensors and written to a temp dir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "denoise.h"
#include "safetensors.h"
#include "engine_test_util.h"
#include "pixfmt_descriptors.h"

using denoise_test::cpu_params;
using denoise_test::data_dir;
using denoise_test::pixfmt_descriptor;
using denoise_test::rgb_f32_format;
using denoise_test::rgb_f32_image;
using json = nlohmann::json;

namespace {

struct RawTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<unsigned char> bytes;
};

struct RawFile {
    std::map<std::string, std::string> meta;
    std::vector<RawTensor> tensors;

    RawTensor *find(const std::string &n) {
        for (auto &t : tensors)
            if (t.name == n) return &t;
        return nullptr;
    }
};

RawFile golden() {
    denoise::StFile f;
    std::string err;
    EXPECT_TRUE(denoise::load_safetensors(data_dir() + "/golden_weights.safetensors", &f, &err)) << err;
    RawFile r;
    r.meta = f.metadata;
    for (auto &kv : f.tensors) {
        RawTensor t{kv.first, "F32", kv.second.shape, {}};
        t.bytes.resize(kv.second.data.size() * 4);
        std::memcpy(t.bytes.data(), kv.second.data.data(), t.bytes.size());
        r.tensors.push_back(std::move(t));
    }
    return r;
}

std::string bytes_of(const RawFile &r, std::map<std::string, std::pair<uint64_t, uint64_t>> *offsets_override = nullptr) {
    json h = json::object();
    if (!r.meta.empty()) h["__metadata__"] = r.meta;
    std::string data;
    for (const auto &t : r.tensors) {
        uint64_t b = data.size();
        data.append((const char *)t.bytes.data(), t.bytes.size());
        std::pair<uint64_t, uint64_t> o{b, data.size()};
        if (offsets_override && offsets_override->count(t.name)) o = (*offsets_override)[t.name];
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {o.first, o.second}}};
    }
    std::string hs = h.dump();
    while (hs.size() % 8) hs += ' ';
    std::string out(8, '\0');
    uint64_t n = hs.size();
    for (int i = 0; i < 8; ++i) out[i] = (char)((n >> (8 * i)) & 0xff);
    return out + hs + data;
}

// n frames of W x H planar R'G'B' floats, 0.5 +- amp / 2, from an LCG seeded with `seed`.
std::vector<float> random_rgb(int n, int W, int H, uint32_t seed, float amp) {
    std::vector<float> v((size_t)n * 3 * W * H);
    for (auto &x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = 0.5f + amp * ((float)(seed >> 8) / 16777216.0f - 0.5f);
    }
    return v;
}

// The CPU engine with the weights at `path` at a fixed sigma over the frames `v` (random_rgb's
// layout): every frame pushed, flushed, every output pulled; the outputs in the same layout.
std::vector<float> denoise_rgb(const std::string &path, float sigma, const std::vector<float> &v, int W, int H) {
    const int N = (int)(v.size() / (3 * (size_t)W * H));
    const size_t plane = (size_t)W * H;
    std::vector<float> in = v, out(v.size());
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p = cpu_params(path.c_str(), sigma, W, H, rgb_f32_format());
    EXPECT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    for (int f = 0; f < N; ++f) {
        const DenoiseImage im = rgb_f32_image(&in[(f * 3 + 0) * plane], &in[(f * 3 + 1) * plane], &in[(f * 3 + 2) * plane], W);
        EXPECT_EQ(denoise_push(e, &im), 0) << denoise_last_error(e);
    }
    EXPECT_EQ(denoise_flush(e), 0);
    for (int f = 0; f < N; ++f) {
        const DenoiseImage o = rgb_f32_image(&out[(f * 3 + 0) * plane], &out[(f * 3 + 1) * plane], &out[(f * 3 + 2) * plane], W);
        EXPECT_EQ(denoise_pull(e, &o), 0) << denoise_last_error(e);
    }
    denoise_free(&e);
    return out;
}

class Loader : public ::testing::Test {
protected:
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/denoise_loader_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override {
        for (const auto &p : written) std::remove(p.c_str());
        rmdir(dir.c_str());
    }
    std::vector<std::string> written;

    std::string write(const std::string &name, const std::string &content) {
        std::string p = dir + "/" + name;
        std::ofstream(p, std::ios::binary).write(content.data(), (std::streamsize)content.size());
        written.push_back(p);
        return p;
    }

    // Open with `path`; returns the code and the error message.
    static std::pair<int, std::string> open(const std::string &path, DenoiseBackend be = DENOISE_BACKEND_CPU) {
        DenoiseEngine *e = denoise_alloc();
        DenoiseParams p = cpu_params(path.c_str(), 10.0f, 40, 24, rgb_f32_format());
        p.backend = be;
        int rc = denoise_open(e, &p);
        std::string msg = denoise_last_error(e);
        denoise_free(&e);
        return {rc, msg};
    }

    // The golden file with its config JSON merge-patched (RFC 7396, json::merge_patch) by `patch`
    // and, when `version` is given, its __metadata__ version set: written as `name`; its path.
    std::string with_config(const std::string &name, const json &patch, const char *version = nullptr) {
        RawFile r = golden();
        json c = json::parse(r.meta["config"]);
        c.merge_patch(patch);
        r.meta["config"] = c.dump();
        if (version) r.meta["version"] = version;
        return write(name, bytes_of(r));
    }

    // Expect a refusal naming every string of `needles`.
    static void refused(const std::string &path, std::initializer_list<std::string> needles) {
        auto r = open(path);
        EXPECT_EQ(r.first, DENOISE_EMODEL) << r.second;
        for (const auto &n : needles) EXPECT_NE(r.second.find(n), std::string::npos) << "'" << n << "' not in: " << r.second;
        std::printf("  refused: %s\n", r.second.c_str());
    }
};

TEST_F(Loader, HappyPathF32) {
    auto r = open(data_dir() + "/golden_weights.safetensors");
    EXPECT_EQ(r.first, 0) << r.second;
    EXPECT_EQ(r.second, "");
}

// The backend in use and why, for the filter's log line: never empty once open.
TEST_F(Loader, BackendReason) {
    std::string path = data_dir() + "/golden_weights.safetensors";
    for (DenoiseBackend b : {DENOISE_BACKEND_CPU, DENOISE_BACKEND_AUTO}) {
        DenoiseEngine *e = denoise_alloc();
        EXPECT_STREQ(denoise_backend_reason(e), "");
        EXPECT_EQ(denoise_latency(e), DENOISE_EINVAL);
        DenoiseParams p = cpu_params(path.c_str(), 10.0f, 40, 24, rgb_f32_format());
        p.backend = b;
        ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
        const std::string why = denoise_backend_reason(e);
        std::printf("  backend %s: %s\n", denoise_backend(e) == DENOISE_BACKEND_CPU ? "cpu" : "cuda", why.c_str());
        EXPECT_FALSE(why.empty());
        if (b == DENOISE_BACKEND_CPU) {
            EXPECT_EQ(why, "backend cpu requested");
        }
        EXPECT_GE(denoise_latency(e), 3);
        denoise_free(&e);
    }
}

TEST_F(Loader, AutoPicksCpuAndCudaIsNotBuilt) {
#ifdef DENOISE_HAVE_CUDA
    GTEST_SKIP() << "built with the CUDA engine: backend selection is checked by tests/gpu/api_check.cpp";
#endif
    DenoiseEngine *e = denoise_alloc();
    std::string path = data_dir() + "/golden_weights.safetensors";
    DenoiseParams p = cpu_params(path.c_str(), 10.0f, 40, 24, rgb_f32_format());
    p.backend = DENOISE_BACKEND_AUTO;
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_backend(e), DENOISE_BACKEND_CPU);
    EXPECT_STREQ(denoise_backend_reason(e), "built without CUDA");
    EXPECT_EQ(denoise_latency(e), 3);
    EXPECT_NE(std::string(denoise_model_config(e)).find("\"channels\": [32, 64, 128]"), std::string::npos);
    denoise_free(&e);

    auto r = open(path, DENOISE_BACKEND_CUDA);
    EXPECT_EQ(r.first, DENOISE_ENOSYS);
    EXPECT_NE(r.second.find("built without CUDA"), std::string::npos) << r.second;

    // frames in CUDA memory need the CUDA backend, whatever backend was asked for
    for (DenoiseBackend b : {DENOISE_BACKEND_AUTO, DENOISE_BACKEND_CPU}) {
        e = denoise_alloc();
        p.backend = b;
        p.memory = DENOISE_MEMORY_CUDA;
        EXPECT_EQ(denoise_open(e, &p), DENOISE_ENOSYS);
        const std::string msg = denoise_last_error(e);
        EXPECT_NE(msg.find("CUDA memory need the CUDA backend"), std::string::npos) << msg;
        std::printf("  refused: %s\n", msg.c_str());
        denoise_free(&e);
    }
}

TEST_F(Loader, MissingFile) { refused(dir + "/nope.safetensors", {"nope.safetensors", "cannot open"}); }

TEST_F(Loader, TruncatedFile) {
    std::string b = bytes_of(golden());
    // Cut in the middle of the data area: the tensor(s) past the cut are named.
    std::string p = write("cut.safetensors", b.substr(0, b.size() - 1000));
    refused(p, {"cut.safetensors", "truncated", "tensor '"});
    p = write("tiny.safetensors", b.substr(0, 5));
    refused(p, {"tiny.safetensors", "truncated"});
}

TEST_F(Loader, HeaderLengthBeyondFile) {
    std::string b = bytes_of(golden());
    uint64_t n = b.size() + 10;  // sane (< 64 MB) but past the end
    for (int i = 0; i < 8; ++i) b[i] = (char)((n >> (8 * i)) & 0xff);
    refused(write("hlen.safetensors", b), {"hlen.safetensors", "beyond the file size"});
    n = 1ull << 40;
    for (int i = 0; i < 8; ++i) b[i] = (char)((n >> (8 * i)) & 0xff);
    refused(write("hlen2.safetensors", b), {"hlen2.safetensors", "not sane"});
}

TEST_F(Loader, CorruptJson) {
    std::string b = bytes_of(golden());
    b[8] = '[';  // header must start with '{'
    b[9] = '!';
    refused(write("json.safetensors", b), {"json.safetensors", "corrupt JSON"});
}

TEST_F(Loader, WrongShape) {
    RawFile r = golden();
    RawTensor *t = r.find("unet.enc0.blocks.0.attn.qkv.weight");
    ASSERT_NE(t, nullptr);
    t->shape = {96, 33};
    t->bytes.resize(96 * 33 * 4, 0);
    refused(write("shape.safetensors", bytes_of(r)),
            {"shape.safetensors: tensor 'unet.enc0.blocks.0.attn.qkv.weight' has shape [96,33], expected [96,32]"});
}

TEST_F(Loader, WrongDtype) {
    RawFile r = golden();
    RawTensor *t = r.find("unet.fusion.bias");
    ASSERT_NE(t, nullptr);
    t->dtype = "I32";
    refused(write("dtype.safetensors", bytes_of(r)), {"dtype.safetensors", "tensor 'unet.fusion.bias'", "I32"});
}

TEST_F(Loader, SpanDoesNotMatchShape) {
    RawFile r = golden();
    RawTensor *t = r.find("head.bias");
    t->shape = {13};  // 52 bytes needed, 48 stored
    refused(write("span.safetensors", bytes_of(r)), {"span.safetensors", "tensor 'head.bias'", "needs 52 bytes"});
}

TEST_F(Loader, OverlappingTensors) {
    RawFile r = golden();
    std::map<std::string, std::pair<uint64_t, uint64_t>> o{{"unet.skip0.bias", {0, 128}}};  // 32 floats at byte 0
    refused(write("overlap.safetensors", bytes_of(r, &o)), {"overlap.safetensors", "overlaps", "unet.skip0.bias"});
}

TEST_F(Loader, MissingTensor) {
    RawFile r = golden();
    r.tensors.erase(std::remove_if(r.tensors.begin(), r.tensors.end(), [](const RawTensor &t) { return t.name == "unet.mid.blocks.2.fc2.bias"; }),
                    r.tensors.end());
    refused(write("missing.safetensors", bytes_of(r)), {"missing.safetensors: tensor 'unet.mid.blocks.2.fc2.bias' is missing"});
}

TEST_F(Loader, UnexpectedTensor) {
    RawFile r = golden();
    r.tensors.push_back({"unet.extra.weight", "F32", {2}, std::vector<unsigned char>(8, 0)});
    refused(write("extra.safetensors", bytes_of(r)), {"extra.safetensors", "unexpected tensor 'unet.extra.weight'"});
}

// A NaN or Inf anywhere in the weights would make every output NaN: refused, naming the tensor
// and the element (F32 and BF16 files alike).
TEST_F(Loader, NonFiniteWeights) {
    struct Case { const char *tensor; int64_t element; float value; const char *word; };
    const Case cases[] = {{"head.weight", 17, NAN, "NaN"},
                          {"unet.enc0.blocks.1.attn.relative_position_bias_table", 0, INFINITY, "+Inf"},
                          {"unet.mid.blocks.2.fc2.bias", 127, -INFINITY, "-Inf"}};
    int n = 0;
    for (const Case &c : cases) {
        RawFile r = golden();
        RawTensor *t = r.find(c.tensor);
        ASSERT_NE(t, nullptr) << c.tensor;
        ASSERT_LT((size_t)c.element * 4, t->bytes.size());
        std::memcpy(&t->bytes[(size_t)c.element * 4], &c.value, 4);
        const std::string name = "nonfinite" + std::to_string(n++) + ".safetensors";
        refused(write(name, bytes_of(r)), {name + ": tensor '" + c.tensor + "' holds " + c.word + " at element " +
                                           std::to_string(c.element)});
    }
    // BF16: 0x7fc0 is a NaN
    RawFile r = golden();
    for (auto &t : r.tensors) {
        std::vector<unsigned char> b(t.bytes.size() / 2);
        for (size_t i = 0; i < b.size() / 2; ++i) {
            b[2 * i] = t.bytes[4 * i + 2];
            b[2 * i + 1] = t.bytes[4 * i + 3];
        }
        if (t.name == "unet.fusion.bias") b[2 * 5] = 0xc0, b[2 * 5 + 1] = 0x7f;
        t.bytes = std::move(b);
        t.dtype = "BF16";
    }
    refused(write("nanbf16.safetensors", bytes_of(r)), {"nanbf16.safetensors: tensor 'unet.fusion.bias' holds NaN at element 5"});
}

// The noise levels of the training: __metadata__ "sigma_range" when present, else 0..55 (models
// v1 and v2); a malformed range refuses the file, naming the field.
TEST_F(Loader, SigmaRange) {
    auto range = [&](const std::string &path, float *lo, float *hi) {
        DenoiseEngine *e = denoise_alloc();
        DenoiseParams p = cpu_params(path.c_str(), 10.0f, 40, 24, rgb_f32_format());
        int rc = denoise_open(e, &p);
        EXPECT_EQ(rc, 0) << denoise_last_error(e);
        if (!rc) rc = denoise_model_sigma_range(e, lo, hi);
        denoise_free(&e);
        return rc;
    };
    float lo = -1, hi = -1;
    EXPECT_EQ(range(data_dir() + "/golden_weights.safetensors", &lo, &hi), 0);
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 55.0f);

    RawFile r = golden();
    r.meta["sigma_range"] = "[5, 30.5]";
    EXPECT_EQ(range(write("range.safetensors", bytes_of(r)), &lo, &hi), 1);
    EXPECT_EQ(lo, 5.0f);
    EXPECT_EQ(hi, 30.5f);

    DenoiseEngine *e = denoise_alloc();
    EXPECT_EQ(denoise_model_sigma_range(e, &lo, &hi), DENOISE_EINVAL);  // not open
    denoise_free(&e);

    int n = 0;
    for (const char *bad : {"[30, 5]", "[0, 300]", "[-1, 20]", "[10]", "{\"lo\": 0}", "0..55", "[0, \"55\"]"}) {
        r.meta["sigma_range"] = bad;
        const std::string name = "badrange" + std::to_string(n++) + ".safetensors";
        refused(write(name, bytes_of(r)), {name, "'sigma_range'", bad});
    }
}

TEST_F(Loader, OtherArchitecture) {
    RawFile r = golden();
    r.meta["format"] = "denoise-unet";
    refused(write("fmt.safetensors", bytes_of(r)), {"fmt.safetensors", "'format'", "denoise-unet"});

    r = golden();
    r.meta["version"] = "3";
    refused(write("ver.safetensors", bytes_of(r)), {"ver.safetensors", "'version'", "\"3\""});

    r = golden();
    r.meta.erase("config");
    refused(write("nocfg.safetensors", bytes_of(r)), {"nocfg.safetensors", "'config'"});

    refused(with_config("c48.safetensors", {{"channels", {48, 96, 192}}}),
            {"c48.safetensors", "config field 'channels'", "[48,96,192]"});

    // level 1 keeps y1 in the level-0 map's storage: at most 4x the channels of the level before
    refused(with_config("c256.safetensors", {{"channels", {32, 32, 256}}, {"heads", {1, 1, 8}}}),
            {"c256.safetensors", "config field 'channels'", "at most 4x"});
    refused(with_config("c160.safetensors", {{"channels", {32, 160, 160}}, {"heads", {1, 5, 5}}}),
            {"c160.safetensors", "config field 'channels'", "at most 4x"});

    // A self-consistent bigger model: the config passes, the tensors do not match it.
    refused(with_config("c64.safetensors", {{"channels", {64, 128, 256}}, {"heads", {2, 4, 8}}}),
            {"c64.safetensors", "tensor 'unet.fusion.weight' has shape [32,61,3,3], expected [64,61,3,3]"});

    refused(with_config("win.safetensors", {{"window", 7}}), {"win.safetensors", "'pad_multiple'"});
    refused(with_config("unk.safetensors", {{"attention", "global"}}), {"unk.safetensors", "'attention'", "unknown field"});

    // a config with model v2's per-frame encoder, which the engines do not run: refused, naming
    // the field
    refused(with_config("frame.safetensors", {{"fusion", "frame"}, {"frame_channels", 32}, {"version", 2}}, "2"),
            {"frame.safetensors", "'f", "per-frame encoder"});

    for (const char *bad : {"-1", "300", "\"2\""})
        refused(with_config("gate.safetensors", {{"sigma_gate", json::parse(bad)}}, "2"),
                {"gate.safetensors", "'sigma_gate'"});
    refused(with_config("cver.safetensors", {{"version", 3}}), {"cver.safetensors", "config field 'version'"});
    for (const char *bad : {"-1", "65", "2.5"})
        refused(with_config("align.safetensors", {{"align", json::parse(bad)}}, "2"), {"align.safetensors", "'align'"});
    for (const char *bad : {"6", "48", "0"})
        refused(with_config("atile.safetensors", {{"align", 24}, {"align_tile", json::parse(bad)}}, "2"),
                {"atile.safetensors", "'align_tile'"});

    r = golden();
    r.meta["config"] = "{not json";
    refused(write("cjson.safetensors", bytes_of(r)), {"cjson.safetensors", "config is not valid JSON"});
}

// Model v2's alignment (config "align" R, "align_tile", version 2): the CPU backend opens it
// (engine_golden_test's GoldenAlign checks what it computes).
TEST_F(Loader, AlignedModelOpensOnTheCpu) {
    for (int tile : {16, 64}) {
        const std::string name = "aligned" + std::to_string(tile) + ".safetensors";
        auto r = open(with_config(name, {{"align", 24}, {"align_tile", tile}, {"version", 2}}, "2"));
        EXPECT_EQ(r.first, 0) << r.second;
    }
}

// Model v2's sigma gate (config "sigma_gate" G, version 2): the change of output t is scaled by
// min(1, sigma / G). The golden weights with G = 8: sigma 0 returns every input sample exactly;
// sigma 4 gives half the change of the same weights without a gate (float format: the change
// d scaled by 0.5 before it is added, so within a float rounding of the sample); sigma 8 and
// above the ungated output bit for bit.
TEST_F(Loader, SigmaGate) {
    const std::string gated = with_config("gated.safetensors", {{"sigma_gate", 8.0}, {"version", 2}}, "2");
    const std::string plain = data_dir() + "/golden_weights.safetensors";

    const int W = 40, H = 24;
    const std::vector<float> v = random_rgb(3, W, H, 777, 0.4f);
    auto run = [&](const std::string &path, float sigma) { return denoise_rgb(path, sigma, v, W, H); };
    const std::vector<float> g0 = run(gated, 0.f);
    EXPECT_EQ(std::memcmp(g0.data(), v.data(), v.size() * 4), 0) << "sigma 0 must return the input exactly";

    const std::vector<float> g4 = run(gated, 4.f), p4 = run(plain, 4.f);
    double max_err = 0, max_change = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        max_err = std::max(max_err, std::fabs((double)(g4[i] - v[i]) - 0.5 * (double)(p4[i] - v[i])));
        max_change = std::max(max_change, std::fabs((double)(p4[i] - v[i])));
    }
    std::printf("  sigma 4, gate 8: max |gated change - half the plain change| %.3e (plain change max %.3e)\n",
                max_err, max_change);
    EXPECT_GT(max_change, 1e-3);  // the network changes something at sigma 4
    EXPECT_LT(max_err, 1e-6);

    const std::vector<float> g8 = run(gated, 8.f), p8 = run(plain, 8.f);
    EXPECT_EQ(std::memcmp(g8.data(), p8.data(), v.size() * 4), 0) << "sigma >= gate: the ungated output";
}

// BF16 file: every tensor rounded to nearest-even bf16. Loads, and gives the F32 file's result to
// bf16 weight precision (relative L2 < 2e-2 on a noisy random sequence).
TEST_F(Loader, HappyPathBf16) {
    RawFile r = golden();
    for (auto &t : r.tensors) {
        std::vector<unsigned char> b(t.bytes.size() / 2);
        for (size_t i = 0; i < b.size() / 2; ++i) {
            uint32_t u;
            std::memcpy(&u, &t.bytes[4 * i], 4);
            u += 0x7fff + ((u >> 16) & 1);
            b[2 * i] = (unsigned char)((u >> 16) & 0xff);
            b[2 * i + 1] = (unsigned char)(u >> 24);
        }
        t.bytes = std::move(b);
        t.dtype = "BF16";
    }
    std::string p16 = write("bf16.safetensors", bytes_of(r));
    std::string p32 = data_dir() + "/golden_weights.safetensors";

    const int W = 40, H = 24;
    const std::vector<float> v = random_rgb(2, W, H, 12345, 0.3f);
    const std::vector<float> outs[2] = {denoise_rgb(p32, 20.0f, v, W, H), denoise_rgb(p16, 20.0f, v, W, H)};
    ASSERT_FALSE(HasFailure());  // open, push, flush and pull all returned 0
    // Compare the denoised values (the float format's output), not the changes alone.
    const std::vector<float> &a = outs[1], &b = outs[0];
    auto d = denoise_test::compare(a.data(), b.data(), (int64_t)a.size());
    std::printf("  bf16 vs f32 weights: max_abs %.3e rel_l2 %.3e\n", d.max_abs, d.rel_l2);
    EXPECT_LT(d.rel_l2, 2e-2);
    EXPECT_GT(d.max_abs, 0.0);  // the file really was bf16
}

TEST_F(Loader, BadArguments) {
    DenoiseEngine *e = denoise_alloc();
    std::string path = data_dir() + "/golden_weights.safetensors";
    DenoiseParams p = cpu_params(path.c_str(), 10.0f, 0, 24, rgb_f32_format());
    EXPECT_EQ(denoise_open(e, &p), DENOISE_EINVAL);
    p.width = 40;
    p.sigma = -2.0f;  // -1 is DENOISE_SIGMA_AUTO
    EXPECT_EQ(denoise_open(e, &p), DENOISE_EINVAL);
    p.sigma = -0.5f;
    EXPECT_EQ(denoise_open(e, &p), DENOISE_EINVAL);
    p.sigma = 10.0f;
    // pixel formats outside the rules: the message names the field
    auto bad_format = [&](DenoisePixelFormat f, const char *needle) {
        DenoiseParams q = p;
        q.format = f;
        EXPECT_EQ(denoise_open(e, &q), DENOISE_EINVAL) << needle;
        EXPECT_NE(std::string(denoise_last_error(e)).find(needle), std::string::npos) << denoise_last_error(e);
    };
    DenoisePixelFormat f = rgb_f32_format();
    f.nb_components = 2;
    bad_format(f, "nb_components");
    f = rgb_f32_format();
    f.bytes = 2;
    bad_format(f, "bytes");
    f = rgb_f32_format();
    f.log2_chroma_w = 1;
    bad_format(f, "subsampled float");
    f = rgb_f32_format();
    f.is_float = 0;
    f.bytes = 1;
    for (auto &c : f.comp) c.step = 1, c.depth = 8;
    f.comp[1].depth = 10;
    bad_format(f, "depth");
    f.comp[1].depth = 8;
    f.comp[2].shift = 2;
    bad_format(f, "shift");
    f.comp[2].shift = 0;
    f.comp[0].plane = 4;
    bad_format(f, "plane");

    std::vector<float> buf(40 * 24 * 3);
    const DenoiseImage im = rgb_f32_image(&buf[0], &buf[40 * 24], &buf[2 * 40 * 24], 40);
    EXPECT_EQ(denoise_push(e, &im), DENOISE_EINVAL);  // not open
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_push(e, nullptr), DENOISE_EINVAL);
    DenoiseImage short_rows = rgb_f32_image(&buf[0], &buf[40 * 24], &buf[2 * 40 * 24], 39);
    EXPECT_EQ(denoise_push(e, &short_rows), DENOISE_EINVAL);  // linesize < the row
    EXPECT_NE(std::string(denoise_last_error(e)).find("linesize"), std::string::npos) << denoise_last_error(e);
    DenoiseImage no_plane = im;
    no_plane.data[1] = nullptr;
    EXPECT_EQ(denoise_push(e, &no_plane), DENOISE_EINVAL);
    EXPECT_EQ(denoise_set_sigma(e, 300.0f), DENOISE_EINVAL);
    const DenoiseAmount over = {1.0f, 1.5f, 1.0f}, nan_chroma = {1.0f, 1.0f, NAN}, neg = {-0.1f, 1.0f, 1.0f},
                        ok = {0.25f, 0.5f, 0.0f};
    EXPECT_EQ(denoise_set_amount(e, &over), DENOISE_EINVAL);
    EXPECT_NE(std::string(denoise_last_error(e)).find("luma 1.5"), std::string::npos) << denoise_last_error(e);
    EXPECT_EQ(denoise_set_amount(e, &nan_chroma), DENOISE_EINVAL);
    EXPECT_EQ(denoise_set_amount(e, &neg), DENOISE_EINVAL);
    EXPECT_EQ(denoise_set_amount(e, &ok), 0);
    EXPECT_EQ(denoise_set_amount(e, nullptr), 0);
    std::vector<float> obuf(buf.size());
    const DenoiseImage out = rgb_f32_image(&obuf[0], &obuf[40 * 24], &obuf[2 * 40 * 24], 40);
    EXPECT_EQ(denoise_pull(e, &out), DENOISE_EAGAIN);
    EXPECT_EQ(denoise_flush(e), 0);
    EXPECT_EQ(denoise_pull(e, &out), DENOISE_EOF);
    denoise_free(&e);
    denoise_free(&e);  // safe on NULL
}

// The colour system must be R'G'B' or a Y'CbCr matrix; R'G'B' is never subsampled.
TEST_F(Loader, BadColourSystems) {
    DenoiseEngine *e = denoise_alloc();
    std::string path = data_dir() + "/golden_weights.safetensors";
    const DenoisePixelFormat f = pixfmt_descriptor("yuv420p").f;
    DenoiseParams p = cpu_params(path.c_str(), 10.0f, 40, 24, f);
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    std::vector<uint8_t> y(40 * 24, 100), u(20 * 12, 128), v(20 * 12, 128);
    DenoiseImage im{};
    im.data[0] = y.data();
    im.data[1] = u.data();
    im.data[2] = v.data();
    im.linesize[0] = 40;
    im.linesize[1] = im.linesize[2] = 20;
    for (enum pl_color_system sys : {PL_COLOR_SYSTEM_UNKNOWN, PL_COLOR_SYSTEM_BT_2020_C, PL_COLOR_SYSTEM_BT_2100_PQ,
                                     PL_COLOR_SYSTEM_RGB}) {
        im.color.repr.sys = sys;
        EXPECT_EQ(denoise_push(e, &im), DENOISE_EINVAL) << (int)sys;
        std::printf("  refused: %s\n", denoise_last_error(e));
    }
    EXPECT_EQ(denoise_pending(e), 0);
    im.color.repr.sys = PL_COLOR_SYSTEM_BT_709;
    im.color.repr.levels = PL_COLOR_LEVELS_LIMITED;
    EXPECT_EQ(denoise_push(e, &im), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_pending(e), 1);
    denoise_free(&e);
}

}  // namespace
