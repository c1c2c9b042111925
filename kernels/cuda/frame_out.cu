// frame_out: the network's change for one domain -> the output samples of its interior, in the
// frame's own format, added to the frame's original samples (denoise.h "out", the CPU backend's
// conversion).
//
// Math, per frame pixel (Y, X) of the interior: d = the change (R'G'B' units, [0,1] scale) at
// s2d token ((Y - oy)/2, (X - ox)/2) channel c*4 + (Y&1)*2 + (X&1) (depth-to-space and crop), then
//   R'G'B' formats:   (dR', dG', dB') scaled by the amounts (amount_rgb below), components 0..2;
//   gray (integer):   dY' = enc[0] . d, times the luma amount; float gray: the BT.709 luma of d;
//   Y'CbCr 4:4:4:     (dY', dCb, dCr) = enc d (the inverse of the decoding matrix, no offsets: a
//                     change is a difference), dY' times the luma amount, dCb, dCr the chroma one;
//   Y'CbCr 4:2:x:     dY' per pixel as above; per chroma sample (i, j) (frame_out_chroma_kernel)
//                     the adjoint of the bilinear upsampling, normalised by the weight the sample
//                     receives: D = sum_y wy(y, j) sum_x wx(x, i) d(y, x) / (sum_x wx(x, i) sum_y
//                     wy(y, j)), with wx, wy the taps frame_in used (1 - w for i0, w for i1), then
//                     (dCb, dCr) = enc rows 1, 2 of D times the chroma amount.
// Written as a gather per chroma sample: the contributing luma columns of sample i lie within
// [off + (i-1) sub - 1, off + (i+1) sub + 1] (plus everything below off for i = 0 and beyond
// for i = n-1), taken in increasing x and y with the same (1 - w, then w) terms as the filter's
// scatter, so the sums are the same floats.
// Integers: out = clip(code + floor(d (2^depth - 1) + noise), 0, 2^depth - 1), noise =
// blue_noise[((y + 41 p) & 63) * 64 + ((x + 23 p) & 63)] at sample (x, y), phase p = 0 for every
// component of R'G'B' frames and p = c for component c of Y'CbCr ones (backend.h); the other
// bits of the word (p010's low 6) kept from the original. A zero change keeps a sample
// bit-exact. Floats: out = orig + d where both are finite and d != 0, else the original bits (a
// non-finite sample, or a zero change, keeps the sample bit-exact).
// Layout: pixels one thread each (reads 3 change floats, the original word(s); writes 1 or 3
// words); chroma samples one thread each (reads the change of the (2 sub)^2 luma pixels that feed
// it, mostly from L1/L2, and 2 words; writes 2 words; its column taps computed once, in
// registers, and no division but the final normalisation). At 3840x2160 yuv420p: ~100 MB of
// change read (whole frame), 12 MB of samples read and written.
#include "native.cuh"

namespace denoise {
namespace cuda {

namespace {

struct OutArgs {
    const float *change;
    int oy, ox, w2;      // domain origin (px) and width in tokens
    DevFrame orig, dst;
    DenoisePixelFormat fmt;
    FrameColor col;
    int W, H, cw, ch;
    int iy0, ix0, ny, nx;  // interior pixels (clipped to the frame)
    int ci0, cj0, cnx, cny;  // interior chroma samples (subsampled Y'CbCr)
    Amount amt;
    const float *noise;
};

// d (R'G'B' change) at frame pixel (X, Y).
__device__ __forceinline__ void change_at(const OutArgs &a, int X, int Y, float d[3]) {
    const int ly = Y - a.oy, lx = X - a.ox;
    const float *p = a.change + ((int64_t)(ly >> 1) * a.w2 + (lx >> 1)) * 12 + (ly & 1) * 2 + (lx & 1);
    d[0] = p[0];
    d[1] = p[4];
    d[2] = p[8];
}

// Add change d to component c's sample (x, y): dither of phase p, clip, keep the word's other bits.
__device__ __forceinline__ void store_change(const OutArgs &a, int c, int p, int x, int y, float d) {
    const DenoiseComponent &k = a.fmt.comp[c];
    const uint8_t *po = sample_ptr(a.orig, k, x, y);
    uint8_t *pd = const_cast<uint8_t *>(sample_ptr(a.dst, k, x, y));
    const uint32_t raw = load_word(po, a.fmt.bytes);
    if (a.fmt.is_float) {
        const float o = __uint_as_float(raw);
        *reinterpret_cast<uint32_t *>(pd) = isfinite(o) && isfinite(d) && d != 0.f ? __float_as_uint(__fadd_rn(o, d)) : raw;
        return;
    }
    const uint32_t mask = (1u << k.depth) - 1u;
    const float noise = a.noise[((y + 41 * p) & 63) * 64 + ((x + 23 * p) & 63)];
    int v = (int)((raw >> k.shift) & mask) + (int)floorf(__fadd_rn(__fmul_rn(d, (float)mask), noise));
    v = min(max(v, 0), (int)mask);
    const uint32_t w = (raw & ~(mask << k.shift)) | ((uint32_t)v << k.shift);
    if (a.fmt.bytes == 1)
        *pd = (uint8_t)w;
    else
        *reinterpret_cast<uint16_t *>(pd) = (uint16_t)w;
}

// BT.709 luma of an R'G'B' change: (0.2126 dR' + 0.7152 dG') + 0.0722 dB'.
__device__ __forceinline__ float luma709(const float d[3]) {
    return __fadd_rn(__fadd_rn(__fmul_rn(0.2126f, d[0]), __fmul_rn(0.7152f, d[1])), __fmul_rn(0.0722f, d[2]));
}

// The amounts on an R'G'B' change: its BT.709 luma L scaled by `luma`, the rest (d - L) by
// `chroma`: d' = luma L + chroma (d - L); equal amounts scale d as a whole.
__device__ __forceinline__ void amount_rgb(const Amount &m, float d[3]) {
    if (m.luma == m.chroma) {
#pragma unroll
        for (int c = 0; c < 3; ++c) d[c] = __fmul_rn(d[c], m.luma);
        return;
    }
    const float L = luma709(d);
#pragma unroll
    for (int c = 0; c < 3; ++c) d[c] = __fadd_rn(__fmul_rn(m.luma, L), __fmul_rn(m.chroma, __fsub_rn(d[c], L)));
}

__global__ void frame_out_pixels_kernel(OutArgs a) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)a.ny * a.nx) return;
    const int Y = a.iy0 + (int)(i / a.nx), X = a.ix0 + (int)(i % a.nx);
    float d[3];
    change_at(a, X, Y, d);
    const DenoisePixelFormat &fm = a.fmt;
    if (fm.nb_components == 1) {
        const float dy = a.col.rgb ? luma709(d) : dot3_rn(a.col.enc[0], d[0], d[1], d[2]);
        store_change(a, 0, 0, X, Y, __fmul_rn(dy, a.amt.luma));
        return;
    }
    if (a.col.rgb) {
        amount_rgb(a.amt, d);
#pragma unroll
        for (int c = 0; c < 3; ++c) store_change(a, c, 0, X, Y, d[c]);  // one phase (backend.h)
        return;
    }
    store_change(a, 0, 0, X, Y, __fmul_rn(dot3_rn(a.col.enc[0], d[0], d[1], d[2]), a.amt.luma));
    if (!fm.log2_chroma_w && !fm.log2_chroma_h) {
        store_change(a, 1, 1, X, Y, __fmul_rn(dot3_rn(a.col.enc[1], d[0], d[1], d[2]), a.amt.chroma));
        store_change(a, 2, 2, X, Y, __fmul_rn(dot3_rn(a.col.enc[2], d[0], d[1], d[2]), a.amt.chroma));
    }
}

// Luma coordinates [lo, hi) that may feed chroma sample k of n on one axis (see the top note);
// hi - lo <= 2 sub + 4 (kMaxReach for sub <= 4).
__device__ __forceinline__ void gather_range(int k, int n, int full, int log2_sub, int pos, int *lo, int *hi) {
    const int sub = 1 << log2_sub;
    const float off = chroma_offset(log2_sub, pos);
    const int fl = (int)floorf(off), ce = (int)ceilf(off);
    *lo = k == 0 ? 0 : max(0, fl + (k - 1) * sub - 1);
    *hi = k == n - 1 ? full : min(full, ce + (k + 1) * sub + 2);
}
constexpr int kMaxReach = 2 * 4 + 4;  // luma columns of gather_range at sub = 4 (log2 <= 2)

