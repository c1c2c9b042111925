// Packing of one Swin block's MLP weights into the Hopper MLP probe's image (layout:
// swin_mlp_wgmma_image.h). Host code, once per block: every fc1 / fc2 weight read once, rounded
// to bf16 (round to nearest even, swin_bf16_bits: the fused kernel's rounding), written once.
#include "swin_mlp_wgmma_image.h"

#include <cstring>

#include "../denoise.h"
#include "swin_weight_image.h"

namespace denoise {
namespace cuda {

int swin_mlp_image_pack(const BlockW &b, int C, int HC, std::vector<uint8_t> *image, std::string *err) {
    auto bad = [&](const std::string &m) {
        *err = "swin_mlp_image_pack: " + m;
        return DENOISE_EINVAL;
    };
    const SwinMlpPlan P = swin_mlp_plan(C, HC, 2, 0);
    if (!P.ok) return bad("no kernel plan for C " + std::to_string(C) + " with hidden chunks of " + std::to_string(HC));
    const int Ch = 4 * C;
    if (!b.fc1.w || !b.fc1.b || !b.fc2.w || !b.fc2.b) return bad("fc1 / fc2 weight or bias missing");
    if (b.fc1.in != C || b.fc1.out != Ch || b.fc2.in != Ch || b.fc2.out != C)
        return bad("fc1 " + std::to_string(b.fc1.in) + " -> " + std::to_string(b.fc1.out) + ", fc2 " + std::to_string(b.fc2.in) +
                   " -> " + std::to_string(b.fc2.out) + ", expected " + std::to_string(C) + " -> " + std::to_string(Ch) +
                   " -> " + std::to_string(C));
    if (!b.norm2.g || !b.norm2.b || b.norm2.n != C) return bad("LayerNorm 2 missing or not of width C " + std::to_string(C));

    image->assign(P.image_bytes, 0);
    uint8_t *img = image->data();
    auto put_f32 = [&](uint32_t at, const float *src, int n) { std::memcpy(img + at, src, 4u * (uint32_t)n); };
    put_f32(0, b.norm2.g, C);
    put_f32(4u * C, b.norm2.b, C);
    put_f32(8u * C, b.fc1.b, Ch);
    put_f32(24u * C, b.fc2.b, C);
    for (int ch = 0; ch < P.NCH; ++ch) {
        uint8_t *w1 = img + swin_mlp_chunk_offset(P, ch), *w2 = w1 + P.w1_bytes;
        for (int k = 0; k < C; ++k)  // fc1: K = C (permuted input channels), N = HC
            for (int n = 0; n < HC; ++n) {
                const uint16_t h = swin_bf16_bits(b.fc1.w[(size_t)(ch * HC + n) * C + swin_mlp_fc1_channel(k)]);
                std::memcpy(w1 + swin_mlp_b_offset(k, n, HC), &h, 2);
            }
        for (int k = 0; k < HC; ++k)  // fc2: K = HC (hidden units of the chunk), N = C
            for (int n = 0; n < C; ++n) {
                const uint16_t h = swin_bf16_bits(b.fc2.w[(size_t)n * Ch + ch * HC + k]);
                std::memcpy(w2 + swin_mlp_b_offset(k, n, C), &h, 2);
            }
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise
