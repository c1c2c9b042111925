// Weight loading: every refusal returns DENOISE_EMODEL (or ENOSYS for CUDA) and names the file and,
// where one is to blame, the tensor or metadata field; the happy path for F32 and BF16 files.
// Broken files are derived from tests/data/golden_weights.safetensors and written to a temp dir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../kernels/denoise.h"
#include "../kernels/safetensors.h"
#include "engine_test_util.h"

using denoise_test::data_dir;
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
        DenoiseParams p{path.c_str(), be, 0, 10.0f, 40, 24, 0};
        int rc = denoise_open(e, &p);
        std::string msg = denoise_last_error(e);
        denoise_free(&e);
        return {rc, msg};
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

TEST_F(Loader, AutoPicksCpuAndCudaIsNotBuilt) {
#ifdef DENOISE_HAVE_CUDA
    GTEST_SKIP() << "built with the CUDA engine: backend selection is checked by tests/gpu_check.cpp";
#endif
    DenoiseEngine *e = denoise_alloc();
    std::string path = data_dir() + "/golden_weights.safetensors";
    DenoiseParams p{path.c_str(), DENOISE_BACKEND_AUTO, 0, 10.0f, 40, 24, 0};
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_backend(e), DENOISE_BACKEND_CPU);
    EXPECT_NE(std::string(denoise_model_config(e)).find("\"channels\": [32, 64, 128]"), std::string::npos);
    denoise_free(&e);

    auto r = open(path, DENOISE_BACKEND_CUDA);
    EXPECT_EQ(r.first, DENOISE_ENOSYS);
    EXPECT_NE(r.second.find("built without CUDA"), std::string::npos) << r.second;
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

TEST_F(Loader, OtherArchitecture) {
    RawFile r = golden();
    r.meta["format"] = "denoise-unet";
    refused(write("fmt.safetensors", bytes_of(r)), {"fmt.safetensors", "'format'", "denoise-unet"});

    r = golden();
    r.meta["version"] = "2";
    refused(write("ver.safetensors", bytes_of(r)), {"ver.safetensors", "'version'"});

    r = golden();
    r.meta.erase("config");
    refused(write("nocfg.safetensors", bytes_of(r)), {"nocfg.safetensors", "'config'"});

    r = golden();
    json c = json::parse(r.meta["config"]);
    c["channels"] = {48, 96, 192};
    r.meta["config"] = c.dump();
    refused(write("c48.safetensors", bytes_of(r)), {"c48.safetensors", "config field 'channels'", "[48,96,192]"});

    // A self-consistent bigger model: the config passes, the tensors do not match it.
    c["channels"] = {64, 128, 256};
    c["heads"] = {2, 4, 8};
    r.meta["config"] = c.dump();
    refused(write("c64.safetensors", bytes_of(r)), {"c64.safetensors", "tensor 'unet.fusion.weight' has shape [32,61,3,3], expected [64,61,3,3]"});

    c = json::parse(golden().meta["config"]);
    c["window"] = 7;
    r.meta["config"] = c.dump();
    refused(write("win.safetensors", bytes_of(r)), {"win.safetensors", "'pad_multiple'"});

    c = json::parse(golden().meta["config"]);
    c["attention"] = "global";
    r.meta["config"] = c.dump();
    refused(write("unk.safetensors", bytes_of(r)), {"unk.safetensors", "'attention'", "unknown field"});

    r.meta["config"] = "{not json";
    refused(write("cjson.safetensors", bytes_of(r)), {"cjson.safetensors", "config is not valid JSON"});
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

    const int W = 40, H = 24, N = 2;
    std::vector<float> v((size_t)N * 3 * W * H);
    uint32_t s = 12345;
    for (auto &x : v) {
        s = s * 1664525u + 1013904223u;
        x = 0.5f + 0.3f * ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
    std::vector<float> outs[2];
    for (int k = 0; k < 2; ++k) {
        DenoiseEngine *e = denoise_alloc();
        DenoiseParams p{k ? p16.c_str() : p32.c_str(), DENOISE_BACKEND_CPU, 0, 20.0f, W, H, 0};
        ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
        for (int f = 0; f < N; ++f) {
            const float *pl[3] = {&v[((size_t)f * 3 + 0) * W * H], &v[((size_t)f * 3 + 1) * W * H], &v[((size_t)f * 3 + 2) * W * H]};
            ASSERT_EQ(denoise_push(e, pl, W), 0);
        }
        ASSERT_EQ(denoise_flush(e), 0);
        outs[k].resize(v.size());
        for (int f = 0; f < N; ++f) {
            float *d[3] = {&outs[k][((size_t)f * 3 + 0) * W * H], &outs[k][((size_t)f * 3 + 1) * W * H], &outs[k][((size_t)f * 3 + 2) * W * H]};
            ASSERT_EQ(denoise_pull(e, d, W), 0) << denoise_last_error(e);
        }
        denoise_free(&e);
    }
    // Compare the denoised values (input + delta), not the deltas alone.
    std::vector<float> a(v.size()), b(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        a[i] = v[i] + outs[1][i];
        b[i] = v[i] + outs[0][i];
    }
    auto d = denoise_test::compare(a.data(), b.data(), (int64_t)a.size());
    std::printf("  bf16 vs f32 weights: max_abs %.3e rel_l2 %.3e\n", d.max_abs, d.rel_l2);
    EXPECT_LT(d.rel_l2, 2e-2);
    EXPECT_GT(d.max_abs, 0.0);  // the file really was bf16
}

TEST_F(Loader, BadArguments) {
    DenoiseEngine *e = denoise_alloc();
    std::string path = data_dir() + "/golden_weights.safetensors";
    DenoiseParams p{path.c_str(), DENOISE_BACKEND_CPU, 0, 10.0f, 0, 24, 0};
    EXPECT_EQ(denoise_open(e, &p), DENOISE_EINVAL);
    p.width = 40;
    p.sigma = -1.0f;
    EXPECT_EQ(denoise_open(e, &p), DENOISE_EINVAL);
    p.sigma = 10.0f;
    float buf[40 * 24] = {};
    const float *pl[3] = {buf, buf, buf};
    EXPECT_EQ(denoise_push(e, pl, 40), DENOISE_EINVAL);  // not open
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_push(e, pl, 39), DENOISE_EINVAL);  // linesize < width
    EXPECT_EQ(denoise_set_sigma(e, 300.0f), DENOISE_EINVAL);
    float *d[3] = {buf, buf, buf};
    EXPECT_EQ(denoise_pull(e, d, 40), DENOISE_EAGAIN);
    EXPECT_EQ(denoise_flush(e), 0);
    EXPECT_EQ(denoise_pull(e, d, 40), DENOISE_EOF);
    denoise_free(&e);
    denoise_free(&e);  // safe on NULL
}

}  // namespace