__global__ void frame_out_chroma_kernel(OutArgs a) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (int64_t)a.cny * a.cnx) return;
    const int j = a.cj0 + (int)(t / a.cnx), i = a.ci0 + (int)(t % a.cnx);
    const int lw = a.fmt.log2_chroma_w, lh = a.fmt.log2_chroma_h;
    int x0, x1, y0, y1;
    gather_range(i, a.cw, a.W, lw, a.col.xpos, &x0, &x1);
    gather_range(j, a.ch, a.H, lh, a.col.ypos, &y0, &y1);
    // the column taps, once: bit k of m0 / m1 says luma column x0 + k reads sample i as its i0 /
    // i1 tap (weight 1 - w[k] / w[k]); in registers (every index below is a compile-time one)
    unsigned m0 = 0, m1 = 0;
    float wx[kMaxReach];
    float wsx = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxReach; ++k) {
        wx[k] = 0.f;
        if (x0 + k < x1) {
            const Tap tx = chroma_tap(x0 + k, a.cw, lw, a.col.xpos);
            wx[k] = tx.w;
            if (tx.i0 == i) {
                m0 |= 1u << k;
                wsx = __fadd_rn(wsx, __fsub_rn(1.f, tx.w));
            }
            if (tx.i1 == i) {
                m1 |= 1u << k;
                wsx = __fadd_rn(wsx, tx.w);
            }
        }
    }
    float acc[3] = {0.f, 0.f, 0.f};
    float wsy = 0.f;
    for (int y = y0; y < y1; ++y) {
        const Tap ty = chroma_tap(y, a.ch, lh, a.col.ypos);
        const bool u0 = ty.i0 == j, u1 = ty.i1 == j;
        if (!u0 && !u1) continue;
        if (u0) wsy = __fadd_rn(wsy, __fsub_rn(1.f, ty.w));
        if (u1) wsy = __fadd_rn(wsy, ty.w);
        float hr[3] = {0.f, 0.f, 0.f};
#pragma unroll
        for (int k = 0; k < kMaxReach; ++k) {
            const bool v0 = (m0 >> k) & 1u, v1 = (m1 >> k) & 1u;
            if (!v0 && !v1) continue;
            float d[3];
            change_at(a, x0 + k, y, d);
            const float w0 = __fsub_rn(1.f, wx[k]);
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                if (v0) hr[c] = __fadd_rn(hr[c], __fmul_rn(w0, d[c]));
                if (v1) hr[c] = __fadd_rn(hr[c], __fmul_rn(wx[k], d[c]));
            }
        }
        const float wy0 = __fsub_rn(1.f, ty.w);
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            if (u0) acc[c] = __fadd_rn(acc[c], __fmul_rn(wy0, hr[c]));
            if (u1) acc[c] = __fadd_rn(acc[c], __fmul_rn(ty.w, hr[c]));
        }
    }
    const float wt = __fmul_rn(wsx, wsy);
    const float inv = wt > 0.f ? __fdiv_rn(1.f, wt) : 0.f;
    float v[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) v[c] = __fmul_rn(acc[c], inv);
    store_change(a, 1, 1, i, j, __fmul_rn(dot3_rn(a.col.enc[1], v[0], v[1], v[2]), a.amt.chroma));
    store_change(a, 2, 2, i, j, __fmul_rn(dot3_rn(a.col.enc[2], v[0], v[1], v[2]), a.amt.chroma));
}

// dst word = (dst word & ~bits) | (src word & bits): the component's own bits only.
__global__ void copy_component_kernel(const uint8_t *__restrict__ sp, int64_t spitch, uint8_t *__restrict__ dp,
                                      int64_t dpitch, int offset, int step, int bytes, uint32_t bits, int w, int h) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (int64_t)w * h) return;
    const int y = (int)(t / w), x = (int)(t % w);
    const uint8_t *s = sp + y * spitch + offset + (int64_t)x * step;
    uint8_t *d = dp + y * dpitch + offset + (int64_t)x * step;
    if (bytes == 1) {
        *d = (uint8_t)((*d & ~bits) | (*s & bits));
    } else if (bytes == 2) {
        uint16_t *d16 = reinterpret_cast<uint16_t *>(d);
        *d16 = (uint16_t)((*d16 & ~bits) | (*reinterpret_cast<const uint16_t *>(s) & bits));
    } else {
        *reinterpret_cast<uint32_t *>(d) = *reinterpret_cast<const uint32_t *>(s);
    }
}

}  // namespace

