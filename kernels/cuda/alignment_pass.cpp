// The CUDA backend's pass for model option align (class in backend_cuda_impl.h)
// (weights/denoise_train/align.py; the CPU backend's compute_features / queue_output):
//  - whole frames: a U-Net pass (its graph) first writes the centre's luma and box means (frame_in
//    with a luma plane only, luma_pyramid) into one whole-frame pyramid, then per other frame of
//    the window the same into a second one, matches it against the centre (block_match) and moves
//    it onto it (shift_tiles_s2d) into scratch frames that the fusion conv reads; the maps of taps
//    r-1 and r+1 stay with F_s in its feature ring buffer (after F); an output moves F_{t-1} and
//    F_{t+1} by window t's maps halved with floor on tiles of align_tile / 2 (shift_tiles) into two
//    scratch maps that the head reads. (Luma per pair from the native frame, not kept per slot:
//    2 pyramids instead of 2R + 3, 290 MiB less at 3840x2160, for 2r + 1 small conversions.)
//  - tiles: before an output's tiles, each of its windows gets its maps on the whole frame the same
//    way, kept with its recipe; each tile moves its domain's frames and feature maps through the
//    maps' part over the domain (reads clamped to the domain). The halo grows by the alignment's
//    reach, to 64 px + R rounded up to the tile unit (tile origins are multiples of 64 px and of
//    align_tile): docs/cuda.md "Model v2's alignment".
#include "backend_cuda_impl.h"

namespace denoise {
namespace cuda {

// The luma pyramid of frame f's padded frame (frame_in with a luma plane only, luma_pyramid).
int CudaBackend::luma_of(int64_t f, float *pyr) {
    Slot *s = frames_.at(f);
    TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width, spec_.height, 0,
                       0, spec_.hp, spec_.wp, nullptr, pyr));
    return cuda::luma_pyramid(ctx_, pyr, spec_.hp, spec_.wp);
}

// Whole frames: every frame of the window but the centre matched against it and moved onto it
// (win[k] then points at the moved frame); the maps of taps r-1 and r+1 into maps (2 maps).
// The caller marks the window's slots read (read_done).
int CudaBackend::align_window_whole(const std::vector<int64_t> &frames, const bf16 **win, int32_t *maps) {
    const int rr = cfg_.fusion_radius, T = cfg_.align_tile;
    TRY(luma_of(frames[rr], match_pyr_[0]));
    bf16 *moved = moved_;
    for (int k = 0; k < (int)frames.size(); ++k) {
        if (k == rr) continue;
        int32_t *map = k == rr - 1 ? maps : k == rr + 1 ? maps + map_ints_ : tap_map_;
        TRY(luma_of(frames[k], match_pyr_[1]));
        TRY(cuda::block_match(ctx_, match_pyr_[0], match_pyr_[1], spec_.hp, spec_.wp, cfg_.align, T, map));
        TRY(cuda::shift_tiles_s2d(ctx_, win[k], h2_, w2_, map, map_tw_, T, moved));
        win[k] = moved;
        moved += (size_t)h2_ * w2_ * 12;
    }
    return 0;
}

// Tiles: the recipe's 2r maps (taps but the centre, in order) on the whole frame, once.
int CudaBackend::recipe_maps(Recipe &r) {
    if (r.maps) return 0;
    if (!free_maps_.empty()) {
        r.maps = free_maps_.back();
        free_maps_.pop_back();
    } else {
        TRY(cuda::dev_alloc(ctx_, (void **)&r.maps, (size_t)recipe_map_bytes(), "a window's shift maps"));
    }
    const int rr = cfg_.fusion_radius;
    TRY(luma_of(r.frames[rr], match_pyr_[0]));
    for (int k = 0, j = 0; k < (int)r.frames.size(); ++k) {
        if (k == rr) continue;
        TRY(luma_of(r.frames[k], match_pyr_[1]));
        TRY(cuda::block_match(ctx_, match_pyr_[0], match_pyr_[1], spec_.hp, spec_.wp, cfg_.align, cfg_.align_tile,
                              r.maps + (size_t)j++ * map_ints_));
    }
    for (int64_t f : r.frames) TRY(read_done(frames_.at(f)));
    return 0;
}

void CudaBackend::drop_recipes(std::map<int64_t, Recipe>::iterator a, std::map<int64_t, Recipe>::iterator b) {
    for (auto it = a; it != b; ++it)
        if (it->second.maps) free_maps_.push_back(it->second.maps);
    recipes_.erase(a, b);
}

// F_{t-1}, F_{t+1} (F[0], F[2], (h, w, c0)) moved by maps[0], maps[1] (the window's
// full-resolution maps at the domain's first tile) halved with floor on tiles of align_tile / 2
// into the scratch maps; Fh gets F with those two replaced.
int CudaBackend::align_features(const bf16 *const F[3], const int32_t *const maps[2], int h, int w, const bf16 *Fh[3]) {
    const int c0 = cfg_.channels[0];
    const bf16 *in[2] = {F[0], F[2]};
    for (int j = 0; j < 2; ++j) {
        bf16 *out = moved_F_ + (size_t)j * h * w * c0;
        TRY(cuda::shift_tiles(ctx_, in[j], h, w, c0, maps[j], map_tw_, cfg_.align_tile / 2, true, out));
        Fh[2 * j] = out;
    }
    Fh[1] = F[1];
    return 0;
}

}  // namespace cuda
}  // namespace denoise
