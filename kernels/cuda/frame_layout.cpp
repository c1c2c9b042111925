// Native frame layouts and the host side of the frame copies (frame_layout.h).
// Traffic: copy_to_compact / copy_from_compact move row_bytes per row of each used plane (1.5 B
// per pixel for yuv420p, 3 for p010); the masked merge of partially covered planes works on
// 8-byte words (out = (out & ~m) | (src & m)). Both copies run on the process-wide thread pool
// of common/parallel.h (the CPU engine's thread count where one was opened, else the machine's
// cores) in bands of whole rows of at most kCopyBand bytes (one row where a row is longer): one
// thread's memcpy reaches only part of the host's memory bandwidth, and a 3840x2160 yuv420p frame
// (12.4 MB each way) sits on the caller's thread between two GPU passes.
#include "frame_layout.h"

#include "../common/parallel.h"

#include <algorithm>
#include <cstring>

namespace denoise {
namespace cuda {

FrameLayout frame_layout(const DenoisePixelFormat &fmt, int width, int height) {
    FrameLayout L;
    const int cw = -((-width) >> fmt.log2_chroma_w), ch = -((-height) >> fmt.log2_chroma_h);
    for (int c = 0; c < fmt.nb_components; ++c) {
        const DenoiseComponent &k = fmt.comp[c];
        if (k.plane < 0 || k.plane > 3) continue;
        const bool chroma = c > 0;
        const int w = chroma ? cw : width, h = chroma ? ch : height;
        PlaneLayout &p = L.plane[k.plane];
        p.used = true;
        p.row_bytes = std::max<int64_t>(p.row_bytes, k.offset + (int64_t)(w - 1) * k.step + fmt.bytes);
        p.rows = std::max(p.rows, h);
    }
    for (int c = 0; c < fmt.nb_components; ++c) {
        const DenoiseComponent &k = fmt.comp[c];
        if (k.plane < 0 || k.plane > 3) continue;
        PlaneLayout &p = L.plane[k.plane];
        p.bits.resize(p.row_bytes, 0);
        const int w = c > 0 ? cw : width;
        const uint32_t bits = fmt.is_float ? 0xffffffffu : ((1u << k.depth) - 1u) << k.shift;
        for (int x = 0; x < w; ++x)
            for (int b = 0; b < fmt.bytes; ++b) p.bits[k.offset + (int64_t)x * k.step + b] |= (uint8_t)(bits >> (8 * b));
    }
    int64_t off = 0;
    for (int i = 0; i < 4; ++i) {
        PlaneLayout &p = L.plane[i];
        if (!p.used) continue;
        p.covered = std::all_of(p.bits.begin(), p.bits.end(), [](uint8_t b) { return b == 0xff; });
        if (!p.covered) L.partial_planes |= 1u << i;
        p.pitch = (p.row_bytes + 255) / 256 * 256;
        p.offset = off;
        off += p.pitch * p.rows;
    }
    L.bytes = off;
    return L;
}

std::string check_image(const FrameLayout &L, const DenoiseImage &img, bool allow_negative) {
    for (int i = 0; i < 4; ++i) {
        const PlaneLayout &p = L.plane[i];
        if (!p.used) continue;
        if (!img.data[i]) return "plane " + std::to_string(i) + " is NULL";
        const ptrdiff_t ls = img.linesize[i];
        if (ls < 0 && !allow_negative)
            return "plane " + std::to_string(i) + " has a negative linesize (" + std::to_string(ls) +
                   "), which device memory does not allow";
        if ((ls < 0 ? -ls : ls) < p.row_bytes)
            return "plane " + std::to_string(i) + " linesize " + std::to_string(ls) + " is shorter than a row (" +
                   std::to_string(p.row_bytes) + " bytes)";
    }
    return "";
}

DevFrame compact_frame(const FrameLayout &L, uint8_t *base) {
    DevFrame f;
    for (int i = 0; i < 4; ++i)
        if (L.plane[i].used) {
            f.data[i] = base + L.plane[i].offset;
            f.pitch[i] = L.plane[i].pitch;
        }
    return f;
}

DevFrame image_frame(const DenoiseImage &img) {
    DevFrame f;
    for (int i = 0; i < 4; ++i) {
        f.data[i] = img.data[i];
        f.pitch[i] = img.linesize[i];
    }
    return f;
}

namespace {

constexpr int64_t kCopyBand = 256 << 10;

// fn(plane layout, plane index, y0, y1) over bands of rows of each used plane, on the thread pool.
template <class Fn>
void for_row_bands(const FrameLayout &L, Fn &&fn) {
    for (int i = 0; i < 4; ++i) {
        const PlaneLayout &p = L.plane[i];
        if (!p.used) continue;
        const int64_t band = std::max<int64_t>(1, kCopyBand / std::max<int64_t>(1, p.row_bytes));
        parallel_for(p.rows, band, [&](int64_t y0, int64_t y1) { fn(p, i, (int)y0, (int)y1); });
    }
}

}  // namespace

void copy_to_compact(const FrameLayout &L, const DenoiseImage &in, uint8_t *dst) {
    for_row_bands(L, [&](const PlaneLayout &p, int i, int y0, int y1) {
        for (int y = y0; y < y1; ++y)
            std::memcpy(dst + p.offset + (int64_t)y * p.pitch, in.data[i] + (ptrdiff_t)y * in.linesize[i],
                        (size_t)p.row_bytes);
    });
}

void copy_from_compact(const FrameLayout &L, const uint8_t *src, const DenoiseImage &out) {
    for_row_bands(L, [&](const PlaneLayout &p, int i, int y0, int y1) {
        const int64_t n = p.row_bytes, nw = n / 8;
        for (int y = y0; y < y1; ++y) {
            const uint8_t *s = src + p.offset + (int64_t)y * p.pitch;
            uint8_t *d = out.data[i] + (ptrdiff_t)y * out.linesize[i];
            if (p.covered) {
                std::memcpy(d, s, (size_t)n);
                continue;
            }
            const uint8_t *m = p.bits.data();
            for (int64_t k = 0; k < nw; ++k) {
                uint64_t a, b, mm;
                std::memcpy(&a, d + 8 * k, 8);
                std::memcpy(&b, s + 8 * k, 8);
                std::memcpy(&mm, m + 8 * k, 8);
                a = (a & ~mm) | (b & mm);
                std::memcpy(d + 8 * k, &a, 8);
            }
            for (int64_t k = 8 * nw; k < n; ++k) d[k] = (uint8_t)((d[k] & ~m[k]) | (s[k] & m[k]));
        }
    });
}

}  // namespace cuda
}  // namespace denoise