int frame_out(Ctx &ctx, const float *change, int oy, int ox, int hd, int wd, const DevFrame &orig, const DevFrame &dst,
              const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H, int iy0, int iy1, int ix0, int ix1,
              Amount amount, const float *noise) {
    DN_REQUIRE(change && noise, "null pointer");
    int rc = check_format(ctx, orig, fmt, "frame_out (original)");
    if (!rc) rc = check_format(ctx, dst, fmt, "frame_out (output)");
    if (rc) return rc;
    DN_REQUIRE(W >= 1 && H >= 1, "frame size " + std::to_string(W) + "x" + std::to_string(H));
    DN_REQUIRE(oy >= 0 && ox >= 0 && hd >= 2 && wd >= 2 && !((oy | ox | hd | wd) & 1),
               "domain " + std::to_string(wd) + "x" + std::to_string(hd) + " at (" + std::to_string(ox) + ", " +
                   std::to_string(oy) + ") not even");
    const bool sub = fmt.nb_components == 3 && !col.rgb && (fmt.log2_chroma_w || fmt.log2_chroma_h);
    DN_REQUIRE(!sub || (fmt.log2_chroma_w <= 2 && fmt.log2_chroma_h <= 2),
               "chroma subsampling 2^" + std::to_string(fmt.log2_chroma_w) + " x 2^" +
                   std::to_string(fmt.log2_chroma_h) + " (at most 4 x 4)");
    iy1 = std::min(iy1, H);
    ix1 = std::min(ix1, W);
    DN_REQUIRE(iy0 >= 0 && ix0 >= 0 && iy0 < iy1 && ix0 < ix1, "empty interior");
    // every pixel read (the interior, and the chroma gather's reach) must be inside the domain
    const int my = sub ? (3 << fmt.log2_chroma_h) + 2 : 0, mx = sub ? (3 << fmt.log2_chroma_w) + 2 : 0;
    DN_REQUIRE(std::max(0, iy0 - my) >= oy && std::min(H, iy1 + my) <= oy + hd && std::max(0, ix0 - mx) >= ox &&
                   std::min(W, ix1 + mx) <= ox + wd,
               "interior [" + std::to_string(ix0) + ", " + std::to_string(ix1) + ") x [" + std::to_string(iy0) + ", " +
                   std::to_string(iy1) + ") (and the chroma reach) not inside the domain");
    OutArgs a;
    a.change = change;
    a.oy = oy;
    a.ox = ox;
    a.w2 = wd / 2;
    a.orig = orig;
    a.dst = dst;
    a.fmt = fmt;
    a.col = col;
    a.W = W;
    a.H = H;
    a.cw = -((-W) >> fmt.log2_chroma_w);
    a.ch = -((-H) >> fmt.log2_chroma_h);
    a.iy0 = iy0;
    a.ix0 = ix0;
    a.ny = iy1 - iy0;
    a.nx = ix1 - ix0;
    a.amt = amount;
    a.noise = noise;
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)a.ny * a.nx, 256, &blocks), "grid too large");
    frame_out_pixels_kernel<<<blocks, 256, 0, ctx.stream>>>(a);
    if ((rc = launch_check(ctx, "frame_out_pixels_kernel"))) return rc;
    if (!sub) return 0;
    const int sw = 1 << fmt.log2_chroma_w, sh = 1 << fmt.log2_chroma_h;
    a.ci0 = (ix0 + sw - 1) / sw;
    a.cj0 = (iy0 + sh - 1) / sh;
    a.cnx = std::min(a.cw, (ix1 + sw - 1) / sw) - a.ci0;
    a.cny = std::min(a.ch, (iy1 + sh - 1) / sh) - a.cj0;
    if (a.cnx <= 0 || a.cny <= 0) return 0;
    DN_REQUIRE(grid_1d((int64_t)a.cny * a.cnx, 128, &blocks), "grid too large");
    frame_out_chroma_kernel<<<blocks, 128, 0, ctx.stream>>>(a);
    return launch_check(ctx, "frame_out_chroma_kernel");
}

int frame_copy_components(Ctx &ctx, const DevFrame &src, const DevFrame &dst, const DenoisePixelFormat &fmt, int W,
                          int H, unsigned plane_mask, bool whole_words, cudaStream_t stream) {
    int rc = check_format(ctx, src, fmt, "frame_copy_components (source)");
    if (!rc) rc = check_format(ctx, dst, fmt, "frame_copy_components (output)");
    if (rc) return rc;
    DN_REQUIRE(W >= 1 && H >= 1, "frame size " + std::to_string(W) + "x" + std::to_string(H));
    for (int c = 0; c < fmt.nb_components; ++c) {
        const DenoiseComponent &k = fmt.comp[c];
        if (!(plane_mask & (1u << k.plane))) continue;
        const bool chroma = c > 0 && fmt.nb_components == 3;
        const int w = chroma ? -((-W) >> fmt.log2_chroma_w) : W, h = chroma ? -((-H) >> fmt.log2_chroma_h) : H;
        unsigned blocks;
        DN_REQUIRE(grid_1d((int64_t)w * h, 256, &blocks), "grid too large");
        const uint32_t bits = fmt.is_float || whole_words ? 0xffffffffu : ((1u << k.depth) - 1u) << k.shift;
        copy_component_kernel<<<blocks, 256, 0, stream>>>(src.data[k.plane], src.pitch[k.plane], dst.data[k.plane],
                                                              dst.pitch[k.plane], k.offset, k.step, fmt.bytes, bits, w,
                                                              h);
        if ((rc = launch_check(ctx, "copy_component_kernel"))) return rc;
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise
