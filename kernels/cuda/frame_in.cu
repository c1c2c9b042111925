// frame_in: a native frame (any DenoisePixelFormat) in device memory -> the network input of one
// domain of the padded frame (the whole padded frame, or a tile grown by its halo).
//
// Math (denoise.h "in", the CPU backend's conversion): for padded pixel (Y, X) the frame pixel
// (reflect(Y, H), reflect(X, W)) (model.py's reflect_index); v = code / (2^depth - 1) per
// component (floats as they are, NaN -> 0, +Inf -> 1, -Inf -> 0, clamped to [-1, 2]);
//   R'G'B' formats:   (R', G', B') = v of components 0, 1, 2 (float gray: R' = G' = B' = Y);
//   gray (integer):   R' = G' = B' = dec[0][0] Y + (dec[0][1] + dec[0][2]) neutral + dec_off[0];
//   Y'CbCr:           Cb, Cr upsampled bilinearly at the chroma location when subsampled (both
//                     axes through the taps, as the filter's make_taps), then
//                     (R', G', B') = dec (Y', Cb, Cr) + dec_off (pl_color_repr_decode's matrix);
// x = 2 v - 1; space-to-depth 2x2: token (ty, tx) channel c*4 + dy*2 + dx holds colour c of
// pixel (oy + 2 ty + dy, ox + 2 tx + dx); one bf16 rounding on the store. With a luma plane
// (model option align): also L = ((x_R + x_G) + x_B) / 3 of the fp32 x, before the rounding, per
// pixel (hd, wd) fp32 (kernels/cpu/block_match.cpp's luma of the CPU's fp32 input, bit for bit);
// without one the kernel is v1's, no extra work. 8 B more written per pixel with it.
// Every product and sum is rounded on its own (native.cuh), so before the bf16 store the values
// are the CPU backend's floats.
// Layout: one thread per output token (2 x 2 pixels, 12 bf16 = 24 B stored as three 8-byte
// words). Traffic per token: 4 luma (or R'G'B') samples and, for subsampled chroma, up to 16
// chroma samples (mostly L1/L2 hits: neighbouring tokens share them) read; 24 B written. At
// 3840x2176 (2.09 M tokens) about 50 MB written and 12 MB (yuv420p) read: tens of microseconds.
#include "native.cuh"

namespace denoise {
namespace cuda {

namespace {

struct InArgs {
    DevFrame f;
    DenoisePixelFormat fmt;
    FrameColor col;
    int W, H, cw, ch;
    int oy, ox, h2, w2;
};

__device__ __forceinline__ void pixel_rgb(const InArgs &a, int X, int Y, float rgb[3]) {
    const DenoisePixelFormat &fm = a.fmt;
    if (fm.nb_components == 1) {
        float v = load_value(a.f, fm.comp[0], fm.bytes, fm.is_float, X, Y);
        v = gray_value(a.col, v, fm.is_float);
        rgb[0] = rgb[1] = rgb[2] = v;
        return;
    }
    if (a.col.rgb) {
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const float v = load_value(a.f, fm.comp[c], fm.bytes, fm.is_float, X, Y);
            rgb[c] = fm.is_float ? sanitize(v) : v;
        }
        return;
    }
    float v[3];
    v[0] = load_value(a.f, fm.comp[0], fm.bytes, 0, X, Y);
    if (fm.log2_chroma_w || fm.log2_chroma_h) {
        const Tap tx = chroma_tap(X, a.cw, fm.log2_chroma_w, a.col.xpos);
        const Tap ty = chroma_tap(Y, a.ch, fm.log2_chroma_h, a.col.ypos);
#pragma unroll
        for (int c = 1; c < 3; ++c) {
            const DenoiseComponent &cc = fm.comp[c];
            const float r00 = load_value(a.f, cc, fm.bytes, 0, tx.i0, ty.i0);
            const float r01 = load_value(a.f, cc, fm.bytes, 0, tx.i1, ty.i0);
            const float r10 = load_value(a.f, cc, fm.bytes, 0, tx.i0, ty.i1);
            const float r11 = load_value(a.f, cc, fm.bytes, 0, tx.i1, ty.i1);
            v[c] = lerp_rn(lerp_rn(r00, r01, tx.w), lerp_rn(r10, r11, tx.w), ty.w);
        }
    } else {
        v[1] = load_value(a.f, fm.comp[1], fm.bytes, 0, X, Y);
        v[2] = load_value(a.f, fm.comp[2], fm.bytes, 0, X, Y);
    }
#pragma unroll
    for (int c = 0; c < 3; ++c) rgb[c] = __fadd_rn(dot3_rn(a.col.dec[c], v[0], v[1], v[2]), a.col.dec_off[c]);
}

// kX: write the s2d network input; kLuma: write the fp32 luma of the same pixels
template <bool kX, bool kLuma>
__global__ void frame_in_kernel(InArgs a, bf16 *__restrict__ out, float *__restrict__ luma) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)a.h2 * a.w2) return;
    const int ty = (int)(i / a.w2), tx = (int)(i % a.w2);
    __align__(8) bf16 v[12];
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int Y = reflect_index_dev(a.oy + 2 * ty + dy, a.H);
        float2 l;
#pragma unroll
        for (int dx = 0; dx < 2; ++dx) {
            const int X = reflect_index_dev(a.ox + 2 * tx + dx, a.W);
            float rgb[3];
            pixel_rgb(a, X, Y, rgb);
            float x[3];
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                x[c] = __fsub_rn(__fmul_rn(2.f, rgb[c]), 1.f);
                if (kX) v[c * 4 + dy * 2 + dx] = __float2bfloat16_rn(x[c]);
            }
            // the CPU's block_match: (r + g) + b, then / 3, on the fp32 input
            if (kLuma) (dx ? l.y : l.x) = __fdiv_rn(__fadd_rn(__fadd_rn(x[0], x[1]), x[2]), 3.f);
        }
        if (kLuma) *reinterpret_cast<float2 *>(luma + (size_t)(2 * ty + dy) * (2 * a.w2) + 2 * tx) = l;
    }
    if (!kX) return;
    uint2 *o = reinterpret_cast<uint2 *>(out + i * 12);
    const uint2 *s = reinterpret_cast<const uint2 *>(v);
    o[0] = s[0];
    o[1] = s[1];
    o[2] = s[2];
}

}  // namespace

int check_format(Ctx &ctx, const DevFrame &f, const DenoisePixelFormat &fmt, const char *who) {
    const std::string w = std::string(who) + ": ";
    if (!(fmt.nb_components == 1 || fmt.nb_components == 3))
        return fail(ctx, DENOISE_EINVAL, w + "nb_components " + std::to_string(fmt.nb_components) + " (1 or 3)");
    if (!(fmt.bytes == 1 || fmt.bytes == 2 || fmt.bytes == 4) || (fmt.bytes == 4) != (fmt.is_float != 0))
        return fail(ctx, DENOISE_EINVAL, w + "sample words of " + std::to_string(fmt.bytes) +
                                             " bytes (1, 2 or 4 = float32)");
    if (fmt.log2_chroma_w < 0 || fmt.log2_chroma_w > 2 || fmt.log2_chroma_h < 0 || fmt.log2_chroma_h > 2)
        return fail(ctx, DENOISE_EINVAL, w + "chroma subsampling beyond 4x");
    for (int c = 0; c < fmt.nb_components; ++c) {
        const DenoiseComponent &k = fmt.comp[c];
        if (k.plane < 0 || k.plane > 3 || !f.data[k.plane])
            return fail(ctx, DENOISE_EINVAL, w + "component " + std::to_string(c) + " in a missing plane");
        if (k.step < fmt.bytes || k.offset < 0 || k.step % fmt.bytes || k.offset % fmt.bytes ||
            (uintptr_t)f.data[k.plane] % fmt.bytes || f.pitch[k.plane] % fmt.bytes || f.pitch[k.plane] <= 0)
            return fail(ctx, DENOISE_EINVAL, w + "component " + std::to_string(c) +
                                                 " is not aligned to its sample words (plane pointer, pitch, "
                                                 "offset and step must be multiples of " +
                                                 std::to_string(fmt.bytes) + " bytes)");
        if (!fmt.is_float && (k.depth < 1 || k.depth > 16 || k.shift < 0 || k.shift + k.depth > 8 * fmt.bytes))
            return fail(ctx, DENOISE_EINVAL, w + "component " + std::to_string(c) + " depth " +
                                                 std::to_string(k.depth) + " shift " + std::to_string(k.shift) +
                                                 " does not fit its " + std::to_string(fmt.bytes) + "-byte word");
    }
    return 0;
}

int frame_in(Ctx &ctx, const DevFrame &src, const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H,
             int oy, int ox, int hd, int wd, bf16 *out, float *luma) {
    DN_REQUIRE(out || luma, "null pointer");
    int rc = check_format(ctx, src, fmt, "frame_in");
    if (rc) return rc;
    DN_REQUIRE(W >= 1 && H >= 1, "frame size " + std::to_string(W) + "x" + std::to_string(H));
    DN_REQUIRE(oy >= 0 && ox >= 0 && hd >= 2 && wd >= 2 && !(oy & 1) && !(ox & 1) && !(hd & 1) && !(wd & 1),
               "domain " + std::to_string(wd) + "x" + std::to_string(hd) + " at (" + std::to_string(ox) + ", " +
                   std::to_string(oy) + ") not even");
    DN_REQUIRE(((uintptr_t)out & 7) == 0 && ((uintptr_t)luma & 7) == 0, "out or luma not 8-byte aligned");
    InArgs a;
    a.f = src;
    a.fmt = fmt;
    a.col = col;
    a.W = W;
    a.H = H;
    a.cw = -((-W) >> fmt.log2_chroma_w);
    a.ch = -((-H) >> fmt.log2_chroma_h);
    a.oy = oy;
    a.ox = ox;
    a.h2 = hd / 2;
    a.w2 = wd / 2;
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)a.h2 * a.w2, 256, &blocks), "grid too large");
    if (!luma)
        frame_in_kernel<true, false><<<blocks, 256, 0, ctx.stream>>>(a, out, luma);
    else if (out)
        frame_in_kernel<true, true><<<blocks, 256, 0, ctx.stream>>>(a, out, luma);
    else
        frame_in_kernel<false, true><<<blocks, 256, 0, ctx.stream>>>(a, out, luma);
    return launch_check(ctx, "frame_in_kernel");
}

}  // namespace cuda
}  // namespace denoise
