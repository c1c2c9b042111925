// Packing of one Swin block's weights into the fused kernel's weight image (layout and fragment
// order: swin_weight_image.h). Runs once per block at load time on the host: reads each fp32
// parameter once and writes the image once (about 24 C^2 + 16 heads KB bytes; 1.6 MB at C = 256).
#include "swin_weight_image.h"

#include <cmath>
#include <cstring>

#include "../denoise.h"

namespace denoise {
namespace cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

void put_f32(std::vector<uint8_t> &img, uint32_t off, const float *src, int n, float scale = 1.0f) {
    for (int i = 0; i < n; ++i) {
        const float v = src[i] * scale;
        std::memcpy(img.data() + off + 4u * i, &v, 4);
    }
}

// W (N, K) row-major fp32 -> fragment units (swin_weight_image.h).
void put_gemm(std::vector<uint8_t> &img, uint32_t off, const float *W, int N, int K, bool kp_major) {
    const int NT = N / 8, KP = (K + 31) / 32;
    for (int nt = 0; nt < NT; ++nt)
        for (int kp = 0; kp < KP; ++kp) {
            uint8_t *unit = img.data() + off + 512u * swin_gemm_unit(kp_major, nt, kp, NT, KP);
            for (int lane = 0; lane < 32; ++lane) {
                const int g = lane / 4, t = lane % 4, n = 8 * nt + g, k0 = 32 * kp;
                // element e of the lane's 8: k step e / 4, register (e / 2) % 2, half e % 2
                for (int e = 0; e < 8; ++e) {
                    const int k = k0 + 16 * (e / 4) + 8 * ((e / 2) % 2) + 2 * t + (e % 2);
                    const uint16_t h = k < K ? swin_bf16_bits(W[(size_t)n * K + k]) : 0;
                    std::memcpy(unit + 16 * lane + 2 * e, &h, 2);
                }
            }
        }
}

// bias (heads, 64, 64) -> accumulator-fragment order, times log2(e).
void put_relb(std::vector<uint8_t> &img, uint32_t off, const float *bias, int heads) {
    for (int h = 0; h < heads; ++h)
        for (int mt = 0; mt < 4; ++mt)
            for (int lane = 0; lane < 32; ++lane) {
                const int g = lane / 4, t = lane % 4;
                for (int j = 0; j < 8; ++j)
                    for (int r = 0; r < 4; ++r) {
                        const int q = 16 * mt + g + 8 * (r / 2), k = 8 * j + 2 * t + (r % 2);
                        const float v = bias[((size_t)h * kSwinTokens + q) * kSwinTokens + k] * kLog2e;
                        const uint32_t o = off + 4u * ((((uint32_t)(h * 4 + mt) * 32 + lane) * 32) + j * 4 + r);
                        std::memcpy(img.data() + o, &v, 4);
                    }
            }
}

}  // namespace

const char *swin_section_name(int s) {
    static const char *const names[kSwinSections] = {"ln1_g",  "ln1_b", "qkv_w", "qkv_b", "relb",  "proj_w", "proj_b",
                                                     "ln2_g",  "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b"};
    return s >= 0 && s < kSwinSections ? names[s] : "?";
}

uint16_t swin_bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

int swin_weight_image_pack(const BlockW &b, int C, int heads, std::vector<uint8_t> *image, std::string *err) {
    auto bad = [&](const std::string &m) {
        *err = "swin_weight_image_pack: " + m;
        return DENOISE_EINVAL;
    };
    if (C < 16 || C > 256 || C % 16) return bad("C " + std::to_string(C) + " is not a multiple of 16 in 16..256");
    if (heads < 1 || C % heads || (C / heads) % 16 || C / heads > 64)
        return bad("C " + std::to_string(C) + " / heads " + std::to_string(heads) +
                   " is not a head dim that is a multiple of 16 up to 64");
    const int Ch = kSwinMlpRatio * C;
    struct Lin {
        const LinearW &l;
        const char *name;
        int in, out;
    };
    const Lin lins[] = {{b.qkv, "qkv", C, 3 * C}, {b.proj, "proj", C, C}, {b.fc1, "fc1", C, Ch}, {b.fc2, "fc2", Ch, C}};
    for (const Lin &l : lins) {
        if (!l.l.w || !l.l.b) return bad(std::string(l.name) + " weight or bias missing");
        if (l.l.in != l.in || l.l.out != l.out)
            return bad(std::string(l.name) + " is " + std::to_string(l.l.in) + " -> " + std::to_string(l.l.out) +
                       ", expected " + std::to_string(l.in) + " -> " + std::to_string(l.out));
    }
    if (!b.norm1.g || !b.norm1.b || !b.norm2.g || !b.norm2.b) return bad("a LayerNorm parameter is missing");
    if (b.norm1.n != C || b.norm2.n != C) return bad("LayerNorm width != C " + std::to_string(C));
    if (b.rel_bias.size() != (size_t)heads * kSwinTokens * kSwinTokens)
        return bad("relative position bias has " + std::to_string(b.rel_bias.size()) + " values, expected heads x 64 x 64 = " +
                   std::to_string(heads * kSwinTokens * kSwinTokens));

    const SwinImageLayout L = swin_image_layout(C, heads);
    image->assign(L.total(), 0);
    std::vector<uint8_t> &img = *image;
    put_f32(img, L.off[kSecLn1G], b.norm1.g, C);
    put_f32(img, L.off[kSecLn1B], b.norm1.b, C);
    put_gemm(img, L.off[kSecQkvW], b.qkv.w, 3 * C, C, false);
    put_f32(img, L.off[kSecQkvB], b.qkv.b, 3 * C);
    put_relb(img, L.off[kSecRelB], b.rel_bias.data(), heads);
    put_gemm(img, L.off[kSecProjW], b.proj.w, C, C, false);
    put_f32(img, L.off[kSecProjB], b.proj.b, C);
    put_f32(img, L.off[kSecLn2G], b.norm2.g, C);
    put_f32(img, L.off[kSecLn2B], b.norm2.b, C);
    put_gemm(img, L.off[kSecFc1W], b.fc1.w, Ch, C, false);
    put_f32(img, L.off[kSecFc1B], b.fc1.b, Ch);
    put_gemm(img, L.off[kSecFc2W], b.fc2.w, C, Ch, true);
    put_f32(img, L.off[kSecFc2B], b.fc2.b, C);
    return 0;
}

}  // namespace cuda
}  // namespace denoise
